// The cuRAND service: its handle tables and the bodies of its API table (curand_api.def).
//
// The guest is hostile: the generator type, every setting (ordering,
// dimensions, which settings a type has), the kind of each generation, n
// against the type (a multiple of the dimensions for quasirandom
// generators, even for pseudorandom normals), the distribution's parameters
// and the device range and alignment of the output are checked here before
// the backend runs. A refused RandCreate/RandSet names its curandStatus_t in
// the response; generations are posted, so a refusal there becomes the
// session's deferred error (the guest library has already refused what it
// can check itself, with cuRAND's own statuses).
#include <spdlog/spdlog.h>

#include <cmath>

#include "wormhole/server/rand.hpp"
#include "wormhole/server/checkpoint.hpp"
#include "wormhole/server/handles.hpp"
#include "wormhole/server/service.hpp"

namespace wh::server {

using namespace wh::proto;

namespace {

constexpr int32_t kStatusTypeError = 103, kStatusOutOfRange = 104;
// The most values one generation may write (cuRAND takes a size_t; the
// session's memory bounds it far below this anyway).
constexpr uint64_t kRandMaxValues = 1ull << 40;

bool valid_ordering(int32_t type, int32_t o) {
  if (rand_is_quasi(type)) return o == kOrderQuasiDefault;
  return o >= kOrderPseudoBest && o <= kOrderPseudoDynamic;
}

}  // namespace

class RandService final : public Service {
  using Service::Service;
  WH_SERVICE_TABLE(WH_CURAND_OPS)

 private:
  struct RandEntry {
    RandSettings settings;
    std::unique_ptr<RandGen> gen;
  };
  HandleTable<RandEntry> rand_gens_{0x52, 256};  // a generator may hold ~256 KiB (MTGP32)

