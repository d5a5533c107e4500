// cudaGetDriverEntryPoint*: driver functions by name, answered by Wormhole's
// own driver library (libcuda.so.1 beside this one) through its
// cuGetProcAddress, so a runtime program that asks for a driver function
// (PyTorch does, for every driver call it makes) gets Wormhole's, never
// NVIDIA's driver.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <cstdlib>
#include <string>

#include "connection.hpp"

namespace {

using GetProc = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);

GetProc driver_get_proc() {
  static GetProc fn = [] {
    GetProc f = nullptr;
    Dl_info info{};
    // The driver drop-in in this library's directory: a libcuda.so.1 found
    // by soname alone could be NVIDIA's.
    if (dladdr(reinterpret_cast<void*>(&driver_get_proc), &info) && info.dli_fname) {
      std::string dir = info.dli_fname;
      dir.erase(dir.find_last_of('/') + 1);
      if (void* h = dlopen((dir + "libcuda.so.1").c_str(), RTLD_NOW)) {
        f = reinterpret_cast<GetProc>(dlsym(h, "cuGetProcAddress_v2"));
        // NVIDIA's runtime initialises the driver before it hands out a
        // driver function; callers rely on it (no cuInit of their own).
        if (auto init = reinterpret_cast<CUresult (*)(unsigned)>(dlsym(h, "cuInit"))) init(0);
      }
    }
    return f;
  }();
  return fn;
}

cudaError_t entry_point(const char* symbol, void** fn, unsigned version, unsigned long long flags,
                        cudaDriverEntryPointQueryResult* status, bool ptds_default) {
  if (status) *status = cudaDriverEntryPointSymbolNotFound;
  if (!symbol || !fn) return cudaErrorInvalidValue;
  *fn = nullptr;
  if (flags & ~(unsigned long long)(cudaEnableLegacyStream | cudaEnablePerThreadDefaultStream))
    return cudaErrorInvalidValue;
  if (flags == cudaEnableDefault && ptds_default) flags = cudaEnablePerThreadDefaultStream;
  GetProc get = driver_get_proc();
  if (!get) {
    wh::guest::log_once("cudaGetDriverEntryPoint: no libcuda.so.1 beside libcudart.so.13");
    return cudaErrorSymbolNotFound;
  }
  CUdriverProcAddressQueryResult r = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  CUresult e = get(symbol, fn, int(version), cuuint64_t(flags), &r);
  if (e == CUDA_ERROR_INVALID_VALUE) return cudaErrorInvalidValue;
  if (status)
    *status = r == CU_GET_PROC_ADDRESS_SUCCESS ? cudaDriverEntryPointSuccess
              : r == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT ? cudaDriverEntryPointVersionNotSufficent
                                                                : cudaDriverEntryPointSymbolNotFound;
  // WORMHOLE_VERBOSE: which driver functions a program looked for in vain.
  if (e != CUDA_SUCCESS && std::getenv("WORMHOLE_VERBOSE"))
    wh::guest::log_once(std::string("cudaGetDriverEntryPoint: ") + symbol + " (version " +
                        std::to_string(version) + ") is not in Wormhole's driver API");
  return e == CUDA_SUCCESS ? cudaSuccess : cudaErrorSymbolNotFound;
}

}  // namespace

extern "C" {

cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** fn, unsigned version,
                                             unsigned long long flags, cudaDriverEntryPointQueryResult* st) {
  return entry_point(symbol, fn, version, flags, st, false);
}
cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char* symbol, void** fn, unsigned version,
                                                  unsigned long long flags, cudaDriverEntryPointQueryResult* st) {
  return entry_point(symbol, fn, version, flags, st, true);
}
// The deprecated form resolves at this runtime's version.
cudaError_t cudaGetDriverEntryPoint(const char* symbol, void** fn, unsigned long long flags,
                                    cudaDriverEntryPointQueryResult* st) {
  return entry_point(symbol, fn, CUDART_VERSION, flags, st, false);
}
cudaError_t cudaGetDriverEntryPoint_ptsz(const char* symbol, void** fn, unsigned long long flags,
                                         cudaDriverEntryPointQueryResult* st) {
  return entry_point(symbol, fn, CUDART_VERSION, flags, st, true);
}

}  // extern "C"
