// wormhole/ring.hpp - the shm-ring transport: regions, channels, waiting.
//
// The layout itself is in region.h. This header gives the two ends of a
// channel: ClientChannel (many threads of one client process submit; each
// response reaches its caller by call id) and ServerChannel (one server
// thread consumes requests and answers). Both validate everything they read
// from the region; on garbage the channel is poisoned and every later call
// fails with Status::Corrupt.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "wormhole/region.h"

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

// The writer stores a small record straight into the tail block's copy and
// the ring with SIMD stores (RingWriter::write). Elsewhere, and under TSan
// (which models no fences and would see plain stores racing the reader),
// it stages the record as words and stores each atomically.
#if defined(__x86_64__) && defined(__SSE2__) && !defined(__SANITIZE_THREAD__)
#define WH_RING_DIRECT_COPY 1
#else
#define WH_RING_DIRECT_COPY 0
#endif

namespace wh::ring {

enum class Status {
  Ok,
  Empty,     // nothing to read (non-blocking)
  Full,      // no room right now (non-blocking)
  TooBig,    // payload larger than the region's max_msg
  Corrupt,   // the peer wrote garbage; channel poisoned
  PeerDead,  // the peer's heartbeat stopped
  Closed,    // the channel was closed or reclaimed
  Timeout,
  Invalid,   // bad argument from our own caller
};
const char* to_string(Status s);

struct RegionConfig {
  uint32_t nchan = 1;
  uint32_t req_size = 1u << 20;
  uint32_t resp_size = 1u << 20;
  uint64_t data_size = 16ull << 20;
  uint32_t max_msg = 0;  // 0: the largest that always fits (ring/2 - header)
  uint32_t hb_period_ms = 100;
  uint32_t hb_timeout_ms = 600;
  uint32_t features = WH_FEAT_FUTEX;
};

// A mapped region. Owns its mapping when it created or mmapped it; a
// caller-supplied mapping (an ivshmem BAR) is only borrowed.
class Region {
 public:
  Region() = default;
  Region(Region&&) noexcept;
  Region& operator=(Region&&) noexcept;
  ~Region();

  // Create and format a region in a new memfd (fd() may be passed to a peer).
  static std::unique_ptr<Region> create_memfd(const char* name, const RegionConfig& cfg,
                                              std::string* err);
  // Create (or truncate) and format a file, e.g. /dev/shm/NAME.
  static std::unique_ptr<Region> create_file(const std::string& path, const RegionConfig& cfg,
                                             std::string* err);
  // Map an existing region from an fd / a file and validate its header.
  static std::unique_ptr<Region> attach_fd(int fd, std::string* err);
  static std::unique_ptr<Region> attach_file(const std::string& path, std::string* err);
  // Use memory someone else mapped (not unmapped by us). If `format` is set
  // the memory is formatted with cfg; otherwise its header is validated.
  static std::unique_ptr<Region> attach_memory(void* base, size_t size, bool format,
                                               const RegionConfig& cfg, std::string* err);

  // Lay out headers and channels over [base, base+size). Zeroes control
  // blocks; returns false if cfg does not fit.
  static bool format(void* base, size_t size, const RegionConfig& cfg, std::string* err);
  // Bytes a region with this config needs.
  static uint64_t required_size(const RegionConfig& cfg);
  // Wraps an existing mapping (internal; used by the factories above).
  static std::unique_ptr<Region> adopt(void* base, size_t size, int fd, bool owns_map,
                                       bool format, const RegionConfig& cfg, std::string* err);

  uint8_t* base() const { return base_; }
  size_t size() const { return size_; }
  int fd() const { return fd_; }
  // A validated private copy of the header, taken at attach time: the live
  // header may be overwritten by a hostile peer later, so geometry is never
  // re-read from shared memory.
  const wh_region_hdr& geometry() const { return geo_; }
  wh_region_hdr* live_header() const { return reinterpret_cast<wh_region_hdr*>(base_); }
  wh_chan_hdr* channel(uint32_t i) const;
  uint8_t* channel_base(uint32_t i) const;

 private:
  bool load_geometry(std::string* err);
  uint8_t* base_ = nullptr;
  size_t size_ = 0;
  int fd_ = -1;
  bool owns_map_ = false;
  wh_region_hdr geo_{};
};

// How a side waits for its peer: spin with pause, then yield, then sleep
// (futex in the region when both sides share a kernel, a doorbell hook, or
// timed polling with exponential backoff).
class Doorbell {
 public:
  virtual ~Doorbell() = default;
  // Wake whoever sleeps on `bell` (after it was incremented).
  virtual void ring(uint32_t* bell) = 0;
  // Sleep while *bell == seen, at most timeout.
  virtual void wait(uint32_t* bell, uint32_t seen, std::chrono::microseconds timeout) = 0;
};
Doorbell* futex_doorbell();  // process-wide futex implementation

struct WaitPolicy {
  enum class Sleep { Futex, Doorbell, Poll };
  uint32_t spin_iters = 4000;  // polling rounds before yielding
  uint32_t hot_polls = 256;    // of those, the first polls spaced by LFENCE, not PAUSE (poll_relax)
  uint32_t far_polls = 24;     // a wait longer than this (in LFENCE polls): PAUSE next time (PollPace)
  uint32_t yield_iters = 64;   // sched_yield() rounds before sleeping
  Sleep sleep = Sleep::Futex;
  Doorbell* doorbell = nullptr;  // for Sleep::Doorbell
  uint32_t poll_max_us = 200;    // Poll: backoff ceiling
  // From environment WORMHOLE_WAIT=spin|futex|poll (default futex),
  // WORMHOLE_SPIN=<spin_iters>, WORMHOLE_HOT_POLLS=<hot_polls>,
  // WORMHOLE_FAR_POLLS=<far_polls>.
  static WaitPolicy from_env();
};

// The policy a channel of this region actually uses (no futex sleeping
// across a VM boundary).
WaitPolicy effective_policy(WaitPolicy p, const wh_region_hdr& region);

// Detects a silent peer from its heartbeat word.
class PeerMonitor {
 public:
  PeerMonitor() = default;
  PeerMonitor(const uint64_t* word, uint32_t timeout_ms) : word_(word), timeout_ms_(timeout_ms) {}
  // True once the peer's heartbeat has not moved for timeout_ms.
  bool dead();
  void reset();

