// The guest's link to wormhole-server: picks a transport (a unix-socket
// rendezvous handing over a memfd region, a VM's ivshmem BAR, or the
// exitless gate plus the ivshmem BAR: `vmfunc`), claims a channel, and
// offers typed calls generated from the API table.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "wormhole/proto/wire.hpp"
#include "wormhole/ring.hpp"

namespace wh::vmfunc {
class Device;
class Link;
}  // namespace wh::vmfunc

namespace wh::guest {

class RemoteLink;  // remote.hpp: the ucx:// transport

// Several servers (WORMHOLE_SERVER=ucx://A,ucx://B, docs/remote.md "Several
// servers"): device k of the process is server k's device 0.
constexpr int kMaxDevices = 16;
// The calling thread's current device (cudaSetDevice); always 0 with one server.
extern thread_local int t_current_device;
// Devices of this process: 1 except with several servers (set once at connect).
extern std::atomic<int> g_device_count;
// The calling thread's current device, without a thread-local lookup when
// there is one device (the launch path reads it).
inline int current_device() {
  return g_device_count.load(std::memory_order_relaxed) > 1 ? t_current_device : 0;
}

class Connection {
 public:
  // Connects on first use; nullptr (and a logged reason) if no server. With
  // several servers: the connection of the calling thread's current device.
  static Connection* get();
  // Devices of this process (servers listed; 1 on every other transport),
  // valid once get() connected.
  static int devices() { return g_device_count.load(std::memory_order_relaxed); }
  // Device d's connection (0 <= d < devices()), after get().
  static Connection* of(int device);
  // This connection's device number, and (ucx://) the server's URL (where
  // the session is now: a move changes it).
  int index() const { return index_; }
  std::string url() const;
  // True in the child of a fork() of a connected process (get() is nullptr).
  static bool in_forked_child();
  ~Connection();

  // A synchronous call: waits for the response. Returns the call's status
  // (a cudaError_t), or cudaErrorDevicesUnavailable if the link broke.
  template <proto::Op O>
  cudaError_t call(const typename proto::OpTraits<O>::Request& rq, typename proto::OpTraits<O>::Response* rs = nullptr,
                   std::span<const uint8_t> tail = {}, std::vector<uint8_t>* rtail = nullptr) {
    constexpr size_t n = proto::wire_size<typename proto::OpTraits<O>::Response>;
    // vmfunc: read-only queries answered from the state the server publishes
    // in the gate (one QUERY, no round trip) when it covers all our requests.
    if constexpr (O == proto::Op::MemGetInfo)
      if (gate_ && rs && local_mem_info(&rs->free, &rs->total)) return cudaSuccess;
    if constexpr (O == proto::Op::StreamQuery)
      if (gate_ && rq.stream == 0 && local_idle()) return cudaSuccess;
    auto fixed = proto::fixed_bytes(rq);
    std::array<std::span<const uint8_t>, 2> parts{fixed, tail};
    ring::Message& m = reply_buffer();
    // The ring, or (vmfunc) the gate when request and response fit a slot.
    ring::Status s = transmit(uint16_t(O), parts, m, rtail ? SIZE_MAX : n);
    if (s != ring::Status::Ok) return link_error(s);
    if (m.hdr.status < 0) return cudaErrorUnknown;  // protocol violation, should not happen
    if (m.hdr.status == 0 && m.payload.size() < n) return cudaErrorUnknown;
    if constexpr (n > 0)
      if (rs && m.payload.size() >= n) std::memcpy(rs, m.payload.data(), n);
    if (rtail && m.payload.size() > n) rtail->assign(m.payload.begin() + n, m.payload.end());
    return cudaError_t(m.hdr.status);
  }
  // A posted call: returns as soon as the request is in the ring.
  // *end (when given): where the request ends in the request stream, for
  // handled() (0 over ucx://, which publishes no position).
  template <proto::Op O>
  cudaError_t post(const typename proto::OpTraits<O>::Request& rq, std::span<const uint8_t> tail = {},
                   uint64_t* end = nullptr) {
    auto fixed = proto::fixed_bytes(rq);
    std::array<std::span<const uint8_t>, 2> parts{fixed, tail};
    if (end) *end = 0;
    // Posted requests always take the ring (they never wait; the gate holds
    // one request at a time). note_posted() counts them for vmfunc.
    ring::Status s = !note_posted() ? ring::Status::Closed
                     : remote_   ? remote_post(uint16_t(O), parts)
                                 : chan_->post(uint16_t(O), 0, parts, version_, std::chrono::milliseconds(0), end);
    return s == ring::Status::Ok ? cudaSuccess : link_error(s);
  }
  // False when the server has certainly not handled yet the posted request
  // that ended at `end` (post's *end); true when it has, or cannot be told.
  bool handled(uint64_t end) const;
  // Either kind: posted when async, else a call.
  template <proto::Op O>
  cudaError_t send(bool async, const typename proto::OpTraits<O>::Request& rq, std::span<const uint8_t> tail = {}) {
    return async ? post<O>(rq, tail) : call<O>(rq, nullptr, tail);
  }

