// cuBLAS through Wormhole: every forwarded function, every transpose
// combination, host and device pointer modes, checked against a host
// reference (double accumulation). Built with `nvcc -cudart shared -lcublas`
// like a user's program; runs natively on a GPU or forwarded unchanged.
// Exit status 0 when every check passes.
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "wh_check.cuh"

static int g_fail = 0, g_pass = 0;
static bool g_verbose = false;

// The legacy cuBLAS API (cublas.h) cannot be included beside cublas_v2.h,
// which maps the same names to the _v2 functions: declared by symbol here.
extern "C" float wh_legacy_sdot(int n, const float* x, int incx, const float* y, int incy) __asm__("cublasSdot");
extern "C" cuDoubleComplex wh_legacy_zdotc(int n, const cuDoubleComplex* x, int incx, const cuDoubleComplex* y,
                                           int incy) __asm__("cublasZdotc");

static void report(bool ok, const std::string& name, const std::string& detail = "") {
  if (ok) {
    g_pass++;
    if (g_verbose) std::printf("PASS %s\n", name.c_str());
  } else {
    g_fail++;
    std::printf("FAIL %s %s\n", name.c_str(), detail.c_str());
  }
}

static uint32_t g_seed = 12345;
static float frand() {  // deterministic, in [-1, 1)
  g_seed = g_seed * 1664525u + 1013904223u;
  return float((g_seed >> 8) & 0xFFFF) / 32768.f - 1.f;
}
template <class T>
static std::vector<T> rnd(size_t n) {
  std::vector<T> v(n);
  for (auto& x : v) x = T(frand());
  return v;
}

template <class T>
struct Dev {
  T* p = nullptr;
  size_t n = 0;
  explicit Dev(size_t n_) : n(n_) { CK(cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(T))); }
  Dev(const std::vector<T>& h) : Dev(h.size()) { put(h); }
  ~Dev() { cudaFree(p); }
  void put(const std::vector<T>& h) { CK(cudaMemcpy(p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice)); }
  std::vector<T> get() const {
    std::vector<T> h(n);
    CK(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }
};

static const cublasOperation_t kOps[3] = {CUBLAS_OP_N, CUBLAS_OP_T, CUBLAS_OP_C};
static const char* opname(cublasOperation_t o) { return o == CUBLAS_OP_N ? "N" : o == CUBLAS_OP_T ? "T" : "C"; }

// op(X)(i, j) of a column-major matrix with leading dimension ld.
template <class T>
static double at(const std::vector<T>& X, int ld, cublasOperation_t o, int i, int j, size_t off = 0) {
  return o == CUBLAS_OP_N ? double(X[off + size_t(j) * ld + i]) : double(X[off + size_t(i) * ld + j]);
}

template <class T>
static void ref_gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, double alpha,
                     const std::vector<T>& A, int lda, const std::vector<T>& B, int ldb, double beta, std::vector<T>& C,
                     int ldc, size_t oa = 0, size_t ob = 0, size_t oc = 0) {
  for (int j = 0; j < n; j++)
    for (int i = 0; i < m; i++) {
      double s = 0;
      for (int l = 0; l < k; l++) s += at(A, lda, ta, i, l, oa) * at(B, ldb, tb, l, j, ob);
      T& c = C[oc + size_t(j) * ldc + i];
      c = T(alpha * s + (beta == 0 ? 0.0 : beta * double(c)));
    }
}

template <class T>
static bool close(const std::vector<T>& got, const std::vector<T>& want, double tol, std::string* why) {
  if (got.size() != want.size()) {
    *why = "size mismatch";
    return false;
  }
  for (size_t i = 0; i < got.size(); i++) {
    double g = double(got[i]), w = double(want[i]);
    if (!(std::fabs(g - w) <= tol * (1 + std::fabs(w)))) {
      char b[160];
      std::snprintf(b, sizeof b, "at %zu: got %.9g want %.9g", i, g, w);
      *why = b;
      return false;
    }
  }
  return true;
}

// Scalars for either pointer mode: host values, or copies in device memory.
template <class T>
struct Scalars {
  T h[2];
  Dev<T> d{2};
  Scalars(T a, T b) {
    h[0] = a;
    h[1] = b;
    d.put({a, b});
  }
  const T* alpha(bool dev) const { return dev ? d.p : &h[0]; }
  const T* beta(bool dev) const { return dev ? d.p + 1 : &h[1]; }
};

