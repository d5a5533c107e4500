// Programmatic dependent launch as CUB and hand-written pipelines use it:
// Thrust merge sorts (a comparator that is not a plain less-than, and
// stable_sort_by_key), whose CUB kernels are launched with
// ProgrammaticStreamSerialization; a producer/consumer pair launched with
// cudaLaunchKernelEx, the consumer allowed to start early and waiting for the
// producer's results in cudaGridDependencySynchronize(); a programmatic event
// and a launch-completion event recorded by the launch; the same pair
// captured into a graph. Results checked on the host.
#include <thrust/device_vector.h>
#include <thrust/sort.h>

#include <algorithm>
#include <numeric>
#include <vector>
#include "check.cuh"

struct ByLastDigitThenValue {
  __host__ __device__ bool operator()(int a, int b) const {
    return (a % 10) != (b % 10) ? (a % 10) < (b % 10) : a < b;
  }
};
struct ByHundreds {  // many equal keys: stability shows
  __host__ __device__ bool operator()(int a, int b) const { return a / 100 < b / 100; }
};

// The PDL device functions exist from sm_90; the compute_90 PTX has them.
__device__ void wait_for_primary() {
#if __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();
#endif
}
__device__ void let_dependents_start() {
#if __CUDA_ARCH__ >= 900
  cudaTriggerProgrammaticLaunchCompletion();
#endif
}

__global__ void produce(int* a, int n, int k) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) a[i] = i * k + 1;
  __threadfence();
  let_dependents_start();
}
__global__ void consume(const int* a, int* b, int n) {
  wait_for_primary();  // the producer's writes are visible after this
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) b[i] = a[n - 1 - i] * 2;
}

