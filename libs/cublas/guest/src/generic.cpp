// libcublas.so.13 drop-in: the S/D/C/Z breadth of cuBLAS (levels 1-3,
// batched gemm and trsm, the GemmEx family, the batched LU routines),
// forwarded through the generic ops of the API table (BlasL1, BlasL2,
// BlasL3, BlasGemmExBatched, BlasLuBatched): one body per routine family,
// the exports generated per element type by the macros below.
//
// As in cublas.cpp: arguments are checked here first and bad ones refused
// synchronously with CUBLAS_STATUS_INVALID_VALUE (the server checks them
// again); compute calls are posted; reductions in host pointer mode wait
// for their result. Host scalars travel as doubles (real, imaginary), in
// device pointer mode as device addresses.
#include <cuComplex.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <climits>
#include <cmath>
#include <complex>
#include <cstring>
#include <type_traits>

#include "forward.hpp"

using namespace wh::proto;
namespace B = wh::guest::blas;

namespace {

template <class T>
constexpr uint32_t type_code() {
  if constexpr (std::is_same_v<T, float>) return kBlasS;
  else if constexpr (std::is_same_v<T, double>) return kBlasD;
  else if constexpr (std::is_same_v<T, cuComplex>) return kBlasC;
  else return kBlasZ;
}
template <class T>
constexpr bool is_cx() {
  return std::is_same_v<T, cuComplex> || std::is_same_v<T, cuDoubleComplex>;
}

uint64_t dev(const void* p) { return reinterpret_cast<uint64_t>(p); }
uint64_t bits(double d) {
  uint64_t b;
  std::memcpy(&b, &d, 8);
  return b;
}
template <class S>
double re_of(const S& v) {
  if constexpr (is_cx<S>()) return double(v.x);
  else return double(v);
}
template <class S>
double im_of(const S& v) {
  if constexpr (is_cx<S>()) return double(v.y);
  else return 0.0;
}
// A scalar argument of type S: its value (host pointer mode) or address.
template <class S>
void scalar(cublasHandle_t h, const S* p, uint64_t* re, uint64_t* im) {
  if (h->pmode == CUBLAS_POINTER_MODE_DEVICE) {
    *re = dev(p), *im = 0;
    return;
  }
  *re = bits(re_of(*p)), *im = bits(im_of(*p));
}
uint32_t flags_of(cublasHandle_t h) {
  return (h->pmode == CUBLAS_POINTER_MODE_DEVICE ? kBlasDeviceScalars : 0u) | (uint32_t(h->math) & 0xFF) << 8;
}
uint64_t sh(cublasHandle_t h) { return reinterpret_cast<uint64_t>(h->stream); }
bool op_ok(cublasOperation_t t) { return t == CUBLAS_OP_N || t == CUBLAS_OP_T || t == CUBLAS_OP_C; }
bool fill_ok(cublasFillMode_t u) { return u == CUBLAS_FILL_MODE_LOWER || u == CUBLAS_FILL_MODE_UPPER; }
bool diag_ok(cublasDiagType_t d) { return d == CUBLAS_DIAG_NON_UNIT || d == CUBLAS_DIAG_UNIT; }
bool side_ok(cublasSideMode_t s) { return s == CUBLAS_SIDE_LEFT || s == CUBLAS_SIDE_RIGHT; }
int max1(int v) { return v > 1 ? v : 1; }

#define WH_HANDLE(h) \
  if (!(h)) return CUBLAS_STATUS_NOT_INITIALIZED

// ---------------------------------------------------------------- level 1

BlasL1Req l1_req(cublasHandle_t h, uint32_t routine, uint32_t type, int n, const void* x, int incx, const void* y,
                 int incy) {
  BlasL1Req rq{};
  rq.handle = h->server, rq.stream = sh(h);
  rq.routine = routine, rq.type = type, rq.n = n, rq.incx = incx, rq.incy = incy;
  rq.x = dev(x), rq.y = dev(y);
  rq.flags = flags_of(h);
  return rq;
}
cublasStatus_t post_l1(const BlasL1Req& rq) { return B::status(B::post<Op::BlasL1>(rq)); }

// Reductions: host pointer mode waits for the value, device mode posts.
template <class Out>
cublasStatus_t reduce_l1(cublasHandle_t h, BlasL1Req& rq, Out* result) {
  if (!result) return CUBLAS_STATUS_INVALID_VALUE;
  if (h->pmode == CUBLAS_POINTER_MODE_DEVICE) {
    rq.result = dev(result);
    return post_l1(rq);
  }
  BlasL1Resp rs{};
  cudaError_t e = B::call<Op::BlasL1>(rq, &rs);
  if (e == cudaSuccess) {
    if constexpr (std::is_same_v<Out, int>) *result = rs.index;
    else if constexpr (std::is_same_v<Out, cuComplex>) *result = make_cuComplex(float(rs.re), float(rs.im));
    else if constexpr (std::is_same_v<Out, cuDoubleComplex>) *result = make_cuDoubleComplex(rs.re, rs.im);
    else *result = Out(rs.re);
  }
  return B::status(e);
}

template <class T, class S>
cublasStatus_t axpy_scal(cublasHandle_t h, uint32_t routine, int n, const S* alpha, const T* x, int incx, T* y,
                         int incy) {
  WH_HANDLE(h);
  if (!alpha) return CUBLAS_STATUS_INVALID_VALUE;
  if (n <= 0) return CUBLAS_STATUS_SUCCESS;
  if (routine != kL1Axpy && incx <= 0) return CUBLAS_STATUS_SUCCESS;
  BlasL1Req rq = l1_req(h, routine, type_code<T>(), n, x, incx, y, incy);
  scalar(h, alpha, &rq.alpha, &rq.alpha_i);
  return post_l1(rq);
}
template <class T>
cublasStatus_t copy_swap(cublasHandle_t h, uint32_t routine, int n, const T* x, int incx, const T* y, int incy) {
  WH_HANDLE(h);
  if (n <= 0) return CUBLAS_STATUS_SUCCESS;
  return post_l1(l1_req(h, routine, type_code<T>(), n, x, incx, y, incy));
}
template <class T, class Out>
cublasStatus_t reduction(cublasHandle_t h, uint32_t routine, int n, const T* x, int incx, const T* y, int incy,
                         Out* result) {
  WH_HANDLE(h);
  BlasL1Req rq = l1_req(h, routine, type_code<T>(), n, x, incx, y, incy);
  return reduce_l1(h, rq, result);
}
template <class T, class C, class S>
cublasStatus_t rot(cublasHandle_t h, uint32_t routine, int n, T* x, int incx, T* y, int incy, const C* c, const S* s) {
  WH_HANDLE(h);
  if (!c || !s) return CUBLAS_STATUS_INVALID_VALUE;
  if (n <= 0) return CUBLAS_STATUS_SUCCESS;
  BlasL1Req rq = l1_req(h, routine, type_code<T>(), n, x, incx, y, incy);
  uint64_t unused;
  scalar(h, c, &rq.alpha, &unused);
  scalar(h, s, &rq.beta, &rq.beta_i);
  return post_l1(rq);
}
template <class T>
cublasStatus_t rotm(cublasHandle_t h, int n, T* x, int incx, T* y, int incy, const T* param) {
  WH_HANDLE(h);
  if (!param) return CUBLAS_STATUS_INVALID_VALUE;
  if (n <= 0) return CUBLAS_STATUS_SUCCESS;
  BlasL1Req rq = l1_req(h, kL1Rotm, type_code<T>(), n, x, incx, y, incy);
  if (h->pmode == CUBLAS_POINTER_MODE_DEVICE) {
    rq.alpha = dev(param);
  } else {
    rq.alpha = bits(param[0]), rq.alpha_i = bits(param[1]), rq.beta = bits(param[2]), rq.beta_i = bits(param[3]);
    rq.extra = bits(param[4]);
  }
  return post_l1(rq);
}

// rotg touches no vector: computed here (device pointer mode: the four
// scalars are copied in and out through the stream, in order).
template <class T, class RT>
void rotg_compute(T* a, T* b, RT* c, T* s) {
  if constexpr (!is_cx<T>()) {
    const T aa = *a, bb = *b;
    const T roe = std::fabs(aa) > std::fabs(bb) ? aa : bb;
    const T scale = std::fabs(aa) + std::fabs(bb);
    T r, z, cc, ss;
    if (scale == T(0)) {
      cc = 1, ss = 0, r = 0, z = 0;
    } else {
      r = scale * std::sqrt((aa / scale) * (aa / scale) + (bb / scale) * (bb / scale));
      r = std::copysign(T(1), roe) * r;
      cc = aa / r, ss = bb / r;
      z = T(1);
      if (std::fabs(aa) > std::fabs(bb)) z = ss;
      if (std::fabs(bb) >= std::fabs(aa) && cc != T(0)) z = T(1) / cc;
    }
    *a = r, *b = z, *c = cc, *s = ss;
  } else {
    using Cx = std::complex<RT>;
    const Cx ca(a->x, a->y), cb(b->x, b->y);
    const RT aa = std::abs(ca);
    if (aa == RT(0)) {
      *c = 0;
      *s = T{1, 0};
      *a = *b;
      return;
    }
    const RT scale = aa + std::abs(cb);
    const RT norm = scale * std::sqrt(std::norm(ca / scale) + std::norm(cb / scale));
    const Cx alpha = ca / aa;
    *c = aa / norm;
    const Cx ss = alpha * std::conj(cb) / norm;
    const Cx r = alpha * norm;
    s->x = ss.real(), s->y = ss.imag();
    a->x = r.real(), a->y = r.imag();
  }
}
template <class T, class RT>
cublasStatus_t rotg(cublasHandle_t h, T* a, T* b, RT* c, T* s) {
  WH_HANDLE(h);
  if (!a || !b || !c || !s) return CUBLAS_STATUS_INVALID_VALUE;
  if (h->pmode == CUBLAS_POINTER_MODE_HOST) {
    rotg_compute<T, RT>(a, b, c, s);
    return CUBLAS_STATUS_SUCCESS;
  }
  T va, vb, vs;
  RT vc;
  cudaStream_t st = h->stream;
  if (cudaMemcpyAsync(&va, a, sizeof(T), cudaMemcpyDeviceToHost, st) != cudaSuccess ||
      cudaMemcpyAsync(&vb, b, sizeof(T), cudaMemcpyDeviceToHost, st) != cudaSuccess ||
      cudaStreamSynchronize(st) != cudaSuccess)
    return CUBLAS_STATUS_EXECUTION_FAILED;
  rotg_compute<T, RT>(&va, &vb, &vc, &vs);
  if (cudaMemcpyAsync(a, &va, sizeof(T), cudaMemcpyHostToDevice, st) != cudaSuccess ||
      cudaMemcpyAsync(b, &vb, sizeof(T), cudaMemcpyHostToDevice, st) != cudaSuccess ||
      cudaMemcpyAsync(c, &vc, sizeof(RT), cudaMemcpyHostToDevice, st) != cudaSuccess ||
      cudaMemcpyAsync(s, &vs, sizeof(T), cudaMemcpyHostToDevice, st) != cudaSuccess ||
      cudaStreamSynchronize(st) != cudaSuccess)
    return CUBLAS_STATUS_EXECUTION_FAILED;
  return CUBLAS_STATUS_SUCCESS;
}

// ---------------------------------------------------------------- level 2

struct L2 {
  uint32_t routine;
  cublasFillMode_t uplo = CUBLAS_FILL_MODE_LOWER;
  cublasOperation_t trans = CUBLAS_OP_N;
  cublasDiagType_t diag = CUBLAS_DIAG_NON_UNIT;
  int m = 0, n = 0, kl = 0, ku = 0;
  const void* A = nullptr;
  int lda = 0;
  const void* x = nullptr;
  int incx = 1;
  const void* y = nullptr;
  int incy = 1;
};
// alpha/beta: S (T, or the real type for her/hpr); null when the routine has none.
template <class T, class S = T>
cublasStatus_t l2(cublasHandle_t h, const L2& a, const S* alpha, const T* beta) {
  WH_HANDLE(h);
  const uint32_t r = a.routine;
  const bool general = r == kL2Gemv || r == kL2Gbmv || r == kL2Ger || r == kL2Gerc;
  const bool tri = r >= kL2Trmv;
  const bool mv = r == kL2Gemv || r == kL2Gbmv || r == kL2Symv || r == kL2Hemv || r == kL2Sbmv || r == kL2Hbmv ||
                  r == kL2Spmv || r == kL2Hpmv;
  const bool band = r == kL2Gbmv || r == kL2Sbmv || r == kL2Hbmv || r == kL2Tbmv || r == kL2Tbsv;
  const bool packed = r == kL2Spmv || r == kL2Hpmv || r == kL2Spr || r == kL2Hpr || r == kL2Spr2 || r == kL2Hpr2 ||
                      r == kL2Tpmv || r == kL2Tpsv;
  const bool has_y = mv || r == kL2Ger || r == kL2Gerc || r == kL2Syr2 || r == kL2Her2 || r == kL2Spr2 || r == kL2Hpr2;
  if (!op_ok(a.trans) || !fill_ok(a.uplo) || !diag_ok(a.diag)) return CUBLAS_STATUS_INVALID_VALUE;
  if (a.m < 0 || a.n < 0 || a.kl < 0 || a.ku < 0 || a.incx == 0 || (has_y && a.incy == 0))
    return CUBLAS_STATUS_INVALID_VALUE;
  const int rows = general ? a.m : a.n;
  const int brows = r == kL2Gbmv ? a.kl + a.ku + 1 : a.kl + 1;
  if (!packed && a.lda < max1(band ? brows : rows)) return CUBLAS_STATUS_INVALID_VALUE;
  if (!tri && !alpha) return CUBLAS_STATUS_INVALID_VALUE;
  if (mv && !beta) return CUBLAS_STATUS_INVALID_VALUE;
  if (rows == 0 || a.n == 0) return CUBLAS_STATUS_SUCCESS;
  BlasL2Req rq{};
  rq.handle = h->server, rq.stream = sh(h);
  rq.routine = r, rq.type = type_code<T>();
  rq.uplo = a.uplo, rq.trans = a.trans, rq.diag = a.diag;
  rq.m = a.m, rq.n = a.n, rq.kl = a.kl, rq.ku = a.ku;
  rq.A = dev(a.A), rq.lda = a.lda, rq.x = dev(a.x), rq.incx = a.incx, rq.y = dev(a.y), rq.incy = a.incy;
  if (alpha) scalar(h, alpha, &rq.alpha, &rq.alpha_i);
  if (beta) scalar(h, beta, &rq.beta, &rq.beta_i);
  rq.flags = flags_of(h);
  return B::status(B::post<Op::BlasL2>(rq));
}

// ---------------------------------------------------------------- level 3

struct L3 {
  uint32_t routine, mode = kBlasOne;
  cublasSideMode_t side = CUBLAS_SIDE_LEFT;
  cublasFillMode_t uplo = CUBLAS_FILL_MODE_LOWER;
  cublasOperation_t ta = CUBLAS_OP_N, tb = CUBLAS_OP_N;
  cublasDiagType_t diag = CUBLAS_DIAG_NON_UNIT;
  int m = 0, n = 0, k = 0, batch = 1;
  const void *A = nullptr, *B = nullptr, *C = nullptr;
  int lda = 0, ldb = 0, ldc = 0;
  long long sa = 0, sb = 0, sc = 0;
};
template <class T, class SA = T, class SB = T>
cublasStatus_t l3(cublasHandle_t h, const L3& a, const SA* alpha, const SB* beta) {
  WH_HANDLE(h);
  const uint32_t r = a.routine;
  if (!op_ok(a.ta) || !op_ok(a.tb) || !fill_ok(a.uplo) || !diag_ok(a.diag) || !side_ok(a.side))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (a.m < 0 || a.n < 0 || a.k < 0 || a.batch < 0 || a.sa < 0 || a.sb < 0 || a.sc < 0)
    return CUBLAS_STATUS_INVALID_VALUE;
  const bool ta_n = a.ta == CUBLAS_OP_N, tb_n = a.tb == CUBLAS_OP_N;
  const int ka = a.side == CUBLAS_SIDE_LEFT ? a.m : a.n;
  bool ok = true;
  switch (r) {
    case kL3Gemm:
      ok = a.lda >= max1(ta_n ? a.m : a.k) && a.ldb >= max1(tb_n ? a.k : a.n) && a.ldc >= max1(a.m);
      break;
    case kL3Symm:
    case kL3Hemm: ok = a.lda >= max1(ka) && a.ldb >= max1(a.m) && a.ldc >= max1(a.m); break;
    case kL3Syrk:
    case kL3Herk:
    case kL3Syr2k:
    case kL3Her2k:
      ok = a.lda >= max1(ta_n ? a.n : a.k) && a.ldc >= max1(a.n) &&
           (r == kL3Syrk || r == kL3Herk || a.ldb >= max1(ta_n ? a.n : a.k));
      if ((r == kL3Herk || r == kL3Her2k) && a.ta == CUBLAS_OP_T) ok = false;
      if ((r == kL3Syrk || r == kL3Syr2k) && is_cx<T>() && a.ta == CUBLAS_OP_C) ok = false;
      break;
    case kL3Trmm: ok = a.lda >= max1(ka) && a.ldb >= max1(a.m) && a.ldc >= max1(a.m); break;
    case kL3Trsm: ok = a.lda >= max1(ka) && a.ldb >= max1(a.m); break;
    case kL3Geam:
      ok = a.lda >= max1(ta_n ? a.m : a.n) && a.ldb >= max1(tb_n ? a.m : a.n) && a.ldc >= max1(a.m);
      break;
    case kL3Dgmm: ok = a.lda >= max1(a.m) && a.ldc >= max1(a.m); break;
  }
  if (!ok) return CUBLAS_STATUS_INVALID_VALUE;
  if (r != kL3Dgmm && !alpha) return CUBLAS_STATUS_INVALID_VALUE;
  const bool has_beta = r != kL3Trmm && r != kL3Trsm && r != kL3Dgmm;
  // geam with a null beta (host pointer mode): B is not read, as with a zero
  // beta; NVIDIA's cuSOLVER transposes this way (gesvd).
  const bool null_beta_ok = r == kL3Geam && h->pmode == CUBLAS_POINTER_MODE_HOST;
  if (has_beta && !beta && !null_beta_ok) return CUBLAS_STATUS_INVALID_VALUE;
  BlasL3Req rq{};
  rq.handle = h->server, rq.stream = sh(h);
  rq.routine = r, rq.type = type_code<T>(), rq.mode = a.mode;
  rq.side = a.side, rq.uplo = a.uplo, rq.transa = a.ta, rq.transb = a.tb, rq.diag = a.diag;
  rq.m = a.m, rq.n = a.n, rq.k = a.k, rq.batch = a.batch;
  rq.A = dev(a.A), rq.B = dev(a.B), rq.C = dev(a.C), rq.lda = a.lda, rq.ldb = a.ldb, rq.ldc = a.ldc;
  rq.strideA = a.sa, rq.strideB = a.sb, rq.strideC = a.sc;
  if (alpha) scalar(h, alpha, &rq.alpha, &rq.alpha_i);
  if (has_beta && beta) scalar(h, beta, &rq.beta, &rq.beta_i);  // else zero
  rq.flags = flags_of(h);
  return B::status(B::post<Op::BlasL3>(rq));
}

// ---------------------------------------------------------------- GemmEx family

bool ex_type_ok(cudaDataType t) {
  return t == CUDA_R_16F || t == CUDA_R_16BF || t == CUDA_R_32F || t == CUDA_R_64F;
}
// The scalar type of a compute type: 2 (half), 4 (float), 8 (double), 0 (unknown).
int compute_scalar(cublasComputeType_t c) {
  switch (c) {
    case CUBLAS_COMPUTE_16F:
    case CUBLAS_COMPUTE_16F_PEDANTIC: return 2;
    case CUBLAS_COMPUTE_32F:
    case CUBLAS_COMPUTE_32F_PEDANTIC:
    case CUBLAS_COMPUTE_32F_FAST_16F:
    case CUBLAS_COMPUTE_32F_FAST_16BF:
    case CUBLAS_COMPUTE_32F_FAST_TF32: return 4;
    case CUBLAS_COMPUTE_64F:
    case CUBLAS_COMPUTE_64F_PEDANTIC: return 8;
    default: return 0;
  }
}
double scalar_value(const void* p, int size) {
  if (size == 2) return double(__half2float(*static_cast<const __half*>(p)));
  if (size == 4) return double(*static_cast<const float*>(p));
  return *static_cast<const double*>(p);
}
bool ex_combo_ok(cudaDataType at, cudaDataType bt, cudaDataType ct, cublasComputeType_t c) {
  if (at != bt || !ex_type_ok(at) || !ex_type_ok(ct)) return false;
  const int s = compute_scalar(c);
  if ((at == CUDA_R_16F || at == CUDA_R_16BF) && (ct == at || ct == CUDA_R_32F) && s == 4) return true;
  if (at == CUDA_R_16F && ct == CUDA_R_16F && s == 2) return true;
  if (at == CUDA_R_32F && ct == CUDA_R_32F && s == 4) return true;
  return at == CUDA_R_64F && ct == CUDA_R_64F && s == 8;
}

template <class T>
cublasStatus_t gemm_cx(cublasHandle_t h, uint32_t mode, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                       int k, const void* alpha, const void* A, int lda, long long sa, const void* Bm, int ldb,
                       long long sb, const void* beta, void* C, int ldc, long long sc, int batch);

cublasStatus_t gemm_ex(cublasHandle_t h, uint32_t mode, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                       int k, const void* alpha, const void* A, cudaDataType at, int lda, long long sa,
                       const void* Bm, cudaDataType bt, int ldb, long long sb, const void* beta, void* C,
                       cudaDataType ct, int ldc, long long sc, int batch, cublasComputeType_t compute,
                       cublasGemmAlgo_t algo) {
  WH_HANDLE(h);
  if (!op_ok(ta) || !op_ok(tb) || m < 0 || n < 0 || k < 0 || batch < 0 || sa < 0 || sb < 0 || sc < 0)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (lda < max1(ta == CUBLAS_OP_N ? m : k) || ldb < max1(tb == CUBLAS_OP_N ? k : n) || ldc < max1(m))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (!alpha || !beta) return CUBLAS_STATUS_INVALID_VALUE;
  // Complex operands with the compute type of their precision are the typed
  // routines' work (cgemm/zgemm; CuPy's batched complex matmul takes this way).
  if (at == bt && at == ct && at == CUDA_C_32F && compute_scalar(compute) == 4 && compute != CUBLAS_COMPUTE_32F_FAST_16F &&
      compute != CUBLAS_COMPUTE_32F_FAST_16BF && compute != CUBLAS_COMPUTE_32F_FAST_TF32)
    return gemm_cx<cuComplex>(h, mode, ta, tb, m, n, k, alpha, A, lda, sa, Bm, ldb, sb, beta, C, ldc, sc, batch);
  if (at == bt && at == ct && at == CUDA_C_64F && compute_scalar(compute) == 8)
    return gemm_cx<cuDoubleComplex>(h, mode, ta, tb, m, n, k, alpha, A, lda, sa, Bm, ldb, sb, beta, C, ldc, sc, batch);
  if (!ex_combo_ok(at, bt, ct, compute)) {
    B::log_once("cublasGemmEx family: this type/compute combination is not forwarded; returning NOT_SUPPORTED");
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  BlasGemmExBatchedReq rq{};
  rq.handle = h->server, rq.stream = sh(h);
  const int ss = compute_scalar(compute);
  if (h->pmode == CUBLAS_POINTER_MODE_DEVICE) {
    rq.alpha = dev(alpha), rq.beta = dev(beta);
  } else {
    rq.alpha = bits(scalar_value(alpha, ss)), rq.beta = bits(scalar_value(beta, ss));
  }
  rq.A = dev(A), rq.B = dev(Bm), rq.C = dev(C);
  rq.lda = lda, rq.ldb = ldb, rq.ldc = ldc, rq.strideA = sa, rq.strideB = sb, rq.strideC = sc;
  rq.m = m, rq.n = n, rq.k = k, rq.batch = batch, rq.transa = ta, rq.transb = tb;
  rq.atype = at, rq.btype = bt, rq.ctype = ct, rq.compute = compute, rq.algo = algo;
  rq.flags = flags_of(h), rq.mode = mode;
  return B::status(B::post<Op::BlasGemmExBatched>(rq));
}

// ---------------------------------------------------------------- LU family

template <class T>
cublasStatus_t lu(cublasHandle_t h, uint32_t routine, cublasOperation_t trans, int n, int nrhs, const void* A,
                  int lda, const void* C, int ldc, const int* piv, int* info, int batch) {
  WH_HANDLE(h);
  if (!op_ok(trans) || n < 0 || nrhs < 0 || batch < 0 || lda < max1(n)) return CUBLAS_STATUS_INVALID_VALUE;
  if (routine != kLuGetrf && ldc < max1(n)) return CUBLAS_STATUS_INVALID_VALUE;
  if (routine == kLuMatinv && n > 32) return CUBLAS_STATUS_INVALID_VALUE;
  if (routine != kLuGetrs && batch > 0 && !info) return CUBLAS_STATUS_INVALID_VALUE;
  if (batch == 0) return CUBLAS_STATUS_SUCCESS;
  BlasLuBatchedReq rq{};
  rq.handle = h->server, rq.stream = sh(h);
  rq.A = dev(A), rq.C = dev(C), rq.pivots = dev(piv), rq.info = routine == kLuGetrs ? 0 : dev(info);
  rq.lda = lda, rq.ldc = ldc, rq.n = n, rq.nrhs = nrhs, rq.batch = batch;
  rq.routine = routine, rq.type = type_code<T>(), rq.trans = trans, rq.flags = flags_of(h);
  return B::status(B::post<Op::BlasLuBatched>(rq));
}

// getrsBatched reports argument errors through its host `info`.
template <class T>
cublasStatus_t getrs(cublasHandle_t h, cublasOperation_t trans, int n, int nrhs, const void* A, int lda,
                     const int* piv, const void* Bm, int ldb, int* info, int batch) {
  WH_HANDLE(h);
  if (!info) return CUBLAS_STATUS_INVALID_VALUE;
  *info = 0;
  int bad = !op_ok(trans) ? -1 : n < 0 ? -2 : nrhs < 0 ? -3 : lda < max1(n) ? -5 : ldb < max1(n) ? -8 : batch < 0 ? -10 : 0;
  if (bad) {
    *info = bad;
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  return lu<T>(h, kLuGetrs, trans, n, nrhs, A, lda, Bm, ldb, piv, nullptr, batch);
}

// ---------------------------------------------------------------- batched QR

// geqrfBatched: argument errors go to the host `info` as -(position of the
// bad argument, the handle not counted), as in getrsBatched.
template <class T>
cublasStatus_t geqrf(cublasHandle_t h, int m, int n, const void* A, int lda, const void* tau, int* info, int batch) {
  WH_HANDLE(h);
  if (!info) return CUBLAS_STATUS_INVALID_VALUE;
  *info = 0;
  int bad = m < 0 ? -1 : n < 0 ? -2 : lda < max1(m) ? -4 : batch < 0 ? -7 : 0;
  if (bad) {
    *info = bad;
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (batch == 0 || m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
  BlasGeqrfBatchedReq rq{};
  rq.handle = h->server, rq.stream = sh(h), rq.A = dev(A), rq.tau = dev(tau), rq.lda = lda;
  rq.m = m, rq.n = n, rq.batch = batch, rq.type = type_code<T>(), rq.flags = flags_of(h);
  return B::status(B::post<Op::BlasGeqrfBatched>(rq));
}

// The _64 forms whose arguments fit the 32-bit body.
bool fits(int64_t v) { return v >= INT_MIN && v <= INT_MAX; }

}  // namespace

extern "C" {

// ---------------------------------------------------------------- level 1 exports
#define WH_L1_AXPY_SCAL_COPY(P, T)                                                                               \
  cublasStatus_t cublas##P##axpy_v2(cublasHandle_t h, int n, const T* alpha, const T* x, int incx, T* y, int incy) { \
    return axpy_scal<T, T>(h, kL1Axpy, n, alpha, x, incx, y, incy);                                             \
  }                                                                                                              \
  cublasStatus_t cublas##P##scal_v2(cublasHandle_t h, int n, const T* alpha, T* x, int incx) {                   \
    return axpy_scal<T, T>(h, kL1Scal, n, alpha, x, incx, nullptr, 0);                                          \
  }                                                                                                              \
  cublasStatus_t cublas##P##copy_v2(cublasHandle_t h, int n, const T* x, int incx, T* y, int incy) {             \
    return copy_swap<T>(h, kL1Copy, n, x, incx, y, incy);                                                       \
  }
WH_L1_AXPY_SCAL_COPY(D, double)
WH_L1_AXPY_SCAL_COPY(C, cuComplex)
WH_L1_AXPY_SCAL_COPY(Z, cuDoubleComplex)

#define WH_L1_SWAP_ROT(P, T, RT, I)                                                                                  \
  cublasStatus_t cublas##P##swap_v2(cublasHandle_t h, int n, T* x, int incx, T* y, int incy) {                     \
    return copy_swap<T>(h, kL1Swap, n, x, incx, y, incy);                                                         \
  }                                                                                                                \
  cublasStatus_t cublasI##I##amin_v2(cublasHandle_t h, int n, const T* x, int incx, int* result) {                 \
    return reduction<T, int>(h, kL1Iamin, n, x, incx, nullptr, 0, result);                                        \
  }                                                                                                                \
  cublasStatus_t cublas##P##rot_v2(cublasHandle_t h, int n, T* x, int incx, T* y, int incy, const RT* c,          \
                                   const T* s) {                                                                   \
    return rot<T, RT, T>(h, kL1Rot, n, x, incx, y, incy, c, s);                                                   \
  }                                                                                                                \
  cublasStatus_t cublas##P##rotg_v2(cublasHandle_t h, T* a, T* b, RT* c, T* s) { return rotg<T, RT>(h, a, b, c, s); }
