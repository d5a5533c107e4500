// Wormhole's libnvJitLink.so.13: nvJitLink whose result every Wormhole device
// loads. NVIDIA's nvJitLink links for a GPU, and its cubin is SASS, which the
// sim device cannot run. Here the result is one PTX module:
//  * PTX inputs (given as PTX, or found in a fatbin, a host object or a
//    library) are linked in the guest by Wormhole's PTX linker (the sim
//    device's, wormhole/common/ptx_link.hpp);
//  * LTO-IR inputs go through NVIDIA's nvJitLink with -lto -ptx for the
//    virtual architecture (compute_XX), and its PTX joins the others.
// nvJitLinkGetLinkedCubin answers with that PTX (with its NUL), which
// cuModuleLoadData and cuLibraryLoadData take as readily as a cubin, and
// nvJitLinkGetLinkedPtx with the same text. NVIDIA's library is loaded from
// $WORMHOLE_NVJITLINK_LIB, else beside the process's libnvvm.so.4 (the pip
// wheels keep both in one folder, so LTO-IR and linker match), else from a
// pip wheel of the process's Python packages, the library path or the
// toolkit (real_library.hpp).
#include <dlfcn.h>
#include <link.h>
// The unversioned names are this library's own functions, not the header's inline wrappers.
#define NVJITLINK_NO_INLINE
#include <nvJitLink.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "inputs.hpp"
#include "wormhole/real_library.hpp"
#include "wormhole/common/ptx_link.hpp"

namespace {

using wh::nvjitlink::Kind;

struct Real {
  decltype(&__nvJitLinkCreate_13_0) create = nullptr;
  decltype(&__nvJitLinkDestroy_13_0) destroy = nullptr;
  decltype(&__nvJitLinkAddData_13_0) add_data = nullptr;
  decltype(&__nvJitLinkComplete_13_0) complete = nullptr;
  decltype(&__nvJitLinkGetLinkedPtxSize_13_0) ptx_size = nullptr;
  decltype(&__nvJitLinkGetLinkedPtx_13_0) ptx = nullptr;
  decltype(&__nvJitLinkGetErrorLogSize_13_0) error_log_size = nullptr;
  decltype(&__nvJitLinkGetErrorLog_13_0) error_log = nullptr;
  decltype(&nvJitLinkVersion) version = nullptr;
  std::string tried;
  bool ok = false;
};

std::string dir_of(const std::string& path) { return path.substr(0, path.rfind('/')); }

std::string own_dir() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&own_dir), &info) || !info.dli_fname) return {};
  return dir_of(info.dli_fname);
}

// The folder of a loaded libnvvm.so.4 (NVVM made the LTO-IR this links).
std::string nvvm_dir() {
  std::string found;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        const char* n = info->dlpi_name;
        if (n && std::strstr(n, "/libnvvm.so")) {
          *static_cast<std::string*>(out) = dir_of(n);
          return 1;
        }
        return 0;
      },
      &found);
  return found;
}

Real& real() {
  static Real r;
  static std::once_flag once;
  std::call_once(once, [] {
    std::vector<std::string> first;
    if (std::string d = nvvm_dir(); !d.empty()) first.push_back(d);
    const auto paths =
        wh::guest_real::candidates("libnvJitLink.so.13", "WORMHOLE_NVJITLINK_LIB", own_dir(), first, WH_CUDA_LIB64);
    for (auto& p : paths) {
      r.tried += (r.tried.empty() ? "" : ", ") + p;
      void* h = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!h) continue;
      if (dlsym(h, "wh_nvjitlink_dropin")) {  // another copy of this library
        dlclose(h);
        continue;
      }
#define WH_LOAD(field, sym) r.field = reinterpret_cast<decltype(r.field)>(dlsym(h, #sym));
      WH_LOAD(create, __nvJitLinkCreate_13_0)
      WH_LOAD(destroy, __nvJitLinkDestroy_13_0)
      WH_LOAD(add_data, __nvJitLinkAddData_13_0)
      WH_LOAD(complete, __nvJitLinkComplete_13_0)
      WH_LOAD(ptx_size, __nvJitLinkGetLinkedPtxSize_13_0)
      WH_LOAD(ptx, __nvJitLinkGetLinkedPtx_13_0)
      WH_LOAD(error_log_size, __nvJitLinkGetErrorLogSize_13_0)
      WH_LOAD(error_log, __nvJitLinkGetErrorLog_13_0)
      WH_LOAD(version, nvJitLinkVersion)
#undef WH_LOAD
      r.ok = r.create && r.destroy && r.add_data && r.complete && r.ptx_size && r.ptx && r.error_log_size &&
             r.error_log && r.version;
      if (r.ok) return;
      dlclose(h);
    }
  });
  return r;
}

