#include "wormhole/vmfunc.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

namespace wh::vmfunc {

namespace {

class IoctlDevice final : public Device {
 public:
  explicit IoctlDevice(int fd) : fd_(fd) {}
  ~IoctlDevice() override { close(fd_); }
  int info(wh_gate_info* out) override { return ioctl(fd_, WH_GATE_IOC_INFO, out) == 0 ? 0 : -errno; }
  int call(wh_gate_call* c) override { return ioctl(fd_, WH_GATE_IOC_CALL, c) == 0 ? 0 : -errno; }

 private:
  int fd_;
};

// Spin (each poll is already a syscall), then yield, then sleep with a
// backoff capped at 200 us, like the ring's poll policy across a VM.
struct Backoff {
  uint32_t n = 0;
  void wait() {
    n++;
    if (n < 64) return;
    if (n < 128) {
      sched_yield();
      return;
    }
    uint32_t us = 1u << std::min<uint32_t>((n - 128) / 16, 7);  // 1 .. 128 us
    usleep(us);
  }
};

}  // namespace

std::string device_path() {
  if (const char* e = std::getenv("WORMHOLE_GATE"); e && *e) return e;
  return "/dev/wormhole-gate";
}

std::unique_ptr<Device> open_device(const std::string& path, std::string* err) {
  int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    *err = path + ": " + strerror(errno);
    return nullptr;
  }
  auto dev = std::make_unique<IoctlDevice>(fd);
  wh_gate_info i{};
  if (int r = dev->info(&i); r != 0) {
    *err = path + ": INFO ioctl failed: " + strerror(-r);
    return nullptr;
  }
  if (i.version != WH_GATE_VERSION || i.slot_max < WH_SLOT_MAX) {
    *err = path + ": gate version " + std::to_string(i.version) + " / slot size " +
           std::to_string(i.slot_max) + " not supported";
    return nullptr;
  }
  return dev;
}

const char* to_string(Transport t) {
  switch (t) {
    case Transport::Shm: return "shm";
    case Transport::Ivshmem: return "ivshmem";
    case Transport::Vmfunc: return "vmfunc";
    default: return "invalid";
  }
}

Choice choose(const char* env, bool gate_ok, bool ivshmem_ok) {
  std::string want = env && *env ? env : "auto";
  Choice c;
  if (want == "vmfunc") {
    c.transport = Transport::Vmfunc;
  } else if (want == "ivshmem") {
    c.transport = Transport::Ivshmem;
  } else if (want == "shm") {
    c.transport = Transport::Shm;
  } else if (want == "auto") {
    if (gate_ok) {
      c.transport = Transport::Vmfunc;
      c.fallback_to_ivshmem = true;
    } else {
      c.transport = ivshmem_ok ? Transport::Ivshmem : Transport::Shm;
    }
  } else {
    c.error = "unknown WORMHOLE_TRANSPORT '" + want + "' (shm, ivshmem, vmfunc)";
  }
  return c;
}

bool read_state(const uint8_t* page, uint32_t len, uint32_t chan, wh_gate_chan_state* out) {
  if (len < sizeof(wh_gate_state)) return false;
  wh_gate_state st;
  std::memcpy(&st, page, sizeof st);
  if (st.magic != WH_GATE_STATE_MAGIC || st.version != WH_GATE_PROTO_VERSION) return false;
  if (st.end_seq != st.begin_seq || (st.end_seq & 1)) return false;  // torn or mid-update
  if (chan >= st.nchan || chan >= WH_GATE_STATE_CHANS) return false;
  const wh_gate_chan_state& r = st.chan[chan];
  if (r.generation == 0 || r.check != wh_gate_state_check(&r)) return false;
  *out = r;
  return true;
}

std::string Link::error() const {
  std::lock_guard lk(err_mu_);
  return error_;
}

ring::Status Link::fail(ring::Status s, std::string why) {
  std::lock_guard lk(err_mu_);
  if (!dead_) error_ = "vmfunc gate: " + why;
  dead_ = true;
  return s;
}

