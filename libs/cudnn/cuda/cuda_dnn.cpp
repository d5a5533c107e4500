// The GPU's cuDNN: NVIDIA's libcudnn.so.9, loaded with dlopen so the server
// builds and runs without it. One cuDNN handle per context, made while the
// session's CUDA context is current; before every call the context is made
// current again and the call's stream set on the handle. The descriptors
// each request carries (checked by the session) become cuDNN descriptors
// for the duration of the call. Convolutions use algorithm 0 of each
// direction (implicit GEMM forward, ALGO_0 backward), which need no work
// area, so the guest's work area is not used.
//
// NOTE: written without a GPU (none lent to the task that wrote it); it
// compiles against the CUDA 13 / cuDNN 9 headers but has NOT been run. See
// docs/hardware.md.
#include <cuda.h>
#include <cudnn.h>
#include <dlfcn.h>

#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

#include "wormhole/server/vendor_lib.hpp"
#include "wormhole/server/dnn.hpp"

namespace wh::server {

namespace {

using namespace wh::proto;

#define WH_CUDNN_FUNCS(X)                 \
  X(cudnnCreate)                          \
  X(cudnnDestroy)                         \
  X(cudnnSetStream)                       \
  X(cudnnCreateTensorDescriptor)          \
  X(cudnnSetTensorNdDescriptor)           \
  X(cudnnDestroyTensorDescriptor)         \
  X(cudnnCreateFilterDescriptor)          \
  X(cudnnSetFilterNdDescriptor)           \
  X(cudnnDestroyFilterDescriptor)         \
  X(cudnnCreateConvolutionDescriptor)     \
  X(cudnnSetConvolutionNdDescriptor)      \
  X(cudnnSetConvolutionGroupCount)        \
  X(cudnnSetConvolutionMathType)          \
  X(cudnnDestroyConvolutionDescriptor)    \
  X(cudnnCreatePoolingDescriptor)         \
  X(cudnnSetPoolingNdDescriptor)          \
  X(cudnnDestroyPoolingDescriptor)        \
  X(cudnnCreateActivationDescriptor)      \
  X(cudnnSetActivationDescriptor)         \
  X(cudnnSetActivationDescriptorSwishBeta) \
  X(cudnnDestroyActivationDescriptor)     \
  X(cudnnConvolutionForward)              \
  X(cudnnGetConvolutionForwardWorkspaceSize) \
  X(cudnnConvolutionBiasActivationForward) \
  X(cudnnConvolutionBackwardData)         \
  X(cudnnConvolutionBackwardFilter)       \
  X(cudnnConvolutionBackwardBias)         \
  X(cudnnAddTensor)                       \
  X(cudnnPoolingForward)                  \
  X(cudnnPoolingBackward)                 \
  X(cudnnActivationForward)               \
  X(cudnnActivationBackward)              \
  X(cudnnSoftmaxForward)                  \
  X(cudnnSoftmaxBackward)                 \
  X(cudnnTransformTensor)                 \
  X(cudnnCreateOpTensorDescriptor)        \
  X(cudnnSetOpTensorDescriptor)           \
  X(cudnnDestroyOpTensorDescriptor)       \
  X(cudnnOpTensor)                        \
  X(cudnnSetTensor)                       \
  X(cudnnScaleTensor)                     \
  X(cudnnBatchNormalizationForwardTraining) \
  X(cudnnBatchNormalizationForwardInference) \
  X(cudnnBatchNormalizationBackward)      \
  X(cudnnCreateLRNDescriptor)             \
  X(cudnnSetLRNDescriptor)                \
  X(cudnnDestroyLRNDescriptor)            \
  X(cudnnLRNCrossChannelForward)          \
  X(cudnnLRNCrossChannelBackward)         \
  X(cudnnCreateDropoutDescriptor)         \
  X(cudnnDestroyDropoutDescriptor)        \
  X(cudnnDropoutGetStatesSize)            \
  X(cudnnDropoutGetReserveSpaceSize)      \
  X(cudnnSetDropoutDescriptor)            \
  X(cudnnRestoreDropoutDescriptor)        \
  X(cudnnDropoutForward)                  \
  X(cudnnDropoutBackward)                 \
  X(cudnnCreateReduceTensorDescriptor)    \
  X(cudnnSetReduceTensorDescriptor)       \
  X(cudnnDestroyReduceTensorDescriptor)   \
  X(cudnnGetReductionWorkspaceSize)       \
  X(cudnnReduceTensor)

WH_VENDOR_LIBRARY(Lib, lib, "libcudnn.so.9", WH_CUDNN_FUNCS)

// Device memory of the backend's own (dropout states and masks, reduction
// work areas) from the driver the cuda backend loaded.
#define WH_CUDNN_CU_FUNCS(X) X(cuMemAlloc_v2) X(cuMemFree_v2)
WH_VENDOR_LIBRARY(Cu, cu, "libcuda.so.1", WH_CUDNN_CU_FUNCS)

Err map(cudnnStatus_t r) {
  if (r == CUDNN_STATUS_SUCCESS) return cudaSuccess;
  if (r >= 2000 && r < 3000) return cudaErrorInvalidValue;
  if (r >= 3000 && r < 4000) return cudaErrorNotSupported;
  if (r == CUDNN_STATUS_NOT_INITIALIZED) return cudaErrorInitializationError;
  return cudaErrorLaunchFailure;
}

// A call's cuDNN descriptors, destroyed when it returns.
struct Descs {
  std::vector<cudnnTensorDescriptor_t> t;
  cudnnFilterDescriptor_t f = nullptr;
  cudnnConvolutionDescriptor_t c = nullptr;
  cudnnPoolingDescriptor_t p = nullptr;
  cudnnActivationDescriptor_t a = nullptr;
  cudnnLRNDescriptor_t l = nullptr;
  cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
  ~Descs() {
    for (auto d : t) lib().cudnnDestroyTensorDescriptor(d);
    if (f) lib().cudnnDestroyFilterDescriptor(f);
    if (c) lib().cudnnDestroyConvolutionDescriptor(c);
    if (p) lib().cudnnDestroyPoolingDescriptor(p);
    if (a) lib().cudnnDestroyActivationDescriptor(a);
    if (l) lib().cudnnDestroyLRNDescriptor(l);
  }
  void step(cudnnStatus_t r) {
    if (st == CUDNN_STATUS_SUCCESS) st = r;
  }
  cudnnTensorDescriptor_t tensor(const DnnTensor& d) {
    cudnnTensorDescriptor_t h = nullptr;
    step(lib().cudnnCreateTensorDescriptor(&h));
    if (!h) return nullptr;
    t.push_back(h);
    step(lib().cudnnSetTensorNdDescriptor(h, cudnnDataType_t(d.dtype), d.nb, d.dim, d.stride));
    return h;
  }
  cudnnFilterDescriptor_t filter(const DnnFilter& d) {
    step(lib().cudnnCreateFilterDescriptor(&f));
    if (f)
      step(lib().cudnnSetFilterNdDescriptor(f, cudnnDataType_t(d.dtype), cudnnTensorFormat_t(d.format), d.nb, d.dim));
    return f;
  }
  cudnnConvolutionDescriptor_t conv(const DnnConv& d) {
    step(lib().cudnnCreateConvolutionDescriptor(&c));
    if (!c) return nullptr;
    step(lib().cudnnSetConvolutionNdDescriptor(c, d.nb, d.pad, d.stride, d.dil, cudnnConvolutionMode_t(d.mode),
                                               cudnnDataType_t(d.dtype)));
    step(lib().cudnnSetConvolutionGroupCount(c, d.groups));
    step(lib().cudnnSetConvolutionMathType(c, cudnnMathType_t(d.math)));
    return c;
  }
  cudnnPoolingDescriptor_t pool(const DnnPool& d) {
    step(lib().cudnnCreatePoolingDescriptor(&p));
    if (p)
      step(lib().cudnnSetPoolingNdDescriptor(p, cudnnPoolingMode_t(d.mode), cudnnNanPropagation_t(d.nan_opt), d.nb,
                                             d.window, d.padding, d.stride));
    return p;
  }
  cudnnActivationDescriptor_t act(const DnnAct& d) {
    step(lib().cudnnCreateActivationDescriptor(&a));
    if (!a) return nullptr;
    step(lib().cudnnSetActivationDescriptor(a, cudnnActivationMode_t(d.mode), cudnnNanPropagation_t(d.nan_opt),
                                            d.coef));
    if (d.mode == CUDNN_ACTIVATION_SWISH) step(lib().cudnnSetActivationDescriptorSwishBeta(a, d.coef));
    return a;
  }
  cudnnLRNDescriptor_t lrn(const DnnLrn& d) {
    step(lib().cudnnCreateLRNDescriptor(&l));
    if (l) step(lib().cudnnSetLRNDescriptor(l, d.n, d.alpha, d.beta, d.k));
    return l;
  }
  // The descriptor of a wire struct, by its type (CudaDnn::with).
  cudnnTensorDescriptor_t make(const DnnTensor& d) { return tensor(d); }
  cudnnFilterDescriptor_t make(const DnnFilter& d) { return filter(d); }
  cudnnConvolutionDescriptor_t make(const DnnConv& d) { return conv(d); }
  cudnnPoolingDescriptor_t make(const DnnPool& d) { return pool(d); }
  cudnnActivationDescriptor_t make(const DnnAct& d) { return act(d); }
  cudnnLRNDescriptor_t make(const DnnLrn& d) { return lrn(d); }
};

void* P(uint64_t p) { return reinterpret_cast<void*>(p); }

class CudaDnn final : public Dnn {
 public:
  CudaDnn(std::function<void()> mc) : make_current_(std::move(mc)) {}
  ~CudaDnn() override {
    make_current_();
    for (auto& [k, st] : drop_) {
      if (st.d) lib().cudnnDestroyDropoutDescriptor(st.d);
      release(st.states);
    }
    for (auto& [k, m] : masks_) release(m.buf);
    for (auto& [k, w] : work_) release(w);
    if (h_) lib().cudnnDestroy(h_);
  }

