// The PTX compiler's default mode (WORMHOLE_PTX_JIT=auto): a kernel that has run
// interpreted long enough is compiled on a thread of its own while launches go
// on interpreted, and later launches run the compiled code. Every launch's
// results are checked against the host, before, during and after the compile;
// a module unloaded while its compile runs waits for it.
#include <chrono>
#include <cstdlib>

#include "ptx_test_util.hpp"

using namespace whtest;
using wh::ptx::Engine;
using wh::ptx::LaunchError;
using wh::ptx::Module;

namespace {

[[maybe_unused]] const int forced = setenv("WORMHOLE_PTX_JIT", "auto", 1);

// out[i] = x[i] iterated k times through x = x * 0.999 + 0.5 (a uniform loop)
const char* kPtx = R"(.version 8.0
.target sm_80
.address_size 64
.visible .entry iterate(.param .u64 px, .param .u64 pout, .param .u32 k)
{
  .reg .pred %p<2>;
  .reg .u32 %r<8>;
  .reg .u64 %rd<8>;
  .reg .f32 %f<4>;
  ld.param.u64 %rd0, [px];
  ld.param.u64 %rd1, [pout];
  ld.param.u32 %r0, [k];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mad.lo.u32 %r4, %r2, %r3, %r1;
  mul.wide.u32 %rd2, %r4, 4;
  add.u64 %rd3, %rd0, %rd2;
  ld.global.f32 %f0, [%rd3];
  mov.u32 %r5, 0;
LOOP:
  fma.rn.f32 %f0, %f0, 0f3F7FBE77, 0f3F000000;
  add.u32 %r5, %r5, 1;
  setp.lt.u32 %p1, %r5, %r0;
  @%p1 bra LOOP;
  add.u64 %rd4, %rd1, %rd2;
  st.global.f32 [%rd4], %f0;
  ret;
}
)";

struct Iterate {
  std::unique_ptr<Module> m;
  HostMem mem;
  std::vector<float> x, ref;
  uint64_t dx = 0, dout = 0;
  const uint32_t n = 64 * 256, k = 400;
  Iterate() {
    std::string err;
    m = Module::from_ptx(kPtx, &err);
    EXPECT_TRUE(m) << err;
    x.resize(n);
    for (uint32_t i = 0; i < n; ++i) x[i] = float(i % 97) / 8.0f - 6.0f;
    ref = x;
    for (float& v : ref)
      for (uint32_t j = 0; j < k; ++j) v = std::fma(v, 0.999f, 0.5f);
    dx = mem.upload(x);
    dout = mem.alloc(n * 4);
  }
  void launch(Engine& eng) {
    Args args(m->kernel("iterate"));
    args(dx);
    args(dout);
    args(k);
    LaunchError e = eng.launch(*m, "iterate", cfg({n / 256}, {256}), args.data(), args.size(), mem);
    ASSERT_FALSE(e) << e.message;
    ASSERT_EQ(mem.download<float>(dout, n), ref);
  }
};

TEST(PtxBackgroundCompile, LaunchesGoOnWhileTheKernelCompilesAndThenRunIt) {
  Iterate r;
  Engine eng(2);
  const auto before = wh::ptx::compile_stats();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  int launches = 0;
  while (wh::ptx::compile_stats().kernels == before.kernels && std::chrono::steady_clock::now() < deadline) {
    r.launch(eng);
    ++launches;
  }
  ASSERT_GT(wh::ptx::compile_stats().kernels, before.kernels) << "not compiled after " << launches << " launches";
  EXPECT_GT(launches, 1) << "the first launch compiled: auto waits until a kernel has run interpreted a while";
  for (int i = 0; i < 3; ++i) r.launch(eng);  // compiled now: the same results
}

TEST(PtxBackgroundCompile, AModuleUnloadedDuringItsCompileWaitsForIt) {
  const auto before = wh::ptx::compile_stats().kernels;
  Engine eng(2);
  for (int attempt = 0; attempt < 10; ++attempt) {
    {
      // launches past the point where the compile starts (after about 100 ms
      // interpreted), then the module is dropped, likely while it compiles: its
      // destructor waits for the compile, which is then counted
      Iterate r;
      for (int i = 0; i < 20; ++i) r.launch(eng);
    }
    if (wh::ptx::compile_stats().kernels > before) return;
  }
  FAIL() << "no compile started";
}

}  // namespace
