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
  // The descriptor behind it (a migration hands it on); -1: none.
  virtual int fd() const { return -1; }
  // Whether ending it also frees its pages where the client still maps them
  // (off while another server may serve them: a migration in either direction).
  virtual void set_owned(bool) {}
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
  // A segment another server made and handed on (a migration): checked,
  // mapped here and charged like create's; not owned until set_owned(true).
  virtual std::unique_ptr<PinnedSegment> adopt(int fd, uint64_t bytes, std::string* why) {
    *why = "this server takes no pinned segments";
    return nullptr;
  }
};

}  // namespace wh::server
