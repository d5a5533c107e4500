// Parser robustness and error messages; fatbin/cubin container parsing.
#include <cstring>

#include "ptx_test_util.hpp"
#include "wormhole/common/fatbin.hpp"

using namespace whtest;
using wh::ptx::Engine;
using wh::ptx::LaunchError;
using wh::ptx::Module;

namespace {

std::string wrap(const std::string& body, const std::string& params = "") {
  return ".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k(" + params + ")\n{\n" + body + "\n}\n";
}

TEST(PtxParse, MalformedInputIsAnErrorWithALine) {
  struct Case { std::string text, want; };
  std::vector<Case> cases = {
      {"", "missing .version"},
      {".version 8.0\n.target sm_80\n.address_size 32\n", "address_size 64"},
      {wrap("  .reg .b32 %r<4>;\n  add.s32 %r1, %r2;"), "line 7: add expects 3 operands"},
      {wrap("  .reg .b32 %r<4>;\n  add.s32 %r1, %r2, %r9;"), "unknown register '%r9'"},
      {wrap("  bra NOWHERE;"), "undefined label 'NOWHERE'"},
      {wrap("  .reg .b32 %r<2>;\n  mov.u32 %r1, [%r0"), "expected ']'"},
      {wrap("  .reg .b32 %r<100000000>;"), "value"},
      {".version 8.0\n.visible .entry k(\n{\n", "line"},
      {wrap("  .reg .b32 %r1;\n  ld.global.u32 %r1, [unknown_sym];"), "unknown symbol 'unknown_sym'"},
      {wrap("  .reg .b32 %r1;\n  call.uni nofunc, ();"), "undeclared function"},
      {".version 8.0\n.global .u64 p = generic(x);\n", "unknown symbol 'x' in the initializer of 'p'"},
      {wrap("  \"unterminated"), "unterminated string"},
      {wrap("  .reg .b64 %rd<2>;\n  add.s64 %rd1, %rd1, 1.8e273;"), "out of range for an integer operand"},
  };
  for (auto& c : cases) {
    std::string err;
    auto m = Module::from_ptx(c.text, &err);
    EXPECT_FALSE(m) << c.text;
    EXPECT_NE(err.find(c.want), std::string::npos) << "error: " << err << "\nfor: " << c.text;
    EXPECT_NE(err.find("PTX"), std::string::npos) << err;
  }
}

TEST(PtxParse, UnsupportedInstructionFailsOnlyThatKernelsLaunch) {
  std::string text = ".version 8.0\n.target sm_80\n.address_size 64\n"
                     ".visible .entry good(.param .u64 p)\n{\n .reg .b64 %rd<2>;\n ld.param.u64 %rd1, [p];\n ret;\n}\n"
                     ".func helper()\n{\n .reg .b32 %r<2>;\n tex.1d.v4.f32.s32 {%r1, %r1, %r1, %r1}, [t, {%r1}];\n ret;\n}\n"
                     ".visible .entry bad(.param .u64 p)\n{\n call.uni helper, ();\n ret;\n}\n";
  std::string err;
  auto m = Module::from_ptx(text, &err);
  ASSERT_TRUE(m) << err;
  HostMem mem;
  Engine eng(1);
  uint64_t p = 0;
  auto e = eng.launch(*m, "good", cfg({1}, {32}), &p, 8, mem);
  EXPECT_EQ(e.kind, LaunchError::None) << e.message;
  e = eng.launch(*m, "bad", cfg({1}, {32}), &p, 8, mem);
  EXPECT_EQ(e.kind, LaunchError::Unsupported);
  EXPECT_NE(e.message.find("kernel bad"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("tex.1d.v4.f32.s32"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("PTX line 13"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("helper"), std::string::npos) << e.message;
}

// cvt to .tf32 (in one of NVIDIA's libcublas PTX modules, and wmma::__float_to_tf32)
// runs. A cvt form the sim device does not implement still lets the module load and
// its other kernels run; only the kernel that uses it fails to launch, naming the
// instruction.
TEST(PtxParse, CvtToTf32RunsAndAnUnsupportedCvtFailsOnlyItsKernel) {
  std::string text = ".version 8.0\n.target sm_80\n.address_size 64\n"
                     ".visible .entry good(.param .u64 p)\n{\n .reg .b32 %r<3>;\n .reg .b64 %rd<2>;\n"
                     " ld.param.u64 %rd1, [p];\n mov.b32 %r1, 0x3f803000;\n cvt.rn.tf32.f32 %r2, %r1;\n"
                     " st.global.b32 [%rd1], %r2;\n ret;\n}\n"
                     ".visible .entry bad(.param .u64 p)\n{\n .reg .b32 %r<3>;\n .reg .b16 %h;\n mov.b32 %r1, 0;\n"
                     " cvt.rn.relu.f16.f32 %h, %r1;\n ret;\n}\n";
  std::string err;
  auto m = Module::from_ptx(text, &err);
  ASSERT_TRUE(m) << err;
  HostMem mem;
  Engine eng(1);
  uint64_t p = mem.alloc(4);
  auto e = eng.launch(*m, "good", cfg({1}, {32}), &p, 8, mem);
  EXPECT_EQ(e.kind, LaunchError::None) << e.message;
  // 1 + 3*2^-11 lies halfway between two tf32 values: to the even one, 1 + 2^-9
  EXPECT_EQ(mem.download<uint32_t>(p, 1)[0], 0x3f804000u);
  e = eng.launch(*m, "bad", cfg({1}, {32}), &p, 8, mem);
  EXPECT_EQ(e.kind, LaunchError::Unsupported);
  EXPECT_NE(e.message.find("kernel bad"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("cvt.rn.relu.f16.f32"), std::string::npos) << e.message;
}

TEST(PtxParse, SharedLocalAndParamBoundsChecked) {
  std::string text = wrap(
      "  .reg .b32 %r<4>;\n  .reg .b64 %rd<4>;\n  .shared .align 4 .b8 s[64];\n  .local .align 4 .b8 l[16];\n"
      "  ld.param.u32 %r1, [which];\n  mov.u32 %r2, s;\n  mov.u64 %rd1, l;\n"
      "  setp.eq.u32 %p1, %r1, 0;\n  @%p1 st.shared.u32 [%r2+64], %r1;\n"
      "  setp.eq.u32 %p1, %r1, 1;\n  @%p1 st.local.u32 [%rd1+16000], %r1;\n"
      "  setp.eq.u32 %p1, %r1, 2;\n  @%p1 ld.param.u32 %r3, [which+4];\n"
      "  setp.eq.u32 %p1, %r1, 3;\n  @%p1 st.shared.u32 [%r2+2], %r1;\n  ret;",
      ".param .u32 which");
  text.insert(text.find("  .reg .b32"), "  .reg .pred %p<2>;\n");
  std::string err;
  auto m = Module::from_ptx(text, &err);
  ASSERT_TRUE(m) << err;
  HostMem mem;
  Engine eng(1);
  const char* want[] = {"shared write of 4 bytes at address 0x40", "local write", "param read", "misaligned"};
  LaunchError::Kind kinds[] = {LaunchError::BadAccess, LaunchError::BadAccess, LaunchError::BadAccess, LaunchError::Misaligned};
  for (uint32_t w = 0; w < 4; ++w) {
    auto e = eng.launch(*m, "k", cfg({1}, {32}), &w, 4, mem);
    EXPECT_EQ(e.kind, kinds[w]) << e.message;
    EXPECT_NE(e.message.find(want[w]), std::string::npos) << e.message;
  }
  uint32_t ok = 9;
  EXPECT_EQ(eng.launch(*m, "k", cfg({1}, {32}), &ok, 4, mem).kind, LaunchError::None);
}

TEST(PtxParse, BarrierDeadlockIsReported) {
  // warp 0 waits at barrier 1, warp 1 at barrier 2: neither can complete
  std::string text = wrap(
      "  .reg .pred %p<2>;\n  .reg .b32 %r<4>;\n  mov.u32 %r1, %tid.x;\n  setp.lt.u32 %p1, %r1, 32;\n"
      "  @%p1 bar.sync 1;\n  @!%p1 bar.sync 2;\n  ret;");
  std::string err;
  auto m = Module::from_ptx(text, &err);
  ASSERT_TRUE(m) << err;
  HostMem mem;
  Engine eng(1);
  auto e = eng.launch(*m, "k", cfg({1}, {64}), nullptr, 0, mem);
  EXPECT_EQ(e.kind, LaunchError::Trap) << e.message;
  EXPECT_NE(e.message.find("deadlock"), std::string::npos) << e.message;
}

TEST(PtxParse, RecursionAndCallStackOverflow) {
  std::string text = ".version 8.0\n.target sm_80\n.address_size 64\n"
                     ".func (.param .b32 r) fact(.param .b32 n)\n{\n .reg .pred %p<2>;\n .reg .b32 %r<6>;\n"
                     " ld.param.b32 %r1, [n];\n setp.le.s32 %p1, %r1, 1;\n @%p1 bra BASE;\n sub.s32 %r2, %r1, 1;\n"
                     " { .param .b32 a; .param .b32 b; st.param.b32 [a], %r2; call.uni (b), fact, (a); ld.param.b32 %r3, [b]; }\n"
                     " mul.lo.s32 %r4, %r3, %r1;\n st.param.b32 [r], %r4;\n ret;\nBASE:\n st.param.b32 [r], 1;\n ret;\n}\n"
                     ".visible .entry k(.param .u64 out, .param .u32 n)\n{\n .reg .b32 %r<4>;\n .reg .b64 %rd<4>;\n"
                     " ld.param.u64 %rd1, [out];\n ld.param.u32 %r1, [n];\n mov.u32 %r2, %tid.x;\n add.s32 %r1, %r1, %r2;\n"
                     " { .param .b32 a; .param .b32 b; st.param.b32 [a], %r1; call.uni (b), fact, (a); ld.param.b32 %r3, [b]; }\n"
                     " mul.wide.u32 %rd2, %r2, 4;\n add.s64 %rd3, %rd1, %rd2;\n st.global.u32 [%rd3], %r3;\n ret;\n}\n";
  std::string err;
  auto m = Module::from_ptx(text, &err);
  ASSERT_TRUE(m) << err;
  HostMem mem;
  Engine eng(1);
  uint64_t out = mem.alloc(32 * 4);
  struct { uint64_t o; uint32_t n; uint32_t pad; } p{out, 1, 0};
  auto e = eng.launch(*m, "k", cfg({1}, {8}), &p, 12, mem);
  ASSERT_EQ(e.kind, LaunchError::None) << e.message;
  auto r = mem.download<uint32_t>(out, 8);
  uint32_t f = 1;
  for (uint32_t t = 0; t < 8; ++t) {
    f *= (t + 1);
    EXPECT_EQ(r[t], f) << t;  // divergent recursion depths within one warp
  }
  p.n = 1000;
  e = eng.launch(*m, "k", cfg({1}, {8}), &p, 12, mem);
  EXPECT_EQ(e.kind, LaunchError::Trap) << e.message;
  EXPECT_NE(e.message.find("stack overflow"), std::string::npos) << e.message;
}

TEST(Fatbin, ParsesWrapperAndRawFatbinAndAgreesOnParams) {
  std::string bin = read_file(kernel_path("ml", "fatbin"));
  ASSERT_FALSE(bin.empty());
  EXPECT_EQ(wh::fatbin::fatbin_size(bin.data()), bin.size());
  std::vector<wh::fatbin::Entry> ents;
  std::string err;
  ASSERT_TRUE(wh::fatbin::parse(bin.data(), bin.size(), ents, &err)) << err;
  const wh::fatbin::Entry *ptx = nullptr, *elf = nullptr;
  for (auto& e : ents) (e.kind == wh::fatbin::Entry::PTX ? ptx : elf) = &e;
  ASSERT_TRUE(ptx && elf);
  EXPECT_EQ(ptx->sm_arch, 75u);
  std::string text(ptx->bytes.begin(), ptx->bytes.end());
  EXPECT_NE(text.find(".entry vector_add"), std::string::npos);
  std::map<std::string, std::vector<wh::fatbin::ParamInfo>> from_elf, from_ptx;
  ASSERT_TRUE(wh::fatbin::cubin_kernel_params(elf->bytes, from_elf, &err)) << err;
  ASSERT_TRUE(wh::fatbin::ptx_kernel_params(text, from_ptx, &err)) << err;
  EXPECT_EQ(from_elf.size(), 6u);
  EXPECT_EQ(from_elf, from_ptx);
  std::vector<wh::fatbin::ParamInfo> sgd = {{0, 8}, {8, 8}, {16, 8}, {24, 4}, {28, 4}, {32, 4}, {36, 4}};
  EXPECT_EQ(from_elf["sgd_momentum"], sgd);
  // via the registration wrapper, with only a pointer (size from the header)
  struct { int magic, version; const void* data; void* f; } w{0x466243b1, 1, bin.data(), nullptr};
  std::vector<wh::fatbin::Entry> ents2;
  ASSERT_TRUE(wh::fatbin::parse(&w, SIZE_MAX, ents2, &err)) << err;
  EXPECT_EQ(ents2.size(), ents.size());
  EXPECT_EQ(wh::fatbin::fatbin_size(&w), bin.size());
}

TEST(Fatbin, TruncatedOrCorruptInputIsRejected) {
  std::string bin = read_file(kernel_path("misc", "fatbin"));
  ASSERT_FALSE(bin.empty());
  std::string err;
  std::vector<wh::fatbin::Entry> ents;
  for (size_t cut : {size_t(0), size_t(3), size_t(15), size_t(16), size_t(40), bin.size() / 2, bin.size() - 1}) {
    ents.clear();
    err.clear();
    EXPECT_FALSE(wh::fatbin::parse(bin.data(), cut, ents, &err)) << cut;
    EXPECT_FALSE(err.empty());
  }
  std::string bad = bin;
  bad[0] = 0;
  EXPECT_FALSE(wh::fatbin::parse(bad.data(), bad.size(), ents, &err));
  // corrupt the compressed PTX payload: zstd must fail cleanly
  bad = bin;
  size_t z = bad.find("\x28\xb5\x2f\xfd");
  ASSERT_NE(z, std::string::npos);
  for (size_t i = z + 8; i < z + 64 && i < bad.size(); ++i) bad[i] = char(~bad[i]);
  ents.clear();
  bool ok = wh::fatbin::parse(bad.data(), bad.size(), ents, &err);
  if (ok) {  // zstd may decode garbage: then the PTX parser must reject it cleanly
    for (auto& e : ents)
      if (e.kind == wh::fatbin::Entry::PTX) Module::from_ptx(std::string(e.bytes.begin(), e.bytes.end()), &err);
  }
  // SASS-only fatbin: a clear error from Module::from_fatbin
  std::string sass = bin;
  std::vector<wh::fatbin::Entry> all;
  ASSERT_TRUE(wh::fatbin::parse(bin.data(), bin.size(), all, &err));
  // flip the PTX entry kind (1) into an unknown kind so only SASS remains
  for (size_t off = 16; off + 64 <= sass.size();) {
    uint16_t kind;
    uint32_t hs;
    uint64_t sz;
    std::memcpy(&kind, &sass[off], 2);
    std::memcpy(&hs, &sass[off + 4], 4);
    std::memcpy(&sz, &sass[off + 8], 8);
    if (kind == 1) { uint16_t k = 0x40; std::memcpy(&sass[off], &k, 2); }
    off += hs + sz;
  }
  auto m = Module::from_fatbin(sass.data(), sass.size(), &err);
  EXPECT_FALSE(m);
  EXPECT_NE(err.find("no PTX"), std::string::npos) << err;
}

}  // namespace

namespace {
TEST(PtxParse, HandWrittenSeedParses) {
  std::string err;
  auto m = Module::from_ptx(read_file(std::string(WH_PTX_SOURCE_DIR) + "/fuzz_corpus/small.ptx"), &err);
  ASSERT_TRUE(m) << err;
  ASSERT_NE(m->kernel("k"), nullptr);
  std::vector<wh::fatbin::ParamInfo> want = {{0, 8}, {8, 16}, {24, 4}};
  EXPECT_EQ(m->kernel("k")->params, want);
  EXPECT_EQ(m->globals().size(), 2u);
}

// `.ptr .align N` on a pointer parameter is the pointee's alignment (CUB's
// kernels: `.param .u64 .ptr .align 1 p`): the parameter stays 8-aligned, in
// the engine and in the guest's reading of the same PTX, as in the cubin.
TEST(PtxParse, PtrAlignIsThePointeesAlignment) {
  const std::string params =
      ".param .u32 a, .param .u8 b, .param .u64 .ptr .align 1 p, .param .u64 .ptr .global .align 16 q, "
      ".param .align 8 .b8 s[16]";
  std::string err;
  auto m = Module::from_ptx(wrap("  ret;", params), &err);
  ASSERT_TRUE(m) << err;
  std::vector<wh::fatbin::ParamInfo> want = {{0, 4}, {4, 1}, {8, 8}, {16, 8}, {24, 16}};
  EXPECT_EQ(m->kernel("k")->params, want);
  std::map<std::string, std::vector<wh::fatbin::ParamInfo>> guest;
  ASSERT_TRUE(wh::fatbin::ptx_kernel_params(wrap("  ret;", params), guest, &err)) << err;
  EXPECT_EQ(guest["k"], want);
}

// The register estimate lets one block of the kernel's largest size fit
// the SM's 64K registers, as ptxas allocates under .maxntid: CUB sizes its
// grids by the occupancy API and divides by it (0 blocks per SM crashed it).
TEST(PtxParse, RegisterEstimateFitsTheLargestBlock) {
  auto src = [](const std::string& dirs) {
    return ".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k()" + dirs +
           "\n{\n  .reg .b64 %rd<600>;\n  ret;\n}\n";
  };
  std::string err;
  for (auto [dirs, threads] : {std::pair<std::string, int>{"", 1024}, {" .maxntid 640", 640}, {" .maxntid 128, 1, 1", 128}}) {
    auto m = Module::from_ptx(src(dirs), &err);
    ASSERT_TRUE(m) << err;
    const auto* k = m->kernel("k");
    EXPECT_EQ(k->max_threads_per_block, threads) << dirs;
    EXPECT_LE(k->num_regs, 255) << dirs;
    EXPECT_GE(65536 / (k->num_regs * ((threads + 31) / 32 * 32)), 1) << dirs << ": " << k->num_regs << " registers";
  }
}

// Library PTX (cuBLAS's, for one) loads through an L2 cache policy: createpolicy makes an
// opaque 64-bit value and ld/st .L2::cache_hint take it as a third operand.
TEST(PtxParse, L2CacheHintOperandsAreAccepted) {
  std::string body =
      "  .reg .b32 %r<4>;\n  .reg .f32 %f<3>;\n  .reg .b64 %rd<8>;\n"
      "  ld.param.u64 %rd1, [in];\n  ld.param.u64 %rd2, [out];\n"
      "  mov.u32 %r1, %tid.x;\n  mul.wide.u32 %rd3, %r1, 4;\n"
      "  add.s64 %rd4, %rd1, %rd3;\n  add.s64 %rd5, %rd2, %rd3;\n"
      "  createpolicy.fractional.L2::evict_last.b64 %rd6, 1.0;\n"
      "  createpolicy.fractional.L2::evict_first.L2::evict_unchanged.b64 %rd7, 0.5;\n"
      "  ld.global.L2::cache_hint.f32 %f1, [%rd4], %rd6;\n"
      "  add.f32 %f2, %f1, %f1;\n"
      "  st.global.L2::cache_hint.f32 [%rd5], %f2, %rd7;\n  ret;";
  std::string err;
  auto m = Module::from_ptx(wrap(body, ".param .u64 in, .param .u64 out"), &err);
  ASSERT_TRUE(m) << err;
  HostMem mem;
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[size_t(i)] = float(i) + 0.25f;
  uint64_t din = mem.upload(x), dout = mem.alloc(32 * 4);
  Engine eng(1);
  uint64_t p[2] = {din, dout};
  auto e = eng.launch(*m, "k", cfg({1}, {32}), p, sizeof p, mem);
  ASSERT_EQ(e.kind, LaunchError::None) << e.message;
  auto o = mem.download<float>(dout, 32);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(o[size_t(i)], 2 * x[size_t(i)]) << i;
  // Without the hint modifier a third operand is still an error.
  auto bad = Module::from_ptx(wrap("  .reg .f32 %f1;\n  .reg .b64 %rd<3>;\n  ld.global.f32 %f1, [%rd1], %rd2;"), &err);
  EXPECT_FALSE(bad);
  EXPECT_NE(err.find("ld expects 2 operands, got 3"), std::string::npos) << err;
}

// griddepcontrol (cudaGridDependencySynchronize,
// cudaTriggerProgrammaticLaunchCompletion): kernels start after the previous
// kernel ended, so both forms pass through; other forms are errors.
TEST(PtxParse, GridDependencyControl) {
  std::string body =
      "  .reg .b32 %r<3>;\n  .reg .b64 %rd<4>;\n"
      "  griddepcontrol.launch_dependents;\n"
      "  ld.param.u64 %rd1, [out];\n  mov.u32 %r1, %tid.x;\n  mul.wide.u32 %rd2, %r1, 4;\n"
      "  add.s64 %rd3, %rd1, %rd2;\n"
      "  griddepcontrol.wait;\n"
      "  add.u32 %r2, %r1, 5;\n  st.global.u32 [%rd3], %r2;\n  ret;";
  std::string err;
  auto m = Module::from_ptx(".version 7.8\n.target sm_90\n.address_size 64\n.visible .entry k(.param .u64 out)\n{\n" +
                                body + "\n}\n",
                            &err);
  ASSERT_TRUE(m) << err;
  HostMem mem;
  uint64_t dout = mem.alloc(64 * 4);
  Engine eng(1);
  auto e = eng.launch(*m, "k", cfg({1}, {64}), &dout, sizeof dout, mem);
  ASSERT_EQ(e.kind, LaunchError::None) << e.message;
  auto o = mem.download<uint32_t>(dout, 64);
  for (uint32_t i = 0; i < 64; ++i) EXPECT_EQ(o[i], i + 5) << i;
  for (const char* bad : {"  griddepcontrol;", "  griddepcontrol.sync;", "  griddepcontrol.wait.launch_dependents;",
                          "  .reg .b32 %r1;\n  griddepcontrol.wait %r1;"}) {
    EXPECT_FALSE(Module::from_ptx(wrap(bad), &err)) << bad;
    EXPECT_NE(err.find("griddepcontrol"), std::string::npos) << err;
  }
}

}  // namespace
