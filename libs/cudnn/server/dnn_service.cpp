// The cuDNN service: its handle tables and the bodies of its API table (cudnn_api.def).
//
// The guest is hostile: every descriptor a call carries and the shapes
// they combine are checked again (proto/cudnn_check.hpp, the checks the
// guest library ran), each tensor's extent (highest element index + 1,
// times the element's size) must lie inside one of the session's
// allocations, and the scalars must be finite. Operations are posted: a failure becomes the
// session's deferred error (reported at the next synchronising call).
#include <spdlog/spdlog.h>

#include <cmath>

#include "wormhole/proto/cudnn_check.hpp"
#include "wormhole/server/dnn.hpp"
#include "wormhole/server/handles.hpp"
#include "wormhole/server/checkpoint.hpp"
#include "wormhole/server/service.hpp"

namespace wh::server {

using namespace wh::proto;

namespace {

Err to_err(int32_t status) {
  return status == dnn::kOk ? cudaSuccess : status == dnn::kNotSupported ? cudaErrorNotSupported : cudaErrorInvalidValue;
}
bool scalars_ok(double alpha, double beta) { return std::isfinite(alpha) && std::isfinite(beta); }

}  // namespace

class DnnService final : public Service {
  using Service::Service;
  WH_SERVICE_TABLE(WH_CUDNN_OPS)

 private:
  // A tensor's or filter's extent (elements of its data type) inside one
  // of the session's allocations; the common tail of every body (the
  // shapes' cudnn status, the ranges, the scalars, the stream, the backend).
  bool dnn_tensor(const proto::DnnTensor& t, uint64_t p) const;
  bool dnn_filter(const proto::DnnFilter& f, uint64_t p) const;
  template <class Rq, class Op>
  int32_t dnn_run(int32_t status, bool ranges, const Rq& rq, Op op);

