// Instruction semantics checked against the host, value by value: the
// extended-precision (carry) arithmetic that libdevice's double-precision
// trigonometry needs for large arguments, and shuffles whose source lane does
// not take part (outside the branch), which GPUs answer with 0; barriers
// reached by some lanes of a warp while the others still run elsewhere;
// dynamic shared memory allocated in 128-byte units, as a GPU does; .relu on half
// precision fma / max; min/max .NaN; half-precision compares (setp and set); indirect
// calls through function addresses (.callprototype); mbarrier objects, also as the
// target of cp.async.mbarrier.arrive.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>

#include "ptx_test_util.hpp"

using namespace whtest;
using wh::ptx::Engine;
using wh::ptx::LaunchError;
using wh::ptx::Module;

namespace {

// What every test here starts from: one module, a host memory, an engine.
struct Loaded {
  explicit Loaded(const std::string& ptx) : m(Module::from_ptx(ptx, &err)) {}
  // Packs `args` for kernel `k` and launches it with `c`.
  template <class... T>
  LaunchError launch(const char* k, const wh::ptx::LaunchConfig& c, const T&... args) {
    Args a(m->kernel(k));
    (a(args), ...);
    return eng.launch(*m, k, c, a.data(), a.size(), mem);
  }
  // Kernels k(in, out, n) whose threads each write `out_words` u32: *out gets them.
  LaunchError records(const char* k, const wh::ptx::LaunchConfig& c, const std::vector<uint32_t>& in, int n,
                      size_t out_words, std::vector<uint32_t>* out) {
    uint64_t din = mem.upload(in), dout = mem.alloc(size_t(n) * out_words * 4);
    LaunchError e = launch(k, c, din, dout, uint32_t(n));
    *out = mem.download<uint32_t>(dout, size_t(n) * out_words);
    return e;
  }
  std::string err;  // before m: the constructor fills it
  std::unique_ptr<Module> m;
  HostMem mem;
  Engine eng{1};
};

// The PTX of a kernel name(pa, pout, n) for Loaded::records: each thread
// tid < n (%r1) runs `body` with %rd2 at its `in_bytes` record in pa and %rd3
// at its `out_bytes` record in pout (registers %r2..%r19 free).
std::string records_ptx(const char* target, const char* name, int in_bytes, int out_bytes, const char* body) {
  return std::string(".version 8.0\n.target ") + target + "\n.address_size 64\n.visible .entry " + name +
         "(.param .u64 pa, .param .u64 pout, .param .u32 n)\n{\n"
         "  .reg .pred %p;\n  .reg .u32 %r<20>;\n  .reg .u64 %rd<8>;\n"
         "  ld.param.u64 %rd0, [pa];\n  ld.param.u64 %rd1, [pout];\n  ld.param.u32 %r0, [n];\n"
         "  mov.u32 %r1, %tid.x;\n  setp.ge.u32 %p, %r1, %r0;\n  @%p bra DONE;\n"
         "  mul.wide.u32 %rd2, %r1, " + std::to_string(in_bytes) + ";\n  add.u64 %rd2, %rd0, %rd2;\n"
         "  mul.wide.u32 %rd3, %r1, " + std::to_string(out_bytes) + ";\n  add.u64 %rd3, %rd1, %rd3;\n" +
         body + "DONE:\n  ret;\n}\n";
}

// Per thread, from a[4], b[4] (u32 limbs, least significant first):
//   out[0..3]  = a + b        (add.cc / addc.cc / addc, 128 bits)
//   out[4..7]  = a - b        (sub.cc / subc.cc / subc, 128 bits, modulo 2^128)
//   out[8..10] = a0*b0 + a1 + (a2 << 32)  (mad.lo.cc / madc.hi.cc / addc, 96 bits)
//   out[11]    = the carry out of a 64-bit add.cc.u64 of (a1:a0)+(b1:b0), through addc.u32 0, 0
const char* kCarryPtx = R"(
.version 8.0
.target sm_80
.address_size 64
.visible .entry carry(.param .u64 pa, .param .u64 pout, .param .u32 n)
{
  .reg .pred %p;
  .reg .u32 %r<40>;
  .reg .u64 %rd<12>;
  ld.param.u64 %rd0, [pa];
  ld.param.u64 %rd1, [pout];
  ld.param.u32 %r0, [n];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mad.lo.u32 %r1, %r2, %r3, %r1;
  setp.ge.u32 %p, %r1, %r0;
  @%p bra DONE;
  mul.wide.u32 %rd2, %r1, 32;
  add.u64 %rd2, %rd0, %rd2;
  ld.global.v4.u32 {%r4, %r5, %r6, %r7}, [%rd2];
  ld.global.v4.u32 {%r8, %r9, %r10, %r11}, [%rd2+16];
  add.cc.u32 %r12, %r4, %r8;
  addc.cc.u32 %r13, %r5, %r9;
  addc.cc.u32 %r14, %r6, %r10;
  addc.u32 %r15, %r7, %r11;
  sub.cc.u32 %r16, %r4, %r8;
  subc.cc.u32 %r17, %r5, %r9;
  subc.cc.u32 %r18, %r6, %r10;
  subc.u32 %r19, %r7, %r11;
  mad.lo.cc.u32 %r20, %r4, %r8, %r5;
  madc.hi.cc.u32 %r21, %r4, %r8, %r6;
  addc.u32 %r22, 0, 0;
  mov.b64 %rd3, {%r4, %r5};
  mov.b64 %rd4, {%r8, %r9};
  add.cc.u64 %rd5, %rd3, %rd4;
  addc.u32 %r23, 0, 0;
  mul.wide.u32 %rd6, %r1, 48;
  add.u64 %rd6, %rd1, %rd6;
  st.global.v4.u32 [%rd6], {%r12, %r13, %r14, %r15};
  st.global.v4.u32 [%rd6+16], {%r16, %r17, %r18, %r19};
  st.global.v4.u32 [%rd6+32], {%r20, %r21, %r22, %r23};
DONE:
  ret;
}
)";