struct Link {
  std::vector<std::string> options;
  std::string arch;  // the -arch value
  wh::nvjitlink::Found found;
  std::string info_log, error_log;
  std::string linked;  // the result: PTX text, without its NUL
  bool complete = false;
};

std::mutex g_mu;
std::set<Link*> g_links;

Link* handle_of(nvJitLinkHandle h) {
  std::lock_guard lk(g_mu);
  auto* l = reinterpret_cast<Link*>(h);
  return g_links.count(l) ? l : nullptr;
}

nvJitLinkResult fail(Link* l, nvJitLinkResult r, const std::string& msg) {
  l->error_log += "ERROR: " + msg + "\n";
  return r;
}

// NVIDIA's linker over the LTO-IR inputs: PTX out (-lto -ptx -arch=compute_XX).
nvJitLinkResult link_ltoir(Link* l, std::string* ptx) {
  Real& r = real();
  if (!r.ok)
    return fail(l, NVJITLINK_ERROR_INTERNAL,
                "LTO-IR input needs NVIDIA's libnvJitLink.so.13 (tried " + r.tried + "; set WORMHOLE_NVJITLINK_LIB)");
  std::vector<std::string> opts;
  bool lto = false;
  for (auto& o : l->options) {
    if (o == "-ptx") continue;
    if (o == "-lto") lto = true;
    opts.push_back(o.rfind("-arch=sm_", 0) == 0 ? "-arch=compute_" + o.substr(9) : o);
  }
  if (!lto) return fail(l, NVJITLINK_ERROR_LTO_NOT_ENABLED, "LTO-IR input requires -lto");
  opts.push_back("-ptx");
  std::vector<const char*> argv;
  for (auto& o : opts) argv.push_back(o.c_str());
  nvJitLinkHandle h = nullptr;
  nvJitLinkResult res = r.create(&h, uint32_t(argv.size()), argv.data());
  auto log_of = [&] {
    size_t n = 0;
    if (h && r.error_log_size(h, &n) == NVJITLINK_SUCCESS && n > 1) {
      std::string s(n, '\0');
      if (r.error_log(h, s.data()) == NVJITLINK_SUCCESS) l->error_log += s.c_str();
    }
  };
  if (res != NVJITLINK_SUCCESS) {
    log_of();
    if (h) r.destroy(&h);
    return res;
  }
  for (size_t i = 0; res == NVJITLINK_SUCCESS && i < l->found.ltoir.size(); i++) {
    auto& blob = l->found.ltoir[i];
    res = r.add_data(h, NVJITLINK_INPUT_LTOIR, blob.data(), blob.size(), ("ltoir" + std::to_string(i)).c_str());
  }
  if (res == NVJITLINK_SUCCESS) res = r.complete(h);
  size_t n = 0;
  if (res == NVJITLINK_SUCCESS) res = r.ptx_size(h, &n);
  if (res == NVJITLINK_SUCCESS) {
    ptx->assign(n, '\0');
    res = r.ptx(h, ptx->data());
    ptx->resize(strnlen(ptx->data(), n));
  }
  if (res != NVJITLINK_SUCCESS) log_of();
  r.destroy(&h);
  return res;
}

