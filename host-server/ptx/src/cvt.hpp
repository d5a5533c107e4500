// Generic per-lane conversion (cvt) between PTX scalar types. Internal linkage on
// purpose: rounding.cpp compiles it with -frounding-math for directed modes.
#pragma once
#include <cmath>
#include <limits>

#include "internal.hpp"

namespace wh::ptx::detail {
namespace {

// modes: 0 rn(default) 1 rz 2 rm 3 rp 4 rni 5 rzi 6 rmi 7 rpi
inline double round_integral(double x, int mode) {
  switch (mode) {
    case 4: return std::nearbyint(x);  // callers keep round-to-nearest-even in effect
    case 5: return std::trunc(x);
    case 6: return std::floor(x);
    case 7: return std::ceil(x);
    default: return x;
  }
}
inline double rni(double x) {  // round half to even without depending on fenv
  double f = std::floor(x), d = x - f, r;
  if (d > 0.5) r = f + 1;
  else if (d < 0.5) r = f;
  else r = std::fmod(f, 2.0) == 0 ? f : f + 1;
  return std::copysign(r, x);  // -0.5 and negative denormals round to -0, as IEEE roundToIntegral
}

// Flush a denormal to signed zero. Integer select (no classification call): the lane loops
// of the .ftz handlers stay branch-free and vectorise like the plain forms.
inline float ftz32(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  return std::bit_cast<float>((u & 0x7f800000u) ? u : (u & 0x80000000u));
}

// 1 when the low 32 bits hold an f32 denormal (zero exponent, non-zero fraction).
inline uint32_t denorm32(uint64_t bits) { return uint32_t(((uint32_t(bits) & 0x7fffffffu) - 1u) < 0x007fffffu); }

inline uint64_t sext(uint64_t v, int bytes) {
  switch (bytes) {
    case 1: return uint64_t(int64_t(int8_t(v)));
    case 2: return uint64_t(int64_t(int16_t(v)));
    case 4: return uint64_t(int64_t(int32_t(v)));
    default: return v;
  }
}
inline uint64_t zext(uint64_t v, int bytes) {
  return bytes >= 8 ? v : (v & ((uint64_t(1) << (bytes * 8)) - 1));
}

inline double read_float(uint64_t bits, Ty t) {
  switch (t) {
    case T_F16: return half_to_float(uint16_t(bits));
    case T_BF16: return bf16_to_float(uint16_t(bits));
    case T_F32: return std::bit_cast<float>(uint32_t(bits));
    default: return std::bit_cast<double>(bits);
  }
}

template <class I>
inline uint64_t sat_from_double(double x) {
  if (std::isnan(x)) return 0;
  if (x <= double(std::numeric_limits<I>::min())) return uint64_t(int64_t(std::numeric_limits<I>::min()));
  if (x >= double(std::numeric_limits<I>::max())) {
    if constexpr (std::is_signed_v<I>) return uint64_t(int64_t(std::numeric_limits<I>::max()));
    else return uint64_t(std::numeric_limits<I>::max());
  }
  if constexpr (std::is_signed_v<I>) return uint64_t(int64_t(I(x)));
  else return uint64_t(I(x));
}

inline uint64_t cvt_lane(uint64_t v, Ty dt, Ty st, int mode, bool sat, bool ftz) {
  const int db = ty_bytes(dt), sb = ty_bytes(st);
  if (ty_float(st)) {
    double x = read_float(v, st);
    if (st == T_F32 && ftz) x = ftz32(float(x));
    if (ty_float(dt)) {
      if (mode >= 4) x = mode == 4 ? rni(x) : round_integral(x, mode);
      switch (dt) {
        case T_F64: {
          double r = x;
          if (sat) r = std::isnan(r) ? 0.0 : std::fmin(std::fmax(r, 0.0), 1.0);
          return std::bit_cast<uint64_t>(r);
        }
        case T_F32: {
          float r = st == T_F64 ? float(x) : float(x);
          if (ftz) r = ftz32(r);
          if (sat) r = std::isnan(r) ? 0.0f : std::fmin(std::fmax(r, 0.0f), 1.0f);
          return std::bit_cast<uint32_t>(r);
        }
        case T_F16: {
          if (sat) x = std::isnan(x) ? 0.0 : std::fmin(std::fmax(x, 0.0), 1.0);
          return to_half(x, mode & 3);
        }
        case T_BF16: {
          if (sat) x = std::isnan(x) ? 0.0 : std::fmin(std::fmax(x, 0.0), 1.0);
          return to_bf16(x, mode & 3);
        }
        default: return 0;
      }
    }
    // float -> int: round with the given integer mode, saturate, NaN -> 0
    x = mode == 4 || mode == 0 ? rni(x) : round_integral(x, mode);
    switch (dt) {
      case T_S8: return sat_from_double<int8_t>(x);
      case T_S16: return sat_from_double<int16_t>(x);
      case T_S32: return sat_from_double<int32_t>(x);
      case T_S64: return sat_from_double<int64_t>(x);
      case T_U8: case T_B8: return sat_from_double<uint8_t>(x);
      case T_U16: case T_B16: return sat_from_double<uint16_t>(x);
      case T_U32: case T_B32: return sat_from_double<uint32_t>(x);
      default: return sat_from_double<uint64_t>(x);
    }
  }
  // integer source
  const bool ss = ty_signed(st);
  uint64_t iv = ss ? sext(v, sb) : zext(v, sb);
  if (ty_float(dt)) {
    switch (dt) {
      case T_F64: return std::bit_cast<uint64_t>(ss ? double(int64_t(iv)) : double(iv));
      case T_F32: {
        float r = ss ? float(int64_t(iv)) : float(iv);
        if (sat) r = std::fmin(std::fmax(r, 0.0f), 1.0f);
        return std::bit_cast<uint32_t>(r);
      }
      case T_F16: {
        double d = ss ? double(int64_t(iv)) : double(iv);
        if (sat) d = std::fmin(std::fmax(d, 0.0), 1.0);
        return to_half(d, mode & 3);
      }
      case T_BF16: {
        double d = ss ? double(int64_t(iv)) : double(iv);
        if (sat) d = std::fmin(std::fmax(d, 0.0), 1.0);
        return to_bf16(d, mode & 3);
      }
      default: return 0;
    }
  }
  const bool ds = ty_signed(dt);
  if (sat && db < 8 + 1) {
    // clamp to the destination range
    if (ds) {
      int64_t lo = db >= 8 ? std::numeric_limits<int64_t>::min() : -(int64_t(1) << (db * 8 - 1));
      int64_t hi = db >= 8 ? std::numeric_limits<int64_t>::max() : (int64_t(1) << (db * 8 - 1)) - 1;
      if (ss) {
        int64_t s = int64_t(iv);
        iv = uint64_t(s < lo ? lo : s > hi ? hi : s);
      } else {
        iv = iv > uint64_t(hi) ? uint64_t(hi) : iv;
      }
    } else {
      uint64_t hi = db >= 8 ? ~uint64_t(0) : (uint64_t(1) << (db * 8)) - 1;
      if (ss && int64_t(iv) < 0) iv = 0;
      else if (iv > hi) iv = hi;
    }
  }
  return ds ? sext(iv, db) : zext(iv, db);
}

}  // namespace
}  // namespace wh::ptx::detail
