// NVRTC's error check, as NVRTC programs write it.
#pragma once
#include <nvrtc.h>

#include <cstdio>
#include <cstdlib>

#define NVRTC_CHECK(x)                                                                      \
  do {                                                                                      \
    nvrtcResult r_ = (x);                                                                   \
    if (r_ != NVRTC_SUCCESS) {                                                              \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #x, nvrtcGetErrorString(r_)); \
      std::exit(1);                                                                         \
    }                                                                                       \
  } while (0)
