// The cuFFT service: its handle tables and the bodies of its API table (cufft_api.def).
//
// The guest is hostile: the plan's rank, sizes, type, batch and layout are
// checked when the plan is made (the precise cufftResult travels back in
// the response), and before every execution the device range of each side,
// computed from the sizes, embed, stride, dist, batch and element size, is
// checked against the session's memory. Executions are posted: a failure
// there becomes the session's deferred error (reported at the next
// synchronising call, as a GPU reports asynchronous faults); the guest
// library has already refused what it can check itself.
#include <spdlog/spdlog.h>

#include <cstring>

#include "wormhole/server/fft.hpp"
#include "wormhole/server/checkpoint.hpp"
#include "wormhole/server/handles.hpp"
#include "wormhole/server/service.hpp"

namespace wh::server {

using namespace wh::proto;

namespace {

// FFTW takes int sizes, strides and distances, and indexes each side with
// int arithmetic: every value and every side's span stays below 2^31.
constexpr int64_t kFftMax = INT32_MAX;
constexpr int32_t kCufftInvalidPlan = 1, kCufftInvalidType = 3, kCufftInvalidValue = 4, kCufftInvalidSize = 8,
                  kCufftNotSupported = 16;

bool mul_ok(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_mul_overflow(a, b, out); }
bool add_ok(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_add_overflow(a, b, out); }

}  // namespace

class FftService final : public Service {
  using Service::Service;
  WH_SERVICE_TABLE(WH_CUFFT_OPS)

 private:
  struct FftEntry {
    FftDesc desc;
    std::unique_ptr<FftPlan> plan;
    FftPlanReq req;  // what made it (a restore makes it again the same way)
  };
  // The device bytes one side of a transform spans (false when it
  // overflows or exceeds what a plan may address).
  static bool fft_span(int rank, const int64_t* dims, const FftSide& s, int64_t batch, int es, uint64_t* bytes);

  HandleTable<FftEntry> fft_plans_{0x46, 4096};

