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
#include <cudnn.h>
#include <dlfcn.h>

#include <mutex>

#include "vendor_lib.hpp"
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
  X(cudnnLRNCrossChannelBackward)

WH_VENDOR_LIBRARY(Lib, lib, "libcudnn.so.9", WH_CUDNN_FUNCS)

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
  cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
  ~Descs() {
    for (auto d : t) lib().cudnnDestroyTensorDescriptor(d);
    if (f) lib().cudnnDestroyFilterDescriptor(f);
    if (c) lib().cudnnDestroyConvolutionDescriptor(c);
    if (p) lib().cudnnDestroyPoolingDescriptor(p);
    if (a) lib().cudnnDestroyActivationDescriptor(a);
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
};

void* P(uint64_t p) { return reinterpret_cast<void*>(p); }

class CudaDnn final : public Dnn {
 public:
  CudaDnn(std::function<void()> mc) : make_current_(std::move(mc)) {}
  ~CudaDnn() override {
    if (h_) {
      make_current_();
      lib().cudnnDestroy(h_);
    }
  }

  Err conv_fwd(Stream* s, const DnnConvFwdReq& rq) override {
    return call(s, [&](Descs& d, const float* a, const float* b) {
      auto x = d.tensor(rq.x);
      auto w = d.filter(rq.w);
      auto c = d.conv(rq.conv);
      auto y = d.tensor(rq.y);
      if (d.st) return d.st;
      return lib().cudnnConvolutionForward(h_, a, x, P(rq.xp), w, P(rq.wp), c, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
                                           nullptr, 0, b, y, P(rq.yp));
    }, rq.alpha, rq.beta);
  }
  Err conv_bwd_data(Stream* s, const DnnConvBwdDataReq& rq) override {
    return call(s, [&](Descs& d, const float* a, const float* b) {
      auto w = d.filter(rq.w);
      auto dy = d.tensor(rq.dy);
      auto c = d.conv(rq.conv);
      auto dx = d.tensor(rq.dx);
      if (d.st) return d.st;
      return lib().cudnnConvolutionBackwardData(h_, a, w, P(rq.wp), dy, P(rq.dyp), c, CUDNN_CONVOLUTION_BWD_DATA_ALGO_0,
                                                nullptr, 0, b, dx, P(rq.dxp));
    }, rq.alpha, rq.beta);
  }
  Err conv_bwd_filter(Stream* s, const DnnConvBwdFilterReq& rq) override {
    return call(s, [&](Descs& d, const float* a, const float* b) {
      auto x = d.tensor(rq.x);
      auto dy = d.tensor(rq.dy);
      auto c = d.conv(rq.conv);
      auto dw = d.filter(rq.dw);
      if (d.st) return d.st;
      return lib().cudnnConvolutionBackwardFilter(h_, a, x, P(rq.xp), dy, P(rq.dyp), c,
                                                  CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, nullptr, 0, b, dw, P(rq.dwp));
    }, rq.alpha, rq.beta);
  }
  Err conv_bwd_bias(Stream* s, const DnnConvBwdBiasReq& rq) override {
    return call(s, [&](Descs& d, const float* a, const float* b) {
      auto dy = d.tensor(rq.dy);
      auto db = d.tensor(rq.db);
      if (d.st) return d.st;
      return lib().cudnnConvolutionBackwardBias(h_, a, dy, P(rq.dyp), b, db, P(rq.dbp));
    }, rq.alpha, rq.beta);
  }
  Err add_tensor(Stream* s, const DnnAddTensorReq& rq) override {
    return call(s, [&](Descs& d, const float* a, const float* b) {
      auto at = d.tensor(rq.a);
      auto ct = d.tensor(rq.c);
      if (d.st) return d.st;
      return lib().cudnnAddTensor(h_, a, at, P(rq.ap), b, ct, P(rq.cp));
    }, rq.alpha, rq.beta);
  }
  Err pool_fwd(Stream* s, const DnnPoolFwdReq& rq) override {
    return call(s, [&](Descs& d, const float* a, const float* b) {
      auto p = d.pool(rq.pool);
      auto x = d.tensor(rq.x);
      auto y = d.tensor(rq.y);
      if (d.st) return d.st;
      return lib().cudnnPoolingForward(h_, p, a, x, P(rq.xp), b, y, P(rq.yp));
    }, rq.alpha, rq.beta);
  }
  Err pool_bwd(Stream* s, const DnnPoolBwdReq& rq) override {
    return call(s, [&](Descs& d, const float* a, const float* b) {
      auto p = d.pool(rq.pool);
      auto y = d.tensor(rq.y);
      auto dy = d.tensor(rq.dy);
      auto x = d.tensor(rq.x);
      auto dx = d.tensor(rq.dx);
      if (d.st) return d.st;
      return lib().cudnnPoolingBackward(h_, p, a, y, P(rq.yp), dy, P(rq.dyp), x, P(rq.xp), b, dx, P(rq.dxp));
    }, rq.alpha, rq.beta);
  }
  Err act_fwd(Stream* s, const DnnActFwdReq& rq) override {
    return call(s, [&](Descs& d, const float* a, const float* b) {
      auto ad = d.act(rq.act);
      auto x = d.tensor(rq.x);
      auto y = d.tensor(rq.y);
      if (d.st) return d.st;
      return lib().cudnnActivationForward(h_, ad, a, x, P(rq.xp), b, y, P(rq.yp));
    }, rq.alpha, rq.beta);
  }
  Err act_bwd(Stream* s, const DnnActBwdReq& rq) override {
    return call(s, [&](Descs& d, const float* a, const float* b) {
      auto ad = d.act(rq.act);
      auto y = d.tensor(rq.y);
      auto dy = d.tensor(rq.dy);
      auto x = d.tensor(rq.x);
      auto dx = d.tensor(rq.dx);
      if (d.st) return d.st;
      return lib().cudnnActivationBackward(h_, ad, a, y, P(rq.yp), dy, P(rq.dyp), x, P(rq.xp), b, dx, P(rq.dxp));
    }, rq.alpha, rq.beta);
  }
  Err softmax_fwd(Stream* s, const DnnSoftmaxFwdReq& rq) override {
    return call(s, [&](Descs& d, const float* a, const float* b) {
      auto x = d.tensor(rq.x);
      auto y = d.tensor(rq.y);
      if (d.st) return d.st;
      return lib().cudnnSoftmaxForward(h_, cudnnSoftmaxAlgorithm_t(rq.algo), cudnnSoftmaxMode_t(rq.mode), a, x,
                                       P(rq.xp), b, y, P(rq.yp));
    }, rq.alpha, rq.beta);
  }
  Err softmax_bwd(Stream* s, const DnnSoftmaxBwdReq& rq) override {
    return call(s, [&](Descs& d, const float* a, const float* b) {
      auto y = d.tensor(rq.y);
      auto dy = d.tensor(rq.dy);
      auto dx = d.tensor(rq.dx);
      if (d.st) return d.st;
      return lib().cudnnSoftmaxBackward(h_, cudnnSoftmaxAlgorithm_t(rq.algo), cudnnSoftmaxMode_t(rq.mode), a, y,
                                        P(rq.yp), dy, P(rq.dyp), b, dx, P(rq.dxp));
    }, rq.alpha, rq.beta);
  }