TEST(PtxSemantics, CarryArithmeticAgainstTheHost) {
  Loaded r(kCarryPtx);
  ASSERT_TRUE(r.m) << r.err;
  std::mt19937 rng(11);
  std::vector<uint32_t> in;
  const uint32_t edge[] = {0u, 1u, 0x7fffffffu, 0x80000000u, 0xfffffffeu, 0xffffffffu};
  const int n = 2048;
  for (int i = 0; i < n; i++)
    for (int k = 0; k < 8; k++) in.push_back(i < 512 ? edge[(i * 7 + k * 3 + i / 6) % 6] : uint32_t(rng()));
  std::vector<uint32_t> o;
  auto e = r.records("carry", cfg({(n + 127) / 128}, {128}), in, n, 12, &o);
  ASSERT_EQ(e.kind, LaunchError::None) << e.message;
  auto u128 = [](const uint32_t* p) {
    return (unsigned __int128)p[0] | (unsigned __int128)p[1] << 32 | (unsigned __int128)p[2] << 64 |
           (unsigned __int128)p[3] << 96;
  };
  for (int i = 0; i < n; i++) {
    const uint32_t* x = &in[size_t(i) * 8];
    const uint32_t* g = &o[size_t(i) * 12];
    unsigned __int128 A = u128(x), B = u128(x + 4);
    EXPECT_TRUE(u128(g) == A + B) << "add, thread " << i;
    EXPECT_TRUE(u128(g + 4) == A - B) << "sub, thread " << i;
    unsigned __int128 mad = (unsigned __int128)uint64_t(x[0]) * x[4] + x[1] + ((unsigned __int128)x[2] << 32);
    unsigned __int128 got = (unsigned __int128)g[8] | (unsigned __int128)g[9] << 32 | (unsigned __int128)g[10] << 64;
    EXPECT_TRUE(got == mad) << "mad chain, thread " << i;
    uint64_t a64 = uint64_t(x[0]) | uint64_t(x[1]) << 32, b64 = uint64_t(x[4]) | uint64_t(x[5]) << 32;
    EXPECT_EQ(g[11], uint32_t(a64 + b64 < a64)) << "add.cc.u64 carry, thread " << i;
  }
}

// Lanes 0..7 shuffle down by 16, 8, 4, 2, 1 inside `if (lane < 8)`: a source
// lane outside the branch gives 0 (what GPUs give; the ISA leaves it
// undefined); a source past the segment gives the lane's own value.
const char* kShflPtx = R"(
.version 8.0
.target sm_80
.address_size 64
.visible .entry partial(.param .u64 pout)
{
  .reg .pred %p<2>;
  .reg .u32 %r<12>;
  .reg .u64 %rd<4>;
  ld.param.u64 %rd0, [pout];
  mov.u32 %r0, %laneid;
  add.u32 %r1, %r0, 100;
  setp.ge.u32 %p0, %r0, 8;
  @%p0 bra OUT;
  shfl.sync.down.b32 %r2|%p1, %r1, 16, 31, 255;
  shfl.sync.down.b32 %r3, %r1, 4, 31, 255;
  shfl.sync.down.b32 %r4, %r1, 31, 31, 255;
  mul.wide.u32 %rd1, %r0, 16;
  add.u64 %rd1, %rd0, %rd1;
  st.global.v2.u32 [%rd1], {%r2, %r3};
  st.global.u32 [%rd1+8], %r4;
OUT:
  ret;
}
)";

TEST(PtxSemantics, ShuffleFromALaneOutsideTheBranchGivesZero) {
  Loaded r(kShflPtx);
  ASSERT_TRUE(r.m) << r.err;
  uint64_t dout = r.mem.alloc(8 * 16);
  auto e = r.launch("partial", cfg({1}, {32}), dout);
  ASSERT_EQ(e.kind, LaunchError::None) << e.message;
  auto o = r.mem.download<uint32_t>(dout, 8 * 4);
  for (uint32_t l = 0; l < 8; l++) {
    EXPECT_EQ(o[l * 4 + 0], 0u) << "lane " << l << " read lane " << l + 16 << ", outside the branch";
    EXPECT_EQ(o[l * 4 + 1], l + 4 < 8 ? l + 4 + 100 : 0u) << "lane " << l << " by 4";
    // by 31: lane 0 reads lane 31 (outside the branch: 0), the others are past the segment
    EXPECT_EQ(o[l * 4 + 2], l == 0 ? 0u : l + 100) << "lane " << l << " by 31";
  }
}

// A barrier counts threads (sm_70 and later): lanes of a warp that reach it
// first wait there while the warp's other lanes run on (their work placed
// after the ret, at a higher pc, as compilers do), and the warp arrives only
// when they all have. `held` sums in lane 31 while lanes 0..30 wait (thread 0
// reads the sums); `held_exit` has lane 0 wait while lanes 1..31 work and exit.
const char* kHeldPtx = R"(
.version 8.0
.target sm_80
.address_size 64
.visible .entry held(.param .u64 pout)
{
  .reg .pred %p<4>;
  .reg .u32 %r<12>;
  .reg .u64 %rd<4>;
  .shared .align 4 .u32 s[2];
  ld.param.u64 %rd0, [pout];
  mov.u32 %r1, %tid.x;
  and.b32 %r2, %r1, 31;
  setp.ne.u32 %p0, %r2, 31;
  @%p0 bra SYNC;
  bra.uni WORK;
SYNC:
  bar.sync 0;
  setp.ne.u32 %p1, %r1, 0;
  @%p1 bra DONE;
  ld.shared.u32 %r3, [s];
  ld.shared.u32 %r4, [s+4];
  st.global.u32 [%rd0], %r3;
  st.global.u32 [%rd0+4], %r4;
DONE:
  ret;
WORK:
  shr.u32 %r5, %r1, 5;
  mov.u32 %r6, 0;
  mov.u32 %r7, 0;
LOOP:
  add.u32 %r6, %r6, %r7;
  add.u32 %r7, %r7, 1;
  setp.lt.u32 %p2, %r7, 1000;
  @%p2 bra LOOP;
  add.u32 %r6, %r6, %r5;
  mov.u64 %rd1, s;
  mul.wide.u32 %rd2, %r5, 4;
  add.u64 %rd1, %rd1, %rd2;
  st.shared.u32 [%rd1], %r6;
  bra.uni SYNC;
}
.visible .entry held_exit(.param .u64 pout)
{
  .reg .pred %p<4>;
  .reg .u32 %r<12>;
  .reg .u64 %rd<4>;
  .shared .align 4 .u32 c[2];
  ld.param.u64 %rd0, [pout];
  mov.u32 %r1, %tid.x;
  and.b32 %r2, %r1, 31;
  shr.u32 %r5, %r1, 5;
  mov.u64 %rd1, c;
  mul.wide.u32 %rd2, %r5, 4;
  add.u64 %rd1, %rd1, %rd2;
  setp.eq.u32 %p0, %r2, 0;
  @%p0 bra SYNC;
  bra.uni WORK;
SYNC:
  bar.sync 0;
  setp.ne.u32 %p1, %r1, 0;
  @%p1 bra DONE;
  ld.shared.u32 %r3, [c];
  ld.shared.u32 %r4, [c+4];
  st.global.u32 [%rd0], %r3;
  st.global.u32 [%rd0+4], %r4;
DONE:
  ret;
WORK:
  atom.shared.add.u32 %r6, [%rd1], %r2;
  ret;
}
)";

