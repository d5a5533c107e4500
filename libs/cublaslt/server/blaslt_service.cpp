// The cuBLASLt service: its handle tables and the bodies of its API table (cublaslt_api.def).
//
// The guest is hostile: a matmul request is checked in full by lt_check
// (proto/cublaslt_check.hpp: types, orders, shapes, leading dimensions,
// batch counts and strides, epilogue, bias/aux/scalar requirements, each
// operand's span without overflow), then every span (A, B, C, D, the bias
// or bias gradient, the aux buffer, device scalars or vectors, the
// workspace) is checked against the session's memory before the backend
// sees it. Matmuls are posted: a failure becomes the session's deferred
// error (reported at the next synchronising call, as a GPU reports
// asynchronous faults); the guest library has already refused what it can
// check itself, with the precise cublasStatus_t.
#include <spdlog/spdlog.h>

#include "wormhole/server/blaslt.hpp"
#include "wormhole/server/checkpoint.hpp"
#include "wormhole/server/handles.hpp"
#include "wormhole/server/service.hpp"

namespace wh::server {

using namespace wh::proto;

class BlasLtService final : public Service {
  using Service::Service;
  WH_SERVICE_TABLE(WH_CUBLASLT_OPS)

 private:
  struct LtEntry {
    std::unique_ptr<LtHandle> h;
  };
  HandleTable<LtEntry> lt_handles_{0x4c, 1024};

 public:
  // A handle holds nothing but itself (descriptors come with each call).
  bool save(CheckpointWriter& w) override {
    save_handles(w, lt_handles_);
    return true;
  }
  bool restore(CheckpointReader& r, std::string* why) override {
    BlasLt* lt = ctx_->blaslt(why);
    return restore_handles(r, lt_handles_, 1024, "cuBLASLt", why, [&] {
      auto e = std::make_unique<LtEntry>();
      return lt && lt->create(&e->h) == cudaSuccess ? std::move(e) : nullptr;
    });
  }
};

int32_t BlasLtService::on_LtCreate(const LtCreateReq&, std::span<const uint8_t>, LtCreateResp& rs, std::vector<uint8_t>&) {
  std::string err;
  BlasLt* lt = ctx_->blaslt(&err);
  if (!lt) {
    spdlog::warn("session {}: cuBLASLt unavailable: {}", id_, err);
    return cudaErrorNotSupported;
  }
  auto e = std::make_unique<LtEntry>();
  if (Err r = lt->create(&e->h); r != cudaSuccess) return r;
  rs.handle = lt_handles_.add(std::move(e));
  rs.version = lt->version();
  return rs.handle ? cudaSuccess : cudaErrorMemoryAllocation;
}

int32_t BlasLtService::on_LtDestroy(const LtDestroyReq& rq, std::span<const uint8_t>, LtDestroyResp&,
                              std::vector<uint8_t>&) {
  return lt_handles_.take(rq.handle) ? cudaSuccess : cudaErrorInvalidResourceHandle;
}

int32_t BlasLtService::on_LtMatmul(const LtMatmulReq& rq, std::span<const uint8_t>, LtMatmulResp&, std::vector<uint8_t>&) {
  LtEntry* e = lt_handles_.get(rq.handle);
  if (!e) return cudaErrorInvalidResourceHandle;
  LtShape s;
  switch (lt_check(rq, &s)) {
    case LtCheck::Ok: break;
    case LtCheck::NotSupported: return cudaErrorNotSupported;
    default: return cudaErrorInvalidValue;
  }
  if (!device_range(rq.A, s.a_bytes) || !device_range(rq.B, s.b_bytes) || !device_range(rq.C, s.c_bytes) ||
      !device_range(rq.D, s.d_bytes) || !device_range(rq.bias, s.bias_bytes) || !device_range(rq.aux, s.aux_bytes) ||
      !device_range(rq.alpha, s.alpha_bytes) || !device_range(rq.beta, s.beta_bytes) ||
      !device_range(rq.workspace, rq.workspace_size))
    return cudaErrorInvalidValue;
  Stream* st;
  if (Err r = resolve_stream(rq.stream, &st); r != cudaSuccess) return r;
  BlasLt* lt = ctx_->blaslt(nullptr);
  if (!lt) return cudaErrorNotSupported;
  return lt->matmul(*e->h, st, rq, s);
}

int32_t BlasLtService::on_LtTransform(const LtTransformReq& rq, std::span<const uint8_t>, LtTransformResp&,
                                std::vector<uint8_t>&) {
  LtEntry* e = lt_handles_.get(rq.handle);
  if (!e) return cudaErrorInvalidResourceHandle;
  LtTransformShape s;
  switch (lt_transform_check(rq, &s)) {
    case LtCheck::Ok: break;
    case LtCheck::NotSupported: return cudaErrorNotSupported;
    default: return cudaErrorInvalidValue;
  }
  if (!device_range(rq.A, s.a_bytes) || (s.use_b && !device_range(rq.B, s.b_bytes)) ||
      !device_range(rq.C, s.c_bytes) || !device_range(rq.alpha, s.alpha_bytes) ||
      !device_range(rq.beta, s.beta_bytes))
    return cudaErrorInvalidValue;
  Stream* st;
  if (Err r = resolve_stream(rq.stream, &st); r != cudaSuccess) return r;
  BlasLt* lt = ctx_->blaslt(nullptr);
  if (!lt) return cudaErrorNotSupported;
  return lt->transform(*e->h, st, rq, s);
}

std::unique_ptr<Service> make_blaslt_service(Session& s) { return std::make_unique<BlasLtService>(s); }

}  // namespace wh::server
