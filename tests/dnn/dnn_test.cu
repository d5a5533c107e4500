// cuDNN as users write it, forwarded through Wormhole's drop-ins
// (libcudart.so.13 + libcudnn.so.9) and checked on the host against
// straightforward reference loops:
//   convolution forward (padding, stride, groups; cross-correlation and
//   true convolution with dilation; NCHW and NHWC filters), backward data, backward filter,
//   backward bias; max and average pooling forward and backward;
//   activations (sigmoid, relu, tanh, clipped relu, elu) forward and
//   backward; softmax (accurate/instance, log/channel) forward and
//   backward; AddTensor with a broadcast bias; TransformTensor, OpTensor,
//   SetTensor and ScaleTensor; alpha/beta blending, with
//   beta = 0 ignoring NaNs already in the output; a strided input tensor;
//   the algorithm and work-size queries; the synchronous refusals of
//   bad arguments; batch normalization (spatial, per-activation, spatial
//   persistent: training forward with running and saved statistics,
//   inference, backward with and without the saved statistics, the Ex
//   form, the cudnnNormalization* form); LRN across channels forward and backward (the backward pass
//   against central differences); dropout (the dropped fraction, the
//   scale, the mask reused by backward, reseeding and restoring); and
//   every reduction op, with indices for MIN, MAX and AMAX; and half and
//   bfloat16 data (convolution in all three directions, max pooling,
//   sigmoid, softmax, AddTensor, OpTensor, batch normalization, SetTensor)
//   against references over the rounded inputs; the fused convolution,
//   bias and activation (ReLU, identity; z separate or the output itself).
// Tolerance: 1e-4 relative to the largest magnitude of the reference
// (float data, float accumulation order differs; 1e-3 for half, 8e-3 for
// bfloat16 outputs); the measured errors are printed.
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "wh_check.cuh"
#define CD(x) WH_REQUIRE(x, CUDNN_STATUS_SUCCESS, cudnnGetErrorString(r_))

using Vec = std::vector<float>;
static int failures = 0;
static const double kTol = 1e-4;

static void compare_tol(const char* what, const Vec& got, const Vec& want, double tol) {
  if (!wh_close(what, got, want, tol)) failures++;
}
static void compare(const char* what, const Vec& got, const Vec& want) { compare_tol(what, got, want, kTol); }
static void expect(cudnnStatus_t got, cudnnStatus_t want, const char* what) {
  bool ok = got == want;
  std::printf("%s %s: %s (want %s)\n", ok ? "ok  " : "FAIL", what, cudnnGetErrorString(got), cudnnGetErrorString(want));
  if (!ok) failures++;
}

static unsigned rng = 12345;
static Vec rand_vec(size_t n) {
  Vec v(n);
  for (auto& x : v) {
    rng = rng * 1664525u + 1013904223u;
    x = float((rng >> 8) & 0xffff) / 32768.0f - 1.0f;
  }
  return v;
}

// Device buffers.
static float* dev(const Vec& v) {
  float* p;
  CK(cudaMalloc(&p, v.size() * sizeof(float)));
  CK(cudaMemcpy(p, v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice));
  return p;
}
static Vec host(const float* p, size_t n) {
  Vec v(n);
  CK(cudaMemcpy(v.data(), p, n * sizeof(float), cudaMemcpyDeviceToHost));
  return v;
}
static float* dev_nan(size_t n) { return dev(Vec(n, NAN)); }

static cudnnTensorDescriptor_t tensor(int n, int c, int h, int w) {
  cudnnTensorDescriptor_t d;
  CD(cudnnCreateTensorDescriptor(&d));
  CD(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, h, w));
  return d;
}

// ---------------------------------------------------------------- references

struct ConvShape {
  int N, C, H, W, K, R, S, ph, pw, sh, sw, dh, dw, G;
  bool flip;  // CUDNN_CONVOLUTION
  int OH() const { return (H + 2 * ph - ((R - 1) * dh + 1)) / sh + 1; }
  int OW() const { return (W + 2 * pw - ((S - 1) * dw + 1)) / sw + 1; }
};
// Calls f(x index, w index, y index) for every multiply of the convolution.
template <class F>
static void conv_loop(const ConvShape& s, F&& f) {
  const int cg = s.C / s.G, kg = s.K / s.G, OH = s.OH(), OW = s.OW();
  for (int n = 0; n < s.N; n++)
    for (int k = 0; k < s.K; k++)
      for (int oh = 0; oh < OH; oh++)
        for (int ow = 0; ow < OW; ow++)
          for (int c = 0; c < cg; c++)
            for (int r = 0; r < s.R; r++)
              for (int q = 0; q < s.S; q++) {
                int ih = oh * s.sh - s.ph + r * s.dh, iw = ow * s.sw - s.pw + q * s.dw;
                if (ih < 0 || ih >= s.H || iw < 0 || iw >= s.W) continue;
                int ci = (k / kg) * cg + c;
                int rr = s.flip ? s.R - 1 - r : r, qq = s.flip ? s.S - 1 - q : q;
                size_t xi = ((size_t(n) * s.C + ci) * s.H + ih) * s.W + iw;
                size_t wi = ((size_t(k) * cg + c) * s.R + rr) * s.S + qq;
                size_t yi = ((size_t(n) * s.K + k) * OH + oh) * OW + ow;
                f(xi, wi, yi);
              }
}

// A K, C, R, S filter in NHWC order (K, R, S, C) and back.
static Vec krsc(const Vec& w, int K, int C, int R, int S, bool to) {
  Vec v(w.size());
  for (int k = 0; k < K; k++)
    for (int c = 0; c < C; c++)
      for (int r = 0; r < R; r++)
        for (int t = 0; t < S; t++) {
          const size_t a = ((size_t(k) * C + c) * R + r) * S + t, b = ((size_t(k) * R + r) * S + t) * C + c;
          if (to) v[b] = w[a]; else v[a] = w[b];
        }
  return v;
}

