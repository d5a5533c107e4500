// Function pointers, virtual functions and address initializers: nvcc's
// kernels (kernels/virtual.cu, plain PTX and fatbin) and hand-written PTX for
// the forms nvcc rarely emits and for calls that must fail cleanly.
#include "ptx_test_util.hpp"

using namespace whtest;
using wh::ptx::Engine;
using wh::ptx::LaunchError;
using wh::ptx::Module;

namespace {

#define EXPECT_OK(e) EXPECT_EQ((e).kind, LaunchError::None) << (e).message

uint64_t init_u64(const Module& m, const std::string& name, size_t at = 0) {
  for (auto& g : m.globals())
    if (g.name == name && g.init.size() >= at + 8) {
      uint64_t v;
      std::memcpy(&v, g.init.data() + at, 8);
      return v;
    }
  ADD_FAILURE() << "no initializer " << name;
  return 0;
}
// The device address a bound variable got (bind_globals allocates them in order).
uint64_t addr_of(const Module& m, HostMem& mem, const std::vector<uint64_t>& at, const std::string& name) {
  for (size_t i = 0; i < m.globals().size(); ++i)
    if (m.globals()[i].name == name) return at[i];
  ADD_FAILURE() << "no variable " << name;
  return 0;
}
// bind_globals, remembering where each variable went.
std::vector<uint64_t> bind_all(Module& m, HostMem& mem) {
  std::vector<uint64_t> at;
  for (auto& g : m.globals()) {
    at.push_back(mem.alloc(std::max<size_t>(g.init.size(), 1)));
    EXPECT_TRUE(m.bind_global(g.name, at.back()));
  }
  for (size_t i = 0; i < m.globals().size(); ++i) {
    const auto& g = m.globals()[i];
    if (g.init.empty()) continue;
    uint8_t* p = mem.translate(at[i], g.init.size(), true);
    std::memcpy(p, g.init.data(), g.init.size());
    EXPECT_TRUE(m.apply_relocs(g, p)) << g.name;
  }
  return at;
}

class PtxVirtual : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    std::string err;
    m_ = load_module("virtual", GetParam(), &err);
    ASSERT_TRUE(m_) << err;
    at_ = bind_all(*m_, mem_);
  }
  LaunchError run(const char* k, uint32_t g, uint32_t b, const Args& a) {
    return eng_.launch(*m_, k, cfg({g}, {b}), a.data(), a.size(), mem_);
  }
  Args args(const char* k) { return Args(m_->kernel(k)); }
  HeapMem mem_{1 << 20};
  Engine eng_{2};
  std::unique_ptr<Module> m_;
  std::vector<uint64_t> at_;
};

TEST_P(PtxVirtual, ObjectsOfSeveralClassesInOneWarp) {
  const int n = 301;
  uint64_t objs = mem_.alloc(n * 8), area = mem_.alloc(n * 4);
  // Only the calls through the vtable reach free (the deleting destructors).
  EXPECT_TRUE(m_->kernel("vf_kill")->uses_heap);
  EXPECT_OK(run("vf_make", 3, 128, args("vf_make")(objs)(n)));
  const size_t made = mem_.live();
  EXPECT_EQ(made, size_t(n + n / 3 + (n % 3 == 2)));  // the Nested ones own one more
  EXPECT_OK(run("vf_use", 3, 128, args("vf_use")(objs)(area)(n)));
  auto a = mem_.download<int32_t>(area, n);
  for (int i = 0; i < n; ++i) {
    const int g = i % 4;
    int want = 0;
    if (i % 3 == 0) want = (i % 7 + 1 + g) * (3 + g);
    else if (i % 3 == 1) want = (i % 5 + 2 + 2 * g) * 4 / 2;
    else want = (2 + g) * (2 + g) + (i % 2 ? 6 : 1);
    EXPECT_EQ(a[i], want) << "object " << i;
  }
  EXPECT_OK(run("vf_kill", 3, 128, args("vf_kill")(objs)(n)));
  EXPECT_EQ(mem_.live(), 0u);  // Nested's destructor deleted its inner object through the vtable
}

