// SPDX-License-Identifier: MIT
/*
 * Objects that are not live are refused, never acted on (issue 12,
 * docs/conformance.md "Handles"): every verb called with a destroyed
 * object fails cleanly with the kernel's errno, a second destroy fails
 * instead of freeing twice, a handle the client changed names nothing,
 * and a copy of the public struct is not the object.
 *
 * Calling a verb with a destroyed object reads the memory it points to:
 * softhca keeps that memory (the public struct intact, the rest poisoned)
 * in a bounded quarantine, which is what makes these calls legal here,
 * also under AddressSanitizer.  A copy of the struct taken before the
 * destroy stands in where only the public fields should be read.
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "common.h"
#include "objs.h"

/* ------------------------------------------------------------------ */
/* Use after destroy, type by type                                     */

TEST(pd_after_dealloc)
{
	struct ibv_qp_init_attr qa;
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_ah_attr aa;
	struct ibv_pd *pd;
	struct objs o;

	objs_open(&o, NULL);
	pd = ibv_alloc_pd(o.ctx);
	ASSERT_NOT_NULL(pd);
	ASSERT_EQ(ibv_dealloc_pd(pd), 0);
	/* the kernel's DESTROY lookup: ENOENT, in errno too */
	ASSERT_ERRNO_RET(ibv_dealloc_pd(pd), ENOENT);
	ASSERT_ERRNO_RET(ibv_dealloc_pd(pd), ENOENT);
	/* REG_MR and CREATE_AH (write commands): EINVAL */
	ASSERT_NULL_ERRNO(ibv_reg_mr(pd, o.buf, 64, 0), EINVAL);
	aa = objs_ah_attr(o.ctx);
	ASSERT_NULL_ERRNO(ibv_create_ah(pd, &aa), EINVAL);
	/* the ioctl creates: ENOENT */
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = qa.recv_cq = o.cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 1;
	ASSERT_NULL_ERRNO(ibv_create_qp(pd, &qa), ENOENT);
	ASSERT_NULL_ERRNO(ibv_create_srq(pd, &sa), ENOENT);
	/* the live ones are untouched */
	objs_close(&o);
}

TEST(mr_after_dereg)
{
	struct ibv_mr *mr;
	struct objs o;

	objs_open(&o, NULL);
	mr = ibv_reg_mr(o.pd, o.buf, 64, 0);
	ASSERT_NOT_NULL(mr);
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	ASSERT_ERRNO_RET(ibv_dereg_mr(mr), ENOENT);
	/* REREG_MR looks the MR up for writing: ENOENT */
	errno = 0;
	ASSERT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			       IBV_ACCESS_LOCAL_WRITE),
		  IBV_REREG_MR_ERR_CMD);
	ASSERT_EQ(errno, ENOENT);
	/* the PD lost its reference once, not twice */
	ASSERT_EQ(ibv_dealloc_pd(o.pd), EBUSY);	/* o.mr, the QPs, ... */
	objs_close(&o);
}

TEST(cq_after_destroy)
{
	struct ibv_qp_init_attr qa;
	struct ibv_wc wc;
	struct ibv_cq *cq;
	struct objs o;

	objs_open(&o, NULL);
	cq = ibv_create_cq(o.ctx, 8, NULL, o.ch, 0);
	ASSERT_NOT_NULL(cq);
	ASSERT_EQ(ibv_destroy_cq(cq), 0);
	ASSERT_ERRNO_RET(ibv_destroy_cq(cq), ENOENT);
	/* the data path: no lock, no lookup, still a clean refusal */
	ASSERT_NEG_ERRNO(ibv_poll_cq(cq, 1, &wc), EINVAL);
	ASSERT_ERRNO_RET(ibv_req_notify_cq(cq, 0), EINVAL);
	ASSERT_ERRNO_RET(ibv_resize_cq(cq, 32), EINVAL);
	ibv_ack_cq_events(cq, 1);	/* counts nowhere, crashes nothing */
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = o.cq;
	qa.recv_cq = cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 1;
	ASSERT_NULL_ERRNO(ibv_create_qp(o.pd, &qa), ENOENT);
	qa.send_cq = cq;
	qa.recv_cq = o.cq;
	ASSERT_NULL_ERRNO(ibv_create_qp(o.pd, &qa), ENOENT);
	/* the channel counted the CQ once */
	objs_close(&o);
}