// -maxrregcount=N reaches the device as PTX's .maxnreg N on every kernel
// (ptxas would apply it to the SASS; a GPU's JIT and the sim device read it).
std::string with_maxnreg(const std::string& ptx, unsigned n) {
  std::string out;
  size_t at = 0;
  for (size_t e; (e = ptx.find(".entry", at)) != std::string::npos;) {
    size_t open = ptx.find('(', e), body = ptx.find('{', e);
    if (open == std::string::npos || body == std::string::npos || body < open) break;
    int depth = 0;
    size_t close = open;
    for (; close < body; close++) {
      if (ptx[close] == '(') depth++;
      if (ptx[close] == ')' && --depth == 0) break;
    }
    if (close >= body) break;
    out.append(ptx, at, close + 1 - at);
    if (ptx.substr(close, body - close).find(".maxnreg") == std::string::npos)
      out += "\n.maxnreg " + std::to_string(n);
    at = close + 1;
  }
  out.append(ptx, at, std::string::npos);
  return out;
}

nvJitLinkResult add(Link* l, nvJitLinkInputType type, const uint8_t* p, size_t n, const std::string& name) {
  if (l->complete) return fail(l, NVJITLINK_ERROR_INVALID_INPUT, "input added after nvJitLinkComplete");
  Kind kind;
  switch (type) {
    case NVJITLINK_INPUT_CUBIN: kind = Kind::Cubin; break;
    case NVJITLINK_INPUT_PTX: kind = Kind::Ptx; break;
    case NVJITLINK_INPUT_LTOIR: kind = Kind::Ltoir; break;
    case NVJITLINK_INPUT_FATBIN: kind = Kind::Fatbin; break;
    case NVJITLINK_INPUT_OBJECT: kind = Kind::Object; break;
    case NVJITLINK_INPUT_LIBRARY: kind = Kind::Library; break;
    case NVJITLINK_INPUT_ANY: kind = wh::nvjitlink::sniff(p, n); break;
    default: return fail(l, NVJITLINK_ERROR_INVALID_INPUT, name + ": input type not supported");
  }
  std::string err;
  const size_t skipped = l->found.sass_only.size();
  if (!wh::nvjitlink::collect(kind, p, n, name, &l->found, &err))
    return fail(l, kind == Kind::Unknown ? NVJITLINK_ERROR_UNRECOGNIZED_INPUT : NVJITLINK_ERROR_INVALID_INPUT, err);
  for (size_t i = skipped; i < l->found.sass_only.size(); i++)
    l->info_log += "info: " + l->found.sass_only[i] + " carries no PTX or LTO-IR (SASS only): not linked\n";
  return NVJITLINK_SUCCESS;
}

nvJitLinkResult log_size(nvJitLinkHandle h, size_t* size, bool error) {
  Link* l = handle_of(h);
  if (!l || !size) return NVJITLINK_ERROR_INVALID_INPUT;
  *size = (error ? l->error_log : l->info_log).size() + 1;
  return NVJITLINK_SUCCESS;
}

nvJitLinkResult log_copy(nvJitLinkHandle h, char* out, bool error) {
  Link* l = handle_of(h);
  if (!l || !out) return NVJITLINK_ERROR_INVALID_INPUT;
  const std::string& s = error ? l->error_log : l->info_log;
  std::memcpy(out, s.c_str(), s.size() + 1);
  return NVJITLINK_SUCCESS;
}

nvJitLinkResult linked_size(nvJitLinkHandle h, size_t* size) {
  Link* l = handle_of(h);
  if (!l || !size || !l->complete) return NVJITLINK_ERROR_INVALID_INPUT;
  *size = l->linked.size() + 1;
  return NVJITLINK_SUCCESS;
}

nvJitLinkResult linked_copy(nvJitLinkHandle h, void* out) {
  Link* l = handle_of(h);
  if (!l || !out || !l->complete) return NVJITLINK_ERROR_INVALID_INPUT;
  std::memcpy(out, l->linked.c_str(), l->linked.size() + 1);
  return NVJITLINK_SUCCESS;
}

}  // namespace

