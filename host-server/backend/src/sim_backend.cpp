// The sim device: device memory is a per-session host heap with
// device-style addresses, kernels run on the PTX interpreter, everything
// executes in call order (so streams and events are trivially ordered, and
// events carry real host timestamps).
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "wormhole/proto/device_attrs.hpp"
#include "wormhole/proto/occupancy.hpp"
#include "wormhole/ptx/engine.hpp"
#include "wormhole/common/fatbin.hpp"
#include "wormhole/server/backend.hpp"
#include "wormhole/server/blas.hpp"
#include "wormhole/server/blaslt.hpp"
#include "wormhole/server/dnn.hpp"
#include "wormhole/server/fft.hpp"
#include "wormhole/server/rand.hpp"

namespace wh::server {

namespace {

using Clock = std::chrono::steady_clock;

// Each session's device addresses live in their own 1 TiB window, so a
// pointer of another session is never even a candidate for translation.
constexpr uint64_t kWindowShift = 40;
constexpr uint64_t kWindowBytes = uint64_t(1) << kWindowShift;
constexpr uint64_t kFirstWindow = 0x100;
constexpr uint64_t kWindows = 0xF000;  // windows recycle after 61440 sessions
constexpr uint64_t kAllocAlign = 256;  // cudaMalloc's alignment guarantee
// The top of each window belongs to mapped host memory (map_host); no
// allocation is ever placed there, whenever the mapping is made.
constexpr uint64_t kHostReserve = uint64_t(256) << 30;
constexpr uint64_t kArenaBytes = kWindowBytes - kHostReserve;

constexpr uint64_t round_up(uint64_t n, uint64_t a) { return (n + a - 1) & ~(a - 1); }

// Size classes, four per doubling (256 B granules up to 1 KiB): a class
// wastes at most a quarter. Used for host blocks and for pool blocks.
struct SizeClass {
  unsigned index;
  uint64_t bytes;
};
constexpr SizeClass size_class(uint64_t n) {
  if (n <= 1024) return {unsigned(n ? (n - 1) / 256 : 0), n ? round_up(n, 256) : 256};
  const unsigned lg = 63 - unsigned(__builtin_clzll(n - 1));  // 2^lg < n <= 2^(lg+1)
  const uint64_t step = uint64_t(1) << (lg - 2), bytes = round_up(n, step);
  return {4 + (lg - 10) * 4 + unsigned((bytes - (uint64_t(1) << lg)) / step) - 1, bytes};
}

// Host memory behind a context's device allocations. Blocks up to 1 MiB are
// carved, by size class, from 4 MiB slabs and kept on a per-class free list
// when freed, so a cudaMalloc/cudaFree loop makes no syscall; slabs total at
// most 64 MiB per context, which bounds what freed blocks keep resident.
// Larger blocks, and small ones past that budget, are mappings of their own
// (MAP_NORESERVE: untouched pages cost nothing), unmapped when freed. Blocks
// are reused only inside their context, so a session never sees another
// session's data; within a session a reused block is not cleared (as on a GPU).
class HostHeap {
 public:
  static constexpr uint64_t kSmallMax = 1 << 20, kSlabBytes = 4 << 20, kSlabBudget = 64 << 20;
  static constexpr unsigned kClasses = size_class(kSmallMax).index + 1;
  struct Block {
    uint8_t* p = nullptr;
    uint64_t cap = 0;
    int cls = -1;  // -1: a mapping of its own
  };
  HostHeap() = default;
  HostHeap(const HostHeap&) = delete;
  HostHeap& operator=(const HostHeap&) = delete;
  ~HostHeap() {
    for (auto [p, n] : slabs_) munmap(p, n);
  }
  bool get(uint64_t n, Block* b) {
    if (n <= kSmallMax) {
      const SizeClass c = size_class(n);
      auto& fl = free_[c.index];
      if (!fl.empty()) {
        *b = {fl.back(), c.bytes, int(c.index)};
        fl.pop_back();
        return true;
      }
      if (left_ < c.bytes && slab_total_ + kSlabBytes <= kSlabBudget) {
        void* p = mmap(nullptr, kSlabBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p != MAP_FAILED) {
          slabs_.emplace_back(static_cast<uint8_t*>(p), kSlabBytes);
          slab_total_ += kSlabBytes;
          cur_ = static_cast<uint8_t*>(p);  // the old slab's tail stays unused
          left_ = kSlabBytes;
        }
      }
      if (left_ >= c.bytes) {
        *b = {cur_, c.bytes, int(c.index)};
        cur_ += c.bytes;
        left_ -= c.bytes;
        return true;
      }
    }
    const uint64_t cap = round_up(n, 4096);
    void* p = mmap(nullptr, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return false;
    // Large device buffers in 2 MiB pages where the kernel offers them
    // (transparent huge pages "madvise"): a 4 KiB page fault per 4 KiB of a
    // gigabyte buffer's first touch cost seconds on small VMs.
    if (cap >= (uint64_t(8) << 20)) madvise(p, cap, MADV_HUGEPAGE);
    *b = {static_cast<uint8_t*>(p), cap, -1};
    return true;
  }
  void put(const Block& b) {
    if (b.cls < 0) munmap(b.p, b.cap);
    else free_[b.cls].push_back(b.p);
  }

 private:
  std::array<std::vector<uint8_t*>, kClasses> free_;
  std::vector<std::pair<uint8_t*, uint64_t>> slabs_;
  uint8_t* cur_ = nullptr;
  uint64_t left_ = 0, slab_total_ = 0;
};

// A context's device address space: best fit over coalesced free ranges.
// Freed ranges wait in a FIFO quarantine (up to 64 GiB or 16384 ranges)
// before they can be handed out again, and are all let go early only when
// nothing else fits: a stale pointer used soon after cudaFree keeps
// faulting instead of silently reaching a newer allocation, while address
// space is still reused, so allocate-and-free runs forever.
class AddressSpace {
 public:
  static constexpr uint64_t kQuarantineBytes = uint64_t(64) << 30;
  static constexpr size_t kQuarantineRanges = 16384;
  AddressSpace(uint64_t lo, uint64_t bytes) { insert(lo, bytes); }
  // 0 when no free range is large enough.
  uint64_t take(uint64_t n) {
    auto it = by_size_.lower_bound({n, 0});
    if (it == by_size_.end()) {
      if (quarantine_.empty()) return 0;
      while (!quarantine_.empty()) release_oldest();
      it = by_size_.lower_bound({n, 0});
      if (it == by_size_.end()) return 0;
    }
    const auto [size, addr] = *it;
    by_size_.erase(it);
    free_.erase(addr);
    if (size > n) insert(addr + n, size - n);
    return addr;
  }
  // [addr, addr + n) exactly (a restored session's allocation): false when
  // any of it is taken.
  bool take_at(uint64_t addr, uint64_t n) {
    auto it = free_.upper_bound(addr);
    if (it == free_.begin()) return false;
    --it;
    const auto [start, size] = *it;
    if (addr - start > size || n > size - (addr - start)) return false;
    by_size_.erase({size, start});
    free_.erase(it);
    if (addr > start) insert(start, addr - start);
    if (start + size > addr + n) insert(addr + n, start + size - (addr + n));
    return true;
  }
  void give_back(uint64_t addr, uint64_t n) {
    quarantine_.emplace_back(addr, n);
    quarantined_ += n;
    while (quarantined_ > kQuarantineBytes || quarantine_.size() > kQuarantineRanges) release_oldest();
  }