  // Dropout and ReduceTensor. The guest sizes their buffers for the sim
  // device (a 64-byte generator state, one mask byte per element, no
  // reduction work area); NVIDIA's cuDNN asks for its own sizes. A state or
  // mask that does not fit the guest's buffer lives here instead, named by
  // that buffer's address (which is how the program names it), and each
  // stream gets a reduction work area.
  Err dropout_init(Stream* s, const DnnDropoutInitReq& rq) override {
    return call(s, [&](Descs&, const float*, const float*) {
      size_t need = 0;
      if (cudnnStatus_t r = lib().cudnnDropoutGetStatesSize(h_, &need)) return r;
      auto it = drop_.find(rq.statesp);
      if (it == drop_.end()) {
        if (drop_.size() >= kMaxSide) return CUDNN_STATUS_ALLOC_FAILED;
        it = drop_.emplace(rq.statesp, DropState{}).first;
      }
      DropState& st = it->second;
      if (!st.d)
        if (cudnnStatus_t r = lib().cudnnCreateDropoutDescriptor(&st.d)) return r;
      st.p = rq.states_size >= need ? rq.statesp : 0;
      if (!st.p && !reserve(st.states, need)) return CUDNN_STATUS_ALLOC_FAILED;
      if (!st.p) st.p = st.states.p;
      st.size = need;
      st.seed = rq.seed;
      return lib().cudnnSetDropoutDescriptor(st.d, h_, 0.0f, P(st.p), need, rq.seed);
    }, 0.0, 0.0);
  }
  Err dropout_fwd(Stream* s, const DnnDropoutFwdReq& rq) override {
    return call(s, [&](Descs& d, const float*, const float*) {
      DropState* st = nullptr;
      if (cudnnStatus_t r = restored(rq.statesp, rq.p, &st)) return r;
      auto x = d.tensor(rq.x);
      auto y = d.tensor(rq.y);
      if (d.st) return d.st;
      size_t rn = 0;
      if (cudnnStatus_t r = lib().cudnnDropoutGetReserveSpaceSize(x, &rn)) return r;
      uint64_t mask = rq.reservep;
      auto m = masks_.find(rq.reservep);
      if (rn > rq.reserve_size) {
        if (m == masks_.end()) {
          if (masks_.size() >= kMaxSide) return CUDNN_STATUS_ALLOC_FAILED;
          m = masks_.emplace(rq.reservep, Mask{}).first;
        }
        if (!reserve(m->second.buf, rn)) return CUDNN_STATUS_ALLOC_FAILED;
        mask = m->second.buf.p;
      } else if (m == masks_.end()) {
        if (masks_.size() >= kMaxSide) return CUDNN_STATUS_ALLOC_FAILED;
        m = masks_.emplace(rq.reservep, Mask{}).first;
      }
      m->second.states = rq.statesp;
      m->second.bytes = rn;
      return lib().cudnnDropoutForward(h_, st->d, x, P(rq.xp), y, P(rq.yp), P(mask), rn);
    }, 0.0, 0.0);
  }
  Err dropout_bwd(Stream* s, const DnnDropoutBwdReq& rq) override {
    return call(s, [&](Descs& d, const float*, const float*) {
      auto m = masks_.find(rq.reservep);
      if (m == masks_.end()) return CUDNN_STATUS_BAD_PARAM;  // no forward wrote this mask
      DropState* st = nullptr;
      if (cudnnStatus_t r = restored(m->second.states, rq.p, &st)) return r;
      auto dy = d.tensor(rq.dy);
      auto dx = d.tensor(rq.dx);
      if (d.st) return d.st;
      uint64_t mask = m->second.buf.p ? m->second.buf.p : rq.reservep;
      return lib().cudnnDropoutBackward(h_, st->d, dy, P(rq.dyp), dx, P(rq.dxp), P(mask), m->second.bytes);
    }, 0.0, 0.0);
  }
  Err reduce(Stream* s, const DnnReduceTensorReq& rq) override {
    return with(s, rq.alpha, rq.beta, std::tie(rq.a, rq.c), [&](const float* a, const float* b, auto at, auto ct) {
      cudnnReduceTensorDescriptor_t rd = nullptr;
      cudnnStatus_t r = lib().cudnnCreateReduceTensorDescriptor(&rd);
      if (!r)
        r = lib().cudnnSetReduceTensorDescriptor(rd, cudnnReduceTensorOp_t(rq.red.op), cudnnDataType_t(rq.red.comp),
                                                 cudnnNanPropagation_t(rq.red.nan_opt),
                                                 cudnnReduceTensorIndices_t(rq.red.indices),
                                                 cudnnIndicesType_t(rq.red.idx_type));
      size_t ws = 0;
      if (!r) r = lib().cudnnGetReductionWorkspaceSize(h_, rd, at, ct, &ws);
      DevBuf& w = work_[s ? s->native() : nullptr];
      if (!r && !reserve(w, ws)) r = CUDNN_STATUS_ALLOC_FAILED;
      if (!r)
        r = lib().cudnnReduceTensor(h_, rd, P(rq.indicesp), rq.indices_size, P(w.p), ws, a, at, P(rq.ap), b, ct,
                                    P(rq.cp));
      if (rd) lib().cudnnDestroyReduceTensorDescriptor(rd);
      return r;
    });
  }

