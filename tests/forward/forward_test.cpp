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
#include <filesystem>
#include <fstream>
#include <climits>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "test_process.hpp"

using namespace std::chrono_literals;
using wh::test::Process;
using wh::test::Server;
namespace stacked_why = wh::test::stacked_why;

namespace {

std::string prog(const char* name) { return std::string(WH_PROGRAM_DIR) + "/" + name; }

void expect_pass(const Process::Result& r, const std::string& what) {
  EXPECT_EQ(r.status, 0) << what << " output:\n" << r.output;
  EXPECT_NE(r.output.find("PASS"), std::string::npos) << what << " output:\n" << r.output;
}

#ifdef WH_STATIC_RUNTIME
// The same programs built the default way (static CUDA runtime) prove that
// Wormhole served them, not some other driver: the program does not ask
// for libcudart, the one libcuda.so.1 the dynamic loader initialised in the
// process is Wormhole's (glibc's LD_DEBUG=files record, written per pid),
// and this test's server logged a session for that pid. A host with
// NVIDIA's driver installed cannot pass them on that driver by accident.
std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream b;
  b << f.rdbuf();
  return b.str();
}

std::string command_output(const std::string& cmd) {
  std::string out;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[4096];
    for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    pclose(p);
  }
  return out;
}

std::string real_path(const std::string& p) {
  char buf[PATH_MAX];
  return realpath(p.c_str(), buf) ? std::string(buf) : p;
}

// Paths of the objects named libcuda.so.1 whose initialisers ran.
std::vector<std::string> libcuda_inits(const std::string& ld_log) {
  std::vector<std::string> v;
  std::istringstream in(ld_log);
  const std::string key = "calling init: ";
  for (std::string l; std::getline(in, l);) {
    size_t k = l.find(key);
    if (k == std::string::npos) continue;
    std::string path = l.substr(k + key.size());
    if (path.size() >= 13 && path.compare(path.size() - 13, 13, "/libcuda.so.1") == 0) v.push_back(path);
  }
  return v;
}
#endif

class Forward : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(server.start(server_args())) << server.log(); }
  virtual std::vector<std::string> server_args() const { return {}; }
#ifndef WH_STATIC_RUNTIME
  Process::Result run(const std::vector<std::string>& argv, std::chrono::seconds timeout = 120s) {
    return Process::run(argv, server.client_env(), timeout);
  }
#else
  Process::Result run(const std::vector<std::string>& argv, std::chrono::seconds timeout = 120s) {
    const std::string needed = command_output("readelf -d '" + argv[0] + "' 2>&1");
    EXPECT_NE(needed.find("Dynamic section"), std::string::npos) << argv[0] << ": readelf -d:\n" << needed;
    EXPECT_EQ(needed.find("libcudart"), std::string::npos) << argv[0] << " needs libcudart:\n" << needed;
    char dir[] = "/tmp/wh-fwd-static.XXXXXX";
    EXPECT_NE(mkdtemp(dir), nullptr);
    std::vector<std::string> env = server.client_env();
    env.push_back("LD_DEBUG=files");
    env.push_back(std::string("LD_DEBUG_OUTPUT=") + dir + "/ld");
    Process p = Process::spawn(argv, env);
    const pid_t pid = p.pid();
    Process::Result r;
    r.status = p.wait(timeout);
    r.output = p.output();
    const std::string ld_log = slurp(std::string(dir) + "/ld." + std::to_string(pid));
    std::filesystem::remove_all(dir);
    const std::vector<std::string> inits = libcuda_inits(ld_log);
    const std::string ours = real_path(std::string(WH_GUEST_LIB_DIR) + "/libcuda.so.1");
    EXPECT_EQ(inits.size(), 1u) << argv[0] << ": libcuda.so.1 initialised " << inits.size() << " times:\n" << ld_log;
    for (auto& i : inits) EXPECT_EQ(real_path(i), ours) << argv[0] << " loaded another libcuda.so.1";
    std::string log;
    {
      std::lock_guard lk(log_mu_);
      log = server.log();
    }
    const std::string session = "client pid " + std::to_string(pid) + " uid ";
    EXPECT_NE(log.find(session), std::string::npos) << argv[0] << " (pid " << pid
                                                    << "): no session on this test's server:\n" << log;
    return r;
  }
  std::mutex log_mu_;
#endif
  Server server;
};

