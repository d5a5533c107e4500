// cudaGetErrorName / cudaGetErrorString and the not-forwarded notice.
#include <cuda_runtime_api.h>

#include <string>

#include "connection.hpp"

namespace {
struct ErrName {
  int code;
  const char* name;
};
constexpr ErrName kNames[] = {
  {0, "cudaSuccess"},
#include "cuda_errors.inc"
};
const char* describe(int code) {
  switch (code) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidDeviceFunction: return "invalid device function";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorAssert: return "device-side assert triggered";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected (is wormhole-server running?)";
    case cudaErrorDevicesUnavailable: return "CUDA-capable device(s) is/are busy or unavailable (link to wormhole-server lost)";
    case cudaErrorNotSupported: return "operation not supported (not forwarded by Wormhole)";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorInvalidSymbol: return "invalid device symbol";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorInvalidPitchValue: return "invalid pitch argument";
    case cudaErrorMissingConfiguration: return "__global__ function call is not configured";
    default: return nullptr;
  }
}
}  // namespace

extern "C" {

const char* cudaGetErrorName(cudaError_t e) {
  for (const auto& n : kNames)
    if (n.code == int(e)) return n.name;
  return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t e) {
  if (const char* d = describe(int(e))) return d;
  return cudaGetErrorName(e);
}

// Called by the generated weak stubs of functions Wormhole does not forward.
void wh_unsupported(const char* name) {
  wh::guest::log_once(std::string(name) + " is not forwarded by Wormhole: returning cudaErrorNotSupported");
}

}  // extern "C"
