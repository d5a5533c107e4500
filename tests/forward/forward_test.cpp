// Forwarded CUDA programs (built with nvcc -cudart shared) run through the
// drop-in libcudart.so.13 against a wormhole-server (sim backend) that each
// test starts on a private socket. Every program checks its own results
// against a host reference and prints PASS.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "test_process.hpp"

using namespace std::chrono_literals;
using wh::test::Process;
using wh::test::Server;

namespace {

std::string prog(const char* name) { return std::string(WH_PROGRAM_DIR) + "/" + name; }

void expect_pass(const Process::Result& r, const std::string& what) {
  EXPECT_EQ(r.status, 0) << what << " output:\n" << r.output;
  EXPECT_NE(r.output.find("PASS"), std::string::npos) << what << " output:\n" << r.output;
}

class Forward : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(server.start({})) << server.log(); }
  Process::Result run(const std::vector<std::string>& argv, std::chrono::seconds timeout = 120s) {
    return Process::run(argv, server.client_env(), timeout);
  }
  Server server;
};

TEST_F(Forward, VectorAdd) { expect_pass(run({prog("vector_add")}), "vector_add"); }
TEST_F(Forward, MatrixMultiply) { expect_pass(run({prog("matmul")}), "matmul"); }
TEST_F(Forward, StreamsAndEvents) { expect_pass(run({prog("streams_events")}), "streams_events"); }
TEST_F(Forward, MemsetAndMemcpy2D) { expect_pass(run({prog("memset_2d")}), "memset_2d"); }
TEST_F(Forward, Symbols) { expect_pass(run({prog("symbols")}), "symbols"); }
TEST_F(Forward, MappedAndRegisteredHostMemory) { expect_pass(run({prog("mapped_pinned")}), "mapped_pinned"); }
TEST_F(Forward, ManyThreadsOneClient) { expect_pass(run({prog("multithread")}), "multithread"); }
TEST_F(Forward, DeviceQueriesAndUnsupported) { expect_pass(run({prog("device_info")}), "device_info"); }
TEST_F(Forward, SeveralFatbins) { expect_pass(run({prog("multi_fatbin")}), "multi_fatbin"); }
TEST_F(Forward, GraphStreamCapture) { expect_pass(run({prog("graph_capture")}), "graph_capture"); }
TEST_F(Forward, GraphExplicitApi) { expect_pass(run({prog("graph_explicit")}), "graph_explicit"); }
TEST_F(Forward, GraphExecUpdate) { expect_pass(run({prog("graph_update")}), "graph_update"); }

TEST_F(Forward, GraphDebugDotPrint) {
  char dir[] = "/tmp/wh-graph-dot.XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/graph.dot";
  expect_pass(run({prog("graph_explicit"), "dot", path}), "graph_explicit dot");
  unlink(path.c_str());
  rmdir(dir);
}

TEST_F(Forward, AsyncErrors) {
  expect_pass(run({prog("async_errors"), "config"}), "config");
  expect_pass(run({prog("async_errors"), "oob"}), "oob");
  expect_pass(run({prog("async_errors"), "assert"}), "assert");
  // A faulting client does not disturb the next one.
  expect_pass(run({prog("vector_add")}), "vector_add after faults");
}

TEST_F(Forward, SeveralClientsAtOnce) {
  std::vector<std::thread> ts;
  std::vector<Process::Result> rs(4);
  const char* names[] = {"vector_add", "matmul", "symbols", "multithread"};
  for (int i = 0; i < 4; i++) ts.emplace_back([&, i] { rs[i] = run({prog(names[i])}); });
  for (auto& t : ts) t.join();
  for (int i = 0; i < 4; i++) expect_pass(rs[i], names[i]);
}

TEST(ForwardQuota, ClientOverItsQuota) {
  Server server;
  ASSERT_TRUE(server.start({"--quota-mb", "64"})) << server.log();
  expect_pass(Process::run({prog("quota"), "64"}, server.client_env(), 60s), "quota");
}

uint64_t free_bytes(Server& s) {
  auto r = Process::run({prog("meminfo")}, s.client_env(), 30s);
  EXPECT_EQ(r.status, 0) << r.output;
  auto p = r.output.find("free=");
  return p == std::string::npos ? 0 : std::stoull(r.output.substr(p + 5));
}

TEST_F(Forward, ClientKilledMidStream) {
  const uint64_t baseline = free_bytes(server);
  Process hold = Process::spawn({prog("hold"), "256"}, server.client_env());
  ASSERT_TRUE(hold.wait_for_output("READY", 60s)) << hold.output();
  EXPECT_LE(free_bytes(server), baseline - (256ull << 20)) << "the held memory shows as used";
  // Another client runs correctly while the first one streams work.
  std::thread other([&] { expect_pass(run({prog("matmul")}), "matmul beside a busy client"); });
  std::this_thread::sleep_for(300ms);
  hold.kill(SIGKILL);
  other.join();
  // The server notices the death and frees everything the client held.
  auto deadline = std::chrono::steady_clock::now() + 5s;
  uint64_t now = 0;
  while (std::chrono::steady_clock::now() < deadline && (now = free_bytes(server)) != baseline)
    std::this_thread::sleep_for(100ms);
  EXPECT_EQ(now, baseline) << server.log();
  expect_pass(run({prog("vector_add")}), "vector_add after a kill");
  EXPECT_TRUE(server.alive());
}

TEST_F(Forward, AnotherClientsMemoryIsOutOfReach) {
  std::string flag = "/tmp/wh-probe-" + std::to_string(getpid());
  unlink(flag.c_str());
  Process own = Process::spawn({prog("handle_probe"), "own", flag}, server.client_env());
  ASSERT_TRUE(own.wait_for_output("DPTR=", 60s)) << own.output();
  auto p = own.output().find("DPTR=");
  std::string addr = own.output().substr(p + 5, own.output().find('\n', p) - p - 5);
  expect_pass(run({prog("handle_probe"), "attack", addr}), "attack");
  FILE* f = fopen(flag.c_str(), "w");
  fclose(f);
  EXPECT_EQ(own.wait(60s), 0) << own.output();
  EXPECT_NE(own.output().find("PASS"), std::string::npos) << own.output();
  unlink(flag.c_str());
}

TEST(ForwardNoServer, CleanErrorWithoutServer) {
  // No server on this socket: programs get an error, not a crash or hang.
  auto env = Server().client_env();  // the library path (and sanitizer preload), no server
  env[0] = "WORMHOLE_SOCKET=/tmp/wormhole-no-such.sock";
  auto r = Process::run({prog("device_info")}, env, 30s);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("cannot reach wormhole-server"), std::string::npos) << r.output;
}

}  // namespace
