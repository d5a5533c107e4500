// Fatal checks shared by the library test programs: a call that does not
// return its library's success status prints FAIL with the place, the call
// and the status, and ends the program with status 1 (the test's failure).
#pragma once
#include <cstdio>
#include <cstdlib>

// `name`: a string for the status r_ (an expression that may use r_).
#define WH_REQUIRE(x, ok, name)                                                                  \
  do {                                                                                           \
    auto r_ = (x);                                                                               \
    if (r_ != (ok)) {                                                                            \
      std::printf("FAIL %s:%d %s: %s (%d)\n", __FILE__, __LINE__, #x, (name), int(r_));           \
      std::exit(1);                                                                              \
    }                                                                                            \
  } while (0)

#define CK(x) WH_REQUIRE(x, cudaSuccess, cudaGetErrorString(r_))
