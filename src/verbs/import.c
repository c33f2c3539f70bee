// SPDX-License-Identifier: MIT
/*
 * Shared PD, MR and DM: ibv_import_device(3), ibv_import_pd(3),
 * ibv_import_mr(3), ibv_import_dm and their unimports (docs/import.md).
 *
 * With a kernel, a context's cmd_fd is its uverbs file; a dup of it
 * (dup(), SCM_RIGHTS) imported makes a second context on the same file,
 * and an object of that file is imported by its handle: the very kernel
 * object, same L_Key/R_Key, same PD for protection.  softhca's cmd_fd is
 * a memfd per opened context, and the "file" is struct shca_ufile: every
 * context opened on it or imported from a dup of it shares it, and an
 * import names the object its handle names in that file.
 *
 * An imported object is a proxy (struct shca_proxy): a public struct in
 * the importing context, linked as an alias of the object (handle.c), so
 * that every verb given the proxy acts on the object itself, with the
 * object's rules: its PD identity (MRs and QPs are compared by the PD's
 * handle), its keys, its bounds.  Nothing is copied.
 *
 * The kernel's rules kept:
 *   - an import takes no reference: the object lives until someone
 *     destroys it, through the original or through an import (the man
 *     page: "Once destroy is done no other process can touch the object
 *     except for unimport"); from then on the imports name nothing
 *     (ENOENT or the verb's error) and only unimport is left for them;
 *   - unimport forgets the proxy, never the object;
 *   - a handle that names no object of the file: ENOENT, as the kernel's
 *     object lookup; a cmd_fd that is no command file at all: EINVAL, as
 *     rdma-core's fstat test.
 *
 * What differs (docs/import.md): the file is this process's.  A cmd_fd
 * of softhca received from another process names a context softhca
 * cannot reach (its objects are in that process's memory; a proxy here
 * would need that process's protection checks on every access, and an
 * L_Key used here names memory this process does not own): EOPNOTSUPP.
 * The same for a dup of a context that is closed: closing the context
 * that opened the file destroys its objects, where the kernel would keep
 * them while a dup of the file is open.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "shca.h"

struct shca_ufile {
	struct shca_device *dev;
	dev_t st_dev;			/* the memfd's identity */
	ino_t st_ino;
	pid_t pid;			/* the process that opened it */
	int refs;			/* contexts on it, under imp_lock */
	struct shca_ufile *next;
};

static pthread_mutex_t imp_lock = PTHREAD_MUTEX_INITIALIZER;
static struct shca_ufile *ufiles;	/* under imp_lock */
static struct shca_proxy *proxies;	/* under imp_lock */

/* ------------------------------------------------------------------ */
/* Command files                                                       */

struct shca_ufile *shca_ufile_new(struct shca_device *dev, int fd)
{
	struct shca_ufile *uf;
	struct stat st;

	if (fstat(fd, &st))
		return NULL;
	uf = calloc(1, sizeof(*uf));
	if (!uf)
		return NULL;
	uf->dev = dev;
	uf->st_dev = st.st_dev;
	uf->st_ino = st.st_ino;
	uf->pid = shca_getpid();
	uf->refs = 1;
	pthread_mutex_lock(&imp_lock);
	uf->next = ufiles;
	ufiles = uf;
	pthread_mutex_unlock(&imp_lock);
	return uf;
}

void shca_ufile_put(struct shca_ufile *uf)
{
	struct shca_ufile **pp;

	pthread_mutex_lock(&imp_lock);
	if (--uf->refs) {
		pthread_mutex_unlock(&imp_lock);
		return;
	}
	for (pp = &ufiles; *pp; pp = &(*pp)->next)
		if (*pp == uf) {
			*pp = uf->next;
			break;
		}
	pthread_mutex_unlock(&imp_lock);
	free(uf);
}

struct shca_device *shca_ufile_device(struct shca_ufile *uf)
{
	return uf->dev;
}

/* The open file st is, in this process, with a reference; or NULL.  A
 * child of fork() inherits the list but none of the files. */
static struct shca_ufile *ufile_find(const struct stat *st)
{
	struct shca_ufile *uf;

	pthread_mutex_lock(&imp_lock);
	for (uf = ufiles; uf; uf = uf->next)
		if (uf->st_dev == st->st_dev && uf->st_ino == st->st_ino &&
		    uf->pid == shca_getpid() && uf->refs > 0) {
			uf->refs++;
			break;
		}
	pthread_mutex_unlock(&imp_lock);
	return uf;
}

/* Is fd a softhca command file (a memfd of that name), of any process? */
static bool is_cmd_file(int fd)
{
	static const char want[] = "/memfd:" SHCA_CMD_FD_NAME " ";
	char path[64], link[128];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, link, sizeof(link) - 1);
	if (n < 0)
		return false;
	link[n] = '\0';
	return !strncmp(link, want, sizeof(want) - 1);
}

/* rdma-core: not a command file, EINVAL; softhca's of a context out of
 * reach (another process's, or closed), EOPNOTSUPP (top of file). */
struct ibv_context *ibv_import_device(int cmd_fd)
{
	struct shca_ufile *uf;
	struct ibv_context *ctx;
	struct stat st;

	if (cmd_fd < 0 || fstat(cmd_fd, &st) || !S_ISREG(st.st_mode))
		return SHCA_ERR_PTR(EINVAL);
	uf = ufile_find(&st);
	if (!uf)
		return SHCA_ERR_PTR(is_cmd_file(cmd_fd) ? EOPNOTSUPP : EINVAL);
	ctx = shca_context_import(uf, cmd_fd);
	if (!ctx) {
		int err = errno;

		shca_ufile_put(uf);
		errno = err;
	}
	return ctx;
}

