// The session's cuRAND bodies against hostile requests, straight through
// Session::handle as the server's ring reader calls it (no guest library,
// so nothing is pre-checked): bad generator types, settings a type does not
// have, bad orderings and dimensions, forged, stale and foreign handles,
// kinds a generator cannot produce, lengths that are no multiple of the
// dimensions, bad distribution parameters, output ranges outside the
// session's memory or misaligned, huge n. Also valid generations through the
// same path, with the values checked (a refusal that silently did nothing
// would leave the output untouched).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "session_fixture.hpp"
#include "wormhole/server/rand.hpp"
#include "wormhole/server/session.hpp"

using namespace wh::server;
using namespace wh::proto;

namespace {

constexpr int32_t kTypeError = 103, kOutOfRange = 104;
constexpr int32_t bad_handle = 400;  // cudaErrorInvalidResourceHandle

struct Fixture : wh::test::SessionFixture {
  int32_t sync() { return run<Op::DeviceSynchronize>({}); }
  uint64_t create(int32_t type) {
    RandCreateResp rs{};
    EXPECT_EQ(run<Op::RandCreate>({type, 0}, &rs), 0);
    return rs.handle;
  }
  int32_t set(uint64_t h, uint32_t what, uint64_t seed, uint64_t off, int32_t ord, uint32_t dims,
              int32_t* result = nullptr) {
    RandSetReq rq{h, seed, off, ord, dims, what, 0};
    RandSetResp rs{};
    int32_t st = run<Op::RandSet>(rq, &rs);
    if (result) *result = rs.result;
    return st;
  }
  // Posts a generation and returns its status or, if it was accepted, what
  // a synchronisation reports afterwards.
  int32_t gen(uint64_t h, uint64_t out, uint64_t n, int32_t kind, double p0 = 0, double p1 = 1) {
    RandGenerateReq rq{h, 0, out, n, p0, p1, kind, 0};
    int32_t st = run<Op::RandGenerate>(rq);
    int32_t later = sync();
    return st ? st : later;
  }
  template <class T>
  std::vector<T> read(uint64_t dptr, size_t n) {
    MemcpyDtoHReq rq{0, dptr, n * sizeof(T), 0, 0};
    EXPECT_EQ(run<Op::MemcpyDtoH>(rq), 0);
    std::vector<T> v(n);
    std::memcpy(v.data(), data.data(), n * sizeof(T));
    return v;
  }
};

TEST_F(Fixture, CreateRefusesBadTypes) {
  for (int32_t t : {0, 100, 200, 102, 205, -1, 0x7fffffff}) {
    RandCreateResp rs{};
    EXPECT_NE(run<Op::RandCreate>({t, 0}, &rs), 0) << t;
    EXPECT_EQ(rs.result, kTypeError) << t;
  }
}

TEST_F(Fixture, SettingsAreChecked) {
  const uint64_t x = create(kRngXorwow), q = create(kRngSobol32);
  int32_t r = 0;
  EXPECT_NE(set(x, kRandSetDims, 0, 0, 0, 2, &r), 0);
  EXPECT_EQ(r, kTypeError);
  EXPECT_NE(set(q, kRandSetSeed, 5, 0, 0, 0, &r), 0);
  EXPECT_EQ(r, kTypeError);
  for (uint32_t d : {0u, kRandMaxDims + 1, 0xffffffffu}) {
    EXPECT_NE(set(q, kRandSetDims, 0, 0, 0, d, &r), 0) << d;
    EXPECT_EQ(r, kOutOfRange);
  }
  EXPECT_NE(set(x, kRandSetOrdering, 0, 0, kOrderQuasiDefault, 0, &r), 0);
  EXPECT_NE(set(q, kRandSetOrdering, 0, 0, kOrderPseudoLegacy, 0, &r), 0);
  EXPECT_NE(set(x, kRandSetOrdering, 0, 0, 99, 0, &r), 0);
  EXPECT_NE(set(x, 0, 0, 0, 0, 0, &r), 0);           // nothing to set
  EXPECT_NE(set(x, 1u << 9, 0, 0, 0, 0, &r), 0);     // unknown bit
  EXPECT_EQ(set(x, kRandSetSeed | kRandSetOffset, 7, ~0ull, 0, 0), 0);  // any seed and offset
  EXPECT_EQ(set(q, kRandSetDims | kRandSetOrdering, 0, 0, kOrderQuasiDefault, kRandMaxDims), 0);
}

TEST_F(Fixture, ForgedStaleAndForeignHandles) {
  const uint64_t h = create(kRngPhilox);
  const uint64_t d = alloc(1024);
  EXPECT_EQ(run<Op::RandDestroy>({h}), 0);
  EXPECT_EQ(run<Op::RandDestroy>({h}), bad_handle);
  EXPECT_EQ(gen(h, d, 4, kRandBits32), bad_handle);
  EXPECT_EQ(set(h, kRandSetSeed, 1, 0, 0, 0), bad_handle);
  for (uint64_t forged : std::vector<uint64_t>{0, 1, ~0ull, h + 1, 0x5200000000000001ull})
    EXPECT_EQ(gen(forged, d, 4, kRandBits32), bad_handle) << forged;
  // A cuFFT plan's handle is no generator.
  FftPlanReq fp{};
  fp.rank = 1, fp.n[0] = 8, fp.type = kFftC2C, fp.batch = 1;
  FftPlanResp f{};
  ASSERT_EQ(run<Op::FftPlan>(fp, &f), 0);
  EXPECT_EQ(gen(f.handle, d, 4, kRandBits32), bad_handle);
}

TEST_F(Fixture, GenerationsAreChecked) {
  const uint64_t x = create(kRngXorwow), q = create(kRngSobol32), q64 = create(kRngSobol64);
  const uint64_t d = alloc(4096);
  ASSERT_EQ(set(q, kRandSetDims, 0, 0, 0, 3), 0);
  const int32_t inval = 1;  // cudaErrorInvalidValue
  EXPECT_EQ(gen(x, d, 4, 0), inval);           // unknown kind
  EXPECT_EQ(gen(x, d, 4, 10), inval);
  EXPECT_EQ(gen(x, d, 4, kRandBits64), inval);   // 64-bit bits from XORWOW
  EXPECT_EQ(gen(q64, d, 4, kRandBits32), inval);  // 32-bit bits from Sobol64
  EXPECT_EQ(gen(q, d, 10, kRandUniform), inval);  // not a multiple of 3 dimensions
  EXPECT_EQ(gen(x, d, 3, kRandNormal), inval);    // odd count of pseudorandom normals
  EXPECT_EQ(gen(x, d, 4, kRandNormal, 0, -1), inval);
  EXPECT_EQ(gen(x, d, 4, kRandNormal, std::numeric_limits<double>::quiet_NaN(), 1), inval);
  EXPECT_EQ(gen(x, d, 4, kRandLogNormalD, 0, std::numeric_limits<double>::infinity()), inval);
  EXPECT_EQ(gen(x, d, 4, kRandPoisson, 0), inval);
  EXPECT_EQ(gen(x, d, 4, kRandPoisson, -3), inval);
  EXPECT_EQ(gen(x, d, 4, kRandPoisson, std::numeric_limits<double>::quiet_NaN()), inval);
  EXPECT_EQ(gen(x, d, 4, kRandPoisson, 1e300), inval);
  // Device ranges: past the allocation, outside every allocation, wrapping, misaligned, huge n.
  EXPECT_EQ(gen(x, d, 1025, kRandBits32), inval);
  EXPECT_EQ(gen(x, d + 4, 1024, kRandUniform), inval);
  EXPECT_EQ(gen(x, d, 513, kRandUniformD), inval);
  EXPECT_EQ(gen(x, 0x1000, 4, kRandBits32), inval);
  EXPECT_EQ(gen(x, ~0ull - 7, 4, kRandBits32), inval);
  EXPECT_EQ(gen(x, d + 2, 4, kRandBits32), inval);
  EXPECT_EQ(gen(x, d + 4, 4, kRandUniformD), inval);
  EXPECT_EQ(gen(x, d, ~0ull / 4 + 2, kRandBits32), inval);
  EXPECT_EQ(gen(x, d, 1ull << 62, kRandUniformD), inval);
  // A bad stream.
  RandGenerateReq rq{x, 0xdead, d, 4, 0, 1, kRandBits32, 0};
  EXPECT_NE(run<Op::RandGenerate>(rq), 0);
  sync();
  // None of these touched the output: still zero (cudaMalloc'd memory of the sim device).
  run<Op::Memset>({d, 4096, 0, 0, 0});
  sync();
  EXPECT_EQ(gen(x, d, 1025, kRandBits32), inval);
  for (uint32_t v : read<uint32_t>(d, 1024)) ASSERT_EQ(v, 0u);
}

// The Mersenne Twisters step to an offset; one too far is refused, not
// computed for hours. The jumping generators take any offset.
TEST_F(Fixture, FarOffsets) {
  const uint64_t d = alloc(4096);
  for (int32_t t : {kRngMt19937, kRngMtgp32}) {
    const uint64_t h = create(t);
    ASSERT_EQ(set(h, kRandSetOffset, 0, 1ull << 50, 0, 0), 0);
    EXPECT_EQ(gen(h, d, 16, kRandBits32), 801) << t;  // cudaErrorNotSupported
  }
  for (int32_t t : {kRngXorwow, kRngMrg32k3a, kRngPhilox, kRngSobol32}) {
    const uint64_t h = create(t);
    ASSERT_EQ(set(h, kRandSetOffset, 0, ~0ull - 100, 0, 0), 0);
    EXPECT_EQ(gen(h, d, 16, kRandUniform), 0) << t;
    // Through the last offset there is, and past it (the offset wraps).
    ASSERT_EQ(set(h, kRandSetOffset, 0, ~0ull - 4, 0, 0), 0);
    EXPECT_EQ(gen(h, d, 16, kRandBits32), 0) << t;
  }
}

// Calls continue one stream: split calls (starting inside a pair of
// normals, too) give what one call from the same offset gives.
TEST_F(Fixture, SplitCallsEqualOneCall) {
  const uint64_t d = alloc(64 * 8);
  for (int32_t t : {kRngXorwow, kRngMrg32k3a, kRngMtgp32, kRngMt19937, kRngPhilox, kRngSobol32}) {
    for (int32_t kind : {kRandUniform, kRandNormal, kRandNormalD, kRandPoisson}) {
      const bool quasi = rand_is_quasi(t);
      const uint64_t a = create(t), b = create(t);
      // Start inside a pair: offset 1 (pseudorandom normals come in pairs).
      ASSERT_EQ(set(a, kRandSetOffset | (quasi ? 0 : kRandSetSeed), 99, 1, 0, 0), 0);
      ASSERT_EQ(set(b, kRandSetOffset | (quasi ? 0 : kRandSetSeed), 99, 1, 0, 0), 0);
      const double p0 = kind == kRandPoisson ? 300.0 : 0.5, p1 = 2.0;
      const uint64_t es = kind == kRandNormalD ? 8 : 4;
      ASSERT_EQ(gen(a, d, 4, kind, p0, p1), 0);
      ASSERT_EQ(gen(a, d + 4 * es, 6, kind, p0, p1), 0);
      ASSERT_EQ(gen(a, d + 10 * es, 2, kind, p0, p1), 0);
      auto split = read<uint8_t>(d, 12 * es);
      ASSERT_EQ(gen(b, d, 12, kind, p0, p1), 0);
      auto one = read<uint8_t>(d, 12 * es);
      EXPECT_EQ(split, one) << "type " << t << " kind " << kind;
      bool nonzero = false;
      for (uint8_t x : one) nonzero |= x != 0;
      EXPECT_TRUE(nonzero);
      run<Op::RandDestroy>({a});
      run<Op::RandDestroy>({b});
    }
  }
}

TEST_F(Fixture, ValidGenerationsWrite) {
  const uint64_t x = create(kRngXorwow), q = create(kRngSobol32);
  const uint64_t d = alloc(4096 * 8);
  ASSERT_EQ(gen(x, d, 4096, kRandUniform), 0);
  auto u = read<float>(d, 4096);
  double mean = 0;
  for (float v : u) {
    ASSERT_GT(v, 0.0f);
    ASSERT_LE(v, 1.0f);
    mean += v;
  }
  EXPECT_NEAR(mean / 4096, 0.5, 0.03);
  // n = 0 is accepted and writes nothing; Sobol's first points (dimension 0).
  EXPECT_EQ(gen(q, d, 0, kRandBits32), 0);
  ASSERT_EQ(gen(q, d, 4, kRandBits32), 0);
  auto s = read<uint32_t>(d, 4);
  EXPECT_EQ(s[0], 0u);
  EXPECT_EQ(s[1], 0x80000000u);
  EXPECT_EQ(s[2], 0xC0000000u);
  EXPECT_EQ(s[3], 0x40000000u);
  // The offset advanced by 4 points: the next call starts at point 4.
  ASSERT_EQ(gen(q, d, 1, kRandBits32), 0);
  EXPECT_EQ(read<uint32_t>(d, 1)[0], 0x60000000u);
  // Every kind of every type through the same path.
  for (int32_t t : {kRngXorwow, kRngMrg32k3a, kRngMtgp32, kRngMt19937, kRngPhilox, kRngSobol32,
                    kRngScrambledSobol32, kRngSobol64, kRngScrambledSobol64}) {
    const uint64_t h = create(t);
    for (int32_t k = kRandBits32; k <= kRandPoisson; k++) {
      if ((k == kRandBits64) != rand_is_64(t) && (k == kRandBits32 || k == kRandBits64)) continue;
      EXPECT_EQ(gen(h, d, 64, k, k == kRandPoisson ? 100.0 : 0.0, 1.0), 0) << t << " kind " << k;
    }
    EXPECT_EQ(run<Op::RandDestroy>({h}), 0);
  }
}

}  // namespace