  Err conv_fwd(Stream* s, const DnnConvFwdReq& rq) override {
    return with(s, rq.alpha, rq.beta, std::tie(rq.x, rq.w, rq.conv, rq.y),
                [&](const float* a, const float* b, auto x, auto w, auto c, auto y) {
      return lib().cudnnConvolutionForward(h_, a, x, P(rq.xp), w, P(rq.wp), c, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
                                           nullptr, 0, b, y, P(rq.yp));
    });
  }
  // cuDNN fuses IDENTITY only with IMPLICIT_PRECOMP_GEMM (RELU with any
  // algorithm), which may want a work area: the stream's, grown to fit.
  // alpha2 0: z is not read, and y stands in for it.
  Err conv_bias_act(Stream* s, const DnnConvBiasActReq& rq) override {
    return call(s, [&](Descs& d, const float* a1, const float* a2) {
      auto x = d.tensor(rq.x);
      auto w = d.filter(rq.w);
      auto c = d.conv(rq.conv);
      auto bias = d.tensor(rq.bias);
      auto act = d.act(rq.act);
      auto y = d.tensor(rq.y);
      auto z = *a2 != 0 ? d.tensor(rq.z) : y;
      if (d.st) return d.st;
      const auto algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
      size_t ws = 0;
      if (cudnnStatus_t r = lib().cudnnGetConvolutionForwardWorkspaceSize(h_, x, w, c, y, algo, &ws)) return r;
      DevBuf& wb = work_[s ? s->native() : nullptr];
      if (!reserve(wb, ws)) return CUDNN_STATUS_ALLOC_FAILED;
      return lib().cudnnConvolutionBiasActivationForward(h_, a1, x, P(rq.xp), w, P(rq.wp), c, algo, P(wb.p), ws, a2,
                                                         z, P(*a2 != 0 ? rq.zp : rq.yp), bias, P(rq.biasp), act, y,
                                                         P(rq.yp));
    }, rq.alpha1, rq.alpha2);
  }
  Err conv_bwd_data(Stream* s, const DnnConvBwdDataReq& rq) override {
    return with(s, rq.alpha, rq.beta, std::tie(rq.w, rq.dy, rq.conv, rq.dx),
                [&](const float* a, const float* b, auto w, auto dy, auto c, auto dx) {
      return lib().cudnnConvolutionBackwardData(h_, a, w, P(rq.wp), dy, P(rq.dyp), c, CUDNN_CONVOLUTION_BWD_DATA_ALGO_0,
                                                nullptr, 0, b, dx, P(rq.dxp));
    });
  }
  Err conv_bwd_filter(Stream* s, const DnnConvBwdFilterReq& rq) override {
    return with(s, rq.alpha, rq.beta, std::tie(rq.x, rq.dy, rq.conv, rq.dw),
                [&](const float* a, const float* b, auto x, auto dy, auto c, auto dw) {
      return lib().cudnnConvolutionBackwardFilter(h_, a, x, P(rq.xp), dy, P(rq.dyp), c,
                                                  CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, nullptr, 0, b, dw, P(rq.dwp));
    });
  }
  Err conv_bwd_bias(Stream* s, const DnnConvBwdBiasReq& rq) override {
    return with(s, rq.alpha, rq.beta, std::tie(rq.dy, rq.db), [&](const float* a, const float* b, auto dy, auto db) {
      return lib().cudnnConvolutionBackwardBias(h_, a, dy, P(rq.dyp), b, db, P(rq.dbp));
    });
  }
  Err add_tensor(Stream* s, const DnnAddTensorReq& rq) override {
    return with(s, rq.alpha, rq.beta, std::tie(rq.a, rq.c), [&](const float* a, const float* b, auto at, auto ct) {
      return lib().cudnnAddTensor(h_, a, at, P(rq.ap), b, ct, P(rq.cp));
    });
  }
  Err pool_fwd(Stream* s, const DnnPoolFwdReq& rq) override {
    return with(s, rq.alpha, rq.beta, std::tie(rq.pool, rq.x, rq.y), [&](const float* a, const float* b, auto p, auto x,
                                                                          auto y) {
      return lib().cudnnPoolingForward(h_, p, a, x, P(rq.xp), b, y, P(rq.yp));
    });
  }
  Err pool_bwd(Stream* s, const DnnPoolBwdReq& rq) override {
    return with(s, rq.alpha, rq.beta, std::tie(rq.pool, rq.y, rq.dy, rq.x, rq.dx),
                [&](const float* a, const float* b, auto p, auto y, auto dy, auto x, auto dx) {
      return lib().cudnnPoolingBackward(h_, p, a, y, P(rq.yp), dy, P(rq.dyp), x, P(rq.xp), b, dx, P(rq.dxp));
    });
  }
  Err act_fwd(Stream* s, const DnnActFwdReq& rq) override {
    return with(s, rq.alpha, rq.beta, std::tie(rq.act, rq.x, rq.y), [&](const float* a, const float* b, auto ad, auto x,
                                                                         auto y) {
      return lib().cudnnActivationForward(h_, ad, a, x, P(rq.xp), b, y, P(rq.yp));
    });
  }
  Err act_bwd(Stream* s, const DnnActBwdReq& rq) override {
    return with(s, rq.alpha, rq.beta, std::tie(rq.act, rq.y, rq.dy, rq.x, rq.dx),
                [&](const float* a, const float* b, auto ad, auto y, auto dy, auto x, auto dx) {
      return lib().cudnnActivationBackward(h_, ad, a, y, P(rq.yp), dy, P(rq.dyp), x, P(rq.xp), b, dx, P(rq.dxp));
    });
  }
  Err softmax_fwd(Stream* s, const DnnSoftmaxFwdReq& rq) override {
    return with(s, rq.alpha, rq.beta, std::tie(rq.x, rq.y), [&](const float* a, const float* b, auto x, auto y) {
      return lib().cudnnSoftmaxForward(h_, cudnnSoftmaxAlgorithm_t(rq.algo), cudnnSoftmaxMode_t(rq.mode), a, x,
                                       P(rq.xp), b, y, P(rq.yp));
    });
  }
  Err softmax_bwd(Stream* s, const DnnSoftmaxBwdReq& rq) override {
    return with(s, rq.alpha, rq.beta, std::tie(rq.y, rq.dy, rq.dx), [&](const float* a, const float* b, auto y,
                                                                        auto dy, auto dx) {
      return lib().cudnnSoftmaxBackward(h_, cudnnSoftmaxAlgorithm_t(rq.algo), cudnnSoftmaxMode_t(rq.mode), a, y,
                                        P(rq.yp), dy, P(rq.dyp), b, dx, P(rq.dxp));
    });
  }

