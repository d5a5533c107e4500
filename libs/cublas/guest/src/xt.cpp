// libcublas.so.13 drop-in: cuBLASXt (cublasXt.h) in the guest, over the
// forwarded cuBLAS. cuBLASXt takes matrices in host or device memory and
// blocks until the result is back; here each host operand is copied to a
// device buffer (cudaMemcpy2D through Wormhole's libcudart), the level 3
// routine runs once on the whole matrices on the server's device, and the
// output is copied back. Operands already in device memory are used in
// place. One device: cublasXtDeviceSelect accepts one device (the
// session's); the tiling block size is kept but the server runs each call
// whole. The CPU share (cublasXtSetCpuRatio) can only be 0.
#include <cublasXt.h>
#include <cuda_runtime_api.h>

#include <climits>
#include <initializer_list>

#include "forward.hpp"

struct cublasXtContext {
  cublasHandle_t h = nullptr;
  int block_dim = 1024;
  cublasXtPinnedMemMode_t pinning = CUBLASXT_PINNING_DISABLED;
};

namespace {

bool fits(size_t v) { return v <= size_t(INT_MAX); }
size_t max1(size_t v) { return v > 1 ? v : 1; }

bool on_device(const void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

// One matrix operand: where it is, its stored shape, whether the routine
// reads and/or writes it; dp/dld what the device routine gets.
struct Mat {
  const void* p;
  size_t rows, cols, ld;
  bool in, out;
  void* dp = nullptr;
  int dld = 1;
  bool owned = false;
};

// Stages the operands, runs `call`, copies the outputs back, waits.
template <class F>
cublasStatus_t run(cublasXtHandle_t x, size_t es, std::initializer_list<Mat*> mats, F call) {
  if (!x || !x->h) return CUBLAS_STATUS_NOT_INITIALIZED;
  cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
  for (Mat* m : mats) {
    if (!fits(m->rows) || !fits(m->cols) || !fits(m->ld)) return CUBLAS_STATUS_NOT_SUPPORTED;
    if (m->ld < max1(m->rows)) return CUBLAS_STATUS_INVALID_VALUE;
  }
  for (Mat* m : mats) {
    if (m->rows == 0 || m->cols == 0) {
      m->dp = const_cast<void*>(m->p), m->dld = int(max1(m->ld));
      continue;
    }
    if (!m->p) {
      st = CUBLAS_STATUS_INVALID_VALUE;
      break;
    }
    if (on_device(m->p)) {
      m->dp = const_cast<void*>(m->p), m->dld = int(m->ld);
      continue;
    }
    if (cudaMalloc(&m->dp, m->rows * m->cols * es) != cudaSuccess) {
      st = CUBLAS_STATUS_ALLOC_FAILED;
      break;
    }
    m->owned = true, m->dld = int(m->rows);
    if (m->in && cudaMemcpy2D(m->dp, m->rows * es, m->p, m->ld * es, m->rows * es, m->cols,
                              cudaMemcpyHostToDevice) != cudaSuccess) {
      st = CUBLAS_STATUS_MAPPING_ERROR;
      break;
    }
  }
  if (st == CUBLAS_STATUS_SUCCESS) st = call();
  for (Mat* m : mats) {
    if (st == CUBLAS_STATUS_SUCCESS && m->owned && m->out &&
        cudaMemcpy2D(const_cast<void*>(m->p), m->ld * es, m->dp, m->rows * es, m->rows * es, m->cols,
                     cudaMemcpyDeviceToHost) != cudaSuccess)
      st = CUBLAS_STATUS_EXECUTION_FAILED;
  }
  if (st == CUBLAS_STATUS_SUCCESS && cudaStreamSynchronize(nullptr) != cudaSuccess) st = CUBLAS_STATUS_EXECUTION_FAILED;
  for (Mat* m : mats)
    if (m->owned) cudaFree(m->dp);
  return st;
}

}  // namespace

extern "C" {

cublasStatus_t cublasXtCreate(cublasXtHandle_t* handle) {
  if (!handle) return CUBLAS_STATUS_INVALID_VALUE;
  auto* x = new cublasXtContext();
  if (cublasStatus_t s = cublasCreate_v2(&x->h); s != CUBLAS_STATUS_SUCCESS) {
    delete x;
    return s;
  }
  *handle = x;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasXtDestroy(cublasXtHandle_t x) {
  if (!x) return CUBLAS_STATUS_NOT_INITIALIZED;
  cublasStatus_t s = x->h ? cublasDestroy_v2(x->h) : CUBLAS_STATUS_SUCCESS;
  delete x;
  return s;
}
cublasStatus_t cublasXtDeviceSelect(cublasXtHandle_t x, int nb, int ids[]) {
  if (!x) return CUBLAS_STATUS_NOT_INITIALIZED;
  int count = 0;
  if (nb < 1 || !ids || cudaGetDeviceCount(&count) != cudaSuccess) return CUBLAS_STATUS_INVALID_VALUE;
  if (nb > 1) {
    wh::guest::blas::log_once("cublasXtDeviceSelect: Wormhole's cuBLASXt runs on one device; returning NOT_SUPPORTED");
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (ids[0] < 0 || ids[0] >= count) return CUBLAS_STATUS_INVALID_VALUE;
  return cudaSetDevice(ids[0]) == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}
cublasStatus_t cublasXtSetBlockDim(cublasXtHandle_t x, int bd) {
  if (!x) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (bd <= 0) return CUBLAS_STATUS_INVALID_VALUE;
  x->block_dim = bd;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasXtGetBlockDim(cublasXtHandle_t x, int* bd) {
  if (!x) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!bd) return CUBLAS_STATUS_INVALID_VALUE;
  *bd = x->block_dim;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasXtSetPinningMemMode(cublasXtHandle_t x, cublasXtPinnedMemMode_t m) {
  if (!x) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (m != CUBLASXT_PINNING_DISABLED && m != CUBLASXT_PINNING_ENABLED) return CUBLAS_STATUS_INVALID_VALUE;
  x->pinning = m;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasXtGetPinningMemMode(cublasXtHandle_t x, cublasXtPinnedMemMode_t* m) {
  if (!x) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!m) return CUBLAS_STATUS_INVALID_VALUE;
  *m = x->pinning;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasXtSetCpuRatio(cublasXtHandle_t x, cublasXtBlasOp_t op, cublasXtOpType_t, float ratio) {
  if (!x) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (op < 0 || op >= CUBLASXT_ROUTINE_MAX || ratio < 0.f || ratio > 1.f) return CUBLAS_STATUS_INVALID_VALUE;
  return ratio == 0.f ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_SUPPORTED;
}

#define WH_XT(P, T, RT)                                                                                              \
  cublasStatus_t cublasXt##P##gemm(cublasXtHandle_t x, cublasOperation_t ta, cublasOperation_t tb, size_t m,       \
                                   size_t n, size_t k, const T* alpha, const T* A, size_t lda, const T* Bm,        \
                                   size_t ldb, const T* beta, T* C, size_t ldc) {                                  \
    const bool an = ta == CUBLAS_OP_N, bn = tb == CUBLAS_OP_N;                                                      \
    Mat a{A, an ? m : k, an ? k : m, lda, true, false}, b{Bm, bn ? k : n, bn ? n : k, ldb, true, false},            \
        c{C, m, n, ldc, true, true};                                                                                \
    if (!fits(m) || !fits(n) || !fits(k)) return CUBLAS_STATUS_NOT_SUPPORTED;                                       \
    return run(x, sizeof(T), {&a, &b, &c}, [&] {                                                                    \
      return cublas##P##gemm_v2(x->h, ta, tb, int(m), int(n), int(k), alpha, (const T*)a.dp, a.dld,                 \
                                (const T*)b.dp, b.dld, beta, (T*)c.dp, c.dld);                                      \
    });                                                                                                             \
  }                                                                                                                 \
  cublasStatus_t cublasXt##P##symm(cublasXtHandle_t x, cublasSideMode_t s, cublasFillMode_t u, size_t m, size_t n, \
                                   const T* alpha, const T* A, size_t lda, const T* Bm, size_t ldb, const T* beta, \
                                   T* C, size_t ldc) {                                                              \
    const size_t ka = s == CUBLAS_SIDE_LEFT ? m : n;                                                                \
    Mat a{A, ka, ka, lda, true, false}, b{Bm, m, n, ldb, true, false}, c{C, m, n, ldc, true, true};                 \
    return run(x, sizeof(T), {&a, &b, &c}, [&] {                                                                    \
      return cublas##P##symm_v2(x->h, s, u, int(m), int(n), alpha, (const T*)a.dp, a.dld, (const T*)b.dp, b.dld,    \
                                beta, (T*)c.dp, c.dld);                                                             \
    });                                                                                                             \
  }                                                                                                                 \
  cublasStatus_t cublasXt##P##syrk(cublasXtHandle_t x, cublasFillMode_t u, cublasOperation_t t, size_t n,         \
                                   size_t k, const T* alpha, const T* A, size_t lda, const T* beta, T* C,          \
                                   size_t ldc) {                                                                    \
    const bool an = t == CUBLAS_OP_N;                                                                               \
    Mat a{A, an ? n : k, an ? k : n, lda, true, false}, c{C, n, n, ldc, true, true};                                \
    if (!fits(k)) return CUBLAS_STATUS_NOT_SUPPORTED;                                                               \
    return run(x, sizeof(T), {&a, &c}, [&] {                                                                        \
      return cublas##P##syrk_v2(x->h, u, t, int(n), int(k), alpha, (const T*)a.dp, a.dld, beta, (T*)c.dp, c.dld);   \
    });                                                                                                             \
  }                                                                                                                 \
  cublasStatus_t cublasXt##P##syr2k(cublasXtHandle_t x, cublasFillMode_t u, cublasOperation_t t, size_t n,        \
                                    size_t k, const T* alpha, const T* A, size_t lda, const T* Bm, size_t ldb,     \
                                    const T* beta, T* C, size_t ldc) {                                              \
    const bool an = t == CUBLAS_OP_N;                                                                               \
    Mat a{A, an ? n : k, an ? k : n, lda, true, false}, b{Bm, an ? n : k, an ? k : n, ldb, true, false},            \
        c{C, n, n, ldc, true, true};                                                                                \
    if (!fits(k)) return CUBLAS_STATUS_NOT_SUPPORTED;                                                               \
    return run(x, sizeof(T), {&a, &b, &c}, [&] {                                                                    \
      return cublas##P##syr2k_v2(x->h, u, t, int(n), int(k), alpha, (const T*)a.dp, a.dld, (const T*)b.dp, b.dld,   \
                                 beta, (T*)c.dp, c.dld);                                                            \
    });                                                                                                             \
  }                                                                                                                 \
  cublasStatus_t cublasXt##P##trsm(cublasXtHandle_t x, cublasSideMode_t s, cublasFillMode_t u,                    \
                                   cublasOperation_t t, cublasDiagType_t d, size_t m, size_t n, const T* alpha,    \
                                   const T* A, size_t lda, T* Bm, size_t ldb) {                                    \
    const size_t ka = s == CUBLAS_SIDE_LEFT ? m : n;                                                                \
    Mat a{A, ka, ka, lda, true, false}, b{Bm, m, n, ldb, true, true};                                               \
    return run(x, sizeof(T), {&a, &b}, [&] {                                                                        \
      return cublas##P##trsm_v2(x->h, s, u, t, d, int(m), int(n), alpha, (const T*)a.dp, a.dld, (T*)b.dp, b.dld);   \
    });                                                                                                             \
  }                                                                                                                 \
  cublasStatus_t cublasXt##P##trmm(cublasXtHandle_t x, cublasSideMode_t s, cublasFillMode_t u,                    \
                                   cublasOperation_t t, cublasDiagType_t d, size_t m, size_t n, const T* alpha,    \
                                   const T* A, size_t lda, const T* Bm, size_t ldb, T* C, size_t ldc) {            \
    const size_t ka = s == CUBLAS_SIDE_LEFT ? m : n;                                                                \
    Mat a{A, ka, ka, lda, true, false}, b{Bm, m, n, ldb, true, false}, c{C, m, n, ldc, false, true};                \
    return run(x, sizeof(T), {&a, &b, &c}, [&] {                                                                    \
      return cublas##P##trmm_v2(x->h, s, u, t, d, int(m), int(n), alpha, (const T*)a.dp, a.dld, (const T*)b.dp,     \
                                b.dld, (T*)c.dp, c.dld);                                                            \
    });                                                                                                             \
  }
