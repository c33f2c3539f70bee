// SPDX-License-Identifier: MIT
/*
 * The names of the diagnostic counters (stat.h), as `softhca stat` prints
 * them: lowercase, after the kernel rxe driver's hw_counters where one
 * exists.  The blocks themselves live in arenas (shm/arena.h): the
 * process's in the arena header, each QP's in its shca_qp_shm.
 */
#include "stat.h"

const char *const shca_stat_names[SHCA_STAT_MAX] = {
	[SHCA_STAT_SENT_PKTS] = "sent_pkts",
	[SHCA_STAT_SENT_BYTES] = "sent_bytes",
	[SHCA_STAT_RCVD_PKTS] = "rcvd_pkts",
	[SHCA_STAT_RCVD_BYTES] = "rcvd_bytes",
	[SHCA_STAT_RETRANS_PKTS] = "retrans_pkts",
	[SHCA_STAT_DUPLICATE_REQUEST] = "duplicate_request",
	[SHCA_STAT_OUT_OF_SEQ_REQUEST] = "out_of_seq_request",
	[SHCA_STAT_SEND_RNR_ERR] = "send_rnr_err",
	[SHCA_STAT_RCVD_RNR_ERR] = "rcvd_rnr_err",
	[SHCA_STAT_RCVD_SEQ_ERR] = "rcvd_seq_err",
	[SHCA_STAT_SEND_SEQ_ERR] = "send_seq_err",
	[SHCA_STAT_ACCESS_ERR] = "access_err",
	[SHCA_STAT_LENGTH_ERR] = "length_err",
	[SHCA_STAT_LOCAL_ACK_TIMEOUT] = "local_ack_timeout",
	[SHCA_STAT_RETRY_EXCEEDED_ERR] = "retry_exceeded_err",
	[SHCA_STAT_RETRY_RNR_EXCEEDED_ERR] = "retry_rnr_exceeded_err",
	[SHCA_STAT_DROPPED_PKTS] = "dropped_pkts",
	[SHCA_STAT_CONN_RESETS] = "conn_resets",
	[SHCA_STAT_FAULTS_INJECTED] = "faults_injected",
	[SHCA_STAT_ENGINE_WAKEUPS] = "engine_wakeups",
	[SHCA_STAT_NET_ACCEPT_BACKOFFS] = "net_accept_backoffs",
	[SHCA_STAT_SHM_ACCEPT_BACKOFFS] = "shm_accept_backoffs",
	[SHCA_STAT_NET_CONNS_REFUSED] = "net_conns_refused",
	[SHCA_STAT_NET_HELLO_TIMEOUTS] = "net_hello_timeouts",
	[SHCA_STAT_NET_IDLE_CLOSES] = "net_idle_closes",
	[SHCA_STAT_INVALID_RKEY] = "invalid_rkey",
	[SHCA_STAT_INVALID_QKEY] = "invalid_qkey",
	[SHCA_STAT_KEY_LIMIT_CLOSES] = "key_limit_closes",
	[SHCA_STAT_KEY_LIMIT_DROPS] = "key_limit_drops",
	[SHCA_STAT_SHM_CRED_REFUSED] = "shm_cred_refused",
	[SHCA_STAT_SHM_ARENA_REFUSED] = "shm_arena_refused",
	[SHCA_STAT_SHM_DIR_REFUSED] = "shm_dir_refused",
	[SHCA_STAT_HOST_TABLE_REFUSED] = "host_table_refused",
	[SHCA_STAT_SHM_STALE_NAMES] = "shm_stale_names",
	[SHCA_STAT_NET_ADMIT_DROPS] = "net_admission_drops",
	[SHCA_STAT_NET_HS_REFUSED] = "net_handshake_refused",
	[SHCA_STAT_MR_MAPPED] = "mr_mapped",
	[SHCA_STAT_MR_CMA] = "mr_cma",
	[SHCA_STAT_MAP_BYTES] = "map_bytes",
	[SHCA_STAT_MAP_COPY_BYTES] = "map_copy_bytes",
	[SHCA_STAT_MAP_XFERS] = "map_xfers",
	[SHCA_STAT_CMA_XFERS] = "cma_xfers",
	[SHCA_STAT_LOCAL_XFERS] = "local_xfers",
	[SHCA_STAT_SEGMAP_REFRESHES] = "segmap_refreshes",
	[SHCA_STAT_MAP_FILE_BYTES] = "map_file_bytes",
	[SHCA_STAT_APP_PROGRESS] = "app_progress",
	[SHCA_STAT_ENGINE_SPIN_BATCHES] = "engine_spin_batches",
	[SHCA_STAT_NET_DEFERRED] = "net_deferred",
};
