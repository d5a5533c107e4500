// Kernels compiled by nvcc here, run by the PTX interpreter, compared with host references.
// Every test runs twice: from plain PTX and from the default (zstd-compressed) fatbin.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "ptx_test_util.hpp"

using namespace whtest;
using wh::ptx::Dim3;
using wh::ptx::Engine;
using wh::ptx::LaunchError;
using wh::ptx::Module;

namespace {

class PtxKernels : public ::testing::TestWithParam<bool> {
 protected:
  Module& mod(const std::string& base) {
    auto it = mods_.find(base);
    if (it != mods_.end()) return *it->second;
    std::string err;
    auto m = load_module(base, GetParam(), &err);
    EXPECT_TRUE(m) << err;
    if (!m) throw std::runtime_error("module load failed: " + err);
    bind_globals(*m, mem);
    return *(mods_[base] = std::move(m));
  }
  LaunchError run(const std::string& base, const char* kernel, Dim3 g, Dim3 b, const Args& a, uint32_t dyn = 0) {
    return eng.launch(mod(base), kernel, cfg(g, b, dyn), a.data(), a.size(), mem);
  }
  Args args(const std::string& base, const char* kernel) {
    const auto* k = mod(base).kernel(kernel);
    EXPECT_NE(k, nullptr) << kernel;
    return Args(k);
  }
  static std::vector<float> randf(size_t n, float lo, float hi, unsigned seed) {
    std::mt19937 r(seed);
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = d(r);
    return v;
  }
  HostMem mem;
  Engine eng{2};
  std::map<std::string, std::unique_ptr<Module>> mods_;
};

#define EXPECT_OK(e) EXPECT_EQ((e).kind, LaunchError::None) << (e).message

TEST_P(PtxKernels, VectorAdd) {
  const int n = 1000;
  auto a = randf(n, -10, 10, 1), b = randf(n, -10, 10, 2);
  uint64_t da = mem.upload(a), db = mem.upload(b), dc = mem.alloc(n * 4);
  EXPECT_OK(run("ml", "vector_add", {(n + 127) / 128}, {128}, args("ml", "vector_add")(da)(db)(dc)(n)));
  auto c = mem.download<float>(dc, n);
  for (int i = 0; i < n; ++i) ASSERT_EQ(c[i], a[i] + b[i]) << i;
}

TEST_P(PtxKernels, ReluForwardBackward) {
  const int n = 3000;
  auto x = randf(n, -1, 1, 3), dy = randf(n, -2, 2, 4);
  uint64_t dx_ = mem.upload(x), ddy = mem.upload(dy), dyo = mem.alloc(n * 4), ddx = mem.alloc(n * 4);
  EXPECT_OK(run("ml", "relu_fwd", {4}, {96}, args("ml", "relu_fwd")(dx_)(dyo)(n)));
  EXPECT_OK(run("ml", "relu_bwd", {(n + 255) / 256}, {256}, args("ml", "relu_bwd")(dx_)(ddy)(ddx)(n)));
  auto y = mem.download<float>(dyo, n), g = mem.download<float>(ddx, n);
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(y[i], x[i] > 0 ? x[i] : 0.f);
    ASSERT_EQ(g[i], x[i] > 0 ? dy[i] : 0.f);
  }
}

TEST_P(PtxKernels, SgdMomentum) {
  const int n = 777;
  auto w = randf(n, -1, 1, 5), v = randf(n, -0.1f, 0.1f, 6), g = randf(n, -1, 1, 7);
  uint64_t dw = mem.upload(w), dv = mem.upload(v), dg = mem.upload(g);
  float lr = 0.01f, mu = 0.9f, wd = 1e-4f;
  for (int step = 0; step < 3; ++step) {
    EXPECT_OK(run("ml", "sgd_momentum", {(n + 63) / 64}, {64}, args("ml", "sgd_momentum")(dw)(dv)(dg)(lr)(mu)(wd)(n)));
    for (int i = 0; i < n; ++i) {
      float gi = std::fma(wd, w[i], g[i]);
      float vi = std::fma(mu, v[i], gi);
      v[i] = vi;
      w[i] = std::fma(-lr, vi, w[i]);
    }
  }
  auto rw = mem.download<float>(dw, n), rv = mem.download<float>(dv, n);
  for (int i = 0; i < n; ++i) {
    ASSERT_NEAR(rw[i], w[i], 1e-6f) << i;
    ASSERT_NEAR(rv[i], v[i], 1e-6f) << i;
  }
}

