// Tensor-core handlers: wmma.load/store/mma, mma.sync, ldmatrix and stmatrix, plus cvt to
// tf32. Each is warp-collective: one call reads the fragments of all 32 lanes, computes
// the whole matrix operation and writes every lane's result (fragment layouts: mma.hpp).
//
// Arithmetic: products of f16, bf16 and tf32 elements are exact in f32, so D = A*B + C is
// accumulated in f32 (starting from C, k ascending, one rounding per addition); f16
// results are then rounded to nearest even. tf32 operands use only their 19 high bits
// (sign, exponent, 10 mantissa bits): the 13 low bits are ignored, as the tensor cores
// ignore them. f64 uses fused multiply-adds; integer products accumulate exactly and
// wrap modulo 2^32, or clamp to the s32 range with .satfinite.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstdio>

#include "ops_mem.hpp"

namespace wh::ptx::detail {
namespace {

// Inst encoding: a0 indexes Function::mma (registers, shape, types). wmma.load/store,
// ldmatrix and stmatrix address memory as ld/st do (areg, aoff, avk, space); for
// wmma.load/store s[0] is the stride register (NOREG: the default stride).
inline const MmaOp& mma_op(const Ctx& c, const Inst& I) { return c.func->mma[I.a0]; }

// The .sync.aligned forms need the whole warp; a lane that exited or waits on the other
// side of a branch would hold (or receive) part of the fragments (undefined on a GPU).
inline bool whole_warp(Ctx& c, const Inst& I, uint32_t m) {
  if (m == 0xffffffffu) return true;
  char b[16];
  snprintf(b, sizeof b, "%08x", m);
  c.set_fault(LaunchError::Trap, I,
              std::string("warp-collective matrix instruction executed by lanes 0x") + b +
                  " only: all 32 lanes of the warp must execute it together (.sync.aligned)");
  return false;
}

inline uint8_t* mma_ptr(Ctx& c, const Inst& I, int l, uint64_t a, uint32_t sz, bool w) {
  switch (I.space) {
    case Sp::Global: return lane_ptr<Sp::Global>(c, I, l, a, sz, w);
    case Sp::Shared: return lane_ptr<Sp::Shared>(c, I, l, a, sz, w);
    default: return lane_ptr<Sp::Generic>(c, I, l, a, sz, w);
  }
}

// A register's value from its packed bits: s32 sign-extended as ld.s32 leaves it.
inline uint64_t frag_word(MmaEt t, uint64_t w) { return t == ME_S32 ? uint64_t(int64_t(int32_t(uint32_t(w)))) : w; }

inline int64_t mma_int(MmaEt t, uint64_t b) {
  return t == ME_S8 ? int64_t(int8_t(uint8_t(b))) : t == ME_U8 ? int64_t(uint8_t(b)) : int64_t(int32_t(uint32_t(b)));
}

// n bytes at address a of space sp when they lie inside the block's shared memory or one
// device-memory region; nullptr otherwise, without a fault (the caller then goes element
// by element, which names a fault precisely).
inline uint8_t* span_ptr(Ctx& c, Sp sp, uint64_t a, uint32_t n, bool w) {
  if (sp == Sp::Generic) {
    const uint64_t hi = a & 0xFFFFFFFF00000000ull;
    if (hi == kSharedWindow) sp = Sp::Shared, a -= kSharedWindow;
    else if (hi == kLocalWindow || hi == kParamWindow) return nullptr;
  }
  if (sp == Sp::Shared) return a < c.shared_size && n <= c.shared_size - a ? c.shared + a : nullptr;
  if (a >= kLaunchBufs) return nullptr;  // device-runtime buffers, grid workspace
  return c.region_ptr(a, n, w);
}

inline uint64_t load_bytes(const uint8_t* p, uint32_t n) {
  switch (n) {
    case 1: return *p;
    case 2: { uint16_t v; std::memcpy(&v, p, 2); return v; }
    case 4: { uint32_t v; std::memcpy(&v, p, 4); return v; }
    default: { uint64_t v; std::memcpy(&v, p, 8); return v; }
  }
}
inline void store_bytes(uint8_t* p, uint64_t v, uint32_t n) {
  switch (n) {
    case 1: *p = uint8_t(v); break;
    case 2: { const uint16_t x = uint16_t(v); std::memcpy(p, &x, 2); break; }
    case 4: { const uint32_t x = uint32_t(v); std::memcpy(p, &x, 4); break; }
    default: std::memcpy(p, &v, 8);
  }
}

// One group of four lanes (registers r0, and r1 when a lane holds two parts, from its
// first lane) <-> its RPT * 4 consecutive RUN-byte parts at b, lane t's at part RPT * t.
template <int RUN, int RPT, bool TO_REGS, bool S32>
[[gnu::always_inline]] inline void group_move(uint8_t* b, uint64_t* r0, uint64_t* r1) {
  static_assert(RUN == 4 || RUN == 8);
  using u32x4 = uint32_t __attribute__((vector_size(16)));
  using i32x4 = int32_t __attribute__((vector_size(16)));
  using u64x4 = uint64_t __attribute__((vector_size(32)));
  using i64x4 = int64_t __attribute__((vector_size(32)));
  if constexpr (RUN == 8 && RPT == 1) {  // f64 A, B
    if constexpr (TO_REGS) std::memcpy(r0, b, 32);
    else std::memcpy(b, r0, 32);
  } else if constexpr (RUN == 8) {  // f64 C, D: even parts in r0, odd in r1
    u64x4 x, y;
    if constexpr (TO_REGS) {
      std::memcpy(&x, b, 32);
      std::memcpy(&y, b + 32, 32);
      const u64x4 even = __builtin_shufflevector(x, y, 0, 2, 4, 6), odd = __builtin_shufflevector(x, y, 1, 3, 5, 7);
      std::memcpy(r0, &even, 32);
      std::memcpy(r1, &odd, 32);
    } else {
      std::memcpy(&x, r0, 32);
      std::memcpy(&y, r1, 32);
      const u64x4 lo = __builtin_shufflevector(x, y, 0, 4, 1, 5), hi = __builtin_shufflevector(x, y, 2, 6, 3, 7);
      std::memcpy(b, &lo, 32);
      std::memcpy(b + 32, &hi, 32);
    }
  } else if constexpr (RPT == 1) {  // 32-bit parts, zero- (s32: sign-) extended in the slots
    if constexpr (TO_REGS && S32) {
      i32x4 v;
      std::memcpy(&v, b, 16);
      const i64x4 x = __builtin_convertvector(v, i64x4);
      std::memcpy(r0, &x, 32);
    } else if constexpr (TO_REGS) {
      u32x4 v;
      std::memcpy(&v, b, 16);
      const u64x4 x = __builtin_convertvector(v, u64x4);
      std::memcpy(r0, &x, 32);
    } else {
      u64x4 x;
      std::memcpy(&x, r0, 32);
      const u32x4 v = __builtin_convertvector(x, u32x4);
      std::memcpy(b, &v, 16);
    }
  } else {  // 32-bit C, D: a lane's two parts are the two halves of a 64-bit word
    u64x4 v;
    if constexpr (TO_REGS) {
      std::memcpy(&v, b, 32);
      u64x4 lo = v & 0xffffffffull, hi = v >> 32;
      if constexpr (S32) {
        lo = u64x4(i64x4(v << 32) >> 32);
        hi = u64x4(i64x4(v) >> 32);
      }
      std::memcpy(r0, &lo, 32);
      std::memcpy(r1, &hi, 32);
    } else {
      u64x4 lo, hi;
      std::memcpy(&lo, r0, 32);
      std::memcpy(&hi, r1, 32);
      v = (lo & 0xffffffffull) | (hi << 32);
      std::memcpy(b, &v, 32);
    }
  }
}

// Fragment f's registers <-> a dense matrix M of raw elements (ESZ bytes each), walking
// op.walk[f] (mma.hpp): per tile, per lane, the lane's run of V elements, PR of them in the
// low bits of each register, little-endian as in memory. Where the runs are contiguous in
// M (JS1) four lanes' parts move as vectors; elsewhere element by element. Loads into
// registers fill every register (the repeats of f16 wmma multiplicands included; s32
// sign-extended as ld.s32 leaves it); a gather for mma, or a store, takes the distinct
// elements.
template <int ESZ, int PR, int V, bool JS1, bool TO_REGS, bool S32>
[[gnu::always_inline]] inline void frag_move_n(const MmaOp& op, int f, uint8_t* M, uint64_t* const* R) {
  const FragWalk& w = op.walk[f];
  constexpr int RPT = V / PR, RUN = ESZ * PR;  // registers per tile, bytes per register part
  static_assert(RPT == 1 || RPT == 2);
  const int gs = w.gs * ESZ, js = JS1 ? ESZ : w.js * ESZ;
  if constexpr (JS1) {
    for (int tile = 0; tile < w.tiles; ++tile) {
      uint8_t* b = M + w.base[tile] * ESZ;
      uint64_t* r0 = R[tile * RPT];
      uint64_t* r1 = R[tile * RPT + RPT - 1];
      for (int grp = 0; grp < 8; ++grp, b += gs, r0 += 4, r1 += 4) group_move<RUN, RPT, TO_REGS, S32>(b, r0, r1);
    }
  } else {
    for (int tile = 0; tile < w.tiles; ++tile) {
      uint8_t* b = M + w.base[tile] * ESZ;
      for (int q = 0; q < RPT; ++q) {
        uint64_t* r = R[tile * RPT + q];
        for (int grp = 0; grp < 8; ++grp)
          for (int t = 0; t < 4; ++t) {
            uint8_t* p = b + grp * gs + (t * V + q * PR) * js;
            uint64_t& x = r[4 * grp + t];
            if constexpr (TO_REGS) {
              uint64_t v = 0;
              for (int s = 0; s < PR; ++s) v |= load_bytes(p + s * js, ESZ) << (s * ESZ * 8);
              x = frag_word(S32 ? ME_S32 : ME_None, v);
            } else {
              for (int s = 0; s < PR; ++s) store_bytes(p + s * js, x >> (s * ESZ * 8 % 64), ESZ);
            }
          }
      }
    }
  }
  if constexpr (TO_REGS) {
    const int distinct = w.tiles * RPT;
    for (int i = distinct; i < op.g[f].nregs; ++i) std::memcpy(R[i], R[i % distinct], 32 * sizeof(uint64_t));
  }
}
template <int ESZ, int PR, int V, bool TO_REGS>
[[gnu::always_inline]] inline void frag_move_v(const MmaOp& op, int f, uint8_t* M, uint64_t* const* R) {
  const bool js1 = op.walk[f].js == 1;
  if (TO_REGS && op.et[f] == ME_S32) {
    if (js1) return frag_move_n<ESZ, PR, V, true, TO_REGS, true>(op, f, M, R);
    return frag_move_n<ESZ, PR, V, false, TO_REGS, true>(op, f, M, R);
  }
  if (js1) return frag_move_n<ESZ, PR, V, true, TO_REGS, false>(op, f, M, R);
  frag_move_n<ESZ, PR, V, false, TO_REGS, false>(op, f, M, R);
}
// The forms mma_parse accepts: 8-bit (4 a register), 16-bit (2), 32- and 64-bit elements
// (1), in runs of V = per_reg (A, B) or 2 (C, D).
template <bool TO_REGS>
[[gnu::always_inline]] inline void frag_move(const MmaOp& op, int f, void* M, const uint64_t* const* R) {
  uint8_t* m = static_cast<uint8_t*>(M);
  uint64_t* const* r = const_cast<uint64_t* const*>(R);
  const FragGeom& g = op.g[f];
  switch (g.bits * 4 + g.v) {
    case 8 * 4 + 4: return frag_move_v<1, 4, 4, TO_REGS>(op, f, m, r);
    case 16 * 4 + 2: return frag_move_v<2, 2, 2, TO_REGS>(op, f, m, r);
    case 32 * 4 + 1: return frag_move_v<4, 1, 1, TO_REGS>(op, f, m, r);
    case 32 * 4 + 2: return frag_move_v<4, 1, 2, TO_REGS>(op, f, m, r);
    case 64 * 4 + 1: return frag_move_v<8, 1, 1, TO_REGS>(op, f, m, r);
    default: return frag_move_v<8, 1, 2, TO_REGS>(op, f, m, r);
  }
}
[[gnu::always_inline]] inline void frag_to_regs(const MmaOp& op, int f, const void* M, uint64_t* const* R) {
  frag_move<true>(op, f, const_cast<void*>(M), R);
}
[[gnu::always_inline]] inline void regs_to_frag(const MmaOp& op, int f, const uint64_t* const* R, void* M) { frag_move<false>(op, f, M, R); }

// A matrix line (8 to 128 bytes): sizes known at compile time copy with a few moves, where
// a memcpy of a variable size costs more than the line.
inline void copy_line(uint8_t* d, const uint8_t* s, size_t n) {
  switch (n) {
    case 16: std::memcpy(d, s, 16); break;
    case 32: std::memcpy(d, s, 32); break;
    case 64: std::memcpy(d, s, 64); break;
    default: std::memcpy(d, s, n);
  }
}

// wmma.load.{a,b,c} / wmma.store.d
template <bool STORE>
[[gnu::always_inline]] inline void wmma_ldst(Ctx& c, const Inst& I, uint32_t m) {
  if (!whole_warp(c, I, m)) return;
  const MmaOp& op = mma_op(c, I);
  const FragGeom& g = op.g[0];
  const uint64_t vb = var_base(c, I) + uint64_t(I.aoff);
  const uint64_t* AR = I.areg != NOREG ? c.src(I.areg) : nullptr;
  const uint64_t* S = I.s[0] != NOREG ? c.src(I.s[0]) : nullptr;
  const uint32_t esz = g.bits / 8;
  // Each row (column) must start at a multiple of the fragment's size (PTX ISA, "Matrix
  // Storage for WMMA"), capped at the 16 bytes the CUDA guide asks of ldm.
  const uint32_t align = std::min<uint32_t>(16, g.nregs * (g.bits == 64 ? 8u : 4u));
  const uint64_t def_stride = op.col ? g.rows : g.cols;
  // Memory lines: rows, or columns with .col; op.pos indexes line * len + offset.
  const int lines = op.col ? g.cols : g.rows, len = op.col ? g.rows : g.cols;
  uint64_t* R[8];
  for (int i = 0; i < g.nregs; ++i) R[i] = STORE ? const_cast<uint64_t*>(c.src(op.r[0][i])) : c.dst(op.r[0][i]);
  auto misaligned = [&](uint64_t base, uint64_t stride) {
    char b[96];
    snprintf(b, sizeof b, "address 0x%llx, stride %llu elements", (unsigned long long)base, (unsigned long long)stride);
    c.set_fault(LaunchError::Misaligned, I,
                std::string(STORE ? "wmma.store" : "wmma.load") + " with " + b + ": every row (column) must start at a multiple of " +
                    std::to_string(align) + " bytes");
  };
  // The usual case: every lane names the same matrix, whose lines lie in one region each
  // (and, for a store, do not overlap): the lines are copied to or from a dense matrix,
  // and the registers move from or to it.
  bool uniform = true;
  for (int l = 1; l < 32 && uniform; ++l) uniform = (!AR || AR[l] == AR[0]) && (!S || uint32_t(S[l]) == uint32_t(S[0]));
  if (uniform) {
    const uint64_t base = (AR ? AR[0] : 0) + vb, stride = S ? uint32_t(S[0]) : def_stride;
    if (base % align || (stride * esz) % align) return misaligned(base, stride);
    uint8_t* L[64];
    bool all = !STORE || stride >= uint64_t(len);
    for (int i = 0; i < lines && all; ++i) all = (L[i] = span_ptr(c, I.space, base + uint64_t(i) * stride * esz, uint32_t(len) * esz, STORE));
    if (all) {
      alignas(64) uint8_t T[4096];  // up to 512 elements of up to 8 bytes
      const size_t lb = size_t(len) * esz;
      for (int i = 0; i < lines; ++i) copy_line(T + i * lb, L[i], lb);  // a store keeps what its fragment does not cover
      if constexpr (STORE) regs_to_frag(op, 0, R, T);
      else frag_to_regs(op, 0, T, R);
      if (STORE)
        for (int i = 0; i < lines; ++i) copy_line(L[i], T + i * lb, lb);
      return;
    }
  }
  // Lane by lane, element by element: each address checked, a fault named precisely.
  const int per_reg = g.per_reg, sh = g.bits == 64 ? 0 : g.bits;
  for_lanes_until(m, [&](int l) {
    const uint64_t base = (AR ? AR[l] : 0) + vb;
    const uint64_t stride = S ? uint32_t(S[l]) : def_stride;
    if (base % align || (stride * esz) % align) return misaligned(base, stride), false;
    for (int i = 0; i < g.nregs; ++i) {
      const uint16_t* P = op.pos[0] + (i * 32 + l) * per_reg;
      uint64_t w = STORE ? R[i][l] : 0;
      for (int s = 0; s < per_reg; ++s) {
        const uint64_t off = uint64_t(P[s] / len) * stride + uint64_t(P[s] % len);
        uint8_t* p = mma_ptr(c, I, l, base + off * esz, esz, STORE);
        if (!p) return false;
        if constexpr (STORE) store_bytes(p, w >> (s * sh), esz);  // little-endian host: the low bytes
        else w |= load_bytes(p, esz) << (s * sh);
      }
      if constexpr (!STORE) R[i][l] = frag_word(op.et[0], w);
    }
    return true;
  });
}

template <bool STORE>
[[gnu::target("avx2")]] void h_wmma_ldst_avx2(Ctx& c, const Inst& I, uint32_t m) { wmma_ldst<STORE>(c, I, m); }
template <bool STORE>
void h_wmma_ldst(Ctx& c, const Inst& I, uint32_t m) {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) return h_wmma_ldst_avx2<STORE>(c, I, m);
  wmma_ldst<STORE>(c, I, m);
}

// D = A*B + C for float elements, k ascending per element (one rounding per addition; the
// products are exact). Eight-float vectors along D's rows, eight independent sums at a time
// (RB rows of NV vectors) so that the additions' latency overlaps; an AVX2 build where the
// host has AVX2. Shapes outside the usual ones take the scalar loop.
using f32x8 = float __attribute__((vector_size(32)));
template <int NV>
[[gnu::always_inline]] inline void mma_rows_f32(const float* A, const float* B, const float* C, float* D, int M, int K) {
  constexpr int N = 8 * NV, RB = 8 / NV;
  for (int i0 = 0; i0 < M; i0 += RB) {
    f32x8 d[RB][NV];
    for (int r = 0; r < RB; ++r)
      for (int v = 0; v < NV; ++v) std::memcpy(&d[r][v], C + (i0 + r) * N + 8 * v, 32);
    for (int k = 0; k < K; ++k) {
      f32x8 b[NV];
      for (int v = 0; v < NV; ++v) std::memcpy(&b[v], B + k * N + 8 * v, 32);
      for (int r = 0; r < RB; ++r) {
        const float a = A[(i0 + r) * K + k];
        for (int v = 0; v < NV; ++v) d[r][v] = d[r][v] + a * b[v];
      }
    }
    for (int r = 0; r < RB; ++r)
      for (int v = 0; v < NV; ++v) std::memcpy(D + (i0 + r) * N + 8 * v, &d[r][v], 32);
  }
}
[[gnu::always_inline]] inline void mma_f32_body(const float* A, const float* B, const float* C, float* D, int M, int N, int K) {
  if (N == 8 && M % 8 == 0) return mma_rows_f32<1>(A, B, C, D, M, K);
  if (N == 16 && M % 4 == 0) return mma_rows_f32<2>(A, B, C, D, M, K);
  if (N == 32 && M % 2 == 0) return mma_rows_f32<4>(A, B, C, D, M, K);
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      float d = C[i * N + j];
      for (int k = 0; k < K; ++k) d = d + A[i * K + k] * B[k * N + j];
      D[i * N + j] = d;
    }
}
[[gnu::target("avx2")]] inline void mma_f32_avx2(const float* A, const float* B, const float* C, float* D, int M, int N, int K) {
  mma_f32_body(A, B, C, D, M, N, K);
}
inline void mma_f32(const float* A, const float* B, const float* C, float* D, int M, int N, int K) {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) mma_f32_avx2(A, B, C, D, M, N, K);
  else mma_f32_body(A, B, C, D, M, N, K);
}

