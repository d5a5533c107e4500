// Tensor-core (warp matrix) instructions: wmma.load/store/mma, mma.sync, ldmatrix and
// stmatrix. The decoded form of one instruction, and where each element of a fragment
// lives in the registers of the warp's lanes.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace wh::ptx::detail {

enum MmaKind : uint8_t { MK_WLoad, MK_WStore, MK_WMma, MK_Mma, MK_LdMatrix, MK_StMatrix };
enum MmaEt : uint8_t { ME_None, ME_F16, ME_BF16, ME_TF32, ME_F32, ME_F64, ME_S8, ME_U8, ME_S32 };
enum MmaFrag : uint8_t { MF_A, MF_B, MF_C };

// One fragment: a rows x cols matrix (A m x k, B k x n, C/D m x n) spread over 32 lanes.
// Lane l = 4*group + t holds tiles of 8 rows x 4v columns (B: 8 columns x 4v rows), in each
// tile row `group`, v consecutive elements from column t*v. This is the layout the PTX ISA
// documents for every mma.sync shape; wmma fragments (whose layout the ISA leaves
// unspecified) use the same rule, so a wmma fragment is a set of mma fragments.
struct FragGeom {
  uint8_t rows = 0, cols = 0;
  uint8_t bits = 0;      // element width
  uint8_t per_reg = 1;   // elements per register (a 64-bit register holds one f64)
  uint8_t v = 1;         // consecutive elements a lane holds along K (C/D: along N)
  uint8_t distinct = 0;  // rows * cols / 32; elements past it repeat the first ones (f16 wmma A/B)
  uint8_t nregs = 0;
  bool b = false;        // matrix B: tiles run down K first
};

// Element e of lane `lane` -> (row, col) of the fragment's matrix (e < g.distinct).
inline void frag_coord(const FragGeom& g, int lane, int e, int& row, int& col) {
  const int grp = lane >> 2, t = lane & 3, w = 4 * g.v;
  const int tile = e / g.v, j = e % g.v;
  if (!g.b) {  // A, C, D: tiles run down the rows first (a0,a1 rows 0-7; a2,a3 rows 8-15; ...)
    const int nrb = g.rows / 8;
    row = (tile % nrb) * 8 + grp;
    col = (tile / nrb) * w + t * g.v + j;
  } else {  // B: k-blocks first (b0,b1 k 0-7; b2,b3 k 8-15), then 8-column blocks of N
    const int nkb = g.rows / w;
    row = (tile % nkb) * w + t * g.v + j;
    col = (tile / nkb) * 8 + grp;
  }
}

// Where a fragment's elements lie in a dense matrix (pos's placement, but B of a product
// transposed), as strides: the run of v elements lane 4*grp+t holds in tile T starts at
// base[T] + grp*gs + t*v*js, its elements js apart. Element j of that run is element T*v+j
// of the lane: slot (T*v+j) % per_reg of register (T*v+j) / per_reg. Handlers walk it
// with fixed loops, four lanes' runs at a time where js is 1 (no lookup per element).
struct FragWalk {
  uint8_t tiles = 0;
  uint16_t gs = 0, js = 0;
  uint16_t base[16] = {};
};

struct MmaOp {
  MmaKind kind = MK_Mma;
  MmaFrag frag = MF_A;  // wmma.load/store: the matrix
  uint16_t m = 0, n = 0, k = 0;
  MmaEt et[4] = {};     // d, a, b, c (wmma.load/store: et[0])
  bool col = false;     // wmma.load/store: column-major memory; ldmatrix/stmatrix: .trans
  bool satfinite = false;
  uint8_t num = 0;      // ldmatrix/stmatrix: matrices (1, 2, 4)
  FragGeom g[4];        // d, a, b, c (wmma.load/store: g[0])
  uint32_t r[4][8] = {};  // register slots of d, a, b, c (load/store/ldmatrix/stmatrix: r[0])
  // pos[f][(i * 32 + l) * g[f].per_reg + s]: the element in bits s*bits.. of register i of
  // lane l of fragment f, as an index into its matrix: row * cols + col, or, for
  // wmma.load/store with .col, col * rows + row (the order of the matrix in memory).
  // Elements past g.distinct repeat the first ones (the same index). Computed once at
  // decode; a wmma.load/store whose lanes name different matrices goes element by
  // element with it. Everything else walks `walk`.
  uint16_t pos[4][512] = {};
  FragWalk walk[4];
};