// nhwc_filter: the filter is CUDNN_TENSOR_NHWC (K, R, S, C in memory).
static void test_conv(const char* name, const ConvShape& s, cudnnHandle_t h, bool nhwc_filter = false) {
  const int OH = s.OH(), OW = s.OW(), cg = s.C / s.G;
  Vec x = rand_vec(size_t(s.N) * s.C * s.H * s.W), w = rand_vec(size_t(s.K) * cg * s.R * s.S),
      dy = rand_vec(size_t(s.N) * s.K * OH * OW);
  Vec y_ref(dy.size(), 0), dx_ref(x.size(), 0), dw_ref(w.size(), 0), db_ref(s.K, 0);
  conv_loop(s, [&](size_t xi, size_t wi, size_t yi) {
    y_ref[yi] += x[xi] * w[wi];
    dx_ref[xi] += dy[yi] * w[wi];
    dw_ref[wi] += dy[yi] * x[xi];
  });
  for (size_t i = 0; i < dy.size(); i++) db_ref[(i / (size_t(OH) * OW)) % s.K] += dy[i];

  cudnnTensorDescriptor_t xd = tensor(s.N, s.C, s.H, s.W), yd = tensor(s.N, s.K, OH, OW), bd = tensor(1, s.K, 1, 1);
  cudnnFilterDescriptor_t wd;
  CD(cudnnCreateFilterDescriptor(&wd));
  CD(cudnnSetFilter4dDescriptor(wd, CUDNN_DATA_FLOAT, nhwc_filter ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, s.K, cg, s.R,
                                s.S));
  cudnnConvolutionDescriptor_t cd;
  CD(cudnnCreateConvolutionDescriptor(&cd));
  CD(cudnnSetConvolution2dDescriptor(cd, s.ph, s.pw, s.sh, s.sw, s.dh, s.dw,
                                     s.flip ? CUDNN_CONVOLUTION : CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  CD(cudnnSetConvolutionGroupCount(cd, s.G));
  int n, c, oh, ow;
  CD(cudnnGetConvolution2dForwardOutputDim(cd, xd, wd, &n, &c, &oh, &ow));
  if (n != s.N || c != s.K || oh != OH || ow != OW) {
    std::printf("FAIL %s: output dims %d %d %d %d\n", name, n, c, oh, ow);
    failures++;
  }
  // What a framework asks before running.
  int returned = 0;
  cudnnConvolutionFwdAlgoPerf_t fperf[4];
  CD(cudnnGetConvolutionForwardAlgorithm_v7(h, xd, wd, cd, yd, 4, &returned, fperf));
  cudnnConvolutionBwdDataAlgoPerf_t dperf[4];
  CD(cudnnFindConvolutionBackwardDataAlgorithm(h, wd, yd, cd, xd, 4, &returned, dperf));
  cudnnConvolutionBwdFilterAlgoPerf_t wperf[4];
  CD(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, xd, yd, cd, wd, 4, &returned, wperf));
  size_t ws_f = 1, ws_d = 1, ws_w = 1;
  CD(cudnnGetConvolutionForwardWorkspaceSize(h, xd, wd, cd, yd, fperf[0].algo, &ws_f));
  CD(cudnnGetConvolutionBackwardDataWorkspaceSize(h, wd, yd, cd, xd, dperf[0].algo, &ws_d));
  CD(cudnnGetConvolutionBackwardFilterWorkspaceSize(h, xd, yd, cd, wd, wperf[0].algo, &ws_w));
  void* ws = nullptr;
  size_t wsz = std::max(ws_f, std::max(ws_d, ws_w));
  if (wsz) CK(cudaMalloc(&ws, wsz));

  float *px = dev(x), *pw = dev(nhwc_filter ? krsc(w, s.K, cg, s.R, s.S, true) : w), *pdy = dev(dy), *py = dev_nan(y_ref.size()), *pdx = dev_nan(x.size()),
        *pdw = dev_nan(w.size()), *pdb = dev_nan(s.K);
  const float one = 1, zero = 0;
  CD(cudnnConvolutionForward(h, &one, xd, px, wd, pw, cd, fperf[0].algo, ws, wsz, &zero, yd, py));
  CD(cudnnConvolutionBackwardData(h, &one, wd, pw, yd, pdy, cd, dperf[0].algo, ws, wsz, &zero, xd, pdx));
  CD(cudnnConvolutionBackwardFilter(h, &one, xd, px, yd, pdy, cd, wperf[0].algo, ws, wsz, &zero, wd, pdw));
  CD(cudnnConvolutionBackwardBias(h, &one, yd, pdy, &zero, bd, pdb));
  char what[160];
  std::snprintf(what, sizeof what, "%s forward (beta 0 over NaN)", name);
  compare(what, host(py, y_ref.size()), y_ref);
  std::snprintf(what, sizeof what, "%s backward data", name);
  compare(what, host(pdx, x.size()), dx_ref);
  std::snprintf(what, sizeof what, "%s backward filter", name);
  compare(what, nhwc_filter ? krsc(host(pdw, w.size()), s.K, cg, s.R, s.S, false) : host(pdw, w.size()), dw_ref);
  std::snprintf(what, sizeof what, "%s backward bias", name);
  compare(what, host(pdb, s.K), db_ref);
  // Blending: y = 0.5 * conv + 1.5 * y.
  Vec y0 = rand_vec(y_ref.size()), blend(y_ref.size());
  CK(cudaMemcpy(py, y0.data(), y0.size() * 4, cudaMemcpyHostToDevice));
  const float half = 0.5f, onehalf = 1.5f;
  CD(cudnnConvolutionForward(h, &half, xd, px, wd, pw, cd, fperf[0].algo, ws, wsz, &onehalf, yd, py));
  for (size_t i = 0; i < y0.size(); i++) blend[i] = 0.5f * y_ref[i] + 1.5f * y0[i];
  std::snprintf(what, sizeof what, "%s forward alpha 0.5 beta 1.5", name);
  compare(what, host(py, y0.size()), blend);
  for (float* p : {px, pw, pdy, py, pdx, pdw, pdb}) CK(cudaFree(p));
  if (ws) CK(cudaFree(ws));
  CD(cudnnDestroyTensorDescriptor(xd));
  CD(cudnnDestroyTensorDescriptor(yd));
  CD(cudnnDestroyTensorDescriptor(bd));
  CD(cudnnDestroyFilterDescriptor(wd));
  CD(cudnnDestroyConvolutionDescriptor(cd));
}

static void test_pool(cudnnHandle_t h, cudnnPoolingMode_t mode, const char* name) {
  const int N = 2, C = 3, H = 7, W = 6, win = 3, pad = 1, st = 2;
  const int OH = (H + 2 * pad - win) / st + 1, OW = (W + 2 * pad - win) / st + 1;
  Vec x = rand_vec(size_t(N) * C * H * W), dy = rand_vec(size_t(N) * C * OH * OW);
  Vec y_ref(dy.size()), dx_ref(x.size(), 0);
  for (int nc = 0; nc < N * C; nc++)
    for (int oh = 0; oh < OH; oh++)
      for (int ow = 0; ow < OW; ow++) {
        float best = -INFINITY, sum = 0;
        size_t arg = 0;
        for (int r = 0; r < win; r++)
          for (int q = 0; q < win; q++) {
            int ih = oh * st - pad + r, iw = ow * st - pad + q;
            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
            size_t xi = (size_t(nc) * H + ih) * W + iw;
            sum += x[xi];
            if (x[xi] > best) best = x[xi], arg = xi;
          }
        size_t yi = (size_t(nc) * OH + oh) * OW + ow;
        if (mode == CUDNN_POOLING_MAX) {
          y_ref[yi] = best;
          dx_ref[arg] += dy[yi];
        } else {
          y_ref[yi] = sum / float(win * win);  // the padding counts
          for (int r = 0; r < win; r++)
            for (int q = 0; q < win; q++) {
              int ih = oh * st - pad + r, iw = ow * st - pad + q;
              if (ih >= 0 && ih < H && iw >= 0 && iw < W) dx_ref[(size_t(nc) * H + ih) * W + iw] += dy[yi] / float(win * win);
            }
        }
      }
  cudnnPoolingDescriptor_t pd;
  CD(cudnnCreatePoolingDescriptor(&pd));
  CD(cudnnSetPooling2dDescriptor(pd, mode, CUDNN_NOT_PROPAGATE_NAN, win, win, pad, pad, st, st));
  cudnnTensorDescriptor_t xd = tensor(N, C, H, W), yd;
  int n, c, oh, ow;
  CD(cudnnGetPooling2dForwardOutputDim(pd, xd, &n, &c, &oh, &ow));
  yd = tensor(n, c, oh, ow);
  float *px = dev(x), *pdy = dev(dy), *py = dev_nan(dy.size()), *pdx = dev_nan(x.size());
  const float one = 1, zero = 0;
  CD(cudnnPoolingForward(h, pd, &one, xd, px, &zero, yd, py));
  CD(cudnnPoolingBackward(h, pd, &one, yd, py, yd, pdy, xd, px, &zero, xd, pdx));
  char what[128];
  std::snprintf(what, sizeof what, "%s pooling forward", name);
  compare(what, host(py, dy.size()), y_ref);
  std::snprintf(what, sizeof what, "%s pooling backward", name);
  compare(what, host(pdx, x.size()), dx_ref);
  for (float* p : {px, pdy, py, pdx}) CK(cudaFree(p));
  CD(cudnnDestroyPoolingDescriptor(pd));
  CD(cudnnDestroyTensorDescriptor(xd));
  CD(cudnnDestroyTensorDescriptor(yd));
}

static void test_act(cudnnHandle_t h, cudnnActivationMode_t mode, double coef, const char* name) {
  const int N = 2, C = 3, H = 5, W = 4;
  Vec x = rand_vec(size_t(N) * C * H * W), dy = rand_vec(x.size());
  for (auto& v : x) v *= 3;  // reach the clipped region
  Vec y_ref(x.size()), dx_ref(x.size());
  for (size_t i = 0; i < x.size(); i++) {
    double v = x[i], y, d;
    switch (mode) {
      case CUDNN_ACTIVATION_SIGMOID: y = 1 / (1 + std::exp(-v)), d = y * (1 - y); break;
      case CUDNN_ACTIVATION_RELU: y = v > 0 ? v : 0, d = v > 0; break;
      case CUDNN_ACTIVATION_TANH: y = std::tanh(v), d = 1 - y * y; break;
      case CUDNN_ACTIVATION_CLIPPED_RELU: y = std::fmin(std::fmax(v, 0.0), coef), d = v > 0 && v < coef; break;
      default: y = v > 0 ? v : coef * (std::exp(v) - 1), d = v > 0 ? 1 : coef * std::exp(v); break;  // ELU
    }
    y_ref[i] = float(y);
    dx_ref[i] = float(d * dy[i]);
  }
  cudnnActivationDescriptor_t ad;
  CD(cudnnCreateActivationDescriptor(&ad));
  CD(cudnnSetActivationDescriptor(ad, mode, CUDNN_NOT_PROPAGATE_NAN, coef));
  cudnnTensorDescriptor_t td = tensor(N, C, H, W);
  float *px = dev(x), *pdy = dev(dy), *py = dev_nan(x.size()), *pdx = dev_nan(x.size());
  const float one = 1, zero = 0;
  CD(cudnnActivationForward(h, ad, &one, td, px, &zero, td, py));
  CD(cudnnActivationBackward(h, ad, &one, td, py, td, pdy, td, px, &zero, td, pdx));
  char what[128];
  std::snprintf(what, sizeof what, "%s activation forward", name);
  compare(what, host(py, x.size()), y_ref);
  std::snprintf(what, sizeof what, "%s activation backward", name);
  compare(what, host(pdx, x.size()), dx_ref);
  // In place (y == x), as frameworks do for ReLU.
  CD(cudnnActivationForward(h, ad, &one, td, px, &zero, td, px));
  std::snprintf(what, sizeof what, "%s activation forward in place", name);
  compare(what, host(px, x.size()), y_ref);
  for (float* p : {px, pdy, py, pdx}) CK(cudaFree(p));
  CD(cudnnDestroyActivationDescriptor(ad));
  CD(cudnnDestroyTensorDescriptor(td));
}

static void test_softmax(cudnnHandle_t h, cudnnSoftmaxAlgorithm_t algo, cudnnSoftmaxMode_t mode, const char* name) {
  const int N = 3, C = 5, H = 2, W = 3, HW = H * W;
  Vec x = rand_vec(size_t(N) * C * HW), dy = rand_vec(x.size());
  Vec y_ref(x.size()), dx_ref(x.size());
  // Groups: instance = all of C*H*W per n; channel = C per (n, h, w).
  const int groups = mode == CUDNN_SOFTMAX_MODE_INSTANCE ? N : N * HW, len = mode == CUDNN_SOFTMAX_MODE_INSTANCE ? C * HW : C;
  auto at = [&](int g, int i) -> size_t {
    if (mode == CUDNN_SOFTMAX_MODE_INSTANCE) return size_t(g) * C * HW + i;
    int n = g / HW, p = g % HW;
    return (size_t(n) * C + i) * HW + p;
  };
  for (int g = 0; g < groups; g++) {
    double mx = -1e30, sum = 0;
    for (int i = 0; i < len; i++) mx = std::fmax(mx, x[at(g, i)]);
    for (int i = 0; i < len; i++) sum += std::exp(x[at(g, i)] - mx);
    double dot = 0, dsum = 0;
    for (int i = 0; i < len; i++) {
      size_t k = at(g, i);
      double p = std::exp(x[k] - mx) / sum;
      y_ref[k] = float(algo == CUDNN_SOFTMAX_LOG ? std::log(p) : p);
      dot += dy[k] * p;
      dsum += dy[k];
    }
    for (int i = 0; i < len; i++) {
      size_t k = at(g, i);
      double p = std::exp(x[k] - mx) / sum;
      dx_ref[k] = float(algo == CUDNN_SOFTMAX_LOG ? dy[k] - p * dsum : p * (dy[k] - dot));
    }
  }
  cudnnTensorDescriptor_t td = tensor(N, C, H, W);
  float *px = dev(x), *pdy = dev(dy), *py = dev_nan(x.size()), *pdx = dev_nan(x.size());
  const float one = 1, zero = 0;
  CD(cudnnSoftmaxForward(h, algo, mode, &one, td, px, &zero, td, py));
  CD(cudnnSoftmaxBackward(h, algo, mode, &one, td, py, td, pdy, &zero, td, pdx));
  char what[128];
  std::snprintf(what, sizeof what, "%s softmax forward", name);
  compare(what, host(py, x.size()), y_ref);
  std::snprintf(what, sizeof what, "%s softmax backward", name);
  compare(what, host(pdx, x.size()), dx_ref);
  for (float* p : {px, pdy, py, pdx}) CK(cudaFree(p));
  CD(cudnnDestroyTensorDescriptor(td));
}

// A bias broadcast onto a strided (padded-row) tensor: c = 1 * a + 1 * c.
static void test_add_strided(cudnnHandle_t h) {
  const int N = 2, C = 3, H = 4, W = 5, LD = 8;  // rows padded to 8
  Vec c0 = rand_vec(size_t(N) * C * H * LD), a = rand_vec(C), want = c0;
  for (int n = 0; n < N; n++)
    for (int c = 0; c < C; c++)
      for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) want[((size_t(n) * C + c) * H + y) * LD + x] += a[c];
  cudnnTensorDescriptor_t cd, ad = tensor(1, C, 1, 1);
  CD(cudnnCreateTensorDescriptor(&cd));
  CD(cudnnSetTensor4dDescriptorEx(cd, CUDNN_DATA_FLOAT, N, C, H, W, C * H * LD, H * LD, LD, 1));
  size_t bytes = 0;
  CD(cudnnGetTensorSizeInBytes(cd, &bytes));
  if (bytes != ((size_t(N) * C - 1) * H * LD + (H - 1) * LD + W) * 4) {
    std::printf("FAIL cudnnGetTensorSizeInBytes: %zu\n", bytes);
    failures++;
  }
  float *pc = dev(c0), *pa = dev(a);
  const float one = 1;
  CD(cudnnAddTensor(h, &one, ad, pa, &one, cd, pc));
  compare("AddTensor broadcast bias onto a strided tensor (padding untouched)", host(pc, c0.size()), want);
  CK(cudaFree(pc));
  CK(cudaFree(pa));
  CD(cudnnDestroyTensorDescriptor(cd));
  CD(cudnnDestroyTensorDescriptor(ad));
}


