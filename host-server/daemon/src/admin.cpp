// The admin socket (wormholectl): one JSON object per line in, one per
// line out, then the connection closes. Everything read is validated like
// any guest input: bounded length and time, a JSON object with a known
// command and arguments of the right type; anything else is answered with
// {"ok":false,"error":...}, never a crash.
#include <grp.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "server.hpp"
#include "wormhole/fd_pass.hpp"
#include "wormhole/proto/dispatch.hpp"
#include "wormhole/ptx/engine.hpp"

namespace wh::server {

namespace {

constexpr size_t kMaxAdminLine = 4096;
constexpr int kAdminReadMs = 2000;

using nlohmann::json;

json fail(const std::string& why) { return json{{"ok", false}, {"error", why}}; }

// One line (without its '\n') within kMaxAdminLine bytes and kAdminReadMs,
// and the descriptors that came with it (a migrating session's).
bool read_line(int fd, std::string* out, std::vector<int>* fds, std::string* err) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kAdminReadMs);
  char buf[512];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return *err = "no request line within 2 s", false;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, int(left.count())) <= 0) continue;
    int got_fds[ring::kMaxPassedFds];
    size_t got = 0;
    ssize_t n = ring::recv_with_fds(fd, buf, sizeof buf, got_fds, ring::kMaxPassedFds, &got);
    fds->insert(fds->end(), got_fds, got_fds + got);
    if (n <= 0) return *err = "connection closed before a full line", false;
    for (ssize_t i = 0; i < n; i++) {
      if (buf[i] == '\n') return true;
      out->push_back(buf[i]);
    }
    if (out->size() > kMaxAdminLine) return *err = "request longer than 4096 bytes", false;
  }
}

void write_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    pollfd p{fd, POLLOUT, 0};
    if (poll(&p, 1, kAdminReadMs) <= 0) return;
    ssize_t n = send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return;
    off += size_t(n);
  }
}

}  // namespace

