// wh-cnn: a LeNet-5-like convolutional network trained on Fashion-MNIST with
// cuDNN for the convolutions, pooling and activations, cuBLAS for the dense
// layers, and its own kernels for the input gather, the dense layers' bias
// and ReLU, the softmax cross-entropy and SGD with momentum. Deterministic
// for a given seed and device. Built with `nvcc -cudart shared -lcudnn
// -lcublas`; runs natively on a GPU or forwarded through Wormhole
// (LD_LIBRARY_PATH=<build>/guest-lib) unchanged.
//
//   conv 5x5 (1->6, pad 2) -> bias -> ReLU -> maxpool 2x2
//   conv 5x5 (6->16)       -> bias -> ReLU -> maxpool 2x2
//   dense 400->120 -> ReLU -> dense 120->10 -> softmax cross-entropy
//
//   wh-cnn [--epochs N] [--batch B] [--subset N] [--test-subset N] [--lr X]
//          [--momentum X] [--constant-lr] [--seed S] [--data DIR]
//          [--loss-out FILE] [--plot FILE.png] [--no-progress] [--steps N] [--warmup N]
//
// --steps N runs N timed training steps (after --warmup steps, default 5)
// and prints `step_ms=<ms> calls_per_step=<n> device=<sim|gpu>` instead of
// training (for make bench-train).
//
// The learning rate follows a cosine from --lr down to 0 over the whole run
// (--constant-lr keeps it fixed).
//
// Layout: NCHW tensors, one sample after another; a batch of dense
// activations is therefore column-major features x batch for cuBLAS.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "train_common.cuh"

// Every CUDA runtime, cuDNN and cuBLAS call and every kernel launch goes
// through these, which count them (calls_per_step is what a step forwards).
static long g_calls = 0;
#define CK(x)                                                                                    \
  do {                                                                                           \
    g_calls++;                                                                                   \
    cudaError_t e_ = (x);                                                                        \
    if (e_ != cudaSuccess) {                                                                     \
      std::fprintf(stderr, "wh-cnn: %s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                              \
    }                                                                                            \
  } while (0)
#define CD(x)                                                                                    \
  do {                                                                                           \
    g_calls++;                                                                                   \
    cudnnStatus_t s_ = (x);                                                                      \
    if (s_ != CUDNN_STATUS_SUCCESS) {                                                            \
      std::fprintf(stderr, "wh-cnn: %s:%d %s: %s\n", __FILE__, __LINE__, #x, cudnnGetErrorString(s_)); \
      std::exit(1);                                                                              \
    }                                                                                            \
  } while (0)
#define CB(x)                                                                                    \
  do {                                                                                           \
    g_calls++;                                                                                   \
    cublasStatus_t s_ = (x);                                                                     \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                           \
      std::fprintf(stderr, "wh-cnn: %s:%d %s: cuBLAS status %d\n", __FILE__, __LINE__, #x, int(s_)); \
      std::exit(1);                                                                              \
    }                                                                                            \
  } while (0)
// (a launch counts once, through the cudaGetLastError that checks it)
#define LAUNCH(k, grid, block, ...)                \
  do {                                             \
    k<<<(grid), (block)>>>(__VA_ARGS__);           \
    CK(cudaGetLastError());                        \
  } while (0)

static int blocks(long n, int b = 256) { return int((n + b - 1) / b); }

// ------------------------------------------------------------------ kernels

// X[j] = normalise(images[idx[j]]) (28x28, one channel), labels too.
__global__ void gather(const unsigned char* __restrict__ img, const unsigned char* __restrict__ lab,
                       const int* __restrict__ idx, int batch, float* __restrict__ X, int* __restrict__ y) {
  long t = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= long(batch) * 784) return;
  int j = int(t / 784), p = int(t % 784), src = idx[j];
  X[t] = (float(img[long(src) * 784 + p]) / 255.0f - 0.2860f) / 0.3530f;
  if (p == 0) y[j] = lab[src];
}

// Z[:, j] += b; optionally ReLU (dense layers, column-major features x batch).
__global__ void bias_act(float* __restrict__ Z, const float* __restrict__ b, int feat, int batch, int relu) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= feat * batch) return;
  float v = Z[t] + b[t % feat];
  Z[t] = relu ? fmaxf(v, 0.0f) : v;
}

// Cross-entropy of the softmax probabilities P (10 x batch): the gradient of
// the mean loss w.r.t. the logits (P - onehot) / batch, and the summed loss.
__global__ void xent(const float* __restrict__ P, const int* __restrict__ y, int batch, float* __restrict__ dZ,
                     float* __restrict__ loss) {
  __shared__ float part[256];
  float l = 0;
  for (int j = threadIdx.x; j < batch; j += blockDim.x) {
    for (int c = 0; c < 10; c++) dZ[j * 10 + c] = (P[j * 10 + c] - (c == y[j] ? 1.0f : 0.0f)) / float(batch);
    l -= logf(fmaxf(P[j * 10 + y[j]], 1e-30f));
  }
  part[threadIdx.x] = l;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) *loss = part[0] / float(batch);
}