WH_L1_SWAP_ROT(S, float, float, s)
WH_L1_SWAP_ROT(D, double, double, d)
WH_L1_SWAP_ROT(C, cuComplex, float, c)
WH_L1_SWAP_ROT(Z, cuDoubleComplex, double, z)

#define WH_L1_REDUCE(P, T, RT, NP, I)                                                                          \
  cublasStatus_t cublas##NP##nrm2_v2(cublasHandle_t h, int n, const T* x, int incx, RT* result) {              \
    return reduction<T, RT>(h, kL1Nrm2, n, x, incx, nullptr, 0, result);                                      \
  }                                                                                                            \
  cublasStatus_t cublas##NP##asum_v2(cublasHandle_t h, int n, const T* x, int incx, RT* result) {              \
    return reduction<T, RT>(h, kL1Asum, n, x, incx, nullptr, 0, result);                                      \
  }                                                                                                            \
  cublasStatus_t cublasI##I##amax_v2(cublasHandle_t h, int n, const T* x, int incx, int* result) {             \
    return reduction<T, int>(h, kL1Iamax, n, x, incx, nullptr, 0, result);                                    \
  }
WH_L1_REDUCE(D, double, double, D, d)
WH_L1_REDUCE(C, cuComplex, float, Sc, c)
WH_L1_REDUCE(Z, cuDoubleComplex, double, Dz, z)

