// Texture and surface handlers: tex, tld4, txq, suld.b, sust.b, suq on
// texture/surface objects (a 64-bit handle in a register). The sampling
// arithmetic follows the CUDA Programming Guide's "Texture Fetching"
// appendix: linear filtering weights are 9-bit fixed point with 8
// fractional bits; wrap and mirror apply only to normalized coordinates.
#pragma once
#include <algorithm>
#include <cmath>

#include "ops.hpp"

namespace wh::ptx::detail {
namespace {

// Inst encoding (set by the parser):
//   areg = handle register; tex/tld4: s[0..2] coordinates (layer first for
//   a1d/a2d), d[0..3] results; sust: s[0..2] coordinates, d[0..3] the values
//   to store (source registers). a0 = geometry (kGeom*). a1: bits 0-1 result
//   type (0 f32, 1 s32, 2 u32), bit 4 integer coordinates, bits 8-10 tld4
//   component + 1; surfaces: bits 0-7 bytes per component, bits 8-11 vector
//   length, bits 12-13 out-of-range mode (0 trap, 1 clamp, 2 zero);
//   txq/suq: a1 = query.
enum : uint32_t { kGeom1d = 1, kGeom2d, kGeom3d, kGeomA1d, kGeomA2d };
enum : uint32_t { kQWidth, kQHeight, kQDepth, kQArraySize, kQNormCoords, kQFilter, kQAddr0, kQAddr1, kQAddr2,
                  kQChanType, kQChanOrder, kQLevels, kQSamples };

// cudaTextureAddressMode values.
enum : uint8_t { kAddrWrap = 0, kAddrClamp = 1, kAddrMirror = 2, kAddrBorder = 3 };

inline int geom_dims(uint32_t g) { return g == kGeom1d || g == kGeomA1d ? 1 : g == kGeom3d ? 3 : 2; }
inline bool geom_layered(uint32_t g) { return g == kGeomA1d || g == kGeomA2d; }

// The whole backing store of `v` in host memory, checked against its layout
// (so a corrupt or stale view can never reach outside its allocation).
inline uint8_t* tex_backing(Ctx& c, const TexView& v) {
  if (v.w == 0 || v.h == 0 || v.d == 0 || v.nch == 0 || v.cbytes == 0) return nullptr;
  const uint64_t elem = uint64_t(v.nch) * v.cbytes;
  unsigned __int128 need = (unsigned __int128)(v.d - 1) * v.slice + (unsigned __int128)(v.h - 1) * v.pitch +
                           (unsigned __int128)v.w * elem;
  if (need > v.bytes || uint64_t(v.w) * elem > v.pitch || (v.d > 1 && uint64_t(v.h) * v.pitch > v.slice)) return nullptr;
  return c.mem->translate(v.dptr, v.bytes, false);
}

inline bool tex_resolve(Ctx& c, const Inst& I, uint64_t h, bool surf) {
  if (c.tex_handle == h && c.tex_is_surf == surf && h) return true;
  TexView v;
  bool ok = h && (surf ? c.mem->surface(h, v) : c.mem->texture(h, v));
  uint8_t* p = ok ? tex_backing(c, v) : nullptr;
  if (!p) {
    char b[24];
    snprintf(b, sizeof b, "%llx", (unsigned long long)h);
    c.set_fault(LaunchError::BadAccess, I,
                std::string(surf ? "surface" : "texture") + " object 0x" + b + (ok ? " names memory that was freed" : " does not exist"));
    return false;
  }
  c.tex = v;
  c.tex_host = p;
  c.tex_handle = h;
  c.tex_is_surf = surf;
  return true;
}

inline float srgb_to_linear(float x) {
  return x <= 0.04045f ? x / 12.92f : std::pow((x + 0.055f) / 1.055f, 2.4f);
}

// One texel as four 32-bit result words (float bits, or integers for an
// element-type read into s32/u32).
struct Texel {
  uint32_t v[4];
};

inline Texel texel_load(const TexView& t, const uint8_t* p, bool as_float) {
  Texel r{{0, 0, 0, 0}};
  for (int ch = 0; ch < t.nch; ++ch) {
    const uint8_t* q = p + ch * t.cbytes;
    uint32_t bits = 0;
    if (t.cbytes == 1) {
      uint8_t x = *q;
      if (t.ckind == 0) {
        int8_t s = int8_t(x);
        bits = as_float ? std::bit_cast<uint32_t>(t.read_normalized ? std::fmax(float(s) / 127.0f, -1.0f) : float(s)) : uint32_t(int32_t(s));
      } else {
        bits = as_float ? std::bit_cast<uint32_t>(t.read_normalized ? float(x) / 255.0f : float(x)) : x;
      }
    } else if (t.cbytes == 2) {
      uint16_t x;
      std::memcpy(&x, q, 2);
      if (t.ckind == 2) {
        float f = half_to_float(x);
        bits = as_float ? std::bit_cast<uint32_t>(f) : std::bit_cast<uint32_t>(f);
      } else if (t.ckind == 0) {
        int16_t s = int16_t(x);
        bits = as_float ? std::bit_cast<uint32_t>(t.read_normalized ? std::fmax(float(s) / 32767.0f, -1.0f) : float(s)) : uint32_t(int32_t(s));
      } else {
        bits = as_float ? std::bit_cast<uint32_t>(t.read_normalized ? float(x) / 65535.0f : float(x)) : x;
      }
    } else {
      std::memcpy(&bits, q, 4);
      if (as_float && t.ckind != 2) bits = std::bit_cast<uint32_t>(t.ckind == 0 ? float(int32_t(bits)) : float(bits));
    }
    if (as_float && t.srgb && ch < 3 && t.cbytes == 1 && t.ckind == 1 && t.read_normalized)
      bits = std::bit_cast<uint32_t>(srgb_to_linear(std::bit_cast<float>(bits)));
    r.v[ch] = bits;
  }
  return r;
}

// Maps an integer texel index to [0, n) for the address mode, or -1 for
// a border texel.
inline int64_t tex_index(int64_t i, int64_t n, uint8_t mode, bool norm) {
  if (i >= 0 && i < n) return i;
  if (mode == kAddrBorder) return -1;
  if (norm && mode == kAddrWrap) return ((i % n) + n) % n;
  if (norm && mode == kAddrMirror) {
    int64_t p = ((i % (2 * n)) + 2 * n) % (2 * n);
    return p < n ? p : 2 * n - 1 - p;
  }
  return i < 0 ? 0 : n - 1;  // clamp (and wrap/mirror with unnormalized coordinates)
}

// Texel-space coordinate of a float coordinate: normalized coordinates are
// first folded by wrap/mirror, then scaled by the size.
inline double tex_coord(float u, int64_t n, uint8_t mode, bool norm) {
  double x = std::fmin(std::fmax(double(u), -1e9), 1e9);  // also maps NaN to a finite value
  if (norm) {
    if (mode == kAddrWrap) x = x - std::floor(x);
    else if (mode == kAddrMirror) {
      double f = std::floor(x);
      x = x - f;
      if (int64_t(f) & 1) x = 1.0 - x;
    }
    x *= double(n);
  }
  return x;
}

// The 9-bit fixed-point weight of linear filtering.
inline float tex_weight(double frac) { return float(std::nearbyint(frac * 256.0) / 256.0); }

struct TexSampler {
  const TexView& t;
  const uint8_t* base;
  bool as_float;
  int64_t n[3];
  int dims;