WH_XT(S, float, float)
WH_XT(D, double, double)
WH_XT(C, cuComplex, float)
WH_XT(Z, cuDoubleComplex, double)

#define WH_XT_HERM(P, T, RT)                                                                                         \
  cublasStatus_t cublasXt##P##hemm(cublasXtHandle_t x, cublasSideMode_t s, cublasFillMode_t u, size_t m, size_t n, \
                                   const T* alpha, const T* A, size_t lda, const T* Bm, size_t ldb, const T* beta, \
                                   T* C, size_t ldc) {                                                              \
    const size_t ka = s == CUBLAS_SIDE_LEFT ? m : n;                                                                \
    Mat a{A, ka, ka, lda, true, false}, b{Bm, m, n, ldb, true, false}, c{C, m, n, ldc, true, true};                 \
    return run(x, sizeof(T), {&a, &b, &c}, [&] {                                                                    \
      return cublas##P##hemm_v2(x->h, s, u, int(m), int(n), alpha, (const T*)a.dp, a.dld, (const T*)b.dp, b.dld,    \
                                beta, (T*)c.dp, c.dld);                                                             \
    });                                                                                                             \
  }                                                                                                                 \
  cublasStatus_t cublasXt##P##herk(cublasXtHandle_t x, cublasFillMode_t u, cublasOperation_t t, size_t n,         \
                                   size_t k, const RT* alpha, const T* A, size_t lda, const RT* beta, T* C,        \
                                   size_t ldc) {                                                                    \
    const bool an = t == CUBLAS_OP_N;                                                                               \
    Mat a{A, an ? n : k, an ? k : n, lda, true, false}, c{C, n, n, ldc, true, true};                                \
    if (!fits(k)) return CUBLAS_STATUS_NOT_SUPPORTED;                                                               \
    return run(x, sizeof(T), {&a, &c}, [&] {                                                                        \
      return cublas##P##herk_v2(x->h, u, t, int(n), int(k), alpha, (const T*)a.dp, a.dld, beta, (T*)c.dp, c.dld);   \
    });                                                                                                             \
  }                                                                                                                 \
  cublasStatus_t cublasXt##P##her2k(cublasXtHandle_t x, cublasFillMode_t u, cublasOperation_t t, size_t n,        \
                                    size_t k, const T* alpha, const T* A, size_t lda, const T* Bm, size_t ldb,     \
                                    const RT* beta, T* C, size_t ldc) {                                             \
    const bool an = t == CUBLAS_OP_N;                                                                               \
    Mat a{A, an ? n : k, an ? k : n, lda, true, false}, b{Bm, an ? n : k, an ? k : n, ldb, true, false},            \
        c{C, n, n, ldc, true, true};                                                                                \
    if (!fits(k)) return CUBLAS_STATUS_NOT_SUPPORTED;                                                               \
    return run(x, sizeof(T), {&a, &b, &c}, [&] {                                                                    \
      return cublas##P##her2k_v2(x->h, u, t, int(n), int(k), alpha, (const T*)a.dp, a.dld, (const T*)b.dp, b.dld,   \
                                 beta, (T*)c.dp, c.dld);                                                            \
    });                                                                                                             \
  }
WH_XT_HERM(C, cuComplex, float)
WH_XT_HERM(Z, cuDoubleComplex, double)

}  // extern "C"
