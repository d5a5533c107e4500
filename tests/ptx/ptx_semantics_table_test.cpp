// Instruction-by-instruction differential check of the interpreter against the
// host: every case is one PTX instruction (type, rounding, .ftz, .sat, comparison,
// shuffle or vote mode) run in its own kernel over thousands of lanes whose inputs
// cross edge values (0, -0, 1, -1, INT_MIN, INT_MAX, NaN, inf, denormals, values
// halfway between integers, shift amounts past the width) with random ones. The
// expectation is computed on the host from the PTX ISA's definition of the
// instruction, independently of the interpreter's code. All cases share one module
// (one kernel each) and one launch per case.
//
// Compiled with -frounding-math: the directed-rounding expectations are computed
// with the host FPU's rounding mode set (fesetround).
#include <cfenv>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "ptx_test_util.hpp"

using namespace whtest;
using wh::ptx::Engine;
using wh::ptx::LaunchError;
using wh::ptx::Module;

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"  // the case table leaves trailing members default

namespace {

// ---------------------------------------------------------------- host helpers
using u64 = uint64_t;
inline float F(u64 b) { return std::bit_cast<float>(uint32_t(b)); }
inline double D(u64 b) { return std::bit_cast<double>(b); }
inline u64 B(float f) { return std::bit_cast<uint32_t>(f); }
inline u64 B(double d) { return std::bit_cast<u64>(d); }

inline float ftz(float f) { return std::fpclassify(f) == FP_SUBNORMAL ? std::copysign(0.0f, f) : f; }
template <class V>
inline V sat01(V v) {
  if (std::isnan(v)) return V(0);
  if (v < V(0) || (v == V(0))) return V(0);  // -0 saturates to +0
  return v > V(1) ? V(1) : v;
}

const int kModes[4] = {FE_TONEAREST, FE_TOWARDZERO, FE_DOWNWARD, FE_UPWARD};
const char* kModeName[4] = {"rn", "rz", "rm", "rp"};
// Runs f with the host rounding mode set to PTX mode m (0 rn, 1 rz, 2 rm, 3 rp).
template <class Fn>
auto with_mode(int m, Fn f) {
  const int old = std::fegetround();
  std::fesetround(kModes[m]);
  // a volatile result: the compiler does not move floating-point work across
  // fesetround on its own (it does not model the rounding mode as state)
  volatile decltype(f()) r = f();
  std::fesetround(old);
  return decltype(f())(r);
}

// f16 (host _Float16) and bf16 (round to odd in f32, then to nearest even).
inline u64 f16_bits(double x) { return std::bit_cast<uint16_t>(static_cast<_Float16>(x)); }
inline double f16_val(u64 b) { return double(std::bit_cast<_Float16>(uint16_t(b))); }
inline double bf16_val(u64 b) { return double(std::bit_cast<float>(uint32_t(b & 0xffff) << 16)); }
inline u64 bf16_bits(double x) {
  if (std::isnan(x)) return std::signbit(x) ? 0xffffu : 0x7fffu;
  std::feclearexcept(FE_INEXACT);
  float f = with_mode(1, [&] { volatile double v = x; return float(v); });
  uint32_t u = std::bit_cast<uint32_t>(f);
  if (std::fetestexcept(FE_INEXACT) && (u & 0x7f800000u) != 0x7f800000u) u |= 1;  // round to odd
  if ((u & 0x7fffffffu) == 0x7f7fffffu && std::fabs(x) > double(std::numeric_limits<float>::max())) {
    // beyond f32's range: rounds to inf in bf16 as well
    return (u >> 16 & 0x8000u) | 0x7f80u;
  }
  return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

// x*y+z rounded to odd in double: rounding that to a narrow format is the single
// correct rounding of the exact value.
inline double fma_odd(double x, double y, double z) {
  std::feclearexcept(FE_INEXACT);
  double r = with_mode(1, [&] { volatile double a = x, b = y, c = z; return std::fma(double(a), double(b), double(c)); });
  // truncation left the exact value further from zero: step outwards to the odd neighbour
  if (std::fetestexcept(FE_INEXACT) && std::isfinite(r) && !(std::bit_cast<u64>(r) & 1))
    r = std::nextafter(r, std::signbit(r) ? -INFINITY : INFINITY);
  return r;
}

// ---------------------------------------------------------------- types
enum Kind { KU, KS, KB, KF, KH, KBF, KP };
struct Ty {
  const char* name;
  int bytes;
  Kind k;
};
const Ty kS8{"s8", 1, KS}, kU8{"u8", 1, KU}, kS16{"s16", 2, KS}, kU16{"u16", 2, KU}, kB16{"b16", 2, KB},
    kS32{"s32", 4, KS}, kU32{"u32", 4, KU}, kB32{"b32", 4, KB}, kS64{"s64", 8, KS}, kU64{"u64", 8, KU},
    kB64{"b64", 8, KB}, kF16{"f16", 2, KH}, kBF16{"bf16", 2, KBF}, kF32{"f32", 4, KF}, kF64{"f64", 8, KF},
    kPred{"pred", 0, KP};

inline u64 mask_of(const Ty& t) { return t.bytes >= 8 ? ~0ull : (1ull << (8 * t.bytes)) - 1; }
inline int64_t sx(u64 v, int bytes) { return bytes >= 8 ? int64_t(v) : int64_t(v << (64 - 8 * bytes)) >> (64 - 8 * bytes); }
// register declaration type: 8-bit values live in 16-bit registers, as nvcc writes them
inline std::string reg_ty(const Ty& t) {
  if (t.bytes == 1) return t.k == KS ? "s16" : "u16";
  if (t.k == KH || t.k == KBF) return "b16";
  return t.name;
}
inline std::string mem_ty(const Ty& t) {
  if (t.k == KH || t.k == KBF) return "b16";
  return t.name;
}

// ---------------------------------------------------------------- inputs
struct Lane {
  u64 a, b, c, aux;  // aux: bits 0-31 membermask, bit 32 lane outside the branch, bit 33 a predicate
};

std::vector<u64> edges(const Ty& t) {
  std::vector<u64> v;
  if (t.k == KF && t.bytes == 4) {
    const float fe[] = {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, -0.5f, 1.5f, 2.5f, -2.5f, 3.5f, 0.49999997f, 1.0f / 3,
                        -7.75f, 100.25f, 3.1415927f, 65504.0f, 65520.0f, 1e10f, -1e10f, 2147483648.0f,
                        -2147483648.0f, 2147483520.0f, 4294967296.0f, 9.2233720e18f, 1.8446744e19f, 255.5f, -128.5f,
                        std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                        std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::denorm_min(),
                        -std::numeric_limits<float>::denorm_min(), std::bit_cast<float>(0x007fffffu),
                        std::bit_cast<float>(0x807ffff0u), std::numeric_limits<float>::min(),
                        -std::numeric_limits<float>::min(), std::numeric_limits<float>::max(),
                        -std::numeric_limits<float>::max(), 1e-20f, 1.0000001f, 0.99999994f};
    for (float f : fe) v.push_back(B(f));
  } else if (t.k == KF) {
    const double de[] = {0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.5, 0.49999999999999994, 1.0 / 3, -7.75,
                         3.141592653589793, 1e300, -1e300, 1e-300, 2147483648.0, -2147483648.5, 4294967295.5,
                         9223372036854775808.0, -9223372036854775808.0, 18446744073709551616.0, 1e20, 255.5, 65504.0,
                         3.4028235677973366e38, 3.4028236e38, 1.1754942e-38, 1.401298464324817e-45, 7e-46,
                         std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                         std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::denorm_min(),
                         -std::numeric_limits<double>::denorm_min(), std::numeric_limits<double>::min(),
                         std::numeric_limits<double>::max(), -std::numeric_limits<double>::max(),
                         1.0000000000000002, 0.9999999999999999};
    for (double d : de) v.push_back(B(d));
  } else if (t.k == KH) {
    for (u64 h : {0x0000, 0x8000, 0x3c00, 0xbc00, 0x3800, 0x3e00, 0x4100, 0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x7e00,
                  0x0001, 0x8001, 0x03ff, 0x0400, 0x3555, 0x4248, 0x5640, 0x1000})
      v.push_back(h);
  } else if (t.k == KBF) {
    for (u64 h : {0x0000, 0x8000, 0x3f80, 0xbf80, 0x3f00, 0x3fc0, 0x4020, 0x7f7f, 0xff7f, 0x7f80, 0xff80, 0x7fc0,
                  0x0001, 0x8001, 0x007f, 0x0080, 0x3eab, 0x4049, 0x4b00, 0x3c00})
      v.push_back(h);
  } else {
    const int bits = 8 * t.bytes;
    const u64 m = mask_of(t);
    const u64 smin = 1ull << (bits - 1);
    for (u64 x : {u64(0), u64(1), u64(2), u64(3), u64(7), u64(8), u64(15), u64(16), u64(31), u64(32), u64(33), u64(63),
                  u64(64), u64(65), u64(100), u64(127), u64(128), u64(255), u64(256), u64(0x5555555555555555ull),
                  u64(0xaaaaaaaaaaaaaaaaull), u64(0x0f0f0f0f0f0f0f0full), smin, smin - 1, smin + 1, m, m - 1, m - 2,
                  m - 6, u64(0x12345678'9abcdef0ull), u64(65535), u64(65536), u64(0x7fffffff), u64(0x80000000)})
      v.push_back(x & m);
  }
  return v;
}

u64 random_of(const Ty& t, std::mt19937_64& rng) {
  u64 r = rng();
  if (t.k == KF && t.bytes == 4) {
    switch (r % 4) {
      case 0: return uint32_t(r >> 8);  // any bit pattern
      case 1: return B(float(std::ldexp(double(int32_t(r >> 16) % 100000) / 1000.0, int((r >> 48) % 16) - 8)));
      case 2: return B(std::ldexp(1.0f + float((r >> 8) & 0xffffff) / 16777216.0f, int((r >> 40) % 64) - 32) * ((r >> 60) & 1 ? -1 : 1));
      default: return B(float(int32_t(r >> 20) % 5000) * 0.25f);  // small values on quarters: ties of rni/rint
    }
  }
  if (t.k == KF) {
    switch (r % 4) {
      case 0: return r >> 1 | (r << 63);
      case 1: return B(std::ldexp(double(int64_t(r >> 16) % 100000000) / 1000.0, int((r >> 56) % 32) - 16));
      case 2: return B(std::ldexp(1.0 + double(r >> 12) / 4503599627370496.0, int((r >> 4) % 128) - 64) * ((r & 1) ? -1 : 1));
      default: return B(double(int32_t(r >> 20) % 5000) * 0.25);
    }
  }
  if (t.bytes <= 2 && (t.k == KH || t.k == KBF)) return r & 0xffff;
  // integers: mostly full-width random, some small magnitudes (either sign)
  if (r % 4 == 0) return u64(int64_t(int32_t(r >> 32) % 300)) & mask_of(t);
  return (r >> 3) & mask_of(t);
}

// ---------------------------------------------------------------- cases
enum class Cmp { Exact, Float, ZeroEither, Tol };
using Ref1 = std::function<std::optional<u64>(u64 a, u64 b, u64 c)>;
using RefW = std::function<std::optional<u64>(const std::vector<Lane>& in, size_t i)>;

struct Case {
  std::string name;  // for messages
  std::string body;  // PTX using %a %b %c %e (typed), %pa (a predicate), %d or %pd (result)
  Ty dt, at, bt, ct;
  RefW ref;
  Cmp cmp = Cmp::Exact;
  double tol = 0;  // relative (Cmp::Tol)
  bool warp = false;  // inputs laid out per warp (membermask, branch) by the generator
  std::function<void(std::vector<Lane>&, std::mt19937_64&)> gen;  // warp cases
};

RefW lanewise(Ref1 f) {
  return [f](const std::vector<Lane>& in, size_t i) { return f(in[i].a, in[i].b, in[i].c); };
}

std::string kernel_text(const Case& c, int idx) {
  std::string s = ".visible .entry k" + std::to_string(idx) + "(.param .u64 pin, .param .u64 pout, .param .u32 n)\n{\n";
  s += "  .reg .pred %p, %pa, %pd, %pq, %g;\n  .reg .u32 %t<4>;\n  .reg .u32 %e, %m;\n  .reg .u64 %q<6>;\n";
  auto decl = [&](const Ty& t, const char* r) {
    if (t.k != KP) s += "  .reg ." + reg_ty(t) + " " + r + ";\n";
  };
  decl(c.at, "%a");
  decl(c.bt, "%b");
  decl(c.ct, "%c");
  decl(c.dt, "%d");
  s += "  ld.param.u64 %q0, [pin];\n  ld.param.u64 %q1, [pout];\n  ld.param.u32 %t0, [n];\n"
       "  mov.u32 %t1, %tid.x;\n  mov.u32 %t2, %ctaid.x;\n  mov.u32 %t3, %ntid.x;\n  mad.lo.u32 %t1, %t2, %t3, %t1;\n"
       "  setp.ge.u32 %p, %t1, %t0;\n  @%p bra DONE;\n"
       "  mul.wide.u32 %q2, %t1, 32;\n  add.u64 %q2, %q0, %q2;\n";
  auto load = [&](const Ty& t, const char* r, int off) {
    if (t.k != KP) s += "  ld.global." + mem_ty(t) + " " + r + ", [%q2+" + std::to_string(off) + "];\n";
  };
  load(c.at, "%a", 0);
  load(c.bt, "%b", 8);
  load(c.ct, "%c", 16);
  s += "  ld.global.u32 %e, [%q2+24];\n  mov.u32 %m, %e;\n  ld.global.u64 %q3, [%q2+24];\n"
       "  and.b64 %q4, %q3, 8589934592;\n  setp.ne.u64 %pa, %q4, 0;\n"
       "  and.b64 %q4, %q3, 4294967296;\n  setp.ne.u64 %g, %q4, 0;\n"
       "  mul.wide.u32 %q5, %t1, 8;\n  add.u64 %q5, %q1, %q5;\n";
  if (c.dt.k == KP) s += "  mov.pred %pd, 0;\n";
  else if (c.warp) s += "  mov." + reg_ty(c.dt) + " %d, 0;\n";
  if (c.warp) s += "  @%g bra SKIP;\n";
  s += "  " + c.body + "\n";
  if (c.warp) s += "SKIP:\n";
  if (c.dt.k == KP) s += "  selp.u32 %e, 1, 0, %pd;\n  st.global.u32 [%q5], %e;\n";
  else s += "  st.global." + mem_ty(c.dt) + " [%q5], %d;\n";
  s += "DONE:\n  ret;\n}\n";
  return s;
}

bool fp_same(u64 got, u64 want, const Ty& t, Cmp cmp, double tol) {
  if (t.k == KF && t.bytes == 4) {
    float g = F(got), w = F(want);
    if (std::isnan(w)) return std::isnan(g);
    if (cmp == Cmp::ZeroEither && w == 0 && g == 0) return true;
    if (cmp == Cmp::Tol) {
      if (std::isinf(w) || w == 0) return g == w || (w == 0 && std::fabs(g) < 1e-37f);
      return std::fabs(double(g) - double(w)) <= tol * std::fabs(double(w));
    }
    return uint32_t(got) == uint32_t(want);
  }
  if (t.k == KF) {
    double g = D(got), w = D(want);
    if (std::isnan(w)) return std::isnan(g);
    if (cmp == Cmp::ZeroEither && w == 0 && g == 0) return true;
    if (cmp == Cmp::Tol) {
      if (std::isinf(w) || w == 0) return g == w;
      return std::fabs(g - w) <= tol * std::fabs(w);
    }
    return got == want;
  }
  if (t.k == KH) {
    if ((want & 0x7c00) == 0x7c00 && (want & 0x3ff)) return (got & 0x7c00) == 0x7c00 && (got & 0x3ff);
    if (cmp == Cmp::ZeroEither && (want & 0x7fff) == 0 && (got & 0x7fff) == 0) return true;
    return (got & 0xffff) == (want & 0xffff);
  }
  if (t.k == KBF) {
    if ((want & 0x7f80) == 0x7f80 && (want & 0x7f)) return (got & 0x7f80) == 0x7f80 && (got & 0x7f);
    if (cmp == Cmp::ZeroEither && (want & 0x7fff) == 0 && (got & 0x7fff) == 0) return true;
    return (got & 0xffff) == (want & 0xffff);
  }
  return (got & mask_of(t)) == (want & mask_of(t));
}

std::string hex(u64 v) {
  char b[24];
  std::snprintf(b, sizeof b, "0x%" PRIx64, v);
  return b;
}

// Lanes: every pair (and, for three operands, triple) of edge values first, then random values.
std::vector<Lane> lanes_for(const Case& c, std::mt19937_64& rng, size_t n) {
  std::vector<Lane> in(n);
  if (c.warp) {
    c.gen(in, rng);
    return in;
  }
  auto pick = [&](const Ty& t, size_t idx, size_t stride, const std::vector<u64>& e, bool& edge) -> u64 {
    if (t.k == KP) return 0;
    if (edge) return e[(idx / stride) % e.size()];
    return random_of(t, rng);
  };
  const std::vector<u64> ea = edges(c.at.k == KP ? kU32 : c.at), eb = edges(c.bt.k == KP ? kU32 : c.bt),
                         ec = edges(c.ct.k == KP ? kU32 : c.ct);
  const size_t combos = ea.size() * eb.size() * (c.ct.k == KP ? 1 : ec.size());
  for (size_t i = 0; i < n; i++) {
    bool edge = i < combos && i < n / 2;
    Lane& l = in[i];
    l.a = pick(c.at, i, 1, ea, edge);
    l.b = pick(c.bt, i, ea.size(), eb, edge);
    l.c = pick(c.ct, i, ea.size() * eb.size(), ec, edge);
    if (!edge && (rng() % 8) == 0 && c.bt.k != KP) l.b = l.a;  // equal operands
    // for random lanes, sometimes mix edge values in
    if (!edge && rng() % 4 == 0) l.a = ea[rng() % ea.size()] & (c.at.k == KP ? 0 : ~0ull);
    l.aux = (rng() & 1) << 33;
  }
  return in;
}

// ---------------------------------------------------------------- the case table
std::vector<Case> build_cases();

class PtxSemanticsTable : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cases_ = new std::vector<Case>(build_cases());
    std::string src = ".version 8.0\n.target sm_80\n.address_size 64\n";
    for (size_t i = 0; i < cases_->size(); i++) src += kernel_text((*cases_)[i], int(i));
    std::string err;
    module_ = Module::from_ptx(src, &err).release();
    if (!module_) load_error_ = new std::string(err);
  }
  static void TearDownTestSuite() {
    delete module_;
    delete cases_;
    delete load_error_;
    module_ = nullptr;
    cases_ = nullptr;
    load_error_ = nullptr;
  }
  // Runs every case whose name starts with one of the prefixes; returns the number run.
  void run_group(std::initializer_list<const char*> prefixes) {
    ASSERT_TRUE(module_) << (load_error_ ? *load_error_ : "");
    Engine eng(1);
    int ran = 0;
    for (size_t ci = 0; ci < cases_->size(); ci++) {
      const Case& c = (*cases_)[ci];
      bool want = false;
      for (const char* p : prefixes) want = want || c.name.rfind(p, 0) == 0;
      if (!want) continue;
      ++ran;
      std::mt19937_64 rng(0x9e3779b97f4a7c15ull ^ ci);
      const size_t n = c.warp ? 2048 : 3072;
      std::vector<Lane> in = lanes_for(c, rng, n);
      HostMem mem;
      std::vector<u64> flat;
      for (auto& l : in) flat.insert(flat.end(), {l.a, l.b, l.c, l.aux});
      u64 din = mem.upload(flat), dout = mem.alloc(n * 8);
      const std::string k = "k" + std::to_string(ci);
      Args a(module_->kernel(k));
      a(din)(dout)(uint32_t(n));
      auto e = eng.launch(*module_, k, cfg({unsigned(n / 128)}, {128}), a.data(), a.size(), mem);
      ASSERT_EQ(e.kind, LaunchError::None) << c.name << ": " << e.message;
      auto out = mem.download<u64>(dout, n);
      int bad = 0;
      for (size_t i = 0; i < n && bad < 4; i++) {
        std::optional<u64> w = c.ref(in, i);
        if (!w) continue;
        if (!fp_same(out[i], *w, c.dt.k == KP ? kU32 : c.dt, c.cmp, c.tol)) {
          ++bad;
          ADD_FAILURE() << c.name << " (" << c.body << ") lane " << i << ": a=" << hex(in[i].a) << " b=" << hex(in[i].b)
                        << " c=" << hex(in[i].c) << " aux=" << hex(in[i].aux) << ": got " << hex(out[i] & mask_of(c.dt.k == KP ? kU32 : c.dt))
                        << ", want " << hex(*w & mask_of(c.dt.k == KP ? kU32 : c.dt));
        }
      }
    }
    EXPECT_GT(ran, 0);
    std::printf("[ checked  ] %d instruction forms\n", ran);
  }
  static std::vector<Case>* cases_;
  static Module* module_;
  static std::string* load_error_;
};
std::vector<Case>* PtxSemanticsTable::cases_ = nullptr;
Module* PtxSemanticsTable::module_ = nullptr;
std::string* PtxSemanticsTable::load_error_ = nullptr;

TEST_F(PtxSemanticsTable, IntegerArithmetic) { run_group({"int."}); }
TEST_F(PtxSemanticsTable, BitOperations) { run_group({"bit."}); }
TEST_F(PtxSemanticsTable, FloatArithmeticF32) { run_group({"f32."}); }
TEST_F(PtxSemanticsTable, FloatArithmeticF64) { run_group({"f64."}); }
TEST_F(PtxSemanticsTable, HalfArithmetic) { run_group({"half."}); }
TEST_F(PtxSemanticsTable, Conversions) { run_group({"cvt."}); }
TEST_F(PtxSemanticsTable, ComparesAndSelects) { run_group({"cmp."}); }
TEST_F(PtxSemanticsTable, WarpCollectives) { run_group({"warp."}); }

// ---------------------------------------------------------------- integer references
struct IOps {
  const Ty& t;
  int bits() const { return 8 * t.bytes; }
  bool sg() const { return t.k == KS; }
  // value as a signed/unsigned 128-bit integer
  __int128 v(u64 x) const { return sg() ? __int128(sx(x, t.bytes)) : __int128(x & mask_of(t)); }
  __int128 lo() const { return sg() ? -(__int128(1) << (bits() - 1)) : 0; }
  __int128 hi() const { return sg() ? (__int128(1) << (bits() - 1)) - 1 : (__int128(1) << bits()) - 1; }
};

void add_int_cases(std::vector<Case>& cs) {
  const Ty* ts[] = {&kS16, &kU16, &kS32, &kU32, &kS64, &kU64};
  for (const Ty* tp : ts) {
    const Ty& t = *tp;
    IOps o{t};
    const std::string n = t.name;
    auto bin = [&](const std::string& op, Ref1 f, const Ty& dt) {
      cs.push_back({"int." + op + "." + n, op + "." + n + " %d, %a, %b;", dt, t, t, kPred, lanewise(f)});
    };
    bin("add", [o](u64 a, u64 b, u64) { return u64(o.v(a) + o.v(b)); }, t);
    bin("sub", [o](u64 a, u64 b, u64) { return u64(o.v(a) - o.v(b)); }, t);
    bin("mul.lo", [o](u64 a, u64 b, u64) { return u64(o.v(a) * o.v(b)); }, t);
    if (t.bytes < 8) {
      bin("mul.hi", [o](u64 a, u64 b, u64) { return u64((o.v(a) * o.v(b)) >> o.bits()); }, t);
    } else {
      bin("mul.hi", [o](u64 a, u64 b, u64) {
        // 128x128 high half through 64-bit limbs: exact for s64 and u64
        if (o.sg()) return u64((__int128(int64_t(a)) * __int128(int64_t(b))) >> 64);
        return u64((unsigned __int128)a * (unsigned __int128)b >> 64);
      }, t);
    }
    bin("min", [o](u64 a, u64 b, u64) { return u64(std::min(o.v(a), o.v(b))); }, t);
    bin("max", [o](u64 a, u64 b, u64) { return u64(std::max(o.v(a), o.v(b))); }, t);
    bin("div", [o](u64 a, u64 b, u64) -> std::optional<u64> {
      if (o.v(b) == 0) return std::nullopt;  // undefined
      if (o.sg() && o.v(a) == o.lo() && o.v(b) == -1) return u64(o.lo());
      return u64(o.v(a) / o.v(b));
    }, t);
    bin("rem", [o](u64 a, u64 b, u64) -> std::optional<u64> {
      if (o.v(b) == 0) return std::nullopt;
      if (o.sg() && o.v(a) == o.lo() && o.v(b) == -1) return u64(0);
      return u64(o.v(a) % o.v(b));  // C's remainder: the sign of the dividend
    }, t);
    if (t.bytes == 4 || t.bytes == 2) {
      const Ty& wt = t.bytes == 4 ? (o.sg() ? kS64 : kU64) : (o.sg() ? kS32 : kU32);
      bin("mul.wide", [o](u64 a, u64 b, u64) { return u64(o.v(a) * o.v(b)); }, wt);
      cs.push_back({"int.mad.wide." + n, "mad.wide." + n + " %d, %a, %b, %c;", wt, t, t, wt,
                    lanewise([o, wt](u64 a, u64 b, u64 c) { return u64(o.v(a) * o.v(b) + IOps{wt}.v(c)); })});
    }
    cs.push_back({"int.mad.lo." + n, "mad.lo." + n + " %d, %a, %b, %c;", t, t, t, t,
                  lanewise([o](u64 a, u64 b, u64 c) { return u64(o.v(a) * o.v(b) + o.v(c)); })});
    if (t.bytes >= 4) {
      cs.push_back({"int.mad.hi." + n, "mad.hi." + n + " %d, %a, %b, %c;", t, t, t, t,
                    lanewise([o](u64 a, u64 b, u64 c) {
                      u64 h = o.sg() ? u64((__int128(o.v(a)) * __int128(o.v(b))) >> o.bits())
                                     : u64(((unsigned __int128)(o.v(a)) * (unsigned __int128)(o.v(b))) >> o.bits());
                      return h + c;
                    })});
    }
    if (o.sg()) {
      cs.push_back({"int.abs." + n, "abs." + n + " %d, %a;", t, t, kPred, kPred,
                    lanewise([o](u64 a, u64, u64) { return u64(o.v(a) < 0 ? -o.v(a) : o.v(a)); })});
      cs.push_back({"int.neg." + n, "neg." + n + " %d, %a;", t, t, kPred, kPred,
                    lanewise([o](u64 a, u64, u64) { return u64(-o.v(a)); })});
    }
    if (t.bytes == 4 || t.bytes == 8) {
      cs.push_back({"int.sad." + n, "sad." + n + " %d, %a, %b, %c;", t, t, t, t,
                    lanewise([o](u64 a, u64 b, u64 c) {
                      __int128 x = o.v(a), y = o.v(b);
                      return u64((x < y ? y - x : x - y) + o.v(c));
                    })});
    }
    if (t.bytes == 4) {
      cs.push_back({"int.mul24.lo." + n, "mul24.lo." + n + " %d, %a, %b;", t, t, t, kPred,
                    lanewise([o](u64 a, u64 b, u64) {
                      __int128 x = o.sg() ? __int128(sx(a, 3)) : __int128(a & 0xffffff);
                      __int128 y = o.sg() ? __int128(sx(b, 3)) : __int128(b & 0xffffff);
                      return u64(x * y);
                    })});
    }
    // add.sat / sub.sat (s32 only in the ISA)
    if (t.bytes == 4 && o.sg()) {
      auto clamp = [o](__int128 x) { return u64(x < o.lo() ? o.lo() : x > o.hi() ? o.hi() : x); };
      bin("add.sat", [o, clamp](u64 a, u64 b, u64) { return clamp(o.v(a) + o.v(b)); }, t);
      bin("sub.sat", [o, clamp](u64 a, u64 b, u64) { return clamp(o.v(a) - o.v(b)); }, t);
    }
  }
  // extended precision carry chains are in ptx_semantics_test.cpp
}

void add_bit_cases(std::vector<Case>& cs) {
  for (const Ty* tp : {&kB16, &kB32, &kB64}) {
    const Ty& t = *tp;
    const std::string n = t.name;
    const u64 m = mask_of(t);
    auto bin = [&](const std::string& op, std::function<u64(u64, u64)> f) {
      cs.push_back({"bit." + op + "." + n, op + "." + n + " %d, %a, %b;", t, t, t, kPred,
                    lanewise([f, m](u64 a, u64 b, u64) { return f(a & m, b & m) & m; })});
    };
    bin("and", [](u64 a, u64 b) { return a & b; });
    bin("or", [](u64 a, u64 b) { return a | b; });
    bin("xor", [](u64 a, u64 b) { return a ^ b; });
    cs.push_back({"bit.not." + n, "not." + n + " %d, %a;", t, t, kPred, kPred, lanewise([m](u64 a, u64, u64) { return ~a & m; })});
    cs.push_back({"bit.cnot." + n, "cnot." + n + " %d, %a;", t, t, kPred, kPred,
                  lanewise([m](u64 a, u64, u64) { return u64((a & m) == 0); })});
  }
  // shifts: the amount is a u32 register; amounts past the width give 0 (or the sign)
  for (const Ty* tp : {&kB16, &kB32, &kB64, &kU16, &kU32, &kU64, &kS16, &kS32, &kS64}) {
    const Ty& t = *tp;
    const std::string n = t.name;
    const int bits = 8 * t.bytes;
    const u64 m = mask_of(t);
    if (t.k == KB) {
      cs.push_back({"bit.shl." + n, "shl." + n + " %d, %a, %b;", t, t, kU32, kPred,
                    lanewise([bits, m](u64 a, u64 b, u64) { uint32_t s = uint32_t(b); return s >= uint32_t(bits) ? 0 : (a << s) & m; })});
    }
    cs.push_back({"bit.shr." + n, "shr." + n + " %d, %a, %b;", t, t, kU32, kPred,
                  lanewise([bits, m, t](u64 a, u64 b, u64) {
                    uint32_t s = uint32_t(b);
                    if (t.k == KS) {
                      int64_t v = sx(a, t.bytes);
                      return u64(v >> std::min<uint32_t>(s, 63)) & m;
                    }
                    return s >= uint32_t(bits) ? 0 : (a & m) >> s;
                  })});
  }
  for (const Ty* tp : {&kB32, &kB64}) {
    const Ty& t = *tp;
    const std::string n = t.name;
    const int bits = 8 * t.bytes;
    const u64 m = mask_of(t);
    cs.push_back({"bit.popc." + n, "popc." + n + " %d, %a;", kU32, t, kPred, kPred,
                  lanewise([m](u64 a, u64, u64) { return u64(std::popcount(a & m)); })});
    cs.push_back({"bit.clz." + n, "clz." + n + " %d, %a;", kU32, t, kPred, kPred,
                  lanewise([m, bits](u64 a, u64, u64) { return u64(std::countl_zero(a & m) - (64 - bits)); })});
    cs.push_back({"bit.brev." + n, "brev." + n + " %d, %a;", t, t, kPred, kPred, lanewise([bits](u64 a, u64, u64) {
                    u64 r = 0;
                    for (int i = 0; i < bits; i++) r |= ((a >> i) & 1) << (bits - 1 - i);
                    return r;
                  })});
    // bfi: insert a[0..len) into b at pos; c = pos, e (u32 of the aux word) = len
    cs.push_back({"bit.bfi." + n, "bfi." + n + " %d, %a, %b, %c, %e;", t, t, t, kU32,
                  [bits, m](const std::vector<Lane>& in, size_t i) -> std::optional<u64> {
                    u64 a = in[i].a, r = in[i].b & m;
                    uint32_t pos = uint32_t(in[i].c) & 0xff, len = uint32_t(in[i].aux) & 0xff;
                    for (uint32_t k = 0; k < len && pos + k < uint32_t(bits); k++)
                      r = (r & ~(1ull << (pos + k))) | (((a >> k) & 1) << (pos + k));
                    return r;
                  }});
  }
  for (const Ty* tp : {&kU32, &kS32, &kU64, &kS64}) {
    const Ty& t = *tp;
    const std::string n = t.name;
    const int bits = 8 * t.bytes;
    const u64 m = mask_of(t);
    for (bool shiftamt : {false, true}) {
      cs.push_back({std::string("bit.bfind") + (shiftamt ? ".shiftamt." : ".") + n,
                    std::string("bfind") + (shiftamt ? ".shiftamt." : ".") + n + " %d, %a;", kU32, t, kPred, kPred,
                    lanewise([t, bits, m, shiftamt](u64 a, u64, u64) -> std::optional<u64> {
                      u64 x = a & m;
                      if (t.k == KS && sx(a, t.bytes) < 0) x = ~x & m;
                      if (x == 0) return u64(0xffffffffu);
                      int msb = 63 - std::countl_zero(x);
                      return u64(shiftamt ? bits - 1 - msb : msb);
                    })});
    }
    // bfe: b = pos, c = len (u32, the low 8 bits used)
    cs.push_back({"bit.bfe." + n, "bfe." + n + " %d, %a, %b, %c;", t, t, kU32, kU32,
                  lanewise([t, bits, m](u64 a, u64 b, u64 c) {
                    uint32_t pos = uint32_t(b) & 0xff, len = uint32_t(c) & 0xff;
                    const uint32_t msb = uint32_t(bits - 1);
                    bool sbit = t.k == KS && len != 0 && ((a >> std::min(pos + len - 1, msb)) & 1);
                    u64 r = 0;
                    for (uint32_t i = 0; i <= msb; i++) {
                      bool bit = (i < len && pos + i <= msb) ? ((a >> (pos + i)) & 1) : sbit;
                      r |= u64(bit) << i;
                    }
                    return r & m;
                  })});
  }
  cs.push_back({"bit.prmt.b32", "prmt.b32 %d, %a, %b, %c;", kB32, kB32, kB32, kB32, lanewise([](u64 a, u64 b, u64 c) {
                  u64 x = (b & 0xffffffff) << 32 | (a & 0xffffffff);
                  u64 r = 0;
                  for (int i = 0; i < 4; i++) {
                    uint32_t s = uint32_t(c >> (4 * i)) & 0xf;
                    u64 byte = (x >> (8 * (s & 7))) & 0xff;
                    if (s & 8) byte = (byte & 0x80) ? 0xff : 0;
                    r |= byte << (8 * i);
                  }
                  return r;
                })});
  for (uint32_t lut : {0x00u, 0xffu, 0x80u, 0xfeu, 0x96u, 0xe8u, 0xcau, 0x1eu, 0x3cu, 0x5au}) {
    cs.push_back({"bit.lop3.b32." + std::to_string(lut), "lop3.b32 %d, %a, %b, %c, " + std::to_string(lut) + ";", kB32,
                  kB32, kB32, kB32, lanewise([lut](u64 a, u64 b, u64 c) {
                    u64 r = 0;
                    for (int i = 0; i < 32; i++) {
                      int idx = int((a >> i) & 1) << 2 | int((b >> i) & 1) << 1 | int((c >> i) & 1);
                      r |= u64((lut >> idx) & 1) << i;
                    }
                    return r;
                  })});
  }
  for (bool left : {false, true})
    for (bool clamp : {false, true}) {
      std::string op = std::string("shf.") + (left ? "l" : "r") + (clamp ? ".clamp" : ".wrap") + ".b32";
      cs.push_back({"bit." + op, op + " %d, %a, %b, %c;", kB32, kB32, kB32, kU32, lanewise([left, clamp](u64 a, u64 b, u64 c) {
                      u64 x = (b & 0xffffffff) << 32 | (a & 0xffffffff);
                      uint32_t s = uint32_t(c);
                      s = clamp ? std::min(s, 32u) : (s & 31);
                      return left ? u64(uint32_t((x << s) >> 32)) : u64(uint32_t(x >> s));
                    })});
    }
}

// ---------------------------------------------------------------- float references
template <class V>
V val(u64 b) {
  if constexpr (std::is_same_v<V, float>) return F(b);
  else return D(b);
}
template <class V>
u64 bits(V v) {
  return B(v);
}

template <class V>
void add_float_cases(std::vector<Case>& cs) {
  constexpr bool f32 = std::is_same_v<V, float>;
  const Ty& t = f32 ? kF32 : kF64;
  const std::string n = t.name, g = f32 ? "f32." : "f64.";
  for (int mode = 0; mode < 4; mode++) {
    for (int fz = 0; fz < (f32 ? 2 : 1); fz++)
      for (int st = 0; st < 2; st++) {
        if (!f32 && st) continue;  // .sat is f32 only
        const std::string mods = std::string(".") + kModeName[mode] + (fz ? ".ftz" : "") + (st ? ".sat" : "");
        auto post = [fz, st](V r) {
          if constexpr (std::is_same_v<V, float>) if (fz) r = ftz(r);
          if (st) r = sat01(r);
          return r;
        };
        auto in = [fz](u64 x) {
          V v = val<V>(x);
          if constexpr (std::is_same_v<V, float>) if (fz) v = ftz(v);
          return v;
        };
        auto arith = [&](const std::string& op, int nsrc, std::function<V(V, V, V)> f) {
          cs.push_back({g + op + mods, op + mods + "." + n + (nsrc == 1 ? " %d, %a;" : nsrc == 2 ? " %d, %a, %b;" : " %d, %a, %b, %c;"),
                        t, t, nsrc >= 2 ? t : kPred, nsrc >= 3 ? t : kPred,
                        lanewise([=](u64 a, u64 b, u64 c) {
                          return bits(post(with_mode(mode, [&] {
                            volatile V x = in(a), y = in(b), z = in(c);
                            return f(x, y, z);
                          })));
                        }),
                        Cmp::Float});
        };
        arith("add", 2, [](V x, V y, V) { return x + y; });
        arith("sub", 2, [](V x, V y, V) { return x - y; });
        arith("mul", 2, [](V x, V y, V) { return x * y; });
        arith("fma", 3, [](V x, V y, V z) { return std::fma(x, y, z); });
        if (st) continue;  // div, rcp, sqrt have no .sat
        arith("div", 2, [](V x, V y, V) { return x / y; });
        arith("rcp", 1, [](V x, V, V) { return V(1) / x; });
        arith("sqrt", 1, [](V x, V, V) { return std::sqrt(x); });
      }
  }
  // forms without a rounding mode
  for (int fz = 0; fz < (f32 ? 2 : 1); fz++) {
    const std::string fm = fz ? ".ftz" : "";
    auto in = [fz](u64 x) {
      V v = val<V>(x);
      if constexpr (std::is_same_v<V, float>) if (fz) v = ftz(v);
      return v;
    };
    auto out = [fz](V r) {
      if constexpr (std::is_same_v<V, float>) if (fz) r = ftz(r);
      return r;
    };
    auto plain = [&](const std::string& op, int nsrc, std::function<V(V, V)> f, Cmp cmp = Cmp::Float, double tol = 0,
                     std::function<bool(V, V)> domain = nullptr) {
      cs.push_back({g + op + fm, op + fm + "." + n + (nsrc == 1 ? " %d, %a;" : " %d, %a, %b;"), t, t,
                    nsrc == 2 ? t : kPred, kPred,
                    lanewise([=](u64 a, u64 b, u64) -> std::optional<u64> {
                      if (domain && !domain(in(a), in(b))) return std::nullopt;
                      return bits(out(f(in(a), in(b))));
                    }),
                    cmp, tol});
    };
    plain("add", 2, [](V x, V y) { return x + y; });
    plain("mul", 2, [](V x, V y) { return x * y; });
    // min/max: a NaN operand gives the other one; -0 and +0 may come in either order
    plain("min", 2, [](V x, V y) { return std::isnan(x) ? y : std::isnan(y) ? x : (y < x ? y : x); }, Cmp::ZeroEither);
    plain("max", 2, [](V x, V y) { return std::isnan(x) ? y : std::isnan(y) ? x : (y > x ? y : x); }, Cmp::ZeroEither);
    // abs/neg act on the sign bit (NaN included; .ftz flushes a denormal)
    cs.push_back({g + "abs" + fm, "abs" + fm + "." + n + " %d, %a;", t, t, kPred, kPred,
                  lanewise([in](u64 a, u64, u64) { return bits(std::fabs(in(a))); }), Cmp::Float});
    cs.push_back({g + "neg" + fm, "neg" + fm + "." + n + " %d, %a;", t, t, kPred, kPred,
                  lanewise([in](u64 a, u64, u64) { return bits(V(-in(a))); }), Cmp::Float});
    if (f32) {
      // min/max .NaN: a NaN operand gives the canonical NaN
      const V cnan = std::bit_cast<float>(0x7fffffffu);
      plain("min.NaN", 2, [cnan](V x, V y) { return std::isnan(x) || std::isnan(y) ? cnan : (y < x ? y : x); }, Cmp::ZeroEither);
      plain("max.NaN", 2, [cnan](V x, V y) { return std::isnan(x) || std::isnan(y) ? cnan : (y > x ? y : x); }, Cmp::ZeroEither);
      // approximate forms: within their documented error of the exact value, normal range
      auto normal = [](V x) { return std::isfinite(x) && std::fabs(x) > V(1e-30) && std::fabs(x) < V(1e30); };
      plain("rcp.approx", 1, [](V x, V) { return V(1) / x; }, Cmp::Tol, 1e-6, [normal](V x, V) { return normal(x); });
      plain("sqrt.approx", 1, [](V x, V) { return std::sqrt(x); }, Cmp::Tol, 1e-6, [normal](V x, V) { return normal(x) && x > 0; });
      plain("rsqrt.approx", 1, [](V x, V) { return V(1) / std::sqrt(x); }, Cmp::Tol, 1e-6, [normal](V x, V) { return normal(x) && x > 0; });
      plain("ex2.approx", 1, [](V x, V) { return std::exp2(x); }, Cmp::Tol, 1e-6, [](V x, V) { return std::fabs(x) < 100; });
      plain("lg2.approx", 1, [](V x, V) { return std::log2(x); }, Cmp::Tol, 1e-6, [normal](V x, V) { return normal(x) && x > 0 && std::fabs(x - 1) > 0.01; });
      // the approximate divisions are defined for divisors below 2^126 in magnitude
      auto divdom = [normal](V x, V y) { return normal(x) && normal(y) && std::fabs(y) < V(1e37) && std::fabs(x / y) < V(1e37) && std::fabs(x / y) > V(1e-37); };
      plain("div.approx", 2, [](V x, V y) { return x / y; }, Cmp::Tol, 1e-6, divdom);
      plain("div.full", 2, [](V x, V y) { return x / y; }, Cmp::Tol, 1e-6, divdom);
      // sin/cos: absolute error in [-pi, pi]
      for (const char* op : {"sin", "cos"}) {
        const bool s = op[0] == 's';
        cs.push_back({g + op + ".approx" + fm, std::string(op) + ".approx" + fm + ".f32 %d, %a;", t, t, kPred, kPred,
                      lanewise([in, out, s](u64 a, u64, u64) -> std::optional<u64> {
                        V x = in(a);
                        if (!(std::fabs(x) <= V(3.14159))) return std::nullopt;
                        V w = s ? std::sin(x) : std::cos(x);
                        return bits(out(w));
                      }),
                      Cmp::Tol, 1e-5});
      }
      if (!fz) cs.push_back({g + "copysign", "copysign.f32 %d, %a, %b;", t, t, t, kPred,
                    lanewise([](u64 a, u64 b, u64) { return (b & 0x7fffffffu) | (a & 0x80000000u); })});
    } else {
      plain("rcp.approx.ftz", 1, [](V x, V) { return V(1) / x; }, Cmp::Tol, 1e-6,
            [](V x, V) { return std::isfinite(x) && std::fabs(x) > V(1e-300) && std::fabs(x) < V(1e300); });
      plain("rsqrt.approx", 1, [](V x, V) { return V(1) / std::sqrt(x); }, Cmp::Tol, 1e-6,
            [](V x, V) { return std::isfinite(x) && x > V(1e-300); });
      cs.push_back({g + "copysign", "copysign.f64 %d, %a, %b;", t, t, t, kPred,
                    lanewise([](u64 a, u64 b, u64) { return (b & ~(1ull << 63)) | (a & (1ull << 63)); })});
    }
  }
  // testp
  for (const char* k : {"finite", "infinite", "number", "notanumber", "normal", "subnormal"}) {
    const std::string kk = k;
    cs.push_back({g + "testp." + kk, "testp." + kk + "." + n + " %pd, %a;", kPred, t, kPred, kPred,
                  lanewise([kk](u64 a, u64, u64) {
                    V x = val<V>(a);
                    int c = std::fpclassify(x);
                    bool r = kk == "finite" ? std::isfinite(x) : kk == "infinite" ? std::isinf(x) : kk == "number" ? !std::isnan(x)
                           : kk == "notanumber" ? std::isnan(x) : kk == "normal" ? c == FP_NORMAL : c == FP_SUBNORMAL;
                    return u64(r);
                  })});
  }
}

// half precision: f16/bf16 (and x2) add, sub, mul, fma, min, max, neg, abs, all .rn
void add_half_cases(std::vector<Case>& cs) {
  for (bool bf : {false, true}) {
    const Ty& t = bf ? kBF16 : kF16;
    auto v = [bf](u64 b) { return bf ? bf16_val(b) : f16_val(b); };
    auto r = [bf](double x) { return bf ? bf16_bits(x) : f16_bits(x); };
    for (bool x2 : {false, true}) {
      const std::string n = std::string(bf ? "bf16" : "f16") + (x2 ? "x2" : "");
      const Ty& rt = x2 ? kB32 : t;
      auto lift = [x2, bf](std::function<u64(u64, u64, u64)> f) {
        return lanewise([f, x2, bf](u64 a, u64 b, u64 c) -> std::optional<u64> {
          if (!x2) return f(a & 0xffff, b & 0xffff, c & 0xffff);
          if (((a & 0x7fff) == 0 && (b & 0x7fff) == 0) || ((a >> 16 & 0x7fff) == 0 && (b >> 16 & 0x7fff) == 0))
            return std::nullopt;  // min/max of +0 and -0: either zero (the scalar forms check the rest)
          for (u64 h : {a, a >> 16, b, b >> 16, c, c >> 16})  // NaN payloads of packed halves are not pinned down
            if (bf ? ((h & 0x7f80) == 0x7f80 && (h & 0x7f)) : ((h & 0x7c00) == 0x7c00 && (h & 0x3ff))) return std::nullopt;
          return f(a & 0xffff, b & 0xffff, c & 0xffff) | f(a >> 16 & 0xffff, b >> 16 & 0xffff, c >> 16 & 0xffff) << 16;
        });
      };
      auto add = [&](const std::string& op, int nsrc, std::function<u64(u64, u64, u64)> f, Cmp cmp = Cmp::Exact) {
        // f16x2/bf16x2 results are compared as 32-bit words: both halves exactly
        cs.push_back({"half." + op + "." + n, op + "." + n + (nsrc == 1 ? " %d, %a;" : nsrc == 2 ? " %d, %a, %b;" : " %d, %a, %b, %c;"),
                      rt, rt, nsrc >= 2 ? rt : kPred, nsrc >= 3 ? rt : kPred, lift(f), x2 ? Cmp::Exact : cmp});
      };
      add("add.rn", 2, [=](u64 a, u64 b, u64) { return r(v(a) + v(b)); }, Cmp::Float);
      add("sub.rn", 2, [=](u64 a, u64 b, u64) { return r(v(a) - v(b)); }, Cmp::Float);
      add("mul.rn", 2, [=](u64 a, u64 b, u64) { return r(v(a) * v(b)); }, Cmp::Float);
      add("fma.rn", 3, [=](u64 a, u64 b, u64 c) {
        double e = fma_odd(v(a), v(b), v(c));
        if (e == 0) e = with_mode(0, [&] { volatile double x = v(a), y = v(b), z = v(c); return std::fma(double(x), double(y), double(z)); });
        return r(e);
      }, Cmp::Float);
      add("neg", 1, [=](u64 a, u64, u64) { return a ^ 0x8000; }, Cmp::Float);
      add("abs", 1, [=](u64 a, u64, u64) { return a & 0x7fff; }, Cmp::Float);
      add("min", 2, [=](u64 a, u64 b, u64) {
        double x = v(a), y = v(b);
        return std::isnan(x) ? b : std::isnan(y) ? a : (y < x ? b : a);
      }, Cmp::ZeroEither);
      add("max", 2, [=](u64 a, u64 b, u64) {
        double x = v(a), y = v(b);
        return std::isnan(x) ? b : std::isnan(y) ? a : (y > x ? b : a);
      }, Cmp::ZeroEither);
    }
  }
}

// ---------------------------------------------------------------- cvt
struct CvtRef {
  Ty dt, st;
  int mode;  // 0-3 rn rz rm rp, 4-7 rni rzi rmi rpi, -1 none
  bool sat, fz;
  u64 operator()(u64 a) const {
    const bool sfloat = st.k == KF || st.k == KH || st.k == KBF;
    const bool dfloat = dt.k == KF || dt.k == KH || dt.k == KBF;
    if (!sfloat) {
      IOps si{st};
      __int128 v = si.v(a);
      if (!dfloat) {
        IOps di{dt};
        if (sat) v = v < di.lo() ? di.lo() : v > di.hi() ? di.hi() : v;
        return u64(v) & mask_of(dt);
      }
      const int m = mode < 0 ? 0 : mode;
      if (dt.k == KF && dt.bytes == 4)
        return bits(with_mode(m, [&] { volatile int64_t s = int64_t(v); volatile uint64_t u = uint64_t(v); return si.sg() ? float(s) : float(u); }));
      if (dt.k == KF) return bits(with_mode(m, [&] { volatile int64_t s = int64_t(v); volatile uint64_t u = uint64_t(v); return si.sg() ? double(s) : double(u); }));
      // f16/bf16 (rn): through a round-to-odd double (exact for these magnitudes or far past the range)
      double d = si.sg() ? double(int64_t(v)) : double(uint64_t(v));
      return dt.k == KH ? f16_bits(d) : bf16_bits(d);
    }
    double x = st.k == KH ? f16_val(a) : st.k == KBF ? bf16_val(a) : st.bytes == 4 ? double(F(a)) : D(a);
    if (fz && st.k == KF && st.bytes == 4) x = double(ftz(float(x)));
    if (!dfloat) {  // float -> integer: round to integral, NaN -> 0, saturate to the range
      if (std::isnan(x)) return 0;
      double r = mode == 4 ? std::nearbyint(x) : mode == 5 ? std::trunc(x) : mode == 6 ? std::floor(x) : std::ceil(x);
      IOps di{dt};
      if (r <= double(di.lo())) return u64(di.lo()) & mask_of(dt);
      if (r >= std::ldexp(1.0, 8 * dt.bytes - (di.sg() ? 1 : 0))) return u64(di.hi()) & mask_of(dt);
      return u64(__int128(r)) & mask_of(dt);
    }
    if (mode >= 4) x = mode == 4 ? std::nearbyint(x) : mode == 5 ? std::trunc(x) : mode == 6 ? std::floor(x) : std::ceil(x);
    const int m = mode < 0 || mode >= 4 ? 0 : mode;
    if (dt.k == KF && dt.bytes == 4) {
      float f = with_mode(m, [&] { volatile double y = x; return float(y); });
      if (fz) f = ftz(f);
      if (sat) f = sat01(f);
      return bits(f);
    }
    if (dt.k == KF) {
      if (sat) x = sat01(x);
      return bits(x);
    }
    if (sat) x = sat01(x);
    return dt.k == KH ? f16_bits(x) : bf16_bits(x);
  }
};

void add_cvt_cases(std::vector<Case>& cs) {
  const Ty ints[] = {kS8, kU8, kS16, kU16, kS32, kU32, kS64, kU64};
  auto add = [&](const Ty& dt, const Ty& st, int mode, bool sat, bool fz) {
    static const char* mn[] = {"rn", "rz", "rm", "rp", "rni", "rzi", "rmi", "rpi"};
    std::string op = "cvt";
    if (mode >= 0) op += std::string(".") + mn[mode];
    if (fz) op += ".ftz";
    if (sat) op += ".sat";
    op += std::string(".") + dt.name + "." + st.name;
    CvtRef r{dt, st, mode, sat, fz};
    cs.push_back({"cvt." + op.substr(4), op + " %d, %a;", dt, st, kPred, kPred,
                  lanewise([r](u64 a, u64, u64) -> std::optional<u64> { return r(a); }), Cmp::Float});
  };
  for (const Ty& d : ints)
    for (const Ty& s : ints)
      if (d.name != s.name) {
        add(d, s, -1, false, false);
        add(d, s, -1, true, false);
      }
  for (const Ty& d : ints) {
    for (int mode = 4; mode < 8; mode++) {
      add(d, kF32, mode, false, false);
      add(d, kF64, mode, false, false);
      if (mode == 5) add(d, kF32, mode, false, true);
    }
    add(d, kF16, 4, false, false);
    for (int mode = 0; mode < 4; mode++) {
      add(kF32, d, mode, false, false);
      add(kF64, d, mode, false, false);
    }
    add(kF16, d, 0, false, false);
  }
  // float <-> float
  add(kF64, kF32, -1, false, false);
  add(kF64, kF32, -1, false, true);
  for (int mode = 0; mode < 4; mode++) {
    add(kF32, kF64, mode, false, false);
    add(kF32, kF64, mode, false, true);
    add(kF32, kF64, mode, true, false);
  }
  for (int mode = 4; mode < 8; mode++) {
    add(kF32, kF32, mode, false, false);
    add(kF32, kF32, mode, false, true);
    add(kF64, kF64, mode, false, false);
  }
  add(kF32, kF32, -1, false, true);  // cvt.ftz.f32.f32: flush only
  add(kF32, kF32, -1, true, false);  // cvt.sat.f32.f32
  add(kF16, kF32, 0, false, false);
  add(kF16, kF64, 0, false, false);
  add(kF32, kF16, -1, false, false);
  add(kF64, kF16, -1, false, false);
  add(kBF16, kF32, 0, false, false);
  add(kF32, kBF16, -1, false, false);
}

// ---------------------------------------------------------------- setp / selp / set
template <class V>
bool fcmp(const std::string& c, V a, V b) {
  const bool un = std::isnan(a) || std::isnan(b);
  if (c == "num") return !un;
  if (c == "nan") return un;
  const bool u = c.size() == 3 && c.back() == 'u';
  const std::string base = u ? c.substr(0, 2) : c;
  if (un) return u;
  if (base == "eq") return a == b;
  if (base == "ne") return a != b;
  if (base == "lt") return a < b;
  if (base == "le") return a <= b;
  if (base == "gt") return a > b;
  return a >= b;
}

void add_cmp_cases(std::vector<Case>& cs) {
  const char* icmps[] = {"eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs"};
  for (const Ty* tp : {&kS16, &kU16, &kS32, &kU32, &kS64, &kU64, &kB16, &kB32, &kB64}) {
    const Ty& t = *tp;
    IOps o{t};
    for (const char* c : icmps) {
      const std::string cc = c;
      const bool unsigned_only = cc == "lo" || cc == "ls" || cc == "hi" || cc == "hs";
      if (t.k == KB && !(cc == "eq" || cc == "ne")) continue;
      if (unsigned_only && t.k != KU) continue;
      cs.push_back({"cmp.setp." + cc + "." + t.name, "setp." + cc + "." + t.name + " %pd, %a, %b;", kPred, t, t, kPred,
                    lanewise([o, cc](u64 a, u64 b, u64) {
                      __int128 x = o.v(a), y = o.v(b);
                      std::string k = cc == "lo" ? "lt" : cc == "ls" ? "le" : cc == "hi" ? "gt" : cc == "hs" ? "ge" : cc;
                      bool r = k == "eq" ? x == y : k == "ne" ? x != y : k == "lt" ? x < y : k == "le" ? x <= y : k == "gt" ? x > y : x >= y;
                      return u64(r);
                    })});
    }
  }
  const char* fcmps[] = {"eq", "ne", "lt", "le", "gt", "ge", "equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan"};
  for (const char* c : fcmps) {
    const std::string cc = c;
    cs.push_back({"cmp.setp." + cc + ".f32", "setp." + cc + ".f32 %pd, %a, %b;", kPred, kF32, kF32, kPred,
                  lanewise([cc](u64 a, u64 b, u64) { return u64(fcmp(cc, F(a), F(b))); })});
    cs.push_back({"cmp.setp." + cc + ".ftz.f32", "setp." + cc + ".ftz.f32 %pd, %a, %b;", kPred, kF32, kF32, kPred,
                  lanewise([cc](u64 a, u64 b, u64) { return u64(fcmp(cc, ftz(F(a)), ftz(F(b)))); })});
    cs.push_back({"cmp.setp." + cc + ".f64", "setp." + cc + ".f64 %pd, %a, %b;", kPred, kF64, kF64, kPred,
                  lanewise([cc](u64 a, u64 b, u64) { return u64(fcmp(cc, D(a), D(b))); })});
    cs.push_back({"cmp.set." + cc + ".u32.f32", "set." + cc + ".u32.f32 %d, %a, %b;", kU32, kF32, kF32, kPred,
                  lanewise([cc](u64 a, u64 b, u64) { return u64(fcmp(cc, F(a), F(b)) ? 0xffffffffu : 0u); })});
  }
  // setp with a combining predicate (from aux bit 33) and both destinations
  for (const char* bop : {"and", "or", "xor"}) {
    const std::string b = bop;
    for (bool negc : {false, true}) {
      auto comb = [b](bool x, bool c) { return b == "and" ? (x && c) : b == "or" ? (x || c) : (x != c); };
      cs.push_back({"cmp.setp.lt." + b + (negc ? ".not" : "") + ".s32",
                    "setp.lt." + b + ".s32 %pd|%pq, %a, %b, " + (negc ? "!" : "") + "%pa;", kPred, kS32, kS32, kPred,
                    [comb, negc](const std::vector<Lane>& in, size_t i) -> std::optional<u64> {
                      bool c = ((in[i].aux >> 33) & 1) != negc;
                      return u64(comb(int32_t(in[i].a) < int32_t(in[i].b), c));
                    }});
      cs.push_back({"cmp.setp.ltq." + b + (negc ? ".not" : "") + ".f32",
                    "setp.lt." + b + ".f32 %pq|%pd, %a, %b, " + (negc ? "!" : "") + "%pa;", kPred, kF32, kF32, kPred,
                    [comb, negc](const std::vector<Lane>& in, size_t i) -> std::optional<u64> {
                      bool c = ((in[i].aux >> 33) & 1) != negc;
                      return u64(comb(!fcmp("lt", F(in[i].a), F(in[i].b)), c));
                    }});
    }
  }
  for (const Ty* tp : {&kB16, &kB32, &kB64, &kF32, &kF64, &kS32, &kU64}) {
    const Ty& t = *tp;
    cs.push_back({std::string("cmp.selp.") + t.name, std::string("selp.") + t.name + " %d, %a, %b, %pa;", t, t, t, kPred,
                  [t](const std::vector<Lane>& in, size_t i) -> std::optional<u64> {
                    return ((in[i].aux >> 33) & 1) ? in[i].a & mask_of(t) : in[i].b & mask_of(t);
                  }});
  }
}

// ---------------------------------------------------------------- warp collectives
// Each warp gets a branch pattern (aux bit 32: the lane skips the instruction), the
// membermask of the lanes that run it (aux low bits, the same in every lane of the
// warp), and a warp-uniform shuffle lane operand b and clamp operand c.
void warp_inputs(std::vector<Lane>& in, std::mt19937_64& rng, bool shfl) {
  const uint32_t patterns[] = {0xffffffffu, 0x0000ffffu, 0xffff0000u, 0x000000ffu, 0x55555555u, 0x80000001u, 0x00000001u};
  for (size_t w = 0; w < in.size() / 32; w++) {
    uint32_t act = w < 7 * 8 ? patterns[w % 7] : uint32_t(rng()) | 1u;
    if (w % 3 == 0 && w >= 7 * 8) act = 0xffffffffu;
    uint32_t b = uint32_t(rng() % 40), c;
    switch (rng() % 4) {
      case 0: c = 0x1f; break;                             // whole warp, clamp 31
      case 1: c = 0; break;                                // shfl.up style
      case 2: { uint32_t width = 1u << (rng() % 6); c = ((32 - width) << 8) | (width - 1); break; }  // width segments
      default: c = uint32_t(rng()) & 0x1f1f; break;
    }
    for (int l = 0; l < 32; l++) {
      Lane& x = in[w * 32 + size_t(l)];
      x.a = (rng() % 3 == 0) ? (rng() % 4) : rng();  // repeated values for match
      if (!shfl && w % 5 == 0) x.a = 7;           // all equal
      x.b = b;
      x.c = c;
      x.aux = act | (u64((act >> l & 1) == 0) << 32) | (u64(rng() & 1) << 33);
      if (w % 4 == 1) x.aux = (x.aux & ~(1ull << 33)) | (u64(1) << 33);  // all true
    }
  }
}

void add_warp_cases(std::vector<Case>& cs) {
  auto active = [](const std::vector<Lane>& in, size_t i) { return ((in[i].aux >> 32) & 1) == 0; };
  const char* modes[] = {"up", "down", "bfly", "idx"};
  for (int md = 0; md < 4; md++) {
    const std::string mode = modes[md];
    for (bool pred : {false, true}) {
      Case c{"warp.shfl." + mode + (pred ? ".p" : ""),
             pred ? "shfl.sync." + mode + ".b32 %e|%pd, %a, %b, %c, %m;" : "shfl.sync." + mode + ".b32 %d, %a, %b, %c, %m;",
             pred ? kPred : kB32, kB32, kU32, kU32,
             [=](const std::vector<Lane>& in, size_t i) -> std::optional<u64> {
               if (!active(in, i)) return u64(0);
               const size_t base = i & ~size_t(31);
               const int lane = int(i & 31);
               const uint32_t b = uint32_t(in[i].b) & 31, cv = uint32_t(in[i].c);
               const int seg = int((cv >> 8) & 31), clamp = int(cv & 31);
               const int minl = lane & seg, maxl = minl | (clamp & ~seg);
               int j;
               bool pv;
               switch (md) {
                 case 0: j = lane - int(b); pv = j >= maxl; break;
                 case 1: j = lane + int(b); pv = j <= maxl; break;
                 case 2: j = lane ^ int(b); pv = j <= maxl; break;
                 default: j = minl | (int(b) & ~seg); pv = j <= maxl; break;
               }
               if (pred) return u64(pv);
               if (!pv) j = lane;
               // a source lane outside the branch gives 0 (see ptx_semantics_test.cpp)
               return active(in, base + size_t(j)) ? in[base + size_t(j)].a & 0xffffffffu : 0u;
             },
             Cmp::Exact, 0, true, [](std::vector<Lane>& in, std::mt19937_64& r) { warp_inputs(in, r, true); }};
      cs.push_back(c);
    }
  }
  auto ballot = [active](const std::vector<Lane>& in, size_t i, bool neg) {
    uint32_t bl = 0, m = 0;
    const size_t base = i & ~size_t(31);
    for (size_t l = 0; l < 32; l++)
      if (active(in, base + l)) {
        m |= 1u << l;
        if ((((in[base + l].aux >> 33) & 1) != 0) != neg) bl |= 1u << l;
      }
    return std::pair<uint32_t, uint32_t>{bl, m};
  };
  auto gen = [](std::vector<Lane>& in, std::mt19937_64& r) { warp_inputs(in, r, false); };
  for (bool neg : {false, true}) {
    const std::string p = neg ? "!%pa" : "%pa";
    const std::string sfx = neg ? ".not" : "";
    cs.push_back({"warp.vote.ballot" + sfx, "vote.sync.ballot.b32 %d, " + p + ", %m;", kB32, kPred, kPred, kPred,
                  [=](const std::vector<Lane>& in, size_t i) -> std::optional<u64> {
                    if (!active(in, i)) return u64(0);
                    return u64(ballot(in, i, neg).first);
                  }, Cmp::Exact, 0, true, gen});
    for (const char* v : {"all", "any", "uni"}) {
      const std::string vv = v;
      cs.push_back({"warp.vote." + vv + sfx, "vote.sync." + vv + ".pred %pd, " + p + ", %m;", kPred, kPred, kPred, kPred,
                    [=](const std::vector<Lane>& in, size_t i) -> std::optional<u64> {
                      if (!active(in, i)) return u64(0);
                      auto [bl, m] = ballot(in, i, neg);
                      return u64(vv == "all" ? bl == m : vv == "any" ? bl != 0 : (bl == 0 || bl == m));
                    }, Cmp::Exact, 0, true, gen});
    }
  }
  cs.push_back({"warp.activemask", "activemask.b32 %d;", kB32, kPred, kPred, kPred,
                [=](const std::vector<Lane>& in, size_t i) -> std::optional<u64> {
                  if (!active(in, i)) return u64(0);
                  return u64(ballot(in, i, false).second);
                }, Cmp::Exact, 0, true, gen});
  for (const char* op : {"add", "min", "max", "and", "or", "xor"})
    for (const char* ty : {"u32", "s32"}) {
      const std::string o = op, t = ty;
      if ((o == "and" || o == "or" || o == "xor") && t == "s32") continue;
      cs.push_back({"warp.redux." + o + "." + t, "redux.sync." + o + "." + (o == "and" || o == "or" || o == "xor" ? "b32" : t) + " %d, %a, %m;",
                    kB32, kB32, kPred, kPred,
                    [=](const std::vector<Lane>& in, size_t i) -> std::optional<u64> {
                      if (!active(in, i)) return u64(0);
                      const size_t base = i & ~size_t(31);
                      bool first = true;
                      uint32_t acc = 0;
                      for (size_t l = 0; l < 32; l++) {
                        if (!active(in, base + l)) continue;
                        uint32_t x = uint32_t(in[base + l].a);
                        if (first) { acc = x; first = false; continue; }
                        if (o == "add") acc += x;
                        else if (o == "min") acc = t == "s32" ? uint32_t(std::min(int32_t(acc), int32_t(x))) : std::min(acc, x);
                        else if (o == "max") acc = t == "s32" ? uint32_t(std::max(int32_t(acc), int32_t(x))) : std::max(acc, x);
                        else if (o == "and") acc &= x;
                        else if (o == "or") acc |= x;
                        else acc ^= x;
                      }
                      return u64(acc);
                    }, Cmp::Exact, 0, true, gen});
    }
  for (bool all : {false, true}) {
    cs.push_back({std::string("warp.match.") + (all ? "all" : "any"),
                  std::string("match.") + (all ? "all" : "any") + ".sync.b32 %d, %a, %m;", kB32, kB32, kPred, kPred,
                  [=](const std::vector<Lane>& in, size_t i) -> std::optional<u64> {
                    if (!active(in, i)) return u64(0);
                    const size_t base = i & ~size_t(31);
                    uint32_t same = 0, m = 0;
                    for (size_t l = 0; l < 32; l++)
                      if (active(in, base + l)) {
                        m |= 1u << l;
                        if (uint32_t(in[base + l].a) == uint32_t(in[i].a)) same |= 1u << l;
                      }
                    return all ? u64(same == m ? m : 0) : u64(same);
                  }, Cmp::Exact, 0, true, gen});
  }
}

std::vector<Case> build_cases() {
  std::vector<Case> cs;
  add_int_cases(cs);
  add_bit_cases(cs);
  add_float_cases<float>(cs);
  add_float_cases<double>(cs);
  add_half_cases(cs);
  add_cvt_cases(cs);
  add_cmp_cases(cs);
  add_warp_cases(cs);
  return cs;
}

}  // namespace
