// WORMHOLE_PTX_PERF=1 (docs/ptx.md, "Profiling"): the compiler names the code
// it makes for Linux perf through LLVM's jitdump file. A process of its own:
// the compiler reads the variable once, when it is first made, and uses
// another object linking layer for it.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ptx_test_util.hpp"

using namespace whtest;
using wh::ptx::Engine;
using wh::ptx::LaunchError;
using wh::ptx::Module;

namespace {

// Set before the compiler is made; the jitdump goes into a directory of this process's own.
struct PerfDir {
  std::string path;
  PerfDir() {
    char t[] = "/tmp/wh-jitdump-XXXXXX";
    if (mkdtemp(t)) path = t;
    setenv("WORMHOLE_PTX_JIT", "always", 1);
    setenv("WORMHOLE_PTX_PERF", "1", 1);
    setenv("JITDUMPDIR", path.c_str(), 1);
  }
  ~PerfDir() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
} perf_dir;

// out[i] = 2 * in[i] + 1
const char* kPtx = R"(.version 8.0
.target sm_80
.address_size 64
.visible .entry twice_plus_one(.param .u64 pin, .param .u64 pout, .param .u32 n)
{
  .reg .pred %p<2>;
  .reg .u32 %r<6>;
  .reg .u64 %rd<6>;
  .reg .f32 %f<3>;
  ld.param.u64 %rd0, [pin];
  ld.param.u64 %rd1, [pout];
  ld.param.u32 %r0, [n];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mad.lo.u32 %r4, %r2, %r3, %r1;
  setp.ge.u32 %p1, %r4, %r0;
  @%p1 bra DONE;
  mul.wide.u32 %rd2, %r4, 4;
  add.u64 %rd3, %rd0, %rd2;
  ld.global.f32 %f0, [%rd3];
  fma.rn.f32 %f1, %f0, 0f40000000, 0f3F800000;
  add.u64 %rd4, %rd1, %rd2;
  st.global.f32 [%rd4], %f1;
DONE:
  ret;
}
)";

}  // namespace

TEST(PtxPerf, TheCompiledKernelIsNamedInPerfsJitdump) {
  std::string err;
  auto m = Module::from_ptx(kPtx, &err);
  ASSERT_TRUE(m) << err;
  HostMem mem;
  Engine eng(1);
  const uint32_t n = 256;
  std::vector<float> in(n);
  for (uint32_t i = 0; i < n; ++i) in[i] = float(i) * 0.5f;
  const uint64_t din = mem.upload(in), dout = mem.alloc(n * 4);
  const auto before = wh::ptx::compile_stats();
  Args args(m->kernel("twice_plus_one"));
  args(din);
  args(dout);
  args(n);
  wh::ptx::LaunchConfig cfg;
  cfg.grid = {n / 128, 1, 1};
  cfg.block = {128, 1, 1};
  LaunchError e = eng.launch(*m, "twice_plus_one", cfg, args.data(), args.size(), mem);
  ASSERT_FALSE(e) << e.message;
  const auto out = mem.download<float>(dout, n);
  for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(out[i], 2.0f * in[i] + 1.0f) << i;
  EXPECT_EQ(wh::ptx::compile_stats().kernels, before.kernels + 1) << "the kernel was not compiled";
  std::string dumps;
  for (const auto& f : std::filesystem::recursive_directory_iterator(perf_dir.path))
    if (f.is_regular_file() && f.path().extension() == ".dump") {
      std::ifstream s(f.path(), std::ios::binary);
      std::stringstream ss;
      ss << s.rdbuf();
      dumps += ss.str();
    }
  ASSERT_FALSE(dumps.empty()) << "no jitdump file under " << perf_dir.path;
  EXPECT_EQ(dumps.compare(0, 4, "DTiJ"), 0) << "not a jitdump file";  // its magic, 'JiTD' little-endian
  EXPECT_NE(dumps.find("_f0"), std::string::npos) << "the kernel's code is not named in the jitdump";
}
