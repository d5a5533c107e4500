// Decoding of the tensor-core instruction forms (see mma.hpp): which shapes and element
// types each of wmma.load/store/mma, mma.sync, ldmatrix and stmatrix accepts, following
// the PTX ISA's syntax tables, and the size of every fragment.
#include <algorithm>

#include "internal.hpp"

namespace wh::ptx::detail {
namespace {

struct Shape {
  std::string_view name;
  uint16_t m, n, k;
};
constexpr Shape kShapes[] = {{"m16n16k16", 16, 16, 16}, {"m32n8k16", 32, 8, 16}, {"m8n32k16", 8, 32, 16},
                             {"m16n16k8", 16, 16, 8},   {"m8n8k4", 8, 8, 4},     {"m16n8k16", 16, 8, 16},
                             {"m16n8k8", 16, 8, 8},     {"m16n8k4", 16, 8, 4},   {"m16n8k32", 16, 8, 32},
                             {"m8n8k16", 8, 8, 16},     {"m8n8k32", 8, 8, 32},   {"m8n8k128", 8, 8, 128},
                             {"m16n8k64", 16, 8, 64},   {"m16n8k128", 16, 8, 128}, {"m16n8k256", 16, 8, 256},
                             {"m8n8", 8, 8, 0},         {"m16n16", 16, 16, 0},   {"m8n16", 8, 16, 0},
                             {"m16n8", 16, 8, 0}};

// Element types: the supported ones, then the valid ones the sim device does not run.
MmaEt parse_et(std::string_view s) {
  if (s == "f16") return ME_F16;
  if (s == "bf16") return ME_BF16;
  if (s == "tf32") return ME_TF32;
  if (s == "f32") return ME_F32;
  if (s == "f64") return ME_F64;
  if (s == "s8") return ME_S8;
  if (s == "u8") return ME_U8;
  if (s == "s32") return ME_S32;
  return ME_None;
}
bool other_et(std::string_view s) {
  for (auto t : {"s4", "u4", "b1", "e4m3", "e5m2", "e3m2", "e2m3", "e2m1", "b16", "b8"})
    if (s == t) return true;
  return false;
}
int et_bits(MmaEt t) {
  switch (t) {
    case ME_F16: case ME_BF16: return 16;
    case ME_S8: case ME_U8: return 8;
    case ME_F64: return 64;
    default: return 32;
  }
}
bool is_int8(MmaEt t) { return t == ME_S8 || t == ME_U8; }
bool is_f16f32(MmaEt t) { return t == ME_F16 || t == ME_F32; }

FragGeom geom(int m, int n, int k, MmaFrag f, MmaEt et, bool wmma) {
  FragGeom g;
  g.rows = uint8_t(f == MF_B ? k : m);
  g.cols = uint8_t(f == MF_A ? k : n);
  g.bits = uint8_t(et_bits(et));
  g.per_reg = uint8_t(g.bits >= 32 ? 1 : 32 / g.bits);
  g.v = f == MF_C ? 2 : g.per_reg;
  g.b = f == MF_B;
  g.distinct = uint8_t(g.rows * g.cols / 32);
  // f16 wmma multiplicands keep the 8 registers (16 elements) of the original sm_70 form,
  // whatever the shape: the elements past `distinct` repeat the first ones.
  g.nregs = uint8_t(wmma && et == ME_F16 && f != MF_C ? 8 : g.distinct / g.per_reg);
  return g;
}

// What the handlers' fixed arrays hold (8 registers, 512 elements, 512 register parts) in
// whole tiles, the distinct elements in whole registers; every form of the tables fits.
bool fits(const FragGeom& g) {
  const int n8 = g.b ? g.cols : g.rows, k4v = g.b ? g.rows : g.cols;  // whole tiles only
  return g.nregs >= 1 && g.nregs <= 8 && g.rows * g.cols <= 512 && g.distinct >= 1 && n8 % 8 == 0 &&
         k4v % (4 * g.v) == 0 && g.nregs * g.per_reg * 32 <= 512 && g.distinct % g.per_reg == 0 &&
         g.v % g.per_reg == 0 && g.distinct / g.v <= 16;  // a lane's runs fill whole registers (FragWalk)
}

struct Mods {
  std::vector<std::string_view> rest;  // modifiers not consumed yet
  bool take(std::string_view m) {
    auto it = std::find(rest.begin(), rest.end(), m);
    if (it == rest.end()) return false;
    rest.erase(it);
    return true;
  }
};

}  // namespace

MmaParse mma_parse(std::string_view base, const std::vector<std::string_view>& mods, MmaOp& op, std::string& msg) {
  const std::string name = [&] {
    std::string s(base);
    for (auto m : mods) s += "." + std::string(m);
    return s;
  }();
  auto error = [&](const std::string& why) {
    msg = name + ": " + why;
    return MmaParse::Error;
  };
  auto unsupported = [&](const std::string& why) {
    msg = name + " (" + why + ")";
    return MmaParse::Unsupported;
  };
  Mods md{mods};
  // The kind, then the modifiers every form shares.
  if (base == "wmma") {
    if (md.rest.empty()) return error("needs .load, .store or .mma");
    std::string_view what = md.rest.front();
    md.rest.erase(md.rest.begin());
    if (what == "load") {
      op.kind = MK_WLoad;
      if (md.take("a")) op.frag = MF_A;
      else if (md.take("b")) op.frag = MF_B;
      else if (md.take("c")) op.frag = MF_C;
      else return error("wmma.load needs .a, .b or .c");
    } else if (what == "store") {
      op.kind = MK_WStore;
      op.frag = MF_C;
      if (!md.take("d")) return error("wmma.store needs .d");
    } else if (what == "mma") {
      op.kind = MK_WMma;
    } else {
      return error("wmma needs .load, .store or .mma");
    }
  } else if (base == "mma") {
    op.kind = MK_Mma;
  } else if (base == "ldmatrix" || base == "stmatrix") {
    op.kind = base == "ldmatrix" ? MK_LdMatrix : MK_StMatrix;
  } else {
    return error("not a tensor-core instruction");
  }
  if (!md.take("sync")) return error("needs .sync");
  md.take("aligned");  // mandatory since PTX 6.3; older PTX omits it
  if (op.kind == MK_Mma && (md.take("sp") || md.take("sp::ordered_metadata")))
    return unsupported("sparse mma");
  for (auto m : md.rest)
    if (m.starts_with("kind::") || m == "block_scale" || m.starts_with("scale_vec::") || m == "xor" || m == "and" ||
        m == "popc")
      return unsupported("." + std::string(m) + " forms");

  // Shape.
  const Shape* shape = nullptr;
  for (auto& s : kShapes)
    if (md.take(s.name)) {
      if (shape) return error("more than one shape");
      shape = &s;
    }
  if (!shape) return error("needs a shape (such as .m16n16k16)");
  op.m = shape->m;
  op.n = shape->n;
  op.k = shape->k;

  // Layouts, in order (wmma.mma and mma: alayout then blayout).
  std::vector<bool> cols;
  for (size_t i = 0; i < md.rest.size();) {
    if (md.rest[i] == "row" || md.rest[i] == "col") {
      cols.push_back(md.rest[i] == "col");
      md.rest.erase(md.rest.begin() + long(i));
    } else {
      ++i;
    }
  }
  // Element types, in order, and the valid ones the sim device does not run.
  std::vector<MmaEt> ets;
  for (size_t i = 0; i < md.rest.size();) {
    MmaEt t = parse_et(md.rest[i]);
    if (t != ME_None) {
      ets.push_back(t);
      md.rest.erase(md.rest.begin() + long(i));
    } else if (other_et(md.rest[i]) && op.kind != MK_LdMatrix && op.kind != MK_StMatrix) {
      return unsupported("." + std::string(md.rest[i]) + " elements");
    } else {
      ++i;
    }
  }

  if (op.kind == MK_LdMatrix || op.kind == MK_StMatrix) {
    if (op.k != 0 || !(op.m == 8 || op.m == 16)) return error("shape must be .m8n8 (or .m16n16/.m8n16/.m16n8 with .b8)");
    if (!cols.empty() || !ets.empty()) return error("takes no layout or element type other than .b16/.b8");
    op.col = md.take("trans");
    if (md.take("x1")) op.num = 1;
    else if (md.take("x2")) op.num = 2;
    else if (md.take("x4")) op.num = 4;
    else return error("needs .x1, .x2 or .x4");
    if (!md.take("shared")) md.take("shared::cta");
    bool b16 = md.take("b16"), b8 = md.take("b8");
    if (b16 == b8) return error("needs one element type, .b16 or .b8");
    if (!md.rest.empty()) return error("unknown modifier ." + std::string(md.rest.front()));
    if (op.m != 8 || op.n != 8) {
      if (b16) return error("16-bit elements need shape .m8n8");
      return unsupported("8-bit matrix shapes");
    }
    if (b8) return error("shape .m8n8 needs .b16 elements");
    return MmaParse::Ok;
  }

  if (op.kind == MK_WLoad || op.kind == MK_WStore) {
    int spaces = 0;  // the state space itself is read by the caller
    for (auto sp : {"shared", "shared::cta", "global"}) spaces += md.take(sp);
    if (spaces > 1) return error("more than one state space");
    if (cols.size() != 1) return error("needs one layout, .row or .col");
    op.col = cols[0];
    if (ets.size() != 1) return error("needs one element type");
    if (!md.rest.empty()) return error("unknown modifier ." + std::string(md.rest.front()));
    const MmaEt t = ets[0];
    op.et[0] = t;
    const bool acc = op.frag == MF_C;
    const bool big = op.k == 16 && op.m * op.n == 256;  // m16n16k16, m32n8k16, m8n32k16
    bool ok;
    if (big) ok = acc ? (t == ME_F16 || t == ME_F32 || t == ME_S32) : (t == ME_F16 || t == ME_BF16 || is_int8(t));
    else if (op.m == 16 && op.n == 16 && op.k == 8) ok = acc ? t == ME_F32 : t == ME_TF32;
    else if (op.m == 8 && op.n == 8 && op.k == 4) ok = t == ME_F64;
    else if (op.m == 8 && op.n == 8 && (op.k == 32 || op.k == 128)) return unsupported("sub-byte wmma");
    else return error("not a wmma shape");
    if (!ok) return error("element type not valid for this shape and matrix");
    op.g[0] = geom(op.m, op.n, op.k, op.frag, t, true);
    return fits(op.g[0]) ? MmaParse::Ok : error("fragment too large");
  }

  // wmma.mma and mma.sync: d, a, b, c types.
  MmaEt d, a, b, c;
  if (ets.size() == 2 && op.kind == MK_WMma) {  // wmma f16 form: .dtype.ctype
    d = ets[0];
    c = ets[1];
    a = b = ME_F16;
    if (!is_f16f32(d) || !is_f16f32(c)) return error("the two-type form takes .f16/.f32 accumulators");
  } else if (ets.size() == 4) {
    d = ets[0], a = ets[1], b = ets[2], c = ets[3];
  } else {
    return error(op.kind == MK_WMma ? "needs .dtype.ctype or .dtype.atype.btype.ctype" : "needs .dtype.atype.btype.ctype");
  }
  if (cols.size() != 2) return error("needs two layouts, alayout and blayout");
  op.satfinite = md.take("satfinite");
  int rnd = -1;  // f64: .rn/.rz/.rm/.rp
  for (auto r : {"rn", "rz", "rm", "rp"})
    if (md.take(r)) {
      if (rnd >= 0) return error("more than one rounding modifier");
      rnd = int(std::string_view(r) == "rn" ? 0 : 1);
    }
  if (!md.rest.empty()) return error("unknown modifier ." + std::string(md.rest.front()));
  const int m = op.m, n = op.n, k = op.k;
  const bool fp16 = a == ME_F16 && b == ME_F16 && is_f16f32(d) && is_f16f32(c);
  const bool bf16 = a == ME_BF16 && b == ME_BF16 && d == ME_F32 && c == ME_F32;
  const bool tf32 = a == ME_TF32 && b == ME_TF32 && d == ME_F32 && c == ME_F32;
  const bool i8 = is_int8(a) && is_int8(b) && d == ME_S32 && c == ME_S32;
  const bool f64 = a == ME_F64 && b == ME_F64 && d == ME_F64 && c == ME_F64;
  bool ok;
  if (op.kind == MK_WMma) {
    const bool big = k == 16 && m * n == 256;
    if (big) ok = fp16 || bf16 || i8;
    else if (m == 16 && n == 16 && k == 8) ok = tf32;
    else if (m == 8 && n == 8 && k == 4) ok = f64;
    else if (m == 8 && n == 8 && (k == 32 || k == 128)) return unsupported("sub-byte wmma");
    else return error("not a wmma shape");
    if (!ok) return error("element types not valid for this shape");
  } else {
    if (m == 16 && n == 8 && f64 && (k == 4 || k == 8 || k == 16)) return unsupported("the sm_90 .f64 shapes");
    if (m == 16 && n == 8 && k == 16) ok = fp16 || bf16 || i8;
    else if (m == 16 && n == 8 && k == 8) ok = fp16 || bf16 || tf32;
    else if (m == 16 && n == 8 && k == 4) ok = tf32;
    else if (m == 16 && n == 8 && k == 32) ok = i8;
    else if (m == 8 && n == 8 && k == 16) ok = i8;
    else if (m == 8 && n == 8 && k == 4) {
      if (fp16) return unsupported("the .m8n8k4 .f16 quad-pair form");
      ok = f64;
    } else if ((m == 8 && n == 8 && (k == 32 || k == 128)) || (m == 16 && n == 8 && (k == 64 || k == 128 || k == 256)))
      return unsupported("sub-byte mma");
    else return error("not an mma.sync shape");
    if (!ok) return error("element types not valid for this shape");
    if (!(cols[0] == false && cols[1] == true)) return error("this shape needs .row.col");
  }
  if (op.satfinite && !i8) {
    if (op.kind == MK_WMma && (fp16 || bf16 || tf32)) return unsupported(".satfinite with floating-point accumulators");
    return error(".satfinite needs integer elements");
  }
  if (rnd >= 0 && !f64) return error("rounding modifiers need .f64 elements");
  if (rnd > 0) return unsupported("directed rounding");
  op.et[0] = d, op.et[1] = a, op.et[2] = b, op.et[3] = c;
  const bool w = op.kind == MK_WMma;
  op.g[0] = geom(m, n, k, MF_C, d, w);
  op.g[1] = geom(m, n, k, MF_A, a, w);
  op.g[2] = geom(m, n, k, MF_B, b, w);
  op.g[3] = geom(m, n, k, MF_C, c, w);
  for (auto& g : op.g)
    if (!fits(g)) return error("fragment too large");
  return MmaParse::Ok;
}

}  // namespace wh::ptx::detail
