// A stand-in for guest-lib's libcudart.so.13, only to test that the guest
// image carries an nvcc-built program (-cudart shared) with a drop-in
// runtime found through the image's ld.so.cache. It forwards nothing: it
// maps the ivshmem BAR (through wh_ivshmem) on cudaMalloc and reports.
#include <cstddef>
#include <cstdio>
#include <string>

#include "wormhole/ivshmem.hpp"

extern "C" {
void** __cudaRegisterFatBinary(void*) {
  static void* handle = nullptr;
  return &handle;
}
void __cudaRegisterFatBinaryEnd(void**) {}
void __cudaUnregisterFatBinary(void**) {}
void __cudaRegisterFunction(void**, const char*, char*, const char*, int, void*, void*, void*,
                            void*, int*) {}
unsigned __cudaPushCallConfiguration(unsigned long long, unsigned, unsigned long long, unsigned,
                                     std::size_t, void*) {
  return 0;
}
int __cudaPopCallConfiguration(void*, void*, void*, void*) { return 0; }
int __cudaGetKernel(void** h, const void* f) {
  *h = const_cast<void*>(f);
  return 0;
}
int __cudaLaunchKernel(const void*, unsigned long long, unsigned, unsigned long long, unsigned,
                       void**, std::size_t, void*) {
  return 0;
}
int cudaMalloc(void** p, std::size_t) {
  static wh::ivshmem::Mapping m;
  if (!m) {
    std::string err;
    auto r = wh::ivshmem::open_device(&err);
    if (!r) {
      std::fprintf(stderr, "cudart stub: %s\n", err.c_str());
      return 2;
    }
    m = std::move(*r);
    std::printf("cudart stub: %s mapped, %zu bytes\n", m.path.c_str(), m.size);
  }
  *p = m.base;
  return 0;
}
int cudaDeviceSynchronize() { return 0; }
const char* cudaGetErrorString(int e) { return e ? "cudart stub: error" : "no error"; }
}