 private:
  void release_oldest() {
    auto [a, n] = quarantine_.front();
    quarantine_.pop_front();
    quarantined_ -= n;
    auto next = free_.lower_bound(a);
    if (next != free_.end() && a + n == next->first) {
      n += next->second;
      by_size_.erase({next->second, next->first});
      next = free_.erase(next);
    }
    if (next != free_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == a) {
        a = prev->first;
        n += prev->second;
        by_size_.erase({prev->second, prev->first});
        free_.erase(prev);
      }
    }
    insert(a, n);
  }
  void insert(uint64_t a, uint64_t n) {
    free_.emplace(a, n);
    by_size_.emplace(n, a);
  }
  std::map<uint64_t, uint64_t> free_;               // start -> bytes
  std::set<std::pair<uint64_t, uint64_t>> by_size_;  // (bytes, start)
  std::deque<std::pair<uint64_t, uint64_t>> quarantine_;
  uint64_t quarantined_ = 0;
};

// The modeled device (SimBackend::describe).
constexpr int kMajor = 8, kMinor = 0;
constexpr int kPciDomain = 0, kPciBus = 1, kPciDevice = 0;
constexpr int kPersistingL2Max = 30 << 20;

// The device-side heap (malloc/free in kernels): one device allocation of
// cudaLimitMallocHeapSize, carved first-fit with neighbours merged on free.
// Blocks of a launch run on several workers, hence the lock.
class DeviceHeap {
 public:
  static constexpr uint64_t kAlign = 16;  // what CUDA guarantees for malloc
  void init(uint64_t base, uint64_t bytes) {
    bytes = bytes & ~(kAlign - 1);
    if (bytes) free_.emplace(base, bytes);
  }
  uint64_t alloc(uint64_t n) {
    if (n > (uint64_t(1) << 62)) return 0;
    n = round_up(n, kAlign);
    std::lock_guard lk(mu_);
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second < n) continue;
      const uint64_t a = it->first, left = it->second - n;
      free_.erase(it);
      if (left) free_.emplace(a + n, left);
      live_.emplace(a, n);
      return a;
    }
    return 0;
  }
  void clear() {
    std::lock_guard lk(mu_);
    free_.clear();
    live_.clear();
  }
  std::vector<std::pair<uint64_t, uint64_t>> live() {
    std::lock_guard lk(mu_);
    return {live_.begin(), live_.end()};
  }
  // A heap at [base, base+bytes) holding exactly `live` (from a checkpoint:
  // every block checked to be aligned, inside and apart from the others).
  bool restore(uint64_t base, uint64_t bytes, const std::vector<std::pair<uint64_t, uint64_t>>& live) {
    bytes = bytes & ~(kAlign - 1);
    std::lock_guard lk(mu_);
    free_.clear();
    live_.clear();
    uint64_t at = base;  // the end of the last block
    for (const auto& [a, n] : live) {
      if (a % kAlign || !n || n % kAlign || a < at || a - base >= bytes || n > bytes - (a - base)) return false;
      if (a > at) free_.emplace(at, a - at);
      live_.emplace(a, n);
      at = a + n;
    }
    if (at < base + bytes) free_.emplace(at, base + bytes - at);
    return true;
  }
  bool release(uint64_t a) {
    std::lock_guard lk(mu_);
    auto l = live_.find(a);
    if (l == live_.end()) return false;
    uint64_t n = l->second;
    live_.erase(l);
    auto next = free_.lower_bound(a);
    if (next != free_.end() && next->first == a + n) {
      n += next->second;
      next = free_.erase(next);
    }
    if (next != free_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == a) {
        prev->second += n;
        return true;
      }
    }
    free_.emplace(a, n);
    return true;
  }

 private:
  std::mutex mu_;
  std::map<uint64_t, uint64_t> free_;  // address -> bytes
  std::map<uint64_t, uint64_t> live_;  // address -> bytes
};

struct SimStream : Stream {};
struct SimEvent : Event {
  bool recorded = false;
  Clock::time_point when{};
};
struct SimModule : Module {
  std::unique_ptr<ptx::Module> mod;
  std::vector<uint64_t> globals;  // device allocations holding globals
  std::map<std::string, std::pair<uint64_t, uint64_t>, std::less<>> symbols;  // name -> (dptr, size)
};
struct SimKernel : Kernel {
  const ptx::Module* mod = nullptr;
  std::string name;
};
// A stream-ordered pool: it reserves blocks of a size class (charged to the
// session's quota and the device while reserved, as a GPU pool's memory is
// unavailable to others) and keeps freed ones for reuse until trimmed or,
// at a synchronisation, until it holds no more than its release threshold.
// Work executes in call order, so a freed block is reusable at once.
struct SimPool : MemPool {
  struct Cached {
    uint64_t addr;
    HostHeap::Block host;
  };
  MemPoolProps props;
  uint64_t threshold = 0;
  uint64_t reuse[3] = {1, 1, 1};  // cudaMemPoolReuse*: recorded; every order is already satisfied
  uint64_t reserved = 0, reserved_high = 0, used = 0, used_high = 0;
  uint64_t live = 0;  // allocations out
  bool destroyed = false;  // dies when its last allocation is freed
  std::multimap<uint64_t, Cached> cache;  // block bytes -> freed block
};

// The address windows of live contexts: a restored session asks for its
// own, which must not be another's.
struct Windows {
  std::mutex mu;
  std::set<uint64_t> live;
  bool take(uint64_t w) {
    std::lock_guard lk(mu);
    return live.insert(w).second;
  }
  void give(uint64_t w) {
    std::lock_guard lk(mu);
    live.erase(w);
  }
};

class SimContext final : public Context, public ptx::DeviceMemory {
 public:
  // `device_used` counts every session's allocations: the sim device is one
  // device shared by all clients, as a GPU is.
  SimContext(uint64_t window, uint64_t quota, std::shared_ptr<SharedQuota> shared, uint64_t device_bytes,
             std::atomic<uint64_t>& device_used, unsigned threads, uint64_t timeout_ms,
             const proto::DeviceDescription& device)
      : base_(window << kWindowShift), space_(base_, kArenaBytes), quota_(quota), shared_(std::move(shared)),
        device_bytes_(device_bytes), device_used_(device_used), engine_(threads), timeout_ms_(timeout_ms),
        device_(device) {}
  ~SimContext() override {
    if (windows_) windows_->give(base_ >> kWindowShift);
    for (auto& [addr, a] : allocs_) heap_.put(a.host);
    for (auto& p : pools_)
      for (auto& [n, c] : p->cache) heap_.put(c.host);
    device_used_ -= used_;
    if (shared_) shared_->give(used_);
  }

  // ---- ptx::DeviceMemory: kernels' view of this session's memory.
  // No lock: allocations change only on the session thread, never during a
  // launch (calls execute in order).
  uint8_t* translate(uint64_t addr, uint64_t len, bool write) override {
    Region r;
    if (!find(addr, false, r) || len > r.size - (addr - r.base)) return nullptr;
    return r.host + (addr - r.base);
  }
  // A kernel's view: an allocation with the rest of its 256-byte granule (a
  // GPU maps whole pages, so a kernel that reads a little past the end of
  // an array does not fault there; the granule holds no other allocation).
  bool region(uint64_t addr, Region& out) override { return find(addr, true, out); }
  bool find(uint64_t addr, bool granule, Region& out) {
    if (!host_maps_.empty()) {
      auto m = host_maps_.upper_bound(addr);
      if (m != host_maps_.begin() && addr - std::prev(m)->first < std::prev(m)->second.bytes) {
        --m;
        out = {m->first, m->second.bytes, m->second.host, true};
        return true;
      }
    }
    auto it = allocs_.upper_bound(addr);
    if (it == allocs_.begin()) return false;
    --it;
    const uint64_t size = granule ? round_up(it->second.bytes, kAllocAlign) : it->second.bytes;
    if (addr - it->first >= size) return false;
    out = {it->first, size, it->second.host.p, true};
    return true;
  }
  // WORMHOLE_PTX_JIT=compare: every allocation (with its granule) and the mapped host area.
  bool writable_regions(std::vector<Region>& out) override {
    for (const auto& [addr, a] : allocs_) out.push_back({addr, round_up(a.bytes, kAllocAlign), a.host.p, true});
    for (const auto& [d, m] : host_maps_) out.push_back({d, m.bytes, m.host, true});
    return true;
  }
  uint64_t device_malloc(uint64_t bytes) override { return heap_ready_ ? dheap_.alloc(bytes) : 0; }
  bool device_free(uint64_t addr) override { return heap_ready_ && dheap_.release(addr); }
  // cudaDeviceGetAttribute in a kernel answers what the host's does.
  bool device_attribute(int attr, int* value) override { return proto::attribute(device_, attr, value); }

