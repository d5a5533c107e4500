// Decode of the tensor-core instructions (mma).
#include "parser.hpp"

namespace wh::ptx::detail::parse {

// Tensor-core instructions (mma.hpp): the form is checked against the PTX ISA's tables,
// then every operand against the fragment sizes of that form.
void Parser::decode_mma(std::string_view base, const std::vector<std::string_view>& mods, std::vector<Opd>& ops,
                        Inst I) {
  MmaOp op;
  std::string msg;
  switch (mma_parse(base, mods, op, msg)) {
    case MmaParse::Error: fail(I.line, msg);
    case MmaParse::Unsupported: mark_unsupported(I.line, "instruction " + msg); return;
    case MmaParse::Ok: break;
  }
  mma_coords(op);
  std::string name(base);
  for (auto m : mods) name += "." + std::string(m);
  // A brace-enclosed register list of exactly n elements (a single register may go bare).
  auto regs = [&](const Opd& o, int n, uint32_t* out, bool is_dst, bool wide, const char* what) {
    std::vector<const Opd*> el;
    if (o.k == Opd::Vec) {
      for (auto& e : o.el) el.push_back(&e);
    } else if (o.k == Opd::Reg || o.k == Opd::Sink || o.k == Opd::Imm) {
      el.push_back(&o);
    } else {
      fail(I.line, name + ": the " + what + " operand must be a {...} register list");
    }
    if (int(el.size()) != n)
      fail(I.line, name + ": the " + what + " operand takes " + std::to_string(n) + " register" + (n == 1 ? "" : "s") +
                       ", got " + std::to_string(el.size()));
    for (int i = 0; i < n; ++i) {
      if (el[size_t(i)]->k == Opd::Vec || el[size_t(i)]->k == Opd::Mem) fail(I.line, name + ": bad " + what + " register");
      out[i] = is_dst ? dst(*el[size_t(i)]) : src(*el[size_t(i)], wide ? T_B64 : T_B32);
    }
  };
  auto mem = [&](Opd& o) {
    Sp space = Sp::Generic;
    for (auto m : mods) {
      bool ok;
      Sp s = parse_space(m, ok);
      if (ok) space = s;
    }
    apply_addr(I, o, space);
    if (space != Sp::Generic && space != Sp::Global && space != Sp::Shared)
      fail(I.line, name + ": the address must be in the global or shared space");
    if ((op.kind == MK_LdMatrix || op.kind == MK_StMatrix) && space == Sp::Global)
      fail(I.line, name + ": the address must be in the shared space");
    I.space = space;
  };
  switch (op.kind) {
    case MK_WLoad:
    case MK_WStore: {
      const bool load = op.kind == MK_WLoad;
      if (ops.size() != 2 && ops.size() != 3) fail(I.line, name + " expects 2 or 3 operands (the stride is optional)");
      Opd& frag = load ? ops[0] : ops[1];
      Opd& addr = load ? ops[1] : ops[0];
      if (addr.k != Opd::Mem) fail(I.line, name + ": expected a memory operand [..]");
      regs(frag, op.g[0].nregs, op.r[0], load, op.g[0].bits == 64, "fragment");
      mem(addr);
      if (ops.size() == 3) {
        if (ops[2].k != Opd::Reg && ops[2].k != Opd::Imm) fail(I.line, name + ": the stride must be a register or an integer");
        I.s[0] = src(ops[2], T_U32);
      }
      I.fn = load ? h_wmma_ldst<false> : h_wmma_ldst<true>;
      break;
    }
    case MK_WMma:
    case MK_Mma: {
      need(ops, 4, I.line, name);
      static const char* what[] = {"d", "a", "b", "c"};
      for (int f = 0; f < 4; ++f) regs(ops[size_t(f)], op.g[f].nregs, op.r[f], f == 0, op.g[f].bits == 64, what[f]);
      I.fn = h_mma;
      break;
    }
    case MK_LdMatrix:
    case MK_StMatrix: {
      const bool load = op.kind == MK_LdMatrix;
      need(ops, 2, I.line, name);
      Opd& frag = load ? ops[0] : ops[1];
      Opd& addr = load ? ops[1] : ops[0];
      if (addr.k != Opd::Mem) fail(I.line, name + ": expected a memory operand [..]");
      regs(frag, op.num, op.r[0], load, false, "register");
      mem(addr);
      I.fn = load ? h_ldstmatrix<false> : h_ldstmatrix<true>;
      break;
    }
  }
  if (F->mma.size() >= kMaxInsts) fail(I.line, "function too large");
  I.a0 = uint32_t(F->mma.size());
  F->mma.push_back(op);
  emit(I);
}

}  // namespace wh::ptx::detail::parse