TEST_P(PtxVirtual, FunctionPointerTableArgumentAndInitializers) {
  const int n = 100;
  std::vector<int32_t> which(n);
  for (int i = 0; i < n; ++i) which[i] = (i * 5 + i / 7) % 3;
  uint64_t w = mem_.upload(which), out = mem_.alloc(n * 4);
  EXPECT_OK(run("fp_table", 1, 128, args("fp_table")(w)(out)(n)));
  auto o = mem_.download<int32_t>(out, n);
  for (int i = 0; i < n; ++i) EXPECT_EQ(o[i], which[i] == 0 ? i + 3 : which[i] == 1 ? i - 3 : i * 3) << i;
  // A pointer as the host reads it from a variable (iops[2]), as an argument.
  const uint64_t mul = init_u64(*m_, "iops", 16);
  EXPECT_EQ(init_u64(*m_, "pair", 16), mul);
  EXPECT_OK(run("fp_arg", 1, 128, args("fp_arg")(mul)(out)(n)));
  o = mem_.download<int32_t>(out, n);
  for (int i = 0; i < n; ++i) EXPECT_EQ(o[i], i * 5) << i;
  // Variables holding variables' addresses: the bound address plus the offset.
  const uint64_t data = addr_of(*m_, mem_, at_, "data");
  EXPECT_EQ(mem_.download<uint64_t>(addr_of(*m_, mem_, at_, "data_ptr"), 1)[0], data + 8);
  EXPECT_EQ(mem_.download<uint64_t>(addr_of(*m_, mem_, at_, "pair"), 2)[1], data + 4);
  EXPECT_OK(run("fp_init", 1, 1, args("fp_init")(out)));
  o = mem_.download<int32_t>(out, 3);
  EXPECT_EQ(o[0], 30);
  EXPECT_EQ(o[1], 7 * 20);
  EXPECT_EQ(o[2], 9 - 4);
}

INSTANTIATE_TEST_SUITE_P(PtxOrFatbin, PtxVirtual, ::testing::Values(false, true),
                         [](const auto& i) { return i.param ? "fatbin" : "ptx"; });

// Hand-written: three functions behind a table, lanes of a warp taking
// different ones (lane % 4 == 3 skips the call by its guard), f_fact calling
// itself through the table; byte-wise (mask) initializers; a .calltargets list.
const char* kPtx = R"(.version 8.0
.target sm_75
.address_size 64
.extern .func (.param .b64 m_ret) malloc(.param .b64 m_n);
.func (.param .b32 r) f_add(.param .b32 a, .param .b32 b);
.func (.param .b32 r) f_mul(.param .b32 a, .param .b32 b);
.func (.param .b32 r) f_fact(.param .b32 a, .param .b32 b);
.func (.param .b32 r) f_wide(.param .b64 a);
.global .align 8 .u64 tab[3] = {f_add, f_mul, f_fact};
.global .align 1 .b8 bytes[9] = {7, 0xFF(generic(tab)+8), 0xFF00(generic(tab)+8), 0xFF0000(generic(tab)+8),
  0xFF000000(generic(tab)+8), 0xFF00000000(generic(tab)+8), 0xFF0000000000(generic(tab)+8),
  0xFF000000000000(generic(tab)+8), 0xFF00000000000000(generic(tab)+8)};
