/* SPDX-License-Identifier: MIT */
/*
 * The kernel's questions about this process's own memory, spelt out
 * because Debian 12's headers predate them (include/uapi/linux/fs.h):
 *
 *   PROCMAP_QUERY (Linux 6.11): one VMA of /proc/self/maps by address,
 *   with its permissions, backing file and name, in O(log VMAs);
 *   PAGEMAP_SCAN (Linux 6.7): the populated pages of a range of
 *   /proc/self/pagemap as a list of regions, walking page tables, so an
 *   untouched range of any size costs next to nothing.
 */
#ifndef SOFTHCA_COMMON_PROCMAP_H
#define SOFTHCA_COMMON_PROCMAP_H

#include <stdint.h>
#include <sys/ioctl.h>

struct shca_procmap_query {
	uint64_t size;
	uint64_t query_flags;
	uint64_t query_addr;
	uint64_t vma_start;
	uint64_t vma_end;
	uint64_t vma_flags;
	uint64_t vma_page_size;
	uint64_t vma_offset;
	uint64_t inode;
	uint32_t dev_major;
	uint32_t dev_minor;
	uint32_t vma_name_size;
	uint32_t build_id_size;
	uint64_t vma_name_addr;
	uint64_t build_id_addr;
};

#define SHCA_PROCMAP_QUERY	_IOWR('f', 17, struct shca_procmap_query)
#define SHCA_PROCMAP_READABLE	0x01
#define SHCA_PROCMAP_WRITABLE	0x02
#define SHCA_PROCMAP_EXECUTABLE	0x04
#define SHCA_PROCMAP_SHARED	0x08
#define SHCA_PROCMAP_COVERING_OR_NEXT	0x10

struct shca_page_region {
	uint64_t start;
	uint64_t end;
	uint64_t categories;
};

struct shca_pm_scan_arg {
	uint64_t size;
	uint64_t flags;
	uint64_t start;
	uint64_t end;
	uint64_t walk_end;
	uint64_t vec;
	uint64_t vec_len;
	uint64_t max_pages;
	uint64_t category_inverted;
	uint64_t category_mask;
	uint64_t category_anyof_mask;
	uint64_t return_mask;
};

#define SHCA_PAGEMAP_SCAN	_IOWR('f', 16, struct shca_pm_scan_arg)
#define SHCA_PAGE_IS_PRESENT	(1u << 3)
#define SHCA_PAGE_IS_SWAPPED	(1u << 4)
#define SHCA_PAGE_IS_PFNZERO	(1u << 5)

#endif
