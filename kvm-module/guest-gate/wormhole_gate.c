// SPDX-License-Identifier: GPL-2.0
/*
 * wormhole-gate: guest kernel module for Wormhole's exitless path.
 *
 * The VMM (QEMU with qemu-patches/, or Wormhole's launcher) places a gate
 * window at guest-physical gate_gpa (wh_gate.h): a read-only descriptor and
 * gate code page, page-table and mailbox pages the guest writes, and a
 * server part mapped only in the EPT view.  This module maps the window,
 * writes gate page tables that map the window at the same virtual address
 * as its own mapping, and offers /dev/wormhole-gate (wormhole_gate_uapi.h).
 * Without a valid descriptor at gate_gpa it refuses to load (-ENODEV):
 * guest-lib then falls back to ivshmem polling.
 */
#include <linux/module.h>
#include <linux/miscdevice.h>
#include <linux/fs.h>
#include <linux/io.h>
#include <linux/mm.h>
#include <linux/vmalloc.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/uaccess.h>
#include <asm/nospec-branch.h>
#include <asm/tlbflush.h>

#include "wh_gate.h"
#include "wormhole_gate_uapi.h"

static unsigned long gate_gpa;
module_param(gate_gpa, ulong, 0444);
MODULE_PARM_DESC(gate_gpa, "guest-physical address of the Wormhole gate window");

static u8 *win;                 /* window VA, WH_GATE_WINDOW bytes */
static u32 view_index, nslots;
static DEFINE_SPINLOCK(slot_alloc);
static unsigned long slot_used;
static spinlock_t slot_lock[WH_GATE_NSLOTS];

static long gate_raw(long op, long slot)
{
	long r;
	register long rdi asm("rdi") = op;
	register long rsi asm("rsi") = slot;
	void *fn = win + WH_GATE_CODE_OFF;

	asm volatile(CALL_NOSPEC
		     : "=a"(r), "+r"(rdi), "+r"(rsi)
		     : [thunk_target] "r"(fn)
		     : "rcx", "rdx", "r8", "r9", "r10", "r11", "memory", "cc");
	return r;
}

/* Our kernel mapping: NX everywhere except the code page, which is RO. */
static int tighten_mapping(void)
{
	unsigned long off;
	unsigned int level;

	for (off = 0; off < WH_GATE_WINDOW; off += PAGE_SIZE) {
		pte_t *pte = lookup_address((unsigned long)win + off, &level);

		if (!pte || level != PG_LEVEL_4K)
			return -EFAULT;
		if (off != WH_GATE_CODE_OFF)
			set_pte(pte, pte_set_flags(*pte, _PAGE_NX));
		else	/* read-only and executable: vmap_pfn() may hand
			 * out NX even for PAGE_KERNEL_EXEC (Debian's 6.1 does:
			 * seen as an NX fault on the first call in a guest) */
			set_pte(pte, pte_clear_flags(*pte, _PAGE_RW | _PAGE_NX));
	}
	return 0;
}

/* Gate page tables: map [win, win + WH_GATE_WINDOW) -> gate_gpa, A/D preset
 * (the view maps these pages read-only), NX except the code page. */
static int build_gate_tables(void)
{
	u64 *pml4 = (u64 *)(win + WH_GATE_PT_OFF), *pdpt = pml4 + 512, *pd = pdpt + 512;
	u64 *pt[2] = {pd + 512, pd + 1024};
	unsigned long va = (unsigned long)win, end = va + WH_GATE_WINDOW - 1;
	u64 pa = gate_gpa + WH_GATE_PT_OFF, f = _PAGE_PRESENT | _PAGE_RW | _PAGE_ACCESSED;
	u64 nx = (__supported_pte_mask & _PAGE_NX) ? _PAGE_NX : 0;
	unsigned long off;

	if (((va >> 30) != (end >> 30)) || ((end >> 21) - (va >> 21)) > 1)
		return -EAGAIN; /* window crosses 1 GiB or two 2 MiB regions */
	memset(pml4, 0, 5 * PAGE_SIZE);
	pml4[(va >> 39) & 511] = (pa + 0x1000) | f;
	pdpt[(va >> 30) & 511] = (pa + 0x2000) | f;
	pd[(va >> 21) & 511] = (pa + 0x3000) | f;
	pd[(end >> 21) & 511] = (pa + 0x3000 + 0x1000 * ((end >> 21) - (va >> 21))) | f;
	for (off = 0; off < WH_GATE_WINDOW; off += PAGE_SIZE) {
		unsigned long a = va + off;
		u64 e = (gate_gpa + off) | f | _PAGE_DIRTY;

		if (off != WH_GATE_CODE_OFF)
			e |= nx;
		pt[(a >> 21) - (va >> 21)][(a >> 12) & 511] = e;
	}
	return 0;
}

static int gate_open(struct inode *inode, struct file *file)
{
	unsigned long s;

	spin_lock(&slot_alloc);
	s = find_first_zero_bit(&slot_used, nslots);
	if (s < nslots)
		__set_bit(s, &slot_used);
	spin_unlock(&slot_alloc);
	if (s >= nslots)
		return -EBUSY;
	file->private_data = (void *)(s + 1);
	return 0;
}

static int gate_release(struct inode *inode, struct file *file)
{
	spin_lock(&slot_alloc);
	__clear_bit((unsigned long)file->private_data - 1, &slot_used);
	spin_unlock(&slot_alloc);
	return 0;
}

