// Scheduling: warps and blocks that wait on each other (spin-waits, cooperative-groups
// tiles, grid barriers) finish as on a GPU; runaway kernels are stopped by cancel()
// or the watchdog; modules with many registers load. Kernels: kernels/sched.cu, run
// from plain PTX and from the default fatbin.
#include <atomic>
#include <chrono>
#include <numeric>
#include <random>
#include <thread>

#include "ptx_test_util.hpp"

using namespace whtest;
using wh::ptx::Dim3;
using wh::ptx::Engine;
using wh::ptx::LaunchConfig;
using wh::ptx::LaunchError;
using wh::ptx::Module;

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

#define EXPECT_OK(e) EXPECT_EQ((e).kind, LaunchError::None) << (e).message

class PtxSched : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    std::string err;
    mod_ = load_module("sched", GetParam(), &err);
    ASSERT_TRUE(mod_) << err;
  }
  Args args(const char* kernel) {
    const auto* k = mod_->kernel(kernel);
    EXPECT_NE(k, nullptr) << kernel;
    return Args(k);
  }
  // A hang without the scheduler fails by the watchdog instead of blocking ctest.
  LaunchError run(const char* kernel, Dim3 g, Dim3 b, const Args& a, LaunchConfig c = {}) {
    c.grid = g;
    c.block = b;
    if (!c.timeout_ms) c.timeout_ms = 60'000;
    return eng.launch(*mod_, kernel, c, a.data(), a.size(), mem);
  }
  static std::vector<int> randi(size_t n, unsigned seed) {
    std::mt19937 r(seed);
    std::uniform_int_distribution<int> d(-1000, 1000);
    std::vector<int> v(n);
    for (auto& x : v) x = d(r);
    return v;
  }
  HostMem mem;
  Engine eng{2};
  std::unique_ptr<Module> mod_;
};

// Warp 0 runs first and polls a flag that only warp 1 sets.
TEST_P(PtxSched, ProducerConsumerBetweenWarps) {
  const int n = 1000, blocks = 3;
  auto in = randi(n, 1);
  uint64_t din = mem.upload(in), dout = mem.alloc(blocks * 4);
  EXPECT_OK(run("producer_consumer", {blocks}, {64}, args("producer_consumer")(din)(dout)(n)));
  int want = 0;
  for (int v : in) want += v * 3 + 1;
  auto out = mem.download<int>(dout, blocks);
  for (int b = 0; b < blocks; ++b) EXPECT_EQ(out[b], want) << "block " << b;
}

// ld.acquire / st.release (cuda::atomic_ref) with __nanosleep: warps run in reverse order.
TEST_P(PtxSched, AcquireReleaseTurnsWithNanosleep) {
  const int blocks = 4, warps = 8;
  uint64_t dturn = mem.alloc(blocks * 4), dorder = mem.alloc(blocks * warps * 4);
  EXPECT_OK(run("acquire_release_turns", {blocks}, {warps * 32}, args("acquire_release_turns")(dturn)(dorder)));
  auto order = mem.download<int>(dorder, blocks * warps);
  auto turn = mem.download<int>(dturn, blocks);
  for (int b = 0; b < blocks; ++b) {
    EXPECT_EQ(turn[b], warps);
    for (int k = 0; k < warps; ++k) EXPECT_EQ(order[b * warps + k], warps - 1 - k) << "block " << b << " turn " << k;
  }
}

// Block b spins until block b+1 finished: more blocks than workers, started in the
// opposite order of the one they can finish in.
TEST_P(PtxSched, BlocksWaitForLaterBlocks) {
  const int blocks = 40;  // fits 2 workers x 32 resident blocks of 64 threads
  uint64_t dflags = mem.alloc(blocks * 4), dout = mem.alloc(blocks * 4);
  EXPECT_OK(run("block_chain", {blocks}, {64}, args("block_chain")(dflags)(dout)));
  auto out = mem.download<int>(dout, blocks);
  int want = 0;
  for (int b = blocks - 1; b >= 0; --b) {
    want += b + 1;
    EXPECT_EQ(out[b], want) << "block " << b;
  }
  // polling through a call: found by the time quantum instead
  const int blocks2 = 8;
  uint64_t dflags2 = mem.alloc(blocks2 * 4), dout2 = mem.alloc(blocks2 * 4);
  EXPECT_OK(run("block_chain_called", {blocks2}, {32}, args("block_chain_called")(dflags2)(dout2)));
  auto out2 = mem.download<int>(dout2, blocks2);
  want = 0;
  for (int b = blocks2 - 1; b >= 0; --b) {
    want += b + 1;
    EXPECT_EQ(out2[b], want) << "block " << b;
  }
}

