// Test kernels: elementwise / ML-style kernels for the PTX interpreter tests.
#include <cstdint>

extern "C" __global__ void vector_add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

extern "C" __global__ void relu_fwd(const float* x, float* y, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = x[i] > 0.f ? x[i] : 0.f;
}

extern "C" __global__ void relu_bwd(const float* x, const float* dy, float* dx, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) dx[i] = x[i] > 0.f ? dy[i] : 0.f;
}

extern "C" __global__ void sgd_momentum(float* w, float* v, const float* g, float lr, float mu, float wd, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float gi = g[i] + wd * w[i];
    float vi = mu * v[i] + gi;
    v[i] = vi;
    w[i] -= lr * vi;
  }
}

// One block per row; blockDim.x threads cooperate through shared memory.
extern "C" __global__ void softmax_rows(const float* x, float* y, int cols) {
  __shared__ float red[256];
  const float* row = x + (size_t)blockIdx.x * cols;
  float* out = y + (size_t)blockIdx.x * cols;
  float m = -INFINITY;
  for (int j = threadIdx.x; j < cols; j += blockDim.x) m = fmaxf(m, row[j]);
  red[threadIdx.x] = m;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
    __syncthreads();
  }
  m = red[0];
  __syncthreads();
  float sum = 0.f;
  for (int j = threadIdx.x; j < cols; j += blockDim.x) sum += expf(row[j] - m);
  red[threadIdx.x] = sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
    __syncthreads();
  }
  sum = red[0];
  for (int j = threadIdx.x; j < cols; j += blockDim.x) out[j] = expf(row[j] - m) / sum;
}

// Mean cross-entropy of softmax(logits) against integer labels; one thread per row.
extern "C" __global__ void cross_entropy(const float* logits, const int* labels, float* loss, int rows, int cols) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float* l = logits + (size_t)r * cols;
  float m = l[0];
  for (int j = 1; j < cols; ++j) m = fmaxf(m, l[j]);
  float s = 0.f;
  for (int j = 0; j < cols; ++j) s += expf(l[j] - m);
  float lr = -(l[labels[r]] - m - logf(s));
  atomicAdd(loss, lr / rows);
}
