/* Multiboot (v1) loader that starts an uncompressed Linux vmlinux through its
 * PVH entry (ELF note XEN_ELFNOTE_PHYS32_ENTRY), so Bochs skips the bzImage's
 * decompression.  GRUB: multiboot /boot/pvhboot.elf CMDLINE
 *                       module /boot/vmlinux ; module /boot/initrd.img
 * 32-bit, flat protected mode, paging off (as GRUB leaves it). */
#include <stdint.h>

struct mb_info {
  uint32_t flags, mem_lower, mem_upper, boot_device, cmdline, mods_count, mods_addr;
  uint32_t syms[4], mmap_length, mmap_addr;
};
struct mb_mod { uint32_t start, end, string, reserved; };
struct mb_mmap { uint32_t size; uint64_t addr, len; uint32_t type; } __attribute__((packed));

struct hvm_start_info {
  uint32_t magic, version, flags, nr_modules;
  uint64_t modlist_paddr, cmdline_paddr, rsdp_paddr, memmap_paddr;
  uint32_t memmap_entries, reserved;
};
struct hvm_modlist_entry { uint64_t paddr, size, cmdline_paddr, reserved; };
struct hvm_memmap_entry { uint64_t addr, size; uint32_t type, reserved; };

typedef struct { unsigned char ident[16]; uint16_t type, machine; uint32_t version; uint64_t entry, phoff, shoff;
  uint32_t flags; uint16_t ehsize, phentsize, phnum, shentsize, shnum, shstrndx; } Elf64_Ehdr;
typedef struct { uint32_t type, flags; uint64_t offset, vaddr, paddr, filesz, memsz, align; } Elf64_Phdr;

static struct hvm_start_info si;
static struct hvm_modlist_entry mod;
static struct hvm_memmap_entry mm[64];
static char cmdline[1024];

static void outb(uint16_t p, uint8_t v) { __asm__ volatile("outb %0,%1" ::"a"(v), "Nd"(p)); }
static void say(const char *s) { while (*s) outb(0xe9, (uint8_t)*s++); }
static void hex(uint32_t v) { char b[11] = "0x"; for (int i = 0; i < 8; i++) b[2 + i] = "0123456789abcdef"[(v >> (28 - 4 * i)) & 15]; b[10] = 0; say(b); }
static void die(const char *s) { say("pvhboot: "); say(s); say("\n"); for (;;) __asm__ volatile("cli; hlt"); }

static void *mmove(void *d, const void *s, uint32_t n) {
  unsigned char *dp = d; const unsigned char *sp = s;
  if (dp < sp || dp >= sp + n) {   /* forward, 4 bytes at a time */
    uint32_t w = n >> 2, b = n & 3;
    __asm__ volatile("cld; rep movsl" : "+D"(dp), "+S"(sp), "+c"(w) :: "memory");
    __asm__ volatile("rep movsb" : "+D"(dp), "+S"(sp), "+c"(b) :: "memory");
  }
  else if (dp > sp) { dp += n - 1; sp += n - 1; __asm__ volatile("std; rep movsb; cld" : "+D"(dp), "+S"(sp), "+c"(n) :: "memory"); }
  return d;
}
static void mzero(void *d, uint32_t n) { __asm__ volatile("cld; rep stosb" : "+D"(d), "+c"(n) : "a"(0) : "memory"); }

