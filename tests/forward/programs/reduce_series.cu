// The classic series of block reductions, from interleaved addressing to
// warp shuffles, as CUDA courses and samples teach them: each kernel sums an
// array into one partial per block, the host adds the partials and compares
// with its own sum. int, float and double; a power-of-two length and a
// length that is not (and short ones); block sizes 64 to 512. The values are small integers,
// so every sum is exact in each type and the comparison is equality.
// The last kernel finishes its block's warp sums with a shuffle among the
// first few lanes only, shuffling with 32-lane offsets: lanes outside the
// branch contribute what a GPU gives them (0), a shape real programs rely on.
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cstdio>
#include <functional>
#include <vector>
#include "check.cuh"
namespace cg = cooperative_groups;

template <class T>
struct Shared {  // dynamic shared memory of type T
  __device__ T* get() {
    extern __shared__ unsigned char raw[];
    return reinterpret_cast<T*>(raw);
  }
};

// 0: interleaved addressing, divergent (tid % (2s) == 0).
template <class T>
__global__ void r0(const T* in, T* out, unsigned n) {
  T* s = Shared<T>().get();
  unsigned tid = threadIdx.x, i = blockIdx.x * blockDim.x + tid;
  s[tid] = i < n ? in[i] : T(0);
  __syncthreads();
  for (unsigned k = 1; k < blockDim.x; k *= 2) {
    if (tid % (2 * k) == 0) s[tid] += s[tid + k];
    __syncthreads();
  }
  if (tid == 0) out[blockIdx.x] = s[0];
}
// 1: interleaved addressing with a strided index.
template <class T>
__global__ void r1(const T* in, T* out, unsigned n) {
  T* s = Shared<T>().get();
  unsigned tid = threadIdx.x, i = blockIdx.x * blockDim.x + tid;
  s[tid] = i < n ? in[i] : T(0);
  __syncthreads();
  for (unsigned k = 1; k < blockDim.x; k *= 2) {
    unsigned at = 2 * k * tid;
    if (at < blockDim.x) s[at] += s[at + k];
    __syncthreads();
  }
  if (tid == 0) out[blockIdx.x] = s[0];
}
// 2: sequential addressing.
template <class T>
__global__ void r2(const T* in, T* out, unsigned n) {
  T* s = Shared<T>().get();
  unsigned tid = threadIdx.x, i = blockIdx.x * blockDim.x + tid;
  s[tid] = i < n ? in[i] : T(0);
  __syncthreads();
  for (unsigned k = blockDim.x / 2; k > 0; k >>= 1) {
    if (tid < k) s[tid] += s[tid + k];
    __syncthreads();
  }
  if (tid == 0) out[blockIdx.x] = s[0];
}
// 3: the first add while loading (two elements per thread).
template <class T>
__global__ void r3(const T* in, T* out, unsigned n) {
  T* s = Shared<T>().get();
  unsigned tid = threadIdx.x, i = blockIdx.x * blockDim.x * 2 + tid;
  T v = i < n ? in[i] : T(0);
  if (i + blockDim.x < n) v += in[i + blockDim.x];
  s[tid] = v;
  __syncthreads();
  for (unsigned k = blockDim.x / 2; k > 0; k >>= 1) {
    if (tid < k) s[tid] = v = v + s[tid + k];
    __syncthreads();
  }
  if (tid == 0) out[blockIdx.x] = s[0];
}
// 4: the last warp without block barriers (warp-synchronous, __syncwarp).
template <class T, unsigned BS>
__global__ void r4(const T* in, T* out, unsigned n) {
  T* s = Shared<T>().get();
  unsigned tid = threadIdx.x, i = blockIdx.x * BS * 2 + tid;
  T v = i < n ? in[i] : T(0);
  if (i + BS < n) v += in[i + BS];
  s[tid] = v;
  __syncthreads();
  for (unsigned k = BS / 2; k > 32; k >>= 1) {
    if (tid < k) s[tid] = v = v + s[tid + k];
    __syncthreads();
  }
  if (tid < 32) {
    for (unsigned k = 32; k > 0; k >>= 1) {
      if (BS >= 2 * k) v += s[tid + k];
      __syncwarp();
      s[tid] = v;
      __syncwarp();
    }
  }
  if (tid == 0) out[blockIdx.x] = v;
}
// 5: the block-size loop unrolled at compile time, the last warp unrolled too.
template <class T, unsigned BS>
__global__ void r5(const T* in, T* out, unsigned n) {
  T* s = Shared<T>().get();
  unsigned tid = threadIdx.x, i = blockIdx.x * BS * 2 + tid;
  T v = i < n ? in[i] : T(0);
  if (i + BS < n) v += in[i + BS];
  s[tid] = v;
  __syncthreads();
  if (BS >= 512 && tid < 256) s[tid] = v = v + s[tid + 256];
  if (BS >= 512) __syncthreads();
  if (BS >= 256 && tid < 128) s[tid] = v = v + s[tid + 128];
  if (BS >= 256) __syncthreads();
  if (BS >= 128 && tid < 64) s[tid] = v = v + s[tid + 64];
  if (BS >= 128) __syncthreads();
  if (tid < 32) {
    if (BS >= 64) { v += s[tid + 32]; __syncwarp(); s[tid] = v; __syncwarp(); }
    if (BS >= 32) { v += s[tid + 16]; __syncwarp(); s[tid] = v; __syncwarp(); }
    v += s[tid + 8]; __syncwarp(); s[tid] = v; __syncwarp();
    v += s[tid + 4]; __syncwarp(); s[tid] = v; __syncwarp();
    v += s[tid + 2]; __syncwarp(); s[tid] = v; __syncwarp();
    v += s[tid + 1];
  }
  if (tid == 0) out[blockIdx.x] = v;
}
// 6: several elements per thread (grid-stride), fully unrolled on the
// block size, the power-of-two case reading two per step.
template <class T, unsigned BS, bool Pow2>
__global__ void r6(const T* in, T* out, unsigned n) {
  T* s = Shared<T>().get();
  unsigned tid = threadIdx.x;
  T v = 0;
  if (Pow2) {
    unsigned i = blockIdx.x * BS * 2 + tid, step = BS * 2 * gridDim.x;
    for (; i < n; i += step) {
      v += in[i];
      if (i + BS < n) v += in[i + BS];
    }
  } else {
    for (unsigned i = blockIdx.x * BS + tid; i < n; i += BS * gridDim.x) v += in[i];
  }
  s[tid] = v;
  __syncthreads();
#pragma unroll
  for (unsigned k = BS / 2; k > 0; k >>= 1) {
    if (tid < k) s[tid] = v = v + s[tid + k];
    __syncthreads();
  }
  if (tid == 0) out[blockIdx.x] = v;
}
// 7: warp shuffles, then the warps' sums reduced by the first lanes alone.
// warpSize is a run-time value in PTX: this loop stays a loop, both stages
// share it, and the last stage's lanes outside the branch still hold their
// first-stage sums in its register.
template <class T>
__device__ T warp_sum(unsigned mask, T v) {
  for (int k = warpSize / 2; k > 0; k /= 2) v += __shfl_down_sync(mask, v, k);
  return v;
}
template <class T, unsigned BS, bool Pow2>
__global__ void r7(const T* in, T* out, unsigned n) {
  T* s = Shared<T>().get();
  unsigned tid = threadIdx.x;
  const unsigned mask = 0xffffffffu >> ((BS & 31) ? 32 - (BS & 31) : 0);
  T v = 0;
  if (Pow2) {
    for (unsigned i = blockIdx.x * BS * 2 + tid; i < n; i += BS * 2 * gridDim.x) {
      v += in[i];
      if (i + BS < n) v += in[i + BS];
    }
  } else {
    for (unsigned i = blockIdx.x * BS + tid; i < n; i += BS * gridDim.x) v += in[i];
  }
  v = warp_sum(mask, v);
  if (tid % 32 == 0) s[tid / 32] = v;
  __syncthreads();
  const unsigned warps = BS / 32 > 0 ? BS / 32 : 1;
  const unsigned lanes = __ballot_sync(mask, tid < warps);
  if (tid < warps) {
    v = s[tid];
    v = warp_sum(lanes, v);  // offsets 16..1 among `warps` lanes
  }
  if (tid == 0) out[blockIdx.x] = v;
}

