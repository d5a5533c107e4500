// Texture and surface instructions on the sim device, against a host model
// written from the CUDA Programming Guide's texture-fetching appendix:
// x_B = x - 0.5, i = floor(x_B), alpha = frac(x_B) in 9-bit fixed point
// (8 fractional bits), tex(x) = (1 - alpha) T[i] + alpha T[i + 1]; wrap and
// mirror only with normalized coordinates; border texels read the border
// colour.
#include <cmath>
#include <random>

#include "ptx_test_util.hpp"

using namespace wh::ptx;
using whtest::Args;
using whtest::cfg;

namespace {

// The CUDA types and enum values the kernels use (no CUDA headers here).
struct float2 { float x, y; };
struct float4 { float x, y, z, w; };
enum { cudaAddressModeWrap = 0, cudaAddressModeClamp = 1, cudaAddressModeMirror = 2, cudaAddressModeBorder = 3 };

class TexMem : public whtest::HostMem {
 public:
  uint64_t add(const TexView& v, bool surf) {
    uint64_t h = 0x100 + views_.size();
    views_[h] = {v, surf};
    return h;
  }
  bool texture(uint64_t h, TexView& out) override { return find(h, false, out); }
  bool surface(uint64_t h, TexView& out) override { return find(h, true, out); }

