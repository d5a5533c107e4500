// libcublas.so.13 drop-in: the cuBLAS v2 API forwarded to wormhole-server.
//
// Like real cuBLAS, arguments are checked here first and bad ones refused
// synchronously with CUBLAS_STATUS_INVALID_VALUE (the server checks them
// again: the guest is not trusted). Compute calls are posted (they return at
// once; a device fault surfaces at the next synchronising CUDA call, as on a
// GPU). Scalars follow the handle's pointer mode: host values travel in the
// request, device scalars as device addresses; reductions in host pointer
// mode wait for their result, in device pointer mode they are posted.
// cublasSet/GetMatrix/Vector are copies through Wormhole's libcudart.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstring>
#include <mutex>
#include <set>
#include <string>

#include "forward.hpp"

using namespace wh::proto;
namespace B = wh::guest::blas;

namespace wh::guest::blas {
void log_once(const char* what) {
  static std::mutex mu;
  static std::set<std::string> seen;
  std::lock_guard lk(mu);
  if (seen.insert(what).second) std::fprintf(stderr, "wormhole: %s\n", what);
}
}  // namespace wh::guest::blas

namespace {

uint32_t flags_of(cublasHandle_t h) {
  return (h->pmode == CUBLAS_POINTER_MODE_DEVICE ? kBlasDeviceScalars : 0u) | (uint32_t(h->math) & 0xFF) << 8;
}
uint64_t sh(cublasHandle_t h) { return reinterpret_cast<uint64_t>(h->stream); }
// A scalar argument: its bits (host mode) or its device address.
uint64_t fscalar(cublasHandle_t h, const float* p) {
  if (h->pmode == CUBLAS_POINTER_MODE_DEVICE) return reinterpret_cast<uint64_t>(p);
  uint32_t b;
  std::memcpy(&b, p, 4);
  return b;
}
uint64_t dscalar(cublasHandle_t h, const double* p) {
  if (h->pmode == CUBLAS_POINTER_MODE_DEVICE) return reinterpret_cast<uint64_t>(p);
  uint64_t b;
  std::memcpy(&b, p, 8);
  return b;
}
uint64_t dev(const void* p) { return reinterpret_cast<uint64_t>(p); }
bool op_ok(cublasOperation_t t) { return t == CUBLAS_OP_N || t == CUBLAS_OP_T || t == CUBLAS_OP_C; }
int max1(int v) { return v > 1 ? v : 1; }

bool gemm_args_ok(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, int lda, int ldb, int ldc) {
  if (!op_ok(ta) || !op_ok(tb) || m < 0 || n < 0 || k < 0) return false;
  return lda >= max1(ta == CUBLAS_OP_N ? m : k) && ldb >= max1(tb == CUBLAS_OP_N ? k : n) && ldc >= max1(m);
}

#define WH_HANDLE(h) \
  if (!(h)) return CUBLAS_STATUS_NOT_INITIALIZED

// The fields every gemm request shares: handle, stream, scalars (by value
// or device address, as the pointer mode says), shape, transposes, type.
template <class T, class Req>
void fill_gemm(Req& rq, cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
               const T* alpha, const T* beta, int lda, int ldb, int ldc) {
  constexpr bool d = sizeof(T) == 8;
  rq.handle = h->server;
  rq.stream = sh(h);
  if constexpr (d) {
    rq.alpha = dscalar(h, alpha);
    rq.beta = dscalar(h, beta);
  } else {
    rq.alpha = fscalar(h, alpha);
    rq.beta = fscalar(h, beta);
  }
  rq.lda = lda, rq.ldb = ldb, rq.ldc = ldc;
  rq.m = m, rq.n = n, rq.k = k;
  rq.transa = ta, rq.transb = tb;
  rq.dtype = d ? kBlasF64 : kBlasF32;
  rq.flags = flags_of(h);
}

template <class T>
cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                    const T* alpha, const T* A, int lda, const T* B, int ldb, const T* beta, T* C, int ldc) {
  WH_HANDLE(h);
  if (!gemm_args_ok(ta, tb, m, n, k, lda, ldb, ldc)) return CUBLAS_STATUS_INVALID_VALUE;
  if (!alpha || !beta) return CUBLAS_STATUS_INVALID_VALUE;
  BlasGemmReq rq{};
  fill_gemm(rq, h, ta, tb, m, n, k, alpha, beta, lda, ldb, ldc);
  rq.A = dev(A), rq.B = dev(B), rq.C = dev(C);
  return B::status(B::post<Op::BlasGemm>(rq));
}

