// The session's cuFFT bodies against hostile requests, straight through
// Session::handle as the server's ring reader calls it (no guest library,
// so nothing is pre-checked): bad ranks, sizes, types, batches and layouts,
// overflowing extents, forged and stale plan handles, device ranges outside
// the session's memory. Also one valid transform to show the same path works.
#include <gtest/gtest.h>

#include <complex>
#include <cstring>
#include <vector>

#include "session_fixture.hpp"
#include "wormhole/server/fft.hpp"
#include "wormhole/server/session.hpp"

using namespace wh::server;
using namespace wh::proto;

namespace {

constexpr int32_t kInvalidPlan = 1, kInvalidType = 3, kInvalidValue = 4, kInvalidSize = 8, kNotSupported = 16;

struct Fixture : wh::test::SessionFixture {
  // Synchronises and returns what posted work left behind.
  int32_t sync() { return run<Op::DeviceSynchronize>({}); }
  static FftPlanReq plan1d(int64_t n, int32_t type, int64_t batch = 1) {
    FftPlanReq rq{};
    rq.rank = 1;
    rq.n[0] = n;
    rq.type = type;
    rq.batch = batch;
    return rq;
  }
  // Plans and returns the cufftResult (0 on success) and the handle.
  int32_t plan(const FftPlanReq& rq, uint64_t* h = nullptr) {
    FftPlanResp rs{};
    int32_t st = run<Op::FftPlan>(rq, &rs);
    if (h) *h = rs.handle;
    if (st == 0) return 0;
    EXPECT_NE(rs.result, 0) << "a refused plan names its cufftResult";
    return rs.result;
  }
  int32_t exec(uint64_t h, uint64_t in, uint64_t out, int32_t type, int32_t dir = -1) {
    FftExecReq rq{h, 0, in, out, type, dir};
    int32_t st = run<Op::FftExec>(rq);
    int32_t later = sync();
    return st ? st : later;
  }
};

TEST_F(Fixture, ValidC2CComputes) {
  uint64_t h;
  ASSERT_EQ(plan(plan1d(4, kFftC2C), &h), 0);
  uint64_t d = alloc(32);
  std::vector<float> x = {1, 0, 2, 0, 3, 0, 4, 0};
  MemcpyHtoDInlineReq rq{d, 0};
  DispatchResult out;
  std::vector<uint8_t> p(sizeof rq + 32);
  std::memcpy(p.data(), &rq, sizeof rq);
  std::memcpy(p.data() + sizeof rq, x.data(), 32);
  s->handle(uint16_t(Op::MemcpyHtoDInline), 0, p, 1 << 20, out);
  ASSERT_EQ(out.status, 0);
  ASSERT_EQ(exec(h, d, d, kFftC2C), 0);
  // Back through the data area (offset 0), as the guest's cudaMemcpy does.
  MemcpyDtoHReq rd{0, d, 32, 0, 0};
  ASSERT_EQ(run<Op::MemcpyDtoH>(rd), 0);
  std::complex<float> y[4];
  std::memcpy(y, data.data(), 32);
  EXPECT_FLOAT_EQ(y[0].real(), 10);  // sum
  EXPECT_FLOAT_EQ(y[2].real(), -2);  // alternating sum
  EXPECT_EQ(run<Op::FftDestroy>({h}), 0);
}

TEST_F(Fixture, BadPlansAreRefusedWithTheirResult) {
  EXPECT_EQ(plan(plan1d(0, kFftC2C)), kInvalidSize);
  EXPECT_EQ(plan(plan1d(-5, kFftC2C)), kInvalidSize);
  EXPECT_EQ(plan(plan1d(int64_t(1) << 40, kFftC2C)), kInvalidSize);
  EXPECT_EQ(plan(plan1d(16, kFftC2C, 0)), kInvalidSize);
  EXPECT_EQ(plan(plan1d(16, kFftC2C, -1)), kInvalidSize);
  EXPECT_EQ(plan(plan1d(16, 0x77)), kInvalidType);
  EXPECT_EQ(plan(plan1d(16, 0)), kInvalidType);
  FftPlanReq rq = plan1d(16, kFftC2C);
  rq.rank = 0;
  EXPECT_EQ(plan(rq), kInvalidSize);
  rq.rank = 4;
  EXPECT_EQ(plan(rq), kInvalidSize);
  rq.rank = -1;
  EXPECT_EQ(plan(rq), kInvalidSize);
  rq = plan1d(16, kFftC2C);
  rq.flags = 0x80;
  EXPECT_EQ(plan(rq), kInvalidValue);
  // Overflowing products of sizes.
  rq = {};
  rq.rank = 3, rq.type = kFftZ2Z, rq.batch = 1;
  rq.n[0] = rq.n[1] = rq.n[2] = int64_t(1) << 30;
  EXPECT_EQ(plan(rq), kInvalidSize);
  rq.n[0] = rq.n[1] = rq.n[2] = INT64_MAX;
  EXPECT_EQ(plan(rq), kInvalidSize);
  // Batches whose span overflows.
  EXPECT_EQ(plan(plan1d(1 << 20, kFftC2C, int64_t(1) << 30)), kInvalidSize);
  EXPECT_EQ(plan(plan1d(16, kFftC2C, INT64_MAX)), kInvalidSize);
}

TEST_F(Fixture, BadAdvancedLayoutsAreRefused) {
  FftPlanReq rq{};
  rq.rank = 2, rq.type = kFftC2C, rq.batch = 2, rq.flags = kFftAdvanced;
  rq.n[0] = 8, rq.n[1] = 8;
  rq.inembed[0] = rq.onembed[0] = 8;
  rq.inembed[1] = rq.onembed[1] = 8;
  rq.istride = rq.ostride = 1;
  rq.idist = rq.odist = 64;
  ASSERT_EQ(plan(rq), 0);
  for (int64_t bad : {int64_t(0), int64_t(-1), INT64_MIN, INT64_MAX}) {
    FftPlanReq r = rq;
    r.istride = bad;
    EXPECT_EQ(plan(r), kInvalidValue) << bad;
    r = rq;
    r.odist = bad;
    EXPECT_EQ(plan(r), kInvalidValue) << bad;
  }
  FftPlanReq r = rq;
  r.inembed[1] = 4;  // rows would overlap
  EXPECT_EQ(plan(r), kInvalidValue);
  r = rq;
  r.onembed[1] = -8;
  EXPECT_EQ(plan(r), kInvalidValue);
  r = rq;  // each value fits, the span does not
  r.istride = int64_t(1) << 30, r.idist = int64_t(1) << 30;
  EXPECT_EQ(plan(r), kInvalidSize);
}

TEST_F(Fixture, ExecChecksHandlesTypesAndRanges) {
  uint64_t h;
  ASSERT_EQ(plan(plan1d(64, kFftC2C, 2), &h), 0);
  uint64_t small = alloc(64 * 8);  // one transform's worth: the batch of 2 runs past it
  uint64_t big = alloc(2 * 64 * 8);
  EXPECT_EQ(exec(h, big, big, kFftC2C), 0);
  EXPECT_EQ(exec(h, small, small, kFftC2C), cudaErrorInvalidValue);
  EXPECT_EQ(exec(h, big, small, kFftC2C), cudaErrorInvalidValue);
  EXPECT_EQ(exec(h, big + 8, big + 8, kFftC2C), cudaErrorInvalidValue);  // ends past the allocation
  EXPECT_EQ(exec(h, 0, 0, kFftC2C), cudaErrorInvalidValue);
  EXPECT_EQ(exec(h, ~0ull - 7, big, kFftC2C), cudaErrorInvalidValue);
  EXPECT_EQ(exec(h, big, big, kFftR2C), cudaErrorInvalidValue);  // not the plan's type
  EXPECT_EQ(exec(h, big, big, kFftC2C, 0), cudaErrorInvalidValue);
  EXPECT_EQ(exec(h, big, big, kFftC2C, 7), cudaErrorInvalidValue);
  EXPECT_EQ(exec(h ^ 1, big, big, kFftC2C), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(exec(0, big, big, kFftC2C), cudaErrorInvalidResourceHandle);
  FftExecReq bad_stream{h, 0xdeadbeef, big, big, kFftC2C, -1};
  EXPECT_NE(run<Op::FftExec>(bad_stream) | sync(), 0);
  EXPECT_EQ(run<Op::FftDestroy>({h}), 0);
  EXPECT_EQ(run<Op::FftDestroy>({h}), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(exec(h, big, big, kFftC2C), cudaErrorInvalidResourceHandle);  // stale
  // After all that the session still works.
  ASSERT_EQ(plan(plan1d(64, kFftC2C, 2), &h), 0);
  EXPECT_EQ(exec(h, big, big, kFftC2C), 0);
}

TEST_F(Fixture, InPlaceRealTransformsNeedThePaddedLayout) {
  uint64_t h;
  ASSERT_EQ(plan(plan1d(64, kFftR2C), &h), 0);
  uint64_t exact = alloc(64 * 4);       // the real input alone
  uint64_t padded = alloc(33 * 8);      // 2*(64/2+1) floats: in-place layout
  uint64_t out = alloc(33 * 8);
  EXPECT_EQ(exec(h, exact, out, kFftR2C), 0);
  EXPECT_EQ(exec(h, padded, padded, kFftR2C), 0);
  EXPECT_EQ(exec(h, exact, exact, kFftR2C), cudaErrorInvalidValue);
  uint64_t hd;
  ASSERT_EQ(plan(plan1d(64, kFftZ2D), &hd), 0);
  EXPECT_EQ(exec(hd, out, exact, kFftZ2D), cudaErrorInvalidValue);  // double precision needs twice the bytes
}

// 16-bit plans (cufftXtMakePlanMany): only single-precision kinds, power-of-two
// sizes, one storage flag, no stride on the real side; their executions span
// two bytes per real value (a half C2C of 64 points fits 256 bytes, not less),
// and misaligned operands fault as on a GPU.
TEST_F(Fixture, SixteenBitPlansAreChecked) {
  auto narrow = [](int64_t n, int32_t type, uint32_t flags) {
    FftPlanReq rq = plan1d(n, type);
    rq.flags = flags;
    return rq;
  };
  EXPECT_EQ(plan(narrow(64, kFftZ2Z, kFftHalf)), kInvalidType);
  EXPECT_EQ(plan(narrow(64, kFftC2C, kFftHalf | kFftBf16)), kInvalidValue);
  EXPECT_EQ(plan(narrow(64, kFftC2C, 1u << 7)), kInvalidValue);
  EXPECT_EQ(plan(narrow(96, kFftC2C, kFftBf16)), kNotSupported);
  FftPlanReq strided = narrow(64, kFftR2C, kFftHalf | kFftAdvanced);
  strided.inembed[0] = 128, strided.onembed[0] = 33;
  strided.istride = 2, strided.idist = 128, strided.ostride = 1, strided.odist = 33;
  EXPECT_EQ(plan(strided), kNotSupported);
  uint64_t h;
  ASSERT_EQ(plan(narrow(64, kFftC2C, kFftHalf), &h), 0);
  uint64_t exact = alloc(64 * 4), small = alloc(64 * 4 - 2);
  EXPECT_EQ(exec(h, exact, exact, kFftC2C), 0);
  EXPECT_EQ(exec(h, small, small, kFftC2C), cudaErrorInvalidValue);
  uint64_t r;
  ASSERT_EQ(plan(narrow(64, kFftR2C, kFftBf16), &r), 0);
  EXPECT_EQ(exec(r, exact + 1, exact + 1, kFftR2C), cudaErrorMisalignedAddress);
}

}  // namespace
