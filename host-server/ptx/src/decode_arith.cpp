// Decode of the arithmetic, logic and math instructions.
#include "parser.hpp"
#include "jit_catalog.hpp"

namespace wh::ptx::detail::parse {

namespace {

// handler tables ---------------------------------------------------------
template <class Op>
Handler pick_int(Ty t, bool sgn_matters = true) {
  switch (t) {
    case T_S16: return sgn_matters ? h_bin<int16_t, Op> : h_bin<uint16_t, Op>;
    case T_S32: return sgn_matters ? h_bin<int32_t, Op> : h_bin<uint32_t, Op>;
    case T_S64: return sgn_matters ? h_bin<int64_t, Op> : h_bin<uint64_t, Op>;
    case T_U16: case T_B16: return h_bin<uint16_t, Op>;
    case T_U32: case T_B32: return h_bin<uint32_t, Op>;
    case T_U64: case T_B64: return h_bin<uint64_t, Op>;
    case T_S8: return h_bin<int8_t, Op>;
    case T_U8: case T_B8: return h_bin<uint8_t, Op>;
    default: return nullptr;
  }
}
template <class Op>
Handler pick_un_int(Ty t) {
  switch (t) {
    case T_S16: return h_un<int16_t, Op>;
    case T_S32: return h_un<int32_t, Op>;
    case T_S64: return h_un<int64_t, Op>;
    case T_U16: case T_B16: return h_un<uint16_t, Op>;
    case T_U32: case T_B32: return h_un<uint32_t, Op>;
    case T_U64: case T_B64: return h_un<uint64_t, Op>;
    default: return nullptr;
  }
}
template <class Op>
Handler pick_fbin(bool ftz, bool sat) {
  if (ftz) return sat ? h_fbin<Op, true, true> : h_fbin<Op, true, false>;
  return sat ? h_fbin<Op, false, true> : h_fbin<Op, false, false>;
}
template <class Op>
Handler pick_fun(bool ftz, bool sat) {
  if (ftz) return sat ? h_fun<Op, true, true> : h_fun<Op, true, false>;
  return sat ? h_fun<Op, false, true> : h_fun<Op, false, false>;
}

}  // namespace

bool Parser::decode_arith(std::string_view base, const std::vector<std::string_view>& mods, std::vector<Opd>& ops, Inst I) {
  Ty ty = T_None;
  bool ftz = false, sat = false, approx = false, hi = false, lo = false, wide = false, full = false, cc = false;
  bool relu = false, nan_op = false;
  int packed16 = 0;  // .s16x2 (1) / .u16x2 (2): two 16-bit integers in a 32-bit register
  int rnd = 0;
  for (auto m : mods) {
    if (m == "ftz") ftz = true;
    else if (m == "relu") relu = true;
    else if (m == "s16x2" || m == "u16x2") { packed16 = m[0] == 's' ? 1 : 2; ty = T_B32; }
    else if (m == "sat") sat = true;
    else if (m == "approx") approx = true;
    else if (m == "full") full = true;
    else if (m == "hi") hi = true;
    else if (m == "lo") lo = true;
    else if (m == "wide") wide = true;
    else if (m == "rn") rnd = 0;
    else if (m == "rz") rnd = 1;
    else if (m == "rm") rnd = 2;
    else if (m == "rp") rnd = 3;
    else if (m == "l" || m == "r" || m == "wrap" || m == "clamp" || m == "shiftamt" || m == "f4e" || m == "b4e" ||
             m == "rc8" || m == "ecl" || m == "ecr" || m == "rc16") {
    } else if (m == "NaN") {
      nan_op = true;
    } else if (m == "uni" || m == "sync" || m == "aligned" || m == "xorsign" || m == "abs") {
      if (m == "xorsign" || m == "abs") { mark_unsupported(I.line, "modifier ." + std::string(m)); return true; }
    } else if (m == "cc") {
      cc = true;
    } else {
      Ty t = parse_ty(m);
      if (t == T_None) fail(I.line, "unknown modifier ." + std::string(m) + " on " + std::string(base));
      ty = t;
    }
  }
  (void)approx;
  (void)full;
  (void)lo;
  if (ty == T_None) fail(I.line, std::string(base) + " without a type");
  const bool isf = ty == T_F32 || ty == T_F64;
  const bool ishalf = ty == T_F16 || ty == T_F16X2 || ty == T_BF16 || ty == T_BF16X2;
  // .relu: min and max (s32, s16x2, f16/bf16), and fma of f16/bf16.
  if ((packed16 || relu) && base != "min" && base != "max" && !(relu && ishalf && base == "fma")) {
    mark_unsupported(I.line, std::string(base) + (packed16 ? " on 16x2 integers" : ".relu"));
    return true;
  }
  if (nan_op && !((ishalf || ty == T_F32) && (base == "min" || base == "max")))
    fail(I.line, ".NaN on " + std::string(base) + " needs min or max of f32, f16 or bf16");
  // Extended precision: add.cc, addc[.cc], sub.cc, subc[.cc], mad.lo/hi.cc, madc.lo/hi[.cc].
  const bool carry_in = base == "addc" || base == "subc" || base == "madc";
  if (cc || carry_in) {
    const bool is_mad = base == "mad" || base == "madc";
    if (!(base == "add" || base == "sub" || base == "mad" || carry_in) || isf || ishalf || (is_mad && !lo && !hi) ||
        wide || sat) {
      mark_unsupported(I.line, "carry (.cc) form of " + std::string(base));
      return true;
    }
    const bool b64 = ty == T_S64 || ty == T_U64 || ty == T_B64;
    if (!b64 && ty != T_S32 && ty != T_U32 && ty != T_B32) fail(I.line, "carry arithmetic needs a 32- or 64-bit integer type");
    need(ops, is_mad ? 4 : 3, I.line, base);
    const Ty ut = b64 ? T_U64 : T_U32;
    I.d[0] = dst(ops[0]);
    for (size_t i = 1; i < ops.size(); i++) I.s[i - 1] = src(ops[i], ut);
    I.a0 = base.starts_with("add") ? 0 : base.starts_with("sub") ? 1 : hi ? 3 : 2;
    I.s[3] = carry_in ? carry_slot(I.line) : NOREG;
    I.d[1] = cc ? carry_slot(I.line) : NOREG;
    I.fn = b64 ? h_carry<uint64_t> : h_carry<uint32_t>;
    emit(I);
    return true;
  }
  auto bin = [&](Handler h) {
    need(ops, 3, I.line, base);
    if (!h) { mark_unsupported(I.line, std::string(base) + "." + ty_name(ty)); return; }
    I.d[0] = dst(ops[0]);
    I.s[0] = src(ops[1], ty);
    I.s[1] = src(ops[2], ty);
    I.fn = h;
    emit(I);
  };
  auto un = [&](Handler h) {
    need(ops, 2, I.line, base);
    if (!h) { mark_unsupported(I.line, std::string(base) + "." + ty_name(ty)); return; }
    I.d[0] = dst(ops[0]);
    I.s[0] = src(ops[1], ty);
    I.fn = h;
    emit(I);
  };
  auto dir = [&](uint32_t op, int nsrc) {  // directed rounding float op
    need(ops, size_t(nsrc) + 1, I.line, base);
    I.d[0] = dst(ops[0]);
    for (int i = 0; i < nsrc; ++i) I.s[i] = src(ops[size_t(i) + 1], ty);
    I.a0 = op;
    I.a1 = uint32_t(rnd);
    I.flags = uint8_t((ftz ? 1 : 0) | (sat ? 2 : 0));
    I.fn = ty == T_F32 ? h_f32_dir : h_f64_dir;
    emit(I);
  };
  auto half = [&](uint32_t op, int nsrc) {
    need(ops, size_t(nsrc) + 1, I.line, base);
    I.d[0] = dst(ops[0]);
    Ty et = (ty == T_F16 || ty == T_F16X2) ? T_F16 : T_BF16;
    for (int i = 0; i < nsrc; ++i) {
      I.s[i] = ops[size_t(i) + 1].k == Opd::Imm ? src(ops[size_t(i) + 1], ty == T_F16X2 || ty == T_BF16X2 ? T_B32 : et) : src(ops[size_t(i) + 1], ty);
    }
    I.ns = uint8_t(nsrc);
    I.a0 = op;
    I.a1 = ty == T_F16 ? 0 : ty == T_F16X2 ? 1 : ty == T_BF16 ? 2 : 3;
    I.flags = (sat ? 2 : 0) | (relu ? 4 : 0) | (nan_op ? 8 : 0);
    I.fn = pick_half(op, I.a1);
    emit(I);
  };
  if (base == "add" || base == "sub" || base == "mul") {
    if (ishalf) { half(base == "add" ? 0 : base == "sub" ? 1 : 2, 2); return true; }
    if (isf) {
      if (rnd) { dir(base == "add" ? 0 : base == "sub" ? 1 : 2, 2); return true; }
      if (ty == T_F32) {
        bin(base == "add" ? pick_fbin<OAdd>(ftz, sat) : base == "sub" ? pick_fbin<OSub>(ftz, sat) : pick_fbin<OMul>(ftz, sat));
      } else {
        if (sat) { dir(base == "add" ? 0 : base == "sub" ? 1 : 2, 2); return true; }
        bin(base == "add" ? h_bin<double, OAdd> : base == "sub" ? h_bin<double, OSub> : h_bin<double, OMul>);
      }
      return true;
    }
    if (sat) {  // add.sat.s32 / sub.sat.s32 (the only saturating integer forms)
      if (ty != T_S32 || base == "mul") fail(I.line, "saturating " + std::string(base) + " needs .s32");
      bin(base == "add" ? h_bin<int32_t, OAddSat> : h_bin<int32_t, OSubSat>);
      return true;
    }
    if (base == "mul" && wide) {
      need(ops, 3, I.line, base);
      Handler h = ty == T_S32 ? h_mulwide<int32_t> : ty == T_U32 ? h_mulwide<uint32_t> : ty == T_S16 ? h_mulwide<int16_t> : ty == T_U16 ? h_mulwide<uint16_t> : nullptr;
      if (!h) fail(I.line, "bad type for mul.wide");
      I.d[0] = dst(ops[0]);
      I.s[0] = src(ops[1], ty);
      I.s[1] = src(ops[2], ty);
      I.fn = h;
      emit(I);
      return true;
    }
    if (base == "mul" && hi) { bin(pick_int<OMulHi>(ty)); return true; }
    bin(base == "add" ? pick_int<OAdd>(ty, false) : base == "sub" ? pick_int<OSub>(ty, false) : pick_int<OMul>(ty, false));
    return true;
  }
  if (base == "mad" || base == "fma") {
    need(ops, 4, I.line, base);
    if (ishalf) { half(3, 3); return true; }
    if (isf) {
      if (rnd) { dir(3, 3); return true; }
      Handler h = ty == T_F32 ? (ftz ? (sat ? h_ffma<true, true> : h_ffma<true, false>) : (sat ? h_ffma<false, true> : h_ffma<false, false>))
                              : (sat ? h_dfma<true> : h_dfma<false>);
#if defined(__x86_64__)
      if (host_has_fma() && !ftz && !sat) h = ty == T_F32 ? h_ffma_hw : h_dfma_hw;
      if (host_has_fma() && ftz && !sat && ty == T_F32) h = h_ffma_ftz_hw;
#endif
      I.d[0] = dst(ops[0]);
      for (int i = 0; i < 3; ++i) I.s[i] = src(ops[size_t(i) + 1], ty);
      I.fn = h;
      emit(I);
      return true;
    }
    Handler h = nullptr;
    Ty st = ty;
    if (wide) {
      h = ty == T_S32 ? h_madwide<int32_t> : ty == T_U32 ? h_madwide<uint32_t> : ty == T_S16 ? h_madwide<int16_t> : ty == T_U16 ? h_madwide<uint16_t> : nullptr;
    } else if (hi) {
      h = ty == T_S32 ? h_madhi<int32_t> : ty == T_U32 ? h_madhi<uint32_t> : ty == T_S64 ? h_madhi<int64_t> : ty == T_U64 ? h_madhi<uint64_t> : nullptr;
    } else {
      h = (ty == T_S32 || ty == T_U32 || ty == T_B32) ? h_madlo<uint32_t> : (ty == T_S64 || ty == T_U64 || ty == T_B64) ? h_madlo<uint64_t> : (ty == T_S16 || ty == T_U16) ? h_madlo<uint16_t> : nullptr;
    }
    if (!h || sat) { mark_unsupported(I.line, "mad variant"); return true; }
    I.d[0] = dst(ops[0]);
    I.s[0] = src(ops[1], st);
    I.s[1] = src(ops[2], st);
    Ty ct = st;
    if (wide) ct = ty == T_S32 ? T_S64 : ty == T_U32 ? T_U64 : ty == T_S16 ? T_S32 : T_U32;
    I.s[2] = src(ops[3], ct);
    I.fn = h;
    emit(I);
    return true;
  }
  if (base == "mul24" || base == "mad24") {
    if (hi) { mark_unsupported(I.line, base == "mul24" ? "mul24.hi" : "mad24.hi"); return true; }
    if (base == "mul24") { bin(ty == T_S32 ? h_bin<int32_t, OMul24> : h_bin<uint32_t, OMul24>); return true; }
    mark_unsupported(I.line, "mad24");
    return true;
  }
  if (base == "div") {
    if (isf) {
      if (rnd && !approx && !full) { dir(4, 2); return true; }
      if (ty == T_F32) bin(pick_fbin<ODiv>(ftz, sat));
      else bin(h_bin<double, ODiv>);
      return true;
    }
    bin(pick_int<ODiv>(ty));
    return true;
  }
  if (base == "rem") { bin(pick_int<ORem>(ty)); return true; }
  if (base == "min" || base == "max") {
    if (packed16) {
      const bool mn = base == "min";
      Handler h = packed16 == 1
                      ? (mn ? (relu ? h_bin16x2<int16_t, OMin, true> : h_bin16x2<int16_t, OMin, false>)
                            : (relu ? h_bin16x2<int16_t, OMax, true> : h_bin16x2<int16_t, OMax, false>))
                      : (mn ? h_bin16x2<uint16_t, OMin, false> : h_bin16x2<uint16_t, OMax, false>);
      if (relu && packed16 == 2) { mark_unsupported(I.line, std::string(base) + ".relu.u16x2"); return true; }
      bin(h);
      return true;
    }
    if (ishalf) { half(base == "min" ? 6 : 7, 2); return true; }  // .relu and .NaN included
    if (relu) {  // min/max.relu.s32: clamped at 0
      if (ty != T_S32) { mark_unsupported(I.line, std::string(base) + ".relu." + ty_name(ty)); return true; }
      bin(base == "min" ? h_relu_s32<OMin> : h_relu_s32<OMax>);
      return true;
    }
    if (ty == T_F32 && nan_op) { bin(base == "min" ? pick_fbin<OMinNaN>(ftz, false) : pick_fbin<OMaxNaN>(ftz, false)); return true; }
    if (ty == T_F32) { bin(base == "min" ? pick_fbin<OMin>(ftz, false) : pick_fbin<OMax>(ftz, false)); return true; }
    if (ty == T_F64) { bin(base == "min" ? h_bin<double, OMin> : h_bin<double, OMax>); return true; }
    bin(base == "min" ? pick_int<OMin>(ty) : pick_int<OMax>(ty));
    return true;
  }
  if (base == "and" || base == "or" || base == "xor") {
    if (ty == T_Pred) { bin(base == "and" ? h_pbin<OAnd> : base == "or" ? h_pbin<OOr> : h_pbin<OXor>); return true; }
    bin(base == "and" ? pick_int<OAnd>(ty, false) : base == "or" ? pick_int<OOr>(ty, false) : pick_int<OXor>(ty, false));
    return true;
  }
  if (base == "not" || base == "cnot") {
    if (ty == T_Pred) { un(h_pnot); return true; }
    un(base == "not" ? pick_un_int<UNot>(ty) : pick_un_int<UCnot>(ty));
    return true;
  }
  if (base == "neg" || base == "abs") {
    if (ishalf) { half(base == "neg" ? 4 : 5, 1); return true; }
    if (ty == T_F32) { un(base == "neg" ? pick_fun<UNeg>(ftz, false) : pick_fun<UAbs>(ftz, false)); return true; }
    if (ty == T_F64) { un(base == "neg" ? h_un<double, UNeg> : h_un<double, UAbs>); return true; }
    un(base == "neg" ? pick_un_int<UNeg>(ty) : pick_un_int<UAbs>(ty));
    return true;
  }
  if (base == "copysign") { bin(ty == T_F32 ? h_bin<float, OCopysign> : h_bin<double, OCopysign>); return true; }
  if (base == "shl" || base == "shr") {
    need(ops, 3, I.line, base);
    Handler h = nullptr;
    bool left = base == "shl";
    switch (ty) {
      case T_S16: h = left ? h_shift<uint16_t, true> : h_shift<int16_t, false>; break;
      case T_S32: h = left ? h_shift<uint32_t, true> : h_shift<int32_t, false>; break;
      case T_S64: h = left ? h_shift<uint64_t, true> : h_shift<int64_t, false>; break;
      case T_U16: case T_B16: h = left ? h_shift<uint16_t, true> : h_shift<uint16_t, false>; break;
      case T_U32: case T_B32: h = left ? h_shift<uint32_t, true> : h_shift<uint32_t, false>; break;
      case T_U64: case T_B64: h = left ? h_shift<uint64_t, true> : h_shift<uint64_t, false>; break;
      default: fail(I.line, "bad type for shift");
    }
    I.d[0] = dst(ops[0]);
    I.s[0] = src(ops[1], ty);
    I.s[1] = src(ops[2], T_U32);
    I.fn = h;
    emit(I);
    return true;
  }
  if (base == "popc" || base == "clz" || base == "brev") {
    need(ops, 2, I.line, base);
    bool b64 = ty == T_B64 || ty == T_U64 || ty == T_S64;
    Handler h = base == "popc" ? (b64 ? h_popc<uint64_t> : h_popc<uint32_t>)
              : base == "clz" ? (b64 ? h_clz<uint64_t> : h_clz<uint32_t>)
                              : (b64 ? h_brev<uint64_t> : h_brev<uint32_t>);
    I.d[0] = dst(ops[0]);
    I.s[0] = src(ops[1], ty);
    I.fn = h;
    emit(I);
    return true;
  }
  if (base == "bfind") {
    need(ops, 2, I.line, base);
    bool sh = std::find(mods.begin(), mods.end(), "shiftamt") != mods.end();
    Handler h = ty == T_S32 ? h_bfind<int32_t> : ty == T_U32 ? h_bfind<uint32_t> : ty == T_S64 ? h_bfind<int64_t> : h_bfind<uint64_t>;
    I.d[0] = dst(ops[0]);
    I.s[0] = src(ops[1], ty);
    I.a1 = sh;
    I.fn = h;
    emit(I);
    return true;
  }
  if (base == "bfe") {
    need(ops, 4, I.line, base);
    Handler h = ty == T_S32 ? h_bfe<int32_t> : ty == T_U32 || ty == T_B32 ? h_bfe<uint32_t> : ty == T_S64 ? h_bfe<int64_t> : h_bfe<uint64_t>;
    I.d[0] = dst(ops[0]);
    I.s[0] = src(ops[1], ty);
    I.s[1] = src(ops[2], T_U32);
    I.s[2] = src(ops[3], T_U32);
    I.fn = h;
    emit(I);
    return true;
  }
  if (base == "bfi") {
    need(ops, 5, I.line, base);
    bool b64 = ty == T_B64;
    I.d[0] = dst(ops[0]);
    I.s[0] = src(ops[1], ty);
    I.s[1] = src(ops[2], ty);
    I.s[2] = src(ops[3], T_U32);
    I.s[3] = src(ops[4], T_U32);
    I.fn = b64 ? h_bfi<uint64_t> : h_bfi<uint32_t>;
    emit(I);
    return true;
  }
  if (base == "prmt") {
    for (auto m : mods)
      if (m == "f4e" || m == "b4e" || m == "rc8" || m == "ecl" || m == "ecr" || m == "rc16") { mark_unsupported(I.line, "prmt mode ." + std::string(m)); return true; }
    need(ops, 4, I.line, base);
    I.d[0] = dst(ops[0]);
    for (int i = 0; i < 3; ++i) I.s[i] = src(ops[size_t(i) + 1], T_B32);
    I.fn = h_prmt;
    emit(I);
    return true;
  }
  if (base == "lop3") {
    need(ops, 5, I.line, base);
    if (ops[4].k != Opd::Imm) fail(I.line, "lop3 needs an immediate LUT");
    I.d[0] = dst(ops[0]);
    for (int i = 0; i < 3; ++i) I.s[i] = src(ops[size_t(i) + 1], T_B32);
    I.a1 = uint32_t(ops[4].num.u & 0xff);
    I.fn = h_lop3;
    emit(I);
    return true;
  }
  if (base == "shf") {
    need(ops, 4, I.line, base);
    bool left = std::find(mods.begin(), mods.end(), "l") != mods.end();
    bool clamp = std::find(mods.begin(), mods.end(), "clamp") != mods.end();
    I.d[0] = dst(ops[0]);
    for (int i = 0; i < 3; ++i) I.s[i] = src(ops[size_t(i) + 1], T_B32);
    I.fn = left ? (clamp ? h_shf<true, true> : h_shf<true, false>) : (clamp ? h_shf<false, true> : h_shf<false, false>);
    emit(I);
    return true;
  }
  if (base == "sad") {
    need(ops, 4, I.line, base);
    I.d[0] = dst(ops[0]);
    for (int i = 0; i < 3; ++i) I.s[i] = src(ops[size_t(i) + 1], ty);
    I.fn = ty == T_S32 ? h_sad<int32_t> : ty == T_U32 ? h_sad<uint32_t> : ty == T_S64 ? h_sad<int64_t> : h_sad<uint64_t>;
    emit(I);
    return true;
  }
  if (base == "rcp" || base == "sqrt" || base == "rsqrt" || base == "sin" || base == "cos" || base == "ex2" ||
      base == "lg2" || base == "tanh") {
    if (ishalf) { mark_unsupported(I.line, std::string(base) + " on half types"); return true; }
    if (isf && rnd && (base == "rcp" || base == "sqrt") && !approx) { dir(base == "rcp" ? 6 : 5, 1); return true; }
    if (ty == T_F32) {
      Handler h = base == "rcp" ? pick_fun<URcp>(ftz, false) : base == "sqrt" ? pick_fun<USqrt>(ftz, false)
                : base == "rsqrt" ? pick_fun<URsqrt>(ftz, false) : base == "sin" ? pick_fun<USin>(ftz, false)
                : base == "cos" ? pick_fun<UCos>(ftz, false) : base == "ex2" ? pick_fun<UEx2>(ftz, false)
                : base == "lg2" ? pick_fun<ULg2>(ftz, false) : pick_fun<UTanh>(ftz, false);
      un(h);
      return true;
    }
    if (ty == T_F64) {
      Handler h = base == "rcp" ? h_un<double, URcp> : base == "sqrt" ? h_un<double, USqrt> : base == "rsqrt" ? h_un<double, URsqrt>
                : base == "ex2" ? h_un<double, UEx2> : base == "lg2" ? h_un<double, ULg2> : nullptr;
      un(h);
      return true;
    }
    fail(I.line, "bad type for " + std::string(base));
  }
  return false;
}

}  // namespace wh::ptx::detail::parse

WH_JIT_CATALOG(arith);
