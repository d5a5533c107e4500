// Wormhole sim device: a PTX interpreter that runs nvcc-compiled kernels on the CPU.
// See docs/ptx.md for the design, coverage and limits.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "wormhole/common/fatbin.hpp"

namespace wh::ptx {

struct Dim3 {
  uint32_t x = 1, y = 1, z = 1;
};

// Generic-address windows used by the engine for shared, local and kernel-param
// memory (cvta.shared etc.). Device allocations handed out by the backend must not
// fall into [kWindowLow, 2^64).
constexpr uint64_t kSharedWindow = 0xFFFF'FF00'0000'0000ull;
constexpr uint64_t kLocalWindow = 0xFFFF'FE00'0000'0000ull;
constexpr uint64_t kParamWindow = 0xFFFF'FD00'0000'0000ull;
constexpr uint64_t kWindowLow = 0xFFFF'FD00'0000'0000ull;

// A texture or surface object as a kernel sees it: backing memory in the
// device address space (translated at each use, so an object whose memory
// was freed faults instead of reading stale bytes), layout, element format
// and, for textures, the sampler state. Values of the CUDA enums.
struct TexView {
  uint64_t dptr = 0, bytes = 0;  // backing memory
  uint64_t pitch = 0, slice = 0; // bytes per row, per 2D slice or layer
  uint32_t w = 1, h = 1, d = 1;  // extent in elements (d: depth, or layers when layered)
  uint8_t dims = 1;              // 1, 2 or 3 (a layered 2D texture has dims 2)
  bool layered = false;
  bool linear_mem = false;       // cudaResourceTypeLinear: tex1Dfetch semantics
  uint8_t nch = 1, cbytes = 4;   // channels (1, 2, 4), bytes per channel (1, 2, 4)
  uint8_t ckind = 2;             // cudaChannelFormatKind: 0 signed, 1 unsigned, 2 float
  uint8_t addr[3] = {1, 1, 1};   // cudaTextureAddressMode per dimension (1: clamp)
  bool filter_linear = false, read_normalized = false, norm_coords = false, srgb = false;
  uint32_t levels = 1;
  float border[4] = {0, 0, 0, 0};
};

// Device memory as the backend provides it.
struct DeviceMemory {
  virtual ~DeviceMemory() = default;
  // Host memory for [addr, addr+len) only if the whole range lies inside memory this
  // kernel may access (one allocation), else nullptr. Thread-safe.
  virtual uint8_t* translate(uint64_t addr, uint64_t len, bool write) = 0;
  // Optional fast path: the whole allocation containing addr (so the engine can cache
  // it and skip a virtual call per access). Return false if not provided/not found.
  // Must stay valid for the duration of a launch.
  struct Region {
    uint64_t base = 0, size = 0;
    uint8_t* host = nullptr;
    bool writable = false;
  };
  virtual bool region(uint64_t addr, Region& out) { return false; }
  // Every region a kernel may write (WORMHOLE_PTX_JIT=compare snapshots them
  // before a launch and compares them after). False: not provided, no comparison.
  virtual bool writable_regions(std::vector<Region>& out) { return false; }
  // The texture / surface object a kernel names by its 64-bit handle; false
  // if there is none. Read-only during a launch, thread-safe.
  virtual bool texture(uint64_t handle, TexView& out) { return false; }
  virtual bool surface(uint64_t handle, TexView& out) { return false; }
  // Device-side heap (malloc/free and new/delete in kernels). Called from the
  // worker threads of a launch, so implementations must be thread-safe.
  // device_malloc returns 0 when the heap is exhausted (a GPU returns NULL),
  // 16-byte aligned otherwise; the memory must stay reachable through
  // region()/translate() until freed, across launches.
  virtual uint64_t device_malloc(uint64_t bytes) { return 0; }
  // False when addr is not a live device_malloc block: the launch traps.
  virtual bool device_free(uint64_t addr) { return false; }
  // cudaDeviceGetAttribute called by a kernel (the device runtime of dynamic
  // parallelism); false for an attribute the device does not have.
  virtual bool device_attribute(int attr, int* value) { return false; }
};

// An initializer that holds the address of another variable (`generic(var)+off`,
// or one byte of it, `0xFF00(generic(var))`): once every variable is bound,
// bytes [offset, offset+size) of the holder get
// (address of globals()[target] + addend) >> shift.
struct GlobalReloc {
  uint64_t offset;
  uint32_t target;
  int64_t addend;
  uint8_t size, shift;
};

struct GlobalVar {
  std::string name;
  uint64_t size;
  uint32_t align;
  bool is_const;              // .const space (else .global)
  std::vector<uint8_t> init;  // zero-filled to size; function addresses included
  std::vector<GlobalReloc> relocs;  // variable addresses, written by Module::apply_relocs
};

struct KernelInfo {
  std::string name;
  std::vector<fatbin::ParamInfo> params;
  uint32_t param_bytes;
  uint32_t static_shared_bytes;
  uint32_t local_bytes_per_thread;
  int max_threads_per_block;
  int num_regs;  // estimate: registers declared by the entry, at most 255 (or .maxnreg) and 65536 / max_threads_per_block
  uint32_t const_bytes = 0;  // the .const variables its call graph uses
  bool uses_heap = false;  // its call graph calls malloc or free (or a kernel it may launch does)
};

// What a kernel prints, when the caller collects it: printf text, and
// device-assert messages worded as a GPU prints them. A warp's printf text
// that does not fit in `limit` bytes is dropped whole and counted (a full
// printf FIFO drops records, never part of one); assert text is bounded
// by `limit` too.
struct DeviceOutput {
  std::string printf_text, assert_text;
  uint64_t limit = 1 << 20;
  uint64_t dropped = 0;
};

struct LaunchConfig {
  Dim3 grid, block;
  uint32_t dynamic_shared_bytes = 0;
  DeviceOutput* output = nullptr;  // nullptr: printf writes to stdout; assert text only in LaunchError
  // When set, the launch stops at the next scheduling slice after *cancel becomes
  // true (well under a millisecond of interpretation) and returns Cancelled.
  const std::atomic<bool>* cancel = nullptr;
  // Watchdog: wall-clock limit of the launch in milliseconds (0 = none); a launch
  // running longer returns Timeout.
  uint64_t timeout_ms = 0;
  // cudaLaunchCooperativeKernel: grid.sync() of cooperative groups works (the grid
  // workspace is provided through %envreg1/%envreg2); the grid must fit what the
  // engine runs concurrently (Engine::max_coresident_blocks), else InvalidConfig.
  bool cooperative = false;
  // Dynamic parallelism: how many device-side launches may be pending
  // (cudaLimitDevRuntimePendingLaunchCount); one more fails in the kernel with
  // cudaErrorLaunchPendingCountExceeded.
  uint32_t pending_launch_limit = 2048;
};

struct LaunchError {
  enum Kind { None, Unsupported, BadAccess, Misaligned, Assert, Trap, InvalidConfig, Internal, Cancelled, Timeout } kind = None;
  std::string message;  // names kernel, PTX line, instruction; for a bad access: address, size, space
  explicit operator bool() const { return kind != None; }
};
const char* to_string(LaunchError::Kind);

namespace detail {
struct ModuleImpl;
struct EngineImpl;
}  // namespace detail

// A loaded module: the parsed PTX, and where this load put its variables.
// Loads that name the same `tenant` (non-empty: a user, a VM) and carry the
// same PTX share one parsed module and its compiled code (the compile cache,
// docs/ptx.md): a program run again, or several processes of one user, do not
// parse or compile the same kernels again. Loads of different tenants never
// share. Each load keeps its own variable addresses.
class Module {
 public:
  static std::unique_ptr<Module> from_ptx(std::string_view ptx_text, std::string* err, std::string_view tenant = {});
  // Links the PTX of several translation units (separate compilation, -rdc=true)
  // into one module: private symbols stay per unit, .weak definitions keep one,
  // .extern declarations resolve to another unit's definition (an undefined one
  // is an error naming it). See docs/ptx.md.
  static std::unique_ptr<Module> from_ptx_units(const std::vector<std::string_view>& units, std::string* err,
                                                std::string_view tenant = {});
  // Picks the best PTX entry (highest arch). A SASS-only fatbin followed, within
  // `avail`, by further fatbins (the per-unit fatbins of an -rdc=true program)
  // links the best PTX entry of each of those; SASS only otherwise is an error.
  static std::unique_ptr<Module> from_fatbin(const void* data, size_t avail, std::string* err,
                                             std::string_view tenant = {});
  ~Module();

