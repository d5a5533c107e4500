// mma.sync, ldmatrix and stmatrix on the sim device. Each lane's fragment registers are
// filled and read back on the host with the per-lane layouts the PTX ISA documents
// ("Matrix Fragments for mma.m16n8k16" and the other shapes; written out below as the
// ISA states them), and D is compared bit for bit with a host GEMM.
#include <functional>
#include <sstream>

#include "ptx_mma_util.hpp"
#include "ptx_test_util.hpp"

using namespace whtest;
using namespace whtest::mma;
using wh::ptx::Engine;
using wh::ptx::LaunchError;
using wh::ptx::Module;

namespace {

// (lane, element index i) -> (row, col), as the ISA's tables give them.
using Coord = std::function<std::pair<int, int>(int lane, int i)>;
inline int grp(int l) { return l >> 2; }
inline int tig(int l) { return l % 4; }

// Accumulators C/D of the m16n8 shapes (all types) and of m8n8.
const Coord kC16x8 = [](int l, int i) { return std::pair{grp(l) + (i >= 2 ? 8 : 0), tig(l) * 2 + (i & 1)}; };
const Coord kC8x8 = [](int l, int i) { return std::pair{grp(l), tig(l) * 2 + i}; };
// f16 / bf16
const Coord kA16x16h = [](int l, int i) {
  return std::pair{grp(l) + ((i < 2 || (i >= 4 && i < 6)) ? 0 : 8), tig(l) * 2 + (i & 1) + (i >= 4 ? 8 : 0)};
};
const Coord kB16x8h = [](int l, int i) { return std::pair{tig(l) * 2 + (i & 1) + (i >= 2 ? 8 : 0), grp(l)}; };
const Coord kA16x8h = [](int l, int i) { return std::pair{grp(l) + (i >= 2 ? 8 : 0), tig(l) * 2 + (i & 1)}; };
const Coord kB8x8h = [](int l, int i) { return std::pair{tig(l) * 2 + i, grp(l)}; };
// tf32
const Coord kA16x8t = [](int l, int i) { return std::pair{grp(l) + ((i == 1 || i == 3) ? 8 : 0), tig(l) + (i >= 2 ? 4 : 0)}; };
const Coord kB8x8t = [](int l, int i) { return std::pair{tig(l) + (i == 1 ? 4 : 0), grp(l)}; };
const Coord kA16x4t = [](int l, int i) { return std::pair{grp(l) + (i == 1 ? 8 : 0), tig(l)}; };
const Coord kB4x8t = [](int l, int) { return std::pair{tig(l), grp(l)}; };
// s8 / u8
const Coord kA8x16i = [](int l, int i) { return std::pair{grp(l), tig(l) * 4 + i}; };
const Coord kB16x8i = [](int l, int i) { return std::pair{tig(l) * 4 + i, grp(l)}; };
const Coord kA16x16i = [](int l, int i) { return std::pair{grp(l) + (i >= 4 ? 8 : 0), tig(l) * 4 + (i & 3)}; };
const Coord kA16x32i = [](int l, int i) {
  return std::pair{grp(l) + ((i < 4 || (i >= 8 && i < 12)) ? 0 : 8), tig(l) * 4 + (i & 3) + (i >= 8 ? 16 : 0)};
};
const Coord kB32x8i = [](int l, int i) { return std::pair{tig(l) * 4 + (i & 3) + (i >= 4 ? 16 : 0), grp(l)}; };
// f64 m8n8k4
const Coord kA8x4d = [](int l, int) { return std::pair{grp(l), tig(l)}; };
const Coord kB4x8d = [](int l, int) { return std::pair{tig(l), grp(l)}; };

struct Operand {
  Et t;
  int regs;
  Coord at;
};
struct MmaCase {
  std::string op;
  int M, N, K;
  Operand d, a, b, c;
  bool satfinite = false;
  bool saturate_c = false;  // accumulators near the s32 limits
  // f64: full-precision operands, where a fused multiply-add and a multiply then an add
  // round differently; the reference is the chain of fmas, k ascending (PTX's DMMA).
  bool full_f64 = false;
};

std::string mma_kernel(const MmaCase& mc) {
  const Operand* ops[4] = {&mc.a, &mc.b, &mc.c, &mc.d};
  const char* nm[4] = {"a", "b", "c", "d"};
  std::ostringstream s;
  s << ".version 8.0\n.target sm_80\n.address_size 64\n"
    << ".visible .entry k(.param .u64 pa, .param .u64 pb, .param .u64 pc, .param .u64 pd)\n{\n"
    << "  .reg .b32 %t;\n  .reg .b64 %rd<8>;\n";
  for (int j = 0; j < 4; ++j)
    s << "  .reg ." << (ops[j]->t == Et::F64 ? "b64" : "b32") << " %" << nm[j] << "<" << ops[j]->regs << ">;\n";
  s << "  mov.u32 %t, %tid.x;\n";
  for (int j = 0; j < 4; ++j) {
    const int w = ops[j]->t == Et::F64 ? 8 : 4;
    s << "  ld.param.u64 %rd" << j << ", [p" << nm[j] << "];\n"
      << "  mul.wide.u32 %rd" << 4 + j << ", %t, " << ops[j]->regs * w << ";\n"
      << "  add.u64 %rd" << 4 + j << ", %rd" << 4 + j << ", %rd" << j << ";\n";
  }
  for (int j = 0; j < 3; ++j)
    for (int r = 0; r < ops[j]->regs; ++r) {
      const int w = ops[j]->t == Et::F64 ? 8 : 4;
      s << "  ld.global.b" << w * 8 << " %" << nm[j] << r << ", [%rd" << 4 + j << "+" << r * w << "];\n";
    }
  auto list = [&](int j) {
    std::string l = "{";
    for (int r = 0; r < ops[j]->regs; ++r) l += (r ? ", %" : "%") + std::string(nm[j]) + std::to_string(r);
    return l + "}";
  };
  s << "  " << mc.op << " " << list(3) << ", " << list(0) << ", " << list(1) << ", " << list(2) << ";\n";
  for (int r = 0; r < mc.d.regs; ++r) {
    const int w = mc.d.t == Et::F64 ? 8 : 4;
    s << "  st.global.b" << w * 8 << " [%rd7+" << r * w << "], %d" << r << ";\n";
  }
  s << "  ret;\n}\n";
  return s.str();
}

// Per-lane registers of a rows x cols matrix (values already encoded as bits).
std::vector<uint64_t> pack(const Operand& o, int cols, const std::vector<uint64_t>& bits) {
  std::vector<uint64_t> regs(size_t(32) * o.regs, 0);
  const int pr = per_reg(o.t), eb = et_bits(o.t);
  for (int l = 0; l < 32; ++l)
    for (int i = 0; i < o.regs * pr; ++i) {
      auto [r, c] = o.at(l, i);
      const uint64_t b = bits[size_t(r) * cols + c];
      regs[size_t(l) * o.regs + i / pr] |= eb == 64 ? b : b << ((i % pr) * eb);
    }
  return regs;
}

void run_case(const MmaCase& mc, uint32_t seed) {
  SCOPED_TRACE(mc.op);
  Gen g(seed);
  const int M = mc.M, N = mc.N, K = mc.K;
  std::vector<double> A(size_t(M) * K), B(size_t(K) * N), C(size_t(M) * N);
  std::vector<uint64_t> Ab(A.size()), Bb(B.size()), Cb(C.size());
  for (size_t i = 0; i < A.size(); ++i) Ab[i] = g.bits(mc.a.t, A[i] = g.value(mc.a.t, false));
  for (size_t i = 0; i < B.size(); ++i) Bb[i] = g.bits(mc.b.t, B[i] = g.value(mc.b.t, false));
  for (size_t i = 0; i < C.size(); ++i) {
    C[i] = g.value(mc.c.t, true);
    if (mc.saturate_c) C[i] = (i % 2 ? INT32_MAX - 1000.0 : INT32_MIN + 1000.0) + double(i);
    Cb[i] = g.bits(mc.c.t, C[i]);
  }
  if (mc.full_f64) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    for (size_t i = 0; i < A.size(); ++i) Ab[i] = std::bit_cast<uint64_t>(A[i] = u(rng));
    for (size_t i = 0; i < B.size(); ++i) Bb[i] = std::bit_cast<uint64_t>(B[i] = u(rng));
    for (size_t i = 0; i < C.size(); ++i) Cb[i] = std::bit_cast<uint64_t>(C[i] = u(rng));
  }
  const bool integer = et_int(mc.d.t);
  std::vector<double> D = gemm_ref(M, N, K, A, B, C, integer, mc.satfinite);
  if (mc.full_f64)
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j) {
        double d = C[size_t(i) * N + j];
        for (int k = 0; k < K; ++k) d = std::fma(A[size_t(i) * K + k], B[size_t(k) * N + j], d);
        D[size_t(i) * N + j] = d;
      }

  std::string err;
  auto m = Module::from_ptx(mma_kernel(mc), &err);
  ASSERT_TRUE(m) << err;
  HostMem mem;
  auto upload = [&](const Operand& o, int cols, const std::vector<uint64_t>& bits) {
    auto regs = pack(o, cols, bits);
    if (o.t == Et::F64) return mem.upload(regs);
    std::vector<uint32_t> r32(regs.begin(), regs.end());
    return mem.upload(r32);
  };
  const uint64_t pa = upload(mc.a, K, Ab), pb = upload(mc.b, N, Bb), pc = upload(mc.c, N, Cb);
  const int w = mc.d.t == Et::F64 ? 8 : 4;
  const uint64_t pd = mem.alloc(size_t(32) * mc.d.regs * w);
  Engine eng(1);
  Args args(m->kernel("k"));
  args(pa)(pb)(pc)(pd);
  auto e = eng.launch(*m, "k", cfg({1}, {32}), args.data(), args.size(), mem);
  ASSERT_EQ(e.kind, LaunchError::None) << e.message;
  std::vector<uint64_t> got(size_t(32) * mc.d.regs);
  if (w == 8) {
    got = mem.download<uint64_t>(pd, got.size());
  } else {
    auto g32 = mem.download<uint32_t>(pd, got.size());
    std::copy(g32.begin(), g32.end(), got.begin());
  }
  std::vector<uint64_t> Db(D.size());
  for (size_t i = 0; i < D.size(); ++i) Db[i] = encode(mc.d.t, D[i]);
  auto want = pack(mc.d, N, Db);
  int bad = 0;
  for (int l = 0; l < 32; ++l)
    for (int r = 0; r < mc.d.regs; ++r) {
      const size_t x = size_t(l) * mc.d.regs + r;
      if (got[x] != want[x] && ++bad <= 8)
        ADD_FAILURE() << "lane " << l << " d" << r << ": got 0x" << std::hex << got[x] << ", want 0x" << want[x];
    }
  EXPECT_EQ(bad, 0);
}

