// Decode of the texture and surface instructions.
#include "parser.hpp"

namespace wh::ptx::detail::parse {

void Parser::decode_tex(std::string_view base, const std::vector<std::string_view>& mods, std::vector<Opd>& ops,
                        Inst I) {
  const uint32_t line = I.line;
  auto has = [&](std::string_view m) { return std::find(mods.begin(), mods.end(), m) != mods.end(); };
  const bool surf = base == "suld" || base == "sust" || base == "suq";
  const bool store = base == "sust";
  if (ops.size() < 2) fail(line, std::string(base) + " expects at least 2 operands");
  Opd& mem = store ? ops[0] : ops[1];
  if (mem.k != Opd::Mem) fail(line, std::string(base) + " needs a [object, ...] operand");
  if (mem.mreg == NOREG || mem.moff != 0) {
    mark_unsupported(line, "texture/surface references (only texture/surface objects in registers)");
    return;
  }
  I.areg = mem.mreg;
  if (base == "txq" || base == "suq") {
    static const std::pair<std::string_view, uint32_t> q[] = {
        {"width", kQWidth}, {"height", kQHeight}, {"depth", kQDepth}, {"array_size", kQArraySize},
        {"normalized_coords", kQNormCoords}, {"filter_mode", kQFilter}, {"addr_mode_0", kQAddr0},
        {"addr_mode_1", kQAddr1}, {"addr_mode_2", kQAddr2}, {"channel_data_type", kQChanType},
        {"channel_order", kQChanOrder}, {"num_mipmap_levels", kQLevels}, {"num_samples", kQSamples}};
    uint32_t qq = 99;
    for (auto& [n, v] : q)
      if (has(n)) qq = v;
    if (qq == 99 || has("level") || !mem.el.empty()) { mark_unsupported(line, std::string(base) + " query"); return; }
    need(ops, 2, line, base);
    I.d[0] = dst(ops[0]);
    I.a0 = surf ? 1 : 0;
    I.a1 = qq;
    I.fn = h_txq;
    emit(I);
    return;
  }
  uint32_t geom = has("1d") ? uint32_t(kGeom1d) : has("2d") ? uint32_t(kGeom2d) : has("3d") ? uint32_t(kGeom3d) : has("a1d") ? uint32_t(kGeomA1d)
                : has("a2d") ? uint32_t(kGeomA2d) : 0u;
  if (!geom) { mark_unsupported(line, std::string(base) + " geometry (cube, multisample)"); return; }
  if (mem.el.size() != 1 || mem.el[0].k != Opd::Vec) {
    mark_unsupported(line, std::string(base) + " with a separate sampler");
    return;
  }
  const std::vector<Opd>& co = mem.el[0].el;
  const size_t ncoord = size_t(geom_dims(geom)) + (geom_layered(geom) ? 1 : 0);
  if (co.size() < ncoord) fail(line, "too few coordinates");
  Ty cty = surf ? T_S32 : has("s32") && mods.back() == "s32" ? T_S32 : T_F32;
  for (size_t k = 0; k < ncoord; ++k)
    I.s[k] = src(co[k], geom_layered(geom) && k == 0 ? T_U32 : cty);
  Opd& val = store ? ops[1] : ops[0];
  if (val.k != Opd::Vec) fail(line, std::string(base) + " needs a {..} value operand");
  if (val.pipe != NOREG) { mark_unsupported(line, "sparse texture fetch"); return; }
  if (surf) {
    if (!has("b")) { mark_unsupported(line, std::string(base) + " (formatted .p access)"); return; }
    uint32_t vec = has("v2") ? 2 : has("v4") ? 4 : 1;
    uint32_t csz = has("b8") ? 1 : has("b16") ? 2 : has("b32") ? 4 : has("b64") ? 8 : 0;
    if (!csz) fail(line, std::string(base) + " without a .b8/.b16/.b32/.b64 type");
    if (val.el.size() != vec) fail(line, "vector operand size does not match");
    uint32_t mode = has("clamp") ? 1 : has("zero") ? 2 : 0;
    for (uint32_t k = 0; k < vec; ++k) I.d[k] = store ? src(val.el[k], csz == 8 ? T_B64 : T_B32) : dst(val.el[k]);
    I.a0 = geom;
    I.a1 = csz | vec << 8 | mode << 12;
    I.fn = store ? h_surf<true> : h_surf<false>;
    emit(I);
    return;
  }
  if (!has("v4") || val.el.size() != 4) { mark_unsupported(line, std::string(base) + " result shape"); return; }
  // the result type is the first type modifier, the coordinate type the last
  Ty rty = T_None;
  for (auto m : mods)
    if (Ty t = parse_ty(m); t != T_None) { rty = t; break; }
  if (rty != T_F32 && rty != T_S32 && rty != T_U32) { mark_unsupported(line, std::string(base) + " result type"); return; }
  uint32_t gather = 0;
  if (base == "tld4") {
    gather = has("r") ? 1 : has("g") ? 2 : has("b") ? 3 : has("a") ? 4 : 0;
    if (!gather || geom != kGeom2d) { mark_unsupported(line, "tld4 variant"); return; }
  }
  if (has("grad") && ops.size() != 4) fail(line, "tex.grad expects gradients");
  if (has("level") && ops.size() != 3) fail(line, "tex.level expects a level");
  if (!has("grad") && !has("level") && ops.size() != 2) fail(line, std::string(base) + " expects 2 operands");
  for (int k = 0; k < 4; ++k) I.d[k] = dst(val.el[size_t(k)]);
  I.a0 = geom;
  I.a1 = (rty == T_F32 ? 0 : rty == T_S32 ? 1 : 2) | (cty == T_S32 ? 0x10 : 0) | gather << 8;
  I.fn = h_tex;
  emit(I);
}

}  // namespace wh::ptx::detail::parse