  bool texture(uint64_t h, ptx::TexView& out) override { return find_tex(h, false, out); }
  bool surface(uint64_t h, ptx::TexView& out) override { return find_tex(h, true, out); }
  bool find_tex(uint64_t h, bool surf, ptx::TexView& out) const {
    auto it = texobjs_.find(h);
    if (it == texobjs_.end() || it->second.second != surf) return false;
    out = it->second.first;
    return true;
  }
  Err texture_create(const TexSpec& s, bool surf, uint64_t* obj) override {
    // Values are never reused in a session: a stale handle finds nothing.
    // Small numbers, like a GPU's, but never 0 (the "no object" value).
    *obj = ++next_tex_;
    return texture_create_at(s, surf, *obj);
  }
  Err texture_create_at(const TexSpec& s, bool surf, uint64_t obj) override {
    if (!obj || texobjs_.count(obj)) return cudaErrorInvalidValue;
    next_tex_ = std::max(next_tex_, obj);
    ptx::TexView v;
    v.dptr = s.dptr, v.bytes = s.bytes, v.pitch = s.pitch, v.slice = s.slice;
    v.w = s.w, v.h = s.h, v.d = s.d, v.dims = s.dims, v.layered = s.layered, v.linear_mem = s.linear_mem;
    v.nch = s.nch, v.cbytes = s.cbytes, v.ckind = s.ckind, v.levels = s.levels;
    for (int i = 0; i < 3; ++i) v.addr[i] = s.addr[i];
    v.filter_linear = s.filter_linear, v.read_normalized = s.read_normalized;
    v.norm_coords = s.norm_coords, v.srgb = s.srgb;
    for (int i = 0; i < 4; ++i) v.border[i] = s.border[i];
    texobjs_[obj] = {v, surf};
    return cudaSuccess;
  }
  void set_windows(std::shared_ptr<Windows> w) { windows_ = std::move(w); }
  void set_tenant(std::string t) { tenant_ = std::move(t); }
  // ---- checkpoint and restore (the session's own state is saved by it)
  uint64_t va_base() const override { return base_; }
  std::string unmovable() const override {
    for (const auto& p : pools_)
      if (p->destroyed) return "allocations of a destroyed memory pool";
    return {};
  }
  Err heap_state(HeapState* out) override {
    *out = {};
    if (!heap_ready_ || !heap_dptr_) return cudaSuccess;
    out->dptr = heap_dptr_;
    out->bytes = allocs_.at(heap_dptr_).bytes;
    out->live = dheap_.live();
    return cudaSuccess;
  }
  Err heap_restore(const HeapState& st) override {
    if (heap_ready_ || !st.dptr || st.bytes != limits_[cudaLimitMallocHeapSize]) return cudaErrorInvalidValue;
    if (Err e = mem_alloc_at(st.dptr, st.bytes); e != cudaSuccess) return e;
    if (!dheap_.restore(st.dptr, st.bytes, st.live)) {
      dheap_.clear();
      mem_free(st.dptr);
      return cudaErrorInvalidValue;
    }
    heap_dptr_ = st.dptr;
    heap_ready_ = true;
    return cudaSuccess;
  }
  Err texture_destroy(uint64_t h, bool surf) override {
    auto it = texobjs_.find(h);
    if (it == texobjs_.end() || it->second.second != surf) return cudaErrorInvalidValue;
    texobjs_.erase(it);
    return cudaSuccess;
  }

  // ---- memory. The session's quota and the device count what cudaMalloc
  // asked for, exactly, and what pools reserve.
  Err mem_alloc(uint64_t bytes, uint64_t* dptr) override { return alloc(bytes, 0, dptr); }
  Err mem_alloc_at(uint64_t dptr, uint64_t bytes) override {
    if (!bytes || dptr % kAllocAlign || dptr < base_ || dptr - base_ >= kArenaBytes) return cudaErrorInvalidValue;
    uint64_t got = 0;
    return alloc(bytes, dptr, &got);
  }
  // At `want` (a restore), or where it fits (0).
  Err alloc(uint64_t bytes, uint64_t want, uint64_t* dptr) {
    if (bytes == 0) {
      *dptr = 0;
      return cudaSuccess;
    }
    if (bytes > kArenaBytes || !charge_or_trim(bytes)) return cudaErrorMemoryAllocation;
    const uint64_t span = round_up(bytes, kAllocAlign);
    uint64_t a;
    HostHeap::Block hb;
    if (!place(span, want, &a, &hb)) {
      uncharge(bytes);
      return cudaErrorMemoryAllocation;
    }
    allocs_.emplace(a, Alloc{hb, bytes, span, nullptr});
    *dptr = a;
    return cudaSuccess;
  }
  Err mem_free(uint64_t dptr) override {
    if (dptr == 0) return cudaSuccess;
    if (heap_ready_ && dptr == heap_dptr_) return cudaErrorInvalidValue;  // the device heap lives as long as we do
    auto it = allocs_.find(dptr);
    if (it == allocs_.end()) return cudaErrorInvalidValue;
    const Alloc a = it->second;
    allocs_.erase(it);
    if (a.pool) {
      pool_return(*a.pool, dptr, a);
      return cudaSuccess;
    }
    heap_.put(a.host);
    space_.give_back(dptr, a.span);
    uncharge(a.bytes);
    return cudaSuccess;
  }
  Err mem_info(uint64_t* free_bytes, uint64_t* total_bytes) override {
    // Like a GPU as big as this session's quota: its total is the quota, and
    // free is what the session may still take (no more than the device has).
    uint64_t dev_free = device_bytes_ - std::min(device_bytes_, device_used_.load());
    *total_bytes = shared_ ? std::min(quota_, shared_->limit) : quota_;
    *free_bytes = std::min(dev_free, quota_ - used_);
    if (shared_) *free_bytes = std::min(*free_bytes, shared_->left());
    return cudaSuccess;
  }
  Err map_host(void* host, uint64_t bytes, uint64_t want, uint64_t* dptr) override {
    if (bytes == 0) return cudaErrorMemoryAllocation;
    // At the guest's own address when asked (managed memory): that is below
    // 2^47 (a user address), so it never meets a session's window (2^48 and
    // up) nor the engine's shared/local/param windows. Otherwise at the top
    // of this session's window, inside the part no allocation is given.
    // Mappings never overlap (a want that meets one is placed in the window).
    uint64_t at = 0;
    const uint64_t host_lo = base_ + kArenaBytes, host_hi = base_ + kWindowBytes - (uint64_t(1) << 30);
    if (want && want % 4096 == 0 && want >= (1u << 16) && bytes <= (1ull << 47) && want <= (1ull << 47) - bytes &&
        !host_map_overlaps(want, bytes)) {
      at = want;
    } else if (want && want % (1 << 20) == 0 && want >= host_lo && want < host_hi && bytes <= host_hi - want &&
               !host_map_overlaps(want, bytes)) {
      // Where this window placed it before (a restored session): the next
      // placements go below it.
      at = want;
      if (!host_window_next_ || at < host_window_next_) host_window_next_ = at;
    } else {
      // Downwards from 1 GiB below the window's top, one after another.
      const uint64_t win = round_up(bytes, 1 << 20);
      if (!host_window_next_) host_window_next_ = base_ + kWindowBytes - (uint64_t(1) << 30);
      if (bytes > kHostReserve || win > host_window_next_ - (base_ + kArenaBytes)) return cudaErrorMemoryAllocation;
      host_window_next_ -= win;
      at = host_window_next_;
    }
    host_maps_[at] = {static_cast<uint8_t*>(host), bytes};
    *dptr = at;
    return cudaSuccess;
  }
  Err unmap_host(uint64_t dptr) override {
    return host_maps_.erase(dptr) ? cudaSuccess : cudaErrorInvalidValue;
  }
  bool host_map_overlaps(uint64_t at, uint64_t bytes) const {
    auto m = host_maps_.lower_bound(at);
    if (m != host_maps_.end() && m->first < at + bytes) return true;
    return m != host_maps_.begin() && std::prev(m)->first + std::prev(m)->second.bytes > at;
  }