cublasStatus_t cublasDdot_v2(cublasHandle_t h, int n, const double* x, int incx, const double* y, int incy,
                             double* result) {
  return reduction<double, double>(h, kL1Dot, n, x, incx, y, incy, result);
}
#define WH_L1_CDOT(P, T)                                                                                        \
  cublasStatus_t cublas##P##dotu_v2(cublasHandle_t h, int n, const T* x, int incx, const T* y, int incy,        \
                                    T* result) {                                                                \
    return reduction<T, T>(h, kL1Dot, n, x, incx, y, incy, result);                                            \
  }                                                                                                             \
  cublasStatus_t cublas##P##dotc_v2(cublasHandle_t h, int n, const T* x, int incx, const T* y, int incy,        \
                                    T* result) {                                                                \
    return reduction<T, T>(h, kL1Dotc, n, x, incx, y, incy, result);                                           \
  }
WH_L1_CDOT(C, cuComplex)
WH_L1_CDOT(Z, cuDoubleComplex)

cublasStatus_t cublasCsscal_v2(cublasHandle_t h, int n, const float* alpha, cuComplex* x, int incx) {
  return axpy_scal<cuComplex, float>(h, kL1ScalReal, n, alpha, x, incx, nullptr, 0);
}
cublasStatus_t cublasZdscal_v2(cublasHandle_t h, int n, const double* alpha, cuDoubleComplex* x, int incx) {
  return axpy_scal<cuDoubleComplex, double>(h, kL1ScalReal, n, alpha, x, incx, nullptr, 0);
}
cublasStatus_t cublasCsrot_v2(cublasHandle_t h, int n, cuComplex* x, int incx, cuComplex* y, int incy, const float* c,
                              const float* s) {
  return rot<cuComplex, float, float>(h, kL1RotReal, n, x, incx, y, incy, c, s);
}
cublasStatus_t cublasZdrot_v2(cublasHandle_t h, int n, cuDoubleComplex* x, int incx, cuDoubleComplex* y, int incy,
                              const double* c, const double* s) {
  return rot<cuDoubleComplex, double, double>(h, kL1RotReal, n, x, incx, y, incy, c, s);
}
cublasStatus_t cublasSrotm_v2(cublasHandle_t h, int n, float* x, int incx, float* y, int incy, const float* param) {
  return rotm<float>(h, n, x, incx, y, incy, param);
}
cublasStatus_t cublasDrotm_v2(cublasHandle_t h, int n, double* x, int incx, double* y, int incy, const double* param) {
  return rotm<double>(h, n, x, incx, y, incy, param);
}

