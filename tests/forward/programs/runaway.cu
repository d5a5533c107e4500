// A kernel that never ends (a spin on a flag nobody sets). With an
// argument "wait" the program prints READY and waits in
// cudaDeviceSynchronize, to be killed or to see the server's watchdog.
#include <cstring>

#include "check.cuh"

__global__ void spin(volatile int* flag) {
  while (*flag == 0) {
  }
}

int main(int argc, char** argv) {
  int* flag = nullptr;
  CHECK(cudaMalloc(&flag, sizeof(int)));
  CHECK(cudaMemset(flag, 0, sizeof(int)));
  spin<<<2, 64>>>(flag);
  CHECK(cudaGetLastError());
  std::printf("READY\n");
  std::fflush(stdout);
  cudaError_t e = cudaDeviceSynchronize();
  std::printf("synchronize: %s\n", cudaGetErrorName(e));
  if (argc > 1 && std::strcmp(argv[1], "timeout") == 0) {
    EXPECT(e == cudaErrorLaunchTimeout, "expected the watchdog's cudaErrorLaunchTimeout, got %s", cudaGetErrorName(e));
    std::printf("PASS runaway\n");
    return 0;
  }
  return 1;
}
