// wh-gpt: a small GPT-style character language model trained with bf16 mixed precision.
//
// Token + position embeddings, pre-LayerNorm transformer blocks (causal multi-head
// self-attention, GELU MLP), a final LayerNorm and a linear head; AdamW with gradient-norm
// clipping. fp32 master weights; every step casts them to bf16 for the matmuls. All matmuls
// go through cublasLtMatmul with bf16 A/B, fp32 compute and fp32 output (the bias, GELU and
// GELU-backward epilogues do the elementwise work where cuBLASLt offers it; the residual
// adds use beta = 1 with C = D); layernorm, attention, softmax/cross-entropy, embeddings,
// reductions and the optimiser are this file's kernels.
//
// Row-major activations [N = B*T rows, features] are column-major [features x N] to
// cuBLASLt, and a row-major weight W[out, in] is column-major [in x out], so
//   Y = X W^T   is  D[out x N] = op_T(W) * X,
//   dX = dY W   is  D[in x N]  = W * dY,
//   dW = dY^T X is  D[in x out] = X * op_T(dY).
//
// Prints a progress bar, validation losses, a final summary line, a generated sample, and
// writes the loss curve (--loss-log) and a PNG plot of it (--plot, with gnuplot if present).
// --bench N runs N timed training steps (after --bench-warmup steps, default 3) and prints
// `step_ms=<ms> calls_per_step=<n> device=<sim|gpu>` instead (for make bench-train).
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "gpt_common.hpp"

using namespace gpt;
typedef __nv_bfloat16 bf16;

// Every CUDA runtime and cuBLASLt call goes through these, which count them (a kernel launch
// counts once, through the KCHECK after it): calls_per_step is what a step forwards.
static long g_calls = 0;
#define CK(x)                                                                                        \
  do {                                                                                               \
    g_calls++;                                                                                       \
    cudaError_t e_ = (x);                                                                            \
    if (e_ != cudaSuccess) {                                                                         \
      std::fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorString(e_), __FILE__, __LINE__, #x); \
      std::exit(1);                                                                                  \
    }                                                                                                \
  } while (0)
#define CB(x)                                                                                              \
  do {                                                                                                     \
    g_calls++;                                                                                             \
    cublasStatus_t s_ = (x);                                                                               \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                                     \
      std::fprintf(stderr, "cuBLASLt error %s at %s:%d: %s\n", cublasLtGetStatusName(s_), __FILE__, __LINE__, #x); \
      std::exit(1);                                                                                        \
    }                                                                                                      \
  } while (0)
#define KCHECK() CK(cudaGetLastError())

// ---------------------------------------------------------------- kernels

__global__ void embed_kernel(const int* tok, const float* wte, const float* wpe, float* res, int N, int T, int C) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= N * C) return;
  int n = i / C, c = i % C;
  res[i] = wte[tok[n] * C + c] + wpe[(n % T) * C + c];
}

// One warp per row: mean, variance, normalise; writes bf16 (the next matmul's input).
__global__ void layernorm_kernel(const float* x, const float* g, const float* b, bf16* out, float* mean, float* rstd, int N, int C) {
  int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= N) return;
  const float* r = x + (size_t)row * C;
  float s = 0.f;
  for (int c = lane; c < C; c += 32) s += r[c];
  for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  float m = s / C, v = 0.f;
  for (int c = lane; c < C; c += 32) v += (r[c] - m) * (r[c] - m);
  for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  float rs = rsqrtf(v / C + 1e-5f);
  for (int c = lane; c < C; c += 32) out[(size_t)row * C + c] = __float2bfloat16((r[c] - m) * rs * g[c] + b[c]);
  if (lane == 0) { mean[row] = m; rstd[row] = rs; }
}