// D = A*B + C for doubles: each element a chain of fused multiply-adds, k ascending.
// Four-double vectors along D's rows in an AVX2+FMA build where the host has both (the
// same fused operations, bit for bit: the scalar loop calls libm's fma per product).
[[gnu::target("avx2,fma")]] inline void mma_f64_fma(const double* A, const double* B, const double* C, double* D, int M,
                                                   int N, int K) {
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; j += 4) {
      __m256d d = _mm256_loadu_pd(C + i * N + j);
      for (int k = 0; k < K; ++k) d = _mm256_fmadd_pd(_mm256_set1_pd(A[i * K + k]), _mm256_loadu_pd(B + k * N + j), d);
      _mm256_storeu_pd(D + i * N + j, d);
    }
}
inline void mma_f64(const double* A, const double* B, const double* C, double* D, int M, int N, int K) {
  static const bool fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (fma && N % 4 == 0) return mma_f64_fma(A, B, C, D, M, N, K);
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double d = C[i * N + j];
      for (int k = 0; k < K; ++k) d = std::fma(A[i * K + k], B[k * N + j], d);
      D[i * N + j] = d;
    }
}

// out[i * cols + j] = conv(in[i * cols + j]), or conv(in[j * rows + i]) where `in` holds the
// matrix transposed.
template <class In, class Out, class Conv>
[[gnu::always_inline]] inline void widen(const In* in, Out* out, int rows, int cols, bool tr, Conv conv) {
  if (!tr) {
    for (int e = 0; e < rows * cols; ++e) out[e] = conv(in[e]);
    return;
  }
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) out[i * cols + j] = conv(in[j * rows + i]);
}