// ---------------------------------------------------------------- level 2 exports
#define WH_L2_ALL(P, T)                                                                                              \
  cublasStatus_t cublas##P##gbmv_v2(cublasHandle_t h, cublasOperation_t t, int m, int n, int kl, int ku,           \
                                    const T* alpha, const T* A, int lda, const T* x, int incx, const T* beta, T* y, \
                                    int incy) {                                                                     \
    L2 a{kL2Gbmv};                                                                                                  \
    a.trans = t, a.m = m, a.n = n, a.kl = kl, a.ku = ku, a.A = A, a.lda = lda, a.x = x, a.incx = incx, a.y = y,     \
    a.incy = incy;                                                                                                  \
    return l2<T>(h, a, alpha, beta);                                                                                \
  }                                                                                                                 \
  cublasStatus_t cublas##P##symv_v2(cublasHandle_t h, cublasFillMode_t u, int n, const T* alpha, const T* A,       \
                                    int lda, const T* x, int incx, const T* beta, T* y, int incy) {                 \
    L2 a{kL2Symv};                                                                                                  \
    a.uplo = u, a.n = n, a.A = A, a.lda = lda, a.x = x, a.incx = incx, a.y = y, a.incy = incy;                      \
    return l2<T>(h, a, alpha, beta);                                                                                \
  }                                                                                                                 \
  cublasStatus_t cublas##P##syr_v2(cublasHandle_t h, cublasFillMode_t u, int n, const T* alpha, const T* x,        \
                                   int incx, T* A, int lda) {                                                       \
    L2 a{kL2Syr};                                                                                                   \
    a.uplo = u, a.n = n, a.A = A, a.lda = lda, a.x = x, a.incx = incx;                                              \
    return l2<T>(h, a, alpha, static_cast<const T*>(nullptr));                                                      \
  }                                                                                                                 \
  cublasStatus_t cublas##P##syr2_v2(cublasHandle_t h, cublasFillMode_t u, int n, const T* alpha, const T* x,       \
                                    int incx, const T* y, int incy, T* A, int lda) {                                \
    L2 a{kL2Syr2};                                                                                                  \
    a.uplo = u, a.n = n, a.A = A, a.lda = lda, a.x = x, a.incx = incx, a.y = y, a.incy = incy;                      \
    return l2<T>(h, a, alpha, static_cast<const T*>(nullptr));                                                      \
  }                                                                                                                 \
  cublasStatus_t cublas##P##trmv_v2(cublasHandle_t h, cublasFillMode_t u, cublasOperation_t t, cublasDiagType_t d, \
                                    int n, const T* A, int lda, T* x, int incx) {                                   \
    L2 a{kL2Trmv};                                                                                                  \
    a.uplo = u, a.trans = t, a.diag = d, a.n = n, a.A = A, a.lda = lda, a.x = x, a.incx = incx;                     \
    return l2<T>(h, a, static_cast<const T*>(nullptr), static_cast<const T*>(nullptr));                             \
  }                                                                                                                 \
  cublasStatus_t cublas##P##trsv_v2(cublasHandle_t h, cublasFillMode_t u, cublasOperation_t t, cublasDiagType_t d, \
                                    int n, const T* A, int lda, T* x, int incx) {                                   \
    L2 a{kL2Trsv};                                                                                                  \
    a.uplo = u, a.trans = t, a.diag = d, a.n = n, a.A = A, a.lda = lda, a.x = x, a.incx = incx;                     \
    return l2<T>(h, a, static_cast<const T*>(nullptr), static_cast<const T*>(nullptr));                             \
  }                                                                                                                 \
  cublasStatus_t cublas##P##tbmv_v2(cublasHandle_t h, cublasFillMode_t u, cublasOperation_t t, cublasDiagType_t d, \
                                    int n, int k, const T* A, int lda, T* x, int incx) {                            \
    L2 a{kL2Tbmv};                                                                                                  \
    a.uplo = u, a.trans = t, a.diag = d, a.n = n, a.kl = k, a.A = A, a.lda = lda, a.x = x, a.incx = incx;           \
    return l2<T>(h, a, static_cast<const T*>(nullptr), static_cast<const T*>(nullptr));                             \
  }                                                                                                                 \
  cublasStatus_t cublas##P##tbsv_v2(cublasHandle_t h, cublasFillMode_t u, cublasOperation_t t, cublasDiagType_t d, \
                                    int n, int k, const T* A, int lda, T* x, int incx) {                            \
    L2 a{kL2Tbsv};                                                                                                  \
    a.uplo = u, a.trans = t, a.diag = d, a.n = n, a.kl = k, a.A = A, a.lda = lda, a.x = x, a.incx = incx;           \
    return l2<T>(h, a, static_cast<const T*>(nullptr), static_cast<const T*>(nullptr));                             \
  }                                                                                                                 \
  cublasStatus_t cublas##P##tpmv_v2(cublasHandle_t h, cublasFillMode_t u, cublasOperation_t t, cublasDiagType_t d, \
                                    int n, const T* AP, T* x, int incx) {                                           \
    L2 a{kL2Tpmv};                                                                                                  \
    a.uplo = u, a.trans = t, a.diag = d, a.n = n, a.A = AP, a.x = x, a.incx = incx;                                 \
    return l2<T>(h, a, static_cast<const T*>(nullptr), static_cast<const T*>(nullptr));                             \
  }                                                                                                                 \
  cublasStatus_t cublas##P##tpsv_v2(cublasHandle_t h, cublasFillMode_t u, cublasOperation_t t, cublasDiagType_t d, \
                                    int n, const T* AP, T* x, int incx) {                                           \
    L2 a{kL2Tpsv};                                                                                                  \
    a.uplo = u, a.trans = t, a.diag = d, a.n = n, a.A = AP, a.x = x, a.incx = incx;                                 \
    return l2<T>(h, a, static_cast<const T*>(nullptr), static_cast<const T*>(nullptr));                             \
  }
WH_L2_ALL(S, float)
WH_L2_ALL(D, double)
WH_L2_ALL(C, cuComplex)
WH_L2_ALL(Z, cuDoubleComplex)

#define WH_L2_GEMV(P, T)                                                                                            \
  cublasStatus_t cublas##P##gemv_v2(cublasHandle_t h, cublasOperation_t t, int m, int n, const T* alpha,          \
                                    const T* A, int lda, const T* x, int incx, const T* beta, T* y, int incy) {     \
    L2 a{kL2Gemv};                                                                                                  \
    a.trans = t, a.m = m, a.n = n, a.A = A, a.lda = lda, a.x = x, a.incx = incx, a.y = y, a.incy = incy;            \
    return l2<T>(h, a, alpha, beta);                                                                                \
  }
WH_L2_GEMV(D, double)
WH_L2_GEMV(C, cuComplex)
WH_L2_GEMV(Z, cuDoubleComplex)

