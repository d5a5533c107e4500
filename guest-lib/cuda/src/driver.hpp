// Wormhole's libcuda.so.1: the CUDA driver API on top of Wormhole's
// libcudart.so.13 (this process's one connection and server session). The
// driver's primary context is the runtime's context: device pointers,
// streams, events and graphs are the runtime's handles and pass between the
// two APIs unchanged. What the runtime API cannot express (modules and
// functions as handles, launches of a module's function, packed parameter
// buffers) comes through libcudart's wh_guest_* exports (wormhole/guest_abi.h,
// defined in export.cpp there).
//
// Every function is defined under its literal exported name (cuMemAlloc_v2,
// cuMemcpyHtoD_v2_ptds, ...): cuda.h's name macros are off here.
#pragma once

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "wormhole/guest_abi.h"  // libcudart.so.13 (Wormhole's)

namespace wh::driver {

// cudaError_t -> CUresult (the numbers differ below 100 and in a few places).
CUresult to_cu(int cuda_error);
inline CUresult cu(cudaError_t e) { return to_cu(int(e)); }
// A runtime call made on the driver API's behalf: its error must not stay
// behind as the runtime's last error (cudaGetLastError), which the driver
// API never sets.
inline CUresult rt(cudaError_t e) {
  if (e != cudaSuccess) cudaGetLastError();
  return cu(e);
}
// cuInit has been called (every other call returns CUDA_ERROR_NOT_INITIALIZED before).
bool initialized();
#define WH_INIT()                                  \
  do {                                             \
    if (!::wh::driver::initialized()) return CUDA_ERROR_NOT_INITIALIZED; \
  } while (0)
// Context-local storage (export_tables.cpp): runs and drops the destructors
// its users registered for `ctx`, when that context is reset.
void context_storage_destroyed(CUcontext ctx);
// The single context's handle (the primary context) and its checks.
CUcontext primary();
bool valid_context(CUcontext c);
// True when this library's runtime functions bind to a libcudart.so.13
// that is not Wormhole's (NVIDIA's, loaded into the process first): every
// driver call would re-enter that runtime, which may be calling us, so the
// entry points a runtime starts with refuse instead (and say why, once).
bool foreign_runtime();
// Logs once per message to stderr (unsupported options and the like).
void log_once(const std::string& msg);
// Reads a whole file (cuModuleLoad, cuLibraryLoadFromFile, cuLinkAddFile).
bool read_file(const char* path, std::string* out);
// The launch flags of libcudart's Launch request (proto kLaunchCooperative,
// kLaunchProgrammatic).
constexpr unsigned kCooperative = 1;
constexpr unsigned kProgrammatic = 2;

}  // namespace wh::driver
