// The client of the migration figures (tests/server/bench_migrate.sh): holds
// MIB MiB of device memory filled with incompressible values, trains a
// stand-in step (a kernel over a 16 MiB working set) until the file GO
// exists (the script moves the session meanwhile), then 20 more steps;
// prints the mean step time before and after and checks that the held
// memory came through unchanged.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <vector>

#include "check.cuh"

__host__ __device__ inline uint32_t mix(uint64_t i) {
  uint64_t z = i * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  return uint32_t(z ^ (z >> 31));
}
__global__ void fill(uint32_t* x, uint64_t n) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x)
    x[i] = mix(i);
}
__global__ void step(float* w, int n, float a) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) w[i] = w[i] * a + 0.25f;
}

int main(int argc, char** argv) {
  EXPECT(argc == 3, "usage: migrate_bench MIB GO_FILE");
  const uint64_t n = (uint64_t(std::atoi(argv[1])) << 20) / 4;
  uint32_t* held;
  CHECK(cudaMalloc(&held, n * 4));
  fill<<<1024, 256>>>(held, n);
  const int wn = 4 << 20;
  float* w;
  CHECK(cudaMalloc(&w, wn * 4));
  CHECK(cudaMemset(w, 0, wn * 4));
  CHECK(cudaDeviceSynchronize());
  auto run_step = [&] {
    auto t0 = std::chrono::steady_clock::now();
    step<<<(wn + 255) / 256, 256>>>(w, wn, 0.999f);
    CHECK(cudaDeviceSynchronize());
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  for (int i = 0; i < 3; i++) run_step();  // compiled, warm
  std::printf("READY\n");
  std::fflush(stdout);
  // Medians: the step that spans the move is an outlier, not the rate.
  std::vector<double> before, after;
  while (access(argv[2], F_OK) != 0) before.push_back(run_step());
  for (int i = 0; i < 21; i++) after.push_back(run_step());
  auto median = [](std::vector<double> v) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::vector<uint32_t> back(n);
  CHECK(cudaMemcpy(back.data(), held, n * 4, cudaMemcpyDeviceToHost));
  for (uint64_t i = 0; i < n; i++) EXPECT(back[i] == mix(i), "held word %llu changed", (unsigned long long)i);
  std::printf("step_ms before %.3f (%zu steps) after %.3f\n", median(before), before.size(), median(after));
  return 0;
}