// One operand's raw elements (16- or 32-bit) widened to f32 (`tr`: B, gathered transposed),
// the element type chosen once.
[[gnu::always_inline]] inline void widen_f32(const MmaOp& op, int f, const uint64_t* const* R, MmaEt t, float* out,
                                             int rows, int cols, bool tr) {
  alignas(32) uint32_t raw[512];
  regs_to_frag(op, f, R, raw);
  const auto* h = reinterpret_cast<const uint16_t*>(raw);
  switch (t) {
    case ME_F16: return widen(h, out, rows, cols, tr, [](uint16_t x) { return half_to_float(x); });
    case ME_BF16: return widen(h, out, rows, cols, tr, [](uint16_t x) { return bf16_to_float(x); });
    case ME_TF32: return widen(raw, out, rows, cols, tr, [](uint32_t x) { return std::bit_cast<float>(x & 0xffffe000u); });
    default: return widen(raw, out, rows, cols, tr, [](uint32_t x) { return std::bit_cast<float>(x); });
  }
}

// D = A*B + C over the whole warp (wmma.mma and mma.sync). The operands' raw elements are
// gathered first (A and C row-major, B transposed: the orders where a lane's elements are
// contiguous), all before D is written (D often names C's registers), then widened to the
// arithmetic's type (B transposed back), multiplied, and D's elements moved back.
[[gnu::always_inline]] inline void mma_warp(Ctx& c, const Inst& I, uint32_t m) {
  if (!whole_warp(c, I, m)) return;
  const MmaOp& op = mma_op(c, I);
  const int M = op.m, N = op.n, K = op.k;
  const uint64_t* R[4][8];
  for (int f = 1; f < 4; ++f)
    for (int i = 0; i < op.g[f].nregs; ++i) R[f][i] = c.src(op.r[f][i]);
  uint64_t* Dr[8];
  for (int i = 0; i < op.g[0].nregs; ++i) Dr[i] = c.dst(op.r[0][i]);
  const MmaEt at = op.et[1], bt = op.et[2], ct = op.et[3];
  if (at == ME_F64) {
    alignas(32) double A[512], Bt[512], B[512], C[512], D[512];
    regs_to_frag(op, 1, R[1], A);
    regs_to_frag(op, 2, R[2], Bt);
    regs_to_frag(op, 3, R[3], C);
    widen(Bt, B, K, N, true, [](double x) { return x; });
    mma_f64(A, B, C, D, M, N, K);
    frag_to_regs(op, 0, D, Dr);
  } else if (at == ME_S8 || at == ME_U8) {
    uint8_t a8[512], b8[512];
    int32_t c32[512], d32[512];
    int64_t A[512], B[512], C[512];
    regs_to_frag(op, 1, R[1], a8);
    regs_to_frag(op, 2, R[2], b8);
    regs_to_frag(op, 3, R[3], c32);
    widen(a8, A, M, K, false, [&](uint8_t x) { return mma_int(at, x); });
    widen(b8, B, K, N, true, [&](uint8_t x) { return mma_int(bt, x); });
    widen(c32, C, M, N, false, [](int32_t x) { return int64_t(x); });
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j) {
        int64_t d = C[i * N + j];
        for (int k = 0; k < K; ++k) d += A[i * K + k] * B[k * N + j];
        d32[i * N + j] = int32_t(uint32_t(op.satfinite ? std::clamp<int64_t>(d, INT32_MIN, INT32_MAX) : d));
      }
    frag_to_regs(op, 0, d32, Dr);
  } else {
    alignas(32) float A[512], B[512], C[512], D[512];
    widen_f32(op, 1, R[1], at, A, M, K, false);
    widen_f32(op, 2, R[2], bt, B, K, N, true);
    if (ct == ME_F32) regs_to_frag(op, 3, R[3], C);  // f32 bits as they are
    else widen_f32(op, 3, R[3], ct, C, M, N, false);
    mma_f32(A, B, C, D, M, N, K);
    if (op.et[0] == ME_F32) return frag_to_regs(op, 0, D, Dr);
    uint16_t h[512];
    for (int e = 0; e < M * N; ++e) h[e] = to_half(double(D[e]));
    frag_to_regs(op, 0, h, Dr);
  }
}