// 7, cooperative-groups form: 32-lane tiles reduce with cg::reduce, the tiles'
// sums meet in shared memory, the first tile reduces them (lanes past the
// number of tiles contribute 0).
template <class T, unsigned BS, bool Pow2>
__global__ void r7cg(const T* in, T* out, unsigned n) {
  T* s = Shared<T>().get();
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<32> tile = cg::tiled_partition<32>(block);
  T v = 0;
  if (Pow2) {
    for (unsigned i = blockIdx.x * BS * 2 + threadIdx.x; i < n; i += BS * 2 * gridDim.x) {
      v += in[i];
      if (i + BS < n) v += in[i + BS];
    }
  } else {
    for (unsigned i = blockIdx.x * BS + threadIdx.x; i < n; i += BS * gridDim.x) v += in[i];
  }
  v = cg::reduce(tile, v, cg::plus<T>());
  if (tile.thread_rank() == 0) s[tile.meta_group_rank()] = v;
  block.sync();
  if (tile.meta_group_rank() == 0) {
    v = tile.thread_rank() < tile.meta_group_size() ? s[tile.thread_rank()] : T(0);
    v = cg::reduce(tile, v, cg::plus<T>());
    if (tile.thread_rank() == 0) out[blockIdx.x] = v;
  }
}

// 8, multi-warp tiles: 64-thread tiles reduce with cg::reduce (built for
// compute capability 8.0 and later, their scratch is the block's reserved
// shared memory, %reserved_smem_offset_1; before, block_tile_memory), the
// tiles' sums meet in shared memory and the first thread adds them.
template <class T, unsigned BS>
__global__ void r8mw(const T* in, T* out, unsigned n) {
  __shared__ cg::block_tile_memory<BS> scratch;
  T* s = Shared<T>().get();
  cg::thread_block block = cg::this_thread_block(scratch);
  cg::thread_block_tile<64> tile = cg::tiled_partition<64>(block);
  T v = 0;
  for (unsigned i = blockIdx.x * BS + threadIdx.x; i < n; i += BS * gridDim.x) v += in[i];
  v = cg::reduce(tile, v, cg::plus<T>());
  if (tile.thread_rank() == 0) s[tile.meta_group_rank()] = v;
  block.sync();
  if (block.thread_rank() == 0) {
    T t = 0;
    for (unsigned k = 0; k < tile.meta_group_size(); ++k) t += s[k];
    out[blockIdx.x] = t;
  }
}

