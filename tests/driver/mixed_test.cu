// One process, both APIs: a cudaMalloc'd pointer and a cudaStream_t used by
// cuLaunchKernel and cuMemcpy*, a cuMemAlloc'd pointer and a CUstream used
// by a <<<>>> launch and cudaMemcpy*, events across the two, and the
// runtime's context is the driver's primary context.
// Usage: wh_driver_mixed <kernels.ptx>
#include <cuda_runtime.h>

#include <vector>

#include "check.hpp"

#define CUDA_CHECK(x)                                                                     \
  do {                                                                                    \
    cudaError_t e_ = (x);                                                                 \
    if (e_ != cudaSuccess) {                                                              \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)

__global__ void add_one(int* p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] += 1;
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  // The runtime first: it creates (and makes current) the primary context.
  int* rbuf = nullptr;
  const int n = 4096;
  CUDA_CHECK(cudaMalloc(&rbuf, n * sizeof(int)));
  cudaStream_t rs;
  CUDA_CHECK(cudaStreamCreate(&rs));

  CU_CHECK(cuInit(0));
  CUdevice dev;
  CU_CHECK(cuDeviceGet(&dev, 0));
  CUcontext primary, cur;
  CU_CHECK(cuDevicePrimaryCtxRetain(&primary, dev));
  CU_CHECK(cuCtxGetCurrent(&cur));
  EXPECT(cur == primary);
  unsigned mtype = 0;
  CU_CHECK(cuPointerGetAttribute(&mtype, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CUdeviceptr(rbuf)));
  EXPECT(mtype == CU_MEMORYTYPE_DEVICE);
  CUdeviceptr base;
  size_t size = 0;
  CU_CHECK(cuMemGetAddressRange(&base, &size, CUdeviceptr(rbuf) + 100));
  EXPECT(base == CUdeviceptr(rbuf) && size == n * sizeof(int));

  // Driver calls on the runtime's pointer and stream.
  std::vector<int> h(n), back(n);
  for (int i = 0; i < n; i++) h[i] = i;
  CU_CHECK(cuMemcpyHtoDAsync(CUdeviceptr(rbuf), h.data(), n * sizeof(int), CUstream(rs)));
  std::string ptx = read_all(argv[1]);
  CUmodule mod;
  CU_CHECK(cuModuleLoadData(&mod, ptx.c_str()));
  CUfunction saxpy;
  CU_CHECK(cuModuleGetFunction(&saxpy, mod, "saxpy"));
  float* rx = nullptr;
  CUDA_CHECK(cudaMalloc(&rx, n * sizeof(float)));
  float* ry = nullptr;
  CUDA_CHECK(cudaMalloc(&ry, n * sizeof(float)));
  std::vector<float> fx(n, 1.0f), fy(n), fout(n);
  for (int i = 0; i < n; i++) fy[i] = float(i);
  CUDA_CHECK(cudaMemcpy(rx, fx.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(ry, fy.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  int nn = n;
  float a = 10.0f;
  void* args[] = {&nn, &a, &rx, &ry};
  CU_CHECK(cuLaunchKernel(saxpy, n / 256, 1, 1, 256, 1, 1, 0, CUstream(rs), args, nullptr));
  // A runtime launch after it on the same stream, then an event recorded by
  // the driver and waited for by the runtime.
  add_one<<<n / 256, 256, 0, rs>>>(rbuf, n);
  CUDA_CHECK(cudaGetLastError());
  cudaEvent_t ev;
  CUDA_CHECK(cudaEventCreate(&ev));
  CU_CHECK(cuEventRecord(CUevent(ev), CUstream(rs)));
  CUDA_CHECK(cudaEventSynchronize(ev));
  CUDA_CHECK(cudaMemcpy(fout.data(), ry, n * sizeof(float), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; i++) EXPECT(fout[i] == 10.0f + i);
  CU_CHECK(cuMemcpyDtoH(back.data(), CUdeviceptr(rbuf), n * sizeof(int)));
  for (int i = 0; i < n; i++) EXPECT(back[i] == i + 1);

  // Runtime calls on the driver's pointer and stream.
  CUdeviceptr dbuf;
  CU_CHECK(cuMemAlloc(&dbuf, n * sizeof(int)));
  CUstream ds;
  CU_CHECK(cuStreamCreate(&ds, 0));
  CUDA_CHECK(cudaMemcpyAsync(reinterpret_cast<void*>(dbuf), h.data(), n * sizeof(int), cudaMemcpyHostToDevice,
                             cudaStream_t(ds)));
  add_one<<<n / 256, 256, 0, cudaStream_t(ds)>>>(reinterpret_cast<int*>(dbuf), n);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaStreamSynchronize(cudaStream_t(ds)));
  CUDA_CHECK(cudaMemcpy(back.data(), reinterpret_cast<void*>(dbuf), n * sizeof(int), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; i++) EXPECT(back[i] == i + 1);
  cudaPointerAttributes pa;
  CUDA_CHECK(cudaPointerGetAttributes(&pa, reinterpret_cast<void*>(dbuf)));
  EXPECT(pa.type == cudaMemoryTypeDevice);
  CUDA_CHECK(cudaFree(reinterpret_cast<void*>(dbuf)));  // the runtime frees the driver's allocation

  // A driver-API error does not become the runtime's last error.
  CUfunction nope;
  CU_EXPECT(cuModuleGetFunction(&nope, mod, "missing"), CUDA_ERROR_NOT_FOUND);
  CUDA_CHECK(cudaGetLastError());

  CU_CHECK(cuStreamDestroy(ds));
  CU_CHECK(cuModuleUnload(mod));
  CUDA_CHECK(cudaEventDestroy(ev));
  CUDA_CHECK(cudaStreamDestroy(rs));
  CUDA_CHECK(cudaFree(rbuf));
  CUDA_CHECK(cudaFree(rx));
  CUDA_CHECK(cudaFree(ry));
  CU_CHECK(cuDevicePrimaryCtxRelease(dev));
  std::printf("mixed runtime/driver test passed\n");
  return 0;
}