// LayerNorm backward, one warp per row: dx += rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)).
__global__ void layernorm_back_kernel(const float* x, const float* g, const float* mean, const float* rstd, const float* dy,
                                      float* dx, int N, int C) {
  int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= N) return;
  const float *r = x + (size_t)row * C, *d = dy + (size_t)row * C;
  float m = mean[row], rs = rstd[row], s1 = 0.f, s2 = 0.f;
  for (int c = lane; c < C; c += 32) {
    float dxh = d[c] * g[c];
    s1 += dxh;
    s2 += dxh * (r[c] - m) * rs;
  }
  for (int o = 16; o; o >>= 1) {
    s1 += __shfl_xor_sync(0xffffffffu, s1, o);
    s2 += __shfl_xor_sync(0xffffffffu, s2, o);
  }
  s1 /= C;
  s2 /= C;
  for (int c = lane; c < C; c += 32) dx[(size_t)row * C + c] += rs * (d[c] * g[c] - s1 - (r[c] - m) * rs * s2);
}
// dgamma, dbeta: one thread per column (deterministic order over rows).
__global__ void layernorm_param_grad_kernel(const float* x, const float* mean, const float* rstd, const float* dy, float* dg,
                                            float* db, int N, int C) {
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float sg = 0.f, sb = 0.f;
  for (int n = 0; n < N; ++n) {
    float d = dy[(size_t)n * C + c];
    sg += d * (x[(size_t)n * C + c] - mean[n]) * rstd[n];
    sb += d;
  }
  dg[c] = sg;
  db[c] = sb;
}

// Causal attention, one thread per (sequence, head, query position): scores, softmax (kept for
// the backward pass), weighted sum of values; output bf16 for the projection matmul.
__global__ void attention_kernel(const float* qkv, float* att, bf16* y, int B, int T, int C, int H) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= B * H * T) return;
  int t = i % T, h = (i / T) % H, b = i / (T * H), hd = C / H;
  const float* q = qkv + ((size_t)b * T + t) * 3 * C + h * hd;
  float* p = att + (size_t)i * T;
  float scale = rsqrtf((float)hd), mx = -1e30f;
  for (int u = 0; u <= t; ++u) {
    const float* k = qkv + ((size_t)b * T + u) * 3 * C + C + h * hd;
    float s = 0.f;
    for (int d = 0; d < hd; ++d) s += q[d] * k[d];
    p[u] = s * scale;
    mx = fmaxf(mx, p[u]);
  }
  float sum = 0.f;
  for (int u = 0; u <= t; ++u) sum += (p[u] = __expf(p[u] - mx));
  float inv = 1.f / sum;
  for (int u = 0; u <= t; ++u) p[u] *= inv;
  for (int u = t + 1; u < T; ++u) p[u] = 0.f;
  for (int d = 0; d < hd; ++d) {
    float acc = 0.f;
    for (int u = 0; u <= t; ++u) acc += p[u] * qkv[((size_t)b * T + u) * 3 * C + 2 * C + h * hd + d];
    y[((size_t)b * T + t) * C + h * hd + d] = __float2bfloat16(acc);
  }
}
// Attention backward 1/2, per (sequence, head, query t): dS[t,u] = P[t,u] (dy.v_u - sum_j P[t,j] dy.v_j) / sqrt(hd), dq.
__global__ void attention_back_q_kernel(const float* qkv, const float* att, const float* dy, float* ds, float* dqkv, int B, int T,
                                        int C, int H) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= B * H * T) return;
  int t = i % T, h = (i / T) % H, b = i / (T * H), hd = C / H;
  const float* p = att + (size_t)i * T;
  const float* g = dy + ((size_t)b * T + t) * C + h * hd;
  float* s = ds + (size_t)i * T;
  float dot = 0.f;
  for (int u = 0; u <= t; ++u) {
    const float* v = qkv + ((size_t)b * T + u) * 3 * C + 2 * C + h * hd;
    float a = 0.f;
    for (int d = 0; d < hd; ++d) a += g[d] * v[d];
    s[u] = a;
    dot += p[u] * a;
  }
  float scale = rsqrtf((float)hd);
  for (int u = 0; u <= t; ++u) s[u] = p[u] * (s[u] - dot) * scale;
  for (int u = t + 1; u < T; ++u) s[u] = 0.f;
  float* dq = dqkv + ((size_t)b * T + t) * 3 * C + h * hd;
  for (int d = 0; d < hd; ++d) {
    float a = 0.f;
    for (int u = 0; u <= t; ++u) a += s[u] * qkv[((size_t)b * T + u) * 3 * C + C + h * hd + d];
    dq[d] = a;
  }
}
// Attention backward 2/2, per (sequence, head, key position u): dk_u = sum_t dS[t,u] q_t, dv_u = sum_t P[t,u] dy_t.
__global__ void attention_back_kv_kernel(const float* qkv, const float* att, const float* dy, const float* ds, float* dqkv, int B,
                                         int T, int C, int H) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= B * H * T) return;
  int u = i % T, h = (i / T) % H, b = i / (T * H), hd = C / H;
  size_t base = ((size_t)b * H + h) * T;
  float* dk = dqkv + ((size_t)b * T + u) * 3 * C + C + h * hd;
  float* dv = dk + C;
  for (int d = 0; d < hd; ++d) {
    float ak = 0.f, av = 0.f;
    for (int t = u; t < T; ++t) {
      ak += ds[(base + t) * T + u] * qkv[((size_t)b * T + t) * 3 * C + h * hd + d];
      av += att[(base + t) * T + u] * dy[((size_t)b * T + t) * C + h * hd + d];
    }
    dk[d] = ak;
    dv[d] = av;
  }
}

