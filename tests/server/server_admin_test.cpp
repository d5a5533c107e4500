// Operating a running server: wormholectl (sessions, kill, stats, drain)
// over the admin socket and that socket's validation; the Prometheus
// endpoint; trace logging; a stopped client keeps its session, a dead one
// is found within a second; a runaway kernel ends on kill and on SIGTERM;
// a migration whose destination ran a call and died ends that session only.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <poll.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "test_process.hpp"
#include "wormhole/fd_pass.hpp"
#include "wormhole/ring.hpp"
#include "wormhole/server/checkpoint.hpp"

using namespace std::chrono_literals;
using nlohmann::json;
using wh::test::Process;
using wh::test::wait_for_path;
using namespace wh::server;

namespace {

std::string tmp_name(const std::string& what) {
  static int n = 0;
  return "/tmp/wh-adm-" + std::to_string(getpid()) + "-" + std::to_string(n++) + "-" + what;
}

std::string admin_of(const std::string& sock) { return sock.substr(0, sock.size() - 5) + "-admin.sock"; }

Process start_server(const std::string& sock, std::vector<std::string> extra = {}) {
  std::vector<std::string> argv{WH_SERVER_BIN, "--backend", "sim", "--sim-threads", "1", "--socket", sock,
                                "--no-stats"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  Process p = Process::spawn(argv, {});
  return p;
}

std::vector<std::string> client_env(const std::string& sock) {
  return {"WORMHOLE_SOCKET=" + sock, std::string("LD_LIBRARY_PATH=") + WH_GUEST_LIB_DIR};
}

Process spawn_program(const std::string& sock, const std::string& path, std::vector<std::string> args = {}) {
  args.insert(args.begin(), path);
  return Process::spawn(args, client_env(sock));
}

std::string prog(const char* name) { return std::string(WH_PROGRAM_DIR) + "/" + name; }

Process::Result ctl(const std::string& sock, std::vector<std::string> args) {
  args.insert(args.begin(), {WH_CTL_BIN, "--socket", sock});
  return Process::run(args, {}, 20s);
}

json ctl_json(const std::string& sock, std::vector<std::string> args) {
  args.push_back("--json");
  auto r = ctl(sock, args);
  json j = json::parse(r.output, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.output;
  return j;
}

json sessions(const std::string& sock) { return ctl_json(sock, {"sessions"})["sessions"]; }

// One raw request line on the admin socket; the answer line.
std::string admin_raw(const std::string& path, const std::string& bytes, bool close_write = true) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return "connect failed";
  }
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n <= 0) break;
    off += size_t(n);
  }
  if (close_write) shutdown(fd, SHUT_WR);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) out.append(buf, size_t(n));
  close(fd);
  return out;
}

int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t l = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &l);
  close(fd);
  return ntohs(a.sin_port);
}

// A migration's destination that takes the session's channel over, reads one
// request and dies without answering (as a server that crashes half-way).
struct DyingDestination {
  std::string path = tmp_name("dying-admin.sock");
  int lfd = -1;
  std::atomic<bool> took{false};
  std::string error;
  std::thread t;
  DyingDestination() {
    lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
    if (bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(lfd, 1) != 0) error = "cannot listen";
    t = std::thread([this] { run(); });
  }
  ~DyingDestination() {
    if (t.joinable()) t.join();
    close(lfd);
    unlink(path.c_str());
  }
  void run() {
    pollfd p{lfd, POLLIN, 0};
    if (poll(&p, 1, 60000) != 1) return void(error = "nobody came");
    int c = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
    char line[4096];
    int fds[300];
    size_t got = 0;
    if (wh::ring::recv_with_fds(c, line, sizeof line, fds, 300, &got) <= 0 || got < 3) {
      close(c);
      return void(error = "no descriptors");
    }
    std::string err;
    auto region = wh::ring::Region::attach_fd(fds[0], &err);
    auto ch = region ? wh::ring::ServerChannel::take_over(*region, 0, &err) : nullptr;
    if (!ch) error = "take over: " + err;
    wh::ring::Message m;
    const auto end = std::chrono::steady_clock::now() + 30s;
    while (ch && std::chrono::steady_clock::now() < end)
      if (ch->recv(m, 100ms) == wh::ring::Status::Ok) {
        took = true;
        break;
      }
    ch.reset();
    region.reset();
    for (size_t i = 0; i < got; ++i) close(fds[i]);
    close(c);  // no answer
  }
};

}  // namespace