#define WH_L2_GER(NAME, R, T)                                                                                       \
  cublasStatus_t NAME(cublasHandle_t h, int m, int n, const T* alpha, const T* x, int incx, const T* y, int incy, \
                      T* A, int lda) {                                                                              \
    L2 a{R};                                                                                                        \
    a.m = m, a.n = n, a.A = A, a.lda = lda, a.x = x, a.incx = incx, a.y = y, a.incy = incy;                         \
    return l2<T>(h, a, alpha, static_cast<const T*>(nullptr));                                                      \
  }
WH_L2_GER(cublasSger_v2, kL2Ger, float)
WH_L2_GER(cublasDger_v2, kL2Ger, double)
WH_L2_GER(cublasCgeru_v2, kL2Ger, cuComplex)
WH_L2_GER(cublasZgeru_v2, kL2Ger, cuDoubleComplex)
WH_L2_GER(cublasCgerc_v2, kL2Gerc, cuComplex)
WH_L2_GER(cublasZgerc_v2, kL2Gerc, cuDoubleComplex)

// Real-only band/packed symmetric forms and their Hermitian counterparts.
#define WH_L2_SYMLIKE(P, T, RT, BMV, PMV, PR1, PR2, K_BMV, K_PMV, K_PR1, K_PR2)                                  \
  cublasStatus_t cublas##P##BMV##_v2(cublasHandle_t h, cublasFillMode_t u, int n, int k, const T* alpha,          \
                                     const T* A, int lda, const T* x, int incx, const T* beta, T* y, int incy) {    \
    L2 a{K_BMV};                                                                                                    \
    a.uplo = u, a.n = n, a.kl = k, a.A = A, a.lda = lda, a.x = x, a.incx = incx, a.y = y, a.incy = incy;            \
    return l2<T>(h, a, alpha, beta);                                                                                \
  }                                                                                                                 \
  cublasStatus_t cublas##P##PMV##_v2(cublasHandle_t h, cublasFillMode_t u, int n, const T* alpha, const T* AP,    \
                                     const T* x, int incx, const T* beta, T* y, int incy) {                         \
    L2 a{K_PMV};                                                                                                    \
    a.uplo = u, a.n = n, a.A = AP, a.x = x, a.incx = incx, a.y = y, a.incy = incy;                                  \
    return l2<T>(h, a, alpha, beta);                                                                                \
  }                                                                                                                 \
  cublasStatus_t cublas##P##PR1##_v2(cublasHandle_t h, cublasFillMode_t u, int n, const RT* alpha, const T* x,    \
                                     int incx, T* AP) {                                                             \
    L2 a{K_PR1};                                                                                                    \
    a.uplo = u, a.n = n, a.A = AP, a.x = x, a.incx = incx;                                                          \
    return l2<T, RT>(h, a, alpha, static_cast<const T*>(nullptr));                                                  \
  }                                                                                                                 \
  cublasStatus_t cublas##P##PR2##_v2(cublasHandle_t h, cublasFillMode_t u, int n, const T* alpha, const T* x,     \
                                     int incx, const T* y, int incy, T* AP) {                                       \
    L2 a{K_PR2};                                                                                                    \
    a.uplo = u, a.n = n, a.A = AP, a.x = x, a.incx = incx, a.y = y, a.incy = incy;                                  \
    return l2<T>(h, a, alpha, static_cast<const T*>(nullptr));                                                      \
  }
WH_L2_SYMLIKE(S, float, float, sbmv, spmv, spr, spr2, kL2Sbmv, kL2Spmv, kL2Spr, kL2Spr2)
WH_L2_SYMLIKE(D, double, double, sbmv, spmv, spr, spr2, kL2Sbmv, kL2Spmv, kL2Spr, kL2Spr2)
WH_L2_SYMLIKE(C, cuComplex, float, hbmv, hpmv, hpr, hpr2, kL2Hbmv, kL2Hpmv, kL2Hpr, kL2Hpr2)
WH_L2_SYMLIKE(Z, cuDoubleComplex, double, hbmv, hpmv, hpr, hpr2, kL2Hbmv, kL2Hpmv, kL2Hpr, kL2Hpr2)
#define WH_L2_HEMV_HER(P, T, RT)                                                                                    \
  cublasStatus_t cublas##P##hemv_v2(cublasHandle_t h, cublasFillMode_t u, int n, const T* alpha, const T* A,      \
                                    int lda, const T* x, int incx, const T* beta, T* y, int incy) {                 \
    L2 a{kL2Hemv};                                                                                                  \
    a.uplo = u, a.n = n, a.A = A, a.lda = lda, a.x = x, a.incx = incx, a.y = y, a.incy = incy;                      \
    return l2<T>(h, a, alpha, beta);                                                                                \
  }                                                                                                                 \
  cublasStatus_t cublas##P##her_v2(cublasHandle_t h, cublasFillMode_t u, int n, const RT* alpha, const T* x,      \
                                   int incx, T* A, int lda) {                                                       \
    L2 a{kL2Her};                                                                                                   \
    a.uplo = u, a.n = n, a.A = A, a.lda = lda, a.x = x, a.incx = incx;                                              \
    return l2<T, RT>(h, a, alpha, static_cast<const T*>(nullptr));                                                  \
  }
WH_L2_HEMV_HER(C, cuComplex, float)
WH_L2_HEMV_HER(Z, cuDoubleComplex, double)
#define WH_L2_HER2(P, T)                                                                                            \
  cublasStatus_t cublas##P##her2_v2(cublasHandle_t h, cublasFillMode_t u, int n, const T* alpha, const T* x,      \
                                    int incx, const T* y, int incy, T* A, int lda) {                                \
    L2 a{kL2Her2};                                                                                                  \
    a.uplo = u, a.n = n, a.A = A, a.lda = lda, a.x = x, a.incx = incx, a.y = y, a.incy = incy;                      \
    return l2<T>(h, a, alpha, static_cast<const T*>(nullptr));                                                      \
  }
WH_L2_HER2(C, cuComplex)
WH_L2_HER2(Z, cuDoubleComplex)

// ---------------------------------------------------------------- level 3 exports
#define WH_L3_GEMM(P, T)                                                                                            \
  cublasStatus_t cublas##P##gemm_v2(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,   \
                                    int k, const T* alpha, const T* A, int lda, const T* Bm, int ldb,               \
                                    const T* beta, T* C, int ldc) {                                                 \
    L3 a{kL3Gemm};                                                                                                  \
    a.ta = ta, a.tb = tb, a.m = m, a.n = n, a.k = k, a.A = A, a.lda = lda, a.B = Bm, a.ldb = ldb, a.C = C,          \
    a.ldc = ldc;                                                                                                    \
    return l3<T>(h, a, alpha, beta);                                                                                \
  }                                                                                                                 \
  cublasStatus_t cublas##P##gemmBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,      \
                                        int n, int k, const T* alpha, const T* const A[], int lda,                  \
                                        const T* const Bm[], int ldb, const T* beta, T* const C[], int ldc,         \
                                        int batch) {                                                                \
    L3 a{kL3Gemm, kBlasArrays};                                                                                     \
    a.ta = ta, a.tb = tb, a.m = m, a.n = n, a.k = k, a.A = A, a.lda = lda, a.B = Bm, a.ldb = ldb, a.C = C,          \
    a.ldc = ldc, a.batch = batch;                                                                                   \
    return l3<T>(h, a, alpha, beta);                                                                                \
  }                                                                                                                 \
  cublasStatus_t cublas##P##gemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,      \
                                               int m, int n, int k, const T* alpha, const T* A, int lda,            \
                                               long long sa, const T* Bm, int ldb, long long sb, const T* beta,     \
                                               T* C, int ldc, long long sc, int batch) {                            \
    L3 a{kL3Gemm, kBlasStrided};                                                                                    \
    a.ta = ta, a.tb = tb, a.m = m, a.n = n, a.k = k, a.A = A, a.lda = lda, a.B = Bm, a.ldb = ldb, a.C = C,          \
    a.ldc = ldc, a.batch = batch, a.sa = sa, a.sb = sb, a.sc = sc;                                                  \
    return l3<T>(h, a, alpha, beta);                                                                                \
  }
WH_L3_GEMM(C, cuComplex)
WH_L3_GEMM(Z, cuDoubleComplex)

