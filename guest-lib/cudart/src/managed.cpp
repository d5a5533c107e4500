// libcudart.so.13 drop-in: managed memory.
//
// Managed memory lives in the channel's shared data area, which the server
// maps into the device's address space at the very address the guest
// process sees it (MapDataArea with want_dptr). One pointer is then valid on
// the host and in kernels, with no copy and no page migration: the bytes
// are the same bytes. Coherence is that of a device without concurrent
// managed access (cudaDevAttrConcurrentManagedAccess = 0): host accesses
// are safe when no kernel that uses the memory is running, i.e. after the
// synchronising call that CUDA requires on such devices anyway.
// __managed__ variables are placed there too: the module's global is
// re-bound to a block of the data area before any kernel of it runs.
#include <cstring>

#include "state.hpp"

namespace wh::guest {

using namespace wh::proto;

bool heap_alloc_block(size_t n, uint64_t* off);  // memory.cpp

namespace {

// Advice per managed allocation, reported by cudaMemRangeGetAttribute.
struct Advice {
  int read_mostly = 0;
  cudaMemLocation preferred{cudaMemLocationTypeInvalid, 0};
  bool accessed_by_device = false;
  cudaMemLocation last_prefetch{cudaMemLocationTypeInvalid, 0};
  cudaStream_t attached_to = nullptr;  // cudaStreamAttachMemAsync
  unsigned attach = cudaMemAttachGlobal;
};
std::map<uint64_t, Advice> g_advice;  // under rt().mu, keyed like rt().managed

}  // namespace

// Maps the data area into the device's address space, once, asking for
// its guest address (so mapped pinned memory, too, has one pointer on host
// and device, as under CUDA's unified addressing).
cudaError_t ensure_mapped(Connection* c, uint64_t* base) {
  Runtime& r = rt();
  {
    std::lock_guard lk(r.mu);
    if (r.mapped_dptr) {
      *base = r.mapped_dptr;
      return cudaSuccess;
    }
  }
  if (c->remote()) {
    // A kernel on another machine cannot address this process's memory.
    log_once("mapped host memory and managed memory are not available over ucx:// (the server is on another "
             "machine): use device memory and copies");
    return cudaErrorNotSupported;
  }
  const uint64_t want = reinterpret_cast<uint64_t>(c->data().data());
  MapDataAreaResp rs{};
  if (cudaError_t e = c->call<Op::MapDataArea>({want}, &rs); e != cudaSuccess) return e;
  std::lock_guard lk(r.mu);
  r.mapped_dptr = rs.dptr;
  r.unified = rs.dptr == want;
  *base = rs.dptr;
  return cudaSuccess;
}

static cudaError_t ensure_unified(Connection* c) {
  uint64_t base = 0;
  if (cudaError_t e = ensure_mapped(c, &base); e != cudaSuccess) return e;
  std::lock_guard lk(rt().mu);
  if (!rt().unified) log_once("managed memory: the server cannot map the data area at the guest's address");
  return rt().unified ? cudaSuccess : cudaErrorNotSupported;
}

// The managed allocation holding [p, p+n), or false.
static bool managed_range(const void* p, size_t n, uint64_t* base) {
  Runtime& r = rt();
  auto a = reinterpret_cast<uint64_t>(p);
  auto it = r.managed.upper_bound(a);
  if (it == r.managed.begin()) return false;
  --it;
  if (a - it->first >= it->second || n > it->second - (a - it->first)) return false;
  *base = it->first;
  return true;
}

bool is_managed_ptr(const void* p) {
  uint64_t base;
  return managed_range(p, 1, &base);  // caller holds rt().mu
}

cudaError_t managed_alloc(size_t size, void** p) {
  WH_CONN(c);
  if (cudaError_t e = ensure_unified(c); e != cudaSuccess) return e;
  uint64_t off = 0;
  if (!heap_alloc_block(size, &off)) {
    log_once("managed memory: the data area is full (managed memory lives there, not in grown pinned segments; "
             "wormhole-server --pinned-mb sets its size)");
    return cudaErrorMemoryAllocation;
  }
  uint8_t* host = c->data().data() + off;
  std::memset(host, 0, size);
  std::lock_guard lk(rt().mu);
  rt().managed[reinterpret_cast<uint64_t>(host)] = size;
  g_advice[reinterpret_cast<uint64_t>(host)] = {};
  *p = host;
  return cudaSuccess;
}

// cudaFree of a managed pointer: waits for the device (as cudaFree does),
// then returns the block to the data area's heap.
bool managed_free(Connection* c, void* p, cudaError_t* e) {
  const uint64_t a = reinterpret_cast<uint64_t>(p);
  {
    std::lock_guard lk(rt().mu);
    if (!rt().managed.count(a)) return false;
  }
  *e = c->call<Op::DeviceSynchronize>({});
  {
    std::lock_guard lk(rt().mu);
    if (!rt().managed.erase(a)) return true;  // freed by another thread meanwhile
    g_advice.erase(a);
  }
  uint64_t off = 0;
  if (!in_data_area(p, 1, &off) || !heap_free_block(off)) *e = cudaErrorInvalidValue;
  return true;
}

// Places a fatbin's __managed__ variables in the data area, right after its
// module is loaded: the server copies each one's initial value there and
// binds the module's global to it.
cudaError_t bind_managed_vars(Connection* c, Fatbin& fb) {
  for (ManagedVarRec& v : fb.managed) {
    void* p = nullptr;
    if (cudaError_t e = managed_alloc(v.size, &p); e != cudaSuccess) return e;
    ModuleBindManagedResp rs{};
    cudaError_t e = c->call<Op::ModuleBindManaged>({fb.module, reinterpret_cast<uint64_t>(p)}, &rs,
                                                    {reinterpret_cast<const uint8_t*>(v.name.data()), v.name.size()});
    if (e != cudaSuccess) return e;
    if (v.host_ptr) *v.host_ptr = p;
  }
  return cudaSuccess;
}

}  // namespace wh::guest

