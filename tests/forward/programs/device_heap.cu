// Device-side heap: per-thread linked lists built with `new` in one kernel,
// summed by a second kernel, freed with `delete` by a third; the heap size set
// with cudaDeviceSetLimit, which is refused once a kernel has used the heap
// (until a cudaDeviceReset).
#include <cstdint>
#include <vector>
#include "check.cuh"

struct Node {
  long long value;
  Node* next;
};

constexpr int kThreads = 512;

__device__ int list_len(int i) { return 1 + i % 37; }
__device__ __host__ long long node_value(int i, int k) { return (long long)i * 7919 + k * k - 3 * k; }

__global__ void build(Node** heads, int* failed) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= kThreads) return;
  Node* head = nullptr;
  for (int k = 0; k < list_len(i); ++k) {
    Node* n = new Node{node_value(i, k), head};
    if (!n) {
      atomicAdd(failed, 1);
      break;
    }
    head = n;
  }
  heads[i] = head;
}

__global__ void sum(Node* const* heads, long long* sums, int* misaligned) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= kThreads) return;
  long long s = 0;
  for (const Node* n = heads[i]; n; n = n->next) {
    if (reinterpret_cast<uintptr_t>(n) % 16) atomicAdd(misaligned, 1);
    s += n->value;
  }
  sums[i] = s;
}

__global__ void release(Node** heads) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= kThreads) return;
  for (Node* n = heads[i]; n;) {
    Node* next = n->next;
    delete n;
    n = next;
  }
  heads[i] = nullptr;
}

// After the lists are gone the heap is whole again: one large block fits.
__global__ void big_block(int* ok, size_t bytes) {
  char* p = static_cast<char*>(malloc(bytes));
  *ok = p != nullptr;
  if (p) {
    p[0] = 1;
    p[bytes - 1] = 2;
    free(p);
  }
}

int main() {
  const size_t heap = 4 << 20;
  size_t v = 0;
  CHECK(cudaDeviceGetLimit(&v, cudaLimitMallocHeapSize));
  EXPECT(v == 8 << 20, "default heap size %zu", v);
  CHECK(cudaDeviceSetLimit(cudaLimitMallocHeapSize, heap));
  CHECK(cudaDeviceGetLimit(&v, cudaLimitMallocHeapSize));
  EXPECT(v == heap, "heap size %zu", v);

  Node** heads;
  long long* sums;
  int* flags;
  CHECK(cudaMalloc(&heads, kThreads * sizeof(Node*)));
  CHECK(cudaMalloc(&sums, kThreads * sizeof(long long)));
  CHECK(cudaMalloc(&flags, 3 * sizeof(int)));
  CHECK(cudaMemset(flags, 0, 3 * sizeof(int)));

  build<<<(kThreads + 127) / 128, 128>>>(heads, flags);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  // The heap's size is now fixed.
  EXPECT(cudaDeviceSetLimit(cudaLimitMallocHeapSize, 16 << 20) == cudaErrorInvalidValue, "SetLimit after use");
  cudaGetLastError();
  CHECK(cudaDeviceGetLimit(&v, cudaLimitMallocHeapSize));
  EXPECT(v == heap, "heap size after refused SetLimit %zu", v);

  // Heap pointers are device pointers the host may hold and pass back.
  std::vector<Node*> h_heads(kThreads);
  CHECK(cudaMemcpy(h_heads.data(), heads, kThreads * sizeof(Node*), cudaMemcpyDeviceToHost));
  for (int i = 0; i < kThreads; ++i) EXPECT(h_heads[i] != nullptr, "list %d empty", i);

  sum<<<(kThreads + 127) / 128, 128>>>(heads, sums, flags + 1);
  CHECK(cudaGetLastError());
  release<<<(kThreads + 127) / 128, 128>>>(heads);
  CHECK(cudaGetLastError());
  big_block<<<1, 1>>>(flags + 2, heap - (64 << 10));
  CHECK(cudaDeviceSynchronize());

  std::vector<long long> h_sums(kThreads);
  int h_flags[3];
  CHECK(cudaMemcpy(h_sums.data(), sums, kThreads * sizeof(long long), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(h_flags, flags, sizeof h_flags, cudaMemcpyDeviceToHost));
  EXPECT(h_flags[0] == 0, "%d allocations failed", h_flags[0]);
  EXPECT(h_flags[1] == 0, "%d misaligned nodes", h_flags[1]);
  EXPECT(h_flags[2] == 1, "a large block did not fit after the lists were freed");
  for (int i = 0; i < kThreads; ++i) {
    long long want = 0;
    for (int k = 0; k < 1 + i % 37; ++k) want += node_value(i, k);
    EXPECT(h_sums[i] == want, "list %d: sum %lld, want %lld", i, h_sums[i], want);
  }
  CHECK(cudaMemcpy(h_heads.data(), heads, kThreads * sizeof(Node*), cudaMemcpyDeviceToHost));
  for (int i = 0; i < kThreads; ++i) EXPECT(h_heads[i] == nullptr, "list %d not released", i);

  // A reset ends the heap with the context: its size may be set again.
  if (!stacked_excludes("the heap size after cudaDeviceReset (the cuda backend keeps its context across a reset)")) {
    CHECK(cudaDeviceReset());
    CHECK(cudaDeviceSetLimit(cudaLimitMallocHeapSize, 1 << 20));
    CHECK(cudaMalloc(&flags, 2 * sizeof(int)));
    big_block<<<1, 1>>>(flags, 2 << 20);      // larger than the new heap
    big_block<<<1, 1>>>(flags + 1, 512 << 10);
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(h_flags, flags, 2 * sizeof(int), cudaMemcpyDeviceToHost));
    EXPECT(h_flags[0] == 0 && h_flags[1] == 1, "after reset: 2 MiB block %d, 512 KiB block %d", h_flags[0], h_flags[1]);
    EXPECT(cudaDeviceSetLimit(cudaLimitMallocHeapSize, 4 << 20) == cudaErrorInvalidValue, "SetLimit after use");
  }
  std::printf("PASS device_heap\n");
  return 0;
}
