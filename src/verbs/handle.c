// SPDX-License-Identifier: MIT
/*
 * Handles: what makes `->handle` mean something, as the kernel's uverbs
 * object table does for rdma-core (docs/conformance.md, "Handles").
 *
 * Every PD (parent domains too), MR, CQ, SRQ, QP, AH and TD gets a
 * handle from the table of its type when it is created (a TD keeps it
 * after its public struct, which has no handle field); every verb that
 * acts on one finds it again by (handle, context) before it touches
 * anything past the public struct, and acts only if the handle names
 * that very struct in that context.  So a destroyed object, a handle the
 * client changed, an object of another context or a copy of the struct
 * is refused, never acted on,
 * and a second destroy fails instead of freeing twice.
 *
 *   handle = generation << 20 | index
 *
 * The index is a slot of the type's table; the slot's generation (1 ..
 * 4094) grows each time the slot is handed out again, and freed slots
 * wait in a FIFO behind at least HT_MIN_FREE others, so a stale handle
 * names no new object for at least 64 x 4094 creations (the kernel
 * reuses an id at once).  No handle is 0 or 0xffffffff.  The tables are
 * the process's, one per type, each entry knowing its context: a handle
 * is unique in the process, which lets the PD handle serve as the PD's
 * identity in the arena (mr.c, qp_modify.c), and a foreign object is
 * told apart by its context.
 *
 * A verb at work on an object holds a use of it (shca_obj_get/put); a
 * destroy claims the object only when it is the sole user and nothing
 * references it (EBUSY otherwise, as the kernel's uobject lock and
 * usecnt answer), and a claimed object is found by no one.
 *
 * What a destroy leaves is not freed at once: the object is marked dead,
 * its private part poisoned, its public struct (the context pointer and
 * the handle in it) kept, and it waits in a bounded quarantine.  A client
 * that calls a verb with it meanwhile -- a use-after-destroy bug -- gets
 * an error instead of reading freed memory (glibc's tcache writes over the
 * first 16 bytes of a freed block, which for ibv_cq is the context
 * pointer that ibv_poll_cq follows).
 *
 * Contexts: a registry of the live ones, compared by address, so that a
 * closed context is refused without reading it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "shca.h"

#define HT_IDX_BITS	20
#define HT_IDX_MASK	((1u << HT_IDX_BITS) - 1)
#define HT_MAX_SIZE	(1u << HT_IDX_BITS)
#define HT_GEN_MAX	4094u	/* generation 4095 would allow ~0 */
#define HT_MIN_FREE	64u	/* free slots held back before reuse */
#define HT_FIRST_SIZE	128u

/* The dead objects kept before they are freed: at most this many, and
 * at most this many bytes. */
#define QUAR_MAX_OBJS	4096u
#define QUAR_MAX_BYTES	(8u << 20)

#define POISON_BYTE	0x6b	/* as the kernel's POISON_FREE */

struct hent {
	struct shca_obj *obj;	/* NULL: free */
	uint32_t gen;		/* of the last handle handed out here */
};

struct htab {
	pthread_mutex_t lock;
	struct hent *ent;
	uint32_t size;		/* entries allocated */
	uint32_t *fifo;		/* free indexes, oldest first: a ring */
	uint32_t fifo_head, fifo_len;
};

static struct htab htabs[SHCA_OT_NUM] = {
	[0 ... SHCA_OT_NUM - 1] = { .lock = PTHREAD_MUTEX_INITIALIZER },
};

static uint32_t live_magic(enum shca_otype t)
{
	return SHCA_OBJ_MAGIC + (uint32_t)t;
}

/* ------------------------------------------------------------------ */
/* Tables                                                              */

/* Double the table (up to HT_MAX_SIZE); the new slots join the FIFO's
 * tail.  Table lock held.  0 or -ENOMEM. */