TEST_P(PtxKernels, Softmax) {
  const int rows = 37, cols = 300;
  auto x = randf(size_t(rows) * cols, -8, 8, 8);
  uint64_t dx_ = mem.upload(x), dy = mem.alloc(x.size() * 4);
  EXPECT_OK(run("ml", "softmax_rows", {rows}, {128}, args("ml", "softmax_rows")(dx_)(dy)(cols)));
  auto y = mem.download<float>(dy, x.size());
  for (int r = 0; r < rows; ++r) {
    double m = -1e30, s = 0;
    for (int j = 0; j < cols; ++j) m = std::max(m, double(x[r * cols + j]));
    for (int j = 0; j < cols; ++j) s += std::exp(double(x[r * cols + j]) - m);
    double tot = 0;
    for (int j = 0; j < cols; ++j) {
      double ref = std::exp(double(x[r * cols + j]) - m) / s;
      ASSERT_NEAR(y[r * cols + j], ref, 1e-6 + 1e-5 * ref) << r << "," << j;
      tot += y[r * cols + j];
    }
    ASSERT_NEAR(tot, 1.0, 1e-4);
  }
}

TEST_P(PtxKernels, CrossEntropy) {
  const int rows = 200, cols = 10;
  auto logits = randf(size_t(rows) * cols, -5, 5, 9);
  std::vector<int> labels(rows);
  for (int r = 0; r < rows; ++r) labels[r] = (r * 7) % cols;
  uint64_t dl = mem.upload(logits), dlab = mem.upload(labels), dloss = mem.alloc(4);
  EXPECT_OK(run("ml", "cross_entropy", {4}, {64}, args("ml", "cross_entropy")(dl)(dlab)(dloss)(rows)(cols)));
  double ref = 0;
  for (int r = 0; r < rows; ++r) {
    double m = -1e30, s = 0;
    for (int j = 0; j < cols; ++j) m = std::max(m, double(logits[r * cols + j]));
    for (int j = 0; j < cols; ++j) s += std::exp(logits[r * cols + j] - m);
    ref += -(logits[r * cols + labels[r]] - m - std::log(s)) / rows;
  }
  EXPECT_NEAR(mem.download<float>(dloss, 1)[0], ref, 1e-4 * std::abs(ref) + 1e-5);
}

TEST_P(PtxKernels, MatmulTiled) {
  const int M = 45, N = 37, K = 53;
  auto A = randf(size_t(M) * K, -1, 1, 10), B = randf(size_t(K) * N, -1, 1, 11);
  uint64_t dA = mem.upload(A), dB = mem.upload(B), dC = mem.alloc(size_t(M) * N * 4);
  EXPECT_OK(run("linalg", "matmul_tiled", {(N + 15) / 16, (M + 15) / 16}, {16, 16}, args("linalg", "matmul_tiled")(dA)(dB)(dC)(M)(N)(K)));
  auto C = mem.download<float>(dC, size_t(M) * N);
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double ref = 0;
      for (int k = 0; k < K; ++k) ref += double(A[i * K + k]) * B[k * N + j];
      ASSERT_NEAR(C[i * N + j], ref, 1e-4) << i << "," << j;
    }
}

TEST_P(PtxKernels, Transpose) {
  const int R = 50, C = 33;
  auto in = randf(size_t(R) * C, -1, 1, 12);
  uint64_t di = mem.upload(in), dout = mem.alloc(in.size() * 4);
  EXPECT_OK(run("linalg", "transpose", {(C + 15) / 16, (R + 15) / 16}, {16, 16}, args("linalg", "transpose")(di)(dout)(R)(C)));
  auto out = mem.download<float>(dout, in.size());
  for (int y = 0; y < R; ++y)
    for (int x = 0; x < C; ++x) ASSERT_EQ(out[x * R + y], in[y * C + x]);
}

