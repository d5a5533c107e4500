// Warp-aggregated atomics as users write them with cooperative groups: the
// threads of a warp that update the same bucket form a labeled partition,
// reduce within it (max, sum) and one of them updates the bucket; binary
// partitions count the positive values. Built for compute capability 8.0,
// where the reductions are redux.sync over each group's own member mask.
// Checked against the host.
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <algorithm>
#include <cstdio>
#include <vector>
#include "check.cuh"
namespace cg = cooperative_groups;

constexpr int kBuckets = 7, kN = 1 << 16;

__global__ void buckets(const int* bucket, const int* value, int* bmax, int* bsum, int* positives, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    cg::coalesced_group active = cg::coalesced_threads();
    auto same = cg::labeled_partition(active, bucket[i]);
    const int mx = cg::reduce(same, value[i], cg::greater<int>());
    const int sum = cg::reduce(same, value[i], cg::plus<int>());
    if (same.thread_rank() == 0) {
      atomicMax(&bmax[bucket[i]], mx);
      atomicAdd(&bsum[bucket[i]], sum);
    }
    auto sign = cg::binary_partition(active, value[i] > 0);
    if (value[i] > 0 && sign.thread_rank() == 0) atomicAdd(positives, int(sign.size()));
  }
}

int main() {
  std::vector<int> b(kN), v(kN);
  unsigned s = 12345;
  for (int i = 0; i < kN; i++) {
    s = s * 1664525u + 1013904223u;
    b[i] = int((s >> 8) % kBuckets);
    v[i] = int((s >> 12) % 2001) - 1000;
  }
  int *db, *dv, *dmax, *dsum, *dpos;
  CHECK(cudaMalloc(&db, kN * 4));
  CHECK(cudaMalloc(&dv, kN * 4));
  CHECK(cudaMalloc(&dmax, kBuckets * 4));
  CHECK(cudaMalloc(&dsum, kBuckets * 4));
  CHECK(cudaMalloc(&dpos, 4));
  CHECK(cudaMemcpy(db, b.data(), kN * 4, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dv, v.data(), kN * 4, cudaMemcpyHostToDevice));
  std::vector<int> lowest(kBuckets, -1000000);
  CHECK(cudaMemcpy(dmax, lowest.data(), kBuckets * 4, cudaMemcpyHostToDevice));
  CHECK(cudaMemset(dsum, 0, kBuckets * 4));
  CHECK(cudaMemset(dpos, 0, 4));
  buckets<<<32, 256>>>(db, dv, dmax, dsum, dpos, kN);
  CHECK(cudaGetLastError());
  std::vector<int> gmax(kBuckets), gsum(kBuckets);
  int gpos = 0;
  CHECK(cudaMemcpy(gmax.data(), dmax, kBuckets * 4, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(gsum.data(), dsum, kBuckets * 4, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(&gpos, dpos, 4, cudaMemcpyDeviceToHost));
  std::vector<int> hmax(kBuckets, -1000000), hsum(kBuckets, 0);
  int hpos = 0;
  for (int i = 0; i < kN; i++) {
    hmax[b[i]] = std::max(hmax[b[i]], v[i]);
    hsum[b[i]] += v[i];
    hpos += v[i] > 0;
  }
  for (int k = 0; k < kBuckets; k++) {
    EXPECT(gmax[k] == hmax[k], "bucket %d: max %d, host %d", k, gmax[k], hmax[k]);
    EXPECT(gsum[k] == hsum[k], "bucket %d: sum %d, host %d", k, gsum[k], hsum[k]);
  }
  EXPECT(gpos == hpos, "positives: %d, host %d", gpos, hpos);
  std::printf("PASS warp_groups\n");
  return 0;
}
