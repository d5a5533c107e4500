// wormholectl: looks at and steers a running wormhole-server through its
// admin socket (one JSON line out, one JSON line back).
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>

#include "paths.hpp"

using nlohmann::json;

namespace {

// Sends one request, returns the answer line; exits 1 with a message when
// the server cannot be reached or answers nothing.
json ask(const std::string& path, const json& rq, int timeout_s = 5) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) {
    std::fprintf(stderr, "wormholectl: admin socket path too long: %s\n", path.c_str());
    std::exit(2);
  }
  std::strcpy(addr.sun_path, path.c_str());
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    std::fprintf(stderr, "wormholectl: cannot reach the server's admin socket %s: %s\n", path.c_str(),
                 std::strerror(errno));
    std::exit(1);
  }
  const std::string line = rq.dump() + "\n";
  if (send(fd, line.data(), line.size(), MSG_NOSIGNAL) != ssize_t(line.size())) {
    std::fprintf(stderr, "wormholectl: %s: %s\n", path.c_str(), std::strerror(errno));
    std::exit(1);
  }
  std::string reply;
  char buf[4096];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, timeout_s * 1000) <= 0) {
      std::fprintf(stderr, "wormholectl: no answer from %s within %d s\n", path.c_str(), timeout_s);
      std::exit(1);
    }
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    reply.append(buf, size_t(n));
    if (reply.size() > (64u << 20)) break;
    if (reply.back() == '\n') break;
  }
  close(fd);
  json r = json::parse(reply, nullptr, false);
  if (r.is_discarded() || !r.is_object()) {
    std::fprintf(stderr, "wormholectl: unreadable answer from %s\n", path.c_str());
    std::exit(1);
  }
  return r;
}

std::string human_bytes(uint64_t b) {
  char s[32];
  if (b >= (1ull << 30)) std::snprintf(s, sizeof s, "%.1f GiB", double(b) / double(1ull << 30));
  else if (b >= (1ull << 20)) std::snprintf(s, sizeof s, "%.1f MiB", double(b) / double(1ull << 20));
  else if (b >= (1ull << 10)) std::snprintf(s, sizeof s, "%.1f KiB", double(b) / 1024.0);
  else std::snprintf(s, sizeof s, "%llu B", (unsigned long long)b);
  return s;
}

std::string human_time(double s) {
  char b[32];
  if (s >= 3600) std::snprintf(b, sizeof b, "%dh%02dm", int(s / 3600), int(s / 60) % 60);
  else if (s >= 60) std::snprintf(b, sizeof b, "%dm%02ds", int(s / 60), int(s) % 60);
  else std::snprintf(b, sizeof b, "%.1fs", s);
  return b;
}

void print_sessions(const json& r) {
  const auto& list = r["sessions"];
  if (list.empty()) {
    std::printf("no sessions\n");
    return;
  }
  std::printf("%-8s %-16s %-7s %9s %10s %10s %10s %10s %10s\n", "SESSION", "CLIENT", "UID", "UPTIME", "CALLS",
              "IN", "OUT", "DEVMEM", "KERNEL");
  for (const auto& s : list) {
    std::string client = s.contains("vm") ? s["vm"].get<std::string>() + ":" + std::to_string(s["channel"].get<int>()) +
                                                " pid " + std::to_string(s["pid"].get<int64_t>())
                                          : "pid " + std::to_string(s["pid"].get<int64_t>());
    const int64_t uid = s["uid"].get<int64_t>();
    std::printf("%-8llu %-16s %-7s %9s %10llu %10s %10s %10s %10s\n", (unsigned long long)s["id"].get<uint64_t>(),
                client.c_str(), uid < 0 ? "-" : std::to_string(uid).c_str(),
                human_time(s["uptime_s"].get<double>()).c_str(), (unsigned long long)s["calls"].get<uint64_t>(),
                human_bytes(s["bytes_in"].get<uint64_t>()).c_str(), human_bytes(s["bytes_out"].get<uint64_t>()).c_str(),
                human_bytes(s["device_bytes"].get<uint64_t>()).c_str(),
                human_time(s["kernel_s"].get<double>()).c_str());
  }
}

