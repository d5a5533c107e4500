// Math: what nvcc -O3 emits for expf/logf/sinf/... and the PTX approximation
// instructions themselves, compared with libm (in double) within documented bounds.
#include <cmath>
#include <random>

#include "ptx_test_util.hpp"

using namespace whtest;
using wh::ptx::Engine;
using wh::ptx::LaunchError;
using wh::ptx::Module;

namespace {

int64_t ulps_vs(float got, double ref) { return ulp_diff(got, float(ref)); }

class PtxMath : public ::testing::TestWithParam<bool> {};

// CUDA C Programming Guide, "Mathematical Functions": maximum ulp errors for the
// single-precision functions; PTX ISA for the .approx instructions.
TEST_P(PtxMath, Fp32FunctionsWithinDocumentedUlp) {
  std::string err;
  auto m = load_module("math", GetParam(), &err);
  ASSERT_TRUE(m) << err;
  HostMem mem;
  bind_globals(*m, mem);
  std::vector<float> x;
  std::mt19937 r(21);
  std::uniform_real_distribution<float> d(-10.f, 10.f);
  for (int i = 0; i < 2000; ++i) x.push_back(d(r));
  for (float s : {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, 3.14159265f, -3.14159265f, 1e-6f, 9.99f, 88.0f, -87.0f, 100.0f, 1e-30f})
    x.push_back(s);
  const int n = int(x.size()), NF = 20;
  uint64_t dx = mem.upload(x), dout = mem.alloc(size_t(n) * NF * 4);
  Engine eng(2);
  Args a(m->kernel("math_f32"));
  a(dx)(dout)(n);
  auto e = eng.launch(*m, "math_f32", cfg({(uint32_t(n) + 127) / 128}, {128}), a.data(), a.size(), mem);
  ASSERT_EQ(e.kind, LaunchError::None) << e.message;
  auto o = mem.download<float>(dout, size_t(n) * NF);
  int64_t worst[NF] = {};
  double worst_abs[NF] = {};
  for (int i = 0; i < n; ++i) {
    double v = x[i];
    float fv = x[i];
    const float* g = &o[size_t(i) * NF];
    double la_f = double(std::fabs(fv) + 1e-3f);
    auto chk = [&](int k, double ref, int64_t maxulp) {
      if (std::isinf(ref) && std::isinf(g[k]) && (ref > 0) == (g[k] > 0)) return;
      int64_t u = ulps_vs(g[k], ref);
      worst[k] = std::max(worst[k], u);
      EXPECT_LE(u, maxulp) << "f" << k << "(" << v << ") = " << g[k] << " ref " << ref;
    };
    auto chk_abs = [&](int k, double ref, double tol) {
      double ae = std::fabs(double(g[k]) - ref);
      worst_abs[k] = std::max(worst_abs[k], ae);
      EXPECT_LE(ae, tol) << "f" << k << "(" << v << ") = " << g[k] << " ref " << ref;
    };
    chk(0, std::exp(v), 2);                         // expf: 2 ulp
    chk(1, std::log(la_f), 1);                      // logf: 1 ulp
    chk(2, std::sin(v), 2);                         // sinf: 2 ulp
    chk(3, std::cos(v), 2);                         // cosf: 2 ulp
    chk(4, std::sqrt(std::fabs(v)), 0);             // sqrtf: correctly rounded
    chk(5, 1.0 / std::sqrt(la_f), 2);               // rsqrtf: 2 ulp
    chk(6, std::exp(v), 2 + int64_t(std::floor(std::fabs(1.173 * v))));  // __expf
    if (la_f >= 0.5 && la_f <= 2) chk_abs(7, std::log(la_f), std::ldexp(1.0, -21));  // __logf
    else chk(7, std::log(la_f), 3);
    if (std::fabs(v) <= 3.14159265) {               // __sinf/__cosf: absolute error 2^-21.41 on [-pi, pi]
      chk_abs(8, std::sin(v), std::ldexp(1.0, -21));
      chk_abs(9, std::cos(v), std::ldexp(1.0, -21));
    } else if (std::fabs(v) <= 100 * 3.14159265) {  // sin.approx: 2^-20.5 absolute in -100pi..100pi
      chk_abs(8, std::sin(v), std::ldexp(1.0, -20));
      chk_abs(9, std::cos(v), std::ldexp(1.0, -20));
    }
    double den = double(fv + 100.5f);
    chk(10, 1.0 / den, 0);                          // IEEE division
    chk(11, 1.0 / den, 0);                          // __frcp_rn
    chk(12, std::tanh(v), 2);                       // tanhf: 2 ulp
    chk(13, std::exp2(v), 2);                       // exp2f: 2 ulp
    chk(14, std::log2(la_f), 1);                    // log2f: 1 ulp
    chk(15, std::pow(double(std::fabs(fv) + 0.5f), double(1.7f)), 4);  // powf: 4 ulp
    chk(16, v / 3.0, 2);                            // __fdividef: 2 ulp
    // exact operations: compare bit for bit with the same computation on the host
    float e17 = std::floor(fv * 3.3f) + std::ceil(fv * 1.7f) + std::trunc(fv * 2.1f) + std::nearbyint(fv * 1.3f);
    EXPECT_EQ(g[17], e17) << v;
    float e18 = float(int(fv * 1000.f)) + float(unsigned(std::fabs(fv) * 7.f));
    EXPECT_EQ(g[18], e18) << v;
    float e19 = std::fmin(fv, 0.25f) + std::fmax(fv, -0.25f) + std::copysign(2.0f, fv) + std::fma(fv, fv, 1.0f);
    EXPECT_EQ(g[19], e19) << v;
  }
  std::string report;
  for (int k = 0; k < 17; ++k) report += " f" + std::to_string(k) + "=" + std::to_string(worst[k]);
  RecordProperty("worst_ulps", report);
}

INSTANTIATE_TEST_SUITE_P(Loaders, PtxMath, ::testing::Values(false, true),
                         [](const auto& i) { return i.param ? std::string("fatbin") : std::string("ptx"); });

// The approximation instructions and rounding modes directly, from hand-written PTX.
const char* kApproxPtx = R"(
.version 8.0
.target sm_80
.address_size 64
.visible .entry approx(.param .u64 in, .param .u64 out, .param .u32 n)
{
  .reg .pred %p<2>;
  .reg .b32 %r<8>;
  .reg .f32 %f<20>;
  .reg .f64 %fd<4>;
  .reg .b16 %h<2>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [in];
  ld.param.u64 %rd2, [out];
  ld.param.u32 %r1, [n];
  mov.u32 %r2, %tid.x;
  mov.u32 %r3, %ctaid.x;
  mov.u32 %r4, %ntid.x;
  mad.lo.s32 %r5, %r3, %r4, %r2;
  setp.ge.u32 %p1, %r5, %r1;
  @%p1 bra DONE;
  mul.wide.u32 %rd3, %r5, 4;
  add.s64 %rd4, %rd1, %rd3;
  ld.global.f32 %f1, [%rd4];
  mul.wide.u32 %rd5, %r5, 64;
  add.s64 %rd6, %rd2, %rd5;
  ex2.approx.ftz.f32 %f2, %f1;
  abs.f32 %f3, %f1;
  add.f32 %f3, %f3, 0f3F000000;
  lg2.approx.f32 %f4, %f3;
  rcp.approx.f32 %f5, %f3;
  sqrt.approx.f32 %f6, %f3;
  rsqrt.approx.f32 %f7, %f3;
  sin.approx.f32 %f8, %f1;
  cos.approx.f32 %f9, %f1;
  cvt.rzi.f32.f32 %f10, %f1;
  cvt.rmi.f32.f32 %f11, %f1;
  cvt.rpi.f32.f32 %f12, %f1;
  cvt.rni.f32.f32 %f13, %f1;
  cvt.f64.f32 %fd1, %f1;
  mul.f64 %fd2, %fd1, 0d3FB999999999999A;
  cvt.rz.f32.f64 %f14, %fd2;
  cvt.rp.f32.f64 %f15, %fd2;
  add.rm.f32 %f16, %f1, 0f33800000;
  cvt.rn.f16.f32 %h1, %f1;
  cvt.f32.f16 %f17, %h1;
  st.global.v4.f32 [%rd6], {%f2, %f4, %f5, %f6};
  st.global.v4.f32 [%rd6+16], {%f7, %f8, %f9, %f10};
  st.global.v4.f32 [%rd6+32], {%f11, %f12, %f13, %f14};
  st.global.v4.f32 [%rd6+48], {%f15, %f16, %f17, %f17};
DONE:
  ret;
}
)";

