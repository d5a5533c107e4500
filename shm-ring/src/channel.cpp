// Channel ends: claiming, calls with per-call-id replies, liveness.
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "atomics.hpp"
#include "wormhole/ring.hpp"

namespace wh::ring {

namespace {
constexpr uint64_t kPage = 4096;
uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// Ring and data offsets are computed from the validated geometry, never read
// from the (peer-writable) channel header.
struct ChanLayout {
  uint8_t* req;
  uint8_t* resp;
  uint8_t* data;
};
ChanLayout layout(const Region& r, uint32_t i) {
  const auto& g = r.geometry();
  uint8_t* b = r.channel_base(i);
  return {b + WH_CHAN_HDR_SIZE, b + WH_CHAN_HDR_SIZE + g.req_size,
          b + round_up(WH_CHAN_HDR_SIZE + uint64_t(g.req_size) + g.resp_size, kPage)};
}

void ring_bell(const WaitPolicy& pol, uint32_t* sleeping, uint32_t* bell) {
  full_fence();  // order our tail store before reading the peer's flag
  if (load_relaxed(sleeping)) {
    fetch_add(bell, 1u);
    // Wake whatever the sleeper waits on, whatever our own policy: the
    // peer chose its policy, not us (a Poll waker must still wake a futex
    // sleeper). A doorbell hook, if given, replaces the futex.
    Doorbell* db = pol.doorbell ? pol.doorbell : futex_doorbell();
    db->ring(bell);
  }
}
}  // namespace

// A futex wake only reaches sleepers under the same kernel. In a region
// shared across a VM boundary (no WH_FEAT_FUTEX) a side that wants to sleep
// polls with backoff instead, or it would oversleep a whole wait slice.
WaitPolicy effective_policy(WaitPolicy p, const wh_region_hdr& g) {
  if (p.sleep == WaitPolicy::Sleep::Futex && !(g.features & WH_FEAT_FUTEX)) p.sleep = WaitPolicy::Sleep::Poll;
  return p;
}

// ---------------------------------------------------------------- client

namespace {
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) &&
              std::atomic<uint32_t>::is_always_lock_free);
uint32_t* futex_word(std::atomic<uint32_t>& a) { return reinterpret_cast<uint32_t*>(&a); }
}  // namespace

// Waker side: state was changed with a seq_cst operation before this call.
static void wake_pending(ClientChannel::Pending& p);
// Sleeper side: announce, re-check, sleep (Dekker with wake_pending).
static void wait_pending(ClientChannel::Pending& p, uint32_t seen, std::chrono::nanoseconds t);

