// PTX lexer, parser and decoder: text -> ModuleImpl (decoded instructions with
// handlers chosen once, operands resolved to register slots / constant rows).
#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <functional>
#include <map>

#include "ops_mem.hpp"
#include "ops_mma.hpp"
#include "ops_tex.hpp"
#include "devrt.hpp"

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

namespace {

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

bool parse_num(std::string_view t, Num& n) {
  n = Num{};
  if (t.size() >= 2 && t[0] == '0' && (t[1] == 'f' || t[1] == 'F' || t[1] == 'd' || t[1] == 'D') ) {
    bool f32 = t[1] == 'f' || t[1] == 'F';
    std::string_view h = t.substr(2);
    if (h.size() != (f32 ? 8u : 16u)) return false;
    auto r = std::from_chars(h.data(), h.data() + h.size(), n.u, 16);
    if (r.ec != std::errc() || r.ptr != h.data() + h.size()) return false;
    n.fk = f32 ? 1 : 2;
    return true;
  }
  std::string_view b = t;
  if (!b.empty() && (b.back() == 'U' || b.back() == 'u')) b.remove_suffix(1);
  int base = 10;
  if (b.size() > 2 && b[0] == '0' && (b[1] == 'x' || b[1] == 'X')) { base = 16; b.remove_prefix(2); }
  else if (b.size() > 2 && b[0] == '0' && (b[1] == 'b' || b[1] == 'B')) { base = 2; b.remove_prefix(2); }
  else if (b.find_first_of(".eE") != std::string_view::npos) {
    std::string s(t);
    char* end = nullptr;
    n.d = std::strtod(s.c_str(), &end);
    if (!end || *end) return false;
    n.fk = 3;
    return true;
  } else if (b.size() > 1 && b[0] == '0') { base = 8; b.remove_prefix(1); }
  if (b.empty()) return false;
  uint64_t v = 0;
  for (char c : b) {
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : 99;
    if (d >= base) return false;
    v = v * uint64_t(base) + uint64_t(d);  // wraps like PTX 64-bit constants
  }
  n.u = v;
  return true;
}

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
  Tok lex() {
    for (;;) {
      while (i_ < src_.size() && (src_[i_] == ' ' || src_[i_] == '\t' || src_[i_] == '\r' || src_[i_] == '\n' || src_[i_] == '\f' || src_[i_] == '\v')) {
        if (src_[i_] == '\n') ++line_;
        ++i_;
      }
      if (i_ + 1 < src_.size() && src_[i_] == '/' && src_[i_ + 1] == '/') {
        while (i_ < src_.size() && src_[i_] != '\n') ++i_;
        continue;
      }
      if (i_ + 1 < src_.size() && src_[i_] == '/' && src_[i_ + 1] == '*') {
        i_ += 2;
        while (i_ < src_.size() && !(src_[i_] == '*' && i_ + 1 < src_.size() && src_[i_ + 1] == '/')) {
          if (src_[i_] == '\n') ++line_;
          ++i_;
        }
        i_ = std::min(src_.size(), i_ + 2);
        continue;
      }
      break;
    }
    Tok t;
    t.line = line_;
    if (i_ >= src_.size()) return t;
    size_t b = i_;
    char c = src_[i_];
    if (idstart(c)) {
      ++i_;
      while (i_ < src_.size()) {
        char d = src_[i_];
        if (idch(d)) ++i_;
        else if (d == '.' && i_ + 1 < src_.size() && (idch(src_[i_ + 1]))) ++i_;
        else if (d == ':' && i_ + 2 < src_.size() && src_[i_ + 1] == ':' && idch(src_[i_ + 2])) i_ += 2;
        else break;
      }
      t.k = Tok::Id;
    } else if (c == '.' && i_ + 1 < src_.size() && idstart(src_[i_ + 1]) && src_[i_ + 1] != '%') {
      ++i_;
      while (i_ < src_.size() && idch(src_[i_])) ++i_;
      t.k = Tok::Dir;
    } else if (c >= '0' && c <= '9') {
      bool hexish = i_ + 1 < src_.size() && src_[i_] == '0' &&
                    (src_[i_ + 1] == 'x' || src_[i_ + 1] == 'X' || src_[i_ + 1] == 'f' || src_[i_ + 1] == 'F' ||
                     src_[i_ + 1] == 'd' || src_[i_ + 1] == 'D');
      while (i_ < src_.size()) {
        char d = src_[i_];
        if (idch(d) || d == '.') {
          ++i_;
          if (!hexish && (d == 'e' || d == 'E') && i_ < src_.size() && (src_[i_] == '+' || src_[i_] == '-')) ++i_;
        } else {
          break;
        }
      }
      t.k = Tok::Num;
    } else if (c == '"') {
      ++i_;
      while (i_ < src_.size() && src_[i_] != '"' && src_[i_] != '\n') {
        if (src_[i_] == '\\' && i_ + 1 < src_.size()) ++i_;
        ++i_;
      }
      if (i_ >= src_.size() || src_[i_] != '"') throw PErr{line_, "unterminated string"};
      ++i_;
      t.k = Tok::Str;
    } else {
      ++i_;
      t.k = Tok::P;
    }
    t.s = src_.substr(b, i_ - b);
    return t;
  }
  std::string_view src_;
  size_t i_ = 0;
  uint32_t line_ = 1;
  Tok cur_;
  bool has_ = false;
};