  // The data area: shared with the server, except over ucx:// (remote()),
  // where it is this process's own memory and the server never reads it.
  std::span<uint8_t> data() const;
  uint32_t max_msg() const;
  const char* transport() const { return transport_; }
  bool alive() const;
  bool remote() const { return remote_ != nullptr; }
  RemoteLink* remote_link() const { return remote_.get(); }
  // Grown pinned memory (PinnedGrow) reaches only a client of the local
  // socket: the segment's memfd comes over it.
  bool can_grow_pinned() const { return sock_ >= 0 && std::string_view(transport_) == "shm"; }
  // The memfd of segment `index` the server sent before answering
  // PinnedGrow (notes of segments given up on are skipped); -1 if none.
  int receive_segment(uint64_t index, uint64_t size);
  cudaError_t remote_error(ring::Status s) { return link_error(s); }

 private:
  Connection() = default;
  bool connect_socket(std::string* err);
  // The server went away holding this session for a restore (wormholectl
  // checkpoint): reconnects to a server that restored it, handing back the
  // region; true once that server serves the channel (docs/migration.md).
  bool resume_session();
  bool connect_remote(const std::string& url, std::string* err);
  ring::Status remote_post(uint16_t op, std::span<const std::span<const uint8_t>> parts);
  bool connect_ivshmem(std::string* err);
  // vmfunc (docs/exitless.md): ivshmem channel + a gate slot bound to it.
  // `fallback`: chosen automatically, so a gate that cannot be bound leaves
  // a working ivshmem connection (one log line) instead of failing.
  bool connect_vmfunc(std::unique_ptr<vmfunc::Device> dev, bool fallback, std::string* err);
  ring::Status transmit(uint16_t op, std::span<const std::span<const uint8_t>> parts, ring::Message& m,
                        size_t resp_max);
  bool note_posted();  // false once the gate link died
  bool local_mem_info(uint64_t* free, uint64_t* total);
  bool local_idle();
  cudaError_t link_error(ring::Status s);
  void reset_status_page();
  void report_gate_use() const;
  static ring::Message& reply_buffer();

  std::unique_ptr<ring::Region> region_;
  std::unique_ptr<ring::ClientChannel> chan_;
  std::unique_ptr<RemoteLink> remote_;
  int sock_ = -1;
  int region_fd_ = -1;  // the socket transport's region, kept for a resume
  uint16_t version_ = proto::kVersion;
  const char* transport_ = "none";
  void* ivshmem_ = nullptr;  // keeps the BAR mapping alive
  std::unique_ptr<vmfunc::Link> gate_;  // vmfunc only
  std::atomic<uint64_t> issued_{0};     // requests sent (ring + gate), for vmfunc state freshness
  // vmfunc: synchronous calls made, and where each went: the gate, or the
  // ring (an answer of variable length, by design; or a fallback: larger
  // than a slot, or the slot busy with another thread's call).
  std::atomic<uint64_t> sync_calls_{0}, gate_calls_{0}, ring_variable_{0}, ring_too_large_{0}, ring_busy_{0};
  int index_ = 0;                       // device number (several servers)
};

// Logs a message once per distinct text (stderr, prefixed "wormhole:").
void log_once(const std::string& msg);
void log(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace wh::guest
