// The sim device's cuBLASLt: cublasLtMatmul computed on the sim device's
// memory (Context::host_view). Per batch, op(A) and op(B) are gathered into
// fp32 column-major buffers (fp16 and bf16 converted, COL or ROW order
// read through their leading dimension), multiplied by OpenBLAS's sgemm,
// and the epilogue (alpha/beta, C, bias, ReLU/GELU and their aux outputs,
// the backward DReLU/DGELU, bias gradients) is applied in fp32 before D is
// rounded to its type once. A GPU's fp16 compute type accumulates in fp16;
// here it accumulates in fp32 (results are at least as accurate).
//
// The ReLU bit mask (RELU_AUX, read by DRELU) stores element (i, j) of a
// batch at bit i % 8 of byte (j * aux_ld + i) / 8 from the batch's start;
// NVIDIA does not document its own bit order, so a program that reads the
// mask itself (rather than passing it to a DRELU matmul) sees the sim
// device's.
#if __has_include(<openblas-pthread/cblas.h>)
#include <openblas-pthread/cblas.h>
#else
#include <cblas.h>
#endif

#include <cmath>
#include <cstring>
#include <vector>

#include "wormhole/server/blaslt.hpp"

namespace wh::server {

namespace {

using namespace wh::proto;

struct SimLtHandle : LtHandle {};

float load(const uint8_t* p, int32_t type, uint64_t i) {
  uint16_t h;
  switch (type) {
    case kLtR32F: {
      float f;
      std::memcpy(&f, p + i * 4, 4);
      return f;
    }
    case kLtR16F: std::memcpy(&h, p + i * 2, 2); return lt_half_to_float(h);
    default: std::memcpy(&h, p + i * 2, 2); return lt_bf16_to_float(h);
  }
}
void store(uint8_t* p, int32_t type, uint64_t i, float v) {
  uint16_t h;
  switch (type) {
    case kLtR32F: std::memcpy(p + i * 4, &v, 4); return;
    case kLtR16F: h = lt_float_to_half(v); break;
    default: h = lt_float_to_bf16(v); break;
  }
  std::memcpy(p + i * 2, &h, 2);
}

// Element (i, j) of one matrix of a layout, in elements from its start.
uint64_t at(int32_t order, int64_t ld, int64_t i, int64_t j) {
  return order == kLtOrderCol ? uint64_t(j) * uint64_t(ld) + uint64_t(i) : uint64_t(i) * uint64_t(ld) + uint64_t(j);
}

// tanh approximation of GELU, as cuBLASLt's epilogue uses, and its derivative.
constexpr float kSqrt2OverPi = 0.7978845608028654f, kGeluC = 0.044715f;
float gelu(float x) { return 0.5f * x * (1.f + std::tanh(kSqrt2OverPi * (x + kGeluC * x * x * x))); }
float dgelu(float x) {
  const float u = kSqrt2OverPi * (x + kGeluC * x * x * x), t = std::tanh(u);
  return 0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * kSqrt2OverPi * (1.f + 3.f * kGeluC * x * x);
}

// A stored matrix as an fp32 column-major operand of sgemm.
struct Fp32View {
  const float* p;
  int64_t ld;
  bool trans;  // sgemm's transpose flag for op(X)
  // op(X)(i, j), from the view.
  float op(int64_t i, int64_t j) const { return trans ? p[i * ld + j] : p[j * ld + i]; }
};
Fp32View fp32_view(const uint8_t* x, int32_t type, int32_t order, int64_t rows, int64_t cols, int64_t ld, bool trans,
                   std::vector<float>* buf) {
  // In COL order the matrix is rows x cols with `ld`; in ROW order the same
  // memory is its transpose, cols x rows, column-major.
  const bool row = order == kLtOrderRow;
  const int64_t inner = row ? cols : rows, outer = row ? rows : cols;
  if (type == kLtR32F) return {reinterpret_cast<const float*>(x), ld, trans != row};
  buf->resize(size_t(inner * outer));
  float* out = buf->data();
  for (int64_t o = 0; o < outer; o++) {
    const uint8_t* src = x + uint64_t(o) * uint64_t(ld) * 2;
    float* dst = out + o * inner;
    uint16_t h;
    if (type == kLtR16F)
      for (int64_t i = 0; i < inner; i++) std::memcpy(&h, src + i * 2, 2), dst[i] = lt_half_to_float(h);
    else
      for (int64_t i = 0; i < inner; i++) std::memcpy(&h, src + i * 2, 2), dst[i] = lt_bf16_to_float(h);
  }
  return {out, inner, trans != row};
}

class SimBlasLt final : public BlasLt {
 public:
  explicit SimBlasLt(Context& ctx) : ctx_(ctx) {}
  Err create(std::unique_ptr<LtHandle>* out) override {
    *out = std::make_unique<SimLtHandle>();
    return cudaSuccess;
  }
  int version() const override { return 130000; }

