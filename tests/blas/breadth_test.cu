// cuBLAS breadth through Wormhole: levels 1-3 in S, D, C and Z, batched and
// strided-batched gemm, trsmBatched, the batched LU family (an LU solve of
// many small systems, inverses), batched QR (geqrfBatched), the GemmEx
// family with fp16/bf16 inputs, host and device pointer modes, per-thread
// handles and streams. Every result is checked against a host reference
// written as loops in complex<double> here (not a BLAS library).
// Built with `nvcc -cudart shared -lcublas` like a user's program.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "wh_check.cuh"

using Cd = std::complex<double>;
static int g_fail = 0, g_pass = 0;

// Non-fatal: a failing cuBLAS call counts in g_fail and ends the test function.
#define CB(x) WH_CHECK_OR_RETURN(x, CUBLAS_STATUS_SUCCESS, cublasGetStatusName(r_), g_fail)
// The cuBLAS entry point of the element type T (S, D, C, Z).
#define PICK(T, S, D, C, Z, ...)                                 \
  [&]() {                                                        \
    if constexpr (std::is_same_v<T, float>)                      \
      return S(__VA_ARGS__);                                     \
    else if constexpr (std::is_same_v<T, double>)                \
      return D(__VA_ARGS__);                                     \
    else if constexpr (std::is_same_v<T, cuComplex>)             \
      return C(__VA_ARGS__);                                     \
    else                                                         \
      return Z(__VA_ARGS__);                                     \
  }()

template <class T>
constexpr bool kCx = std::is_same_v<T, cuComplex> || std::is_same_v<T, cuDoubleComplex>;
template <class T>
constexpr bool kSingle = std::is_same_v<T, float> || std::is_same_v<T, cuComplex>;
template <class T>
const char* tname() {
  return std::is_same_v<T, float> ? "S" : std::is_same_v<T, double> ? "D" : std::is_same_v<T, cuComplex> ? "C" : "Z";
}
template <class T>
Cd toC(T v) {
  if constexpr (kCx<T>) return Cd(v.x, v.y);
  else return Cd(double(v), 0);
}
template <class T>
T fromC(Cd c) {
  if constexpr (std::is_same_v<T, cuComplex>) return make_cuComplex(float(c.real()), float(c.imag()));
  else if constexpr (std::is_same_v<T, cuDoubleComplex>) return make_cuDoubleComplex(c.real(), c.imag());
  else return T(c.real());
}
// conj for complex element types only (real types have no imaginary part).
template <class T>
Cd cj(Cd v) {
  return kCx<T> ? std::conj(v) : v;
}
template <class T>
double tol() {
  return kSingle<T> ? 2e-4 : 1e-11;
}

static uint32_t g_seed = 4242;
static double drand() {  // deterministic, in [-1, 1)
  g_seed = g_seed * 1664525u + 1013904223u;
  return double((g_seed >> 8) & 0xFFFF) / 32768.0 - 1.0;
}
template <class T>
std::vector<Cd> rnd(size_t n) {  // values T can hold exactly
  std::vector<Cd> v(n);
  for (auto& x : v) x = toC(fromC<T>(Cd(drand(), kCx<T> ? drand() : 0)));
  return v;
}
template <class T>
std::vector<T> toT(const std::vector<Cd>& v) {
  std::vector<T> o(v.size());
  for (size_t i = 0; i < v.size(); i++) o[i] = fromC<T>(v[i]);
  return o;
}