 public:
  // A plan is what made it: made again through on_FftPlan, with its checks.
  bool save(CheckpointWriter& w) override {
    w.u64(fft_plans_.size());
    fft_plans_.for_each([&](uint64_t h, FftEntry& e) {
      w.u64(h);
      w.bytes({reinterpret_cast<const uint8_t*>(&e.req), sizeof e.req});
    });
    return true;
  }
  bool restore(CheckpointReader& r, std::string* why) override {
    const uint64_t n = r.count(4096, 16);
    for (uint64_t i = 0; i < n && r.ok(); i++) {
      const uint64_t h = r.u64();
      auto b = r.bytes(sizeof(FftPlanReq));
      FftPlanReq rq{};
      FftPlanResp rs{};
      std::vector<uint8_t> tail;
      if (b.size() != sizeof rq) break;
      std::memcpy(&rq, b.data(), sizeof rq);
      if (on_FftPlan(rq, {}, rs, tail) != cudaSuccess || !fft_plans_.rename(rs.handle, h))
        return *why = "a cuFFT plan of the checkpoint cannot be made again", false;
    }
    return r.ok() || (*why = "truncated cuFFT state", false);
  }
};

bool FftService::fft_span(int rank, const int64_t* dims, const FftSide& s, int64_t batch, int es, uint64_t* bytes) {
  // Highest element index: (batch-1)*dist + stride * sum_k (dims[k]-1) * prod_{j>k} embed[j].
  uint64_t inner = 0, scale = 1, v, last;
  for (int k = rank - 1; k >= 0; k--) {
    if (!mul_ok(uint64_t(dims[k] - 1), scale, &v) || !add_ok(inner, v, &inner)) return false;
    if (k > 0 && !mul_ok(scale, uint64_t(s.embed[k]), &scale)) return false;
  }
  if (!mul_ok(inner, uint64_t(s.stride), &inner) || !mul_ok(uint64_t(batch - 1), uint64_t(s.dist), &last) ||
      !add_ok(last, inner, &last) || !add_ok(last, 1, &last) || last > uint64_t(kFftMax))
    return false;
  return mul_ok(last, uint64_t(es), bytes);
}

int32_t FftService::on_FftPlan(const FftPlanReq& rq, std::span<const uint8_t>, FftPlanResp& rs, std::vector<uint8_t>&) {
  auto refuse = [&](int32_t r) {
    rs.result = r;
    return int32_t(cudaErrorInvalidValue);
  };
  if (rq.flags & ~(kFftAdvanced | kFftHalf | kFftBf16) || (rq.flags & kFftHalf && rq.flags & kFftBf16))
    return refuse(kCufftInvalidValue);
  if (!fft_valid_type(rq.type)) return refuse(kCufftInvalidType);
  if (rq.rank < 1 || rq.rank > 3 || rq.batch < 1 || rq.batch > kFftMax) return refuse(kCufftInvalidSize);
  FftDesc d;
  d.rank = rq.rank;
  d.type = rq.type;
  d.batch = rq.batch;
  d.advanced = rq.flags & kFftAdvanced;
  d.storage = rq.flags & kFftHalf ? FftStorage::Half : rq.flags & kFftBf16 ? FftStorage::Bf16 : FftStorage::Native;
  for (int k = 0; k < d.rank; k++) {
    if (rq.n[k] < 1 || rq.n[k] > kFftMax) return refuse(kCufftInvalidSize);
    d.n[k] = rq.n[k];
  }
  // cuFFT's 16-bit transforms: single-precision kinds, power-of-two sizes,
  // no stride on the real side of R2C/C2R.
  if (d.storage != FftStorage::Native) {
    if (fft_is_double(d.type)) return refuse(kCufftInvalidType);
    for (int k = 0; k < d.rank; k++)
      if (d.n[k] & (d.n[k] - 1)) return refuse(kCufftNotSupported);
    if (d.advanced && ((fft_is_r2c(d.type) && rq.istride != 1) || (fft_is_c2r(d.type) && rq.ostride != 1)))
      return refuse(kCufftNotSupported);
  }
  // Every transform (its last dimension padded as an in-place real side
  // is) fits the limit, so the basic layout's products cannot overflow.
  uint64_t total = 1;
  for (int k = 0; k < d.rank; k++)
    if (!mul_ok(total, uint64_t(d.n[k] + (k == d.rank - 1 ? 2 : 0)), &total) || total > uint64_t(kFftMax))
      return refuse(kCufftInvalidSize);
  if (d.advanced) {
    for (int k = 0; k < d.rank; k++) {
      d.in.embed[k] = rq.inembed[k];
      d.out.embed[k] = rq.onembed[k];
    }
    d.in.stride = rq.istride, d.in.dist = rq.idist;
    d.out.stride = rq.ostride, d.out.dist = rq.odist;
    for (const FftSide* s : {&d.in, &d.out})
      if (s->stride < 1 || s->stride > kFftMax || s->dist < 1 || s->dist > kFftMax) return refuse(kCufftInvalidValue);
  }
  // Both layouts an execution may use (in-place, out-of-place) must hold
  // every transform: an embed smaller than its extent folds rows onto each
  // other (embed[0] only bounds nothing, as in cuFFT).
  for (bool in_place : {false, true}) {
    FftLayout l = fft_layout(d, in_place);
    for (int k = 1; k < d.rank; k++)
      if (l.in.embed[k] < l.in_dims[k] || l.out.embed[k] < l.out_dims[k] || l.in.embed[k] > kFftMax ||
          l.out.embed[k] > kFftMax)
        return refuse(kCufftInvalidValue);
    uint64_t bi, bo;
    if (!fft_span(d.rank, l.in_dims, l.in, d.batch, l.in_es, &bi) ||
        !fft_span(d.rank, l.out_dims, l.out, d.batch, l.out_es, &bo) || l.in.dist > kFftMax ||
        l.out.dist > kFftMax)
      return refuse(kCufftInvalidSize);
  }
  std::string err;
  Fft* fft = ctx_->fft(&err);
  if (!fft) {
    spdlog::warn("session {}: cuFFT unavailable: {}", id_, err);
    return cudaErrorNotSupported;
  }
  auto e = std::make_unique<FftEntry>();
  e->desc = d;
  e->req = rq;
  if (Err r = fft->create(d, &e->plan); r != cudaSuccess) return r;
  rs.work_size = fft->work_size(*e->plan);
  rs.handle = fft_plans_.add(std::move(e));
  if (!rs.handle) return refuse(kCufftInvalidPlan);  // the table is full
  return cudaSuccess;
}

int32_t FftService::on_FftDestroy(const FftDestroyReq& rq, std::span<const uint8_t>, FftDestroyResp&,
                               std::vector<uint8_t>&) {
  return fft_plans_.take(rq.handle) ? cudaSuccess : cudaErrorInvalidResourceHandle;
}

int32_t FftService::on_FftExec(const FftExecReq& rq, std::span<const uint8_t>, FftExecResp&, std::vector<uint8_t>&) {
  FftEntry* e = fft_plans_.get(rq.handle);
  if (!e) return cudaErrorInvalidResourceHandle;
  const FftDesc& d = e->desc;
  if (rq.type != d.type) return cudaErrorInvalidValue;
  const bool complex = !fft_is_r2c(d.type) && !fft_is_c2r(d.type);
  if (complex && rq.direction != -1 && rq.direction != 1) return cudaErrorInvalidValue;
  Stream* s;
  if (Err r = resolve_stream(rq.stream, &s); r != cudaSuccess) return r;
  FftLayout l = fft_layout(d, rq.idata == rq.odata);
  uint64_t bi, bo;
  if (!fft_span(d.rank, l.in_dims, l.in, d.batch, l.in_es, &bi) ||
      !fft_span(d.rank, l.out_dims, l.out, d.batch, l.out_es, &bo))
    return cudaErrorInvalidValue;
  if (!device_range(rq.idata, bi) || !device_range(rq.odata, bo)) return cudaErrorInvalidValue;
  Fft* fft = ctx_->fft(nullptr);
  if (!fft) return cudaErrorNotSupported;
  return fft->exec(*e->plan, d, l, s, rq.idata, rq.odata, complex ? rq.direction : 0);
}

std::unique_ptr<Service> make_fft_service(Session& s) { return std::make_unique<FftService>(s); }

}  // namespace wh::server
