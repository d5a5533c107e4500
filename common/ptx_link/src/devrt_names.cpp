// The device runtime's function names and signatures (devrt_names.hpp), apart
// from the engine: the guest's linkers (wh_ptx_link) leave these names to
// the device as the engine does.
#include <cstring>
#include <string>
#include <unordered_map>

#include "wormhole/common/devrt_names.hpp"

namespace wh::ptx::detail {

namespace {

struct Entry {
  const char* base;
  DevFn fn;
  uint8_t nargs;
  uint8_t args[6];
  uint8_t ret;
};

const std::unordered_map<std::string, DevFnInfo>& table() {
  static const std::unordered_map<std::string, DevFnInfo> t = [] {
    const Entry entries[] = {
        {"GetParameterBuffer", DF_GetParameterBuffer, 2, {8, 8}, 8},
        {"GetParameterBufferV2", DF_GetParameterBufferV2, 4, {8, 12, 12, 4}, 8},
        {"LaunchDevice", DF_LaunchDevice, 6, {8, 8, 12, 12, 4, 8}, 4},
        {"LaunchDevice_ptsz", DF_LaunchDevice, 6, {8, 8, 12, 12, 4, 8}, 4},
        {"LaunchDeviceV2", DF_LaunchDeviceV2, 2, {8, 8}, 4},
        {"LaunchDeviceV2_ptsz", DF_LaunchDeviceV2, 2, {8, 8}, 4},
        {"GetLastError", DF_GetLastError, 0, {}, 4},
        {"PeekAtLastError", DF_PeekAtLastError, 0, {}, 4},
        {"GetDevice", DF_GetDevice, 1, {8}, 4},
        {"GetDeviceCount", DF_GetDeviceCount, 1, {8}, 4},
        {"DeviceGetAttribute", DF_DeviceGetAttribute, 3, {8, 4, 4}, 4},
        {"StreamCreateWithFlags", DF_StreamCreateWithFlags, 2, {8, 4}, 4},
        {"StreamDestroy", DF_StreamDestroy, 1, {8}, 4},
        {"StreamWaitEvent", DF_StreamWaitEvent, 3, {8, 8, 4}, 4},
        {"StreamWaitEvent_ptsz", DF_StreamWaitEvent, 3, {8, 8, 4}, 4},
        {"EventCreateWithFlags", DF_EventCreateWithFlags, 2, {8, 4}, 4},
        {"EventRecord", DF_EventRecord, 2, {8, 8}, 4},
        {"EventRecord_ptsz", DF_EventRecord, 2, {8, 8}, 4},
        {"EventRecordWithFlags", DF_EventRecordWithFlags, 3, {8, 8, 4}, 4},
        {"EventRecordWithFlags_ptsz", DF_EventRecordWithFlags, 3, {8, 8, 4}, 4},
        {"EventDestroy", DF_EventDestroy, 1, {8}, 4},
        {"Malloc", DF_Malloc, 2, {8, 8}, 4},
        {"Free", DF_Free, 1, {8}, 4},
        {"RuntimeGetVersion", DF_RuntimeGetVersion, 1, {8}, 4},
    };
    std::unordered_map<std::string, DevFnInfo> m;
    for (const Entry& e : entries) {
      DevFnInfo i;
      i.fn = e.fn;
      i.nargs = e.nargs;
      std::memcpy(i.arg, e.args, sizeof i.arg);
      i.ret = e.ret;
      m.emplace(std::string("__cudaCDP2") + e.base, i);  // nvcc 12+ (CDP2)
      m.emplace(std::string("cuda") + e.base, i);        // older PTX, libcudadevrt's own names
    }
    return m;
  }();
  return t;
}

}  // namespace

DevFnInfo devrt_function(std::string_view name) {
  auto it = table().find(std::string(name));
  return it == table().end() ? DevFnInfo{} : it->second;
}

bool devrt_name(std::string_view name) {
  return devrt_function(name).fn != DF_None || name.starts_with("__cudaCDP2");
}

}  // namespace wh::ptx::detail
