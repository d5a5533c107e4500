// The client that must not notice anything while others come and go: for
// SECONDS it allocates, fills, transforms and reads back buffers of varying
// size, checking every value, and frees them. Prints its iteration count.
// Usage: verify_loop SECONDS
#include <chrono>
#include <cstdlib>
#include <vector>

#include "check.cuh"

__global__ void affine(const unsigned* x, unsigned* y, int n, unsigned a, unsigned b) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * a + b;
}

int main(int argc, char** argv) {
  EXPECT(argc == 2, "usage: verify_loop SECONDS");
  const double seconds = std::atof(argv[1]);
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  long iter = 0;
  std::vector<unsigned> h, back;
  while (std::chrono::steady_clock::now() < end) {
    const int n = 1024 + int((iter * 7919) % 65536);
    const unsigned a = 2654435761u + unsigned(iter), b = unsigned(iter) * 40503u;
    h.resize(size_t(n));
    back.assign(size_t(n), 0);
    for (int i = 0; i < n; i++) h[size_t(i)] = unsigned(i) ^ unsigned(iter * 131);
    unsigned *x = nullptr, *y = nullptr;
    CHECK(cudaMalloc(&x, size_t(n) * 4));
    CHECK(cudaMalloc(&y, size_t(n) * 4));
    CHECK(cudaMemcpy(x, h.data(), size_t(n) * 4, cudaMemcpyHostToDevice));
    affine<<<(n + 255) / 256, 256>>>(x, y, n, a, b);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(back.data(), y, size_t(n) * 4, cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++)
      EXPECT(back[size_t(i)] == h[size_t(i)] * a + b, "iteration %ld: y[%d] = %u, want %u", iter, i, back[size_t(i)],
             h[size_t(i)] * a + b);
    CHECK(cudaFree(x));
    CHECK(cudaFree(y));
    iter++;
  }
  std::printf("PASS verify_loop %ld iterations\n", iter);
  return 0;
}
