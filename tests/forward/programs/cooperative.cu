// Warps and blocks that wait for each other, as real programs write them:
// a cooperative-groups grid-wide reduction sized from the occupancy API and
// launched with cudaLaunchCooperativeKernel, a producer/consumer pair of
// warps handing data over through a volatile flag, and a launch attribute
// the device cannot honour refused with an error.
#include <cooperative_groups.h>

#include <vector>

#include "check.cuh"

namespace cg = cooperative_groups;

// Each block sums its slice into partial[], the grid syncs, block 0 adds
// the partials; then the grid syncs again and every block checks the total.
__global__ void grid_sum(const int* in, int n, long long* partial, long long* total, int* agree) {
  cg::grid_group grid = cg::this_grid();
  __shared__ long long s[256];
  long long v = 0;
  for (int i = int(grid.thread_rank()); i < n; i += int(grid.size())) v += in[i];
  s[threadIdx.x] = v;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
  grid.sync();
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    long long t = 0;
    for (unsigned b = 0; b < gridDim.x; b++) t += partial[b];
    *total = t;
  }
  grid.sync();
  if (threadIdx.x == 0 && *total == partial[0] + (*total - partial[0])) atomicAdd(agree, 1);
}

// Warp 1 produces, warp 0 consumes: warp 0 reaches its spin first.
__global__ void handoff(int* out) {
  __shared__ int data[32];
  __shared__ volatile int ready;
  if (threadIdx.x == 0) ready = 0;
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp == 0) {
    while (ready == 0) {
    }
    __threadfence_block();
    out[lane] = data[lane] * 2;
  } else {
    data[lane] = lane + 100;
    __threadfence_block();
    if (lane == 0) ready = 1;
  }
}

int main() {
  int coop = 0, sms = 0;
  CHECK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, 0));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  EXPECT(coop == 1, "cooperative launch not supported");
  int per_sm = 0;
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, grid_sum, 256, 0));
  EXPECT(per_sm >= 1, "occupancy %d", per_sm);
  int blocks = per_sm * sms;
  if (blocks > 64) blocks = 64;

  const int n = 100000;
  std::vector<int> h(n);
  long long expect = 0;
  for (int i = 0; i < n; i++) h[i] = (i * 7919) % 1000 - 500, expect += h[i];
  int *d_in = nullptr, *agree = nullptr;
  long long *partial = nullptr, *total = nullptr;
  CHECK(cudaMalloc(&d_in, n * sizeof(int)));
  CHECK(cudaMalloc(&partial, blocks * sizeof(long long)));
  CHECK(cudaMalloc(&total, sizeof(long long)));
  CHECK(cudaMalloc(&agree, sizeof(int)));
  CHECK(cudaMemcpy(d_in, h.data(), n * sizeof(int), cudaMemcpyHostToDevice));
  CHECK(cudaMemset(agree, 0, sizeof(int)));
  int nn = n;
  void* args[] = {&d_in, &nn, &partial, &total, &agree};
  CHECK(cudaLaunchCooperativeKernel((const void*)grid_sum, dim3(blocks), dim3(256), args, 0, nullptr));
  CHECK(cudaDeviceSynchronize());
  long long got = 0;
  int agreed = 0;
  CHECK(cudaMemcpy(&got, total, sizeof got, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(&agreed, agree, sizeof agreed, cudaMemcpyDeviceToHost));
  EXPECT(got == expect, "grid sum %lld, expected %lld (%d blocks)", got, expect, blocks);
  EXPECT(agreed == blocks, "%d of %d blocks saw the total", agreed, blocks);

  // The same through cudaLaunchKernelExC's cooperative attribute.
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeCooperative;
  attr[0].val.cooperative = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(blocks);
  cfg.blockDim = dim3(256);
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  CHECK(cudaMemset(total, 0, sizeof(long long)));
  CHECK(cudaLaunchKernelExC(&cfg, (const void*)grid_sum, args));
  CHECK(cudaMemcpy(&got, total, sizeof got, cudaMemcpyDeviceToHost));
  EXPECT(got == expect, "grid sum through cudaLaunchKernelExC %lld", got);

  // A grid larger than the device holds at once is refused.
  cudaError_t e = cudaLaunchCooperativeKernel((const void*)grid_sum, dim3(per_sm * sms * 4 + 1), dim3(256), args, 0,
                                              nullptr);
  // A launch the device refuses after it was posted: the next copy to the
  // host reports it (never a success over stale data), and only that copy.
  long long back = -1;
  if (e == cudaSuccess) e = cudaMemcpy(&back, total, sizeof back, cudaMemcpyDeviceToHost);
  EXPECT(e == cudaErrorCooperativeLaunchTooLarge, "oversized cooperative grid: %s", cudaGetErrorName(e));
  cudaGetLastError();
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaMemcpy(&back, total, sizeof back, cudaMemcpyDeviceToHost));
  EXPECT(back == expect, "the refused grid wrote nothing: %lld", back);

  // Clusters: the device has none, so a 2x1x1 cluster is refused.
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = 2;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.gridDim = dim3(2);
  EXPECT(cudaLaunchKernelExC(&cfg, (const void*)grid_sum, args) == cudaErrorNotSupported, "cluster launch");
  cudaGetLastError();

  int* d_out = nullptr;
  CHECK(cudaMalloc(&d_out, 32 * sizeof(int)));
  handoff<<<1, 64>>>(d_out);
  CHECK(cudaGetLastError());
  int out[32];
  CHECK(cudaMemcpy(out, d_out, sizeof out, cudaMemcpyDeviceToHost));
  for (int i = 0; i < 32; i++) EXPECT(out[i] == (i + 100) * 2, "handoff[%d] = %d", i, out[i]);

  CHECK(cudaFree(d_in));
  CHECK(cudaFree(partial));
  CHECK(cudaFree(total));
  CHECK(cudaFree(agree));
  CHECK(cudaFree(d_out));
  std::printf("PASS cooperative (%d blocks)\n", blocks);
  return 0;
}
