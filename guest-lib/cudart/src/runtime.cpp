// libcudart.so.13 drop-in: device management, errors, streams and events.
// What the guest already knows (device count and properties, the current
// device, the last error, the runtime version) never leaves the guest.
#include <cstring>

#include "progress.hpp"
#include "state.hpp"

namespace wh::guest {

using namespace wh::proto;

Runtime& rt() {
  static Runtime* r = new Runtime();  // never destroyed: used from atexit paths
  return *r;
}

namespace {
thread_local cudaError_t t_last_error = cudaSuccess;
}  // namespace

cudaError_t set_error(cudaError_t e) {
  if (e != cudaSuccess) {
    t_last_error = e;
    if (is_sticky(e)) {
      std::lock_guard lk(rt().mu);
      rt().sticky = e;
    }
  }
  return e;
}

Connection* conn_or(cudaError_t* e) {
  Connection* c = Connection::get();
  if (!c) *e = Connection::in_forked_child() ? cudaErrorInitializationError : cudaErrorNoDevice;
  return c;
}

cudaError_t ensure_props() {
  Runtime& r = rt();
  {
    std::lock_guard lk(r.mu);
    if (r.props_loaded) return cudaSuccess;
  }
  WH_CONN(c);
  // Several servers: device k is server k's device 0.
  const int n = Connection::devices();
  std::vector<DeviceDescription> devs(n);
  GetDeviceCountResp dc{};
  GetDevicePropsResp pr{};
  for (int d = 0; d < n; d++) {
    Connection* cd = n > 1 ? Connection::of(d) : c;
    if (cudaError_t e = cd->call<Op::GetDeviceCount>({}, &dc); e != cudaSuccess) return e;
    std::vector<uint8_t> tail;
    if (cudaError_t e = cd->call<Op::GetDeviceProps>({0}, &pr, {}, &tail); e != cudaSuccess) return e;
    if (tail.size() != sizeof(DeviceDescription)) return cudaErrorUnknown;
    std::memcpy(&devs[d], tail.data(), sizeof devs[d]);
    if (d == 0) r.driver_version = pr.driver_version;
  }
  std::lock_guard lk(r.mu);
  r.dev = devs[0];
  r.devs = std::move(devs);
  r.device_count = n > 1 ? n : dc.count;
  if (n == 1) r.driver_version = pr.driver_version;
  r.props_loaded = true;
  return cudaSuccess;
}

int device_of(const void* p) {
  if (Connection::devices() <= 1) return -1;
  Runtime& r = rt();
  auto a = reinterpret_cast<uint64_t>(p);
  std::lock_guard lk(r.mu);
  auto it = alloc_at_locked(a);
  return it == r.allocs.end() ? -1 : it->second.device;
}

}  // namespace wh::guest

using namespace wh::guest;
using namespace wh::proto;

