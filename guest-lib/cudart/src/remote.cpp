#include "remote.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <cstring>

#include "connection.hpp"
#include "wormhole/proto/wire.hpp"

namespace wh::guest {

using net::Clock;
using namespace std::chrono_literals;

namespace {
// Posted records accumulate up to this much before they leave on their own.
constexpr size_t kBatchMax = 256 << 10;
// Posted records with a tail this large go out at once, the tail straight
// from the caller's memory.
constexpr size_t kDirectMin = 64 << 10;
// The client's data area: the status page and a pinned heap of this size
// (address space only until used).
constexpr size_t kRemotePinned = 1ull << 30;

// WORMHOLE_UCX_STAGED_COPIES=1: no UCX registration of pinned memory, and
// device-to-host bytes staged through the link's receive buffer (the path
// before zero-copy: a fallback, and the comparison of make bench-remote).
bool staged_copies() {
  static const bool on = [] {
    const char* e = std::getenv("WORMHOLE_UCX_STAGED_COPIES");
    return e && *e == '1';
  }();
  return on;
}

std::string key_error;
bool client_key(net::Key* k, std::string* err) {
  const char* f = std::getenv("WORMHOLE_AUTH_KEY_FILE");
  if (!f || !*f) {
    *err = "WORMHOLE_AUTH_KEY_FILE is not set (a ucx:// server requires its shared key)";
    return false;
  }
  return net::load_key(f, k, err);
}
}  // namespace

std::unique_ptr<net::Link> RemoteLink::open(const std::string& url, std::chrono::milliseconds timeout,
                                            const uint64_t* token, Handshake* hs, std::string* err) {
  net::Addr addr;
  if (!net::parse_url(url, &addr, err)) return nullptr;
  net::Key key;
  if (!client_key(&key, err)) return nullptr;
  auto link = net::Link::connect(addr, err);
  if (!link) return nullptr;
  // ---- the handshake (fixed-size messages; see wormhole/net.hpp)
  auto deadline = Clock::now() + std::max<std::chrono::milliseconds>(timeout, 1000ms);
  auto lost = [&](const char* what) {
    *err = "cannot reach wormhole-server at " + url + " (" + what + ": " +
           (link->dead() ? link->error() : "timed out") + ")";
    return nullptr;
  };
  net::Hello hello;
  hello.magic = token ? net::kResumeMagic : net::kProofMagic;  // a token: the session that moved there
  hello.min_version = proto::kMinVersion;
  hello.max_version = proto::kVersion;
  hello.pid = uint32_t(getpid());
  hello.timeout_ms = uint32_t(timeout.count());
  hello.token = token;
  net::Challenge ch;
  net::Verdict v;
  switch (net::client_handshake(*link, key, hello, deadline, &ch, &v)) {
    case net::Shake::Ok: break;
    case net::Shake::NoChallenge: return lost("no challenge");
    case net::Shake::NoVerdict: return lost("no verdict");
    case net::Shake::NotServer: *err = url + " is not a wormhole-server"; return nullptr;
    case net::Shake::Refused: *err = std::string("server ") + url + " refused: " + v.message; return nullptr;
    case net::Shake::Forged: *err = "server " + url + " did not prove it holds the key: not connecting"; return nullptr;
  }
  if (v.version < proto::kMinVersion || v.version > proto::kVersion || ch.max_msg < 4096) {
    *err = "server " + url + " speaks no common protocol version";
    return nullptr;
  }
  hs->version = v.version;
  hs->max_msg = std::min<uint32_t>(ch.max_msg, (1u << 20));
  hs->server_timeout = std::chrono::milliseconds(std::max<uint32_t>(ch.timeout_ms, 100));
  hs->session_id = v.session_id;
  return link;
}

std::unique_ptr<RemoteLink> RemoteLink::connect(const std::string& url, std::string* err) {
  std::unique_ptr<RemoteLink> r(new RemoteLink());
  if (const char* t = std::getenv("WORMHOLE_REMOTE_TIMEOUT_MS"); t && atol(t) > 0)
    r->timeout_ = std::chrono::milliseconds(atol(t));
  Handshake hs;
  r->link_ = open(url, r->timeout_, nullptr, &hs, err);
  if (!r->link_) return nullptr;
  r->url_ = url;
  r->version_ = hs.version;
  r->max_msg_ = hs.max_msg;
  r->server_timeout_ = hs.server_timeout;
  r->data_size_ = proto::kPinnedHeapOffset + kRemotePinned;
  void* d = mmap(nullptr, r->data_size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (d == MAP_FAILED) {
    *err = "no memory for the data area";
    return nullptr;
  }
  r->data_ = static_cast<uint8_t*>(d);
  r->last_sent_ = Clock::now();
  r->keepalive_ = std::thread([p = r.get()] { p->keepalive_loop(); });
  return r;
}

std::string RemoteLink::url() const {
  std::lock_guard lk(mu_);
  return url_;
}

// The session moved to another server (wormholectl migrate) before the
// request answered with kMoved ran: connect there with the move's token.
// The caller sends that request (and those after it) again. Pinned memory
// stays registered: UCX's context is the process's, not the link's.
ring::Status RemoteLink::follow_locked(const ring::Message& m) {
  proto::MovedNotice n;
  if (m.payload.size() != sizeof n) return broken("the server sent a malformed notice of a move");
  std::memcpy(&n, m.payload.data(), sizeof n);
  n.url[sizeof n.url - 1] = 0;
  const std::string url = n.url;
  Handshake hs;
  std::string err;
  auto l = open(url, timeout_, n.token, &hs, &err);
  if (!l) return broken("the session moved to " + url + ", which could not be reached: " + err);
  link_ = std::move(l);  // the old link closes: the source frees its copy
  url_ = url;
  version_ = hs.version;
  max_msg_ = hs.max_msg;
  server_timeout_ = hs.server_timeout;
  last_sent_ = Clock::now();
  if (std::getenv("WORMHOLE_VERBOSE")) log("the session moved to %s (session %llu there)", url.c_str(),
                                           (unsigned long long)hs.session_id);
  return ring::Status::Ok;
}

RemoteLink::~RemoteLink() {
  {
    std::lock_guard kl(ka_mu_);
    stop_ = true;
  }
  ka_cv_.notify_all();
  if (keepalive_.joinable()) keepalive_.join();
  {
    std::lock_guard lk(mu_);
    if (!dead_ && !batch_.empty()) flush_locked(Clock::now() + timeout_);
    {
      // Pinned memory the program never freed: unregistered before the
      // UCP context goes (UCX asserts on registrations still in use).
      std::lock_guard pl(pin_mu_);
      for (auto& [addr, pin] : pinned_) link_->deregister_memory(pin.memh);
      pinned_.clear();
    }
    link_.reset();  // flushed and closed: the server ends the session at once
  }
  if (data_) munmap(data_, data_size_);
}

std::string RemoteLink::error() const {
  std::lock_guard lk(mu_);
  return why_;
}

ring::Status RemoteLink::broken(const std::string& why) {
  if (!dead_.exchange(true)) why_ = why;
  if (link_) link_->fail(why);  // torn down at exit without waiting for a flush
  return ring::Status::Closed;
}

// Idle links send a keepalive record (WH_OP_PAD) so that the server can
// tell a quiet client from a vanished one.
void RemoteLink::keepalive_loop() {
  const auto period = std::max<std::chrono::milliseconds>(server_timeout_ / 4, 10ms);
  std::unique_lock kl(ka_mu_);
  while (!stop_) {
    ka_cv_.wait_for(kl, period, [&] { return stop_ || pending_.load(); });
    if (stop_) break;
    if (pending_) {
      // Posted work waits in the batch: give the program a millisecond to
      // add more (or to flush it with a call), then send it.
      kl.unlock();
      std::this_thread::sleep_for(1ms);
      kl.lock();
    }
    std::unique_lock lk(mu_, std::try_to_lock);
    if (!lk.owns_lock()) continue;
    if (dead_) {
      pending_ = false;
      continue;
    }
    if (batch_.empty()) {
      if (Clock::now() - last_sent_ < period) continue;
      wh_msg_hdr ka{};
      ka.magic = WH_MSG_MAGIC;
      ka.version = version_;
      ka.opcode = WH_OP_PAD;
      ka.flags = WH_MSG_F_POSTED;
      batch_.insert(batch_.end(), reinterpret_cast<const uint8_t*>(&ka), reinterpret_cast<const uint8_t*>(&ka + 1));
    }
    if (!flush_locked(Clock::now() + timeout_)) broken("send: " + link_->error());
  }
}

void RemoteLink::append(uint16_t op, uint32_t flags, uint64_t call_id,
                        std::span<const std::span<const uint8_t>> parts) {
  size_t len = 0;
  for (auto p : parts) len += p.size();
  wh_msg_hdr h{};
  h.magic = WH_MSG_MAGIC;
  h.version = version_;
  h.opcode = op;
  h.flags = flags;
  h.len = uint32_t(len);
  h.call_id = call_id;
  size_t at = batch_.size();
  batch_.resize(at + sizeof h + len);
  std::memcpy(batch_.data() + at, &h, sizeof h);
  at += sizeof h;
  for (auto p : parts) {
    if (!p.empty()) std::memcpy(batch_.data() + at, p.data(), p.size());
    at += p.size();
  }
}

bool RemoteLink::flush_locked(Clock::time_point deadline) {
  pending_ = false;
  if (batch_.empty()) return true;
  bool ok = link_->send(batch_.data(), batch_.size(), deadline);
  batch_.clear();
  last_sent_ = Clock::now();
  return ok;
}

ring::Status RemoteLink::post(uint16_t op, std::span<const std::span<const uint8_t>> parts) {
  size_t len = 0;
  for (auto p : parts) len += p.size();
  if (len > max_msg_) return ring::Status::TooBig;
  std::lock_guard lk(mu_);
  if (dead_) return ring::Status::Closed;
  if (len >= kDirectMin && parts.size() >= 2) {
    // A large tail (a chunk of a copy) is sent from the caller's memory
    // after its header, not copied into the batch first.
    size_t head = len - parts.back().size();
    wh_msg_hdr h{};
    h.magic = WH_MSG_MAGIC;
    h.version = version_;
    h.opcode = op;
    h.flags = WH_MSG_F_POSTED;
    h.len = uint32_t(len);
    size_t at = batch_.size();
    batch_.resize(at + sizeof h + head);
    std::memcpy(batch_.data() + at, &h, sizeof h);
    at += sizeof h;
    for (size_t i = 0; i + 1 < parts.size(); i++) {
      if (!parts[i].empty()) std::memcpy(batch_.data() + at, parts[i].data(), parts[i].size());
      at += parts[i].size();
    }
    auto deadline = Clock::now() + timeout_;
    void* memh = memh_for(parts.back().data(), parts.back().size());
    if (!flush_locked(deadline) || !link_->send(parts.back().data(), parts.back().size(), deadline, memh))
      return broken("send: " + link_->error());
    return ring::Status::Ok;
  }
  const bool first = batch_.empty();
  append(op, WH_MSG_F_POSTED, 0, parts);
  if (batch_.size() >= kBatchMax && !flush_locked(Clock::now() + timeout_))
    return broken("send: " + link_->error());
  if (first && !batch_.empty()) {
    pending_ = true;  // the keepalive thread sends it if no call does first
    ka_cv_.notify_one();
  }
  return ring::Status::Ok;
}

ring::Status RemoteLink::call(uint16_t op, std::span<const std::span<const uint8_t>> parts, ring::Message& m) {
  size_t len = 0;
  for (auto p : parts) len += p.size();
  if (len > max_msg_) return ring::Status::TooBig;
  std::lock_guard lk(mu_);
  for (;;) {
    if (dead_) return ring::Status::Closed;
    const uint64_t id = next_call_++;
    append(op, 0, id, parts);
    if (!flush_locked(Clock::now() + timeout_)) return broken("send: " + link_->error());
    ring::Status s = answer_locked(id, m);
    if (s != ring::Status::Ok || m.hdr.status != proto::kMoved) return s;
    if ((s = follow_locked(m)) != ring::Status::Ok) return s;
  }
}

// Sends synchronous requests of one opcode together; their call ids are
// *first onwards.
ring::Status RemoteLink::send_many_locked(uint16_t op, std::span<const std::span<const uint8_t>> requests,
                                          uint64_t* first) {
  if (dead_) return ring::Status::Closed;
  *first = next_call_;
  for (auto r : requests) {
    std::array<std::span<const uint8_t>, 1> one{r};
    append(op, 0, next_call_++, one);
  }
  if (!flush_locked(Clock::now() + timeout_)) return broken("send: " + link_->error());
  return ring::Status::Ok;
}

ring::Status RemoteLink::call_many(uint16_t op, std::span<const std::span<const uint8_t>> requests,
                                   std::vector<ring::Message>& out) {
  for (auto r : requests)
    if (r.size() > max_msg_) return ring::Status::TooBig;
  std::lock_guard lk(mu_);
  out.resize(requests.size());
  // From the first request not answered yet (after a move: the one answered
  // kMoved, sent again with those after it).
  for (size_t from = 0; from < requests.size();) {
    uint64_t first = 0;
    if (ring::Status s = send_many_locked(op, requests.subspan(from), &first); s != ring::Status::Ok) return s;
    size_t i = from;
    for (; i < requests.size(); i++) {
      if (ring::Status s = answer_locked(first + (i - from), out[i]); s != ring::Status::Ok) return s;
      if (out[i].hdr.status != proto::kMoved) continue;
      if (ring::Status s = follow_locked(out[i]); s != ring::Status::Ok) return s;
      break;
    }
    from = i;
  }
  return ring::Status::Ok;
}

void RemoteLink::pin(void* p, size_t n) {
  std::lock_guard lk(mu_);  // the link's users are serialised by mu_
  if (!link_ || !p || !n || staged_copies()) return;
  std::string err;
  void* memh = link_->register_memory(p, n, &err);
  if (!memh) return;  // copies from it then go as from pageable memory
  std::lock_guard pl(pin_mu_);
  auto [it, fresh] = pinned_.emplace(reinterpret_cast<uintptr_t>(p), Pinned{n, memh});
  if (!fresh) link_->deregister_memory(memh);
  else if (std::getenv("WORMHOLE_VERBOSE")) log("registered %zu bytes of pinned memory with UCX", n);
}

void RemoteLink::unpin(void* p) {
  std::lock_guard lk(mu_);
  std::lock_guard pl(pin_mu_);
  auto it = pinned_.find(reinterpret_cast<uintptr_t>(p));
  if (it == pinned_.end()) return;
  if (link_) link_->deregister_memory(it->second.memh);
  pinned_.erase(it);
}

void* RemoteLink::memh_for(const void* p, size_t n) const {
  std::lock_guard pl(pin_mu_);
  auto a = reinterpret_cast<uintptr_t>(p);
  auto it = pinned_.upper_bound(a);
  if (it == pinned_.begin()) return nullptr;
  --it;
  return a + n <= it->first + it->second.n ? it->second.memh : nullptr;
}

ring::Status RemoteLink::call_many_into(uint16_t op, std::span<const std::span<const uint8_t>> requests,
                                        std::span<uint8_t* const> dsts, std::span<const size_t> bytes,
                                        std::vector<wh_msg_hdr>& hdrs) {
  if (staged_copies()) {
    thread_local std::vector<ring::Message> got;  // reused: its buffers stay mapped
    if (ring::Status s = call_many(op, requests, got); s != ring::Status::Ok) return s;
    hdrs.resize(requests.size());
    for (size_t i = 0; i < requests.size(); i++) {
      hdrs[i] = got[i].hdr;
      if (got[i].hdr.status == 0 && got[i].payload.size() == bytes[i])
        std::memcpy(dsts[i], got[i].payload.data(), bytes[i]);
      else hdrs[i].len = uint32_t(got[i].payload.size());
    }
    return ring::Status::Ok;
  }
  for (auto r : requests)
    if (r.size() > max_msg_) return ring::Status::TooBig;
  std::lock_guard lk(mu_);
  hdrs.resize(requests.size());
  ring::Message m;
  for (size_t from = 0; from < requests.size();) {  // as in call_many
    uint64_t first = 0;
    if (ring::Status s = send_many_locked(op, requests.subspan(from), &first); s != ring::Status::Ok) return s;
    size_t i = from;
    for (; i < requests.size(); i++) {
      Into into{dsts[i], bytes[i], memh_for(dsts[i], bytes[i])};
      if (ring::Status s = answer_locked(first + (i - from), m, &into); s != ring::Status::Ok) return s;
      hdrs[i] = m.hdr;
      if (m.hdr.status != proto::kMoved) continue;
      if (ring::Status s = follow_locked(m); s != ring::Status::Ok) return s;
      break;
    }
    from = i;
  }
  return ring::Status::Ok;
}

ring::Status RemoteLink::answer_locked(uint64_t id, ring::Message& m, const Into* into) {
  // The answer, or silence for longer than the timeout: the server sends
  // keepalives while a long call runs, so only a lost link is silent.
  auto heard = link_->received();
  auto deadline = Clock::now() + timeout_;
  for (;;) {
    // With a destination: no more than the header ahead, so that the
    // payload can be received straight into it.
    if (!link_->fill(sizeof(wh_msg_hdr), deadline, into ? sizeof(wh_msg_hdr) : SIZE_MAX)) {
      if (link_->dead()) return broken(link_->error());
      if (link_->received() != heard) {
        heard = link_->received();
        deadline = Clock::now() + timeout_;
        continue;
      }
      return broken("no answer from the server within " + std::to_string(timeout_.count()) +
                    " ms (WORMHOLE_REMOTE_TIMEOUT_MS)");
    }
    wh_msg_hdr h;
    std::memcpy(&h, link_->buffered().data(), sizeof h);
    if (h.magic != WH_MSG_MAGIC || !(h.flags & WH_MSG_F_RESPONSE) || h.len > max_msg_ + 4096)
      return broken("the server sent garbage");
    if (into && h.opcode != WH_OP_PAD && h.call_id == id && h.status == 0 && h.len == into->n) {
      link_->consume(sizeof h);
      if (!link_->read_into(into->dst, h.len, Clock::now() + timeout_, into->memh))
        return broken(link_->error());
      m.hdr = h;
      m.payload.clear();
      auto* st = reinterpret_cast<proto::DataAreaStatus*>(data_);
      if (h.aux) __atomic_store_n(&st->output_seq, uint64_t(h.aux), __ATOMIC_RELEASE);
      return ring::Status::Ok;
    }
    if (!link_->fill(sizeof h + h.len, Clock::now() + timeout_))
      return broken(link_->dead() ? link_->error() : "a response did not complete in time");
    heard = link_->received();
    deadline = Clock::now() + timeout_;
    if (h.opcode == WH_OP_PAD) {  // the server's keepalive
      link_->consume(sizeof h + h.len);
      continue;
    }
    if (h.call_id != id) return broken("the server answered a call we did not make");
    m.hdr = h;
    auto p = link_->buffered().subspan(sizeof h, h.len);
    m.payload.assign(p.begin(), p.end());
    link_->consume(sizeof h + h.len);
    // The device output's sequence number (see output.cpp).
    auto* st = reinterpret_cast<proto::DataAreaStatus*>(data_);
    if (h.aux) __atomic_store_n(&st->output_seq, uint64_t(h.aux), __ATOMIC_RELEASE);
    return ring::Status::Ok;
  }
}

}  // namespace wh::guest
