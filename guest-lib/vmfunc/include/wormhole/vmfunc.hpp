// wormhole/vmfunc.hpp - guest-lib's `vmfunc` transport: requests through the
// exitless gate (/dev/wormhole-gate, kvm-module/guest-gate), bulk data and
// everything that does not fit a gate slot through the VM's ivshmem channel.
//
// The gate gives each open file one slot: SUBMIT copies <= 2032 bytes into a
// server-owned channel slot (or answers -16 while the server has not taken
// the previous request), POLL copies the slot's current response and its
// sequence number back, QUERY copies the server's published state page. All
// three are one ioctl and no VM exit. The wire contents of slots and state
// page are in kvm-module/gate/wh_gate_msg.h; the design is in docs/exitless.md.
//
// The ioctl layer sits behind `Device` so that unit tests can drive the
// transport with a user-space fake of the gate and of the server.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>

#include "wh_gate_msg.h"
#include "wormhole/ring.hpp"
#include "wormhole_gate_uapi.h"

namespace wh::vmfunc {

// The ioctl layer of /dev/wormhole-gate (one open file = one slot).
class Device {
 public:
  virtual ~Device() = default;
  // WH_GATE_IOC_INFO / WH_GATE_IOC_CALL: 0, or -errno of the ioctl.
  virtual int info(wh_gate_info* out) = 0;
  virtual int call(wh_gate_call* c) = 0;
};

// The gate device's path: $WORMHOLE_GATE, else /dev/wormhole-gate.
std::string device_path();
// Opens the real device and checks that its INFO ioctl succeeds and speaks
// our gate version. nullptr (and *err) when there is no usable gate.
std::unique_ptr<Device> open_device(const std::string& path, std::string* err);

// Which transport a process uses.
enum class Transport { Shm, Ivshmem, Vmfunc, Invalid };
const char* to_string(Transport t);
struct Choice {
  Transport transport = Transport::Invalid;
  bool fallback_to_ivshmem = false;  // vmfunc chosen automatically: ivshmem if it fails
  std::string error;                 // Invalid: why
};
// WORMHOLE_TRANSPORT (nullptr/""/"auto" = automatic), whether a gate answered
// INFO, whether an ivshmem device (or WORMHOLE_DEVICE) is there.
//   auto: gate -> vmfunc (falls back to ivshmem), else ivshmem device ->
//         ivshmem, else shm.  vmfunc/ivshmem/shm: forced, no fallback.
Choice choose(const char* env, bool gate_ok, bool ivshmem_ok);

struct Options {
  // Longest wait for one gate call (submit + response); 0: no limit (a
  // call then ends only when it is answered or the server's heartbeat
  // stops, as on the ring). $WORMHOLE_GATE_TIMEOUT_MS sets it in guest-lib.
  std::chrono::milliseconds timeout{0};
  // The BIND exchange: a server without a gate poller never answers it.
  std::chrono::milliseconds bind_timeout{2000};
  // The server's heartbeat word of the VM channel (wh_chan_hdr) and its
  // timeout: a server that stops beating is dead (PeerDead), no hang.
  const uint64_t* server_heartbeat = nullptr;
  uint32_t hb_timeout_ms = 600;
};

// A bound gate slot. Thread-safe: one call at a time holds the slot; a
// thread that finds it taken gets Status::Full and uses the ring instead.
class Link {
 public:
  // Checks that a server publishes gate state (QUERY), then binds the slot
  // to VM channel `chan` of generation `generation` (BIND round trip).
  static std::unique_ptr<Link> bind(std::unique_ptr<Device> dev, uint32_t chan, uint64_t generation,
                                    const Options& opt, std::string* err);

  // Whether a request of `payload` bytes with a response of at most
  // `resp_payload` bytes fits one gate slot each way.
  static bool fits(size_t payload, size_t resp_payload) {
    return payload <= WH_GATE_REQ_PAYLOAD_MAX && resp_payload <= WH_GATE_RESP_PAYLOAD_MAX;
  }

  // One synchronous request through the gate. `ring_barrier`: the VM
  // channel's request-ring tail that the server must have consumed first
  // (keeps program order with posted requests that went through the ring).
  //   Ok: `reply` holds the response (hdr, payload)
  //   Full: the slot is in use by another thread of this process (use the ring)
  //   Timeout / PeerDead / Corrupt: the link is dead from now on (dead())
  ring::Status call(uint16_t opcode, uint32_t aux, uint16_t version,
                    std::span<const std::span<const uint8_t>> parts, uint64_t ring_barrier,
                    ring::Message& reply);

  // The server's published record of our channel, if a consistent snapshot
  // for our binding was read (one QUERY, no round trip).
  bool query(wh_gate_chan_state* out);

  bool dead() const { return dead_; }
  std::string error() const;
  const wh_gate_info& info() const { return info_; }
  uint64_t gate_calls() const { return calls_; }

 private:
  Link() = default;
  // SUBMIT (retrying -16 until the deadline) and POLL until the answer to
  // our sequence arrives. On success `resp`/`resp_len` hold the slot's bytes.
  ring::Status exchange(const uint8_t* req, uint32_t len, uint8_t* resp, uint32_t* resp_len,
                        std::chrono::milliseconds limit);
  ring::Status fail(ring::Status s, std::string why);
  bool server_dead();

  std::unique_ptr<Device> dev_;
  wh_gate_info info_{};
  Options opt_;
  uint32_t chan_ = 0;
  uint64_t generation_ = 0;
  std::mutex mu_;
  uint64_t next_call_id_ = 1ull << 63;  // gate calls: ids apart from the ring's
  uint64_t calls_ = 0;
  ring::PeerMonitor monitor_;
  std::atomic<bool> dead_{false};
  mutable std::mutex err_mu_;
  std::string error_;
};

// Reads a consistent record for `chan` out of a QUERY copy of the state page.
bool read_state(const uint8_t* page, uint32_t len, uint32_t chan, wh_gate_chan_state* out);

}  // namespace wh::vmfunc
