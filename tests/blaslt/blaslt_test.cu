// cuBLASLt as users write it, forwarded through Wormhole's drop-ins
// (libcudart.so.13 + libcublasLt.so.13, with libcublas.so.13 linked too)
// and checked on the host against fp32 references:
//   1. a bf16 GEMM (A transposed) + bias + GELU, algorithm from the
//      heuristic, against fp32 math on the same bf16 inputs;
//   2. an fp16 strided batched GEMM with beta*C (padded strides), with fp32
//      compute and with fp16 compute;
//   3. RELU_AUX_BIAS forward then DRELU_BGRAD backward through the bit mask,
//      GELU_AUX_BIAS then DGELU, BGRADA and BGRADB;
//   4. fp32 transposes, ROW order D, device pointer mode and a per-row
//      alpha vector; ROW-order A and B (fp32 and bf16);
//   5. the heuristic query, algorithm ids/init/check/config/caps and the
//      descriptor attributes round trip;
//   6. cublasSgemm (libcublas) and cublasLtMatmul agree in one program;
//   7. cublasLtMatrixTransform: COL fp32 + transposed B into ROW fp16, and
//      a batched alpha * A (no B) in place;
// plus the synchronous refusals of bad arguments.
// Tolerances, relative to the largest magnitude of each reference: bf16
// outputs 1e-2 (bf16 keeps 8 significant bits: 2^-8 = 3.9e-3 per rounding),
// fp16 outputs 2e-3 (2^-11 = 4.9e-4 per rounding), fp32 outputs 1e-5. The
// measured errors are printed.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "wh_check.cuh"
#define CB(x) WH_REQUIRE(x, CUBLAS_STATUS_SUCCESS, cublasLtGetStatusName(r_))

static int failures = 0;
static void check(bool ok, const char* what, double err, double tol) {
  std::printf("%s %s: max relative error %.3g (tolerance %.3g)\n", ok ? "ok  " : "FAIL", what, err, tol);
  if (!ok) failures++;
}
static void expect(bool ok, const char* what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what);
  if (!ok) failures++;
}
static void expect_status(cublasStatus_t got, cublasStatus_t want, const char* what) {
  bool ok = got == want;
  std::printf("%s %s: %s (want %s)\n", ok ? "ok  " : "FAIL", what, cublasLtGetStatusName(got),
              cublasLtGetStatusName(want));
  if (!ok) failures++;
}

static unsigned rng = 12345;
static float rnd() {  // uniform in [-1, 1)
  rng = rng * 1664525u + 1013904223u;
  return float(rng >> 8) / float(1 << 23) - 1.f;
}

static float gelu(float x) { return 0.5f * x * (1.f + std::tanh(0.7978845608f * (x + 0.044715f * x * x * x))); }
static float dgelu(float x) {
  float u = 0.7978845608f * (x + 0.044715f * x * x * x), t = std::tanh(u);
  return 0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * 0.7978845608f * (1.f + 3.f * 0.044715f * x * x);
}

// max |got - want| / max |want|; infinite when an element is not a number
// (an element never written keeps the NaN pattern the tests fill D with).
static double rel_err(const std::vector<float>& got, const std::vector<float>& want) {
  double e = 0, m = 1e-30;
  for (size_t i = 0; i < want.size(); i++) {
    if (std::isnan(got[i]) || got.size() != want.size()) return INFINITY;
    e = std::fmax(e, std::fabs(double(got[i]) - double(want[i])));
    m = std::fmax(m, std::fabs(double(want[i])));
  }
  return e / m;
}