template <class T>
struct Dev {
  T* p = nullptr;
  size_t n = 0;
  explicit Dev(size_t n_) : n(n_) { CK(cudaMalloc(&p, (n ? n : 1) * sizeof(T))); }
  explicit Dev(const std::vector<Cd>& h) : Dev(h.size()) { put(h); }
  ~Dev() { cudaFree(p); }
  void put(const std::vector<Cd>& h) {
    auto t = toT<T>(h);
    CK(cudaMemcpy(p, t.data(), t.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<Cd> get() const {
    std::vector<T> h(n);
    CK(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
    std::vector<Cd> o(n);
    for (size_t i = 0; i < n; i++) o[i] = toC(h[i]);
    return o;
  }
};

static void check(const std::string& name, const std::vector<Cd>& got, const std::vector<Cd>& want, double tl) {
  double err = 0, mag = 0;
  for (size_t i = 0; i < want.size(); i++) {
    err = std::max(err, std::abs(got[i] - want[i]));
    mag = std::max(mag, std::abs(want[i]));
  }
  bool ok = got.size() == want.size() && err <= tl * (1 + mag);
  // A result equal to its input would hide a call that did nothing: every
  // check below changes its output.
  if (ok) g_pass++;
  else {
    g_fail++;
    std::printf("FAIL %s: max error %g (scale %g)\n", name.c_str(), err, mag);
  }
}
static void check1(const std::string& name, Cd got, Cd want, double tl) {
  check(name, {got}, {want}, tl);
}
// op(A)(i, j) of a column-major matrix.
template <class T>
Cd opA(const std::vector<Cd>& a, int ld, cublasOperation_t t, int i, int j) {
  if (t == CUBLAS_OP_N) return a[i + size_t(j) * ld];
  return t == CUBLAS_OP_T ? a[j + size_t(i) * ld] : cj<T>(a[j + size_t(i) * ld]);
}

// ------------------------------------------------------------------ level 1
template <class T>
void level1(cublasHandle_t h) {
  using RT = std::conditional_t<kSingle<T>, float, double>;
  const std::string p = tname<T>();
  const int n = 37, incx = 2, incy = -3;  // a negative increment walks backwards
  const int lx = 1 + (n - 1) * 2, ly = 1 + (n - 1) * 3;
  auto hx = rnd<T>(lx), hy = rnd<T>(ly);
  auto xi = [&](int i) { return size_t(i) * incx; };
  auto yi = [&](int i) { return size_t(n - 1 - i) * 3; };
  const Cd al = toC(fromC<T>(Cd(0.75, kCx<T> ? -0.5 : 0)));
  const T alT = fromC<T>(al);
  {  // axpy
    Dev<T> x(hx), y(hy);
    CB(PICK(T, cublasSaxpy, cublasDaxpy, cublasCaxpy, cublasZaxpy, h, n, &alT, x.p, incx, y.p, incy));
    auto want = hy;
    for (int i = 0; i < n; i++) want[yi(i)] += al * hx[xi(i)];
    check(p + "axpy", y.get(), want, tol<T>());
  }
  {  // scal, and the real-scalar forms
    Dev<T> x(hx);
    CB(PICK(T, cublasSscal, cublasDscal, cublasCscal, cublasZscal, h, n, &alT, x.p, incx));
    auto want = hx;
    for (int i = 0; i < n; i++) want[xi(i)] *= al;
    check(p + "scal", x.get(), want, tol<T>());
    if constexpr (kCx<T>) {
      const RT r = RT(-1.5);
      Dev<T> x2(hx);
      CB(PICK(T, cublasSscal, cublasDscal, cublasCsscal, cublasZdscal, h, n, &r, x2.p, incx));
      auto w2 = hx;
      for (int i = 0; i < n; i++) w2[xi(i)] *= double(r);
      check(p + "scal(real)", x2.get(), w2, tol<T>());
    }
  }
  {  // copy, swap
    Dev<T> x(hx), y(hy);
    CB(PICK(T, cublasScopy, cublasDcopy, cublasCcopy, cublasZcopy, h, n, x.p, incx, y.p, incy));
    auto want = hy;
    for (int i = 0; i < n; i++) want[yi(i)] = hx[xi(i)];
    check(p + "copy", y.get(), want, 0);
    Dev<T> x2(hx), y2(hy);
    CB(PICK(T, cublasSswap, cublasDswap, cublasCswap, cublasZswap, h, n, x2.p, incx, y2.p, incy));
    auto wx = hx, wy = hy;
    for (int i = 0; i < n; i++) std::swap(wx[xi(i)], wy[yi(i)]);
    check(p + "swap.x", x2.get(), wx, 0);
    check(p + "swap.y", y2.get(), wy, 0);
  }
  {  // dot (dotu, dotc), nrm2, asum, iamax, iamin
    Dev<T> x(hx), y(hy);
    T r{};
    Cd wu = 0, wc = 0;
    double n2 = 0, as = 0;
    for (int i = 0; i < n; i++) {
      wu += hx[xi(i)] * hy[yi(i)];
      wc += std::conj(hx[xi(i)]) * hy[yi(i)];
    }
    CB(PICK(T, cublasSdot, cublasDdot, cublasCdotu, cublasZdotu, h, n, x.p, incx, y.p, incy, &r));
    check1(p + "dot", toC(r), wu, tol<T>() * n);
    if constexpr (kCx<T>) {
      CB(PICK(T, cublasSdot, cublasDdot, cublasCdotc, cublasZdotc, h, n, x.p, incx, y.p, incy, &r));
      check1(p + "dotc", toC(r), wc, tol<T>() * n);
    }
    int imax = 0, imin = 0;
    double vmax = -1, vmin = 1e300;
    for (int i = 0; i < n; i++) {
      Cd v = hx[xi(i)];
      n2 += std::norm(v);
      double m = std::fabs(v.real()) + std::fabs(v.imag());
      as += m;
      if (m > vmax) vmax = m, imax = i + 1;
      if (m < vmin) vmin = m, imin = i + 1;
    }
    RT rr = 0;
    CB(PICK(T, cublasSnrm2, cublasDnrm2, cublasScnrm2, cublasDznrm2, h, n, x.p, incx, &rr));
    check1(p + "nrm2", double(rr), std::sqrt(n2), tol<T>());
    CB(PICK(T, cublasSasum, cublasDasum, cublasScasum, cublasDzasum, h, n, x.p, incx, &rr));
    check1(p + "asum", double(rr), as, tol<T>() * n);
    int ia = 0;
    CB(PICK(T, cublasIsamax, cublasIdamax, cublasIcamax, cublasIzamax, h, n, x.p, incx, &ia));
    check1(p + "iamax", ia, imax, 0);
    CB(PICK(T, cublasIsamin, cublasIdamin, cublasIcamin, cublasIzamin, h, n, x.p, incx, &ia));
    check1(p + "iamin", ia, imin, 0);
  }
  {  // rot (complex s for C/Z), rotg
    Dev<T> x(hx), y(hy);
    const RT c = RT(0.6);
    const Cd s = toC(fromC<T>(Cd(0.8, kCx<T> ? 0.25 : 0)));
    const T sT = fromC<T>(s);
    CB(PICK(T, cublasSrot, cublasDrot, cublasCrot, cublasZrot, h, n, x.p, incx, y.p, incy, &c, &sT));
    auto wx = hx, wy = hy;
    for (int i = 0; i < n; i++) {
      Cd a = hx[xi(i)], b = hy[yi(i)];
      wx[xi(i)] = double(c) * a + s * b;
      wy[yi(i)] = double(c) * b - std::conj(s) * a;
    }
    check(p + "rot.x", x.get(), wx, tol<T>());
    check(p + "rot.y", y.get(), wy, tol<T>());
    T a = fromC<T>(Cd(3, kCx<T> ? 1 : 0)), b = fromC<T>(Cd(4, kCx<T> ? -2 : 0)), sg{};
    RT cg = 0;
    const Cd a0 = toC(a), b0 = toC(b);
    CB(PICK(T, cublasSrotg, cublasDrotg, cublasCrotg, cublasZrotg, h, &a, &b, &cg, &sg));
    // [c s; -conj(s) c] [a; b] = [r; 0]
    check1(p + "rotg.r", double(cg) * a0 + toC(sg) * b0, toC(a), tol<T>());
    check1(p + "rotg.0", -std::conj(toC(sg)) * a0 + double(cg) * b0, 0, tol<T>());
  }
  if constexpr (!kCx<T>) {  // rotm with a full H
    Dev<T> x(hx), y(hy);
    const T param[5] = {T(-1), T(0.5), T(-0.25), T(1.5), T(2)};
    CB(PICK(T, cublasSrotm, cublasDrotm, cublasSrotm, cublasDrotm, h, n, x.p, incx, y.p, incy, param));
    auto wx = hx, wy = hy;
    for (int i = 0; i < n; i++) {
      Cd a = hx[xi(i)], b = hy[yi(i)];
      wx[xi(i)] = 0.5 * a + 1.5 * b;
      wy[yi(i)] = -0.25 * a + 2.0 * b;
    }
    check(p + "rotm.x", x.get(), wx, tol<T>());
    check(p + "rotm.y", y.get(), wy, tol<T>());
  }
}

// ------------------------------------------------------------------ level 2
// The logical n x n matrix of a symmetric (herm: Hermitian) matrix stored
// in the `upper` triangle of a.
template <class T>
std::vector<Cd> sym_full(const std::vector<Cd>& a, int n, int ld, bool upper, bool herm) {
  std::vector<Cd> f(size_t(n) * n);
  for (int j = 0; j < n; j++)
    for (int i = 0; i < n; i++) {
      bool stored = upper ? i <= j : i >= j;
      Cd v = stored ? a[i + size_t(j) * ld] : a[j + size_t(i) * ld];
      if (!stored && herm) v = std::conj(v);
      if (i == j && herm) v = v.real();
      f[i + size_t(j) * n] = v;
    }
  return f;
}
// A triangular matrix (unit: unit diagonal) as a full one.
std::vector<Cd> tri_full(const std::vector<Cd>& a, int n, int ld, bool upper, bool unit) {
  std::vector<Cd> f(size_t(n) * n);
  for (int j = 0; j < n; j++)
    for (int i = 0; i < n; i++) {
      bool stored = upper ? i <= j : i >= j;
      f[i + size_t(j) * n] = i == j && unit ? Cd(1) : stored ? a[i + size_t(j) * ld] : Cd(0);
    }
  return f;
}
template <class T>
std::vector<Cd> matvec(const std::vector<Cd>& f, int m, int n, cublasOperation_t t, const std::vector<Cd>& x) {
  const int rows = t == CUBLAS_OP_N ? m : n, cols = t == CUBLAS_OP_N ? n : m;
  std::vector<Cd> y(rows);
  for (int i = 0; i < rows; i++)
    for (int j = 0; j < cols; j++) y[i] += opA<T>(f, m, t, i, j) * x[j];
  return y;
}
// A well-conditioned triangle: a strong diagonal.
template <class T>
std::vector<Cd> tri_rand(int n, int ld) {
  auto a = rnd<T>(size_t(ld) * n);
  for (int i = 0; i < n; i++) a[i + size_t(i) * ld] = toC(fromC<T>(Cd(n + 1.0 + i, 0)));
  return a;
}

template <class T>
void level2(cublasHandle_t h) {
  const std::string p = tname<T>();
  const int m = 13, n = 9, lda = 16;
  const Cd al = toC(fromC<T>(Cd(1.25, kCx<T> ? 0.5 : 0))), be = toC(fromC<T>(Cd(-0.5, kCx<T> ? 0.25 : 0)));
  const T alT = fromC<T>(al), beT = fromC<T>(be);
  auto A = rnd<T>(size_t(lda) * n);
  for (cublasOperation_t t : {CUBLAS_OP_N, CUBLAS_OP_T, CUBLAS_OP_C}) {  // gemv
    const int lx = t == CUBLAS_OP_N ? n : m, ly = t == CUBLAS_OP_N ? m : n;
    auto x = rnd<T>(lx), y = rnd<T>(ly);
    Dev<T> dA(A), dx(x), dy(y);
    CB(PICK(T, cublasSgemv, cublasDgemv, cublasCgemv, cublasZgemv, h, t, m, n, &alT, dA.p, lda, dx.p, 1, &beT, dy.p, 1));
    std::vector<Cd> want(ly);
    for (int i = 0; i < ly; i++) {
      Cd s = 0;
      for (int j = 0; j < lx; j++) s += opA<T>(A, lda, t, i, j) * x[j];
      want[i] = al * s + be * y[i];
    }
    check(p + "gemv." + std::to_string(t), dy.get(), want, tol<T>() * 4);
  }
  {  // gbmv: kl = 2, ku = 1 band of an m x n matrix
    const int kl = 2, ku = 1, ldb = kl + ku + 1;
    auto Ab = rnd<T>(size_t(ldb) * n);
    auto x = rnd<T>(n), y = rnd<T>(m);
    Dev<T> dA(Ab), dx(x), dy(y);
    CB(PICK(T, cublasSgbmv, cublasDgbmv, cublasCgbmv, cublasZgbmv, h, CUBLAS_OP_N, m, n, kl, ku, &alT, dA.p, ldb, dx.p,
            1, &beT, dy.p, 1));
    std::vector<Cd> full(size_t(m) * n);
    for (int j = 0; j < n; j++)
      for (int i = std::max(0, j - ku); i <= std::min(m - 1, j + kl); i++) full[i + size_t(j) * m] = Ab[ku + i - j + size_t(j) * ldb];
    auto t = matvec<T>(full, m, n, CUBLAS_OP_N, x);
    std::vector<Cd> want(m);
    for (int i = 0; i < m; i++) want[i] = al * t[i] + be * y[i];
    check(p + "gbmv", dy.get(), want, tol<T>() * 4);
  }
  {  // ger (geru) and gerc
    auto x = rnd<T>(m), y = rnd<T>(n);
    Dev<T> dA(A), dx(x), dy(y);
    CB(PICK(T, cublasSger, cublasDger, cublasCgeru, cublasZgeru, h, m, n, &alT, dx.p, 1, dy.p, 1, dA.p, lda));
    auto want = A;
    for (int j = 0; j < n; j++)
      for (int i = 0; i < m; i++) want[i + size_t(j) * lda] += al * x[i] * y[j];
    check(p + "ger", dA.get(), want, tol<T>());
    if constexpr (kCx<T>) {
      Dev<T> dA2(A);
      CB(PICK(T, cublasSger, cublasDger, cublasCgerc, cublasZgerc, h, m, n, &alT, dx.p, 1, dy.p, 1, dA2.p, lda));
      auto w2 = A;
      for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) w2[i + size_t(j) * lda] += al * x[i] * std::conj(y[j]);
      check(p + "gerc", dA2.get(), w2, tol<T>());
    }
  }
  for (bool upper : {false, true}) {  // symv (and hemv), syr (and her), syr2 (and her2)
    const cublasFillMode_t u = upper ? CUBLAS_FILL_MODE_UPPER : CUBLAS_FILL_MODE_LOWER;
    const std::string us = upper ? ".U" : ".L";
    auto x = rnd<T>(n), y = rnd<T>(n);
    {
      Dev<T> dA(A), dx(x), dy(y);
      CB(PICK(T, cublasSsymv, cublasDsymv, cublasCsymv, cublasZsymv, h, u, n, &alT, dA.p, lda, dx.p, 1, &beT, dy.p, 1));
      auto t = matvec<T>(sym_full<T>(A, n, lda, upper, false), n, n, CUBLAS_OP_N, x);
      std::vector<Cd> want(n);
      for (int i = 0; i < n; i++) want[i] = al * t[i] + be * y[i];
      check(p + "symv" + us, dy.get(), want, tol<T>() * 4);
    }
    if constexpr (kCx<T>) {
      Dev<T> dA(A), dx(x), dy(y);
      CB(PICK(T, cublasSsymv, cublasDsymv, cublasChemv, cublasZhemv, h, u, n, &alT, dA.p, lda, dx.p, 1, &beT, dy.p, 1));
      auto t = matvec<T>(sym_full<T>(A, n, lda, upper, true), n, n, CUBLAS_OP_N, x);
      std::vector<Cd> want(n);
      for (int i = 0; i < n; i++) want[i] = al * t[i] + be * y[i];
      check(p + "hemv" + us, dy.get(), want, tol<T>() * 4);
      using RT = std::conditional_t<kSingle<T>, float, double>;
      const RT ar = RT(0.75);
      Dev<T> dH(A);
      CB(PICK(T, cublasSsyr, cublasDsyr, cublasCher, cublasZher, h, u, n, &ar, dx.p, 1, dH.p, lda));
      auto w = A;
      for (int j = 0; j < n; j++)
        for (int i = 0; i < n; i++)
          if (upper ? i <= j : i >= j) {
            w[i + size_t(j) * lda] += double(ar) * x[i] * std::conj(x[j]);
            if (i == j) w[i + size_t(j) * lda] = w[i + size_t(j) * lda].real();
          }
      check(p + "her" + us, dH.get(), w, tol<T>());
      Dev<T> dH2(A), dy2(y);  // dy holds hemv's result
      CB(PICK(T, cublasSsyr2, cublasDsyr2, cublasCher2, cublasZher2, h, u, n, &alT, dx.p, 1, dy2.p, 1, dH2.p, lda));
      auto w2 = A;
      for (int j = 0; j < n; j++)
        for (int i = 0; i < n; i++)
          if (upper ? i <= j : i >= j) {
            w2[i + size_t(j) * lda] += al * x[i] * std::conj(y[j]) + std::conj(al) * y[i] * std::conj(x[j]);
            if (i == j) w2[i + size_t(j) * lda] = w2[i + size_t(j) * lda].real();
          }
      check(p + "her2" + us, dH2.get(), w2, tol<T>());
    }
    {
      Dev<T> dA(A), dx(x), dy(y);
      CB(PICK(T, cublasSsyr, cublasDsyr, cublasCsyr, cublasZsyr, h, u, n, &alT, dx.p, 1, dA.p, lda));
      auto w = A;
      for (int j = 0; j < n; j++)
        for (int i = 0; i < n; i++)
          if (upper ? i <= j : i >= j) w[i + size_t(j) * lda] += al * x[i] * x[j];
      check(p + "syr" + us, dA.get(), w, tol<T>());
      Dev<T> dA2(A);
      CB(PICK(T, cublasSsyr2, cublasDsyr2, cublasCsyr2, cublasZsyr2, h, u, n, &alT, dx.p, 1, dy.p, 1, dA2.p, lda));
      auto w2 = A;
      for (int j = 0; j < n; j++)
        for (int i = 0; i < n; i++)
          if (upper ? i <= j : i >= j) w2[i + size_t(j) * lda] += al * (x[i] * y[j] + y[i] * x[j]);
      check(p + "syr2" + us, dA2.get(), w2, tol<T>());
    }
    for (cublasOperation_t t : {CUBLAS_OP_N, CUBLAS_OP_T, CUBLAS_OP_C})
      for (cublasDiagType_t d : {CUBLAS_DIAG_NON_UNIT, CUBLAS_DIAG_UNIT}) {  // trmv, trsv, tbsv, tpsv
        const std::string tag = us + "." + std::to_string(t) + "." + std::to_string(d);
        auto Tm = tri_rand<T>(n, lda);
        auto full = tri_full(Tm, n, lda, upper, d == CUBLAS_DIAG_UNIT);
        Dev<T> dT(Tm), dx(x);
        CB(PICK(T, cublasStrmv, cublasDtrmv, cublasCtrmv, cublasZtrmv, h, u, t, d, n, dT.p, lda, dx.p, 1));
        check(p + "trmv" + tag, dx.get(), matvec<T>(full, n, n, t, x), tol<T>() * 8);
        // trsv: solve op(A) z = b with b = op(A) x, so z must come back as x.
        auto b = matvec<T>(full, n, n, t, x);
        Dev<T> db(b);
        CB(PICK(T, cublasStrsv, cublasDtrsv, cublasCtrsv, cublasZtrsv, h, u, t, d, n, dT.p, lda, db.p, 1));
        check(p + "trsv" + tag, db.get(), x, tol<T>() * 8);
        // tbsv with band k = 2: the band of the same triangle.
        const int k = 2, ldb = k + 1;
        std::vector<Cd> band(size_t(ldb) * n), bfull(size_t(n) * n);
        for (int j = 0; j < n; j++)
          for (int i = 0; i < n; i++) {
            const bool in = upper ? (i <= j && j - i <= k) : (i >= j && i - j <= k);
            if (!in) continue;
            const Cd v = Tm[i + size_t(j) * lda];
            band[(upper ? k + i - j : i - j) + size_t(j) * ldb] = v;
            bfull[i + size_t(j) * n] = i == j && d == CUBLAS_DIAG_UNIT ? Cd(1) : v;
          }
        auto bb = matvec<T>(bfull, n, n, t, x);
        Dev<T> dband(band), dbb(bb);
        CB(PICK(T, cublasStbsv, cublasDtbsv, cublasCtbsv, cublasZtbsv, h, u, t, d, n, k, dband.p, ldb, dbb.p, 1));
        check(p + "tbsv" + tag, dbb.get(), x, tol<T>() * 8);
        // tpsv: the packed triangle.
        std::vector<Cd> packed;
        for (int j = 0; j < n; j++)
          for (int i = upper ? 0 : j; i <= (upper ? j : n - 1); i++) packed.push_back(Tm[i + size_t(j) * lda]);
        Dev<T> dP(packed), dpb(b);
        CB(PICK(T, cublasStpsv, cublasDtpsv, cublasCtpsv, cublasZtpsv, h, u, t, d, n, dP.p, dpb.p, 1));
        check(p + "tpsv" + tag, dpb.get(), x, tol<T>() * 8);
      }
  }
}

// ------------------------------------------------------------------ level 3
template <class T>
std::vector<Cd> ref_gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, Cd al,
                         const std::vector<Cd>& A, int lda, const std::vector<Cd>& Bm, int ldb, Cd be,
                         const std::vector<Cd>& C, int ldc, size_t oa = 0, size_t ob = 0, size_t oc = 0) {
  std::vector<Cd> out(C);
  for (int j = 0; j < n; j++)
    for (int i = 0; i < m; i++) {
      Cd s = 0;
      for (int l = 0; l < k; l++) {
        Cd a = ta == CUBLAS_OP_N ? A[oa + i + size_t(l) * lda] : A[oa + l + size_t(i) * lda];
        Cd b = tb == CUBLAS_OP_N ? Bm[ob + l + size_t(j) * ldb] : Bm[ob + j + size_t(l) * ldb];
        if (ta == CUBLAS_OP_C) a = cj<T>(a);
        if (tb == CUBLAS_OP_C) b = cj<T>(b);
        s += a * b;
      }
      out[oc + i + size_t(j) * ldc] = al * s + be * C[oc + i + size_t(j) * ldc];
    }
  return out;
}

template <class T>
void level3(cublasHandle_t h) {
  const std::string p = tname<T>();
  const Cd al = toC(fromC<T>(Cd(0.5, kCx<T> ? -1.0 : 0))), be = toC(fromC<T>(Cd(2.0, kCx<T> ? 0.5 : 0)));
  const T alT = fromC<T>(al), beT = fromC<T>(be);
  const int m = 11, n = 7, k = 5, ld = 13;
  for (cublasOperation_t ta : {CUBLAS_OP_N, CUBLAS_OP_T, CUBLAS_OP_C})
    for (cublasOperation_t tb : {CUBLAS_OP_N, CUBLAS_OP_C}) {
      auto A = rnd<T>(size_t(ld) * 13), Bm = rnd<T>(size_t(ld) * 13), C = rnd<T>(size_t(ld) * n);
      Dev<T> dA(A), dB(Bm), dC(C);
      CB(PICK(T, cublasSgemm, cublasDgemm, cublasCgemm, cublasZgemm, h, ta, tb, m, n, k, &alT, dA.p, ld, dB.p, ld, &beT,
              dC.p, ld));
      check(p + "gemm." + std::to_string(ta) + std::to_string(tb), dC.get(),
            ref_gemm<T>(ta, tb, m, n, k, al, A, ld, Bm, ld, be, C, ld), tol<T>() * 8);
    }
  {  // strided batched and batched (device arrays of device pointers)
    const int batch = 5;
    const long long sA = ld * k + 3, sB = ld * n + 1, sC = ld * n + 2;
    auto A = rnd<T>(size_t(sA) * batch), Bm = rnd<T>(size_t(sB) * batch), C = rnd<T>(size_t(sC) * batch);
    Dev<T> dA(A), dB(Bm), dC(C);
    CB(PICK(T, cublasSgemmStridedBatched, cublasDgemmStridedBatched, cublasCgemmStridedBatched,
            cublasZgemmStridedBatched, h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alT, dA.p, ld, sA, dB.p, ld, sB, &beT,
            dC.p, ld, sC, batch));
    auto want = C;
    for (int b = 0; b < batch; b++)
      want = ref_gemm<T>(CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, al, A, ld, Bm, ld, be, want, ld, b * sA, b * sB, b * sC);
    check(p + "gemmStridedBatched", dC.get(), want, tol<T>() * 8);
    Dev<T> dC2(C);
    std::vector<const T*> pa, pb;
    std::vector<T*> pc;
    for (int b = batch - 1; b >= 0; b--) {  // out of order on purpose
      pa.push_back(dA.p + b * sA), pb.push_back(dB.p + b * sB), pc.push_back(dC2.p + b * sC);
    }
    const T** dpa;
    const T** dpb;
    T** dpc;
    CK(cudaMalloc(&dpa, batch * sizeof(T*)));
    CK(cudaMalloc(&dpb, batch * sizeof(T*)));
    CK(cudaMalloc(&dpc, batch * sizeof(T*)));
    CK(cudaMemcpy(dpa, pa.data(), batch * sizeof(T*), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dpb, pb.data(), batch * sizeof(T*), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dpc, pc.data(), batch * sizeof(T*), cudaMemcpyHostToDevice));
    CB(PICK(T, cublasSgemmBatched, cublasDgemmBatched, cublasCgemmBatched, cublasZgemmBatched, h, CUBLAS_OP_N,
            CUBLAS_OP_N, m, n, k, &alT, dpa, ld, dpb, ld, &beT, dpc, ld, batch));
    check(p + "gemmBatched", dC2.get(), want, tol<T>() * 8);
    cudaFree(dpa), cudaFree(dpb), cudaFree(dpc);
  }
  for (cublasSideMode_t side : {CUBLAS_SIDE_LEFT, CUBLAS_SIDE_RIGHT})
    for (bool upper : {false, true}) {
      const cublasFillMode_t u = upper ? CUBLAS_FILL_MODE_UPPER : CUBLAS_FILL_MODE_LOWER;
      const int ka = side == CUBLAS_SIDE_LEFT ? m : n;
      const std::string tag = std::string(side == CUBLAS_SIDE_LEFT ? ".L" : ".R") + (upper ? "U" : "L");
      auto A = rnd<T>(size_t(ld) * ka), Bm = rnd<T>(size_t(ld) * n), C = rnd<T>(size_t(ld) * n);
      for (int herm = 0; herm < (kCx<T> ? 2 : 1); herm++) {  // symm, hemm
        auto S = sym_full<T>(A, ka, ld, upper, herm);
        Dev<T> dA(A), dB(Bm), dC(C);
        if (herm)
          CB(PICK(T, cublasSsymm, cublasDsymm, cublasChemm, cublasZhemm, h, side, u, m, n, &alT, dA.p, ld, dB.p, ld,
                  &beT, dC.p, ld));
        else
          CB(PICK(T, cublasSsymm, cublasDsymm, cublasCsymm, cublasZsymm, h, side, u, m, n, &alT, dA.p, ld, dB.p, ld,
                  &beT, dC.p, ld));
        auto want = side == CUBLAS_SIDE_LEFT
                        ? ref_gemm<T>(CUBLAS_OP_N, CUBLAS_OP_N, m, n, m, al, S, ka, Bm, ld, be, C, ld)
                        : ref_gemm<T>(CUBLAS_OP_N, CUBLAS_OP_N, m, n, n, al, Bm, ld, S, ka, be, C, ld);
        check(p + (herm ? "hemm" : "symm") + tag, dC.get(), want, tol<T>() * 8);
      }
      for (cublasOperation_t t : {CUBLAS_OP_N, CUBLAS_OP_T, CUBLAS_OP_C})
        for (cublasDiagType_t d : {CUBLAS_DIAG_NON_UNIT, CUBLAS_DIAG_UNIT}) {  // trmm, trsm
          const std::string tt = tag + std::to_string(t) + std::to_string(d);
          auto Tm = tri_rand<T>(ka, ld);
          auto F = tri_full(Tm, ka, ld, upper, d == CUBLAS_DIAG_UNIT);
          Dev<T> dT(Tm), dB(Bm), dC(C);
          CB(PICK(T, cublasStrmm, cublasDtrmm, cublasCtrmm, cublasZtrmm, h, side, u, t, d, m, n, &alT, dT.p, ld, dB.p,
                  ld, dC.p, ld));
          auto want = side == CUBLAS_SIDE_LEFT
                          ? ref_gemm<T>(t, CUBLAS_OP_N, m, n, m, al, F, ka, Bm, ld, 0, C, ld)
                          : ref_gemm<T>(CUBLAS_OP_N, t, m, n, n, al, Bm, ld, F, ka, 0, C, ld);
          check(p + "trmm" + tt, dC.get(), want, tol<T>() * 8);
          // trsm: op(A) X = alpha B with B = op(A) X0 / alpha -> X0.
          auto X0 = rnd<T>(size_t(ld) * n);
          auto rhs = side == CUBLAS_SIDE_LEFT
                         ? ref_gemm<T>(t, CUBLAS_OP_N, m, n, m, 1.0 / al, F, ka, X0, ld, 0, X0, ld)
                         : ref_gemm<T>(CUBLAS_OP_N, t, m, n, n, 1.0 / al, X0, ld, F, ka, 0, X0, ld);
          Dev<T> dR(rhs);
          CB(PICK(T, cublasStrsm, cublasDtrsm, cublasCtrsm, cublasZtrsm, h, side, u, t, d, m, n, &alT, dT.p, ld, dR.p,
                  ld));
          auto got = dR.get();
          for (int j = 0; j < n; j++)  // rows m..ld-1 of B are not part of it
            for (int i = m; i < ld; i++) got[i + size_t(j) * ld] = X0[i + size_t(j) * ld];
          check(p + "trsm" + tt, got, X0, tol<T>() * 64);
        }
    }
  {  // trsmBatched
    const int batch = 4;
    std::vector<std::vector<Cd>> As, Xs;
    std::vector<Dev<T>*> dAs, dBs;
    std::vector<const T*> pa;
    std::vector<T*> pb;
    for (int b = 0; b < batch; b++) {
      As.push_back(tri_rand<T>(m, m));
      Xs.push_back(rnd<T>(size_t(m) * n));
      auto F = tri_full(As[b], m, m, false, false);
      dAs.push_back(new Dev<T>(As[b]));
      dBs.push_back(new Dev<T>(ref_gemm<T>(CUBLAS_OP_N, CUBLAS_OP_N, m, n, m, 1.0 / al, F, m, Xs[b], m, 0, Xs[b], m)));
      pa.push_back(dAs[b]->p), pb.push_back(dBs[b]->p);
    }
    const T** dpa;
    T** dpb;
    CK(cudaMalloc(&dpa, batch * sizeof(T*)));
    CK(cudaMalloc(&dpb, batch * sizeof(T*)));
    CK(cudaMemcpy(dpa, pa.data(), batch * sizeof(T*), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dpb, pb.data(), batch * sizeof(T*), cudaMemcpyHostToDevice));
    CB(PICK(T, cublasStrsmBatched, cublasDtrsmBatched, cublasCtrsmBatched, cublasZtrsmBatched, h, CUBLAS_SIDE_LEFT,
            CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, CUBLAS_DIAG_NON_UNIT, m, n, &alT, dpa, m, dpb, m, batch));
    for (int b = 0; b < batch; b++) check(p + "trsmBatched." + std::to_string(b), dBs[b]->get(), Xs[b], tol<T>() * 64);
    for (int b = 0; b < batch; b++) delete dAs[b], delete dBs[b];
    cudaFree(dpa), cudaFree(dpb);
  }
  for (bool upper : {false, true})
    for (cublasOperation_t t : {CUBLAS_OP_N, kCx<T> ? CUBLAS_OP_C : CUBLAS_OP_T}) {  // syrk/herk, syr2k/her2k
      const std::string tag = std::string(upper ? ".U" : ".L") + std::to_string(t);
      const cublasFillMode_t u = upper ? CUBLAS_FILL_MODE_UPPER : CUBLAS_FILL_MODE_LOWER;
      auto A = rnd<T>(size_t(ld) * ld), Bm = rnd<T>(size_t(ld) * ld), C = rnd<T>(size_t(ld) * n);
      auto tri_only = [&](std::vector<Cd> want, bool herm) {  // only the uplo triangle is written
        for (int j = 0; j < n; j++)
          for (int i = 0; i < n; i++) {
            if (!(upper ? i <= j : i >= j)) want[i + size_t(j) * ld] = C[i + size_t(j) * ld];
            else if (herm && i == j) want[i + size_t(j) * ld] = want[i + size_t(j) * ld].real();
          }
        for (int j = 0; j < n; j++)
          for (int i = n; i < ld; i++) want[i + size_t(j) * ld] = C[i + size_t(j) * ld];
        return want;
      };
      const cublasOperation_t t2 = t == CUBLAS_OP_N ? (kCx<T> ? CUBLAS_OP_C : CUBLAS_OP_T) : CUBLAS_OP_N;
      if (!kCx<T> || t == CUBLAS_OP_N) {  // syrk: complex only N/T; T for complex tested as N here
        const cublasOperation_t ts = t;
        const cublasOperation_t tsT = ts == CUBLAS_OP_N ? CUBLAS_OP_T : CUBLAS_OP_N;
        Dev<T> dA(A), dC(C);
        CB(PICK(T, cublasSsyrk, cublasDsyrk, cublasCsyrk, cublasZsyrk, h, u, ts, n, k, &alT, dA.p, ld, &beT, dC.p, ld));
        auto want = tri_only(ref_gemm<T>(ts, tsT, n, n, k, al, A, ld, A, ld, be, C, ld), false);
        check(p + "syrk" + tag, dC.get(), want, tol<T>() * 8);
        Dev<T> dB(Bm), dC2(C);
        CB(PICK(T, cublasSsyr2k, cublasDsyr2k, cublasCsyr2k, cublasZsyr2k, h, u, ts, n, k, &alT, dA.p, ld, dB.p, ld,
                &beT, dC2.p, ld));
        auto w1 = ref_gemm<T>(ts, tsT, n, n, k, al, A, ld, Bm, ld, be, C, ld);
        auto w2 = tri_only(ref_gemm<T>(ts, tsT, n, n, k, al, Bm, ld, A, ld, 1.0, w1, ld), false);
        check(p + "syr2k" + tag, dC2.get(), w2, tol<T>() * 8);
      }
      if constexpr (kCx<T>) {
        using RT = std::conditional_t<kSingle<T>, float, double>;
        const RT ar = RT(0.5), br = RT(-1.5);
        Dev<T> dA(A), dC(C), dB(Bm), dC2(C);
        CB(PICK(T, cublasSsyrk, cublasDsyrk, cublasCherk, cublasZherk, h, u, t, n, k, &ar, dA.p, ld, &br, dC.p, ld));
        auto want = tri_only(ref_gemm<T>(t, t2, n, n, k, double(ar), A, ld, A, ld, double(br), C, ld), true);
        check(p + "herk" + tag, dC.get(), want, tol<T>() * 8);
        CB(PICK(T, cublasSsyr2k, cublasDsyr2k, cublasCher2k, cublasZher2k, h, u, t, n, k, &alT, dA.p, ld, dB.p, ld,
                &br, dC2.p, ld));
        auto w1 = ref_gemm<T>(t, t2, n, n, k, al, A, ld, Bm, ld, double(br), C, ld);
        auto w2 = tri_only(ref_gemm<T>(t, t2, n, n, k, std::conj(al), Bm, ld, A, ld, 1.0, w1, ld), true);
        check(p + "her2k" + tag, dC2.get(), w2, tol<T>() * 8);
      }
    }
  {  // geam (transposed A), dgmm (left and right)
    auto A = rnd<T>(size_t(ld) * m), Bm = rnd<T>(size_t(ld) * n), C = rnd<T>(size_t(ld) * n);
    Dev<T> dA(A), dB(Bm), dC(C);
    CB(PICK(T, cublasSgeam, cublasDgeam, cublasCgeam, cublasZgeam, h, CUBLAS_OP_C, CUBLAS_OP_N, m, n, &alT, dA.p, ld,
            &beT, dB.p, ld, dC.p, ld));
    auto want = C;
    for (int j = 0; j < n; j++)
      for (int i = 0; i < m; i++)
        want[i + size_t(j) * ld] = al * cj<T>(A[j + size_t(i) * ld]) + be * Bm[i + size_t(j) * ld];
    check(p + "geam", dC.get(), want, tol<T>() * 4);
    // A null beta (host pointer mode) reads no B: cuSOLVER's gesvd transposes so.
    Dev<T> dT(C);
    CB(PICK(T, cublasSgeam, cublasDgeam, cublasCgeam, cublasZgeam, h, CUBLAS_OP_C, CUBLAS_OP_C, m, n, &alT, dA.p, ld,
            nullptr, dA.p, ld, dT.p, ld));
    auto wt = C;
    for (int j = 0; j < n; j++)
      for (int i = 0; i < m; i++) wt[i + size_t(j) * ld] = al * cj<T>(A[j + size_t(i) * ld]);
    check(p + "geam.null_beta", dT.get(), wt, tol<T>() * 4);
    for (cublasSideMode_t side : {CUBLAS_SIDE_LEFT, CUBLAS_SIDE_RIGHT}) {
      auto x = rnd<T>(size_t(2) * std::max(m, n));
      Dev<T> dx(x), dC2(C);
      CB(PICK(T, cublasSdgmm, cublasDdgmm, cublasCdgmm, cublasZdgmm, h, side, m, n, dB.p, ld, dx.p, 2, dC2.p, ld));
      auto w = C;
      for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++)
          w[i + size_t(j) * ld] = Bm[i + size_t(j) * ld] * x[size_t(side == CUBLAS_SIDE_LEFT ? i : j) * 2];
      check(p + "dgmm." + std::to_string(side), dC2.get(), w, tol<T>());
    }
  }
}

// ------------------------------------------------------------------ LU family
template <class T>
void lu(cublasHandle_t h) {
  const std::string p = tname<T>();
  const int n = 6, nrhs = 3, batch = 50, lda = 7;
  std::vector<std::vector<Cd>> A(batch), X(batch), Bv(batch);
  std::vector<Dev<T>*> dA, dB, dC, dInv, dA2;
  std::vector<T*> pa, pb, pc, pinv, pa2;
  for (int b = 0; b < batch; b++) {
    A[b] = rnd<T>(size_t(lda) * n);
    if (b % 5 == 0)  // a zero leading entry: only a pivoting LU survives it
      A[b][0] = 0;
    X[b] = rnd<T>(size_t(n) * nrhs);
    Bv[b].assign(size_t(n) * nrhs, 0);
    for (int c = 0; c < nrhs; c++)
      for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) Bv[b][i + size_t(c) * n] += A[b][i + size_t(j) * lda] * X[b][j + size_t(c) * n];
    dA.push_back(new Dev<T>(A[b])), dA2.push_back(new Dev<T>(A[b])), dB.push_back(new Dev<T>(Bv[b]));
    dC.push_back(new Dev<T>(size_t(lda) * n)), dInv.push_back(new Dev<T>(size_t(lda) * n));
    pa.push_back(dA[b]->p), pb.push_back(dB[b]->p), pc.push_back(dC[b]->p), pinv.push_back(dInv[b]->p);
    pa2.push_back(dA2[b]->p);
  }
  auto darr = [&](const std::vector<T*>& v) {
    T** d;
    CK(cudaMalloc(&d, v.size() * sizeof(T*)));
    CK(cudaMemcpy(d, v.data(), v.size() * sizeof(T*), cudaMemcpyHostToDevice));
    return d;
  };
  T** Aa = darr(pa);
  T** Ba = darr(pb);
  T** Ca = darr(pc);
  T** Ia = darr(pinv);
  T** A2a = darr(pa2);
  int *piv, *info;
  CK(cudaMalloc(&piv, sizeof(int) * n * batch));
  CK(cudaMalloc(&info, sizeof(int) * batch));
  CK(cudaMemset(info, 0xFF, sizeof(int) * batch));
  CB(PICK(T, cublasSgetrfBatched, cublasDgetrfBatched, cublasCgetrfBatched, cublasZgetrfBatched, h, n, Aa, lda, piv,
          info, batch));
  int hinfo = -1;
  CB(PICK(T, cublasSgetrsBatched, cublasDgetrsBatched, cublasCgetrsBatched, cublasZgetrsBatched, h, CUBLAS_OP_N, n,
          nrhs, Aa, lda, piv, Ba, n, &hinfo, batch));
  std::vector<int> hi(batch);
  CK(cudaMemcpy(hi.data(), info, sizeof(int) * batch, cudaMemcpyDeviceToHost));
  bool infos_ok = hinfo == 0;
  for (int v : hi) infos_ok = infos_ok && v == 0;
  check1(p + "getrfBatched.info", infos_ok ? 0 : 1, 0, 0);
  for (int b = 0; b < batch; b++) check(p + "getrsBatched." + std::to_string(b), dB[b]->get(), X[b], tol<T>() * 200);
  // getri from the same factors, then matinv from the untouched copies:
  // A * inv(A) = I.
  CB(PICK(T, cublasSgetriBatched, cublasDgetriBatched, cublasCgetriBatched, cublasZgetriBatched, h, n, Aa, lda, piv, Ca,
          lda, info, batch));
  CB(PICK(T, cublasSmatinvBatched, cublasDmatinvBatched, cublasCmatinvBatched, cublasZmatinvBatched, h, n, A2a, lda,
          Ia, lda, info, batch));
  CK(cudaMemcpy(hi.data(), info, sizeof(int) * batch, cudaMemcpyDeviceToHost));
  infos_ok = true;
  for (int v : hi) infos_ok = infos_ok && v == 0;
  check1(p + "matinvBatched.info", infos_ok ? 0 : 1, 0, 0);
  for (int b = 0; b < batch; b += 7) {
    for (int which = 0; which < 2; which++) {
      auto inv = (which ? dInv[b] : dC[b])->get();
      std::vector<Cd> prod(size_t(n) * n), eye(size_t(n) * n);
      for (int j = 0; j < n; j++) {
        eye[j + size_t(j) * n] = 1;
        for (int i = 0; i < n; i++)
          for (int l = 0; l < n; l++) prod[i + size_t(j) * n] += A[b][i + size_t(l) * lda] * inv[l + size_t(j) * lda];
      }
      check(p + (which ? "matinvBatched." : "getriBatched.") + std::to_string(b), prod, eye, tol<T>() * 200);
    }
  }
  // A singular matrix is reported in info (column 2 is zero).
  std::vector<Cd> S = rnd<T>(size_t(lda) * n);
  for (int i = 0; i < n; i++) S[i + size_t(1) * lda] = 0;
  dA[0]->put(S);
  CB(PICK(T, cublasSgetrfBatched, cublasDgetrfBatched, cublasCgetrfBatched, cublasZgetrfBatched, h, n, Aa, lda, piv,
          info, 1));
  CK(cudaMemcpy(hi.data(), info, sizeof(int), cudaMemcpyDeviceToHost));
  check1(p + "getrfBatched.singular", hi[0], 2, 0);
  for (int b = 0; b < batch; b++) delete dA[b], delete dA2[b], delete dB[b], delete dC[b], delete dInv[b];
  cudaFree(Aa), cudaFree(Ba), cudaFree(Ca), cudaFree(Ia), cudaFree(A2a), cudaFree(piv), cudaFree(info);
}

