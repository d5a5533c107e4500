// Ring ends: framing, validation of every peer-written word, wrap-around.
#include <cstring>

#include "atomics.hpp"
#include "wormhole/ring.hpp"

namespace wh::ring {

namespace {
constexpr uint32_t kHdr = sizeof(wh_msg_hdr);
inline uint64_t align8(uint64_t v) { return (v + 7) & ~uint64_t(7); }
}  // namespace

RingWriter::RingWriter(uint8_t* ring, uint32_t size, uint64_t* tail_word,
                       const uint64_t* head_word, uint32_t max_msg)
    : ring_(ring), size_(size), tail_word_(tail_word), head_word_(head_word), max_msg_(max_msg) {}

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

Status RingWriter::write(const wh_msg_hdr& hdr_in, std::span<const std::span<const uint8_t>> parts) {
  if (poisoned_) return Status::Corrupt;
  // Opcode 0 frames padding: a message carrying it would be read as padding
  // (and poison the peer's reader), so it is refused here.
  if (hdr_in.opcode == WH_OP_PAD) return Status::Invalid;
  uint64_t len = 0;
  for (auto& p : parts) len += p.size();
  if (len > max_msg_) return Status::TooBig;
  const uint64_t need = kHdr + align8(len);
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
  uint8_t* dst = ring_ + ((tail_ + skip) & mask);
  wh_msg_hdr h = hdr_in;
  h.magic = WH_MSG_MAGIC;
  h.len = uint32_t(len);
  std::memcpy(dst, &h, kHdr);
  uint8_t* out = dst + kHdr;
  for (auto& p : parts) {
    if (!p.empty()) std::memcpy(out, p.data(), p.size());
    out += p.size();
  }
  tail_ += total;
  store_rel(tail_word_, tail_);
  return Status::Ok;
}

RingReader::RingReader(const uint8_t* ring, uint32_t size, const uint64_t* tail_word,
                       uint64_t* head_word, uint32_t max_msg)
    : ring_(ring), size_(size), tail_word_(tail_word), head_word_(head_word), max_msg_(max_msg) {}

Status RingReader::fail(std::string why) {
  poisoned_ = true;
  error_ = std::move(why);
  return Status::Corrupt;
}

bool RingReader::readable() {
  if (poisoned_) return true;
  if (head_ != load_acq(tail_word_)) return true;
  // While polling, also pull the lines where the next record will land: when
  // the tail moves the record is (mostly) here already, instead of costing a
  // second cache-line transfer after the tail's (measured: ~8% off the round
  // trip). A prefetch never faults, and nothing read this way is acted on.
  const uint32_t pos = uint32_t(head_ & (size_ - 1));
  __builtin_prefetch(ring_ + pos, 0, 3);
  if (pos + 64 < size_) __builtin_prefetch(ring_ + pos + 64, 0, 3);
  return false;
}

Status RingReader::read(Message& out) {
  if (poisoned_) return Status::Corrupt;
  const uint32_t mask = size_ - 1;
  for (;;) {
    if (head_ == tail_) {
      uint64_t t = load_acq(tail_word_);
      if (t == head_) return Status::Empty;
      // The producer's tail moves forward, by whole 8-byte-aligned records,
      // and never more than a ring ahead of our head.
      if (t < tail_ || t - head_ > size_ || (t & 7))
        return fail("tail index out of range: head=" + std::to_string(head_) +
                    " tail=" + std::to_string(t));
      tail_ = t;
    }
    const uint64_t avail = tail_ - head_;
    const uint32_t pos = uint32_t(head_ & mask);
    const uint32_t to_end = size_ - pos;
    if (to_end < kHdr) {  // implicit skip
      if (avail < to_end) return fail("committed bytes end inside an implicit skip");
      head_ += to_end;
      continue;
    }
    if (avail < kHdr) return fail("committed bytes shorter than a record header");
    wh_msg_hdr h;
    std::memcpy(&h, ring_ + pos, kHdr);
    if (h.magic != WH_MSG_MAGIC) return fail("bad record magic at " + std::to_string(head_));
    if (h.opcode == WH_OP_PAD) {
      if (uint64_t(h.len) + kHdr != to_end || avail < to_end)
        return fail("padding record does not end at the ring's end");
      head_ += to_end;
      store_rel(head_word_, head_);
      continue;
    }
    if (h.len > max_msg_) return fail("record length " + std::to_string(h.len) + " > max_msg");
    const uint64_t rec = kHdr + align8(h.len);
    if (rec > to_end) return fail("record wraps the ring's end");
    if (rec > avail) return fail("record extends past the committed tail");
    out.hdr = h;
    out.payload.resize(h.len);
    if (h.len) std::memcpy(out.payload.data(), ring_ + pos + kHdr, h.len);
    head_ += rec;
    store_rel(head_word_, head_);
    return Status::Ok;
  }
}

}  // namespace wh::ring