 private:
  bool find(uint64_t h, bool surf, TexView& out) {
    auto it = views_.find(h);
    if (it == views_.end() || it->second.second != surf) return false;
    out = it->second.first;
    return true;
  }
  std::map<uint64_t, std::pair<TexView, bool>> views_;
};

struct TexFixture : ::testing::Test {
  void SetUp() override {
    std::string err;
    mod = whtest::load_module("texture", false, &err);
    ASSERT_TRUE(mod) << err;
  }
  // A float texture of nch channels over w x h x d texels with values v.
  TexView make(const std::vector<float>& v, uint32_t w, uint32_t h, uint32_t d, uint8_t dims, uint8_t nch = 1) {
    TexView t;
    t.w = w, t.h = h, t.d = d, t.dims = dims, t.nch = nch, t.cbytes = 4, t.ckind = 2;
    t.pitch = uint64_t(w) * nch * 4;
    t.slice = t.pitch * h;
    t.bytes = t.slice * d;
    t.dptr = mem.upload(v);
    return t;
  }
  template <class C>
  std::vector<float4> run(const char* kernel, uint64_t h, const std::vector<C>& coords, int extra = -1) {
    uint64_t dc = mem.upload(coords), dout = mem.alloc(coords.size() * sizeof(float4));
    Args a(mod->kernel(kernel));
    a(h)(dout)(dc);
    if (extra >= 0) a(extra);
    a(int(coords.size()));
    auto e = eng.launch(*mod, kernel, cfg({uint32_t((coords.size() + 63) / 64)}, {64}), a.data(), a.size(), mem);
    EXPECT_FALSE(e) << e.message;
    return mem.download<float4>(dout, coords.size());
  }
  TexMem mem;
  Engine eng{2};
  std::unique_ptr<Module> mod;
};

// ---- the host model
float q8(double f) { return float(std::nearbyint(f * 256.0) / 256.0); }
int64_t index_of(int64_t i, int64_t n, int mode, bool norm) {
  if (i >= 0 && i < n) return i;
  if (mode == cudaAddressModeBorder) return -1;
  if (norm && mode == cudaAddressModeWrap) return ((i % n) + n) % n;
  if (norm && mode == cudaAddressModeMirror) {
    int64_t p = ((i % (2 * n)) + 2 * n) % (2 * n);
    return p < n ? p : 2 * n - 1 - p;
  }
  return i < 0 ? 0 : n - 1;
}
double unnorm(float u, int64_t n, int mode, bool norm) {
  double x = u;
  if (!norm) return x;
  if (mode == cudaAddressModeWrap) x -= std::floor(x);
  if (mode == cudaAddressModeMirror) {
    double f = std::floor(x);
    x -= f;
    if (int64_t(f) & 1) x = 1 - x;
  }
  return x * double(n);
}
// One channel of a 1-3D float texture of extent n[], sampled at c[].
float model(const std::vector<float>& v, const int64_t n[3], int dims, const float c[3], int mode, bool norm,
            bool linear, float border = 0) {
  auto T = [&](const int64_t* idx) {
    int64_t ii[3] = {0, 0, 0};
    for (int k = 0; k < dims; ++k)
      if ((ii[k] = index_of(idx[k], n[k], mode, norm)) < 0) return border;
    return v[size_t((ii[2] * n[1] + ii[1]) * n[0] + ii[0])];
  };
  double x[3];
  for (int k = 0; k < dims; ++k) x[k] = unnorm(c[k], n[k], mode, norm);
  if (!linear) {
    int64_t idx[3] = {0, 0, 0};
    for (int k = 0; k < dims; ++k) idx[k] = int64_t(std::floor(x[k]));
    return T(idx);
  }
  int64_t i[3] = {0, 0, 0};
  float a[3] = {0, 0, 0};
  for (int k = 0; k < dims; ++k) {
    double xb = x[k] - 0.5;
    i[k] = int64_t(std::floor(xb));
    a[k] = q8(xb - std::floor(xb));
  }
  float r = 0;
  for (int q = 0; q < (1 << dims); ++q) {
    int64_t idx[3] = {0, 0, 0};
    float w = 1;
    for (int k = 0; k < dims; ++k) {
      int hi = (q >> k) & 1;
      idx[k] = i[k] + hi;
      w *= hi ? a[k] : 1 - a[k];
    }
    r += w * T(idx);
  }
  return r;
}

std::vector<float> ramp(size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(-10, 10);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

TEST_F(TexFixture, Point2DEveryAddressModeUnnormalized) {
  const uint32_t W = 7, H = 5;
  auto img = ramp(W * H, 1);
  std::vector<float2> c;
  for (float y = -2.5f; y < H + 2; y += 0.75f)
    for (float x = -3.25f; x < W + 3; x += 0.5f) c.push_back({x, y});
  for (int mode : {cudaAddressModeClamp, cudaAddressModeBorder, cudaAddressModeWrap, cudaAddressModeMirror}) {
    TexView t = make(img, W, H, 1, 2);
    t.addr[0] = t.addr[1] = uint8_t(mode);
    t.border[0] = 42.0f;
    auto out = run("k_tex2d", mem.add(t, false), c);
    const int64_t n[3] = {W, H, 1};
    for (size_t i = 0; i < c.size(); ++i) {
      float cc[3] = {c[i].x, c[i].y, 0};
      // unnormalized coordinates: wrap and mirror behave as clamp
      EXPECT_EQ(out[i].x, model(img, n, 2, cc, mode, false, false, 42.0f)) << "mode " << mode << " at " << c[i].x << "," << c[i].y;
    }
  }
}

TEST_F(TexFixture, Linear2DUsesNineBitWeights) {
  const uint32_t W = 9, H = 6;
  auto img = ramp(W * H, 2);
  TexView t = make(img, W, H, 1, 2);
  t.filter_linear = true;
  uint64_t h = mem.add(t, false);
  std::mt19937 g(3);
  std::uniform_real_distribution<float> dx(-1, W + 1), dy(-1, H + 1);
  std::vector<float2> c;
  for (int i = 0; i < 500; ++i) c.push_back({dx(g), dy(g)});
  c.push_back({1.5f + 1.0f / 1024, 2.5f});  // frac 1/1024 rounds to weight 0: exactly T[1]
  auto out = run("k_tex2d", h, c);
  const int64_t n[3] = {W, H, 1};
  for (size_t i = 0; i < c.size(); ++i) {
    float cc[3] = {c[i].x, c[i].y, 0};
    float e = model(img, n, 2, cc, cudaAddressModeClamp, false, true);
    EXPECT_NEAR(out[i].x, e, 1e-5f * (1 + std::fabs(e))) << c[i].x << "," << c[i].y;
  }
  EXPECT_EQ(out.back().x, img[2 * W + 1]);
}

TEST_F(TexFixture, NormalizedCoordinatesAllModes1D) {
  const uint32_t W = 11;
  auto img = ramp(W, 4);
  std::vector<float> c;
  for (float u = -2.3f; u < 2.4f; u += 0.037f) c.push_back(u);
  for (bool lin : {false, true})
    for (int mode : {cudaAddressModeWrap, cudaAddressModeClamp, cudaAddressModeMirror, cudaAddressModeBorder}) {
      TexView t = make(img, W, 1, 1, 1);
      t.addr[0] = uint8_t(mode);
      t.norm_coords = true;
      t.filter_linear = lin;
      auto out = run("k_tex1d", mem.add(t, false), c);
      const int64_t n[3] = {W, 1, 1};
      for (size_t i = 0; i < c.size(); ++i) {
        float cc[3] = {c[i], 0, 0};
        float e = model(img, n, 1, cc, mode, true, lin);
        EXPECT_NEAR(out[i].x, e, 1e-5f * (1 + std::fabs(e))) << "mode " << mode << " linear " << lin << " u " << c[i];
      }
    }
}

TEST_F(TexFixture, Uchar4NormalizedFloatAndElementReads) {
  const uint32_t W = 4, H = 3;
  std::vector<uint8_t> px(W * H * 4);
  for (size_t i = 0; i < px.size(); ++i) px[i] = uint8_t(i * 23 + 5);
  TexView t;
  t.w = W, t.h = H, t.dims = 2, t.nch = 4, t.cbytes = 1, t.ckind = 1;
  t.pitch = 32;  // padded rows
  std::vector<uint8_t> padded(32 * H);
  for (uint32_t y = 0; y < H; ++y) std::memcpy(&padded[y * 32], &px[y * W * 4], W * 4);
  t.bytes = t.slice = padded.size();
  t.dptr = mem.upload(padded);
  t.read_normalized = true;
  std::vector<float2> c;
  for (uint32_t y = 0; y < H; ++y)
    for (uint32_t x = 0; x < W; ++x) c.push_back({x + 0.5f, y + 0.5f});
  auto out = run("k_tex2d", mem.add(t, false), c);
  for (size_t i = 0; i < c.size(); ++i) {
    EXPECT_EQ(out[i].x, px[i * 4 + 0] / 255.0f);
    EXPECT_EQ(out[i].w, px[i * 4 + 3] / 255.0f);
  }
  // linear filtering between two texels of a normalized format
  t.filter_linear = true;
  auto mid = run("k_tex2d", mem.add(t, false), std::vector<float2>{{1.0f, 0.5f}});
  EXPECT_NEAR(mid[0].y, 0.5f * (px[1] + px[5]) / 255.0f, 1e-6f);
  // element-type read: raw bytes
  t.read_normalized = false;
  t.filter_linear = false;
  uint64_t dc = mem.upload(c), dout = mem.alloc(c.size() * 4);
  Args a(mod->kernel("k_tex2d_elem"));
  a(mem.add(t, false))(dout)(dc)(int(c.size()));
  auto e = eng.launch(*mod, "k_tex2d_elem", cfg({1}, {64}), a.data(), a.size(), mem);
  ASSERT_FALSE(e) << e.message;
  EXPECT_EQ(mem.download<uint8_t>(dout, px.size()), px);
}

TEST_F(TexFixture, Trilinear3DAndLayers) {
  const uint32_t W = 5, H = 4, D = 3;
  auto vol = ramp(W * H * D, 5);
  TexView t = make(vol, W, H, D, 3);
  t.filter_linear = true;
  std::mt19937 g(6);
  std::uniform_real_distribution<float> u(-1, 6);
  std::vector<float4> c;
  for (int i = 0; i < 300; ++i) c.push_back({u(g), u(g), u(g), 0});
  auto out = run("k_tex3d", mem.add(t, false), c);
  const int64_t n[3] = {W, H, D};
  for (size_t i = 0; i < c.size(); ++i) {
    float cc[3] = {c[i].x, c[i].y, c[i].z};
    float e = model(vol, n, 3, cc, cudaAddressModeClamp, false, true);
    EXPECT_NEAR(out[i].x, e, 1e-4f) << i;
  }
  // the same memory as D layers of W x H: each layer filters on its own
  TexView l = make(vol, W, H, D, 2);
  l.layered = true;
  l.filter_linear = true;
  uint64_t hl = mem.add(l, false);
  std::vector<float2> c2;
  for (int i = 0; i < 100; ++i) c2.push_back({u(g), u(g)});
  for (int layer = 0; layer < int(D); ++layer) {
    auto o2 = run("k_tex_a2d", hl, c2, layer);
    std::vector<float> one(vol.begin() + layer * W * H, vol.begin() + (layer + 1) * W * H);
    const int64_t n2[3] = {W, H, 1};
    for (size_t i = 0; i < c2.size(); ++i) {
      float cc[3] = {c2[i].x, c2[i].y, 0};
      EXPECT_NEAR(o2[i].x, model(one, n2, 2, cc, cudaAddressModeClamp, false, true), 1e-4f);
    }
  }
  // 1D layered: rows are layers
  TexView l1 = make(vol, W, 1, H * D, 1);
  l1.pitch = l1.slice = W * 4;
  l1.layered = true;
  std::vector<float> c1 = {0.5f, 2.5f, 4.5f, 7.0f};
  auto o1 = run("k_tex_a1d", mem.add(l1, false), c1, 2);
  EXPECT_EQ(o1[1].x, vol[2 * W + 2]);
  EXPECT_EQ(o1[3].x, vol[2 * W + 4]);  // clamped
}

TEST_F(TexFixture, LinearFetchOutOfRangeReadsZero) {
  std::vector<int> v(20);
  for (int i = 0; i < 20; ++i) v[i] = i * 3 - 7;
  TexView t;
  t.w = 20, t.dims = 1, t.linear_mem = true, t.nch = 1, t.cbytes = 4, t.ckind = 0;
  t.pitch = t.slice = t.bytes = 80;
  t.dptr = mem.upload(v);
  uint64_t dout = mem.alloc(30 * 4);
  Args a(mod->kernel("k_fetch"));
  a(mem.add(t, false))(dout)(-5)(30);
  auto e = eng.launch(*mod, "k_fetch", cfg({1}, {32}), a.data(), a.size(), mem);
  ASSERT_FALSE(e) << e.message;
  auto o = mem.download<int>(dout, 30);
  for (int i = 0; i < 30; ++i) EXPECT_EQ(o[i], i - 5 >= 0 && i - 5 < 20 ? v[i - 5] : 0) << i;
}

TEST_F(TexFixture, GatherReturnsTheFootprint) {
  const uint32_t W = 4, H = 4;
  std::vector<float> img(W * H * 2);
  for (size_t i = 0; i < img.size(); ++i) img[i] = float(i);
  TexView t = make(img, W, H, 1, 2, 2);
  auto out = run("k_gather", mem.add(t, false), std::vector<float2>{{1.7f, 2.2f}});
  // footprint i = 1, j = 1; component 1 (green); counter-clockwise from (i, j+1)
  auto G = [&](int x, int y) { return img[(y * W + x) * 2 + 1]; };
  EXPECT_EQ(out[0].x, G(1, 2));
  EXPECT_EQ(out[0].y, G(2, 2));
  EXPECT_EQ(out[0].z, G(2, 1));
  EXPECT_EQ(out[0].w, G(1, 1));
}

TEST_F(TexFixture, SurfaceLoadStoreAndBoundaryModes) {
  const uint32_t W = 6, H = 3;
  std::vector<int> v(W * H, 1);
  TexView s;
  s.w = W, s.h = H, s.dims = 2, s.nch = 1, s.cbytes = 4, s.ckind = 0;
  s.pitch = W * 4, s.slice = s.bytes = W * H * 4;
  s.dptr = mem.upload(v);
  uint64_t hs = mem.add(s, true);
  Args a(mod->kernel("k_surf"));
  a(hs)(int(W))(int(H));
  auto e = eng.launch(*mod, "k_surf", cfg({H}, {32}), a.data(), a.size(), mem);
  ASSERT_FALSE(e) << e.message;
  auto o = mem.download<int>(s.dptr, W * H);
  for (uint32_t y = 0; y < H; ++y)
    for (uint32_t x = 0; x < W; ++x) EXPECT_EQ(o[y * W + x], 1 + int(x * 100 + y));
  uint64_t dout = mem.alloc(32 * 4);
  for (int mode : {0, 1}) {
    Args b(mod->kernel("k_surf_oob"));
    b(hs)(dout)(mode);
    e = eng.launch(*mod, "k_surf_oob", cfg({1}, {16}), b.data(), b.size(), mem);
    ASSERT_FALSE(e) << e.message;
    auto r = mem.download<int>(dout, 16);
    for (int x = 0; x < 16; ++x) {
      int xi = x - 4, want = xi >= 0 && xi < int(W) ? o[xi] : mode == 0 ? 0 : o[xi < 0 ? 0 : W - 1];
      EXPECT_EQ(r[x], want) << "mode " << mode << " x " << xi;
    }
  }
  Args b(mod->kernel("k_surf_oob"));
  b(hs)(dout)(2);
  e = eng.launch(*mod, "k_surf_oob", cfg({1}, {16}), b.data(), b.size(), mem);
  EXPECT_EQ(e.kind, LaunchError::BadAccess) << e.message;
  // a texture handle is not a surface, and an unknown handle faults
  Args c(mod->kernel("k_surf"));
  c(uint64_t(0xdead))(int(W))(int(H));
  e = eng.launch(*mod, "k_surf", cfg({1}, {32}), c.data(), c.size(), mem);
  EXPECT_EQ(e.kind, LaunchError::BadAccess) << e.message;
}

TEST_F(TexFixture, ViewLargerThanItsMemoryFaults) {
  auto img = ramp(16, 7);
  TexView t = make(img, 4, 4, 1, 2);
  t.h = 5;  // one row past the allocation
  t.bytes = t.pitch * 5;
  std::vector<float2> c = {{0.5f, 0.5f}};
  uint64_t dc = mem.upload(c), dout = mem.alloc(16);
  Args a(mod->kernel("k_tex2d"));
  a(mem.add(t, false))(dout)(dc)(1);
  auto e = eng.launch(*mod, "k_tex2d", cfg({1}, {32}), a.data(), a.size(), mem);
  EXPECT_EQ(e.kind, LaunchError::BadAccess) << e.message;
}

}  // namespace

namespace {

TEST(PtxTexture, TxqAndSuqReportTheObject) {
  const char* ptx = R"(.version 8.0
.target sm_80
.address_size 64
.visible .entry q(.param .u64 t, .param .u64 s, .param .u64 o) {
  .reg .b32 %r<8>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [t];
  ld.param.u64 %rd2, [s];
  ld.param.u64 %rd3, [o];
  txq.width.b32 %r1, [%rd1];
  txq.height.b32 %r2, [%rd1];
  txq.normalized_coords.b32 %r3, [%rd1];
  txq.num_mipmap_levels.b32 %r4, [%rd1];
  suq.width.b32 %r5, [%rd2];
  suq.array_size.b32 %r6, [%rd2];
  st.global.v4.u32 [%rd3], {%r1, %r2, %r3, %r4};
  st.global.v2.u32 [%rd3+16], {%r5, %r6};
  ret;
}
)";
  std::string err;
  auto m = Module::from_ptx(ptx, &err);
  ASSERT_TRUE(m) << err;
  TexMem mem;
  TexView t;
  t.w = 12, t.h = 5, t.dims = 2, t.norm_coords = true, t.levels = 3;
  t.pitch = 48, t.slice = t.bytes = 240;
  t.dptr = mem.alloc(240);
  TexView s = t;
  s.h = 1, s.d = 7, s.dims = 1, s.layered = true, s.pitch = s.slice = 48, s.bytes = 48 * 7;
  s.dptr = mem.alloc(48 * 7);
  uint64_t out = mem.alloc(32);
  struct { uint64_t t, s, o; } p{mem.add(t, false), mem.add(s, true), out};
  Engine eng(1);
  auto e = eng.launch(*m, "q", cfg({1}, {1}), &p, sizeof p, mem);
  ASSERT_FALSE(e) << e.message;
  auto r = mem.download<uint32_t>(out, 6);
  EXPECT_EQ(r, (std::vector<uint32_t>{12, 5, 1, 3, 12, 7}));
}

}  // namespace