void pvhboot_main(uint32_t magic, struct mb_info *mbi) {
  if (magic != 0x2BADB002) die("not started by a multiboot loader");
  if (!(mbi->flags & (1u << 3)) || mbi->mods_count < 1) die("no vmlinux module");
  if (!(mbi->flags & (1u << 6))) die("no memory map");
  /* Copy what we need out of the multiboot info before anything moves. */
  uint32_t n = 0;
  for (uint32_t p = mbi->mmap_addr; p < mbi->mmap_addr + mbi->mmap_length && n < 64; n++) {
    struct mb_mmap *e = (struct mb_mmap *)p;
    mm[n].addr = e->addr; mm[n].size = e->len; mm[n].type = e->type; mm[n].reserved = 0;
    p += e->size + 4;
  }
  if ((mbi->flags & (1u << 2)) && mbi->cmdline) {
    const char *c = (const char *)mbi->cmdline; uint32_t i = 0;
    while (c[i] == ' ') c++;                       /* GRUB passes "path args": skip the path */
    while (c[i] && c[i] != ' ') c++;
    while (c[i] && i < sizeof cmdline - 1) { cmdline[i] = c[i]; i++; }
    cmdline[i] = 0;
  }
  struct mb_mod *mods = (struct mb_mod *)mbi->mods_addr;
  uint32_t ks = mods[0].start, kl = mods[0].end - mods[0].start;
  uint32_t is = 0, il = 0;
  if (mbi->mods_count > 1) { is = mods[1].start; il = mods[1].end - mods[1].start; }
  /* Move both modules above everything GRUB used and above the kernel's
   * load area (it loads at 16 MiB and up): 256 MiB or higher. */
  uint32_t top = 0x10000000;
  for (uint32_t i = 0; i < mbi->mods_count; i++) if (mods[i].end > top) top = mods[i].end;
  top = (top + 0xfff) & ~0xfffu;
  uint32_t nk = top, ni = (nk + kl + 0xfff) & ~0xfffu;
  if (is) mmove((void *)ni, (void *)is, il);   /* initrd sits after vmlinux: move it first */
  mmove((void *)nk, (void *)ks, kl);
  say("pvhboot: vmlinux "); hex(kl); say(" bytes, initrd "); hex(il); say(" bytes\n");

  Elf64_Ehdr *eh = (Elf64_Ehdr *)nk;
  if (eh->ident[0] != 0x7f || eh->ident[1] != 'E' || eh->ident[4] != 2) die("module 0 is not an ELF64 vmlinux");
  uint32_t entry = 0;
  Elf64_Phdr *ph = (Elf64_Phdr *)(nk + (uint32_t)eh->phoff);
  for (int i = 0; i < eh->phnum; i++) {
    if (ph[i].type != 4) continue;   /* PT_NOTE */
    uint32_t p = nk + (uint32_t)ph[i].offset, end = p + (uint32_t)ph[i].filesz;
    while (p + 12 <= end) {
      uint32_t nsz = ((uint32_t *)p)[0], dsz = ((uint32_t *)p)[1], type = ((uint32_t *)p)[2];
      const char *name = (const char *)(p + 12);
      uint32_t desc = p + 12 + ((nsz + 3) & ~3u);
      if (type == 18 && nsz == 4 && name[0] == 'X' && name[1] == 'e' && name[2] == 'n') entry = *(uint32_t *)desc;
      p = desc + ((dsz + 3) & ~3u);
    }
  }
  if (!entry) die("vmlinux has no PVH entry note");
  for (int i = 0; i < eh->phnum; i++) {
    if (ph[i].type != 1) continue;   /* PT_LOAD */
    uint32_t pa = (uint32_t)ph[i].paddr, fs = (uint32_t)ph[i].filesz, ms = (uint32_t)ph[i].memsz;
    if (pa + ms > nk) die("kernel segment overlaps the moved modules");
    mmove((void *)pa, (void *)(nk + (uint32_t)ph[i].offset), fs);
    if (ms > fs) mzero((void *)(pa + fs), ms - fs);
  }
  si.magic = 0x336ec578; si.version = 1; si.flags = 0;
  si.cmdline_paddr = (uint32_t)cmdline;
  si.memmap_paddr = (uint32_t)mm; si.memmap_entries = n;
  if (is) { mod.paddr = ni; mod.size = il; si.nr_modules = 1; si.modlist_paddr = (uint32_t)&mod; }
  say("pvhboot: entering Linux at "); hex(entry); say("\n");
  __asm__ volatile("cli; jmp *%0" :: "r"(entry), "b"(&si) : "memory");
  for (;;) {}
}
