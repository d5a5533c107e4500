// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Wormhole exitless switch: pure logic shared by the KVM patch and the unit
 * tests.  See wh_view.h.
 */
#include "wh_view.h"

wh_u64 wh_ept_leaf(wh_u64 host_pfn, wh_u32 perms)
{
	wh_u64 e = (host_pfn << WH_PAGE_SHIFT) & WH_EPT_ADDR_MASK;

	e |= perms & WH_PERM_MASK; /* R/W/X are EPT bits 0..2 */
	e |= (wh_u64)WH_MT_WB << WH_EPT_MT_SHIFT;
	e |= WH_EPT_IPAT;
	/* A and D preset: the CPU never needs to write our tables, even with
	 * EPT A/D enabled in some future EPTP. */
	e |= WH_EPT_A | WH_EPT_D;
	return e;
}

wh_u64 wh_ept_table(wh_u64 table_pfn)
{
	return ((table_pfn << WH_PAGE_SHIFT) & WH_EPT_ADDR_MASK) |
	       WH_EPT_R | WH_EPT_W | WH_EPT_X | WH_EPT_A;
}

wh_u64 wh_eptp(wh_u64 root_pfn)
{
	/* A/D disabled for views: pages are pinned and never written back. */
	return ((root_pfn << WH_PAGE_SHIFT) & WH_EPT_ADDR_MASK) |
	       WH_EPTP_MT_WB | WH_EPTP_PWL4;
}

bool wh_eptp_valid(wh_u64 eptp, bool ad_ok)
{
	wh_u64 mt = eptp & 7, pwl = (eptp >> 3) & 7;

	if (mt != WH_MT_WB && mt != WH_MT_UC)
		return false;
	if (pwl != 3)
		return false;
	if ((eptp & WH_EPTP_AD) && !ad_ok)
		return false;
	if (eptp & 0xf80ull) /* bits 11:7 reserved */
		return false;
	if (eptp & ~(WH_EPT_ADDR_MASK | 0x7full))
		return false;
	return (eptp & WH_EPT_ADDR_MASK) != 0;
}

wh_u64 wh_ranges_pages(const struct wh_range *r, wh_u32 n)
{
	wh_u64 t = 0;
	wh_u32 i;

	for (i = 0; i < n; i++)
		t += r[i].size >> WH_PAGE_SHIFT;
	return t;
}

int wh_validate_ranges(const struct wh_range *r, wh_u32 n, int *bad)
{
	wh_u64 pages = 0;
	wh_u32 i, j;

	if (bad)
		*bad = -1;
	if (n == 0 || !r)
		return -EINVAL;
	if (n > WH_MAX_RANGES)
		return -E2BIG;
	for (i = 0; i < n; i++) {
		const struct wh_range *x = &r[i];
		wh_u32 p = x->perms;

		if (bad)
			*bad = (int)i;
		if (x->flags || (p & ~WH_PERM_MASK))
			return -EINVAL;
		if (!x->size || (x->gpa | x->size | x->hva) & (WH_PAGE_SIZE - 1))
			return -EINVAL;
		if (x->gpa + x->size < x->gpa ||
		    x->gpa + x->size > (1ull << WH_GPA_BITS))
			return -EINVAL;
		if (x->hva + x->size < x->hva || x->hva + x->size > WH_HVA_LIMIT ||
		    x->hva == 0)
			return -EINVAL;
		if (!(p & WH_PERM_R))
			return -EPERM; /* write-only / execute-only: no */
		if ((p & WH_PERM_W) && (p & WH_PERM_X))
			return -EPERM; /* W^X inside views */
		pages += x->size >> WH_PAGE_SHIFT;
		if (pages > WH_MAX_VIEW_PAGES)
			return -E2BIG;
		for (j = 0; j < i; j++) {
			const struct wh_range *y = &r[j];

			if (x->gpa < y->gpa + y->size && y->gpa < x->gpa + x->size)
				return -EEXIST;
		}
	}
	if (bad)
		*bad = -1;
	return 0;
}

/* Return the table one level below entry `*e`, allocating it if needed. */
static wh_u64 *next_table(const struct wh_ept_ops *ops, void *ctx, wh_u64 *e,
			  wh_u32 *tables)
{
	wh_u64 pfn;
	wh_u64 *t;

	if (wh_ept_present(*e))
		return ops->table_va(ctx, wh_ept_pfn(*e));
	t = ops->alloc_table(ctx, &pfn);
	if (!t)
		return 0;
	if (tables)
		(*tables)++;
	*e = wh_ept_table(pfn);
	return t;
}

