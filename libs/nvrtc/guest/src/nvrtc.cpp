// Wormhole's libnvrtc.so.13: NVIDIA's NVRTC with the architecture turned
// into PTX. Programs that ask NVRTC for SASS of the device they run on
// (`--gpu-architecture=sm_80` from the reported compute capability, then
// nvrtcGetCUBIN and cuModuleLoadData) hand a device a cubin; the sim device
// runs PTX only. Here such a compile is made for the virtual architecture
// (compute_80), and nvrtcGetCUBIN(Size) answers with that PTX, which
// cuModuleLoadData takes as readily. Everything else is NVIDIA's library,
// loaded from $WORMHOLE_NVRTC_LIB, else from a pip wheel of the process's
// Python packages, else the library path or the toolkit (real_library.hpp).
#include <dlfcn.h>
#include <nvrtc.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "wormhole/real_library.hpp"

namespace {

#define WH_NVRTC_FUNCS(X)                                                                                        \
  X(nvrtcGetErrorString) X(nvrtcVersion) X(nvrtcGetNumSupportedArchs) X(nvrtcGetSupportedArchs)                \
  X(nvrtcCreateProgram) X(nvrtcDestroyProgram) X(nvrtcCompileProgram) X(nvrtcGetPTXSize) X(nvrtcGetPTX)         \
  X(nvrtcGetCUBINSize) X(nvrtcGetCUBIN) X(nvrtcGetLTOIRSize) X(nvrtcGetLTOIR) X(nvrtcGetOptiXIRSize)             \
  X(nvrtcGetOptiXIR) X(nvrtcGetProgramLogSize) X(nvrtcGetProgramLog) X(nvrtcAddNameExpression)                  \
  X(nvrtcGetLoweredName) X(nvrtcGetPCHHeapSize) X(nvrtcSetPCHHeapSize) X(nvrtcGetPCHCreateStatus)               \
  X(nvrtcGetPCHHeapSizeRequired) X(nvrtcSetFlowCallback)

struct Real {
#define WH_PTR(f) decltype(&::f) f = nullptr;
  WH_NVRTC_FUNCS(WH_PTR)
#undef WH_PTR
  bool ok = false;
};

// This library's own directory: never the "real" one.
std::string own_dir() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&own_dir), &info) || !info.dli_fname) return {};
  std::string p = info.dli_fname;
  return p.substr(0, p.rfind('/'));
}

void* open_real(std::string* tried) {
  const auto paths = wh::guest_real::candidates("libnvrtc.so.13", "WORMHOLE_NVRTC_LIB", own_dir(), {}, WH_CUDA_LIB64);
  for (auto& p : paths) {
    if (!tried->empty()) *tried += ", ";
    *tried += p;
    void* h = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h && !dlsym(h, "wh_nvrtc_dropin")) return h;  // not another copy of this library
    if (h) dlclose(h);
  }
  return nullptr;
}

Real& real() {
  static Real r;
  static std::once_flag once;
  std::call_once(once, [] {
    std::string tried;
    void* h = open_real(&tried);
    if (!h) {
      std::fprintf(stderr, "wormhole: NVIDIA's libnvrtc.so.13 not found (tried %s; set WORMHOLE_NVRTC_LIB)\n",
                   tried.c_str());
      return;
    }
#define WH_LOAD(f) r.f = reinterpret_cast<decltype(r.f)>(dlsym(h, #f));
    WH_NVRTC_FUNCS(WH_LOAD)
#undef WH_LOAD
    r.ok = r.nvrtcCompileProgram && r.nvrtcGetPTX && r.nvrtcGetPTXSize && r.nvrtcGetErrorString;
  });
  return r;
}

// Programs whose compile was turned from sm_XX into compute_XX.
std::mutex g_mu;
std::set<nvrtcProgram> g_as_ptx;

// "-arch=sm_80" / "--gpu-architecture=sm_80" (or the value alone, after a
// bare "-arch") -> the same with compute_80 ("sm_90a" -> "compute_90a");
// true when it was such an option.
bool to_virtual(std::string* opt) {
  for (const char* key : {"-arch=", "--gpu-architecture=", ""}) {
    size_t n = std::strlen(key);
    if (opt->compare(0, n, key) == 0 && opt->compare(n, 3, "sm_") == 0) {
      *opt = opt->substr(0, n) + "compute_" + opt->substr(n + 3);
      return true;
    }
  }
  return false;
}

}  // namespace

