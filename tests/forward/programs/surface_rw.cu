// Surface objects: a kernel writes a float and a uchar4 2D array through
// surf2Dwrite, another reads them back with surf2Dread (with the clamp and
// zero boundary modes), and the host checks both arrays; then a texture
// over the same array sees the surface's writes.
#include <vector>

#include "check.cuh"

__global__ void fill(cudaSurfaceObject_t sf, cudaSurfaceObject_t s4, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= w || y >= h) return;
  surf2Dwrite(float(x * 1000 + y), sf, x * (int)sizeof(float), y);
  surf2Dwrite(make_uchar4(x, y, x + y, 7), s4, x * (int)sizeof(uchar4), y);
}

__global__ void read_back(cudaSurfaceObject_t sf, float* out, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= w || y >= h) return;
  float v = surf2Dread<float>(sf, x * 4, y) * 2.0f;
  surf2Dwrite(v, sf, x * 4, y);
  // out of range: clamp reads the edge, zero reads 0
  out[y * w + x] = surf2Dread<float>(sf, (x + w) * 4, y, cudaBoundaryModeClamp) + surf2Dread<float>(sf, -4, y, cudaBoundaryModeZero);
}

__global__ void through_tex(cudaTextureObject_t t, float* out, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < w && y < h) out[y * w + x] = tex2D<float>(t, x + 0.5f, y + 0.5f);
}

int main() {
  const int W = 45, H = 19;
  cudaChannelFormatDesc fd = cudaCreateChannelDesc<float>(), cd = cudaCreateChannelDesc<uchar4>();
  cudaArray_t af, a4, plain;
  CHECK(cudaMallocArray(&af, &fd, W, H, cudaArraySurfaceLoadStore));
  CHECK(cudaMallocArray(&a4, &cd, W, H, cudaArraySurfaceLoadStore));
  CHECK(cudaMallocArray(&plain, &fd, W, H));
  cudaResourceDesc rd{};
  rd.resType = cudaResourceTypeArray;
  rd.res.array.array = plain;
  cudaSurfaceObject_t sf, s4, bad;
  EXPECT(cudaCreateSurfaceObject(&bad, &rd) == cudaErrorInvalidValue, "surface on an array without the flag");
  cudaGetLastError();
  rd.res.array.array = af;
  CHECK(cudaCreateSurfaceObject(&sf, &rd));
  rd.res.array.array = a4;
  CHECK(cudaCreateSurfaceObject(&s4, &rd));
  dim3 blk(16, 4), grd((W + 15) / 16, (H + 3) / 4);
  fill<<<grd, blk>>>(sf, s4, W, H);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  std::vector<float> hf(W * H);
  std::vector<uchar4> h4(W * H);
  CHECK(cudaMemcpy2DFromArray(hf.data(), W * 4, af, 0, 0, W * 4, H, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy2DFromArray(h4.data(), W * 4, a4, 0, 0, W * 4, H, cudaMemcpyDeviceToHost));
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < W; ++x) {
      EXPECT(hf[y * W + x] == float(x * 1000 + y), "float surface at (%d,%d): %f", x, y, hf[y * W + x]);
      uchar4 p = h4[y * W + x];
      EXPECT(p.x == x && p.y == y && p.z == x + y && p.w == 7, "uchar4 surface at (%d,%d)", x, y);
    }
  float* d;
  CHECK(cudaMalloc(&d, W * H * sizeof(float)));
  read_back<<<grd, blk>>>(sf, d, W, H);
  CHECK(cudaGetLastError());
  std::vector<float> o(W * H);
  CHECK(cudaMemcpy(o.data(), d, W * H * sizeof(float), cudaMemcpyDeviceToHost));
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < W; ++x) {
      // the clamped read sees the last column, doubled or not depending on the order; both are valid
      float edge = float((W - 1) * 1000 + y);
      EXPECT(o[y * W + x] == edge || o[y * W + x] == 2 * edge, "clamped read at (%d,%d): %f", x, y, o[y * W + x]);
    }
  cudaTextureDesc td{};
  td.addressMode[0] = td.addressMode[1] = cudaAddressModeClamp;
  cudaTextureObject_t t;
  rd.res.array.array = af;
  CHECK(cudaCreateTextureObject(&t, &rd, &td, nullptr));
  through_tex<<<grd, blk>>>(t, d, W, H);
  CHECK(cudaGetLastError());
  CHECK(cudaMemcpy(o.data(), d, W * H * sizeof(float), cudaMemcpyDeviceToHost));
  for (int i = 0; i < W * H; ++i) EXPECT(o[i] == 2 * float((i % W) * 1000 + i / W), "texture after surface at %d", i);
  cudaResourceDesc back{};
  CHECK(cudaGetSurfaceObjectResourceDesc(&back, sf));
  EXPECT(back.resType == cudaResourceTypeArray && back.res.array.array == af, "surface resource desc");
  CHECK(cudaDestroyTextureObject(t));
  CHECK(cudaDestroySurfaceObject(sf));
  CHECK(cudaDestroySurfaceObject(s4));
  EXPECT(cudaDestroySurfaceObject(sf) == cudaErrorInvalidValue, "double destroy");
  cudaGetLastError();
  CHECK(cudaFree(d));
  CHECK(cudaFreeArray(af));
  CHECK(cudaFreeArray(a4));
  CHECK(cudaFreeArray(plain));
  std::printf("PASS surface_rw\n");
  return 0;
}
