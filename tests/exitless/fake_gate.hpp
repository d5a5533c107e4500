// A user-space stand-in for /dev/wormhole-gate and the view behind it: the
// gate window is plain memory, and FakeDevice performs what
// kvm-module/gate/gate.S and wormhole_gate.ko do for SUBMIT / POLL / QUERY
// (same offsets, same -16 rule, length bounded, seq before data on POLL).
// The server side of the tests runs the real wh::server::gate::Window and
// Poller over the same memory. GateCodeDevice does the same step by step
// (mailbox first) over any mapping of the gate memory object: the
// wormhole-server tests (test_gate_daemon.cpp, fake_gate_preload.cpp) use
// it over the file the server maps through --vm-gate.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "wormhole/vmfunc.hpp"

namespace wh::test {

// Whether fd is open on `path` (a test's stand-in for /dev/wormhole-gate,
// whose ioctls the test interposes).
inline bool fd_opens(int fd, const std::string& path) {
  if (path.empty()) return false;
  char link[64], target[4096];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, target, sizeof target - 1);
  if (n <= 0) return false;
  target[n] = 0;
  return path == target;
}

struct FakeWindow {
  std::vector<uint64_t> words = std::vector<uint64_t>(WH_GATE_WINDOW / 8, 0);
  uint8_t* base() { return reinterpret_cast<uint8_t*>(words.data()); }
  uint8_t* chan(uint32_t slot) { return base() + WH_GATE_CHAN_OFF + slot * 0x1000u; }
};

inline uint32_t ld32(const uint8_t* p) { return __atomic_load_n(reinterpret_cast<const uint32_t*>(p), __ATOMIC_ACQUIRE); }
inline void st32(uint8_t* p, uint32_t v) { __atomic_store_n(reinterpret_cast<uint32_t*>(p), v, __ATOMIC_RELEASE); }

class FakeDevice final : public vmfunc::Device {
 public:
  FakeDevice(FakeWindow& w, uint32_t slot) : w_(w), slot_(slot) {}
  std::atomic<int> info_errno{0};   // INFO fails with -info_errno when set
  std::atomic<int> call_errno{0};   // every CALL ioctl fails when set
  std::atomic<uint64_t> submits{0}, busy{0}, polls{0}, queries{0};

  int info(wh_gate_info* i) override {
    if (info_errno) return -info_errno;
    *i = {};
    i->version = WH_GATE_VERSION;
    i->nslots = WH_GATE_NSLOTS;
    i->slot_max = WH_SLOT_MAX;
    i->view_index = WH_GATE_VIEW_INDEX;
    i->gate_gpa = 0x1000000000ull;
    i->slot = slot_;
    return 0;
  }
  int call(wh_gate_call* c) override {
    if (call_errno) return -call_errno;
    if (c->op < WH_GATE_OP_SUBMIT || c->op > WH_GATE_OP_NOP || c->len > WH_SLOT_MAX) return -EINVAL;
    uint8_t* ch = w_.chan(slot_);
    auto* buf = reinterpret_cast<uint8_t*>(uintptr_t(c->buf));
    switch (c->op) {
      case WH_GATE_OP_SUBMIT: {
        submits++;
        uint32_t req = ld32(ch + WH_CHAN_REQ_SEQ);
        if (ld32(ch + WH_CHAN_ACK_SEQ) != req) {
          busy++;
          c->result = WH_GATE_EBUSY;
          return 0;
        }
        std::memcpy(ch + WH_SLOT_REQ, &c->len, 4);
        std::memcpy(ch + WH_SLOT_REQ + 8, buf, c->len);
        st32(ch + WH_CHAN_REQ_SEQ, req + 1);
        c->result = req + 1;
        return 0;
      }
      case WH_GATE_OP_POLL: {
        polls++;
        uint32_t seq = ld32(ch + WH_CHAN_RESP_SEQ);
        uint32_t n = std::min<uint32_t>(ld32(ch + WH_SLOT_RESP), WH_SLOT_MAX);
        std::memcpy(buf, ch + WH_SLOT_RESP + 8, n);
        c->len = n;
        c->resp_seq = seq;
        c->result = seq;
        return 0;
      }
      case WH_GATE_OP_QUERY:
        queries++;
        std::memcpy(buf, w_.base() + WH_GATE_STATE_OFF, WH_SLOT_MAX);
        c->len = WH_SLOT_MAX;
        c->resp_seq = 0;
        c->result = 0;
        return 0;
      default:
        c->result = 0;
        return 0;
    }
  }

 private:
  FakeWindow& w_;
  uint32_t slot_;
};

