// Mapped pinned memory: a kernel on the server writes host memory that the
// guest reads after synchronising; cudaHostRegister keeps copy semantics.
#include <vector>
#include "check.cuh"

__global__ void fill(int* p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = i * 3;
}

int main() {
  const int n = 10000;
  int* h;
  CHECK(cudaHostAlloc(&h, n * 4, cudaHostAllocMapped));
  int* dview;
  CHECK(cudaHostGetDevicePointer((void**)&dview, h, 0));
  fill<<<(n + 127) / 128, 128>>>(dview, n);
  CHECK(cudaDeviceSynchronize());
  for (int i = 0; i < n; i++) EXPECT(h[i] == i * 3, "mapped i=%d got %d", i, h[i]);
  std::vector<int> v(n, 5);
  CHECK(cudaHostRegister(v.data(), n * 4, cudaHostRegisterDefault));
  int* d;
  CHECK(cudaMalloc(&d, n * 4));
  CHECK(cudaMemcpy(d, v.data(), n * 4, cudaMemcpyHostToDevice));
  fill<<<(n + 127) / 128, 128>>>(d, n / 2);
  CHECK(cudaMemcpy(v.data(), d, n * 4, cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; i++) EXPECT(v[i] == (i < n / 2 ? i * 3 : 5), "registered i=%d got %d", i, v[i]);
  CHECK(cudaHostUnregister(v.data()));
  cudaPointerAttributes a;
  CHECK(cudaPointerGetAttributes(&a, d));
  EXPECT(a.type == cudaMemoryTypeDevice, "device pointer type %d", int(a.type));
  CHECK(cudaFreeHost(h));
  std::printf("PASS mapped_pinned\n");
  return 0;
}