extern "C" {

// ------------------------------------------------------------ errors

cudaError_t cudaGetLastError(void) {
  cudaError_t e = t_last_error;
  std::lock_guard lk(rt().mu);
  t_last_error = rt().sticky;  // sticky errors cannot be cleared
  return e;
}

cudaError_t cudaPeekAtLastError(void) { return t_last_error; }

// ------------------------------------------------------------ devices

cudaError_t cudaGetDeviceCount(int* count) {
  if (!count) return set_error(cudaErrorInvalidValue);
  cudaError_t e = ensure_props();
  if (e != cudaSuccess) {
    *count = 0;
    return set_error(e == cudaErrorDevicesUnavailable ? e : cudaErrorNoDevice);
  }
  *count = rt().device_count;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  if (!device) return set_error(cudaErrorInvalidValue);
  *device = t_current_device;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (cudaError_t e = ensure_props(); e != cudaSuccess) return set_error(e);
  if (device < 0 || device >= rt().device_count) return set_error(cudaErrorInvalidDevice);
  if (device >= Connection::devices()) {
    // One session is one context on one device (see docs/ARCHITECTURE.md);
    // several devices are several servers (WORMHOLE_SERVER's list).
    log_once("cudaSetDevice: only device 0 is forwarded per server");
    return set_error(cudaErrorInvalidDevice);
  }
  t_current_device = device;
  return cudaSuccess;
}

cudaError_t cudaSetDeviceFlags(unsigned int flags) {
  std::lock_guard lk(rt().mu);
  rt().device_flags = flags;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceFlags(unsigned int* flags) {
  if (!flags) return set_error(cudaErrorInvalidValue);
  std::lock_guard lk(rt().mu);
  *flags = rt().device_flags;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (!prop) return set_error(cudaErrorInvalidValue);
  if (cudaError_t e = ensure_props(); e != cudaSuccess) return set_error(e);
  if (device < 0 || device >= rt().device_count) return set_error(cudaErrorInvalidDevice);
  std::lock_guard lk(rt().mu);
  *prop = device_desc(device).props;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetStreamPriorityRange(int* least, int* greatest) {
  if (least) *least = 0;
  if (greatest) *greatest = -5;
  return cudaSuccess;
}

cudaError_t cudaDeviceSetCacheConfig(cudaFuncCache) { return cudaSuccess; }
cudaError_t cudaDeviceGetCacheConfig(cudaFuncCache* c) {
  if (c) *c = cudaFuncCachePreferNone;
  return cudaSuccess;
}
cudaError_t cudaDeviceCanAccessPeer(int* can, int device, int peer) {
  if (!can) return set_error(cudaErrorInvalidValue);
  if (cudaError_t e = ensure_props(); e != cudaSuccess) return set_error(e);
  if (device < 0 || device >= rt().device_count || peer < 0 || peer >= rt().device_count)
    return set_error(cudaErrorInvalidDevice);
  // Several servers: copies between them are forwarded (docs/remote.md).
  *can = device != peer && Connection::devices() > 1 ? 1 : 0;
  return cudaSuccess;
}

cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int flags) {
  if (flags != 0) return set_error(cudaErrorInvalidValue);
  if (cudaError_t e = ensure_props(); e != cudaSuccess) return set_error(e);
  if (peer < 0 || peer >= rt().device_count) return set_error(cudaErrorInvalidDevice);
  if (peer == t_current_device || Connection::devices() <= 1) return set_error(cudaErrorInvalidDevice);
  return cudaSuccess;
}

cudaError_t cudaDeviceDisablePeerAccess(int peer) {
  if (cudaError_t e = ensure_props(); e != cudaSuccess) return set_error(e);
  if (peer < 0 || peer >= rt().device_count || Connection::devices() <= 1) return set_error(cudaErrorInvalidDevice);
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
  if (capture_any())
    if (cudaError_t e = capture_check_unsafe(nullptr); e != cudaSuccess) return set_error(e);
  WH_CONN(c);
  cudaError_t e = c->call<Op::DeviceSynchronize>({});
  flush_device_output(c);
  return set_error(e);
}

cudaError_t cudaThreadSynchronize(void) { return cudaDeviceSynchronize(); }

cudaError_t cudaDeviceReset(void) {
  WH_CONN(c);
  cudaError_t e = c->call<Op::DeviceReset>({});
  flush_device_output(c);
  std::lock_guard lk(rt().mu);
  Runtime& r = rt();
  for (auto* fb : r.fatbins) {
    fb->module = 0;  // reloaded lazily
    for (auto& [name, k] : fb->functions) k->handle.store(0);  // the driver API's functions of it
  }
  for (auto& [h, k] : r.kernels) k->handle.store(0);
  for (auto& [h, v] : r.vars) v->dptr = 0;
  // Only this device's allocations went with its context (with one device: all).
  std::erase_if(r.allocs, [](const auto& a) { return a.second.device == t_current_device; });
  r.sticky = cudaSuccess;
  t_last_error = cudaSuccess;
  return e;
}

cudaError_t cudaRuntimeGetVersion(int* v) {
  if (!v) return set_error(cudaErrorInvalidValue);
  *v = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* v) {
  if (!v) return set_error(cudaErrorInvalidValue);
  if (ensure_props() != cudaSuccess) {
    *v = 0;  // as CUDA reports "no driver"
    return cudaSuccess;
  }
  *v = rt().driver_version;
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  WH_CONN(c);
  MemGetInfoResp rs{};
  cudaError_t e = c->call<Op::MemGetInfo>({}, &rs);
  if (e == cudaSuccess) {
    if (free_bytes) *free_bytes = rs.free;
    if (total_bytes) *total_bytes = rs.total;
  }
  return set_error(e);
}

// ------------------------------------------------------------ streams

cudaError_t cudaStreamCreateWithPriority(cudaStream_t* s, unsigned int flags, int priority) {
  if (!s) return set_error(cudaErrorInvalidValue);
  WH_CONN(c);
  StreamCreateResp rs{};
  cudaError_t e = c->call<Op::StreamCreate>({flags, priority}, &rs);
  if (e == cudaSuccess) *s = reinterpret_cast<cudaStream_t>(rs.stream);
  return set_error(e);
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int flags) {
  return cudaStreamCreateWithPriority(s, flags, 0);
}
cudaError_t cudaStreamCreate(cudaStream_t* s) { return cudaStreamCreateWithPriority(s, 0, 0); }

cudaError_t cudaStreamDestroy(cudaStream_t s) {
  WH_CONN(c);
  forget_stream(stream_handle(s));
  return set_error(c->call<Op::StreamDestroy>({stream_handle(s)}));
}

cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  if (capture_any())
    if (cudaError_t e = capture_check_unsafe(s); e != cudaSuccess) return set_error(e);
  WH_CONN(c);
  cudaError_t e = c->call<Op::StreamSynchronize>({stream_handle(s)});
  flush_device_output(c);
  return set_error(e);
}

cudaError_t cudaStreamQuery(cudaStream_t s) {
  if (capture_any() && stream_capturing(s)) return set_error(capture_check_unsafe(s));
  WH_CONN(c);
  if (stream_surely_busy(c, stream_handle(s))) return cudaErrorNotReady;
  cudaError_t e = c->call<Op::StreamQuery>({stream_handle(s)});
  return e == cudaErrorNotReady ? e : set_error(e);
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t ev, unsigned int flags) {
  if (capture_any()) {
    cudaError_t e;
    if (capture_wait_event(s, ev, flags, &e)) return set_error(e);
  }
  WH_CONN(c);
  return set_error(c->post<Op::StreamWaitEvent>({stream_handle(s), reinterpret_cast<uint64_t>(ev), flags, 0}));
}

cudaError_t cudaStreamGetPriority(cudaStream_t, int* p) {
  if (p) *p = 0;
  return cudaSuccess;
}

// Host callbacks run in this process, in stream order: everything issued
// before them has completed, and nothing issued after them starts before
// they return (the issuing thread runs them before it returns).
cudaError_t cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void* data) {
  if (!fn) return set_error(cudaErrorInvalidValue);
  if (capture_any() && stream_capturing(s)) return set_error(capture_host(s, fn, data));
  cudaError_t e = cudaStreamSynchronize(s);
  fn(data);
  return e;
}

