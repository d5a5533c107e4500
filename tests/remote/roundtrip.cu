// Over ucx://: a large copy round trip checked byte by byte (pageable and
// pinned host memory, synchronous and asynchronous), a 2D copy, a kernel's
// printf, and mapped host memory refused with a clear error.
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <vector>

#include "check.cuh"

__global__ void bump(uint8_t* p, size_t n) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) p[i] = uint8_t(p[i] + 1);
}

__global__ void hello(int v) {
  if (threadIdx.x == 0) printf("remote kernel says %d\n", v);
}

static uint8_t pattern(size_t i) { return uint8_t((i * 2654435761u) >> 13); }

int main(int argc, char** argv) {
  size_t mb = argc > 1 ? size_t(atoi(argv[1])) : 64;
  const size_t n = mb << 20;
  std::vector<uint8_t> src(n), back(n);
  for (size_t i = 0; i < n; i++) src[i] = pattern(i);
  uint8_t* d = nullptr;
  CHECK(cudaMalloc(&d, n));
  CHECK(cudaMemcpy(d, src.data(), n, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(back.data(), d, n, cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < n; i++) EXPECT(back[i] == src[i], "byte %zu: got %u want %u", i, back[i], src[i]);

  // A kernel changes a small window; the rest must come back untouched.
  const size_t win = 1 << 16;
  bump<<<(win + 255) / 256, 256>>>(d + 12345, win);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  std::memset(back.data(), 0, n);
  CHECK(cudaMemcpy(back.data(), d, n, cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < n; i++) {
    uint8_t want = uint8_t(src[i] + (i >= 12345 && i < 12345 + win ? 1 : 0));
    EXPECT(back[i] == want, "after kernel, byte %zu: got %u want %u", i, back[i], want);
  }

  // Pinned memory and async copies on a stream.
  const size_t pn = std::min<size_t>(8 << 20, n);
  uint8_t *ph = nullptr, *pb = nullptr;
  CHECK(cudaMallocHost(&ph, pn));
  CHECK(cudaMallocHost(&pb, pn));
  for (size_t i = 0; i < pn; i++) ph[i] = pattern(i + 7);
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  CHECK(cudaMemcpyAsync(d, ph, pn, cudaMemcpyHostToDevice, s));
  CHECK(cudaMemcpyAsync(pb, d, pn, cudaMemcpyDeviceToHost, s));
  CHECK(cudaStreamSynchronize(s));
  for (size_t i = 0; i < pn; i++) EXPECT(pb[i] == ph[i], "pinned byte %zu: got %u want %u", i, pb[i], ph[i]);

  // Registered pageable memory (cudaHostRegister) both ways, and a copy
  // into the middle of pinned memory (a sub-range of its registration).
  CHECK(cudaHostRegister(src.data(), n, cudaHostRegisterDefault));
  CHECK(cudaHostRegister(back.data(), n, cudaHostRegisterDefault));
  std::memset(back.data(), 0, n);
  CHECK(cudaMemcpy(d, src.data(), n, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(back.data(), d, n, cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < n; i++) EXPECT(back[i] == src[i], "registered byte %zu: got %u want %u", i, back[i], src[i]);
  CHECK(cudaHostUnregister(src.data()));
  CHECK(cudaHostUnregister(back.data()));
  std::memset(pb, 0, pn);
  CHECK(cudaMemcpy(pb + 3, d + 5, pn - 7, cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < pn; i++) {
    uint8_t want = i >= 3 && i < pn - 4 ? src[i + 2] : 0;
    EXPECT(pb[i] == want, "pinned sub-range byte %zu: got %u want %u", i, pb[i], want);
  }

  // 2D copy from pageable memory.
  const size_t w = 300, h = 50, sp = 512, dp = 1024;
  std::vector<uint8_t> h2(sp * h), b2(sp * h, 0);
  for (size_t i = 0; i < h2.size(); i++) h2[i] = pattern(i + 99);
  CHECK(cudaMemcpy2D(d, dp, h2.data(), sp, w, h, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy2D(b2.data(), sp, d, dp, w, h, cudaMemcpyDeviceToHost));
  for (size_t r = 0; r < h; r++)
    for (size_t c = 0; c < w; c++) EXPECT(b2[r * sp + c] == h2[r * sp + c], "2D (%zu,%zu)", r, c);

  // Device output reaches our stdout at the next synchronising call.
  hello<<<1, 32>>>(42);
  CHECK(cudaDeviceSynchronize());
  std::fflush(stdout);

  // Mapped host memory cannot be reached by a kernel on another machine.
  void* dp_ = nullptr;
  cudaError_t e = cudaHostGetDevicePointer(&dp_, ph, 0);
  EXPECT(e == cudaErrorNotSupported, "cudaHostGetDevicePointer over ucx: %s", cudaGetErrorName(e));
  cudaGetLastError();

  // An error is still an error: a copy to an address that is not ours.
  e = cudaMemcpy(reinterpret_cast<void*>(uintptr_t(0x10)), src.data(), 1 << 20, cudaMemcpyHostToDevice);
  EXPECT(e != cudaSuccess, "copy to a bad device address succeeded");
  cudaGetLastError();

  CHECK(cudaStreamDestroy(s));
  CHECK(cudaFreeHost(ph));
  CHECK(cudaFreeHost(pb));
  CHECK(cudaFree(d));
  std::printf("PASS remote roundtrip %zu MiB\n", mb);
  return 0;
}