 private:
  const uint64_t* word_ = nullptr;
  uint32_t timeout_ms_ = 0;
  uint64_t last_ = 0;
  bool seen_ = false;
  std::chrono::steady_clock::time_point last_change_{};
};

// A process-wide thread that bumps heartbeat words every period.
class Heartbeat {
 public:
  static Heartbeat& instance();
  void add(uint64_t* word, uint32_t period_ms);
  void remove(uint64_t* word);
  // Stop beating for every word (tests: simulate a hung peer).
  void pause_for_test(bool paused);

 private:
  Heartbeat();
  ~Heartbeat();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A received message: a private copy of the header and payload, so a peer
// cannot change them after validation.
struct Message {
  wh_msg_hdr hdr{};
  std::vector<uint8_t> payload;
};

// Bytes a record with a payload of len takes in a ring (see region.h).
constexpr uint64_t record_bytes(uint64_t len) {
  return (sizeof(wh_msg_hdr) + len + WH_MSG_ALIGN - 1) & ~uint64_t(WH_MSG_ALIGN - 1);
}

// Copies n bytes. Payloads are mostly tens of bytes, for which a call into
// libc's memcpy costs more than the copy itself: from 16 to 64 bytes, two
// overlapping fixed-size copies (a few moves, inline) do it.
inline void copy_payload(uint8_t* dst, const uint8_t* src, size_t n) {
  if (n >= 16 && n <= 32) {
    std::memcpy(dst, src, 16);
    std::memcpy(dst + n - 16, src + n - 16, 16);
  } else if (n > 32 && n <= 64) {
    std::memcpy(dst, src, 32);
    std::memcpy(dst + n - 32, src + n - 32, 32);
  } else if (n) {
    std::memcpy(dst, src, n);
  }
}

// Stores the first n words of the tail block's copy (and, after the tail,
// the same words into the ring). Wider stores are measurably better here,
// in the lines the consumer polls: six 8-byte stores made the round trip
// 5-10 ns slower than three 16-byte ones (16 of 16 same-process runs;
// docs/benchmarks.md). In the copy they must become visible after the
// copy_tail = 0 store before them (the seqlock); their order among
// themselves does not matter. On x86 stores stay in program order, so a
// compiler barrier does it; elsewhere (and under TSan, which models no
// fences) each word is a release store, which orders the 0 before it, and
// the reader's acquire loads pair with them.
inline void store_copy_words(uint64_t* dst, const uint64_t* w, uint32_t n) {
#if defined(__x86_64__) && defined(__SSE2__) && !defined(__SANITIZE_THREAD__)
  __atomic_thread_fence(__ATOMIC_RELEASE);  // (a compiler barrier on x86)
  uint32_t i = 0;
  for (; i + 2 <= n; i += 2)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm_set_epi64x(int64_t(w[i + 1]), int64_t(w[i])));
  if (i < n) __atomic_store_n(dst + i, w[i], __ATOMIC_RELAXED);
#else
  for (uint32_t i = 0; i < n; i++) __atomic_store_n(dst + i, w[i], __ATOMIC_RELEASE);
#endif
}

// Low-level ring ends, one producer and one consumer, over a channel's ring.
// copy_word, when given, is the ring's copy_tail in the tail block, with the
// copy[] words after it (region.h, "The tail block's copy").
class RingWriter {
 public:
  RingWriter() = default;
  RingWriter(uint8_t* ring, uint32_t size, uint64_t* tail_word, const uint64_t* head_word,
             uint32_t max_msg, uint64_t* copy_word = nullptr);
  // Writes one record (header fields + payload parts). Full if no room,
  // TooBig above max_msg, Invalid for opcode WH_OP_PAD (0, reserved).
  // The common case (room before the ring's end, no early-wrap look due) is
  // defined here so that it can be inlined, and it stores the header field
  // by field (emit): the old block copy read the caller's fresh 2- and
  // 4-byte stores back with 16-byte loads, which the store buffer cannot
  // forward (a stall on every send; docs/benchmarks.md).
  [[gnu::always_inline]] Status write(const wh_msg_hdr& hdr,
                                     std::span<const std::span<const uint8_t>> parts) {
    const uint64_t len = parts_size(parts);
    const uint64_t need = record_bytes(len);
    // The ring's end, the room left and the early-wrap look (write_slow) as
    // two precomputed limits: a dozen instructions fewer on the round trip.
    if (hdr.opcode == WH_OP_PAD || len > max_msg_ || tail_ >= fast_start_ ||
        tail_ + need > fast_end_)
      return write_slow(hdr, parts, len);
    const uint32_t pos = uint32_t(tail_) & (size_ - 1);
    tail_ += need;
    if (copy_word_ && need <= WH_COPY_MAX) {
      // Copy first, ring after: the consumer reads the newest record from
      // the copy, and its ring bytes only have to be in place before the
      // copy changes again (region.h, "The tail block's copy").
#if WH_RING_DIRECT_COPY
      // Straight from the fields and the caller's bytes, no staging array:
      // encode() + store_copy_words() cost ~90 instructions for a 96-byte
      // record, all between seeing the peer's last message and publishing
      // this one (the round trip's critical path). DITHER=1 ab.sh: 8 of 8
      // means lower by 3-9 ns in one call, level in the next (benchmarks.md).
      const HdrWords hw = hdr_words(hdr, uint32_t(len));
      const __m128i h01 = _mm_set_epi64x(int64_t(hw.w1), int64_t(hw.w0));
      const __m128i h23 = _mm_set_epi64x(int64_t(hw.w3), int64_t(hw.w2));
      __atomic_store_n(copy_word_, uint64_t(0), __ATOMIC_RELEASE);  // the seqlock
      asm volatile("" ::: "memory");  // the record's stores stay after the 0
      put_record(reinterpret_cast<uint8_t*>(copy_word_ + 1), h01, h23, uint32_t(len), parts);
      __atomic_store_n(copy_word_, tail_, __ATOMIC_RELEASE);
      __atomic_store_n(tail_word_, tail_, __ATOMIC_RELEASE);
      put_record(ring_ + pos, h01, h23, uint32_t(len), parts);
#else
      // Both get the same words, encoded once.
      uint64_t w[WH_COPY_MAX / 8];
      const uint32_t n = encode(w, hdr, uint32_t(len), parts);
      publish_copy(w, n);
      __atomic_store_n(tail_word_, tail_, __ATOMIC_RELEASE);
      store_copy_words(reinterpret_cast<uint64_t*>(ring_ + pos), w, n);
#endif
    } else {
      emit(ring_ + pos, hdr, uint32_t(len), parts);
      __atomic_store_n(tail_word_, tail_, __ATOMIC_RELEASE);
    }
    return Status::Ok;
  }
  uint64_t tail() const { return tail_; }
  void reset() {
    tail_ = head_ = next_hot_check_ = 0;
    set_fast_limits();
  }
  // Continues where another writer of this ring stopped (a migrated
  // session's new server): positions from the shared words.
  void resume() {
    tail_ = __atomic_load_n(tail_word_, __ATOMIC_ACQUIRE);
    head_ = __atomic_load_n(head_word_, __ATOMIC_ACQUIRE);
    next_hot_check_ = 0;
    if (head_ > tail_ || tail_ - head_ > size_) poisoned_ = true;  // the peer's head is not one we could have left
    set_fast_limits();
  }
  bool poisoned() const { return poisoned_; }
  // A write past this ring position goes back to position 0 when the
  // consumer has drained the ring (see write()).
  static constexpr uint32_t kHotWindow = 4096;
  // Bytes written so far: the stream position just past the last record.
  uint64_t position() const { return tail_; }

