// Relocatable device code (-rdc=true), two translation units: a kernel here
// calls a __device__ function and reads an extern __device__ variable that
// rdc_b.cu defines; both files have a static helper of the same name.
#include <vector>
#include "check.cuh"

extern __device__ int rdc_scale;              // rdc_b.cu
__device__ int rdc_combine(int x, int y);     // rdc_b.cu
__device__ int rdc_counter = 0;               // rdc_b.cu adds to it
static __device__ __noinline__ int helper(int x) { return 3 * x + 1; }  // rdc_b.cu has its own
void launch_b(int* out, int n);               // rdc_b.cu: its kernel, from its host side

__global__ void kernel_a(const int* in, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  out[i] = rdc_combine(helper(in[i]), rdc_scale);
  atomicAdd(&rdc_counter, 1);
}

// Host references of the device functions.
static int helper_a(int x) { return 3 * x + 1; }
static int helper_b(int x) { return x * x - 2; }
static int combine(int x, int y) { return helper_b(x) + y; }

int main() {
  const int n = 300;
  std::vector<int> in(n);
  for (int i = 0; i < n; ++i) in[i] = i % 17 - 8;
  int *d_in, *d_out, *d_out_b;
  CHECK(cudaMalloc(&d_in, n * sizeof(int)));
  CHECK(cudaMalloc(&d_out, n * sizeof(int)));
  CHECK(cudaMalloc(&d_out_b, n * sizeof(int)));
  CHECK(cudaMemcpy(d_in, in.data(), n * sizeof(int), cudaMemcpyHostToDevice));
  int scale = 0;
  CHECK(cudaMemcpyFromSymbol(&scale, rdc_counter, sizeof scale));
  EXPECT(scale == 0, "rdc_counter starts at %d", scale);
  kernel_a<<<(n + 127) / 128, 128>>>(d_in, d_out, n);
  CHECK(cudaGetLastError());
  launch_b(d_out_b, n);
  CHECK(cudaDeviceSynchronize());
  std::vector<int> out(n), out_b(n);
  CHECK(cudaMemcpy(out.data(), d_out, n * sizeof(int), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(out_b.data(), d_out_b, n * sizeof(int), cudaMemcpyDeviceToHost));
  int counter = 0;
  CHECK(cudaMemcpyFromSymbol(&counter, rdc_counter, sizeof counter));
  const int s = 7;  // rdc_scale's initialiser in rdc_b.cu
  for (int i = 0; i < n; ++i) {
    EXPECT(out[i] == combine(helper_a(in[i]), s), "kernel_a[%d] = %d, want %d", i, out[i], combine(helper_a(in[i]), s));
    EXPECT(out_b[i] == helper_b(i) + s, "kernel_b[%d] = %d, want %d", i, out_b[i], helper_b(i) + s);
  }
  EXPECT(counter == 2 * n, "rdc_counter %d, want %d", counter, 2 * n);
  std::printf("PASS rdc\n");
  return 0;
}
