// Links PTX translation units into one PTX module text (rules in link.cpp,
// docs/ptx.md). Text only, no other project code: the server's sim device
// and the guest libraries' linkers (cuLink*, nvJitLink) share it.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace wh::ptx {

// One unit comes back as it is. False, with *err naming the unit or the
// symbol, on unbalanced braces, a symbol defined twice, or an .extern
// declaration that no unit defines (other than the engine's builtins).
bool link_ptx_units(const std::vector<std::string_view>& units, std::string* linked, std::string* err);

}  // namespace wh::ptx