TEST_P(PtxKernels, BlockReduceSyncthreads) {
  const int n = 5000, bs = 128, blocks = (n + 2 * bs - 1) / (2 * bs);
  std::vector<float> in(n);
  for (int i = 0; i < n; ++i) in[i] = float(i % 17) - 8.0f;
  uint64_t di = mem.upload(in), dout = mem.alloc(blocks * 4);
  EXPECT_OK(run("linalg", "block_reduce", {blocks}, {bs}, args("linalg", "block_reduce")(di)(dout)(n), bs * 4));
  auto out = mem.download<float>(dout, blocks);
  for (int b = 0; b < blocks; ++b) {
    float ref = 0;
    for (int i = b * 2 * bs; i < std::min(n, (b + 1) * 2 * bs); ++i) ref += in[i];
    ASSERT_EQ(out[b], ref) << b;  // small integers: exact in any order
  }
}

TEST_P(PtxKernels, WarpShuffleReduce) {
  const int n = 10000;
  std::vector<float> in(n);
  for (int i = 0; i < n; ++i) in[i] = float((i * 13) % 11) - 5.0f;
  uint64_t di = mem.upload(in), dout = mem.alloc(4);
  EXPECT_OK(run("linalg", "warp_reduce", {(n + 255) / 256}, {256}, args("linalg", "warp_reduce")(di)(dout)(n)));
  EXPECT_EQ(mem.download<float>(dout, 1)[0], std::accumulate(in.begin(), in.end(), 0.0f));
}

TEST_P(PtxKernels, ShuffleModes) {
  const int n = 128;
  std::vector<int> in(n);
  for (int i = 0; i < n; ++i) in[i] = (i * 37) % 101 - 50;
  uint64_t di = mem.upload(in), dx = mem.alloc(n * 4), du = mem.alloc(n * 4), db = mem.alloc(n * 4);
  EXPECT_OK(run("linalg", "shuffle_modes", {2}, {64}, args("linalg", "shuffle_modes")(di)(dx)(du)(db)));
  auto xs = mem.download<int>(dx, n), us = mem.download<int>(du, n), bs = mem.download<int>(db, n);
  for (int w = 0; w < n / 32; ++w) {
    int tot = 0, run_ = 0;
    for (int l = 0; l < 32; ++l) tot += in[w * 32 + l];
    for (int l = 0; l < 32; ++l) {
      run_ += in[w * 32 + l];
      ASSERT_EQ(xs[w * 32 + l], tot);
      ASSERT_EQ(us[w * 32 + l], run_);
      ASSERT_EQ(bs[w * 32 + l], in[w * 32 + ((l * 7) & 31)]);
    }
  }
}

TEST_P(PtxKernels, AtomicsHistogram) {
  const int n = 20000;
  std::vector<uint8_t> data(n);
  std::mt19937 r(13);
  for (auto& d : data) d = uint8_t(r() % 256 < 128 ? r() % 16 : r() % 256);
  uint64_t dd = mem.upload(data), dbins = mem.alloc(256 * 4);
  EXPECT_OK(run("linalg", "histogram", {8}, {192}, args("linalg", "histogram")(dd)(dbins)(n)));
  auto bins = mem.download<uint32_t>(dbins, 256);
  std::vector<uint32_t> ref(256, 0);
  for (auto d : data) ref[d]++;
  EXPECT_EQ(bins, ref);
}

TEST_P(PtxKernels, PrefixScan) {
  const int n = 1000, bs = 256, blocks = (n + bs - 1) / bs;
  std::vector<int> in(n);
  for (int i = 0; i < n; ++i) in[i] = (i * 31) % 7 - 2;
  uint64_t di = mem.upload(in), dout = mem.alloc(n * 4), dt = mem.alloc(blocks * 4);
  EXPECT_OK(run("linalg", "scan_block", {blocks}, {bs}, args("linalg", "scan_block")(di)(dout)(dt)(n)));
  // host scan of the block totals, then add offsets on the device
  auto tot = mem.download<int>(dt, blocks);
  for (int b = 1; b < blocks; ++b) tot[b] += tot[b - 1];
  uint64_t doff = mem.upload(tot);
  EXPECT_OK(run("linalg", "scan_add", {blocks}, {bs}, args("linalg", "scan_add")(dout)(doff)(n)));
  auto out = mem.download<int>(dout, n);
  int s = 0;
  for (int i = 0; i < n; ++i) {
    s += in[i];
    ASSERT_EQ(out[i], s) << i;
  }
}