void print_stats(const json& r) {
  std::printf("backend        %s\n", r["backend"].get<std::string>().c_str());
  std::printf("uptime         %s\n", human_time(r["uptime_s"].get<double>()).c_str());
  std::printf("sessions       %d live, %llu since start%s\n", r["sessions"].get<int>(),
              (unsigned long long)r["sessions_total"].get<uint64_t>(), r["draining"].get<bool>() ? " (draining)" : "");
  std::printf("calls          %llu (%llu failed, %llu malformed)\n", (unsigned long long)r["calls"].get<uint64_t>(),
              (unsigned long long)r["errors"].get<uint64_t>(), (unsigned long long)r["rejected"].get<uint64_t>());
  std::printf("copies         %s to the device, %s from it, %s on it\n",
              human_bytes(r["bytes_htod"].get<uint64_t>()).c_str(), human_bytes(r["bytes_dtoh"].get<uint64_t>()).c_str(),
              human_bytes(r["bytes_dtod"].get<uint64_t>()).c_str());
  if (r.contains("bytes_peer_in") && (r["bytes_peer_in"].get<uint64_t>() || r["bytes_peer_out"].get<uint64_t>()))
    std::printf("peer copies    %s received from other servers, %s pushed to them\n",
                human_bytes(r["bytes_peer_in"].get<uint64_t>()).c_str(),
                human_bytes(r["bytes_peer_out"].get<uint64_t>()).c_str());
  std::printf("device memory  %s held by sessions\n", human_bytes(r["device_bytes"].get<uint64_t>()).c_str());
  if (r.contains("kernels")) {  // (a server before these counters leaves them out)
    const double ks = r["kernel_s"].get<double>();
    const uint64_t ti = r["thread_instructions"].get<uint64_t>();
    std::printf("kernels        %llu launches, %s in them", (unsigned long long)r["kernels"].get<uint64_t>(),
                human_time(ks).c_str());
    if (ti) std::printf("; %llu thread-instructions (%.1f M/s)", (unsigned long long)ti, ks > 0 ? double(ti) / ks / 1e6 : 0.0);
    std::printf("\n");
  }
  if (r.contains("ptx_compile")) {
    const json& c = r["ptx_compile"];
    if (c["kernels"].get<uint64_t>() || c["cache_hits"].get<uint64_t>())
      std::printf("PTX compiler   %llu kernels, %llu instructions compiled in %s; %llu module loads from the cache\n",
                  (unsigned long long)c["kernels"].get<uint64_t>(), (unsigned long long)c["instructions"].get<uint64_t>(),
                  human_time(c["seconds"].get<double>()).c_str(), (unsigned long long)c["cache_hits"].get<uint64_t>());
  }
  if (r["ops"].empty()) return;
  std::printf("\n%-28s %12s %10s %12s\n", "OPERATION", "CALLS", "ERRORS", "MEAN");
  for (const auto& o : r["ops"]) {
    char mean[32];
    std::snprintf(mean, sizeof mean, "%.2f us", o["mean_us"].get<double>());
    std::printf("%-28s %12llu %10llu %12s\n", o["op"].get<std::string>().c_str(),
                (unsigned long long)o["calls"].get<uint64_t>(), (unsigned long long)o["errors"].get<uint64_t>(), mean);
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"wormholectl: the sessions and statistics of a running wormhole-server, and its control"};
  app.set_version_flag("--version", "wormholectl " WH_VERSION);
  std::string socket_path = wh::server::default_socket_path(), admin_path;
  bool as_json = false;
  app.add_option("--socket", socket_path, "the server's client socket; the admin socket is found beside it")
      ->capture_default_str();
  app.add_option("--admin-socket", admin_path, "the server's admin socket (default: beside --socket)");
  app.add_flag("--json", as_json, "print the server's answer as JSON (one object) for scripts");
  app.require_subcommand(1, 1);
  app.fallthrough();  // --json after the subcommand too
  app.footer("Environment: WORMHOLE_SOCKET (the client socket, as the server's default).");
  auto* sessions = app.add_subcommand("sessions", "the sessions being served: client, uid, uptime, calls, bytes, "
                                                  "device memory, kernel time");
  uint64_t kill_id = 0;
  auto* kill = app.add_subcommand("kill", "end a session: its kernel is cancelled, its memory freed, its client "
                                          "gets cudaErrorDevicesUnavailable");
  kill->add_option("SESSION", kill_id, "the session's id (wormholectl sessions)")->required();
  auto* stats = app.add_subcommand("stats", "server-wide counters and per-operation statistics");
  auto* drain = app.add_subcommand("drain", "refuse new sessions; the server exits when the last one ends");
  uint64_t migrate_id = 0;
  std::string migrate_to, migrate_to_admin;
  auto* migrate = app.add_subcommand("migrate", "move a live session to another server (on this host, or over "
                                                "ucx:// for a network client's): its client pauses and goes on there "
                                                "(docs/migration.md)");
  migrate->add_option("SESSION", migrate_id, "the session's id (wormholectl sessions)")->required();
  auto* to = migrate->add_option("--to", migrate_to, "the destination server's client socket, or its ucx://HOST:PORT "
                                             "(a network client's session; the client must reach it there)");
  migrate->add_option("--to-admin", migrate_to_admin, "the destination server's admin socket (default: beside --to)")
      ->excludes(to);
  uint32_t migrate_wait = 0;
  migrate->add_option("--wait", migrate_wait,
                      "seconds the session may take to reach a point where it stops (a network client's: its next "
                      "synchronous call) before the move is given up; default 60 for a network client's, no limit "
                      "otherwise")
      ->check(CLI::Range(1, 86400));
  uint64_t ck_id = 0, resume_id = 0;
  std::string ck_file, restore_path;
  auto* checkpoint = app.add_subcommand("checkpoint", "save a session to a file and hold it: when this server goes, "
                                                      "its client resumes on the server that restores the file");
  checkpoint->add_option("SESSION", ck_id, "the session's id (wormholectl sessions)")->required();
  checkpoint->add_option("FILE", ck_file, "the checkpoint file to create (not overwritten)")->required();
  auto* resume = app.add_subcommand("resume", "serve a held (checkpointed) session here again");
  resume->add_option("SESSION", resume_id, "the session's id")->required();
  auto* restore = app.add_subcommand("restore", "load a checkpoint file; its client resumes here when its own server "
                                                "is gone");
  restore->add_option("FILE", restore_path, "the checkpoint file")->required()->check(CLI::ExistingFile);
  CLI11_PARSE(app, argc, argv);
  // The server opens the files: absolute paths, as this command sees them.
  auto absolute = [](const std::string& p) {
    if (p.empty() || p[0] == '/') return p;
    char cwd[4096];
    return getcwd(cwd, sizeof cwd) ? std::string(cwd) + "/" + p : p;
  };
  if (migrate->parsed() && migrate_to.empty() && migrate_to_admin.empty()) {
    std::fprintf(stderr, "wormholectl: migrate wants --to (the destination server's client socket)\n");
    return 2;
  }
  if (admin_path.empty()) admin_path = wh::server::admin_socket_beside(socket_path);

  json rq;
  if (sessions->parsed()) rq = {{"cmd", "sessions"}};
  else if (kill->parsed()) rq = {{"cmd", "kill"}, {"session", kill_id}};
  else if (stats->parsed()) rq = {{"cmd", "stats"}};
  else if (drain->parsed()) rq = {{"cmd", "drain"}};
  else if (migrate->parsed())
    rq = {{"cmd", "migrate"},
          {"session", migrate_id},
          {"to", migrate_to.rfind("ucx://", 0) == 0 ? migrate_to
                 : migrate_to_admin.empty()          ? wh::server::admin_socket_beside(migrate_to)
                                                     : migrate_to_admin}};
  if (migrate->parsed() && migrate_wait) rq["wait_s"] = migrate_wait;
  else if (checkpoint->parsed()) rq = {{"cmd", "checkpoint"}, {"session", ck_id}, {"file", absolute(ck_file)}};
  else if (resume->parsed()) rq = {{"cmd", "resume"}, {"session", resume_id}};
  else if (restore->parsed()) rq = {{"cmd", "restore"}, {"file", absolute(restore_path)}};
  // A migration or checkpoint pauses the session until its state is saved
  // (large sessions take a while); the server answers within 10 minutes.
  const bool slow = migrate->parsed() || checkpoint->parsed() || restore->parsed() || resume->parsed();
  json r = ask(admin_path, rq, slow ? 660 + int(migrate_wait) : 5);
  const bool ok = r.value("ok", false);
  if (as_json) {
    std::printf("%s\n", r.dump().c_str());
    return ok ? 0 : 1;
  }
  if (!ok) {
    std::fprintf(stderr, "wormholectl: %s\n", r.value("error", std::string("the server refused")).c_str());
    return 1;
  }
  try {
    if (sessions->parsed()) print_sessions(r);
    else if (stats->parsed()) print_stats(r);
    else if (kill->parsed()) std::printf("session %llu killed\n", (unsigned long long)kill_id);
    else if (checkpoint->parsed())
      std::printf("session %llu saved to %s (%llu bytes) and held\n", (unsigned long long)ck_id, ck_file.c_str(),
                  (unsigned long long)r.value("bytes", uint64_t(0)));
    else if (resume->parsed()) std::printf("session %llu resumed\n", (unsigned long long)resume_id);
    else if (restore->parsed())
      std::printf("%s loaded: waiting for client pid %llu to resume\n", restore_path.c_str(),
                  (unsigned long long)r.value("pid", uint64_t(0)));
    else if (migrate->parsed())
      std::printf("session %llu moved: session %llu there (paused %.1f ms)\n", (unsigned long long)migrate_id,
                  (unsigned long long)r.value("new_session", uint64_t(0)), r.value("ms", 0.0));
    else std::printf("draining: no new sessions; the server exits when its %d session(s) end\n",
                     r.value("sessions", 0));
  } catch (const json::exception& e) {
    std::fprintf(stderr, "wormholectl: unexpected answer from the server (%s)\n", e.what());
    return 1;
  }
  return 0;
}
