// Shared by the PTX parser's files (lexer, directives, instruction decode):
// tokens, operands, scopes and the Parser whose members they define.
#pragma once

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <functional>
#include <map>

// The handler headers define every handler with internal linkage; each decode file
// takes the handlers of its own instructions only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "ops_mem.hpp"
#include "ops_mma.hpp"
#include "ops_tex.hpp"
#include "devrt.hpp"
#pragma GCC diagnostic pop

namespace wh::ptx::detail::parse {

constexpr uint64_t kMaxFrame = 512 * 1024;
constexpr uint64_t kMaxVar = 256ull << 20;
constexpr size_t kMaxInsts = 4u << 20;

struct PErr {
  uint32_t line;
  std::string msg;
};

struct Tok {
  enum K : uint8_t { End, Id, Dir, Num, Str, P } k = End;
  std::string_view s;
  uint32_t line = 0;
};

struct Num {
  int fk = 0;  // 0 int, 1 f32 bits, 2 f64 bits, 3 decimal double
  uint64_t u = 0;
  double d = 0;
};

bool parse_num(std::string_view t, Num& n);

class Lexer {
 public:
  explicit Lexer(std::string_view s) : src_(s) {}
  const Tok& peek() {
    if (!has_) { cur_ = lex(); has_ = true; }
    return cur_;
  }
  Tok next() {
    Tok t = peek();
    has_ = false;
    return t;
  }
  bool accept(std::string_view s) {
    if (peek().s == s && peek().k != Tok::Str) { next(); return true; }
    return false;
  }
  void expect(std::string_view s) {
    Tok t = next();
    if (t.s != s || t.k == Tok::Str)
      throw PErr{t.line, "expected '" + std::string(s) + "' but found '" + std::string(t.s) + "'"};
  }
  uint32_t line() { return peek().line; }

 private:
  static bool idstart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$' || c == '%'; }
  static bool idch(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '$'; }
  Tok lex();
  std::string_view src_;
  size_t i_ = 0;
  uint32_t line_ = 1;
  Tok cur_;
  bool has_ = false;
};

Ty parse_ty(std::string_view s);

struct Opd {
  enum K : uint8_t { Reg, Imm, Sreg, Name, Mem, Vec, Sink } k = Reg;
  bool bang = false, minus = false;
  uint32_t reg = NOREG;  // Reg slot / Sreg id
  Num num;
  std::string_view name;
  uint32_t line = 0;
  // Mem
  uint32_t mreg = NOREG;
  std::string_view mname;
  int64_t moff = 0;
  std::vector<Opd> el;     // Vec elements
  uint32_t pipe = NOREG;   // second register of "a|b"
};

struct VarRef {
  AVK avk;
  Sp space;
  uint32_t idx;  // AV_Imm/AV_Local: offset; AV_Shared/AV_Global: index
  uint64_t size;
};

struct Scope {
  std::unordered_map<std::string_view, uint32_t> regs;
  std::unordered_map<std::string_view, std::pair<uint32_t, uint32_t>> ranges;
  std::unordered_map<std::string_view, VarRef> vars;
  uint32_t frame_mark = 0;
};

const std::map<std::string_view, uint32_t>& sreg_table();

class Parser {
 public:
  Parser(ModuleImpl& m) : M(m), L(m.text) {}
  void run();

 private:
  ModuleImpl& M;
  Lexer L;
  std::unordered_map<std::string_view, VarRef> module_vars;
  std::unordered_map<std::string, uint64_t> const_ix;
  // current function state
  Function* F = nullptr;
  uint32_t fidx = 0;
  std::vector<Scope> scopes;
  std::unordered_map<std::string_view, uint32_t> labels;
  // .callprototype / .calltargets labels of the current function
  struct Proto {
    std::vector<uint32_t> args, rets;  // sizes
    std::vector<uint32_t> targets;     // .calltargets (empty: a prototype)
  };
  std::unordered_map<std::string_view, Proto> protos;
  std::vector<std::pair<uint32_t, Tok>> fixups;
  std::vector<uint32_t> temps;
  size_t temps_used = 0;
  uint32_t sink = NOREG;
  uint32_t carry = NOREG;  // the function's CC.CF (extended-precision arithmetic)
  uint32_t frame_top = 0;
  std::string unsupported;
  uint32_t unsupported_line = 0;
  int shared_counter = 0;

 private:
  [[noreturn]] void fail(uint32_t line, std::string msg) { throw PErr{line, std::move(msg)}; }
  void skip_to(std::string_view s) {
    for (;;) {
      Tok t = L.next();
      if (t.k == Tok::End) fail(t.line, "unexpected end of input");
      if (t.s == s && t.k == Tok::P) return;
    }
  }
  void skip_line(uint32_t line) {
    while (L.peek().k != Tok::End && L.peek().line == line) L.next();
  }
  uint64_t parse_uint(const Tok& t, uint64_t maxv) {
    Num n;
    if (t.k != Tok::Num || !parse_num(t.s, n) || n.fk != 0) fail(t.line, "expected integer, found '" + std::string(t.s) + "'");
    if (n.u > maxv) fail(t.line, "value " + std::string(t.s) + " too large");
    return n.u;
  }
  static uint32_t align_up(uint32_t v, uint32_t a) { return (v + a - 1) & ~(a - 1); }

