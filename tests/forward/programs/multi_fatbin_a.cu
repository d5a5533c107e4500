// Two translation units, two registered fatbins, one program.
#include "check.cuh"
__global__ void add_one(int* p) { p[threadIdx.x] += 1; }
void launch_b(int* p);  // multi_fatbin_b.cu
int main() {
  int* d;
  CHECK(cudaMalloc(&d, 32 * 4));
  CHECK(cudaMemset(d, 0, 32 * 4));
  add_one<<<1, 32>>>(d);
  launch_b(d);
  add_one<<<1, 32>>>(d);
  int h[32];
  CHECK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
  for (int i = 0; i < 32; i++) EXPECT(h[i] == 11 + 2 * i,  /* ((0+1)*2 + 2i + 8) + 1 */ "i=%d got %d", i, h[i]);
  std::printf("PASS multi_fatbin\n");
  return 0;
}
