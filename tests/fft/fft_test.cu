// cuFFT as users write it, forwarded through Wormhole's drop-ins
// (libcudart.so.13 + libcufft.so.12) and checked on the host:
//   1. FFT convolution of two real signals (R2C, pointwise multiply in a
//      kernel, C2R, scale) against a direct convolution;
//   2. a 2D C2C forward + inverse round trip (in place);
//   3. a batched cufftPlanMany with strides and distances (interleaved
//      signals) against a naive DFT;
//   4. Z2Z in double precision against a naive DFT, out of place;
//   5. a 3D D2Z + Z2D round trip in place (the padded real layout);
// plus the synchronous refusals of bad arguments.
// Tolerances (relative to the largest magnitude of the reference):
// single precision 1e-4, double precision 1e-10; the measured errors are
// printed.
#include <cuda_runtime.h>
#include <cufft.h>
#include <cufftXt.h>

#include <cmath>
#include <complex>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "wh_check.cuh"
#define CF(x) WH_REQUIRE(x, CUFFT_SUCCESS, "cufftResult")

static int failures = 0;
static void check(bool ok, const char* what, double err, double tol) {
  std::printf("%s %s: max relative error %.3g (tolerance %.3g)\n", ok ? "ok  " : "FAIL", what, err, tol);
  if (!ok) failures++;
}
static void expect(cufftResult got, cufftResult want, const char* what) {
  bool ok = got == want;
  std::printf("%s %s: %d (want %d)\n", ok ? "ok  " : "FAIL", what, int(got), int(want));
  if (!ok) failures++;
}

__global__ void mul_scale(cufftComplex* a, const cufftComplex* b, int n, float scale) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    cufftComplex x = a[i], y = b[i];
    a[i] = make_cuFloatComplex((x.x * y.x - x.y * y.y) * scale, (x.x * y.y + x.y * y.x) * scale);
  }
}

// Naive DFT of `n` points with stride `st` (sign -1 forward).
template <class T>
static std::vector<std::complex<T>> dft(const std::complex<T>* x, int n, int st, int sign) {
  std::vector<std::complex<T>> y(n);
  for (int k = 0; k < n; k++) {
    std::complex<double> acc = 0;
    for (int j = 0; j < n; j++) {
      double a = sign * 2 * M_PI * double(j) * double(k) / n;
      acc += std::complex<double>(x[j * st]) * std::complex<double>(std::cos(a), std::sin(a));
    }
    y[k] = std::complex<T>(acc);
  }
  return y;
}

