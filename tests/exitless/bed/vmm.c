/*
 * wh-test-vmm: the Wormhole exitless test VMM.  Runs inside Linux (in Bochs,
 * whose CPU emulates VMX + EPT + VMFUNC EPTP switching) on the patched
 * kvm-intel.ko.  Uses the plain KVM API plus the Wormhole view ioctls:
 * creates a gate window + server region, one view, attaches it at EPTP-list
 * index 1, runs the test guest (guest.c) and checks every step from the
 * host side.  Prints "WH-EXITLESS: PASS" when everything held.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "wormhole_kvm.h"
#include "wh_gate.h"
#include "guest.h"
#include "gate_code.h"  /* wh_gate_code_bin[] */

extern const unsigned char guest_bin_start[], guest_bin_end[];
__asm__(".section .rodata\n.globl guest_bin_start\n.globl guest_bin_end\n"
	"guest_bin_start:\n.incbin \"" GUEST_BIN "\"\nguest_bin_end:\n.text\n");

static int failures;
#define CHECK(cond, ...)                                                  \
	do {                                                              \
		if (cond) { printf("ok   "); } else { printf("FAIL "); failures++; } \
		printf(__VA_ARGS__);                                      \
		printf("\n");                                             \
		fflush(stdout);                                           \
	} while (0)

static int vmfd, vcpufd;
static struct kvm_run *run;
static uint8_t *ram, *win;
static const uint64_t G = BED_GATE_GPA;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what)
{
	printf("FAIL %s: %s\nWH-EXITLESS: FAIL\n", what, strerror(errno));
	exit(1);
}

static void slot(int id, uint64_t gpa, uint64_t size, void *hva, uint32_t flags)
{
	struct kvm_userspace_memory_region r = {.slot = id, .flags = flags, .guest_phys_addr = gpa,
						.memory_size = size, .userspace_addr = (uint64_t)hva};
	if (ioctl(vmfd, KVM_SET_USER_MEMORY_REGION, &r) < 0) die("KVM_SET_USER_MEMORY_REGION");
}

static int create_view(struct kvm_wh_range *r, unsigned n, uint32_t *id)
{
	struct kvm_wh_view_create c = {.nr_ranges = n, .ranges = (uint64_t)r};
	int rc = ioctl(vmfd, KVM_WH_CREATE_VIEW, &c);
	if (rc == 0) *id = c.view_id;
	return rc < 0 ? -errno : 0;
}

static void setup_long_mode(int kvmfd)
{
	uint64_t *pml4 = (uint64_t *)(ram + BED_PML4), *pdpt = pml4 + 512, *pd0 = pdpt + 512, *pdg = pd0 + 512;
	pml4[0] = (BED_PML4 + 0x1000) | 3;
	pdpt[0] = (BED_PML4 + 0x2000) | 3;
	pd0[0] = 0x0 | 0x83; /* 2 MiB identity, RAM */
	pdpt[(G >> 30) & 511] = (BED_PML4 + 0x3000) | 3;
	pdg[(G >> 21) & 511] = G | 0x83; /* 2 MiB identity, the gate window */
	uint64_t *gdt = (uint64_t *)(ram + 0x500);
	gdt[0] = 0;
	gdt[1] = 0x00af9a000000ffffull; /* 0x08 code64 */
	gdt[2] = 0x00cf92000000ffffull; /* 0x10 data */

	struct kvm_sregs s;
	if (ioctl(vcpufd, KVM_GET_SREGS, &s) < 0) die("KVM_GET_SREGS");
	struct kvm_segment cs = {.base = 0, .limit = 0xffffffff, .selector = 8, .type = 11, .present = 1,
				 .dpl = 0, .db = 0, .s = 1, .l = 1, .g = 1};
	struct kvm_segment ds = cs;
	ds.selector = 0x10; ds.type = 3; ds.l = 0; ds.db = 1;
	s.cs = cs; s.ds = s.es = s.fs = s.gs = s.ss = ds;
	s.gdt.base = 0x500; s.gdt.limit = 23;
	s.cr3 = BED_PML4;
	s.cr4 = 0x20;                 /* PAE */
	s.cr0 = 0x80000011;           /* PG | ET | PE */
	s.efer = 0x500;               /* LME | LMA */
	if (ioctl(vcpufd, KVM_SET_SREGS, &s) < 0) die("KVM_SET_SREGS");
	struct kvm_regs regs = {.rip = BED_GUEST_LOAD, .rsp = BED_STACK_TOP, .rflags = 2};
	if (ioctl(vcpufd, KVM_SET_REGS, &regs) < 0) die("KVM_SET_REGS");

	struct { struct kvm_cpuid2 c; struct kvm_cpuid_entry2 e[100]; } cpuid = {.c.nent = 100};
	if (ioctl(kvmfd, KVM_GET_SUPPORTED_CPUID, &cpuid) < 0) die("KVM_GET_SUPPORTED_CPUID");
	if (ioctl(vcpufd, KVM_SET_CPUID2, &cpuid) < 0) die("KVM_SET_CPUID2");
}