template <class T>
cublasStatus_t gemm_strided(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const T* alpha, const T* A, int lda, long long sA, const T* Bm, int ldb, long long sB,
                            const T* beta, T* C, int ldc, long long sC, int batch) {
  WH_HANDLE(h);
  if (!gemm_args_ok(ta, tb, m, n, k, lda, ldb, ldc) || batch < 0 || !alpha || !beta) return CUBLAS_STATUS_INVALID_VALUE;
  if (sA < 0 || sB < 0 || sC < 0) return CUBLAS_STATUS_INVALID_VALUE;
  BlasGemmStridedBatchedReq rq{};
  fill_gemm(rq, h, ta, tb, m, n, k, alpha, beta, lda, ldb, ldc);
  rq.A = dev(A), rq.B = dev(Bm), rq.C = dev(C);
  rq.strideA = sA, rq.strideB = sB, rq.strideC = sC;
  rq.batch = batch;
  return B::status(B::post<Op::BlasGemmStridedBatched>(rq));
}

template <class T>
cublasStatus_t gemm_batched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const T* alpha, const void* Aarray, int lda, const void* Barray, int ldb, const T* beta,
                            const void* Carray, int ldc, int batch) {
  WH_HANDLE(h);
  if (!gemm_args_ok(ta, tb, m, n, k, lda, ldb, ldc) || batch < 0 || !alpha || !beta) return CUBLAS_STATUS_INVALID_VALUE;
  BlasGemmBatchedReq rq{};
  fill_gemm(rq, h, ta, tb, m, n, k, alpha, beta, lda, ldb, ldc);
  rq.Aarray = dev(Aarray), rq.Barray = dev(Barray), rq.Carray = dev(Carray);
  rq.batch = batch;
  return B::status(B::post<Op::BlasGemmBatched>(rq));
}

// Host pointer mode: wait for the value; device mode: post.
template <Op O, class R, class Req>
cublasStatus_t reduce(cublasHandle_t h, Req& rq, R* result) {
  if (h->pmode == CUBLAS_POINTER_MODE_DEVICE) {
    rq.result = dev(result);
    return B::status(B::post<O>(rq));
  }
  typename OpTraits<O>::Response rs{};
  cudaError_t e = B::call<O>(rq, &rs);
  if (e == cudaSuccess) *result = rs.value;
  return B::status(e);
}

// cublasSet/GetMatrix as copies: one cudaMemcpy when both sides are dense,
// else a 2D copy (columns are rows of the 2D copy).
cublasStatus_t matrix_copy(int rows, int cols, int es, const void* src, int lds, void* dst, int ldd,
                           cudaMemcpyKind kind, cudaStream_t s, bool async) {
  if (rows < 0 || cols < 0 || es <= 0 || lds < max1(rows) || ldd < max1(rows)) return CUBLAS_STATUS_INVALID_VALUE;
  if (rows == 0 || cols == 0) return CUBLAS_STATUS_SUCCESS;
  if (!src || !dst) return CUBLAS_STATUS_INVALID_VALUE;
  cudaError_t e;
  const size_t w = size_t(rows) * size_t(es);
  if (lds == rows && ldd == rows) {
    e = async ? cudaMemcpyAsync(dst, src, w * size_t(cols), kind, s) : cudaMemcpy(dst, src, w * size_t(cols), kind);
  } else {
    e = async ? cudaMemcpy2DAsync(dst, size_t(ldd) * es, src, size_t(lds) * es, w, size_t(cols), kind, s)
              : cudaMemcpy2D(dst, size_t(ldd) * es, src, size_t(lds) * es, w, size_t(cols), kind);
  }
  return e == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_MAPPING_ERROR;
}

