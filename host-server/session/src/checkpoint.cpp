// The checkpoint file: header and one zstd frame with a content checksum
// (wormhole/server/checkpoint.hpp).
#include "wormhole/server/checkpoint.hpp"

#include <zstd.h>

#include <cstdio>

namespace wh::server {

std::vector<uint8_t> checkpoint_pack(std::vector<uint8_t>& content, const CheckpointHeader& given) {
  CheckpointHeader h = given;
  std::memcpy(h.magic, kCheckpointMagic, sizeof h.magic);
  h.version = kCheckpointVersion;
  h.header_bytes = sizeof h;
  h.content_bytes = content.size();
  h.backend[sizeof h.backend - 1] = 0;
  std::vector<uint8_t> out(sizeof h + ZSTD_compressBound(content.size()));
  // Level 1: device memory is mostly zeros or floats, which a higher level
  // barely shrinks more, at several times the pause.
  ZSTD_CCtx* c = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, 1);
  ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1);
  const size_t n = ZSTD_compress2(c, out.data() + sizeof h, out.size() - sizeof h, content.data(), content.size());
  ZSTD_freeCCtx(c);
  if (ZSTD_isError(n)) return {};
  h.frame_bytes = n;
  std::memcpy(out.data(), &h, sizeof h);
  out.resize(sizeof h + n);
  std::vector<uint8_t>().swap(content);  // the uncompressed copy goes now
  return out;
}

bool checkpoint_unpack(std::span<const uint8_t> file, CheckpointHeader* hdr, std::vector<uint8_t>* content,
                       std::string* err) {
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
  const uint64_t framed = ZSTD_getFrameContentSize(file.data() + sizeof h, h.frame_bytes);
  if (framed != h.content_bytes) return *err = "the checkpoint's sizes disagree", false;
  content->resize(h.content_bytes);
  const size_t n = ZSTD_decompress(content->data(), content->size(), file.data() + sizeof h, h.frame_bytes);
  if (ZSTD_isError(n) || n != h.content_bytes)
    return *err = std::string("the checkpoint is corrupt: ") + (ZSTD_isError(n) ? ZSTD_getErrorName(n) : "short"),
           false;
  h.backend[sizeof h.backend - 1] = 0;
  *hdr = h;
  return true;
}

}  // namespace wh::server
