// CUDA graphs by stream capture: a sequence (copy in, three kernels, a
// memset, copy out) captured once and launched 100 times with new inputs;
// a fork/join capture across two streams through events; pageable host
// buffers in a captured graph; and the capture rules (queries, refused
// synchronisation, capture modes).
#include <cstring>
#include <vector>
#include "check.cuh"

__global__ void scale(const float* x, float* y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * a;
}
__global__ void add_const(float* y, float b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += b;
}
__global__ void square(const float* y, float* z, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) z[i] = y[i] * y[i];
}
__global__ void sum2(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

constexpr int N = 1000;
constexpr int ZEROED = 64;  // the memset clears z's first ZEROED floats
constexpr int T = 128, B = (N + T - 1) / T;

static void sequence() {
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  float *h_in, *h_out, *d_x, *d_y, *d_z;
  CHECK(cudaMallocHost(&h_in, N * sizeof(float)));
  CHECK(cudaMallocHost(&h_out, N * sizeof(float)));
  CHECK(cudaMalloc(&d_x, N * sizeof(float)));
  CHECK(cudaMalloc(&d_y, N * sizeof(float)));
  CHECK(cudaMalloc(&d_z, N * sizeof(float)));
  CHECK(cudaMemset(d_z, 0, N * sizeof(float)));
  for (int i = 0; i < N; i++) h_in[i] = 1.f;

  cudaStreamCaptureStatus st;
  CHECK(cudaStreamIsCapturing(s, &st));
  EXPECT(st == cudaStreamCaptureStatusNone, "status before capture %d", int(st));
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  CHECK(cudaStreamIsCapturing(s, &st));
  EXPECT(st == cudaStreamCaptureStatusActive, "status in capture %d", int(st));
  CHECK(cudaMemcpyAsync(d_x, h_in, N * sizeof(float), cudaMemcpyHostToDevice, s));
  scale<<<B, T, 0, s>>>(d_x, d_y, 3.f, N);
  CHECK(cudaGetLastError());
  add_const<<<B, T, 0, s>>>(d_y, 1.f, N);
  CHECK(cudaGetLastError());
  square<<<B, T, 0, s>>>(d_y, d_z, N);
  CHECK(cudaGetLastError());
  CHECK(cudaMemsetAsync(d_z, 0, ZEROED * sizeof(float), s));
  unsigned long long id = 0;
  size_t ndeps = 0;
  const cudaGraphNode_t* deps = nullptr;
  cudaGraph_t in_capture = nullptr;
  CHECK(cudaStreamGetCaptureInfo(s, &st, &id, &in_capture, &deps, nullptr, &ndeps));
  EXPECT(st == cudaStreamCaptureStatusActive && id != 0 && in_capture && ndeps == 1, "capture info");
  cudaGraphNodeType t;
  CHECK(cudaGraphNodeGetType(deps[0], &t));
  EXPECT(t == cudaGraphNodeTypeMemset, "last captured node type %d", int(t));
  CHECK(cudaMemcpyAsync(h_out, d_z, N * sizeof(float), cudaMemcpyDeviceToHost, s));
  cudaGraph_t g;
  CHECK(cudaStreamEndCapture(s, &g));
  CHECK(cudaStreamIsCapturing(s, &st));
  EXPECT(st == cudaStreamCaptureStatusNone, "status after capture %d", int(st));

  size_t n = 0;
  CHECK(cudaGraphGetNodes(g, nullptr, &n));
  EXPECT(n == 6, "captured %zu nodes", n);
  std::vector<cudaGraphNode_t> nodes(n);
  CHECK(cudaGraphGetNodes(g, nodes.data(), &n));
  const cudaGraphNodeType want[] = {cudaGraphNodeTypeMemcpy, cudaGraphNodeTypeKernel, cudaGraphNodeTypeKernel,
                                    cudaGraphNodeTypeKernel, cudaGraphNodeTypeMemset, cudaGraphNodeTypeMemcpy};
  for (size_t i = 0; i < n; i++) {
    CHECK(cudaGraphNodeGetType(nodes[i], &t));
    EXPECT(t == want[i], "node %zu has type %d", i, int(t));
  }
  // Nothing ran during capture.
  float probe = -1.f;
  CHECK(cudaMemcpy(&probe, d_z + ZEROED + 1, sizeof(float), cudaMemcpyDeviceToHost));
  EXPECT(probe == 0.f, "captured work ran: %g", probe);

  cudaGraphExec_t x;
  CHECK(cudaGraphInstantiate(&x, g, 0));
  for (int it = 0; it < 100; it++) {
    for (int i = 0; i < N; i++) h_in[i] = float((i * 7 + it * 13) % 101) * 0.25f - 3.f;
    CHECK(cudaGraphLaunch(x, s));
    CHECK(cudaStreamSynchronize(s));
    for (int i = 0; i < N; i++) {
      float y = h_in[i] * 3.f + 1.f;
      float want = i < ZEROED ? 0.f : y * y;
      EXPECT(h_out[i] == want, "launch %d: out[%d] = %g, want %g", it, i, h_out[i], want);
    }
  }
  CHECK(cudaGraphExecDestroy(x));
  CHECK(cudaGraphDestroy(g));
  CHECK(cudaFree(d_x));
  CHECK(cudaFree(d_y));
  CHECK(cudaFree(d_z));
  CHECK(cudaFreeHost(h_in));
  CHECK(cudaFreeHost(h_out));
  CHECK(cudaStreamDestroy(s));
}

// Fork/join: s1 forks s2 through an event, both compute, s1 joins s2 back.
static void fork_join() {
  cudaStream_t s1, s2;
  CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  cudaEvent_t fork, join;
  CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
  float *d_x, *d_a, *d_b, *d_c;
  CHECK(cudaMalloc(&d_x, N * sizeof(float)));
  CHECK(cudaMalloc(&d_a, N * sizeof(float)));
  CHECK(cudaMalloc(&d_b, N * sizeof(float)));
  CHECK(cudaMalloc(&d_c, N * sizeof(float)));
  std::vector<float> x(N), c(N);
  for (int i = 0; i < N; i++) x[i] = float(i % 17);
  CHECK(cudaMemcpy(d_x, x.data(), N * sizeof(float), cudaMemcpyHostToDevice));

  CHECK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeThreadLocal));
  CHECK(cudaEventRecord(fork, s1));
  CHECK(cudaStreamWaitEvent(s2, fork, 0));
  cudaStreamCaptureStatus st;
  CHECK(cudaStreamIsCapturing(s2, &st));
  EXPECT(st == cudaStreamCaptureStatusActive, "forked stream joins the capture");
  scale<<<B, T, 0, s1>>>(d_x, d_a, 2.f, N);
  CHECK(cudaGetLastError());
  scale<<<B, T, 0, s2>>>(d_x, d_b, 5.f, N);
  CHECK(cudaGetLastError());
  CHECK(cudaEventRecord(join, s2));
  CHECK(cudaStreamWaitEvent(s1, join, 0));
  sum2<<<B, T, 0, s1>>>(d_a, d_b, d_c, N);
  CHECK(cudaGetLastError());
  cudaGraph_t g;
  CHECK(cudaStreamEndCapture(s1, &g));
  CHECK(cudaStreamIsCapturing(s2, &st));
  EXPECT(st == cudaStreamCaptureStatusNone, "forked stream left the capture");

  size_t n = 0, roots = 0, edges = 0;
  CHECK(cudaGraphGetNodes(g, nullptr, &n));
  CHECK(cudaGraphGetRootNodes(g, nullptr, &roots));
  CHECK(cudaGraphGetEdges(g, nullptr, nullptr, nullptr, &edges));
  EXPECT(n == 3 && roots == 2 && edges == 2, "fork/join graph: %zu nodes, %zu roots, %zu edges", n, roots, edges);

  cudaGraphExec_t ex;
  CHECK(cudaGraphInstantiate(&ex, g, 0));
  for (int it = 0; it < 3; it++) {
    CHECK(cudaMemsetAsync(d_c, 0, N * sizeof(float), s1));
    CHECK(cudaGraphLaunch(ex, s1));
    CHECK(cudaStreamSynchronize(s1));
    CHECK(cudaMemcpy(c.data(), d_c, N * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < N; i++) EXPECT(c[i] == x[i] * 7.f, "fork/join c[%d] = %g", i, c[i]);
  }

  // A forked stream that never joins back: the capture fails as unjoined.
  CHECK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
  CHECK(cudaEventRecord(fork, s1));
  CHECK(cudaStreamWaitEvent(s2, fork, 0));
  scale<<<B, T, 0, s2>>>(d_x, d_b, 5.f, N);
  cudaGraph_t bad = nullptr;
  EXPECT(cudaStreamEndCapture(s1, &bad) == cudaErrorStreamCaptureUnjoined && bad == nullptr, "unjoined capture");
  cudaGetLastError();

  CHECK(cudaGraphExecDestroy(ex));
  CHECK(cudaGraphDestroy(g));
  CHECK(cudaEventDestroy(fork));
  CHECK(cudaEventDestroy(join));
  CHECK(cudaFree(d_x));
  CHECK(cudaFree(d_a));
  CHECK(cudaFree(d_b));
  CHECK(cudaFree(d_c));
  CHECK(cudaStreamDestroy(s1));
  CHECK(cudaStreamDestroy(s2));
}

