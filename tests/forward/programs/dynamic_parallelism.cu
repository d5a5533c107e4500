// Dynamic parallelism (-rdc=true -lcudadevrt): kernels launching kernels.
//   - a recursive quicksort: each grid partitions its range and launches a
//     child grid per half, each into a stream it creates;
//   - the named streams: a fire-and-forget child and tail launches (one of
//     which tail-launches again), their order recorded and checked;
//   - launches into one device stream, and into the NULL stream, run in
//     order; an event orders a consumer in one stream after a producer in
//     another;
//   - a chain three launches deep, and device-side cudaGetDevice /
//     cudaDeviceGetAttribute / cudaGetLastError.
// `dynamic_parallelism limits`: the CUDA errors at the limits (nesting depth,
// pending launches, launch shapes, stream handles), as the sim device reports them.
#include <algorithm>
#include <cstring>
#include <random>
#include <vector>
#include "check.cuh"

// ---- recursive quicksort
constexpr int kSortN = 3000, kLeaf = 24, kMaxSortDepth = 16;

__device__ void insertion_sort(int* a, int lo, int hi) {
  for (int i = lo + 1; i < hi; i++) {
    int v = a[i], j = i - 1;
    while (j >= lo && a[j] > v) {
      a[j + 1] = a[j];
      j--;
    }
    a[j + 1] = v;
  }
}

// Sorts a[lo, hi): partitions around a median of three, then a child grid
// per half, each in a stream of its own (the halves are independent).
__global__ void quicksort(int* a, int lo, int hi, int depth, int* grids, int* deepest) {
  atomicAdd(grids, 1);
  atomicMax(deepest, depth);
  if (hi - lo <= kLeaf || depth >= kMaxSortDepth) {
    insertion_sort(a, lo, hi);
    return;
  }
  const int mid = lo + (hi - lo) / 2;
  int x = a[lo], y = a[mid], z = a[hi - 1];
  const int pivot = max(min(x, y), min(max(x, y), z));
  int i = lo, j = hi - 1;
  while (i <= j) {  // Hoare-style: [lo, j] <= pivot <= [i, hi)
    while (a[i] < pivot) i++;
    while (a[j] > pivot) j--;
    if (i <= j) {
      int t = a[i];
      a[i] = a[j];
      a[j] = t;
      i++;
      j--;
    }
  }
  cudaStream_t left, right;
  cudaStreamCreateWithFlags(&left, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&right, cudaStreamNonBlocking);
  if (j + 1 - lo > 1) quicksort<<<1, 1, 0, left>>>(a, lo, j + 1, depth + 1, grids, deepest);
  if (hi - i > 1) quicksort<<<1, 1, 0, right>>>(a, i, hi, depth + 1, grids, deepest);
  cudaStreamDestroy(left);  // the work already in it still runs
  cudaStreamDestroy(right);
}

// ---- named streams: the order grids ran in
__device__ int seq;
__device__ void stamp(int* order, int id) {
  if (blockIdx.x == 0 && threadIdx.x == 0) order[atomicAdd(&seq, 1)] = id;
}
__global__ void faf_fill(int* buf, int n, int* order) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) buf[i] = 100 + i;
  stamp(order, 1);
}
// Runs after its parent grid and everything that grid launched elsewhere
// (the fire-and-forget fill) completed: sees the whole buffer and the flag
// the parent set after launching it.
__global__ void tail_check(const int* buf, int n, const int* flag, int* result, int* order, int id) {
  stamp(order, id);
  for (int i = threadIdx.x; i < n; i += blockDim.x)
    if (buf[i] != 100 + i) atomicAdd(&result[0], 1);
  if (threadIdx.x == 0) {
    atomicAdd(&result[1], *flag);
    // a tail launch of a tail launch: runs before the parent's next tail launch
    if (id == 2) tail_check<<<1, 32, 0, cudaStreamTailLaunch>>>(buf, n, flag, result, order, 3);
  }
}
__global__ void tail_last(int* order) { stamp(order, 4); }
__global__ void named_parent(int* buf, int n, int* flag, int* result, int* order) {
  if (threadIdx.x == 0) {
    stamp(order, 0);
    faf_fill<<<(n + 63) / 64, 64, 0, cudaStreamFireAndForget>>>(buf, n, order);
    tail_check<<<1, 32, 0, cudaStreamTailLaunch>>>(buf, n, flag, result, order, 2);
    tail_last<<<1, 1, 0, cudaStreamTailLaunch>>>(order);
    if (cudaGetLastError() != cudaSuccess) result[2] = 1;
  }
  __syncthreads();
  if (threadIdx.x == 0) *flag = 42;  // after the launches
}

