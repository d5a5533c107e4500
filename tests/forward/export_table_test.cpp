// cuGetExportTable of Wormhole's libcuda.so.1 (docs/export-tables.md), called
// as NVIDIA's runtime calls it: through dlopen, by UUID. Unknown ids and null
// arguments are errors, never crashes; the tables the runtime relies on have
// the layout it expects (size slot, context-local storage round trip); a slot
// never seen in use answers CUDA_ERROR_NOT_SUPPORTED.
#include <cuda.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

namespace {

using GetExportTable = CUresult (*)(const void**, const CUuuid*);

CUuuid uuid(std::initializer_list<uint8_t> b) {
  CUuuid u{};
  std::memcpy(u.bytes, b.begin(), 16);
  return u;
}

class ExportTable : public ::testing::Test {
 protected:
  void SetUp() override {
    lib_ = dlopen(WH_GUEST_LIB_DIR "/libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(lib_, nullptr) << dlerror();
    get_ = reinterpret_cast<GetExportTable>(dlsym(lib_, "cuGetExportTable"));
    ASSERT_NE(get_, nullptr);
  }
  void TearDown() override {
    if (lib_) dlclose(lib_);
  }
  void* lib_ = nullptr;
  GetExportTable get_ = nullptr;
};

const CUuuid kCls = uuid({0xc6, 0x93, 0x33, 0x6e, 0x11, 0x21, 0xdf, 0x11, 0xa8, 0xc3, 0x68, 0xf3, 0x55, 0xd8, 0x95, 0x93});
const CUuuid kHooks = uuid({0xa0, 0x94, 0x79, 0x8c, 0x2e, 0x74, 0x2e, 0x74, 0x93, 0xf2, 0x08, 0x00, 0x20, 0x0c, 0x0a, 0x66});
const CUuuid kCudart = uuid({0x6b, 0xd5, 0xfb, 0x6c, 0x5b, 0xf4, 0xe7, 0x4a, 0x89, 0x87, 0xd9, 0x39, 0x12, 0xfd, 0x9d, 0xf9});

}  // namespace

TEST_F(ExportTable, UnknownIdAndNullArgumentsAreErrors) {
  const void* t = reinterpret_cast<const void*>(1);
  CUuuid unknown = uuid({0xf8, 0xcf, 0xf9, 0x51, 0x21, 0x46, 0x8b, 0x4e, 0xb9, 0xe2, 0xfb, 0x46, 0x9e, 0x7c, 0x0d, 0xd9});
  EXPECT_EQ(get_(&t, &unknown), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(t, nullptr);
  CUuuid zero{};
  EXPECT_EQ(get_(&t, &zero), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(get_(nullptr, &kCudart), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(get_(&t, nullptr), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(ExportTable, SizedTablesAndTheHooksBuffers) {
  const void* t = nullptr;
  ASSERT_EQ(get_(&t, &kCudart), CUDA_SUCCESS);
  auto slots = static_cast<const void* const*>(t);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(slots[0]), 13 * sizeof(void*));
  ASSERT_EQ(get_(&t, &kHooks), CUDA_SUCCESS);
  slots = static_cast<const void* const*>(t);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(slots[0]), 7 * sizeof(void*));
  void* buf = nullptr;
  size_t n = 0;
  reinterpret_cast<void (*)(void**, size_t*)>(const_cast<void*>(slots[2]))(&buf, &n);
  EXPECT_NE(buf, nullptr);
  EXPECT_EQ(n, 1024u);
  // A slot never seen in use: not supported (and logged once), not a crash.
  EXPECT_EQ(reinterpret_cast<CUresult (*)()>(const_cast<void*>(slots[1]))(), CUDA_ERROR_NOT_SUPPORTED);
}

TEST_F(ExportTable, ContextLocalStorageRoundTrip) {
  const void* t = nullptr;
  ASSERT_EQ(get_(&t, &kCls), CUDA_SUCCESS);
  auto slots = static_cast<const void* const*>(t);
  using Put = CUresult (*)(CUcontext, void*, void*, void (*)(CUcontext, void*, void*));
  using Del = CUresult (*)(CUcontext, void*);
  using Get = CUresult (*)(void**, CUcontext, void*);
  auto put = reinterpret_cast<Put>(const_cast<void*>(slots[0]));
  auto del = reinterpret_cast<Del>(const_cast<void*>(slots[1]));
  auto get = reinterpret_cast<Get>(const_cast<void*>(slots[2]));
  auto ctx = reinterpret_cast<CUcontext>(0x1000);
  int key = 0, value = 0, other = 0;
  void* out = nullptr;
  EXPECT_EQ(get(&out, ctx, &key), CUDA_ERROR_INVALID_HANDLE);  // not yet
  EXPECT_EQ(put(ctx, &key, &value, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(get(&out, ctx, &key), CUDA_SUCCESS);
  EXPECT_EQ(out, &value);
  EXPECT_EQ(put(ctx, &key, &other, nullptr), CUDA_SUCCESS);  // replaces
  EXPECT_EQ(get(&out, ctx, &key), CUDA_SUCCESS);
  EXPECT_EQ(out, &other);
  EXPECT_EQ(get(&out, reinterpret_cast<CUcontext>(0x2000), &key), CUDA_ERROR_INVALID_HANDLE);  // per context
  EXPECT_EQ(get(nullptr, ctx, &key), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(del(ctx, &key), CUDA_SUCCESS);
  EXPECT_EQ(get(&out, ctx, &key), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(del(ctx, &key), CUDA_ERROR_INVALID_HANDLE);
}
