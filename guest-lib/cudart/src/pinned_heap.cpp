// The pinned heap: blocks of the channel's shared data area, and of the
// segments the heap grows into past it (docs/ARCHITECTURE.md, "Copies and
// pinned memory").
//
// Offsets are data-area offsets as the server reads them: the first area's
// own, or (k << kPinnedSegmentShift) + offset for grown segment k, so a
// copy from or to any pinned block names one offset and stays zero-copy.
// A segment comes from the server (PinnedGrow) as a memfd on the socket,
// mapped where the guest reserved room first, which is also its device
// address where the server can place it there (one pointer on host and
// device, as for the first area). It goes back (PinnedRelease) as soon as
// nothing in it is allocated, which returns its share of the user's budget.
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "state.hpp"

namespace wh::guest {

using namespace wh::proto;

namespace {

constexpr uint64_t kGrownBase = uint64_t(1) << kPinnedSegmentShift;  // offsets of segment 1 and up

struct Segment {
  uint8_t* base;
  uint64_t size;
  uint64_t dptr;  // its device address (the server maps it when made)
};
std::map<uint64_t, Segment> g_segments;     // index -> segment, under rt().mu
std::map<uintptr_t, uint64_t> g_by_base;    // base address -> index, under rt().mu
std::atomic<size_t> g_segment_count{0};     // lets in_data_area skip the lock while there are none
std::mutex g_grow_mu;                       // one PinnedGrow at a time
std::atomic<bool> g_grow_unsupported{false};  // the server has no segments for us (VM, ucx://)
// The segments' memfds, kept until the server has released each: a client
// resuming a checkpointed session hands them back with its region. Their own
// lock: a resume runs inside a call, perhaps one made under rt().mu.
std::mutex g_fd_mu;
std::map<uint64_t, int> g_segment_fds;

void heap_init(Connection* c) {
  Runtime& r = rt();
  if (r.heap_ready) return;
  uint64_t size = c->data().size();
  if (size > kPinnedHeapOffset) r.heap_free[kPinnedHeapOffset] = size - kPinnedHeapOffset;
  r.heap_ready = true;
}

// First fit among free blocks with offsets in [lo, hi); rt().mu held.
bool take(uint64_t need, uint64_t lo, uint64_t hi, uint64_t* off) {
  Runtime& r = rt();
  for (auto it = r.heap_free.lower_bound(lo); it != r.heap_free.end() && it->first < hi; ++it) {
    if (it->second < need) continue;
    *off = it->first;
    uint64_t rest = it->second - need;
    r.heap_free.erase(it);
    if (rest) r.heap_free[*off + need] = rest;
    r.heap_used[*off] = need;
    return true;
  }
  return false;
}

uint64_t rounded(size_t n) { return (std::max<size_t>(n, 1) + 255) & ~uint64_t(255); }

}  // namespace

bool heap_alloc(Connection* c, size_t n, uint64_t* off, uint64_t keep) {
  Runtime& r = rt();
  std::lock_guard lk(r.mu);
  heap_init(c);
  const uint64_t need = rounded(n);
  if (keep) {
    uint64_t free = 0;
    for (auto it = r.heap_free.begin(); it != r.heap_free.end() && it->first < kGrownBase; ++it) free += it->second;
    if (free < need + keep) return false;
  }
  return take(need, 0, kGrownBase, off);
}

bool heap_alloc_grown(Connection* c, size_t n, uint64_t* off, std::string* why) {
  const uint64_t need = rounded(n);
  {
    std::lock_guard lk(rt().mu);
    if (take(need, kGrownBase, UINT64_MAX, off)) return true;
  }
  if (!c->can_grow_pinned() || Connection::devices() > 1) {
    *why = "the heap grows only for clients of the local socket (not in a VM or over ucx://)";
    return false;
  }
  if (g_grow_unsupported.load(std::memory_order_relaxed)) {
    *why = "the server adds no pinned memory (wormhole-server --pinned-budget-mb 0)";
    return false;
  }
  std::lock_guard grow(g_grow_mu);
  {
    std::lock_guard lk(rt().mu);  // another thread may have grown it meanwhile
    if (take(need, kGrownBase, UINT64_MAX, off)) return true;
  }
  const uint64_t size = pinned_segment_bytes(need);
  if (size == 0) {
    *why = "larger than a pinned segment may be";
    return false;
  }
  // Room first, so that the server can map the segment on the device at the
  // address the process will see it.
  void* room = mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (room == MAP_FAILED) {
    *why = "no address space left";
    return false;
  }
  PinnedGrowResp rs{};
  cudaError_t e = c->call<Op::PinnedGrow>({need, reinterpret_cast<uint64_t>(room)}, &rs);
  if (e != cudaSuccess) {
    munmap(room, size);
    if (e == cudaErrorNotSupported) g_grow_unsupported = true;
    *why = e == cudaErrorNotSupported ? "the server adds no pinned memory (wormhole-server --pinned-budget-mb 0)"
                                      : "the server refused more pinned memory (the user's --pinned-budget-mb is "
                                        "used up: see the server's log)";
    return false;
  }
  const int fd = rs.size == size ? c->receive_segment(rs.segment, rs.size) : -1;
  void* at = fd >= 0 ? mmap(room, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) : MAP_FAILED;
  if (at == MAP_FAILED) {
    if (fd >= 0) close(fd);
    munmap(room, size);
    c->call<Op::PinnedRelease>({rs.segment});
    *why = "the server's pinned segment did not arrive";
    return false;
  }
  {
    // An entry already there is a released segment's whose releaser has not
    // taken it out yet: it closes its own descriptor.
    std::lock_guard fl(g_fd_mu);
    g_segment_fds[rs.segment] = fd;
  }
  std::lock_guard lk(rt().mu);
  const uint64_t first = rs.segment << kPinnedSegmentShift;
  g_segments[rs.segment] = {static_cast<uint8_t*>(at), size, rs.dptr};
  g_by_base[reinterpret_cast<uintptr_t>(at)] = rs.segment;
  g_segment_count.store(g_segments.size(), std::memory_order_relaxed);
  rt().heap_free[first] = size;
  return take(need, first, first + size, off);
}

bool heap_free(uint64_t off) {
  Runtime& r = rt();
  Segment gone{};
  uint64_t gone_index = 0;
  {
    std::lock_guard lk(r.mu);
    auto u = r.heap_used.find(off);
    if (u == r.heap_used.end()) return false;
    uint64_t size = u->second;
    r.heap_used.erase(u);
    // Blocks merge with their neighbours; never across segments, whose
    // offsets are 2^40 apart and whose sizes are below that.
    auto next = r.heap_free.lower_bound(off);
    if (next != r.heap_free.end() && off + size == next->first) {
      size += next->second;
      next = r.heap_free.erase(next);
    }
    auto block = r.heap_free.end();
    if (next != r.heap_free.begin() && std::prev(next)->first + std::prev(next)->second == off) {
      block = std::prev(next);
      block->second += size;
    } else {
      block = r.heap_free.emplace(off, size).first;
    }
    // A grown segment with nothing left in it goes back to the server.
    const uint64_t k = block->first >> kPinnedSegmentShift;
    if (k != 0 && (block->first & kPinnedSegmentMask) == 0) {
      auto s = g_segments.find(k);
      if (s != g_segments.end() && block->second == s->second.size) {
        r.heap_free.erase(block);
        gone = s->second;
        gone_index = k;
        g_by_base.erase(reinterpret_cast<uintptr_t>(gone.base));
        g_segments.erase(s);
        g_segment_count.store(g_segments.size(), std::memory_order_relaxed);
      }
    }
  }
  if (gone_index) {
    // After the server stopped using it (in order with earlier calls).
    int fd = -1;
    {
      std::lock_guard fl(g_fd_mu);
      if (auto f = g_segment_fds.find(gone_index); f != g_segment_fds.end()) fd = f->second;
    }
    if (Connection* c = Connection::get()) c->call<Op::PinnedRelease>({gone_index});
    munmap(gone.base, gone.size);
    // Its memfd goes once the server let the segment go (a resume during
    // the call still hands it back).
    std::lock_guard fl(g_fd_mu);
    if (auto f = g_segment_fds.find(gone_index); f != g_segment_fds.end() && f->second == fd) g_segment_fds.erase(f);
    if (fd >= 0) close(fd);
  }
  return true;
}

uint8_t* heap_host(Connection* c, uint64_t off) {
  const uint64_t k = off >> kPinnedSegmentShift;
  if (k == 0) return (Connection::devices() > 1 ? Connection::of(0) : c)->data().data() + off;
  std::lock_guard lk(rt().mu);
  auto s = g_segments.find(k);
  return s == g_segments.end() ? nullptr : s->second.base + (off & kPinnedSegmentMask);
}

bool in_grown_segment(const void* p, size_t n, uint64_t* off, uint64_t* dptr) {
  if (g_segment_count.load(std::memory_order_relaxed) == 0) return false;
  const auto a = reinterpret_cast<uintptr_t>(p);
  std::lock_guard lk(rt().mu);
  auto it = g_by_base.upper_bound(a);
  if (it == g_by_base.begin()) return false;
  --it;
  const Segment& s = g_segments.at(it->second);
  const uint64_t at = a - it->first;
  if (at >= s.size || n > s.size - at) return false;
  if (off) *off = (it->second << kPinnedSegmentShift) + at;
  if (dptr) *dptr = s.dptr + at;
  return true;
}

bool grown_block_locked(uint64_t dptr, uint64_t* base, uint64_t* bytes) {
  for (const auto& [k, s] : g_segments) {
    if (dptr < s.dptr || dptr - s.dptr >= s.size) continue;
    const uint64_t off = (k << kPinnedSegmentShift) + (dptr - s.dptr);
    auto b = rt().heap_used.upper_bound(off);
    if (b == rt().heap_used.begin() || off - (--b)->first >= b->second) return false;
    if (base) *base = s.dptr + (b->first & kPinnedSegmentMask);
    if (bytes) *bytes = b->second;
    return true;
  }
  return false;
}

std::vector<int> grown_segment_fds() {
  std::lock_guard fl(g_fd_mu);
  std::vector<int> fds;
  for (const auto& [k, fd] : g_segment_fds) fds.push_back(fd);
  return fds;
}

}  // namespace wh::guest