// Softmax cross-entropy, one thread per row: the row's loss and dlogits = (softmax - onehot) / N.
__global__ void xent_kernel(const float* logits, const int* tgt, float* loss, float* dlogits, int N, int V) {
  int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= N) return;
  const float* r = logits + (size_t)n * V;
  float mx = -1e30f;
  for (int k = 0; k < V; ++k) mx = fmaxf(mx, r[k]);
  float sum = 0.f;
  for (int k = 0; k < V; ++k) sum += __expf(r[k] - mx);
  int y = tgt[n];
  loss[n] = __logf(sum) - (r[y] - mx);
  if (dlogits) {
    float inv = 1.f / sum;
    for (int k = 0; k < V; ++k) dlogits[(size_t)n * V + k] = (__expf(r[k] - mx) * inv - (k == y ? 1.f : 0.f)) / N;
  }
}

__global__ void to_bf16_kernel(const float* x, bf16* y, size_t n) {
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (; i + stride < n; i += 2 * stride) {  // two elements per iteration
    y[i] = __float2bfloat16(x[i]);
    y[i + stride] = __float2bfloat16(x[i + stride]);
  }
  if (i < n) y[i] = __float2bfloat16(x[i]);
}
// Bias gradient: column sums of dY[N, n_out], one thread per column.
__global__ void colsum_kernel(const float* dy, float* out, int N, int n_out) {
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= n_out) return;
  float s = 0.f;
  for (int n = 0; n < N; ++n) s += dy[(size_t)n * n_out + c];
  out[c] = s;
}
// Embedding gradients without atomics: one thread per (vocabulary entry or position, channel).
__global__ void embed_back_kernel(const int* tok, const float* dres, float* dwte, float* dwpe, int N, int T, int C, int V) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < V * C) {
    int v = i / C, c = i % C;
    float s = 0.f;
    for (int n = 0; n < N; ++n)
      if (tok[n] == v) s += dres[(size_t)n * C + c];
    dwte[i] = s;
  } else if (i < V * C + T * C) {
    int j = i - V * C, t = j / C, c = j % C;
    float s = 0.f;
    for (int n = t; n < N; n += T) s += dres[(size_t)n * C + c];
    dwpe[j] = s;
  }
}
// Sum of squares of the gradients, one block, fixed order: deterministic.
__global__ void sumsq_kernel(const float* g, size_t n, float* out) {
  __shared__ float part[256];
  float s = 0.f;
  for (size_t i = threadIdx.x; i < n; i += blockDim.x) s += g[i] * g[i];
  part[threadIdx.x] = s;
  __syncthreads();
  for (int o = blockDim.x / 2; o; o >>= 1) {
    if ((int)threadIdx.x < o) part[threadIdx.x] += part[threadIdx.x + o];
    __syncthreads();
  }
  if (threadIdx.x == 0) *out = part[0];
}
// AdamW on one tensor; the clipping scale is read from the device (no host round trip).
__global__ void adamw_kernel(float* p, const float* g, float* m, float* v, size_t n, const float* sumsq, float clip, float lr,
                             float b1, float b2, float bc1, float bc2, float eps, float wd) {
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float norm = sqrtf(*sumsq), sc = norm > clip ? clip / norm : 1.f;
  float gg = g[i] * sc;
  float mi = m[i] = b1 * m[i] + (1.f - b1) * gg;
  float vi = v[i] = b2 * v[i] + (1.f - b2) * gg * gg;
  float w = p[i];
  w -= lr * wd * w;
  p[i] = w - lr * (mi / bc1) / (sqrtf(vi / bc2) + eps);
}

// ---------------------------------------------------------------- cuBLASLt

struct Lt {
  cublasLtHandle_t h = nullptr;
  void* ws = nullptr;
  size_t ws_size = 4 << 20;
  cudaStream_t stream = 0;

