// The PTX compiler in compare mode (WORMHOLE_PTX_JIT=compare, set before the
// engine reads it: each launch runs interpreted, then compiled, and the memory
// after both must agree): kernels with loops, divergence, shared memory,
// barriers and faults give the host's results and the interpreter's errors,
// the code really was compiled (the compiler's statistics count it), and a
// kernel whose two runs differ is reported. The whole PTX test corpus also
// runs in compare mode (test ptx.compiled_corpus).
#include <cstdlib>
#include <cstring>

#include "ptx_test_util.hpp"

using namespace whtest;
using wh::ptx::Engine;
using wh::ptx::LaunchError;
using wh::ptx::Module;

namespace {

[[maybe_unused]] const int forced = setenv("WORMHOLE_PTX_JIT", "compare", 1);

// dot[i] = sum over k < n of a[i*n+k] * b[k] for odd i (a loop taken by the
// whole warp), and a per-thread running max over a[i*n..] for even i (a
// divergent branch inside the loop), through a shared-memory copy of b
// loaded in tiles between barriers.
const char* kPtx = R"(.version 8.0
.target sm_80
.address_size 64
.visible .entry mix(.param .u64 pa, .param .u64 pb, .param .u64 pout, .param .u32 n)
{
  .reg .pred %p<4>;
  .reg .u32 %r<12>;
  .reg .u64 %rd<12>;
  .reg .f32 %f<8>;
  .shared .align 4 .f32 tile[64];
  ld.param.u64 %rd0, [pa];
  ld.param.u64 %rd1, [pb];
  ld.param.u64 %rd2, [pout];
  ld.param.u32 %r0, [n];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mad.lo.u32 %r4, %r2, %r3, %r1;
  and.b32 %r5, %r4, 1;
  setp.eq.u32 %p1, %r5, 0;
  mov.f32 %f0, 0f00000000;
  mov.f32 %f1, 0fFF800000;
  mul.lo.u32 %r6, %r4, %r0;
  mov.u32 %r7, 0;
LOOP:
  // tile of b into shared memory: thread t < 64 copies b[k0 + t]
  setp.ge.u32 %p2, %r1, 64;
  @%p2 bra SKIP;
  add.u32 %r8, %r7, %r1;
  mul.wide.u32 %rd3, %r8, 4;
  add.u64 %rd4, %rd1, %rd3;
  ld.global.f32 %f2, [%rd4];
  mul.wide.u32 %rd5, %r1, 4;
  mov.u64 %rd6, tile;
  add.u64 %rd6, %rd6, %rd5;
  st.shared.f32 [%rd6], %f2;
SKIP:
  bar.sync 0;
  mov.u32 %r9, 0;
INNER:
  add.u32 %r10, %r6, %r7;
  add.u32 %r10, %r10, %r9;
  mul.wide.u32 %rd7, %r10, 4;
  add.u64 %rd8, %rd0, %rd7;
  ld.global.f32 %f3, [%rd8];
  mul.wide.u32 %rd9, %r9, 4;
  mov.u64 %rd10, tile;
  add.u64 %rd10, %rd10, %rd9;
  ld.shared.f32 %f4, [%rd10];
  @%p1 bra EVEN;
  fma.rn.f32 %f0, %f3, %f4, %f0;
  bra NEXT;
EVEN:
  max.f32 %f1, %f1, %f3;
NEXT:
  add.u32 %r9, %r9, 1;
  setp.lt.u32 %p3, %r9, 64;
  @%p3 bra INNER;
  bar.sync 0;
  add.u32 %r7, %r7, 64;
  setp.lt.u32 %p3, %r7, %r0;
  @%p3 bra LOOP;
  selp.f32 %f5, %f1, %f0, %p1;
  mul.wide.u32 %rd11, %r4, 4;
  add.u64 %rd11, %rd2, %rd11;
  st.global.f32 [%rd11], %f5;
  ret;
}
.visible .entry clock(.param .u64 pa)
{
  .reg .u32 %r<2>;
  .reg .u64 %rd<4>;
  ld.param.u64 %rd0, [pa];
  mov.u32 %r1, %tid.x;
  mov.u64 %rd1, %globaltimer;
  mul.wide.u32 %rd2, %r1, 8;
  add.u64 %rd3, %rd0, %rd2;
  st.global.u64 [%rd3], %rd1;
  ret;
}
.visible .entry oob(.param .u64 pa, .param .u32 n)
{
  .reg .u32 %r<4>;
  .reg .u64 %rd<4>;
  .reg .f32 %f<2>;
  ld.param.u64 %rd0, [pa];
  ld.param.u32 %r0, [n];
  mov.u32 %r1, %tid.x;
  add.u32 %r2, %r1, %r0;
  mul.wide.u32 %rd1, %r2, 4;
  add.u64 %rd2, %rd0, %rd1;
  ld.global.f32 %f0, [%rd2];
  add.f32 %f1, %f0, %f0;
  st.global.f32 [%rd2], %f1;
  ret;
}
)";