  // ---- constant pool ----
  uint32_t cst(uint64_t bits) {
    std::string key(reinterpret_cast<const char*>(&bits), 8);
    auto it = const_ix.find(key);
    if (it != const_ix.end()) return uint32_t(it->second) | CBIT;
    uint32_t ix = uint32_t(M.cpool.size() / 32);
    if (ix >= (1u << 24)) fail(L.line(), "too many constants");
    M.cpool.insert(M.cpool.end(), 32, bits);
    const_ix.emplace(key, ix);
    return ix | CBIT;
  }
  uint64_t imm_bits(const Opd& o, Ty t) {
    const Num& n = o.num;
    if (t == T_F32) {
      float f;
      if (n.fk == 1) f = std::bit_cast<float>(uint32_t(n.u));
      else if (n.fk == 2) f = float(std::bit_cast<double>(n.u));
      else if (n.fk == 3) f = float(n.d);
      else f = float(int64_t(n.u));
      if (o.minus) f = -f;
      return std::bit_cast<uint32_t>(f);
    }
    if (t == T_F64) {
      double d;
      if (n.fk == 1) d = double(std::bit_cast<float>(uint32_t(n.u)));
      else if (n.fk == 2) d = std::bit_cast<double>(n.u);
      else if (n.fk == 3) d = n.d;
      else d = double(int64_t(n.u));
      if (o.minus) d = -d;
      return std::bit_cast<uint64_t>(d);
    }
    if (t == T_F16 || t == T_BF16) {
      double d = n.fk == 1 ? double(std::bit_cast<float>(uint32_t(n.u))) : n.fk == 2 ? std::bit_cast<double>(n.u) : n.fk == 3 ? n.d : double(int64_t(n.u));
      if (o.minus) d = -d;
      if (n.fk == 0 && !o.minus) return n.u & 0xffff;  // raw bits (0x3c00)
      return t == T_F16 ? to_half(d) : to_bf16(d);
    }
    // A decimal floating-point literal as an integer operand: truncated, as
    // ptxas does, when it fits; beyond int64 (or NaN) the conversion would
    // be undefined, so it is refused (the PTX fuzzer found 1.8e273 here).
    if (n.fk == 3 && !(n.d > -9.2e18 && n.d < 9.2e18))
      fail(L.line(), "floating-point literal out of range for an integer operand");
    uint64_t v = n.fk == 1 ? n.u : n.fk == 2 ? n.u : n.fk == 3 ? uint64_t(int64_t(n.d)) : n.u;
    if (o.minus) v = uint64_t(0) - v;
    if (t == T_Pred) v = v != 0;
    return v;
  }

  // ---- registers ----
  // Slot ranges [begin, end) declared .pred in the current function, flat
  // (operands whose meaning depends on their type: cp.async's ignore-src).
  std::vector<uint32_t> pred_slots;
  bool is_pred_slot(uint32_t r) const {
    for (size_t i = 0; i + 1 < pred_slots.size(); i += 2)
      if (r >= pred_slots[i] && r < pred_slots[i + 1]) return true;
    return false;
  }
  uint32_t new_slot(uint32_t line) {
    if (F->nregs >= kMaxRegs) fail(line, too_many_regs());
    return F->nregs++;
  }
  std::string too_many_regs() const {
    return "function " + F->name + " declares more than " + std::to_string(kMaxRegs) +
           " registers (all types together, plus temporaries): the sim device's limit";
  }
  uint32_t temp(uint32_t line) {
    if (temps_used < temps.size()) return temps[temps_used++];
    temps.push_back(new_slot(line));
    return temps[temps_used++];
  }
  bool lookup_reg(std::string_view name, uint32_t& slot) {
    for (auto it = scopes.rbegin(); it != scopes.rend(); ++it) {
      auto r = it->regs.find(name);
      if (r != it->regs.end()) { slot = r->second; return true; }
      size_t e = name.size();
      while (e > 0 && name[e - 1] >= '0' && name[e - 1] <= '9') --e;
      if (e < name.size() && e > 0) {
        auto g = it->ranges.find(name.substr(0, e));
        if (g != it->ranges.end()) {
          std::string_view digits = name.substr(e);
          if (digits.size() > 1 && digits[0] == '0') continue;
          if (digits.size() > 9) continue;
          uint32_t n = 0;
          for (char c : digits) n = n * 10 + uint32_t(c - '0');
          if (n < g->second.second) { slot = g->second.first + n; return true; }
        }
      }
    }
    return false;
  }
  const VarRef* lookup_var(std::string_view name) {
    for (auto it = scopes.rbegin(); it != scopes.rend(); ++it) {
      auto r = it->vars.find(name);
      if (r != it->vars.end()) return &r->second;
    }
    auto r = module_vars.find(name);
    return r == module_vars.end() ? nullptr : &r->second;
  }

