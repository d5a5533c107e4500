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
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <type_traits>
#include <vector>

#include "wormhole/server/blas.hpp"

namespace wh::server {

namespace {

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

 private:
  Context& ctx_;
};

}  // namespace

std::unique_ptr<Blas> make_sim_blas(Context& ctx) { return std::make_unique<SimBlas>(ctx); }

}  // namespace wh::server