TEST(ServerMigrate, ADestinationThatRanACallAndDiedEndsThatSessionNotTheServer) {
  std::string sock = tmp_name("lost.sock");
  Process s = start_server(sock);
  ASSERT_TRUE(wait_for_path(admin_of(sock), s)) << s.output();
  Process c = spawn_program(sock, std::string(WH_SERVER_PROGRAM_DIR) + "/verify_loop", {"60"});
  json list;
  for (int i = 0; i < 300 && (list = sessions(sock)).empty(); ++i) std::this_thread::sleep_for(100ms);
  ASSERT_EQ(list.size(), 1u) << s.output();
  const std::string sid = std::to_string(list[0]["id"].get<uint64_t>());
  DyingDestination dest;
  ASSERT_EQ(dest.error, "");
  auto r = ctl(sock, {"migrate", sid, "--to-admin", dest.path});
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("the session is lost"), std::string::npos) << r.output;
  dest.t.join();
  EXPECT_TRUE(dest.took) << dest.error;
  // The program's call the destination took never gets an answer: it fails
  // (the server ended the session), it does not hang.
  const int st = c.wait(30s);
  EXPECT_NE(st, 0) << c.output();
  EXPECT_NE(c.output().find("cudaErrorDevicesUnavailable"), std::string::npos) << c.output();
  EXPECT_EQ(c.output().find("PASS"), std::string::npos) << c.output();
  EXPECT_TRUE(s.wait_for_output("the session is lost", 5s)) << s.output();
  EXPECT_TRUE(sessions(sock).empty());
  // The server goes on serving others.
  auto v = Process::run({prog("vector_add")}, client_env(sock), 60s);
  EXPECT_EQ(v.status, 0) << v.output;
  EXPECT_TRUE(s.alive());
}

