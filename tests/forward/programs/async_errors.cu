// Errors: configuration errors at launch, async faults at the next
// synchronisation (sticky), device-side assert as cudaErrorAssert; a kernel
// that reads a little past its array (inside the allocation's 256-byte
// granule, which a GPU maps) does not fault.
// Usage: async_errors oob|assert|config|granule
#include <cassert>
#include <cstring>
#include "check.cuh"

__global__ void oob(int* p, long off) { p[off] = 1; }
__global__ void boom(int v) { assert(v == 42); }
__global__ void nop() {}
__global__ void __launch_bounds__(128) bounded(int* p) {
  if (p) p[threadIdx.x] = 1;
}
__global__ void sum_words(const int* p, int from, int to, int* out) {
  int s = 0;
  for (int i = from; i < to; i++) s += p[i];
  *out = s;
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "config";
  if (!std::strcmp(mode, "config")) {
    nop<<<1, 2048>>>();  // too many threads per block
    EXPECT(cudaGetLastError() == cudaErrorInvalidConfiguration, "expected invalid configuration");
    EXPECT(cudaGetLastError() == cudaSuccess, "last error must reset");
    nop<<<1, 32>>>();
    CHECK(cudaDeviceSynchronize());
    // More threads than the kernel's launch bounds (.maxntid 128).
    bounded<<<1, 256>>>(nullptr);
    EXPECT(cudaGetLastError() == cudaErrorInvalidConfiguration, "launch bounds: expected invalid configuration");
    bounded<<<1, 128>>>(nullptr);
    CHECK(cudaDeviceSynchronize());
    std::printf("PASS async_errors config\n");
    return 0;
  }
  if (!std::strcmp(mode, "granule")) {
    int *a, *out;
    CHECK(cudaMalloc(&a, 40));  // 10 ints; the granule holds 64
    CHECK(cudaMalloc(&out, sizeof(int)));
    int ones[10];
    for (int& v : ones) v = 1;
    CHECK(cudaMemcpy(a, ones, sizeof ones, cudaMemcpyHostToDevice));
    sum_words<<<1, 1>>>(a, 0, 64, out);  // into the granule's slack: whatever it holds
    CHECK(cudaDeviceSynchronize());
    sum_words<<<1, 1>>>(a, 0, 10, out);
    int s = 0;
    CHECK(cudaMemcpy(&s, out, sizeof s, cudaMemcpyDeviceToHost));
    EXPECT(s == 10, "sum of the array: %d", s);
    std::printf("PASS async_errors granule\n");
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