// Through a ReLU (A = relu output): dZ = dA * (A > 0), in place.
__global__ void relu_back(float* __restrict__ dA, const float* __restrict__ A, int n) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < n && A[t] <= 0.0f) dA[t] = 0.0f;
}

// Bias gradient of a dense layer: db[f] = sum_j dZ[f, j].
__global__ void row_sum(const float* __restrict__ dZ, int feat, int batch, float* __restrict__ db) {
  int f = blockIdx.x * blockDim.x + threadIdx.x;
  if (f >= feat) return;
  float s = 0;
  for (int j = 0; j < batch; j++) s += dZ[long(j) * feat + f];
  db[f] = s;
}

// Arg max over the 10 logits of each sample; counts the correct ones.
__global__ void score(const float* __restrict__ Z, const int* __restrict__ y, int batch, int* __restrict__ correct) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= batch) return;
  int best = 0;
  for (int c = 1; c < 10; c++)
    if (Z[j * 10 + c] > Z[j * 10 + best]) best = c;
  if (best == y[j]) atomicAdd(correct, 1);
}

struct Rng {  // splitmix64
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  float normal() {
    double u1 = (double(next() >> 11) + 0.5) / 9007199254740992.0, u2 = double(next() >> 11) / 9007199254740992.0;
    return float(std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }
};

// ------------------------------------------------------------------ network

struct Opts {
  int epochs = 4, batch = 64, subset = 0, test_subset = 0, steps = 0, warmup = 5;
  float lr = 0.03f, momentum = 0.9f;
  unsigned long long seed = 1;
  std::string data = "/usr/share/datasets/fashion-mnist", loss_out, plot;
  bool progress = true, cosine = true;
};

static Opts parse(int argc, char** argv) {
  Opts o;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto val = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "wh-cnn: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--epochs") o.epochs = std::atoi(val());
    else if (a == "--batch") o.batch = std::atoi(val());
    else if (a == "--subset") o.subset = std::atoi(val());
    else if (a == "--test-subset") o.test_subset = std::atoi(val());
    else if (a == "--lr") o.lr = float(std::atof(val()));
    else if (a == "--momentum") o.momentum = float(std::atof(val()));
    else if (a == "--seed") o.seed = std::strtoull(val(), nullptr, 10);
    else if (a == "--data") o.data = val();
    else if (a == "--loss-out") o.loss_out = val();
    else if (a == "--plot") o.plot = val();
    else if (a == "--no-progress") o.progress = false;
    else if (a == "--constant-lr") o.cosine = false;
    else if (a == "--steps") o.steps = std::atoi(val());
    else if (a == "--warmup") o.warmup = std::atoi(val());
    else {
      std::fprintf(stderr,
                   "usage: wh-cnn [--epochs N] [--batch B] [--subset N] [--test-subset N] [--lr X] [--momentum X]\n"
                   "              [--constant-lr] [--seed S] [--data DIR] [--loss-out FILE] [--plot FILE.png]\n"
                   "              [--no-progress] [--steps N] [--warmup N]\n");
      std::exit(2);
    }
  }
  if (o.epochs < 1 || o.batch < 1 || o.batch > 4096 || o.steps < 0 || o.warmup < 0) {
    std::fprintf(stderr, "wh-cnn: bad --epochs, --batch, --steps or --warmup\n");
    std::exit(2);
  }
  return o;
}

