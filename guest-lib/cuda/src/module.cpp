// Modules and libraries, functions and kernels, launches, occupancy, and
// the PTX linker (cuLink*).
#include <strings.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "driver.hpp"
#include "wormhole/proto/occupancy.hpp"
#include "wormhole/common/fatbin.hpp"
#include "wormhole/common/ptx_link.hpp"

using namespace wh::driver;

namespace {

// JIT options: the server loads images as they are. The log buffers a
// caller passes are left empty (their sizes set to 0); everything else is a
// hint that does not change results.
void jit_options(unsigned n, CUjit_option* opts, void** vals) {
  if (!opts || !vals) return;
  for (unsigned i = 0; i < n; i++) switch (opts[i]) {
      case CU_JIT_INFO_LOG_BUFFER:
      case CU_JIT_ERROR_LOG_BUFFER:
        break;
      case CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES:
      case CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES:
        for (unsigned j = 0; j < n; j++)
          if ((opts[i] == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES && opts[j] == CU_JIT_INFO_LOG_BUFFER) ||
              (opts[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES && opts[j] == CU_JIT_ERROR_LOG_BUFFER))
            if (vals[j] && reinterpret_cast<uintptr_t>(vals[i]) > 0) static_cast<char*>(vals[j])[0] = 0;
        vals[i] = nullptr;
        break;
      case CU_JIT_WALL_TIME:
        std::memcpy(&vals[i], "\0\0\0\0", sizeof(float));
        break;
      default:
        break;
    }
}

CUresult load(const void* image, size_t size, void** out) {
  WH_INIT();
  if (!image || !out) return CUDA_ERROR_INVALID_VALUE;
  return cu(cudaError_t(wh_guest_module_load(image, size, out)));
}

// CUDA_MODULE_LOADING=EAGER, as NVIDIA's driver reads it: a library loads
// on the device when it is loaded. Otherwise (LAZY, the default) when one
// of its kernels or variables is first used.
bool eager_loading() {
  static const bool eager = [] {
    const char* v = std::getenv("CUDA_MODULE_LOADING");
    return v && strcasecmp(v, "EAGER") == 0;
  }();
  return eager;
}

// A library just loaded by the runtime: loaded on the device now when
// loading is eager (an image the device cannot run fails here).
CUresult library_loaded(int e, void** lib) {
  if (e == cudaSuccess && eager_loading()) {
    e = wh_guest_library_module(*lib);
    if (e != cudaSuccess) {
      wh_guest_module_unload(*lib);
      *lib = nullptr;
    }
  }
  return cu(cudaError_t(e));
}

CUresult load_file(const char* path, void** out, bool library = false) {
  WH_INIT();
  std::string bytes;
  if (!path || !out) return CUDA_ERROR_INVALID_VALUE;
  if (!read_file(path, &bytes)) return CUDA_ERROR_FILE_NOT_FOUND;
  // PTX text read from a file has no NUL of its own.
  if (bytes.size() >= 4 && std::memcmp(bytes.data(), "\x7f" "ELF", 4) != 0) {
    uint32_t magic;
    std::memcpy(&magic, bytes.data(), 4);
    if (magic != wh::fatbin::kFatbinMagic) bytes.push_back('\0');
  }
  if (library) return library_loaded(wh_guest_library_load(bytes.data(), bytes.size(), out), out);
  return cu(cudaError_t(wh_guest_module_load(bytes.data(), bytes.size(), out)));
}

CUresult function_of(void* module, const char* name, void** fn) {
  WH_INIT();
  if (!fn || !name) return CUDA_ERROR_INVALID_VALUE;
  if (!module) return CUDA_ERROR_INVALID_HANDLE;
  int e = wh_guest_module_function(module, name, fn);
  if (e == cudaErrorSymbolNotFound) return CUDA_ERROR_NOT_FOUND;
  return cu(cudaError_t(e));
}

CUresult global_of(void* module, const char* name, CUdeviceptr* dptr, size_t* bytes) {
  WH_INIT();
  if (!name) return CUDA_ERROR_INVALID_VALUE;
  if (!module) return CUDA_ERROR_INVALID_HANDLE;
  uint64_t d = 0;
  size_t n = 0;
  int e = wh_guest_module_global(module, name, &d, &n);
  if (e == cudaErrorInvalidSymbol || e == cudaErrorSymbolNotFound) return CUDA_ERROR_NOT_FOUND;
  if (e != cudaSuccess) return cu(cudaError_t(e));
  if (dptr) *dptr = d;
  if (bytes) *bytes = n;
  return CUDA_SUCCESS;
}

CUresult launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                unsigned shared, CUstream s, void** params, void** extra, unsigned flags) {
  WH_INIT();
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  const unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
  if (params && extra) return CUDA_ERROR_INVALID_VALUE;
  if (extra) {
    // { CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END }
    const void* buf = nullptr;
    size_t size = 0;
    bool have_size = false;
    for (size_t i = 0; i < 64; i += 2) {
      if (extra[i] == CU_LAUNCH_PARAM_END) break;
      if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) buf = extra[i + 1];
      else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE && extra[i + 1]) {
        size = *static_cast<const size_t*>(extra[i + 1]);
        have_size = true;
      } else
        return CUDA_ERROR_INVALID_VALUE;
      if (i + 2 >= 64) return CUDA_ERROR_INVALID_VALUE;
    }
    if (buf && !have_size) return CUDA_ERROR_INVALID_VALUE;
    return cu(cudaError_t(wh_guest_launch(f, grid, block, shared, s, nullptr, buf, size, 1, flags)));
  }
  return cu(cudaError_t(wh_guest_launch(f, grid, block, shared, s, params, nullptr, 0, 0, flags)));
}

