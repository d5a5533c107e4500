// bench_graph: a 100-kernel CUDA graph against the same 100 kernels
// launched one by one (make bench-graph). An ordinary nvcc -cudart shared
// program, run through the drop-in libcudart.so.13 against a
// wormhole-server that run_graph_bench.sh starts on another core.
//
// Each kernel adds 1 to a device counter, so both ways are checked: the
// counter must equal the number of kernels issued. The two ways alternate
// in blocks of --block-ms for --seconds in all; each block ends with a
// cudaStreamSynchronize, so a rate is what the server executed, not only
// what the client posted. Reported: kernels/s each way, graph launches/s,
// and the client's issue cost (ns per 100 kernels: 100 posted Launch
// records against one posted GraphLaunch).
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "check.cuh"  // CHECK: an error ends the bench

__global__ void bump(unsigned long long* c) { atomicAdd(c, 1ull); }

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kKernels = 100;

struct Tally {
  double exec_s = 0, issue_s = 0;
  unsigned long long rounds = 0;
};

}  // namespace

int main(int argc, char** argv) {
  double seconds = 10, block_ms = 200;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--seconds")) seconds = std::atof(argv[i + 1]);
    if (!std::strcmp(argv[i], "--block-ms")) block_ms = std::atof(argv[i + 1]);
  }
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  unsigned long long* d_count;
  CHECK(cudaMalloc(&d_count, sizeof *d_count));
  CHECK(cudaMemset(d_count, 0, sizeof *d_count));

  cudaGraph_t g;
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int k = 0; k < kKernels; k++) bump<<<1, 1, 0, s>>>(d_count);
  CHECK(cudaStreamEndCapture(s, &g));
  size_t nodes = 0;
  CHECK(cudaGraphGetNodes(g, nullptr, &nodes));
  if (nodes != kKernels) {
    std::fprintf(stderr, "FAIL: captured %zu nodes\n", nodes);
    return 1;
  }
  cudaGraphExec_t x;
  CHECK(cudaGraphInstantiate(&x, g, 0));

  // Warm-up both ways.
  for (int k = 0; k < kKernels; k++) bump<<<1, 1, 0, s>>>(d_count);
  CHECK(cudaGraphLaunch(x, s));
  CHECK(cudaStreamSynchronize(s));
  unsigned long long issued = 2 * kKernels;

  Tally single, graph;
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  const auto block = std::chrono::duration<double, std::milli>(block_ms);
  bool use_graph = false;
  while (Clock::now() < end) {
    Tally& t = use_graph ? graph : single;
    const auto t0 = Clock::now();
    const auto stop = t0 + block;
    double issue = 0;
    unsigned long long rounds = 0;
    do {
      const auto i0 = Clock::now();
      if (use_graph) {
        CHECK(cudaGraphLaunch(x, s));
      } else {
        for (int k = 0; k < kKernels; k++) bump<<<1, 1, 0, s>>>(d_count);
      }
      issue += std::chrono::duration<double>(Clock::now() - i0).count();
      rounds++;
    } while (Clock::now() < stop);
    CHECK(cudaStreamSynchronize(s));
    t.exec_s += std::chrono::duration<double>(Clock::now() - t0).count();
    t.issue_s += issue;
    t.rounds += rounds;
    issued += rounds * kKernels;
    use_graph = !use_graph;
  }
  CHECK(cudaGetLastError());
  unsigned long long count = 0;
  CHECK(cudaMemcpy(&count, d_count, sizeof count, cudaMemcpyDeviceToHost));
  if (count != issued) {
    std::fprintf(stderr, "FAIL: the device counted %llu kernels of %llu issued\n", count, issued);
    return 1;
  }
  CHECK(cudaGraphExecDestroy(x));
  CHECK(cudaGraphDestroy(g));
  CHECK(cudaFree(d_count));

  const double single_kps = single.rounds * kKernels / single.exec_s;
  const double graph_kps = graph.rounds * kKernels / graph.exec_s;
  std::printf("graph_launches=%llu\n", graph.rounds);
  std::printf("single_kernels_per_s=%.0f\n", single_kps);
  std::printf("graph_kernels_per_s=%.0f\n", graph_kps);
  std::printf("graph_launches_per_s=%.0f\n", graph.rounds / graph.exec_s);
  std::printf("single_issue_ns_per_100=%.0f\n", single.issue_s / single.rounds * 1e9);
  std::printf("graph_issue_ns_per_100=%.0f\n", graph.issue_s / graph.rounds * 1e9);
  std::printf("bench_graph: 100-kernel graph %.0f graph launches/s = %.0f kernels/s; the same 100 kernels one by "
              "one %.0f kernels/s (x%.2f); client issue cost per 100 kernels: %.0f ns as one graph launch, %.0f ns "
              "as 100 launches; %llu kernels checked on the device\n",
              graph.rounds / graph.exec_s, graph_kps, single_kps, graph_kps / single_kps,
              graph.issue_s / graph.rounds * 1e9, single.issue_s / single.rounds * 1e9, count);
  return 0;
}
