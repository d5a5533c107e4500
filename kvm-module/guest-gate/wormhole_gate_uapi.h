/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * /dev/wormhole-gate: the guest side of Wormhole's exitless (VMFUNC) path.
 * One open file = one gate slot (mailbox + server channel).  Every call is
 * one syscall and no VM exit: the module copies the buffer into its
 * mailbox, calls the VMM-supplied gate with interrupts off, copies back.
 */
#ifndef WORMHOLE_GATE_UAPI_H
#define WORMHOLE_GATE_UAPI_H
#include <linux/ioctl.h>
#include <linux/types.h>

struct wh_gate_info {
	__u32 version;     /* WH_GATE_VERSION of the descriptor        */
	__u32 nslots;
	__u32 slot_max;    /* max payload bytes of a request/response  */
	__u32 view_index;
	__u64 gate_gpa;
	__u32 slot;        /* the slot of this open file               */
	__u32 pad;
};

struct wh_gate_call {
	__u32 op;          /* WH_GATE_OP_SUBMIT / POLL / QUERY / NOP    */
	__u32 len;         /* in: SUBMIT payload bytes; out: resp bytes */
	__u64 buf;         /* user buffer: SUBMIT in, POLL/QUERY out    */
	__s64 result;      /* gate result: seq, or negative errno       */
	__u32 resp_seq;    /* POLL: sequence of the response copied     */
	__u32 pad;
};

#define WH_GATE_IOC_INFO _IOR('W', 0x01, struct wh_gate_info)
#define WH_GATE_IOC_CALL _IOWR('W', 0x02, struct wh_gate_call)
#endif
