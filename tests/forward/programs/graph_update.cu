// cudaGraphExecUpdate: a captured sequence is instantiated, captured again
// with other arguments and copy targets, and the executable graph updated
// in place; a recapture with another shape is refused and leaves the
// executable graph as it was.
#include <vector>
#include "check.cuh"

__global__ void axpb(const float* x, float* y, float a, float b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + b;
}

constexpr int N = 500;
constexpr int T = 128, B = (N + T - 1) / T;

static cudaGraph_t capture(cudaStream_t s, const float* h_in, float* d_x, float* d_y, float* h_out, float a, float b,
                           bool extra) {
  cudaGraph_t g;
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  CHECK(cudaMemcpyAsync(d_x, h_in, N * sizeof(float), cudaMemcpyHostToDevice, s));
  axpb<<<B, T, 0, s>>>(d_x, d_y, a, b, N);
  CHECK(cudaGetLastError());
  if (extra) {
    axpb<<<B, T, 0, s>>>(d_y, d_y, 1.f, 1.f, N);
    CHECK(cudaGetLastError());
  }
  CHECK(cudaMemcpyAsync(h_out, d_y, N * sizeof(float), cudaMemcpyDeviceToHost, s));
  CHECK(cudaStreamEndCapture(s, &g));
  return g;
}

static void expect_out(const float* in, const float* out, float a, float b, const char* what) {
  for (int i = 0; i < N; i++) EXPECT(out[i] == a * in[i] + b, "%s: out[%d] = %g, want %g", what, i, out[i], a * in[i] + b);
}

int main() {
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  float *h_in, *h_out, *h_out2, *d_x, *d_y;
  CHECK(cudaMallocHost(&h_in, N * sizeof(float)));
  CHECK(cudaMallocHost(&h_out, N * sizeof(float)));
  CHECK(cudaMallocHost(&h_out2, N * sizeof(float)));
  CHECK(cudaMalloc(&d_x, N * sizeof(float)));
  CHECK(cudaMalloc(&d_y, N * sizeof(float)));
  for (int i = 0; i < N; i++) h_in[i] = float(i % 50) - 10.f;

  cudaGraph_t g1 = capture(s, h_in, d_x, d_y, h_out, 2.f, 1.f, false);
  cudaGraphExec_t x;
  CHECK(cudaGraphInstantiate(&x, g1, 0));
  CHECK(cudaGraphLaunch(x, s));
  CHECK(cudaStreamSynchronize(s));
  expect_out(h_in, h_out, 2.f, 1.f, "first graph");

  // Same shape, new scalars and a new destination buffer: updated in place.
  cudaGraph_t g2 = capture(s, h_in, d_x, d_y, h_out2, -3.f, 0.5f, false);
  cudaGraphExecUpdateResultInfo info;
  CHECK(cudaGraphExecUpdate(x, g2, &info));
  EXPECT(info.result == cudaGraphExecUpdateSuccess, "update result %d", int(info.result));
  for (int it = 0; it < 3; it++) {
    for (int i = 0; i < N; i++) h_in[i] = float((i + it) % 50);
    CHECK(cudaGraphLaunch(x, s));
    CHECK(cudaStreamSynchronize(s));
    expect_out(h_in, h_out2, -3.f, 0.5f, "updated graph");
  }

  // Another shape: refused, and the executable graph keeps running the last update.
  cudaGraph_t g3 = capture(s, h_in, d_x, d_y, h_out, 9.f, 9.f, true);
  EXPECT(cudaGraphExecUpdate(x, g3, &info) == cudaErrorGraphExecUpdateFailure, "topology change accepted");
  EXPECT(info.result == cudaGraphExecUpdateErrorTopologyChanged, "update result %d", int(info.result));
  cudaGetLastError();
  for (int i = 0; i < N; i++) h_out2[i] = 0.f;
  CHECK(cudaGraphLaunch(x, s));
  CHECK(cudaStreamSynchronize(s));
  expect_out(h_in, h_out2, -3.f, 0.5f, "after refused update");

  CHECK(cudaGraphExecDestroy(x));
  CHECK(cudaGraphDestroy(g1));
  CHECK(cudaGraphDestroy(g2));
  CHECK(cudaGraphDestroy(g3));
  CHECK(cudaFree(d_x));
  CHECK(cudaFree(d_y));
  CHECK(cudaFreeHost(h_in));
  CHECK(cudaFreeHost(h_out));
  CHECK(cudaFreeHost(h_out2));
  CHECK(cudaStreamDestroy(s));
  std::printf("PASS graph_update\n");
  return 0;
}
