// The session's cuBLAS bodies against hostile requests, straight through
// Session::handle as the server's ring reader calls it (no guest library,
// so nothing is pre-checked): forged and stale handles, bad dimensions and
// leading dimensions, ranges outside the session's memory, overflowing
// extents, foreign pointers inside a batched gemm's pointer array, truncated
// payloads. Also one valid gemm per shape to show the same path works.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "session_fixture.hpp"
#include "wormhole/server/session.hpp"

using namespace wh::server;
using namespace wh::proto;

namespace {

struct Fixture : wh::test::SessionFixture {
  uint64_t handle = 0;

  void SetUp() override {
    SessionFixture::SetUp();
    BlasCreateResp r{};
    ASSERT_EQ(run<Op::BlasCreate>(BlasCreateReq{}, &r), 0);
    handle = r.handle;
  }
  void put(uint64_t d, const std::vector<float>& v) {
    MemcpyHtoDInlineReq rq{d, 0};
    DispatchResult out;
    std::vector<uint8_t> p(sizeof rq + v.size() * 4);
    std::memcpy(p.data(), &rq, sizeof rq);
    std::memcpy(p.data() + sizeof rq, v.data(), v.size() * 4);
    s->handle(uint16_t(Op::MemcpyHtoDInline), 0, p, 1 << 20, out);
    ASSERT_EQ(out.status, 0);
  }
  static uint64_t fbits(float f) {
    uint32_t b;
    std::memcpy(&b, &f, 4);
    return b;
  }
  BlasGemmReq gemm(uint64_t A, uint64_t B, uint64_t C, int m, int n, int k) {
    BlasGemmReq rq{};
    rq.handle = handle;
    rq.alpha = fbits(1.f);
    rq.beta = fbits(0.f);
    rq.A = A, rq.B = B, rq.C = C;
    rq.lda = m, rq.ldb = k, rq.ldc = m;
    rq.m = m, rq.n = n, rq.k = k;
    rq.dtype = kBlasF32;
    return rq;
  }
};

TEST_F(Fixture, ValidGemmComputes) {
  uint64_t A = alloc(16), B = alloc(16), C = alloc(16);
  put(A, {1, 2, 3, 4});  // 2x2 column-major
  put(B, {1, 0, 0, 1});
  ASSERT_EQ(run<Op::BlasGemm>(gemm(A, B, C, 2, 2, 2)), 0);
  BlasDotResp r{};
  BlasDotReq d{handle, 0, C, C, 0, 4, 1, 1, 0};
  ASSERT_EQ(run<Op::BlasDot>(d, &r), 0);
  EXPECT_FLOAT_EQ(r.value, 1 + 4 + 9 + 16);
}

TEST_F(Fixture, ForgedAndStaleHandles) {
  uint64_t A = alloc(64);
  auto rq = gemm(A, A, A, 2, 2, 2);
  rq.handle = handle ^ 1;
  EXPECT_EQ(run<Op::BlasGemm>(rq), cudaErrorInvalidResourceHandle);
  rq.handle = 0x53ull << 56 | 1ull << 32 | 1;  // a stream-tagged handle
  EXPECT_EQ(run<Op::BlasGemm>(rq), cudaErrorInvalidResourceHandle);
  ASSERT_EQ(run<Op::BlasDestroy>({handle}), 0);
  rq.handle = handle;
  EXPECT_EQ(run<Op::BlasGemm>(rq), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(run<Op::BlasDestroy>({handle}), cudaErrorInvalidResourceHandle);
  rq = gemm(A, A, A, 2, 2, 2);
  rq.stream = 0x53ull << 56 | 7;  // no such stream
  EXPECT_EQ(run<Op::BlasGemm>(rq), cudaErrorInvalidResourceHandle);
}

TEST_F(Fixture, BadDimensionsAndEnums) {
  uint64_t A = alloc(1024);
  auto rq = gemm(A, A, A, 4, 4, 4);
  rq.lda = 3;
  EXPECT_EQ(run<Op::BlasGemm>(rq), cudaErrorInvalidValue);
  rq = gemm(A, A, A, -1, 4, 4);
  EXPECT_EQ(run<Op::BlasGemm>(rq), cudaErrorInvalidValue);
  rq = gemm(A, A, A, 4, 4, 4);
  rq.transa = 3;
  EXPECT_EQ(run<Op::BlasGemm>(rq), cudaErrorInvalidValue);
  rq = gemm(A, A, A, 4, 4, 4);
  rq.dtype = 9;
  EXPECT_EQ(run<Op::BlasGemm>(rq), cudaErrorInvalidValue);
  rq = gemm(A, A, A, 4, 4, 4);
  rq.ldc = int64_t(1) << 40;  // beyond cuBLAS's int
  EXPECT_EQ(run<Op::BlasGemm>(rq), cudaErrorInvalidValue);
  rq = gemm(A, A, A, 4, 4, 4);
  rq.flags = 0x10000;  // unknown flag bits
  EXPECT_EQ(run<Op::BlasGemm>(rq), cudaErrorInvalidValue);
  BlasGemvReq gv{handle, 0, fbits(1), fbits(0), A, A, A, 4, 4, 4, 0, 1, 0, 0};
  EXPECT_EQ(run<Op::BlasGemv>(gv), cudaErrorInvalidValue);  // incx = 0
}

TEST_F(Fixture, RangesOutsideTheSession) {
  uint64_t A = alloc(64);  // 16 floats
  // C needs 8x8 floats: past the allocation.
  EXPECT_EQ(run<Op::BlasGemm>(gemm(A, A, A, 8, 8, 1)), cudaErrorInvalidValue);
  // A pointer just past the end, and an unallocated address.
  EXPECT_EQ(run<Op::BlasGemm>(gemm(A + 64, A, A, 2, 2, 2)), cudaErrorInvalidValue);
  EXPECT_EQ(run<Op::BlasGemm>(gemm(0x1234, A, A, 2, 2, 2)), cudaErrorInvalidValue);
  // Memory of another session.
  std::string err;
  auto other = backend->create_context(0, {}, &err);
  uint64_t foreign = 0;
  ASSERT_EQ(other->mem_alloc(4096, &foreign), 0);
  EXPECT_EQ(run<Op::BlasGemm>(gemm(foreign, A, A, 2, 2, 2)), cudaErrorInvalidValue);
  // Huge leading dimension: the extent overflows 64 bits.
  auto rq = gemm(A, A, A, 2, 2, 2);
  rq.ldc = INT32_MAX;
  rq.n = INT32_MAX;
  EXPECT_EQ(run<Op::BlasGemm>(rq), cudaErrorInvalidValue);
  // Device-mode scalar outside the session.
  rq = gemm(A, A, A, 2, 2, 2);
  rq.flags = kBlasDeviceScalars;
  rq.alpha = foreign;
  rq.beta = A;
  EXPECT_EQ(run<Op::BlasGemm>(rq), cudaErrorInvalidValue);
  // Vectors: increments that walk off the end.
  BlasAxpyReq ax{handle, 0, fbits(1), A, A, 16, 2, 1, 0};
  EXPECT_EQ(run<Op::BlasAxpy>(ax), cudaErrorInvalidValue);
  ax.incx = -1;
  EXPECT_EQ(run<Op::BlasAxpy>(ax), 0);
  ax.incx = INT32_MIN;
  EXPECT_EQ(run<Op::BlasAxpy>(ax), cudaErrorInvalidValue);
  // Reduction into a device address outside the session.
  BlasDotReq d{handle, 0, A, A, foreign, 4, 1, 1, kBlasDeviceScalars};
  EXPECT_EQ(run<Op::BlasDot>(d), cudaErrorInvalidValue);
}

TEST_F(Fixture, StridedBatchBounds) {
  uint64_t A = alloc(4 * 16);
  BlasGemmStridedBatchedReq rq{};
  rq.handle = handle;
  rq.alpha = fbits(1);
  rq.A = rq.B = rq.C = A;
  rq.lda = rq.ldb = rq.ldc = 2;
  rq.m = rq.n = rq.k = 2;
  rq.strideA = rq.strideB = rq.strideC = 4;
  rq.batch = 4;  // exactly 16 floats
  EXPECT_EQ(run<Op::BlasGemmStridedBatched>(rq), 0);
  rq.batch = 5;
  EXPECT_EQ(run<Op::BlasGemmStridedBatched>(rq), cudaErrorInvalidValue);
  rq.batch = 4;
  rq.strideC = -4;
  EXPECT_EQ(run<Op::BlasGemmStridedBatched>(rq), cudaErrorInvalidValue);
  rq.strideC = INT64_MAX / 2;
  EXPECT_EQ(run<Op::BlasGemmStridedBatched>(rq), cudaErrorInvalidValue);
  rq.strideC = 4;
  rq.batch = -1;
  EXPECT_EQ(run<Op::BlasGemmStridedBatched>(rq), cudaErrorInvalidValue);
}

TEST_F(Fixture, GemmExUnsupportedTypes) {
  uint64_t A = alloc(256);
  BlasGemmExReq rq{};
  rq.handle = handle;
  rq.alpha = fbits(1);
  rq.A = rq.B = rq.C = A;
  rq.lda = rq.ldb = rq.ldc = 2;
  rq.m = rq.n = rq.k = 2;
  rq.atype = 8;  // CUDA_R_8I
  rq.btype = 8;
  rq.ctype = 10;  // CUDA_R_32I
  rq.compute = 72;
  rq.algo = -1;
  EXPECT_EQ(run<Op::BlasGemmEx>(rq), cudaErrorNotSupported);
  rq.atype = rq.btype = rq.ctype = kDtR32F;
  rq.compute = kCompute32F;
  EXPECT_EQ(run<Op::BlasGemmEx>(rq), 0);
  rq.algo = 50;
  EXPECT_EQ(run<Op::BlasGemmEx>(rq), cudaErrorInvalidValue);
}

TEST_F(Fixture, TruncatedPayloadIsRejected) {
  BlasGemmReq rq = gemm(0, 0, 0, 1, 1, 1);
  DispatchResult out;
  std::span<const uint8_t> b(reinterpret_cast<const uint8_t*>(&rq), sizeof rq - 8);
  s->handle(uint16_t(Op::BlasGemm), 0, b, 1 << 16, out);
  EXPECT_EQ(out.status, kBadRequest);
  // A tail on an op that takes none.
  std::vector<uint8_t> p(sizeof rq + 4);
  std::memcpy(p.data(), &rq, sizeof rq);
  s->handle(uint16_t(Op::BlasGemm), 0, p, 1 << 16, out);
  EXPECT_EQ(out.status, kBadRequest);
}

TEST_F(Fixture, ForeignPointerInBatchedArrayFaults) {
  uint64_t M = alloc(64), P = alloc(3 * 8);
  std::string err;
  auto other = backend->create_context(0, {}, &err);
  uint64_t foreign = 0;
  ASSERT_EQ(other->mem_alloc(4096, &foreign), 0);
  uint64_t ptrs[3] = {M, M, M};
  auto putp = [&] {
    MemcpyHtoDInlineReq rq{P, 0};
    std::vector<uint8_t> pl(sizeof rq + sizeof ptrs);
    std::memcpy(pl.data(), &rq, sizeof rq);
    std::memcpy(pl.data() + sizeof rq, ptrs, sizeof ptrs);
    DispatchResult out;
    s->handle(uint16_t(Op::MemcpyHtoDInline), 0, pl, 1 << 20, out);
    ASSERT_EQ(out.status, 0);
  };
  putp();
  BlasGemmBatchedReq rq{};
  rq.handle = handle;
  rq.alpha = fbits(1);
  rq.Aarray = rq.Barray = rq.Carray = P;
  rq.lda = rq.ldb = rq.ldc = 2;
  rq.m = rq.n = rq.k = 2;
  rq.batch = 3;
  EXPECT_EQ(run<Op::BlasGemmBatched>(rq), 0);
  rq.batch = 4;  // the pointer array itself is too short
  EXPECT_EQ(run<Op::BlasGemmBatched>(rq), cudaErrorInvalidValue);
  rq.batch = 3;
  ptrs[1] = foreign;
  putp();
  // Caught by the device (sim: host_view), as a GPU fault would be.
  EXPECT_EQ(run<Op::BlasGemmBatched>(rq), cudaErrorIllegalAddress);
  EXPECT_EQ(other->host_view(foreign, 4)[0], 0);  // the other session untouched
}

}  // namespace
