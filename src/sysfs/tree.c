// SPDX-License-Identifier: MIT
/*
 * The view (tree.h): its shape, path resolution and listings.  The
 * contents of its files are in attrs.c.
 *
 * The shape is one table: for each kind of node, its type and mode, and
 * children() lists what a directory holds.  Resolution looks a name up in
 * that same list, so a listing and a lookup never disagree.
 */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/stat.h"
#include "ident.h"
#include "tree_priv.h"

#define MAX_COMPS	64	/* deeper than the view ever is */
#define MAX_LINKS	8	/* links followed in one resolution */

const struct shca_vfs_kind shca_vfs_kinds[K_MAX] = {
	[K_DEV_ROOT] = { SHCA_VFS_DIR, 0755 },
	[K_UVERBS] = { SHCA_VFS_CHR, 0666 },	/* udev's rule for uverbs */
	[K_IB_ROOT] = { SHCA_VFS_DIR, 0755 },
	[K_IB_DEV] = { SHCA_VFS_DIR, 0755 },
	[K_DEV_ATTR] = { SHCA_VFS_FILE, 0444 },
	[K_DEVICE] = { SHCA_VFS_DIR, 0755 },
	[K_DEVICE_NET] = { SHCA_VFS_DIR, 0755 },
	[K_NET_LINK] = { SHCA_VFS_LINK, 0777 },
	[K_PORTS] = { SHCA_VFS_DIR, 0755 },
	[K_PORT] = { SHCA_VFS_DIR, 0755 },
	[K_PORT_ATTR] = { SHCA_VFS_FILE, 0444 },
	[K_GIDS] = { SHCA_VFS_DIR, 0755 },
	[K_GID] = { SHCA_VFS_FILE, 0444 },
	[K_GID_ATTRS] = { SHCA_VFS_DIR, 0755 },
	[K_GID_NDEVS] = { SHCA_VFS_DIR, 0755 },
	[K_GID_NDEV] = { SHCA_VFS_FILE, 0444 },
	[K_GID_TYPES] = { SHCA_VFS_DIR, 0755 },
	[K_GID_TYPE] = { SHCA_VFS_FILE, 0444 },
	[K_PKEYS] = { SHCA_VFS_DIR, 0755 },
	[K_PKEY] = { SHCA_VFS_FILE, 0444 },
	[K_COUNTERS] = { SHCA_VFS_DIR, 0755 },
	[K_COUNTER] = { SHCA_VFS_FILE, 0444 },
	[K_HW_COUNTERS] = { SHCA_VFS_DIR, 0755 },
	[K_HW_COUNTER] = { SHCA_VFS_FILE, 0444 },
	[K_LIFESPAN] = { SHCA_VFS_FILE, 0644 },
	[K_UV_ROOT] = { SHCA_VFS_DIR, 0755 },
	[K_UV_ABI] = { SHCA_VFS_FILE, 0444 },
	[K_UV_DEV] = { SHCA_VFS_DIR, 0755 },
	[K_UV_ATTR] = { SHCA_VFS_FILE, 0444 },
	[K_UV_DEVICE] = { SHCA_VFS_LINK, 0777 },
};

/* The view's three top directories: path components and kind. */
static const struct {
	const char *comp[3];
	int ncomp;
	enum kind kind;
} roots[] = {
	{ { "dev", "infiniband" }, 2, K_DEV_ROOT },
	{ { "sys", "class", "infiniband" }, 3, K_IB_ROOT },
	{ { "sys", "class", "infiniband_verbs" }, 3, K_UV_ROOT },
};

/* The interfaces of this namespace, read once per resolution. */
struct ctx {
	struct shca_netif *list;
	int n;
	int err;			/* of shca_netif_list */
	bool loaded;
	bool borrowed;			/* list is not ours to free */
};

static int ctx_load(struct ctx *c)
{
	if (!c->loaded) {
		c->n = shca_netif_list(&c->list);
		c->err = c->n < 0 ? c->n : 0;
		if (c->n < 0)
			c->n = 0;
		c->loaded = true;
	}
	return c->err;
}

static void ctx_free(struct ctx *c)
{
	if (c->loaded && !c->err && !c->borrowed)
		free(c->list);
	memset(c, 0, sizeof(*c));
}

