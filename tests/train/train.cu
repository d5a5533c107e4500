// wh-train: an MLP (784-256-128-10) trained on Fashion-MNIST with cuBLAS for
// the dense layers and its own kernels for the bias, ReLU, softmax
// cross-entropy and SGD-with-momentum. Deterministic: a fixed seed gives the
// same weights, the same shuffles and (on a given device) the same loss
// curve. Built with `nvcc -cudart shared -lcublas`; runs natively on a GPU or
// forwarded through Wormhole (LD_LIBRARY_PATH=<build>/guest-lib) unchanged.
//
//   wh-train [--epochs N] [--batch B] [--subset N] [--test-subset N]
//            [--lr X] [--momentum X] [--seed S] [--data DIR]
//            [--steps N] [--warmup N] [--loss-out FILE] [--no-progress]
//
// --steps N runs N timed training steps (after --warmup steps) and prints
// `step_ms=<ms> calls_per_step=<n> device=<sim|gpu>` instead of training to
// the end (for make bench-train).
//
// Layout: activations are column-major features x batch (one sample per
// column), so a batch of images is the dataset's own row-major layout.
#include <cublas_v2.h>
#include <cuda_runtime.h>
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

// Every CUDA runtime and cuBLAS call the program makes goes through these,
// which count them (calls_per_step is what a step forwards).
static long g_calls = 0;
#define CK(x)                                                                                        \
  do {                                                                                               \
    g_calls++;                                                                                       \
    cudaError_t e_ = (x);                                                                            \
    if (e_ != cudaSuccess) {                                                                         \
      std::fprintf(stderr, "wh-train: %s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(2);                                                                                  \
    }                                                                                                \
  } while (0)
#define CB(x)                                                                                          \
  do {                                                                                                 \
    g_calls++;                                                                                         \
    cublasStatus_t s_ = (x);                                                                           \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                                 \
      std::fprintf(stderr, "wh-train: %s:%d %s: cuBLAS status %d\n", __FILE__, __LINE__, #x, int(s_)); \
      std::exit(2);                                                                                    \
    }                                                                                                  \
  } while (0)
#define LAUNCH(kernel, grid, block, ...)                  \
  do {                                                    \
    g_calls++;                                            \
    kernel<<<(grid), (block)>>>(__VA_ARGS__);             \
  } while (0)

// ------------------------------------------------------------------ kernels

constexpr float kMean = 0.2860f, kStd = 0.3530f;  // Fashion-MNIST pixel statistics

// Gathers a shuffled batch: X[:, j] = normalise(images[idx[j]]), labels too.
__global__ void gather(const unsigned char* __restrict__ images, const unsigned char* __restrict__ labels,
                       const int* __restrict__ idx, int batch, float* __restrict__ X, int* __restrict__ y) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  int total = batch * 784;
  for (int i = t; i < total; i += gridDim.x * blockDim.x) {
    int j = i / 784, p = i - j * 784;
    int src = idx[j];
    X[i] = (float(images[size_t(src) * 784 + p]) * (1.f / 255.f) - kMean) * (1.f / kStd);
    if (p == 0) y[j] = labels[src];
  }
}

// H[i, j] = relu(H[i, j] + b[i])  (rows x batch, column-major)
__global__ void bias_relu(float* __restrict__ H, const float* __restrict__ b, int rows, int total) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  for (int i = t; i < total; i += gridDim.x * blockDim.x) {
    float v = H[i] + b[i % rows];
    H[i] = v > 0.f ? v : 0.f;
  }
}

// dH *= (H > 0)
__global__ void relu_backward(float* __restrict__ dH, const float* __restrict__ H, int total) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  for (int i = t; i < total; i += gridDim.x * blockDim.x)
    if (H[i] <= 0.f) dH[i] = 0.f;
}