 private:
  uint8_t* ring_ = nullptr;
  uint32_t size_ = 0;
  uint64_t* tail_word_ = nullptr;
  const uint64_t* head_word_ = nullptr;
  uint32_t max_msg_ = 0;
  uint64_t tail_ = 0;  // private: we own it
  uint64_t head_ = 0;  // last validated peer head
  uint64_t next_hot_check_ = 0;  // no early-wrap look at the head before this tail
  uint64_t* copy_word_ = nullptr;  // copy_tail, then copy[] (may be null)
  bool poisoned_ = false;
  // write() takes its inline path for a record that starts before
  // fast_start_ and ends at or before fast_end_ (absolute ring positions):
  // fast_end_ is the nearer of the ring's end and the last known head plus
  // the ring's size; fast_start_ is where the early-wrap look is due (the
  // hot window's end in this lap, or next_hot_check_ if later). Both 0 once
  // poisoned. Recomputed whenever write_slow ran (it alone moves the head,
  // the lap, next_hot_check_ and poisoned_): the inline path only advances
  // the tail, which leaves absolute limits valid.
  uint64_t fast_start_ = 0;
  uint64_t fast_end_ = 0;
  void set_fast_limits();
  bool refresh_head();  // loads and validates the consumer's head; false: poisoned
  // Everything write() does not inline: checks, padding, early wrap, a full
  // ring. Sets the fast limits again before it returns.
  Status write_slow(const wh_msg_hdr& hdr, std::span<const std::span<const uint8_t>> parts,
                    uint64_t len);
  Status write_slow_body(const wh_msg_hdr& hdr, std::span<const std::span<const uint8_t>> parts,
                         uint64_t len);
  // The parts' total size (one part, the common case, without a loop).
  static uint64_t parts_size(std::span<const std::span<const uint8_t>> parts) {
    if (parts.size() == 1) return parts[0].size();
    uint64_t n = 0;
    for (auto& p : parts) n += p.size();
    return n;
  }
  // The header as the record's first four little-endian words (magic,
  // version and opcode; flags and len; call id; status and aux).
  struct HdrWords {
    uint64_t w0, w1, w2, w3;
  };
  static HdrWords hdr_words(const wh_msg_hdr& h, uint32_t len) {
    return {WH_MSG_MAGIC | uint64_t(h.version) << 32 | uint64_t(h.opcode) << 48,
            h.flags | uint64_t(len) << 32, h.call_id,
            uint32_t(h.status) | uint64_t(h.aux) << 32};
  }
  // The parts, one after another, from dst.
  static void copy_parts(uint8_t* dst, std::span<const std::span<const uint8_t>> parts) {
    if (parts.size() == 1) return copy_payload(dst, parts[0].data(), parts[0].size());
    for (auto& p : parts) {
      copy_payload(dst, p.data(), p.size());
      dst += p.size();
    }
  }
  // The record at dst: header field by field, then the parts.
  static void emit(uint8_t* dst, const wh_msg_hdr& h, uint32_t len,
                   std::span<const std::span<const uint8_t>> parts) {
    auto* d = reinterpret_cast<wh_msg_hdr*>(dst);
    d->magic = WH_MSG_MAGIC;
    d->version = h.version;
    d->opcode = h.opcode;
    d->flags = h.flags;
    d->len = len;
    d->call_id = h.call_id;
    d->status = h.status;
    d->aux = h.aux;
    copy_parts(dst + sizeof(wh_msg_hdr), parts);
  }
#if WH_RING_DIRECT_COPY
  // A record at dst: the header's two halves, then the parts, then zeros
  // to the next 8 bytes (stored first: the payload overwrites its head).
  // Plain SIMD stores: in the copy their order among themselves does not
  // matter, only that they fall between the seqlock's two stores.
  [[gnu::always_inline]] static void put_record(uint8_t* dst, __m128i h01, __m128i h23,
                                                uint32_t len,
                                                std::span<const std::span<const uint8_t>> parts) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), h01);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 16), h23);
    uint8_t* pay = dst + sizeof(wh_msg_hdr);
    if (len % 8) std::memset(pay + (len & ~7u), 0, 8);
    copy_parts(pay, parts);
  }
#endif
  // A record of at most WH_COPY_MAX bytes as words: the header, then the
  // payload, zero-padded to 8 bytes; returns the number of words. Built
  // from the fields, not loaded back from bytes just stored (a
  // store-forwarding stall, see emit).
  static uint32_t encode(uint64_t* w, const wh_msg_hdr& h, uint32_t len,
                         std::span<const std::span<const uint8_t>> parts) {
    const HdrWords hw = hdr_words(h, len);
#if defined(__x86_64__) && defined(__SSE2__)
    // In pairs, as store_copy_words reads them back: a 16-byte load that
    // spans two 8-byte stores cannot be forwarded from the store buffer and
    // waits for them to reach the cache (this and read_copy's like stall:
    // 3-9 ns of round trip on the development VM's EPYC, docs/benchmarks.md).
    _mm_storeu_si128(reinterpret_cast<__m128i*>(w), _mm_set_epi64x(int64_t(hw.w1), int64_t(hw.w0)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(w + 2),
                     _mm_set_epi64x(int64_t(hw.w3), int64_t(hw.w2)));
#else
    w[0] = hw.w0;
    w[1] = hw.w1;
    w[2] = hw.w2;
    w[3] = hw.w3;
#endif
    const uint32_t n = uint32_t(record_bytes(len) / 8);
    if (len % 8) w[n - 1] = 0;  // the padding after the payload
    copy_parts(reinterpret_cast<uint8_t*>(&w[4]), parts);
    return n;
  }
  // Publishes the n words of w as the tail block's copy of the record that
  // ends at the tail about to be published (tail_): a seqlock, 0 while the
  // words change. The 0 is a release store: a consumer that sees it also
  // sees the ring bytes of the record the copy held before (written after
  // that record's tail).
  void publish_copy(const uint64_t* w, uint32_t n) {
    __atomic_store_n(copy_word_, uint64_t(0), __ATOMIC_RELEASE);
    store_copy_words(copy_word_ + 1, w, n);  // each word visible after the 0
    __atomic_store_n(copy_word_, tail_, __ATOMIC_RELEASE);
  }
};

