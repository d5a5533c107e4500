// Kernel parameters up to CUDA 13's limit (32764 bytes): a struct passed by
// value that fills the parameter space, mixed with scalars and a pointer,
// must reach the kernel byte for byte, laid out as the cubin's .nv.info says.
#include <cstring>

#include "check.cuh"

struct Big {
  int values[8000];  // 32000 bytes
  double scale;
};

struct Odd {
  char c;
  short s;
  double d;
  char tail[13];
};

__global__ void sum_big(Big b, char tag, Odd o, long long* out) {
  long long s = 0;
  for (int i = threadIdx.x; i < 8000; i += blockDim.x) s += b.values[i];
  atomicAdd((unsigned long long*)out, (unsigned long long)s);
  if (threadIdx.x == 0) {
    out[1] = (long long)(b.scale * 1000);
    out[2] = tag;
    out[3] = o.c + o.s + (long long)o.d + o.tail[12];
  }
}

int main() {
  static_assert(sizeof(Big) + 8 + sizeof(Odd) + 8 <= 32764, "parameters within CUDA's limit");
  static Big b;
  long long expect = 0;
  for (int i = 0; i < 8000; i++) b.values[i] = i * 3 - 4000, expect += b.values[i];
  b.scale = 2.5;
  Odd o;
  std::memset(&o, 0, sizeof o);
  o.c = 3;
  o.s = 300;
  o.d = 70000.0;
  o.tail[12] = 9;
  long long* d = nullptr;
  CHECK(cudaMalloc(&d, 4 * sizeof(long long)));
  CHECK(cudaMemset(d, 0, 4 * sizeof(long long)));
  sum_big<<<1, 256>>>(b, 'Q', o, d);
  CHECK(cudaGetLastError());
  long long h[4];
  CHECK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
  EXPECT(h[0] == expect, "sum %lld, expected %lld", h[0], expect);
  EXPECT(h[1] == 2500, "scale %lld", h[1]);
  EXPECT(h[2] == 'Q', "tag %lld", h[2]);
  EXPECT(h[3] == 3 + 300 + 70000 + 9, "odd struct %lld", h[3]);
  cudaFuncAttributes fa;
  CHECK(cudaFuncGetAttributes(&fa, sum_big));
  CHECK(cudaFree(d));
  std::printf("PASS big_params\n");
  return 0;
}
