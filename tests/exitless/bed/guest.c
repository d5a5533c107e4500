/*
 * Test guest for the Wormhole exitless bed: 64-bit, runs under the test VMM
 * (KVM with the Wormhole views patch) inside Linux inside Bochs.  It plays
 * the role of the wormhole-gate module: it builds the gate page tables,
 * calls the VMM-supplied gate, and also misbehaves on purpose.
 */
#include "wh_gate.h"
#include "guest.h"

typedef unsigned long u64;
typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned char u8;

#define G BED_GATE_GPA /* identity mapped: window VA == GPA */

static inline void outl(u16 port, u32 v) { __asm__ volatile("outl %0, %1" ::"a"(v), "Nd"(port)); }
static void report(u32 step, u32 val) { outl(BED_PORT_VAL, val); outl(BED_PORT, step); }
static inline u64 rdtsc(void) { u32 lo, hi; __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi)); return ((u64)hi << 32) | lo; }

static long gate(long op, long slot)
{
	long r;
	register long rdi __asm__("rdi") = op;
	register long rsi __asm__("rsi") = slot;
	__asm__ volatile("cli\n\tcall *%[fn]\n\tsti"
			 : "=a"(r), "+r"(rdi), "+r"(rsi)
			 : [fn] "r"((u64)(G + WH_GATE_CODE_OFF))
			 : "rcx", "rdx", "r8", "r9", "r10", "r11", "memory", "cc");
	return r;
}

/* --- #UD handler: count and skip the 3-byte VMFUNC ---------------------- */
volatile u32 ud_count;
void ud_handler_c(u64 *frame) { ud_count++; frame[0] += 3; }
extern char ud_stub[];
__asm__(".globl ud_stub\nud_stub:\n"
	"push %rax; push %rcx; push %rdx; push %rsi; push %rdi; push %r8; push %r9; push %r10; push %r11\n"
	"lea 72(%rsp), %rdi\n call ud_handler_c\n"
	"pop %r11; pop %r10; pop %r9; pop %r8; pop %rdi; pop %rsi; pop %rdx; pop %rcx; pop %rax\n iretq\n");

static u64 idt[512] __attribute__((aligned(16)));
static void setup_idt(void)
{
	u64 h = (u64)ud_stub;
	idt[6 * 2] = (h & 0xffff) | (0x8ull << 16) | (0x8eull << 40) | ((h >> 16) & 0xffff) << 48;
	idt[6 * 2 + 1] = h >> 32;
	struct { u16 lim; u64 base; } __attribute__((packed)) d = {sizeof(idt) - 1, (u64)idt};
	__asm__ volatile("lidt %0" ::"m"(d));
}

static void raw_vmfunc(u32 index)
{
	__asm__ volatile(".byte 0x0f,0x01,0xd4" ::"a"(0), "c"(index) : "memory");
}

/* Gate page tables in PT pages of the window: map window VA (== G) -> G.
 * A and D preset: the view maps these pages read-only. */
static void build_gate_tables(void)
{
	volatile u64 *pml4 = (u64 *)(G + WH_GATE_PT_OFF), *pdpt = pml4 + 512, *pd = pdpt + 512, *pt = pd + 512;
	const u64 P = 1, RW = 2, A = 0x20, D = 0x40;
	for (int i = 0; i < 4 * 512; i++) pml4[i] = 0;
	pml4[(G >> 39) & 511] = (G + WH_GATE_PT_OFF + 0x1000) | P | RW | A;
	pdpt[(G >> 30) & 511] = (G + WH_GATE_PT_OFF + 0x2000) | P | RW | A;
	pd[(G >> 21) & 511] = (G + WH_GATE_PT_OFF + 0x3000) | P | RW | A;
	for (u64 off = 0; off < WH_GATE_WINDOW; off += 0x1000)
		pt[((G + off) >> 12) & 511] = (G + off) | P | RW | A | D;
}