  Err transform(Stream* s, const DnnTransformReq& rq) override {
    return with(s, rq.alpha, rq.beta, std::tie(rq.x, rq.y), [&](const float* a, const float* b, auto x, auto y) {
      return lib().cudnnTransformTensor(h_, a, x, P(rq.xp), b, y, P(rq.yp));
    });
  }
  Err op_tensor(Stream* s, const DnnOpTensorReq& rq) override {
    const float a1 = float(rq.alpha1), a2 = float(rq.alpha2);
    return call(s, [&](Descs& d, const float*, const float* b) {
      auto at = d.tensor(rq.a);
      const bool uses_b = rq.op != CUDNN_OP_TENSOR_SQRT;
      auto bt = d.tensor(uses_b ? rq.b : rq.a);  // SQRT ignores B
      auto ct = d.tensor(rq.c);
      cudnnOpTensorDescriptor_t od = nullptr;
      d.step(lib().cudnnCreateOpTensorDescriptor(&od));
      if (od)
        d.step(lib().cudnnSetOpTensorDescriptor(od, cudnnOpTensorOp_t(rq.op), CUDNN_DATA_FLOAT,
                                                cudnnNanPropagation_t(rq.nan_opt)));
      cudnnStatus_t r = d.st;
      if (!r)
        r = lib().cudnnOpTensor(h_, od, &a1, at, P(rq.ap), &a2, bt, P(uses_b ? rq.bp : rq.ap), b, ct, P(rq.cp));
      if (od) lib().cudnnDestroyOpTensorDescriptor(od);
      return r;
    }, 1.0, rq.beta);
  }
  // cudnnSetTensor takes its value in the tensor's own type (scaling
  // factors elsewhere are float for half and bfloat16 data).
  Err set_tensor(Stream* s, const DnnSetTensorReq& rq) override {
    alignas(8) unsigned char v[8] = {};
    const float f = float(rq.value);
    switch (rq.y.dtype) {
      case CUDNN_DATA_DOUBLE: std::memcpy(v, &rq.value, 8); break;
      case CUDNN_DATA_HALF: {
        _Float16 h = _Float16(f);
        std::memcpy(v, &h, 2);
        break;
      }
      case CUDNN_DATA_BFLOAT16: {  // round to nearest even on the upper half of the float
        uint32_t b;
        std::memcpy(&b, &f, 4);
        uint16_t r = f != f ? uint16_t(0x7fc0) : uint16_t((b + 0x7fff + ((b >> 16) & 1)) >> 16);
        std::memcpy(v, &r, 2);
        break;
      }
      case CUDNN_DATA_INT32: {
        int32_t i = int32_t(rq.value);
        std::memcpy(v, &i, 4);
        break;
      }
      case CUDNN_DATA_INT8: {
        int8_t i = int8_t(rq.value);
        std::memcpy(v, &i, 1);
        break;
      }
      default: std::memcpy(v, &f, 4);
    }
    return with(s, 0.0, 0.0, std::tie(rq.y), [&](const float*, const float*, auto y) {
      return lib().cudnnSetTensor(h_, y, P(rq.yp), v);
    });
  }
  Err scale_tensor(Stream* s, const DnnScaleTensorReq& rq) override {
    return with(s, rq.alpha, 0.0, std::tie(rq.y), [&](const float* a, const float*, auto y) {
      return lib().cudnnScaleTensor(h_, y, P(rq.yp), a);
    });
  }

