// The cuBLAS service: its handle tables and the bodies of its API table (cublas_api.def).
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

#include <algorithm>
#include <cstring>

#include "wormhole/server/blas.hpp"
#include "wormhole/server/handles.hpp"
#include "wormhole/server/checkpoint.hpp"
#include "wormhole/server/service.hpp"

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

bool valid_algo(int a) { return (a >= -1 && a <= 23) || (a >= 99 && a <= 115); }

}  // namespace

class BlasService final : public Service {
  using Service::Service;
  WH_SERVICE_TABLE(WH_CUBLAS_OPS)

 private:
  struct BlasEntry {
    std::unique_ptr<BlasHandle> h;
  };
  // Resolves a guest handle, its stream and pointer mode into the
  // backend's per-call settings.
  Err blas_begin(uint64_t handle, uint64_t stream, uint32_t flags, Blas** blas, BlasHandle** h, BlasCall* call);
  // The device range a matrix or vector operand spans, checked.
  bool blas_matrix(uint64_t ptr, int64_t rows, int64_t cols, int64_t ld, uint64_t es) const;
  bool blas_vector(uint64_t ptr, int64_t n, int64_t inc, uint64_t es) const;
  bool blas_scalar(uint32_t flags, uint64_t word, uint64_t es, bool as_double, BlasScalar* out) const;
  // A host scalar (two doubles: real, imaginary) or a device address of es bytes.
  bool blas_scalar2(uint32_t flags, uint64_t word, uint64_t word_i, uint64_t es, BlasScalar* out) const;
  // Reads `batch` device pointers at `arr` (after the stream's earlier work)
  // and checks that each spans `bytes` inside one of this session's
  // allocations; bytes == 0: only the array is read.
  Err blas_read_ptrs(uint64_t arr, int batch, Stream* s, uint64_t bytes, std::vector<uint64_t>* out);
  // nrm2, asum, iamax: one float vector in, one scalar out (to the host or,
  // in device pointer mode, to a checked device address), run by `op`.
  template <class Rq, class Out>
  int32_t blas_reduce(const Rq& rq, Out* value,
                      Err (Blas::*op)(BlasHandle&, const BlasCall&, int, uint64_t, int, const BlasScalar&, Out*));

  HandleTable<BlasEntry> blas_handles_{0x42, 1024};

 public:
  // A handle holds nothing but itself (settings come with each call).
  bool save(CheckpointWriter& w) override {
    save_handles(w, blas_handles_);
    return true;
  }
  bool restore(CheckpointReader& r, std::string* why) override {
    Blas* b = ctx_->blas(why);
    return restore_handles(r, blas_handles_, 1024, "cuBLAS", why, [&] {
      auto be = std::make_unique<BlasEntry>();
      return b && b->create(&be->h) == cudaSuccess ? std::move(be) : nullptr;
    });
  }
};

bool BlasService::blas_matrix(uint64_t ptr, int64_t rows, int64_t cols, int64_t ld, uint64_t es) const {
  uint64_t n, bytes;
  if (!matrix_elems(rows, cols, ld, &n) || !mul_ok(n, es, &bytes)) return false;
  return bytes == 0 || device_range(ptr, bytes);
}

bool BlasService::blas_vector(uint64_t ptr, int64_t n, int64_t inc, uint64_t es) const {
  if (n <= 0) return true;
  uint64_t a = uint64_t(inc < 0 ? -inc : inc), elems, bytes;
  if (!mul_ok(uint64_t(n - 1), a, &elems) || !add_ok(elems, 1, &elems) || !mul_ok(elems, es, &bytes)) return false;
  return device_range(ptr, bytes);
}

