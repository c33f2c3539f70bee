// SPDX-License-Identifier: MIT
/*
 * rdma_getaddrinfo / rdma_freeaddrinfo: glibc's getaddrinfo, with the
 * hints and the first result converted as rdma-core converts them.  As
 * in rdma-core, a getaddrinfo failure returns its EAI_* code (callers
 * print it with gai_strerror), other failures -1 with errno.  There is no
 * ibacm: no route or connect data is ever added.
 */
#include <netdb.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/ib.h>

#include "cma.h"

static void to_ai_hints(const struct rdma_addrinfo *rai, struct addrinfo *ai)
{
	memset(ai, 0, sizeof(*ai));
	if (rai->ai_flags & RAI_PASSIVE)
		ai->ai_flags = AI_PASSIVE;
	if (rai->ai_flags & RAI_NUMERICHOST)
		ai->ai_flags |= AI_NUMERICHOST;
	if (rai->ai_family != AF_IB)
		ai->ai_family = rai->ai_family;
	switch (rai->ai_qp_type) {
	case IBV_QPT_RC:
	case IBV_QPT_UC:
	case IBV_QPT_XRC_SEND:
	case IBV_QPT_XRC_RECV:
		ai->ai_socktype = SOCK_STREAM;
		break;
	case IBV_QPT_UD:
		ai->ai_socktype = SOCK_DGRAM;
		break;
	default:
		break;
	}
	switch (rai->ai_port_space) {
	case RDMA_PS_TCP:
		ai->ai_protocol = IPPROTO_TCP;
		break;
	case RDMA_PS_IPOIB:
	case RDMA_PS_UDP:
		ai->ai_protocol = IPPROTO_UDP;
		break;
	case RDMA_PS_IB:
		if (ai->ai_socktype == SOCK_STREAM)
			ai->ai_protocol = IPPROTO_TCP;
		else if (ai->ai_socktype == SOCK_DGRAM)
			ai->ai_protocol = IPPROTO_UDP;
		break;
	default:
		break;
	}
}

static int copy_addr(struct sockaddr **dst, socklen_t *dst_len,
		     const struct sockaddr *src, socklen_t len)
{
	*dst = malloc(len);
	if (!*dst)
		return cm_err(-ENOMEM);
	memcpy(*dst, src, len);
	*dst_len = len;
	return 0;
}

/* An IPv6 address as an AF_IB one (RAI_FAMILY + AF_IB + RAI_NUMERICHOST) */
static int to_sib(enum rdma_port_space ps, struct sockaddr **dst,
		  socklen_t *dst_len, const struct sockaddr_in6 *src)
{
	struct sockaddr_ib *sib = calloc(1, sizeof(*sib));
	uint16_t port = ntohs(src->sin6_port);

	if (!sib)
		return cm_err(-ENOMEM);
	sib->sib_family = AF_IB;
	sib->sib_pkey = htons(0xffff);
	sib->sib_flowinfo = src->sin6_flowinfo;
	memcpy(&sib->sib_addr, &src->sin6_addr, sizeof(sib->sib_addr));
	sib->sib_sid = htobe64(((uint64_t)ps << 16) + port);
	if (ps)
		sib->sib_sid_mask = htobe64(RDMA_IB_IP_PS_MASK);
	if (port)
		sib->sib_sid_mask |= htobe64(RDMA_IB_IP_PORT_MASK);
	sib->sib_scope_id = src->sin6_scope_id;
	*dst = (struct sockaddr *)sib;
	*dst_len = sizeof(*sib);
	return 0;
}

