// PTX parser: module structure, directives, declarations, functions and
// statements (text -> ModuleImpl); instructions are decoded by decode*.cpp.
#include "parser.hpp"
#include "jit_catalog.hpp"

namespace wh::ptx::detail {

const char* ty_name(Ty t) {
  static const char* n[] = {"?", "b8", "b16", "b32", "b64", "u8", "u16", "u32", "u64", "s8", "s16", "s32", "s64",
                            "f16", "f16x2", "bf16", "bf16x2", "f32", "f64", "pred", "b128"};
  return t <= T_B128 ? n[t] : "?";
}
const char* sp_name(Sp s) {
  switch (s) {
    case Sp::Generic: return "generic";
    case Sp::Global: return "global";
    case Sp::Const: return "const";
    case Sp::Shared: return "shared";
    case Sp::Local: return "local";
    case Sp::KParam: return "param";
  }
  return "?";
}
std::string ModuleImpl::line_text(uint32_t line) const {
  if (line == 0 || line > line_start.size()) return "";
  size_t b = line_start[line - 1];
  size_t e = text.find('\n', b);
  if (e == std::string::npos) e = text.size();
  std::string s = text.substr(b, e - b);
  size_t f = s.find_first_not_of(" \t");
  s = f == std::string::npos ? "" : s.substr(f);
  while (!s.empty() && (s.back() == '\r' || s.back() == ' ' || s.back() == '\t')) s.pop_back();
  return s;
}

}  // namespace wh::ptx::detail

