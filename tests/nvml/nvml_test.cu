// NVML through Wormhole's libnvidia-ml.so.1, as a monitoring tool or a
// framework's start-up uses it, checked against what the CUDA runtime says
// of the same device: count, name, UUID, PCI id, compute capability,
// memory (it moves with cudaMalloc), the process list, utilization (high
// while a kernel runs, near zero while idle), and the errors NVML gives for
// bad arguments, stale initialisation and functions Wormhole does not have.
#include <cuda_runtime.h>
#include <nvml.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "wh_check.cuh"

#define NV(x) WH_REQUIRE(x, NVML_SUCCESS, nvmlErrorString(r_))
#define EXPECT(c)                                                   \
  do {                                                              \
    if (!(c)) {                                                     \
      std::printf("FAIL %s:%d %s\n", __FILE__, __LINE__, #c);       \
      std::exit(1);                                                 \
    }                                                               \
  } while (0)

// Spins for about `cycles` clock ticks per thread.
__global__ void busy(long long cycles, int* out) {
  long long start = clock64();
  int acc = 0;
  while (clock64() - start < cycles) acc += threadIdx.x;
  if (acc == -1) *out = acc;  // never: keeps the loop
}

static double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

static void check_utilization(nvmlDevice_t dev, int* buf) {
  // Utilization over the caller's sampling period: busy, then idle. The
  // cuda backend does not time its kernels (the stacked run): not supported.
  nvmlUtilization_t u;
  const char* stacked = std::getenv("WH_TEST_STACKED");
  if (stacked && std::strcmp(stacked, "0") != 0) {
    EXPECT(nvmlDeviceGetUtilizationRates(dev, &u) == NVML_ERROR_NOT_SUPPORTED);
    return;
  }
  NV(nvmlDeviceGetUtilizationRates(dev, &u));  // starts a period
  int clock_khz = 0;
  CK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  auto t0 = std::chrono::steady_clock::now();
  long long cycles = (long long)clock_khz * 50;  // 50 ms of device clock per launch
  int launches = 0;
  while (seconds_since(t0) < 0.3 || launches < 2) {
    busy<<<1, 32>>>(cycles, buf);
    CK(cudaDeviceSynchronize());
    launches++;
  }
  NV(nvmlDeviceGetUtilizationRates(dev, &u));
  std::printf("nvml: utilization %u%% after %d kernels in %.2f s\n", u.gpu, launches, seconds_since(t0));
  EXPECT(u.gpu >= 50 && u.gpu <= 100);
  usleep(300 * 1000);
  NV(nvmlDeviceGetUtilizationRates(dev, &u));
  std::printf("nvml: utilization %u%% after 0.3 s idle\n", u.gpu);
  EXPECT(u.gpu <= 10);
}

int main() {
  // Before nvmlInit: every device query is refused.
  unsigned count = 0;
  EXPECT(nvmlDeviceGetCount_v2(&count) == NVML_ERROR_UNINITIALIZED);
  NV(nvmlInit_v2());

  int cuda_count = 0;
  CK(cudaGetDeviceCount(&cuda_count));
  NV(nvmlDeviceGetCount_v2(&count));
  EXPECT(int(count) == cuda_count && count >= 1);

  nvmlDevice_t dev;
  NV(nvmlDeviceGetHandleByIndex_v2(0, &dev));
  EXPECT(nvmlDeviceGetHandleByIndex_v2(count, &dev) == NVML_ERROR_INVALID_ARGUMENT);
  NV(nvmlDeviceGetHandleByIndex_v2(0, &dev));
  unsigned index = 99;
  NV(nvmlDeviceGetIndex(dev, &index));
  EXPECT(index == 0);

  cudaDeviceProp p{};
  CK(cudaGetDeviceProperties(&p, 0));
  char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
  NV(nvmlDeviceGetName(dev, name, sizeof name));
  EXPECT(std::strcmp(name, p.name) == 0);
  EXPECT(nvmlDeviceGetName(dev, name, 2) == NVML_ERROR_INSUFFICIENT_SIZE);

  // The UUID is the runtime's, in NVML's notation, and finds the device.
  char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
  NV(nvmlDeviceGetUUID(dev, uuid, sizeof uuid));
  char want[8];
  std::snprintf(want, sizeof want, "%02x", unsigned(static_cast<unsigned char>(p.uuid.bytes[0])));
  EXPECT(std::strncmp(uuid, "GPU-", 4) == 0 && std::strncmp(uuid + 4, want, 2) == 0 && std::strlen(uuid) == 40);
  nvmlDevice_t by_uuid = nullptr;
  NV(nvmlDeviceGetHandleByUUID(uuid, &by_uuid));
  EXPECT(by_uuid == dev);
  EXPECT(nvmlDeviceGetHandleByUUID("GPU-00000000-0000-0000-0000-000000000000", &by_uuid) == NVML_ERROR_NOT_FOUND);

  // The PCI bus id is the runtime's and finds the device.
  nvmlPciInfo_t pci;
  NV(nvmlDeviceGetPciInfo_v3(dev, &pci));
  char cuda_bus[64];
  CK(cudaDeviceGetPCIBusId(cuda_bus, sizeof cuda_bus, 0));
  EXPECT(int(pci.bus) == p.pciBusID && int(pci.device) == p.pciDeviceID && int(pci.domain) == p.pciDomainID);
  nvmlDevice_t by_pci = nullptr;
  NV(nvmlDeviceGetHandleByPciBusId_v2(pci.busId, &by_pci));
  EXPECT(by_pci == dev);
  std::printf("nvml: %s %s %s (cudaDeviceGetPCIBusId %s)\n", name, uuid, pci.busId, cuda_bus);

  int major = 0, minor = 0;
  NV(nvmlDeviceGetCudaComputeCapability(dev, &major, &minor));
  EXPECT(major == p.major && minor == p.minor);
  int drv = 0, nvml_drv = 0;
  CK(cudaDriverGetVersion(&drv));
  NV(nvmlSystemGetCudaDriverVersion_v2(&nvml_drv));
  EXPECT(drv == nvml_drv);

  // Memory: the runtime's total, and 64 MiB more in use after cudaMalloc.
  nvmlMemory_t m0, m1;
  NV(nvmlDeviceGetMemoryInfo(dev, &m0));
  size_t free_b = 0, total_b = 0;
  CK(cudaMemGetInfo(&free_b, &total_b));
  EXPECT(m0.total == total_b && m0.used + m0.free == m0.total);
  const size_t bytes = 64u << 20;
  int* buf = nullptr;
  CK(cudaMalloc(&buf, bytes));
  NV(nvmlDeviceGetMemoryInfo(dev, &m1));
  EXPECT(m1.used >= m0.used + bytes && m1.free + bytes <= m0.free);
  nvmlMemory_v2_t m2{};
  m2.version = nvmlMemory_v2;
  NV(nvmlDeviceGetMemoryInfo_v2(dev, &m2));
  EXPECT(m2.total == m1.total && m2.used >= m0.used + bytes);
  m2.version = 1;
  EXPECT(nvmlDeviceGetMemoryInfo_v2(dev, &m2) == NVML_ERROR_ARGUMENT_VERSION_MISMATCH);

  // The process list: this process, holding at least the 64 MiB.
  unsigned nproc = 0;
  EXPECT(nvmlDeviceGetComputeRunningProcesses_v3(dev, &nproc, nullptr) == NVML_ERROR_INSUFFICIENT_SIZE && nproc == 1);
  nvmlProcessInfo_t procs[4];
  nproc = 4;
  NV(nvmlDeviceGetComputeRunningProcesses_v3(dev, &nproc, procs));
  EXPECT(nproc == 1 && procs[0].pid == unsigned(getpid()) && procs[0].usedGpuMemory >= bytes);

  check_utilization(dev, buf);

  // What Wormhole does not have: NVML's not-supported status.
  unsigned temp = 0;
  EXPECT(nvmlDeviceGetTemperature(dev, NVML_TEMPERATURE_GPU, &temp) == NVML_ERROR_NOT_SUPPORTED);
  unsigned mw = 0;
  EXPECT(nvmlDeviceGetPowerUsage(dev, &mw) == NVML_ERROR_NOT_SUPPORTED);
  // Bad arguments.
  EXPECT(nvmlDeviceGetName(nullptr, name, sizeof name) == NVML_ERROR_INVALID_ARGUMENT);
  EXPECT(nvmlDeviceGetMemoryInfo(dev, nullptr) == NVML_ERROR_INVALID_ARGUMENT);

  CK(cudaFree(buf));
  NV(nvmlShutdown());
  EXPECT(nvmlDeviceGetName(dev, name, sizeof name) == NVML_ERROR_UNINITIALIZED);
  EXPECT(nvmlShutdown() == NVML_ERROR_UNINITIALIZED);
  std::printf("nvml: all checks passed\n");
  return 0;
}
