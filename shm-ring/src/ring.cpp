// Ring ends: framing, validation of every peer-written word, wrap-around.
#include <algorithm>
#include <cstring>

#include "atomics.hpp"
#include "wormhole/ring.hpp"

namespace wh::ring {

namespace {
constexpr uint32_t kHdr = sizeof(wh_msg_hdr);
}  // namespace

RingWriter::RingWriter(uint8_t* ring, uint32_t size, uint64_t* tail_word,
                       const uint64_t* head_word, uint32_t max_msg, uint64_t* copy_word)
    : ring_(ring),
      size_(size),
      tail_word_(tail_word),
      head_word_(head_word),
      max_msg_(max_msg),
      copy_word_(copy_word) {
  set_fast_limits();
}

void RingWriter::set_fast_limits() {
  if (poisoned_ || !size_) {
    fast_start_ = fast_end_ = 0;
    return;
  }
  const uint64_t lap = tail_ & ~uint64_t(size_ - 1);  // where this lap of the ring starts
  fast_end_ = std::min(lap + size_, head_ + size_);
  // No early-wrap look in a ring too small for one (see write_slow).
  fast_start_ = size_ >= 4 * kHotWindow ? std::max(lap + kHotWindow, next_hot_check_)
                                        : ~uint64_t(0);
}

bool RingWriter::refresh_head() {
  uint64_t h = load_acq(head_word_);
  // The consumer's head may only move forward and never past our tail.
  if (h < head_ || h > tail_) {
    poisoned_ = true;
    return false;
  }
  head_ = h;
  return true;
}

Status RingWriter::write_slow(const wh_msg_hdr& hdr_in,
                              std::span<const std::span<const uint8_t>> parts, uint64_t len) {
  const Status s = write_slow_body(hdr_in, parts, len);
  set_fast_limits();
  return s;
}

Status RingWriter::write_slow_body(const wh_msg_hdr& hdr_in,
                                   std::span<const std::span<const uint8_t>> parts,
                                   uint64_t len) {
  if (poisoned_) return Status::Corrupt;
  // Opcode 0 frames padding: a message carrying it would be read as padding
  // (and poison the peer's reader), so it is refused here.
  if (hdr_in.opcode == WH_OP_PAD) return Status::Invalid;
  if (len > max_msg_) return Status::TooBig;
  const uint64_t need = record_bytes(len);
  const uint32_t mask = size_ - 1;
  const uint32_t pos = uint32_t(tail_ & mask);
  const uint32_t to_end = size_ - pos;
  // Skip the rest of the ring when the record would wrap (see region.h).
  uint64_t skip = (to_end < need) ? to_end : 0;
  // Early wrap: past the hot window, a ring the consumer has drained starts
  // again at 0 (a padding record covers the rest), so a latency-bound
  // channel keeps reusing a few KiB of lines both cores hold instead of
  // streaming through the whole ring (measured in docs/benchmarks.md). A
  // busy channel still streams. Reading the head costs a line transfer:
  // at most one look per hot window of progress.
  if (!skip && pos >= kHotWindow && size_ >= 4 * kHotWindow && need <= pos && tail_ >= next_hot_check_) {
    if (!refresh_head()) return Status::Corrupt;
    if (head_ == tail_)
      skip = to_end;
    else
      next_hot_check_ = tail_ + kHotWindow;
  }
  const uint64_t total = skip + need;
  if (size_ - (tail_ - head_) < total) {
    if (!refresh_head()) return Status::Corrupt;
    if (size_ - (tail_ - head_) < total) return Status::Full;
  }
  if (skip >= kHdr) {
    wh_msg_hdr pad{};
    pad.magic = WH_MSG_MAGIC;
    pad.opcode = WH_OP_PAD;
    pad.len = uint32_t(skip - kHdr);
    std::memcpy(ring_ + pos, &pad, kHdr);
  }
  emit(ring_ + ((tail_ + skip) & mask), hdr_in, uint32_t(len), parts);
  tail_ += total;
  // After padding the copy does not span [head, tail) and the reader goes to
  // the ring; kept fresh all the same, so no stale copy is ever current.
  if (copy_word_ && need <= WH_COPY_MAX) {
    uint64_t w[WH_COPY_MAX / 8];
    publish_copy(w, encode(w, hdr_in, uint32_t(len), parts));
  }
  store_rel(tail_word_, tail_);
  return Status::Ok;
}

RingReader::RingReader(const uint8_t* ring, uint32_t size, const uint64_t* tail_word,
                       uint64_t* head_word, uint32_t max_msg, const uint64_t* copy_word)
    : ring_(ring),
      size_(size),
      tail_word_(tail_word),
      head_word_(head_word),
      max_msg_(max_msg),
      copy_word_(copy_word) {}

// Failures are rare: formatting the reason stays out of the hot path.
Status RingReader::fail(const char* why, uint64_t at, uint64_t value) {
  poisoned_ = true;
  error_ = why;
  error_ += " (at " + std::to_string(at) + ", value " + std::to_string(value) + ")";
  return Status::Corrupt;
}

// Everything read() does not take on its fast path: records behind others,
// records too big for the copy, padding, and all validation failures.
Status RingReader::read_slow(Message& out) {
  if (poisoned_) return Status::Corrupt;
  const uint32_t mask = size_ - 1;
  for (;;) {
    if (head_ == tail_) {
      uint64_t t = load_acq(tail_word_);
      if (t == head_) return Status::Empty;
      // The producer's tail moves forward, by whole WH_MSG_ALIGN-aligned records,
      // and never more than a ring ahead of our head.
      if (t < tail_ || t - head_ > size_ || (t & (WH_MSG_ALIGN - 1))) [[unlikely]]
        return fail("tail index out of range", head_, t);
      tail_ = t;
    }
    // The newest record may be in the copy only (region.h): whenever it
    // could be the one at head_, the copy is asked first.
    if (copy_word_ && tail_ - head_ <= WH_COPY_MAX && read_copy(out, tail_)) return Status::Ok;
    const uint64_t avail = tail_ - head_;
    const uint32_t pos = uint32_t(head_ & mask);
    const uint32_t to_end = size_ - pos;
    if (to_end < kHdr) [[unlikely]] {  // implicit skip
      if (avail < to_end) return fail("committed bytes end inside an implicit skip", head_, tail_);
      head_ += to_end;
      continue;
    }
    if (avail < kHdr) [[unlikely]]
      return fail("committed bytes shorter than a record header", head_, tail_);
    // One snapshot of the header, straight into the caller's message: the
    // peer may rewrite the ring under us, so everything below is checked on
    // this copy, never re-read.
    wh_msg_hdr& h = out.hdr;
    std::memcpy(&h, ring_ + pos, kHdr);
    if (h.magic != WH_MSG_MAGIC) [[unlikely]]
      return fail("bad record magic", head_, h.magic);
    if (h.opcode == WH_OP_PAD) [[unlikely]] {
      if (uint64_t(h.len) + kHdr != to_end || avail < to_end)
        return fail("padding record does not end at the ring's end", head_, h.len);
      head_ += to_end;
      store_rel(head_word_, head_);
      continue;
    }
    if (h.len > max_msg_) [[unlikely]]
      return fail("record length > max_msg", head_, h.len);
    const uint64_t rec = record_bytes(h.len);
    if (rec > to_end) [[unlikely]] return fail("record wraps the ring's end", head_, h.len);
    if (rec > avail) [[unlikely]]
      return fail("record extends past the committed tail", head_, h.len);
    out.payload.resize(h.len);
    copy_payload(out.payload.data(), ring_ + pos + kHdr, h.len);
    last_copy_ = false;
    head_ += rec;
    store_rel(head_word_, head_);
    return Status::Ok;
  }
}

}  // namespace wh::ring
