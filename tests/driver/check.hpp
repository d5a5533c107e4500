// Error checks as CUDA programs write them: every driver call is checked.
#pragma once
#include <cuda.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#define CU_CHECK(x)                                                                   \
  do {                                                                                \
    CUresult r_ = (x);                                                                \
    if (r_ != CUDA_SUCCESS) {                                                         \
      const char* n_ = "?";                                                           \
      cuGetErrorName(r_, &n_);                                                        \
      std::fprintf(stderr, "%s:%d: %s failed: %s (%d)\n", __FILE__, __LINE__, #x, n_, int(r_)); \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

// The stacked runs (ctest -L stacked, docs/hardware.md) put a cuda-backend
// server over Wormhole's own driver; what that driver cannot be for another
// process is left out there, by name, and printed.
inline bool stacked_excludes(const char* what) {
  const char* e = std::getenv("WH_TEST_STACKED");
  if (!e || !*e || std::strcmp(e, "0") == 0) return false;
  std::printf("EXCLUDED when stacked: %s\n", what);
  return true;
}

#define CU_EXPECT(x, want)                                                            \
  do {                                                                                \
    CUresult r_ = (x);                                                                \
    if (r_ != (want)) {                                                               \
      std::fprintf(stderr, "%s:%d: %s returned %d, expected %d\n", __FILE__, __LINE__, #x, int(r_), int(want)); \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

#define EXPECT(c)                                                                     \
  do {                                                                                \
    if (!(c)) {                                                                       \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c);    \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

// The first device and its architecture as NVRTC names it (75 for sm_75).
inline int first_device_arch(CUdevice* dev) {
  CU_CHECK(cuDeviceGet(dev, 0));
  int major = 0, minor = 0;
  CU_CHECK(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, *dev));
  CU_CHECK(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, *dev));
  return major * 10 + minor;
}

inline std::string read_all(const char* path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    std::fprintf(stderr, "cannot read %s\n", path);
    std::exit(1);
  }
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
