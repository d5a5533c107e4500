// wh-ivshmem: inspect and exercise an ivshmem region, from inside a guest
// (the BAR) or on the host (the file behind it; --device /dev/shm/NAME).
//
//   wh-ivshmem list                       ivshmem devices in sysfs
//   wh-ivshmem info                       the device that would be used, size
//   wh-ivshmem fill  --seed S [--offset O] [--len L]   write a pattern
//   wh-ivshmem check --seed S [--offset O] [--len L]   verify it
//   wh-ivshmem echo  [--offset O] [--idle-timeout S] [--poll-us U]
//   wh-ivshmem ping  [--offset O] [--iters N] [--warmup W] [--ready-timeout S]
//   wh-ivshmem poke  --offset O --value V        store a 64-bit word
//   wh-ivshmem peek  --offset O [--wait S]       print a 64-bit word (with
//                    --wait, first wait up to S seconds for it to be non-zero)
//
// echo/ping: a spin ping-pong on one cache line at --offset. ping writes a
// sequence number, echo copies it back (words: 0 request, 1 response,
// 2 ready magic, 3 the echo's clock for calibration); ping prints
//   rtt_p50_ns=<n> rtt_p99_ns=<n> rtt_min_ns=<n> iters=<n>
// Global options: --device SPEC (else WORMHOLE_DEVICE, else the first
// 1af4:1110 device), --sysfs ROOT, --expect-size BYTES.
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>
#include <algorithm>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define WH_HAVE_TSC 1
#endif

#include "wormhole/ivshmem.hpp"