inline void mma_coords(MmaOp& op) {
  const bool colmaj = (op.kind == MK_WLoad || op.kind == MK_WStore) && op.col;
  for (int f = 0; f < 4; ++f) {
    const FragGeom& g = op.g[f];
    if (!g.nregs || !g.distinct) continue;
    for (int i = 0; i < g.nregs; ++i)
      for (int l = 0; l < 32; ++l)
        for (int s = 0; s < g.per_reg; ++s) {
          int row, col;
          frag_coord(g, l, (i * g.per_reg + s) % g.distinct, row, col);
          op.pos[f][(i * 32 + l) * g.per_reg + s] = uint16_t(colmaj ? col * g.rows + row : row * g.cols + col);
        }
    // The same placement as strides (frag_coord): rows rs apart, columns cs apart. The
    // products (wmma.mma, mma) take B transposed, where a lane's runs (down K) are contiguous.
    const bool tr = colmaj || (f == 2 && (op.kind == MK_WMma || op.kind == MK_Mma));
    const int rs = tr ? 1 : g.cols, cs = tr ? g.rows : 1, w = 4 * g.v;
    FragWalk& fw = op.walk[f];
    fw.tiles = uint8_t(g.distinct / g.v);
    fw.gs = uint16_t(g.b ? cs : rs);  // B: a group holds a column; A, C: a row
    fw.js = uint16_t(g.b ? rs : cs);
    for (int t = 0; t < fw.tiles; ++t) {
      if (!g.b) {
        const int nrb = g.rows / 8;
        fw.base[t] = uint16_t((t % nrb) * 8 * rs + (t / nrb) * w * cs);
      } else {
        const int nkb = g.rows / w;
        fw.base[t] = uint16_t((t % nkb) * w * rs + (t / nkb) * 8 * cs);
      }
    }
  }
}

enum class MmaParse { Ok, Unsupported, Error };
// Decodes the modifiers of a wmma/mma/ldmatrix/stmatrix opcode (base and the dot-separated
// parts after it) into `op`: kind, shape, element types, layouts and fragment sizes.
// Unsupported: a valid form the sim device does not run; Error: not a valid form. `msg`
// names the problem.
MmaParse mma_parse(std::string_view base, const std::vector<std::string_view>& mods, MmaOp& op, std::string& msg);

// cvt{.rna,.rn,.rz}{.satfinite}{.relu}.tf32.f32: f32 bits rounded to tf32 (10 explicit
// mantissa bits, the low 13 bits zero). mode: 0 rn, 1 rz, 2 rna.
inline uint32_t to_tf32(uint32_t x, int mode, bool satfinite, bool relu) {
  const uint32_t mag = x & 0x7fffffffu;
  if (mag > 0x7f800000u) return 0x7fffffffu;  // NaN: the canonical NaN
  if (relu && (x >> 31) && mag) return 0;
  uint32_t r = x;
  if (mag < 0x7f800000u) {
    if (mode == 2) r = (x + 0x1000u) & 0xffffe000u;                              // ties away from zero
    else if (mode == 0) r = (x + 0xfffu + ((x >> 13) & 1u)) & 0xffffe000u;       // ties to even
    else r = x & 0xffffe000u;                                                     // toward zero
  }
  if (satfinite && (r & 0x7fffffffu) == 0x7f800000u) r = (r & 0x80000000u) | 0x7f7fe000u;
  return r;
}

}  // namespace wh::ptx::detail