bool BlasService::blas_scalar(uint32_t flags, uint64_t word, uint64_t es, bool as_double, BlasScalar* out) const {
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

Err BlasService::blas_begin(uint64_t handle, uint64_t stream, uint32_t flags, Blas** blas, BlasHandle** h,
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

int32_t BlasService::on_BlasCreate(const BlasCreateReq&, std::span<const uint8_t>, BlasCreateResp& rs,
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

int32_t BlasService::on_BlasDestroy(const BlasDestroyReq& rq, std::span<const uint8_t>, BlasDestroyResp&,
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

int32_t BlasService::on_BlasGemm(const BlasGemmReq& rq, std::span<const uint8_t>, BlasGemmResp&, std::vector<uint8_t>&) {
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

int32_t BlasService::on_BlasGemmStridedBatched(const BlasGemmStridedBatchedReq& rq, std::span<const uint8_t>,
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

int32_t BlasService::on_BlasGemmBatched(const BlasGemmBatchedReq& rq, std::span<const uint8_t>, BlasGemmBatchedResp&,
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

int32_t BlasService::on_BlasGemmEx(const BlasGemmExReq& rq, std::span<const uint8_t>, BlasGemmExResp&,
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

int32_t BlasService::on_BlasGeam(const BlasGeamReq& rq, std::span<const uint8_t>, BlasGeamResp&, std::vector<uint8_t>&) {
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

int32_t BlasService::on_BlasGemv(const BlasGemvReq& rq, std::span<const uint8_t>, BlasGemvResp&, std::vector<uint8_t>&) {
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

int32_t BlasService::on_BlasAxpy(const BlasAxpyReq& rq, std::span<const uint8_t>, BlasAxpyResp&, std::vector<uint8_t>&) {
  Blas* b;
  BlasHandle* h;
  BlasCall c;
  if (Err e = blas_begin(rq.handle, rq.stream, rq.flags, &b, &h, &c); e != cudaSuccess) return e;
  BlasScalar alpha;
  if (!blas_scalar(rq.flags, rq.alpha, 4, false, &alpha)) return cudaErrorInvalidValue;
  if (!blas_vector(rq.x, rq.n, rq.incx, 4) || !blas_vector(rq.y, rq.n, rq.incy, 4)) return cudaErrorInvalidValue;
  return b->axpy(*h, c, rq.n, alpha, rq.x, rq.incx, rq.y, rq.incy);
}

int32_t BlasService::on_BlasScal(const BlasScalReq& rq, std::span<const uint8_t>, BlasScalResp&, std::vector<uint8_t>&) {
  Blas* b;
  BlasHandle* h;
  BlasCall c;
  if (Err e = blas_begin(rq.handle, rq.stream, rq.flags, &b, &h, &c); e != cudaSuccess) return e;
  BlasScalar alpha;
  if (!blas_scalar(rq.flags, rq.alpha, 4, false, &alpha)) return cudaErrorInvalidValue;
  if (rq.incx > 0 && !blas_vector(rq.x, rq.n, rq.incx, 4)) return cudaErrorInvalidValue;
  return b->scal(*h, c, rq.n, alpha, rq.x, rq.incx);
}

int32_t BlasService::on_BlasCopy(const BlasCopyReq& rq, std::span<const uint8_t>, BlasCopyResp&, std::vector<uint8_t>&) {
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

int32_t BlasService::on_BlasDot(const BlasDotReq& rq, std::span<const uint8_t>, BlasDotResp& rs, std::vector<uint8_t>&) {
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
int32_t BlasService::blas_reduce(const Rq& rq, Out* value,
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

int32_t BlasService::on_BlasNrm2(const BlasNrm2Req& rq, std::span<const uint8_t>, BlasNrm2Resp& rs,
                             std::vector<uint8_t>&) {
  return blas_reduce(rq, &rs.value, &Blas::nrm2);
}

int32_t BlasService::on_BlasAsum(const BlasAsumReq& rq, std::span<const uint8_t>, BlasAsumResp& rs,
                             std::vector<uint8_t>&) {
  return blas_reduce(rq, &rs.value, &Blas::asum);
}

int32_t BlasService::on_BlasIamax(const BlasIamaxReq& rq, std::span<const uint8_t>, BlasIamaxResp& rs,
                              std::vector<uint8_t>&) {
  return blas_reduce(rq, &rs.value, &Blas::iamax);
}

}  // namespace wh::server

// ------------------------------------------------------------ the generic ops
//
// BlasL1 / BlasL2 / BlasL3 / BlasGemmExBatched / BlasLuBatched: one body per
// level, the routine and element type (S/D/C/Z) as fields. Same rules as
// above: every enum, dimension, increment and leading dimension is checked,
// then the device range of every operand the routine reads or writes;
// device arrays of pointers are read here and every pointer in them checked.

namespace wh::server {

namespace {
// Bytes of one element, and of its real part, per kBlasS/D/C/Z.
uint64_t elem_size(uint32_t t) { return t == kBlasS ? 4 : t == kBlasZ ? 16 : 8; }
uint64_t real_size(uint32_t t) { return t == kBlasS || t == kBlasC ? 4 : 8; }
bool is_complex(uint32_t t) { return t == kBlasC || t == kBlasZ; }
bool valid_type(uint32_t t) { return t <= kBlasZ; }
bool span_elems(uint64_t one, int64_t batch, int64_t stride, uint64_t es, uint64_t* bytes) {
  uint64_t last, total;
  if (one == 0 || batch <= 0) {
    *bytes = 0;
    return true;
  }
  return mul_ok(uint64_t(batch - 1), uint64_t(stride), &last) && add_ok(last, one, &total) &&
         mul_ok(total, es, bytes);
}
}  // namespace

bool BlasService::blas_scalar2(uint32_t flags, uint64_t word, uint64_t word_i, uint64_t es, BlasScalar* out) const {
  out->device = flags & kBlasDeviceScalars;
  if (out->device) {
    out->dptr = word;
    return device_range(word, es);
  }
  std::memcpy(&out->value, &word, 8);
  std::memcpy(&out->imag, &word_i, 8);
  return true;
}

Err BlasService::blas_read_ptrs(uint64_t arr, int batch, Stream* s, uint64_t bytes, std::vector<uint64_t>* out) {
  out->assign(size_t(batch), 0);
  if (batch <= 0) return cudaSuccess;
  const uint64_t abytes = uint64_t(batch) * 8;
  if (!device_range(arr, abytes)) return cudaErrorInvalidValue;
  // The array is device data written by earlier (possibly asynchronous)
  // work on this stream: read it after that work.
  if (Err e = ctx_->copy_dtoh(out->data(), arr, abytes, s); e != cudaSuccess) return e;
  if (Err e = ctx_->stream_synchronize(s); e != cudaSuccess) return e;
  if (bytes == 0) return cudaSuccess;
  for (uint64_t p : *out)
    if (!device_range(p, bytes)) return cudaErrorInvalidValue;
  return cudaSuccess;
}

int32_t BlasService::on_BlasL1(const BlasL1Req& rq, std::span<const uint8_t>, BlasL1Resp& rs, std::vector<uint8_t>&) {
  Blas* b;
  BlasHandle* h;
  BlasCall c;
  if (Err e = blas_begin(rq.handle, rq.stream, rq.flags, &b, &h, &c); e != cudaSuccess) return e;
  if (!valid_type(rq.type) || rq.routine >= kL1Count) return cudaErrorInvalidValue;
  const uint32_t t = rq.type, r = rq.routine;
  const uint64_t es = elem_size(t), rsz = real_size(t);
  if ((r == kL1ScalReal || r == kL1RotReal || r == kL1Dotc) && !is_complex(t)) return cudaErrorInvalidValue;
  if (r == kL1Rotm && is_complex(t)) return cudaErrorInvalidValue;
  BlasL1Args a;
  a.routine = r, a.type = t, a.n = rq.n, a.incx = rq.incx, a.incy = rq.incy, a.x = rq.x, a.y = rq.y;
  // Scalars.
  bool ok = true;
  switch (r) {
    case kL1Axpy:
    case kL1Scal: ok = blas_scalar2(rq.flags, rq.alpha, rq.alpha_i, es, &a.alpha); break;
    case kL1ScalReal: ok = blas_scalar2(rq.flags, rq.alpha, 0, rsz, &a.alpha); break;
    case kL1Rot:
      ok = blas_scalar2(rq.flags, rq.alpha, 0, rsz, &a.alpha) && blas_scalar2(rq.flags, rq.beta, rq.beta_i, es, &a.beta);
      break;
    case kL1RotReal:
      ok = blas_scalar2(rq.flags, rq.alpha, 0, rsz, &a.alpha) && blas_scalar2(rq.flags, rq.beta, 0, rsz, &a.beta);
      break;
    case kL1Rotm:
      if (rq.flags & kBlasDeviceScalars) {
        ok = blas_scalar2(rq.flags, rq.alpha, 0, 5 * rsz, &a.alpha);
      } else {
        const uint64_t w[5] = {rq.alpha, rq.alpha_i, rq.beta, rq.beta_i, rq.extra};
        for (int i = 0; i < 5; i++) std::memcpy(&a.param[i], &w[i], 8);
      }
      break;
    default: break;
  }
  if (!ok) return cudaErrorInvalidValue;
  // The reduction's destination.
  const bool reduces = r == kL1Dot || r == kL1Dotc || r == kL1Nrm2 || r == kL1Asum || r == kL1Iamax || r == kL1Iamin;
  if (reduces) {
    a.result = result_of(rq.flags, rq.result);
    const uint64_t out = r == kL1Dot || r == kL1Dotc ? es : (r == kL1Iamax || r == kL1Iamin) ? 4 : rsz;
    if (a.result.device && !device_range(rq.result, out)) return cudaErrorInvalidValue;
  }
  // Operands: x always (cuBLAS reads nothing for n <= 0, and the
  // single-vector reductions and scal nothing for incx <= 0), y for the
  // two-vector routines.
  const bool one_vec = r == kL1Scal || r == kL1ScalReal || r == kL1Nrm2 || r == kL1Asum || r == kL1Iamax ||
                       r == kL1Iamin;
  if (rq.n > 0) {
    if (one_vec) {
      if (rq.incx > 0 && !blas_vector(rq.x, rq.n, rq.incx, es)) return cudaErrorInvalidValue;
    } else if (!blas_vector(rq.x, rq.n, rq.incx, es) || !blas_vector(rq.y, rq.n, rq.incy, es)) {
      return cudaErrorInvalidValue;
    }
  }
  BlasL1Result res;
  Err e = b->l1(*h, c, a, &res);
  rs.re = res.re, rs.im = res.im, rs.index = res.index;
  return e;
}

int32_t BlasService::on_BlasL2(const BlasL2Req& rq, std::span<const uint8_t>, BlasL2Resp&, std::vector<uint8_t>&) {
  Blas* b;
  BlasHandle* h;
  BlasCall c;
  if (Err e = blas_begin(rq.handle, rq.stream, rq.flags, &b, &h, &c); e != cudaSuccess) return e;
  if (!valid_type(rq.type) || rq.routine >= kL2Count) return cudaErrorInvalidValue;
  const uint32_t t = rq.type, r = rq.routine;
  const uint64_t es = elem_size(t), rsz = real_size(t);
  if (!valid_op(rq.trans) || rq.uplo > 1 || rq.diag > 1) return cudaErrorInvalidValue;
  if (rq.m < 0 || rq.n < 0 || rq.kl < 0 || rq.ku < 0 || rq.incx == 0) return cudaErrorInvalidValue;
  const bool herm = r == kL2Hemv || r == kL2Hbmv || r == kL2Hpmv || r == kL2Her || r == kL2Hpr || r == kL2Her2 ||
                    r == kL2Hpr2 || r == kL2Gerc;
  const bool real_only = r == kL2Sbmv || r == kL2Spmv || r == kL2Spr || r == kL2Spr2;
  if ((herm && !is_complex(t)) || (real_only && is_complex(t))) return cudaErrorInvalidValue;
  const bool tri = r >= kL2Trmv;
  const bool mv = r == kL2Gemv || r == kL2Gbmv || r == kL2Symv || r == kL2Hemv || r == kL2Sbmv || r == kL2Hbmv ||
                  r == kL2Spmv || r == kL2Hpmv;
  const bool has_y = mv || r == kL2Ger || r == kL2Gerc || r == kL2Syr2 || r == kL2Her2 || r == kL2Spr2 || r == kL2Hpr2;
  if (has_y && rq.incy == 0) return cudaErrorInvalidValue;
  BlasL2Args a;
  a.routine = r, a.type = t, a.uplo = rq.uplo, a.diag = rq.diag, a.trans = to_op(rq.trans);
  a.m = rq.m, a.n = rq.n, a.kl = rq.kl, a.ku = rq.ku, a.incx = rq.incx, a.incy = rq.incy;
  a.A = rq.A, a.x = rq.x, a.y = rq.y, a.lda = rq.lda;
  if (!tri) {
    const uint64_t as = (r == kL2Her || r == kL2Hpr) ? rsz : es;
    if (!blas_scalar2(rq.flags, rq.alpha, rq.alpha_i, as, &a.alpha)) return cudaErrorInvalidValue;
    if (mv && !blas_scalar2(rq.flags, rq.beta, rq.beta_i, es, &a.beta)) return cudaErrorInvalidValue;
  }
  // The general routines are m x n; everything else is square n x n.
  const bool general = r == kL2Gemv || r == kL2Gbmv || r == kL2Ger || r == kL2Gerc;
  const int64_t m = general ? rq.m : rq.n, n = rq.n;
  const bool band = r == kL2Gbmv || r == kL2Sbmv || r == kL2Hbmv || r == kL2Tbmv || r == kL2Tbsv;
  const bool packed = r == kL2Spmv || r == kL2Hpmv || r == kL2Spr || r == kL2Hpr || r == kL2Spr2 || r == kL2Hpr2 ||
                      r == kL2Tpmv || r == kL2Tpsv;
  // Band width: Gbmv kl + ku + 1 rows; the symmetric/triangular band forms
  // carry their k in kl.
  const int64_t brows = r == kL2Gbmv ? int64_t(rq.kl) + rq.ku + 1 : int64_t(rq.kl) + 1;
  if (packed) {
    // lda unused.
  } else if (band) {
    if (!ld_ok(rq.lda, brows)) return cudaErrorInvalidValue;
  } else if (!ld_ok(rq.lda, m)) {
    return cudaErrorInvalidValue;
  }
  if (m == 0 || n == 0) return b->l2(*h, c, a);
  uint64_t abytes;
  if (packed) {
    uint64_t e = uint64_t(n) * uint64_t(n + 1) / 2;
    if (!mul_ok(e, es, &abytes) || !device_range(rq.A, abytes)) return cudaErrorInvalidValue;
  } else if (!blas_matrix(rq.A, band ? brows : m, n, rq.lda, es)) {
    return cudaErrorInvalidValue;
  }
  // Vector lengths: x is op(A)'s column count, y its row count.
  int64_t lx = n, ly = m;
  if (r == kL2Gemv || r == kL2Gbmv) {
    lx = a.trans == BlasOp::N ? n : m;
    ly = a.trans == BlasOp::N ? m : n;
  } else if (r == kL2Ger || r == kL2Gerc) {
    lx = m, ly = n;
  }
  if (!blas_vector(rq.x, lx, rq.incx, es)) return cudaErrorInvalidValue;
  if (has_y && !blas_vector(rq.y, ly, rq.incy, es)) return cudaErrorInvalidValue;
  return b->l2(*h, c, a);
}

int32_t BlasService::on_BlasL3(const BlasL3Req& rq, std::span<const uint8_t>, BlasL3Resp&, std::vector<uint8_t>&) {
  Blas* b;
  BlasHandle* h;
  BlasCall c;
  if (Err e = blas_begin(rq.handle, rq.stream, rq.flags, &b, &h, &c); e != cudaSuccess) return e;
  if (!valid_type(rq.type) || rq.routine >= kL3Count || rq.mode > kBlasArrays) return cudaErrorInvalidValue;
  const uint32_t t = rq.type, r = rq.routine;
  const uint64_t es = elem_size(t), rsz = real_size(t);
  if ((r == kL3Hemm || r == kL3Herk || r == kL3Her2k) && !is_complex(t)) return cudaErrorInvalidValue;
  if (!valid_op(rq.transa) || !valid_op(rq.transb) || rq.side > 1 || rq.uplo > 1 || rq.diag > 1)
    return cudaErrorInvalidValue;
  if (rq.m < 0 || rq.n < 0 || rq.k < 0) return cudaErrorInvalidValue;
  // Batched forms: gemm (strided or arrays), trsm (arrays).
  if (rq.mode == kBlasStrided && r != kL3Gemm) return cudaErrorInvalidValue;
  if (rq.mode == kBlasArrays && r != kL3Gemm && r != kL3Trsm) return cudaErrorInvalidValue;
  const int64_t batch = rq.mode == kBlasOne ? 1 : rq.batch;
  if (batch < 0 || batch > kMaxBatch) return cudaErrorInvalidValue;
  if (rq.mode == kBlasStrided && (rq.strideA < 0 || rq.strideB < 0 || rq.strideC < 0)) return cudaErrorInvalidValue;
  // Rank-k updates: trans N or T (C for the Hermitian forms; for real types T and C are one).
  if ((r == kL3Syrk || r == kL3Syr2k) && is_complex(t) && rq.transa == 2) return cudaErrorInvalidValue;
  if ((r == kL3Herk || r == kL3Her2k) && rq.transa == 1) return cudaErrorInvalidValue;

  BlasL3Args a;
  a.routine = r, a.type = t, a.mode = rq.mode, a.side = rq.side, a.uplo = rq.uplo, a.diag = rq.diag;
  a.ta = to_op(rq.transa), a.tb = to_op(rq.transb);
  a.m = rq.m, a.n = rq.n, a.k = rq.k, a.batch = int(batch);
  a.A = rq.A, a.B = rq.B, a.C = rq.C, a.lda = rq.lda, a.ldb = rq.ldb, a.ldc = rq.ldc;
  a.sa = rq.strideA, a.sb = rq.strideB, a.sc = rq.strideC;
  // Scalars: Herk's alpha and beta and Her2k's beta are real; Trmm/Trsm
  // have only alpha, Dgmm none.
  const uint64_t alpha_es = r == kL3Herk ? rsz : es, beta_es = (r == kL3Herk || r == kL3Her2k) ? rsz : es;
  const bool has_beta = r != kL3Trmm && r != kL3Trsm && r != kL3Dgmm;
  if (r != kL3Dgmm && !blas_scalar2(rq.flags, rq.alpha, rq.alpha_i, alpha_es, &a.alpha)) return cudaErrorInvalidValue;
  if (has_beta && !blas_scalar2(rq.flags, rq.beta, rq.beta_i, beta_es, &a.beta)) return cudaErrorInvalidValue;

  // Each operand's shape (rows x cols of what is stored) and whether it is
  // read; C is always written.
  struct Opnd {
    uint64_t ptr;
    int64_t rows, cols, ld, stride;
    bool used;
  };
  const int64_t m = rq.m, n = rq.n, k = rq.k;
  const bool ta_n = rq.transa == 0, tb_n = rq.transb == 0;
  Opnd A{rq.A, 0, 0, rq.lda, rq.strideA, true}, B{rq.B, 0, 0, rq.ldb, rq.strideB, true},
      C{rq.C, m, n, rq.ldc, rq.strideC, true};
  switch (r) {
    case kL3Gemm:
      A.rows = ta_n ? m : k, A.cols = ta_n ? k : m;
      B.rows = tb_n ? k : n, B.cols = tb_n ? n : k;
      A.used = B.used = k > 0;
      break;
    case kL3Symm:
    case kL3Hemm: {
      const int64_t ka = rq.side == 0 ? m : n;
      A.rows = A.cols = ka;
      B.rows = m, B.cols = n;
      break;
    }
    case kL3Syrk:
    case kL3Herk:
    case kL3Syr2k:
    case kL3Her2k:
      C.rows = C.cols = n;
      A.rows = ta_n ? n : k, A.cols = ta_n ? k : n;
      B.rows = A.rows, B.cols = A.cols;
      A.used = k > 0;
      B.used = k > 0 && (r == kL3Syr2k || r == kL3Her2k);
      break;
    case kL3Trmm:
    case kL3Trsm: {
      const int64_t ka = rq.side == 0 ? m : n;
      A.rows = A.cols = ka;
      B.rows = m, B.cols = n;
      if (r == kL3Trsm) C = B, C.used = false;  // in place on B
      break;
    }
    case kL3Geam:
      A.rows = ta_n ? m : n, A.cols = ta_n ? n : m;
      B.rows = tb_n ? m : n, B.cols = tb_n ? n : m;
      // An operand whose host scalar is zero is not read (cuBLAS lets it be null).
      A.used = a.alpha.device ? rq.A != 0 : (a.alpha.value != 0 || a.alpha.imag != 0);
      B.used = a.beta.device ? rq.B != 0 : (a.beta.value != 0 || a.beta.imag != 0);
      break;
    case kL3Dgmm:
      A.rows = m, A.cols = n;
      B.used = false;  // x, checked below
      break;
  }
  if (r == kL3Trsm) {
    if (!ld_ok(rq.lda, A.rows) || !ld_ok(rq.ldb, m)) return cudaErrorInvalidValue;
  } else {
    if (!ld_ok(rq.lda, A.rows) || !ld_ok(rq.ldc, C.rows)) return cudaErrorInvalidValue;
    // Syrk/Herk and Dgmm have no B matrix (Dgmm's x is checked below).
    const bool has_b = r != kL3Dgmm && r != kL3Syrk && r != kL3Herk;
    if (has_b && !ld_ok(rq.ldb, B.rows)) return cudaErrorInvalidValue;
    if (!has_b) B.used = false;
  }
  if (r == kL3Dgmm && rq.ldb == 0) return cudaErrorInvalidValue;  // x's increment
  const bool empty = C.rows == 0 || C.cols == 0 || batch == 0;
  if (empty) {
    a.batch = 0;  // nothing to compute: no operand (nor pointer list) is read
    return b->l3(*h, c, a);
  }
  auto check = [&](const Opnd& o, std::vector<uint64_t>* list) -> Err {
    uint64_t one, bytes;
    if (!matrix_elems(o.rows, o.cols, o.ld, &one)) return cudaErrorInvalidValue;
    if (rq.mode == kBlasArrays) {
      if (!mul_ok(one, es, &bytes)) return cudaErrorInvalidValue;
      if (!o.used) {
        list->assign(size_t(batch), 0);
        return cudaSuccess;
      }
      return blas_read_ptrs(o.ptr, int(batch), c.stream, bytes, list);
    }
    if (!o.used) return cudaSuccess;
    if (!span_elems(one, rq.mode == kBlasStrided ? batch : 1, o.stride, es, &bytes)) return cudaErrorInvalidValue;
    return bytes == 0 || device_range(o.ptr, bytes) ? cudaSuccess : cudaErrorInvalidValue;
  };
  if (Err e = check(A, &a.pa); e != cudaSuccess) return e;
  if (r == kL3Trsm) {
    if (Err e = check(B, &a.pb); e != cudaSuccess) return e;
  } else {
    if (r != kL3Dgmm)
      if (Err e = check(B, &a.pb); e != cudaSuccess) return e;
    if (Err e = check(C, &a.pc); e != cudaSuccess) return e;
  }
  if (r == kL3Dgmm && !blas_vector(rq.B, rq.side == 0 ? m : n, rq.ldb, es)) return cudaErrorInvalidValue;
  return b->l3(*h, c, a);
}

namespace {
// GemmEx's combinations: fp16/bf16 inputs with an output of the same type
// or fp32 and fp32 compute; fp16 throughout with fp16 compute; fp32
// throughout (any 32F compute, TF32 and the reduced-precision fast modes
// included); fp64 throughout with fp64 compute. 0: refused; else the byte
// size of alpha/beta (the compute type's scalar).
int gemm_ex_scalar(int at, int bt, int ct, int compute) {
  if (at != bt) return 0;
  const bool c32 = compute_32f(compute);
  if ((at == kDtR16F || at == kDtR16BF) && (ct == at || ct == kDtR32F) && c32) return 4;
  if (at == kDtR16F && ct == kDtR16F && (compute == kCompute16F || compute == kCompute16FPedantic)) return 2;
  if (at == kDtR32F && ct == kDtR32F && c32) return 4;
  if (at == kDtR64F && ct == kDtR64F && (compute == kCompute64F || compute == kCompute64FPedantic)) return 8;
  return 0;
}
int ex_size(int t) { return t == kDtR16BF ? 2 : dtype_size(t); }
}  // namespace

int32_t BlasService::on_BlasGemmExBatched(const BlasGemmExBatchedReq& rq, std::span<const uint8_t>,
                                      BlasGemmExBatchedResp&, std::vector<uint8_t>&) {
  Blas* b;
  BlasHandle* h;
  BlasCall c;
  if (Err e = blas_begin(rq.handle, rq.stream, rq.flags, &b, &h, &c); e != cudaSuccess) return e;
  if (!gemm_shape_ok(rq.transa, rq.transb, rq.m, rq.n, rq.k, rq.lda, rq.ldb, rq.ldc)) return cudaErrorInvalidValue;
  if (!valid_algo(rq.algo) || rq.mode > kBlasArrays) return cudaErrorInvalidValue;
  const int64_t batch = rq.mode == kBlasOne ? 1 : rq.batch;
  if (batch < 0 || batch > kMaxBatch) return cudaErrorInvalidValue;
  if (rq.mode == kBlasStrided && (rq.strideA < 0 || rq.strideB < 0 || rq.strideC < 0)) return cudaErrorInvalidValue;
  const int ss = gemm_ex_scalar(rq.atype, rq.btype, rq.ctype, rq.compute);
  if (!ss) return cudaErrorNotSupported;
  BlasGemmExArgs a;
  a.g = gemm_args(rq.transa, rq.transb, rq.m, rq.n, rq.k, rq.A, rq.lda, rq.B, rq.ldb, rq.C, rq.ldc);
  if (!blas_scalar2(rq.flags, rq.alpha, 0, uint64_t(ss), &a.g.alpha) ||
      !blas_scalar2(rq.flags, rq.beta, 0, uint64_t(ss), &a.g.beta))
    return cudaErrorInvalidValue;
  a.atype = rq.atype, a.btype = rq.btype, a.ctype = rq.ctype, a.compute = rq.compute, a.algo = rq.algo;
  a.mode = rq.mode, a.batch = int(batch), a.sa = rq.strideA, a.sb = rq.strideB, a.sc = rq.strideC;
  if (rq.m == 0 || rq.n == 0 || batch == 0) {
    a.batch = 0;  // nothing to compute: no operand (nor pointer list) is read
    return b->gemm_ex_batched(*h, c, a);
  }
  auto check = [&](uint64_t ptr, int64_t rows, int64_t cols, int64_t ld, int64_t stride, uint64_t es, bool used,
                   std::vector<uint64_t>* list) -> Err {
    uint64_t one, bytes;
    if (!matrix_elems(rows, cols, ld, &one)) return cudaErrorInvalidValue;
    if (rq.mode == kBlasArrays) {
      if (!used) {
        list->assign(size_t(batch), 0);
        return cudaSuccess;
      }
      if (!mul_ok(one, es, &bytes)) return cudaErrorInvalidValue;
      return blas_read_ptrs(ptr, int(batch), c.stream, bytes, list);
    }
    if (!used) return cudaSuccess;
    if (!span_elems(one, rq.mode == kBlasStrided ? batch : 1, stride, es, &bytes)) return cudaErrorInvalidValue;
    return bytes == 0 || device_range(ptr, bytes) ? cudaSuccess : cudaErrorInvalidValue;
  };
  const bool ta_n = rq.transa == 0, tb_n = rq.transb == 0;
  if (Err e = check(rq.C, rq.m, rq.n, rq.ldc, rq.strideC, ex_size(rq.ctype), true, &a.pc); e != cudaSuccess) return e;
  if (Err e = check(rq.A, ta_n ? rq.m : rq.k, ta_n ? rq.k : rq.m, rq.lda, rq.strideA, ex_size(rq.atype), rq.k > 0,
                    &a.pa);
      e != cudaSuccess)
    return e;
  if (Err e = check(rq.B, tb_n ? rq.k : rq.n, tb_n ? rq.n : rq.k, rq.ldb, rq.strideB, ex_size(rq.btype), rq.k > 0,
                    &a.pb);
      e != cudaSuccess)
    return e;
  return b->gemm_ex_batched(*h, c, a);
}

int32_t BlasService::on_BlasLuBatched(const BlasLuBatchedReq& rq, std::span<const uint8_t>, BlasLuBatchedResp&,
                                  std::vector<uint8_t>&) {
  Blas* b;
  BlasHandle* h;
  BlasCall c;
  if (Err e = blas_begin(rq.handle, rq.stream, rq.flags, &b, &h, &c); e != cudaSuccess) return e;
  if (!valid_type(rq.type) || rq.routine >= kLuCount || !valid_op(rq.trans)) return cudaErrorInvalidValue;
  const uint32_t r = rq.routine;
  const uint64_t es = elem_size(rq.type);
  if (rq.n < 0 || rq.batch < 0 || rq.batch > kMaxBatch || (r == kLuGetrs && rq.nrhs < 0)) return cudaErrorInvalidValue;
  if (r == kLuMatinv && rq.n > 32) return cudaErrorInvalidValue;  // cuBLAS's limit
  if (!ld_ok(rq.lda, rq.n)) return cudaErrorInvalidValue;
  if (r != kLuGetrf && !ld_ok(rq.ldc, rq.n)) return cudaErrorInvalidValue;
  BlasLuArgs a;
  a.routine = r, a.type = rq.type, a.trans = to_op(rq.trans), a.n = rq.n, a.nrhs = rq.nrhs, a.batch = rq.batch;
  a.lda = rq.lda, a.ldc = rq.ldc, a.A = rq.A, a.C = rq.C, a.pivots = rq.pivots, a.info = rq.info;
  if (rq.batch == 0) return b->lu_batched(*h, c, a);
  // info: one int per matrix (getrs reports on the host, in the guest).
  if (r != kLuGetrs && !device_range(rq.info, uint64_t(rq.batch) * 4)) return cudaErrorInvalidValue;
  // pivots: n ints per matrix; 0 means no pivoting (matinv has none).
  if (r != kLuMatinv && rq.pivots && rq.n > 0 && !device_range(rq.pivots, uint64_t(rq.batch) * uint64_t(rq.n) * 4))
    return cudaErrorInvalidValue;
  uint64_t ab, cb;
  if (!matrix_elems(rq.n, rq.n, rq.lda, &ab) || !mul_ok(ab, es, &ab)) return cudaErrorInvalidValue;
  if (Err e = blas_read_ptrs(rq.A, rq.batch, c.stream, ab, &a.pa); e != cudaSuccess) return e;
  if (r != kLuGetrf) {
    const int64_t cols = r == kLuGetrs ? rq.nrhs : rq.n;
    if (!matrix_elems(rq.n, cols, rq.ldc, &cb) || !mul_ok(cb, es, &cb)) return cudaErrorInvalidValue;
    if (Err e = blas_read_ptrs(rq.C, rq.batch, c.stream, cb, &a.pc); e != cudaSuccess) return e;
  }
  return b->lu_batched(*h, c, a);
}

int32_t BlasService::on_BlasGeqrfBatched(const BlasGeqrfBatchedReq& rq, std::span<const uint8_t>,
                                         BlasGeqrfBatchedResp&, std::vector<uint8_t>&) {
  Blas* b;
  BlasHandle* h;
  BlasCall c;
  if (Err e = blas_begin(rq.handle, rq.stream, rq.flags, &b, &h, &c); e != cudaSuccess) return e;
  if (!valid_type(rq.type) || rq.m < 0 || rq.n < 0 || rq.batch < 0 || rq.batch > kMaxBatch || !ld_ok(rq.lda, rq.m))
    return cudaErrorInvalidValue;
  const uint64_t es = elem_size(rq.type);
  BlasGeqrfArgs a;
  a.type = rq.type, a.m = rq.m, a.n = rq.n, a.lda = rq.lda, a.A = rq.A, a.tau = rq.tau;
  a.batch = rq.m == 0 || rq.n == 0 ? 0 : rq.batch;  // empty matrices: no pointer array is read
  if (a.batch == 0) return b->geqrf_batched(*h, c, a);
  // Each matrix spans m x n at lda, each tau min(m, n) elements.
  uint64_t ab, tb;
  if (!matrix_elems(rq.m, rq.n, rq.lda, &ab) || !mul_ok(ab, es, &ab)) return cudaErrorInvalidValue;
  tb = uint64_t(std::min(rq.m, rq.n)) * es;
  if (Err e = blas_read_ptrs(rq.A, a.batch, c.stream, ab, &a.pa); e != cudaSuccess) return e;
  if (Err e = blas_read_ptrs(rq.tau, a.batch, c.stream, tb, &a.ptau); e != cudaSuccess) return e;
  return b->geqrf_batched(*h, c, a);
}

std::unique_ptr<Service> make_blas_service(Session& s) { return std::make_unique<BlasService>(s); }

}  // namespace wh::server
