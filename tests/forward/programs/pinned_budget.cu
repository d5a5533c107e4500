// The per-user budget of grown pinned memory (wormhole-server
// --pinned-budget-mb), as one process of the user sees it:
//   pinned_budget hold MB      pins MB past the first data area (mapped),
//                              prints READY and keeps it until killed
//   pinned_budget refused MB   the heap cannot grow by MB: a mapped
//                              cudaHostAlloc fails with
//                              cudaErrorMemoryAllocation, cudaMallocHost
//                              still succeeds (pageable memory, not
//                              device-addressable) and its copies are exact
//   pinned_budget granted MB   MB of mapped memory past the first area,
//                              written by a kernel and checked
// MB is more than the first area holds (the server runs with a small
// --pinned-mb), so each allocation asks for a segment of its own.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "check.cuh"

__global__ void write_index(uint32_t* p, size_t n, uint32_t salt) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = uint32_t(i) * 7u + salt;
}

static void check_mapped(uint32_t* h, size_t bytes, uint32_t salt) {
  uint32_t* dp = nullptr;
  CHECK(cudaHostGetDevicePointer((void**)&dp, h, 0));
  const size_t words = bytes / 4;
  write_index<<<256, 256>>>(dp, words, salt);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  for (size_t i = 0; i < words; i += 4099)
    EXPECT(h[i] == uint32_t(i) * 7u + salt, "word %zu: %u, want %u", i, h[i], uint32_t(i) * 7u + salt);
  EXPECT(h[words - 1] == uint32_t(words - 1) * 7u + salt, "last word: %u", h[words - 1]);
}

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: pinned_budget hold|refused|granted MB\n");
    return 2;
  }
  const std::string mode = argv[1];
  const size_t bytes = size_t(std::atoi(argv[2])) << 20;
  if (mode == "hold" || mode == "granted") {
    uint32_t* h = nullptr;
    CHECK(cudaHostAlloc((void**)&h, bytes, cudaHostAllocMapped));
    check_mapped(h, bytes, mode == "hold" ? 11u : 13u);
    if (mode == "hold") {
      std::printf("READY\n");
      std::fflush(stdout);
      for (;;) pause();
    }
    CHECK(cudaFreeHost(h));
    std::printf("PASS: pinned_budget granted %zu MiB\n", bytes >> 20);
  } else if (mode == "refused") {
    void* m = nullptr;
    cudaError_t e = cudaHostAlloc(&m, bytes, cudaHostAllocMapped);
    EXPECT(e == cudaErrorMemoryAllocation, "a mapped cudaHostAlloc over the budget: %s", cudaGetErrorName(e));
    cudaGetLastError();
    // Pinned without the device mapping: pageable memory, copies still exact.
    uint32_t* h = nullptr;
    CHECK(cudaMallocHost((void**)&h, bytes));
    void* dp = nullptr;
    EXPECT(cudaHostGetDevicePointer(&dp, h, 0) != cudaSuccess, "pageable fallback memory is device-addressable");
    cudaGetLastError();
    const size_t words = bytes / 4;
    for (size_t i = 0; i < words; i++) h[i] = uint32_t(i * 2654435761u);
    uint32_t* d = nullptr;
    CHECK(cudaMalloc(&d, bytes));
    CHECK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
    std::memset(h, 0, bytes);
    CHECK(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < words; i++)
      EXPECT(h[i] == uint32_t(i * 2654435761u), "word %zu after a round trip: %u", i, h[i]);
    CHECK(cudaFree(d));
    CHECK(cudaFreeHost(h));
    std::printf("PASS: pinned_budget refused %zu MiB\n", bytes >> 20);
  } else {
    std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
    return 2;
  }
  return 0;
}