namespace {

using u64 = std::uint64_t;
constexpr u64 kReady = 0x57482d4543484f31ull;  // "WH-ECHO1"
constexpr u64 kStop = ~0ull;
// A request with this bit asks the echo peer to store its CLOCK_MONOTONIC
// (ns) in word 3 before answering: the client calibrates its TSC against
// the peer's clock, so a guest whose own clock is off (a TCG guest on a
// loaded host) still reports host nanoseconds.
constexpr u64 kTimeFlag = 1ull << 62;

u64 mix(u64 x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

u64 now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<u64>(ts.tv_sec) * 1000000000ull + static_cast<u64>(ts.tv_nsec);
}

inline u64 ticks() {
#ifdef WH_HAVE_TSC
  return __rdtsc();
#else
  return now_ns();
#endif
}

inline void cpu_relax() {
#ifdef WH_HAVE_TSC
  _mm_pause();
#endif
}

struct Args {
  std::string cmd;
  std::map<std::string, std::string> kv;
  u64 num(const std::string& k, u64 def) const {
    auto it = kv.find(k);
    if (it == kv.end()) return def;
    return std::strtoull(it->second.c_str(), nullptr, 0);
  }
  std::string str(const std::string& k, const std::string& def = "") const {
    auto it = kv.find(k);
    return it == kv.end() ? def : it->second;
  }
};

int usage() {
  std::fprintf(stderr,
               "usage: wh-ivshmem [--device SPEC] [--sysfs ROOT] [--expect-size B] "
               "list|info|fill|check|echo|ping|peek|poke [--seed S] [--offset O] [--len L] "
               "[--iters N] [--warmup W] [--idle-timeout S] [--ready-timeout S] [--poll-us U] "
               "[--value V] [--wait S]\n");
  return 2;
}

std::atomic_ref<u64> word(void* base, u64 off, unsigned i) {
  return std::atomic_ref<u64>(*(reinterpret_cast<u64*>(static_cast<char*>(base) + off) + i));
}

int do_fill_check(const wh::ivshmem::Mapping& m, const Args& a, bool check) {
  u64 seed = a.num("seed", 1), off = a.num("offset", 0);
  u64 len = a.num("len", m.size - off);
  if (off % 8 || len % 8 || off > m.size || len > m.size - off) {
    std::fprintf(stderr, "wh-ivshmem: offset/len must be 8-aligned and inside %zu bytes\n",
                 m.size);
    return 2;
  }
  auto* p = reinterpret_cast<volatile u64*>(static_cast<char*>(m.base) + off);
  u64 n = len / 8, bad = 0, first_bad = ~0ull;
  for (u64 i = 0; i < n; ++i) {
    u64 want = mix(seed ^ (i * 0x100000001b3ull));
    if (!check) {
      p[i] = want;
    } else if (p[i] != want) {
      if (!bad) first_bad = i;
      ++bad;
    }
  }
  if (!check) {
    // Stores to the shared mapping are coherent: nothing to fence before exit.
    std::printf("filled %" PRIu64 " bytes at offset %" PRIu64 " seed %" PRIu64 "\n", len, off,
                seed);
    return 0;
  }
  if (bad) {
    std::printf("MISMATCH %" PRIu64 " of %" PRIu64 " words, first at byte %" PRIu64
                " (got %016" PRIx64 ")\n",
                bad, n, off + first_bad * 8, static_cast<u64>(p[first_bad]));
    return 1;
  }
  std::printf("pattern ok: %" PRIu64 " bytes at offset %" PRIu64 " seed %" PRIu64 "\n", len, off,
              seed);
  return 0;
}

// Host (or peer) side: copy word0 (request) to word1 (response).
int do_echo(const wh::ivshmem::Mapping& m, const Args& a) {
  u64 off = a.num("offset", 0);
  if (off % 64 || off + 64 > m.size) return usage();
  double idle_s = static_cast<double>(a.num("idle-timeout", 120));
  u64 poll_us = a.num("poll-us", 0);
  auto req = word(m.base, off, 0), rsp = word(m.base, off, 1), rdy = word(m.base, off, 2);
  req.store(0, std::memory_order_relaxed);
  rsp.store(0, std::memory_order_relaxed);
  rdy.store(kReady, std::memory_order_release);
  u64 last = 0, echoed = 0, last_change = now_ns();
  for (u64 spins = 0;; ++spins) {
    u64 v = req.load(std::memory_order_acquire);
    if (v != last) {
      last = v;
      if (v == kStop) break;
      if (v & kTimeFlag) word(m.base, off, 3).store(now_ns(), std::memory_order_relaxed);
      rsp.store(v, std::memory_order_release);
      ++echoed;
      last_change = 0;
      continue;
    }
    if ((spins & 0xffff) == 0 || poll_us) {
      u64 t = now_ns();
      if (last_change == 0) last_change = t;
      if (static_cast<double>(t - last_change) > idle_s * 1e9) {
        rdy.store(0, std::memory_order_release);
        std::fprintf(stderr, "wh-ivshmem echo: idle for %.0f s, giving up\n", idle_s);
        return 3;
      }
      if (poll_us) std::this_thread::sleep_for(std::chrono::microseconds(poll_us));
    }
    cpu_relax();
  }
  rdy.store(0, std::memory_order_release);
  std::printf("echoed %" PRIu64 " requests\n", echoed);
  return 0;
}

// A word of a mailbox region: lets guests (or a guest and the host) hand
// each other values, e.g. a handle that VM B must fail to use.
int do_peek_poke(const wh::ivshmem::Mapping& m, const Args& a, bool poke) {
  u64 off = a.num("offset", ~0ull);
  if (off % 8 || off > m.size - 8) return usage();
  auto w = word(m.base, off, 0);
  if (poke) {
    w.store(a.num("value", 0), std::memory_order_seq_cst);
    return 0;
  }
  double wait_s = static_cast<double>(a.num("wait", 0));
  u64 t0 = now_ns();
  u64 v = w.load(std::memory_order_acquire);
  while (v == 0 && static_cast<double>(now_ns() - t0) < wait_s * 1e9) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    v = w.load(std::memory_order_acquire);
  }
  std::printf("0x%" PRIx64 "\n", v);
  return (wait_s > 0 && v == 0) ? 3 : 0;
}

