// A program whose session is moved to another server while it waits
// (tests/server/migrate.sh). It builds state of every kind a checkpoint
// carries: device memory, module variables (initialised, written by a
// kernel, and __managed__), streams with flags and priorities, recorded
// events, a cuBLAS handle, pinned and managed memory and kernel printf text
// not fetched yet; prints READY, waits until
// the file argv[1] exists, then checks that all of it is still there and
// still works, against values computed on the host.
// --hold KIND: also holds state no checkpoint carries yet (fft, pool,
// graph), so a migration must be refused naming it.
#include <cublas_v2.h>
#include <cufft.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "check.cuh"

__device__ int d_table[4] = {7, 11, 13, 17};
__device__ float d_scale = 0.5f;
__device__ unsigned long long d_launches;
__managed__ int m_counter = 40;

__global__ void fill(float* x, int n, float base) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = base + float(i % 97) * d_scale + float(d_table[i & 3]);
  if (i == 0) {
    d_launches++;
    m_counter++;
  }
}

__global__ void say(int v) { printf("probe kernel says %d\n", v); }

int main(int argc, char** argv) {
  EXPECT(argc >= 2, "usage: migrate_probe GO_FILE [--hold fft|pool|graph]");
  const char* hold = argc >= 4 && !std::strcmp(argv[2], "--hold") ? argv[3] : "";
  const int n = 1 << 18;
  float *a = nullptr, *b = nullptr, *c = nullptr;
  CHECK(cudaMalloc(&a, n * sizeof(float)));
  CHECK(cudaMalloc(&b, n * sizeof(float)));
  const int m = 96;  // c = a' * b' over m x m blocks
  CHECK(cudaMalloc(&c, m * m * sizeof(float)));
  cudaStream_t s1, s2;
  int lo = 0, hi = 0;
  CHECK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
  CHECK(cudaStreamCreateWithPriority(&s1, cudaStreamNonBlocking, hi));
  CHECK(cudaStreamCreate(&s2));
  cudaEvent_t e1, e2, unrecorded;
  CHECK(cudaEventCreate(&e1));
  CHECK(cudaEventCreateWithFlags(&e2, cudaEventDisableTiming));
  CHECK(cudaEventCreate(&unrecorded));
  fill<<<(n + 255) / 256, 256, 0, s1>>>(a, n, 1.0f);
  CHECK(cudaEventRecord(e1, s1));
  CHECK(cudaStreamWaitEvent(s2, e1, 0));
  fill<<<(n + 255) / 256, 256, 0, s2>>>(b, n, -2.0f);
  CHECK(cudaEventRecord(e2, s2));
  float* pinned = nullptr;
  CHECK(cudaMallocHost(&pinned, n * sizeof(float)));
  int* managed = nullptr;
  CHECK(cudaMallocManaged(&managed, 64 * sizeof(int)));
  for (int i = 0; i < 64; i++) managed[i] = i * i;
  cublasHandle_t blas;
  CHECK(cublasCreate(&blas) == CUBLAS_STATUS_SUCCESS ? cudaSuccess : cudaErrorUnknown);
  CHECK(cudaDeviceSynchronize());
  // Output the program has not fetched yet: it comes at the next sync, here or there.
  say<<<1, 1>>>(1234);
  // State no checkpoint carries yet, on request.
  cufftHandle plan = 0;
  void* pooled = nullptr;
  cudaGraphExec_t exec = nullptr;
  if (!std::strcmp(hold, "fft")) EXPECT(cufftPlan1d(&plan, 256, CUFFT_C2C, 1) == CUFFT_SUCCESS, "cufftPlan1d");
  if (!std::strcmp(hold, "pool")) CHECK(cudaMallocAsync(&pooled, 4096, s1));
  if (!std::strcmp(hold, "graph")) {
    cudaGraph_t g;
    CHECK(cudaStreamBeginCapture(s2, cudaStreamCaptureModeGlobal));
    fill<<<1, 32, 0, s2>>>(c, 32, 0.f);
    CHECK(cudaStreamEndCapture(s2, &g));
    CHECK(cudaGraphInstantiate(&exec, g, 0));
  }
  std::printf("READY\n");
  std::fflush(stdout);
  while (access(argv[1], F_OK) != 0) usleep(20000);

  // The same device memory, variables and objects, after the move.
  CHECK(cudaEventSynchronize(e2));
  CHECK(cudaStreamSynchronize(s1));
  EXPECT(cudaEventQuery(e1) == cudaSuccess, "event e1 not complete");
  std::vector<float> ha(n), hb(n);
  CHECK(cudaMemcpy(ha.data(), a, n * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(hb.data(), b, n * sizeof(float), cudaMemcpyDeviceToHost));
  const int table[4] = {7, 11, 13, 17};
  for (int i = 0; i < n; i++) {
    const float want = float(i % 97) * 0.5f + float(table[i & 3]);
    EXPECT(ha[i] == 1.0f + want && hb[i] == -2.0f + want, "element %d: %f %f", i, ha[i], hb[i]);
  }
  unsigned long long launches = 0;
  CHECK(cudaMemcpyFromSymbol(&launches, d_launches, sizeof launches));
  EXPECT(launches == 2, "d_launches %llu, wanted 2", launches);
  EXPECT(m_counter == 42, "m_counter %d, wanted 42", m_counter);
  for (int i = 0; i < 64; i++) EXPECT(managed[i] == i * i, "managed[%d] = %d", i, managed[i]);
  // Still working: the same kernels, streams, events and handles.
  float scale = 0.25f;
  CHECK(cudaMemcpyToSymbol(d_scale, &scale, sizeof scale));
  fill<<<(n + 255) / 256, 256, 0, s1>>>(a, n, 3.0f);
  CHECK(cudaGetLastError());
  CHECK(cudaEventRecord(e1, s1));
  CHECK(cudaStreamWaitEvent(s2, e1, 0));
  CHECK(cudaMemcpyAsync(pinned, a, n * sizeof(float), cudaMemcpyDeviceToHost, s2));
  CHECK(cudaStreamSynchronize(s2));
  for (int i = 0; i < n; i++) {
    const float want = 3.0f + float(i % 97) * 0.25f + float(table[i & 3]);
    EXPECT(pinned[i] == want, "after: element %d: %f, wanted %f", i, pinned[i], want);
  }
  EXPECT(m_counter == 43, "m_counter %d, wanted 43", m_counter);
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, e1, e1));
  const float one = 1.f, zero = 0.f;
  EXPECT(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, &one, a, m, b, m, &zero, c, m) == CUBLAS_STATUS_SUCCESS,
         "cublasSgemm");
  std::vector<float> hc(m * m);
  CHECK(cudaMemcpy(hc.data(), c, hc.size() * sizeof(float), cudaMemcpyDeviceToHost));
  std::vector<float> a2(n);
  for (int i = 0; i < n; i++) a2[i] = pinned[i];
  for (int j = 0; j < m; j++)
    for (int i = 0; i < m; i++) {
      double want = 0;
      for (int k = 0; k < m; k++) want += double(a2[k * m + i]) * double(hb[j * m + k]);
      EXPECT(std::fabs(hc[j * m + i] - want) <= 1e-3 * (1 + std::fabs(want)), "sgemm (%d,%d): %f vs %f", i, j,
             hc[j * m + i], want);
    }
  if (plan) cufftDestroy(plan);
  if (pooled) CHECK(cudaFreeAsync(pooled, s1));
  if (exec) CHECK(cudaGraphExecDestroy(exec));
  cublasDestroy(blas);
  CHECK(cudaFreeHost(pinned));
  CHECK(cudaFree(managed));
  CHECK(cudaFree(a));
  CHECK(cudaFree(b));
  CHECK(cudaFree(c));
  std::printf("PASS migrate_probe\n");
  return 0;
}