  // D[m x n] (fp32, col-major, ld m) = alpha op(A) op(B) + beta C(=D) [+ epilogue]; A, B bf16.
  // A is stored [transa ? k x m : m x k], B [transb ? n x k : k x n], both col-major.
  void mm(bool transa, bool transb, int m, int n, int k, const bf16* A, const bf16* B, float* D, float beta,
          cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DEFAULT, const float* bias = nullptr, float* aux = nullptr) {
    cublasLtMatmulDesc_t op;
    CB(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = transa ? CUBLAS_OP_T : CUBLAS_OP_N, tb = transb ? CUBLAS_OP_T : CUBLAS_OP_N;
    CB(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CB(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    CB(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    if (bias) CB(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    if (aux) {
      int64_t ld = m;
      CB(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux));
      CB(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld));
    }
    cublasLtMatrixLayout_t la, lb, ld;
    CB(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, transa ? k : m, transa ? m : k, transa ? k : m));
    CB(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, transb ? n : k, transb ? k : n, transb ? n : k));
    CB(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, m, n, m));
    cublasLtMatmulPreference_t pref;
    CB(cublasLtMatmulPreferenceCreate(&pref));
    CB(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_size, sizeof ws_size));
    cublasLtMatmulHeuristicResult_t heur;
    int found = 0;
    CB(cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, ld, ld, pref, 1, &heur, &found));
    if (!found) {
      std::fprintf(stderr, "cuBLASLt: no algorithm for %dx%dx%d\n", m, n, k);
      std::exit(1);
    }
    const float alpha = 1.f;
    CB(cublasLtMatmul(h, op, &alpha, A, la, B, lb, &beta, D, ld, D, ld, &heur.algo, ws, ws_size, stream));
    CB(cublasLtMatmulPreferenceDestroy(pref));
    CB(cublasLtMatrixLayoutDestroy(la));
    CB(cublasLtMatrixLayoutDestroy(lb));
    CB(cublasLtMatrixLayoutDestroy(ld));
    CB(cublasLtMatmulDescDestroy(op));
  }
  // Y[N, out] (+)= X[N, in] W[out, in]^T (+ bias, epilogue)
  void linear(const bf16* X, const bf16* W, float* Y, int N, int in, int out, float beta = 0.f,
              cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DEFAULT, const float* bias = nullptr, float* aux = nullptr) {
    mm(true, false, out, N, in, W, X, Y, beta, epi, bias, aux);
  }
  // dX[N, in] = dY[N, out] W[out, in] (optionally times gelu'(aux))
  void linear_dx(const bf16* dY, const bf16* W, float* dX, int N, int in, int out, cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DEFAULT,
                 float* aux = nullptr) {
    mm(false, false, in, N, out, W, dY, dX, 0.f, epi, nullptr, aux);
  }
  // dW[out, in] = dY[N, out]^T X[N, in]
  void linear_dw(const bf16* dY, const bf16* X, float* dW, int N, int in, int out) { mm(false, true, in, out, N, X, dY, dW, 0.f); }
};

// ---------------------------------------------------------------- model

template <class T>
T* dalloc(size_t n) {
  T* p = nullptr;
  CK(cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(T)));
  CK(cudaMemset(p, 0, std::max<size_t>(n, 1) * sizeof(T)));
  return p;
}
inline unsigned blocks(size_t n, unsigned t = 256) { return unsigned((n + t - 1) / t); }

struct GPT {
  Config c;
  Hyper hp;
  Layout lay;
  Lt lt;
  float *p, *g, *m, *v, *sumsq;
  bf16* pb;  // bf16 copy of the weights
  struct Act {
    float *resA, *mean1, *rstd1, *qkv, *att, *resB, *mean2, *rstd2, *pre, *h;
    bf16 *ln1, *y, *ln2, *hb;
  };
  std::vector<Act> act;
  float *res, *resF, *meanf, *rstdf, *logits, *dlogits, *loss, *dres, *dln, *dbig, *dy, *ds;
  bf16 *lnf, *dbig_b, *dsmall_b;
  int *tok, *tgt;

