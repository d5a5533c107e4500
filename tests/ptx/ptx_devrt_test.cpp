// Dynamic parallelism at the engine level: kernels/devrt.cu (built with
// -rdc=true, plain PTX and fatbin), and the linker leaving libcudadevrt's unit out.
#include "ptx_test_util.hpp"

using namespace whtest;
using wh::ptx::Engine;
using wh::ptx::LaunchConfig;
using wh::ptx::LaunchError;
using wh::ptx::Module;

namespace {

#define EXPECT_OK(e) EXPECT_EQ((e).kind, LaunchError::None) << (e).message

// cudaError_t values
constexpr int kInvalidValue = 1, kInvalidConfiguration = 9, kPendingCountExceeded = 69, kInvalidDeviceFunction = 98,
              kInvalidResourceHandle = 400;

class PtxDevrt : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    std::string err;
    m_ = load_module("devrt", GetParam(), &err);
    ASSERT_TRUE(m_) << err;
    for (auto& g : m_->globals()) {  // none holds another variable's address
      uint64_t a = mem_.upload(g.init);
      ASSERT_TRUE(m_->bind_global(g.name, a));
      if (g.name == "seq") seq_ = a;
    }
    ASSERT_NE(seq_, 0u);
    res_ = mem_.alloc(64 * 4);
    out_ = mem_.alloc(256 * 4);
  }
  // res and out to -1, the launch counter to 0
  void reset() {
    std::vector<int32_t> r(64, -1), o(256, -1);
    std::memcpy(mem_.translate(res_, 256, true), r.data(), 256);
    std::memcpy(mem_.translate(out_, 1024, true), o.data(), 1024);
    std::memset(mem_.translate(seq_, 4, true), 0, 4);
  }
  LaunchError hostile(int mode, Engine& eng, LaunchConfig c = cfg({1}, {1})) {
    reset();
    Args a(m_->kernel("hostile"));
    a(res_)(mode)(out_);
    return eng.launch(*m_, "hostile", c, a.data(), a.size(), mem_);
  }
  std::vector<int32_t> res(size_t n) { return mem_.download<int32_t>(res_, n); }
  std::vector<int32_t> out(size_t n) { return mem_.download<int32_t>(out_, n); }
  HeapMem mem_{1 << 20};
  Engine eng_{2};
  std::unique_ptr<Module> m_;
  uint64_t res_ = 0, out_ = 0, seq_ = 0;
};

TEST_P(PtxDevrt, EveryThreadLaunchesAChildInOrder) {
  reset();
  Args a(m_->kernel("fanout"));
  a(out_)(res_);
  EXPECT_OK(eng_.launch(*m_, "fanout", cfg({1}, {64}), a.data(), a.size(), mem_));
  auto o = out(64), r = res(64);
  for (int t = 0; t < 64; ++t) {
    EXPECT_EQ(r[t], 0) << "thread " << t;
    EXPECT_EQ(o[t], t) << "launch " << t << " ran out of order";
  }
}

TEST_P(PtxDevrt, ParameterBufferCallsWrittenOut) {
  reset();
  Args a(m_->kernel("explicit_calls"));
  a(out_)(res_);
  EXPECT_OK(eng_.launch(*m_, "explicit_calls", cfg({1}, {1}), a.data(), a.size(), mem_));
  auto r = res(4), o = out(3);
  EXPECT_EQ(r, (std::vector<int32_t>{1, 0, 1, 0}));
  EXPECT_EQ(o[0], 7);
  EXPECT_EQ(o[1], 8);
  EXPECT_EQ(o[2], -1);  // each child records once
}

TEST_P(PtxDevrt, LaunchesOfWhatIsNotAKernelOrNotAShapeAreRefused) {
  EXPECT_OK(hostile(0, eng_));
  EXPECT_EQ(res(6), (std::vector<int32_t>{1, kInvalidDeviceFunction, 1, kInvalidDeviceFunction, 1, kInvalidDeviceFunction}));
  EXPECT_OK(hostile(1, eng_));
  EXPECT_EQ(res(8), (std::vector<int32_t>{1, kInvalidConfiguration, 1, kInvalidConfiguration, 1, kInvalidConfiguration, 1,
                                          kInvalidConfiguration}));
  EXPECT_EQ(out(1)[0], -1);  // nothing ran
}

