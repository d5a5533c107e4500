// The GPU's cuRAND: NVIDIA's libcurand.so.10, loaded with dlopen so the
// server builds and runs without it. One real device generator per guest
// generator, made while the session's CUDA context is current; settings are
// applied as they arrive and, before every generation, the context is made
// current again and the call's stream set on the generator. The numbers are
// then exactly a GPU's (the sim device reproduces them where documented).
//
// NOTE: written without a GPU (none lent to the task that wrote it); it
// compiles against the CUDA 13 headers but has NOT been run. See
// docs/hardware.md.
#include <curand.h>
#include <dlfcn.h>

#include <mutex>

#include "wormhole/server/vendor_lib.hpp"
#include "curand_api.def"
#include "wormhole/server/rand.hpp"

namespace wh::server {

namespace {

using namespace wh::proto;

#define WH_CURAND_FUNCS(X)                    \
  X(curandCreateGenerator)                    \
  X(curandDestroyGenerator)                   \
  X(curandSetStream)                          \
  X(curandSetPseudoRandomGeneratorSeed)       \
  X(curandSetGeneratorOffset)                 \
  X(curandSetGeneratorOrdering)               \
  X(curandSetQuasiRandomGeneratorDimensions)  \
  X(curandGenerate)                           \
  X(curandGenerateLongLong)                   \
  X(curandGenerateUniform)                    \
  X(curandGenerateUniformDouble)              \
  X(curandGenerateNormal)                     \
  X(curandGenerateNormalDouble)               \
  X(curandGenerateLogNormal)                  \
  X(curandGenerateLogNormalDouble)            \
  X(curandGeneratePoisson)

WH_VENDOR_LIBRARY(Lib, lib, "libcurand.so.10", WH_CURAND_FUNCS)

Err map(curandStatus_t r) {
  switch (r) {
    case CURAND_STATUS_SUCCESS: return cudaSuccess;
    case CURAND_STATUS_ALLOCATION_FAILED: return cudaErrorMemoryAllocation;
    case CURAND_STATUS_NOT_INITIALIZED: return cudaErrorInvalidResourceHandle;
    case CURAND_STATUS_TYPE_ERROR:
    case CURAND_STATUS_OUT_OF_RANGE:
    case CURAND_STATUS_LENGTH_NOT_MULTIPLE: return cudaErrorInvalidValue;
    case CURAND_STATUS_DOUBLE_PRECISION_REQUIRED:
    case CURAND_STATUS_ARCH_MISMATCH: return cudaErrorNotSupported;
    case CURAND_STATUS_LAUNCH_FAILURE: return cudaErrorLaunchFailure;
    default: return cudaErrorUnknown;
  }
}

struct CuGen : RandGen {
  curandGenerator_t g = nullptr;
  std::function<void()> make_current;
  ~CuGen() override {
    if (g) {
      make_current();
      lib().curandDestroyGenerator(g);
    }
  }
};

class CudaRand final : public Rand {
 public:
  explicit CudaRand(std::function<void()> mc) : make_current_(std::move(mc)) {}

  Err create(const RandSettings& s, std::unique_ptr<RandGen>* out) override {
    make_current_();
    auto g = std::make_unique<CuGen>();
    g->make_current = make_current_;
    if (curandStatus_t r = lib().curandCreateGenerator(&g->g, curandRngType_t(s.type)); r != CURAND_STATUS_SUCCESS) {
      g->g = nullptr;
      return map(r);
    }
    *out = std::move(g);
    return cudaSuccess;
  }
  Err set(RandGen& rg, const RandSettings& s, uint32_t what) override {
    auto& g = static_cast<CuGen&>(rg);
    make_current_();
    curandStatus_t r = CURAND_STATUS_SUCCESS;
    if (what & kRandSetSeed) r = lib().curandSetPseudoRandomGeneratorSeed(g.g, s.seed);
    if (r == CURAND_STATUS_SUCCESS && (what & kRandSetDims))
      r = lib().curandSetQuasiRandomGeneratorDimensions(g.g, s.dims);
    if (r == CURAND_STATUS_SUCCESS && (what & kRandSetOrdering))
      r = lib().curandSetGeneratorOrdering(g.g, curandOrdering_t(s.ordering));
    if (r == CURAND_STATUS_SUCCESS && (what & kRandSetOffset)) r = lib().curandSetGeneratorOffset(g.g, s.offset);
    return map(r);
  }
  // The library keeps its own offset, advanced by each generation exactly
  // as the session advances its copy.
  Err generate(RandGen& rg, const RandSettings&, Stream* s, int kind, uint64_t out, uint64_t n, double p0,
               double p1) override {
    auto& g = static_cast<CuGen&>(rg);
    make_current_();
    cudaStream_t st = s ? static_cast<cudaStream_t>(s->native()) : nullptr;
    if (curandStatus_t r = lib().curandSetStream(g.g, st); r != CURAND_STATUS_SUCCESS) return map(r);
    void* o = reinterpret_cast<void*>(out);
    curandStatus_t r;
    switch (kind) {
      case kRandBits32: r = lib().curandGenerate(g.g, (unsigned*)o, n); break;
      case kRandBits64: r = lib().curandGenerateLongLong(g.g, (unsigned long long*)o, n); break;
      case kRandUniform: r = lib().curandGenerateUniform(g.g, (float*)o, n); break;
      case kRandUniformD: r = lib().curandGenerateUniformDouble(g.g, (double*)o, n); break;
      case kRandNormal: r = lib().curandGenerateNormal(g.g, (float*)o, n, float(p0), float(p1)); break;
      case kRandNormalD: r = lib().curandGenerateNormalDouble(g.g, (double*)o, n, p0, p1); break;
      case kRandLogNormal: r = lib().curandGenerateLogNormal(g.g, (float*)o, n, float(p0), float(p1)); break;
      case kRandLogNormalD: r = lib().curandGenerateLogNormalDouble(g.g, (double*)o, n, p0, p1); break;
      case kRandPoisson: r = lib().curandGeneratePoisson(g.g, (unsigned*)o, n, p0); break;
      default: return cudaErrorInvalidValue;
    }
    return map(r);
  }

 private:
  std::function<void()> make_current_;
};

}  // namespace

std::unique_ptr<Rand> make_cuda_rand(std::function<void()> make_current, std::string* err) {
  Lib& l = lib();
  if (!l.ok) {
    if (err) *err = l.error;
    return nullptr;
  }
  return std::make_unique<CudaRand>(std::move(make_current));
}

}  // namespace wh::server
