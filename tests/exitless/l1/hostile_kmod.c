// SPDX-License-Identifier: GPL-2.0
/*
 * wh_hostile: a hostile L2 kernel for the exitless chain bed
 * (tests/exitless/l1/run-chain.sh, job chain-l2.sh). Loaded beside
 * wormhole_gate.ko, it tries what a guest kernel could try against the
 * EPTP list and the views, and prints one line per check:
 *   "wh-hostile: RESULT NAME PASS|FAIL detail"
 * Checks (at module init, once: init succeeds and the job unloads it; an
 * init that fails would be retried by busybox's insmod):
 *   vmfunc_*       VMFUNC with an index outside the list / an empty entry /
 *                  leaf 1: #UD (caught through the exception table), while
 *                  VMFUNC(0, 0) -- the VM's own EPT -- is allowed;
 *   vmwrite        VMWRITE of EPTP_LIST_ADDRESS: #UD;
 *   msr_*          writes to the VMX capability MSRs (VM functions): #GP;
 *   hypercall_*    hypercall numbers around KVM_CAP_WORMHOLE_VIEWS: ENOSYS;
 *   desc/code      writes to the gate descriptor and code pages through a
 *                  writable kernel mapping: do not land (read-only slots);
 *   eptp_list_scan no page of the guest's RAM (all it can address besides
 *                  the gate window) holds an EPTP list: a scan for the
 *                  list's shape finds only the decoy this module planted.
 * L1 counts the VMFUNC exits (kvm_exit tracepoint, reason 59) and #UD
 * injections it saw while this ran.
 */
#include <linux/module.h>
#include <linux/io.h>
#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/gfp.h>
#include <linux/irqflags.h>
#include <asm/asm.h>
#include <asm/msr.h>
#include <asm/kvm_para.h>

#include "wh_gate.h"

static unsigned long gate_gpa;
module_param(gate_gpa, ulong, 0444);
/* redirect_slot=S: only rewrite the gate page tables so that slot S's
 * channel page maps the gate's PML4 page (read-only in the view): the next
 * SUBMIT on S makes the gate itself store onto a read-only view page. */
static int redirect_slot = -1;
module_param(redirect_slot, int, 0444);
static int fails;

