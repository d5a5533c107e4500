// A client over its device-memory quota gets cudaErrorMemoryAllocation,
// and can go on with what it has. Usage: quota <quota_mb>
#include <cstdlib>
#include "check.cuh"
int main(int argc, char** argv) {
  size_t quota = size_t(std::atoi(argv[1])) << 20;
  void *a, *b;
  // Under a quota the device looks as big as the quota.
  size_t free0 = 0, total = 0;
  CHECK(cudaMemGetInfo(&free0, &total));
  EXPECT(total == quota, "total %zu, want the quota %zu", total, quota);
  EXPECT(free0 <= quota, "free %zu over the quota %zu", free0, quota);
  CHECK(cudaMalloc(&a, quota / 2));
  size_t free1 = 0;
  CHECK(cudaMemGetInfo(&free1, &total));
  EXPECT(free1 + quota / 2 <= free0 + (1 << 20), "free %zu after taking %zu of %zu", free1, quota / 2, free0);
  cudaError_t e = cudaMalloc(&b, quota);
  EXPECT(e == cudaErrorMemoryAllocation, "over quota returned %s", cudaGetErrorName(e));
  EXPECT(cudaGetLastError() == cudaErrorMemoryAllocation, "last error");
  CHECK(cudaMalloc(&b, quota / 4));
  CHECK(cudaMemset(b, 1, quota / 4));
  CHECK(cudaFree(a));
  CHECK(cudaFree(b));
  std::printf("PASS quota\n");
  return 0;
}