TEST(PtxSemantics, BarrierWaitsForTheWarpsLanesStillRunningElsewhere) {
  Loaded r(kHeldPtx);
  ASSERT_TRUE(r.m) << r.err;
  uint32_t sum = 0;
  for (uint32_t i = 0; i < 1000; i++) sum += i;
  for (const char* k : {"held", "held_exit"}) {
    uint64_t dout = r.mem.alloc(8);
    auto e = r.launch(k, cfg({1}, {64}), dout);
    ASSERT_EQ(e.kind, LaunchError::None) << k << ": " << e.message;
    auto o = r.mem.download<uint32_t>(dout, 2);
    // held: lane 31's sum (plus the warp's index); held_exit: lanes 1..31 of each warp add their lane number
    const uint32_t want0 = std::string(k) == "held" ? sum : 496, want1 = std::string(k) == "held" ? sum + 1 : 496;
    EXPECT_EQ(o[0], want0) << k << ": warp 0's work was not done before the barrier released";
    EXPECT_EQ(o[1], want1) << k << ": warp 1's work was not done before the barrier released";
  }
}

// 28 bytes of dynamic shared memory: a 16-byte load at +16 reads into the
// allocation unit's slack (NVVM widens loads so), a load at +128 is past it.
const char* kSlackPtx = R"(
.version 8.0
.target sm_80
.address_size 64
.extern .shared .align 16 .b8 dyn[];
.visible .entry slack(.param .u64 pout, .param .u32 off)
{
  .reg .u32 %r<8>;
  .reg .u64 %rd<4>;
  ld.param.u64 %rd0, [pout];
  ld.param.u32 %r0, [off];
  mov.u64 %rd1, dyn;
  cvt.u64.u32 %rd2, %r0;
  add.u64 %rd1, %rd1, %rd2;
  mov.u32 %r5, 7;
  st.shared.u32 [dyn+24], %r5;
  ld.shared.v4.u32 {%r1, %r2, %r3, %r4}, [%rd1];
  st.global.v4.u32 [%rd0], {%r1, %r2, %r3, %r4};
  ret;
}
)";

TEST(PtxSemantics, DynamicSharedMemoryIsAllocatedIn128ByteUnits) {
  Loaded r(kSlackPtx);
  ASSERT_TRUE(r.m) << r.err;
  uint64_t dout = r.mem.alloc(16);
  auto e = r.launch("slack", cfg({1}, {1}, 28), dout, uint32_t(16));
  ASSERT_EQ(e.kind, LaunchError::None) << e.message;
  EXPECT_EQ(r.mem.download<uint32_t>(dout, 4)[2], 7u);
  e = r.launch("slack", cfg({1}, {1}, 28), dout, uint32_t(128));
  EXPECT_EQ(e.kind, LaunchError::BadAccess) << "a load past the 128-byte unit must fault";
}

// .relu: a negative result becomes +0, a NaN the canonical NaN (0x7fff).
const char* kReluPtx = R"(
.version 8.0
.target sm_80
.address_size 64
.visible .entry relu(.param .u64 pin, .param .u64 pout)
{
  .reg .b16 %h<8>;
  .reg .b32 %r<4>;
  .reg .u64 %rd<6>;
  ld.param.u64 %rd0, [pin];
  ld.param.u64 %rd1, [pout];
  mov.u32 %r0, %tid.x;
  mul.wide.u32 %rd2, %r0, 8;
  add.u64 %rd3, %rd0, %rd2;
  ld.global.v4.b16 {%h0, %h1, %h2, %h3}, [%rd3];
  fma.rn.relu.bf16 %h4, %h0, %h1, %h2;
  mov.b32 %r1, {%h0, %h2};
  mov.b32 %r2, {%h1, %h3};
  max.relu.f16x2 %r3, %r1, %r2;
  mul.wide.u32 %rd2, %r0, 8;
  add.u64 %rd4, %rd1, %rd2;
  st.global.b16 [%rd4], %h4;
  st.global.b32 [%rd4+4], %r3;
  ret;
}
)";

TEST(PtxSemantics, ReluOnHalfPrecision) {
  Loaded r(kReluPtx);
  ASSERT_TRUE(r.m) << r.err;
  // Per thread {a, b, c, d} as bf16 for the fma (a*b+c), and as f16 pairs
  // {a, c} and {b, d} for max.relu.f16x2.
  const uint16_t bf2 = 0x4000, bf3 = 0x4040, bfm10 = 0xc120, bf1 = 0x3f80, bf7 = 0x40e0, bfnan = 0x7fc1;
  const uint16_t hm2 = 0xc000, hm1 = 0xbc00, h3 = 0x4200;
  std::vector<uint16_t> in = {bf2, bf3, bfm10, 0,  bf2, bf3, bf1, 0,  bfnan, bf3, bf1, 0,  hm2, hm1, h3, hm2};
  uint64_t din = r.mem.upload(in), dout = r.mem.alloc(4 * 8);
  auto e = r.launch("relu", cfg({1}, {4}), din, dout);
  ASSERT_EQ(e.kind, LaunchError::None) << e.message;
  auto o = r.mem.download<uint16_t>(dout, 16);
  EXPECT_EQ(o[0], 0u) << "2*3-10 = -4: relu gives +0";
  EXPECT_EQ(o[4], bf7) << "2*3+1 = 7";
  EXPECT_EQ(o[8], 0x7fffu) << "NaN: the canonical NaN";
  // thread 3: max(-2, -1) = -1 -> +0 (low half); max(3, -2) = 3 (high half)
  EXPECT_EQ(o[14], 0u);
  EXPECT_EQ(o[15], h3);
}

