// NVRTC's error check, as NVRTC programs write it (the shared WH_REQUIRE:
// FAIL with the place, the call and the status, exit status 1).
#pragma once
#include <nvrtc.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "wh_check.cuh"

#define NVRTC_CHECK(x) WH_REQUIRE(x, NVRTC_SUCCESS, nvrtcGetErrorString(r_))

// Compiles `prog` with `opts`; a failed compile prints NVRTC's log and ends
// the program.
inline void nvrtc_compile(nvrtcProgram prog, int n, const char* const* opts) {
  nvrtcResult r = nvrtcCompileProgram(prog, n, opts);
  if (r != NVRTC_SUCCESS) {
    size_t size = 0;
    nvrtcGetProgramLogSize(prog, &size);
    std::vector<char> log(size + 1);
    nvrtcGetProgramLog(prog, log.data());
    std::fprintf(stderr, "nvrtc log: %s\n", log.data());
  }
  NVRTC_CHECK(r);
}
