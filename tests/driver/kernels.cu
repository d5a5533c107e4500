// Device code the driver-API tests load as modules: built into a fatbin
// (nvcc -fatbin, the default sm_75 SASS + compressed PTX) and into plain
// PTX text, both loaded from files at run time.
extern "C" {

__device__ float g_scale = 1.0f;
__device__ int g_counter[4];

__global__ void saxpy(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

// Every element of a pitched rows x cols float matrix times g_scale.
__global__ void scale2d(float* m, size_t pitch, int rows, int cols) {
  int c = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
  if (r < rows && c < cols) {
    float* row = reinterpret_cast<float*>(reinterpret_cast<char*>(m) + r * pitch);
    row[c] *= g_scale;
  }
  if (r == 0 && c == 0) atomicAdd(&g_counter[0], 1);
}

// A mixed parameter list: char, double, short, pointer (alignment gaps).
__global__ void mixed(char c, double d, short s, double* out) {
  if (threadIdx.x == 0 && blockIdx.x == 0) out[0] = c + d + s;
}

// A 2D float texture read at texel centres; a 2D float surface written.
__global__ void tex_fetch(cudaTextureObject_t t, float* out, int w, int h) {
  int x = threadIdx.x, y = blockIdx.x;
  if (x < w && y < h) out[y * w + x] = tex2D<float>(t, x + 0.5f, y + 0.5f);
}

__global__ void surf_fill(cudaSurfaceObject_t s, int w, int h) {
  int x = threadIdx.x, y = blockIdx.x;
  if (x < w && y < h) surf2Dwrite(float(x * 10 + y), s, int(x * sizeof(float)), y);
}

}  // extern "C"
