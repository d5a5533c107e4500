// The sim device: device memory is a per-session host heap with
// device-style addresses, kernels run on the PTX interpreter, everything
// executes in call order (so streams and events are trivially ordered, and
// events carry real host timestamps).
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "wormhole/proto/device_attrs.hpp"
#include "wormhole/ptx/engine.hpp"
#include "wormhole/server/backend.hpp"
#include "wormhole/server/blas.hpp"

namespace wh::server {

namespace {

using Clock = std::chrono::steady_clock;

// Each session's device addresses live in their own 1 TiB window, so a
// pointer of another session is never even a candidate for translation.
constexpr uint64_t kWindowShift = 40;
constexpr uint64_t kFirstWindow = 0x100;
constexpr uint64_t kAllocAlign = 256;  // cudaMalloc's alignment guarantee

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

class SimContext final : public Context, public ptx::DeviceMemory {
 public:
  // `device_used` counts every session's allocations: the sim device is one
  // device shared by all clients, as a GPU is.
  SimContext(uint64_t window, uint64_t quota, uint64_t device_bytes, std::atomic<uint64_t>& device_used,
             unsigned threads)
      : base_(window << kWindowShift), next_(base_), quota_(quota), device_bytes_(device_bytes),
        device_used_(device_used), engine_(threads) {}
  ~SimContext() override {
    for (auto& [addr, a] : allocs_) munmap(a.host, a.map_bytes);
    device_used_ -= used_;
  }

  // ---- ptx::DeviceMemory: kernels' view of this session's memory.
  // No lock: allocations change only on the session thread, never during a
  // launch (calls execute in order).
  uint8_t* translate(uint64_t addr, uint64_t len, bool write) override {
    Region r;
    if (!region(addr, r) || len > r.size - (addr - r.base)) return nullptr;
    return r.host + (addr - r.base);
  }
  bool region(uint64_t addr, Region& out) override {
    if (mapped_host_ && addr >= mapped_dptr_ && addr - mapped_dptr_ < mapped_bytes_) {
      out = {mapped_dptr_, mapped_bytes_, mapped_host_, true};
      return true;
    }
    auto it = allocs_.upper_bound(addr);
    if (it == allocs_.begin()) return false;
    --it;
    if (addr - it->first >= it->second.bytes) return false;
    out = {it->first, it->second.bytes, it->second.host, true};
    return true;
  }