TEST_P(PtxKernels, DeviceFunctionWithLocalArray) {
  const int n = 50, threads = 96;
  auto src = randf(n, -1, 1, 14);
  uint64_t ds = mem.upload(src), dout = mem.alloc(threads * 4);
  EXPECT_OK(run("misc", "call_local", {1}, {threads}, args("misc", "call_local")(ds)(dout)(n)));
  auto out = mem.download<float>(dout, threads);
  for (int t = 0; t < threads; ++t) {
    int stride = t % 7 + 1;
    float tmp[32], acc = 0;
    for (int i = 0; i < 32; ++i) tmp[i] = src[(i * stride) % n];
    for (int i = 0; i < 32; ++i) acc += tmp[(i * 5 + stride) & 31] * float(i + 1);
    ASSERT_NEAR(out[t], acc, 1e-4) << t;
  }
  const auto* k = mod("misc").kernel("call_local");
  EXPECT_GE(k->local_bytes_per_thread, 128u);
}

TEST_P(PtxKernels, ConstantAndDeviceGlobals) {
  auto& m = mod("misc");
  bool saw_const = false, saw_dev = false;
  for (auto& g : m.globals()) {
    if (g.name == "c_coeffs") {
      saw_const = true;
      EXPECT_TRUE(g.is_const);
      ASSERT_EQ(g.size, 16u);
      float f[4];
      std::memcpy(f, g.init.data(), 16);
      EXPECT_EQ(f[1], -1.25f);
    }
    if (g.name == "g_counter") {
      saw_dev = true;
      EXPECT_FALSE(g.is_const);
      int v;
      std::memcpy(&v, g.init.data(), 4);
      EXPECT_EQ(v, 100);
    }
  }
  EXPECT_TRUE(saw_const && saw_dev);
  uint64_t dout = mem.alloc(64 * 4), dc = mem.alloc(4);
  EXPECT_OK(run("misc", "globals_kernel", {1}, {64}, args("misc", "globals_kernel")(dout)(dc)));
  auto out = mem.download<float>(dout, 64);
  const float co[4] = {0.5f, -1.25f, 2.0f, 3.5f};
  for (int t = 0; t < 64; ++t) ASSERT_EQ(out[t], co[t & 3] * float((t & 7) + 1));
  EXPECT_EQ(mem.download<int>(dc, 1)[0], 164);
}

TEST_P(PtxKernels, ExternDynamicShared) {
  const int n = 100, blocks = 3;
  std::vector<int> in(n * blocks);
  std::iota(in.begin(), in.end(), 0);
  uint64_t di = mem.upload(in), dout = mem.alloc(in.size() * 4);
  EXPECT_OK(run("misc", "dyn_shared_reverse", {blocks}, {128}, args("misc", "dyn_shared_reverse")(di)(dout)(n), n * 4));
  auto out = mem.download<int>(dout, in.size());
  for (int b = 0; b < blocks; ++b)
    for (int t = 0; t < n; ++t) ASSERT_EQ(out[b * n + t], in[b * n + n - 1 - t]);
  // too little dynamic shared memory for the kernel's accesses: a shared bad access
  auto e = run("misc", "dyn_shared_reverse", {1}, {128}, args("misc", "dyn_shared_reverse")(di)(dout)(n), 64);
  EXPECT_EQ(e.kind, LaunchError::BadAccess) << e.message;
  EXPECT_NE(e.message.find("shared"), std::string::npos) << e.message;
}

TEST_P(PtxKernels, AtomicsGlobal) {
  const int n = 1000;
  std::vector<uint32_t> vals(n);
  for (int i = 0; i < n; ++i) vals[i] = uint32_t((i * 7919) % 5003 + 1);
  std::vector<uint32_t> init = {0, 0xffffffffu, 0, 12345, 0, 0, 0, 0xffffffffu, 0, 0, 0x80000000u, 0};
  uint64_t dr = mem.upload(init), df = mem.alloc(4), dv = mem.upload(vals);
  EXPECT_OK(run("misc", "atomics_global", {(n + 127) / 128}, {128}, args("misc", "atomics_global")(dr)(df)(dv)(n)));
  auto r = mem.download<uint32_t>(dr, 12);
  uint64_t sum = 0;
  uint32_t mn = ~0u, mx = 0, x = 0;
  for (auto v : vals) { sum += v; mn = std::min(mn, v); mx = std::max(mx, v); x ^= v; }
  EXPECT_EQ(r[0], uint32_t(sum));
  EXPECT_EQ(r[1], mn);
  EXPECT_EQ(r[2], mx);
  EXPECT_LT(r[3], uint32_t(n));                  // last exchanged thread index
  EXPECT_LE(r[4], uint32_t(n));                  // cas chain advanced at most n times
  EXPECT_EQ(r[5], uint32_t(n % 10));             // inc wraps at 9 -> n mod 10
  {                                              // dec: 0 -> 1000 -> 999 ... wraps
    uint32_t d = 0;
    for (int i = 0; i < n; ++i) d = (d == 0 || d > 1000) ? 1000 : d - 1;
    EXPECT_EQ(r[6], d);
  }
  EXPECT_EQ(r[7], 0x80000000u);
  EXPECT_EQ(r[8], 0xffffu);
  EXPECT_EQ(r[9], x);
  EXPECT_EQ(int32_t(r[10]), -int32_t(mn));
  EXPECT_EQ(int32_t(r[11]), -int32_t(mx));
  EXPECT_EQ(mem.download<float>(df, 1)[0], 0.5f * n);
}

