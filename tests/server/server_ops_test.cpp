// wormhole-server as an operator meets it: a config file whose mistakes
// stop the start with the key and its line, the command line winning over
// the file, one server per socket (a live one is never taken over, a stale
// file is replaced, and a server removes only the socket it made), signals
// that report instead of killing, --version and --help.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "test_process.hpp"

using namespace std::chrono_literals;
using wh::test::Process;
using wh::test::wait_for_path;

namespace {

std::string tmp_name(const std::string& what) {
  static int n = 0;
  return "/tmp/wh-ops-" + std::to_string(getpid()) + "-" + std::to_string(n++) + "-" + what;
}

std::string write_config(const std::string& text) {
  std::string p = tmp_name("server.toml");
  std::ofstream(p) << text;
  return p;
}

Process::Result run_server(std::vector<std::string> args, std::chrono::seconds t = 20s) {
  args.insert(args.begin(), WH_SERVER_BIN);
  return Process::run(args, {}, t);
}

Process start_server(const std::string& sock, std::vector<std::string> extra = {}) {
  std::vector<std::string> argv{WH_SERVER_BIN, "--backend", "sim", "--sim-threads", "1", "--socket", sock};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return Process::spawn(argv, {});
}

Process::Result run_client(const std::string& sock) {
  return Process::run({std::string(WH_PROGRAM_DIR) + "/vector_add"},
                      {"WORMHOLE_SOCKET=" + sock, std::string("LD_LIBRARY_PATH=") + WH_GUEST_LIB_DIR}, 60s);
}

// A config mistake: exit status 2, a message naming `key` and `line`.
void expect_refused(const std::string& config, const std::string& key, int line) {
  std::string p = write_config(config);
  auto r = run_server({"--backend", "sim", "--socket", tmp_name("never.sock"), "--config", p});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find(p + ":" + std::to_string(line) + ": " + key), std::string::npos)
      << "wanted " << key << " at line " << line << " in:\n" << r.output;
  unlink(p.c_str());
}

}  // namespace

TEST(ServerConfig, UnknownKeyNamesKeyAndLine) {
  expect_refused("backend = \"sim\"\nquota_mbb = 64\n", "quota_mbb", 2);
  expect_refused("config = \"x\"\n", "config", 1);
}

TEST(ServerConfig, BadValuesAreRefused) {
  expect_refused("backend = \"gpu\"\n", "backend", 1);
  expect_refused("\nlog_level = \"loud\"\n", "log_level", 2);
  expect_refused("heartbeat_timeout_ms = 1\n", "heartbeat_timeout_ms", 1);
  expect_refused("quota_mb = 99999999999999\n", "quota_mb", 1);       // would wrap as bytes
  expect_refused("quota_mb = -5\n", "quota_mb", 1);
  expect_refused("quota_mb = \"lots\"\n", "quota_mb", 1);
  expect_refused("sim_threads = [1, 2]\n", "sim_threads", 1);        // one value, not an array
  expect_refused("pinned_mb = 1.5\n", "pinned_mb", 1);                // not an integer
  expect_refused("pinned_budget_mb = 1.5\n", "pinned_budget_mb", 1);  // not an integer
  expect_refused("pinned_budget_mb = -1\n", "pinned_budget_mb", 1);
  expect_refused("pinned_budget_mb = 99999999999999\n", "pinned_budget_mb", 1);  // would wrap as bytes
  expect_refused("pinned_budget_mb = \"half\"\n", "pinned_budget_mb", 1);
}

// pinned_budget_mb from the file is the budget the server applies: with 0,
// a client's pinned heap never grows past its data area (a mapped
// allocation larger than the area fails; cudaMallocHost is pageable);
// with 256, the same allocation is pinned and mapped.
TEST(ServerConfig, PinnedBudgetFromTheFile) {
  for (const char* budget : {"0", "256"}) {
    SCOPED_TRACE(budget);
    std::string sock = tmp_name("budget.sock");
    std::string p = write_config(std::string("pinned_mb = 16\npinned_budget_mb = ") + budget + "\n");
    Process s = Process::spawn({WH_SERVER_BIN, "--backend", "sim", "--sim-threads", "1", "--socket", sock, "--config", p},
                               {});
    ASSERT_TRUE(wait_for_path(sock, s)) << s.output();
    auto c = Process::run({std::string(WH_PROGRAM_DIR) + "/pinned_budget", budget[0] == '0' ? "refused" : "granted",
                           "80"},
                          {"WORMHOLE_SOCKET=" + sock, std::string("LD_LIBRARY_PATH=") + WH_GUEST_LIB_DIR}, 60s);
    EXPECT_EQ(c.status, 0) << c.output << s.output();
    EXPECT_NE(c.output.find("PASS"), std::string::npos) << c.output;
    s.kill(SIGTERM);
    EXPECT_EQ(s.wait(10s), 0) << s.output();
    unlink(p.c_str());
  }
}

