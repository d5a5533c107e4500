// Instruction semantics checked against the host, value by value: the
// extended-precision (carry) arithmetic that libdevice's double-precision
// trigonometry needs for large arguments, and shuffles whose source lane does
// not take part (outside the branch), which GPUs answer with 0.
#include <cstdint>
#include <random>

#include "ptx_test_util.hpp"

using namespace whtest;
using wh::ptx::Engine;
using wh::ptx::LaunchError;
using wh::ptx::Module;

namespace {

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
  std::string err;
  auto m = Module::from_ptx(kCarryPtx, &err);
  ASSERT_TRUE(m) << err;
  std::mt19937 rng(11);
  std::vector<uint32_t> in;
  const uint32_t edge[] = {0u, 1u, 0x7fffffffu, 0x80000000u, 0xfffffffeu, 0xffffffffu};
  const int n = 2048;
  for (int i = 0; i < n; i++)
    for (int k = 0; k < 8; k++) in.push_back(i < 512 ? edge[(i * 7 + k * 3 + i / 6) % 6] : uint32_t(rng()));
  HostMem mem;
  uint64_t din = mem.upload(in), dout = mem.alloc(size_t(n) * 48);
  Engine eng(1);
  Args a(m->kernel("carry"));
  a(din)(dout)(uint32_t(n));
  auto e = eng.launch(*m, "carry", cfg({(n + 127) / 128}, {128}), a.data(), a.size(), mem);
  ASSERT_EQ(e.kind, LaunchError::None) << e.message;
  auto o = mem.download<uint32_t>(dout, size_t(n) * 12);
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
  std::string err;
  auto m = Module::from_ptx(kShflPtx, &err);
  ASSERT_TRUE(m) << err;
  HostMem mem;
  uint64_t dout = mem.alloc(8 * 16);
  Engine eng(1);
  Args a(m->kernel("partial"));
  a(dout);
  auto e = eng.launch(*m, "partial", cfg({1}, {32}), a.data(), a.size(), mem);
  ASSERT_EQ(e.kind, LaunchError::None) << e.message;
  auto o = mem.download<uint32_t>(dout, 8 * 4);
  for (uint32_t l = 0; l < 8; l++) {
    EXPECT_EQ(o[l * 4 + 0], 0u) << "lane " << l << " read lane " << l + 16 << ", outside the branch";
    EXPECT_EQ(o[l * 4 + 1], l + 4 < 8 ? l + 4 + 100 : 0u) << "lane " << l << " by 4";
    // by 31: lane 0 reads lane 31 (outside the branch: 0), the others are past the segment
    EXPECT_EQ(o[l * 4 + 2], l == 0 ? 0u : l + 100) << "lane " << l << " by 31";
  }
}

}  // namespace

namespace {

// min/max on two 16-bit integers packed in a 32-bit register (CUB's sm_90+
// PTX uses them), with .relu, and min/max.relu.s32: each half on its own.
const char* kPacked16Ptx = R"(
.version 8.0
.target sm_90
.address_size 64
.visible .entry packed(.param .u64 pa, .param .u64 pout, .param .u32 n)
{
  .reg .pred %p;
  .reg .u32 %r<16>;
  .reg .u64 %rd<8>;
  ld.param.u64 %rd0, [pa];
  ld.param.u64 %rd1, [pout];
  ld.param.u32 %r0, [n];
  mov.u32 %r1, %tid.x;
  setp.ge.u32 %p, %r1, %r0;
  @%p bra DONE;
  mul.wide.u32 %rd2, %r1, 8;
  add.u64 %rd2, %rd0, %rd2;
  ld.global.v2.u32 {%r2, %r3}, [%rd2];
  min.s16x2 %r4, %r2, %r3;
  max.s16x2 %r5, %r2, %r3;
  min.u16x2 %r6, %r2, %r3;
  max.u16x2 %r7, %r2, %r3;
  min.relu.s16x2 %r8, %r2, %r3;
  max.relu.s16x2 %r9, %r2, %r3;
  min.relu.s32 %r10, %r2, %r3;
  max.relu.s32 %r11, %r2, %r3;
  mul.wide.u32 %rd3, %r1, 32;
  add.u64 %rd3, %rd1, %rd3;
  st.global.v4.u32 [%rd3], {%r4, %r5, %r6, %r7};
  st.global.v4.u32 [%rd3+16], {%r8, %r9, %r10, %r11};
DONE:
  ret;
}
)";