static cublasHandle_t H;

template <class T>
static void test_gemm(bool dev) {
  const char* tn = sizeof(T) == 4 ? "Sgemm" : "Dgemm";
  const int m = 7, n = 5, k = 6;
  Scalars<T> sc(T(1.5), T(-0.5));
  for (auto ta : kOps)
    for (auto tb : kOps) {
      const int ar = ta == CUBLAS_OP_N ? m : k, ac = ta == CUBLAS_OP_N ? k : m;
      const int br = tb == CUBLAS_OP_N ? k : n, bc = tb == CUBLAS_OP_N ? n : k;
      const int lda = ar + 2, ldb = br + 1, ldc = m + 3;
      auto A = rnd<T>(size_t(lda) * ac), B = rnd<T>(size_t(ldb) * bc), C = rnd<T>(size_t(ldc) * n);
      Dev<T> dA(A), dB(B), dC(C);
      auto want = C;
      ref_gemm(ta, tb, m, n, k, 1.5, A, lda, B, ldb, -0.5, want, ldc);
      cublasStatus_t s;
      if constexpr (sizeof(T) == 4)
        s = cublasSgemm(H, ta, tb, m, n, k, sc.alpha(dev), dA.p, lda, dB.p, ldb, sc.beta(dev), dC.p, ldc);
      else
        s = cublasDgemm(H, ta, tb, m, n, k, sc.alpha(dev), dA.p, lda, dB.p, ldb, sc.beta(dev), dC.p, ldc);
      std::string why;
      std::string name = std::string(tn) + " " + opname(ta) + opname(tb) + (dev ? " devptr" : " hostptr");
      report(s == CUBLAS_STATUS_SUCCESS && close(dC.get(), want, sizeof(T) == 4 ? 1e-5 : 1e-12, &why), name, why);
    }
  // beta = 0 must overwrite C even if it holds NaN.
  {
    std::vector<T> A = rnd<T>(m * k), B = rnd<T>(k * n), C(m * n, T(NAN));
    Dev<T> dA(A), dB(B), dC(C);
    Scalars<T> s0(T(1), T(0));
    auto want = std::vector<T>(m * n, T(0));
    ref_gemm(CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, 1.0, A, m, B, k, 0.0, want, m);
    cublasStatus_t s;
    if constexpr (sizeof(T) == 4)
      s = cublasSgemm(H, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, s0.alpha(dev), dA.p, m, dB.p, k, s0.beta(dev), dC.p, m);
    else
      s = cublasDgemm(H, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, s0.alpha(dev), dA.p, m, dB.p, k, s0.beta(dev), dC.p, m);
    std::string why;
    report(s == CUBLAS_STATUS_SUCCESS && close(dC.get(), want, 1e-5, &why),
           std::string(tn) + " beta=0 over NaN" + (dev ? " devptr" : " hostptr"), why);
  }
}

static void test_strided(bool dev) {
  const int m = 5, n = 4, k = 3, batch = 3;
  Scalars<float> sc(0.75f, 0.25f);
  for (auto ta : kOps)
    for (auto tb : kOps) {
      const int ar = ta == CUBLAS_OP_N ? m : k, ac = ta == CUBLAS_OP_N ? k : m;
      const int br = tb == CUBLAS_OP_N ? k : n, bc = tb == CUBLAS_OP_N ? n : k;
      const int lda = ar + 1, ldb = br, ldc = m + 1;
      const long long sA = lda * ac + 3, sB = ldb * bc + 1, sC = ldc * n + 2;
      auto A = rnd<float>(sA * batch), B = rnd<float>(sB * batch), C = rnd<float>(sC * batch);
      Dev<float> dA(A), dB(B), dC(C);
      auto want = C;
      for (int b = 0; b < batch; b++)
        ref_gemm(ta, tb, m, n, k, 0.75, A, lda, B, ldb, 0.25, want, ldc, b * sA, b * sB, b * sC);
      cublasStatus_t s = cublasSgemmStridedBatched(H, ta, tb, m, n, k, sc.alpha(dev), dA.p, lda, sA, dB.p, ldb, sB,
                                                   sc.beta(dev), dC.p, ldc, sC, batch);
      std::string why;
      report(s == CUBLAS_STATUS_SUCCESS && close(dC.get(), want, 1e-5, &why),
             std::string("SgemmStridedBatched ") + opname(ta) + opname(tb) + (dev ? " devptr" : " hostptr"), why);
    }
}

