// Driver functions fetched through the runtime (cudaGetDriverEntryPoint*),
// as PyTorch fetches every driver function it calls: no cuInit of the
// program's own, device memory shared between the two APIs, a kernel on
// memory the driver allocated, and the refusals (unknown name, a version
// older than the function, bad flags).
#include <cuda.h>

#include <vector>
#include "check.cuh"

__global__ void twice_plus(float* v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) v[i] = 2 * v[i] + 1;
}

template <class F>
static F entry(const char* name, unsigned version) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult st = cudaDriverEntryPointSymbolNotFound;
  CHECK(cudaGetDriverEntryPointByVersion(name, &fn, version, cudaEnableDefault, &st));
  EXPECT(st == cudaDriverEntryPointSuccess && fn, "%s: status %d", name, int(st));
  return reinterpret_cast<F>(fn);
}

int main() {
  auto drv_version = entry<CUresult (*)(int*)>("cuDriverGetVersion", 13000);
  int dv = 0, rv = 0;
  EXPECT(drv_version(&dv) == CUDA_SUCCESS, "cuDriverGetVersion");
  CHECK(cudaDriverGetVersion(&rv));
  EXPECT(dv == rv && dv >= 13000, "driver version %d, runtime says %d", dv, rv);

  auto alloc = entry<CUresult (*)(CUdeviceptr*, size_t)>("cuMemAlloc", 13000);
  auto htod = entry<CUresult (*)(CUdeviceptr, const void*, size_t)>("cuMemcpyHtoD", 13000);
  auto dtoh = entry<CUresult (*)(void*, CUdeviceptr, size_t)>("cuMemcpyDtoH", 13000);
  auto release = entry<CUresult (*)(CUdeviceptr)>("cuMemFree", 13000);
  const int n = 1000;
  std::vector<float> h(n), out(n, -1);
  for (int i = 0; i < n; i++) h[i] = 0.25f * i - 7;
  CUdeviceptr d = 0;
  EXPECT(alloc(&d, n * sizeof(float)) == CUDA_SUCCESS && d, "cuMemAlloc");
  EXPECT(htod(d, h.data(), n * sizeof(float)) == CUDA_SUCCESS, "cuMemcpyHtoD");
  twice_plus<<<(n + 127) / 128, 128>>>(reinterpret_cast<float*>(d), n);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  EXPECT(dtoh(out.data(), d, n * sizeof(float)) == CUDA_SUCCESS, "cuMemcpyDtoH");
  for (int i = 0; i < n; i++) EXPECT(out[i] == 2 * h[i] + 1, "v[%d] = %g, host %g", i, out[i], 2 * h[i] + 1);
  EXPECT(release(d) == CUDA_SUCCESS, "cuMemFree");

  // The per-thread-stream variant of a stream function exists and differs from the legacy one.
  void *legacy = nullptr, *ptds = nullptr;
  CHECK(cudaGetDriverEntryPointByVersion("cuStreamSynchronize", &legacy, 13000, cudaEnableLegacyStream, nullptr));
  CHECK(cudaGetDriverEntryPointByVersion("cuStreamSynchronize", &ptds, 13000, cudaEnablePerThreadDefaultStream, nullptr));
  EXPECT(legacy && ptds && legacy != ptds, "cuStreamSynchronize: legacy %p, per-thread %p", legacy, ptds);

  void* fn = reinterpret_cast<void*>(1);
  cudaDriverEntryPointQueryResult st = cudaDriverEntryPointSuccess;
  EXPECT(cudaGetDriverEntryPointByVersion("cuNoSuchFunction", &fn, 13000, cudaEnableDefault, &st) ==
             cudaErrorSymbolNotFound && !fn && st == cudaDriverEntryPointSymbolNotFound,
         "unknown name: fn %p, status %d", fn, int(st));
  cudaGetLastError();
  fn = reinterpret_cast<void*>(1);
  EXPECT(cudaGetDriverEntryPointByVersion("cuStreamBeginCaptureToGraph", &fn, 12000, cudaEnableDefault, &st) ==
             cudaErrorSymbolNotFound && !fn && st == cudaDriverEntryPointVersionNotSufficent,
         "a function newer than the version asked: fn %p, status %d", fn, int(st));
  cudaGetLastError();
  EXPECT(cudaGetDriverEntryPointByVersion("cuMemAlloc", &fn, 13000, 1ull << 7, nullptr) == cudaErrorInvalidValue,
         "unknown flags accepted");
  cudaGetLastError();
  EXPECT(cudaGetDriverEntryPointByVersion(nullptr, &fn, 13000, 0, nullptr) == cudaErrorInvalidValue, "null name");
  cudaGetLastError();
  std::printf("PASS driver_entry\n");
  return 0;
}