// A server whose pinned heap never grows past the first data area.
class ForwardNoPinnedGrowth : public Forward {
 protected:
  std::vector<std::string> server_args() const override { return {"--pinned-budget-mb", "0"}; }
};

TEST_F(Forward, VectorAdd) { expect_pass(run({prog("vector_add")}), "vector_add"); }
TEST_F(Forward, MatrixMultiply) { expect_pass(run({prog("matmul")}), "matmul"); }
TEST_F(Forward, StreamsAndEvents) { expect_pass(run({prog("streams_events")}), "streams_events"); }
TEST_F(Forward, MemsetAndMemcpy2D) { expect_pass(run({prog("memset_2d")}), "memset_2d"); }
TEST_F(Forward, Symbols) { expect_pass(run({prog("symbols")}), "symbols"); }
TEST_F(Forward, MappedAndRegisteredHostMemory) {
  WH_EXCLUDE_WHEN_STACKED(stacked_why::kHostMemory);
  expect_pass(run({prog("mapped_pinned")}), "mapped_pinned");
}
// Pinned memory used by kernels at its host address (zero-copy, polled flags).
TEST_F(Forward, PinnedMemoryAtItsHostAddress) {
  WH_EXCLUDE_WHEN_STACKED(stacked_why::kHostMemory);
  expect_pass(run({prog("uva_pinned")}), "uva_pinned");
}
// The reduce0..7 series (and a cooperative-groups reduce7) in int, float and double, block sizes 64
// to 512, lengths 2^20, 2^20 + 3, 1000 and 1.
TEST_F(Forward, ReductionSeries) { expect_pass(run({prog("reduce_series")}), "reduce_series"); }
// The same from compute capability 8.0 PTX (cooperative groups' multi-warp
// tiles use %reserved_smem_offset_1).
// Cooperative groups' labeled and binary partitions: collectives over each
// lane's own member mask.
TEST_F(Forward, WarpGroups) { expect_pass(run({prog("warp_groups")}), "warp_groups"); }
TEST_F(Forward, ReductionSeriesSm80) { expect_pass(run({prog("reduce_series_sm80")}), "reduce_series"); }
// exp, cos, sin, tan... in double, trigonometry of arguments up to 1e300, a Gabor filter bank.
TEST_F(Forward, DoublePrecisionMath) { expect_pass(run({prog("double_math")}), "double_math"); }
// More pinned memory than the shared heap holds, on a server that adds none
// (--pinned-budget-mb 0): every allocation works, copies are exact.
TEST_F(ForwardNoPinnedGrowth, PinnedMemoryBeyondTheSharedHeap) {
  expect_pass(run({prog("pinned_beyond_heap")}), "pinned_beyond_heap");
}
// 600 MiB pinned under the default settings: the heap grows into shared
// segments; mapped ones are used by kernels; freed and pinned again.
TEST_F(Forward, PinnedMemoryGrowsPastTheDataArea) {
  WH_EXCLUDE_WHEN_STACKED(stacked_why::kHostMemory);
  expect_pass(run({prog("pinned_grow")}), "pinned_grow");
}
// Polling an event and a stream while a long kernel runs: not ready, answered without waiting for it.
TEST_F(Forward, QueriesWhileAKernelRuns) { expect_pass(run({prog("query_running")}), "query_running"); }
// Driver functions through cudaGetDriverEntryPointByVersion (PyTorch's way to the driver), no cuInit.
TEST_F(Forward, DriverFunctionsThroughTheRuntime) { expect_pass(run({prog("driver_entry")}), "driver_entry"); }
// Programmatic dependent launch: CUB's merge sort, a producer/consumer pair, its events.
TEST_F(Forward, ProgrammaticDependentLaunch) { expect_pass(run({prog("pdl")}), "pdl"); }
// nvcuda::wmma GEMMs (f16, bf16, tf32, int8; row/col-major; alpha/beta on the accumulator
// fragment) and an inline-PTX ldmatrix + mma.sync.m16n8k16 GEMM against host GEMMs.
TEST_F(Forward, TensorCoreGemm) { expect_pass(run({prog("wmma_gemm")}), "wmma_gemm"); }
// memcpy_async into shared memory on a cuda::barrier (cp.async.mbarrier.arrive), through a
// two-stage cuda::pipeline, and cooperative_groups::memcpy_async: tiled products, reversals.
TEST_F(Forward, AsyncCopiesIntoSharedMemory) { expect_pass(run({prog("async_copy")}), "async_copy"); }
// Managed buffers attached to single streams (cudaStreamAttachMemAsync) and its refusals.
TEST_F(Forward, ManagedMemoryAttachedToStreams) {
  WH_EXCLUDE_WHEN_STACKED(stacked_why::kHostMemory);
  expect_pass(run({prog("managed_attach")}), "managed_attach");
}
TEST_F(Forward, ManyThreadsOneClient) { expect_pass(run({prog("multithread")}), "multithread"); }
TEST_F(Forward, DeviceQueriesAndUnsupported) { expect_pass(run({prog("device_info")}), "device_info"); }
TEST_F(Forward, DeviceIdentityAsStartupHelpersAskIt) { expect_pass(run({prog("device_query")}), "device_query"); }
TEST_F(Forward, ManagedMemoryListsAndVariables) {
  WH_EXCLUDE_WHEN_STACKED(stacked_why::kHostMemory);
  expect_pass(run({prog("managed")}), "managed");
}
TEST_F(Forward, CooperativeGridSyncAndWarpHandoff) { expect_pass(run({prog("cooperative")}), "cooperative"); }
TEST_F(Forward, KernelParametersUpToTheLimit) { expect_pass(run({prog("big_params")}), "big_params"); }
TEST_F(Forward, ThrustAndCub) { expect_pass(run({prog("thrust_algos")}), "thrust_algos"); }
TEST_F(Forward, SeveralFatbins) { expect_pass(run({prog("multi_fatbin")}), "multi_fatbin"); }
// Built with -rdc=true: the sim device links the units' PTX.
TEST_F(Forward, RelocatableDeviceCode) {
  WH_EXCLUDE_WHEN_STACKED(stacked_why::kSassOnly);
  expect_pass(run({prog("rdc")}), "rdc");
}
// Dynamic parallelism (-rdc=true -lcudadevrt): a recursive quicksort, the
// fire-and-forget and tail-launch streams, stream order and events, three
// launches deep; then the errors at the limits (depth, pending launches,
// launch shapes, stream handles).
TEST_F(Forward, DynamicParallelism) {
  WH_EXCLUDE_WHEN_STACKED(stacked_why::kSassOnly);
  expect_pass(run({prog("dynamic_parallelism")}), "dynamic_parallelism");
  expect_pass(run({prog("dynamic_parallelism"), "limits"}), "dynamic_parallelism limits");
}
// More than a session's 1 TiB address window of cudaMalloc/cudaFree, live
// allocations apart from each other and from mapped memory.
TEST_F(Forward, MallocFreeBeyondTheWindow) {
  WH_EXCLUDE_WHEN_STACKED(stacked_why::kHostMemory);
  expect_pass(run({prog("malloc_free"), "2000"}), "malloc_free");
}
TEST_F(Forward, StreamOrderedAllocation) { expect_pass(run({prog("mempool")}), "mempool"); }
TEST_F(Forward, GraphStreamCapture) { expect_pass(run({prog("graph_capture")}), "graph_capture"); }
TEST_F(Forward, GraphExplicitApi) { expect_pass(run({prog("graph_explicit")}), "graph_explicit"); }
// User objects: graph, clone and executable graph references; one destructor call.
TEST_F(Forward, UserObjects) { expect_pass(run({prog("user_objects")}), "user_objects"); }
TEST_F(Forward, GraphExecUpdate) { expect_pass(run({prog("graph_update")}), "graph_update"); }
TEST_F(Forward, GraphMemoryNodes) { expect_pass(run({prog("graph_mem")}), "graph_mem"); }