class RingReader {
 public:
  RingReader() = default;
  RingReader(const uint8_t* ring, uint32_t size, const uint64_t* tail_word, uint64_t* head_word,
             uint32_t max_msg, const uint64_t* copy_word = nullptr);
  // Copies the next record out. Empty if none; Corrupt on garbage (out's
  // contents are then unspecified). Always inlined: it is the poll of the
  // spin loops in recv and call, and as a call of its own (GCC would not
  // inline it) each poll and the read after it paid a call and six
  // register saves.
  [[gnu::always_inline]] Status read(Message& out) {
    // Fast path, inline: caught up, and the one new record is small. Every
    // cycle from seeing the tail to the next store of our own is on the
    // round trip's critical path (docs/ring.md), so this is kept short.
    if (head_ == tail_ && copy_word_ && !poisoned_) {
      const uint64_t t = __atomic_load_n(tail_word_, __ATOMIC_ACQUIRE);
      if (t == head_) return Status::Empty;
      // A tail in (head_, head_ + WH_COPY_MAX], on a record boundary, is one
      // read_slow would accept; anything else goes there to be judged.
      if (t - head_ <= WH_COPY_MAX && !(t & (WH_MSG_ALIGN - 1)) && read_copy(out, t))
        return Status::Ok;
    }
    return read_slow(out);
  }
  // A record may be waiting (cheap, unvalidated): the poll of a spin loop.
  bool readable() {
    if (poisoned_) return true;
    if (head_ != __atomic_load_n(tail_word_, __ATOMIC_ACQUIRE)) return true;
    // While polling, also pull the lines where the next record will land:
    // when the tail moves the record is (mostly) here already, instead of
    // costing a second cache-line transfer after the tail's (measured: ~8%
    // off the round trip). A prefetch never faults, and nothing read this
    // way is acted on. Not while records come in the tail block's copy:
    // then the ring's lines are never read, and pulling them would only
    // take them from the producer, who writes them next.
    if (last_copy_) return false;
    const uint32_t pos = uint32_t(head_) & (size_ - 1);
    __builtin_prefetch(ring_ + pos, 0, 3);
    if (pos + 64 < size_) __builtin_prefetch(ring_ + pos + 64, 0, 3);
    return false;
  }
  void reset() {
    head_ = tail_ = 0;
    last_copy_ = false;
  }
  // Continues where another reader of this ring stopped (see RingWriter::resume).
  void resume() {
    head_ = tail_ = __atomic_load_n(head_word_, __ATOMIC_ACQUIRE);
    last_copy_ = false;
  }
  // Records taken from the tail block's copy instead of the ring (a statistic).
  uint64_t copy_reads() const { return copy_reads_; }
  std::string error() const { return error_; }

 private:
  [[gnu::cold, gnu::noinline]] Status fail(const char* why, uint64_t at, uint64_t value);
  Status read_slow(Message& out);
  // Out of line: inlined, vector::resize made GCC stop inlining the rest.
  [[gnu::noinline]] static void resize_payload(Message& m, size_t n) { m.payload.resize(n); }
  // The newest record, when it is [head_, t), from the tail block's copy
  // (region.h). Unless the copy was stable across the read (the seqlock)
  // and is a well-formed record spanning exactly [head_, t), the caller
  // reads the ring, whose validation decides; a copy_tail other than t also
  // tells that the record's ring bytes are in place. Nothing here touches
  // the ring's bytes. The words go straight to out (no staging copy): if
  // the re-check fails, out is rewritten by the ring path or unspecified.
  [[gnu::always_inline]] bool read_copy(Message& out, uint64_t t) {
    const uint64_t* c = copy_word_;
    // Acquire loads (plain loads on x86): the re-check below cannot be done
    // before them, and one that saw a newer word then sees copy_tail != t.
    if (__atomic_load_n(c, __ATOMIC_ACQUIRE) != t) return false;
    // The header's words stay in registers until they are stored to out
    // (an array would be spilled to the stack and reloaded 16 bytes at a
    // time, which the store buffer cannot forward: see encode()).
    const uint64_t h0 = __atomic_load_n(c + 1, __ATOMIC_ACQUIRE);
    const uint64_t h1 = __atomic_load_n(c + 2, __ATOMIC_ACQUIRE);
    const uint64_t h2 = __atomic_load_n(c + 3, __ATOMIC_ACQUIRE);
    const uint64_t h3 = __atomic_load_n(c + 4, __ATOMIC_ACQUIRE);
    // The header goes straight into out, and is judged before the payload
    // is copied, so that few values live across the copy (kept in
    // registers, GCC spilled them: instructions on the round trip). out is
    // unspecified when a check fails. The words are the record's bytes
    // (little-endian): magic, version and opcode in the first.
    auto* hd = reinterpret_cast<uint8_t*>(&out.hdr);
    std::memcpy(hd, &h0, 8);
    std::memcpy(hd + 8, &h1, 8);
    std::memcpy(hd + 16, &h2, 8);
    std::memcpy(hd + 24, &h3, 8);
    const uint32_t len = uint32_t(h1 >> 32);
    if (len > max_msg_ || record_bytes(len) != t - head_) return false;  // not this record
    if (uint32_t(h0) != WH_MSG_MAGIC || uint16_t(h0 >> 48) == WH_OP_PAD) return false;
    // Whole words (the record's padding too), then trimmed to len. A Message
    // reused for replies of one size is already sized: no resize at all.
    const size_t whole = t - head_ - sizeof(wh_msg_hdr);
    if (out.payload.size() != whole) [[unlikely]] resize_payload(out, whole);
    uint8_t* dst = out.payload.data();
    const uint64_t* pw = c + 1 + sizeof(wh_msg_hdr) / 8;  // the payload's words
    size_t i = 0;
#if WH_RING_DIRECT_COPY
    // 16 bytes a load, as the writer stores them: for the 64-byte request
    // 4 loads and 4 stores, where word by word it was 36 instructions.
    // Plain loads, like the writer's plain stores: the compiler barrier
    // keeps them before the re-check of copy_tail, and x86 does not reorder
    // loads with loads.
    const auto* src = reinterpret_cast<const uint8_t*>(pw);
    for (; i + 32 <= whole; i += 32) {
      const __m128i v0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
      const __m128i v1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 16));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), v0);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i + 16), v1);
    }
    if (i + 16 <= whole) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
      i += 16;
    }
    asm volatile("" ::: "memory");
