// Pinning far more than the server's first data area holds (256 MiB per
// client by default), as benchmarks and data loaders do, under the
// server's default settings: the pinned heap grows into shared segments,
// so every allocation is pinned memory the server copies from directly,
// mapped ones included, which kernels read and write through
// cudaHostGetDevicePointer. Every copy and every kernel result is checked
// word by word against the host's own computation; then everything is
// freed and as much is pinned again (the segments and their budget were
// given back).
#include <cstdint>
#include <vector>

#include "check.cuh"

__global__ void add_index(uint32_t* p, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] += uint32_t(i);
}

// Reads one mapped host buffer and writes another, and updates the first in place.
__global__ void mix_mapped(uint32_t* in, uint32_t* out, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const uint32_t v = in[i];
    out[i] = v * 3u + uint32_t(i);
    in[i] = v ^ 0x5A5A5A5Au;
  }
}

static uint32_t pattern(int k, size_t i) { return uint32_t(k * 2654435761u + i * 40503u); }

struct Buf {
  uint32_t* h;
  size_t bytes;
  bool mapped;
};

// Pins `plain` x `plain_mb` MiB with cudaMallocHost and `mapped` x `mapped_mb` MiB
// with cudaHostAlloc(Mapped), fills and checks every buffer.
static std::vector<Buf> pin(int plain, size_t plain_mb, int mapped, size_t mapped_mb, int salt) {
  std::vector<Buf> bufs;
  for (int k = 0; k < plain + mapped; k++) {
    const bool m = k >= plain;
    Buf b{nullptr, (m ? mapped_mb : plain_mb) << 20, m};
    if (m) CHECK(cudaHostAlloc((void**)&b.h, b.bytes, cudaHostAllocMapped | cudaHostAllocPortable));
    else CHECK(cudaMallocHost((void**)&b.h, b.bytes));
    unsigned flags = 0;
    CHECK(cudaHostGetFlags(&flags, b.h));
    cudaPointerAttributes a;
    CHECK(cudaPointerGetAttributes(&a, b.h + 1000));
    EXPECT(a.type == cudaMemoryTypeHost, "buffer %d: pointer type %d", k, int(a.type));
    for (size_t i = 0; i < b.bytes / 4; i++) b.h[i] = pattern(k + salt, i);
    bufs.push_back(b);
  }
  return bufs;
}

int main() {
  // 4 x 96 MiB + 3 x 72 MiB = 600 MiB: the first area holds about two of them.
  std::vector<Buf> bufs = pin(4, 96, 3, 72, 0);
  size_t total = 0;
  for (auto& b : bufs) total += b.bytes;
  uint32_t* d;
  CHECK(cudaMalloc(&d, 96 << 20));
  // Every buffer through the device and back, with a kernel on the way.
  for (size_t k = 0; k < bufs.size(); k++) {
    const Buf& b = bufs[k];
    const size_t words = b.bytes / 4;
    CHECK(cudaMemcpyAsync(d, b.h, b.bytes, cudaMemcpyHostToDevice, 0));
    add_index<<<256, 256>>>(d, words);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpyAsync(b.h, d, b.bytes, cudaMemcpyDeviceToHost, 0));
    CHECK(cudaStreamSynchronize(0));
    for (size_t i = 0; i < words; i++) {
      const uint32_t want = pattern(int(k), i) + uint32_t(i);
      if (b.h[i] != want) {
        std::fprintf(stderr, "FAIL buffer %zu word %zu: %u, want %u\n", k, i, b.h[i], want);
        return 1;
      }
    }
  }
  // The mapped buffers (all past the first area): kernels read and write them in place.
  for (size_t k = 4; k + 1 < bufs.size(); k++) {
    Buf& a = bufs[k];
    Buf& o = bufs[k + 1];
    const size_t words = a.bytes / 4;
    for (size_t i = 0; i < words; i++) a.h[i] = pattern(int(k) + 100, i);
    uint32_t *da = nullptr, *dout = nullptr;
    CHECK(cudaHostGetDevicePointer((void**)&da, a.h, 0));
    CHECK(cudaHostGetDevicePointer((void**)&dout, o.h, 0));
    cudaPointerAttributes pa;
    CHECK(cudaPointerGetAttributes(&pa, a.h));
    EXPECT(pa.devicePointer == da, "buffer %zu: device pointer %p, cudaHostGetDevicePointer %p", k, pa.devicePointer,
           (void*)da);
    mix_mapped<<<256, 256>>>(da, dout, words);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    for (size_t i = 0; i < words; i++) {
      const uint32_t v = pattern(int(k) + 100, i);
      if (o.h[i] != v * 3u + uint32_t(i) || a.h[i] != (v ^ 0x5A5A5A5Au)) {
        std::fprintf(stderr, "FAIL mapped buffers %zu/%zu word %zu: %u and %u, want %u and %u\n", k, k + 1, i, o.h[i],
                     a.h[i], v * 3u + uint32_t(i), v ^ 0x5A5A5A5Au);
        return 1;
      }
    }
  }
  for (auto& b : bufs) CHECK(cudaFreeHost(b.h));
  // All given back: as much pinned again, now all of it mapped, and checked through a kernel.
  std::vector<Buf> again = pin(0, 0, 2, 300, 7);
  for (size_t k = 0; k < again.size(); k++) {
    uint32_t* dp = nullptr;
    CHECK(cudaHostGetDevicePointer((void**)&dp, again[k].h, 0));
    const size_t words = (16 << 20) / 4;  // the last 16 MiB of each buffer
    uint32_t* tail = again[k].h + again[k].bytes / 4 - words;
    add_index<<<256, 256>>>(dp + again[k].bytes / 4 - words, words);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    const size_t first = again[k].bytes / 4 - words;
    for (size_t i = 0; i < words; i++)
      EXPECT(tail[i] == pattern(int(k) + 7, first + i) + uint32_t(i), "again %zu word %zu: %u", k, first + i, tail[i]);
  }
  for (auto& b : again) CHECK(cudaFreeHost(b.h));
  CHECK(cudaFree(d));
  std::printf("PASS: pinned_grow (%zu MiB pinned, then %d MiB mapped)\n", total >> 20, 600);
  return 0;
}