  // Batch normalization and LRN map one to one.
  Err bn_fwd_train(Stream* s, const DnnBnFwdTrainReq& rq) override {
    return with(s, rq.alpha, rq.beta, std::tie(rq.x, rq.y, rq.bn), [&](const float* a, const float* b, auto x, auto y,
                                                                       auto bn) {
      return lib().cudnnBatchNormalizationForwardTraining(
          h_, cudnnBatchNormMode_t(rq.mode), a, b, x, P(rq.xp), y, P(rq.yp), bn, P(rq.scalep), P(rq.biasp), rq.factor,
          P(rq.rmeanp), P(rq.rvarp), rq.eps, P(rq.smeanp), P(rq.sinvp));
    });
  }
  Err bn_fwd_infer(Stream* s, const DnnBnFwdInferReq& rq) override {
    return with(s, rq.alpha, rq.beta, std::tie(rq.x, rq.y, rq.bn), [&](const float* a, const float* b, auto x, auto y,
                                                                       auto bn) {
      return lib().cudnnBatchNormalizationForwardInference(h_, cudnnBatchNormMode_t(rq.mode), a, b, x, P(rq.xp), y,
                                                           P(rq.yp), bn, P(rq.scalep), P(rq.biasp), P(rq.meanp),
                                                           P(rq.varp), rq.eps);
    });
  }
  Err bn_bwd(Stream* s, const DnnBnBwdReq& rq) override {
    const float ap = float(rq.alpha_p), bp = float(rq.beta_p);
    return with(s, rq.alpha, rq.beta, std::tie(rq.x, rq.dy, rq.dx, rq.bn),
                [&](const float* a, const float* b, auto x, auto dy, auto dx, auto bn) {
      return lib().cudnnBatchNormalizationBackward(h_, cudnnBatchNormMode_t(rq.mode), a, b, &ap, &bp, x, P(rq.xp), dy,
                                                   P(rq.dyp), dx, P(rq.dxp), bn, P(rq.scalep), P(rq.dscalep),
                                                   P(rq.dbiasp), rq.eps, P(rq.smeanp), P(rq.sinvp));
    });
  }
  Err lrn_fwd(Stream* s, const DnnLrnFwdReq& rq) override {
    return with(s, rq.alpha, rq.beta, std::tie(rq.x, rq.y, rq.lrn), [&](const float* a, const float* b, auto x, auto y,
                                                                        auto l) {
      return lib().cudnnLRNCrossChannelForward(h_, l, CUDNN_LRN_CROSS_CHANNEL_DIM1, a, x, P(rq.xp), b, y, P(rq.yp));
    });
  }
  Err lrn_bwd(Stream* s, const DnnLrnBwdReq& rq) override {
    return with(s, rq.alpha, rq.beta, std::tie(rq.y, rq.dy, rq.x, rq.dx, rq.lrn),
                [&](const float* a, const float* b, auto y, auto dy, auto x, auto dx, auto l) {
      return lib().cudnnLRNCrossChannelBackward(h_, l, CUDNN_LRN_CROSS_CHANNEL_DIM1, a, y, P(rq.yp), dy, P(rq.dyp), x,
                                                P(rq.xp), b, dx, P(rq.dxp));
    });
  }

