// The handler of the weak stubs (gen_weak_stubs.sh): every driver function
// this library does not implement logs its name once and returns
// CUDA_ERROR_NOT_SUPPORTED.
#include "driver.hpp"

extern "C" __attribute__((visibility("hidden"))) void wh_cuda_unsupported(const char* name) {
  wh::driver::log_once(std::string(name) + " is not supported by Wormhole's driver API");
}