TEST_P(PtxKernels, AtomicsShared) {
  const int n = 200;
  std::vector<uint32_t> vals(n);
  for (int i = 0; i < n; ++i) vals[i] = uint32_t((i * 31) % 97 + 3);
  uint64_t dv = mem.upload(vals), dout = mem.alloc(11 * 4);
  EXPECT_OK(run("misc", "atomics_shared", {1}, {256}, args("misc", "atomics_shared")(dv)(dout)(n)));
  auto r = mem.download<uint32_t>(dout, 11);
  uint32_t sum = 0, mn = ~0u, mx = 0, x = 0, orv = 0;
  for (int i = 0; i < n; ++i) { sum += vals[i]; mn = std::min(mn, vals[i]); mx = std::max(mx, vals[i]); x ^= vals[i]; orv |= 1u << (i & 31); }
  EXPECT_EQ(r[0], sum);
  EXPECT_EQ(r[1], mn);
  EXPECT_NE(std::find(vals.begin(), vals.end(), r[3]), vals.end());
  EXPECT_EQ(r[2], mx);
  EXPECT_LE(r[4], uint32_t(n));
  EXPECT_EQ(r[5], uint32_t(n % 8));
  uint32_t d = 50;
  for (int i = 0; i < n; ++i) d = (d == 0 || d > 100) ? 100 : d - 1;
  EXPECT_EQ(r[6], d);
  EXPECT_EQ(r[7], 0u);
  EXPECT_EQ(r[8], orv);
  EXPECT_EQ(r[9], x);
  float f;
  std::memcpy(&f, &r[10], 4);
  EXPECT_EQ(f, 0.25f * n);
}

TEST_P(PtxKernels, VoteBallotMatch) {
  const int n = 128;
  std::vector<int> in(n);
  for (int i = 0; i < n; ++i) in[i] = (i % 3 == 0) ? -(i % 50) : i * 2;
  uint64_t di = mem.upload(in), db = mem.alloc(16), dany = mem.alloc(16), dall = mem.alloc(16), dpop = mem.alloc(n * 4),
           dm = mem.alloc(n * 4);
  EXPECT_OK(run("misc", "vote_ballot", {1}, {n}, args("misc", "vote_ballot")(di)(db)(dany)(dall)(dpop)(dm)));
  auto b = mem.download<uint32_t>(db, 4), pop = mem.download<uint32_t>(dpop, n), m = mem.download<uint32_t>(dm, n);
  auto any = mem.download<int>(dany, 4), all = mem.download<int>(dall, 4);
  int block_count = 0;
  for (int i = 0; i < n; ++i) block_count += in[i] > 0;
  for (int w = 0; w < 4; ++w) {
    uint32_t rb = 0;
    bool ra = false;
    for (int l = 0; l < 32; ++l) {
      rb |= uint32_t(in[w * 32 + l] > 0) << l;
      ra = ra || in[w * 32 + l] > 100;
    }
    EXPECT_EQ(b[w], rb);
    EXPECT_EQ(any[w] != 0, ra);
    EXPECT_EQ(all[w], 1);
    for (int l = 0; l < 32; ++l) {
      EXPECT_EQ(pop[w * 32 + l], uint32_t(std::popcount(rb) + 1000 * block_count));
      uint32_t rm = 0;
      for (int k = 0; k < 32; ++k) rm |= uint32_t((in[w * 32 + k] & 3) == (in[w * 32 + l] & 3)) << k;
      EXPECT_EQ(m[w * 32 + l], rm);
    }
  }
}

