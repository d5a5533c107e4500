// Double precision as scientific codes use it: a Gabor filter bank (exp and
// cos), the elementary functions on moderate and very large arguments (the
// trigonometric functions reduce large ones with extended-precision integer
// arithmetic), each compared with the host's libm within a few units in the
// last place.
#include <cmath>
#include <vector>
#include "check.cuh"

constexpr int kF = 10;

__global__ void elementary(const double* x, double* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  double v = x[i];
  double* o = out + size_t(i) * kF;
  o[0] = exp(v / 1e2);
  o[1] = cos(v);
  o[2] = sin(v);
  o[3] = log(fabs(v) + 1e-3);
  o[4] = sqrt(fabs(v));
  o[5] = tan(v);
  o[6] = atan2(v, 3.0);
  o[7] = fma(v, 1.000001, -0.5 * v);
  o[8] = 1.0 / (v + 3.14159);
  o[9] = tanh(v / 1e3);
}

// A bank of Gabor kernels sampled on a grid: exp(-(x'^2 + g^2 y'^2) / (2 s^2)) cos(2 pi x' / l + p).
__global__ void gabor(double* out, int w, int h, double theta, double lambda, double sigma, double gamma, double psi) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= w || y >= h) return;
  double xc = x - w / 2.0, yc = y - h / 2.0;
  double xr = xc * cos(theta) + yc * sin(theta), yr = -xc * sin(theta) + yc * cos(theta);
  out[size_t(y) * w + x] =
      exp(-(xr * xr + gamma * gamma * yr * yr) / (2 * sigma * sigma)) * cos(2 * M_PI * xr / lambda + psi);
}

static double host_f(int f, double v) {
  switch (f) {
    case 0: return std::exp(v / 1e2);
    case 1: return std::cos(v);
    case 2: return std::sin(v);
    case 3: return std::log(std::fabs(v) + 1e-3);
    case 4: return std::sqrt(std::fabs(v));
    case 5: return std::tan(v);
    case 6: return std::atan2(v, 3.0);
    case 7: return std::fma(v, 1.000001, -0.5 * v);
    case 8: return 1.0 / (v + 3.14159);
    default: return std::tanh(v / 1e3);
  }
}

int main() {
  std::vector<double> x;
  for (int i = 0; i < 4000; i++) x.push_back(-60.0 + 120.0 * i / 4000 + 1e-9 * (i % 17));
  for (int i = 0; i < 2000; i++)  // up to 1e300: the trigonometric functions' slow reduction
    x.push_back((i % 2 ? 1 : -1) * std::pow(10.0, 1.0 + 299.0 * i / 2000) * (1.0 + 1e-7 * (i % 13)));
  const int n = int(x.size());
  double *dx, *dout;
  CHECK(cudaMalloc(&dx, n * sizeof(double)));
  CHECK(cudaMalloc(&dout, size_t(n) * kF * sizeof(double)));
  CHECK(cudaMemcpy(dx, x.data(), n * sizeof(double), cudaMemcpyHostToDevice));
  elementary<<<(n + 127) / 128, 128>>>(dx, dout, n);
  CHECK(cudaGetLastError());
  std::vector<double> o(size_t(n) * kF);
  CHECK(cudaMemcpy(o.data(), dout, o.size() * sizeof(double), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; i++)
    for (int f = 0; f < kF; f++) {
      double want = host_f(f, x[i]), got = o[size_t(i) * kF + f];
      if (std::fabs(x[i]) > 1e3 && (f == 0 || f == 3 || f == 4 || f >= 6)) continue;  // only trig tested out there
      double tol = 4 * std::ldexp(std::numeric_limits<double>::epsilon(), std::ilogb(std::fmax(std::fabs(want), 1e-300)));
      if (f == 5) tol *= 4;  // tan near its poles
      EXPECT(std::fabs(got - want) <= tol, "f%d(%.17g) = %.17g, host %.17g", f, x[i], got, want);
    }
  const int w = 480, h = 270;
  double* dg;
  CHECK(cudaMalloc(&dg, size_t(w) * h * sizeof(double)));
  std::vector<double> g(size_t(w) * h);
  for (double theta : {0.0, M_PI / 4, M_PI / 3}) {
    gabor<<<dim3((w + 15) / 16, (h + 15) / 16), dim3(16, 16)>>>(dg, w, h, theta, 10.0, 4.0, 0.5, 0.3);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(g.data(), dg, g.size() * sizeof(double), cudaMemcpyDeviceToHost));
    for (int y = 0; y < h; y++)
      for (int xx = 0; xx < w; xx++) {
        double xc = xx - w / 2.0, yc = y - h / 2.0;
        double xr = xc * std::cos(theta) + yc * std::sin(theta), yr = -xc * std::sin(theta) + yc * std::cos(theta);
        double want = std::exp(-(xr * xr + 0.25 * yr * yr) / 32.0) * std::cos(2 * M_PI * xr / 10.0 + 0.3);
        EXPECT(std::fabs(g[size_t(y) * w + xx] - want) <= 1e-13, "gabor(%d,%d) theta %g: %.17g, host %.17g", xx, y,
               theta, g[size_t(y) * w + xx], want);
      }
  }
  CHECK(cudaFree(dx));
  CHECK(cudaFree(dout));
  CHECK(cudaFree(dg));
  std::printf("PASS double_math\n");
  return 0;
}