  GPT(const Args& a) : c(a.cfg), hp(a.hp), lay(a.cfg) {
    CB(cublasLtCreate(&lt.h));
    CK(cudaMalloc(&lt.ws, lt.ws_size));
    const size_t P = lay.total, N = size_t(c.B) * c.T, C = c.C, FF = c.FF(), att = size_t(c.B) * c.H * c.T * c.T;
    std::vector<float> init = init_params(lay, a.seed);
    p = dalloc<float>(P), g = dalloc<float>(P), m = dalloc<float>(P), v = dalloc<float>(P), sumsq = dalloc<float>(1);
    pb = dalloc<bf16>(P);
    CK(cudaMemcpy(p, init.data(), P * sizeof(float), cudaMemcpyHostToDevice));
    for (int l = 0; l < c.L; ++l) {
      Act x;
      x.resA = dalloc<float>(N * C), x.mean1 = dalloc<float>(N), x.rstd1 = dalloc<float>(N), x.qkv = dalloc<float>(N * 3 * C);
      x.att = dalloc<float>(att), x.resB = dalloc<float>(N * C), x.mean2 = dalloc<float>(N), x.rstd2 = dalloc<float>(N);
      x.pre = dalloc<float>(N * FF), x.h = dalloc<float>(N * FF);
      x.ln1 = dalloc<bf16>(N * C), x.y = dalloc<bf16>(N * C), x.ln2 = dalloc<bf16>(N * C), x.hb = dalloc<bf16>(N * FF);
      act.push_back(x);
    }
    res = dalloc<float>(N * C), resF = dalloc<float>(N * C), meanf = dalloc<float>(N), rstdf = dalloc<float>(N);
    logits = dalloc<float>(N * c.V), dlogits = dalloc<float>(N * c.V), loss = dalloc<float>(N);
    dres = dalloc<float>(N * C), dln = dalloc<float>(N * C), dy = dalloc<float>(N * C), ds = dalloc<float>(att);
    const size_t big = N * std::max<size_t>({FF, 3 * C, size_t(c.V)});
    dbig = dalloc<float>(big), dbig_b = dalloc<bf16>(big), dsmall_b = dalloc<bf16>(N * C);
    lnf = dalloc<bf16>(N * C);
    tok = dalloc<int>(N), tgt = dalloc<int>(N);
  }
  float* P(int i) const { return p + lay.t[size_t(i)].off; }
  float* G(int i) const { return g + lay.t[size_t(i)].off; }
  const bf16* W(int i) const { return pb + lay.t[size_t(i)].off; }

  void cast(const float* x, bf16* y, size_t n) {
    to_bf16_kernel<<<std::min(blocks(n), 1024u), 256>>>(x, y, n);
    KCHECK();
  }
  void layernorm(const float* x, int gi, int bi, bf16* out, float* mean, float* rstd, int N) {
    layernorm_kernel<<<blocks(size_t(N) * 32, 128), 128>>>(x, P(gi), P(bi), out, mean, rstd, N, c.C);
    KCHECK();
  }
  void layernorm_back(const float* x, int gi, int bi, const float* mean, const float* rstd, const float* dout, int N) {
    layernorm_back_kernel<<<blocks(size_t(N) * 32, 128), 128>>>(x, P(gi), mean, rstd, dout, dres, N, c.C);
    KCHECK();
    layernorm_param_grad_kernel<<<blocks(c.C, 64), 64>>>(x, mean, rstd, dout, G(gi), G(bi), N, c.C);
    KCHECK();
  }

  // Forward over nb sequences of tokens (already on the device in tok, targets in tgt).
  // Returns nothing: per-row losses are left in `loss`, dlogits filled when `grad`.
  void forward(int nb, bool grad) {
    const int T = c.T, C = c.C, N = nb * T, FF = c.FF(), V = c.V;
    embed_kernel<<<blocks(size_t(N) * C), 256>>>(tok, P(lay.wte), P(lay.wpe), res, N, T, C);
    KCHECK();
    for (int l = 0; l < c.L; ++l) {
      Act& a = act[size_t(l)];
      const Layout::Block& b = lay.blk[size_t(l)];
      CK(cudaMemcpyAsync(a.resA, res, size_t(N) * C * sizeof(float), cudaMemcpyDeviceToDevice));
      layernorm(res, b.ln1_g, b.ln1_b, a.ln1, a.mean1, a.rstd1, N);
      lt.linear(a.ln1, W(b.w_qkv), a.qkv, N, C, 3 * C, 0.f, CUBLASLT_EPILOGUE_BIAS, P(b.b_qkv));
      attention_kernel<<<blocks(size_t(nb) * c.H * T, 128), 128>>>(a.qkv, a.att, a.y, nb, T, C, c.H);
      KCHECK();
      lt.linear(a.y, W(b.w_o), res, N, C, C, 1.f, CUBLASLT_EPILOGUE_BIAS, P(b.b_o));  // res += y W_o^T + b_o
      CK(cudaMemcpyAsync(a.resB, res, size_t(N) * C * sizeof(float), cudaMemcpyDeviceToDevice));
      layernorm(res, b.ln2_g, b.ln2_b, a.ln2, a.mean2, a.rstd2, N);
      lt.linear(a.ln2, W(b.w_fc), a.h, N, C, FF, 0.f, CUBLASLT_EPILOGUE_GELU_AUX_BIAS, P(b.b_fc), a.pre);
      cast(a.h, a.hb, size_t(N) * FF);
      lt.linear(a.hb, W(b.w_pr), res, N, FF, C, 1.f, CUBLASLT_EPILOGUE_BIAS, P(b.b_pr));  // res += gelu(.) W_pr^T + b_pr
    }
    CK(cudaMemcpyAsync(resF, res, size_t(N) * C * sizeof(float), cudaMemcpyDeviceToDevice));
    layernorm(res, lay.lnf_g, lay.lnf_b, lnf, meanf, rstdf, N);
    lt.linear(lnf, W(lay.w_lm), logits, N, C, V, 0.f, CUBLASLT_EPILOGUE_BIAS, P(lay.b_lm));
    xent_kernel<<<blocks(N, 128), 128>>>(logits, tgt, loss, grad ? dlogits : nullptr, N, V);
    KCHECK();
  }