TEST_P(PtxKernels, DivergentBranchesReconverge) {
  std::vector<int> in(64);
  for (int i = 0; i < 64; ++i) in[i] = i * 5 - 100;
  uint64_t di = mem.upload(in), dout = mem.alloc(64 * 4);
  EXPECT_OK(run("misc", "diverge", {1}, {64}, args("misc", "diverge")(di)(dout)));
  auto out = mem.download<int>(dout, 64);
  std::vector<int> v(64);
  for (int t = 0; t < 64; ++t) {
    int x = in[t];
    if (t & 1) for (int k = 0; k < (t & 7); ++k) x = x * 3 + k;
    else if (t & 2) x = -x;
    else while (x > 10) x -= 7;
    v[t] = x;
  }
  for (int t = 0; t < 64; ++t) ASSERT_EQ(out[t], v[t] + v[t ^ 1]) << t;
}

TEST_P(PtxKernels, Fp16Conversions) {
  std::vector<float> in = {0.0f, 1.0f, -2.5f, 65504.0f, 70000.0f, 1e-5f, 6.1e-5f, 3.14159f, -0.333333f, 1024.7f, 1e-8f, -65519.0f};
  const int n = int(in.size());
  uint64_t di = mem.upload(in), dh = mem.alloc(n * 2), db = mem.alloc(n * 4), ds = mem.alloc(n * 4);
  EXPECT_OK(run("misc", "fp16_convert", {1}, {32}, args("misc", "fp16_convert")(di)(dh)(db)(ds)(n)));
  auto h = mem.download<uint16_t>(dh, n);
  auto back = mem.download<float>(db, n), sum = mem.download<float>(ds, n);
  // reference: round to nearest even through _Float16
  for (int i = 0; i < n; ++i) {
    _Float16 r = (_Float16)in[i];
    uint16_t rb;
    std::memcpy(&rb, &r, 2);
    EXPECT_EQ(h[i], rb) << in[i];
    EXPECT_EQ(back[i], float(r)) << in[i];
    _Float16 y = (_Float16)(float(r) + 1.0f);
    _Float16 p = (_Float16)(float(y) * float(r));
    EXPECT_EQ(sum[i], float(p)) << in[i];
  }
}

TEST_P(PtxKernels, DoubleArithmetic) {
  const int n = 64;
  std::vector<double> a(n), b(n);
  for (int i = 0; i < n; ++i) { a[i] = (i - 30) * 1.37; b[i] = (i % 5 + 1) * -0.71 + (i % 2 ? 3.0 : 0.0); }
  uint64_t da = mem.upload(a), db = mem.upload(b), dout = mem.alloc(n * 4 * 8);
  EXPECT_OK(run("misc", "double_math", {2}, {32}, args("misc", "double_math")(da)(db)(dout)(n)));
  auto o = mem.download<double>(dout, n * 4);
  for (int i = 0; i < n; ++i) {
    double x = a[i], y = b[i];
    EXPECT_DOUBLE_EQ(o[4 * i + 0], x * y + x / y);
    EXPECT_DOUBLE_EQ(o[4 * i + 1], std::fma(x, y, -x) - std::sqrt(std::fabs(y)));
    EXPECT_DOUBLE_EQ(o[4 * i + 2], double((long long)(x * 1000.0)) + double(float(y)));
    EXPECT_DOUBLE_EQ(o[4 * i + 3], std::fmax(x, y) - std::fmin(x, y));
  }
}