TEST(PtxMathDirect, ApproxInstructionsAndRoundingModes) {
  std::string err;
  auto m = Module::from_ptx(kApproxPtx, &err);
  ASSERT_TRUE(m) << err;
  HostMem mem;
  std::vector<float> x;
  std::mt19937 r(5);
  std::uniform_real_distribution<float> d(-20.f, 20.f);
  for (int i = 0; i < 500; ++i) x.push_back(d(r));
  x.push_back(2.5f);
  x.push_back(-2.5f);
  x.push_back(3.5f);
  const int n = int(x.size());
  uint64_t dx = mem.upload(x), dout = mem.alloc(size_t(n) * 64);
  Engine eng(1);
  Args a(m->kernel("approx"));
  a(dx)(dout)(uint32_t(n));
  auto e = eng.launch(*m, "approx", cfg({(uint32_t(n) + 63) / 64}, {64}), a.data(), a.size(), mem);
  ASSERT_EQ(e.kind, LaunchError::None) << e.message;
  auto o = mem.download<float>(dout, size_t(n) * 16);
  for (int i = 0; i < n; ++i) {
    const float* g = &o[size_t(i) * 16];
    float v = x[i];
    double a3 = double(std::fabs(v) + 0.5f);
    EXPECT_LE(std::fabs(g[0] / std::exp2(double(v)) - 1), std::ldexp(1.0, -22)) << v;  // ex2.approx: 2^-22.5 rel
    EXPECT_LE(std::fabs(g[1] - std::log2(a3)), std::ldexp(1.0, -22) * std::max(1.0, std::fabs(std::log2(a3))));  // lg2.approx
    EXPECT_LE(ulps_vs(g[2], 1.0 / a3), 1);                                                  // rcp.approx: 1 ulp
    EXPECT_LE(std::fabs(g[3] / std::sqrt(a3) - 1), std::ldexp(1.0, -23));                  // sqrt.approx
    EXPECT_LE(std::fabs(g[4] * std::sqrt(a3) - 1), std::ldexp(1.0, -22));                 // rsqrt.approx: 2^-22.9
    EXPECT_LE(std::fabs(g[5] - std::sin(double(v))), std::ldexp(1.0, -20));                // sin.approx: 2^-20.5 abs
    EXPECT_LE(std::fabs(g[6] - std::cos(double(v))), std::ldexp(1.0, -20));
    EXPECT_EQ(g[7], std::trunc(v));
    EXPECT_EQ(g[8], std::floor(v));
    EXPECT_EQ(g[9], std::ceil(v));
    EXPECT_EQ(g[10], float(std::nearbyint(double(v))));  // round half to even
    double p = double(v) * 0.1;
    float rz = float(p), rp = float(p);
    if (double(rz) != p) {  // directed rounding of the f64 product
      float lo = std::nextafter(float(p), -INFINITY), hi = std::nextafter(float(p), INFINITY);
      float down = double(float(p)) > p ? lo : float(p), up = double(float(p)) < p ? hi : float(p);
      rz = p > 0 ? down : up;
      rp = up;
    }
    EXPECT_EQ(g[11], rz) << v;
    EXPECT_EQ(g[12], rp) << v;
    double sum = double(v) + std::ldexp(1.0, -24);
    float rm = float(sum);
    if (double(rm) > sum) rm = std::nextafter(rm, -INFINITY);
    EXPECT_EQ(g[13], rm) << v;
    EXPECT_EQ(g[14], float(_Float16(v))) << v;
  }
  EXPECT_EQ(o[size_t(n - 3) * 16 + 10], 2.0f);   // rni(2.5) = 2
  EXPECT_EQ(o[size_t(n - 2) * 16 + 10], -2.0f);
  EXPECT_EQ(o[size_t(n - 1) * 16 + 10], 4.0f);
}

}  // namespace
