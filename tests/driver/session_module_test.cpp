// The session's ModuleLoad against hostile module images, straight through
// Session::handle (no guest library, nothing pre-checked): bare PTX text
// (the driver API's cuModuleLoadData form) with and without NULs, several
// NUL-separated units, text that is not PTX, a cubin header, broken PTX,
// sizes past the data area. A valid PTX image then loads and its kernel
// launches, showing the same path works.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "session_fixture.hpp"

using namespace wh::proto;

namespace {

constexpr int32_t kInvalidValue = 1, kInvalidKernelImage = 200;

const char* kPtx = R"(.version 8.0
.target sm_75
.address_size 64
.visible .entry twice(.param .u64 p, .param .u32 n) {
  .reg .b32 %r<4>;
  .reg .b64 %rd<4>;
  .reg .pred %p;
  ld.param.u64 %rd1, [p];
  ld.param.u32 %r1, [n];
  mov.u32 %r2, %tid.x;
  setp.ge.u32 %p, %r2, %r1;
  @%p ret;
  cvta.to.global.u64 %rd2, %rd1;
  mul.wide.u32 %rd3, %r2, 4;
  add.s64 %rd2, %rd2, %rd3;
  ld.global.u32 %r3, [%rd2];
  shl.b32 %r3, %r3, 1;
  st.global.u32 [%rd2], %r3;
  ret;
}
)";

struct Fixture : wh::test::SessionFixture {
  int32_t load(const std::string& bytes, uint64_t* module = nullptr) {
    std::memcpy(data.data(), bytes.data(), bytes.size());
    ModuleLoadResp rs{};
    int32_t st = run<Op::ModuleLoad>({0, bytes.size()}, &rs);
    if (module) *module = rs.module;
    return st;
  }
  int32_t kernel(uint64_t module, const std::string& name, uint64_t* k) {
    ModuleGetKernelReq rq{module};
    std::vector<uint8_t> p(sizeof rq + name.size());
    std::memcpy(p.data(), &rq, sizeof rq);
    std::memcpy(p.data() + sizeof rq, name.data(), name.size());
    DispatchResult out;
    s->handle(uint16_t(Op::ModuleGetKernel), 0, p, 1 << 16, out);
    ModuleGetKernelResp rs{};
    if (out.fixed.size() == sizeof rs) std::memcpy(&rs, out.fixed.data(), sizeof rs);
    *k = rs.kernel;
    return out.status;
  }
};

TEST_F(Fixture, PtxTextLoadsAndRuns) {
  uint64_t m = 0, k = 0;
  ASSERT_EQ(load(std::string(kPtx) + '\0', &m), 0);
  ASSERT_EQ(kernel(m, "twice", &k), 0);
  uint64_t d = alloc(16);
  uint32_t v[4] = {1, 2, 3, 4};
  MemcpyHtoDInlineReq hq{d, 0};
  std::vector<uint8_t> p(sizeof hq + sizeof v);
  std::memcpy(p.data(), &hq, sizeof hq);
  std::memcpy(p.data() + sizeof hq, v, sizeof v);
  DispatchResult out;
  s->handle(uint16_t(Op::MemcpyHtoDInline), 0, p, 1 << 16, out);
  ASSERT_EQ(out.status, 0);
  LaunchReq lq{};
  lq.kernel = k;
  lq.grid[0] = lq.grid[1] = lq.grid[2] = 1;
  lq.block[0] = 4, lq.block[1] = lq.block[2] = 1;
  uint8_t params[12];
  uint32_t n = 3;
  std::memcpy(params, &d, 8);
  std::memcpy(params + 8, &n, 4);
  std::vector<uint8_t> lp(sizeof lq + sizeof params);
  std::memcpy(lp.data(), &lq, sizeof lq);
  std::memcpy(lp.data() + sizeof lq, params, sizeof params);
  s->handle(uint16_t(Op::Launch), 0, lp, 1 << 16, out);
  ASSERT_EQ(out.status, 0);
  ASSERT_EQ(run<Op::DeviceSynchronize>({}), 0);
  ASSERT_EQ(run<Op::MemcpyDtoH>({4096, d, 16, 0, 0}), 0);
  uint32_t back[4];
  std::memcpy(back, data.data() + 4096, sizeof back);
  EXPECT_EQ(back[0], 2u);
  EXPECT_EQ(back[2], 6u);
  EXPECT_EQ(back[3], 4u);  // n = 3: untouched
  // The launch is counted with the thread-instructions the sim device ran:
  // lanes 0-2 run 11 (the predicated-off `@%p ret` not counted), lane 3 runs
  // 5 (its `ret` taken), 38 in all; the server-wide statistics show them
  // once the session has ended.
  const auto& c = s->counters();
  EXPECT_EQ(c.kernels.load(), 1u);
  EXPECT_EQ(c.thread_instructions.load(), 38u);
  EXPECT_EQ(stats.kernels.load(), 0u);
  s.reset();
  EXPECT_EQ(stats.kernels.load(), 1u);
  EXPECT_EQ(stats.thread_instructions.load(), 38u);
  EXPECT_NE(stats.render().find("kernels: 1 launches"), std::string::npos) << stats.render();
  EXPECT_NE(stats.render().find("38 thread-instructions"), std::string::npos) << stats.render();
}

