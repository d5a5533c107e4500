// Decode of cvt (conversions).
#include "parser.hpp"
#include "jit_catalog.hpp"

namespace wh::ptx::detail::parse {

namespace {

template <class D, class S>
Handler cvt_fast() { return h_cvt_fast<D, S>; }

}  // namespace

void Parser::decode_cvt(const std::vector<std::string_view>& mods, std::vector<Opd>& ops, Inst I) {
  if (std::find(mods.begin(), mods.end(), "tf32") != mods.end()) {
    // cvt.rna{.satfinite}.tf32.f32, cvt.{rn,rz}{.satfinite}{.relu}.tf32.f32 (wmma::__float_to_tf32)
    int mode = -1;
    bool sat = false, relu = false, to = false, from = false;
    for (auto m : mods) {
      int md = m == "rn" ? 0 : m == "rz" ? 1 : m == "rna" ? 2 : -1;
      if (md >= 0) {
        if (mode >= 0) fail(I.line, "cvt with two rounding modes");
        mode = md;
      } else if (m == "satfinite") sat = true;
      else if (m == "relu") relu = true;
      else if (m == "tf32" && !to && !from) to = true;
      else if (m == "f32" && to && !from) from = true;
      else fail(I.line, "cvt to .tf32: unexpected modifier ." + std::string(m) + " (cvt.rna/rn/rz{.satfinite}{.relu}.tf32.f32)");
    }
    if (mode < 0 || !from) fail(I.line, "cvt to .tf32 needs .rna, .rn or .rz and the source type .f32");
    if (relu && mode == 2) fail(I.line, "cvt.rna.tf32.f32 takes no .relu");
    need(ops, 2, I.line, "cvt");
    I.d[0] = dst(ops[0]);
    I.s[0] = src(ops[1], T_F32);
    I.a0 = uint32_t(mode);
    I.a1 = uint32_t(sat) | uint32_t(relu) << 1;
    I.fn = h_cvt_tf32;
    emit(I);
    return;
  }
  std::vector<Ty> tys;
  int mode = 0;
  bool sat = false, ftz = false;
  for (auto m : mods) {
    if (m == "rn") mode = 0;
    else if (m == "rz") mode = 1;
    else if (m == "rm") mode = 2;
    else if (m == "rp") mode = 3;
    else if (m == "rni") mode = 4;
    else if (m == "rzi") mode = 5;
    else if (m == "rmi") mode = 6;
    else if (m == "rpi") mode = 7;
    else if (m == "sat") sat = true;
    else if (m == "ftz") ftz = true;
    else if (m == "relu" || m == "rna" || m == "satfinite" || m == "rs") { mark_unsupported(I.line, "cvt modifier ." + std::string(m)); return; }
    else {
      Ty t = parse_ty(m);
      if (t == T_None) fail(I.line, "unknown cvt modifier ." + std::string(m));
      tys.push_back(t);
    }
  }
  if (tys.size() == 2 && (tys[0] == T_F16X2 || tys[0] == T_BF16X2) && tys[1] == T_F32 && mode == 0 && !sat && !ftz &&
      ops.size() == 3) {
    // cvt.rn.{bf16x2,f16x2}.f32 d, a, b: a converted into the upper half, b into the lower
    I.d[0] = dst(ops[0]);
    I.s[0] = src(ops[1], T_F32);
    I.s[1] = src(ops[2], T_F32);
    I.fn = tys[0] == T_BF16X2 ? h_cvt_bf16x2_f32 : h_cvt_f16x2_f32;
    emit(I);
    return;
  }
  if (tys.size() != 2) {
    if (tys.size() == 3 && (tys[0] == T_F16X2 || tys[0] == T_BF16X2)) { mark_unsupported(I.line, "packed cvt"); return; }
    fail(I.line, "cvt needs two types");
  }
  Ty dt = tys[0], st = tys[1];
  if (dt == T_F16X2 || dt == T_BF16X2 || st == T_F16X2 || st == T_BF16X2 || dt == T_B128 || dt == T_Pred || st == T_Pred) {
    mark_unsupported(I.line, "cvt between these types");
    return;
  }
  need(ops, 2, I.line, "cvt");
  I.d[0] = dst(ops[0]);
  I.s[0] = src(ops[1], st);
  I.a0 = dt;
  I.a1 = uint32_t(st) | uint32_t(mode) << 8 | uint32_t(sat) << 16 | uint32_t(ftz) << 17;
  Handler h = nullptr;
  bool di = !ty_float(dt), si = !ty_float(st);
  if (di && si && !sat) {
    // integer -> integer: extend by the source signedness, truncate to the destination
    auto ext = [&]() -> Handler {
      switch (st) {
        case T_S8: return cvt_fast<int64_t, int8_t>();
        case T_S16: return cvt_fast<int64_t, int16_t>();
        case T_S32: return cvt_fast<int64_t, int32_t>();
        case T_U8: case T_B8: return cvt_fast<uint64_t, uint8_t>();
        case T_U16: case T_B16: return cvt_fast<uint64_t, uint16_t>();
        case T_U32: case T_B32: return cvt_fast<uint64_t, uint32_t>();
        default: return cvt_fast<uint64_t, uint64_t>();
      }
    };
    if (ty_bytes(dt) >= ty_bytes(st)) h = ext();
    else h = h_cvt_lanes;  // narrowing: stores sign/zero extension of the destination type
  } else if (!sat && !ftz && mode == 0) {
    if (dt == T_F32 && st == T_S32) h = cvt_fast<float, int32_t>();
    else if (dt == T_F32 && st == T_U32) h = cvt_fast<float, uint32_t>();
    else if (dt == T_F64 && st == T_F32) h = cvt_fast<double, float>();
    else if (dt == T_F64 && st == T_S32) h = cvt_fast<double, int32_t>();
    else if (dt == T_F64 && st == T_U32) h = cvt_fast<double, uint32_t>();
    else if (dt == T_F32 && st == T_F64) h = cvt_fast<float, double>();
    else if (dt == T_BF16 && st == T_F32) h = h_cvt_bf16_f32;
    else if (dt == T_F16 && st == T_F32) h = h_cvt_f16_f32;
    else if (dt == T_F32 && st == T_BF16) h = h_cvt_f32_bf16;
  }
  if (!h) {
    bool directed_float = ty_float(dt) && (mode >= 1 && mode <= 3) && dt != T_F16 && dt != T_BF16;
    h = directed_float ? h_cvt_generic : h_cvt_lanes;
  }
  I.fn = h;
  emit(I);
}

}  // namespace wh::ptx::detail::parse

WH_JIT_CATALOG(cvt);
