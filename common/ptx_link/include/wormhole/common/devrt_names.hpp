// The device runtime's function names and signatures (libcudadevrt's, which
// the sim device's engine provides as builtins, devrt.hpp there): the PTX
// linkers leave these names to the device, and the engine's parser binds them.
#pragma once
#include <cstdint>
#include <string_view>

namespace wh::ptx::detail {

enum DevFn : uint8_t {
  DF_None,
  DF_GetParameterBuffer,    // (size_t alignment, size_t size) -> void*
  DF_GetParameterBufferV2,  // (void* func, dim3 grid, dim3 block, unsigned shmem) -> void*
  DF_LaunchDevice,          // (func, buffer, dim3 grid, dim3 block, unsigned shmem, stream) -> cudaError_t
  DF_LaunchDeviceV2,        // (buffer, stream) -> cudaError_t
  DF_GetLastError,
  DF_PeekAtLastError,
  DF_GetDevice,             // (int*)
  DF_GetDeviceCount,        // (int*)
  DF_DeviceGetAttribute,    // (int*, cudaDeviceAttr, int device)
  DF_StreamCreateWithFlags, // (cudaStream_t*, unsigned)
  DF_StreamDestroy,
  DF_StreamWaitEvent,       // (stream, event, unsigned)
  DF_EventCreateWithFlags,  // (cudaEvent_t*, unsigned)
  DF_EventRecord,           // (event, stream)
  DF_EventRecordWithFlags,  // (event, stream, unsigned)
  DF_EventDestroy,
  DF_Malloc,                // (void**, size_t): the device heap
  DF_Free,                  // (void*)
  DF_RuntimeGetVersion,     // (int*)
};

// The builtin a device-runtime function name stands for (the __cudaCDP2*
// names nvcc 12+ emits, the plain names of older PTX, the _ptsz variants),
// with its parameter and result sizes; DF_None if the name is not one.
struct DevFnInfo {
  DevFn fn = DF_None;
  uint8_t nargs = 0;
  uint8_t arg[6] = {};
  uint8_t ret = 0;  // result bytes (all return one value)
};
DevFnInfo devrt_function(std::string_view name);
// A name of the device runtime that libcudadevrt defines (so a link leaves
// it to the engine): a builtin, or one of __cudaCDP2* the engine does not
// provide (a call to it fails when it runs).
bool devrt_name(std::string_view name);

}  // namespace wh::ptx::detail