Operand op(Et t, int regs, Coord at) { return Operand{t, regs, std::move(at)}; }

TEST(PtxMma, M16N8K16HalfAndBf16) {
  for (Et d : {Et::F32, Et::F16})
    for (Et c : {Et::F32, Et::F16}) {
      std::string name = std::string("mma.sync.aligned.m16n8k16.row.col.") + et_name(d) + ".f16.f16." + et_name(c);
      run_case({name, 16, 8, 16, op(d, d == Et::F16 ? 2 : 4, kC16x8), op(Et::F16, 4, kA16x16h),
                op(Et::F16, 2, kB16x8h), op(c, c == Et::F16 ? 2 : 4, kC16x8)},
               1);
    }
  run_case({"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", 16, 8, 16, op(Et::F32, 4, kC16x8),
            op(Et::BF16, 4, kA16x16h), op(Et::BF16, 2, kB16x8h), op(Et::F32, 4, kC16x8)},
           2);
}

TEST(PtxMma, M16N8K8HalfBf16AndTf32) {
  run_case({"mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32", 16, 8, 8, op(Et::F32, 4, kC16x8),
            op(Et::F16, 2, kA16x8h), op(Et::F16, 1, kB8x8h), op(Et::F32, 4, kC16x8)},
           3);
  run_case({"mma.sync.aligned.m16n8k8.row.col.f16.f16.f16.f16", 16, 8, 8, op(Et::F16, 2, kC16x8),
            op(Et::F16, 2, kA16x8h), op(Et::F16, 1, kB8x8h), op(Et::F16, 2, kC16x8)},
           4);
  run_case({"mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32", 16, 8, 8, op(Et::F32, 4, kC16x8),
            op(Et::BF16, 2, kA16x8h), op(Et::BF16, 1, kB8x8h), op(Et::F32, 4, kC16x8)},
           5);
  // tf32 operands carry random low bits that the tensor cores ignore
  run_case({"mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", 16, 8, 8, op(Et::F32, 4, kC16x8),
            op(Et::TF32, 4, kA16x8t), op(Et::TF32, 2, kB8x8t), op(Et::F32, 4, kC16x8)},
           6);
  run_case({"mma.sync.aligned.m16n8k4.row.col.f32.tf32.tf32.f32", 16, 8, 4, op(Et::F32, 4, kC16x8),
            op(Et::TF32, 2, kA16x4t), op(Et::TF32, 1, kB4x8t), op(Et::F32, 4, kC16x8)},
           7);
}

