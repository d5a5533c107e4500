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

inline float mma_float(MmaEt t, uint64_t b) {
  switch (t) {
    case ME_F16: return half_to_float(uint16_t(b));
    case ME_BF16: return bf16_to_float(uint16_t(b));
    case ME_TF32: return std::bit_cast<float>(uint32_t(b) & 0xffffe000u);
    default: return std::bit_cast<float>(uint32_t(b));
  }
}
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

// wmma.load.{a,b,c} / wmma.store.d
template <bool STORE>
void h_wmma_ldst(Ctx& c, const Inst& I, uint32_t m) {
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
  const uint64_t* V[8];
  if (STORE)
    for (int i = 0; i < g.nregs; ++i) V[i] = c.src(op.r[0][i]);
  // Lane l's elements, each at line[row or column] + offset (line: a memory row of the
  // matrix, or a column with .col).
  auto lane = [&](int l, auto&& line) {
    const uint16_t* rc = op.rc[0] + l * g.distinct;
    const int sh = g.bits == 64 ? 0 : g.bits;
    for (int i = 0, e = 0; i < g.nregs; ++i) {
      uint64_t w = STORE ? V[i][l] : 0;
      for (int s = 0; s < g.per_reg; ++s, ++e) {
        const int x = e < g.distinct ? e : e % g.distinct;
        uint8_t* p = op.col ? line(rc[x] & 0xff, rc[x] >> 8) : line(rc[x] >> 8, rc[x] & 0xff);
        if (!p) return false;
        if constexpr (STORE) store_bytes(p, w >> (s * sh), esz);  // little-endian host: the low bytes
        else w |= load_bytes(p, esz) << (s * sh);
      }
      if constexpr (!STORE) c.dst(op.r[0][i])[l] = frag_word(op.et[0], w);
    }
    return true;
  };
  auto misaligned = [&](uint64_t base, uint64_t stride) {
    char b[96];
    snprintf(b, sizeof b, "address 0x%llx, stride %llu elements", (unsigned long long)base, (unsigned long long)stride);
    c.set_fault(LaunchError::Misaligned, I,
                std::string(STORE ? "wmma.store" : "wmma.load") + " with " + b + ": every row (column) must start at a multiple of " +
                    std::to_string(align) + " bytes");
  };
  // The usual case: every lane names the same matrix; each of its lines is looked up once.
  bool uniform = true;
  for (int l = 1; l < 32 && uniform; ++l) uniform = (!AR || AR[l] == AR[0]) && (!S || uint32_t(S[l]) == uint32_t(S[0]));
  if (uniform) {
    const uint64_t base = (AR ? AR[0] : 0) + vb, stride = S ? uint32_t(S[0]) : def_stride;
    if (base % align || (stride * esz) % align) return misaligned(base, stride);
    const int lines = op.col ? g.cols : g.rows, len = op.col ? g.rows : g.cols;
    uint8_t* L[64];
    bool all = true;
    for (int i = 0; i < lines && all; ++i) all = (L[i] = span_ptr(c, I.space, base + uint64_t(i) * stride * esz, uint32_t(len) * esz, STORE));
    if (all) {
      for (int l = 0; l < 32; ++l) lane(l, [&](int li, int o) { return L[li] + size_t(o) * esz; });
      return;
    }
  }
  for_lanes_until(m, [&](int l) {
    const uint64_t base = (AR ? AR[l] : 0) + vb;
    const uint64_t stride = S ? uint32_t(S[l]) : def_stride;
    if (base % align || (stride * esz) % align) return misaligned(base, stride), false;
    return lane(l, [&](int li, int o) {
      const uint64_t off = uint64_t(li) * stride + uint64_t(o);
      return mma_ptr(c, I, l, base + off * esz, esz, STORE);
    });
  });
}

// Lane l's distinct elements of fragment f in order: fn(e, raw bits). The geometry is
// copied into locals: the callers store through pointers the compiler cannot tell apart
// from it.
template <class F>
inline void frag_lane(const uint64_t* const* R, const FragGeom& g, int l, F&& fn) {
  const int bits = g.bits, per_reg = g.per_reg, distinct = g.distinct;
  const uint64_t mask = bits == 64 ? ~0ull : (1ull << bits) - 1;
  for (int i = 0, e = 0; e < distinct; ++i) {
    const uint64_t w = R[i][l];
    for (int s = 0; s < per_reg && e < distinct; ++s, ++e) fn(e, (w >> (s * bits)) & mask);
  }
}

