// The sim device's BLAS: cuBLAS semantics computed by OpenBLAS (cblas_*,
// column-major) directly on the sim device's memory (Context::host_view).
// fp16 operands of GemmEx are widened to fp32, computed in fp32 and, for an
// fp16 C, rounded back to nearest-even. Everything executes in call order on
// the session's thread, like every other sim device operation, so stream
// ordering holds trivially.
//
// Every operand is re-translated through host_view, which refuses a range
// that is not inside one allocation of this session: the pointers read from
// device memory by gemm_batched are policed here.
#if __has_include(<openblas-pthread/cblas.h>)
#include <openblas-pthread/cblas.h>
#else
#include <cblas.h>
#endif

#include <algorithm>
#include <complex>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <type_traits>
#include <vector>

#include "wormhole/proto/wire.hpp"
#include "wormhole/server/blas.hpp"

// LAPACK (part of OpenBLAS; Debian ships no LAPACKE header with it).
extern "C" {
void sgeqrf_(const int* m, const int* n, float* a, const int* lda, float* tau, float* work, const int* lwork, int* info);
void dgeqrf_(const int* m, const int* n, double* a, const int* lda, double* tau, double* work, const int* lwork,
             int* info);
void cgeqrf_(const int* m, const int* n, std::complex<float>* a, const int* lda, std::complex<float>* tau,
             std::complex<float>* work, const int* lwork, int* info);
void zgeqrf_(const int* m, const int* n, std::complex<double>* a, const int* lda, std::complex<double>* tau,
             std::complex<double>* work, const int* lwork, int* info);
}

namespace wh::server {

namespace {

using namespace wh::proto;

struct SimBlasHandle : BlasHandle {};

// Bytes spanned by a column-major rows x cols matrix with leading dimension
// ld (elements), or 0 for an empty one. The session has checked overflow.
uint64_t mat_bytes(int64_t rows, int64_t cols, int64_t ld, uint64_t es) {
  if (rows <= 0 || cols <= 0) return 0;
  return (uint64_t(cols - 1) * uint64_t(ld) + uint64_t(rows)) * es;
}
uint64_t vec_bytes(int n, int inc, uint64_t es) {
  if (n <= 0) return 0;
  return (uint64_t(n - 1) * uint64_t(std::llabs(inc)) + 1) * es;
}

CBLAS_TRANSPOSE tr(BlasOp o) { return o == BlasOp::N ? CblasNoTrans : CblasTrans; }

float half_to_float(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16, exp = (h >> 10) & 0x1F, man = h & 0x3FF, bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        e++;
        man <<= 1;
      } while (!(man & 0x400));
      bits = sign | uint32_t(127 - 15 - e) << 23 | (man & 0x3FF) << 13;
    }
  } else if (exp == 31) {
    bits = sign | 0x7F800000u | man << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | man << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_half(float f) {  // round to nearest even
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint16_t sign = uint16_t((x >> 16) & 0x8000);
  uint32_t ax = x & 0x7FFFFFFF;
  if (ax >= 0x7F800000) return sign | 0x7C00 | (ax > 0x7F800000 ? 0x200 : 0);  // inf / nan
  if (ax >= 0x477FF000) return sign | 0x7C00;                                   // overflow to inf
  if (ax < 0x38800000) {                                                         // subnormal or zero
    if (ax < 0x33000000) return sign;
    uint32_t e = ax >> 23, m = (ax & 0x7FFFFF) | 0x800000;
    uint32_t shift = 126 - e;  // value / 2^-24 = m * 2^(e - 126)
    uint32_t v = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (v & 1))) v++;
    return sign | uint16_t(v);
  }
  uint32_t v = ((ax >> 13) - ((127 - 15) << 10));
  uint32_t rem = ax & 0x1FFF;
  if (rem > 0x1000 || (rem == 0x1000 && (v & 1))) v++;
  return sign | uint16_t(v);
}

// ------------------------------------------------------------ the generic ops
//
// Levels 1 and 2 and the LU family are direct loops over the operands'
// storage (one template per routine family for S, D, C and Z); level 3 runs
// on OpenBLAS (cblas_?gemm/symm/hemm/syrk/herk/syr2k/her2k/trmm/trsm), geam
// and dgmm are loops. GemmEx widens fp16/bf16 to fp32 (fp64 stays fp64),
// computes with OpenBLAS and rounds the result to C's type (nearest even):
// the sim device computes CUBLAS_COMPUTE_16F and the TF32/16F/16BF fast
// modes in full fp32.

using cf = std::complex<float>;
using cd = std::complex<double>;
template <class T>
constexpr bool kCx = std::is_same_v<T, cf> || std::is_same_v<T, cd>;
template <class T>
struct RealOf {
  using type = T;
};
template <class T>
struct RealOf<std::complex<T>> {
  using type = T;
};
template <class T>
using R = typename RealOf<T>::type;
template <class T>
T cj(T v) {
  if constexpr (kCx<T>)
    return std::conj(v);
  else
    return v;
}
template <class T>
R<T> re(T v) {
  if constexpr (kCx<T>)
    return v.real();
  else
    return v;
}
template <class T>
double mag1(T v) {  // |re| + |im|: cuBLAS's iamax/iamin measure
  if constexpr (kCx<T>)
    return std::fabs(double(v.real())) + std::fabs(double(v.imag()));
  else
    return std::fabs(double(v));
}

// Runs f(T{}) for the element type of kBlasS/D/C/Z.
template <class F>
Err by_type(uint32_t t, F&& f) {
  switch (t) {
    case 0: return f(float{});
    case 1: return f(double{});
    case 2: return f(cf{});
    case 3: return f(cd{});
    default: return cudaErrorInvalidValue;
  }
}

struct Mem {
  Context& ctx;
  template <class T>
  T* view(uint64_t dptr, uint64_t bytes) {
    if (dptr % alignof(R<T>)) return nullptr;
    return reinterpret_cast<T*>(ctx.host_view(dptr, bytes ? bytes : 1));
  }
  // A scalar as S (host value or device address).
  template <class S>
  bool get(const BlasScalar& s, S* out) {
    if (!s.device) {
      if constexpr (kCx<S>)
        *out = S(R<S>(s.value), R<S>(s.imag));
      else
        *out = S(s.value);
      return true;
    }
    S* p = view<S>(s.dptr, sizeof(S));
    if (!p) return false;
    std::memcpy(static_cast<void*>(out), p, sizeof(S));
    return true;
  }
  template <class S>
  bool put(const BlasScalar& r, S v) {
    S* p = view<S>(r.dptr, sizeof(S));
    if (!p) return false;
    std::memcpy(static_cast<void*>(p), &v, sizeof(S));
    return true;
  }
};

// A strided vector: element i as BLAS numbers it (a negative increment
// walks from the far end).
template <class T>
struct Vec {
  T* p = nullptr;
  int n = 0, inc = 1;
  T& operator[](int64_t i) const { return inc >= 0 ? p[i * inc] : p[(int64_t(n) - 1 - i) * -int64_t(inc)]; }
};
template <class T>
bool vec(Mem& m, uint64_t a, int n, int inc, Vec<T>* v) {
  v->n = n, v->inc = inc;
  if (n <= 0) return true;
  v->p = m.view<T>(a, vec_bytes(n, inc, sizeof(T)));
  return v->p != nullptr;
}

