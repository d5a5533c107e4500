// Vector add with pageable, pinned and inline-sized copies, including one
// larger than the staging area (pipelined chunks).
#include <vector>
#include "check.cuh"

__global__ void vadd(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

static void run(int n, bool pinned) {
  size_t bytes = size_t(n) * sizeof(float);
  float *ha, *hb, *hc;
  std::vector<float> va, vb, vc;
  if (pinned) {
    CHECK(cudaMallocHost(&ha, bytes));
    CHECK(cudaMallocHost(&hb, bytes));
    CHECK(cudaHostAlloc(&hc, bytes, cudaHostAllocDefault));
  } else {
    va.resize(n), vb.resize(n), vc.resize(n);
    ha = va.data(), hb = vb.data(), hc = vc.data();
  }
  for (int i = 0; i < n; i++) ha[i] = float(i % 1000) * 0.5f, hb[i] = float((i * 7) % 333);
  float *da, *db, *dc;
  CHECK(cudaMalloc(&da, bytes));
  CHECK(cudaMalloc(&db, bytes));
  CHECK(cudaMalloc(&dc, bytes));
  CHECK(cudaMemcpy(da, ha, bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(db, hb, bytes, cudaMemcpyHostToDevice));
  vadd<<<(n + 255) / 256, 256>>>(da, db, dc, n);
  CHECK(cudaGetLastError());
  CHECK(cudaMemcpy(hc, dc, bytes, cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; i++) EXPECT(hc[i] == ha[i] + hb[i], "n=%d i=%d got %f want %f", n, i, hc[i], ha[i] + hb[i]);
  CHECK(cudaFree(da));
  CHECK(cudaFree(db));
  CHECK(cudaFree(dc));
  if (pinned) {
    CHECK(cudaFreeHost(ha));
    CHECK(cudaFreeHost(hb));
    CHECK(cudaFreeHost(hc));
  }
}

int main() {
  for (bool pinned : {false, true})
    for (int n : {1, 1000, 100000, 5 << 20}) run(n, pinned);
  std::printf("PASS vector_add\n");
  return 0;
}