// D = A*B + C over the whole warp (wmma.mma and mma.sync).
void h_mma(Ctx& c, const Inst& I, uint32_t m) {
  if (!whole_warp(c, I, m)) return;
  const MmaOp& op = mma_op(c, I);
  const int M = op.m, N = op.n, K = op.k;
  const uint64_t* R[4][8];
  for (int f = 1; f < 4; ++f)
    for (int i = 0; i < op.g[f].nregs; ++i) R[f][i] = c.src(op.r[f][i]);
  // Every operand is gathered before D is written: D often names C's registers.
  auto gather = [&](int f, auto* out, auto conv) {
    const FragGeom& g = op.g[f];
    const uint16_t* rc = op.rc[f];
    const int cols = g.cols, distinct = g.distinct;
    for (int l = 0; l < 32; ++l, rc += distinct)
      frag_lane(R[f], g, l, [&](int e, uint64_t b) { out[(rc[e] >> 8) * cols + (rc[e] & 0xff)] = conv(b); });
  };
  const FragGeom& gd = op.g[0];
  uint64_t out[32][8];  // D's registers per lane
  auto scatter = [&](auto value_bits) {
    const uint16_t* rc = op.rc[0];
    const int sh = gd.bits == 64 ? 0 : gd.bits;
    for (int l = 0; l < 32; ++l, rc += gd.distinct)
      for (int i = 0, e = 0; i < gd.nregs; ++i) {
        uint64_t w = 0;
        for (int s = 0; s < gd.per_reg && e < gd.distinct; ++s, ++e) w |= value_bits((rc[e] >> 8) * N + (rc[e] & 0xff)) << (s * sh);
        out[l][i] = frag_word(op.et[0], w);
      }
  };
  // D's rows are computed k by k across all columns at once, which adds in the same order
  // per element as a k-inner loop; N fixed at compile time for the usual shapes so that
  // the column loop is vectorised.
  auto product = [&](auto* A, auto* B, auto* C, auto* D, auto madd) {
    auto rows = [&](auto nn) {
      const int n = nn.value ? int(nn.value) : N;
      for (int i = 0; i < M; ++i) {
        auto* d = D + i * n;
        std::copy(C + i * n, C + i * n + n, d);
        for (int k = 0; k < K; ++k) {
          const auto a = A[i * K + k];
          const auto* b = B + k * n;
          for (int j = 0; j < n; ++j) d[j] = madd(a, b[j], d[j]);
        }
      }
    };
    switch (N) {
      case 8: return rows(std::integral_constant<int, 8>{});
      case 16: return rows(std::integral_constant<int, 16>{});
      case 32: return rows(std::integral_constant<int, 32>{});
      default: return rows(std::integral_constant<int, 0>{});
    }
  };
  const MmaEt at = op.et[1], bt = op.et[2], ct = op.et[3];
  if (at == ME_F64) {
    double A[512], B[512], C[512], D[512];
    auto f64 = [](uint64_t b) { return std::bit_cast<double>(b); };
    gather(1, A, f64);
    gather(2, B, f64);
    gather(3, C, f64);
    product(A, B, C, D, [](double a, double b, double d) { return std::fma(a, b, d); });
    scatter([&](int x) { return std::bit_cast<uint64_t>(D[x]); });
  } else if (at == ME_S8 || at == ME_U8) {
    int64_t A[512], B[512], C[512], D[512];
    gather(1, A, [&](uint64_t b) { return mma_int(at, b); });
    gather(2, B, [&](uint64_t b) { return mma_int(bt, b); });
    gather(3, C, [&](uint64_t b) { return mma_int(ct, b); });
    product(A, B, C, D, [](int64_t a, int64_t b, int64_t d) { return d + a * b; });
    if (op.satfinite)
      for (int x = 0; x < M * N; ++x) D[x] = std::clamp<int64_t>(D[x], INT32_MIN, INT32_MAX);
    scatter([&](int x) { return uint64_t(uint32_t(D[x])); });
  } else {
    float A[512], B[512], C[512], D[512];
    // The element type chosen once per fragment, not per element.
    auto gather_f = [&](int f, float* to, MmaEt t) {
      switch (t) {
        case ME_F16: return gather(f, to, [](uint64_t b) { return mma_float(ME_F16, b); });
        case ME_BF16: return gather(f, to, [](uint64_t b) { return mma_float(ME_BF16, b); });
        case ME_TF32: return gather(f, to, [](uint64_t b) { return mma_float(ME_TF32, b); });
        default: return gather(f, to, [](uint64_t b) { return mma_float(ME_F32, b); });
      }
    };
    gather_f(1, A, at);
    gather_f(2, B, bt);
    gather_f(3, C, ct);
    product(A, B, C, D, [](float a, float b, float d) { return d + a * b; });  // exact products
    if (op.et[0] == ME_F16) scatter([&](int x) { return uint64_t(to_half(double(D[x]))); });
    else scatter([&](int x) { return uint64_t(std::bit_cast<uint32_t>(D[x])); });
  }
  for (int i = 0; i < gd.nregs; ++i) {
    uint64_t* Dr = c.dst(op.r[0][i]);
    for (int l = 0; l < 32; ++l) Dr[l] = out[l][i];
  }
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
