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
  return take_deferred();  // an earlier launch's error comes with the copy (on_MemcpyDtoH)
}

// ---- peer copies between servers (peer_api.def). Tickets and pushes exist
// only where the server set them up (network sessions).
int32_t Session::on_PeerTicket(const PeerTicketReq& rq, std::span<const uint8_t>, PeerTicketResp& rs,
                               std::vector<uint8_t>&) {
  if (!peer_tickets_) return cudaErrorNotSupported;
  if (rq.bytes == 0 || rq.bytes > kPeerChunkMax || !device_range(rq.dst, rq.bytes)) return cudaErrorInvalidValue;
  PeerTickets::Ticket t;
  if (!peer_tickets_->issue(id_, rq.dst, rq.bytes, PeerTickets::Clock::now(), std::chrono::milliseconds(kPeerTicketMs),
                            &t))
    return cudaErrorNotPermitted;  // too many outstanding
  rs.ticket[0] = t.v[0];
  rs.ticket[1] = t.v[1];
  rs.expires_ms = kPeerTicketMs;
  return cudaSuccess;
}

int32_t Session::on_PeerPush(const PeerPushReq& rq, std::span<const uint8_t> tail, PeerPushResp&,
                             std::vector<uint8_t>&) {
  if (!peer_push_) return cudaErrorNotSupported;
  if (rq.bytes == 0 || rq.bytes > kPeerChunkMax || !device_range(rq.src, rq.bytes)) return cudaErrorInvalidValue;
  if (tail.size() < 7 || tail.size() > kPeerUrlMax) return cudaErrorInvalidValue;
  std::string url(reinterpret_cast<const char*>(tail.data()), tail.size());
  if (url.compare(0, 6, "ucx://") != 0 || url.find('\0') != std::string::npos) return cudaErrorInvalidValue;
  // The session's staging buffer, kept for its next push (at most one chunk).
  if (peer_out_.size() < rq.bytes) peer_out_.resize(rq.bytes);
  std::span<const uint8_t> bytes{peer_out_.data(), rq.bytes};
  Err e = ctx_->copy_dtoh(peer_out_.data(), rq.src, rq.bytes, nullptr);
  if (e == cudaSuccess) e = ctx_->stream_synchronize(nullptr);
  if (e != cudaSuccess) return e;
  PeerTickets::Ticket t{{rq.ticket[0], rq.ticket[1]}};
  int32_t st = peer_push_(url, t, rq.dst, bytes);
  if (st == cudaSuccess) stats_.bytes_peer_out += rq.bytes;
  return st;
}

int32_t Session::on_PeerCommit(const PeerCommitReq& rq, std::span<const uint8_t>, PeerCommitResp&,
                               std::vector<uint8_t>&) {
  if (!peer_tickets_) return cudaErrorNotSupported;
  PeerTickets::Ticket t{{rq.ticket[0], rq.ticket[1]}};
  uint64_t dst = 0;
  std::vector<uint8_t> bytes;
  std::string why;
  if (!peer_tickets_->take(id_, t, PeerTickets::Clock::now(), &dst, &bytes, &why)) return cudaErrorInvalidValue;
  // The memory may have been freed since the ticket was issued.
  if (!device_range(dst, bytes.size())) return cudaErrorInvalidValue;
  Err e = ctx_->copy_htod(dst, bytes.data(), bytes.size(), nullptr);
  if (e == cudaSuccess) e = ctx_->stream_synchronize(nullptr);
  const size_t n = bytes.size();
  peer_tickets_->recycle(std::move(bytes));
  if (e != cudaSuccess) return e;
  stats_.bytes_peer_in += n;
  SessionCounters::add(ctr_.bytes_in, n);
  return cudaSuccess;
}

}  // namespace wh::server
