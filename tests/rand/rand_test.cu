// cuRAND as users write it, forwarded through Wormhole's drop-ins
// (libcudart.so.13 + libcurand.so.10) and checked on the host:
//   1. Monte-Carlo pi with the host API (XORWOW device generator) and the
//      same with the device API in a kernel (curand_init + curand_uniform):
//      the numbers are compared where the sequences coincide (thread t of
//      the host API's 4096 owns subsequence t: out[t + 4096 k] is that
//      thread's k-th value), and both estimates of pi;
//   2. raw bits, normals and an offset against the device API for XORWOW,
//      Philox4_32_10 and MRG32k3a;
//   3. MTGP32 against the device API (64 states made by
//      curandMakeMTGP32KernelState, a kernel of 64 blocks of 256 threads);
//      MT19937 and MTGP32 (and Philox, MRG32k3a): mean, variance,
//      chi-square (100 bins) and Kolmogorov-Smirnov on 2^20 uniforms;
//   4. normal, log-normal and Poisson moments;
//   5. Sobol32 (plain and scrambled, 3 dimensions): the first points against
//      the van der Corput sequence and against Gray-code sums of the
//      direction vectors curandGetDirectionVectors32 returns, and against the
//      device API's curand_init(direction vectors, offset); Sobol64 bits;
//   6. a host generator equals the device generator with the same seed;
//      a generator on a stream;
//   7. a discrete Poisson distribution (curandCreatePoissonDistribution)
//      sampled in a kernel by curand_discrete, and the device API's
//      curand_poisson: mean and variance;
//   8. cuRAND's refusals (type, length, range) and version queries.
// Bounds: moments within 5 standard errors; chi-square below 148.2 (99
// degrees of freedom, p = 0.001); KS distance below 1.95/sqrt(n) (p = 0.001).
#include <cuda_runtime.h>
#include <curand.h>
#include <curand_kernel.h>
#include <curand_mtgp32_host.h>
#include <curand_mtgp32dc_p_11213.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "wh_check.cuh"
#define CR(x) WH_REQUIRE(x, CURAND_STATUS_SUCCESS, "curandStatus")

static int failures = 0;
#define EXPECT(c, ...)                                      \
  do {                                                      \
    if (!(c)) {                                             \
      std::printf("FAIL line %d: %s: ", __LINE__, #c);      \
      std::printf(__VA_ARGS__);                             \
      std::printf("\n");                                    \
      failures++;                                           \
    }                                                       \
  } while (0)

constexpr int kThreads = 4096;  // the host API's threads (see the header)
constexpr unsigned long long kSeed = 1234ULL;

// ------------------------------------------------------------ kernels
// Thread i stands for host-API thread tid[i]: it initialises subsequence
// tid[i] at `skip` and writes its k values at out[i * k + j].
template <class State>
__global__ void uniform_kernel(const int* tid, int nt, int k, unsigned long long seed, unsigned long long skip,
                               float* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= nt) return;
  State s;
  curand_init(seed, tid[i], skip, &s);
  for (int j = 0; j < k; j++) out[i * k + j] = curand_uniform(&s);
}
template <class State>
__global__ void bits_kernel(const int* tid, int nt, int k, unsigned long long seed, unsigned int* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= nt) return;
  State s;
  curand_init(seed, tid[i], 0, &s);
  for (int j = 0; j < k; j++) out[i * k + j] = curand(&s);
}
template <class State>
__global__ void normal_kernel(const int* tid, int nt, int k, unsigned long long seed, float* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= nt) return;
  State s;
  curand_init(seed, tid[i], 0, &s);
  for (int j = 0; j < k; j++) out[i * k + j] = curand_normal(&s);
}
// Monte-Carlo pi with the device API: each thread draws `pairs` points.
__global__ void pi_kernel(int pairs, unsigned long long seed, unsigned int* hits) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  curandState s;
  curand_init(seed, t, 0, &s);
  unsigned int in = 0;
  for (int j = 0; j < pairs; j++) {
    float x = curand_uniform(&s), y = curand_uniform(&s);
    if (x * x + y * y <= 1.0f) in++;
  }
  hits[t] = in;
}
// MTGP32 with the device API: block b, thread t writes its j-th value at
// out[16384 j + 256 b + t].
__global__ void mtgp_kernel(curandStateMtgp32_t* st, int k, unsigned int* out) {
  for (int j = 0; j < k; j++) out[j * 16384 + blockIdx.x * 256 + threadIdx.x] = curand(&st[blockIdx.x]);
}
// Discrete Poisson samples: curand_discrete (the library's table) and curand_poisson.
__global__ void discrete_kernel(curandDiscreteDistribution_t dist, double lambda, int k, unsigned int* a,
                                unsigned int* b) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  curandStatePhilox4_32_10_t s;
  curand_init(77, t, 0, &s);
  for (int j = 0; j < k; j++) {
    a[t * k + j] = curand_discrete(&s, dist);
    b[t * k + j] = curand_poisson(&s, lambda);
  }
}
// Sobol32 with the device API: one dimension per thread, n points from `offset`.
__global__ void sobol_kernel(curandDirectionVectors32_t* dirs, const unsigned int* scramble, int dims, int n,
                             unsigned int offset, unsigned int* out) {
  int d = threadIdx.x;
  if (d >= dims) return;
  if (scramble) {
    curandStateScrambledSobol32 s;
    curand_init(dirs[d], scramble[d], offset, &s);
    for (int j = 0; j < n; j++) out[d * n + j] = curand(&s);
  } else {
    curandStateSobol32 s;
    curand_init(dirs[d], offset, &s);
    for (int j = 0; j < n; j++) out[d * n + j] = curand(&s);
  }
}

