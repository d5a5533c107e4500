// The bodies of remote_api.def: what a network client (ucx://) needs
// because it shares no memory with the server (docs/remote.md).
#include "wormhole/server/session.hpp"

namespace wh::server {

using namespace wh::proto;

// Into the session's data area, pinned heap only (the status page and the
// staging slots are the server's to write).
int32_t Session::on_DataAreaWrite(const DataAreaWriteReq& rq, std::span<const uint8_t> tail, DataAreaWriteResp&,
                                  std::vector<uint8_t>&) {
  if (rq.off < kPinnedHeapOffset) return cudaErrorInvalidValue;
  uint8_t* dst = host_range(rq.off, tail.size());
  if (!dst) return cudaErrorInvalidValue;
  std::memcpy(dst, tail.data(), tail.size());
  return cudaSuccess;
}

int32_t Session::on_MemcpyDtoHInline(const MemcpyDtoHInlineReq& rq, std::span<const uint8_t>,
                                     MemcpyDtoHInlineResp&, std::vector<uint8_t>& rtail) {
  Stream* s;
  if (Err e = resolve_stream(rq.stream, &s); e != cudaSuccess) return e;
  if (rq.bytes > kRemoteChunkMax || !device_range(rq.src, rq.bytes)) return cudaErrorInvalidValue;
  rtail.resize(rq.bytes);
  Err e = ctx_->copy_dtoh(rtail.data(), rq.src, rq.bytes, s);
  if (e == cudaSuccess) e = ctx_->stream_synchronize(s);
  if (e != cudaSuccess) {
    rtail.clear();
    return e;
  }
  count_bytes(&Stats::bytes_dtoh, rq.bytes);
  return cudaSuccess;
}

}  // namespace wh::server
