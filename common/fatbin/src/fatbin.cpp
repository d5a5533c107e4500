// Fatbinary and cubin parsing. Layouts (observed on nvcc 13.0):
//   fatbin header (16 bytes): u32 magic 0xba55ed50, u16 version, u16 header_size, u64 payload_size
//   entry header (>= 64 bytes): u16 kind (1 PTX, 2 ELF), u16 ?, u32 header_size, u64 payload_size,
//     u32 compressed_size @16, u32 ? @20, u16 minor @24, u16 major @26, u32 arch @28,
//     u32 name_off @32, u32 name_len @36, u64 flags @40 (0x8000 zstd, 0x2000 lz4), u64 ? @48,
//     u64 uncompressed_size @56
#include "wormhole/common/fatbin.hpp"

#include <gelf.h>
#include <libelf.h>
#include <zstd.h>

#include <cstring>
#include <limits>

namespace wh::fatbin {
namespace {

template <class T>
T rd(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

bool fail(std::string* err, std::string msg) {
  if (err) *err = std::move(msg);
  return false;
}

constexpr uint64_t kMaxDecompressed = 1ull << 30;  // 1 GiB: refuse absurd declared sizes

bool parse_fatbin(const uint8_t* p, size_t avail, std::vector<Entry>& out, std::string* err) {
  if (avail < 16) return fail(err, "fatbin: truncated header");
  if (rd<uint32_t>(p) != kFatbinMagic) return fail(err, "fatbin: bad magic");
  uint16_t hsize = rd<uint16_t>(p + 6);
  uint64_t psize = rd<uint64_t>(p + 8);
  if (hsize < 16) return fail(err, "fatbin: header size < 16");
  if (psize > avail || hsize > avail - psize)
    return fail(err, "fatbin: declared size " + std::to_string(psize) + " exceeds available bytes");
  uint64_t end = hsize + psize, off = hsize;
  while (off < end) {
    if (end - off < 64) return fail(err, "fatbin: truncated entry header at offset " + std::to_string(off));
    const uint8_t* e = p + off;
    uint16_t kind = rd<uint16_t>(e);
    uint32_t ehs = rd<uint32_t>(e + 4);
    uint64_t esize = rd<uint64_t>(e + 8);
    uint32_t csize = rd<uint32_t>(e + 16);
    uint32_t arch = rd<uint32_t>(e + 28);
    uint64_t flags = rd<uint64_t>(e + 40);
    uint64_t usize = rd<uint64_t>(e + 56);
    if (ehs < 64 || ehs > end - off) return fail(err, "fatbin: bad entry header size");
    if (esize > end - off - ehs) return fail(err, "fatbin: entry payload exceeds fatbin");
    const uint8_t* pay = e + ehs;
    off += ehs + esize;
    if (kind != 1 && kind != 2) continue;  // other kinds (e.g. LTO IR) are not ours
    Entry en{kind == 1 ? Entry::PTX : Entry::ELF, arch, {}};
    if (flags & 0x8000) {
      uint64_t clen = csize ? csize : esize;
      if (clen > esize) return fail(err, "fatbin: compressed size exceeds payload");
      unsigned long long fs = ZSTD_getFrameContentSize(pay, clen);
      uint64_t want = usize;
      if (fs != ZSTD_CONTENTSIZE_ERROR && fs != ZSTD_CONTENTSIZE_UNKNOWN) want = fs;
      if (want > kMaxDecompressed) return fail(err, "fatbin: decompressed size too large");
      en.bytes.resize(want);
      size_t r = ZSTD_decompress(en.bytes.data(), en.bytes.size(), pay, clen);
      if (ZSTD_isError(r)) return fail(err, std::string("fatbin: zstd: ") + ZSTD_getErrorName(r));
      en.bytes.resize(r);
    } else if (flags & 0x2000) {
      return fail(err, "fatbin: LZ4-compressed entry (older nvcc) is not supported; rebuild with nvcc >= 12.8 or --no-compress");
    } else {
      en.bytes.assign(pay, pay + esize);
    }
    if (en.kind == Entry::PTX)
      while (!en.bytes.empty() && en.bytes.back() == 0) en.bytes.pop_back();
    out.push_back(std::move(en));
  }
  return true;
}

}  // namespace

bool parse(const void* data, size_t avail, std::vector<Entry>& out, std::string* err) {
  if (!data) return fail(err, "fatbin: null pointer");
  const uint8_t* p = static_cast<const uint8_t*>(data);
  if (avail < 4) return fail(err, "fatbin: truncated");
  uint32_t magic = rd<uint32_t>(p);
  if (magic == kWrapperMagic) {
    if (avail < 24) return fail(err, "fatbin: truncated wrapper");
    const void* inner = rd<const void*>(p + 8);
    if (!inner) return fail(err, "fatbin: wrapper has null data pointer");
    return parse_fatbin(static_cast<const uint8_t*>(inner), std::numeric_limits<size_t>::max(), out, err);
  }
  if (magic != kFatbinMagic) return fail(err, "fatbin: unknown magic");
  return parse_fatbin(p, avail, out, err);
}

bool parse_all(const void* data, size_t avail, std::vector<std::vector<Entry>>& out, std::string* err) {
  if (!data) return fail(err, "fatbin: null pointer");
  const uint8_t* p = static_cast<const uint8_t*>(data);
  size_t off = 0;
  while (off < avail) {
    if (out.size() >= kMaxFatbins) return fail(err, "fatbin: more than " + std::to_string(kMaxFatbins) + " fatbins");
    if (avail - off < 16) return fail(err, "fatbin: trailing bytes after fatbin " + std::to_string(out.size()));
    if (rd<uint32_t>(p + off) != kFatbinMagic)
      return fail(err, "fatbin: bad magic of fatbin " + std::to_string(out.size()));
    const uint64_t size = uint64_t(rd<uint16_t>(p + off + 6)) + rd<uint64_t>(p + off + 8);
    if (size > avail - off) return fail(err, "fatbin: fatbin " + std::to_string(out.size()) + " exceeds the image");
    out.emplace_back();
    if (!parse_fatbin(p + off, size_t(size), out.back(), err)) return false;
    off += size;
  }
  if (out.empty()) return fail(err, "fatbin: empty image");
  return true;
}

size_t fatbin_size(const void* h) {
  if (!h) return 0;
  const uint8_t* p = static_cast<const uint8_t*>(h);
  if (rd<uint32_t>(p) == kWrapperMagic) p = static_cast<const uint8_t*>(rd<const void*>(p + 8));
  if (!p || rd<uint32_t>(p) != kFatbinMagic) return 0;
  return size_t(rd<uint16_t>(p + 6)) + size_t(rd<uint64_t>(p + 8));
}

bool cubin_kernel_params(const std::vector<uint8_t>& elf, std::map<std::string, std::vector<ParamInfo>>& out,
                         std::string* err) {
  elf_version(EV_CURRENT);
  Elf* e = elf_memory(const_cast<char*>(reinterpret_cast<const char*>(elf.data())), elf.size());
  if (!e) return fail(err, std::string("cubin: ") + elf_errmsg(-1));
  struct Closer { Elf* e; ~Closer() { elf_end(e); } } closer{e};
  if (elf_kind(e) != ELF_K_ELF) return fail(err, "cubin: not an ELF object");
  size_t shstrndx;
  if (elf_getshdrstrndx(e, &shstrndx) != 0) return fail(err, "cubin: no section name table");
  for (Elf_Scn* s = elf_nextscn(e, nullptr); s; s = elf_nextscn(e, s)) {
    GElf_Shdr sh;
    if (!gelf_getshdr(s, &sh)) return fail(err, "cubin: bad section header");
    const char* name = elf_strptr(e, shstrndx, sh.sh_name);
    if (!name || std::strncmp(name, ".nv.info.", 9) != 0) continue;
    Elf_Data* d = elf_getdata(s, nullptr);
    if (!d || !d->d_buf) continue;
    const uint8_t* p = static_cast<const uint8_t*>(d->d_buf);
    size_t n = d->d_size, i = 0;
    std::vector<ParamInfo> params;
    bool any = false;
    while (i + 4 <= n) {
      uint8_t fmt = p[i], attr = p[i + 1];
      uint16_t v = rd<uint16_t>(p + i + 2);
      if (fmt == 0x04) {  // EIFMT_SVAL: u16 length, then payload
        if (v > n - i - 4) return fail(err, std::string("cubin: truncated attribute in ") + name);
        if (attr == 0x17 && v >= 12) {  // EIATTR_KPARAM_INFO
          uint16_t ordinal = rd<uint16_t>(p + i + 8), offset = rd<uint16_t>(p + i + 10);
          uint32_t tmp = rd<uint32_t>(p + i + 12);
          if (ordinal > 4096) return fail(err, "cubin: absurd parameter ordinal");
          if (params.size() <= ordinal) params.resize(ordinal + 1u);
          params[ordinal] = ParamInfo{offset, tmp >> 18};
          any = true;
        } else if (attr == 0x45 && v >= 12) {
          // The newer parameter record (nvcc 13, and whenever a parameter
          // outgrows the 14-bit size above): u32 index, u16 ordinal,
          // u16 offset, u32 size in bytes.
          uint16_t ordinal = rd<uint16_t>(p + i + 8), offset = rd<uint16_t>(p + i + 10);
          uint32_t size = rd<uint32_t>(p + i + 12);
          if (ordinal > 4096) return fail(err, "cubin: absurd parameter ordinal");
          if (params.size() <= ordinal) params.resize(ordinal + 1u);
          params[ordinal] = ParamInfo{offset, size};
          any = true;
        }
        i += 4 + v;
      } else if (fmt == 0x01 || fmt == 0x02 || fmt == 0x03) {
        i += 4;  // NVAL/BVAL/HVAL: value inline in the 2 bytes
      } else {
        return fail(err, std::string("cubin: unknown attribute format in ") + name);
      }
    }
    (void)any;
    out[name + 9] = std::move(params);
  }
  return true;
}

// ---- PTX .entry parameter lists ----
namespace {
struct Lex {
  std::string_view s;
  size_t i = 0;
  void skip() {
    for (;;) {
      while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) ++i;
      if (i + 1 < s.size() && s[i] == '/' && s[i + 1] == '/') {
        while (i < s.size() && s[i] != '\n') ++i;
      } else if (i + 1 < s.size() && s[i] == '/' && s[i + 1] == '*') {
        size_t e = s.find("*/", i + 2);
        i = e == std::string_view::npos ? s.size() : e + 2;
      } else {
        return;
      }
    }
  }
  static bool idch(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '$' ||
           c == '.' || c == '%';
  }
  std::string_view next() {
    skip();
    if (i >= s.size()) return {};
    size_t b = i;
    if (idch(s[i])) {
      while (i < s.size() && idch(s[i])) ++i;
    } else {
      ++i;
    }
    return s.substr(b, i - b);
  }
};

uint32_t type_size(std::string_view t) {
  if (t == ".u8" || t == ".s8" || t == ".b8") return 1;
  if (t == ".u16" || t == ".s16" || t == ".b16" || t == ".f16" || t == ".bf16") return 2;
  if (t == ".u32" || t == ".s32" || t == ".b32" || t == ".f32" || t == ".f16x2" || t == ".bf16x2") return 4;
  if (t == ".u64" || t == ".s64" || t == ".b64" || t == ".f64") return 8;
  return 0;
}
bool parse_uint(std::string_view t, uint64_t& v) {
  if (t.empty()) return false;
  v = 0;
  for (char c : t) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + uint64_t(c - '0');
    if (v > (1u << 30)) return false;
  }
  return true;
}
}  // namespace