// Pageable host buffers and a host function in a captured graph.
static int g_calls = 0;
static void CUDART_CB count_call(void* p) { *static_cast<int*>(p) += 1; }

static void pageable() {
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  std::vector<float> in(N), out(N);
  float* d;
  CHECK(cudaMalloc(&d, N * sizeof(float)));
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  CHECK(cudaMemcpyAsync(d, in.data(), N * sizeof(float), cudaMemcpyHostToDevice, s));
  add_const<<<B, T, 0, s>>>(d, 0.5f, N);
  CHECK(cudaGetLastError());
  CHECK(cudaLaunchHostFunc(s, count_call, &g_calls));
  CHECK(cudaMemcpyAsync(out.data(), d, N * sizeof(float), cudaMemcpyDeviceToHost, s));
  cudaGraph_t g;
  CHECK(cudaStreamEndCapture(s, &g));
  EXPECT(g_calls == 0, "host function ran during capture");
  cudaGraphExec_t x;
  CHECK(cudaGraphInstantiate(&x, g, 0));
  for (int it = 0; it < 5; it++) {
    for (int i = 0; i < N; i++) in[i] = float(i + it);
    CHECK(cudaGraphLaunch(x, s));
    CHECK(cudaStreamSynchronize(s));
    for (int i = 0; i < N; i++) EXPECT(out[i] == float(i + it) + 0.5f, "pageable out[%d] = %g", i, out[i]);
  }
  EXPECT(g_calls == 5, "host function ran %d times", g_calls);
  CHECK(cudaGraphExecDestroy(x));
  CHECK(cudaGraphDestroy(g));
  CHECK(cudaFree(d));
  CHECK(cudaStreamDestroy(s));
}

