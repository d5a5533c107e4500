// Managed memory attached to streams, as multi-stream programs use it: each
// stream gets its own managed buffer (cudaStreamAttachMemAsync with
// cudaMemAttachSingle), kernels on each stream fill them, the host reads
// each buffer after its stream synchronised. Then the calls CUDA refuses.
#include <cstdlib>
#include <vector>
#include "check.cuh"

__managed__ int counter[256];

__global__ void bump(int* p) { p[threadIdx.x] += int(threadIdx.x); }

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

  // Attached to one stream while another stream's kernel is queued: each
  // kernel sees its own buffer.
  CHECK(cudaStreamAttachMemAsync(s[1], buf[1], 0, cudaMemAttachSingle));
  fill<<<8, 128, 0, s[2]>>>(buf[2], n, 100);
  fill<<<8, 128, 0, s[1]>>>(buf[1], n, 50);
  CHECK(cudaStreamAttachMemAsync(s[2], buf[2], 0, cudaMemAttachHost));
  CHECK(cudaStreamSynchronize(s[1]));
  CHECK(cudaStreamSynchronize(s[2]));
  for (int i = 0; i < n; i++) {
    EXPECT(buf[1][i] == i * 50 + 7, "buf[1][%d] = %d", i, buf[1][i]);
    EXPECT(buf[2][i] == i * 100 + 7, "buf[2][%d] = %d", i, buf[2][i]);
  }
  // A __managed__ variable is a managed allocation too.
  CHECK(cudaStreamAttachMemAsync(s[3], counter, 0, cudaMemAttachSingle));
  bump<<<1, 256, 0, s[3]>>>(counter);
  CHECK(cudaStreamSynchronize(s[3]));
  for (int i = 0; i < 256; i++) EXPECT(counter[i] == i, "counter[%d] = %d", i, counter[i]);

  int* plain;
  CHECK(cudaMalloc(&plain, 64));
  EXPECT(cudaStreamAttachMemAsync(s[0], plain, 0, cudaMemAttachSingle) == cudaErrorInvalidValue, "device memory");
  EXPECT(cudaStreamAttachMemAsync(s[0], buf[0], 100, cudaMemAttachSingle) == cudaErrorInvalidValue, "a partial length");
  EXPECT(cudaStreamAttachMemAsync(s[0], buf[0] + 1, 0, cudaMemAttachSingle) == cudaErrorInvalidValue, "not the start");
  EXPECT(cudaStreamAttachMemAsync(s[0], buf[0], 0, 3) == cudaErrorInvalidValue, "two flags");
  EXPECT(cudaStreamAttachMemAsync(0, buf[0], 0, cudaMemAttachSingle) == cudaErrorInvalidValue, "single to the NULL stream");
  EXPECT(cudaStreamAttachMemAsync(s[0], buf[0], 0, 0) == cudaErrorInvalidValue, "no flag");
  EXPECT(cudaStreamAttachMemAsync(s[0], buf[0], n * sizeof(int) + 4, cudaMemAttachGlobal) == cudaErrorInvalidValue,
         "past the allocation");
  EXPECT(cudaStreamAttachMemAsync(s[0], nullptr, 0, cudaMemAttachGlobal) == cudaErrorInvalidValue, "a null pointer");
  int* host = static_cast<int*>(std::malloc(4096));
  EXPECT(cudaStreamAttachMemAsync(s[0], host, 4096, cudaMemAttachGlobal) == cudaErrorInvalidValue, "pageable memory");
  std::free(host);
  (void)cudaGetLastError();
  // The refusals left the buffers as they were.
  fill<<<8, 128, 0, s[0]>>>(buf[0], n, 3);
  CHECK(cudaStreamSynchronize(s[0]));
  for (int i = 0; i < n; i++) EXPECT(buf[0][i] == i * 3 + 7, "buf[0][%d] = %d", i, buf[0][i]);
  CHECK(cudaFree(plain));
  for (int k = 0; k < streams; k++) {
    CHECK(cudaFree(buf[k]));
    CHECK(cudaStreamDestroy(s[k]));
  }
  std::printf("PASS managed_attach\n");
  return 0;
}