TEST(ServerConfig, MalformedVmSpecIsAnErrorNotACrash) {
  for (const char* vm : {"a=b:abc", "a=b:0", "a=b:99999999999999999999", "=x", "a="}) {
    auto r = run_server({"--backend", "sim", "--socket", tmp_name("never.sock"), "--vm", vm});
    EXPECT_EQ(r.status, 2) << vm << ": " << r.output;
    EXPECT_NE(r.output.find("--vm wants NAME=PATH"), std::string::npos) << vm << ": " << r.output;
  }
}

TEST(ServerConfig, CommandLineWinsOverTheFile) {
  std::string from_file = tmp_name("file.sock"), from_cli = tmp_name("cli.sock");
  std::string p = write_config("socket = \"" + from_file + "\"\nsim_threads = 1\nlog_level = \"info\"\n");
  Process s = Process::spawn({WH_SERVER_BIN, "--backend", "sim", "--config", p, "--socket", from_cli}, {});
  ASSERT_TRUE(wait_for_path(from_cli, s)) << s.output();
  struct stat st;
  EXPECT_NE(stat(from_file.c_str(), &st), 0) << "the file's socket was used";
  auto c = run_client(from_cli);
  EXPECT_EQ(c.status, 0) << c.output;
  s.kill(SIGTERM);
  EXPECT_EQ(s.wait(10s), 0) << s.output();
  unlink(p.c_str());
}

TEST(ServerSocket, ASecondServerDoesNotTakeALiveSocket) {
  std::string sock = tmp_name("one.sock");
  Process first = start_server(sock);
  ASSERT_TRUE(wait_for_path(sock, first)) << first.output();
  auto second = run_server({"--backend", "sim", "--socket", sock});
  EXPECT_EQ(second.status, 2) << second.output;
  EXPECT_NE(second.output.find("another server is listening"), std::string::npos) << second.output;
  // The first still owns the path and serves on it.
  auto c = run_client(sock);
  EXPECT_EQ(c.status, 0) << c.output;
  first.kill(SIGTERM);
  EXPECT_EQ(first.wait(10s), 0) << first.output();
  struct stat st;
  EXPECT_NE(stat(sock.c_str(), &st), 0) << "a stopped server leaves its socket";
}

TEST(ServerSocket, AStaleSocketFileIsReplaced) {
  std::string sock = tmp_name("stale.sock");
  {  // what a killed server leaves: a socket file nobody listens on
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", sock.c_str());
    ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    close(fd);
  }
  Process s = start_server(sock);
  std::this_thread::sleep_for(300ms);
  auto c = run_client(sock);
  EXPECT_EQ(c.status, 0) << c.output << s.output();
  s.kill(SIGTERM);
  EXPECT_EQ(s.wait(10s), 0) << s.output();
}

TEST(ServerSocket, OnlyTheSocketItMadeIsRemoved) {
  std::string sock = tmp_name("moved.sock");
  Process s = start_server(sock);
  ASSERT_TRUE(wait_for_path(sock, s)) << s.output();
  // Someone else's file takes the path while the server runs.
  ASSERT_EQ(rename(sock.c_str(), (sock + ".old").c_str()), 0);
  std::ofstream(sock) << "not the server's\n";
  s.kill(SIGTERM);
  EXPECT_EQ(s.wait(10s), 0) << s.output();
  struct stat st;
  EXPECT_EQ(stat(sock.c_str(), &st), 0) << "the server removed a file it did not make";
  unlink(sock.c_str());
  unlink((sock + ".old").c_str());
}

