// CUDA graphs built with the explicit API: a diamond of kernels, a child
// graph (device copy, a 4-byte-pattern memset, a kernel), a copy back to
// pinned memory, a host node checking the result, event record/wait
// nodes, and cudaGraphExecKernelNodeSetParams changing a kernel argument
// between launches. `graph_explicit dot PATH` writes the graph with
// cudaGraphDebugDotPrint and checks the file names the nodes.
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
#include "check.cuh"

__global__ void fill(float* a, float v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] = v + float(i % 3);
}
__global__ void scale(const float* x, float* y, float s, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * s;
}
__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

constexpr int N = 777;
constexpr int T = 64, B = (N + T - 1) / T;

struct Check {
  const float* out;
  float v;       // fill's value for the launch being checked
  int checked;   // launches the host node verified
  int bad;       // mismatches it saw
};

static float expected(float v, int i) { return (v + float(i % 3)) * 5.f + 1.5f; }

static void CUDART_CB verify(void* p) {
  auto* c = static_cast<Check*>(p);
  for (int i = 0; i < N; i++)
    if (c->out[i] != expected(c->v, i)) c->bad++;
  c->checked++;
}

struct Built {
  cudaGraph_t g, child;
  cudaGraphNode_t fill_node;
  float *d_a, *d_b, *d_c, *d_d, *d_e, *d_f, *h_out;
  cudaEvent_t before, after;
  Check check;
  int n_arg = N;
  float v = 1.f, two = 2.f, three = 3.f;
};

static void build(Built& b) {
  float** bufs[] = {&b.d_a, &b.d_b, &b.d_c, &b.d_d, &b.d_e, &b.d_f};
  for (auto** p : bufs) CHECK(cudaMalloc(p, N * sizeof(float)));
  CHECK(cudaMallocHost(&b.h_out, N * sizeof(float)));
  CHECK(cudaEventCreate(&b.before));
  CHECK(cudaEventCreate(&b.after));
  b.check = {b.h_out, 0.f, 0, 0};
  CHECK(cudaGraphCreate(&b.g, 0));

  // Diamond: fill -> {scale x2, scale x3} -> add.
  cudaGraphNode_t wait, fill_n, s2, s3, sum, child_n, back, host, rec, join;
  CHECK(cudaGraphAddEventWaitNode(&wait, b.g, nullptr, 0, b.before));
  cudaKernelNodeParams kp = {};
  void* fill_args[] = {&b.d_a, &b.v, &b.n_arg};
  kp.func = (void*)fill;
  kp.gridDim = dim3(B);
  kp.blockDim = dim3(T);
  kp.kernelParams = fill_args;
  CHECK(cudaGraphAddKernelNode(&fill_n, b.g, &wait, 1, &kp));
  b.fill_node = fill_n;
  void* s2_args[] = {&b.d_a, &b.d_b, &b.two, &b.n_arg};
  kp.func = (void*)scale;
  kp.kernelParams = s2_args;
  CHECK(cudaGraphAddKernelNode(&s2, b.g, &fill_n, 1, &kp));
  void* s3_args[] = {&b.d_a, &b.d_c, &b.three, &b.n_arg};
  kp.kernelParams = s3_args;
  CHECK(cudaGraphAddKernelNode(&s3, b.g, &fill_n, 1, &kp));
  void* add_args[] = {&b.d_b, &b.d_c, &b.d_d, &b.n_arg};
  kp.func = (void*)add;
  kp.kernelParams = add_args;
  cudaGraphNode_t both[] = {s2, s3};
  CHECK(cudaGraphAddKernelNode(&sum, b.g, both, 2, &kp));

  // Child graph: e = d (device copy); f = 1.5f (memset of 4-byte elements); e = e + f.
  CHECK(cudaGraphCreate(&b.child, 0));
  cudaGraphNode_t cp, ms, ca;
  CHECK(cudaGraphAddMemcpyNode1D(&cp, b.child, nullptr, 0, b.d_e, b.d_d, N * sizeof(float),
                                 cudaMemcpyDeviceToDevice));
  cudaMemsetParams msp = {};
  float onefive = 1.5f;
  msp.dst = b.d_f;
  std::memcpy(&msp.value, &onefive, sizeof onefive);
  msp.elementSize = 4;
  msp.width = N;
  msp.height = 1;
  CHECK(cudaGraphAddMemsetNode(&ms, b.child, nullptr, 0, &msp));
  void* ca_args[] = {&b.d_e, &b.d_f, &b.d_e, &b.n_arg};
  kp.kernelParams = ca_args;
  cudaGraphNode_t cdeps[] = {cp, ms};
  CHECK(cudaGraphAddKernelNode(&ca, b.child, cdeps, 2, &kp));
  CHECK(cudaGraphAddChildGraphNode(&child_n, b.g, &sum, 1, b.child));

  // Back to pinned memory, checked by a host node; an event after the copy.
  cudaMemcpy3DParms cpp = {};
  cpp.srcPtr = make_cudaPitchedPtr(b.d_e, N * sizeof(float), N, 1);
  cpp.dstPtr = make_cudaPitchedPtr(b.h_out, N * sizeof(float), N, 1);
  cpp.extent = make_cudaExtent(N * sizeof(float), 1, 1);
  cpp.kind = cudaMemcpyDeviceToHost;
  CHECK(cudaGraphAddMemcpyNode(&back, b.g, &child_n, 1, &cpp));
  cudaHostNodeParams hp = {verify, &b.check};
  CHECK(cudaGraphAddHostNode(&host, b.g, &back, 1, &hp));
  CHECK(cudaGraphAddEventRecordNode(&rec, b.g, &back, 1, b.after));
  cudaGraphNode_t ends[] = {host, rec};
  CHECK(cudaGraphAddEmptyNode(&join, b.g, ends, 2));
}

