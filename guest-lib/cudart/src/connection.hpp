// The guest's link to wormhole-server: picks a transport (a unix-socket
// rendezvous handing over a memfd region, or a VM's ivshmem BAR), claims a
// channel, and offers typed calls generated from the API table.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "wormhole/proto/wire.hpp"
#include "wormhole/ring.hpp"

namespace wh::guest {

class Connection {
 public:
  // Connects on first use; nullptr (and a logged reason) if no server.
  static Connection* get();
  ~Connection();

  // A synchronous call: waits for the response. Returns the call's status
  // (a cudaError_t), or cudaErrorDevicesUnavailable if the link broke.
  template <proto::Op O>
  cudaError_t call(const typename proto::OpTraits<O>::Request& rq, typename proto::OpTraits<O>::Response* rs = nullptr,
                   std::span<const uint8_t> tail = {}, std::vector<uint8_t>* rtail = nullptr) {
    auto fixed = proto::fixed_bytes(rq);
    std::array<std::span<const uint8_t>, 2> parts{fixed, tail};
    ring::Message& m = reply_buffer();
    ring::Status s = chan_->call(uint16_t(O), 0, parts, m, version_);
    if (s != ring::Status::Ok) return link_error(s);
    if (m.hdr.status < 0) return cudaErrorUnknown;  // protocol violation, should not happen
    constexpr size_t n = proto::wire_size<typename proto::OpTraits<O>::Response>;
    if (m.hdr.status == 0 && m.payload.size() < n) return cudaErrorUnknown;
    if constexpr (n > 0)
      if (rs && m.payload.size() >= n) std::memcpy(rs, m.payload.data(), n);
    if (rtail && m.payload.size() > n) rtail->assign(m.payload.begin() + n, m.payload.end());
    return cudaError_t(m.hdr.status);
  }
  // A posted call: returns as soon as the request is in the ring.
  template <proto::Op O>
  cudaError_t post(const typename proto::OpTraits<O>::Request& rq, std::span<const uint8_t> tail = {}) {
    auto fixed = proto::fixed_bytes(rq);
    std::array<std::span<const uint8_t>, 2> parts{fixed, tail};
    ring::Status s = chan_->post(uint16_t(O), 0, parts, version_);
    return s == ring::Status::Ok ? cudaSuccess : link_error(s);
  }
  // Either kind: posted when async, else a call.
  template <proto::Op O>
  cudaError_t send(bool async, const typename proto::OpTraits<O>::Request& rq, std::span<const uint8_t> tail = {}) {
    return async ? post<O>(rq, tail) : call<O>(rq, nullptr, tail);
  }

  std::span<uint8_t> data() const { return chan_->data(); }
  uint32_t max_msg() const { return chan_->max_msg(); }
  const char* transport() const { return transport_; }
  bool alive() const { return chan_->status() == ring::Status::Ok; }

 private:
  Connection() = default;
  bool connect_socket(std::string* err);
  bool connect_ivshmem(std::string* err);
  cudaError_t link_error(ring::Status s);
  void reset_status_page();
  static ring::Message& reply_buffer();

  std::unique_ptr<ring::Region> region_;
  std::unique_ptr<ring::ClientChannel> chan_;
  int sock_ = -1;
  uint16_t version_ = proto::kVersion;
  const char* transport_ = "none";
  void* ivshmem_ = nullptr;  // keeps the BAR mapping alive
};

// Logs a message once per distinct text (stderr, prefixed "wormhole:").
void log_once(const std::string& msg);
void log(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace wh::guest