template <class T>
Err l1_typed(Mem& mem, const BlasL1Args& a, BlasL1Result* host) {
  using RT = R<T>;
  const int n = a.n;
  const uint32_t r = a.routine;
  const bool one_vec = r == kL1Scal || r == kL1ScalReal || r == kL1Nrm2 || r == kL1Asum || r == kL1Iamax ||
                       r == kL1Iamin;
  Vec<T> x, y;
  const bool active = n > 0 && (!one_vec || a.incx > 0);
  if (active) {
    if (!vec(mem, a.x, n, a.incx, &x)) return cudaErrorIllegalAddress;
    if (!one_vec && !vec(mem, a.y, n, a.incy, &y)) return cudaErrorIllegalAddress;
  }
  auto reduce_out = [&](T v, int idx, bool is_index) -> Err {
    if (a.result.device) {
      bool ok;
      if (is_index)
        ok = mem.put<int>(a.result, idx);
      else if (r == kL1Dot || r == kL1Dotc)
        ok = mem.put<T>(a.result, v);
      else
        ok = mem.put<RT>(a.result, re(v));
      return ok ? cudaSuccess : cudaErrorIllegalAddress;
    }
    if constexpr (kCx<T>) {
      host->re = double(v.real());
      host->im = double(v.imag());
    } else {
      host->re = double(v);
    }
    host->index = idx;
    return cudaSuccess;
  };
  switch (r) {
    case kL1Axpy: {
      T al;
      if (!mem.get(a.alpha, &al)) return cudaErrorIllegalAddress;
      if (active)
        for (int i = 0; i < n; i++) y[i] += al * x[i];
      return cudaSuccess;
    }
    case kL1Scal:
    case kL1ScalReal: {
      T al;
      if (r == kL1Scal) {
        if (!mem.get(a.alpha, &al)) return cudaErrorIllegalAddress;
      } else {
        RT ar;
        if (!mem.get(a.alpha, &ar)) return cudaErrorIllegalAddress;
        al = T(ar);
      }
      if (active)
        for (int i = 0; i < n; i++) x[i] = al * x[i];
      return cudaSuccess;
    }
    case kL1Copy:
      if (active)
        for (int i = 0; i < n; i++) y[i] = x[i];
      return cudaSuccess;
    case kL1Swap:
      if (active)
        for (int i = 0; i < n; i++) std::swap(x[i], y[i]);
      return cudaSuccess;
    case kL1Dot:
    case kL1Dotc: {
      T s{};
      if (active)
        for (int i = 0; i < n; i++) s += (r == kL1Dotc ? cj(x[i]) : x[i]) * y[i];
      return reduce_out(s, 0, false);
    }
    case kL1Nrm2: {
      // Scaled sum of squares (no overflow for large entries), in double.
      double scale = 0, ssq = 1;
      if (active)
        for (int i = 0; i < n; i++) {
          double parts[2] = {double(re(x[i])), 0};
          if constexpr (kCx<T>) parts[1] = double(x[i].imag());
          for (double v : parts) {
            if (v == 0) continue;
            double av = std::fabs(v);
            if (scale < av) {
              ssq = 1 + ssq * (scale / av) * (scale / av);
              scale = av;
            } else {
              ssq += (av / scale) * (av / scale);
            }
          }
        }
      return reduce_out(T(RT(scale * std::sqrt(ssq))), 0, false);
    }
    case kL1Asum: {
      double s = 0;
      if (active)
        for (int i = 0; i < n; i++) s += mag1(x[i]);
      return reduce_out(T(RT(s)), 0, false);
    }
    case kL1Iamax:
    case kL1Iamin: {
      int best = 0;  // 1-based; 0 for n <= 0 or incx <= 0
      double bv = 0;
      if (active)
        for (int i = 0; i < n; i++) {
          double v = mag1(x[i]);
          if (i == 0 || (r == kL1Iamax ? v > bv : v < bv)) bv = v, best = i + 1;
        }
      return reduce_out(T{}, best, true);
    }
    case kL1Rot:
    case kL1RotReal: {
      RT cc;
      T s;
      if (!mem.get(a.alpha, &cc)) return cudaErrorIllegalAddress;
      if (r == kL1Rot) {
        if (!mem.get(a.beta, &s)) return cudaErrorIllegalAddress;
      } else {
        RT sr;
        if (!mem.get(a.beta, &sr)) return cudaErrorIllegalAddress;
        s = T(sr);
      }
      // x' = c x + s y; y' = -conj(s) x + c y (cuBLAS's rot).
      if (active)
        for (int i = 0; i < n; i++) {
          T xv = x[i], yv = y[i];
          x[i] = cc * xv + s * yv;
          y[i] = cc * yv - cj(s) * xv;
        }
      return cudaSuccess;
    }
    case kL1Rotm: {
      RT p[5];
      if (a.alpha.device) {
        RT* d = mem.view<RT>(a.alpha.dptr, 5 * sizeof(RT));
        if (!d) return cudaErrorIllegalAddress;
        std::memcpy(p, d, sizeof p);
      } else {
        for (int i = 0; i < 5; i++) p[i] = RT(a.param[i]);
      }
      // param = {flag, h11, h21, h12, h22}; flag -2: identity, -1: full H,
      // 0: h11 = h22 = 1, 1: h21 = -1, h12 = 1.
      RT h11 = p[1], h21 = p[2], h12 = p[3], h22 = p[4];
      if (p[0] == RT(-2)) return cudaSuccess;
      if (p[0] == RT(0)) h11 = h22 = 1;
      if (p[0] == RT(1)) h21 = -1, h12 = 1;
      if (active)
        for (int i = 0; i < n; i++) {
          T xv = x[i], yv = y[i];
          x[i] = h11 * xv + h12 * yv;
          y[i] = h21 * xv + h22 * yv;
        }
      return cudaSuccess;
    }
    default: return cudaErrorInvalidValue;
  }
}

// A level 2 matrix operand: its storage (general, band, packed; full,
// symmetric/Hermitian or triangular) and the logical element (i, j).
template <class T>
struct Mat {
  enum Kind { General, Band, Packed } kind = General;
  enum Shape { Full, Sym, Herm, Tri } shape = Full;
  T* a = nullptr;
  int64_t lda = 0, m = 0, n = 0, kl = 0, ku = 0;
  bool upper = false, unit = false;
  // The stored element for (i, j) inside the stored region, else nullptr.
  T* at(int64_t i, int64_t j) const {
    if (shape != Full && (upper ? i > j : i < j)) return nullptr;
    switch (kind) {
      case General: return a + i + j * lda;
      case Band:
        if (shape == Full) {
          if (i < j - ku || i > j + kl) return nullptr;
          return a + (ku + i - j) + j * lda;
        }
        if (upper) return j - i > kl ? nullptr : a + (kl + i - j) + j * lda;
        return i - j > kl ? nullptr : a + (i - j) + j * lda;
      case Packed:
        if (upper) return a + i + j * (j + 1) / 2;
        return a + (i - j) + (j * (2 * n - j + 1)) / 2;
    }
    return nullptr;
  }
  T get(int64_t i, int64_t j) const {
    if (shape == Tri) {
      if (i == j && unit) return T(1);
      const T* p = at(i, j);
      return p ? *p : T(0);
    }
    if (shape == Full) {
      const T* p = at(i, j);
      return p ? *p : T(0);
    }
    if (i == j) return shape == Herm ? T(re(*at(i, i))) : *at(i, i);
    if (const T* p = at(i, j)) return *p;
    const T* q = at(j, i);
    if (!q) return T(0);
    return shape == Herm ? cj(*q) : *q;
  }
  // op(A)(i, j).
  T opget(BlasOp t, int64_t i, int64_t j) const {
    if (t == BlasOp::N) return get(i, j);
    return t == BlasOp::T ? get(j, i) : cj(get(j, i));
  }
};

