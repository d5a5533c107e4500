// The sim device's stand-in for libcudadevrt's cooperative groups (cg_runtime.cpp).
#pragma once
#include <string>
#include <string_view>

namespace wh::ptx::detail {

// A module text that uses the device runtime, linked with it into *linked;
// false when it uses none (or the link fails: the text is then parsed as it is).
bool with_cg_runtime(std::string_view text, std::string* linked);

}  // namespace wh::ptx::detail
