// libnvidia-ml.so.1: NVML as tools and frameworks use it (torch.cuda's
// device count and memory/utilization queries, pynvml, gpustat), answered
// for the Wormhole device the process is attached to:
//   - devices, names, UUIDs, PCI ids, compute capability and memory come
//     from Wormhole's runtime (cudaGetDeviceProperties, cudaMemGetInfo:
//     the memory a session may use, under its quota);
//   - the process's own device memory and kernel time come from the server
//     (Op::NvmlUsage), from which utilization is computed over the
//     caller's sampling period, as NVML does;
//   - sensors, clocks, power, ECC, MIG, vGPU and every other NVML function
//     are weak stubs (gen_weak_stubs.sh) that log their name once and
//     return NVML_ERROR_NOT_SUPPORTED, as NVML does on a GPU without them.
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

#define NVML_NO_UNVERSIONED_FUNC_DEFS  // the legacy entry points are defined too
#include <nvml.h>

#include "wormhole/library_call.hpp"
#include "wormhole/proto/wire.hpp"

using namespace wh::proto;

struct nvmlDevice_st {
  int index;
};

namespace {

constexpr int kMaxDevices = 64;
nvmlDevice_st g_devices[kMaxDevices];
std::atomic<int> g_init{0};  // nvmlInit minus nvmlShutdown calls

// Utilization over the caller's sampling period: the previous sample of
// each device's kernel time (the first from nvmlInit).
struct Sample {
  uint64_t kernel_ns = 0, now_ns = 0;
};
std::mutex g_mu;
Sample g_last[kMaxDevices];

bool inited() { return g_init.load() > 0; }

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return -1;
  return std::min(n, kMaxDevices);
}

// NVML's answer for a device handle before any query: initialised, and a
// handle of one of the devices there are.
nvmlReturn_t check(nvmlDevice_t d) {
  if (!inited()) return NVML_ERROR_UNINITIALIZED;
  const bool valid = d && d >= g_devices && d < g_devices + kMaxDevices && d->index < std::max(device_count(), 0);
  return valid ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
}

// The runtime's answer for device `d`, with `d` current meanwhile (NVML's
// queries do not change the calling thread's device).
template <class F>
nvmlReturn_t on_device(nvmlDevice_t d, F f) {
  if (nvmlReturn_t r = check(d)) return r;
  int cur = 0;
  if (cudaGetDevice(&cur) != cudaSuccess) return NVML_ERROR_UNKNOWN;
  if (cur != d->index && cudaSetDevice(d->index) != cudaSuccess) return NVML_ERROR_GPU_IS_LOST;
  nvmlReturn_t r = f();
  if (cur != d->index) cudaSetDevice(cur);
  return r;
}

nvmlReturn_t props(nvmlDevice_t d, cudaDeviceProp* p) {
  if (nvmlReturn_t r = check(d)) return r;
  return cudaGetDeviceProperties(p, d->index) == cudaSuccess ? NVML_SUCCESS : NVML_ERROR_GPU_IS_LOST;
}

nvmlReturn_t copy_string(const std::string& s, char* out, unsigned int len) {
  if (!out) return NVML_ERROR_INVALID_ARGUMENT;
  if (s.size() + 1 > len) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(out, s.c_str(), s.size() + 1);
  return NVML_SUCCESS;
}

std::string uuid_string(const cudaDeviceProp& p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p.uuid.bytes);
  char b[64];
  std::snprintf(b, sizeof b, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
                u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
  return b;
}

