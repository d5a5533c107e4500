// The sim device's cuRAND: the generators as cuRAND documents them and as
// its device API (curand_kernel.h) computes them, run on the session's
// thread over the sim device's memory (Context::host_view), so stream order
// holds as for every other sim device operation.
//
// Pseudorandom ordering. cuRAND's host API (PSEUDO_DEFAULT/LEGACY) runs
// 4096 device threads; thread t owns subsequence t of the generator's
// sequence (curand_init(seed, t, 0)). This file places value g of the
// generator's output stream (g = offset + i for the i-th value of a call)
// on thread t = g mod 4096 as that thread's value k = g / 4096, and a
// thread computes its values exactly as the device API does one after the
// other: curand() for bits, curand_uniform, curand_uniform_double (two
// outputs), curand_normal (Box-Muller over pairs: values 2j and 2j+1 of a
// thread share one pair of outputs), curand_log_normal. So a host-API run
// equals a kernel where thread t calls curand_init(seed, t, 0, &s) and then
// the same curand_* function repeatedly, written to out[t + 4096 k]. That
// mapping is the one the cuRAND guide states for XORWOW, MRG32k3a and
// Philox; it has not been compared with a GPU's libcurand here (no GPU).
// BEST, SEEDED and DYNAMIC orderings produce the LEGACY sequence on the sim
// device (cuRAND lets them be any well-distributed ordering).
//
// MTGP32: 64 generator states (blocks) of 256 threads, state b with
// parameter set b of NVIDIA's 11213 table (curand_mtgp32dc_p_11213.h, the
// toolkit's header) seeded as curandMakeMTGP32KernelState seeds it
// (seed ^ seed >> 32, plus b + 1); value g goes to block (g / 256) mod 64
// as its value (g mod 256) + 256 (g / 16384). So a kernel of 64 blocks of
// 256 threads on curandMakeMTGP32KernelState(64 states, seed) in which
// thread t of block b writes its j-th curand() to out[16384 j + 256 b + t]
// yields the host API's output. This block layout is this file's
// reading of cuRAND's description; a GPU's library was not compared.
// Distributions from MTGP32 use one output per value (normals by the
// inverse CDF, as the device API's curand_normal does for MTGP32).
//
// MT19937 is the reference Mersenne Twister (init_genrand with the low 32
// bits of the seed), one sequential stream: statistically equivalent to a
// GPU's MT19937, not the same numbers.
//
// Quasirandom (Sobol'): with d dimensions, a call of n values writes
// n/d points, dimension j's in out[j*(n/d) ...], point p of dimension j
// being curand(sobol state of j initialised at offset p) with the direction
// numbers of wormhole/proto/sobol_dirs.hpp (Gray-code order, first point 0,
// as curand_kernel.h). The offset counts points.
//
// Poisson: lambda <= 64 by inversion of one uniform (thread value k uses
// output k); larger lambda by Hoermann's transformed rejection (PTRS) over
// a window of 32 outputs per value.
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <vector>

#include <curand_mtgp32dc_p_11213.h>

#include "curand_api.def"
#include "wormhole/proto/sobol_dirs.hpp"
#include "wormhole/server/rand.hpp"