TEST(PtxMma, IntegerShapes) {
  for (Et a : {Et::S8, Et::U8})
    for (Et b : {Et::S8, Et::U8}) {
      std::string ty = std::string(".s32.") + et_name(a) + "." + et_name(b) + ".s32";
      run_case({"mma.sync.aligned.m16n8k32.row.col" + ty, 16, 8, 32, op(Et::S32, 4, kC16x8), op(a, 4, kA16x32i),
                op(b, 2, kB32x8i), op(Et::S32, 4, kC16x8)},
               8);
      run_case({"mma.sync.aligned.m16n8k16.row.col" + ty, 16, 8, 16, op(Et::S32, 4, kC16x8), op(a, 2, kA16x16i),
                op(b, 1, kB16x8i), op(Et::S32, 4, kC16x8)},
               9);
      run_case({"mma.sync.aligned.m8n8k16.row.col" + ty, 8, 8, 16, op(Et::S32, 2, kC8x8), op(a, 1, kA8x16i),
                op(b, 1, kB16x8i), op(Et::S32, 2, kC8x8)},
               10);
    }
  // Accumulators near the s32 limits: .satfinite clamps, the plain form wraps.
  for (bool sat : {true, false}) {
    MmaCase mc{std::string("mma.sync.aligned.m16n8k32.row.col") + (sat ? ".satfinite" : "") + ".s32.u8.u8.s32", 16, 8, 32,
               op(Et::S32, 4, kC16x8), op(Et::U8, 4, kA16x32i), op(Et::U8, 2, kB32x8i), op(Et::S32, 4, kC16x8)};
    mc.satfinite = sat;
    mc.saturate_c = true;
    run_case(mc, 11);
  }
}