static void test_batched(bool dev) {
  const int m = 4, n = 6, k = 5, batch = 4;
  Scalars<float> sc(-1.25f, 2.0f);
  for (auto ta : kOps)
    for (auto tb : kOps) {
      const int ar = ta == CUBLAS_OP_N ? m : k, ac = ta == CUBLAS_OP_N ? k : m;
      const int br = tb == CUBLAS_OP_N ? k : n, bc = tb == CUBLAS_OP_N ? n : k;
      const int lda = ar, ldb = br + 2, ldc = m;
      std::vector<std::vector<float>> A, B, C, W;
      std::vector<Dev<float>*> dA, dB, dC;
      std::vector<const float*> pa, pb;
      std::vector<float*> pc;
      for (int b = 0; b < batch; b++) {
        A.push_back(rnd<float>(lda * ac));
        B.push_back(rnd<float>(ldb * bc));
        C.push_back(rnd<float>(ldc * n));
        W.push_back(C.back());
        ref_gemm(ta, tb, m, n, k, -1.25, A[b], lda, B[b], ldb, 2.0, W[b], ldc);
        dA.push_back(new Dev<float>(A[b]));
        dB.push_back(new Dev<float>(B[b]));
        dC.push_back(new Dev<float>(C[b]));
        // Batches in reverse order in the pointer arrays: order comes from the arrays.
      }
      for (int b = batch - 1; b >= 0; b--) {
        pa.push_back(dA[b]->p);
        pb.push_back(dB[b]->p);
        pc.push_back(dC[b]->p);
      }
      const float** dpa;
      const float** dpb;
      float** dpc;
      CK(cudaMalloc(&dpa, batch * sizeof(void*)));
      CK(cudaMalloc(&dpb, batch * sizeof(void*)));
      CK(cudaMalloc(&dpc, batch * sizeof(void*)));
      CK(cudaMemcpy(dpa, pa.data(), batch * sizeof(void*), cudaMemcpyHostToDevice));
      CK(cudaMemcpy(dpb, pb.data(), batch * sizeof(void*), cudaMemcpyHostToDevice));
      CK(cudaMemcpy(dpc, pc.data(), batch * sizeof(void*), cudaMemcpyHostToDevice));
      cublasStatus_t s =
          cublasSgemmBatched(H, ta, tb, m, n, k, sc.alpha(dev), dpa, lda, dpb, ldb, sc.beta(dev), dpc, ldc, batch);
      bool ok = s == CUBLAS_STATUS_SUCCESS;
      std::string why;
      for (int b = 0; b < batch && ok; b++) ok = close(dC[b]->get(), W[b], 1e-5, &why);
      report(ok, std::string("SgemmBatched ") + opname(ta) + opname(tb) + (dev ? " devptr" : " hostptr"), why);
      cudaFree(dpa);
      cudaFree(dpb);
      cudaFree(dpc);
      for (int b = 0; b < batch; b++) delete dA[b], delete dB[b], delete dC[b];
    }
}

