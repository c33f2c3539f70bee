// SPDX-License-Identifier: MIT
/*
 * The engine's side of engine/xport.h: the table through which a
 * transport reaches the stages.  Nothing else in the engine is a
 * transport's to call.
 */
#include "engine.h"
#include "xport.h"

const struct shca_stages shca_stages = {
	.respond = shca_respond,
	.respond_held = shca_respond_held,
	.hold = shca_respond_hold,
	.unhold = shca_respond_unhold,
	.count_flush = shca_xfer_tally_flush,
	.wqe_length = shca_wqe_length,
	.wqe_local_iov = shca_wqe_local_iov,
	.build_grh = shca_build_grh,
	.complete_send = shca_complete_send,
	.atomic_result = shca_atomic_result,
	.sq_failed = shca_sq_failed,
};