 private:
  // Current context, the handle (made on first use), the stream; then the
  // call with float scalars (float, half and bfloat16 data all take float
  // scalars).
  template <class F>
  Err call(Stream* s, F&& f, double alpha, double beta) {
    make_current_();
    if (!h_)
      if (cudnnStatus_t r = lib().cudnnCreate(&h_); r != CUDNN_STATUS_SUCCESS) {
        h_ = nullptr;
        return map(r);
      }
    cudaStream_t st = s ? static_cast<cudaStream_t>(s->native()) : nullptr;
    if (cudnnStatus_t r = lib().cudnnSetStream(h_, st); r != CUDNN_STATUS_SUCCESS) return map(r);
    const float a = float(alpha), b = float(beta);
    Descs d;
    return map(f(d, &a, &b));
  }
  // call() for the common shape: the descriptors of `wire` (std::tie of the
  // request's wire structs) are made in order, then f(alpha, beta,
  // descriptor...) runs unless one of them failed.
  template <class... W, class F>
  Err with(Stream* s, double alpha, double beta, const std::tuple<const W&...>& wire, F&& f) {
    return call(s, [&](Descs& d, const float* a, const float* b) {
      return std::apply([&](const W&... w) {
        std::tuple<decltype(d.make(w))...> h{d.make(w)...};  // braces: left to right
        if (d.st) return d.st;
        return std::apply([&](auto... x) { return f(a, b, x...); }, h);
      }, wire);
    }, alpha, beta);
  }

