// Image filtering through texture objects over CUDA arrays, as image code
// does it: a 3x3 box filter on a uchar4 image read as normalized floats
// (point sampling, clamp), and a bilinear 2x upscale of a float image
// (linear filtering, border and wrap modes), each against a host reference
// of the documented texture arithmetic.
#include <cmath>
#include <vector>

#include "check.cuh"

__global__ void box3(cudaTextureObject_t tex, uchar4* out, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= w || y >= h) return;
  float4 s = make_float4(0, 0, 0, 0);
  for (int dy = -1; dy <= 1; ++dy)
    for (int dx = -1; dx <= 1; ++dx) {
      float4 v = tex2D<float4>(tex, x + dx + 0.5f, y + dy + 0.5f);
      s.x += v.x, s.y += v.y, s.z += v.z, s.w += v.w;
    }
  out[y * w + x] = make_uchar4((unsigned char)(s.x / 9 * 255 + 0.5f), (unsigned char)(s.y / 9 * 255 + 0.5f),
                               (unsigned char)(s.z / 9 * 255 + 0.5f), (unsigned char)(s.w / 9 * 255 + 0.5f));
}

__global__ void upscale(cudaTextureObject_t tex, float* out, int w, int h, float scale, int normalized) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= w || y >= h) return;
  float u = (x + 0.5f) * scale - 1.0f, v = (y + 0.5f) * scale - 1.0f;  // reaches outside the image
  if (normalized) u /= w * scale, v /= h * scale;
  out[y * w + x] = tex2D<float>(tex, u, v);
}

// Host model of the documented fetch (CUDA Programming Guide, texture fetching).
static float weight(float f) { return std::nearbyint(f * 256.0f) / 256.0f; }
static int addr(int i, int n, cudaTextureAddressMode m) {
  if (i >= 0 && i < n) return i;
  if (m == cudaAddressModeBorder) return -1;
  if (m == cudaAddressModeWrap) return ((i % n) + n) % n;
  return i < 0 ? 0 : n - 1;
}
static float ref_linear(const std::vector<float>& img, int w, int h, float x, float y, cudaTextureAddressMode m,
                        bool norm) {
  if (norm) {
    if (m == cudaAddressModeWrap) x -= std::floor(x), y -= std::floor(y);
    x *= w, y *= h;
  }
  float xb = x - 0.5f, yb = y - 0.5f;
  int i = (int)std::floor(xb), j = (int)std::floor(yb);
  float a = weight(xb - i), b = weight(yb - j);
  auto T = [&](int ii, int jj) {
    int xi = addr(ii, w, m), yj = addr(jj, h, m);
    return xi < 0 || yj < 0 ? 0.0f : img[yj * w + xi];
  };
  return (1 - a) * (1 - b) * T(i, j) + a * (1 - b) * T(i + 1, j) + (1 - a) * b * T(i, j + 1) + a * b * T(i + 1, j + 1);
}