TEST_F(Forward, GraphDebugDotPrint) {
  char dir[] = "/tmp/wh-graph-dot.XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/graph.dot";
  expect_pass(run({prog("graph_explicit"), "dot", path}), "graph_explicit dot");
  unlink(path.c_str());
  rmdir(dir);
}
TEST_F(Forward, TextureImageFilters) { expect_pass(run({prog("tex_filter")}), "tex_filter"); }
TEST_F(Forward, SurfaceWriteRead) { expect_pass(run({prog("surface_rw")}), "surface_rw"); }
TEST_F(Forward, Texture3DLayeredMipmap) { expect_pass(run({prog("tex3d")}), "tex3d"); }
TEST_F(Forward, TexturePitch2DAndLinear) { expect_pass(run({prog("tex_pitch2d")}), "tex_pitch2d"); }
// malloc/free and new/delete in kernels, the heap size limit fixed at first use.
TEST_F(Forward, DeviceHeap) { expect_pass(run({prog("device_heap")}), "device_heap"); }
// Virtual functions (objects made with device-side new, used through base
// pointers, deleted), tables of function pointers, pointers read from
// symbols and passed as kernel arguments, address initializers.
TEST_F(Forward, VirtualFunctionsAndFunctionPointers) {
  expect_pass(run({prog("virtual_functions")}), "virtual_functions");
}
// A call through a pointer that is not a function fails the launch: the
// client's stderr names the kernel and the address; the server lives on.
TEST_F(Forward, CallThroughADataPointerFails) {
  WH_EXCLUDE_WHEN_STACKED(stacked_why::kDeviceOutput);
  const std::string path = "/tmp/wh-fwd-badcall-" + std::to_string(getpid());
  Process::Result r = Process::run({prog("virtual_functions"), "badcall"}, server.client_env(), 60s, path);
  std::ifstream f(path);
  std::stringstream b;
  b << f.rdbuf();
  unlink(path.c_str());
  expect_pass(r, "virtual_functions badcall");
  const std::string err = b.str();
  EXPECT_NE(err.find("cudaErrorIllegalAddress"), std::string::npos) << err;
  EXPECT_NE(err.find("apply_ptr"), std::string::npos) << err;
  EXPECT_NE(err.find("indirect call to address 0x"), std::string::npos) << err;
  EXPECT_NE(err.find("which is not a function"), std::string::npos) << err;
  EXPECT_TRUE(server.alive());
}
// A fork child that exits leaves its parent's session alone; one that calls
// CUDA gets cudaErrorInitializationError, never the parent's channel.
TEST_F(Forward, ForkChildren) { expect_pass(run({prog("fork_child")}), "fork_child"); }