.global .align 8 .u64 selfp = tab;
.const .align 8 .u64 cp = generic(tab)+16;
.global .align 8 .u64 others[4] = {f_wide, kern, malloc, data_word};
.global .align 4 .u32 data_word = 5;
.func (.param .b32 r) f_add(.param .b32 a, .param .b32 b)
{
  .reg .b32 %r<4>;
  ld.param.u32 %r1, [a];
  ld.param.u32 %r2, [b];
  add.s32 %r3, %r1, %r2;
  st.param.b32 [r], %r3;
  ret;
}
.func (.param .b32 r) f_mul(.param .b32 a, .param .b32 b)
{
  .reg .b32 %r<4>;
  ld.param.u32 %r1, [a];
  ld.param.u32 %r2, [b];
  mul.lo.s32 %r3, %r1, %r2;
  st.param.b32 [r], %r3;
  ret;
}
.func (.param .b32 r) f_fact(.param .b32 a, .param .b32 b)
{
  .reg .b32 %r<6>;
  .reg .b64 %rd<2>;
  .reg .pred %p<2>;
  ld.param.u32 %r1, [a];
  and.b32 %r1, %r1, 7;
  mov.u32 %r5, 1;
  setp.le.u32 %p1, %r1, 1;
  @%p1 bra DONE;
  ld.global.u64 %rd1, [tab+16];
  {
    .param .b32 a1;
    .param .b32 b1;
    .param .b32 r1;
    sub.u32 %r2, %r1, 1;
    st.param.b32 [a1], %r2;
    st.param.b32 [b1], 0;
    fproto: .callprototype (.param .b32 _) _ (.param .b32 _, .param .b32 _);
    call (r1), %rd1, (a1, b1), fproto;
    ld.param.b32 %r3, [r1];
  }
  mul.lo.u32 %r5, %r3, %r1;
DONE:
  st.param.b32 [r], %r5;
  ret;
}
.func (.param .b32 r) f_wide(.param .b64 a)
{
  st.param.b32 [r], 1;
  ret;
}
.visible .entry kern(.param .u64 out)
{
  .reg .b32 %r<8>;
  .reg .b64 %rd<8>;
  .reg .pred %p<2>;
  ld.param.u64 %rd6, [out];
  mov.u32 %r1, %tid.x;
  and.b32 %r2, %r1, 3;
  setp.ne.u32 %p1, %r2, 3;
  min.u32 %r3, %r2, 2;
  mul.wide.u32 %rd1, %r3, 8;
  mov.u64 %rd2, tab;
  add.s64 %rd3, %rd2, %rd1;
  ld.global.u64 %rd4, [%rd3];
  mov.u32 %r5, 1000;
  {
    .param .b32 a;
    .param .b32 b;
    .param .b32 r;
    st.param.b32 [a], %r1;
    st.param.b32 [b], 3;
    proto: .callprototype (.param .b32 _) _ (.param .b32 _, .param .b32 _);
    @%p1 call (r), %rd4, (a, b), proto;
    @%p1 ld.param.b32 %r5, [r];
  }
  mul.wide.u32 %rd5, %r1, 4;
  add.s64 %rd7, %rd6, %rd5;
  st.global.u32 [%rd7], %r5;
  ret;
}
.visible .entry through(.param .u64 out, .param .u64 fp, .param .u32 targets)
{
  .reg .b32 %r<4>;
  .reg .b64 %rd<4>;
  .reg .pred %p<2>;
  ld.param.u64 %rd1, [out];
  ld.param.u64 %rd2, [fp];
  ld.param.u32 %r3, [targets];
  setp.ne.u32 %p1, %r3, 0;
  mov.u32 %r1, %tid.x;
  {
    .param .b32 a;
    .param .b32 b;
    .param .b32 r;
    st.param.b32 [a], %r1;
    st.param.b32 [b], 10;
    p2: .callprototype (.param .b32 _) _ (.param .b32 _, .param .b32 _);
    ct: .calltargets f_add, f_mul;
    @!%p1 call (r), %rd2, (a, b), p2;
    @%p1 call.uni (r), %rd2, (a, b), ct;
    ld.param.b32 %r2, [r];
  }
  mul.wide.u32 %rd3, %r1, 4;
  add.s64 %rd1, %rd1, %rd3;
  st.global.u32 [%rd1], %r2;
  ret;
}
)";

uint32_t fact(uint32_t n) {
  n &= 7;
  return n <= 1 ? 1 : n * fact(n - 1);
}

TEST(PtxIndirect, LanesCallDifferentTargetsAndRecurseThroughPointers) {
  std::string err;
  auto m = Module::from_ptx(kPtx, &err);
  ASSERT_TRUE(m) << err;
  HostMem mem;
  auto at = bind_all(*m, mem);
  Engine eng(2);
  const int n = 64;
  uint64_t out = mem.alloc(n * 4);
  Args a(m->kernel("kern"));
  a(out);
  EXPECT_OK(eng.launch(*m, "kern", cfg({1}, {n}), a.data(), a.size(), mem));
  auto o = mem.download<uint32_t>(out, n);
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t want = i % 4 == 0 ? i + 3 : i % 4 == 1 ? i * 3 : i % 4 == 2 ? fact(i) : 1000;
    EXPECT_EQ(o[i], want) << "lane " << i;
  }
  // Byte-wise and plain address initializers.
  const uint64_t tab = addr_of(*m, mem, at, "tab");
  auto b = mem.download<uint8_t>(addr_of(*m, mem, at, "bytes"), 9);
  uint64_t from_bytes = 0;
  std::memcpy(&from_bytes, b.data() + 1, 8);
  EXPECT_EQ(b[0], 7);
  EXPECT_EQ(from_bytes, tab + 8);
  EXPECT_EQ(mem.download<uint64_t>(addr_of(*m, mem, at, "selfp"), 1)[0], tab);
  EXPECT_EQ(mem.download<uint64_t>(addr_of(*m, mem, at, "cp"), 1)[0], tab + 16);
  EXPECT_EQ(mem.download<uint64_t>(addr_of(*m, mem, at, "others"), 4)[3], addr_of(*m, mem, at, "data_word"));
  // Through a pointer argument, and within a .calltargets list.
  for (uint32_t targets : {0u, 1u}) {
    Args t(m->kernel("through"));
    t(out)(init_u64(*m, "tab", 8))(targets);
    EXPECT_OK(eng.launch(*m, "through", cfg({1}, {n}), t.data(), t.size(), mem));
    o = mem.download<uint32_t>(out, n);
    for (uint32_t i = 0; i < n; ++i) EXPECT_EQ(o[i], i * 10) << i;
  }
}

