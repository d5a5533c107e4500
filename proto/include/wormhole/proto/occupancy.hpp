// wormhole/proto/occupancy.hpp - how many blocks of a kernel one
// multiprocessor holds at once, by CUDA's occupancy rules (threads,
// registers, shared memory, block slots). The guest answers
// cudaOccupancyMaxActiveBlocksPerMultiprocessor with it and the server
// bounds cooperative launches with it, so the two always agree.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

namespace wh::proto {

inline int blocks_per_multiprocessor(const cudaDeviceProp& p, int num_regs, uint64_t shared_bytes, int block_threads,
                                     int max_threads_per_block) {
  if (block_threads <= 0 || block_threads > max_threads_per_block || p.warpSize <= 0) return 0;
  const int warps = (block_threads + p.warpSize - 1) / p.warpSize;
  const int by_threads = p.maxThreadsPerMultiProcessor / (warps * p.warpSize);
  const int by_regs = num_regs > 0 ? p.regsPerMultiprocessor / std::max(1, num_regs * warps * p.warpSize) : by_threads;
  const int by_smem = shared_bytes ? int(std::min<uint64_t>(p.sharedMemPerMultiprocessor / shared_bytes, INT32_MAX))
                                   : by_threads;
  return std::max(0, std::min({by_threads, by_regs, by_smem, p.maxBlocksPerMultiProcessor}));
}

}  // namespace wh::proto
