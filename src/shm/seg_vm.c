// SPDX-License-Identifier: MIT
/*
 * What the kernel says about this process's own memory, for shm/seg.c:
 * which mapping covers an address, which pages of a range hold data, and
 * which parts of it the program locked (smaps' VmFlags).
 *
 * Nothing here takes a lock or allocates: the functions run in a child
 * right after fork() as well (seg.c's atfork handler), where only system
 * calls are safe.  The caller owns the descriptors (/proc/self/maps,
 * /proc/self/pagemap, opened by this very process).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/procmap.h"
#include "seg.h"

/*
 * One registration asks the kernel about the same mappings twice: the
 * range check (verbs/mr_range.c), then shca_seg_map's plan.  Between
 * shca_vma_note_begin and shca_vma_note_end (on this thread) the answers
 * are kept, and the plan takes them instead of asking again: a mapping
 * changed in between by another thread is a change during registration,
 * which README forbids (and which the plan's own query would not catch
 * either, a moment before the remap).
 */
static __thread struct shca_vma_notes *noting;	/* the caller's */

void shca_vma_note_begin(struct shca_vma_notes *n)
{
	n->n = 0;
	noting = n;
}

void shca_vma_note_end(void)
{
	noting = NULL;
}

bool shca_vma_noted(uintptr_t addr, struct shca_vma *v)
{
	const struct shca_vma_notes *n = noting;

	for (unsigned int i = 0; n && i < n->n && i < SHCA_VMA_NOTES; i++)
		if (n->v[i].start <= addr && addr < n->v[i].end) {
			*v = n->v[i];
			return true;
		}
	return false;
}

/* The kernel's answer to PROCMAP_QUERY: 0, -ENOENT (nothing at or above
 * addr), -ENOTTY (no such ioctl: ask the text). */
static int vma_by_query(int fd, uintptr_t addr, struct shca_vma *v)
{
	struct shca_procmap_query q;

	memset(&q, 0, sizeof(q));
	q.size = sizeof(q);
	q.query_flags = SHCA_PROCMAP_COVERING_OR_NEXT;
	q.query_addr = addr;
	q.vma_name_addr = (uintptr_t)v->name;
	q.vma_name_size = sizeof(v->name);
	if (ioctl(fd, SHCA_PROCMAP_QUERY, &q) < 0) {
		if (errno == ENOENT)
			return -ENOENT;
		if (errno == ENAMETOOLONG) {
			/* a long file name: a file, refused anyway */
			q.vma_name_size = 0;
			q.vma_name_addr = 0;
			if (ioctl(fd, SHCA_PROCMAP_QUERY, &q) < 0)
				return errno == ENOENT ? -ENOENT : -ENOTTY;
			strcpy(v->name, "/");
		} else {
			return -ENOTTY;
		}
	} else if (!q.vma_name_size) {
		v->name[0] = 0;
	}
	if (q.vma_end <= addr || q.vma_start >= q.vma_end)
		return -ENOTTY;		/* not what was asked */
	v->start = q.vma_start;
	v->end = q.vma_end;
	v->prot = (q.vma_flags & SHCA_PROCMAP_READABLE ? PROT_READ : 0) |
		  (q.vma_flags & SHCA_PROCMAP_WRITABLE ? PROT_WRITE : 0) |
		  (q.vma_flags & SHCA_PROCMAP_EXECUTABLE ? PROT_EXEC : 0);
	v->shared = q.vma_flags & SHCA_PROCMAP_SHARED;
	v->ino = q.inode;
	v->dev_major = q.dev_major;
	v->dev_minor = q.dev_minor;
	v->pgoff = q.vma_offset;
	v->page_size = q.vma_page_size;
	if (noting)
		noting->v[noting->n++ % SHCA_VMA_NOTES] = *v;
	return 0;
}

int shca_vma_query(int maps_fd, uintptr_t addr, struct shca_vma *v)
{
	return vma_by_query(maps_fd, addr, v);
}

static unsigned long parse_hex(const char **p)
{
	unsigned long v = 0;
	const char *s = *p;

	for (;; s++) {
		if (*s >= '0' && *s <= '9')
			v = v << 4 | (unsigned long)(*s - '0');
		else if (*s >= 'a' && *s <= 'f')
			v = v << 4 | (unsigned long)(*s - 'a' + 10);
		else
			break;
	}
	*p = s;
	return v;
}