cublasStatus_t vector_copy(int n, int es, const void* src, int incs, void* dst, int incd, cudaMemcpyKind kind,
                           cudaStream_t s, bool async) {
  if (n < 0 || es <= 0 || incs <= 0 || incd <= 0) return CUBLAS_STATUS_INVALID_VALUE;
  if (n == 0) return CUBLAS_STATUS_SUCCESS;
  if (!src || !dst) return CUBLAS_STATUS_INVALID_VALUE;
  cudaError_t e;
  if (incs == 1 && incd == 1)
    e = async ? cudaMemcpyAsync(dst, src, size_t(n) * es, kind, s) : cudaMemcpy(dst, src, size_t(n) * es, kind);
  else
    e = async ? cudaMemcpy2DAsync(dst, size_t(incd) * es, src, size_t(incs) * es, size_t(es), size_t(n), kind, s)
              : cudaMemcpy2D(dst, size_t(incd) * es, src, size_t(incs) * es, size_t(es), size_t(n), kind);
  return e == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_MAPPING_ERROR;
}

}  // namespace

extern "C" {

void wh_cublas_unsupported(const char* name) {
  std::string m = std::string(name) + " is not forwarded by Wormhole: returning CUBLAS_STATUS_NOT_SUPPORTED";
  B::log_once(m.c_str());
}

// ------------------------------------------------------------ handles, modes

cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
  if (!handle) return CUBLAS_STATUS_INVALID_VALUE;
  if (!B::connected()) return CUBLAS_STATUS_NOT_INITIALIZED;
  BlasCreateResp rs{};
  cudaError_t e = B::call<Op::BlasCreate>({}, &rs);
  if (e != cudaSuccess) return e == cudaErrorMemoryAllocation ? CUBLAS_STATUS_ALLOC_FAILED : CUBLAS_STATUS_NOT_INITIALIZED;
  auto* h = new cublasContext();
  h->server = rs.handle;
  if (rs.version > 0) h->version = rs.version;
  // Its cuBLASLt handle; none when the server has no cuBLASLt (the cast
  // handle is then refused by cuBLASLt, as one never created).
  LtCreateResp lt{};
  if (B::call<Op::LtCreate>({}, &lt) == cudaSuccess) {
    h->lt.server = lt.handle;
    h->lt.magic = kLtHandleMagic;
  }
  *handle = h;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t h) {
  WH_HANDLE(h);
  cudaError_t e = B::call<Op::BlasDestroy>({h->server}, nullptr);
  if (h->lt.server) B::call<Op::LtDestroy>({h->lt.server}, nullptr);
  h->lt.magic = 0;
  delete h;
  return e == cudaSuccess ? CUBLAS_STATUS_SUCCESS : B::status(e);
}