TEST(PtxMma, DoubleM8N8K4) {
  run_case({"mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64", 8, 8, 4, op(Et::F64, 2, kC8x8), op(Et::F64, 1, kA8x4d),
            op(Et::F64, 1, kB4x8d), op(Et::F64, 2, kC8x8)},
           12);
}

TEST(PtxMma, DoubleIsAChainOfFusedMultiplyAdds) {
  MmaCase mc{"mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64", 8, 8, 4, op(Et::F64, 2, kC8x8), op(Et::F64, 1, kA8x4d),
             op(Et::F64, 1, kB4x8d), op(Et::F64, 2, kC8x8)};
  mc.full_f64 = true;
  run_case(mc, 13);
}

// ldmatrix / stmatrix: 4 matrices of 8x8 b16 in shared memory, rows 48 bytes apart; lane
// 8i+r supplies the address of row r of matrix i. Lane l receives, per matrix, row l/4,
// columns 2(l%4) and 2(l%4)+1 (low half first); .trans gives the transposed matrix.
std::string ldmatrix_kernel(int num, bool trans, bool generic, bool store) {
  std::ostringstream s;
  std::string regs = "{";
  for (int i = 0; i < num; ++i) regs += (i ? ", %v" : "%v") + std::to_string(i);
  regs += "}";
  s << ".version 8.0\n.target sm_80\n.address_size 64\n"
    << ".visible .entry k(.param .u64 pin, .param .u64 pout)\n{\n"
    << "  .reg .pred %p;\n  .reg .b32 %t<8>;\n  .reg .b32 %v<4>;\n  .reg .b64 %rd<8>;\n  .reg .b16 %h;\n"
    << "  .shared .align 16 .b8 tile[1536];\n"
    << "  mov.u32 %t0, %tid.x;\n  ld.param.u64 %rd0, [pin];\n  ld.param.u64 %rd1, [pout];\n  mov.u32 %t5, tile;\n"
    // the 32 x 24 halves of the tile: each lane copies 24 of them
    << "  mov.u32 %t1, 0;\nCOPY:\n"
    << "  mad.lo.u32 %t2, %t0, 24, %t1;\n  mul.wide.u32 %rd2, %t2, 2;\n  add.u64 %rd3, %rd0, %rd2;\n"
    << "  cvt.u32.u64 %t3, %rd2;\n";
  if (store) s << "  mov.u16 %h, 0;\n";
  else s << "  ld.global.u16 %h, [%rd3];\n";
  s << "  add.u32 %t6, %t5, %t3;\n  st.shared.u16 [%t6], %h;\n"
    << "  add.u32 %t1, %t1, 1;\n  setp.lt.u32 %p, %t1, 24;\n  @%p bra COPY;\n"
    << "  bar.sync 0;\n"
    // this lane's row address: row (lane % 8) of matrix lane / 8 = tile row lane
    << "  mul.lo.u32 %t4, %t0, 48;\n  add.u32 %t4, %t4, %t5;\n";
  std::string addr = "[%t4]";
  if (generic) {
    s << "  cvt.u64.u32 %rd4, %t4;\n  cvta.shared.u64 %rd4, %rd4;\n";
    addr = "[%rd4]";
  }
  const std::string sp = generic ? "" : ".shared";
  const std::string tr = trans ? ".trans" : "";
  if (store) {
    // each lane's registers: v_i = in[(lane * 4 + i)] as b32
    s << "  mul.wide.u32 %rd5, %t0, 16;\n  add.u64 %rd5, %rd0, %rd5;\n"
      << "  ld.global.v4.b32 {%v0, %v1, %v2, %v3}, [%rd5];\n"
      << "  stmatrix.sync.aligned.m8n8.x" << num << tr << sp << ".b16 " << addr << ", " << regs << ";\n"
      << "  bar.sync 0;\n  mov.u32 %t1, 0;\nOUT:\n"
      << "  mad.lo.u32 %t2, %t0, 24, %t1;\n  mul.wide.u32 %rd2, %t2, 2;\n  add.u64 %rd3, %rd1, %rd2;\n"
      << "  cvt.u32.u64 %t3, %rd2;\n  add.u32 %t6, %t5, %t3;\n  ld.shared.u16 %h, [%t6];\n  st.global.u16 [%rd3], %h;\n"
      << "  add.u32 %t1, %t1, 1;\n  setp.lt.u32 %p, %t1, 24;\n  @%p bra OUT;\n";
  } else {
    s << "  mov.b32 %v1, 0;\n  mov.b32 %v2, 0;\n  mov.b32 %v3, 0;\n"
      << "  ldmatrix.sync.aligned.m8n8.x" << num << tr << sp << ".b16 " << regs << ", " << addr << ";\n"
      << "  mul.wide.u32 %rd5, %t0, 16;\n  add.u64 %rd5, %rd1, %rd5;\n"
      << "  st.global.v4.b32 [%rd5], {%v0, %v1, %v2, %v3};\n";
  }
  s << "  ret;\n}\n";
  return s.str();
}

