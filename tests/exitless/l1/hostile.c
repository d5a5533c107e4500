/* A hostile L2 process for the exitless chain bed (tests/exitless/l1/
 * run-chain.sh, job chain-l2.sh). It runs while a well-behaved gate_client
 * (the victim) is bound to the VM's channel through its own gate slot, and
 * tries, with root's privileges in L2 (the same as the victim's):
 *   (a) to bind its own gate slot to the victim's channel and to call on it;
 *   (b) to send malformed slots through /dev/wormhole-gate;
 *   (c) to reach the server's memory: the gate's server pages and the gate
 *       code/descriptor through /dev/mem, the ivshmem BAR past its end, and
 *       everything again as an unprivileged user.
 * Each check prints "WH-RESULT hostile_<name> PASS|FAIL detail"; the exit
 * status is the number of FAILs. It also prints the server counter deltas it
 * expects ("hostile: expect refused=R violations=V binds=0"); L1 reads the
 * server's counters before and after and run-chain.sh compares.
 * Usage: hostile [seconds to wait for the victim, default 300] */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "wh_gate_msg.h"
#include "wormhole/region.h"
#include "wormhole_gate_uapi.h"

#ifndef ESTALE
#define ESTALE 116
#endif

static int fails, gate_fd;
static struct wh_gate_info info;
static int exp_refused, exp_violations;