  // ---- stream-ordered allocation
  Err pool_create(const MemPoolProps& props, MemPool** out) override {
    auto p = std::make_unique<SimPool>();
    p->props = props;
    *out = p.get();
    pools_.push_back(std::move(p));
    return cudaSuccess;
  }
  Err pool_destroy(MemPool* mp) override {
    auto& p = static_cast<SimPool&>(*mp);
    release_cached(p, 0);
    p.destroyed = true;
    if (!p.live) forget(p);
    return cudaSuccess;
  }
  Err mem_alloc_async(MemPool* mp, uint64_t bytes, Stream*, uint64_t* dptr) override {
    return pool_alloc(static_cast<SimPool&>(*mp), bytes, 0, dptr);
  }
  Err pool_alloc_at(MemPool* mp, uint64_t dptr, uint64_t bytes) override {
    if (!bytes || dptr % kAllocAlign || dptr < base_ || dptr - base_ >= kArenaBytes) return cudaErrorInvalidValue;
    uint64_t got = 0;
    return pool_alloc(static_cast<SimPool&>(*mp), bytes, dptr, &got);
  }
  MemPool* pool_of(uint64_t dptr) override {
    auto it = allocs_.find(dptr);
    return it == allocs_.end() ? nullptr : it->second.pool;
  }
  // From the pool's freed blocks, or new at `want` (a restore) or anywhere (0).
  Err pool_alloc(SimPool& p, uint64_t bytes, uint64_t want, uint64_t* dptr) {
    if (bytes == 0) {
      *dptr = 0;
      return cudaSuccess;
    }
    if (bytes > kArenaBytes) return cudaErrorMemoryAllocation;
    const uint64_t span = size_class(bytes).bytes;
    uint64_t a;
    HostHeap::Block hb;
    if (auto it = want ? p.cache.end() : p.cache.find(span); it != p.cache.end()) {
      a = it->second.addr;
      hb = it->second.host;
      p.cache.erase(it);
    } else {
      const uint64_t cap = p.props.max_size;
      if (cap && span > cap) return cudaErrorMemoryAllocation;
      if (cap && p.reserved + span > cap) release_cached(p, cap - span);
      if (cap && p.reserved + span > cap) return cudaErrorMemoryAllocation;
      if (!charge_or_trim(span)) return cudaErrorMemoryAllocation;
      if (!place(span, want, &a, &hb)) {
        uncharge(span);
        return cudaErrorMemoryAllocation;
      }
      p.reserved += span;
      p.reserved_high = std::max(p.reserved_high, p.reserved);
    }
    allocs_.emplace(a, Alloc{hb, bytes, span, &p});
    p.used += bytes;
    p.used_high = std::max(p.used_high, p.used);
    p.live++;
    *dptr = a;
    return cudaSuccess;
  }
  // In call order, every earlier use of the memory has finished.
  Err mem_free_async(uint64_t dptr, Stream*) override { return mem_free(dptr); }
  Err pool_trim(MemPool* mp, uint64_t keep) override {
    release_cached(static_cast<SimPool&>(*mp), keep);
    return cudaSuccess;
  }
  Err pool_set_attribute(MemPool* mp, int attr, uint64_t v) override {
    auto& p = static_cast<SimPool&>(*mp);
    switch (attr) {
      case cudaMemPoolReuseFollowEventDependencies:
      case cudaMemPoolReuseAllowOpportunistic:
      case cudaMemPoolReuseAllowInternalDependencies: p.reuse[attr - 1] = v != 0; return cudaSuccess;
      case cudaMemPoolAttrReleaseThreshold: p.threshold = v; return cudaSuccess;
      case cudaMemPoolAttrReservedMemHigh: p.reserved_high = p.reserved; return cudaSuccess;
      case cudaMemPoolAttrUsedMemHigh: p.used_high = p.used; return cudaSuccess;
      default: return cudaErrorInvalidValue;
    }
  }
  Err pool_get_attribute(MemPool* mp, int attr, uint64_t* v) override {
    auto& p = static_cast<SimPool&>(*mp);
    switch (attr) {
      case cudaMemPoolReuseFollowEventDependencies:
      case cudaMemPoolReuseAllowOpportunistic:
      case cudaMemPoolReuseAllowInternalDependencies: *v = p.reuse[attr - 1]; return cudaSuccess;
      case cudaMemPoolAttrReleaseThreshold: *v = p.threshold; return cudaSuccess;
      case cudaMemPoolAttrReservedMemCurrent: *v = p.reserved; return cudaSuccess;
      case cudaMemPoolAttrReservedMemHigh: *v = p.reserved_high; return cudaSuccess;
      case cudaMemPoolAttrUsedMemCurrent: *v = p.used; return cudaSuccess;
      case cudaMemPoolAttrUsedMemHigh: *v = p.used_high; return cudaSuccess;
      default: return cudaErrorInvalidValue;
    }
  }
  void pool_sync_point() override {
    for (auto& p : pools_)
      if (p->reserved > p->threshold) release_cached(*p, p->threshold);
  }

  // ---- copies (the session has checked the ranges; re-check cheaply)
  uint8_t* span(uint64_t addr, uint64_t n) { return n == 0 ? nullptr : translate(addr, n, true); }
  Err copy_htod(uint64_t dst, const void* src, uint64_t n, Stream*) override {
    if (!n) return cudaSuccess;
    uint8_t* d = span(dst, n);
    if (!d) return cudaErrorInvalidValue;
    std::memmove(d, src, n);
    return cudaSuccess;
  }
  Err copy_dtoh(void* dst, uint64_t src, uint64_t n, Stream*) override {
    if (!n) return cudaSuccess;
    uint8_t* s = span(src, n);
    if (!s) return cudaErrorInvalidValue;
    std::memmove(dst, s, n);
    return cudaSuccess;
  }
  Err copy_dtod(uint64_t dst, uint64_t src, uint64_t n, Stream*) override {
    if (!n) return cudaSuccess;
    uint8_t* d = span(dst, n);
    uint8_t* s = span(src, n);
    if (!d || !s) return cudaErrorInvalidValue;
    std::memmove(d, s, n);
    return cudaSuccess;
  }
  Err memset8(uint64_t dst, uint8_t value, uint64_t n, Stream*) override {
    if (!n) return cudaSuccess;
    uint8_t* d = span(dst, n);
    if (!d) return cudaErrorInvalidValue;
    std::memset(d, value, n);
    return cudaSuccess;
  }