namespace {

TEST(PtxTexture, MalformedTextureOperandsAreErrorsOrUnsupported) {
  auto body = [](const char* inst) {
    return std::string(".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k(.param .u64 t) {\n"
                       "  .reg .b32 %r<8>;\n  .reg .f32 %f<8>;\n  .reg .b64 %rd<4>;\n  ld.param.u64 %rd1, [t];\n  ") +
           inst + "\n  ret;\n}\n";
  };
  std::string err;
  // parse errors, each naming the line
  for (const char* bad : {"tex.2d.v4.f32.f32 {%f1, %f2, %f3, %f4}, [%rd1, {%f5}];",
                          "tex.2d.v4.f32.f32 %f1, [%rd1, {%f5, %f6}];",
                          "suld.b.2d.v2.b32.trap {%r1}, [%rd1, {%r2, %r3}];",
                          "sust.b.2d.b32.trap [%rd1, {%r2, %r3}], %r1;",
                          "ld.global.f32 %f1, [%rd1, {%r2}];",
                          "txq.width.b32 %r1;"}) {
    EXPECT_FALSE(Module::from_ptx(body(bad), &err)) << bad;
    EXPECT_NE(err.find("PTX line 9"), std::string::npos) << err;
  }
  // accepted, but the launch reports what is not supported
  for (const char* unsup : {"tex.2d.v4.f32.f32 {%f1, %f2, %f3, %f4}, [%rd1, %rd2, {%f5, %f6}];",
                            "tex.cube.v4.f32.f32 {%f1, %f2, %f3, %f4}, [%rd1, {%f5, %f6, %f7, %f1}];",
                            "suld.p.2d.v4.b32.trap {%r1, %r2, %r3, %r4}, [%rd1, {%r2, %r3}];",
                            "tex.2d.v4.f32.f32 {%f1, %f2, %f3, %f4}, [tex_ref, {%f5, %f6}];"}) {
    auto m = Module::from_ptx(body(unsup), &err);
    ASSERT_TRUE(m) << unsup << ": " << err;
    TexMem mem;
    Engine eng(1);
    uint64_t p = 0;
    auto e = eng.launch(*m, "k", cfg({1}, {1}), &p, sizeof p, mem);
    EXPECT_EQ(e.kind, LaunchError::Unsupported) << unsup << ": " << e.message;
  }
}

}  // namespace

