// Moving a live session to another server on this host (wormholectl
// migrate; docs/migration.md).
//
// The source pauses the session between two requests, saves it
// (Session::save) and hands the destination three descriptors over the
// destination's admin socket: the client's region, the client's socket and
// the checkpoint (a sealed memfd). The destination restores the session at
// the same handles and device addresses, takes over the channel where the
// source stopped reading and serves it; the client sees a pause. Whatever
// fails before the destination answers leaves the session running on the
// source.
#include <fcntl.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "server.hpp"
#include "wormhole/fd_pass.hpp"
#include "wormhole/server/checkpoint.hpp"

namespace wh::server {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// How long the source waits for the destination to restore and answer.
constexpr int kAdoptTimeoutMs = 600000;

// A sealed memfd holding `bytes`; -1 and *err otherwise.
int sealed_memfd(const std::vector<uint8_t>& bytes, std::string* err) {
  int fd = memfd_create("wormhole-checkpoint", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return *err = std::string("memfd_create: ") + strerror(errno), -1;
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = write(fd, bytes.data() + off, bytes.size() - off);
    if (n <= 0) {
      *err = std::string("writing the checkpoint: ") + strerror(errno);
      close(fd);
      return -1;
    }
    off += size_t(n);
  }
  fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
  return fd;
}

// The whole of a file given as a descriptor, within `max` bytes.
bool read_fd(int fd, uint64_t max, std::vector<uint8_t>* out, std::string* err) {
  struct stat st{};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return *err = "the checkpoint is not a file", false;
  if (uint64_t(st.st_size) > max) return *err = "the checkpoint is larger than 64 GiB", false;
  out->resize(size_t(st.st_size));
  size_t off = 0;
  while (off < out->size()) {
    ssize_t n = pread(fd, out->data() + off, out->size() - off, off_t(off));
    if (n <= 0) return *err = "the checkpoint could not be read", false;
    off += size_t(n);
  }
  return true;
}

int connect_unix(const std::string& path, std::string* err) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) return *err = "socket path too long: " + path, -1;
  std::strcpy(addr.sun_path, path.c_str());
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    *err = "cannot reach the destination's admin socket " + path + ": " + strerror(errno);
    if (fd >= 0) close(fd);
    return -1;
  }
  return fd;
}

// One line of answer within timeout_ms.
bool read_reply(int fd, int timeout_ms, std::string* line) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  char buf[512];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, int(left)) <= 0) continue;
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) return false;
    for (ssize_t i = 0; i < n; i++) {
      if (buf[i] == '\n') return true;
      line->push_back(buf[i]);
    }
    if (line->size() > 65536) return false;
  }
}

}  // namespace

std::string Server::migrate_session(uint64_t id, const std::string& to, int64_t peer_uid, uint64_t* new_id) {
  if (to == cfg_.admin_socket_path) return "the destination is this server";
  auto m = std::make_shared<Migration>();
  m->to = to;
  {
    std::lock_guard lk(live_mu_);
    Live* l = nullptr;
    for (Live& x : live_)
      if (x.s->id() == id) l = &x;
    if (!l) return "no session " + std::to_string(id);
    if (!l->migrate) return "session " + std::to_string(id) + " is not a local socket client's: only those can migrate";
    if (l->migration) return "session " + std::to_string(id) + " is already migrating";
    l->migration = m;
    l->migrate->store(true);
  }
  spdlog::warn("admin (uid {}): migrating session {} to {}", peer_uid, id, to);
  std::unique_lock lk(m->mu);
  // The session's thread takes it between two requests (a kernel running
  // now finishes first); it always answers, also when the session ends.
  m->cv.wait(lk, [&] { return m->done; });
  *new_id = m->new_id;
  return m->error;
}

bool Server::migrate_out(SocketSession& ss, Migration& m) {
  Session& s = *ss.session;
  const auto t0 = Clock::now();
  std::string why;
  CheckpointWriter w;
  if (!s.save(w, &why)) {
    spdlog::warn("session {}: not migrated: {}", s.id(), why);
    m.finish(why, 0);
    return false;
  }
  const uint64_t raw = w.content().size();
  std::vector<uint8_t> file = checkpoint_pack(w.content(), backend_.name(), s.device_bytes(), s.context().va_base());
  if (file.empty()) {
    m.finish("the checkpoint could not be compressed", 0);
    return false;
  }
  const auto t1 = Clock::now();
  int ck = sealed_memfd(file, &why);
  if (ck < 0) {
    m.finish(why, 0);
    return false;
  }
  int dst = connect_unix(m.to, &why);
  if (dst < 0) {
    close(ck);
    spdlog::warn("session {}: not migrated: {}", s.id(), why);
    m.finish(why, 0);
    return false;
  }
  const std::string line = json{{"cmd", "adopt"}, {"bytes", file.size()}, {"from_session", s.id()}}.dump() + "\n";
  const int fds[3] = {ss.region->fd(), ss.fd, ck};
  std::string reply;
  const bool sent = ring::send_with_fds(dst, line.data(), line.size(), fds);
  close(ck);
  const bool answered = sent && read_reply(dst, kAdoptTimeoutMs, &reply);
  close(dst);
  json r = json::parse(reply, nullptr, false);
  if (!answered || !r.is_object() || !r.contains("ok") || !r["ok"].is_boolean()) {
    why = sent ? "the destination did not answer" : "the destination took no descriptors";
  } else if (!r["ok"].get<bool>()) {
    why = r.contains("error") && r["error"].is_string() ? r["error"].get<std::string>() : "refused";
  } else {
    const uint64_t id = r.contains("session") && r["session"].is_number_unsigned() ? r["session"].get<uint64_t>() : 0;
    const double ms_save = std::chrono::duration<double, std::milli>(t1 - t0).count();
    const double ms_all = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    spdlog::info("session {}: migrated to {} as session {}: {} bytes of state ({} compressed), saved in {:.1f} ms, "
                 "paused {:.1f} ms",
                 s.id(), m.to, id, raw, file.size(), ms_save, ms_all);
    m.finish("", id);
    return true;
  }
  spdlog::warn("session {}: not migrated: {}; it goes on here", s.id(), why);
  m.finish("the destination: " + why, 0);
  return false;
}