#endif
    // Elsewhere (and for a last 8 bytes) word by word: two at a time, both
    // loaded before either is stored (tests/ring/bench/ab/ab.sh:
    // interleaved, 11 of 16 means higher).
    for (; i + 16 <= whole; i += 16) {
      const uint64_t v0 = __atomic_load_n(pw + i / 8, __ATOMIC_ACQUIRE);
      const uint64_t v1 = __atomic_load_n(pw + i / 8 + 1, __ATOMIC_ACQUIRE);
      std::memcpy(dst + i, &v0, 8);
      std::memcpy(dst + i + 8, &v1, 8);
    }
    if (i < whole) {
      const uint64_t v0 = __atomic_load_n(pw + i / 8, __ATOMIC_ACQUIRE);
      std::memcpy(dst + i, &v0, 8);
    }
    if (__atomic_load_n(c, __ATOMIC_ACQUIRE) != t) return false;  // the producer moved on
    if (whole != len) [[unlikely]] resize_payload(out, len);
    head_ = tail_ = t;
    __atomic_store_n(head_word_, head_, __ATOMIC_RELEASE);
    last_copy_ = true;
    copy_reads_++;
    return true;
  }

 public:
  // Bytes read so far: the stream position just past the last record read
  // (the writer's position() when it wrote that record).
  uint64_t position() const { return head_; }

 private:
  const uint8_t* ring_ = nullptr;
  uint32_t size_ = 0;
  const uint64_t* tail_word_ = nullptr;
  uint64_t* head_word_ = nullptr;
  uint32_t max_msg_ = 0;
  uint64_t head_ = 0;  // private: we own it
  uint64_t tail_ = 0;  // last validated peer tail
  const uint64_t* copy_word_ = nullptr;  // the producer's copy_tail (may be null)
  bool last_copy_ = false;  // the last record came from the tail block's copy
  uint64_t copy_reads_ = 0;
  bool poisoned_ = false;
  std::string error_;
};

using Clock = std::chrono::steady_clock;

// Spin/yield/sleep until ready() or the deadline; `bell`/`sleeping` are the
// region words of the waiting side. Returns false on timeout.
bool wait_until(const WaitPolicy& pol, uint32_t* sleeping, uint32_t* bell,
                const std::function<bool()>& ready, Clock::time_point deadline);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::atomic_signal_fence(std::memory_order_seq_cst);
#endif
}

// The pause between the i-th and the next poll of a wait. A PAUSE takes
// about 25 ns on the development VM's EPYC (64 cycles), so a loop of them
// sees a change ~13 ns late on average, on each side of a round trip. The
// first `hot` polls of a wait, where a round trip's answer lands, are
// spaced by an LFENCE instead: the next poll issues once the last is done
// (one load in flight, no pile-up of speculative loads on the line), a few
// ns apart. Measured -4..-10 ns per round trip (ab.sh, dithered;
// docs/benchmarks.md). Later polls use PAUSE, which spends less power and
// leaves more of the core to an SMT sibling (WaitPolicy::hot_polls = 0:
// PAUSE only).
inline void poll_relax(uint32_t i, uint32_t hot) {
#if defined(__x86_64__)
  if (i < hot) {
    asm volatile("lfence" ::: "memory");
    return;
  }
#endif
  (void)i;
  (void)hot;
  cpu_relax();
}

// The hot part of waiting, inlined: up to pol.spin_iters rounds polling
// ready(), spaced by poll_relax (a template: no std::function call per
// round, no clock read in the common case). Reads the clock every 4096
// rounds only, and gives up after max_spin. True as soon as ready().
template <class F>
inline bool spin_until(const WaitPolicy& pol, F&& ready, Clock::duration max_spin,
                       uint32_t hot, uint32_t* polls) {
  Clock::time_point end{};
  const uint32_t iters = pol.spin_iters;
  for (uint32_t i = 0; i < iters; i++) {
    if (ready()) {
      *polls = i;
      return true;
    }
    poll_relax(i, hot);
    if ((i & 4095) == 4095) {
      auto now = Clock::now();
      if (end == Clock::time_point{}) {
        end = now + max_spin;
      } else if (now >= end) {
        *polls = i;  // a long wait: the next one polls with PAUSE only
        return false;
      }
    }
  }
  *polls = iters;
  return ready();
}
template <class F>
inline bool spin_until(const WaitPolicy& pol, F&& ready, Clock::duration max_spin) {
  uint32_t polls;
  return spin_until(pol, ready, max_spin, pol.hot_polls, &polls);
}

// How a side spaces the hot polls of its next wait, from how long its last
// one lasted. LFENCE-spaced polls see an answer sooner where the peer's
// line comes quickly (the near and usual placements of the development
// VM's vCPUs), but cost about a tenth of the round trip where it comes
// slowly (the far placement: PAUSE-only 371-411 ns against 481-531 ns at
// 300-360 ns floors, docs/benchmarks.md). A wait longer than
// WaitPolicy::far_polls LFENCE polls (a PAUSE counted as 5 of them) means
// a far peer or a slow call: the next wait polls with PAUSE only.
// The last wait's polls are only stored when it ends (on the round trip's
// critical path) and judged when the next wait begins (off it).
// Before the first wait, polls = 0: next() gives the policy's hot_polls.
struct PollPace {
  uint32_t hot = 0;    // hot polls of the last wait
  uint32_t polls = 0;  // how many polls it took
  uint32_t next(const WaitPolicy& pol) {
    const uint32_t fast = polls < hot ? polls : hot;
    const uint64_t units = fast + uint64_t(polls - fast) * 5;
    hot = units > pol.far_polls ? 0 : pol.hot_polls;
    return hot;
  }
};

class LockBias;

// A process-local mutex whose uncontended lock, try_lock and unlock are
// one inline atomic instruction each (std::mutex goes through pthread
// calls). Contended, it sleeps on a private futex (Drepper's "Futexes Are
// Tricky", mutex 2). A LockBias may hold it for one thread (state 3, see
// there): whoever next tries to take it revokes the bias first.
class LightMutex {
 public:
  static constexpr uint32_t kBiased = 3;
  bool try_lock() {
    uint32_t s = 0;
    if (state_.compare_exchange_strong(s, 1, std::memory_order_acquire,
                                       std::memory_order_relaxed))
      return true;
    return s == kBiased && claim_biased();
  }
  void lock() {
    if (!try_lock()) lock_slow();
  }
  void unlock() {
    if (state_.exchange(0, std::memory_order_release) == 2) wake_one();
  }
  void set_bias(LockBias* b) { bias_ = b; }

