#include "server.hpp"

#include "wormhole/ptx/engine.hpp"

#include <grp.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <utility>
#include <functional>
#include <vector>

#include "gate_vm.hpp"
#include "warn_limiter.hpp"
#include "wormhole/proto/dispatch.hpp"
#include "wormhole/fd_pass.hpp"
#include "wormhole/ring.hpp"

namespace wh::server {

using namespace std::chrono_literals;

Server::Server(ServerConfig cfg, Backend& backend) : cfg_(std::move(cfg)), backend_(backend) {
  for (auto& [uid, bytes] : cfg_.uid_quota_bytes) uid_budgets_[uid] = std::make_shared<SharedQuota>(bytes);
}

Server::~Server() {
  stop();
  if (admin_thread_.joinable()) admin_thread_.join();
  stop_metrics();
  std::lock_guard lk(threads_mu_);
  for (auto& t : threads_)
    if (t.t.joinable()) t.t.join();
}

void Server::stop() {
  if (stopping_.exchange(true)) return;
  if (listen_fd_ >= 0) shutdown(listen_fd_, SHUT_RDWR);
}

std::list<Server::Live>::iterator Server::watch(Session& s, Live info) {
  std::lock_guard lk(live_mu_);
  if (stopping_) s.cancel();
  info.s = &s;
  return live_.insert(live_.end(), std::move(info));
}

bool Server::kill_session(uint64_t id) {
  std::lock_guard lk(live_mu_);
  for (Live& l : live_)
    if (l.s->id() == id) {
      if (l.killed) l.killed->store(true);
      l.s->cancel();  // a kernel it runs stops now
      return true;
    }
  return false;
}

void Server::unwatch(std::list<Live>::iterator it) {
  std::lock_guard lk(live_mu_);
  live_.erase(it);
}

// The session thread is busy inside the kernel, so it cannot notice its
// client leaving; this runs from the accept loop, every 200 ms.
void Server::cancel_orphaned_kernels(bool all) {
  std::lock_guard lk(live_mu_);
  for (Live& l : live_)
    if (all || stopping_ || (l.gone && l.gone())) l.s->cancel();
}

void Server::track(std::function<void()> fn) {
  auto done = std::make_shared<std::atomic<bool>>(false);
  std::lock_guard lk(threads_mu_);
  for (auto it = threads_.begin(); it != threads_.end();) {
    if (it->done->load()) {
      it->t.join();
      it = threads_.erase(it);
    } else {
      ++it;
    }
  }
  threads_.push_back({std::thread([fn = std::move(fn), done] {
                        fn();
                        done->store(true);
                      }),
                      done});
}

namespace {

enum class End { ClientClosed, ClientDied, Corrupt, Violations, Stopping, ReplyFailed, Killed, Migrate, Migrated };
const char* to_string(End e) {
  switch (e) {
    case End::ClientClosed: return "client closed";
    case End::ClientDied: return "client died";
    case End::Corrupt: return "channel corrupt";
    case End::Violations: return "too many malformed requests";
    case End::Stopping: return "server stopping";
    case End::ReplyFailed: return "client does not take its replies";
    case End::Killed: return "killed by wormholectl";
    case End::Migrate: return "migrating";
    case End::Migrated: return "moved to another server";
  }
  return "?";
}

// What a session's kernels did, logged when it ends (sim device: with the
// thread-instructions its kernels executed and their rate).
void log_kernel_totals(uint64_t sid, const SessionCounters& c) {
  const uint64_t n = c.kernels.load();
  if (!n) return;
  const double s = double(c.kernel_ns.load()) / 1e9;
  if (const uint64_t ti = c.thread_instructions.load())
    spdlog::info("session {}: {} kernel launches, {:.3f} s in them; {} thread-instructions, {:.1f} M/s", sid, n, s, ti,
                 s > 0 ? double(ti) / s / 1e6 : 0.0);
  else
    spdlog::info("session {}: {} kernel launches, {:.3f} s in them", sid, n, s);
  const auto cs = wh::ptx::compile_stats();
  if (cs.kernels)
    spdlog::info("PTX compiler (server total): {} kernels, {} instructions compiled to native code in {:.3f} s", cs.kernels,
                 cs.instructions, cs.seconds);
  if (cs.shared_loads)
    spdlog::info("compile cache (server total): {} module loads found their module parsed, and compiled as far as it ran",
                 cs.shared_loads);
}

// One request read from a channel's ring: handled, then answered on the
// ring unless posted. `before_answer` runs between the two (the gate's
// state page must be current when the answer arrives). False: the answer
// could not be written.
template <class BeforeAnswer>
bool ring_request(ring::ServerChannel& ch, Session& s, const ring::Message& msg, proto::DispatchResult& res,
                  BeforeAnswer&& before_answer) {
  const auto& h = msg.hdr;
  if (h.version != proto::kVersion || (h.flags & WH_MSG_F_RESPONSE)) {
    res.status = proto::kBadRequest;
    res.fixed.clear();
    res.tail.clear();
    s.note_violation();  // counts toward the limit like any malformed request
    s.publish_handled(ch.read_pos());
    before_answer();
    if (!(h.flags & WH_MSG_F_POSTED)) {
      std::span<const uint8_t> none;
      std::array<std::span<const uint8_t>, 1> parts{none};
      ch.reply(h.call_id, h.opcode, res.status, 0, parts);
    }
    return true;
  }
  bool respond = s.handle(h.opcode, h.flags, msg.payload, ch.max_msg(), res);
  s.publish_handled(ch.read_pos());
  before_answer();
  if (respond) {
    std::array<std::span<const uint8_t>, 2> parts{std::span<const uint8_t>(res.fixed),
                                                 std::span<const uint8_t>(res.tail)};
    if (ch.reply(h.call_id, h.opcode, res.status, 0, parts) != ring::Status::Ok) return false;
  }
  s.account();  // off the round trip
  return true;
}

// The request loop of one session, shared by socket clients and VM channels.
// `migrate`: an operator asked to move the session (socket clients): the
// loop returns between two requests.
End serve_channel(ring::ServerChannel& ch, Session& s, uint32_t max_violations,
                  const std::atomic<bool>& stopping, const std::function<bool()>& client_gone,
                  const std::atomic<bool>& killed, const std::atomic<bool>* migrate = nullptr) {
  ring::Message msg;
  proto::DispatchResult res;
  for (;;) {
    if (killed.load(std::memory_order_relaxed)) return End::Killed;
    if (migrate && migrate->load(std::memory_order_relaxed)) return End::Migrate;
    ring::Status st = ch.recv(msg, 100ms);
    if (st == ring::Status::Timeout) {
      if (stopping) return End::Stopping;
      if (client_gone && client_gone()) return End::ClientDied;
      continue;
    }
    if (st == ring::Status::Closed) return End::ClientClosed;
    if (st == ring::Status::PeerDead) return End::ClientDied;
    if (st != ring::Status::Ok) return End::Corrupt;
    if (!ring_request(ch, s, msg, res, [] {})) return End::ReplyFailed;
    if (s.violations() > max_violations) return End::Violations;
  }
}

// What the gate publishes for a channel: its owner's generation, the
// requests handled for it (ring and gate), and what a MemGetInfo or
// StreamQuery(0) would answer now.
wh_gate_chan_state gate_record(Session& s, uint64_t generation, uint64_t handled) {
  Session::Snapshot sn = s.snapshot();
  wh_gate_chan_state r{};
  r.generation = generation;
  r.handled = handled;
  r.mem_free = sn.mem_free;
  r.mem_total = sn.mem_total;
  r.pending_error = sn.pending_error;
  r.idle = sn.idle ? 1 : 0;
  return r;
}

bool same_answers(const wh_gate_chan_state& a, const wh_gate_chan_state& b) {
  return a.mem_free == b.mem_free && a.mem_total == b.mem_total && a.pending_error == b.pending_error &&
         a.idle == b.idle;
}

// The request loop of a VM channel whose process may also call through the
// exitless gate (docs/exitless.md): one thread serves the ring and the
// channel's gate queue. A gate request waits until the ring has been
// consumed up to its ring_barrier, so requests the process posted before
// it run first. Every handled request, from either path, is counted in the
// channel's published record, rewritten before its answer leaves: a
// process holding an answer finds the record current.
//
// `req_head` is the ring's consumer index in the region: our own
// ServerChannel writes it after each record. The guest can overwrite it,
// but that only moves its own requests' order; a barrier that the ring
// never reaches is served once the ring is found drained, so no guest
// value stalls or spins the loop.
End serve_gate_channel(ring::ServerChannel& ch, Session& s, GateVm& gate, uint32_t chan, uint64_t generation,
                       const uint64_t* req_head, const ring::WaitPolicy& pol, uint32_t max_violations,
                       const std::atomic<bool>& stopping, Stats& stats, const std::atomic<bool>& killed) {
  gate::SessionQueue& q = gate.queue(chan);
  uint64_t handled = 0;
  wh_gate_chan_state last = gate_record(s, generation, handled);
  gate.publish(chan, last);
  auto publish = [&] {
    last = gate_record(s, generation, handled);
    gate.publish(chan, last);
  };
  const uint32_t gate_max = std::min<uint32_t>(ch.max_msg(), WH_GATE_RESP_PAYLOAD_MAX);
  std::vector<uint8_t> out;
  proto::DispatchResult res;
  auto serve_gate = [&](const gate::Window::Request& rq) {
    const wh_msg_hdr& h = rq.hdr;  // validated by Window::take: a request, len == payload
    wh_msg_hdr rh{};
    rh.magic = WH_MSG_MAGIC;
    rh.version = proto::kVersion;
    rh.opcode = h.opcode;
    rh.flags = WH_MSG_F_RESPONSE;
    rh.call_id = h.call_id;
    out.clear();
    if (h.version != proto::kVersion) {
      s.note_violation();
      rh.status = proto::kBadRequest;
    } else {
      s.handle(h.opcode, h.flags, rq.payload, gate_max, res);
      rh.status = res.status;
      out.insert(out.end(), res.fixed.begin(), res.fixed.end());
      out.insert(out.end(), res.tail.begin(), res.tail.end());
    }
    handled++;
    publish();
    gate.respond(rq, 0, &rh, out);
    s.account();
    stats.gate_calls++;
  };
  auto head = [req_head] { return __atomic_load_n(req_head, __ATOMIC_ACQUIRE); };
  auto serve_due = [&](uint64_t drained_before) {
    gate::Window::Request rq;
    if (!q.pop_ready(head(), drained_before, &rq)) return false;
    serve_gate(rq);
    return true;
  };
  ring::Message msg;
  ring::Status st = ring::Status::Empty;
  bool have = false;  // msg holds a ring request not handled yet
  // While waiting, the ring is looked at with try_recv (validated, not raw
  // indices a guest could make disagree forever); a request read there is
  // kept in msg.
  auto ready = [&] {
    if (!q.empty() || (gate.poll() > 0 && !q.empty())) return true;
    st = ch.try_recv(msg);
    have = st == ring::Status::Ok;
    return st != ring::Status::Empty;
  };
  for (;;) {
    if (killed.load(std::memory_order_relaxed)) return End::Killed;
    if (!have) {
      // Gate requests the ring has caught up with go first (nothing read
      // from the ring is unhandled here, so the head is exact). Taking new
      // ones from the window ourselves is cheaper than waiting for the
      // poller thread to be scheduled.
      gate.poll();
      if (serve_due(0)) {
        if (s.violations() > max_violations) return End::Violations;
        continue;
      }
      const uint64_t queued = q.pushed();  // before looking at the ring: see SessionQueue::pop_ready
      st = ch.try_recv(msg);
      have = st == ring::Status::Ok;
      if (st == ring::Status::Empty) {
        if (serve_due(queued)) {  // the ring is drained
          if (s.violations() > max_violations) return End::Violations;
          continue;
        }
        if (!ring::wait_until(pol, nullptr, nullptr, ready, ring::Clock::now() + 100ms)) {
          if (stopping) return End::Stopping;
          if (ch.peer_dead()) return End::ClientDied;
          // Idle: other sessions' allocations move the device's free
          // memory and posted work completes; keep the record truthful.
          wh_gate_chan_state now = gate_record(s, generation, handled);
          if (!same_answers(now, last)) {
            last = now;
            gate.publish(chan, last);
          }
          continue;
        }
        if (st == ring::Status::Empty) continue;  // woken by a gate request
      }
      if (!have) {
        if (st == ring::Status::Closed) return End::ClientClosed;
        if (st == ring::Status::PeerDead) return End::ClientDied;
        return End::Corrupt;
      }
    }
    have = false;
    handled++;
    if (!ring_request(ch, s, msg, res, publish)) return End::ReplyFailed;
    if (s.violations() > max_violations) return End::Violations;
  }
}

// Exactly n bytes within timeout_ms per wait. *passed (when given): the
// descriptors that came with them (a resuming client's region, then its
// grown pinned segments), at most kMaxMovedSegments + 1; any other is closed.
bool read_full(int fd, void* buf, size_t n, int timeout_ms, std::vector<int>* passed = nullptr) {
  auto* p = static_cast<uint8_t*>(buf);
  while (n) {
    pollfd pfd{fd, POLLIN, 0};
    if (poll(&pfd, 1, timeout_ms) <= 0) return false;
    int got[kMaxMovedSegments + 1];
    size_t ngot = 0;
    ssize_t r = ring::recv_with_fds(fd, p, n, got, std::size(got), &ngot);
    for (size_t i = 0; i < ngot; i++) {
      if (passed && passed->size() <= kMaxMovedSegments) passed->push_back(got[i]);
      else close(got[i]);
    }
    if (r <= 0) return false;
    p += r;
    n -= size_t(r);
  }
  return true;
}

}  // namespace

void Server::serve_socket_client(int fd) {
  proto::Hello hello{};
  proto::HelloReply rep{};
  rep.magic = proto::kHelloMagic;
  auto refuse = [&](int32_t status, const std::string& why) {
    rep.status = status;
    std::snprintf(rep.message, sizeof rep.message, "%s", why.c_str());
    ring::send_with_fd(fd, &rep, sizeof rep, -1);
    static WarnLimiter limit;
    limit.warn("refused a client: {}", why);
    close(fd);
  };
  // A resuming client sends its region (and its grown pinned segments) with the hello.
  std::vector<int> passed;
  auto close_passed = [&] {
    for (int x : passed) close(x);
    passed.clear();
  };
  if (!read_full(fd, &hello, sizeof hello, 2000, &passed) || hello.magic != proto::kHelloMagic) {
    close_passed();
    return refuse(cudaErrorInvalidValue, "bad hello");
  }
  if (hello.reserved & proto::kHelloResume) {
    proto::ResumeHello rh{};
    ucred rc{};
    socklen_t rl = sizeof rc;
    const bool ok = read_full(fd, &rh, sizeof rh, 2000) && getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &rc, &rl) == 0;
    if (!ok) {
      close_passed();
      return refuse(cudaErrorInvalidValue, "bad resume hello");
    }
    resume_client(fd, rc, rh, passed);
    close_passed();
    return;
  }
  close_passed();  // only a resuming client sends any
  if (draining_) return refuse(cudaErrorDevicesUnavailable, "the server is draining (wormholectl drain)");
  // Who the client is, from the kernel (the hello's pid is the client's word).
  ucred cred{};
  socklen_t cl = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0) cred.pid = 0, cred.uid = uid_t(-1);
  if (hello.max_version < proto::kMinVersion || hello.min_version > proto::kVersion)
    return refuse(cudaErrorInsufficientDriver, "no common protocol version");
  rep.version = std::min<uint16_t>(hello.max_version, proto::kVersion);

  ring::RegionConfig rc;
  rc.nchan = 1;
  rc.data_size = proto::kPinnedHeapOffset + cfg_.pinned_bytes;
  rc.hb_timeout_ms = cfg_.heartbeat_timeout_ms;
  std::string err;
  auto region = ring::Region::create_memfd("wormhole-client", rc, &err);
  if (!region) return refuse(cudaErrorMemoryAllocation, "region: " + err);
  ContextLimits lim;
  lim.memory_quota = cfg_.quota_bytes;
  if (auto b = uid_budgets_.find(uint32_t(cred.uid)); cred.uid != uid_t(-1) && b != uid_budgets_.end())
    lim.shared = b->second;  // every session of this uid draws on one budget
  if (cred.uid != uid_t(-1)) lim.tenant = "uid:" + std::to_string(cred.uid);
  auto ctx = backend_.create_context(0, lim, &err);
  if (!ctx) return refuse(cudaErrorDevicesUnavailable, "context: " + err);

  uint64_t sid = next_session_++;
  rep.status = 0;
  rep.channel = 0;
  rep.session_id = sid;
  if (!ring::send_with_fd(fd, &rep, sizeof rep, region->fd())) {
    close(fd);
    return;
  }
  uint8_t claimed = 0;
  std::unique_ptr<ring::ServerChannel> ch;
  if (read_full(fd, &claimed, 1, 5000)) ch = ring::ServerChannel::attach(*region, 0, &err);
  if (!ch) {
    static WarnLimiter limit;
    limit.warn("session {}: client never claimed its channel ({})", sid, err);
    close(fd);
    return;
  }
  auto ss = std::make_unique<SocketSession>();
  ss->fd = fd;
  ss->cred = cred;
  ss->region = std::move(region);
  ss->ch = std::move(ch);
  ss->pinned = std::make_unique<SocketPinnedSource>(fd, uint32_t(cred.uid), sid, pinned_budget_);
  ss->session = std::make_unique<Session>(sid, backend_, std::move(ctx), ss->ch->data(), stats_);
  spdlog::info("session {}: client pid {} uid {} connected ({} backend)", sid, int64_t(cred.pid), int64_t(cred.uid),
               backend_.name());
  run_socket_session(std::move(ss));
}