#define WH_L3_ALL(P, T)                                                                                             \
  cublasStatus_t cublas##P##symm_v2(cublasHandle_t h, cublasSideMode_t s, cublasFillMode_t u, int m, int n,       \
                                    const T* alpha, const T* A, int lda, const T* Bm, int ldb, const T* beta, T* C, \
                                    int ldc) {                                                                      \
    L3 a{kL3Symm};                                                                                                  \
    a.side = s, a.uplo = u, a.m = m, a.n = n, a.A = A, a.lda = lda, a.B = Bm, a.ldb = ldb, a.C = C, a.ldc = ldc;    \
    return l3<T>(h, a, alpha, beta);                                                                                \
  }                                                                                                                 \
  cublasStatus_t cublas##P##syrk_v2(cublasHandle_t h, cublasFillMode_t u, cublasOperation_t t, int n, int k,      \
                                    const T* alpha, const T* A, int lda, const T* beta, T* C, int ldc) {            \
    L3 a{kL3Syrk};                                                                                                  \
    a.uplo = u, a.ta = t, a.n = n, a.k = k, a.A = A, a.lda = lda, a.C = C, a.ldc = ldc;                             \
    return l3<T>(h, a, alpha, beta);                                                                                \
  }                                                                                                                 \
  cublasStatus_t cublas##P##syr2k_v2(cublasHandle_t h, cublasFillMode_t u, cublasOperation_t t, int n, int k,     \
                                     const T* alpha, const T* A, int lda, const T* Bm, int ldb, const T* beta,      \
                                     T* C, int ldc) {                                                               \
    L3 a{kL3Syr2k};                                                                                                 \
    a.uplo = u, a.ta = t, a.n = n, a.k = k, a.A = A, a.lda = lda, a.B = Bm, a.ldb = ldb, a.C = C, a.ldc = ldc;      \
    return l3<T>(h, a, alpha, beta);                                                                                \
  }                                                                                                                 \
  cublasStatus_t cublas##P##trmm_v2(cublasHandle_t h, cublasSideMode_t s, cublasFillMode_t u, cublasOperation_t t,\
                                    cublasDiagType_t d, int m, int n, const T* alpha, const T* A, int lda,          \
                                    const T* Bm, int ldb, T* C, int ldc) {                                          \
    L3 a{kL3Trmm};                                                                                                  \
    a.side = s, a.uplo = u, a.ta = t, a.diag = d, a.m = m, a.n = n, a.A = A, a.lda = lda, a.B = Bm, a.ldb = ldb,    \
    a.C = C, a.ldc = ldc;                                                                                           \
    return l3<T>(h, a, alpha, static_cast<const T*>(nullptr));                                                      \
  }                                                                                                                 \
  cublasStatus_t cublas##P##trsm_v2(cublasHandle_t h, cublasSideMode_t s, cublasFillMode_t u, cublasOperation_t t,\
                                    cublasDiagType_t d, int m, int n, const T* alpha, const T* A, int lda, T* Bm,   \
                                    int ldb) {                                                                      \
    L3 a{kL3Trsm};                                                                                                  \
    a.side = s, a.uplo = u, a.ta = t, a.diag = d, a.m = m, a.n = n, a.A = A, a.lda = lda, a.B = Bm, a.ldb = ldb;    \
    return l3<T>(h, a, alpha, static_cast<const T*>(nullptr));                                                      \
  }                                                                                                                 \
  cublasStatus_t cublas##P##trsmBatched(cublasHandle_t h, cublasSideMode_t s, cublasFillMode_t u,                 \
                                        cublasOperation_t t, cublasDiagType_t d, int m, int n, const T* alpha,      \
                                        const T* const A[], int lda, T* const Bm[], int ldb, int batch) {           \
    L3 a{kL3Trsm, kBlasArrays};                                                                                     \
    a.side = s, a.uplo = u, a.ta = t, a.diag = d, a.m = m, a.n = n, a.A = A, a.lda = lda, a.B = Bm, a.ldb = ldb,    \
    a.batch = batch;                                                                                                \
    return l3<T>(h, a, alpha, static_cast<const T*>(nullptr));                                                      \
  }                                                                                                                 \
  cublasStatus_t cublas##P##dgmm(cublasHandle_t h, cublasSideMode_t s, int m, int n, const T* A, int lda,         \
                                 const T* x, int incx, T* C, int ldc) {                                             \
    L3 a{kL3Dgmm};                                                                                                  \
    a.side = s, a.m = m, a.n = n, a.A = A, a.lda = lda, a.B = x, a.ldb = incx, a.C = C, a.ldc = ldc;                \
    return l3<T>(h, a, static_cast<const T*>(nullptr), static_cast<const T*>(nullptr));                             \
  }                                                                                                                 \
  cublasStatus_t cublas##P##getrfBatched(cublasHandle_t h, int n, T* const A[], int lda, int* P_, int* info,      \
                                         int batch) {                                                               \
    return lu<T>(h, kLuGetrf, CUBLAS_OP_N, n, 0, A, lda, nullptr, max1(n), P_, info, batch);                        \
  }                                                                                                                 \
  cublasStatus_t cublas##P##getriBatched(cublasHandle_t h, int n, const T* const A[], int lda, const int* P_,     \
                                         T* const C[], int ldc, int* info, int batch) {                             \
    return lu<T>(h, kLuGetri, CUBLAS_OP_N, n, 0, A, lda, C, ldc, P_, info, batch);                                  \
  }                                                                                                                 \
  cublasStatus_t cublas##P##getrsBatched(cublasHandle_t h, cublasOperation_t t, int n, int nrhs,                  \
                                         const T* const A[], int lda, const int* P_, T* const Bm[], int ldb,        \
                                         int* info, int batch) {                                                    \
    return getrs<T>(h, t, n, nrhs, A, lda, P_, Bm, ldb, info, batch);                                               \
  }                                                                                                                 \
  cublasStatus_t cublas##P##matinvBatched(cublasHandle_t h, int n, const T* const A[], int lda,                   \
                                          T* const Ainv[], int lda_inv, int* info, int batch) {                     \
    return lu<T>(h, kLuMatinv, CUBLAS_OP_N, n, 0, A, lda, Ainv, lda_inv, nullptr, info, batch);                     \
  }
WH_L3_ALL(S, float)
WH_L3_ALL(D, double)
WH_L3_ALL(C, cuComplex)
WH_L3_ALL(Z, cuDoubleComplex)

#define WH_GEQRF(P, T)                                                                                              \
  cublasStatus_t cublas##P##geqrfBatched(cublasHandle_t h, int m, int n, T* const A[], int lda, T* const tau[],   \
                                         int* info, int batch) {                                                    \
    return geqrf<T>(h, m, n, A, lda, tau, info, batch);                                                             \
  }
WH_GEQRF(S, float)
WH_GEQRF(D, double)
WH_GEQRF(C, cuComplex)
WH_GEQRF(Z, cuDoubleComplex)

#define WH_L3_GEAM(P, T)                                                                                            \
  cublasStatus_t cublas##P##geam(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,      \
                                 const T* alpha, const T* A, int lda, const T* beta, const T* Bm, int ldb, T* C,    \
                                 int ldc) {                                                                         \
    L3 a{kL3Geam};                                                                                                  \
    a.ta = ta, a.tb = tb, a.m = m, a.n = n, a.A = A, a.lda = lda, a.B = Bm, a.ldb = ldb, a.C = C, a.ldc = ldc;      \
    return l3<T>(h, a, alpha, beta);                                                                                \
  }
WH_L3_GEAM(D, double)
WH_L3_GEAM(C, cuComplex)
WH_L3_GEAM(Z, cuDoubleComplex)

#define WH_L3_HERM(P, T, RT)                                                                                        \
  cublasStatus_t cublas##P##hemm_v2(cublasHandle_t h, cublasSideMode_t s, cublasFillMode_t u, int m, int n,       \
                                    const T* alpha, const T* A, int lda, const T* Bm, int ldb, const T* beta, T* C, \
                                    int ldc) {                                                                      \
    L3 a{kL3Hemm};                                                                                                  \
    a.side = s, a.uplo = u, a.m = m, a.n = n, a.A = A, a.lda = lda, a.B = Bm, a.ldb = ldb, a.C = C, a.ldc = ldc;    \
    return l3<T>(h, a, alpha, beta);                                                                                \
  }                                                                                                                 \
  cublasStatus_t cublas##P##herk_v2(cublasHandle_t h, cublasFillMode_t u, cublasOperation_t t, int n, int k,      \
                                    const RT* alpha, const T* A, int lda, const RT* beta, T* C, int ldc) {          \
    L3 a{kL3Herk};                                                                                                  \
    a.uplo = u, a.ta = t, a.n = n, a.k = k, a.A = A, a.lda = lda, a.C = C, a.ldc = ldc;                             \
    return l3<T, RT, RT>(h, a, alpha, beta);                                                                        \
  }                                                                                                                 \
  cublasStatus_t cublas##P##her2k_v2(cublasHandle_t h, cublasFillMode_t u, cublasOperation_t t, int n, int k,     \
                                     const T* alpha, const T* A, int lda, const T* Bm, int ldb, const RT* beta,     \
                                     T* C, int ldc) {                                                               \
    L3 a{kL3Her2k};                                                                                                 \
    a.uplo = u, a.ta = t, a.n = n, a.k = k, a.A = A, a.lda = lda, a.B = Bm, a.ldb = ldb, a.C = C, a.ldc = ldc;      \
    return l3<T, T, RT>(h, a, alpha, beta);                                                                         \
  }
WH_L3_HERM(C, cuComplex, float)
WH_L3_HERM(Z, cuDoubleComplex, double)

// ---------------------------------------------------------------- GemmEx family

cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const void* alpha, const void* A, cudaDataType at, int lda, const void* Bm,
                            cudaDataType bt, int ldb, const void* beta, void* C, cudaDataType ct, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t algo) {
  return gemm_ex(h, kBlasOne, ta, tb, m, n, k, alpha, A, at, lda, 0, Bm, bt, ldb, 0, beta, C, ct, ldc, 0, 1, compute,
                 algo);
}
cublasStatus_t cublasGemmBatchedEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                   const void* alpha, const void* const A[], cudaDataType at, int lda,
                                   const void* const Bm[], cudaDataType bt, int ldb, const void* beta, void* const C[],
                                   cudaDataType ct, int ldc, int batch, cublasComputeType_t compute,
                                   cublasGemmAlgo_t algo) {
  return gemm_ex(h, kBlasArrays, ta, tb, m, n, k, alpha, A, at, lda, 0, Bm, bt, ldb, 0, beta, const_cast<void**>(C), ct, ldc, 0, batch,
                 compute, algo);
}
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                          int k, const void* alpha, const void* A, cudaDataType at, int lda,
                                          long long sa, const void* Bm, cudaDataType bt, int ldb, long long sb,
                                          const void* beta, void* C, cudaDataType ct, int ldc, long long sc, int batch,
                                          cublasComputeType_t compute, cublasGemmAlgo_t algo) {
  return gemm_ex(h, kBlasStrided, ta, tb, m, n, k, alpha, A, at, lda, sa, Bm, bt, ldb, sb, beta, C, ct, ldc, sc,
                 batch, compute, algo);
}

}  // extern "C"

namespace {
// GemmEx on complex operands, as the typed routine of their precision.
template <class T>
cublasStatus_t gemm_cx(cublasHandle_t h, uint32_t mode, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                       int k, const void* alpha, const void* A, int lda, long long sa, const void* Bm, int ldb,
                       long long sb, const void* beta, void* C, int ldc, long long sc, int batch) {
  constexpr bool z = std::is_same_v<T, cuDoubleComplex>;
  auto al = static_cast<const T*>(alpha), be = static_cast<const T*>(beta);
  if (mode == kBlasArrays) {
    auto a = static_cast<const T* const*>(A), b = static_cast<const T* const*>(Bm);
    auto c = static_cast<T* const*>(C);
    if constexpr (z) return cublasZgemmBatched(h, ta, tb, m, n, k, al, a, lda, b, ldb, be, c, ldc, batch);
    else return cublasCgemmBatched(h, ta, tb, m, n, k, al, a, lda, b, ldb, be, c, ldc, batch);
  }
  auto a = static_cast<const T*>(A), b = static_cast<const T*>(Bm);
  auto c = static_cast<T*>(C);
  if (mode == kBlasStrided) {
    if constexpr (z) return cublasZgemmStridedBatched(h, ta, tb, m, n, k, al, a, lda, sa, b, ldb, sb, be, c, ldc, sc, batch);
    else return cublasCgemmStridedBatched(h, ta, tb, m, n, k, al, a, lda, sa, b, ldb, sb, be, c, ldc, sc, batch);
  }
  if constexpr (z) return cublasZgemm_v2(h, ta, tb, m, n, k, al, a, lda, b, ldb, be, c, ldc);
  else return cublasCgemm_v2(h, ta, tb, m, n, k, al, a, lda, b, ldb, be, c, ldc);
}
}  // namespace