using namespace wh::guest;
using namespace wh::proto;

extern "C" {

cudaError_t cudaMallocManaged(void** p, size_t size, unsigned int flags) {
  if (!p || size == 0 || (flags != cudaMemAttachGlobal && flags != cudaMemAttachHost))
    return set_error(cudaErrorInvalidValue);
  return set_error(managed_alloc(size, p));
}

void __cudaRegisterManagedVar(void** handle, void** host_ptr, char*, const char* device_name, int, size_t size, int,
                              int) {
  auto* fb = reinterpret_cast<Fatbin*>(handle);
  std::lock_guard lk(rt().mu);
  fb->managed.push_back({host_ptr, device_name ? device_name : "", size});
}

// Called before the first host access to a __managed__ variable of the
// module: loading the module places its managed variables.
char __cudaInitModule(void** handle) {
  auto* fb = reinterpret_cast<Fatbin*>(handle);
  return fb && ensure_fatbin_module(*fb) == cudaSuccess ? 1 : 0;
}

// Prefetching has nothing to move (host and device share the bytes); it is
// stream-ordered, so it completes in order with the stream's work.
cudaError_t cudaMemPrefetchAsync(const void* p, size_t n, cudaMemLocation loc, unsigned int flags, cudaStream_t s) {
  if (flags != 0) return set_error(cudaErrorInvalidValue);
  if (loc.type == cudaMemLocationTypeDevice && loc.id != 0) return set_error(cudaErrorInvalidDevice);
  if (loc.type != cudaMemLocationTypeDevice && loc.type != cudaMemLocationTypeHost &&
      loc.type != cudaMemLocationTypeHostNuma && loc.type != cudaMemLocationTypeHostNumaCurrent)
    return set_error(cudaErrorInvalidValue);
  std::lock_guard lk(rt().mu);
  uint64_t base;
  if (!managed_range(p, n, &base)) return set_error(cudaErrorInvalidValue);
  g_advice[base].last_prefetch = loc;
  (void)s;
  return cudaSuccess;
}

// Which streams may touch a managed allocation. On a device without
// concurrent managed access the attachment decides when the host may touch
// the allocation while kernels run; here host and device share the bytes,
// so any access is safe and the attachment changes no result. It is checked
// as CUDA checks it (the start of a managed allocation, length 0 or the
// whole allocation, exactly one flag, a single attachment only to a real
// stream, a stream that exists) and kept. Nothing on this device acts on
// it, so keeping it at the call cannot be told from its taking effect in
// stream order.
cudaError_t cudaStreamAttachMemAsync(cudaStream_t s, void* p, size_t length, unsigned int flags) {
  if (flags != cudaMemAttachGlobal && flags != cudaMemAttachHost && flags != cudaMemAttachSingle)
    return set_error(cudaErrorInvalidValue);
  if (flags == cudaMemAttachSingle && (s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread))
    return set_error(cudaErrorInvalidValue);  // not a specific stream
  {
    std::lock_guard lk(rt().mu);
    uint64_t base;
    if (!managed_range(p, 1, &base) || base != reinterpret_cast<uint64_t>(p)) return set_error(cudaErrorInvalidValue);
    if (length != 0 && length != rt().managed[base]) return set_error(cudaErrorInvalidValue);
  }
  if (cudaError_t e = cudaStreamQuery(s); e != cudaSuccess && e != cudaErrorNotReady) return set_error(e);
  std::lock_guard lk(rt().mu);
  Advice& a = g_advice[reinterpret_cast<uint64_t>(p)];
  a.attached_to = s;
  a.attach = flags;
  return cudaSuccess;
}
cudaError_t cudaStreamAttachMemAsync_ptsz(cudaStream_t s, void* p, size_t length, unsigned int flags) {
  return cudaStreamAttachMemAsync(s, p, length, flags);
}

cudaError_t cudaMemAdvise(const void* p, size_t n, cudaMemoryAdvise advice, cudaMemLocation loc) {
  std::lock_guard lk(rt().mu);
  uint64_t base;
  if (!managed_range(p, n, &base)) return set_error(cudaErrorInvalidValue);
  Advice& a = g_advice[base];
  switch (advice) {
    case cudaMemAdviseSetReadMostly: a.read_mostly = 1; break;
    case cudaMemAdviseUnsetReadMostly: a.read_mostly = 0; break;
    case cudaMemAdviseSetPreferredLocation: a.preferred = loc; break;
    case cudaMemAdviseUnsetPreferredLocation: a.preferred = {cudaMemLocationTypeInvalid, 0}; break;
    case cudaMemAdviseSetAccessedBy: a.accessed_by_device = loc.type == cudaMemLocationTypeDevice; break;
    case cudaMemAdviseUnsetAccessedBy: a.accessed_by_device = false; break;
    default: return set_error(cudaErrorInvalidValue);
  }
  return cudaSuccess;
}

cudaError_t cudaMemRangeGetAttribute(void* data, size_t size, cudaMemRangeAttribute attr, const void* p, size_t n) {
  if (!data) return set_error(cudaErrorInvalidValue);
  std::lock_guard lk(rt().mu);
  uint64_t base;
  if (!managed_range(p, n, &base)) return set_error(cudaErrorInvalidValue);
  const Advice& a = g_advice[base];
  // Device ordinals as CUDA reports them: cudaCpuDeviceId for the host,
  // cudaInvalidDeviceId for none.
  auto ordinal = [](const cudaMemLocation& l) {
    return l.type == cudaMemLocationTypeDevice ? l.id
           : l.type == cudaMemLocationTypeInvalid ? int(cudaInvalidDeviceId)
                                                  : int(cudaCpuDeviceId);
  };
  auto put = [&](int v) {
    if (size != 4) return cudaErrorInvalidValue;
    std::memcpy(data, &v, 4);
    return cudaSuccess;
  };
  cudaError_t e;
  switch (attr) {
    case cudaMemRangeAttributeReadMostly: e = put(a.read_mostly); break;
    case cudaMemRangeAttributePreferredLocation: e = put(ordinal(a.preferred)); break;
    case cudaMemRangeAttributeLastPrefetchLocation: e = put(ordinal(a.last_prefetch)); break;
    case cudaMemRangeAttributePreferredLocationType: e = put(int(a.preferred.type)); break;
    case cudaMemRangeAttributePreferredLocationId: e = put(a.preferred.id); break;
    case cudaMemRangeAttributeLastPrefetchLocationType: e = put(int(a.last_prefetch.type)); break;
    case cudaMemRangeAttributeLastPrefetchLocationId: e = put(a.last_prefetch.id); break;
    case cudaMemRangeAttributeAccessedBy: {
      // An array of device ordinals, padded with cudaInvalidDeviceId.
      if (size % 4 != 0 || size == 0) return set_error(cudaErrorInvalidValue);
      int* out = static_cast<int*>(data);
      for (size_t i = 0; i < size / 4; i++) out[i] = cudaInvalidDeviceId;
      if (a.accessed_by_device) out[0] = 0;
      e = cudaSuccess;
      break;
    }
    default: e = cudaErrorInvalidValue;
  }
  return set_error(e);
}

cudaError_t cudaMemRangeGetAttributes(void** data, size_t* sizes, cudaMemRangeAttribute* attrs, size_t count,
                                      const void* p, size_t n) {
  if (!data || !sizes || !attrs || count == 0) return set_error(cudaErrorInvalidValue);
  for (size_t i = 0; i < count; i++)
    if (cudaError_t e = cudaMemRangeGetAttribute(data[i], sizes[i], attrs[i], p, n); e != cudaSuccess) return e;
  return cudaSuccess;
}

}  // extern "C"