  // ---- modules and launches
  // A module image: a fatbin, or PTX text (cuModuleLoadData's bare PTX; one
  // or more NUL-separated units, linked as one module, as the guest's
  // cuLinkComplete produces them). A cubin (SASS) cannot run here.
  std::unique_ptr<ptx::Module> from_image(std::span<const uint8_t> img, std::string* err) const {
    uint32_t magic = 0;
    if (img.size() >= 4) std::memcpy(&magic, img.data(), 4);
    if (magic == fatbin::kFatbinMagic) return ptx::Module::from_fatbin(img.data(), img.size(), err, tenant_);
    if (img.size() >= 4 && img[0] == 0x7f && img[1] == 'E' && img[2] == 'L' && img[3] == 'F') {
      *err = "a cubin (SASS) image cannot run on the sim device; load PTX or a fatbin that carries PTX";
      return nullptr;
    }
    std::vector<std::string_view> units;
    const char* p = reinterpret_cast<const char*>(img.data());
    size_t i = 0, n = img.size();
    while (i < n) {
      size_t j = i;
      while (j < n && p[j]) j++;
      if (j > i) units.emplace_back(p + i, j - i);
      i = j + 1;
    }
    if (units.empty() || units.size() > fatbin::kMaxFatbins) {
      *err = "the module image is neither a fatbin nor PTX text";
      return nullptr;
    }
    for (auto u : units)
      if (u.find(".version") == std::string_view::npos || u.find(".target") == std::string_view::npos) {
        *err = "the module image is neither a fatbin nor PTX text (no .version/.target directive)";
        return nullptr;
      }
    return units.size() == 1 ? ptx::Module::from_ptx(units[0], err, tenant_)
                             : ptx::Module::from_ptx_units(units, err, tenant_);
  }
  Err module_load(std::span<const uint8_t> fatbin, std::unique_ptr<Module>* out,
                  std::string* log) override {
    return module_load_at(fatbin, {}, out, log);
  }
  Err module_load_at(std::span<const uint8_t> fatbin, std::span<const uint64_t> place, std::unique_ptr<Module>* out,
                     std::string* log) override {
    std::string err;
    auto m = std::make_unique<SimModule>();
    m->mod = from_image(fatbin, &err);
    if (!m->mod) {
      if (log) *log = err;
      return cudaErrorInvalidKernelImage;
    }
    if (!place.empty() && place.size() != m->mod->globals().size()) {
      if (log) *log = "the module has " + std::to_string(m->mod->globals().size()) + " variables, the checkpoint " +
                      std::to_string(place.size());
      return cudaErrorInvalidKernelImage;
    }
    for (const auto& g : m->mod->globals()) {
      uint64_t d = 0;
      const uint64_t at = place.empty() ? 0 : place[m->globals.size()];
      if (Err e = at ? mem_alloc_at(at, std::max<uint64_t>(g.size, 1)) : mem_alloc(std::max<uint64_t>(g.size, 1), &d);
          e != cudaSuccess) {
        for (uint64_t a : m->globals) mem_free(a);
        return e;
      }
      if (at) d = at;
      m->globals.push_back(d);
      m->mod->bind_global(g.name, d);
      m->symbols[g.name] = {d, g.size};
    }
    // Initial values once every variable has its address: an initializer may
    // hold another variable's (a pointer, a vtable's neighbours).
    const auto& gs = m->mod->globals();
    for (size_t i = 0; i < gs.size(); ++i) {
      const auto& g = gs[i];
      // Reused device memory is not cleared, but a variable without an
      // initializer starts as zero.
      memset8(m->globals[i], 0, std::max<uint64_t>(g.size, 1), nullptr);
      if (g.init.empty()) continue;
      std::vector<uint8_t> bytes(g.init.begin(), g.init.begin() + std::min<uint64_t>(g.init.size(), g.size));
      if (bytes.size() == g.size) m->mod->apply_relocs(g, bytes.data());
      copy_htod(m->globals[i], bytes.data(), bytes.size(), nullptr);
    }
    *out = std::move(m);
    return cudaSuccess;
  }
  Err module_vars(Module& mb, std::vector<ModuleVar>* out) override {
    auto& m = static_cast<SimModule&>(mb);
    for (const auto& g : m.mod->globals()) {
      auto it = m.symbols.find(g.name);
      if (it == m.symbols.end()) return cudaErrorInvalidSymbol;
      const uint64_t d = it->second.first;
      const bool own = std::find(m.globals.begin(), m.globals.end(), d) != m.globals.end();
      out->push_back({g.name, d, std::max<uint64_t>(g.size, 1), own});
    }
    return cudaSuccess;
  }
  void module_unload(Module& mb) override {
    auto& m = static_cast<SimModule&>(mb);
    for (uint64_t a : m.globals) mem_free(a);
    m.globals.clear();
  }
  Err module_kernel(Module& mb, const std::string& name, std::unique_ptr<Kernel>* out,
                    KernelAttrs* attrs) override {
    auto& m = static_cast<SimModule&>(mb);
    const ptx::KernelInfo* ki = m.mod->kernel(name);
    if (!ki) return cudaErrorInvalidDeviceFunction;
    auto k = std::make_unique<SimKernel>();
    k->mod = m.mod.get();
    k->name = name;
    attrs->param_bytes = ki->param_bytes;
    attrs->params.clear();
    for (auto& p : ki->params) attrs->params.emplace_back(p.offset, p.size);
    attrs->max_threads = ki->max_threads_per_block;
    attrs->num_regs = ki->num_regs;
    attrs->shared_bytes = ki->static_shared_bytes;
    attrs->local_bytes = ki->local_bytes_per_thread;
    attrs->const_bytes = ki->const_bytes;
    // The PTX the module was built from, and the binary a GPU of the modeled
    // architecture would make of it (as the driver's JIT does).
    attrs->ptx_version = m.mod->target_arch() ? m.mod->target_arch() : kMajor * 10 + kMinor;
    attrs->binary_version = kMajor * 10 + kMinor;
    *out = std::move(k);
    return cudaSuccess;
  }
  Err module_global(Module& mb, const std::string& name, uint64_t* dptr, uint64_t* bytes) override {
    auto& m = static_cast<SimModule&>(mb);
    auto it = m.symbols.find(name);
    if (it == m.symbols.end()) return cudaErrorInvalidSymbol;
    *dptr = it->second.first;
    *bytes = it->second.second;
    return cudaSuccess;
  }
  Err module_rebind_global(Module& mb, const std::string& name, uint64_t dptr) override {
    auto& m = static_cast<SimModule&>(mb);
    auto it = m.symbols.find(name);
    if (it == m.symbols.end()) return cudaErrorInvalidSymbol;
    auto [old, size] = it->second;
    uint8_t* to = span(dptr, size);
    uint8_t* from = span(old, size);
    if (!to || !from) return cudaErrorInvalidValue;
    std::memcpy(to, from, size);
    if (!m.mod->bind_global(name, dptr)) return cudaErrorInvalidSymbol;
    it->second.first = dptr;
    // Variables initialized with this one's address follow it.
    const auto& gs = m.mod->globals();
    for (size_t t = 0; t < gs.size(); ++t) {
      if (gs[t].name != name) continue;
      for (const auto& h : gs)
        if (!h.relocs.empty())
          if (auto hs = m.symbols.find(h.name); hs != m.symbols.end())
            if (uint8_t* hp = span(hs->second.first, h.size)) m.mod->apply_relocs(h, hp, int64_t(t));
    }
    auto g = std::find(m.globals.begin(), m.globals.end(), old);
    if (g != m.globals.end()) {
      m.globals.erase(g);
      mem_free(old);
    }
    return cudaSuccess;
  }
  uint64_t thread_instructions() const override { return engine_.instructions_executed(); }
  bool launch_is_timed() const override { return true; }

  // Kernels of a context run one at a time, in order: a programmatic
  // dependent launch (kProgrammaticLaunch) starts after the previous
  // kernel ended, so its griddepcontrol.wait finds that grid complete.
  Err launch(Kernel& kb, Dim3 grid, Dim3 block, uint32_t shared_bytes, uint32_t flags, Stream*,
             std::span<const uint8_t> params, std::string* log, KernelOutput* output) override {
    const bool cooperative = flags & kCooperativeLaunch;
    auto& k = static_cast<SimKernel&>(kb);
    // The device heap is made before the first launch that may use it, at
    // the size set then; from then on that size is fixed, as on a GPU.
    if (!heap_ready_) {
      const ptx::KernelInfo* ki = k.mod->kernel(k.name);
      if (ki && ki->uses_heap) {
        if (Err e = make_heap(); e != cudaSuccess) {
          if (log) *log = "cannot reserve the device heap (cudaLimitMallocHeapSize = " +
                          std::to_string(limits_[cudaLimitMallocHeapSize]) + " bytes)";
          return e;
        }
      }
    }
    ptx::LaunchConfig cfg;
    cfg.grid = {grid.x, grid.y, grid.z};
    cfg.block = {block.x, block.y, block.z};
    cfg.dynamic_shared_bytes = shared_bytes;
    cfg.cooperative = cooperative;
    cfg.cancel = &cancel_;
    cfg.timeout_ms = timeout_ms_;
    cfg.pending_launch_limit = uint32_t(std::min<uint64_t>(limits_[cudaLimitDevRuntimePendingLaunchCount], UINT32_MAX));
    if (cooperative) {
      // What the occupancy API promises the guest is what is accepted (and
      // the engine holds at least that many blocks at once).
      const ptx::KernelInfo* ki = k.mod->kernel(k.name);
      int per_sm = ki ? proto::blocks_per_multiprocessor(device_.props, ki->num_regs,
                                                        uint64_t(ki->static_shared_bytes) + shared_bytes,
                                                        int(block.x * block.y * block.z), ki->max_threads_per_block)
                      : 0;
      const uint64_t limit = std::min<uint64_t>(uint64_t(per_sm) * uint64_t(device_.props.multiProcessorCount),
                                                engine_.max_coresident_blocks(*k.mod, k.name, cfg));
      if (uint64_t(grid.x) * grid.y * grid.z > limit) return cudaErrorCooperativeLaunchTooLarge;
    }
    ptx::DeviceOutput dev;
    if (output) {
      dev.limit = output->limit;
      cfg.output = &dev;
    }
    ptx::LaunchError e = engine_.launch(*k.mod, k.name, cfg, params.data(), params.size(), *this);
    if (output) {
      output->out = std::move(dev.printf_text);
      output->err = std::move(dev.assert_text);
      output->dropped = dev.dropped;
    }
    if (!e) return cudaSuccess;
    if (log) *log = e.message;
    switch (e.kind) {
      case ptx::LaunchError::BadAccess: return cudaErrorIllegalAddress;
      case ptx::LaunchError::Misaligned: return cudaErrorMisalignedAddress;
      case ptx::LaunchError::Assert: return cudaErrorAssert;
      case ptx::LaunchError::Trap: return cudaErrorLaunchFailure;
      case ptx::LaunchError::InvalidConfig: return cudaErrorInvalidConfiguration;
      case ptx::LaunchError::Unsupported: return cudaErrorNotSupported;
      case ptx::LaunchError::Timeout: return cudaErrorLaunchTimeout;
      default: return cudaErrorLaunchFailure;  // Cancelled among them: the context is being torn down
    }
  }