static int ht_grow(struct htab *h)
{
	uint32_t nsize = h->size ? h->size * 2 : HT_FIRST_SIZE, i;
	struct hent *ent;
	uint32_t *fifo;

	if (h->size >= HT_MAX_SIZE)
		return -ENOMEM;
	if (nsize > HT_MAX_SIZE)
		nsize = HT_MAX_SIZE;
	ent = realloc(h->ent, nsize * sizeof(*ent));
	if (!ent)
		return -ENOMEM;
	h->ent = ent;
	memset(ent + h->size, 0, (nsize - h->size) * sizeof(*ent));
	fifo = malloc(nsize * sizeof(*fifo));
	if (!fifo)
		return -ENOMEM;	/* ent grew: harmless, size stays */
	for (i = 0; i < h->fifo_len; i++)
		fifo[i] = h->fifo[(h->fifo_head + i) % h->size];
	for (i = h->size; i < nsize; i++)
		fifo[h->fifo_len++] = i;
	free(h->fifo);
	h->fifo = fifo;
	h->fifo_head = 0;
	h->size = nsize;
	return 0;
}

int shca_obj_add(struct shca_obj *o, enum shca_otype t,
		 struct ibv_context *ctx, const void *pub, uint32_t *handle)
{
	struct htab *h = &htabs[t];
	struct hent *e;
	uint32_t idx;

	pthread_mutex_lock(&h->lock);
	if (h->fifo_len <= HT_MIN_FREE && h->size < HT_MAX_SIZE)
		ht_grow(h);	/* else reuse sooner, or fail below */
	if (!h->fifo_len) {
		pthread_mutex_unlock(&h->lock);
		return -ENOMEM;
	}
	idx = h->fifo[h->fifo_head];
	h->fifo_head = (h->fifo_head + 1) % h->size;
	h->fifo_len--;
	e = &h->ent[idx];
	e->gen = e->gen % HT_GEN_MAX + 1;
	o->type = t;
	o->handle = e->gen << HT_IDX_BITS | idx;
	o->ctx = ctx;
	o->pub = pub;
	o->users = 0;
	o->dying = false;
	o->aliases = NULL;
	__atomic_store_n(&o->magic, live_magic(t), __ATOMIC_RELEASE);
	e->obj = o;
	pthread_mutex_unlock(&h->lock);
	*handle = o->handle;
	return 0;
}

/* The entry whose object is o, or NULL; table lock held. */
static struct hent *ht_find(struct htab *h, uint32_t handle)
{
	uint32_t idx = handle & HT_IDX_MASK;
	struct hent *e;

	if (idx >= h->size)
		return NULL;
	e = &h->ent[idx];
	if (!e->obj || e->obj->handle != handle)
		return NULL;
	return e;
}

/* Does (pub, ctx) name o: the struct handed out in its own context, or
 * an import of it (import.c)?  Table lock held. */
static bool names(const struct shca_obj *o, const void *pub,
		  const struct ibv_context *ctx)
{
	const struct shca_proxy *p;

	if (o->pub == pub)
		return o->ctx == ctx;
	for (p = o->aliases; p; p = p->alias_next)
		if (&p->u == pub)
			return p->ctx == ctx;
	return false;
}

struct shca_obj *shca_obj_get(enum shca_otype t, const void *pub,
			      struct ibv_context *ctx, uint32_t handle,
			      struct ibv_context *want)
{
	struct htab *h = &htabs[t];
	struct shca_obj *o = NULL;
	struct hent *e;

	bool again = true;

	if (!pub || (want && ctx != want))
		return NULL;
retry:
	pthread_mutex_lock(&h->lock);
	e = ht_find(h, handle);
	/* the very struct handed out (or imported), in its context, not
	 * going */
	if (e && names(e->obj, pub, ctx) && !e->obj->dying) {
		o = e->obj;
		__atomic_add_fetch(&o->users, 1, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&h->lock);
	/* an import of another process's object names its shadow here by
	 * another handle (import_rem.c): looked for on a miss only, outside
	 * the table lock (the imports' lock comes first) */
	if (!o && again && shca_import_ahandle(pub, t, &handle) && handle) {
		again = false;
		goto retry;
	}
	return o;
}

/*
 * An import names the object its handle names in the command file that
 * ctx shares (the kernel's object lookup in the uverbs file): the owner's
 * context must still be open, and share ctx's file.
 */
struct shca_obj *shca_obj_alias(enum shca_otype t, uint32_t handle,
				struct ibv_context *ctx, struct shca_proxy *p)
{
	struct htab *h = &htabs[t];
	struct shca_obj *o = NULL;
	struct hent *e;

