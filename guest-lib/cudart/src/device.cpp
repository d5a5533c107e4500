// libcudart.so.13 drop-in: device identity, limits, and the calls programs
// make in passing (profiler markers, persisting-L2 hints, bank-size
// configuration). The device description is fetched once and every
// attribute query is answered from it in the guest.
#include <cuda_profiler_api.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <utility>

#include "state.hpp"

using namespace wh::guest;
using namespace wh::proto;

namespace {

cudaError_t check_device(int device) {
  if (cudaError_t e = ensure_props(); e != cudaSuccess) return e;
  return device < 0 || device >= rt().device_count ? cudaErrorInvalidDevice : cudaSuccess;
}

// Stream attributes are scheduling and cache hints: a GPU honours them for
// performance only, and reads back what was set. The guest keeps them.
std::mutex g_attr_mu;
std::map<std::pair<uint64_t, int>, cudaStreamAttrValue> g_stream_attrs;

}  // namespace

extern "C" {

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (!value) return set_error(cudaErrorInvalidValue);
  if (cudaError_t e = check_device(device); e != cudaSuccess) return set_error(e);
  std::lock_guard lk(rt().mu);
  return attribute(device_desc(device), int(attr), value) ? cudaSuccess : set_error(cudaErrorInvalidValue);
}

cudaError_t cudaInitDevice(int device, unsigned int device_flags, unsigned int flags) {
  if (flags & ~unsigned(cudaInitDeviceFlagsAreValid)) return set_error(cudaErrorInvalidValue);
  if (cudaError_t e = check_device(device); e != cudaSuccess) return set_error(e);
  if (flags & cudaInitDeviceFlagsAreValid) return cudaSetDeviceFlags(device_flags);
  return cudaSuccess;
}

cudaError_t cudaChooseDevice(int* device, const cudaDeviceProp* prop) {
  if (!device || !prop) return set_error(cudaErrorInvalidValue);
  if (cudaError_t e = check_device(0); e != cudaSuccess) return set_error(e);
  *device = 0;  // one device per session: it is the best match
  return cudaSuccess;
}

// "domain:bus:device.function" in hex, as nvidia-smi and CUDA write it.
cudaError_t cudaDeviceGetPCIBusId(char* id, int len, int device) {
  if (!id || len <= 0) return set_error(cudaErrorInvalidValue);
  if (cudaError_t e = check_device(device); e != cudaSuccess) return set_error(e);
  std::lock_guard lk(rt().mu);
  const cudaDeviceProp& p = device_desc(device).props;
  std::snprintf(id, size_t(len), "%04x:%02x:%02x.0", p.pciDomainID, p.pciBusID, p.pciDeviceID);
  return cudaSuccess;
}

cudaError_t cudaDeviceGetByPCIBusId(int* device, const char* id) {
  if (!device || !id) return set_error(cudaErrorInvalidValue);
  if (cudaError_t e = check_device(0); e != cudaSuccess) return set_error(e);
  unsigned dom = 0, bus = 0, dev = 0, fn = 0;
  int n = 0;
  // domain:bus:device[.function] or bus:device[.function]
  if (std::sscanf(id, "%x:%x:%x%n", &dom, &bus, &dev, &n) == 3) {
    if (id[n] == '.' && std::sscanf(id + n, ".%x", &fn) != 1) return set_error(cudaErrorInvalidValue);
  } else if (std::sscanf(id, "%x:%x%n", &bus, &dev, &n) == 2) {
    dom = 0;
    if (id[n] == '.' && std::sscanf(id + n, ".%x", &fn) != 1) return set_error(cudaErrorInvalidValue);
  } else {
    return set_error(cudaErrorInvalidValue);
  }
  std::lock_guard lk(rt().mu);
  const cudaDeviceProp& p = rt().dev.props;
  if (dom != unsigned(p.pciDomainID) || bus != unsigned(p.pciBusID) || dev != unsigned(p.pciDeviceID))
    return set_error(cudaErrorInvalidDevice);
  *device = 0;
  return cudaSuccess;
}

cudaError_t cudaDeviceSetLimit(cudaLimit limit, size_t value) {
  WH_CONN(c);
  return set_error(c->call<Op::DeviceSetLimit>({int32_t(limit), 0, uint64_t(value)}));
}

cudaError_t cudaDeviceGetLimit(size_t* value, cudaLimit limit) {
  if (!value) return set_error(cudaErrorInvalidValue);
  WH_CONN(c);
  DeviceGetLimitResp rs{};
  cudaError_t e = c->call<Op::DeviceGetLimit>({int32_t(limit), 0}, &rs);
  if (e == cudaSuccess) *value = size_t(rs.value);
  return set_error(e);
}