TEST(PtxSemantics, PackedSixteenBitMinMaxAgainstTheHost) {
  std::string err;
  auto m = Module::from_ptx(kPacked16Ptx, &err);
  ASSERT_TRUE(m) << err;
  const uint32_t edge[] = {0u, 1u, 0x7fff8000u, 0x80007fffu, 0xffff0001u, 0x0001ffffu, 0xffffffffu, 0x12345678u};
  std::mt19937 rng(5);
  std::vector<uint32_t> in;
  const int n = 512;
  for (int i = 0; i < n; i++)
    for (int k = 0; k < 2; k++) in.push_back(i < 64 ? edge[(i / 8 + k * (i % 8)) % 8] : uint32_t(rng()));
  HostMem mem;
  uint64_t din = mem.upload(in), dout = mem.alloc(size_t(n) * 32);
  Engine eng(1);
  Args a(m->kernel("packed"));
  a(din)(dout)(uint32_t(n));
  auto e = eng.launch(*m, "packed", cfg({1}, {n}), a.data(), a.size(), mem);
  ASSERT_EQ(e.kind, LaunchError::None) << e.message;
  auto o = mem.download<uint32_t>(dout, size_t(n) * 8);
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
const char* kVideoShiftPtx = R"(
.version 8.0
.target sm_80
.address_size 64
.visible .entry vsh(.param .u64 pa, .param .u64 pout, .param .u32 n)
{
  .reg .pred %p;
  .reg .u32 %r<20>;
  .reg .u64 %rd<8>;
  ld.param.u64 %rd0, [pa];
  ld.param.u64 %rd1, [pout];
  ld.param.u32 %r0, [n];
  mov.u32 %r1, %tid.x;
  setp.ge.u32 %p, %r1, %r0;
  @%p bra DONE;
  mul.wide.u32 %rd2, %r1, 12;
  add.u64 %rd2, %rd0, %rd2;
  ld.global.u32 %r2, [%rd2];
  ld.global.u32 %r3, [%rd2+4];
  ld.global.u32 %r4, [%rd2+8];
  vshr.u32.u32.u32.clamp.add %r5, %r2, %r3, %r4;
  vshr.s32.s32.u32.clamp %r6, %r2, %r3;
  vshr.u32.u32.u32.wrap.max %r7, %r2, %r3, %r4;
  vshl.u32.u32.u32.clamp %r8, %r2, %r3;
  vshl.s32.s32.u32.sat.clamp.min %r9, %r2, %r3, %r4;
  vshl.u32.u32.u32.wrap.add %r10, %r2, %r3, %r4;
  mul.wide.u32 %rd3, %r1, 24;
  add.u64 %rd3, %rd1, %rd3;
  st.global.v2.u32 [%rd3], {%r5, %r6};
  st.global.v2.u32 [%rd3+8], {%r7, %r8};
  st.global.v2.u32 [%rd3+16], {%r9, %r10};
DONE:
  ret;
}
)";

TEST(PtxSemantics, VideoShiftsAgainstTheHost) {
  std::string err;
  auto m = Module::from_ptx(kVideoShiftPtx, &err);
  ASSERT_TRUE(m) << err;
  std::mt19937 rng(3);
  const uint32_t vals[] = {0u, 1u, 0x7fffffffu, 0x80000000u, 0xffffffffu, 0x12345678u};
  const uint32_t shifts[] = {0u, 1u, 5u, 31u, 32u, 33u, 64u, 0xffffffffu};
  std::vector<uint32_t> in;
  for (uint32_t a : vals)
    for (uint32_t b : shifts) in.insert(in.end(), {a, b, uint32_t(rng())});
  for (int i = 0; i < 64; i++) in.insert(in.end(), {uint32_t(rng()), uint32_t(rng() % 40), uint32_t(rng())});
  const int n = int(in.size() / 3);
  HostMem mem;
  uint64_t din = mem.upload(in), dout = mem.alloc(size_t(n) * 24);
  Engine eng(1);
  Args a(m->kernel("vsh"));
  a(din)(dout)(uint32_t(n));
  auto e = eng.launch(*m, "vsh", cfg({1}, {uint32_t(n)}), a.data(), a.size(), mem);
  ASSERT_EQ(e.kind, LaunchError::None) << e.message;
  auto o = mem.download<uint32_t>(dout, size_t(n) * 6);
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
  auto ms = Module::from_ptx(sel, &err);
  ASSERT_TRUE(ms) << err;
  e = eng.launch(*ms, "vsh", cfg({1}, {uint32_t(n)}), a.data(), a.size(), mem);
  EXPECT_EQ(e.kind, LaunchError::Unsupported) << e.message;
}

}  // namespace
