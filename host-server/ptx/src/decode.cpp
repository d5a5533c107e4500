// Instruction decode: an opcode and its operands -> Inst with its handler
// chosen once; the families with their own files are decode_*.cpp.
#include "parser.hpp"
#include "jit_catalog.hpp"

namespace wh::ptx::detail::parse {

namespace {

// handler tables ---------------------------------------------------------
template <class V>
Handler pick_setp_v(Cmp c, bool set) {
#define WH_C(X) case X: return set ? h_set<V, X> : h_setp<V, X>;
  switch (c) {
    WH_C(C_EQ) WH_C(C_NE) WH_C(C_LT) WH_C(C_LE) WH_C(C_GT) WH_C(C_GE) WH_C(C_EQU) WH_C(C_NEU) WH_C(C_LTU)
    WH_C(C_LEU) WH_C(C_GTU) WH_C(C_GEU) WH_C(C_NUM) WH_C(C_NAN)
  }
#undef WH_C
  return nullptr;
}
Handler pick_setp(Ty t, Cmp c, bool set) {
  switch (t) {
    case T_S16: return pick_setp_v<int16_t>(c, set);
    case T_S32: return pick_setp_v<int32_t>(c, set);
    case T_S64: return pick_setp_v<int64_t>(c, set);
    case T_U16: case T_B16: return pick_setp_v<uint16_t>(c, set);
    case T_U32: case T_B32: return pick_setp_v<uint32_t>(c, set);
    case T_U64: case T_B64: return pick_setp_v<uint64_t>(c, set);
    case T_F32: return pick_setp_v<float>(c, set);
    case T_F64: return pick_setp_v<double>(c, set);
    default: return nullptr;
  }
}

Cmp parse_cmp(std::string_view m, bool& ok) {
  static const std::pair<std::string_view, Cmp> tab[] = {
      {"eq", C_EQ}, {"ne", C_NE}, {"lt", C_LT}, {"le", C_LE}, {"gt", C_GT}, {"ge", C_GE}, {"lo", C_LT}, {"ls", C_LE},
      {"hi", C_GT}, {"hs", C_GE}, {"equ", C_EQU}, {"neu", C_NEU}, {"ltu", C_LTU}, {"leu", C_LEU}, {"gtu", C_GTU},
      {"geu", C_GEU}, {"num", C_NUM}, {"nan", C_NAN}};
  ok = true;
  for (auto& [n, c] : tab)
    if (n == m) return c;
  ok = false;
  return C_EQ;
}

}  // namespace

void Parser::decode(std::string_view opcode, std::vector<Opd>& ops, uint32_t guard, bool gneg, uint32_t line) {
  std::vector<std::string_view> parts;
  size_t p = 0;
  while (true) {
    size_t q = opcode.find('.', p);
    parts.push_back(opcode.substr(p, q == std::string_view::npos ? std::string_view::npos : q - p));
    if (q == std::string_view::npos) break;
    p = q + 1;
  }
  std::string_view base = parts[0];
  std::vector<std::string_view> mods(parts.begin() + 1, parts.end());
  auto has = [&](std::string_view m) { return std::find(mods.begin(), mods.end(), m) != mods.end(); };
  Inst I = base_inst(guard, gneg, line);
  auto last_ty = [&]() {
    Ty t = T_None;
    for (auto m : mods) {
      Ty x = parse_ty(m);
      if (x != T_None) t = x;
    }
    return t;
  };

  if (base == "ld" || base == "ldu" || base == "st") { decode_mem(base, mods, ops, I); return; }
  if (base == "atom" || base == "red") { decode_atom(base == "red", mods, ops, I); return; }
  if (base == "tex" || base == "tld4" || base == "txq" || base == "suld" || base == "sust" || base == "suq") {
    decode_tex(base, mods, ops, I);
    return;
  }
  if (base == "cvt") { decode_cvt(mods, ops, I); return; }
  if (base == "wmma" || base == "mma" || base == "ldmatrix" || base == "stmatrix") {
    decode_mma(base, mods, ops, I);
    return;
  }
  if (base == "mov") {
    need(ops, 2, line, "mov");
    Ty ty = last_ty();
    if (ty == T_None) fail(line, "mov without a type");
    if (ops[0].k == Opd::Vec) {  // unpack
      int n = int(ops[0].el.size());
      int bits = ty_bytes(ty) * 8;
      if (n < 2 || n > 4 || bits % n) fail(line, "bad vector mov");
      I.s[0] = src(ops[1], ty);
      for (int i = 0; i < n; ++i) I.d[i] = dst(ops[0].el[size_t(i)]);
      I.nd = uint8_t(n);
      I.a0 = uint32_t(bits / n);
      I.fn = h_unpack;
      emit(I);
      return;
    }
    I.d[0] = dst(ops[0]);
    if (ops[1].k == Opd::Vec) {  // pack
      int n = int(ops[1].el.size());
      int bits = ty_bytes(ty) * 8;
      if (n < 2 || n > 4 || bits % n) fail(line, "bad vector mov");
      Ty et = bits / n == 8 ? T_B8 : bits / n == 16 ? T_B16 : T_B32;
      for (int i = 0; i < n; ++i) I.s[i] = src(ops[1].el[size_t(i)], et);
      I.ns = uint8_t(n);
      I.a0 = uint32_t(bits / n);
      I.fn = h_pack;
      emit(I);
      return;
    }
    if (ops[1].k == Opd::Sreg) {
      I.fn = h_sreg;
      I.a0 = ops[1].reg;
      emit(I);
      return;
    }
    if (ops[1].k == Opd::Name && ops[1].name != "WARP_SZ") {
      const VarRef* v = lookup_var(ops[1].name);
      if (!v) {
        if (uint32_t fi = func_index(ops[1].name); fi != NOREG) {  // a function pointer
          I.s[0] = cst(func_addr(M.tag, fi));
          I.fn = h_mov;
          emit(I);
          return;
        }
        fail(line, "unknown symbol '" + std::string(ops[1].name) + "'");
      }
      set_var(I, *v);
      I.fn = h_varaddr;
      emit(I);
      return;
    }
    I.s[0] = src(ops[1], ty);
    I.fn = h_mov;
    emit(I);
    return;
  }
  if (base == "setp" || base == "set") {
    bool isset = base == "set";
    Cmp c = C_EQ;
    bool have = false;
    uint32_t bop = 0;
    std::vector<Ty> tys;
    bool ftz = false;
    for (auto m : mods) {
      bool ok;
      Cmp x = parse_cmp(m, ok);
      if (ok && !have) { c = x; have = true; continue; }
      if (m == "and") { bop = 1; continue; }
      if (m == "or") { bop = 2; continue; }
      if (m == "xor") { bop = 3; continue; }
      if (m == "ftz") { ftz = true; continue; }
      Ty t = parse_ty(m);
      if (t == T_None) fail(line, "unknown modifier ." + std::string(m) + " on " + std::string(base));
      tys.push_back(t);
    }
    if (!have || tys.empty()) fail(line, std::string(base) + " needs a comparison and a type");
    Ty ty = tys.back();
    if (ty == T_F16 || ty == T_F16X2 || ty == T_BF16 || ty == T_BF16X2) {
      const bool x2 = ty == T_F16X2 || ty == T_BF16X2;
      need(ops, bop ? 4 : 3, line, base);
      I.d[0] = dst(ops[0]);
      if (ops[0].pipe != NOREG) I.d[1] = ops[0].pipe;
      if (x2 && !isset && I.d[1] == NOREG) fail(line, std::string(base) + " on an x2 type needs p|q");
      // An immediate operand is one half (f16/bf16 bits) or the packed pair.
      const Ty it = x2 ? T_B32 : T_B16;
      I.s[0] = src(ops[1], it);
      I.s[1] = src(ops[2], it);
      if (bop) {
        I.s[2] = src(ops[3], T_Pred);
        I.flags = ops[3].bang ? 1 : 0;
      }
      I.a1 = bop;
      uint32_t kind = 0;
      if (isset) {
        if (tys.size() != 2) fail(line, "set needs destination and source types");
        I.flags |= 2;
        kind = tys[0] == T_F32 ? 1 : (tys[0] == T_F16 || tys[0] == T_F16X2) ? 2 : (tys[0] == T_BF16 || tys[0] == T_BF16X2) ? 3 : 0;
      }
      I.a0 = uint32_t(c) | (ty == T_BF16 || ty == T_BF16X2 ? 0x100 : 0) | (x2 ? 0x200 : 0) | (ftz ? 0x400 : 0) | kind << 12;
      I.fn = h_setp_half;
      emit(I);
      return;
    }
    bool isf = ty == T_F32 || ty == T_F64;
    if (!isf && c > C_GE) fail(line, "unordered comparison on an integer type");
    need(ops, bop ? 4 : 3, line, base);
    I.d[0] = dst(ops[0]);
    if (ops[0].pipe != NOREG) I.d[1] = ops[0].pipe;
    I.s[0] = src(ops[1], ty);
    I.s[1] = src(ops[2], ty);
    if (bop) {
      I.s[2] = src(ops[3], T_Pred);
      I.flags = ops[3].bang ? 1 : 0;
    }
    I.a1 = bop;
    if (ftz && ty == T_F32) I.flags |= 4;  // denormal operands compare as zeros
    if (isset) {
      if (tys.size() != 2) fail(line, "set needs destination and source types");
      if (tys[0] == T_F32) I.flags |= 2;
    }
    I.fn = pick_setp(ty, c, isset);
    if (!I.fn) fail(line, "bad type for " + std::string(base));
    emit(I);
    return;
  }
  if (base == "selp") {
    need(ops, 4, line, "selp");
    Ty ty = last_ty();
    I.d[0] = dst(ops[0]);
    I.s[0] = src(ops[1], ty);
    I.s[1] = src(ops[2], ty);
    if (ops[3].bang) fail(line, "negated selp predicate");
    I.s[2] = src(ops[3], T_Pred);
    I.fn = h_selp;
    emit(I);
    return;
  }
  if (base == "slct") {
    need(ops, 4, line, "slct");
    std::vector<Ty> tys;
    for (auto m : mods) if (parse_ty(m) != T_None) tys.push_back(parse_ty(m));
    if (tys.size() != 2) fail(line, "slct needs two types");
    I.d[0] = dst(ops[0]);
    I.s[0] = src(ops[1], tys[0]);
    I.s[1] = src(ops[2], tys[0]);
    I.s[2] = src(ops[3], tys[1]);
    I.fn = tys[1] == T_F32 ? h_slct<float> : h_slct<int32_t>;
    emit(I);
    return;
  }
  if (base == "testp") {
    need(ops, 2, line, "testp");
    static const std::pair<std::string_view, uint32_t> tab[] = {{"finite", 0}, {"infinite", 1}, {"number", 2}, {"notanumber", 3}, {"normal", 4}, {"subnormal", 5}};
    bool found = false;
    for (auto& [n, v] : tab) if (has(n)) { I.a0 = v; found = true; }
    if (!found) fail(line, "testp without a test");
    Ty ty = last_ty();
    I.a1 = ty == T_F64;
    I.d[0] = dst(ops[0]);
    I.s[0] = src(ops[1], ty);
    I.fn = h_testp;
    emit(I);
    return;
  }
  if (base == "cvta") {
    need(ops, 2, line, "cvta");
    bool to = has("to");
    Sp sp = Sp::Generic;
    for (auto m : mods) { bool ok; Sp s = parse_space(m, ok); if (ok) sp = s; }
    uint64_t w = sp == Sp::Shared ? kSharedWindow : sp == Sp::Local ? kLocalWindow : sp == Sp::KParam ? kParamWindow : 0;
    I.d[0] = dst(ops[0]);
    if (ops[1].k == Opd::Name) {
      const VarRef* v = lookup_var(ops[1].name);
      if (!v) fail(line, "unknown symbol '" + std::string(ops[1].name) + "'");
      if (sp == Sp::KParam && v->avk == AV_Local) w = kLocalWindow;
    }
    I.s[0] = src(ops[1], T_U64);
    I.a0 = uint32_t(w >> 32);
    I.a1 = uint32_t(w);
    if (sp == Sp::KParam && !F->is_entry) { I.a0 = uint32_t(kLocalWindow >> 32); I.a1 = 0; }
    I.fn = w == 0 ? h_mov : to ? h_cvta<true> : h_cvta<false>;
    emit(I);
    return;
  }
  if (base == "isspacep") {
    need(ops, 2, line, "isspacep");
    Sp sp = Sp::Global;
    for (auto m : mods) { bool ok; Sp s = parse_space(m, ok); if (ok) sp = s; }
    I.d[0] = dst(ops[0]);
    I.s[0] = src(ops[1], T_U64);
    I.a0 = uint32_t(sp);
    I.fn = h_isspacep;
    emit(I);
    return;
  }
  if (base == "bra" || base == "brx") {
    if (base == "brx") { mark_unsupported(line, "brx.idx (indirect branch)"); return; }
    need(ops, 1, line, "bra");
    if (ops[0].k != Opd::Name) fail(line, "bra needs a label");
    I.ctl = Ctl::Bra;
    I.fn = h_nop;
    Tok t;
    t.s = ops[0].name;
    t.line = line;
    fixups.push_back({uint32_t(F->code.size()), t});
    emit(I);
    return;
  }
  if (base == "ret" || base == "exit") {
    I.ctl = base == "ret" ? Ctl::Ret : Ctl::Exit;
    if (F->is_entry) I.ctl = Ctl::Exit;
    I.fn = h_nop;
    emit(I);
    return;
  }
  if (base == "trap") {
    I.ctl = Ctl::Trap;
    I.fn = h_nop;
    emit(I);
    return;
  }
  if (base == "bar" || base == "barrier") {
    if (has("warp")) {  // bar.warp.sync: lanes of a warp run in step already
      I.fn = h_nop;
      emit(I);
      return;
    }
    bool arrive = has("arrive"), red = has("red");
    I.ctl = Ctl::Bar;
    I.fn = h_nop;
    size_t k = 0;
    if (red) {
      // bar.red.popc.u32 d, a{, b}, {!}c ; bar.red.and/or.pred p, a{, b}, {!}c
      uint32_t op = has("popc") ? 1 : has("and") ? 2 : has("or") ? 3 : 0;
      if (!op) fail(line, "bar.red needs popc/and/or");
      if (ops.size() < 3 || ops.size() > 4) fail(line, "bar.red expects 3 or 4 operands");
      I.d[0] = dst(ops[0]);
      k = 1;
      I.s[2] = src(ops.back(), T_Pred);
      I.flags = uint8_t(op << 2 | (ops.back().bang ? 1 : 0));
      ops.pop_back();
    } else if (arrive) {
      I.flags = 2;
    }
    if (ops.size() < k + 1 || ops.size() > k + 2) fail(line, "bar expects a barrier id and an optional count");
    I.s[0] = src(ops[k], T_U32);
    if (ops.size() == k + 2) I.s[1] = src(ops[k + 1], T_U32);
    emit(I);
    return;
  }
  if (base == "nanosleep") {  // a hint to let other warps run: the scheduler yields here
    I.fn = h_nop;
    I.ctl = Ctl::Yield;
    emit(I);
    return;
  }
  if (base == "griddepcontrol") {
    // Programmatic dependent launch (cudaGridDependencySynchronize,
    // cudaTriggerProgrammaticLaunchCompletion). A kernel starts here only
    // after the previous kernel of its stream has completed, so .wait finds
    // the prerequisite grid done and .launch_dependents has no one to release.
    if (mods.size() != 1 || (mods[0] != "wait" && mods[0] != "launch_dependents"))
      fail(line, "griddepcontrol needs .wait or .launch_dependents");
    if (!ops.empty()) fail(line, "griddepcontrol takes no operands");
    I.fn = h_nop;
    emit(I);
    return;
  }
  if (base == "membar" || base == "fence" || base == "prefetch" || base == "prefetchu" ||
      base == "pmevent" || base == "brkpt" || base == "discard" || base == "applypriority" ||
      base == "createpolicy") {
    if (base == "createpolicy") {
      // The policy is an opaque 64-bit value only consumed by .L2::cache_hint accesses,
      // which ignore it here: any value is faithful. Operands after the first are checked.
      if (ops.empty() || ops.size() > 4) fail(line, "createpolicy expects 2 to 4 operands");
      for (size_t k = 1; k < ops.size(); ++k)
        if (ops[k].k == Opd::Vec) fail(line, "bad createpolicy operand");
      I.d[0] = dst(ops[0]);
      I.s[0] = cst(0);
      I.fn = h_mov;
      emit(I);
      return;
    }
    I.fn = h_nop;
    emit(I);
    return;
  }
  if (base == "shfl") {
    if (!has("sync")) { mark_unsupported(line, "shfl without .sync"); return; }
    need(ops, 5, line, "shfl");
    I.a0 = has("up") ? 0 : has("down") ? 1 : has("bfly") ? 2 : has("idx") ? 3 : 99;
    if (I.a0 == 99) fail(line, "shfl needs up/down/bfly/idx");
    I.d[0] = dst(ops[0]);
    if (ops[0].pipe != NOREG) I.d[1] = ops[0].pipe;
    I.s[0] = src(ops[1], T_B32);
    I.s[1] = src(ops[2], T_U32);
    I.s[2] = src(ops[3], T_U32);
    I.s[3] = src(ops[4], T_U32);
    I.fn = h_shfl;
    emit(I);
    return;
  }
  if (base == "vote") {
    I.a0 = has("all") ? 0 : has("any") ? 1 : has("uni") ? 2 : has("ballot") ? 3 : 99;
    if (I.a0 == 99) fail(line, "vote needs all/any/uni/ballot");
    if (ops.size() != 2 && ops.size() != 3) fail(line, "vote expects 2 or 3 operands");
    I.d[0] = dst(ops[0]);
    I.s[0] = src(ops[1], T_Pred);
    if (ops.size() == 3) I.s[1] = src(ops[2], T_B32);  // membermask (vote without .sync: the active lanes)
    I.flags = ops[1].bang ? 1 : 0;
    I.fn = h_vote;
    emit(I);
    return;
  }
  if (base == "match") {
    need(ops, 3, line, "match");
    I.a0 = has("all") ? 1 : 0;
    I.a1 = has("b64") ? 8 : 4;
    I.d[0] = dst(ops[0]);
    if (ops[0].pipe != NOREG) I.d[1] = ops[0].pipe;
    I.s[0] = src(ops[1], I.a1 == 8 ? T_B64 : T_B32);
    I.s[1] = src(ops[2], T_B32);  // membermask
    I.fn = h_match;
    emit(I);
    return;
  }
  if (base == "redux") {
    need(ops, 3, line, "redux");
    I.a0 = has("add") ? 0 : has("min") ? 1 : has("max") ? 2 : has("and") ? 3 : has("or") ? 4 : has("xor") ? 5 : 99;
    if (I.a0 == 99 || has("f32")) { mark_unsupported(line, "redux variant"); return; }
    I.a1 = has("s32");
    I.d[0] = dst(ops[0]);
    I.s[0] = src(ops[1], T_B32);
    I.s[1] = src(ops[2], T_B32);  // membermask
    I.fn = h_redux;
    emit(I);
    return;
  }
  if (base == "cp") {
    // cp.async.{ca,cg}.shared{::cta}.global [dst], [src], cp-size{, src-size | ignore-src}{, policy}:
    // the copy is made when issued, so commit_group/wait_group/wait_all find every group complete.
    if (!has("async") || has("bulk") || has("reduce")) { mark_unsupported(line, "cp without .async (or bulk)"); return; }
    if (has("commit_group") || has("wait_group") || has("wait_all")) {
      I.fn = h_nop;
      emit(I);
      return;
    }
    if (has("mbarrier")) {
      // cp.async.mbarrier.arrive{.noinc}{.shared{::cta}}.b64 [addr]: the arrive-on the
      // thread's earlier copies trigger once complete. They completed when issued, so it
      // happens now: with .noinc one arrival; without, the pending count is raised by one
      // first, a net change of zero (the object's address is still checked).
      if (!has("arrive")) fail(line, "cp.async.mbarrier needs .arrive");
      need(ops, 1, line, "cp.async.mbarrier.arrive");
      if (ops[0].k != Opd::Mem) fail(line, "cp.async.mbarrier.arrive needs an address operand");
      Sp space = has("shared") || has("shared::cta") ? Sp::Shared : Sp::Generic;
      apply_addr(I, ops[0], space);
      if (space != Sp::Generic && space != Sp::Shared) fail(line, "mbarrier objects live in shared memory");
      I.a0 = has("noinc") ? 2 : 7;
      I.space = space;
      I.fn = space == Sp::Shared ? h_mbarrier<Sp::Shared> : h_mbarrier<Sp::Generic>;
      emit(I);
      return;
    }
    if (!has("shared") && !has("shared::cta")) fail(line, "cp.async copies into shared memory");
    if (std::find(mods.begin(), mods.end(), "L2::cache_hint") != mods.end()) {
      if (ops.size() < 4) fail(line, "cp.async with .L2::cache_hint needs a cache policy");
      ops.pop_back();  // a hint the sim device's flat memory has no use for
    }
    if (ops.size() < 3 || ops.size() > 4) fail(line, "cp.async expects 3 or 4 operands");
    Sp sp = Sp::Shared;
    apply_addr(I, ops[0], sp);
    if (sp != Sp::Shared) fail(line, "cp.async destination must be shared memory");
    const Opd& src_op = ops[1];
    if (src_op.k != Opd::Mem || src_op.mreg == NOREG || !src_op.mname.empty())
      { mark_unsupported(line, "cp.async from a named global variable"); return; }
    if (src_op.moff < INT32_MIN || src_op.moff > INT32_MAX) fail(line, "cp.async source offset out of range");
    I.s[0] = src_op.mreg;
    I.a1 = uint32_t(int32_t(src_op.moff));
    if (ops[2].k != Opd::Imm || ops[2].num.fk != 0 || (ops[2].num.u != 4 && ops[2].num.u != 8 && ops[2].num.u != 16))
      fail(line, "cp.async copy size must be 4, 8 or 16");
    I.a0 = uint32_t(ops[2].num.u);
    if (has("cg") && I.a0 != 16) fail(line, "cp.async.cg copies 16 bytes");
    if (ops.size() == 4) {
      if (ops[3].k == Opd::Reg && is_pred_slot(ops[3].reg)) I.s[2] = src(ops[3], T_Pred);  // ignore-src
      else I.s[1] = src(ops[3], T_U32);                                                    // src-size
    }
    I.space = Sp::Shared;
    I.fn = h_cp_async;
    emit(I);
    return;
  }
  if (base == "mbarrier") {
    // mbarrier.{init,inval,arrive,arrive_drop,test_wait,try_wait,pending_count}[.parity][.sem][.scope][.space].b64
    std::string_view what;
    bool parity = false;
    Sp space = Sp::Generic;
    for (auto m : mods) {
      bool ok;
      Sp s = parse_space(m, ok);
      if (ok) { space = s; continue; }
      if (m == "init" || m == "inval" || m == "arrive" || m == "arrive_drop" || m == "test_wait" || m == "try_wait" ||
          m == "pending_count") what = m;
      else if (m == "parity") parity = true;
      else if (m == "b64" || m == "release" || m == "acquire" || m == "relaxed" || m == "cta" || m == "shared::cta") {}
      else { mark_unsupported(line, "mbarrier modifier ." + std::string(m)); return; }
    }
    if (what.empty()) fail(line, "mbarrier without an operation");
    if (space != Sp::Generic && space != Sp::Shared) fail(line, "mbarrier objects live in shared memory");
    if (what == "pending_count") {
      need(ops, 2, line, "mbarrier.pending_count");
      I.d[0] = dst(ops[0]);
      I.s[0] = src(ops[1], T_B64);
      I.a0 = 6;
      I.fn = h_mbarrier<Sp::Generic>;
      emit(I);
      return;
    }
    const bool waits = what == "test_wait" || what == "try_wait";
    size_t at = 0;  // the address operand's position
    const size_t lo = what == "inval" ? 1 : what == "init" || what == "arrive" || what == "arrive_drop" ? 2 : 3;
    const size_t hi = what == "arrive" || what == "arrive_drop" || what == "try_wait" ? lo + 1 : lo;
    if (ops.size() < lo || ops.size() > hi) fail(line, "mbarrier." + std::string(what) + ": wrong number of operands");
    if (what == "arrive" || what == "arrive_drop" || waits) {
      I.d[0] = dst(ops[0]);
      at = 1;
    }
    if (ops[at].k != Opd::Mem) fail(line, "mbarrier needs an address operand");
    apply_addr(I, ops[at], space);
    if (what == "init") { I.s[0] = src(ops[1], T_B32); I.a0 = 0; }
    else if (what == "inval") I.a0 = 1;
    else if (what == "arrive" || what == "arrive_drop") {
      if (ops.size() > 2) I.s[0] = src(ops[2], T_B32);  // the arrival count (sm_90)
      I.a0 = what == "arrive" ? 2 : 3;
    } else {  // a try_wait's 4th operand is a time hint
      I.s[0] = src(ops[2], parity ? T_B32 : T_B64);
      I.a0 = parity ? 5 : 4;
      I.sched |= kSchedPoll;  // polled in a loop: a spin-wait
    }
    I.space = space;
    I.fn = space == Sp::Shared ? h_mbarrier<Sp::Shared> : h_mbarrier<Sp::Generic>;
    emit(I);
    return;
  }
  if (base == "activemask") {
    need(ops, 1, line, "activemask");
    I.d[0] = dst(ops[0]);
    I.fn = h_activemask;
    emit(I);
    return;
  }
  if (base == "vshl" || base == "vshr") {
    // Scalar video shift: three types, .sat, .clamp/.wrap, optional .add/.min/.max.
    std::vector<bool> sgn;
    uint32_t a0 = base == "vshl" ? 32u : 0u, a1 = 0, modes = 0;
    for (auto m : mods) {
      if (m == "u32" || m == "s32") sgn.push_back(m[0] == 's');
      else if (m == "sat") a0 |= 8;
      else if (m == "clamp") modes++;
      else if (m == "wrap") a0 |= 16, modes++;
      else if (m == "add" || m == "min" || m == "max") a1 = m == "add" ? 1 : m == "min" ? 2 : 3;
      else fail(line, "unknown modifier ." + std::string(m) + " on " + std::string(base));
    }
    if (sgn.size() != 3 || modes != 1) fail(line, std::string(base) + " needs three types and .clamp or .wrap");
    need(ops, a1 ? 4 : 3, line, base);
    a0 |= (sgn[0] ? 1u : 0u) | (sgn[1] ? 2u : 0u) | (sgn[2] ? 4u : 0u);
    I.d[0] = dst(ops[0]);
    for (size_t i = 1; i < ops.size(); i++) I.s[i - 1] = src(ops[i], T_U32);
    I.a0 = a0, I.a1 = a1;
    I.fn = h_vshift;
    emit(I);
    return;
  }
  if (decode_arith(base, mods, ops, I)) return;
  mark_unsupported(line, "instruction '" + std::string(opcode) + "'");
}

}  // namespace wh::ptx::detail::parse

WH_JIT_CATALOG(core);