TEST_P(PtxDevrt, ParameterBuffersAreBoundedAndLaunchedOnce) {
  LaunchError e = hostile(2, eng_);
  EXPECT_EQ(e.kind, LaunchError::BadAccess) << e.message;
  EXPECT_NE(e.message.find("kernel hostile: invalid generic write of 4 bytes"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("not inside a parameter buffer"), std::string::npos) << e.message;
  EXPECT_OK(hostile(3, eng_));
  EXPECT_EQ(res(5), (std::vector<int32_t>{kInvalidValue, kInvalidValue, 0, kInvalidValue, kInvalidValue}));
  EXPECT_EQ(out(2), (std::vector<int32_t>{0, -1}));  // the one good launch ran (child's v is 0)
  e = hostile(4, eng_);
  EXPECT_EQ(e.kind, LaunchError::BadAccess) << e.message;
  EXPECT_NE(e.message.find("not launched yet"), std::string::npos) << e.message;
  EXPECT_OK(hostile(5, eng_));
  EXPECT_EQ(res(5), (std::vector<int32_t>{1, kInvalidValue, 1, kInvalidValue, kInvalidValue}));
}

TEST_P(PtxDevrt, StreamsAndEventsBelongToTheirBlock) {
  Engine one(1);  // block 0 runs to its end before block 1 starts
  EXPECT_OK(hostile(6, one, cfg({2}, {1})));
  auto r = res(5);
  EXPECT_EQ(r[0], 0);
  EXPECT_EQ(r[1], 0);
  EXPECT_EQ(r[2], kInvalidResourceHandle);
  EXPECT_EQ(r[3], kInvalidValue);
  EXPECT_EQ(r[4], kInvalidResourceHandle);
  EXPECT_EQ(out(2), (std::vector<int32_t>{1, -1}));
}

TEST_P(PtxDevrt, AChildsFaultFailsTheLaunchNamingBoth) {
  LaunchError e = hostile(7, eng_);
  EXPECT_EQ(e.kind, LaunchError::BadAccess) << e.message;
  EXPECT_NE(e.message.find("kernel child_oob: invalid"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("(a grid launched from the device by kernel hostile, nesting depth 1)"), std::string::npos)
      << e.message;
  // The watchdog covers the grids a launch leads to.
  LaunchConfig c = cfg({1}, {1});
  c.timeout_ms = 300;
  Args a(m_->kernel("hostile"));
  a(res_)(8)(out_);
  std::memset(mem_.translate(out_, 4, true), 0, 4);
  e = eng_.launch(*m_, "hostile", c, a.data(), a.size(), mem_);
  EXPECT_EQ(e.kind, LaunchError::Timeout) << e.message;
  EXPECT_NE(e.message.find("child_spin"), std::string::npos) << e.message;
  EXPECT_OK(hostile(0, eng_));  // the engine goes on
}

TEST_P(PtxDevrt, PendingLaunchLimit) {
  LaunchConfig c = cfg({1}, {1});
  c.pending_launch_limit = 4;
  EXPECT_OK(hostile(9, eng_, c));
  EXPECT_EQ(res(6), (std::vector<int32_t>{0, 0, 0, 0, kPendingCountExceeded, kPendingCountExceeded}));
  EXPECT_EQ(out(5), (std::vector<int32_t>{0, 1, 2, 3, -1}));  // tail launches, in order
}

TEST_P(PtxDevrt, ALauncherNeedsTheHeapItsChildrenUse) {
  EXPECT_TRUE(m_->kernel("launches_heap_user")->uses_heap);
  reset();
  Args a(m_->kernel("launches_heap_user"));
  a(out_);
  EXPECT_OK(eng_.launch(*m_, "launches_heap_user", cfg({1}, {1}), a.data(), a.size(), mem_));
  EXPECT_EQ(out(1)[0], 1);
}

INSTANTIATE_TEST_SUITE_P(PtxOrFatbin, PtxDevrt, ::testing::Values(false, true),
                         [](const auto& i) { return i.param ? "fatbin" : "ptx"; });

// libcudadevrt's unit (it calls the driver's __cuda_syscall_* functions) is
// left out of a link; the engine provides the runtime. A device-runtime
// function it does not provide fails only when called.
TEST(PtxDevrtLink, DeviceRuntimeUnitIsLeftOut) {
  const std::string head = ".version 8.0\n.target sm_75\n.address_size 64\n";
  const std::string devrt = head +
                            ".extern .func (.param .b32 r) cnpSetLastError(.param .b32 e);\n"
                            ".extern .func (.param .b32 r) __cuda_syscall_cnpv2GetLastError();\n"
                            ".visible .func (.param .b32 r) __cudaCDP2GetLastError()\n{\n .reg .b32 %r<2>;\n"
                            " { .param .b32 q; call.uni (q), __cuda_syscall_cnpv2GetLastError, (); ld.param.b32 %r1, [q]; }\n"
                            " st.param.b32 [r], %r1;\n ret;\n}\n";
  const std::string user = head +
                           ".extern .func (.param .b32 r) __cudaCDP2GetLastError();\n"
                           ".extern .func (.param .b32 r) __cudaCDP2MemsetAsync(.param .b64 p, .param .b32 v, "
                           ".param .b64 n, .param .b64 s);\n"
                           ".visible .entry ok(.param .u64 o)\n{\n .reg .b32 %r<2>;\n .reg .b64 %rd<2>;\n"
                           " { .param .b32 q; call.uni (q), __cudaCDP2GetLastError, (); ld.param.b32 %r1, [q]; }\n"
                           " ld.param.u64 %rd1, [o];\n st.global.u32 [%rd1], %r1;\n ret;\n}\n"
                           ".visible .entry memset(.param .u64 o)\n{\n .reg .b32 %r<2>;\n"
                           " { .param .b64 p; .param .b32 v; .param .b64 n; .param .b64 s; .param .b32 q;\n"
                           "   st.param.b64 [p], 0; st.param.b32 [v], 0; st.param.b64 [n], 0; st.param.b64 [s], 0;\n"
                           "   call.uni (q), __cudaCDP2MemsetAsync, (p, v, n, s); ld.param.b32 %r1, [q]; }\n ret;\n}\n";
  std::string err;
  auto m = Module::from_ptx_units({user, devrt}, &err);
  ASSERT_TRUE(m) << err;
  HostMem mem;
  Engine eng(1);
  uint64_t o = mem.alloc(4);
  *reinterpret_cast<int32_t*>(mem.translate(o, 4, true)) = -1;
  EXPECT_OK(eng.launch(*m, "ok", cfg({1}, {1}), &o, 8, mem));
  EXPECT_EQ(mem.download<int32_t>(o, 1)[0], 0);
  LaunchError e = eng.launch(*m, "memset", cfg({1}, {1}), &o, 8, mem);
  EXPECT_EQ(e.kind, LaunchError::Unsupported) << e.message;
  EXPECT_NE(e.message.find("__cudaCDP2MemsetAsync"), std::string::npos) << e.message;
  // Without the user's unit nothing is left to link.
  EXPECT_FALSE(Module::from_ptx_units({devrt, devrt}, &err));
  EXPECT_NE(err.find("device runtime"), std::string::npos) << err;
  // A device-runtime function declared with other parameters than CUDA's.
  const std::string wrong = head + ".extern .func (.param .b32 r) __cudaCDP2GetDevice(.param .b32 d);\n"
                                   ".visible .entry k()\n{\n .reg .b32 %r<2>;\n"
                                   " { .param .b32 d; .param .b32 q; st.param.b32 [d], 0;\n"
                                   "   call.uni (q), __cudaCDP2GetDevice, (d); ld.param.b32 %r1, [q]; }\n ret;\n}\n";
  EXPECT_FALSE(Module::from_ptx(wrong, &err));
  EXPECT_NE(err.find("call to '__cudaCDP2GetDevice' with an unexpected signature"), std::string::npos) << err;
}

}  // namespace