  void backward() {
    const int T = c.T, C = c.C, N = c.B * T, FF = c.FF(), V = c.V;
    CK(cudaMemsetAsync(dres, 0, size_t(N) * C * sizeof(float)));
    // head
    cast(dlogits, dbig_b, size_t(N) * V);
    lt.linear_dw(dbig_b, lnf, G(lay.w_lm), N, C, V);
    colsum_kernel<<<blocks(V, 64), 64>>>(dlogits, G(lay.b_lm), N, V);
    KCHECK();
    lt.linear_dx(dbig_b, W(lay.w_lm), dln, N, C, V);
    layernorm_back(resF, lay.lnf_g, lay.lnf_b, meanf, rstdf, dln, N);
    for (int l = c.L - 1; l >= 0; --l) {
      Act& a = act[size_t(l)];
      const Layout::Block& b = lay.blk[size_t(l)];
      // MLP: res += gelu(ln2 W_fc^T + b_fc) W_pr^T + b_pr
      cast(dres, dsmall_b, size_t(N) * C);
      lt.linear_dw(dsmall_b, a.hb, G(b.w_pr), N, FF, C);
      colsum_kernel<<<blocks(C, 64), 64>>>(dres, G(b.b_pr), N, C);
      KCHECK();
      lt.linear_dx(dsmall_b, W(b.w_pr), dbig, N, FF, C, CUBLASLT_EPILOGUE_DGELU, a.pre);  // d pre-activation
      cast(dbig, dbig_b, size_t(N) * FF);
      lt.linear_dw(dbig_b, a.ln2, G(b.w_fc), N, C, FF);
      colsum_kernel<<<blocks(FF, 64), 64>>>(dbig, G(b.b_fc), N, FF);
      KCHECK();
      lt.linear_dx(dbig_b, W(b.w_fc), dln, N, C, FF);
      layernorm_back(a.resB, b.ln2_g, b.ln2_b, a.mean2, a.rstd2, dln, N);
      // attention: res += attn(ln1) W_o^T + b_o
      cast(dres, dsmall_b, size_t(N) * C);
      lt.linear_dw(dsmall_b, a.y, G(b.w_o), N, C, C);
      colsum_kernel<<<blocks(C, 64), 64>>>(dres, G(b.b_o), N, C);
      KCHECK();
      lt.linear_dx(dsmall_b, W(b.w_o), dy, N, C, C);
      const unsigned nt = blocks(size_t(c.B) * c.H * T, 128);
      attention_back_q_kernel<<<nt, 128>>>(a.qkv, a.att, dy, ds, dbig, c.B, T, C, c.H);
      KCHECK();
      attention_back_kv_kernel<<<nt, 128>>>(a.qkv, a.att, dy, ds, dbig, c.B, T, C, c.H);
      KCHECK();
      cast(dbig, dbig_b, size_t(N) * 3 * C);
      lt.linear_dw(dbig_b, a.ln1, G(b.w_qkv), N, C, 3 * C);
      colsum_kernel<<<blocks(3 * C, 64), 64>>>(dbig, G(b.b_qkv), N, 3 * C);
      KCHECK();
      lt.linear_dx(dbig_b, W(b.w_qkv), dln, N, C, 3 * C);
      layernorm_back(a.resA, b.ln1_g, b.ln1_b, a.mean1, a.rstd1, dln, N);
    }
    embed_back_kernel<<<blocks(size_t(V + T) * C), 256>>>(tok, dres, G(lay.wte), G(lay.wpe), N, T, C, V);
    KCHECK();
  }