// ------------------------------------------------------------------ batched QR
// geqrfBatched leaves R on and above the diagonal and the Householder
// vectors v_i (v_i(i) = 1 implied) below it, with H_i = I - tau_i v_i v_i^H
// and Q = H_1 ... H_k. The host rebuilds Q [R; 0] and Q^H Q from them: both
// must give back A and I (a call that did nothing leaves tau at its fill
// value and A whole, which fails the first).
template <class T>
void qr(cublasHandle_t h) {
  const std::string p = tname<T>();
  const int m = 7, n = 5, lda = 9, batch = 20, k = std::min(m, n);
  std::vector<std::vector<Cd>> A(batch);
  std::vector<Dev<T>*> dA, dT;
  std::vector<T*> pa, pt;
  for (int b = 0; b < batch; b++) {
    A[b] = rnd<T>(size_t(lda) * n);
    dA.push_back(new Dev<T>(A[b])), dT.push_back(new Dev<T>(std::vector<Cd>(size_t(k), Cd(7, 0))));
    pa.push_back(dA[b]->p), pt.push_back(dT[b]->p);
  }
  T **Aa, **Ta;
  CK(cudaMalloc(&Aa, batch * sizeof(T*)));
  CK(cudaMalloc(&Ta, batch * sizeof(T*)));
  CK(cudaMemcpy(Aa, pa.data(), batch * sizeof(T*), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(Ta, pt.data(), batch * sizeof(T*), cudaMemcpyHostToDevice));
  int info = 99;
  CB(PICK(T, cublasSgeqrfBatched, cublasDgeqrfBatched, cublasCgeqrfBatched, cublasZgeqrfBatched, h, m, n, Aa, lda,
          Ta, &info, batch));
  check1(p + "geqrfBatched.info", info, 0, 0);
  // Applies H_1 ... H_k (from H_k inwards) to the m x c matrix X (ld m).
  auto apply_q = [&](const std::vector<Cd>& f, const std::vector<Cd>& tau, std::vector<Cd>& X, int c) {
    for (int i = k - 1; i >= 0; i--)
      for (int j = 0; j < c; j++) {
        Cd d = X[i + size_t(j) * m];  // v^H x, v(i) = 1
        for (int r = i + 1; r < m; r++) d += std::conj(f[r + size_t(i) * lda]) * X[r + size_t(j) * m];
        X[i + size_t(j) * m] -= tau[i] * d;
        for (int r = i + 1; r < m; r++) X[r + size_t(j) * m] -= tau[i] * f[r + size_t(i) * lda] * d;
      }
  };
  for (int b = 0; b < batch; b++) {
    auto f = dA[b]->get(), tau = dT[b]->get();
    std::vector<Cd> R(size_t(m) * n), want(size_t(m) * n), Q(size_t(m) * m), QhQ(size_t(m) * m), eye(size_t(m) * m);
    for (int j = 0; j < n; j++)
      for (int i = 0; i < m; i++) {
        if (i <= j) R[i + size_t(j) * m] = f[i + size_t(j) * lda];
        want[i + size_t(j) * m] = A[b][i + size_t(j) * lda];
      }
    apply_q(f, tau, R, n);
    check(p + "geqrfBatched.QR=A." + std::to_string(b), R, want, tol<T>() * 50);
    for (int i = 0; i < m; i++) Q[i + size_t(i) * m] = 1, eye[i + size_t(i) * m] = 1;
    apply_q(f, tau, Q, m);
    for (int j = 0; j < m; j++)
      for (int i = 0; i < m; i++)
        for (int l = 0; l < m; l++) QhQ[i + size_t(j) * m] += std::conj(Q[l + size_t(i) * m]) * Q[l + size_t(j) * m];
    check(p + "geqrfBatched.QhQ=I." + std::to_string(b), QhQ, eye, tol<T>() * 50);
  }
  // Refused arguments: cuBLAS's status, and -(position) in the host info;
  // nothing is computed (the first matrix keeps its factors).
  auto before = dA[0]->get();
  cublasStatus_t st = PICK(T, cublasSgeqrfBatched, cublasDgeqrfBatched, cublasCgeqrfBatched, cublasZgeqrfBatched, h,
                           m, n, Aa, m - 1, Ta, &info, batch);
  check1(p + "geqrfBatched.bad_lda", st == CUBLAS_STATUS_INVALID_VALUE && info == -4 ? 0 : 1, 0, 0);
  st = PICK(T, cublasSgeqrfBatched, cublasDgeqrfBatched, cublasCgeqrfBatched, cublasZgeqrfBatched, h, -1, n, Aa, lda,
            Ta, &info, batch);
  check1(p + "geqrfBatched.bad_m", st == CUBLAS_STATUS_INVALID_VALUE && info == -1 ? 0 : 1, 0, 0);
  st = PICK(T, cublasSgeqrfBatched, cublasDgeqrfBatched, cublasCgeqrfBatched, cublasZgeqrfBatched, h, m, n, Aa, lda,
            Ta, &info, -3);
  check1(p + "geqrfBatched.bad_batch", st == CUBLAS_STATUS_INVALID_VALUE && info == -7 ? 0 : 1, 0, 0);
  check(p + "geqrfBatched.refused_untouched", dA[0]->get(), before, 0);
  for (int b = 0; b < batch; b++) delete dA[b], delete dT[b];
  cudaFree(Aa), cudaFree(Ta);
}

// ------------------------------------------------------------------ GemmEx family
// fp16/bf16 inputs, fp32 compute: checked against fp32-exact host math on
// the rounded inputs. Tolerance: fp32 accumulation over k = 64 terms of
// magnitude <= 1, 1e-4 absolute; an fp16 (bf16) C adds half an ulp of
// the result: 2^-11 (2^-8) relative.
template <class H>
float h2f(H v) {
  if constexpr (std::is_same_v<H, __half>) return __half2float(v);
  else return __bfloat162float(v);
}
template <class H>
H f2h(float v) {
  if constexpr (std::is_same_v<H, __half>) return __float2half(v);
  else return __float2bfloat16(v);
}
template <class H>
void gemm_ex(cublasHandle_t h, cudaDataType ht, const char* name, double out_rel) {
  const int m = 24, n = 20, k = 64, batch = 3;
  std::vector<H> A(size_t(m) * k * batch), Bm(size_t(k) * n * batch);
  std::vector<float> Af(A.size()), Bf(Bm.size()), C(size_t(m) * n * batch);
  for (size_t i = 0; i < A.size(); i++) A[i] = f2h<H>(float(drand())), Af[i] = h2f(A[i]);
  for (size_t i = 0; i < Bm.size(); i++) Bm[i] = f2h<H>(float(drand())), Bf[i] = h2f(Bm[i]);
  for (auto& c : C) c = float(drand());
  const float al = 1.5f, be = -0.5f;
  auto ref = [&](int b, bool with_c) {
    std::vector<Cd> o(size_t(m) * n);
    for (int j = 0; j < n; j++)
      for (int i = 0; i < m; i++) {
        double s = 0;
        for (int l = 0; l < k; l++) s += double(Af[b * m * k + i + l * m]) * double(Bf[b * k * n + l + j * k]);
        o[i + size_t(j) * m] = al * s + (with_c ? be * double(C[b * m * n + i + j * m]) : 0.0);
      }
    return o;
  };
  H *dA, *dB;
  float* dC;
  H* dCh;
  CK(cudaMalloc(&dA, A.size() * sizeof(H)));
  CK(cudaMalloc(&dB, Bm.size() * sizeof(H)));
  CK(cudaMalloc(&dC, C.size() * sizeof(float)));
  CK(cudaMalloc(&dCh, C.size() * sizeof(H)));
  CK(cudaMemcpy(dA, A.data(), A.size() * sizeof(H), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dB, Bm.data(), Bm.size() * sizeof(H), cudaMemcpyHostToDevice));
  auto getf = [&](int b) {
    std::vector<float> o(size_t(m) * n);
    CK(cudaMemcpy(o.data(), dC + size_t(b) * m * n, o.size() * 4, cudaMemcpyDeviceToHost));
    return std::vector<Cd>(o.begin(), o.end());
  };
  for (cublasComputeType_t ct : {CUBLAS_COMPUTE_32F, CUBLAS_COMPUTE_32F_FAST_TF32}) {
    CK(cudaMemcpy(dC, C.data(), C.size() * 4, cudaMemcpyHostToDevice));
    CB(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &al, dA, ht, m, dB, ht, k, &be, dC, CUDA_R_32F, m, ct,
                    CUBLAS_GEMM_DEFAULT));
    check(std::string("GemmEx.") + name + ".f32out." + std::to_string(ct), getf(0), ref(0, true), 1e-4);
  }
  // Strided batched, fp32 C.
  CK(cudaMemcpy(dC, C.data(), C.size() * 4, cudaMemcpyHostToDevice));
  CB(cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &al, dA, ht, m, (long long)m * k, dB, ht, k,
                                (long long)k * n, &be, dC, CUDA_R_32F, m, (long long)m * n, batch, CUBLAS_COMPUTE_32F,
                                CUBLAS_GEMM_DEFAULT));
  for (int b = 0; b < batch; b++)
    check(std::string("GemmStridedBatchedEx.") + name + "." + std::to_string(b), getf(b), ref(b, true), 1e-4);
  // Batched (pointer arrays), C of the input type, beta = 0.
  {
    std::vector<const void*> pa, pb;
    std::vector<void*> pc;
    for (int b = 0; b < batch; b++)
      pa.push_back(dA + size_t(b) * m * k), pb.push_back(dB + size_t(b) * k * n), pc.push_back(dCh + size_t(b) * m * n);
    void** d;
    CK(cudaMalloc(&d, 3 * batch * sizeof(void*)));
    CK(cudaMemcpy(d, pa.data(), batch * sizeof(void*), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d + batch, pb.data(), batch * sizeof(void*), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d + 2 * batch, pc.data(), batch * sizeof(void*), cudaMemcpyHostToDevice));
    const float zero = 0;
    CB(cublasGemmBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &al, (const void* const*)d, ht, m,
                           (const void* const*)(d + batch), ht, k, &zero, (void* const*)(d + 2 * batch), ht, m, batch,
                           CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    for (int b = 0; b < batch; b++) {
      std::vector<H> o(size_t(m) * n);
      CK(cudaMemcpy(o.data(), dCh + size_t(b) * m * n, o.size() * sizeof(H), cudaMemcpyDeviceToHost));
      std::vector<Cd> got(o.size());
      for (size_t i = 0; i < o.size(); i++) got[i] = h2f(o[i]);
      auto want = ref(b, false);
      double err = 0;
      bool ok = true;
      for (size_t i = 0; i < o.size(); i++) {
        err = std::abs(got[i] - want[i]);
        if (err > 1e-4 + out_rel * std::abs(want[i])) ok = false;
      }
      check1(std::string("GemmBatchedEx.") + name + "." + std::to_string(b), ok ? 0 : 1, 0, 0);
    }
    cudaFree(d);
  }
  if constexpr (std::is_same_v<H, __half>) {  // fp16 throughout, fp16 compute (half scalars)
    const __half ah = __float2half(1.5f), bh = __float2half(0.f);
    CB(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &ah, dA, CUDA_R_16F, m, dB, CUDA_R_16F, k, &bh, dCh,
                    CUDA_R_16F, m, CUBLAS_COMPUTE_16F, CUBLAS_GEMM_DEFAULT));
    std::vector<H> o(size_t(m) * n);
    CK(cudaMemcpy(o.data(), dCh, o.size() * sizeof(H), cudaMemcpyDeviceToHost));
    auto want = ref(0, false);
    bool ok = true;
    // fp16 accumulation on a GPU: allow 2^-6 relative of the sum's scale (k terms).
    for (size_t i = 0; i < o.size(); i++)
      if (std::abs(double(h2f(o[i])) - want[i].real()) > 0.05 + 2e-2 * std::abs(want[i])) ok = false;
    check1("GemmEx.f16.compute16F", ok ? 0 : 1, 0, 0);
  }
  cudaFree(dA), cudaFree(dB), cudaFree(dC), cudaFree(dCh);
}