  // Device memory the backend holds for a session (grown, never shrunk).
  struct DevBuf {
    uint64_t p = 0;
    size_t n = 0;
  };
  static bool reserve(DevBuf& b, size_t n) {
    if (n <= b.n) return true;
    if (!cu().ok) return false;
    release(b);
    CUdeviceptr p = 0;
    if (cu().cuMemAlloc_v2(&p, n) != CUDA_SUCCESS) return false;
    b.p = p, b.n = n;
    return true;
  }
  static void release(DevBuf& b) {
    if (b.p && cu().ok) cu().cuMemFree_v2(CUdeviceptr(b.p));
    b = {};
  }
  struct DropState {  // the generator behind one guest states buffer
    cudnnDropoutDescriptor_t d = nullptr;
    uint64_t p = 0;  // the states: the guest's buffer, or `states`
    size_t size = 0;
    unsigned long long seed = 0;
    DevBuf states;
  };
  struct Mask {       // the mask behind one guest reserve buffer
    uint64_t states = 0;  // the generator that drew it
    size_t bytes = 0;
    DevBuf buf;           // empty: the guest's buffer holds it
  };
  static constexpr size_t kMaxSide = 4096;  // distinct buffers per session
  // The generator behind a guest states buffer, its drop rate set to p;
  // BAD_PARAM when no cudnnSetDropoutDescriptor seeded those states.
  cudnnStatus_t restored(uint64_t statesp, double p, DropState** out) {
    auto it = drop_.find(statesp);
    if (it == drop_.end()) return CUDNN_STATUS_BAD_PARAM;
    DropState& st = it->second;
    *out = &st;
    return lib().cudnnRestoreDropoutDescriptor(st.d, h_, float(p), P(st.p), st.size, st.seed);
  }

  std::function<void()> make_current_;
  cudnnHandle_t h_ = nullptr;
  std::map<uint64_t, DropState> drop_;
  std::map<uint64_t, Mask> masks_;
  std::map<void*, DevBuf> work_;  // per stream
};

}  // namespace

std::unique_ptr<Dnn> make_cuda_dnn(std::function<void()> make_current, std::string* err) {
  Lib& l = lib();
  if (!l.ok) {
    if (err) *err = l.error;
    return nullptr;
  }
  return std::make_unique<CudaDnn>(std::move(make_current));
}

}  // namespace wh::server
