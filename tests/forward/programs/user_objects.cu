// User objects: a graph holds references (moved or added), its clone and its
// executable graph hold their own, and the destructor runs once, after the
// last of them is gone; a kernel in the graph still runs and is checked.
// Release past the references held, a zero count, a missing flag and a
// forged handle are refused.
#include <atomic>
#include "check.cuh"

__global__ void iota(int* a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] = 3 * i;
}

static std::atomic<int> g_destroyed{0};
static void destroy(void* p) { g_destroyed += *static_cast<int*>(p); }

int main() {
  constexpr int n = 1000;
  int* d;
  CHECK(cudaMalloc(&d, n * sizeof(int)));
  int tag = 1;
  cudaUserObject_t obj;
  EXPECT(cudaUserObjectCreate(&obj, &tag, destroy, 1, 0) == cudaErrorInvalidValue, "flags must be NoDestructorSync");
  cudaGetLastError();
  CHECK(cudaUserObjectCreate(&obj, &tag, destroy, 2, cudaUserObjectNoDestructorSync));

  cudaGraph_t g;
  CHECK(cudaGraphCreate(&g, 0));
  cudaKernelNodeParams kp = {};
  int nn = n;
  void* args[] = {&d, &nn};
  kp.func = reinterpret_cast<void*>(iota);
  kp.gridDim = dim3((n + 127) / 128);
  kp.blockDim = dim3(128);
  kp.kernelParams = args;
  cudaGraphNode_t k;
  CHECK(cudaGraphAddKernelNode(&k, g, nullptr, 0, &kp));
  CHECK(cudaGraphRetainUserObject(g, obj, 1, cudaGraphUserObjectMove));  // one of ours becomes the graph's
  CHECK(cudaGraphRetainUserObject(g, obj, 2, 0));                       // two more for the graph
  EXPECT(cudaGraphReleaseUserObject(g, obj, 4) == cudaErrorInvalidValue, "the graph holds 3");
  cudaGetLastError();
  CHECK(cudaGraphReleaseUserObject(g, obj, 1));
  cudaGraph_t clone;
  CHECK(cudaGraphClone(&clone, g));
  cudaGraphExec_t x;
  CHECK(cudaGraphInstantiate(&x, g, 0));
  CHECK(cudaUserObjectRelease(obj, 1));  // our last
  CHECK(cudaGraphDestroy(g));
  EXPECT(g_destroyed == 0, "destroyed while the clone and the executable graph hold it");
  CHECK(cudaGraphLaunch(x, 0));
  CHECK(cudaStreamSynchronize(0));
  int h[n];
  CHECK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; i++) EXPECT(h[i] == 3 * i, "h[%d] = %d", i, h[i]);
  CHECK(cudaGraphDestroy(clone));
  EXPECT(g_destroyed == 0, "destroyed while the executable graph holds it");
  CHECK(cudaGraphExecDestroy(x));
  EXPECT(g_destroyed == 1, "destructor ran %d times, want 1", int(g_destroyed));
  EXPECT(cudaUserObjectRetain(obj, 1) == cudaErrorInvalidValue, "a destroyed object is no handle");
  cudaGetLastError();
  EXPECT(cudaUserObjectRelease(reinterpret_cast<cudaUserObject_t>(&tag), 1) == cudaErrorInvalidValue, "forged handle");
  cudaGetLastError();
  CHECK(cudaFree(d));
  std::printf("PASS user_objects\n");
  return 0;
}