int main() {
  const int W = 61, H = 37;  // odd sizes: partial blocks, unaligned rows
  // ---- box filter, uchar4 normalized float reads
  std::vector<uchar4> img(W * H), out(W * H);
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < W; ++x)
      img[y * W + x] = make_uchar4((x * 7 + y * 3) & 255, (x * y) & 255, (255 - x * 4) & 255, (y * 11) & 255);
  cudaChannelFormatDesc cd = cudaCreateChannelDesc<uchar4>();
  EXPECT(cd.x == 8 && cd.w == 8 && cd.f == cudaChannelFormatKindUnsigned, "channel desc %d %d", cd.x, cd.f);
  cudaArray_t arr;
  CHECK(cudaMallocArray(&arr, &cd, W, H));
  CHECK(cudaMemcpy2DToArray(arr, 0, 0, img.data(), W * sizeof(uchar4), W * sizeof(uchar4), H, cudaMemcpyHostToDevice));
  cudaChannelFormatDesc got;
  cudaExtent ext;
  unsigned flags = 99;
  CHECK(cudaArrayGetInfo(&got, &ext, &flags, arr));
  EXPECT(got.x == 8 && got.y == 8 && ext.width == W && ext.height == H && ext.depth == 0 && flags == 0,
         "array info %zu %zu %zu flags %u", ext.width, ext.height, ext.depth, flags);
  // Round trip through the array first.
  std::vector<uchar4> back(W * H);
  CHECK(cudaMemcpy2DFromArray(back.data(), W * sizeof(uchar4), arr, 0, 0, W * sizeof(uchar4), H, cudaMemcpyDeviceToHost));
  for (int i = 0; i < W * H; ++i) EXPECT(back[i].x == img[i].x && back[i].w == img[i].w, "round trip at %d", i);

  cudaResourceDesc rd{};
  rd.resType = cudaResourceTypeArray;
  rd.res.array.array = arr;
  cudaTextureDesc td{};
  td.addressMode[0] = td.addressMode[1] = cudaAddressModeClamp;
  td.filterMode = cudaFilterModePoint;
  td.readMode = cudaReadModeNormalizedFloat;
  cudaTextureObject_t tex;
  CHECK(cudaCreateTextureObject(&tex, &rd, &td, nullptr));
  cudaTextureDesc td2;
  CHECK(cudaGetTextureObjectTextureDesc(&td2, tex));
  EXPECT(td2.readMode == cudaReadModeNormalizedFloat, "texture desc read back");
  uchar4* d_out;
  CHECK(cudaMalloc(&d_out, W * H * sizeof(uchar4)));
  dim3 blk(16, 8), grd((W + 15) / 16, (H + 7) / 8);
  box3<<<grd, blk>>>(tex, d_out, W, H);
  CHECK(cudaGetLastError());
  CHECK(cudaMemcpy(out.data(), d_out, W * H * sizeof(uchar4), cudaMemcpyDeviceToHost));
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < W; ++x) {
      float s[4] = {0, 0, 0, 0};
      for (int dy = -1; dy <= 1; ++dy)
        for (int dx = -1; dx <= 1; ++dx) {
          uchar4 p = img[addr(y + dy, H, cudaAddressModeClamp) * W + addr(x + dx, W, cudaAddressModeClamp)];
          s[0] += p.x / 255.0f, s[1] += p.y / 255.0f, s[2] += p.z / 255.0f, s[3] += p.w / 255.0f;
        }
      uchar4 o = out[y * W + x];
      unsigned char e[4];
      for (int k = 0; k < 4; ++k) e[k] = (unsigned char)(s[k] / 9 * 255 + 0.5f);
      EXPECT(std::abs(o.x - e[0]) <= 1 && std::abs(o.y - e[1]) <= 1 && std::abs(o.z - e[2]) <= 1 && std::abs(o.w - e[3]) <= 1,
             "box filter at (%d,%d): %d %d %d %d vs %d %d %d %d", x, y, o.x, o.y, o.z, o.w, e[0], e[1], e[2], e[3]);
    }
  CHECK(cudaDestroyTextureObject(tex));
  // array to array (2D and the deprecated linear form), then out through
  // pinned memory on a stream
  cudaArray_t arr2;
  CHECK(cudaMallocArray(&arr2, &cd, W, H));
  CHECK(cudaMemcpy2DArrayToArray(arr2, 0, 0, arr, 0, 0, W * sizeof(uchar4), H, cudaMemcpyDeviceToDevice));
  CHECK(cudaMemcpyArrayToArray(arr2, 8, 1, arr, 4, 2, 3 * W * sizeof(uchar4), cudaMemcpyDeviceToDevice));
  uchar4* pinned;
  CHECK(cudaMallocHost(&pinned, W * H * sizeof(uchar4)));
  cudaStream_t st;
  CHECK(cudaStreamCreate(&st));
  CHECK(cudaMemcpy2DFromArrayAsync(pinned, W * sizeof(uchar4), arr2, 0, 0, W * sizeof(uchar4), H, cudaMemcpyDeviceToHost, st));
  CHECK(cudaStreamSynchronize(st));
  for (int i = 0; i < W * H; ++i) {
    // bytes from (4 bytes, row 2) of arr land at (8 bytes, row 1) of arr2, 3 rows' worth
    long b = (long)i * 4 - (1 * W * 4 + 8);
    int src = b >= 0 && b < 3 * W * 4 ? (int)((b + 2 * W * 4 + 4) / 4) : i;
    EXPECT(pinned[i].x == img[src].x && pinned[i].z == img[src].z, "array to array at %d", i);
  }
  CHECK(cudaStreamDestroy(st));
  CHECK(cudaFreeHost(pinned));
  CHECK(cudaFreeArray(arr2));
  CHECK(cudaFreeArray(arr));

  // ---- bilinear upscale of a float image, three address modes
  std::vector<float> f(W * H);
  for (int i = 0; i < W * H; ++i) f[i] = std::sin(i * 0.37f) * 10.0f + (i % 7);
  cudaChannelFormatDesc fd = cudaCreateChannelDesc<float>();
  cudaArray_t farr;
  CHECK(cudaMallocArray(&farr, &fd, W, H));
  CHECK(cudaMemcpyToArray(farr, 0, 0, f.data(), W * H * sizeof(float), cudaMemcpyHostToDevice));  // deprecated form
  float* d_f;
  CHECK(cudaMalloc(&d_f, W * H * sizeof(float)));
  std::vector<float> r(W * H);
  const cudaTextureAddressMode modes[] = {cudaAddressModeClamp, cudaAddressModeBorder, cudaAddressModeWrap};
  for (cudaTextureAddressMode m : modes) {
    const bool norm = m == cudaAddressModeWrap;  // wrap needs normalized coordinates
    cudaResourceDesc frd{};
    frd.resType = cudaResourceTypeArray;
    frd.res.array.array = farr;
    cudaTextureDesc ftd{};
    ftd.addressMode[0] = ftd.addressMode[1] = m;
    ftd.filterMode = cudaFilterModeLinear;
    ftd.readMode = cudaReadModeElementType;
    ftd.normalizedCoords = norm;
    cudaTextureObject_t ft;
    CHECK(cudaCreateTextureObject(&ft, &frd, &ftd, nullptr));
    upscale<<<grd, blk>>>(ft, d_f, W, H, 0.73f, norm);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(r.data(), d_f, W * H * sizeof(float), cudaMemcpyDeviceToHost));
    for (int y = 0; y < H; ++y)
      for (int x = 0; x < W; ++x) {
        float u = (x + 0.5f) * 0.73f - 1.0f, v = (y + 0.5f) * 0.73f - 1.0f;
        if (norm) u /= W * 0.73f, v /= H * 0.73f;
        float e = ref_linear(f, W, H, u, v, m, norm);
        EXPECT(std::fabs(r[y * W + x] - e) <= 1e-4f * (1 + std::fabs(e)), "mode %d at (%d,%d): %f vs %f", (int)m, x, y,
               r[y * W + x], e);
      }
    CHECK(cudaDestroyTextureObject(ft));
  }
  CHECK(cudaFree(d_f));
  CHECK(cudaFree(d_out));
  CHECK(cudaFreeArray(farr));
  // Hostile or careless arguments are refused, not crashed on.
  EXPECT(cudaMallocArray(&arr, &cd, 0, 4) == cudaErrorInvalidValue, "zero width");
  cudaChannelFormatDesc bad = cudaCreateChannelDesc(8, 16, 0, 0, cudaChannelFormatKindUnsigned);
  EXPECT(cudaMallocArray(&arr, &bad, 4, 4) == cudaErrorInvalidChannelDescriptor, "mixed channel sizes");
  EXPECT(cudaMallocArray(&arr, &cd, (size_t)1 << 40, 1 << 20) == cudaErrorInvalidValue, "huge extent");
  cudaGetLastError();
  std::printf("PASS tex_filter\n");
  return 0;
}
