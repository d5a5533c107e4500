// bench_forward: the forwarding path's benchmark (make bench-forward).
// An ordinary nvcc -cudart shared program, run through the drop-in
// libcudart.so.13 against a wormhole-server that run_bench.sh starts on
// another core. It measures, in one run:
//   bare_rtt_p50_ns     a bare cache-line ping-pong between this process
//                       and a forked child on the server's core: the floor
//                       of any request/response over shared memory
//                       (as wh_bench_ring's BM_BareRtt);
//   null_call_rtt_p50_ns  cudaMemGetInfo forwarded to the server, measured in
//                       blocks interleaved with the bare blocks (the first
//                       tenth of every block is warm-up and not counted);
//   malloc_free_p50_ns  one cudaMalloc(4 KiB) + cudaFree pair, two round
//                       trips and the sim device's allocator;
//   launch_post_per_s   empty-kernel <<<1,1>>> launches, posted for at least
//                       --launch-seconds, up to the final cudaDeviceSynchronize
//                       (so the rate is the rate the server executed them at);
//   h2d/d2h_pinned_gb_s 64 MiB copies from/to cudaMallocHost memory;
//   h2d_pageable_gb_s   64 MiB from malloc'ed memory (staged, pipelined);
//   memcpy_gb_s         a plain single-thread memcpy of 64 MiB.
// Latencies are per-iteration rdtsc samples (calibrated against
// steady_clock), both the same way; bandwidths are the median of 5 rounds
// (each round runs all four copies back to back) after a warm-up, in 1e9
// bytes/s. Prints "launches_posted=N" (run_bench.sh
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

// The floor: one cache line each way, this process on the client's core and
// a forked echo child on the server's core. The child sleeps on a pipe
// between blocks, so it never competes with the server for its core.
struct Bare {
  volatile uint64_t* ping = nullptr;
  volatile uint64_t* pong = nullptr;
  uint64_t seq = 0;
  int cmd[2] = {-1, -1};
  pid_t child = -1;

