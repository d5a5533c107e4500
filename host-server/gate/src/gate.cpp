#include "wormhole/server/gate.hpp"

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>

namespace wh::server::gate {

namespace {
uint32_t load32(const uint8_t* p) { return __atomic_load_n(reinterpret_cast<const uint32_t*>(p), __ATOMIC_ACQUIRE); }
void store32(uint8_t* p, uint32_t v) { __atomic_store_n(reinterpret_cast<uint32_t*>(p), v, __ATOMIC_RELEASE); }
void store64(uint8_t* p, uint64_t v) { __atomic_store_n(reinterpret_cast<uint64_t*>(p), v, __ATOMIC_RELEASE); }
}  // namespace

Window::Window(uint8_t* base, size_t size) {
  if (base && size >= WH_GATE_WINDOW) base_ = base;
  // Requests left from before this server started are dropped: the slot is
  // acknowledged so that the gate accepts the next SUBMIT.
  if (base_)
    for (uint32_t i = 0; i < WH_GATE_NSLOTS; i++) {
      last_seq_[i] = load32(slot_base(i) + WH_CHAN_REQ_SEQ);
      store32(slot_base(i) + WH_CHAN_ACK_SEQ, last_seq_[i]);
    }
}

Window::Take Window::take(uint32_t slot, Request* out, std::string* why) {
  if (!base_ || slot >= WH_GATE_NSLOTS) return Take::None;
  uint8_t* s = slot_base(slot);
  uint32_t seq = load32(s + WH_CHAN_REQ_SEQ);  // acquire: the payload before it is visible
  if (seq == last_seq_[slot]) return Take::None;
  last_seq_[slot] = seq;
  out->slot = slot;
  out->seq = seq;
  // The one copy: length read once and bounded, then the bytes.
  uint32_t len = __atomic_load_n(reinterpret_cast<const uint32_t*>(s + WH_SLOT_REQ), __ATOMIC_RELAXED);
  if (len > WH_SLOT_MAX || len < sizeof(wh_gate_req)) {
    *why = "slot " + std::to_string(slot) + ": request length " + std::to_string(len);
    return Take::Bad;
  }
  alignas(8) uint8_t copy[WH_SLOT_MAX];
  std::memcpy(copy, s + WH_SLOT_REQ + 8, len);
  // From here on only the private copy is read.
  std::memcpy(&out->g, copy, sizeof out->g);
  const wh_gate_req& g = out->g;
  if (g.magic != WH_GATE_REQ_MAGIC || g.version != WH_GATE_PROTO_VERSION) {
    *why = "slot " + std::to_string(slot) + ": bad magic/version";
    return Take::Bad;
  }
  if (g.kind == WH_GATE_KIND_BIND) {
    if (len != sizeof g) {
      *why = "BIND of the wrong size";
      return Take::Bad;
    }
    out->payload.clear();
    return Take::Ok;
  }
  if (g.kind != WH_GATE_KIND_CALL) {
    *why = "unknown kind " + std::to_string(g.kind);
    return Take::Bad;
  }
  std::memcpy(&out->hdr, g.hdr, sizeof out->hdr);
  const wh_msg_hdr& h = out->hdr;
  if (h.magic != WH_MSG_MAGIC || h.len != len - sizeof g || h.opcode == WH_OP_PAD ||
      (h.flags & (WH_MSG_F_RESPONSE | WH_MSG_F_POSTED | WH_MSG_F_ERROR))) {
    *why = "slot " + std::to_string(slot) + ": malformed request header";
    return Take::Bad;
  }
  out->payload.assign(copy + sizeof g, copy + len);
  return Take::Ok;
}

void Window::ack(uint32_t slot, uint32_t seq) {
  if (base_ && slot < WH_GATE_NSLOTS) store32(slot_base(slot) + WH_CHAN_ACK_SEQ, seq);
}

void Window::respond(uint32_t slot, uint32_t req_seq, int32_t status, const wh_msg_hdr* hdr,
                     std::span<const uint8_t> payload) {
  if (!base_ || slot >= WH_GATE_NSLOTS) return;
  if (payload.size() > WH_GATE_RESP_PAYLOAD_MAX) {  // cannot be sent: say so
    status = -E2BIG;
    hdr = nullptr;
    payload = {};
  }
  uint8_t* s = slot_base(slot);
  wh_gate_resp r{};
  r.magic = WH_GATE_RESP_MAGIC;
  r.req_seq = req_seq;
  r.status = status;
  if (hdr) {
    wh_msg_hdr h = *hdr;
    h.len = uint32_t(payload.size());
    std::memcpy(r.hdr, &h, sizeof h);
  }
  std::memcpy(s + WH_SLOT_RESP + 8, &r, sizeof r);
  if (!payload.empty()) std::memcpy(s + WH_SLOT_RESP + 8 + sizeof r, payload.data(), payload.size());
  __atomic_store_n(reinterpret_cast<uint32_t*>(s + WH_SLOT_RESP), uint32_t(sizeof r + payload.size()),
                   __ATOMIC_RELAXED);
  store32(s + WH_CHAN_RESP_SEQ, req_seq);  // release: after the bytes (the gate reads seq first)
}

void Window::publish(std::span<const wh_gate_chan_state> chans) {
  if (!base_) return;
  uint8_t* p = base_ + WH_GATE_STATE_OFF;
  uint64_t seq = pub_seq_ += 2;
  store64(p + offsetof(wh_gate_state, begin_seq), seq - 1);  // odd: update under way
#if defined(__SANITIZE_THREAD__)
  // GCC's TSan rejects thread fences. x86 keeps stores in order (TSO), so
  // stopping the compiler from reordering is all the odd mark needs here.
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
#else
  __atomic_thread_fence(__ATOMIC_RELEASE);
#endif
  wh_gate_state st{};
  st.magic = WH_GATE_STATE_MAGIC;
  st.version = WH_GATE_PROTO_VERSION;
  st.nchan = uint32_t(std::min<size_t>(chans.size(), WH_GATE_STATE_CHANS));
  for (uint32_t i = 0; i < st.nchan; i++) {
    st.chan[i] = chans[i];
    st.chan[i].check = wh_gate_state_check(&st.chan[i]);
  }
  std::memcpy(p + 8, reinterpret_cast<const uint8_t*>(&st) + 8, offsetof(wh_gate_state, begin_seq) - 8);
  store64(p + offsetof(wh_gate_state, begin_seq), seq);
  store64(p + offsetof(wh_gate_state, end_seq), seq);
}

void Window::withdraw() {
  if (!base_) return;
  uint8_t* p = base_ + WH_GATE_STATE_OFF;
  store64(p + offsetof(wh_gate_state, begin_seq), (pub_seq_ += 2) - 1);  // odd: never consistent again
  store32(p + offsetof(wh_gate_state, magic), 0);
}

int Poller::poll_once() {
  int n = 0;
  for (uint32_t slot = 0; slot < WH_GATE_NSLOTS; slot++) {
    Window::Request rq;
    std::string why;
    Window::Take t = w_.take(slot, &rq, &why);
    if (t == Window::Take::None) continue;
    n++;
    if (t == Window::Take::Bad) {
      violations_++;
      last_error_ = why;
      w_.respond(slot, rq.seq, -EINVAL, nullptr, {});
      w_.ack(slot, rq.seq);
      continue;
    }
    const wh_gate_req& g = rq.g;
    uint64_t cur = g.chan < nchan_ ? gen_(g.chan) : 0;
    if (g.kind == WH_GATE_KIND_BIND) {
      int32_t st = 0;
      if (g.chan >= nchan_) st = -EINVAL;
      else if (cur == 0 || cur != g.generation) st = -ESTALE;
      else
        // First BIND wins: a channel's owner binds one slot (one process =
        // one channel + one slot), so another slot naming the same owner is
        // another process of the VM that read the generation (the state
        // page publishes it) and wants to call on someone else's session.
        for (uint32_t o = 0; o < WH_GATE_NSLOTS; o++)
          if (o != slot && bind_[o].generation == g.generation && bind_[o].chan == g.chan) {
            st = -EBUSY;
            last_error_ = "slot " + std::to_string(slot) + ": BIND to channel " + std::to_string(g.chan) +
                          ", already bound to slot " + std::to_string(o);
            break;
          }
      if (st == 0) {
        bind_[slot] = {g.chan, g.generation};
        binds_++;
      } else {
        bind_[slot] = {};
        refusals_++;
      }
      w_.respond(slot, rq.seq, st, nullptr, {});
      w_.ack(slot, rq.seq);
      continue;
    }
    // CALL: only for the channel this slot was bound to, while it still
    // belongs to the same owner (generation).
    const Binding& b = bind_[slot];
    if (b.generation == 0 || g.chan != b.chan || g.generation != b.generation || cur != b.generation) {
      last_error_ = "slot " + std::to_string(slot) + ": call for an unbound or stale channel";
      refusals_++;
      w_.respond(slot, rq.seq, -ESTALE, nullptr, {});
      w_.ack(slot, rq.seq);
      continue;
    }
    uint32_t seq = rq.seq;
    deliver_(b.chan, std::move(rq));  // queued before the ack: see Deliver
    w_.ack(slot, seq);
  }
  return n;
}

void SessionQueue::open(uint64_t generation) {
  std::lock_guard lk(mu_);
  generation_ = generation;
}

std::vector<Window::Request> SessionQueue::close() {
  std::lock_guard lk(mu_);
  generation_ = 0;
  std::vector<Window::Request> left;
  for (auto& e : q_) left.push_back(std::move(e.rq));
  q_.clear();
  count_.store(0, std::memory_order_release);
  return left;
}

uint64_t SessionQueue::generation() const {
  std::lock_guard lk(mu_);
  return generation_;
}

SessionQueue::Push SessionQueue::push(Window::Request&& rq) {
  std::lock_guard lk(mu_);
  // Checked here, under the lock that close() takes: the poller's earlier
  // look at the generation may predate the owner's departure.
  if (generation_ == 0 || rq.g.generation != generation_) return Push::Stale;
  if (q_.size() >= kMax) return Push::Full;
  q_.push_back({pushed_.load(std::memory_order_relaxed), std::move(rq)});
  count_.store(q_.size(), std::memory_order_release);
  pushed_.fetch_add(1, std::memory_order_release);
  return Push::Ok;
}

bool SessionQueue::pop_ready(uint64_t consumed, uint64_t drained_before, Window::Request* out) {
  if (empty()) return false;
  std::lock_guard lk(mu_);
  if (q_.empty()) return false;
  Entry& e = q_.front();
  if (e.rq.g.ring_barrier > consumed && e.ticket >= drained_before) return false;
  *out = std::move(e.rq);
  q_.pop_front();
  count_.store(q_.size(), std::memory_order_release);
  return true;
}

}  // namespace wh::server::gate
