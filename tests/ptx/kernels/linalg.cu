// Test kernels: shared memory, barriers, warp shuffles, atomics, scans, tensor cores.
#include <cuda_bf16.h>
#include <mma.h>
#define TILE 16

extern "C" __global__ void matmul_tiled(const float* A, const float* B, float* C, int M, int N, int K) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE];
  int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
  float acc = 0.f;
  for (int t = 0; t < (K + TILE - 1) / TILE; ++t) {
    int ak = t * TILE + threadIdx.x, bk = t * TILE + threadIdx.y;
    As[threadIdx.y][threadIdx.x] = (row < M && ak < K) ? A[row * K + ak] : 0.f;
    Bs[threadIdx.y][threadIdx.x] = (bk < K && col < N) ? B[bk * N + col] : 0.f;
    __syncthreads();
    for (int k = 0; k < TILE; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
    __syncthreads();
  }
  if (row < M && col < N) C[row * N + col] = acc;
}

extern "C" __global__ void transpose(const float* in, float* out, int rows, int cols) {
  __shared__ float tile[TILE][TILE + 1];
  int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
  if (x < cols && y < rows) tile[threadIdx.y][threadIdx.x] = in[y * cols + x];
  __syncthreads();
  x = blockIdx.y * TILE + threadIdx.x;
  y = blockIdx.x * TILE + threadIdx.y;
  if (x < rows && y < cols) out[y * rows + x] = tile[threadIdx.x][threadIdx.y];
}

extern "C" __global__ void block_reduce(const float* in, float* out, int n) {
  extern __shared__ float sdata[];
  unsigned t = threadIdx.x, i = blockIdx.x * blockDim.x * 2 + threadIdx.x;
  float v = 0.f;
  if (i < n) v += in[i];
  if (i + blockDim.x < n) v += in[i + blockDim.x];
  sdata[t] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (t < s) sdata[t] += sdata[t + s];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = sdata[0];
}

__inline__ __device__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  return v;
}
extern "C" __global__ void warp_reduce(const float* in, float* out, int n) {
  __shared__ float warps[32];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = i < n ? in[i] : 0.f;
  v = warp_sum(v);
  int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  if (lane == 0) warps[w] = v;
  __syncthreads();
  if (w == 0) {
    v = lane < (blockDim.x + 31) / 32 ? warps[lane] : 0.f;
    v = warp_sum(v);
    if (lane == 0) atomicAdd(out, v);
  }
}

// Other shuffle flavours: xor butterfly (all lanes get the sum), up-scan and idx broadcast.
extern "C" __global__ void shuffle_modes(const int* in, int* xor_sum, int* up_scan, int* bcast) {
  int i = blockIdx.x * blockDim.x + threadIdx.x, lane = threadIdx.x & 31;
  int v = in[i];
  int s = v;
  for (int o = 1; o < 32; o <<= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  xor_sum[i] = s;
  int p = v;
  for (int o = 1; o < 32; o <<= 1) {
    int y = __shfl_up_sync(0xffffffffu, p, o);
    if (lane >= o) p += y;
  }
  up_scan[i] = p;
  bcast[i] = __shfl_sync(0xffffffffu, v, (lane * 7) & 31);
}

extern "C" __global__ void histogram(const unsigned char* data, unsigned* bins, int n) {
  __shared__ unsigned local[256];
  for (int b = threadIdx.x; b < 256; b += blockDim.x) local[b] = 0;
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) atomicAdd(&local[data[i]], 1u);
  __syncthreads();
  for (int b = threadIdx.x; b < 256; b += blockDim.x)
    if (local[b]) atomicAdd(&bins[b], local[b]);
}

// Inclusive scan of each 256-element block (Hillis-Steele, double buffered), plus block totals.
extern "C" __global__ void scan_block(const int* in, int* out, int* totals, int n) {
  __shared__ int buf[2][256];
  int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
  int pout = 0, pin = 1;
  buf[pout][t] = i < n ? in[i] : 0;
  __syncthreads();
  for (int off = 1; off < blockDim.x; off <<= 1) {
    pout = 1 - pout;
    pin = 1 - pout;
    buf[pout][t] = t >= off ? buf[pin][t] + buf[pin][t - off] : buf[pin][t];
    __syncthreads();
  }
  if (i < n) out[i] = buf[pout][t];
  if (t == blockDim.x - 1) totals[blockIdx.x] = buf[pout][t];
}
extern "C" __global__ void scan_add(int* out, const int* offsets, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && blockIdx.x > 0) out[i] += offsets[blockIdx.x - 1];
}

// C (MxN, f32) = A (MxK) * B (KxN), bf16, both row-major: one warp per 16x16 tile of C,
// fragments loaded straight from global memory (wmma.load/mma/store). bf16 fragments need
// sm_80: the sm_75 build has an empty body.
extern "C" __global__ void matmul_wmma_bf16(const __nv_bfloat16* A, const __nv_bfloat16* B, float* C, int M, int N, int K) {
#if __CUDA_ARCH__ >= 800
  using namespace nvcuda;
  const int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32, tiles_n = N / 16;
  const int tm = warp / tiles_n * 16, tn = warp % tiles_n * 16;
  if (tm >= M) return;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
  wmma::fill_fragment(c, 0.f);
  for (int k = 0; k < K; k += 16) {
    wmma::load_matrix_sync(a, A + tm * K + k, K);
    wmma::load_matrix_sync(b, B + k * N + tn, N);
    wmma::mma_sync(c, a, b, c);
  }
  wmma::store_matrix_sync(C + tm * N + tn, c, N, wmma::mem_row_major);
#endif
}
