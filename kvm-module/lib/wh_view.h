/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Wormhole exitless switch: the pure logic shared by the KVM patch
 * (arch/x86/kvm/vmx/wormhole.c) and the user-space unit tests
 * (tests/exitless/).  Nothing in here touches hardware, allocates memory on
 * its own or sleeps: memory comes through struct wh_ept_ops callbacks.
 *
 *  - EPT entry and EPTP encoding (Intel SDM vol. 3C, 29.3.2 / 25.6.11)
 *  - validation of a VMM's view request (a list of ranges)
 *  - construction / lookup / teardown of a 4-level EPT from such a list
 *  - the per-vCPU EPTP list (512 entries, entry 0 = the VM's own EPT)
 */
#ifndef WH_VIEW_H
#define WH_VIEW_H

#include "wh_types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define WH_PAGE_SHIFT 12
#define WH_PAGE_SIZE (1ull << WH_PAGE_SHIFT)

/* Permissions of a range, the same bits as EPT R/W/X (bits 0..2). */
#define WH_PERM_R 0x1u
#define WH_PERM_W 0x2u
#define WH_PERM_X 0x4u
#define WH_PERM_MASK 0x7u

/* Limits (also reported to user space through the uapi). */
#define WH_MAX_RANGES 64          /* ranges in one view request           */
#define WH_MAX_VIEWS 16           /* views per VM                          */
#define WH_MAX_VIEW_PAGES (1u << 18) /* 4 KiB pages in one view (1 GiB)     */
#define WH_EPTP_ENTRIES 512       /* architectural EPTP list size          */
#define WH_GPA_BITS 48            /* 4-level EPT reaches 2^48              */
#define WH_HVA_LIMIT (1ull << 47) /* user half of a 4-level address space  */

/* One range of a view request; layout identical to struct kvm_wh_range. */
struct wh_range {
	wh_u64 gpa;   /* guest-physical start, 4 KiB aligned       */
	wh_u64 size;  /* bytes, multiple of 4 KiB, > 0              */
	wh_u64 hva;   /* VMM (host user) address backing the range  */
	wh_u32 perms; /* WH_PERM_*                                  */
	wh_u32 flags; /* must be 0                                  */
};

/* ---- EPT encoding ------------------------------------------------------ */
#define WH_EPT_R (1ull << 0)
#define WH_EPT_W (1ull << 1)
#define WH_EPT_X (1ull << 2)
#define WH_EPT_MT_SHIFT 3         /* leaf memory type, bits 5:3          */
#define WH_EPT_IPAT (1ull << 6)   /* ignore guest PAT                    */
#define WH_EPT_A (1ull << 8)
#define WH_EPT_D (1ull << 9)
#define WH_EPT_ADDR_MASK 0x000ffffffffff000ull
#define WH_MT_UC 0u
#define WH_MT_WB 6u

/* EPTP: bits 2:0 memory type of the paging structures, 5:3 walk length-1,
 * bit 6 A/D enable, 51:12 PML4 address. */
#define WH_EPTP_MT_WB 6ull
#define WH_EPTP_PWL4 (3ull << 3)
#define WH_EPTP_AD (1ull << 6)

wh_u64 wh_ept_leaf(wh_u64 host_pfn, wh_u32 perms);
wh_u64 wh_ept_table(wh_u64 table_pfn);
wh_u64 wh_eptp(wh_u64 root_pfn);
/* Is this a value VMFUNC would accept in an EPTP list (4-level, WB/UC,
 * no reserved bits)? ad_ok: the CPU supports EPT A/D. */
bool wh_eptp_valid(wh_u64 eptp, bool ad_ok);
/* Index into the table at `level` (4 = PML4 ... 1 = PT) for gpa. */
static inline unsigned wh_ept_index(wh_u64 gpa, int level)
{
	return (unsigned)((gpa >> (WH_PAGE_SHIFT + 9 * (level - 1))) & 511);
}
static inline bool wh_ept_present(wh_u64 e) { return (e & 7) != 0; }
static inline wh_u64 wh_ept_pfn(wh_u64 e) { return (e & WH_EPT_ADDR_MASK) >> WH_PAGE_SHIFT; }

/* ---- request validation ----------------------------------------------- */
/* Error codes are negative errno values:
 *  -EINVAL  empty list, zero size, misaligned, reserved flag/perm bits,
 *           gpa/hva beyond the limits, arithmetic overflow
 *  -EPERM   permissions not allowed: no R (write-only / execute-only) or W+X
 *  -EEXIST  two ranges overlap in guest-physical space
 *  -E2BIG   too many ranges or too many pages in the view
 * *bad (if not NULL) gets the index of the offending range (or -1). */
int wh_validate_ranges(const struct wh_range *r, wh_u32 n, int *bad);
wh_u64 wh_ranges_pages(const struct wh_range *r, wh_u32 n);

/* ---- EPT construction -------------------------------------------------- */
struct wh_ept_ops {
	/* Allocate a zeroed 4 KiB table; return its kernel/user pointer and
	 * its host pfn; NULL on failure. */
	wh_u64 *(*alloc_table)(void *ctx, wh_u64 *pfn);
	/* Pointer to a table allocated by alloc_table, by pfn. */
	wh_u64 *(*table_va)(void *ctx, wh_u64 pfn);
	void (*free_table)(void *ctx, wh_u64 pfn);
	/* Host pfn backing page `page` of range `ri` (already pinned by the
	 * caller); negative errno on failure. */
	int (*host_pfn)(void *ctx, wh_u32 ri, wh_u64 page, wh_u64 *pfn);
};

/* Build a 4-level EPT mapping exactly the given (validated) ranges with
 * 4 KiB leaves.  On success *root_pfn is the PML4. On failure everything
 * allocated is freed again. Returns 0 or negative errno. *tables counts
 * the paging-structure pages used. */
int wh_view_build(const struct wh_ept_ops *ops, void *ctx,
		  const struct wh_range *r, wh_u32 n, wh_u64 *root_pfn,
		  wh_u32 *tables);
/* Walk: returns the leaf entry mapping gpa (0 if not mapped). */
wh_u64 wh_view_lookup(const struct wh_ept_ops *ops, void *ctx,
		      wh_u64 root_pfn, wh_u64 gpa);
/* Free every paging-structure page (not the leaf host pages). */
void wh_view_free(const struct wh_ept_ops *ops, void *ctx, wh_u64 root_pfn);

/* ---- EPTP list ----------------------------------------------------------- */
/* The per-vCPU list page, owned by KVM.  Entry 0 is always the VM's own EPT
 * root; entries 1..511 are views; 0 means empty (VMFUNC to it exits with
 * basic reason 59, which KVM turns into "back to entry 0 + #UD"). */
struct wh_eptp_list {
	wh_u64 *e;            /* 512 entries (the page itself)           */
	wh_u16 view_of[WH_EPTP_ENTRIES]; /* view id per index, 0 = none  */
	wh_u32 nr_attached;
};
void wh_list_init(struct wh_eptp_list *l, wh_u64 *page);
/* Set entry 0 (on MMU root load). */
void wh_list_set_root(struct wh_eptp_list *l, wh_u64 eptp);
/* -EINVAL bad index (0 or >= 512) or invalid eptp, -EBUSY slot in use,
 * -E2BIG more than WH_MAX_VIEWS attached. */
int wh_list_attach(struct wh_eptp_list *l, wh_u32 index, wh_u16 view_id,
		   wh_u64 eptp);
/* -EINVAL bad index, -ENOENT slot empty. */
int wh_list_detach(struct wh_eptp_list *l, wh_u32 index);
/* Which list index does the EPTP the CPU currently runs on belong to?
 * 0 for the VM's own EPT, >0 for a view, -1 if unknown. */
int wh_list_index_of(const struct wh_eptp_list *l, wh_u64 cur_eptp);
/* Number of slots that reference view_id. */
wh_u32 wh_list_refs(const struct wh_eptp_list *l, wh_u16 view_id);

#ifdef __cplusplus
}
#endif
#endif