 private:
  friend class LockBias;
  std::atomic<uint32_t> state_{0};  // 0 free, 1 held, 2 held and maybe waited on, 3 biased
  LockBias* bias_ = nullptr;        // the bias that may hold it (state 3)
  void lock_slow();
  void wake_one();
  bool claim_biased();  // state 3: take it over from the bias (revoking it)
};

// Biased ownership of a set of LightMutexes (a client channel's two), for
// the common client: one thread making every call. Each uncontended lock,
// try_lock or unlock is a locked instruction, and a call's fast path ran
// three of them back to back between seeing its reply and storing the
// next request (release the reader lock, take it again, take the writer
// lock): the round trip's p50 was one TSC step (10 ns) lower without them
// at the near placement of the development VM's vCPUs (SMT siblings), and
// 1.23 -> 1.15 x the floor at the usual one (docs/benchmarks.md).
//
// After a run of uncontended calls by one thread, the channel grants that
// thread the bias: its mutexes stay held (state 3) for it between calls,
// and its calls enter() and leave() with plain stores to a word of its
// own: no locked instruction at all. Any other thread that tries one of
// the mutexes revokes the bias (LightMutex::claim_biased): it clears the
// owner, makes every thread of the process run a full barrier
// (membarrier(2), MEMBARRIER_CMD_PRIVATE_EXPEDITED: the heavy side of an
// asymmetric Dekker pair, so that the owner's side needs only a compiler
// barrier), waits until the owner is out of any call it was in, and takes
// the mutex over. Revocations double the run a thread needs for the next
// grant, so threads that take turns on a channel pay a membarrier only
// rarely. Without membarrier (or with WORMHOLE_BIAS=0) nothing is ever
// granted; under TSan the pair is seq_cst accesses instead.
class LockBias {
 public:
  // One per thread (thread-local, recycled when threads exit): the word
  // that says which bias's call the thread is in, if any. Its own line:
  // only its thread writes it; revokers read it.
  struct alignas(64) Slot {
    std::atomic<const LockBias*> busy{nullptr};
  };
  // This thread's (allocated on its first call: one thread-local load after).
  [[gnu::always_inline]] static Slot* my_slot() {
    Slot* s = tl_slot_;
    return s ? s : new_slot();
  }

  // The owner's side. True: s owns the bias and its mutexes are held for
  // it until leave(s). False: not (or no longer) biased to s; use them.
  [[gnu::always_inline]] bool enter(Slot* s) {
    if (owner_.load(std::memory_order_relaxed) != s) return false;
    s->busy.store(this, kDekkerOrder);
    std::atomic_signal_fence(std::memory_order_seq_cst);  // membarrier does the rest
    if (owner_.load(kDekkerOrder) == s) [[likely]]
      return true;
    s->busy.store(nullptr, std::memory_order_release);
    return false;
  }
  [[gnu::always_inline]] void leave(Slot* s) { s->busy.store(nullptr, std::memory_order_release); }

  // Counts a call that took the mutexes without contention; grants the
  // bias to its thread after a long enough run. The caller holds `a`;
  // `b` must be free. True: granted (both now held by the bias: the
  // caller must not unlock them).
  bool note_uncontended(Slot* s, LightMutex& a, LightMutex& b);

  uint64_t grants() const { return grants_.load(std::memory_order_relaxed); }
  uint64_t revocations() const { return revocations_.load(std::memory_order_relaxed); }
  static bool supported();  // membarrier usable and WORMHOLE_BIAS != 0

 private:
  friend class LightMutex;
  // The owner's side of the Dekker pair: plain (relaxed) accesses and a
  // compiler barrier, the revoker's membarrier supplying the hardware
  // fence. TSan knows neither membarrier nor fences: there both sides are
  // seq_cst accesses, which order the pair by themselves.
#if defined(__SANITIZE_THREAD__)
  static constexpr std::memory_order kDekkerOrder = std::memory_order_seq_cst;
#else
  static constexpr std::memory_order kDekkerOrder = std::memory_order_relaxed;
#endif
  void revoke();  // by a thread that just took over a mutex in state 3
  static Slot* new_slot();
  // Initial-exec: one %fs-relative load, also in the LD_PRELOADed guest
  // library (a dlopen()ed copy takes 8 bytes of glibc's static TLS surplus).
  static inline thread_local Slot* tl_slot_ __attribute__((tls_model("initial-exec"))) = nullptr;
  std::atomic<Slot*> owner_{nullptr};
  Slot* granted_ = nullptr;  // the last owner (written before its mutexes go to state 3)
  // The run of uncontended calls (under the mutexes, i.e. by their holder).
  Slot* run_slot_ = nullptr;
  uint64_t run_ = 0;
  std::atomic<uint32_t> run_shift_{0};  // the run needed is 64 << run_shift_ (revokers raise it)
  std::atomic<uint64_t> grants_{0}, revocations_{0};
};

// The client end of a channel. Thread-safe: any number of threads may
// post() and call() concurrently.
class ClientChannel {
 public:
  // Claims a free channel (index -1: the first free one) of the region.
  static std::unique_ptr<ClientChannel> claim(Region& region, int index, std::string* err,
                                              WaitPolicy policy = WaitPolicy::from_env());
  ~ClientChannel();  // says goodbye (state CLOSED) unless the channel is dead
  // Internal: one call waiting for its reply (in the header only because
  // call()'s common case is inline).
  struct Pending {
    uint64_t call_id = 0;
    Message* reply = nullptr;
    // 0 waiting, 1 reply delivered, 2 asked to take over reading responses.
    // Waited on with a private futex (timed, unlike std::atomic::wait).
    std::atomic<uint32_t> state{0};
    // 1 while the owner may be in FUTEX_WAIT: wakers skip the syscall
    // otherwise (a reader delivering its own reply never makes one).
    std::atomic<uint32_t> sleepers{0};
  };

  uint32_t index() const { return index_; }
  uint64_t generation() const { return generation_; }