template <class T>
Err l2_typed(Mem& mem, const BlasL2Args& a) {
  const uint32_t r = a.routine;
  const bool general = r == kL2Gemv || r == kL2Gbmv || r == kL2Ger || r == kL2Gerc;
  const int64_t m = general ? a.m : a.n, n = a.n;
  const bool tri = r >= kL2Trmv;
  const bool mv = r == kL2Gemv || r == kL2Gbmv || r == kL2Symv || r == kL2Hemv || r == kL2Sbmv || r == kL2Hbmv ||
                  r == kL2Spmv || r == kL2Hpmv;
  T al{}, be{};
  if (!tri) {
    if (r == kL2Her || r == kL2Hpr) {
      R<T> ar;
      if (!mem.get(a.alpha, &ar)) return cudaErrorIllegalAddress;
      al = T(ar);
    } else if (!mem.get(a.alpha, &al)) {
      return cudaErrorIllegalAddress;
    }
    if (mv && !mem.get(a.beta, &be)) return cudaErrorIllegalAddress;
  }
  if (m == 0 || n == 0) return cudaSuccess;
  Mat<T> A;
  A.m = m, A.n = n, A.lda = a.lda, A.upper = a.uplo == 1, A.unit = a.diag == 1;
  const bool band = r == kL2Gbmv || r == kL2Sbmv || r == kL2Hbmv || r == kL2Tbmv || r == kL2Tbsv;
  const bool packed = r == kL2Spmv || r == kL2Hpmv || r == kL2Spr || r == kL2Hpr || r == kL2Spr2 || r == kL2Hpr2 ||
                      r == kL2Tpmv || r == kL2Tpsv;
  A.kind = band ? Mat<T>::Band : packed ? Mat<T>::Packed : Mat<T>::General;
  A.kl = a.kl, A.ku = a.ku;
  const bool herm = r == kL2Hemv || r == kL2Hbmv || r == kL2Hpmv || r == kL2Her || r == kL2Hpr || r == kL2Her2 ||
                    r == kL2Hpr2;
  A.shape = general ? Mat<T>::Full : tri ? Mat<T>::Tri : herm ? Mat<T>::Herm : Mat<T>::Sym;
  uint64_t abytes = packed ? uint64_t(n) * uint64_t(n + 1) / 2 * sizeof(T)
                           : mat_bytes(band ? (r == kL2Gbmv ? a.kl + a.ku + 1 : a.kl + 1) : m, n, a.lda, sizeof(T));
  A.a = mem.view<T>(a.A, abytes);
  if (!A.a) return cudaErrorIllegalAddress;
  const BlasOp t = general || tri ? a.trans : BlasOp::N;
  int64_t lx = n, ly = m;
  if (r == kL2Gemv || r == kL2Gbmv) lx = t == BlasOp::N ? n : m, ly = t == BlasOp::N ? m : n;
  if (r == kL2Ger || r == kL2Gerc) lx = m, ly = n;
  Vec<T> x, y;
  if (!vec(mem, a.x, int(lx), a.incx, &x)) return cudaErrorIllegalAddress;
  const bool has_y = mv || r == kL2Ger || r == kL2Gerc || r == kL2Syr2 || r == kL2Her2 || r == kL2Spr2 || r == kL2Hpr2;
  if (has_y && !vec(mem, a.y, int(ly), a.incy, &y)) return cudaErrorIllegalAddress;
  const int64_t rows = t == BlasOp::N ? m : n, cols = t == BlasOp::N ? n : m;  // op(A)'s shape
  if (mv) {
    std::vector<T> tmp(size_t(rows), T(0));
    for (int64_t i = 0; i < rows; i++)
      for (int64_t j = 0; j < cols; j++) tmp[i] += A.opget(t, i, j) * x[j];
    for (int64_t i = 0; i < rows; i++) y[i] = al * tmp[i] + (be == T(0) ? T(0) : be * y[i]);
    return cudaSuccess;
  }
  if (r == kL2Trmv || r == kL2Tbmv || r == kL2Tpmv) {
    std::vector<T> tmp(size_t(n), T(0));
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < n; j++) tmp[i] += A.opget(t, i, j) * x[j];
    for (int64_t i = 0; i < n; i++) x[i] = tmp[i];
    return cudaSuccess;
  }
  if (r == kL2Trsv || r == kL2Tbsv || r == kL2Tpsv) {
    // op(A) is lower triangular when (lower, N) or (upper, T/C).
    const bool lower = A.upper == (t != BlasOp::N);
    for (int64_t s = 0; s < n; s++) {
      const int64_t i = lower ? s : n - 1 - s;
      T v = x[i];
      if (lower)
        for (int64_t j = 0; j < i; j++) v -= A.opget(t, i, j) * x[j];
      else
        for (int64_t j = i + 1; j < n; j++) v -= A.opget(t, i, j) * x[j];
      x[i] = v / A.opget(t, i, i);
    }
    return cudaSuccess;
  }
  // Rank-1 and rank-2 updates of the stored region.
  for (int64_t j = 0; j < n; j++)
    for (int64_t i = 0; i < m; i++) {
      T* p = A.at(i, j);
      if (!p) continue;
      switch (r) {
        case kL2Ger: *p += al * x[i] * y[j]; break;
        case kL2Gerc: *p += al * x[i] * cj(y[j]); break;
        case kL2Syr:
        case kL2Spr: *p += al * x[i] * x[j]; break;
        case kL2Her:
        case kL2Hpr: *p += al * x[i] * cj(x[j]); break;
        case kL2Syr2:
        case kL2Spr2: *p += al * (x[i] * y[j] + y[i] * x[j]); break;
        case kL2Her2:
        case kL2Hpr2: *p += al * x[i] * cj(y[j]) + cj(al) * y[i] * cj(x[j]); break;
        default: return cudaErrorInvalidValue;
      }
      if (herm && i == j) *p = T(re(*p));
    }
  return cudaSuccess;
}

// cblas_?name for the element type T: real scalars pass by value, complex
// ones by address.
template <class T>
auto sarg(const T& v) {
  if constexpr (kCx<T>)
    return static_cast<const void*>(&v);
  else
    return v;
}
#define WH_CBLAS(T, fn, ...)                          \
  do {                                                \
    if constexpr (std::is_same_v<T, float>)           \
      cblas_s##fn(__VA_ARGS__);                       \
    else if constexpr (std::is_same_v<T, double>)     \
      cblas_d##fn(__VA_ARGS__);                       \
    else if constexpr (std::is_same_v<T, cf>)         \
      cblas_c##fn(__VA_ARGS__);                       \
    else                                              \
      cblas_z##fn(__VA_ARGS__);                       \
  } while (0)

CBLAS_TRANSPOSE trc(BlasOp o) {
  return o == BlasOp::N ? CblasNoTrans : o == BlasOp::T ? CblasTrans : CblasConjTrans;
}

