// bench_remote: the ucx:// numbers of `make bench-remote` (docs/remote.md),
// an ordinary forwarded program run with WORMHOLE_SERVER=ucx://...:
//   null_call p50/p99   cudaMemGetInfo round trips (after a warm-up);
//   h2d/d2h GB/s        64 MiB copies from/to pageable memory, median of 5;
//   h2d/d2h_pinned      the same from/to cudaMallocHost memory;
//   launches/s          empty <<<1,1>>> launches posted for --seconds, up to
//                       the final cudaDeviceSynchronize.
// Prints one line of key=value pairs.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "check.cuh"

__global__ void empty_kernel() {}

using Clock = std::chrono::steady_clock;

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int main(int argc, char** argv) {
  int calls = argc > 1 ? std::atoi(argv[1]) : 20000;
  double seconds = argc > 2 ? std::atof(argv[2]) : 2.0;
  size_t fr, tot;
  for (int i = 0; i < 500; i++) CHECK(cudaMemGetInfo(&fr, &tot));
  std::vector<double> ns(calls);
  for (int i = 0; i < calls; i++) {
    auto t0 = Clock::now();
    CHECK(cudaMemGetInfo(&fr, &tot));
    ns[i] = std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
  }
  std::sort(ns.begin(), ns.end());
  double p50 = ns[ns.size() / 2] / 1e3, p99 = ns[ns.size() * 99 / 100] / 1e3;

  const size_t n = 64 << 20;
  std::vector<uint8_t> h(n, 1), back(n);
  void* d;
  CHECK(cudaMalloc(&d, n));
  CHECK(cudaMemcpy(d, h.data(), n, cudaMemcpyHostToDevice));  // warm-up
  std::vector<double> up, down;
  for (int r = 0; r < 5; r++) {
    auto t0 = Clock::now();
    CHECK(cudaMemcpy(d, h.data(), n, cudaMemcpyHostToDevice));
    auto t1 = Clock::now();
    CHECK(cudaMemcpy(back.data(), d, n, cudaMemcpyDeviceToHost));
    auto t2 = Clock::now();
    up.push_back(n / std::chrono::duration<double>(t1 - t0).count() / 1e9);
    down.push_back(n / std::chrono::duration<double>(t2 - t1).count() / 1e9);
  }
  EXPECT(std::memcmp(h.data(), back.data(), n) == 0, "64 MiB round trip differs");
  uint8_t *ph, *pback;
  CHECK(cudaMallocHost(&ph, n));
  CHECK(cudaMallocHost(&pback, n));
  for (size_t i = 0; i < n; i++) ph[i] = uint8_t(i * 7 + 3);
  std::vector<double> pup, pdown;
  for (int r = 0; r < 5; r++) {
    auto t0 = Clock::now();
    CHECK(cudaMemcpy(d, ph, n, cudaMemcpyHostToDevice));
    auto t1 = Clock::now();
    CHECK(cudaMemcpy(pback, d, n, cudaMemcpyDeviceToHost));
    auto t2 = Clock::now();
    pup.push_back(n / std::chrono::duration<double>(t1 - t0).count() / 1e9);
    pdown.push_back(n / std::chrono::duration<double>(t2 - t1).count() / 1e9);
  }
  EXPECT(std::memcmp(ph, pback, n) == 0, "64 MiB pinned round trip differs");
  CHECK(cudaFreeHost(ph));
  CHECK(cudaFreeHost(pback));

  empty_kernel<<<1, 1>>>();
  CHECK(cudaDeviceSynchronize());
  long launches = 0;
  auto t0 = Clock::now();
  auto end = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  while (Clock::now() < end) {
    for (int i = 0; i < 1000; i++) empty_kernel<<<1, 1>>>();
    launches += 1000;
  }
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  double lps = launches / std::chrono::duration<double>(Clock::now() - t0).count();
  CHECK(cudaFree(d));
  std::printf("null_call_p50_us=%.1f null_call_p99_us=%.1f h2d_gb_s=%.3f d2h_gb_s=%.3f h2d_pinned_gb_s=%.3f "
              "d2h_pinned_gb_s=%.3f launches_per_s=%.0f\n",
              p50, p99, median(up), median(down), median(pup), median(pdown), lps);
  return 0;
}
