// Moving a network (ucx://) client's session to another server
// (wormholectl migrate SESSION --to ucx://HOST:PORT; docs/migration.md).
//
// The source stops the session before one of its synchronous requests:
// every posted request before it has run, and the client, waiting for the
// answer, sends nothing more. The source saves the session and sends the
// checkpoint to the destination over a link of its own, authenticated with
// the key the session's client proved (net::kMoveMagic): the destination
// restores it under that credential and keeps it for the client with a
// fresh token. The source then answers the waiting request with
// proto::kMoved and the destination's address and token; the client
// connects there (net::kResumeMagic), sends the request again and goes on.
// Whatever fails before the destination holds the session leaves it
// running at the source, the request answered there.
#include <spdlog/spdlog.h>
#include <sys/random.h>

#include <cstring>
#include <new>

#include "server.hpp"

namespace wh::server {

using namespace std::chrono_literals;
using net::Clock;

namespace {
// A moved session waits this long for its client to come.
constexpr auto kArrivalWait = 60s;
// The destination restores within this (the source's client waits in its call).
constexpr auto kRestoreTimeout = 600s;

void set_message(char (&dst)[96], const std::string& why) { std::snprintf(dst, sizeof dst, "%s", why.c_str()); }
}  // namespace

bool Server::migrate_remote_out(Session& s, Migration& m, const net::Key& key, uint32_t pid,
                                proto::MovedNotice* notice) {
  const auto t0 = Clock::now();
  auto fail = [&](const std::string& why) {
    spdlog::warn("session {}: not migrated to {}: {}; the session goes on here", s.id(), m.to, why);
    m.finish(why, 0);
    return false;
  };
  std::string why;
  net::Addr addr;
  if (!net::parse_url(m.to, &addr, &why)) return fail(why);
  if (m.to.size() >= sizeof notice->url) return fail("the destination's address is too long");
  // Compressed, with its checksum: it crosses a network.
  Bytes file;
  uint64_t raw = 0;
  try {
    CheckpointWriter w;
    if (!s.save(w, &why)) return fail(why);
    raw = w.size();
    CheckpointHeader h{};
    std::snprintf(h.backend, sizeof h.backend, "%s", backend_.name());
    h.device_bytes = s.device_bytes();
    h.va_base = s.context().va_base();
    file = checkpoint_pack(w.content(), h);
  } catch (const std::bad_alloc&) {
    return fail("no memory for the checkpoint");
  }
  if (file.size() < sizeof(CheckpointHeader)) return fail("the checkpoint could not be compressed");
  const auto t_saved = Clock::now();
  auto link = net::Link::connect(addr, &why);
  if (!link) return fail("cannot reach the destination: " + why);
  const auto limit = std::chrono::milliseconds(cfg_.remote_timeout_ms);
  auto lost = [&](const char* what) {
    return fail(std::string("the destination: ") + what + " (" + (link->dead() ? link->error() : "timed out") + ")");
  };
  // The handshake, as a client of that server with the session's key.
  net::Hello hello;
  hello.magic = net::kMoveMagic;
  hello.min_version = proto::kMinVersion;
  hello.max_version = proto::kVersion;
  hello.pid = pid;
  hello.timeout_ms = cfg_.remote_timeout_ms;
  net::Challenge ch;
  net::Verdict v;
  switch (net::client_handshake(*link, key, hello, Clock::now() + limit, &ch, &v)) {
    case net::Shake::Ok: break;
    case net::Shake::NoChallenge:
      return link->dead() ? fail("cannot reach the destination: " + link->error()) : lost("no challenge");
    case net::Shake::NoVerdict: return lost("no verdict");
    case net::Shake::NotServer: return fail("the destination is not a wormhole-server");
    case net::Shake::Refused: return fail(std::string("the destination: ") + v.message);
    case net::Shake::Forged: return fail("the destination does not hold the session's credential");
  }
  // The header first: the destination refuses a session it cannot hold
  // before the rest travels.
  if (!link->send(file.data(), sizeof(CheckpointHeader), Clock::now() + limit) || !link->take(&v, Clock::now() + limit))
    return lost("no answer to the checkpoint's header");
  v.message[sizeof v.message - 1] = 0;
  if (v.magic != net::kVerdictMagic) return lost("no answer to the checkpoint's header");
  if (v.status != 0) return fail(std::string("the destination: ") + v.message);
  net::MoveDone done;
  if (!link->send(file.data() + sizeof(CheckpointHeader), file.size() - sizeof(CheckpointHeader),
                  Clock::now() + kRestoreTimeout) ||
      !link->take(&done, Clock::now() + kRestoreTimeout))
    return lost("it did not answer");
  done.message[sizeof done.message - 1] = 0;
  if (done.magic != net::kMoveMagic) return fail("the destination: it did not answer");
  if (done.status != 0) return fail(std::string("the destination: ") + done.message);
  notice->session_id = done.session_id;
  notice->token[0] = done.token[0];
  notice->token[1] = done.token[1];
  std::snprintf(notice->url, sizeof notice->url, "%s", m.to.c_str());
  auto ms = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
  spdlog::info("session {}: migrated to {} as session {}: {} bytes of state, {} bytes sent, saved and compressed in "
               "{:.1f} ms, paused {:.1f} ms",
               s.id(), m.to, done.session_id, raw, file.size(), ms(t0, t_saved), ms(t0, Clock::now()));
  m.finish("", done.session_id);
  return true;
}

void Server::receive_moved_session(net::Link& link, const net::Challenge& ch, const net::Proof& pr,
                                   const net::Key& key) {
  const std::string peer = link.peer();
  const auto limit = std::chrono::milliseconds(cfg_.remote_timeout_ms);
  auto verdict = [&](int32_t status, const std::string& why, bool with_mac) {
    net::Verdict v{};
    v.magic = net::kVerdictMagic;
    v.status = status;
    v.version = proto::kVersion;
    set_message(v.message, why);
    if (with_mac) net::server_mac(key, ch, pr, v, v.mac);
    return link.send(&v, sizeof v, Clock::now() + limit);
  };
  auto refused = [&](const std::string& why) {
    spdlog::warn("refused a session moving here from {}: {}", peer, why);
  };
  if (draining_ || stopping_) {
    verdict(cudaErrorDevicesUnavailable, "the server is draining (wormholectl drain)", false);
    return refused("draining");
  }
  CheckpointHeader hdr;
  if (!verdict(0, "", true) || !link.take(&hdr, Clock::now() + limit)) return;
  // What the header claims bounds what is received; the checksum and the
  // restore check everything after.
  std::string err = "not a checkpoint's header";
  std::unique_ptr<Context> ctx;
  // (A zstd frame is at most a little larger than what it holds.)
  if (hdr.header_bytes == sizeof hdr && hdr.content_bytes <= kCheckpointMaxBytes && hdr.frame_bytes != 0 &&
      hdr.frame_bytes <= hdr.content_bytes + hdr.content_bytes / 64 + (1u << 20))
    ctx = restore_context(hdr, key.owner, &err);
  if (!ctx) {
    verdict(cudaErrorInvalidValue, err, false);
    return refused(err);
  }
  Bytes file;
  try {
    file.resize(sizeof hdr + hdr.frame_bytes);
  } catch (const std::bad_alloc&) {
    verdict(cudaErrorMemoryAllocation, "no memory for the checkpoint", false);
    return refused("no memory for the checkpoint");
  }
  if (!verdict(0, "", false)) return;
  std::memcpy(file.data(), &hdr, sizeof hdr);
  if (!link.read_into(file.data() + sizeof hdr, hdr.frame_bytes, Clock::now() + kRestoreTimeout))
    return refused("the checkpoint did not arrive: " + (link.dead() ? link.error() : std::string("timed out")));
  net::MoveDone done{};
  done.magic = net::kMoveMagic;
  auto answer_fail = [&](const std::string& why) {
    done.status = cudaErrorInvalidValue;
    set_message(done.message, why);
    link.send(&done, sizeof done, Clock::now() + limit);
    refused(why);
  };
  Bytes content;
  CheckpointHeader h2{};
  if (!checkpoint_unpack(file, &h2, &content, &err)) return answer_fail(err);
  Bytes().swap(file);
  auto rs = remote_data_area();
  if (!rs) return answer_fail("no memory for the session's data area");
  rs->session = std::make_unique<Session>(next_session_++, backend_, std::move(ctx),
                                          std::span<uint8_t>(rs->data, rs->data_size), stats_);
  CheckpointReader rd(content);
  if (!rs->session->restore(rd, &err)) return answer_fail("restore: " + err);
  Bytes().swap(content);
  if (getrandom(done.token, sizeof done.token, 0) != ssize_t(sizeof done.token))
    return answer_fail("no random token");
  done.session_id = rs->session->id();
  const uint64_t bytes = rs->session->device_bytes();
  {
    std::lock_guard lk(arrivals_mu_);
    Arrival a;
    a.rs = std::move(rs);
    a.secret = key.secret;
    a.pid = pr.pid;
    a.expires = std::chrono::steady_clock::now() + kArrivalWait;
    arrivals_[{done.token[0], done.token[1]}] = std::move(a);
  }
  spdlog::info("session {}: moved here from server {} (credential {}, client pid {}), {} bytes of device memory; "
               "waiting for its client",
               done.session_id, peer, key.name, pr.pid, bytes);
  if (!link.send(&done, sizeof done, Clock::now() + limit)) {
    // The source did not hear it and serves the session on: ours is dropped.
    std::lock_guard lk(arrivals_mu_);
    arrivals_.erase({done.token[0], done.token[1]});
  }
}

std::unique_ptr<Server::RemoteSession> Server::take_arrival(const net::Proof& pr, const net::Key& key,
                                                           std::string* why) {
  uint64_t token[2];
  std::memcpy(token, pr.nonce + net::kTokenAt, sizeof token);
  std::lock_guard lk(arrivals_mu_);
  auto it = arrivals_.find({token[0], token[1]});
  if (it == arrivals_.end()) return *why = "no moved session waits here under this token", nullptr;
  // Only the credential the session was moved with, and its process.
  if (it->second.secret != key.secret || it->second.pid != pr.pid)
    return *why = "the moved session belongs to another client", nullptr;
  auto rs = std::move(it->second.rs);
  arrivals_.erase(it);
  return rs;
}

void Server::expire_arrivals(bool all) {
  std::vector<std::unique_ptr<RemoteSession>> gone;
  {
    std::lock_guard lk(arrivals_mu_);
    const auto now = std::chrono::steady_clock::now();
    for (auto it = arrivals_.begin(); it != arrivals_.end();)
      if (all || now >= it->second.expires) {
        if (all) spdlog::info("session {}: moved here, its client not come yet: freed (server stopping)",
                              it->second.rs->session->id());
        else spdlog::warn("session {}: moved here, but its client did not come within {} s: freed",
                          it->second.rs->session->id(), std::chrono::seconds(kArrivalWait).count());
        gone.push_back(std::move(it->second.rs));
        it = arrivals_.erase(it);
      } else {
        ++it;
      }
  }
}

}  // namespace wh::server
