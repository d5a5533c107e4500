// Pinned host memory used by kernels at its host address (unified virtual
// addressing), as programs do: a zero-copy output buffer from cudaMallocHost,
// a cudaHostAllocMapped input read through the host pointer, a flag the host
// raises while a kernel polls it, and cudaPointerGetAttributes agreeing that
// the device address is the host address.
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>
#include "check.cuh"

__global__ void square_into(const float* in, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * in[i];
}

// Waits until the host writes `go`, then answers through `done`.
__global__ void wait_for_host(volatile int* go, volatile int* done, int* seen) {
  while (*go == 0) {
  }
  *seen = *go;
  __threadfence_system();
  *done = 1;
}

int main() {
  int uva = 0;
  CHECK(cudaDeviceGetAttribute(&uva, cudaDevAttrUnifiedAddressing, 0));
  EXPECT(uva == 1, "unified addressing %d", uva);
  const int n = 1 << 16;
  float* in = nullptr;
  float* out = nullptr;
  CHECK(cudaHostAlloc(&in, n * sizeof(float), cudaHostAllocMapped));
  CHECK(cudaMallocHost(&out, n * sizeof(float)));
  for (int i = 0; i < n; i++) in[i] = float(i % 1000) * 0.5f, out[i] = -1.0f;
  cudaPointerAttributes a{};
  CHECK(cudaPointerGetAttributes(&a, in));
  EXPECT(a.type == cudaMemoryTypeHost, "memory type %d", int(a.type));
  EXPECT(a.devicePointer == in && a.hostPointer == in, "device pointer %p for host %p", a.devicePointer, (void*)in);
  void* dev = nullptr;
  CHECK(cudaHostGetDevicePointer(&dev, out, 0));
  EXPECT(dev == out, "cudaHostGetDevicePointer gave %p for %p", dev, (void*)out);

  square_into<<<(n + 255) / 256, 256>>>(in, out, n);  // host pointers, no copies
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  for (int i = 0; i < n; i++) EXPECT(out[i] == in[i] * in[i], "out[%d] = %f", i, out[i]);

  int* flags = nullptr;
  CHECK(cudaMallocHost(&flags, 3 * sizeof(int)));
  flags[0] = flags[1] = flags[2] = 0;
  wait_for_host<<<1, 1>>>(flags, flags + 1, flags + 2);
  CHECK(cudaGetLastError());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT(reinterpret_cast<std::atomic<int>*>(flags + 1)->load() == 0, "the kernel answered before the host asked");
  reinterpret_cast<std::atomic<int>*>(flags)->store(42);
  auto t0 = std::chrono::steady_clock::now();
  while (reinterpret_cast<std::atomic<int>*>(flags + 1)->load() == 0)
    EXPECT(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30), "the kernel never saw the flag");
  CHECK(cudaDeviceSynchronize());
  EXPECT(flags[2] == 42, "the kernel saw %d", flags[2]);

  CHECK(cudaFreeHost(in));
  CHECK(cudaFreeHost(out));
  CHECK(cudaFreeHost(flags));
  std::printf("PASS uva_pinned\n");
  return 0;
}