TEST_P(PtxKernels, IntegerOps) {
  const int n = 64;
  std::vector<int> a(n), b(n);
  std::mt19937 r(15);
  for (int i = 0; i < n; ++i) { a[i] = int(r()); b[i] = i % 9 == 0 ? 0 : int(r()) >> (i % 20); }
  a[1] = INT32_MIN; b[1] = -1;
  uint64_t da = mem.upload(a), db = mem.upload(b), dout = mem.alloc(n * 12 * 4);
  EXPECT_OK(run("misc", "int_ops", {1}, {n}, args("misc", "int_ops")(da)(db)(dout)(n)));
  auto o = mem.download<int>(dout, n * 12);
  for (int i = 0; i < n; ++i) {
    int x = a[i], y = b[i];
    unsigned ux = unsigned(x), uy = unsigned(y);
    auto brev = [](uint32_t v) { uint32_t r2 = 0; for (int k = 0; k < 32; ++k) r2 |= ((v >> k) & 1) << (31 - k); return r2; };
    auto perm = [](uint32_t lo, uint32_t hi, uint32_t s) {
      uint64_t v = (uint64_t(hi) << 32) | lo; uint32_t r2 = 0;
      for (int k = 0; k < 4; ++k) r2 |= uint32_t((v >> (((s >> (4 * k)) & 7) * 8)) & 0xff) << (8 * k);
      return r2;
    };
    if (y != 0 && !(x == INT32_MIN && y == -1)) {
      EXPECT_EQ(o[12 * i + 0], x / y) << i;
      EXPECT_EQ(o[12 * i + 1], x % y) << i;
    }
    EXPECT_EQ(o[12 * i + 2], int((int64_t(x) * y) >> 32));
    EXPECT_EQ(unsigned(o[12 * i + 3]), unsigned((uint64_t(ux) * uy) >> 32));
    EXPECT_EQ(o[12 * i + 4], (x == 0 ? 32 : __builtin_clz(ux)) + __builtin_popcount(uy) * 64);
    EXPECT_EQ(unsigned(o[12 * i + 5]), brev(ux));
    EXPECT_EQ(o[12 * i + 6], x >> (y & 31));
    EXPECT_EQ(unsigned(o[12 * i + 7]), ux >> (uy & 31));
    EXPECT_EQ(o[12 * i + 8], int((int64_t(x) * int64_t(y)) >> 7));
    EXPECT_EQ(o[12 * i + 9], int(unsigned(__builtin_ffs(x)) + perm(ux, uy, 0x5140)));
    EXPECT_EQ(o[12 * i + 10], int(unsigned(std::min(x, y)) * 3u + unsigned(std::max(x, y)) + unsigned(x == INT32_MIN ? x : std::abs(x))));
    EXPECT_EQ(unsigned(o[12 * i + 11]), (ux / (uy | 1u)) ^ (ux % (uy | 1u)));
  }
}

