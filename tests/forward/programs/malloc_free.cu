// cudaMalloc + cudaFree in a loop, as an allocator-heavy program does it:
//  1. far more than a device window's worth (1 TiB) of allocate-and-free,
//     in 4 GiB blocks that are never touched: it must never run out;
//  2. every live allocation stays usable and apart from the others and from
//     mapped pinned memory (a copy into one never shows up in another);
//  3. the cost of one cudaMalloc+cudaFree pair, timed pair by pair, beside
//     the forwarded null call (cudaMemGetInfo). Last line:
//     malloc_free_p50_ns=<n> null_call_p50_ns=<n>
// Arguments: [timed pairs (default 20000)] [time: the timing only].
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>
#include "check.cuh"

namespace {

using Clock = std::chrono::steady_clock;

long p50(std::vector<long>& v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 20000;
  const bool time_only = argc > 2 && std::strcmp(argv[2], "time") == 0;

  // Mapped pinned memory first, so its device window exists throughout.
  const size_t pinned_n = 1 << 20;
  uint8_t* pinned = nullptr;
  CHECK(cudaHostAlloc(&pinned, pinned_n, cudaHostAllocMapped));
  std::memset(pinned, 0x5a, pinned_n);
  void* pinned_d = nullptr;
  CHECK(cudaHostGetDevicePointer(&pinned_d, pinned, 0));
  const uint64_t pd = reinterpret_cast<uint64_t>(pinned_d);

  // 1. 1.25 TiB of 4 GiB allocate-and-free (never touched).
  const size_t big = 4ull << 30;
  for (int i = 0; i < (time_only ? 0 : 320); i++) {
    void* p = nullptr;
    CHECK(cudaMalloc(&p, big));
    const uint64_t a = reinterpret_cast<uint64_t>(p);
    EXPECT(a + big <= pd || a >= pd + pinned_n, "allocation %d at %#llx overlaps mapped memory at %#llx", i,
           (unsigned long long)a, (unsigned long long)pd);
    if (i % 64 == 0) CHECK(cudaMemset(p, i, 256));  // usable, and the copy stays inside it
    CHECK(cudaFree(p));
  }

  // 2. Many small live allocations, each with its own contents.
  const int live = time_only ? 0 : 512;
  std::vector<uint8_t*> ptrs(live);
  std::vector<size_t> sizes(live);
  for (int i = 0; i < live; i++) {
    sizes[i] = 64 + size_t(i) * 97 % 8192;
    CHECK(cudaMalloc(reinterpret_cast<void**>(&ptrs[i]), sizes[i]));
    CHECK(cudaMemset(ptrs[i], i & 0xff, sizes[i]));
  }
  for (int i = 0; i < live; i += 2) CHECK(cudaFree(ptrs[i]));  // holes, reused below
  for (int i = 0; i < live; i += 2) {
    CHECK(cudaMalloc(reinterpret_cast<void**>(&ptrs[i]), sizes[i]));
    CHECK(cudaMemset(ptrs[i], i & 0xff, sizes[i]));
  }
  std::vector<uint8_t> back;
  for (int i = 0; i < live; i++) {
    back.assign(sizes[i], 0);
    CHECK(cudaMemcpy(back.data(), ptrs[i], sizes[i], cudaMemcpyDeviceToHost));
    for (size_t k = 0; k < sizes[i]; k++)
      EXPECT(back[k] == (i & 0xff), "allocation %d byte %zu is %d", i, k, back[k]);
  }
  for (size_t k = 0; k < pinned_n; k++) EXPECT(pinned[k] == 0x5a, "pinned byte %zu changed", k);
  for (int i = 0; i < live; i++) CHECK(cudaFree(ptrs[i]));

  // 3. The pair's cost, and the null call's, timed one by one.
  size_t f, t;
  std::vector<long> pair(iters), null_call(iters);
  for (int i = 0; i < 2000; i++) {
    void* p;
    CHECK(cudaMalloc(&p, 4096));
    CHECK(cudaFree(p));
    CHECK(cudaMemGetInfo(&f, &t));
  }
  for (int i = 0; i < iters; i++) {
    void* p;
    auto t0 = Clock::now();
    cudaError_t e1 = cudaMalloc(&p, 4096);
    cudaError_t e2 = cudaFree(p);
    auto t1 = Clock::now();
    CHECK(e1);
    CHECK(e2);
    CHECK(cudaMemGetInfo(&f, &t));
    auto t2 = Clock::now();
    pair[i] = std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
    null_call[i] = std::chrono::duration_cast<std::chrono::nanoseconds>(t2 - t1).count();
  }
  const long pp = p50(pair), np = p50(null_call);
  std::printf("cudaMalloc(4 KiB)+cudaFree x%d: p50 %ld ns; null call p50 %ld ns\n", iters, pp, np);
  CHECK(cudaFreeHost(pinned));
  std::printf("PASS\nmalloc_free_p50_ns=%ld null_call_p50_ns=%ld\n", pp, np);
  return 0;
}