// Per thread two f16 pairs a = {a0, a1}, b = {b0, b1} (and the same bits read
// as bf16): out[0] setp.lt.f16 a0<b0, [1] setp.neu.f16, [2] setp.gt.bf16,
// [3..4] setp.le.f16x2 p|q, [5] set.eq.f16.f16 (1.0 as f16), [6] set.lt.u32.f16x2.
const char* kHalfCmpPtx = R"(
.version 8.0
.target sm_80
.address_size 64
.visible .entry hcmp(.param .u64 pin, .param .u64 pout)
{
  .reg .pred %p<8>;
  .reg .b16 %h<4>;
  .reg .b32 %r<16>;
  .reg .u64 %rd<6>;
  ld.param.u64 %rd0, [pin];
  ld.param.u64 %rd1, [pout];
  mov.u32 %r0, %tid.x;
  mul.wide.u32 %rd2, %r0, 8;
  add.u64 %rd3, %rd0, %rd2;
  ld.global.b32 %r1, [%rd3];
  ld.global.b32 %r2, [%rd3+4];
  mov.b32 {%h0, %h1}, %r1;
  mov.b32 {%h2, %h3}, %r2;
  setp.lt.f16 %p0, %h0, %h2;
  setp.neu.f16 %p1, %h0, %h2;
  setp.gt.bf16 %p2, %h0, %h2;
  setp.le.f16x2 %p3|%p4, %r1, %r2;
  selp.u32 %r3, 1, 0, %p0;
  selp.u32 %r4, 1, 0, %p1;
  selp.u32 %r5, 1, 0, %p2;
  selp.u32 %r6, 1, 0, %p3;
  selp.u32 %r7, 1, 0, %p4;
  set.eq.f16.f16 %h1, %h0, %h2;
  cvt.u32.u16 %r8, %h1;
  set.lt.u32.f16x2 %r9, %r1, %r2;
  mul.wide.u32 %rd2, %r0, 32;
  add.u64 %rd4, %rd1, %rd2;
  st.global.v4.u32 [%rd4], {%r3, %r4, %r5, %r6};
  st.global.u32 [%rd4+16], %r7;
  st.global.u32 [%rd4+20], %r8;
  st.global.u32 [%rd4+24], %r9;
  ret;
}
)";

float f16_bits(uint16_t h) {
  const int e = (h >> 10) & 31, f = h & 1023;
  float v = e == 0 ? std::ldexp(float(f), -24) : e == 31 ? (f ? NAN : INFINITY) : std::ldexp(float(f | 1024), e - 25);
  return h & 0x8000 ? -v : v;
}
float bf16_bits(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(PtxSemantics, HalfPrecisionCompares) {
  Loaded r(kHalfCmpPtx);
  ASSERT_TRUE(r.m) << r.err;
  // {a0, a1, b0, b1}: 1 < 2, NaN, -0 vs +0, 65504 vs inf, denormals, negatives.
  std::vector<uint16_t> in = {0x3c00, 0x4000, 0x4000, 0x3c00,  0x7e00, 0x3c00, 0x3c00, 0x7e00,
                              0x8000, 0xfbff, 0x0000, 0xfc00,  0x7bff, 0x0001, 0x7c00, 0x0002,
                              0xc000, 0xbc00, 0xbc00, 0xc000};
  const int n = int(in.size() / 4);
  uint64_t din = r.mem.upload(in), dout = r.mem.alloc(32 * n);
  auto e = r.launch("hcmp", cfg({1}, {uint32_t(n)}), din, dout);
  ASSERT_EQ(e.kind, LaunchError::None) << e.message;
  auto o = r.mem.download<uint32_t>(dout, 8 * n);
  for (int t = 0; t < n; t++) {
    const uint16_t* h = &in[4 * t];
    const float a0 = f16_bits(h[0]), a1 = f16_bits(h[1]), b0 = f16_bits(h[2]), b1 = f16_bits(h[3]);
    const uint32_t* r = &o[8 * t];
    EXPECT_EQ(r[0], uint32_t(a0 < b0)) << "setp.lt.f16, thread " << t;
    EXPECT_EQ(r[1], uint32_t(!(a0 == b0))) << "setp.neu.f16 (NaN: true), thread " << t;
    EXPECT_EQ(r[2], uint32_t(bf16_bits(h[0]) > bf16_bits(h[2]))) << "setp.gt.bf16, thread " << t;
    EXPECT_EQ(r[3], uint32_t(a0 <= b0)) << "setp.le.f16x2 low, thread " << t;
    EXPECT_EQ(r[4], uint32_t(a1 <= b1)) << "setp.le.f16x2 high, thread " << t;
    EXPECT_EQ(r[5], a0 == b0 ? 0x3c00u : 0u) << "set.eq.f16.f16, thread " << t;
    EXPECT_EQ(r[6], (a0 < b0 ? 0xffffu : 0u) | (a1 < b1 ? 0xffff0000u : 0u)) << "set.lt.u32.f16x2, thread " << t;
  }
}

// Even lanes call twice() through a register, odd lanes plus1(): the warp's
// targets diverge. `bad` calls through a data pointer and must fault.
const char* kIndirectPtx = R"(
.version 8.0
.target sm_80
.address_size 64
.func (.param .b32 r) twice(.param .b32 x)
{
  .reg .b32 %r<2>;
  ld.param.b32 %r0, [x];
  shl.b32 %r1, %r0, 1;
  st.param.b32 [r], %r1;
  ret;
}
.func (.param .b32 r) plus1(.param .b32 x)
{
  .reg .b32 %r<2>;
  ld.param.b32 %r0, [x];
  add.s32 %r1, %r0, 1;
  st.param.b32 [r], %r1;
  ret;
}
.visible .entry calls(.param .u64 pout, .param .u64 pbad)
{
  .reg .pred %p<2>;
  .reg .b32 %r<6>;
  .reg .b64 %rd<6>;
  ld.param.u64 %rd0, [pout];
  mov.u32 %r0, %tid.x;
  and.b32 %r1, %r0, 1;
  setp.eq.u32 %p0, %r1, 0;
  mov.u64 %rd1, twice;
  mov.u64 %rd2, plus1;
  selp.b64 %rd3, %rd1, %rd2, %p0;
  ld.param.u64 %rd4, [pbad];
  setp.ne.u64 %p1, %rd4, 0;
  @%p1 mov.u64 %rd3, %rd4;
  add.u32 %r2, %r0, 10;
  {
  .param .b32 a0;
  .param .b32 r0;
  st.param.b32 [a0], %r2;
  proto : .callprototype (.param .b32 _) _ (.param .b32 _);
  call (r0), %rd3, (a0), proto;
  ld.param.b32 %r3, [r0];
  }
  mul.wide.u32 %rd5, %r0, 4;
  add.u64 %rd5, %rd0, %rd5;
  st.global.u32 [%rd5], %r3;
  ret;
}
)";

TEST(PtxSemantics, IndirectCallsThroughFunctionAddresses) {
  Loaded r(kIndirectPtx);
  ASSERT_TRUE(r.m) << r.err;
  uint64_t dout = r.mem.alloc(4 * 64);
  auto e = r.launch("calls", cfg({1}, {64}), dout, uint64_t(0));
  ASSERT_EQ(e.kind, LaunchError::None) << e.message;
  auto o = r.mem.download<uint32_t>(dout, 64);
  for (uint32_t t = 0; t < 64; t++) EXPECT_EQ(o[t], t % 2 ? t + 11 : 2 * (t + 10)) << "thread " << t;
  e = r.launch("calls", cfg({1}, {32}), dout, dout);  // a data address is no function
  EXPECT_EQ(e.kind, LaunchError::BadAccess) << e.message;
}

