#include "inputs.hpp"

#include <cstring>

#include "wormhole/common/fatbin.hpp"

namespace wh::nvjitlink {
namespace {

constexpr uint8_t kLtoirMagic[4] = {0xed, 0x43, 0x4e, 0x7f};
constexpr uint16_t kEmCuda = 190;  // e_machine of a cubin
constexpr char kArMagic[] = "!<arch>\n";

template <class T>
T rd(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

bool is_elf64(const uint8_t* p, size_t n) {
  return n >= 64 && p[0] == 0x7f && p[1] == 'E' && p[2] == 'L' && p[3] == 'F' && p[4] == 2 && p[5] == 1;
}

// The best PTX of one fatbin (the highest architecture's), else nothing.
bool best_ptx(const std::vector<fatbin::Entry>& entries, std::string* text) {
  const fatbin::Entry* best = nullptr;
  for (auto& e : entries)
    if (e.kind == fatbin::Entry::PTX && (!best || e.sm_arch > best->sm_arch)) best = &e;
  if (!best) return false;
  text->assign(reinterpret_cast<const char*>(best->bytes.data()), best->bytes.size());
  return true;
}

bool from_fatbins(const uint8_t* p, size_t n, const std::string& name, Found* out, std::string* err) {
  std::vector<std::vector<fatbin::Entry>> all;
  std::string e;
  if (!fatbin::parse_all(p, n, all, &e)) {
    // Padding after the last fatbin: the first alone.
    all.assign(1, {});
    if (!fatbin::parse(p, n, all[0], &e)) {
      *err = name + ": " + e;
      return false;
    }
  }
  for (auto& entries : all) {
    std::string text;
    if (best_ptx(entries, &text)) out->ptx.push_back(std::move(text));
    else out->sass_only.push_back(name);
  }
  return true;
}

// A host object: its device code is the fatbin(s) in section .nv_fatbin.
bool from_object(const uint8_t* p, size_t n, const std::string& name, Found* out, std::string* err) {
  if (!is_elf64(p, n)) {
    *err = name + ": not a 64-bit ELF object";
    return false;
  }
  if (rd<uint16_t>(p + 18) == kEmCuda) return collect(Kind::Cubin, p, n, name, out, err);
  const uint64_t shoff = rd<uint64_t>(p + 40);
  const uint16_t shentsize = rd<uint16_t>(p + 58), shnum = rd<uint16_t>(p + 60), shstrndx = rd<uint16_t>(p + 62);
  if (shentsize < 64 || shoff > n || uint64_t(shnum) * shentsize > n - shoff || shstrndx >= shnum) {
    *err = name + ": malformed ELF section headers";
    return false;
  }
  auto section = [&](uint16_t i, uint64_t* off, uint64_t* size) {
    const uint8_t* sh = p + shoff + uint64_t(i) * shentsize;
    *off = rd<uint64_t>(sh + 24);
    *size = rd<uint64_t>(sh + 32);
    return rd<uint32_t>(sh + 4) != 8 /* SHT_NOBITS */ && *off <= n && *size <= n - *off;
  };
  uint64_t stroff, strsize;
  if (!section(shstrndx, &stroff, &strsize)) {
    *err = name + ": malformed ELF string table";
    return false;
  }
  bool any = false;
  for (uint16_t i = 0; i < shnum; i++) {
    const uint32_t nm = rd<uint32_t>(p + shoff + uint64_t(i) * shentsize);
    if (nm >= strsize) continue;
    const char* s = reinterpret_cast<const char*>(p + stroff + nm);
    const size_t len = strnlen(s, strsize - nm);
    if (std::string_view(s, len) != ".nv_fatbin") continue;
    uint64_t off, size;
    if (!section(i, &off, &size)) {
      *err = name + ": malformed .nv_fatbin section";
      return false;
    }
    if (!from_fatbins(p + off, size, name, out, err)) return false;
    any = true;
  }
  if (!any) out->sass_only.push_back(name + " (no device code)");
  return true;
}

// An ar library: each member an object.
bool from_library(const uint8_t* p, size_t n, const std::string& name, Found* out, std::string* err) {
  size_t at = sizeof kArMagic - 1;
  while (at + 60 <= n) {
    const uint8_t* h = p + at;
    if (h[58] != '`' || h[59] != '\n') {
      *err = name + ": malformed archive member header";
      return false;
    }
    char digits[11] = {};
    std::memcpy(digits, h + 48, 10);
    char* end = nullptr;
    const unsigned long long size = std::strtoull(digits, &end, 10);
    if (end == digits || size > n - at - 60) {
      *err = name + ": archive member past the end";
      return false;
    }
    std::string member(reinterpret_cast<const char*>(h), 16);
    member.erase(member.find_last_not_of(' ') + 1);
    // The symbol table ("/", "/SYM64/") and the long-name table ("//") are no objects.
    if (member != "/" && member != "//" && member != "/SYM64/") {
      if (!from_object(h + 60, size, name + "(" + member + ")", out, err)) return false;
    }
    at += 60 + size + (size & 1);
  }
  return true;
}

}  // namespace

Kind sniff(const uint8_t* p, size_t n) {
  if (n >= 4 && std::memcmp(p, kLtoirMagic, 4) == 0) return Kind::Ltoir;
  if (n >= 4 && rd<uint32_t>(p) == fatbin::kFatbinMagic) return Kind::Fatbin;
  if (n >= sizeof kArMagic - 1 && std::memcmp(p, kArMagic, sizeof kArMagic - 1) == 0) return Kind::Library;
  if (is_elf64(p, n)) return rd<uint16_t>(p + 18) == kEmCuda ? Kind::Cubin : Kind::Object;
  const std::string_view text(reinterpret_cast<const char*>(p), strnlen(reinterpret_cast<const char*>(p), n));
  if (text.find(".version") != std::string_view::npos) return Kind::Ptx;
  return Kind::Unknown;
}

bool collect(Kind kind, const uint8_t* p, size_t n, const std::string& name, Found* out, std::string* err) {
  switch (kind) {
    case Kind::Ptx: {
      std::string text(reinterpret_cast<const char*>(p), strnlen(reinterpret_cast<const char*>(p), n));
      if (text.find(".version") == std::string::npos) {
        *err = name + ": not PTX (no .version directive)";
        return false;
      }
      out->ptx.push_back(std::move(text));
      return true;
    }
    case Kind::Ltoir:
      if (n < 4 || std::memcmp(p, kLtoirMagic, 4) != 0) {
        *err = name + ": not LTO-IR";
        return false;
      }
      out->ltoir.emplace_back(p, p + n);
      return true;
    case Kind::Fatbin:
      return from_fatbins(p, n, name, out, err);
    case Kind::Object:
      return from_object(p, n, name, out, err);
    case Kind::Library:
      if (n < sizeof kArMagic - 1 || std::memcmp(p, kArMagic, sizeof kArMagic - 1) != 0) {
        *err = name + ": not an ar library";
        return false;
      }
      return from_library(p, n, name, out, err);
    case Kind::Cubin:
      *err = name + ": a cubin (SASS) cannot be linked for a Wormhole device, which runs PTX; link its PTX, or a "
                    "fatbin that carries PTX";
      return false;
    case Kind::Unknown:
      break;
  }
  *err = name + ": unrecognized input";
  return false;
}

}  // namespace wh::nvjitlink
