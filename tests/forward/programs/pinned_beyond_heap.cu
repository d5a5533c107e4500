// More pinned memory than the server's shared pinned heap holds (its
// default is 256 MiB per client), as programs that stage large datasets
// through cudaMallocHost do, where the heap cannot grow (a server run with
// --pinned-budget-mb 0, a VM, the budget used up): every allocation succeeds, copies to and from
// each buffer are exact (checked word by word after a round trip through
// the device and a kernel), cudaHostGetFlags and cudaPointerGetAttributes
// describe them, and cudaFreeHost gives them all back. A mapped allocation
// past the heap is refused (kernels could not address it), not faked.
#include <cstdint>
#include <vector>

#include "check.cuh"

__global__ void add_index(uint32_t* p, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] += uint32_t(i);
}

int main() {
  const size_t chunk = 64ull << 20, words = chunk / 4;
  const int count = 6;  // 384 MiB in all
  std::vector<uint32_t*> bufs;
  uint32_t* d;
  CHECK(cudaMalloc(&d, chunk));
  for (int k = 0; k < count; k++) {
    uint32_t* h;
    CHECK(cudaMallocHost(&h, chunk));
    bufs.push_back(h);
    unsigned flags = ~0u;
    CHECK(cudaHostGetFlags(&flags, h));
    EXPECT(flags == cudaHostAllocDefault || flags == cudaHostAllocMapped, "buffer %d: flags %u", k, flags);
    cudaPointerAttributes a;
    CHECK(cudaPointerGetAttributes(&a, h + 12345));
    EXPECT(a.type == cudaMemoryTypeHost, "buffer %d: pointer type %d", k, int(a.type));
    for (size_t i = 0; i < words; i++) h[i] = uint32_t(k * 2654435761u + i * 40503u);
  }
  // Each buffer through the device and back, with a kernel on the way.
  for (int k = 0; k < count; k++) {
    uint32_t* h = bufs[k];
    CHECK(cudaMemcpyAsync(d, h, chunk, cudaMemcpyHostToDevice, 0));
    add_index<<<256, 256>>>(d, words);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpyAsync(h, d, chunk, cudaMemcpyDeviceToHost, 0));
    CHECK(cudaStreamSynchronize(0));
    for (size_t i = 0; i < words; i++) {
      const uint32_t want = uint32_t(k * 2654435761u + i * 40503u) + uint32_t(i);
      if (h[i] != want) {
        std::fprintf(stderr, "FAIL buffer %d word %zu: %u, want %u\n", k, i, h[i], want);
        return 1;
      }
    }
  }
  // Past the heap, a mapped allocation is refused with an allocation error.
  void* m = nullptr;
  cudaError_t e = cudaHostAlloc(&m, chunk, cudaHostAllocMapped);
  EXPECT(e == cudaErrorMemoryAllocation, "a mapped cudaHostAlloc past the heap: %s", cudaGetErrorName(e));
  cudaGetLastError();
  for (uint32_t* h : bufs) CHECK(cudaFreeHost(h));
  // All given back: the heap serves a pinned allocation again.
  uint32_t* again;
  CHECK(cudaHostAlloc((void**)&again, chunk, cudaHostAllocMapped));
  CHECK(cudaFreeHost(again));
  CHECK(cudaFree(d));
  std::printf("PASS: pinned_beyond_heap (%d x %zu MiB)\n", count, chunk >> 20);
  return 0;
}
