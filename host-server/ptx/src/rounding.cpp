// Directed-rounding float operations (.rz/.rm/.rp) and half/bfloat16 conversions.
// Compiled with -frounding-math so the host FPU rounding mode set here is honoured.
#include <cfenv>
#include <cmath>

#include "cvt.hpp"
#include "internal.hpp"

namespace wh::ptx::detail {

uint16_t to_narrow(double v, int ebits, int mbits, int mode) {
  uint64_t x = std::bit_cast<uint64_t>(v);
  uint16_t sign = uint16_t((x >> 63) << (ebits + mbits));
  const uint16_t inf = uint16_t(((1u << ebits) - 1) << mbits);
  const uint16_t maxf = uint16_t(inf - 1);
  if (std::isnan(v)) return uint16_t(sign | inf | (1u << (mbits - 1)) | ((1u << (mbits - 1)) - 1));
  bool neg = x >> 63;
  if (std::isinf(v)) return sign | inf;
  if (v == 0) return sign;
  int e = int((x >> 52) & 0x7ff);
  uint64_t m = x & ((1ull << 52) - 1);
  if (e == 0) {  // double subnormal: far below any narrow format
    e = 1;
  } else {
    m |= 1ull << 52;
  }
  int exp = e - 1023;  // value = m * 2^(exp-52)
  const int bias = (1 << (ebits - 1)) - 1;
  const int emin = 1 - bias;
  int shift = 52 - mbits;  // normal case
  if (exp < emin) shift += emin - exp;
  uint64_t r, rem, half;
  if (shift >= 64) {
    r = 0;
    rem = m;
    half = ~0ull;  // remainder is always below half
  } else {
    r = m >> shift;
    rem = m & ((1ull << shift) - 1);
    half = 1ull << (shift - 1);
  }
  bool up = false;
  switch (mode) {
    case 0: up = rem > half || (rem == half && (r & 1)); break;
    case 1: up = false; break;
    case 2: up = neg && rem != 0; break;
    case 3: up = !neg && rem != 0; break;
  }
  if (up) ++r;
  uint64_t bits;
  if (exp < emin) {
    bits = r;  // subnormal (a carry into bit mbits correctly produces the smallest normal)
  } else {
    bits = (uint64_t(exp - emin) << mbits) + r;  // r carries the hidden bit -> +1 on the exponent field
  }
  if (bits >= inf) {
    bool to_inf = mode == 0 || (mode == 2 && neg) || (mode == 3 && !neg);
    return sign | (to_inf ? inf : maxf);
  }
  return uint16_t(sign | bits);
}

float half_to_float(uint16_t h) {
  uint32_t s = uint32_t(h >> 15) << 31, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e == 0x1f) return std::bit_cast<float>(s | 0x7f800000u | (m << 13));
  if (e == 0) {
    float f = std::ldexp(float(m), -24);
    return s ? -f : f;
  }
  return std::bit_cast<float>(s | ((e + 112) << 23) | (m << 13));
}

namespace {
struct RoundGuard {
  int old;
  explicit RoundGuard(int mode) : old(std::fegetround()) {
    std::fesetround(mode == 1 ? FE_TOWARDZERO : mode == 2 ? FE_DOWNWARD : mode == 3 ? FE_UPWARD : FE_TONEAREST);
  }
  ~RoundGuard() { std::fesetround(old); }
};
template <class V>
V getv(const uint64_t* r, int l) {
  if constexpr (std::is_same_v<V, float>) return std::bit_cast<float>(uint32_t(r[l]));
  else return std::bit_cast<double>(r[l]);
}
template <class V>
uint64_t putv(V v) {
  if constexpr (std::is_same_v<V, float>) return std::bit_cast<uint32_t>(v);
  else return std::bit_cast<uint64_t>(v);
}
template <class V>
void dir_op(Ctx& c, const Inst& I, uint32_t m) {
  uint64_t* D = c.dst(I.d[0]);
  const uint64_t* A = c.src(I.s[0]);
  const uint64_t* B = I.s[1] != NOREG ? c.src(I.s[1]) : A;
  const uint64_t* C = I.s[2] != NOREG ? c.src(I.s[2]) : A;
  const bool ftz = std::is_same_v<V, float> && (I.flags & 1), sat = I.flags & 2;
  auto in = [&](const uint64_t* R, int l) {
    V v = getv<V>(R, l);
    if (ftz && std::fpclassify(v) == FP_SUBNORMAL) v = std::copysign(V(0), v);
    return v;
  };
  RoundGuard g(int(I.a1 & 3));
  for_lanes(m, [&](int l) {
    volatile V a = in(A, l), b = in(B, l), cc = in(C, l);
    V r;
    switch (I.a0) {
      case 0: r = a + b; break;
      case 1: r = a - b; break;
      case 2: r = a * b; break;
      case 3: r = std::fma(V(a), V(b), V(cc)); break;
      case 4: r = a / b; break;
      case 5: r = std::sqrt(V(a)); break;
      default: r = V(1) / a; break;
    }
    if (ftz && std::fpclassify(r) == FP_SUBNORMAL) r = std::copysign(V(0), r);
    if (sat) r = std::isnan(r) ? V(0) : std::fmin(std::fmax(r, V(0)), V(1));
    D[l] = putv<V>(r);
  });
}
}  // namespace

void h_f32_dir(Ctx& c, const Inst& I, uint32_t m) { dir_op<float>(c, I, m); }
void h_f64_dir(Ctx& c, const Inst& I, uint32_t m) { dir_op<double>(c, I, m); }

void h_cvt_generic(Ctx& c, const Inst& I, uint32_t m) {
  uint64_t* Dr = c.dst(I.d[0]);
  const uint64_t* A = c.src(I.s[0]);
  Ty dt = Ty(I.a0), st = Ty(I.a1 & 0xff);
  int mode = (I.a1 >> 8) & 0xff;
  bool sat = (I.a1 >> 16) & 1, ftz = (I.a1 >> 17) & 1;
  RoundGuard g(mode & 3);
  for_lanes(m, [&](int l) { Dr[l] = cvt_lane(A[l], dt, st, mode, sat, ftz); });
}

}  // namespace wh::ptx::detail