  // ---- streams and events: in-order execution means work is done when
  // the call returns; events stamp the host clock.
  Err stream_create(uint32_t, int, std::unique_ptr<Stream>* out) override {
    *out = std::make_unique<SimStream>();
    return cudaSuccess;
  }
  Err stream_synchronize(Stream*) override { return cudaSuccess; }
  Err stream_query(Stream*) override { return cudaSuccess; }
  Err stream_wait_event(Stream*, Event&) override { return cudaSuccess; }
  Err event_create(uint32_t, std::unique_ptr<Event>* out) override {
    *out = std::make_unique<SimEvent>();
    return cudaSuccess;
  }
  Err event_record(Event& e, Stream*) override {
    auto& ev = static_cast<SimEvent&>(e);
    ev.recorded = true;
    ev.when = Clock::now();
    return cudaSuccess;
  }
  Err event_synchronize(Event&) override { return cudaSuccess; }
  Err event_query(Event&) override { return cudaSuccess; }
  Err event_elapsed(Event& a, Event& b, float* ms) override {
    auto& s = static_cast<SimEvent&>(a);
    auto& e = static_cast<SimEvent&>(b);
    if (!s.recorded || !e.recorded) return cudaErrorInvalidResourceHandle;
    *ms = std::chrono::duration<float, std::milli>(e.when - s.when).count();
    return cudaSuccess;
  }
  Err synchronize() override { return cudaSuccess; }
  void cancel() override { cancel_ = true; }

  // Limits as a GPU of this model reports them. The interpreter's own
  // stacks grow as needed, so the stack size is a bound it does not need;
  // the printf FIFO bounds the kernel output a launch may leave.
  Err set_limit(int limit, uint64_t value) override {
    switch (cudaLimit(limit)) {
      case cudaLimitStackSize: value = (value + 15) & ~uint64_t(15); break;
      case cudaLimitMaxL2FetchGranularity:
        if (value > 128) return cudaErrorInvalidValue;
        break;
      case cudaLimitPersistingL2CacheSize:
        if (value > uint64_t(kPersistingL2Max)) return cudaErrorInvalidValue;
        break;
      case cudaLimitDevRuntimeSyncDepth:
        if (value > 24) return cudaErrorInvalidValue;
        break;
      case cudaLimitMallocHeapSize:
        if (heap_ready_) return cudaErrorInvalidValue;  // fixed once a kernel used it
        break;
      default: break;
    }
    limits_[limit] = value;
    return cudaSuccess;
  }
  Err get_limit(int limit, uint64_t* value) override {
    *value = limits_[limit];
    return cudaSuccess;
  }
  void reset_device_heap() override {
    if (!heap_ready_) return;
    if (auto it = allocs_.find(heap_dptr_); heap_dptr_ && it != allocs_.end()) {
      heap_.put(it->second.host);
      space_.give_back(heap_dptr_, it->second.span);
      uncharge(it->second.bytes);
      allocs_.erase(it);
    }
    dheap_.clear();
    heap_ready_ = false;
    heap_dptr_ = 0;
  }
  uint8_t* host_view(uint64_t dptr, uint64_t bytes) override {
    return bytes ? translate(dptr, bytes, true) : nullptr;
  }
  Blas* blas(std::string*) override {
    if (!blas_) blas_ = make_sim_blas(*this);
    return blas_.get();
  }
  Fft* fft(std::string*) override {
    if (!fft_) fft_ = make_sim_fft(*this);
    return fft_.get();
  }
  Dnn* dnn(std::string*) override {
    if (!dnn_) dnn_ = make_sim_dnn(*this);
    return dnn_.get();
  }
  BlasLt* blaslt(std::string*) override {
    if (!blaslt_) blaslt_ = make_sim_blaslt(*this);
    return blaslt_.get();
  }
  Rand* rand(std::string*) override {
    if (!rand_) rand_ = make_sim_rand(*this);
    return rand_.get();
  }

 private:
  // Texture/surface objects: changed only on the session thread, never
  // during a launch (calls execute in order), so launches read them unlocked.
  std::map<uint64_t, std::pair<ptx::TexView, bool>> texobjs_;
  uint64_t next_tex_ = 0;
  struct Alloc {
    HostHeap::Block host;
    uint64_t bytes;  // what kernels and copies may touch
    uint64_t span;   // the address space it holds (a pool block: its size class)
    SimPool* pool;   // nullptr: cudaMalloc
  };
  Err make_heap() {
    const uint64_t bytes = limits_[cudaLimitMallocHeapSize];
    uint64_t d = 0;
    if (bytes) {
      if (Err e = mem_alloc(bytes, &d); e != cudaSuccess) return e;
      dheap_.init(d, bytes);
    }
    heap_dptr_ = d;
    heap_ready_ = true;
    return cudaSuccess;
  }
  bool charge(uint64_t n) {
    if (n > quota_ || used_ > quota_ - n) return false;
    if (shared_ && !shared_->take(n)) return false;
    if (device_used_.fetch_add(n) + n > device_bytes_) {
      device_used_ -= n;
      if (shared_) shared_->give(n);
      return false;
    }
    used_ += n;
    return true;
  }
  void uncharge(uint64_t n) {
    used_ -= n;
    device_used_ -= n;
    if (shared_) shared_->give(n);
  }
  // Memory pools hold but do not use is given back before an allocation fails.
  bool charge_or_trim(uint64_t n) {
    if (charge(n)) return true;
    bool any = false;
    for (auto& p : pools_) any |= release_cached(*p, 0);
    return any && charge(n);
  }
  bool place(uint64_t span, uint64_t want, uint64_t* addr, HostHeap::Block* hb) {
    const uint64_t a = want ? (space_.take_at(want, span) ? want : 0) : space_.take(span);
    if (!a) return false;
    if (!heap_.get(span, hb)) {
      space_.give_back(a, span);
      return false;
    }
    *addr = a;
    return true;
  }
  // Freed blocks beyond `keep` reserved bytes go back, largest first.
  bool release_cached(SimPool& p, uint64_t keep) {
    bool any = false;
    while (p.reserved > keep && !p.cache.empty()) {
      auto it = std::prev(p.cache.end());
      drop_block(p, it->second.addr, it->first, it->second.host);
      p.cache.erase(it);
      any = true;
    }
    return any;
  }
  void drop_block(SimPool& p, uint64_t addr, uint64_t span, const HostHeap::Block& hb) {
    heap_.put(hb);
    space_.give_back(addr, span);
    uncharge(span);
    p.reserved -= span;
  }
  void pool_return(SimPool& p, uint64_t addr, const Alloc& a) {
    p.used -= a.bytes;
    p.live--;
    if (!p.destroyed) {
      p.cache.emplace(a.span, SimPool::Cached{addr, a.host});
      return;
    }
    drop_block(p, addr, a.span, a.host);
    if (!p.live) forget(p);
  }
  void forget(SimPool& p) {
    std::erase_if(pools_, [&](const std::unique_ptr<SimPool>& q) { return q.get() == &p; });
  }

