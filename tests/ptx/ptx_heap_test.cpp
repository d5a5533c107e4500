// Device-side heap: malloc/free and new/delete in kernels, through DeviceMemory's
// device_malloc/device_free (here a small bump allocator; the sim backend has its own).
#include <set>

#include "ptx_test_util.hpp"

using namespace whtest;
using wh::ptx::Engine;
using wh::ptx::LaunchError;
using wh::ptx::Module;

namespace {

class PtxHeap : public ::testing::TestWithParam<bool> {
 protected:
  Module& mod() {
    if (!m_) {
      std::string err;
      m_ = load_module("heap", GetParam(), &err);
      if (!m_) throw std::runtime_error("module load failed: " + err);
    }
    return *m_;
  }
  LaunchError run(HeapMem& mem, const char* k, uint32_t g, uint32_t b, const Args& a) {
    return eng.launch(mod(), k, cfg({g}, {b}), a.data(), a.size(), mem);
  }
  Args args(const char* k) { return Args(mod().kernel(k)); }
  Engine eng{2};
  std::unique_ptr<Module> m_;
};

#define EXPECT_OK(e) EXPECT_EQ((e).kind, LaunchError::None) << (e).message

TEST_P(PtxHeap, KernelInfoSaysWhoUsesTheHeap) {
  EXPECT_TRUE(mod().kernel("heap_alloc")->uses_heap);
  EXPECT_TRUE(mod().kernel("heap_sum_free")->uses_heap);
  EXPECT_TRUE(mod().kernel("heap_new_delete")->uses_heap);
}

TEST_P(PtxHeap, MallocPerThreadFreedInALaterLaunch) {
  HeapMem mem(1 << 20);
  const int nt = 300, n = 17;
  uint64_t ptrs = mem.alloc(nt * 8), sums = mem.alloc(nt * 8);
  EXPECT_OK(run(mem, "heap_alloc", 3, 128, args("heap_alloc")(ptrs)(n)(nt)));
  EXPECT_EQ(mem.live(), size_t(nt));
  auto p = mem.download<uint64_t>(ptrs, nt);
  std::set<uint64_t> distinct(p.begin(), p.end());
  EXPECT_EQ(distinct.size(), size_t(nt));
  for (uint64_t a : p) EXPECT_EQ(a % 16, 0u);
  EXPECT_OK(run(mem, "heap_sum_free", 3, 128, args("heap_sum_free")(ptrs)(n)(nt)(sums)));
  auto s = mem.download<int64_t>(sums, nt);
  for (int i = 0; i < nt; ++i) ASSERT_EQ(s[i], int64_t(i) * 1000 * n + n * (n - 1) / 2) << i;
  EXPECT_EQ(mem.live(), 0u);
}

TEST_P(PtxHeap, NewDeleteStructAndArray) {
  HeapMem mem(1 << 20);
  uint64_t out = mem.alloc(64 * 8);
  EXPECT_OK(run(mem, "heap_new_delete", 1, 64, args("heap_new_delete")(out)));
  auto o = mem.download<double>(out, 64);
  for (int i = 0; i < 64; ++i) {
    int s = 0;
    for (int k = 0; k < i + 3; ++k) s += k * i;
    double v = (2.0 + (i + 1)) + (1.5 * i + i);
    ASSERT_EQ(o[i], v + s) << i;
  }
  EXPECT_EQ(mem.mallocs, 64u * 3);
  EXPECT_EQ(mem.frees, 64u * 3);
  EXPECT_EQ(mem.live(), 0u);
}

TEST_P(PtxHeap, ExhaustionReturnsNull) {
  // 4 KiB of heap: 10 threads x 400 ints (1600 B) leaves room for two.
  HeapMem mem(4096);
  const int nt = 10, n = 400;
  uint64_t ptrs = mem.alloc(nt * 8), sums = mem.alloc(nt * 8);
  EXPECT_OK(run(mem, "heap_alloc", 1, 32, args("heap_alloc")(ptrs)(n)(nt)));
  auto p = mem.download<uint64_t>(ptrs, nt);
  EXPECT_EQ(std::count_if(p.begin(), p.end(), [](uint64_t a) { return a != 0; }), 2);
  EXPECT_OK(run(mem, "heap_sum_free", 1, 32, args("heap_sum_free")(ptrs)(n)(nt)(sums)));
  auto s = mem.download<int64_t>(sums, nt);
  EXPECT_EQ(std::count(s.begin(), s.end(), -1), nt - 2);
}

TEST_P(PtxHeap, BadFreeTraps) {
  HeapMem mem(4096);
  uint64_t buf = mem.alloc(64);
  auto e = run(mem, "heap_bad_free", 1, 32, args("heap_bad_free")(buf));
  EXPECT_EQ(e.kind, LaunchError::Trap);
  EXPECT_NE(e.message.find("kernel heap_bad_free"), std::string::npos) << e.message;
  char want[64];
  snprintf(want, sizeof want, "free() of address 0x%llx", (unsigned long long)(buf + 8));
  EXPECT_NE(e.message.find(want), std::string::npos) << e.message;
}

TEST_P(PtxHeap, WithoutAHeapMallocReturnsNull) {
  HostMem mem;  // DeviceMemory's default: no heap
  const int nt = 4;
  uint64_t ptrs = mem.alloc(nt * 8);
  std::vector<uint64_t> junk(nt, 77);
  std::memcpy(mem.translate(ptrs, nt * 8, true), junk.data(), nt * 8);
  Args a(mod().kernel("heap_alloc"));
  a(ptrs)(4)(nt);
  auto e = eng.launch(mod(), "heap_alloc", cfg({1}, {32}), a.data(), a.size(), mem);
  EXPECT_OK(e);
  for (uint64_t v : mem.download<uint64_t>(ptrs, nt)) EXPECT_EQ(v, 0u);
}

INSTANTIATE_TEST_SUITE_P(Loaders, PtxHeap, ::testing::Values(false, true),
                         [](const auto& i) { return i.param ? std::string("fatbin") : std::string("ptx"); });

}  // namespace
