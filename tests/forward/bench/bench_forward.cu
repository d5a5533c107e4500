// bench_forward: the forwarding path's benchmark (make bench-forward).
// An ordinary nvcc -cudart shared program, run through the drop-in
// libcudart.so.13 against a wormhole-server that run_bench.sh starts on
// another core. It measures, in one run:
//   bare_rtt_p50_ns     a bare cache-line ping-pong between this process
//                       and a forked child on the server's core: the floor
//                       of any request/response over shared memory
//                       (as wh_bench_ring's BM_BareRtt), before any CUDA call;
//   null_call_rtt_p50_ns  cudaMemGetInfo forwarded to the server;
//   launch_post_per_s   empty-kernel <<<1,1>>> launches, posted for at least
//                       --launch-seconds, up to the final cudaDeviceSynchronize
//                       (so the rate is the rate the server executed them at);
//   h2d/d2h_pinned_gb_s 64 MiB copies from/to cudaMallocHost memory;
//   h2d_pageable_gb_s   64 MiB from malloc'ed memory (staged, pipelined);
//   memcpy_gb_s         a plain single-thread memcpy of 64 MiB.
// Latencies are per-iteration rdtsc samples (calibrated against
// steady_clock), both the same way; bandwidths are the median of 5 runs
// after a warm-up, in 1e9 bytes/s. Prints "launches_posted=N" (run_bench.sh
// checks it against the server's statistics) and the summary line last.
#include <cuda_runtime.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <x86intrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

__global__ void empty_kernel() {}

namespace {

using Clock = std::chrono::steady_clock;

int g_client_cpu = 0, g_server_cpu = 1;
double g_ns_per_tick = 0;

#define CHECK(x)                                                                         \
  do {                                                                                   \
    cudaError_t e_ = (x);                                                                \
    if (e_ != cudaSuccess) {                                                             \
      std::fprintf(stderr, "FAIL: %s: %s (line %d)\n", #x, cudaGetErrorString(e_), __LINE__); \
      std::exit(1);                                                                      \
    }                                                                                    \
  } while (0)

void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  sched_setaffinity(0, sizeof set, &set);
}

inline uint64_t ticks() {
  _mm_lfence();
  uint64_t t = __rdtsc();
  _mm_lfence();
  return t;
}

void calibrate() {
  auto t0 = Clock::now();
  uint64_t c0 = __rdtsc();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto t1 = Clock::now();
  uint64_t c1 = __rdtsc();
  g_ns_per_tick = std::chrono::duration<double, std::nano>(t1 - t0).count() / double(c1 - c0);
}

double p50_ns(std::vector<uint64_t>& t) {
  std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
  return double(t[t.size() / 2]) * g_ns_per_tick;
}

// The floor: one cache line each way, client on its core, echo on the server's.
double bare_rtt(int iters) {
  auto* mem = static_cast<volatile uint64_t*>(
      mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  volatile uint64_t* ping = mem;
  volatile uint64_t* pong = mem + 16;  // another cache line
  const uint64_t total = uint64_t(iters) + 1000;
  pid_t child = fork();
  if (child == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    pin(g_server_cpu);
    for (uint64_t want = 1; want <= total; want++) {
      while (__atomic_load_n(ping, __ATOMIC_ACQUIRE) != want) _mm_pause();
      __atomic_store_n(pong, want, __ATOMIC_RELEASE);
    }
    _exit(0);
  }
  std::vector<uint64_t> s;
  s.reserve(iters);
  for (uint64_t i = 1; i <= total; i++) {
    uint64_t t0 = ticks();
    __atomic_store_n(ping, i, __ATOMIC_RELEASE);
    while (__atomic_load_n(pong, __ATOMIC_ACQUIRE) != i) _mm_pause();
    uint64_t t1 = ticks();
    if (i > 1000) s.push_back(t1 - t0);
  }
  waitpid(child, nullptr, 0);
  munmap((void*)mem, 4096);
  return p50_ns(s);
}

double null_call_rtt(int iters) {
  size_t f, t;
  for (int i = 0; i < 2000; i++) CHECK(cudaMemGetInfo(&f, &t));
  std::vector<uint64_t> s;
  s.reserve(iters);
  for (int i = 0; i < iters; i++) {
    uint64_t t0 = ticks();
    cudaError_t e = cudaMemGetInfo(&f, &t);
    uint64_t t1 = ticks();
    if (e != cudaSuccess) CHECK(e);
    s.push_back(t1 - t0);
  }
  return p50_ns(s);
}

template <class F>
double median_gb_s(size_t bytes, F&& fn) {
  fn();  // warm-up: first touches, page faults
  std::vector<double> r;
  for (int i = 0; i < 5; i++) {
    auto t0 = Clock::now();
    fn();
    double s = std::chrono::duration<double>(Clock::now() - t0).count();
    r.push_back(double(bytes) / s / 1e9);
  }
  std::sort(r.begin(), r.end());
  return r[r.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  double launch_seconds = 10;
  int rtt_iters = 200000;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (a == "--launch-seconds" && i + 1 < argc) launch_seconds = std::atof(argv[++i]);
    else if (a == "--rtt-iters" && i + 1 < argc) rtt_iters = std::atoi(argv[++i]);
    else if (a == "--cpus" && i + 1 < argc) std::sscanf(argv[++i], "%d,%d", &g_client_cpu, &g_server_cpu);
  }
  pin(g_client_cpu);
  calibrate();

  // (f) before the first CUDA call: the fork copies no connection.
  const double bare = bare_rtt(rtt_iters);
  std::printf("bare cache-line ping-pong: p50 %.0f ns\n", bare);

  // (a) the null call.
  const double null_call = null_call_rtt(rtt_iters);
  std::printf("cudaMemGetInfo round trip: p50 %.0f ns\n", null_call);

  // (b) empty-kernel launches, sustained.
  empty_kernel<<<1, 1>>>();
  CHECK(cudaDeviceSynchronize());
  uint64_t launches = 0;
  auto t0 = Clock::now();
  const auto until = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(launch_seconds));
  for (;;) {
    for (int i = 0; i < 4096; i++) empty_kernel<<<1, 1>>>();
    launches += 4096;
    if (Clock::now() >= until) break;
  }
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());  // the server has executed every launch
  const double launch_s = std::chrono::duration<double>(Clock::now() - t0).count();
  const double launch_rate = double(launches) / launch_s;
  std::printf("empty-kernel launches: %llu in %.2f s (posting and executing), %.3g /s\n",
              (unsigned long long)launches, launch_s, launch_rate);
  std::printf("launches_posted=%llu\n", (unsigned long long)(launches + 1));