bool ptx_kernel_params(std::string_view ptx, std::map<std::string, std::vector<ParamInfo>>& out, std::string* err) {
  Lex L{ptx};
  for (;;) {
    std::string_view t = L.next();
    if (t.empty()) return true;
    if (t != ".entry") continue;
    std::string name(L.next());
    if (name.empty()) return fail(err, "ptx: .entry without name");
    std::vector<ParamInfo> params;
    uint32_t off = 0;
    if (L.next() != "(") {  // no parameter list
      out[name] = params;
      continue;
    }
    for (;;) {
      t = L.next();
      if (t == ")") break;
      if (t != ".param") return fail(err, "ptx: expected .param in parameter list of " + name);
      uint32_t align = 0, esize = 0;
      uint64_t count = 1;
      bool after_ptr = false;  // `.ptr .space .align N`: N is the pointee's alignment
      for (;;) {
        t = L.next();
        if (t.empty()) return fail(err, "ptx: unterminated parameter list of " + name);
        if (t == ".align") {
          uint64_t a;
          if (!parse_uint(L.next(), a) || a == 0 || (a & (a - 1))) return fail(err, "ptx: bad .align in " + name);
          if (!after_ptr) align = uint32_t(a);
        } else if (t == ".ptr") {
          after_ptr = true;
        } else if (t == ".global" || t == ".const" || t == ".shared" || t == ".local") {
        } else if (uint32_t sz = type_size(t)) {
          esize = sz;
        } else if (t[0] == '.') {
          return fail(err, "ptx: unknown parameter qualifier " + std::string(t) + " in " + name);
        } else {
          break;  // parameter name
        }
      }
      if (!esize) return fail(err, "ptx: parameter without type in " + name);
      t = L.next();
      if (t == "[") {
        if (!parse_uint(L.next(), count) || L.next() != "]") return fail(err, "ptx: bad array parameter in " + name);
        t = L.next();
      }
      if (!align) align = esize;
      off = (off + align - 1) & ~(align - 1);
      uint64_t sz = count * esize;
      if (sz > (1u << 20)) return fail(err, "ptx: parameter too large in " + name);
      params.push_back({off, uint32_t(sz)});
      off += uint32_t(sz);
      if (t == ")") break;
      if (t != ",") return fail(err, "ptx: expected , or ) in parameter list of " + name);
    }
    out[name] = std::move(params);
  }
}

}  // namespace wh::fatbin
