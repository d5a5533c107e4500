// cuBLASLt and cuFFT inside CUDA graphs, as training and inference loops
// use them (PyTorch's linear layers are cublasLtMatmul with a bias epilogue):
// a layer D = relu(A B + bias) and a batched real FFT of D's columns,
// captured from a stream once with their input and output copies, then
// replayed with new inputs on the capture stream and on another stream.
// Checked against host loops; the captured graph must hold one kernel node
// per library call, as CUDA reports library kernels.
#include <cublasLt.h>
#include <cufft.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "check.cuh"

#define CK(call) CHECK(call)
#define CB(call) CHECK_STATUS(call, CUBLAS_STATUS_SUCCESS)
#define CF(call) CHECK_STATUS(call, CUFFT_SUCCESS)

constexpr int M = 64, N = 32, K = 48;  // column-major: A M x K, B K x N, D M x N
constexpr int BINS = M / 2 + 1;        // each column of D transformed (length M)

static void fill(std::vector<float>& v, unsigned seed) {
  srand(seed);
  for (auto& e : v) e = float(rand() % 2001 - 1000) / 1000.f;
}

// D = relu(A B + bias), then the DFT of each column of D.
static void reference(const std::vector<float>& A, const std::vector<float>& B, const std::vector<float>& bias,
                      std::vector<float>& D, std::vector<double>& re, std::vector<double>& im) {
  D.assign(M * N, 0.f);
  for (int j = 0; j < N; j++)
    for (int i = 0; i < M; i++) {
      double s = 0;
      for (int k = 0; k < K; k++) s += double(A[i + k * M]) * B[k + j * K];
      float v = float(s) + bias[i];
      D[i + j * M] = v > 0.f ? v : 0.f;
    }
  re.assign(BINS * N, 0), im.assign(BINS * N, 0);
  for (int j = 0; j < N; j++)
    for (int f = 0; f < BINS; f++)
      for (int t = 0; t < M; t++) {
        double a = -2 * M_PI * double(f) * t / M;
        re[f + j * BINS] += D[t + j * M] * std::cos(a);
        im[f + j * BINS] += D[t + j * M] * std::sin(a);
      }
}

int main() {
  cudaStream_t s, other;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CK(cudaStreamCreate(&other));
  cublasLtHandle_t lt;
  CB(cublasLtCreate(&lt));
  cufftHandle plan;
  CF(cufftPlan1d(&plan, M, CUFFT_R2C, N));
  CF(cufftSetStream(plan, s));

  std::vector<float> A(M * K), B(K * N), bias(M), D;
  std::vector<double> re, im;
  fill(A, 1), fill(bias, 2);
  float *dA, *dB, *dbias, *dD, *hB, *hD;
  cufftComplex *dF, *hF;
  void* ws;
  const size_t ws_size = 1 << 20;
  CK(cudaMalloc(&dA, A.size() * 4));
  CK(cudaMalloc(&dB, B.size() * 4));
  CK(cudaMalloc(&dbias, bias.size() * 4));
  CK(cudaMalloc(&dD, M * N * 4));
  CK(cudaMalloc(&dF, BINS * N * sizeof(cufftComplex)));
  CK(cudaMalloc(&ws, ws_size));
  CK(cudaMallocHost(&hB, B.size() * 4));  // pinned: the copies stay inside the graph
  CK(cudaMallocHost(&hD, M * N * 4));
  CK(cudaMallocHost(&hF, BINS * N * sizeof(cufftComplex)));
  CK(cudaMemcpy(dA, A.data(), A.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dbias, bias.data(), bias.size() * 4, cudaMemcpyHostToDevice));

  cublasLtMatmulDesc_t op;
  CB(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const uint32_t epi = CUBLASLT_EPILOGUE_RELU_BIAS;
  CB(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
  const float* bias_ptr = dbias;
  CB(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_ptr, sizeof bias_ptr));
  cublasLtMatrixLayout_t la, lb, ld;
  CB(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, M, K, M));
  CB(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, K, N, K));
  CB(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, M, N, M));

  CK(cudaMemset(dD, 0xff, M * N * 4));

  // ---- capture: copy in, the layer, the FFT, copies out
  const float one = 1.f, zero = 0.f;
  cudaGraph_t g;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  CK(cudaMemcpyAsync(dB, hB, B.size() * 4, cudaMemcpyHostToDevice, s));
  CB(cublasLtMatmul(lt, op, &one, dA, la, dB, lb, &zero, dD, ld, dD, ld, nullptr, ws, ws_size, s));
  CF(cufftExecR2C(plan, dD, dF));
  CK(cudaMemcpyAsync(hD, dD, M * N * 4, cudaMemcpyDeviceToHost, s));
  CK(cudaMemcpyAsync(hF, dF, BINS * N * sizeof(cufftComplex), cudaMemcpyDeviceToHost, s));
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
  EXPECT(nodes == 5 && kernels == 2, "captured %zu nodes (%d kernels), want 5 (2)", nodes, kernels);
  cudaGraphExec_t ge;
  CK(cudaGraphInstantiate(&ge, g, 0));

  // Capturing ran nothing: the layer's output still holds the NaNs set before.
  std::vector<float> before(M * N);
  CK(cudaMemcpy(before.data(), dD, M * N * 4, cudaMemcpyDeviceToHost));
  for (float v : before) EXPECT(std::isnan(v), "the captured matmul ran at capture time");

  double worst_d = 0, worst_f = 0;
  for (int round = 0; round < 4; round++) {
    fill(B, 100 + round);
    for (size_t i = 0; i < B.size(); i++) hB[i] = B[i];
    cudaStream_t on = round % 2 ? other : s;  // the launch stream, not the captured one, runs it
    CK(cudaGraphLaunch(ge, on));
    CK(cudaStreamSynchronize(on));
    reference(A, B, bias, D, re, im);
    double scale_d = 0, scale_f = 0;
    for (float v : D) scale_d = std::fmax(scale_d, std::fabs(v));
    for (size_t i = 0; i < re.size(); i++) scale_f = std::fmax(scale_f, std::hypot(re[i], im[i]));
    for (int i = 0; i < M * N; i++) worst_d = std::fmax(worst_d, std::fabs(hD[i] - D[i]) / scale_d);
    for (int i = 0; i < BINS * N; i++)
      worst_f = std::fmax(worst_f, std::hypot(hF[i].x - re[i], hF[i].y - im[i]) / scale_f);
    EXPECT(worst_d <= 1e-5 && worst_f <= 1e-5, "replay %d: max relative error %g (layer), %g (FFT)", round, worst_d,
           worst_f);
  }

  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
  cublasLtMatrixLayoutDestroy(la), cublasLtMatrixLayoutDestroy(lb), cublasLtMatrixLayoutDestroy(ld);
  cublasLtMatmulDescDestroy(op);
  CF(cufftDestroy(plan));
  CB(cublasLtDestroy(lt));
  std::printf("lt/fft capture: PASS (4 replays on 2 streams; max relative error %.2g layer, %.2g FFT)\n", worst_d,
              worst_f);
  return 0;
}
