// The PTX compiler's default mode (WORMHOLE_PTX_JIT=auto): a kernel that has run
// interpreted long enough is compiled on a thread of its own while launches go
// on interpreted, and later launches run the compiled code (a launch running
// long enough gets it while it runs). Every launch's
// results are checked against the host, before, during and after the compile;
// a module unloaded while its compile runs is freed when the compile ends.
// And the compile cache: loads of the same PTX by one tenant share the parsed
// module and its compiled code, each with its own variables.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

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
  const uint32_t n = 64 * 256, k;
  explicit Iterate(uint32_t iterations = 400) : k(iterations) {
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

TEST(PtxBackgroundCompile, OneLongLaunchGetsItsKernelCompiledWhileItRuns) {
  // A program whose work is one long launch: the grid's interpreted time is
  // counted while it runs, so the compile is queued during the launch (not
  // at the next one, which may never come) and the launch's remaining warps
  // run the code. Interpreted through, this launch takes several seconds.
  Iterate r(100000);
  Engine eng(2);
  const auto before = wh::ptx::compile_stats().kernels;
  const auto t0 = std::chrono::steady_clock::now();
  r.launch(eng);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GT(wh::ptx::compile_stats().kernels, before) << "the kernel was not compiled during its one launch (" << s
                                                      << " s)";
}

TEST(PtxBackgroundCompile, AModuleUnloadedDuringItsCompileIsFreedWhenItEnds) {
  // Launches past the point where the compile is queued (after about 100 ms
  // interpreted), then the module is dropped, likely while it compiles. The
  // unload does not wait: the background compiler holds the module until its
  // compile ends, which is then counted (and, under the sanitizers, touches
  // nothing freed).
  const auto before = wh::ptx::compile_stats().kernels;
  Engine eng(2);
  for (int attempt = 0; attempt < 10; ++attempt) {
    {
      Iterate r;
      for (int i = 0; i < 20; ++i) r.launch(eng);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (wh::ptx::compile_stats().kernels == before && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (wh::ptx::compile_stats().kernels > before) return;
  }
  FAIL() << "no compile started";
}

// ---- the compile cache: loads of the same text by one tenant share the module

// counter += 1 once per launch; out[0] = the counter's address as this load sees it
const char* kCounterPtx = R"(.version 8.0
.target sm_80
.address_size 64
.global .align 4 .u32 counter;
.visible .entry bump(.param .u64 pout)
{
  .reg .u32 %r<4>;
  .reg .u64 %rd<4>;
  ld.param.u64 %rd0, [pout];
  mov.u64 %rd1, counter;
  atom.global.add.u32 %r0, [%rd1], 1;
  st.global.u64 [%rd0], %rd1;
  ret;
}
)";

struct Counter {
  std::unique_ptr<Module> m;
  uint64_t var = 0, out = 0;
  Counter(HostMem& mem, std::string_view tenant) {
    std::string err;
    m = Module::from_ptx(kCounterPtx, &err, tenant);
    EXPECT_TRUE(m) << err;
    var = mem.alloc(4);
    out = mem.alloc(8);
    EXPECT_TRUE(m->bind_global("counter", var));
  }
  void launch(Engine& eng, HostMem& mem) {
    Args args(m->kernel("bump"));
    args(out);
    LaunchError e = eng.launch(*m, "bump", cfg({1}, {1}), args.data(), args.size(), mem);
    ASSERT_FALSE(e) << e.message;
    ASSERT_EQ(mem.download<uint64_t>(out, 1)[0], var) << "the kernel saw another load's variable";
  }
};

TEST(PtxCompileCache, LoadsOfOneTenantShareTheModuleAndKeepTheirOwnVariables) {
  HostMem mem;
  Engine eng(1);
  const auto shared0 = wh::ptx::compile_stats().shared_loads;
  Counter a(mem, "uid:1000"), b(mem, "uid:1000");
  EXPECT_EQ(&a.m->impl(), &b.m->impl()) << "the second load parsed the module again";
  EXPECT_EQ(wh::ptx::compile_stats().shared_loads, shared0 + 1);
  for (int i = 0; i < 3; ++i) a.launch(eng, mem);
  b.launch(eng, mem);
  EXPECT_EQ(mem.download<uint32_t>(a.var, 1)[0], 3u);
  EXPECT_EQ(mem.download<uint32_t>(b.var, 1)[0], 1u);
}

TEST(PtxCompileCache, OtherTenantsAndUnnamedLoadsDoNotShare) {
  HostMem mem;
  Counter a(mem, "uid:1000"), b(mem, "vm:guest1"), c(mem, ""), d(mem, "");
  EXPECT_NE(&a.m->impl(), &b.m->impl());
  EXPECT_NE(&c.m->impl(), &d.m->impl());
  EXPECT_NE(&a.m->impl(), &c.m->impl());
  // the same tenant, other text: another module
  std::string other = kCounterPtx;
  other.replace(other.find("add.u32"), 7, "max.u32");
  std::string err;
  auto e = Module::from_ptx(other, &err, "uid:1000");
  ASSERT_TRUE(e) << err;
  EXPECT_NE(&a.m->impl(), &e->impl());
}

TEST(PtxCompileCache, AProgramRunAgainFindsItsKernelsCompiled) {
  // The first run compiles the kernel (in the background) and ends; the
  // second run's load finds the module, compiled: no compile, and its first
  // launch runs the compiled code with the right results.
  Engine eng(2);
  const void* first = nullptr;
  {
    std::string err;
    Iterate r;
    r.m = Module::from_ptx(kPtx, &err, "uid:4242");
    ASSERT_TRUE(r.m) << err;
    first = &r.m->impl();
    const auto before = wh::ptx::compile_stats().kernels;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (wh::ptx::compile_stats().kernels == before && std::chrono::steady_clock::now() < deadline) r.launch(eng);
    ASSERT_GT(wh::ptx::compile_stats().kernels, before);
  }
  const auto compiled = wh::ptx::compile_stats().kernels;
  std::string err;
  Iterate again;
  again.m = Module::from_ptx(kPtx, &err, "uid:4242");
  ASSERT_TRUE(again.m) << err;
  EXPECT_EQ(&again.m->impl(), first) << "the module was not kept after its last unload";
  const auto t0 = std::chrono::steady_clock::now();
  again.launch(eng);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(wh::ptx::compile_stats().kernels, compiled) << "compiled again";
  std::printf("second run's first launch: %.1f ms\n", ms);
}

}  // namespace
