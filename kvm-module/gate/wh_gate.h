/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Wormhole exitless gate: the guest-physical layout of the gate window and
 * the ABI of the gate code.  Shared by the VMM side (QEMU patch, test VMM),
 * the guest side (wormhole-gate module, test guest) and the unit tests.
 *
 * The window is VMM-owned memory at a guest-physical base G (4 KiB aligned):
 *
 *  G + 0x00000  DESC   1 page   VMM writes  | default view: R    | view: R
 *  G + 0x01000  CODE   1 page   VMM writes  | default view: R X  | view: R X
 *  G + 0x02000  PT     6 pages  guest writes| default view: R W  | view: R
 *  G + 0x08000  MBOX   8 pages  guest writes| default view: R W  | view: R W
 *  G + 0x10000  STATE  1 page   server      | default: not mapped| view: R
 *  G + 0x11000  CHAN   8 pages  gate/server | default: not mapped| view: R W
 *
 * The gate code is supplied by the VMM (never by the guest): it is the only
 * page executable in the view.  The guest maps G..G+WH_GATE_WINDOW at a
 * kernel VA V and writes, into PT, page tables mapping the same V to G (A/D
 * bits preset, the view maps PT read-only).  The gate switches CR3 to
 * G+WH_GATE_PT_OFF, VMFUNCs to the view, copies, VMFUNCs back, restores CR3.
 */
#ifndef WH_GATE_H
#define WH_GATE_H

#define WH_GATE_MAGIC 0x4554414748574d57ull /* "WMWHGATE" */
#define WH_GATE_VERSION 1

#define WH_GATE_DESC_OFF 0x00000
#define WH_GATE_CODE_OFF 0x01000
#define WH_GATE_PT_OFF 0x02000
#define WH_GATE_PT_PAGES 6
#define WH_GATE_MBOX_OFF 0x08000
#define WH_GATE_NSLOTS 8
#define WH_GATE_STATE_OFF 0x10000
#define WH_GATE_CHAN_OFF 0x11000
#define WH_GATE_WINDOW 0x19000       /* bytes from G to the end of CHAN */
#define WH_GATE_DEFAULT_PART 0x10000 /* DESC..MBOX: also in the default view */

/* Descriptor (page DESC), little-endian, written by the VMM. */
#define WH_DESC_MAGIC 0x00       /* u64 WH_GATE_MAGIC                    */
#define WH_DESC_VERSION 0x08     /* u32                                  */
#define WH_DESC_VIEW_INDEX 0x0c  /* u32 EPTP-list index of the view      */
#define WH_DESC_GATE_GPA 0x10    /* u64 G                                */
#define WH_DESC_GATE_CR3 0x18    /* u64 G + WH_GATE_PT_OFF               */
#define WH_DESC_NSLOTS 0x20      /* u32                                  */
#define WH_DESC_SLOT_MAX 0x24    /* u32 max payload bytes per request    */

/* A mailbox slot (one page per slot, per vCPU by convention) and a channel
 * slot have the same shape: request half, response half. */
#define WH_SLOT_REQ 0x000   /* u32 len, u32 seq, payload[WH_SLOT_MAX]  */
#define WH_SLOT_RESP 0x800  /* u32 len, u32 seq, payload[WH_SLOT_MAX]  */
#define WH_SLOT_MAX 0x7f0   /* payload bytes                           */
/* Channel-only words (in the server region, written by the gate/server): */
#define WH_CHAN_REQ_SEQ 0x004  /* bumped by the gate after a copy         */
#define WH_CHAN_ACK_SEQ 0x7f8  /* set = REQ_SEQ by the server when taken  */
#define WH_CHAN_RESP_SEQ 0x804 /* bumped by the server with each reply    */

/* Gate ABI: call G_va+WH_GATE_CODE_OFF with interrupts disabled,
 *   rdi = op, rsi = slot; returns rax; clobbers rcx, rdx, rsi, rdi, r8-r11.
 * Uses no stack between the two CR3 writes. */
#define WH_GATE_OP_SUBMIT 1 /* mbox.req -> chan.req; rax = new seq        */
#define WH_GATE_OP_POLL 2   /* chan.resp -> mbox.resp; rax = resp seq     */
#define WH_GATE_OP_QUERY 3  /* STATE[0..WH_SLOT_MAX) -> mbox.resp payload */
#define WH_GATE_OP_NOP 4    /* switch there and back; rax = 0             */
/* Negative results (as int64): */
#define WH_GATE_EINVAL (-22) /* bad op, slot, or length                   */
#define WH_GATE_EBUSY (-16)  /* previous request not yet taken by server  */

/* EPTP-list index that the reference VMMs use for the gate view. */
#define WH_GATE_VIEW_INDEX 1

#endif