// The module and gate.S step by step over a gate window at `base`: the
// gate memory object as the VMM, and wormhole-server through --vm-gate,
// map it. SUBMIT: the module writes the mailbox (length, bytes); the gate
// refuses with -16 until ACK_SEQ == REQ_SEQ, reads the mailbox length
// once, bounds it, copies mailbox -> channel and bumps REQ_SEQ after the
// bytes. POLL: the gate reads RESP_SEQ first, then the (bounded) length and
// bytes into the mailbox; the module copies the mailbox out. QUERY: the
// state page into the mailbox. INFO answers from the VMM's descriptor.
class GateCodeDevice final : public vmfunc::Device {
 public:
  GateCodeDevice(uint8_t* base, uint32_t slot) : base_(base), slot_(slot) {}
  std::atomic<uint64_t> submits{0}, busy{0}, polls{0}, queries{0};
  uint32_t slot() const { return slot_; }

  int info(wh_gate_info* i) override {
    *i = {};
    i->version = ld32(base_ + WH_DESC_VERSION);
    i->nslots = ld32(base_ + WH_DESC_NSLOTS);
    i->slot_max = ld32(base_ + WH_DESC_SLOT_MAX);
    i->view_index = ld32(base_ + WH_DESC_VIEW_INDEX);
    std::memcpy(&i->gate_gpa, base_ + WH_DESC_GATE_GPA, 8);
    i->slot = slot_;
    return 0;
  }
  int call(wh_gate_call* c) override {
    if (c->op < WH_GATE_OP_SUBMIT || c->op > WH_GATE_OP_NOP || c->len > WH_SLOT_MAX) return -EINVAL;
    uint8_t* mbox = base_ + WH_GATE_MBOX_OFF + slot_ * 0x1000u;
    uint8_t* ch = base_ + WH_GATE_CHAN_OFF + slot_ * 0x1000u;
    auto* buf = reinterpret_cast<uint8_t*>(uintptr_t(c->buf));
    std::lock_guard lk(mu_);  // the module's per-slot lock (interrupts off)
    switch (c->op) {
      case WH_GATE_OP_SUBMIT: {
        submits++;
        st32(mbox + WH_SLOT_REQ, c->len);
        std::memcpy(mbox + WH_SLOT_REQ + 8, buf, c->len);
        uint32_t req = ld32(ch + WH_CHAN_REQ_SEQ);
        if (ld32(ch + WH_CHAN_ACK_SEQ) != req) {
          busy++;
          c->result = WH_GATE_EBUSY;
          return 0;
        }
        uint32_t len = ld32(mbox + WH_SLOT_REQ);  // read once
        if (len > WH_SLOT_MAX) {
          c->result = WH_GATE_EINVAL;
          return 0;
        }
        st32(ch + WH_SLOT_REQ, len);
        std::memcpy(ch + WH_SLOT_REQ + 8, mbox + WH_SLOT_REQ + 8, len);
        st32(ch + WH_CHAN_REQ_SEQ, req + 1);  // after the bytes
        c->result = req + 1;
        return 0;
      }
      case WH_GATE_OP_POLL: {
        polls++;
        uint32_t seq = ld32(ch + WH_CHAN_RESP_SEQ);  // seq first, then data
        uint32_t n = std::min<uint32_t>(ld32(ch + WH_SLOT_RESP), WH_SLOT_MAX);
        st32(mbox + WH_SLOT_RESP, n);
        st32(mbox + WH_SLOT_RESP + 4, seq);
        std::memcpy(mbox + WH_SLOT_RESP + 8, ch + WH_SLOT_RESP + 8, n);
        c->result = seq;
        break;
      }
      case WH_GATE_OP_QUERY:
        queries++;
        std::memcpy(mbox + WH_SLOT_RESP + 8, base_ + WH_GATE_STATE_OFF, WH_SLOT_MAX);
        st32(mbox + WH_SLOT_RESP, WH_SLOT_MAX);
        c->result = 0;
        break;
      default:
        c->result = 0;
        return 0;
    }
    c->len = std::min<uint32_t>(ld32(mbox + WH_SLOT_RESP), WH_SLOT_MAX);
    c->resp_seq = ld32(mbox + WH_SLOT_RESP + 4);
    std::memcpy(buf, mbox + WH_SLOT_RESP + 8, c->len);
    return 0;
  }

 private:
  uint8_t* base_;
  uint32_t slot_;
  std::mutex mu_;
};

// What QEMU's wormhole-gate object writes into the descriptor page.
inline void write_gate_descriptor(uint8_t* base, uint64_t gate_gpa = 0x1000000000ull) {
  uint64_t magic = WH_GATE_MAGIC, cr3 = gate_gpa + WH_GATE_PT_OFF;
  std::memcpy(base + WH_DESC_MAGIC, &magic, 8);
  st32(base + WH_DESC_VERSION, WH_GATE_VERSION);
  st32(base + WH_DESC_VIEW_INDEX, WH_GATE_VIEW_INDEX);
  std::memcpy(base + WH_DESC_GATE_GPA, &gate_gpa, 8);
  std::memcpy(base + WH_DESC_GATE_CR3, &cr3, 8);
  st32(base + WH_DESC_NSLOTS, WH_GATE_NSLOTS);
  st32(base + WH_DESC_SLOT_MAX, WH_SLOT_MAX);
}

}  // namespace wh::test