Server::SocketSession::~SocketSession() {
  session.reset();  // before the pinned segments and the region it uses
  pinned.reset();
  ch.reset();
  region.reset();
  if (pidfd >= 0) close(pidfd);
  if (fd >= 0) close(fd);
}

// A socket client's session, served until it ends or moves to another
// server (wormholectl migrate).
void Server::run_socket_session(std::unique_ptr<SocketSession> ss) {
  Session& session = *ss->session;
  const uint64_t sid = session.id();
  const ucred cred = ss->cred;
  const int fd = ss->fd;
  // A host process lives as long as its pid (a pidfd becomes readable when
  // it exits) and its end of the socket: a process stopped by SIGSTOP or a
  // debugger keeps its session however long its heartbeat stands still.
  ss->pidfd = cred.pid > 0 ? int(syscall(SYS_pidfd_open, pid_t(cred.pid), 0)) : -1;
  const int pidfd = ss->pidfd;
  ss->ch->set_peer_timeout(0);
  live_sessions_++;
  // Pinned memory past the data area: segments handed over this socket,
  // within the uid's budget (none where the budget is 0).
  if (cfg_.pinned_budget_bytes && cred.uid != uid_t(-1)) session.set_pinned_source(ss->pinned.get());
  auto gone = [fd, pidfd] {
    pollfd p[2] = {{fd, POLLIN | POLLRDHUP, 0}, {pidfd, POLLIN, 0}};
    if (poll(p, pidfd >= 0 ? 2 : 1, 0) <= 0) return false;
    return (p[0].revents & (POLLHUP | POLLRDHUP | POLLERR)) || (pidfd >= 0 && p[1].revents);
  };
  std::atomic<bool> killed{false}, migrate{false};
  Live info{};
  info.gone = gone;
  info.pid = cred.pid;
  info.uid = cred.uid == uid_t(-1) ? -1 : int64_t(cred.uid);
  info.killed = &killed;
  info.migrate = &migrate;
  auto watched = watch(session, std::move(info));
  auto take = [&] {
    std::lock_guard lk(live_mu_);
    migrate = false;
    return std::exchange(watched->migration, nullptr);
  };
  End why;
  for (;;) {
    why = serve_channel(*ss->ch, session, cfg_.max_violations, stopping_, gone, killed, &migrate);
    if (why != End::Migrate) break;
    std::shared_ptr<Migration> m = take();
    if (!m) continue;
    if (m->kind == Migration::Kind::Resume) {
      m->finish("session " + std::to_string(sid) + " is not held (wormholectl checkpoint holds one)", 0);
      continue;
    }
    if (m->kind == Migration::Kind::Move) {
      bool lost = false;
      if (migrate_out(*ss, *m, &lost)) {
        why = End::Migrated;
        break;
      }
      if (!lost) continue;
      why = End::Killed;  // the client's next call fails at once, as when a server dies
      break;
    }
    if (!checkpoint_out(*ss, *m)) continue;
    // Held: no request is read until this server goes (the client then
    // resumes from the file on the next one) or an operator resumes it here.
    why = End::Migrate;
    while (why == End::Migrate) {
      std::this_thread::sleep_for(50ms);
      if (killed) why = End::Killed;
      else if (stopping_) why = End::Stopping;
      else if (gone()) why = End::ClientDied;
      else if (migrate && (m = take())) {
        if (m->kind != Migration::Kind::Resume) {
          m->finish("session " + std::to_string(sid) + " is held for a restore (wormholectl resume it first)", 0);
          continue;
        }
        auto* st = reinterpret_cast<proto::DataAreaStatus*>(ss->ch->data().data());
        __atomic_store_n(&st->held, uint32_t(0), __ATOMIC_RELEASE);
        spdlog::info("session {}: resumed here", sid);
        m->finish("", sid);
        break;
      }
    }
    if (why != End::Migrate) break;
  }
  {
    // A migration asked for while the session ended is answered now.
    std::lock_guard lk(live_mu_);
    if (auto m = std::exchange(watched->migration, nullptr)) m->finish("the session ended (" + std::string(to_string(why)) + ")", 0);
  }
  unwatch(watched);
  if (why == End::Killed) ss->ch->end_session();  // its next call fails at once
  if (why == End::Migrated) {
    spdlog::info("session {}: moved to another server", sid);
  } else {
    spdlog::info("session {}: ended ({}); freeing {} bytes of device memory", sid, to_string(why),
                 session.device_bytes());
    log_kernel_totals(sid, session.counters());
  }
  ss.reset();
  live_sessions_--;
}