template <class T>
Err l3_one(Mem& mem, const BlasL3Args& a, uint64_t pA, uint64_t pB, uint64_t pC, T al, T be, R<T> alr, R<T> ber) {
  const uint32_t r = a.routine;
  const int64_t m = a.m, n = a.n, k = a.k;
  const uint64_t es = sizeof(T);
  const bool ta_n = a.ta == BlasOp::N, tb_n = a.tb == BlasOp::N;
  const CBLAS_UPLO uplo = a.uplo == 1 ? CblasUpper : CblasLower;
  const CBLAS_SIDE side = a.side == 0 ? CblasLeft : CblasRight;
  const CBLAS_DIAG diag = a.diag == 1 ? CblasUnit : CblasNonUnit;
  const int64_t ka = a.side == 0 ? m : n;
  // C = beta C over the rows x cols (or the uplo triangle) when A/B are not read.
  auto scale_c = [&](T* c, int64_t rows, int64_t cols, bool tri_only, T b) {
    for (int64_t j = 0; j < cols; j++)
      for (int64_t i = 0; i < rows; i++) {
        if (tri_only && (a.uplo == 1 ? i > j : i < j)) continue;
        T& v = c[i + j * a.ldc];
        v = b == T(0) ? T(0) : b * v;
      }
  };
  switch (r) {
    case kL3Gemm: {
      if (m == 0 || n == 0) return cudaSuccess;
      T* c = mem.view<T>(pC, mat_bytes(m, n, a.ldc, es));
      if (!c) return cudaErrorIllegalAddress;
      if (k == 0 || al == T(0)) return scale_c(c, m, n, false, be), cudaSuccess;
      T* A = mem.view<T>(pA, mat_bytes(ta_n ? m : k, ta_n ? k : m, a.lda, es));
      T* B = mem.view<T>(pB, mat_bytes(tb_n ? k : n, tb_n ? n : k, a.ldb, es));
      if (!A || !B) return cudaErrorIllegalAddress;
      WH_CBLAS(T, gemm, CblasColMajor, trc(a.ta), trc(a.tb), blasint(m), blasint(n), blasint(k), sarg(al), A,
               blasint(a.lda), B, blasint(a.ldb), sarg(be), c, blasint(a.ldc));
      return cudaSuccess;
    }
    case kL3Symm:
    case kL3Hemm: {
      if (m == 0 || n == 0) return cudaSuccess;
      T* c = mem.view<T>(pC, mat_bytes(m, n, a.ldc, es));
      T* A = mem.view<T>(pA, mat_bytes(ka, ka, a.lda, es));
      T* B = mem.view<T>(pB, mat_bytes(m, n, a.ldb, es));
      if (!A || !B || !c) return cudaErrorIllegalAddress;
      if (r == kL3Symm) {
        WH_CBLAS(T, symm, CblasColMajor, side, uplo, blasint(m), blasint(n), sarg(al), A, blasint(a.lda), B,
                 blasint(a.ldb), sarg(be), c, blasint(a.ldc));
      } else if constexpr (std::is_same_v<T, cf>) {
        cblas_chemm(CblasColMajor, side, uplo, blasint(m), blasint(n), &al, A, blasint(a.lda), B, blasint(a.ldb), &be,
                    c, blasint(a.ldc));
      } else if constexpr (std::is_same_v<T, cd>) {
        cblas_zhemm(CblasColMajor, side, uplo, blasint(m), blasint(n), &al, A, blasint(a.lda), B, blasint(a.ldb), &be,
                    c, blasint(a.ldc));
      }
      return cudaSuccess;
    }
    case kL3Syrk:
    case kL3Herk:
    case kL3Syr2k:
    case kL3Her2k: {
      if (n == 0) return cudaSuccess;
      T* c = mem.view<T>(pC, mat_bytes(n, n, a.ldc, es));
      if (!c) return cudaErrorIllegalAddress;
      const bool real_beta = r == kL3Herk || r == kL3Her2k;
      const T bsc = real_beta ? T(ber) : be;
      const bool alpha0 = r == kL3Herk ? alr == R<T>(0) : al == T(0);
      if (k == 0 || alpha0) {
        scale_c(c, n, n, true, bsc);
        if (real_beta)
          for (int64_t i = 0; i < n; i++) c[i + i * a.ldc] = T(re(c[i + i * a.ldc]));
        return cudaSuccess;
      }
      const int64_t ar = ta_n ? n : k, ac = ta_n ? k : n;
      T* A = mem.view<T>(pA, mat_bytes(ar, ac, a.lda, es));
      if (!A) return cudaErrorIllegalAddress;
      // Real types: T and C are the same transpose.
      const CBLAS_TRANSPOSE tt = ta_n ? CblasNoTrans : kCx<T> ? trc(a.ta) : CblasTrans;
      if (r == kL3Syrk) {
        WH_CBLAS(T, syrk, CblasColMajor, uplo, tt, blasint(n), blasint(k), sarg(al), A, blasint(a.lda), sarg(be), c,
                 blasint(a.ldc));
        return cudaSuccess;
      }
      if (r == kL3Herk) {
        if constexpr (std::is_same_v<T, cf>)
          cblas_cherk(CblasColMajor, uplo, tt, blasint(n), blasint(k), alr, A, blasint(a.lda), ber, c, blasint(a.ldc));
        else if constexpr (std::is_same_v<T, cd>)
          cblas_zherk(CblasColMajor, uplo, tt, blasint(n), blasint(k), alr, A, blasint(a.lda), ber, c, blasint(a.ldc));
        return cudaSuccess;
      }
      T* B = mem.view<T>(pB, mat_bytes(ar, ac, a.ldb, es));
      if (!B) return cudaErrorIllegalAddress;
      if (r == kL3Syr2k) {
        WH_CBLAS(T, syr2k, CblasColMajor, uplo, tt, blasint(n), blasint(k), sarg(al), A, blasint(a.lda), B,
                 blasint(a.ldb), sarg(be), c, blasint(a.ldc));
      } else if constexpr (std::is_same_v<T, cf>) {
        cblas_cher2k(CblasColMajor, uplo, tt, blasint(n), blasint(k), &al, A, blasint(a.lda), B, blasint(a.ldb), ber,
                     c, blasint(a.ldc));
      } else if constexpr (std::is_same_v<T, cd>) {
        cblas_zher2k(CblasColMajor, uplo, tt, blasint(n), blasint(k), &al, A, blasint(a.lda), B, blasint(a.ldb), ber,
                     c, blasint(a.ldc));
      }
      return cudaSuccess;
    }
    case kL3Trmm:
    case kL3Trsm: {
      if (m == 0 || n == 0) return cudaSuccess;
      T* A = mem.view<T>(pA, mat_bytes(ka, ka, a.lda, es));
      T* B = mem.view<T>(pB, mat_bytes(m, n, a.ldb, es));
      if (!A || !B) return cudaErrorIllegalAddress;
      if (r == kL3Trsm) {
        WH_CBLAS(T, trsm, CblasColMajor, side, uplo, trc(a.ta), diag, blasint(m), blasint(n), sarg(al), A,
                 blasint(a.lda), B, blasint(a.ldb));
        return cudaSuccess;
      }
      // cuBLAS's trmm is out of place: C = alpha op(A) B (or B op(A)).
      T* c = mem.view<T>(pC, mat_bytes(m, n, a.ldc, es));
      if (!c) return cudaErrorIllegalAddress;
      std::vector<T> t(size_t(m * n));
      for (int64_t j = 0; j < n; j++)
        for (int64_t i = 0; i < m; i++) t[i + j * m] = B[i + j * a.ldb];
      WH_CBLAS(T, trmm, CblasColMajor, side, uplo, trc(a.ta), diag, blasint(m), blasint(n), sarg(al), A,
               blasint(a.lda), t.data(), blasint(m));
      for (int64_t j = 0; j < n; j++)
        for (int64_t i = 0; i < m; i++) c[i + j * a.ldc] = t[i + j * m];
      return cudaSuccess;
    }
    case kL3Geam: {
      if (m == 0 || n == 0) return cudaSuccess;
      T* c = mem.view<T>(pC, mat_bytes(m, n, a.ldc, es));
      if (!c) return cudaErrorIllegalAddress;
      T* A = nullptr;
      T* B = nullptr;
      if (al != T(0) && !(A = mem.view<T>(pA, mat_bytes(ta_n ? m : n, ta_n ? n : m, a.lda, es))))
        return cudaErrorIllegalAddress;
      if (be != T(0) && !(B = mem.view<T>(pB, mat_bytes(tb_n ? m : n, tb_n ? n : m, a.ldb, es))))
        return cudaErrorIllegalAddress;
      auto op = [](BlasOp o, T* p, int64_t ld, int64_t i, int64_t j) {
        if (o == BlasOp::N) return p[i + j * ld];
        return o == BlasOp::T ? p[j + i * ld] : cj(p[j + i * ld]);
      };
      std::vector<T> t(size_t(m * n));  // C may alias A or B
      for (int64_t j = 0; j < n; j++)
        for (int64_t i = 0; i < m; i++)
          t[i + j * m] = (A ? al * op(a.ta, A, a.lda, i, j) : T(0)) + (B ? be * op(a.tb, B, a.ldb, i, j) : T(0));
      for (int64_t j = 0; j < n; j++)
        for (int64_t i = 0; i < m; i++) c[i + j * a.ldc] = t[i + j * m];
      return cudaSuccess;
    }
    case kL3Dgmm: {
      if (m == 0 || n == 0) return cudaSuccess;
      T* c = mem.view<T>(pC, mat_bytes(m, n, a.ldc, es));
      T* A = mem.view<T>(pA, mat_bytes(m, n, a.lda, es));
      Vec<T> x;
      const int lx = int(a.side == 0 ? m : n);
      if (!c || !A || !vec(mem, pB, lx, int(a.ldb), &x)) return cudaErrorIllegalAddress;
      for (int64_t j = 0; j < n; j++)
        for (int64_t i = 0; i < m; i++) c[i + j * a.ldc] = A[i + j * a.lda] * x[a.side == 0 ? i : j];
      return cudaSuccess;
    }
    default: return cudaErrorInvalidValue;
  }
}

