// A small PTX linker, on text alone: programs built with -rdc=true (their
// device-linked image carries SASS only, so the sim device links the
// per-translation-unit PTX itself), and the guest's linkers (cuLink*,
// nvJitLink), whose output is one PTX module any device loads.
//
// Rules (as nvlink applies them):
//  * module-scope functions and variables without .visible/.extern/.weak/
//    .common are private to their unit; where such a name also appears at
//    module scope in another unit, it is renamed in its own unit;
//  * .weak/.common definitions present in several units: the first is kept;
//  * .extern declarations resolve to the definition in another unit; one
//    defined nowhere (other than the builtins the engine provides) is a load
//    error naming it; a .visible symbol defined twice is an error too.
// The output lists every module-scope variable first, then a prototype of
// every function, then the function bodies, so that each use follows the
// definition or declaration the parser needs.
#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "wormhole/common/devrt_names.hpp"
#include "wormhole/common/ptx_link.hpp"

namespace wh::ptx {
namespace {

bool idch(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '$' || c == '%';
}

struct Item {
  enum Kind { Other, Version, Target, Func, Var } kind = Other;
  std::string text;    // whole item
  std::string header;  // Func: text before the body, without linkage keywords
  std::string name;
  bool visible = false, ext = false, weak = false, defined = false, entry = false, shared = false;
};

// Skips a comment or string starting at i; returns the index after it (or i).
size_t skip_comment(std::string_view t, size_t i) {
  if (t.compare(i, 2, "//") == 0) {
    size_t e = t.find('\n', i);
    return e == std::string_view::npos ? t.size() : e;
  }
  if (t.compare(i, 2, "/*") == 0) {
    size_t e = t.find("*/", i + 2);
    return e == std::string_view::npos ? t.size() : e + 2;
  }
  if (t[i] == '"') {
    size_t j = i + 1;
    while (j < t.size() && t[j] != '"' && t[j] != '\n') j += t[j] == '\\' ? 2 : 1;
    return std::min(t.size(), j + 1);
  }
  return i;
}

std::vector<std::string_view> tokens(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < s.size()) {
    char c = s[i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') { ++i; continue; }
    if (c == '.' || idch(c)) {
      size_t j = i + 1;
      while (j < s.size() && idch(s[j])) ++j;
      out.push_back(s.substr(i, j - i));
      i = j;
    } else {
      out.push_back(s.substr(i, 1));
      ++i;
    }
  }
  return out;
}

// Splits a unit into module-scope items; false on unbalanced braces.
bool split(std::string_view t, std::vector<Item>& items, std::string* err, size_t unit) {
  size_t i = 0;
  auto fail = [&](const std::string& m) {
    if (err) *err = "PTX unit " + std::to_string(unit) + ": " + m;
    return false;
  };
  while (i < t.size()) {
    char c = t[i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') { ++i; continue; }
    if (size_t j = skip_comment(t, i); j != i) { i = j; continue; }
    // line directives without a terminating ';'
    auto line_dir = [&](std::string_view d) {
      return t.compare(i, d.size(), d) == 0 && i + d.size() < t.size() && !idch(t[i + d.size()]);
    };
    if (line_dir(".version") || line_dir(".target") || line_dir(".address_size") || line_dir(".file")) {
      size_t e = t.find('\n', i);
      if (e == std::string_view::npos) e = t.size();
      Item it;
      it.kind = line_dir(".version") ? Item::Version : line_dir(".target") ? Item::Target : Item::Other;
      it.text = std::string(t.substr(i, e - i));
      if (!line_dir(".file")) items.push_back(std::move(it));
      i = e;
      continue;
    }
    size_t s = i, hdr_end = 0;
    bool body = false;
    while (i < t.size()) {
      if (size_t j = skip_comment(t, i); j != i) { i = j; continue; }
      if (t[i] == ';') { ++i; break; }
      if (t[i] == '{') {
        hdr_end = i;
        body = true;
        int depth = 0;
        while (i < t.size()) {
          if (size_t j = skip_comment(t, i); j != i) { i = j; continue; }
          if (t[i] == '{') ++depth;
          else if (t[i] == '}' && --depth == 0) break;
          ++i;
        }
        if (i >= t.size()) return fail("unbalanced braces");
        ++i;
        break;
      }
      ++i;
    }
    Item it;
    it.text = std::string(t.substr(s, i - s));
    std::string_view head = body ? t.substr(s, hdr_end - s) : std::string_view(it.text);
    auto tk = tokens(head);
    size_t k = 0;
    for (; k < tk.size(); ++k) {
      if (tk[k] == ".visible") it.visible = true;
      else if (tk[k] == ".extern") it.ext = true;
      else if (tk[k] == ".weak" || tk[k] == ".common") it.weak = true;
      else break;
    }
    if (k < tk.size() && (tk[k] == ".func" || tk[k] == ".entry")) {
      it.kind = Item::Func;
      it.entry = tk[k] == ".entry";
      it.defined = body;
      size_t n = k + 1;
      if (n < tk.size() && tk[n] == "(") {  // return parameters
        int d = 0;
        for (; n < tk.size(); ++n) {
          if (tk[n] == "(") ++d;
          if (tk[n] == ")" && --d == 0) { ++n; break; }
        }
      }
      if (n < tk.size()) it.name = std::string(tk[n]);
      // The prototype: the header from .func on, ended by ';'.
      size_t at = size_t(tk[k].data() - head.data());
      it.header = std::string(head.substr(at));
      while (!it.header.empty() && (it.header.back() == ';' || isspace(static_cast<unsigned char>(it.header.back()))))
        it.header.pop_back();
      it.header += ";";
    } else if (k < tk.size() && (tk[k] == ".global" || tk[k] == ".const" || tk[k] == ".shared")) {
      it.kind = Item::Var;
      it.shared = tk[k] == ".shared";
      it.defined = !it.ext;
      for (size_t n = k + 1; n < tk.size(); ++n) {
        if (tk[n] == "=") break;
        if (tk[n][0] != '.' && (idch(tk[n][0]) && !(tk[n][0] >= '0' && tk[n][0] <= '9'))) {
          it.name = std::string(tk[n]);
          break;
        }
      }
    }
    if ((it.kind == Item::Func || it.kind == Item::Var) && it.name.empty())
      return fail("module-scope declaration without a name");
    items.push_back(std::move(it));
  }
  return true;
}

// Replaces whole identifiers `from` by `to` (not inside longer identifiers).
std::string rename_ids(std::string_view text, const std::map<std::string, std::string, std::less<>>& names) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    if (idch(text[i])) {
      size_t j = i + 1;
      while (j < text.size() && idch(text[j])) ++j;
      std::string_view id = text.substr(i, j - i);
      // an identifier only when not preceded by '.' (a directive or a .field)
      auto it = names.find(id);
      if (it != names.end() && (i == 0 || text[i - 1] != '.')) out += it->second;
      else out += id;
      i = j;
    } else {
      out += text[i++];
    }
  }
  return out;
}

// What the device provides: the engine's builtins, the device runtime's
// functions (devrt_names.hpp), and the cooperative-groups functions of
// libcudadevrt the sim device defines (host-server/ptx/src/cg_runtime.cpp).
bool is_builtin(const std::string& n) {
  return n == "vprintf" || n == "__assertfail" || n == "malloc" || n == "free" || detail::devrt_name(n) ||
         n == "cudaCGGetIntrinsicHandle" || n == "cudaCGSynchronize";
}

// libcudadevrt's unit (linked into every -lcudadevrt program, dynamic
// parallelism or not) wraps the GPU driver's device-side entry points
// (`__cuda_syscall_*`, `cnp*`), which only a GPU has; the engine provides
// the runtime's functions itself, so that unit is left out.
bool device_runtime_unit(const std::vector<Item>& items) {
  for (const Item& it : items)
    if (it.kind == Item::Func && it.ext && it.name.starts_with("__cuda_syscall_")) return true;
  return false;
}

}  // namespace

