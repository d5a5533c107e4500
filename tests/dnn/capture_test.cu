// cuDNN inside a CUDA graph, as a training or inference loop captures it:
// a convolution (padding 1, 3x3, 2 -> 4 channels), a ReLU and a max
// pooling on a stream, with their input and output copies, captured once
// and replayed with new inputs on the capture stream and on another
// stream; then dropout on a capturing stream, which a replay could not
// repeat faithfully (it must draw new numbers), refused and the capture
// invalidated. Checked against host loops.
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "check.cuh"

#define CK(call) CHECK(call)
#define CD(call) CHECK_STATUS(call, CUDNN_STATUS_SUCCESS)

constexpr int N = 2, C = 2, H = 8, W = 8, K = 4, R = 3;  // output K x H x W, pooled to H/2 x W/2

static void fill(std::vector<float>& v, unsigned seed) {
  srand(seed);
  for (auto& e : v) e = float(rand() % 2001 - 1000) / 1000.f;
}

// pool(relu(conv(x, w))), NCHW.
static std::vector<float> reference(const std::vector<float>& x, const std::vector<float>& w) {
  std::vector<float> y(size_t(N) * K * H * W), p(size_t(N) * K * (H / 2) * (W / 2));
  for (int n = 0; n < N; n++)
    for (int k = 0; k < K; k++)
      for (int i = 0; i < H; i++)
        for (int j = 0; j < W; j++) {
          double s = 0;
          for (int c = 0; c < C; c++)
            for (int r = 0; r < R; r++)
              for (int q = 0; q < R; q++) {
                int ii = i + r - 1, jj = j + q - 1;
                if (ii >= 0 && ii < H && jj >= 0 && jj < W)
                  s += double(w[((k * C + c) * R + r) * R + q]) * x[((n * C + c) * H + ii) * W + jj];
              }
          y[((n * K + k) * H + i) * W + j] = s > 0 ? float(s) : 0.f;
        }
  for (int n = 0; n < N; n++)
    for (int k = 0; k < K; k++)
      for (int i = 0; i < H / 2; i++)
        for (int j = 0; j < W / 2; j++) {
          float m = -INFINITY;
          for (int a = 0; a < 2; a++)
            for (int b = 0; b < 2; b++) m = std::fmax(m, y[((n * K + k) * H + 2 * i + a) * W + 2 * j + b]);
          p[((n * K + k) * (H / 2) + i) * (W / 2) + j] = m;
        }
  return p;
}