// ------------------------------------------------------------------ pointer mode device
template <class T>
void device_scalars(cublasHandle_t h) {
  const std::string p = tname<T>();
  const int n = 33;
  auto hx = rnd<T>(n), hy = rnd<T>(n);
  const Cd al = toC(fromC<T>(Cd(-2.0, kCx<T> ? 1.0 : 0)));
  Dev<T> x(hx), y(hy), alpha(std::vector<Cd>{al}), result(1);
  CB(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_DEVICE));
  CB(PICK(T, cublasSaxpy, cublasDaxpy, cublasCaxpy, cublasZaxpy, h, n, alpha.p, x.p, 1, y.p, 1));
  CB(PICK(T, cublasSdot, cublasDdot, cublasCdotu, cublasZdotu, h, n, x.p, 1, y.p, 1, result.p));
  int* idx;
  CK(cudaMalloc(&idx, sizeof(int)));
  CB(PICK(T, cublasIsamax, cublasIdamax, cublasIcamax, cublasIzamax, h, n, y.p, 1, idx));
  CB(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST));
  auto wy = hy;
  Cd dot = 0;
  int imax = 0;
  double vmax = -1;
  for (int i = 0; i < n; i++) {
    wy[i] += al * hx[i];
    dot += hx[i] * wy[i];
  }
  for (int i = 0; i < n; i++) {
    double v = std::fabs(wy[i].real()) + std::fabs(wy[i].imag());
    if (v > vmax) vmax = v, imax = i + 1;
  }
  check(p + "axpy.device", y.get(), wy, tol<T>());
  check1(p + "dot.device", result.get()[0], dot, tol<T>() * n);
  int hidx = 0;
  CK(cudaMemcpy(&hidx, idx, sizeof(int), cudaMemcpyDeviceToHost));
  check1(p + "iamax.device", hidx, imax, 0);
  cudaFree(idx);
}

