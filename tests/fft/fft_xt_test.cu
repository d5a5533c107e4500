// cuFFT's Xt plan API on one GPU, as users write it, forwarded through
// Wormhole's drop-ins (libcudart.so.13 + libcufft.so.12) and checked on the
// host against a naive DFT in double precision of the same (rounded) inputs:
//   1. half-precision C2C, batched, out of place, forward;
//   2. half-precision 2D R2C then C2R (the round trip, scaled by 1/N);
//   3. bf16 C2C in place, inverse, on a stream;
//   4. single precision through cufftXtMakePlanMany's advanced layout and
//      cufftXtExec; a double Z2Z plan run by cufftXtExec;
//   5. what cuFFT refuses: a half size that is not a power of two, mixed
//      precisions, a typed cufftExec* on a half plan, a stride on the real
//      side of a half R2C, the multi-GPU calls.
// Tolerances are relative to the largest magnitude of the reference: the
// rounding of the 16-bit output (half 2^-11, bf16 2^-8) with room for the
// single-precision arithmetic; the measured errors are printed.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cufft.h>
#include <cufftXt.h>

#include <cmath>
#include <complex>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "check.cuh"  // CHECK, CHECK_STATUS (tests/forward/programs)

using cd = std::complex<double>;
static int failures = 0;

static void check(const char* what, double err, double tol) {
  const bool ok = err <= tol;
  std::printf("%s %s: max relative error %.3g (tolerance %.3g)\n", ok ? "ok  " : "FAIL", what, err, tol);
  if (!ok) failures++;
}
static void expect(cufftResult got, cufftResult want, const char* what) {
  const bool ok = got == want;
  std::printf("%s %s: %d (want %d)\n", ok ? "ok  " : "FAIL", what, int(got), int(want));
  if (!ok) failures++;
}

// Naive multi-dimensional DFT of one contiguous transform (sign -1 forward).
static std::vector<cd> dft(const std::vector<cd>& x, const std::vector<int>& n, int sign) {
  int total = 1;
  for (int v : n) total *= v;
  std::vector<cd> cur = x;
  int inner = total;
  for (size_t d = 0; d < n.size(); d++) {  // one dimension at a time
    const int len = n[d];
    inner /= len;
    const int outer = total / (len * inner);
    std::vector<cd> next(total);
    for (int o = 0; o < outer; o++)
      for (int i = 0; i < inner; i++)
        for (int k = 0; k < len; k++) {
          cd s = 0;
          for (int j = 0; j < len; j++)
            s += cur[(o * len + j) * inner + i] * std::polar(1.0, sign * 2 * M_PI * double(j) * k / len);
          next[(o * len + k) * inner + i] = s;
        }
    cur.swap(next);
  }
  return cur;
}

static double max_rel(const std::vector<cd>& got, const std::vector<cd>& want) {
  double m = 0, e = 0;
  for (size_t i = 0; i < want.size(); i++) m = std::max(m, std::abs(want[i]));
  for (size_t i = 0; i < want.size(); i++) e = std::max(e, std::abs(got[i] - want[i]));
  return e / (m > 0 ? m : 1);
}

// 16-bit complex storage: two halves (or two bf16) per element.
template <class H>
struct Narrow;
template <>
struct Narrow<__half> {
  static __half from(double v) { return __float2half_rn(float(v)); }
  static double to(__half h) { return __half2float(h); }
};
template <>
struct Narrow<__nv_bfloat16> {
  static __nv_bfloat16 from(double v) { return __float2bfloat16_rn(float(v)); }
  static double to(__nv_bfloat16 h) { return __bfloat162float(h); }
};

template <class H>
static std::vector<H> pack(const std::vector<cd>& x) {
  std::vector<H> v(2 * x.size());
  for (size_t i = 0; i < x.size(); i++) v[2 * i] = Narrow<H>::from(x[i].real()), v[2 * i + 1] = Narrow<H>::from(x[i].imag());
  return v;
}
template <class H>
static std::vector<cd> unpack(const std::vector<H>& v) {
  std::vector<cd> x(v.size() / 2);
  for (size_t i = 0; i < x.size(); i++) x[i] = cd(Narrow<H>::to(v[2 * i]), Narrow<H>::to(v[2 * i + 1]));
  return x;
}

static std::mt19937 rng(7);
static std::vector<cd> random_signal(size_t n) {
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<cd> x(n);
  for (auto& v : x) v = cd(u(rng), u(rng));
  return x;
}