int do_ping(const wh::ivshmem::Mapping& m, const Args& a) {
  u64 off = a.num("offset", 0);
  if (off % 64 || off + 64 > m.size) return usage();
  u64 iters = std::max<u64>(1, a.num("iters", 20000)), warm = a.num("warmup", 1000);
  double ready_s = static_cast<double>(a.num("ready-timeout", 30));
  auto req = word(m.base, off, 0), rsp = word(m.base, off, 1), rdy = word(m.base, off, 2);
  u64 t_start = now_ns();
  while (rdy.load(std::memory_order_acquire) != kReady) {
    if (static_cast<double>(now_ns() - t_start) > ready_s * 1e9) {
      std::fprintf(stderr, "wh-ivshmem ping: no echo peer (ready word never set)\n");
      return 3;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::vector<u64> d;
  d.reserve(iters);
  u64 seq = rsp.load(std::memory_order_acquire) & ~kTimeFlag;
  const u64 stall_ns = 10'000'000'000ull;  // a peer silent this long is gone
  auto exchange = [&](u64 v) -> bool {
    req.store(v, std::memory_order_release);
    u64 spins = 0, stall_start = 0;
    while (rsp.load(std::memory_order_acquire) != v) {
      cpu_relax();
      if ((++spins & 0xfffff) == 0) {
        u64 t = now_ns();
        if (!stall_start) stall_start = t;
        if (t - stall_start > stall_ns) return false;
      }
    }
    return true;
  };
  auto peer_time = word(m.base, off, 3);
  // Returns {tsc at the midpoint, peer ns}; peer ns 0 if the peer did not answer with a time.
  auto sample = [&](u64& tick, u64& peer) -> bool {
    peer_time.store(0, std::memory_order_relaxed);
    u64 a0 = ticks();
    if (!exchange((++seq) | kTimeFlag)) return false;
    u64 a1 = ticks();
    tick = a0 + (a1 - a0) / 2;
    peer = peer_time.load(std::memory_order_acquire);
    return true;
  };
  u64 c0 = 0, p0 = 0, c1 = 0, p1 = 0;
  u64 n0 = now_ns();
  if (!sample(c0, p0)) {
    std::fprintf(stderr, "wh-ivshmem ping: peer stopped answering\n");
    return 3;
  }
  u64 k0 = ticks();
  for (u64 i = 0; i < warm + iters; ++i) {
    u64 t0 = ticks();
    if (!exchange(++seq)) {
      std::fprintf(stderr, "wh-ivshmem ping: peer stopped answering\n");
      return 3;
    }
    u64 t1 = ticks();
    if (i >= warm) d.push_back(t1 - t0);
  }
  u64 k1 = ticks(), n1 = now_ns();
  if (!sample(c1, p1)) {
    std::fprintf(stderr, "wh-ivshmem ping: peer stopped answering\n");
    return 3;
  }
  req.store(kStop, std::memory_order_release);
  const char* clock = "peer";
  double ns_per_tick;
  if (p0 && p1 > p0 && c1 > c0) {
    ns_per_tick = static_cast<double>(p1 - p0) / static_cast<double>(c1 - c0);
  } else {  // an echo without the time service: our own clock
    clock = "local";
    ns_per_tick = k1 > k0 ? static_cast<double>(n1 - n0) / static_cast<double>(k1 - k0) : 1.0;
  }
  std::sort(d.begin(), d.end());
  auto pct = [&](double q) {
    size_t k = static_cast<size_t>(q * static_cast<double>(d.size() - 1));
    return static_cast<u64>(static_cast<double>(d[k]) * ns_per_tick + 0.5);
  };
  std::printf("rtt_p50_ns=%" PRIu64 " rtt_p99_ns=%" PRIu64 " rtt_min_ns=%" PRIu64
              " iters=%" PRIu64 " clock=%s\n",
              pct(0.5), pct(0.99), pct(0.0), iters, clock);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    if (s.rfind("--", 0) == 0) {
      if (i + 1 >= argc) return usage();
      a.kv[s.substr(2)] = argv[++i];
    } else if (a.cmd.empty()) {
      a.cmd = s;
    } else {
      return usage();
    }
  }
  std::string sysfs = a.str("sysfs", std::string(wh::ivshmem::kDefaultSysfsRoot));
  if (a.cmd == "list") {
    for (const auto& d : wh::ivshmem::find_devices(sysfs)) std::printf("%s\n", d.c_str());
    return 0;
  }
  if (a.cmd != "info" && a.cmd != "fill" && a.cmd != "check" && a.cmd != "echo" &&
      a.cmd != "ping" && a.cmd != "peek" && a.cmd != "poke")
    return usage();

  wh::ivshmem::Options opt;
  opt.sysfs_root = sysfs;
  opt.device = a.str("device");
  std::string err;
  auto m = wh::ivshmem::open_device(opt, &err);
  if (!m) {
    std::fprintf(stderr, "wh-ivshmem: %s\n", err.c_str());
    return 1;
  }
  if (u64 want = a.num("expect-size", 0); want && want != m->size) {
    std::fprintf(stderr, "wh-ivshmem: %s is %zu bytes, expected %" PRIu64 "\n", m->path.c_str(),
                 m->size, want);
    return 1;
  }
  if (a.cmd == "info") {
    std::printf("path=%s size=%zu\n", m->path.c_str(), m->size);
    return 0;
  }
  if (a.cmd == "fill") return do_fill_check(*m, a, false);
  if (a.cmd == "check") return do_fill_check(*m, a, true);
  if (a.cmd == "echo") return do_echo(*m, a);
  if (a.cmd == "peek" || a.cmd == "poke") return do_peek_poke(*m, a, a.cmd == "poke");
  return do_ping(*m, a);
}