// ---- stream order, NULL stream order, events
__global__ void append(int* log, int* count, int v) {
  if (blockIdx.x == 0 && threadIdx.x == 0) log[atomicAdd(count, 1)] = v;
}
__global__ void produce(int* data, int n, int v) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] = v * 1000 + i;
}
__global__ void consume(const int* data, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = data[i] + 1;
}
constexpr int kStreamBlocks = 4, kAppends = 5, kData = 200;
// Per block: kAppends launches into a stream it created, kAppends into the
// NULL stream (each sequence in order); a producer in one stream, an event,
// a consumer in another stream waiting on it.
__global__ void stream_parent(int* logs, int* counts, int* data, int* out) {
  if (threadIdx.x != 0) return;
  const int b = blockIdx.x;
  int* slog = logs + b * 2 * kAppends;
  int* nlog = slog + kAppends;
  cudaStream_t s, s2;
  cudaEvent_t e;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking);
  cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
  for (int k = 0; k < kAppends; k++) {
    append<<<1, 32, 0, s>>>(slog, &counts[2 * b], b * 100 + k);
    append<<<2, 32>>>(nlog, &counts[2 * b + 1], b * 100 + 50 + k);
  }
  produce<<<(kData + 63) / 64, 64, 0, s>>>(data + b * kData, kData, b + 1);
  cudaEventRecord(e, s);
  cudaStreamWaitEvent(s2, e, 0);
  consume<<<(kData + 63) / 64, 64, 0, s2>>>(data + b * kData, out + b * kData, kData);
  cudaEventDestroy(e);
  cudaStreamDestroy(s);
  cudaStreamDestroy(s2);
}

// ---- three launches deep, device queries
__global__ void nest(int* seen, int* info, int level) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  seen[level] = level * 10 + int(gridDim.x);
  if (level < 3) {
    nest<<<level + 2, 32>>>(seen, info, level + 1);
    info[8 + level] = cudaGetLastError();
    return;
  }
  int dev = -1, v = 0;
  info[0] = cudaGetDevice(&dev);
  info[1] = dev;
  info[2] = cudaDeviceGetAttribute(&v, cudaDevAttrMaxThreadsPerBlock, dev);
  info[3] = v;
  info[4] = cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, 0);
  info[5] = v;
  info[6] = cudaPeekAtLastError();
  info[11] = cudaRuntimeGetVersion(&v);
  info[12] = v;
  int* p = nullptr;
  info[13] = cudaMalloc(reinterpret_cast<void**>(&p), 64 * sizeof(int));  // from the device heap
  if (p) {
    for (int i = 0; i < 64; i++) p[i] = i * i;
    int sum = 0;
    for (int i = 0; i < 64; i++) sum += p[i];
    info[14] = sum;
  }
  info[15] = cudaFree(p);
}

