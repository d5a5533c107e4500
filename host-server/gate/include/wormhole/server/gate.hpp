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

#include <cstdint>
#include <functional>
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
  std::string last_error() const { return last_error_; }

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
  uint64_t violations_ = 0;
  std::string last_error_;
};

}  // namespace wh::server::gate
