// wormhole/server/gate.hpp - wormhole-server's end of a VM's exitless gate.
//
// The VMM (QEMU's wormhole-gate object) and the server share one memory
// object per VM: its first WH_GATE_WINDOW bytes are the gate window
// (kvm-module/gate/wh_gate.h). The guest reaches the STATE and CHAN pages
// only through the gate; the server maps them directly. Slot contents are
// kvm-module/gate/wh_gate_msg.h.
//
// A guest can redirect the gate's stores within its own view, so a channel
// slot is guest input: Window::take copies it ONCE after REQ_SEQ moved and
// validates only the copy.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "wh_gate_msg.h"
#include "wormhole/region.h"

namespace wh::server::gate {

class Window {
 public:
  // `base` maps the VMM's memory object from offset 0 (= gate GPA G).
  Window(uint8_t* base, size_t size);
  bool ok() const { return base_ != nullptr; }

  struct Request {
    uint32_t slot = 0, seq = 0;
    wh_gate_req g{};
    wh_msg_hdr hdr{};               // CALL
    std::vector<uint8_t> payload;   // CALL: hdr.len bytes
  };
  enum class Take { None, Ok, Bad };
  // None: REQ_SEQ has not moved since the last take. Ok: *out is a private,
  // validated copy. Bad: the copy is malformed (*why). Does not acknowledge.
  Take take(uint32_t slot, Request* out, std::string* why);
  // ACK_SEQ = seq: the gate accepts the slot's next SUBMIT.
  void ack(uint32_t slot, uint32_t seq);
  // Writes a response (wh_gate_resp + payload) and then RESP_SEQ = req_seq.
  // hdr == nullptr: a status-only answer (BIND, refusals).
  void respond(uint32_t slot, uint32_t req_seq, int32_t status, const wh_msg_hdr* hdr,
               std::span<const uint8_t> payload);
  // Rewrites the state page (check words filled in here): begin_seq first,
  // records, end_seq last, so that a forward copy detects a tear.
  void publish(std::span<const wh_gate_chan_state> chans);
  // The server stops serving the gate: the page no longer carries the
  // state magic, so a guest process that binds later falls back to ivshmem
  // at once instead of waiting for a BIND nobody answers.
  void withdraw();

 private:
  uint8_t* slot_base(uint32_t slot) const { return base_ + WH_GATE_CHAN_OFF + slot * 0x1000u; }
  uint8_t* base_ = nullptr;
  uint32_t last_seq_[WH_GATE_NSLOTS]{};
  uint64_t pub_seq_ = 0;
};

// Binds slots to the VM's channels and routes requests. The daemon runs
// poll_once() in the VM's poller thread.
class Poller {
 public:
  // Current generation of channel `chan` while it is ACTIVE, else 0.
  using Generation = std::function<uint64_t(uint32_t chan)>;
  // Hands a validated CALL to the channel's session. It must be queued
  // before this returns: the slot is acknowledged right after, and the
  // session must handle it only once its request ring reached
  // req.g.ring_barrier (program order with the client's posted requests).
  // The session answers with Window::respond(req.slot, req.seq, 0, &hdr, payload).
  using Deliver = std::function<void(uint32_t chan, Window::Request&& req)>;

  Poller(Window& w, uint32_t nchan, Generation gen, Deliver deliver)
      : w_(w), nchan_(nchan), gen_(std::move(gen)), deliver_(std::move(deliver)) {}
  // One pass over every slot; returns the number of slots that had a new request.
  int poll_once();
  uint64_t violations() const { return violations_; }
  uint64_t binds() const { return binds_; }      // BINDs accepted
  uint64_t refusals() const { return refusals_; }  // BINDs and CALLs refused (-EINVAL, -ESTALE, -EBUSY)
  std::string last_error() const { return last_error_; }
  // Whether `slot` is still bound to (chan, generation). The owner of an
  // answer checks it under the same lock as poll_once(): a late answer to a
  // previous binding must not overwrite the response of the slot's new owner.
  bool bound_to(uint32_t slot, uint32_t chan, uint64_t generation) const {
    return slot < WH_GATE_NSLOTS && bind_[slot].generation != 0 && bind_[slot].chan == chan &&
           bind_[slot].generation == generation;
  }

 private:
  struct Binding {
    uint32_t chan = 0;
    uint64_t generation = 0;  // 0: unbound
  };
  Window& w_;
  uint32_t nchan_;
  Generation gen_;
  Deliver deliver_;
  Binding bind_[WH_GATE_NSLOTS];
  uint64_t violations_ = 0, binds_ = 0, refusals_ = 0;
  std::string last_error_;
};

// The gate requests of one VM channel's session, oldest first. The VM's
// poller thread pushes (Poller's Deliver), the session thread pops. A
// request is handed out only once the channel's request ring has been
// consumed up to its ring_barrier: a launch the process posted on the ring
// before a synchronous gate call runs first (program order across paths).
class SessionQueue {
 public:
  // An honest process has at most one request outstanding per slot it
  // bound to the channel; the rest is slack.
  static constexpr size_t kMax = 2 * WH_GATE_NSLOTS;
  // The claim of `generation` owns the channel: requests of other
  // generations are refused from now on.
  void open(uint64_t generation);
  // The owner left (or the channel was reclaimed): nothing is accepted any
  // more; returns what was still queued, for the caller to refuse.
  std::vector<Window::Request> close();
  uint64_t generation() const;  // 0: closed
  enum class Push { Ok, Stale, Full };
  Push push(Window::Request&& rq);
  bool empty() const { return count_.load(std::memory_order_acquire) == 0; }
  // Requests pushed so far (a ticket counter). Read it BEFORE looking at
  // the ring: a request pushed by then had its ring records published
  // before it was submitted.
  uint64_t pushed() const { return pushed_.load(std::memory_order_acquire); }
  // The oldest request, if the ring has been consumed (`consumed`, the
  // ring's head index) up to its barrier, or if it was pushed before
  // `drained_before` (= pushed() read before the ring was found empty):
  // such a barrier names bytes the client never wrote, and waiting for
  // them would stall the channel.
  bool pop_ready(uint64_t consumed, uint64_t drained_before, Window::Request* out);

 private:
  struct Entry {
    uint64_t ticket;
    Window::Request rq;
  };
  mutable std::mutex mu_;
  uint64_t generation_ = 0;
  std::deque<Entry> q_;
  std::atomic<size_t> count_{0};
  std::atomic<uint64_t> pushed_{0};
};

}  // namespace wh::server::gate