static void wake_pending(ClientChannel::Pending& p) {
  if (p.sleepers.load(std::memory_order_seq_cst))
    syscall(SYS_futex, futex_word(p.state), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}
static void wait_pending(ClientChannel::Pending& p, uint32_t seen, std::chrono::nanoseconds t) {
  if (t <= std::chrono::nanoseconds::zero()) return;
  timespec ts{};
  ts.tv_sec = time_t(t.count() / 1000000000);
  ts.tv_nsec = long(t.count() % 1000000000);
  p.sleepers.store(1, std::memory_order_seq_cst);
  if (p.state.load(std::memory_order_seq_cst) == seen)
    syscall(SYS_futex, futex_word(p.state), FUTEX_WAIT_PRIVATE, seen, &ts, nullptr, 0);
  p.sleepers.store(0, std::memory_order_relaxed);
}


std::unique_ptr<ClientChannel> ClientChannel::claim(Region& region, int index, std::string* err,
                                                    WaitPolicy policy) {
  const auto& g = region.geometry();
  uint32_t lo = 0, hi = g.nchan;
  if (index >= 0) {
    if (uint32_t(index) >= g.nchan) {
      if (err) *err = "channel index out of range";
      return nullptr;
    }
    lo = uint32_t(index);
    hi = lo + 1;
  }
  for (uint32_t i = lo; i < hi; i++) {
    wh_chan_hdr* ch = region.channel(i);
    if (!cas(&ch->state, uint32_t(WH_CHAN_FREE), uint32_t(WH_CHAN_CLAIMED))) continue;
    auto c = std::unique_ptr<ClientChannel>(new ClientChannel());
    c->region_ = &region;
    c->ch_ = ch;
    c->index_ = i;
    c->generation_ = fetch_add(&ch->generation, uint64_t(1)) + 1;
    c->max_msg_ = g.max_msg;
    c->policy_ = effective_policy(policy, g);
    auto l = layout(region, i);
    c->data_ = {l.data, size_t(g.data_size)};
    store_rel(&ch->req_tail, uint64_t(0));
    store_rel(&ch->req_copy_tail, uint64_t(0));
    store_rel(&ch->resp_head, uint64_t(0));
    store_rel(&ch->client_pid, uint32_t(getpid()));
    c->writer_ = RingWriter(l.req, g.req_size, &ch->req_tail, &ch->req_head, g.max_msg,
                            &ch->req_copy_tail);
    c->reader_ = RingReader(l.resp, g.resp_size, &ch->resp_tail, &ch->resp_head, g.max_msg,
                            &ch->resp_copy_tail);
    c->monitor_ = PeerMonitor(&ch->server_heartbeat, g.hb_timeout_ms);
    c->pending_.reserve(16);
    c->write_mu_.set_bias(&c->bias_);
    c->read_mu_.set_bias(&c->bias_);
    Heartbeat::instance().add(&ch->client_heartbeat, g.hb_period_ms);
    return c;
  }
  if (err) *err = "no free channel in the region";
  return nullptr;
}

ClientChannel::~ClientChannel() {
  Heartbeat::instance().remove(&ch_->client_heartbeat);
  // Say goodbye only while the channel is still ours: once the server has
  // reclaimed it (generation bumped) it may already belong to a new client.
  if (load_acq(&ch_->generation) != generation_) return;
  uint32_t s = load_acq(&ch_->state);
  if ((s == WH_CHAN_CLAIMED || s == WH_CHAN_ACTIVE) && cas(&ch_->state, s, uint32_t(WH_CHAN_CLOSED))) {
    fetch_add(&ch_->req_bell, 1u);
    if (policy_.sleep == WaitPolicy::Sleep::Doorbell && policy_.doorbell)
      policy_.doorbell->ring(&ch_->req_bell);
    else
      futex_doorbell()->ring(&ch_->req_bell);
  }
}

uint64_t ClientChannel::copy_reads() {
  std::lock_guard lk(read_mu_);
  return reader_.copy_reads();
}

std::string ClientChannel::error() const {
  std::lock_guard lk(err_mu_);
  return error_;
}

void ClientChannel::set_broken(Status s, std::string why) {
  Status expected = Status::Ok;
  if (broken_.compare_exchange_strong(expected, s)) {
    std::lock_guard lk(err_mu_);
    error_ = std::move(why);
  }
  if (s == Status::Corrupt && load_acq(&ch_->generation) == generation_)
    cas(&ch_->state, uint32_t(WH_CHAN_ACTIVE), uint32_t(WH_CHAN_POISONED));
  // Wake every waiter so it sees the failure.
  std::lock_guard lk(pending_mu_);
  for (Pending* p : pending_) {
    uint32_t zero = 0;
    p->state.compare_exchange_strong(zero, 2, std::memory_order_seq_cst);
    wake_pending(*p);
  }
}

bool ClientChannel::server_dead() {
  std::lock_guard lk(monitor_mu_);
  if (!monitor_.dead()) return false;
  if (server_lost_ && server_lost_()) {
    monitor_.reset();
    return false;
  }
  return true;
}

Status ClientChannel::wait_attached(std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    uint32_t s = load_acq(&ch_->state);
    if (s == WH_CHAN_ACTIVE) return Status::Ok;
    if (s != WH_CHAN_CLAIMED) return Status::Closed;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return Status::Timeout;
}

void ClientChannel::notify_server() { ring_bell(policy_, &ch_->server_sleeping, &ch_->req_bell); }

Status ClientChannel::write_request(wh_msg_hdr& hdr, std::span<const std::span<const uint8_t>> parts,
                                    Clock::time_point deadline, bool reader, uint64_t* end) {
  std::lock_guard lk(write_mu_);
  return write_request_held(hdr, parts, deadline, reader, end);
}

Status ClientChannel::write_request_held(wh_msg_hdr& hdr,
                                         std::span<const std::span<const uint8_t>> parts,
                                         Clock::time_point deadline, bool reader, uint64_t* end) {
  give_call_id(hdr);
  for (;;) {
    if (Status b = status(); b != Status::Ok) return b;
    Status s = writer_.write(hdr, parts);
    if (s == Status::Ok) {
      if (end) *end = writer_.position();
      notify_server();
      return s;
    }
    if (s == Status::Corrupt) {
      set_broken(s, "server moved the request ring's head out of range");
      return s;
    }
    if (s != Status::Full) return s;
    if (Status w = wait_for_room(deadline, reader); w != Status::Ok) return w;
  }
}

// Under write_mu_, the request ring full: waits until the server moved its
// head (Ok: try again) or fails. Out of line, so that the send above does
// not set up this wait's std::function on every call (GCC hoisted that
// into the fast path: a dozen instructions on the round trip).
Status ClientChannel::wait_for_room(Clock::time_point deadline, bool reader) {
  // The server may itself wait for room in the response ring: when we
  // hold the reader role, keep draining responses or neither side moves.
  if (reader && drain_responses() != Status::Ok) return status();
  // The server drains requests continuously; poll for room, watching it.
  WaitPolicy poll = policy_;
  poll.sleep = WaitPolicy::Sleep::Poll;
  uint64_t head = load_acq(&ch_->req_head);
  wait_until(poll, nullptr, nullptr, [&] { return load_acq(&ch_->req_head) != head; },
             std::min(deadline, Clock::now() + std::chrono::milliseconds(50)));
  if (load_acq(&ch_->req_head) != head) return Status::Ok;
  if (Clock::now() >= deadline) return Status::Timeout;
  uint32_t st = load_acq(&ch_->state);
  if (st != WH_CHAN_ACTIVE && st != WH_CHAN_CLAIMED) {
    set_broken(Status::Closed, "channel no longer active");
    return Status::Closed;
  }
  if (server_dead()) {
    set_broken(Status::PeerDead, "server heartbeat stopped");
    return Status::PeerDead;
  }
  return Status::Ok;
}

Status ClientChannel::post(uint16_t opcode, uint32_t aux,
                           std::span<const std::span<const uint8_t>> parts, uint16_t version,
                           std::chrono::milliseconds timeout, uint64_t* end) {
  wh_msg_hdr h{};
  h.version = version;
  h.opcode = opcode;
  h.flags = WH_MSG_F_POSTED;
  h.aux = aux;
  auto deadline = timeout.count() ? Clock::now() + timeout : Clock::time_point::max();
  LockBias::Slot* const slot = LockBias::my_slot();
  if (bias_.enter(slot)) {
    // The bias holds write_mu_ for us: an even id, as under the lock.
    Status s = write_request_held(h, parts, deadline, false, end);
    bias_.leave(slot);
    return s;
  }
  h.call_id = shared_call_id();
  return write_request(h, parts, deadline, false, end);
}

// Under read_mu_. Delivers every response in the ring to its waiter.
Status ClientChannel::drain_responses() {
  Message& m = scratch_;
  for (;;) {
    Status s = reader_.read(m);
    if (s == Status::Empty) return Status::Ok;
    if (s != Status::Ok) {
      set_broken(s, "response ring: " + reader_.error());
      return s;
    }
    if (!deliver(m)) return Status::Ok;
  }
}

// Under read_mu_. Hands m, a response just read, to its caller (m gets the
// caller's old buffer back, so callers that reuse their Message cause no
// allocation). False when it was the fast-path caller's and nobody else
// waits: alone on the channel, that reply is all there is to deliver, and
// waiters that arrive later are handed the reader role when the caller
// leaves.
bool ClientChannel::deliver(Message& m) {
  if (own_ && m.hdr.call_id == own_->call_id) {
    // The fast-path caller's own reply: nobody else looks at own_.
    std::swap(*own_->reply, m);
    own_->state.store(1, std::memory_order_relaxed);
    own_ = nullptr;
    return npending_.load(std::memory_order_relaxed) != 0;
  }
  std::lock_guard lk(pending_mu_);
  auto it = std::find_if(pending_.begin(), pending_.end(),
                         [&](Pending* p) { return p->call_id == m.hdr.call_id; });
  if (it == pending_.end()) return true;  // not ours (a stale or forged id): dropped
  Pending* p = *it;
  *it = pending_.back();
  pending_.pop_back();
  npending_.store(uint32_t(pending_.size()), std::memory_order_relaxed);
  std::swap(*p->reply, m);
  // Store and wake under pending_mu_: a waiter that sees 1 takes the lock
  // before returning, so its Pending outlives our wake.
  p->state.store(1, std::memory_order_seq_cst);
  wake_pending(*p);
  return true;
}

// pending_mu_ held: pass the reader role to one other waiter, if any.
void ClientChannel::hand_off_locked(const Pending* self) {
  for (Pending* other : pending_) {
    if (other == self) continue;
    uint32_t zero = 0;
    if (other->state.compare_exchange_strong(zero, 2, std::memory_order_seq_cst)) {
      wake_pending(*other);
      return;
    }
  }
}

// Leaves the pending table with status s, unless the reply arrived meanwhile.
Status ClientChannel::leave(Pending& p, Status s) {
  std::lock_guard lk(pending_mu_);
  uint32_t st = p.state.load(std::memory_order_acquire);
  if (st == 1) return Status::Ok;  // delivered (and already removed)
  std::erase(pending_, &p);
  npending_.store(uint32_t(pending_.size()), std::memory_order_relaxed);
  if (st == 2) hand_off_locked(&p);  // do not lose a reader role given to us
  return s;
}

// Under read_mu_: drain and wait until p's reply arrived (Ok) or a failure.
Status ClientChannel::read_replies(Pending& p, Clock::time_point deadline) {
  if (own_ == &p) {
    // The fast-path caller: the first response is read straight into its
    // Message while spinning (no staging in scratch_, no second look
    // through readable()); every cycle from seeing the response's tail to
    // the next request is on the round trip (docs/ring.md).
    Status s = Status::Empty;
    auto take = [&]() __attribute__((always_inline)) {
      s = reader_.read(*p.reply);
      return s != Status::Empty;
    };
    if (spin_until(policy_, take, std::chrono::milliseconds(50), pace_.next(policy_),
                   &pace_.polls)) {
      if (s != Status::Ok) {
        set_broken(s, "response ring: " + reader_.error());
        return s;
      }
      if (p.reply->hdr.call_id == p.call_id) {
        p.state.store(1, std::memory_order_relaxed);
        own_ = nullptr;
        // Others wait too: deliver what has come for them before leaving
        // (the reader role is handed on as we go).
        if (npending_.load(std::memory_order_relaxed) != 0 && drain_responses() != Status::Ok)
          return status();
        return Status::Ok;
      } else {
        std::swap(scratch_, *p.reply);  // another caller's: delivered as drained
        deliver(scratch_);
      }
    }
  }
  // The first round goes straight to polling: readable() answers at once
  // when responses wait, and a read() that finds the ring empty first cost
  // a round trip about 10 ns (measured with tests/ring/bench/ab/ab.sh).
  for (bool first = true;; first = false) {
    if (!first && drain_responses() != Status::Ok) return status();
    if (p.state.load(std::memory_order_acquire) == 1) return Status::Ok;
    if (deadline != Clock::time_point::max() && Clock::now() >= deadline)
      return Status::Timeout;  // replies keep coming, but not ours
    auto ready = [&] { return reader_.readable(); };
    bool got = spin_until(policy_, ready, std::chrono::milliseconds(50));
    if (!got) {
      WaitPolicy rest = policy_;
      rest.spin_iters = 0;
      auto slice = std::min(deadline, Clock::now() + std::chrono::milliseconds(50));
      got = wait_until(rest, &ch_->client_sleeping, &ch_->resp_bell, ready, slice);
    }
    if (!got) {
      if (server_dead()) {
        set_broken(Status::PeerDead, "server heartbeat stopped");
        return Status::PeerDead;
      }
      uint32_t st = load_acq(&ch_->state);
      if (st != WH_CHAN_ACTIVE && st != WH_CHAN_CLAIMED) {
        set_broken(Status::Closed, "channel no longer active");
        return Status::Closed;
      }
      if (Clock::now() >= deadline) return Status::Timeout;
    }
  }
}

// Slow path: p is in pending_; some other thread may be the reader.
Status ClientChannel::wait_reply(Pending& p, Clock::time_point deadline) {
  for (;;) {
    if (p.state.load(std::memory_order_acquire) == 1) {
      // Delivered by another thread: sync with its wake before p dies.
      std::lock_guard lk(pending_mu_);
      return Status::Ok;
    }
    if (Status b = status(); b != Status::Ok) return leave(p, b);
    if (read_mu_.try_lock()) {
      Status result = read_replies(p, deadline);
      read_mu_.unlock();
      std::lock_guard lk(pending_mu_);
      hand_off_locked(&p);
      if (p.state.load(std::memory_order_acquire) == 1) return Status::Ok;
      if (result != Status::Ok) {
        std::erase(pending_, &p);
        npending_.store(uint32_t(pending_.size()), std::memory_order_relaxed);
        return result;
      }
      continue;
    }
    // Someone else is reading: sleep until it delivers, hands over, the
    // channel breaks, or our deadline passes. Wake up now and then to take
    // over reading if the reader left without handing over.
    auto now = Clock::now();
    if (now >= deadline) return leave(p, Status::Timeout);
    wait_pending(p, 0, std::min<Clock::duration>(deadline - now, std::chrono::milliseconds(50)));
    uint32_t two = 2;
    p.state.compare_exchange_strong(two, 0, std::memory_order_acq_rel);
  }
}

void ClientChannel::wake_reader() {
  std::lock_guard lk(pending_mu_);
  hand_off_locked(nullptr);
}

Status ClientChannel::call_queued(wh_msg_hdr& h, Pending& p,
                                  std::span<const std::span<const uint8_t>> parts,
                                  Clock::time_point deadline) {
  {
    std::lock_guard lk(pending_mu_);
    pending_.push_back(&p);
    npending_.store(uint32_t(pending_.size()), std::memory_order_seq_cst);
  }
  Status s = write_request(h, parts, deadline, false);
  if (s != Status::Ok) return leave(p, s);
  return wait_reply(p, deadline);
}

// ---------------------------------------------------------------- server

std::unique_ptr<ServerChannel> ServerChannel::attach(Region& region, uint32_t index,
                                                     std::string* err, WaitPolicy policy) {
  return open(region, index, WH_CHAN_CLAIMED, err, policy);
}

bool ServerChannel::moved_on() const {
  return load_acq(&ch_->req_head) != reader_.position() || load_acq(&ch_->resp_tail) != writer_.position();
}

std::unique_ptr<ServerChannel> ServerChannel::take_over(Region& region, uint32_t index, std::string* err) {
  return open(region, index, WH_CHAN_ACTIVE, err, WaitPolicy::from_env());
}

std::unique_ptr<ServerChannel> ServerChannel::open(Region& region, uint32_t index, uint32_t from,
                                                   std::string* err, WaitPolicy policy) {
  const auto& g = region.geometry();
  if (index >= g.nchan) {
    if (err) *err = "channel index out of range";
    return nullptr;
  }
  wh_chan_hdr* ch = region.channel(index);
  if (!cas(&ch->state, from, uint32_t(WH_CHAN_ACTIVE))) {
    if (err) *err = from == WH_CHAN_ACTIVE ? "channel is not active" : "channel is not claimed by a client";
    return nullptr;
  }
  auto c = std::unique_ptr<ServerChannel>(new ServerChannel());
  c->region_ = &region;
  c->ch_ = ch;
  c->index_ = index;
  c->generation_ = load_acq(&ch->generation);
  c->policy_ = effective_policy(policy, g);
  auto l = layout(region, index);
  c->data_ = {l.data, size_t(g.data_size)};
  // The response copy is ours; the request copy the client may be writing.
  store_rel(&ch->resp_copy_tail, uint64_t(0));
  c->reader_ = RingReader(l.req, g.req_size, &ch->req_tail, &ch->req_head, g.max_msg,
                          &ch->req_copy_tail);
  c->writer_ = RingWriter(l.resp, g.resp_size, &ch->resp_tail, &ch->resp_head, g.max_msg,
                          &ch->resp_copy_tail);
  if (from == WH_CHAN_ACTIVE) {
    c->reader_.resume();
    c->writer_.resume();
  }
  c->monitor_ = PeerMonitor(&ch->client_heartbeat, g.hb_timeout_ms);
  Heartbeat::instance().add(&ch->server_heartbeat, g.hb_period_ms);
  return c;
}

ServerChannel::~ServerChannel() { Heartbeat::instance().remove(&ch_->server_heartbeat); }

uint32_t ServerChannel::client_pid() const { return load_acq(&ch_->client_pid); }

Status ServerChannel::fail(Status s, std::string why) {
  if (broken_ == Status::Ok) {
    broken_ = s;
    error_ = std::move(why);
  }
  if (s == Status::Corrupt) cas(&ch_->state, uint32_t(WH_CHAN_ACTIVE), uint32_t(WH_CHAN_POISONED));
  return s;
}

bool ServerChannel::peer_dead() { return monitor_.dead(); }

void ServerChannel::end_session() {
  if (broken_ == Status::Ok) {
    broken_ = Status::Closed;
    error_ = "session ended by the server";
  }
  cas(&ch_->state, uint32_t(WH_CHAN_ACTIVE), uint32_t(WH_CHAN_POISONED));
  notify_client();
}

void ServerChannel::set_peer_timeout(uint32_t ms) {
  monitor_ = ms ? PeerMonitor(&ch_->client_heartbeat, ms) : PeerMonitor();
}

Status ServerChannel::try_recv(Message& out) {
  if (broken_ != Status::Ok) return broken_;
  Status s = reader_.read(out);
  if (s == Status::Corrupt) return fail(s, "request ring: " + reader_.error());
  if (s == Status::Empty) {
    uint32_t st = load_acq(&ch_->state);
    if (st != WH_CHAN_ACTIVE) return fail(Status::Closed, "client closed the channel");
  }
  return s;
}

Status ServerChannel::recv(Message& out, std::chrono::microseconds timeout) {
  // Straight to polling, as ClientChannel::read_replies does: ready() is
  // true at once when a request waits (or the channel left ACTIVE).
  if (broken_ != Status::Ok) return broken_;
  // Spin first, without reading the clock (the fast path), polling with
  // read() itself: a request is taken the moment its tail shows, with no
  // second look through readable() and try_recv (each cycle from seeing the
  // tail to storing the reply is on the round trip, docs/ring.md).
  Status s = Status::Empty;
  auto take = [&]() __attribute__((always_inline)) {
    s = reader_.read(out);
    return s != Status::Empty || load_acq(&ch_->state) != WH_CHAN_ACTIVE;
  };
  if (spin_until(policy_, take, std::min<Clock::duration>(timeout, std::chrono::milliseconds(50)),
                 pace_.next(policy_), &pace_.polls)) {
    if (s == Status::Ok) return s;
    s = try_recv(out);  // a poisoned reader or a closed channel: reported there
    if (s != Status::Empty) return s;
  }
  auto ready = [&] { return reader_.readable() || load_acq(&ch_->state) != WH_CHAN_ACTIVE; };
  WaitPolicy rest = policy_;
  rest.spin_iters = 0;
  auto deadline = Clock::now() + timeout;
  for (;;) {
    auto slice = std::min(deadline, Clock::now() + std::chrono::milliseconds(50));
    wait_until(rest, &ch_->server_sleeping, &ch_->req_bell, ready, slice);
    s = try_recv(out);
    if (s != Status::Empty) return s;
    if (monitor_.dead()) return fail(Status::PeerDead, "client heartbeat stopped");
    if (Clock::now() >= deadline) return Status::Timeout;
  }
}

void ServerChannel::notify_client() {
  ring_bell(policy_, &ch_->client_sleeping, &ch_->resp_bell);
}

// reply() when the first write did not go in: kept out of the fast path,
// whose every instruction between reading a request and publishing its
// answer is on the round trip (this one builds a std::function).
Status ServerChannel::reply_slow(const wh_msg_hdr& h, std::span<const std::span<const uint8_t>> parts,
                                 Status s, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    if (s == Status::Ok) {
      notify_client();
      return s;
    }
    if (s == Status::Corrupt) return fail(s, "client moved the response ring's head out of range");
    if (s != Status::Full) return s;
    uint64_t head = load_acq(&ch_->resp_head);
    WaitPolicy poll = policy_;
    poll.sleep = WaitPolicy::Sleep::Poll;
    bool moved = wait_until(poll, nullptr, nullptr, [&] { return load_acq(&ch_->resp_head) != head; },
                            std::min(deadline, Clock::now() + std::chrono::milliseconds(50)));
    if (!moved && monitor_.dead()) return fail(Status::PeerDead, "client heartbeat stopped");
    if (!moved && Clock::now() >= deadline)
      return fail(Status::Timeout, "client does not drain its responses");
    s = writer_.write(h, parts);
  }
}

void ServerChannel::reclaim() {
  Heartbeat::instance().remove(&ch_->server_heartbeat);
  store_rel(&ch_->req_head, uint64_t(0));
  store_rel(&ch_->resp_tail, uint64_t(0));
  store_rel(&ch_->req_tail, uint64_t(0));
  store_rel(&ch_->resp_copy_tail, uint64_t(0));
  store_rel(&ch_->req_copy_tail, uint64_t(0));
  store_rel(&ch_->resp_head, uint64_t(0));
  store_rel(&ch_->server_sleeping, 0u);
  store_rel(&ch_->client_sleeping, 0u);
  store_rel(&ch_->client_pid, 0u);
  fetch_add(&ch_->generation, uint64_t(1));
  reader_.reset();
  writer_.reset();
  store_rel(&ch_->state, uint32_t(WH_CHAN_FREE));
  broken_ = Status::Closed;
}

}  // namespace wh::ring
