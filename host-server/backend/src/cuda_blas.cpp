// The GPU's BLAS: NVIDIA's libcublas.so.13, loaded with dlopen so the server
// builds and runs without it. One real cuBLAS handle per guest handle,
// created while the session's CUDA context is current (so it is bound to
// that context); before every call the context is made current again and the
// call's stream, pointer mode and math mode are set on the handle.
//
// Scalars: in host pointer mode the session passes values, and cuBLAS reads
// them from our stack at call time (it copies host scalars when it enqueues);
// in device pointer mode the guest's device addresses go straight to cuBLAS.
// Reductions in host pointer mode block until the result is back, as cuBLAS
// does for any caller.
//
// NOTE: written without a GPU (none lent to the task that wrote it); it
// compiles against the CUDA 13 headers but has NOT been run. See
// docs/hardware.md.
#include <cublas_v2.h>
#include <dlfcn.h>

#include <mutex>

#include "vendor_lib.hpp"
#include "wormhole/server/blas.hpp"

namespace wh::server {

namespace {

#define WH_CUBLAS_FUNCS(X)                                   \
  X(cublasCreate_v2)                                         \
  X(cublasDestroy_v2)                                        \
  X(cublasGetVersion_v2)                                     \
  X(cublasSetStream_v2)                                      \
  X(cublasSetPointerMode_v2)                                 \
  X(cublasSetMathMode)                                       \
  X(cublasSgemm_v2)                                          \
  X(cublasDgemm_v2)                                          \
  X(cublasSgemmBatched)                                      \
  X(cublasDgemmBatched)                                      \
  X(cublasSgemmStridedBatched)                               \
  X(cublasDgemmStridedBatched)                               \
  X(cublasSgeam)                                             \
  X(cublasSgemv_v2)                                          \
  X(cublasSaxpy_v2)                                          \
  X(cublasSscal_v2)                                          \
  X(cublasScopy_v2)                                          \
  X(cublasSdot_v2)                                           \
  X(cublasSnrm2_v2)                                          \
  X(cublasSasum_v2)                                          \
  X(cublasIsamax_v2)

// cublasGemmEx is overloaded in C++ (a legacy cudaDataType compute-type
// form): name the cublasComputeType_t one explicitly.
using GemmExFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                    const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                                    cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);

struct Lib {
#define WH_PTR(fn) decltype(&::fn) fn = nullptr;
  WH_CUBLAS_FUNCS(WH_PTR)
#undef WH_PTR
  GemmExFn cublasGemmEx = nullptr;
  void* h = nullptr;
  std::string error;
  bool ok = false;
};

// Loaded once per server process; handles are per guest handle.
Lib& lib() {
  static Lib l;
  static std::once_flag once;
  std::call_once(once, [] {
    l.h = open_vendor_library("libcublas.so.13", &l.error);
    if (!l.h) return;
#define WH_LOAD(fn)                                                   \
  l.fn = reinterpret_cast<decltype(l.fn)>(dlsym(l.h, #fn));           \
  if (!l.fn) {                                                        \
    l.error = "libcublas.so.13 lacks " #fn;                           \
    return;                                                           \
  }
    WH_CUBLAS_FUNCS(WH_LOAD)
    WH_LOAD(cublasGemmEx)
#undef WH_LOAD
    l.ok = true;
  });
  return l;
}

Err map(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return cudaSuccess;
    case CUBLAS_STATUS_INVALID_VALUE: return cudaErrorInvalidValue;
    case CUBLAS_STATUS_ALLOC_FAILED: return cudaErrorMemoryAllocation;
    case CUBLAS_STATUS_NOT_SUPPORTED:
    case CUBLAS_STATUS_ARCH_MISMATCH: return cudaErrorNotSupported;
    case CUBLAS_STATUS_NOT_INITIALIZED: return cudaErrorInitializationError;
    case CUBLAS_STATUS_EXECUTION_FAILED: return cudaErrorLaunchFailure;
    case CUBLAS_STATUS_MAPPING_ERROR: return cudaErrorIllegalAddress;
    default: return cudaErrorUnknown;
  }
}

cublasOperation_t op(BlasOp o) { return cublasOperation_t(o); }

struct CuBlasHandle : BlasHandle {
  cublasHandle_t h = nullptr;
  std::function<void()> make_current;
  // What the handle was last set to: cublasSetStream is not free (it rebinds
  // the workspace), so settings are applied only when they change.
  bool set = false;
  cudaStream_t stream = nullptr;
  bool device_scalars = false;
  uint32_t math = 0;
  ~CuBlasHandle() override {
    if (h) {
      make_current();
      lib().cublasDestroy_v2(h);
    }
  }
};

class CudaBlas final : public Blas {
 public:
  explicit CudaBlas(std::function<void()> mc) : make_current_(std::move(mc)) {}

  Err create(std::unique_ptr<BlasHandle>* out) override {
    make_current_();
    auto h = std::make_unique<CuBlasHandle>();
    h->make_current = make_current_;
    if (cublasStatus_t s = lib().cublasCreate_v2(&h->h); s != CUBLAS_STATUS_SUCCESS) {
      h->h = nullptr;
      return map(s);
    }
    *out = std::move(h);
    return cudaSuccess;
  }
  // The version of the headers we were built against (the loaded library
  // has the same soname, so the same major version).
  int version() const override { return CUBLAS_VERSION; }

  // Prepares the handle for one call: context, stream, modes.
  cublasHandle_t prep(BlasHandle& hb, const BlasCall& c) {
    make_current_();
    auto& h = static_cast<CuBlasHandle&>(hb);
    cudaStream_t st = c.stream ? static_cast<cudaStream_t>(c.stream->native()) : nullptr;
    if (!h.set || st != h.stream) lib().cublasSetStream_v2(h.h, st);
    if (!h.set || c.device_scalars != h.device_scalars)
      lib().cublasSetPointerMode_v2(h.h, c.device_scalars ? CUBLAS_POINTER_MODE_DEVICE : CUBLAS_POINTER_MODE_HOST);
    if (!h.set || c.math_mode != h.math) lib().cublasSetMathMode(h.h, cublasMath_t(c.math_mode));
    h.set = true;
    h.stream = st;
    h.device_scalars = c.device_scalars;
    h.math = c.math_mode;
    return h.h;
  }

  // Scalar argument pointers: device address, or a host value held in `f`/`d`.
  struct S {
    float f[2];
    double d[2];
  };
  static const float* fs(const BlasScalar& s, float* slot) {
    if (s.device) return reinterpret_cast<const float*>(s.dptr);
    *slot = float(s.value);
    return slot;
  }
  static const double* ds(const BlasScalar& s, double* slot) {
    if (s.device) return reinterpret_cast<const double*>(s.dptr);
    *slot = s.value;
    return slot;
  }
  template <class T>
  static T* dp(uint64_t a) {
    return reinterpret_cast<T*>(a);
  }

  Err gemm(BlasHandle& hb, const BlasCall& c, int dtype, const GemmArgs& g) override {
    cublasHandle_t h = prep(hb, c);
    S s;
    if (dtype == 0)
      return map(lib().cublasSgemm_v2(h, op(g.ta), op(g.tb), g.m, g.n, g.k, fs(g.alpha, &s.f[0]), dp<const float>(g.A),
                                      int(g.lda), dp<const float>(g.B), int(g.ldb), fs(g.beta, &s.f[1]), dp<float>(g.C),
                                      int(g.ldc)));
    return map(lib().cublasDgemm_v2(h, op(g.ta), op(g.tb), g.m, g.n, g.k, ds(g.alpha, &s.d[0]), dp<const double>(g.A),
                                    int(g.lda), dp<const double>(g.B), int(g.ldb), ds(g.beta, &s.d[1]),
                                    dp<double>(g.C), int(g.ldc)));
  }
  Err gemm_strided_batched(BlasHandle& hb, const BlasCall& c, int dtype, const GemmArgs& g, int64_t sa, int64_t sb,
                           int64_t sc, int batch) override {
    cublasHandle_t h = prep(hb, c);
    S s;
    if (dtype == 0)
      return map(lib().cublasSgemmStridedBatched(h, op(g.ta), op(g.tb), g.m, g.n, g.k, fs(g.alpha, &s.f[0]),
                                                 dp<const float>(g.A), int(g.lda), sa, dp<const float>(g.B),
                                                 int(g.ldb), sb, fs(g.beta, &s.f[1]), dp<float>(g.C), int(g.ldc), sc,
                                                 batch));
    return map(lib().cublasDgemmStridedBatched(h, op(g.ta), op(g.tb), g.m, g.n, g.k, ds(g.alpha, &s.d[0]),
                                               dp<const double>(g.A), int(g.lda), sa, dp<const double>(g.B),
                                               int(g.ldb), sb, ds(g.beta, &s.d[1]), dp<double>(g.C), int(g.ldc), sc,
                                               batch));
  }
  Err gemm_batched(BlasHandle& hb, const BlasCall& c, int dtype, const GemmArgs& g, int batch) override {
    cublasHandle_t h = prep(hb, c);
    S s;
    if (dtype == 0)
      return map(lib().cublasSgemmBatched(h, op(g.ta), op(g.tb), g.m, g.n, g.k, fs(g.alpha, &s.f[0]),
                                          dp<const float* const>(g.A), int(g.lda), dp<const float* const>(g.B),
                                          int(g.ldb), fs(g.beta, &s.f[1]), dp<float* const>(g.C), int(g.ldc), batch));
    return map(lib().cublasDgemmBatched(h, op(g.ta), op(g.tb), g.m, g.n, g.k, ds(g.alpha, &s.d[0]),
                                        dp<const double* const>(g.A), int(g.lda), dp<const double* const>(g.B),
                                        int(g.ldb), ds(g.beta, &s.d[1]), dp<double* const>(g.C), int(g.ldc), batch));
  }
  Err gemm_ex(BlasHandle& hb, const BlasCall& c, const GemmArgs& g, int atype, int btype, int ctype, int compute,
              int algo) override {
    cublasHandle_t h = prep(hb, c);
    S s;
    // alpha/beta are of the compute type's scalar type: double for 64F, float otherwise.
    const void* al = compute == CUBLAS_COMPUTE_64F || compute == CUBLAS_COMPUTE_64F_PEDANTIC
                         ? static_cast<const void*>(ds(g.alpha, &s.d[0]))
                         : static_cast<const void*>(fs(g.alpha, &s.f[0]));
    const void* be = compute == CUBLAS_COMPUTE_64F || compute == CUBLAS_COMPUTE_64F_PEDANTIC
                         ? static_cast<const void*>(ds(g.beta, &s.d[1]))
                         : static_cast<const void*>(fs(g.beta, &s.f[1]));
    return map(lib().cublasGemmEx(h, op(g.ta), op(g.tb), g.m, g.n, g.k, al, dp<const void>(g.A), cudaDataType(atype),
                                  int(g.lda), dp<const void>(g.B), cudaDataType(btype), int(g.ldb), be,
                                  dp<void>(g.C), cudaDataType(ctype), int(g.ldc), cublasComputeType_t(compute),
                                  cublasGemmAlgo_t(algo)));
  }
  Err geam(BlasHandle& hb, const BlasCall& c, const GemmArgs& g) override {
    cublasHandle_t h = prep(hb, c);
    S s;
    return map(lib().cublasSgeam(h, op(g.ta), op(g.tb), g.m, g.n, fs(g.alpha, &s.f[0]), dp<const float>(g.A),
                                 int(g.lda), fs(g.beta, &s.f[1]), dp<const float>(g.B), int(g.ldb), dp<float>(g.C),
                                 int(g.ldc)));
  }
  Err gemv(BlasHandle& hb, const BlasCall& c, BlasOp t, int m, int n, const BlasScalar& alpha, uint64_t A,
           int64_t lda, uint64_t x, int incx, const BlasScalar& beta, uint64_t y, int incy) override {
    cublasHandle_t h = prep(hb, c);
    S s;
    return map(lib().cublasSgemv_v2(h, op(t), m, n, fs(alpha, &s.f[0]), dp<const float>(A), int(lda),
                                    dp<const float>(x), incx, fs(beta, &s.f[1]), dp<float>(y), incy));
  }
  Err axpy(BlasHandle& hb, const BlasCall& c, int n, const BlasScalar& alpha, uint64_t x, int incx, uint64_t y,
           int incy) override {
    cublasHandle_t h = prep(hb, c);
    S s;
    return map(lib().cublasSaxpy_v2(h, n, fs(alpha, &s.f[0]), dp<const float>(x), incx, dp<float>(y), incy));
  }
  Err scal(BlasHandle& hb, const BlasCall& c, int n, const BlasScalar& alpha, uint64_t x, int incx) override {
    cublasHandle_t h = prep(hb, c);
    S s;
    return map(lib().cublasSscal_v2(h, n, fs(alpha, &s.f[0]), dp<float>(x), incx));
  }
  Err copy(BlasHandle& hb, const BlasCall& c, int n, uint64_t x, int incx, uint64_t y, int incy) override {
    cublasHandle_t h = prep(hb, c);
    return map(lib().cublasScopy_v2(h, n, dp<const float>(x), incx, dp<float>(y), incy));
  }
  // Reductions: device mode writes the device address; host mode blocks and
  // fills *host.
  Err dot(BlasHandle& hb, const BlasCall& c, int n, uint64_t x, int incx, uint64_t y, int incy, const BlasScalar& r,
          float* host) override {
    cublasHandle_t h = prep(hb, c);
    return map(lib().cublasSdot_v2(h, n, dp<const float>(x), incx, dp<const float>(y), incy,
                                   r.device ? dp<float>(r.dptr) : host));
  }
  Err nrm2(BlasHandle& hb, const BlasCall& c, int n, uint64_t x, int incx, const BlasScalar& r,
           float* host) override {
    cublasHandle_t h = prep(hb, c);
    return map(lib().cublasSnrm2_v2(h, n, dp<const float>(x), incx, r.device ? dp<float>(r.dptr) : host));
  }
  Err asum(BlasHandle& hb, const BlasCall& c, int n, uint64_t x, int incx, const BlasScalar& r,
           float* host) override {
    cublasHandle_t h = prep(hb, c);
    return map(lib().cublasSasum_v2(h, n, dp<const float>(x), incx, r.device ? dp<float>(r.dptr) : host));
  }
  Err iamax(BlasHandle& hb, const BlasCall& c, int n, uint64_t x, int incx, const BlasScalar& r,
            int* host) override {
    cublasHandle_t h = prep(hb, c);
    return map(lib().cublasIsamax_v2(h, n, dp<const float>(x), incx, r.device ? dp<int>(r.dptr) : host));
  }

 private:
  std::function<void()> make_current_;
};

}  // namespace

std::unique_ptr<Blas> make_cuda_blas(std::function<void()> make_current, std::string* err) {
  Lib& l = lib();
  if (!l.ok) {
    if (err) *err = l.error;
    return nullptr;
  }
  return std::make_unique<CudaBlas>(std::move(make_current));
}

}  // namespace wh::server
