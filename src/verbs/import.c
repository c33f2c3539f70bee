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
 * A cmd_fd received from another process names that process's file: its
 * owner is asked (import_rem.c), the PD is a shadow here that stands for
 * the owner's (an alias of it carries the owner's handle), the MR a
 * description whose L_Key the shadow's QPs use through the owner's arena
 * (import_key.c).  A dup of a context of ours that is closed is
 * EOPNOTSUPP: closing the context that opened the file destroys its
 * objects, where the kernel would keep them while a dup of the file is
 * open.
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
	struct shca_rfile *rf;		/* another process's file: how its
					 * owner is reached (import_rem.c) */
	struct shca_ufile *next;
};

static pthread_mutex_t imp_lock = PTHREAD_MUTEX_INITIALIZER;
static struct shca_ufile *ufiles;	/* under imp_lock */
static struct shca_proxy *proxies;	/* under imp_lock */

/* ------------------------------------------------------------------ */
/* Command files                                                       */

/* The file behind fd for this process; rf: it stands for another's. */
static struct shca_ufile *ufile_add(struct shca_device *dev, int fd,
				    struct shca_rfile *rf)
{
	struct shca_ufile *uf;
	struct stat st;

	if (fstat(fd, &st))
		return NULL;
	uf = calloc(1, sizeof(*uf));
	if (!uf)
		return NULL;
	uf->rf = rf;
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

/* A file this process opens: the record says who owns it, for an
 * importer in another process (import_rem.c). */
struct shca_ufile *shca_ufile_new(struct shca_device *dev, int fd)
{
	shca_rimport_record(fd);
	return ufile_add(dev, fd, NULL);
}

struct shca_ufile *shca_ufile_new_remote(struct shca_device *dev, int fd,
					 struct shca_rfile *rf)
{
	return ufile_add(dev, fd, rf);
}

struct shca_rfile *shca_ufile_rfile(struct shca_ufile *uf)
{
	return uf->rf;
}

bool shca_ufile_is(const struct shca_ufile *uf, dev_t dev, ino_t ino)
{
	return uf && !uf->rf && uf->st_dev == dev && uf->st_ino == ino &&
	       uf->pid == shca_getpid();
}

struct shca_device *shca_ufile_owner_dev(dev_t dev, ino_t ino)
{
	struct shca_device *d = NULL;
	struct shca_ufile *uf;