// TransformTensor (NCHW -> NHWC), OpTensor (ADD, MUL, MAX with a broadcast
// b; SQRT), SetTensor and ScaleTensor on a padded tensor.
static void test_tensor_ops(cudnnHandle_t h) {
  const int N = 2, C = 3, H = 4, W = 5, n = N * C * H * W;
  Vec x = rand_vec(n), b = rand_vec(C), c0 = rand_vec(n);
  cudnnTensorDescriptor_t nchw = tensor(N, C, H, W), nhwc, bd = tensor(1, C, 1, 1);
  CD(cudnnCreateTensorDescriptor(&nhwc));
  CD(cudnnSetTensor4dDescriptor(nhwc, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, N, C, H, W));
  float *px = dev(x), *py = dev_nan(n), *pb = dev(b), *pc = dev(c0);
  const float two = 2, zero = 0, one = 1, half = 0.5f;
  CD(cudnnTransformTensor(h, &two, nchw, px, &zero, nhwc, py));
  Vec want(n);
  for (int i = 0; i < N; i++)
    for (int ch = 0; ch < C; ch++)
      for (int y = 0; y < H; y++)
        for (int z = 0; z < W; z++)
          want[((size_t(i) * H + y) * W + z) * C + ch] = 2 * x[((size_t(i) * C + ch) * H + y) * W + z];
  compare("TransformTensor NCHW -> NHWC, alpha 2, beta 0 over NaN", host(py, n), want);
  cudnnOpTensorDescriptor_t od;
  CD(cudnnCreateOpTensorDescriptor(&od));
  const cudnnOpTensorOp_t ops[] = {CUDNN_OP_TENSOR_ADD, CUDNN_OP_TENSOR_MUL, CUDNN_OP_TENSOR_MAX, CUDNN_OP_TENSOR_SQRT};
  const char* names[] = {"OpTensor ADD (broadcast b, beta 0.5)", "OpTensor MUL (broadcast b, beta 0.5)",
                         "OpTensor MAX (broadcast b, beta 0.5)", "OpTensor SQRT of |x| (beta 0.5)"};
  Vec ax(n);
  for (int i = 0; i < n; i++) ax[i] = std::fabs(x[i]);
  float* pax = dev(ax);
  for (int k = 0; k < 4; k++) {
    CK(cudaMemcpy(pc, c0.data(), n * 4, cudaMemcpyHostToDevice));
    CD(cudnnSetOpTensorDescriptor(od, ops[k], CUDNN_DATA_FLOAT, CUDNN_NOT_PROPAGATE_NAN));
    const float* a = k == 3 ? pax : px;
    CD(cudnnOpTensor(h, od, &two, nchw, a, &half, bd, pb, &half, nchw, pc));
    for (int i = 0; i < n; i++) {
      float u = 2 * (k == 3 ? ax[i] : x[i]), v = 0.5f * b[(i / (H * W)) % C], r;
      r = k == 0 ? u + v : k == 1 ? u * v : k == 2 ? std::fmax(u, v) : std::sqrt(u);
      want[i] = r + 0.5f * c0[i];
    }
    compare(names[k], host(pc, n), want);
  }
  CD(cudnnSetOpTensorDescriptor(od, CUDNN_OP_TENSOR_NOT, CUDNN_DATA_FLOAT, CUDNN_NOT_PROPAGATE_NAN));
  expect(cudnnOpTensor(h, od, &one, nchw, px, &one, bd, pb, &zero, nchw, pc), CUDNN_STATUS_NOT_SUPPORTED,
         "OpTensor NOT");
  // Set and scale a padded tensor: the padding keeps its values.
  const int LD = 7;
  cudnnTensorDescriptor_t pad;
  CD(cudnnCreateTensorDescriptor(&pad));
  CD(cudnnSetTensor4dDescriptorEx(pad, CUDNN_DATA_FLOAT, N, C, H, W, C * H * LD, H * LD, LD, 1));
  const int np = N * C * H * LD;
  Vec p0 = rand_vec(np), pw = p0;
  float* pp = dev(p0);
  const float three = 3, minus = -1.5f;
  CD(cudnnSetTensor(h, pad, pp, &three));
  CD(cudnnScaleTensor(h, pad, pp, &minus));
  for (int i = 0; i < np; i++)
    if (i % LD < W) pw[i] = -4.5f;
  compare("SetTensor 3 then ScaleTensor -1.5 on a padded tensor", host(pp, np), pw);
  for (float* p : {px, py, pb, pc, pax, pp}) CK(cudaFree(p));
  CD(cudnnDestroyOpTensorDescriptor(od));
  for (auto d : {nchw, nhwc, bd, pad}) CD(cudnnDestroyTensorDescriptor(d));
}

