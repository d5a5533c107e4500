// Several servers as devices 0..N-1 of one process, written as the
// multi-GPU samples are: each device gets its own allocation, kernel and
// copy back, checked on the host; a peer copy between two devices (both
// directions, cudaMemcpyPeer and cudaMemcpy with cudaMemcpyDefault), checked
// byte by byte; a cuBLAS SAXPY on device 1. With "bench" as argument it
// times a 64 MiB peer copy against the same bytes through this process
// (D2H then H2D), the median of 5 of each, and prints both rates.
#include <cublas_v2.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>

#include "check.cuh"

__global__ void fill(uint32_t* p, size_t n, uint32_t salt) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) p[i] = uint32_t(i * 2654435761u) ^ salt;
}

__global__ void add_one(uint32_t* p, size_t n) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) p[i] += 1;
}

static uint32_t want_at(size_t i, uint32_t salt) { return uint32_t(i * 2654435761u) ^ salt; }

static double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

static int bench(int a, int b) {
  const size_t bytes = 64 << 20;
  uint8_t *pa = nullptr, *pb = nullptr;
  CHECK(cudaSetDevice(a));
  CHECK(cudaMalloc(&pa, bytes));
  CHECK(cudaMemset(pa, 0x5a, bytes));
  CHECK(cudaSetDevice(b));
  CHECK(cudaMalloc(&pb, bytes));
  CHECK(cudaMemset(pb, 0, bytes));
  CHECK(cudaMemcpyPeer(pb, b, pa, a, 1 << 20));  // warm up both links
  std::vector<uint8_t> host(bytes);
  // Median of 5 of each, alternating, in the same run.
  std::vector<double> peer, via;
  for (int rep = 0; rep < 5; rep++) {
    auto t0 = std::chrono::steady_clock::now();
    CHECK(cudaMemcpyPeer(pb, b, pa, a, bytes));
    CHECK(cudaDeviceSynchronize());
    peer.push_back(seconds_since(t0));
    t0 = std::chrono::steady_clock::now();
    CHECK(cudaSetDevice(a));
    CHECK(cudaMemcpy(host.data(), pa, bytes, cudaMemcpyDeviceToHost));
    CHECK(cudaSetDevice(b));
    CHECK(cudaMemcpy(pb, host.data(), bytes, cudaMemcpyHostToDevice));
    via.push_back(seconds_since(t0));
  }
  std::sort(peer.begin(), peer.end());
  std::sort(via.begin(), via.end());
  std::vector<uint8_t> back(bytes);
  CHECK(cudaMemcpy(back.data(), pb, bytes, cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < bytes; i++) EXPECT(back[i] == 0x5a, "byte %zu: %u", i, back[i]);
  std::printf("peer_gb_s=%.3f client_gb_s=%.3f\n", bytes / peer[2] / 1e9, bytes / via[2] / 1e9);
  return 0;
}

int main(int argc, char** argv) {
  int n = 0;
  CHECK(cudaGetDeviceCount(&n));
  EXPECT(n >= 2, "%d devices, want at least 2", n);
  if (argc > 1 && std::strcmp(argv[1], "bench") == 0) return bench(0, 1);
  std::printf("devices: %d\n", n);

  // Per device: properties, an allocation, a kernel, the copy back.
  const size_t count = (4 << 20) + 17;  // 16 MiB and a bit, per device
  std::vector<uint32_t*> d(n, nullptr);
  for (int k = 0; k < n; k++) {
    cudaDeviceProp p{};
    CHECK(cudaGetDeviceProperties(&p, k));
    std::printf("device %d: %s\n", k, p.name);
    CHECK(cudaSetDevice(k));
    int cur = -1;
    CHECK(cudaGetDevice(&cur));
    EXPECT(cur == k, "cudaGetDevice %d after cudaSetDevice(%d)", cur, k);
    CHECK(cudaMalloc(&d[k], count * sizeof(uint32_t)));
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    fill<<<unsigned((count + 255) / 256), 256, 0, s>>>(d[k], count, 0x1000u * (k + 1));
    CHECK(cudaGetLastError());
    add_one<<<unsigned((count + 255) / 256), 256, 0, s>>>(d[k], count);
    CHECK(cudaGetLastError());
    cudaEvent_t ev;
    CHECK(cudaEventCreate(&ev));
    CHECK(cudaEventRecord(ev, s));
    CHECK(cudaEventSynchronize(ev));
    CHECK(cudaEventDestroy(ev));
    CHECK(cudaStreamDestroy(s));
  }
  for (int k = 0; k < n; k++) {
    for (int j = 0; j < k; j++)
      EXPECT(uint64_t(uintptr_t(d[j])) != uint64_t(uintptr_t(d[k])), "devices %d and %d share address %p", j, k,
             static_cast<void*>(d[k]));
    cudaPointerAttributes a{};
    CHECK(cudaPointerGetAttributes(&a, d[k]));
    EXPECT(a.type == cudaMemoryTypeDevice && a.device == k, "pointer of device %d: type %d device %d", k,
           int(a.type), a.device);
  }
  // Copies back, each from whatever device is current: routed by pointer.
  CHECK(cudaSetDevice(0));
  std::vector<uint32_t> host(count);
  for (int k = n - 1; k >= 0; k--) {
    std::fill(host.begin(), host.end(), 0);
    CHECK(cudaMemcpy(host.data(), d[k], count * sizeof(uint32_t), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < count; i++)
      EXPECT(host[i] == want_at(i, 0x1000u * (k + 1)) + 1, "device %d element %zu: %u", k, i, host[i]);
  }
  std::printf("per-device kernels: ok\n");

  // Peer copies: device 0 -> 1 with cudaMemcpyPeer, 1 -> 0 with
  // cudaMemcpy(Default) at an offset, checked element by element.
  int can = 0;
  CHECK(cudaDeviceCanAccessPeer(&can, 0, 1));
  EXPECT(can == 1, "cudaDeviceCanAccessPeer(0, 1) = %d", can);
  CHECK(cudaSetDevice(1));
  CHECK(cudaMemcpyPeer(d[1], 1, d[0], 0, count * sizeof(uint32_t)));
  CHECK(cudaMemcpy(host.data(), d[1], count * sizeof(uint32_t), cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < count; i++)
    EXPECT(host[i] == want_at(i, 0x1000u) + 1, "after peer copy 0->1, element %zu: %u", i, host[i]);
  CHECK(cudaSetDevice(1));
  add_one<<<unsigned((count + 255) / 256), 256>>>(d[1], count);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  const size_t off = 1000, len = count - 2 * off;
  CHECK(cudaSetDevice(0));
  CHECK(cudaMemcpy(d[0] + off, d[1] + off, len * sizeof(uint32_t), cudaMemcpyDefault));
  CHECK(cudaMemcpy(host.data(), d[0], count * sizeof(uint32_t), cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < count; i++) {
    uint32_t want = want_at(i, 0x1000u) + 1 + (i >= off && i < off + len ? 1 : 0);
    EXPECT(host[i] == want, "after peer copy 1->0, element %zu: %u want %u", i, host[i], want);
  }
  cudaStream_t s1;
  CHECK(cudaSetDevice(1));
  CHECK(cudaStreamCreate(&s1));
  CHECK(cudaMemcpyPeerAsync(d[1], 1, d[0], 0, 4096, s1));
  CHECK(cudaStreamSynchronize(s1));
  CHECK(cudaStreamDestroy(s1));
  std::printf("peer copies: ok\n");

  // cuBLAS on device 1: y = 2 x + y.
  CHECK(cudaSetDevice(1));
  const int m = 1 << 16;
  std::vector<float> x(m), y(m), r(m);
  for (int i = 0; i < m; i++) {
    x[i] = float(i % 97);
    y[i] = float(i % 13) - 6.0f;
  }
  float *dx = nullptr, *dy = nullptr;
  CHECK(cudaMalloc(&dx, m * sizeof(float)));
  CHECK(cudaMalloc(&dy, m * sizeof(float)));
  CHECK(cudaMemcpy(dx, x.data(), m * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dy, y.data(), m * sizeof(float), cudaMemcpyHostToDevice));
  cublasHandle_t h;
  CHECK_STATUS(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
  const float alpha = 2.0f;
  CHECK_STATUS(cublasSaxpy(h, m, &alpha, dx, 1, dy, 1), CUBLAS_STATUS_SUCCESS);
  CHECK(cudaMemcpy(r.data(), dy, m * sizeof(float), cudaMemcpyDeviceToHost));
  for (int i = 0; i < m; i++) EXPECT(r[i] == 2.0f * x[i] + y[i], "saxpy element %d: %f", i, r[i]);
  CHECK_STATUS(cublasDestroy(h), CUBLAS_STATUS_SUCCESS);
  cudaPointerAttributes a{};
  CHECK(cudaPointerGetAttributes(&a, dy));
  EXPECT(a.device == 1, "cuBLAS operand on device %d", a.device);
  std::printf("cublas on device 1: ok\n");

  for (int k = 0; k < n; k++) CHECK(cudaFree(d[k]));  // from device 1: routed to each owner
  CHECK(cudaFree(dx));
  CHECK(cudaFree(dy));
  EXPECT(cudaSetDevice(n) == cudaErrorInvalidDevice, "cudaSetDevice(%d) accepted", n);
  cudaGetLastError();
  std::printf("PASS\n");
  return 0;
}
