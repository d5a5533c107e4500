// Network clients over UCX (docs/remote.md): a listener thread accepts
// connections; each is authenticated (challenge-response, before any
// record), then served by an ordinary Session whose data area is private to
// the server. Records travel as on the ring (wh_msg_hdr + payload), their
// lengths bounded before anything is read; every request goes through the
// same dispatch and validation as a ring request.
#include <spdlog/spdlog.h>
#include <sys/mman.h>

#include <condition_variable>
#include <cstring>

#include "server.hpp"
#include "wormhole/proto/dispatch.hpp"

namespace wh::server {

using namespace std::chrono_literals;
using net::Clock;

namespace {
// Payload bytes a record may carry: what a ring channel allows by default.
constexpr uint32_t kRemoteMaxMsg = (1u << 19) - uint32_t(sizeof(wh_msg_hdr));

// A refusal before the session exists, at most a few a second in the log.
void warn_limited(const std::string& msg) {
  static std::mutex mu;
  static Clock::time_point window{};
  static int n = 0;
  static uint64_t dropped = 0;
  std::lock_guard lk(mu);
  auto now = Clock::now();
  if (now - window >= 10s) window = now, n = 0;
  if (++n > 5) {
    dropped++;
    return;
  }
  if (dropped) spdlog::warn("{} ({} similar warnings suppressed)", msg, std::exchange(dropped, 0));
  else spdlog::warn("{}", msg);
}
}  // namespace

bool Server::start_remote() {
  if (cfg_.listen_url.empty()) {
    if (!cfg_.auth_key_files.empty()) spdlog::warn("--auth-key-file without --listen: no network clients served");
    return true;
  }
  net::Addr addr;
  std::string err;
  if (!net::parse_url(cfg_.listen_url, &addr, &err)) {
    spdlog::error("--listen: {}", err);
    return false;
  }
  if (cfg_.auth_key_files.empty()) {
    spdlog::error("--listen {}: a server on a network requires authentication: give --auth-key-file FILE",
                  cfg_.listen_url);
    return false;
  }
  for (const auto& f : cfg_.auth_key_files) {
    net::Key k;
    if (!net::load_key(f, &k, &err)) {
      spdlog::error("--auth-key-file: {}", err);
      return false;
    }
    remote_keys_.push_back(std::move(k));
  }
  remote_listener_ = net::Listener::listen(addr, &err);
  if (!remote_listener_) {
    spdlog::error("--listen {}: {}", cfg_.listen_url, err);
    return false;
  }
  spdlog::info("listening for network clients on ucx://{}:{} ({} credential(s))", addr.host,
               remote_listener_->port(), remote_keys_.size());
  track([this] { serve_remote_listener(); });
  return true;
}

void Server::serve_remote_listener() {
  while (!stopping_) {
    expire_arrivals(false);
    for (auto& link : remote_listener_->accept(200ms)) {
      if (connections_.load() >= cfg_.max_clients) {
        warn_limited(fmt::format("refused a network client from {}: too many clients (--max-clients {})",
                                 link->peer(), cfg_.max_clients));
        link->fail("refused");  // closed at once
        continue;
      }
      connections_++;
      std::shared_ptr<net::Link> l(std::move(link));
      track([this, l] {
        serve_remote_client(l);
        connections_--;
      });
    }
  }
  remote_listener_.reset();
  expire_arrivals(true);
}


void Server::serve_remote_client(std::shared_ptr<net::Link> link) {
  const std::string peer = link->peer();
  auto refuse = [&](int32_t status, const std::string& why) {
    net::Verdict v{};
    v.magic = net::kVerdictMagic;
    v.status = status;
    std::snprintf(v.message, sizeof v.message, "%s", why.c_str());
    link->send(&v, sizeof v, Clock::now() + 1s);
    warn_limited(fmt::format("refused a network client from {}: {}", peer, why));
  };
  // ---- authentication: nothing but these fixed-size messages is read
  // before it succeeds.
  net::Challenge ch{};
  ch.magic = net::kChallengeMagic;
  ch.min_version = proto::kMinVersion;
  ch.max_version = proto::kVersion;
  ch.max_msg = kRemoteMaxMsg;
  ch.timeout_ms = cfg_.remote_timeout_ms;
  net::random_bytes(ch.nonce, sizeof ch.nonce);
  auto hs_deadline = Clock::now() + 5s;
  if (!link->send(&ch, sizeof ch, hs_deadline) || !link->fill(sizeof(net::Proof), hs_deadline)) {
    warn_limited(fmt::format("network client from {}: no authentication ({})", peer,
                             link->dead() ? link->error() : "nothing within 5 s"));
    return;
  }
  net::Proof pr{};
  std::memcpy(&pr, link->buffered().data(), sizeof pr);
  link->consume(sizeof pr);
  if (pr.magic == net::kPeerMagic) {  // another server pushing a peer copy: a ticket, no key
    net::PeerOffer offer;
    std::memcpy(&offer, &pr, sizeof offer);
    return serve_peer(*link, offer);
  }
  const net::Key* key = nullptr;
  if (pr.magic == net::kProofMagic || pr.magic == net::kMoveMagic || pr.magic == net::kResumeMagic)
    for (const auto& k : remote_keys_) {
      uint8_t want[net::kMac];
      net::client_mac(k, ch, pr, want);
      if (net::mac_equal(want, pr.mac)) {
        key = &k;
        break;
      }
    }
  if (!key) return refuse(cudaErrorNotPermitted, "authentication failed (wrong key, or not a wormhole client)");
  if (pr.max_version < proto::kMinVersion || pr.min_version > proto::kVersion)
    return refuse(cudaErrorInsufficientDriver, "no common protocol version");
  if (pr.magic == net::kMoveMagic) return receive_moved_session(*link, ch, pr, *key);
  std::unique_ptr<RemoteSession> rs;
  if (pr.magic == net::kResumeMagic) {
    std::string why;
    if (!(rs = take_arrival(pr, *key, &why))) return refuse(cudaErrorDevicesUnavailable, why);
  } else {
    if (draining_) return refuse(cudaErrorDevicesUnavailable, "the server is draining (wormholectl drain)");
    ContextLimits lim;
    lim.memory_quota = cfg_.quota_bytes;
    if (auto b = uid_budgets_.find(key->owner); b != uid_budgets_.end()) lim.shared = b->second;
    lim.tenant = "uid:" + std::to_string(key->owner);  // the key's owner, as for a local client of that uid
    std::string err;
    auto ctx = backend_.create_context(0, lim, &err);
    if (!ctx) return refuse(cudaErrorDevicesUnavailable, "context: " + err);
    if (!(rs = remote_data_area())) return refuse(cudaErrorMemoryAllocation, "no memory for the session's data area");
    rs->session = std::make_unique<Session>(next_session_++, backend_, std::move(ctx),
                                            std::span<uint8_t>(rs->data, rs->data_size), stats_);
  }
  net::Verdict v{};
  v.magic = net::kVerdictMagic;
  v.status = 0;
  v.version = std::min<uint16_t>(pr.max_version, proto::kVersion);
  v.session_id = rs->session->id();
  net::server_mac(*key, ch, pr, v, v.mac);
  if (!link->send(&v, sizeof v, Clock::now() + 5s)) return;
  spdlog::info("session {}: network client {} (pid {}, credential {}) {} ({} backend)", v.session_id, peer, pr.pid,
               key->name, pr.magic == net::kResumeMagic ? "followed its session here" : "connected",
               backend_.name());
  run_remote_session(std::move(link), std::move(rs), pr.timeout_ms, *key, pr.pid);
}

Server::RemoteSession::~RemoteSession() {
  session.reset();
  if (data) munmap(data, data_size);
}

std::unique_ptr<Server::RemoteSession> Server::remote_data_area() {
  auto rs = std::make_unique<RemoteSession>();
  rs->data_size = proto::kPinnedHeapOffset + cfg_.pinned_bytes;
  void* data =
      mmap(nullptr, rs->data_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (data == MAP_FAILED) return nullptr;
  rs->data = static_cast<uint8_t*>(data);
  return rs;
}

void Server::run_remote_session(std::shared_ptr<net::Link> link, std::unique_ptr<RemoteSession> rs,
                                uint32_t client_timeout_ms, const net::Key& key, uint32_t pid) {
  Session& session = *rs->session;
  const uint64_t sid = session.id();
  session.set_peer(&peer_tickets_, [this](const std::string& url, const PeerTickets::Ticket& t, uint64_t dst,
                                          std::span<const uint8_t> bytes) { return peer_push(url, t, dst, bytes); });
  // ---- the session. The link is used by this thread, and by the
  // keepalive thread while a call runs (a long kernel): the client hears
  // from us at least every quarter of its timeout.
  std::mutex mu;
  std::atomic<bool> busy{false}, done{false}, lost{false};
  const auto ka_period = std::chrono::milliseconds(std::clamp<uint32_t>(client_timeout_ms / 4, 10, 1000));
  Clock::time_point last_sent = Clock::now();
  std::condition_variable ka_cv;
  std::mutex ka_mu;
  std::thread keepalive([&] {
    wh_msg_hdr ka{};
    ka.magic = WH_MSG_MAGIC;
    ka.version = proto::kVersion;
    ka.opcode = WH_OP_PAD;
    ka.flags = WH_MSG_F_RESPONSE;
    std::unique_lock kl(ka_mu);
    while (!done) {
      ka_cv.wait_for(kl, ka_period);
      if (done || !busy) continue;
      std::unique_lock lk(mu, std::try_to_lock);
      if (!lk.owns_lock() || !busy || Clock::now() - last_sent < ka_period) continue;
      if (!link->send(&ka, sizeof ka, Clock::now() + std::chrono::milliseconds(cfg_.remote_timeout_ms))) lost = true;
      last_sent = Clock::now();
    }
  });
  live_sessions_++;
  std::string why;
  bool moved = false;
  {
    std::atomic<bool> killed{false}, migrate{false};
    Live info{};
    info.gone = [&lost] { return lost.load(); };
    info.pid = pid;
    info.uid = key.owner;
    info.killed = &killed;
    info.migrate = &migrate;
    info.network = true;
    auto watched = watch(session, std::move(info));
    auto take = [&] {
      std::lock_guard lk(live_mu_);
      migrate = false;
      return std::exchange(watched->migration, nullptr);
    };
    proto::DispatchResult res;
    std::vector<uint8_t> out;
    auto* status = reinterpret_cast<proto::DataAreaStatus*>(rs->data);
    Clock::time_point last_heard = Clock::now();
    uint64_t heard = link->received();
    // Sends the answer to request h from res (under mu); false: the link failed.
    auto answer = [&](const wh_msg_hdr& h) {
      wh_msg_hdr r{};
      r.magic = WH_MSG_MAGIC;
      r.version = proto::kVersion;
      r.opcode = h.opcode;
      r.flags = WH_MSG_F_RESPONSE;
      r.len = uint32_t(res.fixed.size() + res.tail.size());
      r.call_id = h.call_id;
      r.status = res.status;
      // The device output's sequence number rides along: the client
      // fetches the text (FetchOutput) when it moved, as on the ring.
      r.aux = uint32_t(__atomic_load_n(&status->output_seq, __ATOMIC_ACQUIRE));
      // A large tail (device-to-host bytes) is sent from where it is.
      const bool direct = res.tail.size() >= (64u << 10);
      out.resize(sizeof r + res.fixed.size() + (direct ? 0 : res.tail.size()));
      std::memcpy(out.data(), &r, sizeof r);
      if (!res.fixed.empty()) std::memcpy(out.data() + sizeof r, res.fixed.data(), res.fixed.size());
      if (!direct && !res.tail.empty())
        std::memcpy(out.data() + sizeof r + res.fixed.size(), res.tail.data(), res.tail.size());
      auto deadline = Clock::now() + std::chrono::milliseconds(cfg_.remote_timeout_ms);
      if (!link->send(out.data(), out.size(), deadline) ||
          (direct && !link->send(res.tail.data(), res.tail.size(), deadline)))
        return false;
      last_sent = Clock::now();
      return true;
    };
    for (;;) {
      if (killed) {
        why = "killed by wormholectl";
        break;
      }
      std::unique_lock lk(mu);
      auto now = Clock::now();
      if (!link->fill(sizeof(wh_msg_hdr), std::min(now + 100ms, last_heard + std::chrono::milliseconds(cfg_.remote_timeout_ms)))) {
        if (link->dead()) {
          why = "client disconnected: " + link->error();
          break;
        }
        if (link->received() != heard) heard = link->received(), last_heard = Clock::now();
        if (stopping_) {
          why = "server stopping";
          break;
        }
        if (Clock::now() - last_heard >= std::chrono::milliseconds(cfg_.remote_timeout_ms)) {
          why = fmt::format("client silent for {} ms (no keepalive)", cfg_.remote_timeout_ms);
          break;
        }
        continue;
      }
      heard = link->received(), last_heard = Clock::now();
      wh_msg_hdr h;
      std::memcpy(&h, link->buffered().data(), sizeof h);
      // The length is checked before anything is waited for or read by it.
      if (h.magic != WH_MSG_MAGIC || h.len > kRemoteMaxMsg) {
        session.note_violation();
        why = h.magic != WH_MSG_MAGIC ? "stream corrupt (bad record magic)"
                                      : fmt::format("record of {} bytes (more than {})", h.len, kRemoteMaxMsg);
        break;
      }
      if (!link->fill(sizeof h + h.len, Clock::now() + std::chrono::milliseconds(cfg_.remote_timeout_ms))) {
        why = link->dead() ? "client disconnected: " + link->error() : "record not completed in time";
        break;
      }
      std::span<const uint8_t> payload = link->buffered().subspan(sizeof h, h.len);
      if (h.opcode == WH_OP_PAD) {  // keepalive
        link->consume(sizeof h + h.len);
        continue;
      }
      // A move (wormholectl migrate) happens before a synchronous request:
      // every posted one before it has run, the client sends nothing more
      // until it is answered, and the answer tells it where to send it again.
      if (migrate && !(h.flags & WH_MSG_F_POSTED)) {
        if (std::shared_ptr<Migration> m = take()) {
          if (m->kind != Migration::Kind::Move) {
            m->finish("session " + std::to_string(sid) +
                          " is a network client's: it can move to another ucx:// server, not be checkpointed to a file",
                      0);
          } else {
            lk.unlock();
            busy = true;  // keepalives reach the client while the session moves
            proto::MovedNotice notice{};
            moved = migrate_remote_out(session, *m, key, pid, &notice);
            busy = false;
            lk.lock();
            last_heard = Clock::now();  // it waited for us, silent
            if (moved) {
              res.status = proto::kMoved;
              res.fixed.assign(reinterpret_cast<const uint8_t*>(&notice),
                               reinterpret_cast<const uint8_t*>(&notice + 1));
              res.tail.clear();
              link->consume(sizeof h + h.len);
              why = fmt::format("moved to {} as session {}", notice.url, notice.session_id);
              if (!answer(h)) why += " (the client did not hear it: " + link->error() + ")";
              // The client follows and closes this link; what it sent after
              // the request (the rest of a group of calls) is sent there again.
              const auto until = Clock::now() + std::chrono::milliseconds(cfg_.remote_timeout_ms);
              while (!link->dead() && Clock::now() < until)
                if (link->fill(1, std::min(until, Clock::now() + 100ms))) link->consume(link->buffered().size());
              break;
            }
          }
        }
      }
      lk.unlock();
      bool respond;
      if (h.version != proto::kVersion || (h.flags & WH_MSG_F_RESPONSE)) {
        session.note_violation();
        res.status = proto::kBadRequest;
        res.fixed.clear();
        res.tail.clear();
        respond = !(h.flags & WH_MSG_F_POSTED);
      } else {
        busy = true;
        respond = session.handle(h.opcode, h.flags, payload, kRemoteMaxMsg, res);
        busy = false;
        last_heard = Clock::now();  // a client waiting for a long call is silent meanwhile
      }
      lk.lock();
      link->consume(sizeof h + h.len);
      if (respond && !answer(h)) {
        why = "client does not take its replies: " + link->error();
        break;
      }
      lk.unlock();
      session.account();
      if (session.violations() > cfg_.max_violations) {
        why = "too many malformed requests";
        break;
      }
    }
    {
      std::lock_guard kl(ka_mu);
      done = true;
    }
    ka_cv.notify_all();
    keepalive.join();
    {
      // A migration asked for while the session ended is answered now.
      std::lock_guard lk(live_mu_);
      if (auto m = std::exchange(watched->migration, nullptr)) m->finish("the session ended (" + why + ")", 0);
    }
    unwatch(watched);
    if (moved) spdlog::info("session {}: {}", sid, why);
    else spdlog::info("session {}: ended ({}); freeing {} bytes of device memory", sid, why, session.device_bytes());
  }
  live_sessions_--;
  rs.reset();
  // A session ended by us (not by the peer) closes the link at once.
  if (!link->dead()) link->fail(why);
}

// ---- peer copies (proto/peer_api.def, docs/remote.md "Several servers").
// The destination side: the link presents a ticket for one range of one
// session; nothing else it sends is trusted. The bytes are kept for the
// ticket until its session commits them (PeerCommit, in that session's
// thread and stream order).
void Server::serve_peer(net::Link& link, const net::PeerOffer& first) {
  const std::string peer = link.peer();
  auto answer = [&](int32_t status, const char* why) {
    net::Verdict v{};
    v.magic = net::kVerdictMagic;
    v.status = status;
    v.version = proto::kVersion;
    std::snprintf(v.message, sizeof v.message, "%s", why);
    return link.send(&v, sizeof v, Clock::now() + 1s);
  };
  const auto limit = std::chrono::milliseconds(cfg_.remote_timeout_ms);
  net::PeerOffer offer = first;
  // One offer after another on the same link (the pushing server keeps it
  // for its next push); a refusal, a broken transfer or silence ends it.
  for (;;) {
    if (offer.magic != net::kPeerMagic || offer.max_version < proto::kMinVersion ||
        offer.min_version > proto::kVersion) {
      answer(cudaErrorInsufficientDriver, "not a peer offer of a common protocol version");
      return warn_limited(fmt::format("refused a peer server from {}: bad offer", peer));
    }
    PeerTickets::Ticket t{{offer.ticket[0], offer.ticket[1]}};
    uint64_t sid = 0;
    std::string why;
    uint8_t* buf = peer_tickets_.claim(t, offer.dst, offer.bytes, PeerTickets::Clock::now(), &sid, &why);
    if (!buf) {
      answer(cudaErrorNotPermitted, why.c_str());
      return warn_limited(fmt::format("refused a peer copy from {}: {}", peer, why));
    }
    if (!answer(0, "")) return peer_tickets_.filled(t, false);
    // Exactly the ticket's length, in pieces the link's buffer holds.
    uint64_t got = 0;
    bool ok = true;
    while (got < offer.bytes) {
      size_t want = std::min<uint64_t>(offer.bytes - got, link.capacity());
      if (link.buffered().empty() && !link.fill(1, Clock::now() + limit)) {
        ok = false;
        break;
      }
      size_t n = std::min<size_t>(want, link.buffered().size());
      std::memcpy(buf + got, link.buffered().data(), n);
      link.consume(n);
      got += n;
    }
    peer_tickets_.filled(t, ok);
    net::PeerAck ack{net::kPeerMagic, ok ? 0 : int32_t(cudaErrorUnknown)};
    if (!ok) {
      link.send(&ack, sizeof ack, Clock::now() + limit);
      return warn_limited(fmt::format("peer copy for session {} from {} broke off after {} of {} bytes: {}", sid,
                                      peer, got, offer.bytes, link.dead() ? link.error() : "timed out"));
    }
    spdlog::info("session {}: peer copy: received {} bytes from server {}", sid, offer.bytes, peer);
    if (!link.send(&ack, sizeof ack, Clock::now() + limit)) return;
    // The next offer, or the link ends when idle this long.
    auto idle_until = Clock::now() + limit;
    while (!link.fill(sizeof offer, std::min(Clock::now() + 200ms, idle_until))) {
      if (link.dead() || stopping_ || Clock::now() >= idle_until) return;
    }
    std::memcpy(&offer, link.buffered().data(), sizeof offer);
    link.consume(sizeof offer);
  }
}

// The source side: a link of its own to the destination server, presenting
// only the ticket (we hold no key of theirs). The link is kept for the next
// push to that server; a kept link that turns out closed is replaced once.
int32_t Server::peer_push(const std::string& url, const PeerTickets::Ticket& t, uint64_t dst,
                          std::span<const uint8_t> bytes) {
  net::Addr addr;
  std::string err;
  if (!net::parse_url(url, &addr, &err)) return cudaErrorInvalidValue;
  const auto limit = std::chrono::milliseconds(cfg_.remote_timeout_ms);
  for (int attempt = 0; attempt < 2; attempt++) {
    std::unique_ptr<net::Link> link;
    if (attempt == 0) {
      std::lock_guard lk(peer_mu_);
      if (auto it = peer_links_.find(url); it != peer_links_.end()) {
        link = std::move(it->second);
        peer_links_.erase(it);
      }
    }
    const bool kept = link != nullptr;
    auto lost = [&](const char* what) {
      warn_limited(fmt::format("peer copy to {}: {} ({})", url, what, link->dead() ? link->error() : "timed out"));
      return int32_t(cudaErrorDevicesUnavailable);
    };
    if (!link) {
      link = net::Link::connect(addr, &err);
      if (!link) {
        warn_limited(fmt::format("peer copy to {}: {}", url, err));
        return cudaErrorDevicesUnavailable;
      }
      if (!link->fill(sizeof(net::Challenge), Clock::now() + limit)) return lost("no challenge");
      net::Challenge ch;
      std::memcpy(&ch, link->buffered().data(), sizeof ch);
      link->consume(sizeof ch);
      if (ch.magic != net::kChallengeMagic) return lost("not a wormhole-server");
    }
    net::PeerOffer offer{};
    offer.magic = net::kPeerMagic;
    offer.min_version = proto::kMinVersion;
    offer.max_version = proto::kVersion;
    offer.ticket[0] = t.v[0];
    offer.ticket[1] = t.v[1];
    offer.dst = dst;
    offer.bytes = bytes.size();
    if (!link->send(&offer, sizeof offer, Clock::now() + limit) ||
        !link->fill(sizeof(net::Verdict), Clock::now() + limit)) {
      if (kept) continue;  // the destination closed the kept link: a new one
      return lost("no verdict");
    }
    net::Verdict v;
    std::memcpy(&v, link->buffered().data(), sizeof v);
    link->consume(sizeof v);
    if (v.magic != net::kVerdictMagic) return lost("not a wormhole-server");
    if (v.status != 0) {
      v.message[sizeof v.message - 1] = 0;
      warn_limited(fmt::format("peer copy to {} refused: {}", url, v.message));
      return cudaErrorInvalidValue;
    }
    if (!link->send(bytes.data(), bytes.size(), Clock::now() + limit)) return lost("send");
    if (!link->fill(sizeof(net::PeerAck), Clock::now() + limit)) return lost("no acknowledgement");
    net::PeerAck ack;
    std::memcpy(&ack, link->buffered().data(), sizeof ack);
    link->consume(sizeof ack);
    if (ack.magic != net::kPeerMagic || ack.status != 0) return cudaErrorUnknown;
    std::lock_guard lk(peer_mu_);
    if (!stopping_ && !peer_links_.count(url) && peer_links_.size() < 64) peer_links_[url] = std::move(link);
    return cudaSuccess;
  }
  return cudaErrorDevicesUnavailable;
}

}  // namespace wh::server