// The whole tile polls with tile.all() on a shared turn after a cg::reduce.
TEST_P(PtxSched, CooperativeGroupsTileTurns) {
  const int blocks = 3, threads = 256, tiles = threads / 32;
  auto in = randi(blocks * threads, 2);
  uint64_t din = mem.upload(in), dout = mem.alloc(blocks * 4);
  EXPECT_OK(run("tile_turns", {blocks}, {threads}, args("tile_turns")(din)(dout)));
  auto out = mem.download<int>(dout, blocks);
  for (int b = 0; b < blocks; ++b) {
    int acc = 0;
    for (int t = tiles - 1; t >= 0; --t) {
      int s = 0;
      for (int i = 0; i < 32; ++i) s += in[b * threads + t * 32 + i];
      acc = acc * 3 + s;
    }
    EXPECT_EQ(out[b], acc) << "block " << b;
  }
}

// cooperative_groups::this_grid().sync() in a cooperative launch, with more blocks
// than workers (24 blocks of 128 threads: 16 per worker fit).
TEST_P(PtxSched, CooperativeGridSyncReduction) {
  const int blocks = 24, threads = 128, n = 100'000;
  auto in = randi(n, 3);
  const int want = std::accumulate(in.begin(), in.end(), 0);
  uint64_t din = mem.upload(in), dpart = mem.alloc(blocks * 4), dout = mem.alloc((blocks + 1) * 4);
  LaunchConfig c;
  c.cooperative = true;
  EXPECT_GE(eng.max_coresident_blocks(*mod_, "grid_sync_sum", [] { LaunchConfig k; k.block = {128}; return k; }()), uint64_t(blocks));
  EXPECT_OK(run("grid_sync_sum", {blocks}, {threads}, args("grid_sync_sum")(din)(dpart)(dout)(n), c));
  auto out = mem.download<int>(dout, blocks + 1);
  for (int b = 0; b < blocks; ++b) EXPECT_EQ(out[b], want) << "block " << b;
  EXPECT_EQ(out[blocks], blocks);
  // The grid barrier works again in the next launch (fresh workspace).
  EXPECT_OK(run("grid_sync_sum", {blocks}, {threads}, args("grid_sync_sum")(din)(dpart)(dout)(n), c));
  EXPECT_EQ(mem.download<int>(dout, blocks + 1)[blocks], blocks);
}

TEST_P(PtxSched, CooperativeLaunchLimits) {
  uint64_t d = mem.alloc(64 * 4);
  LaunchConfig c;
  c.cooperative = true;
  // 2 workers x min(32, 2048 / 128) blocks run concurrently: 33 are refused up front
  auto e = run("grid_sync_sum", {33}, {128}, args("grid_sync_sum")(d)(d)(d)(0), c);
  EXPECT_EQ(e.kind, LaunchError::InvalidConfig) << e.message;
  EXPECT_NE(e.message.find("cooperative launch of 33 blocks exceeds the 32"), std::string::npos) << e.message;
  // Not launched cooperatively: the grid has no workspace and grid.sync() traps, as on a GPU.
  e = run("grid_sync_sum", {2}, {128}, args("grid_sync_sum")(d)(d)(d)(0));
  EXPECT_EQ(e.kind, LaunchError::Trap) << e.message;
}

// A hand-written grid barrier (atomic arrival counter + volatile generation).
TEST_P(PtxSched, AtomicCounterGridBarrier) {
  const int blocks = 24, threads = 128, n = 50'000;
  auto in = randi(n, 4);
  const int want = std::accumulate(in.begin(), in.end(), 0);
  uint64_t din = mem.upload(in), dpart = mem.alloc(blocks * 4), dout = mem.alloc((blocks + 1) * 4), dbar = mem.alloc(8);
  EXPECT_OK(run("atomic_barrier_sum", {blocks}, {threads}, args("atomic_barrier_sum")(din)(dpart)(dout)(dbar)(n)));
  auto out = mem.download<int>(dout, blocks + 1);
  for (int b = 0; b < blocks; ++b) EXPECT_EQ(out[b], want) << "block " << b;
  EXPECT_EQ(out[blocks], blocks);
  auto bar = mem.download<unsigned>(dbar, 2);
  EXPECT_EQ(bar[0], 0u);
  EXPECT_EQ(bar[1], 2u);  // two barrier generations
}

