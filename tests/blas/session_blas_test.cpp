// The session's cuBLAS bodies against hostile requests, straight through
// Session::handle as the server's ring reader calls it (no guest library,
// so nothing is pre-checked): forged and stale handles, bad dimensions and
// leading dimensions, ranges outside the session's memory, overflowing
// extents, foreign pointers inside a batched gemm's pointer array, truncated
// payloads. Also one valid gemm per shape to show the same path works. The
// generic ops (BlasL1/L2/L3, GemmExBatched, LuBatched, GeqrfBatched): bad
// leading dimensions and enums, pointer arrays holding foreign or too-small
// pointers, batch spans that overflow.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "session_fixture.hpp"
#include "wormhole/server/blas.hpp"
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


// ---------------------------------------------------------------- the generic ops

struct Generic : Fixture {
  static uint64_t dbits(double d) {
    uint64_t b;
    std::memcpy(&b, &d, 8);
    return b;
  }
  void putd(uint64_t d, const std::vector<double>& v) {
    std::vector<float> f(v.size() * 2);
    std::memcpy(f.data(), v.data(), v.size() * 8);
    put(d, f);
  }
  void putp(uint64_t d, std::vector<uint64_t> v) {
    std::vector<float> f(v.size() * 2);
    std::memcpy(f.data(), v.data(), v.size() * 8);
    put(d, f);
  }
  std::vector<double> getd(uint64_t d, size_t n) {
    std::vector<double> v(n);
    std::memcpy(v.data(), s_view(d, n * 8), n * 8);
    return v;
  }
  const uint8_t* s_view(uint64_t d, uint64_t n) { return ctx_view(d, n); }
  // The session's own memory through a DtoH copy into the data area.
  const uint8_t* ctx_view(uint64_t d, uint64_t n) {
    MemcpyDtoHReq rq{0, d, n, 0, 0};
    EXPECT_EQ(run<Op::MemcpyDtoH>(rq), 0);
    return data.data();
  }
  BlasL3Req zgemm(uint64_t A, uint64_t B, uint64_t C, int m, int n, int k) {
    BlasL3Req rq{};
    rq.handle = handle;
    rq.routine = kL3Gemm, rq.type = kBlasZ, rq.mode = kBlasOne;
    rq.alpha = dbits(1), rq.beta = dbits(0);
    rq.A = A, rq.B = B, rq.C = C;
    rq.lda = m, rq.ldb = k, rq.ldc = m;
    rq.m = m, rq.n = n, rq.k = k, rq.batch = 1;
    return rq;
  }
};

TEST_F(Generic, ValidZgemmAndDaxpyCompute) {
  // 1x1 complex: (1+2i)(3-1i) = 5+5i.
  uint64_t A = alloc(16), B = alloc(16), C = alloc(16);
  putd(A, {1, 2});
  putd(B, {3, -1});
  ASSERT_EQ(run<Op::BlasL3>(zgemm(A, B, C, 1, 1, 1)), 0);
  auto c = getd(C, 2);
  EXPECT_EQ(c[0], 5);
  EXPECT_EQ(c[1], 5);
  // daxpy with incy = -1 walks y backwards: y = {10, 20} + 2 * reverse({1, 2}).
  uint64_t x = alloc(16), y = alloc(16);
  putd(x, {1, 2});
  putd(y, {10, 20});
  BlasL1Req l1{};
  l1.handle = handle, l1.routine = kL1Axpy, l1.type = kBlasD, l1.alpha = dbits(2);
  l1.x = x, l1.y = y, l1.n = 2, l1.incx = 1, l1.incy = -1;
  ASSERT_EQ(run<Op::BlasL1>(l1), 0);
  auto yv = getd(y, 2);
  EXPECT_EQ(yv[0], 14);
  EXPECT_EQ(yv[1], 22);
  // A reduction answers in the response (host pointer mode).
  l1.routine = kL1Dot, l1.y = x, l1.incy = 1;
  BlasL1Resp r{};
  ASSERT_EQ(run<Op::BlasL1>(l1, &r), 0);
  EXPECT_EQ(r.re, 5);
}