// Softmax cross-entropy over 10 classes, one sample per thread; adds the bias
// to the logits first. Writes dlogits = (softmax - onehot) / batch and, with a
// fixed-order tree reduction in one block, the batch's mean loss to *loss.
__global__ void softmax_xent(float* __restrict__ Z, const float* __restrict__ b, const int* __restrict__ y, int batch,
                             float* __restrict__ loss) {
  __shared__ float part[256];
  float acc = 0.f;
  for (int j = threadIdx.x; j < batch; j += blockDim.x) {
    float* z = Z + j * 10;
    float m = -1e30f;
    for (int c = 0; c < 10; c++) {
      z[c] += b[c];
      m = fmaxf(m, z[c]);
    }
    float s = 0.f;
    for (int c = 0; c < 10; c++) s += expf(z[c] - m);
    float lse = m + logf(s);
    int label = y[j];
    acc += lse - z[label];
    float inv = 1.f / float(batch);
    for (int c = 0; c < 10; c++) z[c] = (expf(z[c] - lse) - (c == label ? 1.f : 0.f)) * inv;
  }
  part[threadIdx.x] = acc;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) *loss = part[0] / float(batch);
}

// Logits plus bias (evaluation), then the arg max per sample.
__global__ void predict(const float* __restrict__ Z, const float* __restrict__ b, int batch, int* __restrict__ pred) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= batch) return;
  int best = 0;
  float bv = Z[j * 10] + b[0];
  for (int c = 1; c < 10; c++) {
    float v = Z[j * 10 + c] + b[c];
    if (v > bv) bv = v, best = c;
  }
  pred[j] = best;
}

// ------------------------------------------------------------------ model

struct Rng {  // splitmix64: the same numbers everywhere
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return double(next() >> 11) * (1.0 / 9007199254740992.0); }
  double normal() {  // Box-Muller
    double u1 = uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1 + 1e-300)) * std::cos(6.283185307179586 * u2);
  }
};

constexpr int kIn = 784, kH1 = 256, kH2 = 128, kOut = 10;
// Offsets of each tensor in the one parameter (and gradient, velocity) buffer.
constexpr size_t oW1 = 0, ob1 = oW1 + size_t(kH1) * kIn, oW2 = ob1 + kH1, ob2 = oW2 + size_t(kH2) * kH1,
                 oW3 = ob2 + kH2, ob3 = oW3 + size_t(kOut) * kH2, kParams = ob3 + kOut;

struct Options {
  int epochs = 2, batch = 128, subset = 0, test_subset = 0, steps = 0, warmup = 5;
  float lr = 0.05f, momentum = 0.9f;
  uint64_t seed = 42;
  std::string data = "/usr/share/datasets/fashion-mnist", loss_out;
  bool progress = true;
};

static void usage() {
  std::fprintf(stderr,
               "usage: wh-train [--epochs N] [--batch B] [--subset N] [--test-subset N] [--lr X] [--momentum X]\n"
               "                [--seed S] [--data DIR] [--steps N] [--warmup N] [--loss-out FILE] [--no-progress]\n");
  std::exit(2);
}

static Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto val = [&]() -> const char* {
      if (i + 1 >= argc) usage();
      return argv[++i];
    };
    if (a == "--epochs") o.epochs = std::atoi(val());
    else if (a == "--batch") o.batch = std::atoi(val());
    else if (a == "--subset") o.subset = std::atoi(val());
    else if (a == "--test-subset") o.test_subset = std::atoi(val());
    else if (a == "--lr") o.lr = float(std::atof(val()));
    else if (a == "--momentum") o.momentum = float(std::atof(val()));
    else if (a == "--seed") o.seed = std::strtoull(val(), nullptr, 0);
    else if (a == "--data") o.data = val();
    else if (a == "--steps") o.steps = std::atoi(val());
    else if (a == "--warmup") o.warmup = std::atoi(val());
    else if (a == "--loss-out") o.loss_out = val();
    else if (a == "--no-progress") o.progress = false;
    else usage();
  }
  if (o.epochs < 1 || o.batch < 1 || o.batch > 8192) usage();
  return o;
}

struct Net {
  cublasHandle_t h;
  float *P, *G, *V;                  // parameters, gradients, velocities
  float *X, *H1, *H2, *Z, *dH1, *dH2;  // activations (features x batch)
  float* ones;                        // for bias gradients (gemv)
  int* y;
  int* pred;
  int batch;
  float* W(size_t off) { return P + off; }
  float* dW(size_t off) { return G + off; }
};

static int blocks(long n, int threads = 256) { return int(std::min<long>((n + threads - 1) / threads, 1024)); }

