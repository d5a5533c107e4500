// The legacy cuBLAS API (cublas.h) through Wormhole: cublasInit, the
// char-transpose Sgemm, by-value scalars, cublasGetError, cublasAlloc.
#include <cublas.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <vector>

int main() {
  int fails = 0;
  auto check = [&](bool ok, const char* what) {
    if (!ok) {
      std::printf("FAIL %s\n", what);
      fails++;
    }
  };
  check(cublasInit() == CUBLAS_STATUS_SUCCESS, "cublasInit");
  const int m = 5, n = 4, k = 3;
  std::vector<float> A(k * m), B(k * n), C(m * n, 1.f), want(m * n);
  for (int i = 0; i < k * m; i++) A[i] = 0.25f * float(i % 7) - 0.5f;
  for (int i = 0; i < k * n; i++) B[i] = 0.125f * float(i % 5) + 0.1f;
  // C = 2 * A^T * B + 1 * C  (A stored k x m)
  for (int j = 0; j < n; j++)
    for (int i = 0; i < m; i++) {
      double s = 0;
      for (int l = 0; l < k; l++) s += double(A[i * k + l]) * B[j * k + l];
      want[j * m + i] = float(2 * s + 1);
    }
  float *dA, *dB, *dC;
  check(cublasAlloc(k * m, sizeof(float), (void**)&dA) == CUBLAS_STATUS_SUCCESS, "cublasAlloc");
  cublasAlloc(k * n, sizeof(float), (void**)&dB);
  cublasAlloc(m * n, sizeof(float), (void**)&dC);
  cublasSetMatrix(k, m, sizeof(float), A.data(), k, dA, k);
  cublasSetMatrix(k, n, sizeof(float), B.data(), k, dB, k);
  cublasSetMatrix(m, n, sizeof(float), C.data(), m, dC, m);
  cublasSgemm('T', 'n', m, n, k, 2.f, dA, k, dB, k, 1.f, dC, m);
  check(cublasGetError() == CUBLAS_STATUS_SUCCESS, "cublasSgemm status");
  cublasGetMatrix(m, n, sizeof(float), dC, m, C.data(), m);
  for (int i = 0; i < m * n; i++)
    if (std::fabs(C[i] - want[i]) > 1e-5f) {
      std::printf("FAIL legacy Sgemm at %d: %g vs %g\n", i, C[i], want[i]);
      fails++;
      break;
    }
  // Level 1 through the legacy names.
  std::vector<float> x = {3.f, -4.f, 1.f, 0.5f};
  float* dx;
  cublasAlloc(4, sizeof(float), (void**)&dx);
  cublasSetVector(4, sizeof(float), x.data(), 1, dx, 1);
  check(std::fabs(cublasSnrm2(4, dx, 1) - std::sqrt(26.25f)) < 1e-5f, "legacy Snrm2");
  check(std::fabs(cublasSasum(4, dx, 1) - 8.5f) < 1e-6f, "legacy Sasum");
  check(cublasIsamax(4, dx, 1) == 2, "legacy Isamax");
  check(std::fabs(cublasSdot(4, dx, 1, dx, 1) - 26.25f) < 1e-5f, "legacy Sdot");
  cublasSscal(4, 2.f, dx, 1);
  check(std::fabs(cublasSasum(4, dx, 1) - 17.f) < 1e-5f, "legacy Sscal");
  // An invalid argument is reported through cublasGetError.
  cublasSgemm('X', 'N', m, n, k, 1.f, dA, k, dB, k, 0.f, dC, m);
  check(cublasGetError() == CUBLAS_STATUS_INVALID_VALUE, "legacy error reporting");
  check(cublasGetError() == CUBLAS_STATUS_SUCCESS, "cublasGetError clears");
  cublasFree(dA);
  cublasFree(dB);
  cublasFree(dC);
  cublasFree(dx);
  check(cublasShutdown() == CUBLAS_STATUS_SUCCESS, "cublasShutdown");
  std::printf("%s: legacy API, %d failures\n", fails ? "FAILED" : "OK", fails);
  return fails ? 1 : 0;
}