static void explicit_api() {
  Built b;
  build(b);
  size_t n = 0, edges = 0;
  CHECK(cudaGraphGetNodes(b.g, nullptr, &n));
  EXPECT(n == 10, "graph has %zu nodes", n);
  CHECK(cudaGraphGetEdges(b.g, nullptr, nullptr, nullptr, &edges));
  EXPECT(edges == 11, "graph has %zu edges", edges);
  cudaGraphNodeType t;
  CHECK(cudaGraphNodeGetType(b.fill_node, &t));
  EXPECT(t == cudaGraphNodeTypeKernel, "fill node type %d", int(t));
  cudaKernelNodeParams got = {};
  CHECK(cudaGraphKernelNodeGetParams(b.fill_node, &got));
  EXPECT(got.func == (void*)fill && got.gridDim.x == B && got.blockDim.x == T &&
             *static_cast<float*>(got.kernelParams[1]) == 1.f,
         "kernel node params");

  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  cudaGraphExec_t x;
  CHECK(cudaGraphInstantiate(&x, b.g, 0));
  // The graph may be destroyed once instantiated; its nodes still name the exec's nodes.
  cudaKernelNodeParams kp = {};
  kp.func = (void*)fill;
  kp.gridDim = dim3(B);
  kp.blockDim = dim3(T);
  for (int it = 0; it < 10; it++) {
    float v = float(it * 2 + 1);
    void* args[] = {&b.d_a, &v, &b.n_arg};
    kp.kernelParams = args;
    CHECK(cudaGraphExecKernelNodeSetParams(x, b.fill_node, &kp));
    b.check.v = v;
    CHECK(cudaEventRecord(b.before, s));
    CHECK(cudaGraphLaunch(x, s));
    CHECK(cudaEventSynchronize(b.after));
    CHECK(cudaStreamSynchronize(s));
    for (int i = 0; i < N; i++) EXPECT(b.h_out[i] == expected(v, i), "launch %d: out[%d] = %g", it, i, b.h_out[i]);
  }
  EXPECT(b.check.checked == 10 && b.check.bad == 0, "host node: %d checks, %d mismatches", b.check.checked,
         b.check.bad);

  // The graph itself still holds v = 1; a clone of it, instantiated, computes with that.
  cudaGraph_t clone;
  CHECK(cudaGraphClone(&clone, b.g));
  cudaGraphNode_t fill_in_clone;
  CHECK(cudaGraphNodeFindInClone(&fill_in_clone, b.fill_node, clone));
  float seven = 7.f;
  void* args7[] = {&b.d_a, &seven, &b.n_arg};
  kp.kernelParams = args7;
  CHECK(cudaGraphKernelNodeSetParams(fill_in_clone, &kp));
  cudaGraphExec_t xc;
  CHECK(cudaGraphInstantiateWithFlags(&xc, clone, 0));
  b.check.v = 7.f;
  CHECK(cudaGraphLaunch(xc, s));
  CHECK(cudaStreamSynchronize(s));
  for (int i = 0; i < N; i++) EXPECT(b.h_out[i] == expected(7.f, i), "clone: out[%d] = %g", i, b.h_out[i]);
  EXPECT(b.check.checked == 11 && b.check.bad == 0, "host node after clone");

  // Wrong use is refused.
  EXPECT(cudaGraphAddDependencies(b.g, &b.fill_node, &b.fill_node, nullptr, 1) == cudaErrorInvalidValue,
         "self edge");
  cudaGetLastError();

  CHECK(cudaGraphExecDestroy(xc));
  CHECK(cudaGraphExecDestroy(x));
  CHECK(cudaGraphDestroy(clone));
  CHECK(cudaGraphDestroy(b.child));
  CHECK(cudaGraphDestroy(b.g));
  CHECK(cudaStreamDestroy(s));
}

static void dot(const char* path) {
  Built b;
  build(b);
  CHECK(cudaGraphDebugDotPrint(b.g, path, cudaGraphDebugDotFlagsVerbose));
  std::ifstream f(path);
  EXPECT(f.good(), "no DOT file at %s", path);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string text = ss.str();
  EXPECT(text.find("digraph") != std::string::npos, "not a DOT graph:\n%s", text.c_str());
  for (const char* name : {"fill", "scale", "add", "MEMCPY", "MEMSET", "HOST", "EVENT_RECORD", "EVENT_WAIT", "->"})
    EXPECT(text.find(name) != std::string::npos, "DOT file lacks %s:\n%s", name, text.c_str());
  CHECK(cudaGraphDestroy(b.child));
  CHECK(cudaGraphDestroy(b.g));
}

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "dot") == 0) {
    dot(argv[2]);
    std::printf("PASS graph_explicit dot\n");
    return 0;
  }
  explicit_api();
  std::printf("PASS graph_explicit\n");
  return 0;
}
