// fork() in a CUDA program: a child that simply exits must not disturb its
// parent's session, and a child that calls CUDA gets CUDA's error for use
// after fork (cudaErrorInitializationError) instead of sharing the
// parent's channel. The parent's data and launches keep working throughout.
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

#include "check.cuh"

__global__ void fill(int* a, int n, int base) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] = base + i;
}

static void verify(const int* d, int n, int base) {
  std::vector<int> h(n);
  CHECK(cudaMemcpy(h.data(), d, n * sizeof(int), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; i++) EXPECT(h[i] == base + i, "a[%d] = %d, want %d", i, h[i], base + i);
}

static int child_status(pid_t pid) {
  int st = 0;
  EXPECT(waitpid(pid, &st, 0) == pid, "waitpid");
  EXPECT(WIFEXITED(st), "child did not exit normally (status %d)", st);
  return WEXITSTATUS(st);
}

int main() {
  const int n = 4096;
  int* d = nullptr;
  CHECK(cudaMalloc(&d, n * sizeof(int)));
  fill<<<(n + 255) / 256, 256>>>(d, n, 7);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());

  // 1. A child that exits at once (running its atexit handlers).
  pid_t pid = fork();
  EXPECT(pid >= 0, "fork");
  if (pid == 0) std::exit(0);
  EXPECT(child_status(pid) == 0, "child 1 failed");
  verify(d, n, 7);

  // 2. A child that calls CUDA: refused with CUDA's error, parent untouched.
  pid = fork();
  EXPECT(pid >= 0, "fork");
  if (pid == 0) {
    int* c = nullptr;
    cudaError_t e = cudaMalloc(&c, 1024);
    if (e != cudaErrorInitializationError) {
      std::fprintf(stderr, "child: cudaMalloc -> %s, want cudaErrorInitializationError\n", cudaGetErrorName(e));
      std::exit(1);
    }
    std::exit(0);
  }
  EXPECT(child_status(pid) == 0, "child 2 failed");
  verify(d, n, 7);
  fill<<<(n + 255) / 256, 256>>>(d, n, 100);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  verify(d, n, 100);
  CHECK(cudaFree(d));
  std::printf("PASS fork_child\n");
  return 0;
}
