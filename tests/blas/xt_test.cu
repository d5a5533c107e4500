// cuBLASXt through Wormhole: host-memory matrices (and a device-memory
// output) for gemm in S/D/C/Z, symm, syrk, herk, trsm and trmm, checked
// against loop references here. Built with `nvcc -cudart shared -lcublas`.
#include <cublasXt.h>
#include <cuda_runtime.h>

#include <cmath>
#include <complex>
#include <cstdio>
#include <string>
#include <type_traits>
#include <vector>

using Cd = std::complex<double>;
static int g_fail = 0, g_pass = 0;
#define CB(x)                                                                                    \
  do {                                                                                           \
    cublasStatus_t s_ = (x);                                                                     \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                           \
      std::printf("FAIL %s:%d %s -> %d\n", __FILE__, __LINE__, #x, int(s_));                     \
      g_fail++;                                                                                  \
      return;                                                                                    \
    }                                                                                            \
  } while (0)

template <class T>
constexpr bool kCx = std::is_same_v<T, cuComplex> || std::is_same_v<T, cuDoubleComplex>;
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
static unsigned g_seed = 99;
static double drand() {
  g_seed = g_seed * 1664525u + 1013904223u;
  return double((g_seed >> 8) & 0xFFFF) / 32768.0 - 1.0;
}
template <class T>
std::vector<T> rnd(size_t n) {
  std::vector<T> v(n);
  for (auto& x : v) x = fromC<T>(Cd(drand(), kCx<T> ? drand() : 0));
  return v;
}
template <class T>
void check(const std::string& name, const std::vector<T>& got, const std::vector<Cd>& want, double tol) {
  double err = 0, mag = 0;
  for (size_t i = 0; i < want.size(); i++) {
    err = std::max(err, std::abs(toC(got[i]) - want[i]));
    mag = std::max(mag, std::abs(want[i]));
  }
  if (err <= tol * (1 + mag)) g_pass++;
  else g_fail++, std::printf("FAIL %s: max error %g\n", name.c_str(), err);
}
#define PICK(T, S, D, C, Z, ...)                                 \
  [&]() {                                                        \
    if constexpr (std::is_same_v<T, float>) return S(__VA_ARGS__);              \
    else if constexpr (std::is_same_v<T, double>) return D(__VA_ARGS__);        \
    else if constexpr (std::is_same_v<T, cuComplex>) return C(__VA_ARGS__);     \
    else return Z(__VA_ARGS__);                                                 \
  }()

