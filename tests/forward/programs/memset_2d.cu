// cudaMemset(Async), cudaMallocPitch and cudaMemcpy2D in every direction.
#include <vector>
#include "check.cuh"

int main() {
  const size_t w = 300, h = 37;
  unsigned char* d;
  size_t pitch;
  CHECK(cudaMallocPitch((void**)&d, &pitch, w, h));
  EXPECT(pitch >= w, "pitch %zu", pitch);
  CHECK(cudaMemset(d, 0xAB, pitch * h));
  std::vector<unsigned char> host(w * h, 0), back(w * h, 0);
  CHECK(cudaMemcpy2D(back.data(), w, d, pitch, w, h, cudaMemcpyDeviceToHost));
  for (auto v : back) EXPECT(v == 0xAB, "memset value %d", v);
  for (size_t i = 0; i < host.size(); i++) host[i] = (unsigned char)(i * 31 + 7);
  CHECK(cudaMemcpy2D(d, pitch, host.data(), w, w, h, cudaMemcpyHostToDevice));
  // Device-to-device 2D into a tight buffer, then back through pinned memory.
  unsigned char *tight, *pinned;
  CHECK(cudaMalloc(&tight, w * h));
  CHECK(cudaMemcpy2D(tight, w, d, pitch, w, h, cudaMemcpyDeviceToDevice));
  CHECK(cudaMallocHost(&pinned, w * h));
  CHECK(cudaMemcpy2DAsync(pinned, w, tight, w, w, h, cudaMemcpyDeviceToHost, 0));
  CHECK(cudaStreamSynchronize(0));
  for (size_t i = 0; i < host.size(); i++) EXPECT(pinned[i] == host[i], "i=%zu", i);
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  CHECK(cudaMemsetAsync(tight + 10, 0x11, 20, s));
  CHECK(cudaMemcpyAsync(pinned, tight, w * h, cudaMemcpyDeviceToHost, s));
  CHECK(cudaStreamSynchronize(s));
  for (size_t i = 0; i < host.size(); i++)
    EXPECT(pinned[i] == ((i >= 10 && i < 30) ? 0x11 : host[i]), "async memset i=%zu", i);
  // A copy past the end of an allocation is refused.
  EXPECT(cudaMemcpy(host.data(), tight, w * h + 1, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue, "overrun");
  cudaGetLastError();
  std::printf("PASS memset_2d\n");
  return 0;
}