static void check_pair(const int* b, int n, int k, const char* what) {
  std::vector<int> hb(n);
  CHECK(cudaMemcpy(hb.data(), b, n * sizeof(int), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; i++) EXPECT(hb[i] == ((n - 1 - i) * k + 1) * 2, "%s: b[%d] = %d", what, i, hb[i]);
}

int main() {
  // Merge sort with a custom comparator, ~1M keys.
  const int big = 1 << 20;
  std::vector<int> h(big);
  for (int i = 0; i < big; i++) h[i] = int((i * 2654435761u) % 1000003u);
  {
    thrust::device_vector<int> d(h.begin(), h.end());
    thrust::sort(d.begin(), d.end(), ByLastDigitThenValue());
    CHECK(cudaGetLastError());
    std::vector<int> got(big), want = h;
    thrust::copy(d.begin(), d.end(), got.begin());
    std::sort(want.begin(), want.end(), ByLastDigitThenValue());
    EXPECT(got == want, "merge sort with a custom comparator differs from the host's");
  }
  // stable_sort_by_key: equal keys keep their values' order.
  {
    std::vector<int> vals(big);
    std::iota(vals.begin(), vals.end(), 0);
    thrust::device_vector<int> dk(h.begin(), h.end()), dv(vals.begin(), vals.end());
    thrust::stable_sort_by_key(dk.begin(), dk.end(), dv.begin(), ByHundreds());
    CHECK(cudaGetLastError());
    std::vector<int> order(big);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return ByHundreds()(h[x], h[y]); });
    std::vector<int> gk(big), gv(big);
    thrust::copy(dk.begin(), dk.end(), gk.begin());
    thrust::copy(dv.begin(), dv.end(), gv.begin());
    for (int i = 0; i < big; i++)
      EXPECT(gv[i] == order[i] && gk[i] == h[order[i]], "stable_sort_by_key: [%d] = (%d, %d), want (%d, %d)", i, gk[i],
             gv[i], h[order[i]], order[i]);
  }

  const int n = 1 << 18;
  int *a, *b;
  CHECK(cudaMalloc(&a, n * sizeof(int)));
  CHECK(cudaMalloc(&b, n * sizeof(int)));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t prog_ev, done_ev;
  CHECK(cudaEventCreateWithFlags(&prog_ev, cudaEventDisableTiming));
  CHECK(cudaEventCreateWithFlags(&done_ev, cudaEventDisableTiming));
  produce<<<64, 256, 0, s>>>(a, n, 3);
  cudaLaunchAttribute attrs[3];
  attrs[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attrs[0].val.programmaticStreamSerializationAllowed = 1;
  attrs[1].id = cudaLaunchAttributeProgrammaticEvent;
  attrs[1].val.programmaticEvent.event = prog_ev;
  attrs[1].val.programmaticEvent.flags = 0;
  attrs[1].val.programmaticEvent.triggerAtBlockStart = 0;
  attrs[2].id = cudaLaunchAttributeLaunchCompletionEvent;
  attrs[2].val.launchCompletionEvent.event = done_ev;
  attrs[2].val.launchCompletionEvent.flags = 0;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(64);
  cfg.blockDim = dim3(256);
  cfg.stream = s;
  cfg.attrs = attrs;
  cfg.numAttrs = 3;
  CHECK(cudaLaunchKernelEx(&cfg, consume, (const int*)a, b, n));
  CHECK(cudaEventSynchronize(prog_ev));
  CHECK(cudaEventSynchronize(done_ev));
  CHECK(cudaStreamSynchronize(s));
  check_pair(b, n, 3, "launch");

  // A chain: each consumer depends on the kernel right before it.
  cfg.numAttrs = 1;
  for (int k = 4; k < 8; k++) {
    produce<<<32, 128, 0, s>>>(a, n, k);
    CHECK(cudaLaunchKernelEx(&cfg, consume, (const int*)a, b, n));
  }
  CHECK(cudaStreamSynchronize(s));
  check_pair(b, n, 7, "chain");
  // The attribute off (0) is an ordinary launch.
  attrs[0].val.programmaticStreamSerializationAllowed = 0;
  produce<<<16, 128, 0, s>>>(a, n, 9);
  CHECK(cudaLaunchKernelEx(&cfg, consume, (const int*)a, b, n));
  CHECK(cudaStreamSynchronize(s));
  check_pair(b, n, 9, "attribute 0");
  attrs[0].val.programmaticStreamSerializationAllowed = 1;

  // Captured into a graph, as CUB's launches are when a stream is captured.
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  produce<<<64, 256, 0, s>>>(a, n, 11);
  CHECK(cudaLaunchKernelEx(&cfg, consume, (const int*)a, b, n));
  CHECK(cudaStreamEndCapture(s, &g));
  CHECK(cudaGraphInstantiate(&ge, g, 0));
  CHECK(cudaMemset(b, 0, n * sizeof(int)));
  CHECK(cudaGraphLaunch(ge, s));
  CHECK(cudaStreamSynchronize(s));
  check_pair(b, n, 11, "graph");
  CHECK(cudaGraphExecDestroy(ge));
  CHECK(cudaGraphDestroy(g));

  // A programmatic event must be given one.
  cfg.numAttrs = 3;
  attrs[1].val.programmaticEvent.event = nullptr;
  EXPECT(cudaLaunchKernelEx(&cfg, consume, (const int*)a, b, n) == cudaErrorInvalidValue, "a null programmatic event");
  (void)cudaGetLastError();
  attrs[1].val.programmaticEvent.event = prog_ev;
  attrs[1].val.programmaticEvent.flags = cudaEventRecordExternal;
  EXPECT(cudaLaunchKernelEx(&cfg, consume, (const int*)a, b, n) == cudaErrorInvalidValue,
         "an external programmatic event record");
  (void)cudaGetLastError();
  CHECK(cudaEventDestroy(prog_ev));
  CHECK(cudaEventDestroy(done_ev));
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaFree(a));
  CHECK(cudaFree(b));
  std::printf("PASS pdl\n");
  return 0;
}
