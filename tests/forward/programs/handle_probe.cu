// Isolation between clients (and VMs): "own" allocates device memory, fills
// a pattern, prints its address, waits for a file to appear, then checks the
// pattern is intact. "attack <hex address>" (another client, e.g. in another
// VM) tries to read and write that address with copies and with a kernel:
// every attempt must fail, and its own work must still run.
#include <unistd.h>
#include <cstdlib>
#include <cstring>
#include <vector>
#include "check.cuh"

__global__ void poke(unsigned* p) { *p = 0xdeadbeef; }
__global__ void ok(int* p) { p[threadIdx.x] = threadIdx.x; }

int main(int argc, char** argv) {
  const size_t n = 1 << 16;
  if (argc >= 3 && !std::strcmp(argv[1], "own")) {
    unsigned* d;
    CHECK(cudaMalloc(&d, n * 4));
    std::vector<unsigned> h(n);
    for (size_t i = 0; i < n; i++) h[i] = unsigned(i * 2654435761u);
    CHECK(cudaMemcpy(d, h.data(), n * 4, cudaMemcpyHostToDevice));
    std::printf("DPTR=0x%llx\n", (unsigned long long)d);
    std::fflush(stdout);
    for (int i = 0; i < 600 && access(argv[2], F_OK) != 0; i++) usleep(100000);
    std::vector<unsigned> back(n);
    CHECK(cudaMemcpy(back.data(), d, n * 4, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++) EXPECT(back[i] == h[i], "pattern changed at %zu", i);
    std::printf("PASS handle_probe own\n");
    return 0;
  }
  if (argc >= 3 && !std::strcmp(argv[1], "attack")) {
    unsigned* foreign = reinterpret_cast<unsigned*>(std::strtoull(argv[2], nullptr, 16));
    std::vector<unsigned> h(n, 7);
    EXPECT(cudaMemcpy(h.data(), foreign, 4096, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue, "foreign read");
    EXPECT(cudaMemcpy(foreign, h.data(), 4096, cudaMemcpyHostToDevice) == cudaErrorInvalidValue, "foreign write");
    EXPECT(cudaMemset(foreign, 0, 4096) == cudaErrorInvalidValue, "foreign memset");
    EXPECT(cudaFree(foreign) == cudaErrorInvalidValue, "foreign free");
    cudaGetLastError();
    int* mine;
    CHECK(cudaMalloc(&mine, 32 * 4));
    ok<<<1, 32>>>(mine);
    int hm[32];
    CHECK(cudaMemcpy(hm, mine, sizeof hm, cudaMemcpyDeviceToHost));
    for (int i = 0; i < 32; i++) EXPECT(hm[i] == i, "own work i=%d", i);
    poke<<<1, 1>>>(foreign);  // a kernel writing there faults in this client only
    cudaError_t e = cudaDeviceSynchronize();
    EXPECT(e == cudaErrorIllegalAddress, "kernel on a foreign address: %s", cudaGetErrorName(e));
    std::printf("PASS handle_probe attack\n");
    return 0;
  }
  std::fprintf(stderr, "usage: handle_probe own <flagfile> | attack <hexaddr>\n");
  return 2;
}