/* One line of /proc/self/maps: "lo-hi rwxp off maj:min ino   name". */
static bool parse_line(const char *s, struct shca_vma *v)
{
	unsigned long ino = 0;

	v->start = parse_hex(&s);
	if (*s++ != '-')
		return false;
	v->end = parse_hex(&s);
	if (*s++ != ' ' || strlen(s) < 5)
		return false;
	v->prot = (s[0] == 'r' ? PROT_READ : 0) |
		  (s[1] == 'w' ? PROT_WRITE : 0) |
		  (s[2] == 'x' ? PROT_EXEC : 0);
	v->shared = s[3] == 's';
	s += 5;
	v->pgoff = parse_hex(&s);
	if (*s++ != ' ')
		return false;
	v->dev_major = (uint32_t)parse_hex(&s);
	if (*s++ != ':')
		return false;
	v->dev_minor = (uint32_t)parse_hex(&s);
	if (*s++ != ' ')
		return false;
	while (*s >= '0' && *s <= '9')
		ino = ino * 10 + (unsigned long)(*s++ - '0');
	v->ino = ino;
	while (*s == ' ')
		s++;
	strncpy(v->name, s, sizeof(v->name) - 1);
	v->name[sizeof(v->name) - 1] = 0;
	/* a hugetlb mapping is a file (its inode is not 0): refused as one */
	v->page_size = 4096;
	return v->start < v->end;
}

/* The same answer from the text, read with read(2) into a fixed buffer. */
static int vma_by_text(int fd, uintptr_t addr, struct shca_vma *v)
{
	char buf[4096], line[512];
	size_t ll = 0;
	ssize_t n;

	if (lseek(fd, 0, SEEK_SET) < 0)
		return -ENOTTY;
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		for (ssize_t i = 0; i < n; i++) {
			if (buf[i] != '\n') {
				if (ll < sizeof(line) - 1)	/* a long name
								 * is cut: fine */
					line[ll++] = buf[i];
				continue;
			}
			line[ll] = 0;
			ll = 0;
			if (parse_line(line, v) && v->end > addr)
				return 0;
		}
	}
	return n < 0 ? -ENOTTY : -ENOENT;
}

/*
 * The mapping that covers addr, or the first one above it: 0, -ENOENT
 * when there is none, -EIO when the kernel would not say.
 */
int shca_vma_find(int maps_fd, uintptr_t addr, struct shca_vma *v)
{
	static bool no_query;
	int ret;

	if (!__atomic_load_n(&no_query, __ATOMIC_RELAXED)) {
		ret = vma_by_query(maps_fd, addr, v);
		if (ret != -ENOTTY)
			return ret;
		__atomic_store_n(&no_query, true, __ATOMIC_RELAXED);
	}
	ret = vma_by_text(maps_fd, addr, v);
	return ret == -ENOTTY ? -EIO : ret;
}

/* PAGEMAP_SCAN: 0, or -ENOTTY (no such ioctl) before any callback. */
static int scan_by_ioctl(int fd, uintptr_t start, uintptr_t end,
			 shca_pages_fn fn, void *arg)
{
	struct shca_page_region vec[64];
	struct shca_pm_scan_arg a;
	uintptr_t cur = start;
	bool first = true;
	long n;

	while (cur < end) {
		memset(&a, 0, sizeof(a));
		a.size = sizeof(a);
		a.start = cur;
		a.end = end;
		a.vec = (uintptr_t)vec;
		a.vec_len = sizeof(vec) / sizeof(vec[0]);
		/* present or swapped, and not the shared zero page (read,
		 * never written: nothing to keep) */
		a.category_inverted = SHCA_PAGE_IS_PFNZERO;
		a.category_mask = SHCA_PAGE_IS_PFNZERO;
		a.category_anyof_mask = SHCA_PAGE_IS_PRESENT |
					SHCA_PAGE_IS_SWAPPED;
		a.return_mask = SHCA_PAGE_IS_PRESENT | SHCA_PAGE_IS_SWAPPED;
		n = ioctl(fd, SHCA_PAGEMAP_SCAN, &a);
		if (n < 0) {
			if (first)
				return -ENOTTY;
			return -errno;
		}
		first = false;
		for (long i = 0; i < n; i++) {
			int ret = fn((uintptr_t)vec[i].start,
				     (uintptr_t)vec[i].end, arg);

			if (ret)
				return ret;
		}
		if (a.walk_end <= cur || a.walk_end > end)
			return -EIO;	/* no progress: not what was asked */
		cur = (uintptr_t)a.walk_end;
	}
	return 0;
}

