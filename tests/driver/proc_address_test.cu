// cuGetProcAddress as libraries use it (cudart, cuBLASLt and NVRTC users
// resolve the driver this way): each (name, CUDA version, flags) gives the
// symbol of that ABI version; per-thread-stream flags give the _ptsz/_ptds
// forms; unknown names and too-old versions fail with their status. The
// resolved pointers are then called.
#include <cudaTypedefs.h>
#include <dlfcn.h>

#include <cstring>

#include "check.hpp"

static void* lib_sym(const char* name) {
  static void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  EXPECT(lib);
  void* p = dlsym(lib, name);
  if (!p) {
    std::fprintf(stderr, "libcuda.so.1 lacks %s\n", name);
    std::exit(1);
  }
  return p;
}

static void expect_resolves(const char* name, int version, cuuint64_t flags, const char* symbol) {
  void* fn = nullptr;
  CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
  CU_CHECK(cuGetProcAddress(name, &fn, version, flags, &st));
  if (st != CU_GET_PROC_ADDRESS_SUCCESS || fn != lib_sym(symbol)) {
    std::fprintf(stderr, "cuGetProcAddress(%s, %d, %llu) did not give %s\n", name, version,
                 (unsigned long long)flags, symbol);
    std::exit(1);
  }
}

int main() {
  CU_CHECK(cuInit(0));
  const cuuint64_t LEGACY = CU_GET_PROC_ADDRESS_LEGACY_STREAM, PT = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  expect_resolves("cuInit", 13000, 0, "cuInit");
  expect_resolves("cuMemAlloc", 13000, 0, "cuMemAlloc_v2");
  expect_resolves("cuMemAlloc", 3020, 0, "cuMemAlloc_v2");
  expect_resolves("cuMemAlloc", 3010, 0, "cuMemAlloc");  // the 32-bit ABI of CUDA 2.x-3.1
  expect_resolves("cuCtxCreate", 11040, 0, "cuCtxCreate_v3");
  expect_resolves("cuCtxCreate", 12040, 0, "cuCtxCreate_v3");
  expect_resolves("cuCtxCreate", 13000, 0, "cuCtxCreate_v4");
  expect_resolves("cuStreamGetCaptureInfo", 11030, 0, "cuStreamGetCaptureInfo_v2");
  expect_resolves("cuStreamGetCaptureInfo", 12030, PT, "cuStreamGetCaptureInfo_v3_ptsz");
  expect_resolves("cuMemcpyHtoD", 13000, LEGACY, "cuMemcpyHtoD_v2");
  expect_resolves("cuMemcpyHtoD", 13000, PT, "cuMemcpyHtoD_v2_ptds");
  expect_resolves("cuMemcpyHtoDAsync", 13000, PT, "cuMemcpyHtoDAsync_v2_ptsz");
  expect_resolves("cuStreamQuery", 13000, PT, "cuStreamQuery_ptsz");
  expect_resolves("cuLaunchKernel", 13000, 0, "cuLaunchKernel");
  expect_resolves("cuLaunchKernel", 13000, PT, "cuLaunchKernel_ptsz");
  expect_resolves("cuMemAlloc", 13000, PT, "cuMemAlloc_v2");  // no per-thread form: the plain one
  expect_resolves("cuGetProcAddress", 12000, 0, "cuGetProcAddress_v2");
  expect_resolves("cuGetProcAddress", 11030, 0, "cuGetProcAddress");
  expect_resolves("cuDevicePrimaryCtxRelease", 11000, 0, "cuDevicePrimaryCtxRelease_v2");

  // Unknown names and versions older than the function.
  void* fn = reinterpret_cast<void*>(1);
  CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SUCCESS;
  CU_EXPECT(cuGetProcAddress("cuNoSuchFunction", &fn, 13000, 0, &st), CUDA_ERROR_NOT_FOUND);
  EXPECT(st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND && fn == nullptr);
  CU_EXPECT(cuGetProcAddress("cuMemAllocAsync", &fn, 11000, 0, &st), CUDA_ERROR_NOT_FOUND);
  EXPECT(st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT && fn == nullptr);
  CU_EXPECT(cuGetProcAddress("cuInit", &fn, 13000, 0x80, &st), CUDA_ERROR_INVALID_VALUE);

  // The v1 entry point (CUDA 11.3-11.8 headers): same answers, no status.
  auto v1 = reinterpret_cast<PFN_cuGetProcAddress_v11030>(lib_sym("cuGetProcAddress"));
  CU_CHECK(v1("cuMemFree", &fn, 11080, 0));
  EXPECT(fn == lib_sym("cuMemFree_v2"));
  CU_EXPECT(v1("cuNoSuchFunction", &fn, 11080, 0), CUDA_ERROR_NOT_FOUND);

  // The pointers work: allocate, copy and free through them.
  PFN_cuMemAlloc_v3020 mem_alloc;
  PFN_cuMemcpyHtoD_v7000_ptds htod;
  PFN_cuMemcpyDtoH_v3020 dtoh;
  PFN_cuMemFree_v3020 mem_free;
  CU_CHECK(cuGetProcAddress("cuMemAlloc", reinterpret_cast<void**>(&mem_alloc), 13000, 0, nullptr));
  CU_CHECK(cuGetProcAddress("cuMemcpyHtoD", reinterpret_cast<void**>(&htod), 13000, PT, nullptr));
  CU_CHECK(cuGetProcAddress("cuMemcpyDtoH", reinterpret_cast<void**>(&dtoh), 13000, 0, nullptr));
  CU_CHECK(cuGetProcAddress("cuMemFree", reinterpret_cast<void**>(&mem_free), 13000, 0, nullptr));
  CUdevice dev;
  CU_CHECK(cuDeviceGet(&dev, 0));
  CUcontext ctx;
  CU_CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CU_CHECK(cuCtxSetCurrent(ctx));
  CUdeviceptr d;
  CU_CHECK(mem_alloc(&d, 64));
  int in[16], out[16] = {};
  for (int i = 0; i < 16; i++) in[i] = i * i;
  CU_CHECK(htod(d, in, sizeof in));
  CU_CHECK(dtoh(out, d, sizeof out));
  EXPECT(std::memcmp(in, out, sizeof in) == 0);
  CU_CHECK(mem_free(d));

  // A function this library does not implement resolves too, and fails cleanly.
  PFN_cuGraphicsUnregisterResource_v3000 unreg;
  CU_CHECK(cuGetProcAddress("cuGraphicsUnregisterResource", reinterpret_cast<void**>(&unreg), 13000, 0, nullptr));
  CU_EXPECT(unreg(nullptr), CUDA_ERROR_NOT_SUPPORTED);
  CU_CHECK(cuDevicePrimaryCtxRelease(dev));
  std::printf("cuGetProcAddress test passed\n");
  return 0;
}