  // Fire-and-forget request (flag WH_MSG_F_POSTED). Waits for ring space:
  // without a timeout (0) as long as the server lives; with one, gives up
  // with Timeout (a live server that stopped draining cannot block us).
  // *end (when given): the request ring's stream position just past this
  // request, which the server's ServerChannel::read_pos() reaches when it
  // has read it (taken under the write lock, so positions follow ring order).
  Status post(uint16_t opcode, uint32_t aux, std::span<const std::span<const uint8_t>> parts,
              uint16_t version = 1,
              std::chrono::milliseconds timeout = std::chrono::milliseconds(0) /*0: none*/,
              uint64_t* end = nullptr);
  // Request and wait for the response with the same call id. The timeout
  // covers waiting for ring space as well as for the reply. The common
  // case (nobody else reading responses) is inline in the caller: out of
  // line, call()'s prologue and epilogue lay between seeing one reply and
  // storing the next request (tests/ring/bench/critpath).
  [[gnu::always_inline]] Status call(uint16_t opcode, uint32_t aux,
                                     std::span<const std::span<const uint8_t>> parts,
                                     Message& reply, uint16_t version = 1,
                                     std::chrono::milliseconds timeout = std::chrono::milliseconds(0)
                                     /*0: none*/) {
    wh_msg_hdr h{};
    h.version = version;
    h.opcode = opcode;
    h.aux = aux;
    Pending p;
    p.reply = &reply;
    const auto deadline = timeout.count() ? Clock::now() + timeout : Clock::time_point::max();
    LockBias::Slot* const slot = LockBias::my_slot();
    if (bias_.enter(slot)) [[likely]] {
      // The bias holds both mutexes for this thread: no locked instruction.
      const Status s = exchange<true>(h, p, parts, deadline);
      bias_.leave(slot);
      return outcome(p, s);
    }
    if (!read_mu_.try_lock()) [[unlikely]] {
      p.call_id = h.call_id = shared_call_id();
      return call_queued(h, p, parts, deadline);
    }
    // Nobody is reading responses, so we are the reader for the whole call.
    const Status s = exchange<false>(h, p, parts, deadline);
    // A run of such calls by one thread earns it the bias (LockBias),
    // which then keeps read_mu_ held for it.
    if (s == Status::Ok && npending_.load(std::memory_order_relaxed) == 0 &&
        bias_.note_uncontended(slot, read_mu_, write_mu_))
      return outcome(p, s);
    read_mu_.unlock();
    // Callers that arrived meanwhile sleep in wait_reply: wake one to read.
    if (npending_.load(std::memory_order_seq_cst) != 0) [[unlikely]]
      wake_reader();
    return outcome(p, s);
  }

  // Waits until the server attached (state ACTIVE) or timeout.
  Status wait_attached(std::chrono::milliseconds timeout);
  // Called, one thread at a time, when the server's heartbeat stopped:
  // true when a server serves the channel again (a restored session; its
  // heartbeat counts anew), false to fail as without it. Set before use.
  void set_server_lost(std::function<bool()> f) { server_lost_ = std::move(f); }

  // The channel's data area (bulk payloads, pinned memory); offsets into it
  // are what requests carry.
  std::span<uint8_t> data() const { return data_; }
  uint32_t max_msg() const { return max_msg_; }
  // Responses read from the tail block's copy rather than the ring (region.h).
  uint64_t copy_reads();
  // Grants and revocations of this channel's lock bias (LockBias).
  const LockBias& bias() const { return bias_; }
  Status status() const { return broken_.load(std::memory_order_acquire); }
  std::string error() const;

 private:
  ClientChannel() = default;
  Status write_request(wh_msg_hdr& hdr, std::span<const std::span<const uint8_t>> parts,
                       Clock::time_point deadline, bool reader, uint64_t* end = nullptr);
  // write_request with write_mu_ already held (by this thread or its bias).
  Status write_request_held(wh_msg_hdr& hdr, std::span<const std::span<const uint8_t>> parts,
                            Clock::time_point deadline, bool reader, uint64_t* end = nullptr);
  // call()'s exchange, by a caller that holds the reader role for the
  // whole call (read_mu_, or the bias): sends h (with write_mu_, or the
  // bias, which holds it) and reads until p's reply arrives or the channel
  // fails. Our Pending stays out of the shared table: drain delivers to
  // own_ directly (no pending_mu_ unless other callers' replies show up).
  // The call id is given in the send, which leaves it in h; own_ is set
  // after it (no reply for us can come before our request).
  template <bool kBiased>
  [[gnu::always_inline]] Status exchange(wh_msg_hdr& h, Pending& p,
                                         std::span<const std::span<const uint8_t>> parts,
                                         Clock::time_point deadline) {
    Status s = status();
    if (s == Status::Ok) s = kBiased ? send_held(h, parts, deadline) : send(h, parts, deadline);
    p.call_id = h.call_id;
    own_ = &p;
    if (s == Status::Ok) s = read_replies(p, deadline);
    own_ = nullptr;
    return s;
  }
  // What call() returns: Ok once its reply was delivered, whatever else failed.
  static Status outcome(const Pending& p, Status s) {
    return p.state.load(std::memory_order_relaxed) == 1 ? Status::Ok : s;
  }
  // write_request's common case, inline, with write_mu_ held (by the
  // caller or its bias): room in the ring. A call to write_request (its
  // prologue and arguments) was some 30 instructions on the round trip
  // (tests/ring/bench/critpath). Gives hdr its call id (an even one, from
  // a counter write_mu_ guards: no locked instruction on the round trip
  // for it) unless it has one. The caller holds the reader role.
  [[gnu::always_inline]] Status send_held(wh_msg_hdr& hdr,
                                          std::span<const std::span<const uint8_t>> parts,
                                          Clock::time_point deadline) {
    give_call_id(hdr);
    if (writer_.write(hdr, parts) == Status::Ok) [[likely]] {
      notify_server();
      return Status::Ok;
    }
    return write_request_held(hdr, parts, deadline, /*reader=*/true);  // waits, or says why not
  }
  // send_held under write_mu_, taken here when it is free.
  [[gnu::always_inline]] Status send(wh_msg_hdr& hdr,
                                     std::span<const std::span<const uint8_t>> parts,
                                     Clock::time_point deadline) {
    if (write_mu_.try_lock()) {
      Status s = status();
      if (s == Status::Ok) s = send_held(hdr, parts, deadline);
      write_mu_.unlock();
      return s;
    }
    return write_request(hdr, parts, deadline, /*reader=*/true);
  }
  // call() when another thread is reading responses: queue, send, wait.
  [[gnu::noinline]] Status call_queued(wh_msg_hdr& h, Pending& p,
                                       std::span<const std::span<const uint8_t>> parts,
                                       Clock::time_point deadline);
  [[gnu::noinline]] void wake_reader();  // hands the reader role to a waiting caller
  [[gnu::noinline]] Status wait_for_room(Clock::time_point deadline, bool reader);
  Status wait_reply(Pending& p, Clock::time_point deadline);
  Status drain_responses();
  bool deliver(Message& m);
  void set_broken(Status s, std::string why);
  void notify_server();
  bool server_dead();

