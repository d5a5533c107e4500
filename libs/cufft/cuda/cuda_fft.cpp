// The GPU's FFT: NVIDIA's libcufft.so.12, loaded with dlopen so the server
// builds and runs without it. One real cuFFT plan per guest plan, made
// while the session's CUDA context is current (cuFFT plans belong to the
// context current at planning), with cufftMakePlanMany64 on the explicit
// layout the session resolved; before every execution the context is made
// current again and the call's stream set on the plan. cuFFT allocates its
// own work area (auto-allocation), so the guest's work area is not used.
// 16-bit plans (half, bf16) are made with cufftXtMakePlanMany and run with
// cufftXtExec, as the guest's program asked.
//
// NOTE: written without a GPU (none lent to the task that wrote it); it
// compiles against the CUDA 13 headers but has NOT been run. See
// docs/hardware.md.
#include <cufft.h>
#include <cufftXt.h>
#include <dlfcn.h>

#include <mutex>

#include "wormhole/server/vendor_lib.hpp"
#include "wormhole/server/fft.hpp"

namespace wh::server {

namespace {

#define WH_CUFFT_FUNCS(X) \
  X(cufftCreate)          \
  X(cufftDestroy)         \
  X(cufftMakePlanMany64)  \
  X(cufftGetSize)         \
  X(cufftSetStream)       \
  X(cufftExecC2C)         \
  X(cufftExecR2C)         \
  X(cufftExecC2R)         \
  X(cufftExecZ2Z)         \
  X(cufftExecD2Z)         \
  X(cufftExecZ2D)          \
  X(cufftXtMakePlanMany)  \
  X(cufftXtExec)

WH_VENDOR_LIBRARY(Lib, lib, "libcufft.so.12", WH_CUFFT_FUNCS)

Err map(cufftResult r) {
  switch (r) {
    case CUFFT_SUCCESS: return cudaSuccess;
    case CUFFT_INVALID_VALUE:
    case CUFFT_INVALID_SIZE:
    case CUFFT_INVALID_TYPE:
    case CUFFT_UNALIGNED_DATA: return cudaErrorInvalidValue;
    case CUFFT_INVALID_PLAN: return cudaErrorInvalidResourceHandle;
    case CUFFT_ALLOC_FAILED: return cudaErrorMemoryAllocation;
    case CUFFT_NOT_SUPPORTED:
    case CUFFT_NOT_IMPLEMENTED: return cudaErrorNotSupported;
    case CUFFT_EXEC_FAILED: return cudaErrorLaunchFailure;
    default: return cudaErrorUnknown;
  }
}

struct CuPlan : FftPlan {
  cufftHandle h = 0;
  bool made = false;
  bool in_place = false;  // the layout it was made for (basic R2C/C2R layouts differ)
  uint64_t work = 0;
  std::function<void()> make_current;
  ~CuPlan() override {
    if (made) {
      make_current();
      lib().cufftDestroy(h);
    }
  }
};

class CudaFft final : public Fft {
 public:
  explicit CudaFft(std::function<void()> mc) : make_current_(std::move(mc)) {}

  // The real plan is made at the first execution, when in-place or not is
  // known (the explicit layout depends on it).
  Err create(const FftDesc&, std::unique_ptr<FftPlan>* out) override {
    auto p = std::make_unique<CuPlan>();
    p->make_current = make_current_;
    *out = std::move(p);
    return cudaSuccess;
  }
  uint64_t work_size(const FftPlan& p) override { return static_cast<const CuPlan&>(p).work; }

  Err exec(FftPlan& fp, const FftDesc& d, const FftLayout& l, Stream* s, uint64_t in, uint64_t out,
           int direction) override {
    auto& p = static_cast<CuPlan&>(fp);
    make_current_();
    const bool in_place = in == out;
    if (p.made && p.in_place != in_place) {
      lib().cufftDestroy(p.h);
      p.made = false;
    }
    if (!p.made) {
      if (cufftResult r = lib().cufftCreate(&p.h); r != CUFFT_SUCCESS) return map(r);
      long long n[3], ie[3], oe[3];
      for (int k = 0; k < d.rank; k++) n[k] = d.n[k], ie[k] = l.in.embed[k], oe[k] = l.out.embed[k];
      size_t work = 0;
      cufftResult r;
      if (d.storage == FftStorage::Native) {
        r = lib().cufftMakePlanMany64(p.h, d.rank, n, ie, l.in.stride, l.in.dist, oe, l.out.stride, l.out.dist,
                                      cufftType(d.type), d.batch, &work);
      } else {
        const bool h = d.storage == FftStorage::Half;
        const cudaDataType real = h ? CUDA_R_16F : CUDA_R_16BF, cplx = h ? CUDA_C_16F : CUDA_C_16BF;
        const cudaDataType ti = fft_is_r2c(d.type) ? real : cplx, to = fft_is_c2r(d.type) ? real : cplx;
        r = lib().cufftXtMakePlanMany(p.h, d.rank, n, ie, l.in.stride, l.in.dist, ti, oe, l.out.stride, l.out.dist,
                                      to, d.batch, &work, cplx);
      }
      if (r != CUFFT_SUCCESS) {
        lib().cufftDestroy(p.h);
        return map(r);
      }
      p.made = true;
      p.in_place = in_place;
      p.work = work;
    }
    cudaStream_t st = s ? static_cast<cudaStream_t>(s->native()) : nullptr;
    if (cufftResult r = lib().cufftSetStream(p.h, st); r != CUFFT_SUCCESS) return map(r);
    void* i = reinterpret_cast<void*>(in);
    void* o = reinterpret_cast<void*>(out);
    cufftResult r;
    if (d.storage != FftStorage::Native) {
      const int dir = fft_is_r2c(d.type) ? CUFFT_FORWARD : fft_is_c2r(d.type) ? CUFFT_INVERSE : direction;
      return map(lib().cufftXtExec(p.h, i, o, dir));
    }
    switch (d.type) {
      case CUFFT_C2C: r = lib().cufftExecC2C(p.h, (cufftComplex*)i, (cufftComplex*)o, direction); break;
      case CUFFT_R2C: r = lib().cufftExecR2C(p.h, (cufftReal*)i, (cufftComplex*)o); break;
      case CUFFT_C2R: r = lib().cufftExecC2R(p.h, (cufftComplex*)i, (cufftReal*)o); break;
      case CUFFT_Z2Z: r = lib().cufftExecZ2Z(p.h, (cufftDoubleComplex*)i, (cufftDoubleComplex*)o, direction); break;
      case CUFFT_D2Z: r = lib().cufftExecD2Z(p.h, (cufftDoubleReal*)i, (cufftDoubleComplex*)o); break;
      case CUFFT_Z2D: r = lib().cufftExecZ2D(p.h, (cufftDoubleComplex*)i, (cufftDoubleReal*)o); break;
      default: return cudaErrorInvalidValue;
    }
    return map(r);
  }

 private:
  std::function<void()> make_current_;
};

}  // namespace

std::unique_ptr<Fft> make_cuda_fft(std::function<void()> make_current, std::string* err) {
  Lib& l = lib();
  if (!l.ok) {
    if (err) *err = l.error;
    return nullptr;
  }
  return std::make_unique<CudaFft>(std::move(make_current));
}

}  // namespace wh::server