// Device pointer mode for level 3: alpha and beta in device memory.
template <class T>
void device_scalars_gemm(cublasHandle_t h) {
  const std::string p = tname<T>();
  const int m = 6, n = 5, k = 4;
  auto A = rnd<T>(size_t(m) * k), Bm = rnd<T>(size_t(k) * n), C = rnd<T>(size_t(m) * n);
  const Cd al = toC(fromC<T>(Cd(0.5, kCx<T> ? 2.0 : 0))), be = toC(fromC<T>(Cd(-1.0, kCx<T> ? 0.5 : 0)));
  Dev<T> dA(A), dB(Bm), dC(C), dal(std::vector<Cd>{al}), dbe(std::vector<Cd>{be});
  CB(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_DEVICE));
  CB(PICK(T, cublasSgemm, cublasDgemm, cublasCgemm, cublasZgemm, h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, dal.p, dA.p, m,
          dB.p, k, dbe.p, dC.p, m));
  CB(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST));
  check(p + "gemm.device_scalars", dC.get(), ref_gemm<T>(CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, al, A, m, Bm, k, be, C, m),
        tol<T>() * 8);
}

// More _64 forms (those NVIDIA's cuSOLVER calls): each gives what its 32-bit
// form (checked against the host above) gives on the same operands, and
// changes its output.
static void forms64_same(cublasHandle_t h) {
  const int n = 5;
  // Runs f32 and f64 on copies of `init` (the output operand) and compares.
  auto same = [&](const char* name, const std::vector<Cd>& init, auto f32, auto f64) {
    Dev<cuDoubleComplex> o32(init), o64(init);
    f32(o32.p);
    f64(o64.p);
    auto g32 = o32.get(), g64 = o64.get();
    bool changed = false;
    for (size_t i = 0; i < init.size(); i++) changed |= g32[i] != init[i];
    check1(std::string(name) + "_64", g64 == g32 && changed ? 1 : 0, 1, 0);
  };
  auto A = rnd<cuDoubleComplex>(size_t(n) * n), Bm = rnd<cuDoubleComplex>(size_t(n) * n);
  auto x = rnd<cuDoubleComplex>(n), y = rnd<cuDoubleComplex>(n), C = rnd<cuDoubleComplex>(size_t(n) * n);
  Dev<cuDoubleComplex> dA(A), dB(Bm), dx(x), dy(y);
  const cuDoubleComplex al = make_cuDoubleComplex(0.5, -1), be = make_cuDoubleComplex(2, 0.25);
  const double c = 0.6, sn = 0.8, rbe = 1.5;
  // rot writes its second vector too: each call gets its own copy.
  Dev<cuDoubleComplex> y32(y), y64(y), x32(x), x64(x);
  same("Zdrot", x, [&](cuDoubleComplex* o) { cublasZdrot(h, n, o, 1, y32.p, 1, &c, &sn); },
       [&](cuDoubleComplex* o) { cublasZdrot_64(h, n, o, 1, y64.p, 1, &c, &sn); });
  same("Zdscal", x, [&](cuDoubleComplex* o) { cublasZdscal(h, n, &c, o, 1); },
       [&](cuDoubleComplex* o) { cublasZdscal_64(h, n, &c, o, 1); });
  same("Zgerc", C, [&](cuDoubleComplex* o) { cublasZgerc(h, n, n, &al, dx.p, 1, dy.p, 1, o, n); },
       [&](cuDoubleComplex* o) { cublasZgerc_64(h, n, n, &al, dx.p, 1, dy.p, 1, o, n); });
  same("Zhemv", y, [&](cuDoubleComplex* o) { cublasZhemv(h, CUBLAS_FILL_MODE_LOWER, n, &al, dA.p, n, dx.p, 1, &be, o, 1); },
       [&](cuDoubleComplex* o) { cublasZhemv_64(h, CUBLAS_FILL_MODE_LOWER, n, &al, dA.p, n, dx.p, 1, &be, o, 1); });
  same("Ztrmv", x,
       [&](cuDoubleComplex* o) { cublasZtrmv(h, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_C, CUBLAS_DIAG_NON_UNIT, n, dA.p, n, o, 1); },
       [&](cuDoubleComplex* o) {
         cublasZtrmv_64(h, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_C, CUBLAS_DIAG_NON_UNIT, n, dA.p, n, o, 1);
       });
  same("Zher2k", C,
       [&](cuDoubleComplex* o) { cublasZher2k(h, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N, n, n, &al, dA.p, n, dB.p, n, &rbe, o, n); },
       [&](cuDoubleComplex* o) {
         cublasZher2k_64(h, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N, n, n, &al, dA.p, n, dB.p, n, &rbe, o, n);
       });
  same("Zhemm", C,
       [&](cuDoubleComplex* o) {
         cublasZhemm(h, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_LOWER, n, n, &al, dA.p, n, dB.p, n, &be, o, n);
       },
       [&](cuDoubleComplex* o) {
         cublasZhemm_64(h, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_LOWER, n, n, &al, dA.p, n, dB.p, n, &be, o, n);
       });
  // Real forms on the same bytes (a complex vector is two doubles per element).
  auto* rA = reinterpret_cast<double*>(dA.p);
  auto* rx = reinterpret_cast<double*>(dx.p);
  same("Drot", x,
       [&](cuDoubleComplex* o) {
         cublasDrot(h, 2 * n, reinterpret_cast<double*>(o), 1, reinterpret_cast<double*>(x32.p), 1, &c, &sn);
       },
       [&](cuDoubleComplex* o) {
         cublasDrot_64(h, 2 * n, reinterpret_cast<double*>(o), 1, reinterpret_cast<double*>(x64.p), 1, &c, &sn);
       });
  const double dal = -0.75, dbe = 0.5;
  same("Dger", C, [&](cuDoubleComplex* o) { cublasDger(h, n, n, &dal, rx, 1, rx, 2, reinterpret_cast<double*>(o), 2 * n); },
       [&](cuDoubleComplex* o) { cublasDger_64(h, n, n, &dal, rx, 1, rx, 2, reinterpret_cast<double*>(o), 2 * n); });
  same("Dsymv", x,
       [&](cuDoubleComplex* o) {
         cublasDsymv(h, CUBLAS_FILL_MODE_UPPER, n, &dal, rA, 2 * n, rx, 1, &dbe, reinterpret_cast<double*>(o), 2);
       },
       [&](cuDoubleComplex* o) {
         cublasDsymv_64(h, CUBLAS_FILL_MODE_UPPER, n, &dal, rA, 2 * n, rx, 1, &dbe, reinterpret_cast<double*>(o), 2);
       });
  same("Dsyr2k", C,
       [&](cuDoubleComplex* o) {
         cublasDsyr2k(h, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_T, n, n, &dal, rA, 2 * n, rA, 2 * n, &dbe,
                      reinterpret_cast<double*>(o), 2 * n);
       },
       [&](cuDoubleComplex* o) {
         cublasDsyr2k_64(h, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_T, n, n, &dal, rA, 2 * n, rA, 2 * n, &dbe,
                         reinterpret_cast<double*>(o), 2 * n);
       });
}