int wh_view_build(const struct wh_ept_ops *ops, void *ctx,
		  const struct wh_range *r, wh_u32 n, wh_u64 *root_pfn,
		  wh_u32 *tables)
{
	wh_u64 root, pg, hpfn;
	wh_u64 *pml4, *t;
	wh_u32 i, dummy = 0;
	int lvl, err;

	if (!tables)
		tables = &dummy;
	*tables = 0;
	err = wh_validate_ranges(r, n, 0);
	if (err)
		return err;
	pml4 = ops->alloc_table(ctx, &root);
	if (!pml4)
		return -ENOMEM;
	(*tables)++;
	for (i = 0; i < n; i++) {
		for (pg = 0; pg < r[i].size >> WH_PAGE_SHIFT; pg++) {
			wh_u64 gpa = r[i].gpa + (pg << WH_PAGE_SHIFT);

			t = pml4;
			for (lvl = 4; lvl > 1; lvl--) {
				t = next_table(ops, ctx, &t[wh_ept_index(gpa, lvl)],
					       tables);
				if (!t) {
					err = -ENOMEM;
					goto fail;
				}
			}
			err = ops->host_pfn(ctx, i, pg, &hpfn);
			if (err)
				goto fail;
			t[wh_ept_index(gpa, 1)] = wh_ept_leaf(hpfn, r[i].perms);
		}
	}
	*root_pfn = root;
	return 0;
fail:
	wh_view_free(ops, ctx, root);
	return err;
}

wh_u64 wh_view_lookup(const struct wh_ept_ops *ops, void *ctx,
		      wh_u64 root_pfn, wh_u64 gpa)
{
	wh_u64 *t = ops->table_va(ctx, root_pfn);
	wh_u64 e;
	int lvl;

	for (lvl = 4; lvl > 1; lvl--) {
		e = t[wh_ept_index(gpa, lvl)];
		if (!wh_ept_present(e))
			return 0;
		t = ops->table_va(ctx, wh_ept_pfn(e));
	}
	return t[wh_ept_index(gpa, 1)];
}

static void free_level(const struct wh_ept_ops *ops, void *ctx, wh_u64 pfn,
		       int lvl)
{
	wh_u64 *t = ops->table_va(ctx, pfn);
	int i;

	if (lvl > 1)
		for (i = 0; i < 512; i++)
			if (wh_ept_present(t[i]))
				free_level(ops, ctx, wh_ept_pfn(t[i]), lvl - 1);
	ops->free_table(ctx, pfn);
}

void wh_view_free(const struct wh_ept_ops *ops, void *ctx, wh_u64 root_pfn)
{
	free_level(ops, ctx, root_pfn, 4);
}

void wh_list_init(struct wh_eptp_list *l, wh_u64 *page)
{
	l->e = page;
	memset(page, 0, WH_EPTP_ENTRIES * sizeof(wh_u64));
	memset(l->view_of, 0, sizeof(l->view_of));
	l->nr_attached = 0;
}

void wh_list_set_root(struct wh_eptp_list *l, wh_u64 eptp)
{
	l->e[0] = eptp;
}

int wh_list_attach(struct wh_eptp_list *l, wh_u32 index, wh_u16 view_id,
		   wh_u64 eptp)
{
	if (index == 0 || index >= WH_EPTP_ENTRIES || view_id == 0 ||
	    !wh_eptp_valid(eptp, false))
		return -EINVAL;
	if (l->view_of[index])
		return -EBUSY;
	if (l->nr_attached >= WH_MAX_VIEWS)
		return -E2BIG;
	l->view_of[index] = view_id;
	l->e[index] = eptp;
	l->nr_attached++;
	return 0;
}

int wh_list_detach(struct wh_eptp_list *l, wh_u32 index)
{
	if (index == 0 || index >= WH_EPTP_ENTRIES)
		return -EINVAL;
	if (!l->view_of[index])
		return -ENOENT;
	l->view_of[index] = 0;
	l->e[index] = 0;
	l->nr_attached--;
	return 0;
}

int wh_list_index_of(const struct wh_eptp_list *l, wh_u64 cur)
{
	wh_u32 i;

	if (cur == l->e[0])
		return 0;
	for (i = 1; i < WH_EPTP_ENTRIES; i++)
		if (l->view_of[i] && l->e[i] == cur)
			return (int)i;
	return -1;
}

wh_u32 wh_list_refs(const struct wh_eptp_list *l, wh_u16 view_id)
{
	wh_u32 i, n = 0;

	for (i = 1; i < WH_EPTP_ENTRIES; i++)
		n += l->view_of[i] == view_id;
	return n;
}
