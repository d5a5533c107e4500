// Volumes: cudaMemcpy3D from a pitched host buffer into a 3D array, read by
// tex3D (point and trilinear), a layered 2D array read by tex2DLayered, a
// mipmapped array's level 0, and cudaMemcpy3D back out of an array into
// cudaMalloc3D memory.
#include <cmath>
#include <vector>

#include "check.cuh"

__global__ void sample3d(cudaTextureObject_t t, float* out, int w, int h, int d, float off) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y, z = blockIdx.z;
  if (x < w) out[(z * h + y) * w + x] = tex3D<float>(t, x + off, y + off, z + off);
}
__global__ void sample_layers(cudaTextureObject_t t, float* out, int w, int h, int layers) {
  int x = threadIdx.x, y = blockIdx.x, l = blockIdx.y;
  if (x < w) out[(l * h + y) * w + x] = tex2DLayered<float>(t, x + 0.5f, y + 0.5f, l);
}

static float weight(float f) { return std::nearbyint(f * 256.0f) / 256.0f; }

int main() {
  const int W = 13, H = 7, D = 5;
  std::vector<float> vol(W * H * D);
  for (int i = 0; i < W * H * D; ++i) vol[i] = float(i % 97) * 0.5f - 3.0f;
  cudaChannelFormatDesc fd = cudaCreateChannelDesc<float>();
  cudaArray_t a;
  CHECK(cudaMalloc3DArray(&a, &fd, make_cudaExtent(W, H, D)));
  cudaMemcpy3DParms p{};
  p.srcPtr = make_cudaPitchedPtr(vol.data(), W * sizeof(float), W, H);
  p.dstArray = a;
  p.extent = make_cudaExtent(W, H, D);
  p.kind = cudaMemcpyHostToDevice;
  CHECK(cudaMemcpy3D(&p));
  cudaResourceDesc rd{};
  rd.resType = cudaResourceTypeArray;
  rd.res.array.array = a;
  cudaTextureDesc td{};
  for (int k = 0; k < 3; ++k) td.addressMode[k] = cudaAddressModeClamp;
  cudaTextureObject_t tp, tl;
  CHECK(cudaCreateTextureObject(&tp, &rd, &td, nullptr));
  td.filterMode = cudaFilterModeLinear;
  CHECK(cudaCreateTextureObject(&tl, &rd, &td, nullptr));
  float* d;
  CHECK(cudaMalloc(&d, vol.size() * sizeof(float)));
  std::vector<float> o(vol.size());
  sample3d<<<dim3(1, H, D), 32>>>(tp, d, W, H, D, 0.5f);
  CHECK(cudaGetLastError());
  CHECK(cudaMemcpy(o.data(), d, o.size() * sizeof(float), cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < o.size(); ++i) EXPECT(o[i] == vol[i], "tex3D point at %zu: %f vs %f", i, o[i], vol[i]);
  // trilinear, a quarter texel off the centres: weights 0.75/0.25 in each axis
  sample3d<<<dim3(1, H, D), 32>>>(tl, d, W, H, D, 0.75f);
  CHECK(cudaGetLastError());
  CHECK(cudaMemcpy(o.data(), d, o.size() * sizeof(float), cudaMemcpyDeviceToHost));
  auto T = [&](int x, int y, int z) {
    x = x < 0 ? 0 : x >= W ? W - 1 : x; y = y < 0 ? 0 : y >= H ? H - 1 : y; z = z < 0 ? 0 : z >= D ? D - 1 : z;
    return vol[(z * H + y) * W + x];
  };
  const float a1 = weight(0.25f);
  for (int z = 0; z < D; ++z)
    for (int y = 0; y < H; ++y)
      for (int x = 0; x < W; ++x) {
        float e = 0;
        for (int q = 0; q < 8; ++q) {
          int dx = q & 1, dy = (q >> 1) & 1, dz = q >> 2;
          e += (dx ? a1 : 1 - a1) * (dy ? a1 : 1 - a1) * (dz ? a1 : 1 - a1) * T(x + dx, y + dy, z + dz);
        }
        float g = o[(z * H + y) * W + x];
        EXPECT(std::fabs(g - e) <= 1e-4f, "tex3D linear at (%d,%d,%d): %f vs %f", x, y, z, g, e);
      }
  // out of the array into cudaMalloc3D memory, then back to the host
  cudaPitchedPtr pp;
  CHECK(cudaMalloc3D(&pp, make_cudaExtent(W * sizeof(float), H, D)));
  cudaMemcpy3DParms q{};
  q.srcArray = a;
  q.dstPtr = pp;
  q.extent = make_cudaExtent(W, H, D);
  q.kind = cudaMemcpyDeviceToDevice;
  CHECK(cudaMemcpy3D(&q));
  std::vector<float> back(vol.size());
  cudaMemcpy3DParms r{};
  r.srcPtr = pp;
  r.dstPtr = make_cudaPitchedPtr(back.data(), W * sizeof(float), W, H);
  r.extent = make_cudaExtent(W * sizeof(float), H, D);  // no array: width in bytes
  r.kind = cudaMemcpyDeviceToHost;
  CHECK(cudaMemcpy3D(&r));
  for (size_t i = 0; i < vol.size(); ++i) EXPECT(back[i] == vol[i], "3D copy back at %zu", i);
  CHECK(cudaFree(pp.ptr));
  // out-of-range boxes are refused
  p.dstPos = make_cudaPos(1, 0, 0);
  EXPECT(cudaMemcpy3D(&p) == cudaErrorInvalidValue, "box past the array's end");
  cudaGetLastError();
  CHECK(cudaDestroyTextureObject(tp));
  CHECK(cudaDestroyTextureObject(tl));
  CHECK(cudaFreeArray(a));

  // layered 2D: D layers of W x H
  cudaArray_t la;
  CHECK(cudaMalloc3DArray(&la, &fd, make_cudaExtent(W, H, D), cudaArrayLayered));
  cudaExtent ext;
  unsigned flags;
  CHECK(cudaArrayGetInfo(nullptr, &ext, &flags, la));
  EXPECT(ext.depth == D && flags == cudaArrayLayered, "layered info");
  p = {};
  p.srcPtr = make_cudaPitchedPtr(vol.data(), W * sizeof(float), W, H);
  p.dstArray = la;
  p.extent = make_cudaExtent(W, H, D);
  p.kind = cudaMemcpyHostToDevice;
  CHECK(cudaMemcpy3D(&p));
  rd.res.array.array = la;
  td.filterMode = cudaFilterModePoint;
  CHECK(cudaCreateTextureObject(&tl, &rd, &td, nullptr));
  sample_layers<<<dim3(H, D), 32>>>(tl, d, W, H, D);
  CHECK(cudaGetLastError());
  CHECK(cudaMemcpy(o.data(), d, o.size() * sizeof(float), cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < o.size(); ++i) EXPECT(o[i] == vol[i], "layered at %zu: %f vs %f", i, o[i], vol[i]);
  CHECK(cudaDestroyTextureObject(tl));
  CHECK(cudaFreeArray(la));

  // mipmapped: level 0 is an ordinary array; textures sample it
  cudaMipmappedArray_t mm;
  CHECK(cudaMallocMipmappedArray(&mm, &fd, make_cudaExtent(W, H, D), 3));
  cudaArray_t l0, l2;
  CHECK(cudaGetMipmappedArrayLevel(&l0, mm, 0));
  CHECK(cudaGetMipmappedArrayLevel(&l2, mm, 2));
  CHECK(cudaArrayGetInfo(nullptr, &ext, nullptr, l2));
  EXPECT(ext.width == W / 4 && ext.height == H / 4 && ext.depth == D / 4 + (D / 4 == 0), "level 2 extent %zu %zu %zu",
         ext.width, ext.height, ext.depth);
  p.dstArray = l0;
  CHECK(cudaMemcpy3D(&p));
  cudaResourceDesc mrd{};
  mrd.resType = cudaResourceTypeMipmappedArray;
  mrd.res.mipmap.mipmap = mm;
  CHECK(cudaCreateTextureObject(&tp, &mrd, &td, nullptr));
  sample3d<<<dim3(1, H, D), 32>>>(tp, d, W, H, D, 0.5f);
  CHECK(cudaGetLastError());
  CHECK(cudaMemcpy(o.data(), d, o.size() * sizeof(float), cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < o.size(); ++i) EXPECT(o[i] == vol[i], "mipmap level 0 at %zu", i);
  EXPECT(cudaFreeArray(l0) == cudaErrorInvalidValue, "a level is freed with its mipmapped array");
  cudaGetLastError();
  CHECK(cudaDestroyTextureObject(tp));
  CHECK(cudaFreeMipmappedArray(mm));
  CHECK(cudaFree(d));
  std::printf("PASS tex3d\n");
  return 0;
}
