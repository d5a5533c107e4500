// cudnn_check.hpp - the checks of cuDNN's descriptors and of the shapes
// each forwarded call combines, run by the guest library (to return
// cuDNN's status at once) and again by the server (the guest is not
// trusted). Header-only, no dependency beyond the wire structs.
//
// What Wormhole forwards: 4-d (N, C, H, W) float, half or bfloat16 tensors
// (one type per operation's data; batch normalization's parameters float) with any positive
// strides, NCHW or NHWC (K, R, S, C) filters, 2-d convolutions (padding, stride, dilation,
// groups, convolution or cross-correlation), 2-d pooling. Every dimension
// and stride is below 2^31 and every tensor spans fewer than 2^31
// elements (what the backends index with int arithmetic).
#pragma once

#include <cstdint>

#include "wormhole/proto/wire.hpp"

namespace wh::proto::dnn {

// cudnnStatus_t values.
constexpr int32_t kOk = 0, kBadParam = 2000, kNotSupported = 3000;
// cudnnDataType_t / cudnnTensorFormat_t values.
constexpr int32_t kFloat = 0, kHalf = 2, kBf16 = 9, kNCHW = 0, kNHWC = 1;
constexpr int64_t kMaxElems = int64_t(1) << 31;

// The data types forwarded: float, and half / bfloat16 (computed in float).
inline bool dtype_ok(int32_t d) { return d == kFloat || d == kHalf || d == kBf16; }
// Bytes per element (8 for what is not forwarded: the widest, for range checks).
inline uint64_t elem_bytes(int32_t d) { return d == kFloat ? 4 : (d == kHalf || d == kBf16) ? 2 : 8; }

// The elements a tensor spans: highest index + 1 (0 when invalid). A
// tensor with more elements than its span (strides that overlap, elements
// aliasing each other) is invalid too: its element count, which sizes the
// work of every operation, stays bounded by the memory it lies in.
inline int64_t span(const DnnTensor& t) {
  if (t.nb < 1 || t.nb > kDnnMaxDims) return 0;
  int64_t last = 0, n = 1;
  for (int k = 0; k < t.nb; k++) {
    if (t.dim[k] < 1 || t.stride[k] < 1) return 0;
    last += int64_t(t.dim[k] - 1) * int64_t(t.stride[k]);  // < 2^62 each, 8 terms: no overflow
    if (last >= kMaxElems) return 0;
    n *= t.dim[k];  // < 2^31 before, each dim < 2^31: no overflow
    if (n >= kMaxElems) return 0;
  }
  return n > last + 1 ? 0 : last + 1;
}
inline int64_t count(const DnnTensor& t) {
  int64_t n = 1;
  for (int k = 0; k < t.nb; k++) n *= t.dim[k];  // bounded by the span (span() refuses more)
  return n;
}

// A tensor descriptor as cudnnSetTensor*Descriptor accepts it.
inline int32_t check_tensor(const DnnTensor& t) {
  if (t.nb < 1 || t.nb > kDnnMaxDims) return kBadParam;
  if (span(t) == 0) return kBadParam;
  if (!dtype_ok(t.dtype)) return kNotSupported;
  return kOk;
}
// A 4-d tensor (what every forwarded operation takes).
inline int32_t check_tensor4(const DnnTensor& t) {
  if (int32_t r = check_tensor(t)) return r;
  return t.nb == 4 ? kOk : kNotSupported;
}
inline bool same_dims(const DnnTensor& a, const DnnTensor& b) {
  if (a.nb != b.nb) return false;
  for (int k = 0; k < a.nb; k++)
    if (a.dim[k] != b.dim[k]) return false;
  return true;
}

inline int32_t check_filter(const DnnFilter& f) {
  if (f.nb < 3 || f.nb > kDnnMaxDims) return kBadParam;
  int64_t n = 1;
  for (int k = 0; k < f.nb; k++) {
    if (f.dim[k] < 1) return kBadParam;
    n *= f.dim[k];
    if (n >= kMaxElems) return kBadParam;
  }
  if (!dtype_ok(f.dtype) || (f.format != kNCHW && f.format != kNHWC) || f.nb != 4) return kNotSupported;
  return kOk;
}
inline int64_t filter_count(const DnnFilter& f) {
  int64_t n = 1;
  for (int k = 0; k < f.nb; k++) n *= f.dim[k];
  return n;
}

inline int32_t check_conv(const DnnConv& c) {
  if (c.nb < 1 || c.nb > 6 || c.groups < 1 || (c.mode != 0 && c.mode != 1)) return kBadParam;
  for (int k = 0; k < c.nb; k++)
    if (c.pad[k] < 0 || c.stride[k] < 1 || c.dil[k] < 1 || c.pad[k] >= (1 << 24) || c.stride[k] >= (1 << 24) ||
        c.dil[k] >= (1 << 24))
      return kBadParam;
  return c.nb == 2 ? kOk : kNotSupported;
}

// cudnnGetConvolution2dForwardOutputDim: the output of x convolved with w.
inline int32_t conv_output(const DnnTensor& x, const DnnFilter& w, const DnnConv& c, int32_t out[4]) {
  if (int32_t r = check_tensor4(x)) return r;
  if (int32_t r = check_filter(w)) return r;
  if (int32_t r = check_conv(c)) return r;
  if (int64_t(w.dim[1]) * c.groups != x.dim[1] || w.dim[0] % c.groups) return kBadParam;
  out[0] = x.dim[0];
  out[1] = w.dim[0];
  for (int k = 0; k < 2; k++) {
    const int64_t ext = int64_t(w.dim[2 + k] - 1) * c.dil[k] + 1;
    const int64_t in = int64_t(x.dim[2 + k]) + 2 * int64_t(c.pad[k]);
    if (in < ext) return kBadParam;
    out[2 + k] = int32_t((in - ext) / c.stride[k] + 1);
  }
  return kOk;
}
// x, w, y of one convolution (forward or either backward) agree.
inline int32_t check_conv_shapes(const DnnTensor& x, const DnnFilter& w, const DnnConv& c, const DnnTensor& y) {
  int32_t o[4];
  if (int32_t r = conv_output(x, w, c, o)) return r;
  if (int32_t r = check_tensor4(y)) return r;
  for (int k = 0; k < 4; k++)
    if (y.dim[k] != o[k]) return kBadParam;
  if (x.dtype != w.dtype || x.dtype != y.dtype) return kBadParam;
  return kOk;
}

// Bias gradient: db is 1 x C x 1 x 1 of dy's C.
inline int32_t check_bias(const DnnTensor& dy, const DnnTensor& db) {
  if (int32_t r = check_tensor4(dy)) return r;
  if (int32_t r = check_tensor4(db)) return r;
  if (db.dim[0] != 1 || db.dim[1] != dy.dim[1] || db.dim[2] != 1 || db.dim[3] != 1) return kBadParam;
  return kOk;
}
// cudnnAddTensor: each of a's dimensions is c's or 1.
inline int32_t check_add(const DnnTensor& a, const DnnTensor& c) {
  if (int32_t r = check_tensor(a)) return r;
  if (int32_t r = check_tensor(c)) return r;
  if (a.nb != c.nb) return kBadParam;
  for (int k = 0; k < a.nb; k++)
    if (a.dim[k] != c.dim[k] && a.dim[k] != 1) return kBadParam;
  return kOk;
}

inline int32_t check_pool(const DnnPool& p) {
  if (p.mode < 0 || p.mode > 3 || p.nb < 1 || p.nb > 6) return kBadParam;
  for (int k = 0; k < p.nb; k++)
    if (p.window[k] < 1 || p.padding[k] < 0 || p.stride[k] < 1 || p.window[k] >= (1 << 24) ||
        p.padding[k] >= (1 << 24) || p.stride[k] >= (1 << 24))
      return kBadParam;
  return p.nb == 2 ? kOk : kNotSupported;
}
// cudnnGetPooling2dForwardOutputDim.
inline int32_t pool_output(const DnnPool& p, const DnnTensor& x, int32_t out[4]) {
  if (int32_t r = check_pool(p)) return r;
  if (int32_t r = check_tensor4(x)) return r;
  out[0] = x.dim[0];
  out[1] = x.dim[1];
  for (int k = 0; k < 2; k++) {
    const int64_t in = int64_t(x.dim[2 + k]) + 2 * int64_t(p.padding[k]);
    if (in < p.window[k] || p.padding[k] >= p.window[k]) return kBadParam;
    out[2 + k] = int32_t((in - p.window[k]) / p.stride[k] + 1);
  }
  return kOk;
}
inline int32_t check_pool_shapes(const DnnPool& p, const DnnTensor& x, const DnnTensor& y) {
  int32_t o[4];
  if (int32_t r = pool_output(p, x, o)) return r;
  if (int32_t r = check_tensor4(y)) return r;
  for (int k = 0; k < 4; k++)
    if (y.dim[k] != o[k]) return kBadParam;
  return x.dtype == y.dtype ? kOk : kBadParam;
}

// cudnnActivationMode_t: SIGMOID RELU TANH CLIPPED_RELU ELU IDENTITY SWISH.
inline int32_t check_act(const DnnAct& a) {
  if (a.mode < 0 || a.mode > 6 || (a.nan_opt != 0 && a.nan_opt != 1)) return kBadParam;
  if (!(a.coef == a.coef)) return kBadParam;  // NaN
  return kOk;
}
// Element-wise ops: every tensor has the first one's dimensions.
inline int32_t check_same(const DnnTensor& a, const DnnTensor& b) {
  if (int32_t r = check_tensor4(a)) return r;
  if (int32_t r = check_tensor4(b)) return r;
  return same_dims(a, b) && a.dtype == b.dtype ? kOk : kBadParam;
}
// cudnnConvolutionBiasActivationForward: a convolution, z of y's shape and
// type, bias 1 x C x 1 x 1 of y's type, and one of the two activations
// cuDNN fuses (RELU, IDENTITY; others are not supported).
constexpr int32_t kActRelu = 1, kActIdentity = 5;
inline int32_t check_conv_bias_act(const DnnTensor& x, const DnnFilter& w, const DnnConv& c, const DnnTensor& z,
                                   const DnnTensor& bias, const DnnAct& act, const DnnTensor& y) {
  if (int32_t r = check_conv_shapes(x, w, c, y)) return r;
  if (int32_t r = check_same(z, y)) return r;
  if (int32_t r = check_bias(y, bias)) return r;
  if (bias.dtype != y.dtype) return kBadParam;
  if (int32_t r = check_act(act)) return r;
  return act.mode == kActRelu || act.mode == kActIdentity ? kOk : kNotSupported;
}
inline int32_t check_softmax(int32_t algo, int32_t mode) {
  return (algo < 0 || algo > 2 || mode < 0 || mode > 1) ? kBadParam : kOk;
}

// cudnnTransformTensor: any dimension count, the same dimensions.
inline int32_t check_transform(const DnnTensor& x, const DnnTensor& y) {
  if (int32_t r = check_tensor(x)) return r;
  if (int32_t r = check_tensor(y)) return r;
  return same_dims(x, y) ? kOk : kBadParam;
}
// cudnnOpTensorOp_t: ADD MUL MIN MAX SQRT (NOT is not forwarded).
inline bool op_uses_b(int32_t op) { return op != 4; }
inline int32_t check_op_tensor(int32_t op, int32_t nan_opt, const DnnTensor& a, const DnnTensor& b,
                               const DnnTensor& c) {
  if (op < 0 || op > 5 || (nan_opt != 0 && nan_opt != 1)) return kBadParam;
  if (op == 5) return kNotSupported;
  if (int32_t r = check_transform(a, c)) return r;
  if (op_uses_b(op))
    if (int32_t r = check_add(b, c)) return r;
  return kOk;
}

// ---- batch normalization, LRN, dropout, reduction (plain float tensors
// of 4 or 5 dimensions, any positive strides).
inline int32_t check_tensor45(const DnnTensor& t) {
  if (int32_t r = check_tensor(t)) return r;
  return (t.nb == 4 || t.nb == 5) ? kOk : kNotSupported;
}
inline bool finite(double v) { return v == v && v - v == 0; }

// cudnnBatchNormMode_t: PER_ACTIVATION SPATIAL SPATIAL_PERSISTENT.
inline bool bn_spatial(int32_t mode) { return mode != 0; }
// The dimensions of the scale/bias/mean/variance tensor of x in `mode`
// (cudnnDeriveBNTensorDescriptor).
inline int32_t bn_dims(const DnnTensor& x, int32_t mode, DnnTensor* bn) {
  if (mode < 0 || mode > 2) return kBadParam;
  if (int32_t r = check_tensor45(x)) return r;
  DnnTensor b{};
  b.dtype = kFloat, b.nb = x.nb;
  b.dim[0] = 1, b.dim[1] = x.dim[1];
  for (int k = 2; k < x.nb; k++) b.dim[k] = bn_spatial(mode) ? 1 : x.dim[k];
  int64_t s = 1;
  for (int k = x.nb - 1; k >= 0; k--) b.stride[k] = int32_t(s), s *= b.dim[k];
  *bn = b;
  return kOk;
}
// x and y (or dy, dx) of one batch normalization and its parameter tensor.
inline int32_t check_bn(int32_t mode, const DnnTensor& x, const DnnTensor& y, const DnnTensor& bn, double eps) {
  DnnTensor want;
  if (int32_t r = bn_dims(x, mode, &want)) return r;
  if (int32_t r = check_tensor45(y)) return r;
  if (int32_t r = check_tensor45(bn)) return r;
  if (!same_dims(x, y) || x.dtype != y.dtype || !same_dims(bn, want) || bn.dtype != kFloat)
    return kBadParam;  // float parameters
  if (!finite(eps) || eps < 0) return kBadParam;
  return kOk;
}
// The number of values normalised together (the statistics' sample count).
inline int64_t bn_samples(const DnnTensor& x, int32_t mode) {
  int64_t m = x.dim[0];
  if (bn_spatial(mode))
    for (int k = 2; k < x.nb; k++) m *= x.dim[k];
  return m;
}

// cudnnSetLRNDescriptor's limits.
inline int32_t check_lrn(const DnnLrn& l) {
  if (l.n < 1 || l.n > 16 || !finite(l.alpha) || !finite(l.beta) || !finite(l.k) || l.beta < 0.01 || l.k < 1e-5)
    return kBadParam;
  return kOk;
}
inline int32_t check_lrn_shapes(const DnnLrn& l, const DnnTensor& x, const DnnTensor& y) {
  if (int32_t r = check_lrn(l)) return r;
  if (int32_t r = check_tensor45(x)) return r;
  if (int32_t r = check_tensor45(y)) return r;
  return same_dims(x, y) && x.dtype == y.dtype ? kOk : kBadParam;
}

// Dropout: the generator state's size (cudnnDropoutGetStatesSize) and the
// mask's (one byte per element).
constexpr uint64_t kDropoutStates = 64;
inline int32_t check_dropout(double p) { return (finite(p) && p >= 0 && p <= 1) ? kOk : kBadParam; }
inline uint64_t dropout_reserve(const DnnTensor& x) { return uint64_t(count(x)); }
inline int32_t check_dropout_shapes(double p, const DnnTensor& x, const DnnTensor& y) {
  if (int32_t r = check_dropout(p)) return r;
  if (int32_t r = check_transform(x, y)) return r;
  return x.dtype == y.dtype ? kOk : kBadParam;
}

// cudnnReduceTensorOp_t: ADD MUL MIN MAX AMAX AVG NORM1 NORM2 MUL_NO_ZEROS.
inline bool reduce_has_indices(const DnnReduce& r) { return r.indices == 1 && r.op >= 2 && r.op <= 4; }
inline int32_t check_reduce(const DnnReduce& r) {
  if (r.op < 0 || r.op > 8 || (r.nan_opt != 0 && r.nan_opt != 1) || (r.indices != 0 && r.indices != 1) ||
      r.idx_type < 0 || r.idx_type > 3)
    return kBadParam;
  if (r.comp != kFloat) return kNotSupported;
  if (reduce_has_indices(r) && r.idx_type != 0) return kNotSupported;  // 32-bit indices only
  return kOk;
}
// c's dimensions are a's, or 1 where a is reduced.
inline int32_t check_reduce_shapes(const DnnReduce& r, const DnnTensor& a, const DnnTensor& c) {
  if (int32_t e = check_reduce(r)) return e;
  if (int32_t e = check_tensor(a)) return e;
  if (int32_t e = check_tensor(c)) return e;
  if (a.nb != c.nb) return kBadParam;
  for (int k = 0; k < a.nb; k++)
    if (c.dim[k] != a.dim[k] && c.dim[k] != 1) return kBadParam;
  return kOk;
}
inline uint64_t reduce_indices_size(const DnnReduce& r, const DnnTensor& c) {
  return reduce_has_indices(r) ? uint64_t(count(c)) * 4 : 0;
}

}  // namespace wh::proto::dnn
