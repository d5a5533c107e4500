// Checks shared by the library test programs: a call that does not return
// its library's success status prints FAIL with the place, the call and the
// status, and ends the program with status 1 (the test's failure), or, with
// WH_CHECK_OR_RETURN, counts the failure and returns from the calling test.
#pragma once
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

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

// Non-fatal: a failing call adds one to `fails` and returns from the calling
// (void) test function, so the program's other tests still run.
#define WH_CHECK_OR_RETURN(x, ok, name, fails)                                                  \
  do {                                                                                           \
    auto r_ = (x);                                                                               \
    if (r_ != (ok)) {                                                                            \
      std::printf("FAIL %s:%d %s -> %s\n", __FILE__, __LINE__, #x, (name));                      \
      (fails)++;                                                                                 \
      return;                                                                                    \
    }                                                                                            \
  } while (0)

// Compares `got` with `want` by the largest error relative to want's largest
// magnitude (non-finite values fail), prints ok/FAIL with it, and returns ok.
inline bool wh_close(const char* what, const std::vector<float>& got, const std::vector<float>& want, double tol) {
  double scale = 1e-30, err = 0;
  for (float v : want) scale = std::fmax(scale, std::fabs(v));
  bool ok = got.size() == want.size();
  for (size_t i = 0; ok && i < got.size(); i++) {
    if (!std::isfinite(got[i])) ok = false;
    err = std::fmax(err, std::fabs(double(got[i]) - want[i]) / scale);
  }
  ok = ok && err <= tol;
  std::printf("%s %s: max relative error %.3g (tolerance %.3g)\n", ok ? "ok  " : "FAIL", what, err, tol);
  return ok;
}
