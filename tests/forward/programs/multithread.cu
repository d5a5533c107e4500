// Many threads of one client at once: each its own stream, buffers and kernels.
#include <thread>
#include <vector>
#include "check.cuh"

__global__ void axpb(float* x, float a, float b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = a * x[i] + b;
}

int main() {
  const int threads = 8, n = 4096, iters = 40;
  std::vector<std::thread> ts;
  std::vector<int> ok(threads, 0);
  for (int t = 0; t < threads; t++)
    ts.emplace_back([&, t] {
      cudaStream_t s;
      CHECK(cudaStreamCreate(&s));
      std::vector<float> h(n);
      for (int i = 0; i < n; i++) h[i] = float(t);
      float* d;
      CHECK(cudaMalloc(&d, n * 4));
      for (int k = 0; k < iters; k++) {
        CHECK(cudaMemcpyAsync(d, h.data(), n * 4, cudaMemcpyHostToDevice, s));
        axpb<<<n / 128, 128, 0, s>>>(d, 2.0f, float(k), n);
        CHECK(cudaMemcpyAsync(h.data(), d, n * 4, cudaMemcpyDeviceToHost, s));
        CHECK(cudaStreamSynchronize(s));
      }
      float want = float(t);
      for (int k = 0; k < iters; k++) want = 2.0f * want + float(k);
      for (int i = 0; i < n; i++) EXPECT(h[i] == want, "thread %d i=%d got %g want %g", t, i, h[i], want);
      CHECK(cudaFree(d));
      CHECK(cudaStreamDestroy(s));
      ok[t] = 1;
    });
  for (auto& t : ts) t.join();
  for (int t = 0; t < threads; t++) EXPECT(ok[t], "thread %d", t);
  std::printf("PASS multithread\n");
  return 0;
}