// No profiler is attached to a forwarded device; CUDA then makes these no-ops.
cudaError_t cudaProfilerStart(void) { return cudaSuccess; }
cudaError_t cudaProfilerStop(void) { return cudaSuccess; }

// Nothing is ever marked persisting beyond the hint, so there is nothing to reset.
cudaError_t cudaCtxResetPersistingL2Cache(void) { return cudaSuccess; }

cudaError_t cudaStreamSetAttribute(cudaStream_t s, cudaStreamAttrID attr, const cudaStreamAttrValue* v) {
  if (!v) return set_error(cudaErrorInvalidValue);
  switch (attr) {
    case cudaStreamAttributeAccessPolicyWindow: {
      const cudaAccessPolicyWindow& w = v->accessPolicyWindow;
      int max_window = 0;
      if (cudaError_t e = cudaDeviceGetAttribute(&max_window, cudaDevAttrMaxAccessPolicyWindowSize, 0);
          e != cudaSuccess)
        return e;
      auto prop_ok = [](cudaAccessProperty p) {
        return p == cudaAccessPropertyNormal || p == cudaAccessPropertyStreaming || p == cudaAccessPropertyPersisting;
      };
      if (w.num_bytes > size_t(max_window) || !(w.hitRatio >= 0.f && w.hitRatio <= 1.f) || !prop_ok(w.hitProp) ||
          !prop_ok(w.missProp))
        return set_error(cudaErrorInvalidValue);
      break;
    }
    case cudaStreamAttributeSynchronizationPolicy:
      if (v->syncPolicy < cudaSyncPolicyAuto || v->syncPolicy > cudaSyncPolicyBlockingSync)
        return set_error(cudaErrorInvalidValue);
      break;
    case cudaStreamAttributePriority:
    case cudaStreamAttributeMemSyncDomainMap:
    case cudaStreamAttributeMemSyncDomain: break;
    default: return set_error(cudaErrorInvalidValue);
  }
  std::lock_guard lk(g_attr_mu);
  g_stream_attrs[{stream_handle(s), int(attr)}] = *v;
  return cudaSuccess;
}

cudaError_t cudaStreamGetAttribute(cudaStream_t s, cudaStreamAttrID attr, cudaStreamAttrValue* v) {
  if (!v) return set_error(cudaErrorInvalidValue);
  switch (attr) {
    case cudaStreamAttributeAccessPolicyWindow:
    case cudaStreamAttributeSynchronizationPolicy:
    case cudaStreamAttributePriority:
    case cudaStreamAttributeMemSyncDomainMap:
    case cudaStreamAttributeMemSyncDomain: break;
    default: return set_error(cudaErrorInvalidValue);
  }
  std::lock_guard lk(g_attr_mu);
  auto it = g_stream_attrs.find({stream_handle(s), int(attr)});
  if (it != g_stream_attrs.end()) {
    *v = it->second;
  } else {
    std::memset(v, 0, sizeof *v);  // the defaults: no window, auto policy, priority 0, domain 0
    if (attr == cudaStreamAttributeMemSyncDomainMap) v->memSyncDomainMap.remote = 1;
  }
  return cudaSuccess;
}

cudaError_t cudaStreamSetAttribute_ptsz(cudaStream_t s, cudaStreamAttrID a, const cudaStreamAttrValue* v) {
  return cudaStreamSetAttribute(s, a, v);
}
cudaError_t cudaStreamGetAttribute_ptsz(cudaStream_t s, cudaStreamAttrID a, cudaStreamAttrValue* v) {
  return cudaStreamGetAttribute(s, a, v);
}

// Devices of compute capability 5.0 and later have fixed 4-byte banks: CUDA
// accepts the setting and reports four-byte banks.
cudaError_t cudaDeviceSetSharedMemConfig(cudaSharedMemConfig config) {
  if (config < cudaSharedMemBankSizeDefault || config > cudaSharedMemBankSizeEightByte)
    return set_error(cudaErrorInvalidValue);
  return cudaSuccess;
}
cudaError_t cudaDeviceGetSharedMemConfig(cudaSharedMemConfig* config) {
  if (!config) return set_error(cudaErrorInvalidValue);
  *config = cudaSharedMemBankSizeFourByte;
  return cudaSuccess;
}
cudaError_t cudaFuncSetSharedMemConfig(const void* func, cudaSharedMemConfig config) {
  if (!func) return set_error(cudaErrorInvalidDeviceFunction);
  if (config < cudaSharedMemBankSizeDefault || config > cudaSharedMemBankSizeEightByte)
    return set_error(cudaErrorInvalidValue);
  return cudaSuccess;
}

}  // extern "C"
