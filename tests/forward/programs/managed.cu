// Managed memory as programs use it: a linked list built on the host in
// cudaMallocManaged memory and walked by a kernel, a __managed__ counter
// with an initial value updated by kernels and read by the host, prefetch
// and advice with their range attributes, and pointer attributes.
#include <cstring>

#include "check.cuh"

struct Node {
  int value;
  Node* next;
};

__managed__ int counter = 5;
__managed__ float table[4] = {0.5f, 1.5f, 2.5f, 3.5f};

// One thread walks the list; the others add to the managed counter.
__global__ void walk(const Node* head, long long* sum, int* length) {
  if (threadIdx.x == 0) {
    long long s = 0;
    int n = 0;
    for (const Node* p = head; p; p = p->next) s += p->value, n++;
    *sum = s;
    *length = n;
  }
  atomicAdd(&counter, 1);
}

__global__ void scale(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * table[i % 4];
}

int main() {
  int managed = 0;
  CHECK(cudaDeviceGetAttribute(&managed, cudaDevAttrManagedMemory, 0));
  EXPECT(managed == 1, "managed memory not supported");

  // A list of 1000 nodes, built on the host.
  const int n = 1000;
  Node* nodes = nullptr;
  CHECK(cudaMallocManaged(&nodes, n * sizeof(Node)));
  long long expect = 0;
  for (int i = 0; i < n; i++) {
    nodes[i].value = i * 3 - 7;
    nodes[i].next = i + 1 < n ? &nodes[i + 1] : nullptr;
    expect += nodes[i].value;
  }
  long long* sum = nullptr;
  int* length = nullptr;
  CHECK(cudaMallocManaged(&sum, sizeof *sum));
  CHECK(cudaMallocManaged(&length, sizeof *length, cudaMemAttachHost));
  EXPECT(counter == 5, "__managed__ initial value %d", counter);
  walk<<<1, 64>>>(nodes, sum, length);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  EXPECT(*sum == expect && *length == n, "walked %lld over %d nodes, expected %lld over %d", *sum, *length, expect, n);
  EXPECT(counter == 5 + 64, "counter %d after one launch", counter);
  counter = 100;  // the host writes, the next launch sees it
  walk<<<2, 32>>>(nodes + n / 2, sum, length);
  CHECK(cudaDeviceSynchronize());
  EXPECT(counter == 164 && *length == n / 2, "counter %d, length %d", counter, *length);

  // Prefetch and advice, and what the range reports.
  float* x = nullptr;
  const int m = 4096;
  CHECK(cudaMallocManaged(&x, m * sizeof(float)));
  for (int i = 0; i < m; i++) x[i] = float(i);
  cudaMemLocation dev{cudaMemLocationTypeDevice, 0}, host{cudaMemLocationTypeHost, 0};
  CHECK(cudaMemAdvise(x, m * sizeof(float), cudaMemAdviseSetReadMostly, dev));
  CHECK(cudaMemAdvise(x, m * sizeof(float), cudaMemAdviseSetPreferredLocation, dev));
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  CHECK(cudaMemPrefetchAsync(x, m * sizeof(float), dev, 0, s));
  scale<<<m / 256, 256, 0, s>>>(x, m);
  CHECK(cudaGetLastError());
  CHECK(cudaMemPrefetchAsync(x, m * sizeof(float), host, 0, s));
  CHECK(cudaStreamSynchronize(s));
  for (int i = 0; i < m; i++) EXPECT(x[i] == float(i) * table[i % 4], "x[%d] = %f", i, x[i]);
  int read_mostly = -1, preferred = -2, last = -3;
  CHECK(cudaMemRangeGetAttribute(&read_mostly, 4, cudaMemRangeAttributeReadMostly, x, m * sizeof(float)));
  CHECK(cudaMemRangeGetAttribute(&preferred, 4, cudaMemRangeAttributePreferredLocation, x, m * sizeof(float)));
  CHECK(cudaMemRangeGetAttribute(&last, 4, cudaMemRangeAttributeLastPrefetchLocation, x, m * sizeof(float)));
  EXPECT(read_mostly == 1 && preferred == 0 && last == cudaCpuDeviceId, "range attributes %d %d %d", read_mostly,
         preferred, last);
  int dummy = 0;
  EXPECT(cudaMemPrefetchAsync(&dummy, 4, dev, 0, s) == cudaErrorInvalidValue, "prefetch of unmanaged memory");
  cudaGetLastError();

  // Copies to and from managed memory, and what a pointer is.
  float* d = nullptr;
  CHECK(cudaMalloc(&d, m * sizeof(float)));
  CHECK(cudaMemcpy(d, x, m * sizeof(float), cudaMemcpyDefault));
  std::memset(x, 0, m * sizeof(float));
  CHECK(cudaMemcpy(x, d, m * sizeof(float), cudaMemcpyDeviceToHost));
  EXPECT(x[m - 1] == float(m - 1) * table[(m - 1) % 4], "copy round trip %f", x[m - 1]);
  cudaPointerAttributes pa;
  CHECK(cudaPointerGetAttributes(&pa, x + 10));
  EXPECT(pa.type == cudaMemoryTypeManaged && pa.devicePointer == x + 10 && pa.hostPointer == x + 10,
         "managed pointer attributes: type %d", int(pa.type));
  CHECK(cudaPointerGetAttributes(&pa, d));
  EXPECT(pa.type == cudaMemoryTypeDevice, "device pointer type %d", int(pa.type));

  CHECK(cudaFree(d));
  CHECK(cudaFree(x));
  CHECK(cudaFree(nodes));
  CHECK(cudaFree(sum));
  CHECK(cudaFree(length));
  CHECK(cudaStreamDestroy(s));
  std::printf("PASS managed\n");
  return 0;
}
