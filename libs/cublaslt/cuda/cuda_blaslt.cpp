// The GPU's cuBLASLt: NVIDIA's libcublasLt.so.13, loaded with dlopen so the
// server builds and runs without it. One real cublasLtHandle_t per guest
// handle, made while the session's CUDA context is current. A matmul
// rebuilds the descriptor and the four layouts from the (checked) request,
// then calls cublasLtMatmul on the call's stream with algo NULL: cuBLASLt
// runs its own heuristic for the real GPU (the guest's algorithm describes
// the sim device's single kernel and is not forwarded). Host scalars are
// passed from the request's copy of their bits.
//
// NOTE: written without a GPU (none lent to the task that wrote it); it
// compiles against the CUDA 13 headers but has NOT been run. See
// docs/hardware.md.
#include <cublasLt.h>
#include <dlfcn.h>

#include <mutex>

#include "wormhole/server/vendor_lib.hpp"
#include "wormhole/server/blaslt.hpp"

namespace wh::server {

namespace {

using namespace wh::proto;

#define WH_CUBLASLT_FUNCS(X)         \
  X(cublasLtCreate)                  \
  X(cublasLtDestroy)                 \
  X(cublasLtGetVersion)              \
  X(cublasLtMatmulDescCreate)        \
  X(cublasLtMatmulDescDestroy)       \
  X(cublasLtMatmulDescSetAttribute)  \
  X(cublasLtMatrixLayoutCreate)      \
  X(cublasLtMatrixLayoutDestroy)     \
  X(cublasLtMatrixLayoutSetAttribute) \
  X(cublasLtMatmul)                  \
  X(cublasLtMatrixTransformDescCreate) \
  X(cublasLtMatrixTransformDescDestroy) \
  X(cublasLtMatrixTransformDescSetAttribute) \
  X(cublasLtMatrixTransform)

WH_VENDOR_LIBRARY(Lib, lib, "libcublasLt.so.13", WH_CUBLASLT_FUNCS)

Err map(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return cudaSuccess;
    case CUBLAS_STATUS_INVALID_VALUE: return cudaErrorInvalidValue;
    case CUBLAS_STATUS_NOT_SUPPORTED:
    case CUBLAS_STATUS_ARCH_MISMATCH: return cudaErrorNotSupported;
    case CUBLAS_STATUS_ALLOC_FAILED: return cudaErrorMemoryAllocation;
    case CUBLAS_STATUS_NOT_INITIALIZED: return cudaErrorInitializationError;
    default: return cudaErrorLaunchFailure;
  }
}

struct CuLtHandle : LtHandle {
  cublasLtHandle_t h = nullptr;
  std::function<void()> make_current;
  ~CuLtHandle() override {
    if (h) {
      make_current();
      lib().cublasLtDestroy(h);
    }
  }
};

// Descriptor and layouts of one call, destroyed on every path.
struct CallObjects {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t lay[4] = {nullptr, nullptr, nullptr, nullptr};
  ~CallObjects() {
    for (auto l : lay)
      if (l) lib().cublasLtMatrixLayoutDestroy(l);
    if (desc) lib().cublasLtMatmulDescDestroy(desc);
  }
};

class CudaBlasLt final : public BlasLt {
 public:
  explicit CudaBlasLt(std::function<void()> mc) : make_current_(std::move(mc)) {}

  Err create(std::unique_ptr<LtHandle>* out) override {
    make_current_();
    auto h = std::make_unique<CuLtHandle>();
    h->make_current = make_current_;
    if (cublasStatus_t st = lib().cublasLtCreate(&h->h); st != CUBLAS_STATUS_SUCCESS) {
      h->h = nullptr;
      return map(st);
    }
    *out = std::move(h);
    return cudaSuccess;
  }
  int version() const override { return int(lib().cublasLtGetVersion()); }