static void test_gemm_ex(bool dev) {
  const int m = 6, n = 5, k = 7;
  Scalars<float> sc(1.0f, 0.5f);
  for (auto ta : kOps)
    for (auto tb : kOps) {
      const int ar = ta == CUBLAS_OP_N ? m : k, ac = ta == CUBLAS_OP_N ? k : m;
      const int br = tb == CUBLAS_OP_N ? k : n, bc = tb == CUBLAS_OP_N ? n : k;
      const int lda = ar + 1, ldb = br + 1, ldc = m + 1;
      // fp32
      {
        auto A = rnd<float>(lda * ac), B = rnd<float>(ldb * bc), C = rnd<float>(ldc * n);
        Dev<float> dA(A), dB(B), dC(C);
        auto want = C;
        ref_gemm(ta, tb, m, n, k, 1.0, A, lda, B, ldb, 0.5, want, ldc);
        cublasStatus_t s = cublasGemmEx(H, ta, tb, m, n, k, sc.alpha(dev), dA.p, CUDA_R_32F, lda, dB.p, CUDA_R_32F,
                                        ldb, sc.beta(dev), dC.p, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F,
                                        CUBLAS_GEMM_DEFAULT);
        std::string why;
        report(s == CUBLAS_STATUS_SUCCESS && close(dC.get(), want, 1e-5, &why),
               std::string("GemmEx f32 ") + opname(ta) + opname(tb) + (dev ? " devptr" : " hostptr"), why);
      }
      // fp16 inputs, fp32 compute, fp32 and fp16 outputs
      for (int half_out = 0; half_out < 2; half_out++) {
        auto Af = rnd<float>(lda * ac), Bf = rnd<float>(ldb * bc), Cf = rnd<float>(ldc * n);
        std::vector<__half> A(Af.size()), B(Bf.size()), Ch(Cf.size());
        for (size_t i = 0; i < A.size(); i++) A[i] = __float2half(Af[i]), Af[i] = __half2float(A[i]);
        for (size_t i = 0; i < B.size(); i++) B[i] = __float2half(Bf[i]), Bf[i] = __half2float(B[i]);
        for (size_t i = 0; i < Ch.size(); i++) Ch[i] = __float2half(Cf[i]), Cf[i] = __half2float(Ch[i]);
        Dev<__half> dA(A), dB(B);
        auto want = Cf;
        ref_gemm(ta, tb, m, n, k, 1.0, Af, lda, Bf, ldb, 0.5, want, ldc);
        std::vector<float> got;
        cublasStatus_t s;
        if (half_out) {
          Dev<__half> dC(Ch);
          s = cublasGemmEx(H, ta, tb, m, n, k, sc.alpha(dev), dA.p, CUDA_R_16F, lda, dB.p, CUDA_R_16F, ldb,
                           sc.beta(dev), dC.p, CUDA_R_16F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
          for (auto h : dC.get()) got.push_back(__half2float(h));
        } else {
          Dev<float> dC(Cf);
          s = cublasGemmEx(H, ta, tb, m, n, k, sc.alpha(dev), dA.p, CUDA_R_16F, lda, dB.p, CUDA_R_16F, ldb,
                           sc.beta(dev), dC.p, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
          got = dC.get();
        }
        std::string why;
        report(s == CUBLAS_STATUS_SUCCESS && close(got, want, half_out ? 2e-3 : 1e-5, &why),
               std::string("GemmEx f16->") + (half_out ? "f16 " : "f32 ") + opname(ta) + opname(tb) +
                   (dev ? " devptr" : " hostptr"),
               why);
      }
    }
}

static void test_geam(bool dev) {
  const int m = 6, n = 4;
  Scalars<float> sc(2.0f, -1.0f);
  for (auto ta : kOps)
    for (auto tb : kOps) {
      const int lda = (ta == CUBLAS_OP_N ? m : n) + 1, ldb = (tb == CUBLAS_OP_N ? m : n) + 2, ldc = m + 1;
      const int acols = ta == CUBLAS_OP_N ? n : m, bcols = tb == CUBLAS_OP_N ? n : m;
      auto A = rnd<float>(lda * acols), B = rnd<float>(ldb * bcols), C = rnd<float>(ldc * n);
      Dev<float> dA(A), dB(B), dC(C);
      auto want = C;
      for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) want[j * ldc + i] = float(2.0 * at(A, lda, ta, i, j) - 1.0 * at(B, ldb, tb, i, j));
      cublasStatus_t s = cublasSgeam(H, ta, tb, m, n, sc.alpha(dev), dA.p, lda, sc.beta(dev), dB.p, ldb, dC.p, ldc);
      std::string why;
      report(s == CUBLAS_STATUS_SUCCESS && close(dC.get(), want, 1e-6, &why),
             std::string("Sgeam ") + opname(ta) + opname(tb) + (dev ? " devptr" : " hostptr"), why);
    }
  // In place, C = alpha*C + beta*B (C aliases A).
  {
    auto C = rnd<float>(m * n), B = rnd<float>(m * n);
    Dev<float> dC(C), dB(B);
    auto want = C;
    for (int i = 0; i < m * n; i++) want[i] = 2.0f * C[i] - B[i];
    cublasStatus_t s = cublasSgeam(H, CUBLAS_OP_N, CUBLAS_OP_N, m, n, sc.alpha(dev), dC.p, m, sc.beta(dev), dB.p, m,
                                   dC.p, m);
    std::string why;
    report(s == CUBLAS_STATUS_SUCCESS && close(dC.get(), want, 1e-6, &why),
           std::string("Sgeam in-place") + (dev ? " devptr" : " hostptr"), why);
  }
}

static void test_gemv(bool dev) {
  const int m = 9, n = 6;
  Scalars<float> sc(1.25f, -0.75f);
  for (auto t : kOps)
    for (int incx : {1, 2, -1})
      for (int incy : {1, 3}) {
        const int lda = m + 2, lx = t == CUBLAS_OP_N ? n : m, ly = t == CUBLAS_OP_N ? m : n;
        auto A = rnd<float>(lda * n), x = rnd<float>((lx - 1) * std::abs(incx) + 1),
             y = rnd<float>((ly - 1) * incy + 1);
        Dev<float> dA(A), dx(x), dy(y);
        auto want = y;
        for (int i = 0; i < ly; i++) {
          double s = 0;
          for (int j = 0; j < lx; j++) {
            // BLAS: a negative increment walks the vector from its far end.
            int xi = incx > 0 ? j * incx : (lx - 1 - j) * -incx;
            s += at(A, lda, t, i, j) * x[xi];
          }
          want[i * incy] = float(1.25 * s - 0.75 * y[i * incy]);
        }
        cublasStatus_t s = cublasSgemv(H, t, m, n, sc.alpha(dev), dA.p, lda, dx.p, incx, sc.beta(dev), dy.p, incy);
        std::string why;
        char nm[96];
        std::snprintf(nm, sizeof nm, "Sgemv %s incx=%d incy=%d %s", opname(t), incx, incy, dev ? "devptr" : "hostptr");
        report(s == CUBLAS_STATUS_SUCCESS && close(dy.get(), want, 1e-5, &why), nm, why);
      }
}

static void test_level1(bool dev) {
  const char* pm = dev ? " devptr" : " hostptr";
  const int n = 37;
  Scalars<float> sc(-2.5f, 0.f);
  for (int incx : {1, 2})
    for (int incy : {1, 3}) {
      char sfx[48];
      std::snprintf(sfx, sizeof sfx, " incx=%d incy=%d%s", incx, incy, pm);
      auto x = rnd<float>((n - 1) * incx + 1), y = rnd<float>((n - 1) * incy + 1);
      Dev<float> dx(x), dy(y);
      std::string why;
      // axpy
      auto want = y;
      for (int i = 0; i < n; i++) want[i * incy] = -2.5f * x[i * incx] + y[i * incy];
      cublasStatus_t s = cublasSaxpy(H, n, sc.alpha(dev), dx.p, incx, dy.p, incy);
      report(s == CUBLAS_STATUS_SUCCESS && close(dy.get(), want, 1e-6, &why), std::string("Saxpy") + sfx, why);
      // copy (over the axpy result)
      want = dy.get();
      for (int i = 0; i < n; i++) want[i * incy] = x[i * incx];
      s = cublasScopy(H, n, dx.p, incx, dy.p, incy);
      report(s == CUBLAS_STATUS_SUCCESS && close(dy.get(), want, 0, &why), std::string("Scopy") + sfx, why);
      // dot of x and the fresh copy
      dy.put(y);
      double d = 0;
      for (int i = 0; i < n; i++) d += double(x[i * incx]) * y[i * incy];
      float r = -1;
      Dev<float> dr(1);
      if (dev) {
        s = cublasSdot(H, n, dx.p, incx, dy.p, incy, dr.p);
        r = dr.get()[0];
      } else {
        s = cublasSdot(H, n, dx.p, incx, dy.p, incy, &r);
      }
      report(s == CUBLAS_STATUS_SUCCESS && std::fabs(r - d) <= 1e-5 * (1 + std::fabs(d)), std::string("Sdot") + sfx,
             "got " + std::to_string(r) + " want " + std::to_string(d));
      if (incy != 1) continue;
      // scal, nrm2, asum, iamax (on x)
      auto xs = x;
      for (int i = 0; i < n; i++) xs[i * incx] *= -2.5f;
      s = cublasSscal(H, n, sc.alpha(dev), dx.p, incx);
      report(s == CUBLAS_STATUS_SUCCESS && close(dx.get(), xs, 1e-6, &why), std::string("Sscal") + sfx, why);
      double nr = 0, as = 0, best = -1;
      int bi = 0;
      for (int i = 0; i < n; i++) {
        double v = xs[i * incx];
        nr += v * v;
        as += std::fabs(v);
        if (std::fabs(v) > best) best = std::fabs(v), bi = i + 1;
      }
      nr = std::sqrt(nr);
      float rn = -1, ra = -1;
      int ri = -1;
      if (dev) {
        Dev<int> di(1);
        s = cublasSnrm2(H, n, dx.p, incx, dr.p);
        rn = dr.get()[0];
        cublasStatus_t s2 = cublasSasum(H, n, dx.p, incx, dr.p);
        ra = dr.get()[0];
        cublasStatus_t s3 = cublasIsamax(H, n, dx.p, incx, di.p);
        ri = di.get()[0];
        if (s == CUBLAS_STATUS_SUCCESS) s = s2;
        if (s == CUBLAS_STATUS_SUCCESS) s = s3;
      } else {
        s = cublasSnrm2(H, n, dx.p, incx, &rn);
        if (s == CUBLAS_STATUS_SUCCESS) s = cublasSasum(H, n, dx.p, incx, &ra);
        if (s == CUBLAS_STATUS_SUCCESS) s = cublasIsamax(H, n, dx.p, incx, &ri);
      }
      report(s == CUBLAS_STATUS_SUCCESS && std::fabs(rn - nr) <= 1e-5 * (1 + nr), std::string("Snrm2") + sfx,
             "got " + std::to_string(rn) + " want " + std::to_string(nr));
      report(s == CUBLAS_STATUS_SUCCESS && std::fabs(ra - as) <= 1e-5 * (1 + as), std::string("Sasum") + sfx,
             "got " + std::to_string(ra) + " want " + std::to_string(as));
      report(s == CUBLAS_STATUS_SUCCESS && ri == bi, std::string("Isamax") + sfx,
             "got " + std::to_string(ri) + " want " + std::to_string(bi));
    }
  // Negative increments walk from the far end (axpy and dot).
  {
    auto x = rnd<float>(n), y = rnd<float>(n);
    Dev<float> dx(x), dy(y);
    auto want = y;
    for (int i = 0; i < n; i++) want[i] += 0.5f * x[n - 1 - i];
    Scalars<float> h(0.5f, 0.f);
    cublasStatus_t s = cublasSaxpy(H, n, h.alpha(dev), dx.p, -1, dy.p, 1);
    std::string why;
    report(s == CUBLAS_STATUS_SUCCESS && close(dy.get(), want, 1e-6, &why), std::string("Saxpy incx=-1") + pm, why);
  }
}

static void test_data_movement() {
  // SetMatrix/GetMatrix with padded leading dimensions on both sides.
  const int rows = 13, cols = 7, lda = 16, ldb = 15;
  auto A = rnd<float>(lda * cols);
  Dev<float> dB(size_t(ldb) * cols);
  CK(cudaMemset(dB.p, 0, ldb * cols * sizeof(float)));
  cublasStatus_t s = cublasSetMatrix(rows, cols, sizeof(float), A.data(), lda, dB.p, ldb);
  auto got = dB.get();
  std::vector<float> want(ldb * cols, 0.f);
  for (int j = 0; j < cols; j++)
    for (int i = 0; i < rows; i++) want[j * ldb + i] = A[j * lda + i];
  std::string why;
  report(s == CUBLAS_STATUS_SUCCESS && close(got, want, 0, &why), "SetMatrix padded", why);
  std::vector<float> back(lda * cols, -7.f), wb(lda * cols, -7.f);
  for (int j = 0; j < cols; j++)
    for (int i = 0; i < rows; i++) wb[j * lda + i] = A[j * lda + i];
  s = cublasGetMatrix(rows, cols, sizeof(float), dB.p, ldb, back.data(), lda);
  report(s == CUBLAS_STATUS_SUCCESS && close(back, wb, 0, &why), "GetMatrix padded", why);
  // dense
  auto D = rnd<float>(rows * cols);
  Dev<float> dD(size_t(rows) * cols);
  s = cublasSetMatrix(rows, cols, sizeof(float), D.data(), rows, dD.p, rows);
  std::vector<float> Db(rows * cols);
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasGetMatrix(rows, cols, sizeof(float), dD.p, rows, Db.data(), rows);
  report(s == CUBLAS_STATUS_SUCCESS && close(Db, D, 0, &why), "Set/GetMatrix dense", why);
  // vectors with increments
  const int n = 11;
  auto x = rnd<float>(n * 2);
  Dev<float> dy(n * 3);
  CK(cudaMemset(dy.p, 0, n * 3 * sizeof(float)));
  s = cublasSetVector(n, sizeof(float), x.data(), 2, dy.p, 3);
  std::vector<float> wy(n * 3, 0.f);
  for (int i = 0; i < n; i++) wy[i * 3] = x[i * 2];
  report(s == CUBLAS_STATUS_SUCCESS && close(dy.get(), wy, 0, &why), "SetVector inc", why);
  std::vector<float> gx(n), wx(n);
  for (int i = 0; i < n; i++) wx[i] = x[i * 2];
  s = cublasGetVector(n, sizeof(float), dy.p, 3, gx.data(), 1);
  report(s == CUBLAS_STATUS_SUCCESS && close(gx, wx, 0, &why), "GetVector inc", why);
  // double elements through the same calls
  std::vector<double> xd = rnd<double>(n), gd(n);
  Dev<double> dd(n);
  s = cublasSetVector(n, sizeof(double), xd.data(), 1, dd.p, 1);
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasGetVector(n, sizeof(double), dd.p, 1, gd.data(), 1);
  report(s == CUBLAS_STATUS_SUCCESS && close(gd, xd, 0, &why), "Set/GetVector f64", why);
  report(cublasSetMatrix(4, 4, 4, A.data(), 3, dB.p, 4) == CUBLAS_STATUS_INVALID_VALUE, "SetMatrix lda<rows refused");
  report(cublasSetVector(4, 4, x.data(), 0, dy.p, 1) == CUBLAS_STATUS_INVALID_VALUE, "SetVector incx=0 refused");
}

static void test_handle_and_modes() {
  int v = 0;
  report(cublasGetVersion(H, &v) == CUBLAS_STATUS_SUCCESS && v >= 130000, "GetVersion",
         "version " + std::to_string(v));
  cudaStream_t st, got = nullptr;
  CK(cudaStreamCreate(&st));
  report(cublasSetStream(H, st) == CUBLAS_STATUS_SUCCESS && cublasGetStream(H, &got) == CUBLAS_STATUS_SUCCESS &&
             got == st,
         "Set/GetStream");
  // Work on the stream, ordered after an async copy on that stream.
  const int n = 64;
  auto x = rnd<float>(n);
  Dev<float> dx(n), dy(n);
  CK(cudaMemsetAsync(dy.p, 0, n * sizeof(float), st));
  CK(cudaMemcpyAsync(dx.p, x.data(), n * sizeof(float), cudaMemcpyHostToDevice, st));
  float a = 3.f;
  cublasStatus_t s = cublasSaxpy(H, n, &a, dx.p, 1, dy.p, 1);
  std::vector<float> y(n), want(n);
  CK(cudaMemcpyAsync(y.data(), dy.p, n * sizeof(float), cudaMemcpyDeviceToHost, st));
  CK(cudaStreamSynchronize(st));
  for (int i = 0; i < n; i++) want[i] = 3.f * x[i];
  std::string why;
  report(s == CUBLAS_STATUS_SUCCESS && close(y, want, 1e-6, &why), "Saxpy on a stream", why);
  cublasSetStream(H, nullptr);
  CK(cudaStreamDestroy(st));

  cublasPointerMode_t pm;
  report(cublasSetPointerMode(H, CUBLAS_POINTER_MODE_DEVICE) == CUBLAS_STATUS_SUCCESS &&
             cublasGetPointerMode(H, &pm) == CUBLAS_STATUS_SUCCESS && pm == CUBLAS_POINTER_MODE_DEVICE,
         "Set/GetPointerMode device");
  report(cublasSetPointerMode(H, CUBLAS_POINTER_MODE_HOST) == CUBLAS_STATUS_SUCCESS &&
             cublasGetPointerMode(H, &pm) == CUBLAS_STATUS_SUCCESS && pm == CUBLAS_POINTER_MODE_HOST,
         "Set/GetPointerMode host");
  cublasMath_t mm;
  report(cublasSetMathMode(H, CUBLAS_TF32_TENSOR_OP_MATH) == CUBLAS_STATUS_SUCCESS &&
             cublasGetMathMode(H, &mm) == CUBLAS_STATUS_SUCCESS && mm == CUBLAS_TF32_TENSOR_OP_MATH,
         "Set/GetMathMode");
  // A gemm in pedantic math mode still gives the reference answer.
  cublasSetMathMode(H, CUBLAS_PEDANTIC_MATH);
  {
    auto A = rnd<float>(9), B = rnd<float>(9), C = rnd<float>(9);
    Dev<float> dA(A), dB(B), dC(C);
    auto want2 = C;
    ref_gemm(CUBLAS_OP_N, CUBLAS_OP_N, 3, 3, 3, 1.0, A, 3, B, 3, 0.0, want2, 3);
    float one = 1.f, zero = 0.f;
    s = cublasSgemm(H, CUBLAS_OP_N, CUBLAS_OP_N, 3, 3, 3, &one, dA.p, 3, dB.p, 3, &zero, dC.p, 3);
    report(s == CUBLAS_STATUS_SUCCESS && close(dC.get(), want2, 1e-6, &why), "Sgemm pedantic math", why);
  }
  cublasSetMathMode(H, CUBLAS_DEFAULT_MATH);

  // Argument errors refused synchronously, as cuBLAS does.
  float one = 1.f;
  Dev<float> d(64);
  report(cublasSgemm(H, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one, d.p, 3, d.p, 4, &one, d.p, 4) ==
             CUBLAS_STATUS_INVALID_VALUE,
         "Sgemm lda<m refused");
  report(cublasSgemm(H, CUBLAS_OP_N, CUBLAS_OP_N, -1, 4, 4, &one, d.p, 4, d.p, 4, &one, d.p, 4) ==
             CUBLAS_STATUS_INVALID_VALUE,
         "Sgemm m<0 refused");
  report(cublasSgemv(H, CUBLAS_OP_N, 4, 4, &one, d.p, 4, d.p, 0, &one, d.p, 1) == CUBLAS_STATUS_INVALID_VALUE,
         "Sgemv incx=0 refused");
  report(cublasSetPointerMode(H, cublasPointerMode_t(7)) == CUBLAS_STATUS_INVALID_VALUE, "bad pointer mode refused");
  // An unforwarded function answers NOT_SUPPORTED (forwarded) or works (native).
  cublasStatus_t ts = cublasStrsm(H, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, CUBLAS_DIAG_UNIT, 2, 2,
                                  &one, d.p, 2, d.p + 8, 2);
  report(ts == CUBLAS_STATUS_NOT_SUPPORTED || ts == CUBLAS_STATUS_SUCCESS, "Strsm: NOT_SUPPORTED or real",
         cublasGetStatusName(ts));
  // The legacy API returns results by value, not a status. An unforwarded
  // legacy function reads 0 (float, double and complex results alike) and
  // reports through cublasGetError; natively, on zeros, the result is 0 too.
  CK(cudaMemset(d.p, 0, 64 * sizeof(float)));
  const float ldot = wh_legacy_sdot(8, d.p, 1, d.p, 1);
  report(ldot == 0.f, "legacy cublasSdot reads 0", std::to_string(ldot));
  const auto* z = reinterpret_cast<const cuDoubleComplex*>(d.p);
  const cuDoubleComplex lz = wh_legacy_zdotc(4, z, 1, z, 1);
  report(lz.x == 0. && lz.y == 0., "legacy cublasZdotc reads 0", std::to_string(lz.x) + "," + std::to_string(lz.y));
  CK(cudaDeviceSynchronize());
  // Several handles at once.
  cublasHandle_t h2;
  report(cublasCreate(&h2) == CUBLAS_STATUS_SUCCESS && cublasDestroy(h2) == CUBLAS_STATUS_SUCCESS,
         "second handle create/destroy");
}

int main(int argc, char** argv) {
  for (int i = 1; i < argc; i++)
    if (!std::strcmp(argv[i], "-v")) g_verbose = true;
  if (cublasCreate(&H) != CUBLAS_STATUS_SUCCESS) {
    std::printf("FATAL cublasCreate failed\n");
    return 2;
  }
  for (bool dev : {false, true}) {
    cublasSetPointerMode(H, dev ? CUBLAS_POINTER_MODE_DEVICE : CUBLAS_POINTER_MODE_HOST);
    test_gemm<float>(dev);
    test_gemm<double>(dev);
    test_strided(dev);
    test_batched(dev);
    test_gemm_ex(dev);
    test_geam(dev);
    test_gemv(dev);
    test_level1(dev);
  }
  cublasSetPointerMode(H, CUBLAS_POINTER_MODE_HOST);
  test_data_movement();
  test_handle_and_modes();
  cudaError_t e = cudaDeviceSynchronize();
  report(e == cudaSuccess, "no deferred device error", cudaGetErrorString(e));
  report(cublasDestroy(H) == CUBLAS_STATUS_SUCCESS, "Destroy");
  std::printf("%s: %d passed, %d failed\n", g_fail ? "FAILED" : "OK", g_pass, g_fail);
  return g_fail ? 1 : 0;
}