// A polling kernel whose flag is never set, and a compute loop that never ends,
// with more blocks than workers: cancelled through the config flag, Engine::cancel()
// and the watchdog, each within a bounded time; the engine stays usable.
TEST_P(PtxSched, RunawayKernelsAreCancelled) {
  const int blocks = 64, threads = 64;
  uint64_t dflag = mem.alloc(4), dout = mem.alloc(blocks * threads * 4);
  std::atomic<bool> stop{false};
  LaunchConfig c;
  c.cancel = &stop;
  auto t0 = Clock::now();
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    stop = true;
  });
  auto e = run("spin_on_flag", {blocks}, {threads}, args("spin_on_flag")(dflag)(dout), c);
  double dt = seconds_since(t0);
  canceller.join();
  EXPECT_EQ(e.kind, LaunchError::Cancelled) << e.message;
  EXPECT_NE(e.message.find("cancelled"), std::string::npos) << e.message;
  EXPECT_GE(dt, 0.14);
  EXPECT_LT(dt, 2.0);

  t0 = Clock::now();
  std::thread canceller2([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    eng.cancel();
  });
  e = run("runaway", {blocks}, {threads}, args("runaway")(dout));
  dt = seconds_since(t0);
  canceller2.join();
  EXPECT_EQ(e.kind, LaunchError::Cancelled) << e.message;
  EXPECT_LT(dt, 2.0);

  LaunchConfig w;
  w.timeout_ms = 200;
  t0 = Clock::now();
  e = run("runaway", {1}, {1024}, args("runaway")(dout), w);
  dt = seconds_since(t0);
  EXPECT_EQ(e.kind, LaunchError::Timeout) << e.message;
  EXPECT_NE(e.message.find("200 ms"), std::string::npos) << e.message;
  EXPECT_GE(dt, 0.19);
  EXPECT_LT(dt, 2.0);

  // neither the cancel flag nor Engine::cancel() leaks into the next launch
  EXPECT_OK(run("fill", {4}, {64}, args("fill")(dout)(7)));
  auto out = mem.download<int>(dout, 4 * 64);
  for (int v : out) ASSERT_EQ(v, 7);
  // the polling kernel finishes once its flag is set
  int one = 1;
  std::memcpy(mem.translate(dflag, 4, true), &one, 4);
  EXPECT_OK(run("spin_on_flag", {blocks}, {threads}, args("spin_on_flag")(dflag)(dout)));
}

INSTANTIATE_TEST_SUITE_P(Loaders, PtxSched, ::testing::Values(false, true),
                         [](const auto& i) { return i.param ? "fatbin" : "ptx"; });

// Registers: nvcc declares one range per type (%r<N>, %f<N>, ...); the sim device
// allows 2^20 register slots per function in total and names that limit otherwise.
std::string many_regs_module(int nr, int nf) {
  std::string n1 = std::to_string(nr - 1), f1 = std::to_string(nf - 1);
  return ".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k(.param .u64 p)\n{\n"
         " .reg .b32 %r<" + std::to_string(nr) + ">;\n .reg .f32 %f<" + std::to_string(nf) + ">;\n .reg .b64 %rd<4>;\n"
         " ld.param.u64 %rd1, [p];\n cvta.to.global.u64 %rd2, %rd1;\n mov.u32 %r" + n1 + ", %tid.x;\n"
         " add.u32 %r1, %r" + n1 + ", 7;\n cvt.rn.f32.u32 %f" + f1 + ", %r1;\n mul.f32 %f1, %f" + f1 + ", 0f40000000;\n"
         " mul.wide.u32 %rd3, %r" + n1 + ", 4;\n add.s64 %rd3, %rd2, %rd3;\n st.global.f32 [%rd3], %f1;\n ret;\n}\n";
}

TEST(PtxLimits, ModulesWithManyRegistersLoadAndRun) {
  std::string err;
  auto m = Module::from_ptx(many_regs_module(40000, 30000), &err);  // 16384 per function used to be the limit
  ASSERT_TRUE(m) << err;
  HostMem mem;
  Engine eng(2);
  uint64_t d = mem.alloc(64 * 4);
  auto e = eng.launch(*m, "k", cfg({1}, {64}), &d, 8, mem);
  ASSERT_EQ(e.kind, LaunchError::None) << e.message;
  auto out = mem.download<float>(d, 64);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(out[i], float(i + 7) * 2) << i;

  // over the per-function limit: the load error names it
  m = Module::from_ptx(many_regs_module(600000, 600000), &err);
  EXPECT_FALSE(m);
  EXPECT_NE(err.find("more than 1048576 registers"), std::string::npos) << err;
  m = Module::from_ptx(many_regs_module(2000000, 2), &err);
  EXPECT_FALSE(m);
  EXPECT_NE(err.find("value 2000000 too large"), std::string::npos) << err;
  EXPECT_NE(err.find("1048576 registers"), std::string::npos) << err;

  // within it, a block whose register file would exceed 1 GiB is refused at launch with the figures
  m = Module::from_ptx(many_regs_module(1000000, 2), &err);
  ASSERT_TRUE(m) << err;
  e = eng.launch(*m, "k", cfg({1}, {1024}), &d, 8, mem);
  EXPECT_EQ(e.kind, LaunchError::InvalidConfig);
  EXPECT_NE(e.message.find("MiB of registers"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("limit of 1024 MiB per block"), std::string::npos) << e.message;
  e = eng.launch(*m, "k", cfg({1}, {32}), &d, 8, mem);  // one warp: 245 MiB
  EXPECT_EQ(e.kind, LaunchError::None) << e.message;
}

}  // namespace
