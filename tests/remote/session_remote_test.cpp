// The session's bodies of remote_api.def (DataAreaWrite, MemcpyDtoHInline)
// against hostile requests, straight through Session::handle as the
// server's ucx:// reader calls it: offsets into the status page, past the
// data area's end or overflowing, oversize copies, device ranges that are
// not the session's, forged streams. Also the valid uses.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "session_fixture.hpp"

using namespace wh::server;
using namespace wh::proto;

namespace {

struct Fixture : wh::test::SessionFixture {
  void SetUp() override {
    data.assign(kPinnedHeapOffset + (1 << 20), 0);  // status page, staging, a 1 MiB pinned heap
    SessionFixture::SetUp();
  }
  // A request with a tail, as the reader hands it over.
  template <Op O>
  DispatchResult send(const typename OpTraits<O>::Request& rq, std::span<const uint8_t> tail, uint32_t flags = 0,
                      uint32_t max_msg = 1 << 19) {
    auto b = fixed_bytes(rq);
    std::vector<uint8_t> p(b.begin(), b.end());
    p.insert(p.end(), tail.begin(), tail.end());
    DispatchResult out;
    s->handle(uint16_t(O), flags, p, max_msg, out);
    return out;
  }
};

std::vector<uint8_t> bytes(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; i++) v[i] = uint8_t(seed + i * 7);
  return v;
}

TEST_F(Fixture, DataAreaWriteLandsInThePinnedHeap) {
  auto b = bytes(5000, 3);
  EXPECT_EQ(send<Op::DataAreaWrite>({kPinnedHeapOffset + 256}, b).status, 0);
  EXPECT_EQ(std::memcmp(data.data() + kPinnedHeapOffset + 256, b.data(), b.size()), 0);
}

TEST_F(Fixture, DataAreaWriteRefusesTheStatusPageAndStaging) {
  auto b = bytes(64, 1);
  std::vector<uint8_t> before(data.begin(), data.begin() + kPinnedHeapOffset);
  EXPECT_EQ(send<Op::DataAreaWrite>({0}, b).status, cudaErrorInvalidValue);
  EXPECT_EQ(send<Op::DataAreaWrite>({kStagingOffset}, b).status, cudaErrorInvalidValue);
  EXPECT_EQ(send<Op::DataAreaWrite>({kPinnedHeapOffset - 8}, b).status, cudaErrorInvalidValue);
  EXPECT_TRUE(std::equal(before.begin(), before.end(), data.begin()));
}

TEST_F(Fixture, DataAreaWriteRefusesPastTheEndAndOverflow) {
  auto b = bytes(64, 1);
  EXPECT_EQ(send<Op::DataAreaWrite>({data.size() - 63}, b).status, cudaErrorInvalidValue);
  EXPECT_EQ(send<Op::DataAreaWrite>({data.size()}, b).status, cudaErrorInvalidValue);
  EXPECT_EQ(send<Op::DataAreaWrite>({~uint64_t(0) - 8}, b).status, cudaErrorInvalidValue);
  EXPECT_EQ(send<Op::DataAreaWrite>({data.size() - 64}, b).status, 0);  // the last 64 bytes are fine
}

TEST_F(Fixture, DataAreaWriteTailBoundedByTheMessageSize) {
  auto b = bytes(4096, 1);
  EXPECT_EQ(send<Op::DataAreaWrite>({kPinnedHeapOffset}, b, 0, 1024).status, kBadRequest);
}

TEST_F(Fixture, PostedDataAreaWriteErrorSurfacesLater) {
  auto b = bytes(64, 1);
  DispatchResult out = send<Op::DataAreaWrite>({0}, b, WH_MSG_F_POSTED);
  (void)out;
  EXPECT_NE(run<Op::DeviceSynchronize>({}), 0) << "the posted write's error is reported at the next sync";
}

TEST_F(Fixture, DtoHInlineReturnsTheBytes) {
  uint64_t d = alloc(1 << 18);
  auto b = bytes(1 << 18, 9);
  for (size_t off = 0; off < b.size(); off += 1 << 16)
    ASSERT_EQ(send<Op::MemcpyHtoDInline>({d + off, 0}, {b.data() + off, 1 << 16}).status, 0);
  DispatchResult out = send<Op::MemcpyDtoHInline>({d, b.size(), 0}, {});
  ASSERT_EQ(out.status, 0);
  ASSERT_EQ(out.tail.size(), b.size());
  EXPECT_EQ(std::memcmp(out.tail.data(), b.data(), b.size()), 0);
  out = send<Op::MemcpyDtoHInline>({d + 100, 10, 0}, {});
  ASSERT_EQ(out.tail.size(), 10u);
  EXPECT_EQ(std::memcmp(out.tail.data(), b.data() + 100, 10), 0);
}

TEST_F(Fixture, DtoHInlineRefusesHostileRanges) {
  uint64_t d = alloc(4096);
  auto st = [&](uint64_t src, uint64_t n, uint64_t stream = 0) {
    DispatchResult out = send<Op::MemcpyDtoHInline>({src, n, stream}, {});
    EXPECT_TRUE(out.status == 0 || out.tail.empty()) << "no bytes with an error";
    return out.status;
  };
  EXPECT_EQ(st(d, 4097), cudaErrorInvalidValue);                  // past the allocation
  EXPECT_EQ(st(d + 4096, 1), cudaErrorInvalidValue);
  EXPECT_EQ(st(0x1000, 16), cudaErrorInvalidValue);               // not the session's memory
  EXPECT_EQ(st(~uint64_t(0) - 4, 16), cudaErrorInvalidValue);     // overflowing
  EXPECT_EQ(st(d, kRemoteChunkMax + 1), cudaErrorInvalidValue);   // larger than a chunk
  EXPECT_EQ(st(d, ~uint64_t(0)), cudaErrorInvalidValue);          // would allocate 16 EiB
  EXPECT_NE(st(d, 16, 0xdeadbeef), 0);                            // a forged stream
  EXPECT_EQ(st(d, 4096), 0);
}

TEST_F(Fixture, DtoHInlineMalformedIsAViolation) {
  uint8_t shortreq[5] = {};
  DispatchResult out;
  uint64_t v0 = s->violations();
  s->handle(uint16_t(Op::MemcpyDtoHInline), 0, shortreq, 1 << 19, out);
  EXPECT_EQ(out.status, kBadRequest);
  EXPECT_GT(s->violations(), v0);
}

}  // namespace