extern "C" {

// Marks this library (a copy of it on the library path is not NVIDIA's).
int wh_nvrtc_dropin = 1;

#define WH_CALL(f, ...) (real().f ? real().f(__VA_ARGS__) : NVRTC_ERROR_INTERNAL_ERROR)

const char* nvrtcGetErrorString(nvrtcResult r) {
  return real().nvrtcGetErrorString ? real().nvrtcGetErrorString(r) : "NVRTC_ERROR_INTERNAL_ERROR";
}
nvrtcResult nvrtcVersion(int* major, int* minor) { return WH_CALL(nvrtcVersion, major, minor); }
nvrtcResult nvrtcGetNumSupportedArchs(int* n) { return WH_CALL(nvrtcGetNumSupportedArchs, n); }
nvrtcResult nvrtcGetSupportedArchs(int* a) { return WH_CALL(nvrtcGetSupportedArchs, a); }
nvrtcResult nvrtcCreateProgram(nvrtcProgram* p, const char* src, const char* name, int n, const char* const* headers,
                               const char* const* include_names) {
  return WH_CALL(nvrtcCreateProgram, p, src, name, n, headers, include_names);
}
nvrtcResult nvrtcDestroyProgram(nvrtcProgram* p) {
  if (p) {
    std::lock_guard lk(g_mu);
    g_as_ptx.erase(*p);
  }
  return WH_CALL(nvrtcDestroyProgram, p);
}
nvrtcResult nvrtcCompileProgram(nvrtcProgram p, int n, const char* const* options) {
  if (n < 0 || (n > 0 && !options)) return WH_CALL(nvrtcCompileProgram, p, n, options);
  std::vector<std::string> opts(options, options + n);
  bool rewritten = false;
  for (size_t i = 0; i < opts.size(); i++) {
    const bool value_of_arch = i > 0 && (opts[i - 1] == "-arch" || opts[i - 1] == "--gpu-architecture");
    if (opts[i].rfind("-", 0) == 0 || value_of_arch) rewritten |= to_virtual(&opts[i]);
  }
  std::vector<const char*> ptrs;
  for (auto& o : opts) ptrs.push_back(o.c_str());
  nvrtcResult r = WH_CALL(nvrtcCompileProgram, p, n, ptrs.data());
  std::lock_guard lk(g_mu);
  if (rewritten) g_as_ptx.insert(p);
  else g_as_ptx.erase(p);
  return r;
}
nvrtcResult nvrtcGetPTXSize(nvrtcProgram p, size_t* n) { return WH_CALL(nvrtcGetPTXSize, p, n); }
nvrtcResult nvrtcGetPTX(nvrtcProgram p, char* ptx) { return WH_CALL(nvrtcGetPTX, p, ptx); }
static bool as_ptx(nvrtcProgram p) {
  std::lock_guard lk(g_mu);
  return g_as_ptx.count(p) != 0;
}
// The PTX (with its NUL) stands in for the cubin of a program compiled for sm_XX.
nvrtcResult nvrtcGetCUBINSize(nvrtcProgram p, size_t* n) {
  return as_ptx(p) ? WH_CALL(nvrtcGetPTXSize, p, n) : WH_CALL(nvrtcGetCUBINSize, p, n);
}
nvrtcResult nvrtcGetCUBIN(nvrtcProgram p, char* cubin) {
  return as_ptx(p) ? WH_CALL(nvrtcGetPTX, p, cubin) : WH_CALL(nvrtcGetCUBIN, p, cubin);
}
nvrtcResult nvrtcGetLTOIRSize(nvrtcProgram p, size_t* n) { return WH_CALL(nvrtcGetLTOIRSize, p, n); }
nvrtcResult nvrtcGetLTOIR(nvrtcProgram p, char* ir) { return WH_CALL(nvrtcGetLTOIR, p, ir); }
nvrtcResult nvrtcGetOptiXIRSize(nvrtcProgram p, size_t* n) { return WH_CALL(nvrtcGetOptiXIRSize, p, n); }
nvrtcResult nvrtcGetOptiXIR(nvrtcProgram p, char* ir) { return WH_CALL(nvrtcGetOptiXIR, p, ir); }
nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram p, size_t* n) { return WH_CALL(nvrtcGetProgramLogSize, p, n); }
nvrtcResult nvrtcGetProgramLog(nvrtcProgram p, char* log) { return WH_CALL(nvrtcGetProgramLog, p, log); }
nvrtcResult nvrtcAddNameExpression(nvrtcProgram p, const char* const name) {
  return WH_CALL(nvrtcAddNameExpression, p, name);
}
nvrtcResult nvrtcGetLoweredName(nvrtcProgram p, const char* const name, const char** lowered) {
  return WH_CALL(nvrtcGetLoweredName, p, name, lowered);
}
nvrtcResult nvrtcGetPCHHeapSize(size_t* n) { return WH_CALL(nvrtcGetPCHHeapSize, n); }
nvrtcResult nvrtcSetPCHHeapSize(size_t n) { return WH_CALL(nvrtcSetPCHHeapSize, n); }
nvrtcResult nvrtcGetPCHCreateStatus(nvrtcProgram p) { return WH_CALL(nvrtcGetPCHCreateStatus, p); }
nvrtcResult nvrtcGetPCHHeapSizeRequired(nvrtcProgram p, size_t* n) {
  return WH_CALL(nvrtcGetPCHHeapSizeRequired, p, n);
}
nvrtcResult nvrtcSetFlowCallback(nvrtcProgram p, int (*cb)(void*, void*), void* payload) {
  return WH_CALL(nvrtcSetFlowCallback, p, cb, payload);
}

}  // extern "C"
