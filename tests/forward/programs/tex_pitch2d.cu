// Textures over linear memory: a pitch2D texture over cudaMallocPitch
// memory (normalized coordinates, mirror mode, linear filtering) and a
// linear texture read with tex1Dfetch (0 outside the range).
#include <cmath>
#include <vector>

#include "check.cuh"

__global__ void sample(cudaTextureObject_t t, float* out, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
  if (x < w) out[y * w + x] = tex2D<float>(t, (x - 3.3f) / w, (y + 0.25f) / h * 1.5f);
}
__global__ void fetch(cudaTextureObject_t t, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex1Dfetch<int>(t, i - 4);
}

static float weight(float f) { return std::nearbyint(f * 256.0f) / 256.0f; }
static int mirror(int i, int n) {
  int p = ((i % (2 * n)) + 2 * n) % (2 * n);
  return p < n ? p : 2 * n - 1 - p;
}
static float fold(float u) {  // mirror mode on a normalized coordinate
  float f = std::floor(u), r = u - f;
  return ((long long)f & 1) ? 1 - r : r;
}

int main() {
  const int W = 29, H = 11;
  std::vector<float> img(W * H);
  for (int i = 0; i < W * H; ++i) img[i] = float((i * 37) % 101);
  float* dimg;
  size_t pitch;
  CHECK(cudaMallocPitch((void**)&dimg, &pitch, W * sizeof(float), H));
  CHECK(cudaMemcpy2D(dimg, pitch, img.data(), W * sizeof(float), W * sizeof(float), H, cudaMemcpyHostToDevice));
  cudaResourceDesc rd{};
  rd.resType = cudaResourceTypePitch2D;
  rd.res.pitch2D.devPtr = dimg;
  rd.res.pitch2D.desc = cudaCreateChannelDesc<float>();
  rd.res.pitch2D.width = W;
  rd.res.pitch2D.height = H;
  rd.res.pitch2D.pitchInBytes = pitch;
  cudaTextureDesc td{};
  td.addressMode[0] = td.addressMode[1] = cudaAddressModeMirror;
  td.filterMode = cudaFilterModeLinear;
  td.normalizedCoords = 1;
  cudaTextureObject_t t;
  CHECK(cudaCreateTextureObject(&t, &rd, &td, nullptr));
  float* d;
  CHECK(cudaMalloc(&d, W * H * sizeof(float)));
  sample<<<dim3(1, H), 32>>>(t, d, W, H);
  CHECK(cudaGetLastError());
  std::vector<float> o(W * H);
  CHECK(cudaMemcpy(o.data(), d, o.size() * sizeof(float), cudaMemcpyDeviceToHost));
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < W; ++x) {
      float u = fold((x - 3.3f) / W) * W - 0.5f, v = fold((y + 0.25f) / H * 1.5f) * H - 0.5f;
      int i = (int)std::floor(u), j = (int)std::floor(v);
      float a = weight(u - i), b = weight(v - j);
      auto T = [&](int ii, int jj) { return img[mirror(jj, H) * W + mirror(ii, W)]; };
      float e = (1 - a) * (1 - b) * T(i, j) + a * (1 - b) * T(i + 1, j) + (1 - a) * b * T(i, j + 1) + a * b * T(i + 1, j + 1);
      EXPECT(std::fabs(o[y * W + x] - e) <= 1e-3f, "pitch2D mirror at (%d,%d): %f vs %f", x, y, o[y * W + x], e);
    }
  CHECK(cudaDestroyTextureObject(t));
  // a misaligned pitch and a range past the allocation are refused
  rd.res.pitch2D.pitchInBytes = W * sizeof(float) + 4;
  EXPECT(cudaCreateTextureObject(&t, &rd, &td, nullptr) == cudaErrorInvalidPitchValue, "bad pitch");
  rd.res.pitch2D.pitchInBytes = pitch;
  rd.res.pitch2D.height = H + 1;
  EXPECT(cudaCreateTextureObject(&t, &rd, &td, nullptr) == cudaErrorInvalidValue, "past the allocation");
  cudaGetLastError();

  const int N = 100;
  std::vector<int> v(N);
  for (int i = 0; i < N; ++i) v[i] = i * i - 50;
  int *dv, *dout;
  CHECK(cudaMalloc(&dv, N * sizeof(int)));
  CHECK(cudaMalloc(&dout, (N + 8) * sizeof(int)));
  CHECK(cudaMemcpy(dv, v.data(), N * sizeof(int), cudaMemcpyHostToDevice));
  cudaResourceDesc lr{};
  lr.resType = cudaResourceTypeLinear;
  lr.res.linear.devPtr = dv;
  lr.res.linear.desc = cudaCreateChannelDesc<int>();
  lr.res.linear.sizeInBytes = N * sizeof(int);
  cudaTextureDesc ltd{};
  cudaTextureObject_t lt;
  CHECK(cudaCreateTextureObject(&lt, &lr, &ltd, nullptr));
  fetch<<<1, 128>>>(lt, dout, N + 8);
  CHECK(cudaGetLastError());
  std::vector<int> got(N + 8);
  CHECK(cudaMemcpy(got.data(), dout, got.size() * sizeof(int), cudaMemcpyDeviceToHost));
  for (int i = 0; i < N + 8; ++i) {
    int j = i - 4, e = j >= 0 && j < N ? v[j] : 0;
    EXPECT(got[i] == e, "tex1Dfetch at %d: %d vs %d", j, got[i], e);
  }
  cudaResourceDesc lb;
  CHECK(cudaGetTextureObjectResourceDesc(&lb, lt));
  EXPECT(lb.resType == cudaResourceTypeLinear && lb.res.linear.sizeInBytes == N * sizeof(int), "resource desc");
  CHECK(cudaDestroyTextureObject(lt));
  CHECK(cudaFree(dv));
  CHECK(cudaFree(dout));
  CHECK(cudaFree(dimg));
  std::printf("PASS tex_pitch2d\n");
  return 0;
}
