// Tiny helpers for the forwarded test programs: every program checks its
// own results against a host reference and exits non-zero on a mismatch.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

// The stacked runs (ctest -L stacked, docs/hardware.md) put a cuda-backend
// server over Wormhole's own driver; what that pair cannot show is left out
// there, by name, and printed.
inline bool stacked_excludes(const char* what) {
  const char* e = std::getenv("WH_TEST_STACKED");
  if (!e || !*e || std::strcmp(e, "0") == 0) return false;
  std::printf("EXCLUDED when stacked: %s\n", what);
  return true;
}

#define CHECK(call)                                                                  \
  do {                                                                               \
    cudaError_t e_ = (call);                                                         \
    if (e_ != cudaSuccess) {                                                         \
      std::fprintf(stderr, "FAIL %s:%d: %s -> %s\n", __FILE__, __LINE__, #call,     \
                   cudaGetErrorName(e_));                                            \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

#define EXPECT(cond, ...)                                                            \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      std::fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);          \
      std::fprintf(stderr, __VA_ARGS__);                                             \
      std::fprintf(stderr, "\n");                                                    \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

// A library call's status (cublasStatus_t, cufftResult, curandStatus_t, ...):
// anything but `ok` fails the program with the status's number.
#define CHECK_STATUS(call, ok)                                                       \
  do {                                                                               \
    auto s_ = (call);                                                                \
    if (s_ != (ok)) {                                                                \
      std::fprintf(stderr, "FAIL %s:%d: %s -> status %d\n", __FILE__, __LINE__,     \
                   #call, int(s_));                                                  \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)
