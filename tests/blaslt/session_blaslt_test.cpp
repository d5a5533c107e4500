// The session's cuBLASLt bodies against hostile requests, straight through
// Session::handle as the server's ring reader calls it (no guest library,
// so nothing is pre-checked): forged and stale handles, unsupported types,
// bad orders, shapes, leading dimensions, batch counts and strides,
// overflowing extents, every operand, bias, aux, scalar and workspace range
// outside the session's memory by one byte, misaligned operands. Also valid
// matmuls (with an epilogue) to show the same path computes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "session_fixture.hpp"
#include "wormhole/server/blaslt.hpp"
#include "wormhole/server/session.hpp"

using namespace wh::server;
using namespace wh::proto;

namespace {

constexpr int32_t kOk = 0;

uint64_t fbits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

struct Fixture : wh::test::SessionFixture {
  uint64_t h = 0;
  static constexpr int64_t M = 8, N = 4, K = 6;
  uint64_t dA = 0, dB = 0, dC = 0, dD = 0, dbias = 0, daux = 0, dscal = 0;

  void SetUp() override {
    SessionFixture::SetUp();
    LtCreateResp rs{};
    ASSERT_EQ(run<Op::LtCreate>({}, &rs), kOk);
    h = rs.handle;
    dA = alloc(M * K * 4);
    dB = alloc(K * N * 4);
    dC = alloc(M * N * 4);
    dD = alloc(M * N * 4);
    dbias = alloc(M * 4);
    daux = alloc(128 * N / 8);
    dscal = alloc(8);
  }
  int32_t sync() { return run<Op::DeviceSynchronize>({}); }
  // A valid fp32 request: D(M x N) = A(M x K) B(K x N), column-major.
  LtMatmulReq good() const {
    LtMatmulReq r{};
    r.handle = h;
    r.alpha = fbits(1.f), r.beta = fbits(0.f);
    r.A = dA, r.B = dB, r.C = dC, r.D = dD;
    r.a_rows = M, r.a_cols = K, r.a_ld = M;
    r.b_rows = K, r.b_cols = N, r.b_ld = K;
    r.c_rows = M, r.c_cols = N, r.c_ld = M;
    r.d_rows = M, r.d_cols = N, r.d_ld = M;
    r.a_batch = r.b_batch = r.c_batch = r.d_batch = 1;
    r.a_type = r.b_type = r.c_type = r.d_type = kLtR32F;
    r.compute = kLtCompute32F, r.scale_type = kLtR32F;
    r.bias_type = r.aux_type = -1;
    r.epilogue = kLtEpiDefault;
    return r;
  }
  // Posts a matmul; its status, or else what the next synchronisation reports.
  int32_t mm(const LtMatmulReq& r) {
    int32_t st = run<Op::LtMatmul>(r);
    int32_t later = sync();
    return st ? st : later;
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
  std::vector<float> get(uint64_t d, size_t n) {
    MemcpyDtoHReq rd{0, d, n * 4, 0, 0};
    EXPECT_EQ(run<Op::MemcpyDtoH>(rd), 0);
    std::vector<float> v(n);
    std::memcpy(v.data(), data.data(), n * 4);
    return v;
  }
};

TEST_F(Fixture, ValidMatmulWithReluBiasComputes) {
  std::vector<float> A(M * K), B(K * N), bias(M);
  for (int i = 0; i < M * K; i++) A[i] = float(i % 5) - 2;
  for (int i = 0; i < K * N; i++) B[i] = float(i % 3) - 1;
  for (int i = 0; i < M; i++) bias[i] = float(i) - 4;
  put(dA, A), put(dB, B), put(dbias, bias);
  LtMatmulReq r = good();
  r.epilogue = kLtEpiRelu | kLtEpiBias;
  r.bias = dbias;
  ASSERT_EQ(mm(r), kOk);
  auto D = get(dD, M * N);
  for (int j = 0; j < N; j++)
    for (int i = 0; i < M; i++) {
      float s = bias[i];
      for (int k = 0; k < K; k++) s += A[k * M + i] * B[j * K + k];
      EXPECT_FLOAT_EQ(D[j * M + i], s > 0 ? s : 0) << i << "," << j;
    }
}

TEST_F(Fixture, ForgedAndStaleHandles) {
  LtMatmulReq r = good();
  r.handle = h ^ 1;
  EXPECT_EQ(mm(r), cudaErrorInvalidResourceHandle);
  r.handle = 0;
  EXPECT_EQ(mm(r), cudaErrorInvalidResourceHandle);
  // A cuBLAS handle is not a cuBLASLt handle, nor the reverse.
  BlasCreateResp b{};
  ASSERT_EQ(run<Op::BlasCreate>({}, &b), kOk);
  r.handle = b.handle;
  EXPECT_EQ(mm(r), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(run<Op::LtDestroy>({b.handle}), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(run<Op::BlasDestroy>({h}), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(run<Op::LtDestroy>({h}), kOk);
  EXPECT_EQ(run<Op::LtDestroy>({h}), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(mm(good()), cudaErrorInvalidResourceHandle);
}

TEST_F(Fixture, UnsupportedTypesAndModes) {
  auto with = [&](auto f) {
    LtMatmulReq r = good();
    f(r);
    return mm(r);
  };
  EXPECT_EQ(with([](LtMatmulReq& r) { r.a_type = r.b_type = 28; }), cudaErrorNotSupported);  // fp8
  EXPECT_EQ(with([](LtMatmulReq& r) { r.a_type = 2; }), cudaErrorNotSupported);              // A != B type
  EXPECT_EQ(with([](LtMatmulReq& r) { r.compute = 70; }), cudaErrorNotSupported);            // 64F
  EXPECT_EQ(with([](LtMatmulReq& r) { r.compute = -1; }), cudaErrorNotSupported);
  EXPECT_EQ(with([](LtMatmulReq& r) { r.scale_type = kLtR16F; }), cudaErrorNotSupported);
  EXPECT_EQ(with([](LtMatmulReq& r) { r.a_order = 2; }), cudaErrorNotSupported);  // COL32
  EXPECT_EQ(with([](LtMatmulReq& r) { r.d_order = -7; }), cudaErrorNotSupported);
  EXPECT_EQ(with([](LtMatmulReq& r) { r.epilogue = 0x12345; }), cudaErrorNotSupported);
  EXPECT_EQ(with([](LtMatmulReq& r) { r.epilogue = 0; }), cudaErrorNotSupported);
  EXPECT_EQ(with([](LtMatmulReq& r) { r.flags = kLtScalePointers; }), cudaErrorNotSupported);
  EXPECT_EQ(with([](LtMatmulReq& r) { r.flags = 0x80; }), cudaErrorInvalidValue);
  EXPECT_EQ(with([](LtMatmulReq& r) { r.transa = 3; }), cudaErrorInvalidValue);
  EXPECT_EQ(with([](LtMatmulReq& r) { r.pointer_mode = 9; }), cudaErrorInvalidValue);
}

TEST_F(Fixture, BadShapesAndLayouts) {
  auto with = [&](auto f) {
    LtMatmulReq r = good();
    f(r);
    return mm(r);
  };
  EXPECT_EQ(with([](LtMatmulReq& r) { r.a_rows = 0; }), cudaErrorInvalidValue);
  EXPECT_EQ(with([](LtMatmulReq& r) { r.d_cols = -3; }), cudaErrorInvalidValue);
  EXPECT_EQ(with([](LtMatmulReq& r) { r.a_cols = K + 1; }), cudaErrorInvalidValue);  // k mismatch
  EXPECT_EQ(with([](LtMatmulReq& r) { r.transa = 1; }), cudaErrorInvalidValue);      // op(A) is K x M
  EXPECT_EQ(with([](LtMatmulReq& r) { r.c_rows = M - 1; }), cudaErrorInvalidValue);
  EXPECT_EQ(with([](LtMatmulReq& r) { r.a_ld = M - 1; }), cudaErrorInvalidValue);
  EXPECT_EQ(with([](LtMatmulReq& r) { r.d_ld = int64_t(1) << 40; }), cudaErrorInvalidValue);
  EXPECT_EQ(with([](LtMatmulReq& r) { r.a_rows = int64_t(1) << 33; }), cudaErrorInvalidValue);
  EXPECT_EQ(with([](LtMatmulReq& r) { r.a_order = kLtOrderRow; }), cudaErrorInvalidValue);  // ld < cols
  EXPECT_EQ(with([](LtMatmulReq& r) { r.a_batch = 0; }), cudaErrorInvalidValue);
  EXPECT_EQ(with([](LtMatmulReq& r) { r.b_batch = 2; }), cudaErrorInvalidValue);  // batch mismatch
  EXPECT_EQ(with([](LtMatmulReq& r) {
              r.a_batch = r.b_batch = r.c_batch = r.d_batch = 2;
              r.a_stride = -M * K;
            }),
            cudaErrorInvalidValue);
  // Overflowing spans: a huge batch stride times the batch count.
  EXPECT_EQ(with([](LtMatmulReq& r) {
              r.a_batch = r.b_batch = r.c_batch = r.d_batch = INT32_MAX;
              r.a_stride = r.b_stride = r.c_stride = r.d_stride = int64_t(1) << 40;
            }),
            cudaErrorInvalidValue);
  EXPECT_EQ(with([](LtMatmulReq& r) { r.A = 0; }), cudaErrorInvalidValue);
}

TEST_F(Fixture, EveryRangeIsChecked) {
  auto with = [&](auto f) {
    LtMatmulReq r = good();
    f(r);
    return mm(r);
  };
  // One element past each allocation, or a batch that runs off its end.
  EXPECT_EQ(with([&](LtMatmulReq& r) { r.A = dA + 4; }), cudaErrorInvalidValue);
  EXPECT_EQ(with([&](LtMatmulReq& r) { r.B = dB + 4; }), cudaErrorInvalidValue);
  EXPECT_EQ(with([&](LtMatmulReq& r) { r.C = dC + 4; }), cudaErrorInvalidValue);
  EXPECT_EQ(with([&](LtMatmulReq& r) { r.D = dD + 4; }), cudaErrorInvalidValue);
  EXPECT_EQ(with([&](LtMatmulReq& r) { r.D = 0x1000; }), cudaErrorInvalidValue);
  EXPECT_EQ(with([&](LtMatmulReq& r) { r.d_ld = M + 1; }), cudaErrorInvalidValue);
  EXPECT_EQ(with([](LtMatmulReq& r) {
              r.a_batch = r.b_batch = r.c_batch = r.d_batch = 2;  // the second batch is outside
            }),
            kOk);  // stride 0: every batch reads and writes the same matrices
  EXPECT_EQ(with([](LtMatmulReq& r) {
              r.a_batch = r.b_batch = r.c_batch = r.d_batch = 2;
              r.d_stride = M * N;
            }),
            cudaErrorInvalidValue);
  // Bias: m elements per batch.
  EXPECT_EQ(with([&](LtMatmulReq& r) {
              r.epilogue = kLtEpiBias;
              r.bias = dbias + 4;
            }),
            cudaErrorInvalidValue);
  EXPECT_EQ(with([&](LtMatmulReq& r) {
              r.epilogue = kLtEpiBias;
              r.bias = 0;
            }),
            cudaErrorInvalidValue);
  EXPECT_EQ(with([&](LtMatmulReq& r) {
              r.epilogue = kLtEpiBgradB;  // n elements: fits
              r.bias = dbias + (M - N) * 4;
            }),
            kOk);
  EXPECT_EQ(with([&](LtMatmulReq& r) {
              r.epilogue = kLtEpiBias;
              r.bias = dbias;
              r.bias_type = 99;
            }),
            cudaErrorInvalidValue);
  // Aux: the ReLU mask needs ld % 128 == 0 and ld * n bits.
  EXPECT_EQ(with([&](LtMatmulReq& r) {
              r.epilogue = kLtEpiRelu | kLtEpiAux;
              r.aux = daux, r.aux_ld = 128;
            }),
            kOk);
  EXPECT_EQ(with([&](LtMatmulReq& r) {
              r.epilogue = kLtEpiRelu | kLtEpiAux;
              r.aux = daux + 16, r.aux_ld = 128;  // 3 * 128 + 8 bits = 49 bytes, from 16 of 64
            }),
            cudaErrorInvalidValue);
  EXPECT_EQ(with([&](LtMatmulReq& r) {
              r.epilogue = kLtEpiRelu | kLtEpiAux;
              r.aux = daux, r.aux_ld = 64;
            }),
            cudaErrorInvalidValue);
  EXPECT_EQ(with([&](LtMatmulReq& r) {
              r.epilogue = kLtEpiGelu | kLtEpiAux;  // M*N floats do not fit the mask's 64 bytes
              r.aux = daux, r.aux_ld = M;
            }),
            cudaErrorInvalidValue);
  EXPECT_EQ(with([&](LtMatmulReq& r) {
              r.epilogue = kLtEpiDGelu;
              r.aux = daux, r.aux_ld = 3;  // not a multiple of 8, below m
            }),
            cudaErrorInvalidValue);
  // Device scalars and vectors.
  EXPECT_EQ(with([&](LtMatmulReq& r) {
              r.pointer_mode = kLtPtrDevice;
              r.alpha = dscal, r.beta = dscal + 4;
            }),
            kOk);
  EXPECT_EQ(with([&](LtMatmulReq& r) {
              r.pointer_mode = kLtPtrDevice;
              r.alpha = dscal, r.beta = dscal + 8;
            }),
            cudaErrorInvalidValue);
  EXPECT_EQ(with([&](LtMatmulReq& r) {
              r.pointer_mode = kLtPtrDeviceVector;  // M floats: 32 bytes in an 8-byte allocation
              r.alpha = dscal, r.beta = dscal;
            }),
            cudaErrorInvalidValue);
  EXPECT_EQ(with([&](LtMatmulReq& r) {
              r.pointer_mode = kLtPtrAlphaVecBetaZero;
              r.alpha = dbias, r.alpha_stride = 8;
            }),
            cudaErrorInvalidValue);
  // Workspace.
  EXPECT_EQ(with([&](LtMatmulReq& r) { r.workspace = dD, r.workspace_size = M * N * 4; }), kOk);
  EXPECT_EQ(with([&](LtMatmulReq& r) { r.workspace = dD, r.workspace_size = M * N * 4 + 1; }),
            cudaErrorInvalidValue);
  EXPECT_EQ(with([&](LtMatmulReq& r) { r.workspace = 0, r.workspace_size = 64; }), cudaErrorInvalidValue);
  // A stream handle that is not one.
  EXPECT_EQ(with([](LtMatmulReq& r) { r.stream = 0xdeadbeef; }), cudaErrorInvalidResourceHandle);
}

TEST_F(Fixture, TransformChecksEveryRange) {
  auto t = [&](auto f) {
    LtTransformReq r{};
    r.handle = h;
    r.alpha = fbits(2.f), r.beta = fbits(1.f);
    r.A = dA, r.B = dD, r.C = dC;  // dA holds M x K >= M x N; dD N x M transposed
    r.a_rows = M, r.a_cols = N, r.a_ld = M;
    r.b_rows = N, r.b_cols = M, r.b_ld = N, r.transb = 1;
    r.c_rows = M, r.c_cols = N, r.c_ld = M;
    r.a_batch = r.b_batch = r.c_batch = 1;
    r.a_type = r.b_type = r.c_type = r.scale_type = kLtR32F;
    f(r);
    int32_t st = run<Op::LtTransform>(r);
    int32_t later = sync();
    return st ? st : later;
  };
  EXPECT_EQ(t([](LtTransformReq&) {}), kOk);
  EXPECT_EQ(t([](LtTransformReq& r) { r.handle ^= 1; }), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(t([](LtTransformReq& r) { r.C += 4; }), cudaErrorInvalidValue);
  EXPECT_EQ(t([](LtTransformReq& r) { r.B = 0; }), cudaErrorInvalidValue);           // beta is not zero
  EXPECT_EQ(t([](LtTransformReq& r) { r.B = 0, r.beta = 0; }), kOk);                // alpha A only
  EXPECT_EQ(t([](LtTransformReq& r) { r.transb = 0; }), cudaErrorInvalidValue);      // op(B) is N x M
  EXPECT_EQ(t([](LtTransformReq& r) { r.c_ld = M + 1; }), cudaErrorInvalidValue);    // past dC
  EXPECT_EQ(t([](LtTransformReq& r) { r.c_order = 2; }), cudaErrorNotSupported);
  EXPECT_EQ(t([](LtTransformReq& r) { r.a_type = 28; }), cudaErrorNotSupported);
  EXPECT_EQ(t([](LtTransformReq& r) { r.scale_type = kLtR16F; }), cudaErrorNotSupported);
  EXPECT_EQ(t([](LtTransformReq& r) { r.pad = 1; }), cudaErrorInvalidValue);
  EXPECT_EQ(t([](LtTransformReq& r) { r.a_batch = r.b_batch = r.c_batch = 2, r.c_stride = M * N; }),
            cudaErrorInvalidValue);
  EXPECT_EQ(t([&](LtTransformReq& r) { r.pointer_mode = kLtPtrDevice, r.alpha = dscal, r.beta = dscal + 8; }),
            cudaErrorInvalidValue);
  EXPECT_EQ(t([&](LtTransformReq& r) { r.pointer_mode = kLtPtrDevice, r.alpha = dscal, r.beta = dscal + 4; }), kOk);
}

// A misaligned operand inside its allocation faults as on a GPU (a sticky
// error: the session's context is unusable afterwards, so it goes last).
TEST_F(Fixture, MisalignedOperandFaults) {
  LtMatmulReq r = good();
  r.A = dA + 2;
  r.a_cols = K - 1, r.b_rows = K - 1;
  EXPECT_EQ(mm(r), cudaErrorMisalignedAddress);
}

}  // namespace