TEST(cq_ex_after_destroy)
{
	struct ibv_cq_init_attr_ex ca = { .cqe = 8 };
	struct ibv_poll_cq_attr pa = { 0 };
	struct ibv_cq_ex *cq;
	struct ibv_context *ctx = open_lo();

	cq = ibv_create_cq_ex(ctx, &ca);
	ASSERT_NOT_NULL(cq);
	ASSERT_EQ(ibv_start_poll(cq, &pa), ENOENT);	/* empty, live */
	ASSERT_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)), 0);
	ASSERT_ERRNO_RET(ibv_start_poll(cq, &pa), EINVAL);
	ASSERT_ERRNO_RET(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)), ENOENT);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

TEST(srq_after_destroy)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_recv_wr rwr = { .wr_id = 1 }, *bad = NULL;
	struct ibv_srq_attr attr;
	struct ibv_srq *srq;
	struct objs o;

	objs_open(&o, NULL);
	srq = ibv_create_srq(o.pd, &sa);
	ASSERT_NOT_NULL(srq);
	ASSERT_EQ(ibv_destroy_srq(srq), 0);
	ASSERT_ERRNO_RET(ibv_destroy_srq(srq), ENOENT);
	ASSERT_ERRNO_RET(ibv_query_srq(srq, &attr), EINVAL);
	attr.srq_limit = 1;
	ASSERT_ERRNO_RET(ibv_modify_srq(srq, &attr, IBV_SRQ_LIMIT), EINVAL);
	ASSERT_ERRNO_RET(ibv_post_srq_recv(srq, &rwr, &bad), EINVAL);
	ASSERT(bad == &rwr);
	ASSERT_NULL_ERRNO(objs_qp(&o, IBV_QPT_RC, srq), ENOENT);
	objs_close(&o);
}

TEST(qp_after_destroy)
{
	struct ibv_send_wr swr = { .wr_id = 1, .opcode = IBV_WR_SEND };
	struct ibv_recv_wr rwr = { .wr_id = 2 };
	struct ibv_send_wr *sbad = NULL;
	struct ibv_recv_wr *rbad = NULL;
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr attr;
	union ibv_gid mgid = { .raw = { 0xff, 0x0e } };
	struct ibv_qp *qp;
	struct objs o;

	objs_open(&o, NULL);
	qp = objs_qp(&o, IBV_QPT_UD, NULL);
	ASSERT_NOT_NULL(qp);
	objs_ud_rts(qp);
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
	ASSERT_ERRNO_RET(ibv_destroy_qp(qp), ENOENT);
	ASSERT_ERRNO_RET(ibv_query_qp(qp, &attr, IBV_QP_STATE, &init),
			 EINVAL);
	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_ERR;
	ASSERT_ERRNO_RET(ibv_modify_qp(qp, &attr, IBV_QP_STATE), EINVAL);
	ASSERT_ERRNO_RET(ibv_post_send(qp, &swr, &sbad), EINVAL);
	ASSERT(sbad == &swr);
	ASSERT_ERRNO_RET(ibv_post_recv(qp, &rwr, &rbad), EINVAL);
	ASSERT(rbad == &rwr);
	ASSERT_ERRNO_RET(ibv_attach_mcast(qp, &mgid, 0), EINVAL);
	ASSERT_ERRNO_RET(ibv_detach_mcast(qp, &mgid, 0), EINVAL);
	ASSERT_NULL(ibv_qp_to_qp_ex(qp));
	/* nothing reached the CQ */
	objs_close(&o);
}