// ---- limits
__global__ void deep(int* reached, int* err, int level) {
  atomicMax(reached, level);
  deep<<<1, 1>>>(reached, err, level + 1);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) {
    err[0] = e;
    err[1] = level;
  }
}
__global__ void counted(int* ran) { atomicAdd(ran, 1); }
__global__ void many_tails(int* ran, int* res, int tries) {
  for (int k = 0; k < tries; k++) {
    counted<<<1, 1, 0, cudaStreamTailLaunch>>>(ran);
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) res[0]++;
    else if (!res[1]) res[1] = e;
  }
}
__global__ void bad_shapes(int* res, int* ran) {
  counted<<<dim3(1, 70000), 1>>>(ran);  // grid y over 65535
  res[0] = cudaPeekAtLastError();
  res[1] = cudaGetLastError();
  res[2] = cudaGetLastError();  // cleared by the one before
  counted<<<1, 2048>>>(ran);  // block over 1024 threads
  res[3] = cudaGetLastError();
  counted<<<1, 32, 2 << 20>>>(ran);  // 2 MiB of shared memory
  res[4] = cudaGetLastError();
  counted<<<1, 1, 0, reinterpret_cast<cudaStream_t>(0x1234)>>>(ran);  // not a stream of this block
  res[5] = cudaGetLastError();
  cudaStream_t s;
  res[6] = cudaStreamCreateWithFlags(&s, cudaStreamDefault);  // device streams are non-blocking
  res[8] = cudaGetLastError();  // a failed call is the thread's last error too
  counted<<<1, 1>>>(ran);       // a good one among them
  res[7] = cudaGetLastError();
}

