// Wormhole: fatbinary / cubin container parsing (no other project code).
// Shared by the guest library (to size and copy a registered fatbin, and to
// learn kernel parameter layouts) and by the server's sim backend.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace wh::fatbin {

constexpr uint32_t kWrapperMagic = 0x466243b1u;  // __fatBinC_Wrapper_t
constexpr uint32_t kFatbinMagic = 0xba55ed50u;   // bytes 50 ed 55 ba

struct Entry {
  enum Kind { PTX, ELF } kind;
  uint32_t sm_arch;            // e.g. 75 for sm_75 / compute_75
  std::vector<uint8_t> bytes;  // decompressed payload (PTX text without trailing NULs, or ELF)
};

// `data` points at either the registration wrapper ({int magic; int version;
// const void* data; void* filename_or_fatbins}) or a fatbin (header 50 ed 55 ba).
// `avail` bounds all reads (SIZE_MAX when only a pointer is known: the size is
// then taken from the fatbin header). Returns false and sets *err on malformed
// input; never reads past `avail` nor past the header-declared sizes.
// Note: with a wrapper, the fatbin it points at is read through that pointer
// (it lives in the same process); `avail` then bounds only the wrapper.
bool parse(const void* data, size_t avail, std::vector<Entry>& out, std::string* err);

// Consecutive fatbins filling exactly [data, data+avail) (no wrapper): a
// program built with -rdc=true ships its device-linked fatbin followed by the
// per-translation-unit ("prelinked") fatbins that carry the PTX. One Entry
// list per fatbin, in order; at most kMaxFatbins of them.
constexpr size_t kMaxFatbins = 4096;
bool parse_all(const void* data, size_t avail, std::vector<std::vector<Entry>>& out, std::string* err);

// Total bytes of a fatbin (header + payload) from its header; 0 if the magic is
// wrong. Accepts a wrapper too (follows its data pointer).
size_t fatbin_size(const void* fatbin_header);

struct ParamInfo {
  uint32_t offset, size;
  bool operator==(const ParamInfo&) const = default;
};

// From a cubin's .nv.info.<kernel> sections (EIATTR_KPARAM_INFO), via libelf.
bool cubin_kernel_params(const std::vector<uint8_t>& elf,
                         std::map<std::string, std::vector<ParamInfo>>& out, std::string* err);

// Same information from PTX text (.entry parameter lists).
bool ptx_kernel_params(std::string_view ptx, std::map<std::string, std::vector<ParamInfo>>& out,
                       std::string* err);

}  // namespace wh::fatbin