  Region* region_ = nullptr;
  wh_chan_hdr* ch_ = nullptr;
  uint32_t index_ = 0;
  uint64_t generation_ = 0;
  uint32_t max_msg_ = 0;
  WaitPolicy policy_;
  std::span<uint8_t> data_;

  LightMutex write_mu_;  // process-local: serialises producers
  RingWriter writer_;
  // Call ids: unique on the channel, the only thing a response is matched
  // by. Even ones are handed out under write_mu_ (send, write_request),
  // odd ones by shared_call_id() (post, and calls that queue behind
  // another reader): both without racing each other.
  uint64_t locked_call_id_ = 0;          // under write_mu_
  std::atomic<uint64_t> next_call_id_{1};
  uint64_t shared_call_id() { return next_call_id_.fetch_add(2, std::memory_order_relaxed); }
  // Under write_mu_: hdr's call id, the next even one, unless it has one.
  // Forced inline: in send() GCC left it a call (critpath 427 -> 430).
  [[gnu::always_inline]] void give_call_id(wh_msg_hdr& hdr) {
    if (hdr.call_id == 0) hdr.call_id = (locked_call_id_ += 2);
  }

  LightMutex read_mu_;  // held by the thread currently draining responses
  LockBias bias_;       // may hold write_mu_ and read_mu_ for one thread
  RingReader reader_;
  Message scratch_;     // under read_mu_: reused so replies need no allocation
  std::mutex pending_mu_;
  // Calls waiting for a reply. A flat vector: there are as many entries as
  // threads blocked in call(), and no allocation per call once it has grown.
  std::vector<Pending*> pending_;
  std::atomic<uint32_t> npending_{0};  // pending_.size(), readable without the lock
  Pending* own_ = nullptr;  // under read_mu_: the fast-path caller's call
  PollPace pace_;           // under read_mu_: the reply wait's poll spacing
  void hand_off_locked(const Pending* self);  // pending_mu_ held
  Status leave(Pending& p, Status s);
  Status read_replies(Pending& p, Clock::time_point deadline);

  std::mutex monitor_mu_;
  PeerMonitor monitor_;
  std::function<bool()> server_lost_;  // under monitor_mu_ when called
  std::atomic<Status> broken_{Status::Ok};
  mutable std::mutex err_mu_;
  std::string error_;
};

// The server end of one channel. Single-threaded: one server thread owns it.
class ServerChannel {
 public:
  // Attaches to channel `index` once a client claimed it.
  static std::unique_ptr<ServerChannel> attach(Region& region, uint32_t index, std::string* err,
                                               WaitPolicy policy = WaitPolicy::from_env());
  // Attaches to an active channel another server served until now (a
  // migrated session): reading resumes at the request ring's head, so a
  // request the other server did not read is read here, and none twice.
  // The other server must have stopped reading and answering before.
  static std::unique_ptr<ServerChannel> take_over(Region& region, uint32_t index, std::string* err);
  ~ServerChannel();

  // Non-blocking: Ok with a message, Empty, or an error (Corrupt, Closed).
  Status try_recv(Message& out);
  // Waits up to timeout for a request. Returns PeerDead if the client's
  // heartbeat stopped, Closed if it said goodbye.
  Status recv(Message& out, std::chrono::microseconds timeout);
  // Answers call_id. Waits for ring space up to timeout (client not
  // draining), then gives up with Timeout. The common case (room in the
  // ring) is inline in the caller: out of line, the call, its prologue and
  // the header built on its stack were some 25 instructions between
  // reading a request and publishing its answer (tests/ring/bench/critpath).
  [[gnu::always_inline]] Status reply(uint64_t call_id, uint16_t opcode, int32_t status,
                                      uint32_t aux, std::span<const std::span<const uint8_t>> parts,
                                      std::chrono::milliseconds timeout = std::chrono::milliseconds(1000)) {
    if (broken_ != Status::Ok) return broken_;
    wh_msg_hdr h{};
    h.version = 1;
    h.opcode = opcode;
    h.flags = WH_MSG_F_RESPONSE;
    h.call_id = call_id;
    h.status = status;
    h.aux = aux;
    Status s = writer_.write(h, parts);
    if (s == Status::Ok) [[likely]] {
      notify_client();
      return s;
    }
    return reply_slow(h, parts, s, timeout);
  }

  // Resets the channel to FREE (indices zero, generation bumped) so a new
  // client can claim it. Called after a client closed or died.
  void reclaim();
  bool peer_dead();
  // How long the client's heartbeat may stand still before recv() reports
  // PeerDead (default: the region's timeout). 0: never from the heartbeat;
  // the caller tells a dead client some other way (its process, a socket).
  void set_peer_timeout(uint32_t ms);
  // The server ends the session (an operator killed it): the client's next
  // call finds the channel no longer active.
  void end_session();

  uint32_t index() const { return index_; }
  uint64_t generation() const { return generation_; }
  std::span<uint8_t> data() const { return data_; }
  // The request stream position just past the last request read.
  uint64_t read_pos() const { return reader_.position(); }
  // Whether another server read requests or wrote answers on this channel
  // since this one stopped (a migration's destination that took it over):
  // then this one must not serve it again.
  bool moved_on() const;
  uint32_t client_pid() const;
  uint32_t max_msg() const { return region_->geometry().max_msg; }
  // Requests read from the tail block's copy rather than the ring (region.h).
  uint64_t copy_reads() const { return reader_.copy_reads(); }
  Status status() const { return broken_; }
  std::string error() const { return error_; }

 private:
  ServerChannel() = default;
  static std::unique_ptr<ServerChannel> open(Region& region, uint32_t index, uint32_t from, std::string* err,
                                             WaitPolicy policy);
  Status fail(Status s, std::string why);
  void notify_client();  // after a response's tail: wakes a sleeping client
  [[gnu::noinline]] Status reply_slow(const wh_msg_hdr& h,
                                      std::span<const std::span<const uint8_t>> parts, Status s,
                                      std::chrono::milliseconds timeout);
  Region* region_ = nullptr;
  wh_chan_hdr* ch_ = nullptr;
  uint32_t index_ = 0;
  uint64_t generation_ = 0;
  WaitPolicy policy_;
  PollPace pace_;  // the request wait's poll spacing
  std::span<uint8_t> data_;
  RingReader reader_;
  RingWriter writer_;
  PeerMonitor monitor_;
  Status broken_ = Status::Ok;
  std::string error_;
};

}  // namespace wh::ring