extern "C" {

// The handler of the weak stubs (gen_weak_stubs.sh): logs each function this
// library does not implement once.
__attribute__((visibility("hidden"))) void wh_nvjitlink_unsupported(const char* name) {
  static std::mutex mu;
  static std::set<std::string> seen;
  std::lock_guard lk(mu);
  if (seen.insert(name).second) std::fprintf(stderr, "wormhole: %s is not supported by Wormhole's nvJitLink\n", name);
}

// Marks this library (a copy of it on the library path is not NVIDIA's).
__attribute__((visibility("default"))) int wh_nvjitlink_dropin = 1;

nvJitLinkResult __nvJitLinkCreate_13_0(nvJitLinkHandle* handle, uint32_t n, const char* const* options) {
  if (!handle || (n && !options)) return NVJITLINK_ERROR_INVALID_INPUT;
  auto* l = new Link();
  for (uint32_t i = 0; i < n; i++) {
    if (!options[i]) {
      delete l;
      return NVJITLINK_ERROR_NULL_INPUT;
    }
    std::string o = options[i];
    if (o.rfind("-arch=", 0) == 0) l->arch = o.substr(6);
    l->options.push_back(std::move(o));
  }
  if (l->arch.empty()) {
    delete l;
    return NVJITLINK_ERROR_MISSING_ARCH;
  }
  std::lock_guard lk(g_mu);
  g_links.insert(l);
  *handle = reinterpret_cast<nvJitLinkHandle>(l);
  return NVJITLINK_SUCCESS;
}

nvJitLinkResult __nvJitLinkDestroy_13_0(nvJitLinkHandle* handle) {
  if (!handle) return NVJITLINK_ERROR_INVALID_INPUT;
  Link* l = handle_of(*handle);
  if (!l) return NVJITLINK_ERROR_INVALID_INPUT;
  {
    std::lock_guard lk(g_mu);
    g_links.erase(l);
  }
  delete l;
  *handle = nullptr;
  return NVJITLINK_SUCCESS;
}

nvJitLinkResult __nvJitLinkAddData_13_0(nvJitLinkHandle h, nvJitLinkInputType type, const void* data, size_t size,
                                        const char* name) {
  Link* l = handle_of(h);
  if (!l) return NVJITLINK_ERROR_INVALID_INPUT;
  if (!data || !size) return NVJITLINK_ERROR_NULL_INPUT;
  return add(l, type, static_cast<const uint8_t*>(data), size, name ? name : "<data>");
}

nvJitLinkResult __nvJitLinkAddFile_13_0(nvJitLinkHandle h, nvJitLinkInputType type, const char* path) {
  Link* l = handle_of(h);
  if (!l) return NVJITLINK_ERROR_INVALID_INPUT;
  if (!path) return NVJITLINK_ERROR_NULL_INPUT;
  std::ifstream f(path, std::ios::binary);
  if (!f) return fail(l, NVJITLINK_ERROR_INVALID_INPUT, std::string(path) + ": cannot be read");
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (bytes.empty()) return fail(l, NVJITLINK_ERROR_INVALID_INPUT, std::string(path) + ": empty");
  return add(l, type, bytes.data(), bytes.size(), path);
}

nvJitLinkResult __nvJitLinkComplete_13_0(nvJitLinkHandle h) {
  Link* l = handle_of(h);
  if (!l) return NVJITLINK_ERROR_INVALID_INPUT;
  if (l->complete) return NVJITLINK_SUCCESS;
  std::vector<std::string_view> units(l->found.ptx.begin(), l->found.ptx.end());
  std::string lto_ptx;
  if (!l->found.ltoir.empty()) {
    if (nvJitLinkResult r = link_ltoir(l, &lto_ptx); r != NVJITLINK_SUCCESS) return r;
    units.insert(units.begin(), lto_ptx);
  }
  if (units.empty()) return fail(l, NVJITLINK_ERROR_INVALID_INPUT, "nothing to link: no PTX or LTO-IR input");
  std::string err;
  if (!wh::ptx::link_ptx_units(units, &l->linked, &err)) return fail(l, NVJITLINK_ERROR_PTX_COMPILE, err);
  for (auto& o : l->options)
    if (o.rfind("-maxrregcount=", 0) == 0) {
      const unsigned long n = std::strtoul(o.c_str() + 14, nullptr, 10);
      if (n > 0 && n <= 255) l->linked = with_maxnreg(l->linked, unsigned(n));
    }
  l->complete = true;
  return NVJITLINK_SUCCESS;
}

nvJitLinkResult __nvJitLinkGetLinkedCubinSize_13_0(nvJitLinkHandle h, size_t* size) { return linked_size(h, size); }
nvJitLinkResult __nvJitLinkGetLinkedCubin_13_0(nvJitLinkHandle h, void* cubin) { return linked_copy(h, cubin); }
nvJitLinkResult __nvJitLinkGetLinkedPtxSize_13_0(nvJitLinkHandle h, size_t* size) { return linked_size(h, size); }
nvJitLinkResult __nvJitLinkGetLinkedPtx_13_0(nvJitLinkHandle h, char* ptx) { return linked_copy(h, ptx); }
nvJitLinkResult __nvJitLinkGetErrorLogSize_13_0(nvJitLinkHandle h, size_t* size) { return log_size(h, size, true); }
nvJitLinkResult __nvJitLinkGetErrorLog_13_0(nvJitLinkHandle h, char* log) { return log_copy(h, log, true); }
nvJitLinkResult __nvJitLinkGetInfoLogSize_13_0(nvJitLinkHandle h, size_t* size) { return log_size(h, size, false); }
nvJitLinkResult __nvJitLinkGetInfoLog_13_0(nvJitLinkHandle h, char* log) { return log_copy(h, log, false); }

// NVIDIA's version when its library is found (LTO-IR needs it); otherwise an
// error, so that callers which check (Numba) do not produce LTO-IR at all.
nvJitLinkResult nvJitLinkVersion(unsigned* major, unsigned* minor) {
  if (!major || !minor) return NVJITLINK_ERROR_INVALID_INPUT;
  Real& r = real();
  if (!r.ok) return NVJITLINK_ERROR_INTERNAL;
  return r.version(major, minor);
}

// The unversioned names (nvJitLink.h makes them inline wrappers; libraries
// that dlsym the library's functions ask for these).
nvJitLinkResult nvJitLinkCreate(nvJitLinkHandle* h, uint32_t n, const char** o) { return __nvJitLinkCreate_13_0(h, n, o); }
nvJitLinkResult nvJitLinkDestroy(nvJitLinkHandle* h) { return __nvJitLinkDestroy_13_0(h); }
nvJitLinkResult nvJitLinkAddData(nvJitLinkHandle h, nvJitLinkInputType t, const void* d, size_t n, const char* name) {
  return __nvJitLinkAddData_13_0(h, t, d, n, name);
}
nvJitLinkResult nvJitLinkAddFile(nvJitLinkHandle h, nvJitLinkInputType t, const char* path) {
  return __nvJitLinkAddFile_13_0(h, t, path);
}
nvJitLinkResult nvJitLinkComplete(nvJitLinkHandle h) { return __nvJitLinkComplete_13_0(h); }
nvJitLinkResult nvJitLinkGetLinkedCubinSize(nvJitLinkHandle h, size_t* n) { return linked_size(h, n); }
nvJitLinkResult nvJitLinkGetLinkedCubin(nvJitLinkHandle h, void* c) { return linked_copy(h, c); }
nvJitLinkResult nvJitLinkGetLinkedPtxSize(nvJitLinkHandle h, size_t* n) { return linked_size(h, n); }
nvJitLinkResult nvJitLinkGetLinkedPtx(nvJitLinkHandle h, char* p) { return linked_copy(h, p); }
nvJitLinkResult nvJitLinkGetErrorLogSize(nvJitLinkHandle h, size_t* n) { return log_size(h, n, true); }
nvJitLinkResult nvJitLinkGetErrorLog(nvJitLinkHandle h, char* s) { return log_copy(h, s, true); }
nvJitLinkResult nvJitLinkGetInfoLogSize(nvJitLinkHandle h, size_t* n) { return log_size(h, n, false); }
nvJitLinkResult nvJitLinkGetInfoLog(nvJitLinkHandle h, char* s) { return log_copy(h, s, false); }

}  // extern "C"
