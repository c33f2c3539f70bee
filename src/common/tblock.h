/* SPDX-License-Identifier: MIT */
/*
 * Per-thread memory that does not belong in the static TLS block.
 *
 * The libraries are built with the initial-exec TLS model (CMakeLists.txt):
 * a thread-local is then one load off the thread pointer instead of a
 * call to the TLS descriptor's resolver (several in every work request),
 * but the whole TLS block of a library opened by dlopen (Python's ctypes,
 * UCX's plug-ins) must then fit in the space glibc keeps spare for such
 * libraries (glibc.rtld.optional_static_tls, 512 bytes by default).
 * Thread-locals larger than a few words live in a block of their own
 * instead, allocated at the thread's first use and freed when it ends:
 *
 *   static __thread struct state *mine;
 *   ...
 *   struct state *s = mine ? mine : shca_tblock_get((void **)&mine,
 *                                                   sizeof(*mine));
 *
 * NULL (no memory): the caller does without (a cache), or fails what it
 * was asked (an access's lanes).
 */
#ifndef SOFTHCA_TBLOCK_H
#define SOFTHCA_TBLOCK_H

#include <stddef.h>

/* A zeroed block of size bytes for this thread, stored in *slot too (the
 * caller's thread-local, set back to NULL when the thread ends); NULL
 * when there is no memory. */
void *shca_tblock_get(void **slot, size_t size);

#endif