  void start() {
    auto* mem = static_cast<volatile uint64_t*>(
        mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    ping = mem;
    pong = mem + 16;  // another cache line
    if (pipe(cmd) != 0) std::exit(1);
    child = fork();
    if (child == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      pin(g_server_cpu);
      uint64_t want = 0, n;
      while (read(cmd[0], &n, sizeof n) == ssize_t(sizeof n) && n) {
        for (uint64_t k = 0; k < n; k++) {
          ++want;
          while (__atomic_load_n(ping, __ATOMIC_ACQUIRE) != want) _mm_pause();
          __atomic_store_n(pong, want, __ATOMIC_RELEASE);
        }
      }
      _exit(0);
    }
  }
  void block(uint64_t n, uint64_t skip, std::vector<uint64_t>& out) {
    if (write(cmd[1], &n, sizeof n) != ssize_t(sizeof n)) std::exit(1);
    for (uint64_t k = 0; k < n; k++) {
      const uint64_t i = ++seq;
      uint64_t t0 = ticks();
      __atomic_store_n(ping, i, __ATOMIC_RELEASE);
      while (__atomic_load_n(pong, __ATOMIC_ACQUIRE) != i) _mm_pause();
      uint64_t t1 = ticks();
      if (k >= skip) out.push_back(t1 - t0);
    }
  }
  void stop() {
    uint64_t zero = 0;
    if (write(cmd[1], &zero, sizeof zero) != ssize_t(sizeof zero)) std::exit(1);
    waitpid(child, nullptr, 0);
  }
};

void null_block(uint64_t n, uint64_t skip, std::vector<uint64_t>& out) {
  size_t f, t;
  for (uint64_t k = 0; k < n; k++) {
    uint64_t t0 = ticks();
    cudaError_t e = cudaMemGetInfo(&f, &t);
    uint64_t t1 = ticks();
    if (e != cudaSuccess) CHECK(e);
    if (k >= skip) out.push_back(t1 - t0);
  }
}

void malloc_free_block(uint64_t n, uint64_t skip, std::vector<uint64_t>& out) {
  for (uint64_t k = 0; k < n; k++) {
    void* p = nullptr;
    uint64_t t0 = ticks();
    cudaError_t e1 = cudaMalloc(&p, 4096);
    cudaError_t e2 = cudaFree(p);
    uint64_t t1 = ticks();
    CHECK(e1);
    CHECK(e2);
    if (k >= skip) out.push_back(t1 - t0);
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  double launch_seconds = 10;
  int rtt_iters = 200000;  // per figure, over all blocks
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (a == "--launch-seconds" && i + 1 < argc) launch_seconds = std::atof(argv[++i]);
    else if (a == "--rtt-iters" && i + 1 < argc) rtt_iters = std::atoi(argv[++i]);
    else if (a == "--cpus" && i + 1 < argc) std::sscanf(argv[++i], "%d,%d", &g_client_cpu, &g_server_cpu);
  }
  pin(g_client_cpu);
  calibrate();

  // (f) and (a), interleaved in blocks so that both see the same machine
  // (on a shared, virtualised host the floor moves by 3x between minutes).
  // The echo child is forked before the first CUDA call: it copies no
  // connection.
  Bare bare_pp;
  bare_pp.start();
  std::vector<uint64_t> bare_s, null_s;
  const int rounds = 10;
  const uint64_t per = std::max(1000, rtt_iters / rounds), skip = per / 10;
  size_t f0, t0_;
  CHECK(cudaMemGetInfo(&f0, &t0_));  // connect
  for (int r = 0; r < rounds; r++) {
    bare_pp.block(per, skip, bare_s);
    null_block(per, skip, null_s);
  }
  bare_pp.stop();
  const double bare = p50_ns(bare_s);
  const double null_call = p50_ns(null_s);
  std::printf("bare cache-line ping-pong: p50 %.0f ns; cudaMemGetInfo round trip: p50 %.0f ns (%d interleaved blocks of %llu)\n",
              bare, null_call, rounds, (unsigned long long)per);

  std::vector<uint64_t> mf_s;
  malloc_free_block(std::max<uint64_t>(1000, rtt_iters / 10), rtt_iters / 100, mf_s);
  const double malloc_free = p50_ns(mf_s);
  std::printf("cudaMalloc(4 KiB) + cudaFree: p50 %.0f ns\n", malloc_free);

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
  // Warm-up (first touches), then rounds of all four, each round's copies
  // back to back so the ratios compare like with like; medians of 5.
  auto timed = [&](auto&& fn) {
    auto t0 = Clock::now();
    fn();
    return double(n) / std::chrono::duration<double>(Clock::now() - t0).count() / 1e9;
  };
  auto h2d_p = [&] { CHECK(cudaMemcpy(dev, pinned, n, cudaMemcpyHostToDevice)); };
  auto d2h_p = [&] { CHECK(cudaMemcpy(pinned, dev, n, cudaMemcpyDeviceToHost)); };
  auto h2d_g = [&] { CHECK(cudaMemcpy(dev, pageable, n, cudaMemcpyHostToDevice)); };
  auto plain = [&] {
    std::memcpy(other, pageable, n);
    asm volatile("" ::"r"(other) : "memory");
  };
  h2d_p(), d2h_p(), h2d_g(), plain();
  std::vector<double> v1, v2, v3, v4;
  for (int r = 0; r < 5; r++) {
    v1.push_back(timed(h2d_p));
    v2.push_back(timed(d2h_p));
    v3.push_back(timed(h2d_g));
    v4.push_back(timed(plain));
  }
  const double h2d_pinned = median(v1), d2h_pinned = median(v2), h2d_pageable = median(v3), mc = median(v4);
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
  std::printf("null_call_rtt_p50_ns=%.0f bare_rtt_p50_ns=%.0f malloc_free_p50_ns=%.0f launch_post_per_s=%.0f "
              "h2d_pinned_gb_s=%.2f d2h_pinned_gb_s=%.2f h2d_pageable_gb_s=%.2f memcpy_gb_s=%.2f\n",
              null_call, bare, malloc_free, launch_rate, h2d_pinned, d2h_pinned, h2d_pageable, mc);
  return 0;
}
