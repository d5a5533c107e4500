// Asynchronous copies from global into shared memory as CUDA 11+ programs write
// them: a tiled matrix product whose tiles arrive through cuda::memcpy_async
// tracked by a block-scope cuda::barrier (cp.async + cp.async.mbarrier.arrive),
// the same through a two-stage cuda::pipeline (commit/wait groups), and a
// block-wide cooperative_groups::memcpy_async + wait. Results against host loops.
#include <cooperative_groups.h>
#include <cooperative_groups/memcpy_async.h>
#include <cuda/barrier>
#include <cuda/pipeline>

#include <cmath>
#include <vector>
#include "check.cuh"

namespace cg = cooperative_groups;
constexpr int T = 16;  // tile edge; blocks of T x T threads

// C = A * B (n x n, n a multiple of T); tiles copied with memcpy_async on a barrier.
__global__ void matmul_barrier(const float* A, const float* B, float* C, int n) {
  __shared__ float As[T][T], Bs[T][T];
#pragma nv_diag_suppress static_var_with_dynamic_init
  __shared__ cuda::barrier<cuda::thread_scope_block> bar;
  auto block = cg::this_thread_block();
  if (block.thread_rank() == 0) init(&bar, block.size());
  block.sync();
  const int ty = threadIdx.y, tx = threadIdx.x, row = blockIdx.y * T + ty, col = blockIdx.x * T + tx;
  float acc = 0.f;
  for (int t = 0; t < n / T; ++t) {
    cuda::memcpy_async(&As[ty][tx], &A[row * n + t * T + tx], sizeof(float), bar);
    cuda::memcpy_async(&Bs[ty][tx], &B[(t * T + ty) * n + col], sizeof(float), bar);
    bar.arrive_and_wait();  // every thread's copies have landed
    for (int k = 0; k < T; ++k) acc += As[ty][k] * Bs[k][tx];
    bar.arrive_and_wait();  // the tiles are free again
  }
  C[row * n + col] = acc;
}

// The same with a per-thread two-stage pipeline: tile t+1 is in flight while t is used.
__global__ void matmul_pipeline(const float* A, const float* B, float* C, int n) {
  __shared__ float As[2][T][T], Bs[2][T][T];
  cuda::pipeline<cuda::thread_scope_thread> pipe = cuda::make_pipeline();
  const int ty = threadIdx.y, tx = threadIdx.x, row = blockIdx.y * T + ty, col = blockIdx.x * T + tx;
  const int tiles = n / T;
  auto fetch = [&](int t) {
    pipe.producer_acquire();
    cuda::memcpy_async(&As[t % 2][ty][tx], &A[row * n + t * T + tx], sizeof(float), pipe);
    cuda::memcpy_async(&Bs[t % 2][ty][tx], &B[(t * T + ty) * n + col], sizeof(float), pipe);
    pipe.producer_commit();
  };
  fetch(0);
  float acc = 0.f;
  for (int t = 0; t < tiles; ++t) {
    if (t + 1 < tiles) fetch(t + 1);
    cuda::pipeline_consumer_wait_prior<1>(pipe);
    if (t + 1 >= tiles) cuda::pipeline_consumer_wait_prior<0>(pipe);
    __syncthreads();
    for (int k = 0; k < T; ++k) acc += As[t % 2][ty][k] * Bs[t % 2][k][tx];
    __syncthreads();
    pipe.consumer_release();
  }
  C[row * n + col] = acc;
}

// Each block copies its 1024-element slice into shared memory with one collective
// memcpy_async and writes it back reversed.
__global__ void reverse_slices(const int* in, int* out) {
  __shared__ int s[1024];
  auto block = cg::this_thread_block();
  cg::memcpy_async(block, s, in + blockIdx.x * 1024, sizeof(int) * 1024);
  cg::wait(block);
  for (int i = threadIdx.x; i < 1024; i += blockDim.x) out[blockIdx.x * 1024 + i] = s[1023 - i];
}

int main() {
  const int n = 64;
  std::vector<float> a(n * n), b(n * n), ref(n * n), got(n * n);
  for (int i = 0; i < n * n; ++i) a[i] = float((i * 7) % 13) - 6.f, b[i] = float((i * 5) % 11) * 0.25f;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      float s = 0.f;
      for (int k = 0; k < n; ++k) s += a[i * n + k] * b[k * n + j];
      ref[i * n + j] = s;
    }
  float *dA, *dB, *dC;
  CHECK(cudaMalloc(&dA, n * n * 4));
  CHECK(cudaMalloc(&dB, n * n * 4));
  CHECK(cudaMalloc(&dC, n * n * 4));
  CHECK(cudaMemcpy(dA, a.data(), n * n * 4, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dB, b.data(), n * n * 4, cudaMemcpyHostToDevice));
  const dim3 grid(n / T, n / T), blk(T, T);
  const char* names[] = {"barrier", "pipeline"};
  for (int v = 0; v < 2; ++v) {
    CHECK(cudaMemset(dC, 0xff, n * n * 4));
    if (v == 0) matmul_barrier<<<grid, blk>>>(dA, dB, dC, n);
    else matmul_pipeline<<<grid, blk>>>(dA, dB, dC, n);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(got.data(), dC, n * n * 4, cudaMemcpyDeviceToHost));
    for (int i = 0; i < n * n; ++i)
      EXPECT(std::fabs(got[i] - ref[i]) <= 1e-3f * (1.f + std::fabs(ref[i])), "matmul_%s: C[%d] = %g, expected %g", names[v],
             i, got[i], ref[i]);
  }
  const int blocks = 8;
  std::vector<int> in(blocks * 1024), out(blocks * 1024);
  for (int i = 0; i < blocks * 1024; ++i) in[i] = i * 3 + 1;
  int *dIn, *dOut;
  CHECK(cudaMalloc(&dIn, in.size() * 4));
  CHECK(cudaMalloc(&dOut, in.size() * 4));
  CHECK(cudaMemcpy(dIn, in.data(), in.size() * 4, cudaMemcpyHostToDevice));
  reverse_slices<<<blocks, 128>>>(dIn, dOut);
  CHECK(cudaGetLastError());
  CHECK(cudaMemcpy(out.data(), dOut, out.size() * 4, cudaMemcpyDeviceToHost));
  for (int bI = 0; bI < blocks; ++bI)
    for (int i = 0; i < 1024; ++i)
      EXPECT(out[bI * 1024 + i] == in[bI * 1024 + 1023 - i], "reverse_slices: out[%d] = %d", bI * 1024 + i, out[bI * 1024 + i]);
  CHECK(cudaFree(dA));
  CHECK(cudaFree(dB));
  CHECK(cudaFree(dC));
  CHECK(cudaFree(dIn));
  CHECK(cudaFree(dOut));
  std::printf("PASS async_copy\n");
  return 0;
}