// GemmEx family on complex operands with the compute type of their
// precision (CuPy's batched complex matmul): the cgemm/zgemm result.
template <class T>
void gemm_ex_complex(cublasHandle_t h) {
  constexpr bool z = std::is_same_v<T, cuDoubleComplex>;
  const cudaDataType dt = z ? CUDA_C_64F : CUDA_C_32F;
  const cublasComputeType_t ct = z ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
  const int m = 4, n = 3, k = 5, batch = 2;
  auto A = rnd<T>(size_t(m) * k * batch), Bm = rnd<T>(size_t(k) * n * batch), C = rnd<T>(size_t(m) * n * batch);
  Dev<T> dA(A), dB(Bm), dC(C), dC1(C);
  const T al = fromC<T>(Cd(0.5, -1)), be = fromC<T>(Cd(-1, 0.25));
  CB(cublasGemmStridedBatchedEx(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &al, dA.p, dt, k, (long long)(m) * k, dB.p, dt, k,
                                (long long)(k) * n, &be, dC.p, dt, m, (long long)(m) * n, batch, ct, CUBLAS_GEMM_DEFAULT));
  std::vector<Cd> want;
  for (int b = 0; b < batch; b++) {
    std::vector<Cd> a(A.begin() + b * m * k, A.begin() + (b + 1) * m * k), bb(Bm.begin() + b * k * n, Bm.begin() + (b + 1) * k * n),
        c(C.begin() + b * m * n, C.begin() + (b + 1) * m * n);
    auto w = ref_gemm<T>(CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, toC(al), a, k, bb, k, toC(be), c, m);
    want.insert(want.end(), w.begin(), w.end());
  }
  check(std::string(tname<T>()) + "GemmStridedBatchedEx.complex", dC.get(), want, tol<T>() * 4);
  CB(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &al, dA.p, dt, k, dB.p, dt, k, &be, dC1.p, dt, m, ct,
                  CUBLAS_GEMM_DEFAULT));
  auto got1 = dC1.get();
  check(std::string(tname<T>()) + "GemmEx.complex", std::vector<Cd>(got1.begin(), got1.begin() + m * n),
        std::vector<Cd>(want.begin(), want.begin() + m * n), tol<T>() * 4);
}