static void test_refusals(cudnnHandle_t h) {
  cudnnTensorDescriptor_t xd = tensor(1, 4, 8, 8), yd = tensor(1, 6, 8, 8), dd;
  cudnnFilterDescriptor_t wd;
  CD(cudnnCreateFilterDescriptor(&wd));
  CD(cudnnSetFilter4dDescriptor(wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 6, 4, 3, 3));
  cudnnConvolutionDescriptor_t cd;
  CD(cudnnCreateConvolutionDescriptor(&cd));
  CD(cudnnSetConvolution2dDescriptor(cd, 0, 0, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  float* p;
  CK(cudaMalloc(&p, 1 << 16));
  const float one = 1, zero = 0;
  // Without padding the output is 6x6, not 8x8.
  expect(cudnnConvolutionForward(h, &one, xd, p, wd, p, cd, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr, 0,
                                 &zero, yd, p),
         CUDNN_STATUS_BAD_PARAM, "convolution with a wrong output shape");
  expect(cudnnConvolutionForward(h, &one, xd, nullptr, wd, p, cd, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr,
                                 0, &zero, yd, p),
         CUDNN_STATUS_BAD_PARAM, "convolution with a null input");
  expect(cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 0, 1, 1, 1), CUDNN_STATUS_BAD_PARAM,
         "a tensor with a zero dimension");
  expect(cudnnSetConvolution2dDescriptor(cd, -1, 0, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
         CUDNN_STATUS_BAD_PARAM, "a negative padding");
  CD(cudnnCreateTensorDescriptor(&dd));
  CD(cudnnSetTensor4dDescriptor(dd, CUDNN_TENSOR_NCHW, CUDNN_DATA_DOUBLE, 1, 4, 8, 8));
  cudnnActivationDescriptor_t ad;
  CD(cudnnCreateActivationDescriptor(&ad));
  CD(cudnnSetActivationDescriptor(ad, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0));
  expect(cudnnActivationForward(h, ad, &one, dd, p, &zero, dd, p), CUDNN_STATUS_NOT_SUPPORTED,
         "a double-precision activation");
  expect(cudnnActivationForward(h, ad, &one, xd, p, &zero, yd, p), CUDNN_STATUS_BAD_PARAM,
         "an activation between different shapes");
  expect(cudnnSoftmaxForward(h, cudnnSoftmaxAlgorithm_t(7), CUDNN_SOFTMAX_MODE_INSTANCE, &one, xd, p, &zero, xd, p),
         CUDNN_STATUS_BAD_PARAM, "an unknown softmax algorithm");
  CK(cudaDeviceSynchronize());  // nothing refused was sent
  CK(cudaFree(p));
  CD(cudnnDestroyActivationDescriptor(ad));
  CD(cudnnDestroyTensorDescriptor(xd));
  CD(cudnnDestroyTensorDescriptor(yd));
  CD(cudnnDestroyTensorDescriptor(dd));
  CD(cudnnDestroyFilterDescriptor(wd));
  CD(cudnnDestroyConvolutionDescriptor(cd));
}

// ---------------------------------------------------------------- batch normalization

// Host batch normalization of dense NCHW x: per-parameter index of element i.
static int bn_param(int i, int C, int HW, bool spatial) {
  const int r = i % (C * HW);
  return spatial ? r / HW : r;
}
static void test_bn(cudnnHandle_t h, cudnnBatchNormMode_t mode, const char* name) {
  const int N = 3, C = 4, H = 5, W = 6, HW = H * W, n = N * C * HW;
  const bool spatial = mode != CUDNN_BATCHNORM_PER_ACTIVATION;
  const int P = spatial ? C : C * HW;
  const int m = spatial ? N * HW : N;
  const double eps = 1e-4, factor = 0.3;
  cudnnTensorDescriptor_t xd = tensor(N, C, H, W), bnd;
  CD(cudnnCreateTensorDescriptor(&bnd));
  CD(cudnnDeriveBNTensorDescriptor(bnd, xd, mode));
  cudnnDataType_t dt;
  int bn_n, bn_c, bn_h, bn_w, s0, s1, s2, s3;
  CD(cudnnGetTensor4dDescriptor(bnd, &dt, &bn_n, &bn_c, &bn_h, &bn_w, &s0, &s1, &s2, &s3));
  const bool derived = dt == CUDNN_DATA_FLOAT && bn_n == 1 && bn_c == C && bn_h == (spatial ? 1 : H) &&
                       bn_w == (spatial ? 1 : W);
  std::printf("%s %s: derived parameter descriptor 1x%dx%dx%d\n", derived ? "ok  " : "FAIL", name, bn_c, bn_h, bn_w);
  if (!derived) failures++;

  Vec x = rand_vec(n), scale = rand_vec(P), bias = rand_vec(P), rm = rand_vec(P), rv = rand_vec(P), dy = rand_vec(n);
  for (auto& v : x) v = 2 * v + 0.5f;  // a mean and variance away from 0 and 1
  for (auto& v : rv) v = std::fabs(v) + 0.5f;
  // Reference statistics.
  std::vector<double> mean(P), var(P);
  for (int i = 0; i < n; i++) mean[bn_param(i, C, HW, spatial)] += x[i];
  for (auto& v : mean) v /= m;
  for (int i = 0; i < n; i++) {
    const int p = bn_param(i, C, HW, spatial);
    var[p] += (x[i] - mean[p]) * (x[i] - mean[p]);
  }
  for (auto& v : var) v /= m;
  Vec y_ref(n), rm_ref(P), rv_ref(P), sm_ref(P), si_ref(P);
  for (int p = 0; p < P; p++) {
    si_ref[p] = float(1 / std::sqrt(var[p] + eps));
    sm_ref[p] = float(mean[p]);
    rm_ref[p] = float((1 - factor) * rm[p] + factor * mean[p]);
    rv_ref[p] = float((1 - factor) * rv[p] + factor * var[p] * m / (m - 1));
  }
  for (int i = 0; i < n; i++) {
    const int p = bn_param(i, C, HW, spatial);
    y_ref[i] = float(scale[p] * (x[i] - mean[p]) / std::sqrt(var[p] + eps) + bias[p]);
  }
  float *dx_ = dev(x), *dsc = dev(scale), *dbi = dev(bias), *drm = dev(rm), *drv = dev(rv), *dyv = dev_nan(n);
  float *dsm = dev_nan(P), *dsi = dev_nan(P);
  const float one = 1, zero = 0;
  CD(cudnnBatchNormalizationForwardTraining(h, mode, &one, &zero, xd, dx_, xd, dyv, bnd, dsc, dbi, factor, drm, drv,
                                            eps, dsm, dsi));
  char what[160];
  std::snprintf(what, sizeof what, "batch norm %s training forward y", name);
  compare(what, host(dyv, n), y_ref);
  std::snprintf(what, sizeof what, "batch norm %s running mean", name);
  compare(what, host(drm, P), rm_ref);
  std::snprintf(what, sizeof what, "batch norm %s running variance (unbiased)", name);
  compare(what, host(drv, P), rv_ref);
  std::snprintf(what, sizeof what, "batch norm %s saved mean", name);
  compare(what, host(dsm, P), sm_ref);
  std::snprintf(what, sizeof what, "batch norm %s saved inverse deviation", name);
  compare(what, host(dsi, P), si_ref);

  // Inference with the running statistics, alpha 0.5 and beta 0.25 over y_ref.
  Vec rmh = host(drm, P), rvh = host(drv, P), yi_ref(n), y0 = rand_vec(n);
  for (int i = 0; i < n; i++) {
    const int p = bn_param(i, C, HW, spatial);
    yi_ref[i] = float(0.5 * (scale[p] * (x[i] - rmh[p]) / std::sqrt(rvh[p] + eps) + bias[p]) + 0.25 * y0[i]);
  }
  float* dyi = dev(y0);
  const float half = 0.5f, quarter = 0.25f;
  CD(cudnnBatchNormalizationForwardInference(h, mode, &half, &quarter, xd, dx_, xd, dyi, bnd, dsc, dbi, drm, drv, eps));
  std::snprintf(what, sizeof what, "batch norm %s inference (alpha 0.5, beta 0.25)", name);
  compare(what, host(dyi, n), yi_ref);

  // Backward: dx (alpha 1, beta 0 over NaN), dscale and dbias accumulated (beta 1).
  Vec ds0 = rand_vec(P), db0 = rand_vec(P);
  std::vector<double> sdy(P), sdyx(P);
  for (int i = 0; i < n; i++) {
    const int p = bn_param(i, C, HW, spatial);
    const double xh = (x[i] - mean[p]) / std::sqrt(var[p] + eps);
    sdy[p] += dy[i], sdyx[p] += dy[i] * xh;
  }
  Vec dx_ref(n), ds_ref(P), db_ref(P);
  for (int i = 0; i < n; i++) {
    const int p = bn_param(i, C, HW, spatial);
    const double inv = 1 / std::sqrt(var[p] + eps), xh = (x[i] - mean[p]) * inv;
    dx_ref[i] = float(scale[p] * inv / m * (m * dy[i] - sdy[p] - xh * sdyx[p]));
  }
  for (int p = 0; p < P; p++) ds_ref[p] = float(sdyx[p] + ds0[p]), db_ref[p] = float(sdy[p] + db0[p]);
  float *ddy = dev(dy), *ddx = dev_nan(n), *dds = dev(ds0), *ddb = dev(db0);
  CD(cudnnBatchNormalizationBackward(h, mode, &one, &zero, &one, &one, xd, dx_, xd, ddy, xd, ddx, bnd, dsc, dds, ddb,
                                     eps, dsm, dsi));
  std::snprintf(what, sizeof what, "batch norm %s backward dx", name);
  compare(what, host(ddx, n), dx_ref);
  std::snprintf(what, sizeof what, "batch norm %s backward dscale (beta 1)", name);
  compare(what, host(dds, P), ds_ref);
  std::snprintf(what, sizeof what, "batch norm %s backward dbias (beta 1)", name);
  compare(what, host(ddb, P), db_ref);
  // Without the saved statistics (recomputed from x), parameters overwritten.
  float *ddx2 = dev_nan(n), *dds2 = dev_nan(P), *ddb2 = dev_nan(P);
  CD(cudnnBatchNormalizationBackward(h, mode, &one, &zero, &one, &zero, xd, dx_, xd, ddy, xd, ddx2, bnd, dsc, dds2,
                                     ddb2, eps, nullptr, nullptr));
  for (int p = 0; p < P; p++) ds_ref[p] -= ds0[p], db_ref[p] -= db0[p];
  std::snprintf(what, sizeof what, "batch norm %s backward dx without saved statistics", name);
  compare(what, host(ddx2, n), dx_ref);
  std::snprintf(what, sizeof what, "batch norm %s backward dscale, dbias without saved statistics", name);
  Vec got = host(dds2, P), want = ds_ref, gb = host(ddb2, P);
  got.insert(got.end(), gb.begin(), gb.end());
  want.insert(want.end(), db_ref.begin(), db_ref.end());
  compare(what, got, want);

  // The Ex form (CUDNN_BATCHNORM_OPS_BN) with no running statistics.
  size_t ws = 1, rs = 1;
  CD(cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(h, mode, CUDNN_BATCHNORM_OPS_BN, xd, nullptr, xd, bnd,
                                                              nullptr, &ws));
  CD(cudnnGetBatchNormalizationTrainingExReserveSpaceSize(h, mode, CUDNN_BATCHNORM_OPS_BN, nullptr, xd, &rs));
  float* dyx = dev_nan(n);
  CD(cudnnBatchNormalizationForwardTrainingEx(h, mode, CUDNN_BATCHNORM_OPS_BN, &one, &zero, xd, dx_, nullptr, nullptr,
                                              xd, dyx, bnd, dsc, dbi, factor, nullptr, nullptr, eps, nullptr, nullptr,
                                              nullptr, nullptr, ws, nullptr, rs));
  std::snprintf(what, sizeof what, "batch norm %s training forward, Ex form (work %zu, reserve %zu)", name, ws, rs);
  compare(what, host(dyx, n), y_ref);
  // The same through the cudnnNormalization* API (PER_ACTIVATION / PER_CHANNEL).
  if (mode != CUDNN_BATCHNORM_SPATIAL_PERSISTENT) {
    const cudnnNormMode_t nm = spatial ? CUDNN_NORM_PER_CHANNEL : CUDNN_NORM_PER_ACTIVATION;
    cudnnTensorDescriptor_t sbd, mvd;
    CD(cudnnCreateTensorDescriptor(&sbd));
    CD(cudnnCreateTensorDescriptor(&mvd));
    CD(cudnnDeriveNormTensorDescriptor(sbd, mvd, xd, nm, 1));
    float *ny = dev_nan(n), *nsm = dev_nan(P), *nsi = dev_nan(P), *ndx = dev_nan(n), *nds = dev_nan(P), *ndb = dev_nan(P);
    CD(cudnnNormalizationForwardTraining(h, nm, CUDNN_NORM_OPS_NORM, CUDNN_NORM_ALGO_STANDARD, &one, &zero, xd, dx_,
                                         sbd, dsc, dbi, factor, mvd, nullptr, nullptr, eps, nsm, nsi, nullptr, nullptr,
                                         nullptr, xd, ny, nullptr, 0, nullptr, 0, 1));
    CD(cudnnNormalizationBackward(h, nm, CUDNN_NORM_OPS_NORM, CUDNN_NORM_ALGO_STANDARD, &one, &zero, &one, &zero, xd,
                                  dx_, nullptr, nullptr, xd, ddy, nullptr, nullptr, xd, ndx, sbd, dsc, nullptr, nds, ndb,
                                  eps, mvd, nsm, nsi, nullptr, nullptr, 0, nullptr, 0, 1));
    std::snprintf(what, sizeof what, "normalization API %s training forward y", name);
    compare(what, host(ny, n), y_ref);
    std::snprintf(what, sizeof what, "normalization API %s backward dx", name);
    compare(what, host(ndx, n), dx_ref);
    std::snprintf(what, sizeof what, "normalization API %s dscale", name);
    compare(what, host(nds, P), ds_ref);
    for (float* p : {ny, nsm, nsi, ndx, nds, ndb}) CK(cudaFree(p));
    CD(cudnnDestroyTensorDescriptor(sbd));
    CD(cudnnDestroyTensorDescriptor(mvd));
  }
  for (float* p : {dx_, dsc, dbi, drm, drv, dyv, dsm, dsi, dyi, ddy, ddx, dds, ddb, ddx2, dds2, ddb2, dyx}) CK(cudaFree(p));
  CD(cudnnDestroyTensorDescriptor(xd));
  CD(cudnnDestroyTensorDescriptor(bnd));
}

// ---------------------------------------------------------------- LRN

// Host LRN across channels in double: y for x (dense NCHW).
static std::vector<double> lrn_ref(const std::vector<double>& x, int N, int C, int HW, unsigned ln, double a, double b,
                                   double k) {
  std::vector<double> y(x.size());
  const int lb = int(ln - 1) / 2, la = int(ln) - lb - 1;
  for (int n = 0; n < N; n++)
    for (int c = 0; c < C; c++)
      for (int s = 0; s < HW; s++) {
        double acc = 0;
        for (int j = c - lb; j <= c + la; j++)
          if (j >= 0 && j < C) acc += x[(n * C + j) * HW + s] * x[(n * C + j) * HW + s];
        y[(n * C + c) * HW + s] = x[(n * C + c) * HW + s] * std::pow(k + a / ln * acc, -b);
      }
  return y;
}
static void test_lrn(cudnnHandle_t h) {
  const int N = 2, C = 7, H = 3, W = 4, HW = H * W, n = N * C * HW;
  const unsigned ln = 5;
  const double a = 0.05, b = 0.75, k = 2.0;
  cudnnLRNDescriptor_t ld;
  CD(cudnnCreateLRNDescriptor(&ld));
  unsigned gn;
  double ga, gb, gk;
  CD(cudnnGetLRNDescriptor(ld, &gn, &ga, &gb, &gk));
  const bool defaults = gn == 5 && ga == 1e-4 && gb == 0.75 && gk == 2.0;
  std::printf("%s LRN descriptor defaults n=%u alpha=%g beta=%g k=%g\n", defaults ? "ok  " : "FAIL", gn, ga, gb, gk);
  if (!defaults) failures++;
  CD(cudnnSetLRNDescriptor(ld, ln, a, b, k));
  cudnnTensorDescriptor_t xd = tensor(N, C, H, W);
  Vec x = rand_vec(n), dy = rand_vec(n);
  for (auto& v : x) v *= 3;
  std::vector<double> xd64(x.begin(), x.end());
  const std::vector<double> y64 = lrn_ref(xd64, N, C, HW, ln, a, b, k);
  Vec y_ref(y64.begin(), y64.end());
  // dx by central differences of L = sum dy * y (double precision).
  Vec dx_ref(n);
  for (int i = 0; i < n; i++) {
    const double e = 1e-5;
    std::vector<double> xp = xd64, xm = xd64;
    xp[i] += e, xm[i] -= e;
    // Only channels within the window of i change: sum over all is simple enough at this size.
    const std::vector<double> yp = lrn_ref(xp, N, C, HW, ln, a, b, k), ym = lrn_ref(xm, N, C, HW, ln, a, b, k);
    double d = 0;
    for (int j = 0; j < n; j++) d += dy[j] * (yp[j] - ym[j]);
    dx_ref[i] = float(d / (2 * e));
  }
  float *dxp = dev(x), *dyp = dev_nan(n), *ddy = dev(dy), *ddx = dev_nan(n);
  const float one = 1, zero = 0;
  CD(cudnnLRNCrossChannelForward(h, ld, CUDNN_LRN_CROSS_CHANNEL_DIM1, &one, xd, dxp, &zero, xd, dyp));
  compare("LRN cross-channel forward (n 5, alpha 0.05, beta 0.75, k 2)", host(dyp, n), y_ref);
  CD(cudnnLRNCrossChannelBackward(h, ld, CUDNN_LRN_CROSS_CHANNEL_DIM1, &one, xd, dyp, xd, ddy, xd, dxp, &zero, xd, ddx));
  compare("LRN cross-channel backward (against central differences)", host(ddx, n), dx_ref);
  expect(cudnnSetLRNDescriptor(ld, 17, a, b, k), CUDNN_STATUS_BAD_PARAM, "an LRN window of 17");
  for (float* p : {dxp, dyp, ddy, ddx}) CK(cudaFree(p));
  CD(cudnnDestroyLRNDescriptor(ld));
  CD(cudnnDestroyTensorDescriptor(xd));
}

// ---------------------------------------------------------------- dropout

static void test_dropout(cudnnHandle_t h) {
  const int N = 4, C = 8, H = 32, W = 32, n = N * C * H * W;
  const float p = 0.3f;
  const unsigned long long seed = 2024;
  cudnnTensorDescriptor_t xd = tensor(N, C, H, W);
  size_t states_size = 0, reserve_size = 0;
  CD(cudnnDropoutGetStatesSize(h, &states_size));
  CD(cudnnDropoutGetReserveSpaceSize(xd, &reserve_size));
  void *states, *reserve, *reserve2;
  CK(cudaMalloc(&states, states_size));
  CK(cudaMalloc(&reserve, reserve_size));
  CK(cudaMalloc(&reserve2, reserve_size));
  cudnnDropoutDescriptor_t dd;
  CD(cudnnCreateDropoutDescriptor(&dd));
  CD(cudnnSetDropoutDescriptor(dd, h, p, states, states_size, seed));
  float gp;
  void* gs;
  unsigned long long gseed;
  CD(cudnnGetDropoutDescriptor(dd, h, &gp, &gs, &gseed));
  const bool got = gp == p && gs == states && gseed == seed;
  std::printf("%s dropout descriptor reads back (p %g, seed %llu)\n", got ? "ok  " : "FAIL", gp, gseed);
  if (!got) failures++;
  Vec x = rand_vec(n), dy = rand_vec(n);
  for (auto& v : x) v = v >= 0 ? v + 0.1f : v - 0.1f;  // no zeros in x
  float *dxp = dev(x), *dyp = dev_nan(n), *dy2 = dev_nan(n), *ddy = dev(dy), *ddx = dev_nan(n);
  CD(cudnnDropoutForward(h, dd, xd, dxp, xd, dyp, reserve, reserve_size));
  CD(cudnnDropoutForward(h, dd, xd, dxp, xd, dy2, reserve2, reserve_size));  // the generator moved on
  CD(cudnnDropoutBackward(h, dd, xd, ddy, xd, ddx, reserve, reserve_size));
  Vec y = host(dyp, n), y2 = host(dy2, n), dx = host(ddx, n);
  int dropped = 0, bad = 0, differ = 0;
  const float scale = 1 / (1 - p);
  Vec dx_ref(n);
  for (int i = 0; i < n; i++) {
    if (y[i] == 0) dropped++;
    else if (std::fabs(y[i] - x[i] * scale) > 1e-6f * std::fabs(x[i] * scale)) bad++;
    if ((y[i] == 0) != (y2[i] == 0)) differ++;
    dx_ref[i] = y[i] == 0 ? 0.0f : dy[i] * scale;
  }
  const double frac = double(dropped) / n;
  const bool rate = std::fabs(frac - p) < 0.01 && bad == 0;
  std::printf("%s dropout p %.2f: dropped %.4f of %d, kept values scaled by 1/(1-p) (%d wrong)\n", rate ? "ok  " : "FAIL",
              p, frac, n, bad);
  if (!rate) failures++;
  const bool moved = differ > n / 10;
  std::printf("%s dropout: a second forward draws a new mask (%d of %d differ)\n", moved ? "ok  " : "FAIL", differ, n);
  if (!moved) failures++;
  compare("dropout backward applies the forward's mask and scale", dx, dx_ref);
  // Seeding again with the same seed repeats the first mask.
  float* dy3 = dev_nan(n);
  CD(cudnnSetDropoutDescriptor(dd, h, p, states, states_size, seed));
  CD(cudnnDropoutForward(h, dd, xd, dxp, xd, dy3, reserve2, reserve_size));
  compare("dropout reseeded with the same seed repeats its mask", host(dy3, n), y);
  // A restored descriptor continues from the state buffer without reseeding.
  cudnnDropoutDescriptor_t dr;
  CD(cudnnCreateDropoutDescriptor(&dr));
  CD(cudnnRestoreDropoutDescriptor(dr, h, p, states, states_size, seed));
  CD(cudnnDropoutForward(h, dr, xd, dxp, xd, dy3, reserve2, reserve_size));
  compare("dropout through a restored descriptor continues the sequence", host(dy3, n), y2);
  expect(cudnnDropoutForward(h, dd, xd, dxp, xd, dy3, reserve2, reserve_size - 1), CUDNN_STATUS_BAD_PARAM,
         "dropout with a short reserve space");
  for (float* q : {dxp, dyp, dy2, ddy, ddx, dy3}) CK(cudaFree(q));
  CK(cudaFree(states));
  CK(cudaFree(reserve));
  CK(cudaFree(reserve2));
  CD(cudnnDestroyDropoutDescriptor(dd));
  CD(cudnnDestroyDropoutDescriptor(dr));
  CD(cudnnDestroyTensorDescriptor(xd));
}

// ---------------------------------------------------------------- reduction

static void test_reduce(cudnnHandle_t h) {
  const int N = 3, C = 4, H = 5, W = 6, n = N * C * H * W;
  cudnnTensorDescriptor_t ad = tensor(N, C, H, W), cd = tensor(1, C, 1, W), sd = tensor(1, 1, 1, 1);
  Vec a = rand_vec(n);
  for (auto& v : a) v = v * 0.9f + (v >= 0 ? 0.2f : -0.2f);  // products stay moderate
  a[17] = 0.0f;  // a zero: MUL gives 0 in its slice, MUL_NO_ZEROS skips it
  float* dap = dev(a);
  const int nc = C * W;
  Vec c0 = rand_vec(nc);
  const char* names[] = {"ADD", "MUL", "MIN", "MAX", "AMAX", "AVG", "NORM1", "NORM2", "MUL_NO_ZEROS"};
  cudnnReduceTensorDescriptor_t rd;
  CD(cudnnCreateReduceTensorDescriptor(&rd));
  const float alpha = 1.5f, beta = 0.5f;
  for (int op = 0; op <= 8; op++) {
    const bool idx = op >= 2 && op <= 4;
    CD(cudnnSetReduceTensorDescriptor(rd, cudnnReduceTensorOp_t(op), CUDNN_DATA_FLOAT, CUDNN_NOT_PROPAGATE_NAN,
                                      idx ? CUDNN_REDUCE_TENSOR_FLATTENED_INDICES : CUDNN_REDUCE_TENSOR_NO_INDICES,
                                      CUDNN_32BIT_INDICES));
    size_t isz = 0, wsz = 1;
    CD(cudnnGetReductionIndicesSize(h, rd, ad, cd, &isz));
    CD(cudnnGetReductionWorkspaceSize(h, rd, ad, cd, &wsz));
    Vec ref(nc);
    std::vector<unsigned> iref(nc);
    for (int c = 0; c < C; c++)
      for (int w = 0; w < W; w++) {
        double r = op == 1 || op == 8 ? 1 : op == 2 ? INFINITY : op == 3 ? -INFINITY : 0;
        unsigned at = 0;
        for (int nn = 0; nn < N; nn++)
          for (int hh = 0; hh < H; hh++) {
            const double v = a[((nn * C + c) * H + hh) * W + w];
            const unsigned pos = unsigned(nn * H + hh);
            switch (op) {
              case 0: case 5: r += v; break;
              case 1: r *= v; break;
              case 2: if (v < r) r = v, at = pos; break;
              case 3: if (v > r) r = v, at = pos; break;
              case 4: if (std::fabs(v) > r) r = std::fabs(v), at = pos; break;
              case 6: r += std::fabs(v); break;
              case 7: r += v * v; break;
              default: if (v != 0) r *= v; break;
            }
          }
        if (op == 5) r /= N * H;
        if (op == 7) r = std::sqrt(r);
        ref[c * W + w] = float(alpha * r + beta * c0[c * W + w]);
        iref[c * W + w] = at;
      }
    float* dcp = dev(c0);
    unsigned* dip = nullptr;
    if (isz) CK(cudaMalloc(&dip, isz));
    CD(cudnnReduceTensor(h, rd, dip, isz, nullptr, wsz, &alpha, ad, dap, &beta, cd, dcp));
    char what[128];
    std::snprintf(what, sizeof what, "reduce %s over N and H (alpha 1.5, beta 0.5)", names[op]);
    compare(what, host(dcp, nc), ref);
    if (idx) {
      std::vector<unsigned> gi(nc);
      CK(cudaMemcpy(gi.data(), dip, nc * 4, cudaMemcpyDeviceToHost));
      const bool same = gi == iref && isz == size_t(nc) * 4;
      std::printf("%s reduce %s indices (%zu bytes)\n", same ? "ok  " : "FAIL", names[op], isz);
      if (!same) failures++;
      CK(cudaFree(dip));
    }
    CK(cudaFree(dcp));
  }
  // Everything to one value.
  CD(cudnnSetReduceTensorDescriptor(rd, CUDNN_REDUCE_TENSOR_ADD, CUDNN_DATA_FLOAT, CUDNN_NOT_PROPAGATE_NAN,
                                    CUDNN_REDUCE_TENSOR_NO_INDICES, CUDNN_32BIT_INDICES));
  double sum = 0;
  for (float v : a) sum += v;
  float* dsp = dev_nan(1);
  const float one = 1, zero = 0;
  CD(cudnnReduceTensor(h, rd, nullptr, 0, nullptr, 0, &one, ad, dap, &zero, sd, dsp));
  compare("reduce ADD of the whole tensor", host(dsp, 1), Vec{float(sum)});
  cudnnTensorDescriptor_t bad = tensor(1, 2, 1, W);
  expect(cudnnReduceTensor(h, rd, nullptr, 0, nullptr, 0, &one, ad, dap, &zero, bad, dsp), CUDNN_STATUS_BAD_PARAM,
         "a reduction to a mismatched shape");
  CK(cudaFree(dap));
  CK(cudaFree(dsp));
  CD(cudnnDestroyReduceTensorDescriptor(rd));
  for (auto d : {ad, cd, sd, bad}) CD(cudnnDestroyTensorDescriptor(d));
}

// ---------------------------------------------------------------- half and bfloat16

// Values rounded to `dt` (what the device holds), and the device copies.
static float round_to(float v, cudnnDataType_t dt) {
  return dt == CUDNN_DATA_HALF ? __half2float(__float2half_rn(v)) : __bfloat162float(__float2bfloat16_rn(v));
}
static Vec rounded(Vec v, cudnnDataType_t dt) {
  for (auto& x : v) x = round_to(x, dt);
  return v;
}
static void* dev16(const Vec& v, cudnnDataType_t dt) {
  std::vector<unsigned short> b(v.size());
  for (size_t i = 0; i < v.size(); i++) {
    if (dt == CUDNN_DATA_HALF) {
      __half hv = __float2half_rn(v[i]);
      std::memcpy(&b[i], &hv, 2);
    } else {
      __nv_bfloat16 bv = __float2bfloat16_rn(v[i]);
      std::memcpy(&b[i], &bv, 2);
    }
  }
  void* p;
  CK(cudaMalloc(&p, b.size() * 2));
  CK(cudaMemcpy(p, b.data(), b.size() * 2, cudaMemcpyHostToDevice));
  return p;
}
static Vec host16(const void* p, size_t n, cudnnDataType_t dt) {
  std::vector<unsigned short> b(n);
  CK(cudaMemcpy(b.data(), p, n * 2, cudaMemcpyDeviceToHost));
  Vec v(n);
  for (size_t i = 0; i < n; i++) {
    if (dt == CUDNN_DATA_HALF) {
      __half hv;
      std::memcpy(&hv, &b[i], 2);
      v[i] = __half2float(hv);
    } else {
      __nv_bfloat16 bv;
      std::memcpy(&bv, &b[i], 2);
      v[i] = __bfloat162float(bv);
    }
  }
  return v;
}
static cudnnTensorDescriptor_t tensor_t(cudnnDataType_t dt, int n, int c, int h, int w) {
  cudnnTensorDescriptor_t d;
  CD(cudnnCreateTensorDescriptor(&d));
  CD(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, dt, n, c, h, w));
  return d;
}

// Convolution, pooling, activation, softmax, AddTensor, OpTensor, batch
// normalization and SetTensor on half or bfloat16 data, computed in float:
// the references use the rounded inputs, so the error is the output's
// rounding (2^-11 half, 2^-8 bfloat16, relative to the largest value).
static void test_lowp(cudnnHandle_t h, cudnnDataType_t dt, const char* tn) {
  const double tol = dt == CUDNN_DATA_HALF ? 1e-3 : 8e-3;
  const float one = 1, zero = 0;
  char what[160];
  // Convolution (pad 1, stride 2, groups 2), all three directions.
  const ConvShape s{2, 4, 9, 7, 6, 3, 3, 1, 1, 2, 2, 1, 1, 2, false};
  const int OH = s.OH(), OW = s.OW(), cg = s.C / s.G;
  Vec x = rounded(rand_vec(size_t(s.N) * s.C * s.H * s.W), dt), w = rounded(rand_vec(size_t(s.K) * cg * s.R * s.S), dt),
      dy = rounded(rand_vec(size_t(s.N) * s.K * OH * OW), dt);
  Vec y_ref(dy.size(), 0), dx_ref(x.size(), 0), dw_ref(w.size(), 0);
  conv_loop(s, [&](size_t xi, size_t wi, size_t yi) {
    y_ref[yi] += x[xi] * w[wi];
    dx_ref[xi] += dy[yi] * w[wi];
    dw_ref[wi] += dy[yi] * x[xi];
  });
  cudnnTensorDescriptor_t xd = tensor_t(dt, s.N, s.C, s.H, s.W), yd = tensor_t(dt, s.N, s.K, OH, OW);
  cudnnFilterDescriptor_t wd, wf;
  CD(cudnnCreateFilterDescriptor(&wd));
  CD(cudnnSetFilter4dDescriptor(wd, dt, CUDNN_TENSOR_NCHW, s.K, cg, s.R, s.S));
  cudnnConvolutionDescriptor_t cd;
  CD(cudnnCreateConvolutionDescriptor(&cd));
  CD(cudnnSetConvolution2dDescriptor(cd, s.ph, s.pw, s.sh, s.sw, s.dh, s.dw, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  CD(cudnnSetConvolutionGroupCount(cd, s.G));
  void *px = dev16(x, dt), *pw = dev16(w, dt), *pdy = dev16(dy, dt), *py = dev16(Vec(dy.size(), NAN), dt),
       *pdx = dev16(Vec(x.size(), NAN), dt), *pdw = dev16(Vec(w.size(), NAN), dt);
  CD(cudnnConvolutionForward(h, &one, xd, px, wd, pw, cd, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr, 0, &zero,
                             yd, py));
  CD(cudnnConvolutionBackwardData(h, &one, wd, pw, yd, pdy, cd, CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, nullptr, 0, &zero,
                                  xd, pdx));
  CD(cudnnConvolutionBackwardFilter(h, &one, xd, px, yd, pdy, cd, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, nullptr, 0,
                                    &zero, wd, pdw));
  std::snprintf(what, sizeof what, "%s convolution forward", tn);
  compare_tol(what, host16(py, y_ref.size(), dt), y_ref, tol);
  std::snprintf(what, sizeof what, "%s convolution backward data", tn);
  compare_tol(what, host16(pdx, x.size(), dt), dx_ref, tol);
  std::snprintf(what, sizeof what, "%s convolution backward filter", tn);
  compare_tol(what, host16(pdw, w.size(), dt), dw_ref, tol);
  CD(cudnnCreateFilterDescriptor(&wf));
  CD(cudnnSetFilter4dDescriptor(wf, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, s.K, cg, s.R, s.S));
  std::snprintf(what, sizeof what, "a %s convolution with a float filter", tn);
  expect(cudnnConvolutionForward(h, &one, xd, px, wf, pw, cd, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr, 0,
                                 &zero, yd, py),
         CUDNN_STATUS_BAD_PARAM, what);

  // Max pooling 2x2 stride 2 on y, forward and backward.
  const int PH = OH / 2, PW = OW / 2, NC = s.N * s.K;
  Vec yv = host16(py, y_ref.size(), dt), pref(size_t(NC) * PH * PW), pdy_v = rounded(rand_vec(pref.size()), dt),
      pdx_ref(yv.size(), 0);
  for (int nc = 0; nc < NC; nc++)
    for (int i = 0; i < PH; i++)
      for (int j = 0; j < PW; j++) {
        size_t arg = 0;
        float best = -INFINITY;
        for (int r = 0; r < 2; r++)
          for (int q = 0; q < 2; q++) {
            const size_t k = (size_t(nc) * OH + 2 * i + r) * OW + 2 * j + q;
            if (yv[k] > best) best = yv[k], arg = k;
          }
        pref[(size_t(nc) * PH + i) * PW + j] = best;
        pdx_ref[arg] += pdy_v[(size_t(nc) * PH + i) * PW + j];
      }
  cudnnPoolingDescriptor_t pd;
  CD(cudnnCreatePoolingDescriptor(&pd));
  CD(cudnnSetPooling2dDescriptor(pd, CUDNN_POOLING_MAX, CUDNN_NOT_PROPAGATE_NAN, 2, 2, 0, 0, 2, 2));
  cudnnTensorDescriptor_t pyd = tensor_t(dt, s.N, s.K, PH, PW);
  void *ppy = dev16(Vec(pref.size(), NAN), dt), *ppdy = dev16(pdy_v, dt), *ppdx = dev16(Vec(yv.size(), NAN), dt);
  CD(cudnnPoolingForward(h, pd, &one, yd, py, &zero, pyd, ppy));
  CD(cudnnPoolingBackward(h, pd, &one, pyd, ppy, pyd, ppdy, yd, py, &zero, yd, ppdx));
  std::snprintf(what, sizeof what, "%s max pooling forward", tn);
  compare_tol(what, host16(ppy, pref.size(), dt), pref, tol);
  std::snprintf(what, sizeof what, "%s max pooling backward", tn);
  compare_tol(what, host16(ppdx, yv.size(), dt), pdx_ref, tol);

  // Sigmoid forward and backward on x.
  Vec sy(x.size()), sdx(x.size()), sdy = rounded(rand_vec(x.size()), dt);
  for (size_t i = 0; i < x.size(); i++) sy[i] = float(1 / (1 + std::exp(-double(x[i]))));
  Vec syr = rounded(sy, dt);  // backward reads the y it is given: the rounded one
  for (size_t i = 0; i < x.size(); i++) sdx[i] = float(double(sy[i]) * (1 - sy[i]) * sdy[i]);
  cudnnActivationDescriptor_t ad;
  CD(cudnnCreateActivationDescriptor(&ad));
  CD(cudnnSetActivationDescriptor(ad, CUDNN_ACTIVATION_SIGMOID, CUDNN_NOT_PROPAGATE_NAN, 0));
  void *pay = dev16(Vec(x.size(), NAN), dt), *pady = dev16(sdy, dt), *padx = dev16(Vec(x.size(), NAN), dt);
  CD(cudnnActivationForward(h, ad, &one, xd, px, &zero, xd, pay));
  CD(cudnnActivationBackward(h, ad, &one, xd, pay, xd, pady, xd, px, &zero, xd, padx));
  std::snprintf(what, sizeof what, "%s sigmoid forward", tn);
  compare_tol(what, host16(pay, x.size(), dt), sy, tol);
  std::snprintf(what, sizeof what, "%s sigmoid backward", tn);
  compare_tol(what, host16(padx, x.size(), dt), sdx, 2 * tol);

  // Softmax (accurate, channel) of x.
  Vec smx(x.size());
  const int HW = s.H * s.W;
  for (int n = 0; n < s.N; n++)
    for (int p = 0; p < HW; p++) {
      double mx = -INFINITY, sum = 0;
      for (int c = 0; c < s.C; c++) mx = std::fmax(mx, x[(size_t(n) * s.C + c) * HW + p]);
      for (int c = 0; c < s.C; c++) sum += std::exp(x[(size_t(n) * s.C + c) * HW + p] - mx);
      for (int c = 0; c < s.C; c++)
        smx[(size_t(n) * s.C + c) * HW + p] = float(std::exp(x[(size_t(n) * s.C + c) * HW + p] - mx) / sum);
    }
  void* psm = dev16(Vec(x.size(), NAN), dt);
  CD(cudnnSoftmaxForward(h, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_CHANNEL, &one, xd, px, &zero, xd, psm));
  std::snprintf(what, sizeof what, "%s softmax forward", tn);
  compare_tol(what, host16(psm, x.size(), dt), smx, tol);

  // AddTensor: a per-channel bias added to y (beta 1); OpTensor MUL y * y.
  Vec bias = rounded(rand_vec(s.K), dt), add_ref(yv.size()), mul_ref(yv.size());
  for (size_t i = 0; i < yv.size(); i++) {
    add_ref[i] = yv[i] + bias[(i / (size_t(OH) * OW)) % s.K];
    mul_ref[i] = yv[i] * yv[i];
  }
  cudnnTensorDescriptor_t bd = tensor_t(dt, 1, s.K, 1, 1);
  void *pb = dev16(bias, dt), *pmul = dev16(Vec(yv.size(), NAN), dt);
  cudnnOpTensorDescriptor_t od;
  CD(cudnnCreateOpTensorDescriptor(&od));
  CD(cudnnSetOpTensorDescriptor(od, CUDNN_OP_TENSOR_MUL, CUDNN_DATA_FLOAT, CUDNN_NOT_PROPAGATE_NAN));
  CD(cudnnOpTensor(h, od, &one, yd, py, &one, yd, py, &zero, yd, pmul));
  CD(cudnnAddTensor(h, &one, bd, pb, &one, yd, py));
  std::snprintf(what, sizeof what, "%s OpTensor MUL", tn);
  compare_tol(what, host16(pmul, yv.size(), dt), mul_ref, tol);
  std::snprintf(what, sizeof what, "%s AddTensor (bias, beta 1)", tn);
  compare_tol(what, host16(py, yv.size(), dt), add_ref, tol);

  // Batch normalization (spatial) of x with float parameters.
  cudnnTensorDescriptor_t bnd;
  CD(cudnnCreateTensorDescriptor(&bnd));
  CD(cudnnDeriveBNTensorDescriptor(bnd, xd, CUDNN_BATCHNORM_SPATIAL));
  Vec scale = rand_vec(s.C), shift = rand_vec(s.C), bn_ref(x.size());
  for (int c = 0; c < s.C; c++) {
    double m = 0, v = 0;
    for (int n = 0; n < s.N; n++)
      for (int p = 0; p < HW; p++) m += x[(size_t(n) * s.C + c) * HW + p];
    m /= s.N * HW;
    for (int n = 0; n < s.N; n++)
      for (int p = 0; p < HW; p++) v += std::pow(x[(size_t(n) * s.C + c) * HW + p] - m, 2);
    v /= s.N * HW;
    for (int n = 0; n < s.N; n++)
      for (int p = 0; p < HW; p++) {
        const size_t i = (size_t(n) * s.C + c) * HW + p;
        bn_ref[i] = float(scale[c] * (x[i] - m) / std::sqrt(v + 1e-5) + shift[c]);
      }
  }
  float *pscale = dev(scale), *pshift = dev(shift);
  void* pbn = dev16(Vec(x.size(), NAN), dt);
  CD(cudnnBatchNormalizationForwardTraining(h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, xd, px, xd, pbn, bnd, pscale,
                                            pshift, 1.0, nullptr, nullptr, 1e-5, nullptr, nullptr));
  std::snprintf(what, sizeof what, "%s batch normalization forward (float parameters)", tn);
  compare_tol(what, host16(pbn, x.size(), dt), bn_ref, tol);

  // SetTensor takes its value in the tensor's type.
  unsigned short v16;
  if (dt == CUDNN_DATA_HALF) {
    __half hv = __float2half_rn(-2.5f);
    std::memcpy(&v16, &hv, 2);
  } else {
    __nv_bfloat16 bv = __float2bfloat16_rn(-2.5f);
    std::memcpy(&v16, &bv, 2);
  }
  CD(cudnnSetTensor(h, pyd, ppy, &v16));
  std::snprintf(what, sizeof what, "%s SetTensor -2.5", tn);
  compare_tol(what, host16(ppy, pref.size(), dt), Vec(pref.size(), -2.5f), 0);

  for (void* p : {px, pw, pdy, py, pdx, pdw, ppy, ppdy, ppdx, pay, pady, padx, psm, pb, pmul, pbn}) CK(cudaFree(p));
  for (float* p : {pscale, pshift}) CK(cudaFree(p));
  for (auto d : {xd, yd, pyd, bd, bnd}) CD(cudnnDestroyTensorDescriptor(d));
  CD(cudnnDestroyFilterDescriptor(wd));
  CD(cudnnDestroyFilterDescriptor(wf));
  CD(cudnnDestroyConvolutionDescriptor(cd));
  CD(cudnnDestroyPoolingDescriptor(pd));
  CD(cudnnDestroyActivationDescriptor(ad));
  CD(cudnnDestroyOpTensorDescriptor(od));
}

// ---------------------------------------------------------------- fused convolution, bias, activation

// cudnnConvolutionBiasActivationForward: y = act(alpha1 conv(x, w) + alpha2 z
// + bias) against the reference loops: ReLU with z unread (alpha2 0, y full
// of NaNs), ReLU with a separate z, identity with z the output itself (a
// residual add in place); ReLU must have clipped something, and the other
// activations are refused as cuDNN refuses them.
static void test_conv_bias_act(cudnnHandle_t h) {
  const ConvShape s{2, 4, 7, 6, 6, 3, 3, 1, 1, 1, 1, 1, 1, 2, false};
  const int OH = s.OH(), OW = s.OW(), cg = s.C / s.G;
  const size_t ny = size_t(s.N) * s.K * OH * OW;
  Vec x = rand_vec(size_t(s.N) * s.C * s.H * s.W), w = rand_vec(size_t(s.K) * cg * s.R * s.S), bias = rand_vec(s.K),
      z = rand_vec(ny), conv(ny, 0);
  conv_loop(s, [&](size_t xi, size_t wi, size_t yi) { conv[yi] += x[xi] * w[wi]; });
  auto ref = [&](float a1, float a2, const Vec& zz, bool relu) {
    Vec r(ny);
    for (size_t i = 0; i < ny; i++) {
      const float v = a1 * conv[i] + a2 * zz[i] + bias[(i / (size_t(OH) * OW)) % s.K];
      r[i] = relu ? std::max(v, 0.0f) : v;
    }
    return r;
  };
  cudnnTensorDescriptor_t xd = tensor(s.N, s.C, s.H, s.W), yd = tensor(s.N, s.K, OH, OW), bd = tensor(1, s.K, 1, 1),
                          bad_bd = tensor(1, s.K + 1, 1, 1);
  cudnnFilterDescriptor_t wd;
  CD(cudnnCreateFilterDescriptor(&wd));
  CD(cudnnSetFilter4dDescriptor(wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, s.K, cg, s.R, s.S));
  cudnnConvolutionDescriptor_t cd;
  CD(cudnnCreateConvolutionDescriptor(&cd));
  CD(cudnnSetConvolution2dDescriptor(cd, s.ph, s.pw, s.sh, s.sw, s.dh, s.dw, CUDNN_CROSS_CORRELATION,
                                     CUDNN_DATA_FLOAT));
  CD(cudnnSetConvolutionGroupCount(cd, s.G));
  cudnnActivationDescriptor_t relu, ident, sigm;
  for (auto* a : {&relu, &ident, &sigm}) CD(cudnnCreateActivationDescriptor(a));
  CD(cudnnSetActivationDescriptor(relu, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0));
  CD(cudnnSetActivationDescriptor(ident, CUDNN_ACTIVATION_IDENTITY, CUDNN_NOT_PROPAGATE_NAN, 0));
  CD(cudnnSetActivationDescriptor(sigm, CUDNN_ACTIVATION_SIGMOID, CUDNN_NOT_PROPAGATE_NAN, 0));
  const auto algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
  size_t wsz = 0;
  CD(cudnnGetConvolutionForwardWorkspaceSize(h, xd, wd, cd, yd, algo, &wsz));
  void* ws = nullptr;
  if (wsz) CK(cudaMalloc(&ws, wsz));
  float *px = dev(x), *pw = dev(w), *pb = dev(bias), *pz = dev(z), *py = dev_nan(ny);
  const float one = 1, zero = 0, a1 = 0.5f, a2 = 0.75f;

  CD(cudnnConvolutionBiasActivationForward(h, &one, xd, px, wd, pw, cd, algo, ws, wsz, &zero, yd, py, bd, pb, relu,
                                           yd, py));
  const Vec want = ref(1, 0, Vec(ny, 0), true);
  compare("conv+bias+relu (alpha2 0, z = y full of NaNs)", host(py, ny), want);
  const size_t clipped = size_t(std::count(want.begin(), want.end(), 0.0f));
  std::printf("%s conv+bias+relu clipped %zu of %zu outputs\n", clipped && clipped < ny ? "ok  " : "FAIL", clipped, ny);
  if (!clipped || clipped == ny) failures++;
  CD(cudnnConvolutionBiasActivationForward(h, &a1, xd, px, wd, pw, cd, algo, ws, wsz, &a2, yd, pz, bd, pb, relu, yd,
                                           py));
  compare("conv+bias+relu (alpha1 0.5, alpha2 0.75, separate z)", host(py, ny), ref(a1, a2, z, true));
  CK(cudaMemcpy(py, z.data(), ny * 4, cudaMemcpyHostToDevice));
  CD(cudnnConvolutionBiasActivationForward(h, &one, xd, px, wd, pw, cd, algo, ws, wsz, &one, yd, py, bd, pb, ident,
                                           yd, py));
  compare("conv+bias+identity (z is y: residual add in place)", host(py, ny), ref(1, 1, z, false));

  expect(cudnnConvolutionBiasActivationForward(h, &one, xd, px, wd, pw, cd, algo, ws, wsz, &zero, yd, py, bd, pb, sigm,
                                               yd, py),
         CUDNN_STATUS_NOT_SUPPORTED, "conv+bias+sigmoid refused");
  expect(cudnnConvolutionBiasActivationForward(h, &one, xd, px, wd, pw, cd, algo, ws, wsz, &zero, yd, py, bad_bd, pb,
                                               relu, yd, py),
         CUDNN_STATUS_BAD_PARAM, "conv+bias+relu with a bias of K+1 channels refused");
  for (float* p : {px, pw, pb, pz, py}) CK(cudaFree(p));
  if (ws) CK(cudaFree(ws));
  for (auto d : {xd, yd, bd, bad_bd}) CD(cudnnDestroyTensorDescriptor(d));
  for (auto a : {relu, ident, sigm}) CD(cudnnDestroyActivationDescriptor(a));
  CD(cudnnDestroyFilterDescriptor(wd));
  CD(cudnnDestroyConvolutionDescriptor(cd));
}

int main() {
  std::printf("cuDNN release %zu\n", cudnnGetVersion());
  cudnnHandle_t h;
  CD(cudnnCreate(&h));
  cudaStream_t stream;
  CK(cudaStreamCreate(&stream));
  CD(cudnnSetStream(h, stream));

  test_conv("conv pad 1 stride 2 groups 2", {2, 4, 9, 7, 6, 3, 3, 1, 1, 2, 2, 1, 1, 2, false}, h);
  test_conv("conv 5x5 (LeNet's first layer)", {3, 1, 28, 28, 6, 5, 5, 0, 0, 1, 1, 1, 1, 1, false}, h);
  test_conv("true convolution, dilation 2, pad 2x1", {2, 3, 10, 9, 4, 3, 2, 2, 1, 1, 1, 2, 2, 1, true}, h);
  test_conv("NHWC filter, true convolution, dilation 2, groups 2", {2, 4, 9, 8, 6, 3, 2, 1, 2, 2, 1, 2, 1, 2, true}, h,
            true);
  // The last window stops short of the input's end (oneDNN's right padding < 0).
  test_conv("stride 3 leaving a remainder", {2, 2, 10, 11, 3, 2, 2, 0, 1, 3, 3, 1, 1, 1, false}, h);
  test_pool(h, CUDNN_POOLING_MAX, "max 3x3 pad 1 stride 2");
  test_pool(h, CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING, "average (including padding) 3x3 pad 1 stride 2");
  test_act(h, CUDNN_ACTIVATION_SIGMOID, 0, "sigmoid");
  test_act(h, CUDNN_ACTIVATION_RELU, 0, "relu");
  test_act(h, CUDNN_ACTIVATION_TANH, 0, "tanh");
  test_act(h, CUDNN_ACTIVATION_CLIPPED_RELU, 1.5, "clipped relu 1.5");
  test_act(h, CUDNN_ACTIVATION_ELU, 0.7, "elu 0.7");
  test_softmax(h, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_INSTANCE, "accurate instance");
  test_softmax(h, CUDNN_SOFTMAX_LOG, CUDNN_SOFTMAX_MODE_CHANNEL, "log channel");
  test_softmax(h, CUDNN_SOFTMAX_FAST, CUDNN_SOFTMAX_MODE_CHANNEL, "fast channel");
  test_add_strided(h);
  test_tensor_ops(h);
  test_refusals(h);
  test_bn(h, CUDNN_BATCHNORM_SPATIAL, "spatial");
  test_bn(h, CUDNN_BATCHNORM_PER_ACTIVATION, "per-activation");
  test_bn(h, CUDNN_BATCHNORM_SPATIAL_PERSISTENT, "spatial persistent");
  test_lrn(h);
  test_dropout(h);
  test_reduce(h);
  test_lowp(h, CUDNN_DATA_HALF, "half");
  test_lowp(h, CUDNN_DATA_BFLOAT16, "bfloat16");
  test_conv_bias_act(h);

  CK(cudaStreamSynchronize(stream));
  CD(cudnnDestroy(h));
  CK(cudaStreamDestroy(stream));
  if (failures) {
    std::printf("FAILED: %d check(s)\n", failures);
    return 1;
  }
  std::printf("PASSED: every cuDNN operation matched its host reference\n");
  return 0;
}