CUresult func_attr(int* v, CUfunction_attribute a, CUfunction f) {
  WH_INIT();
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  cudaFuncAttributes fa;
  if (int e = wh_guest_function_attributes(f, &fa); e != cudaSuccess) return cu(cudaError_t(e));
  switch (a) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = fa.maxThreadsPerBlock; break;
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: *v = int(fa.sharedSizeBytes); break;
    case CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES: *v = int(fa.constSizeBytes); break;
    case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES: *v = int(fa.localSizeBytes); break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS: *v = fa.numRegs; break;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION: *v = fa.ptxVersion; break;
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION: *v = fa.binaryVersion; break;
    case CU_FUNC_ATTRIBUTE_CACHE_MODE_CA: *v = 0; break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *v = fa.maxDynamicSharedSizeBytes; break;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT: *v = -1; break;
    // The modeled device has no clusters.
    case CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
    case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
    case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE: *v = 0; break;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult func_set_attr(CUfunction f, CUfunction_attribute a, int v) {
  WH_INIT();
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  switch (a) {
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
      return cu(cudaError_t(wh_guest_function_set_max_dynamic_shared(f, v)));
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
      // A placement hint (-1..100 percent): results do not depend on it.
      if (v < -1 || v > 100) return CUDA_ERROR_INVALID_VALUE;
      if (!wh_guest_function_name(f)) return CUDA_ERROR_INVALID_HANDLE;
      return CUDA_SUCCESS;
    default:
      log_once("cuFuncSetAttribute: attribute " + std::to_string(int(a)) + " is not supported");
      return CUDA_ERROR_NOT_SUPPORTED;
  }
}

CUresult blocks_per_sm(int* n, CUfunction f, int block, size_t dyn_shared) {
  WH_INIT();
  if (!n || block <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  cudaFuncAttributes fa;
  if (int e = wh_guest_function_attributes(f, &fa); e != cudaSuccess) return cu(cudaError_t(e));
  cudaDeviceProp p;
  if (cudaError_t e = cudaGetDeviceProperties(&p, 0); e != cudaSuccess) return rt(e);
  *n = wh::proto::blocks_per_multiprocessor(p, fa.numRegs, fa.sharedSizeBytes + dyn_shared, block,
                                            fa.maxThreadsPerBlock);
  return CUDA_SUCCESS;
}

CUresult potential_block(int* min_grid, int* block_out, CUfunction f, CUoccupancyB2DSize b2s, size_t dyn,
                         int limit) {
  WH_INIT();
  if (!min_grid || !block_out) return CUDA_ERROR_INVALID_VALUE;
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  cudaFuncAttributes fa;
  if (int e = wh_guest_function_attributes(f, &fa); e != cudaSuccess) return cu(cudaError_t(e));
  cudaDeviceProp p;
  if (cudaError_t e = cudaGetDeviceProperties(&p, 0); e != cudaSuccess) return rt(e);
  int max_block = fa.maxThreadsPerBlock;
  if (limit > 0) max_block = std::min(max_block, limit);
  int best_block = 0, best_threads = 0, best_blocks = 0;
  for (int b = max_block; b > 0; b -= (b % p.warpSize ? b % p.warpSize : p.warpSize)) {
    size_t shared = b2s ? b2s(b) : dyn;
    int n = wh::proto::blocks_per_multiprocessor(p, fa.numRegs, fa.sharedSizeBytes + shared, b, fa.maxThreadsPerBlock);
    if (n * b > best_threads) best_threads = n * b, best_block = b, best_blocks = n;
  }
  *block_out = best_block;
  *min_grid = best_blocks * p.multiProcessorCount;
  return CUDA_SUCCESS;
}

// ---- the linker: PTX units collected and linked in the guest (the PTX
// linker the sim device uses, wormhole/common/ptx_link.hpp); cuLinkComplete's image
// is one PTX module with its NUL, which every device loads and which stays
// a valid image when the caller copies it (its size is its text's).
struct LinkState {
  std::vector<std::string> units;
  std::string image;
  char* error_log = nullptr;  // CU_JIT_ERROR_LOG_BUFFER given at cuLinkCreate
  size_t error_log_size = 0;
};
std::mutex g_link_mu;
std::vector<LinkState*> g_links;

LinkState* link_state(CUlinkState s) {
  std::lock_guard lk(g_link_mu);
  auto* l = reinterpret_cast<LinkState*>(s);
  return std::find(g_links.begin(), g_links.end(), l) != g_links.end() ? l : nullptr;
}

CUresult link_add(CUlinkState s, CUjitInputType type, const void* data, size_t size, const char* name) {
  WH_INIT();
  LinkState* l = link_state(s);
  if (!l) return CUDA_ERROR_INVALID_HANDLE;
  if (!data || !size) return CUDA_ERROR_INVALID_VALUE;
  const char* p = static_cast<const char*>(data);
  switch (type) {
    case CU_JIT_INPUT_PTX: {
      std::string text(p, strnlen(p, size));
      if (text.find(".version") == std::string::npos) return CUDA_ERROR_INVALID_PTX;
      l->units.push_back(std::move(text));
      return CUDA_SUCCESS;
    }
    case CU_JIT_INPUT_FATBINARY: {
      // Its best PTX: what the sim device runs and a GPU's driver links.
      std::vector<wh::fatbin::Entry> entries;
      std::string err;
      if (!wh::fatbin::parse(data, size, entries, &err)) return CUDA_ERROR_INVALID_IMAGE;
      const wh::fatbin::Entry* best = nullptr;
      for (auto& e : entries)
        if (e.kind == wh::fatbin::Entry::PTX && (!best || e.sm_arch > best->sm_arch)) best = &e;
      if (!best) {
        log_once(std::string("cuLinkAddData: ") + (name ? name : "a fatbin") + " carries no PTX");
        return CUDA_ERROR_NO_BINARY_FOR_GPU;
      }
      l->units.emplace_back(reinterpret_cast<const char*>(best->bytes.data()), best->bytes.size());
      return CUDA_SUCCESS;
    }
    default:
      log_once("cuLinkAddData: only PTX and fatbin input (with PTX) can be linked");
      return CUDA_ERROR_NOT_SUPPORTED;
  }
}

}  // namespace

extern "C" {

// ---- modules
CUresult cuModuleLoad(CUmodule* m, const char* path) { return load_file(path, reinterpret_cast<void**>(m)); }
CUresult cuModuleLoadData(CUmodule* m, const void* image) { return load(image, 0, reinterpret_cast<void**>(m)); }
CUresult cuModuleLoadDataEx(CUmodule* m, const void* image, unsigned n, CUjit_option* opts, void** vals) {
  jit_options(n, opts, vals);
  return load(image, 0, reinterpret_cast<void**>(m));
}
CUresult cuModuleLoadFatBinary(CUmodule* m, const void* fatbin) {
  return load(fatbin, 0, reinterpret_cast<void**>(m));
}
CUresult cuModuleUnload(CUmodule m) {
  WH_INIT();
  if (!m) return CUDA_ERROR_INVALID_HANDLE;
  return cu(cudaError_t(wh_guest_module_unload(m)));
}
CUresult cuModuleGetFunction(CUfunction* f, CUmodule m, const char* name) {
  return function_of(m, name, reinterpret_cast<void**>(f));
}
CUresult cuModuleGetGlobal_v2(CUdeviceptr* dptr, size_t* bytes, CUmodule m, const char* name) {
  return global_of(m, name, dptr, bytes);
}
CUresult cuModuleGetFunctionCount(unsigned* count, CUmodule m) {
  WH_INIT();
  if (!count) return CUDA_ERROR_INVALID_VALUE;
  if (!m) return CUDA_ERROR_INVALID_HANDLE;
  size_t n = 0;
  if (int e = wh_guest_module_function_names(m, nullptr, 0, &n); e != cudaSuccess) return cu(cudaError_t(e));
  *count = unsigned(n);
  return CUDA_SUCCESS;
}
CUresult cuModuleEnumerateFunctions(CUfunction* fns, unsigned cap, CUmodule m) {
  WH_INIT();
  if (!fns || !cap) return CUDA_ERROR_INVALID_VALUE;
  if (!m) return CUDA_ERROR_INVALID_HANDLE;
  std::vector<const char*> names(cap);
  size_t n = 0;
  if (int e = wh_guest_module_function_names(m, names.data(), cap, &n); e != cudaSuccess) return cu(cudaError_t(e));
  for (size_t i = 0; i < cap && i < n; i++)
    if (CUresult r = function_of(m, names[i], reinterpret_cast<void**>(&fns[i])); r != CUDA_SUCCESS) return r;
  return CUDA_SUCCESS;
}
CUresult cuModuleGetLoadingMode(CUmoduleLoadingMode* mode) {
  WH_INIT();
  if (!mode) return CUDA_ERROR_INVALID_VALUE;
  // Eager as far as the runtime asking can tell: a kernel it gets is
  // usable at once (a library's image is shipped on that first use).
  *mode = CU_MODULE_EAGER_LOADING;
  return CUDA_SUCCESS;
}

// ---- libraries: a library is a module, its kernels are its functions
CUresult cuLibraryLoadData(CUlibrary* lib, const void* code, CUjit_option* jo, void** jv, unsigned njo,
                           CUlibraryOption*, void**, unsigned) {
  jit_options(njo, jo, jv);
  WH_INIT();
  if (!code || !lib) return CUDA_ERROR_INVALID_VALUE;
  // Loaded on the device when first used (CUDA's lazy loading), unless
  // CUDA_MODULE_LOADING=EAGER.
  return library_loaded(wh_guest_library_load(code, 0, reinterpret_cast<void**>(lib)),
                        reinterpret_cast<void**>(lib));
}
CUresult cuLibraryLoadFromFile(CUlibrary* lib, const char* path, CUjit_option* jo, void** jv, unsigned njo,
                               CUlibraryOption*, void**, unsigned) {
  jit_options(njo, jo, jv);
  return load_file(path, reinterpret_cast<void**>(lib), true);
}
CUresult cuLibraryGetManaged(CUdeviceptr* dptr, size_t* bytes, CUlibrary lib, const char* name) {
  WH_INIT();
  if (!name) return CUDA_ERROR_INVALID_VALUE;
  if (!lib) return CUDA_ERROR_INVALID_HANDLE;
  void* p = nullptr;
  int e = wh_guest_module_managed(lib, name, &p, bytes);
  if (e == cudaErrorInvalidSymbol || e == cudaErrorSymbolNotFound) return CUDA_ERROR_NOT_FOUND;
  if (e != cudaSuccess) return cu(cudaError_t(e));
  if (dptr) *dptr = CUdeviceptr(uintptr_t(p));
  return CUDA_SUCCESS;
}
CUresult cuLibraryUnload(CUlibrary lib) { return cuModuleUnload(reinterpret_cast<CUmodule>(lib)); }
CUresult cuLibraryGetKernel(CUkernel* k, CUlibrary lib, const char* name) {
  return function_of(lib, name, reinterpret_cast<void**>(k));
}
CUresult cuLibraryGetModule(CUmodule* m, CUlibrary lib) {
  WH_INIT();
  if (!m) return CUDA_ERROR_INVALID_VALUE;
  if (!lib) return CUDA_ERROR_INVALID_HANDLE;
  if (int e = wh_guest_library_module(lib); e != cudaSuccess) return cu(cudaError_t(e));
  *m = reinterpret_cast<CUmodule>(lib);
  return CUDA_SUCCESS;
}
CUresult cuLibraryGetGlobal(CUdeviceptr* dptr, size_t* bytes, CUlibrary lib, const char* name) {
  return global_of(lib, name, dptr, bytes);
}
CUresult cuLibraryGetKernelCount(unsigned* count, CUlibrary lib) {
  return cuModuleGetFunctionCount(count, reinterpret_cast<CUmodule>(lib));
}
CUresult cuLibraryEnumerateKernels(CUkernel* ks, unsigned cap, CUlibrary lib) {
  return cuModuleEnumerateFunctions(reinterpret_cast<CUfunction*>(ks), cap, reinterpret_cast<CUmodule>(lib));
}
CUresult cuKernelGetFunction(CUfunction* f, CUkernel k) {
  WH_INIT();
  if (!f) return CUDA_ERROR_INVALID_VALUE;
  if (!k || !wh_guest_function_name(k)) return CUDA_ERROR_INVALID_HANDLE;
  *f = reinterpret_cast<CUfunction>(k);
  return CUDA_SUCCESS;
}
CUresult cuKernelGetLibrary(CUlibrary* lib, CUkernel k) {
  WH_INIT();
  if (!lib) return CUDA_ERROR_INVALID_VALUE;
  void* m = k ? wh_guest_module_of(k) : nullptr;
  if (!m) return CUDA_ERROR_INVALID_HANDLE;
  *lib = static_cast<CUlibrary>(m);
  return CUDA_SUCCESS;
}
CUresult cuKernelGetName(const char** name, CUkernel k) {
  WH_INIT();
  if (!name) return CUDA_ERROR_INVALID_VALUE;
  const char* n = k ? wh_guest_function_name(k) : nullptr;
  if (!n) return CUDA_ERROR_INVALID_HANDLE;
  *name = n;
  return CUDA_SUCCESS;
}
CUresult cuKernelGetAttribute(int* v, CUfunction_attribute a, CUkernel k, CUdevice d) {
  if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
  return func_attr(v, a, reinterpret_cast<CUfunction>(k));
}
CUresult cuKernelSetAttribute(CUfunction_attribute a, int v, CUkernel k, CUdevice d) {
  if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
  return func_set_attr(reinterpret_cast<CUfunction>(k), a, v);
}
CUresult cuKernelSetCacheConfig(CUkernel k, CUfunc_cache, CUdevice d) {
  WH_INIT();
  if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
  return k && wh_guest_function_name(k) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}
CUresult cuKernelGetParamInfo(CUkernel k, size_t index, size_t* offset, size_t* size) {
  WH_INIT();
  if (!k) return CUDA_ERROR_INVALID_HANDLE;
  return cu(cudaError_t(wh_guest_function_param(k, index, offset, size)));
}

// ---- functions
CUresult cuFuncGetAttribute(int* v, CUfunction_attribute a, CUfunction f) { return func_attr(v, a, f); }
CUresult cuFuncSetAttribute(CUfunction f, CUfunction_attribute a, int v) { return func_set_attr(f, a, v); }
CUresult cuFuncSetCacheConfig(CUfunction f, CUfunc_cache) {
  WH_INIT();
  return f && wh_guest_function_name(f) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}
CUresult cuFuncSetSharedMemConfig(CUfunction f, CUsharedconfig) {
  WH_INIT();
  return f && wh_guest_function_name(f) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}
CUresult cuFuncGetParamInfo(CUfunction f, size_t index, size_t* offset, size_t* size) {
  WH_INIT();
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  return cu(cudaError_t(wh_guest_function_param(f, index, offset, size)));
}
CUresult cuFuncGetName(const char** name, CUfunction f) { return cuKernelGetName(name, reinterpret_cast<CUkernel>(f)); }
CUresult cuFuncGetModule(CUmodule* m, CUfunction f) {
  return cuKernelGetLibrary(reinterpret_cast<CUlibrary*>(m), reinterpret_cast<CUkernel>(f));
}
CUresult cuFuncIsLoaded(CUfunctionLoadingState* state, CUfunction f) {
  WH_INIT();
  if (!state) return CUDA_ERROR_INVALID_VALUE;
  if (!f || !wh_guest_function_name(f)) return CUDA_ERROR_INVALID_HANDLE;
  *state = CU_FUNCTION_LOADING_STATE_LOADED;
  return CUDA_SUCCESS;
}
CUresult cuFuncLoad(CUfunction f) {
  WH_INIT();
  return f && wh_guest_function_name(f) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

// ---- launches
CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, CUstream s, void** params, void** extra) {
  return launch(f, gx, gy, gz, bx, by, bz, shared, s, params, extra, 0);
}
CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                             unsigned bz, unsigned shared, CUstream s, void** params, void** extra) {
  return launch(f, gx, gy, gz, bx, by, bz, shared, s, params, extra, 0);
}
CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                   unsigned bz, unsigned shared, CUstream s, void** params) {
  return launch(f, gx, gy, gz, bx, by, bz, shared, s, params, nullptr, kCooperative);
}
CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                        unsigned by, unsigned bz, unsigned shared, CUstream s, void** params) {
  return launch(f, gx, gy, gz, bx, by, bz, shared, s, params, nullptr, kCooperative);
}
CUresult cuLaunchKernelEx(const CUlaunchConfig* c, CUfunction f, void** params, void** extra) {
  WH_INIT();
  if (!c || (c->numAttrs && !c->attrs)) return CUDA_ERROR_INVALID_VALUE;
  unsigned flags = 0;
  std::vector<std::pair<CUevent, unsigned>> events;  // recorded after the kernel (see cudaLaunchKernelExC)
  for (unsigned i = 0; i < c->numAttrs; i++) {
    const CUlaunchAttribute& a = c->attrs[i];
    switch (a.id) {
      case CU_LAUNCH_ATTRIBUTE_IGNORE: break;
      case CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
        if (a.value.cooperative) flags |= kCooperative;
        break;
      // Programmatic dependent launch (see cudaLaunchKernelExC): the
      // device may overlap it with the previous kernel or run it after.
      case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION:
        if (a.value.programmaticStreamSerializationAllowed) flags |= kProgrammatic;
        break;
      case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT:
        if (!a.value.programmaticEvent.event || (a.value.programmaticEvent.flags & CU_EVENT_RECORD_EXTERNAL))
          return CUDA_ERROR_INVALID_VALUE;
        events.emplace_back(a.value.programmaticEvent.event, unsigned(a.value.programmaticEvent.flags));
        break;
      case CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT:
        if (!a.value.launchCompletionEvent.event || (a.value.launchCompletionEvent.flags & CU_EVENT_RECORD_EXTERNAL))
          return CUDA_ERROR_INVALID_VALUE;
        events.emplace_back(a.value.launchCompletionEvent.event, unsigned(a.value.launchCompletionEvent.flags));
        break;
      case CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE: break;  // a hint
      // Scheduling and cache hints: results do not depend on them.
      case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW:
      case CU_LAUNCH_ATTRIBUTE_PRIORITY:
      case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
      case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN:
      case CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT: break;
      case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
        if (a.value.clusterDim.x <= 1 && a.value.clusterDim.y <= 1 && a.value.clusterDim.z <= 1) break;
        [[fallthrough]];
      default:
        log_once("cuLaunchKernelEx: launch attribute " + std::to_string(int(a.id)) + " is not supported");
        return CUDA_ERROR_NOT_SUPPORTED;
    }
  }
  CUresult r = launch(f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY, c->blockDimZ,
                      c->sharedMemBytes, c->hStream, params, extra, flags);
  // A configuration the device refuses: cuLaunchKernel keeps the runtime's
  // number for NVIDIA's static runtime (to_cu), but callers of this newer
  // entry point (cuda-python, Numba) see the driver's CUDA_ERROR_INVALID_VALUE.
  if (r == CUresult(cudaErrorInvalidConfiguration)) r = CUDA_ERROR_INVALID_VALUE;
  for (auto& [ev, fl] : events)
    if (r == CUDA_SUCCESS) r = cuEventRecordWithFlags(ev, c->hStream, fl);
  return r;
}
CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* c, CUfunction f, void** params, void** extra) {
  return cuLaunchKernelEx(c, f, params, extra);
}

