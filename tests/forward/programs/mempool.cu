// Stream-ordered allocation as applications use it: cudaMallocAsync on a
// stream, a kernel, cudaFreeAsync; the default pool's attributes before and
// after a trim; a pool of our own (cudaMemPoolCreate, cudaMallocFromPoolAsync,
// cudaDeviceSetMemPool). Results checked against a host reference.
#include <cstdint>
#include <vector>
#include "check.cuh"

__global__ void axpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

static uint64_t pool_attr(cudaMemPool_t p, cudaMemPoolAttr a) {
  uint64_t v = 0;
  CHECK(cudaMemPoolGetAttribute(p, a, &v));
  return v;
}

// y = a*x + y on `s`, with x and y allocated stream-ordered from `pool`
// (nullptr: the device's current pool), checked against the host.
static void run_axpy(cudaStream_t s, cudaMemPool_t pool, int n, float a, uint64_t* used_while_live) {
  std::vector<float> x(n), y(n), out(n);
  for (int i = 0; i < n; i++) {
    x[i] = float(i % 97) * 0.5f;
    y[i] = float(i % 13) - 6.0f;
  }
  float *dx = nullptr, *dy = nullptr;
  const size_t bytes = size_t(n) * sizeof(float);
  if (pool) {
    CHECK(cudaMallocFromPoolAsync(reinterpret_cast<void**>(&dx), bytes, pool, s));
    CHECK(cudaMallocAsync(&dy, bytes, pool, s));  // the C++ overload, same thing
  } else {
    CHECK(cudaMallocAsync(reinterpret_cast<void**>(&dx), bytes, s));
    CHECK(cudaMallocAsync(reinterpret_cast<void**>(&dy), bytes, s));
  }
  EXPECT(dx && dy && dx != dy, "allocations %p %p", (void*)dx, (void*)dy);
  CHECK(cudaMemcpyAsync(dx, x.data(), bytes, cudaMemcpyHostToDevice, s));
  CHECK(cudaMemcpyAsync(dy, y.data(), bytes, cudaMemcpyHostToDevice, s));
  axpy<<<(n + 255) / 256, 256, 0, s>>>(a, dx, dy, n);
  CHECK(cudaGetLastError());
  CHECK(cudaMemcpyAsync(out.data(), dy, bytes, cudaMemcpyDeviceToHost, s));
  if (used_while_live) {
    cudaMemPool_t p = pool;
    if (!p) CHECK(cudaDeviceGetMemPool(&p, 0));
    *used_while_live = pool_attr(p, cudaMemPoolAttrUsedMemCurrent);
  }
  CHECK(cudaFreeAsync(dx, s));
  CHECK(cudaFreeAsync(dy, s));
  CHECK(cudaStreamSynchronize(s));
  for (int i = 0; i < n; i++) {
    const float want = a * x[i] + y[i];
    EXPECT(out[i] == want, "y[%d] = %f, want %f", i, out[i], want);
  }
}

