// Device queries answered in the guest, kernel attributes, occupancy, and
// a function Wormhole does not forward (clean cudaErrorNotSupported).
#include <cstring>
#include "check.cuh"

__global__ void k(float* x) { x[threadIdx.x] *= 2.f; }

int main() {
  int count = 0, dev = -1, rt = 0, drv = 0;
  CHECK(cudaGetDeviceCount(&count));
  EXPECT(count >= 1, "device count %d", count);
  CHECK(cudaSetDevice(0));
  CHECK(cudaGetDevice(&dev));
  EXPECT(dev == 0, "device %d", dev);
  EXPECT(cudaSetDevice(count) == cudaErrorInvalidDevice, "out-of-range device");
  cudaGetLastError();
  CHECK(cudaRuntimeGetVersion(&rt));
  CHECK(cudaDriverGetVersion(&drv));
  EXPECT(rt >= 13000 && drv >= 12000, "versions %d %d", rt, drv);
  cudaDeviceProp p;
  CHECK(cudaGetDeviceProperties(&p, 0));
  EXPECT(p.warpSize == 32 && p.maxThreadsPerBlock >= 1024 && std::strlen(p.name) > 0, "props");
  int v = 0;
  CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMaxThreadsPerBlock, 0));
  EXPECT(v == p.maxThreadsPerBlock, "attr %d", v);
  CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrComputeCapabilityMajor, 0));
  EXPECT(v == p.major, "cc %d", v);
  size_t fr = 0, tot = 0;
  CHECK(cudaMemGetInfo(&fr, &tot));
  EXPECT(tot > 0 && fr <= tot, "meminfo %zu/%zu", fr, tot);
  cudaFuncAttributes fa;
  CHECK(cudaFuncGetAttributes(&fa, (const void*)k));
  EXPECT(fa.maxThreadsPerBlock >= 32, "func attrs %d", fa.maxThreadsPerBlock);
  CHECK(cudaFuncSetAttribute((const void*)k, cudaFuncAttributeMaxDynamicSharedMemorySize, 8192));
  int blocks = 0;
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, k, 128, 0));
  EXPECT(blocks >= 1, "occupancy %d", blocks);
  CHECK(cudaSetDeviceFlags(cudaDeviceScheduleSpin));
  float* d = nullptr;
  CHECK(cudaMalloc(&d, 256));
  cudaIpcMemHandle_t ipc;
  cudaError_t e = cudaIpcGetMemHandle(&ipc, d);
  EXPECT(e == cudaErrorNotSupported, "unforwarded function returned %s", cudaGetErrorName(e));
  EXPECT(std::strcmp(cudaGetErrorName(cudaErrorInvalidValue), "cudaErrorInvalidValue") == 0, "error names");
  EXPECT(std::strlen(cudaGetErrorString(cudaErrorMemoryAllocation)) > 0, "error strings");
  CHECK(cudaFree(d));
  std::printf("PASS device_info\n");
  return 0;
}