static void *memcpy_(void *d, const void *s, u64 n) { u8 *a = d; const u8 *b = s; while (n--) *a++ = *b++; return d; }
static int memeq(const void *x, const void *y, u64 n) { const u8 *a = x, *b = y; while (n--) if (*a++ != *b++) return 0; return 1; }

void guest_main(void)
{
	volatile u8 *mbox = (u8 *)(G + WH_GATE_MBOX_OFF);
	long r, r2;

	setup_idt();
	build_gate_tables();
	report(S_START, 0);

	report(S_NOP, (u32)gate(WH_GATE_OP_NOP, 0));

	static const char msg[] = "hello from the guest, via the gate";
	*(volatile u32 *)(mbox + WH_SLOT_REQ) = sizeof(msg);
	memcpy_((void *)(mbox + WH_SLOT_REQ + 8), msg, sizeof(msg));
	report(S_SUBMIT, (u32)gate(WH_GATE_OP_SUBMIT, 0)); /* VMM checks the channel and replies */

	r = gate(WH_GATE_OP_POLL, 0);
	static const char want[] = "reply from the server side";
	u32 ok = r == 1 && *(volatile u32 *)(mbox + WH_SLOT_RESP) == sizeof(want) &&
		 memeq((void *)(mbox + WH_SLOT_RESP + 8), want, sizeof(want));
	report(S_POLL, ok);

	r = gate(WH_GATE_OP_QUERY, 0);
	report(S_QUERY, r == 0 && *(volatile u64 *)(mbox + WH_SLOT_RESP + 8) == BED_STATE_MAGIC);

	r = gate(WH_GATE_OP_SUBMIT, 0);  /* seq 2: server acked seq 1 */
	r2 = gate(WH_GATE_OP_SUBMIT, 0); /* not acked yet: busy */
	report(S_SUBMIT2, (u32)r);
	report(S_BUSY, (u32)r2);

	*(volatile u32 *)(mbox + WH_SLOT_REQ) = 0x10000; /* too long */
	u32 bad = (gate(WH_GATE_OP_NOP, 99) == WH_GATE_EINVAL) + (gate(77, 0) == WH_GATE_EINVAL) * 2;
	report(S_BADARGS, bad);

	/* VMFUNC to an empty list slot: KVM must answer with #UD. */
	raw_vmfunc(5);
	raw_vmfunc(600);
	report(S_BADINDEX, ud_count);

	/* The server region is not mapped in the default view: MMIO exit. */
	u64 v = *(volatile u64 *)(G + WH_GATE_STATE_OFF);
	report(S_READ_SERVER, (u32)v);

	/* The gate code page is read-only for the guest: the write exits. */
	*(volatile u32 *)(G + WH_GATE_CODE_OFF + 16) = 0xcccccccc;
	report(S_WRITE_CODE, *(volatile u8 *)(G + WH_GATE_CODE_OFF) == 0x48);

	/* Gate misuse: switch into the view from the guest's own code (not the
	 * gate, guest CR3): the next fetch faults inside the view and KVM puts
	 * the vCPU back on entry 0 and reports KVM_EXIT_WORMHOLE. */
	raw_vmfunc(1);
	report(S_RAW_VMFUNC, 1);

	u64 t0 = rdtsc();
	for (int i = 0; i < 100; i++) gate(WH_GATE_OP_NOP, 0);
	report(S_TIMING, (u32)((rdtsc() - t0) / 100));

	report(S_DETACH_REQ, 0); /* VMM detaches the view from this vCPU */
	raw_vmfunc(1);           /* VM functions now disabled: #UD */
	report(S_AFTER_DETACH, ud_count);
	report(S_DONE, 0);
	for (;;) __asm__ volatile("hlt");
}

__asm__(".section .text.start\n.globl _start\n_start:\n"
	"mov $" "0x80000" ", %rsp\n call guest_main\n 1: hlt\n jmp 1b\n .text\n");
