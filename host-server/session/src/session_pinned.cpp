// Grown pinned memory: shared segments past the client's first data area
// (docs/ARCHITECTURE.md, "Copies and pinned memory"). Data-area offsets
// name segment k as (k << kPinnedSegmentShift) + offset, which host_range
// resolves; each segment is mapped on the device like the first area, so
// kernels reach mapped pinned memory in it.
#include <spdlog/spdlog.h>

#include "wormhole/server/session.hpp"

namespace wh::server {

using namespace wh::proto;

int32_t Session::on_PinnedGrow(const PinnedGrowReq& rq, std::span<const uint8_t>, PinnedGrowResp& rs,
                               std::vector<uint8_t>&) {
  if (!pinned_source_) return cudaErrorNotSupported;  // a VM or ucx:// client: its first area is all
  const uint64_t size = pinned_segment_bytes(rq.bytes);
  if (size == 0) return cudaErrorInvalidValue;
  if (grown_.size() >= kMaxPinnedSegments - 1) return cudaErrorMemoryAllocation;
  uint64_t k = 1;  // the lowest free index (grown_ is ordered)
  for (const auto& [i, g] : grown_) {
    if (i != k) break;
    k++;
  }
  std::string why;
  std::unique_ptr<PinnedSegment> seg = pinned_source_->create(size, &why);
  if (!seg) return cudaErrorMemoryAllocation;  // the source logged why
  const std::span<uint8_t> mem = seg->memory();
  uint64_t dptr = 0;
  if (Err e = ctx_->map_host(mem.data(), mem.size(), rq.want_dptr, &dptr); e != cudaSuccess) return e;
  if (!pinned_source_->hand_over(*seg, k)) {
    ctx_->unmap_host(dptr);
    return cudaErrorMemoryAllocation;
  }
  grown_[k] = {std::move(seg), mem, dptr};
  spdlog::debug("session {}: pinned segment {} of {} MiB ({} grown)", id_, k, size >> 20, grown_.size());
  rs.segment = k;
  rs.size = size;
  rs.dptr = dptr;
  return cudaSuccess;
}

int32_t Session::on_PinnedRelease(const PinnedReleaseReq& rq, std::span<const uint8_t>, PinnedReleaseResp&,
                                  std::vector<uint8_t>&) {
  auto it = grown_.find(rq.segment);  // 0 (the first area) and released ones are never found
  if (it == grown_.end()) return cudaErrorInvalidValue;
  // Kernels and copies stop reaching it before its memory goes (the cuda
  // backend waits for the device; the sim device runs calls in order).
  if (Err e = ctx_->unmap_host(it->second.dptr); e != cudaSuccess) return e;
  grown_.erase(it);
  spdlog::debug("session {}: pinned segment {} released ({} grown)", id_, rq.segment, grown_.size());
  return cudaSuccess;
}

void Session::own_grown(bool owned) {
  for (auto& [k, g] : grown_) g.seg->set_owned(owned);
}

void Session::release_grown() {
  for (auto& [k, g] : grown_) ctx_->unmap_host(g.dptr);
  grown_.clear();
}

}  // namespace wh::server