  // ---- declarations ----
  struct Decl {
    Sp space = Sp::Global;
    uint32_t align = 0;
    Ty ty = T_None;
    int vec = 1;
    std::string_view name;
    uint64_t count = 1;
    bool unsized = false;
    std::vector<uint8_t> init;
    bool has_init = false;
    uint32_t line = 0;
    // Initializer elements naming a function or variable, resolved once the
    // whole module is read (a vtable may precede the functions it lists).
    struct Sym {
      uint64_t offset;
      uint8_t size, shift;
      bool generic;
      std::string_view name;
      int64_t addend;
      uint32_t line;
    };
    std::vector<Sym> syms;
  };
  struct PendingSym {
    uint32_t global;
    Decl::Sym sym;
  };
  std::vector<PendingSym> pending_syms;
  void parse_init_sym(Decl& d, Tok t);
  void parse_init_list(Decl& d, int depth);
  Decl parse_decl(Sp space, uint32_t line);
  uint64_t decl_size(const Decl& d);
  void add_global(Decl& d, bool module_scope);
  uint32_t frame_alloc(uint64_t size, uint32_t align, uint32_t line);

  // ---- functions ----
  void parse_params(std::vector<Param>& out, bool entry, std::vector<std::pair<std::string_view, VarRef>>& names);
  uint32_t declare_func(std::string_view name, uint32_t line, bool entry, bool ext);
  void parse_function(bool entry, bool ext, uint32_t line);
  void mark_loops();
  void parse_body();
  void parse_proto(const Tok& label);
  void parse_reg_decl(uint32_t line);

  // ---- operands ----
  Opd parse_operand(int depth = 0);
  // A declared function's index (its address is taken), or NOREG.
  uint32_t func_index(std::string_view name) {
    auto it = M.func_by_name.find(std::string(name));
    if (it == M.func_by_name.end()) return NOREG;
    M.funcs[it->second].addr_taken = true;
    return it->second;
  }
  uint32_t carry_slot(uint32_t line) {
    if (carry == NOREG) carry = new_slot(line);
    return carry;
  }
  uint32_t sink_slot(uint32_t line) {
    if (sink == NOREG) sink = new_slot(line);
    return sink;
  }

  // ---- decode helpers ----
  Inst base_inst(uint32_t guard, bool gneg, uint32_t line) {
    Inst I;
    I.guard = guard;
    I.gneg = gneg;
    I.line = line;
    return I;
  }
  void emit(Inst I) {
    if (F->code.size() >= kMaxInsts) fail(I.line, "function too large");
    F->code.push_back(I);
  }
  void set_var(Inst& I, const VarRef& v) {
    I.avk = v.avk;
    I.avar = v.idx;
    if (v.avk == AV_Shared) note_shared(v.idx);
    if (v.avk == AV_Global) note_global(v.idx);
  }
  void note_shared(uint32_t i) {
    if (std::find(F->shared_used.begin(), F->shared_used.end(), i) == F->shared_used.end()) F->shared_used.push_back(i);
  }
  void note_global(uint32_t i) {
    if (std::find(F->globals_used.begin(), F->globals_used.end(), i) == F->globals_used.end()) F->globals_used.push_back(i);
  }
  uint32_t src(const Opd& o, Ty t);
  uint32_t dst(const Opd& o) {
    if (o.k == Opd::Reg) return o.reg;
    if (o.k == Opd::Sink) return sink_slot(o.line);
    fail(o.line, "destination must be a register");
  }
  void need(const std::vector<Opd>& ops, size_t n, uint32_t line, std::string_view op) {
    if (ops.size() != n)
      fail(line, std::string(op) + " expects " + std::to_string(n) + " operands, got " + std::to_string(ops.size()));
  }
  void mark_unsupported(uint32_t line, std::string why);

  void parse_inst(const Tok& op, uint32_t guard, bool gneg);
  void parse_call(const Tok& op, uint32_t guard, bool gneg);
  void resolve_initializers();
  void link_indirect_calls();
  void decode(std::string_view opcode, std::vector<Opd>& ops, uint32_t guard, bool gneg, uint32_t line);
  void decode_mem(std::string_view base, const std::vector<std::string_view>& mods, std::vector<Opd>& ops, Inst I);
  void decode_atom(bool red, const std::vector<std::string_view>& mods, std::vector<Opd>& ops, Inst I);
  void decode_cvt(const std::vector<std::string_view>& mods, std::vector<Opd>& ops, Inst I);
  bool decode_arith(std::string_view base, const std::vector<std::string_view>& mods, std::vector<Opd>& ops, Inst I);
  void apply_addr(Inst& I, const Opd& m, Sp& space);
  void decode_tex(std::string_view base, const std::vector<std::string_view>& mods, std::vector<Opd>& ops, Inst I);
  void decode_mma(std::string_view base, const std::vector<std::string_view>& mods, std::vector<Opd>& ops, Inst I);
};

// A state-space modifier (global, shared, ...); ok is false for any other.
Sp parse_space(std::string_view m, bool& ok);

}  // namespace wh::ptx::detail::parse