/* Run until the guest reports a step (port BED_PORT); handles the other
 * exits the test expects and counts them. */
static uint32_t last_val;
static int mmio_reads, mmio_code_writes, view_exits;
static struct kvm_wh_exit last_wh;

static int run_to_step(void)
{
	for (;;) {
		if (ioctl(vcpufd, KVM_RUN, 0) < 0) die("KVM_RUN");
		switch (run->exit_reason) {
		case KVM_EXIT_IO:
			if (run->io.direction == KVM_EXIT_IO_OUT && run->io.size == 4) {
				uint32_t v = *(uint32_t *)((uint8_t *)run + run->io.data_offset);
				if (run->io.port == BED_PORT_VAL) { last_val = v; continue; }
				if (run->io.port == BED_PORT) return (int)v;
			}
			printf("FAIL unexpected io port 0x%x\n", run->io.port);
			return -1;
		case KVM_EXIT_MMIO:
			if (!run->mmio.is_write && run->mmio.phys_addr == G + WH_GATE_STATE_OFF) {
				mmio_reads++;
				memset(run->mmio.data, 0, 8);
				*(uint32_t *)run->mmio.data = 0xabad1dea;
				continue;
			}
			if (run->mmio.is_write && run->mmio.phys_addr >= G + WH_GATE_CODE_OFF &&
			    run->mmio.phys_addr < G + WH_GATE_CODE_OFF + 0x1000) {
				mmio_code_writes++;
				continue; /* dropped: the page is read-only */
			}
			printf("FAIL unexpected mmio %s 0x%llx\n", run->mmio.is_write ? "write" : "read",
			       (unsigned long long)run->mmio.phys_addr);
			return -1;
		case KVM_EXIT_WORMHOLE:
			last_wh = *WH_KVM_RUN_EXIT(run);
			view_exits++;
			printf("info KVM_EXIT_WORMHOLE: view %u, vmx exit %u, gpa 0x%llx, qual 0x%llx, rip 0x%llx\n",
			       last_wh.view_index, last_wh.vmx_exit_reason, (unsigned long long)last_wh.gpa,
			       (unsigned long long)last_wh.qualification, (unsigned long long)last_wh.rip);
			continue; /* the vCPU is back on entry 0: resume it */
		case KVM_EXIT_HLT:
			printf("FAIL guest halted early\n");
			return -1;
		default: {
			struct kvm_regs r;
			ioctl(vcpufd, KVM_GET_REGS, &r);
			printf("FAIL unexpected exit %u (rip 0x%llx)\n", run->exit_reason, (unsigned long long)r.rip);
			if (run->exit_reason == KVM_EXIT_INTERNAL_ERROR)
				printf("     suberror %u data0 0x%llx\n", run->internal.suberror,
				       (unsigned long long)run->internal.data[0]);
			return -1;
		}
		}
	}
}