// ------------------------------------------------------------ helpers
template <class T>
std::vector<T> device_generate(curandRngType_t type, size_t n, void (*gen)(curandGenerator_t, T*, size_t),
                               unsigned long long offset = 0) {
  curandGenerator_t g;
  CR(curandCreateGenerator(&g, type));
  CR(curandSetPseudoRandomGeneratorSeed(g, kSeed));
  if (offset) CR(curandSetGeneratorOffset(g, offset));
  T* d;
  CK(cudaMalloc(&d, n * sizeof(T)));
  gen(g, d, n);
  std::vector<T> h(n);
  CK(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
  CK(cudaFree(d));
  CR(curandDestroyGenerator(g));
  return h;
}
void gen_uniform(curandGenerator_t g, float* d, size_t n) { CR(curandGenerateUniform(g, d, n)); }
void gen_bits(curandGenerator_t g, unsigned int* d, size_t n) { CR(curandGenerate(g, d, n)); }
void gen_normal(curandGenerator_t g, float* d, size_t n) { CR(curandGenerateNormal(g, d, n, 0.0f, 1.0f)); }

// The threads compared with the device API: the first and last 16 and a few between.
std::vector<int> sample_threads() {
  std::vector<int> t;
  for (int i = 0; i < 16; i++) t.push_back(i);
  for (int i : {255, 256, 1000, 2047, 2048, 3333}) t.push_back(i);
  for (int i = kThreads - 16; i < kThreads; i++) t.push_back(i);
  return t;
}

template <class T, class K>
std::vector<T> run_kernel(K kernel, const std::vector<int>& tid, int k, auto... args) {
  int* dt;
  T* d;
  const int nt = int(tid.size());
  CK(cudaMalloc(&dt, nt * sizeof(int)));
  CK(cudaMalloc(&d, size_t(nt) * k * sizeof(T)));
  CK(cudaMemcpy(dt, tid.data(), nt * sizeof(int), cudaMemcpyHostToDevice));
  kernel<<<(nt + 63) / 64, 64>>>(dt, nt, k, args..., d);
  CK(cudaGetLastError());
  std::vector<T> h(size_t(nt) * k);
  CK(cudaMemcpy(h.data(), d, h.size() * sizeof(T), cudaMemcpyDeviceToHost));
  CK(cudaFree(dt));
  CK(cudaFree(d));
  return h;
}

// Host-API output vs kernel output: exact (tol 0) or within tol.
template <class T>
int compare(const char* what, const std::vector<T>& host, const std::vector<T>& dev, const std::vector<int>& tid,
            int k, double tol, unsigned long long offset = 0) {
  int bad = 0;
  double worst = 0;
  for (size_t i = 0; i < tid.size(); i++)
    for (int j = 0; j < k; j++) {
      // Host value index g - offset, where g = tid + 4096 (j + skip).
      const unsigned long long g = tid[i] + (unsigned long long)kThreads * (j + offset / kThreads);
      if (g < offset || g - offset >= host.size()) continue;
      const double h = double(host[g - offset]), d = double(dev[i * k + j]);
      worst = std::max(worst, std::fabs(h - d));
      if (!(std::fabs(h - d) <= tol)) {
        if (bad < 3) std::printf("  %s: thread %d value %d: host %.9g device %.9g\n", what, tid[i], j, h, d);
        bad++;
      }
    }
  std::printf("%s: %zu values compared with the device API, largest difference %.3g\n", what, tid.size() * k, worst);
  return bad;
}

struct Moments {
  double mean = 0, var = 0;
};
template <class T>
Moments moments(const std::vector<T>& v) {
  Moments m;
  for (T x : v) m.mean += double(x);
  m.mean /= v.size();
  for (T x : v) m.var += (double(x) - m.mean) * (double(x) - m.mean);
  m.var /= (v.size() - 1);
  return m;
}

// ------------------------------------------------------------ 1. Monte-Carlo pi
void monte_carlo_pi() {
  const int k = 64;  // values per thread: 32 points each
  const size_t n = size_t(kThreads) * k;
  std::vector<float> u = device_generate<float>(CURAND_RNG_PSEUDO_XORWOW, n, gen_uniform);
  // The host API's values of thread t are u[t + 4096 j]: pair them per thread as the kernel does.
  size_t in_host = 0;
  for (int t = 0; t < kThreads; t++)
    for (int j = 0; j < k; j += 2) {
      float x = u[t + size_t(kThreads) * j], y = u[t + size_t(kThreads) * (j + 1)];
      if (x * x + y * y <= 1.0f) in_host++;
    }
  unsigned int* dh;
  CK(cudaMalloc(&dh, kThreads * sizeof(unsigned int)));
  pi_kernel<<<kThreads / 256, 256>>>(k / 2, kSeed, dh);
  CK(cudaGetLastError());
  std::vector<unsigned int> hits(kThreads);
  CK(cudaMemcpy(hits.data(), dh, kThreads * sizeof(unsigned int), cudaMemcpyDeviceToHost));
  CK(cudaFree(dh));
  size_t in_dev = 0;
  for (unsigned int h : hits) in_dev += h;
  const double pts = double(kThreads) * k / 2;
  const double pi_host = 4.0 * in_host / pts, pi_dev = 4.0 * in_dev / pts;
  std::printf("Monte-Carlo pi from %.0f points: host API %.6f, device API %.6f\n", pts, pi_host, pi_dev);
  EXPECT(in_host == in_dev, "host API hits %zu, device API hits %zu", in_host, in_dev);
  // sd of the estimate: 4 sqrt(p(1-p)/N) = 0.0045 for N = 131072; 5 sd.
  EXPECT(std::fabs(pi_host - M_PI) < 0.023, "pi %.6f", pi_host);
  // And the numbers themselves, for sampled threads.
  auto tid = sample_threads();
  auto dev = run_kernel<float>(uniform_kernel<curandStateXORWOW_t>, tid, k, kSeed, 0ULL);
  failures += compare("XORWOW uniform", u, dev, tid, k, 0.0) != 0;
}

// ------------------------------------------------------------ 2. bits, normals, offsets
void against_device_api() {
  auto tid = sample_threads();
  const int k = 8;
  const size_t n = size_t(kThreads) * k;
  {
    auto h = device_generate<unsigned int>(CURAND_RNG_PSEUDO_XORWOW, n, gen_bits);
    auto d = run_kernel<unsigned int>(bits_kernel<curandStateXORWOW_t>, tid, k, kSeed);
    failures += compare("XORWOW bits", h, d, tid, k, 0.0) != 0;
  }
  {
    auto h = device_generate<unsigned int>(CURAND_RNG_PSEUDO_PHILOX4_32_10, n, gen_bits);
    auto d = run_kernel<unsigned int>(bits_kernel<curandStatePhilox4_32_10_t>, tid, k, kSeed);
    failures += compare("Philox4_32_10 bits", h, d, tid, k, 0.0) != 0;
  }
  {
    auto h = device_generate<unsigned int>(CURAND_RNG_PSEUDO_MRG32K3A, n, gen_bits);
    auto d = run_kernel<unsigned int>(bits_kernel<curandStateMRG32k3a_t>, tid, k, kSeed);
    failures += compare("MRG32k3a bits", h, d, tid, k, 0.0) != 0;
  }
  // Normals: Box-Muller in single precision; the device's fast sine and
  // cosine differ from the host's in the last bits.
  {
    auto h = device_generate<float>(CURAND_RNG_PSEUDO_XORWOW, n, gen_normal);
    auto d = run_kernel<float>(normal_kernel<curandStateXORWOW_t>, tid, k, kSeed);
    failures += compare("XORWOW normal", h, d, tid, k, 1e-4) != 0;
  }
  {
    auto h = device_generate<float>(CURAND_RNG_PSEUDO_PHILOX4_32_10, n, gen_normal);
    auto d = run_kernel<float>(normal_kernel<curandStatePhilox4_32_10_t>, tid, k, kSeed);
    failures += compare("Philox4_32_10 normal", h, d, tid, k, 1e-4) != 0;
  }
  // An offset of 3 * 4096 + 5: value g of the stream starts the output.
  {
    const unsigned long long off = 3ULL * kThreads + 5;
    auto h = device_generate<float>(CURAND_RNG_PSEUDO_XORWOW, n, gen_uniform, off);
    auto d = run_kernel<float>(uniform_kernel<curandStateXORWOW_t>, tid, k, kSeed, 3ULL);
    failures += compare("XORWOW uniform at an offset", h, d, tid, k, 0.0, off) != 0;
  }
  // Two calls continue one stream: the second call's first value is value n of one call of 2n.
  {
    curandGenerator_t g;
    CR(curandCreateGenerator(&g, CURAND_RNG_PSEUDO_XORWOW));
    CR(curandSetPseudoRandomGeneratorSeed(g, kSeed));
    float* d;
    const size_t half = 5000;
    CK(cudaMalloc(&d, 2 * half * sizeof(float)));
    CR(curandGenerateUniform(g, d, half));
    CR(curandGenerateUniform(g, d + half, half));
    std::vector<float> two(2 * half);
    CK(cudaMemcpy(two.data(), d, two.size() * sizeof(float), cudaMemcpyDeviceToHost));
    CK(cudaFree(d));
    CR(curandDestroyGenerator(g));
    auto one = device_generate<float>(CURAND_RNG_PSEUDO_XORWOW, 2 * half, gen_uniform);
    EXPECT(one == two, "two calls of %zu differ from one call of %zu", half, 2 * half);
  }
}

// ------------------------------------------------------------ 3. Mersenne Twisters
void uniform_statistics(const char* name, const std::vector<float>& u) {
  const size_t n = u.size();
  Moments m = moments(u);
  const double se_mean = std::sqrt(1.0 / 12 / n), se_var = std::sqrt(1.0 / 180 / n);
  std::vector<size_t> bins(100);
  for (float x : u) {
    EXPECT(x > 0.0f && x <= 1.0f, "%s: %g outside (0, 1]", name, x);
    bins[std::min<size_t>(99, size_t(x * 100))]++;
  }
  double chi = 0;
  for (size_t b : bins) chi += (b - n / 100.0) * (b - n / 100.0) / (n / 100.0);
  std::vector<float> s = u;
  std::sort(s.begin(), s.end());
  double ks = 0;
  for (size_t i = 0; i < n; i++)
    ks = std::max(ks, std::max(std::fabs(double(i + 1) / n - s[i]), std::fabs(s[i] - double(i) / n)));
  std::printf("%s: %zu uniforms: mean %.5f var %.5f chi2(99) %.1f KS %.5f (bound %.5f)\n", name, n, m.mean, m.var,
              chi, ks, 1.95 / std::sqrt(double(n)));
  EXPECT(std::fabs(m.mean - 0.5) < 5 * se_mean, "%s mean %g", name, m.mean);
  EXPECT(std::fabs(m.var - 1.0 / 12) < 5 * se_var, "%s variance %g", name, m.var);
  EXPECT(chi < 148.2, "%s chi-square %g", name, chi);
  EXPECT(ks < 1.95 / std::sqrt(double(n)), "%s KS %g", name, ks);
  // Not constant, not repeating: neighbours differ.
  size_t same = 0;
  for (size_t i = 1; i < n; i++) same += u[i] == u[i - 1];
  EXPECT(same < 10, "%s: %zu equal neighbours", name, same);
}
void mersenne_twisters() {
  {
    const int k = 4, n = 16384 * k;
    curandStateMtgp32_t* st;
    mtgp32_kernel_params_t* kp;
    unsigned int* d;
    CK(cudaMalloc(&st, 64 * sizeof(curandStateMtgp32_t)));
    CK(cudaMalloc(&kp, sizeof(mtgp32_kernel_params_t)));
    CK(cudaMalloc(&d, n * sizeof(unsigned int)));
    CR(curandMakeMTGP32Constants(mtgp32dc_params_fast_11213, kp));
    CR(curandMakeMTGP32KernelState(st, mtgp32dc_params_fast_11213, kp, 64, kSeed));
    mtgp_kernel<<<64, 256>>>(st, k, d);
    CK(cudaGetLastError());
    std::vector<unsigned int> dev(n);
    CK(cudaMemcpy(dev.data(), d, n * sizeof(unsigned int), cudaMemcpyDeviceToHost));
    CK(cudaFree(st));
    CK(cudaFree(kp));
    CK(cudaFree(d));
    auto host = device_generate<unsigned int>(CURAND_RNG_PSEUDO_MTGP32, n, gen_bits);
    int bad = 0;
    for (int i = 0; i < n; i++) bad += host[i] != dev[i];
    std::printf("MTGP32 bits: %d values compared with the device API (64 blocks x 256 threads), %d differ\n", n, bad);
    EXPECT(bad == 0, "MTGP32 differs from the device API in %d values", bad);
    // And from an offset of one round plus 300 (the host API continues each block).
    auto off = device_generate<unsigned int>(CURAND_RNG_PSEUDO_MTGP32, n - 16384 - 300, gen_bits, 16384 + 300);
    bad = 0;
    for (size_t i = 0; i < off.size(); i++) bad += off[i] != dev[16384 + 300 + i];
    EXPECT(bad == 0, "MTGP32 at an offset differs in %d values", bad);
  }
  const size_t n = 1 << 20;
  uniform_statistics("MT19937", device_generate<float>(CURAND_RNG_PSEUDO_MT19937, n, gen_uniform));
  uniform_statistics("MTGP32", device_generate<float>(CURAND_RNG_PSEUDO_MTGP32, n, gen_uniform));
  uniform_statistics("Philox4_32_10", device_generate<float>(CURAND_RNG_PSEUDO_PHILOX4_32_10, n, gen_uniform));
  uniform_statistics("MRG32k3a", device_generate<float>(CURAND_RNG_PSEUDO_MRG32K3A, n, gen_uniform));
}

// ------------------------------------------------------------ 4. distributions
void distributions() {
  const size_t n = 1 << 20;
  for (curandRngType_t type : {CURAND_RNG_PSEUDO_XORWOW, CURAND_RNG_PSEUDO_MRG32K3A, CURAND_RNG_PSEUDO_MT19937,
                               CURAND_RNG_PSEUDO_MTGP32, CURAND_RNG_PSEUDO_PHILOX4_32_10}) {
    curandGenerator_t g;
    CR(curandCreateGenerator(&g, type));
    CR(curandSetPseudoRandomGeneratorSeed(g, 42));
    void* d;
    CK(cudaMalloc(&d, n * sizeof(double)));
    // Normal (float): mean 2, stddev 3.
    std::vector<float> f(n);
    CR(curandGenerateNormal(g, (float*)d, n, 2.0f, 3.0f));
    CK(cudaMemcpy(f.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));
    Moments m = moments(f);
    double se = 3.0 / std::sqrt(double(n));
    std::printf("type %d normal(2, 3): mean %.4f sd %.4f\n", int(type), m.mean, std::sqrt(m.var));
    EXPECT(std::fabs(m.mean - 2) < 5 * se, "normal mean %g", m.mean);
    EXPECT(std::fabs(std::sqrt(m.var) - 3) < 5 * 3 / std::sqrt(2.0 * n), "normal sd %g", std::sqrt(m.var));
    // Normal (double): mean -1, stddev 0.5.
    std::vector<double> x(n);
    CR(curandGenerateNormalDouble(g, (double*)d, n, -1.0, 0.5));
    CK(cudaMemcpy(x.data(), d, n * sizeof(double), cudaMemcpyDeviceToHost));
    m = moments(x);
    std::printf("type %d normal double(-1, 0.5): mean %.5f sd %.5f\n", int(type), m.mean, std::sqrt(m.var));
    EXPECT(std::fabs(m.mean + 1) < 5 * 0.5 / std::sqrt(double(n)), "normal double mean %g", m.mean);
    EXPECT(std::fabs(std::sqrt(m.var) - 0.5) < 5 * 0.5 / std::sqrt(2.0 * n), "normal double sd %g", std::sqrt(m.var));
    // Log-normal (float): exp(N(0.5, 0.25)): mean exp(mu + s^2/2), var (e^{s^2}-1) e^{2mu+s^2}.
    CR(curandGenerateLogNormal(g, (float*)d, n, 0.5f, 0.25f));
    CK(cudaMemcpy(f.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));
    m = moments(f);
    const double lm = std::exp(0.5 + 0.03125), lv = (std::exp(0.0625) - 1) * std::exp(1.0 + 0.0625);
    std::printf("type %d log-normal(0.5, 0.25): mean %.5f (%.5f) var %.5f (%.5f)\n", int(type), m.mean, lm, m.var, lv);
    EXPECT(std::fabs(m.mean - lm) < 5 * std::sqrt(lv / n), "log-normal mean %g", m.mean);
    EXPECT(std::fabs(m.var - lv) < 0.01 * lv * 5, "log-normal var %g", m.var);
    CR(curandGenerateLogNormalDouble(g, (double*)d, n, 0.5, 0.25));
    CK(cudaMemcpy(x.data(), d, n * sizeof(double), cudaMemcpyDeviceToHost));
    m = moments(x);
    EXPECT(std::fabs(m.mean - lm) < 5 * std::sqrt(lv / n), "log-normal double mean %g", m.mean);
    // Poisson: small (inversion) and large (rejection) lambda; mean = var = lambda.
    for (double lambda : {4.0, 250.0}) {
      std::vector<unsigned int> p(n);
      CR(curandGeneratePoisson(g, (unsigned int*)d, n, lambda));
      CK(cudaMemcpy(p.data(), d, n * sizeof(unsigned int), cudaMemcpyDeviceToHost));
      m = moments(p);
      std::printf("type %d Poisson(%g): mean %.4f var %.4f\n", int(type), lambda, m.mean, m.var);
      EXPECT(std::fabs(m.mean - lambda) < 5 * std::sqrt(lambda / n), "Poisson(%g) mean %g", lambda, m.mean);
      // Var of the sample variance ~ (mu4 - s^4)/n = (lambda + 2 lambda^2)/n.
      EXPECT(std::fabs(m.var - lambda) < 5 * std::sqrt((lambda + 2 * lambda * lambda) / n), "Poisson(%g) var %g",
             lambda, m.var);
    }
    // Uniform double in (0, 1].
    CR(curandGenerateUniformDouble(g, (double*)d, n));
    CK(cudaMemcpy(x.data(), d, n * sizeof(double), cudaMemcpyDeviceToHost));
    m = moments(x);
    EXPECT(std::fabs(m.mean - 0.5) < 5 * std::sqrt(1.0 / 12 / n), "uniform double mean %g", m.mean);
    EXPECT(*std::min_element(x.begin(), x.end()) > 0 && *std::max_element(x.begin(), x.end()) <= 1, "range");
    CK(cudaFree(d));
    CR(curandDestroyGenerator(g));
  }
}

// ------------------------------------------------------------ 5. Sobol'
void sobol() {
  curandDirectionVectors32_t* dirs;
  CR(curandGetDirectionVectors32(&dirs, CURAND_DIRECTION_VECTORS_32_JOEKUO6));
  unsigned int* scr;
  CR(curandGetScrambleConstants32(&scr));
  for (int k = 0; k < 32; k++) EXPECT(dirs[0][k] == 1u << (31 - k), "dimension 0 vector %d: %08x", k, dirs[0][k]);
  const int dims = 3, pts = 64;
  for (bool scrambled : {false, true}) {
    curandGenerator_t g;
    CR(curandCreateGenerator(&g, scrambled ? CURAND_RNG_QUASI_SCRAMBLED_SOBOL32 : CURAND_RNG_QUASI_SOBOL32));
    CR(curandSetQuasiRandomGeneratorDimensions(g, dims));
    unsigned int* d;
    CK(cudaMalloc(&d, dims * pts * sizeof(unsigned int)));
    CR(curandGenerate(g, d, dims * pts / 2));  // two calls: the second continues the points
    CR(curandGenerate(g, d + dims * pts / 2, dims * pts / 2));
    std::vector<unsigned int> two(dims * pts);
    CK(cudaMemcpy(two.data(), d, two.size() * sizeof(unsigned int), cudaMemcpyDeviceToHost));
    // Dimension j's points of call c are two[c * dims * pts/2 + j * pts/2 + i].
    auto host = [&](int dim, int p) {
      const int c = p / (pts / 2), i = p % (pts / 2);
      return two[c * dims * (pts / 2) + dim * (pts / 2) + i];
    };
    // Reference: Gray-code sums of the returned direction vectors.
    int bad = 0;
    for (int dim = 0; dim < dims; dim++) {
      unsigned int x = scrambled ? scr[dim] : 0;
      for (int p = 0; p < pts; p++) {
        if (host(dim, p) != x && bad++ < 3) std::printf("  dim %d point %d: %08x, want %08x\n", dim, p, host(dim, p), x);
        x ^= dirs[dim][__builtin_ctz(~p)];
      }
    }
    EXPECT(bad == 0, "Sobol32%s: %d points differ from the direction vectors' Gray-code sums",
           scrambled ? " scrambled" : "", bad);
    if (!scrambled) {
      // The known start of dimension 0 (van der Corput in Gray-code order).
      const double want[8] = {0, 0.5, 0.75, 0.25, 0.375, 0.875, 0.625, 0.125};
      for (int p = 0; p < 8; p++) EXPECT(host(0, p) == unsigned(want[p] * 4294967296.0), "point %d", p);
    }
    // The device API from the same vectors, at an offset of 5.
    curandDirectionVectors32_t* ddirs;
    unsigned int* dscr;
    CK(cudaMalloc(&ddirs, dims * sizeof(curandDirectionVectors32_t)));
    CK(cudaMemcpy(ddirs, dirs, dims * sizeof(curandDirectionVectors32_t), cudaMemcpyHostToDevice));
    CK(cudaMalloc(&dscr, dims * sizeof(unsigned int)));
    CK(cudaMemcpy(dscr, scr, dims * sizeof(unsigned int), cudaMemcpyHostToDevice));
    sobol_kernel<<<1, 32>>>(ddirs, scrambled ? dscr : nullptr, dims, 16, 5, d);
    CK(cudaGetLastError());
    std::vector<unsigned int> dev(dims * 16);
    CK(cudaMemcpy(dev.data(), d, dev.size() * sizeof(unsigned int), cudaMemcpyDeviceToHost));
    bad = 0;
    for (int dim = 0; dim < dims; dim++)
      for (int p = 0; p < 16; p++) bad += dev[dim * 16 + p] != host(dim, p + 5);
    std::printf("Sobol32%s: %d dimensions x %d points checked, device API: %d of %d differ\n",
                scrambled ? " scrambled" : "", dims, pts, bad, dims * 16);
    EXPECT(bad == 0, "device API Sobol32 differs");
    CK(cudaFree(ddirs));
    CK(cudaFree(dscr));
    CK(cudaFree(d));
    CR(curandDestroyGenerator(g));
  }
  // Sobol64: 64-bit values; dimension 0 is van der Corput's in 64 bits.
  curandGenerator_t g;
  CR(curandCreateGenerator(&g, CURAND_RNG_QUASI_SOBOL64));
  unsigned long long* d;
  CK(cudaMalloc(&d, 8 * sizeof(unsigned long long)));
  CR(curandGenerateLongLong(g, d, 8));
  unsigned long long h[8];
  CK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
  const unsigned long long top = 1ULL << 63;
  const unsigned long long want[8] = {0, top, top | top >> 1, top >> 1, (top >> 1) | (top >> 2),
                                      top | (top >> 1) | (top >> 2), top | (top >> 2), top >> 2};
  for (int p = 0; p < 8; p++) EXPECT(h[p] == want[p], "Sobol64 point %d: %llx", p, h[p]);
  // Quasirandom normals: the inverse CDF of the points, mean ~0.
  float* f;
  CK(cudaMalloc(&f, 4096 * sizeof(float)));
  curandGenerator_t q;
  CR(curandCreateGenerator(&q, CURAND_RNG_QUASI_SOBOL32));
  CR(curandSetGeneratorOffset(q, 1));
  CR(curandGenerateNormal(q, f, 4095, 0.0f, 1.0f));
  std::vector<float> z(4095);
  CK(cudaMemcpy(z.data(), f, z.size() * sizeof(float), cudaMemcpyDeviceToHost));
  Moments m = moments(z);
  std::printf("Sobol32 normals (4095 points): mean %.2e sd %.4f\n", m.mean, std::sqrt(m.var));
  EXPECT(std::fabs(m.mean) < 1e-3 && std::fabs(std::sqrt(m.var) - 1) < 0.01, "quasi normal mean %g sd %g", m.mean,
         std::sqrt(m.var));
  CK(cudaFree(f));
  CK(cudaFree(d));
  CR(curandDestroyGenerator(q));
  CR(curandDestroyGenerator(g));
}

// ------------------------------------------------------------ 6. host generator, streams
void host_generator_and_stream() {
  const size_t n = 10000;
  auto dev = device_generate<float>(CURAND_RNG_PSEUDO_PHILOX4_32_10, n, gen_uniform);
  curandGenerator_t g;
  CR(curandCreateGeneratorHost(&g, CURAND_RNG_PSEUDO_PHILOX4_32_10));
  CR(curandSetPseudoRandomGeneratorSeed(g, kSeed));
  std::vector<float> host(n);
  CR(curandGenerateUniform(g, host.data(), n / 2));  // two calls continue the stream
  CR(curandGenerateUniform(g, host.data() + n / 2, n / 2));
  CR(curandDestroyGenerator(g));
  EXPECT(host == dev, "host generator differs from the device generator");
  std::printf("host generator: %zu values equal the device generator's\n", n);
  // A generator on a stream, then a copy on that stream.
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  CR(curandCreateGenerator(&g, CURAND_RNG_PSEUDO_PHILOX4_32_10));
  CR(curandSetPseudoRandomGeneratorSeed(g, kSeed));
  CR(curandSetStream(g, s));
  float* d;
  CK(cudaMalloc(&d, n * sizeof(float)));
  CR(curandGenerateUniform(g, d, n));
  std::vector<float> out(n);
  CK(cudaMemcpyAsync(out.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost, s));
  CK(cudaStreamSynchronize(s));
  EXPECT(out == dev, "stream generator differs");
  CK(cudaFree(d));
  CR(curandDestroyGenerator(g));
  CK(cudaStreamDestroy(s));
}

// ------------------------------------------------------------ 7. discrete distributions
void discrete() {
  const int threads = 256, k = 64, n = threads * k;
  unsigned int *a, *b;
  CK(cudaMalloc(&a, n * sizeof(unsigned int)));
  CK(cudaMalloc(&b, n * sizeof(unsigned int)));
  for (double lambda : {3.5, 40.0, 2000.0}) {
    curandDiscreteDistribution_t dist;
    CR(curandCreatePoissonDistribution(lambda, &dist));
    discrete_kernel<<<threads / 64, 64>>>(dist, lambda, k, a, b);
    CK(cudaGetLastError());
    std::vector<unsigned int> ha(n), hb(n);
    CK(cudaMemcpy(ha.data(), a, n * sizeof(unsigned int), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hb.data(), b, n * sizeof(unsigned int), cudaMemcpyDeviceToHost));
    CR(curandDestroyDistribution(dist));
    for (auto* v : {&ha, &hb}) {
      Moments m = moments(*v);
      const char* what = v == &ha ? "curand_discrete" : "curand_poisson";
      std::printf("%s Poisson(%g), %d samples: mean %.3f var %.3f\n", what, lambda, n, m.mean, m.var);
      EXPECT(std::fabs(m.mean - lambda) < 5 * std::sqrt(lambda / n), "%s(%g) mean %g", what, lambda, m.mean);
      EXPECT(std::fabs(m.var - lambda) < 5 * std::sqrt((lambda + 2 * lambda * lambda) / n), "%s(%g) var %g", what,
             lambda, m.var);
    }
  }
  curandDiscreteDistribution_t dist;
  EXPECT(curandCreatePoissonDistribution(-1.0, &dist) == CURAND_STATUS_OUT_OF_RANGE, "negative lambda");
  CK(cudaFree(a));
  CK(cudaFree(b));
}

// ------------------------------------------------------------ 8. refusals, versions
void refusals() {
  int v = 0;
  CR(curandGetVersion(&v));
  EXPECT(v == CURAND_VERSION, "version %d", v);
  int major = -1;
  CR(curandGetProperty(MAJOR_VERSION, &major));
  EXPECT(major == CURAND_VER_MAJOR, "major %d", major);
  curandGenerator_t g;
  EXPECT(curandCreateGenerator(&g, curandRngType_t(7)) == CURAND_STATUS_TYPE_ERROR, "bad type accepted");
  CR(curandCreateGenerator(&g, CURAND_RNG_PSEUDO_DEFAULT));
  unsigned long long* d64;
  float* f;
  CK(cudaMalloc(&d64, 64 * sizeof(unsigned long long)));
  f = reinterpret_cast<float*>(d64);
  EXPECT(curandGenerateLongLong(g, d64, 4) == CURAND_STATUS_TYPE_ERROR, "64-bit from XORWOW");
  EXPECT(curandGenerateNormal(g, f, 3, 0, 1) == CURAND_STATUS_LENGTH_NOT_MULTIPLE, "odd normal count");
  EXPECT(curandGeneratePoisson(g, (unsigned*)f, 4, -1.0) == CURAND_STATUS_OUT_OF_RANGE, "negative lambda");
  EXPECT(curandSetQuasiRandomGeneratorDimensions(g, 2) == CURAND_STATUS_TYPE_ERROR, "dimensions of XORWOW");
  EXPECT(curandSetGeneratorOrdering(g, CURAND_ORDERING_QUASI_DEFAULT) == CURAND_STATUS_OUT_OF_RANGE, "ordering");
  CR(curandSetGeneratorOrdering(g, CURAND_ORDERING_PSEUDO_LEGACY));
  CR(curandDestroyGenerator(g));
  CR(curandCreateGenerator(&g, CURAND_RNG_QUASI_DEFAULT));
  EXPECT(curandSetQuasiRandomGeneratorDimensions(g, 0) == CURAND_STATUS_OUT_OF_RANGE, "0 dimensions");
  EXPECT(curandSetQuasiRandomGeneratorDimensions(g, 20001) == CURAND_STATUS_OUT_OF_RANGE, "20001 dimensions");
  CR(curandSetQuasiRandomGeneratorDimensions(g, 4));
  EXPECT(curandGenerateUniform(g, f, 10) == CURAND_STATUS_LENGTH_NOT_MULTIPLE, "10 values of 4 dimensions");
  EXPECT(curandSetPseudoRandomGeneratorSeed(g, 1) == CURAND_STATUS_TYPE_ERROR, "seed of Sobol32");
  EXPECT(curandGenerateLongLong(g, d64, 4) == CURAND_STATUS_TYPE_ERROR, "64-bit from Sobol32");
  CR(curandDestroyGenerator(g));
  CK(cudaFree(d64));
  CK(cudaDeviceSynchronize());
}

int main() {
  monte_carlo_pi();
  against_device_api();
  mersenne_twisters();
  distributions();
  sobol();
  host_generator_and_stream();
  discrete();
  refusals();
  if (failures) {
    std::printf("%d FAILED\n", failures);
    return 1;
  }
  std::printf("all cuRAND checks passed\n");
  return 0;
}
