// The forwarded null call: cudaMemGetInfo round trips, timed one by one.
// Last line: rtt_p50_ns=<n> (what vm/bench-vm.sh reads).
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <vector>
#include "check.cuh"

int main(int argc, char** argv) {
  int iters = argc > 1 ? std::atoi(argv[1]) : 20000;
  size_t f, t;
  for (int i = 0; i < 2000; i++) CHECK(cudaMemGetInfo(&f, &t));
  std::vector<long> ns(iters);
  for (int i = 0; i < iters; i++) {
    auto t0 = std::chrono::steady_clock::now();
    CHECK(cudaMemGetInfo(&f, &t));
    ns[i] = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
  }
  std::sort(ns.begin(), ns.end());
  std::printf("null call (cudaMemGetInfo) x%d: p50 %ld ns, p99 %ld ns\n", iters, ns[iters / 2], ns[iters * 99 / 100]);
  std::printf("rtt_p50_ns=%ld\n", ns[iters / 2]);
  return 0;
}