TEST(qp_ex_builder_after_destroy)
{
	struct ibv_qp_init_attr_ex qa;
	struct ibv_qp_ex *qpx;
	struct ibv_qp *qp;
	struct objs o;

	objs_open(&o, NULL);
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = qa.recv_cq = o.cq;
	qa.qp_type = IBV_QPT_UD;
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 4;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	qa.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	qa.pd = o.pd;
	qa.send_ops_flags = IBV_QP_EX_WITH_SEND;
	qp = ibv_create_qp_ex(o.ctx, &qa);
	ASSERT_NOT_NULL(qp);
	qpx = ibv_qp_to_qp_ex(qp);
	ASSERT_NOT_NULL(qpx);
	objs_ud_rts(qp);
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
	/* the builder's calls do nothing; the batch ends in EINVAL */
	ibv_wr_start(qpx);
	qpx->wr_id = 7;
	ibv_wr_send(qpx);
	ibv_wr_set_ud_addr(qpx, o.ah, 1, 0x11111111);
	ibv_wr_set_sge(qpx, o.mr->lkey, (uintptr_t)o.buf, 8);
	ASSERT_ERRNO_RET(ibv_wr_complete(qpx), EINVAL);
	ibv_wr_abort(qpx);
	objs_close(&o);
}

TEST(ah_after_destroy)
{
	struct ibv_sge sge;
	struct ibv_send_wr wr, *bad = NULL;
	struct ibv_ah_attr aa;
	struct ibv_wc wc;
	struct ibv_ah *ah;
	struct objs o;

	objs_open(&o, NULL);
	aa = objs_ah_attr(o.ctx);
	ah = ibv_create_ah(o.pd, &aa);
	ASSERT_NOT_NULL(ah);
	ASSERT_EQ(ibv_destroy_ah(ah), 0);
	ASSERT_ERRNO_RET(ibv_destroy_ah(ah), ENOENT);
	/* a UD send through it is refused at post, nothing completes */
	memset(&wr, 0, sizeof(wr));
	sge.addr = (uintptr_t)o.buf;
	sge.length = 8;
	sge.lkey = o.mr->lkey;
	wr.wr_id = 3;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = o.ud->qp_num;
	wr.wr.ud.remote_qkey = 0x11111111;
	ASSERT_ERRNO_RET(ibv_post_send(o.ud, &wr, &bad), EINVAL);
	ASSERT(bad == &wr);
	ASSERT_EQ(ibv_poll_cq(o.cq, 1, &wc), 0);
	objs_close(&o);
}

TEST(channel_after_destroy)
{
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	void *cq_ctx;
	struct objs o;

	objs_open(&o, NULL);
	ch = ibv_create_comp_channel(o.ctx);
	ASSERT_NOT_NULL(ch);
	ASSERT_EQ(ibv_destroy_comp_channel(ch), 0);
	/* a channel is a file: EBADF, as for a closed one */
	ASSERT_ERRNO_RET(ibv_destroy_comp_channel(ch), EBADF);
	ASSERT_NEG_ERRNO(ibv_get_cq_event(ch, &cq, &cq_ctx), EBADF);
	ASSERT_NULL_ERRNO(ibv_create_cq(o.ctx, 4, NULL, ch, 0), EBADF);
	objs_close(&o);
}

/* ------------------------------------------------------------------ */
/* A closed context, and what it held                                  */

TEST(context_after_close)
{
	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	struct ibv_async_event ev;
	union ibv_gid gid;
	struct ibv_context *ctx = open_lo();

	ASSERT_EQ(ibv_close_device(ctx), 0);
	ASSERT_NEG_ERRNO(ibv_close_device(ctx), EBADF);
	ASSERT_NULL_ERRNO(ibv_alloc_pd(ctx), EBADF);
	ASSERT_NULL_ERRNO(ibv_create_cq(ctx, 4, NULL, NULL, 0), EBADF);
	ASSERT_NULL_ERRNO(ibv_create_comp_channel(ctx), EBADF);
	ASSERT_ERRNO_RET(ibv_query_device(ctx, &da), EBADF);
	ASSERT_ERRNO_RET(ibv_query_port(ctx, 1, &pa), EBADF);
	ASSERT_NEG_ERRNO(ibv_query_gid(ctx, 1, 0, &gid), EBADF);
	ASSERT_NEG_ERRNO(ibv_get_async_event(ctx, &ev), EBADF);
}