std::unique_ptr<ring::Region> Server::open_vm_region(const VmSpec& vm, std::string* err) {
  ring::RegionConfig rc;
  rc.nchan = vm.channels;
  rc.features = 0;  // the guest runs another kernel: no futex across the boundary
  rc.data_size = proto::kPinnedHeapOffset + cfg_.pinned_bytes;
  rc.hb_timeout_ms = cfg_.heartbeat_timeout_ms;
  // QEMU maps the file as the guest's BAR when the VM starts, and a BAR
  // cannot grow: when the file already exists, fit the channels' data
  // areas (their pinned heaps) into its size instead of growing it.
  struct stat st{};
  if (stat(vm.path.c_str(), &st) == 0 && st.st_size > 0 &&
      ring::Region::required_size(rc) > uint64_t(st.st_size)) {
    ring::RegionConfig probe = rc;
    probe.data_size = 0;
    uint64_t fixed = ring::Region::required_size(probe);
    uint64_t per = uint64_t(st.st_size) > fixed ? (uint64_t(st.st_size) - fixed) / rc.nchan : 0;
    per &= ~uint64_t(4095);
    if (per < proto::kPinnedHeapOffset + (1u << 20)) {
      *err = fmt::format("{} ({} MiB) is too small for {} channels; each needs at least {} MiB", vm.path,
                         st.st_size >> 20, rc.nchan,
                         (fixed / rc.nchan + proto::kPinnedHeapOffset + (1u << 20)) >> 20);
      return nullptr;
    }
    rc.data_size = per;
  }
  return ring::Region::create_file(vm.path, rc, err);
}

