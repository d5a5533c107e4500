// cublaslt_check.hpp - the checks of one LtMatmul request (cublaslt_api.def)
// that need nothing but the request: supported type combinations, layouts,
// shapes, epilogue and pointer-mode requirements, and the device bytes each
// operand spans. The guest library runs them before posting a matmul (so
// cublasLtMatmul returns the precise status at once); the server runs them
// again (the guest is not trusted) and checks the spans against the
// session's memory.
#pragma once

#include <cstdint>

#include "wormhole/proto/wire.hpp"

namespace wh::proto {

// cudaDataType_t, cublasComputeType_t, cublasLtEpilogue_t, cublasLtOrder_t
// and cublasLtPointerMode_t values (library_types.h, cublas_api.h, cublasLt.h).
constexpr int32_t kLtR32F = 0, kLtR16F = 2, kLtR16BF = 14;
constexpr int32_t kLtCompute16F = 64, kLtCompute16FPedantic = 65, kLtCompute32F = 68, kLtCompute32FPedantic = 69,
                  kLtCompute32FFast16F = 74, kLtCompute32FFast16BF = 75, kLtCompute32FFastTF32 = 77;
constexpr uint32_t kLtEpiDefault = 1, kLtEpiRelu = 2, kLtEpiBias = 4, kLtEpiDRelu = 8 | 128, kLtEpiBgrad = 16,
                   kLtEpiGelu = 32, kLtEpiDGelu = 64 | 128, kLtEpiAux = 128, kLtEpiBgradA = 256, kLtEpiBgradB = 512;
constexpr int32_t kLtOrderCol = 0, kLtOrderRow = 1;
constexpr uint32_t kLtPtrHost = 0, kLtPtrDevice = 1, kLtPtrDeviceVector = 2, kLtPtrAlphaVecBetaZero = 3,
                   kLtPtrAlphaVecBetaHost = 4;

// What a check answers (the guest maps it to a cublasStatus_t).
enum class LtCheck { Ok, InvalidValue, NotSupported };

inline int lt_type_size(int32_t t) { return t == kLtR32F ? 4 : (t == kLtR16F || t == kLtR16BF) ? 2 : 0; }

inline bool lt_epilogue_valid(uint32_t e) {
  switch (e) {
    case kLtEpiDefault:
    case kLtEpiRelu:
    case kLtEpiRelu | kLtEpiAux:
    case kLtEpiBias:
    case kLtEpiRelu | kLtEpiBias:
    case kLtEpiRelu | kLtEpiAux | kLtEpiBias:
    case kLtEpiDRelu:
    case kLtEpiDRelu | kLtEpiBgrad:
    case kLtEpiGelu:
    case kLtEpiGelu | kLtEpiAux:
    case kLtEpiGelu | kLtEpiBias:
    case kLtEpiGelu | kLtEpiAux | kLtEpiBias:
    case kLtEpiDGelu:
    case kLtEpiDGelu | kLtEpiBgrad:
    case kLtEpiBgradA:
    case kLtEpiBgradB: return true;
    default: return false;
  }
}
// The epilogue reads or writes the bias vector (a bias, or a bias gradient).
inline bool lt_uses_bias(uint32_t e) {
  return e != kLtEpiDefault && ((e & kLtEpiBias) || (e & kLtEpiBgrad) || e == kLtEpiBgradA || e == kLtEpiBgradB);
}
// The bias is written (a gradient) rather than read.
inline bool lt_bias_is_output(uint32_t e) { return (e & kLtEpiBgrad) || e == kLtEpiBgradA || e == kLtEpiBgradB; }
inline bool lt_uses_aux(uint32_t e) { return e != kLtEpiDefault && (e & kLtEpiAux) && lt_epilogue_valid(e); }
// The aux buffer is ReLU's bit mask (else GELU's input matrix).
inline bool lt_aux_is_mask(uint32_t e) { return (e & kLtEpiRelu) || (e & 8); }

// One matrix operand of a request, gathered.
struct LtOperand {
  uint64_t ptr;
  int64_t rows, cols, ld, stride;
  int32_t type, order, batch;
};
inline LtOperand lt_operand(const LtMatmulReq& r, char which) {
  switch (which) {
    case 'A': return {r.A, r.a_rows, r.a_cols, r.a_ld, r.a_stride, r.a_type, r.a_order, r.a_batch};
    case 'B': return {r.B, r.b_rows, r.b_cols, r.b_ld, r.b_stride, r.b_type, r.b_order, r.b_batch};
    case 'C': return {r.C, r.c_rows, r.c_cols, r.c_ld, r.c_stride, r.c_type, r.c_order, r.c_batch};
    default: return {r.D, r.d_rows, r.d_cols, r.d_ld, r.d_stride, r.d_type, r.d_order, r.d_batch};
  }
}

// The resolved problem and the bytes each operand spans from its pointer.
struct LtShape {
  int64_t m = 0, n = 0, k = 0;
  int32_t batch = 1;
  int32_t bias_type = 0, aux_type = 0;  // resolved (-1: D's type)
  int64_t bias_len = 0;                 // elements of one batch's bias vector
  uint64_t a_bytes = 0, b_bytes = 0, c_bytes = 0, d_bytes = 0, bias_bytes = 0, aux_bytes = 0;
  uint64_t alpha_bytes = 0, beta_bytes = 0;  // device scalars/vectors (0: by value or unused)
};

// Every dimension, leading dimension and stride stays below 2^31 elements
// (OpenBLAS takes int), and no operand spans more than 2^40 bytes.
constexpr int64_t kLtMaxDim = INT32_MAX;
constexpr uint64_t kLtMaxSpan = uint64_t(1) << 40;

namespace lt_detail {
inline bool mul(uint64_t a, uint64_t b, uint64_t* o) { return !__builtin_mul_overflow(a, b, o); }
inline bool add(uint64_t a, uint64_t b, uint64_t* o) { return !__builtin_add_overflow(a, b, o); }
// Elements spanned by `batch` matrices of rows x cols (highest index + 1).
inline bool span(int64_t rows, int64_t cols, int64_t ld, int32_t order, int32_t batch, int64_t stride,
                 uint64_t* elems) {
  uint64_t one, last;
  const int64_t outer = order == kLtOrderCol ? cols : rows, inner = order == kLtOrderCol ? rows : cols;
  if (!mul(uint64_t(outer - 1), uint64_t(ld), &one) || !add(one, uint64_t(inner), &one)) return false;
  if (!mul(uint64_t(batch - 1), uint64_t(stride), &last) || !add(last, one, elems)) return false;
  return true;
}
}  // namespace lt_detail

inline LtCheck lt_check(const LtMatmulReq& r, LtShape* s) {
  using namespace lt_detail;
  // Types: fp32, fp16 and bf16 inputs (A, B alike; C, D alike), as cuBLASLt
  // pairs them with compute and scale types. No fp8: the modeled device is
  // compute capability 8.0.
  if (r.a_type != r.b_type || r.c_type != r.d_type) return LtCheck::NotSupported;
  const int32_t in = r.a_type, out = r.d_type;
  switch (r.compute) {
    case kLtCompute16F:
    case kLtCompute16FPedantic:
      if (in != kLtR16F || out != kLtR16F || r.scale_type != kLtR16F) return LtCheck::NotSupported;
      break;
    case kLtCompute32F:
    case kLtCompute32FPedantic:
      if (r.scale_type != kLtR32F) return LtCheck::NotSupported;
      if (in == kLtR32F ? out != kLtR32F : (in == kLtR16F || in == kLtR16BF) ? (out != in && out != kLtR32F) : true)
        return LtCheck::NotSupported;
      break;
    case kLtCompute32FFast16F:
    case kLtCompute32FFast16BF:
    case kLtCompute32FFastTF32:
      if (r.scale_type != kLtR32F || in != kLtR32F || out != kLtR32F) return LtCheck::NotSupported;
      break;
    default: return LtCheck::NotSupported;
  }
  if (r.flags & ~kLtScalePointers) return LtCheck::InvalidValue;
  if (r.flags & kLtScalePointers) return LtCheck::NotSupported;  // fp8 scaling only
  if (r.transa > 2 || r.transb > 2) return LtCheck::InvalidValue;
  if (!lt_epilogue_valid(r.epilogue)) return LtCheck::NotSupported;
  if (r.pointer_mode > kLtPtrAlphaVecBetaHost) return LtCheck::InvalidValue;
  // Layouts.
  for (char w : {'A', 'B', 'C', 'D'}) {
    LtOperand o = lt_operand(r, w);
    if (o.order != kLtOrderCol && o.order != kLtOrderRow) return LtCheck::NotSupported;
    if (o.rows < 1 || o.cols < 1 || o.rows > kLtMaxDim || o.cols > kLtMaxDim) return LtCheck::InvalidValue;
    if (o.ld < (o.order == kLtOrderCol ? o.rows : o.cols) || o.ld > kLtMaxDim) return LtCheck::InvalidValue;
    if (o.batch < 1 || o.batch != r.d_batch || o.stride < 0 || o.stride > (int64_t(1) << 40))
      return LtCheck::InvalidValue;
  }
  if (!r.A || !r.B || !r.C || !r.D) return LtCheck::InvalidValue;
  // Shapes: op(A) is m x k, op(B) k x n, C and D m x n.
  s->m = r.d_rows, s->n = r.d_cols, s->batch = r.d_batch;
  const int64_t am = r.transa ? r.a_cols : r.a_rows, ak = r.transa ? r.a_rows : r.a_cols;
  const int64_t bk = r.transb ? r.b_cols : r.b_rows, bn = r.transb ? r.b_rows : r.b_cols;
  if (am != s->m || bn != s->n || ak != bk || r.c_rows != s->m || r.c_cols != s->n) return LtCheck::InvalidValue;
  s->k = ak;
  uint64_t e;
  auto bytes = [&](const LtOperand& o, uint64_t* out) {
    return span(o.rows, o.cols, o.ld, o.order, o.batch, o.stride, &e) && mul(e, lt_type_size(o.type), out) &&
           *out <= kLtMaxSpan;
  };
  if (!bytes(lt_operand(r, 'A'), &s->a_bytes) || !bytes(lt_operand(r, 'B'), &s->b_bytes) ||
      !bytes(lt_operand(r, 'C'), &s->c_bytes) || !bytes(lt_operand(r, 'D'), &s->d_bytes))
    return LtCheck::InvalidValue;
  // Bias (or bias gradient): m elements (n for BGRADB) per batch.
  s->bias_type = r.bias_type == -1 ? out : r.bias_type;
  s->aux_type = r.aux_type == -1 ? out : r.aux_type;
  if (lt_uses_bias(r.epilogue)) {
    if (!r.bias || lt_type_size(s->bias_type) == 0) return LtCheck::InvalidValue;
    s->bias_len = r.epilogue == kLtEpiBgradB ? s->n : s->m;
    if (r.bias_stride < 0 || r.bias_stride > (int64_t(1) << 40)) return LtCheck::InvalidValue;
    if (!mul(uint64_t(s->batch - 1), uint64_t(r.bias_stride), &e) || !add(e, uint64_t(s->bias_len), &e) ||
        !mul(e, lt_type_size(s->bias_type), &s->bias_bytes) || s->bias_bytes > kLtMaxSpan)
      return LtCheck::InvalidValue;
  }
  // Aux: ReLU's bit mask (ld and batch stride in bits, multiples of 128) or
  // GELU's input matrix (multiples of 8), column-major, ld >= m.
  if (lt_uses_aux(r.epilogue)) {
    const bool mask = lt_aux_is_mask(r.epilogue);
    const int64_t mult = mask ? 128 : 8;
    if (!r.aux || r.aux_ld < s->m || r.aux_ld > kLtMaxDim || r.aux_ld % mult || r.aux_stride < 0 ||
        r.aux_stride % mult || r.aux_stride > (int64_t(1) << 40))
      return LtCheck::InvalidValue;
    if (!mask && lt_type_size(s->aux_type) == 0) return LtCheck::InvalidValue;
    if (!span(s->m, s->n, r.aux_ld, kLtOrderCol, s->batch, r.aux_stride, &e)) return LtCheck::InvalidValue;
    if (mask)
      s->aux_bytes = (e + 7) / 8;
    else if (!mul(e, lt_type_size(s->aux_type), &s->aux_bytes))
      return LtCheck::InvalidValue;
    if (s->aux_bytes > kLtMaxSpan) return LtCheck::InvalidValue;
  }
  // Scalars: by value (host), one device scalar each, or device vectors of
  // m elements (alpha's per batch with alpha_stride).
  const uint64_t ss = lt_type_size(r.scale_type);
  if (r.alpha_stride < 0 || r.alpha_stride > (int64_t(1) << 40)) return LtCheck::InvalidValue;
  switch (r.pointer_mode) {
    case kLtPtrHost: break;
    case kLtPtrDevice: s->alpha_bytes = s->beta_bytes = ss; break;
    case kLtPtrDeviceVector:
      s->alpha_bytes = s->beta_bytes = uint64_t(s->m) * ss;
      break;
    case kLtPtrAlphaVecBetaZero:
      if (r.alpha_stride) return LtCheck::InvalidValue;
      s->alpha_bytes = uint64_t(s->m) * ss;
      break;
    case kLtPtrAlphaVecBetaHost:
      if (!mul(uint64_t(s->batch - 1), uint64_t(r.alpha_stride), &e) || !add(e, uint64_t(s->m), &e) ||
          !mul(e, ss, &s->alpha_bytes) || s->alpha_bytes > kLtMaxSpan)
        return LtCheck::InvalidValue;
      break;
  }
  if ((s->alpha_bytes && !r.alpha) || (s->beta_bytes && !r.beta)) return LtCheck::InvalidValue;
  if (r.workspace_size > kLtMaxSpan || (r.workspace_size && !r.workspace)) return LtCheck::InvalidValue;
  return LtCheck::Ok;
}

// cublasLtMatrixTransform: C = alpha op(A) + beta op(B), any of fp32, fp16
// and bf16 per matrix, fp32 scale, COL or ROW order each, strided batches.
struct LtTransformShape {
  int64_t m = 0, n = 0;
  int32_t batch = 1;
  bool use_b = true;  // false: B is absent (host beta zero)
  uint64_t a_bytes = 0, b_bytes = 0, c_bytes = 0, alpha_bytes = 0, beta_bytes = 0;
};

inline LtCheck lt_transform_check(const LtTransformReq& r, LtTransformShape* s) {
  using namespace lt_detail;
  if (r.scale_type != kLtR32F) return LtCheck::NotSupported;
  if (r.pointer_mode != kLtPtrHost && r.pointer_mode != kLtPtrDevice) return LtCheck::NotSupported;
  if (r.transa > 2 || r.transb > 2 || r.pad) return LtCheck::InvalidValue;
  s->use_b = !(r.pointer_mode == kLtPtrHost && uint32_t(r.beta) == 0 && !r.B);
  const LtOperand ops[3] = {{r.A, r.a_rows, r.a_cols, r.a_ld, r.a_stride, r.a_type, r.a_order, r.a_batch},
                            {r.B, r.b_rows, r.b_cols, r.b_ld, r.b_stride, r.b_type, r.b_order, r.b_batch},
                            {r.C, r.c_rows, r.c_cols, r.c_ld, r.c_stride, r.c_type, r.c_order, r.c_batch}};
  uint64_t* bytes[3] = {&s->a_bytes, &s->b_bytes, &s->c_bytes};
  for (int i = 0; i < 3; i++) {
    const LtOperand& o = ops[i];
    if (i == 1 && !s->use_b) continue;
    if (lt_type_size(o.type) == 0) return LtCheck::NotSupported;
    if (o.order != kLtOrderCol && o.order != kLtOrderRow) return LtCheck::NotSupported;
    if (!o.ptr || o.rows < 1 || o.cols < 1 || o.rows > kLtMaxDim || o.cols > kLtMaxDim) return LtCheck::InvalidValue;
    if (o.ld < (o.order == kLtOrderCol ? o.rows : o.cols) || o.ld > kLtMaxDim) return LtCheck::InvalidValue;
    if (o.batch < 1 || o.batch != r.c_batch || o.stride < 0 || o.stride > (int64_t(1) << 40))
      return LtCheck::InvalidValue;
    uint64_t e;
    if (!span(o.rows, o.cols, o.ld, o.order, o.batch, o.stride, &e) || !mul(e, lt_type_size(o.type), bytes[i]) ||
        *bytes[i] > kLtMaxSpan)
      return LtCheck::InvalidValue;
  }
  s->m = r.c_rows, s->n = r.c_cols, s->batch = r.c_batch;
  if ((r.transa ? r.a_cols : r.a_rows) != s->m || (r.transa ? r.a_rows : r.a_cols) != s->n)
    return LtCheck::InvalidValue;
  if (s->use_b && ((r.transb ? r.b_cols : r.b_rows) != s->m || (r.transb ? r.b_rows : r.b_cols) != s->n))
    return LtCheck::InvalidValue;
  if (r.pointer_mode == kLtPtrDevice) {
    s->alpha_bytes = s->beta_bytes = 4;
    if (!r.alpha || !r.beta) return LtCheck::InvalidValue;
  }
  return LtCheck::Ok;
}

}  // namespace wh::proto