static long gate_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	u32 slot = (unsigned long)file->private_data - 1;
	u8 *mbox = win + WH_GATE_MBOX_OFF + slot * PAGE_SIZE;
	struct wh_gate_call c;
	unsigned long flags;
	void *bounce;
	long r = 0;

	if (cmd == WH_GATE_IOC_INFO) {
		struct wh_gate_info i = {
			.version = *(u32 *)(win + WH_DESC_VERSION), .nslots = nslots,
			.slot_max = WH_SLOT_MAX, .view_index = view_index,
			.gate_gpa = gate_gpa, .slot = slot,
		};
		return copy_to_user((void __user *)arg, &i, sizeof(i)) ? -EFAULT : 0;
	}
	if (cmd != WH_GATE_IOC_CALL)
		return -ENOTTY;
	if (copy_from_user(&c, (void __user *)arg, sizeof(c)))
		return -EFAULT;
	if (c.op < WH_GATE_OP_SUBMIT || c.op > WH_GATE_OP_NOP || c.len > WH_SLOT_MAX)
		return -EINVAL;
	bounce = kmalloc(WH_SLOT_MAX, GFP_KERNEL);
	if (!bounce)
		return -ENOMEM;
	if (c.op == WH_GATE_OP_SUBMIT &&
	    copy_from_user(bounce, u64_to_user_ptr(c.buf), c.len)) {
		r = -EFAULT;
		goto out;
	}
	/* No page faults from here on: interrupts are off across the gate. */
	spin_lock_irqsave(&slot_lock[slot], flags);
	if (c.op == WH_GATE_OP_SUBMIT) {
		*(u32 *)(mbox + WH_SLOT_REQ) = c.len;
		memcpy(mbox + WH_SLOT_REQ + 8, bounce, c.len);
	}
	c.result = gate_raw(c.op, slot);
	if (c.op == WH_GATE_OP_POLL || c.op == WH_GATE_OP_QUERY) {
		c.len = min_t(u32, *(u32 *)(mbox + WH_SLOT_RESP), WH_SLOT_MAX);
		c.resp_seq = *(u32 *)(mbox + WH_SLOT_RESP + 4);
		memcpy(bounce, mbox + WH_SLOT_RESP + 8, c.len);
	}
	spin_unlock_irqrestore(&slot_lock[slot], flags);
	if ((c.op == WH_GATE_OP_POLL || c.op == WH_GATE_OP_QUERY) &&
	    copy_to_user(u64_to_user_ptr(c.buf), bounce, c.len))
		r = -EFAULT;
	else if (copy_to_user((void __user *)arg, &c, sizeof(c)))
		r = -EFAULT;
out:
	kfree(bounce);
	return r;
}

static const struct file_operations gate_fops = {
	.owner = THIS_MODULE,
	.open = gate_open,
	.release = gate_release,
	.unlocked_ioctl = gate_ioctl,
};

static struct miscdevice gate_dev = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "wormhole-gate",
	.fops = &gate_fops,
	.mode = 0660,
};

static int __init wh_gate_init(void)
{
	unsigned long pfns[WH_GATE_WINDOW / PAGE_SIZE];
	u64 *desc;
	int i, r;

	if (!gate_gpa || (gate_gpa & ~PAGE_MASK)) {
		pr_info("wormhole-gate: no gate_gpa given; vmfunc transport off\n");
		return -ENODEV;
	}
	desc = memremap(gate_gpa, PAGE_SIZE, MEMREMAP_WB);
	if (!desc)
		return -ENODEV;
	r = desc[WH_DESC_MAGIC / 8] == WH_GATE_MAGIC &&
	    *(u32 *)((u8 *)desc + WH_DESC_VERSION) == WH_GATE_VERSION &&
	    desc[WH_DESC_GATE_GPA / 8] == gate_gpa &&
	    desc[WH_DESC_GATE_CR3 / 8] == gate_gpa + WH_GATE_PT_OFF;
	view_index = *(u32 *)((u8 *)desc + WH_DESC_VIEW_INDEX);
	nslots = min_t(u32, *(u32 *)((u8 *)desc + WH_DESC_NSLOTS), WH_GATE_NSLOTS);
	memunmap(desc);
	if (!r || !nslots) {
		pr_info("wormhole-gate: no gate descriptor at %#lx; vmfunc transport off\n", gate_gpa);
		return -ENODEV;
	}
	for (i = 0; i < ARRAY_SIZE(pfns); i++)
		pfns[i] = (gate_gpa >> PAGE_SHIFT) + i;
	win = vmap_pfn(pfns, ARRAY_SIZE(pfns), PAGE_KERNEL_EXEC);
	if (!win)
		return -ENOMEM;
	if (tighten_mapping()) {
		vunmap(win);
		return -EFAULT;
	}
	/* Fresh mapping, only tightened (NX, RO code): a local flush is enough
	 * for this CPU; no other CPU has used these addresses yet. */
	preempt_disable();
	__flush_tlb_all();
	preempt_enable();
	for (i = 0; i < WH_GATE_NSLOTS; i++)
		spin_lock_init(&slot_lock[i]);
	r = build_gate_tables();
	if (!r && gate_raw(WH_GATE_OP_NOP, 0) != 0)
		r = -EIO;
	if (!r)
		r = misc_register(&gate_dev);
	if (r) {
		vunmap(win);
		return r;
	}
	pr_info("wormhole-gate: gate at %#lx, view %u, %u slots\n", gate_gpa, view_index, nslots);
	return 0;
}

static void __exit wh_gate_exit(void)
{
	misc_deregister(&gate_dev);
	vunmap(win);
}

module_init(wh_gate_init);
module_exit(wh_gate_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("Wormhole exitless gate (VMFUNC EPTP switching)");