// Forward through the three layers for `b` samples in net.X; logits in net.Z
// (without the output bias, which softmax_xent/predict add).
static void forward(Net& n, int b) {
  const float one = 1.f, zero = 0.f;
  CB(cublasSgemm(n.h, CUBLAS_OP_N, CUBLAS_OP_N, kH1, b, kIn, &one, n.W(oW1), kH1, n.X, kIn, &zero, n.H1, kH1));
  LAUNCH(bias_relu, blocks(long(kH1) * b), 256, n.H1, n.W(ob1), kH1, kH1 * b);
  CB(cublasSgemm(n.h, CUBLAS_OP_N, CUBLAS_OP_N, kH2, b, kH1, &one, n.W(oW2), kH2, n.H1, kH1, &zero, n.H2, kH2));
  LAUNCH(bias_relu, blocks(long(kH2) * b), 256, n.H2, n.W(ob2), kH2, kH2 * b);
  CB(cublasSgemm(n.h, CUBLAS_OP_N, CUBLAS_OP_N, kOut, b, kH2, &one, n.W(oW3), kOut, n.H2, kH2, &zero, n.Z, kOut));
}

// One SGD step on the batch whose shuffled indices start at d_idx.
static void train_step(Net& n, const unsigned char* d_img, const unsigned char* d_lab, const int* d_idx,
                       float* d_loss, const Options& o) {
  const int b = n.batch;
  const float one = 1.f, zero = 0.f;
  LAUNCH(gather, blocks(long(b) * kIn), 256, d_img, d_lab, d_idx, b, n.X, n.y);
  forward(n, b);
  LAUNCH(softmax_xent, 1, 256, n.Z, n.W(ob3), n.y, b, d_loss);
  // Output layer: dW3 = dZ H2^T, db3 = dZ 1, dH2 = W3^T dZ.
  CB(cublasSgemm(n.h, CUBLAS_OP_N, CUBLAS_OP_T, kOut, kH2, b, &one, n.Z, kOut, n.H2, kH2, &zero, n.dW(oW3), kOut));
  CB(cublasSgemv(n.h, CUBLAS_OP_N, kOut, b, &one, n.Z, kOut, n.ones, 1, &zero, n.dW(ob3), 1));
  CB(cublasSgemm(n.h, CUBLAS_OP_T, CUBLAS_OP_N, kH2, b, kOut, &one, n.W(oW3), kOut, n.Z, kOut, &zero, n.dH2, kH2));
  LAUNCH(relu_backward, blocks(long(kH2) * b), 256, n.dH2, n.H2, kH2 * b);
  // Hidden layer 2.
  CB(cublasSgemm(n.h, CUBLAS_OP_N, CUBLAS_OP_T, kH2, kH1, b, &one, n.dH2, kH2, n.H1, kH1, &zero, n.dW(oW2), kH2));
  CB(cublasSgemv(n.h, CUBLAS_OP_N, kH2, b, &one, n.dH2, kH2, n.ones, 1, &zero, n.dW(ob2), 1));
  CB(cublasSgemm(n.h, CUBLAS_OP_T, CUBLAS_OP_N, kH1, b, kH2, &one, n.W(oW2), kH2, n.dH2, kH2, &zero, n.dH1, kH1));
  LAUNCH(relu_backward, blocks(long(kH1) * b), 256, n.dH1, n.H1, kH1 * b);
  // Hidden layer 1.
  CB(cublasSgemm(n.h, CUBLAS_OP_N, CUBLAS_OP_T, kH1, kIn, b, &one, n.dH1, kH1, n.X, kIn, &zero, n.dW(oW1), kH1));
  CB(cublasSgemv(n.h, CUBLAS_OP_N, kH1, b, &one, n.dH1, kH1, n.ones, 1, &zero, n.dW(ob1), 1));
  LAUNCH(sgd_momentum, blocks(long(kParams), 256), 256, n.P, n.V, n.G, int(kParams), o.lr, o.momentum);
}