void Server::serve_vm(const VmSpec& vm, GateVm* gate, std::shared_ptr<ring::Region> region) {
  std::string err;
  spdlog::info("vm {}: serving {} channels in {} ({} MiB)", vm.name, vm.channels, vm.path,
               region->size() >> 20);
  if (gate) gate->start(stopping_);
  // Gate sessions wait on the ring and their gate queue together, by polling
  // (no futex across the VM boundary anyway).
  ring::WaitPolicy gate_wait = ring::effective_policy(ring::WaitPolicy::from_env(), region->geometry());
  gate_wait.sleep = ring::WaitPolicy::Sleep::Poll;
  std::vector<std::thread> sessions;
  std::vector<std::atomic<bool>> busy(vm.channels);
  std::vector<uint32_t> unsettled(vm.channels, 0);
  while (!stopping_) {
    for (uint32_t i = 0; i < vm.channels; i++) {
      if (busy[i].load() || draining_) continue;
      auto* chh = region->channel(i);
      if (__atomic_load_n(&chh->state, __ATOMIC_ACQUIRE) != WH_CHAN_CLAIMED) {
        unsettled[i] = 0;
        continue;
      }
      bool gated = gate && i < gate->nchan();
      uint64_t gen = 0;
      if (gated) {
        // The guest binds its gate slot with the generation its claim
        // produced, as soon as it sees the channel ACTIVE; so BINDs for it
        // must be accepted (and its record published) before we attach.
        // A claim flips the state first and bumps the generation after; it
        // stores client_pid last (release), so once that is set the
        // generation is the claimer's. A claimer that never finishes (it
        // died, or it is hostile) is attached after ~0.5 s anyway, as
        // before: its generation then only risks its own gate binding.
        if (__atomic_load_n(&chh->client_pid, __ATOMIC_ACQUIRE) == 0 && ++unsettled[i] < 250) continue;
        gen = __atomic_load_n(&chh->generation, __ATOMIC_ACQUIRE);
      }
      unsettled[i] = 0;
      ContextLimits lim;
      lim.memory_quota = cfg_.quota_bytes;
      lim.tenant = "vm:" + vm.name;
      std::unique_ptr<Context> ctx;
      if (gated) {
        ctx = backend_.create_context(0, lim, &err);
        if (ctx) {
          wh_gate_chan_state first{};
          first.generation = gen;
          first.idle = 1;
          if (ctx->mem_info(&first.mem_free, &first.mem_total) != cudaSuccess) first.pending_error = cudaErrorUnknown;
          gate->begin(i, gen, first);
        }
      }
      auto ch = ring::ServerChannel::attach(*region, i, &err);
      if (!ch) {
        if (gated && ctx) gate->end(i);
        continue;
      }
      ch->set_peer_timeout(cfg_.vm_heartbeat_timeout_ms ? cfg_.vm_heartbeat_timeout_ms : cfg_.heartbeat_timeout_ms);
      if (!gated) ctx = backend_.create_context(0, lim, &err);
      if (!ctx) {
        ch->reclaim();
        continue;
      }
      if (gated && ch->generation() != gen) {
        // Moved between our look and the attach: only a guest writing the
        // word itself does that. Serve this claim over the ring only.
        spdlog::warn("vm {}: channel {} generation moved while attaching; no gate for this session", vm.name, i);
        gate->end(i);
        gated = false;
      }
      busy[i] = true;
      uint64_t sid = next_session_++;
      const uint64_t* req_head = &chh->req_head;
      sessions.emplace_back([this, &busy, i, sid, &vm, gate = gated ? gate : nullptr, gen, req_head, &gate_wait,
                             ch = std::move(ch), ctx = std::move(ctx)]() mutable {
        live_sessions_++;
        {
          Session session(sid, backend_, std::move(ctx), ch->data(), stats_);
          spdlog::info("session {}: vm {} channel {} (guest pid {}){}", sid, vm.name, i, ch->client_pid(),
                       gate ? ", gate" : "");
          std::atomic<bool> killed{false};
          Live info{};
          info.pid = ch->client_pid();
          info.vm = vm.name;
          info.channel = i;
          info.killed = &killed;
          auto watched = watch(session, std::move(info));
          End why = gate ? serve_gate_channel(*ch, session, *gate, i, gen, req_head, gate_wait, cfg_.max_violations,
                                              stopping_, stats_, killed)
                         : serve_channel(*ch, session, cfg_.max_violations, stopping_, nullptr, killed);
          unwatch(watched);
          if (why == End::Killed) ch->end_session();
          spdlog::info("session {}: ended ({}); freeing {} bytes of device memory", sid, to_string(why),
                       session.device_bytes());
          log_kernel_totals(sid, session.counters());
          // Its gate binding is stale from here on, before the channel can
          // be claimed again.
          if (gate) gate->end(i);
        }
        // The channel is free for the VM's next process: nothing of this
        // session's copy bookkeeping may leak into the next one.
        std::memset(ch->data().data(), 0, sizeof(proto::DataAreaStatus));
        ch->reclaim();
        live_sessions_--;
        busy[i] = false;
      });
    }
    std::this_thread::sleep_for(2ms);
  }
  for (auto& t : sessions) t.join();
  if (gate) {
    gate->join();
    gate->withdraw();
  }
}