/*
 * As the kernel frees a closed file's objects: everything the context
 * still held is destroyed with it (users first), and refused after.  The
 * channel is the client's file and stays.
 */
TEST(close_destroys_what_is_left)
{
	struct ibv_qp_attr attr;
	struct ibv_qp_init_attr init;
	struct ibv_wc wc;
	struct objs o;

	objs_open(&o, NULL);
	ASSERT_EQ(ibv_close_device(o.ctx), 0);
	ASSERT_ERRNO_RET(ibv_destroy_ah(o.ah), ENOENT);
	ASSERT_ERRNO_RET(ibv_query_qp(o.ud, &attr, IBV_QP_STATE, &init),
			 EINVAL);
	ASSERT_ERRNO_RET(ibv_destroy_qp(o.ud), ENOENT);
	ASSERT_ERRNO_RET(ibv_destroy_qp(o.rc), ENOENT);
	ASSERT_ERRNO_RET(ibv_destroy_srq(o.srq), ENOENT);
	ASSERT_NEG_ERRNO(ibv_poll_cq(o.cq, 1, &wc), EINVAL);
	ASSERT_ERRNO_RET(ibv_destroy_cq(o.cq), ENOENT);
	ASSERT_ERRNO_RET(ibv_dereg_mr(o.mr), ENOENT);
	ASSERT_ERRNO_RET(ibv_dealloc_pd(o.pd), ENOENT);
	/* the channel: its CQ went, so it is free to go */
	ASSERT_EQ(ibv_destroy_comp_channel(o.ch), 0);
}

/* ------------------------------------------------------------------ */
/* Garbled handles and copies                                          */

/*
 * Whatever the handle is changed to -- zero, all ones, another slot, the
 * same slot's next generation, another live object's -- the destroy
 * fails and changes nothing; with the handle put back it succeeds.
 */
TEST(garbled_handles_name_nothing)
{
	struct ibv_pd *other;
	struct objs o;
	uint32_t bad[5], h;
	unsigned int i;

	objs_open(&o, NULL);
	other = ibv_alloc_pd(o.ctx);
	ASSERT_NOT_NULL(other);
	h = o.ah->handle;
	bad[0] = 0;
	bad[1] = 0xffffffff;
	bad[2] = h ^ 1;
	bad[3] = h + (1u << 20);
	bad[4] = h + 1;
	for (i = 0; i < 5; i++) {
		o.ah->handle = bad[i];
		ASSERT_ERRNO_RET(ibv_destroy_ah(o.ah), ENOENT);
	}
	o.ah->handle = h;

	h = o.pd->handle;
	o.pd->handle = other->handle;	/* names a live PD, not this one */
	ASSERT_ERRNO_RET(ibv_dealloc_pd(o.pd), ENOENT);
	o.pd->handle = h;
	ASSERT(ibv_reg_mr(other, o.buf, 8, 0) != NULL);	/* still alive */

	h = o.cq->handle;
	o.cq->handle = h ^ 0x10;
	ASSERT_ERRNO_RET(ibv_destroy_cq(o.cq), ENOENT);
	ASSERT_ERRNO_RET(ibv_resize_cq(o.cq, 32), EINVAL);
	ASSERT_ERRNO_RET(ibv_req_notify_cq(o.cq, 0), EINVAL);
	o.cq->handle = h;

	h = o.rc->handle;
	o.rc->handle = 0xdeadbeef;
	ASSERT_ERRNO_RET(ibv_destroy_qp(o.rc), ENOENT);
	o.rc->handle = h;

	h = o.srq->handle;
	o.srq->handle = ~h;
	ASSERT_ERRNO_RET(ibv_destroy_srq(o.srq), ENOENT);
	o.srq->handle = h;

	h = o.mr->handle;
	o.mr->handle = h + 3;
	ASSERT_ERRNO_RET(ibv_dereg_mr(o.mr), ENOENT);
	o.mr->handle = h;

	/* every object survived its garbled destroy */
	objs_close(&o);
}