// Parameter layout in one buffer (so one SGD kernel updates them all).
constexpr int kW1 = 6 * 1 * 5 * 5, kB1 = 6, kW2 = 16 * 6 * 5 * 5, kB2 = 16, kF1 = 120 * 400, kFb1 = 120,
              kF2 = 10 * 120, kFb2 = 10;
constexpr int oW1 = 0, oB1 = oW1 + kW1, oW2 = oB1 + kB1, oB2 = oW2 + kW2, oF1 = oB2 + kB2, oFb1 = oF1 + kF1,
              oF2 = oFb1 + kFb1, oFb2 = oF2 + kF2, kParams = oFb2 + kFb2;

struct Net {
  int B;
  cudnnHandle_t dnn;
  cublasHandle_t blas;
  cudnnTensorDescriptor_t x, c1, p1, c2, p2, b1, b2, logits;
  cudnnFilterDescriptor_t w1, w2;
  cudnnConvolutionDescriptor_t conv1, conv2;
  cudnnPoolingDescriptor_t pool;
  cudnnActivationDescriptor_t relu;
  cudnnConvolutionFwdAlgo_t fa1, fa2;
  cudnnConvolutionBwdDataAlgo_t da2;
  cudnnConvolutionBwdFilterAlgo_t fa_w1, fa_w2;
  void* ws = nullptr;
  size_t ws_size = 0;
  float *params, *grads, *vel;
  // Activations (forward) and their gradients (backward).
  float *X, *C1, *R1, *P1, *C2, *R2, *P2, *Z1, *Z2, *P;
  float *dP2, *dR2, *dC2, *dP1, *dR1, *dC1, *dZ1, *dZ2;
  int* y;
  float* loss;
  int* correct;
};

static cudnnTensorDescriptor_t tensor(int n, int c, int h, int w) {
  cudnnTensorDescriptor_t d;
  CD(cudnnCreateTensorDescriptor(&d));
  CD(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, h, w));
  return d;
}
static float* dalloc(size_t n) {
  float* p;
  CK(cudaMalloc(&p, n * sizeof(float)));
  return p;
}