bool Link::server_dead() { return opt_.server_heartbeat && monitor_.dead(); }

ring::Status Link::exchange(const uint8_t* req, uint32_t len, uint8_t* resp, uint32_t* resp_len,
                            std::chrono::milliseconds limit) {
  using ring::Status;
  auto deadline = limit.count() > 0 ? ring::Clock::now() + limit : ring::Clock::time_point::max();
  auto expired = [&] { return ring::Clock::now() >= deadline; };
  wh_gate_call c{};
  uint32_t seq = 0;
  for (Backoff b;; b.wait()) {  // SUBMIT; -16 until the server took the previous one
    c = {};
    c.op = WH_GATE_OP_SUBMIT;
    c.len = len;
    c.buf = reinterpret_cast<uintptr_t>(req);
    if (int r = dev_->call(&c); r != 0) return fail(Status::Closed, std::string("SUBMIT ioctl: ") + strerror(-r));
    if (c.result >= 0) {
      seq = uint32_t(c.result);
      break;
    }
    if (c.result != WH_GATE_EBUSY) return fail(Status::Invalid, "SUBMIT refused: " + std::to_string(c.result));
    if (server_dead()) return fail(Status::PeerDead, "server heartbeat stopped (slot never freed)");
    if (expired()) return fail(Status::Timeout, "server never took the previous request (-16 until timeout)");
  }
  for (Backoff b;; b.wait()) {  // POLL until the response to `seq` is there
    c = {};
    c.op = WH_GATE_OP_POLL;
    c.buf = reinterpret_cast<uintptr_t>(resp);
    if (int r = dev_->call(&c); r != 0) return fail(Status::Closed, std::string("POLL ioctl: ") + strerror(-r));
    if (c.resp_seq == seq && c.result >= 0) {
      *resp_len = std::min<uint32_t>(c.len, WH_SLOT_MAX);
      // The answer must be to this request (the seq inside the copy too).
      wh_gate_resp h;
      if (*resp_len < sizeof h) return fail(Status::Corrupt, "short response");
      std::memcpy(&h, resp, sizeof h);
      if (h.magic != WH_GATE_RESP_MAGIC || h.req_seq != seq)
        return fail(Status::Corrupt, "response does not answer request " + std::to_string(seq));
      return Status::Ok;
    }
    if (server_dead()) return fail(Status::PeerDead, "server heartbeat stopped while waiting for a response");
    if (expired()) return fail(Status::Timeout, "no response to request " + std::to_string(seq));
  }
}

std::unique_ptr<Link> Link::bind(std::unique_ptr<Device> dev, uint32_t chan, uint64_t generation,
                                 const Options& opt, std::string* err) {
  std::unique_ptr<Link> l(new Link());
  l->dev_ = std::move(dev);
  l->opt_ = opt;
  l->chan_ = chan;
  l->generation_ = generation;
  if (opt.server_heartbeat) l->monitor_ = ring::PeerMonitor(opt.server_heartbeat, opt.hb_timeout_ms);
  if (int r = l->dev_->info(&l->info_); r != 0) {
    *err = std::string("gate INFO failed: ") + strerror(-r);
    return nullptr;
  }
  // A server that serves the gate publishes its state page; without it,
  // BIND would never be answered.
  std::vector<uint8_t> page(WH_SLOT_MAX);
  wh_gate_call q{};
  q.op = WH_GATE_OP_QUERY;
  q.buf = reinterpret_cast<uintptr_t>(page.data());
  wh_gate_state st{};
  if (int r = l->dev_->call(&q); r != 0 || q.len < sizeof st) {
    *err = "gate QUERY failed";
    return nullptr;
  }
  std::memcpy(&st, page.data(), sizeof st);
  if (st.magic != WH_GATE_STATE_MAGIC || st.version != WH_GATE_PROTO_VERSION) {
    *err = "wormhole-server publishes no gate state (it does not serve the gate)";
    return nullptr;
  }
  wh_gate_req b{};
  b.magic = WH_GATE_REQ_MAGIC;
  b.kind = WH_GATE_KIND_BIND;
  b.version = WH_GATE_PROTO_VERSION;
  b.chan = chan;
  b.generation = generation;
  std::vector<uint8_t> resp(WH_SLOT_MAX);
  uint32_t n = 0;
  if (l->exchange(reinterpret_cast<const uint8_t*>(&b), sizeof b, resp.data(), &n, opt.bind_timeout) !=
      ring::Status::Ok) {
    *err = "BIND: " + l->error();
    return nullptr;
  }
  wh_gate_resp h;
  std::memcpy(&h, resp.data(), sizeof h);
  if (h.status != 0) {
    *err = "server refused BIND of channel " + std::to_string(chan) + ": " + strerror(-h.status);
    return nullptr;
  }
  return l;
}

