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

#include <cuda_fp16.h>

#include <cctype>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <type_traits>

#include "wormhole/server/vendor_lib.hpp"
#include "wormhole/proto/wire.hpp"
#include "wormhole/server/blas.hpp"

namespace wh::server {

namespace {

using namespace wh::proto;

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

// The entry points the generic ops use, looked up by name on first use
// (nullptr: this libcublas lacks it; the call returns cudaErrorNotSupported).
void* sym(const std::string& name) {
  static std::mutex mu;
  static std::map<std::string, void*> cache;
  std::lock_guard lk(mu);
  auto it = cache.find(name);
  if (it != cache.end()) return it->second;
  void* p = lib().h ? dlsym(lib().h, name.c_str()) : nullptr;
  cache.emplace(name, p);
  return p;
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

  // ---- the generic ops: the S/D/C/Z entry points resolved by name
  // (cublas + prefix + routine), typed per element type.
  template <class T>
  static const char* pre() {
    if constexpr (std::is_same_v<T, float>) return "S";
    else if constexpr (std::is_same_v<T, double>) return "D";
    else if constexpr (std::is_same_v<T, cuComplex>) return "C";
    else return "Z";
  }
  template <class T>
  static constexpr bool cx() {
    return std::is_same_v<T, cuComplex> || std::is_same_v<T, cuDoubleComplex>;
  }
  template <class Fn>
  static Fn fn(const std::string& name) {
    return reinterpret_cast<Fn>(sym(name));
  }
  template <class T>
  static T mk(double re, double im) {
    if constexpr (std::is_same_v<T, cuComplex>) return make_cuComplex(float(re), float(im));
    else if constexpr (std::is_same_v<T, cuDoubleComplex>) return make_cuDoubleComplex(re, im);
    else return T(re);
  }
  // A scalar argument: device address, or the host value held in *slot.
  template <class T>
  static const T* sp(const BlasScalar& s, T* slot) {
    if (s.device) return reinterpret_cast<const T*>(s.dptr);
    *slot = mk<T>(s.value, s.imag);
    return slot;
  }
  template <class T>
  using Real = std::conditional_t<std::is_same_v<T, cuComplex>, float,
                                  std::conditional_t<std::is_same_v<T, cuDoubleComplex>, double, T>>;
  template <class F>
  static Err by_type(uint32_t t, F&& f) {
    switch (t) {
      case 0: return f(float{});
      case 1: return f(double{});
      case 2: return f(cuComplex{});
      case 3: return f(cuDoubleComplex{});
      default: return cudaErrorInvalidValue;
    }
  }
#define WH_CALL(F, ...) (F ? map(F(__VA_ARGS__)) : cudaErrorNotSupported)

  template <class T>
  Err l1_t(cublasHandle_t h, const BlasL1Args& a, BlasL1Result* host) {
    using RT = Real<T>;
    const std::string p = pre<T>();
    T s0, s1;
    RT r0, r1;
    const int n = a.n;
    T* x = dp<T>(a.x);
    T* y = dp<T>(a.y);
    switch (a.routine) {
      case kL1Axpy: {
        auto f = fn<cublasStatus_t (*)(cublasHandle_t, int, const T*, const T*, int, T*, int)>("cublas" + p + "axpy_v2");
        return WH_CALL(f, h, n, sp(a.alpha, &s0), x, a.incx, y, a.incy);
      }
      case kL1Scal: {
        auto f = fn<cublasStatus_t (*)(cublasHandle_t, int, const T*, T*, int)>("cublas" + p + "scal_v2");
        return WH_CALL(f, h, n, sp(a.alpha, &s0), x, a.incx);
      }
      case kL1ScalReal: {
        auto f = fn<cublasStatus_t (*)(cublasHandle_t, int, const RT*, T*, int)>(
            std::string(std::is_same_v<T, cuComplex> ? "cublasCsscal_v2" : "cublasZdscal_v2"));
        return WH_CALL(f, h, n, sp(a.alpha, &r0), x, a.incx);
      }
      case kL1Copy:
      case kL1Swap: {
        auto f = fn<cublasStatus_t (*)(cublasHandle_t, int, T*, int, T*, int)>(
            "cublas" + p + (a.routine == kL1Copy ? "copy_v2" : "swap_v2"));
        return WH_CALL(f, h, n, x, a.incx, y, a.incy);
      }
      case kL1Dot:
      case kL1Dotc: {
        auto f = fn<cublasStatus_t (*)(cublasHandle_t, int, const T*, int, const T*, int, T*)>(
            "cublas" + p + (a.routine == kL1Dotc ? "dotc_v2" : cx<T>() ? "dotu_v2" : "dot_v2"));
        T v{};
        Err e = WH_CALL(f, h, n, x, a.incx, y, a.incy, a.result.device ? dp<T>(a.result.dptr) : &v);
        if constexpr (cx<T>()) host->re = v.x, host->im = v.y;
        else host->re = v;
        return e;
      }
      case kL1Nrm2:
      case kL1Asum: {
        std::string name = a.routine == kL1Nrm2 ? "nrm2_v2" : "asum_v2";
        name = "cublas" + std::string(std::is_same_v<T, cuComplex> ? "Sc" : std::is_same_v<T, cuDoubleComplex> ? "Dz" : p) + name;
        auto f = fn<cublasStatus_t (*)(cublasHandle_t, int, const T*, int, RT*)>(name);
        RT v{};
        Err e = WH_CALL(f, h, n, x, a.incx, a.result.device ? dp<RT>(a.result.dptr) : &v);
        host->re = v;
        return e;
      }
      case kL1Iamax:
      case kL1Iamin: {
        auto f = fn<cublasStatus_t (*)(cublasHandle_t, int, const T*, int, int*)>(
            "cublasI" + std::string(1, char(std::tolower(p[0]))) + (a.routine == kL1Iamax ? "amax_v2" : "amin_v2"));
        int v = 0;
        Err e = WH_CALL(f, h, n, x, a.incx, a.result.device ? dp<int>(a.result.dptr) : &v);
        host->index = v;
        return e;
      }
      case kL1Rot: {
        auto f = fn<cublasStatus_t (*)(cublasHandle_t, int, T*, int, T*, int, const RT*, const T*)>("cublas" + p + "rot_v2");
        return WH_CALL(f, h, n, x, a.incx, y, a.incy, sp(a.alpha, &r0), sp(a.beta, &s1));
      }
      case kL1RotReal: {
        auto f = fn<cublasStatus_t (*)(cublasHandle_t, int, T*, int, T*, int, const RT*, const RT*)>(
            std::string(std::is_same_v<T, cuComplex> ? "cublasCsrot_v2" : "cublasZdrot_v2"));
        return WH_CALL(f, h, n, x, a.incx, y, a.incy, sp(a.alpha, &r0), sp(a.beta, &r1));
      }
      case kL1Rotm: {
        auto f = fn<cublasStatus_t (*)(cublasHandle_t, int, T*, int, T*, int, const RT*)>("cublas" + p + "rotm_v2");
        RT param[5];
        for (int i = 0; i < 5; i++) param[i] = RT(a.param[i]);
        return WH_CALL(f, h, n, x, a.incx, y, a.incy, a.alpha.device ? dp<const RT>(a.alpha.dptr) : param);
      }
      default: return cudaErrorInvalidValue;
    }
  }
  Err l1(BlasHandle& hb, const BlasCall& c, const BlasL1Args& a, BlasL1Result* host) override {
    cublasHandle_t h = prep(hb, c);
    return by_type(a.type, [&](auto t) -> Err {
      using T = decltype(t);
      if constexpr (!cx<T>())
        if (a.routine == kL1ScalReal || a.routine == kL1RotReal || a.routine == kL1Dotc) return cudaErrorInvalidValue;
      return l1_t<T>(h, a, host);
    });
  }

  template <class T>
  Err l2_t(cublasHandle_t h, const BlasL2Args& a) {
    using RT = Real<T>;
    const std::string p = "cublas" + std::string(pre<T>());
    T s0, s1;
    RT r0;
    const auto ul = cublasFillMode_t(a.uplo);
    const auto tr = op(a.trans);
    const auto dg = cublasDiagType_t(a.diag);
    const T* A = dp<const T>(a.A);
    T* Aw = dp<T>(a.A);
    const T* x = dp<const T>(a.x);
    T* xw = dp<T>(a.x);
    T* y = dp<T>(a.y);
    using H = cublasHandle_t;
    switch (a.routine) {
      case kL2Gemv: {
        auto f = fn<cublasStatus_t (*)(H, cublasOperation_t, int, int, const T*, const T*, int, const T*, int, const T*,
                                       T*, int)>(p + "gemv_v2");
        return WH_CALL(f, h, tr, a.m, a.n, sp(a.alpha, &s0), A, int(a.lda), x, a.incx, sp(a.beta, &s1), y, a.incy);
      }
      case kL2Gbmv: {
        auto f = fn<cublasStatus_t (*)(H, cublasOperation_t, int, int, int, int, const T*, const T*, int, const T*, int,
                                       const T*, T*, int)>(p + "gbmv_v2");
        return WH_CALL(f, h, tr, a.m, a.n, a.kl, a.ku, sp(a.alpha, &s0), A, int(a.lda), x, a.incx, sp(a.beta, &s1), y,
                       a.incy);
      }
      case kL2Ger:
      case kL2Gerc: {
        auto f = fn<cublasStatus_t (*)(H, int, int, const T*, const T*, int, const T*, int, T*, int)>(
            p + (a.routine == kL2Gerc ? "gerc_v2" : cx<T>() ? "geru_v2" : "ger_v2"));
        return WH_CALL(f, h, a.m, a.n, sp(a.alpha, &s0), x, a.incx, y, a.incy, Aw, int(a.lda));
      }
      case kL2Symv:
      case kL2Hemv: {
        auto f = fn<cublasStatus_t (*)(H, cublasFillMode_t, int, const T*, const T*, int, const T*, int, const T*, T*,
                                       int)>(p + (a.routine == kL2Symv ? "symv_v2" : "hemv_v2"));
        return WH_CALL(f, h, ul, a.n, sp(a.alpha, &s0), A, int(a.lda), x, a.incx, sp(a.beta, &s1), y, a.incy);
      }
      case kL2Sbmv:
      case kL2Hbmv: {
        auto f = fn<cublasStatus_t (*)(H, cublasFillMode_t, int, int, const T*, const T*, int, const T*, int,
                                       const T*, T*, int)>(p + (a.routine == kL2Sbmv ? "sbmv_v2" : "hbmv_v2"));
        return WH_CALL(f, h, ul, a.n, a.kl, sp(a.alpha, &s0), A, int(a.lda), x, a.incx, sp(a.beta, &s1), y, a.incy);
      }
      case kL2Spmv:
      case kL2Hpmv: {
        auto f = fn<cublasStatus_t (*)(H, cublasFillMode_t, int, const T*, const T*, const T*, int, const T*, T*, int)>(
            p + (a.routine == kL2Spmv ? "spmv_v2" : "hpmv_v2"));
        return WH_CALL(f, h, ul, a.n, sp(a.alpha, &s0), A, x, a.incx, sp(a.beta, &s1), y, a.incy);
      }
      case kL2Syr: {
        auto f = fn<cublasStatus_t (*)(H, cublasFillMode_t, int, const T*, const T*, int, T*, int)>(p + "syr_v2");
        return WH_CALL(f, h, ul, a.n, sp(a.alpha, &s0), x, a.incx, Aw, int(a.lda));
      }
      case kL2Her: {
        auto f = fn<cublasStatus_t (*)(H, cublasFillMode_t, int, const RT*, const T*, int, T*, int)>(p + "her_v2");
        return WH_CALL(f, h, ul, a.n, sp(a.alpha, &r0), x, a.incx, Aw, int(a.lda));
      }
      case kL2Spr: {
        auto f = fn<cublasStatus_t (*)(H, cublasFillMode_t, int, const T*, const T*, int, T*)>(p + "spr_v2");
        return WH_CALL(f, h, ul, a.n, sp(a.alpha, &s0), x, a.incx, Aw);
      }
      case kL2Hpr: {
        auto f = fn<cublasStatus_t (*)(H, cublasFillMode_t, int, const RT*, const T*, int, T*)>(p + "hpr_v2");
        return WH_CALL(f, h, ul, a.n, sp(a.alpha, &r0), x, a.incx, Aw);
      }
      case kL2Syr2:
      case kL2Her2: {
        auto f = fn<cublasStatus_t (*)(H, cublasFillMode_t, int, const T*, const T*, int, const T*, int, T*, int)>(
            p + (a.routine == kL2Syr2 ? "syr2_v2" : "her2_v2"));
        return WH_CALL(f, h, ul, a.n, sp(a.alpha, &s0), x, a.incx, y, a.incy, Aw, int(a.lda));
      }
      case kL2Spr2:
      case kL2Hpr2: {
        auto f = fn<cublasStatus_t (*)(H, cublasFillMode_t, int, const T*, const T*, int, const T*, int, T*)>(
            p + (a.routine == kL2Spr2 ? "spr2_v2" : "hpr2_v2"));
        return WH_CALL(f, h, ul, a.n, sp(a.alpha, &s0), x, a.incx, y, a.incy, Aw);
      }
      case kL2Trmv:
      case kL2Trsv: {
        auto f = fn<cublasStatus_t (*)(H, cublasFillMode_t, cublasOperation_t, cublasDiagType_t, int, const T*, int, T*,
                                       int)>(p + (a.routine == kL2Trmv ? "trmv_v2" : "trsv_v2"));
        return WH_CALL(f, h, ul, tr, dg, a.n, A, int(a.lda), xw, a.incx);
      }
      case kL2Tbmv:
      case kL2Tbsv: {
        auto f = fn<cublasStatus_t (*)(H, cublasFillMode_t, cublasOperation_t, cublasDiagType_t, int, int, const T*, int,
                                       T*, int)>(p + (a.routine == kL2Tbmv ? "tbmv_v2" : "tbsv_v2"));
        return WH_CALL(f, h, ul, tr, dg, a.n, a.kl, A, int(a.lda), xw, a.incx);
      }
      case kL2Tpmv:
      case kL2Tpsv: {
        auto f = fn<cublasStatus_t (*)(H, cublasFillMode_t, cublasOperation_t, cublasDiagType_t, int, const T*, T*, int)>(
            p + (a.routine == kL2Tpmv ? "tpmv_v2" : "tpsv_v2"));
        return WH_CALL(f, h, ul, tr, dg, a.n, A, xw, a.incx);
      }
      default: return cudaErrorInvalidValue;
    }
  }
  Err l2(BlasHandle& hb, const BlasCall& c, const BlasL2Args& a) override {
    cublasHandle_t h = prep(hb, c);
    return by_type(a.type, [&](auto t) { return l2_t<decltype(t)>(h, a); });
  }

  template <class T>
  Err l3_t(cublasHandle_t h, const BlasL3Args& a) {
    using RT = Real<T>;
    const std::string p = "cublas" + std::string(pre<T>());
    T s0, s1;
    RT r0, r1;
    const auto ul = cublasFillMode_t(a.uplo);
    const auto sd = cublasSideMode_t(a.side);
    const auto dg = cublasDiagType_t(a.diag);
    const auto ta = op(a.ta), tb = op(a.tb);
    const T* A = dp<const T>(a.A);
    const T* B = dp<const T>(a.B);
    T* C = dp<T>(a.C);
    using H = cublasHandle_t;
    const int m = a.m, n = a.n, k = a.k, lda = int(a.lda), ldb = int(a.ldb), ldc = int(a.ldc);
    switch (a.routine) {
      case kL3Gemm:
        if (a.mode == kBlasStrided) {
          auto f = fn<cublasStatus_t (*)(H, cublasOperation_t, cublasOperation_t, int, int, int, const T*, const T*, int,
                                         long long, const T*, int, long long, const T*, T*, int, long long, int)>(
              p + "gemmStridedBatched");
          return WH_CALL(f, h, ta, tb, m, n, k, sp(a.alpha, &s0), A, lda, a.sa, B, ldb, a.sb, sp(a.beta, &s1), C, ldc,
                         a.sc, a.batch);
        } else if (a.mode == kBlasArrays) {
          auto f = fn<cublasStatus_t (*)(H, cublasOperation_t, cublasOperation_t, int, int, int, const T*,
                                         const T* const*, int, const T* const*, int, const T*, T* const*, int, int)>(
              p + "gemmBatched");
          return WH_CALL(f, h, ta, tb, m, n, k, sp(a.alpha, &s0), dp<const T* const>(a.A), lda,
                         dp<const T* const>(a.B), ldb, sp(a.beta, &s1), dp<T* const>(a.C), ldc, a.batch);
        } else {
          auto f = fn<cublasStatus_t (*)(H, cublasOperation_t, cublasOperation_t, int, int, int, const T*, const T*, int,
                                         const T*, int, const T*, T*, int)>(p + "gemm_v2");
          return WH_CALL(f, h, ta, tb, m, n, k, sp(a.alpha, &s0), A, lda, B, ldb, sp(a.beta, &s1), C, ldc);
        }
      case kL3Symm:
      case kL3Hemm: {
        auto f = fn<cublasStatus_t (*)(H, cublasSideMode_t, cublasFillMode_t, int, int, const T*, const T*, int,
                                       const T*, int, const T*, T*, int)>(p + (a.routine == kL3Symm ? "symm_v2" : "hemm_v2"));
        return WH_CALL(f, h, sd, ul, m, n, sp(a.alpha, &s0), A, lda, B, ldb, sp(a.beta, &s1), C, ldc);
      }
      case kL3Syrk: {
        auto f = fn<cublasStatus_t (*)(H, cublasFillMode_t, cublasOperation_t, int, int, const T*, const T*, int,
                                       const T*, T*, int)>(p + "syrk_v2");
        return WH_CALL(f, h, ul, ta, n, k, sp(a.alpha, &s0), A, lda, sp(a.beta, &s1), C, ldc);
      }
      case kL3Herk: {
        auto f = fn<cublasStatus_t (*)(H, cublasFillMode_t, cublasOperation_t, int, int, const RT*, const T*, int,
                                       const RT*, T*, int)>(p + "herk_v2");
        return WH_CALL(f, h, ul, ta, n, k, sp(a.alpha, &r0), A, lda, sp(a.beta, &r1), C, ldc);
      }
      case kL3Syr2k: {
        auto f = fn<cublasStatus_t (*)(H, cublasFillMode_t, cublasOperation_t, int, int, const T*, const T*, int,
                                       const T*, int, const T*, T*, int)>(p + "syr2k_v2");
        return WH_CALL(f, h, ul, ta, n, k, sp(a.alpha, &s0), A, lda, B, ldb, sp(a.beta, &s1), C, ldc);
      }
      case kL3Her2k: {
        auto f = fn<cublasStatus_t (*)(H, cublasFillMode_t, cublasOperation_t, int, int, const T*, const T*, int,
                                       const T*, int, const RT*, T*, int)>(p + "her2k_v2");
        return WH_CALL(f, h, ul, ta, n, k, sp(a.alpha, &s0), A, lda, B, ldb, sp(a.beta, &r1), C, ldc);
      }
      case kL3Trmm: {
        auto f = fn<cublasStatus_t (*)(H, cublasSideMode_t, cublasFillMode_t, cublasOperation_t, cublasDiagType_t, int,
                                       int, const T*, const T*, int, const T*, int, T*, int)>(p + "trmm_v2");
        return WH_CALL(f, h, sd, ul, ta, dg, m, n, sp(a.alpha, &s0), A, lda, B, ldb, C, ldc);
      }
      case kL3Trsm:
        if (a.mode == kBlasArrays) {
          auto f = fn<cublasStatus_t (*)(H, cublasSideMode_t, cublasFillMode_t, cublasOperation_t, cublasDiagType_t, int,
                                         int, const T*, const T* const*, int, T* const*, int, int)>(p + "trsmBatched");
          return WH_CALL(f, h, sd, ul, ta, dg, m, n, sp(a.alpha, &s0), dp<const T* const>(a.A), lda,
                         dp<T* const>(a.B), ldb, a.batch);
        } else {
          auto f = fn<cublasStatus_t (*)(H, cublasSideMode_t, cublasFillMode_t, cublasOperation_t, cublasDiagType_t, int,
                                         int, const T*, const T*, int, T*, int)>(p + "trsm_v2");
          return WH_CALL(f, h, sd, ul, ta, dg, m, n, sp(a.alpha, &s0), A, lda, dp<T>(a.B), ldb);
        }
      case kL3Geam: {
        auto f = fn<cublasStatus_t (*)(H, cublasOperation_t, cublasOperation_t, int, int, const T*, const T*, int,
                                       const T*, const T*, int, T*, int)>(p + "geam");
        return WH_CALL(f, h, ta, tb, m, n, sp(a.alpha, &s0), A, lda, sp(a.beta, &s1), B, ldb, C, ldc);
      }
      case kL3Dgmm: {
        auto f = fn<cublasStatus_t (*)(H, cublasSideMode_t, int, int, const T*, int, const T*, int, T*, int)>(p + "dgmm");
        return WH_CALL(f, h, sd, m, n, A, lda, B, ldb, C, ldc);
      }
      default: return cudaErrorInvalidValue;
    }
  }
  Err l3(BlasHandle& hb, const BlasCall& c, const BlasL3Args& a) override {
    cublasHandle_t h = prep(hb, c);
    return by_type(a.type, [&](auto t) { return l3_t<decltype(t)>(h, a); });
  }

  Err gemm_ex_batched(BlasHandle& hb, const BlasCall& c, const BlasGemmExArgs& a) override {
    cublasHandle_t h = prep(hb, c);
    const GemmArgs& g = a.g;
    // alpha/beta: the compute type's scalar (half, float or double).
    float f[2];
    double d[2];
    uint16_t hv[2];
    const bool c64 = a.compute == CUBLAS_COMPUTE_64F || a.compute == CUBLAS_COMPUTE_64F_PEDANTIC;
    const bool c16 = a.compute == CUBLAS_COMPUTE_16F || a.compute == CUBLAS_COMPUTE_16F_PEDANTIC;
    auto scal = [&](const BlasScalar& s, int i) -> const void* {
      if (s.device) return reinterpret_cast<const void*>(s.dptr);
      if (c64) return &(d[i] = s.value);
      if (c16) {
        __half x = __float2half(float(s.value));
        std::memcpy(&hv[i], &x, 2);
        return &hv[i];
      }
      return &(f[i] = float(s.value));
    };
    const void* al = scal(g.alpha, 0);
    const void* be = scal(g.beta, 1);
    const auto ct = cublasComputeType_t(a.compute);
    const auto algo = cublasGemmAlgo_t(a.algo);
    using H = cublasHandle_t;
    using O = cublasOperation_t;
    using D = cudaDataType;
    if (a.mode == kBlasOne)
      return map(lib().cublasGemmEx(h, op(g.ta), op(g.tb), g.m, g.n, g.k, al, dp<const void>(g.A), D(a.atype),
                                    int(g.lda), dp<const void>(g.B), D(a.btype), int(g.ldb), be, dp<void>(g.C),
                                    D(a.ctype), int(g.ldc), ct, algo));
    if (a.mode == kBlasStrided) {
      auto fs = fn<cublasStatus_t (*)(H, O, O, int, int, int, const void*, const void*, D, int, long long, const void*,
                                      D, int, long long, const void*, void*, D, int, long long, int,
                                      cublasComputeType_t, cublasGemmAlgo_t)>("cublasGemmStridedBatchedEx");
      return WH_CALL(fs, h, op(g.ta), op(g.tb), g.m, g.n, g.k, al, dp<const void>(g.A), D(a.atype), int(g.lda), a.sa,
                     dp<const void>(g.B), D(a.btype), int(g.ldb), a.sb, be, dp<void>(g.C), D(a.ctype), int(g.ldc), a.sc,
                     a.batch, ct, algo);
    }
    auto fb = fn<cublasStatus_t (*)(H, O, O, int, int, int, const void*, const void* const*, D, int,
                                    const void* const*, D, int, const void*, void* const*, D, int, int,
                                    cublasComputeType_t, cublasGemmAlgo_t)>("cublasGemmBatchedEx");
    return WH_CALL(fb, h, op(g.ta), op(g.tb), g.m, g.n, g.k, al, dp<const void* const>(g.A), D(a.atype), int(g.lda),
                   dp<const void* const>(g.B), D(a.btype), int(g.ldb), be, dp<void* const>(g.C), D(a.ctype),
                   int(g.ldc), a.batch, ct, algo);
  }

  template <class T>
  Err lu_t(cublasHandle_t h, const BlasLuArgs& a) {
    const std::string p = "cublas" + std::string(pre<T>());
    using H = cublasHandle_t;
    int* piv = dp<int>(a.pivots);
    int* info = dp<int>(a.info);
    const int n = a.n, lda = int(a.lda), ldc = int(a.ldc);
    switch (a.routine) {
      case kLuGetrf: {
        auto f = fn<cublasStatus_t (*)(H, int, T* const*, int, int*, int*, int)>(p + "getrfBatched");
        return WH_CALL(f, h, n, dp<T* const>(a.A), lda, piv, info, a.batch);
      }
      case kLuGetri: {
        auto f = fn<cublasStatus_t (*)(H, int, const T* const*, int, const int*, T* const*, int, int*, int)>(
            p + "getriBatched");
        return WH_CALL(f, h, n, dp<const T* const>(a.A), lda, piv, dp<T* const>(a.C), ldc, info, a.batch);
      }
      case kLuGetrs: {
        auto f = fn<cublasStatus_t (*)(H, cublasOperation_t, int, int, const T* const*, int, const int*, T* const*, int,
                                       int*, int)>(p + "getrsBatched");
        int hinfo = 0;
        return WH_CALL(f, h, op(a.trans), n, a.nrhs, dp<const T* const>(a.A), lda, piv, dp<T* const>(a.C), ldc, &hinfo,
                       a.batch);
      }
      case kLuMatinv: {
        auto f = fn<cublasStatus_t (*)(H, int, const T* const*, int, T* const*, int, int*, int)>(p + "matinvBatched");
        return WH_CALL(f, h, n, dp<const T* const>(a.A), lda, dp<T* const>(a.C), ldc, info, a.batch);
      }
      default: return cudaErrorInvalidValue;
    }
  }
  Err lu_batched(BlasHandle& hb, const BlasCall& c, const BlasLuArgs& a) override {
    cublasHandle_t h = prep(hb, c);
    return by_type(a.type, [&](auto t) { return lu_t<decltype(t)>(h, a); });
  }
  // info is cuBLAS's host int: the guest has checked the arguments already.
  template <class T>
  Err geqrf_t(cublasHandle_t h, const BlasGeqrfArgs& a) {
    auto f = fn<cublasStatus_t (*)(cublasHandle_t, int, int, T* const*, int, T* const*, int*, int)>(
        "cublas" + std::string(pre<T>()) + "geqrfBatched");
    int hinfo = 0;
    return WH_CALL(f, h, a.m, a.n, dp<T* const>(a.A), int(a.lda), dp<T* const>(a.tau), &hinfo, a.batch);
  }
  Err geqrf_batched(BlasHandle& hb, const BlasCall& c, const BlasGeqrfArgs& a) override {
    if (a.batch == 0) return cudaSuccess;
    cublasHandle_t h = prep(hb, c);
    return by_type(a.type, [&](auto t) { return geqrf_t<decltype(t)>(h, a); });
  }
#undef WH_CALL

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