// What capture refuses: synchronising the capturing stream, the legacy
// stream, and (global mode) a synchronous copy; relaxed mode allows it.
static void rules() {
  // Non-blocking: the legacy stream's work is then no implicit dependency of the capture.
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  float* d;
  CHECK(cudaMalloc(&d, N * sizeof(float)));
  std::vector<float> h(N, 1.f);
  EXPECT(cudaStreamBeginCapture(0, cudaStreamCaptureModeGlobal) == cudaErrorStreamCaptureUnsupported,
         "legacy stream capture");
  cudaGetLastError();

  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  EXPECT(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaErrorIllegalState, "double capture");
  EXPECT(cudaStreamSynchronize(s) == cudaErrorStreamCaptureUnsupported, "sync in capture");
  cudaStreamCaptureStatus st;
  CHECK(cudaStreamIsCapturing(s, &st));
  EXPECT(st == cudaStreamCaptureStatusInvalidated, "invalidated capture");
  cudaGraph_t g = nullptr;
  EXPECT(cudaStreamEndCapture(s, &g) == cudaErrorStreamCaptureInvalidated && !g, "end invalidated capture");
  cudaGetLastError();

  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  cudaError_t e = cudaMemcpy(d, h.data(), N * sizeof(float), cudaMemcpyHostToDevice);
  EXPECT(e == cudaErrorStreamCaptureUnsupported || e == cudaErrorStreamCaptureImplicit,
         "synchronous copy in a global capture: %s", cudaGetErrorName(e));
  EXPECT(cudaStreamEndCapture(s, &g) == cudaErrorStreamCaptureInvalidated, "end after unsafe call");
  cudaGetLastError();

  // Relaxed (this thread's mode): the synchronous copy is allowed.
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  cudaStreamCaptureMode m = cudaStreamCaptureModeRelaxed;
  CHECK(cudaThreadExchangeStreamCaptureMode(&m));
  EXPECT(m == cudaStreamCaptureModeGlobal, "previous mode %d", int(m));
  CHECK(cudaMemcpy(d, h.data(), N * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaThreadExchangeStreamCaptureMode(&m));
  EXPECT(m == cudaStreamCaptureModeRelaxed, "restored mode %d", int(m));
  add_const<<<B, T, 0, s>>>(d, 1.f, N);
  CHECK(cudaStreamEndCapture(s, &g));
  CHECK(cudaGraphDestroy(g));
  // The copy happened, the captured kernel did not.
  std::vector<float> back(N);
  CHECK(cudaMemcpy(back.data(), d, N * sizeof(float), cudaMemcpyDeviceToHost));
  EXPECT(back[5] == 1.f, "after relaxed capture %g", back[5]);
  EXPECT(cudaStreamEndCapture(s, &g) == cudaErrorIllegalState, "end without capture");
  cudaGetLastError();
  CHECK(cudaFree(d));
  CHECK(cudaStreamDestroy(s));
}

int main() {
  sequence();
  fork_join();
  pageable();
  rules();
  std::printf("PASS graph_capture\n");
  return 0;
}