/* A place in the view: a kind, its argument, its device (-1: none). */
struct pos {
	enum kind kind;
	int arg;
	int nif;
};

struct child {
	char name[sizeof(((struct shca_vfs_dirent *)0)->name)];
	struct pos pos;
};

struct children {
	struct child *v;
	int n, cap;
};

static int add(struct children *c, enum kind kind, int arg, int nif,
	       const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static int add(struct children *c, enum kind kind, int arg, int nif,
	       const char *fmt, ...)
{
	va_list ap;

	if (c->n == c->cap) {
		int cap = c->cap ? 2 * c->cap : 32;
		struct child *v = realloc(c->v, (size_t)cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		c->v = v;
		c->cap = cap;
	}
	va_start(ap, fmt);
	vsnprintf(c->v[c->n].name, sizeof(c->v[c->n].name), fmt, ap);
	va_end(ap);
	c->v[c->n].pos = (struct pos){ kind, arg, nif };
	c->n++;
	return 0;
}

/* What the directory at p holds, in the order a listing shows. */
static int children(struct ctx *x, const struct pos *p, struct children *c)
{
	const struct shca_netif *nif = p->nif >= 0 ? &x->list[p->nif] : NULL;
	char name[64];
	int ret = 0, i;
	unsigned int j, len;

	switch (p->kind) {
	case K_DEV_ROOT:
	case K_IB_ROOT:
	case K_UV_ROOT:
		ret = ctx_load(x);
		if (ret)
			return ret;
		if (p->kind == K_UV_ROOT)
			ret = add(c, K_UV_ABI, 0, -1, "abi_version");
		for (i = 0; !ret && i < x->n; i++) {
			if (p->kind == K_IB_ROOT) {
				shca_ident_name(name, sizeof(name),
						x->list[i].name);
				ret = add(c, K_IB_DEV, 0, i, "%s", name);
				continue;
			}
			shca_ident_dev_name(name, sizeof(name),
					    x->list[i].ifindex);
			ret = add(c, p->kind == K_DEV_ROOT ? K_UVERBS :
							    K_UV_DEV,
				  0, i, "%s", name);
		}
		return ret;
	case K_IB_DEV:
		for (i = 0; !ret && i < SHCA_DEV_ATTR_MAX; i++)
			ret = add(c, K_DEV_ATTR, i, p->nif, "%s",
				  shca_vfs_dev_attr_names[i]);
		if (!ret)
			ret = add(c, K_DEVICE, 0, p->nif, "device");
		if (!ret)
			ret = add(c, K_PORTS, 0, p->nif, "ports");
		return ret;
	case K_DEVICE:
		return add(c, K_DEVICE_NET, 0, p->nif, "net");
	case K_DEVICE_NET:
		return add(c, K_NET_LINK, 0, p->nif, "%s", nif->name);
	case K_PORTS:
		return add(c, K_PORT, SHCA_PORT_NUM, p->nif, "%d",
			   SHCA_PORT_NUM);
	case K_PORT:
		for (i = 0; !ret && i < SHCA_PORT_ATTR_MAX; i++)
			ret = add(c, K_PORT_ATTR, i, p->nif, "%s",
				  shca_vfs_port_attr_names[i]);
		if (!ret)
			ret = add(c, K_GIDS, 0, p->nif, "gids");
		if (!ret)
			ret = add(c, K_GID_ATTRS, 0, p->nif, "gid_attrs");
		if (!ret)
			ret = add(c, K_PKEYS, 0, p->nif, "pkeys");
		if (!ret)
			ret = add(c, K_COUNTERS, 0, p->nif, "counters");
		if (!ret)
			ret = add(c, K_HW_COUNTERS, 0, p->nif, "hw_counters");
		return ret;
	case K_GID_ATTRS:
		ret = add(c, K_GID_NDEVS, 0, p->nif, "ndevs");
		if (!ret)
			ret = add(c, K_GID_TYPES, 0, p->nif, "types");
		return ret;
	case K_GIDS:
	case K_GID_NDEVS:
	case K_GID_TYPES:
		len = shca_ident_gid_tbl_len(nif->naddrs);
		for (j = 0; !ret && j < len; j++)
			ret = add(c, p->kind == K_GIDS ? K_GID :
				     p->kind == K_GID_NDEVS ? K_GID_NDEV :
							      K_GID_TYPE,
				  (int)j, p->nif, "%u", j);
		return ret;
	case K_PKEYS:
		for (i = 0; !ret && i < SHCA_MAX_PKEYS; i++)
			ret = add(c, K_PKEY, i, p->nif, "%d", i);
		return ret;
	case K_COUNTERS:
		for (i = 0; !ret && i < SHCA_VFS_PMA_MAX; i++)
			ret = add(c, K_COUNTER, i, p->nif, "%s",
				  shca_vfs_pma[i].name);
		return ret;
	case K_HW_COUNTERS:
		for (i = 0; !ret && i < SHCA_STAT_MAX; i++)
			ret = add(c, K_HW_COUNTER, i, p->nif, "%s",
				  shca_stat_names[i]);
		if (!ret)
			ret = add(c, K_LIFESPAN, 0, p->nif, "lifespan");
		return ret;
	case K_UV_DEV:
		for (i = 0; !ret && i < SHCA_UV_ATTR_MAX; i++)
			ret = add(c, K_UV_ATTR, i, p->nif, "%s",
				  shca_vfs_uv_attr_names[i]);
		if (!ret)
			ret = add(c, K_UV_DEVICE, 0, p->nif, "device");
		return ret;
	default:
		return -ENOTDIR;
	}
}

/* The child of p called name: 0, -ENOENT, -ENOTDIR, -errno. */
static int lookup(struct ctx *x, const struct pos *p, const char *name,
		  struct pos *out)
{
	struct children c = { 0 };
	int ret, i;

	if (shca_vfs_kinds[p->kind].type != SHCA_VFS_DIR)
		return -ENOTDIR;
	ret = children(x, p, &c);
	for (i = 0; !ret && i < c.n; i++)
		if (!strcmp(c.v[i].name, name)) {
			*out = c.v[i].pos;
			break;
		}
	if (!ret && i == c.n)
		ret = -ENOENT;
	free(c.v);
	return ret;
}

/* ------------------------------------------------------------------ */
/* Paths                                                               */

static uint64_t path_ino(const char *path, const char *name)
{
	uint64_t h = 0xcbf29ce484222325ull;
	const unsigned char *s;

	for (s = (const unsigned char *)path; *s; s++)
		h = (h ^ *s) * 0x100000001b3ull;
	if (name) {
		h = (h ^ '/') * 0x100000001b3ull;
		for (s = (const unsigned char *)name; *s; s++)
			h = (h ^ *s) * 0x100000001b3ull;
	}
	return h ? h : 1;
}

/*
 * Split an absolute path into its components, lexically: "." dropped,
 * ".." goes up.  buf holds the components.  The count, or -1 when there
 * are too many (then the path is not the view's); *touched tells whether
 * the path went through the view before ".." took it out.
 */
static enum kind root_of(char **comp, int n, int *len);

static int split(const char *path, char *buf, size_t len, char **comp,
		 bool *trailing, bool *touched)
{
	char *s, *save = NULL, *t;
	int n = 0, rlen;
	size_t l = strlen(path);

	if (l >= len)
		return -1;
	memcpy(buf, path, l + 1);
	*trailing = l > 1 && path[l - 1] == '/';
	for (t = strtok_r(buf, "/", &save); t; t = strtok_r(NULL, "/", &save)) {
		if (!strcmp(t, "."))
			continue;
		if (!strcmp(t, "..")) {
			if (n)
				n--;
			continue;
		}
		if (n == MAX_COMPS)
			return -1;
		comp[n++] = t;
		/* passing through the view on the way elsewhere ("..") */
		if (!*touched && root_of(comp, n, &rlen) != K_NONE)
			*touched = true;
	}
	/* "dir/." and "dir/.." name a directory too */
	s = strrchr(path, '/');
	if (s && (!strcmp(s, "/.") || !strcmp(s, "/..")))
		*trailing = true;
	return n;
}

/* The root a split path starts with (its kind), and its length. */
static enum kind root_of(char **comp, int n, int *len)
{
	unsigned int r;
	int i;

	for (r = 0; r < sizeof(roots) / sizeof(roots[0]); r++) {
		if (n < roots[r].ncomp)
			continue;
		for (i = 0; i < roots[r].ncomp; i++)
			if (strcmp(comp[i], roots[r].comp[i]))
				break;
		if (i == roots[r].ncomp) {
			*len = roots[r].ncomp;
			return roots[r].kind;
		}
	}
	return K_NONE;
}

/*
 * Names are never made by "." or "..": a path that reaches the view,
 * from wherever it starts, spells "infiniband" (the view's roots are
 * /dev/infiniband, /sys/class/infiniband and /sys/class/infiniband_verbs,
 * and no working directory can be inside the view).
 */
bool shca_vfs_maybe(const char *path)
{
	return path && strstr(path, "infiniband");
}

/* Join the components [0, n) into out: 0 or -ENAMETOOLONG. */
static int join(char *out, size_t len, char **comp, int n)
{
	size_t off = 0;
	int i, w;

	out[0] = '\0';
	for (i = 0; i < n; i++) {
		w = snprintf(out + off, len - off, "/%s", comp[i]);
		if (w < 0 || (size_t)w >= len - off)
			return -ENAMETOOLONG;
		off += (size_t)w;
	}
	if (!n)
		snprintf(out, len, "/");
	return 0;
}

static void fill(struct shca_vfs_node *nd, struct ctx *x, const struct pos *p,
		 const char *path, bool dev_tree)
{
	memset(nd, 0, offsetof(struct shca_vfs_node, path));
	nd->type = shca_vfs_kinds[p->kind].type;
	nd->mode = shca_vfs_kinds[p->kind].mode;
	nd->ino = path_ino(path, NULL);
	nd->dev_tree = dev_tree;
	snprintf(nd->path, sizeof(nd->path), "%s", path);
	nd->kind = p->kind;
	nd->arg = p->arg;
	nd->has_nif = p->nif >= 0;
	if (nd->has_nif) {
		nd->nif = x->list[p->nif];
		nd->sys_guid = shca_ident_sys_image_guid(x->list, x->n);
	} else {
		memset(&nd->nif, 0, sizeof(nd->nif));
		nd->sys_guid = 0;
	}
	if (nd->type == SHCA_VFS_CHR)
		shca_ident_uverbs_devno(nd->nif.ifindex, &nd->rdev_major,
					&nd->rdev_minor);
}

/*
 * One pass over path: SHCA_VFS_NOT_OURS, SHCA_VFS_FOUND, -errno, AGAIN
 * (a link was met: next holds the path to resolve instead) or OUT (".."
 * led out of the view: next holds the real path).
 */
#define AGAIN 3
#define OUT 4		/* ... or the real path it leads to */

static int resolve_once(struct ctx *x, const char *path, bool follow,
			struct shca_vfs_node *nd, char *buf, char *next,
			size_t next_len)
{
	char *comp[MAX_COMPS];
	bool trailing, touched = false;
	struct pos p;
	int n, i, start, ret;
	size_t off;

	if (path[0] != '/')
		return SHCA_VFS_NOT_OURS;
	n = split(path, buf, PATH_MAX, comp, &trailing, &touched);
	if (n < 0)
		return SHCA_VFS_NOT_OURS;
	p.kind = root_of(comp, n, &start);
	if (p.kind == K_NONE && touched) {
		/* the kernel could not take it (the view is not there):
		 * the real path it leads to, lexically */
		if (join(next, next_len, comp, n))
			return -ENAMETOOLONG;
		return OUT;
	}
	if (p.kind == K_NONE)
		return SHCA_VFS_NOT_OURS;
	p.arg = 0;
	p.nif = -1;
	for (i = start; i < n; i++) {
		ret = lookup(x, &p, comp[i], &p);
		if (ret)
			return ret;
		if (shca_vfs_kinds[p.kind].type != SHCA_VFS_LINK ||
		    (i == n - 1 && !follow && !trailing))
			continue;
		/* a link: its directory, its target, the rest of the path */
		if (join(next, next_len, comp, i))
			return -ENAMETOOLONG;
		off = strlen(next);
		if (off + 1 >= next_len)
			return -ENAMETOOLONG;
		next[off++] = '/';
		ret = shca_vfs_link_target(&(struct shca_vfs_node){
						   .kind = p.kind,
						   .has_nif = true,
						   .nif = x->list[p.nif] },
					   next + off, next_len - off);
		if (ret < 0)
			return ret;
		off += (size_t)ret;
		for (i++; i < n; i++) {
			ret = snprintf(next + off, next_len - off, "/%s",
				       comp[i]);
			if (ret < 0 || (size_t)ret >= next_len - off)
				return -ENAMETOOLONG;
			off += (size_t)ret;
		}
		if (trailing && off + 1 < next_len)
			next[off++] = '/';
		next[off] = '\0';
		return AGAIN;
	}
	if (trailing && shca_vfs_kinds[p.kind].type != SHCA_VFS_DIR)
		return -ENOTDIR;
	ret = join(next, next_len, comp, n);
	if (ret)
		return ret;
	fill(nd, x, &p, next, !strcmp(comp[0], "dev"));
	return SHCA_VFS_FOUND;
}

int shca_vfs_resolve(const char *path, bool follow,
		     struct shca_vfs_node *node, char *real, size_t real_len)
{
	/* on the heap: callers may run on small thread stacks */
	struct {
		char buf[PATH_MAX], a[PATH_MAX], b[PATH_MAX];
	} *w;
	const char *cur = path;
	struct ctx x = { 0 };
	int i, ret = -ELOOP;

	if (!path || path[0] != '/')
		return SHCA_VFS_NOT_OURS;
	w = malloc(sizeof(*w));
	if (!w)
		return -ENOMEM;
	for (i = 0; i <= MAX_LINKS; i++) {
		char *next = (i & 1) ? w->b : w->a;

		ret = resolve_once(&x, cur, follow, node, w->buf, next,
				   PATH_MAX);
		if (ret == AGAIN) {
			cur = next;
			ret = -ELOOP;
			continue;
		}
		if (ret == OUT) {
			cur = next;
			ret = SHCA_VFS_NOT_OURS;
			i++;	/* out: a real path */
		}
		if (ret == SHCA_VFS_NOT_OURS && i) {
			/* a link led out of the view */
			if (strlen(cur) >= real_len) {
				ret = -ENAMETOOLONG;
			} else {
				memcpy(real, cur, strlen(cur) + 1);
				ret = SHCA_VFS_REAL;
			}
		}
		break;
	}
	ctx_free(&x);
	free(w);
	return ret;
}

int shca_vfs_list(const struct shca_vfs_node *dir,
		  struct shca_vfs_dirent **out)
{
	static const unsigned char dt[] = {
		[SHCA_VFS_DIR] = DT_DIR, [SHCA_VFS_FILE] = DT_REG,
		[SHCA_VFS_LINK] = DT_LNK, [SHCA_VFS_CHR] = DT_CHR,
	};
	struct ctx x = { 0 };
	struct children c = { 0 };
	struct shca_vfs_dirent *d = NULL;
	struct pos p = { (enum kind)dir->kind, dir->arg, -1 };
	int ret, i;

	*out = NULL;
	if (dir->type != SHCA_VFS_DIR)
		return -ENOTDIR;
	if (dir->has_nif) {
		/* the device as it was resolved: no second look */
		x.list = (struct shca_netif *)&dir->nif;
		x.n = 1;
		x.loaded = true;
		x.borrowed = true;
		p.nif = 0;
	}
	ret = children(&x, &p, &c);
	if (!ret && c.n) {
		d = calloc((size_t)c.n, sizeof(*d));
		if (!d)
			ret = -ENOMEM;
	}
	for (i = 0; !ret && i < c.n; i++) {
		snprintf(d[i].name, sizeof(d[i].name), "%s", c.v[i].name);
		d[i].d_type = dt[shca_vfs_kinds[c.v[i].pos.kind].type];
		d[i].ino = path_ino(dir->path, c.v[i].name);
	}
	free(c.v);
	ctx_free(&x);
	if (ret) {
		free(d);
		return ret;
	}
	*out = d;
	return c.n;
}

const char *const *shca_vfs_extra_names(const char *dir)
{
	static const char *const dev[] = { "infiniband", NULL };
	static const char *const class[] = { "infiniband", "infiniband_verbs",
					     NULL };

	if (!strcmp(dir, "/dev"))
		return dev;
	if (!strcmp(dir, "/sys/class"))
		return class;
	return NULL;
}
