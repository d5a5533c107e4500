// Tiled matrix multiply with shared memory against a host reference.
// An optional argument repeats the kernel (a longer-running workload).
#include <cmath>
#include <cstdlib>
#include <vector>
#include "check.cuh"

constexpr int T = 16;
__global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K) {
  __shared__ float a[T][T], b[T][T];
  int r = blockIdx.y * T + threadIdx.y, c = blockIdx.x * T + threadIdx.x;
  float acc = 0;
  for (int k0 = 0; k0 < K; k0 += T) {
    a[threadIdx.y][threadIdx.x] = (r < M && k0 + threadIdx.x < K) ? A[r * K + k0 + threadIdx.x] : 0.f;
    b[threadIdx.y][threadIdx.x] = (c < N && k0 + threadIdx.y < K) ? B[(k0 + threadIdx.y) * N + c] : 0.f;
    __syncthreads();
    for (int k = 0; k < T; k++) acc += a[threadIdx.y][k] * b[k][threadIdx.x];
    __syncthreads();
  }
  if (r < M && c < N) C[r * N + c] = acc;
}

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 1;
  const int M = 100, N = 70, K = 130;
  std::vector<float> A(M * K), B(K * N), C(M * N), R(M * N);
  for (int i = 0; i < M * K; i++) A[i] = float((i * 13) % 17) / 7.f - 1.f;
  for (int i = 0; i < K * N; i++) B[i] = float((i * 5) % 11) / 5.f - 1.f;
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double s = 0;
      for (int k = 0; k < K; k++) s += double(A[i * K + k]) * B[k * N + j];
      R[i * N + j] = float(s);
    }
  float *dA, *dB, *dC;
  CHECK(cudaMalloc(&dA, A.size() * 4));
  CHECK(cudaMalloc(&dB, B.size() * 4));
  CHECK(cudaMalloc(&dC, C.size() * 4));
  CHECK(cudaMemcpy(dA, A.data(), A.size() * 4, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dB, B.data(), B.size() * 4, cudaMemcpyHostToDevice));
  dim3 block(T, T), grid((N + T - 1) / T, (M + T - 1) / T);
  for (int r = 0; r < reps; r++) {
    matmul<<<grid, block>>>(dA, dB, dC, M, N, K);
    CHECK(cudaGetLastError());
  }
  CHECK(cudaMemcpy(C.data(), dC, C.size() * 4, cudaMemcpyDeviceToHost));
  for (int i = 0; i < M * N; i++) EXPECT(std::fabs(C[i] - R[i]) < 1e-3f, "i=%d got %f want %f", i, C[i], R[i]);
  std::printf("PASS matmul\n");
  return 0;
}