TEST_F(Fixture, PtxWithoutNulAndTrailingNuls) {
  EXPECT_EQ(load(kPtx), 0);  // the size bounds it; no NUL needed on the sim device
  EXPECT_EQ(load(std::string(kPtx) + std::string(64, '\0')), 0);
}

TEST_F(Fixture, TwoUnitsWithTheSameKernelFailToLink) {
  std::string two = std::string(kPtx) + '\0' + kPtx + '\0';
  EXPECT_EQ(load(two), kInvalidKernelImage);
}

// Two units, one calling a function the other defines: linked as one module
// (cuLinkComplete's image, as the guest hands it over).
TEST_F(Fixture, TwoUnitsLinkAsOneModule) {
  const char* lib = R"(.version 8.0
.target sm_75
.address_size 64
.visible .func (.param .b32 ret) triple(.param .b32 a) {
  .reg .b32 %r<3>;
  ld.param.b32 %r1, [a];
  mul.lo.s32 %r2, %r1, 3;
  st.param.b32 [ret], %r2;
  ret;
}
)";
  const char* user = R"(.version 8.0
.target sm_75
.address_size 64
.extern .func (.param .b32 ret) triple(.param .b32 a);
.visible .entry use_triple(.param .u64 p) {
  .reg .b32 %r<3>;
  .reg .b64 %rd<3>;
  ld.param.u64 %rd1, [p];
  cvta.to.global.u64 %rd2, %rd1;
  ld.global.u32 %r1, [%rd2];
  {
  .param .b32 pa;
  .param .b32 pr;
  st.param.b32 [pa], %r1;
  call.uni (pr), triple, (pa);
  ld.param.b32 %r2, [pr];
  }
  st.global.u32 [%rd2], %r2;
  ret;
}
)";
  uint64_t m = 0, k = 0;
  ASSERT_EQ(load(std::string(user) + '\0' + lib + '\0', &m), 0);
  ASSERT_EQ(kernel(m, "use_triple", &k), 0);
  uint64_t d = alloc(4);
  ASSERT_EQ(run<Op::Memset>({d, 4, 0, 7, 0}), 0);
  LaunchReq lq{};
  lq.kernel = k;
  lq.grid[0] = lq.grid[1] = lq.grid[2] = 1;
  lq.block[0] = lq.block[1] = lq.block[2] = 1;
  std::vector<uint8_t> lp(sizeof lq + 8);
  std::memcpy(lp.data(), &lq, sizeof lq);
  std::memcpy(lp.data() + sizeof lq, &d, 8);
  DispatchResult out;
  s->handle(uint16_t(Op::Launch), 0, lp, 1 << 16, out);
  ASSERT_EQ(out.status, 0);
  ASSERT_EQ(run<Op::DeviceSynchronize>({}), 0);
  ASSERT_EQ(run<Op::MemcpyDtoH>({4096, d, 4, 0, 0}), 0);
  uint32_t v;
  std::memcpy(&v, data.data() + 4096, 4);
  EXPECT_EQ(v, 0x07070707u * 3);
}

TEST_F(Fixture, NotPtx) {
  EXPECT_EQ(load(std::string(64, '\0')), kInvalidKernelImage);
  EXPECT_EQ(load("this is not a module image at all"), kInvalidKernelImage);
  EXPECT_EQ(load(std::string(".version 8.0\n.target sm_75\n garbage { ] \0", 40)), kInvalidKernelImage);
  std::string many;
  for (int i = 0; i < 5000; i++) many += ".version 8.0 .target x" + std::string(1, '\0');
  EXPECT_EQ(load(many), kInvalidKernelImage);
  std::string elf = "\x7f" "ELF";
  elf.resize(128, '\x01');
  EXPECT_EQ(load(elf), kInvalidKernelImage);
  // Random bytes.
  std::string junk(4096, '\0');
  uint32_t x = 12345;
  for (auto& c : junk) c = char((x = x * 1103515245u + 12345u) >> 24);
  EXPECT_EQ(load(junk), kInvalidKernelImage);
}

TEST_F(Fixture, RangesOutsideTheDataArea) {
  ModuleLoadResp rs{};
  EXPECT_EQ(run<Op::ModuleLoad>({0, data.size() + 1}, &rs), kInvalidValue);
  EXPECT_EQ(run<Op::ModuleLoad>({data.size() - 8, 64}, &rs), kInvalidValue);
  EXPECT_EQ(run<Op::ModuleLoad>({UINT64_MAX - 8, 64}, &rs), kInvalidValue);
  EXPECT_EQ(run<Op::ModuleLoad>({0, 8}, &rs), kInvalidValue);
}

}  // namespace