// Element (row, col) of matrix i in the 32 x 24 tile.
inline size_t tile_at(int i, int row, int col) { return size_t(i * 8 + row) * 24 + col; }

TEST(PtxMma, LdmatrixAndStmatrix) {
  std::vector<uint16_t> tile(32 * 24);
  for (size_t i = 0; i < tile.size(); ++i) tile[i] = uint16_t(0x1000 + i * 7);
  for (bool store : {false, true})
    for (int num : {1, 2, 4})
      for (bool trans : {false, true})
        for (bool generic : {false, true}) {
          SCOPED_TRACE(std::string(store ? "stmatrix" : "ldmatrix") + " x" + std::to_string(num) + (trans ? " trans" : "") +
                       (generic ? " generic" : " shared"));
          std::string err;
          auto m = Module::from_ptx(ldmatrix_kernel(num, trans, generic, store), &err);
          ASSERT_TRUE(m) << err;
          HostMem mem;
          std::vector<uint32_t> regs(32 * 4);
          for (size_t i = 0; i < regs.size(); ++i) regs[i] = uint32_t(0xa0000000u + i * 0x00010003u);
          const uint64_t pin = store ? mem.upload(regs) : mem.upload(tile);
          const uint64_t pout = mem.alloc(32 * 24 * 2);
          Engine eng(1);
          Args a(m->kernel("k"));
          a(pin)(pout);
          auto e = eng.launch(*m, "k", cfg({1}, {32}), a.data(), a.size(), mem);
          ASSERT_EQ(e.kind, LaunchError::None) << e.message;
          if (!store) {
            auto got = mem.download<uint32_t>(pout, 32 * 4);
            for (int l = 0; l < 32; ++l)
              for (int i = 0; i < 4; ++i) {
                const int r = l / 4, c = 2 * (l % 4);
                uint32_t want = 0;
                if (i < num)
                  want = trans ? tile[tile_at(i, c, r)] | uint32_t(tile[tile_at(i, c + 1, r)]) << 16
                               : tile[tile_at(i, r, c)] | uint32_t(tile[tile_at(i, r, c + 1)]) << 16;
                EXPECT_EQ(got[size_t(l) * 4 + i], want) << "lane " << l << " register " << i;
              }
          } else {
            auto got = mem.download<uint16_t>(pout, 32 * 24);
            std::vector<uint16_t> want(32 * 24, 0);
            for (int l = 0; l < 32; ++l)
              for (int i = 0; i < num; ++i) {
                const int r = l / 4, c = 2 * (l % 4);
                const uint32_t v = regs[size_t(l) * 4 + i];
                if (trans) {
                  want[tile_at(i, c, r)] = uint16_t(v);
                  want[tile_at(i, c + 1, r)] = uint16_t(v >> 16);
                } else {
                  want[tile_at(i, r, c)] = uint16_t(v);
                  want[tile_at(i, r, c + 1)] = uint16_t(v >> 16);
                }
              }
            EXPECT_EQ(got, want);
          }
        }
}