// 1. Half C2C, 4 transforms of 256 points, out of place, forward.
static void half_c2c() {
  const int n = 256, batch = 4;
  std::vector<__half> h = pack<__half>(random_signal(size_t(n) * batch));
  std::vector<cd> x = unpack(h);  // the rounded inputs are the reference's
  void *din, *dout;
  CHECK(cudaMalloc(&din, h.size() * 2));
  CHECK(cudaMalloc(&dout, h.size() * 2));
  CHECK(cudaMemcpy(din, h.data(), h.size() * 2, cudaMemcpyHostToDevice));
  cufftHandle plan;
  CHECK_STATUS(cufftCreate(&plan), CUFFT_SUCCESS);
  long long nn[1] = {n};
  size_t work = 1;
  CHECK_STATUS(cufftXtMakePlanMany(plan, 1, nn, nullptr, 1, 0, CUDA_C_16F, nullptr, 1, 0, CUDA_C_16F, batch, &work, CUDA_C_16F), CUFFT_SUCCESS);
  CHECK_STATUS(cufftXtExec(plan, din, dout, CUFFT_FORWARD), CUFFT_SUCCESS);
  std::vector<__half> out(h.size());
  CHECK(cudaMemcpy(out.data(), dout, out.size() * 2, cudaMemcpyDeviceToHost));
  std::vector<cd> got = unpack(out), want;
  for (int b = 0; b < batch; b++) {
    std::vector<cd> one(x.begin() + b * n, x.begin() + (b + 1) * n);
    auto r = dft(one, {n}, -1);
    want.insert(want.end(), r.begin(), r.end());
  }
  check("half C2C 256 x4 forward", max_rel(got, want), 2e-3);
  // A typed execution of a 16-bit plan is refused.
  expect(cufftExecC2C(plan, (cufftComplex*)din, (cufftComplex*)dout, CUFFT_FORWARD), CUFFT_INVALID_PLAN,
         "cufftExecC2C on a half plan");
  CHECK_STATUS(cufftXtSetWorkAreaPolicy(plan, CUFFT_WORKAREA_MINIMAL, nullptr), CUFFT_SUCCESS);
  CHECK_STATUS(cufftDestroy(plan), CUFFT_SUCCESS);
  CHECK(cudaFree(din));
  CHECK(cudaFree(dout));
}

// 2. Half 2D R2C (32 x 64) then C2R; the round trip returns N times the input.
static void half_r2c_c2r() {
  const int ny = 32, nx = 64, half = nx / 2 + 1;
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<__half> real(size_t(ny) * nx);
  for (auto& v : real) v = __float2half_rn(float(u(rng)));
  void *dr, *dc, *dback;
  CHECK(cudaMalloc(&dr, real.size() * 2));
  CHECK(cudaMalloc(&dc, size_t(ny) * half * 4));
  CHECK(cudaMalloc(&dback, real.size() * 2));
  CHECK(cudaMemcpy(dr, real.data(), real.size() * 2, cudaMemcpyHostToDevice));
  cufftHandle fwd, inv;
  long long nn[2] = {ny, nx};
  size_t work;
  CHECK_STATUS(cufftCreate(&fwd), CUFFT_SUCCESS);
  CHECK_STATUS(cufftXtMakePlanMany(fwd, 2, nn, nullptr, 1, 0, CUDA_R_16F, nullptr, 1, 0, CUDA_C_16F, 1, &work, CUDA_C_16F), CUFFT_SUCCESS);
  CHECK_STATUS(cufftCreate(&inv), CUFFT_SUCCESS);
  CHECK_STATUS(cufftXtMakePlanMany(inv, 2, nn, nullptr, 1, 0, CUDA_C_16F, nullptr, 1, 0, CUDA_R_16F, 1, &work, CUDA_C_16F), CUFFT_SUCCESS);
  CHECK_STATUS(cufftXtExec(fwd, dr, dc, CUFFT_FORWARD), CUFFT_SUCCESS);
  std::vector<__half> spec(size_t(ny) * half * 2);
  CHECK(cudaMemcpy(spec.data(), dc, spec.size() * 2, cudaMemcpyDeviceToHost));
  std::vector<cd> x(real.size());
  for (size_t i = 0; i < x.size(); i++) x[i] = __half2float(real[i]);
  std::vector<cd> full = dft(x, {ny, nx}, -1), want;
  for (int y = 0; y < ny; y++)
    for (int k = 0; k < half; k++) want.push_back(full[size_t(y) * nx + k]);
  check("half R2C 32x64 (the non-redundant half of the spectrum)", max_rel(unpack(spec), want), 2e-3);
  CHECK_STATUS(cufftXtExec(inv, dc, dback, CUFFT_INVERSE), CUFFT_SUCCESS);
  std::vector<__half> back(real.size());
  CHECK(cudaMemcpy(back.data(), dback, back.size() * 2, cudaMemcpyDeviceToHost));
  // The inverse of the half-rounded spectrum, in double: what C2R computes.
  std::vector<cd> s = unpack(spec), herm(x.size());
  for (int y = 0; y < ny; y++)
    for (int k = 0; k < nx; k++)
      herm[size_t(y) * nx + k] = k < half ? s[size_t(y) * half + k] : std::conj(s[size_t((ny - y) % ny) * half + (nx - k)]);
  std::vector<cd> ref = dft(herm, {ny, nx}, +1), got(x.size());
  for (size_t i = 0; i < got.size(); i++) got[i] = __half2float(back[i]), ref[i] = ref[i].real();
  check("half C2R 32x64 (back to N times the input)", max_rel(got, ref), 2e-3);
  CHECK_STATUS(cufftDestroy(fwd), CUFFT_SUCCESS);
  CHECK_STATUS(cufftDestroy(inv), CUFFT_SUCCESS);
  CHECK(cudaFree(dr));
  CHECK(cudaFree(dc));
  CHECK(cudaFree(dback));
}

