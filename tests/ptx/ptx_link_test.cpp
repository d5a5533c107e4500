// The PTX linker for separate compilation (-rdc=true): Module::from_ptx_units.
#include "ptx_test_util.hpp"

using namespace whtest;
using wh::ptx::Engine;
using wh::ptx::LaunchError;
using wh::ptx::Module;

namespace {

// Calls `fn(arg)` (one .b32 in, one out) into %r<dst>.
std::string call(const std::string& fn, int arg, int dst) {
  return "  { .param .b32 a; .param .b32 r; mov.u32 %r7, " + std::to_string(arg) +
         "; st.param.b32 [a], %r7; call.uni (r), " + fn + ", (a); ld.param.b32 %r" + std::to_string(dst) + ", [r]; }\n";
}
std::string func(const std::string& linkage, const std::string& name, const std::string& op) {
  return linkage + ".func (.param .b32 " + name + "_ret) " + name + "(.param .b32 " + name + "_p)\n{\n" +
         "  .reg .b32 %r<3>;\n  ld.param.u32 %r1, [" + name + "_p];\n  " + op + "\n  st.param.b32 [" + name +
         "_ret], %r2;\n  ret;\n}\n";
}
const char* kHead = ".version 8.0\n.target sm_75\n.address_size 64\n";

// Unit 0: kernel k0 uses its private helper and priv, unit 1's twice and
// shared_val, and the weak wk. Unit 1: its own private helper and priv, the
// definitions of twice and shared_val, another weak wk, kernel k1.
std::string unit0() {
  return std::string(kHead) +
         "// helper and priv are private to each unit\n"
         ".extern .func (.param .b32 twice_ret) twice(.param .b32 twice_p);\n"
         ".extern .global .align 4 .u32 shared_val;\n" +
         func(".weak ", "wk", "add.u32 %r2, %r1, 100;") + func("", "helper", "mul.lo.u32 %r2, %r1, 3;") +
         ".global .align 4 .u32 priv = 5;\n"
         ".visible .entry k0(.param .u64 k0_out)\n{\n  .reg .b32 %r<8>;\n  .reg .b64 %rd<3>;\n"
         "  ld.param.u64 %rd1, [k0_out];\n  cvta.to.global.u64 %rd2, %rd1;\n" +
         call("helper", 2, 1) + call("twice", 3, 2) + call("wk", 1, 3) +
         "  ld.global.u32 %r4, [shared_val];\n  ld.global.u32 %r5, [priv];\n"
         "  st.global.u32 [%rd2], %r1;\n  st.global.u32 [%rd2+4], %r2;\n  st.global.u32 [%rd2+8], %r3;\n"
         "  st.global.u32 [%rd2+12], %r4;\n  st.global.u32 [%rd2+16], %r5;\n  ret;\n}\n";
}
std::string unit1() {
  return std::string(kHead) + ".visible .global .align 4 .u32 shared_val = 42;\n.global .align 4 .u32 priv = 9;\n" +
         func("", "helper", "add.u32 %r2, %r1, 1000;") + func(".weak ", "wk", "add.u32 %r2, %r1, 200;") +
         ".visible .func (.param .b32 twice_ret) twice(.param .b32 twice_p)\n{\n  .reg .b32 %r<8>;\n"
         "  ld.param.u32 %r6, [twice_p];\n" +
         call("helper", 0, 1) +  // helper(0) = 1000 in this unit
         "  add.u32 %r2, %r6, %r6;\n  add.u32 %r2, %r2, %r1;\n  st.param.b32 [twice_ret], %r2;\n  ret;\n}\n"
         ".visible .entry k1(.param .u64 k1_out)\n{\n  .reg .b32 %r<8>;\n  .reg .b64 %rd<3>;\n"
         "  ld.param.u64 %rd1, [k1_out];\n  cvta.to.global.u64 %rd2, %rd1;\n" +
         call("helper", 2, 1) + call("wk", 1, 2) +
         "  ld.global.u32 %r3, [priv];\n  st.global.u32 [%rd2], %r1;\n  st.global.u32 [%rd2+4], %r2;\n"
         "  st.global.u32 [%rd2+8], %r3;\n  ret;\n}\n";
}

TEST(PtxLink, PrivateWeakAndExternSymbols) {
  std::string u0 = unit0(), u1 = unit1(), err;
  // Each unit alone: the extern variable is refused, as before.
  EXPECT_EQ(Module::from_ptx(u0, &err), nullptr);
  auto m = Module::from_ptx_units({u0, u1}, &err);
  ASSERT_TRUE(m) << err;
  ASSERT_NE(m->kernel("k0"), nullptr);
  ASSERT_NE(m->kernel("k1"), nullptr);
  // shared_val once, and each unit's priv under its own name.
  int shared_vals = 0, privs = 0;
  for (auto& g : m->globals()) {
    if (g.name == "shared_val") ++shared_vals;
    if (g.name.rfind("priv", 0) == 0) ++privs;
  }
  EXPECT_EQ(shared_vals, 1);
  EXPECT_EQ(privs, 2);
  HostMem mem;
  bind_globals(*m, mem);
  Engine eng(1);
  uint64_t out0 = mem.alloc(20), out1 = mem.alloc(12);
  Args a0(m->kernel("k0"));
  a0(out0);
  auto e = eng.launch(*m, "k0", cfg({1}, {1}), a0.data(), a0.size(), mem);
  ASSERT_EQ(e.kind, LaunchError::None) << e.message;
  Args a1(m->kernel("k1"));
  a1(out1);
  e = eng.launch(*m, "k1", cfg({1}, {1}), a1.data(), a1.size(), mem);
  ASSERT_EQ(e.kind, LaunchError::None) << e.message;
  auto r0 = mem.download<uint32_t>(out0, 5);
  auto r1 = mem.download<uint32_t>(out1, 3);
  EXPECT_EQ(r0[0], 6u);         // unit 0's helper: 2 * 3
  EXPECT_EQ(r0[1], 3u + 3 + 1000);  // twice(3) in unit 1, with unit 1's helper(0)
  EXPECT_EQ(r0[2], 101u);       // the first weak wk
  EXPECT_EQ(r0[3], 42u);        // unit 1's shared_val
  EXPECT_EQ(r0[4], 5u);         // unit 0's priv
  EXPECT_EQ(r1[0], 1002u);      // unit 1's helper
  EXPECT_EQ(r1[1], 101u);       // the same weak wk
  EXPECT_EQ(r1[2], 9u);         // unit 1's priv
}

TEST(PtxLink, UndefinedExternNamed) {
  std::string err;
  std::string u0 = unit0();
  // twice and shared_val are defined nowhere without unit 1.
  std::string other = std::string(kHead) + func(".visible ", "unrelated", "mov.u32 %r2, %r1;");
  EXPECT_EQ(Module::from_ptx_units({u0, other}, &err), nullptr);
  EXPECT_NE(err.find("undefined"), std::string::npos) << err;
  EXPECT_TRUE(err.find("'twice'") != std::string::npos || err.find("'shared_val'") != std::string::npos) << err;
  // A function only.
  std::string u2 = std::string(kHead) + ".extern .func (.param .b32 r) nowhere(.param .b32 p);\n" +
                   ".visible .entry k(.param .u64 o)\n{\n  .reg .b32 %r<8>;\n" + call("nowhere", 1, 1) + "  ret;\n}\n";
  EXPECT_EQ(Module::from_ptx_units({u2, other}, &err), nullptr);
  EXPECT_NE(err.find("undefined function 'nowhere'"), std::string::npos) << err;
}

TEST(PtxLink, VisibleSymbolDefinedTwice) {
  std::string err, f = std::string(kHead) + func(".visible ", "dup", "mov.u32 %r2, %r1;");
  EXPECT_EQ(Module::from_ptx_units({f, f}, &err), nullptr);
  EXPECT_NE(err.find("'dup' is defined in units 0 and 1"), std::string::npos) << err;
}

TEST(PtxLink, BuiltinsNeedNoDefinition) {
  // vprintf/malloc/free declared .extern in several units are the engine's.
  std::string decl = ".extern .func (.param .b64 r) malloc(.param .b64 p);\n.extern .func free(.param .b64 p);\n";
  std::string a = std::string(kHead) + decl +
                  ".visible .entry ka()\n{\n  .reg .b64 %rd<3>;\n  mov.u64 %rd1, 16;\n"
                  "  { .param .b64 p; .param .b64 r; st.param.b64 [p], %rd1; call.uni (r), malloc, (p); ld.param.b64 %rd2, [r]; }\n"
                  "  { .param .b64 q; st.param.b64 [q], %rd2; call.uni free, (q); }\n  ret;\n}\n";
  std::string b = std::string(kHead) + decl + func(".visible ", "g", "mov.u32 %r2, %r1;");
  std::string err;
  auto m = Module::from_ptx_units({a, b}, &err);
  ASSERT_TRUE(m) << err;
  EXPECT_TRUE(m->kernel("ka")->uses_heap);
}

// A fatbin with its PTX entries turned into an unknown kind: SASS only, like
// the device-linked image of an -rdc=true program.
std::string sass_only(std::string bin) {
  for (size_t off = 16; off + 64 <= bin.size();) {
    uint16_t kind;
    uint32_t hs;
    uint64_t sz;
    std::memcpy(&kind, &bin[off], 2);
    std::memcpy(&hs, &bin[off + 4], 4);
    std::memcpy(&sz, &bin[off + 8], 8);
    if (kind == 1) { uint16_t k = 0x40; std::memcpy(&bin[off], &k, 2); }
    off += hs + sz;
  }
  return bin;
}

TEST(PtxLink, LinkedImageFollowedByUnitFatbins) {
  std::string ml = read_file(kernel_path("ml", "fatbin")), la = read_file(kernel_path("linalg", "fatbin")), err;
  ASSERT_FALSE(ml.empty());
  ASSERT_FALSE(la.empty());
  std::string linked = sass_only(ml);
  EXPECT_FALSE(Module::from_fatbin(linked.data(), linked.size(), &err));
  // The refusal names the kernels that cannot run and the missing PTX.
  EXPECT_NE(err.find("no PTX"), std::string::npos) << err;
  EXPECT_NE(err.find("kernel cross_entropy"), std::string::npos) << err;  // the first of ml.cu
  std::string image = linked + ml + la;
  auto m = Module::from_fatbin(image.data(), image.size(), &err);
  ASSERT_TRUE(m) << err;
  EXPECT_NE(m->kernel("vector_add"), nullptr);
  EXPECT_NE(m->kernel("matmul_tiled"), nullptr);
  // Bounds: trailing bytes, a truncated unit, a unit without PTX.
  std::string bad = image + "xyz";
  EXPECT_FALSE(Module::from_fatbin(bad.data(), bad.size(), &err));
  EXPECT_NE(err.find("trailing"), std::string::npos) << err;
  EXPECT_FALSE(Module::from_fatbin(image.data(), image.size() - 1, &err));
  bad = linked + ml + sass_only(la);
  EXPECT_FALSE(Module::from_fatbin(bad.data(), bad.size(), &err));
  EXPECT_NE(err.find("unit 2 carries no PTX"), std::string::npos) << err;
}

}  // namespace

namespace {
// The fuzzer's seed for the linker (units split at .version, as the fuzzer does) links.
TEST(PtxLink, FuzzSeedLinks) {
  std::string text = read_file(std::string(WH_PTX_SOURCE_DIR) + "/fuzz_corpus/link-two-units.ptx"), err;
  size_t second = text.find(".version", 1);
  ASSERT_NE(second, std::string::npos);
  auto m = Module::from_ptx_units({std::string_view(text).substr(0, second), std::string_view(text).substr(second)}, &err);
  ASSERT_TRUE(m) << err;
  EXPECT_NE(m->kernel("k0"), nullptr);
}
}  // namespace
