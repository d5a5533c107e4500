// The guest runtime's own state: what it can answer without the server
// (device properties, last error, current device) and what it must
// remember to translate CUDA's API onto the wire (registered fatbins,
// kernels and variables, device allocations, the pinned-memory heap).
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "connection.hpp"
#include "wormhole/proto/device_attrs.hpp"
#include "wormhole/proto/wire.hpp"

namespace wh::guest {

// A server handle kept per device (several servers: each loads its own
// modules): reads and writes name the calling thread's current device.
template <class T>
struct PerDevice {
  T v[kMaxDevices]{};
  operator T() const { return v[current_device()]; }
  PerDevice& operator=(T x) {
    v[current_device()] = x;
    return *this;
  }
  T& on(int d) { return v[d]; }
};
struct PerDeviceAtomic {
  std::atomic<uint64_t> v[kMaxDevices]{};
  uint64_t load(std::memory_order o = std::memory_order_seq_cst) const { return v[current_device()].load(o); }
  void store(uint64_t x, std::memory_order o = std::memory_order_seq_cst) { v[current_device()].store(x, o); }
  operator uint64_t() const { return load(); }
};

struct ManagedVarRec {
  void** host_ptr = nullptr;  // the program's pointer to the variable, set once placed
  std::string name;
  size_t size = 0;
};

struct Fatbin {
  const void* wrapper = nullptr;  // as passed to __cudaRegisterFatBinary
  const uint8_t* image = nullptr;  // the fatbin it points at (or `rdc_image`)
  size_t size = 0;
  // -rdc=true: the device-linked fatbin followed by the per-unit fatbins,
  // whose PTX the sim device links (the linked one carries SASS only).
  std::vector<uint8_t> rdc_image;
  PerDevice<uint64_t> module;  // server handle once shipped (lazily, once per device)
  // Why the device refused the image (it is not shipped again): a kernel
  // of a library that cannot load fails when it is used. Per device, as a
  // GPU may run the SASS another device refuses.
  PerDevice<cudaError_t> load_error;
  std::map<std::string, std::vector<proto::ParamInfo>> params;  // from .nv.info / PTX
  bool params_parsed = false;
  std::vector<ManagedVarRec> managed;  // __managed__ variables (managed.cpp)
  // Loaded by the driver API (libcuda's cuModuleLoad*, export.cpp): its
  // functions by name, each looked up once.
  bool driver = false;
  // Loaded through cuLibrary* (context-independent, as CUDA 12 defines it):
  // its handles and kernels outlive a context reset, the module is loaded
  // again on next use. Modules from cuModuleLoad* end with the context.
  bool library = false;
  // cuLibraryGetManaged: the managed copy of each variable asked for.
  std::map<std::string, std::pair<void*, size_t>> managed_vars;
  std::map<std::string, struct KernelRec*> functions;
  bool names_known = false;
  std::vector<std::string> kernel_names;  // its kernels (cuModuleEnumerateFunctions)
};

struct KernelRec {
  Fatbin* fb = nullptr;
  std::string name;
  PerDeviceAtomic handle;  // server kernel handle, set once per device
  std::vector<proto::ParamInfo> params;
  uint32_t param_bytes = 0;
  int max_dynamic_shared = 0;
  uint32_t max_threads = 1024;  // per block, as the kernel was built (.maxntid, launch bounds)
};

struct VarRec {
  Fatbin* fb = nullptr;
  std::string name;
  size_t size = 0;
  PerDevice<uint64_t> dptr;  // per device
};

struct Runtime {
  std::mutex mu;  // guards everything below
  bool props_loaded = false;
  int device_count = 0;
  int driver_version = 0;
  proto::DeviceDescription dev{};  // attributes and properties of device 0
  std::vector<proto::DeviceDescription> devs;  // of each device (several servers), devs[0] == dev
  unsigned device_flags = 0;
  std::vector<Fatbin*> fatbins;
  std::unordered_map<const void*, KernelRec*> kernels;  // host stub -> kernel
  std::unordered_map<const void*, VarRec*> vars;        // host shadow -> variable
  struct Alloc {
    uint64_t bytes;
    int device;  // its owner (several servers); 0 otherwise
  };
  std::map<uint64_t, Alloc> allocs;                     // device allocations by dptr
  std::map<uintptr_t, size_t> host_registered;          // cudaHostRegister'ed ranges
  // cudaHostAlloc past the shared pinned heap: pageable memory (its size, flags).
  std::map<uintptr_t, std::pair<size_t, unsigned>> host_overflow;
  // Pinned heap inside the data area: free blocks offset -> size, and live ones.
  std::map<uint64_t, uint64_t> heap_free, heap_used;
  bool heap_ready = false;
  uint64_t mapped_dptr = 0;  // device address of the data area (mapped memory)
  bool unified = false;      // mapped_dptr is the data area's guest address
  std::map<uint64_t, uint64_t> managed;  // managed allocations: address -> bytes
  cudaError_t sticky = cudaSuccess;
};

Runtime& rt();
// Kernel faults: the context stays unusable until cudaDeviceReset.
inline bool is_sticky(cudaError_t e) {
  return e == cudaErrorIllegalAddress || e == cudaErrorAssert || e == cudaErrorLaunchFailure ||
         e == cudaErrorMisalignedAddress || e == cudaErrorIllegalInstruction || e == cudaErrorHardwareStackError;
}
// Writes device output the server holds (kernel printf, assert messages,
// fault details) to stdout/stderr; synchronising calls and launches call it
// (output.cpp). Costs one load when there is none.
void flush_device_output(Connection* c);
// The description of device d (0 <= d < device_count), rt().mu held.
inline const proto::DeviceDescription& device_desc(int d) {
  Runtime& r = rt();
  return d > 0 && size_t(d) < r.devs.size() ? r.devs[d] : r.dev;
}
// The allocation holding device address a (a zero-byte one holds its base
// address), or allocs.end(); rt().mu held.
inline std::map<uint64_t, Runtime::Alloc>::iterator alloc_at_locked(uint64_t a) {
  auto& m = rt().allocs;
  auto it = m.upper_bound(a);
  if (it == m.begin()) return m.end();
  --it;
  return a - it->first < std::max<uint64_t>(it->second.bytes, 1) ? it : m.end();
}
// Several servers: the device owning device address p (an allocation of
// this process), or -1 (unknown, or a single device).
int device_of(const void* p);
// Runs the calls in its scope on device d (d < 0: stays), then restores the
// thread's current device: calls naming another device's pointer go there.
struct DeviceScope {
  int saved;
  explicit DeviceScope(int d) : saved(t_current_device) {
    if (d >= 0) t_current_device = d;
  }
  ~DeviceScope() { t_current_device = saved; }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;
};
// Several servers: a copy between devices of two servers (memory.cpp).
cudaError_t peer_copy(int dst_dev, void* dst, int src_dev, const void* src, size_t n, cudaStream_t s, bool async);
// Sets this thread's last error (cudaGetLastError) and returns e.
cudaError_t set_error(cudaError_t e);
// User objects (user_objects.cpp): a reference taken (false: no such object),
// one dropped (a destructor due at the last), the due destructors run (call
// with no lock held).
bool user_object_ref(cudaUserObject_t o, unsigned n);
void user_object_unref(cudaUserObject_t o, unsigned n);
void run_user_object_destructors();
bool user_object_live(cudaUserObject_t o);
// The connection, or nullptr with the last error set to `e`.
Connection* conn_or(cudaError_t* e);
// Loads device properties once (device count, props, driver version).
cudaError_t ensure_props();
// Ships a fatbin's module and resolves the kernel handle, once.
cudaError_t ensure_kernel(KernelRec* k);
cudaError_t ensure_var(VarRec* v);
// Loads a fatbin's module (and places its managed variables), once.
cudaError_t ensure_fatbin_module(Fatbin& fb);
// Managed memory (managed.cpp). is_managed_ptr expects rt().mu held.
bool is_managed_ptr(const void* p);
cudaError_t ensure_mapped(Connection* c, uint64_t* base);  // the data area's device address
bool managed_free(Connection* c, void* p, cudaError_t* e);
cudaError_t bind_managed_vars(Connection* c, Fatbin& fb);
cudaError_t managed_alloc(size_t size, void** p);  // managed memory (cudaMallocManaged)
// A block of the shared pinned heap for the runtime's own transfers (module
// images, graph node lists), freed with heap_free_block(off): unlike
// cudaHostAlloc, never pageable memory the server cannot read.
cudaError_t data_area_block(Connection* c, size_t n, void** p, uint64_t* off);
bool heap_free_block(uint64_t off);
// The pinned heap (pinned_heap.cpp). heap_alloc: a block of the first data
// area, leaving `keep` bytes of it free; heap_alloc_grown: a block of a
// grown segment, growing a new one when none has room (false and why when
// the heap cannot grow); heap_free: either (an emptied segment goes back);
// heap_host: the block's address in this process.
bool heap_alloc(Connection* c, size_t n, uint64_t* off, uint64_t keep = 0);
bool heap_alloc_grown(Connection* c, size_t n, uint64_t* off, std::string* why);
bool heap_free(uint64_t off);
uint8_t* heap_host(Connection* c, uint64_t off);
// The memfds of the grown segments the server has not released (a resume
// hands them back with the region).
std::vector<int> grown_segment_fds();
// Inside a grown segment: its data-area offset and device address.
bool in_grown_segment(const void* p, size_t n, uint64_t* off, uint64_t* dptr);
// The pinned block of a grown segment at device address `dptr`: its device
// address and size (rt().mu held).
bool grown_block_locked(uint64_t dptr, uint64_t* base, uint64_t* bytes);
// Host pointer -> data-area offset, if it lies inside the shared data area
// or a grown segment of the pinned heap.
bool in_data_area(const void* p, size_t n, uint64_t* off);
// Host memory the server reaches itself (the data area, except over ucx://).
bool server_sees(Connection* c, const void* p, size_t n, uint64_t* off);
// ucx://: sends [off, off+n) of our data area to the session's (no-op otherwise).
cudaError_t push_data_area(Connection* c, uint64_t off, size_t n);
// Device pointer inside a known allocation (or the mapped data area)?
bool is_device_ptr(const void* p);
// The core copy engine (all cudaMemcpy* variants end here).
cudaError_t do_memcpy(void* dst, const void* src, size_t n, cudaMemcpyKind kind, cudaStream_t s, bool async);

// The 2D copy engine (cudaMemcpy2D*): one request when the host side is
// in the data area, else row by row.
cudaError_t do_memcpy2d(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                        cudaMemcpyKind kind, cudaStream_t s, bool async);
// The registered kernel behind a host stub (or a live driver API function
// record, export.cpp), or nullptr.
KernelRec* kernel_of(const void* host_fun);
// Is `fn` a function record of a loaded driver module? Expects rt().mu held.
bool is_driver_function(const void* fn);
// Checks a launch configuration and packs `args` (kMaxParamBytes at most)
// into `buf` with the kernel's parameter layout.
cudaError_t pack_launch(KernelRec* k, dim3 grid, dim3 block, void** args, uint8_t* buf, bool check_only = false);
// A launch of `k` (the <<<>>> path; libcuda's cuLaunchKernel through
// export.cpp): with `args` (void*[] as cudaLaunchKernel takes them), or with
// the parameters already packed at their offsets (cuLaunchKernel's `extra`).
cudaError_t launch_kernel(KernelRec* k, dim3 grid, dim3 block, void** args, size_t shared, cudaStream_t s,
                          uint32_t flags);
cudaError_t launch_kernel_packed(KernelRec* k, dim3 grid, dim3 block, const void* params, size_t bytes,
                                 size_t shared, cudaStream_t s, uint32_t flags);

inline uint64_t stream_handle(cudaStream_t s) { return reinterpret_cast<uint64_t>(s); }

// ---- stream capture (graph_capture.cpp). While a stream captures, work issued to
// it is recorded into the capture's graph instead of being sent.
extern std::atomic<int> g_captures;  // captures in progress: the launch path's one-load test
inline bool capture_any() { return g_captures.load(std::memory_order_relaxed) != 0; }
bool stream_capturing(cudaStream_t s);
cudaError_t capture_kernel(cudaStream_t s, KernelRec* k, dim3 grid, dim3 block, uint32_t shared,
                           const uint8_t* params);
cudaError_t capture_copy(cudaStream_t s, void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                         size_t height, cudaMemcpyKind kind);
cudaError_t capture_memset(cudaStream_t s, void* dst, int value, size_t n);
cudaError_t capture_host(cudaStream_t s, cudaHostFn_t fn, void* data);
// A posted library request (its fixed part and tail) recorded as a call node.
cudaError_t capture_call(cudaStream_t s, uint16_t op, const void* rq, size_t rq_len, const void* tail,
                         size_t tail_len);
// Graph memory (mem-alloc/free nodes). cudaMallocAsync / cudaFreeAsync on a
// capturing stream add such nodes (*e their result, true when taken);
// cudaFree / cudaFreeAsync of a graph allocation end its life (true when `p`
// is one). graph_mem_free expects no graph lock held.
bool capture_malloc(cudaStream_t s, void** p, size_t size, cudaError_t* e);
bool capture_free(cudaStream_t s, void* p, cudaError_t* e);
bool graph_mem_free(void* p, cudaError_t* e);
// Device memory straight from the server, bypassing capture checks (graph
// memory) and the allocation table's bookkeeping of cudaMalloc.
cudaError_t device_alloc(size_t size, uint64_t* dptr);
cudaError_t device_free(uint64_t dptr);
// cudaEventRecord / cudaStreamWaitEvent: true when capture took the call
// (the stream captures, or the event was recorded in a capture); *e is its result.
bool capture_event_record(cudaEvent_t ev, cudaStream_t s, unsigned flags, cudaError_t* e);
bool capture_wait_event(cudaStream_t s, cudaEvent_t ev, unsigned flags, cudaError_t* e);
// Before a call that synchronises `s` (nullptr: the legacy stream, also for
// allocation and synchronous copies): cudaErrorStreamCaptureUnsupported, and
// the offended captures invalidated, when `s` captures or, for the legacy
// stream, the thread's capture mode forbids such calls now.
cudaError_t capture_check_unsafe(cudaStream_t s);

// Every exported function starts with this: the server connection or an error.
// A __fatBinC_Wrapper_t of version 2 (-rdc=true): its linked image followed
// by the per-unit fatbins it lists, into *out; false for any other wrapper.
bool append_rdc_units(const void* wrapper, std::vector<uint8_t>* out);

#define WH_CONN(c)                      \
  cudaError_t wh_err_ = cudaSuccess;    \
  Connection* c = conn_or(&wh_err_);    \
  if (!c) return set_error(wh_err_)

}  // namespace wh::guest
