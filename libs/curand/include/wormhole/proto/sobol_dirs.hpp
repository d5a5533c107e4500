// sobol_dirs.hpp - the Sobol' direction numbers and scramble constants of
// Wormhole's cuRAND, shared by the guest library (curandGetDirectionVectors*,
// curandGetScrambleConstants*) and the sim device's quasirandom generators so
// that both see one table.
//
// Dimension 0 is van der Corput's sequence (v_k = 2^(31-k)) and dimension 1
// comes from the polynomial x+1: both are the same in every Sobol'
// construction, so their points equal those of NVIDIA's table. Dimensions
// from 2 on use the primitive polynomials over GF(2) in order of degree and
// value, with initial direction numbers m_1..m_s (odd, m_k < 2^k) drawn from
// a fixed hash of (dimension, k): a valid Sobol' sequence, but NOT Joe and
// Kuo's initial numbers that NVIDIA's library ships, so points of those
// dimensions differ from a GPU's.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

namespace wh::proto::sobol {

inline uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// a*b mod p over GF(2); p of degree s (bit s set).
inline uint32_t pmulmod(uint32_t a, uint32_t b, uint32_t p, int s) {
  uint32_t r = 0;
  while (b) {
    if (b & 1) r ^= a;
    b >>= 1;
    a <<= 1;
    if (a >> s & 1) a ^= p;
  }
  return r;
}
inline uint32_t ppowmod(uint32_t e, uint32_t p, int s) {  // x^e mod p
  uint32_t r = 1, b = 2 % (1u << s);
  if (s == 1) b = 2 ^ p;  // x mod (x+1) = 1
  while (e) {
    if (e & 1) r = pmulmod(r, b, p, s);
    b = pmulmod(b, b, p, s);
    e >>= 1;
  }
  return r;
}
inline bool primitive(uint32_t p, int s) {
  const uint32_t order = (1u << s) - 1;
  if (ppowmod(order, p, s) != 1) return false;
  uint32_t m = order;
  for (uint32_t q = 2; q * q <= m; q++) {
    if (m % q) continue;
    while (m % q == 0) m /= q;
    if (ppowmod(order / q, p, s) == 1) return false;
  }
  // The last prime factor; when the order is itself prime, x^1 != 1 holds.
  if (m > 1 && m != order && ppowmod(order / m, p, s) == 1) return false;
  return true;
}

// The first `count` primitive polynomials (bit s = x^s ... bit 0 = 1).
inline const std::vector<uint32_t>& polynomials(size_t count) {
  static std::mutex mu;
  static std::vector<uint32_t> polys;
  static int next_s = 1;
  static uint32_t next_p = 0;
  std::lock_guard lk(mu);
  while (polys.size() < count) {
    const int s = next_s;
    if (!next_p) next_p = (1u << s) | 1u;
    if (next_p >= (2u << s)) {
      next_s++;
      next_p = 0;
      continue;
    }
    if (primitive(next_p, s)) polys.push_back(next_p);
    next_p += 2;
  }
  return polys;
}

inline int degree(uint32_t p) { return 31 - __builtin_clz(p); }

// The direction numbers of one dimension as integers of `bits` bits
// (32 or 64): v[k] for k = 0..bits-1.
template <class T>
inline void directions(uint32_t dim, T* v) {
  constexpr int bits = sizeof(T) * 8;
  if (dim == 0) {
    for (int k = 0; k < bits; k++) v[k] = T(1) << (bits - 1 - k);
    return;
  }
  const uint32_t p = polynomials(dim)[dim - 1];
  const int s = degree(p);
  uint64_t m[64];
  for (int k = 0; k < s && k < bits; k++) {
    // m_{k+1}: odd and below 2^(k+1); x+1 and the first numbers forced.
    const uint64_t r = dim == 1 ? 0 : mix(uint64_t(dim) << 8 | uint64_t(k));
    m[k] = k == 0 ? 1 : ((r % (uint64_t(1) << k)) << 1) | 1;
  }
  for (int k = s; k < bits; k++) {
    uint64_t x = m[k - s] ^ (m[k - s] << s);
    for (int j = 1; j < s; j++)
      if (p >> (s - j) & 1) x ^= m[k - j] << j;
    m[k] = x;
  }
  for (int k = 0; k < bits; k++) v[k] = T(m[k] << (bits - 1 - k));
}

// A dimension's scramble constant (scrambled Sobol').
inline uint32_t scramble32(uint32_t dim) { return uint32_t(mix(0x5c4a3b1ull << 20 ^ dim)); }
inline uint64_t scramble64(uint32_t dim) { return mix(0x5c4a3b2ull << 20 ^ dim); }

}  // namespace wh::proto::sobol
