#include "check.cuh"
__global__ void times_two_plus(int* p) { p[threadIdx.x] = p[threadIdx.x] * 2 + 2 * threadIdx.x + 8; }
void launch_b(int* p) {
  times_two_plus<<<1, 32>>>(p);
  CHECK(cudaGetLastError());
}