TEST_F(Generic, BadLeadingDimensionsAndEnums) {
  uint64_t M = alloc(4096);
  auto g = zgemm(M, M, M, 4, 4, 4);
  ASSERT_EQ(run<Op::BlasL3>(g), 0);
  auto bad = g;
  bad.lda = 3;  // < m
  EXPECT_EQ(run<Op::BlasL3>(bad), cudaErrorInvalidValue);
  bad = g, bad.ldc = int64_t(1) << 40;
  EXPECT_EQ(run<Op::BlasL3>(bad), cudaErrorInvalidValue);
  bad = g, bad.type = 4;
  EXPECT_EQ(run<Op::BlasL3>(bad), cudaErrorInvalidValue);
  bad = g, bad.routine = kL3Count;
  EXPECT_EQ(run<Op::BlasL3>(bad), cudaErrorInvalidValue);
  bad = g, bad.routine = kL3Herk, bad.type = kBlasD;  // Hermitian forms are complex only
  EXPECT_EQ(run<Op::BlasL3>(bad), cudaErrorInvalidValue);
  bad = g, bad.routine = kL3Symm, bad.mode = kBlasStrided;  // only gemm is strided-batched
  EXPECT_EQ(run<Op::BlasL3>(bad), cudaErrorInvalidValue);
  bad = g, bad.uplo = 2;
  EXPECT_EQ(run<Op::BlasL3>(bad), cudaErrorInvalidValue);
  bad = g, bad.flags = 1u << 20;
  EXPECT_EQ(run<Op::BlasL3>(bad), cudaErrorInvalidValue);
  // Syrk has no B: its ldb is not looked at.
  bad = g, bad.routine = kL3Syrk, bad.ldb = 0, bad.n = 4, bad.k = 4;
  EXPECT_EQ(run<Op::BlasL3>(bad), 0);

  BlasL2Req l2{};
  l2.handle = handle, l2.routine = kL2Gbmv, l2.type = kBlasS, l2.A = M, l2.x = M, l2.y = M;
  l2.m = 8, l2.n = 8, l2.kl = 2, l2.ku = 1, l2.lda = 4, l2.incx = 1, l2.incy = 1;
  EXPECT_EQ(run<Op::BlasL2>(l2), 0);
  l2.lda = 3;  // < kl + ku + 1
  EXPECT_EQ(run<Op::BlasL2>(l2), cudaErrorInvalidValue);
  l2.lda = 4, l2.incy = 0;
  EXPECT_EQ(run<Op::BlasL2>(l2), cudaErrorInvalidValue);
  l2.incy = 1, l2.routine = kL2Hemv;  // complex only
  EXPECT_EQ(run<Op::BlasL2>(l2), cudaErrorInvalidValue);
  // A packed triangle whose size overflows.
  l2.routine = kL2Tpsv, l2.type = kBlasZ, l2.n = INT32_MAX;
  EXPECT_EQ(run<Op::BlasL2>(l2), cudaErrorInvalidValue);

  BlasL1Req l1{};
  l1.handle = handle, l1.type = kBlasS, l1.x = M, l1.y = M, l1.n = 4, l1.incx = 1, l1.incy = 1;
  l1.routine = kL1Dotc;  // complex only
  EXPECT_EQ(run<Op::BlasL1>(l1), cudaErrorInvalidValue);
  l1.routine = kL1Rotm, l1.type = kBlasC;  // real only
  EXPECT_EQ(run<Op::BlasL1>(l1), cudaErrorInvalidValue);
  l1.routine = kL1Count, l1.type = kBlasS;
  EXPECT_EQ(run<Op::BlasL1>(l1), cudaErrorInvalidValue);
  l1.routine = kL1Axpy, l1.n = 1 << 20;  // x runs past its allocation
  EXPECT_EQ(run<Op::BlasL1>(l1), cudaErrorInvalidValue);
  l1.n = 4, l1.routine = kL1Nrm2, l1.flags = kBlasDeviceScalars, l1.result = M + 4096;  // result outside
  EXPECT_EQ(run<Op::BlasL1>(l1), cudaErrorInvalidValue);
}

