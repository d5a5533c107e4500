// Instruction handlers: each executes one decoded instruction for all lanes in `m`.
// Included only by decode.cpp (internal linkage).
#pragma once
#include <atomic>
#include <cmath>
#include <limits>
#include <type_traits>

#include "cvt.hpp"
#include "internal.hpp"

namespace wh::ptx::detail {
namespace {

template <class V>
inline V get(const uint64_t* r, int l) {
  if constexpr (std::is_same_v<V, float>) return std::bit_cast<float>(uint32_t(r[l]));
  else if constexpr (std::is_same_v<V, double>) return std::bit_cast<double>(r[l]);
  else return static_cast<V>(r[l]);
}
template <class V>
inline uint64_t put(V v) {
  if constexpr (std::is_same_v<V, float>) return std::bit_cast<uint32_t>(v);
  else if constexpr (std::is_same_v<V, double>) return std::bit_cast<uint64_t>(v);
  else if constexpr (std::is_signed_v<V>) return uint64_t(int64_t(v));
  else return uint64_t(v);
}
template <class V>
using U = std::make_unsigned_t<V>;

// ---------------- functors ----------------
struct OAdd { template <class V> static V f(V a, V b) { if constexpr (std::is_integral_v<V>) return V(U<V>(a) + U<V>(b)); else return a + b; } };
struct OSub { template <class V> static V f(V a, V b) { if constexpr (std::is_integral_v<V>) return V(U<V>(a) - U<V>(b)); else return a - b; } };
struct OMul { template <class V> static V f(V a, V b) { if constexpr (std::is_integral_v<V>) return V(U<V>(a) * U<V>(b)); else return a * b; } };
struct OMulHi {
  template <class V> static V f(V a, V b) {
    if constexpr (sizeof(V) == 8) {
      if constexpr (std::is_signed_v<V>) return V((__int128(a) * __int128(b)) >> 64);
      else return V((unsigned __int128)a * (unsigned __int128)b >> 64);
    } else if constexpr (sizeof(V) == 4) {
      if constexpr (std::is_signed_v<V>) return V((int64_t(a) * int64_t(b)) >> 32);
      else return V((uint64_t(a) * uint64_t(b)) >> 32);
    } else {
      if constexpr (std::is_signed_v<V>) return V((int32_t(a) * int32_t(b)) >> 16);
      else return V((uint32_t(a) * uint32_t(b)) >> 16);
    }
  }
};
// fmin/fmax in line (glibc's order of tests: a NaN operand yields the other one), no libm call.
struct OMin {
  template <class V> static V f(V a, V b) {
    if constexpr (std::is_floating_point_v<V>) return __builtin_islessequal(a, b) ? a : __builtin_isgreater(a, b) ? b : (b != b ? a : b);
    else return a < b ? a : b;
  }
};
struct OMax {
  template <class V> static V f(V a, V b) {
    if constexpr (std::is_floating_point_v<V>) return __builtin_isgreaterequal(a, b) ? a : __builtin_isless(a, b) ? b : (b != b ? a : b);
    else return a > b ? a : b;
  }
};
// min/max .NaN: a NaN operand gives the canonical NaN (f32: 0x7fffffff).
template <class V>
V canonical_nan() {
  if constexpr (std::is_same_v<V, float>) return std::bit_cast<float>(0x7fffffffu);
  else return std::numeric_limits<V>::quiet_NaN();
}
struct OMinNaN {
  template <class V> static V f(V a, V b) { return a != a || b != b ? canonical_nan<V>() : OMin::f<V>(a, b); }
};
struct OMaxNaN {
  template <class V> static V f(V a, V b) { return a != a || b != b ? canonical_nan<V>() : OMax::f<V>(a, b); }
};
struct ODiv {
  template <class V> static V f(V a, V b) {
    if constexpr (std::is_floating_point_v<V>) return a / b;
    else {
      if (b == 0) return V(~U<V>(0));
      if constexpr (std::is_signed_v<V>) if (a == std::numeric_limits<V>::min() && b == V(-1)) return a;
      return V(a / b);
    }
  }
};
struct ORem {
  template <class V> static V f(V a, V b) {
    if (b == 0) return a;
    if constexpr (std::is_signed_v<V>) if (a == std::numeric_limits<V>::min() && b == V(-1)) return 0;
    return V(a % b);
  }
};
// add.sat.s32 / sub.sat.s32: the exact result clamped to the s32 range
struct OAddSat { template <class V> static V f(V a, V b) { int64_t r = int64_t(a) + int64_t(b); return V(r < INT32_MIN ? INT32_MIN : r > INT32_MAX ? INT32_MAX : r); } };
struct OSubSat { template <class V> static V f(V a, V b) { int64_t r = int64_t(a) - int64_t(b); return V(r < INT32_MIN ? INT32_MIN : r > INT32_MAX ? INT32_MAX : r); } };
struct OAnd { template <class V> static V f(V a, V b) { return V(a & b); } };
struct OOr { template <class V> static V f(V a, V b) { return V(a | b); } };
struct OXor { template <class V> static V f(V a, V b) { return V(a ^ b); } };
struct OCopysign { template <class V> static V f(V a, V b) { return std::copysign(b, a); } };
struct OMul24 {
  template <class V> static V f(V a, V b) {  // .lo variant: low 32 bits of 24x24 product
    if constexpr (std::is_signed_v<V>) {
      int64_t x = int32_t(uint32_t(a) << 8) >> 8, y = int32_t(uint32_t(b) << 8) >> 8;
      return V(int32_t(uint32_t(uint64_t(x * y))));
    } else {
      return V(uint32_t((uint64_t(a & 0xffffff) * uint64_t(b & 0xffffff))));
    }
  }
};

struct UNeg { template <class V> static V f(V a) { if constexpr (std::is_integral_v<V>) return V(U<V>(0) - U<V>(a)); else return -a; } };
struct UAbs {
  template <class V> static V f(V a) {
    if constexpr (std::is_floating_point_v<V>) return std::fabs(a);
    else if constexpr (std::is_signed_v<V>) return a < 0 ? V(U<V>(0) - U<V>(a)) : a;
    else return a;
  }
};
struct UNot { template <class V> static V f(V a) { return V(~a); } };
struct UCnot { template <class V> static V f(V a) { return V(a == 0 ? 1 : 0); } };
struct USqrt { template <class V> static V f(V a) { return std::sqrt(a); } };
struct URcp { template <class V> static V f(V a) { return V(1) / a; } };
struct URsqrt { template <class V> static V f(V a) { return V(1) / std::sqrt(a); } };
struct USin { template <class V> static V f(V a) { return std::sin(a); } };
struct UCos { template <class V> static V f(V a) { return std::cos(a); } };
struct UEx2 { template <class V> static V f(V a) { return std::exp2(a); } };
struct ULg2 { template <class V> static V f(V a) { return std::log2(a); } };
struct UTanh { template <class V> static V f(V a) { return std::tanh(a); } };

template <class V>
inline uint32_t popc_(V a) { return uint32_t(std::popcount(U<V>(a))); }

// ---------------- generic shapes ----------------
void h_nop(Ctx&, const Inst&, uint32_t) {}

void h_mov(Ctx& c, const Inst& I, uint32_t m) {
  uint64_t* D = c.dst(I.d[0]);
  const uint64_t* A = c.src(I.s[0]);
  for_lanes(m, [&](int l) { D[l] = A[l]; });
}

template <class V, class Op>
void h_bin(Ctx& c, const Inst& I, uint32_t m) {
  uint64_t* D = c.dst(I.d[0]);
  const uint64_t* A = c.src(I.s[0]);
  const uint64_t* B = c.src(I.s[1]);
  for_lanes(m, [&](int l) { D[l] = put<V>(Op::template f<V>(get<V>(A, l), get<V>(B, l))); });
}

// Two 16-bit integers packed in a 32-bit register (min/max .s16x2/.u16x2,
// optionally .relu: a negative result becomes 0), halves computed apart.
template <class H, class Op, bool Relu>
void h_bin16x2(Ctx& c, const Inst& I, uint32_t m) {
  uint64_t* D = c.dst(I.d[0]);
  const uint64_t* A = c.src(I.s[0]);
  const uint64_t* B = c.src(I.s[1]);
  auto half = [](uint32_t a, uint32_t b) {
    H r = Op::template f<H>(H(uint16_t(a)), H(uint16_t(b)));
    if constexpr (Relu) r = r < H(0) ? H(0) : r;
    return uint32_t(uint16_t(r));
  };
  for_lanes(m, [&](int l) {
    const uint32_t a = uint32_t(A[l]), b = uint32_t(B[l]);
    D[l] = half(a, b) | (half(a >> 16, b >> 16) << 16);
  });
}

// Scalar video shifts, vshl/vshr.dtype.atype.btype{.sat}.mode{.op2} d, a, b{, c}
// (no operand selectors): a and b widened by their types, the shift amount
// clamped to 32 (.clamp) or taken mod 32 (.wrap), the shift done on the wide
// value (arithmetic for a signed a), saturated into dtype under .sat, then
// c added, or the min or max of the two taken; d keeps the low 32 bits.
// a0 bits: 1 dtype signed, 2 atype signed, 4 btype signed, 8 .sat, 16 .wrap,
// 32 shift left; a1: 0 no op2, 1 add, 2 min, 3 max.
inline void h_vshift(Ctx& c, const Inst& I, uint32_t m) {
  uint64_t* D = c.dst(I.d[0]);
  const uint64_t* A = c.src(I.s[0]);
  const uint64_t* B = c.src(I.s[1]);
  const uint64_t* C = I.a1 ? c.src(I.s[2]) : nullptr;
  const bool ds = I.a0 & 1, as = I.a0 & 2, bs = I.a0 & 4, sat = I.a0 & 8, wrap = I.a0 & 16, left = I.a0 & 32;
  auto widen = [](uint64_t v, bool sgn) { return sgn ? int64_t(int32_t(uint32_t(v))) : int64_t(uint32_t(v)); };
  for_lanes(m, [&](int l) {
    const int64_t a = widen(A[l], as), b = widen(B[l], bs);
    const int64_t n = wrap ? (b & 31) : (b < 0 ? 0 : b > 32 ? 32 : b);  // a negative clamped amount shifts nothing
    int64_t t = left ? int64_t(uint64_t(a) << n) : (a >> n);
    if (sat) t = ds ? std::clamp<int64_t>(t, INT32_MIN, INT32_MAX) : std::clamp<int64_t>(t, 0, UINT32_MAX);
    if (C) {
      const int64_t cv = widen(C[l], ds), tv = widen(uint64_t(t), ds);
      t = I.a1 == 1 ? tv + cv : I.a1 == 2 ? std::min(tv, cv) : std::max(tv, cv);
    }
    D[l] = uint32_t(uint64_t(t));
  });
}

// min/max.relu.s32: the result clamped at 0.
template <class Op>
void h_relu_s32(Ctx& c, const Inst& I, uint32_t m) {
  uint64_t* D = c.dst(I.d[0]);
  const uint64_t* A = c.src(I.s[0]);
  const uint64_t* B = c.src(I.s[1]);
  for_lanes(m, [&](int l) {
    int32_t r = Op::template f<int32_t>(get<int32_t>(A, l), get<int32_t>(B, l));
    D[l] = put<int32_t>(r < 0 ? 0 : r);
  });
}

template <class V, class Op>
void h_un(Ctx& c, const Inst& I, uint32_t m) {
  uint64_t* D = c.dst(I.d[0]);
  const uint64_t* A = c.src(I.s[0]);
  for_lanes(m, [&](int l) { D[l] = put<V>(Op::template f<V>(get<V>(A, l))); });
}

// f32 with .ftz / .sat options
template <bool FTZ, bool SAT>
inline float fpost(float r) {
  if constexpr (FTZ) r = ftz32(r);
  if constexpr (SAT) r = std::isnan(r) ? 0.0f : std::fmin(std::fmax(r, 0.0f), 1.0f);
  return r;
}
template <bool FTZ>
inline float fin(const uint64_t* r, int l) {
  float v = get<float>(r, l);
  if constexpr (FTZ) v = ftz32(v);
  return v;
}
// .ftz forms, full warp: compute the plain IEEE result of all 32 lanes into a temporary (the
// same vectorised loop as the plain form) while OR-ing a denormal test over inputs and
// results; only a warp that actually met a denormal is redone lane by lane with the exact
// flush. Denormals are rare in practice, so .ftz costs one extra test per lane.
template <int N, class Plain, class Exact>
// Always inlined: out of line (GCC's choice once parser.cpp grew) the full-warp
// loop is not vectorised and div.ftz ran at half the speed of plain div.
[[gnu::always_inline]] inline void ftz_lanes(uint64_t* D, const uint64_t* const (&in)[N], uint32_t m, Plain plain, Exact exact) {
  if (m == 0xffffffffu) {
    uint32_t t[32], bad = 0;
    for (int l = 0; l < 32; ++l) {
      t[l] = plain(l);
      bad |= denorm32(t[l]);
      for (int k = 0; k < N; ++k) bad |= denorm32(in[k][l]);
    }
    if (!bad) {
      for (int l = 0; l < 32; ++l) D[l] = t[l];
      return;
    }
  }
  for_lanes(m, [&](int l) { D[l] = exact(l); });
}
template <class Op, bool FTZ, bool SAT>
void h_fbin(Ctx& c, const Inst& I, uint32_t m) {
  uint64_t* D = c.dst(I.d[0]);
  const uint64_t* A = c.src(I.s[0]);
  const uint64_t* B = c.src(I.s[1]);
  auto exact = [&](int l) { return put<float>(fpost<FTZ, SAT>(Op::template f<float>(fin<FTZ>(A, l), fin<FTZ>(B, l)))); };
  if constexpr (FTZ && !SAT) {
    const uint64_t* const in[2] = {A, B};
    ftz_lanes<2>(D, in, m, [&](int l) { return std::bit_cast<uint32_t>(Op::template f<float>(get<float>(A, l), get<float>(B, l))); }, exact);
  } else {
    for_lanes(m, [&](int l) { D[l] = exact(l); });
  }
}
template <class Op, bool FTZ, bool SAT>
void h_fun(Ctx& c, const Inst& I, uint32_t m) {
  uint64_t* D = c.dst(I.d[0]);
  const uint64_t* A = c.src(I.s[0]);
  auto exact = [&](int l) { return put<float>(fpost<FTZ, SAT>(Op::template f<float>(fin<FTZ>(A, l)))); };
  // a libm call per lane dominates ex2/lg2/sin/cos/tanh: flushing in line is as cheap there
  constexpr bool libm = std::is_same_v<Op, USin> || std::is_same_v<Op, UCos> || std::is_same_v<Op, UEx2> ||
                        std::is_same_v<Op, ULg2> || std::is_same_v<Op, UTanh>;
  if constexpr (FTZ && !SAT && libm) {
    // the plain call; a denormal input (rare, predictable branch) is redone from signed zero
    for_lanes(m, [&](int l) {
      float x = get<float>(A, l);
      if (denorm32(A[l])) [[unlikely]] x = ftz32(x);
      if constexpr (std::is_same_v<Op, ULg2>) D[l] = put<float>(Op::template f<float>(x));  // |log2(normal)| >= 2^-24: never denormal
      else D[l] = put<float>(ftz32(Op::template f<float>(x)));
    });
  } else if constexpr (FTZ && !SAT) {
    const uint64_t* const in[1] = {A};
    ftz_lanes<1>(D, in, m, [&](int l) { return std::bit_cast<uint32_t>(Op::template f<float>(get<float>(A, l))); }, exact);
  } else {
    for_lanes(m, [&](int l) { D[l] = exact(l); });
  }
}
template <bool FTZ, bool SAT>
void h_ffma(Ctx& c, const Inst& I, uint32_t m) {
  uint64_t* D = c.dst(I.d[0]);
  const uint64_t* A = c.src(I.s[0]);
  const uint64_t* B = c.src(I.s[1]);
  const uint64_t* C = c.src(I.s[2]);
  for_lanes(m, [&](int l) { D[l] = put<float>(fpost<FTZ, SAT>(std::fma(fin<FTZ>(A, l), fin<FTZ>(B, l), fin<FTZ>(C, l)))); });
}
// Hardware FMA versions (selected at decode time when the host CPU has FMA): no libm call per lane.
#if defined(__x86_64__)
[[gnu::target("fma")]] void h_ffma_hw(Ctx& c, const Inst& I, uint32_t m) {
  uint64_t* D = c.dst(I.d[0]);
  const uint64_t* A = c.src(I.s[0]);
  const uint64_t* B = c.src(I.s[1]);
  const uint64_t* C = c.src(I.s[2]);
  if (m == 0xffffffffu) {
    for (int l = 0; l < 32; ++l)
      D[l] = std::bit_cast<uint32_t>(__builtin_fmaf(std::bit_cast<float>(uint32_t(A[l])), std::bit_cast<float>(uint32_t(B[l])),
                                                    std::bit_cast<float>(uint32_t(C[l]))));
  } else {
    while (m) {
      int l = std::countr_zero(m);
      m &= m - 1;
      D[l] = std::bit_cast<uint32_t>(__builtin_fmaf(std::bit_cast<float>(uint32_t(A[l])), std::bit_cast<float>(uint32_t(B[l])),
                                                    std::bit_cast<float>(uint32_t(C[l]))));
    }
  }
}
// fma.rn.ftz.f32: the hardware FMA over the warp, then the denormal test (see ftz_lanes).
[[gnu::target("fma")]] void h_ffma_ftz_hw(Ctx& c, const Inst& I, uint32_t m) {
  uint64_t* D = c.dst(I.d[0]);
  const uint64_t* A = c.src(I.s[0]);
  const uint64_t* B = c.src(I.s[1]);
  const uint64_t* C = c.src(I.s[2]);
  if (m == 0xffffffffu) {
    uint32_t t[32], bad = 0;
    for (int l = 0; l < 32; ++l) {
      t[l] = std::bit_cast<uint32_t>(__builtin_fmaf(std::bit_cast<float>(uint32_t(A[l])), std::bit_cast<float>(uint32_t(B[l])),
                                                    std::bit_cast<float>(uint32_t(C[l]))));
      bad |= denorm32(t[l]) | denorm32(A[l]) | denorm32(B[l]) | denorm32(C[l]);
    }
    if (!bad) {
      for (int l = 0; l < 32; ++l) D[l] = t[l];
      return;
    }
  }
  while (m) {
    int l = std::countr_zero(m);
    m &= m - 1;
    D[l] = std::bit_cast<uint32_t>(ftz32(__builtin_fmaf(ftz32(std::bit_cast<float>(uint32_t(A[l]))), ftz32(std::bit_cast<float>(uint32_t(B[l]))),
                                                        ftz32(std::bit_cast<float>(uint32_t(C[l]))))));
  }
}
[[gnu::target("fma")]] void h_dfma_hw(Ctx& c, const Inst& I, uint32_t m) {
  uint64_t* D = c.dst(I.d[0]);
  const uint64_t* A = c.src(I.s[0]);
  const uint64_t* B = c.src(I.s[1]);
  const uint64_t* C = c.src(I.s[2]);
  while (m) {
    int l = std::countr_zero(m);
    m &= m - 1;
    D[l] = std::bit_cast<uint64_t>(__builtin_fma(std::bit_cast<double>(A[l]), std::bit_cast<double>(B[l]), std::bit_cast<double>(C[l])));
  }
}
inline bool host_has_fma() {
  static const bool v = __builtin_cpu_supports("fma");
  return v;
}
#else
inline bool host_has_fma() { return false; }
#endif

template <bool SAT>
void h_dfma(Ctx& c, const Inst& I, uint32_t m) {
  uint64_t* D = c.dst(I.d[0]);
  const uint64_t* A = c.src(I.s[0]);
  const uint64_t* B = c.src(I.s[1]);
  const uint64_t* C = c.src(I.s[2]);
  for_lanes(m, [&](int l) {
    double r = std::fma(get<double>(A, l), get<double>(B, l), get<double>(C, l));
    if constexpr (SAT) r = std::isnan(r) ? 0.0 : std::fmin(std::fmax(r, 0.0), 1.0);
    D[l] = put<double>(r);
  });
}
template <class V>
void h_madlo(Ctx& c, const Inst& I, uint32_t m) {
  uint64_t* D = c.dst(I.d[0]);
  const uint64_t* A = c.src(I.s[0]);
  const uint64_t* B = c.src(I.s[1]);
  const uint64_t* C = c.src(I.s[2]);
  for_lanes(m, [&](int l) { D[l] = put<V>(V(U<V>(get<V>(A, l)) * U<V>(get<V>(B, l)) + U<V>(get<V>(C, l)))); });
}
template <class V>
void h_madhi(Ctx& c, const Inst& I, uint32_t m) {
  uint64_t* D = c.dst(I.d[0]);
  const uint64_t* A = c.src(I.s[0]);
  const uint64_t* B = c.src(I.s[1]);
  const uint64_t* C = c.src(I.s[2]);
  for_lanes(m, [&](int l) { D[l] = put<V>(V(U<V>(OMulHi::f<V>(get<V>(A, l), get<V>(B, l))) + U<V>(get<V>(C, l)))); });
}
// Extended-precision arithmetic (add.cc, addc, sub.cc, subc, mad.lo/hi.cc,
// madc): the carry flag CC.CF lives per lane in a hidden register of the
// function (I.s[3] read, I.d[1] written, NOREG when the form does not).
// a0: 0 add, 1 sub (the flag is the borrow), 2 mad.lo, 3 mad.hi.
template <class V>
void h_carry(Ctx& c, const Inst& I, uint32_t m) {
  static_assert(std::is_unsigned_v<V>);
  uint64_t* D = c.dst(I.d[0]);
  const uint64_t* A = c.src(I.s[0]);
  const uint64_t* B = c.src(I.s[1]);
  const uint64_t* C = I.a0 >= 2 ? c.src(I.s[2]) : nullptr;
  const uint64_t* Cin = I.s[3] != NOREG ? c.src(I.s[3]) : nullptr;
  uint64_t* Cout = I.d[1] != NOREG ? c.dst(I.d[1]) : nullptr;
  for_lanes(m, [&](int l) {
    const V a = get<V>(A, l), b = get<V>(B, l);
    const V cin = Cin ? V(Cin[l] & 1) : V(0);
    V r;
    bool out;
    if (I.a0 == 1) {  // a - (b + borrow)
      r = V(a - b - cin);
      out = a < b || (a == b && cin);
    } else {
      V x = b;
      if (I.a0 >= 2) {
        using W = std::conditional_t<sizeof(V) == 4, uint64_t, unsigned __int128>;
        W p = W(a) * W(b);
        x = I.a0 == 2 ? V(p) : V(p >> (8 * sizeof(V)));
      }
      const V y = I.a0 >= 2 ? get<V>(C, l) : x;
      const V first = I.a0 >= 2 ? x : a;
      r = V(first + y);
      out = r < first;
      const V r2 = V(r + cin);
      out = out || r2 < r;
      r = r2;
    }
    D[l] = put<V>(r);
    if (Cout) Cout[l] = out;
  });
}

// mul.wide / mad.wide: V is the source type (16 or 32 bit), result twice as wide
template <class V>
using Wide = std::conditional_t<sizeof(V) == 4, std::conditional_t<std::is_signed_v<V>, int64_t, uint64_t>,
                                std::conditional_t<std::is_signed_v<V>, int32_t, uint32_t>>;
template <class V>
void h_mulwide(Ctx& c, const Inst& I, uint32_t m) {
  uint64_t* D = c.dst(I.d[0]);
  const uint64_t* A = c.src(I.s[0]);
  const uint64_t* B = c.src(I.s[1]);
  for_lanes(m, [&](int l) { D[l] = put<Wide<V>>(Wide<V>(get<V>(A, l)) * Wide<V>(get<V>(B, l))); });
}
template <class V>
void h_madwide(Ctx& c, const Inst& I, uint32_t m) {
  using W = Wide<V>;
  uint64_t* D = c.dst(I.d[0]);
  const uint64_t* A = c.src(I.s[0]);
  const uint64_t* B = c.src(I.s[1]);
  const uint64_t* C = c.src(I.s[2]);
  for_lanes(m, [&](int l) { D[l] = put<W>(W(U<W>(W(get<V>(A, l)) * W(get<V>(B, l))) + U<W>(get<W>(C, l)))); });
}
template <class V, bool LEFT>
void h_shift(Ctx& c, const Inst& I, uint32_t m) {
  uint64_t* D = c.dst(I.d[0]);
  const uint64_t* A = c.src(I.s[0]);
  const uint64_t* B = c.src(I.s[1]);
  constexpr uint32_t bits = sizeof(V) * 8;
  for_lanes(m, [&](int l) {
    V a = get<V>(A, l);
    uint32_t s = uint32_t(B[l]);
    V r;
    if constexpr (LEFT) r = s >= bits ? V(0) : V(U<V>(a) << s);
    else if constexpr (std::is_signed_v<V>) r = s >= bits ? V(a < 0 ? -1 : 0) : V(a >> s);
    else r = s >= bits ? V(0) : V(a >> s);
    D[l] = put<V>(r);
  });
}
template <class V>
void h_popc(Ctx& c, const Inst& I, uint32_t m) {
  uint64_t* D = c.dst(I.d[0]);
  const uint64_t* A = c.src(I.s[0]);
  for_lanes(m, [&](int l) { D[l] = popc_(get<V>(A, l)); });
}
template <class V>
void h_clz(Ctx& c, const Inst& I, uint32_t m) {
  uint64_t* D = c.dst(I.d[0]);
  const uint64_t* A = c.src(I.s[0]);
  for_lanes(m, [&](int l) { D[l] = uint32_t(std::countl_zero(U<V>(get<V>(A, l)))); });
}
template <class V>
void h_brev(Ctx& c, const Inst& I, uint32_t m) {
  uint64_t* D = c.dst(I.d[0]);
  const uint64_t* A = c.src(I.s[0]);
  for_lanes(m, [&](int l) {
    U<V> x = U<V>(get<V>(A, l)), r = 0;
    for (unsigned i = 0; i < sizeof(V) * 8; ++i) r |= U<V>(((x >> i) & 1u)) << (sizeof(V) * 8 - 1 - i);
    D[l] = put<V>(V(r));
  });
}
template <class V>
void h_bfind(Ctx& c, const Inst& I, uint32_t m) {  // a1: shiftamt
  uint64_t* D = c.dst(I.d[0]);
  const uint64_t* A = c.src(I.s[0]);
  constexpr int bits = sizeof(V) * 8;
  for_lanes(m, [&](int l) {
    V a = get<V>(A, l);
    U<V> x = U<V>(a);
    if constexpr (std::is_signed_v<V>) if (a < 0) x = U<V>(~x);
    uint32_t r = x == 0 ? 0xffffffffu : uint32_t(bits - 1 - std::countl_zero(x));
    if (I.a1 && r != 0xffffffffu) r = uint32_t(bits - 1) - r;
    D[l] = r;
  });
}
// bfe: the len bits of a from bit pos (the low 8 bits of b and c); bits past the
// field, or past a's top, are 0 (unsigned) or the field's top bit, a's sign bit
// when the field runs past a's top (signed). In closed form: a bit loop per lane
// cost kernels that unpack half-precision values more than their arithmetic.
template <class V>
void h_bfe(Ctx& c, const Inst& I, uint32_t m) {
  uint64_t* D = c.dst(I.d[0]);
  const uint64_t* A = c.src(I.s[0]);
  const uint64_t* B = c.src(I.s[1]);
  const uint64_t* C = c.src(I.s[2]);
  using W = U<V>;
  constexpr uint32_t bits = sizeof(V) * 8, msb = bits - 1;
  for_lanes(m, [&](int l) {
    const W a = W(get<V>(A, l));
    const uint32_t pos = uint32_t(B[l]) & 0xff, len = uint32_t(C[l]) & 0xff;
    const uint32_t n = pos > msb ? 0 : std::min(len, bits - pos);  // the field's bits inside a
    const W low = n >= bits ? ~W(0) : (W(1) << n) - 1;
    W r = n == 0 ? W(0) : W(a >> pos) & low;
    if constexpr (std::is_signed_v<V>)
      if (len != 0 && ((a >> std::min(pos + len - 1, msb)) & 1)) r |= ~low;
    D[l] = put<V>(V(r));
  });
}
template <class V>
void h_bfi(Ctx& c, const Inst& I, uint32_t m) {  // bfi d, a(insert), b(base), c(pos), d(len)
  uint64_t* D = c.dst(I.d[0]);
  const uint64_t* A = c.src(I.s[0]);
  const uint64_t* B = c.src(I.s[1]);
  const uint64_t* C = c.src(I.s[2]);
  const uint64_t* E = c.src(I.s[3]);
  constexpr uint32_t bits = sizeof(V) * 8;
  for_lanes(m, [&](int l) {
    U<V> a = U<V>(get<V>(A, l)), r = U<V>(get<V>(B, l));
    uint32_t pos = uint32_t(C[l]) & 0xff, len = uint32_t(E[l]) & 0xff;
    for (uint32_t i = 0; i < len && pos + i < bits; ++i) {
      U<V> bit = (a >> i) & 1;
      r = U<V>((r & ~(U<V>(1) << (pos + i))) | (bit << (pos + i)));
    }
    D[l] = put<V>(V(r));
  });
}
void h_prmt(Ctx& c, const Inst& I, uint32_t m) {  // default mode only (a1 = mode 0)
  uint64_t* D = c.dst(I.d[0]);
  const uint64_t* A = c.src(I.s[0]);
  const uint64_t* B = c.src(I.s[1]);
  const uint64_t* C = c.src(I.s[2]);
  for_lanes(m, [&](int l) {
    uint64_t x = (uint64_t(uint32_t(B[l])) << 32) | uint32_t(A[l]);
    uint32_t sel = uint32_t(C[l]), r = 0;
    for (int i = 0; i < 4; ++i) {
      uint32_t s = (sel >> (4 * i)) & 0xf;
      uint32_t byte = uint32_t(x >> ((s & 7) * 8)) & 0xff;
      if (s & 8) byte = (byte & 0x80) ? 0xff : 0;
      r |= byte << (8 * i);
    }
    D[l] = r;
  });
}
void h_lop3(Ctx& c, const Inst& I, uint32_t m) {
  uint64_t* D = c.dst(I.d[0]);
  const uint64_t* A = c.src(I.s[0]);
  const uint64_t* B = c.src(I.s[1]);
  const uint64_t* C = c.src(I.s[2]);
  uint32_t lut = I.a1;
  for_lanes(m, [&](int l) {
    uint32_t a = uint32_t(A[l]), b = uint32_t(B[l]), cc = uint32_t(C[l]), r = 0;
    for (int i = 0; i < 8; ++i)
      if (lut >> i & 1) r |= ((i & 4) ? a : ~a) & ((i & 2) ? b : ~b) & ((i & 1) ? cc : ~cc);
    D[l] = r;
  });
}
template <bool LEFT, bool CLAMP>
void h_shf(Ctx& c, const Inst& I, uint32_t m) {
  uint64_t* D = c.dst(I.d[0]);
  const uint64_t* A = c.src(I.s[0]);
  const uint64_t* B = c.src(I.s[1]);
  const uint64_t* C = c.src(I.s[2]);
  for_lanes(m, [&](int l) {
    uint64_t x = (uint64_t(uint32_t(B[l])) << 32) | uint32_t(A[l]);
    uint32_t n = uint32_t(C[l]);
    n = CLAMP ? (n > 32 ? 32 : n) : (n & 31);
    D[l] = LEFT ? uint32_t((x << n) >> 32) : uint32_t(x >> n);
  });
}
void h_selp(Ctx& c, const Inst& I, uint32_t m) {
  uint64_t* D = c.dst(I.d[0]);
  const uint64_t* A = c.src(I.s[0]);
  const uint64_t* B = c.src(I.s[1]);
  const uint64_t* P = c.src(I.s[2]);
  for_lanes(m, [&](int l) { D[l] = P[l] ? A[l] : B[l]; });
}
template <class V>
void h_slct(Ctx& c, const Inst& I, uint32_t m) {  // V: type of c (s32 or f32)
  uint64_t* D = c.dst(I.d[0]);
  const uint64_t* A = c.src(I.s[0]);
  const uint64_t* B = c.src(I.s[1]);
  const uint64_t* C = c.src(I.s[2]);
  for_lanes(m, [&](int l) { D[l] = get<V>(C, l) >= V(0) ? A[l] : B[l]; });
}
template <class V>
void h_sad(Ctx& c, const Inst& I, uint32_t m) {
  uint64_t* D = c.dst(I.d[0]);
  const uint64_t* A = c.src(I.s[0]);
  const uint64_t* B = c.src(I.s[1]);
  const uint64_t* C = c.src(I.s[2]);
  for_lanes(m, [&](int l) {
    V a = get<V>(A, l), b = get<V>(B, l);
    D[l] = put<V>(V(U<V>(a < b ? b - a : a - b) + U<V>(get<V>(C, l))));
  });
}

// ---------------- compare ----------------
template <class V, Cmp C>
inline bool cmp(V a, V b) {
  if constexpr (std::is_floating_point_v<V>) {
    bool un = std::isnan(a) || std::isnan(b);
    switch (C) {
      case C_EQ: return !un && a == b;
      case C_NE: return !un && a != b;
      case C_LT: return !un && a < b;
      case C_LE: return !un && a <= b;
      case C_GT: return !un && a > b;
      case C_GE: return !un && a >= b;
      case C_EQU: return un || a == b;
      case C_NEU: return un || a != b;
      case C_LTU: return un || a < b;
      case C_LEU: return un || a <= b;
      case C_GTU: return un || a > b;
      case C_GEU: return un || a >= b;
      case C_NUM: return !un;
      case C_NAN: return un;
    }
  } else {
    switch (C) {
      case C_EQ: return a == b;
      case C_NE: return a != b;
      case C_LT: return a < b;
      case C_LE: return a <= b;
      case C_GT: return a > b;
      case C_GE: return a >= b;
      default: return false;
    }
  }
  return false;
}
// a1: bool op for the optional c operand: 0 none, 1 and, 2 or, 3 xor; flags bit0: c negated
// setp/set .ftz.f32 (flags bit2): denormal operands compare as signed zeros.
template <class V>
inline V cmp_in(const uint64_t* r, int l, bool fz) {
  V v = get<V>(r, l);
  if constexpr (std::is_same_v<V, float>) if (fz) v = ftz32(v);
  return v;
}
template <class V, Cmp C>
void h_setp(Ctx& c, const Inst& I, uint32_t m) {
  uint64_t* P = c.dst(I.d[0]);
  const uint64_t* A = c.src(I.s[0]);
  const uint64_t* B = c.src(I.s[1]);
  const bool fz = std::is_same_v<V, float> && (I.flags & 4);
  if (I.a1 == 0 && I.d[1] == NOREG && !fz) {
    for_lanes(m, [&](int l) { P[l] = cmp<V, C>(get<V>(A, l), get<V>(B, l)); });
    return;
  }
  uint64_t* Q = I.d[1] != NOREG ? c.dst(I.d[1]) : nullptr;
  const uint64_t* CC = I.a1 ? c.src(I.s[2]) : nullptr;
  bool cn = I.flags & 1;
  for_lanes(m, [&](int l) {
    bool t = cmp<V, C>(cmp_in<V>(A, l, fz), cmp_in<V>(B, l, fz));
    bool cv = CC ? (bool(CC[l]) != cn) : false;
    auto comb = [&](bool x) {
      switch (I.a1) {
        case 1: return x && cv;
        case 2: return x || cv;
        case 3: return x != cv;
        default: return x;
      }
    };
    bool p = comb(t), q = comb(!t);
    P[l] = p;
    if (Q) Q[l] = q;
  });
}
// set.cmp.dtype.stype: d = 0xffffffff/0 (integer) or 1.0f/0.0f
template <class V, Cmp C>
void h_set(Ctx& c, const Inst& I, uint32_t m) {
  uint64_t* D = c.dst(I.d[0]);
  const uint64_t* A = c.src(I.s[0]);
  const uint64_t* B = c.src(I.s[1]);
  const uint64_t* CC = I.a1 ? c.src(I.s[2]) : nullptr;
  bool cn = I.flags & 1, fdst = I.flags & 2;
  const bool fz = std::is_same_v<V, float> && (I.flags & 4);
  for_lanes(m, [&](int l) {
    bool t = cmp<V, C>(cmp_in<V>(A, l, fz), cmp_in<V>(B, l, fz));
    bool cv = CC ? (bool(CC[l]) != cn) : false;
    if (I.a1 == 1) t = t && cv;
    else if (I.a1 == 2) t = t || cv;
    else if (I.a1 == 3) t = t != cv;
    D[l] = fdst ? (t ? 0x3f800000u : 0u) : (t ? 0xffffffffu : 0u);
  });
}
// Half-precision compares (f16, bf16 and their x2 forms), through float.
// a0: the Cmp | 0x100 bf16 | 0x200 x2 | 0x400 ftz | result kind << 12 for
// set (0 all-ones integer, 1 f32 1.0, 2 f16 1.0, 3 bf16 1.0); a1: bool op
// (setp's), flags bit0: c negated. An x2 setp writes the low halves' result
// to p and the high halves' to q; an x2 set a half-word per half.
inline bool cmp_rt(uint32_t c, float a, float b) {
  switch (Cmp(c)) {
#define WH_C(X) case X: return cmp<float, X>(a, b);
    WH_C(C_EQ) WH_C(C_NE) WH_C(C_LT) WH_C(C_LE) WH_C(C_GT) WH_C(C_GE) WH_C(C_EQU) WH_C(C_NEU) WH_C(C_LTU)
    WH_C(C_LEU) WH_C(C_GTU) WH_C(C_GEU) WH_C(C_NUM) WH_C(C_NAN)
#undef WH_C
  }
  return false;
}
inline float half_cmp_in(uint64_t v, int k, bool bf, bool ftz) {
  uint16_t h = uint16_t(v >> (16 * k));
  if (ftz && (h & (bf ? 0x7f80u : 0x7c00u)) == 0) h &= 0x8000u;  // a denormal compares as a signed zero
  return bf ? bf16_to_float(h) : half_to_float(h);
}
void h_setp_half(Ctx& c, const Inst& I, uint32_t m) {
  uint64_t* P = c.dst(I.d[0]);
  uint64_t* Q = I.d[1] != NOREG ? c.dst(I.d[1]) : nullptr;
  const uint64_t* A = c.src(I.s[0]);
  const uint64_t* B = c.src(I.s[1]);
  const uint64_t* CC = I.a1 ? c.src(I.s[2]) : nullptr;
  const uint32_t cm = I.a0 & 0xff;
  const bool bf = I.a0 & 0x100, x2 = I.a0 & 0x200, ftz = I.a0 & 0x400, set = I.flags & 2;
  const uint32_t kind = I.a0 >> 12;
  for_lanes(m, [&](int l) {
    const bool cv = CC ? (bool(CC[l]) != bool(I.flags & 1)) : false;
    auto comb = [&](bool x) { return I.a1 == 1 ? x && cv : I.a1 == 2 ? x || cv : I.a1 == 3 ? x != cv : x; };
    bool t[2];
    for (int k = 0; k < (x2 ? 2 : 1); k++)
      t[k] = comb(cmp_rt(cm, half_cmp_in(A[l], k, bf, ftz), half_cmp_in(B[l], k, bf, ftz)));
    if (set) {
      auto one = [&](bool v, bool half) -> uint64_t {
        if (!v) return 0;
        switch (kind) {
          case 1: return 0x3f800000u;
          case 2: return 0x3c00u;
          case 3: return 0x3f80u;
          default: return half ? 0xffffu : 0xffffffffu;
        }
      };
      P[l] = x2 ? one(t[0], true) | one(t[1], true) << 16 : one(t[0], false);
    } else if (x2) {
      P[l] = t[0];
      if (Q) Q[l] = t[1];
    } else {
      P[l] = t[0];
      if (Q) Q[l] = comb(!cmp_rt(cm, half_cmp_in(A[l], 0, bf, ftz), half_cmp_in(B[l], 0, bf, ftz)));
    }
  });
}
void h_testp(Ctx& c, const Inst& I, uint32_t m) {  // a0: 0 finite 1 infinite 2 number 3 notanumber 4 normal 5 subnormal; a1: 1=f64
  uint64_t* D = c.dst(I.d[0]);
  const uint64_t* A = c.src(I.s[0]);
  for_lanes(m, [&](int l) {
    double x = I.a1 ? get<double>(A, l) : double(get<float>(A, l));
    int cls = I.a1 ? std::fpclassify(get<double>(A, l)) : std::fpclassify(get<float>(A, l));
    bool r = false;
    switch (I.a0) {
      case 0: r = std::isfinite(x); break;
      case 1: r = std::isinf(x); break;
      case 2: r = !std::isnan(x); break;
      case 3: r = std::isnan(x); break;
      case 4: r = cls == FP_NORMAL; break;
      case 5: r = cls == FP_SUBNORMAL; break;
    }
    D[l] = r;
  });
}
// predicate logic: and/or/xor/not on .pred registers
template <class Op>
void h_pbin(Ctx& c, const Inst& I, uint32_t m) {
  uint64_t* D = c.dst(I.d[0]);
  const uint64_t* A = c.src(I.s[0]);
  const uint64_t* B = c.src(I.s[1]);
  for_lanes(m, [&](int l) { D[l] = Op::template f<uint64_t>(A[l] != 0, B[l] != 0) & 1; });
}
void h_pnot(Ctx& c, const Inst& I, uint32_t m) {
  uint64_t* D = c.dst(I.d[0]);
  const uint64_t* A = c.src(I.s[0]);
  for_lanes(m, [&](int l) { D[l] = A[l] == 0; });
}

// ---------------- conversions ----------------
template <class D, class S>
void h_cvt_fast(Ctx& c, const Inst& I, uint32_t m) {  // plain integer / exact conversions
  uint64_t* Dr = c.dst(I.d[0]);
  const uint64_t* A = c.src(I.s[0]);
  for_lanes(m, [&](int l) { Dr[l] = put<D>(D(get<S>(A, l))); });
}
void h_cvt_lanes(Ctx& c, const Inst& I, uint32_t m) {  // a0 dst type, a1: src | mode<<8 | sat<<16 | ftz<<17
  uint64_t* Dr = c.dst(I.d[0]);
  const uint64_t* A = c.src(I.s[0]);
  Ty dt = Ty(I.a0), st = Ty(I.a1 & 0xff);
  int mode = (I.a1 >> 8) & 0xff;
  bool sat = (I.a1 >> 16) & 1, ftz = (I.a1 >> 17) & 1;
  for_lanes(m, [&](int l) { Dr[l] = cvt_lane(A[l], dt, st, mode, sat, ftz); });
}
// mov.b64 d, {a, b} / mov.b32 d, {a, b}: pack a0 = element bits, ns elements
void h_pack(Ctx& c, const Inst& I, uint32_t m) {
  uint64_t* D = c.dst(I.d[0]);
  const uint64_t* S[4];
  for (int i = 0; i < I.ns; ++i) S[i] = c.src(I.s[i]);
  uint32_t eb = I.a0;
  uint64_t mask = eb >= 64 ? ~0ull : ((1ull << eb) - 1);
  for_lanes(m, [&](int l) {
    uint64_t r = 0;
    for (int i = 0; i < I.ns; ++i) r |= (S[i][l] & mask) << (eb * i);
    D[l] = r;
  });
}
void h_unpack(Ctx& c, const Inst& I, uint32_t m) {
  const uint64_t* A = c.src(I.s[0]);
  uint32_t eb = I.a0;
  uint64_t mask = eb >= 64 ? ~0ull : ((1ull << eb) - 1);
  uint64_t tmp[32];
  for_lanes(m, [&](int l) { tmp[l] = A[l]; });
  for (int i = 0; i < I.nd; ++i) {
    if (I.d[i] == NOREG) continue;
    uint64_t* D = c.dst(I.d[i]);
    for_lanes(m, [&](int l) { D[l] = (tmp[l] >> (eb * i)) & mask; });
  }
}

// ---------------- half precision ----------------
// a0: op 0 add 1 sub 2 mul 3 fma 4 neg 5 abs 6 min 7 max; a1: 0 f16, 1 f16x2, 2 bf16, 3 bf16x2; flags bit1 sat
// Rounds a double to the narrow format (round to nearest even) with integer operations when
// the result is a normal number of it; everything else (denormal results, inf, NaN) takes
// the general to_narrow. EB/MB: exponent and fraction bits (bf16 8/7, f16 5/10).
template <int EB, int MB>
inline uint16_t narrow_rn(double v) {
  constexpr int bias = (1 << (EB - 1)) - 1;
  uint64_t x = std::bit_cast<uint64_t>(v);
  uint32_t e = uint32_t(x >> 52) & 0x7ff;
  if (e - uint32_t(1023 + 1 - bias) > uint32_t(2 * bias - 1)) return to_narrow(v, EB, MB, 0);
  constexpr int sh = 52 - MB;
  uint64_t mant = x & ((uint64_t(1) << 52) - 1);
  uint64_t r = mant + ((uint64_t(1) << (sh - 1)) - 1) + ((mant >> sh) & 1);
  uint32_t ee = e - 1023 + bias + uint32_t(r >> 52);
  uint16_t sign = uint16_t((x >> 63) << (EB + MB));
  if (ee >= uint32_t(2 * bias + 1)) return uint16_t(sign | (((1u << EB) - 1) << MB));
  return uint16_t(sign | ee << MB | uint32_t((r >> sh) & ((1u << MB) - 1)));
}
// f32 -> bf16, round to nearest even; NaN -> canonical NaN with the sign kept (as to_narrow).
inline uint16_t bf16_rn(uint32_t u) {
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t(((u >> 16) & 0x8000u) | 0x7fffu);
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// a0: op 0 add 1 sub 2 mul 3 fma 4 neg 5 abs 6 min 7 max; a1: 0 f16, 1 f16x2, 2 bf16, 3 bf16x2; flags bit1 sat,
// bit2 relu (a negative result is +0, a NaN the canonical NaN 0x7fff), bit3 NaN (min/max: a NaN operand
// gives the canonical NaN).
// One instantiation per op and type: no per-lane dispatch.
// Exactness: the operands have 8 (bf16) or 11 (f16) significant bits, so a product is exact
// in f32 and a sum rounded first to f32 (24 >= 2*11+2 bits) then to the narrow format equals
// the single correct rounding; fma (exact product plus an addend) is summed in double.
template <bool BF>
inline float half_in(uint64_t v, int k) {
  uint16_t h = uint16_t(v >> (16 * k));
  if constexpr (BF) return bf16_to_float(h);
  else return half_to_float(h);
}
template <int OP, bool BF, bool X2>
void h_half_t(Ctx& c, const Inst& I, uint32_t m) {
  uint64_t* D = c.dst(I.d[0]);
  const uint64_t* A = c.src(I.s[0]);
  const uint64_t* B = I.ns > 1 ? c.src(I.s[1]) : A;
  const uint64_t* C = I.ns > 2 ? c.src(I.s[2]) : A;
  const bool sat = I.flags & 2, relu = I.flags & 4, nan_op = I.flags & 8;
  auto relu_of = [](uint32_t h) -> uint32_t {
    const uint32_t inf = BF ? 0x7f80u : 0x7c00u;
    if ((h & 0x7fffu) > inf) return 0x7fffu;
    return h & 0x8000u ? 0u : h;
  };
  auto one_plain = [&](int l, int k) -> uint32_t {
    float a = half_in<BF>(A[l], k);
    if constexpr (OP == 3) {
      // The product is exact in double (a bf16 product of denormals is not in f32: it
      // underflowed to a zero of the wrong sign). The sum is rounded to odd in double,
      // so its rounding to the narrow format is the single correct rounding even where
      // the addend is far below the product (bf16's exponent range is f32's).
      double p = double(a) * double(half_in<BF>(B[l], k)), q = double(half_in<BF>(C[l], k));
      double r = p + q;
      if constexpr (BF) {
        double e = std::isfinite(r) ? (p - (r - (r - p))) + (q - (r - p)) : 0.0;  // two-sum: the rounding error
        uint64_t rb = std::bit_cast<uint64_t>(r);
        if (e != 0 && !(rb & 1)) r = std::nextafter(r, e > 0 ? INFINITY : -INFINITY);
      }
      if (sat) r = std::isnan(r) ? 0.0 : std::fmin(std::fmax(r, 0.0), 1.0);
      return BF ? narrow_rn<8, 7>(r) : narrow_rn<5, 10>(r);
    } else {
      float r;
      if constexpr (OP == 0) r = a + half_in<BF>(B[l], k);
      else if constexpr (OP == 1) r = a - half_in<BF>(B[l], k);
      else if constexpr (OP == 2) r = a * half_in<BF>(B[l], k);
      else if constexpr (OP == 4) r = -a;
      else if constexpr (OP == 5) r = std::fabs(a);
      // min/max: a NaN operand, signalling ones included, gives the other (std::fmin
      // answers NaN for a signalling NaN)
      else if constexpr (OP == 6) r = nan_op ? OMinNaN::f<float>(a, half_in<BF>(B[l], k)) : OMin::f<float>(a, half_in<BF>(B[l], k));
      else r = nan_op ? OMaxNaN::f<float>(a, half_in<BF>(B[l], k)) : OMax::f<float>(a, half_in<BF>(B[l], k));
      if (sat) r = std::isnan(r) ? 0.0f : std::fmin(std::fmax(r, 0.0f), 1.0f);
      if constexpr (BF) return bf16_rn(std::bit_cast<uint32_t>(r));
      else return narrow_rn<5, 10>(double(r));
    }
  };
  auto one = [&](int l, int k) -> uint32_t { return relu ? relu_of(one_plain(l, k)) : one_plain(l, k); };
  for_lanes(m, [&](int l) {
    if constexpr (X2) D[l] = one(l, 0) | one(l, 1) << 16;
    else D[l] = one(l, 0);
  });
}
template <int OP>
Handler half_for(uint32_t ty) {
  switch (ty) {
    case 0: return h_half_t<OP, false, false>;
    case 1: return h_half_t<OP, false, true>;
    case 2: return h_half_t<OP, true, false>;
    default: return h_half_t<OP, true, true>;
  }
}
Handler pick_half(uint32_t op, uint32_t ty) {
  switch (op) {
    case 0: return half_for<0>(ty);
    case 1: return half_for<1>(ty);
    case 2: return half_for<2>(ty);
    case 3: return half_for<3>(ty);
    case 4: return half_for<4>(ty);
    case 5: return half_for<5>(ty);
    case 6: return half_for<6>(ty);
    default: return half_for<7>(ty);
  }
}

// Conversions a bf16 / f16 training kernel runs constantly.
void h_cvt_bf16_f32(Ctx& c, const Inst& I, uint32_t m) {  // cvt.rn.bf16.f32
  uint64_t* D = c.dst(I.d[0]);
  const uint64_t* A = c.src(I.s[0]);
  for_lanes(m, [&](int l) { D[l] = bf16_rn(uint32_t(A[l])); });
}
void h_cvt_bf16x2_f32(Ctx& c, const Inst& I, uint32_t m) {  // cvt.rn.bf16x2.f32 d, a, b: a -> upper half, b -> lower
  uint64_t* D = c.dst(I.d[0]);
  const uint64_t* A = c.src(I.s[0]);
  const uint64_t* B = c.src(I.s[1]);
  for_lanes(m, [&](int l) { D[l] = uint32_t(bf16_rn(uint32_t(A[l]))) << 16 | bf16_rn(uint32_t(B[l])); });
}
void h_cvt_f16x2_f32(Ctx& c, const Inst& I, uint32_t m) {  // cvt.rn.f16x2.f32 d, a, b
  uint64_t* D = c.dst(I.d[0]);
  const uint64_t* A = c.src(I.s[0]);
  const uint64_t* B = c.src(I.s[1]);
  for_lanes(m, [&](int l) {
    D[l] = uint32_t(narrow_rn<5, 10>(get<float>(A, l))) << 16 | narrow_rn<5, 10>(get<float>(B, l));
  });
}
void h_cvt_f32_bf16(Ctx& c, const Inst& I, uint32_t m) {  // cvt.f32.bf16 (exact; a signalling NaN comes out quiet)
  uint64_t* D = c.dst(I.d[0]);
  const uint64_t* A = c.src(I.s[0]);
  for_lanes(m, [&](int l) {
    uint32_t u = uint32_t(A[l] & 0xffff) << 16;
    D[l] = (u & 0x7fffffffu) > 0x7f800000u ? (u | 0x00400000u) : u;
  });
}
void h_cvt_f16_f32(Ctx& c, const Inst& I, uint32_t m) {  // cvt.rn.f16.f32
  uint64_t* D = c.dst(I.d[0]);
  const uint64_t* A = c.src(I.s[0]);
  for_lanes(m, [&](int l) { D[l] = narrow_rn<5, 10>(get<float>(A, l)); });
}

// ---------------- address-of, cvta, special registers ----------------
inline uint64_t var_base(const Ctx& c, const Inst& I) {
  switch (I.avk) {
    case AV_Imm: return I.avar;
    case AV_Local: return uint64_t(c.frame_local) + I.avar;
    case AV_Shared: return c.shared_off[I.avar];
    case AV_Global: return c.gaddr[I.avar];
    default: return 0;
  }
}
void h_varaddr(Ctx& c, const Inst& I, uint32_t m) {
  uint64_t* D = c.dst(I.d[0]);
  uint64_t v = var_base(c, I) + uint64_t(I.aoff);
  for_lanes(m, [&](int l) { D[l] = v; });
}
template <bool TO>
void h_cvta(Ctx& c, const Inst& I, uint32_t m) {  // avar: window base
  uint64_t* D = c.dst(I.d[0]);
  const uint64_t* A = c.src(I.s[0]);
  uint64_t base = (uint64_t(I.a0) << 32) | I.a1;
  for_lanes(m, [&](int l) { D[l] = TO ? A[l] - base : A[l] + base; });
}
void h_isspacep(Ctx& c, const Inst& I, uint32_t m) {  // a0: Sp
  uint64_t* D = c.dst(I.d[0]);
  const uint64_t* A = c.src(I.s[0]);
  for_lanes(m, [&](int l) {
    uint64_t a = A[l], hi = a & 0xFFFFFFFF00000000ull;
    bool r = false;
    switch (Sp(I.a0)) {
      case Sp::Shared: r = hi == kSharedWindow; break;
      case Sp::Local: r = hi == kLocalWindow; break;
      case Sp::KParam: r = hi == kParamWindow; break;
      default: r = a < kWindowLow; break;
    }
    D[l] = r;
  });
}

}  // namespace
}  // namespace wh::ptx::detail
