// Thrust and CUB as programs use them: sort, scan, reduce, transform and a
// CUB radix sort with its two-phase temporary storage, each checked
// against the same computation on the host.
#include <thrust/device_vector.h>
#include <thrust/host_vector.h>
#include <thrust/reduce.h>
#include <thrust/scan.h>
#include <thrust/sort.h>
#include <thrust/transform.h>
#include <thrust/functional.h>
#include <cub/device/device_radix_sort.cuh>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "check.cuh"

struct square {
  __host__ __device__ int operator()(int x) const { return x * x; }
};

int main() {
  const int n = 10000;
  std::mt19937 rng(42);
  std::vector<int> h(n);
  for (auto& x : h) x = int(rng() % 100000) - 50000;

  thrust::device_vector<int> d(h.begin(), h.end());
  thrust::sort(d.begin(), d.end());
  std::vector<int> ref = h;
  std::sort(ref.begin(), ref.end());
  thrust::host_vector<int> back = d;
  for (int i = 0; i < n; i++) EXPECT(back[i] == ref[i], "sort [%d] %d != %d", i, back[i], ref[i]);

  thrust::device_vector<int> small(n);
  thrust::transform(d.begin(), d.end(), small.begin(), [] __device__(int x) { return x % 7; });
  thrust::device_vector<int> scan(n);
  thrust::inclusive_scan(small.begin(), small.end(), scan.begin());
  std::vector<int> href(n), hsmall(n);
  for (int i = 0; i < n; i++) hsmall[i] = ref[i] % 7;
  std::partial_sum(hsmall.begin(), hsmall.end(), href.begin());
  thrust::host_vector<int> hscan = scan;
  for (int i = 0; i < n; i++) EXPECT(hscan[i] == href[i], "scan [%d] %d != %d", i, hscan[i], href[i]);

  long long sum = thrust::transform_reduce(small.begin(), small.end(), square(), 0LL, thrust::plus<long long>());
  long long hsum = 0;
  for (int x : hsmall) hsum += (long long)x * x;
  EXPECT(sum == hsum, "transform_reduce %lld != %lld", sum, hsum);
  int mx = thrust::reduce(d.begin(), d.end(), INT32_MIN, thrust::maximum<int>());
  EXPECT(mx == ref.back(), "max %d != %d", mx, ref.back());

  // CUB: keys and values, temporary storage sized by a first call.
  std::vector<unsigned> keys(n), vals(n);
  for (int i = 0; i < n; i++) keys[i] = rng(), vals[i] = unsigned(i);
  unsigned *dk_in, *dk_out, *dv_in, *dv_out;
  CHECK(cudaMalloc(&dk_in, n * 4));
  CHECK(cudaMalloc(&dk_out, n * 4));
  CHECK(cudaMalloc(&dv_in, n * 4));
  CHECK(cudaMalloc(&dv_out, n * 4));
  CHECK(cudaMemcpy(dk_in, keys.data(), n * 4, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dv_in, vals.data(), n * 4, cudaMemcpyHostToDevice));
  size_t temp_bytes = 0;
  CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, dk_in, dk_out, dv_in, dv_out, n));
  void* temp = nullptr;
  CHECK(cudaMalloc(&temp, temp_bytes));
  CHECK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, dk_in, dk_out, dv_in, dv_out, n));
  std::vector<unsigned> ok(n), ov(n);
  CHECK(cudaMemcpy(ok.data(), dk_out, n * 4, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(ov.data(), dv_out, n * 4, cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; i++) {
    EXPECT(i == 0 || ok[i - 1] <= ok[i], "cub keys out of order at %d", i);
    EXPECT(keys[ov[i]] == ok[i], "cub value %d does not follow its key", i);
  }
  CHECK(cudaFree(temp));
  CHECK(cudaFree(dk_in));
  CHECK(cudaFree(dk_out));
  CHECK(cudaFree(dv_in));
  CHECK(cudaFree(dv_out));
  std::printf("PASS thrust_algos\n");
  return 0;
}
