// Device output reaches the application: printf text from kernels on this
// process's stdout (flushed at synchronising calls), device-assert messages
// and fault details on its stderr, and a copy after a fault returns the
// sticky error instead of waiting forever.
// Usage: device_output printf|assert|fault
#include <cassert>
#include <cstring>
#include "check.cuh"

__global__ void say(int tag, float f, const char* s, const void* p) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  printf("say tag=%d t=%d f=%.2f s=%s p=%p c=%c x=%x\n", tag, t, f + t, s, p, 'a' + t, 0xab00 + t);
}

__global__ void fill(int* out, int n) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < n) {
    out[t] = t * 3;
    if (t % 4 == 1) printf("fill t=%d v=%d\n", t, t * 3);
  }
}

__global__ void check_positive(const int* in) { assert(in[threadIdx.x] >= 0); }

__global__ void oob_store(int* p, long off) { p[off] = 7; }

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "printf";
  if (!std::strcmp(mode, "printf")) {
    char* s;
    CHECK(cudaMalloc(&s, 16));
    CHECK(cudaMemcpy(s, "dev", 4, cudaMemcpyHostToDevice));
    std::printf("host before\n");
    // 2 blocks x 3 threads; flushed by cudaDeviceSynchronize.
    say<<<2, 3>>>(1, 0.5f, s, (const void*)0x1234);
    CHECK(cudaDeviceSynchronize());
    std::printf("host between\n");
    // Flushed by a blocking device-to-host copy.
    const int n = 64;
    int* d;
    CHECK(cudaMalloc(&d, n * sizeof(int)));
    fill<<<2, 32>>>(d, n);
    int h[n];
    CHECK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) EXPECT(h[i] == i * 3, "h[%d] = %d", i, h[i]);
    std::printf("host after\n");
    std::printf("PASS device_output printf\n");
    return 0;
  }
  if (!std::strcmp(mode, "assert")) {
    int h[32];
    for (int i = 0; i < 32; i++) h[i] = i == 5 ? -1 : i;
    int* d;
    CHECK(cudaMalloc(&d, sizeof h));
    CHECK(cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice));
    check_positive<<<1, 32>>>(d);
    cudaError_t e = cudaDeviceSynchronize();
    EXPECT(e == cudaErrorAssert, "got %s", cudaGetErrorName(e));
    std::printf("PASS device_output assert\n");
    return 0;
  }
  // fault: the first synchronising call after the fault is a blocking
  // device-to-host copy into pageable memory (the staged path).
  int* d;
  CHECK(cudaMalloc(&d, 64));
  oob_store<<<1, 1>>>(d, 1 << 24);
  int h[16];
  cudaError_t e = cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
  EXPECT(e == cudaErrorIllegalAddress, "got %s", cudaGetErrorName(e));
  e = cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
  EXPECT(e == cudaErrorIllegalAddress, "sticky: got %s", cudaGetErrorName(e));
  std::printf("PASS device_output fault\n");
  return 0;
}
