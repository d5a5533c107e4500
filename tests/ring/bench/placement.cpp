// wh_ring_placement (make ring-placement): where the host has put the two
// vCPUs that bench-ring pins its two sides to. The bench assumes two
// cores; on the development VM the pair moves between placements minute
// by minute, and its bare ping-pong floor is about 60, 100-150 or 300-500
// ns accordingly (docs/benchmarks.md). This tells which placement is two
// SMT threads of one core: round after round it measures the floor, then
// times a loop on CPU 0 that is bound by ALU throughput (eight independent
// add/xor chains) twice, once while CPU 1 PAUSE-spins and once while CPU 1
// runs the same kind of loop. Separate cores: the two times agree. SMT
// siblings: the busy sibling takes execution units, and the loop slows.
//
//   wh_ring_placement [--seconds N]   (default 60)
//
// Prints, per floor class (near <= 80 ns < usual <= 250 ns < far:
// bench::placement_of, as bench-ring's block line), the rounds and the slowdown's p10/p50/p90,
// then one summary line:
//   placement rounds=R near=N near_slowdown_p50=X usual=U usual_slowdown_p50=Y far=F far_slowdown_p50=Z
#include <x86intrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "bench_common.hpp"

namespace {

using wh::ring::bench::pin;

// n rounds of 16 single-cycle ALU operations in eight independent chains:
// limited by the core's ALUs, which SMT siblings share.
uint64_t alu_loop(uint64_t n) {
  uint64_t a = 1, b = 2, c = 3, d = 4, e = 5, f = 6, g = 7, h = 8;
  const uint64_t k = 0x9E3779B97F4A7C15ull;
  for (uint64_t i = 0; i < n; i++) {
    asm volatile(
        "add %[k],%[a]\n\tadd %[k],%[b]\n\tadd %[k],%[c]\n\tadd %[k],%[d]\n\t"
        "add %[k],%[e]\n\tadd %[k],%[f]\n\tadd %[k],%[g]\n\tadd %[k],%[h]\n\t"
        "xor %[k],%[a]\n\txor %[k],%[b]\n\txor %[k],%[c]\n\txor %[k],%[d]\n\t"
        "xor %[k],%[e]\n\txor %[k],%[f]\n\txor %[k],%[g]\n\txor %[k],%[h]"
        : [a] "+r"(a), [b] "+r"(b), [c] "+r"(c), [d] "+r"(d), [e] "+r"(e), [f] "+r"(f),
          [g] "+r"(g), [h] "+r"(h)
        : [k] "r"(k));
  }
  return a + b + c + d + e + f + g + h;
}

enum Mode : int { kPingPong = 0, kPause = 1, kBusy = 2, kExit = 3 };

struct alignas(64) Line {
  std::atomic<uint64_t> v{0};
};
Line ping, pong;
Line mode_word, ack_word;
std::atomic<uint64_t> sink{0};

// CPU 1: answers the ping-pong, or spins as told until told otherwise.
void sibling() {
  pin(1);
  for (;;) {
    const uint64_t m = mode_word.v.load(std::memory_order_acquire);
    if (m == kExit) return;
    if (m == kPingPong) {
      const uint64_t v = ping.v.load(std::memory_order_acquire);
      if (v != pong.v.load(std::memory_order_relaxed)) pong.v.store(v, std::memory_order_release);
      continue;
    }
    ack_word.v.store(m, std::memory_order_release);
    if (m == kPause) {
      while (mode_word.v.load(std::memory_order_relaxed) == kPause) _mm_pause();
    } else {
      uint64_t x = 0;
      while (mode_word.v.load(std::memory_order_relaxed) == kBusy) x += alu_loop(200);
      sink.fetch_add(x, std::memory_order_relaxed);
    }
    ack_word.v.store(kPingPong, std::memory_order_release);
  }
}

void set_mode(uint64_t m) {
  mode_word.v.store(m, std::memory_order_release);
  if (m == kExit) return;
  while (ack_word.v.load(std::memory_order_acquire) != m) _mm_pause();
}

template <class T>
T quantile(std::vector<T> v, double q) {
  if (v.empty()) return T{};
  size_t i = std::min(v.size() - 1, size_t(q * double(v.size())));
  std::nth_element(v.begin(), v.begin() + long(i), v.end());
  return v[i];
}

// The median of 9 timings of the loop on CPU 0 while CPU 1 does `m`.
uint64_t loop_ticks(Mode m) {
  set_mode(m);
  std::vector<uint64_t> t;
  for (int j = 0; j < 9; j++) {
    uint64_t t0 = __rdtsc();
    sink.fetch_add(alu_loop(5000), std::memory_order_relaxed);
    t.push_back(__rdtsc() - t0);
  }
  set_mode(kPingPong);
  return quantile(t, 0.5);
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 60;
  for (int i = 1; i < argc; i++) {
    if (!std::strcmp(argv[i], "--seconds") && i + 1 < argc) {
      seconds = std::atof(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--seconds N]\n", argv[0]);
      return 2;
    }
  }
  const double ns_per_tick = wh::ring::bench::ns_per_tsc_tick();
  std::thread other(sibling);
  pin(0);
  std::vector<double> slowdown[3];  // by wh::ring::bench::Placement
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  uint64_t rounds = 0;
  std::vector<uint64_t> rtt(4000);
  while (std::chrono::steady_clock::now() < end) {
    set_mode(kPingPong);
    for (auto& r : rtt) {
      const uint64_t t0 = __rdtsc();
      const uint64_t v = ping.v.load(std::memory_order_relaxed) + 1;
      ping.v.store(v, std::memory_order_release);
      while (pong.v.load(std::memory_order_acquire) != v) {
      }
      r = __rdtsc() - t0;
    }
    const double floor_ns = double(quantile(rtt, 0.5)) * ns_per_tick;
    const double quiet = double(loop_ticks(kPause));
    const double busy = double(loop_ticks(kBusy));
    slowdown[wh::ring::bench::placement_of(floor_ns)].push_back(busy / quiet);
    rounds++;
  }
  set_mode(kExit);
  other.join();
  std::printf("floor class     rounds  busy/PAUSE-ing sibling p10   p50    p90\n");
  const auto& names = wh::ring::bench::kPlacementNames;
  for (int k = 0; k < 3; k++)
    std::printf("%-14s %7zu  %26.3f %6.3f %6.3f\n", names[k], slowdown[k].size(),
                quantile(slowdown[k], 0.1), quantile(slowdown[k], 0.5), quantile(slowdown[k], 0.9));
  std::printf("placement rounds=%llu", (unsigned long long)rounds);
  for (int k = 0; k < 3; k++)
    std::printf(" %s=%zu %s_slowdown_p50=%.3f", names[k], slowdown[k].size(), names[k],
                quantile(slowdown[k], 0.5));
  std::printf("\n");
  return 0;
}
