// The daemon's end of one VM's exitless gate (docs/exitless.md): maps the
// VMM's gate memory object (the file behind QEMU's memory-backend-file of
// `-object wormhole-gate`, named by --vm-gate), runs the VM's poller
// thread, hands each validated request to the queue of the session that
// serves its channel, answers through the gate and publishes the state page
// the guest's QUERY reads.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "wormhole/server/gate.hpp"
#include "wormhole/server/session.hpp"

namespace wh::server {

class GateVm {
 public:
  // Maps `path`. nullptr and *err when it is missing, not a regular file,
  // smaller than the gate window, or holds something else than a gate
  // descriptor (a blank descriptor is accepted: QEMU writes it when the VM
  // starts, and not at all without KVM).
  static std::unique_ptr<GateVm> open(const std::string& vm, const std::string& path, uint32_t channels,
                                      Stats& stats, std::string* err);
  ~GateVm();
  GateVm(const GateVm&) = delete;
  GateVm& operator=(const GateVm&) = delete;

  const std::string& path() const { return path_; }
  // Channels served through the gate: the state page has records for 32.
  uint32_t nchan() const { return nchan_; }

  // One pass over the slots (Poller::poll_once) unless another thread is
  // making one; returns the number of new requests. Session threads call
  // it while they wait, so that a call does not also wait for the poller
  // thread to be scheduled (two threads spinning per call, not three).
  int poll();
  // The poller thread runs until `stopping`: it answers what no session
  // picks up (BINDs and calls for channels without a session, malformed
  // slots) and backs off further than the sessions do.
  void start(const std::atomic<bool>& stopping);
  void join();
  // No session publishes any more: the page loses its state magic, so a
  // process starting later does not wait for a BIND nobody answers.
  void withdraw();

  // A session starts on `chan` for the claim of `generation`: its first
  // record is published, then BINDs naming it are accepted. Called before
  // the channel turns ACTIVE (the guest binds as soon as it sees ACTIVE).
  void begin(uint32_t chan, uint64_t generation, const wh_gate_chan_state& first);
  // The session ended: BINDs and CALLs naming it are refused (-ESTALE),
  // queued requests dropped (answered -ESTALE), its record cleared.
  void end(uint32_t chan);
  gate::SessionQueue& queue(uint32_t chan) { return *queues_[chan]; }
  // Rewrites `chan`'s record (and the page around it).
  void publish(uint32_t chan, const wh_gate_chan_state& rec);
  // Answers `rq` through its slot, unless the slot was bound anew since.
  void respond(const gate::Window::Request& rq, int32_t status, const wh_msg_hdr* hdr,
               std::span<const uint8_t> payload);

 private:
  GateVm(Stats& stats) : stats_(stats) {}
  void run(const std::atomic<bool>& stopping);
  void deliver(uint32_t chan, gate::Window::Request&& rq);  // poll_once's Deliver (mu_ held)
  void sync_stats();                                         // mu_ held

  std::string name_, path_;
  Stats& stats_;
  uint8_t* map_ = nullptr;
  size_t map_size_ = 0;
  uint32_t nchan_ = 0;
  // Serialises everything that touches the window: poll_once (take, ack,
  // BIND answers, refusals), session answers and state-page rewrites.
  std::mutex mu_;
  std::unique_ptr<gate::Window> window_;
  std::unique_ptr<gate::Poller> poller_;
  std::vector<wh_gate_chan_state> records_;
  std::vector<std::unique_ptr<gate::SessionQueue>> queues_;
  uint64_t seen_binds_ = 0, seen_refusals_ = 0, seen_violations_ = 0;
  std::thread thread_;
};

}  // namespace wh::server