template <class T>
static T* dev_copy(const std::vector<T>& h) {
  T* d;
  CK(cudaMalloc(&d, h.size() * sizeof(T) + 16));
  CK(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}
template <class T>
static std::vector<T> host_copy(const T* d, size_t n) {
  std::vector<T> h(n);
  CK(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}

static cublasLtMatrixLayout_t layout(cudaDataType t, uint64_t rows, uint64_t cols, int64_t ld, int batch = 1,
                                     int64_t stride = 0, cublasLtOrder_t order = CUBLASLT_ORDER_COL) {
  cublasLtMatrixLayout_t l;
  CB(cublasLtMatrixLayoutCreate(&l, t, rows, cols, ld));
  CB(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ORDER, &order, sizeof(order)));
  if (batch > 1) {
    CB(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof(batch)));
    CB(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
  }
  return l;
}
template <class T>
static void set(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a, T v) {
  CB(cublasLtMatmulDescSetAttribute(d, a, &v, sizeof(v)));
}

// 1. bf16: D = gelu(op(A) B + bias), A stored k x m (transposed), bias bf16.
static void test_bf16_bias_gelu(cublasLtHandle_t lt, void* ws, size_t ws_size) {
  const int m = 96, n = 80, k = 136;
  std::vector<__nv_bfloat16> A(size_t(k) * m), B(size_t(k) * n), bias(m);
  std::vector<float> fA(A.size()), fB(B.size()), fbias(m);
  for (size_t i = 0; i < A.size(); i++) A[i] = __float2bfloat16(rnd()), fA[i] = __bfloat162float(A[i]);
  for (size_t i = 0; i < B.size(); i++) B[i] = __float2bfloat16(rnd()), fB[i] = __bfloat162float(B[i]);
  for (int i = 0; i < m; i++) bias[i] = __float2bfloat16(rnd()), fbias[i] = __bfloat162float(bias[i]);
  auto *dA = dev_copy(A), *dB = dev_copy(B), *dbias = dev_copy(bias);
  __nv_bfloat16* dD;
  CK(cudaMalloc(&dD, size_t(m) * n * 2));
  CK(cudaMemset(dD, 0xff, size_t(m) * n * 2));  // NaNs: every element must be written

  cublasLtMatmulDesc_t op;
  CB(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  set(op, CUBLASLT_MATMUL_DESC_TRANSA, int32_t(CUBLAS_OP_T));
  set(op, CUBLASLT_MATMUL_DESC_EPILOGUE, uint32_t(CUBLASLT_EPILOGUE_GELU_BIAS));
  set(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, (const void*)dbias);
  auto la = layout(CUDA_R_16BF, k, m, k), lb = layout(CUDA_R_16BF, k, n, k), ld = layout(CUDA_R_16BF, m, n, m);
  cublasLtMatmulPreference_t pref;
  CB(cublasLtMatmulPreferenceCreate(&pref));
  uint64_t wsb = ws_size;
  CB(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof(wsb)));
  cublasLtMatmulHeuristicResult_t heur[4];
  int got = 0;
  CB(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, ld, ld, pref, 4, heur, &got));
  expect(got >= 1 && heur[0].state == CUBLAS_STATUS_SUCCESS && heur[0].workspaceSize <= ws_size,
         "bf16 heuristic: an algorithm within the workspace");
  const float alpha = 1.f, beta = 0.f;
  CB(cublasLtMatmul(lt, op, &alpha, dA, la, dB, lb, &beta, dD, ld, dD, ld, &heur[0].algo, ws, ws_size, 0));
  CK(cudaDeviceSynchronize());
  auto D = host_copy(dD, size_t(m) * n);
  std::vector<float> got_f(D.size()), want(D.size());
  for (int j = 0; j < n; j++)
    for (int i = 0; i < m; i++) {
      float s = 0;
      for (int kk = 0; kk < k; kk++) s += fA[size_t(i) * k + kk] * fB[size_t(j) * k + kk];
      want[size_t(j) * m + i] = gelu(s + fbias[i]);
      got_f[size_t(j) * m + i] = __bfloat162float(D[size_t(j) * m + i]);
    }
  double e = rel_err(got_f, want);
  check(e <= 1e-2, "bf16 GEMM (A^T) + bias + GELU vs fp32 host", e, 1e-2);
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(la), cublasLtMatrixLayoutDestroy(lb), cublasLtMatrixLayoutDestroy(ld);
  cublasLtMatmulDescDestroy(op);
  cudaFree(dA), cudaFree(dB), cudaFree(dbias), cudaFree(dD);
}

// 2. fp16 strided batch: D_b = alpha A_b B_b + beta C_b, strides padded.
static void test_fp16_strided_batch(cublasLtHandle_t lt, bool half_compute) {
  const int m = 40, n = 24, k = 56, batch = 5;
  const int64_t lda = 48, ldb = 64, ldc = 40;
  const int64_t sa = lda * k + 32, sb = ldb * n + 16, sc = ldc * n + 8;
  std::vector<__half> A(size_t(sa) * batch), B(size_t(sb) * batch), C(size_t(sc) * batch);
  for (auto& x : A) x = __float2half(rnd());
  for (auto& x : B) x = __float2half(rnd());
  for (auto& x : C) x = __float2half(rnd());
  auto *dA = dev_copy(A), *dB = dev_copy(B), *dC = dev_copy(C);
  __half* dD;
  CK(cudaMalloc(&dD, C.size() * 2));
  CK(cudaMemcpy(dD, dC, C.size() * 2, cudaMemcpyDeviceToDevice));  // padding compared too
  cublasLtMatmulDesc_t op;
  if (half_compute)
    CB(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_16F, CUDA_R_16F));
  else
    CB(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  auto la = layout(CUDA_R_16F, m, k, lda, batch, sa), lb = layout(CUDA_R_16F, k, n, ldb, batch, sb),
       lc = layout(CUDA_R_16F, m, n, ldc, batch, sc);
  const float alpha = 0.75f, beta = 0.5f;
  const __half halpha = __float2half(alpha), hbeta = __float2half(beta);
  const void* pa = half_compute ? (const void*)&halpha : (const void*)&alpha;
  const void* pb = half_compute ? (const void*)&hbeta : (const void*)&beta;
  CB(cublasLtMatmul(lt, op, pa, dA, la, dB, lb, pb, dC, lc, dD, lc, nullptr, nullptr, 0, 0));
  CK(cudaDeviceSynchronize());
  auto D = host_copy(dD, C.size());
  std::vector<float> got(D.size()), want(D.size());
  for (size_t i = 0; i < C.size(); i++) want[i] = __half2float(C[i]), got[i] = __half2float(D[i]);
  for (int b = 0; b < batch; b++)
    for (int j = 0; j < n; j++)
      for (int i = 0; i < m; i++) {
        float s = 0;
        for (int kk = 0; kk < k; kk++)
          s += __half2float(A[b * sa + kk * lda + i]) * __half2float(B[b * sb + j * ldb + kk]);
        want[b * sc + j * ldc + i] = alpha * s + beta * __half2float(C[b * sc + j * ldc + i]);
      }
  double e = rel_err(got, want);
  check(e <= 2e-3, half_compute ? "fp16 strided batch x5, COMPUTE_16F, beta*C" : "fp16 strided batch x5, COMPUTE_32F, beta*C",
        e, 2e-3);
  cublasLtMatrixLayoutDestroy(la), cublasLtMatrixLayoutDestroy(lb), cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatmulDescDestroy(op);
  cudaFree(dA), cudaFree(dB), cudaFree(dC), cudaFree(dD);
}