// min/max .NaN: a NaN operand gives the canonical NaN; without .NaN the other operand.
const char* kMinMaxNanPtx = R"(
.version 8.0
.target sm_80
.address_size 64
.visible .entry mm(.param .u64 pout, .param .b16 hn, .param .b16 h2, .param .f32 fn, .param .f32 f2)
{
  .reg .b16 %h<8>;
  .reg .f32 %f<8>;
  .reg .b32 %r<8>;
  .reg .u64 %rd<2>;
  ld.param.u64 %rd0, [pout];
  ld.param.b16 %h0, [hn];
  ld.param.b16 %h1, [h2];
  ld.param.f32 %f0, [fn];
  ld.param.f32 %f1, [f2];
  max.NaN.bf16 %h2, %h0, %h1;
  min.NaN.f16 %h3, %h1, %h0;
  max.bf16 %h4, %h0, %h1;
  max.NaN.f32 %f2, %f0, %f1;
  min.f32 %f3, %f0, %f1;
  min.NaN.f32 %f4, %f1, %f1;
  cvt.u32.u16 %r0, %h2;
  cvt.u32.u16 %r1, %h3;
  cvt.u32.u16 %r2, %h4;
  mov.b32 %r3, %f2;
  mov.b32 %r4, %f3;
  mov.b32 %r5, %f4;
  st.global.v4.u32 [%rd0], {%r0, %r1, %r2, %r3};
  st.global.v2.u32 [%rd0+16], {%r4, %r5};
  ret;
}
)";

TEST(PtxSemantics, MinMaxNaNGivesTheCanonicalNaN) {
  Loaded r(kMinMaxNanPtx);
  ASSERT_TRUE(r.m) << r.err;
  uint64_t dout = r.mem.alloc(32);
  // bf16 NaN 0x7fc1 and 2.0 (0x4000); f16 reads the same bits (0x7fc1 is an f16 NaN too).
  const float fnan = std::nanf(""), two = 2.0f;
  auto e = r.launch("mm", cfg({1}, {1}), dout, uint16_t(0x7fc1), uint16_t(0x4000), fnan, two);
  ASSERT_EQ(e.kind, LaunchError::None) << e.message;
  auto o = r.mem.download<uint32_t>(dout, 6);
  EXPECT_EQ(o[0], 0x7fffu) << "max.NaN.bf16";
  EXPECT_EQ(o[1], 0x7fffu) << "min.NaN.f16";
  EXPECT_EQ(o[2], 0x4000u) << "max.bf16 without .NaN: the number";
  EXPECT_EQ(o[3], 0x7fffffffu) << "max.NaN.f32";
  EXPECT_EQ(o[4], 0x40000000u) << "min.f32 without .NaN: the number";
  EXPECT_EQ(o[5], 0x40000000u) << "min.NaN.f32 of numbers";
}

// Three phases of one mbarrier, 64 threads (two warps): every thread stores,
// arrives and waits on its token, then reads the other warp's store; in the
// second phase thread 0 arrives with arrive_drop and the waits go by parity;
// in the third only the 63 others arrive. out[tid] = the read value, out[64 +
// tid] = the pending count of the first token (their sum is 1+..+64).
const char* kMbarPtx = R"(
.version 8.0
.target sm_80
.address_size 64
.visible .entry mbar(.param .u64 pout)
{
  .reg .pred %p<4>;
  .reg .b32 %r<12>;
  .reg .b64 %rd<8>;
  .shared .align 8 .b64 bar;
  .shared .align 4 .u32 val[64];
  ld.param.u64 %rd0, [pout];
  mov.u32 %r0, %tid.x;
  setp.ne.u32 %p0, %r0, 0;
  @%p0 bra INIT_DONE;
  mov.u32 %r1, 64;
  mbarrier.init.shared.b64 [bar], %r1;
INIT_DONE:
  bar.sync 0;
  add.u32 %r2, %r0, 1;
  mov.u32 %r3, val;
  shl.b32 %r4, %r0, 2;
  add.u32 %r5, %r3, %r4;
  st.shared.u32 [%r5], %r2;
  mbarrier.arrive.shared.b64 %rd1, [bar];
W1:
  mbarrier.test_wait.shared.b64 %p1, [bar], %rd1;
  @!%p1 bra W1;
  add.u32 %r6, %r0, 32;
  and.b32 %r6, %r6, 63;
  shl.b32 %r6, %r6, 2;
  add.u32 %r6, %r3, %r6;
  ld.shared.u32 %r7, [%r6];
  mbarrier.pending_count.b64 %r8, %rd1;
  mul.wide.u32 %rd2, %r0, 4;
  add.u64 %rd3, %rd0, %rd2;
  st.global.u32 [%rd3], %r7;
  st.global.u32 [%rd3+256], %r8;
  @%p0 bra ARRIVE2;
  mbarrier.arrive_drop.shared.b64 %rd4, [bar];
  bra.uni W2;
ARRIVE2:
  mbarrier.arrive.shared.b64 %rd4, [bar];
W2:
  mbarrier.try_wait.parity.shared.b64 %p2, [bar], 1;
  @!%p2 bra W2;
  @!%p0 bra DONE;
  mbarrier.arrive.shared.b64 %rd5, [bar];
W3:
  mbarrier.test_wait.shared.b64 %p3, [bar], %rd5;
  @!%p3 bra W3;
DONE:
  ret;
}
)";

TEST(PtxSemantics, MbarrierPhases) {
  Loaded r(kMbarPtx);
  ASSERT_TRUE(r.m) << r.err;
  uint64_t dout = r.mem.alloc(4 * 128);
  auto c = cfg({1}, {64});
  c.timeout_ms = 20000;  // a phase that never completes would spin
  auto e = r.launch("mbar", c, dout);
  ASSERT_EQ(e.kind, LaunchError::None) << e.message;
  auto o = r.mem.download<uint32_t>(dout, 128);
  uint32_t pending = 0;
  for (uint32_t t = 0; t < 64; t++) {
    EXPECT_EQ(o[t], (t + 32) % 64 + 1) << "thread " << t << " read before the other warp's store";
    pending += o[64 + t];
  }
  EXPECT_EQ(pending, 64u * 65 / 2) << "the tokens' pending counts";
}


