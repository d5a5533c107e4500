// Host side of the tensor-core tests: element encodings, exactly representable random
// operands and the reference D = A*B + C.
#pragma once
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace whtest::mma {

enum class Et { F16, BF16, TF32, F32, F64, S8, U8, S32 };

inline int et_bits(Et t) {
  switch (t) {
    case Et::F16: case Et::BF16: return 16;
    case Et::S8: case Et::U8: return 8;
    case Et::F64: return 64;
    default: return 32;
  }
}
inline int per_reg(Et t) { return et_bits(t) >= 32 ? 1 : 32 / et_bits(t); }
inline const char* et_name(Et t) {
  static const char* n[] = {"f16", "bf16", "tf32", "f32", "f64", "s8", "u8", "s32"};
  return n[int(t)];
}
inline bool et_int(Et t) { return t == Et::S8 || t == Et::U8 || t == Et::S32; }

inline uint16_t f2h(double v) { return std::bit_cast<uint16_t>(static_cast<_Float16>(v)); }  // round to nearest even
inline double h2f(uint16_t h) { return double(std::bit_cast<_Float16>(h)); }

// Raw bits of an element holding value v (v must be representable; tf32 keeps f32 bits).
inline uint64_t encode(Et t, double v) {
  switch (t) {
    case Et::F16: return f2h(v);
    case Et::BF16: return std::bit_cast<uint32_t>(float(v)) >> 16;
    case Et::TF32: case Et::F32: return std::bit_cast<uint32_t>(float(v));
    case Et::F64: return std::bit_cast<uint64_t>(v);
    case Et::S8: case Et::U8: return uint8_t(int(v));
    default: return uint32_t(int32_t(int64_t(v)));
  }
}
inline double decode(Et t, uint64_t b) {
  switch (t) {
    case Et::F16: return h2f(uint16_t(b));
    case Et::BF16: return std::bit_cast<float>(uint32_t(b) << 16);
    case Et::TF32: case Et::F32: return std::bit_cast<float>(uint32_t(b));
    case Et::F64: return std::bit_cast<double>(b);
    case Et::S8: return int8_t(uint8_t(b));
    case Et::U8: return uint8_t(b);
    default: return int32_t(uint32_t(b));
  }
}

// Random operand values chosen so that every product and every partial sum is exact in
// f32: multiplicands are multiples of 1/8 in [-4, 4], accumulators multiples of 1/8 in
// [-32, 32]. The f32 result is then exact and an f16 result has exactly one rounding.
struct Gen {
  std::mt19937 rng;
  explicit Gen(uint32_t seed) : rng(seed) {}
  int uni(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }
  double value(Et t, bool acc) {
    switch (t) {
      case Et::S8: return uni(-128, 127);
      case Et::U8: return uni(0, 255);
      case Et::S32: return uni(-(1 << 20), 1 << 20);
      default: return acc ? uni(-256, 256) / 8.0 : uni(-32, 32) / 8.0;
    }
  }
  // tf32 operands also get random bits below the tf32 precision, which the tensor cores
  // ignore: the reference uses the value without them.
  uint64_t bits(Et t, double v) {
    uint64_t b = encode(t, v);
    if (t == Et::TF32 && v != 0) b |= uint32_t(uni(0, 0x1fff));
    return b;
  }
};

// Reference D = A*B + C (row-major M x K, K x N, M x N), exact for the operands Gen makes;
// integers wrap modulo 2^32 or saturate.
inline std::vector<double> gemm_ref(int M, int N, int K, const std::vector<double>& A, const std::vector<double>& B,
                                    const std::vector<double>& C, bool integer, bool satfinite) {
  std::vector<double> D(size_t(M) * N);
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      if (integer) {
        int64_t acc = int64_t(C[size_t(i) * N + j]);
        for (int k = 0; k < K; ++k) acc += int64_t(A[size_t(i) * K + k]) * int64_t(B[size_t(k) * N + j]);
        if (satfinite) acc = std::clamp<int64_t>(acc, INT32_MIN, INT32_MAX);
        D[size_t(i) * N + j] = double(int32_t(uint32_t(uint64_t(acc))));
      } else {
        long double acc = C[size_t(i) * N + j];
        for (int k = 0; k < K; ++k) acc += (long double)A[size_t(i) * K + k] * B[size_t(k) * N + j];
        D[size_t(i) * N + j] = double(acc);
      }
    }
  return D;
}

}  // namespace whtest::mma