// ---- occupancy
CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int* n, CUfunction f, int block, size_t dyn) {
  return blocks_per_sm(n, f, block, dyn);
}
CUresult cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int* n, CUfunction f, int block, size_t dyn,
                                                              unsigned) {
  return blocks_per_sm(n, f, block, dyn);
}
CUresult cuOccupancyMaxPotentialBlockSize(int* min_grid, int* block, CUfunction f, CUoccupancyB2DSize b2s,
                                          size_t dyn, int limit) {
  return potential_block(min_grid, block, f, b2s, dyn, limit);
}
CUresult cuOccupancyMaxPotentialBlockSizeWithFlags(int* min_grid, int* block, CUfunction f, CUoccupancyB2DSize b2s,
                                                   size_t dyn, int limit, unsigned) {
  return potential_block(min_grid, block, f, b2s, dyn, limit);
}
CUresult cuOccupancyAvailableDynamicSMemPerBlock(size_t* bytes, CUfunction f, int blocks, int block) {
  WH_INIT();
  if (!bytes || blocks <= 0 || block <= 0) return CUDA_ERROR_INVALID_VALUE;
  cudaFuncAttributes fa;
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  if (int e = wh_guest_function_attributes(f, &fa); e != cudaSuccess) return cu(cudaError_t(e));
  cudaDeviceProp p;
  if (cudaError_t e = cudaGetDeviceProperties(&p, 0); e != cudaSuccess) return rt(e);
  size_t per = p.sharedMemPerMultiprocessor / size_t(blocks);
  per = std::min<size_t>(per, p.sharedMemPerBlockOptin);
  *bytes = per > fa.sharedSizeBytes ? per - fa.sharedSizeBytes : 0;
  return CUDA_SUCCESS;
}

