// Decode of memory instructions: ld/st, atom/red and their addresses.
#include "parser.hpp"
#include "jit_catalog.hpp"

namespace wh::ptx::detail::parse {

namespace {

template <Sp S>
Handler pick_ld(int sz, bool sgn, int vec) {
#define WH_L(SZ)                                                                       \
  if (sz == SZ) {                                                                      \
    if (vec == 1) return sgn ? h_ld<S, SZ, true, 1> : h_ld<S, SZ, false, 1>;           \
    if (vec == 2) return sgn ? h_ld<S, SZ, true, 2> : h_ld<S, SZ, false, 2>;           \
    if (vec == 4) return sgn ? h_ld<S, SZ, true, 4> : h_ld<S, SZ, false, 4>;           \
  }
  WH_L(1) WH_L(2) WH_L(4) WH_L(8)
#undef WH_L
  return nullptr;
}
template <Sp S>
Handler pick_st(int sz, int vec) {
#define WH_S(SZ)                                  \
  if (sz == SZ) {                                 \
    if (vec == 1) return h_st<S, SZ, 1>;          \
    if (vec == 2) return h_st<S, SZ, 2>;          \
    if (vec == 4) return h_st<S, SZ, 4>;          \
  }
  WH_S(1) WH_S(2) WH_S(4) WH_S(8)
#undef WH_S
  return nullptr;
}
Handler pick_ld_sp(Sp s, int sz, bool sgn, int vec) {
  switch (s) {
    case Sp::Generic: return pick_ld<Sp::Generic>(sz, sgn, vec);
    case Sp::Global: return pick_ld<Sp::Global>(sz, sgn, vec);
    case Sp::Const: return pick_ld<Sp::Const>(sz, sgn, vec);
    case Sp::Shared: return pick_ld<Sp::Shared>(sz, sgn, vec);
    case Sp::Local: return pick_ld<Sp::Local>(sz, sgn, vec);
    case Sp::KParam: return pick_ld<Sp::KParam>(sz, sgn, vec);
  }
  return nullptr;
}
Handler pick_st_sp(Sp s, int sz, int vec) {
  switch (s) {
    case Sp::Generic: return pick_st<Sp::Generic>(sz, vec);
    case Sp::Global: return pick_st<Sp::Global>(sz, vec);
    case Sp::Const: return nullptr;
    case Sp::Shared: return pick_st<Sp::Shared>(sz, vec);
    case Sp::Local: return pick_st<Sp::Local>(sz, vec);
    case Sp::KParam: return nullptr;
  }
  return nullptr;
}
template <Sp S, class V>
Handler pick_atom_op(int op) {
  switch (op) {
    case A_ADD: return h_atom<S, V, A_ADD>;
    case A_MIN: return h_atom<S, V, A_MIN>;
    case A_MAX: return h_atom<S, V, A_MAX>;
    case A_EXCH: return h_atom<S, V, A_EXCH>;
    case A_CAS: return h_atom<S, V, A_CAS>;
    default: break;
  }
  if constexpr (std::is_integral_v<V>) {
    switch (op) {
      case A_INC: return h_atom<S, V, A_INC>;
      case A_DEC: return h_atom<S, V, A_DEC>;
      case A_AND: return h_atom<S, V, A_AND>;
      case A_OR: return h_atom<S, V, A_OR>;
      case A_XOR: return h_atom<S, V, A_XOR>;
      default: break;
    }
  }
  return nullptr;
}
template <Sp S>
Handler pick_atom_ty(Ty t, int op) {
  switch (t) {
    case T_U32: case T_B32: return pick_atom_op<S, uint32_t>(op);
    case T_S32: return pick_atom_op<S, int32_t>(op);
    case T_U64: case T_B64: return pick_atom_op<S, uint64_t>(op);
    case T_S64: return pick_atom_op<S, int64_t>(op);
    case T_F32: return op == A_ADD || op == A_EXCH || op == A_MIN || op == A_MAX || op == A_CAS ? pick_atom_op<S, float>(op) : nullptr;
    case T_F64: return op == A_ADD || op == A_EXCH || op == A_MIN || op == A_MAX || op == A_CAS ? pick_atom_op<S, double>(op) : nullptr;
    default: return nullptr;
  }
}
Handler pick_atom(Sp s, Ty t, int op) {
  switch (s) {
    case Sp::Generic: return pick_atom_ty<Sp::Generic>(t, op);
    case Sp::Global: return pick_atom_ty<Sp::Global>(t, op);
    case Sp::Shared: return pick_atom_ty<Sp::Shared>(t, op);
    default: return nullptr;
  }
}

}  // namespace

Sp parse_space(std::string_view m, bool& ok) {
  ok = true;
  if (m == "global") return Sp::Global;
  if (m == "shared" || m == "shared::cta") return Sp::Shared;
  if (m == "local") return Sp::Local;
  if (m == "param" || m == "param::func" || m == "param::entry") return Sp::KParam;
  if (m == "const") return Sp::Const;
  ok = false;
  return Sp::Generic;
}

void Parser::apply_addr(Inst& I, const Opd& m, Sp& space) {
  if (m.k != Opd::Mem) fail(m.line, "expected a memory operand [..]");
  if (!m.el.empty()) fail(m.line, "coordinates in a memory operand");  // only texture/surface operands have them
  I.areg = m.mreg;
  I.aoff = m.moff;
  if (!m.mname.empty()) {
    const VarRef* v = lookup_var(m.mname);
    if (!v) {
      if (M.func_by_name.count(std::string(m.mname))) fail(m.line, "function addresses are not supported");
      fail(m.line, "unknown symbol '" + std::string(m.mname) + "'");
    }
    set_var(I, *v);
    if (space == Sp::Generic) {
      space = v->space;
      if (v->avk == AV_Global) space = Sp::Global;
    } else if (space == Sp::KParam) {
      space = v->space;  // entry params -> KParam, func/call-site params -> Local
    } else if (space == Sp::Const && v->avk == AV_Global) {
      space = Sp::Const;
    }
  } else if (space == Sp::KParam && !F->is_entry) {
    space = Sp::Local;
  }
}

void Parser::decode_mem(std::string_view base, const std::vector<std::string_view>& mods, std::vector<Opd>& ops, Inst I) {
  Sp space = Sp::Generic;
  Ty ty = T_None;
  int vec = 1;
  for (auto m : mods) {
    bool ok;
    Sp s = parse_space(m, ok);
    if (ok) { space = s; continue; }
    if (m == "v2") { vec = 2; continue; }
    if (m == "v4") { vec = 4; continue; }
    if (m == "v8") { mark_unsupported(I.line, "8-element vector memory access"); return; }
    Ty t = parse_ty(m);
    if (t != T_None) ty = t;
  }
  if (ty == T_None) fail(I.line, std::string(base) + " without a type");
  if (ty == T_B128) { mark_unsupported(I.line, ".b128 memory access"); return; }
  int sz = ty_bytes(ty);
  if (ty == T_Pred || sz == 0) fail(I.line, "bad type for " + std::string(base));
  // `.L2::cache_hint` adds a 64-bit cache-policy operand (from createpolicy): a hint the
  // sim device's flat memory has no use for, so it is checked and dropped.
  if (ops.size() == 3 && std::find(mods.begin(), mods.end(), "L2::cache_hint") != mods.end()) {
    if (ops[2].k != Opd::Reg && ops[2].k != Opd::Imm) fail(I.line, "cache policy must be a register or immediate");
    ops.pop_back();
  }
  need(ops, 2, I.line, base);
  bool is_ld = base != "st";
  Opd& val = is_ld ? ops[0] : ops[1];
  Opd& mem = is_ld ? ops[1] : ops[0];
  apply_addr(I, mem, space);
  if (val.k == Opd::Vec) {
    if (int(val.el.size()) != vec) fail(I.line, "vector operand size does not match .v" + std::to_string(vec));
  } else if (vec != 1) {
    fail(I.line, "vector access needs a {..} operand");
  }
  auto elems = [&]() -> std::vector<const Opd*> {
    std::vector<const Opd*> v;
    if (val.k == Opd::Vec) for (auto& e : val.el) v.push_back(&e);
    else v.push_back(&val);
    return v;
  };
  if (is_ld) {
    auto ev = elems();
    for (int i = 0; i < vec; ++i) I.d[i] = dst(*ev[i]);
    I.nd = uint8_t(vec);
    I.fn = pick_ld_sp(space, sz, ty_signed(ty), vec);
  } else {
    auto ev = elems();
    for (int i = 0; i < vec; ++i) I.s[i] = src(*ev[i], ty);
    I.ns = uint8_t(vec);
    I.fn = pick_st_sp(space, sz, vec);
    if (!I.fn) fail(I.line, std::string("st to the read-only ") + sp_name(space) + " space");
  }
  I.space = space;
  if (!I.fn) fail(I.line, "unsupported memory access shape");
  if (is_ld)
    for (auto m : mods)
      if (m == "volatile" || m == "acquire" || m == "relaxed") I.sched |= kSchedPoll;
  emit(I);
}

void Parser::decode_atom(bool red, const std::vector<std::string_view>& mods, std::vector<Opd>& ops, Inst I) {
  Sp space = Sp::Generic;
  Ty ty = T_None;
  int op = -1;
  for (auto m : mods) {
    bool ok;
    Sp s = parse_space(m, ok);
    if (ok) { space = s; continue; }
    static const std::pair<std::string_view, int> tab[] = {{"add", A_ADD}, {"min", A_MIN}, {"max", A_MAX}, {"exch", A_EXCH},
                                                           {"cas", A_CAS}, {"inc", A_INC}, {"dec", A_DEC}, {"and", A_AND},
                                                           {"or", A_OR}, {"xor", A_XOR}};
    bool found = false;
    for (auto& [n, v] : tab)
      if (m == n) { op = v; found = true; }
    if (found) continue;
    if (m == "v2" || m == "v4" || m == "v8" || m == "noftz") { mark_unsupported(I.line, "vector/packed atomics"); return; }
    Ty t = parse_ty(m);
    if (t != T_None) ty = t;
  }
  if (op < 0 || ty == T_None) fail(I.line, "atom without operation or type");
  if (ty == T_F16 || ty == T_BF16 || ty == T_F16X2 || ty == T_BF16X2) { mark_unsupported(I.line, "half-precision atomics"); return; }
  size_t base = red ? 0 : 1;
  need(ops, base + (op == A_CAS ? 3 : 2), I.line, red ? "red" : "atom");
  if (!red) { I.d[0] = dst(ops[0]); I.nd = 1; }
  apply_addr(I, ops[base], space);
  if (space == Sp::Local || space == Sp::KParam || space == Sp::Const) fail(I.line, "atomics on this state space are not allowed");
  I.s[0] = src(ops[base + 1], ty);
  if (op == A_CAS) I.s[1] = src(ops[base + 2], ty);
  I.space = space;
  I.fn = pick_atom(space, ty, op);
  if (!I.fn) { mark_unsupported(I.line, "atomic operation/type combination"); return; }
  // Atomics that only read or test-and-set memory (cas, exch, add/or/xor of 0) are how
  // locks and flags are polled; other read-modify-writes change memory every time.
  if (!red && (op == A_CAS || op == A_EXCH ||
               ((op == A_ADD || op == A_OR || op == A_XOR) && (I.s[0] & CBIT) && M.cpool[uint64_t(I.s[0] & ~CBIT) * 32] == 0)))
    I.sched |= kSchedPoll;
  emit(I);
}

}  // namespace wh::ptx::detail::parse

WH_JIT_CATALOG(memory);