// A move's checkpoint carries its content uncompressed and is read in place
// from the memfd: one that its sender could still write while the
// destination reads it is refused before anything is restored.
TEST(ServerMigrate, AnUncompressedCheckpointMustComeSealedAgainstWrites) {
  std::string sock = tmp_name("adopt.sock");
  Process s = start_server(sock);
  ASSERT_TRUE(wait_for_path(admin_of(sock), s)) << s.output();
  auto adopt = [&](bool seal_write) {
    int ck = memfd_create("ck", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    CheckpointHeader h{};
    std::memcpy(h.magic, kCheckpointMagic, sizeof h.magic);
    h.version = kCheckpointVersion;
    h.header_bytes = sizeof h;
    h.content_bytes = h.frame_bytes = 64;
    h.flags = kCheckpointStored;
    std::snprintf(h.backend, sizeof h.backend, "sim");
    const std::vector<uint8_t> content(64, 0);
    EXPECT_EQ(write(ck, &h, sizeof h), ssize_t(sizeof h));
    EXPECT_EQ(write(ck, content.data(), content.size()), ssize_t(content.size()));
    EXPECT_EQ(fcntl(ck, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | (seal_write ? F_SEAL_WRITE : 0)), 0);
    int region = memfd_create("region", MFD_CLOEXEC);
    int sp[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", admin_of(sock).c_str());
    std::string reply;
    if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
      const std::string line = "{\"cmd\":\"adopt\"}\n";
      const int fds[3] = {region, sp[0], ck};
      EXPECT_TRUE(wh::ring::send_with_fds(fd, line.data(), line.size(), fds));
      char buf[1024];
      ssize_t n;
      while (reply.find('\n') == std::string::npos && (n = read(fd, buf, sizeof buf)) > 0) reply.append(buf, size_t(n));
    }
    for (int x : {fd, ck, region, sp[0], sp[1]}) close(x);
    return reply;
  };
  const std::string open = adopt(false);
  EXPECT_NE(open.find("\"ok\":false"), std::string::npos) << open;
  EXPECT_NE(open.find("sealed against writes"), std::string::npos) << open;
  // Sealed, it passes that check and is refused for what it holds instead.
  const std::string sealed = adopt(true);
  EXPECT_NE(sealed.find("\"ok\":false"), std::string::npos) << sealed;
  EXPECT_EQ(sealed.find("sealed against writes"), std::string::npos) << sealed;
  EXPECT_TRUE(sessions(sock).empty());
  auto v = Process::run({prog("vector_add")}, client_env(sock), 60s);
  EXPECT_EQ(v.status, 0) << v.output;
  EXPECT_TRUE(s.alive());
}

TEST(ServerAdmin, SessionsListsAClientAndKillEndsIt) {
  std::string sock = tmp_name("kill.sock");
  Process s = start_server(sock);
  ASSERT_TRUE(wait_for_path(admin_of(sock), s)) << s.output();
  struct stat st{};
  ASSERT_EQ(stat(admin_of(sock).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "the admin socket is the owner's only by default";

  Process c = spawn_program(sock, prog("hold"), {"16"});
  ASSERT_TRUE(c.wait_for_output("READY", 30s)) << c.output();
  // A call is counted once its answer has left: the client may print READY
  // before its loop's first calls (the module load, the launches) are.
  json list = sessions(sock);
  for (int i = 0; i < 200 && list.size() == 1 && list[0]["calls"].get<uint64_t>() <= 2; i++) {
    std::this_thread::sleep_for(50ms);
    list = sessions(sock);
  }
  ASSERT_EQ(list.size(), 1u) << list.dump();
  const json& e = list[0];
  EXPECT_EQ(e["pid"].get<int64_t>(), c.pid());
  EXPECT_EQ(e["uid"].get<int64_t>(), int64_t(getuid()));
  EXPECT_GE(e["device_bytes"].get<uint64_t>(), 16ull << 20);
  EXPECT_GT(e["calls"].get<uint64_t>(), 2u);
  EXPECT_GT(e["bytes_in"].get<uint64_t>(), 0u);
  EXPECT_GT(e["bytes_out"].get<uint64_t>(), 0u);
  EXPECT_GE(e["uptime_s"].get<double>(), 0.0);
  // The table for people names the same client.
  auto table = ctl(sock, {"sessions"});
  EXPECT_EQ(table.status, 0);
  EXPECT_NE(table.output.find("pid " + std::to_string(c.pid())), std::string::npos) << table.output;
  EXPECT_NE(table.output.find("16.0 MiB"), std::string::npos) << table.output;

  const uint64_t id = e["id"].get<uint64_t>();
  auto k = ctl(sock, {"kill", std::to_string(id)});
  EXPECT_EQ(k.status, 0) << k.output;
  // Its client gets an error on its next call and exits; nothing hangs.
  EXPECT_EQ(c.wait(10s), 1) << c.output();
  EXPECT_NE(c.output().find("cudaErrorDevicesUnavailable"), std::string::npos) << c.output();
  EXPECT_TRUE(sessions(sock).empty());
  json stats = ctl_json(sock, {"stats"});
  EXPECT_EQ(stats["device_bytes"].get<uint64_t>(), 0u) << stats.dump();
  EXPECT_TRUE(s.wait_for_output("killed by wormholectl", 5s)) << s.output();
  // An unknown session: an error, and the server goes on.
  auto bad = ctl(sock, {"kill", "999999"});
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.output.find("no session 999999"), std::string::npos) << bad.output;
  auto v = Process::run({prog("vector_add")}, client_env(sock), 60s);
  EXPECT_EQ(v.status, 0) << v.output;
  // Its kernel is counted, with the thread-instructions the sim device ran,
  // in the server-wide figures and in the log line of its session's end.
  json after = ctl_json(sock, {"stats"});
  EXPECT_GE(after["kernels"].get<uint64_t>(), 1u) << after.dump();
  EXPECT_GT(after["kernel_s"].get<double>(), 0.0) << after.dump();
  EXPECT_GT(after["thread_instructions"].get<uint64_t>(), 0u) << after.dump();
  auto stats_table = ctl(sock, {"stats"});
  EXPECT_NE(stats_table.output.find(" thread-instructions ("), std::string::npos) << stats_table.output;
  EXPECT_TRUE(s.wait_for_output("thread-instructions, ", 5s)) << s.output();
  s.kill(SIGTERM);
  EXPECT_EQ(s.wait(10s), 0) << s.output();
}

TEST(ServerAdmin, KillCancelsARunawayKernel) {
  std::string sock = tmp_name("runaway.sock");
  Process s = start_server(sock);
  ASSERT_TRUE(wait_for_path(admin_of(sock), s)) << s.output();
  Process c = spawn_program(sock, prog("runaway"), {"wait"});
  ASSERT_TRUE(c.wait_for_output("READY", 30s)) << c.output();
  std::this_thread::sleep_for(300ms);  // inside the kernel
  json list = sessions(sock);
  ASSERT_EQ(list.size(), 1u);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(ctl(sock, {"kill", std::to_string(list[0]["id"].get<uint64_t>())}).status, 0);
  EXPECT_TRUE(c.wait_for_output("synchronize:", 5s)) << c.output();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
  EXPECT_EQ(c.output().find("synchronize: cudaSuccess"), std::string::npos) << c.output();
  c.wait(10s);
  EXPECT_TRUE(sessions(sock).empty());
  // The sim device is free for the next client.
  auto v = Process::run({prog("vector_add")}, client_env(sock), 60s);
  EXPECT_EQ(v.status, 0) << v.output;
  s.kill(SIGTERM);
  EXPECT_EQ(s.wait(10s), 0) << s.output();
}

TEST(ServerAdmin, SigtermStopsAServerRunningARunawayKernelWithinASecond) {
  std::string sock = tmp_name("term.sock");
  Process s = start_server(sock);
  ASSERT_TRUE(wait_for_path(sock, s)) << s.output();
  Process c = spawn_program(sock, prog("runaway"), {"wait"});
  ASSERT_TRUE(c.wait_for_output("READY", 30s)) << c.output();
  std::this_thread::sleep_for(300ms);
  auto t0 = std::chrono::steady_clock::now();
  s.kill(SIGTERM);
  EXPECT_EQ(s.wait(10s), 0) << s.output();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1000ms);
  EXPECT_EQ(c.wait(10s), 1) << c.output();
  EXPECT_EQ(c.output().find("synchronize: cudaSuccess"), std::string::npos) << c.output();
}

TEST(ServerAdmin, DrainRefusesNewSessionsAndExitsAfterTheLast) {
  std::string sock = tmp_name("drain.sock");
  Process s = start_server(sock);
  ASSERT_TRUE(wait_for_path(admin_of(sock), s)) << s.output();
  Process c = spawn_program(sock, prog("hold"), {"4"});
  ASSERT_TRUE(c.wait_for_output("READY", 30s)) << c.output();
  auto d = ctl(sock, {"drain"});
  EXPECT_EQ(d.status, 0) << d.output;
  EXPECT_NE(d.output.find("draining"), std::string::npos) << d.output;
  auto refused = Process::run({prog("vector_add")}, client_env(sock), 60s);
  EXPECT_NE(refused.status, 0) << refused.output;
  EXPECT_NE(refused.output.find("draining"), std::string::npos) << refused.output;
  EXPECT_TRUE(s.alive()) << "a session is still served";
  EXPECT_TRUE(ctl_json(sock, {"stats"})["draining"].get<bool>());
  c.kill(SIGKILL);
  c.wait(5s);
  EXPECT_EQ(s.wait(5s), 0) << s.output();
  EXPECT_NE(s.output().find("drained"), std::string::npos) << s.output();
}

TEST(ServerAdmin, MalformedRequestsAreAnsweredNotFatal) {
  std::string sock = tmp_name("hostile.sock");
  Process s = start_server(sock);
  ASSERT_TRUE(wait_for_path(admin_of(sock), s)) << s.output();
  const std::string a = admin_of(sock);
  auto is_error = [](const std::string& answer, const std::string& needle) {
    json j = json::parse(answer, nullptr, false);
    return !j.is_discarded() && j.is_object() && j["ok"] == false &&
           j["error"].get<std::string>().find(needle) != std::string::npos;
  };
  EXPECT_TRUE(is_error(admin_raw(a, "not json\n"), "not a JSON object"));
  EXPECT_TRUE(is_error(admin_raw(a, std::string("\xff\xfe\x00{\n", 5)), "not a JSON object"));
  EXPECT_TRUE(is_error(admin_raw(a, "[1,2,3]\n"), "not a JSON object"));
  EXPECT_TRUE(is_error(admin_raw(a, "{\"cmd\":5}\n"), "cmd"));
  EXPECT_TRUE(is_error(admin_raw(a, "{\"cmd\":\"reboot\"}\n"), "unknown command"));
  EXPECT_TRUE(is_error(admin_raw(a, "{\"cmd\":\"kill\"}\n"), "session"));
  EXPECT_TRUE(is_error(admin_raw(a, "{\"cmd\":\"kill\",\"session\":-1}\n"), "session"));
  EXPECT_TRUE(is_error(admin_raw(a, "{\"cmd\":\"kill\",\"session\":\"1\"}\n"), "session"));
  EXPECT_TRUE(is_error(admin_raw(a, "{\"cmd\":\"kill\",\"session\":1.5}\n"), "session"));
  EXPECT_TRUE(is_error(admin_raw(a, std::string(100000, '{')), "longer than 4096"));
  EXPECT_TRUE(is_error(admin_raw(a, "{\"cmd\":\"stats\"}"), "closed"));  // no newline, then EOF
  // A client that says nothing is dropped after 2 s; the server goes on.
  EXPECT_TRUE(is_error(admin_raw(a, "", false), "within 2 s"));
  json st = ctl_json(sock, {"stats"});
  EXPECT_TRUE(st["ok"].get<bool>()) << st.dump();
  EXPECT_TRUE(s.alive());
  auto v = Process::run({prog("vector_add")}, client_env(sock), 60s);
  EXPECT_EQ(v.status, 0) << v.output;
  s.kill(SIGTERM);
  EXPECT_EQ(s.wait(10s), 0) << s.output();
}

TEST(ServerAdmin, StatsReportThePtxCompilerAndItsCache) {
  // Every kernel compiled at its first launch; the second run of the program
  // (the same uid) finds its module, compiled, in the cache.
  std::string sock = tmp_name("jit.sock");
  Process s = Process::spawn({WH_SERVER_BIN, "--backend", "sim", "--sim-threads", "1", "--socket", sock, "--no-stats"},
                             {"WORMHOLE_PTX_JIT=always"});
  ASSERT_TRUE(wait_for_path(admin_of(sock), s)) << s.output();
  for (int run = 0; run < 2; ++run) {
    auto v = Process::run({prog("vector_add")}, client_env(sock), 60s);
    ASSERT_EQ(v.status, 0) << v.output;
  }
  json st = ctl_json(sock, {"stats"});
  ASSERT_TRUE(st.contains("ptx_compile")) << st.dump();
  const json& c = st["ptx_compile"];
  EXPECT_EQ(c["kernels"].get<uint64_t>(), 1u) << st.dump() << "\n" << s.output();
  EXPECT_GT(c["instructions"].get<uint64_t>(), 0u);
  EXPECT_GT(c["seconds"].get<double>(), 0.0);
  EXPECT_EQ(c["cache_hits"].get<uint64_t>(), 1u) << st.dump();
  auto text = ctl(sock, {"stats"});
  EXPECT_NE(text.output.find("PTX compiler   1 kernels"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("1 module loads from the cache"), std::string::npos) << text.output;
  s.kill(SIGTERM);
  EXPECT_EQ(s.wait(10s), 0) << s.output();
}

TEST(ServerAdmin, AdminSocketIsConfigurable) {
  std::string sock = tmp_name("cfg.sock"), admin = tmp_name("elsewhere.admin");
  Process s = start_server(sock, {"--admin-socket", admin, "--admin-socket-mode", "0660"});
  ASSERT_TRUE(wait_for_path(admin, s)) << s.output();
  struct stat st{};
  ASSERT_EQ(stat(admin.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  auto r = Process::run({WH_CTL_BIN, "--admin-socket", admin, "stats"}, {}, 20s);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("backend        sim"), std::string::npos) << r.output;
  auto none = ctl(sock, {"stats"});  // not beside the client socket
  EXPECT_EQ(none.status, 1);
  EXPECT_NE(none.output.find("cannot reach"), std::string::npos) << none.output;
  s.kill(SIGTERM);
  EXPECT_EQ(s.wait(10s), 0) << s.output();
  struct stat gone{};
  EXPECT_NE(stat(admin.c_str(), &gone), 0) << "the admin socket is removed at exit";
}

TEST(ServerMetrics, PromtoolAcceptsAScrapeWithSessionAndOpSeries) {
  std::string sock = tmp_name("metrics.sock");
  const int port = free_port();
  const std::string addr = "127.0.0.1:" + std::to_string(port);
  Process s = start_server(sock, {"--metrics", addr});
  ASSERT_TRUE(wait_for_path(sock, s)) << s.output();
  Process c = spawn_program(sock, prog("hold"), {"8"});
  ASSERT_TRUE(c.wait_for_output("READY", 30s)) << c.output();
  httplib::Client http("127.0.0.1", port);
  auto res = http.Get("/metrics");
  ASSERT_TRUE(res) << s.output();
  EXPECT_EQ(res->status, 200);
  const std::string& body = res->body;
  EXPECT_NE(body.find("wormhole_sessions 1\n"), std::string::npos) << body;
  EXPECT_NE(body.find("wormhole_session_device_memory_bytes{session=\""), std::string::npos) << body;
  EXPECT_NE(body.find("wormhole_session_thread_instructions_total{session=\""), std::string::npos) << body;
  EXPECT_NE(body.find("pid=\"" + std::to_string(c.pid()) + "\""), std::string::npos) << body;
  EXPECT_NE(body.find("wormhole_calls_total{op=\"Malloc\"} 1\n"), std::string::npos) << body;
  EXPECT_NE(body.find("wormhole_call_duration_seconds_bucket{op=\"Malloc\",le=\"+Inf\"} 1\n"), std::string::npos)
      << body;
  EXPECT_NE(body.find("wormhole_call_errors_total{op=\"Malloc\"} 0\n"), std::string::npos) << body;
  EXPECT_NE(body.find("wormhole_ptx_compile_seconds_total "), std::string::npos) << body;
  EXPECT_NE(body.find("wormhole_ptx_module_cache_hits_total 0\n"), std::string::npos) << body;
  const std::string f = tmp_name("scrape.txt");
  std::ofstream(f) << body;
  // promtool (Debian prometheus, scripts/deps.sh server-test): no errors, no lint findings.
  auto check = Process::run({"/bin/sh", "-c", "promtool check metrics < " + f}, {}, 30s);
  EXPECT_NE(check.status, 127) << "promtool is not installed: scripts/deps.sh server-test";
  EXPECT_EQ(check.status, 0) << check.output;
  EXPECT_EQ(check.output, "") << "promtool's findings:\n" << check.output;
  unlink(f.c_str());
  c.kill(SIGKILL);
  c.wait(5s);
  s.kill(SIGTERM);
  EXPECT_EQ(s.wait(10s), 0) << s.output();
}

TEST(ServerMetrics, ARealPrometheusScrapesTheEndpoint) {
  if (Process::run({"/bin/sh", "-c", "command -v prometheus"}, {}, 10s).status != 0)
    GTEST_SKIP() << "no prometheus binary (scripts/deps.sh server-test)";
  std::string sock = tmp_name("prom.sock");
  const int port = free_port();
  Process s = start_server(sock, {"--metrics", "127.0.0.1:" + std::to_string(port)});
  ASSERT_TRUE(wait_for_path(sock, s)) << s.output();
  auto v = Process::run({prog("vector_add")}, client_env(sock), 60s);
  ASSERT_EQ(v.status, 0) << v.output;
  const std::string dir = tmp_name("prom");
  mkdir(dir.c_str(), 0700);
  std::ofstream(dir + "/prometheus.yml") << "global:\n  scrape_interval: 1s\n"
                                          << "scrape_configs:\n  - job_name: wormhole\n    static_configs:\n"
                                          << "      - targets: ['127.0.0.1:" << port << "']\n";
  const int web = free_port();
  Process prom = Process::spawn({"/usr/bin/env", "prometheus", "--config.file=" + dir + "/prometheus.yml",
                                 "--storage.tsdb.path=" + dir + "/data",
                                 "--web.listen-address=127.0.0.1:" + std::to_string(web)},
                                {});
  httplib::Client api("127.0.0.1", web);
  std::string last;
  bool found = false;
  for (auto deadline = std::chrono::steady_clock::now() + 60s; std::chrono::steady_clock::now() < deadline;) {
    prom.pump(500);
    s.pump(0);
    auto r = api.Get("/api/v1/query?query=wormhole_calls_total%7Bop%3D%22Malloc%22%7D");
    if (r && r->status == 200) {
      last = r->body;
      json j = json::parse(last, nullptr, false);
      if (!j.is_discarded() && j["status"] == "success" && !j["data"]["result"].empty()) {
        EXPECT_GT(std::stoi(j["data"]["result"][0]["value"][1].get<std::string>()), 0) << last;
        EXPECT_EQ(j["data"]["result"][0]["metric"]["job"], "wormhole") << last;
        found = true;
        break;
      }
    }
  }
  EXPECT_TRUE(found) << "last answer: " << last << "\nprometheus:\n" << prom.output();
  prom.kill(SIGTERM);
  prom.wait(20s);
  s.kill(SIGTERM);
  EXPECT_EQ(s.wait(10s), 0) << s.output();
  std::system(("rm -rf " + dir).c_str());
}

TEST(ServerLogging, TraceLogsEachCallAndDebugTheFailedOnes) {
  std::string sock = tmp_name("trace.sock");
  Process s = start_server(sock, {"--log-level", "trace"});
  ASSERT_TRUE(wait_for_path(sock, s)) << s.output();
  auto v = Process::run({prog("vector_add")}, client_env(sock), 60s);
  EXPECT_EQ(v.status, 0) << v.output;
  s.pump(200);
  EXPECT_NE(s.output().find("[trace] session 1: Malloc -> 0 ("), std::string::npos) << s.output();
  EXPECT_NE(s.output().find("[trace] session 1: Free -> 0 ("), std::string::npos) << s.output();
  s.kill(SIGTERM);
  EXPECT_EQ(s.wait(10s), 0);

  // At debug, only failed calls: a runaway kernel stopped by the watchdog
  // (--kernel-timeout-ms) fails its launch with cudaErrorLaunchTimeout.
  std::string sock2 = tmp_name("debug.sock");
  Process d = start_server(sock2, {"--log-level", "debug", "--kernel-timeout-ms", "300"});
  ASSERT_TRUE(wait_for_path(sock2, d)) << d.output();
  auto e = Process::run({prog("runaway"), "timeout"}, client_env(sock2), 60s);
  EXPECT_EQ(e.status, 0) << e.output;
  EXPECT_NE(e.output.find("PASS runaway"), std::string::npos) << e.output;
  d.pump(200);
  EXPECT_EQ(d.output().find("[trace]"), std::string::npos);
  EXPECT_EQ(d.output().find("Malloc -> 0 ("), std::string::npos) << d.output();
  EXPECT_NE(d.output().find("[debug] session 1: "), std::string::npos) << d.output();
  EXPECT_NE(d.output().find(" -> 702 ("), std::string::npos) << "cudaErrorLaunchTimeout\n" << d.output();
  d.kill(SIGTERM);
  EXPECT_EQ(d.wait(10s), 0);
}

TEST(ServerLogging, RepeatedWarningsAreRateLimited) {
  std::string sock = tmp_name("ratelimit.sock");
  Process s = start_server(sock);
  ASSERT_TRUE(wait_for_path(sock, s)) << s.output();
  for (int i = 0; i < 40; i++) {  // bad hellos: each one is refused with a warning
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", sock.c_str());
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    char junk[4096] = "GET / HTTP/1.0\r\n\r\n";
    ASSERT_GT(send(fd, junk, sizeof junk, MSG_NOSIGNAL), 0);
    char b[512];
    (void)!read(fd, b, sizeof b);
    close(fd);
  }
  s.pump(200);
  size_t n = 0;
  for (size_t p = 0; (p = s.output().find("refused a client", p)) != std::string::npos; p++) n++;
  EXPECT_GE(n, 1u) << s.output();
  EXPECT_LE(n, 6u) << s.output();
  EXPECT_TRUE(s.alive());
  s.kill(SIGTERM);
  EXPECT_EQ(s.wait(10s), 0);
}

TEST(ServerLiveness, AStoppedClientKeepsItsSessionAndData) {
  std::string sock = tmp_name("stop.sock");
  // A short heartbeat timeout: a 3 s stop is five times longer.
  Process s = start_server(sock, {"--heartbeat-timeout-ms", "600"});
  ASSERT_TRUE(wait_for_path(sock, s)) << s.output();
  const std::string go = tmp_name("go");
  Process c = spawn_program(sock, std::string(WH_SERVER_PROGRAM_DIR) + "/stop_resume", {go});
  ASSERT_TRUE(c.wait_for_output("READY", 30s)) << c.output();
  c.kill(SIGSTOP);
  std::this_thread::sleep_for(3s);
  EXPECT_EQ(sessions(sock).size(), 1u) << s.output();
  c.kill(SIGCONT);
  std::ofstream(go) << "go";
  EXPECT_EQ(c.wait(30s), 0) << c.output() << "\nserver:\n" << s.output();
  EXPECT_NE(c.output().find("PASS stop_resume"), std::string::npos) << c.output();
  EXPECT_EQ(s.output().find("client died"), std::string::npos) << s.output();
  unlink(go.c_str());
  s.kill(SIGTERM);
  EXPECT_EQ(s.wait(10s), 0);
}

TEST(ServerLiveness, ADeadClientIsFoundWithinASecond) {
  std::string sock = tmp_name("dead.sock");
  Process s = start_server(sock, {"--heartbeat-timeout-ms", "600000"});
  ASSERT_TRUE(wait_for_path(sock, s)) << s.output();
  Process c = spawn_program(sock, prog("hold"), {"8"});
  ASSERT_TRUE(c.wait_for_output("READY", 30s)) << c.output();
  ASSERT_EQ(sessions(sock).size(), 1u);
  auto t0 = std::chrono::steady_clock::now();
  c.kill(SIGKILL);
  c.wait(5s);
  bool gone = false;
  while (std::chrono::steady_clock::now() - t0 < 3s) {
    if (sessions(sock).empty()) {
      gone = true;
      break;
    }
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_TRUE(gone);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1000ms);
  EXPECT_EQ(ctl_json(sock, {"stats"})["device_bytes"].get<uint64_t>(), 0u);
  s.kill(SIGTERM);
  EXPECT_EQ(s.wait(10s), 0);
}

TEST(ServerMetrics, AnAddressItCannotListenOnStopsTheStart) {
  std::string sock = tmp_name("badmetrics.sock");
  auto r = Process::run({WH_SERVER_BIN, "--backend", "sim", "--socket", sock, "--metrics", "256.1.1.1:80"}, {}, 20s);
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--metrics 256.1.1.1:80: cannot listen there"), std::string::npos) << r.output;
  struct stat st{};
  EXPECT_NE(stat(sock.c_str(), &st), 0) << "no socket left behind";
  EXPECT_NE(stat(admin_of(sock).c_str(), &st), 0) << "no admin socket left behind";
  auto bad = Process::run({WH_SERVER_BIN, "--backend", "sim", "--socket", sock, "--metrics", "9400"}, {}, 20s);
  EXPECT_EQ(bad.status, 105) << bad.output;  // CLI11's validation error
  EXPECT_NE(bad.output.find("ADDR:PORT"), std::string::npos) << bad.output;
}
