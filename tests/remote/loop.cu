// Holds device memory and makes a synchronous call every few milliseconds
// (or every PAUSE_MS) until one fails (or `seconds` pass), checking a
// device counter it increments each time: prints READY once its memory is held,
// then, on a failure, the error and how long the failing call took.
#include <chrono>
#include <cstdlib>

#include "check.cuh"

__global__ void inc(int* x) { x[threadIdx.x] += 1; }

int main(int argc, char** argv) {
  size_t mb = argc > 1 ? size_t(std::atoi(argv[1])) : 32;
  int seconds = argc > 2 ? std::atoi(argv[2]) : 60;
  long pause_ms = argc > 3 ? std::atol(argv[3]) : 5;  // between two iterations
  int* d;
  CHECK(cudaMalloc(&d, mb << 20));
  CHECK(cudaMemset(d, 0, mb << 20));
  std::printf("READY\n");
  std::fflush(stdout);
  using C = std::chrono::steady_clock;
  auto end = C::now() + std::chrono::seconds(seconds);
  int h[32];
  for (long it = 1; C::now() < end; it++) {
    auto t0 = C::now();
    inc<<<1, 32>>>(d);
    cudaError_t e = cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    double ms = std::chrono::duration<double, std::milli>(C::now() - t0).count();
    if (e != cudaSuccess) {
      std::printf("ERROR %s after %.0f ms\n", cudaGetErrorName(e), ms);
      std::fflush(stdout);
      return 2;
    }
    EXPECT(h[0] == it, "iteration %ld: got %d", it, h[0]);
    struct timespec ts{pause_ms / 1000, (pause_ms % 1000) * 1000 * 1000};
    nanosleep(&ts, nullptr);
  }
  std::printf("DONE\n");
  return 0;
}