  void update(int step) {
    sumsq_kernel<<<1, 256>>>(g, lay.total, sumsq);  // padding between tensors holds zeros
    KCHECK();
    const float lr = hp.lr_at(step);
    const float bc1 = 1.f - std::pow(hp.beta1, float(step + 1)), bc2 = 1.f - std::pow(hp.beta2, float(step + 1));
    for (const Tensor& t : lay.t) {
      adamw_kernel<<<blocks(t.n), 256>>>(p + t.off, g + t.off, m + t.off, v + t.off, t.n, sumsq, hp.clip, lr, hp.beta1, hp.beta2, bc1,
                                         bc2, hp.eps, t.decay ? hp.weight_decay : 0.f);
      KCHECK();
    }
    cast(p, pb, lay.total);
  }

  void upload(const std::vector<int>& x, const std::vector<int>& y) {
    CK(cudaMemcpy(tok, x.data(), x.size() * sizeof(int), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(tgt, y.data(), y.size() * sizeof(int), cudaMemcpyHostToDevice));
  }
  double mean_loss(int N) {
    std::vector<float> h(static_cast<size_t>(N));
    CK(cudaMemcpy(h.data(), loss, h.size() * sizeof(float), cudaMemcpyDeviceToHost));
    double s = 0;
    for (float x : h) s += x;
    return s / N;
  }
};

// ---------------------------------------------------------------- driver

static void progress(int step, int steps, double loss, double tps) {
  const int w = 30;
  int filled = steps ? int(double(step) * w / steps) : w;
  std::fprintf(stderr, "\r[%.*s%*s] %4d/%d  loss %.3f  %.0f tok/s ", filled, "##############################", w - filled, "", step, steps,
               loss, tps);
  if (step == steps) std::fprintf(stderr, "\n");
}

int main(int argc, char** argv) {
  Args a;
  if (!parse_args(argc, argv, a)) return 2;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines in order with the progress on stderr, also through a pipe
  Corpus d;
  std::string err;
  if (!load_corpus(a.corpus, d, &err)) {
    std::fprintf(stderr, "wh-gpt: %s\n", err.c_str());
    return 1;
  }
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  GPT net(a);
  const Config& c = a.cfg;
  std::printf("wh-gpt on %s: %d layers, width %d, %d heads, context %d, batch %d, %zu parameters (bf16 matmuls, fp32 master)\n",
              prop.name, c.L, c.C, c.H, c.T, c.B, net.lay.count());
  std::printf("corpus: %zu training / %zu validation characters\n", d.train.size(), d.val.size());
  net.cast(net.p, net.pb, net.lay.total);

  std::vector<int> x, y;
  if (a.bench > 0) {  // batch upload + forward + backward + update; no per-step loss read-back
    auto step = [&](int s) {
      train_batch(c, d, a.seed, s, x, y);
      net.upload(x, y);
      net.forward(c.B, true);
      net.backward();
      net.update(s);
    };
    for (int s = 0; s < a.bench_warmup; ++s) step(s);
    CK(cudaDeviceSynchronize());
    const long c0 = g_calls;
    auto tb = std::chrono::steady_clock::now();
    for (int s = 0; s < a.bench; ++s) step(a.bench_warmup + s);
    const long per_step = (g_calls - c0) / a.bench;
    CK(cudaDeviceSynchronize());
    const double ms = std::chrono::duration<double>(std::chrono::steady_clock::now() - tb).count() * 1e3 / a.bench;
    const bool sim = std::strstr(prop.name, "Wormhole sim") != nullptr;
    std::printf("step_ms=%.3f calls_per_step=%ld device=%s\n", ms, per_step, sim ? "sim" : "gpu");
    return 0;
  }
  auto eval = [&]() {
    double s = 0;
    for (int k = 0; k < a.val_batches; ++k) {
      val_batch(c, d, k, a.val_batches, x, y);
      net.upload(x, y);
      net.forward(c.B, false);
      s += net.mean_loss(c.B * c.T);
    }
    return s / a.val_batches;
  };
  FILE* log = a.loss_log.empty() ? nullptr : std::fopen(a.loss_log.c_str(), "w");
  double v0 = eval(), vl = v0;
  if (log) std::fprintf(log, "val 0 %.6f\n", v0);
  std::printf("step 0: val loss %.4f\n", v0);
  std::vector<std::pair<int, double>> curve, vcurve{{0, v0}};
  auto t0 = std::chrono::steady_clock::now();
  double train_s = 0;
  for (int s = 0; s < a.steps; ++s) {
    auto ts = std::chrono::steady_clock::now();
    train_batch(c, d, a.seed, s, x, y);
    net.upload(x, y);
    net.forward(c.B, true);
    net.backward();
    net.update(s);
    double loss = net.mean_loss(c.B * c.T);  // synchronises
    train_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - ts).count();
    curve.push_back({s, loss});
    if (log) std::fprintf(log, "step %d loss %.6f\n", s, loss);
    if (!a.quiet) progress(s + 1, a.steps, loss, double(s + 1) * c.B * c.T / train_s);
    if ((s + 1) % a.eval_every == 0 || s + 1 == a.steps) {
      vl = eval();
      vcurve.push_back({s + 1, vl});
      if (log) std::fprintf(log, "val %d %.6f\n", s + 1, vl);
      if (!a.quiet) std::fprintf(stderr, "\n");
      std::printf("step %d: train loss %.4f, val loss %.4f\n", s + 1, loss, vl);
    }
  }
  if (log) std::fclose(log);
  double total_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // Sample: the model continues a prompt, one character at a time (sequence 0 of a batch).
  std::string text = "The ";
  Rng r(a.seed + 7);
  for (int i = 0; i < a.sample_chars; ++i) {
    std::vector<int> ctx(size_t(c.B) * c.T, 0), tg(ctx.size(), 0);
    int len = int(std::min<size_t>(text.size(), size_t(c.T))), off = int(text.size()) - len;
    for (int t = 0; t < len; ++t) ctx[size_t(t)] = std::max(0, char_to_tok((unsigned char)text[size_t(off + t)]));
    net.upload(ctx, tg);
    net.forward(1, false);
    std::vector<float> lg(static_cast<size_t>(c.V));
    CK(cudaMemcpy(lg.data(), net.logits + size_t(len - 1) * c.V, lg.size() * sizeof(float), cudaMemcpyDeviceToHost));
    float mx = *std::max_element(lg.begin(), lg.end());
    double z = 0;
    for (float& l : lg) z += (l = std::exp((l - mx) / 0.8f));  // temperature 0.8
    double u = r.uniform() * z;
    int k = 0;
    for (; k < c.V - 1; ++k) {
      u -= lg[size_t(k)];
      if (u <= 0) break;
    }
    text += tok_to_char(k);
  }
  std::printf("sample:\n%s\n", text.c_str());

