// A client that is stopped between calls (SIGSTOP, as a debugger does) and
// then goes on: its device data must still be there. Puts data on the
// device, prints READY, waits until the file argv[1] exists, then checks.
#include <unistd.h>

#include <vector>

#include "check.cuh"

__global__ void affine(float* x, int n, float a, float b) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * a + b;
}

int main(int argc, char** argv) {
  EXPECT(argc == 2, "usage: stop_resume GO_FILE");
  const int n = 1 << 16;
  std::vector<float> h(n), back(n);
  for (int i = 0; i < n; i++) h[i] = float(i % 1000) * 0.25f;
  float* d = nullptr;
  CHECK(cudaMalloc(&d, n * sizeof(float)));
  CHECK(cudaMemcpy(d, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  affine<<<(n + 255) / 256, 256>>>(d, n, 2.f, 1.f);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  std::printf("READY\n");
  std::fflush(stdout);
  while (access(argv[1], F_OK) != 0) usleep(20000);
  affine<<<(n + 255) / 256, 256>>>(d, n, 1.f, 3.f);
  CHECK(cudaGetLastError());
  CHECK(cudaMemcpy(back.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; i++) EXPECT(back[i] == h[i] * 2.f + 4.f, "element %d: %f, wanted %f", i, back[i], h[i] * 2.f + 4.f);
  CHECK(cudaFree(d));
  std::printf("PASS stop_resume\n");
  return 0;
}