// 3. Epilogues with aux outputs and gradients, fp32, batched x2.
static void test_aux_and_grads(cublasLtHandle_t lt) {
  const int m = 70, n = 33, k = 20, batch = 2;
  const int64_t mask_ld = 128, mask_stride = mask_ld * n, gelu_ld = 72, gelu_stride = gelu_ld * n;
  std::vector<float> A(size_t(m) * k * batch), B(size_t(k) * n * batch), bias(size_t(m) * batch);
  for (auto& x : A) x = rnd();
  for (auto& x : B) x = rnd();
  for (auto& x : bias) x = rnd();
  auto *dA = dev_copy(A), *dB = dev_copy(B), *dbias = dev_copy(bias);
  float *dD, *dG, *dgelu_in, *dbgrad;
  uint8_t* dmask;
  const size_t mn = size_t(m) * n;
  CK(cudaMalloc(&dD, mn * batch * 4));
  CK(cudaMalloc(&dG, mn * batch * 4));
  CK(cudaMalloc(&dgelu_in, size_t(gelu_stride) * batch * 4));
  CK(cudaMalloc(&dbgrad, size_t(m > n ? m : n) * batch * 4));
  CK(cudaMalloc(&dmask, size_t(mask_stride) * batch / 8));
  auto la = layout(CUDA_R_32F, m, k, m, batch, int64_t(m) * k), lb = layout(CUDA_R_32F, k, n, k, batch, int64_t(k) * n),
       ld = layout(CUDA_R_32F, m, n, m, batch, int64_t(mn));
  const float one = 1.f, zero = 0.f;
  // Reference pre-activation Z = A B + bias.
  std::vector<float> Z(mn * batch), AB(mn * batch);
  for (int b = 0; b < batch; b++)
    for (int j = 0; j < n; j++)
      for (int i = 0; i < m; i++) {
        float s = 0;
        for (int kk = 0; kk < k; kk++) s += A[b * m * k + kk * m + i] * B[b * k * n + j * k + kk];
        AB[b * mn + j * m + i] = s;
        Z[b * mn + j * m + i] = s + bias[b * m + i];
      }

  // Forward: D = relu(Z), mask = Z > 0.
  cublasLtMatmulDesc_t op;
  CB(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  set(op, CUBLASLT_MATMUL_DESC_EPILOGUE, uint32_t(CUBLASLT_EPILOGUE_RELU_AUX_BIAS));
  set(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, (const void*)dbias);
  set(op, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, int64_t(m));
  set(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, (void*)dmask);
  set(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, mask_ld);
  set(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, mask_stride);
  CB(cublasLtMatmul(lt, op, &one, dA, la, dB, lb, &zero, dD, ld, dD, ld, nullptr, nullptr, 0, 0));
  // Backward through the mask: G = (A B) * [Z > 0], bgrad = row sums of G.
  set(op, CUBLASLT_MATMUL_DESC_EPILOGUE, uint32_t(CUBLASLT_EPILOGUE_DRELU_BGRAD));
  set(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, (const void*)dbgrad);
  CB(cublasLtMatmul(lt, op, &one, dA, la, dB, lb, &zero, dG, ld, dG, ld, nullptr, nullptr, 0, 0));
  CK(cudaDeviceSynchronize());
  {
    auto D = host_copy(dD, mn * batch), G = host_copy(dG, mn * batch), bg = host_copy(dbgrad, size_t(m) * batch);
    std::vector<float> wd(D.size()), wg(G.size()), wb(bg.size(), 0.f);
    for (size_t i = 0; i < Z.size(); i++) {
      wd[i] = Z[i] > 0 ? Z[i] : 0;
      wg[i] = Z[i] > 0 ? AB[i] : 0;
    }
    for (int b = 0; b < batch; b++)
      for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) wb[b * m + i] += wg[b * mn + j * m + i];
    double e = rel_err(D, wd);
    check(e <= 1e-5, "RELU_AUX_BIAS forward (batched bias)", e, 1e-5);
    e = rel_err(G, wg);
    check(e <= 1e-5, "DRELU_BGRAD through the RELU_AUX mask: gradient", e, 1e-5);
    e = rel_err(bg, wb);
    check(e <= 1e-5, "DRELU_BGRAD: bias gradient", e, 1e-5);
  }

  // GELU_AUX_BIAS (aux = Z) then DGELU: G = (A B) * gelu'(Z).
  set(op, CUBLASLT_MATMUL_DESC_EPILOGUE, uint32_t(CUBLASLT_EPILOGUE_GELU_AUX_BIAS));
  set(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, (const void*)dbias);
  set(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, (void*)dgelu_in);
  set(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, gelu_ld);
  set(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, gelu_stride);
  CB(cublasLtMatmul(lt, op, &one, dA, la, dB, lb, &zero, dD, ld, dD, ld, nullptr, nullptr, 0, 0));
  auto aux = std::vector<float>();
  CK(cudaDeviceSynchronize());
  aux = host_copy(dgelu_in, size_t(gelu_stride) * batch);
  set(op, CUBLASLT_MATMUL_DESC_EPILOGUE, uint32_t(CUBLASLT_EPILOGUE_DGELU));
  CB(cublasLtMatmul(lt, op, &one, dA, la, dB, lb, &zero, dG, ld, dG, ld, nullptr, nullptr, 0, 0));
  CK(cudaDeviceSynchronize());
  {
    auto D = host_copy(dD, mn * batch), G = host_copy(dG, mn * batch);
    std::vector<float> wd(D.size()), wg(G.size()), ga(Z.size()), wa(Z.size());
    for (int b = 0; b < batch; b++)
      for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
          size_t z = b * mn + j * m + i;
          wd[z] = gelu(Z[z]);
          wg[z] = AB[z] * dgelu(Z[z]);
          ga[z] = aux[b * gelu_stride + j * gelu_ld + i];
          wa[z] = Z[z];
        }
    double e = rel_err(D, wd);
    check(e <= 1e-5, "GELU_AUX_BIAS forward", e, 1e-5);
    e = rel_err(ga, wa);
    check(e <= 1e-5, "GELU_AUX_BIAS: aux holds the GELU input (ld 72)", e, 1e-5);
    e = rel_err(G, wg);
    check(e <= 1e-5, "DGELU through the GELU aux", e, 1e-5);
  }

  // BGRADA (bias[i] = sum_k A(i,k)) and BGRADB (bias[j] = sum_k B(k,j)), batch 1.
  cublasLtMatmulDesc_t g;
  CB(cublasLtMatmulDescCreate(&g, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  set(g, CUBLASLT_MATMUL_DESC_BIAS_POINTER, (const void*)dbgrad);
  auto la1 = layout(CUDA_R_32F, m, k, m), lb1 = layout(CUDA_R_32F, k, n, k), ld1 = layout(CUDA_R_32F, m, n, m);
  for (int which = 0; which < 2; which++) {
    set(g, CUBLASLT_MATMUL_DESC_EPILOGUE, uint32_t(which ? CUBLASLT_EPILOGUE_BGRADB : CUBLASLT_EPILOGUE_BGRADA));
    CB(cublasLtMatmul(lt, g, &one, dA, la1, dB, lb1, &zero, dD, ld1, dD, ld1, nullptr, nullptr, 0, 0));
    CK(cudaDeviceSynchronize());
    const int len = which ? n : m;
    auto bg = host_copy(dbgrad, size_t(len));
    auto D = host_copy(dD, mn);
    std::vector<float> wb(len, 0.f), wd(AB.begin(), AB.begin() + mn);
    for (int x = 0; x < len; x++)
      for (int kk = 0; kk < k; kk++) wb[x] += which ? B[x * k + kk] : A[kk * m + x];
    double e = std::fmax(rel_err(bg, wb), rel_err(D, wd));
    check(e <= 1e-5, which ? "BGRADB: bias gradient of B and D = A B" : "BGRADA: bias gradient of A and D = A B", e,
          1e-5);
  }
  cublasLtMatrixLayoutDestroy(la1), cublasLtMatrixLayoutDestroy(lb1), cublasLtMatrixLayoutDestroy(ld1);
  cublasLtMatmulDescDestroy(g);
  cublasLtMatrixLayoutDestroy(la), cublasLtMatrixLayoutDestroy(lb), cublasLtMatrixLayoutDestroy(ld);
  cublasLtMatmulDescDestroy(op);
  cudaFree(dA), cudaFree(dB), cudaFree(dbias), cudaFree(dD), cudaFree(dG), cudaFree(dgelu_in), cudaFree(dbgrad);
  cudaFree(dmask);
}

// 4. fp32 transposes, ROW-order output, device scalars, per-row alpha vector.
static void test_transposes(cublasLtHandle_t lt, cudaStream_t stream) {
  const int m = 37, n = 29, k = 45;
  // A^T stored k x m (ld k+3), B^T stored n x k (ld n+1), C col-major, D row-major.
  const int64_t lda = k + 3, ldb = n + 1;
  std::vector<float> A(size_t(lda) * m), B(size_t(ldb) * k), C(size_t(m) * n), alpha_vec(m);
  for (auto& x : A) x = rnd();
  for (auto& x : B) x = rnd();
  for (auto& x : C) x = rnd();
  for (auto& x : alpha_vec) x = rnd();
  const float dev_scalars[2] = {1.5f, -0.25f};
  auto *dA = dev_copy(A), *dB = dev_copy(B), *dC = dev_copy(C), *dalpha = dev_copy(alpha_vec);
  float *dD, *dS;
  CK(cudaMalloc(&dD, size_t(m) * n * 4));
  CK(cudaMalloc(&dS, sizeof(dev_scalars)));
  CK(cudaMemcpy(dS, dev_scalars, sizeof(dev_scalars), cudaMemcpyHostToDevice));
  cublasLtMatmulDesc_t op;
  CB(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  set(op, CUBLASLT_MATMUL_DESC_TRANSA, int32_t(CUBLAS_OP_T));
  set(op, CUBLASLT_MATMUL_DESC_TRANSB, int32_t(CUBLAS_OP_T));
  set(op, CUBLASLT_MATMUL_DESC_POINTER_MODE, int32_t(CUBLASLT_POINTER_MODE_DEVICE));
  auto la = layout(CUDA_R_32F, k, m, lda), lb = layout(CUDA_R_32F, n, k, ldb), lc = layout(CUDA_R_32F, m, n, m),
       ld = layout(CUDA_R_32F, m, n, n, 1, 0, CUBLASLT_ORDER_ROW);
  std::vector<float> AB(size_t(m) * n);
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      float s = 0;
      for (int kk = 0; kk < k; kk++) s += A[size_t(i) * lda + kk] * B[size_t(kk) * ldb + j];
      AB[size_t(i) * n + j] = s;
    }
  CB(cublasLtMatmul(lt, op, dS, dA, la, dB, lb, dS + 1, dC, lc, dD, ld, nullptr, nullptr, 0, stream));
  CK(cudaStreamSynchronize(stream));
  auto D = host_copy(dD, size_t(m) * n);
  std::vector<float> want(D.size());
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) want[size_t(i) * n + j] = 1.5f * AB[size_t(i) * n + j] - 0.25f * C[size_t(j) * m + i];
  double e = rel_err(D, want);
  check(e <= 1e-5, "fp32 A^T B^T, ROW-order D, device alpha/beta, on a stream", e, 1e-5);
  // Per-row alpha vector, beta host (ALPHA_DEVICE_VECTOR_BETA_HOST).
  set(op, CUBLASLT_MATMUL_DESC_POINTER_MODE, int32_t(CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_HOST));
  const float hbeta = 2.f;
  CB(cublasLtMatmul(lt, op, dalpha, dA, la, dB, lb, &hbeta, dC, lc, dD, ld, nullptr, nullptr, 0, stream));
  CK(cudaStreamSynchronize(stream));
  D = host_copy(dD, size_t(m) * n);
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++)
      want[size_t(i) * n + j] = alpha_vec[i] * AB[size_t(i) * n + j] + 2.f * C[size_t(j) * m + i];
  e = rel_err(D, want);
  check(e <= 1e-5, "per-row alpha vector, host beta", e, 1e-5);
  cublasLtMatrixLayoutDestroy(la), cublasLtMatrixLayoutDestroy(lb), cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatrixLayoutDestroy(ld);
  cublasLtMatmulDescDestroy(op);
  cudaFree(dA), cudaFree(dB), cudaFree(dC), cudaFree(dD), cudaFree(dS), cudaFree(dalpha);
}

