// Texture and surface kernels for ptx_texture_test.cpp: each samples one
// coordinate per thread so the host can check every fetch.
#include <cuda_runtime.h>

extern "C" __global__ void k_tex1d(cudaTextureObject_t t, float4* out, const float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex1D<float4>(t, c[i]);
}
extern "C" __global__ void k_tex2d(cudaTextureObject_t t, float4* out, const float2* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex2D<float4>(t, c[i].x, c[i].y);
}
extern "C" __global__ void k_tex2d_elem(cudaTextureObject_t t, uchar4* out, const float2* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex2D<uchar4>(t, c[i].x, c[i].y);
}
extern "C" __global__ void k_tex3d(cudaTextureObject_t t, float4* out, const float4* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex3D<float4>(t, c[i].x, c[i].y, c[i].z);
}
extern "C" __global__ void k_tex_a1d(cudaTextureObject_t t, float4* out, const float* c, int layer, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex1DLayered<float4>(t, c[i], layer);
}
extern "C" __global__ void k_tex_a2d(cudaTextureObject_t t, float4* out, const float2* c, int layer, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex2DLayered<float4>(t, c[i].x, c[i].y, layer);
}
extern "C" __global__ void k_fetch(cudaTextureObject_t t, int* out, int off, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex1Dfetch<int>(t, i + off);
}
extern "C" __global__ void k_gather(cudaTextureObject_t t, float4* out, const float2* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex2Dgather<float4>(t, c[i].x, c[i].y, 1);
}
extern "C" __global__ void k_surf(cudaSurfaceObject_t s, int w, int h) {
  int x = threadIdx.x, y = blockIdx.x;
  if (x < w && y < h) surf2Dwrite(surf2Dread<int>(s, x * 4, y) + x * 100 + y, s, x * 4, y);
}
extern "C" __global__ void k_surf_oob(cudaSurfaceObject_t s, int* out, int mode) {
  int x = threadIdx.x;
  if (mode == 0) out[x] = surf2Dread<int>(s, (x - 4) * 4, 0, cudaBoundaryModeZero);
  else if (mode == 1) out[x] = surf2Dread<int>(s, (x - 4) * 4, 0, cudaBoundaryModeClamp);
  else out[x] = surf2Dread<int>(s, (x - 4) * 4, 0, cudaBoundaryModeTrap);
}
