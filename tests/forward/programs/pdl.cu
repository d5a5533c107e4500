// Programmatic dependent launch as CUB and hand-written pipelines use it: a
// Thrust merge sort (a comparator that is not a plain less-than), and a
// producer/consumer pair launched with cudaLaunchKernelEx, the consumer
// allowed to start early (ProgrammaticStreamSerialization) and waiting for
// the producer's results in griddepcontrol.wait; a programmatic event and a
// launch-completion event recorded by the launch. Results checked on the host.
#include <thrust/device_vector.h>
#include <thrust/sort.h>

#include <algorithm>
#include <vector>
#include "check.cuh"

struct ByLastDigitThenValue {
  __host__ __device__ bool operator()(int a, int b) const {
    return (a % 10) != (b % 10) ? (a % 10) < (b % 10) : a < b;
  }
};

__device__ void wait_for_primary() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ void let_dependents_start() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__global__ void produce(int* a, int n) {
  let_dependents_start();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) a[i] = i * 3 + 1;
}
__global__ void consume(const int* a, int* b, int n) {
  wait_for_primary();  // the producer's writes are visible after this
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) b[i] = a[n - 1 - i] * 2;
}

int main() {
  const int n = 1 << 18;
  std::vector<int> h(n);
  for (int i = 0; i < n; i++) h[i] = int((i * 2654435761u) % 1000003u);
  thrust::device_vector<int> d(h.begin(), h.end());
  thrust::sort(d.begin(), d.end(), ByLastDigitThenValue());
  CHECK(cudaGetLastError());
  std::vector<int> got(n);
  thrust::copy(d.begin(), d.end(), got.begin());
  std::sort(h.begin(), h.end(), ByLastDigitThenValue());
  EXPECT(got == h, "merge sort with a custom comparator differs from the host's");

  int *a, *b;
  CHECK(cudaMalloc(&a, n * sizeof(int)));
  CHECK(cudaMalloc(&b, n * sizeof(int)));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t prog_ev, done_ev;
  CHECK(cudaEventCreateWithFlags(&prog_ev, cudaEventDisableTiming));
  CHECK(cudaEventCreateWithFlags(&done_ev, cudaEventDisableTiming));
  produce<<<64, 256, 0, s>>>(a, n);
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
  std::vector<int> hb(n);
  CHECK(cudaMemcpy(hb.data(), b, n * sizeof(int), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; i++) EXPECT(hb[i] == ((n - 1 - i) * 3 + 1) * 2, "b[%d] = %d", i, hb[i]);
  // A programmatic event must be given one.
  attrs[1].val.programmaticEvent.event = nullptr;
  EXPECT(cudaLaunchKernelEx(&cfg, consume, (const int*)a, b, n) == cudaErrorInvalidValue, "a null programmatic event");
  (void)cudaGetLastError();
  CHECK(cudaEventDestroy(prog_ev));
  CHECK(cudaEventDestroy(done_ev));
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaFree(a));
  CHECK(cudaFree(b));
  std::printf("PASS pdl\n");
  return 0;
}