TEST_F(Forward, AsyncErrors) {
  expect_pass(run({prog("async_errors"), "config"}), "config");
  expect_pass(run({prog("async_errors"), "oob"}), "oob");
  WH_EXCLUDE_WHEN_STACKED(stacked_why::kOneSession);  // the fault stays with every later session
  expect_pass(run({prog("async_errors"), "granule"}), "granule");
  expect_pass(run({prog("async_errors"), "assert"}), "assert");
  // A faulting client does not disturb the next one.
  expect_pass(run({prog("vector_add")}), "vector_add after faults");
}

// Device output: runs `device_output <mode>` with its stdout and stderr apart.
struct Split {
  Process::Result r;  // r.output: the program's stdout
  std::string err;    // its stderr
};
Split run_split(const Server& server, const std::string& mode, std::chrono::seconds timeout = 60s) {
  std::string path = "/tmp/wh-fwd-stderr-" + std::to_string(getpid()) + "-" + mode;
  Split s;
  s.r = Process::run({prog("device_output"), mode}, server.client_env(), timeout, path);
  std::ifstream f(path);
  std::stringstream b;
  b << f.rdbuf();
  s.err = b.str();
  unlink(path.c_str());
  return s;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> v;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) v.push_back(l);
  return v;
}

TEST_F(Forward, KernelPrintfReachesTheClient) {
  WH_EXCLUDE_WHEN_STACKED(stacked_why::kDeviceOutput);
  Split s = run_split(server, "printf");
  expect_pass(s.r, "device_output printf");
  EXPECT_EQ(s.err, "") << "stdout:\n" << s.r.output;
  // What each kernel thread prints (the order between threads is free).
  std::multiset<std::string> say, fill;
  for (int t = 0; t < 6; t++) {
    char l[160];
    std::snprintf(l, sizeof l, "say tag=1 t=%d f=%.2f s=dev p=0x1234 c=%c x=%x", t, 0.5 + t, 'a' + t, 0xab00 + t);
    say.insert(l);
  }
  for (int t = 1; t < 64; t += 4) fill.insert("fill t=" + std::to_string(t) + " v=" + std::to_string(t * 3));
  // Each flushed at its synchronising call, so between the host's own lines:
  // cudaDeviceSynchronize for `say`, the blocking copy for `fill`.
  auto lines = lines_of(s.r.output);
  std::multiset<std::string> got_say, got_fill;
  std::string phase = "start";
  for (auto& l : lines) {
    if (l == "host before" || l == "host between" || l == "host after") {
      phase = l;
    } else if (l.rfind("say ", 0) == 0) {
      EXPECT_EQ(phase, "host before") << l;
      got_say.insert(l);
    } else if (l.rfind("fill ", 0) == 0) {
      EXPECT_EQ(phase, "host between") << l;
      got_fill.insert(l);
    } else {
      EXPECT_EQ(l.rfind("PASS", 0), 0u) << "unexpected line: " << l;
    }
  }
  EXPECT_EQ(got_say, say) << s.r.output;
  EXPECT_EQ(got_fill, fill) << s.r.output;
  // The text went to the client, not to the server's own output.
  std::string log = server.log();
  EXPECT_EQ(log.find("say tag="), std::string::npos) << log;
  EXPECT_EQ(log.find("fill t="), std::string::npos) << log;
}

