// Pinned memory past a client's first data area: shared segments the
// session asks its transport for (PinnedGrow) and gives back
// (PinnedRelease, or the session's end). Only the local-socket transport
// can hand a client more shared memory; VM and ucx:// sessions have no
// source and their clients keep the first area alone.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace wh::server {

// One segment, mapped in the server. Destroying it gives its memory and
// its share of the owner's budget back.
class PinnedSegment {
 public:
  virtual ~PinnedSegment() = default;
  virtual std::span<uint8_t> memory() const = 0;
};

class PinnedSource {
 public:
  virtual ~PinnedSource() = default;
  // A new segment of `bytes`; nullptr (and why) when the owner's budget or
  // the host refuses it.
  virtual std::unique_ptr<PinnedSegment> create(uint64_t bytes, std::string* why) = 0;
  // Hands the segment to the client, tagged `index`, before the answer that
  // names it; false when it cannot be sent now.
  virtual bool hand_over(const PinnedSegment& s, uint64_t index) = 0;
};

}  // namespace wh::server