// 4b. ROW-order inputs: A (m x k, ROW, padded ld) with B stored n x k in
// ROW order and transposed, fp32 and bf16, into a COL-order fp32 D.
static void test_row_inputs(cublasLtHandle_t lt, cudaDataType type) {
  const int m = 21, n = 17, k = 31;
  const int64_t lda = k + 2, ldb = k + 5;
  std::vector<float> A(size_t(m) * lda), B(size_t(n) * ldb);
  for (auto& x : A) x = rnd();
  for (auto& x : B) x = rnd();
  void *dA, *dB;
  if (type == CUDA_R_16BF) {
    std::vector<__nv_bfloat16> a(A.size()), b(B.size());
    for (size_t i = 0; i < A.size(); i++) a[i] = __float2bfloat16(A[i]), A[i] = __bfloat162float(a[i]);
    for (size_t i = 0; i < B.size(); i++) b[i] = __float2bfloat16(B[i]), B[i] = __bfloat162float(b[i]);
    dA = dev_copy(a), dB = dev_copy(b);
  } else {
    dA = dev_copy(A), dB = dev_copy(B);
  }
  float* dD;
  CK(cudaMalloc(&dD, size_t(m) * n * 4));
  cublasLtMatmulDesc_t op;
  CB(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  set(op, CUBLASLT_MATMUL_DESC_TRANSB, int32_t(CUBLAS_OP_T));
  auto la = layout(type, m, k, lda, 1, 0, CUBLASLT_ORDER_ROW), lb = layout(type, n, k, ldb, 1, 0, CUBLASLT_ORDER_ROW),
       ld = layout(CUDA_R_32F, m, n, m);
  const float one = 1.f, zero = 0.f;
  CB(cublasLtMatmul(lt, op, &one, dA, la, dB, lb, &zero, dD, ld, dD, ld, nullptr, nullptr, 0, 0));
  CK(cudaDeviceSynchronize());
  auto D = host_copy(dD, size_t(m) * n);
  std::vector<float> want(D.size());
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      float s = 0;
      for (int kk = 0; kk < k; kk++) s += A[size_t(i) * lda + kk] * B[size_t(j) * ldb + kk];
      want[size_t(j) * m + i] = s;
    }
  double e = rel_err(D, want);
  check(e <= 1e-5, type == CUDA_R_16BF ? "ROW-order bf16 A and B^T into fp32 D" : "ROW-order fp32 A and B^T", e,
        1e-5);
  cublasLtMatrixLayoutDestroy(la), cublasLtMatrixLayoutDestroy(lb), cublasLtMatrixLayoutDestroy(ld);
  cublasLtMatmulDescDestroy(op);
  cudaFree(dA), cudaFree(dB), cudaFree(dD);
}

