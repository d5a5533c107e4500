// cuBLAS inside CUDA graphs, the way inference and training loops use them:
// a two-layer MLP forward (GEMM, bias + ReLU kernel, GEMM, copy out) captured
// from a stream once and replayed with new inputs, on the capture stream and
// on another stream; a device-pointer-mode reduction captured too; a
// host-pointer-mode reduction (its result must come back now) refused and the
// capture invalidated, as CUDA's cuBLAS does. Checked against host loops.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "check.cuh"

#define CK(call) CHECK(call)
#define CB(call) CHECK_STATUS(call, CUBLAS_STATUS_SUCCESS)

__global__ void bias_relu(float* h, const float* b, int rows, int cols) {  // column-major rows x cols
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < rows * cols) {
    float v = h[i] + b[i % rows];
    h[i] = v > 0.f ? v : 0.f;
  }
}

constexpr int IN = 48, HID = 64, OUT = 10, BATCH = 32;

// Host reference: y = W2 * relu(W1 * x + b1), column-major.
static void reference(const std::vector<float>& W1, const std::vector<float>& b1, const std::vector<float>& W2,
                      const std::vector<float>& x, std::vector<float>& y) {
  std::vector<float> h(HID * BATCH);
  for (int c = 0; c < BATCH; c++)
    for (int r = 0; r < HID; r++) {
      double s = 0;
      for (int k = 0; k < IN; k++) s += double(W1[r + k * HID]) * x[k + c * IN];
      float v = float(s) + b1[r];
      h[r + c * HID] = v > 0.f ? v : 0.f;
    }
  y.assign(OUT * BATCH, 0.f);
  for (int c = 0; c < BATCH; c++)
    for (int r = 0; r < OUT; r++) {
      double s = 0;
      for (int k = 0; k < HID; k++) s += double(W2[r + k * OUT]) * h[k + c * HID];
      y[r + c * OUT] = float(s);
    }
}

static void fill(std::vector<float>& v, unsigned seed) {
  srand(seed);
  for (auto& e : v) e = float(rand() % 2001 - 1000) / 1000.f;
}

static int check(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  double worst = 0;
  for (size_t i = 0; i < want.size(); i++) worst = std::fmax(worst, std::fabs(double(got[i]) - want[i]));
  if (worst > 1e-3) {
    std::fprintf(stderr, "FAIL %s: max abs error %g\n", what, worst);
    return 1;
  }
  return 0;
}

int main() {
  cudaStream_t s, other;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CK(cudaStreamCreate(&other));
  cublasHandle_t h;
  CB(cublasCreate(&h));
  CB(cublasSetStream(h, s));

  std::vector<float> W1(HID * IN), b1(HID), W2(OUT * HID), x(IN * BATCH), y(OUT * BATCH), ref;
  fill(W1, 1), fill(b1, 2), fill(W2, 3);
  float *dW1, *db1, *dW2, *dx, *dh, *dy, *dnorm, *hx, *hy;
  CK(cudaMalloc(&dW1, W1.size() * 4));
  CK(cudaMalloc(&db1, b1.size() * 4));
  CK(cudaMalloc(&dW2, W2.size() * 4));
  CK(cudaMalloc(&dx, x.size() * 4));
  CK(cudaMalloc(&dh, HID * BATCH * 4));
  CK(cudaMalloc(&dy, y.size() * 4));
  CK(cudaMalloc(&dnorm, 4));
  CK(cudaMallocHost(&hx, x.size() * 4));  // pinned: the copies stay inside the graph
  CK(cudaMallocHost(&hy, y.size() * 4));
  CK(cudaMemcpy(dW1, W1.data(), W1.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(db1, b1.data(), b1.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dW2, W2.data(), W2.size() * 4, cudaMemcpyHostToDevice));

  // ---- capture the forward pass
  const float one = 1.f, zero = 0.f;
  cudaGraph_t g;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  CK(cudaMemcpyAsync(dx, hx, x.size() * 4, cudaMemcpyHostToDevice, s));
  CB(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, HID, BATCH, IN, &one, dW1, HID, dx, IN, &zero, dh, HID));
  bias_relu<<<(HID * BATCH + 127) / 128, 128, 0, s>>>(dh, db1, HID, BATCH);
  CK(cudaGetLastError());
  CB(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, OUT, BATCH, HID, &one, dW2, OUT, dh, HID, &zero, dy, OUT));
  // Device pointer mode: the norm lands in device memory, so it can be captured.
  CB(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_DEVICE));
  CB(cublasSnrm2(h, OUT * BATCH, dy, 1, dnorm));
  CB(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST));
  CK(cudaMemcpyAsync(hy, dy, y.size() * 4, cudaMemcpyDeviceToHost, s));
  CK(cudaStreamEndCapture(s, &g));

  size_t nodes = 0;
  CK(cudaGraphGetNodes(g, nullptr, &nodes));
  std::vector<cudaGraphNode_t> list(nodes);
  CK(cudaGraphGetNodes(g, list.data(), &nodes));
  int kernels = 0;
  for (auto n : list) {
    cudaGraphNodeType t;
    CK(cudaGraphNodeGetType(n, &t));
    kernels += t == cudaGraphNodeTypeKernel;
  }
  if (nodes != 6 || kernels != 4) {  // copy, gemm, bias_relu, gemm, nrm2, copy
    std::fprintf(stderr, "FAIL: captured %zu nodes (%d kernels), want 6 (4)\n", nodes, kernels);
    return 1;
  }
  cudaGraphExec_t ge;
  CK(cudaGraphInstantiate(&ge, g, 0));

  int bad = 0;
  for (int round = 0; round < 6; round++) {
    fill(x, 100 + round);
    for (size_t i = 0; i < x.size(); i++) hx[i] = x[i];
    cudaStream_t on = round % 2 ? other : s;  // the launch stream, not the captured one, runs it
    CK(cudaGraphLaunch(ge, on));
    CK(cudaStreamSynchronize(on));
    std::vector<float> got(hy, hy + y.size());
    reference(W1, b1, W2, x, ref);
    char what[64];
    std::snprintf(what, sizeof what, "graph replay %d", round);
    bad += check(got, ref, what);
    float norm = 0;
    CK(cudaMemcpy(&norm, dnorm, 4, cudaMemcpyDeviceToHost));
    double n2 = 0;
    for (float v : ref) n2 += double(v) * v;
    if (std::fabs(norm - std::sqrt(n2)) > 1e-3 * std::sqrt(n2)) {
      std::fprintf(stderr, "FAIL replay %d: captured nrm2 %g, want %g\n", round, norm, std::sqrt(n2));
      bad++;
    }
  }

  // ---- a host-pointer-mode reduction must answer now: refused in capture
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  float host_norm = -1;
  cublasStatus_t st = cublasSnrm2(h, OUT * BATCH, dy, 1, &host_norm);
  cudaGraph_t broken = nullptr;
  cudaError_t end = cudaStreamEndCapture(s, &broken);
  if (st == CUBLAS_STATUS_SUCCESS || end != cudaErrorStreamCaptureInvalidated || broken) {
    std::fprintf(stderr, "FAIL: host-mode nrm2 in capture: status %d, end %s\n", int(st), cudaGetErrorName(end));
    bad++;
  }
  cudaGetLastError();

  // The handle still works outside capture afterwards.
  CB(cublasSnrm2(h, OUT * BATCH, dy, 1, &host_norm));
  if (!(host_norm > 0)) bad++;

  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
  CB(cublasDestroy(h));
  if (bad) return 1;
  std::printf("blas capture: PASS (6 replays of a captured 2-layer MLP, 2 streams)\n");
  return 0;
}