// 3. bf16 C2C, 2 transforms of 512 points, in place, inverse, on a stream.
static void bf16_c2c() {
  const int n = 512, batch = 2;
  std::vector<__nv_bfloat16> h = pack<__nv_bfloat16>(random_signal(size_t(n) * batch));
  std::vector<cd> x = unpack(h);
  void* d;
  CHECK(cudaMalloc(&d, h.size() * 2));
  cudaStream_t st;
  CHECK(cudaStreamCreate(&st));
  CHECK(cudaMemcpyAsync(d, h.data(), h.size() * 2, cudaMemcpyHostToDevice, st));
  cufftHandle plan;
  CHECK_STATUS(cufftCreate(&plan), CUFFT_SUCCESS);
  CHECK_STATUS(cufftSetStream(plan, st), CUFFT_SUCCESS);
  long long nn[1] = {n};
  size_t work;
  CHECK_STATUS(cufftXtMakePlanMany(plan, 1, nn, nullptr, 1, 0, CUDA_C_16BF, nullptr, 1, 0, CUDA_C_16BF, batch, &work,
                         CUDA_C_16BF), CUFFT_SUCCESS);
  CHECK_STATUS(cufftXtExec(plan, d, d, CUFFT_INVERSE), CUFFT_SUCCESS);
  std::vector<__nv_bfloat16> out(h.size());
  CHECK(cudaMemcpyAsync(out.data(), d, out.size() * 2, cudaMemcpyDeviceToHost, st));
  CHECK(cudaStreamSynchronize(st));
  std::vector<cd> want;
  for (int b = 0; b < batch; b++) {
    std::vector<cd> one(x.begin() + b * n, x.begin() + (b + 1) * n);
    auto r = dft(one, {n}, +1);
    want.insert(want.end(), r.begin(), r.end());
  }
  check("bf16 C2C 512 x2 inverse, in place, on a stream", max_rel(unpack(out), want), 1.2e-2);
  CHECK_STATUS(cufftDestroy(plan), CUFFT_SUCCESS);
  CHECK(cudaStreamDestroy(st));
  CHECK(cudaFree(d));
}

