// NVIDIA's libcudart.so.13 loaded before Wormhole's libcuda.so.1 (a Python
// package's wheel found first, say): the driver library's runtime calls
// would bind to NVIDIA's runtime, which is calling the driver, and recurse
// into its own initialisation. The driver library refuses instead, at once,
// on the calls a runtime starts with.
#include <cuda.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

namespace {

TEST(ForeignRuntime, DriverRefusesInsteadOfRecursing) {
  alarm(30);  // a recursion into pthread_once would hang: fail instead
  void* nv = dlopen(WH_NVIDIA_CUDART, RTLD_NOW | RTLD_GLOBAL);
  ASSERT_NE(nv, nullptr) << dlerror();
  // Lazily, as NVIDIA's runtime opens it: Wormhole's wh_guest_* imports stay unresolved.
  void* wh = dlopen(WH_GUEST_LIB_DIR "/libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  ASSERT_NE(wh, nullptr) << dlerror();
  auto version = reinterpret_cast<CUresult (*)(int*)>(dlsym(wh, "cuDriverGetVersion"));
  auto init = reinterpret_cast<CUresult (*)(unsigned)>(dlsym(wh, "cuInit"));
  auto proc = reinterpret_cast<CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*)>(
      dlsym(wh, "cuGetProcAddress_v2"));
  auto table = reinterpret_cast<CUresult (*)(const void**, const CUuuid*)>(dlsym(wh, "cuGetExportTable"));
  ASSERT_TRUE(version && init && proc && table);
  int v = -1;
  EXPECT_EQ(version(&v), CUDA_ERROR_NOT_INITIALIZED);
  EXPECT_EQ(init(0), CUDA_ERROR_NOT_INITIALIZED);
  void* fn = reinterpret_cast<void*>(1);
  EXPECT_EQ(proc("cuMemAlloc", &fn, 13000, 0, nullptr), CUDA_ERROR_NOT_INITIALIZED);
  EXPECT_EQ(fn, nullptr);
  const void* t = reinterpret_cast<void*>(1);
  CUuuid id{};
  EXPECT_EQ(table(&t, &id), CUDA_ERROR_NOT_INITIALIZED);
  EXPECT_EQ(t, nullptr);
  alarm(0);
}

}  // namespace
