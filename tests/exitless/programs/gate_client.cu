// A forwarded program for the exitless gate tests (tests/exitless/
// test_gate_daemon.cpp): synchronous calls that fit a gate slot go through
// the gate, launches through the ring, and each launch is followed by a
// synchronous copy whose result depends on it (the ring_barrier keeps
// their order). Copies use pinned memory (the channel's data area), so the
// copy itself is a small synchronous request.
// Usage: gate_client [run|hold|time] [rounds]
//   run:  everything, then "PASS gate_client"
//   hold: the first rounds, then "HOLDING" and wait to be killed
//   time: p50/p99 of a synchronous null call (cudaDeviceSynchronize: a
//         round trip) and of cudaMemGetInfo (from the state page with the
//         gate), `rounds` times each
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>
#include "check.cuh"  // tests/forward/programs (-I)

__global__ void inc(int* p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] += 1;
}

template <class F>
void time_it(const char* what, int n, F&& f) {
  std::vector<long> ns(n);
  for (int i = 0; i < n; i++) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    ns[i] = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
  }
  std::sort(ns.begin(), ns.end());
  std::printf("%s x%d: p50 %ld ns, p99 %ld ns\n", what, n, ns[n / 2], ns[n * 99 / 100]);
}

int main(int argc, char** argv) {
  const bool hold = argc > 1 && !std::strcmp(argv[1], "hold");
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 20;
  if (argc > 1 && !std::strcmp(argv[1], "time")) {
    size_t f, t;
    for (int i = 0; i < 1000; i++) CHECK(cudaDeviceSynchronize());
    time_it("cudaDeviceSynchronize", rounds, [] { CHECK(cudaDeviceSynchronize()); });
    time_it("cudaMemGetInfo", rounds, [&] { CHECK(cudaMemGetInfo(&f, &t)); });
    std::printf("PASS gate_client time\n");
    return 0;
  }
  const int n = 4096;
  const size_t big_bytes = 1 << 20;

  size_t f0 = 0, t0 = 0;
  CHECK(cudaMemGetInfo(&f0, &t0));
  std::printf("meminfo0 free=%zu total=%zu\n", f0, t0);
  int* d = nullptr;
  void* big = nullptr;
  int* h = nullptr;
  CHECK(cudaMalloc(&d, n * sizeof(int)));
  CHECK(cudaMalloc(&big, big_bytes));
  CHECK(cudaMallocHost(&h, n * sizeof(int)));
  for (int i = 0; i < n; i++) h[i] = i;
  CHECK(cudaMemcpy(d, h, n * sizeof(int), cudaMemcpyHostToDevice));
  for (int r = 1; r <= rounds; r++) {
    inc<<<n / 256, 256>>>(d, n);  // posted: the ring
    std::memset(h, 0xff, n * sizeof(int));
    CHECK(cudaMemcpy(h, d, n * sizeof(int), cudaMemcpyDeviceToHost));  // synchronous: the gate
    for (int i = 0; i < n; i++) EXPECT(h[i] == i + r, "round %d: h[%d] = %d, want %d", r, i, h[i], i + r);
  }
  std::printf("rounds %d ok\n", rounds);
  size_t f1 = 0, t1 = 0;
  CHECK(cudaMemGetInfo(&f1, &t1));
  std::printf("meminfo1 free=%zu total=%zu\n", f1, t1);
  EXPECT(t1 == t0, "total moved: %zu -> %zu", t0, t1);
  EXPECT(f1 + big_bytes <= f0, "free %zu -> %zu after allocating %zu bytes", f0, f1, big_bytes);
  if (hold) {
    std::printf("HOLDING\n");
    std::fflush(stdout);
    for (;;) pause();
  }
  EXPECT(cudaStreamQuery(0) == cudaSuccess, "default stream not idle after a synchronous copy");
  inc<<<n / 256, 256>>>(d, n);
  CHECK(cudaDeviceSynchronize());
  EXPECT(cudaStreamQuery(0) == cudaSuccess, "default stream not idle after cudaDeviceSynchronize");
  CHECK(cudaMemcpy(h, d, n * sizeof(int), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; i++) EXPECT(h[i] == i + rounds + 1, "after sync: h[%d] = %d", i, h[i]);
  CHECK(cudaFree(big));
  size_t f2 = 0, t2 = 0;
  CHECK(cudaMemGetInfo(&f2, &t2));
  std::printf("meminfo2 free=%zu total=%zu\n", f2, t2);
  EXPECT(f2 >= f1 + big_bytes, "free %zu -> %zu after freeing %zu bytes", f1, f2, big_bytes);
  CHECK(cudaFree(d));
  CHECK(cudaFreeHost(h));
  std::printf("PASS gate_client\n");
  return 0;
}
