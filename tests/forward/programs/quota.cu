// A client over its device-memory quota gets cudaErrorMemoryAllocation,
// and can go on with what it has. Usage: quota <quota_mb>
#include <cstdlib>
#include "check.cuh"
int main(int argc, char** argv) {
  size_t quota = size_t(std::atoi(argv[1])) << 20;
  void *a, *b;
  CHECK(cudaMalloc(&a, quota / 2));
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
