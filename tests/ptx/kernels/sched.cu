// Kernels whose warps or blocks wait on each other (spin-waits, grid barriers), and
// kernels that never finish: they need preemptive scheduling and cancellation.
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cuda/atomic>

namespace cg = cooperative_groups;

// Warp 1 produces, warp 0 (scheduled first) polls a volatile shared flag, then
// sums what warp 1 wrote. out[block] = sum(in[i] * 3 + 1).
extern "C" __global__ void producer_consumer(const int* in, int* out, int n) {
  __shared__ volatile int ready;
  __shared__ int buf[1024];
  if (threadIdx.x == 0) ready = 0;
  __syncthreads();
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (warp == 1) {
    for (int i = lane; i < n; i += 32) buf[i] = in[i] * 3 + 1;
    __threadfence_block();
    __syncwarp();
    if (lane == 0) ready = 1;
  } else if (warp == 0) {
    while (ready == 0) {
    }
    __threadfence_block();
    int s = 0;
    for (int i = lane; i < n; i += 32) s += ((volatile int*)buf)[i];
    for (int o = 16; o; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
    if (lane == 0) out[blockIdx.x] = s;
  }
}

// Warps take turns in reverse order of their index: lane 0 of warp w polls with
// acquire loads and __nanosleep until turn == nwarps-1-w, logs, then releases the
// next turn. order[block * nwarps + k] = the warp that had turn k.
extern "C" __global__ void acquire_release_turns(int* turns, int* order) {
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;
  cuda::atomic_ref<int, cuda::thread_scope_device> turn(turns[blockIdx.x]);
  if (lane == 0) {
    int mine = nw - 1 - warp;
    while (turn.load(cuda::memory_order_acquire) != mine) __nanosleep(64);
    order[blockIdx.x * nw + mine] = warp;
    turn.store(mine + 1, cuda::memory_order_release);
  }
  __syncwarp();
}

// Block b waits for block b+1 (the last block starts): out[b] = sum_{k>=b} (k+1).
extern "C" __global__ void block_chain(volatile int* flags, volatile int* out) {
  __shared__ int prev;
  int b = blockIdx.x, nb = gridDim.x;
  if (threadIdx.x == 0) {
    int p = 0;
    if (b + 1 < nb) {
      while (flags[b + 1] == 0) {
      }
      __threadfence();
      p = out[b + 1];
    }
    prev = p;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    out[b] = prev + b + 1;
    __threadfence();
    flags[b] = 1;
  }
}

// The same chain polling through a call: the loop itself shows no polling load, so
// only the time quantum lets the worker take the later blocks.
__device__ __noinline__ int flag_set(volatile int* flags, int i) { return flags[i]; }
extern "C" __global__ void block_chain_called(volatile int* flags, volatile int* out) {
  int b = blockIdx.x, nb = gridDim.x;
  if (threadIdx.x == 0) {
    int p = 0;
    if (b + 1 < nb) {
      while (!flag_set(flags, b + 1)) {
      }
      __threadfence();
      p = out[b + 1];
    }
    out[b] = p + b + 1;
    __threadfence();
    flags[b] = 1;
  }
}

// Tiles of 32 add their cg::reduce sums in reverse order; the whole tile polls the
// shared turn with tile.all(). out[block] = fold of acc = acc * 3 + tile_sum.
extern "C" __global__ void tile_turns(const int* in, int* out) {
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<32> tile = cg::tiled_partition<32>(block);
  __shared__ int turn, acc;
  if (block.thread_rank() == 0) {
    turn = 0;
    acc = 0;
  }
  block.sync();
  int t = tile.meta_group_rank(), nt = tile.meta_group_size();
  int s = cg::reduce(tile, in[blockIdx.x * blockDim.x + block.thread_rank()], cg::plus<int>());
  while (!tile.all(((volatile int&)turn) == nt - 1 - t)) {
  }
  if (tile.thread_rank() == 0) {
    ((volatile int&)acc) = ((volatile int&)acc) * 3 + s;
    __threadfence_block();
    ((volatile int&)turn) = nt - t;
  }
  block.sync();
  if (block.thread_rank() == 0) out[blockIdx.x] = acc;
}

__device__ int block_sum(int v) {
  __shared__ int sh[1024];
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int o = blockDim.x / 2; o; o >>= 1) {
    if (threadIdx.x < o) sh[threadIdx.x] += sh[threadIdx.x + o];
    __syncthreads();
  }
  int r = sh[0];
  __syncthreads();
  return r;
}

// Reduction over the whole grid with cooperative groups' grid.sync() (launched
// cooperatively): partial[b] per block, then every block sums the partials into
// out[b]; after a second grid.sync() block 0 counts the blocks that agree.
extern "C" __global__ void grid_sync_sum(const int* in, int* partial, int* out, int n) {
  cg::grid_group g = cg::this_grid();
  int s = 0;
  for (unsigned long long i = g.thread_rank(); i < (unsigned long long)n; i += g.size()) s += in[i];
  s = block_sum(s);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
  g.sync();
  if (threadIdx.x == 0) {
    int t = 0;
    for (unsigned b = 0; b < gridDim.x; ++b) t += ((volatile int*)partial)[b];
    out[blockIdx.x] = t;
  }
  g.sync();
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    int agree = 0;
    for (unsigned b = 0; b < gridDim.x; ++b) agree += ((volatile int*)out)[b] == out[0];
    out[gridDim.x] = agree;
  }
}

// The same with a hand-written grid barrier (arrival counter + generation), for
// ordinary launches: bar[0] = arrivals, bar[1] = generation, both zero at launch.
__device__ void grid_barrier(unsigned* bar) {
  __syncthreads();
  if (threadIdx.x == 0) {
    volatile unsigned* gen = bar + 1;
    unsigned g = *gen;
    __threadfence();
    if (atomicAdd(bar, 1u) == gridDim.x - 1) {
      atomicExch(bar, 0u);
      __threadfence();
      *gen = g + 1;
    } else {
      while (*gen == g) {
      }
    }
    __threadfence();
  }
  __syncthreads();
}

extern "C" __global__ void atomic_barrier_sum(const int* in, int* partial, int* out, unsigned* bar, int n) {
  int s = 0;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) s += in[i];
  s = block_sum(s);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
  grid_barrier(bar);
  if (threadIdx.x == 0) {
    int t = 0;
    for (unsigned b = 0; b < gridDim.x; ++b) t += ((volatile int*)partial)[b];
    out[blockIdx.x] = t;
  }
  grid_barrier(bar);
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    int agree = 0;
    for (unsigned b = 0; b < gridDim.x; ++b) agree += ((volatile int*)out)[b] == out[0];
    out[gridDim.x] = agree;
  }
}

// Never finishes unless *flag becomes non-zero.
extern "C" __global__ void spin_on_flag(volatile int* flag, int* out) {
  while (*flag == 0) {
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = 1;
}

// Never finishes: a compute loop with a store (no polling loads).
extern "C" __global__ void runaway(volatile unsigned* out) {
  unsigned x = threadIdx.x;
  for (;;) {
    x = x * 1664525u + 1013904223u;
    out[threadIdx.x] = x;
  }
}

extern "C" __global__ void fill(int* out, int v) { out[blockIdx.x * blockDim.x + threadIdx.x] = v; }