TEST(PtxCompiled, LoopsDivergenceSharedMemoryMatchTheHost) {
  std::string err;
  auto m = Module::from_ptx(kPtx, &err);
  ASSERT_TRUE(m) << err;
  HostMem mem;
  Engine eng(2);
  const uint32_t n = 256, rows = 4 * 96;
  std::vector<float> a(size_t(rows) * n), b(n);
  for (size_t i = 0; i < a.size(); ++i) a[i] = float((i * 37) % 101) / 16.0f - 3.0f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = float((i * 11) % 13) / 8.0f - 0.5f;
  const uint64_t da = mem.upload(a), db = mem.upload(b), dout = mem.alloc(rows * 4);
  const auto before = wh::ptx::compile_stats();
  Args args(m->kernel("mix"));
  args(da);
  args(db);
  args(dout);
  args(n);
  wh::ptx::LaunchConfig cfg;
  cfg.grid = {4, 1, 1};
  cfg.block = {96, 1, 1};
  LaunchError e = eng.launch(*m, "mix", cfg, args.data(), args.size(), mem);
  ASSERT_FALSE(e) << e.message;
  const auto out = mem.download<float>(dout, rows);
  for (uint32_t i = 0; i < rows; ++i) {
    float ref = (i & 1) ? 0.0f : -INFINITY;
    for (uint32_t k = 0; k < n; ++k) ref = (i & 1) ? std::fma(a[size_t(i) * n + k], b[k], ref) : std::max(ref, a[size_t(i) * n + k]);
    ASSERT_EQ(out[i], ref) << "row " << i;
  }
  const auto after = wh::ptx::compile_stats();
  EXPECT_EQ(after.kernels, before.kernels + 1) << "the kernel was not compiled";
  EXPECT_GT(after.instructions, before.instructions);
  // a second launch reuses the code
  e = eng.launch(*m, "mix", cfg, args.data(), args.size(), mem);
  ASSERT_FALSE(e) << e.message;
  EXPECT_EQ(wh::ptx::compile_stats().kernels, after.kernels);
}

