// The NVML service in a session (libs/nvml/server): its figures follow the
// session's allocations and kernels and nothing else; and the routing of
// opcodes to the library services: an opcode no table has, in a library's
// block or past the last block, is refused as unknown and counted.
#include <gtest/gtest.h>

#include "session_fixture.hpp"
#include "wormhole/server/session.hpp"

using namespace wh::server;
using namespace wh::proto;

namespace {

struct Nvml : wh::test::SessionFixture {
  NvmlUsageResp usage() {
    NvmlUsageResp rs{};
    EXPECT_EQ(run<Op::NvmlUsage>({}, &rs), 0);
    return rs;
  }
  int32_t raw(uint16_t opcode) {
    DispatchResult out;
    s->handle(opcode, 0, {}, 1 << 16, out);
    return out.status;
  }
};

TEST_F(Nvml, UsageFollowsTheSessionsMemory) {
  const NvmlUsageResp a = usage();
  EXPECT_EQ(a.device_bytes, 0u);
  EXPECT_EQ(a.kernels, 0u);
  EXPECT_EQ(a.timed, 1u);  // the sim device times its kernels
  const uint64_t p = alloc(3 << 20);
  const NvmlUsageResp b = usage();
  EXPECT_GE(b.device_bytes, 3u << 20);
  EXPECT_GE(b.now_ns, a.now_ns);
  EXPECT_EQ(run<Op::Free>({p}), 0);
  EXPECT_EQ(usage().device_bytes, 0u);
}

TEST_F(Nvml, AnotherSessionsMemoryIsNotCounted) {
  std::string err;
  std::vector<uint8_t> data2(1 << 20);
  Session other(2, *backend, backend->create_context(0, {}, &err), std::span<uint8_t>(data2), stats);
  DispatchResult out;
  MallocReq rq{8 << 20};
  auto bytes = fixed_bytes(rq);
  other.handle(uint16_t(Op::Malloc), 0, bytes, 1 << 16, out);
  ASSERT_EQ(out.status, 0);
  EXPECT_EQ(usage().device_bytes, 0u);
}

TEST_F(Nvml, OpcodesNoTableHasAreUnknown) {
  const uint64_t before = s->violations();
  EXPECT_EQ(raw(uint16_t(Op::NvmlUsage) + 1), kUnknownOp);   // NVML's block, past its table
  EXPECT_EQ(raw(uint16_t(Op::BlasCreate) + 0x1ff), kUnknownOp);  // the end of cuBLAS's block
  EXPECT_EQ(raw(uint16_t(Op::NvmlUsage) + kOpBlock), kUnknownOp);  // past the last block
  EXPECT_EQ(raw(0xffff), kUnknownOp);
  EXPECT_EQ(s->violations(), before + 4);
  usage();  // the session goes on
}

}  // namespace