  Err matmul(LtHandle&, Stream*, const LtMatmulReq& r, const LtShape& s) override {
    // A GPU faults on a misaligned operand; the server must not form a
    // misaligned pointer either.
    auto misaligned = [](uint64_t p, int es) { return es > 1 && p % uint64_t(es); };
    const int ss = lt_type_size(r.scale_type);
    if (misaligned(r.A, lt_type_size(r.a_type)) || misaligned(r.B, lt_type_size(r.b_type)) ||
        misaligned(r.C, lt_type_size(r.c_type)) || misaligned(r.D, lt_type_size(r.d_type)) ||
        (s.bias_bytes && misaligned(r.bias, lt_type_size(s.bias_type))) ||
        (s.aux_bytes && !lt_aux_is_mask(r.epilogue) && misaligned(r.aux, lt_type_size(s.aux_type))) ||
        (s.alpha_bytes && misaligned(r.alpha, ss)) || (s.beta_bytes && misaligned(r.beta, ss)))
      return cudaErrorMisalignedAddress;
    const uint8_t* A = ctx_.host_view(r.A, s.a_bytes);
    const uint8_t* B = ctx_.host_view(r.B, s.b_bytes);
    const uint8_t* C = ctx_.host_view(r.C, s.c_bytes);
    uint8_t* D = ctx_.host_view(r.D, s.d_bytes);
    uint8_t* bias = s.bias_bytes ? ctx_.host_view(r.bias, s.bias_bytes) : nullptr;
    uint8_t* aux = s.aux_bytes ? ctx_.host_view(r.aux, s.aux_bytes) : nullptr;
    const uint8_t* alpha = s.alpha_bytes ? ctx_.host_view(r.alpha, s.alpha_bytes) : nullptr;
    const uint8_t* beta = s.beta_bytes ? ctx_.host_view(r.beta, s.beta_bytes) : nullptr;
    if (!A || !B || !C || !D || (s.bias_bytes && !bias) || (s.aux_bytes && !aux) || (s.alpha_bytes && !alpha) ||
        (s.beta_bytes && !beta))
      return cudaErrorIllegalAddress;

    const int64_t m = s.m, n = s.n, k = s.k;
    const uint32_t epi = r.epilogue;
    // Host scalars travel by value: float bits, or a half's for fp16 scale.
    auto by_value = [&](uint64_t bits) {
      if (r.scale_type == kLtR16F) return lt_half_to_float(uint16_t(bits));
      const uint32_t b = uint32_t(bits);
      float f;
      std::memcpy(&f, &b, 4);
      return f;
    };
    const size_t mn = size_t(m) * size_t(n), rows = size_t(m);
    std::vector<float> fa, fb, acc(mn), al(rows), be(rows);
    for (int32_t b = 0; b < s.batch; b++) {
      const uint8_t* Ab = A + uint64_t(b) * uint64_t(r.a_stride) * lt_type_size(r.a_type);
      const uint8_t* Bb = B + uint64_t(b) * uint64_t(r.b_stride) * lt_type_size(r.b_type);
      const uint8_t* Cb = C + uint64_t(b) * uint64_t(r.c_stride) * lt_type_size(r.c_type);
      uint8_t* Db = D + uint64_t(b) * uint64_t(r.d_stride) * lt_type_size(r.d_type);
      // A and B as fp32 column-major views for sgemm: fp32 operands in place,
      // fp16/bf16 converted; a ROW-order matrix is its transpose in COL order.
      Fp32View va = fp32_view(Ab, r.a_type, r.a_order, r.a_rows, r.a_cols, r.a_ld, r.transa != 0, &fa);
      Fp32View vb = fp32_view(Bb, r.b_type, r.b_order, r.b_rows, r.b_cols, r.b_ld, r.transb != 0, &fb);
      cblas_sgemm(CblasColMajor, va.trans ? CblasTrans : CblasNoTrans, vb.trans ? CblasTrans : CblasNoTrans, int(m),
                  int(n), int(k), 1.f, va.p, int(va.ld), vb.p, int(vb.ld), 0.f, acc.data(), int(m));

      uint8_t* biasb = bias ? bias + uint64_t(b) * uint64_t(r.bias_stride) * lt_type_size(s.bias_type) : nullptr;
      uint8_t* auxb = nullptr;
      if (aux) {
        const uint64_t off = uint64_t(b) * uint64_t(r.aux_stride);
        auxb = lt_aux_is_mask(epi) ? aux + off / 8 : aux + off * lt_type_size(s.aux_type);
      }
      // Bias gradients of the inputs: sums over k of op(A)'s rows or op(B)'s columns.
      if (epi == kLtEpiBgradA || epi == kLtEpiBgradB) {
        const int64_t len = epi == kLtEpiBgradA ? m : n;
        for (int64_t x = 0; x < len; x++) {
          float sum = 0;
          for (int64_t kk = 0; kk < k; kk++) sum += epi == kLtEpiBgradA ? va.op(x, kk) : vb.op(kk, x);
          store(biasb, s.bias_type, uint64_t(x), sum);
        }
      }
      // alpha and beta of each row of D.
      for (int64_t i = 0; i < m; i++) {
        switch (r.pointer_mode) {
          case kLtPtrHost: al[size_t(i)] = by_value(r.alpha), be[size_t(i)] = by_value(r.beta); break;
          case kLtPtrDevice:
            al[size_t(i)] = load(alpha, r.scale_type, 0), be[size_t(i)] = load(beta, r.scale_type, 0);
            break;
          case kLtPtrDeviceVector:
            al[size_t(i)] = load(alpha, r.scale_type, uint64_t(i));
            be[size_t(i)] = load(beta, r.scale_type, uint64_t(i));
            break;
          case kLtPtrAlphaVecBetaZero:
            al[size_t(i)] = load(alpha, r.scale_type, uint64_t(i)), be[size_t(i)] = 0;
            break;
          default:
            al[size_t(i)] = load(alpha, r.scale_type, uint64_t(b) * uint64_t(r.alpha_stride) + uint64_t(i));
            be[size_t(i)] = by_value(r.beta);
            break;
        }
      }
      std::vector<float> row_sum(epi & kLtEpiBgrad ? size_t(m) : 0, 0.f);
      for (int64_t j = 0; j < n; j++) {
        for (int64_t i = 0; i < m; i++) {
          float v = al[size_t(i)] * acc[size_t(j * m + i)];
          if (be[size_t(i)] != 0.f) v += be[size_t(i)] * load(Cb, r.c_type, at(r.c_order, r.c_ld, i, j));
          if ((epi & kLtEpiBias) && !(epi & kLtEpiBgrad)) v += load(biasb, s.bias_type, uint64_t(i));
          const uint64_t ai = uint64_t(j) * uint64_t(r.aux_ld) + uint64_t(i);
          if (epi == kLtEpiDRelu || epi == (kLtEpiDRelu | kLtEpiBgrad)) {
            if (!(auxb[ai / 8] >> (ai % 8) & 1)) v = 0;
          } else if (epi == kLtEpiDGelu || epi == (kLtEpiDGelu | kLtEpiBgrad)) {
            v *= dgelu(load(auxb, s.aux_type, ai));
          } else if (epi & kLtEpiRelu) {
            if (epi & kLtEpiAux) {
              const uint8_t bit = uint8_t(1u << (ai % 8));
              auxb[ai / 8] = v > 0 ? auxb[ai / 8] | bit : auxb[ai / 8] & uint8_t(~bit);
            }
            v = v > 0 ? v : 0;
          } else if (epi & kLtEpiGelu) {
            if (epi & kLtEpiAux) store(auxb, s.aux_type, ai, v);
            v = gelu(v);
          }
          if (epi & kLtEpiBgrad) row_sum[size_t(i)] += v;
          store(Db, r.d_type, at(r.d_order, r.d_ld, i, j), v);
        }
      }
      if (epi & kLtEpiBgrad)
        for (int64_t i = 0; i < m; i++) store(biasb, s.bias_type, uint64_t(i), row_sum[size_t(i)]);
    }
    return cudaSuccess;
  }