namespace wh::server {

using namespace wh::proto;

namespace {

constexpr uint64_t kThreads = 4096;
// The Mersenne Twisters cannot jump: reaching an offset means stepping
// there. The sim device steps at most this far in one generation (a few
// seconds) and refuses a farther offset with cudaErrorNotSupported.
constexpr uint64_t kMaxSteps = 1ull << 30;
constexpr float kInv32f = 2.3283064e-10f;
constexpr double kInv32 = 2.3283064365386963e-10, kInv53 = 1.1102230246251565e-16;

float uniform_f(uint32_t x) { return x * kInv32f + kInv32f / 2.0f; }
double uniform_hq(uint32_t x, uint32_t y) {
  const uint64_t z = uint64_t(x) ^ (uint64_t(y) << (53 - 32));
  return double(z) * kInv53 + kInv53 / 2.0;
}

// ------------------------------------------------------------ XORWOW
// The 160-bit xorshift part of one step is linear over GF(2): a 160x160
// bit matrix, stored as its 160 columns (5 words each). Its powers 2^j
// jump ahead; the Weyl counter d advances by 362437 a step.
struct BitMat {
  uint32_t col[160][5];
};
void xorwow_step_linear(uint32_t v[5]) {
  uint32_t t = v[0] ^ (v[0] >> 2);
  v[0] = v[1], v[1] = v[2], v[2] = v[3], v[3] = v[4];
  v[4] = (v[4] ^ (v[4] << 4)) ^ (t ^ (t << 1));
}
void matvec(const BitMat& m, const uint32_t in[5], uint32_t out[5]) {
  uint32_t r[5] = {0, 0, 0, 0, 0};
  for (int i = 0; i < 160; i++)
    if (in[i / 32] >> (i % 32) & 1)
      for (int w = 0; w < 5; w++) r[w] ^= m.col[i][w];
  std::memcpy(out, r, sizeof r);
}
// P[j] = M^(2^j), j = 0..(67+13): offsets within a subsequence and
// subsequences (2^67 steps each) up to 8192.
const std::vector<BitMat>& xorwow_powers() {
  static const std::vector<BitMat> p = [] {
    std::vector<BitMat> v(81);
    for (int i = 0; i < 160; i++) {
      uint32_t e[5] = {0, 0, 0, 0, 0};
      e[i / 32] = 1u << (i % 32);
      xorwow_step_linear(e);
      std::memcpy(v[0].col[i], e, sizeof e);
    }
    for (int j = 1; j < 81; j++)
      for (int i = 0; i < 160; i++) matvec(v[j - 1], v[j - 1].col[i], v[j].col[i]);
    return v;
  }();
  return p;
}
struct Xorwow {
  uint32_t v[5], d;
  static Xorwow init(uint64_t seed) {
    Xorwow s;
    const uint32_t s0 = uint32_t(seed) ^ 0xaad26b49u, s1 = uint32_t(seed >> 32) ^ 0xf7dcefddu;
    const uint32_t t0 = 1099087573u * s0, t1 = 2591861531u * s1;
    s.d = 6615241 + t1 + t0;
    s.v[0] = 123456789u + t0;
    s.v[1] = 362436069u ^ t0;
    s.v[2] = 521288629u + t1;
    s.v[3] = 88675123u ^ t1;
    s.v[4] = 5783321u + t0;
    return s;
  }
  void subsequence(uint64_t t) {  // t < 2^13
    const auto& p = xorwow_powers();
    for (int b = 0; b < 13; b++)
      if (t >> b & 1) matvec(p[67 + b], v, v);
  }
  void skip(uint64_t n) {
    const auto& p = xorwow_powers();
    for (int b = 0; b < 64; b++)
      if (n >> b & 1) matvec(p[b], v, v);
    d += 362437u * uint32_t(n);
  }
  uint32_t next() {
    xorwow_step_linear(v);
    d += 362437;
    return v[4] + d;
  }
};

// ------------------------------------------------------------ MRG32k3a
constexpr uint64_t kM1 = 4294967087ull, kM2 = 4294944443ull;
struct Mat3 {
  uint64_t a[3][3];
};
Mat3 mul(const Mat3& x, const Mat3& y, uint64_t m) {
  Mat3 r{};
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) {
      uint64_t s = 0;
      for (int k = 0; k < 3; k++) s = (s + (unsigned __int128)x.a[i][k] * y.a[k][j] % m) % m;
      r.a[i][j] = s;
    }
  return r;
}
void apply(const Mat3& x, uint32_t s[3], uint64_t m) {
  uint64_t r[3];
  for (int i = 0; i < 3; i++) {
    uint64_t acc = 0;
    for (int k = 0; k < 3; k++) acc = (acc + (unsigned __int128)x.a[i][k] * s[k] % m) % m;
    r[i] = acc;
  }
  for (int i = 0; i < 3; i++) s[i] = uint32_t(r[i]);
}
// Powers 2^j (j = 0..(76+13)) of each component's step matrix.
struct MrgPowers {
  std::vector<Mat3> p1, p2;
};
const MrgPowers& mrg_powers() {
  static const MrgPowers mp = [] {
    MrgPowers r;
    Mat3 a1{{{0, 1, 0}, {0, 0, 1}, {kM1 - 810728, 1403580, 0}}};
    Mat3 a2{{{0, 1, 0}, {0, 0, 1}, {kM2 - 1370589, 0, 527612}}};
    for (int j = 0; j < 90; j++) {
      r.p1.push_back(a1);
      r.p2.push_back(a2);
      a1 = mul(a1, a1, kM1);
      a2 = mul(a2, a2, kM2);
    }
    return r;
  }();
  return mp;
}
struct Mrg {
  uint32_t s1[3], s2[3];
  static Mrg init(uint64_t seed) {
    Mrg m;
    for (int i = 0; i < 3; i++) m.s1[i] = m.s2[i] = 12345u;
    if (seed) {
      const uint64_t x1 = uint32_t(seed) ^ 0x55555555u, x2 = uint32_t((seed >> 32) ^ 0xAAAAAAAAu);
      m.s1[0] = uint32_t(x1 * m.s1[0] % kM1);
      m.s1[1] = uint32_t(x2 * m.s1[1] % kM1);
      m.s1[2] = uint32_t(x1 * m.s1[2] % kM1);
      m.s2[0] = uint32_t(x2 * m.s2[0] % kM2);
      m.s2[1] = uint32_t(x1 * m.s2[1] % kM2);
      m.s2[2] = uint32_t(x2 * m.s2[2] % kM2);
    }
    return m;
  }
  void jump(int first, uint64_t n) {
    const auto& p = mrg_powers();
    for (int b = 0; b < 64 && first + b < 90; b++)
      if (n >> b & 1) apply(p.p1[first + b], s1, kM1), apply(p.p2[first + b], s2, kM2);
  }
  void subsequence(uint64_t t) { jump(76, t); }
  void skip(uint64_t n) { jump(0, n); }
  // curand_MRG32k3a: a value in (0, m1].
  double next_raw() {
    int64_t p1 = (1403580ll * s1[1] - 810728ll * s1[0]) % int64_t(kM1);
    if (p1 < 0) p1 += kM1;
    s1[0] = s1[1], s1[1] = s1[2], s1[2] = uint32_t(p1);
    int64_t p2 = (527612ll * s2[2] - 1370589ll * s2[0]) % int64_t(kM2);
    if (p2 < 0) p2 += kM2;
    s2[0] = s2[1], s2[1] = s2[2], s2[2] = uint32_t(p2);
    int64_t r = p1 - p2;
    if (r <= 0) r += kM1;
    return double(r);
  }
  uint32_t next() { return uint32_t(next_raw() * 1.000000048662); }
};

// ------------------------------------------------------------ Philox4x32-10
struct Philox {
  uint32_t key[2];
  uint64_t sub = 0, pos = 0;  // subsequence (counter's high half), output index
  uint32_t buf[4];
  uint64_t buf_ctr = ~0ull;
  static Philox init(uint64_t seed) {
    Philox p;
    p.key[0] = uint32_t(seed), p.key[1] = uint32_t(seed >> 32);
    return p;
  }
  void subsequence(uint64_t t) { sub = t; }
  void skip(uint64_t n) { pos += n; }
  static void block(uint64_t ctr_lo, uint64_t ctr_hi, const uint32_t k_in[2], uint32_t out[4]) {
    uint32_t c[4] = {uint32_t(ctr_lo), uint32_t(ctr_lo >> 32), uint32_t(ctr_hi), uint32_t(ctr_hi >> 32)};
    uint32_t k[2] = {k_in[0], k_in[1]};
    for (int r = 0; r < 10; r++) {
      const uint64_t m0 = uint64_t(0xD2511F53u) * c[0], m1 = uint64_t(0xCD9E8D57u) * c[2];
      const uint32_t hi0 = uint32_t(m0 >> 32), lo0 = uint32_t(m0), hi1 = uint32_t(m1 >> 32), lo1 = uint32_t(m1);
      uint32_t n[4] = {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
      std::memcpy(c, n, sizeof c);
      k[0] += 0x9E3779B9u, k[1] += 0xBB67AE85u;
    }
    std::memcpy(out, c, sizeof c);
  }
  uint32_t next() {
    const uint64_t ctr = pos / 4;
    if (ctr != buf_ctr) block(ctr, sub, key, buf), buf_ctr = ctr;
    return buf[pos++ % 4];
  }
};

// ------------------------------------------------------------ MTGP32
// One block's state: a ring of 1024 words of which MTGPDC_N are live; the
// recursion and tempering of curand_mtgp32_kernel.h, one value at a time
// (a block's 256 threads compute 256 consecutive values of this sequence).
constexpr int kMtgpBlocks = 64, kMtgpThreads = 256;
struct Mtgp {
  uint32_t s[MTGP32_STATE_SIZE];
  uint32_t off = 0;
  uint64_t pos = 0;  // values given
  const mtgp32_params_fast_t* p = nullptr;
  void init(uint64_t seed, int b) {
    p = &mtgp32dc_params_fast_11213[b];
    const uint32_t seed32 = uint32_t(seed ^ (seed >> 32)) + uint32_t(b) + 1;
    const int size = p->mexp / 32 + 1;
    const uint32_t hidden = p->tbl[4] ^ (p->tbl[8] << 16);
    uint32_t fill = hidden;
    fill += fill >> 16;
    fill += fill >> 8;
    fill &= 0xff;
    std::memset(s, 0, sizeof s);
    for (int i = 0; i < size; i++) s[i] = fill * 0x01010101u;
    s[0] = seed32;
    s[1] = hidden;
    for (int i = 1; i < size; i++) s[i] ^= 1812433253u * (s[i - 1] ^ (s[i - 1] >> 30)) + uint32_t(i);
    off = 0;
    pos = 0;
  }
  uint32_t next() {
    constexpr uint32_t m = MTGP32_STATE_MASK;
    const uint32_t pp = uint32_t(p->pos);
    uint32_t x = (s[off & m] & p->mask) ^ s[(off + 1) & m];
    x ^= x << p->sh1;
    uint32_t y = x ^ (s[(off + pp) & m] >> p->sh2);
    const uint32_t r = y ^ p->tbl[y & 0x0f];
    s[(off + MTGPDC_N) & m] = r;
    uint32_t t = s[(off + pp - 1) & m];
    t ^= t >> 16;
    t ^= t >> 8;
    off = (off + 1) & m;
    pos++;
    return r ^ p->tmp_tbl[t & 0x0f];
  }
  void skip(uint64_t n) {
    for (uint64_t i = 0; i < n; i++) next();
  }
};

// ------------------------------------------------------------ distributions
// The inverse of the standard normal CDF (Acklam's rational approximation,
// refined by one Halley step on erfc).
double normal_icdf(double p) {
  static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                             1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                             6.680131188771972e+01,  -1.328068155288572e+01};
  static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                             -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                             3.754408661907416e+00};
  if (p <= 0) return -INFINITY;
  if (p >= 1) return INFINITY;
  double x;
  if (p < 0.02425) {
    const double q = std::sqrt(-2 * std::log(p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else if (p <= 1 - 0.02425) {
    const double q = p - 0.5, r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  } else {
    const double q = std::sqrt(-2 * std::log1p(-p));
    x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  const double e = 0.5 * std::erfc(-x / std::sqrt(2.0)) - p;
  const double u = e * std::sqrt(2 * M_PI) * std::exp(x * x / 2);
  return x - u / (1 + x * u / 2);
}

uint32_t poisson_inversion(double u, double lambda) {
  double p = std::exp(-lambda), cdf = p;
  uint32_t k = 0;
  while (u > cdf && k < 100000) {
    k++;
    p *= lambda / k;
    cdf += p;
    if (p == 0 && cdf < u) break;
  }
  return k;
}
// PTRS (Hoermann 1993) over uniforms drawn by `uni`.
template <class Uni>
uint32_t poisson_ptrs(double lambda, Uni&& uni, int tries) {
  const double slam = std::sqrt(lambda), loglam = std::log(lambda);
  const double b = 0.931 + 2.53 * slam, a = -0.059 + 0.02483 * b;
  const double inv_alpha = 1.1239 + 1.1328 / (b - 3.4), vr = 0.9277 - 3.6224 / (b - 2);
  for (int i = 0; i < tries; i++) {
    const double U = uni() - 0.5, V = uni();
    const double us = 0.5 - std::fabs(U);
    const double k = std::floor((2 * a / us + b) * U + lambda + 0.43);
    if (us >= 0.07 && V <= vr) return uint32_t(k);
    if (k < 0 || (us < 0.013 && V > us)) continue;
    if (std::log(V) + std::log(inv_alpha) - std::log(a / (us * us) + b) <= -lambda + k * loglam - std::lgamma(k + 1))
      return uint32_t(k);
  }
  // Practically unreachable (each try accepts with probability > 0.8).
  return uint32_t(std::max(0.0, std::floor(lambda + 0.5)));
}

bool is_pair_kind(int kind) {
  return kind == kRandNormal || kind == kRandLogNormal || kind == kRandNormalD || kind == kRandLogNormalD;
}
// Outputs of one thread's stream a value of `kind` consumes (a pair of
// normals: twice this). MRG32k3a makes a double from one output.
uint64_t raws_per_value(int kind, double lambda, bool mrg) {
  switch (kind) {
    case kRandUniformD:
    case kRandNormalD:
    case kRandLogNormalD: return mrg ? 1 : 2;
    case kRandPoisson: return lambda <= 64 ? 1 : 32;
    default: return 1;
  }
}

// ------------------------------------------------------------ generators
struct SimGen : RandGen {
  int type = 0;
  // Per-thread engines of the parallel generators, cached where the last
  // call left them (the next call usually continues there).
  std::vector<Xorwow> xw;
  std::vector<Mrg> mrg;
  std::vector<uint64_t> pos;  // each engine's output position in its subsequence
  uint64_t seed_cached = 0;
  bool have = false;
  std::vector<Mtgp> mtgp;  // kMtgpBlocks states where the last call left them
  uint64_t mtgp_seed = 0;
  std::mt19937 mt;
  uint64_t mt_pos = 0;  // outputs mt has given
  bool mt_have = false;
  void reset() { have = false, mt_have = false, mtgp.clear(); }
};

template <class E>
E engine_at(std::vector<E>& cache, std::vector<uint64_t>& pos, bool& have, uint64_t& seed_cached, uint64_t seed,
            uint64_t t, uint64_t raw) {
  if (!have || seed_cached != seed) {
    cache.assign(kThreads, E::init(seed));
    pos.assign(kThreads, 0);
    // Thread i+1 starts one subsequence after thread i: one jump each.
    for (uint64_t i = 1; i < kThreads; i++) {
      cache[i] = cache[i - 1];
      cache[i].subsequence(1);
    }
    have = true;
    seed_cached = seed;
  }
  E e = cache[t];
  if (raw >= pos[t]) {
    e.skip(raw - pos[t]);
  } else {
    e = E::init(seed);
    e.subsequence(t);
    e.skip(raw);
  }
  return e;
}

// The 64-bit Sobol' direction numbers of dimensions [0, dims), one table
// for the whole server (10 MiB at 20000 dimensions), filled on demand.
const uint64_t* sobol_table(uint32_t dims) {
  static std::mutex mu;
  static std::unique_ptr<uint64_t[]> table;
  static uint32_t filled = 0;
  std::lock_guard lk(mu);
  if (!table) table.reset(new uint64_t[size_t(kRandMaxDims) * 64]);
  for (; filled < dims; filled++) sobol::directions<uint64_t>(filled, &table[size_t(filled) * 64]);
  return table.get();
}

class SimRand final : public Rand {
 public:
  explicit SimRand(Context& ctx) : ctx_(ctx) {}

  Err create(const RandSettings& s, std::unique_ptr<RandGen>* out) override {
    auto g = std::make_unique<SimGen>();
    g->type = s.type;
    *out = std::move(g);
    return cudaSuccess;
  }
  Err set(RandGen& rg, const RandSettings&, uint32_t) override {
    static_cast<SimGen&>(rg).reset();
    return cudaSuccess;
  }

  Err generate(RandGen& rg, const RandSettings& st, Stream*, int kind, uint64_t out, uint64_t n, double p0,
               double p1) override {
    auto& g = static_cast<SimGen&>(rg);
    const uint64_t es = rand_value_bytes(kind);
    if (out % es) return cudaErrorMisalignedAddress;
    uint8_t* dst = ctx_.host_view(out, n * es);
    if (!dst) return cudaErrorIllegalAddress;
    if (rand_is_quasi(st.type)) return sobol(g, st, kind, dst, n, p0, p1);
    switch (st.type) {
      case kRngXorwow: return parallel<Xorwow>(g, st, kind, dst, n, p0, p1);
      case kRngPhilox: return parallel<Philox>(g, st, kind, dst, n, p0, p1);
      case kRngMrg32k3a: return parallel<Mrg>(g, st, kind, dst, n, p0, p1);
      case kRngMtgp32: return mtgp(g, st, kind, dst, n, p0, p1);
      case kRngMt19937: return sequential(g, st, kind, dst, n, p0, p1);
      default: return cudaErrorInvalidValue;
    }
  }

 private:
  template <class T>
  static void put(uint8_t* dst, uint64_t i, T v) {
    std::memcpy(dst + i * sizeof(T), &v, sizeof v);
  }

  // One thread's value k of `kind`, drawn from engine `e` positioned at the
  // value's first output (k * raws_per_value, pairs: of the pair's first).
  template <class E>
  static void value(E& e, int kind, uint64_t k, double p0, double p1, uint8_t* dst, uint64_t i) {
    constexpr bool mrg = std::is_same_v<E, Mrg>;
    auto u32 = [&] { return e.next(); };
    auto uf = [&]() -> float {
      if constexpr (mrg) return float(e.next_raw() * 2.3283065498378288e-10);
      else return uniform_f(e.next());
    };
    auto ud = [&]() -> double {
      if constexpr (mrg) return e.next_raw() * 2.3283065498378288e-10;
      else {
        const uint32_t x = e.next(), y = e.next();
        return uniform_hq(x, y);
      }
    };
    switch (kind) {
      case kRandBits32: put<uint32_t>(dst, i, u32()); break;
      case kRandUniform: put<float>(dst, i, uf()); break;
      case kRandUniformD: put<double>(dst, i, ud()); break;
      case kRandNormal:
      case kRandLogNormal: {
        float u, v;
        if constexpr (mrg) {
          u = uf();
          v = float(e.next_raw() * 2.3283065498378288e-10 * 6.2831855);
        } else {
          const uint32_t x = e.next(), y = e.next();
          u = x * kInv32f + kInv32f / 2;
          v = y * (kInv32f * 6.2831855f) + (kInv32f * 6.2831855f) / 2;
        }
        const float s = std::sqrt(-2.0f * std::log(u));
        float z = (k % 2 == 0 ? std::sin(v) : std::cos(v)) * s;
        z = z * float(p1) + float(p0);
        put<float>(dst, i, kind == kRandLogNormal ? std::exp(z) : z);
        break;
      }
      case kRandNormalD:
      case kRandLogNormalD: {
        const double u = ud(), v = ud() * 2 * M_PI;
        const double s = std::sqrt(-2.0 * std::log(u));
        double z = (k % 2 == 0 ? std::sin(v) : std::cos(v)) * s;
        z = z * p1 + p0;
        put<double>(dst, i, kind == kRandLogNormalD ? std::exp(z) : z);
        break;
      }
      case kRandPoisson: {
        if (p0 <= 64) put<uint32_t>(dst, i, poisson_inversion(double(uniform_f(e.next())), p0));
        else put<uint32_t>(dst, i, poisson_ptrs(p0, [&] { return double(uniform_f(e.next())); }, 16));
        break;
      }
    }
  }

  template <class E>
  Err parallel(SimGen& g, const RandSettings& st, int kind, uint8_t* dst, uint64_t n, double p0, double p1) {
    const bool pairs = is_pair_kind(kind);
    const uint64_t c = raws_per_value(kind, p0, std::is_same_v<E, Mrg>);
    const bool exact = !(kind == kRandPoisson && p0 > 64);  // PTRS consumes a variable count
    auto raw_of = [&](uint64_t k) { return pairs ? (k / 2) * 2 * c : k * c; };
    std::vector<E>* cache = nullptr;
    if constexpr (std::is_same_v<E, Xorwow>) cache = &g.xw;
    if constexpr (std::is_same_v<E, Mrg>) cache = &g.mrg;
    for (uint64_t t = 0; t < kThreads; t++) {
      // This thread's first value in the call: the first g >= offset with g mod 4096 == t.
      const uint64_t first = (t + kThreads - st.offset % kThreads) % kThreads;
      if (first >= n) continue;
      uint64_t k = (st.offset + first) / kThreads;
      E e;
      if constexpr (std::is_same_v<E, Philox>) {
        e = E::init(st.seed);
        e.subsequence(t);
        e.skip(raw_of(k));
      } else {
        e = engine_at(*cache, g.pos, g.have, g.seed_cached, st.seed, t, raw_of(k));
      }
      // e stands at value k's first output (a pair's: at the pair's first).
      for (uint64_t i = first; i < n; i += kThreads, k++) {
        E w = e;
        value(w, kind, k, p0, p1, dst, i);
        if (pairs) {
          if (k % 2) e = w;
        } else if (exact) {
          e = w;
        } else {
          e.skip(c);
        }
      }
      if constexpr (!std::is_same_v<E, Philox>) {
        (*cache)[t] = e;  // the next call usually continues here
        g.pos[t] = raw_of(k);
      }
    }
    return cudaSuccess;
  }

  // MT19937: one stream; value k uses outputs from
  // raw_of(k), drawn into a small buffer the value is computed from.
  Err sequential(SimGen& g, const RandSettings& st, int kind, uint8_t* dst, uint64_t n, double p0, double p1) {
    const uint64_t seed = st.seed;
    const bool pairs = is_pair_kind(kind);
    const uint64_t c = raws_per_value(kind, p0, false);
    auto raw_of = [&](uint64_t k) { return pairs ? (k / 2) * 2 * c : k * c; };
    const uint64_t start = raw_of(st.offset);
    if (!g.mt_have || g.mt_pos > start || g.seed_cached != seed) {
      g.mt.seed(uint32_t(seed));
      g.mt_pos = 0;
      g.mt_have = true;
      g.seed_cached = seed;
    }
    if (start - g.mt_pos > kMaxSteps) return cudaErrorNotSupported;
    g.mt.discard(start - g.mt_pos);
    g.mt_pos = start;
    struct Buf {
      uint32_t r[64];
      int i = 0;
      uint32_t next() { return r[i++ & 63]; }
    } buf;
    const uint64_t group = pairs ? 2 * c : c;
    uint64_t k = st.offset, filled_for = ~0ull;
    std::unique_ptr<std::mt19937> pair_start;  // the engine before a pair the call ends inside
    for (uint64_t i = 0; i < n; i++, k++) {
      const uint64_t at = raw_of(k);
      if (at != filled_for) {
        if (pairs && i == n - 1 && k % 2 == 0) pair_start = std::make_unique<std::mt19937>(g.mt);
        for (uint64_t j = 0; j < group; j++) buf.r[j] = uint32_t(g.mt());
        g.mt_pos += group;
        filled_for = at;
      }
      Buf w = buf;
      w.i = 0;
      value(w, kind, k, p0, p1, dst, i);
    }
    // Stop where the next value starts: a pair's second value re-draws its pair.
    if (pair_start) {
      g.mt = *pair_start;
      g.mt_pos -= group;
    }
    return cudaSuccess;
  }

  // MTGP32: block b's values from its own state (see the header); one
  // output per value (a window of 32 for PTRS Poisson values).
  Err mtgp(SimGen& g, const RandSettings& st, int kind, uint8_t* dst, uint64_t n, double p0, double p1) {
    const uint64_t c = kind == kRandPoisson && p0 > 64 ? 32 : 1;
    if (g.mtgp.size() != kMtgpBlocks || g.mtgp_seed != st.seed) {
      g.mtgp.resize(kMtgpBlocks);
      for (int b = 0; b < kMtgpBlocks; b++) g.mtgp[b].init(st.seed, b);
      g.mtgp_seed = st.seed;
    }
    constexpr uint64_t round = uint64_t(kMtgpBlocks) * kMtgpThreads;
    for (int b = 0; b < kMtgpBlocks; b++) {
      Mtgp& e = g.mtgp[b];
      // The block's values in [offset, offset + n), in order.
      for (uint64_t gi = st.offset; gi < st.offset + n;) {
        const uint64_t r = gi / round, in_round = gi % round;
        const uint64_t blk = in_round / kMtgpThreads;
        if (blk != uint64_t(b)) {  // the next run of this block's values
          const uint64_t next = blk < uint64_t(b) ? r * round + uint64_t(b) * kMtgpThreads
                                                  : (r + 1) * round + uint64_t(b) * kMtgpThreads;
          gi = next;
          continue;
        }
        const uint64_t v = r * kMtgpThreads + in_round % kMtgpThreads;  // the block's value index
        const uint64_t want = v * c;
        if (e.pos > want) e.init(st.seed, b);
        if (want - e.pos > kMaxSteps) return cudaErrorNotSupported;
        e.skip(want - e.pos);
        const uint64_t i = gi - st.offset;
        if (c > 1) {  // PTRS Poisson over this value's window of 32 outputs
          Mtgp w = e;
          put<uint32_t>(dst, i, poisson_ptrs(p0, [&] { return double(uniform_f(w.next())); }, 16));
          e.skip(c);
          gi++;
          continue;
        }
        const uint32_t x = e.next();
        const double u = double(x) * kInv32 + kInv32 / 2;
        switch (kind) {
          case kRandBits32: put<uint32_t>(dst, i, x); break;
          case kRandUniform: put<float>(dst, i, uniform_f(x)); break;
          case kRandUniformD: put<double>(dst, i, double(x) * kInv32 + kInv32); break;
          case kRandNormal: put<float>(dst, i, float(normal_icdf(u) * p1 + p0)); break;
          case kRandNormalD: put<double>(dst, i, normal_icdf(u) * p1 + p0); break;
          case kRandLogNormal: put<float>(dst, i, float(std::exp(normal_icdf(u) * p1 + p0))); break;
          case kRandLogNormalD: put<double>(dst, i, std::exp(normal_icdf(u) * p1 + p0)); break;
          case kRandPoisson: put<uint32_t>(dst, i, poisson_inversion(double(uniform_f(x)), p0)); break;
        }
        gi++;
      }
    }
    return cudaSuccess;
  }

  Err sobol(SimGen& g, const RandSettings& st, int kind, uint8_t* dst, uint64_t n, double p0, double p1) {
    const bool is64 = rand_is_64(st.type);
    const bool scrambled = st.type == kRngScrambledSobol32 || st.type == kRngScrambledSobol64;
    const uint32_t dims = st.dims;
    const uint64_t per = n / dims;
    const uint64_t* table = sobol_table(dims);
    for (uint32_t d = 0; d < dims; d++) {
      // The 32-bit direction numbers are the 64-bit ones' upper halves.
      uint64_t v[64];
      for (int b = 0; b < 64; b++) v[b] = is64 ? table[d * 64 + b] : (b < 32 ? table[d * 64 + b] >> 32 : 0);
      // The state at point `offset`: the XOR of v[b] over gray(offset)'s bits.
      const uint64_t p = st.offset, gray = p ^ (p >> 1);
      uint64_t x = scrambled ? (is64 ? sobol::scramble64(d) : sobol::scramble32(d)) : 0;
      for (int b = 0; b < 64; b++)
        if (gray >> b & 1) x ^= v[b];
      for (uint64_t j = 0; j < per; j++) {
        const uint64_t i = d * per + j, idx = p + j;
        double u;
        switch (kind) {
          case kRandBits32: put<uint32_t>(dst, i, uint32_t(x)); break;
          case kRandBits64: put<uint64_t>(dst, i, x); break;
          case kRandUniform:
            put<float>(dst, i, uniform_f(is64 ? uint32_t(x >> 32) : uint32_t(x)));
            break;
          case kRandUniformD:
            put<double>(dst, i, is64 ? double(x >> 11) * kInv53 + kInv53 / 2 : double(uint32_t(x)) * kInv32 + kInv32);
            break;
          default:
            u = is64 ? double(x >> 11) * kInv53 + kInv53 / 2 : double(uint32_t(x)) * kInv32 + kInv32 / 2;
            if (kind == kRandPoisson) {
              put<uint32_t>(dst, i, poisson_inversion(u, p0));
            } else {
              const double z = normal_icdf(u) * p1 + p0;
              const double r = (kind == kRandLogNormal || kind == kRandLogNormalD) ? std::exp(z) : z;
              if (kind == kRandNormal || kind == kRandLogNormal) put<float>(dst, i, float(r));
              else put<double>(dst, i, r);
            }
        }
        if (~idx) x ^= v[__builtin_ctzll(~idx)];  // (the last point of 2^64 has no successor)
      }
    }
    return cudaSuccess;
  }

  Context& ctx_;
};

}  // namespace

std::unique_ptr<Rand> make_sim_rand(Context& ctx) { return std::make_unique<SimRand>(ctx); }

}  // namespace wh::server
