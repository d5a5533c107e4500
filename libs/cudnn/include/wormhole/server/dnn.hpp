// wormhole/server/dnn.hpp - the cuDNN seam of a device backend: what the
// cuDNN service (server/dnn_service.cpp) calls. cuDNN semantics (legacy
// descriptor API): every operation reads its inputs, computes in float and
// writes out = alpha * result + beta * out, where beta == 0 ignores out's
// previous contents (NaNs included).
//
// The session has checked every descriptor and the shapes they combine
// (proto/cudnn_check.hpp), and that each tensor's extent lies inside one
// of the session's allocations; the backend receives the requests as they
// came off the wire.
//
// Implementations: sim_dnn.cpp (oneDNN on the sim device's host memory),
// cuda_dnn.cpp (NVIDIA's libcudnn.so.9, dlopen'ed).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "wormhole/proto/wire.hpp"
#include "wormhole/server/backend.hpp"

namespace wh::server {

class Dnn {
 public:
  virtual ~Dnn() = default;
  // `s` nullptr: the legacy default stream.
  virtual Err conv_fwd(Stream* s, const proto::DnnConvFwdReq& rq) = 0;
  virtual Err conv_bwd_data(Stream* s, const proto::DnnConvBwdDataReq& rq) = 0;
  virtual Err conv_bwd_filter(Stream* s, const proto::DnnConvBwdFilterReq& rq) = 0;
  virtual Err conv_bwd_bias(Stream* s, const proto::DnnConvBwdBiasReq& rq) = 0;
  virtual Err add_tensor(Stream* s, const proto::DnnAddTensorReq& rq) = 0;
  virtual Err pool_fwd(Stream* s, const proto::DnnPoolFwdReq& rq) = 0;
  virtual Err pool_bwd(Stream* s, const proto::DnnPoolBwdReq& rq) = 0;
  virtual Err act_fwd(Stream* s, const proto::DnnActFwdReq& rq) = 0;
  virtual Err act_bwd(Stream* s, const proto::DnnActBwdReq& rq) = 0;
  virtual Err softmax_fwd(Stream* s, const proto::DnnSoftmaxFwdReq& rq) = 0;
  virtual Err softmax_bwd(Stream* s, const proto::DnnSoftmaxBwdReq& rq) = 0;
  virtual Err transform(Stream* s, const proto::DnnTransformReq& rq) = 0;
  virtual Err op_tensor(Stream* s, const proto::DnnOpTensorReq& rq) = 0;
  virtual Err set_tensor(Stream* s, const proto::DnnSetTensorReq& rq) = 0;
  virtual Err scale_tensor(Stream* s, const proto::DnnScaleTensorReq& rq) = 0;
  // Batch normalization, LRN, dropout, reduction: a backend without them
  // answers cudaErrorNotSupported.
  virtual Err bn_fwd_train(Stream*, const proto::DnnBnFwdTrainReq&) { return cudaErrorNotSupported; }
  virtual Err bn_fwd_infer(Stream*, const proto::DnnBnFwdInferReq&) { return cudaErrorNotSupported; }
  virtual Err bn_bwd(Stream*, const proto::DnnBnBwdReq&) { return cudaErrorNotSupported; }
  virtual Err lrn_fwd(Stream*, const proto::DnnLrnFwdReq&) { return cudaErrorNotSupported; }
  virtual Err lrn_bwd(Stream*, const proto::DnnLrnBwdReq&) { return cudaErrorNotSupported; }
  virtual Err dropout_init(Stream*, const proto::DnnDropoutInitReq&) { return cudaErrorNotSupported; }
  virtual Err dropout_fwd(Stream*, const proto::DnnDropoutFwdReq&) { return cudaErrorNotSupported; }
  virtual Err dropout_bwd(Stream*, const proto::DnnDropoutBwdReq&) { return cudaErrorNotSupported; }
  virtual Err reduce(Stream*, const proto::DnnReduceTensorReq&) { return cudaErrorNotSupported; }
  // cudnnConvolutionBiasActivationForward: y = act(alpha1 conv(x, w) +
  // alpha2 z + bias), act RELU or IDENTITY; z is not read when alpha2 is 0
  // (zp is then unchecked), and may be y itself.
  virtual Err conv_bias_act(Stream*, const proto::DnnConvBiasActReq&) { return cudaErrorNotSupported; }
};

// The sim device's cuDNN: oneDNN (and plain loops for bias gradients,
// AddTensor, the element-wise tensor ops, batch normalization, LRN, dropout
// and reductions) over `ctx.host_view()`.
std::unique_ptr<Dnn> make_sim_dnn(Context& ctx);
// The GPU's cuDNN: libcudnn.so.9 through dlopen; `make_current` as for
// make_cuda_blas. nullptr (and *err) when libcudnn.so.9 cannot be loaded.
std::unique_ptr<Dnn> make_cuda_dnn(std::function<void()> make_current, std::string* err);

}  // namespace wh::server
