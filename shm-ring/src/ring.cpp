// Ring ends: framing, validation of every peer-written word, wrap-around.
#include <cstring>

#include "atomics.hpp"
#include "wormhole/ring.hpp"

namespace wh::ring {

namespace {
constexpr uint32_t kHdr = sizeof(wh_msg_hdr);
inline uint64_t align8(uint64_t v) { return (v + 7) & ~uint64_t(7); }
}  // namespace

// Where the record starting at ring index idx keeps its magic: at idx, or at
// position 0 when fewer than a header's bytes remain (the implicit skip).
uint32_t* magic_at(uint8_t* ring, uint32_t size, uint64_t idx) {
  uint32_t pos = uint32_t(idx & (size - 1));
  if (size - pos < kHdr) pos = 0;
  return reinterpret_cast<uint32_t*>(ring + pos);
}

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
  // Early wrap. A round trip costs much more when every record lands on
  // lines neither core has touched for a whole ring (a raw two-ring
  // ping-pong measured 190 ns with 1 MiB rings against 120 ns with 4 KiB
  // ones, docs/benchmarks.md). So once we
  // are past the hot window and the consumer has caught up, we pad to the
  // ring's end and start again at 0: an idle or latency-bound channel keeps
  // reusing the same few KiB, while a busy one still streams through the
  // whole ring. Reading the consumer's head costs a line transfer, hence at
  // most one look per hot window of progress.
  if (!skip && pos >= kHotWindow && size_ >= 4 * kHotWindow && need + kHdr <= pos &&
      tail_ >= next_hot_check_) {
    if (!refresh_head()) return Status::Corrupt;
    if (head_ == tail_) skip = to_end;
    else next_hot_check_ = tail_ + kHotWindow;
  }
  const uint64_t total = skip + need;
  // Room for the record and for the zeroed magic of the next one (kHdr
  // covers it even behind an implicit skip; see region.h, "Records").
  if (size_ - (tail_ - head_) < total + kHdr) {
    if (!refresh_head()) return Status::Corrupt;
    if (size_ - (tail_ - head_) < total + kHdr) return Status::Full;
  }
  // Publish the tail first: a consumer that finds the next magic still 0
  // then sees a tail that covers it (between our stores, not garbage), and
  // the tail line's transfer is over before the record's magic is written,
  // so the record's line moves to the consumer once, complete.
  const uint64_t end = tail_ + total;
  store_rel(tail_word_, end);
  if (skip >= kHdr) {
    wh_msg_hdr pad{};
    pad.opcode = WH_OP_PAD;  // magic stays 0 until published below
    pad.len = uint32_t(skip - kHdr);
    std::memcpy(ring_ + pos, &pad, kHdr);
  }
  uint8_t* dst = ring_ + ((tail_ + skip) & mask);
  wh_msg_hdr h = hdr_in;
  h.magic = 0;
  h.len = uint32_t(len);
  std::memcpy(dst, &h, kHdr);
  uint8_t* out = dst + kHdr;
  for (auto& p : parts) {
    if (!p.empty()) std::memcpy(out, p.data(), p.size());
    out += p.size();
  }
  tail_ = end;
  // The consumer will poll the next record's magic: it reads 0 until that
  // record is published.
  store_relaxed(magic_at(ring_, size_, tail_), 0u);
  store_rel(reinterpret_cast<uint32_t*>(dst), WH_MSG_MAGIC);
  if (skip >= kHdr) store_rel(reinterpret_cast<uint32_t*>(ring_ + pos), WH_MSG_MAGIC);
  return Status::Ok;
}

void RingWriter::start() {
  tail_ = head_ = next_hot_check_ = 0;
  poisoned_ = false;
  store_relaxed(magic_at(ring_, size_, 0), 0u);
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
  // The next record's magic is the doorbell: polling it brings the record's
  // first line along, where a tail that moved would cost a second transfer
  // for the record. The tail is looked at now and then only, so that a peer
  // committing garbage without a magic is still noticed (by read()).
  if (load_acq(magic_at(const_cast<uint8_t*>(ring_), size_, head_)) != 0) return true;
  if ((++polls_ & 63) != 0) return false;
  return head_ != load_acq(tail_word_);
}

Status RingReader::read(Message& out) {
  if (poisoned_) return Status::Corrupt;
  const uint32_t mask = size_ - 1;
  // At most: an implicit skip or a padding record, then a record at 0.
  for (int step = 0; step < 3; step++) {
    const uint32_t pos = uint32_t(head_ & mask);
    const uint32_t to_end = size_ - pos;
    // A published magic commits the record (region.h); behind an implicit
    // skip it is the one at position 0. Without one, the tail tells an
    // empty ring from a producer between its two stores, and shows garbage:
    // an index behind what we consumed (we only ever take records the
    // producer published), too far ahead, or misaligned.
    if (load_acq(magic_at(const_cast<uint8_t*>(ring_), size_, head_)) == 0) {
      const uint64_t t = load_acq(tail_word_);
      if (t == head_) return Status::Empty;
      if (t < head_ || t - head_ > size_ || (t & 7))
        return fail("tail index out of range: head=" + std::to_string(head_) +
                    " tail=" + std::to_string(t));
      if (t - head_ < kHdr) return fail("committed bytes shorter than a record header");
      return Status::Empty;  // tail stored, magic not yet (or never: the peer's loss)
    }
    if (to_end < kHdr) {  // implicit skip
      head_ += to_end;
      continue;
    }
    wh_msg_hdr h;
    std::memcpy(&h, ring_ + pos, kHdr);
    if (h.magic != WH_MSG_MAGIC) return fail("bad record magic at " + std::to_string(head_));
    if (h.opcode == WH_OP_PAD) {
      // An honest writer never pads from position 0 (a record always fits
      // an empty ring there): refusing it also bounds this loop.
      if (pos == 0 || uint64_t(h.len) + kHdr != to_end)
        return fail("padding record does not end at the ring's end");
      head_ += to_end;
      store_rel(head_word_, head_);
      continue;
    }
    if (h.len > max_msg_) return fail("record length " + std::to_string(h.len) + " > max_msg");
    const uint64_t rec = kHdr + align8(h.len);
    if (rec > to_end) return fail("record wraps the ring's end");
    out.hdr = h;
    out.payload.resize(h.len);
    if (h.len) std::memcpy(out.payload.data(), ring_ + pos + kHdr, h.len);
    head_ += rec;
    store_rel(head_word_, head_);
    return Status::Ok;
  }
  return fail("padding after padding");
}

}  // namespace wh::ring
