// wormhole/server/checkpoint.hpp - the saved form of a session
// (docs/migration.md): what Session::save writes and Session::restore reads.
//
// A checkpoint is a fixed header, then one zstd frame with its content
// checksum (a file), or the content as it is (a move between two servers of
// one host, in a memfd sealed against writes). The header says what the
// frame holds; the frame is a sequence
// of little-endian fields that Session::save writes in a fixed order. The
// reader treats every byte as hostile: each read is bounds-checked, each
// count is limited before anything is allocated for it, and the first
// failure stops the restore with the reason (nothing is half-restored: the
// session being built is thrown away).
#pragma once

#include <sys/mman.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "wormhole/server/handles.hpp"

namespace wh::server {

inline constexpr char kCheckpointMagic[8] = {'W', 'H', 'C', 'K', 'P', 'T', '\r', '\n'};
// Bumped on any change of what the frame holds: a reader refuses others.
inline constexpr uint32_t kCheckpointVersion = 4;
// CheckpointHeader::flags: the content follows uncompressed (frame_bytes ==
// content_bytes, no checksum). Compressing and unpacking gigabytes cost a move
// more than the copy they would save, and a sealed memfd never leaves memory.
inline constexpr uint32_t kCheckpointStored = 1;
// Grown pinned segments a move carries: their memfds travel in the one
// message with the region, socket and checkpoint (Linux passes up to 253).
inline constexpr uint64_t kMaxMovedSegments = 250;
// A checkpoint holds at most this many bytes uncompressed (device memory
// included): a forged header cannot make a reader allocate more.
inline constexpr uint64_t kCheckpointMaxBytes = uint64_t(64) << 30;

struct CheckpointHeader {
  char magic[8];
  uint32_t version;        // kCheckpointVersion
  uint32_t header_bytes;   // sizeof(CheckpointHeader)
  uint64_t content_bytes;  // the frame's size uncompressed
  uint64_t frame_bytes;    // the zstd frame (or stored content) that follows
  char backend[16];        // the device kind it was taken on ("sim", "cuda")
  uint64_t device_bytes;   // device memory in it (what a destination must hold)
  uint64_t va_base;        // the session's device-address window (Context::va_base)
  // A checkpoint to a file: the client process it belongs to, and the
  // token that client presents to resume on the server that restores it
  // (DataAreaStatus::resume_token). Zero in a migration.
  uint32_t owner_pid;
  uint32_t flags;  // kCheckpointStored
  uint64_t owner_uid;
  uint64_t token[2];
};
static_assert(sizeof(CheckpointHeader) == 96);

// Bytes without the zero-fill of std::vector's resize: a checkpoint's
// buffers are gigabytes that are written at once (the fill cost as much
// as the copy that follows).
template <class T>
struct NoInitAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = NoInitAllocator<U>;
  };
  using std::allocator<T>::allocator;
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... A>
  void construct(U* p, A&&... a) {
    ::new (static_cast<void*>(p)) U(std::forward<A>(a)...);
  }
};
using Bytes = std::vector<uint8_t, NoInitAllocator<uint8_t>>;
// Asks for 2 MiB pages under a large buffer about to be written (see the
// sim device's HostHeap): a no-op where the kernel gives none.
inline void prefer_huge_pages(Bytes& b) {
  constexpr uintptr_t kHuge = uintptr_t(2) << 20;
  if (b.capacity() < 4 * kHuge) return;
  const uintptr_t lo = (reinterpret_cast<uintptr_t>(b.data()) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t hi = (reinterpret_cast<uintptr_t>(b.data()) + b.capacity()) & ~(kHuge - 1);
  if (hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
}

// Appends fields to the content: into content(), or straight into a memfd
// (a move's checkpoint, handed on as it is: gigabytes of device memory are
// then copied once, from the device into the memfd). A memfd that cannot
// grow throws std::bad_alloc, as content() does.
class CheckpointWriter {
 public:
  CheckpointWriter() = default;
  // The content goes into `memfd` (the caller's) from byte `at` on; finish()
  // leaves the file at exactly at + size() bytes.
  CheckpointWriter(int memfd, uint64_t at) : fd_(memfd), at_(at) {}
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  void u8(uint8_t v) { put(&v, 1); }
  void u32(uint32_t v) { put(&v, 4); }
  void i32(int32_t v) { put(&v, 4); }
  void u64(uint64_t v) { put(&v, 8); }
  void bytes(std::span<const uint8_t> b) {
    u64(b.size());
    put(b.data(), b.size());
  }
  void str(const std::string& s) { bytes({reinterpret_cast<const uint8_t*>(s.data()), s.size()}); }
  // Room for n bytes written later in place (device memory copied straight in).
  uint8_t* reserve(uint64_t n) {
    u64(n);
    return grow(n);
  }
  // About n more bytes will follow: room for them at once (growing a buffer
  // of gigabytes step by step copies it again at each doubling, or faults
  // its pages in one by one).
  void expect(uint64_t n);
  uint64_t size() const { return fd_ < 0 ? buf_.size() : size_; }
  Bytes& content() { return buf_; }  // without a memfd
  // With a memfd: unmaps it and sets its size; false when that fails.
  bool finish();

 private:
  void put(const void* p, size_t n) {
    uint8_t* to = grow(n);
    if (n) std::memcpy(to, p, n);
  }
  uint8_t* grow(uint64_t n) {
    if (fd_ < 0) {
      const size_t at = buf_.size();
      buf_.resize(at + n);
      return buf_.data() + at;
    }
    if (at_ + size_ + n > mapped_) map(at_ + size_ + n);
    uint8_t* p = map_ + at_ + size_;
    size_ += n;
    return p;
  }
  void map(uint64_t bytes);  // the memfd at least `bytes` long and mapped whole
  Bytes buf_;
  int fd_ = -1;
  uint64_t at_ = 0, size_ = 0, mapped_ = 0;
  uint8_t* map_ = nullptr;
};

// Reads fields back; after the first failure every read fails and ok() is
// false, so a sequence of reads needs one check at its end.
class CheckpointReader {
 public:
  explicit CheckpointReader(std::span<const uint8_t> content) : c_(content) {}
  uint8_t u8() { return get<uint8_t>(); }
  uint32_t u32() { return get<uint32_t>(); }
  int32_t i32() { return get<int32_t>(); }
  uint64_t u64() { return get<uint64_t>(); }
  // A length-prefixed run of at most `max` bytes (a view into the content).
  std::span<const uint8_t> bytes(uint64_t max) {
    const uint64_t n = u64();
    if (!ok_ || n > max || n > c_.size() - at_) return fail(), std::span<const uint8_t>{};
    auto s = c_.subspan(at_, n);
    at_ += n;
    return s;
  }
  std::string str(uint64_t max) {
    auto b = bytes(max);
    return std::string(reinterpret_cast<const char*>(b.data()), b.size());
  }
  // A count that the caller then loops over: at most `max`, and no more
  // than the bytes left could describe at `min_each` bytes per item.
  uint64_t count(uint64_t max, uint64_t min_each) {
    const uint64_t n = u64();
    if (!ok_ || n > max || (min_each && n > (c_.size() - at_) / min_each)) return fail(), 0;
    return n;
  }
  bool ok() const { return ok_; }
  bool at_end() const { return ok_ && at_ == c_.size(); }
  void fail() { ok_ = false; }

 private:
  template <class T>
  T get() {
    T v{};
    if (!ok_ || c_.size() - at_ < sizeof(T)) return fail(), v;
    std::memcpy(&v, c_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return v;
  }
  std::span<const uint8_t> c_;
  size_t at_ = 0;
  bool ok_ = true;
};

// A table whose objects hold nothing but themselves (a cuBLAS handle:
// every setting comes with each call): its handle values.
template <class T>
void save_handles(CheckpointWriter& w, HandleTable<T>& t) {
  w.u64(t.size());
  t.for_each([&](uint64_t h, T&) { w.u64(h); });
}
// The same back, each object made by make() (null: it cannot be); false
// and *why (naming `what` unless make() said more) otherwise.
template <class T, class Make>
bool restore_handles(CheckpointReader& r, HandleTable<T>& t, uint64_t limit, const char* what, std::string* why,
                     Make&& make) {
  const uint64_t n = r.count(limit, 8);
  bool ok = r.ok();
  for (uint64_t i = 0; ok && i < n; i++) {
    std::unique_ptr<T> obj = make();
    ok = obj && t.add_at(r.u64(), std::move(obj)) && r.ok();
  }
  if (!ok && why->empty()) *why = std::string("the checkpoint's ") + what + " handles";
  return ok;
}

// The whole file: header and compressed content. `device_bytes` and
// `backend` go into the header.
// The content is released. Empty when compression fails. `h` gives
// backend, device_bytes, va_base and the owner fields; the rest is set here.
Bytes checkpoint_pack(Bytes& content, const CheckpointHeader& h);
// The same written to `fd` (a file or memfd at its start), compressed in
// pieces: no second buffer of the checkpoint's size. False when a write
// fails; *bytes: what was written.
bool checkpoint_write(int fd, Bytes& content, const CheckpointHeader& h, uint64_t* bytes);
// The header of a checkpoint whose content of `content_bytes` follows it as
// it is (kCheckpointStored): a move's, written by a CheckpointWriter into a
// memfd the destination maps.
CheckpointHeader checkpoint_stored_header(const CheckpointHeader& h, uint64_t content_bytes);
// Checks the header and, for a compressed frame, its checksum. *content: a
// stored checkpoint's content, a view into `file` (which must outlive it);
// a compressed one's, unpacked into *storage. False and *err (what is wrong,
// for the operator) otherwise.
bool checkpoint_open(std::span<const uint8_t> file, CheckpointHeader* hdr, Bytes* storage,
                     std::span<const uint8_t>* content, std::string* err);
// checkpoint_open with the content always in *content.
bool checkpoint_unpack(std::span<const uint8_t> file, CheckpointHeader* hdr, Bytes* content,
                       std::string* err);

}  // namespace wh::server
