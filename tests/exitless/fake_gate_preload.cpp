// LD_PRELOAD stand-in for wormhole_gate.ko + gate.S under an unmodified
// program: the drop-in libcudart opens $WORMHOLE_GATE (a plain file here)
// and calls ioctl() on it; this library answers those ioctls with
// GateCodeDevice (fake_gate.hpp) over the gate memory object
// $WH_FAKE_GATE_MEM, the file wormhole-server maps through --vm-gate.
// Every other ioctl goes to the kernel.
//
// Slots: as the module gives each open file its own slot, each process
// takes the first slot whose lock file ($WORMHOLE_GATE.slotN) it can flock;
// the kernel drops the lock when the process dies, freeing the slot.
// $WH_FAKE_GATE_SLOT pins one instead. At exit the library prints its
// counters: "wh-fake-gate: slot S submits N busy B polls P queries Q".
// With $WH_FAKE_GATE_VERBOSE it also prints each BIND it carries.
#include <fcntl.h>
#include <stdarg.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include "fake_gate.hpp"

namespace {

struct Gate {
  std::once_flag once;
  std::string dev_path;                       // realpath of $WORMHOLE_GATE
  std::unique_ptr<wh::test::GateCodeDevice> dev;  // null: no usable gate memory
  int slot_lock = -1;
  bool verbose = false;

  void init() {
    const char* g = std::getenv("WORMHOLE_GATE");
    const char* mem = std::getenv("WH_FAKE_GATE_MEM");
    if (!g || !mem) return;
    char rp[4096];
    if (!realpath(g, rp)) return;
    dev_path = rp;
    verbose = std::getenv("WH_FAKE_GATE_VERBOSE") != nullptr;
    int fd = open(mem, O_RDWR | O_CLOEXEC);
    if (fd < 0) return;
    void* m = mmap(nullptr, WH_GATE_WINDOW, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) return;
    int slot = -1;
    if (const char* s = std::getenv("WH_FAKE_GATE_SLOT")) {
      slot = std::atoi(s);
    } else {
      for (int i = 0; i < WH_GATE_NSLOTS && slot < 0; i++) {
        std::string lock = std::string(g) + ".slot" + std::to_string(i);
        int lf = open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (lf >= 0 && flock(lf, LOCK_EX | LOCK_NB) == 0) {
          slot = i;
          slot_lock = lf;
        } else if (lf >= 0) {
          close(lf);
        }
      }
    }
    if (slot < 0 || slot >= WH_GATE_NSLOTS) return;  // all taken: the module's EBUSY at open
    dev = std::make_unique<wh::test::GateCodeDevice>(static_cast<uint8_t*>(m), uint32_t(slot));
    if (verbose) std::fprintf(stderr, "wh-fake-gate: pid %d slot %d\n", int(getpid()), slot);
  }

  bool is_gate_fd(int fd) {
    std::call_once(once, [this] { init(); });
    return dev && wh::test::fd_opens(fd, dev_path);
  }

  void report() {
    if (!dev) return;
    char line[192];
    int n = std::snprintf(line, sizeof line, "wh-fake-gate: slot %u submits %llu busy %llu polls %llu queries %llu\n",
                          dev->slot(), (unsigned long long)dev->submits.load(), (unsigned long long)dev->busy.load(),
                          (unsigned long long)dev->polls.load(), (unsigned long long)dev->queries.load());
    if (n > 0) (void)!write(2, line, size_t(n));
  }
};

Gate& gate() {
  static Gate* g = new Gate();  // never destroyed: libcudart's exit handlers may still call
  return *g;
}

// Prints the counters when the process exits normally (the device itself
// stays: exit handlers registered later may still close the gate).
struct Report {
  ~Report() { gate().report(); }
} report_at_exit;

}  // namespace

extern "C" int ioctl(int fd, unsigned long req, ...) {
  va_list ap;
  va_start(ap, req);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  Gate& g = gate();
  if (!g.is_gate_fd(fd)) return int(syscall(SYS_ioctl, fd, req, arg));
  int r = -ENOTTY;
  if (req == WH_GATE_IOC_INFO) r = g.dev->info(static_cast<wh_gate_info*>(arg));
  if (req == WH_GATE_IOC_CALL) {
    auto* c = static_cast<wh_gate_call*>(arg);
    if (g.verbose && c->op == WH_GATE_OP_SUBMIT && c->len >= sizeof(wh_gate_req)) {
      wh_gate_req q;
      std::memcpy(&q, reinterpret_cast<const void*>(uintptr_t(c->buf)), sizeof q);
      if (q.kind == WH_GATE_KIND_BIND)
        std::fprintf(stderr, "wh-fake-gate: BIND chan %u generation %llu\n", q.chan,
                     (unsigned long long)q.generation);
    }
    r = g.dev->call(c);
  }
  if (r == 0) return 0;
  errno = -r;
  return -1;
}