TEST(ServerSocket, ModeAndGroupAreConfigurable) {
  std::string sock = tmp_name("shared.sock");
  Process s = start_server(sock, {"--socket-mode", "0660", "--socket-group", "root"});
  ASSERT_TRUE(wait_for_path(sock, s)) << s.output();
  struct stat st;
  ASSERT_EQ(stat(sock.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  EXPECT_EQ(st.st_gid, 0u);
  s.kill(SIGTERM);
  EXPECT_EQ(s.wait(10s), 0) << s.output();
  auto bad = run_server({"--backend", "sim", "--socket", tmp_name("x.sock"), "--socket-mode", "999"});
  EXPECT_NE(bad.status, 0) << bad.output;
  auto nogroup = run_server({"--backend", "sim", "--socket", tmp_name("y.sock"), "--socket-group", "no-such-grp"});
  EXPECT_EQ(nogroup.status, 2) << nogroup.output;
}

TEST(ServerSignals, Usr1AndHupReportAndKeepServing) {
  std::string sock = tmp_name("sig.sock");
  Process s = start_server(sock);
  ASSERT_TRUE(wait_for_path(sock, s)) << s.output();
  ASSERT_EQ(run_client(sock).status, 0);
  s.kill(SIGUSR1);
  EXPECT_TRUE(s.wait_for_output("statistics:", 5s)) << s.output();
  s.kill(SIGHUP);
  EXPECT_TRUE(s.wait_for_output("read at start only", 5s)) << s.output();
  EXPECT_TRUE(s.alive());
  auto c = run_client(sock);
  EXPECT_EQ(c.status, 0) << c.output;
  auto t0 = std::chrono::steady_clock::now();
  s.kill(SIGTERM);
  EXPECT_EQ(s.wait(10s), 0) << s.output();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1500ms) << "SIGTERM should stop an idle server within 1 s";
}

TEST(ServerCompileCache, AProgramRunAgainFindsItsModuleParsed) {
  // Both runs are this test's uid: the second one's module load finds the
  // module the first one loaded (kept after its session ended).
  std::string sock = tmp_name("cache.sock");
  Process s = start_server(sock);
  ASSERT_TRUE(wait_for_path(sock, s)) << s.output();
  ASSERT_EQ(run_client(sock).status, 0);
  EXPECT_TRUE(s.wait_for_output("kernel launches", 5s)) << s.output();
  EXPECT_EQ(s.output().find("compile cache"), std::string::npos) << s.output();
  ASSERT_EQ(run_client(sock).status, 0);
  EXPECT_TRUE(s.wait_for_output("compile cache (server total): 1 module loads found their module parsed", 5s))
      << s.output();
  s.kill(SIGTERM);
  EXPECT_EQ(s.wait(10s), 0) << s.output();
}

TEST(ServerCli, VersionAndHelp) {
  auto v = run_server({"--version"});
  EXPECT_EQ(v.status, 0) << v.output;
  EXPECT_NE(v.output.find("wormhole-server 0."), std::string::npos) << v.output;
  auto h = run_server({"--help"});
  EXPECT_EQ(h.status, 0) << h.output;
  for (const char* want : {"WORMHOLE_SOCKET", "WORMHOLE_TRANSPORT", "--socket-mode", "SIGUSR1", "8192", "256"})
    EXPECT_NE(h.output.find(want), std::string::npos) << "--help lacks " << want << ":\n" << h.output;
}

TEST(ServerVm, ARegionItCannotServeStopsTheStart) {
  std::string region = tmp_name("tiny.region");
  {
    std::ofstream f(region);
    f << std::string(1 << 20, '\0');  // 1 MiB: far too small for 8 channels
  }
  auto r = run_server({"--backend", "sim", "--socket", tmp_name("vm.sock"), "--vm", "tiny=" + region + ":8"});
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("too small"), std::string::npos) << r.output;
  unlink(region.c_str());
}

TEST(ClientHandshake, ASilentListenerFailsTheCallWithinSeconds) {
  // Something listens on the path but never answers (a stopped server, or
  // another program): the first CUDA call fails with a message, no hang.
  std::string sock = tmp_name("silent.sock");
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::snprintf(a.sun_path, sizeof a.sun_path, "%s", sock.c_str());
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(listen(fd, 4), 0);
  auto t0 = std::chrono::steady_clock::now();
  auto c = run_client(sock);
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_NE(c.status, 0) << c.output;
  EXPECT_NE(c.status, -1) << "the client hung";
  EXPECT_NE(c.output.find("no handshake reply"), std::string::npos) << c.output;
  EXPECT_LT(took, 15s);
  close(fd);
  unlink(sock.c_str());
}

TEST(ServerSocket, ConnectionsBeyondMaxClientsAreRefusedAtOnce) {
  // Idle connections that never say hello hold their slot only until they
  // close or the 2 s hello timeout; past --max-clients a client is told why
  // at once, without a thread spent on it.
  std::string sock = tmp_name("max.sock");
  Process server = start_server(sock, {"--max-clients", "2"});
  ASSERT_TRUE(wait_for_path(sock, server)) << server.output();
  auto idle = [&] {
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", sock.c_str());
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    return fd;
  };
  int a = idle(), b = idle();
  std::this_thread::sleep_for(200ms);  // both accepted
  auto t0 = std::chrono::steady_clock::now();
  auto c = run_client(sock);
  EXPECT_NE(c.status, 0) << c.output;
  EXPECT_NE(c.output.find("too many clients"), std::string::npos) << "[" << c.output << "]";
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
  close(a);
  close(b);
  std::this_thread::sleep_for(300ms);  // their threads see the close
  auto ok = run_client(sock);
  EXPECT_EQ(ok.status, 0) << ok.output << server.output();
  server.kill(SIGTERM);
  EXPECT_EQ(server.wait(10s), 0) << server.output();
}

TEST(ServerVm, TheDocumentedRegionSizeIsServed) {
  // docs/vms.md, make vm-shell and the libvirt renderer all make a 512 MiB
  // file (QEMU creates it before the server when the VM starts first).
  std::string region = tmp_name("doc.region");
  ASSERT_EQ(truncate(region.c_str(), 0), -1);  // absent
  { std::ofstream f(region); }
  ASSERT_EQ(truncate(region.c_str(), off_t(512) << 20), 0);
  std::string sock = tmp_name("doc.sock");
  Process s = start_server(sock, {"--vm", "doc=" + region});
  EXPECT_TRUE(s.wait_for_output("vm doc: serving 8 channels", 20s)) << s.output();
  EXPECT_TRUE(s.alive());
  s.kill(SIGTERM);
  EXPECT_EQ(s.wait(10s), 0) << s.output();
  unlink(region.c_str());
}