/* /proc/self/pagemap, 8 bytes a page: bit 63 present, 62 swapped. */
static int scan_by_read(int fd, uintptr_t start, uintptr_t end,
			shca_pages_fn fn, void *arg)
{
	uint64_t ent[512];
	uintptr_t cur = start, run = 0;
	bool in_run = false;

	while (cur < end) {
		size_t want = (end - cur) / 4096, got;
		ssize_t n;

		if (want > 512)
			want = 512;
		n = pread(fd, ent, want * 8, (off_t)(cur / 4096 * 8));
		if (n < 8)
			return n < 0 ? -errno : -EIO;
		got = (size_t)n / 8;
		for (size_t i = 0; i < got; i++, cur += 4096) {
			bool used = ent[i] >> 62 & 3;

			if (used && !in_run) {
				run = cur;
				in_run = true;
			} else if (!used && in_run) {
				int ret = fn(run, cur, arg);

				if (ret)
					return ret;
				in_run = false;
			}
		}
	}
	return in_run ? fn(run, end, arg) : 0;
}

/*
 * Calls fn for each run of pages of [start, end) (page-aligned) that hold
 * data: present or swapped out.  mincore() would miss the swapped ones.
 * 0, fn's non-zero return, or a negative errno.
 */
int shca_pages_scan(int pagemap_fd, uintptr_t start, uintptr_t end,
		    shca_pages_fn fn, void *arg)
{
	static bool no_scan;
	int ret;

	if (!__atomic_load_n(&no_scan, __ATOMIC_RELAXED)) {
		ret = scan_by_ioctl(pagemap_fd, start, end, fn, arg);
		if (ret != -ENOTTY)
			return ret;
		__atomic_store_n(&no_scan, true, __ATOMIC_RELAXED);
	}
	return scan_by_read(pagemap_fd, start, end, fn, arg);
}

/* ------------------------------------------------------------------ */
/* mlock state (seg.h)                                                 */

/* A file read a line at a time into out (longer lines cut), without
 * allocating: false at its end. */
struct lines {
	int fd;
	size_t len, pos;
	char buf[4096];
};

static bool line_next(struct lines *l, char *out, size_t n)
{
	size_t k = 0;

	for (;;) {
		char c;

		if (l->pos == l->len) {
			ssize_t r = read(l->fd, l->buf, sizeof(l->buf));

			if (r <= 0) {
				out[k] = '\0';
				return k > 0;
			}
			l->len = (size_t)r;
			l->pos = 0;
		}
		c = l->buf[l->pos++];
		if (c == '\n')
			break;
		if (k + 1 < n)
			out[k++] = c;
	}
	out[k] = '\0';
	return true;
}

/* Is flag (two letters) among the VmFlags of line? */
static bool vm_flag(const char *line, const char *flag)
{
	const char *p = line + strlen("VmFlags:");

	for (; (p = strstr(p, flag)); p += 2)
		if (p[-1] == ' ' && (p[2] == ' ' || p[2] == '\0'))
			return true;
	return false;
}

/* Does /proc/self/status say some of our memory is locked (VmLck)?
 * true when it cannot be read: smaps then decides. */
static bool any_locked(void)
{
	struct lines l = { .fd = open("/proc/self/status",
				      O_RDONLY | O_CLOEXEC) };
	char line[256];
	bool any = true;

	if (l.fd < 0)
		return true;
	while (line_next(&l, line, sizeof(line)))
		if (!strncmp(line, "VmLck:", 6)) {
			any = strtoull(line + 6, NULL, 10) != 0;
			break;
		}
	close(l.fd);
	return any;
}

void shca_lock_runs_read(uintptr_t start, uintptr_t end,
			 struct shca_lock_runs *r)
{
	struct lines l;
	unsigned long lo = 0, hi = 0;
	char line[512];
	bool in = false;

	r->n = 0;
	if (!any_locked())
		return;		/* the usual case: one short read */
	l.fd = open("/proc/self/smaps", O_RDONLY | O_CLOEXEC);
	l.len = l.pos = 0;
	if (l.fd < 0)
		return;
	while (r->n < SHCA_LOCK_RUNS && line_next(&l, line, sizeof(line))) {
		/* a mapping's first line, "start-end perms ...": its
		 * attribute lines ("Size:", "AnonHugePages:") never read
		 * as two numbers */
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {
			in = lo < end && hi > start;
			continue;
		}
		if (!in || strncmp(line, "VmFlags:", 8) || !vm_flag(line, "lo"))
			continue;
		r->run[r->n].start = lo > start ? lo : start;
		r->run[r->n].end = hi < end ? hi : end;
		r->run[r->n].onfault = vm_flag(line, "lf");
		r->n++;
	}
	close(l.fd);
}

void shca_lock_runs_apply(const struct shca_lock_runs *r)
{
	for (unsigned int i = 0; i < r->n; i++)
		/* as the program had it; a failure leaves it unlocked, as
		 * the new mapping is */
		(void)mlock2((void *)r->run[i].start,
			     r->run[i].end - r->run[i].start,
			     r->run[i].onfault ? MLOCK_ONFAULT : 0);
}