int Server::run() {
  // The statistics' clock is calibrated once (20 ms) before any client is
  // served: a first session that waited for it would start its round trips
  // slowly, and the client's wait pacing learns from those.
  (void)Stats::ns_per_tick();
  // Every VM's gate memory object is checked before anything is served: a
  // wrong path is a configuration error, not something to find out later.
  gates_.clear();
  for (const auto& vm : cfg_.vms) {
    std::unique_ptr<GateVm> g;
    if (!vm.gate_path.empty()) {
      std::string err;
      g = GateVm::open(vm.name, vm.gate_path, vm.channels, stats_, &err);
      if (!g) {
        spdlog::error("vm {}: --vm-gate: {}", vm.name, err);
        return 2;
      }
    }
    gates_.push_back(std::move(g));
  }
  // Every VM's region too: a region the server cannot serve is an error at
  // start, not a log line under a server that looks healthy.
  std::vector<std::unique_ptr<ring::Region>> regions;
  for (const auto& vm : cfg_.vms) {
    std::string err;
    auto r = open_vm_region(vm, &err);
    if (!r) {
      spdlog::error("vm {}: cannot serve {}: {}", vm.name, vm.path, err);
      for (auto& g : gates_)
        if (g) g->withdraw();  // nothing will answer a BIND
      return 2;
    }
    regions.push_back(std::move(r));
  }
  if (int rc = listen_socket(); rc != 0) {
    for (auto& g : gates_)
      if (g) g->withdraw();
    return rc;
  }
  if (!start_admin() || !start_metrics() || !start_remote()) {
    for (auto& g : gates_)
      if (g) g->withdraw();
    close(listen_fd_);
    unlink(cfg_.socket_path.c_str());
    stop_metrics();
    if (admin_fd_ >= 0) {
      close(admin_fd_);
      admin_fd_ = -1;
      unlink(cfg_.admin_socket_path.c_str());
    }
    return 2;
  }
  if (admin_fd_ >= 0) admin_thread_ = std::thread([this] { serve_admin(); });
  for (size_t k = 0; k < cfg_.vms.size(); k++) {
    GateVm* g = gates_[k].get();
    track([this, vm = cfg_.vms[k], g, r = std::shared_ptr<ring::Region>(std::move(regions[k]))] {
      serve_vm(vm, g, r);
    });
  }
  spdlog::info("wormhole-server: {} backend, {} device(s), listening on {}", backend_.name(),
               backend_.device_count(), cfg_.socket_path);
  while (!stopping_) {
    pollfd p{listen_fd_, POLLIN, 0};
    cancel_orphaned_kernels(false);
    switch (report_.exchange(Report::None)) {
      case Report::Stats: spdlog::info("statistics:\n{}", stats_.render()); break;
      case Report::Reload:
        spdlog::warn("SIGHUP: the configuration is read at start only; restart the server to apply changes");
        break;
      case Report::None: break;
    }
    if (draining_ && live_sessions_ == 0) {
      spdlog::info("drained: no session left; stopping");
      stop();
      break;
    }
    if (poll(&p, 1, 200) <= 0) continue;
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    if (connections_.load() >= cfg_.max_clients) {
      // Answered from here, without reading the hello and without a thread.
      proto::HelloReply rep{};
      rep.magic = proto::kHelloMagic;
      rep.status = cudaErrorDevicesUnavailable;
      std::snprintf(rep.message, sizeof rep.message, "too many clients (--max-clients %u)", cfg_.max_clients);
      (void)!send(fd, &rep, sizeof rep, MSG_DONTWAIT | MSG_NOSIGNAL);
      close(fd);
      static WarnLimiter limit;
      limit.warn("refused a client: too many clients (--max-clients {})", cfg_.max_clients);
      continue;
    }
    connections_++;
    track([this, fd] {
      serve_socket_client(fd);
      connections_--;
    });
  }
  close(listen_fd_);
  // Only the socket this server made: another server may have replaced it.
  struct stat now{};
  if (stat(cfg_.socket_path.c_str(), &now) == 0 && uint64_t(now.st_dev) == sock_dev_ &&
      uint64_t(now.st_ino) == sock_ino_)
    unlink(cfg_.socket_path.c_str());
  cancel_orphaned_kernels(true);  // a runaway kernel must not hold the stop up
  if (admin_thread_.joinable()) admin_thread_.join();
  stop_metrics();
  {
    std::lock_guard lk(threads_mu_);
    for (auto& t : threads_)
      if (t.t.joinable()) t.t.join();
    threads_.clear();
  }
  return 0;
}