static void convolution() {
  // Linear convolution of a (na) and b (nb) through circular convolution
  // of length N >= na + nb - 1 (zero padded).
  const int na = 300, nb = 77, N = 512, H = N / 2 + 1;
  std::vector<float> a(N, 0.f), b(N, 0.f);
  srand(1);
  for (int i = 0; i < na; i++) a[i] = float(rand()) / RAND_MAX - 0.5f;
  for (int i = 0; i < nb; i++) b[i] = float(rand()) / RAND_MAX - 0.5f;
  float *da, *db;
  cufftComplex *fa, *fb;
  CK(cudaMalloc(&da, N * sizeof(float)));
  CK(cudaMalloc(&db, N * sizeof(float)));
  CK(cudaMalloc(&fa, H * sizeof(cufftComplex)));
  CK(cudaMalloc(&fb, H * sizeof(cufftComplex)));
  CK(cudaMemcpy(da, a.data(), N * sizeof(float), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(db, b.data(), N * sizeof(float), cudaMemcpyHostToDevice));
  cufftHandle fwd, inv;
  CF(cufftPlan1d(&fwd, N, CUFFT_R2C, 1));
  CF(cufftPlan1d(&inv, N, CUFFT_C2R, 1));
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  CF(cufftSetStream(fwd, s));
  CF(cufftSetStream(inv, s));
  CF(cufftExecR2C(fwd, da, fa));
  CF(cufftExecR2C(fwd, db, fb));
  mul_scale<<<(H + 127) / 128, 128, 0, s>>>(fa, fb, H, 1.f / N);  // cuFFT is unnormalised
  CF(cufftExecC2R(inv, fa, da));
  CK(cudaStreamSynchronize(s));
  std::vector<float> got(N);
  CK(cudaMemcpy(got.data(), da, N * sizeof(float), cudaMemcpyDeviceToHost));
  double maxref = 0, maxerr = 0;
  for (int i = 0; i < na + nb - 1; i++) {
    double ref = 0;
    for (int j = 0; j < nb; j++)
      if (i - j >= 0 && i - j < na) ref += double(a[i - j]) * b[j];
    maxref = std::fmax(maxref, std::fabs(ref));
    maxerr = std::fmax(maxerr, std::fabs(ref - got[i]));
  }
  for (int i = na + nb - 1; i < N; i++) maxerr = std::fmax(maxerr, std::fabs(got[i]));  // the padding stays 0
  check(maxerr / maxref < 1e-4, "R2C/C2R convolution (512 points)", maxerr / maxref, 1e-4);
  CF(cufftDestroy(fwd));
  CF(cufftDestroy(inv));
  CK(cudaStreamDestroy(s));
  cudaFree(da), cudaFree(db), cudaFree(fa), cudaFree(fb);
}

static void round_trip_2d() {
  const int nx = 48, ny = 40, n = nx * ny;
  std::vector<cufftComplex> x(n), y(n);
  for (int i = 0; i < n; i++) x[i] = make_cuFloatComplex(std::sin(0.1f * i), std::cos(0.37f * i));
  cufftComplex* d;
  CK(cudaMalloc(&d, n * sizeof(cufftComplex)));
  CK(cudaMemcpy(d, x.data(), n * sizeof(cufftComplex), cudaMemcpyHostToDevice));
  cufftHandle p;
  CF(cufftCreate(&p));
  size_t work = 1;
  CF(cufftMakePlan2d(p, nx, ny, CUFFT_C2C, &work));
  CF(cufftExecC2C(p, d, d, CUFFT_FORWARD));
  // The first coefficient is the sum of the input (checks the forward leg alone).
  cufftComplex c0;
  CK(cudaMemcpy(&c0, d, sizeof c0, cudaMemcpyDeviceToHost));
  std::complex<double> sum = 0;
  for (auto v : x) sum += std::complex<double>(v.x, v.y);
  double e0 = std::abs(std::complex<double>(c0.x, c0.y) - sum) / std::abs(sum);
  CF(cufftExecC2C(p, d, d, CUFFT_INVERSE));
  CK(cudaMemcpy(y.data(), d, n * sizeof(cufftComplex), cudaMemcpyDeviceToHost));
  double maxerr = 0;
  for (int i = 0; i < n; i++)
    maxerr = std::fmax(maxerr, std::abs(std::complex<double>(y[i].x / n - x[i].x, y[i].y / n - x[i].y)));
  check(maxerr < 1e-4 && e0 < 1e-4, "2D C2C 48x40 forward+inverse in place", std::fmax(maxerr, e0), 1e-4);
  std::printf("     2D plan work size reported: %zu bytes\n", work);
  CF(cufftDestroy(p));
  cudaFree(d);
}

static void batched_strided() {
  // 3 signals of 64 points interleaved (stride 3, dist 1) in, and written
  // out with stride 2, dist 128 (each transform spread over its own block).
  const int n = 64, batch = 3, is = 3, id = 1, os = 2, od = 128;
  std::vector<std::complex<float>> x(n * batch);
  for (int i = 0; i < n * batch; i++) x[i] = {std::cos(0.05f * i * i), 0.25f * (i % 7)};
  cufftComplex *di, *dout;
  CK(cudaMalloc(&di, x.size() * sizeof(cufftComplex)));
  CK(cudaMalloc(&dout, od * batch * sizeof(cufftComplex)));
  CK(cudaMemset(dout, 0, od * batch * sizeof(cufftComplex)));
  CK(cudaMemcpy(di, x.data(), x.size() * sizeof(cufftComplex), cudaMemcpyHostToDevice));
  int N[1] = {n}, inembed[1] = {n * is}, onembed[1] = {n * os};
  cufftHandle p;
  CF(cufftPlanMany(&p, 1, N, inembed, is, id, onembed, os, od, CUFFT_C2C, batch));
  CF(cufftExecC2C(p, di, dout, CUFFT_FORWARD));
  std::vector<std::complex<float>> y(od * batch);
  CK(cudaMemcpy(y.data(), dout, y.size() * sizeof(cufftComplex), cudaMemcpyDeviceToHost));
  double maxerr = 0, maxref = 0;
  bool gaps_zero = true;
  for (int b = 0; b < batch; b++) {
    auto ref = dft(x.data() + b * id, n, is, -1);
    for (int k = 0; k < n; k++) {
      maxref = std::fmax(maxref, std::abs(ref[k]));
      maxerr = std::fmax(maxerr, std::abs(std::complex<double>(ref[k]) - std::complex<double>(y[b * od + k * os])));
      if (y[b * od + k * os + 1] != std::complex<float>(0)) gaps_zero = false;  // between strided outputs
    }
  }
  check(maxerr / maxref < 1e-4 && gaps_zero, "PlanMany C2C batch 3, istride 3/idist 1, ostride 2/odist 128",
        maxerr / maxref, 1e-4);
  CF(cufftDestroy(p));
  cudaFree(di), cudaFree(dout);
}

static void z2z_double() {
  const int n = 100;
  std::vector<std::complex<double>> x(n), y(n);
  for (int i = 0; i < n; i++) x[i] = {std::sin(0.3 * i) + 0.01 * i, std::cos(1.7 * i)};
  cufftDoubleComplex *di, *dout;
  CK(cudaMalloc(&di, n * sizeof(cufftDoubleComplex)));
  CK(cudaMalloc(&dout, n * sizeof(cufftDoubleComplex)));
  CK(cudaMemcpy(di, x.data(), n * sizeof(cufftDoubleComplex), cudaMemcpyHostToDevice));
  cufftHandle p;
  CF(cufftPlan1d(&p, n, CUFFT_Z2Z, 1));
  double maxerr = 0, maxref = 0;
  for (int sign : {CUFFT_FORWARD, CUFFT_INVERSE}) {
    CF(cufftExecZ2Z(p, di, dout, sign));
    CK(cudaMemcpy(y.data(), dout, n * sizeof(cufftDoubleComplex), cudaMemcpyDeviceToHost));
    auto ref = dft(x.data(), n, 1, sign);
    for (int k = 0; k < n; k++) {
      maxref = std::fmax(maxref, std::abs(ref[k]));
      maxerr = std::fmax(maxerr, std::abs(ref[k] - y[k]));
    }
  }
  check(maxerr / maxref < 1e-10, "Z2Z 100 points forward and inverse vs naive DFT", maxerr / maxref, 1e-10);
  CF(cufftDestroy(p));
  cudaFree(di), cudaFree(dout);
}

static void real_3d_in_place() {
  // In place, the real rows are padded to 2*(nz/2+1) doubles, as cuFFT defines.
  const int nx = 6, ny = 5, nz = 10, pz = 2 * (nz / 2 + 1), n = nx * ny * nz;
  std::vector<double> x(nx * ny * pz, 0.0), y(x.size());
  for (int i = 0; i < nx * ny; i++)
    for (int k = 0; k < nz; k++) x[i * pz + k] = std::sin(0.7 * i + 0.3 * k) + 0.1 * k;
  double* d;
  CK(cudaMalloc(&d, x.size() * sizeof(double)));
  CK(cudaMemcpy(d, x.data(), x.size() * sizeof(double), cudaMemcpyHostToDevice));
  cufftHandle f, b;
  CF(cufftPlan3d(&f, nx, ny, nz, CUFFT_D2Z));
  CF(cufftPlan3d(&b, nx, ny, nz, CUFFT_Z2D));
  CF(cufftExecD2Z(f, d, reinterpret_cast<cufftDoubleComplex*>(d)));
  // The first coefficient is the sum of the input.
  cufftDoubleComplex c0;
  CK(cudaMemcpy(&c0, d, sizeof c0, cudaMemcpyDeviceToHost));
  double sum = 0;
  for (int i = 0; i < nx * ny; i++)
    for (int k = 0; k < nz; k++) sum += x[i * pz + k];
  CF(cufftExecZ2D(b, reinterpret_cast<cufftDoubleComplex*>(d), d));
  CK(cudaMemcpy(y.data(), d, y.size() * sizeof(double), cudaMemcpyDeviceToHost));
  double maxref = 0, maxerr = 0;
  for (double v : x) maxref = std::fmax(maxref, std::fabs(v));
  for (int i = 0; i < nx * ny; i++)
    for (int k = 0; k < nz; k++) maxerr = std::fmax(maxerr, std::fabs(y[i * pz + k] / n - x[i * pz + k]) / maxref);
  maxerr = std::fmax(maxerr, std::fabs(c0.x - sum) / std::fabs(sum));
  check(maxerr < 1e-10, "3D D2Z+Z2D 6x5x10 round trip in place", maxerr, 1e-10);
  CF(cufftDestroy(f));
  CF(cufftDestroy(b));
  cudaFree(d);
}

static void refusals() {
  cufftHandle p;
  expect(cufftPlan1d(&p, 0, CUFFT_C2C, 1), CUFFT_INVALID_SIZE, "cufftPlan1d nx=0");
  expect(cufftPlan1d(&p, 16, CUFFT_C2C, 0), CUFFT_INVALID_SIZE, "cufftPlan1d batch=0");
  expect(cufftPlan1d(&p, 16, cufftType(0x77), 1), CUFFT_INVALID_TYPE, "cufftPlan1d bad type");
  int n[4] = {4, 4, 4, 4};
  expect(cufftPlanMany(&p, 4, n, nullptr, 1, 1, nullptr, 1, 1, CUFFT_C2C, 1), CUFFT_INVALID_SIZE, "cufftPlanMany rank 4");
  // Too large for any device: refused by the server when the plan is made.
  expect(cufftPlan3d(&p, 1 << 20, 1 << 20, 1 << 20, CUFFT_C2C), CUFFT_INVALID_SIZE, "cufftPlan3d 2^60 points");
  expect(cufftExecC2C(12345, nullptr, nullptr, CUFFT_FORWARD), CUFFT_INVALID_PLAN, "exec on a forged handle");
  CF(cufftPlan1d(&p, 16, CUFFT_R2C, 1));
  cufftComplex* d;
  CK(cudaMalloc(&d, 16 * sizeof(cufftComplex)));
  expect(cufftExecC2C(p, d, d, CUFFT_FORWARD), CUFFT_INVALID_PLAN, "C2C exec on an R2C plan");
  CF(cufftDestroy(p));
  expect(cufftDestroy(p), CUFFT_INVALID_PLAN, "double destroy");
  CF(cufftPlan1d(&p, 16, CUFFT_C2C, 1));
  expect(cufftExecC2C(p, d, d, 0), CUFFT_INVALID_VALUE, "C2C direction 0");
  // A transform that runs past the allocation: posted, so the error comes
  // back at the next synchronising call, and the session goes on.
  CF(cufftDestroy(p));
  CF(cufftPlan1d(&p, 64, CUFFT_C2C, 1));
  CF(cufftExecC2C(p, d, d, CUFFT_FORWARD));
  cudaError_t e = cudaDeviceSynchronize();
  bool ok = e != cudaSuccess;
  std::printf("%s out-of-range exec reported at sync: %s\n", ok ? "ok  " : "FAIL", cudaGetErrorString(e));
  if (!ok) failures++;
  CK(cudaDeviceSynchronize());
  CF(cufftDestroy(p));
  // Work areas: the server's plan owns its own (size 0 on the sim device).
  CF(cufftPlan1d(&p, 32, CUFFT_C2C, 4));
  size_t ws = 123;
  CF(cufftGetSize(p, &ws));
  std::printf("     work size of a C2C plan: %zu bytes\n", ws);
  CF(cufftSetAutoAllocation(p, 0));
  CF(cufftSetWorkArea(p, d));
  int gpus[1] = {0};
  expect(cufftXtSetGPUs(p, 1, gpus), CUFFT_NOT_SUPPORTED, "cufftXtSetGPUs (not forwarded)");
  CF(cufftDestroy(p));
  int v = 0;
  CF(cufftGetVersion(&v));
  expect(cufftResult(v == CUFFT_VERSION ? 0 : 1), CUFFT_SUCCESS, "cufftGetVersion");
  cudaFree(d);
}

int main() {
  convolution();
  round_trip_2d();
  batched_strided();
  z2z_double();
  real_3d_in_place();
  refusals();
  if (failures) {
    std::printf("%d FAILED\n", failures);
    return 1;
  }
  std::printf("all cuFFT checks passed\n");
  return 0;
}