// cp.async.mbarrier.arrive, 64 threads: each copies in[tid] into shared memory and
// arrives through the copy (.noinc: the arrival itself), waits for phase 0 by parity
// and reads the other warp's copy; then the form without .noinc (a net change of zero)
// before a plain arrive, whose tokens' pending counts must be 64, 63, ..., 1.
const char* kCpMbarPtx = R"(
.version 8.0
.target sm_80
.address_size 64
.visible .entry cpmbar(.param .u64 pin, .param .u64 pout)
{
  .reg .pred %p<4>;
  .reg .b32 %r<12>;
  .reg .b64 %rd<8>;
  .shared .align 8 .b64 bar;
  .shared .align 4 .u32 val[64];
  ld.param.u64 %rd0, [pin];
  ld.param.u64 %rd6, [pout];
  mov.u32 %r0, %tid.x;
  setp.ne.u32 %p0, %r0, 0;
  @%p0 bra INIT_DONE;
  mov.u32 %r1, 64;
  mbarrier.init.shared.b64 [bar], %r1;
INIT_DONE:
  bar.sync 0;
  mov.u32 %r3, val;
  shl.b32 %r4, %r0, 2;
  add.u32 %r5, %r3, %r4;
  mul.wide.u32 %rd2, %r0, 4;
  add.u64 %rd3, %rd0, %rd2;
  cp.async.ca.shared.global [%r5], [%rd3], 4;
  cp.async.mbarrier.arrive.noinc.shared.b64 [bar];
W1:
  mbarrier.try_wait.parity.shared.b64 %p1, [bar], 0;
  @!%p1 bra W1;
  add.u32 %r6, %r0, 32;
  and.b32 %r6, %r6, 63;
  shl.b32 %r6, %r6, 2;
  add.u32 %r6, %r3, %r6;
  ld.shared.u32 %r7, [%r6];
  add.u64 %rd4, %rd6, %rd2;
  st.global.u32 [%rd4], %r7;
  cp.async.mbarrier.arrive.shared.b64 [bar];
  mbarrier.arrive.shared.b64 %rd5, [bar];
  mbarrier.pending_count.b64 %r8, %rd5;
  st.global.u32 [%rd4+256], %r8;
W2:
  mbarrier.test_wait.shared.b64 %p2, [bar], %rd5;
  @!%p2 bra W2;
  ret;
}
)";

TEST(PtxSemantics, CpAsyncMbarrierArrive) {
  Loaded r(kCpMbarPtx);
  ASSERT_TRUE(r.m) << r.err;
  std::vector<uint32_t> in(64);
  for (uint32_t t = 0; t < 64; t++) in[t] = 1000 + 7 * t;
  uint64_t din = r.mem.upload(in), dout = r.mem.alloc(4 * 128);
  auto c = cfg({1}, {64});
  c.timeout_ms = 20000;  // a phase that never completes would spin
  auto e = r.launch("cpmbar", c, din, dout);
  ASSERT_EQ(e.kind, LaunchError::None) << e.message;
  auto o = r.mem.download<uint32_t>(dout, 128);
  std::vector<uint32_t> counts(o.begin() + 64, o.end());
  std::sort(counts.begin(), counts.end());
  for (uint32_t t = 0; t < 64; t++) {
    EXPECT_EQ(o[t], in[(t + 32) % 64]) << "thread " << t << " read before the other warp's copy landed";
    EXPECT_EQ(counts[t], t + 1) << "the tokens' pending counts";
  }
}
}  // namespace

namespace {

// min/max on two 16-bit integers packed in a 32-bit register (CUB's sm_90+
// PTX uses them), with .relu, and min/max.relu.s32: each half on its own.
const std::string kPacked16Ptx = records_ptx("sm_90", "packed", 8, 32, R"(
  ld.global.v2.u32 {%r2, %r3}, [%rd2];
  min.s16x2 %r4, %r2, %r3;
  max.s16x2 %r5, %r2, %r3;
  min.u16x2 %r6, %r2, %r3;
  max.u16x2 %r7, %r2, %r3;
  min.relu.s16x2 %r8, %r2, %r3;
  max.relu.s16x2 %r9, %r2, %r3;
  min.relu.s32 %r10, %r2, %r3;
  max.relu.s32 %r11, %r2, %r3;
  st.global.v4.u32 [%rd3], {%r4, %r5, %r6, %r7};
  st.global.v4.u32 [%rd3+16], {%r8, %r9, %r10, %r11};
)");

TEST(PtxSemantics, PackedSixteenBitMinMaxAgainstTheHost) {
  Loaded r(kPacked16Ptx);
  ASSERT_TRUE(r.m) << r.err;
  const uint32_t edge[] = {0u, 1u, 0x7fff8000u, 0x80007fffu, 0xffff0001u, 0x0001ffffu, 0xffffffffu, 0x12345678u};
  std::mt19937 rng(5);
  std::vector<uint32_t> in;
  const int n = 512;
  for (int i = 0; i < n; i++)
    for (int k = 0; k < 2; k++) in.push_back(i < 64 ? edge[(i / 8 + k * (i % 8)) % 8] : uint32_t(rng()));
  std::vector<uint32_t> o;
  auto e = r.records("packed", cfg({1}, {n}), in, n, 8, &o);
  ASSERT_EQ(e.kind, LaunchError::None) << e.message;
  auto each = [](uint32_t x, uint32_t y, auto f) {
    return uint32_t(uint16_t(f(uint16_t(x), uint16_t(y)))) | uint32_t(uint16_t(f(uint16_t(x >> 16), uint16_t(y >> 16)))) << 16;
  };
  for (int i = 0; i < n; i++) {
    const uint32_t x = in[size_t(i) * 2], y = in[size_t(i) * 2 + 1];
    const uint32_t* g = &o[size_t(i) * 8];
    auto smin = [](uint16_t p, uint16_t q) { return std::min(int16_t(p), int16_t(q)); };
    auto smax = [](uint16_t p, uint16_t q) { return std::max(int16_t(p), int16_t(q)); };
    auto umin = [](uint16_t p, uint16_t q) { return std::min(p, q); };
    auto umax = [](uint16_t p, uint16_t q) { return std::max(p, q); };
    auto relu = [](auto f) { return [f](uint16_t p, uint16_t q) { return std::max<int16_t>(int16_t(f(p, q)), 0); }; };
    EXPECT_EQ(g[0], each(x, y, smin)) << "min.s16x2 " << i;
    EXPECT_EQ(g[1], each(x, y, smax)) << "max.s16x2 " << i;
    EXPECT_EQ(g[2], each(x, y, umin)) << "min.u16x2 " << i;
    EXPECT_EQ(g[3], each(x, y, umax)) << "max.u16x2 " << i;
    EXPECT_EQ(g[4], each(x, y, relu(smin))) << "min.relu.s16x2 " << i;
    EXPECT_EQ(g[5], each(x, y, relu(smax))) << "max.relu.s16x2 " << i;
    EXPECT_EQ(g[6], uint32_t(std::max(std::min(int32_t(x), int32_t(y)), 0))) << "min.relu.s32 " << i;
    EXPECT_EQ(g[7], uint32_t(std::max(std::max(int32_t(x), int32_t(y)), 0))) << "max.relu.s32 " << i;
  }
}

}  // namespace