// The moves and conversions vectorise well with AVX2; a build for it where the host has it.
[[gnu::target("avx2,fma")]] void h_mma_avx2(Ctx& c, const Inst& I, uint32_t m) { mma_warp(c, I, m); }
void h_mma(Ctx& c, const Inst& I, uint32_t m) {
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (avx2) return h_mma_avx2(c, I, m);
  mma_warp(c, I, m);
}

// ldmatrix / stmatrix .m8n8 .b16: lane 8i+r gives the address of row r of matrix i; lane
// l's register i holds row l/4, columns 2(l%4) and 2(l%4)+1 of matrix i (low half first),
// or with .trans the same elements of the transposed matrix.
template <bool STORE>
void h_ldstmatrix(Ctx& c, const Inst& I, uint32_t m) {
  if (!whole_warp(c, I, m)) return;
  const MmaOp& op = mma_op(c, I);
  const uint64_t vb = var_base(c, I) + uint64_t(I.aoff);
  const uint64_t* AR = I.areg != NOREG ? c.src(I.areg) : nullptr;
  uint16_t rows[4][8][8];  // matrix, row, column
  uint8_t* ptr[4][8];
  for (int i = 0; i < op.num; ++i)
    for (int r = 0; r < 8; ++r) {
      const int l = i * 8 + r;
      ptr[i][r] = mma_ptr(c, I, l, (AR ? AR[l] : 0) + vb, 16, STORE);
      if (!ptr[i][r]) return;
      if (!STORE) std::memcpy(rows[i][r], ptr[i][r], 16);
    }
  for (int i = 0; i < op.num; ++i) {
    const uint64_t* S = STORE ? c.src(op.r[0][i]) : nullptr;
    uint64_t* D = STORE ? nullptr : c.dst(op.r[0][i]);
    for (int l = 0; l < 32; ++l) {
      const int r = l >> 2, c0 = (l & 3) * 2;
      for (int j = 0; j < 2; ++j) {
        uint16_t& e = op.col ? rows[i][c0 + j][r] : rows[i][r][c0 + j];
        if (STORE) e = uint16_t(S[l] >> (16 * j));
        else if (j == 0) D[l] = e;
        else D[l] |= uint64_t(e) << 16;
      }
    }
  }
  if (STORE)
    for (int i = 0; i < op.num; ++i)
      for (int r = 0; r < 8; ++r) std::memcpy(ptr[i][r], rows[i][r], 16);
}

// cvt.{rn,rz,rna}{.satfinite}{.relu}.tf32.f32: a0 = mode (0 rn, 1 rz, 2 rna), a1 bit 0
// satfinite, bit 1 relu.
void h_cvt_tf32(Ctx& c, const Inst& I, uint32_t m) {
  const uint64_t* A = c.src(I.s[0]);
  uint64_t* D = c.dst(I.d[0]);
  const int mode = int(I.a0);
  const bool sat = I.a1 & 1, relu = I.a1 & 2;
  for_lanes(m, [&](int l) { D[l] = to_tf32(uint32_t(A[l]), mode, sat, relu); });
}

}  // namespace
}  // namespace wh::ptx::detail
