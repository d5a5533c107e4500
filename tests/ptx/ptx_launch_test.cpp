// Launch latency of small grids: the launching thread runs a grid alone and
// wakes the engine's other workers only once the grid has run for a while
// (or its blocks wait on others), because a wake-up costs more than a small
// grid takes. A PyTorch-sized elementwise launch (1,000 floats, 4 blocks) on
// a two-worker engine must cost about what it costs on one worker: waking the
// helper for it made it 2-7x slower (18 vs 42 us interpreted, 6 vs 40 us
// compiled on the 2-core development VM). Wall-clock time, best of several
// interleaved rounds; the test runs alone (RUN_SERIAL).
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "ptx_test_util.hpp"

using namespace whtest;
using wh::ptx::Engine;
using wh::ptx::LaunchError;

namespace {

// The per-launch time of `n` floats' vector_add on `eng`, best of the rounds so far.
struct Timer {
  double best_us = 1e30;
  void round(Engine& eng, const wh::ptx::Module& m, HostMem& mem, uint64_t a, uint64_t b, uint64_t c, int n) {
    Args args(m.kernel("vector_add"));
    args(a);
    args(b);
    args(c);
    args(n);
    constexpr int kLaunches = 500;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kLaunches; ++i) {
      LaunchError e = eng.launch(m, "vector_add", cfg({uint32_t(n + 255) / 256}, {256}), args.data(), args.size(), mem);
      ASSERT_FALSE(e) << e.message;
    }
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / kLaunches;
    best_us = std::min(best_us, us);
  }
};

TEST(PtxLaunch, ASmallGridCostsNoMoreOnTwoWorkersThanOnOne) {
#if !defined(NDEBUG) || defined(WH_LAUNCH_NO_TIMING)
  GTEST_SKIP() << "timing in an unoptimised or instrumented build";
#endif
  std::string err;
  auto m = load_module("ml", false, &err);
  ASSERT_TRUE(m) << err;
  HostMem mem;
  const int n = 1000;
  std::vector<float> x(n), y(n), want(n);
  for (int i = 0; i < n; ++i) x[i] = float(i) * 0.5f, y[i] = float(n - i), want[i] = x[i] + y[i];
  const uint64_t a = mem.upload(x), b = mem.upload(y), c = mem.alloc(n * 4);
  Engine one(1), two(2);
  Timer t1, t2;
  for (int r = 0; r < 7; ++r) {
    t1.round(one, *m, mem, a, b, c, n);
    t2.round(two, *m, mem, a, b, c, n);
  }
  EXPECT_EQ(mem.download<float>(c, n), want);
  std::printf("vector_add of %d floats: %.2f us a launch on one worker, %.2f us on two\n", n, t1.best_us, t2.best_us);
  EXPECT_LT(t2.best_us, 1.6 * t1.best_us + 2.0) << "a small grid waited for the helper worker";
}

}  // namespace