 public:
  // A generator is its settings (the sim device's values are a function of
  // them): made again through on_RandCreate and on_RandSet, with their checks.
  bool save(CheckpointWriter& w) override {
    w.u64(rand_gens_.size());
    rand_gens_.for_each([&](uint64_t h, RandEntry& e) {
      w.u64(h);
      w.i32(e.settings.type);
      w.u64(e.settings.seed);
      w.u64(e.settings.offset);
      w.i32(e.settings.ordering);
      w.u32(e.settings.dims);
    });
    return true;
  }
  bool restore(CheckpointReader& r, std::string* why) override {
    const uint64_t n = r.count(256, 36);
    for (uint64_t i = 0; i < n && r.ok(); i++) {
      const uint64_t h = r.u64();
      RandCreateReq cq{};
      cq.rng_type = r.i32();
      RandSetReq sq{};
      sq.seed = r.u64();
      sq.offset = r.u64();
      sq.ordering = r.i32();
      sq.dims = r.u32();
      if (!r.ok()) break;
      RandCreateResp cs{};
      RandSetResp ss{};
      std::vector<uint8_t> tail;
      if (on_RandCreate(cq, {}, cs, tail) != cudaSuccess)
        return *why = "a cuRAND generator of the checkpoint cannot be made again", false;
      sq.handle = cs.handle;
      sq.what = kRandSetOffset | kRandSetOrdering | (rand_is_quasi(cq.rng_type) ? kRandSetDims : kRandSetSeed);
      if (on_RandSet(sq, {}, ss, tail) != cudaSuccess || !rand_gens_.rename(cs.handle, h))
        return *why = "a cuRAND generator's settings of the checkpoint are refused", false;
    }
    return r.ok() || (*why = "truncated cuRAND state", false);
  }
};

int32_t RandService::on_RandCreate(const RandCreateReq& rq, std::span<const uint8_t>, RandCreateResp& rs,
                               std::vector<uint8_t>&) {
  if (!rand_valid_type(rq.rng_type)) {
    rs.result = kStatusTypeError;
    return cudaErrorInvalidValue;
  }
  std::string err;
  Rand* r = ctx_->rand(&err);
  if (!r) {
    spdlog::warn("session {}: cuRAND unavailable: {}", id_, err);
    return cudaErrorNotSupported;
  }
  auto e = std::make_unique<RandEntry>();
  e->settings.type = rq.rng_type;
  e->settings.ordering = rand_is_quasi(rq.rng_type) ? kOrderQuasiDefault : kOrderPseudoDefault;
  if (Err x = r->create(e->settings, &e->gen); x != cudaSuccess) return x;
  rs.handle = rand_gens_.add(std::move(e));
  if (!rs.handle) return cudaErrorMemoryAllocation;  // the table is full
  return cudaSuccess;
}

int32_t RandService::on_RandDestroy(const RandDestroyReq& rq, std::span<const uint8_t>, RandDestroyResp&,
                                std::vector<uint8_t>&) {
  return rand_gens_.take(rq.handle) ? cudaSuccess : cudaErrorInvalidResourceHandle;
}

int32_t RandService::on_RandSet(const RandSetReq& rq, std::span<const uint8_t>, RandSetResp& rs, std::vector<uint8_t>&) {
  RandEntry* e = rand_gens_.get(rq.handle);
  if (!e) return cudaErrorInvalidResourceHandle;
  auto refuse = [&](int32_t r) {
    rs.result = r;
    return int32_t(cudaErrorInvalidValue);
  };
  const uint32_t all = kRandSetSeed | kRandSetOffset | kRandSetOrdering | kRandSetDims;
  if (!rq.what || (rq.what & ~all)) return refuse(kStatusOutOfRange);
  RandSettings n = e->settings;
  const bool quasi = rand_is_quasi(n.type);
  if (rq.what & kRandSetSeed) {
    if (quasi) return refuse(kStatusTypeError);
    n.seed = rq.seed;
  }
  if (rq.what & kRandSetDims) {
    if (!quasi) return refuse(kStatusTypeError);
    if (rq.dims < 1 || rq.dims > kRandMaxDims) return refuse(kStatusOutOfRange);
    n.dims = rq.dims;
  }
  if (rq.what & kRandSetOrdering) {
    if (!valid_ordering(n.type, rq.ordering)) return refuse(kStatusOutOfRange);
    n.ordering = rq.ordering;
  }
  if (rq.what & kRandSetOffset) n.offset = rq.offset;
  // cuRAND restarts the sequence when a seed, the dimensions or the
  // ordering change; the offset stays as set.
  Rand* r = ctx_->rand(nullptr);
  if (!r) return cudaErrorNotSupported;
  if (Err x = r->set(*e->gen, n, rq.what); x != cudaSuccess) return x;
  e->settings = n;
  return cudaSuccess;
}

int32_t RandService::on_RandGenerate(const RandGenerateReq& rq, std::span<const uint8_t>, RandGenerateResp&,
                                 std::vector<uint8_t>&) {
  RandEntry* e = rand_gens_.get(rq.handle);
  if (!e) return cudaErrorInvalidResourceHandle;
  RandSettings& st = e->settings;
  const bool quasi = rand_is_quasi(st.type);
  if (rq.kind < kRandBits32 || rq.kind > kRandPoisson) return cudaErrorInvalidValue;
  // 64-bit values only from the 64-bit Sobol' generators, 32-bit bits from every other.
  if ((rq.kind == kRandBits64) != rand_is_64(st.type) && (rq.kind == kRandBits32 || rq.kind == kRandBits64))
    return cudaErrorInvalidValue;
  if (rq.n > kRandMaxValues) return cudaErrorInvalidValue;
  if (quasi && rq.n % st.dims) return cudaErrorInvalidValue;
  const bool pairs = rq.kind == kRandNormal || rq.kind == kRandNormalD || rq.kind == kRandLogNormal ||
                     rq.kind == kRandLogNormalD;
  if (!quasi && pairs && rq.n % 2) return cudaErrorInvalidValue;
  if (pairs && (!std::isfinite(rq.p0) || !std::isfinite(rq.p1) || rq.p1 < 0)) return cudaErrorInvalidValue;
  // Poisson: lambda positive and small enough for 32-bit counts.
  if (rq.kind == kRandPoisson && !(rq.p0 > 0 && rq.p0 <= 1e9)) return cudaErrorInvalidValue;
  Stream* s;
  if (Err r = resolve_stream(rq.stream, &s); r != cudaSuccess) return r;
  const uint64_t es = rand_value_bytes(rq.kind);
  if (rq.n == 0) return cudaSuccess;
  if (rq.out % es || !device_range(rq.out, rq.n * es)) return cudaErrorInvalidValue;
  Rand* r = ctx_->rand(nullptr);
  if (!r) return cudaErrorNotSupported;
  if (Err x = r->generate(*e->gen, st, s, rq.kind, rq.out, rq.n, rq.p0, rq.p1); x != cudaSuccess) return x;
  st.offset += quasi ? rq.n / st.dims : rq.n;
  return cudaSuccess;
}

std::unique_ptr<Service> make_rand_service(Session& s) { return std::make_unique<RandService>(s); }

}  // namespace wh::server
