// Helpers for the PTX interpreter tests: a host-backed DeviceMemory, module loading
// (plain PTX or the default compressed fatbin), parameter packing.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "wormhole/ptx/engine.hpp"

namespace whtest {

inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline std::string kernel_path(const std::string& base, const std::string& ext) {
  return std::string(WH_PTX_KERNEL_DIR) + "/" + base + "." + ext;
}

class HostMem : public wh::ptx::DeviceMemory {
 public:
  uint64_t alloc(size_t n) {
    std::lock_guard lk(mu_);
    uint64_t base = next_;
    next_ += ((n + 255) & ~size_t(255)) + 4096;  // guard gap between allocations
    allocs_[base].assign(n, 0);
    return base;
  }
  template <class T>
  uint64_t upload(const std::vector<T>& v) {
    uint64_t a = alloc(v.size() * sizeof(T));
    if (!v.empty()) std::memcpy(allocs_[a].data(), v.data(), v.size() * sizeof(T));
    return a;
  }
  template <class T>
  std::vector<T> download(uint64_t a, size_t n) {
    std::vector<T> v(n);
    uint8_t* p = translate(a, n * sizeof(T), false);
    EXPECT_NE(p, nullptr);
    if (p && n) std::memcpy(v.data(), p, n * sizeof(T));
    return v;
  }
  uint8_t* translate(uint64_t addr, uint64_t len, bool) override {
    std::lock_guard lk(mu_);
    auto it = allocs_.upper_bound(addr);
    if (it == allocs_.begin()) return nullptr;
    --it;
    uint64_t off = addr - it->first;
    if (off > it->second.size() || len > it->second.size() - off) return nullptr;
    ++translations;
    return it->second.data() + off;
  }
  bool writable_regions(std::vector<Region>& out) override {
    std::lock_guard lk(mu_);
    for (auto& [base, bytes] : allocs_) out.push_back({base, bytes.size(), bytes.data(), true});
    return true;
  }
  bool region(uint64_t addr, Region& r) override {
    if (!use_regions) return false;
    std::lock_guard lk(mu_);
    auto it = allocs_.upper_bound(addr);
    if (it == allocs_.begin()) return false;
    --it;
    if (addr - it->first >= it->second.size()) return false;
    r.base = it->first;
    r.size = it->second.size();
    r.host = it->second.data();
    r.writable = true;
    return true;
  }
  bool use_regions = true;
  std::atomic<uint64_t> translations{0};

 private:
  std::mutex mu_;
  std::map<uint64_t, std::vector<uint8_t>> allocs_;
  uint64_t next_ = 0x7000'0000'0000ull;
};

// A device heap for kernels' malloc/free and new/delete: a bump allocator
// over one allocation that counts live blocks (the sim backend has its own).
class HeapMem : public HostMem {
 public:
  explicit HeapMem(uint64_t heap_bytes) : size_(heap_bytes) { base_ = next_ = alloc(heap_bytes); }
  uint64_t device_malloc(uint64_t n) override {
    std::lock_guard lk(mu_);
    n = (n + 15) & ~uint64_t(15);
    if (n > size_ - (next_ - base_)) return 0;
    uint64_t a = next_;
    next_ += n;
    live_.insert(a);
    ++mallocs;
    return a;
  }
  bool device_free(uint64_t a) override {
    std::lock_guard lk(mu_);
    ++frees;
    return live_.erase(a) == 1;
  }
  size_t live() {
    std::lock_guard lk(mu_);
    return live_.size();
  }
  uint64_t mallocs = 0, frees = 0;

