// wmma.load / wmma.mma / wmma.store on the sim device, the way nvcuda::wmma compiles: every
// shape and element type, row- and column-major operands, explicit and default strides,
// the global, shared and generic state spaces, and element-wise operations on fragment
// registers between load and mma (scaling C and A, cvt.rna.tf32 of A). The fragment
// layout is the sim device's own (the ISA leaves it unspecified), so the test only
// checks what a program can observe: D in memory against a host GEMM.
#include <sstream>

#include "ptx_mma_util.hpp"
#include "ptx_test_util.hpp"

using namespace whtest;
using namespace whtest::mma;
using wh::ptx::Engine;
using wh::ptx::LaunchError;
using wh::ptx::Module;

namespace {

enum class Space { Global, Generic, Shared, GenericShared };
const char* space_name(Space s) {
  static const char* n[] = {"global", "generic", "shared", "generic->shared"};
  return n[int(s)];
}

struct WCase {
  int M, N, K;
  Et a, b, c, d;
  bool col[4];  // layouts of A, B, C, D in memory
  Space space;
  bool stride;  // pass strides (padded rows); else the default, packed
  bool satfinite = false;
};

int nregs(Et t, int rows, int cols, bool multiplicand) {
  if (t == Et::F16 && multiplicand) return 8;
  return rows * cols / 32 / per_reg(t);
}
std::string shape(const WCase& w) {
  return "m" + std::to_string(w.M) + "n" + std::to_string(w.N) + "k" + std::to_string(w.K);
}
// Leading dimension (elements) of a rows x cols matrix; padded when strides are passed.
int ld_of(const WCase& w, int rows, int cols, bool col) { return (col ? rows : cols) + (w.stride ? 16 : 0); }
size_t elems_of(const WCase& w, int rows, int cols, bool col) { return size_t(col ? cols : rows) * ld_of(w, rows, cols, col); }
size_t at(int ld, bool col, int r, int c) { return col ? size_t(c) * ld + r : size_t(r) * ld + c; }

std::string wmma_kernel(const WCase& w, const size_t bytes[4]) {
  const int rows[4] = {w.M, w.K, w.M, w.M}, cols[4] = {w.K, w.N, w.N, w.N};
  const Et ts[4] = {w.a, w.b, w.c, w.d};
  const char* nm[4] = {"a", "b", "c", "d"};
  int n[4];
  for (int j = 0; j < 4; ++j) n[j] = nregs(ts[j], rows[j], cols[j], j < 2);
  const bool shared = w.space == Space::Shared || w.space == Space::GenericShared;
  const std::string sp = w.space == Space::Global ? ".global" : w.space == Space::Shared ? ".shared" : "";
  std::ostringstream s;
  s << ".version 8.0\n.target sm_80\n.address_size 64\n"
    << ".visible .entry k(.param .u64 pa, .param .u64 pb, .param .u64 pc, .param .u64 pd)\n{\n"
    << "  .reg .pred %p;\n  .reg .b32 %t<8>;\n  .reg .b64 %rd<16>;\n  .reg .b8 %byte;\n  .reg .b32 %two;\n";
  for (int j = 0; j < 4; ++j)
    s << "  .reg ." << (ts[j] == Et::F64 ? "b64" : "b32") << " %" << nm[j] << "<" << n[j] << ">;\n";
  if (shared)
    for (int j = 0; j < 4; ++j) s << "  .shared .align 32 .b8 s" << nm[j] << "[" << bytes[j] << "];\n";
  s << "  mov.u32 %t0, %tid.x;\n  mov.b32 %two, 0x40004000;\n";
  for (int j = 0; j < 4; ++j) s << "  ld.param.u64 %rd" << j << ", [p" << nm[j] << "];\n";
  // The address of each matrix, in %rd4..%rd7 (shared: offsets, or generic addresses).
  for (int j = 0; j < 4; ++j) {
    if (!shared) {
      s << "  mov.u64 %rd" << 4 + j << ", %rd" << j << ";\n";
      continue;
    }
    s << "  mov.u64 %rd" << 4 + j << ", s" << nm[j] << ";\n";
    {  // copy the operand (D: its padding) into shared memory, one byte per lane and step
      s << "  mov.u32 %t1, %t0;\nCP" << j << ":\n"
        << "  setp.ge.u32 %p, %t1, " << bytes[j] << ";\n  @%p bra CPD" << j << ";\n"
        << "  cvt.u64.u32 %rd8, %t1;\n  add.u64 %rd9, %rd" << j << ", %rd8;\n  ld.global.u8 %byte, [%rd9];\n"
        << "  add.u64 %rd9, %rd" << 4 + j << ", %rd8;\n  st.shared.u8 [%rd9], %byte;\n"
        << "  add.u32 %t1, %t1, 32;\n  bra CP" << j << ";\nCPD" << j << ":\n";
    }
    if (w.space == Space::GenericShared) s << "  cvta.shared.u64 %rd" << 4 + j << ", %rd" << 4 + j << ";\n";
  }
  if (shared) s << "  bar.sync 0;\n";
  auto list = [&](int j) {
    std::string l = "{";
    for (int r = 0; r < n[j]; ++r) l += (r ? ", %" : "%") + std::string(nm[j]) + std::to_string(r);
    return l + "}";
  };
  auto lay = [&](int j) { return w.col[j] ? ".col" : ".row"; };
  auto stride = [&](int j) { return w.stride ? ", " + std::to_string(ld_of(w, rows[j], cols[j], w.col[j])) : std::string(); };
  for (int j = 0; j < 3; ++j)
    s << "  wmma.load." << nm[j] << ".sync.aligned" << lay(j) << "." << shape(w) << sp << "." << et_name(ts[j]) << " "
      << list(j) << ", [%rd" << 4 + j << "]" << stride(j) << ";\n";
  // element-wise on the fragments: C *= 2, A *= 2 (tf32: A rounded with cvt.rna.tf32)
  for (int r = 0; r < n[2]; ++r) {
    const std::string c = "%c" + std::to_string(r);
    if (w.c == Et::F32) s << "  mul.f32 " << c << ", " << c << ", 0f40000000;\n";
    else if (w.c == Et::F16) s << "  mul.rn.f16x2 " << c << ", " << c << ", %two;\n";
    else if (w.c == Et::S32) s << "  mul.lo.s32 " << c << ", " << c << ", 2;\n";
    else s << "  mul.f64 " << c << ", " << c << ", 0d4000000000000000;\n";
  }
  for (int r = 0; r < n[0]; ++r) {
    const std::string a = "%a" + std::to_string(r);
    if (w.a == Et::F16) s << "  mul.rn.f16x2 " << a << ", " << a << ", %two;\n";
    else if (w.a == Et::BF16) s << "  mul.rn.bf16x2 " << a << ", " << a << ", %two;\n";
    else if (w.a == Et::TF32) s << "  cvt.rna.tf32.f32 " << a << ", " << a << ";\n";
    else if (w.a == Et::F64) s << "  mul.f64 " << a << ", " << a << ", 0d4000000000000000;\n";
  }
  std::string types = w.a == Et::F16 ? std::string(".") + et_name(w.d) + "." + et_name(w.c)
                                     : std::string(".") + et_name(w.d) + "." + et_name(w.a) + "." + et_name(w.b) + "." + et_name(w.c);
  s << "  wmma.mma.sync.aligned" << lay(0) << lay(1) << "." << shape(w) << types << (w.satfinite ? ".satfinite" : "")
    << (w.a == Et::F64 ? ".rn" : "") << " " << list(3) << ", " << list(0) << ", " << list(1) << ", " << list(2) << ";\n";
  s << "  wmma.store.d.sync.aligned" << lay(3) << "." << shape(w) << sp << "." << et_name(w.d) << " [%rd7], " << list(3)
    << stride(3) << ";\n";
  if (shared) {  // copy D back out
    s << "  bar.sync 0;\n  mov.u32 %t1, %t0;\nOUT:\n"
      << "  setp.ge.u32 %p, %t1, " << bytes[3] << ";\n  @%p bra DONE;\n"
      << "  cvt.u64.u32 %rd8, %t1;\n  mov.u64 %rd9, sd;\n  add.u64 %rd9, %rd9, %rd8;\n  ld.shared.u8 %byte, [%rd9];\n"
      << "  add.u64 %rd9, %rd3, %rd8;\n  st.global.u8 [%rd9], %byte;\n"
      << "  add.u32 %t1, %t1, 32;\n  bra OUT;\nDONE:\n";
  }
  s << "  ret;\n}\n";
  return s.str();
}

// cvt.rna.tf32.f32 of the element's bits (finite values): ties away from zero
double rna_tf32(uint64_t bits) { return std::bit_cast<float>((uint32_t(bits) + 0x1000u) & 0xffffe000u); }

void run_wmma(const WCase& w, uint32_t seed) {
  std::ostringstream name;
  name << "wmma " << shape(w) << " " << et_name(w.d) << "." << et_name(w.a) << "." << et_name(w.b) << "." << et_name(w.c)
       << " layouts " << (w.col[0] ? "col" : "row") << "/" << (w.col[1] ? "col" : "row") << "/"
       << (w.col[2] ? "col" : "row") << "/" << (w.col[3] ? "col" : "row") << " " << space_name(w.space)
       << (w.stride ? " strided" : " packed") << (w.satfinite ? " satfinite" : "");
  SCOPED_TRACE(name.str());
  Gen g(seed);
  const int rows[4] = {w.M, w.K, w.M, w.M}, cols[4] = {w.K, w.N, w.N, w.N};
  const Et ts[4] = {w.a, w.b, w.c, w.d};
  // Matrices row-major for the reference; memory images in each operand's layout.
  std::vector<double> mat[3];
  std::vector<std::vector<uint8_t>> img(4);
  size_t bytes[4];
  for (int j = 0; j < 4; ++j) {
    const int eb = et_bits(ts[j]) / 8;
    bytes[j] = elems_of(w, rows[j], cols[j], w.col[j]) * eb;
    img[j].assign(bytes[j], 0xa5);  // padding keeps a sentinel
  }
  for (int j = 0; j < 3; ++j) {
    const int eb = et_bits(ts[j]) / 8, ld = ld_of(w, rows[j], cols[j], w.col[j]);
    mat[j].resize(size_t(rows[j]) * cols[j]);
    for (int r = 0; r < rows[j]; ++r)
      for (int c = 0; c < cols[j]; ++c) {
        double v = g.value(ts[j], j == 2);
        if (j == 2 && w.satfinite) v = ((r + c) % 2 ? INT32_MAX / 2 - 1000.0 : INT32_MIN / 2 + 1000.0) + r;
        uint64_t b = g.bits(ts[j], v);
        // what the kernel computes with: A scaled by 2 (tf32: rounded), C scaled by 2
        if (j == 0) v = ts[j] == Et::TF32 ? rna_tf32(b) : et_int(ts[j]) ? v : 2 * v;
        if (j == 2) v = 2 * v;
        mat[j][size_t(r) * cols[j] + c] = v;
        std::memcpy(&img[j][at(ld, w.col[j], r, c) * eb], &b, size_t(eb));
      }
  }
  const bool integer = et_int(w.d);
  std::vector<double> D = gemm_ref(w.M, w.N, w.K, mat[0], mat[1], mat[2], integer, w.satfinite);

  std::string err;
  auto m = Module::from_ptx(wmma_kernel(w, bytes), &err);
  ASSERT_TRUE(m) << err;
  HostMem mem;
  uint64_t p[4];
  for (int j = 0; j < 4; ++j) p[j] = mem.upload(img[j]);
  Engine eng(1);
  Args args(m->kernel("k"));
  args(p[0])(p[1])(p[2])(p[3]);
  auto e = eng.launch(*m, "k", cfg({1}, {32}), args.data(), args.size(), mem);
  ASSERT_EQ(e.kind, LaunchError::None) << e.message;
  auto got = mem.download<uint8_t>(p[3], bytes[3]);
  const int eb = et_bits(w.d) / 8, ld = ld_of(w, w.M, w.N, w.col[3]);
  std::vector<uint8_t> want = img[3];
  int bad = 0;
  for (int r = 0; r < w.M; ++r)
    for (int c = 0; c < w.N; ++c) {
      const size_t off = at(ld, w.col[3], r, c) * eb;
      uint64_t b = 0;
      std::memcpy(&b, &got[off], size_t(eb));
      const double v = decode(w.d, b), ref = D[size_t(r) * w.N + c];
      // tf32: A was rounded, so f32 partial sums round; elsewhere the result is exact
      const double tol = w.a == Et::TF32 ? 1e-5 * (1 + std::fabs(ref)) : 0;
      const double want_v = w.d == Et::F16 ? h2f(f2h(ref)) : ref;
      if (!(std::fabs(v - want_v) <= tol) && ++bad <= 8)
        ADD_FAILURE() << "D[" << r << "][" << c << "] = " << v << ", want " << want_v;
      std::memcpy(&want[off], &got[off], size_t(eb));
    }
  EXPECT_EQ(bad, 0);
  EXPECT_TRUE(got == want) << "wmma.store wrote outside the matrix (the padding changed)";
}

TEST(PtxWmma, HalfEveryShapeLayoutAndSpace) {
  const int shapes[3][3] = {{16, 16, 16}, {32, 8, 16}, {8, 32, 16}};
  const Et accs[4][2] = {{Et::F32, Et::F32}, {Et::F16, Et::F16}, {Et::F32, Et::F16}, {Et::F16, Et::F32}};  // d, c
  uint32_t seed = 100;
  for (auto& sh : shapes)
    for (int lay = 0; lay < 16; ++lay) {
      const auto& acc = accs[lay % 4];
      WCase w{sh[0], sh[1], sh[2], Et::F16, Et::F16, acc[1], acc[0],
              {bool(lay & 1), bool(lay & 2), bool(lay & 4), bool(lay & 8)}, Space(lay % 4), (lay / 4) % 2 == 0};
      run_wmma(w, seed++);
    }
}

TEST(PtxWmma, Bf16Tf32AndDouble) {
  const int shapes[3][3] = {{16, 16, 16}, {32, 8, 16}, {8, 32, 16}};
  uint32_t seed = 200;
  for (auto& sh : shapes)
    for (int lay = 0; lay < 8; ++lay)
      run_wmma({sh[0], sh[1], sh[2], Et::BF16, Et::BF16, Et::F32, Et::F32,
                {bool(lay & 1), bool(lay & 2), bool(lay & 4), !(lay & 4)}, Space(lay % 4), lay < 4},
               seed++);
  for (int lay = 0; lay < 8; ++lay)
    run_wmma({16, 16, 8, Et::TF32, Et::TF32, Et::F32, Et::F32, {bool(lay & 1), bool(lay & 2), bool(lay & 4), bool(lay & 1)},
              Space(lay % 4), lay >= 4},
             seed++);
  for (int lay = 0; lay < 4; ++lay)
    run_wmma({8, 8, 4, Et::F64, Et::F64, Et::F64, Et::F64, {bool(lay & 1), bool(lay & 2), bool(lay & 1), bool(lay & 2)},
              Space(lay), lay % 2 == 0},
             seed++);
}

TEST(PtxWmma, Integer) {
  const int shapes[3][3] = {{16, 16, 16}, {32, 8, 16}, {8, 32, 16}};
  const Et ab[4][2] = {{Et::S8, Et::S8}, {Et::U8, Et::U8}, {Et::S8, Et::U8}, {Et::U8, Et::S8}};
  uint32_t seed = 300;
  for (auto& sh : shapes)
    for (int i = 0; i < 8; ++i) {
      WCase w{sh[0], sh[1], sh[2], ab[i % 4][0], ab[i % 4][1], Et::S32, Et::S32,
              {bool(i & 1), bool(i & 2), bool(i & 4), bool(i & 1)}, Space(i % 4), i < 4};
      w.satfinite = i >= 6;
      run_wmma(w, seed++);
    }
}

// Addresses and strides must keep every row (column) start aligned to the fragment size
// (at most 16 bytes); a violation fails the launch as misaligned, naming both.
TEST(PtxWmma, MisalignedBaseOrStride) {
  const char* forms[] = {
      "wmma.load.a.sync.aligned.row.m16n16k16.global.f16 {%r0,%r1,%r2,%r3,%r4,%r5,%r6,%r7}, [%rd0+2], 16;",
      "wmma.load.a.sync.aligned.row.m16n16k16.f16 {%r0,%r1,%r2,%r3,%r4,%r5,%r6,%r7}, [%rd0], 20;",
      "wmma.store.d.sync.aligned.col.m16n16k16.global.f32 [%rd0+8], {%r0,%r1,%r2,%r3,%r4,%r5,%r6,%r7};",
  };
  for (const char* f : forms) {
    std::string ptx = std::string(".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k(.param .u64 p)\n{\n") +
                      "  .reg .b32 %r<8>;\n  .reg .b64 %rd<2>;\n  ld.param.u64 %rd0, [p];\n  " + f + "\n  ret;\n}\n";
    LaunchError e;
    ASSERT_NO_FATAL_FAILURE(launch_warp_k(ptx, 4096, &e)) << f;
    EXPECT_EQ(e.kind, LaunchError::Misaligned) << f;
    EXPECT_NE(e.message.find("multiple of 16 bytes"), std::string::npos) << e.message;
  }
}

}  // namespace