template <class T>
Err l3_typed(Mem& mem, const BlasL3Args& a) {
  T al{}, be{};
  R<T> alr{}, ber{};
  const uint32_t r = a.routine;
  if (r == kL3Herk) {
    if (!mem.get(a.alpha, &alr) || !mem.get(a.beta, &ber)) return cudaErrorIllegalAddress;
  } else if (r != kL3Dgmm) {
    if (!mem.get(a.alpha, &al)) return cudaErrorIllegalAddress;
    if (r == kL3Her2k) {
      if (!mem.get(a.beta, &ber)) return cudaErrorIllegalAddress;
    } else if (r != kL3Trmm && r != kL3Trsm && !mem.get(a.beta, &be)) {
      return cudaErrorIllegalAddress;
    }
  }
  const uint64_t es = sizeof(T);
  for (int i = 0; i < a.batch; i++) {
    uint64_t pA = a.A, pB = a.B, pC = a.C;
    if (a.mode == kBlasArrays) {
      pA = a.pa[i], pB = a.pb[i], pC = a.pc.empty() ? 0 : a.pc[i];
    } else if (a.mode == kBlasStrided) {
      pA += uint64_t(i) * uint64_t(a.sa) * es, pB += uint64_t(i) * uint64_t(a.sb) * es,
          pC += uint64_t(i) * uint64_t(a.sc) * es;
    }
    if (Err e = l3_one<T>(mem, a, pA, pB, pC, al, be, alr, ber); e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

// ---- GemmEx: the storage types as fp32 (or fp64) and back.
float bf16_to_float(uint16_t h) {
  uint32_t b = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
uint16_t float_to_bf16(float f) {  // round to nearest even
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7FFFFFFF) > 0x7F800000) return uint16_t((x >> 16) | 0x40);  // quiet NaN
  x += 0x7FFF + ((x >> 16) & 1);
  return uint16_t(x >> 16);
}
template <class W>
bool load_ex(Mem& mem, uint64_t p, int dt, int64_t rows, int64_t cols, int64_t ld, std::vector<W>& out) {
  out.assign(size_t(rows * cols), W(0));
  if (rows <= 0 || cols <= 0) return true;
  const uint64_t es = dt == kDtR64F ? 8 : dt == kDtR32F ? 4 : 2;
  void* v = mem.view<uint16_t>(p, mat_bytes(rows, cols, ld, es));
  if (!v || p % es) return false;
  for (int64_t j = 0; j < cols; j++)
    for (int64_t i = 0; i < rows; i++) {
      const int64_t s = i + j * ld;
      W w;
      switch (dt) {
        case kDtR64F: w = W(static_cast<double*>(v)[s]); break;
        case kDtR32F: w = W(static_cast<float*>(v)[s]); break;
        case kDtR16F: w = W(half_to_float(static_cast<uint16_t*>(v)[s])); break;
        default: w = W(bf16_to_float(static_cast<uint16_t*>(v)[s])); break;
      }
      out[size_t(i + j * rows)] = w;
    }
  return true;
}
template <class W>
bool store_ex(Mem& mem, uint64_t p, int dt, int64_t rows, int64_t cols, int64_t ld, const std::vector<W>& in) {
  const uint64_t es = dt == kDtR64F ? 8 : dt == kDtR32F ? 4 : 2;
  void* v = mem.view<uint16_t>(p, mat_bytes(rows, cols, ld, es));
  if (!v || p % es) return false;
  for (int64_t j = 0; j < cols; j++)
    for (int64_t i = 0; i < rows; i++) {
      const int64_t s = i + j * ld;
      const W w = in[size_t(i + j * rows)];
      switch (dt) {
        case kDtR64F: static_cast<double*>(v)[s] = double(w); break;
        case kDtR32F: static_cast<float*>(v)[s] = float(w); break;
        case kDtR16F: static_cast<uint16_t*>(v)[s] = float_to_half(float(w)); break;
        default: static_cast<uint16_t*>(v)[s] = float_to_bf16(float(w)); break;
      }
    }
  return true;
}

template <class W>
Err gemm_ex_typed(Mem& mem, const BlasGemmExArgs& a) {
  const GemmArgs& g = a.g;
  // alpha/beta: the compute type's scalar (fp16 for CUBLAS_COMPUTE_16F).
  W al, be;
  const bool half = a.compute == kCompute16F || a.compute == kCompute16FPedantic;
  if (half && (g.alpha.device || g.beta.device)) {
    uint16_t* pa = mem.view<uint16_t>(g.alpha.dptr, 2);
    uint16_t* pb = mem.view<uint16_t>(g.beta.dptr, 2);
    if (!pa || !pb) return cudaErrorIllegalAddress;
    al = W(half_to_float(*pa)), be = W(half_to_float(*pb));
  } else if (!mem.get(g.alpha, &al) || !mem.get(g.beta, &be)) {
    return cudaErrorIllegalAddress;
  }
  if (g.m == 0 || g.n == 0) return cudaSuccess;
  const bool ta_n = g.ta == BlasOp::N, tb_n = g.tb == BlasOp::N;
  const int64_t ar = ta_n ? g.m : g.k, ac = ta_n ? g.k : g.m, br = tb_n ? g.k : g.n, bc = tb_n ? g.n : g.k;
  std::vector<W> A, B, C;
  for (int i = 0; i < a.batch; i++) {
    uint64_t pA = g.A, pB = g.B, pC = g.C;
    auto esz = [](int dt) -> uint64_t { return dt == kDtR64F ? 8 : dt == kDtR32F ? 4 : 2; };
    if (a.mode == kBlasArrays) {
      pA = a.pa[i], pB = a.pb[i], pC = a.pc[i];
    } else if (a.mode == kBlasStrided) {
      pA += uint64_t(i) * uint64_t(a.sa) * esz(a.atype), pB += uint64_t(i) * uint64_t(a.sb) * esz(a.btype),
          pC += uint64_t(i) * uint64_t(a.sc) * esz(a.ctype);
    }
    if (!load_ex(mem, pC, a.ctype, g.m, g.n, g.ldc, C)) return cudaErrorIllegalAddress;
    if (g.k > 0 && al != W(0)) {
      if (!load_ex(mem, pA, a.atype, ar, ac, g.lda, A) || !load_ex(mem, pB, a.btype, br, bc, g.ldb, B))
        return cudaErrorIllegalAddress;
      if (be == W(0)) std::fill(C.begin(), C.end(), W(0));  // beta 0 overwrites NaNs too
      WH_CBLAS(W, gemm, CblasColMajor, tr(g.ta), tr(g.tb), g.m, g.n, g.k, al, A.data(),
               blasint(std::max<int64_t>(ar, 1)), B.data(), blasint(std::max<int64_t>(br, 1)), be, C.data(), g.m);
    } else {
      for (W& x : C) x = be == W(0) ? W(0) : be * x;
    }
    if (!store_ex(mem, pC, a.ctype, g.m, g.n, g.ldc, C)) return cudaErrorIllegalAddress;
  }
  return cudaSuccess;
}

// ---- LU family (getrf/getri/getrs/matinv batched): loops in T.
template <class T>
Err lu_typed(Mem& mem, const BlasLuArgs& a) {
  const int64_t n = a.n, es = sizeof(T);
  int* piv = nullptr;
  int* info = nullptr;
  const bool pivoting = a.pivots != 0 && a.routine != kLuMatinv;
  if (a.batch == 0) return cudaSuccess;
  if (pivoting && n > 0 && !(piv = mem.view<int>(a.pivots, uint64_t(a.batch) * uint64_t(n) * 4)))
    return cudaErrorIllegalAddress;
  if (a.routine != kLuGetrs && !(info = mem.view<int>(a.info, uint64_t(a.batch) * 4))) return cudaErrorIllegalAddress;
  // LU of the n x n matrix at p (ld), in place; pivots 1-based (or none).
  auto getrf = [&](T* p, int64_t ld, int* pv, bool do_piv) -> int {
    int inf = 0;
    for (int64_t j = 0; j < n; j++) {
      int64_t pr = j;
      if (do_piv) {
        double best = -1;
        for (int64_t i = j; i < n; i++)
          if (double v = std::abs(p[i + j * ld]); v > best) best = v, pr = i;
        pv[j] = int(pr + 1);
        if (pr != j)
          for (int64_t c = 0; c < n; c++) std::swap(p[j + c * ld], p[pr + c * ld]);
      }
      const T d = p[j + j * ld];
      if (d == T(0)) {
        if (!inf) inf = int(j + 1);
        continue;
      }
      for (int64_t i = j + 1; i < n; i++) p[i + j * ld] /= d;
      for (int64_t c = j + 1; c < n; c++)
        for (int64_t i = j + 1; i < n; i++) p[i + c * ld] -= p[i + j * ld] * p[j + c * ld];
    }
    return inf;
  };
  // Solves op(LU) X = B (B: n x nrhs at b, ldb) with the factors at f.
  auto getrs = [&](const T* f, int64_t ldf, const int* pv, T* b, int64_t ldb, int64_t nrhs, BlasOp t) {
    auto F = [&](int64_t i, int64_t j) { return t == BlasOp::C ? cj(f[j + i * ldf]) : f[j + i * ldf]; };
    for (int64_t c = 0; c < nrhs; c++) {
      T* x = b + c * ldb;
      if (t == BlasOp::N) {
        if (pv)
          for (int64_t i = 0; i < n; i++)
            if (pv[i] - 1 != i) std::swap(x[i], x[pv[i] - 1]);
        for (int64_t i = 0; i < n; i++)  // L, unit diagonal
          for (int64_t j = 0; j < i; j++) x[i] -= f[i + j * ldf] * x[j];
        for (int64_t i = n - 1; i >= 0; i--) {  // U
          for (int64_t j = i + 1; j < n; j++) x[i] -= f[i + j * ldf] * x[j];
          x[i] /= f[i + i * ldf];
        }
      } else {  // op(A) = A^T or A^H = U' L' P
        for (int64_t i = 0; i < n; i++) {  // U' is lower
          for (int64_t j = 0; j < i; j++) x[i] -= F(i, j) * x[j];
          x[i] /= F(i, i);
        }
        for (int64_t i = n - 1; i >= 0; i--)  // L' is upper, unit
          for (int64_t j = i + 1; j < n; j++) x[i] -= F(i, j) * x[j];
        if (pv)
          for (int64_t i = n - 1; i >= 0; i--)
            if (pv[i] - 1 != i) std::swap(x[i], x[pv[i] - 1]);
      }
    }
  };
  std::vector<T> work;
  std::vector<int> pcopy(size_t(n > 0 ? n : 0));
  for (int bi = 0; bi < a.batch; bi++) {
    T* A = mem.view<T>(a.pa[bi], mat_bytes(n, n, a.lda, es));
    if (!A && n > 0) return cudaErrorIllegalAddress;
    int* pv = piv ? piv + int64_t(bi) * n : nullptr;
    if (pv && a.routine != kLuGetrf) {
      // Pivots are device data the guest may have written: a copy, each
      // one inside 1..n (a GPU would fault on a wild one).
      for (int64_t i = 0; i < n; i++) {
        pcopy[size_t(i)] = pv[i];
        if (pcopy[size_t(i)] < 1 || pcopy[size_t(i)] > n) return cudaErrorIllegalAddress;
      }
      pv = pcopy.data();
    }
    switch (a.routine) {
      case kLuGetrf: info[bi] = getrf(A, a.lda, pv, pv != nullptr); break;
      case kLuGetri:
      case kLuMatinv: {
        T* C = mem.view<T>(a.pc[bi], mat_bytes(n, n, a.ldc, es));
        if (!C && n > 0) return cudaErrorIllegalAddress;
        const T* f = A;
        int64_t ldf = a.lda;
        std::vector<int> mp;
        int inf = 0;
        if (a.routine == kLuMatinv) {  // factor a copy, A is left as it was
          work.assign(size_t(n * n), T(0));
          for (int64_t j = 0; j < n; j++)
            for (int64_t i = 0; i < n; i++) work[i + j * n] = A[i + j * a.lda];
          mp.assign(size_t(n), 0);
          inf = getrf(work.data(), n, mp.data(), true);
          f = work.data(), ldf = n, pv = mp.data();
        } else {
          for (int64_t i = 0; i < n && !inf; i++)
            if (A[i + i * a.lda] == T(0)) inf = int(i + 1);
        }
        info[bi] = inf;
        if (inf) break;  // singular: C is left as it was
        for (int64_t j = 0; j < n; j++)
          for (int64_t i = 0; i < n; i++) C[i + j * a.ldc] = i == j ? T(1) : T(0);
        getrs(f, ldf, pv, C, a.ldc, n, BlasOp::N);
        break;
      }
      case kLuGetrs: {
        T* C = mem.view<T>(a.pc[bi], mat_bytes(n, a.nrhs, a.ldc, es));
        if (!C && n > 0 && a.nrhs > 0) return cudaErrorIllegalAddress;
        if (n > 0) getrs(A, a.lda, pv, C, a.ldc, a.nrhs, a.trans);
        break;
      }
      default: return cudaErrorInvalidValue;
    }
  }
  return cudaSuccess;
}

// ---- geqrfBatched: LAPACK's ?geqrf (OpenBLAS carries LAPACK) per matrix.
template <class T>
void geqrf(const int* m, const int* n, T* a, const int* lda, T* tau, T* work, const int* lwork, int* info) {
  if constexpr (std::is_same_v<T, float>) sgeqrf_(m, n, a, lda, tau, work, lwork, info);
  else if constexpr (std::is_same_v<T, double>) dgeqrf_(m, n, a, lda, tau, work, lwork, info);
  else if constexpr (std::is_same_v<T, cf>) cgeqrf_(m, n, a, lda, tau, work, lwork, info);
  else zgeqrf_(m, n, a, lda, tau, work, lwork, info);
}
template <class T>
Err geqrf_typed(Mem& mem, const BlasGeqrfArgs& a) {
  if (a.batch == 0) return cudaSuccess;
  const int m = a.m, n = a.n, lda = int(a.lda), k = std::min(m, n);
  // Blocked geqrf wants n * nb of work; a workspace query gives it once.
  int lwork = -1, info = 0;
  T q{};
  geqrf<T>(&m, &n, nullptr, &lda, nullptr, &q, &lwork, &info);
  lwork = std::max(int(std::real(q)), std::max(1, n));
  std::vector<T> work(static_cast<size_t>(lwork));
  for (int bi = 0; bi < a.batch; bi++) {
    T* A = mem.view<T>(a.pa[size_t(bi)], mat_bytes(m, n, a.lda, sizeof(T)));
    T* tau = mem.view<T>(a.ptau[size_t(bi)], uint64_t(k) * sizeof(T));
    if (!A || !tau) return cudaErrorIllegalAddress;
    geqrf<T>(&m, &n, A, &lda, tau, work.data(), &lwork, &info);
    if (info != 0) return cudaErrorLaunchFailure;  // arguments were checked: not reached
  }
  return cudaSuccess;
}

class SimBlas final : public Blas {
 public:
  explicit SimBlas(Context& ctx) : ctx_(ctx) {
    // OpenBLAS threads spin after each call and would steal the cores the
    // PTX interpreter runs kernels on; WORMHOLE_BLAS_THREADS overrides.
    static std::once_flag once;
    std::call_once(once, [] {
      const char* e = std::getenv("WORMHOLE_BLAS_THREADS");
      int n = e ? std::atoi(e) : 1;
      openblas_set_num_threads(n > 0 ? n : 1);
    });
  }

  Err create(std::unique_ptr<BlasHandle>* out) override {
    *out = std::make_unique<SimBlasHandle>();
    return cudaSuccess;
  }
  int version() const override { return 130100; }

  template <class T>
  T* view(uint64_t dptr, uint64_t bytes) {
    // A guest may pass any address; a GPU faults on a misaligned operand,
    // and we must not form a misaligned T* on the server. (Device and host
    // addresses share their alignment: allocations are page-mapped.)
    if (dptr % alignof(T)) return nullptr;
    return reinterpret_cast<T*>(ctx_.host_view(dptr, bytes));
  }
  // Reads a scalar (host value or device address) as T.
  template <class T>
  bool scalar(const BlasScalar& s, T* out) {
    if (!s.device) {
      *out = T(s.value);
      return true;
    }
    T* p = view<T>(s.dptr, sizeof(T));
    if (!p) return false;
    std::memcpy(out, p, sizeof(T));
    return true;
  }
  template <class T>
  Err put_result(const BlasScalar& r, T v, T* host) {
    if (!r.device) {
      *host = v;
      return cudaSuccess;
    }
    T* p = view<T>(r.dptr, sizeof(T));
    if (!p) return cudaErrorIllegalAddress;
    std::memcpy(p, &v, sizeof(T));
    return cudaSuccess;
  }

  // One gemm on resolved operands.
  template <class T>
  Err gemm_one(const GemmArgs& g, uint64_t A, uint64_t B, uint64_t C, T alpha, T beta) {
    if (g.m == 0 || g.n == 0) return cudaSuccess;
    const uint64_t es = sizeof(T);
    T* c = view<T>(C, mat_bytes(g.m, g.n, g.ldc, es));
    if (!c) return cudaErrorIllegalAddress;
    const T* a = nullptr;
    const T* b = nullptr;
    const bool reads_ab = g.k > 0 && alpha != T(0);
    if (reads_ab) {
      a = view<T>(A, g.ta == BlasOp::N ? mat_bytes(g.m, g.k, g.lda, es) : mat_bytes(g.k, g.m, g.lda, es));
      b = view<T>(B, g.tb == BlasOp::N ? mat_bytes(g.k, g.n, g.ldb, es) : mat_bytes(g.n, g.k, g.ldb, es));
      if (!a || !b) return cudaErrorIllegalAddress;
    }
    if (!reads_ab) {  // C = beta*C; BLAS: beta == 0 overwrites NaNs too
      for (int j = 0; j < g.n; j++)
        for (int i = 0; i < g.m; i++) {
          T& x = c[uint64_t(j) * g.ldc + i];
          x = beta == T(0) ? T(0) : beta * x;
        }
      return cudaSuccess;
    }
    if constexpr (std::is_same_v<T, float>)
      cblas_sgemm(CblasColMajor, tr(g.ta), tr(g.tb), g.m, g.n, g.k, alpha, a, blasint(g.lda), b, blasint(g.ldb), beta,
                  c, blasint(g.ldc));
    else
      cblas_dgemm(CblasColMajor, tr(g.ta), tr(g.tb), g.m, g.n, g.k, alpha, a, blasint(g.lda), b, blasint(g.ldb), beta,
                  c, blasint(g.ldc));
    return cudaSuccess;
  }

  Err gemm(BlasHandle&, const BlasCall&, int dtype, const GemmArgs& g) override {
    if (dtype == 0) {
      float al, be;
      if (!scalar(g.alpha, &al) || !scalar(g.beta, &be)) return cudaErrorIllegalAddress;
      return gemm_one<float>(g, g.A, g.B, g.C, al, be);
    }
    double al, be;
    if (!scalar(g.alpha, &al) || !scalar(g.beta, &be)) return cudaErrorIllegalAddress;
    return gemm_one<double>(g, g.A, g.B, g.C, al, be);
  }

  template <class T>
  Err strided(const GemmArgs& g, int64_t sa, int64_t sb, int64_t sc, int batch) {
    T al, be;
    if (!scalar(g.alpha, &al) || !scalar(g.beta, &be)) return cudaErrorIllegalAddress;
    const uint64_t es = sizeof(T);
    for (int i = 0; i < batch; i++) {
      Err e = gemm_one<T>(g, g.A + uint64_t(i) * uint64_t(sa) * es, g.B + uint64_t(i) * uint64_t(sb) * es,
                          g.C + uint64_t(i) * uint64_t(sc) * es, al, be);
      if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
  }
  Err gemm_strided_batched(BlasHandle&, const BlasCall&, int dtype, const GemmArgs& g, int64_t sa, int64_t sb,
                           int64_t sc, int batch) override {
    return dtype == 0 ? strided<float>(g, sa, sb, sc, batch) : strided<double>(g, sa, sb, sc, batch);
  }

  template <class T>
  Err batched(const GemmArgs& g, int batch) {
    T al, be;
    if (!scalar(g.alpha, &al) || !scalar(g.beta, &be)) return cudaErrorIllegalAddress;
    if (batch == 0 || g.m == 0 || g.n == 0) return cudaSuccess;
    // A and B (and their pointer arrays) are read only when k > 0 and
    // alpha != 0, as the session checks them only when k > 0.
    const bool reads_ab = g.k > 0 && al != T(0);
    const uint64_t* pa = reads_ab ? view<uint64_t>(g.A, uint64_t(batch) * 8) : nullptr;
    const uint64_t* pb = reads_ab ? view<uint64_t>(g.B, uint64_t(batch) * 8) : nullptr;
    const uint64_t* pc = view<uint64_t>(g.C, uint64_t(batch) * 8);
    if (!pc || (reads_ab && (!pa || !pb))) return cudaErrorIllegalAddress;
    for (int i = 0; i < batch; i++) {
      Err e = gemm_one<T>(g, reads_ab ? pa[i] : 0, reads_ab ? pb[i] : 0, pc[i], al, be);
      if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
  }
  Err gemm_batched(BlasHandle&, const BlasCall&, int dtype, const GemmArgs& g, int batch) override {
    return dtype == 0 ? batched<float>(g, batch) : batched<double>(g, batch);
  }

  // Copies a column-major fp16 or fp32 matrix into a dense fp32 one (ld = rows).
  bool widen(uint64_t src, int dt, int64_t rows, int64_t cols, int64_t ld, std::vector<float>& out) {
    out.resize(uint64_t(rows) * uint64_t(cols));
    if (rows <= 0 || cols <= 0) return true;
    if (dt == kDtR32F) {
      const float* p = view<float>(src, mat_bytes(rows, cols, ld, 4));
      if (!p) return false;
      for (int64_t j = 0; j < cols; j++) std::memcpy(&out[j * rows], p + j * ld, rows * 4);
    } else {
      const uint16_t* p = view<uint16_t>(src, mat_bytes(rows, cols, ld, 2));
      if (!p) return false;
      for (int64_t j = 0; j < cols; j++)
        for (int64_t i = 0; i < rows; i++) out[j * rows + i] = half_to_float(p[j * ld + i]);
    }
    return true;
  }

  Err gemm_ex(BlasHandle& h, const BlasCall& c, const GemmArgs& g, int atype, int btype, int ctype, int compute,
              int) override {
    if (atype == kDtR64F) return gemm(h, c, 1, g);  // the session allows 64F only all-64F
    if (atype == kDtR32F && btype == kDtR32F && ctype == kDtR32F) return gemm(h, c, 0, g);
    // fp16 inputs (and/or output), fp32 compute: alpha/beta are floats.
    (void)compute;
    float al, be;
    if (!scalar(g.alpha, &al) || !scalar(g.beta, &be)) return cudaErrorIllegalAddress;
    if (g.m == 0 || g.n == 0) return cudaSuccess;
    const int64_t ar = g.ta == BlasOp::N ? g.m : g.k, ac = g.ta == BlasOp::N ? g.k : g.m;
    const int64_t br = g.tb == BlasOp::N ? g.k : g.n, bc = g.tb == BlasOp::N ? g.n : g.k;
    std::vector<float> a, b, cc;
    if (g.k > 0 && al != 0.f) {
      if (!widen(g.A, atype, ar, ac, g.lda, a) || !widen(g.B, btype, br, bc, g.ldb, b))
        return cudaErrorIllegalAddress;
    }
    if (!widen(g.C, ctype, g.m, g.n, g.ldc, cc)) return cudaErrorIllegalAddress;
    if (g.k > 0 && al != 0.f) {
      cblas_sgemm(CblasColMajor, tr(g.ta), tr(g.tb), g.m, g.n, g.k, al, a.data(), blasint(std::max<int64_t>(ar, 1)),
                  b.data(), blasint(std::max<int64_t>(br, 1)), be, cc.data(), g.m);
    } else {
      for (float& x : cc) x = be == 0.f ? 0.f : be * x;
    }
    if (ctype == kDtR32F) {
      float* p = view<float>(g.C, mat_bytes(g.m, g.n, g.ldc, 4));
      if (!p) return cudaErrorIllegalAddress;
      for (int64_t j = 0; j < g.n; j++) std::memcpy(p + j * g.ldc, &cc[j * g.m], uint64_t(g.m) * 4);
    } else {
      uint16_t* p = view<uint16_t>(g.C, mat_bytes(g.m, g.n, g.ldc, 2));
      if (!p) return cudaErrorIllegalAddress;
      for (int64_t j = 0; j < g.n; j++)
        for (int64_t i = 0; i < g.m; i++) p[j * g.ldc + i] = float_to_half(cc[j * g.m + i]);
    }
    return cudaSuccess;
  }

  Err geam(BlasHandle&, const BlasCall&, const GemmArgs& g) override {
    float al, be;
    if (!scalar(g.alpha, &al) || !scalar(g.beta, &be)) return cudaErrorIllegalAddress;
    if (g.m == 0 || g.n == 0) return cudaSuccess;
    float* c = view<float>(g.C, mat_bytes(g.m, g.n, g.ldc, 4));
    if (!c) return cudaErrorIllegalAddress;
    const float* a = nullptr;
    const float* b = nullptr;
    // Operands whose scalar is zero are not read (cuBLAS allows them null).
    if (al != 0.f) {
      a = view<float>(g.A, g.ta == BlasOp::N ? mat_bytes(g.m, g.n, g.lda, 4) : mat_bytes(g.n, g.m, g.lda, 4));
      if (!a) return cudaErrorIllegalAddress;
    }
    if (be != 0.f) {
      b = view<float>(g.B, g.tb == BlasOp::N ? mat_bytes(g.m, g.n, g.ldb, 4) : mat_bytes(g.n, g.m, g.ldb, 4));
      if (!b) return cudaErrorIllegalAddress;
    }
    // Into a temporary first: C may alias A or B (cuBLAS's in-place forms).
    std::vector<float> t(uint64_t(g.m) * uint64_t(g.n));
    for (int64_t j = 0; j < g.n; j++)
      for (int64_t i = 0; i < g.m; i++) {
        float va = 0.f, vb = 0.f;
        if (a) va = g.ta == BlasOp::N ? a[j * g.lda + i] : a[i * g.lda + j];
        if (b) vb = g.tb == BlasOp::N ? b[j * g.ldb + i] : b[i * g.ldb + j];
        t[j * g.m + i] = (a ? al * va : 0.f) + (b ? be * vb : 0.f);
      }
    for (int64_t j = 0; j < g.n; j++) std::memcpy(c + j * g.ldc, &t[j * g.m], uint64_t(g.m) * 4);
    return cudaSuccess;
  }

  Err gemv(BlasHandle&, const BlasCall&, BlasOp t, int m, int n, const BlasScalar& alpha, uint64_t A, int64_t lda,
           uint64_t x, int incx, const BlasScalar& beta, uint64_t y, int incy) override {
    float al, be;
    if (!scalar(alpha, &al) || !scalar(beta, &be)) return cudaErrorIllegalAddress;
    if (m == 0 || n == 0) return cudaSuccess;
    const int lx = t == BlasOp::N ? n : m, ly = t == BlasOp::N ? m : n;
    const float* a = view<float>(A, mat_bytes(m, n, lda, 4));
    const float* xv = view<float>(x, vec_bytes(lx, incx, 4));
    float* yv = view<float>(y, vec_bytes(ly, incy, 4));
    if (!a || !xv || !yv) return cudaErrorIllegalAddress;
    cblas_sgemv(CblasColMajor, tr(t), m, n, al, a, blasint(lda), xv, incx, be, yv, incy);
    return cudaSuccess;
  }

  Err axpy(BlasHandle&, const BlasCall&, int n, const BlasScalar& alpha, uint64_t x, int incx, uint64_t y,
           int incy) override {
    float al;
    if (!scalar(alpha, &al)) return cudaErrorIllegalAddress;
    if (n <= 0) return cudaSuccess;
    const float* xv = view<float>(x, vec_bytes(n, incx, 4));
    float* yv = view<float>(y, vec_bytes(n, incy, 4));
    if (!xv || !yv) return cudaErrorIllegalAddress;
    cblas_saxpy(n, al, xv, incx, yv, incy);
    return cudaSuccess;
  }

  Err scal(BlasHandle&, const BlasCall&, int n, const BlasScalar& alpha, uint64_t x, int incx) override {
    float al;
    if (!scalar(alpha, &al)) return cudaErrorIllegalAddress;
    if (n <= 0 || incx <= 0) return cudaSuccess;
    float* xv = view<float>(x, vec_bytes(n, incx, 4));
    if (!xv) return cudaErrorIllegalAddress;
    cblas_sscal(n, al, xv, incx);
    return cudaSuccess;
  }

  Err copy(BlasHandle&, const BlasCall&, int n, uint64_t x, int incx, uint64_t y, int incy) override {
    if (n <= 0) return cudaSuccess;
    const float* xv = view<float>(x, vec_bytes(n, incx, 4));
    float* yv = view<float>(y, vec_bytes(n, incy, 4));
    if (!xv || !yv) return cudaErrorIllegalAddress;
    cblas_scopy(n, xv, incx, yv, incy);
    return cudaSuccess;
  }

  Err dot(BlasHandle&, const BlasCall&, int n, uint64_t x, int incx, uint64_t y, int incy, const BlasScalar& r,
          float* host) override {
    float v = 0.f;
    if (n > 0) {
      const float* xv = view<float>(x, vec_bytes(n, incx, 4));
      const float* yv = view<float>(y, vec_bytes(n, incy, 4));
      if (!xv || !yv) return cudaErrorIllegalAddress;
      v = cblas_sdot(n, xv, incx, yv, incy);
    }
    return put_result(r, v, host);
  }
  Err nrm2(BlasHandle&, const BlasCall&, int n, uint64_t x, int incx, const BlasScalar& r, float* host) override {
    float v = 0.f;
    if (n > 0 && incx > 0) {
      const float* xv = view<float>(x, vec_bytes(n, incx, 4));
      if (!xv) return cudaErrorIllegalAddress;
      v = cblas_snrm2(n, xv, incx);
    }
    return put_result(r, v, host);
  }
  Err asum(BlasHandle&, const BlasCall&, int n, uint64_t x, int incx, const BlasScalar& r, float* host) override {
    float v = 0.f;
    if (n > 0 && incx > 0) {
      const float* xv = view<float>(x, vec_bytes(n, incx, 4));
      if (!xv) return cudaErrorIllegalAddress;
      v = cblas_sasum(n, xv, incx);
    }
    return put_result(r, v, host);
  }
  Err iamax(BlasHandle&, const BlasCall&, int n, uint64_t x, int incx, const BlasScalar& r, int* host) override {
    int v = 0;  // cuBLAS: 1-based; 0 for n <= 0 or incx <= 0
    if (n > 0 && incx > 0) {
      const float* xv = view<float>(x, vec_bytes(n, incx, 4));
      if (!xv) return cudaErrorIllegalAddress;
      // Explicit loop: cuBLAS picks the first index of the largest |x|
      // (NaNs aside); OpenBLAS's kernels agree, but this is the reference.
      float best = -1.f;
      for (int i = 0; i < n; i++) {
        float a = std::fabs(xv[uint64_t(i) * uint64_t(incx)]);
        if (a > best) {
          best = a;
          v = i + 1;
        }
      }
    }
    return put_result(r, v, host);
  }

  // The generic ops (see above the class).
  Err l1(BlasHandle&, const BlasCall&, const BlasL1Args& a, BlasL1Result* host) override {
    Mem mem{ctx_};
    return by_type(a.type, [&](auto t) { return l1_typed<decltype(t)>(mem, a, host); });
  }
  Err l2(BlasHandle&, const BlasCall&, const BlasL2Args& a) override {
    Mem mem{ctx_};
    return by_type(a.type, [&](auto t) { return l2_typed<decltype(t)>(mem, a); });
  }
  Err l3(BlasHandle&, const BlasCall&, const BlasL3Args& a) override {
    Mem mem{ctx_};
    return by_type(a.type, [&](auto t) { return l3_typed<decltype(t)>(mem, a); });
  }
  Err gemm_ex_batched(BlasHandle&, const BlasCall&, const BlasGemmExArgs& a) override {
    Mem mem{ctx_};
    return a.atype == kDtR64F ? gemm_ex_typed<double>(mem, a) : gemm_ex_typed<float>(mem, a);
  }
  Err lu_batched(BlasHandle&, const BlasCall&, const BlasLuArgs& a) override {
    Mem mem{ctx_};
    return by_type(a.type, [&](auto t) { return lu_typed<decltype(t)>(mem, a); });
  }
  Err geqrf_batched(BlasHandle&, const BlasCall&, const BlasGeqrfArgs& a) override {
    Mem mem{ctx_};
    return by_type(a.type, [&](auto t) { return geqrf_typed<decltype(t)>(mem, a); });
  }

 private:
  Context& ctx_;
};

}  // namespace

std::unique_ptr<Blas> make_sim_blas(Context& ctx) { return std::make_unique<SimBlas>(ctx); }

}  // namespace wh::server