extern "C" {

// ---------------------------------------------------------------- _64 forms
// The 32-bit body serves them when every size fits an int; otherwise the
// call is refused with CUBLAS_STATUS_NOT_SUPPORTED (no forwarded routine
// takes 64-bit sizes).
#define WH_FITS(...) \
  if (!(__VA_ARGS__)) return CUBLAS_STATUS_NOT_SUPPORTED
#define WH_64_L1(P, T)                                                                                              \
  cublasStatus_t cublas##P##axpy_v2_64(cublasHandle_t h, int64_t n, const T* alpha, const T* x, int64_t incx,     \
                                       T* y, int64_t incy) {                                                        \
    WH_FITS(fits(n) && fits(incx) && fits(incy));                                                                   \
    return axpy_scal<T, T>(h, kL1Axpy, int(n), alpha, x, int(incx), y, int(incy));                                 \
  }                                                                                                                 \
  cublasStatus_t cublas##P##scal_v2_64(cublasHandle_t h, int64_t n, const T* alpha, T* x, int64_t incx) {         \
    WH_FITS(fits(n) && fits(incx));                                                                                 \
    return axpy_scal<T, T>(h, kL1Scal, int(n), alpha, x, int(incx), nullptr, 0);                                   \
  }                                                                                                                 \
  cublasStatus_t cublas##P##copy_v2_64(cublasHandle_t h, int64_t n, const T* x, int64_t incx, T* y, int64_t incy) {\
    WH_FITS(fits(n) && fits(incx) && fits(incy));                                                                   \
    return copy_swap<T>(h, kL1Copy, int(n), x, int(incx), y, int(incy));                                           \
  }                                                                                                                 \
  cublasStatus_t cublas##P##swap_v2_64(cublasHandle_t h, int64_t n, T* x, int64_t incx, T* y, int64_t incy) {     \
    WH_FITS(fits(n) && fits(incx) && fits(incy));                                                                   \
    return copy_swap<T>(h, kL1Swap, int(n), x, int(incx), y, int(incy));                                           \
  }                                                                                                                 \
  cublasStatus_t cublas##P##gemm_v2_64(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int64_t m,   \
                                       int64_t n, int64_t k, const T* alpha, const T* A, int64_t lda, const T* Bm,  \
                                       int64_t ldb, const T* beta, T* C, int64_t ldc) {                             \
    WH_FITS(fits(m) && fits(n) && fits(k) && fits(lda) && fits(ldb) && fits(ldc));                                  \
    L3 a{kL3Gemm};                                                                                                  \
    a.ta = ta, a.tb = tb, a.m = int(m), a.n = int(n), a.k = int(k), a.A = A, a.lda = int(lda), a.B = Bm,            \
    a.ldb = int(ldb), a.C = C, a.ldc = int(ldc);                                                                    \
    return l3<T>(h, a, alpha, beta);                                                                                \
  }                                                                                                                 \
  cublasStatus_t cublas##P##trsm_v2_64(cublasHandle_t h, cublasSideMode_t s, cublasFillMode_t u,                  \
                                       cublasOperation_t t, cublasDiagType_t d, int64_t m, int64_t n,               \
                                       const T* alpha, const T* A, int64_t lda, T* Bm, int64_t ldb) {               \
    WH_FITS(fits(m) && fits(n) && fits(lda) && fits(ldb));                                                          \
    return cublas##P##trsm_v2(h, s, u, t, d, int(m), int(n), alpha, A, int(lda), Bm, int(ldb));                     \
  }
WH_64_L1(D, double)
WH_64_L1(C, cuComplex)
WH_64_L1(Z, cuDoubleComplex)

cublasStatus_t cublasSgemm_v2_64(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n,
                                 int64_t k, const float* alpha, const float* A, int64_t lda, const float* Bm,
                                 int64_t ldb, const float* beta, float* C, int64_t ldc) {
  WH_FITS(fits(m) && fits(n) && fits(k) && fits(lda) && fits(ldb) && fits(ldc));
  return cublasSgemm_v2(h, ta, tb, int(m), int(n), int(k), alpha, A, int(lda), Bm, int(ldb), beta, C, int(ldc));
}
cublasStatus_t cublasSaxpy_v2_64(cublasHandle_t h, int64_t n, const float* alpha, const float* x, int64_t incx,
                                 float* y, int64_t incy) {
  WH_FITS(fits(n) && fits(incx) && fits(incy));
  return cublasSaxpy_v2(h, int(n), alpha, x, int(incx), y, int(incy));
}
cublasStatus_t cublasSscal_v2_64(cublasHandle_t h, int64_t n, const float* alpha, float* x, int64_t incx) {
  WH_FITS(fits(n) && fits(incx));
  return cublasSscal_v2(h, int(n), alpha, x, int(incx));
}
cublasStatus_t cublasStrsm_v2_64(cublasHandle_t h, cublasSideMode_t s, cublasFillMode_t u, cublasOperation_t t,
                                 cublasDiagType_t d, int64_t m, int64_t n, const float* alpha, const float* A,
                                 int64_t lda, float* Bm, int64_t ldb) {
  WH_FITS(fits(m) && fits(n) && fits(lda) && fits(ldb));
  return cublasStrsm_v2(h, s, u, t, d, int(m), int(n), alpha, A, int(lda), Bm, int(ldb));
}

#define WH_64_MORE(P, T)                                                                                            \
  cublasStatus_t cublas##P##gemv_v2_64(cublasHandle_t h, cublasOperation_t t, int64_t m, int64_t n, const T* alpha, \
                                       const T* A, int64_t lda, const T* x, int64_t incx, const T* beta, T* y,      \
                                       int64_t incy) {                                                              \
    WH_FITS(fits(m) && fits(n) && fits(lda) && fits(incx) && fits(incy));                                           \
    return cublas##P##gemv_v2(h, t, int(m), int(n), alpha, A, int(lda), x, int(incx), beta, y, int(incy));          \
  }                                                                                                                 \
  cublasStatus_t cublas##P##trsv_v2_64(cublasHandle_t h, cublasFillMode_t u, cublasOperation_t t,                 \
                                       cublasDiagType_t d, int64_t n, const T* A, int64_t lda, T* x, int64_t incx) {\
    WH_FITS(fits(n) && fits(lda) && fits(incx));                                                                    \
    return cublas##P##trsv_v2(h, u, t, d, int(n), A, int(lda), x, int(incx));                                       \
  }                                                                                                                 \
  cublasStatus_t cublas##P##gemmStridedBatched_64(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,   \
                                                  int64_t m, int64_t n, int64_t k, const T* alpha, const T* A,     \
                                                  int64_t lda, long long sa, const T* Bm, int64_t ldb,              \
                                                  long long sb, const T* beta, T* C, int64_t ldc, long long sc,     \
                                                  int64_t batch) {                                                  \
    WH_FITS(fits(m) && fits(n) && fits(k) && fits(lda) && fits(ldb) && fits(ldc) && fits(batch));                   \
    return cublas##P##gemmStridedBatched(h, ta, tb, int(m), int(n), int(k), alpha, A, int(lda), sa, Bm, int(ldb),   \
                                         sb, beta, C, int(ldc), sc, int(batch));                                    \
  }                                                                                                                 \
  cublasStatus_t cublas##P##gemmBatched_64(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,          \
                                           int64_t m, int64_t n, int64_t k, const T* alpha, const T* const A[],    \
                                           int64_t lda, const T* const Bm[], int64_t ldb, const T* beta,           \
                                           T* const C[], int64_t ldc, int64_t batch) {                              \
    WH_FITS(fits(m) && fits(n) && fits(k) && fits(lda) && fits(ldb) && fits(ldc) && fits(batch));                   \
    return cublas##P##gemmBatched(h, ta, tb, int(m), int(n), int(k), alpha, A, int(lda), Bm, int(ldb), beta, C,     \
                                  int(ldc), int(batch));                                                            \
  }                                                                                                                 \
  cublasStatus_t cublas##P##symm_v2_64(cublasHandle_t h, cublasSideMode_t s, cublasFillMode_t u, int64_t m,       \
                                       int64_t n, const T* alpha, const T* A, int64_t lda, const T* Bm,             \
                                       int64_t ldb, const T* beta, T* C, int64_t ldc) {                             \
    WH_FITS(fits(m) && fits(n) && fits(lda) && fits(ldb) && fits(ldc));                                             \
    return cublas##P##symm_v2(h, s, u, int(m), int(n), alpha, A, int(lda), Bm, int(ldb), beta, C, int(ldc));        \
  }                                                                                                                 \
  cublasStatus_t cublas##P##syrk_v2_64(cublasHandle_t h, cublasFillMode_t u, cublasOperation_t t, int64_t n,      \
                                       int64_t k, const T* alpha, const T* A, int64_t lda, const T* beta, T* C,     \
                                       int64_t ldc) {                                                               \
    WH_FITS(fits(n) && fits(k) && fits(lda) && fits(ldc));                                                          \
    return cublas##P##syrk_v2(h, u, t, int(n), int(k), alpha, A, int(lda), beta, C, int(ldc));                      \
  }                                                                                                                 \
  cublasStatus_t cublas##P##trmm_v2_64(cublasHandle_t h, cublasSideMode_t s, cublasFillMode_t u,                  \
                                       cublasOperation_t t, cublasDiagType_t d, int64_t m, int64_t n,               \
                                       const T* alpha, const T* A, int64_t lda, const T* Bm, int64_t ldb, T* C,     \
                                       int64_t ldc) {                                                               \
    WH_FITS(fits(m) && fits(n) && fits(lda) && fits(ldb) && fits(ldc));                                             \
    return cublas##P##trmm_v2(h, s, u, t, d, int(m), int(n), alpha, A, int(lda), Bm, int(ldb), C, int(ldc));        \
  }                                                                                                                 \
  cublasStatus_t cublas##P##geam_64(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int64_t m,      \
                                    int64_t n, const T* alpha, const T* A, int64_t lda, const T* beta, const T* Bm, \
                                    int64_t ldb, T* C, int64_t ldc) {                                               \
    WH_FITS(fits(m) && fits(n) && fits(lda) && fits(ldb) && fits(ldc));                                             \
    return cublas##P##geam(h, ta, tb, int(m), int(n), alpha, A, int(lda), beta, Bm, int(ldb), C, int(ldc));         \
  }                                                                                                                 \
  cublasStatus_t cublas##P##dgmm_64(cublasHandle_t h, cublasSideMode_t s, int64_t m, int64_t n, const T* A,       \
                                    int64_t lda, const T* x, int64_t incx, T* C, int64_t ldc) {                     \
    WH_FITS(fits(m) && fits(n) && fits(lda) && fits(incx) && fits(ldc));                                            \
    return cublas##P##dgmm(h, s, int(m), int(n), A, int(lda), x, int(incx), C, int(ldc));                          \
  }