  // ---- memory
  Err mem_alloc(uint64_t bytes, uint64_t* dptr) override {
    if (bytes == 0) {
      *dptr = 0;
      return cudaSuccess;
    }
    if (bytes > quota_ || used_ > quota_ - bytes) return cudaErrorMemoryAllocation;
    if (device_used_.fetch_add(bytes) + bytes > device_bytes_) {
      device_used_ -= bytes;
      return cudaErrorMemoryAllocation;
    }
    uint64_t map_bytes = (bytes + 4095) & ~uint64_t(4095);
    void* p = mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
      device_used_ -= bytes;
      return cudaErrorMemoryAllocation;
    }
    // Addresses are never reused within a session: a stale pointer after
    // cudaFree faults instead of silently hitting a newer allocation.
    uint64_t addr = next_;
    next_ += (bytes + kAllocAlign - 1) & ~(kAllocAlign - 1);
    if (next_ - base_ >= (uint64_t(1) << kWindowShift)) {
      munmap(p, map_bytes);
      device_used_ -= bytes;
      return cudaErrorMemoryAllocation;
    }
    allocs_[addr] = {static_cast<uint8_t*>(p), bytes, map_bytes};
    used_ += bytes;
    *dptr = addr;
    return cudaSuccess;
  }
  Err mem_free(uint64_t dptr) override {
    if (dptr == 0) return cudaSuccess;
    auto it = allocs_.find(dptr);
    if (it == allocs_.end()) return cudaErrorInvalidValue;
    munmap(it->second.host, it->second.map_bytes);
    used_ -= it->second.bytes;
    device_used_ -= it->second.bytes;
    allocs_.erase(it);
    return cudaSuccess;
  }
  Err mem_info(uint64_t* free_bytes, uint64_t* total_bytes) override {
    // Like a GPU: the device's free memory, as no more than this session may take.
    uint64_t dev_free = device_bytes_ - std::min(device_bytes_, device_used_.load());
    *total_bytes = device_bytes_;
    *free_bytes = std::min(dev_free, quota_ - used_);
    return cudaSuccess;
  }
  Err map_host(void* host, uint64_t bytes, uint64_t* dptr) override {
    // The mapped window sits at the top of this session's address window.
    mapped_host_ = static_cast<uint8_t*>(host);
    mapped_bytes_ = bytes;
    mapped_dptr_ = base_ + (uint64_t(1) << kWindowShift) - ((bytes + 0xFFFFF) & ~uint64_t(0xFFFFF)) - (1ull << 30);
    *dptr = mapped_dptr_;
    return cudaSuccess;
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
  Err module_load(std::span<const uint8_t> fatbin, std::unique_ptr<Module>* out,
                  std::string* log) override {
    std::string err;
    auto m = std::make_unique<SimModule>();
    m->mod = ptx::Module::from_fatbin(fatbin.data(), fatbin.size(), &err);
    if (!m->mod) {
      if (log) *log = err;
      return cudaErrorInvalidKernelImage;
    }
    for (const auto& g : m->mod->globals()) {
      uint64_t d = 0;
      if (Err e = mem_alloc(std::max<uint64_t>(g.size, 1), &d); e != cudaSuccess) {
        for (uint64_t a : m->globals) mem_free(a);
        return e;
      }
      m->globals.push_back(d);
      if (!g.init.empty()) copy_htod(d, g.init.data(), std::min<uint64_t>(g.init.size(), g.size), nullptr);
      m->mod->bind_global(g.name, d);
      m->symbols[g.name] = {d, g.size};
    }
    *out = std::move(m);
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
    attrs->ptx_version = 80;
    attrs->binary_version = 80;
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
  Err launch(Kernel& kb, Dim3 grid, Dim3 block, uint32_t shared_bytes, Stream*,
             std::span<const uint8_t> params, std::string* log, KernelOutput* output) override {
    auto& k = static_cast<SimKernel&>(kb);
    ptx::LaunchConfig cfg;
    cfg.grid = {grid.x, grid.y, grid.z};
    cfg.block = {block.x, block.y, block.z};
    cfg.dynamic_shared_bytes = shared_bytes;
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
      default: return cudaErrorLaunchFailure;
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
  uint8_t* host_view(uint64_t dptr, uint64_t bytes) override {
    return bytes ? translate(dptr, bytes, true) : nullptr;
  }
  Blas* blas(std::string*) override {
    if (!blas_) blas_ = make_sim_blas(*this);
    return blas_.get();
  }

 private:
  struct Alloc {
    uint8_t* host;
    uint64_t bytes;
    uint64_t map_bytes;
  };
  uint64_t base_, next_;
  uint64_t quota_;
  uint64_t device_bytes_;
  std::atomic<uint64_t>& device_used_;
  uint64_t used_ = 0;
  std::map<uint64_t, Alloc> allocs_;
  uint8_t* mapped_host_ = nullptr;
  uint64_t mapped_bytes_ = 0, mapped_dptr_ = 0;
  ptx::Engine engine_;
  std::unique_ptr<Blas> blas_;  // OpenBLAS over host_view (sim_blas.cpp)
};

class SimBackend final : public Backend {
 public:
  SimBackend(unsigned threads, uint64_t memory) : threads_(threads), memory_(memory) {}
  const char* name() const override { return "sim"; }
  int device_count() const override { return 1; }
  int driver_version() const override { return 13000; }
  Err device_props(int device, cudaDeviceProp* p) override {
    if (device != 0) return cudaErrorInvalidDevice;
    std::memset(p, 0, sizeof(*p));
    std::snprintf(p->name, sizeof(p->name), "Wormhole sim device (CPU, PTX interpreter)");
    p->totalGlobalMem = memory_;
    p->sharedMemPerBlock = 48 << 10;
    p->sharedMemPerBlockOptin = 99 << 10;
    p->sharedMemPerMultiprocessor = 100 << 10;
    p->regsPerBlock = 65536;
    p->regsPerMultiprocessor = 65536;
    p->warpSize = 32;
    p->memPitch = INT32_MAX;
    p->maxThreadsPerBlock = 1024;
    p->maxThreadsDim[0] = 1024;
    p->maxThreadsDim[1] = 1024;
    p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = INT32_MAX;
    p->maxGridSize[1] = 65535;
    p->maxGridSize[2] = 65535;
    p->totalConstMem = 64 << 10;
    p->major = 8;
    p->minor = 0;
    p->textureAlignment = 512;
    p->texturePitchAlignment = 32;
    p->multiProcessorCount = int(threads_ ? threads_ : std::max(1u, std::thread::hardware_concurrency()));
    p->integrated = 0;
    p->canMapHostMemory = 1;
    p->concurrentKernels = 0;
    p->pciBusID = 0;
    p->pciDeviceID = 0;
    p->asyncEngineCount = 0;
    p->unifiedAddressing = 1;
    p->memoryBusWidth = 64;
    p->l2CacheSize = 1 << 20;
    p->maxThreadsPerMultiProcessor = 2048;
    p->maxBlocksPerMultiProcessor = 32;
    p->streamPrioritiesSupported = 1;
    p->globalL1CacheSupported = 1;
    p->localL1CacheSupported = 1;
    p->managedMemory = 0;
    p->isMultiGpuBoard = 0;
    p->pageableMemoryAccess = 0;
    p->concurrentManagedAccess = 0;
    p->computePreemptionSupported = 0;
    p->canUseHostPointerForRegisteredMem = 0;
    p->cooperativeLaunch = 0;
    p->maxSurface1D = 0;
    p->reservedSharedMemPerBlock = 0;
    return cudaSuccess;
  }
  Err device_attribute(int device, int attr, int* value) override {
    cudaDeviceProp p;
    if (Err e = device_props(device, &p); e != cudaSuccess) return e;
    return proto::attribute_from_props(p, attr, value) ? cudaSuccess : cudaErrorInvalidValue;
  }
  std::unique_ptr<Context> create_context(int device, const ContextLimits& limits,
                                          std::string* err) override {
    if (device != 0) {
      if (err) *err = "no such device";
      return nullptr;
    }
    uint64_t quota = limits.memory_quota ? std::min(limits.memory_quota, memory_) : memory_;
    uint64_t window = kFirstWindow + next_window_.fetch_add(1) % 0xF000;  // windows recycle after 61440 sessions
    return std::make_unique<SimContext>(window, quota, memory_, used_, threads_);
  }

 private:
  unsigned threads_;
  uint64_t memory_;
  std::atomic<uint64_t> next_window_{0};
  std::atomic<uint64_t> used_{0};  // all sessions' device memory
};

}  // namespace

std::unique_ptr<Backend> make_sim_backend(unsigned worker_threads, uint64_t memory_bytes) {
  return std::make_unique<SimBackend>(worker_threads, memory_bytes);
}

}  // namespace wh::server