bool link_ptx_units(const std::vector<std::string_view>& units, std::string* linked, std::string* err) {
  if (units.empty()) {
    if (err) *err = "PTX link: no units";
    return false;
  }
  if (units.size() == 1) {
    *linked = std::string(units[0]);
    return true;
  }
  std::vector<std::vector<Item>> items(units.size());
  for (size_t u = 0; u < units.size(); ++u)
    if (!split(units[u], items[u], err, u)) return false;
  {
    std::vector<std::string_view> kept;
    for (size_t u = 0; u < units.size(); ++u)
      if (!device_runtime_unit(items[u])) kept.push_back(units[u]);
    if (kept.empty()) {
      if (err) *err = "PTX link: no units besides the device runtime library's";
      return false;
    }
    if (kept.size() != units.size()) return link_ptx_units(kept, linked, err);
  }
  // Names at module scope, per unit; private definitions to rename where the
  // name appears in another unit too.
  std::map<std::string, std::set<size_t>> seen;
  for (size_t u = 0; u < units.size(); ++u)
    for (auto& it : items[u])
      if (!it.name.empty()) seen[it.name].insert(u);
  for (size_t u = 0; u < units.size(); ++u) {
    std::map<std::string, std::string, std::less<>> ren;
    for (auto& it : items[u])
      if ((it.kind == Item::Func || it.kind == Item::Var) && it.defined && !it.visible && !it.weak && !it.ext &&
          seen[it.name].size() > 1)
        ren[it.name] = it.name + "$u" + std::to_string(u);
    if (ren.empty()) continue;
    std::string text = rename_ids(units[u], ren);
    items[u].clear();
    if (!split(text, items[u], err, u)) return false;
  }
  // Resolve: one definition per name.
  std::map<std::string, std::pair<size_t, const Item*>> def;
  for (size_t u = 0; u < units.size(); ++u)
    for (auto& it : items[u]) {
      if (it.name.empty() || !it.defined) continue;
      auto [d, fresh] = def.try_emplace(it.name, u, &it);
      if (fresh) continue;
      if (it.weak && d->second.second->weak) continue;
      if (it.kind == Item::Var && it.shared && d->second.second->shared) continue;
      if (it.weak) continue;  // a strong definition elsewhere wins
      if (d->second.second->weak) {
        d->second = {u, &it};
        continue;
      }
      if (err)
        *err = "PTX link: symbol '" + it.name + "' is defined in units " + std::to_string(d->second.first) + " and " +
               std::to_string(u);
      return false;
    }
  for (size_t u = 0; u < units.size(); ++u)
    for (auto& it : items[u])
      if ((it.kind == Item::Func || it.kind == Item::Var) && !it.defined && !def.count(it.name) &&
          !(it.kind == Item::Var && it.shared) && !(it.kind == Item::Func && is_builtin(it.name))) {
        if (err)
          *err = "PTX link: undefined " + std::string(it.kind == Item::Func ? "function" : "variable") + " '" +
                 it.name + "' (declared .extern in unit " + std::to_string(u) + ", defined in no unit)";
        return false;
      }
  // Emit.
  std::string vars, protos, bodies;
  std::string version = ".version 7.0", target;
  std::set<std::string> declared, dyn_shared;
  for (size_t u = 0; u < units.size(); ++u)
    for (auto& it : items[u]) {
      if (it.kind == Item::Version) {
        if (it.text.size() > version.size() || (it.text.size() == version.size() && it.text > version)) version = it.text;
      } else if (it.kind == Item::Target) {
        if (target.empty()) target = it.text;
      } else if (it.kind == Item::Var) {
        if (it.ext && it.shared) {  // dynamic shared memory: one declaration per name
          if (dyn_shared.insert(it.name).second) vars += it.text + "\n";
        } else if (it.defined && def[it.name].second == &it) {
          vars += it.text + "\n";
        }
      } else if (it.kind == Item::Func) {
        auto d = def.find(it.name);
        if (!it.entry && declared.insert(it.name).second)
          protos += (d != def.end() ? d->second.second->header : it.header) + "\n";
        if (it.defined && d->second.second == &it) bodies += it.text + "\n";
      } else if (it.text.rfind(".address_size", 0) == 0) {
        auto tk = tokens(it.text);
        if (tk.size() != 2 || tk[1] != "64") {
          if (err) *err = "PTX unit " + std::to_string(u) + ": only .address_size 64 is supported";
          return false;
        }
      } else {
        bodies += it.text + "\n";  // .pragma, .section and the like, in place
      }
    }
  *linked = version + "\n" + target + "\n.address_size 64\n\n" + vars + "\n" + protos + "\n" + bodies;
  return true;
}

}  // namespace wh::ptx
