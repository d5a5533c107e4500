// Managed memory attached to streams, as multi-stream programs use it: each
// stream gets its own managed buffer (cudaStreamAttachMemAsync with
// cudaMemAttachSingle), kernels on each stream fill them, the host reads
// each buffer after its stream synchronised. Then the calls CUDA refuses.
#include <vector>
#include "check.cuh"

__global__ void fill(int* p, int n, int k) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] = i * k + 7;
}

int main() {
  const int streams = 4, n = 1 << 16;
  cudaStream_t s[streams];
  int* buf[streams];
  for (int k = 0; k < streams; k++) {
    CHECK(cudaStreamCreate(&s[k]));
    CHECK(cudaMallocManaged(&buf[k], n * sizeof(int), cudaMemAttachHost));
    CHECK(cudaStreamAttachMemAsync(s[k], buf[k], 0, cudaMemAttachSingle));
  }
  for (int k = 0; k < streams; k++) fill<<<32, 256, 0, s[k]>>>(buf[k], n, k + 1);
  CHECK(cudaGetLastError());
  for (int k = 0; k < streams; k++) {
    CHECK(cudaStreamSynchronize(s[k]));
    for (int i = 0; i < n; i++) EXPECT(buf[k][i] == i * (k + 1) + 7, "stream %d: buf[%d] = %d", k, i, buf[k][i]);
  }
  // Back to every stream, whole allocation by its length.
  CHECK(cudaStreamAttachMemAsync(s[0], buf[0], n * sizeof(int), cudaMemAttachGlobal));
  CHECK(cudaStreamSynchronize(s[0]));

  int* plain;
  CHECK(cudaMalloc(&plain, 64));
  EXPECT(cudaStreamAttachMemAsync(s[0], plain, 0, cudaMemAttachSingle) == cudaErrorInvalidValue, "device memory");
  EXPECT(cudaStreamAttachMemAsync(s[0], buf[0], 100, cudaMemAttachSingle) == cudaErrorInvalidValue, "a partial length");
  EXPECT(cudaStreamAttachMemAsync(s[0], buf[0] + 1, 0, cudaMemAttachSingle) == cudaErrorInvalidValue, "not the start");
  EXPECT(cudaStreamAttachMemAsync(s[0], buf[0], 0, 3) == cudaErrorInvalidValue, "two flags");
  EXPECT(cudaStreamAttachMemAsync(0, buf[0], 0, cudaMemAttachSingle) == cudaErrorInvalidValue, "single to the NULL stream");
  (void)cudaGetLastError();
  CHECK(cudaFree(plain));
  for (int k = 0; k < streams; k++) {
    CHECK(cudaFree(buf[k]));
    CHECK(cudaStreamDestroy(s[k]));
  }
  std::printf("PASS managed_attach\n");
  return 0;
}