static void build(Net& n, int B, Rng& rng) {
  n.B = B;
  CD(cudnnCreate(&n.dnn));
  CB(cublasCreate(&n.blas));
  n.x = tensor(B, 1, 28, 28);
  n.c1 = tensor(B, 6, 28, 28);
  n.p1 = tensor(B, 6, 14, 14);
  n.c2 = tensor(B, 16, 10, 10);
  n.p2 = tensor(B, 16, 5, 5);
  n.b1 = tensor(1, 6, 1, 1);
  n.b2 = tensor(1, 16, 1, 1);
  n.logits = tensor(B, 10, 1, 1);
  CD(cudnnCreateFilterDescriptor(&n.w1));
  CD(cudnnSetFilter4dDescriptor(n.w1, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 6, 1, 5, 5));
  CD(cudnnCreateFilterDescriptor(&n.w2));
  CD(cudnnSetFilter4dDescriptor(n.w2, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 16, 6, 5, 5));
  CD(cudnnCreateConvolutionDescriptor(&n.conv1));
  CD(cudnnSetConvolution2dDescriptor(n.conv1, 2, 2, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  CD(cudnnCreateConvolutionDescriptor(&n.conv2));
  CD(cudnnSetConvolution2dDescriptor(n.conv2, 0, 0, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  CD(cudnnCreatePoolingDescriptor(&n.pool));
  CD(cudnnSetPooling2dDescriptor(n.pool, CUDNN_POOLING_MAX, CUDNN_NOT_PROPAGATE_NAN, 2, 2, 0, 0, 2, 2));
  CD(cudnnCreateActivationDescriptor(&n.relu));
  CD(cudnnSetActivationDescriptor(n.relu, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0));
  // Check the shapes cuDNN computes against the layout above.
  int on, oc, oh, ow;
  CD(cudnnGetConvolution2dForwardOutputDim(n.conv1, n.x, n.w1, &on, &oc, &oh, &ow));
  if (oc != 6 || oh != 28 || ow != 28) std::exit((std::fprintf(stderr, "wh-cnn: conv1 shape\n"), 1));
  CD(cudnnGetConvolution2dForwardOutputDim(n.conv2, n.p1, n.w2, &on, &oc, &oh, &ow));
  if (oc != 16 || oh != 10 || ow != 10) std::exit((std::fprintf(stderr, "wh-cnn: conv2 shape\n"), 1));
  // Algorithms and the one work area they share, as frameworks choose them.
  int got;
  cudnnConvolutionFwdAlgoPerf_t fp;
  cudnnConvolutionBwdDataAlgoPerf_t dp;
  cudnnConvolutionBwdFilterAlgoPerf_t wp;
  size_t s;
  CD(cudnnGetConvolutionForwardAlgorithm_v7(n.dnn, n.x, n.w1, n.conv1, n.c1, 1, &got, &fp));
  n.fa1 = fp.algo;
  CD(cudnnGetConvolutionForwardWorkspaceSize(n.dnn, n.x, n.w1, n.conv1, n.c1, n.fa1, &s));
  n.ws_size = std::max(n.ws_size, s);
  CD(cudnnGetConvolutionForwardAlgorithm_v7(n.dnn, n.p1, n.w2, n.conv2, n.c2, 1, &got, &fp));
  n.fa2 = fp.algo;
  CD(cudnnGetConvolutionForwardWorkspaceSize(n.dnn, n.p1, n.w2, n.conv2, n.c2, n.fa2, &s));
  n.ws_size = std::max(n.ws_size, s);
  CD(cudnnGetConvolutionBackwardDataAlgorithm_v7(n.dnn, n.w2, n.c2, n.conv2, n.p1, 1, &got, &dp));
  n.da2 = dp.algo;
  CD(cudnnGetConvolutionBackwardDataWorkspaceSize(n.dnn, n.w2, n.c2, n.conv2, n.p1, n.da2, &s));
  n.ws_size = std::max(n.ws_size, s);
  CD(cudnnGetConvolutionBackwardFilterAlgorithm_v7(n.dnn, n.x, n.c1, n.conv1, n.w1, 1, &got, &wp));
  n.fa_w1 = wp.algo;
  CD(cudnnGetConvolutionBackwardFilterWorkspaceSize(n.dnn, n.x, n.c1, n.conv1, n.w1, n.fa_w1, &s));
  n.ws_size = std::max(n.ws_size, s);
  CD(cudnnGetConvolutionBackwardFilterAlgorithm_v7(n.dnn, n.p1, n.c2, n.conv2, n.w2, 1, &got, &wp));
  n.fa_w2 = wp.algo;
  CD(cudnnGetConvolutionBackwardFilterWorkspaceSize(n.dnn, n.p1, n.c2, n.conv2, n.w2, n.fa_w2, &s));
  n.ws_size = std::max(n.ws_size, s);
  if (n.ws_size) CK(cudaMalloc(&n.ws, n.ws_size));

  // He initialisation; zero biases.
  std::vector<float> h(kParams, 0.0f);
  auto init = [&](int off, int count, int fan_in) {
    float sd = std::sqrt(2.0f / float(fan_in));
    for (int i = 0; i < count; i++) h[off + i] = sd * rng.normal();
  };
  init(oW1, kW1, 25);
  init(oW2, kW2, 150);
  init(oF1, kF1, 400);
  init(oF2, kF2, 120);
  n.params = dalloc(kParams);
  n.grads = dalloc(kParams);
  n.vel = dalloc(kParams);
  CK(cudaMemcpy(n.params, h.data(), kParams * 4, cudaMemcpyHostToDevice));
  CK(cudaMemset(n.vel, 0, kParams * 4));
  const size_t b = size_t(B);
  n.X = dalloc(b * 784);
  n.C1 = dalloc(b * 6 * 784), n.R1 = dalloc(b * 6 * 784), n.P1 = dalloc(b * 6 * 196);
  n.C2 = dalloc(b * 1600), n.R2 = dalloc(b * 1600), n.P2 = dalloc(b * 400);
  n.Z1 = dalloc(b * 120), n.Z2 = dalloc(b * 10), n.P = dalloc(b * 10);
  n.dP2 = dalloc(b * 400), n.dR2 = dalloc(b * 1600), n.dC2 = dalloc(b * 1600);
  n.dP1 = dalloc(b * 6 * 196), n.dR1 = dalloc(b * 6 * 784), n.dC1 = dalloc(b * 6 * 784);
  n.dZ1 = dalloc(b * 120), n.dZ2 = dalloc(b * 10);
  CK(cudaMalloc(&n.y, b * 4));
  n.loss = dalloc(1);
  CK(cudaMalloc(&n.correct, 4));
}

static const float kOne = 1.0f, kZero = 0.0f;

// Forward pass of the batch in n.X: logits in n.Z2.
static void forward(Net& n) {
  const int B = n.B;
  float* p = n.params;
  CD(cudnnConvolutionForward(n.dnn, &kOne, n.x, n.X, n.w1, p + oW1, n.conv1, n.fa1, n.ws, n.ws_size, &kZero, n.c1,
                             n.C1));
  CD(cudnnAddTensor(n.dnn, &kOne, n.b1, p + oB1, &kOne, n.c1, n.C1));
  CD(cudnnActivationForward(n.dnn, n.relu, &kOne, n.c1, n.C1, &kZero, n.c1, n.R1));
  CD(cudnnPoolingForward(n.dnn, n.pool, &kOne, n.c1, n.R1, &kZero, n.p1, n.P1));
  CD(cudnnConvolutionForward(n.dnn, &kOne, n.p1, n.P1, n.w2, p + oW2, n.conv2, n.fa2, n.ws, n.ws_size, &kZero, n.c2,
                             n.C2));
  CD(cudnnAddTensor(n.dnn, &kOne, n.b2, p + oB2, &kOne, n.c2, n.C2));
  CD(cudnnActivationForward(n.dnn, n.relu, &kOne, n.c2, n.C2, &kZero, n.c2, n.R2));
  CD(cudnnPoolingForward(n.dnn, n.pool, &kOne, n.c2, n.R2, &kZero, n.p2, n.P2));
  // Dense: Z1 (120 x B) = F1 (120 x 400) P2 (400 x B); Z2 (10 x B) = F2 A1.
  CB(cublasSgemm(n.blas, CUBLAS_OP_N, CUBLAS_OP_N, 120, B, 400, &kOne, p + oF1, 120, n.P2, 400, &kZero, n.Z1, 120));
  LAUNCH(bias_act, blocks(120L * B), 256, n.Z1, p + oFb1, 120, B, 1);
  CB(cublasSgemm(n.blas, CUBLAS_OP_N, CUBLAS_OP_N, 10, B, 120, &kOne, p + oF2, 10, n.Z1, 120, &kZero, n.Z2, 10));
  LAUNCH(bias_act, blocks(10L * B), 256, n.Z2, p + oFb2, 10, B, 0);
}

// One SGD step on the batch in n.X / n.y.
static void train_step(Net& n, float lr, float mu) {
  const int B = n.B;
  float *p = n.params, *g = n.grads;
  forward(n);
  CD(cudnnSoftmaxForward(n.dnn, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_INSTANCE, &kOne, n.logits, n.Z2, &kZero,
                         n.logits, n.P));
  LAUNCH(xent, 1, 256, n.P, n.y, B, n.dZ2, n.loss);
  // Dense layers.
  CB(cublasSgemm(n.blas, CUBLAS_OP_N, CUBLAS_OP_T, 10, 120, B, &kOne, n.dZ2, 10, n.Z1, 120, &kZero, g + oF2, 10));
  LAUNCH(row_sum, 1, 32, n.dZ2, 10, B, g + oFb2);
  CB(cublasSgemm(n.blas, CUBLAS_OP_T, CUBLAS_OP_N, 120, B, 10, &kOne, p + oF2, 10, n.dZ2, 10, &kZero, n.dZ1, 120));
  LAUNCH(relu_back, blocks(120L * B), 256, n.dZ1, n.Z1, 120 * B);
  CB(cublasSgemm(n.blas, CUBLAS_OP_N, CUBLAS_OP_T, 120, 400, B, &kOne, n.dZ1, 120, n.P2, 400, &kZero, g + oF1, 120));
  LAUNCH(row_sum, 1, 128, n.dZ1, 120, B, g + oFb1);
  CB(cublasSgemm(n.blas, CUBLAS_OP_T, CUBLAS_OP_N, 400, B, 120, &kOne, p + oF1, 120, n.dZ1, 120, &kZero, n.dP2, 400));
  // Convolutional layers, through cuDNN.
  CD(cudnnPoolingBackward(n.dnn, n.pool, &kOne, n.p2, n.P2, n.p2, n.dP2, n.c2, n.R2, &kZero, n.c2, n.dR2));
  CD(cudnnActivationBackward(n.dnn, n.relu, &kOne, n.c2, n.R2, n.c2, n.dR2, n.c2, n.C2, &kZero, n.c2, n.dC2));
  CD(cudnnConvolutionBackwardBias(n.dnn, &kOne, n.c2, n.dC2, &kZero, n.b2, g + oB2));
  CD(cudnnConvolutionBackwardFilter(n.dnn, &kOne, n.p1, n.P1, n.c2, n.dC2, n.conv2, n.fa_w2, n.ws, n.ws_size, &kZero,
                                    n.w2, g + oW2));
  CD(cudnnConvolutionBackwardData(n.dnn, &kOne, n.w2, p + oW2, n.c2, n.dC2, n.conv2, n.da2, n.ws, n.ws_size, &kZero,
                                  n.p1, n.dP1));
  CD(cudnnPoolingBackward(n.dnn, n.pool, &kOne, n.p1, n.P1, n.p1, n.dP1, n.c1, n.R1, &kZero, n.c1, n.dR1));
  CD(cudnnActivationBackward(n.dnn, n.relu, &kOne, n.c1, n.R1, n.c1, n.dR1, n.c1, n.C1, &kZero, n.c1, n.dC1));
  CD(cudnnConvolutionBackwardBias(n.dnn, &kOne, n.c1, n.dC1, &kZero, n.b1, g + oB1));
  CD(cudnnConvolutionBackwardFilter(n.dnn, &kOne, n.x, n.X, n.c1, n.dC1, n.conv1, n.fa_w1, n.ws, n.ws_size, &kZero,
                                    n.w1, g + oW1));
  LAUNCH(sgd_momentum, 64, 256, p, n.vel, g, kParams, lr, mu);
}

static void progress_bar(int epoch, int epochs, int step, int steps, double el, long images, float loss, bool tty) {
  if (tty) {
    const int width = 30, filled = int(double(step) / steps * width);
    std::fprintf(stderr, "\repoch %d/%d [", epoch, epochs);
    for (int i = 0; i < width; i++) std::fputc(i < filled ? '#' : (i == filled ? '>' : '.'), stderr);
    std::fprintf(stderr, "] %d/%d  loss %.4f  %.0f img/s ", step, steps, loss, el > 0 ? images / el : 0.0);
  } else {
    std::fprintf(stderr, "epoch %d/%d %3d%% (%d/%d steps)  loss %.4f  %.0f img/s\n", epoch, epochs, step * 100 / steps,
                 step, steps, loss, el > 0 ? images / el : 0.0);
  }
}

static double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int main(int argc, char** argv) {
  Opts o = parse(argc, argv);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines in order with the progress on stderr, also through a pipe
  Dataset train = load_fashion_mnist(o.data, "train", o.subset, "wh-cnn");
  Dataset test = load_fashion_mnist(o.data, "t10k", o.test_subset, "wh-cnn");
  if (train.n < o.batch) {
    std::fprintf(stderr, "wh-cnn: fewer images than one batch\n");
    return 2;
  }
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("wh-cnn: LeNet-5-like CNN (conv5x5x6-pool-conv5x5x16-pool-120-10), %d parameters; device: %s; cuDNN %zu\n",
              kParams, prop.name, cudnnGetVersion());
  std::printf("wh-cnn: train %d images, test %d images, batch %d, lr %g (%s), momentum %g, seed %llu\n", train.n,
              test.n, o.batch, o.lr, o.cosine ? "cosine to 0" : "constant", o.momentum, o.seed);
  Rng rng{o.seed};
  Net n;
  build(n, o.batch, rng);

  unsigned char *d_img, *d_lab, *d_timg, *d_tlab;
  int *d_idx, *d_tidx;
  CK(to_device(train, &d_img, &d_lab, &d_idx));
  CK(to_device(test, &d_timg, &d_tlab, &d_tidx));
  std::vector<int> idx(train.n);
  for (int i = 0; i < train.n; i++) idx[i] = i;

  const int steps = train.n / o.batch;
  // ---- benchmark mode: a fixed number of steps (batch gather + forward +
  // backward + update, constant learning rate), no per-step read-back
  if (o.steps > 0) {
    const bool sim = std::strstr(prop.name, "Wormhole sim") != nullptr;
    auto step = [&](int s) {
      LAUNCH(gather, blocks(long(o.batch) * 784), 256, d_img, d_lab, d_idx + long(s % steps) * o.batch, o.batch, n.X,
             n.y);
      train_step(n, o.lr, o.momentum);
    };
    for (int s = 0; s < o.warmup; s++) step(s);
    CK(cudaDeviceSynchronize());
    const long c0 = g_calls;
    const double t0 = now();
    for (int s = 0; s < o.steps; s++) step(o.warmup + s);
    const long per_step = (g_calls - c0) / o.steps;
    CK(cudaDeviceSynchronize());
    const double ms = (now() - t0) * 1e3 / o.steps;
    std::printf("step_ms=%.3f calls_per_step=%ld device=%s\n", ms, per_step, sim ? "sim" : "gpu");
    return 0;
  }

  FILE* lf = o.loss_out.empty() && o.plot.empty() ? nullptr
                                                  : std::fopen((o.loss_out.empty() ? o.plot + ".dat" : o.loss_out).c_str(), "w");
  const bool tty = o.progress && isatty(2);
  double total_s = 0, acc = 0, host_acc = 0;
  bool host_agrees = true;
  long total_images = 0;
  long global_step = 0;
  for (int e = 1; e <= o.epochs; e++) {
    for (int i = train.n - 1; i > 0; i--) std::swap(idx[i], idx[int(rng.next() % uint64_t(i + 1))]);
    CK(cudaMemcpy(d_idx, idx.data(), idx.size() * 4, cudaMemcpyHostToDevice));
    const double t0 = now();
    double sum = 0;
    for (int s = 0; s < steps; s++) {
      LAUNCH(gather, blocks(long(o.batch) * 784), 256, d_img, d_lab, d_idx + long(s) * o.batch, o.batch, n.X, n.y);
      const double frac = double(global_step) / double(long(steps) * o.epochs);
      const float lr = o.cosine ? float(o.lr * 0.5 * (1.0 + std::cos(3.141592653589793 * frac))) : o.lr;
      train_step(n, lr, o.momentum);
      float l;
      CK(cudaMemcpy(&l, n.loss, 4, cudaMemcpyDeviceToHost));
      if (!std::isfinite(l)) {
        std::fprintf(stderr, "\nwh-cnn: loss diverged at epoch %d step %d\n", e, s);
        return 1;
      }
      sum += l;
      if (lf) std::fprintf(lf, "%ld %g\n", global_step, l);
      global_step++;
      if (o.progress && (tty || (s + 1) % std::max(1, steps / 10) == 0 || s + 1 == steps))
        progress_bar(e, o.epochs, s + 1, steps, now() - t0, long(s + 1) * o.batch, float(sum / (s + 1)), tty);
    }
    const double el = now() - t0;
    total_s += el;
    total_images += long(steps) * o.batch;
    if (tty) std::fputc('\n', stderr);
    // Test accuracy (whole batches, then the remainder in a last partial one is skipped).
    // The score kernel counts on the device; the same count is made here
    // from the logits copied back and the labels read from the file (the
    // test set is in file order), so a miscounting kernel shows.
    CK(cudaMemset(n.correct, 0, 4));
    const int tsteps = test.n / o.batch;
    long host_correct = 0;
    std::vector<float> logits(size_t(o.batch) * 10);
    for (int s = 0; s < tsteps; s++) {
      LAUNCH(gather, blocks(long(o.batch) * 784), 256, d_timg, d_tlab, d_tidx + long(s) * o.batch, o.batch, n.X, n.y);
      forward(n);
      LAUNCH(score, blocks(o.batch), 256, n.Z2, n.y, o.batch, n.correct);
      CK(cudaMemcpy(logits.data(), n.Z2, logits.size() * sizeof(float), cudaMemcpyDeviceToHost));
      for (int j = 0; j < o.batch; j++) {
        const float* z = &logits[size_t(j) * 10];
        int best = 0;
        for (int c = 1; c < 10; c++)
          if (z[c] > z[best]) best = c;
        if (best == test.labels[size_t(s) * o.batch + size_t(j)]) host_correct++;
      }
    }
    int correct;
    CK(cudaMemcpy(&correct, n.correct, 4, cudaMemcpyDeviceToHost));
    acc = 100.0 * correct / double(std::max(1, tsteps * o.batch));
    host_acc = 100.0 * double(host_correct) / double(std::max(1, tsteps * o.batch));
    host_agrees = host_correct == correct;
    std::printf("epoch %d/%d  loss %.6f  test_acc %.2f%%  %.0f img/s  (%.1f s)\n", e, o.epochs, sum / steps, acc,
                steps * o.batch / el, el);
    if (!host_agrees)
      std::printf("epoch %d/%d  the device counted %d correct test images, the host %ld\n", e, o.epochs, correct,
                  host_correct);
    std::fflush(stdout);
  }
  if (lf) std::fclose(lf);
  if (!o.plot.empty()) {
    std::string dat = o.loss_out.empty() ? o.plot + ".dat" : o.loss_out;
    std::string cmd = "gnuplot -e \"set terminal png size 800,500; set output '" + o.plot +
                      "'; set xlabel 'step'; set ylabel 'training loss'; set title 'wh-cnn (LeNet-5-like) on "
                      "Fashion-MNIST'; set yrange [0:*]; plot '" + dat + "' using 1:2 with lines lc rgb '#c0c0e0' title 'loss "
                      "per step', '' using 1:2 smooth bezier lw 2 lc rgb '#2040a0' title 'smoothed'\" 2>/dev/null";
    if (std::system("command -v gnuplot >/dev/null 2>&1") == 0 && std::system(cmd.c_str()) == 0)
      std::printf("wh-cnn: loss plot written to %s\n", o.plot.c_str());
    else
      std::printf("wh-cnn: gnuplot not available: no loss plot (data in %s)\n", dat.c_str());
  }
  std::printf("final test_acc=%.2f%% images_per_s=%.0f train_s=%.1f\n", acc, total_images / total_s, total_s);
  std::printf("host-counted test_acc=%.2f%% (%s the device's count)\n", host_acc, host_agrees ? "equals" : "differs from");
  CD(cudnnDestroy(n.dnn));
  CB(cublasDestroy(n.blas));
  return 0;
}