/* The data path checks the handle too (a compare, no lookup). */
TEST(garbled_handle_on_the_data_path)
{
	struct ibv_send_wr swr = { .wr_id = 1, .opcode = IBV_WR_SEND };
	struct ibv_send_wr *sbad = NULL;
	struct ibv_wc wc;
	struct objs o;
	uint32_t h;

	objs_open(&o, NULL);
	h = o.cq->handle;
	o.cq->handle = h + 1;
	ASSERT_NEG_ERRNO(ibv_poll_cq(o.cq, 1, &wc), EINVAL);
	o.cq->handle = h;
	ASSERT_EQ(ibv_poll_cq(o.cq, 1, &wc), 0);
	h = o.ud->handle;
	o.ud->handle = h + 1;
	ASSERT_ERRNO_RET(ibv_post_send(o.ud, &swr, &sbad), EINVAL);
	o.ud->handle = h;
	objs_close(&o);
}

/*
 * A copy of an object's public struct is not the object, live or not:
 * the verb reads the copy's handle and context, finds the object they
 * name, sees a different address, and refuses.
 */
TEST(copies_are_not_the_object)
{
	struct ibv_pd pd_copy;
	struct ibv_cq cq_copy;
	struct ibv_qp qp_copy;
	struct ibv_mr mr_copy;
	struct ibv_srq srq_copy;
	struct ibv_ah ah_copy;
	struct ibv_qp_attr attr;
	struct ibv_qp_init_attr init;
	struct objs o;

	objs_open(&o, NULL);
	pd_copy = *o.pd;
	cq_copy = *o.cq;
	qp_copy = *o.rc;
	mr_copy = *o.mr;
	srq_copy = *o.srq;
	ah_copy = *o.ah;
	ASSERT_ERRNO_RET(ibv_destroy_ah(&ah_copy), ENOENT);
	ASSERT_ERRNO_RET(ibv_destroy_qp(&qp_copy), ENOENT);
	ASSERT_ERRNO_RET(ibv_query_qp(&qp_copy, &attr, IBV_QP_STATE, &init),
			 EINVAL);
	ASSERT_ERRNO_RET(ibv_destroy_srq(&srq_copy), ENOENT);
	ASSERT_ERRNO_RET(ibv_destroy_cq(&cq_copy), ENOENT);
	ASSERT_ERRNO_RET(ibv_dereg_mr(&mr_copy), ENOENT);
	ASSERT_ERRNO_RET(ibv_dealloc_pd(&pd_copy), ENOENT);
	ASSERT_NULL_ERRNO(ibv_reg_mr(&pd_copy, o.buf, 8, 0), EINVAL);
	/* the originals are whole */
	objs_close(&o);
	/* and a copy of a destroyed one names nothing either */
	ASSERT_ERRNO_RET(ibv_dealloc_pd(&pd_copy), ENOENT);
	ASSERT_ERRNO_RET(ibv_destroy_cq(&cq_copy), ENOENT);
}

/*
 * A handle does not come back soon: 10,000 PDs allocated and freed one
 * after the other all get different handles (handle.c promises 64 x 4094
 * creations before a slot's generation repeats).
 */