static int from_ai(struct rdma_addrinfo *rai, const struct rdma_addrinfo *hints,
		   const struct addrinfo *ai)
{
	bool passive = ai->ai_flags & AI_PASSIVE;
	bool to_ib = (hints->ai_flags & RAI_FAMILY) &&
		     hints->ai_family == AF_IB &&
		     (hints->ai_flags & RAI_NUMERICHOST) &&
		     ai->ai_family == AF_INET6;
	struct sockaddr **addr = passive ? &rai->ai_src_addr :
					   &rai->ai_dst_addr;
	socklen_t *len = passive ? &rai->ai_src_len : &rai->ai_dst_len;
	char **canon = passive ? &rai->ai_src_canonname :
				 &rai->ai_dst_canonname;

	if (hints->ai_qp_type)
		rai->ai_qp_type = hints->ai_qp_type;
	else if (ai->ai_socktype == SOCK_STREAM)
		rai->ai_qp_type = IBV_QPT_RC;
	else if (ai->ai_socktype == SOCK_DGRAM)
		rai->ai_qp_type = IBV_QPT_UD;
	if (hints->ai_port_space)
		rai->ai_port_space = hints->ai_port_space;
	else if (ai->ai_protocol == IPPROTO_TCP)
		rai->ai_port_space = RDMA_PS_TCP;
	else if (ai->ai_protocol == IPPROTO_UDP)
		rai->ai_port_space = RDMA_PS_UDP;
	if (passive)
		rai->ai_flags = RAI_PASSIVE;
	if (ai->ai_canonname) {
		*canon = strdup(ai->ai_canonname);
		if (!*canon)
			return cm_err(-ENOMEM);
	}
	if (to_ib) {
		rai->ai_family = AF_IB;
		return to_sib(rai->ai_port_space, addr, len,
			      (const struct sockaddr_in6 *)ai->ai_addr);
	}
	rai->ai_family = ai->ai_family;
	return copy_addr(addr, len, ai->ai_addr, ai->ai_addrlen);
}

int rdma_getaddrinfo(const char *node, const char *service,
		     const struct rdma_addrinfo *hints,
		     struct rdma_addrinfo **res)
{
	static const struct rdma_addrinfo nohints;
	struct rdma_addrinfo *rai;
	int ret;

	if (!service && !node && !hints)
		return cm_err(-EINVAL);
	ret = cm_init();
	if (ret)
		return cm_err(ret);
	if (!res)
		return cm_err(-EINVAL);
	rai = calloc(1, sizeof(*rai));
	if (!rai)
		return cm_err(-ENOMEM);
	if (node || service) {
		struct addrinfo aih, *ai;

		if (hints) {
			to_ai_hints(hints, &aih);
			ret = getaddrinfo(node, service, &aih, &ai);
		} else {
			ret = getaddrinfo(node, service, NULL, &ai);
		}
		if (ret)
			goto err;
		ret = from_ai(rai, hints ? hints : &nohints, ai);
		freeaddrinfo(ai);
	} else {
		rai->ai_flags = hints->ai_flags;
		rai->ai_family = hints->ai_family;
		rai->ai_qp_type = hints->ai_qp_type;
		rai->ai_port_space = hints->ai_port_space;
		if (hints->ai_dst_len)
			ret = copy_addr(&rai->ai_dst_addr, &rai->ai_dst_len,
					hints->ai_dst_addr, hints->ai_dst_len);
	}
	if (ret)
		goto err;
	if (!rai->ai_src_len && hints && hints->ai_src_len) {
		ret = copy_addr(&rai->ai_src_addr, &rai->ai_src_len,
				hints->ai_src_addr, hints->ai_src_len);
		if (ret)
			goto err;
	}
	*res = rai;
	return 0;
err:
	rdma_freeaddrinfo(rai);
	return ret;
}

void rdma_freeaddrinfo(struct rdma_addrinfo *res)
{
	while (res) {
		struct rdma_addrinfo *next = res->ai_next;

		free(res->ai_connect);
		free(res->ai_route);
		free(res->ai_src_canonname);
		free(res->ai_dst_canonname);
		free(res->ai_src_addr);
		free(res->ai_dst_addr);
		free(res);
		res = next;
	}
}