// 5. Heuristic, algorithm and attribute queries.
static void test_queries(cublasLtHandle_t lt) {
  expect(cublasLtGetVersion() == CUBLAS_VERSION, "cublasLtGetVersion");
  int major = -1;
  CB(cublasLtGetProperty(MAJOR_VERSION, &major));
  expect(major == CUBLAS_VER_MAJOR, "cublasLtGetProperty(MAJOR_VERSION)");
  expect(std::strcmp(cublasLtGetStatusName(CUBLAS_STATUS_NOT_SUPPORTED), "CUBLAS_STATUS_NOT_SUPPORTED") == 0 &&
             std::strlen(cublasLtGetStatusString(CUBLAS_STATUS_INVALID_VALUE)) > 0,
         "status names and strings");

  int ids[8], nids = 0;
  CB(cublasLtMatmulAlgoGetIds(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16BF, CUDA_R_16BF, CUDA_R_16BF, CUDA_R_16BF,
                              8, ids, &nids));
  expect(nids >= 1, "AlgoGetIds: bf16 has an algorithm");
  int none = -1;
  CB(cublasLtMatmulAlgoGetIds(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_8F_E4M3, CUDA_R_8F_E4M3, CUDA_R_16BF,
                              CUDA_R_16BF, 8, ids + 4, &none));
  expect(none == 0, "AlgoGetIds: no fp8 algorithm (the sim device is compute capability 8.0)");
  cublasLtMatmulAlgo_t algo;
  CB(cublasLtMatmulAlgoInit(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16BF, CUDA_R_16BF, CUDA_R_16BF, CUDA_R_16BF,
                            ids[0], &algo));
  int32_t id = -1, splitk = 0;
  size_t w = 0;
  CB(cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof(id), &w));
  CB(cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof(splitk), &w));
  expect(id == ids[0] && splitk == 1 && w == sizeof(splitk), "AlgoConfigGetAttribute: id and split-k");
  uint32_t swz = 0;
  CB(cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &swz, sizeof(swz)));
  int32_t strided = 0;
  CB(cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_STRIDED_BATCH_SUPPORT, &strided, sizeof(strided), &w));
  uint32_t epis = 0;
  CB(cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_EPILOGUE_MASK, &epis, sizeof(epis), &w));
  expect(strided == 1 && (epis & CUBLASLT_EPILOGUE_GELU_AUX_BIAS) == CUBLASLT_EPILOGUE_GELU_AUX_BIAS,
         "AlgoCapGetAttribute: strided batches and the GELU epilogues");

  cublasLtMatmulDesc_t op;
  CB(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  auto l = layout(CUDA_R_16BF, 64, 64, 64);
  cublasLtMatmulHeuristicResult_t r;
  CB(cublasLtMatmulAlgoCheck(lt, op, l, l, l, l, &algo, &r));
  expect(r.state == CUBLAS_STATUS_SUCCESS && r.workspaceSize == 0 && r.wavesCount > 0, "AlgoCheck");

  // Every attribute: size query, set, get back.
  uint32_t epi = CUBLASLT_EPILOGUE_RELU_AUX_BIAS, got_epi = 0;
  set(op, CUBLASLT_MATMUL_DESC_EPILOGUE, epi);
  CB(cublasLtMatmulDescGetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &got_epi, sizeof(got_epi), &w));
  int64_t aux_ld = 256, got_ld = 0;
  set(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, aux_ld);
  CB(cublasLtMatmulDescGetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &got_ld, sizeof(got_ld), &w));
  int32_t bias_type = -7;
  CB(cublasLtMatmulDescGetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type), &w));
  size_t need = 0;
  CB(cublasLtMatmulDescGetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, nullptr, 0, &need));
  expect(got_epi == epi && got_ld == aux_ld && bias_type == -1 && need == sizeof(void*),
         "matmul descriptor attributes round trip (and defaults, and size queries)");
  int64_t bad = 0;
  expect_status(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &bad, sizeof(bad)),
                CUBLAS_STATUS_INVALID_VALUE, "SetAttribute with the wrong size");
  int32_t batch = 0;
  CB(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof(batch), &w));
  uint64_t rows = 0;
  CB(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ROWS, &rows, sizeof(rows), &w));
  expect(batch == 1 && rows == 64, "matrix layout attributes");
  // A descriptor in the user's own memory (the Init functions).
  cublasLtMatmulDescOpaque_t mine;
  CB(cublasLtMatmulDescInit(&mine, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  int32_t ct = 0;
  CB(cublasLtMatmulDescGetAttribute(&mine, CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, &ct, sizeof(ct), &w));
  expect(ct == CUBLAS_COMPUTE_32F, "cublasLtMatmulDescInit on user memory");
  cublasLtMatrixLayoutDestroy(l);
  cublasLtMatmulDescDestroy(op);
}

// 6. libcublas and libcublasLt in one program.
static void test_with_cublas(cublasLtHandle_t lt) {
  const int m = 32, n = 16, k = 24;
  std::vector<float> A(size_t(m) * k), B(size_t(k) * n);
  for (auto& x : A) x = rnd();
  for (auto& x : B) x = rnd();
  auto *dA = dev_copy(A), *dB = dev_copy(B);
  float *d1, *d2;
  CK(cudaMalloc(&d1, size_t(m) * n * 4));
  CK(cudaMalloc(&d2, size_t(m) * n * 4));
  cublasHandle_t h;
  CB(cublasCreate(&h));
  const float one = 1.f, zero = 0.f;
  CB(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, dA, m, dB, k, &zero, d1, m));
  cublasLtMatmulDesc_t op;
  CB(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  auto la = layout(CUDA_R_32F, m, k, m), lb = layout(CUDA_R_32F, k, n, k), ld = layout(CUDA_R_32F, m, n, m);
  CB(cublasLtMatmul(lt, op, &one, dA, la, dB, lb, &zero, d2, ld, d2, ld, nullptr, nullptr, 0, 0));
  CK(cudaDeviceSynchronize());
  double e = rel_err(host_copy(d2, size_t(m) * n), host_copy(d1, size_t(m) * n));
  check(e <= 1e-6, "cublasSgemm and cublasLtMatmul agree (both libraries linked)", e, 1e-6);
  // A cuBLAS handle used as a cuBLASLt handle (NVIDIA documents the cast; PyTorch's addmm does it),
  // with a bias epilogue, against the host.
  std::vector<float> bias(m);
  for (auto& x : bias) x = rnd();
  float* dbias = dev_copy(bias);
  set(op, CUBLASLT_MATMUL_DESC_EPILOGUE, uint32_t(CUBLASLT_EPILOGUE_BIAS));
  set(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, dbias);
  CK(cudaMemset(d2, 0, size_t(m) * n * 4));
  CB(cublasLtMatmul(reinterpret_cast<cublasLtHandle_t>(h), op, &one, dA, la, dB, lb, &zero, d2, ld, d2, ld, nullptr,
                    nullptr, 0, 0));
  CK(cudaDeviceSynchronize());
  std::vector<float> want(size_t(m) * n);
  for (int j = 0; j < n; j++)
    for (int i = 0; i < m; i++) {
      double s = bias[i];
      for (int kk = 0; kk < k; kk++) s += double(A[size_t(kk) * m + i]) * B[size_t(j) * k + kk];
      want[size_t(j) * m + i] = float(s);
    }
  e = rel_err(host_copy(d2, size_t(m) * n), want);
  check(e <= 1e-5, "cublasLtMatmul with a cuBLAS handle cast to a cuBLASLt handle, bias epilogue", e, 1e-5);
  cudaFree(dbias);
  CB(cublasDestroy(h));
  cublasLtMatrixLayoutDestroy(la), cublasLtMatrixLayoutDestroy(lb), cublasLtMatrixLayoutDestroy(ld);
  cublasLtMatmulDescDestroy(op);
  cudaFree(dA), cudaFree(dB), cudaFree(d1), cudaFree(d2);
}

// 7. Matrix transforms.
static void test_transform(cublasLtHandle_t lt) {
  const int m = 19, n = 13, batch = 3;
  std::vector<float> A(size_t(m) * n * batch), B(size_t(n) * m);
  for (auto& x : A) x = rnd();
  for (auto& x : B) x = rnd();
  auto *dA = dev_copy(A), *dB = dev_copy(B);
  __half* dC;
  CK(cudaMalloc(&dC, size_t(m) * n * 2));
  cublasLtMatrixTransformDesc_t t;
  CB(cublasLtMatrixTransformDescCreate(&t, CUDA_R_32F));
  int32_t tb = CUBLAS_OP_T;
  CB(cublasLtMatrixTransformDescSetAttribute(t, CUBLASLT_MATRIX_TRANSFORM_DESC_TRANSB, &tb, sizeof(tb)));
  auto la = layout(CUDA_R_32F, m, n, m), lb = layout(CUDA_R_32F, n, m, n),
       lc = layout(CUDA_R_16F, m, n, n, 1, 0, CUBLASLT_ORDER_ROW);
  const float alpha = 2.f, beta = 0.5f;
  CB(cublasLtMatrixTransform(lt, t, &alpha, dA, la, &beta, dB, lb, dC, lc, 0));
  CK(cudaDeviceSynchronize());
  auto C = host_copy(dC, size_t(m) * n);
  std::vector<float> got(C.size()), want(C.size());
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      want[size_t(i) * n + j] = 2.f * A[size_t(j) * m + i] + 0.5f * B[size_t(i) * n + j];
      got[size_t(i) * n + j] = __half2float(C[size_t(i) * n + j]);
    }
  double e = rel_err(got, want);
  check(e <= 2e-3, "MatrixTransform: 2 A + 0.5 B^T, COL fp32 into ROW fp16", e, 2e-3);
  // alpha * A in place over three batches, no B.
  auto lab = layout(CUDA_R_32F, m, n, m, batch, int64_t(m) * n);
  const float a3 = -3.f, zero = 0.f;
  CB(cublasLtMatrixTransform(lt, t, &a3, dA, lab, &zero, nullptr, nullptr, dA, lab, 0));
  CK(cudaDeviceSynchronize());
  auto A2 = host_copy(dA, A.size());
  std::vector<float> wa(A.size());
  for (size_t i = 0; i < A.size(); i++) wa[i] = -3.f * A[i];
  e = rel_err(A2, wa);
  check(e <= 1e-6, "MatrixTransform: -3 A in place, 3 batches, B NULL", e, 1e-6);
  expect_status(cublasLtMatrixTransform(lt, t, &a3, dA, lab, &beta, nullptr, nullptr, dA, lab, 0),
                CUBLAS_STATUS_INVALID_VALUE, "MatrixTransform: B NULL with a nonzero beta");
  cublasLtMatrixLayoutDestroy(la), cublasLtMatrixLayoutDestroy(lb), cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatrixLayoutDestroy(lab);
  cublasLtMatrixTransformDescDestroy(t);
  cudaFree(dA), cudaFree(dB), cudaFree(dC);
}

