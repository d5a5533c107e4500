// cuDNN as users write it, forwarded through Wormhole's drop-ins
// (libcudart.so.13 + libcudnn.so.9) and checked on the host against
// straightforward reference loops:
//   convolution forward (padding, stride, groups; cross-correlation and
//   true convolution with dilation), backward data, backward filter,
//   backward bias; max and average pooling forward and backward;
//   activations (sigmoid, relu, tanh, clipped relu, elu) forward and
//   backward; softmax (accurate/instance, log/channel) forward and
//   backward; AddTensor with a broadcast bias; TransformTensor, OpTensor,
//   SetTensor and ScaleTensor; alpha/beta blending, with
//   beta = 0 ignoring NaNs already in the output; a strided input tensor;
//   the algorithm and work-size queries; and the synchronous refusals of
//   bad arguments.
// Tolerance: 1e-4 relative to the largest magnitude of the reference
// (float data, float accumulation order differs); the measured errors are
// printed.
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                                \
  do {                                                                                       \
    cudaError_t e_ = (x);                                                                    \
    if (e_ != cudaSuccess) {                                                                 \
      std::printf("FAIL %s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));    \
      std::exit(1);                                                                          \
    }                                                                                        \
  } while (0)
#define CD(x)                                                                                \
  do {                                                                                       \
    cudnnStatus_t s_ = (x);                                                                  \
    if (s_ != CUDNN_STATUS_SUCCESS) {                                                        \
      std::printf("FAIL %s:%d %s: %s\n", __FILE__, __LINE__, #x, cudnnGetErrorString(s_));   \
      std::exit(1);                                                                          \
    }                                                                                        \
  } while (0)

using Vec = std::vector<float>;
static int failures = 0;
static const double kTol = 1e-4;

static void compare(const char* what, const Vec& got, const Vec& want) {
  double scale = 1e-30, err = 0;
  for (float v : want) scale = std::fmax(scale, std::fabs(v));
  bool ok = got.size() == want.size();
  for (size_t i = 0; ok && i < got.size(); i++) {
    if (!std::isfinite(got[i])) ok = false;
    err = std::fmax(err, std::fabs(double(got[i]) - want[i]) / scale);
  }
  ok = ok && err <= kTol;
  std::printf("%s %s: max relative error %.3g (tolerance %.3g)\n", ok ? "ok  " : "FAIL", what, err, kTol);
  if (!ok) failures++;
}
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

static void test_conv(const char* name, const ConvShape& s, cudnnHandle_t h) {
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
  CD(cudnnSetFilter4dDescriptor(wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, s.K, cg, s.R, s.S));
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

  float *px = dev(x), *pw = dev(w), *pdy = dev(dy), *py = dev_nan(y_ref.size()), *pdx = dev_nan(x.size()),
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
  compare(what, host(pdw, w.size()), dw_ref);
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
