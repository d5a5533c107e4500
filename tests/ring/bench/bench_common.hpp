// Shared by the ring's bench programs (wh_bench_ring, wh_ring_placement):
// pinning, the TSC's rate, and the vCPU placement a bare floor indicates.
#pragma once

#include <sched.h>
#include <x86intrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>

namespace wh::ring::bench {

// Pins the calling thread (a process's only one, or one of several).
inline void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu % std::max(1u, std::thread::hardware_concurrency()), &set);
  sched_setaffinity(0, sizeof set, &set);
}

// Nanoseconds per TSC tick, against steady_clock over 100 ms.
inline double ns_per_tsc_tick() {
  auto t0 = std::chrono::steady_clock::now();
  uint64_t c0 = __rdtsc();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto t1 = std::chrono::steady_clock::now();
  uint64_t c1 = __rdtsc();
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / double(c1 - c0);
}

// Where the host has put the two vCPUs, by the bare ping-pong floor:
// near (SMT siblings of one core on the development VM) up to 80 ns,
// usual up to 250, far above, as ab/soak_summary.py classes them. The
// limits are 85 and 255 because this clock moves in ~10 ns steps: a
// floor read as 80.4 ns is an 80 ns one.
enum Placement { kNear = 0, kUsual = 1, kFar = 2 };
inline constexpr const char* kPlacementNames[] = {"near", "usual", "far"};
inline Placement placement_of(double floor_ns) {
  return floor_ns < 85 ? kNear : floor_ns < 255 ? kUsual : kFar;
}

}  // namespace wh::ring::bench
