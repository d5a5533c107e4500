// An nvcc program (-cudart shared) that the VM image test carries into a guest
// with a stand-in runtime (cudart_stub.cpp). libm, libstdc++ and libgcc_s come along.
#include <cstdio>
#include <vector>
#include <cmath>
__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) c[i] = a[i] + b[i]; }
int main() {
  int n = 1024; std::vector<float> h(n, 1.0f);
  float *a, *b, *c;
  cudaError_t e = cudaMalloc(&a, n * 4);
  if (e != cudaSuccess) { printf("cudaMalloc: %s\n", cudaGetErrorString(e)); return 1; }
  cudaMalloc(&b, n * 4); cudaMalloc(&c, n * 4);
  add<<<n / 256, 256>>>(a, b, c, n);
  printf("launch: %d sqrt=%f\n", (int)cudaDeviceSynchronize(), std::sqrt(2.0 * n) / 32);
  return 0;
}
