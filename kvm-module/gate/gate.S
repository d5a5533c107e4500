/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Wormhole gate code: the one page that is executable inside the server
 * view.  Supplied by the VMM (QEMU patch, test VMM) at G+WH_GATE_CODE_OFF,
 * read-only in every view.  Position independent: it finds the window from
 * its own address (code page = window VA + 0x1000).
 *
 * ABI (wh_gate.h): interrupts disabled by the caller; rdi = op, rsi = slot;
 * returns rax; clobbers rcx, rdx, rsi, rdi, r8-r11, flags (DF cleared).
 * No stack use between the two CR3 writes: the guest stack is not mapped
 * in the view.  Registers from the caller are range-checked; everything
 * else (CR3 of the gate tables, view index) comes from the read-only
 * descriptor the VMM wrote.
 */
#include "wh_gate.h"

#define VMFUNC .byte 0x0f, 0x01, 0xd4

	.code64
	.text
	.globl wh_gate_code
wh_gate_code:
.Lstart:
	cmp	$WH_GATE_NSLOTS, %rsi
	jae	2f
	lea	.Lstart(%rip), %r9
	sub	$WH_GATE_CODE_OFF, %r9		/* r9 = window VA */
	mov	%cr3, %r8			/* guest CR3, restored below */
	mov	WH_DESC_GATE_CR3(%r9), %r10
	mov	WH_DESC_VIEW_INDEX(%r9), %ecx
	mov	%r10, %cr3			/* gate tables: same VA -> same GPA */
	xor	%eax, %eax
	VMFUNC					/* -> server view */
	cld
	mov	%rsi, %rdx
	shl	$12, %rdx
	lea	WH_GATE_MBOX_OFF(%r9,%rdx), %r10	/* mailbox[slot] */
	lea	WH_GATE_CHAN_OFF(%r9,%rdx), %r11	/* channel[slot] */
	cmp	$WH_GATE_OP_SUBMIT, %rdi
	je	.Lsubmit
	cmp	$WH_GATE_OP_POLL, %rdi
	je	.Lpoll
	cmp	$WH_GATE_OP_QUERY, %rdi
	je	.Lquery
	cmp	$WH_GATE_OP_NOP, %rdi
	je	.Lnop
.Leinval:
	mov	$WH_GATE_EINVAL, %rdx
	jmp	.Lback
.Lsubmit:
	mov	WH_CHAN_ACK_SEQ(%r11), %eax
	cmp	WH_CHAN_REQ_SEQ(%r11), %eax
	jne	.Lbusy				/* server has not taken the last one */
	mov	WH_SLOT_REQ(%r10), %ecx		/* length, read once */
	cmp	$WH_SLOT_MAX, %ecx
	ja	.Leinval
	mov	%ecx, WH_SLOT_REQ(%r11)
	lea	WH_SLOT_REQ+8(%r10), %rsi
	lea	WH_SLOT_REQ+8(%r11), %rdi
	rep movsb
	mov	WH_CHAN_REQ_SEQ(%r11), %edx
	inc	%edx
	mov	%edx, WH_CHAN_REQ_SEQ(%r11)	/* publish after the payload (TSO) */
	jmp	.Lback
.Lpoll:
	mov	WH_CHAN_RESP_SEQ(%r11), %edx	/* seq first, then data (TSO) */
	mov	WH_SLOT_RESP(%r11), %ecx
	cmp	$WH_SLOT_MAX, %ecx
	jbe	1f
	mov	$WH_SLOT_MAX, %ecx
1:	mov	%ecx, WH_SLOT_RESP(%r10)
	mov	%edx, WH_SLOT_RESP+4(%r10)
	lea	WH_SLOT_RESP+8(%r11), %rsi
	lea	WH_SLOT_RESP+8(%r10), %rdi
	rep movsb
	jmp	.Lback
.Lquery:
	lea	WH_GATE_STATE_OFF(%r9), %rsi
	lea	WH_SLOT_RESP+8(%r10), %rdi
	mov	$WH_SLOT_MAX, %ecx
	rep movsb
	movl	$WH_SLOT_MAX, WH_SLOT_RESP(%r10)
	xor	%edx, %edx
	jmp	.Lback
.Lnop:
	xor	%edx, %edx
	jmp	.Lback
.Lbusy:
	mov	$WH_GATE_EBUSY, %rdx
.Lback:
	xor	%eax, %eax
	xor	%ecx, %ecx
	VMFUNC					/* -> entry 0, the VM's own EPT */
	mov	%r8, %cr3
	mov	%rdx, %rax
	ret
2:	mov	$WH_GATE_EINVAL, %rax
	ret
	.globl wh_gate_code_end
wh_gate_code_end:
