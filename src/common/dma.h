/* SPDX-License-Identifier: MIT */
/*
 * What a NIC's DMA engine does, done by a thread of this process: the
 * net path placing a peer's data in registered memory, or reading it to
 * send, on behalf of another process.  The order between that access and
 * the application's own is made by the peer (over a socket, or in another
 * process altogether), which ThreadSanitizer cannot see; to it every such
 * copy races with the application's use of its buffers, as a NIC's would
 * if it could see one.  SHCA_DMA_BEGIN/END make TSan ignore the memory
 * accesses of this thread in between (nothing else: locks and atomics
 * are still checked outside, and every other access of the engine's);
 * in other builds they are nothing.
 */
#ifndef SOFTHCA_COMMON_DMA_H
#define SOFTHCA_COMMON_DMA_H

#if defined(__SANITIZE_THREAD__)
void __tsan_ignore_thread_begin(void);
void __tsan_ignore_thread_end(void);
#define SHCA_DMA_BEGIN() __tsan_ignore_thread_begin()
#define SHCA_DMA_END() __tsan_ignore_thread_end()
#else
#define SHCA_DMA_BEGIN() do { } while (0)
#define SHCA_DMA_END() do { } while (0)
#endif

#endif
