// Errors: configuration errors at launch, async faults at the next
// synchronisation (sticky), device-side assert as cudaErrorAssert.
// Usage: async_errors oob|assert|config
#include <cassert>
#include <cstring>
#include "check.cuh"

__global__ void oob(int* p, long off) { p[off] = 1; }
__global__ void boom(int v) { assert(v == 42); }
__global__ void nop() {}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "config";
  if (!std::strcmp(mode, "config")) {
    nop<<<1, 2048>>>();  // too many threads per block
    EXPECT(cudaGetLastError() == cudaErrorInvalidConfiguration, "expected invalid configuration");
    EXPECT(cudaGetLastError() == cudaSuccess, "last error must reset");
    nop<<<1, 32>>>();
    CHECK(cudaDeviceSynchronize());
    std::printf("PASS async_errors config\n");
    return 0;
  }
  int* d;
  CHECK(cudaMalloc(&d, 64));
  if (!std::strcmp(mode, "oob")) {
    oob<<<1, 1>>>(d, 1 << 24);  // far outside the 64-byte allocation
    EXPECT(cudaGetLastError() == cudaSuccess, "the launch itself is posted and succeeds");
    cudaError_t e = cudaDeviceSynchronize();
    EXPECT(e == cudaErrorIllegalAddress, "got %s", cudaGetErrorName(e));
    EXPECT(cudaMemcpy(d, d, 4, cudaMemcpyDeviceToDevice) == cudaErrorIllegalAddress, "fault must be sticky");
    std::printf("PASS async_errors oob\n");
    return 0;
  }
  boom<<<1, 1>>>(7);
  cudaError_t e = cudaDeviceSynchronize();
  EXPECT(e == cudaErrorAssert, "got %s", cudaGetErrorName(e));
  std::printf("PASS async_errors assert\n");
  return 0;
}
