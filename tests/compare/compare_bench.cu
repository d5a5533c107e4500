// compare_bench: the one program `make bench-compare` runs through Wormhole
// and through another forwarder (GVirtuS), built as a user builds it
// (nvcc -cudart shared). Only runtime calls that both forwarders implement,
// and no kernels, so that a forwarder without CUDA 13's launch ABI loads it.
// One run = one round; prints key=value lines:
//   null_p50_ns null_p99_ns   cudaStreamQuery on an idle stream (a forwarded
//                             round trip that does no device work)
//   malloc_free_p50_ns        cudaMalloc(4 KiB) + cudaFree
//   h2d_pageable_gbs d2h_pageable_gbs h2d_pinned_gbs d2h_pinned_gbs
//                             --copy-mib (64) MiB cudaMemcpy, median of --copies rounds
//   byte_check=ok|FAIL        every copy's bytes compared with the source
//   async_per_s               cudaMemsetAsync(4 bytes) calls per second up to
//                             the cudaStreamSynchronize that ends the batch
//                             (the device value is checked afterwards)
// Usage: compare_bench [--iters N] [--copies N] [--async N] [--cpu C] [--copy-mib M]
#include <cuda_runtime.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CHECK(x)                                                                              \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "FAIL: %s: %s (line %d)\n", #x, cudaGetErrorString(e_), __LINE__); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

using Clock = std::chrono::steady_clock;

static double ns_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
}

static double pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * (v.size() - 1) + 0.5);
  return v[i];
}

static double median(std::vector<double> v) { return pct(std::move(v), 0.5); }

int main(int argc, char** argv) {
  int iters = 20000, copies = 5, async_n = 20000, cpu = -1, mib = 64;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--iters")) iters = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--copies")) copies = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--async")) async_n = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--cpu")) cpu = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--copy-mib")) mib = std::atoi(argv[i + 1]);
    else { std::fprintf(stderr, "usage: compare_bench [--iters N] [--copies N] [--async N] [--cpu C] [--copy-mib M]\n"); return 2; }
  }
  if (iters < 100 || copies < 1 || async_n < 1 || mib < 1 || mib > 4096) { std::fprintf(stderr, "FAIL: bad arguments\n"); return 2; }
  if (cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    sched_setaffinity(0, sizeof set, &set);
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each figure out before a crash
  int n = 0;
  CHECK(cudaGetDeviceCount(&n));
  if (n < 1) { std::fprintf(stderr, "FAIL: no device\n"); return 1; }
  CHECK(cudaSetDevice(0));
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));

  // Null call: a tenth of the iterations as warm-up, not counted.
  std::vector<double> lat;
  lat.reserve(iters);
  for (int i = 0; i < iters + iters / 10; i++) {
    auto t0 = Clock::now();
    CHECK(cudaStreamQuery(s));
    if (i >= iters / 10) lat.push_back(ns_since(t0));
  }
  std::printf("null_p50_ns=%.0f\nnull_p99_ns=%.0f\n", pct(lat, 0.5), pct(lat, 0.99));

  // cudaMalloc + cudaFree pairs (a quarter of the null-call iterations).
  lat.clear();
  int pairs = std::max(100, iters / 4);
  for (int i = 0; i < pairs + pairs / 10; i++) {
    void* p = nullptr;
    auto t0 = Clock::now();
    CHECK(cudaMalloc(&p, 4096));
    CHECK(cudaFree(p));
    if (i >= pairs / 10) lat.push_back(ns_since(t0));
  }
  std::printf("malloc_free_p50_ns=%.0f\n", pct(lat, 0.5));

  // 64 MiB copies from/to pageable and pinned memory, byte-for-byte checked.
  const size_t bytes = size_t(mib) << 20;
  std::printf("copy_mib=%d\n", mib);
  auto* src = static_cast<uint8_t*>(std::malloc(bytes));
  auto* dst = static_cast<uint8_t*>(std::malloc(bytes));
  uint8_t *psrc = nullptr, *pdst = nullptr;
  CHECK(cudaMallocHost(reinterpret_cast<void**>(&psrc), bytes));
  CHECK(cudaMallocHost(reinterpret_cast<void**>(&pdst), bytes));
  void* dev = nullptr;
  CHECK(cudaMalloc(&dev, bytes));
  bool ok = src && dst;
  std::vector<double> h2d, d2h, h2dp, d2hp;
  for (int r = 0; r <= copies && ok; r++) {  // round 0: warm-up
    uint64_t seed = 0x9e3779b97f4a7c15ull * (r + 1);
    for (size_t i = 0; i < bytes; i += 8) {
      seed ^= seed << 13; seed ^= seed >> 7; seed ^= seed << 17;
      std::memcpy(src + i, &seed, 8);
    }
    std::memcpy(psrc, src, bytes);
    std::memset(psrc, r, 4096);  // pinned source differs from pageable in its first page
    std::memset(dst, 0xA5, bytes);
    std::memset(pdst, 0x5A, bytes);
    auto t0 = Clock::now();
    CHECK(cudaMemcpy(dev, src, bytes, cudaMemcpyHostToDevice));
    double a = ns_since(t0);
    t0 = Clock::now();
    CHECK(cudaMemcpy(dst, dev, bytes, cudaMemcpyDeviceToHost));
    double b = ns_since(t0);
    ok = ok && std::memcmp(src, dst, bytes) == 0;
    t0 = Clock::now();
    CHECK(cudaMemcpy(dev, psrc, bytes, cudaMemcpyHostToDevice));
    double c = ns_since(t0);
    t0 = Clock::now();
    CHECK(cudaMemcpy(pdst, dev, bytes, cudaMemcpyDeviceToHost));
    double d = ns_since(t0);
    ok = ok && std::memcmp(psrc, pdst, bytes) == 0;
    if (r > 0) {
      h2d.push_back(bytes / a); d2h.push_back(bytes / b);
      h2dp.push_back(bytes / c); d2hp.push_back(bytes / d);
    }
  }
  if (ok)
    std::printf("h2d_pageable_gbs=%.3f\nd2h_pageable_gbs=%.3f\nh2d_pinned_gbs=%.3f\nd2h_pinned_gbs=%.3f\n",
                median(h2d), median(d2h), median(h2dp), median(d2hp));
  std::printf("byte_check=%s\n", ok ? "ok" : "FAIL");

  // Small async calls: 4-byte memsets posted on a stream, one sync at the end.
  uint32_t* cell = static_cast<uint32_t*>(dev);
  CHECK(cudaMemset(cell, 0, 4));
  CHECK(cudaStreamSynchronize(s));
  auto t0 = Clock::now();
  for (int i = 0; i < async_n; i++) CHECK(cudaMemsetAsync(cell, (i + 1) & 0xff, 4, s));
  CHECK(cudaStreamSynchronize(s));
  double ns = ns_since(t0);
  uint32_t v = 0;
  CHECK(cudaMemcpy(&v, cell, 4, cudaMemcpyDeviceToHost));
  uint32_t b = static_cast<uint32_t>(async_n & 0xff);
  bool aok = v == (b | b << 8 | b << 16 | b << 24);
  std::printf("async_per_s=%.0f\nasync_check=%s\n", async_n / ns * 1e9, aok ? "ok" : "FAIL");

  CHECK(cudaFree(dev));
  CHECK(cudaFreeHost(psrc));
  CHECK(cudaFreeHost(pdst));
  CHECK(cudaStreamDestroy(s));
  std::free(src);
  std::free(dst);
  return ok && aok ? 0 : 1;
}