TEST(PtxCompiled, AFaultInCompiledCodeIsTheInterpretersError) {
  std::string err;
  auto m = Module::from_ptx(kPtx, &err);
  ASSERT_TRUE(m) << err;
  HostMem mem;
  Engine eng(1);
  std::vector<float> a(64, 1.5f);
  const uint64_t da = mem.upload(a);
  Args args(m->kernel("oob"));
  args(da);
  args(uint32_t(40));  // lanes 24..31 read past the 64 floats
  wh::ptx::LaunchConfig cfg;
  cfg.grid = {1, 1, 1};
  cfg.block = {32, 1, 1};
  LaunchError e = eng.launch(*m, "oob", cfg, args.data(), args.size(), mem);
  ASSERT_EQ(e.kind, LaunchError::BadAccess) << e.message;
  EXPECT_NE(e.message.find("ld.global.f32"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("not inside an allocation"), std::string::npos) << e.message;
  // nothing after the faulting load ran: the lanes in bounds did not store either
  EXPECT_EQ(mem.download<float>(da, 64), a);
}

// The two runs of a kernel that stores the time see different times: compare
// mode names the kernel and the first address that differs.
TEST(PtxCompiled, CompareModeReportsADifference) {
  std::string err;
  auto m = Module::from_ptx(kPtx, &err);
  ASSERT_TRUE(m) << err;
  HostMem mem;
  Engine eng(1);
  const uint64_t d = mem.alloc(32 * 8);
  Args args(m->kernel("clock"));
  args(d);
  wh::ptx::LaunchConfig cfg;
  cfg.grid = {1, 1, 1};
  cfg.block = {32, 1, 1};
  LaunchError e = eng.launch(*m, "clock", cfg, args.data(), args.size(), mem);
  ASSERT_EQ(e.kind, LaunchError::Internal) << e.message;
  EXPECT_NE(e.message.find("kernel clock: compiled and interpreted runs differ at address 0x"), std::string::npos) << e.message;
}

// Many registers zeroed in one block (as reduction kernels start their
// accumulators): the optimizer turns the stores into a memset call, which the
// compiled code must be able to reach (it resolves to the server's libc).
TEST(PtxCompiled, ZeroedRegistersBecomeALibraryCall) {
  constexpr int kRegs = 48;
  std::string ptx = ".version 8.0\n.target sm_80\n.address_size 64\n"
                    ".visible .entry zeros(.param .u64 pout, .param .u32 n)\n{\n"
                    "  .reg .pred %p<2>;\n  .reg .u32 %r<4>;\n  .reg .u64 %rd<4>;\n  .reg .f32 %f<64>;\n"
                    "  ld.param.u64 %rd0, [pout];\n  ld.param.u32 %r0, [n];\n";
  for (int k = 0; k < kRegs; ++k) ptx += "  mov.f32 %f" + std::to_string(k) + ", 0f00000000;\n";
  ptx += "  mov.u32 %r1, 0;\nLOOP:\n  cvt.rn.f32.u32 %f60, %r1;\n";
  for (int k = 0; k < kRegs; ++k)
    ptx += "  fma.rn.f32 %f" + std::to_string(k) + ", %f60, " + std::to_string(k + 1) + ".0, %f" + std::to_string(k) + ";\n";
  ptx += "  add.u32 %r1, %r1, 1;\n  setp.lt.u32 %p1, %r1, %r0;\n  @%p1 bra LOOP;\n"
         "  mov.u32 %r2, %tid.x;\n  mul.wide.u32 %rd1, %r2, " + std::to_string(kRegs * 4) + ";\n  add.u64 %rd2, %rd0, %rd1;\n";
  for (int k = 0; k < kRegs; ++k) ptx += "  st.global.f32 [%rd2+" + std::to_string(4 * k) + "], %f" + std::to_string(k) + ";\n";
  ptx += "  ret;\n}\n";
  std::string err;
  auto m = Module::from_ptx(ptx, &err);
  ASSERT_TRUE(m) << err;
  HostMem mem;
  Engine eng(1);
  const uint64_t d = mem.alloc(32 * kRegs * 4);
  Args args(m->kernel("zeros"));
  args(d);
  args(uint32_t(10));
  wh::ptx::LaunchConfig cfg;
  cfg.grid = {1, 1, 1};
  cfg.block = {32, 1, 1};
  const auto before = wh::ptx::compile_stats();
  LaunchError e = eng.launch(*m, "zeros", cfg, args.data(), args.size(), mem);
  ASSERT_FALSE(e) << e.message;
  EXPECT_EQ(wh::ptx::compile_stats().kernels, before.kernels + 1) << "the kernel was not compiled";
  const auto out = mem.download<float>(d, 32 * kRegs);
  for (int t = 0; t < 32; ++t)
    for (int k = 0; k < kRegs; ++k) ASSERT_EQ(out[t * kRegs + k], 45.0f * float(k + 1)) << "lane " << t << " register " << k;
}

// Directed rounding (fma/add/sub/mul .rm/.rp/.rz.f32), which compiled code
// emulates in double-double, and libm's functions (ex2, lg2, sin, cos,
// tanh), which it calls as the interpreter does: over random operands mixed
// with zeros, denormals, infinities, NaNs and values whose products and sums
// land exactly on, or within an ulp of, a float; compare mode checks every
// result bit against the interpreter.
TEST(PtxCompiled, DirectedRoundingAndLibmAgreeWithTheInterpreter) {
  const char* ops[] = {"fma.rm.f32 %f3, %f0, %f1, %f2", "fma.rp.f32 %f3, %f0, %f1, %f2", "fma.rz.f32 %f3, %f0, %f1, %f2",
                       "fma.rm.ftz.f32 %f3, %f0, %f1, %f2", "add.rm.f32 %f3, %f0, %f1", "add.rp.f32 %f3, %f0, %f1",
                       "add.rz.f32 %f3, %f0, %f1", "sub.rm.f32 %f3, %f0, %f2", "sub.rp.ftz.f32 %f3, %f0, %f2",
                       "mul.rm.f32 %f3, %f0, %f1", "mul.rp.f32 %f3, %f0, %f1", "mul.rz.ftz.f32 %f3, %f0, %f1",
                       "ex2.approx.ftz.f32 %f3, %f0", "ex2.approx.f32 %f3, %f1", "lg2.approx.f32 %f3, %f0",
                       "lg2.approx.ftz.f32 %f3, %f2", "sin.approx.f32 %f3, %f0", "cos.approx.ftz.f32 %f3, %f1",
                       "tanh.approx.f32 %f3, %f2"};
  const int nops = int(sizeof ops / sizeof *ops);
  std::string ptx = ".version 8.0\n.target sm_80\n.address_size 64\n"
                    ".visible .entry dir(.param .u64 pin, .param .u64 pout, .param .u32 n)\n{\n"
                    "  .reg .pred %p<2>;\n  .reg .u32 %r<8>;\n  .reg .u64 %rd<8>;\n  .reg .f32 %f<8>;\n"
                    "  ld.param.u64 %rd0, [pin];\n  ld.param.u64 %rd1, [pout];\n  ld.param.u32 %r0, [n];\n"
                    "  mov.u32 %r1, %tid.x;\n  mov.u32 %r2, %ctaid.x;\n  mov.u32 %r3, %ntid.x;\n"
                    "  mad.lo.u32 %r4, %r2, %r3, %r1;\n  setp.ge.u32 %p1, %r4, %r0;\n  @%p1 bra DONE;\n"
                    "  mul.wide.u32 %rd2, %r4, 12;\n  add.u64 %rd3, %rd0, %rd2;\n"
                    "  ld.global.f32 %f0, [%rd3];\n  ld.global.f32 %f1, [%rd3+4];\n  ld.global.f32 %f2, [%rd3+8];\n"
                    "  mul.wide.u32 %rd4, %r4, " + std::to_string(4 * nops) + ";\n  add.u64 %rd5, %rd1, %rd4;\n";
  for (int k = 0; k < nops; ++k) ptx += std::string("  ") + ops[k] + ";\n  st.global.f32 [%rd5+" + std::to_string(4 * k) + "], %f3;\n";
  ptx += "DONE:\n  ret;\n}\n";
  std::string err;
  auto m = Module::from_ptx(ptx, &err);
  ASSERT_TRUE(m) << err;
  const uint32_t n = 1 << 15;
  std::vector<float> in(size_t(n) * 3);
  uint64_t x = 0x9e3779b97f4a7c15ull;
  auto rnd = [&] { x ^= x << 13; x ^= x >> 7; x ^= x << 17; return x; };
  const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-40f, -1e-40f, 1.17549435e-38f, 3.4e38f, 1.0f, -1.0f};
  for (uint32_t i = 0; i < n; ++i) {
    float* v = &in[size_t(i) * 3];
    for (int k = 0; k < 3; ++k) {
      const uint64_t r = rnd();
      switch (r % 8) {
        case 0: v[k] = special[(r >> 8) % (sizeof special / sizeof *special)]; break;
        case 1: { uint32_t b = uint32_t(r >> 16); std::memcpy(&v[k], &b, 4); break; }  // any bits
        default: v[k] = float(int64_t(r >> 20) % 2000001 - 1000000) * std::ldexp(1.0f, int(r >> 8) % 40 - 30);
      }
    }
    // c = -a*b rounded, and exactly representable sums: results within an ulp of
    // a float and exact zeros
    if (i % 5 == 0) v[2] = -(v[0] * v[1]);
    if (i % 7 == 0) v[1] = std::nextafter(v[0], 0.0f);
  }
  HostMem mem;
  Engine eng(1);
  const uint64_t din = mem.upload(in), dout = mem.alloc(size_t(n) * 4 * nops);
  Args args(m->kernel("dir"));
  args(din);
  args(dout);
  args(n);
  const auto before = wh::ptx::compile_stats();
  LaunchError e = eng.launch(*m, "dir", cfg({n / 256}, {256}), args.data(), args.size(), mem);
  ASSERT_FALSE(e) << e.message;
  EXPECT_EQ(wh::ptx::compile_stats().kernels, before.kernels + 1) << "the kernel was not compiled";
}

}  // namespace