namespace {

// Scalar video shifts (cuSPARSE's PTX: vshr.u32.u32.u32.clamp.add): shift
// amounts past 31 clamped to 32 or wrapped, arithmetic shifts of signed
// values, .sat, and the secondary add/min/max.
const std::string kVideoShiftPtx = records_ptx("sm_80", "vsh", 12, 24, R"(
  ld.global.u32 %r2, [%rd2];
  ld.global.u32 %r3, [%rd2+4];
  ld.global.u32 %r4, [%rd2+8];
  vshr.u32.u32.u32.clamp.add %r5, %r2, %r3, %r4;
  vshr.s32.s32.u32.clamp %r6, %r2, %r3;
  vshr.u32.u32.u32.wrap.max %r7, %r2, %r3, %r4;
  vshl.u32.u32.u32.clamp %r8, %r2, %r3;
  vshl.s32.s32.u32.sat.clamp.min %r9, %r2, %r3, %r4;
  vshl.u32.u32.u32.wrap.add %r10, %r2, %r3, %r4;
  st.global.v2.u32 [%rd3], {%r5, %r6};
  st.global.v2.u32 [%rd3+8], {%r7, %r8};
  st.global.v2.u32 [%rd3+16], {%r9, %r10};
)");

TEST(PtxSemantics, VideoShiftsAgainstTheHost) {
  Loaded r(kVideoShiftPtx);
  ASSERT_TRUE(r.m) << r.err;
  std::mt19937 rng(3);
  const uint32_t vals[] = {0u, 1u, 0x7fffffffu, 0x80000000u, 0xffffffffu, 0x12345678u};
  const uint32_t shifts[] = {0u, 1u, 5u, 31u, 32u, 33u, 64u, 0xffffffffu};
  std::vector<uint32_t> in;
  for (uint32_t a : vals)
    for (uint32_t b : shifts) in.insert(in.end(), {a, b, uint32_t(rng())});
  for (int i = 0; i < 64; i++) in.insert(in.end(), {uint32_t(rng()), uint32_t(rng() % 40), uint32_t(rng())});
  const int n = int(in.size() / 3);
  std::vector<uint32_t> o;
  auto e = r.records("vsh", cfg({1}, {uint32_t(n)}), in, n, 6, &o);
  ASSERT_EQ(e.kind, LaunchError::None) << e.message;
  for (int i = 0; i < n; i++) {
    const uint32_t x = in[size_t(i) * 3], s = in[size_t(i) * 3 + 1], c = in[size_t(i) * 3 + 2];
    const uint32_t cl = s > 32 ? 32 : s, wr = s & 31;
    const uint64_t ux = x;
    const int64_t sx = int32_t(x);
    const uint32_t* g = &o[size_t(i) * 6];
    EXPECT_EQ(g[0], uint32_t((ux >> cl) + c)) << "vshr.clamp.add " << x << " " << s;
    EXPECT_EQ(g[1], uint32_t(sx >> cl)) << "vshr.s32.clamp " << x << " " << s;
    EXPECT_EQ(g[2], std::max(uint32_t(ux >> wr), c)) << "vshr.wrap.max " << x << " " << s;
    EXPECT_EQ(g[3], uint32_t(ux << cl)) << "vshl.clamp " << x << " " << s;
    const int64_t shl = int64_t(uint64_t(sx) << cl);
    const int64_t satv = std::clamp<int64_t>(shl, INT32_MIN, INT32_MAX);
    EXPECT_EQ(g[4], uint32_t(std::min<int64_t>(satv, int32_t(c)))) << "vshl.sat.clamp.min " << x << " " << s;
    EXPECT_EQ(g[5], uint32_t((ux << wr) + c)) << "vshl.wrap.add " << x << " " << s;
  }
  // With operand selectors (not implemented): the module loads, the kernel is refused at launch.
  std::string sel = kVideoShiftPtx;
  const std::string plain = "vshr.s32.s32.u32.clamp %r6, %r2, %r3;";
  sel.replace(sel.find(plain), plain.size(), "vshr.s32.s32.u32.clamp %r6, %r2.b1, %r3;");
  r.m = Module::from_ptx(sel, &r.err);
  ASSERT_TRUE(r.m) << r.err;
  std::vector<uint32_t> unused;
  e = r.records("vsh", cfg({1}, {uint32_t(n)}), in, n, 6, &unused);
  EXPECT_EQ(e.kind, LaunchError::Unsupported) << e.message;
}

// Warp collectives whose membermask names a subset of the warp, one per lane,
// as cooperative groups' labeled partitions issue them: all 32 lanes execute
// match.any (their label's group), then redux.sync.max/add, vote.sync.ballot and
// match.all with that group as membermask; each lane's results cover its own
// group only.
TEST(PtxSemantics, CollectivesOverEachLanesMemberMask) {
  const char* ptx = R"(.version 8.0
.target sm_80
.address_size 64
.visible .entry groups(.param .u64 pv, .param .u64 pout)
{
  .reg .pred %p<3>;
  .reg .b32 %r<16>;
  .reg .b64 %rd<6>;
  ld.param.u64 %rd0, [pv];
  ld.param.u64 %rd1, [pout];
  mov.u32 %r0, %laneid;
  rem.u32 %r1, %r0, 3;
  mul.wide.u32 %rd2, %r0, 4;
  add.u64 %rd3, %rd0, %rd2;
  ld.global.s32 %r2, [%rd3];
  match.any.sync.b32 %r3, %r1, 0xffffffff;
  redux.sync.max.s32 %r4, %r2, %r3;
  redux.sync.add.u32 %r5, %r2, %r3;
  setp.gt.s32 %p1, %r2, 0;
  vote.sync.ballot.b32 %r6, %p1, %r3;
  vote.sync.all.pred %p2, %p1, %r3;
  selp.u32 %r7, 1, 0, %p2;
  match.all.sync.b32 %r8|%p2, %r1, %r3;
  mul.wide.u32 %rd4, %r0, 24;
  add.u64 %rd5, %rd1, %rd4;
  st.global.u32 [%rd5], %r3;
  st.global.u32 [%rd5+4], %r4;
  st.global.u32 [%rd5+8], %r5;
  st.global.u32 [%rd5+12], %r6;
  st.global.u32 [%rd5+16], %r7;
  st.global.u32 [%rd5+20], %r8;
  ret;
}
)";
  std::string err;
  auto m = Module::from_ptx(ptx, &err);
  ASSERT_TRUE(m) << err;
  HostMem mem;
  Engine eng(1);
  std::vector<int32_t> v(32);
  for (int l = 0; l < 32; ++l) v[l] = (l * 37) % 23 - 8;
  v[2] = v[5] = v[8] = v[11] = v[14] = v[17] = v[20] = v[23] = v[26] = v[29] = 5;  // label 2: all positive
  const uint64_t dv = mem.upload(v), dout = mem.alloc(32 * 24);
  Args args(m->kernel("groups"));
  args(dv);
  args(dout);
  wh::ptx::LaunchConfig cfg;
  cfg.grid = {1, 1, 1};
  cfg.block = {32, 1, 1};
  LaunchError e = eng.launch(*m, "groups", cfg, args.data(), args.size(), mem);
  ASSERT_FALSE(e) << e.message;
  const auto out = mem.download<uint32_t>(dout, 32 * 6);
  for (int l = 0; l < 32; ++l) {
    uint32_t g = 0, ballot = 0, sum = 0;
    int32_t mx = INT32_MIN;
    for (int k = 0; k < 32; ++k)
      if (k % 3 == l % 3) {
        g |= 1u << k;
        mx = std::max(mx, v[k]);
        sum += uint32_t(v[k]);
        if (v[k] > 0) ballot |= 1u << k;
      }
    const uint32_t* o = &out[l * 6];
    EXPECT_EQ(o[0], g) << "match.any, lane " << l;
    EXPECT_EQ(int32_t(o[1]), mx) << "redux.max over the lane's group, lane " << l;
    EXPECT_EQ(o[2], sum) << "redux.add over the lane's group, lane " << l;
    EXPECT_EQ(o[3], ballot) << "vote.ballot over the lane's group, lane " << l;
    EXPECT_EQ(o[4], uint32_t(ballot == g)) << "vote.all over the lane's group, lane " << l;
    EXPECT_EQ(o[5], g) << "match.all over the lane's group (one label), lane " << l;
  }
}

