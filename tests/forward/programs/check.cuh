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