static int expect_step(int want)
{
	int s = run_to_step();
	if (s != want) {
		printf("FAIL expected guest step %d, got %d\nWH-EXITLESS: FAIL\n", want, s);
		exit(1);
	}
	return s;
}

int main(void)
{
	double t0 = now();
	setvbuf(stdout, NULL, _IOLBF, 0);
	int kvmfd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (kvmfd < 0) die("open /dev/kvm");
	int cap = ioctl(kvmfd, KVM_CHECK_EXTENSION, KVM_CAP_WORMHOLE_VIEWS);
	CHECK(cap > 0, "KVM_CAP_WORMHOLE_VIEWS = %d (views per VM)", cap);
	if (cap <= 0) { printf("WH-EXITLESS: FAIL (no capability)\n"); return 1; }
	vmfd = ioctl(kvmfd, KVM_CREATE_VM, 0);
	if (vmfd < 0) die("KVM_CREATE_VM");
	CHECK(ioctl(vmfd, KVM_CHECK_EXTENSION, KVM_CAP_WORMHOLE_VIEWS) == cap, "capability on the VM fd");
	ioctl(vmfd, KVM_SET_TSS_ADDR, 0xfffbd000ul);

	ram = mmap(NULL, BED_RAM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int mfd = memfd_create("wh-gate-window", 0);
	if (mfd < 0 || ftruncate(mfd, WH_GATE_WINDOW) < 0) die("memfd");
	win = mmap(NULL, WH_GATE_WINDOW, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	if (ram == MAP_FAILED || win == MAP_FAILED) die("mmap");
	memcpy(ram + BED_GUEST_LOAD, guest_bin_start, guest_bin_end - guest_bin_start);

	/* The VMM writes descriptor and gate code; the server its state. */
	*(uint64_t *)(win + WH_DESC_MAGIC) = WH_GATE_MAGIC;
	*(uint32_t *)(win + WH_DESC_VERSION) = WH_GATE_VERSION;
	*(uint32_t *)(win + WH_DESC_VIEW_INDEX) = WH_GATE_VIEW_INDEX;
	*(uint64_t *)(win + WH_DESC_GATE_GPA) = G;
	*(uint64_t *)(win + WH_DESC_GATE_CR3) = G + WH_GATE_PT_OFF;
	*(uint32_t *)(win + WH_DESC_NSLOTS) = WH_GATE_NSLOTS;
	*(uint32_t *)(win + WH_DESC_SLOT_MAX) = WH_SLOT_MAX;
	memcpy(win + WH_GATE_CODE_OFF, wh_gate_code_bin, sizeof(wh_gate_code_bin));
	*(uint64_t *)(win + WH_GATE_STATE_OFF) = BED_STATE_MAGIC;

	/* Default view: RAM, DESC+CODE read-only, PT+MBOX read-write; the
	 * server part (STATE, CHAN) is in no memslot. */
	slot(0, 0, BED_RAM_SIZE, ram, 0);
	slot(1, G, WH_GATE_CODE_OFF + 0x1000, win, KVM_MEM_READONLY);
	slot(2, G + WH_GATE_PT_OFF, WH_GATE_DEFAULT_PART - WH_GATE_PT_OFF, win + WH_GATE_PT_OFF, 0);

	uint64_t w = (uint64_t)win;
	struct kvm_wh_range view[] = {
		{G + WH_GATE_DESC_OFF, 0x1000, w + WH_GATE_DESC_OFF, KVM_WH_PERM_R, 0},
		{G + WH_GATE_CODE_OFF, 0x1000, w + WH_GATE_CODE_OFF, KVM_WH_PERM_R | KVM_WH_PERM_X, 0},
		{G + WH_GATE_PT_OFF, WH_GATE_PT_PAGES * 0x1000, w + WH_GATE_PT_OFF, KVM_WH_PERM_R, 0},
		{G + WH_GATE_MBOX_OFF, WH_GATE_NSLOTS * 0x1000, w + WH_GATE_MBOX_OFF, KVM_WH_PERM_R | KVM_WH_PERM_W, 0},
		{G + WH_GATE_STATE_OFF, 0x1000, w + WH_GATE_STATE_OFF, KVM_WH_PERM_R, 0},
		{G + WH_GATE_CHAN_OFF, WH_GATE_NSLOTS * 0x1000, w + WH_GATE_CHAN_OFF, KVM_WH_PERM_R | KVM_WH_PERM_W, 0},
	};
	/* Requests KVM must refuse. */
	uint32_t id = 0;
	struct kvm_wh_range bad[2] = {view[0], view[0]};
	CHECK(create_view(bad, 2, &id) == -EEXIST, "overlapping ranges -> EEXIST");
	bad[0].perms = KVM_WH_PERM_R | KVM_WH_PERM_W | KVM_WH_PERM_X;
	CHECK(create_view(bad, 1, &id) == -EPERM, "W+X range -> EPERM");
	bad[0] = view[0]; bad[0].gpa += 0x10;
	CHECK(create_view(bad, 1, &id) == -EINVAL, "misaligned range -> EINVAL");
	bad[0] = view[0]; bad[0].hva = 0xffff888000000000ull;
	CHECK(create_view(bad, 1, &id) == -EINVAL, "kernel address as backing -> EINVAL");
	bad[0] = view[0]; bad[0].hva = 0x100000000000ull; /* unmapped user address */
	CHECK(create_view(bad, 1, &id) == -EFAULT, "unmapped backing -> EFAULT");

	CHECK(create_view(view, 6, &id) == 0 && id >= 1, "create gate view -> id %u", id);
	vcpufd = ioctl(vmfd, KVM_CREATE_VCPU, 0);
	if (vcpufd < 0) die("KVM_CREATE_VCPU");
	int runsz = ioctl(kvmfd, KVM_GET_VCPU_MMAP_SIZE, 0);
	run = mmap(NULL, runsz, PROT_READ | PROT_WRITE, MAP_SHARED, vcpufd, 0);
	setup_long_mode(kvmfd);

	struct kvm_wh_view_attach at = {.view_id = id, .index = 0};
	CHECK(ioctl(vcpufd, KVM_WH_ATTACH_VIEW, &at) < 0 && errno == EINVAL, "attach at index 0 (KVM's own EPT) -> EINVAL");
	at.index = 512;
	CHECK(ioctl(vcpufd, KVM_WH_ATTACH_VIEW, &at) < 0 && errno == EINVAL, "attach at index 512 -> EINVAL");
	at.index = WH_GATE_VIEW_INDEX; at.view_id = 9;
	CHECK(ioctl(vcpufd, KVM_WH_ATTACH_VIEW, &at) < 0 && errno == ENOENT, "attach unknown view -> ENOENT");
	at.view_id = id;
	CHECK(ioctl(vcpufd, KVM_WH_ATTACH_VIEW, &at) == 0, "attach view %u at EPTP-list index %u", id, at.index);
	CHECK(ioctl(vcpufd, KVM_WH_ATTACH_VIEW, &at) < 0 && errno == EBUSY, "attach twice -> EBUSY");
	CHECK(ioctl(vmfd, KVM_WH_DESTROY_VIEW, &id) < 0 && errno == EBUSY, "destroy attached view -> EBUSY");
	printf("info setup done in %.2f s\n", now() - t0);

	uint8_t *chan = win + WH_GATE_CHAN_OFF;
	double tr = now();
	expect_step(S_START);
	expect_step(S_NOP);
	CHECK(last_val == 0, "gate NOP round trip returned %d", (int)last_val);
	expect_step(S_SUBMIT);
	static const char msg[] = "hello from the guest, via the gate";
	CHECK(last_val == 1 && *(uint32_t *)(chan + WH_CHAN_REQ_SEQ) == 1 &&
	      *(uint32_t *)(chan + WH_SLOT_REQ) == sizeof(msg) && !memcmp(chan + WH_SLOT_REQ + 8, msg, sizeof(msg)),
	      "server channel got the request through the gate: \"%s\" (seq %u)", (char *)chan + 8, last_val);
	/* Server side: take it, reply. */
	static const char reply[] = "reply from the server side";
	*(uint32_t *)(chan + WH_CHAN_ACK_SEQ) = 1;
	*(uint32_t *)(chan + WH_SLOT_RESP) = sizeof(reply);
	memcpy(chan + WH_SLOT_RESP + 8, reply, sizeof(reply));
	*(uint32_t *)(chan + WH_CHAN_RESP_SEQ) = 1;
	expect_step(S_POLL);
	CHECK(last_val == 1, "guest read the server's reply through the gate");
	expect_step(S_QUERY);
	CHECK(last_val == 1, "guest read published server state through the gate (no round trip)");
	expect_step(S_SUBMIT2);
	CHECK(last_val == 2, "second request accepted (seq %d)", (int)last_val);
	expect_step(S_BUSY);
	CHECK((int)last_val == WH_GATE_EBUSY, "request before the server took the last one -> EBUSY (%d)", (int)last_val);
	expect_step(S_BADARGS);
	CHECK(last_val == 3, "gate refuses bad slot and bad op (%u)", last_val);
	expect_step(S_BADINDEX);
	CHECK(last_val == 2, "VMFUNC to empty index 5 and out-of-range 600 -> #UD in the guest (%u)", last_val);
	expect_step(S_READ_SERVER);
	CHECK(mmio_reads == 1 && last_val == 0xabad1dea, "server region is not mapped in the default view (MMIO exit to VMM)");
	expect_step(S_WRITE_CODE);
	CHECK(mmio_code_writes == 1 && last_val == 1 && win[WH_GATE_CODE_OFF + 16] == wh_gate_code_bin[16],
	      "guest write to the gate code page exits and changes nothing");
	int ve = view_exits;
	expect_step(S_RAW_VMFUNC);
	CHECK(view_exits == ve + 1 && last_wh.view_index == WH_GATE_VIEW_INDEX && last_wh.vmx_exit_reason == 48 &&
	      last_wh.gpa == BED_PML4,
	      "VMFUNC into the view outside the gate -> KVM_EXIT_WORMHOLE (EPT violation at the guest's PML4), back on entry 0");
	expect_step(S_TIMING);
	printf("info gate NOP round trip: %u TSC cycles each (Bochs emulation, not a hardware figure)\n", last_val);
	expect_step(S_DETACH_REQ);
	CHECK(ioctl(vcpufd, KVM_WH_DETACH_VIEW, &at) == 0, "detach view");
	expect_step(S_AFTER_DETACH);
	CHECK(last_val == 3, "VMFUNC after detach -> #UD (VM functions disabled)");
	expect_step(S_DONE);
	CHECK(*(uint32_t *)(chan + WH_CHAN_REQ_SEQ) == 2, "channel seq is 2 at the end");
	printf("info guest run %.2f s\n", now() - tr);
	CHECK(ioctl(vmfd, KVM_WH_DESTROY_VIEW, &id) == 0, "destroy detached view");
	CHECK(ioctl(vmfd, KVM_WH_DESTROY_VIEW, &id) < 0 && errno == ENOENT, "destroy again -> ENOENT");
	/* A second view left attached is torn down with the VM. */
	uint32_t id2 = 0;
	CHECK(create_view(view, 6, &id2) == 0, "create a second view");
	at.view_id = id2;
	CHECK(ioctl(vcpufd, KVM_WH_ATTACH_VIEW, &at) == 0, "attach it, then close the VM with it attached");
	close(vcpufd);
	close(vmfd);
	printf("info total %.2f s, %d failure(s)\n", now() - t0, failures);
	printf("WH-EXITLESS: %s\n", failures ? "FAIL" : "PASS");
	return failures ? 1 : 0;
}