// 4. Single precision R2C through the advanced layout: 3 signals of 100
//    points interleaved (stride 3, distance 1) into padded rows of 64
//    complex values; and a double Z2Z plan run by cufftXtExec.
static void wide_precisions() {
  const int n = 100, batch = 3, odist = 64;
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<float> in(size_t(n) * batch);
  for (auto& v : in) v = float(u(rng));
  void *din, *dout;
  CHECK(cudaMalloc(&din, in.size() * 4));
  CHECK(cudaMalloc(&dout, size_t(odist) * batch * 8));
  CHECK(cudaMemcpy(din, in.data(), in.size() * 4, cudaMemcpyHostToDevice));
  cufftHandle plan;
  CHECK_STATUS(cufftCreate(&plan), CUFFT_SUCCESS);
  long long nn[1] = {n}, ie[1] = {n}, oe[1] = {odist};
  size_t work, est = 1;
  CHECK_STATUS(cufftXtGetSizeMany(plan, 1, nn, ie, batch, 1, CUDA_R_32F, oe, 1, odist, CUDA_C_32F, batch, &est, CUDA_C_32F), CUFFT_SUCCESS);
  CHECK_STATUS(cufftXtMakePlanMany(plan, 1, nn, ie, batch, 1, CUDA_R_32F, oe, 1, odist, CUDA_C_32F, batch, &work, CUDA_C_32F), CUFFT_SUCCESS);
  CHECK_STATUS(cufftXtExec(plan, din, dout, CUFFT_FORWARD), CUFFT_SUCCESS);
  std::vector<std::complex<float>> out(size_t(odist) * batch);
  CHECK(cudaMemcpy(out.data(), dout, out.size() * 8, cudaMemcpyDeviceToHost));
  std::vector<cd> got, want;
  for (int b = 0; b < batch; b++) {
    std::vector<cd> one(n);
    for (int j = 0; j < n; j++) one[j] = in[size_t(j) * batch + b];
    auto r = dft(one, {n}, -1);
    for (int k = 0; k <= n / 2; k++) want.push_back(r[k]), got.push_back(cd(out[size_t(b) * odist + k]));
  }
  check("single R2C 100 x3 interleaved (advanced layout)", max_rel(got, want), 1e-5);
  CHECK_STATUS(cufftDestroy(plan), CUFFT_SUCCESS);
  CHECK(cudaFree(din));
  CHECK(cudaFree(dout));

  const int m = 96;
  std::vector<cd> z = random_signal(m);
  void* dz;
  CHECK(cudaMalloc(&dz, m * 16));
  CHECK(cudaMemcpy(dz, z.data(), m * 16, cudaMemcpyHostToDevice));
  cufftHandle zp;
  CHECK_STATUS(cufftPlan1d(&zp, m, CUFFT_Z2Z, 1), CUFFT_SUCCESS);
  CHECK_STATUS(cufftXtExec(zp, dz, dz, CUFFT_FORWARD), CUFFT_SUCCESS);
  std::vector<cd> zo(m);
  CHECK(cudaMemcpy(zo.data(), dz, m * 16, cudaMemcpyDeviceToHost));
  check("double Z2Z 96 through cufftXtExec", max_rel(zo, dft(z, {m}, -1)), 1e-12);
  CHECK_STATUS(cufftDestroy(zp), CUFFT_SUCCESS);
  CHECK(cudaFree(dz));
}

// 5. Refusals.
static void refusals() {
  cufftHandle p;
  size_t work;
  CHECK_STATUS(cufftCreate(&p), CUFFT_SUCCESS);
  long long n100[1] = {100}, n64[1] = {64}, e[1] = {64};
  expect(cufftXtMakePlanMany(p, 1, n100, nullptr, 1, 0, CUDA_C_16F, nullptr, 1, 0, CUDA_C_16F, 1, &work, CUDA_C_16F),
         CUFFT_NOT_SUPPORTED, "half C2C of 100 points (not a power of two)");
  expect(cufftXtMakePlanMany(p, 1, n64, nullptr, 1, 0, CUDA_R_16F, nullptr, 1, 0, CUDA_C_32F, 1, &work, CUDA_C_32F),
         CUFFT_INVALID_TYPE, "half input, single-precision output");
  expect(cufftXtMakePlanMany(p, 1, n64, e, 2, 128, CUDA_R_16F, e, 1, 64, CUDA_C_16F, 1, &work, CUDA_C_16F),
         CUFFT_NOT_SUPPORTED, "half R2C with a stride on the real side");
  expect(cufftXtMakePlanMany(p, 1, n64, nullptr, 1, 0, CUDA_C_64F, nullptr, 1, 0, CUDA_C_64F, 1, &work, CUDA_C_32F),
         CUFFT_INVALID_TYPE, "double data, single-precision execution");
  // The handle is still unplanned: a valid plan can be made on it now.
  CHECK_STATUS(cufftXtMakePlanMany(p, 1, n64, nullptr, 1, 0, CUDA_C_16F, nullptr, 1, 0, CUDA_C_16F, 1, &work, CUDA_C_16F), CUFFT_SUCCESS);
  int gpus[2] = {0, 1};
  expect(cufftXtSetGPUs(p, 2, gpus), CUFFT_NOT_SUPPORTED, "cufftXtSetGPUs (multi-GPU plans)");
  cudaLibXtDesc* desc = nullptr;
  expect(cufftXtMalloc(p, &desc, CUFFT_XT_FORMAT_INPLACE), CUFFT_NOT_SUPPORTED, "cufftXtMalloc (descriptors)");
  CHECK_STATUS(cufftDestroy(p), CUFFT_SUCCESS);
}

int main() {
  half_c2c();
  half_r2c_c2r();
  bf16_c2c();
  wide_precisions();
  refusals();
  CHECK(cudaDeviceSynchronize());
  if (failures) {
    std::printf("FAIL: %d check(s) failed\n", failures);
    return 1;
  }
  std::printf("PASS: cuFFT Xt (half, bf16, single, double; refusals)\n");
  return 0;
}