TEST(handles_are_not_reused_soon)
{
	enum { N = 10000 };
	static uint32_t seen[N];
	struct ibv_context *ctx = open_lo();
	int i, j;

	for (i = 0; i < N; i++) {
		struct ibv_pd *pd = ibv_alloc_pd(ctx);

		ASSERT_NOT_NULL(pd);
		seen[i] = pd->handle;
		ASSERT_NE(seen[i], 0);
		ASSERT_EQ(ibv_dealloc_pd(pd), 0);
	}
	for (i = 0; i < N; i++)
		for (j = i + 1; j < N; j++)
			if (seen[i] == seen[j])
				ASSERT_NE(seen[i], seen[j]);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

/* ------------------------------------------------------------------ */
/* A destroy in progress                                               */

/* EBUSY while the main thread's ibv_resize_cq holds the CQ at that very
 * moment (the kernel's exclusive lookup for a destroy says the same):
 * again, as a program would */
static void *destroy_cq_thread(void *arg)
{
	int r;

	while ((r = ibv_destroy_cq(arg)) == EBUSY)
		usleep(100);
	return (void *)(intptr_t)r;
}

/*
 * ibv_destroy_cq waits for its handed-out events to be acknowledged.
 * Meanwhile the CQ is claimed: a second destroy, or any verb that looks
 * it up, finds nothing (never a second free), while the ack it waits for
 * still counts; then the destroy ends and the CQ is dead.
 */
TEST(destroy_in_progress_is_not_found)
{
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
	struct ibv_sge sge;
	struct ibv_recv_wr rwr, *rbad;
	struct ibv_wc wc;
	struct ibv_cq *cq, *ev_cq;
	struct ibv_qp *qp;
	pthread_t t;
	void *ev_ctx, *res;
	struct objs o;
	int i, r = 0;

	objs_open(&o, NULL);
	cq = ibv_create_cq(o.ctx, 8, NULL, o.ch, 0);
	ASSERT_NOT_NULL(cq);
	{
		struct ibv_qp_init_attr qa = {
			.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = 1, .max_recv_wr = 1,
				 .max_send_sge = 1, .max_recv_sge = 1 },
		};

		qp = ibv_create_qp(o.pd, &qa);
		ASSERT_NOT_NULL(qp);
	}
	ASSERT_EQ(ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0);
	sge.addr = (uintptr_t)o.buf;
	sge.length = 16;
	sge.lkey = o.mr->lkey;
	memset(&rwr, 0, sizeof(rwr));
	rwr.wr_id = 9;
	rwr.sg_list = &sge;
	rwr.num_sge = 1;
	ASSERT_EQ(ibv_post_recv(qp, &rwr, &rbad), 0);
	ASSERT_EQ(ibv_req_notify_cq(cq, 0), 0);
	attr.qp_state = IBV_QPS_ERR;
	ASSERT_EQ(ibv_modify_qp(qp, &attr, IBV_QP_STATE), 0);	/* flush */
	ASSERT_EQ(ibv_get_cq_event(o.ch, &ev_cq, &ev_ctx), 0);
	ASSERT(ev_cq == cq);
	ASSERT_EQ(ibv_poll_cq(cq, 1, &wc), 1);
	ASSERT_EQ(ibv_destroy_qp(qp), 0);

	ASSERT_EQ(pthread_create(&t, NULL, destroy_cq_thread, cq), 0);
	/* until the thread has claimed it (bounded: 10 s) */
	for (i = 0; i < 10000; i++) {
		r = ibv_resize_cq(cq, 16);
		if (r == EINVAL)
			break;
		usleep(1000);
	}
	ASSERT_EQ(r, EINVAL);
	ASSERT_ERRNO_RET(ibv_destroy_cq(cq), ENOENT);
	ASSERT_EQ(ibv_poll_cq(cq, 1, &wc), 0);	/* still whole */
	ibv_ack_cq_events(cq, 1);
	ASSERT_EQ(pthread_join(t, &res), 0);
	ASSERT_EQ((intptr_t)res, 0);
	ASSERT_NEG_ERRNO(ibv_poll_cq(cq, 1, &wc), EINVAL);
	objs_close(&o);
}