std::string bus_id(const cudaDeviceProp& p) {
  char b[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
  std::snprintf(b, sizeof b, NVML_DEVICE_PCI_BUS_ID_FMT, unsigned(p.pciDomainID), unsigned(p.pciBusID),
                unsigned(p.pciDeviceID));
  return b;
}

// The server's figures for the session on device d (current while asked).
nvmlReturn_t usage(nvmlDevice_t d, NvmlUsageResp* rs) {
  return on_device(d, [&] {
    return wh::guest::lib::call<Op::NvmlUsage>(NvmlUsageReq{}, rs) == cudaSuccess ? NVML_SUCCESS
                                                                                  : NVML_ERROR_GPU_IS_LOST;
  });
}

std::string version_string() {
  int v = 0;
  cudaDriverGetVersion(&v);
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

nvmlReturn_t init() {
  const int n = device_count();
  if (n < 0) return NVML_ERROR_DRIVER_NOT_LOADED;  // no Wormhole server to reach
  for (int i = 0; i < kMaxDevices; i++) g_devices[i].index = i;
  if (g_init.fetch_add(1) == 0) {
    for (int i = 0; i < n; i++) {
      NvmlUsageResp rs{};
      if (usage(&g_devices[i], &rs) == NVML_SUCCESS) {
        std::lock_guard lk(g_mu);
        g_last[i] = {rs.kernel_ns, rs.now_ns};
      }
    }
  }
  return NVML_SUCCESS;
}

// The device whose `key` (its UUID or its PCI bus id) matches.
template <class Key>
nvmlReturn_t find_device(const char* want, nvmlDevice_t* device, Key key) {
  if (!inited()) return NVML_ERROR_UNINITIALIZED;
  if (!want || !device) return NVML_ERROR_INVALID_ARGUMENT;
  for (int i = 0; i < std::max(device_count(), 0); i++) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) == cudaSuccess && strcasecmp(key(p).c_str(), want) == 0) {
      *device = &g_devices[i];
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

// The processes using the device, as this process can know them: itself,
// with the device memory its session holds (other clients of the server
// are not shown to it).
template <class Info>
nvmlReturn_t running_processes(nvmlDevice_t d, unsigned int* count, Info* infos) {
  NvmlUsageResp rs{};
  if (nvmlReturn_t r = usage(d, &rs)) return r;
  if (!count) return NVML_ERROR_INVALID_ARGUMENT;
  const unsigned n = rs.device_bytes ? 1 : 0;
  if (*count < n) {
    *count = n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  *count = n;
  if (n) {
    if (!infos) return NVML_ERROR_INVALID_ARGUMENT;
    infos[0] = Info{};
    infos[0].pid = unsigned(getpid());
    infos[0].usedGpuMemory = rs.device_bytes;
    if constexpr (requires { infos[0].gpuInstanceId; }) infos[0].gpuInstanceId = infos[0].computeInstanceId = ~0u;
  }
  return NVML_SUCCESS;
}

}  // namespace

extern "C" {

void wh_nvml_unsupported(const char* name) {
  wh::guest::lib::log_once(std::string(name) + " is not forwarded by Wormhole: returning NVML_ERROR_NOT_SUPPORTED");
}

nvmlReturn_t nvmlInit_v2(void) { return init(); }
nvmlReturn_t nvmlInit(void) { return init(); }
nvmlReturn_t nvmlInitWithFlags(unsigned int) { return init(); }

nvmlReturn_t nvmlShutdown(void) {
  int v = g_init.load();
  while (v > 0 && !g_init.compare_exchange_weak(v, v - 1)) {
  }
  return v > 0 ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
}

const char* nvmlErrorString(nvmlReturn_t r) {
  switch (r) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
    default: return "Unknown Error";
  }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  if (!inited()) return NVML_ERROR_UNINITIALIZED;
  return copy_string(version_string(), version, length);
}

nvmlReturn_t nvmlSystemGetNVMLVersion(char* version, unsigned int length) {
  if (!inited()) return NVML_ERROR_UNINITIALIZED;
  return copy_string(version_string(), version, length);
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion(int* v) {
  if (!v) return NVML_ERROR_INVALID_ARGUMENT;
  return cudaDriverGetVersion(v) == cudaSuccess ? NVML_SUCCESS : NVML_ERROR_DRIVER_NOT_LOADED;
}
nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int* v) { return nvmlSystemGetCudaDriverVersion(v); }

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  if (!inited()) return NVML_ERROR_UNINITIALIZED;
  if (!count) return NVML_ERROR_INVALID_ARGUMENT;
  const int n = device_count();
  if (n < 0) return NVML_ERROR_GPU_IS_LOST;
  *count = unsigned(n);
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetCount(unsigned int* count) { return nvmlDeviceGetCount_v2(count); }

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  if (!inited()) return NVML_ERROR_UNINITIALIZED;
  if (!device || int(index) >= std::max(device_count(), 0)) return NVML_ERROR_INVALID_ARGUMENT;
  *device = &g_devices[index];
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t* device) {
  return nvmlDeviceGetHandleByIndex_v2(index, device);
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* device) {
  return find_device(uuid, device, uuid_string);
}
nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char* id, nvmlDevice_t* device) {
  return find_device(id, device, bus_id);
}
nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char* id, nvmlDevice_t* device) {
  return nvmlDeviceGetHandleByPciBusId_v2(id, device);
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t d, unsigned int* index) {
  if (nvmlReturn_t r = check(d)) return r;
  if (!index) return NVML_ERROR_INVALID_ARGUMENT;
  *index = unsigned(d->index);
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t d, unsigned int* minor) { return nvmlDeviceGetIndex(d, minor); }

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char* name, unsigned int length) {
  cudaDeviceProp p{};
  if (nvmlReturn_t r = props(d, &p)) return r;
  return copy_string(p.name, name, length);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char* uuid, unsigned int length) {
  cudaDeviceProp p{};
  if (nvmlReturn_t r = props(d, &p)) return r;
  return copy_string(uuid_string(p), uuid, length);
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t* pci) {
  cudaDeviceProp p{};
  if (nvmlReturn_t r = props(d, &p)) return r;
  if (!pci) return NVML_ERROR_INVALID_ARGUMENT;
  *pci = nvmlPciInfo_t{};
  pci->domain = unsigned(p.pciDomainID);
  pci->bus = unsigned(p.pciBusID);
  pci->device = unsigned(p.pciDeviceID);
  std::snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, NVML_DEVICE_PCI_BUS_ID_LEGACY_FMT, pci->domain, pci->bus,
                pci->device);
  std::snprintf(pci->busId, sizeof pci->busId, "%s", bus_id(p).c_str());
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t d, int* major, int* minor) {
  cudaDeviceProp p{};
  if (nvmlReturn_t r = props(d, &p)) return r;
  if (!major || !minor) return NVML_ERROR_INVALID_ARGUMENT;
  *major = p.major;
  *minor = p.minor;
  return NVML_SUCCESS;
}