namespace {

TEST_F(TexFixture, SignedHalfAndSrgbFormats) {
  auto one = [&](TexView t, const std::vector<uint8_t>& bytes) {
    t.w = uint32_t(bytes.size() / (t.nch * t.cbytes)), t.h = 1, t.d = 1, t.dims = 1;
    t.pitch = t.slice = t.bytes = bytes.size();
    t.dptr = mem.upload(bytes);
    std::vector<float> c;
    for (uint32_t i = 0; i < t.w; ++i) c.push_back(i + 0.5f);
    return run("k_tex1d", mem.add(t, false), c);
  };
  TexView s8;
  s8.nch = 1, s8.cbytes = 1, s8.ckind = 0, s8.read_normalized = true;
  auto o = one(s8, {0x80, 0x81, 0x00, 0x7f, 0xc0});  // -128 -127 0 127 -64
  EXPECT_EQ(o[0].x, -1.0f);
  EXPECT_EQ(o[1].x, -1.0f);
  EXPECT_EQ(o[2].x, 0.0f);
  EXPECT_EQ(o[3].x, 1.0f);
  EXPECT_EQ(o[4].x, -64.0f / 127.0f);
  TexView u16;
  u16.nch = 2, u16.cbytes = 2, u16.ckind = 1, u16.read_normalized = true;
  o = one(u16, {0xff, 0xff, 0x00, 0x80});
  EXPECT_EQ(o[0].x, 1.0f);
  EXPECT_EQ(o[0].y, 32768.0f / 65535.0f);
  TexView h;
  h.nch = 1, h.cbytes = 2, h.ckind = 2;
  o = one(h, {0x00, 0x3c, 0x00, 0xc1});  // 1.0, -2.5
  EXPECT_EQ(o[0].x, 1.0f);
  EXPECT_EQ(o[1].x, -2.5f);
  TexView srgb;
  srgb.nch = 4, srgb.cbytes = 1, srgb.ckind = 1, srgb.read_normalized = true, srgb.srgb = true;
  o = one(srgb, {128, 10, 255, 128});
  auto lin = [](float v) { return v <= 0.04045f ? v / 12.92f : std::pow((v + 0.055f) / 1.055f, 2.4f); };
  EXPECT_NEAR(o[0].x, lin(128 / 255.0f), 1e-6f);
  EXPECT_NEAR(o[0].y, lin(10 / 255.0f), 1e-7f);
  EXPECT_EQ(o[0].z, 1.0f);
  EXPECT_EQ(o[0].w, 128 / 255.0f);  // alpha stays linear
}

}  // namespace
