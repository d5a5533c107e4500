// The checkpoint file: header and one zstd frame with a content checksum
// (wormhole/server/checkpoint.hpp).
#include "wormhole/server/checkpoint.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <cstdio>
#include <new>

namespace wh::server {

namespace {

// `given` (backend, device bytes, window, owner) with the fields every
// checkpoint's header carries: magic, format, sizes.
CheckpointHeader stamped(const CheckpointHeader& given, uint64_t content_bytes) {
  CheckpointHeader h = given;
  std::memcpy(h.magic, kCheckpointMagic, sizeof h.magic);
  h.version = kCheckpointVersion;
  h.header_bytes = sizeof h;
  h.content_bytes = content_bytes;
  h.backend[sizeof h.backend - 1] = 0;
  return h;
}

// The header and the frame through `sink` (bytes, in order), compressed in
// 8 MiB pieces so no buffer the size of the frame is ever made; the header
// goes first with the frame's size, which `place` writes once it is known.
template <class Sink, class Place>
bool pack_to(Bytes& content, const CheckpointHeader& given, Sink&& sink, Place&& place) {
  CheckpointHeader h = stamped(given, content.size());
  if (!sink(reinterpret_cast<const uint8_t*>(&h), sizeof h)) return false;
  // Level 1: device memory is mostly floats, which a higher level barely
  // shrinks more, at several times the pause.
  ZSTD_CCtx* c = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, 1);
  ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1);
  ZSTD_CCtx_setPledgedSrcSize(c, content.size());
  std::vector<uint8_t> piece(8 << 20);
  ZSTD_inBuffer in{content.data(), content.size(), 0};
  bool ok = true;
  for (size_t left = 1; ok && left;) {
    ZSTD_outBuffer out{piece.data(), piece.size(), 0};
    left = ZSTD_compressStream2(c, &out, &in, ZSTD_e_end);
    if (ZSTD_isError(left)) ok = false;
    else ok = sink(piece.data(), out.pos), h.frame_bytes += out.pos;
  }
  ZSTD_freeCCtx(c);
  Bytes().swap(content);  // the uncompressed copy goes now
  return ok && place(h);
}

}  // namespace

Bytes checkpoint_pack(Bytes& content, const CheckpointHeader& given) {
  Bytes out;
  const bool ok = pack_to(
      content, given,
      [&](const uint8_t* p, size_t n) {
        out.insert(out.end(), p, p + n);
        return true;
      },
      [&](const CheckpointHeader& h) {
        std::memcpy(out.data(), &h, sizeof h);
        return true;
      });
  return ok ? std::move(out) : Bytes();
}

bool checkpoint_write(int fd, Bytes& content, const CheckpointHeader& given, uint64_t* bytes) {
  uint64_t at = 0;
  const bool ok = pack_to(
      content, given,
      [&](const uint8_t* p, size_t n) {
        while (n) {
          const ssize_t w = ::write(fd, p, n);
          if (w <= 0) return false;
          p += w, n -= size_t(w), at += uint64_t(w);
        }
        return true;
      },
      [&](const CheckpointHeader& h) { return pwrite(fd, &h, sizeof h, 0) == ssize_t(sizeof h); });
  *bytes = at;
  return ok;
}

CheckpointHeader checkpoint_stored_header(const CheckpointHeader& given, uint64_t content_bytes) {
  CheckpointHeader h = stamped(given, content_bytes);
  h.frame_bytes = content_bytes;
  h.flags |= kCheckpointStored;
  return h;
}

CheckpointWriter::~CheckpointWriter() {
  if (map_) munmap(map_, mapped_);
}

void CheckpointWriter::expect(uint64_t n) {
  if (fd_ < 0) {
    buf_.reserve(buf_.size() + n);
    prefer_huge_pages(buf_);
  } else if (at_ + size_ + n > mapped_) {
    map(at_ + size_ + n);
  }
}

// The pages come from one fallocate and are mapped by MAP_POPULATE: faulting
// a gigabyte in page by page costs more than copying it.
void CheckpointWriter::map(uint64_t bytes) {
  const uint64_t page = 4096;
  const uint64_t want = std::max<uint64_t>({bytes, 2 * mapped_, uint64_t(1) << 20});
  const uint64_t len = (want + page - 1) / page * page;
  if (map_) munmap(map_, mapped_), map_ = nullptr, mapped_ = 0;
  if (fallocate(fd_, 0, 0, off_t(len)) != 0 && ftruncate(fd_, off_t(len)) != 0) throw std::bad_alloc();
  void* m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd_, 0);
  if (m == MAP_FAILED) throw std::bad_alloc();
  map_ = static_cast<uint8_t*>(m);
  mapped_ = len;
}

bool CheckpointWriter::finish() {
  if (fd_ < 0) return true;
  if (map_) munmap(map_, mapped_), map_ = nullptr, mapped_ = 0;
  return ftruncate(fd_, off_t(at_ + size_)) == 0;
}

bool checkpoint_open(std::span<const uint8_t> file, CheckpointHeader* hdr, Bytes* storage,
                     std::span<const uint8_t>* content, std::string* err) {
  CheckpointHeader h{};
  if (file.size() < sizeof h) return *err = "not a Wormhole checkpoint (too short)", false;
  std::memcpy(&h, file.data(), sizeof h);
  if (std::memcmp(h.magic, kCheckpointMagic, sizeof h.magic) != 0) return *err = "not a Wormhole checkpoint", false;
  if (h.version != kCheckpointVersion || h.header_bytes != sizeof h)
    return *err = "a checkpoint of format " + std::to_string(h.version) + "; this server reads format " +
                  std::to_string(kCheckpointVersion),
           false;
  if (h.frame_bytes != file.size() - sizeof h) return *err = "the checkpoint is truncated or has trailing bytes", false;
  if (h.content_bytes > kCheckpointMaxBytes) return *err = "the checkpoint claims more than 64 GiB", false;
  if (h.flags & ~kCheckpointStored) return *err = "the checkpoint has flags this server does not know", false;
  h.backend[sizeof h.backend - 1] = 0;
  if (h.flags & kCheckpointStored) {
    if (h.content_bytes != h.frame_bytes) return *err = "the checkpoint's sizes disagree", false;
    *content = file.subspan(sizeof h);
    *hdr = h;
    return true;
  }
  const uint64_t framed = ZSTD_getFrameContentSize(file.data() + sizeof h, h.frame_bytes);
  if (framed != h.content_bytes) return *err = "the checkpoint's sizes disagree", false;
  storage->clear();
  storage->reserve(h.content_bytes);
  prefer_huge_pages(*storage);
  storage->resize(h.content_bytes);
  const size_t n = ZSTD_decompress(storage->data(), storage->size(), file.data() + sizeof h, h.frame_bytes);
  if (ZSTD_isError(n) || n != h.content_bytes)
    return *err = std::string("the checkpoint is corrupt: ") + (ZSTD_isError(n) ? ZSTD_getErrorName(n) : "short"),
           false;
  *content = *storage;
  *hdr = h;
  return true;
}

bool checkpoint_unpack(std::span<const uint8_t> file, CheckpointHeader* hdr, Bytes* content, std::string* err) {
  std::span<const uint8_t> c;
  if (!checkpoint_open(file, hdr, content, &c, err)) return false;
  if (hdr->flags & kCheckpointStored) content->assign(c.begin(), c.end());  // a view into `file` until now
  return true;
}

}  // namespace wh::server