template <class T>
void run(cublasXtHandle_t x, const char* p) {
  const double tol = std::is_same_v<T, float> || std::is_same_v<T, cuComplex> ? 1e-4 : 1e-11;
  const size_t m = 37, n = 29, k = 23, ld = 41;
  auto A = rnd<T>(ld * 41), B = rnd<T>(ld * n), C = rnd<T>(ld * n);
  const T al = fromC<T>(Cd(0.5, kCx<T> ? 1 : 0)), be = fromC<T>(Cd(-1, kCx<T> ? 0.25 : 0));
  auto a = [&](size_t i, size_t j) { return toC(A[i + j * ld]); };
  auto b = [&](size_t i, size_t j) { return toC(B[i + j * ld]); };
  {  // gemm, A transposed, host memory throughout
    auto c = C;
    CB(PICK(T, cublasXtSgemm, cublasXtDgemm, cublasXtCgemm, cublasXtZgemm, x, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &al,
            A.data(), ld, B.data(), ld, &be, c.data(), ld));
    std::vector<Cd> w(C.size());
    for (size_t i = 0; i < C.size(); i++) w[i] = toC(C[i]);
    for (size_t j = 0; j < n; j++)
      for (size_t i = 0; i < m; i++) {
        Cd s = 0;
        for (size_t l = 0; l < k; l++) s += a(l, i) * b(l, j);
        w[i + j * ld] = toC(al) * s + toC(be) * toC(C[i + j * ld]);
      }
    check(std::string(p) + "gemm.host", c, w, tol * 8);
    // The same with C in device memory.
    T* dc;
    cudaMalloc(&dc, C.size() * sizeof(T));
    cudaMemcpy(dc, C.data(), C.size() * sizeof(T), cudaMemcpyHostToDevice);
    CB(PICK(T, cublasXtSgemm, cublasXtDgemm, cublasXtCgemm, cublasXtZgemm, x, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &al,
            A.data(), ld, B.data(), ld, &be, dc, ld));
    std::vector<T> back(C.size());
    cudaMemcpy(back.data(), dc, C.size() * sizeof(T), cudaMemcpyDeviceToHost);
    cudaFree(dc);
    check(std::string(p) + "gemm.deviceC", back, w, tol * 8);
  }
  {  // symm (left, lower)
    auto c = C;
    CB(PICK(T, cublasXtSsymm, cublasXtDsymm, cublasXtCsymm, cublasXtZsymm, x, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_LOWER,
            m, n, &al, A.data(), ld, B.data(), ld, &be, c.data(), ld));
    std::vector<Cd> w(C.size());
    for (size_t i = 0; i < C.size(); i++) w[i] = toC(C[i]);
    for (size_t j = 0; j < n; j++)
      for (size_t i = 0; i < m; i++) {
        Cd s = 0;
        for (size_t l = 0; l < m; l++) s += (i >= l ? a(i, l) : a(l, i)) * b(l, j);
        w[i + j * ld] = toC(al) * s + toC(be) * toC(C[i + j * ld]);
      }
    check(std::string(p) + "symm", c, w, tol * 8);
  }
  {  // syrk (upper, N)
    auto c = C;
    CB(PICK(T, cublasXtSsyrk, cublasXtDsyrk, cublasXtCsyrk, cublasXtZsyrk, x, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N, n, k,
            &al, A.data(), ld, &be, c.data(), ld));
    std::vector<Cd> w(C.size());
    for (size_t i = 0; i < C.size(); i++) w[i] = toC(C[i]);
    for (size_t j = 0; j < n; j++)
      for (size_t i = 0; i <= j; i++) {
        Cd s = 0;
        for (size_t l = 0; l < k; l++) s += a(i, l) * a(j, l);
        w[i + j * ld] = toC(al) * s + toC(be) * toC(C[i + j * ld]);
      }
    check(std::string(p) + "syrk", c, w, tol * 8);
  }
  {  // trsm (left, upper, N, non-unit): solve, then check op(A) X = alpha B
    auto T_ = A;
    for (size_t i = 0; i < m; i++) T_[i + i * ld] = fromC<T>(Cd(m + 2.0, 0));
    auto X = B;
    CB(PICK(T, cublasXtStrsm, cublasXtDtrsm, cublasXtCtrsm, cublasXtZtrsm, x, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_UPPER,
            CUBLAS_OP_N, CUBLAS_DIAG_NON_UNIT, m, n, &al, T_.data(), ld, X.data(), ld));
    std::vector<T> lhs(B.size());
    std::vector<Cd> w(B.size());
    for (size_t i = 0; i < B.size(); i++) lhs[i] = B[i], w[i] = toC(B[i]);
    for (size_t j = 0; j < n; j++)
      for (size_t i = 0; i < m; i++) {
        Cd s = 0;
        for (size_t l = i; l < m; l++) s += toC(T_[i + l * ld]) * toC(X[l + j * ld]);
        lhs[i + j * ld] = fromC<T>(s);
        w[i + j * ld] = toC(al) * toC(B[i + j * ld]);
      }
    check(std::string(p) + "trsm", lhs, w, tol * 64);
    // trmm back: C = 1 * A X must give alpha B again.
    std::vector<T> c(B.size());
    for (size_t i = 0; i < B.size(); i++) c[i] = B[i];
    const T one = fromC<T>(1);
    CB(PICK(T, cublasXtStrmm, cublasXtDtrmm, cublasXtCtrmm, cublasXtZtrmm, x, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_UPPER,
            CUBLAS_OP_N, CUBLAS_DIAG_NON_UNIT, m, n, &one, T_.data(), ld, X.data(), ld, c.data(), ld));
    check(std::string(p) + "trmm", c, w, tol * 64);
  }
  if constexpr (kCx<T>) {  // herk (lower, C)
    using RT = std::conditional_t<std::is_same_v<T, cuComplex>, float, double>;
    const RT ar = 2, br = 0.5;
    auto c = C;
    CB(PICK(T, cublasXtSsyrk, cublasXtDsyrk, cublasXtCherk, cublasXtZherk, x, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_C, n, k,
            &ar, A.data(), ld, &br, c.data(), ld));
    std::vector<Cd> w(C.size());
    for (size_t i = 0; i < C.size(); i++) w[i] = toC(C[i]);
    for (size_t j = 0; j < n; j++)
      for (size_t i = j; i < n; i++) {
        Cd s = 0;
        for (size_t l = 0; l < k; l++) s += std::conj(a(l, i)) * a(l, j);
        w[i + j * ld] = double(ar) * s + double(br) * toC(C[i + j * ld]);
        if (i == j) w[i + j * ld] = w[i + j * ld].real();
      }
    check(std::string(p) + "herk", c, w, tol * 8);
  }
}

int main() {
  cublasXtHandle_t x;
  if (cublasXtCreate(&x) != CUBLAS_STATUS_SUCCESS) {
    std::printf("FATAL cublasXtCreate\n");
    return 2;
  }
  int dev = 0, bd = 0;
  if (cublasXtDeviceSelect(x, 1, &dev) != CUBLAS_STATUS_SUCCESS || cublasXtSetBlockDim(x, 64) != CUBLAS_STATUS_SUCCESS ||
      cublasXtGetBlockDim(x, &bd) != CUBLAS_STATUS_SUCCESS || bd != 64) {
    std::printf("FAIL device select / block dim\n");
    return 1;
  }
  run<float>(x, "S"), run<double>(x, "D"), run<cuComplex>(x, "C"), run<cuDoubleComplex>(x, "Z");
  cublasXtDestroy(x);
  std::printf("%d passed, %d failed\n", g_pass, g_fail);
  return g_fail ? 1 : 0;
}