TEST_F(Forward, DeviceAssertOnClientStderr) {
  WH_EXCLUDE_WHEN_STACKED(stacked_why::kDeviceOutput);
  Split s = run_split(server, "assert");
  expect_pass(s.r, "device_output assert");
  // As a GPU prints it: file:line: function: block, thread, the condition.
  EXPECT_NE(s.err.find("device_output.cu:"), std::string::npos) << s.err;
  EXPECT_NE(s.err.find("check_positive"), std::string::npos) << s.err;
  EXPECT_NE(s.err.find("block: [0,0,0], thread: [5,0,0] Assertion `in[threadIdx.x] >= 0` failed."), std::string::npos)
      << s.err;
  EXPECT_EQ(s.r.output.find("Assertion"), std::string::npos) << s.r.output;
}

TEST_F(Forward, CopyAfterFaultReturnsTheStickyError) {
  WH_EXCLUDE_WHEN_STACKED(stacked_why::kDeviceOutput);
  // A staged device-to-host copy after a kernel fault returns the fault in
  // bounded time (it used to wait forever for the copy to be done).
  auto t0 = std::chrono::steady_clock::now();
  Split s = run_split(server, "fault", 30s);
  expect_pass(s.r, "device_output fault");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 20s);
  // The fault's details, naming the kernel, on the client's stderr, once.
  auto at = s.err.find("oob_store");
  EXPECT_NE(at, std::string::npos) << s.err;
  EXPECT_NE(s.err.find("cudaErrorIllegalAddress"), std::string::npos) << s.err;
  EXPECT_NE(s.err.find("PTX line"), std::string::npos) << s.err;
  if (at != std::string::npos) {
    EXPECT_EQ(s.err.find("oob_store", s.err.find('\n', at)), std::string::npos) << s.err;
  }
  EXPECT_TRUE(server.alive());
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

// --uid-quota-mb: all sessions of one user share a budget. A second process
// of the same user sees only what the first left, and gets it back when the
// first ends; a user the option cannot resolve stops the start.
TEST(ForwardQuota, SessionsOfOneUserShareItsQuota) {
  Server server;
  ASSERT_TRUE(server.start({"--uid-quota-mb", std::to_string(getuid()) + "=64"})) << server.log();
  expect_pass(Process::run({prog("quota"), "64"}, server.client_env(), 60s), "quota alone");
  Process hold = Process::spawn({prog("hold"), "48"}, server.client_env());
  ASSERT_TRUE(hold.wait_for_output("READY", 60s)) << hold.output();
  EXPECT_LE(free_bytes(server), 16ull << 20) << "the other session's 48 MiB not counted";
  auto r = Process::run({prog("quota"), "64"}, server.client_env(), 60s);
  EXPECT_NE(r.status, 0) << "a second session of the user got memory beyond the user's quota\n" << r.output;
  hold.kill(SIGKILL);
  hold.wait(10s);
  auto deadline = std::chrono::steady_clock::now() + 5s;
  while (std::chrono::steady_clock::now() < deadline && free_bytes(server) != (64ull << 20))
    std::this_thread::sleep_for(100ms);
  EXPECT_EQ(free_bytes(server), 64ull << 20) << server.log();
  expect_pass(Process::run({prog("quota"), "64"}, server.client_env(), 60s), "quota after the other ended");
  Server bad;
  EXPECT_FALSE(bad.start({"--uid-quota-mb", "no-such-user-here=64"})) << bad.log();
}