// The kernels templated on the block size, for one block size.
template <class T, unsigned BS>
void run_templated(const T* din, T* dout, unsigned n, bool pow2,
                   const std::function<void(const char*, unsigned, unsigned)>& check) {
  const size_t sh = BS * sizeof(T), sh7 = (BS / 32 + 1) * sizeof(T);
  const unsigned b2 = (n + 2 * BS - 1) / (2 * BS), g = 64;  // 64 blocks, several elements per thread
  r4<T, BS><<<b2, BS, sh>>>(din, dout, n); check("reduce4", BS, b2);
  r5<T, BS><<<b2, BS, sh + 32 * sizeof(T)>>>(din, dout, n); check("reduce5", BS, b2);
  if (pow2) r6<T, BS, true><<<g, BS, sh>>>(din, dout, n); else r6<T, BS, false><<<g, BS, sh>>>(din, dout, n);
  check("reduce6", BS, g);
  if (pow2) r7<T, BS, true><<<g, BS, sh7>>>(din, dout, n); else r7<T, BS, false><<<g, BS, sh7>>>(din, dout, n);
  check("reduce7", BS, g);
  if (pow2) r7cg<T, BS, true><<<g, BS, sh7>>>(din, dout, n); else r7cg<T, BS, false><<<g, BS, sh7>>>(din, dout, n);
  check("reduce7-cg", BS, g);
  r8mw<T, BS><<<g, BS, sh7>>>(din, dout, n); check("reduce8-multiwarp", BS, g);
  // the non-power-of-two instantiation on a power-of-two length too (one element per step)
  r7<T, BS, false><<<g, BS, sh7>>>(din, dout, n); check("reduce7-np2", BS, g);
}

template <class T>
bool run_all(const char* type, unsigned n) {
  std::vector<T> h(n);
  long long want = 0;
  for (unsigned i = 0; i < n; i++) {
    h[i] = T((i * 2654435761u >> 20) % 8);
    want += (long long)h[i];
  }
  T *din, *dout;
  CHECK(cudaMalloc(&din, n * sizeof(T)));
  const unsigned max_blocks = (n + 63) / 64 > 64 ? (n + 63) / 64 : 64;
  CHECK(cudaMalloc(&dout, max_blocks * sizeof(T)));
  CHECK(cudaMemcpy(din, h.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  const bool pow2 = (n & (n - 1)) == 0;
  bool ok = true;
  auto check = [&](const char* name, unsigned threads, unsigned blocks) {
    CHECK(cudaGetLastError());
    std::vector<T> parts(blocks);
    CHECK(cudaMemcpy(parts.data(), dout, blocks * sizeof(T), cudaMemcpyDeviceToHost));
    long long got = 0;
    for (T p : parts) got += (long long)p;
    if (got != want) {
      std::fprintf(stderr, "FAIL %s<%s> n=%u threads=%u blocks=%u: sum %lld, want %lld\n", name, type, n, threads,
                   blocks, got, want);
      ok = false;
    }
  };
  for (unsigned t : {64u, 128u, 256u, 512u}) {
    const size_t sh = t * sizeof(T);
    unsigned b1 = (n + t - 1) / t, b2 = (n + 2 * t - 1) / (2 * t);
    r0<T><<<b1, t, sh>>>(din, dout, n); check("reduce0", t, b1);
    r1<T><<<b1, t, sh>>>(din, dout, n); check("reduce1", t, b1);
    r2<T><<<b1, t, sh>>>(din, dout, n); check("reduce2", t, b1);
    r3<T><<<b2, t, sh>>>(din, dout, n); check("reduce3", t, b2);
    switch (t) {
      case 64: run_templated<T, 64>(din, dout, n, pow2, check); break;
      case 128: run_templated<T, 128>(din, dout, n, pow2, check); break;
      case 256: run_templated<T, 256>(din, dout, n, pow2, check); break;
      default: run_templated<T, 512>(din, dout, n, pow2, check); break;
    }
  }
  CHECK(cudaFree(din));
  CHECK(cudaFree(dout));
  return ok;
}

int main(int argc, char** argv) {
  unsigned n1 = argc > 1 ? unsigned(std::atoi(argv[1])) : (1u << 20);
  unsigned n2 = n1 + 3;  // not a power of two
  bool ok = true;
  for (unsigned n : {n1, n2, 1000u, 1u}) {
    ok &= run_all<int>("int", n);
    ok &= run_all<float>("float", n);
    ok &= run_all<double>("double", n);
  }
  if (!ok) return 1;
  std::printf("PASS reduce_series\n");
  return 0;
}