  Err matmul(LtHandle& lh, Stream* s, const LtMatmulReq& r, const LtShape& sh) override {
    auto& h = static_cast<CuLtHandle&>(lh);
    make_current_();
    Lib& L = lib();
    CallObjects o;
    cublasStatus_t st = L.cublasLtMatmulDescCreate(&o.desc, cublasComputeType_t(r.compute), cudaDataType(r.scale_type));
    auto set = [&](cublasLtMatmulDescAttributes_t a, const auto& v) {
      if (st == CUBLAS_STATUS_SUCCESS) st = L.cublasLtMatmulDescSetAttribute(o.desc, a, &v, sizeof(v));
    };
    const int32_t ta = int32_t(r.transa), tb = int32_t(r.transb), pm = int32_t(r.pointer_mode);
    set(CUBLASLT_MATMUL_DESC_TRANSA, ta);
    set(CUBLASLT_MATMUL_DESC_TRANSB, tb);
    set(CUBLASLT_MATMUL_DESC_POINTER_MODE, pm);
    set(CUBLASLT_MATMUL_DESC_EPILOGUE, r.epilogue);
    if (sh.bias_bytes) {
      const void* bias = reinterpret_cast<const void*>(r.bias);
      set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
      set(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, sh.bias_type);
      set(CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, r.bias_stride);
    }
    if (sh.aux_bytes) {
      void* aux = reinterpret_cast<void*>(r.aux);
      set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux);
      set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, r.aux_ld);
      set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, r.aux_stride);
      if (!lt_aux_is_mask(r.epilogue)) set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, sh.aux_type);
    }
    if (r.pointer_mode == kLtPtrAlphaVecBetaHost) set(CUBLASLT_MATMUL_DESC_ALPHA_VECTOR_BATCH_STRIDE, r.alpha_stride);
    for (char w : {'A', 'B', 'C', 'D'}) {
      LtOperand x = lt_operand(r, w);
      cublasLtMatrixLayout_t& l = o.lay[w - 'A'];
      if (st == CUBLAS_STATUS_SUCCESS)
        st = L.cublasLtMatrixLayoutCreate(&l, cudaDataType(x.type), uint64_t(x.rows), uint64_t(x.cols), x.ld);
      auto lset = [&](cublasLtMatrixLayoutAttribute_t a, const auto& v) {
        if (st == CUBLAS_STATUS_SUCCESS) st = L.cublasLtMatrixLayoutSetAttribute(l, a, &v, sizeof(v));
      };
      lset(CUBLASLT_MATRIX_LAYOUT_ORDER, x.order);
      lset(CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, x.batch);
      lset(CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, x.stride);
    }
    if (st != CUBLAS_STATUS_SUCCESS) return map(st);
    // Host scalars: the request's bits (a float, or a half in the low 16 bits).
    const bool alpha_host = r.pointer_mode == kLtPtrHost;
    const bool beta_host = r.pointer_mode == kLtPtrHost || r.pointer_mode == kLtPtrAlphaVecBetaHost;
    const uint64_t alpha_bits = r.alpha, beta_bits = r.beta;
    const void* alpha = alpha_host ? static_cast<const void*>(&alpha_bits) : reinterpret_cast<const void*>(r.alpha);
    const void* beta = beta_host ? static_cast<const void*>(&beta_bits) : reinterpret_cast<const void*>(r.beta);
    cudaStream_t stream = s ? static_cast<cudaStream_t>(s->native()) : nullptr;
    st = L.cublasLtMatmul(h.h, o.desc, alpha, reinterpret_cast<const void*>(r.A), o.lay[0],
                          reinterpret_cast<const void*>(r.B), o.lay[1], beta, reinterpret_cast<const void*>(r.C),
                          o.lay[2], reinterpret_cast<void*>(r.D), o.lay[3], nullptr,
                          reinterpret_cast<void*>(r.workspace), size_t(r.workspace_size), stream);
    return map(st);
  }

  Err transform(LtHandle& lh, Stream* s, const LtTransformReq& r, const LtTransformShape& sh) override {
    auto& h = static_cast<CuLtHandle&>(lh);
    make_current_();
    Lib& L = lib();
    struct Objects {
      cublasLtMatrixTransformDesc_t desc = nullptr;
      cublasLtMatrixLayout_t lay[3] = {nullptr, nullptr, nullptr};
      ~Objects() {
        for (auto l : lay)
          if (l) lib().cublasLtMatrixLayoutDestroy(l);
        if (desc) lib().cublasLtMatrixTransformDescDestroy(desc);
      }
    } o;
    cublasStatus_t st = L.cublasLtMatrixTransformDescCreate(&o.desc, cudaDataType(r.scale_type));
    auto set = [&](cublasLtMatrixTransformDescAttributes_t a, int32_t v) {
      if (st == CUBLAS_STATUS_SUCCESS) st = L.cublasLtMatrixTransformDescSetAttribute(o.desc, a, &v, sizeof(v));
    };
    set(CUBLASLT_MATRIX_TRANSFORM_DESC_POINTER_MODE, int32_t(r.pointer_mode));
    set(CUBLASLT_MATRIX_TRANSFORM_DESC_TRANSA, int32_t(r.transa));
    set(CUBLASLT_MATRIX_TRANSFORM_DESC_TRANSB, int32_t(r.transb));
    const LtOperand ops[3] = {{r.A, r.a_rows, r.a_cols, r.a_ld, r.a_stride, r.a_type, r.a_order, r.a_batch},
                              {r.B, r.b_rows, r.b_cols, r.b_ld, r.b_stride, r.b_type, r.b_order, r.b_batch},
                              {r.C, r.c_rows, r.c_cols, r.c_ld, r.c_stride, r.c_type, r.c_order, r.c_batch}};
    for (int i = 0; i < 3; i++) {
      if (i == 1 && !sh.use_b) continue;
      const LtOperand& x = ops[i];
      if (st == CUBLAS_STATUS_SUCCESS)
        st = L.cublasLtMatrixLayoutCreate(&o.lay[i], cudaDataType(x.type), uint64_t(x.rows), uint64_t(x.cols), x.ld);
      auto lset = [&](cublasLtMatrixLayoutAttribute_t a, const auto& v) {
        if (st == CUBLAS_STATUS_SUCCESS) st = L.cublasLtMatrixLayoutSetAttribute(o.lay[i], a, &v, sizeof(v));
      };
      lset(CUBLASLT_MATRIX_LAYOUT_ORDER, x.order);
      lset(CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, x.batch);
      lset(CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, x.stride);
    }
    if (st != CUBLAS_STATUS_SUCCESS) return map(st);
    const bool host = r.pointer_mode == kLtPtrHost;
    const uint64_t alpha_bits = r.alpha, beta_bits = r.beta;
    const void* alpha = host ? static_cast<const void*>(&alpha_bits) : reinterpret_cast<const void*>(r.alpha);
    const void* beta = host ? static_cast<const void*>(&beta_bits) : reinterpret_cast<const void*>(r.beta);
    cudaStream_t stream = s ? static_cast<cudaStream_t>(s->native()) : nullptr;
    st = L.cublasLtMatrixTransform(h.h, o.desc, alpha, reinterpret_cast<const void*>(r.A), o.lay[0], beta,
                                   sh.use_b ? reinterpret_cast<const void*>(r.B) : nullptr, o.lay[1],
                                   reinterpret_cast<void*>(r.C), o.lay[2], stream);
    return map(st);
  }

 private:
  std::function<void()> make_current_;
};

}  // namespace

std::unique_ptr<BlasLt> make_cuda_blaslt(std::function<void()> make_current, std::string* err) {
  Lib& l = lib();
  if (!l.ok) {
    if (err) *err = l.error;
    return nullptr;
  }
  return std::make_unique<CudaBlasLt>(std::move(make_current));
}

}  // namespace wh::server