// cp.async into shared memory, as nvcc emits it for cuda::memcpy_async and
// __pipeline_memcpy_async: 16-, 8- and 4-byte copies, a src-size below the
// copy size (the rest zero-filled, the source read only that far: the last
// lane's source ends at the buffer's end), and ignore-src; then
// commit_group/wait_group, and shared memory copied out.
TEST(PtxSemantics, AsyncCopiesIntoSharedMemory) {
  const char* ptx = R"(.version 8.0
.target sm_80
.address_size 64
.visible .entry cpa(.param .u64 pin, .param .u64 pout)
{
  .reg .pred %p<3>;
  .reg .b32 %r<14>;
  .reg .b64 %rd<12>;
  .shared .align 16 .b8 buf[2048];
  ld.param.u64 %rd0, [pin];
  ld.param.u64 %rd1, [pout];
  mov.u32 %r0, %laneid;
  mul.wide.u32 %rd2, %r0, 16;
  add.u64 %rd3, %rd0, %rd2;
  mov.u32 %r1, buf;
  mul.lo.u32 %r2, %r0, 16;
  add.u32 %r3, %r1, %r2;
  cp.async.cg.shared.global [%r3], [%rd3], 16;
  and.b32 %r4, %r0, 15;
  sub.u32 %r5, 16, %r4;
  setp.eq.u32 %p1, %r0, 31;
  selp.u32 %r5, 4, %r5, %p1;
  add.u32 %r6, %r3, 512;
  cp.async.ca.shared.global [%r6], [%rd3+0], 16, %r5;
  and.b32 %r7, %r0, 1;
  setp.eq.u32 %p2, %r7, 1;
  add.u32 %r8, %r3, 1024;
  cp.async.ca.shared.global [%r8+8], [%rd3+8], 8, %p2;
  add.u32 %r9, %r3, 1536;
  cp.async.ca.shared.global [%r9+4], [%rd3+4], 4;
  cp.async.commit_group;
  cp.async.wait_group 0;
  bar.sync 0;
  mov.u32 %r10, %r0;
OUT:
  mul.wide.u32 %rd5, %r10, 4;
  add.u64 %rd6, %rd1, %rd5;
  mov.u64 %rd7, buf;
  add.u64 %rd7, %rd7, %rd5;
  ld.shared.u32 %r11, [%rd7];
  st.global.u32 [%rd6], %r11;
  mov.u32 %r12, %ntid.x;
  add.u32 %r10, %r10, %r12;
  setp.lt.u32 %p1, %r10, 512;
  @%p1 bra OUT;
  ret;
}
)";
  std::string err;
  auto m = Module::from_ptx(ptx, &err);
  ASSERT_TRUE(m) << err;
  HostMem mem;
  Engine eng(1);
  std::vector<uint8_t> in(32 * 16 - 12);  // lane 31's 16-byte source runs 12 bytes past the end
  for (size_t i = 0; i < in.size(); ++i) in[i] = uint8_t(i * 7 + 1);
  std::vector<uint8_t> padded(in);
  padded.resize(32 * 16, 0);
  const uint64_t din = mem.upload(in), dout = mem.alloc(2048);
  Args args(m->kernel("cpa"));
  args(din);
  args(dout);
  wh::ptx::LaunchConfig cfg;
  cfg.grid = {1, 1, 1};
  cfg.block = {31, 1, 1};  // lanes 0..30 (every source inside the buffer)
  LaunchError e = eng.launch(*m, "cpa", cfg, args.data(), args.size(), mem);
  ASSERT_FALSE(e) << e.message;
  auto out = mem.download<uint8_t>(dout, 2048);
  for (int l = 0; l < 31; ++l)
    for (int b = 0; b < 16; ++b) {
      const uint8_t src = padded[l * 16 + b];
      EXPECT_EQ(out[l * 16 + b], src) << "16-byte copy, lane " << l << " byte " << b;
      EXPECT_EQ(out[512 + l * 16 + b], b < 16 - (l & 15) ? src : 0) << "src-size copy, lane " << l << " byte " << b;
      if (b >= 8) {
        EXPECT_EQ(out[1024 + l * 16 + b], (l & 1) ? 0 : src) << "ignore-src copy, lane " << l << " byte " << b;
      }
      if (b >= 4 && b < 8) {
        EXPECT_EQ(out[1536 + l * 16 + b], src) << "4-byte copy, lane " << l << " byte " << b;
      }
    }
  // all 32 lanes: lane 31's 16-byte copy reads 12 bytes past the buffer: the
  // interpreter's bad access, naming cp.async
  cfg.block = {32, 1, 1};
  e = eng.launch(*m, "cpa", cfg, args.data(), args.size(), mem);
  EXPECT_EQ(e.kind, LaunchError::BadAccess) << e.message;
  EXPECT_NE(e.message.find("cp.async"), std::string::npos) << e.message;
}

}  // namespace
