// wormhole/server/backend.hpp - what a device backend gives the server.
//
// A Backend is one kind of device (the real GPU through the CUDA Driver
// API, or the sim CPU device). Each client session gets its own Context:
// on a GPU a separate CUDA context (a separate GPU address space), on the
// sim device a separate heap. The session validates every guest-supplied
// handle, range and offset before calling in here, so a Context may trust
// its arguments except device addresses inside kernel parameters, which
// only the device itself can police (and does: GPU page faults, or the sim
// device's bounds-checked address translation).
//
// Execution order: a session calls its Context from one thread, in the
// order the client issued the calls. The sim device executes every call
// before returning (a valid CUDA schedule; the client still never waits for
// posted work). The GPU backend enqueues on real CUDA streams.
#pragma once

#include <cuda_runtime_api.h>

#include "wormhole/proto/device_attrs.hpp"

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace wh::server {

// Backend::launch flags, the values of the Launch request's
// (proto::kLaunchCooperative, proto::kLaunchProgrammatic).
inline constexpr uint32_t kCooperativeLaunch = 1;
inline constexpr uint32_t kProgrammaticLaunch = 2;

using Err = int32_t;  // a cudaError_t value

struct KernelAttrs {
  uint32_t param_bytes = 0;
  std::vector<std::pair<uint32_t, uint32_t>> params;  // (offset, size) each
  int32_t max_threads = 1024;
  int32_t num_regs = 0;
  uint32_t shared_bytes = 0, local_bytes = 0, const_bytes = 0;
  int32_t ptx_version = 0, binary_version = 0;
};

struct Dim3 {
  uint32_t x = 1, y = 1, z = 1;
};

// Opaque backend objects; the session owns their lifetime via handles.
struct Stream {
  virtual ~Stream() = default;
  // The backend's own stream (a CUstream on a GPU; nullptr on the sim
  // device), for library backends such as cuBLAS.
  virtual void* native() { return nullptr; }
};
struct Event { virtual ~Event() = default; };
struct Module { virtual ~Module() = default; };
struct Kernel { virtual ~Kernel() = default; };
// A stream-ordered memory pool (cudaMemPool_t). The Context that made it
// owns it; the session only names it (through a handle) until it destroys it.
struct MemPool { virtual ~MemPool() = default; };
struct MemPoolProps {
  uint64_t max_size = 0;  // bytes the pool may reserve (0: no limit of its own)
};

class Blas;  // wormhole/server/blas.hpp
class Fft;   // wormhole/server/fft.hpp
class BlasLt;  // wormhole/server/blaslt.hpp
class Rand;  // wormhole/server/rand.hpp
class Dnn;   // wormhole/server/dnn.hpp

// What a kernel printed, for the application (collected on the sim device;
// a GPU prints into the server's own stdout, see docs/hardware.md): printf
// text (its stdout) and device-assert messages (its stderr). printf text
// past `limit` bytes is dropped and counted, as a full printf FIFO drops it.
struct KernelOutput {
  std::string out, err;
  uint64_t limit = 1 << 20;
  uint64_t dropped = 0;
};

// A texture or surface object over device memory the session has checked:
// a CUDA array's backing store (row-major, `pitch` bytes per row, `slice`
// bytes per 2D slice or layer) or the guest's linear / pitch2D memory.
struct TexSpec {
  uint64_t dptr = 0, bytes = 0, pitch = 0, slice = 0;
  uint32_t w = 1, h = 1, d = 1;  // elements; d: depth, or layers when layered
  uint8_t dims = 1;              // 1, 2, 3
  bool layered = false, linear_mem = false;
  uint8_t nch = 1, cbytes = 4, ckind = 2;  // channels, bytes per channel, cudaChannelFormatKind
  uint32_t levels = 1;
  // texture only (cudaTextureDesc, checked)
  uint8_t addr[3] = {1, 1, 1};
  bool filter_linear = false, read_normalized = false, norm_coords = false, srgb = false;
  float border[4] = {0, 0, 0, 0};
};

// A module's variable (checkpoint): its device address and size; `own`:
// in the module's device memory, else moved into mapped host memory
// (a __managed__ variable, module_rebind_global).
struct ModuleVar {
  std::string name;
  uint64_t dptr = 0, bytes = 0;
  bool own = true;
};

class Context {
 public:
  virtual ~Context() = default;

  virtual Err mem_alloc(uint64_t bytes, uint64_t* dptr) = 0;
  virtual Err mem_free(uint64_t dptr) = 0;
  virtual Err mem_info(uint64_t* free_bytes, uint64_t* total_bytes) = 0;
  // Makes host memory (a channel's data area) addressable by kernels, at
  // device address `want` when the backend can place it there (the guest's
  // own address of the area, for managed memory), else where it chooses.
  // A context holds several such mappings (the data area and the client's
  // grown pinned segments), never overlapping.
  virtual Err map_host(void* host, uint64_t bytes, uint64_t want, uint64_t* dptr) = 0;
  // Undoes map_host (the memory is about to go): kernels no longer reach it.
  virtual Err unmap_host(uint64_t dptr) = 0;

  // ---- stream-ordered allocation (cudaMallocAsync and memory pools).
  // Pools are private to the context: on a GPU the device's own default
  // pool is shared by every context of the process, so a session's
  // "default pool" is a pool it created. mem_free and mem_free_async take
  // an allocation of either kind. The session validates handles, sizes and
  // attribute numbers (and that a set value is allowed) before calling.
  virtual Err pool_create(const MemPoolProps&, MemPool** out) { return cudaErrorNotSupported; }
  // Gives back what the pool holds unused; allocations still out keep it
  // alive until they are freed.
  virtual Err pool_destroy(MemPool* p) { return cudaErrorNotSupported; }
  virtual Err mem_alloc_async(MemPool* p, uint64_t bytes, Stream* s, uint64_t* dptr) {
    return cudaErrorNotSupported;
  }
  virtual Err mem_free_async(uint64_t dptr, Stream* s) { return cudaErrorNotSupported; }
  virtual Err pool_trim(MemPool* p, uint64_t keep_bytes) { return cudaErrorNotSupported; }
  // `attr` is a cudaMemPoolAttr; int-valued attributes travel as 0/1.
  virtual Err pool_set_attribute(MemPool* p, int attr, uint64_t value) { return cudaErrorNotSupported; }
  virtual Err pool_get_attribute(MemPool* p, int attr, uint64_t* value) { return cudaErrorNotSupported; }
  // The client synchronised (device, stream or event): pools give back
  // what they hold above their release threshold. (A GPU's driver does
  // this itself.)
  virtual void pool_sync_point() {}

  // `s` may be nullptr: the legacy default stream.
  virtual Err copy_htod(uint64_t dst, const void* src, uint64_t n, Stream* s) = 0;
  virtual Err copy_dtoh(void* dst, uint64_t src, uint64_t n, Stream* s) = 0;
  virtual Err copy_dtod(uint64_t dst, uint64_t src, uint64_t n, Stream* s) = 0;
  virtual Err memset8(uint64_t dst, uint8_t value, uint64_t n, Stream* s) = 0;

  virtual Err module_load(std::span<const uint8_t> fatbin, std::unique_ptr<Module>* out,
                          std::string* log) = 0;
  virtual void module_unload(Module& m) = 0;  // frees its globals; handles die with it
  virtual Err module_kernel(Module& m, const std::string& name, std::unique_ptr<Kernel>* out,
                            KernelAttrs* attrs) = 0;
  virtual Err module_global(Module& m, const std::string& name, uint64_t* dptr,
                            uint64_t* bytes) = 0;
  // Moves a module global (a __managed__ variable) to `dptr`, inside the
  // mapped host memory, with its current value; the session has checked
  // that the whole variable fits there.
  virtual Err module_rebind_global(Module& m, const std::string& name, uint64_t dptr) = 0;
  // `flags`: kCooperativeLaunch, the blocks run co-resident and may sync
  // grid-wide (a grid larger than the device holds at once is refused);
  // kProgrammaticLaunch, programmatic dependent launch (the kernel may
  // overlap the previous kernel of its stream, which it waits for in
  // griddepcontrol.wait; running after it is also correct).
  virtual Err launch(Kernel& k, Dim3 grid, Dim3 block, uint32_t shared_bytes, uint32_t flags, Stream* s,
                     std::span<const uint8_t> params, std::string* log, KernelOutput* output) = 0;
  // Thread-instructions executed by this context's kernels so far (the sim
  // device's PTX interpreter counts them per lane); 0 where nothing counts.
  virtual uint64_t thread_instructions() const { return 0; }
  // launch() returns once the kernel has run (the sim device), so the time
  // it takes is the kernel's run time (NVML's utilization, libs/nvml).
  virtual bool launch_is_timed() const { return false; }

  virtual Err stream_create(uint32_t flags, int priority, std::unique_ptr<Stream>* out) = 0;
  virtual Err stream_synchronize(Stream* s) = 0;
  virtual Err stream_query(Stream* s) = 0;
  virtual Err stream_wait_event(Stream* s, Event& e) = 0;
  virtual Err event_create(uint32_t flags, std::unique_ptr<Event>* out) = 0;
  virtual Err event_record(Event& e, Stream* s) = 0;
  virtual Err event_synchronize(Event& e) = 0;
  virtual Err event_query(Event& e) = 0;
  virtual Err event_elapsed(Event& start, Event& end, float* ms) = 0;
  virtual Err synchronize() = 0;

  // Stops the kernel running in this context, from any thread, and every
  // later one: the context's session is ending (its client is gone or the
  // server stops). A GPU kernel cannot be stopped short of destroying the
  // context, so the cuda backend does nothing here.
  virtual void cancel() {}

  // cudaDeviceSetLimit / cudaDeviceGetLimit (a cudaLimit value; the session
  // has checked its range). The value read back is what the device uses.
  virtual Err set_limit(int limit, uint64_t value) = 0;
  virtual Err get_limit(int limit, uint64_t* value) = 0;
  // cudaDeviceReset: the device heap (kernels' malloc) goes with the context,
  // and its size may be set again. The sim device keeps it in the context.
  virtual void reset_device_heap() {}

  // The sim device's host memory behind [dptr, dptr+bytes) when the whole
  // range is inside one allocation (nullptr otherwise, and always on a
  // GPU). Library backends on the sim device (OpenBLAS for cuBLAS) use it.
  virtual uint8_t* host_view(uint64_t dptr, uint64_t bytes) { return nullptr; }

  // Texture and surface objects (cudaCreateTextureObject/SurfaceObject):
  // *obj is the 64-bit value kernels receive. Destroy takes a value this
  // context returned (the session checks).
  virtual Err texture_create(const TexSpec&, bool surface, uint64_t* obj) { return cudaErrorNotSupported; }
  virtual Err texture_destroy(uint64_t obj, bool surface) { return cudaErrorInvalidValue; }
  // The same with the value a saved session's kernels hold (a restore).
  virtual Err texture_create_at(const TexSpec&, bool surface, uint64_t obj) { return cudaErrorNotSupported; }

  // ---- checkpoint and restore (docs/migration.md). A restored session
  // has every allocation, module variable and mapping at the address it
  // had, so the pointers its client holds stay valid.
  // The base of the device-address window this context places memory in
  // (ContextLimits::va_base asks for it again); 0 where it cannot choose.
  virtual uint64_t va_base() const { return 0; }
  // What this context holds that no checkpoint carries (empty: nothing).
  virtual std::string unmovable() const {
    return "device memory of a backend that cannot place it at the same addresses again";
  }
  // An allocation of `bytes` at exactly `dptr`, charged like mem_alloc.
  virtual Err mem_alloc_at(uint64_t dptr, uint64_t bytes) { return cudaErrorNotSupported; }
  // module_load with variable i placed at place[i] (0: anywhere).
  virtual Err module_load_at(std::span<const uint8_t> fatbin, std::span<const uint64_t> place,
                             std::unique_ptr<Module>* out, std::string* log) {
    return cudaErrorNotSupported;
  }
  // An allocation of pool `p` of `bytes` at exactly `dptr` (a restored
  // cudaMallocAsync), and the pool an allocation came from (null: cudaMalloc).
  virtual Err pool_alloc_at(MemPool* p, uint64_t dptr, uint64_t bytes) { return cudaErrorNotSupported; }
  virtual MemPool* pool_of(uint64_t dptr) { return nullptr; }
  // The module's variables, in the module's order.
  virtual Err module_vars(Module& m, std::vector<ModuleVar>* out) { return cudaErrorNotSupported; }
  // The device-side malloc heap (kernels' malloc) as a checkpoint carries it:
  // its allocation (dptr 0: not made) and the blocks kernels hold in it, in
  // address order. heap_restore makes it again at the same place holding the
  // same blocks (the device limit already set; the caller writes its bytes).
  struct HeapState {
    uint64_t dptr = 0, bytes = 0;
    std::vector<std::pair<uint64_t, uint64_t>> live;  // address, bytes
  };
  virtual Err heap_state(HeapState* out) {
    *out = {};
    return cudaSuccess;
  }
  virtual Err heap_restore(const HeapState& s) { return cudaErrorNotSupported; }

  // This context's BLAS (cuBLAS semantics), created on first use; nullptr
  // (and *err) when the backend has none (e.g. no libcublas on the host).
  virtual Blas* blas(std::string* err) {
    if (err) *err = "no BLAS on this backend";
    return nullptr;
  }
  // This context's FFT (cuFFT semantics), created on first use; nullptr
  // (and *err) when the backend has none.
  virtual Fft* fft(std::string* err) {
    if (err) *err = "no FFT on this backend";
    return nullptr;
  }
  // This context's cuBLASLt, created on first use; nullptr (and *err) when
  // the backend has none.
  virtual BlasLt* blaslt(std::string* err) {
    if (err) *err = "no cuBLASLt on this backend";
    return nullptr;
  }
  // This context's random-number generators (cuRAND host-API semantics),
  // created on first use; nullptr (and *err) when the backend has none.
  virtual Rand* rand(std::string* err) {
    if (err) *err = "no cuRAND on this backend";
    return nullptr;
  }
  // This context's cuDNN, created on first use; nullptr (and *err) when the
  // backend has none (e.g. no libcudnn.so.9 on the host).
  virtual Dnn* dnn(std::string* err) {
    if (err) *err = "no cuDNN on this backend";
    return nullptr;
  }
};

// Device memory several sessions share a limit on (every session of one
// uid, with --uid-quota-mb): the limit and what they hold together.
struct SharedQuota {
  explicit SharedQuota(uint64_t l) : limit(l) {}
  const uint64_t limit;
  std::atomic<uint64_t> used{0};
  bool take(uint64_t n) {
    uint64_t u = used.load();
    do {
      if (n > limit || u > limit - n) return false;
    } while (!used.compare_exchange_weak(u, u + n));
    return true;
  }
  void give(uint64_t n) { used -= n; }
  uint64_t left() const {
    const uint64_t u = used.load();
    return u > limit ? 0 : limit - u;
  }
};

struct ContextLimits {
  uint64_t memory_quota = 0;            // bytes of device memory a session may hold (0: device size)
  std::shared_ptr<SharedQuota> shared;  // charged as well, when set
  // A restored session's device-address window (Context::va_base); the
  // context is refused when another holds it. 0: the backend chooses.
  uint64_t va_base = 0;
  // Who the session belongs to ("uid:1000", "vm:NAME"): the sim device shares
  // parsed and compiled modules between sessions of one tenant only. Empty:
  // shares with no one.
  std::string tenant;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  virtual int device_count() const = 0;
  // The whole device: every attribute it answers and the properties derived
  // from them (proto::props_from_attributes). Constant for a device.
  virtual Err describe(int device, proto::DeviceDescription* d) = 0;
  virtual int driver_version() const = 0;
  virtual std::unique_ptr<Context> create_context(int device, const ContextLimits& limits,
                                                  std::string* err) = 0;
};

// The sim device: CPU execution through the PTX interpreter and OpenBLAS.
// A kernel running longer than kernel_timeout_ms (0: no limit) fails with
// cudaErrorLaunchTimeout, as under a display watchdog. Sessions' device
// addresses start at device_va_base (a multiple of 2^40 in [2^48, 0xF1 << 48));
// any other value: a random 1 TiB window in that range.
std::unique_ptr<Backend> make_sim_backend(unsigned worker_threads, uint64_t memory_bytes,
                                          uint64_t kernel_timeout_ms = 0, uint64_t device_va_base = 0);
// The range make_sim_backend accepts for device_va_base.
constexpr uint64_t kSimVaBaseMin = uint64_t(0x100) << 40, kSimVaBaseEnd = uint64_t(0xF100) << 40;
// The real GPU through libcuda.so.1 (dlopen). nullptr (and *err) when no
// driver or no device is present.
std::unique_ptr<Backend> make_cuda_backend(std::string* err);
// Testing only: lets make_cuda_backend (and the cuda bodies of the libraries)
// load Wormhole's own drop-ins as NVIDIA's libraries, which forward to another
// server: the cuda backend then runs over that server's device (the stacked
// tests, docs/hardware.md). Without it a drop-in found is refused.
void allow_dropin_driver();

}  // namespace wh::server