TEST_F(Generic, PointerArraysAreReadAndEachPointerChecked) {
  uint64_t M = alloc(4 * 4 * 16), small = alloc(16), P = alloc(3 * 8);
  std::string err;
  auto other = backend->create_context(0, {}, &err);
  uint64_t foreign = 0;
  ASSERT_EQ(other->mem_alloc(4096, &foreign), 0);
  auto g = zgemm(P, P, P, 4, 4, 4);
  g.mode = kBlasArrays, g.batch = 3;
  putp(P, {M, M, M});
  EXPECT_EQ(run<Op::BlasL3>(g), 0);
  putp(P, {M, foreign, M});  // another session's memory
  EXPECT_EQ(run<Op::BlasL3>(g), cudaErrorInvalidValue);
  putp(P, {M, small, M});  // ours, but too small for a 4x4 complex matrix
  EXPECT_EQ(run<Op::BlasL3>(g), cudaErrorInvalidValue);
  putp(P, {M, M, M});
  g.batch = 4;  // the array itself is too short
  EXPECT_EQ(run<Op::BlasL3>(g), cudaErrorInvalidValue);
  EXPECT_EQ(other->host_view(foreign, 4)[0], 0);  // the other session untouched

  // The LU family: A and C arrays, pivots and info ranges.
  BlasLuBatchedReq lu{};
  lu.handle = handle, lu.routine = kLuGetrf, lu.type = kBlasD;
  uint64_t piv = alloc(3 * 4 * 4), info = alloc(3 * 4);
  lu.A = P, lu.pivots = piv, lu.info = info, lu.lda = 4, lu.n = 4, lu.batch = 3;
  EXPECT_EQ(run<Op::BlasLuBatched>(lu), 0);
  lu.lda = 3;  // < n
  EXPECT_EQ(run<Op::BlasLuBatched>(lu), cudaErrorInvalidValue);
  lu.lda = 4, lu.info = info + 4;  // info array runs past its allocation
  EXPECT_EQ(run<Op::BlasLuBatched>(lu), cudaErrorInvalidValue);
  lu.info = info, lu.pivots = piv + 8;
  EXPECT_EQ(run<Op::BlasLuBatched>(lu), cudaErrorInvalidValue);
  lu.pivots = piv;
  putp(P, {M, M, foreign});
  EXPECT_EQ(run<Op::BlasLuBatched>(lu), cudaErrorInvalidValue);
  lu.routine = kLuMatinv, lu.n = 33, lu.lda = lu.ldc = 33;  // cuBLAS's n <= 32
  EXPECT_EQ(run<Op::BlasLuBatched>(lu), cudaErrorInvalidValue);

  // GemmEx with pointer arrays: the same policing.
  BlasGemmExBatchedReq ex{};
  ex.handle = handle, ex.alpha = dbits(1), ex.beta = dbits(0);
  ex.A = ex.B = ex.C = P, ex.lda = ex.ldb = ex.ldc = 4, ex.m = ex.n = ex.k = 4, ex.batch = 3;
  ex.atype = ex.btype = kDtR16F, ex.ctype = kDtR32F, ex.compute = kCompute32F, ex.mode = kBlasArrays;
  EXPECT_EQ(run<Op::BlasGemmExBatched>(ex), cudaErrorInvalidValue);  // foreign entry still there
  putp(P, {M, M, M});
  EXPECT_EQ(run<Op::BlasGemmExBatched>(ex), 0);
  ex.compute = kCompute64F;  // fp16 inputs with fp64 compute: not a cuBLAS combination
  EXPECT_EQ(run<Op::BlasGemmExBatched>(ex), cudaErrorNotSupported);
}

TEST_F(Generic, BatchOverflow) {
  uint64_t M = alloc(4096);
  auto g = zgemm(M, M, M, 2, 2, 2);
  g.mode = kBlasStrided;
  g.batch = 2, g.strideA = g.strideB = g.strideC = 4;
  EXPECT_EQ(run<Op::BlasL3>(g), 0);
  g.batch = 1 << 24, g.strideC = int64_t(1) << 40;  // the span overflows 64 bits
  EXPECT_EQ(run<Op::BlasL3>(g), cudaErrorInvalidValue);
  g.batch = (1 << 24) + 1;  // above the batch limit
  EXPECT_EQ(run<Op::BlasL3>(g), cudaErrorInvalidValue);
  g.batch = -1;
  EXPECT_EQ(run<Op::BlasL3>(g), cudaErrorInvalidValue);
  g.batch = 1000, g.strideC = 4;  // inside 64 bits, outside the allocation
  EXPECT_EQ(run<Op::BlasL3>(g), cudaErrorInvalidValue);
  g.batch = 2, g.strideA = -4;
  EXPECT_EQ(run<Op::BlasL3>(g), cudaErrorInvalidValue);
  BlasLuBatchedReq lu{};
  lu.handle = handle, lu.routine = kLuGetrf, lu.type = kBlasZ, lu.A = M, lu.info = M, lu.lda = 2, lu.n = 2;
  lu.batch = -5;
  EXPECT_EQ(run<Op::BlasLuBatched>(lu), cudaErrorInvalidValue);
  lu.batch = 1 << 20;  // the pointer array would be 8 MiB: not ours
  EXPECT_EQ(run<Op::BlasLuBatched>(lu), cudaErrorInvalidValue);
}