// ---- errors ----
std::string one_inst(const std::string& regs, const std::string& inst) {
  return ".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k(.param .u64 p)\n{\n" + regs + "\n" + inst +
         "\n  ret;\n}\n";
}
const char* kRegs = "  .reg .b32 %r<40>;\n  .reg .b64 %rd<4>;\n  .reg .f64 %fd<4>;\n  ld.param.u64 %rd0, [p];";

TEST(PtxMma, MalformedFormsAreRefusedAtLoad) {
  const std::pair<const char*, const char*> bad[] = {
      {"mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%r0,%r1,%r2}, {%r4,%r5,%r6,%r7}, {%r8,%r9}, {%r10,%r11,%r12,%r13};",
       "the d operand takes 4 registers, got 3"},
      {"mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%r0,%r1,%r2,%r3}, {%r4,%r5,%r6,%r7}, {%r8,%r9};",
       "expects 4 operands"},
      {"mma.sync.aligned.m16n8k16.row.col.f32.tf32.tf32.f32 {%r0,%r1,%r2,%r3}, {%r4,%r5,%r6,%r7}, {%r8,%r9}, {%r10,%r11,%r12,%r13};",
       "element types not valid"},
      {"mma.sync.aligned.m16n8k16.col.row.f32.f16.f16.f32 {%r0,%r1,%r2,%r3}, {%r4,%r5,%r6,%r7}, {%r8,%r9}, {%r10,%r11,%r12,%r13};",
       "needs .row.col"},
      {"mma.sync.aligned.m16n8k12.row.col.f32.f16.f16.f32 {%r0,%r1,%r2,%r3}, {%r4,%r5,%r6,%r7}, {%r8,%r9}, {%r10,%r11,%r12,%r13};",
       "needs a shape"},
      {"mma.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%r0,%r1,%r2,%r3}, {%r4,%r5,%r6,%r7}, {%r8,%r9}, {%r10,%r11,%r12,%r13};",
       "needs .sync"},
      {"mma.sync.aligned.m16n8k16.row.col.satfinite.f32.f16.f16.f32 {%r0,%r1,%r2,%r3}, {%r4,%r5,%r6,%r7}, {%r8,%r9}, {%r10,%r11,%r12,%r13};",
       ".satfinite needs integer elements"},
      {"mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%r0,%r1,%r2,%r3}, {%r4,%r5,%r6,%r7}, [%rd0], {%r10,%r11,%r12,%r13};",
       "register list"},
      {"wmma.load.a.sync.aligned.row.m16n16k16.f16 {%r0,%r1,%r2,%r3}, [%rd0];", "takes 8 registers, got 4"},
      {"wmma.load.a.sync.aligned.row.m16n16k16.f32 {%r0,%r1,%r2,%r3,%r4,%r5,%r6,%r7}, [%rd0];", "element type not valid"},
      {"wmma.load.c.sync.aligned.row.m16n16k8.f16 {%r0,%r1,%r2,%r3}, [%rd0];", "element type not valid"},
      {"wmma.load.a.sync.aligned.m16n16k16.f16 {%r0,%r1,%r2,%r3,%r4,%r5,%r6,%r7}, [%rd0];", "needs one layout"},
      {"wmma.load.a.sync.aligned.row.m16n8k16.f16 {%r0,%r1,%r2,%r3}, [%rd0];", "not a wmma shape"},
      {"wmma.load.a.sync.aligned.row.m16n16k16.local.f16 {%r0,%r1,%r2,%r3,%r4,%r5,%r6,%r7}, [%rd0];", "unknown modifier .local"},
      {"wmma.load.a.sync.aligned.row.m16n16k16.global.shared.f16 {%r0,%r1,%r2,%r3,%r4,%r5,%r6,%r7}, [%rd0];",
       "more than one state space"},
      {"wmma.load.a.sync.aligned.row.m16n16k16.f16 {%r0,%r1,%r2,%r3,%r4,%r5,%r6,%r7}, %rd0;", "expected a memory operand"},
      {"wmma.store.d.sync.aligned.row.m16n16k16.f32 [%rd0], {%r0,%r1,%r2,%r3,%r4,%r5,%r6,%r7}, %r8, %r9;", "expects 2 or 3"},
      {"wmma.mma.sync.aligned.row.col.m16n16k16.f32.bf16.bf16.f16 {%r0,%r1,%r2,%r3,%r4,%r5,%r6,%r7}, {%r8,%r9,%r10,%r11}, "
       "{%r12,%r13,%r14,%r15}, {%r16,%r17,%r18,%r19};",
       "element types not valid"},
      {"wmma.mma.sync.aligned.row.m16n16k16.f32.f32 {%r0,%r1,%r2,%r3,%r4,%r5,%r6,%r7}, {%r8,%r9,%r10,%r11,%r12,%r13,%r14,%r15}, "
       "{%r16,%r17,%r18,%r19,%r20,%r21,%r22,%r23}, {%r24,%r25,%r26,%r27,%r28,%r29,%r30,%r31};",
       "needs two layouts"},
      {"wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32 {%r0,%r1,%r2,%r3,%r4,%r5,%r6,%r7}, {%r8,%r9,%r10,%r11,%r12,%r13,%r14,%r15}, "
       "{%r16,%r17,%r18,%r19,%r20,%r21,%r22,%r23}, {%r24,%r25,%r26,%r27};",
       "the c operand takes 8 registers, got 4"},
      {"ldmatrix.sync.aligned.m8n8.x3.shared.b16 {%r0,%r1,%r2}, [%r4];", "needs .x1, .x2 or .x4"},
      {"ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%r0,%r1,%r2,%r3}, [%r4];", "takes 2 registers, got 4"},
      {"ldmatrix.sync.aligned.m8n8.x1.global.b16 {%r0}, [%rd0];", "unknown modifier .global"},
      {"ldmatrix.sync.aligned.m8n8.x1.shared.b8 {%r0}, [%r4];", "needs .b16"},
      {"stmatrix.sync.aligned.m8n8.x1.shared.b16 {%r0}, [%r4];", "expected a memory operand"},
      {"cvt.rna.relu.tf32.f32 %r0, %r1;", "takes no .relu"},
      {"cvt.tf32.f32 %r0, %r1;", "needs .rna, .rn or .rz"},
  };
  for (auto& [inst, want] : bad) {
    std::string err;
    auto m = Module::from_ptx(one_inst(kRegs, std::string("  ") + inst), &err);
    EXPECT_FALSE(m) << inst;
    EXPECT_NE(err.find(want), std::string::npos) << inst << "\n  error: " << err;
    EXPECT_NE(err.find("PTX line 10"), std::string::npos) << err;
  }
}

