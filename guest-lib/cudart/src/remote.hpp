// The ucx:// transport's client side (docs/remote.md): WORMHOLE_SERVER=
// ucx://HOST:PORT. Requests are framed as on the ring and shipped over a
// UCX stream; posted requests are batched and leave with the next
// synchronous call, when the batch fills, or after a millisecond (the
// keepalive thread), so posted work streams without a round trip each. One synchronous call is in flight at a time.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "wormhole/net.hpp"
#include "wormhole/ring.hpp"

namespace wh::guest {

class RemoteLink {
 public:
  static std::unique_ptr<RemoteLink> connect(const std::string& url, std::string* err);
  ~RemoteLink();
  ring::Status call(uint16_t op, std::span<const std::span<const uint8_t>> parts, ring::Message& m);
  ring::Status post(uint16_t op, std::span<const std::span<const uint8_t>> parts);
  // Synchronous calls of one opcode sent together, answered in order (the
  // server handles a client's requests in order): chunked copies overlap
  // the transfer of one chunk with the server's work on the next.
  ring::Status call_many(uint16_t op, std::span<const std::span<const uint8_t>> requests,
                         std::vector<ring::Message>& out);
  // Like call_many, each answer's payload received straight into dsts[i]
  // (which must take exactly the expected bytes[i]); hdrs[i] its header. An
  // answer of another size or a failure status carries no payload.
  ring::Status call_many_into(uint16_t op, std::span<const std::span<const uint8_t>> requests,
                              std::span<uint8_t* const> dsts, std::span<const size_t> bytes,
                              std::vector<wh_msg_hdr>& hdrs);
  // Pinned host memory (cudaMallocHost/cudaHostAlloc/cudaHostRegister),
  // registered with UCX once; copies from/to it pass its handle.
  void pin(void* p, size_t n);
  void unpin(void* p);
  void* memh_for(const void* p, size_t n) const;
  // The process's own data area (status page, pinned heap): not shared.
  std::span<uint8_t> data() const { return {data_, data_size_}; }
  uint32_t max_msg() const { return max_msg_; }
  uint16_t version() const { return version_; }
  bool alive() const { return !dead_.load(); }
  std::string error() const;
  // The server's address (a move changes it).
  std::string url() const;

 private:
  RemoteLink() = default;
  struct Handshake {
    uint16_t version = 0;
    uint32_t max_msg = 0;
    std::chrono::milliseconds server_timeout{10000};
    uint64_t session_id = 0;
  };
  // Connects and authenticates: a new session, or (token) the session that
  // moved to that server.
  static std::unique_ptr<net::Link> open(const std::string& url, std::chrono::milliseconds timeout,
                                         const uint64_t* token, Handshake* hs, std::string* err);
  ring::Status follow_locked(const ring::Message& m);
  bool flush_locked(net::Clock::time_point deadline);
  ring::Status send_many_locked(uint16_t op, std::span<const std::span<const uint8_t>> requests, uint64_t* first);
  struct Into {
    uint8_t* dst;
    size_t n;
    void* memh;
  };
  ring::Status answer_locked(uint64_t id, ring::Message& m, const Into* into = nullptr);
  void append(uint16_t op, uint32_t flags, uint64_t call_id, std::span<const std::span<const uint8_t>> parts);
  void keepalive_loop();
  ring::Status broken(const std::string& why);

  std::unique_ptr<net::Link> link_;
  std::string url_;
  mutable std::mutex mu_;
  std::vector<uint8_t> batch_;  // posted records not sent yet
  uint64_t next_call_ = 1;
  std::atomic<uint32_t> max_msg_{0};  // read before the lock is taken; a move may change it
  uint16_t version_ = 0;
  std::chrono::milliseconds timeout_{10000}, server_timeout_{10000};
  net::Clock::time_point last_sent_{};
  std::atomic<bool> dead_{false};
  std::string why_;
  uint8_t* data_ = nullptr;
  size_t data_size_ = 0;
  std::thread keepalive_;
  std::mutex ka_mu_;
  std::condition_variable ka_cv_;
  bool stop_ = false;
  std::atomic<bool> pending_{false};  // posted records wait in batch_
  struct Pinned {
    size_t n;
    void* memh;
  };
  mutable std::mutex pin_mu_;
  std::map<uintptr_t, Pinned> pinned_;  // by start address
};

}  // namespace wh::guest