static void result(const char *name, int ok, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void result(const char *name, int ok, const char *fmt, ...) {
  char d[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(d, sizeof d, fmt, ap);
  va_end(ap);
  printf("WH-RESULT hostile_%s %s %s\n", name, ok ? "PASS" : "FAIL", d);
  fflush(stdout);
  if (!ok) fails++;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

/* One ioctl; returns 0 or -errno. */
static int gate_call(uint32_t op, void *buf, uint32_t len, struct wh_gate_call *out) {
  struct wh_gate_call c = {.op = op, .len = len, .buf = (uintptr_t)buf};
  int r = ioctl(gate_fd, WH_GATE_IOC_CALL, &c);
  if (out) *out = c;
  return r == 0 ? 0 : -errno;
}

/* A consistent snapshot of the server's state page, through QUERY. */
static int query_state(struct wh_gate_state *st) {
  for (int i = 0; i < 100; i++) {
    struct wh_gate_call c;
    if (gate_call(WH_GATE_OP_QUERY, st, WH_SLOT_MAX, &c) || c.result != 0) return -1;
    if (st->magic == WH_GATE_STATE_MAGIC && st->end_seq == st->begin_seq && !(st->end_seq & 1)) return 0;
    usleep(1000);
  }
  return -1;
}

/* SUBMIT len bytes, then POLL until the answer to that request arrives.
 * Returns the answer's status (wh_gate_resp.status), or 1 for no answer. */
static int round_trip(const void *req, uint32_t len, int32_t *status) {
  struct wh_gate_call c;
  double t0 = now_s();
  int r;
  for (;;) {
    r = gate_call(WH_GATE_OP_SUBMIT, (void *)req, len, &c);
    if (r) return r;
    if (c.result != WH_GATE_EBUSY) break;
    if (now_s() - t0 > 60) return -ETIMEDOUT;
    usleep(1000);
  }
  if (c.result < 0) return (int)c.result;
  uint32_t seq = (uint32_t)c.result;
  static uint8_t resp[WH_SLOT_MAX];
  while (now_s() - t0 < 60) {
    r = gate_call(WH_GATE_OP_POLL, resp, WH_SLOT_MAX, &c);
    if (r) return r;
    if (c.resp_seq == seq && c.len >= sizeof(struct wh_gate_resp)) {
      struct wh_gate_resp a;
      memcpy(&a, resp, sizeof a);
      if (a.magic != WH_GATE_RESP_MAGIC || a.req_seq != seq) return -EPROTO;
      *status = a.status;
      return 0;
    }
    usleep(500);
  }
  return -ETIMEDOUT;
}

static struct wh_gate_req mkreq(uint16_t kind, uint32_t chan, uint64_t gen) {
  struct wh_gate_req g;
  memset(&g, 0, sizeof g);
  g.magic = WH_GATE_REQ_MAGIC;
  g.kind = kind;
  g.version = WH_GATE_PROTO_VERSION;
  g.chan = chan;
  g.generation = gen;
  return g;
}

/* A request the server must refuse with `want`; counts what it expects. */
static void expect_answer(const char *name, const void *req, uint32_t len, int32_t want, const char *what) {
  int32_t st = 0;
  int r = round_trip(req, len, &st);
  if (r) {
    result(name, 0, "%s: no answer (%d)", what, r);
    return;
  }
  result(name, st == want, "%s: answered %d (want %d)", what, st, want);
  if (want == -EINVAL && strstr(what, "malformed")) exp_violations++;
  else exp_refused++;
}

/* ---- /dev/mem --------------------------------------------------------- */
static int devmem_fd = -1;
static volatile uint8_t *map_page(uint64_t gpa, int prot) {
  void *p = mmap(NULL, 4096, prot, MAP_SHARED, devmem_fd, (off_t)gpa);
  return p == MAP_FAILED ? NULL : (volatile uint8_t *)p;
}
static uint64_t rd64(volatile uint8_t *p, size_t off) { return *(volatile uint64_t *)(p + off); }
static void wr64(volatile uint8_t *p, size_t off, uint64_t v) { *(volatile uint64_t *)(p + off) = v; }

static void find_bar(char *path, size_t n) {
  DIR *d = opendir("/sys/bus/pci/devices");
  struct dirent *e;
  path[0] = 0;
  while (d && (e = readdir(d))) {
    char f[400], v[32] = "", id[32] = "";
    FILE *fp;
    snprintf(f, sizeof f, "/sys/bus/pci/devices/%s/vendor", e->d_name);
    if ((fp = fopen(f, "r"))) { if (!fgets(v, sizeof v, fp)) v[0] = 0; fclose(fp); }
    snprintf(f, sizeof f, "/sys/bus/pci/devices/%s/device", e->d_name);
    if ((fp = fopen(f, "r"))) { if (!fgets(id, sizeof id, fp)) id[0] = 0; fclose(fp); }
    if (!strncmp(v, "0x1af4", 6) && !strncmp(id, "0x1110", 6)) {
      snprintf(path, n, "/sys/bus/pci/devices/%s/resource2", e->d_name);
      break;
    }
  }
  if (d) closedir(d);
}

/* hostile view-write: the last act of the chain bed. wh_hostile.ko rewrites
 * the gate page tables so that our slot's channel page maps the gate's PML4
 * page, which the view maps read-only; our SUBMIT then makes the gate store
 * the request length (0x5a5) onto it. KVM takes the EPT violation in the
 * view and returns to QEMU (KVM_EXIT_WORMHOLE); L1 checks the page in the
 * gate memory file. Returning from the SUBMIT at all means the store was
 * not stopped. */
static int view_write(void) {
  static uint8_t buf[0x5a5];
  char cmd[256];
  snprintf(cmd, sizeof cmd, "insmod /wh/wh_hostile.ko gate_gpa=0x%llx redirect_slot=%u",
           (unsigned long long)info.gate_gpa, info.slot);
  if (system(cmd) != 0) {
    result("view_write", 0, "%s failed", cmd);
    return 1;
  }
  printf("hostile: slot %u redirected; SUBMIT of 0x5a5 bytes now\n", info.slot);
  fflush(stdout);
  struct wh_gate_call c;
  int r = gate_call(WH_GATE_OP_SUBMIT, buf, sizeof buf, &c);
  result("view_write", 0, "the SUBMIT returned (ioctl %d, gate %lld): the VM kept running", r, (long long)c.result);
  return 1;
}

int main(int argc, char **argv) {
  const int vw = argc > 1 && !strcmp(argv[1], "view-write");
  const double wait_s = argc > 1 && !vw ? atof(argv[1]) : 300;
  setvbuf(stdout, NULL, _IOLBF, 0);
  /* Host runs against the fake gate (LD_PRELOAD): $WORMHOLE_GATE names the
   * device, and WH_HOSTILE_HOST=1 keeps (c) away from the host's memory. */
  const char *dev = getenv("WORMHOLE_GATE") ? getenv("WORMHOLE_GATE") : "/dev/wormhole-gate";
  const int no_devmem = getenv("WH_HOSTILE_HOST") != NULL; /* also: the fake reads buffers unchecked */
  gate_fd = open(dev, O_RDWR | O_CLOEXEC);
  if (gate_fd < 0 || ioctl(gate_fd, WH_GATE_IOC_INFO, &info)) {
    result("setup", 0, "/dev/wormhole-gate: %s", strerror(errno));
    return 1;
  }
  printf("hostile: gate slot %u of %u, view %u, gate at 0x%llx\n", info.slot, info.nslots, info.view_index,
         (unsigned long long)info.gate_gpa);
  if (vw) return view_write();

  /* The victim: a channel whose published record shows an owner that has
   * been served a few requests (so it has bound its own slot). */
  struct wh_gate_state st;
  uint32_t victim = 0;
  uint64_t vgen = 0;
  double t0 = now_s();
  while (!vgen && now_s() - t0 < wait_s) {
    if (query_state(&st) == 0)
      for (uint32_t i = 0; i < st.nchan && i < WH_GATE_STATE_CHANS; i++)
        if (st.chan[i].generation && st.chan[i].handled >= 4 &&
            st.chan[i].check == wh_gate_state_check(&st.chan[i])) {
          victim = i, vgen = st.chan[i].generation;
          break;
        }
    if (!vgen) usleep(100000);
  }
  if (!vgen) {
    result("setup", 0, "no victim channel published within %.0f s", wait_s);
    return 1;
  }
  printf("hostile: victim channel %u generation %llu (handled %llu) after %.1f s\n", victim,
         (unsigned long long)vgen, (unsigned long long)st.chan[victim].handled, now_s() - t0);
  result("setup", 1, "slot %u, victim channel %u", info.slot, victim);

  /* (a) someone else's channel: first with its true generation (read from
   * the state page, as any process of the VM can), while the victim runs. */
  struct wh_gate_req g = mkreq(WH_GATE_KIND_BIND, victim, vgen);
  expect_answer("bind_victim_generation", &g, sizeof g, -EBUSY,
                "BIND to the victim's channel with its true generation (read from the state page)");
  struct {
    struct wh_gate_req g;
    uint8_t pl[8];
  } call;
  memset(&call, 0, sizeof call);
  call.g = mkreq(WH_GATE_KIND_CALL, victim, vgen);
  struct wh_msg_hdr h = {.magic = WH_MSG_MAGIC, .version = 1, .opcode = 1, .len = 8, .call_id = 77};
  memcpy(call.g.hdr, &h, sizeof h);
  expect_answer("call_after_refused_bind", &call, sizeof call, -ESTALE, "CALL on the victim's channel after that");
  g = mkreq(WH_GATE_KIND_BIND, victim, vgen ^ 0x5a5a0000ull);
  expect_answer("bind_forged_generation", &g, sizeof g, -ESTALE, "BIND to the victim's channel, forged generation");
  g = mkreq(WH_GATE_KIND_BIND, 1000, vgen);
  expect_answer("bind_unknown_channel", &g, sizeof g, -EINVAL, "BIND to channel 1000");
  expect_answer("call_unbound", &call, sizeof call, -ESTALE, "CALL on the victim's channel, slot not bound");

  /* (b) malformed slots: each answered -EINVAL and counted as a violation. */
  uint8_t junk[WH_SLOT_MAX];
  memset(junk, 0xa5, sizeof junk);
  expect_answer("slot_too_short", junk, 16, -EINVAL, "malformed: 16 bytes, shorter than the gate header");
  g = mkreq(7, victim, vgen);
  expect_answer("slot_bad_kind", &g, sizeof g, -EINVAL, "malformed: kind 7");
  call.g = mkreq(WH_GATE_KIND_CALL, victim, vgen);
  h.len = 5000; /* more than the slot holds */
  memcpy(call.g.hdr, &h, sizeof h);
  expect_answer("slot_length_past_slot", &call, sizeof call, -EINVAL, "malformed: header length 5000 > slot");
  h.len = 8, h.opcode = WH_OP_PAD;
  memcpy(call.g.hdr, &h, sizeof h);
  expect_answer("slot_bad_opcode", &call, sizeof call, -EINVAL, "malformed: opcode PAD");
  h.opcode = 1, h.flags = WH_MSG_F_RESPONSE;
  memcpy(call.g.hdr, &h, sizeof h);
  expect_answer("slot_response_flag", &call, sizeof call, -EINVAL, "malformed: a response as request");
  g = mkreq(WH_GATE_KIND_BIND, victim, vgen);
  memset(junk, 0, sizeof junk);
  memcpy(junk, &g, sizeof g);
  expect_answer("slot_bind_trailing", junk, sizeof g + 8, -EINVAL, "malformed: BIND with trailing bytes");
  /* Last: its pattern stays in our channel slot for (c). */
  memset(junk, 0xa5, sizeof junk);
  g = mkreq(WH_GATE_KIND_BIND, victim, vgen);
  g.magic = 0x4c54534fu; /* a pattern looked for in (c) */
  memcpy(junk, &g, sizeof g);
  memcpy(junk + sizeof g, "HOSTILE-PATTERN!", 16);
  expect_answer("slot_bad_magic", junk, sizeof g + 16, -EINVAL, "malformed: bad request magic");
  /* Refused by the module before any gate call (no server counter). */
  struct wh_gate_call c;
  int r = gate_call(9, junk, 8, &c);
  result("ioctl_bad_op", r == -EINVAL, "op 9: %d (want %d)", r, -EINVAL);
  r = gate_call(WH_GATE_OP_SUBMIT, junk, WH_SLOT_MAX + 1, &c);
  result("ioctl_oversize", r == -EINVAL, "SUBMIT of %d bytes: %d (want %d)", WH_SLOT_MAX + 1, r, -EINVAL);
  if (!no_devmem) {
    r = gate_call(WH_GATE_OP_SUBMIT, (void *)16, 64, &c);
    result("ioctl_bad_buffer", r == -EFAULT, "SUBMIT from address 16: %d (want %d)", r, -EFAULT);
  }

  /* (c) the server's memory (only in a VM: not the host's /dev/mem). */
  if (no_devmem) {
    printf("hostile: on the host: /dev/mem, BAR and unprivileged checks skipped\n");
    goto done;
  }
  const uint64_t G = info.gate_gpa;
  devmem_fd = open("/dev/mem", O_RDWR | O_SYNC | O_CLOEXEC);
  printf("hostile: /dev/mem: %s\n", devmem_fd < 0 ? strerror(errno) : "open");
  if (devmem_fd >= 0) {
    volatile uint8_t *sp = map_page(G + WH_GATE_STATE_OFF, PROT_READ | PROT_WRITE);
    if (!sp) {
      result("devmem_state_read", 1, "mmap of the state page refused: %s", strerror(errno));
    } else {
      uint64_t w0 = rd64(sp, 0), w1 = rd64(sp, 8);
      /* The gate's QUERY sees the magic at +8; the default view must not. */
      result("devmem_state_read", (uint32_t)w1 != WH_GATE_STATE_MAGIC,
             "state page from the default view: %016llx %016llx (the view holds magic %08x)",
             (unsigned long long)w0, (unsigned long long)w1, WH_GATE_STATE_MAGIC);
      wr64(sp, 8, 0);
      wr64(sp, 0, 1);
      int ok = query_state(&st) == 0 && st.magic == WH_GATE_STATE_MAGIC;
      result("devmem_state_write", ok, "state page after writing it from the default view: %s",
             ok ? "intact through QUERY" : "changed or unreadable");
      munmap((void *)sp, 4096);
    }
    volatile uint8_t *cp = map_page(G + WH_GATE_CHAN_OFF + info.slot * 0x1000ull, PROT_READ);
    if (!cp) {
      result("devmem_channel_read", 1, "mmap of our channel slot refused: %s", strerror(errno));
    } else {
      /* Our last SUBMIT (the bad-magic one) is in this slot, seen from the
       * view; QUERY and NOP since then did not touch it. */
      uint64_t w = rd64(cp, 8), p = rd64(cp, 8 + sizeof g);
      uint64_t pat;
      memcpy(&pat, "HOSTILE-", 8);
      result("devmem_channel_read", (uint32_t)w != 0x4c54534fu && p != pat,
             "our channel slot from the default view: %016llx %016llx", (unsigned long long)w, (unsigned long long)p);
      munmap((void *)cp, 4096);
    }
    /* Descriptor and gate code: read-only memory slots. */
    const struct { const char *name; uint64_t off; size_t at; } ro[] = {
        {"devmem_desc_write", WH_GATE_DESC_OFF, 0x800},
        {"devmem_code_write", WH_GATE_CODE_OFF, 0xff8},
        {"devmem_desc_magic_write", WH_GATE_DESC_OFF, WH_DESC_MAGIC},
    };
    for (size_t i = 0; i < sizeof ro / sizeof ro[0]; i++) {
      volatile uint8_t *p = map_page(G + ro[i].off, PROT_READ | PROT_WRITE);
      if (!p) {
        result(ro[i].name, 1, "mmap refused: %s", strerror(errno));
        continue;
      }
      uint64_t before = rd64(p, ro[i].at);
      wr64(p, ro[i].at, ~before);
      uint64_t after = rd64(p, ro[i].at);
      result(ro[i].name, after == before, "word at +%#zx: %016llx, after writing its complement %016llx", ro[i].at,
             (unsigned long long)before, (unsigned long long)after);
      munmap((void *)p, 4096);
    }
    r = gate_call(WH_GATE_OP_NOP, NULL, 0, &c);
    result("gate_still_works", r == 0 && c.result == 0, "NOP through the gate: ioctl %d, gate %lld", r,
           (long long)c.result);
    close(devmem_fd);
  } else {
    result("devmem_state_read", 1, "/dev/mem refused: %s", strerror(errno));
  }

  char bar[512];
  find_bar(bar, sizeof bar);
  int bfd = bar[0] ? open(bar, O_RDWR | O_SYNC) : -1;
  if (bfd < 0) {
    result("bar_past_end", 0, "no ivshmem BAR (%s)", bar[0] ? strerror(errno) : "no device");
  } else {
    struct stat sb;
    fstat(bfd, &sb);
    void *a = mmap(NULL, 4096, PROT_READ, MAP_SHARED, bfd, sb.st_size);
    int ea = errno;
    void *b = mmap(NULL, sb.st_size + 4096, PROT_READ, MAP_SHARED, bfd, 0);
    int eb = errno;
    result("bar_past_end", a == MAP_FAILED && b == MAP_FAILED,
           "BAR of %lld bytes: a page at its end: %s; the BAR plus a page: %s", (long long)sb.st_size,
           a == MAP_FAILED ? strerror(ea) : "MAPPED", b == MAP_FAILED ? strerror(eb) : "MAPPED");
    close(bfd);
  }

  /* An unprivileged process gets none of the three. */
  pid_t pid = fork();
  if (pid == 0) {
    if (setgid(65534) || setuid(65534)) _exit(100);
    int n = 0;
    const char *paths[] = {"/dev/wormhole-gate", "/dev/mem", bar};
    for (int i = 0; i < 3; i++) {
      if (!paths[i][0]) continue;
      int fd = open(paths[i], O_RDWR);
      if (fd >= 0) {
        printf("hostile: uid 65534 opened %s\n", paths[i]);
        n++;
      }
    }
    _exit(n);
  }
  int ws = 0;
  waitpid(pid, &ws, 0);
  result("unprivileged", WIFEXITED(ws) && WEXITSTATUS(ws) == 0,
         "uid 65534: /dev/wormhole-gate, /dev/mem and the BAR %s",
         WIFEXITED(ws) && WEXITSTATUS(ws) == 0 ? "all refused" : "NOT all refused");

done:
  printf("hostile: expect refused=%d violations=%d binds=0\n", exp_refused, exp_violations);
  printf("hostile: %d failed\n", fails);
  return fails;
}