// --pinned-budget-mb: grown pinned memory of all sessions of one user
// counts against one budget. With 96 MiB held by one process, a second one
// may add 64 MiB (exactly the rest) but not 80: its mapped allocation
// fails and cudaMallocHost falls back to pageable memory, with a clear
// line in the server's log. Once the first process is gone, 80 MiB are
// granted again.
TEST(ForwardPinned, SessionsOfOneUserShareThePinnedBudget) {
  WH_EXCLUDE_WHEN_STACKED(stacked_why::kHostMemory);
  Server server;
  ASSERT_TRUE(server.start({"--pinned-mb", "16", "--pinned-budget-mb", "160"})) << server.log();
  const std::string p = prog("pinned_budget");
  Process hold = Process::spawn({p, "hold", "96"}, server.client_env());
  ASSERT_TRUE(hold.wait_for_output("READY", 60s)) << hold.output();
  expect_pass(Process::run({p, "granted", "64"}, server.client_env(), 60s), "granted 64 beside 96");
  expect_pass(Process::run({p, "refused", "80"}, server.client_env(), 60s), "refused 80 beside 96");
  EXPECT_NE(server.log().find("per-user budget is 160 MiB"), std::string::npos) << server.log();
  hold.kill(SIGKILL);
  hold.wait(10s);
  // The session's end (noticed within 100 ms) gives its segment back.
  Process::Result r;
  for (int i = 0; i < 50; i++) {
    r = Process::run({p, "granted", "80"}, server.client_env(), 60s);
    if (r.status == 0) break;
    std::this_thread::sleep_for(100ms);
  }
  expect_pass(r, "granted 80 after the other ended");
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

// A kernel that never ends: its client's death frees the session (the
// server cancels the kernel), and a stop is not held up by it.
TEST_F(Forward, RunawayKernelOfADeadClientIsCancelled) {
  WH_EXCLUDE_WHEN_STACKED(stacked_why::kOneSession);
  const uint64_t baseline = free_bytes(server);
  Process r = Process::spawn({prog("runaway"), "wait"}, server.client_env());
  ASSERT_TRUE(r.wait_for_output("READY", 60s)) << r.output();
  std::this_thread::sleep_for(300ms);
  r.kill(SIGKILL);
  auto deadline = std::chrono::steady_clock::now() + 10s;
  uint64_t now = 0;
  while (std::chrono::steady_clock::now() < deadline && (now = free_bytes(server)) != baseline)
    std::this_thread::sleep_for(100ms);
  EXPECT_EQ(now, baseline) << "the runaway session was never freed\n" << server.log();
  expect_pass(run({prog("vector_add")}), "vector_add after a runaway kernel");
}

// One session's kernel never starves another's: each session runs its
// kernels on its own worker threads, which the host schedules fairly. A
// program that does real work finishes while another session's kernel spins
// for ever, taking at most a few times as long as alone (the spinning
// session holds half the CPU: about 2x).
TEST_F(Forward, ARunawayKernelDoesNotStarveOtherSessions) {
  WH_EXCLUDE_WHEN_STACKED(stacked_why::kOneSession);
  auto timed = [&](const char* what) {
    auto t0 = std::chrono::steady_clock::now();
    expect_pass(run({prog("matmul"), "150"}), what);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  const double alone = std::min(timed("matmul alone"), timed("matmul alone"));
  Process r = Process::spawn({prog("runaway"), "wait"}, server.client_env());
  ASSERT_TRUE(r.wait_for_output("READY", 60s)) << r.output();
  const double beside = std::min(timed("matmul beside a runaway kernel"), timed("matmul beside a runaway kernel"));
  r.kill(SIGKILL);
  r.wait(10s);
  std::printf("matmul alone %.2f s, beside a runaway kernel %.2f s (x%.1f)\n", alone, beside, beside / alone);
  EXPECT_LT(beside, 5 * alone + 1.0) << "a runaway kernel starved another session";
}

TEST(ForwardWatchdog, KernelTimeoutAndStopDuringAKernel) {
  WH_EXCLUDE_WHEN_STACKED(stacked_why::kOneSession);
  Server server;
  ASSERT_TRUE(server.start({"--kernel-timeout-ms", "500"})) << server.log();
  expect_pass(Process::run({prog("runaway"), "timeout"}, server.client_env(), 60s), "runaway timeout");
  Server plain;
  ASSERT_TRUE(plain.start({})) << plain.log();
  Process r = Process::spawn({prog("runaway"), "wait"}, plain.client_env());
  ASSERT_TRUE(r.wait_for_output("READY", 60s)) << r.output();
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(plain.stop(), 0) << plain.log();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s) << "SIGTERM waited for a runaway kernel";
  r.kill(SIGKILL);
  r.wait(10s);
}

TEST_F(Forward, AnotherClientsMemoryIsOutOfReach) {
  WH_EXCLUDE_WHEN_STACKED(stacked_why::kOneSession);
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
