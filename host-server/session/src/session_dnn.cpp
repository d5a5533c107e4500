// Session: the cuDNN bodies of the API table (proto/cudnn_api.def).
//
// The guest is hostile: every descriptor a call carries and the shapes
// they combine are checked again (proto/cudnn_check.hpp, the checks the
// guest library ran), each tensor's extent (highest element index + 1,
// times 4 bytes) must lie inside one of the session's allocations, and the
// scalars must be finite. Operations are posted: a failure becomes the
// session's deferred error (reported at the next synchronising call).
#include <spdlog/spdlog.h>

#include <cmath>

#include "wormhole/proto/cudnn_check.hpp"
#include "wormhole/server/dnn.hpp"
#include "wormhole/server/session.hpp"

namespace wh::server {

using namespace wh::proto;

namespace {

Err to_err(int32_t status) {
  return status == dnn::kOk ? cudaSuccess : status == dnn::kNotSupported ? cudaErrorNotSupported : cudaErrorInvalidValue;
}
bool scalars_ok(double alpha, double beta) { return std::isfinite(alpha) && std::isfinite(beta); }

}  // namespace

bool Session::dnn_tensor(const DnnTensor& t, uint64_t p) const {
  const int64_t n = dnn::span(t);
  return n > 0 && p != 0 && device_range(p, uint64_t(n) * 4);
}
bool Session::dnn_filter(const DnnFilter& f, uint64_t p) const {
  return dnn::check_filter(f) == dnn::kOk && p != 0 && device_range(p, uint64_t(dnn::filter_count(f)) * 4);
}

// The common tail of every body: the shapes' status, the stream, the backend.
template <class Rq, class Op>
int32_t Session::dnn_run(int32_t status, bool ranges, const Rq& rq, Op op) {
  if (status != dnn::kOk) return to_err(status);
  if (!scalars_ok(rq.alpha, rq.beta) || !ranges) return cudaErrorInvalidValue;
  Stream* s;
  if (Err r = resolve_stream(rq.stream, &s); r != cudaSuccess) return r;
  Dnn* d = ctx_->dnn(nullptr);
  if (!d) return cudaErrorNotSupported;
  return op(*d, s);
}

int32_t Session::on_DnnCreate(const DnnCreateReq&, std::span<const uint8_t>, DnnCreateResp&, std::vector<uint8_t>&) {
  std::string err;
  if (!ctx_->dnn(&err)) {
    spdlog::warn("session {}: cuDNN unavailable: {}", id_, err);
    return cudaErrorNotSupported;
  }
  return cudaSuccess;
}

int32_t Session::on_DnnConvFwd(const DnnConvFwdReq& rq, std::span<const uint8_t>, DnnConvFwdResp&,
                               std::vector<uint8_t>&) {
  return dnn_run(dnn::check_conv_shapes(rq.x, rq.w, rq.conv, rq.y),
                 dnn_tensor(rq.x, rq.xp) && dnn_filter(rq.w, rq.wp) && dnn_tensor(rq.y, rq.yp), rq,
                 [&](Dnn& d, Stream* s) { return d.conv_fwd(s, rq); });
}

int32_t Session::on_DnnConvBwdData(const DnnConvBwdDataReq& rq, std::span<const uint8_t>, DnnConvBwdDataResp&,
                                   std::vector<uint8_t>&) {
  return dnn_run(dnn::check_conv_shapes(rq.dx, rq.w, rq.conv, rq.dy),
                 dnn_filter(rq.w, rq.wp) && dnn_tensor(rq.dy, rq.dyp) && dnn_tensor(rq.dx, rq.dxp), rq,
                 [&](Dnn& d, Stream* s) { return d.conv_bwd_data(s, rq); });
}

int32_t Session::on_DnnConvBwdFilter(const DnnConvBwdFilterReq& rq, std::span<const uint8_t>,
                                     DnnConvBwdFilterResp&, std::vector<uint8_t>&) {
  return dnn_run(dnn::check_conv_shapes(rq.x, rq.dw, rq.conv, rq.dy),
                 dnn_tensor(rq.x, rq.xp) && dnn_tensor(rq.dy, rq.dyp) && dnn_filter(rq.dw, rq.dwp), rq,
                 [&](Dnn& d, Stream* s) { return d.conv_bwd_filter(s, rq); });
}

int32_t Session::on_DnnConvBwdBias(const DnnConvBwdBiasReq& rq, std::span<const uint8_t>, DnnConvBwdBiasResp&,
                                   std::vector<uint8_t>&) {
  return dnn_run(dnn::check_bias(rq.dy, rq.db), dnn_tensor(rq.dy, rq.dyp) && dnn_tensor(rq.db, rq.dbp), rq,
                 [&](Dnn& d, Stream* s) { return d.conv_bwd_bias(s, rq); });
}

int32_t Session::on_DnnAddTensor(const DnnAddTensorReq& rq, std::span<const uint8_t>, DnnAddTensorResp&,
                                 std::vector<uint8_t>&) {
  return dnn_run(dnn::check_add(rq.a, rq.c), dnn_tensor(rq.a, rq.ap) && dnn_tensor(rq.c, rq.cp), rq,
                 [&](Dnn& d, Stream* s) { return d.add_tensor(s, rq); });
}

int32_t Session::on_DnnPoolFwd(const DnnPoolFwdReq& rq, std::span<const uint8_t>, DnnPoolFwdResp&,
                               std::vector<uint8_t>&) {
  return dnn_run(dnn::check_pool_shapes(rq.pool, rq.x, rq.y), dnn_tensor(rq.x, rq.xp) && dnn_tensor(rq.y, rq.yp),
                 rq, [&](Dnn& d, Stream* s) { return d.pool_fwd(s, rq); });
}

int32_t Session::on_DnnPoolBwd(const DnnPoolBwdReq& rq, std::span<const uint8_t>, DnnPoolBwdResp&,
                               std::vector<uint8_t>&) {
  int32_t st = dnn::check_pool_shapes(rq.pool, rq.x, rq.y);
  if (st == dnn::kOk) st = dnn::check_same(rq.y, rq.dy);
  if (st == dnn::kOk) st = dnn::check_same(rq.x, rq.dx);
  return dnn_run(st,
                 dnn_tensor(rq.y, rq.yp) && dnn_tensor(rq.dy, rq.dyp) && dnn_tensor(rq.x, rq.xp) &&
                     dnn_tensor(rq.dx, rq.dxp),
                 rq, [&](Dnn& d, Stream* s) { return d.pool_bwd(s, rq); });
}

int32_t Session::on_DnnActFwd(const DnnActFwdReq& rq, std::span<const uint8_t>, DnnActFwdResp&,
                              std::vector<uint8_t>&) {
  int32_t st = dnn::check_act(rq.act);
  if (st == dnn::kOk) st = dnn::check_same(rq.x, rq.y);
  return dnn_run(st, dnn_tensor(rq.x, rq.xp) && dnn_tensor(rq.y, rq.yp), rq,
                 [&](Dnn& d, Stream* s) { return d.act_fwd(s, rq); });
}

int32_t Session::on_DnnActBwd(const DnnActBwdReq& rq, std::span<const uint8_t>, DnnActBwdResp&,
                              std::vector<uint8_t>&) {
  int32_t st = dnn::check_act(rq.act);
  if (st == dnn::kOk) st = dnn::check_same(rq.x, rq.y);
  if (st == dnn::kOk) st = dnn::check_same(rq.x, rq.dy);
  if (st == dnn::kOk) st = dnn::check_same(rq.x, rq.dx);
  return dnn_run(st,
                 dnn_tensor(rq.y, rq.yp) && dnn_tensor(rq.dy, rq.dyp) && dnn_tensor(rq.x, rq.xp) &&
                     dnn_tensor(rq.dx, rq.dxp),
                 rq, [&](Dnn& d, Stream* s) { return d.act_bwd(s, rq); });
}

int32_t Session::on_DnnSoftmaxFwd(const DnnSoftmaxFwdReq& rq, std::span<const uint8_t>, DnnSoftmaxFwdResp&,
                                  std::vector<uint8_t>&) {
  int32_t st = dnn::check_softmax(rq.algo, rq.mode);
  if (st == dnn::kOk) st = dnn::check_same(rq.x, rq.y);
  return dnn_run(st, dnn_tensor(rq.x, rq.xp) && dnn_tensor(rq.y, rq.yp), rq,
                 [&](Dnn& d, Stream* s) { return d.softmax_fwd(s, rq); });
}

int32_t Session::on_DnnSoftmaxBwd(const DnnSoftmaxBwdReq& rq, std::span<const uint8_t>, DnnSoftmaxBwdResp&,
                                  std::vector<uint8_t>&) {
  int32_t st = dnn::check_softmax(rq.algo, rq.mode);
  if (st == dnn::kOk) st = dnn::check_same(rq.y, rq.dy);
  if (st == dnn::kOk) st = dnn::check_same(rq.y, rq.dx);
  return dnn_run(st, dnn_tensor(rq.y, rq.yp) && dnn_tensor(rq.dy, rq.dyp) && dnn_tensor(rq.dx, rq.dxp), rq,
                 [&](Dnn& d, Stream* s) { return d.softmax_bwd(s, rq); });
}

int32_t Session::on_DnnTransform(const DnnTransformReq& rq, std::span<const uint8_t>, DnnTransformResp&,
                                 std::vector<uint8_t>&) {
  return dnn_run(dnn::check_transform(rq.x, rq.y), dnn_tensor(rq.x, rq.xp) && dnn_tensor(rq.y, rq.yp), rq,
                 [&](Dnn& d, Stream* s) { return d.transform(s, rq); });
}

int32_t Session::on_DnnOpTensor(const DnnOpTensorReq& rq, std::span<const uint8_t>, DnnOpTensorResp&,
                                std::vector<uint8_t>&) {
  const int32_t st = dnn::check_op_tensor(rq.op, rq.nan_opt, rq.a, rq.b, rq.c);
  if (st != dnn::kOk) return to_err(st);
  if (!std::isfinite(rq.alpha1) || !std::isfinite(rq.alpha2) || !std::isfinite(rq.beta)) return cudaErrorInvalidValue;
  if (!dnn_tensor(rq.a, rq.ap) || !dnn_tensor(rq.c, rq.cp) || (dnn::op_uses_b(rq.op) && !dnn_tensor(rq.b, rq.bp)))
    return cudaErrorInvalidValue;
  Stream* s;
  if (Err r = resolve_stream(rq.stream, &s); r != cudaSuccess) return r;
  Dnn* d = ctx_->dnn(nullptr);
  return d ? d->op_tensor(s, rq) : cudaErrorNotSupported;
}

int32_t Session::on_DnnSetTensor(const DnnSetTensorReq& rq, std::span<const uint8_t>, DnnSetTensorResp&,
                                 std::vector<uint8_t>&) {
  DnnTransformReq shape{};  // dnn_run's scalars: the value must be finite
  shape.stream = rq.stream, shape.alpha = rq.value;
  return dnn_run(dnn::check_tensor(rq.y), dnn_tensor(rq.y, rq.yp), shape,
                 [&](Dnn& d, Stream* s) { return d.set_tensor(s, rq); });
}

int32_t Session::on_DnnScaleTensor(const DnnScaleTensorReq& rq, std::span<const uint8_t>, DnnScaleTensorResp&,
                                   std::vector<uint8_t>&) {
  DnnTransformReq shape{};
  shape.stream = rq.stream, shape.alpha = rq.alpha;
  return dnn_run(dnn::check_tensor(rq.y), dnn_tensor(rq.y, rq.yp), shape,
                 [&](Dnn& d, Stream* s) { return d.scale_tensor(s, rq); });
}

}  // namespace wh::server
