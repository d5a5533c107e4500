// Graph memory, the way training loops capture their step: cudaMallocAsync /
// cudaFreeAsync inside a stream capture become mem-alloc / mem-free nodes,
// and the explicit API builds the same (alloc -> kernels -> copy -> free).
// Checks results over repeated launches, the node parameters, the fixed
// addresses, the graph-memory attributes, an allocation that outlives its
// graph's launch (freed by cudaFreeAsync, then relaunched), the launch
// refused while an allocation is still live, cudaGraphInstantiateFlagAutoFreeOnLaunch,
// and the rules CUDA gives graphs with memory nodes.
#include <cstdint>
#include <vector>
#include "check.cuh"

__global__ void fill(float* t, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) t[i] = a * float(i);
}
__global__ void axpy(const float* x, float* y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += a * x[i];
}

constexpr int N = 4096, T = 256, B = N / T;

static uint64_t graph_attr(cudaGraphMemAttributeType a) {
  uint64_t v = ~0ull;
  CHECK(cudaDeviceGetGraphMemAttribute(0, a, &v));
  return v;
}

// y = y0 + 2 * (scale * i): a temporary made, used and freed inside the graph.
static void captured_temporary() {
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  float *y, *h;
  CHECK(cudaMalloc(&y, N * sizeof(float)));
  CHECK(cudaMallocHost(&h, N * sizeof(float)));

  float* tmp = nullptr;
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  CHECK(cudaMallocAsync(&tmp, N * sizeof(float), s));
  EXPECT(tmp != nullptr, "cudaMallocAsync in capture gave no address");
  fill<<<B, T, 0, s>>>(tmp, 3.0f, N);
  CHECK(cudaGetLastError());
  axpy<<<B, T, 0, s>>>(tmp, y, 2.0f, N);
  CHECK(cudaGetLastError());
  CHECK(cudaFreeAsync(tmp, s));
  CHECK(cudaMemcpyAsync(h, y, N * sizeof(float), cudaMemcpyDeviceToHost, s));
  cudaGraph_t g;
  CHECK(cudaStreamEndCapture(s, &g));

  // The captured graph: alloc, two kernels, free, copy, in that order of types.
  size_t count = 0;
  CHECK(cudaGraphGetNodes(g, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  CHECK(cudaGraphGetNodes(g, nodes.data(), &count));
  int allocs = 0, frees = 0;
  for (auto n : nodes) {
    cudaGraphNodeType t;
    CHECK(cudaGraphNodeGetType(n, &t));
    if (t == cudaGraphNodeTypeMemAlloc) {
      allocs++;
      cudaMemAllocNodeParams p{};
      CHECK(cudaGraphMemAllocNodeGetParams(n, &p));
      EXPECT(p.dptr == tmp && p.bytesize == N * sizeof(float), "alloc node params %p %zu", p.dptr, p.bytesize);
      EXPECT(p.poolProps.location.type == cudaMemLocationTypeDevice, "alloc node location");
    }
    if (t == cudaGraphNodeTypeMemFree) {
      frees++;
      void* d = nullptr;
      CHECK(cudaGraphMemFreeNodeGetParams(n, &d));
      EXPECT(d == tmp, "free node frees %p, not %p", d, (void*)tmp);
    }
  }
  EXPECT(count == 5 && allocs == 1 && frees == 1, "captured %zu nodes, %d allocs, %d frees", count, allocs, frees);
  EXPECT(graph_attr(cudaGraphMemAttrReservedMemCurrent) >= N * sizeof(float), "reserved graph memory not counted");

  cudaGraphExec_t x;
  CHECK(cudaGraphInstantiate(&x, g, 0));
  // A graph with memory nodes has one executable graph at a time.
  cudaGraphExec_t x2;
  EXPECT(cudaGraphInstantiate(&x2, g, 0) != cudaSuccess, "second instantiation of a graph with memory nodes");
  cudaGetLastError();
  cudaGraph_t clone;
  EXPECT(cudaGraphClone(&clone, g) == cudaErrorNotSupported, "clone of a graph with memory nodes");
  cudaGetLastError();

  CHECK(cudaMemset(y, 0, N * sizeof(float)));
  for (int launch = 1; launch <= 5; launch++) {
    CHECK(cudaGraphLaunch(x, s));
    CHECK(cudaStreamSynchronize(s));
    for (int i = 0; i < N; i++) {
      float want = float(launch) * 2.0f * 3.0f * float(i);
      EXPECT(h[i] == want, "launch %d: y[%d] = %g, want %g", launch, i, h[i], want);
    }
    // Freed inside the graph: nothing stays in use after the launch.
    EXPECT(graph_attr(cudaGraphMemAttrUsedMemCurrent) == 0, "graph memory still in use after launch %d", launch);
  }
  EXPECT(graph_attr(cudaGraphMemAttrUsedMemHigh) >= N * sizeof(float), "high watermark not kept");
  uint64_t zero = 0;
  CHECK(cudaDeviceSetGraphMemAttribute(0, cudaGraphMemAttrUsedMemHigh, &zero));
  EXPECT(graph_attr(cudaGraphMemAttrUsedMemHigh) == 0, "high watermark not reset");
  CHECK(cudaGraphExecDestroy(x));
  CHECK(cudaGraphDestroy(g));
  CHECK(cudaDeviceGraphMemTrim(0));
  EXPECT(graph_attr(cudaGraphMemAttrReservedMemCurrent) == 0, "graph memory kept after its graph was destroyed");
  CHECK(cudaFreeHost(h));
  CHECK(cudaFree(y));
  CHECK(cudaStreamDestroy(s));
}

// Explicit API; the allocation outlives the launch and is read by the stream
// after it, then freed with cudaFreeAsync; a second launch before that free is refused.
static void explicit_outliving() {
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  cudaGraph_t g;
  CHECK(cudaGraphCreate(&g, 0));
  cudaMemAllocNodeParams ap{};
  ap.poolProps.allocType = cudaMemAllocationTypePinned;
  ap.poolProps.location.type = cudaMemLocationTypeDevice;
  ap.poolProps.location.id = 0;
  ap.bytesize = N * sizeof(float);
  cudaGraphNode_t alloc, k1;
  CHECK(cudaGraphAddMemAllocNode(&alloc, g, nullptr, 0, &ap));
  EXPECT(ap.dptr != nullptr, "no address from cudaGraphAddMemAllocNode");
  float* t = static_cast<float*>(ap.dptr);
  float a = 0.5f;
  int n = N;
  void* args[] = {&t, &a, &n};
  cudaKernelNodeParams kp{};
  kp.func = reinterpret_cast<void*>(fill);
  kp.gridDim = dim3(B);
  kp.blockDim = dim3(T);
  kp.kernelParams = args;
  CHECK(cudaGraphAddKernelNode(&k1, g, &alloc, 1, &kp));

  // Bad parameters are refused and allocate nothing.
  cudaMemAllocNodeParams bad = ap;
  bad.poolProps.location.id = 7;
  cudaGraphNode_t dummy;
  EXPECT(cudaGraphAddMemAllocNode(&dummy, g, nullptr, 0, &bad) == cudaErrorInvalidValue, "alloc on device 7");
  cudaGetLastError();
  float* plain;
  CHECK(cudaMalloc(&plain, 64));
  EXPECT(cudaGraphAddMemFreeNode(&dummy, g, nullptr, 0, plain) == cudaErrorInvalidValue,
         "free node for memory no graph allocated");
  cudaGetLastError();
  // Memory nodes fix the graph's shape.
  EXPECT(cudaGraphDestroyNode(k1) == cudaErrorNotSupported, "node deleted from a graph with memory nodes");
  cudaGetLastError();

  cudaGraphExec_t x;
  CHECK(cudaGraphInstantiate(&x, g, 0));
  std::vector<float> h(N);
  for (int round = 0; round < 3; round++) {
    CHECK(cudaGraphLaunch(x, s));
    EXPECT(graph_attr(cudaGraphMemAttrUsedMemCurrent) == N * sizeof(float), "live allocation not counted");
    // Still live: launching again must fail.
    EXPECT(cudaGraphLaunch(x, s) == cudaErrorInvalidValue, "relaunch with the allocation still live");
    cudaGetLastError();
    CHECK(cudaMemcpyAsync(h.data(), t, N * sizeof(float), cudaMemcpyDeviceToHost, s));
    CHECK(cudaFreeAsync(t, s));
    CHECK(cudaStreamSynchronize(s));
    for (int i = 0; i < N; i++) EXPECT(h[i] == 0.5f * float(i), "round %d: t[%d] = %g", round, i, h[i]);
    EXPECT(graph_attr(cudaGraphMemAttrUsedMemCurrent) == 0, "freed allocation still counted");
    // Freeing it again is an error, not a double free.
    EXPECT(cudaFree(t) == cudaErrorInvalidValue, "graph allocation freed twice");
    cudaGetLastError();
  }
  CHECK(cudaGraphExecDestroy(x));

  // AutoFreeOnLaunch: each launch frees what the previous one left live.
  CHECK(cudaGraphInstantiateWithFlags(&x, g, cudaGraphInstantiateFlagAutoFreeOnLaunch));
  for (int round = 0; round < 3; round++) CHECK(cudaGraphLaunch(x, s));
  CHECK(cudaMemcpyAsync(h.data(), t, N * sizeof(float), cudaMemcpyDeviceToHost, s));
  CHECK(cudaStreamSynchronize(s));
  for (int i = 0; i < N; i++) EXPECT(h[i] == 0.5f * float(i), "auto-free: t[%d] = %g", i, h[i]);
  CHECK(cudaGraphExecDestroy(x));
  CHECK(cudaGraphDestroy(g));
  // The last launch left it live: it stays until freed, then is given back.
  EXPECT(graph_attr(cudaGraphMemAttrReservedMemCurrent) == N * sizeof(float), "live allocation dropped with its graph");
  CHECK(cudaFree(t));
  EXPECT(graph_attr(cudaGraphMemAttrReservedMemCurrent) == 0, "graph memory not given back after cudaFree");
  CHECK(cudaFree(plain));
  CHECK(cudaStreamDestroy(s));
}

int main() {
  captured_temporary();
  explicit_outliving();
  std::printf("graph_mem: PASS\n");
  return 0;
}