std::string Server::adopt(const std::vector<int>& fds, int64_t peer_uid, uint64_t* sid) {
  if (fds.size() != 3) return "adopt wants three descriptors: region, client socket, checkpoint";
  if (draining_) return "the server is draining (wormholectl drain)";
  if (stopping_) return "the server is stopping";
  std::string err;
  // The region: the client maps it too, so it must be sealed at its size
  // (a shrunk file would fault our reads of it).
  const int seals = fcntl(fds[0], F_GET_SEALS);
  if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW))
    return "the region is not a memfd sealed at its size";
  auto ss = std::make_unique<SocketSession>();
  ss->region = ring::Region::attach_fd(fds[0], &err);
  if (!ss->region) return "region: " + err;
  if (ss->region->geometry().nchan != 1) return "region: not a socket client's (one channel)";
  // The client's socket, whose peer the kernel names.
  int type = 0;
  socklen_t tl = sizeof type;
  socklen_t cl = sizeof ss->cred;
  if (getsockopt(fds[1], SOL_SOCKET, SO_TYPE, &type, &tl) != 0 || type != SOCK_STREAM ||
      getsockopt(fds[1], SOL_SOCKET, SO_PEERCRED, &ss->cred, &cl) != 0 || ss->cred.pid <= 0)
    return "the client socket is not a connected Unix socket";
  std::vector<uint8_t> file, content;
  CheckpointHeader hdr{};
  if (!read_fd(fds[2], kCheckpointMaxBytes + sizeof hdr, &file, &err) ||
      !checkpoint_unpack(file, &hdr, &content, &err))
    return err;
  std::vector<uint8_t>().swap(file);
  if (std::string(hdr.backend) != backend_.name())
    return std::string("a session of the ") + hdr.backend + " backend; this server runs the " + backend_.name() +
           " backend";
  ContextLimits lim;
  lim.memory_quota = cfg_.quota_bytes;
  lim.va_base = hdr.va_base;
  if (auto b = uid_budgets_.find(uint32_t(ss->cred.uid)); b != uid_budgets_.end()) lim.shared = b->second;
  auto ctx = backend_.create_context(0, lim, &err);
  if (!ctx) return "context: " + err;
  if (hdr.device_bytes > 0) {
    uint64_t free_b = 0, total = 0;
    ctx->mem_info(&free_b, &total);
    if (hdr.device_bytes > free_b)
      return "the session holds " + std::to_string(hdr.device_bytes) + " bytes of device memory; " +
             std::to_string(free_b) + " are free to it here";
  }
  ss->ch = ring::ServerChannel::take_over(*ss->region, 0, &err);
  if (!ss->ch) return "channel: " + err;
  *sid = next_session_++;
  ss->session = std::make_unique<Session>(*sid, backend_, std::move(ctx), ss->ch->data(), stats_);
  CheckpointReader rd(content);
  if (!ss->session->restore(rd, &err)) {
    *sid = 0;
    return "restore: " + err;  // ss goes: our channel end stops beating, the source's goes on
  }
  ss->fd = fcntl(fds[1], F_DUPFD_CLOEXEC, 0);
  if (ss->fd < 0) return "dup: " + std::string(strerror(errno));
  ss->pinned = std::make_unique<SocketPinnedSource>(ss->fd, uint32_t(ss->cred.uid), *sid, pinned_budget_);
  spdlog::info("session {}: adopted (admin uid {}): client pid {} uid {}, {} bytes of device memory", *sid, peer_uid,
               int64_t(ss->cred.pid), int64_t(ss->cred.uid), ss->session->device_bytes());
  SocketSession* raw = ss.release();
  track([this, raw] { run_socket_session(std::unique_ptr<SocketSession>(raw)); });
  return {};
}

}  // namespace wh::server