// Calls through things that are not callable functions fail the launch with
// the kernel, the address or function, and the PTX line named; the engine
// runs the next launch normally.
TEST(PtxIndirect, BadTargetsFailTheLaunchCleanly) {
  std::string err;
  auto m = Module::from_ptx(kPtx, &err), other = Module::from_ptx(kPtx, &err);
  ASSERT_TRUE(m && other) << err;
  HostMem mem;
  auto at = bind_all(*m, mem);
  bind_all(*other, mem);
  Engine eng(2);
  uint64_t out = mem.alloc(64 * 4);
  auto call = [&](uint64_t fp, uint32_t targets) {
    Args t(m->kernel("through"));
    t(out)(fp)(targets);
    return eng.launch(*m, "through", cfg({1}, {32}), t.data(), t.size(), mem);
  };
  struct Case {
    uint64_t fp;
    uint32_t targets;
    LaunchError::Kind kind;
    std::string want;
  };
  const Case cases[] = {
      {0, 0, LaunchError::BadAccess, "indirect call to address 0x0, which is not a function"},
      {out, 0, LaunchError::BadAccess, "which is not a function"},
      {init_u64(*m, "others", 0) + 8, 0, LaunchError::BadAccess, "which is not a function"},
      {init_u64(*other, "tab", 0), 0, LaunchError::BadAccess, "not of this module"},
      {init_u64(*m, "others", 8), 0, LaunchError::BadAccess, "indirect call to kernel kern"},
      {init_u64(*m, "others", 16), 0, LaunchError::Unsupported, "built-in function 'malloc'"},
      {init_u64(*m, "others", 0), 0, LaunchError::Trap, "f_wide, whose parameters or results do not match the call's prototype p2"},
      {init_u64(*m, "tab", 16), 1, LaunchError::BadAccess, "f_fact, which is not in the call's .calltargets ct"},
  };
  for (const Case& c : cases) {
    LaunchError e = call(c.fp, c.targets);
    EXPECT_EQ(e.kind, c.kind) << e.message;
    EXPECT_NE(e.message.find(c.want), std::string::npos) << e.message;
    EXPECT_NE(e.message.find("kernel through"), std::string::npos) << e.message;
    EXPECT_NE(e.message.find("PTX line"), std::string::npos) << e.message;
  }
  EXPECT_OK(call(init_u64(*m, "tab", 0), 1));
  EXPECT_EQ(mem.download<uint32_t>(out, 32)[31], 41u);
}

TEST(PtxIndirect, MalformedAddressInitializersAndCallsAreLoadErrors) {
  const std::string head = ".version 8.0\n.target sm_75\n.address_size 64\n"
                           ".func (.param .b32 r) f(.param .b32 a)\n{\n st.param.b32 [r], 0;\n ret;\n}\n"
                           ".global .align 4 .u32 v[2];\n";
  auto entry = [&](const std::string& body) {
    return head + ".visible .entry k(.param .u64 p)\n{\n .reg .b64 %rd<2>;\n .reg .b32 %r<2>;\n" + body + " ret;\n}\n";
  };
  struct Case {
    std::string text, want;
  };
  const Case cases[] = {
      {head + ".global .u32 x = f;\n", "an address needs .u64"},
      {head + ".global .u64 x = nothere+8;\n", "unknown symbol 'nothere' in the initializer of 'x'"},
      {head + ".global .u64 x = generic(f);\n", "generic() of function 'f'"},
      {head + ".global .u8 x[8] = {0xF0(generic(v))};\n", "bad initializer mask"},
      {head + ".shared .align 8 .u64 s = v;\n", "allowed in .global and .const variables only"},
      {head + ".shared .align 8 .b8 sh[8];\n.global .u64 x = sh;\n", "the address of .shared variable 'sh'"},
      {entry(" { .param .b32 a; .param .b32 r; call (r), %rd1, (a), nope; }\n"), "unknown call prototype 'nope'"},
      {entry(" { .param .b32 a; .param .b32 r; call (r), %rd1, (a); }\n"), "without a .callprototype"},
      {entry(" { .param .b32 a; .param .b32 r; q: .callprototype (.param .b32 _) _ (.param .b32 _, .param .b32 _);\n"
             " call (r), %rd1, (a), q; }\n"),
       "different number of arguments than its prototype q"},
      {entry(" t: .calltargets f, k;\n"), "'k' in .calltargets is not a declared function"},
  };
  for (const Case& c : cases) {
    std::string err;
    EXPECT_FALSE(Module::from_ptx(c.text, &err)) << c.text;
    EXPECT_NE(err.find(c.want), std::string::npos) << "error: " << err << "\nfor:\n" << c.text;
    EXPECT_NE(err.find("PTX line"), std::string::npos) << err;
  }
}

}  // namespace