cublasStatus_t cublasGetVersion_v2(cublasHandle_t h, int* version) {
  WH_HANDLE(h);
  if (!version) return CUBLAS_STATUS_INVALID_VALUE;
  *version = h->version;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetProperty(libraryPropertyType type, int* value) {
  if (!value) return CUBLAS_STATUS_INVALID_VALUE;
  switch (type) {
    case MAJOR_VERSION: *value = CUBLAS_VER_MAJOR; break;
    case MINOR_VERSION: *value = CUBLAS_VER_MINOR; break;
    case PATCH_LEVEL: *value = CUBLAS_VER_PATCH; break;
    default: return CUBLAS_STATUS_INVALID_VALUE;
  }
  return CUBLAS_STATUS_SUCCESS;
}

size_t cublasGetCudartVersion(void) { return CUDART_VERSION; }

const char* cublasGetStatusName(cublasStatus_t s) { return wh::guest::blas::status_name(s); }

const char* cublasGetStatusString(cublasStatus_t s) { return wh::guest::blas::status_string(s); }

cublasStatus_t cublasSetStream_v2(cublasHandle_t h, cudaStream_t s) {
  WH_HANDLE(h);
  h->stream = s;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasGetStream_v2(cublasHandle_t h, cudaStream_t* s) {
  WH_HANDLE(h);
  if (!s) return CUBLAS_STATUS_INVALID_VALUE;
  *s = h->stream;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t h, cublasPointerMode_t m) {
  WH_HANDLE(h);
  if (m != CUBLAS_POINTER_MODE_HOST && m != CUBLAS_POINTER_MODE_DEVICE) return CUBLAS_STATUS_INVALID_VALUE;
  h->pmode = m;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasGetPointerMode_v2(cublasHandle_t h, cublasPointerMode_t* m) {
  WH_HANDLE(h);
  if (!m) return CUBLAS_STATUS_INVALID_VALUE;
  *m = h->pmode;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t m) {
  WH_HANDLE(h);
  if ((unsigned(m) & ~16u) > 3u) return CUBLAS_STATUS_INVALID_VALUE;
  h->math = m;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasGetMathMode(cublasHandle_t h, cublasMath_t* m) {
  WH_HANDLE(h);
  if (!m) return CUBLAS_STATUS_INVALID_VALUE;
  *m = h->math;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetAtomicsMode(cublasHandle_t h, cublasAtomicsMode_t m) {
  WH_HANDLE(h);
  h->atomics = m;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasGetAtomicsMode(cublasHandle_t h, cublasAtomicsMode_t* m) {
  WH_HANDLE(h);
  if (!m) return CUBLAS_STATUS_INVALID_VALUE;
  *m = h->atomics;
  return CUBLAS_STATUS_SUCCESS;
}
// Not in cuBLAS's headers; exported, and called by cuSOLVER on the handle it
// creates (cusolverDnCreate fails without it). NVIDIA's library takes 0 or 1
// and keeps it in the handle; so does this one. The server's cuBLAS (or
// OpenBLAS on the sim device) has no use for it.
extern "C" cublasStatus_t cublasSetEnvironmentMode(cublasHandle_t h, int mode) {
  WH_HANDLE(h);
  if (mode < 0 || mode > 1) return CUBLAS_STATUS_INVALID_VALUE;
  h->environment_mode = mode;
  return CUBLAS_STATUS_SUCCESS;
}
extern "C" cublasStatus_t cublasGetEnvironmentMode(cublasHandle_t h, int* mode) {
  WH_HANDLE(h);
  if (!mode) return CUBLAS_STATUS_INVALID_VALUE;
  *mode = h->environment_mode;
  return CUBLAS_STATUS_SUCCESS;
}
// cuBLAS falls back to its own workspace pool: accepting the user's buffer
// and not using it is within the API's contract.
cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t h, void*, size_t) {
  WH_HANDLE(h);
  return CUBLAS_STATUS_SUCCESS;
}

// ------------------------------------------------------------ level 3

cublasStatus_t cublasSgemm_v2(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                              const float* alpha, const float* A, int lda, const float* Bm, int ldb, const float* beta,
                              float* C, int ldc) {
  return gemm<float>(h, ta, tb, m, n, k, alpha, A, lda, Bm, ldb, beta, C, ldc);
}
cublasStatus_t cublasDgemm_v2(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                              const double* alpha, const double* A, int lda, const double* Bm, int ldb,
                              const double* beta, double* C, int ldc) {
  return gemm<double>(h, ta, tb, m, n, k, alpha, A, lda, Bm, ldb, beta, C, ldc);
}
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                         int k, const float* alpha, const float* A, int lda, long long sA,
                                         const float* Bm, int ldb, long long sB, const float* beta, float* C, int ldc,
                                         long long sC, int batch) {
  return gemm_strided<float>(h, ta, tb, m, n, k, alpha, A, lda, sA, Bm, ldb, sB, beta, C, ldc, sC, batch);
}
cublasStatus_t cublasDgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                         int k, const double* alpha, const double* A, int lda, long long sA,
                                         const double* Bm, int ldb, long long sB, const double* beta, double* C,
                                         int ldc, long long sC, int batch) {
  return gemm_strided<double>(h, ta, tb, m, n, k, alpha, A, lda, sA, Bm, ldb, sB, beta, C, ldc, sC, batch);
}
cublasStatus_t cublasSgemmBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                  const float* alpha, const float* const Aarray[], int lda, const float* const Barray[],
                                  int ldb, const float* beta, float* const Carray[], int ldc, int batch) {
  return gemm_batched<float>(h, ta, tb, m, n, k, alpha, Aarray, lda, Barray, ldb, beta, Carray, ldc, batch);
}
cublasStatus_t cublasDgemmBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                  const double* alpha, const double* const Aarray[], int lda,
                                  const double* const Barray[], int ldb, const double* beta, double* const Carray[],
                                  int ldc, int batch) {
  return gemm_batched<double>(h, ta, tb, m, n, k, alpha, Aarray, lda, Barray, ldb, beta, Carray, ldc, batch);
}

cublasStatus_t cublasSgeam(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                           const float* alpha, const float* A, int lda, const float* beta, const float* Bm, int ldb,
                           float* C, int ldc) {
  WH_HANDLE(h);
  // A null beta (host pointer mode) reads no B, as a zero one (see l3's geam).
  if (!op_ok(ta) || !op_ok(tb) || m < 0 || n < 0 || !alpha || (!beta && h->pmode != CUBLAS_POINTER_MODE_HOST))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (lda < max1(ta == CUBLAS_OP_N ? m : n) || ldb < max1(tb == CUBLAS_OP_N ? m : n) || ldc < max1(m))
    return CUBLAS_STATUS_INVALID_VALUE;
  BlasGeamReq rq{};
  rq.handle = h->server;
  rq.stream = sh(h);
  rq.alpha = fscalar(h, alpha);
  rq.beta = beta ? fscalar(h, beta) : 0;
  rq.A = dev(A), rq.B = dev(Bm), rq.C = dev(C);
  rq.lda = lda, rq.ldb = ldb, rq.ldc = ldc;
  rq.m = m, rq.n = n;
  rq.transa = ta, rq.transb = tb;
  rq.flags = flags_of(h);
  return B::status(B::post<Op::BlasGeam>(rq));
}

// ------------------------------------------------------------ level 2

cublasStatus_t cublasSgemv_v2(cublasHandle_t h, cublasOperation_t t, int m, int n, const float* alpha, const float* A,
                              int lda, const float* x, int incx, const float* beta, float* y, int incy) {
  WH_HANDLE(h);
  if (!op_ok(t) || m < 0 || n < 0 || lda < max1(m) || incx == 0 || incy == 0 || !alpha || !beta)
    return CUBLAS_STATUS_INVALID_VALUE;
  BlasGemvReq rq{};
  rq.handle = h->server;
  rq.stream = sh(h);
  rq.alpha = fscalar(h, alpha);
  rq.beta = fscalar(h, beta);
  rq.A = dev(A), rq.x = dev(x), rq.y = dev(y);
  rq.lda = lda;
  rq.m = m, rq.n = n, rq.incx = incx, rq.incy = incy;
  rq.trans = t;
  rq.flags = flags_of(h);
  return B::status(B::post<Op::BlasGemv>(rq));
}

// ------------------------------------------------------------ level 1

cublasStatus_t cublasSaxpy_v2(cublasHandle_t h, int n, const float* alpha, const float* x, int incx, float* y,
                              int incy) {
  WH_HANDLE(h);
  if (!alpha) return CUBLAS_STATUS_INVALID_VALUE;
  if (n <= 0) return CUBLAS_STATUS_SUCCESS;
  BlasAxpyReq rq{h->server, sh(h), fscalar(h, alpha), dev(x), dev(y), n, incx, incy, flags_of(h)};
  return B::status(B::post<Op::BlasAxpy>(rq));
}

cublasStatus_t cublasSscal_v2(cublasHandle_t h, int n, const float* alpha, float* x, int incx) {
  WH_HANDLE(h);
  if (!alpha) return CUBLAS_STATUS_INVALID_VALUE;
  if (n <= 0 || incx <= 0) return CUBLAS_STATUS_SUCCESS;
  BlasScalReq rq{h->server, sh(h), fscalar(h, alpha), dev(x), n, incx, flags_of(h), 0};
  return B::status(B::post<Op::BlasScal>(rq));
}

cublasStatus_t cublasScopy_v2(cublasHandle_t h, int n, const float* x, int incx, float* y, int incy) {
  WH_HANDLE(h);
  if (n <= 0) return CUBLAS_STATUS_SUCCESS;
  BlasCopyReq rq{h->server, sh(h), dev(x), dev(y), n, incx, incy, flags_of(h)};
  return B::status(B::post<Op::BlasCopy>(rq));
}

cublasStatus_t cublasSdot_v2(cublasHandle_t h, int n, const float* x, int incx, const float* y, int incy,
                             float* result) {
  WH_HANDLE(h);
  if (!result) return CUBLAS_STATUS_INVALID_VALUE;
  BlasDotReq rq{h->server, sh(h), dev(x), dev(y), 0, n, incx, incy, flags_of(h)};
  return reduce<Op::BlasDot>(h, rq, result);
}

cublasStatus_t cublasSnrm2_v2(cublasHandle_t h, int n, const float* x, int incx, float* result) {
  WH_HANDLE(h);
  if (!result) return CUBLAS_STATUS_INVALID_VALUE;
  BlasNrm2Req rq{h->server, sh(h), dev(x), 0, n, incx, flags_of(h), 0};
  return reduce<Op::BlasNrm2>(h, rq, result);
}

cublasStatus_t cublasSasum_v2(cublasHandle_t h, int n, const float* x, int incx, float* result) {
  WH_HANDLE(h);
  if (!result) return CUBLAS_STATUS_INVALID_VALUE;
  BlasAsumReq rq{h->server, sh(h), dev(x), 0, n, incx, flags_of(h), 0};
  return reduce<Op::BlasAsum>(h, rq, result);
}

cublasStatus_t cublasIsamax_v2(cublasHandle_t h, int n, const float* x, int incx, int* result) {
  WH_HANDLE(h);
  if (!result) return CUBLAS_STATUS_INVALID_VALUE;
  BlasIamaxReq rq{h->server, sh(h), dev(x), 0, n, incx, flags_of(h), 0};
  return reduce<Op::BlasIamax>(h, rq, result);
}

// ------------------------------------------------------------ data movement

cublasStatus_t cublasSetMatrix(int rows, int cols, int es, const void* A, int lda, void* Bm, int ldb) {
  return matrix_copy(rows, cols, es, A, lda, Bm, ldb, cudaMemcpyHostToDevice, nullptr, false);
}
cublasStatus_t cublasGetMatrix(int rows, int cols, int es, const void* A, int lda, void* Bm, int ldb) {
  return matrix_copy(rows, cols, es, A, lda, Bm, ldb, cudaMemcpyDeviceToHost, nullptr, false);
}
cublasStatus_t cublasSetMatrixAsync(int rows, int cols, int es, const void* A, int lda, void* Bm, int ldb,
                                    cudaStream_t s) {
  return matrix_copy(rows, cols, es, A, lda, Bm, ldb, cudaMemcpyHostToDevice, s, true);
}
cublasStatus_t cublasGetMatrixAsync(int rows, int cols, int es, const void* A, int lda, void* Bm, int ldb,
                                    cudaStream_t s) {
  return matrix_copy(rows, cols, es, A, lda, Bm, ldb, cudaMemcpyDeviceToHost, s, true);
}
cublasStatus_t cublasSetVector(int n, int es, const void* x, int incx, void* y, int incy) {
  return vector_copy(n, es, x, incx, y, incy, cudaMemcpyHostToDevice, nullptr, false);
}
cublasStatus_t cublasGetVector(int n, int es, const void* x, int incx, void* y, int incy) {
  return vector_copy(n, es, x, incx, y, incy, cudaMemcpyDeviceToHost, nullptr, false);
}
cublasStatus_t cublasSetVectorAsync(int n, int es, const void* x, int incx, void* y, int incy, cudaStream_t s) {
  return vector_copy(n, es, x, incx, y, incy, cudaMemcpyHostToDevice, s, true);
}
cublasStatus_t cublasGetVectorAsync(int n, int es, const void* x, int incx, void* y, int incy, cudaStream_t s) {
  return vector_copy(n, es, x, incx, y, incy, cudaMemcpyDeviceToHost, s, true);
}

}  // extern "C"