int main() {
  cudaStream_t s, other;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CK(cudaStreamCreate(&other));
  cudnnHandle_t h;
  CD(cudnnCreate(&h));
  CD(cudnnSetStream(h, s));

  cudnnTensorDescriptor_t xd, yd, pd;
  cudnnFilterDescriptor_t wd;
  cudnnConvolutionDescriptor_t cd;
  cudnnActivationDescriptor_t ad;
  cudnnPoolingDescriptor_t pool;
  CD(cudnnCreateTensorDescriptor(&xd));
  CD(cudnnCreateTensorDescriptor(&yd));
  CD(cudnnCreateTensorDescriptor(&pd));
  CD(cudnnCreateFilterDescriptor(&wd));
  CD(cudnnCreateConvolutionDescriptor(&cd));
  CD(cudnnCreateActivationDescriptor(&ad));
  CD(cudnnCreatePoolingDescriptor(&pool));
  CD(cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, N, C, H, W));
  CD(cudnnSetTensor4dDescriptor(yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, N, K, H, W));
  CD(cudnnSetTensor4dDescriptor(pd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, N, K, H / 2, W / 2));
  CD(cudnnSetFilter4dDescriptor(wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, K, C, R, R));
  CD(cudnnSetConvolution2dDescriptor(cd, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  CD(cudnnSetActivationDescriptor(ad, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0));
  CD(cudnnSetPooling2dDescriptor(pool, CUDNN_POOLING_MAX, CUDNN_NOT_PROPAGATE_NAN, 2, 2, 0, 0, 2, 2));

  std::vector<float> x(size_t(N) * C * H * W), w(size_t(K) * C * R * R);
  fill(w, 1);
  const size_t ysz = size_t(N) * K * H * W, psz = ysz / 4;
  float *dx, *dw, *dy, *dp, *hx, *hp;
  CK(cudaMalloc(&dx, x.size() * 4));
  CK(cudaMalloc(&dw, w.size() * 4));
  CK(cudaMalloc(&dy, ysz * 4));
  CK(cudaMalloc(&dp, psz * 4));
  CK(cudaMallocHost(&hx, x.size() * 4));  // pinned: the copies stay inside the graph
  CK(cudaMallocHost(&hp, psz * 4));
  CK(cudaMemcpy(dw, w.data(), w.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemset(dp, 0xff, psz * 4));  // NaNs, until a replay writes the output

  const float one = 1.f, zero = 0.f;
  cudaGraph_t g;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  CK(cudaMemcpyAsync(dx, hx, x.size() * 4, cudaMemcpyHostToDevice, s));
  CD(cudnnConvolutionForward(h, &one, xd, dx, wd, dw, cd, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr, 0, &zero,
                             yd, dy));
  CD(cudnnActivationForward(h, ad, &one, yd, dy, &zero, yd, dy));
  CD(cudnnPoolingForward(h, pool, &one, yd, dy, &zero, pd, dp));
  CK(cudaMemcpyAsync(hp, dp, psz * 4, cudaMemcpyDeviceToHost, s));
  CK(cudaStreamEndCapture(s, &g));
  size_t nodes = 0;
  CK(cudaGraphGetNodes(g, nullptr, &nodes));
  EXPECT(nodes == 5, "captured %zu nodes, want 5 (copy, convolution, activation, pooling, copy)", nodes);
  std::vector<float> before(psz);
  CK(cudaMemcpy(before.data(), dp, psz * 4, cudaMemcpyDeviceToHost));
  for (float v : before) EXPECT(std::isnan(v), "a captured cuDNN call ran at capture time");

  cudaGraphExec_t ge;
  CK(cudaGraphInstantiate(&ge, g, 0));
  double worst = 0;
  for (int round = 0; round < 4; round++) {
    fill(x, 100 + round);
    for (size_t i = 0; i < x.size(); i++) hx[i] = x[i];
    cudaStream_t on = round % 2 ? other : s;  // the launch stream, not the captured one, runs it
    CK(cudaGraphLaunch(ge, on));
    CK(cudaStreamSynchronize(on));
    std::vector<float> ref = reference(x, w);
    double scale = 0;
    for (float v : ref) scale = std::fmax(scale, std::fabs(v));
    for (size_t i = 0; i < psz; i++) worst = std::fmax(worst, std::fabs(hp[i] - ref[i]) / scale);
    EXPECT(worst <= 1e-5, "replay %d: max relative error %g", round, worst);
  }

  // Dropout on a capturing stream: refused, the capture invalidated.
  size_t states_size = 0;
  CD(cudnnDropoutGetStatesSize(h, &states_size));
  void* states;
  CK(cudaMalloc(&states, states_size));
  cudnnDropoutDescriptor_t dd;
  CD(cudnnCreateDropoutDescriptor(&dd));
  CD(cudnnSetDropoutDescriptor(dd, h, 0.5f, states, states_size, 7));
  size_t reserve_size = 0;
  CD(cudnnDropoutGetReserveSpaceSize(yd, &reserve_size));
  void* reserve;
  CK(cudaMalloc(&reserve, reserve_size));
  CK(cudaStreamSynchronize(s));
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  cudnnStatus_t st = cudnnDropoutForward(h, dd, yd, dy, yd, dy, reserve, reserve_size);
  cudaGraph_t broken = nullptr;
  cudaError_t end = cudaStreamEndCapture(s, &broken);
  EXPECT(st != CUDNN_STATUS_SUCCESS && end == cudaErrorStreamCaptureInvalidated && !broken,
         "dropout in a capture: status %d, end %s", int(st), cudaGetErrorName(end));
  cudaGetLastError();
  // The handle works outside capture afterwards.
  CD(cudnnDropoutForward(h, dd, yd, dy, yd, dy, reserve, reserve_size));
  CK(cudaStreamSynchronize(s));

  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
  CD(cudnnDestroy(h));
  std::printf("dnn capture: PASS (4 replays on 2 streams, max relative error %.2g; dropout refused in capture)\n",
              worst);
  return 0;
}
