// A client that takes device memory and keeps the server busy until it is
// killed (kill -9 mid-stream test). Prints READY once its memory is held.
#include <cstdlib>
#include "check.cuh"
__global__ void spin(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * 0.5f + 1.f;
}
int main(int argc, char** argv) {
  size_t mb = argc > 1 ? size_t(std::atoi(argv[1])) : 64;
  float* d;
  CHECK(cudaMalloc(&d, mb << 20));
  CHECK(cudaMemset(d, 0, mb << 20));
  std::printf("READY\n");
  std::fflush(stdout);
  static float h[1 << 16];
  for (;;) {
    spin<<<256, 256>>>(d, 1 << 16);
    CHECK(cudaMemcpyAsync(h, d, sizeof h, cudaMemcpyDeviceToHost, 0));
  }
}
