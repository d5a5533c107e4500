// Device memory, pinned host memory and copies.
//
// Pinned memory (cudaMallocHost, cudaHostAlloc) is carved out of the
// channel's shared data area and the segments it grows into
// (pinned_heap.cpp), so copies from or to it are zero-copy for the server
// (it reads the same pages), and mapped memory is addressable by kernels. Pageable memory moves through staging slots in the data area,
// pipelined: the guest fills slot k+1 while the server empties slot k; the
// server publishes each finished chunk in the data area's status page.
#include <sched.h>

#include <cstdlib>
#include <cstring>
#include <thread>

#include "remote.hpp"
#include "state.hpp"

namespace wh::guest {

using namespace wh::proto;

namespace {

constexpr size_t kInlineMax = 64 << 10;  // small H2D copies travel inside the request

std::mutex g_staging_mu;  // one staged copy at a time per process
uint64_t g_copy_seq = 0;  // guarded by g_staging_mu

DataAreaStatus* status_page(Connection* c) { return reinterpret_cast<DataAreaStatus*>(c->data().data()); }

// The error of the failed copy that copy_error_seq names (stored before it).
cudaError_t copy_error(DataAreaStatus* st) {
  int32_t e = __atomic_load_n(&st->copy_error, __ATOMIC_RELAXED);
  return e > 0 ? cudaError_t(e) : cudaErrorInvalidValue;
}

// Waits until the server finished the staged chunk `seq`.
cudaError_t wait_copy_done(Connection* c, uint64_t seq) {
  auto* st = status_page(c);
  for (uint64_t spins = 0;; spins++) {
    if (__atomic_load_n(&st->copy_done_seq, __ATOMIC_ACQUIRE) >= seq) return cudaSuccess;
    if (spins < 20000) {
      ring::cpu_relax();
    } else {
      if (!c->alive()) return cudaErrorDevicesUnavailable;
      if (spins % 1024 == 0) {
        // A round trip proves the server alive (and lets it catch up). A
        // context broken by a kernel fault finishes no more copies: give up
        // with the fault rather than wait.
        MemGetInfoResp r{};
        cudaError_t e = c->call<Op::MemGetInfo>({}, &r);
        if (e == cudaErrorDevicesUnavailable) return e;
        if (is_sticky(e) && __atomic_load_n(&st->copy_done_seq, __ATOMIC_ACQUIRE) < seq) return e;
      }
      sched_yield();
    }
  }
}

cudaError_t staged_htod(Connection* c, uint64_t dst, const uint8_t* src, size_t n, uint64_t stream) {
  std::lock_guard lk(g_staging_mu);
  uint8_t* base = c->data().data();
  auto* st = status_page(c);
  const uint64_t first = g_copy_seq + 1;
  for (size_t off = 0; off < n; off += kStagingSlotBytes) {
    size_t len = std::min<size_t>(kStagingSlotBytes, n - off);
    uint64_t seq = ++g_copy_seq;
    uint64_t slot = seq % kStagingSlots;
    if (seq > kStagingSlots)
      if (cudaError_t e = wait_copy_done(c, seq - kStagingSlots); e != cudaSuccess) return e;
    uint64_t slot_off = kStagingOffset + slot * kStagingSlotBytes;
    std::memcpy(base + slot_off, src + off, len);
    MemcpyHtoDReq rq{dst + off, slot_off, len, stream, seq};
    bool last = off + len >= n;
    if (cudaError_t e = last ? c->call<Op::MemcpyHtoD>(rq) : c->post<Op::MemcpyHtoD>(rq); e != cudaSuccess) return e;
  }
  if (__atomic_load_n(&st->copy_error_seq, __ATOMIC_ACQUIRE) >= first) return copy_error(st);
  return cudaSuccess;
}

cudaError_t staged_dtoh(Connection* c, uint8_t* dst, uint64_t src, size_t n, uint64_t stream) {
  std::lock_guard lk(g_staging_mu);
  uint8_t* base = c->data().data();
  auto* st = status_page(c);
  const size_t chunks = (n + kStagingSlotBytes - 1) / kStagingSlotBytes;
  const uint64_t first = g_copy_seq + 1;
  // Whatever the exit, later copies number their chunks past this one's: a
  // number the server may still publish is never waited for again.
  g_copy_seq = first + chunks - 1;
  auto issue = [&](size_t i) {
    uint64_t seq = first + i;
    size_t off = i * kStagingSlotBytes;
    size_t len = std::min<size_t>(kStagingSlotBytes, n - off);
    uint64_t slot_off = kStagingOffset + (seq % kStagingSlots) * kStagingSlotBytes;
    return c->post<Op::MemcpyDtoH>({slot_off, src + off, len, stream, seq});
  };
  for (size_t i = 0; i < std::min<size_t>(chunks, kStagingSlots); i++)
    if (cudaError_t e = issue(i); e != cudaSuccess) return e;
  for (size_t i = 0; i < chunks; i++) {
    uint64_t seq = first + i;
    if (cudaError_t e = wait_copy_done(c, seq); e != cudaSuccess) return e;
    if (__atomic_load_n(&st->copy_error_seq, __ATOMIC_ACQUIRE) >= first) {
      // Drain what is still in flight so the slots are quiet again.
      wait_copy_done(c, std::min<uint64_t>(first + chunks - 1, seq + kStagingSlots - 1));
      return copy_error(st);
    }
    size_t off = i * kStagingSlotBytes;
    size_t len = std::min<size_t>(kStagingSlotBytes, n - off);
    std::memcpy(dst + off, base + kStagingOffset + (seq % kStagingSlots) * kStagingSlotBytes, len);
    if (i + kStagingSlots < chunks)
      if (cudaError_t e = issue(i + kStagingSlots); e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

// ucx:// (docs/remote.md): the server shares no memory with us, so the
// bytes travel in the messages, in chunks: host to device as posted inline
// copies (they stream with the batch; a synchronous copy ends with a call
// that reports any error), device to host as calls answered with the bytes.
cudaError_t remote_htod(Connection* c, uint64_t dst, const uint8_t* src, size_t n, uint64_t stream, bool async) {
  const size_t chunk = std::min<size_t>(kRemoteChunkMax, c->max_msg() - sizeof(MemcpyHtoDInlineReq));
  for (size_t off = 0; off < n; off += chunk) {
    size_t len = std::min(chunk, n - off);
    bool last = off + len >= n;
    MemcpyHtoDInlineReq rq{dst + off, stream};
    std::span<const uint8_t> bytes{src + off, len};
    cudaError_t e = last && !async ? c->call<Op::MemcpyHtoDInline>(rq, nullptr, bytes)
                                   : c->post<Op::MemcpyHtoDInline>(rq, bytes);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

cudaError_t remote_dtoh(Connection* c, uint8_t* dst, uint64_t src, size_t n, uint64_t stream) {
  const size_t chunk = std::min<size_t>(kRemoteChunkMax, c->max_msg() - 64);
  constexpr size_t kWindow = 4;  // chunks asked for at once
  std::vector<MemcpyDtoHInlineReq> rq;
  std::vector<std::span<const uint8_t>> spans;
  std::vector<uint8_t*> dsts;
  std::vector<size_t> bytes;
  std::vector<wh_msg_hdr> got;
  for (size_t off = 0; off < n;) {
    rq.clear();
    spans.clear();
    dsts.clear();
    bytes.clear();
    for (size_t k = 0; k < kWindow && off + k * chunk < n; k++) {
      size_t at = off + k * chunk;
      rq.push_back({src + at, std::min(chunk, n - at), stream});
      dsts.push_back(dst + at);
      bytes.push_back(rq.back().bytes);
    }
    for (auto& r : rq) spans.push_back({reinterpret_cast<const uint8_t*>(&r), sizeof r});
    // Each answer's bytes land in dst directly (no staging buffer; from
    // UCX-registered memory when dst is pinned).
    if (ring::Status s = c->remote_link()->call_many_into(uint16_t(Op::MemcpyDtoHInline), spans, dsts, bytes, got);
        s != ring::Status::Ok)
      return c->remote_error(s);
    for (size_t k = 0; k < rq.size(); k++) {
      if (got[k].status != 0) return got[k].status < 0 ? cudaErrorUnknown : cudaError_t(got[k].status);
      if (got[k].len != rq[k].bytes) return cudaErrorUnknown;
    }
    off += rq.size() * chunk;
  }
  return cudaSuccess;
}

}  // namespace

// ucx://: the links that pinned memory is registered with (each server's,
// with several); no connection is made for it where none is named (the ring
// transports register nothing).
template <class F>
static void for_each_pinning_link(F f) {
  const char* srv = std::getenv("WORMHOLE_SERVER");
  if (!srv || !*srv) return;
  Connection* c = Connection::get();
  if (!c || !c->remote()) return;
  if (Connection::devices() <= 1) return f(c->remote_link());
  for (int d = 0; d < Connection::devices(); d++)
    if (Connection* o = Connection::of(d)) f(o->remote_link());
}

// ucx://: what the guest put in its pinned heap for the server to read
// (a fatbin, a graph's node list) is sent to the session's data area.
// Several servers: the guest's pinned heap is device 0's data area, and
// what it holds is sent to whichever session needs it.
cudaError_t push_data_area(Connection* c, uint64_t off, size_t n) {
  if (!c->remote()) return cudaSuccess;
  const size_t chunk = std::min<size_t>(kRemoteChunkMax, c->max_msg() - sizeof(DataAreaWriteReq));
  const uint8_t* base = (Connection::devices() > 1 ? Connection::of(0) : c)->data().data();
  for (size_t at = 0; at < n; at += chunk) {
    size_t len = std::min(chunk, n - at);
    if (cudaError_t e = c->post<Op::DataAreaWrite>({off + at}, {base + off + at, len}); e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

// Host memory the server reads or writes itself: the data area, shared
// except over ucx://.
bool server_sees(Connection* c, const void* p, size_t n, uint64_t* off) {
  return !c->remote() && in_data_area(p, n, off);
}

// Blocks of the data area's heap for managed memory (managed.cpp).
bool heap_alloc_block(size_t n, uint64_t* off) {
  Connection* c = Connection::get();
  return c && heap_alloc(c, n, off);
}
bool heap_free_block(uint64_t off) { return heap_free(off); }

cudaError_t data_area_block(Connection* c, size_t n, void** p, uint64_t* off) {
  if (!heap_alloc(c, n, off)) {
    log_once("the data area's pinned heap is full: module images and graph node lists need room there "
             "(wormhole-server --pinned-mb sets its size; grown pinned segments do not hold them)");
    return cudaErrorMemoryAllocation;
  }
  *p = (Connection::devices() > 1 ? Connection::of(0) : c)->data().data() + *off;
  return cudaSuccess;
}

bool in_data_area(const void* p, size_t n, uint64_t* off) {
  Connection* c = Connection::devices() > 1 ? Connection::of(0) : Connection::get();
  if (!c) return false;
  auto d = c->data();
  auto a = reinterpret_cast<uintptr_t>(p), b = reinterpret_cast<uintptr_t>(d.data());
  if (a < b || a - b > d.size() || n > d.size() - (a - b)) return in_grown_segment(p, n, off, nullptr);
  *off = a - b;
  return true;
}

bool is_device_ptr(const void* p) {
  Runtime& r = rt();
  auto a = reinterpret_cast<uint64_t>(p);
  std::lock_guard lk(r.mu);
  auto it = r.allocs.upper_bound(a);
  if (it != r.allocs.begin() && a - std::prev(it)->first < std::prev(it)->second.bytes) return true;
  if (is_managed_ptr(p)) return true;
  for (auto& [h, v] : r.vars)
    if (v->dptr && a >= v->dptr && a - v->dptr < v->size) return true;
  return false;
}

namespace {
cudaError_t memcpy_core(void* dst, const void* src, size_t n, cudaMemcpyKind kind, cudaStream_t s, bool async) {
  if (n == 0) return cudaSuccess;
  if (!dst || !src) return cudaErrorInvalidValue;
  if (capture_any()) {
    if (async && stream_capturing(s)) return capture_copy(s, dst, n, src, n, n, 1, kind);
    if (!async)
      if (cudaError_t e = capture_check_unsafe(s); e != cudaSuccess) return e;
  }
  WH_CONN(c);
  if (Connection::devices() > 1) [[unlikely]] {
    // Several servers: the copy goes to the server owning the device memory
    // (like UVA); between two servers it is a peer copy.
    const int sd = device_of(src), dd = device_of(dst);
    if (sd >= 0 && dd >= 0 && sd != dd) return peer_copy(dd, dst, sd, src, n, s, async);
    const int want = dd >= 0 ? dd : sd;
    if (want >= 0 && want != t_current_device) {
      // `s` belongs to the current device: work queued there first, then
      // the copy on the owner's default stream, done when this returns.
      if (s)
        if (cudaError_t e = c->call<Op::StreamSynchronize>({stream_handle(s)}); e != cudaSuccess) return e;
      DeviceScope on(want);
      return memcpy_core(dst, src, n, kind, nullptr, false);
    }
  }
  if (kind == cudaMemcpyDefault) {
    bool sd = is_device_ptr(src), dd = is_device_ptr(dst);
    kind = sd ? (dd ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost)
              : (dd ? cudaMemcpyHostToDevice : cudaMemcpyHostToHost);
  }
  const uint64_t sh = stream_handle(s);
  uint64_t off = 0;
  switch (kind) {
    case cudaMemcpyHostToHost:
      if (!async) c->call<Op::StreamSynchronize>({sh});
      std::memmove(dst, src, n);
      return cudaSuccess;
    case cudaMemcpyHostToDevice: {
      const uint64_t d = reinterpret_cast<uint64_t>(dst);
      if (server_sees(c, src, n, &off)) return c->send<Op::MemcpyHtoD>(async, {d, off, n, sh, 0});
      if (n <= kInlineMax && n + sizeof(MemcpyHtoDInlineReq) <= c->max_msg())
        return c->send<Op::MemcpyHtoDInline>(async, {d, sh}, {static_cast<const uint8_t*>(src), n});
      if (c->remote()) return remote_htod(c, d, static_cast<const uint8_t*>(src), n, sh, async);
      return staged_htod(c, d, static_cast<const uint8_t*>(src), n, sh);
    }
    case cudaMemcpyDeviceToHost: {
      const uint64_t sp = reinterpret_cast<uint64_t>(src);
      if (server_sees(c, dst, n, &off)) return c->send<Op::MemcpyDtoH>(async, {off, sp, n, sh, 0});
      if (c->remote()) return remote_dtoh(c, static_cast<uint8_t*>(dst), sp, n, sh);
      return staged_dtoh(c, static_cast<uint8_t*>(dst), sp, n, sh);
    }
    case cudaMemcpyDeviceToDevice:
      return c->send<Op::MemcpyDtoD>(async, {reinterpret_cast<uint64_t>(dst), reinterpret_cast<uint64_t>(src), n, sh});
    default:
      return cudaErrorInvalidMemcpyDirection;
  }
}
}  // namespace

cudaError_t do_memcpy(void* dst, const void* src, size_t n, cudaMemcpyKind kind, cudaStream_t s, bool async) {
  cudaError_t e = memcpy_core(dst, src, n, kind, s, async);
  // A blocking copy is a synchronising call.
  if (!async && n)
    if (Connection* c = Connection::get()) flush_device_output(c);
  return e;
}

// Several servers: records which device owns [dptr, dptr+size). Servers
// place allocations in their own address windows (wormhole-server
// --device-va-base; the cuda backend cannot choose): an allocation that
// overlaps another device's is refused (false), as the copies that name it
// could not be routed. Expects rt().mu held.
bool note_alloc_locked(uint64_t dptr, uint64_t size) {
  Runtime& r = rt();
  if (Connection::devices() > 1) {
    auto next = r.allocs.lower_bound(dptr);
    bool clash = next != r.allocs.end() && next->first < dptr + std::max<uint64_t>(size, 1);
    if (next != r.allocs.begin()) {
      auto prev = std::prev(next);
      clash = clash || prev->first + std::max<uint64_t>(prev->second.bytes, 1) > dptr;
    }
    if (clash) {
      log_once("cudaMalloc on device " + std::to_string(t_current_device) +
               ": refused, its server placed the memory where another device's is (give each server its own "
               "--device-va-base)");
      return false;
    }
  }
  r.allocs[dptr] = {size, t_current_device};
  return true;
}

void forget_alloc_locked(uint64_t dptr) {
  rt().allocs.erase(dptr);
}

cudaError_t device_alloc(size_t size, uint64_t* dptr) {
  WH_CONN(c);
  MallocResp rs{};
  if (cudaError_t e = c->call<Op::Malloc>({size}, &rs); e != cudaSuccess) return e;
  *dptr = rs.dptr;
  if (rs.dptr) {
    std::unique_lock lk(rt().mu);
    if (!note_alloc_locked(rs.dptr, size)) {
      lk.unlock();
      c->call<Op::Free>({rs.dptr});
      *dptr = 0;
      return cudaErrorMemoryAllocation;
    }
  }
  return cudaSuccess;
}

cudaError_t device_free(uint64_t dptr) {
  DeviceScope on(device_of(reinterpret_cast<void*>(dptr)));  // several servers: the owner's
  WH_CONN(c);
  cudaError_t e = c->call<Op::Free>({dptr});
  if (e == cudaSuccess) {
    std::lock_guard lk(rt().mu);
    forget_alloc_locked(dptr);
  }
  return e;
}

// A copy between two servers' devices: server to server (peer_api.def): a
// ticket from the destination, a push by the source, a commit by the
// destination, per chunk of at most kPeerChunkMax. Servers without peer
// copies (cudaErrorNotSupported) get it through this process instead (a D2H
// then an H2D, in chunks).
cudaError_t peer_copy(int dst_dev, void* dst, int src_dev, const void* src, size_t n, cudaStream_t s, bool async) {
  (void)async;
  if (n == 0) return cudaSuccess;
  if (dst_dev < 0 || src_dev < 0 || dst_dev >= Connection::devices() || src_dev >= Connection::devices())
    return cudaErrorInvalidDevice;
  if (s) {  // the stream's earlier work first
    WH_CONN(c);
    if (cudaError_t e = c->call<Op::StreamSynchronize>({stream_handle(s)}); e != cudaSuccess) return e;
  }
  Connection* cs = Connection::of(src_dev);
  Connection* cd = Connection::of(dst_dev);
  if (!cs || !cd) return cudaErrorInvalidDevice;
  static const bool via_client = [] {
    const char* v = std::getenv("WORMHOLE_PEER_VIA_CLIENT");
    return v && *v == '1';
  }();
  size_t at = 0;
  for (; !via_client && at < n;) {
    const size_t len = std::min<size_t>(kPeerChunkMax, n - at);
    const uint64_t d = reinterpret_cast<uint64_t>(dst) + at, sp = reinterpret_cast<uint64_t>(src) + at;
    PeerTicketResp tk{};
    cudaError_t e = cd->call<Op::PeerTicket>({d, len}, &tk);
    if (e == cudaErrorNotSupported && at == 0) break;  // an older server: through us
    if (e != cudaSuccess) return e;
    const std::string& url = cd->url();
    PeerPushReq rq{sp, len, {tk.ticket[0], tk.ticket[1]}, d};
    e = cs->call<Op::PeerPush>(rq, nullptr, {reinterpret_cast<const uint8_t*>(url.data()), url.size()});
    // The destination drops an unused ticket when it expires.
    if (e != cudaSuccess) return e;
    if ((e = cd->call<Op::PeerCommit>({{tk.ticket[0], tk.ticket[1]}})); e != cudaSuccess) return e;
    at += len;
  }
  if (at >= n) return cudaSuccess;
  constexpr size_t kChunk = 8 << 20;
  std::vector<uint8_t> buf(std::min(n, kChunk));
  for (; at < n; at += kChunk) {
    size_t len = std::min(kChunk, n - at);
    {
      DeviceScope on(src_dev);
      if (cudaError_t e = memcpy_core(buf.data(), static_cast<const uint8_t*>(src) + at, len,
                                      cudaMemcpyDeviceToHost, nullptr, false);
          e != cudaSuccess)
        return e;
    }
    DeviceScope on(dst_dev);
    if (cudaError_t e = memcpy_core(static_cast<uint8_t*>(dst) + at, buf.data(), len, cudaMemcpyHostToDevice,
                                    nullptr, false);
        e != cudaSuccess)
      return e;
  }
  return cudaSuccess;
}

}  // namespace wh::guest

using namespace wh::guest;
using namespace wh::proto;

extern "C" {

cudaError_t cudaMalloc(void** p, size_t size) {
  if (!p) return set_error(cudaErrorInvalidValue);
  if (capture_any())
    if (cudaError_t e = capture_check_unsafe(nullptr); e != cudaSuccess) return set_error(e);
  uint64_t d = 0;
  if (cudaError_t e = device_alloc(size, &d); e != cudaSuccess) return set_error(e);
  *p = reinterpret_cast<void*>(d);
  return cudaSuccess;
}

cudaError_t cudaMallocPitch(void** p, size_t* pitch, size_t width, size_t height) {
  if (!pitch) return set_error(cudaErrorInvalidValue);
  size_t align = 512;  // cudaDeviceProp::texturePitchAlignment-style rounding
  *pitch = (width + align - 1) / align * align;
  if (height && *pitch > SIZE_MAX / height) return set_error(cudaErrorInvalidValue);
  return cudaMalloc(p, *pitch * height);
}

cudaError_t cudaFree(void* p) {
  if (!p) return cudaSuccess;
  WH_CONN(c);
  if (cudaError_t me; managed_free(c, p, &me)) return set_error(me);
  if (cudaError_t ge; graph_mem_free(p, &ge)) return set_error(ge);
  return set_error(device_free(reinterpret_cast<uint64_t>(p)));
}

// ---- stream-ordered allocation. A cudaMemPool_t is the server's pool
// handle; allocating waits for the pointer, freeing is posted (its errors
// surface at the next synchronising call, as CUDA's do).
static cudaError_t malloc_async(void** p, size_t size, uint64_t pool, cudaStream_t s) {
  if (!p) return cudaErrorInvalidValue;
  WH_CONN(c);
  MallocAsyncResp rs{};
  cudaError_t e = c->call<Op::MallocAsync>({size, stream_handle(s), pool}, &rs);
  if (e != cudaSuccess) return e;
  *p = reinterpret_cast<void*>(rs.dptr);
  if (rs.dptr) {
    std::unique_lock lk(rt().mu);
    if (!note_alloc_locked(rs.dptr, size)) {
      lk.unlock();
      c->post<Op::FreeAsync>({rs.dptr, stream_handle(s)});
      *p = nullptr;
      return cudaErrorMemoryAllocation;
    }
  }
  return cudaSuccess;
}

static uint64_t pool_handle(cudaMemPool_t p) { return reinterpret_cast<uint64_t>(p); }

cudaError_t cudaMallocAsync(void** p, size_t size, cudaStream_t s) {
  if (cudaError_t ce; capture_any() && capture_malloc(s, p, size, &ce)) return set_error(ce);
  return set_error(malloc_async(p, size, 0, s));
}

cudaError_t cudaMallocFromPoolAsync(void** p, size_t size, cudaMemPool_t pool, cudaStream_t s) {
  if (!pool) return set_error(cudaErrorInvalidValue);
  return set_error(malloc_async(p, size, pool_handle(pool), s));
}

cudaError_t cudaFreeAsync(void* p, cudaStream_t s) {
  const int owner = device_of(p);
  if (owner >= 0 && owner != t_current_device) {  // several servers: another's memory
    if (cudaError_t e = cudaStreamSynchronize(s); e != cudaSuccess) return e;
    DeviceScope on(owner);
    return cudaFreeAsync(p, nullptr);
  }
  WH_CONN(c);
  if (cudaError_t ce; capture_any() && capture_free(s, p, &ce)) return set_error(ce);
  if (cudaError_t ge; p && graph_mem_free(p, &ge)) return set_error(ge);
  cudaError_t e = c->post<Op::FreeAsync>({reinterpret_cast<uint64_t>(p), stream_handle(s)});
  if (e == cudaSuccess && p) {
    std::lock_guard lk(rt().mu);
    forget_alloc_locked(reinterpret_cast<uint64_t>(p));
  }
  return set_error(e);
}

cudaError_t cudaMallocAsync_ptsz(void** p, size_t size, cudaStream_t s) { return cudaMallocAsync(p, size, s); }
cudaError_t cudaMallocFromPoolAsync_ptsz(void** p, size_t size, cudaMemPool_t pool, cudaStream_t s) {
  return cudaMallocFromPoolAsync(p, size, pool, s);
}
cudaError_t cudaFreeAsync_ptsz(void* p, cudaStream_t s) { return cudaFreeAsync(p, s); }

static cudaError_t device_pool(cudaMemPool_t* pool, int device, uint32_t which) {
  if (!pool) return cudaErrorInvalidValue;
  WH_CONN(c);
  DeviceGetMemPoolResp rs{};
  cudaError_t e = c->call<Op::DeviceGetMemPool>({device, which}, &rs);
  if (e == cudaSuccess) *pool = reinterpret_cast<cudaMemPool_t>(rs.pool);
  return e;
}

cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* pool, int device) {
  return set_error(device_pool(pool, device, 1));
}

cudaError_t cudaDeviceGetMemPool(cudaMemPool_t* pool, int device) { return set_error(device_pool(pool, device, 0)); }

cudaError_t cudaDeviceSetMemPool(int device, cudaMemPool_t pool) {
  if (!pool) return set_error(cudaErrorInvalidValue);
  WH_CONN(c);
  return set_error(c->call<Op::DeviceSetMemPool>({device, 0, pool_handle(pool)}));
}

cudaError_t cudaMemPoolCreate(cudaMemPool_t* pool, const cudaMemPoolProps* props) {
  if (!pool || !props) return set_error(cudaErrorInvalidValue);
  for (unsigned char b : props->reserved)
    if (b) return set_error(cudaErrorInvalidValue);  // "must be 0"
  if (props->win32SecurityAttributes) return set_error(cudaErrorInvalidValue);
  WH_CONN(c);
  MemPoolCreateReq rq{uint64_t(props->maxSize), int32_t(props->allocType), int32_t(props->handleTypes),
                      int32_t(props->location.type), int32_t(props->location.id), uint32_t(props->usage), 0};
  MemPoolCreateResp rs{};
  cudaError_t e = c->call<Op::MemPoolCreate>(rq, &rs);
  if (e == cudaSuccess) *pool = reinterpret_cast<cudaMemPool_t>(rs.pool);
  return set_error(e);
}

cudaError_t cudaMemPoolDestroy(cudaMemPool_t pool) {
  if (!pool) return set_error(cudaErrorInvalidValue);
  WH_CONN(c);
  return set_error(c->call<Op::MemPoolDestroy>({pool_handle(pool)}));
}

cudaError_t cudaMemPoolTrimTo(cudaMemPool_t pool, size_t keep) {
  if (!pool) return set_error(cudaErrorInvalidValue);
  WH_CONN(c);
  return set_error(c->call<Op::MemPoolTrimTo>({pool_handle(pool), keep}));
}

// The reuse switches are ints; the amounts and the threshold 64-bit.
static bool pool_int_attr(cudaMemPoolAttr a) { return a <= cudaMemPoolReuseAllowInternalDependencies; }
static bool pool_attr_known(cudaMemPoolAttr a) {
  return a >= cudaMemPoolReuseFollowEventDependencies && a <= cudaMemPoolAttrUsedMemHigh;
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void* value) {
  if (!pool || !value || !pool_attr_known(attr)) return set_error(cudaErrorInvalidValue);
  WH_CONN(c);
  uint64_t v = pool_int_attr(attr) ? uint64_t(*static_cast<int*>(value) != 0) : *static_cast<uint64_t*>(value);
  return set_error(c->call<Op::MemPoolSetAttr>({pool_handle(pool), v, int32_t(attr), 0}));
}

cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void* value) {
  if (!pool || !value || !pool_attr_known(attr)) return set_error(cudaErrorInvalidValue);
  WH_CONN(c);
  MemPoolGetAttrResp rs{};
  cudaError_t e = c->call<Op::MemPoolGetAttr>({pool_handle(pool), int32_t(attr), 0}, &rs);
  if (e != cudaSuccess) return set_error(e);
  if (pool_int_attr(attr)) *static_cast<int*>(value) = int(rs.value);
  else *static_cast<uint64_t*>(value) = rs.value;
  return cudaSuccess;
}

// When the pinned heap can grow no further (no segments on this transport,
// or the user's budget is used up: `why`), cudaHostAlloc returns ordinary
// page-aligned memory instead of failing, as a GPU machine with RAM to
// spare would succeed: copies with it are staged like pageable memory's
// (slower, same results) and kernels cannot address it, so an allocation
// that asks to be mapped is refused instead.
static cudaError_t host_alloc_overflow(void** p, size_t size, unsigned int flags, const std::string& why) {
  if (flags & cudaHostAllocMapped) {
    log_once("pinned heap full (" + why + "): a mapped cudaHostAlloc fails");
    return cudaErrorMemoryAllocation;
  }
  void* q = nullptr;
  if (posix_memalign(&q, 4096, std::max<size_t>(size, 1)) != 0) return cudaErrorMemoryAllocation;
  log_once("pinned heap full (" + why + "): cudaHostAlloc returns pageable memory; copies with it are staged and "
           "kernels cannot address it");
  {
    std::lock_guard lk(rt().mu);
    rt().host_overflow[reinterpret_cast<uintptr_t>(q)] = {size, flags};
  }
  for_each_pinning_link([&](RemoteLink* r) { r->pin(q, size); });
  *p = q;
  return cudaSuccess;
}

// The overflow allocation that holds p (size and flags); `start`: only
// one that begins at p (cudaFreeHost, cudaHostGetFlags).
static bool host_overflow_of(const void* p, std::pair<size_t, unsigned>* out, bool start = true) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  std::lock_guard lk(rt().mu);
  auto it = rt().host_overflow.upper_bound(a);
  if (it == rt().host_overflow.begin()) return false;
  --it;
  if (start ? it->first != a : a - it->first >= std::max<size_t>(it->second.first, 1)) return false;
  if (out) *out = it->second;
  return true;
}

cudaError_t cudaHostAlloc(void** p, size_t size, unsigned int flags) {
  if (!p) return set_error(cudaErrorInvalidValue);
  WH_CONN(c);
  uint64_t off;
  // An eighth of the heap (at most 32 MiB) stays for the runtime's own use.
  const uint64_t heap = c->data().size() > kPinnedHeapOffset ? c->data().size() - kPinnedHeapOffset : 0;
  // Past the first area, segments the heap grows into (socket clients).
  if (!heap_alloc(c, size, &off, std::min<uint64_t>(heap / 8, 32ull << 20))) {
    std::string why;
    if (c->remote() || !heap_alloc_grown(c, size, &off, &why))
      return set_error(host_alloc_overflow(p, size, flags, c->remote() ? "ucx:// has no shared segments" : why));
  }
  *p = heap_host(c, off);
  if (c->remote()) for_each_pinning_link([&](RemoteLink* r) { r->pin(*p, size); });  // registered with UCX once
  // Unified addressing: kernels may use pinned memory at its host address
  // (zero-copy buffers, flags a kernel polls). The data area it lives in is
  // mapped into the device once, at the guest's own address where the
  // server can place it there; where it cannot, pinned memory is still
  // pinned memory, and cudaHostGetDevicePointer says so.
  if (!c->remote() && Connection::devices() == 1) {
    uint64_t base = 0;
    (void)ensure_mapped(c, &base);
  }
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** p, size_t size) { return cudaHostAlloc(p, size, cudaHostAllocDefault); }

cudaError_t cudaFreeHost(void* p) {
  if (!p) return cudaSuccess;
  uint64_t off;
  if (!in_data_area(p, 1, &off)) {
    std::pair<size_t, unsigned> o;
    if (!host_overflow_of(p, &o)) return set_error(cudaErrorInvalidValue);
    for_each_pinning_link([&](RemoteLink* r) { r->unpin(p); });
    {
      std::lock_guard lk(rt().mu);
      rt().host_overflow.erase(reinterpret_cast<uintptr_t>(p));
    }
    std::free(p);
    return cudaSuccess;
  }
  for_each_pinning_link([&](RemoteLink* r) { r->unpin(p); });
  if (!heap_free(off)) return set_error(cudaErrorInvalidValue);
  return cudaSuccess;
}

cudaError_t cudaHostGetDevicePointer(void** dptr, void* host, unsigned int flags) {
  if (!dptr || flags != 0) return set_error(cudaErrorInvalidValue);
  WH_CONN(c);
  uint64_t off;
  if (!in_data_area(host, 1, &off)) {
    // Registered pageable memory stays in this process: the device reaches
    // only the pinned heap, which lives in the region it shares.
    std::lock_guard lk(rt().mu);
    auto it = rt().host_registered.upper_bound(reinterpret_cast<uintptr_t>(host));
    if (it != rt().host_registered.begin() && reinterpret_cast<uintptr_t>(host) - (--it)->first < it->second) {
      log_once("cudaHostGetDevicePointer: registered pageable memory is not device-addressable "
               "(allocate it with cudaHostAlloc / cuMemHostAlloc)");
      return set_error(cudaErrorNotSupported);
    }
    return set_error(cudaErrorInvalidValue);
  }
  if (uint64_t d = 0; off >> kPinnedSegmentShift) {  // a grown segment, mapped when it was made
    if (!in_grown_segment(host, 1, nullptr, &d)) return set_error(cudaErrorInvalidValue);
    *dptr = reinterpret_cast<void*>(d);
    return cudaSuccess;
  }
  uint64_t base = 0;
  if (cudaError_t e = ensure_mapped(c, &base); e != cudaSuccess) return set_error(e);
  *dptr = reinterpret_cast<void*>(base + off);
  return cudaSuccess;
}

cudaError_t cudaHostGetFlags(unsigned int* flags, void* host) {
  uint64_t off;
  if (std::pair<size_t, unsigned> o; flags && host_overflow_of(host, &o)) {
    *flags = o.second;
    return cudaSuccess;
  }
  if (!flags || !in_data_area(host, 1, &off)) return set_error(cudaErrorInvalidValue);
  *flags = cudaHostAllocMapped;
  return cudaSuccess;
}

// Registered pageable memory keeps copy semantics (it is staged), which is
// what CUDA guarantees; it is not made device-addressable, so a mapped
// registration (the device to reach this memory) is refused, leaving
// nothing registered.
cudaError_t cudaHostRegister(void* p, size_t size, unsigned int flags) {
  if (!p || !size) return set_error(cudaErrorInvalidValue);
  if (flags & cudaHostRegisterMapped) {
    log_once("cudaHostRegister: mapped registration is not supported: the device reaches only pinned memory "
             "(cudaHostAlloc / cuMemHostAlloc)");
    return set_error(cudaErrorNotSupported);
  }
  std::lock_guard lk(rt().mu);
  auto [it, fresh] = rt().host_registered.emplace(reinterpret_cast<uintptr_t>(p), size);
  if (!fresh) return set_error(cudaErrorHostMemoryAlreadyRegistered);
  for_each_pinning_link([&](RemoteLink* r) { r->pin(p, size); });
  return cudaSuccess;
}

cudaError_t cudaHostUnregister(void* p) {
  std::lock_guard lk(rt().mu);
  if (!rt().host_registered.erase(reinterpret_cast<uintptr_t>(p))) return set_error(cudaErrorHostMemoryNotRegistered);
  for_each_pinning_link([&](RemoteLink* r) { r->unpin(p); });
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, cudaMemcpyKind kind) {
  return set_error(do_memcpy(dst, src, n, kind, nullptr, false));
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, cudaMemcpyKind kind, cudaStream_t s) {
  return set_error(do_memcpy(dst, src, n, kind, s, true));
}

// Between two devices: on one server an ordinary device copy; between two
// servers (docs/remote.md "Several servers") a peer copy.
static cudaError_t memcpy_peer(void* dst, int dst_dev, const void* src, int src_dev, size_t n, cudaStream_t s,
                               bool async) {
  if (cudaError_t e = ensure_props(); e != cudaSuccess) return e;
  const int count = Connection::devices();
  if (dst_dev < 0 || src_dev < 0 || dst_dev >= count || src_dev >= count) return cudaErrorInvalidDevice;
  if (n == 0) return cudaSuccess;
  if (dst_dev == src_dev) {
    if (dst_dev != t_current_device && s) {  // `s` is the current device's
      if (cudaError_t e = cudaStreamSynchronize(s); e != cudaSuccess) return e;
      s = nullptr;
      async = false;
    }
    DeviceScope on(dst_dev);
    return do_memcpy(dst, src, n, cudaMemcpyDeviceToDevice, s, async);
  }
  return peer_copy(dst_dev, dst, src_dev, src, n, s, async);
}

cudaError_t cudaMemcpyPeer(void* dst, int dst_dev, const void* src, int src_dev, size_t n) {
  return set_error(memcpy_peer(dst, dst_dev, src, src_dev, n, nullptr, false));
}

cudaError_t cudaMemcpyPeerAsync(void* dst, int dst_dev, const void* src, int src_dev, size_t n, cudaStream_t s) {
  return set_error(memcpy_peer(dst, dst_dev, src, src_dev, n, s, true));
}

}  // extern "C"

cudaError_t wh::guest::do_memcpy2d(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                                   size_t height, cudaMemcpyKind kind, cudaStream_t s, bool async) {
  if (!height || !width) return cudaSuccess;
  if (width > dpitch || width > spitch) return cudaErrorInvalidPitchValue;
  if (capture_any()) {
    if (async && stream_capturing(s)) return capture_copy(s, dst, dpitch, src, spitch, width, height, kind);
    if (!async)
      if (cudaError_t e = capture_check_unsafe(s); e != cudaSuccess) return e;
  }
  WH_CONN(c);
  if (kind == cudaMemcpyDefault) {
    bool sd = is_device_ptr(src), dd = is_device_ptr(dst);
    kind = sd ? (dd ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost)
              : (dd ? cudaMemcpyHostToDevice : cudaMemcpyHostToHost);
  }
  const uint64_t sext = (height - 1) * spitch + width, dext = (height - 1) * dpitch + width;
  uint64_t so = reinterpret_cast<uint64_t>(src), dO = reinterpret_cast<uint64_t>(dst), off;
  bool whole = true;  // can the server do it in one request?
  if (kind == cudaMemcpyHostToDevice) whole = server_sees(c, src, sext, &off) && ((so = off), true);
  if (kind == cudaMemcpyDeviceToHost) whole = server_sees(c, dst, dext, &off) && ((dO = off), true);
  if (kind == cudaMemcpyHostToHost) whole = false;
  if (whole)
    return c->send<Op::Memcpy2D>(async, {dO, dpitch, so, spitch, width, height, uint32_t(kind), 0, stream_handle(s)});
  // Pageable host side: row by row through the ordinary copy path.
  for (size_t r = 0; r < height; r++) {
    cudaError_t e = do_memcpy(static_cast<uint8_t*>(dst) + r * dpitch, static_cast<const uint8_t*>(src) + r * spitch,
                              width, kind, s, false);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

extern "C" {

cudaError_t cudaMemcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                         cudaMemcpyKind kind) {
  cudaError_t e = do_memcpy2d(dst, dpitch, src, spitch, width, height, kind, nullptr, false);
  if (Connection* c = Connection::get()) flush_device_output(c);
  return set_error(e);
}

cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                              cudaMemcpyKind kind, cudaStream_t s) {
  return set_error(do_memcpy2d(dst, dpitch, src, spitch, width, height, kind, s, true));
}

cudaError_t cudaMemset(void* p, int value, size_t n) {
  if (capture_any())
    if (cudaError_t e = capture_check_unsafe(nullptr); e != cudaSuccess) return set_error(e);
  DeviceScope on(device_of(p));  // several servers: the owner's
  WH_CONN(c);
  return set_error(c->call<Op::Memset>({reinterpret_cast<uint64_t>(p), n, 0, value, 0}));
}

cudaError_t cudaMemsetAsync(void* p, int value, size_t n, cudaStream_t s) {
  if (capture_any() && stream_capturing(s)) return set_error(capture_memset(s, p, value, n));
  if (const int owner = device_of(p); owner >= 0 && owner != t_current_device) {
    // Several servers: another device's memory, on its default stream.
    if (cudaError_t e = cudaStreamSynchronize(s); e != cudaSuccess) return e;
    return cudaMemset(p, value, n);
  }
  WH_CONN(c);
  return set_error(c->post<Op::Memset>({reinterpret_cast<uint64_t>(p), n, stream_handle(s), value, 0}));
}

cudaError_t cudaMemset2D(void* p, size_t pitch, int value, size_t width, size_t height) {
  for (size_t r = 0; r < height; r++)
    if (cudaError_t e = cudaMemset(static_cast<uint8_t*>(p) + r * pitch, value, width); e != cudaSuccess) return e;
  return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* a, const void* p) {
  if (!a) return set_error(cudaErrorInvalidValue);
  std::memset(a, 0, sizeof *a);
  uint64_t off;
  bool managed;
  {
    std::lock_guard lk(rt().mu);
    managed = is_managed_ptr(p);
  }
  if (managed) {
    a->type = cudaMemoryTypeManaged;
    a->devicePointer = const_cast<void*>(p);
    a->hostPointer = const_cast<void*>(p);
  } else if (is_device_ptr(p)) {
    a->type = cudaMemoryTypeDevice;
    a->devicePointer = const_cast<void*>(p);
    a->device = std::max(device_of(p), 0);  // several servers: the owner
  } else if (in_data_area(p, 1, &off)) {
    a->type = cudaMemoryTypeHost;
    a->hostPointer = const_cast<void*>(p);
    uint64_t d = 0;
    if (off >> kPinnedSegmentShift) {  // a grown segment: mapped when it was made
      if (in_grown_segment(p, 1, nullptr, &d)) a->devicePointer = reinterpret_cast<void*>(d);
    } else {
      std::lock_guard lk(rt().mu);  // its device address once the data area is mapped (cudaHostAlloc)
      if (rt().mapped_dptr) a->devicePointer = reinterpret_cast<void*>(rt().mapped_dptr + off);
    }
  } else if (host_overflow_of(p, nullptr, false)) {
    a->type = cudaMemoryTypeHost;  // host memory of cudaHostAlloc, not device-addressable
    a->hostPointer = const_cast<void*>(p);
  } else {
    a->type = cudaMemoryTypeUnregistered;
    a->hostPointer = const_cast<void*>(p);
  }
  return cudaSuccess;
}

// ---- per-thread-default-stream variants
cudaError_t cudaMemcpy_ptds(void* d, const void* s, size_t n, cudaMemcpyKind k) { return cudaMemcpy(d, s, n, k); }
cudaError_t cudaMemcpyAsync_ptsz(void* d, const void* s, size_t n, cudaMemcpyKind k, cudaStream_t st) {
  return cudaMemcpyAsync(d, s, n, k, st);
}
cudaError_t cudaMemset_ptds(void* p, int v, size_t n) { return cudaMemset(p, v, n); }
cudaError_t cudaMemsetAsync_ptsz(void* p, int v, size_t n, cudaStream_t s) { return cudaMemsetAsync(p, v, n, s); }
cudaError_t cudaMemcpy2D_ptds(void* d, size_t dp, const void* s, size_t sp, size_t w, size_t h, cudaMemcpyKind k) {
  return cudaMemcpy2D(d, dp, s, sp, w, h, k);
}
cudaError_t cudaMemcpy2DAsync_ptsz(void* d, size_t dp, const void* s, size_t sp, size_t w, size_t h, cudaMemcpyKind k,
                                   cudaStream_t st) {
  return cudaMemcpy2DAsync(d, dp, s, sp, w, h, k, st);
}

}  // extern "C"