// Memory as the session sees it: cudaMemGetInfo's total and free (the
// session's quota when it has one).
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t* m) {
  if (nvmlReturn_t r = check(d)) return r;
  if (!m) return NVML_ERROR_INVALID_ARGUMENT;
  return on_device(d, [&] {
    size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) != cudaSuccess) return NVML_ERROR_GPU_IS_LOST;
    *m = nvmlMemory_t{total, free, total - free};
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t* m) {
  if (m && m->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  nvmlMemory_t v1{};
  if (nvmlReturn_t r = nvmlDeviceGetMemoryInfo(d, m ? &v1 : nullptr)) return r;
  m->total = v1.total;
  m->reserved = 0;
  m->free = v1.free;
  m->used = v1.used;
  return NVML_SUCCESS;
}

// The share of the time since the previous query (the first: since
// nvmlInit) that the session's kernels ran, where the device measures
// their run time (the sim device; a GPU's backend does not yet).
// Memory-controller activity is not measured: 0.
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t* u) {
  NvmlUsageResp rs{};
  if (nvmlReturn_t r = usage(d, &rs)) return r;
  if (!u) return NVML_ERROR_INVALID_ARGUMENT;
  if (!rs.timed) {
    wh::guest::lib::log_once(
        "nvmlDeviceGetUtilizationRates: this device's backend does not time its kernels: returning "
        "NVML_ERROR_NOT_SUPPORTED");
    return NVML_ERROR_NOT_SUPPORTED;
  }
  std::lock_guard lk(g_mu);
  Sample& last = g_last[d->index];
  const uint64_t dt = rs.now_ns > last.now_ns ? rs.now_ns - last.now_ns : 0;
  const uint64_t dk = rs.kernel_ns > last.kernel_ns ? rs.kernel_ns - last.kernel_ns : 0;
  u->gpu = dt ? unsigned(std::min<uint64_t>(100, (dk * 100 + dt / 2) / dt)) : 0;
  u->memory = 0;
  last = {rs.kernel_ns, rs.now_ns};
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int* count, nvmlProcessInfo_t* infos) {
  return running_processes(d, count, infos);
}
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int* count,
                                                     nvmlProcessInfo_v2_t* infos) {
  return running_processes(d, count, infos);
}
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned int* count, nvmlProcessInfo_v1_t* infos) {
  return running_processes(d, count, infos);
}

// No graphics work runs on a Wormhole device.
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t d, unsigned int* count, nvmlProcessInfo_t*) {
  if (nvmlReturn_t r = check(d)) return r;
  if (!count) return NVML_ERROR_INVALID_ARGUMENT;
  *count = 0;
  return NVML_SUCCESS;
}

}  // extern "C"