/* ------------------------------------------------------------------ */
/* Imported objects                                                    */

/* A proxy of type t for (handle, ctx), linked to its object: the object
 * with a use taken in *o.  NULL with errno. */
static struct shca_proxy *proxy_new(enum shca_otype t,
				    struct ibv_context *ctx, uint32_t handle,
				    struct shca_obj **o)
{
	struct shca_proxy *p;

	if (!shca_ctx_live(ctx))
		return SHCA_ERR_PTR(EBADF);
	p = calloc(1, sizeof(*p));
	if (!p)
		return SHCA_ERR_PTR(ENOMEM);
	p->type = t;
	p->ctx = ctx;
	p->handle = handle;
	*o = shca_obj_alias(t, handle, ctx, p);
	if (!*o) {
		free(p);
		return SHCA_ERR_PTR(ENOENT);
	}
	pthread_mutex_lock(&imp_lock);
	p->next = proxies;
	proxies = p;
	pthread_mutex_unlock(&imp_lock);
	return p;
}

/* Take pub (of type t, or any if t is SHCA_OT_NUM) out of the proxies:
 * the proxy, or NULL if pub is none. */
static struct shca_proxy *proxy_take(const void *pub, enum shca_otype t)
{
	struct shca_proxy **pp, *p = NULL;

	pthread_mutex_lock(&imp_lock);
	for (pp = &proxies; *pp; pp = &(*pp)->next)
		if (&(*pp)->u == pub &&
		    (t == SHCA_OT_NUM || (*pp)->type == t)) {
			p = *pp;
			*pp = p->next;
			break;
		}
	pthread_mutex_unlock(&imp_lock);
	return p;
}

/* Forget a proxy: its object (if still there) loses the alias, and the
 * struct waits in the quarantine, so that a late use finds nothing. */
static void proxy_free(struct shca_proxy *p)
{
	shca_obj_unalias(p);
	shca_quarantine(p, sizeof(*p));
}

/* Only an import is unimported: the original goes by its destroy. */
static void unimport(const void *pub, enum shca_otype t, const char *what)
{
	struct shca_proxy *p;

	if (!pub)
		return;
	p = proxy_take(pub, t);
	if (!p) {
		shca_warn("ibv_unimport_%s: %p is no imported %s, left alone",
			  what, pub, what);
		return;
	}
	proxy_free(p);
}

void shca_import_destroyed(const void *pub)
{
	struct shca_proxy *p = proxy_take(pub, SHCA_OT_NUM);

	if (p)
		proxy_free(p);
}

void shca_import_close(struct ibv_context *ctx)
{
	struct shca_proxy *p;

	pthread_mutex_lock(&imp_lock);
	for (p = proxies; p; p = p->next)
		if (p->ctx == ctx)
			shca_obj_unalias(p);
	pthread_mutex_unlock(&imp_lock);
}

struct ibv_pd *ibv_import_pd(struct ibv_context *context, uint32_t pd_handle)
{
	struct shca_proxy *p;
	struct shca_obj *o;

	p = proxy_new(SHCA_OT_PD, context, pd_handle, &o);
	if (!p)
		return NULL;
	p->u.pd.context = context;
	p->u.pd.handle = pd_handle;
	shca_obj_put(o);
	return &p->u.pd;
}

void ibv_unimport_pd(struct ibv_pd *pd)
{
	unimport(pd, SHCA_OT_PD, "pd");
}

/* The MR's PD is the one it was registered in (its protection); pd
 * gives the context, as the kernel's QUERY_MR takes it.  addr is NULL
 * (the man page). */
struct ibv_mr *ibv_import_mr(struct ibv_pd *pd, uint32_t mr_handle)
{
	struct shca_pd *spd = shca_pd_lookup(pd, NULL);
	struct shca_proxy *p;
	struct shca_mr *mr;
	struct shca_obj *o;

	if (!spd)
		return SHCA_ERR_PTR(EINVAL);
	shca_obj_put(&spd->obj);
	p = proxy_new(SHCA_OT_MR, pd->context, mr_handle, &o);
	if (!p)
		return NULL;
	mr = container_of(o, struct shca_mr, obj);
	p->u.mr.context = pd->context;
	p->u.mr.pd = pd;
	p->u.mr.handle = mr_handle;
	p->u.mr.lkey = mr->ibmr.lkey;
	p->u.mr.rkey = mr->ibmr.rkey;
	p->u.mr.length = mr->ibmr.length;
	p->u.mr.addr = NULL;
	shca_obj_put(o);
	return &p->u.mr;
}

void ibv_unimport_mr(struct ibv_mr *mr)
{
	unimport(mr, SHCA_OT_MR, "mr");
}

struct ibv_dm *ibv_import_dm(struct ibv_context *context, uint32_t dm_handle)
{
	struct shca_proxy *p;
	struct shca_obj *o;

	p = proxy_new(SHCA_OT_DM, context, dm_handle, &o);
	if (!p)
		return NULL;
	shca_dm_init_pub(&p->u.dm, context);
	p->u.dm.handle = dm_handle;
	shca_obj_put(o);
	return &p->u.dm;
}

void ibv_unimport_dm(struct ibv_dm *dm)
{
	unimport(dm, SHCA_OT_DM, "dm");
}