#define RESULT(name, ok, fmt, ...)                                                        \
	do {                                                                               \
		bool _ok = (ok);                                                           \
		pr_info("wh-hostile: RESULT %s %s " fmt "\n", name, _ok ? "PASS" : "FAIL", \
			##__VA_ARGS__);                                                    \
		if (!_ok)                                                                  \
			fails++;                                                           \
	} while (0)

/* VMFUNC leaf/index; returns 1 if it raised an exception (#UD), else 0. */
static int try_vmfunc(u32 leaf, u32 index)
{
	int faulted = 1;
	unsigned long flags;

	local_irq_save(flags);
	asm volatile("1: .byte 0x0f, 0x01, 0xd4\n\t"
		     "movl $0, %[f]\n"
		     "2:\n"
		     _ASM_EXTABLE(1b, 2b)
		     : [f] "+r"(faulted)
		     : "a"(leaf), "c"(index)
		     : "memory");
	local_irq_restore(flags);
	return faulted;
}

static int try_vmwrite(unsigned long field, unsigned long value)
{
	int faulted = 1;

	asm volatile("1: vmwrite %[v], %[fld]\n\t"
		     "movl $0, %[f]\n"
		     "2:\n"
		     _ASM_EXTABLE(1b, 2b)
		     : [f] "+r"(faulted)
		     : [v] "r"(value), [fld] "r"(field)
		     : "cc", "memory");
	return faulted;
}

static bool eptp_shaped(u64 e)
{
	/* WB (6), 4-level walk (3 << 3), with or without A/D (bit 6). */
	return e && ((e & 0xfff) == 0x5e || (e & 0xfff) == 0x1e) && !(e >> 52);
}

/* An EPTP list as KVM builds it: entry 0 (the VM's EPT) and at least the
 * gate view's entry are EPTPs, everything else is 0. */
static bool looks_like_list(const u64 *p)
{
	int i, n = 0;

	if (!eptp_shaped(p[0]))
		return false;
	for (i = 1; i < 512; i++) {
		if (!p[i])
			continue;
		if (!eptp_shaped(p[i]))
			return false;
		n++;
	}
	return n >= 1;
}

static void check_vmfunc(void)
{
	int f;

	f = try_vmfunc(0, 0);
	RESULT("vmfunc_own_ept", !f, "VMFUNC(0, 0) (the VM's own EPT): %s", f ? "#UD" : "no fault");
	f = try_vmfunc(0, 600);
	RESULT("vmfunc_index_600", f, "VMFUNC(0, 600) (outside the list): %s", f ? "#UD" : "NO FAULT");
	f = try_vmfunc(0, 5);
	RESULT("vmfunc_empty_index", f, "VMFUNC(0, 5) (empty entry): %s", f ? "#UD" : "NO FAULT");
	f = try_vmfunc(1, 0);
	RESULT("vmfunc_leaf_1", f, "VMFUNC leaf 1: %s", f ? "#UD" : "NO FAULT");
	pr_info("wh-hostile: vmfunc exits expected 3\n");
	f = try_vmwrite(0x2024 /* EPTP_LIST_ADDRESS */, 0);
	RESULT("vmwrite", f, "VMWRITE EPTP_LIST_ADDRESS: %s", f ? "#UD" : "NO FAULT");
}

static void check_msrs_and_hypercalls(void)
{
	static const u32 msrs[] = {0x491 /* IA32_VMX_VMFUNC */, 0x48b /* PROCBASED_CTLS2 */};
	static const unsigned long nrs[] = {0x5748, 0x5749, 0x574a, 1000};
	char name[32];
	int i, r;

	for (i = 0; i < ARRAY_SIZE(msrs); i++) {
		r = wrmsr_safe(msrs[i], 0xffffffffu, 0xffffffffu);
		snprintf(name, sizeof(name), "msr_%x", msrs[i]);
		RESULT(name, r != 0, "wrmsr %#x: %s", msrs[i], r ? "#GP" : "ACCEPTED");
	}
	for (i = 0; i < ARRAY_SIZE(nrs); i++) {
		long ret = kvm_hypercall1(nrs[i], 1);

		snprintf(name, sizeof(name), "hypercall_%lx", nrs[i]);
		RESULT(name, ret == -1000 /* -KVM_ENOSYS */, "hypercall %#lx: %ld (want -1000, ENOSYS)", nrs[i], ret);
	}
}

static void check_ro_pages(void)
{
	static const struct { const char *name; unsigned long off, at; } ro[] = {
		{"desc_write", WH_GATE_DESC_OFF, 0x10 /* WH_DESC_GATE_GPA */},
		{"desc_view_index_write", WH_GATE_DESC_OFF, WH_DESC_VIEW_INDEX},
		{"code_write", WH_GATE_CODE_OFF, 0},
	};
	int i;

	for (i = 0; i < ARRAY_SIZE(ro); i++) {
		/* A writable WB mapping of a read-only memory slot. */
		u8 *p = memremap(gate_gpa + ro[i].off, PAGE_SIZE, MEMREMAP_WB);
		u64 before, after;

		if (!p) {
			RESULT(ro[i].name, false, "memremap failed");
			continue;
		}
		before = READ_ONCE(*(u64 *)(p + ro[i].at));
		/* The view index: 1 -> 2 would send the gate to an empty entry. */
		WRITE_ONCE(*(u64 *)(p + ro[i].at), ro[i].at == WH_DESC_VIEW_INDEX ? before + 1 : ~before);
		after = READ_ONCE(*(u64 *)(p + ro[i].at));
		RESULT(ro[i].name, after == before, "word at +%#lx of page %#lx: %016llx, after writing it %016llx",
		       ro[i].at, ro[i].off, before, after);
		memunmap(p);
	}
}

static void check_eptp_list(void)
{
	unsigned long pfn, end = __pa(high_memory - 1) >> PAGE_SHIFT, pages = 0, found = 0, other = 0;
	u64 *decoy = (u64 *)get_zeroed_page(GFP_KERNEL);
	unsigned long decoy_pfn;

	if (!decoy) {
		RESULT("eptp_list_scan", false, "no memory");
		return;
	}
	/* The decoy proves the scan would see a list if one were there. */
	decoy[0] = 0x1234000ull | 0x5e;
	decoy[1] = 0x5678000ull | 0x5e;
	decoy_pfn = virt_to_phys(decoy) >> PAGE_SHIFT;
	for (pfn = 0; pfn <= end; pfn++) {
		const u64 *p;

		if (!page_is_ram(pfn))
			continue;
		pages++;
		p = phys_to_virt((phys_addr_t)pfn << PAGE_SHIFT);
		if (!looks_like_list(p))
			continue;
		if (pfn == decoy_pfn) {
			found++;
		} else {
			other++;
			pr_info("wh-hostile: EPTP-list-shaped page at pfn %#lx: %016llx %016llx\n", pfn, p[0], p[1]);
		}
		cond_resched();
	}
	RESULT("eptp_list_scan", found == 1 && other == 0,
	       "%lu RAM pages scanned: decoy %s, %lu other EPTP-list-shaped pages", pages,
	       found ? "found" : "NOT found", other);
	free_page((unsigned long)decoy);
}

static int redirect(void)
{
	u64 *pt = memremap(gate_gpa + WH_GATE_PT_OFF, WH_GATE_PT_PAGES * PAGE_SIZE, MEMREMAP_WB);
	u64 from = gate_gpa + WH_GATE_CHAN_OFF + (u64)redirect_slot * PAGE_SIZE, to = gate_gpa + WH_GATE_PT_OFF;
	int i, n = 0;

	if (!pt)
		return -ENOMEM;
	for (i = 0; i < WH_GATE_PT_PAGES * 512; i++)
		if ((pt[i] & 1) && (pt[i] & PTE_PFN_MASK) == from) {
			pt[i] = (pt[i] & ~PTE_PFN_MASK) | to;
			n++;
		}
	memunmap(pt);
	pr_info("wh-hostile: gate page tables: slot %d's channel page now maps the gate's PML4 page (%d entries)\n",
		redirect_slot, n);
	return n == 1 ? 0 : -ENOENT;
}

static int __init wh_hostile_init(void)
{
	if (!gate_gpa) {
		pr_info("wh-hostile: RESULT setup FAIL no gate_gpa\n");
		return -EINVAL;
	}
	if (redirect_slot >= 0)
		return redirect_slot < WH_GATE_NSLOTS ? redirect() : -EINVAL;
	pr_info("wh-hostile: begin (gate at %#lx)\n", gate_gpa);
	check_vmfunc();
	check_msrs_and_hypercalls();
	check_ro_pages();
	check_eptp_list();
	pr_info("wh-hostile: end, %d failed\n", fails);
	return 0;
}

static void __exit wh_hostile_exit(void)
{
}

module_init(wh_hostile_init);
module_exit(wh_hostile_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("Wormhole chain bed: hostile guest kernel checks");
