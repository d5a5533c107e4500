// Test kernels: calls, local memory, globals, dynamic shared, atomics, votes, fp16, fp64, errors.
#include <cassert>
#include <cstdio>
#include <cuda_fp16.h>

__constant__ float c_coeffs[4] = {0.5f, -1.25f, 2.0f, 3.5f};
__device__ int g_counter = 100;
__device__ float g_table[8] = {1, 2, 3, 4, 5, 6, 7, 8};

// Not inlined: exercises .func with parameters, a return value and a local-memory array.
__device__ __noinline__ float poly_local(const float* src, int n, int stride) {
  float tmp[32];
  for (int i = 0; i < 32; ++i) tmp[i] = src[(i * stride) % n];
  float acc = 0.f;
  for (int i = 0; i < 32; ++i) acc += tmp[(i * 5 + stride) & 31] * (float)(i + 1);
  return acc;
}
extern "C" __global__ void call_local(const float* src, float* out, int n) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  out[t] = poly_local(src, n, t % 7 + 1);
}

extern "C" __global__ void globals_kernel(float* out, int* counter_out) {
  int t = threadIdx.x;
  out[t] = c_coeffs[t & 3] * g_table[t & 7];
  atomicAdd(&g_counter, 1);
  __syncthreads();
  if (t == 0) counter_out[0] = g_counter;  // only meaningful with one block
}

extern "C" __global__ void dyn_shared_reverse(const int* in, int* out, int n) {
  extern __shared__ int s[];
  int t = threadIdx.x;
  if (t < n) s[t] = in[blockIdx.x * n + t];
  __syncthreads();
  if (t < n) out[blockIdx.x * n + t] = s[n - 1 - t];
}

// results layout: 0 add,1 min,2 max,3 exch(count),4 cas,5 inc,6 dec,7 and,8 or,9 xor (global, u32), 10 fadd bits
extern "C" __global__ void atomics_global(unsigned* r, float* f, const unsigned* vals, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned v = vals[i];
  atomicAdd(&r[0], v);
  atomicMin(&r[1], v);
  atomicMax(&r[2], v);
  unsigned old = atomicExch(&r[3], (unsigned)i);
  (void)old;
  atomicCAS(&r[4], (unsigned)i, (unsigned)i + 1);  // r[4] counts up when threads happen to meet the value
  atomicInc(&r[5], 9u);
  atomicDec(&r[6], 1000u);
  atomicAnd(&r[7], ~(1u << (i & 31)) | 0x80000000u);
  atomicOr(&r[8], 1u << (i & 15));
  atomicXor(&r[9], v);
  atomicAdd(f, 0.5f);
  atomicMax((int*)&r[10], -(int)v);
  atomicMin((int*)&r[11], -(int)v);
}
extern "C" __global__ void atomics_shared(const unsigned* vals, unsigned* out, int n) {
  __shared__ unsigned s[12];
  __shared__ float sf;
  int t = threadIdx.x;
  if (t == 0) {
    s[0] = 0; s[1] = 0xffffffffu; s[2] = 0; s[3] = 0; s[4] = 0; s[5] = 0; s[6] = 50; s[7] = 0xffffffffu; s[8] = 0; s[9] = 0;
    sf = 0.f;
  }
  __syncthreads();
  if (t < n) {
    unsigned v = vals[t];
    atomicAdd(&s[0], v);
    atomicMin(&s[1], v);
    atomicMax(&s[2], v);
    atomicExch(&s[3], v);
    atomicCAS(&s[4], (unsigned)t, (unsigned)t + 1);
    atomicInc(&s[5], 7u);
    atomicDec(&s[6], 100u);
    atomicAnd(&s[7], ~(1u << (t & 31)));
    atomicOr(&s[8], 1u << (t & 31));
    atomicXor(&s[9], v);
    atomicAdd(&sf, 0.25f);
  }
  __syncthreads();
  if (t < 10) out[t] = s[t];
  if (t == 10) out[10] = __float_as_uint(sf);
}

extern "C" __global__ void vote_ballot(const int* in, unsigned* ballots, int* any, int* all, int* pop, unsigned* match) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int v = in[i];
  unsigned b = __ballot_sync(0xffffffffu, v > 0);
  int a = __any_sync(0xffffffffu, v > 100);
  int l = __all_sync(0xffffffffu, v > -1000);
  unsigned m = __match_any_sync(0xffffffffu, v & 3);
  if ((threadIdx.x & 31) == 0) {
    ballots[i / 32] = b;
    any[i / 32] = a;
    all[i / 32] = l;
  }
  pop[i] = __popc(b) + __syncthreads_count(v > 0) * 1000;
  match[i] = m;
}

extern "C" __global__ void fp16_convert(const float* in, unsigned short* h, float* back, float* sum, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  __half x = __float2half(in[i]);
  h[i] = __half_as_ushort(x);
  back[i] = __half2float(x);
  __half y = __hadd(x, __float2half(1.0f));
  sum[i] = __half2float(__hmul(y, x));
}

extern "C" __global__ void double_math(const double* a, const double* b, double* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  double x = a[i], y = b[i];
  out[4 * i + 0] = x * y + x / y;
  out[4 * i + 1] = fma(x, y, -x) - sqrt(fabs(y));
  out[4 * i + 2] = (double)(long long)(x * 1000.0) + (double)(float)y;
  out[4 * i + 3] = fmax(x, y) - fmin(x, y);
}

extern "C" __global__ void int_ops(const int* a, const int* b, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int x = a[i], y = b[i];
  unsigned ux = (unsigned)x, uy = (unsigned)y;
  out[12 * i + 0] = y != 0 ? x / y : 0;
  out[12 * i + 1] = y != 0 ? x % y : 0;
  out[12 * i + 2] = __mulhi(x, y);
  out[12 * i + 3] = (int)(__umulhi(ux, uy));
  out[12 * i + 4] = __clz(x) + __popc(y) * 64;
  out[12 * i + 5] = (int)__brev(ux);
  out[12 * i + 6] = x >> (y & 31);
  out[12 * i + 7] = (int)(ux >> (uy & 31));
  out[12 * i + 8] = (int)((long long)x * (long long)y >> 7);
  out[12 * i + 9] = __ffs(x) + __byte_perm(x, y, 0x5140);
  out[12 * i + 10] = min(x, y) * 3 + max(x, y) + abs(x);
  out[12 * i + 11] = (int)((ux / (uy | 1u)) ^ (ux % (uy | 1u)));
}

extern "C" __global__ void assert_kernel(const int* in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) assert(in[i] >= 0);
}

extern "C" __global__ void oob_write(float* p, int idx) { if (threadIdx.x == 0) p[idx] = 1.0f; }

extern "C" __global__ void printf_kernel(int v) {
  if (threadIdx.x == 0) printf("ptx-printf v=%d f=%.2f s=%s\n", v, 1.5f, "ok");
}

extern "C" __global__ void trap_kernel() { __trap(); }

// Divergent control flow inside a warp followed by reconvergence and a shuffle.
extern "C" __global__ void diverge(const int* in, int* out) {
  int t = threadIdx.x;
  int v = in[t];
  if (t & 1) {
    for (int k = 0; k < (t & 7); ++k) v = v * 3 + k;
  } else if (t & 2) {
    v = -v;
  } else {
    while (v > 10) v -= 7;
  }
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  out[t] = v;
}