  const std::vector<KernelInfo>& kernels() const;
  const KernelInfo* kernel(std::string_view name) const;  // mangled names as nvcc emits them
  // __device__ / __constant__ variables (with initializers). The backend allocates each
  // in device memory, copies init there, and binds the address before any launch.
  const std::vector<GlobalVar>& globals() const;
  // Returns false if no such variable.
  bool bind_global(std::string_view name, uint64_t device_addr);
  // Writes into `bytes` (the holder's size, e.g. a copy of g.init) the bound
  // addresses its relocations name; only those naming globals()[only_target]
  // when that is >= 0 (after that variable moved). False if a target is unbound.
  bool apply_relocs(const GlobalVar& holder, uint8_t* bytes, int64_t only_target = -1) const;
  // The architecture the PTX targets (75 for `.target sm_75`; 0 if none).
  int target_arch() const;

  const detail::ModuleImpl& impl() const { return *impl_; }
  // This load's variable addresses (by globals() index) and which are bound.
  const uint64_t* gaddr() const { return gaddr_.data(); }
  const uint8_t* gbound() const { return gbound_.data(); }

 private:
  explicit Module(std::shared_ptr<const detail::ModuleImpl> impl);
  std::shared_ptr<const detail::ModuleImpl> impl_;
  std::vector<uint64_t> gaddr_;
  std::vector<uint8_t> gbound_;
};

// Owns a worker pool; blocks of a grid run in parallel on it. launch() is
// synchronous and may be called from several threads (launches are serialized).
class Engine {
 public:
  explicit Engine(unsigned threads = 0 /*0 = hardware_concurrency*/);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  LaunchError launch(const Module&, std::string_view kernel, const LaunchConfig&, const void* params,
                     size_t params_size, DeviceMemory& mem);
  // Stops the launch in progress on this engine (if any) from any thread: it returns
  // Cancelled promptly. Has no effect on later launches.
  void cancel();
  // How many blocks of this shape run concurrently (and may wait on each other):
  // each worker thread models one SM holding up to min(32, 2048 / threads per block)
  // blocks, fewer when their registers, local and shared memory exceed 256 MiB.
  // 0 if the configuration is invalid for the kernel.
  uint64_t max_coresident_blocks(const Module&, std::string_view kernel, const LaunchConfig&) const;
  // Thread-instructions (per-lane count of executed, non-predicated-off instructions) since construction.
  uint64_t instructions_executed() const;
  unsigned threads() const;

 private:
  std::unique_ptr<detail::EngineImpl> impl_;
};

// The PTX compiler's work in this process (docs/ptx.md): kernels compiled to
// native code, the functions and instructions compiled, and the time it took.
struct CompileStats {
  double seconds = 0;
  uint64_t kernels = 0, functions = 0, instructions = 0;
  uint64_t shared_loads = 0;  // loads that found their module parsed (and maybe compiled) already
};
CompileStats compile_stats();
// A background compile is running or queued. The process's exit waits for the
// one running (LLVM's state must outlive it); a server that is stopping may
// rather leave at once (std::_Exit) when this says so.
bool compile_in_progress();

}  // namespace wh::ptx
