// The legacy cuBLAS API (cublas.h: cublasInit, cublasSgemm with char
// transposes and by-value scalars, errors through cublasGetError) for the
// functions Wormhole forwards, on one implicit handle over the v2 entry
// points. libcublas.so.13 still exports these unversioned names; a program
// built against cublas.h imports them.
#include <cuda_runtime_api.h>
#include <cublas.h>  // legacy API; declares the _v2 functions too (cublas_api.h)

#include <mutex>

namespace {

std::mutex mu;
cublasHandle_t implicit = nullptr;
cudaStream_t kernel_stream = nullptr;
thread_local cublasStatus_t last = CUBLAS_STATUS_SUCCESS;

cublasHandle_t handle() {
  std::lock_guard lk(mu);
  return implicit;
}
void note(cublasStatus_t s) {
  if (s != CUBLAS_STATUS_SUCCESS) last = s;
}
cublasOperation_t op(char c) {
  switch (c) {
    case 'N': case 'n': return CUBLAS_OP_N;
    case 'T': case 't': return CUBLAS_OP_T;
    case 'C': case 'c': return CUBLAS_OP_C;
    default: return cublasOperation_t(-1);
  }
}

}  // namespace

extern "C" {

cublasStatus_t cublasInit(void) {
  std::lock_guard lk(mu);
  if (implicit) return CUBLAS_STATUS_SUCCESS;
  cublasStatus_t s = cublasCreate_v2(&implicit);
  if (s == CUBLAS_STATUS_SUCCESS && kernel_stream) cublasSetStream_v2(implicit, kernel_stream);
  return s;
}
cublasStatus_t cublasShutdown(void) {
  std::lock_guard lk(mu);
  if (!implicit) return CUBLAS_STATUS_NOT_INITIALIZED;
  cublasStatus_t s = cublasDestroy_v2(implicit);
  implicit = nullptr;
  return s;
}
cublasStatus_t cublasGetError(void) {
  cublasStatus_t s = last;
  last = CUBLAS_STATUS_SUCCESS;
  return s;
}
cublasStatus_t cublasGetVersion(int* version) {
  if (!version) return CUBLAS_STATUS_INVALID_VALUE;
  *version = CUBLAS_VERSION;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasAlloc(int n, int elemSize, void** p) {
  if (n <= 0 || elemSize <= 0 || !p) return CUBLAS_STATUS_INVALID_VALUE;
  return cudaMalloc(p, size_t(n) * size_t(elemSize)) == cudaSuccess ? CUBLAS_STATUS_SUCCESS
                                                                    : CUBLAS_STATUS_ALLOC_FAILED;
}
cublasStatus_t cublasFree(void* p) {
  return cudaFree(p) == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INTERNAL_ERROR;
}
cublasStatus_t cublasSetKernelStream(cudaStream_t s) {
  std::lock_guard lk(mu);
  kernel_stream = s;
  return implicit ? cublasSetStream_v2(implicit, s) : CUBLAS_STATUS_SUCCESS;
}

#define WH_LEGACY(h)           \
  cublasHandle_t h = handle(); \
  if (!h) {                    \
    last = CUBLAS_STATUS_NOT_INITIALIZED;

void cublasSgemm(char ta, char tb, int m, int n, int k, float alpha, const float* A, int lda, const float* B, int ldb,
                 float beta, float* C, int ldc) {
  WH_LEGACY(h) return; }
  note(cublasSgemm_v2(h, op(ta), op(tb), m, n, k, &alpha, A, lda, B, ldb, &beta, C, ldc));
}
void cublasDgemm(char ta, char tb, int m, int n, int k, double alpha, const double* A, int lda, const double* B,
                 int ldb, double beta, double* C, int ldc) {
  WH_LEGACY(h) return; }
  note(cublasDgemm_v2(h, op(ta), op(tb), m, n, k, &alpha, A, lda, B, ldb, &beta, C, ldc));
}
void cublasSgemv(char t, int m, int n, float alpha, const float* A, int lda, const float* x, int incx, float beta,
                 float* y, int incy) {
  WH_LEGACY(h) return; }
  note(cublasSgemv_v2(h, op(t), m, n, &alpha, A, lda, x, incx, &beta, y, incy));
}
void cublasSaxpy(int n, float alpha, const float* x, int incx, float* y, int incy) {
  WH_LEGACY(h) return; }
  note(cublasSaxpy_v2(h, n, &alpha, x, incx, y, incy));
}
void cublasSscal(int n, float alpha, float* x, int incx) {
  WH_LEGACY(h) return; }
  note(cublasSscal_v2(h, n, &alpha, x, incx));
}
void cublasScopy(int n, const float* x, int incx, float* y, int incy) {
  WH_LEGACY(h) return; }
  note(cublasScopy_v2(h, n, x, incx, y, incy));
}
// The legacy API always uses host pointer mode on its implicit handle.
float cublasSdot(int n, const float* x, int incx, const float* y, int incy) {
  WH_LEGACY(h) return 0.f; }
  float r = 0.f;
  note(cublasSdot_v2(h, n, x, incx, y, incy, &r));
  return r;
}
float cublasSnrm2(int n, const float* x, int incx) {
  WH_LEGACY(h) return 0.f; }
  float r = 0.f;
  note(cublasSnrm2_v2(h, n, x, incx, &r));
  return r;
}
float cublasSasum(int n, const float* x, int incx) {
  WH_LEGACY(h) return 0.f; }
  float r = 0.f;
  note(cublasSasum_v2(h, n, x, incx, &r));
  return r;
}
int cublasIsamax(int n, const float* x, int incx) {
  WH_LEGACY(h) return 0; }
  int r = 0;
  note(cublasIsamax_v2(h, n, x, incx, &r));
  return r;
}

}  // extern "C"