TEST_F(Generic, GeqrfBatchedChecksEveryPointer) {
  // 3 x 2 doubles per matrix, 2 tau each; the arrays are read and each
  // pointer checked against the span it needs.
  uint64_t M = alloc(3 * 2 * 8), T = alloc(2 * 8), P = alloc(8), Q = alloc(8), small = alloc(8);
  putd(M, {3, 4, 0, 1, 2, 2});
  putp(P, {M});
  putp(Q, {T});
  BlasGeqrfBatchedReq qr{};
  qr.handle = handle, qr.type = kBlasD, qr.A = P, qr.tau = Q, qr.lda = 3, qr.m = 3, qr.n = 2, qr.batch = 1;
  EXPECT_EQ(run<Op::BlasGeqrfBatched>(qr), 0);
  // R: |R(0,0)| the first column's norm, R(0,0) R(0,1) = a1 . a2, |R(1,1)|
  // the norm of a2 less its projection on a1.
  auto f = getd(M, 6);
  EXPECT_NEAR(std::abs(f[0]), 5.0, 1e-12);
  EXPECT_NEAR(f[0] * f[3], 11.0, 1e-12);
  EXPECT_NEAR(std::abs(f[4]), std::sqrt(4.16), 1e-12);
  qr.lda = 2;  // < m
  EXPECT_EQ(run<Op::BlasGeqrfBatched>(qr), cudaErrorInvalidValue);
  qr.lda = 3, qr.type = 4;
  EXPECT_EQ(run<Op::BlasGeqrfBatched>(qr), cudaErrorInvalidValue);
  qr.type = kBlasD, qr.m = -1;
  EXPECT_EQ(run<Op::BlasGeqrfBatched>(qr), cudaErrorInvalidValue);
  qr.m = 3, qr.batch = 2;  // the pointer arrays are one entry long
  EXPECT_EQ(run<Op::BlasGeqrfBatched>(qr), cudaErrorInvalidValue);
  qr.batch = 1;
  putp(Q, {small});  // too small for min(m, n) = 2 doubles
  EXPECT_EQ(run<Op::BlasGeqrfBatched>(qr), cudaErrorInvalidValue);
  putp(Q, {T});
  qr.n = 3;  // A's span (3 x 3) runs past its allocation
  EXPECT_EQ(run<Op::BlasGeqrfBatched>(qr), cudaErrorInvalidValue);
  qr.n = 0;  // empty: nothing is read
  EXPECT_EQ(run<Op::BlasGeqrfBatched>(qr), 0);
}

TEST_F(Generic, WildPivotsFaultInsteadOfIndexing) {
  // getrs/getri read the pivots from device memory: one outside 1..n must
  // not index server memory (sim: an illegal address, as a GPU faults).
  uint64_t M = alloc(2 * 2 * 8), Bm = alloc(2 * 8), P = alloc(8), Q = alloc(8), piv = alloc(8), info = alloc(4);
  putd(M, {4, 1, 2, 3});
  putd(Bm, {1, 2});
  putp(P, {M});
  putp(Q, {Bm});
  BlasLuBatchedReq lu{};
  lu.handle = handle, lu.routine = kLuGetrf, lu.type = kBlasD;
  lu.A = P, lu.pivots = piv, lu.info = info, lu.lda = 2, lu.n = 2, lu.batch = 1;
  ASSERT_EQ(run<Op::BlasLuBatched>(lu), 0);
  lu.routine = kLuGetrs, lu.C = Q, lu.ldc = 2, lu.nrhs = 1, lu.info = 0;
  ASSERT_EQ(run<Op::BlasLuBatched>(lu), 0);
  auto x = getd(Bm, 2);  // [4 2; 1 3] x = [1; 2] -> x = [-0.1; 0.7]
  EXPECT_NEAR(x[0], -0.1, 1e-12);
  EXPECT_NEAR(x[1], 0.7, 1e-12);
  std::vector<float> wild = {0, 0};
  int32_t w[2] = {1, 1 << 20};
  std::memcpy(wild.data(), w, 8);
  put(piv, wild);
  EXPECT_EQ(run<Op::BlasLuBatched>(lu), cudaErrorIllegalAddress);
  w[1] = -7;
  std::memcpy(wild.data(), w, 8);
  put(piv, wild);
  lu.routine = kLuGetri, lu.C = P, lu.info = info;
  EXPECT_EQ(run<Op::BlasLuBatched>(lu), cudaErrorIllegalAddress);
}

}  // namespace