  uint64_t base_;
  std::shared_ptr<Windows> windows_;  // our window is in it while we live
  AddressSpace space_;
  HostHeap heap_;
  uint64_t quota_;
  std::shared_ptr<SharedQuota> shared_;  // the uid's limit, if any
  uint64_t device_bytes_;
  std::atomic<uint64_t>& device_used_;
  uint64_t used_ = 0;
  std::map<uint64_t, Alloc> allocs_;  // live allocations: what kernels and copies reach
  std::vector<std::unique_ptr<SimPool>> pools_;
  // Indexed by cudaLimit: stack, printf FIFO, malloc heap, sync depth,
  // pending launches, L2 fetch granularity, persisting L2 size.
  uint64_t limits_[7] = {1024, 1 << 20, 8 << 20, 2, 2048, 32, 0};
  std::string tenant_;  // modules are shared with this tenant's other sessions (ptx::Module)
  // Host memory kernels reach (map_host): device address -> its bytes.
  struct HostMap {
    uint8_t* host;
    uint64_t bytes;
  };
  std::map<uint64_t, HostMap> host_maps_;
  uint64_t host_window_next_ = 0;  // the lowest placement in the window so far
  DeviceHeap dheap_;
  bool heap_ready_ = false;  // made (its size is then fixed)
  uint64_t heap_dptr_ = 0;
  ptx::Engine engine_;
  std::atomic<bool> cancel_{false};  // set by cancel(): every launch stops
  uint64_t timeout_ms_ = 0;          // the server's --kernel-timeout-ms
  proto::DeviceDescription device_;  // the modeled device (occupancy of cooperative launches)
  std::unique_ptr<Blas> blas_;  // OpenBLAS over host_view (sim_blas.cpp)
  std::unique_ptr<Fft> fft_;    // FFTW over host_view (sim_fft.cpp)
  std::unique_ptr<BlasLt> blaslt_;  // OpenBLAS over host_view (sim_blaslt.cpp)
  std::unique_ptr<Rand> rand_;  // cuRAND's algorithms over host_view (sim_rand.cpp)
  std::unique_ptr<Dnn> dnn_;    // oneDNN over host_view (sim_dnn.cpp)
};