  // Copies of 64 MiB.
  const size_t n = 64ull << 20;
  void* dev = nullptr;
  void* pinned = nullptr;
  CHECK(cudaMalloc(&dev, n));
  CHECK(cudaMallocHost(&pinned, n));
  std::memset(pinned, 1, n);
  auto* pageable = static_cast<uint8_t*>(std::malloc(n));
  auto* other = static_cast<uint8_t*>(std::malloc(n));
  std::memset(pageable, 2, n);
  std::memset(other, 3, n);
  const double h2d_pinned = median_gb_s(n, [&] { CHECK(cudaMemcpy(dev, pinned, n, cudaMemcpyHostToDevice)); });
  const double d2h_pinned = median_gb_s(n, [&] { CHECK(cudaMemcpy(pinned, dev, n, cudaMemcpyDeviceToHost)); });
  const double h2d_pageable = median_gb_s(n, [&] { CHECK(cudaMemcpy(dev, pageable, n, cudaMemcpyHostToDevice)); });
  const double mc = median_gb_s(n, [&] {
    std::memcpy(other, pageable, n);
    asm volatile("" ::"r"(other) : "memory");
  });
  // The copies moved the right bytes (pageable 2s came back through pinned memory).
  CHECK(cudaMemcpy(pinned, dev, n, cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < n; i += 4093)
    if (static_cast<uint8_t*>(pinned)[i] != 2) {
      std::fprintf(stderr, "FAIL: byte %zu came back as %d\n", i, static_cast<uint8_t*>(pinned)[i]);
      return 1;
    }
  std::printf("64 MiB copies: H2D pinned %.2f GB/s, D2H pinned %.2f GB/s, H2D pageable %.2f GB/s; memcpy %.2f GB/s\n",
              h2d_pinned, d2h_pinned, h2d_pageable, mc);
  CHECK(cudaFree(dev));
  CHECK(cudaFreeHost(pinned));
  std::printf("null_call_rtt_p50_ns=%.0f bare_rtt_p50_ns=%.0f launch_post_per_s=%.0f h2d_pinned_gb_s=%.2f "
              "d2h_pinned_gb_s=%.2f h2d_pageable_gb_s=%.2f memcpy_gb_s=%.2f\n",
              null_call, bare, launch_rate, h2d_pinned, d2h_pinned, h2d_pageable, mc);
  return 0;
}