ring::Status Link::call(uint16_t opcode, uint32_t aux, uint16_t version,
                        std::span<const std::span<const uint8_t>> parts, uint64_t ring_barrier,
                        ring::Message& reply) {
  std::unique_lock lk(mu_, std::try_to_lock);
  if (!lk.owns_lock()) return ring::Status::Full;  // another thread holds the slot
  if (dead_) return ring::Status::Closed;
  size_t len = 0;
  for (auto p : parts) len += p.size();
  if (len > WH_GATE_REQ_PAYLOAD_MAX) return ring::Status::TooBig;

  alignas(8) uint8_t req[WH_SLOT_MAX];
  wh_gate_req g{};
  g.magic = WH_GATE_REQ_MAGIC;
  g.kind = WH_GATE_KIND_CALL;
  g.version = WH_GATE_PROTO_VERSION;
  g.chan = chan_;
  g.generation = generation_;
  g.ring_barrier = ring_barrier;
  wh_msg_hdr h{};
  h.magic = WH_MSG_MAGIC;
  h.version = version;
  h.opcode = opcode;
  h.len = uint32_t(len);
  h.call_id = next_call_id_++;
  h.aux = aux;
  std::memcpy(g.hdr, &h, sizeof h);
  std::memcpy(req, &g, sizeof g);
  size_t off = sizeof g;
  for (auto p : parts) {
    if (!p.empty()) std::memcpy(req + off, p.data(), p.size());
    off += p.size();
  }

  alignas(8) uint8_t resp[WH_SLOT_MAX];
  uint32_t n = 0;
  if (ring::Status s = exchange(req, uint32_t(off), resp, &n, opt_.timeout); s != ring::Status::Ok) return s;
  wh_gate_resp r;
  std::memcpy(&r, resp, sizeof r);
  if (r.status != 0)
    return fail(r.status == -ESTALE ? ring::Status::Closed : ring::Status::Corrupt,
                "server refused the request: " + std::string(strerror(-r.status)));
  wh_msg_hdr rh;
  std::memcpy(&rh, r.hdr, sizeof rh);
  if (rh.magic != WH_MSG_MAGIC || !(rh.flags & WH_MSG_F_RESPONSE) || rh.call_id != h.call_id ||
      rh.len > n - sizeof r)
    return fail(ring::Status::Corrupt, "malformed response");
  reply.hdr = rh;
  reply.payload.assign(resp + sizeof r, resp + sizeof r + rh.len);
  calls_++;
  return ring::Status::Ok;
}

bool Link::query(wh_gate_chan_state* out) {
  std::unique_lock lk(mu_, std::try_to_lock);
  if (!lk.owns_lock() || dead_) return false;
  alignas(8) uint8_t page[WH_SLOT_MAX];
  wh_gate_call q{};
  q.op = WH_GATE_OP_QUERY;
  q.buf = reinterpret_cast<uintptr_t>(page);
  if (dev_->call(&q) != 0) return false;
  wh_gate_chan_state st;
  if (!read_state(page, q.len, chan_, &st) || st.generation != generation_) return false;
  *out = st;
  return true;
}

}  // namespace wh::vmfunc