 public:
  // Stateless: descriptors live in the guest and come with each call.
  bool save(CheckpointWriter&) override { return true; }
  bool restore(CheckpointReader&, std::string*) override { return true; }
};

bool DnnService::dnn_tensor(const DnnTensor& t, uint64_t p) const {
  const int64_t n = dnn::span(t);
  return n > 0 && p != 0 && device_range(p, uint64_t(n) * dnn::elem_bytes(t.dtype));
}
bool DnnService::dnn_filter(const DnnFilter& f, uint64_t p) const {
  return dnn::check_filter(f) == dnn::kOk && p != 0 &&
         device_range(p, uint64_t(dnn::filter_count(f)) * dnn::elem_bytes(f.dtype));
}

// The common tail of every body: the shapes' status, the stream, the backend.
template <class Rq, class Op>
int32_t DnnService::dnn_run(int32_t status, bool ranges, const Rq& rq, Op op) {
  if (status != dnn::kOk) return to_err(status);
  if (!scalars_ok(rq.alpha, rq.beta) || !ranges) return cudaErrorInvalidValue;
  Stream* s;
  if (Err r = resolve_stream(rq.stream, &s); r != cudaSuccess) return r;
  Dnn* d = ctx_->dnn(nullptr);
  if (!d) return cudaErrorNotSupported;
  return op(*d, s);
}

int32_t DnnService::on_DnnCreate(const DnnCreateReq&, std::span<const uint8_t>, DnnCreateResp&, std::vector<uint8_t>&) {
  std::string err;
  if (!ctx_->dnn(&err)) {
    spdlog::warn("session {}: cuDNN unavailable: {}", id_, err);
    return cudaErrorNotSupported;
  }
  return cudaSuccess;
}

int32_t DnnService::on_DnnConvFwd(const DnnConvFwdReq& rq, std::span<const uint8_t>, DnnConvFwdResp&,
                               std::vector<uint8_t>&) {
  return dnn_run(dnn::check_conv_shapes(rq.x, rq.w, rq.conv, rq.y),
                 dnn_tensor(rq.x, rq.xp) && dnn_filter(rq.w, rq.wp) && dnn_tensor(rq.y, rq.yp), rq,
                 [&](Dnn& d, Stream* s) { return d.conv_fwd(s, rq); });
}

int32_t DnnService::on_DnnConvBwdData(const DnnConvBwdDataReq& rq, std::span<const uint8_t>, DnnConvBwdDataResp&,
                                   std::vector<uint8_t>&) {
  return dnn_run(dnn::check_conv_shapes(rq.dx, rq.w, rq.conv, rq.dy),
                 dnn_filter(rq.w, rq.wp) && dnn_tensor(rq.dy, rq.dyp) && dnn_tensor(rq.dx, rq.dxp), rq,
                 [&](Dnn& d, Stream* s) { return d.conv_bwd_data(s, rq); });
}

int32_t DnnService::on_DnnConvBwdFilter(const DnnConvBwdFilterReq& rq, std::span<const uint8_t>,
                                     DnnConvBwdFilterResp&, std::vector<uint8_t>&) {
  return dnn_run(dnn::check_conv_shapes(rq.x, rq.dw, rq.conv, rq.dy),
                 dnn_tensor(rq.x, rq.xp) && dnn_tensor(rq.dy, rq.dyp) && dnn_filter(rq.dw, rq.dwp), rq,
                 [&](Dnn& d, Stream* s) { return d.conv_bwd_filter(s, rq); });
}

int32_t DnnService::on_DnnConvBwdBias(const DnnConvBwdBiasReq& rq, std::span<const uint8_t>, DnnConvBwdBiasResp&,
                                   std::vector<uint8_t>&) {
  return dnn_run(dnn::check_bias(rq.dy, rq.db), dnn_tensor(rq.dy, rq.dyp) && dnn_tensor(rq.db, rq.dbp), rq,
                 [&](Dnn& d, Stream* s) { return d.conv_bwd_bias(s, rq); });
}

int32_t DnnService::on_DnnAddTensor(const DnnAddTensorReq& rq, std::span<const uint8_t>, DnnAddTensorResp&,
                                 std::vector<uint8_t>&) {
  return dnn_run(dnn::check_add(rq.a, rq.c), dnn_tensor(rq.a, rq.ap) && dnn_tensor(rq.c, rq.cp), rq,
                 [&](Dnn& d, Stream* s) { return d.add_tensor(s, rq); });
}

int32_t DnnService::on_DnnPoolFwd(const DnnPoolFwdReq& rq, std::span<const uint8_t>, DnnPoolFwdResp&,
                               std::vector<uint8_t>&) {
  return dnn_run(dnn::check_pool_shapes(rq.pool, rq.x, rq.y), dnn_tensor(rq.x, rq.xp) && dnn_tensor(rq.y, rq.yp),
                 rq, [&](Dnn& d, Stream* s) { return d.pool_fwd(s, rq); });
}

int32_t DnnService::on_DnnPoolBwd(const DnnPoolBwdReq& rq, std::span<const uint8_t>, DnnPoolBwdResp&,
                               std::vector<uint8_t>&) {
  int32_t st = dnn::check_pool_shapes(rq.pool, rq.x, rq.y);
  if (st == dnn::kOk) st = dnn::check_same(rq.y, rq.dy);
  if (st == dnn::kOk) st = dnn::check_same(rq.x, rq.dx);
  return dnn_run(st,
                 dnn_tensor(rq.y, rq.yp) && dnn_tensor(rq.dy, rq.dyp) && dnn_tensor(rq.x, rq.xp) &&
                     dnn_tensor(rq.dx, rq.dxp),
                 rq, [&](Dnn& d, Stream* s) { return d.pool_bwd(s, rq); });
}

int32_t DnnService::on_DnnActFwd(const DnnActFwdReq& rq, std::span<const uint8_t>, DnnActFwdResp&,
                              std::vector<uint8_t>&) {
  int32_t st = dnn::check_act(rq.act);
  if (st == dnn::kOk) st = dnn::check_same(rq.x, rq.y);
  return dnn_run(st, dnn_tensor(rq.x, rq.xp) && dnn_tensor(rq.y, rq.yp), rq,
                 [&](Dnn& d, Stream* s) { return d.act_fwd(s, rq); });
}

int32_t DnnService::on_DnnActBwd(const DnnActBwdReq& rq, std::span<const uint8_t>, DnnActBwdResp&,
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

int32_t DnnService::on_DnnSoftmaxFwd(const DnnSoftmaxFwdReq& rq, std::span<const uint8_t>, DnnSoftmaxFwdResp&,
                                  std::vector<uint8_t>&) {
  int32_t st = dnn::check_softmax(rq.algo, rq.mode);
  if (st == dnn::kOk) st = dnn::check_same(rq.x, rq.y);
  return dnn_run(st, dnn_tensor(rq.x, rq.xp) && dnn_tensor(rq.y, rq.yp), rq,
                 [&](Dnn& d, Stream* s) { return d.softmax_fwd(s, rq); });
}

int32_t DnnService::on_DnnSoftmaxBwd(const DnnSoftmaxBwdReq& rq, std::span<const uint8_t>, DnnSoftmaxBwdResp&,
                                  std::vector<uint8_t>&) {
  int32_t st = dnn::check_softmax(rq.algo, rq.mode);
  if (st == dnn::kOk) st = dnn::check_same(rq.y, rq.dy);
  if (st == dnn::kOk) st = dnn::check_same(rq.y, rq.dx);
  return dnn_run(st, dnn_tensor(rq.y, rq.yp) && dnn_tensor(rq.dy, rq.dyp) && dnn_tensor(rq.dx, rq.dxp), rq,
                 [&](Dnn& d, Stream* s) { return d.softmax_bwd(s, rq); });
}

int32_t DnnService::on_DnnTransform(const DnnTransformReq& rq, std::span<const uint8_t>, DnnTransformResp&,
                                 std::vector<uint8_t>&) {
  return dnn_run(dnn::check_transform(rq.x, rq.y), dnn_tensor(rq.x, rq.xp) && dnn_tensor(rq.y, rq.yp), rq,
                 [&](Dnn& d, Stream* s) { return d.transform(s, rq); });
}

int32_t DnnService::on_DnnOpTensor(const DnnOpTensorReq& rq, std::span<const uint8_t>, DnnOpTensorResp&,
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

int32_t DnnService::on_DnnSetTensor(const DnnSetTensorReq& rq, std::span<const uint8_t>, DnnSetTensorResp&,
                                 std::vector<uint8_t>&) {
  DnnTransformReq shape{};  // dnn_run's scalars: the value must be finite
  shape.stream = rq.stream, shape.alpha = rq.value;
  return dnn_run(dnn::check_tensor(rq.y), dnn_tensor(rq.y, rq.yp), shape,
                 [&](Dnn& d, Stream* s) { return d.set_tensor(s, rq); });
}

int32_t DnnService::on_DnnScaleTensor(const DnnScaleTensorReq& rq, std::span<const uint8_t>, DnnScaleTensorResp&,
                                   std::vector<uint8_t>&) {
  DnnTransformReq shape{};
  shape.stream = rq.stream, shape.alpha = rq.alpha;
  return dnn_run(dnn::check_tensor(rq.y), dnn_tensor(rq.y, rq.yp), shape,
                 [&](Dnn& d, Stream* s) { return d.scale_tensor(s, rq); });
}

// ---- batch normalization, LRN, dropout, reduction

namespace {
// An optional pair of pointers: both 0, or both set.
bool pair_ok(uint64_t a, uint64_t b) { return (a == 0) == (b == 0); }
}  // namespace

int32_t DnnService::on_DnnBnFwdTrain(const DnnBnFwdTrainReq& rq, std::span<const uint8_t>, DnnBnFwdTrainResp&,
                                  std::vector<uint8_t>&) {
  const int32_t st = dnn::check_bn(rq.mode, rq.x, rq.y, rq.bn, rq.eps);
  if (st == dnn::kOk && (!dnn::finite(rq.factor) || !pair_ok(rq.rmeanp, rq.rvarp) || !pair_ok(rq.smeanp, rq.sinvp)))
    return cudaErrorInvalidValue;
  const bool ranges = st != dnn::kOk ||
                      (dnn_tensor(rq.x, rq.xp) && dnn_tensor(rq.y, rq.yp) && dnn_tensor(rq.bn, rq.scalep) &&
                       dnn_tensor(rq.bn, rq.biasp) && (!rq.rmeanp || dnn_tensor(rq.bn, rq.rmeanp)) &&
                       (!rq.rvarp || dnn_tensor(rq.bn, rq.rvarp)) && (!rq.smeanp || dnn_tensor(rq.bn, rq.smeanp)) &&
                       (!rq.sinvp || dnn_tensor(rq.bn, rq.sinvp)));
  return dnn_run(st, ranges, rq, [&](Dnn& d, Stream* s) { return d.bn_fwd_train(s, rq); });
}

int32_t DnnService::on_DnnBnFwdInfer(const DnnBnFwdInferReq& rq, std::span<const uint8_t>, DnnBnFwdInferResp&,
                                  std::vector<uint8_t>&) {
  const int32_t st = dnn::check_bn(rq.mode, rq.x, rq.y, rq.bn, rq.eps);
  return dnn_run(st,
                 dnn_tensor(rq.x, rq.xp) && dnn_tensor(rq.y, rq.yp) && dnn_tensor(rq.bn, rq.scalep) &&
                     dnn_tensor(rq.bn, rq.biasp) && dnn_tensor(rq.bn, rq.meanp) && dnn_tensor(rq.bn, rq.varp),
                 rq, [&](Dnn& d, Stream* s) { return d.bn_fwd_infer(s, rq); });
}

int32_t DnnService::on_DnnBnBwd(const DnnBnBwdReq& rq, std::span<const uint8_t>, DnnBnBwdResp&, std::vector<uint8_t>&) {
  int32_t st = dnn::check_bn(rq.mode, rq.x, rq.dy, rq.bn, rq.eps);
  if (st == dnn::kOk) st = dnn::check_tensor45(rq.dx);
  if (st == dnn::kOk && (!dnn::same_dims(rq.x, rq.dx) || rq.x.dtype != rq.dx.dtype)) st = dnn::kBadParam;
  if (st == dnn::kOk &&
      (!std::isfinite(rq.alpha_p) || !std::isfinite(rq.beta_p) || !pair_ok(rq.smeanp, rq.sinvp)))
    return cudaErrorInvalidValue;
  return dnn_run(st,
                 dnn_tensor(rq.x, rq.xp) && dnn_tensor(rq.dy, rq.dyp) && dnn_tensor(rq.dx, rq.dxp) &&
                     dnn_tensor(rq.bn, rq.scalep) && dnn_tensor(rq.bn, rq.dscalep) && dnn_tensor(rq.bn, rq.dbiasp) &&
                     (!rq.smeanp || dnn_tensor(rq.bn, rq.smeanp)) && (!rq.sinvp || dnn_tensor(rq.bn, rq.sinvp)),
                 rq, [&](Dnn& d, Stream* s) { return d.bn_bwd(s, rq); });
}

int32_t DnnService::on_DnnLrnFwd(const DnnLrnFwdReq& rq, std::span<const uint8_t>, DnnLrnFwdResp&,
                              std::vector<uint8_t>&) {
  return dnn_run(dnn::check_lrn_shapes(rq.lrn, rq.x, rq.y), dnn_tensor(rq.x, rq.xp) && dnn_tensor(rq.y, rq.yp), rq,
                 [&](Dnn& d, Stream* s) { return d.lrn_fwd(s, rq); });
}

int32_t DnnService::on_DnnLrnBwd(const DnnLrnBwdReq& rq, std::span<const uint8_t>, DnnLrnBwdResp&,
                              std::vector<uint8_t>&) {
  int32_t st = dnn::check_lrn_shapes(rq.lrn, rq.x, rq.y);
  if (st == dnn::kOk) st = dnn::check_lrn_shapes(rq.lrn, rq.x, rq.dy);
  if (st == dnn::kOk) st = dnn::check_lrn_shapes(rq.lrn, rq.x, rq.dx);
  return dnn_run(st,
                 dnn_tensor(rq.y, rq.yp) && dnn_tensor(rq.dy, rq.dyp) && dnn_tensor(rq.x, rq.xp) &&
                     dnn_tensor(rq.dx, rq.dxp),
                 rq, [&](Dnn& d, Stream* s) { return d.lrn_bwd(s, rq); });
}

int32_t DnnService::on_DnnDropoutInit(const DnnDropoutInitReq& rq, std::span<const uint8_t>, DnnDropoutInitResp&,
                                   std::vector<uint8_t>&) {
  DnnTransformReq shape{};
  shape.stream = rq.stream;
  return dnn_run(dnn::kOk,
                 rq.statesp != 0 && rq.states_size >= dnn::kDropoutStates &&
                     device_range(rq.statesp, dnn::kDropoutStates),
                 shape, [&](Dnn& d, Stream* s) { return d.dropout_init(s, rq); });
}

int32_t DnnService::on_DnnDropoutFwd(const DnnDropoutFwdReq& rq, std::span<const uint8_t>, DnnDropoutFwdResp&,
                                  std::vector<uint8_t>&) {
  const int32_t st = dnn::check_dropout_shapes(rq.p, rq.x, rq.y);
  DnnTransformReq shape{};
  shape.stream = rq.stream, shape.alpha = 1;
  const bool ranges = st != dnn::kOk ||
                      (dnn_tensor(rq.x, rq.xp) && dnn_tensor(rq.y, rq.yp) && rq.statesp &&
                       rq.states_size >= dnn::kDropoutStates && device_range(rq.statesp, dnn::kDropoutStates) &&
                       rq.reservep && rq.reserve_size >= dnn::dropout_reserve(rq.x) &&
                       device_range(rq.reservep, dnn::dropout_reserve(rq.x)));
  return dnn_run(st, ranges, shape, [&](Dnn& d, Stream* s) { return d.dropout_fwd(s, rq); });
}

int32_t DnnService::on_DnnDropoutBwd(const DnnDropoutBwdReq& rq, std::span<const uint8_t>, DnnDropoutBwdResp&,
                                  std::vector<uint8_t>&) {
  const int32_t st = dnn::check_dropout_shapes(rq.p, rq.dy, rq.dx);
  DnnTransformReq shape{};
  shape.stream = rq.stream, shape.alpha = 1;
  const bool ranges = st != dnn::kOk ||
                      (dnn_tensor(rq.dy, rq.dyp) && dnn_tensor(rq.dx, rq.dxp) && rq.reservep &&
                       rq.reserve_size >= dnn::dropout_reserve(rq.dy) &&
                       device_range(rq.reservep, dnn::dropout_reserve(rq.dy)));
  return dnn_run(st, ranges, shape, [&](Dnn& d, Stream* s) { return d.dropout_bwd(s, rq); });
}

int32_t DnnService::on_DnnReduceTensor(const DnnReduceTensorReq& rq, std::span<const uint8_t>, DnnReduceTensorResp&,
                                    std::vector<uint8_t>&) {
  const int32_t st = dnn::check_reduce_shapes(rq.red, rq.a, rq.c);
  bool ranges = st != dnn::kOk || (dnn_tensor(rq.a, rq.ap) && dnn_tensor(rq.c, rq.cp));
  if (st == dnn::kOk && rq.indicesp) {  // optional: 0 when not wanted
    const uint64_t n = dnn::reduce_indices_size(rq.red, rq.c);
    ranges = ranges && rq.indices_size >= n && (n == 0 || device_range(rq.indicesp, n));
  }
  return dnn_run(st, ranges, rq, [&](Dnn& d, Stream* s) { return d.reduce(s, rq); });
}

int32_t DnnService::on_DnnConvBiasAct(const DnnConvBiasActReq& rq, std::span<const uint8_t>, DnnConvBiasActResp&,
                                      std::vector<uint8_t>&) {
  const int32_t shapes = dnn::check_conv_bias_act(rq.x, rq.w, rq.conv, rq.z, rq.bias, rq.act, rq.y);
  if (shapes != dnn::kOk) return to_err(shapes);
  if (!scalars_ok(rq.alpha1, rq.alpha2)) return cudaErrorInvalidValue;
  // z is read only when alpha2 is not 0.
  if (!dnn_tensor(rq.x, rq.xp) || !dnn_filter(rq.w, rq.wp) || !dnn_tensor(rq.bias, rq.biasp) ||
      !dnn_tensor(rq.y, rq.yp) || (rq.alpha2 != 0 && !dnn_tensor(rq.z, rq.zp)))
    return cudaErrorInvalidValue;
  Stream* s;
  if (Err r = resolve_stream(rq.stream, &s); r != cudaSuccess) return r;
  Dnn* d = ctx_->dnn(nullptr);
  if (!d) return cudaErrorNotSupported;
  return d->conv_bias_act(s, rq);
}

std::unique_ptr<Service> make_dnn_service(Session& s) { return std::make_unique<DnnService>(s); }

}  // namespace wh::server
