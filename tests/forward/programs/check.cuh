// Tiny helpers for the forwarded test programs: every program checks its
// own results against a host reference and exits non-zero on a mismatch.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

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