 private:
  std::mutex mu_;
  uint64_t base_, next_, size_;
  std::set<uint64_t> live_;
};

// Allocates, binds and initialises every module global (initializers that
// hold other variables' addresses once all are bound), as a backend does.
inline void bind_globals(wh::ptx::Module& m, HostMem& mem) {
  std::vector<uint64_t> at;
  for (auto& g : m.globals()) {
    at.push_back(mem.alloc(std::max<size_t>(g.init.size(), 1)));
    ASSERT_TRUE(m.bind_global(g.name, at.back()));
  }
  for (size_t i = 0; i < m.globals().size(); ++i) {
    const auto& g = m.globals()[i];
    if (g.init.empty()) continue;
    uint8_t* p = mem.translate(at[i], g.init.size(), true);
    ASSERT_NE(p, nullptr);
    std::memcpy(p, g.init.data(), g.init.size());
    ASSERT_TRUE(m.apply_relocs(g, p)) << g.name;
  }
}

inline std::unique_ptr<wh::ptx::Module> load_module(const std::string& base, bool fatbin, std::string* err) {
  if (fatbin) {
    std::string bin = read_file(kernel_path(base, "fatbin"));
    if (bin.empty()) { *err = "missing fatbin"; return nullptr; }
    // as the runtime sees it: the registration wrapper pointing at the fatbin
    struct { int magic, version; const void* data; void* filename; } wrapper{0x466243b1, 1, bin.data(), nullptr};
    return wh::ptx::Module::from_fatbin(&wrapper, sizeof wrapper, err);
  }
  std::string ptx = read_file(kernel_path(base, "ptx"));
  if (ptx.empty()) { *err = "missing ptx"; return nullptr; }
  return wh::ptx::Module::from_ptx(ptx, err);
}

// Packs arguments at the offsets the kernel declares; checks sizes.
class Args {
 public:
  explicit Args(const wh::ptx::KernelInfo* k) : k_(k), buf_(k ? k->param_bytes : 0) {}
  template <class T>
  Args& operator()(const T& v) {
    EXPECT_LT(i_, k_->params.size()) << "too many arguments";
    if (i_ >= k_->params.size()) return *this;
    EXPECT_EQ(k_->params[i_].size, sizeof(T)) << "argument " << i_ << " size";
    std::memcpy(buf_.data() + k_->params[i_].offset, &v, std::min<size_t>(sizeof(T), k_->params[i_].size));
    ++i_;
    return *this;
  }
  const void* data() const { return buf_.data(); }
  size_t size() const { return buf_.size(); }

 private:
  const wh::ptx::KernelInfo* k_;
  std::vector<uint8_t> buf_;
  size_t i_ = 0;
};

inline wh::ptx::LaunchConfig cfg(wh::ptx::Dim3 g, wh::ptx::Dim3 b, uint32_t dyn = 0) {
  wh::ptx::LaunchConfig c;
  c.grid = g;
  c.block = b;
  c.dynamic_shared_bytes = dyn;
  return c;
}

// Loads `ptx` and launches its kernel k(.param .u64 p) on one warp, p pointing
// at `bytes` of memory: *e gets the launch's result (wrap in ASSERT_NO_FATAL_FAILURE).
inline void launch_warp_k(const std::string& ptx, size_t bytes, wh::ptx::LaunchError* e) {
  std::string err;
  auto m = wh::ptx::Module::from_ptx(ptx, &err);
  ASSERT_TRUE(m) << err;
  HostMem mem;
  wh::ptx::Engine eng(1);
  Args a(m->kernel("k"));
  a(mem.alloc(bytes));
  *e = eng.launch(*m, "k", cfg({1}, {32}), a.data(), a.size(), mem);
}

inline uint32_t fbits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
// distance in units in the last place between two finite floats
inline int64_t ulp_diff(float a, float b) {
  if (a == b) return 0;
  if (std::isnan(a) || std::isnan(b)) return INT64_MAX;
  auto ord = [](float f) { int32_t i; std::memcpy(&i, &f, 4); return i < 0 ? int64_t(INT32_MIN) - i : int64_t(i); };
  int64_t d = ord(a) - ord(b);
  return d < 0 ? -d : d;
}

}  // namespace whtest
