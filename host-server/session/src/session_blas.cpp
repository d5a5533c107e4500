// Session: the cuBLAS bodies of the API table (proto/cublas_api.def).
//
// The guest is hostile: every handle, dimension, leading dimension,
// increment, stride, batch count, enum and the device range of every
// operand is checked here before the backend's BLAS (blas.hpp) sees it. A
// failed check returns cudaErrorInvalidValue; for posted operations that
// becomes the session's deferred error (reported at the next synchronising
// call, as a GPU reports asynchronous faults), and the guest library has
// already refused the same arguments synchronously with
// CUBLAS_STATUS_INVALID_VALUE, as real cuBLAS does, so only a guest that
// bypasses it gets here.
#include <spdlog/spdlog.h>

#include <cstring>

#include "wormhole/server/session.hpp"

namespace wh::server {

using namespace wh::proto;

namespace {

constexpr int32_t kMaxBatch = 1 << 24;

bool mul_ok(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_mul_overflow(a, b, out); }
bool add_ok(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_add_overflow(a, b, out); }

bool valid_op(uint32_t t) { return t <= 2; }
BlasOp to_op(uint32_t t) { return BlasOp(t); }
int64_t max1(int64_t v) { return v > 1 ? v : 1; }
bool ld_ok(int64_t ld, int64_t rows) { return ld >= max1(rows) && ld <= INT32_MAX; }

// Elements a column-major rows x cols matrix with leading dimension ld spans.
bool matrix_elems(int64_t rows, int64_t cols, int64_t ld, uint64_t* out) {
  if (rows <= 0 || cols <= 0) {
    *out = 0;
    return true;
  }
  uint64_t v;
  if (!mul_ok(uint64_t(cols - 1), uint64_t(ld), &v) || !add_ok(v, uint64_t(rows), &v)) return false;
  *out = v;
  return true;
}

int dtype_size(int t) {
  switch (t) {
    case kDtR32F: return 4;
    case kDtR64F: return 8;
    case kDtR16F: return 2;
    default: return 0;
  }
}

bool compute_32f(int c) {
  return c == kCompute32F || c == kCompute32FPedantic || c == kCompute32FFast16F || c == kCompute32FFast16BF ||
         c == kCompute32FFastTF32;
}
constexpr int kCompute64F = 70, kCompute64FPedantic = 71;

bool valid_algo(int a) { return (a >= -1 && a <= 23) || (a >= 99 && a <= 115); }

}  // namespace

bool Session::blas_matrix(uint64_t ptr, int64_t rows, int64_t cols, int64_t ld, uint64_t es) const {
  uint64_t n, bytes;
  if (!matrix_elems(rows, cols, ld, &n) || !mul_ok(n, es, &bytes)) return false;
  return bytes == 0 || device_range(ptr, bytes);
}

bool Session::blas_vector(uint64_t ptr, int64_t n, int64_t inc, uint64_t es) const {
  if (n <= 0) return true;
  uint64_t a = uint64_t(inc < 0 ? -inc : inc), elems, bytes;
  if (!mul_ok(uint64_t(n - 1), a, &elems) || !add_ok(elems, 1, &elems) || !mul_ok(elems, es, &bytes)) return false;
  return device_range(ptr, bytes);
}

bool Session::blas_scalar(uint32_t flags, uint64_t word, uint64_t es, bool as_double, BlasScalar* out) const {
  out->device = flags & kBlasDeviceScalars;
  if (out->device) {
    out->dptr = word;
    return device_range(word, es);
  }
  if (as_double) {
    double d;
    std::memcpy(&d, &word, 8);
    out->value = d;
  } else {
    float f;
    uint32_t lo = uint32_t(word);
    std::memcpy(&f, &lo, 4);
    out->value = f;
  }
  return true;
}

Err Session::blas_begin(uint64_t handle, uint64_t stream, uint32_t flags, Blas** blas, BlasHandle** h,
                        BlasCall* call) {
  BlasEntry* be = blas_handles_.get(handle);
  if (!be) return cudaErrorInvalidResourceHandle;
  if (Err e = resolve_stream(stream, &call->stream); e != cudaSuccess) return e;
  if (flags & ~(kBlasDeviceScalars | 0xFF00u)) return cudaErrorInvalidValue;
  call->device_scalars = flags & kBlasDeviceScalars;
  call->math_mode = blas_math_mode(flags);
  // Defined cublasMath_t values, optionally with the reduction flag (16).
  if ((call->math_mode & ~16u) > 3) return cudaErrorInvalidValue;
  *blas = ctx_->blas(nullptr);
  if (!*blas) return cudaErrorNotSupported;
  *h = be->h.get();
  return cudaSuccess;
}

// ------------------------------------------------------------ handles

int32_t Session::on_BlasCreate(const BlasCreateReq&, std::span<const uint8_t>, BlasCreateResp& rs,
                               std::vector<uint8_t>&) {
  std::string err;
  Blas* b = ctx_->blas(&err);
  if (!b) {
    spdlog::warn("session {}: cuBLAS unavailable: {}", id_, err);
    return cudaErrorNotSupported;
  }
  BlasEntry be;
  if (Err e = b->create(&be.h); e != cudaSuccess) return e;
  rs.handle = blas_handles_.add(std::make_unique<BlasEntry>(std::move(be)));
  rs.version = b->version();
  return rs.handle ? cudaSuccess : cudaErrorMemoryAllocation;
}

int32_t Session::on_BlasDestroy(const BlasDestroyReq& rq, std::span<const uint8_t>, BlasDestroyResp&,
                                std::vector<uint8_t>&) {
  return blas_handles_.take(rq.handle) ? cudaSuccess : cudaErrorInvalidResourceHandle;
}

// ------------------------------------------------------------ level 3

namespace {
// The checks every gemm shape shares (cuBLAS's own argument rules).
bool gemm_shape_ok(uint32_t ta, uint32_t tb, int32_t m, int32_t n, int32_t k, int64_t lda, int64_t ldb,
                   int64_t ldc) {
  if (!valid_op(ta) || !valid_op(tb) || m < 0 || n < 0 || k < 0) return false;
  return ld_ok(lda, ta == 0 ? m : k) && ld_ok(ldb, tb == 0 ? k : n) && ld_ok(ldc, m);
}
GemmArgs gemm_args(uint32_t ta, uint32_t tb, int32_t m, int32_t n, int32_t k, uint64_t A, int64_t lda, uint64_t B,
                   int64_t ldb, uint64_t C, int64_t ldc) {
  GemmArgs g;
  g.ta = to_op(ta);
  g.tb = to_op(tb);
  g.m = m;
  g.n = n;
  g.k = k;
  g.A = A;
  g.B = B;
  g.C = C;
  g.lda = lda;
  g.ldb = ldb;
  g.ldc = ldc;
  return g;
}
}  // namespace

int32_t Session::on_BlasGemm(const BlasGemmReq& rq, std::span<const uint8_t>, BlasGemmResp&, std::vector<uint8_t>&) {
  Blas* b;
  BlasHandle* h;
  BlasCall c;
  if (Err e = blas_begin(rq.handle, rq.stream, rq.flags, &b, &h, &c); e != cudaSuccess) return e;
  if (rq.dtype != kBlasF32 && rq.dtype != kBlasF64) return cudaErrorInvalidValue;
  if (!gemm_shape_ok(rq.transa, rq.transb, rq.m, rq.n, rq.k, rq.lda, rq.ldb, rq.ldc)) return cudaErrorInvalidValue;
  const uint64_t es = rq.dtype == kBlasF32 ? 4 : 8;
  GemmArgs g = gemm_args(rq.transa, rq.transb, rq.m, rq.n, rq.k, rq.A, rq.lda, rq.B, rq.ldb, rq.C, rq.ldc);
  if (!blas_scalar(rq.flags, rq.alpha, es, es == 8, &g.alpha) || !blas_scalar(rq.flags, rq.beta, es, es == 8, &g.beta))
    return cudaErrorInvalidValue;
  if (rq.m > 0 && rq.n > 0) {
    if (!blas_matrix(rq.C, rq.m, rq.n, rq.ldc, es)) return cudaErrorInvalidValue;
    if (rq.k > 0 && (!blas_matrix(rq.A, rq.transa == 0 ? rq.m : rq.k, rq.transa == 0 ? rq.k : rq.m, rq.lda, es) ||
                     !blas_matrix(rq.B, rq.transb == 0 ? rq.k : rq.n, rq.transb == 0 ? rq.n : rq.k, rq.ldb, es)))
      return cudaErrorInvalidValue;
  }
  return b->gemm(*h, c, int(rq.dtype), g);
}

int32_t Session::on_BlasGemmStridedBatched(const BlasGemmStridedBatchedReq& rq, std::span<const uint8_t>,
                                           BlasGemmStridedBatchedResp&, std::vector<uint8_t>&) {
  Blas* b;
  BlasHandle* h;
  BlasCall c;
  if (Err e = blas_begin(rq.handle, rq.stream, rq.flags, &b, &h, &c); e != cudaSuccess) return e;
  if (rq.dtype != kBlasF32 && rq.dtype != kBlasF64) return cudaErrorInvalidValue;
  if (!gemm_shape_ok(rq.transa, rq.transb, rq.m, rq.n, rq.k, rq.lda, rq.ldb, rq.ldc)) return cudaErrorInvalidValue;
  if (rq.batch < 0 || rq.batch > kMaxBatch || rq.strideA < 0 || rq.strideB < 0 || rq.strideC < 0)
    return cudaErrorInvalidValue;
  const uint64_t es = rq.dtype == kBlasF32 ? 4 : 8;
  GemmArgs g = gemm_args(rq.transa, rq.transb, rq.m, rq.n, rq.k, rq.A, rq.lda, rq.B, rq.ldb, rq.C, rq.ldc);
  if (!blas_scalar(rq.flags, rq.alpha, es, es == 8, &g.alpha) || !blas_scalar(rq.flags, rq.beta, es, es == 8, &g.beta))
    return cudaErrorInvalidValue;
  // The whole batch's span of each operand: (batch-1)*stride + one matrix.
  auto span_ok = [&](uint64_t ptr, int64_t rows, int64_t cols, int64_t ld, int64_t stride) {
    uint64_t one, last, total;
    if (!matrix_elems(rows, cols, ld, &one)) return false;
    if (one == 0) return true;
    if (!mul_ok(uint64_t(rq.batch - 1), uint64_t(stride), &last) || !add_ok(last, one, &total) ||
        !mul_ok(total, es, &total))
      return false;
    return device_range(ptr, total);
  };
  if (rq.batch > 0 && rq.m > 0 && rq.n > 0) {
    if (!span_ok(rq.C, rq.m, rq.n, rq.ldc, rq.strideC)) return cudaErrorInvalidValue;
    if (rq.k > 0 &&
        (!span_ok(rq.A, rq.transa == 0 ? rq.m : rq.k, rq.transa == 0 ? rq.k : rq.m, rq.lda, rq.strideA) ||
         !span_ok(rq.B, rq.transb == 0 ? rq.k : rq.n, rq.transb == 0 ? rq.n : rq.k, rq.ldb, rq.strideB)))
      return cudaErrorInvalidValue;
  }
  return b->gemm_strided_batched(*h, c, int(rq.dtype), g, rq.strideA, rq.strideB, rq.strideC, rq.batch);
}

int32_t Session::on_BlasGemmBatched(const BlasGemmBatchedReq& rq, std::span<const uint8_t>, BlasGemmBatchedResp&,
                                    std::vector<uint8_t>&) {
  Blas* b;
  BlasHandle* h;
  BlasCall c;
  if (Err e = blas_begin(rq.handle, rq.stream, rq.flags, &b, &h, &c); e != cudaSuccess) return e;
  if (rq.dtype != kBlasF32 && rq.dtype != kBlasF64) return cudaErrorInvalidValue;
  if (!gemm_shape_ok(rq.transa, rq.transb, rq.m, rq.n, rq.k, rq.lda, rq.ldb, rq.ldc)) return cudaErrorInvalidValue;
  if (rq.batch < 0 || rq.batch > kMaxBatch) return cudaErrorInvalidValue;
  const uint64_t es = rq.dtype == kBlasF32 ? 4 : 8;
  GemmArgs g = gemm_args(rq.transa, rq.transb, rq.m, rq.n, rq.k, rq.Aarray, rq.lda, rq.Barray, rq.ldb, rq.Carray,
                         rq.ldc);
  if (!blas_scalar(rq.flags, rq.alpha, es, es == 8, &g.alpha) || !blas_scalar(rq.flags, rq.beta, es, es == 8, &g.beta))
    return cudaErrorInvalidValue;
  // The pointer arrays themselves; the pointers inside them are device
  // data, policed by the device (see blas.hpp).
  const uint64_t abytes = uint64_t(rq.batch) * 8;
  if (rq.batch > 0 && rq.m > 0 && rq.n > 0) {
    if (!device_range(rq.Carray, abytes)) return cudaErrorInvalidValue;
    if (rq.k > 0 && (!device_range(rq.Aarray, abytes) || !device_range(rq.Barray, abytes)))
      return cudaErrorInvalidValue;
  }
  return b->gemm_batched(*h, c, int(rq.dtype), g, rq.batch);
}

int32_t Session::on_BlasGemmEx(const BlasGemmExReq& rq, std::span<const uint8_t>, BlasGemmExResp&,
                               std::vector<uint8_t>&) {
  Blas* b;
  BlasHandle* h;
  BlasCall c;
  if (Err e = blas_begin(rq.handle, rq.stream, rq.flags, &b, &h, &c); e != cudaSuccess) return e;
  if (!gemm_shape_ok(rq.transa, rq.transb, rq.m, rq.n, rq.k, rq.lda, rq.ldb, rq.ldc)) return cudaErrorInvalidValue;
  if (!valid_algo(rq.algo)) return cudaErrorInvalidValue;
  // Supported combinations: fp32 everywhere; fp16 A and B with an fp16 or
  // fp32 C, fp32 compute; fp64 everywhere with fp64 compute.
  const bool f32 = rq.atype == kDtR32F && rq.btype == kDtR32F && rq.ctype == kDtR32F && compute_32f(rq.compute);
  const bool f16 = rq.atype == kDtR16F && rq.btype == kDtR16F && (rq.ctype == kDtR16F || rq.ctype == kDtR32F) &&
                   compute_32f(rq.compute);
  const bool f64 = rq.atype == kDtR64F && rq.btype == kDtR64F && rq.ctype == kDtR64F &&
                   (rq.compute == kCompute64F || rq.compute == kCompute64FPedantic);
  if (!f32 && !f16 && !f64) return cudaErrorNotSupported;
  const uint64_t sa = dtype_size(rq.atype), sb = dtype_size(rq.btype), sc = dtype_size(rq.ctype);
  GemmArgs g = gemm_args(rq.transa, rq.transb, rq.m, rq.n, rq.k, rq.A, rq.lda, rq.B, rq.ldb, rq.C, rq.ldc);
  const uint64_t ss = f64 ? 8 : 4;  // the compute type's scalar
  if (!blas_scalar(rq.flags, rq.alpha, ss, f64, &g.alpha) || !blas_scalar(rq.flags, rq.beta, ss, f64, &g.beta))
    return cudaErrorInvalidValue;
  if (rq.m > 0 && rq.n > 0) {
    if (!blas_matrix(rq.C, rq.m, rq.n, rq.ldc, sc)) return cudaErrorInvalidValue;
    if (rq.k > 0 && (!blas_matrix(rq.A, rq.transa == 0 ? rq.m : rq.k, rq.transa == 0 ? rq.k : rq.m, rq.lda, sa) ||
                     !blas_matrix(rq.B, rq.transb == 0 ? rq.k : rq.n, rq.transb == 0 ? rq.n : rq.k, rq.ldb, sb)))
      return cudaErrorInvalidValue;
  }
  return b->gemm_ex(*h, c, g, rq.atype, rq.btype, rq.ctype, rq.compute, rq.algo);
}

int32_t Session::on_BlasGeam(const BlasGeamReq& rq, std::span<const uint8_t>, BlasGeamResp&, std::vector<uint8_t>&) {
  Blas* b;
  BlasHandle* h;
  BlasCall c;
  if (Err e = blas_begin(rq.handle, rq.stream, rq.flags, &b, &h, &c); e != cudaSuccess) return e;
  if (!valid_op(rq.transa) || !valid_op(rq.transb) || rq.m < 0 || rq.n < 0) return cudaErrorInvalidValue;
  if (!ld_ok(rq.lda, rq.transa == 0 ? rq.m : rq.n) || !ld_ok(rq.ldb, rq.transb == 0 ? rq.m : rq.n) ||
      !ld_ok(rq.ldc, rq.m))
    return cudaErrorInvalidValue;
  GemmArgs g = gemm_args(rq.transa, rq.transb, rq.m, rq.n, 0, rq.A, rq.lda, rq.B, rq.ldb, rq.C, rq.ldc);
  if (!blas_scalar(rq.flags, rq.alpha, 4, false, &g.alpha) || !blas_scalar(rq.flags, rq.beta, 4, false, &g.beta))
    return cudaErrorInvalidValue;
  if (rq.m > 0 && rq.n > 0) {
    if (!blas_matrix(rq.C, rq.m, rq.n, rq.ldc, 4)) return cudaErrorInvalidValue;
    // An operand whose host scalar is zero is not read (cuBLAS lets it be
    // null); with device scalars a null operand is refused by the device.
    const bool need_a = g.alpha.device ? rq.A != 0 : g.alpha.value != 0;
    const bool need_b = g.beta.device ? rq.B != 0 : g.beta.value != 0;
    if (need_a && !blas_matrix(rq.A, rq.transa == 0 ? rq.m : rq.n, rq.transa == 0 ? rq.n : rq.m, rq.lda, 4))
      return cudaErrorInvalidValue;
    if (need_b && !blas_matrix(rq.B, rq.transb == 0 ? rq.m : rq.n, rq.transb == 0 ? rq.n : rq.m, rq.ldb, 4))
      return cudaErrorInvalidValue;
  }
  return b->geam(*h, c, g);
}

// ------------------------------------------------------------ level 2

int32_t Session::on_BlasGemv(const BlasGemvReq& rq, std::span<const uint8_t>, BlasGemvResp&, std::vector<uint8_t>&) {
  Blas* b;
  BlasHandle* h;
  BlasCall c;
  if (Err e = blas_begin(rq.handle, rq.stream, rq.flags, &b, &h, &c); e != cudaSuccess) return e;
  if (!valid_op(rq.trans) || rq.m < 0 || rq.n < 0 || !ld_ok(rq.lda, rq.m) || rq.incx == 0 || rq.incy == 0)
    return cudaErrorInvalidValue;
  BlasScalar alpha, beta;
  if (!blas_scalar(rq.flags, rq.alpha, 4, false, &alpha) || !blas_scalar(rq.flags, rq.beta, 4, false, &beta))
    return cudaErrorInvalidValue;
  if (rq.m > 0 && rq.n > 0) {
    const int64_t lx = rq.trans == 0 ? rq.n : rq.m, ly = rq.trans == 0 ? rq.m : rq.n;
    if (!blas_matrix(rq.A, rq.m, rq.n, rq.lda, 4) || !blas_vector(rq.x, lx, rq.incx, 4) ||
        !blas_vector(rq.y, ly, rq.incy, 4))
      return cudaErrorInvalidValue;
  }
  return b->gemv(*h, c, to_op(rq.trans), rq.m, rq.n, alpha, rq.A, rq.lda, rq.x, rq.incx, beta, rq.y, rq.incy);
}

// ------------------------------------------------------------ level 1

int32_t Session::on_BlasAxpy(const BlasAxpyReq& rq, std::span<const uint8_t>, BlasAxpyResp&, std::vector<uint8_t>&) {
  Blas* b;
  BlasHandle* h;
  BlasCall c;
  if (Err e = blas_begin(rq.handle, rq.stream, rq.flags, &b, &h, &c); e != cudaSuccess) return e;
  BlasScalar alpha;
  if (!blas_scalar(rq.flags, rq.alpha, 4, false, &alpha)) return cudaErrorInvalidValue;
  if (!blas_vector(rq.x, rq.n, rq.incx, 4) || !blas_vector(rq.y, rq.n, rq.incy, 4)) return cudaErrorInvalidValue;
  return b->axpy(*h, c, rq.n, alpha, rq.x, rq.incx, rq.y, rq.incy);
}

int32_t Session::on_BlasScal(const BlasScalReq& rq, std::span<const uint8_t>, BlasScalResp&, std::vector<uint8_t>&) {
  Blas* b;
  BlasHandle* h;
  BlasCall c;
  if (Err e = blas_begin(rq.handle, rq.stream, rq.flags, &b, &h, &c); e != cudaSuccess) return e;
  BlasScalar alpha;
  if (!blas_scalar(rq.flags, rq.alpha, 4, false, &alpha)) return cudaErrorInvalidValue;
  if (rq.incx > 0 && !blas_vector(rq.x, rq.n, rq.incx, 4)) return cudaErrorInvalidValue;
  return b->scal(*h, c, rq.n, alpha, rq.x, rq.incx);
}

int32_t Session::on_BlasCopy(const BlasCopyReq& rq, std::span<const uint8_t>, BlasCopyResp&, std::vector<uint8_t>&) {
  Blas* b;
  BlasHandle* h;
  BlasCall c;
  if (Err e = blas_begin(rq.handle, rq.stream, rq.flags, &b, &h, &c); e != cudaSuccess) return e;
  if (!blas_vector(rq.x, rq.n, rq.incx, 4) || !blas_vector(rq.y, rq.n, rq.incy, 4)) return cudaErrorInvalidValue;
  return b->copy(*h, c, rq.n, rq.x, rq.incx, rq.y, rq.incy);
}

namespace {
// A reduction's destination: a device address in device pointer mode.
BlasScalar result_of(uint32_t flags, uint64_t result) {
  BlasScalar r;
  r.device = flags & kBlasDeviceScalars;
  r.dptr = result;
  return r;
}
}  // namespace

int32_t Session::on_BlasDot(const BlasDotReq& rq, std::span<const uint8_t>, BlasDotResp& rs, std::vector<uint8_t>&) {
  Blas* b;
  BlasHandle* h;
  BlasCall c;
  if (Err e = blas_begin(rq.handle, rq.stream, rq.flags, &b, &h, &c); e != cudaSuccess) return e;
  BlasScalar r = result_of(rq.flags, rq.result);
  if (r.device && !device_range(rq.result, 4)) return cudaErrorInvalidValue;
  if (!blas_vector(rq.x, rq.n, rq.incx, 4) || !blas_vector(rq.y, rq.n, rq.incy, 4)) return cudaErrorInvalidValue;
  return b->dot(*h, c, rq.n, rq.x, rq.incx, rq.y, rq.incy, r, &rs.value);
}

template <class Rq, class Out>
int32_t Session::blas_reduce(const Rq& rq, Out* value,
                             Err (Blas::*op)(BlasHandle&, const BlasCall&, int, uint64_t, int, const BlasScalar&,
                                             Out*)) {
  Blas* b;
  BlasHandle* h;
  BlasCall c;
  if (Err e = blas_begin(rq.handle, rq.stream, rq.flags, &b, &h, &c); e != cudaSuccess) return e;
  const BlasScalar r = result_of(rq.flags, rq.result);
  if (r.device && !device_range(rq.result, 4)) return cudaErrorInvalidValue;
  // incx <= 0: cuBLAS returns 0 without reading x.
  if (rq.incx > 0 && !blas_vector(rq.x, rq.n, rq.incx, 4)) return cudaErrorInvalidValue;
  return (b->*op)(*h, c, rq.n, rq.x, rq.incx, r, value);
}

int32_t Session::on_BlasNrm2(const BlasNrm2Req& rq, std::span<const uint8_t>, BlasNrm2Resp& rs,
                             std::vector<uint8_t>&) {
  return blas_reduce(rq, &rs.value, &Blas::nrm2);
}

int32_t Session::on_BlasAsum(const BlasAsumReq& rq, std::span<const uint8_t>, BlasAsumResp& rs,
                             std::vector<uint8_t>&) {
  return blas_reduce(rq, &rs.value, &Blas::asum);
}

int32_t Session::on_BlasIamax(const BlasIamaxReq& rq, std::span<const uint8_t>, BlasIamaxResp& rs,
                              std::vector<uint8_t>&) {
  return blas_reduce(rq, &rs.value, &Blas::iamax);
}

}  // namespace wh::server