// Valid forms the sim device does not run load, and fail the launch naming the instruction.
TEST(PtxMma, UnsupportedFormsFailTheLaunch) {
  const char* forms[] = {
      "mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32 {%r0,%r1,%r2,%r3,%r4,%r5,%r6,%r7}, {%r8,%r9}, {%r10,%r11}, "
      "{%r12,%r13,%r14,%r15,%r16,%r17,%r18,%r19};",
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%r0,%r1,%r2,%r3}, {%r4,%r5,%r6,%r7}, {%r8,%r9}, {%r10,%r11,%r12,%r13};",
      "mma.sp.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%r0,%r1,%r2,%r3}, {%r4,%r5}, {%r8,%r9}, {%r10,%r11,%r12,%r13}, %r14, 0x0;",
      "wmma.load.a.sync.aligned.row.m8n8k32.s4 {%r0}, [%rd0];",
      "ldmatrix.sync.aligned.m16n16.x1.trans.shared.b8 {%r0, %r1}, [%r4];",
      "mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 {%fd0,%fd1,%fd2,%fd3}, {%fd0,%fd1,%fd2,%fd3}, {%fd0,%fd1}, "
      "{%fd0,%fd1,%fd2,%fd3};",
  };
  for (const char* f : forms) {
    LaunchError e;
    ASSERT_NO_FATAL_FAILURE(launch_warp_k(one_inst(kRegs, std::string("  ") + f), 64, &e)) << f;
    EXPECT_EQ(e.kind, LaunchError::Unsupported) << f;
    EXPECT_NE(e.message.find("PTX line 10"), std::string::npos) << e.message;
  }
}