Ty parse_ty(std::string_view s) {
  static const std::pair<std::string_view, Ty> tab[] = {
      {"b8", T_B8}, {"b16", T_B16}, {"b32", T_B32}, {"b64", T_B64}, {"u8", T_U8}, {"u16", T_U16}, {"u32", T_U32},
      {"u64", T_U64}, {"s8", T_S8}, {"s16", T_S16}, {"s32", T_S32}, {"s64", T_S64}, {"f16", T_F16},
      {"f16x2", T_F16X2}, {"bf16", T_BF16}, {"bf16x2", T_BF16X2}, {"f32", T_F32}, {"f64", T_F64}, {"pred", T_Pred},
      {"b128", T_B128}};
  if (!s.empty() && s[0] == '.') s.remove_prefix(1);
  for (auto& [n, t] : tab)
    if (n == s) return t;
  return T_None;
}

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
      {"%cluster_ctarank", SR_ZERO}, {"%is_explicit_cluster", SR_ZERO}};
  return t;
}

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
  // An address expression in an initializer: name, name+off, generic(name)+off,
  // or one byte of one, mask(expr) with mask 0xFF << 8k.
  void parse_init_sym(Decl& d, Tok t) {
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
  void parse_init_list(Decl& d, int depth) {
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
  Decl parse_decl(Sp space, uint32_t line) {
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
  uint64_t decl_size(const Decl& d) {
    uint64_t esz = uint64_t(ty_bytes(d.ty) ? ty_bytes(d.ty) : 1) * uint64_t(d.vec);
    return d.count * esz;
  }
  void add_global(Decl& d, bool module_scope) {
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
  uint32_t frame_alloc(uint64_t size, uint32_t align, uint32_t line) {
    uint64_t off = (uint64_t(frame_top) + align - 1) & ~uint64_t(align - 1);
    if (off + size > kMaxFrame) fail(line, "local frame too large in " + F->name);
    frame_top = uint32_t(off + size);
    F->frame_bytes = std::max(F->frame_bytes, frame_top);
    return uint32_t(off);
  }

  // ---- functions ----
  void parse_params(std::vector<Param>& out, bool entry, std::vector<std::pair<std::string_view, VarRef>>& names) {
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
  uint32_t declare_func(std::string_view name, uint32_t line, bool entry, bool ext) {
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
  void parse_function(bool entry, bool ext, uint32_t line) {
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
  void mark_loops() {
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
  void parse_body() {
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
  void parse_proto(const Tok& label) {
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
  void parse_reg_decl(uint32_t line) {
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
        F->nregs += uint32_t(c);
      } else {
        scopes.back().regs[n.s] = new_slot(n.line);
      }
      if (L.accept(";")) break;
      L.expect(",");
    }
  }

  // ---- operands ----
  Opd parse_operand(int depth = 0) {
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
      if (it != st.end()) { o.k = Opd::Sreg; o.reg = it->second; return o; }
      if (t.s == "%envreg1" || t.s == "%envreg2") { o.k = Opd::Sreg; o.reg = t.s == "%envreg1" ? SR_ENVREG1 : SR_ENVREG2; return o; }
      if (t.s.starts_with("%envreg") || t.s.starts_with("%pm")) { o.k = Opd::Sreg; o.reg = SR_ZERO; return o; }
      fail(t.line, "unknown register '" + std::string(t.s) + "'");
    }
    o.k = Opd::Name;
    o.name = t.s;
    return o;
  }
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
  uint32_t src(const Opd& o, Ty t) {
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
  uint32_t dst(const Opd& o) {
    if (o.k == Opd::Reg) return o.reg;
    if (o.k == Opd::Sink) return sink_slot(o.line);
    fail(o.line, "destination must be a register");
  }
  void need(const std::vector<Opd>& ops, size_t n, uint32_t line, std::string_view op) {
    if (ops.size() != n)
      fail(line, std::string(op) + " expects " + std::to_string(n) + " operands, got " + std::to_string(ops.size()));
  }
  void mark_unsupported(uint32_t line, std::string why) {
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
                          "suld", "sust", "suq", "wmma", "mma", "ldmatrix", "stmatrix", "vshl", "vshr", "mbarrier"})
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

template <class D, class S>
Handler cvt_fast() { return h_cvt_fast<D, S>; }

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
    I.fn = h_redux;
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

}  // namespace

bool parse_module(std::string_view text, ModuleImpl& m, std::string* err) {
  m.text.assign(text);
  Parser p(m);
  try {
    p.run();
  } catch (const PErr& e) {
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