// Refused at once, with cuBLASLt's status; nothing reaches the device.
static void test_refusals(cublasLtHandle_t lt) {
  float* d;
  CK(cudaMalloc(&d, 64 * 64 * 4));
  const float one = 1.f, zero = 0.f;
  cublasLtMatmulDesc_t op;
  CB(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  auto good = layout(CUDA_R_32F, 8, 8, 8), bad_ld = layout(CUDA_R_32F, 8, 8, 4),
       other = layout(CUDA_R_32F, 9, 8, 9);
  expect_status(cublasLtMatmul(lt, op, &one, d, bad_ld, d, good, &zero, d, good, d, good, nullptr, nullptr, 0, 0),
                CUBLAS_STATUS_INVALID_VALUE, "ld < rows");
  expect_status(cublasLtMatmul(lt, op, &one, d, other, d, good, &zero, d, good, d, good, nullptr, nullptr, 0, 0),
                CUBLAS_STATUS_INVALID_VALUE, "mismatched shapes");
  set(op, CUBLASLT_MATMUL_DESC_EPILOGUE, uint32_t(CUBLASLT_EPILOGUE_BIAS));
  expect_status(cublasLtMatmul(lt, op, &one, d, good, d, good, &zero, d, good, d, good, nullptr, nullptr, 0, 0),
                CUBLAS_STATUS_INVALID_VALUE, "BIAS epilogue without a bias pointer");
  set(op, CUBLASLT_MATMUL_DESC_EPILOGUE, uint32_t(CUBLASLT_EPILOGUE_RELU_AUX));
  set(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, (void*)d);
  set(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, int64_t(64));
  expect_status(cublasLtMatmul(lt, op, &one, d, good, d, good, &zero, d, good, d, good, nullptr, nullptr, 0, 0),
                CUBLAS_STATUS_INVALID_VALUE, "ReLU mask ld not a multiple of 128");
  cublasLtMatmulDesc_t f8;
  CB(cublasLtMatmulDescCreate(&f8, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  auto l8 = layout(CUDA_R_8F_E4M3, 16, 16, 16), l16 = layout(CUDA_R_16BF, 16, 16, 16);
  expect_status(cublasLtMatmul(lt, f8, &one, d, l8, d, l8, &zero, d, l16, d, l16, nullptr, nullptr, 0, 0),
                CUBLAS_STATUS_NOT_SUPPORTED, "fp8 inputs");
  expect_status(cublasLtMatmul(nullptr, f8, &one, d, good, d, good, &zero, d, good, d, good, nullptr, nullptr, 0, 0),
                CUBLAS_STATUS_NOT_INITIALIZED, "NULL handle");
  CK(cudaDeviceSynchronize());  // nothing was posted: no deferred error
  cublasLtMatrixLayoutDestroy(good), cublasLtMatrixLayoutDestroy(bad_ld), cublasLtMatrixLayoutDestroy(other);
  cublasLtMatrixLayoutDestroy(l8), cublasLtMatrixLayoutDestroy(l16);
  cublasLtMatmulDescDestroy(op), cublasLtMatmulDescDestroy(f8);
  cudaFree(d);
}

int main() {
  cublasLtHandle_t lt;
  CB(cublasLtCreate(&lt));
  const size_t ws_size = 1 << 20;
  void* ws;
  CK(cudaMalloc(&ws, ws_size));
  cudaStream_t stream;
  CK(cudaStreamCreate(&stream));
  test_bf16_bias_gelu(lt, ws, ws_size);
  test_fp16_strided_batch(lt, false);
  test_fp16_strided_batch(lt, true);
  test_aux_and_grads(lt);
  test_transposes(lt, stream);
  test_row_inputs(lt, CUDA_R_32F);
  test_row_inputs(lt, CUDA_R_16BF);
  test_queries(lt);
  test_with_cublas(lt);
  test_transform(lt);
  test_refusals(lt);
  CK(cudaStreamDestroy(stream));
  CK(cudaFree(ws));
  CB(cublasLtDestroy(lt));
  if (failures) {
    std::printf("%d FAILED\n", failures);
    return 1;
  }
  std::printf("all cuBLASLt checks passed\n");
  return 0;
}