WH_64_MORE(S, float)
WH_64_MORE(D, double)
WH_64_MORE(C, cuComplex)
WH_64_MORE(Z, cuDoubleComplex)

#define WH_64_RED(NP, T, RT)                                                                                        \
  cublasStatus_t cublas##NP##nrm2_v2_64(cublasHandle_t h, int64_t n, const T* x, int64_t incx, RT* result) {       \
    WH_FITS(fits(n) && fits(incx));                                                                                 \
    return cublas##NP##nrm2_v2(h, int(n), x, int(incx), result);                                                    \
  }                                                                                                                 \
  cublasStatus_t cublas##NP##asum_v2_64(cublasHandle_t h, int64_t n, const T* x, int64_t incx, RT* result) {       \
    WH_FITS(fits(n) && fits(incx));                                                                                 \
    return cublas##NP##asum_v2(h, int(n), x, int(incx), result);                                                    \
  }
WH_64_RED(S, float, float)
WH_64_RED(D, double, double)
WH_64_RED(Sc, cuComplex, float)
WH_64_RED(Dz, cuDoubleComplex, double)

#define WH_64_DOT(NAME, T)                                                                                          \
  cublasStatus_t NAME##_64(cublasHandle_t h, int64_t n, const T* x, int64_t incx, const T* y, int64_t incy,         \
                           T* result) {                                                                             \
    WH_FITS(fits(n) && fits(incx) && fits(incy));                                                                   \
    return NAME(h, int(n), x, int(incx), y, int(incy), result);                                                     \
  }
WH_64_DOT(cublasSdot_v2, float)
WH_64_DOT(cublasDdot_v2, double)
WH_64_DOT(cublasCdotu_v2, cuComplex)
WH_64_DOT(cublasCdotc_v2, cuComplex)
WH_64_DOT(cublasZdotu_v2, cuDoubleComplex)
WH_64_DOT(cublasZdotc_v2, cuDoubleComplex)

// Level-2 and the rest of level 3 and 1 in 64-bit form (NVIDIA's cuSOLVER
// calls these).
#define WH_64_L2(P, T)                                                                                              \
  cublasStatus_t cublas##P##trmv_v2_64(cublasHandle_t h, cublasFillMode_t u, cublasOperation_t t,                 \
                                       cublasDiagType_t d, int64_t n, const T* A, int64_t lda, T* x, int64_t incx) {\
    WH_FITS(fits(n) && fits(lda) && fits(incx));                                                                    \
    return cublas##P##trmv_v2(h, u, t, d, int(n), A, int(lda), x, int(incx));                                       \
  }                                                                                                                 \
  cublasStatus_t cublas##P##symv_v2_64(cublasHandle_t h, cublasFillMode_t u, int64_t n, const T* alpha,           \
                                       const T* A, int64_t lda, const T* x, int64_t incx, const T* beta, T* y,      \
                                       int64_t incy) {                                                              \
    WH_FITS(fits(n) && fits(lda) && fits(incx) && fits(incy));                                                      \
    return cublas##P##symv_v2(h, u, int(n), alpha, A, int(lda), x, int(incx), beta, y, int(incy));                  \
  }                                                                                                                 \
  cublasStatus_t cublas##P##syr2k_v2_64(cublasHandle_t h, cublasFillMode_t u, cublasOperation_t t, int64_t n,     \
                                        int64_t k, const T* alpha, const T* A, int64_t lda, const T* Bm,            \
                                        int64_t ldb, const T* beta, T* C, int64_t ldc) {                            \
    WH_FITS(fits(n) && fits(k) && fits(lda) && fits(ldb) && fits(ldc));                                             \
    return cublas##P##syr2k_v2(h, u, t, int(n), int(k), alpha, A, int(lda), Bm, int(ldb), beta, C, int(ldc));       \
  }
WH_64_L2(S, float)
WH_64_L2(D, double)
WH_64_L2(C, cuComplex)
WH_64_L2(Z, cuDoubleComplex)

#define WH_64_HERM(P, T, RT)                                                                                        \
  cublasStatus_t cublas##P##hemv_v2_64(cublasHandle_t h, cublasFillMode_t u, int64_t n, const T* alpha,           \
                                       const T* A, int64_t lda, const T* x, int64_t incx, const T* beta, T* y,      \
                                       int64_t incy) {                                                              \
    WH_FITS(fits(n) && fits(lda) && fits(incx) && fits(incy));                                                      \
    return cublas##P##hemv_v2(h, u, int(n), alpha, A, int(lda), x, int(incx), beta, y, int(incy));                  \
  }                                                                                                                 \
  cublasStatus_t cublas##P##hemm_v2_64(cublasHandle_t h, cublasSideMode_t s, cublasFillMode_t u, int64_t m,       \
                                       int64_t n, const T* alpha, const T* A, int64_t lda, const T* Bm,             \
                                       int64_t ldb, const T* beta, T* C, int64_t ldc) {                             \
    WH_FITS(fits(m) && fits(n) && fits(lda) && fits(ldb) && fits(ldc));                                             \
    return cublas##P##hemm_v2(h, s, u, int(m), int(n), alpha, A, int(lda), Bm, int(ldb), beta, C, int(ldc));        \
  }                                                                                                                 \
  cublasStatus_t cublas##P##her2k_v2_64(cublasHandle_t h, cublasFillMode_t u, cublasOperation_t t, int64_t n,     \
                                        int64_t k, const T* alpha, const T* A, int64_t lda, const T* Bm,            \
                                        int64_t ldb, const RT* beta, T* C, int64_t ldc) {                           \
    WH_FITS(fits(n) && fits(k) && fits(lda) && fits(ldb) && fits(ldc));                                             \
    return cublas##P##her2k_v2(h, u, t, int(n), int(k), alpha, A, int(lda), Bm, int(ldb), beta, C, int(ldc));       \
  }
WH_64_HERM(C, cuComplex, float)
WH_64_HERM(Z, cuDoubleComplex, double)

#define WH_64_GER(NAME, T)                                                                                          \
  cublasStatus_t NAME##_64(cublasHandle_t h, int64_t m, int64_t n, const T* alpha, const T* x, int64_t incx,        \
                           const T* y, int64_t incy, T* A, int64_t lda) {                                           \
    WH_FITS(fits(m) && fits(n) && fits(incx) && fits(incy) && fits(lda));                                           \
    return NAME(h, int(m), int(n), alpha, x, int(incx), y, int(incy), A, int(lda));                                 \
  }
WH_64_GER(cublasSger_v2, float)
WH_64_GER(cublasDger_v2, double)
WH_64_GER(cublasCgeru_v2, cuComplex)
WH_64_GER(cublasCgerc_v2, cuComplex)
WH_64_GER(cublasZgeru_v2, cuDoubleComplex)
WH_64_GER(cublasZgerc_v2, cuDoubleComplex)

#define WH_64_ROT(NAME, T, C, S)                                                                                    \
  cublasStatus_t NAME##_64(cublasHandle_t h, int64_t n, T* x, int64_t incx, T* y, int64_t incy, const C* c,         \
                           const S* s) {                                                                            \
    WH_FITS(fits(n) && fits(incx) && fits(incy));                                                                   \
    return NAME(h, int(n), x, int(incx), y, int(incy), c, s);                                                       \
  }
WH_64_ROT(cublasSrot_v2, float, float, float)
WH_64_ROT(cublasDrot_v2, double, double, double)
WH_64_ROT(cublasCrot_v2, cuComplex, float, cuComplex)
WH_64_ROT(cublasZrot_v2, cuDoubleComplex, double, cuDoubleComplex)
WH_64_ROT(cublasCsrot_v2, cuComplex, float, float)
WH_64_ROT(cublasZdrot_v2, cuDoubleComplex, double, double)

cublasStatus_t cublasCsscal_v2_64(cublasHandle_t h, int64_t n, const float* alpha, cuComplex* x, int64_t incx) {
  WH_FITS(fits(n) && fits(incx));
  return cublasCsscal_v2(h, int(n), alpha, x, int(incx));
}
cublasStatus_t cublasZdscal_v2_64(cublasHandle_t h, int64_t n, const double* alpha, cuDoubleComplex* x,
                                  int64_t incx) {
  WH_FITS(fits(n) && fits(incx));
  return cublasZdscal_v2(h, int(n), alpha, x, int(incx));
}
cublasStatus_t cublasScopy_v2_64(cublasHandle_t h, int64_t n, const float* x, int64_t incx, float* y, int64_t incy) {
  WH_FITS(fits(n) && fits(incx) && fits(incy));
  return cublasScopy_v2(h, int(n), x, int(incx), y, int(incy));
}
cublasStatus_t cublasSswap_v2_64(cublasHandle_t h, int64_t n, float* x, int64_t incx, float* y, int64_t incy) {
  WH_FITS(fits(n) && fits(incx) && fits(incy));
  return cublasSswap_v2(h, int(n), x, int(incx), y, int(incy));
}

}  // extern "C"