static double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static void progress_bar(int epoch, int epochs, int step, int steps, double t0, long images, float loss, bool tty) {
  const int width = 30;
  int filled = steps ? int(double(step) / steps * width) : width;
  double el = now_s() - t0;
  if (tty) {
    std::fprintf(stderr, "\repoch %d/%d [", epoch, epochs);
    for (int i = 0; i < width; i++) std::fputc(i < filled ? '=' : (i == filled ? '>' : ' '), stderr);
    std::fprintf(stderr, "] %d/%d  loss %.4f  %.0f img/s ", step, steps, loss, el > 0 ? images / el : 0.0);
  } else {  // logs: a line every 10%
    std::fprintf(stderr, "epoch %d/%d %3d%% (%d/%d steps)  loss %.4f  %.0f img/s\n", epoch, epochs,
                 steps ? step * 100 / steps : 100, step, steps, loss, el > 0 ? images / el : 0.0);
  }
  std::fflush(stderr);
}

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  Dataset train = load_fashion_mnist(o.data, "train", o.subset, "wh-train");
  Dataset test = load_fashion_mnist(o.data, "t10k", o.test_subset, "wh-train");

  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const bool sim = std::strstr(prop.name, "Wormhole sim") != nullptr;
  std::printf("wh-train: MLP %d-%d-%d-%d, %zu parameters; device: %s\n", kIn, kH1, kH2, kOut, kParams, prop.name);
  std::printf("wh-train: train %d images, test %d images, batch %d, lr %g, momentum %g, seed %llu\n", train.n, test.n,
              o.batch, o.lr, o.momentum, (unsigned long long)o.seed);

  Net n{};
  n.batch = o.batch;
  const int evb = 1000;  // evaluation batch
  const int maxb = std::max(o.batch, evb);
  CB(cublasCreate(&n.h));
  CK(cudaMalloc(&n.P, kParams * 4));
  CK(cudaMalloc(&n.G, kParams * 4));
  CK(cudaMalloc(&n.V, kParams * 4));
  CK(cudaMalloc(&n.X, size_t(kIn) * maxb * 4));
  CK(cudaMalloc(&n.H1, size_t(kH1) * maxb * 4));
  CK(cudaMalloc(&n.H2, size_t(kH2) * maxb * 4));
  CK(cudaMalloc(&n.Z, size_t(kOut) * maxb * 4));
  CK(cudaMalloc(&n.dH1, size_t(kH1) * maxb * 4));
  CK(cudaMalloc(&n.dH2, size_t(kH2) * maxb * 4));
  CK(cudaMalloc(&n.ones, size_t(maxb) * 4));
  CK(cudaMalloc(&n.y, size_t(maxb) * 4));
  CK(cudaMalloc(&n.pred, size_t(maxb) * 4));

  // He initialisation from the seed; biases zero, velocities zero.
  Rng rng{o.seed};
  std::vector<float> hp(kParams, 0.f);
  auto init = [&](size_t off, int rows, int cols) {
    double sd = std::sqrt(2.0 / cols);
    for (size_t i = 0; i < size_t(rows) * cols; i++) hp[off + i] = float(rng.normal() * sd);
  };
  init(oW1, kH1, kIn);
  init(oW2, kH2, kH1);
  init(oW3, kOut, kH2);
  CK(cudaMemcpy(n.P, hp.data(), kParams * 4, cudaMemcpyHostToDevice));
  CK(cudaMemset(n.V, 0, kParams * 4));
  std::vector<float> ones(maxb, 1.f);
  CK(cudaMemcpy(n.ones, ones.data(), ones.size() * 4, cudaMemcpyHostToDevice));

  // The datasets live on the device as bytes; batches are gathered there.
  unsigned char *d_img, *d_lab, *d_timg, *d_tlab;
  int *d_idx, *d_tidx;
  CK(to_device(train, &d_img, &d_lab, &d_idx));
  CK(to_device(test, &d_timg, &d_tlab, &d_tidx));

  const int steps_per_epoch = train.n / o.batch;  // the last partial batch is dropped
  if (steps_per_epoch < 1) {
    std::fprintf(stderr, "wh-train: fewer images than one batch\n");
    return 2;
  }
  float* d_loss;
  CK(cudaMalloc(&d_loss, size_t(steps_per_epoch) * 4));
  std::vector<int> idx(train.n);
  for (int i = 0; i < train.n; i++) idx[i] = i;
  auto shuffle = [&] {  // Fisher-Yates with the seeded generator
    for (int i = train.n - 1; i > 0; i--) std::swap(idx[i], idx[int(rng.next() % uint64_t(i + 1))]);
    CK(cudaMemcpy(d_idx, idx.data(), idx.size() * 4, cudaMemcpyHostToDevice));
  };

  // ---- benchmark mode: a fixed number of steps
  if (o.steps > 0) {
    shuffle();
    for (int s = 0; s < o.warmup; s++)
      train_step(n, d_img, d_lab, d_idx + size_t(s % steps_per_epoch) * o.batch, d_loss + s % steps_per_epoch, o);
    CK(cudaDeviceSynchronize());
    long c0 = g_calls;
    double t0 = now_s();
    for (int s = 0; s < o.steps; s++) {
      int k = (o.warmup + s) % steps_per_epoch;
      train_step(n, d_img, d_lab, d_idx + size_t(k) * o.batch, d_loss + k, o);
    }
    long per_step = (g_calls - c0) / o.steps;
    CK(cudaDeviceSynchronize());
    double ms = (now_s() - t0) * 1e3 / o.steps;
    std::printf("step_ms=%.3f calls_per_step=%ld device=%s\n", ms, per_step, sim ? "sim" : "gpu");
    return 0;
  }

  // ---- training
  FILE* lf = o.loss_out.empty() ? nullptr : std::fopen(o.loss_out.c_str(), "w");
  const bool tty = isatty(2);
  std::vector<float> losses(steps_per_epoch);
  double total_s = 0;
  long total_images = 0;
  float acc = 0;
  for (int e = 1; e <= o.epochs; e++) {
    shuffle();
    CK(cudaDeviceSynchronize());
    double t0 = now_s();
    int next_mark = 1;
    for (int s = 0; s < steps_per_epoch; s++) {
      train_step(n, d_img, d_lab, d_idx + size_t(s) * o.batch, d_loss + s, o);
      if (o.progress && s + 1 < steps_per_epoch &&
          (tty ? (s % 8 == 7) : ((s + 1) * 10 / steps_per_epoch >= next_mark))) {
        if (!tty) next_mark = (s + 1) * 10 / steps_per_epoch + 1;
        // Reading this step's loss waits for the work posted so far, so the
        // bar and the rate show completed steps, not issued ones.
        float l;
        CK(cudaMemcpy(&l, d_loss + s, 4, cudaMemcpyDeviceToHost));
        progress_bar(e, o.epochs, s + 1, steps_per_epoch, t0, long(s + 1) * o.batch, l, tty);
      }
    }
    CK(cudaMemcpy(losses.data(), d_loss, losses.size() * 4, cudaMemcpyDeviceToHost));
    double el = now_s() - t0;
    total_s += el;
    total_images += long(steps_per_epoch) * o.batch;
    if (o.progress) {
      progress_bar(e, o.epochs, steps_per_epoch, steps_per_epoch, t0, long(steps_per_epoch) * o.batch,
                   losses.back(), tty);
      if (tty) std::fputc('\n', stderr);
    }
    double mean = 0;
    for (float l : losses) mean += l;
    mean /= losses.size();
    if (lf) {
      for (int s = 0; s < steps_per_epoch; s++) std::fprintf(lf, "%d %d %a\n", e, s, losses[s]);
      std::fflush(lf);
    }

    // Test accuracy.
    long correct = 0;
    std::vector<int> pred(evb);
    for (int off = 0; off < test.n; off += evb) {
      int b = std::min(evb, test.n - off);
      LAUNCH(gather, blocks(long(b) * kIn), 256, d_timg, d_tlab, d_tidx + off, b, n.X, n.y);
      forward(n, b);
      LAUNCH(predict, (b + 255) / 256, 256, n.Z, n.W(ob3), b, n.pred);
      CK(cudaMemcpy(pred.data(), n.pred, size_t(b) * 4, cudaMemcpyDeviceToHost));
      for (int j = 0; j < b; j++) correct += pred[j] == test.labels[off + j];
    }
    acc = 100.f * float(correct) / float(test.n);
    std::printf("epoch %d/%d  loss %.6f  test_acc %.2f%%  %.0f img/s  (%.1f s)\n", e, o.epochs, mean, acc,
                steps_per_epoch * o.batch / el, el);
    if (lf) std::fprintf(lf, "epoch %d mean_loss %a test_acc %.4f\n", e, mean, acc);
  }
  if (lf) std::fclose(lf);
  std::printf("final test_acc=%.2f%% images_per_s=%.0f train_s=%.1f\n", acc, total_images / total_s, total_s);
  CB(cublasDestroy(n.h));
  return 0;
}