// ---- the linker
CUresult cuLinkCreate_v2(unsigned n, CUjit_option* opts, void** vals, CUlinkState* out) {
  WH_INIT();
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  auto* l = new LinkState();
  if (opts && vals)
    for (unsigned i = 0; i < n; i++) {
      if (opts[i] == CU_JIT_ERROR_LOG_BUFFER) l->error_log = static_cast<char*>(vals[i]);
      if (opts[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES) l->error_log_size = reinterpret_cast<uintptr_t>(vals[i]);
    }
  if (!l->error_log) l->error_log_size = 0;
  jit_options(n, opts, vals);
  std::lock_guard lk(g_link_mu);
  g_links.push_back(l);
  *out = reinterpret_cast<CUlinkState>(l);
  return CUDA_SUCCESS;
}
CUresult cuLinkCreate(unsigned n, CUjit_option* opts, void** vals, CUlinkState* out) {
  return cuLinkCreate_v2(n, opts, vals, out);
}
CUresult cuLinkAddData_v2(CUlinkState s, CUjitInputType type, void* data, size_t size, const char* name,
                          unsigned n, CUjit_option* opts, void** vals) {
  jit_options(n, opts, vals);
  return link_add(s, type, data, size, name);
}
CUresult cuLinkAddData(CUlinkState s, CUjitInputType type, void* data, size_t size, const char* name, unsigned n,
                       CUjit_option* opts, void** vals) {
  return cuLinkAddData_v2(s, type, data, size, name, n, opts, vals);
}
CUresult cuLinkAddFile_v2(CUlinkState s, CUjitInputType type, const char* path, unsigned n, CUjit_option* opts,
                          void** vals) {
  WH_INIT();
  jit_options(n, opts, vals);
  std::string bytes;
  if (!path) return CUDA_ERROR_INVALID_VALUE;
  if (!read_file(path, &bytes)) return CUDA_ERROR_FILE_NOT_FOUND;
  return link_add(s, type, bytes.data(), bytes.size(), path);
}
CUresult cuLinkAddFile(CUlinkState s, CUjitInputType type, const char* path, unsigned n, CUjit_option* opts,
                       void** vals) {
  return cuLinkAddFile_v2(s, type, path, n, opts, vals);
}
CUresult cuLinkComplete(CUlinkState s, void** image, size_t* size) {
  WH_INIT();
  LinkState* l = link_state(s);
  if (!l) return CUDA_ERROR_INVALID_HANDLE;
  if (!image || !size) return CUDA_ERROR_INVALID_VALUE;
  if (l->units.empty()) return CUDA_ERROR_INVALID_VALUE;
  std::vector<std::string_view> units(l->units.begin(), l->units.end());
  std::string linked, err;
  if (!wh::ptx::link_ptx_units(units, &linked, &err)) {
    // The caller's error log gets the reason, as the driver's linker writes it.
    if (l->error_log_size) {
      size_t n = std::min(err.size(), l->error_log_size - 1);
      std::memcpy(l->error_log, err.data(), n);
      l->error_log[n] = 0;
    }
    log_once("cuLinkComplete: " + err);
    return CUDA_ERROR_INVALID_PTX;
  }
  std::lock_guard lk(g_link_mu);
  l->image = std::move(linked);
  l->image.push_back('\0');
  *image = l->image.data();
  *size = l->image.size();
  return CUDA_SUCCESS;
}
CUresult cuLinkDestroy(CUlinkState s) {
  WH_INIT();
  std::lock_guard lk(g_link_mu);
  auto* l = reinterpret_cast<LinkState*>(s);
  auto it = std::find(g_links.begin(), g_links.end(), l);
  if (it == g_links.end()) return CUDA_ERROR_INVALID_HANDLE;
  g_links.erase(it);
  delete l;
  return CUDA_SUCCESS;
}

}  // extern "C"