  Texel at(int64_t layer, const int64_t* idx) const {
    int64_t ii[3] = {0, 0, 0};
    for (int k = 0; k < dims; ++k) {
      ii[k] = tex_index(idx[k], n[k], t.addr[k], t.norm_coords);
      if (ii[k] < 0 || (t.linear_mem && idx[k] != ii[k])) {  // border; linear memory reads 0 outside
        Texel b{};
        if (as_float && !t.linear_mem)
          for (int ch = 0; ch < 4; ++ch) b.v[ch] = std::bit_cast<uint32_t>(t.border[ch]);
        return b;
      }
    }
    const uint64_t elem = uint64_t(t.nch) * t.cbytes;
    uint64_t z = t.layered ? uint64_t(layer) : uint64_t(ii[2]);
    return texel_load(t, base + z * t.slice + uint64_t(ii[1]) * t.pitch + uint64_t(ii[0]) * elem, as_float);
  }
};

// tex.{1d,2d,3d,a1d,a2d}.v4.{f32,s32,u32}.{f32,s32} and tld4.{r,g,b,a}.2d.v4.*.f32
void h_tex(Ctx& c, const Inst& I, uint32_t m) {
  const uint64_t* H = c.src(I.areg);
  const uint32_t geom = I.a0;
  const int dims = geom_dims(geom);
  const bool layered = geom_layered(geom);
  const bool as_float = (I.a1 & 3) == 0, int_coords = I.a1 & 0x10;
  const int gather = int((I.a1 >> 8) & 7);  // tld4 component + 1
  const uint64_t* S[3] = {nullptr, nullptr, nullptr};
  for (int k = 0; k < 3; ++k)
    if (I.s[k] != NOREG) S[k] = c.src(I.s[k]);
  uint64_t* D[4];
  for (int k = 0; k < 4; ++k) D[k] = I.d[k] != NOREG ? c.dst(I.d[k]) : nullptr;
  for_lanes_until(m, [&](int l) {
    if (!tex_resolve(c, I, H[l], false)) return false;
    const TexView& t = c.tex;
    if (t.layered != layered || (t.dims != dims && !(t.linear_mem && dims == 1))) {
      c.set_fault(LaunchError::BadAccess, I, "texture object's geometry does not match the instruction");
      return false;
    }
    TexSampler smp{t, c.tex_host, as_float, {int64_t(t.w), int64_t(t.h), int64_t(t.d)}, dims};
    int64_t layer = 0;
    int ci = 0;
    if (layered) {
      layer = int64_t(uint32_t(S[0][l]));
      int64_t nl = int64_t(t.d);
      layer = layer >= nl ? nl - 1 : layer;
      ci = 1;
    }
    Texel out{};
    if (int_coords) {
      int64_t idx[3] = {0, 0, 0};
      for (int k = 0; k < dims; ++k) idx[k] = int64_t(int32_t(S[ci + k][l]));
      out = smp.at(layer, idx);
    } else {
      double x[3] = {0, 0, 0};
      for (int k = 0; k < dims; ++k)
        x[k] = tex_coord(std::bit_cast<float>(uint32_t(S[ci + k][l])), smp.n[k], t.addr[k], t.norm_coords);
      if (gather || (t.filter_linear && as_float)) {
        int64_t i0[3] = {0, 0, 0};
        float a[3] = {0, 0, 0};
        for (int k = 0; k < dims; ++k) {
          double xb = x[k] - 0.5, f = std::floor(xb);
          i0[k] = int64_t(f);
          a[k] = tex_weight(xb - f);
        }
        if (gather) {  // the four texels of the 2x2 footprint, counter-clockwise from (i, j+1)
          static const int off[4][2] = {{0, 1}, {1, 1}, {1, 0}, {0, 0}};
          for (int q = 0; q < 4; ++q) {
            int64_t idx[3] = {i0[0] + off[q][0], i0[1] + off[q][1], 0};
            out.v[q] = smp.at(layer, idx).v[gather - 1];
          }
        } else {
          float acc[4] = {0, 0, 0, 0};
          const int corners = 1 << dims;
          for (int q = 0; q < corners; ++q) {
            int64_t idx[3] = {0, 0, 0};
            float w = 1.0f;
            for (int k = 0; k < dims; ++k) {
              bool hi = (q >> k) & 1;
              idx[k] = i0[k] + hi;
              w *= hi ? a[k] : 1.0f - a[k];
            }
            if (w == 0.0f) continue;
            Texel s = smp.at(layer, idx);
            for (int ch = 0; ch < 4; ++ch) acc[ch] += w * std::bit_cast<float>(s.v[ch]);
          }
          for (int ch = 0; ch < 4; ++ch) out.v[ch] = std::bit_cast<uint32_t>(acc[ch]);
        }
      } else {
        int64_t idx[3] = {0, 0, 0};
        for (int k = 0; k < dims; ++k) idx[k] = int64_t(std::floor(x[k]));
        out = smp.at(layer, idx);
      }
    }
    for (int k = 0; k < 4; ++k)
      if (D[k]) D[k][l] = out.v[k];
    return true;
  });
}

// suld.b / sust.b: the x coordinate is in bytes, y and z (or the layer) in elements.
template <bool STORE>
void h_surf(Ctx& c, const Inst& I, uint32_t m) {
  const uint64_t* H = c.src(I.areg);
  const uint32_t geom = I.a0;
  const int dims = geom_dims(geom);
  const bool layered = geom_layered(geom);
  const uint32_t csz = I.a1 & 0xff, vec = (I.a1 >> 8) & 0xf, mode = (I.a1 >> 12) & 3;
  const uint32_t sz = csz * vec;
  const uint64_t* S[3] = {nullptr, nullptr, nullptr};
  for (int k = 0; k < 3; ++k)
    if (I.s[k] != NOREG) S[k] = c.src(I.s[k]);
  const uint64_t* V[4] = {nullptr, nullptr, nullptr, nullptr};
  uint64_t* D[4] = {nullptr, nullptr, nullptr, nullptr};
  for (uint32_t k = 0; k < vec; ++k) {
    if (STORE) V[k] = c.src(I.d[k]);
    else if (I.d[k] != NOREG) D[k] = c.dst(I.d[k]);
  }
  for_lanes_until(m, [&](int l) {
    if (!tex_resolve(c, I, H[l], true)) return false;
    const TexView& t = c.tex;
    if (t.layered != layered || t.dims != dims) {
      c.set_fault(LaunchError::BadAccess, I, "surface object's geometry does not match the instruction");
      return false;
    }
    const int64_t row = int64_t(t.w) * t.nch * t.cbytes;
    int ci = layered ? 1 : 0;
    int64_t x = int32_t(S[ci][l]);
    int64_t y = dims >= 2 ? int64_t(int32_t(S[ci + 1][l])) : 0;
    int64_t z = dims == 3 ? int64_t(int32_t(S[ci + 2][l])) : layered ? int64_t(uint32_t(S[0][l])) : 0;
    const int64_t nz = t.d;
    bool out = x < 0 || x + int64_t(sz) > row || y < 0 || y >= int64_t(t.h) || z < 0 || z >= nz;
    if (out) {
      if (mode == 0) {
        char b[96];
        snprintf(b, sizeof b, "surface access out of range at (%lld bytes, %lld, %lld)", (long long)x, (long long)y, (long long)z);
        c.set_fault(LaunchError::BadAccess, I, b);
        return false;
      }
      if (mode == 2) {
        if (!STORE)
          for (uint32_t k = 0; k < vec; ++k)
            if (D[k]) D[k][l] = 0;
        return true;
      }
      if (row < int64_t(sz)) return true;
      x = std::clamp<int64_t>(x, 0, row - int64_t(sz));
      y = std::clamp<int64_t>(y, 0, int64_t(t.h) - 1);
      z = std::clamp<int64_t>(z, 0, nz - 1);
    }
    uint8_t* p = c.tex_host + uint64_t(z) * t.slice + uint64_t(y) * t.pitch + uint64_t(x);
    for (uint32_t k = 0; k < vec; ++k) {
      uint8_t* q = p + k * csz;
      if (STORE) {
        uint64_t v = V[k][l];
        std::memcpy(q, &v, csz);
      } else if (D[k]) {
        uint64_t v = 0;
        std::memcpy(&v, q, csz);
        D[k][l] = v;
      }
    }
    return true;
  });
}

// txq / suq: d[0] = the queried property of the object in areg; a0 = 1 for a surface.
void h_txq(Ctx& c, const Inst& I, uint32_t m) {
  const uint64_t* H = c.src(I.areg);
  uint64_t* D = c.dst(I.d[0]);
  const bool surf = I.a0 == 1;
  for_lanes_until(m, [&](int l) {
    if (!tex_resolve(c, I, H[l], surf)) return false;
    const TexView& t = c.tex;
    uint32_t v = 0;
    switch (I.a1) {
      case kQWidth: v = t.w; break;
      case kQHeight: v = t.dims >= 2 ? t.h : 1; break;
      case kQDepth: v = t.dims == 3 ? t.d : 1; break;
      case kQArraySize: v = t.layered ? t.d : 1; break;
      case kQNormCoords: v = t.norm_coords; break;
      case kQFilter: v = t.filter_linear; break;
      case kQAddr0: case kQAddr1: case kQAddr2: v = t.addr[I.a1 - kQAddr0]; break;
      case kQChanType: v = uint32_t(t.ckind) << 8 | t.cbytes; break;
      case kQChanOrder: v = t.nch; break;
      case kQLevels: v = t.levels; break;
      default: v = 0; break;
    }
    D[l] = v;
    return true;
  });
}

}  // namespace
}  // namespace wh::ptx::detail