	pthread_mutex_lock(&imp_lock);
	for (uf = ufiles; uf; uf = uf->next)
		if (uf->refs > 0 && shca_ufile_is(uf, dev, ino)) {
			d = uf->dev;
			break;
		}
	pthread_mutex_unlock(&imp_lock);
	return d;
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
	if (uf->rf)
		shca_rfile_free(uf->rf);
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
	if (!uf) {
		if (!is_cmd_file(cmd_fd))
			return SHCA_ERR_PTR(EINVAL);
		/* another process's, or a context of ours that is closed
		 * (its owner, asked, says it is not its file) */
		return shca_rimport_device(cmd_fd);
	}
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
	p->ahandle = handle;
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

/* An import of another process's PD or DM is gone: its shadow too,
 * unless a QP or MR of ours still uses it (the context's close takes it
 * then). */
static void shadow_free(struct shca_proxy *p)
{
	struct shca_proxy *q;
	struct shca_pd *pd;
	struct shca_dm *dm;

	if (!p->shadow)
		return;
	/* another import of the same PD in the context shares it */
	pthread_mutex_lock(&imp_lock);
	for (q = proxies; q; q = q->next)
		if (q != p && q->shadow == p->shadow)
			break;
	pthread_mutex_unlock(&imp_lock);
	if (q)
		return;
	if (p->type == SHCA_OT_DM) {
		dm = shca_dm_lookup(p->shadow, NULL);
		if (dm && shca_dm_destroy(dm))
			shca_warn("ibv_unimport_dm: MRs here still use the "
				  "import; it goes with its context");
		return;
	}
	pd = shca_pd_lookup(p->shadow, NULL);
	if (pd && shca_pd_destroy(pd))
		shca_warn("ibv_unimport_pd: the import is still in use here; "
			  "it goes with its context");
}

/* Forget a proxy: its object (if still there) loses the alias, and the
 * struct waits in the quarantine, so that a late use finds nothing. */
static void proxy_free(struct shca_proxy *p)
{
	if (p->ahandle)
		shca_obj_unalias(p);
	shadow_free(p);
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

bool shca_import_ahandle(const void *pub, enum shca_otype t, uint32_t *h)
{
	struct shca_proxy *p;
	bool found = false;

	pthread_mutex_lock(&imp_lock);
	for (p = proxies; p; p = p->next)
		if (&p->u == pub && p->type == t && p->remote) {
			*h = p->ahandle;
			found = true;
			break;
		}
	pthread_mutex_unlock(&imp_lock);
	return found;
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
		if (p->ctx == ctx && p->ahandle)
			shca_obj_unalias(p);
	pthread_mutex_unlock(&imp_lock);
}

/* The shadow of the owner's PD handle in ctx, if it was imported there
 * already (its ibv_pd), or NULL. */
static struct ibv_pd *shadow_find(struct ibv_context *ctx, uint32_t handle)
{
	struct ibv_pd *pd = NULL;
	struct shca_proxy *p;

	pthread_mutex_lock(&imp_lock);
	for (p = proxies; p; p = p->next)
		if (p->remote && p->shadow && p->ctx == ctx &&
		    p->handle == handle) {
			pd = p->shadow;
			break;
		}
	pthread_mutex_unlock(&imp_lock);
	return pd;
}

/* Link a proxy of another process's object (ahandle: its shadow's, or
 * 0: none). */
static void proxy_link(struct shca_proxy *p)
{
	pthread_mutex_lock(&imp_lock);
	p->next = proxies;
	proxies = p;
	pthread_mutex_unlock(&imp_lock);
}

/*
 * A PD of another process (import_rem.c): its owner says the handle
 * names a PD of the file; a shadow PD here stands for it (the QPs and
 * MRs of this process on the import are the shadow's, and the shadow
 * carries the owner's identity of the PD for the L_Keys of the owner's
 * MRs: import_key.c), and the proxy handed out has the owner's handle.
 */
static struct ibv_pd *rimport_pd(struct ibv_context *ctx,
				 struct shca_rfile *rf, uint32_t handle)
{
	struct shca_proxy *p;
	struct ibv_pd *ibpd;
	struct shca_pd *spd;
	struct shca_obj *o;
	int ret, slot;
	uint32_t id;
	pid_t pid;

	ret = shca_rimport_pd(rf, handle, &slot, &pid, &id);
	if (ret)
		return SHCA_ERR_PTR(-ret);
	p = calloc(1, sizeof(*p));
	if (!p)
		return SHCA_ERR_PTR(ENOMEM);
	/* the PD imported again in this context: the same shadow, so that
	 * the objects made on either import share one PD */
	ibpd = shadow_find(ctx, handle);
	if (!ibpd) {
		ibpd = shca_pd_create(ctx, NULL);
		if (!ibpd) {
			free(p);
			return NULL;
		}
		spd = container_of(ibpd, struct shca_pd, ibpd);
		spd->rslot = slot;
		spd->rpid = pid;
		spd->rpd = id;
		__atomic_store_n(&spd->remote, true, __ATOMIC_RELEASE);
		/* the owner's QPs of the PD answer our R_Keys in it */
		shca_rimport_pd_shadow(rf, handle, spd->obj.handle, false);
	}
	p->type = SHCA_OT_PD;
	p->ctx = ctx;
	p->handle = handle;
	p->ahandle = ibpd->handle;
	p->remote = true;
	p->shadow = ibpd;
	p->u.pd.context = ctx;
	p->u.pd.handle = handle;
	/* linked first: a concurrent unimport of another import of the
	 * shadow sees this one */
	proxy_link(p);
	o = shca_obj_alias(SHCA_OT_PD, ibpd->handle, ctx, p);
	if (!o) {
		p = proxy_take(&p->u, SHCA_OT_PD);
		if (p) {
			shadow_free(p);
			free(p);
		}
		return SHCA_ERR_PTR(ENOENT);
	}
	shca_obj_put(o);
	return &p->u.pd;
}

int shca_rimport_destroy(const void *pub, enum shca_otype t)
{
	struct ibv_context *ctx = NULL;
	struct shca_rfile *rf;
	struct shca_proxy *p;
	uint32_t handle = 0;
	int ret;

	pthread_mutex_lock(&imp_lock);
	for (p = proxies; p; p = p->next)
		if (&p->u == pub && p->type == t && p->remote) {
			ctx = p->ctx;
			handle = p->handle;
			break;
		}
	pthread_mutex_unlock(&imp_lock);
	if (!ctx)
		return -ENOENT;
	if (!shca_ctx_live(ctx))
		return -EBADF;
	rf = shca_ufile_rfile(to_sctx(ctx)->ufile);
	ret = rf ? shca_rimport_destroy_call(rf, t, handle) : -ENOENT;
	if (!ret)
		shca_import_destroyed(pub);
	return ret;
}

/* An MR of another process: its owner's description; no object here
 * (its L_Key is the owner's, used through a shadow PD: import_key.c). */
static struct ibv_mr *rimport_mr(struct ibv_pd *pd, struct shca_rfile *rf,
				 uint32_t handle)
{
	struct shca_proxy *p;
	struct shca_rmr m;
	int ret;

	ret = shca_rimport_mr(rf, handle, &m);
	if (ret)
		return SHCA_ERR_PTR(-ret);
	p = calloc(1, sizeof(*p));
	if (!p)
		return SHCA_ERR_PTR(ENOMEM);
	p->type = SHCA_OT_MR;
	p->ctx = pd->context;
	p->handle = handle;
	p->remote = true;
	p->u.mr.context = pd->context;
	p->u.mr.pd = pd;
	p->u.mr.handle = handle;
	p->u.mr.lkey = m.lkey;
	p->u.mr.rkey = m.rkey;
	p->u.mr.length = m.length;
	p->u.mr.addr = NULL;
	proxy_link(p);
	return &p->u.mr;
}

struct ibv_pd *ibv_import_pd(struct ibv_context *context, uint32_t pd_handle)
{
	struct shca_proxy *p;
	struct shca_obj *o;

	if (!shca_ctx_live(context))
		return SHCA_ERR_PTR(EBADF);
	if (shca_ufile_rfile(to_sctx(context)->ufile))
		return rimport_pd(context,
				  shca_ufile_rfile(to_sctx(context)->ufile),
				  pd_handle);
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
	if (shca_ufile_rfile(to_sctx(pd->context)->ufile))
		return rimport_mr(pd,
				  shca_ufile_rfile(to_sctx(pd->context)->ufile),
				  mr_handle);
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

/*
 * A DM of another process: its owner hands over the memfd behind it
 * (import_rem.c), mapped here as a shadow DM of the importing context
 * (dm.c), so that both processes name the same memory: copies, and the
 * MRs registered on the import, reach the owner's bytes.  The proxy
 * handed out has the owner's handle and is an alias of the shadow.
 */
static struct ibv_dm *rimport_dm(struct ibv_context *ctx,
				 struct shca_rfile *rf, uint32_t handle)
{
	struct shca_proxy *p;
	struct shca_dm *dm;
	struct shca_obj *o;
	uint64_t length;
	int ret, fd;

	ret = shca_rimport_dm(rf, handle, &length, &fd);
	if (ret)
		return SHCA_ERR_PTR(-ret);
	dm = shca_dm_map_remote(ctx, fd, length);
	if (!dm)
		return NULL;
	p = calloc(1, sizeof(*p));
	if (!p) {
		if (shca_dm_lookup(&dm->ibdm, NULL))
			shca_dm_destroy(dm);
		return SHCA_ERR_PTR(ENOMEM);
	}
	p->type = SHCA_OT_DM;
	p->ctx = ctx;
	p->handle = handle;
	p->ahandle = dm->ibdm.handle;
	p->remote = true;
	p->shadow = &dm->ibdm;
	shca_dm_init_pub(&p->u.dm, ctx);
	p->u.dm.handle = handle;
	proxy_link(p);
	o = shca_obj_alias(SHCA_OT_DM, dm->ibdm.handle, ctx, p);
	if (!o) {
		p = proxy_take(&p->u, SHCA_OT_DM);
		if (p) {
			shadow_free(p);
			free(p);
		}
		return SHCA_ERR_PTR(ENOENT);
	}
	shca_obj_put(o);
	return &p->u.dm;
}

struct ibv_dm *ibv_import_dm(struct ibv_context *context, uint32_t dm_handle)
{
	struct shca_proxy *p;
	struct shca_obj *o;

	if (shca_ctx_live(context) &&
	    shca_ufile_rfile(to_sctx(context)->ufile))
		return rimport_dm(context,
				  shca_ufile_rfile(to_sctx(context)->ufile),
				  dm_handle);
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