std::string Server::admin_request(const std::string& line, int64_t peer_uid, const std::vector<int>& fds) {
  json rq = json::parse(line, nullptr, false);
  json out;
  if (rq.is_discarded() || !rq.is_object()) {
    out = fail("the request is not a JSON object");
  } else if (!rq.contains("cmd") || !rq["cmd"].is_string()) {
    out = fail("no \"cmd\" string");
  } else {
    const std::string cmd = rq["cmd"];
    const auto now = std::chrono::steady_clock::now();
    if (cmd == "sessions") {
      json list = json::array();
      std::lock_guard lk(live_mu_);
      for (const Live& l : live_) {
        const SessionCounters& c = l.s->counters();
        json e{{"id", l.s->id()},
               {"pid", l.pid},
               {"uid", l.uid},
               {"vm", l.vm},
               {"channel", l.channel},
               {"uptime_s", std::chrono::duration<double>(now - l.since).count()},
               {"calls", c.calls.load()},
               {"errors", c.errors.load()},
               {"bytes_in", c.bytes_in.load()},
               {"bytes_out", c.bytes_out.load()},
               {"device_bytes", c.device_bytes.load()},
               {"kernels", c.kernels.load()},
               {"kernel_s", double(c.kernel_ns.load()) / 1e9},
               {"thread_instructions", c.thread_instructions.load()}};
        if (l.vm.empty()) e.erase("vm"), e.erase("channel");
        list.push_back(std::move(e));
      }
      out = json{{"ok", true}, {"sessions", std::move(list)}};
    } else if (cmd == "kill") {
      if (!rq.contains("session") || !rq["session"].is_number_unsigned()) {
        out = fail("kill wants \"session\": a session id (a number, from `wormholectl sessions`)");
      } else {
        const uint64_t id = rq["session"];
        if (kill_session(id)) {
          spdlog::warn("admin (uid {}): killing session {}", peer_uid, id);
          out = json{{"ok", true}, {"session", id}};
        } else {
          out = fail("no session " + std::to_string(id));
        }
      }
    } else if (cmd == "stats") {
      uint64_t calls = 0, errors = 0, posted = 0, device = 0;
      json ops = json::array();
      const double k = Stats::ns_per_tick();
      const std::vector<OpFigures> figs = stats_.ops();
      for (size_t i = 1; i < proto::kOpCount; i++) {
        const OpFigures& f = figs[i];
        if (!f.calls) continue;
        calls += f.calls;
        errors += f.errors;
        posted += f.posted;
        ops.push_back(json{{"op", proto::op_name(proto::kAllOps[i])},
                           {"calls", f.calls},
                           {"posted", f.posted},
                           {"errors", f.errors},
                           {"bytes_in", f.bytes_in},
                           {"bytes_out", f.bytes_out},
                           {"mean_us", double(f.ticks) * k / 1e3 / double(f.calls)}});
      }
      int live = 0;
      uint64_t kernels = stats_.kernels.load(), kernel_ns = stats_.kernel_ns.load(),
               thread_instr = stats_.thread_instructions.load();  // ended sessions, then the live ones
      {
        std::lock_guard lk(live_mu_);
        for (const Live& l : live_) {
          const SessionCounters& c = l.s->counters();
          device += c.device_bytes.load(), live++;
          kernels += c.kernels.load(), kernel_ns += c.kernel_ns.load(), thread_instr += c.thread_instructions.load();
        }
      }
      out = json{{"ok", true},
                 {"backend", backend_.name()},
                 {"uptime_s", std::chrono::duration<double>(now - started_).count()},
                 {"sessions", live},
                 {"sessions_total", stats_.sessions.load()},
                 {"draining", draining_.load()},
                 {"calls", calls},
                 {"posted", posted},
                 {"errors", errors},
                 {"rejected", stats_.rejected.load()},
                 {"bytes_htod", stats_.bytes_htod.load()},
                 {"bytes_dtoh", stats_.bytes_dtoh.load()},
                 {"bytes_dtod", stats_.bytes_dtod.load()},
                 {"bytes_peer_in", stats_.bytes_peer_in.load()},
                 {"bytes_peer_out", stats_.bytes_peer_out.load()},
                 {"device_bytes", device},
                 {"kernels", kernels},
                 {"kernel_s", double(kernel_ns) / 1e9},
                 {"thread_instructions", thread_instr},
                 {"ops", std::move(ops)}};
      // The sim device's PTX compiler and its cache (docs/ptx.md); zero elsewhere.
      const auto cs = wh::ptx::compile_stats();
      out["ptx_compile"] = json{{"kernels", cs.kernels},
                                {"functions", cs.functions},
                                {"instructions", cs.instructions},
                                {"seconds", cs.seconds},
                                {"cache_hits", cs.shared_loads}};
    } else if (cmd == "migrate") {
      if (!rq.contains("session") || !rq["session"].is_number_unsigned() || !rq.contains("to") ||
          !rq["to"].is_string()) {
        out = fail("migrate wants \"session\": a session id and \"to\": the destination server's admin socket");
      } else {
        uint64_t new_id = 0;
        const auto t0 = std::chrono::steady_clock::now();
        const uint32_t wait_s = rq.contains("wait_s") && rq["wait_s"].is_number_unsigned()
                                    ? uint32_t(std::min<uint64_t>(rq["wait_s"].get<uint64_t>(), 86400))
                                    : 0;
        std::string err = migrate_session(rq["session"], Migration::Kind::Move, rq["to"], peer_uid, &new_id, wait_s);
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        out = err.empty() ? json{{"ok", true}, {"session", rq["session"]}, {"new_session", new_id}, {"ms", ms}}
                          : fail(err);
      }
    } else if (cmd == "checkpoint" || cmd == "resume") {
      const bool ck = cmd == "checkpoint";
      if (!rq.contains("session") || !rq["session"].is_number_unsigned() ||
          (ck && (!rq.contains("file") || !rq["file"].is_string()))) {
        out = fail(ck ? "checkpoint wants \"session\": a session id and \"file\": an absolute path"
                      : "resume wants \"session\": a session id");
      } else {
        uint64_t n = 0;
        std::string err = migrate_session(rq["session"], ck ? Migration::Kind::Checkpoint : Migration::Kind::Resume,
                                          ck ? rq["file"].get<std::string>() : std::string(), peer_uid, &n);
        out = !err.empty() ? fail(err)
              : ck         ? json{{"ok", true}, {"session", rq["session"]}, {"bytes", n}}
                           : json{{"ok", true}, {"session", rq["session"]}};
      }
    } else if (cmd == "restore") {
      CheckpointHeader h{};
      std::string err = !rq.contains("file") || !rq["file"].is_string()
                            ? "restore wants \"file\": a checkpoint file"
                            : restore_file(rq["file"], &h);
      if (err.empty())
        spdlog::warn("admin (uid {}): restored {}: waiting for client pid {} to resume", peer_uid,
                     rq["file"].get<std::string>(), h.owner_pid);
      out = err.empty() ? json{{"ok", true}, {"pid", h.owner_pid}, {"uid", h.owner_uid}, {"device_bytes", h.device_bytes}}
                        : fail(err);
    } else if (cmd == "adopt") {
      // From another server's migrate_out, with three descriptors.
      uint64_t sid = 0;
      std::string err = adopt(fds, peer_uid, &sid);
      if (!err.empty()) spdlog::warn("admin (uid {}): a migrated session was refused: {}", peer_uid, err);
      out = err.empty() ? json{{"ok", true}, {"session", sid}} : fail(err);
    } else if (cmd == "drain") {
      spdlog::warn("admin (uid {}): draining: no new sessions; stopping when the last one ends", peer_uid);
      drain();
      int live = live_sessions_.load();
      out = json{{"ok", true}, {"sessions", live}};
    } else {
      out = fail("unknown command '" + cmd.substr(0, 64) + "' (sessions, kill, stats, drain, migrate, checkpoint, resume, restore)");
    }
  }
  // Strings from the request are echoed; invalid UTF-8 is replaced, not thrown.
  return out.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

bool Server::start_admin() {
  if (cfg_.admin_socket_path == "off") return true;
  const std::string& path = cfg_.admin_socket_path;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string tmp = path + "." + std::to_string(getpid()) + ".new";
  if (tmp.size() >= sizeof addr.sun_path) {
    spdlog::error("admin socket path too long: {}", path);
    return false;
  }
  gid_t gid = gid_t(-1);
  if (!cfg_.admin_group.empty()) {
    group g{}, *res = nullptr;
    std::vector<char> buf(16384);
    if (getgrnam_r(cfg_.admin_group.c_str(), &g, buf.data(), buf.size(), &res) != 0 || !res) {
      spdlog::error("--admin-socket-group {}: no such group", cfg_.admin_group);
      return false;
    }
    gid = res->gr_gid;
  }
  admin_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  std::strcpy(addr.sun_path, tmp.c_str());
  unlink(tmp.c_str());
  // Made private and listening under a temporary name, then renamed into
  // place (this server owns the client socket, so a file at the admin path
  // is a stale one).
  if (admin_fd_ < 0 || bind(admin_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      (gid != gid_t(-1) && chown(tmp.c_str(), uid_t(-1), gid) != 0) ||
      chmod(tmp.c_str(), mode_t(cfg_.admin_mode)) != 0 || listen(admin_fd_, 16) != 0 ||
      rename(tmp.c_str(), path.c_str()) != 0) {
    spdlog::error("cannot listen on the admin socket {}: {}", path, strerror(errno));
    unlink(tmp.c_str());
    if (admin_fd_ >= 0) close(admin_fd_);
    admin_fd_ = -1;
    return false;
  }
  struct stat st{};
  if (stat(path.c_str(), &st) == 0) admin_dev_ = uint64_t(st.st_dev), admin_ino_ = uint64_t(st.st_ino);
  spdlog::info("admin socket (wormholectl): {}", path);
  return true;
}

void Server::serve_admin() {
  while (!stopping_) {
    pollfd p{admin_fd_, POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) continue;
    int fd = accept4(admin_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    ucred cred{};
    socklen_t cl = sizeof cred;
    int64_t uid = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) == 0 ? int64_t(cred.uid) : -1;
    std::string line, err;
    std::vector<int> fds;
    if (read_line(fd, &line, &fds, &err)) {
      write_all(fd, admin_request(line, uid, fds));
    } else {
      spdlog::debug("admin socket: {}", err);
      write_all(fd, fail(err).dump() + "\n");
    }
    for (int f : fds) close(f);  // what a request keeps, it duplicated
    close(fd);
  }
  close(admin_fd_);
  admin_fd_ = -1;
  struct stat now{};
  if (stat(cfg_.admin_socket_path.c_str(), &now) == 0 && uint64_t(now.st_dev) == admin_dev_ &&
      uint64_t(now.st_ino) == admin_ino_)
    unlink(cfg_.admin_socket_path.c_str());
}

}  // namespace wh::server
