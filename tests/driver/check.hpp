// Error checks as CUDA programs write them: every driver call is checked.
#pragma once
#include <cuda.h>

#include <cstdio>
#include <cstdlib>
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