int main() {
  int supported = 0;
  CHECK(cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, 0));
  EXPECT(supported == 1, "cudaDevAttrMemoryPoolsSupported = %d", supported);

  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaMemPool_t def = nullptr, cur = nullptr;
  CHECK(cudaDeviceGetDefaultMemPool(&def, 0));
  CHECK(cudaDeviceGetMemPool(&cur, 0));
  EXPECT(def && def == cur, "default pool %p, current %p", (void*)def, (void*)cur);

  // Keep freed memory in the pool across synchronisations (a common setting).
  uint64_t keep_all = UINT64_MAX;
  CHECK(cudaMemPoolSetAttribute(def, cudaMemPoolAttrReleaseThreshold, &keep_all));
  EXPECT(pool_attr(def, cudaMemPoolAttrReleaseThreshold) == UINT64_MAX, "threshold not kept");
  int follow = -1;
  CHECK(cudaMemPoolGetAttribute(def, cudaMemPoolReuseFollowEventDependencies, &follow));
  EXPECT(follow == 1, "cudaMemPoolReuseFollowEventDependencies = %d", follow);

  size_t free0, total;
  CHECK(cudaMemGetInfo(&free0, &total));
  const int n = 1 << 20;
  const uint64_t bytes = uint64_t(n) * sizeof(float);
  uint64_t used_live = 0;
  run_axpy(s, nullptr, n, 2.5f, &used_live);
  EXPECT(used_live == 2 * bytes, "UsedMemCurrent while live = %llu", (unsigned long long)used_live);
  const uint64_t reserved = pool_attr(def, cudaMemPoolAttrReservedMemCurrent);
  EXPECT(pool_attr(def, cudaMemPoolAttrUsedMemCurrent) == 0, "memory still in use after the frees");
  EXPECT(pool_attr(def, cudaMemPoolAttrUsedMemHigh) >= 2 * bytes, "UsedMemHigh too low");
  EXPECT(reserved >= 2 * bytes, "ReservedMemCurrent %llu after synchronising with the threshold at max",
         (unsigned long long)reserved);
  EXPECT(pool_attr(def, cudaMemPoolAttrReservedMemHigh) >= reserved, "ReservedMemHigh below current");
  size_t free1;
  CHECK(cudaMemGetInfo(&free1, &total));
  EXPECT(free0 - free1 >= reserved, "reserved pool memory shows as free (%zu -> %zu)", free0, free1);

  // Reused, stream order kept: the same work again without growing the pool.
  for (int k = 0; k < 4; k++) run_axpy(s, nullptr, n, float(k) - 1.5f, nullptr);
  EXPECT(pool_attr(def, cudaMemPoolAttrReservedMemCurrent) == reserved, "the pool grew on reuse");

  // Trim: the unused reserve goes back to the device.
  CHECK(cudaMemPoolTrimTo(def, 0));
  EXPECT(pool_attr(def, cudaMemPoolAttrReservedMemCurrent) == 0, "reserved after trimming to 0: %llu",
         (unsigned long long)pool_attr(def, cudaMemPoolAttrReservedMemCurrent));
  size_t free2;
  CHECK(cudaMemGetInfo(&free2, &total));
  EXPECT(free2 == free1 + reserved, "free memory %zu after trimming %llu bytes, %zu before", free2,
         (unsigned long long)reserved, free1);
  uint64_t zero = 0;
  CHECK(cudaMemPoolSetAttribute(def, cudaMemPoolAttrUsedMemHigh, &zero));
  CHECK(cudaMemPoolSetAttribute(def, cudaMemPoolAttrReservedMemHigh, &zero));
  EXPECT(pool_attr(def, cudaMemPoolAttrUsedMemHigh) == 0, "UsedMemHigh not reset");
  EXPECT(pool_attr(def, cudaMemPoolAttrReservedMemHigh) == 0, "ReservedMemHigh not reset");
  // The current amounts are read-only.
  EXPECT(cudaMemPoolSetAttribute(def, cudaMemPoolAttrUsedMemCurrent, &zero) == cudaErrorInvalidValue,
         "UsedMemCurrent was settable");
  EXPECT(cudaGetLastError() == cudaErrorInvalidValue, "last error not set");

  // A pool of our own, limited to 64 MiB.
  cudaMemPoolProps props = {};
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = cudaMemHandleTypeNone;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 0;
  props.maxSize = 64ull << 20;
  cudaMemPool_t mine = nullptr;
  CHECK(cudaMemPoolCreate(&mine, &props));
  EXPECT(mine && mine != def, "custom pool %p", (void*)mine);
  uint64_t used_mine = 0;
  run_axpy(s, mine, n / 2 + 3, 0.25f, &used_mine);
  EXPECT(used_mine == 2 * (uint64_t(n / 2 + 3) * sizeof(float)), "custom pool UsedMemCurrent %llu",
         (unsigned long long)used_mine);
  // Its threshold is 0: the stream synchronisation gave everything back.
  EXPECT(pool_attr(mine, cudaMemPoolAttrReservedMemCurrent) == 0, "custom pool kept %llu bytes",
         (unsigned long long)pool_attr(mine, cudaMemPoolAttrReservedMemCurrent));
  EXPECT(pool_attr(mine, cudaMemPoolAttrReservedMemHigh) > 0, "custom pool never reserved");
  void* too_big = nullptr;
  EXPECT(cudaMallocFromPoolAsync(&too_big, 65ull << 20, mine, s) == cudaErrorMemoryAllocation,
         "allocation past the pool's maxSize");
  cudaGetLastError();

  // As the device's current pool, cudaMallocAsync draws from it.
  CHECK(cudaDeviceSetMemPool(0, mine));
  CHECK(cudaDeviceGetMemPool(&cur, 0));
  EXPECT(cur == mine, "current pool not set");
  run_axpy(s, nullptr, 4096, -1.0f, &used_mine);
  EXPECT(used_mine == 2 * 4096 * sizeof(float), "cudaMallocAsync did not use the current pool");
  EXPECT(pool_attr(def, cudaMemPoolAttrUsedMemHigh) == 0, "the default pool was used");
  CHECK(cudaMemPoolDestroy(mine));
  CHECK(cudaDeviceGetMemPool(&cur, 0));
  EXPECT(cur == def, "destroying the current pool did not restore the default");

  // Stream-ordered memory is ordinary device memory to the rest of the API.
  float* p = nullptr;
  CHECK(cudaMallocAsync(reinterpret_cast<void**>(&p), 1024, s));
  CHECK(cudaMemsetAsync(p, 0, 1024, s));
  cudaPointerAttributes pa;
  CHECK(cudaPointerGetAttributes(&pa, p));
  EXPECT(pa.type == cudaMemoryTypeDevice, "pointer type %d", int(pa.type));
  CHECK(cudaStreamSynchronize(s));
  CHECK(cudaFree(p));  // cudaFree takes it too
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaDeviceSynchronize());
  std::printf("PASS\n");
  return 0;
}