// .sync.aligned needs the whole warp: run by half of it, the launch traps naming the lanes.
TEST(PtxMma, PartOfAWarpTraps) {
  std::string body = std::string(kRegs) +
                     "\n  .reg .pred %p;\n  mov.u32 %r39, %laneid;\n  setp.ge.u32 %p, %r39, 16;\n  @%p bra END;\n"
                     "  mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%r0,%r1,%r2,%r3}, {%r4,%r5,%r6,%r7}, {%r8,%r9}, "
                     "{%r10,%r11,%r12,%r13};\nEND:";
  LaunchError e;
  ASSERT_NO_FATAL_FAILURE(launch_warp_k(one_inst(body, ""), 64, &e));
  EXPECT_EQ(e.kind, LaunchError::Trap);
  EXPECT_NE(e.message.find("lanes 0x0000ffff"), std::string::npos) << e.message;
}

// cvt to tf32 (wmma::__float_to_tf32 is cvt.rna.tf32.f32): 10 mantissa bits, low 13 zero.
TEST(PtxMma, CvtToTf32) {
  const char* forms[] = {"cvt.rna.tf32.f32", "cvt.rn.tf32.f32", "cvt.rz.tf32.f32", "cvt.rna.satfinite.tf32.f32",
                         "cvt.rn.relu.tf32.f32"};
  std::vector<uint32_t> in = {0x3f800000u, 0x3f801000u, 0x3f803000u, 0x3f802000u, 0xbf801000u, 0xbf803000u,
                              0x3f800fffu, 0x7f7ff000u, 0xff7ff000u, 0x7f800000u, 0x7fc00001u, 0x00001000u,
                              0x80003000u, 0x00000000u, 0x80000000u, 0x4049fdb0u};
  std::mt19937 rng(5);
  while (in.size() < 64) in.push_back(uint32_t(rng()));
  // the reference: exact arithmetic on the magnitude
  auto ref = [](uint32_t x, int mode, bool sat, bool relu) -> uint32_t {
    const uint32_t mag = x & 0x7fffffffu, sign = x & 0x80000000u;
    if (mag > 0x7f800000u) return 0x7fffffffu;
    if (relu && sign && mag) return 0;
    uint32_t q = mag >> 13, rem = mag & 0x1fffu;
    if (mag != 0x7f800000u) {
      if (mode == 2 && rem >= 0x1000u) ++q;
      if (mode == 0 && (rem > 0x1000u || (rem == 0x1000u && (q & 1)))) ++q;
    }
    uint32_t r = sign | q << 13;
    if (sat && (r & 0x7fffffffu) == 0x7f800000u) r = sign | 0x7f7fe000u;
    return r;
  };
  const int modes[] = {2, 0, 1, 2, 0};
  for (int f = 0; f < 5; ++f) {
    std::string body = std::string(kRegs) +
                       "\n  mov.u32 %r0, %tid.x;\n  mul.wide.u32 %rd1, %r0, 4;\n  add.u64 %rd1, %rd0, %rd1;\n"
                       "  ld.global.b32 %r1, [%rd1];\n  " + forms[f] + " %r2, %r1;\n  st.global.b32 [%rd1], %r2;";
    std::string err;
    auto m = Module::from_ptx(one_inst(body, ""), &err);
    ASSERT_TRUE(m) << err;
    HostMem mem;
    const uint64_t p = mem.upload(in);
    Engine eng(1);
    Args a(m->kernel("k"));
    a(p);
    auto e = eng.launch(*m, "k", cfg({1}, {64}), a.data(), a.size(), mem);
    ASSERT_EQ(e.kind, LaunchError::None) << e.message;
    auto got = mem.download<uint32_t>(p, in.size());
    for (size_t i = 0; i < in.size(); ++i)
      EXPECT_EQ(got[i], ref(in[i], modes[f], f == 3, f == 4)) << forms[f] << " of 0x" << std::hex << in[i];
  }
}

}  // namespace
