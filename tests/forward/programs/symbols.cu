// __constant__ and __device__ variables: initializers, cudaMemcpyToSymbol,
// cudaMemcpyFromSymbol, cudaGetSymbolAddress, used by a kernel.
#include "check.cuh"

__constant__ float coeff[4] = {1.f, 2.f, 3.f, 4.f};
__device__ int counter = 100;
__device__ float table[64];

__global__ void use(float* out) {
  int i = threadIdx.x;
  out[i] = coeff[i % 4] * table[i] + float(counter);
}
__global__ void bump() { atomicAdd(&counter, 1); }

int main() {
  float init[4];
  CHECK(cudaMemcpyFromSymbol(init, coeff, sizeof init));
  for (int i = 0; i < 4; i++) EXPECT(init[i] == float(i + 1), "initializer %d = %f", i, init[i]);
  float t[64];
  for (int i = 0; i < 64; i++) t[i] = float(i);
  CHECK(cudaMemcpyToSymbol(table, t, sizeof t));
  float c2[2] = {10.f, 20.f};
  CHECK(cudaMemcpyToSymbol(coeff, c2, sizeof c2, 2 * sizeof(float)));  // with an offset
  float* out;
  CHECK(cudaMalloc(&out, 64 * 4));
  use<<<1, 64>>>(out);
  bump<<<1, 1>>>();
  float h[64];
  CHECK(cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost));
  const float cf[4] = {1.f, 2.f, 10.f, 20.f};
  for (int i = 0; i < 64; i++) EXPECT(h[i] == cf[i % 4] * i + 100.f, "i=%d got %f", i, h[i]);
  int cnt = 0;
  CHECK(cudaMemcpyFromSymbol(&cnt, counter, sizeof cnt));
  EXPECT(cnt == 101, "counter %d", cnt);
  void* addr = nullptr;
  CHECK(cudaGetSymbolAddress(&addr, table));
  float t5;
  CHECK(cudaMemcpy(&t5, (float*)addr + 5, 4, cudaMemcpyDeviceToHost));
  EXPECT(t5 == 5.f, "via symbol address %f", t5);
  size_t sz = 0;
  CHECK(cudaGetSymbolSize(&sz, table));
  EXPECT(sz == sizeof t, "symbol size %zu", sz);
  EXPECT(cudaMemcpyToSymbol(coeff, t, sizeof t) == cudaErrorInvalidValue, "overrunning a symbol must fail");
  cudaGetLastError();
  std::printf("PASS symbols\n");
  return 0;
}
