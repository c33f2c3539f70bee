// SPDX-License-Identifier: MIT
/*
 * Per-thread blocks (tblock.h): one list per thread, freed by one
 * pthread key's destructor when the thread ends.
 */
#include <pthread.h>
#include <stdalign.h>
#include <stdbool.h>
#include <stdlib.h>

#include "tblock.h"

struct block {
	struct block *next;
	void **slot;		/* the owner's thread-local */
	alignas(16) unsigned char data[];
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_key_t key;
static bool key_ok;
static __thread struct block *blocks;

/* The thread ends: its blocks go, their owners' pointers with them (a
 * later destructor that uses one gets a new block, freed in the next
 * round of destructors). */
static void thread_gone(void *v)
{
	struct block *b = v, *next;

	for (; b; b = next) {
		next = b->next;
		*b->slot = NULL;
		free(b);
	}
	blocks = NULL;
}

static void init(void)
{
	key_ok = !pthread_key_create(&key, thread_gone);
}

void *shca_tblock_get(void **slot, size_t size)
{
	struct block *b;

	pthread_once(&once, init);
	if (!key_ok)
		return NULL;	/* it could not be freed */
	b = calloc(1, sizeof(*b) + size);
	if (!b)
		return NULL;
	b->slot = slot;
	b->next = blocks;
	if (pthread_setspecific(key, b)) {
		free(b);
		return NULL;
	}
	blocks = b;
	*slot = b->data;
	return b->data;
}