	pthread_mutex_lock(&h->lock);
	e = ht_find(h, handle);
	if (e && !e->obj->dying && shca_ctx_live(e->obj->ctx) &&
	    to_sctx(e->obj->ctx)->ufile == to_sctx(ctx)->ufile) {
		o = e->obj;
		p->alias_next = o->aliases;
		o->aliases = p;
		__atomic_add_fetch(&o->users, 1, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&h->lock);
	return o;
}

struct shca_obj *shca_obj_find_file(enum shca_otype t, uint32_t handle,
				    dev_t dev, ino_t ino)
{
	struct htab *h = &htabs[t];
	struct shca_obj *o = NULL;
	struct hent *e;

	pthread_mutex_lock(&h->lock);
	e = ht_find(h, handle);
	if (e && !e->obj->dying && shca_ctx_live(e->obj->ctx) &&
	    shca_ufile_is(to_sctx(e->obj->ctx)->ufile, dev, ino)) {
		o = e->obj;
		__atomic_add_fetch(&o->users, 1, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&h->lock);
	return o;
}

void shca_obj_unalias(struct shca_proxy *p)
{
	struct htab *h = &htabs[p->type];
	struct shca_proxy **pp;
	struct hent *e;

	pthread_mutex_lock(&h->lock);
	e = ht_find(h, p->ahandle);
	if (e)
		for (pp = &e->obj->aliases; *pp; pp = &(*pp)->alias_next)
			if (*pp == p) {
				*pp = p->alias_next;
				break;
			}
	p->alias_next = NULL;
	pthread_mutex_unlock(&h->lock);
}

void shca_obj_put(struct shca_obj *o)
{
	__atomic_sub_fetch(&o->users, 1, __ATOMIC_RELEASE);
}

int shca_obj_claim(struct shca_obj *o, const int *refs)
{
	struct htab *h = &htabs[o->type];
	int ret = 0;

	pthread_mutex_lock(&h->lock);
	if (__atomic_load_n(&o->users, __ATOMIC_ACQUIRE) != 1 ||
	    (refs && __atomic_load_n(refs, __ATOMIC_ACQUIRE)))
		ret = -EBUSY;
	else
		o->dying = true;
	pthread_mutex_unlock(&h->lock);
	return ret;
}

void shca_obj_unclaim(struct shca_obj *o)
{
	struct htab *h = &htabs[o->type];

	pthread_mutex_lock(&h->lock);
	o->dying = false;
	pthread_mutex_unlock(&h->lock);
}

/* The handle goes back to its table; the slot waits in the FIFO. */
static void obj_remove(struct shca_obj *o)
{
	struct htab *h = &htabs[o->type];
	struct hent *e;

	pthread_mutex_lock(&h->lock);
	e = ht_find(h, o->handle);
	if (e && e->obj == o) {
		/* its imports name nothing from now on */
		o->aliases = NULL;
		e->obj = NULL;
		h->fifo[(h->fifo_head + h->fifo_len) % h->size] =
			o->handle & HT_IDX_MASK;
		h->fifo_len++;
	}
	pthread_mutex_unlock(&h->lock);
}

int shca_obj_collect(enum shca_otype t, struct ibv_context *ctx,
		     struct shca_obj ***out)
{
	struct htab *h = &htabs[t];
	struct shca_obj **v = NULL;
	uint32_t i;
	int n = 0, cap = 0;

	pthread_mutex_lock(&h->lock);
	for (i = 0; i < h->size; i++) {
		struct shca_obj *o = h->ent[i].obj;

		if (!o || o->ctx != ctx || o->dying)
			continue;
		if (n == cap) {
			struct shca_obj **nv;

			cap = cap ? cap * 2 : 16;
			nv = realloc(v, (size_t)cap * sizeof(*v));
			if (!nv)
				break;	/* the rest stay, never freed */
			v = nv;
		}
		__atomic_add_fetch(&o->users, 1, __ATOMIC_RELAXED);
		v[n++] = o;
	}
	pthread_mutex_unlock(&h->lock);
	*out = v;
	return n;
}

/* ------------------------------------------------------------------ */
/* Quarantine                                                          */

/* A ring of the objects kept, oldest at quar_head: a fixed array, not a
 * node allocated per object, whose oldest entry a retire reads back cold
 * (a cache miss per deregistration, issue 12). */
struct quar {
	void *mem;
	size_t size;
	void (*release)(void *mem);	/* free() if NULL */
};

static void quar_release(const struct quar *q, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (q[i].release)
			q[i].release(q[i].mem);
		else
			free(q[i].mem);
	}
}

static pthread_mutex_t quar_lock = PTHREAD_MUTEX_INITIALIZER;
static struct quar quar_ring[QUAR_MAX_OBJS];
static size_t quar_head, quar_objs, quar_bytes;

/* Keep mem (size bytes) a while before freeing it (release, or free);
 * oldest out first. */
static void quarantine(void *mem, size_t size, void (*release)(void *mem))
{
	struct quar old[8];
	size_t nold;

	pthread_mutex_lock(&quar_lock);
	for (;;) {
		/* unlink what is over the bounds (the newest always stays);
		 * free it outside the lock */
		nold = 0;
		while (quar_objs &&
		       (quar_objs == QUAR_MAX_OBJS ||
			quar_bytes + size > QUAR_MAX_BYTES) &&
		       nold < sizeof(old) / sizeof(old[0])) {
			struct quar *q = &quar_ring[quar_head];

			old[nold++] = *q;
			quar_bytes -= q->size;
			quar_head = (quar_head + 1) % QUAR_MAX_OBJS;
			quar_objs--;
		}
		if (nold < sizeof(old) / sizeof(old[0]))
			break;
		pthread_mutex_unlock(&quar_lock);
		quar_release(old, nold);
		pthread_mutex_lock(&quar_lock);
	}
	quar_ring[(quar_head + quar_objs) % QUAR_MAX_OBJS] =
		(struct quar){ mem, size, release };
	quar_objs++;
	quar_bytes += size;
	pthread_mutex_unlock(&quar_lock);
	quar_release(old, nold);
}

void shca_obj_retire(struct shca_obj *o, void *mem, size_t size)
{
	shca_obj_retire_to(o, mem, size, NULL);
}

void shca_obj_retire_to(struct shca_obj *o, void *mem, size_t size,
			void (*release)(void *mem))
{
	char *tail = (char *)(o + 1);
	char *end = (char *)mem + size;

	obj_remove(o);
	__atomic_store_n(&o->magic, SHCA_OBJ_DEAD, __ATOMIC_RELEASE);
	/* the private part after the header: a stray reader of a dead
	 * object finds poison, not plausible pointers */
	if (tail > (char *)mem && tail < end)
		memset(tail, POISON_BYTE, (size_t)(end - tail));
	quarantine(mem, size, release);
}

void shca_quarantine(void *mem, size_t size)
{
	quarantine(mem, size, NULL);
}

/* ------------------------------------------------------------------ */
/* Live contexts                                                       */

static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ibv_context **ctx_live;
static unsigned int ctx_count, ctx_cap;

int shca_ctx_register(struct ibv_context *ctx)
{
	int ret = 0;

	pthread_mutex_lock(&ctx_lock);
	if (ctx_count == ctx_cap) {
		unsigned int ncap = ctx_cap ? ctx_cap * 2 : 8;
		struct ibv_context **n =
			realloc(ctx_live, ncap * sizeof(*n));

		if (!n) {
			ret = -ENOMEM;
			goto out;
		}
		ctx_live = n;
		ctx_cap = ncap;
	}
	ctx_live[ctx_count++] = ctx;
out:
	pthread_mutex_unlock(&ctx_lock);
	return ret;
}

bool shca_ctx_unregister(struct ibv_context *ctx)
{
	bool found = false;
	unsigned int i;

	pthread_mutex_lock(&ctx_lock);
	for (i = 0; i < ctx_count; i++)
		if (ctx_live[i] == ctx) {
			ctx_live[i] = ctx_live[--ctx_count];
			found = true;
			break;
		}
	pthread_mutex_unlock(&ctx_lock);
	return found;
}

bool shca_ctx_live(const struct ibv_context *ctx)
{
	bool found = false;
	unsigned int i;

	if (!ctx)
		return false;
	pthread_mutex_lock(&ctx_lock);
	for (i = 0; i < ctx_count && !found; i++)
		found = ctx_live[i] == ctx;
	pthread_mutex_unlock(&ctx_lock);
	return found;
}