  Err transform(Stream* s, const DnnTransformReq& rq) override {
    return call(s, [&](Descs& d, const float* a, const float* b) {
      auto x = d.tensor(rq.x);
      auto y = d.tensor(rq.y);
      if (d.st) return d.st;
      return lib().cudnnTransformTensor(h_, a, x, P(rq.xp), b, y, P(rq.yp));
    }, rq.alpha, rq.beta);
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
  Err set_tensor(Stream* s, const DnnSetTensorReq& rq) override {
    return call(s, [&](Descs& d, const float* v, const float*) {
      auto y = d.tensor(rq.y);
      if (d.st) return d.st;
      return lib().cudnnSetTensor(h_, y, P(rq.yp), v);
    }, rq.value, 0.0);
  }
  Err scale_tensor(Stream* s, const DnnScaleTensorReq& rq) override {
    return call(s, [&](Descs& d, const float* a, const float*) {
      auto y = d.tensor(rq.y);
      if (d.st) return d.st;
      return lib().cudnnScaleTensor(h_, y, P(rq.yp), a);
    }, rq.alpha, 0.0);
  }

  // Batch normalization and LRN map one to one. Dropout and ReduceTensor
  // are not forwarded to a GPU (the defaults: cudaErrorNotSupported): the
  // guest sizes their states, reserve and indices for the sim device's
  // generator and layout, which NVIDIA's cuDNN does not share.
  Err bn_fwd_train(Stream* s, const DnnBnFwdTrainReq& rq) override {
    return call(s, [&](Descs& d, const float* a, const float* b) {
      auto x = d.tensor(rq.x);
      auto y = d.tensor(rq.y);
      auto bn = d.tensor(rq.bn);
      if (d.st) return d.st;
      return lib().cudnnBatchNormalizationForwardTraining(
          h_, cudnnBatchNormMode_t(rq.mode), a, b, x, P(rq.xp), y, P(rq.yp), bn, P(rq.scalep), P(rq.biasp), rq.factor,
          P(rq.rmeanp), P(rq.rvarp), rq.eps, P(rq.smeanp), P(rq.sinvp));
    }, rq.alpha, rq.beta);
  }
  Err bn_fwd_infer(Stream* s, const DnnBnFwdInferReq& rq) override {
    return call(s, [&](Descs& d, const float* a, const float* b) {
      auto x = d.tensor(rq.x);
      auto y = d.tensor(rq.y);
      auto bn = d.tensor(rq.bn);
      if (d.st) return d.st;
      return lib().cudnnBatchNormalizationForwardInference(h_, cudnnBatchNormMode_t(rq.mode), a, b, x, P(rq.xp), y,
                                                           P(rq.yp), bn, P(rq.scalep), P(rq.biasp), P(rq.meanp),
                                                           P(rq.varp), rq.eps);
    }, rq.alpha, rq.beta);
  }
  Err bn_bwd(Stream* s, const DnnBnBwdReq& rq) override {
    const float ap = float(rq.alpha_p), bp = float(rq.beta_p);
    return call(s, [&](Descs& d, const float* a, const float* b) {
      auto x = d.tensor(rq.x);
      auto dy = d.tensor(rq.dy);
      auto dx = d.tensor(rq.dx);
      auto bn = d.tensor(rq.bn);
      if (d.st) return d.st;
      return lib().cudnnBatchNormalizationBackward(h_, cudnnBatchNormMode_t(rq.mode), a, b, &ap, &bp, x, P(rq.xp), dy,
                                                   P(rq.dyp), dx, P(rq.dxp), bn, P(rq.scalep), P(rq.dscalep),
                                                   P(rq.dbiasp), rq.eps, P(rq.smeanp), P(rq.sinvp));
    }, rq.alpha, rq.beta);
  }
  Err lrn_fwd(Stream* s, const DnnLrnFwdReq& rq) override {
    return call(s, [&](Descs& d, const float* a, const float* b) {
      auto x = d.tensor(rq.x);
      auto y = d.tensor(rq.y);
      Lrn l(d, rq.lrn);
      if (d.st) return d.st;
      return lib().cudnnLRNCrossChannelForward(h_, l.h, CUDNN_LRN_CROSS_CHANNEL_DIM1, a, x, P(rq.xp), b, y, P(rq.yp));
    }, rq.alpha, rq.beta);
  }
  Err lrn_bwd(Stream* s, const DnnLrnBwdReq& rq) override {
    return call(s, [&](Descs& d, const float* a, const float* b) {
      auto y = d.tensor(rq.y);
      auto dy = d.tensor(rq.dy);
      auto x = d.tensor(rq.x);
      auto dx = d.tensor(rq.dx);
      Lrn l(d, rq.lrn);
      if (d.st) return d.st;
      return lib().cudnnLRNCrossChannelBackward(h_, l.h, CUDNN_LRN_CROSS_CHANNEL_DIM1, a, y, P(rq.yp), dy, P(rq.dyp),
                                                x, P(rq.xp), b, dx, P(rq.dxp));
    }, rq.alpha, rq.beta);
  }

 private:
  struct Lrn {  // an LRN descriptor for one call
    cudnnLRNDescriptor_t h = nullptr;
    Lrn(Descs& d, const DnnLrn& l) {
      d.step(lib().cudnnCreateLRNDescriptor(&h));
      if (h) d.step(lib().cudnnSetLRNDescriptor(h, l.n, l.alpha, l.beta, l.k));
    }
    ~Lrn() {
      if (h) lib().cudnnDestroyLRNDescriptor(h);
    }
  };

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

  std::function<void()> make_current_;
  cudnnHandle_t h_ = nullptr;
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