// The _64 forms: the 32-bit body for sizes that fit, refused beyond.
static void forms64(cublasHandle_t h) {
  const int64_t m = 5, n = 4, k = 3;
  auto A = rnd<cuDoubleComplex>(size_t(m * k)), Bm = rnd<cuDoubleComplex>(size_t(k * n)),
       C = rnd<cuDoubleComplex>(size_t(m * n));
  Dev<cuDoubleComplex> dA(A), dB(Bm), dC(C);
  const cuDoubleComplex al = make_cuDoubleComplex(1, -1), be = make_cuDoubleComplex(0.5, 0);
  CB(cublasZgemm_64(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &al, dA.p, m, dB.p, k, &be, dC.p, m));
  check("Zgemm_64", dC.get(), ref_gemm<cuDoubleComplex>(CUBLAS_OP_N, CUBLAS_OP_N, 5, 4, 3, toC(al), A, 5, Bm, 3, toC(be), C, 5),
        1e-12);
  double r = 0;
  Dev<double> x(rnd<double>(20));
  CB(cublasDnrm2_64(h, 10, x.p, 2, &r));
  auto hx = x.get();
  double w = 0;
  for (int i = 0; i < 10; i++) w += std::norm(hx[size_t(i) * 2]);
  check1("Dnrm2_64", r, std::sqrt(w), 1e-12);
  const bool refused = cublasDnrm2_64(h, int64_t(1) << 33, x.p, 1, &r) == CUBLAS_STATUS_NOT_SUPPORTED;
  check1("Dnrm2_64.beyond_int", refused ? 0 : 1, 0, 0);
  forms64_same(h);
}

