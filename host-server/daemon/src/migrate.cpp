// Moving a live session to another server on this host (wormholectl
// migrate; docs/migration.md).
//
// The source pauses the session between two requests, saves it
// (Session::save) and hands the destination the descriptors over the
// destination's admin socket: the client's region, the client's socket, the
// checkpoint (a sealed memfd) and the memfds of pinned memory grown past
// the region. The destination restores the session at
// the same handles and device addresses, takes over the channel where the
// source stopped reading and serves it; the client sees a pause. Whatever
// fails before the destination answers leaves the session running on the
// source.
#include <fcntl.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <new>
#include <nlohmann/json.hpp>

#include "server.hpp"
#include "wormhole/fd_pass.hpp"
#include "wormhole/proto/wire.hpp"
#include "wormhole/server/checkpoint.hpp"

namespace wh::server {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// How long the source waits for the destination to restore and answer.
constexpr int kAdoptTimeoutMs = 600000;

// A memfd for a move's checkpoint; -1 and *err otherwise.
int checkpoint_memfd(std::string* err) {
  int fd = memfd_create("wormhole-checkpoint", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) *err = std::string("memfd_create: ") + strerror(errno);
  return fd;
}

// Its header written (the content stored after it) and sealed.
bool seal_checkpoint(int fd, const CheckpointHeader& given, uint64_t content_bytes, std::string* err) {
  const CheckpointHeader h = checkpoint_stored_header(given, content_bytes);
  if (pwrite(fd, &h, sizeof h, 0) != ssize_t(sizeof h) ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
    return *err = std::string("writing the checkpoint: ") + strerror(errno), false;
  return true;
}

// A checkpoint behind a descriptor: mapped when it is a memfd sealed at its
// size (a migration's: nothing copied, and no one can shrink it under the
// mapping), else read whole.
struct CheckpointFile {
  Bytes copy;
  void* map = nullptr;
  size_t size = 0;
  bool write_sealed = false;  // mapped, and no one can change it while it is read
  std::span<const uint8_t> bytes() const {
    return map ? std::span<const uint8_t>(static_cast<const uint8_t*>(map), size) : std::span<const uint8_t>(copy);
  }
  ~CheckpointFile() {
    if (map) munmap(map, size);
  }
};

bool read_checkpoint(int fd, CheckpointFile* f, std::string* err) {
  struct stat st{};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return *err = "the checkpoint is not a file", false;
  if (uint64_t(st.st_size) > kCheckpointMaxBytes + sizeof(CheckpointHeader))
    return *err = "the checkpoint is larger than 64 GiB", false;
  f->size = size_t(st.st_size);
  const int seals = fcntl(fd, F_GET_SEALS);
  if (seals >= 0 && (seals & F_SEAL_SHRINK) && f->size) {
    void* m = mmap(nullptr, f->size, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (m != MAP_FAILED) {
      f->map = m;
      f->write_sealed = seals & F_SEAL_WRITE;
      return true;
    }
  }
  f->copy.resize(f->size);
  size_t off = 0;
  while (off < f->size) {
    ssize_t n = pread(fd, f->copy.data() + off, f->size - off, off_t(off));
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

std::string Server::migrate_session(uint64_t id, Migration::Kind kind, const std::string& to, int64_t peer_uid,
                                    uint64_t* new_id, uint32_t wait_s) {
  if (kind == Migration::Kind::Move && to == cfg_.admin_socket_path) return "the destination is this server";
  auto m = std::make_shared<Migration>();
  m->kind = kind;
  m->to = to;
  {
    std::lock_guard lk(live_mu_);
    Live* l = nullptr;
    for (Live& x : live_)
      if (x.s->id() == id) l = &x;
    if (!l) return "no session " + std::to_string(id);
    const std::string sid = "session " + std::to_string(id);
    if (!l->migrate) return sid + " is a VM channel's: only socket and network clients' sessions can migrate";
    const bool to_network = to.rfind("ucx://", 0) == 0;
    if (l->network && kind == Migration::Kind::Move && !to_network)
      return sid + " is a network client's: it moves to another ucx:// server (migrate --to ucx://HOST:PORT)";
    if (!l->network && kind == Migration::Kind::Move && to_network)
      return sid + " is a local client's: it moves to a server on this host (migrate --to SOCKET)";
    if (l->network && kind == Migration::Kind::Move && to == cfg_.listen_url) return "the destination is this server";
    if (l->network && kind == Migration::Kind::Checkpoint)
      return sid + " is a network client's: it can move to another ucx:// server, not be checkpointed to a file";
    if (l->network && kind == Migration::Kind::Resume) return sid + " is not held (wormholectl checkpoint holds one)";
    if (l->migration) return "session " + std::to_string(id) + " is already migrating";
    l->migration = m;
    l->migrate->store(true);
    // A network client's session stops before its next synchronous call, which a
    // program busy on its CPU may not make for a while: by default a minute.
    if (!wait_s && l->network) wait_s = 60;
  }
  static const char* const what[] = {"migrating session {} to {}", "checkpointing session {} to {}",
                                     "resuming session {}{}"};
  spdlog::warn(fmt::runtime(std::string("admin (uid {}): ") + what[int(kind)]), peer_uid, id, to);
  std::unique_lock lk(m->mu);
  // The session's thread takes it between two requests (a kernel running
  // now finishes first); it always answers, also when the session ends. Not
  // taken within wait_s: withdrawn, unless the thread took it meanwhile.
  if (wait_s && !m->cv.wait_for(lk, std::chrono::seconds(wait_s), [&] { return m->done; })) {
    lk.unlock();
    {
      std::lock_guard ll(live_mu_);
      for (Live& x : live_)
        if (x.migration == m) {
          x.migration = nullptr;
          x.migrate->store(false);
          spdlog::warn("admin (uid {}): session {} not moved: it did not stop within {} s", peer_uid, id, wait_s);
          return "session " + std::to_string(id) + " did not reach a point where it can stop within " +
                 std::to_string(wait_s) + " s (a network client's session stops before its next synchronous call)" +
                 ": it goes on here";
        }
    }
    lk.lock();
  }
  m->cv.wait(lk, [&] { return m->done; });
  *new_id = m->new_id;
  return m->error;
}

bool Server::migrate_out(SocketSession& ss, Migration& m, bool* lost) {
  *lost = false;
  Session& s = *ss.session;
  const auto t0 = Clock::now();
  std::string why;
  // The content goes straight into the memfd handed on, after its header.
  int ck = checkpoint_memfd(&why);
  if (ck < 0) {
    m.finish(why, 0);
    return false;
  }
  std::vector<int> segment_fds;
  uint64_t raw = 0;
  bool saved = false;
  {
    CheckpointWriter w(ck, sizeof(CheckpointHeader));
    try {
      saved = s.save(w, &why, &segment_fds);
    } catch (const std::bad_alloc&) {
      why = "no memory for the checkpoint";
    }
    raw = w.size();
    if (saved && !w.finish()) saved = false, why = std::string("sizing the checkpoint: ") + strerror(errno);
  }
  if (!saved) {
    close(ck);
    spdlog::warn("session {}: not migrated: {}", s.id(), why);
    m.finish(why, 0);
    return false;
  }
  const auto t_saved = Clock::now();
  CheckpointHeader h{};
  std::snprintf(h.backend, sizeof h.backend, "%s", backend_.name());
  h.device_bytes = s.device_bytes();
  h.va_base = s.context().va_base();
  if (!seal_checkpoint(ck, h, raw, &why)) {
    close(ck);
    m.finish(why, 0);
    return false;
  }
  const uint64_t packed = sizeof(CheckpointHeader) + raw;
  const auto t1 = Clock::now();
  int dst = connect_unix(m.to, &why);
  if (dst < 0) {
    close(ck);
    spdlog::warn("session {}: not migrated: {}", s.id(), why);
    m.finish(why, 0);
    return false;
  }
  const std::string line = json{{"cmd", "adopt"}, {"bytes", packed}, {"from_session", s.id()}}.dump() + "\n";
  std::vector<int> fds = {ss.region->fd(), ss.fd, ck};
  fds.insert(fds.end(), segment_fds.begin(), segment_fds.end());
  std::string reply;
  const bool sent = ring::send_with_fds(dst, line.data(), line.size(), fds);
  close(ck);
  const bool answered = sent && read_reply(dst, kAdoptTimeoutMs, &reply);
  close(dst);
  json r = json::parse(reply, nullptr, false);
  if (!answered || !r.is_object() || !r.contains("ok") || !r["ok"].is_boolean()) {
    why = sent ? "it did not answer" : "it took no descriptors";
  } else if (!r["ok"].get<bool>()) {
    why = r.contains("error") && r["error"].is_string() ? r["error"].get<std::string>() : "refused";
  } else {
    const uint64_t id = r.contains("session") && r["session"].is_number_unsigned() ? r["session"].get<uint64_t>() : 0;
    const double ms_save = std::chrono::duration<double, std::milli>(t1 - t0).count();
    const double ms_all = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    const double ms_read = std::chrono::duration<double, std::milli>(t_saved - t0).count();
    spdlog::info("session {}: migrated to {} as session {}: {} bytes of state, read into a memfd in {:.1f} ms, "
                 "sealed in {:.1f} ms, paused {:.1f} ms",
                 s.id(), m.to, id, raw, ms_read, ms_save - ms_read, ms_all);
    s.own_grown(false);  // the destination serves the segments' pages now
    m.finish("", id);
    return true;
  }
  if (sent && !answered && ss.ch->moved_on()) {
    // It took the channel over and ran requests, then ended: their results are
    // not here, so serving again would run them twice or on stale state.
    *lost = true;
    spdlog::error("session {}: the destination took it over and ended without answering: the session is lost", s.id());
    m.finish("the destination took the session over and ended without answering: the session is lost", 0);
    return false;
  }
  spdlog::warn("session {}: not migrated: the destination: {}; the session goes on here", s.id(), why);
  m.finish("the destination: " + why, 0);
  return false;
}

std::string Server::adopt(const std::vector<int>& fds, int64_t peer_uid, uint64_t* sid) {
  if (fds.size() < 3) return "adopt wants the region, the client socket, the checkpoint and any pinned segments";
  std::string err;
  Bytes storage;
  std::span<const uint8_t> content;
  CheckpointHeader hdr{};
  const auto t0 = Clock::now();
  auto file = std::make_unique<CheckpointFile>();
  if (!read_checkpoint(fds[2], file.get(), &err)) return err;
  const auto t1 = Clock::now();
  if (!checkpoint_open(file->bytes(), &hdr, &storage, &content, &err)) return err;
  // Stored content is read in place: only from a copy, or a mapping no one can write.
  if ((hdr.flags & kCheckpointStored) && file->map && !file->write_sealed)
    return "an uncompressed checkpoint must come in a memfd sealed against writes";
  const auto t2 = Clock::now();
  std::unique_ptr<SocketSession> ss;
  if (err = adopt_session(fds[0], fds[1], hdr, content, peer_uid, &ss, std::span<const int>(fds).subspan(3));
      !err.empty())
    return err;
  ss->session->own_grown(true);
  auto ms = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
  file.reset();
  spdlog::info("session {}: checkpoint read in {:.1f} ms, unpacked in {:.1f} ms, restored in {:.1f} ms",
               ss->session->id(), ms(t0, t1), ms(t1, t2), ms(t2, Clock::now()));
  *sid = ss->session->id();
  SocketSession* raw = ss.release();
  track([this, raw] { run_socket_session(std::unique_ptr<SocketSession>(raw)); });
  return {};
}

std::unique_ptr<Context> Server::restore_context(const CheckpointHeader& hdr, uint32_t uid, std::string* err) {
  const std::string kind(hdr.backend, strnlen(hdr.backend, sizeof hdr.backend));  // (a peer's bytes)
  if (kind != backend_.name()) {
    *err = "a session of the " + kind + " backend; this server runs the " + backend_.name() + " backend";
    return nullptr;
  }
  ContextLimits lim;
  lim.memory_quota = cfg_.quota_bytes;
  lim.va_base = hdr.va_base;
  if (auto b = uid_budgets_.find(uid); b != uid_budgets_.end()) lim.shared = b->second;
  lim.tenant = "uid:" + std::to_string(uid);
  auto ctx = backend_.create_context(0, lim, err);
  if (!ctx) {
    *err = "context: " + *err;
    return nullptr;
  }
  uint64_t free_b = 0, total = 0;
  if (hdr.device_bytes > 0 && (ctx->mem_info(&free_b, &total), hdr.device_bytes > free_b)) {
    *err = "the session holds " + std::to_string(hdr.device_bytes) + " bytes of device memory; " +
           std::to_string(free_b) + " are free to it here";
    return nullptr;
  }
  return ctx;
}

std::string Server::adopt_session(int region_fd, int client_fd, const CheckpointHeader& hdr,
                                  std::span<const uint8_t> content, int64_t peer_uid,
                                  std::unique_ptr<SocketSession>* out, std::span<const int> segment_fds) {
  if (draining_) return "the server is draining (wormholectl drain)";
  if (stopping_) return "the server is stopping";
  std::string err;
  // The region: the client maps it too, so it must be sealed at its size
  // (a shrunk file would fault our reads of it).
  const int seals = fcntl(region_fd, F_GET_SEALS);
  if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW))
    return "the region is not a memfd sealed at its size";
  auto ss = std::make_unique<SocketSession>();
  ss->region = ring::Region::attach_fd(region_fd, &err);
  if (!ss->region) return "region: " + err;
  if (ss->region->geometry().nchan != 1) return "region: not a socket client's (one channel)";
  // The client's socket, whose peer the kernel names.
  int type = 0;
  socklen_t tl = sizeof type;
  socklen_t cl = sizeof ss->cred;
  if (getsockopt(client_fd, SOL_SOCKET, SO_TYPE, &type, &tl) != 0 || type != SOCK_STREAM ||
      getsockopt(client_fd, SOL_SOCKET, SO_PEERCRED, &ss->cred, &cl) != 0 || ss->cred.pid <= 0)
    return "the client socket is not a connected Unix socket";
  auto ctx = restore_context(hdr, uint32_t(ss->cred.uid), &err);
  if (!ctx) return err;
  ss->ch = ring::ServerChannel::take_over(*ss->region, 0, &err);
  if (!ss->ch) return "channel: " + err;
  const uint64_t sid = next_session_++;
  ss->session = std::make_unique<Session>(sid, backend_, std::move(ctx), ss->ch->data(), stats_);
  ss->fd = fcntl(client_fd, F_DUPFD_CLOEXEC, 0);
  if (ss->fd < 0) return "dup: " + std::string(strerror(errno));
  ss->pinned = std::make_unique<SocketPinnedSource>(ss->fd, uint32_t(ss->cred.uid), sid, pinned_budget_);
  if (cfg_.pinned_budget_bytes && ss->cred.uid != uid_t(-1)) ss->session->set_pinned_source(ss->pinned.get());
  CheckpointReader rd(content);
  if (!ss->session->restore(rd, &err, segment_fds))
    return "restore: " + err;  // ss goes: our channel end stops beating, the source's goes on
  // Served here now: no longer held for a restore.
  auto* st = reinterpret_cast<proto::DataAreaStatus*>(ss->ch->data().data());
  __atomic_store_n(&st->held, uint32_t(0), __ATOMIC_RELEASE);
  spdlog::info("session {}: adopted (admin uid {}): client pid {} uid {}, {} bytes of device memory", sid, peer_uid,
               int64_t(ss->cred.pid), int64_t(ss->cred.uid), ss->session->device_bytes());
  *out = std::move(ss);
  return {};
}

bool Server::checkpoint_out(SocketSession& ss, Migration& m) {
  Session& s = *ss.session;
  std::string why;
  if (m.to.empty() || m.to[0] != '/') {
    m.finish("the checkpoint file must be an absolute path", 0);
    return false;
  }
  CheckpointWriter w;
  if (!s.save(w, &why)) {
    m.finish(why, 0);
    return false;
  }
  CheckpointHeader h{};
  std::snprintf(h.backend, sizeof h.backend, "%s", backend_.name());
  h.device_bytes = s.device_bytes();
  h.va_base = s.context().va_base();
  h.owner_pid = uint32_t(ss.cred.pid);
  h.owner_uid = uint64_t(ss.cred.uid);
  if (getrandom(h.token, sizeof h.token, 0) != ssize_t(sizeof h.token)) {
    m.finish("no random token", 0);
    return false;
  }
  // Created, never overwritten; readable by the server's user only.
  int fd = open(m.to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    m.finish(m.to + ": " + strerror(errno), 0);
    return false;
  }
  uint64_t written = 0;
  const bool ok = checkpoint_write(fd, w.content(), h, &written) && fsync(fd) == 0;
  close(fd);
  if (!ok) {
    unlink(m.to.c_str());
    m.finish(m.to + ": could not be written", 0);
    return false;
  }
  // The client learns the token, then that its session is held.
  auto* st = reinterpret_cast<proto::DataAreaStatus*>(ss.ch->data().data());
  std::memcpy(st->resume_token, h.token, sizeof h.token);
  __atomic_store_n(&st->held, uint32_t(1), __ATOMIC_RELEASE);
  spdlog::info("session {}: checkpointed to {} ({} bytes); held until this server goes or it is resumed", s.id(),
               m.to, written);
  m.finish("", written);
  return true;
}

std::string Server::restore_file(const std::string& path, CheckpointHeader* hdr) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return path + ": " + strerror(errno);
  CheckpointFile file;
  PendingRestore p;
  std::string err;
  const bool ok = read_checkpoint(fd, &file, &err) && checkpoint_unpack(file.bytes(), &p.hdr, &p.content, &err);
  close(fd);
  if (!ok) return path + ": " + err;
  if (std::string(p.hdr.backend) != backend_.name())
    return path + ": a session of the " + p.hdr.backend + " backend; this server runs the " + backend_.name() +
           " backend";
  if (!p.hdr.owner_pid) return path + ": not a checkpoint a client resumes from (no owner)";
  *hdr = p.hdr;
  std::lock_guard lk(restores_mu_);
  if (!restores_.emplace(std::make_pair(p.hdr.token[0], p.hdr.token[1]), std::move(p)).second)
    return path + ": already waiting for its client";
  return {};
}

void Server::resume_client(int fd, const ucred& cred, const proto::ResumeHello& rh, std::span<const int> passed) {
  proto::HelloReply rep{};
  rep.magic = proto::kHelloMagic;
  rep.version = proto::kVersion;
  auto refuse = [&](int32_t status, const std::string& why) {
    rep.status = status;
    std::snprintf(rep.message, sizeof rep.message, "%s", why.c_str());
    ring::send_with_fd(fd, &rep, sizeof rep, -1);
    spdlog::warn("refused a resuming client (pid {}): {}", int64_t(cred.pid), why);
    close(fd);
  };
  PendingRestore p;
  {
    std::lock_guard lk(restores_mu_);
    auto it = restores_.find({rh.token[0], rh.token[1]});
    // Not restored yet: the client tries again (the operator may be on the way).
    if (it == restores_.end()) return refuse(cudaErrorNotReady, "no checkpoint of this session is waiting here");
    // Only the process the session belongs to takes it back.
    if (uint64_t(cred.pid) != it->second.hdr.owner_pid || uint64_t(cred.uid) != it->second.hdr.owner_uid)
      return refuse(cudaErrorInvalidValue, "the checkpoint belongs to another process");
    p = std::move(it->second);
    restores_.erase(it);
  }
  if (passed.empty()) return refuse(cudaErrorInvalidValue, "no region came with the resume");
  std::unique_ptr<SocketSession> ss;
  if (std::string err = adopt_session(passed[0], fd, p.hdr, p.content, -1, &ss, passed.subspan(1)); !err.empty()) {
    // Not consumed: the operator sees why in the log and may restore again.
    return refuse(cudaErrorDevicesUnavailable, err);
  }
  Bytes().swap(p.content);
  ss->session->own_grown(true);
  close(fd);  // adopt_session duplicated it
  rep.status = 0;
  rep.session_id = ss->session->id();
  if (!ring::send_with_fd(ss->fd, &rep, sizeof rep, -1)) return;  // the client went: ss ends here
  spdlog::info("session {}: client pid {} resumed from its checkpoint", rep.session_id, int64_t(cred.pid));
  run_socket_session(std::move(ss));
}

}  // namespace wh::server