int Server::listen_socket() {
  // The socket is bound under a temporary name, made private and listening,
  // and only then renamed into place: whoever waits for the path to appear
  // (a client, a test, a service manager) can connect at once, and the
  // socket is never reachable with the umask's mode.
  listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string tmp_path = cfg_.socket_path + "." + std::to_string(getpid()) + ".new";
  if (tmp_path.size() >= sizeof addr.sun_path) {
    spdlog::error("socket path too long: {}", cfg_.socket_path);
    return 2;
  }
  // A live server on the path keeps it: connecting tells a listener from a
  // stale file (left by a server that was killed), which is replaced.
  {
    sockaddr_un live{};
    live.sun_family = AF_UNIX;
    std::strcpy(live.sun_path, cfg_.socket_path.c_str());
    int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool taken = probe >= 0 && connect(probe, reinterpret_cast<sockaddr*>(&live), sizeof live) == 0;
    if (probe >= 0) close(probe);
    if (taken) {
      spdlog::error("another server is listening on {}: not starting (give this one another --socket)",
                    cfg_.socket_path);
      return 2;
    }
  }
  gid_t gid = gid_t(-1);
  if (!cfg_.socket_group.empty()) {
    group g{}, *res = nullptr;
    std::vector<char> buf(16384);
    if (getgrnam_r(cfg_.socket_group.c_str(), &g, buf.data(), buf.size(), &res) != 0 || !res) {
      spdlog::error("--socket-group {}: no such group", cfg_.socket_group);
      return 2;
    }
    gid = res->gr_gid;
  }
  std::strcpy(addr.sun_path, tmp_path.c_str());
  unlink(tmp_path.c_str());
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      (gid != gid_t(-1) && chown(tmp_path.c_str(), uid_t(-1), gid) != 0) ||
      chmod(tmp_path.c_str(), mode_t(cfg_.socket_mode)) != 0 || listen(listen_fd_, 64) != 0 ||
      rename(tmp_path.c_str(), cfg_.socket_path.c_str()) != 0) {
    spdlog::error("cannot listen on {}: {}", cfg_.socket_path, strerror(errno));
    unlink(tmp_path.c_str());
    return 2;
  }
  struct stat st{};
  if (stat(cfg_.socket_path.c_str(), &st) == 0) sock_dev_ = uint64_t(st.st_dev), sock_ino_ = uint64_t(st.st_ino);
  return 0;
}

}  // namespace wh::server
