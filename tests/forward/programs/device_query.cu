// What a program's startup helper asks of the device, as the common helper
// headers and deviceQuery-style tools do: every attribute, the properties
// they mirror, the PCI bus id both ways, UUID, limits, and the calls made in
// passing (profiler markers, persisting-L2 hints, bank size). Then a kernel
// reports the __CUDA_ARCH__ it was compiled for, which must match the
// ptxVersion the runtime reports (Thrust and CUB rely on that).
#include <cuda_profiler_api.h>

#include <cstring>

#include "check.cuh"

__global__ void arch_probe(int* out) {
#ifdef __CUDA_ARCH__
  *out = __CUDA_ARCH__;
#endif
}

int main() {
  int dev = 0;
  CHECK(cudaGetDevice(&dev));
  cudaDeviceProp p;
  CHECK(cudaGetDeviceProperties(&p, dev));

  // The attributes a typical helper reads before it does any work.
  int mode = -1, clock = 0, mem_clock = 0, overlap = -1, timeout = -1, pools = -1, atomics = -1;
  CHECK(cudaDeviceGetAttribute(&mode, cudaDevAttrComputeMode, dev));
  CHECK(cudaDeviceGetAttribute(&clock, cudaDevAttrClockRate, dev));
  CHECK(cudaDeviceGetAttribute(&mem_clock, cudaDevAttrMemoryClockRate, dev));
  CHECK(cudaDeviceGetAttribute(&overlap, cudaDevAttrGpuOverlap, dev));
  CHECK(cudaDeviceGetAttribute(&timeout, cudaDevAttrKernelExecTimeout, dev));
  CHECK(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, dev));
  CHECK(cudaDeviceGetAttribute(&atomics, cudaDevAttrHostNativeAtomicSupported, dev));
  EXPECT(mode == cudaComputeModeDefault || mode == cudaComputeModeExclusiveProcess, "compute mode %d", mode);
  EXPECT(clock > 0 && mem_clock > 0, "clocks %d %d kHz", clock, mem_clock);
  EXPECT(overlap == 0 || overlap == 1, "gpu overlap %d", overlap);
  EXPECT(overlap == (p.asyncEngineCount > 0 ? 1 : 0), "overlap %d vs %d copy engines", overlap, p.asyncEngineCount);
  EXPECT(pools == p.memoryPoolsSupported, "pools %d vs %d", pools, p.memoryPoolsSupported);

  // Every attribute that mirrors a property agrees with it.
  struct {
    cudaDeviceAttr a;
    long long prop;
    const char* name;
  } mirror[] = {
      {cudaDevAttrMaxThreadsPerBlock, p.maxThreadsPerBlock, "maxThreadsPerBlock"},
      {cudaDevAttrMaxBlockDimZ, p.maxThreadsDim[2], "maxThreadsDim[2]"},
      {cudaDevAttrMaxGridDimX, p.maxGridSize[0], "maxGridSize[0]"},
      {cudaDevAttrMaxSharedMemoryPerBlock, (long long)p.sharedMemPerBlock, "sharedMemPerBlock"},
      {cudaDevAttrMaxSharedMemoryPerBlockOptin, (long long)p.sharedMemPerBlockOptin, "sharedMemPerBlockOptin"},
      {cudaDevAttrMaxSharedMemoryPerMultiprocessor, (long long)p.sharedMemPerMultiprocessor, "sharedMemPerMultiprocessor"},
      {cudaDevAttrTotalConstantMemory, (long long)p.totalConstMem, "totalConstMem"},
      {cudaDevAttrWarpSize, p.warpSize, "warpSize"},
      {cudaDevAttrMultiProcessorCount, p.multiProcessorCount, "multiProcessorCount"},
      {cudaDevAttrComputeCapabilityMajor, p.major, "major"},
      {cudaDevAttrComputeCapabilityMinor, p.minor, "minor"},
      {cudaDevAttrL2CacheSize, p.l2CacheSize, "l2CacheSize"},
      {cudaDevAttrMaxPersistingL2CacheSize, p.persistingL2CacheMaxSize, "persistingL2CacheMaxSize"},
      {cudaDevAttrMaxTexture2DWidth, p.maxTexture2D[0], "maxTexture2D[0]"},
      {cudaDevAttrMaxSurface3DDepth, p.maxSurface3D[2], "maxSurface3D[2]"},
      {cudaDevAttrManagedMemory, p.managedMemory, "managedMemory"},
      {cudaDevAttrConcurrentManagedAccess, p.concurrentManagedAccess, "concurrentManagedAccess"},
      {cudaDevAttrCooperativeLaunch, p.cooperativeLaunch, "cooperativeLaunch"},
      {cudaDevAttrMaxBlocksPerMultiprocessor, p.maxBlocksPerMultiProcessor, "maxBlocksPerMultiProcessor"},
      {cudaDevAttrPciBusId, p.pciBusID, "pciBusID"},
      {cudaDevAttrHostRegisterSupported, p.hostRegisterSupported, "hostRegisterSupported"},
      {cudaDevAttrClusterLaunch, p.clusterLaunch, "clusterLaunch"},
      {cudaDevAttrHostNumaId, p.hostNumaId, "hostNumaId"},
  };
  for (auto& m : mirror) {
    int v = 0;
    CHECK(cudaDeviceGetAttribute(&v, m.a, dev));
    EXPECT(v == m.prop, "attribute %d = %d but %s = %lld", int(m.a), v, m.name, m.prop);
  }
  EXPECT(p.totalGlobalMem > 0 && std::strlen(p.name) > 0, "name and memory");

  // Every attribute CUDA 13 defines answers (these ids are gaps or reserved).
  const int undefined[] = {44, 92, 93, 94, 96, 102, 103, 104, 105, 107, 110, 122,
                           123, 124, 127, 128, 129, 132, 136, 137, 141, 145, 146};
  int answered = 0;
  for (int a = 1; a < 148; a++) {
    bool defined = true;
    for (int u : undefined) defined &= a != u;
    if (!defined) continue;
    int v = 0;
    cudaError_t e = cudaDeviceGetAttribute(&v, cudaDeviceAttr(a), dev);
    EXPECT(e == cudaSuccess, "attribute %d: %s", a, cudaGetErrorName(e));
    answered++;
  }
  EXPECT(answered == 124, "%d attributes", answered);
  int v = 0;
  EXPECT(cudaDeviceGetAttribute(&v, cudaDeviceAttr(100000), dev) == cudaErrorInvalidValue, "bogus attribute");
  EXPECT(cudaGetLastError() == cudaErrorInvalidValue, "last error after a bogus attribute");
  EXPECT(cudaDeviceGetAttribute(&v, cudaDevAttrWarpSize, 7) == cudaErrorInvalidDevice, "bogus device");
  cudaGetLastError();

  // UUID: 16 bytes, not all zero.
  bool nonzero = false;
  for (char b : p.uuid.bytes) nonzero |= b != 0;
  EXPECT(nonzero, "uuid is all zero");

  // PCI bus id, both ways.
  char bus[32];
  CHECK(cudaDeviceGetPCIBusId(bus, sizeof bus, dev));
  int back = -1;
  CHECK(cudaDeviceGetByPCIBusId(&back, bus));
  EXPECT(back == dev, "bus id %s -> device %d", bus, back);
  EXPECT(cudaDeviceGetByPCIBusId(&back, "ffff:ff:1f.0") == cudaErrorInvalidDevice, "a bus id of no device");
  cudaGetLastError();
  int chosen = -1;
  CHECK(cudaChooseDevice(&chosen, &p));
  EXPECT(chosen == dev, "chosen %d", chosen);

  // Limits: defaults, set, read back.
  size_t lim = 0;
  CHECK(cudaDeviceGetLimit(&lim, cudaLimitPrintfFifoSize));
  EXPECT(lim >= 1 << 20, "printf fifo %zu", lim);
  CHECK(cudaDeviceGetLimit(&lim, cudaLimitMallocHeapSize));
  EXPECT(lim >= 8 << 20, "malloc heap %zu", lim);
  CHECK(cudaDeviceSetLimit(cudaLimitStackSize, 4000));
  CHECK(cudaDeviceGetLimit(&lim, cudaLimitStackSize));
  EXPECT(lim >= 4000, "stack size %zu", lim);
  CHECK(cudaDeviceSetLimit(cudaLimitMallocHeapSize, 64 << 20));
  CHECK(cudaDeviceGetLimit(&lim, cudaLimitMallocHeapSize));
  EXPECT(lim == 64 << 20, "malloc heap %zu", lim);
  EXPECT(cudaDeviceSetLimit(cudaLimit(99), 1) == cudaErrorUnsupportedLimit, "bogus limit");
  cudaGetLastError();

  // Calls made in passing: profiler markers, persisting L2, bank size.
  CHECK(cudaProfilerStart());
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  int* d_arch = nullptr;
  CHECK(cudaMalloc(&d_arch, sizeof(int)));
  if (p.persistingL2CacheMaxSize > 0) {
    CHECK(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, p.persistingL2CacheMaxSize / 2));
    cudaStreamAttrValue w = {};
    w.accessPolicyWindow.base_ptr = d_arch;
    w.accessPolicyWindow.num_bytes = sizeof(int);
    w.accessPolicyWindow.hitRatio = 0.6f;
    w.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
    w.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
    CHECK(cudaStreamSetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &w));
    cudaStreamAttrValue r = {};
    CHECK(cudaStreamGetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &r));
    EXPECT(r.accessPolicyWindow.base_ptr == d_arch && r.accessPolicyWindow.hitRatio == 0.6f, "window read back");
    w.accessPolicyWindow.hitRatio = 1.5f;
    EXPECT(cudaStreamSetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &w) == cudaErrorInvalidValue,
           "hit ratio above 1");
    cudaGetLastError();
  }
  CHECK(cudaDeviceSetSharedMemConfig(cudaSharedMemBankSizeFourByte));
  cudaSharedMemConfig bank;
  CHECK(cudaDeviceGetSharedMemConfig(&bank));
  EXPECT(bank == cudaSharedMemBankSizeFourByte, "bank size %d", int(bank));

  // The kernel's compiled architecture and the reported ptxVersion agree.
  arch_probe<<<1, 1, 0, s>>>(d_arch);
  CHECK(cudaGetLastError());
  int arch = 0;
  CHECK(cudaMemcpyAsync(&arch, d_arch, sizeof arch, cudaMemcpyDeviceToHost, s));
  CHECK(cudaStreamSynchronize(s));
  if (p.persistingL2CacheMaxSize > 0) CHECK(cudaCtxResetPersistingL2Cache());
  cudaFuncAttributes fa;
  CHECK(cudaFuncGetAttributes(&fa, arch_probe));
  EXPECT(arch == fa.ptxVersion * 10, "kernel compiled for __CUDA_ARCH__ %d, runtime reports ptxVersion %d", arch,
         fa.ptxVersion);
  EXPECT(fa.binaryVersion == p.major * 10 + p.minor, "binaryVersion %d on a %d.%d device", fa.binaryVersion, p.major,
         p.minor);
  CHECK(cudaProfilerStop());
  CHECK(cudaFree(d_arch));
  CHECK(cudaStreamDestroy(s));
  std::printf("%s: compute %d.%d, %d SMs, %d kHz, bus %s, ptx %d\n", p.name, p.major, p.minor, p.multiProcessorCount,
              clock, bus, fa.ptxVersion);
  std::printf("PASS device_query\n");
  return 0;
}
