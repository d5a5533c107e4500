// PTX lexer: source text -> tokens; number and type spellings.
#include "parser.hpp"

namespace wh::ptx::detail::parse {

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

Tok Lexer::lex() {
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

}  // namespace wh::ptx::detail::parse