namespace wh::ptx::detail::parse {

const std::map<std::string_view, uint32_t>& sreg_table() {
  static const std::map<std::string_view, uint32_t> t = {
      {"%tid.x", SR_TID}, {"%tid.y", SR_TID + 1}, {"%tid.z", SR_TID + 2},
      {"%ntid.x", SR_NTID}, {"%ntid.y", SR_NTID + 1}, {"%ntid.z", SR_NTID + 2},
      {"%ctaid.x", SR_CTAID}, {"%ctaid.y", SR_CTAID + 1}, {"%ctaid.z", SR_CTAID + 2},
      {"%nctaid.x", SR_NCTAID}, {"%nctaid.y", SR_NCTAID + 1}, {"%nctaid.z", SR_NCTAID + 2},
      {"%laneid", SR_LANEID}, {"%warpid", SR_WARPID}, {"%nwarpid", SR_NWARPID}, {"%smid", SR_SMID},
      {"%nsmid", SR_NSMID}, {"%gridid", SR_GRIDID}, {"%lanemask_eq", SR_LM_EQ}, {"%lanemask_le", SR_LM_LE},
      {"%lanemask_lt", SR_LM_LT}, {"%lanemask_ge", SR_LM_GE}, {"%lanemask_gt", SR_LM_GT}, {"%clock", SR_CLOCK},
      {"%clock64", SR_CLOCK64}, {"%globaltimer", SR_GTIMER}, {"%globaltimer_lo", SR_GTIMER_LO},
      {"%globaltimer_hi", SR_GTIMER_HI}, {"%dynamic_smem_size", SR_DYNSMEM}, {"%total_smem_size", SR_TOTSMEM},
      {"%clusterid.x", SR_ZERO}, {"%clusterid.y", SR_ZERO}, {"%clusterid.z", SR_ZERO},
      {"%cluster_ctarank", SR_ZERO}, {"%is_explicit_cluster", SR_ZERO},
      {"%reserved_smem_offset_begin", SR_RSV_BEGIN}, {"%reserved_smem_offset_end", SR_RSV_END},
      {"%reserved_smem_offset_cap", SR_RSV_CAP}, {"%reserved_smem_offset_0", SR_RSV_0},
      {"%reserved_smem_offset_1", SR_RSV_1}};
  return t;
}

// An address expression in an initializer: name, name+off, generic(name)+off,
// or one byte of one, mask(expr) with mask 0xFF << 8k.
void Parser::parse_init_sym(Decl& d, Tok t) {
  Decl::Sym s{d.init.size(), uint8_t(ty_bytes(d.ty)), 0, false, {}, 0, t.line};
  bool masked = false;
  if (t.k == Tok::Num) {
    Num n;
    if (!parse_num(t.s, n) || n.fk != 0 || !n.u || (n.u >> std::countr_zero(n.u)) != 0xFF || std::countr_zero(n.u) % 8)
      fail(t.line, "bad initializer mask '" + std::string(t.s) + "' (0xFF, 0xFF00, ... 0xFF00000000000000)");
    s.shift = uint8_t(std::countr_zero(n.u));
    masked = true;
    L.expect("(");
    t = L.next();
  }
  if (t.k == Tok::Id && t.s == "generic" && L.peek().s == "(") {
    L.next();
    t = L.next();
    if (t.k != Tok::Id) fail(t.line, "generic() needs a variable name");
    L.expect(")");
    s.generic = true;
  }
  if (t.k != Tok::Id || t.s[0] == '%') fail(t.line, "unsupported initializer '" + std::string(t.s) + "'");
  s.name = t.s;
  while (L.peek().s == "+" || L.peek().s == "-") {
    bool neg = L.next().s == "-";
    Tok x = L.next();
    Num n;
    if (x.k != Tok::Num || !parse_num(x.s, n) || n.fk) fail(x.line, "bad offset '" + std::string(x.s) + "' in an initializer");
    s.addend = int64_t(uint64_t(s.addend) + (neg ? uint64_t(0) - n.u : n.u));
  }
  if (masked) L.expect(")");
  else if (s.size != 8) fail(t.line, "the address of '" + std::string(s.name) + "' initializes a " + ty_name(d.ty) +
                                         " element (an address needs .u64, .s64 or .b64)");
  if (d.space == Sp::Shared || d.space == Sp::KParam || d.space == Sp::Local)
    fail(t.line, "address initializers are allowed in .global and .const variables only");
  if (d.init.size() + s.size > kMaxVar) fail(t.line, "initializer too large");
  d.init.resize(d.init.size() + s.size, 0);
  if (d.syms.size() >= (1u << 20)) fail(t.line, "too many address initializers");
  d.syms.push_back(s);
}

void Parser::parse_init_list(Decl& d, int depth) {
  if (depth > 8) fail(L.line(), "initializer nested too deeply");
  if (L.accept("{")) {
    if (!L.accept("}")) {
      do parse_init_list(d, depth + 1);
      while (L.accept(","));
      L.expect("}");
    }
    return;
  }
  Opd o;
  o.minus = L.accept("-");
  Tok t = L.next();
  if (!o.minus && (t.k == Tok::Id || (t.k == Tok::Num && L.peek().s == "("))) {
    parse_init_sym(d, t);
    return;
  }
  if (t.k != Tok::Num || !parse_num(t.s, o.num))
    fail(t.line, "unsupported initializer '" + std::string(t.s) + "'");
  int sz = ty_bytes(d.ty);
  uint64_t bits = imm_bits(o, d.ty);
  if (d.init.size() + size_t(sz) > kMaxVar) fail(t.line, "initializer too large");
  for (int i = 0; i < sz; ++i) d.init.push_back(uint8_t(bits >> (8 * i)));
}

Parser::Decl Parser::parse_decl(Sp space, uint32_t line) {
  Decl d;
  d.space = space;
  d.line = line;
  bool after_ptr = false;  // `.ptr .space .align N`: N is the pointee's alignment, not the parameter's
  for (;;) {
    const Tok& t = L.peek();
    if (t.k != Tok::Dir) break;
    Tok x = L.next();
    if (x.s == ".align") {
      uint64_t a = parse_uint(L.next(), 1u << 20);
      if (a == 0 || (a & (a - 1))) fail(x.line, "bad alignment");
      if (!after_ptr) d.align = uint32_t(a);
    } else if (x.s == ".v2") d.vec = 2;
    else if (x.s == ".v4") d.vec = 4;
    else if (x.s == ".ptr") after_ptr = true;
    else if (x.s == ".global" || x.s == ".const" || x.s == ".shared" || x.s == ".local" || x.s == ".volatile") {
    } else if (x.s == ".attribute") {
      L.expect("(");
      while (!L.accept(")")) if (L.next().k == Tok::End) fail(x.line, "unterminated .attribute");
    } else {
      Ty ty = parse_ty(x.s);
      if (ty == T_None) fail(x.line, "unknown qualifier '" + std::string(x.s) + "' in declaration");
      d.ty = ty;
    }
  }
  if (d.ty == T_None) fail(line, "declaration without a type");
  Tok n = L.next();
  if (n.k != Tok::Id) fail(n.line, "expected a name in declaration, found '" + std::string(n.s) + "'");
  d.name = n.s;
  bool any_dim = false;
  while (L.accept("[")) {
    any_dim = true;
    if (L.accept("]")) { d.unsized = true; continue; }
    uint64_t c = parse_uint(L.next(), kMaxVar);
    L.expect("]");
    d.count *= c;
    if (d.count > kMaxVar) fail(n.line, "array too large");
  }
  (void)any_dim;
  if (L.accept("=")) {
    d.has_init = true;
    parse_init_list(d, 0);
  }
  uint64_t esz = uint64_t(ty_bytes(d.ty) ? ty_bytes(d.ty) : 1) * uint64_t(d.vec);
  if (d.ty == T_Pred) esz = 1;
  if (d.unsized && d.has_init) { d.count = (d.init.size() + esz - 1) / esz; d.unsized = false; }
  if (d.count * esz > kMaxVar) fail(n.line, "variable too large");
  if (!d.align) d.align = uint32_t(esz > 16 ? 16 : esz);
  if (d.align & (d.align - 1)) d.align = 16;
  return d;
}

uint64_t Parser::decl_size(const Decl& d) {
  uint64_t esz = uint64_t(ty_bytes(d.ty) ? ty_bytes(d.ty) : 1) * uint64_t(d.vec);
  return d.count * esz;
}

void Parser::add_global(Decl& d, bool module_scope) {
  uint64_t size = decl_size(d);
  std::string name(d.name);
  if (d.space == Sp::Shared) {
    SharedVar sv{module_scope ? name : (F->name + "::" + name + "#" + std::to_string(shared_counter++)), size, d.align, d.unsized};
    M.shared.push_back(sv);
    VarRef r{AV_Shared, Sp::Shared, uint32_t(M.shared.size() - 1), size};
    if (module_scope) module_vars[d.name] = r;
    else scopes.back().vars[d.name] = r;
    return;
  }
  if (d.unsized) fail(d.line, "unsized array '" + name + "' outside .extern .shared");
  GlobalVar g{name, size, d.align, d.space == Sp::Const, {}, {}};
  g.init = std::move(d.init);
  if (g.init.size() > size) fail(d.line, "initializer of '" + name + "' larger than the variable");
  g.init.resize(size, 0);
  for (auto& o : M.globals)
    if (o.name == name) fail(d.line, "duplicate variable '" + name + "'");
  M.globals.push_back(std::move(g));
  for (const Decl::Sym& sy : d.syms) pending_syms.push_back({uint32_t(M.globals.size() - 1), sy});
  VarRef r{AV_Global, d.space, uint32_t(M.globals.size() - 1), size};
  if (module_scope) module_vars[d.name] = r;
  else scopes.back().vars[d.name] = r;
}

uint32_t Parser::frame_alloc(uint64_t size, uint32_t align, uint32_t line) {
  uint64_t off = (uint64_t(frame_top) + align - 1) & ~uint64_t(align - 1);
  if (off + size > kMaxFrame) fail(line, "local frame too large in " + F->name);
  frame_top = uint32_t(off + size);
  F->frame_bytes = std::max(F->frame_bytes, frame_top);
  return uint32_t(off);
}

void Parser::parse_params(std::vector<Param>& out, bool entry, std::vector<std::pair<std::string_view, VarRef>>& names) {
  L.expect("(");
  if (L.accept(")")) return;
  uint32_t off = 0;
  for (;;) {
    Tok t = L.next();
    if (t.s == ".reg") fail(t.line, "register parameters (.reg) in function signatures are not supported");
    if (t.s != ".param") fail(t.line, "expected .param, found '" + std::string(t.s) + "'");
    Decl d = parse_decl(Sp::KParam, t.line);
    uint64_t size = decl_size(d);
    if (size > 32768) fail(t.line, "parameter too large");
    uint32_t al = std::max<uint32_t>(d.align, 1);
    off = align_up(off, al);
    Param p{off, uint32_t(size), al};
    off += uint32_t(size);
    out.push_back(p);
    names.push_back({d.name, VarRef{entry ? AV_Imm : AV_Local, entry ? Sp::KParam : Sp::Local, p.offset, size}});
    if (off > 65536) fail(t.line, "parameter list too large");
    if (L.accept(")")) break;
    L.expect(",");
  }
}

uint32_t Parser::declare_func(std::string_view name, uint32_t line, bool entry, bool ext) {
  auto it = M.func_by_name.find(std::string(name));
  if (it != M.func_by_name.end()) {
    Function& f = M.funcs[it->second];
    if (f.is_entry != entry) fail(line, "conflicting declarations of '" + std::string(name) + "'");
    return it->second;
  }
  if (M.funcs.size() >= 100000) fail(line, "too many functions");
  M.funcs.emplace_back();
  Function& f = M.funcs.back();
  f.name = std::string(name);
  f.is_entry = entry;
  f.is_extern = ext;
  f.decl_line = line;
  if (name == "vprintf") f.builtin = 1;
  else if (name == "__assertfail") f.builtin = 2;
  else if (name == "malloc") f.builtin = 3;
  else if (name == "free") f.builtin = 4;
  else if (DevFnInfo d = devrt_function(name); d.fn != DF_None) {
    f.builtin = 5;
    f.devrt = d.fn;
  }
  M.func_by_name[f.name] = uint32_t(M.funcs.size() - 1);
  return uint32_t(M.funcs.size() - 1);
}

void Parser::parse_function(bool entry, bool ext, uint32_t line) {
  std::vector<Param> rets, params;
  std::vector<std::pair<std::string_view, VarRef>> rnames, pnames;
  if (!entry && L.peek().s == "(") parse_params(rets, false, rnames);
  Tok n = L.next();
  if (n.k != Tok::Id) fail(n.line, "expected function name");
  if (L.peek().s == "(") parse_params(params, entry, pnames);
  uint32_t ix = declare_func(n.s, n.line, entry, ext);
  int maxntid = 0, maxnreg = 0;
  for (;;) {  // performance directives
    const Tok& t = L.peek();
    if (t.k != Tok::Dir) break;
    Tok d = L.next();
    if (d.s == ".noreturn") continue;
    if (d.s == ".pragma") { L.next(); L.expect(";"); continue; }
    if (d.s == ".maxntid" || d.s == ".reqntid" || d.s == ".minnctapersm" || d.s == ".maxnreg" ||
        d.s == ".maxnctapersm" || d.s == ".reqnctapercluster" || d.s == ".maxclusterrank" || d.s == ".explicitcluster" ||
        d.s == ".blocksareclusters" || d.s == ".abi_preserve" || d.s == ".abi_preserve_control") {
      uint64_t prod = 1;
      if (L.peek().k == Tok::Num) {
        do prod *= std::max<uint64_t>(1, parse_uint(L.next(), 1u << 20));
        while (L.accept(","));
      }
      if ((d.s == ".maxntid" || d.s == ".reqntid") && prod <= 1024) maxntid = int(prod);
      if (d.s == ".maxnreg" && prod <= 255) maxnreg = int(prod);
      continue;
    }
    fail(d.line, "unknown function directive '" + std::string(d.s) + "'");
  }
  Function& f0 = M.funcs[ix];
  f0.params = params;
  f0.rets = rets;
  if (maxntid) f0.maxntid = maxntid;
  if (maxnreg) f0.maxnreg = maxnreg;
  if (L.accept(";")) return;  // declaration only
  if (L.peek().s != "{") fail(L.line(), "expected '{' or ';' after function header");
  if (f0.defined) fail(n.line, "function '" + std::string(n.s) + "' defined twice");
  f0.defined = true;
  f0.decl_line = n.line;
  F = &f0;
  pred_slots.clear();
  fidx = ix;
  scopes.clear();
  scopes.emplace_back();
  labels.clear();
  protos.clear();
  fixups.clear();
  temps.clear();
  sink = NOREG;
  carry = NOREG;
  frame_top = 0;
  F->nregs = 0;
  F->frame_bytes = 0;
  if (entry) {
    uint32_t end = 0;
    for (auto& p : F->params) end = std::max(end, p.offset + p.size);
    F->param_bytes = end;
  } else {
    // formal params then return params at the start of the local frame
    for (size_t i = 0; i < F->params.size(); ++i) {
      F->params[i].offset = frame_alloc(F->params[i].size, F->params[i].align, line);
      pnames[i].second.idx = F->params[i].offset;
    }
    for (size_t i = 0; i < F->rets.size(); ++i) {
      F->rets[i].offset = frame_alloc(F->rets[i].size, F->rets[i].align, line);
      rnames[i].second.idx = F->rets[i].offset;
    }
  }
  for (auto& [nm, r] : pnames) scopes.back().vars[nm] = r;
  for (auto& [nm, r] : rnames) scopes.back().vars[nm] = r;
  parse_body();
  for (auto& [pc, t] : fixups) {
    auto it = labels.find(t.s);
    if (it == labels.end()) fail(t.line, "undefined label '" + std::string(t.s) + "'");
    F->code[pc].a0 = it->second;
  }
  mark_loops();
  // a final implicit return so execution never runs off the end
  Inst r;
  r.ctl = Ctl::Ret;
  r.fn = h_nop;
  r.line = L.line();
  F->code.push_back(r);
  F = nullptr;
}

// Backward branches are where the executor may preempt a warp. A short loop that
// polls memory (kSchedPoll accesses, nanosleep) may be a spin-wait: the branch
// records the registers those accesses write (a1 = first index
// into spin_regs << 4 | count), and the executor treats iterations in which they
// did not change as spinning, preempting the warp after a few of them.
void Parser::mark_loops() {
  constexpr uint32_t kMaxSpinBody = 256, kMaxSpinRegs = 8;
  auto& code = F->code;
  for (uint32_t i = 0; i < code.size(); ++i) {
    Inst& I = code[i];
    if (I.ctl != Ctl::Bra || I.a0 > i) continue;
    I.sched |= kSchedBack;
    if (i - I.a0 > kMaxSpinBody) continue;
    bool polls = false;
    uint32_t first = uint32_t(F->spin_regs.size()), n = 0;
    for (uint32_t j = I.a0; j < i; ++j) {
      const Inst& J = code[j];
      if (J.ctl == Ctl::Yield) polls = true;
      if (!(J.sched & kSchedPoll)) continue;
      polls = true;
      for (uint32_t d : J.d)
        if (d != NOREG && n < kMaxSpinRegs &&
            std::find(F->spin_regs.begin() + first, F->spin_regs.end(), d) == F->spin_regs.end()) {
          F->spin_regs.push_back(d);
          ++n;
        }
    }
    if (!polls) continue;
    I.sched |= kSchedSpin;
    I.a1 = first << 4 | n;
  }
}

void Parser::parse_body() {
  L.expect("{");
  int depth = 1;
  while (depth > 0) {
    Tok t = L.next();
    if (t.k == Tok::End) fail(t.line, "unexpected end of input inside function " + F->name);
    if (t.k == Tok::P && t.s == "}") {
      --depth;
      if (depth > 0) { frame_top = scopes.back().frame_mark; scopes.pop_back(); }
      continue;
    }
    if (t.k == Tok::P && t.s == "{") {
      if (depth > 64) fail(t.line, "blocks nested too deeply");
      ++depth;
      scopes.emplace_back();
      scopes.back().frame_mark = frame_top;
      continue;
    }
    if (t.k == Tok::Dir) {
      if (t.s == ".reg") { parse_reg_decl(t.line); continue; }
      if (t.s == ".local" || t.s == ".param" || t.s == ".shared" || t.s == ".global" || t.s == ".const") {
        Sp sp = t.s == ".local" ? Sp::Local : t.s == ".param" ? Sp::Local : t.s == ".shared" ? Sp::Shared : t.s == ".global" ? Sp::Global : Sp::Const;
        Decl d = parse_decl(sp, t.line);
        L.expect(";");
        if (sp == Sp::Local) {
          uint64_t sz = decl_size(d);
          if (d.unsized) fail(t.line, "unsized local array");
          uint32_t off = frame_alloc(sz, std::max<uint32_t>(d.align, 1), t.line);
          scopes.back().vars[d.name] = VarRef{AV_Local, Sp::Local, off, sz};
        } else {
          add_global(d, false);
        }
        continue;
      }
      if (t.s == ".pragma") { skip_to(";"); continue; }
      if (t.s == ".loc" || t.s == ".file") { skip_line(t.line); continue; }
      fail(t.line, "unexpected directive '" + std::string(t.s) + "' in function body");
    }
    if (t.k == Tok::Id && L.peek().s == ":" ) {
      L.next();
      if (L.peek().k == Tok::Dir && (L.peek().s == ".callprototype" || L.peek().s == ".calltargets")) {
        parse_proto(t);
        continue;
      }
      if (!labels.emplace(t.s, uint32_t(F->code.size())).second) fail(t.line, "duplicate label '" + std::string(t.s) + "'");
      continue;
    }
    uint32_t guard = NOREG;
    bool gneg = false;
    if (t.k == Tok::P && t.s == "@") {
      gneg = L.accept("!");
      Tok g = L.next();
      if (!lookup_reg(g.s, guard)) fail(g.line, "unknown guard predicate '" + std::string(g.s) + "'");
      t = L.next();
    }
    if (t.k != Tok::Id) fail(t.line, "expected an instruction, found '" + std::string(t.s) + "'");
    parse_inst(t, guard, gneg);
  }
}

// `label: .callprototype (ret params) _ (params);` or
// `label: .calltargets f1, f2, ...;` for indirect calls.
void Parser::parse_proto(const Tok& label) {
  Tok d = L.next();
  Proto p;
  if (d.s == ".callprototype") {
    std::vector<Param> rets, params;
    std::vector<std::pair<std::string_view, VarRef>> names;
    if (L.peek().s == "(") parse_params(rets, false, names);
    Tok u = L.next();
    if (u.s != "_") fail(u.line, "expected '_' in .callprototype, found '" + std::string(u.s) + "'");
    if (L.peek().s == "(") parse_params(params, false, names);
    while (L.peek().s == ".noreturn") L.next();
    for (auto& x : params) p.args.push_back(x.size);
    for (auto& x : rets) p.rets.push_back(x.size);
  } else {
    do {
      Tok f = L.next();
      auto it = M.func_by_name.find(std::string(f.s));
      if (it == M.func_by_name.end() || M.funcs[it->second].is_entry)
        fail(f.line, "'" + std::string(f.s) + "' in .calltargets is not a declared function");
      if (p.targets.size() >= 4096) fail(f.line, "too many .calltargets");
      p.targets.push_back(it->second);
    } while (L.accept(","));
    const Function& f0 = M.funcs[p.targets[0]];
    for (auto& x : f0.params) p.args.push_back(x.size);
    for (auto& x : f0.rets) p.rets.push_back(x.size);
  }
  L.expect(";");
  if (!protos.emplace(label.s, std::move(p)).second) fail(label.line, "duplicate label '" + std::string(label.s) + "'");
}

void Parser::parse_reg_decl(uint32_t line) {
  Ty ty = T_None;
  while (L.peek().k == Tok::Dir) {
    Tok x = L.next();
    if (x.s == ".v2" || x.s == ".v4") fail(x.line, "vector registers are not supported");
    ty = parse_ty(x.s);
    if (ty == T_None) fail(x.line, "unknown register type '" + std::string(x.s) + "'");
  }
  if (ty == T_None) fail(line, ".reg without a type");
  for (;;) {
    Tok n = L.next();
    if (n.k != Tok::Id) fail(n.line, "expected register name");
    if (L.accept("<")) {
      Tok ct = L.next();
      uint64_t c = parse_uint(ct, UINT32_MAX);
      if (c > kMaxRegs) fail(ct.line, "value " + std::string(ct.s) + " too large: " + too_many_regs());
      L.expect(">");
      if (F->nregs + c > kMaxRegs) fail(n.line, too_many_regs());
      scopes.back().ranges[n.s] = {F->nregs, uint32_t(c)};
      if (ty == T_Pred) pred_slots.insert(pred_slots.end(), {F->nregs, F->nregs + uint32_t(c)});
      F->nregs += uint32_t(c);
    } else {
      scopes.back().regs[n.s] = new_slot(n.line);
      if (ty == T_Pred) pred_slots.insert(pred_slots.end(), {F->nregs - 1, F->nregs});
    }
    if (L.accept(";")) break;
    L.expect(",");
  }
}

Opd Parser::parse_operand(int depth) {
  Opd o;
  o.line = L.line();
  if (depth > 2) fail(o.line, "operand nested too deeply");
  if (L.accept("!")) o.bang = true;
  if (L.accept("-")) o.minus = true;
  Tok t = L.next();
  if (t.k == Tok::P && t.s == "[") {
    o.k = Opd::Mem;
    Tok b = L.next();
    if (b.k == Tok::Id) {
      uint32_t r;
      if (lookup_reg(b.s, r)) o.mreg = r;
      else if (b.s[0] == '%') fail(b.line, "unknown register '" + std::string(b.s) + "'");
      else o.mname = b.s;
    } else if (b.k == Tok::Num) {
      Num n;
      if (!parse_num(b.s, n) || n.fk) fail(b.line, "bad address '" + std::string(b.s) + "'");
      o.moff = int64_t(n.u);
    } else {
      fail(b.line, "bad address operand");
    }
    while (L.peek().s == "+" || L.peek().s == "-") {
      bool neg = L.next().s == "-";
      if (L.accept("-")) neg = !neg;
      Tok x = L.next();
      Num n;
      if (x.k != Tok::Num || !parse_num(x.s, n) || n.fk) fail(x.line, "bad address offset '" + std::string(x.s) + "'");
      o.moff = neg ? o.moff - int64_t(n.u) : o.moff + int64_t(n.u);
    }
    // Texture/surface operands: [handle, {coordinates}] (or [tex, sampler, {c}]).
    while (o.el.size() < 2 && L.accept(",")) o.el.push_back(parse_operand(depth + 1));
    L.expect("]");
    return o;
  }
  if (t.k == Tok::P && t.s == "{") {
    o.k = Opd::Vec;
    do {
      if (o.el.size() >= 8) fail(t.line, "vector operand too long");
      o.el.push_back(parse_operand(depth + 1));
    } while (L.accept(","));
    L.expect("}");
    return o;
  }
  if (t.k == Tok::Num) {
    o.k = Opd::Imm;
    if (!parse_num(t.s, o.num)) fail(t.line, "bad number '" + std::string(t.s) + "'");
    return o;
  }
  if (t.k != Tok::Id) fail(t.line, "bad operand '" + std::string(t.s) + "'");
  if (t.s == "_") { o.k = Opd::Sink; return o; }
  uint32_t r;
  if (lookup_reg(t.s, r)) {
    o.k = Opd::Reg;
    o.reg = r;
    if (L.accept("|")) {
      Tok p = L.next();
      uint32_t r2;
      if (p.s == "_") r2 = sink_slot(p.line);
      else if (!lookup_reg(p.s, r2)) fail(p.line, "unknown register '" + std::string(p.s) + "'");
      o.pipe = r2;
    }
    return o;
  }
  if (t.s[0] == '%') {
    auto& st = sreg_table();
    auto it = st.find(t.s);
    if (it != st.end()) {
      o.k = Opd::Sreg;
      o.reg = it->second;
      if (o.reg >= SR_RSV_BEGIN && o.reg <= SR_RSV_1 && F) F->reserved_shared = true;
      return o;
    }
    if (t.s == "%envreg1" || t.s == "%envreg2") { o.k = Opd::Sreg; o.reg = t.s == "%envreg1" ? SR_ENVREG1 : SR_ENVREG2; return o; }
    if (t.s.starts_with("%envreg") || t.s.starts_with("%pm")) { o.k = Opd::Sreg; o.reg = SR_ZERO; return o; }
    fail(t.line, "unknown register '" + std::string(t.s) + "'");
  }
  o.k = Opd::Name;
  o.name = t.s;
  return o;
}

uint32_t Parser::src(const Opd& o, Ty t) {
  switch (o.k) {
    case Opd::Reg:
      if (o.minus) fail(o.line, "negated register operand");
      return o.reg;
    case Opd::Imm: return cst(imm_bits(o, t));
    case Opd::Sreg: {
      uint32_t tmp = temp(o.line);
      Inst I = base_inst(NOREG, false, o.line);
      I.fn = h_sreg;
      I.a0 = o.reg;
      I.d[0] = tmp;
      emit(I);
      return tmp;
    }
    case Opd::Name: {
      if (o.name == "WARP_SZ") return cst(32);
      const VarRef* v = lookup_var(o.name);
      if (!v) {
        if (uint32_t fi = func_index(o.name); fi != NOREG) return cst(func_addr(M.tag, fi));
        fail(o.line, "unknown symbol '" + std::string(o.name) + "'");
      }
      uint32_t tmp = temp(o.line);
      Inst I = base_inst(NOREG, false, o.line);
      I.fn = h_varaddr;
      set_var(I, *v);
      I.d[0] = tmp;
      emit(I);
      return tmp;
    }
    case Opd::Sink: return sink_slot(o.line);
    default: fail(o.line, "unexpected operand kind");
  }
}

void Parser::mark_unsupported(uint32_t line, std::string why) {
  if (F->unsupported.empty()) {
    F->unsupported = std::move(why);
    F->unsupported_line = line;
  }
  Inst I = base_inst(NOREG, false, line);
  I.ctl = Ctl::Trap;
  I.a1 = 1;  // unsupported
  I.fn = h_nop;
  emit(I);
}

void Parser::run() {
  // line table for messages
  M.line_start.push_back(0);
  for (size_t i = 0; i < M.text.size(); ++i)
    if (M.text[i] == '\n') M.line_start.push_back(uint32_t(i + 1));
  bool saw_version = false;
  for (;;) {
    Tok t = L.next();
    if (t.k == Tok::End) break;
    if (t.k != Tok::Dir) fail(t.line, "unexpected '" + std::string(t.s) + "' at module scope");
    if (t.s == ".version") { L.next(); saw_version = true; continue; }
    if (t.s == ".target") {
      // The first target names the architecture (sm_75); cudaFuncGetAttributes
      // reports it as ptxVersion, which Thrust/CUB match against their builds.
      Tok a = L.next();
      if (a.s.size() > 3 && a.s.substr(0, 3) == "sm_") {
        int arch = 0;
        for (char ch : a.s.substr(3)) {
          if (ch < '0' || ch > '9') break;
          arch = arch * 10 + (ch - '0');
          if (arch > 100000) break;
        }
        M.target_arch = arch;
      }
      while (L.accept(",")) L.next();
      continue;
    }
    if (t.s == ".address_size") {
      if (parse_uint(L.next(), 1024) != 64) fail(t.line, "only .address_size 64 is supported");
      continue;
    }
    if (t.s == ".file" || t.s == ".loc") { skip_line(t.line); continue; }
    if (t.s == ".section") {
      L.next();
      L.expect("{");
      int d = 1;
      while (d > 0) {
        Tok x = L.next();
        if (x.k == Tok::End) fail(x.line, "unterminated .section");
        if (x.k == Tok::P && x.s == "{") ++d;
        if (x.k == Tok::P && x.s == "}") --d;
      }
      continue;
    }
    if (t.s == ".pragma" || t.s == ".alias") { skip_to(";"); continue; }
    bool ext = false;
    Tok d = t;
    while (d.s == ".visible" || d.s == ".extern" || d.s == ".weak" || d.s == ".common") {
      if (d.s == ".extern") ext = true;
      d = L.next();
    }
    if (d.s == ".entry" || d.s == ".func") { parse_function(d.s == ".entry", ext, d.line); continue; }
    if (d.s == ".global" || d.s == ".const" || d.s == ".shared") {
      Sp sp = d.s == ".global" ? Sp::Global : d.s == ".const" ? Sp::Const : Sp::Shared;
      Decl dc = parse_decl(sp, d.line);
      L.expect(";");
      if (ext && sp != Sp::Shared) fail(d.line, "external variable '" + std::string(dc.name) + "' (separate compilation) is not supported");
      if (module_vars.count(dc.name)) fail(d.line, "duplicate variable '" + std::string(dc.name) + "'");
      add_global(dc, true);
      continue;
    }
    if (d.s == ".tex" || d.s == ".surf" || d.s == ".sampler" || d.s == ".texref" || d.s == ".surfref" || d.s == ".samplerref")
      fail(d.line, "texture/surface references are not supported");
    if (d.s == ".local") fail(d.line, "module-scope .local variables are not supported");
    fail(d.line, "unexpected directive '" + std::string(d.s) + "'");
  }
  if (!saw_version) fail(1, "missing .version directive");
  resolve_initializers();
  link_indirect_calls();
}

// Initializers naming functions get their addresses now; those naming
// variables become relocations, written when the variables are bound.
void Parser::resolve_initializers() {
  for (const PendingSym& p : pending_syms) {
    const Decl::Sym& s = p.sym;
    GlobalVar& g = M.globals[p.global];
    auto mv = module_vars.find(s.name);
    if (mv != module_vars.end()) {
      if (mv->second.avk != AV_Global)
        fail(s.line, "the address of .shared variable '" + std::string(s.name) + "' in the initializer of '" + g.name + "'");
      g.relocs.push_back({s.offset, mv->second.idx, s.addend, s.size, s.shift});
      continue;
    }
    uint32_t fi = func_index(s.name);
    if (fi == NOREG) fail(s.line, "unknown symbol '" + std::string(s.name) + "' in the initializer of '" + g.name + "'");
    if (s.generic) fail(s.line, "generic() of function '" + std::string(s.name) + "': it names variables");
    const uint64_t v = (func_addr(M.tag, fi) + uint64_t(s.addend)) >> s.shift;
    std::memcpy(g.init.data() + s.offset, &v, s.size);
  }
  pending_syms.clear();
}

// What each indirect call may reach: the address-taken functions whose
// parameter and result counts match its prototype (or its .calltargets).
// They size the kernel's stacks and shared memory (build_kernels).
void Parser::link_indirect_calls() {
  std::vector<uint32_t> taken;
  for (uint32_t i = 0; i < M.funcs.size(); ++i)
    if (M.funcs[i].addr_taken && !M.funcs[i].is_entry && !M.funcs[i].builtin) taken.push_back(i);
  for (Function& f : M.funcs) {
    if (!f.calls_indirect) continue;
    for (const CallSite& cs : f.calls) {
      if (cs.callee != NOREG) continue;
      for (uint32_t t : cs.targets.empty() ? taken : cs.targets) {
        const Function& g = M.funcs[t];
        if (g.builtin || g.params.size() != cs.arg_size.size() || g.rets.size() != cs.ret_size.size()) continue;
        if (std::find(f.icallees.begin(), f.icallees.end(), t) == f.icallees.end()) f.icallees.push_back(t);
      }
    }
  }
}

void Parser::parse_inst(const Tok& op, uint32_t guard, bool gneg) {
  temps_used = 0;
  if (op.s == "call" || op.s.starts_with("call.")) { parse_call(op, guard, gneg); return; }
  static const std::unordered_map<std::string_view, int> known = [] {
    std::unordered_map<std::string_view, int> k;
    for (const char* s : {"ld", "ldu", "st", "atom", "red", "cvt", "mov", "setp", "set", "selp", "slct", "testp", "cvta",
                          "isspacep", "bra", "brx", "ret", "exit", "trap", "bar", "barrier", "membar", "fence", "prefetch",
                          "prefetchu", "nanosleep", "pmevent", "brkpt", "griddepcontrol", "discard", "applypriority",
                          "createpolicy", "shfl", "vote", "match", "redux", "activemask", "add", "sub", "mul", "mad", "fma",
                          "mul24", "mad24", "addc", "subc", "madc", "div", "rem", "min", "max", "and", "or", "xor", "not", "cnot", "neg", "abs",
                          "copysign", "shl", "shr", "popc", "clz", "brev", "bfind", "bfe", "bfi", "prmt", "lop3", "shf",
                          "sad", "rcp", "sqrt", "rsqrt", "sin", "cos", "ex2", "lg2", "tanh", "tex", "tld4", "txq",
                          "suld", "sust", "suq", "wmma", "mma", "ldmatrix", "stmatrix", "vshl", "vshr", "mbarrier", "cp"})
      k.emplace(s, 1);
    return k;
  }();
  std::string_view base = op.s.substr(0, op.s.find('.'));
  // Video shifts with operand selectors (%r1.b0, .h1): not implemented, and
  // not parsed either; the instruction fails at launch.
  auto video_selectors = [&] {
    if (base != "vshl" && base != "vshr") return false;
    const std::string text = M.line_text(op.line);
    for (const char* sel : {".b0", ".b1", ".b2", ".b3", ".h0", ".h1"})
      for (size_t at = text.find(sel); at != std::string::npos; at = text.find(sel, at + 1))
        if (at + 3 == text.size() || !std::isalnum(static_cast<unsigned char>(text[at + 3]))) return true;
    return false;
  };
  if (!known.count(base) || video_selectors()) {  // unknown: operands may use syntax we do not parse; fail at launch
    for (;;) {
      Tok t = L.next();
      if (t.k == Tok::End) fail(t.line, "unexpected end of input in instruction");
      if (t.k == Tok::P && t.s == ";") break;
      if (t.k == Tok::P && (t.s == "{" || t.s == "}") && t.line != op.line) fail(t.line, "missing ';' after instruction");
    }
    mark_unsupported(op.line, "instruction '" + std::string(op.s) + "'");
    return;
  }
  std::vector<Opd> ops;
  if (!L.accept(";")) {
    do {
      if (ops.size() >= 8) fail(op.line, "too many operands");
      ops.push_back(parse_operand());
    } while (L.accept(","));
    L.expect(";");
  }
  decode(op.s, ops, guard, gneg, op.line);
}

void Parser::parse_call(const Tok& op, uint32_t guard, bool gneg) {
  std::vector<std::string_view> rets, args;
  auto list = [&](std::vector<std::string_view>& v) {
    L.expect("(");
    if (L.accept(")")) return;
    do {
      Tok t = L.next();
      if (t.k != Tok::Id) fail(t.line, "expected a parameter name in call");
      if (v.size() > 256) fail(t.line, "too many call arguments");
      v.push_back(t.s);
    } while (L.accept(","));
    L.expect(")");
  };
  if (L.peek().s == "(") { list(rets); L.expect(","); }
  Tok fn = L.next();
  if (fn.k != Tok::Id) fail(fn.line, "expected function name in call");
  Tok proto;
  if (L.accept(",")) {
    if (L.peek().s == "(") {
      list(args);
      if (L.accept(",")) proto = L.next();  // prototype label
    } else {
      proto = L.next();
    }
  }
  L.expect(";");
  auto resolve = [&](std::string_view n, uint32_t need_size) -> uint32_t {
    const VarRef* v = lookup_var(n);
    if (!v || v->avk != AV_Local) fail(fn.line, "call argument '" + std::string(n) + "' is not a .param variable");
    if (v->size < need_size) fail(fn.line, "call argument '" + std::string(n) + "' too small");
    return v->idx;
  };
  if (fn.s[0] == '%') {  // through a function pointer: call (r), %rd, (a), prototype;
    uint32_t reg;
    if (!lookup_reg(fn.s, reg)) fail(fn.line, "unknown register '" + std::string(fn.s) + "'");
    if (proto.k != Tok::Id) fail(fn.line, "indirect call without a .callprototype or .calltargets label");
    auto pit = protos.find(proto.s);
    if (pit == protos.end()) fail(proto.line, "unknown call prototype '" + std::string(proto.s) + "'");
    const Proto& pr = pit->second;
    if (args.size() != pr.args.size() || rets.size() != pr.rets.size())
      fail(fn.line, "indirect call with a different number of arguments than its prototype " + std::string(proto.s));
    CallSite cs;
    cs.callee = NOREG;
    for (size_t i = 0; i < args.size(); ++i) cs.arg_off.push_back(resolve(args[i], pr.args[i]));
    for (size_t i = 0; i < rets.size(); ++i) cs.ret_off.push_back(resolve(rets[i], pr.rets[i]));
    cs.arg_size = pr.args;
    cs.ret_size = pr.rets;
    cs.proto = std::string(proto.s);
    cs.targets = pr.targets;
    Inst I = base_inst(guard, gneg, op.line);
    I.fn = h_nop;
    I.ctl = Ctl::ICall;
    I.s[0] = reg;
    I.a0 = uint32_t(F->calls.size());
    F->calls.push_back(std::move(cs));
    F->calls_indirect = true;
    emit(I);
    return;
  }
  auto it = M.func_by_name.find(std::string(fn.s));
  if (it == M.func_by_name.end()) fail(fn.line, "call to undeclared function '" + std::string(fn.s) + "'");
  uint32_t callee = it->second;
  const Function& cf = M.funcs[callee];
  if (cf.is_entry) fail(fn.line, "call to a kernel entry");
  if (args.size() != cf.params.size() || rets.size() != cf.rets.size())
    fail(fn.line, "call to '" + cf.name + "' with wrong number of arguments");
  CallSite cs;
  cs.callee = callee;
  for (size_t i = 0; i < args.size(); ++i) cs.arg_off.push_back(resolve(args[i], cf.params[i].size));
  for (size_t i = 0; i < rets.size(); ++i) cs.ret_off.push_back(resolve(rets[i], cf.rets[i].size));
  Inst I = base_inst(guard, gneg, op.line);
  I.fn = h_nop;
  static constexpr Ctl kBuiltinCtl[] = {Ctl::Call, Ctl::Printf, Ctl::Assert, Ctl::Malloc, Ctl::Free, Ctl::DevRt};
  I.ctl = kBuiltinCtl[cf.builtin];
  if (cf.builtin == 5) {
    // The device runtime reads its arguments with the sizes CUDA declares.
    DevFnInfo d = devrt_function(cf.name);
    bool ok = cf.params.size() == d.nargs && cf.rets.size() == 1 && cf.rets[0].size == d.ret;
    for (size_t i = 0; ok && i < cf.params.size(); ++i) ok = cf.params[i].size == d.arg[i];
    if (!ok) fail(fn.line, "call to '" + cf.name + "' with an unexpected signature");
    if (d.fn == DF_LaunchDevice || d.fn == DF_LaunchDeviceV2) F->launches = true;
    if (d.fn == DF_Malloc || d.fn == DF_Free) F->calls_heap = true;
  }
  if (cf.builtin == 3 || cf.builtin == 4) {
    // The heap calls read one 8-byte argument (malloc also returns 8 bytes).
    if (cs.arg_off.size() != 1 || cf.params[0].size != 8 || cs.ret_off.size() != (cf.builtin == 3 ? 1u : 0u) ||
        (cf.builtin == 3 && cf.rets[0].size != 8))
      fail(fn.line, "call to '" + cf.name + "' with an unexpected signature");
    F->calls_heap = true;
  }
  I.a0 = uint32_t(F->calls.size());
  F->calls.push_back(std::move(cs));
  if (I.ctl == Ctl::Call && std::find(F->callees.begin(), F->callees.end(), callee) == F->callees.end())
    F->callees.push_back(callee);
  emit(I);
}

}  // namespace wh::ptx::detail::parse

namespace wh::ptx::detail {

bool parse_module(std::string_view text, ModuleImpl& m, std::string* err) {
  m.text.assign(text);
  parse::Parser p(m);
  try {
    p.run();
  } catch (const parse::PErr& e) {
    if (err) {
      *err = "PTX line " + std::to_string(e.line) + ": " + e.msg;
      std::string lt = m.line_text(e.line);
      if (!lt.empty()) *err += " [" + (lt.size() > 160 ? lt.substr(0, 160) + "..." : lt) + "]";
    }
    return false;
  } catch (const std::bad_alloc&) {
    if (err) *err = "PTX: out of memory while parsing";
    return false;
  }
  return true;
}

}  // namespace wh::ptx::detail

WH_JIT_CATALOG(sreg);