  // C = alpha op(A) + beta op(B), per batch; op(A) and op(B) are read in
  // full before C is written, so C may be A or B (in place).
  Err transform(LtHandle&, Stream*, const LtTransformReq& r, const LtTransformShape& s) override {
    const int ea = lt_type_size(r.a_type), eb = lt_type_size(r.b_type), ec = lt_type_size(r.c_type);
    if (r.A % uint64_t(ea) || (s.use_b && r.B % uint64_t(eb)) || r.C % uint64_t(ec) ||
        (s.alpha_bytes && (r.alpha % 4 || r.beta % 4)))
      return cudaErrorMisalignedAddress;
    const uint8_t* A = ctx_.host_view(r.A, s.a_bytes);
    const uint8_t* B = s.use_b ? ctx_.host_view(r.B, s.b_bytes) : nullptr;
    uint8_t* C = ctx_.host_view(r.C, s.c_bytes);
    const uint8_t* al = s.alpha_bytes ? ctx_.host_view(r.alpha, 4) : nullptr;
    const uint8_t* be = s.beta_bytes ? ctx_.host_view(r.beta, 4) : nullptr;
    if (!A || (s.use_b && !B) || !C || (s.alpha_bytes && (!al || !be))) return cudaErrorIllegalAddress;
    float alpha, beta = 0;
    if (al) {
      alpha = load(al, kLtR32F, 0), beta = load(be, kLtR32F, 0);
    } else {
      const uint32_t ab = uint32_t(r.alpha), bb = uint32_t(r.beta);
      std::memcpy(&alpha, &ab, 4);
      std::memcpy(&beta, &bb, 4);
    }
    const int64_t m = s.m, n = s.n;
    std::vector<float> out(size_t(m * n));
    for (int32_t b = 0; b < s.batch; b++) {
      const uint8_t* Ab = A + uint64_t(b) * uint64_t(r.a_stride) * uint64_t(ea);
      const uint8_t* Bb = B ? B + uint64_t(b) * uint64_t(r.b_stride) * uint64_t(eb) : nullptr;
      uint8_t* Cb = C + uint64_t(b) * uint64_t(r.c_stride) * uint64_t(ec);
      for (int64_t j = 0; j < n; j++)
        for (int64_t i = 0; i < m; i++) {
          float v = alpha * load(Ab, r.a_type, r.transa ? at(r.a_order, r.a_ld, j, i) : at(r.a_order, r.a_ld, i, j));
          if (Bb && beta != 0.f)
            v += beta * load(Bb, r.b_type, r.transb ? at(r.b_order, r.b_ld, j, i) : at(r.b_order, r.b_ld, i, j));
          out[size_t(j * m + i)] = v;
        }
      for (int64_t j = 0; j < n; j++)
        for (int64_t i = 0; i < m; i++) store(Cb, r.c_type, at(r.c_order, r.c_ld, i, j), out[size_t(j * m + i)]);
    }
    return cudaSuccess;
  }

 private:
  Context& ctx_;
};

}  // namespace

std::unique_ptr<BlasLt> make_sim_blaslt(Context& ctx) { return std::make_unique<SimBlasLt>(ctx); }

}  // namespace wh::server