TEST_P(PtxKernels, DeviceAssert) {
  std::vector<int> in(100, 1);
  uint64_t ok = mem.upload(in);
  in[77] = -5;
  uint64_t bad = mem.upload(in);
  EXPECT_OK(run("misc", "assert_kernel", {1}, {128}, args("misc", "assert_kernel")(ok)(100)));
  auto e = run("misc", "assert_kernel", {1}, {128}, args("misc", "assert_kernel")(bad)(100));
  EXPECT_EQ(e.kind, LaunchError::Assert);
  EXPECT_NE(e.message.find("in[i] >= 0"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("misc.cu"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("assert_kernel"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("thread 77"), std::string::npos) << e.message;
  // the engine is fine afterwards
  EXPECT_OK(run("misc", "assert_kernel", {1}, {128}, args("misc", "assert_kernel")(ok)(100)));
}

TEST_P(PtxKernels, OutOfBoundsAccessFailsLaunchOnly) {
  uint64_t p = mem.alloc(16 * 4);
  EXPECT_OK(run("misc", "oob_write", {1}, {32}, args("misc", "oob_write")(p)(15)));
  auto e = run("misc", "oob_write", {1}, {32}, args("misc", "oob_write")(p)(16));
  EXPECT_EQ(e.kind, LaunchError::BadAccess);
  EXPECT_NE(e.message.find("oob_write"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("global write of 4 bytes"), std::string::npos) << e.message;
  char addr[32];
  snprintf(addr, sizeof addr, "0x%llx", (unsigned long long)(p + 64));
  EXPECT_NE(e.message.find(addr), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("PTX line"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("st.global"), std::string::npos) << e.message;
  // a null pointer
  e = run("misc", "oob_write", {1}, {32}, args("misc", "oob_write")(uint64_t(0))(0));
  EXPECT_EQ(e.kind, LaunchError::BadAccess) << e.message;
  // without the region fast path (translate() per access) the same result
  mem.use_regions = false;
  e = run("misc", "oob_write", {1}, {32}, args("misc", "oob_write")(p)(-1));
  EXPECT_EQ(e.kind, LaunchError::BadAccess) << e.message;
  EXPECT_OK(run("misc", "oob_write", {1}, {32}, args("misc", "oob_write")(p)(0)));
}

TEST_P(PtxKernels, TrapAndPrintf) {
  auto e = run("misc", "trap_kernel", {1}, {32}, args("misc", "trap_kernel"));
  EXPECT_EQ(e.kind, LaunchError::Trap) << e.message;
  testing::internal::CaptureStdout();
  e = run("misc", "printf_kernel", {1}, {32}, args("misc", "printf_kernel")(42));
  std::string out = testing::internal::GetCapturedStdout();
  EXPECT_OK(e);
  EXPECT_EQ(out, "ptx-printf v=42 f=1.50 s=ok\n");
}

TEST_P(PtxKernels, DeviceOutputSink) {
  // With an output sink, printf text is collected for the caller, not written to stdout.
  wh::ptx::DeviceOutput out;
  auto c = cfg({1}, {32});
  c.output = &out;
  auto a = args("misc", "printf_kernel")(42);
  testing::internal::CaptureStdout();
  auto e = eng.launch(mod("misc"), "printf_kernel", c, a.data(), a.size(), mem);
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "");
  EXPECT_OK(e);
  EXPECT_EQ(out.printf_text, "ptx-printf v=42 f=1.50 s=ok\n");
  EXPECT_EQ(out.dropped, 0u);
  // A full FIFO drops the record whole and counts it.
  out = {};
  out.limit = 10;
  EXPECT_OK(eng.launch(mod("misc"), "printf_kernel", c, a.data(), a.size(), mem));
  EXPECT_EQ(out.printf_text, "");
  EXPECT_EQ(out.dropped, 28u);
  // Device-assert messages in a GPU's wording, one per failing thread.
  std::vector<int> in(100, 1);
  in[77] = -5;
  in[78] = -6;
  uint64_t bad = mem.upload(in);
  out = {};
  auto c2 = cfg({1}, {128});
  c2.output = &out;
  auto b = args("misc", "assert_kernel")(bad)(100);
  e = eng.launch(mod("misc"), "assert_kernel", c2, b.data(), b.size(), mem);
  EXPECT_EQ(e.kind, LaunchError::Assert);
  EXPECT_NE(out.assert_text.find("misc.cu:144: "), std::string::npos) << out.assert_text;
  EXPECT_NE(out.assert_text.find("assert_kernel"), std::string::npos) << out.assert_text;
  EXPECT_NE(out.assert_text.find(": block: [0,0,0], thread: [77,0,0] Assertion `in[i] >= 0` failed.\n"), std::string::npos)
      << out.assert_text;
  EXPECT_NE(out.assert_text.find(": block: [0,0,0], thread: [78,0,0] Assertion `in[i] >= 0` failed.\n"), std::string::npos)
      << out.assert_text;
}

TEST_P(PtxKernels, InvalidConfigurations) {
  auto a = args("ml", "vector_add");
  auto e = eng.launch(mod("ml"), "vector_add", cfg({1}, {2048}), a.data(), a.size(), mem);
  EXPECT_EQ(e.kind, LaunchError::InvalidConfig);
  e = eng.launch(mod("ml"), "no_such_kernel", cfg({1}, {32}), a.data(), a.size(), mem);
  EXPECT_EQ(e.kind, LaunchError::InvalidConfig);
  e = eng.launch(mod("ml"), "vector_add", cfg({1}, {32}), a.data(), 4, mem);
  EXPECT_EQ(e.kind, LaunchError::InvalidConfig);
  e = eng.launch(mod("ml"), "vector_add", cfg({0}, {32}), a.data(), a.size(), mem);
  EXPECT_EQ(e.kind, LaunchError::InvalidConfig);
}

TEST_P(PtxKernels, KernelInfoParams) {
  auto* k = mod("ml").kernel("sgd_momentum");
  ASSERT_NE(k, nullptr);
  std::vector<wh::fatbin::ParamInfo> want = {{0, 8}, {8, 8}, {16, 8}, {24, 4}, {28, 4}, {32, 4}, {36, 4}};
  EXPECT_EQ(k->params, want);
  EXPECT_EQ(k->param_bytes, 40u);
  auto* t = mod("linalg").kernel("matmul_tiled");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->static_shared_bytes, 2u * 16 * 16 * 4);
}

INSTANTIATE_TEST_SUITE_P(Loaders, PtxKernels, ::testing::Values(false, true),
                         [](const auto& i) { return i.param ? std::string("fatbin") : std::string("ptx"); });

}  // namespace
