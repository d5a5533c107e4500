// The other translation unit of rdc_a.cu (built with -rdc=true).
#include "check.cuh"

__device__ int rdc_scale = 7;
extern __device__ int rdc_counter;  // rdc_a.cu
static __device__ __noinline__ int helper(int x) { return x * x - 2; }  // not rdc_a.cu's helper

__device__ int rdc_combine(int x, int y) { return helper(x) + y; }

__global__ void kernel_b(int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  out[i] = helper(i) + rdc_scale;
  atomicAdd(&rdc_counter, 1);
}

void launch_b(int* out, int n) {
  kernel_b<<<(n + 127) / 128, 128>>>(out, n);
  CHECK(cudaGetLastError());
}