// Per-thread handles and streams: each thread its own handle on its own
// stream, interleaving with the others.
static void threads() {
  const int nt = 4, n = 48;
  std::vector<std::thread> ts;
  std::vector<int> ok(nt, 0);
  for (int t = 0; t < nt; t++)
    ts.emplace_back([t, &ok] {
      cublasHandle_t h;
      cudaStream_t s;
      if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS || cudaStreamCreate(&s) != cudaSuccess) return;
      cublasSetStream(h, s);
      std::vector<double> a(size_t(n) * n), b(size_t(n) * n, 0.0), c(size_t(n) * n, 0.0);
      for (int i = 0; i < n * n; i++) a[i] = double((i * 7 + t) % 13) - 6;
      for (int i = 0; i < n; i++) b[i + size_t(i) * n] = t + 1;  // (t+1) I
      double *da, *db, *dc;
      cudaMalloc(&da, a.size() * 8), cudaMalloc(&db, b.size() * 8), cudaMalloc(&dc, c.size() * 8);
      cudaMemcpyAsync(da, a.data(), a.size() * 8, cudaMemcpyHostToDevice, s);
      cudaMemcpyAsync(db, b.data(), b.size() * 8, cudaMemcpyHostToDevice, s);
      const double one = 1, zero = 0;
      bool good = true;
      for (int r = 0; r < 10; r++)
        good = good && cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, da, n, db, n, &zero, dc, n) ==
                           CUBLAS_STATUS_SUCCESS;
      cudaMemcpyAsync(c.data(), dc, c.size() * 8, cudaMemcpyDeviceToHost, s);
      good = good && cudaStreamSynchronize(s) == cudaSuccess;
      for (int i = 0; i < n * n && good; i++) good = c[i] == a[i] * (t + 1);
      ok[t] = good;
      cudaFree(da), cudaFree(db), cudaFree(dc);
      cublasDestroy(h);
      cudaStreamDestroy(s);
    });
  for (auto& th : ts) th.join();
  for (int t = 0; t < nt; t++) check1("threads." + std::to_string(t), ok[t], 1, 0);
}

int main() {
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) {
    std::printf("FATAL cublasCreate\n");
    return 2;
  }
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  cublasSetStream(h, s);
  level1<float>(h), level1<double>(h), level1<cuComplex>(h), level1<cuDoubleComplex>(h);
  level2<float>(h), level2<double>(h), level2<cuComplex>(h), level2<cuDoubleComplex>(h);
  level3<float>(h), level3<double>(h), level3<cuComplex>(h), level3<cuDoubleComplex>(h);
  lu<float>(h), lu<double>(h), lu<cuComplex>(h), lu<cuDoubleComplex>(h);
  qr<float>(h), qr<double>(h), qr<cuComplex>(h), qr<cuDoubleComplex>(h);
  gemm_ex<__half>(h, CUDA_R_16F, "f16", 1.0 / 2048);
  gemm_ex<__nv_bfloat16>(h, CUDA_R_16BF, "bf16", 1.0 / 256);
  device_scalars<float>(h), device_scalars<double>(h), device_scalars<cuComplex>(h),
      device_scalars<cuDoubleComplex>(h);
  device_scalars_gemm<float>(h), device_scalars_gemm<double>(h), device_scalars_gemm<cuComplex>(h),
      device_scalars_gemm<cuDoubleComplex>(h);
  gemm_ex_complex<cuComplex>(h), gemm_ex_complex<cuDoubleComplex>(h);
  forms64(h);
  threads();
  CK(cudaStreamSynchronize(s));
  CK(cudaGetLastError());
  cublasDestroy(h);
  cudaStreamDestroy(s);
  std::printf("%d passed, %d failed\n", g_pass, g_fail);
  return g_fail ? 1 : 0;
}