int limits() {
  int* d;
  CHECK(cudaMalloc(&d, 64 * sizeof(int)));
  CHECK(cudaMemset(d, 0, 64 * sizeof(int)));
  // The nesting depth: a grid at depth 24 cannot launch.
  deep<<<1, 1>>>(d, d + 1, 0);
  CHECK(cudaDeviceSynchronize());
  int h[64];
  CHECK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
  EXPECT(h[0] == 24, "deepest grid %d", h[0]);
  EXPECT(h[1] == cudaErrorLaunchMaxDepthExceeded && h[2] == 24, "depth error %d at level %d", h[1], h[2]);

  // Pending launches: tail launches wait for their parent to end, so the
  // 17th of them exceeds a limit of 16.
  CHECK(cudaDeviceSetLimit(cudaLimitDevRuntimePendingLaunchCount, 16));
  size_t lim = 0;
  CHECK(cudaDeviceGetLimit(&lim, cudaLimitDevRuntimePendingLaunchCount));
  EXPECT(lim == 16, "pending launch limit %zu", lim);
  CHECK(cudaMemset(d, 0, 64 * sizeof(int)));
  many_tails<<<1, 1>>>(d, d + 1, 40);
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
  EXPECT(h[1] == 16 && h[0] == 16, "%d tail launches accepted, %d ran", h[1], h[0]);
  EXPECT(h[2] == cudaErrorLaunchPendingCountExceeded, "past the limit: %d", h[2]);
  CHECK(cudaDeviceSetLimit(cudaLimitDevRuntimePendingLaunchCount, 2048));

  // Launch shapes and handles are checked as a host launch's are.
  CHECK(cudaMemset(d, 0, 64 * sizeof(int)));
  bad_shapes<<<1, 1>>>(d, d + 16);
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
  EXPECT(h[0] == cudaErrorInvalidConfiguration && h[1] == cudaErrorInvalidConfiguration && h[2] == cudaSuccess,
         "grid 1x70000: peek %d, get %d, then %d", h[0], h[1], h[2]);
  EXPECT(h[3] == cudaErrorInvalidConfiguration, "2048 threads: %d", h[3]);
  EXPECT(h[4] == cudaErrorInvalidConfiguration, "2 MiB shared: %d", h[4]);
  EXPECT(h[5] == cudaErrorInvalidResourceHandle, "stream 0x1234: %d", h[5]);
  EXPECT(h[6] == cudaErrorInvalidValue && h[8] == cudaErrorInvalidValue, "blocking device stream: %d, last error %d",
         h[6], h[8]);
  EXPECT(h[7] == cudaSuccess && h[16] == 1, "good launch: %d, ran %d", h[7], h[16]);
  CHECK(cudaFree(d));
  std::printf("PASS\n");
  return 0;
}

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "limits") == 0) return limits();

  // Quicksort.
  std::vector<int> v(kSortN);
  std::mt19937 rng(7);
  for (auto& x : v) x = int(rng() % 5000) - 2500;  // with repeats
  int *da, *dstat;
  CHECK(cudaMalloc(&da, kSortN * sizeof(int)));
  CHECK(cudaMalloc(&dstat, 2 * sizeof(int)));
  CHECK(cudaMemset(dstat, 0, 2 * sizeof(int)));
  CHECK(cudaMemcpy(da, v.data(), kSortN * sizeof(int), cudaMemcpyHostToDevice));
  quicksort<<<1, 1>>>(da, 0, kSortN, 0, dstat, dstat + 1);
  CHECK(cudaGetLastError());
  std::vector<int> sorted(kSortN);
  int stat[2];
  CHECK(cudaMemcpy(sorted.data(), da, kSortN * sizeof(int), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(stat, dstat, sizeof stat, cudaMemcpyDeviceToHost));
  std::sort(v.begin(), v.end());
  for (int i = 0; i < kSortN; i++) EXPECT(sorted[i] == v[i], "sorted[%d] = %d, want %d", i, sorted[i], v[i]);
  EXPECT(stat[0] > 2 * kSortN / (4 * kLeaf) && stat[1] >= 5, "%d grids, %d deep", stat[0], stat[1]);
  std::printf("quicksort: %d grids, %d levels\n", stat[0], stat[1]);

  // Named streams.
  const int n = 500;
  int *buf, *flag, *result, *order;
  CHECK(cudaMalloc(&buf, n * sizeof(int)));
  CHECK(cudaMalloc(&flag, sizeof(int)));
  CHECK(cudaMalloc(&result, 3 * sizeof(int)));
  CHECK(cudaMalloc(&order, 8 * sizeof(int)));
  CHECK(cudaMemset(buf, 0, n * sizeof(int)));
  CHECK(cudaMemset(flag, 0, sizeof(int)));
  CHECK(cudaMemset(result, 0, 3 * sizeof(int)));
  CHECK(cudaMemset(order, 0xff, 8 * sizeof(int)));
  named_parent<<<1, 64>>>(buf, n, flag, result, order);
  CHECK(cudaDeviceSynchronize());
  int ord[8], res[3];
  CHECK(cudaMemcpy(ord, order, sizeof ord, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(res, result, sizeof res, cudaMemcpyDeviceToHost));
  for (int k = 0; k < 5; k++) EXPECT(ord[k] == k, "grid %d ran at position %d (order %d %d %d %d %d)", ord[k], k, ord[0], ord[1], ord[2], ord[3], ord[4]);
  EXPECT(ord[5] == -1, "a sixth grid ran: %d", ord[5]);
  EXPECT(res[0] == 0, "the tail launches saw %d unfilled elements", res[0]);
  EXPECT(res[1] == 2 * 42, "the tail launches saw the flag as %d", res[1]);
  EXPECT(res[2] == 0, "a launch failed in the parent");

  // Stream order, NULL stream order, an event between streams.
  int *logs, *counts, *data, *out;
  CHECK(cudaMalloc(&logs, kStreamBlocks * 2 * kAppends * sizeof(int)));
  CHECK(cudaMalloc(&counts, kStreamBlocks * 2 * sizeof(int)));
  CHECK(cudaMalloc(&data, kStreamBlocks * kData * sizeof(int)));
  CHECK(cudaMalloc(&out, kStreamBlocks * kData * sizeof(int)));
  CHECK(cudaMemset(counts, 0, kStreamBlocks * 2 * sizeof(int)));
  CHECK(cudaMemset(out, 0, kStreamBlocks * kData * sizeof(int)));
  stream_parent<<<kStreamBlocks, 32>>>(logs, counts, data, out);
  CHECK(cudaDeviceSynchronize());
  std::vector<int> hl(kStreamBlocks * 2 * kAppends), ho(kStreamBlocks * kData);
  CHECK(cudaMemcpy(hl.data(), logs, hl.size() * sizeof(int), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(ho.data(), out, ho.size() * sizeof(int), cudaMemcpyDeviceToHost));
  for (int b = 0; b < kStreamBlocks; b++) {
    for (int k = 0; k < kAppends; k++) {
      EXPECT(hl[b * 2 * kAppends + k] == b * 100 + k, "block %d stream launch %d ran as %d", b, k, hl[b * 2 * kAppends + k]);
      EXPECT(hl[b * 2 * kAppends + kAppends + k] == b * 100 + 50 + k, "block %d NULL-stream launch %d ran as %d", b, k,
             hl[b * 2 * kAppends + kAppends + k]);
    }
    for (int i = 0; i < kData; i++)
      EXPECT(ho[b * kData + i] == (b + 1) * 1000 + i + 1, "block %d consumer at %d: %d", b, i, ho[b * kData + i]);
  }

  // Three launches deep; device queries at the bottom.
  int *seen, *info;
  CHECK(cudaMalloc(&seen, 4 * sizeof(int)));
  CHECK(cudaMalloc(&info, 16 * sizeof(int)));
  CHECK(cudaMemset(seen, 0xff, 4 * sizeof(int)));
  CHECK(cudaMemset(info, 0xff, 16 * sizeof(int)));
  nest<<<1, 32>>>(seen, info, 0);
  CHECK(cudaDeviceSynchronize());
  int hs[4], hi[16];
  CHECK(cudaMemcpy(hs, seen, sizeof hs, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(hi, info, sizeof hi, cudaMemcpyDeviceToHost));
  for (int l = 0; l < 4; l++) EXPECT(hs[l] == l * 10 + l + 1, "level %d saw %d", l, hs[l]);
  for (int l = 0; l < 3; l++) EXPECT(hi[8 + l] == cudaSuccess, "launch at level %d: %d", l, hi[8 + l]);
  int dev = -1, max_threads = 0, sms = 0;
  CHECK(cudaGetDevice(&dev));
  CHECK(cudaDeviceGetAttribute(&max_threads, cudaDevAttrMaxThreadsPerBlock, dev));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  EXPECT(hi[0] == cudaSuccess && hi[1] == 0, "device-side cudaGetDevice: %d, device %d", hi[0], hi[1]);
  EXPECT(hi[2] == cudaSuccess && hi[3] == max_threads, "device-side max threads: %d, %d (host %d)", hi[2], hi[3], max_threads);
  EXPECT(hi[4] == cudaSuccess && hi[5] == sms, "device-side SM count: %d, %d (host %d)", hi[4], hi[5], sms);
  EXPECT(hi[6] == cudaSuccess, "device-side last error %d", hi[6]);
  int rt_version = 0;
  CHECK(cudaRuntimeGetVersion(&rt_version));
  EXPECT(hi[11] == cudaSuccess && hi[12] == rt_version, "device-side runtime version %d, %d (host %d)", hi[11], hi[12],
         rt_version);
  EXPECT(hi[13] == cudaSuccess && hi[14] == 63 * 64 * 127 / 6 && hi[15] == cudaSuccess,
         "device-side cudaMalloc %d, sum %d, cudaFree %d", hi[13], hi[14], hi[15]);

  for (void* p : {(void*)da, (void*)dstat, (void*)buf, (void*)flag, (void*)result, (void*)order, (void*)logs,
                  (void*)counts, (void*)data, (void*)out, (void*)seen, (void*)info})
    CHECK(cudaFree(p));
  std::printf("PASS\n");
  return 0;
}
