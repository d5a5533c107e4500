// Forwarded-only semantics: a compute call on memory outside the session is
// posted (cuBLAS returns success at once, as on a GPU) and its failure
// surfaces at the next synchronising call; the session then keeps working.
// (On a GPU such an access is a fault whose reporting is not guaranteed, so
// this program is run forwarded only.)
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdio>

int main() {
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return 2;
  float *a, *stale;
  cudaMalloc(&a, 64 * sizeof(float));
  cudaMalloc(&stale, 64 * sizeof(float));
  cudaFree(stale);
  const float one = 1.f, zero = 0.f;
  int fails = 0;
  cublasStatus_t s = cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 8, 8, 8, &one, a, 8, a, 8, &zero, stale, 8);
  if (s != CUBLAS_STATUS_SUCCESS) std::printf("FAIL posted gemm returned %d\n", int(s)), fails++;
  cudaError_t e = cudaDeviceSynchronize();
  if (e == cudaSuccess) std::printf("FAIL the bad gemm was not reported at synchronisation\n"), fails++;
  else std::printf("deferred error at cudaDeviceSynchronize: %s\n", cudaGetErrorName(e));
  cudaGetLastError();
  // The session still works.
  float x[4] = {1, 2, 3, 4}, r = 0;
  cudaMemcpy(a, x, sizeof x, cudaMemcpyHostToDevice);
  s = cublasSdot(h, 4, a, 1, a, 1, &r);
  if (s != CUBLAS_STATUS_SUCCESS || r != 30.f) std::printf("FAIL dot after the error: %d %g\n", int(s), r), fails++;
  if (cudaDeviceSynchronize() != cudaSuccess) std::printf("FAIL error reported twice\n"), fails++;
  // A handle that was destroyed is refused.
  cublasDestroy(h);
  std::printf("%s\n", fails ? "FAILED" : "OK");
  return fails ? 1 : 0;
}