  if (!a.plot.empty()) {
    std::string dat = a.plot + ".dat";
    FILE* f = std::fopen(dat.c_str(), "w");
    if (f) {
      for (auto& [s, l] : curve) std::fprintf(f, "%d %f\n", s, l);
      std::fprintf(f, "\n\n");
      for (auto& [s, l] : vcurve) std::fprintf(f, "%d %f\n", s, l);
      std::fclose(f);
      if (std::system("command -v gnuplot >/dev/null 2>&1") == 0) {
        std::string cmd = "gnuplot -e \"set terminal pngcairo size 800,500 noenhanced; set output '" + a.plot +
                          "'; set title 'wh-gpt (bf16 cuBLASLt, " + prop.name + ")'; set xlabel 'step'; set ylabel 'loss';"
                          " plot '" + dat + "' index 0 with lines title 'train', '' index 1 with linespoints title 'val'\" 2>/dev/null";
        if (std::system(cmd.c_str()) == 0) std::printf("loss plot: %s\n", a.plot.c_str());
        else std::printf("loss plot: gnuplot failed (data in %s)\n", dat.c_str());
      } else {
        std::printf("loss plot: skipped (no gnuplot; data in %s)\n", dat.c_str());
      }
    }
  }
  std::printf("wh-gpt summary: steps=%d val_loss=%.4f (start %.4f) tokens/s=%.0f train_time=%.1fs total=%.1fs\n", a.steps, vl, v0,
              a.steps ? double(a.steps) * c.B * c.T / train_s : 0.0, train_s, total_s);
  return 0;
}