class SimBackend final : public Backend {
 public:
  SimBackend(unsigned threads, uint64_t memory, uint64_t kernel_timeout_ms, uint64_t va_base)
      : threads_(threads), memory_(memory), kernel_timeout_ms_(kernel_timeout_ms) {
    // The first session's window: --device-va-base, else a random one, so
    // that two servers one process uses as two devices (docs/remote.md
    // "Several servers") hand out different addresses.
    uint64_t first = va_base >> kWindowShift;
    if (first >= kFirstWindow && first < kFirstWindow + kWindows) {
      next_window_ = first - kFirstWindow;
    } else {
      uint64_t r = 0;
      std::random_device rd;
      r = (uint64_t(rd()) << 32) | rd();
      next_window_ = r % kWindows;
    }
  }
  const char* name() const override { return "sim"; }
  int device_count() const override { return 1; }
  int driver_version() const override { return 13000; }
  // The modeled GPU: compute capability 8.0 with the limits of such a part,
  // one multiprocessor per interpreter worker thread, and the features the
  // sim device really implements (absent ones read 0, so programs that
  // check them skip their work instead of failing in it).
  Err describe(int device, proto::DeviceDescription* d) override {
    if (device != 0) return cudaErrorInvalidDevice;
    std::memset(d, 0, sizeof(*d));
    auto set = [&](cudaDeviceAttr at, int v) {
      d->attr[at] = v;
      d->has[at] = 1;
    };
    const int sms = int(threads_ ? threads_ : std::max(1u, std::thread::hardware_concurrency()));
    set(cudaDevAttrMaxThreadsPerBlock, 1024);
    set(cudaDevAttrMaxBlockDimX, 1024);
    set(cudaDevAttrMaxBlockDimY, 1024);
    set(cudaDevAttrMaxBlockDimZ, 64);
    set(cudaDevAttrMaxGridDimX, INT32_MAX);
    set(cudaDevAttrMaxGridDimY, 65535);
    set(cudaDevAttrMaxGridDimZ, 65535);
    set(cudaDevAttrMaxSharedMemoryPerBlock, 48 << 10);
    set(cudaDevAttrTotalConstantMemory, 64 << 10);
    set(cudaDevAttrWarpSize, 32);
    set(cudaDevAttrMaxPitch, INT32_MAX);
    set(cudaDevAttrMaxRegistersPerBlock, 65536);
    set(cudaDevAttrClockRate, 1410000);  // kHz
    set(cudaDevAttrTextureAlignment, 512);
    set(cudaDevAttrGpuOverlap, 0);  // one engine: copies and kernels run in turn
    set(cudaDevAttrMultiProcessorCount, sms);
    set(cudaDevAttrKernelExecTimeout, kernel_timeout_ms_ ? 1 : 0);
    set(cudaDevAttrIntegrated, 0);
    set(cudaDevAttrCanMapHostMemory, 1);
    set(cudaDevAttrComputeMode, cudaComputeModeDefault);
    set(cudaDevAttrMaxTexture1DWidth, 131072);
    set(cudaDevAttrMaxTexture2DWidth, 131072);
    set(cudaDevAttrMaxTexture2DHeight, 65536);
    set(cudaDevAttrMaxTexture3DWidth, 16384);
    set(cudaDevAttrMaxTexture3DHeight, 16384);
    set(cudaDevAttrMaxTexture3DDepth, 16384);
    set(cudaDevAttrMaxTexture2DLayeredWidth, 32768);
    set(cudaDevAttrMaxTexture2DLayeredHeight, 32768);
    set(cudaDevAttrMaxTexture2DLayeredLayers, 2048);
    set(cudaDevAttrSurfaceAlignment, 512);
    set(cudaDevAttrConcurrentKernels, 0);  // kernels of a session run one at a time
    set(cudaDevAttrEccEnabled, 0);
    set(cudaDevAttrPciBusId, kPciBus);
    set(cudaDevAttrPciDeviceId, kPciDevice);
    set(cudaDevAttrTccDriver, 0);
    set(cudaDevAttrMemoryClockRate, 1215000);  // kHz
    set(cudaDevAttrGlobalMemoryBusWidth, 5120);
    set(cudaDevAttrL2CacheSize, 40 << 20);
    set(cudaDevAttrMaxThreadsPerMultiProcessor, 2048);
    set(cudaDevAttrAsyncEngineCount, 0);
    set(cudaDevAttrUnifiedAddressing, 1);
    set(cudaDevAttrMaxTexture1DLayeredWidth, 32768);
    set(cudaDevAttrMaxTexture1DLayeredLayers, 2048);
    set(cudaDevAttrMaxTexture2DGatherWidth, 32768);
    set(cudaDevAttrMaxTexture2DGatherHeight, 32768);
    set(cudaDevAttrMaxTexture3DWidthAlt, 8192);
    set(cudaDevAttrMaxTexture3DHeightAlt, 8192);
    set(cudaDevAttrMaxTexture3DDepthAlt, 32768);
    set(cudaDevAttrPciDomainId, kPciDomain);
    set(cudaDevAttrTexturePitchAlignment, 32);
    set(cudaDevAttrMaxTextureCubemapWidth, 32768);
    set(cudaDevAttrMaxTextureCubemapLayeredWidth, 32768);
    set(cudaDevAttrMaxTextureCubemapLayeredLayers, 2046);
    set(cudaDevAttrMaxSurface1DWidth, 32768);
    set(cudaDevAttrMaxSurface2DWidth, 131072);
    set(cudaDevAttrMaxSurface2DHeight, 65536);
    set(cudaDevAttrMaxSurface3DWidth, 16384);
    set(cudaDevAttrMaxSurface3DHeight, 16384);
    set(cudaDevAttrMaxSurface3DDepth, 16384);
    set(cudaDevAttrMaxSurface1DLayeredWidth, 32768);
    set(cudaDevAttrMaxSurface1DLayeredLayers, 2048);
    set(cudaDevAttrMaxSurface2DLayeredWidth, 32768);
    set(cudaDevAttrMaxSurface2DLayeredHeight, 32768);
    set(cudaDevAttrMaxSurface2DLayeredLayers, 2048);
    set(cudaDevAttrMaxSurfaceCubemapWidth, 32768);
    set(cudaDevAttrMaxSurfaceCubemapLayeredWidth, 32768);
    set(cudaDevAttrMaxSurfaceCubemapLayeredLayers, 2046);
    set(cudaDevAttrMaxTexture1DLinearWidth, 1 << 28);
    set(cudaDevAttrMaxTexture2DLinearWidth, 131072);
    set(cudaDevAttrMaxTexture2DLinearHeight, 65000);
    set(cudaDevAttrMaxTexture2DLinearPitch, 2097120);
    set(cudaDevAttrMaxTexture2DMipmappedWidth, 32768);
    set(cudaDevAttrMaxTexture2DMipmappedHeight, 32768);
    set(cudaDevAttrComputeCapabilityMajor, kMajor);
    set(cudaDevAttrComputeCapabilityMinor, kMinor);
    set(cudaDevAttrMaxTexture1DMipmappedWidth, 32768);
    set(cudaDevAttrStreamPrioritiesSupported, 1);
    set(cudaDevAttrGlobalL1CacheSupported, 1);
    set(cudaDevAttrLocalL1CacheSupported, 1);
    set(cudaDevAttrMaxSharedMemoryPerMultiprocessor, 100 << 10);
    set(cudaDevAttrMaxRegistersPerMultiprocessor, 65536);
    set(cudaDevAttrManagedMemory, 1);  // in the shared data area (ARCHITECTURE.md)
    set(cudaDevAttrIsMultiGpuBoard, 0);
    set(cudaDevAttrMultiGpuBoardGroupID, 0);
    set(cudaDevAttrHostNativeAtomicSupported, 0);
    set(cudaDevAttrSingleToDoublePrecisionPerfRatio, 2);
    set(cudaDevAttrPageableMemoryAccess, 0);
    set(cudaDevAttrConcurrentManagedAccess, 0);
    set(cudaDevAttrComputePreemptionSupported, 0);
    set(cudaDevAttrCanUseHostPointerForRegisteredMem, 0);
    set(cudaDevAttrCooperativeLaunch, 1);  // grids up to the co-resident limit (ptx::Engine)
    set(cudaDevAttrMaxSharedMemoryPerBlockOptin, 99 << 10);
    set(cudaDevAttrCanFlushRemoteWrites, 0);
    set(cudaDevAttrHostRegisterSupported, 1);
    set(cudaDevAttrPageableMemoryAccessUsesHostPageTables, 0);
    set(cudaDevAttrDirectManagedMemAccessFromHost, 0);
    set(cudaDevAttrMaxBlocksPerMultiprocessor, 32);
    set(cudaDevAttrMaxPersistingL2CacheSize, kPersistingL2Max);
    set(cudaDevAttrMaxAccessPolicyWindowSize, 134213632);
    set(cudaDevAttrReservedSharedMemoryPerBlock, 0);
    set(cudaDevAttrSparseCudaArraySupported, 0);
    set(cudaDevAttrHostRegisterReadOnlySupported, 0);
    set(cudaDevAttrTimelineSemaphoreInteropSupported, 0);
    set(cudaDevAttrMemoryPoolsSupported, 1);  // stream-ordered pools (SimPool), no shareable handles
    set(cudaDevAttrGPUDirectRDMASupported, 0);
    set(cudaDevAttrGPUDirectRDMAFlushWritesOptions, 0);
    set(cudaDevAttrGPUDirectRDMAWritesOrdering, 0);
    set(cudaDevAttrMemoryPoolSupportedHandleTypes, 0);
    set(cudaDevAttrClusterLaunch, 0);
    set(cudaDevAttrDeferredMappingCudaArraySupported, 0);
    set(cudaDevAttrIpcEventSupport, 0);
    set(cudaDevAttrMemSyncDomainCount, 1);
    set(cudaDevAttrNumaConfig, 0);
    set(cudaDevAttrNumaId, -1);
    set(cudaDevAttrMpsEnabled, 0);
    set(cudaDevAttrHostNumaId, -1);
    set(cudaDevAttrD3D12CigSupported, 0);
    set(cudaDevAttrVulkanCigSupported, 0);
    set(cudaDevAttrGpuPciDeviceId, 0);
    set(cudaDevAttrGpuPciSubsystemId, 0);
    set(cudaDevAttrHostNumaMemoryPoolsSupported, 0);
    set(cudaDevAttrHostNumaMultinodeIpcSupported, 0);
    set(cudaDevAttrHostMemoryPoolsSupported, 0);
    set(cudaDevAttrOnlyPartialHostNativeAtomicSupported, 0);
    cudaDeviceProp& p = d->props;
    proto::props_from_attributes(*d, p);
    std::snprintf(p.name, sizeof(p.name), "Wormhole sim device (CPU, PTX interpreter)");
    p.totalGlobalMem = memory_;
    // A stable UUID per host (a GPU's is fixed for its life), marked as a
    // random-style (version 4) UUID.
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    uint64_t h1 = std::hash<std::string>{}(std::string("wormhole-sim/") + host);
    uint64_t h2 = std::hash<std::string>{}(std::string(host) + "/device0");
    std::memcpy(p.uuid.bytes, &h1, 8);
    std::memcpy(p.uuid.bytes + 8, &h2, 8);
    p.uuid.bytes[6] = char((p.uuid.bytes[6] & 0x0f) | 0x40);
    p.uuid.bytes[8] = char((p.uuid.bytes[8] & 0x3f) | 0x80);
    return cudaSuccess;
  }
  std::unique_ptr<Context> create_context(int device, const ContextLimits& limits,
                                          std::string* err) override {
    if (device != 0) {
      if (err) *err = "no such device";
      return nullptr;
    }
    uint64_t quota = limits.memory_quota ? std::min(limits.memory_quota, memory_) : memory_;
    uint64_t window = 0;
    if (limits.va_base) {
      // A restored session: its own window or none.
      window = limits.va_base >> kWindowShift;
      if (limits.va_base % kWindowBytes || window < kFirstWindow || window >= kFirstWindow + kWindows) {
        if (err) *err = "device addresses outside the sim device's range";
        return nullptr;
      }
      if (!windows_->take(window)) {
        if (err) *err = "the session's device addresses are another session's on this server";
        return nullptr;
      }
    } else {
      for (uint64_t i = 0;; i++) {
        window = kFirstWindow + next_window_.fetch_add(1) % kWindows;
        if (windows_->take(window)) break;
        if (i == kWindows) {
          if (err) *err = "every device-address window is in use";
          return nullptr;
        }
      }
    }
    proto::DeviceDescription d;
    describe(0, &d);
    auto c = std::make_unique<SimContext>(window, quota, limits.shared, memory_, used_, threads_, kernel_timeout_ms_, d);
    c->set_windows(windows_);
    c->set_tenant(limits.tenant);
    return c;
  }

 private:
  unsigned threads_;
  uint64_t memory_;
  uint64_t kernel_timeout_ms_;  // 0: kernels may run for ever, as on a GPU without a display
  std::atomic<uint64_t> next_window_{0};
  std::atomic<uint64_t> used_{0};  // all sessions' device memory
  std::shared_ptr<Windows> windows_ = std::make_shared<Windows>();
};

}  // namespace

std::unique_ptr<Backend> make_sim_backend(unsigned worker_threads, uint64_t memory_bytes, uint64_t kernel_timeout_ms,
                                          uint64_t device_va_base) {
  return std::make_unique<SimBackend>(worker_threads, memory_bytes, kernel_timeout_ms, device_va_base);
}

}  // namespace wh::server
