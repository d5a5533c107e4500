/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * User-space copy of the KVM uapi additions of kvm-module/patches/0001 for
 * programs built against a stock <linux/kvm.h> (test VMM, QEMU patch).
 * Must stay identical to the patch.
 */
#ifndef WORMHOLE_KVM_H
#define WORMHOLE_KVM_H
#include <linux/kvm.h>
#include <linux/types.h>

#ifndef KVM_CAP_WORMHOLE_VIEWS
#define KVM_CAP_WORMHOLE_VIEWS 0x5748
#define KVM_EXIT_WORMHOLE 0x5748
#define KVM_WH_EXIT_VIEW_EXIT 1
#define KVM_WH_PERM_R (1 << 0)
#define KVM_WH_PERM_W (1 << 1)
#define KVM_WH_PERM_X (1 << 2)
struct kvm_wh_range {
	__u64 gpa;
	__u64 size;
	__u64 hva;
	__u32 perms;
	__u32 flags;
};
struct kvm_wh_view_create {
	__u32 nr_ranges;
	__u32 flags;
	__u64 ranges;
	__u32 view_id;
	__u32 pad;
};
struct kvm_wh_view_attach {
	__u32 view_id;
	__u32 index;
};
#define KVM_WH_CREATE_VIEW _IOWR(KVMIO, 0xf8, struct kvm_wh_view_create)
#define KVM_WH_DESTROY_VIEW _IOW(KVMIO, 0xf9, __u32)
#define KVM_WH_ATTACH_VIEW _IOW(KVMIO, 0xfa, struct kvm_wh_view_attach)
#define KVM_WH_DETACH_VIEW _IOW(KVMIO, 0xfb, struct kvm_wh_view_attach)
/* kvm_run.wormhole lives in the exit union at the offset of kvm_run.mmio */
struct kvm_wh_exit {
	__u32 reason;
	__u32 view_index;
	__u32 vmx_exit_reason;
	__u32 pad;
	__u64 qualification;
	__u64 gpa;
	__u64 rip;
};
#define WH_KVM_RUN_EXIT(run) ((struct kvm_wh_exit *)&(run)->mmio)
#else
#define WH_KVM_RUN_EXIT(run) ((struct kvm_wh_exit *)&(run)->wormhole)
struct kvm_wh_exit {
	__u32 reason, view_index, vmx_exit_reason, pad;
	__u64 qualification, gpa, rip;
};
#endif
#endif