cudaError_t cudaStreamAddCallback(cudaStream_t s, cudaStreamCallback_t cb, void* data, unsigned int flags) {
  if (!cb || flags != 0) return set_error(cudaErrorInvalidValue);
  // As in CUDA, stream callbacks cannot be captured (cudaLaunchHostFunc can).
  if (capture_any() && stream_capturing(s)) return set_error(capture_check_unsafe(s));
  cudaError_t e = cudaStreamSynchronize(s);
  cb(s, e, data);
  return cudaSuccess;
}

// ------------------------------------------------------------ events

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* ev, unsigned int flags) {
  if (!ev) return set_error(cudaErrorInvalidValue);
  WH_CONN(c);
  EventCreateResp rs{};
  cudaError_t e = c->call<Op::EventCreate>({flags, 0}, &rs);
  if (e == cudaSuccess) *ev = reinterpret_cast<cudaEvent_t>(rs.event);
  return set_error(e);
}
cudaError_t cudaEventCreate(cudaEvent_t* ev) { return cudaEventCreateWithFlags(ev, 0); }

cudaError_t cudaEventRecordWithFlags(cudaEvent_t ev, cudaStream_t s, unsigned int flags) {
  if (capture_any()) {
    cudaError_t e;
    if (capture_event_record(ev, s, flags, &e)) return set_error(e);
  }
  WH_CONN(c);
  uint64_t end;
  cudaError_t e = c->post<Op::EventRecord>({reinterpret_cast<uint64_t>(ev), stream_handle(s)}, {}, &end);
  if (e == cudaSuccess) note_event_end(c, reinterpret_cast<uint64_t>(ev), end);
  return set_error(e);
}
cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t s) { return cudaEventRecordWithFlags(ev, s, 0); }

cudaError_t cudaEventSynchronize(cudaEvent_t ev) {
  WH_CONN(c);
  cudaError_t e = c->call<Op::EventSynchronize>({reinterpret_cast<uint64_t>(ev)});
  flush_device_output(c);
  return set_error(e);
}

cudaError_t cudaEventQuery(cudaEvent_t ev) {
  WH_CONN(c);
  if (event_surely_busy(c, reinterpret_cast<uint64_t>(ev))) return cudaErrorNotReady;
  cudaError_t e = c->call<Op::EventQuery>({reinterpret_cast<uint64_t>(ev)});
  return e == cudaErrorNotReady ? e : set_error(e);
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) {
  if (!ms) return set_error(cudaErrorInvalidValue);
  WH_CONN(c);
  EventElapsedTimeResp rs{};
  cudaError_t e = c->call<Op::EventElapsedTime>({reinterpret_cast<uint64_t>(a), reinterpret_cast<uint64_t>(b)}, &rs);
  if (e == cudaSuccess) *ms = rs.ms;
  return set_error(e);
}

cudaError_t cudaEventDestroy(cudaEvent_t ev) {
  WH_CONN(c);
  forget_event(reinterpret_cast<uint64_t>(ev));
  return set_error(c->call<Op::EventDestroy>({reinterpret_cast<uint64_t>(ev)}));
}

// Per-thread-default-stream entry points: the server serialises a
// session's work in order, so they behave as the legacy stream.
cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t s) { return cudaStreamSynchronize(s); }
cudaError_t cudaStreamQuery_ptsz(cudaStream_t s) { return cudaStreamQuery(s); }
cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t s, cudaEvent_t e, unsigned int f) {
  return cudaStreamWaitEvent(s, e, f);
}
cudaError_t cudaEventRecord_ptsz(cudaEvent_t e, cudaStream_t s) { return cudaEventRecord(e, s); }
cudaError_t cudaLaunchHostFunc_ptsz(cudaStream_t s, cudaHostFn_t fn, void* d) { return cudaLaunchHostFunc(s, fn, d); }
cudaError_t cudaStreamAddCallback_ptsz(cudaStream_t s, cudaStreamCallback_t cb, void* d, unsigned int f) {
  return cudaStreamAddCallback(s, cb, d, f);
}

}  // extern "C"
