// The compile cache: loads of the same PTX text by one tenant share one parsed
// module, and with it the compiled code of its kernels (JitState). A program
// run again, the ranks of a multi-process job, or the sessions of one user
// find their kernels parsed and, once any of them ran them long enough,
// compiled. Keyed by tenant and text (the text compared whole: a hash alone
// would let a crafted module collide with another's); never across tenants,
// so that one cannot learn from load times what another runs.
#include <deque>
#include <functional>
#include <mutex>
#include <unordered_map>

#include "internal.hpp"

namespace wh::ptx::detail {

namespace {

struct Entry {
  std::string tenant;
  std::weak_ptr<const ModuleImpl> mod;
};

struct Cache {
  std::mutex mu;
  std::unordered_multimap<uint64_t, Entry> by_key;
  // The most recently loaded modules, newest first, kept after their last
  // unload so that the next run of a program finds its compiled code.
  std::deque<std::shared_ptr<const ModuleImpl>> kept;
  uint64_t kept_bytes = 0;

  void keep(const std::shared_ptr<const ModuleImpl>& m) {
    for (auto it = kept.begin(); it != kept.end(); ++it)
      if (*it == m) {
        kept.erase(it);
        kept_bytes -= m->text.size();
        break;
      }
    kept.push_front(m);
    kept_bytes += m->text.size();
    while (kept.size() > kModulesKept || (kept.size() > 1 && kept_bytes > kModuleBytesKept)) {
      kept_bytes -= kept.back()->text.size();
      kept.pop_back();
    }
  }
  // The live module of this text and tenant, now the most recent; null if none.
  std::shared_ptr<const ModuleImpl> find(uint64_t key, std::string_view text, std::string_view tenant) {
    auto [lo, hi] = by_key.equal_range(key);
    for (auto it = lo; it != hi; ++it)
      if (auto m = it->second.mod.lock(); m && it->second.tenant == tenant && m->text == text) {
        keep(m);
        return m;
      }
    return nullptr;
  }
  void sweep() {
    for (auto it = by_key.begin(); it != by_key.end();) it = it->second.mod.expired() ? by_key.erase(it) : std::next(it);
  }
};

// Never destroyed: kept modules hold compiled code, which the code
// generator's (also never destroyed) JIT owns.
Cache& cache() {
  static auto* c = new Cache;
  return *c;
}

uint64_t key_of(std::string_view text, std::string_view tenant) {
  const uint64_t a = std::hash<std::string_view>{}(text), b = std::hash<std::string_view>{}(tenant);
  return a ^ (b + 0x9e3779b97f4a7c15ull + (a << 6) + (a >> 2));
}

}  // namespace

std::shared_ptr<const ModuleImpl> shared_module(std::string_view text, std::string_view tenant,
                                                std::shared_ptr<ModuleImpl> (*parse)(std::string_view, std::string*),
                                                std::string* err, bool* hit) {
  *hit = false;
  if (tenant.empty()) return parse(text, err);
  const uint64_t key = key_of(text, tenant);
  Cache& C = cache();
  {
    std::lock_guard lk(C.mu);
    if (auto m = C.find(key, text, tenant)) {
      *hit = true;
      return m;
    }
  }
  // Parsed outside the lock (large modules take a while); two loads racing
  // may both parse, and the first one in is the one shared.
  std::shared_ptr<const ModuleImpl> m = parse(text, err);
  if (!m) return nullptr;
  std::lock_guard lk(C.mu);
  if (auto o = C.find(key, text, tenant)) {
    *hit = true;
    return o;
  }
  C.sweep();
  C.by_key.emplace(key, Entry{std::string(tenant), m});
  C.keep(m);
  return m;
}

}  // namespace wh::ptx::detail
