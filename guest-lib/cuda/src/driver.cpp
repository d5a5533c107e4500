// Initialisation, devices, contexts, errors and cuGetProcAddress.
#include "driver.hpp"

#include <cuda_profiler_api.h>
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <vector>

namespace wh::driver {

namespace {

std::atomic<bool> g_init{false};

// Contexts: one session, so one device context. cuCtxCreate makes further
// handles that share it (allocations, modules and streams are visible from
// all of them, as they are to the runtime); the primary context is the
// runtime's own.
struct Context {
  uint64_t id;
  unsigned flags;
  bool primary;
  std::atomic<bool> alive{true};
};
Context g_primary{1, 0, true};
std::mutex g_mu;
int g_primary_refs = 0;
std::set<Context*> g_created;
uint64_t g_next_id = 2;

// The thread's context stack; `touched` is false until the thread sets or
// pushes one: until then the current context is the primary one (the
// runtime binds it on first use, and so does this library).
struct Stack {
  std::vector<CUcontext> v;
  bool touched = false;
};
thread_local Stack t_stack;

}  // namespace

bool initialized() { return g_init.load(std::memory_order_relaxed); }
CUcontext primary() { return reinterpret_cast<CUcontext>(&g_primary); }
bool valid_context(CUcontext c) {
  if (c == primary()) return true;
  std::lock_guard lk(g_mu);
  return g_created.count(reinterpret_cast<Context*>(c)) != 0;
}

bool foreign_runtime() {
  static const bool foreign = [] {
    // The object our cudaDriverGetVersion binds to must be the one that
    // exports Wormhole's wh_guest_* functions.
    Dl_info rt{};
    if (!dladdr(reinterpret_cast<void*>(&cudaDriverGetVersion), &rt) || !rt.dli_fname) return false;
    void* h = dlopen(rt.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    bool ours = h && dlsym(h, "wh_guest_connection");
    if (h) dlclose(h);
    if (!ours)
      log_once(std::string("the CUDA runtime in this process is not Wormhole's (") + rt.dli_fname +
               "): preload Wormhole's libcudart.so.13 (wormhole-run does), the driver API is refused");
    return !ours;
  }();
  return foreign;
}

void log_once(const std::string& msg) {
  static std::mutex mu;
  static std::set<std::string> seen;
  std::lock_guard lk(mu);
  if (seen.insert(msg).second) std::fprintf(stderr, "wormhole libcuda: %s\n", msg.c_str());
}

bool read_file(const char* path, std::string* out) {
  if (!path) return false;
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::ostringstream ss;
  ss << f.rdbuf();
  *out = ss.str();
  return !f.bad();
}

CUresult to_cu(int e) {
  switch (e) {
    case cudaSuccess: return CUDA_SUCCESS;
    case cudaErrorInvalidValue: return CUDA_ERROR_INVALID_VALUE;
    case cudaErrorMemoryAllocation: return CUDA_ERROR_OUT_OF_MEMORY;
    case cudaErrorInitializationError: return CUDA_ERROR_NOT_INITIALIZED;
    case cudaErrorCudartUnloading: return CUDA_ERROR_DEINITIALIZED;
    case cudaErrorProfilerDisabled: return CUDA_ERROR_PROFILER_DISABLED;
    // A launch configuration or pitch the device refuses: the driver's code
    // has the runtime's number, which NVIDIA's static runtime passes on as
    // cudaErrorInvalidConfiguration / cudaErrorInvalidPitchValue (observed:
    // docs/export-tables.md), as programs built the default way expect.
    case cudaErrorInvalidConfiguration: return CUresult(cudaErrorInvalidConfiguration);
    case cudaErrorInvalidPitchValue: return CUresult(cudaErrorInvalidPitchValue);
    case cudaErrorInvalidSymbol: return CUDA_ERROR_NOT_FOUND;
    case cudaErrorInvalidHostPointer: return CUDA_ERROR_INVALID_VALUE;
    case cudaErrorInvalidDevicePointer: return CUDA_ERROR_INVALID_VALUE;
    case cudaErrorInvalidTexture: return CUDA_ERROR_INVALID_VALUE;
    case cudaErrorInvalidChannelDescriptor: return CUDA_ERROR_INVALID_VALUE;
    case cudaErrorInvalidMemcpyDirection: return CUDA_ERROR_INVALID_VALUE;
    case cudaErrorStubLibrary: return CUDA_ERROR_STUB_LIBRARY;
    case cudaErrorInsufficientDriver: return CUDA_ERROR_NO_DEVICE;
    case cudaErrorCallRequiresNewerDriver: return CUDA_ERROR_NOT_SUPPORTED;
    case cudaErrorMissingConfiguration: return CUDA_ERROR_INVALID_VALUE;
    case cudaErrorDevicesUnavailable: return CUDA_ERROR_DEVICE_UNAVAILABLE;
    case cudaErrorInvalidDeviceFunction: return CUDA_ERROR_INVALID_HANDLE;
    case cudaErrorInvalidKernelImage: return CUDA_ERROR_INVALID_IMAGE;
    case cudaErrorDeviceUninitialized: return CUDA_ERROR_INVALID_CONTEXT;
    case cudaErrorNoKernelImageForDevice: return CUDA_ERROR_NO_BINARY_FOR_GPU;
    case cudaErrorInvalidResourceHandle: return CUDA_ERROR_INVALID_HANDLE;
    case cudaErrorSymbolNotFound: return CUDA_ERROR_NOT_FOUND;
    case cudaErrorStartupFailure: return CUDA_ERROR_UNKNOWN;
    case cudaErrorApiFailureBase: return CUDA_ERROR_UNKNOWN;
    default:
      // From 100 on the runtime's codes are the driver's (CUDA 10.1 aligned
      // them); below, everything else is an argument error.
      return e >= 100 ? CUresult(e) : CUDA_ERROR_INVALID_VALUE;
  }
}

}  // namespace wh::driver

using namespace wh::driver;

namespace {
struct ErrorName {
  int code;
  const char* name;
};
const ErrorName kErrors[] = {
#include "cu_errors.inc"
};
const char* error_name(CUresult r) {
  for (auto& e : kErrors)
    if (e.code == int(r)) return e.name;
  return nullptr;
}
// "CUDA_ERROR_OUT_OF_MEMORY" -> "out of memory".
const char* error_text(CUresult r) {
  static std::mutex mu;
  static std::vector<std::pair<int, std::string>> made;
  const char* n = error_name(r);
  if (!n) return nullptr;
  std::lock_guard lk(mu);
  for (auto& [c, s] : made)
    if (c == int(r)) return s.c_str();
  std::string s = r == CUDA_SUCCESS ? "no error" : n + std::strlen("CUDA_ERROR_");
  for (char& ch : s) ch = ch == '_' ? ' ' : char(std::tolower(static_cast<unsigned char>(ch)));
  made.emplace_back(int(r), s);
  return made.back().second.c_str();
}

CUresult device_ok(CUdevice d) {
  WH_INIT();
  int n = 0;
  if (cudaError_t e = cudaGetDeviceCount(&n); e != cudaSuccess) return rt(e);
  return d >= 0 && d < n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

CUcontext current() {
  if (!t_stack.touched) return primary();
  return t_stack.v.empty() ? nullptr : t_stack.v.back();
}
}  // namespace

extern "C" {

// ---- initialisation, versions, errors
CUresult cuInit(unsigned int flags) {
  if (flags) return CUDA_ERROR_INVALID_VALUE;
  if (foreign_runtime()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!wh_guest_connection()) return CUDA_ERROR_NO_DEVICE;
  g_init = true;
  return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int* v) {
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  if (foreign_runtime()) return CUDA_ERROR_NOT_INITIALIZED;
  return rt(cudaDriverGetVersion(v));
}

CUresult cuGetErrorString(CUresult r, const char** s) {
  if (!s) return CUDA_ERROR_INVALID_VALUE;
  *s = error_text(r);
  return *s ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetErrorName(CUresult r, const char** s) {
  if (!s) return CUDA_ERROR_INVALID_VALUE;
  *s = error_name(r);
  return *s ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

// ---- devices
CUresult cuDeviceGetCount(int* n) {
  WH_INIT();
  if (!n) return CUDA_ERROR_INVALID_VALUE;
  return rt(cudaGetDeviceCount(n));
}

CUresult cuDeviceGet(CUdevice* d, int ordinal) {
  if (!d) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = device_ok(ordinal); r != CUDA_SUCCESS) return r;
  *d = ordinal;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char* name, int len, CUdevice d) {
  if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = device_ok(d); r != CUDA_SUCCESS) return r;
  cudaDeviceProp p;
  if (cudaError_t e = cudaGetDeviceProperties(&p, d); e != cudaSuccess) return rt(e);
  std::snprintf(name, size_t(len), "%s", p.name);
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice d) {
  if (!uuid) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = device_ok(d); r != CUDA_SUCCESS) return r;
  cudaDeviceProp p;
  if (cudaError_t e = cudaGetDeviceProperties(&p, d); e != cudaSuccess) return rt(e);
  static_assert(sizeof uuid->bytes == sizeof p.uuid.bytes);
  std::memcpy(uuid->bytes, p.uuid.bytes, sizeof uuid->bytes);
  return CUDA_SUCCESS;
}
CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice d) { return cuDeviceGetUuid_v2(uuid, d); }

CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice d) {
  if (!bytes) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = device_ok(d); r != CUDA_SUCCESS) return r;
  cudaDeviceProp p;
  if (cudaError_t e = cudaGetDeviceProperties(&p, d); e != cudaSuccess) return rt(e);
  *bytes = p.totalGlobalMem;
  return CUDA_SUCCESS;
}

// CUdevice_attribute and cudaDeviceAttr share their numbering.
CUresult cuDeviceGetAttribute(int* v, CUdevice_attribute a, CUdevice d) {
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = device_ok(d); r != CUDA_SUCCESS) return r;
  if (a <= 0 || a >= CU_DEVICE_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
  // The driver answers every attribute it defines, including those the
  // runtime's enum keeps as reserved (the static runtime asks for them at
  // start): a feature the device does not describe reads 0, as on a GPU
  // without it.
  cudaError_t e = cudaDeviceGetAttribute(v, cudaDeviceAttr(a), d);
  if (e == cudaErrorInvalidValue) {
    cudaGetLastError();  // not an error of the program's
    *v = 0;
    return CUDA_SUCCESS;
  }
  return rt(e);
}

CUresult cuDeviceComputeCapability(int* major, int* minor, CUdevice d) {
  if (!major || !minor) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = cuDeviceGetAttribute(major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d); r != CUDA_SUCCESS)
    return r;
  return cuDeviceGetAttribute(minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d);
}

CUresult cuDeviceGetPCIBusId(char* id, int len, CUdevice d) {
  if (CUresult r = device_ok(d); r != CUDA_SUCCESS) return r;
  return rt(cudaDeviceGetPCIBusId(id, len, d));
}

CUresult cuDeviceGetByPCIBusId(CUdevice* d, const char* id) {
  WH_INIT();
  return rt(cudaDeviceGetByPCIBusId(d, id));
}

CUresult cuDeviceCanAccessPeer(int* can, CUdevice d, CUdevice peer) {
  if (!can) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = device_ok(d); r != CUDA_SUCCESS) return r;
  if (CUresult r = device_ok(peer); r != CUDA_SUCCESS) return r;
  *can = 0;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetDefaultMemPool(CUmemoryPool* pool, CUdevice d) {
  if (CUresult r = device_ok(d); r != CUDA_SUCCESS) return r;
  return rt(cudaDeviceGetDefaultMemPool(reinterpret_cast<cudaMemPool_t*>(pool), d));
}
CUresult cuDeviceGetMemPool(CUmemoryPool* pool, CUdevice d) {
  if (CUresult r = device_ok(d); r != CUDA_SUCCESS) return r;
  return rt(cudaDeviceGetMemPool(reinterpret_cast<cudaMemPool_t*>(pool), d));
}
CUresult cuDeviceSetMemPool(CUdevice d, CUmemoryPool pool) {
  if (CUresult r = device_ok(d); r != CUDA_SUCCESS) return r;
  return rt(cudaDeviceSetMemPool(d, reinterpret_cast<cudaMemPool_t>(pool)));
}

CUresult cuDeviceGetProperties(CUdevprop* p, CUdevice d) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = device_ok(d); r != CUDA_SUCCESS) return r;
  cudaDeviceProp dp;
  if (cudaError_t e = cudaGetDeviceProperties(&dp, d); e != cudaSuccess) return rt(e);
  p->maxThreadsPerBlock = dp.maxThreadsPerBlock;
  for (int i = 0; i < 3; i++) p->maxThreadsDim[i] = dp.maxThreadsDim[i], p->maxGridSize[i] = dp.maxGridSize[i];
  p->sharedMemPerBlock = int(dp.sharedMemPerBlock);
  p->totalConstantMemory = int(dp.totalConstMem);
  p->SIMDWidth = dp.warpSize;
  p->memPitch = int(std::min<size_t>(dp.memPitch, INT32_MAX));
  p->regsPerBlock = dp.regsPerBlock;
  p->textureAlign = int(dp.textureAlignment);
  return cuDeviceGetAttribute(&p->clockRate, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, d);
}

// One device: no peer pairs (a device is not its own peer).
CUresult cuDeviceGetP2PAttribute(int* v, CUdevice_P2PAttribute, CUdevice src, CUdevice dst) {
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = device_ok(src); r != CUDA_SUCCESS) return r;
  if (CUresult r = device_ok(dst); r != CUDA_SUCCESS) return r;
  return CUDA_ERROR_INVALID_DEVICE;
}

CUresult cuDeviceGetExecAffinitySupport(int* v, CUexecAffinityType type, CUdevice d) {
  if (!v || type >= CU_EXEC_AFFINITY_TYPE_MAX) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = device_ok(d); r != CUDA_SUCCESS) return r;
  *v = 0;  // no SM partitioning
  return CUDA_SUCCESS;
}

CUresult cuProfilerStart(void) {
  WH_INIT();
  return rt(cudaProfilerStart());
}
CUresult cuProfilerStop(void) {
  WH_INIT();
  return rt(cudaProfilerStop());
}

// ---- the primary context
CUresult cuDevicePrimaryCtxRetain(CUcontext* c, CUdevice d) {
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = device_ok(d); r != CUDA_SUCCESS) return r;
  std::lock_guard lk(g_mu);
  g_primary_refs++;
  *c = primary();
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) {
  if (CUresult r = device_ok(d); r != CUDA_SUCCESS) return r;
  std::lock_guard lk(g_mu);
  if (g_primary_refs <= 0) return CUDA_ERROR_INVALID_CONTEXT;
  g_primary_refs--;
  return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxRelease(CUdevice d) { return cuDevicePrimaryCtxRelease_v2(d); }

// The context stays usable while the runtime uses it (it is the runtime's).
CUresult cuDevicePrimaryCtxGetState(CUdevice d, unsigned* flags, int* active) {
  if (!flags || !active) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = device_ok(d); r != CUDA_SUCCESS) return r;
  std::lock_guard lk(g_mu);
  *flags = g_primary.flags;
  *active = g_primary_refs > 0;
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice d, unsigned flags) {
  if (CUresult r = device_ok(d); r != CUDA_SUCCESS) return r;
  if (flags & ~unsigned(CU_CTX_FLAGS_MASK)) return CUDA_ERROR_INVALID_VALUE;
  {
    std::lock_guard lk(g_mu);
    g_primary.flags = flags;
  }
  // The scheduling and mapping flags are the runtime's device flags.
  return rt(cudaSetDeviceFlags(flags & (cudaDeviceScheduleMask | cudaDeviceMapHost | cudaDeviceLmemResizeToMax)));
}
CUresult cuDevicePrimaryCtxSetFlags(CUdevice d, unsigned flags) { return cuDevicePrimaryCtxSetFlags_v2(d, flags); }

// Destroys every allocation and module of the session, as cudaDeviceReset.
CUresult cuDevicePrimaryCtxReset_v2(CUdevice d) {
  if (CUresult r = device_ok(d); r != CUDA_SUCCESS) return r;
  {
    std::lock_guard lk(g_mu);
    g_primary_refs = 0;
    g_primary.flags = 0;
  }
  // Whoever keeps state in the context (a static CUDA runtime: its streams,
  // events, modules) is told it is gone, as the driver does.
  wh::driver::context_storage_destroyed(primary());
  return rt(cudaDeviceReset());
}
CUresult cuDevicePrimaryCtxReset(CUdevice d) { return cuDevicePrimaryCtxReset_v2(d); }

// ---- contexts
static CUresult ctx_create(CUcontext* c, unsigned flags, CUdevice d) {
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = device_ok(d); r != CUDA_SUCCESS) return r;
  if (flags & ~unsigned(CU_CTX_FLAGS_MASK)) return CUDA_ERROR_INVALID_VALUE;
  auto* ctx = new Context{0, flags, false};
  {
    std::lock_guard lk(g_mu);
    ctx->id = g_next_id++;
    g_created.insert(ctx);
  }
  *c = reinterpret_cast<CUcontext>(ctx);
  t_stack.touched = true;
  t_stack.v.push_back(*c);
  return CUDA_SUCCESS;
}

CUresult cuCtxCreate_v2(CUcontext* c, unsigned flags, CUdevice d) { return ctx_create(c, flags, d); }
CUresult cuCtxCreate(CUcontext* c, unsigned flags, CUdevice d) { return ctx_create(c, flags, d); }
CUresult cuCtxCreate_v3(CUcontext* c, CUexecAffinityParam* params, int n, unsigned flags, CUdevice d) {
  if (n < 0 || (n && !params)) return CUDA_ERROR_INVALID_VALUE;
  // SM-count affinity only restricts a GPU's scheduling: results do not depend on it.
  for (int i = 0; i < n; i++)
    if (params[i].type != CU_EXEC_AFFINITY_TYPE_SM_COUNT) return CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY;
  return ctx_create(c, flags, d);
}
CUresult cuCtxCreate_v4(CUcontext* c, CUctxCreateParams* p, unsigned flags, CUdevice d) {
  if (p) {
    if (p->numExecAffinityParams < 0 || (p->numExecAffinityParams && !p->execAffinityParams))
      return CUDA_ERROR_INVALID_VALUE;
    for (int i = 0; i < p->numExecAffinityParams; i++)
      if (p->execAffinityParams[i].type != CU_EXEC_AFFINITY_TYPE_SM_COUNT) return CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY;
    if (p->cigParams) {
      log_once("cuCtxCreate: CUDA-in-graphics contexts are not supported");
      return CUDA_ERROR_NOT_SUPPORTED;
    }
  }
  return ctx_create(c, flags, d);
}

CUresult cuCtxDestroy_v2(CUcontext c) {
  WH_INIT();
  if (c == primary()) return CUDA_ERROR_INVALID_CONTEXT;  // the primary one is released, not destroyed
  {
    std::lock_guard lk(g_mu);
    if (!g_created.erase(reinterpret_cast<Context*>(c))) return CUDA_ERROR_INVALID_CONTEXT;
  }
  std::erase(t_stack.v, c);
  // The handle is not freed: other threads may still hold it current; it is
  // no longer valid for any call.
  reinterpret_cast<Context*>(c)->alive = false;
  return CUDA_SUCCESS;
}
CUresult cuCtxDestroy(CUcontext c) { return cuCtxDestroy_v2(c); }

CUresult cuCtxPushCurrent_v2(CUcontext c) {
  WH_INIT();
  if (!valid_context(c)) return CUDA_ERROR_INVALID_CONTEXT;
  if (!t_stack.touched) {
    t_stack.touched = true;
    t_stack.v.push_back(primary());  // what was current until now
  }
  t_stack.v.push_back(c);
  return CUDA_SUCCESS;
}
CUresult cuCtxPushCurrent(CUcontext c) { return cuCtxPushCurrent_v2(c); }

CUresult cuCtxPopCurrent_v2(CUcontext* c) {
  WH_INIT();
  CUcontext cur = current();
  if (!cur) return CUDA_ERROR_INVALID_CONTEXT;
  t_stack.touched = true;
  if (!t_stack.v.empty()) t_stack.v.pop_back();
  if (c) *c = cur;
  return CUDA_SUCCESS;
}
CUresult cuCtxPopCurrent(CUcontext* c) { return cuCtxPopCurrent_v2(c); }

CUresult cuCtxSetCurrent(CUcontext c) {
  WH_INIT();
  if (c && !valid_context(c)) return CUDA_ERROR_INVALID_CONTEXT;
  t_stack.touched = true;
  if (!t_stack.v.empty()) t_stack.v.pop_back();
  if (c) t_stack.v.push_back(c);
  return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext* c) {
  WH_INIT();
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  *c = current();
  return CUDA_SUCCESS;
}

// The calls below act on the current context; with none current they fail
// as the driver's do.
#define WH_CTX()                                            \
  do {                                                      \
    WH_INIT();                                              \
    if (!current()) return CUDA_ERROR_INVALID_CONTEXT;      \
  } while (0)

CUresult cuCtxGetDevice(CUdevice* d) {
  WH_CTX();
  if (!d) return CUDA_ERROR_INVALID_VALUE;
  *d = 0;
  return CUDA_SUCCESS;
}
CUresult cuCtxGetDevice_v2(CUdevice* d, CUcontext c) {
  WH_INIT();
  if (c && !valid_context(c)) return CUDA_ERROR_INVALID_CONTEXT;
  return cuCtxGetDevice(d);
}

CUresult cuCtxGetFlags(unsigned* flags) {
  WH_CTX();
  if (!flags) return CUDA_ERROR_INVALID_VALUE;
  *flags = reinterpret_cast<Context*>(current())->flags;
  return CUDA_SUCCESS;
}

CUresult cuCtxSetFlags(unsigned flags) {
  WH_CTX();
  if (flags & ~unsigned(CU_CTX_FLAGS_MASK)) return CUDA_ERROR_INVALID_VALUE;
  reinterpret_cast<Context*>(current())->flags = flags;
  return CUDA_SUCCESS;
}

CUresult cuCtxGetId(CUcontext c, unsigned long long* id) {
  WH_INIT();
  if (!id) return CUDA_ERROR_INVALID_VALUE;
  if (!c) c = current();
  if (!c || !valid_context(c)) return CUDA_ERROR_INVALID_CONTEXT;
  *id = reinterpret_cast<Context*>(c)->id;
  return CUDA_SUCCESS;
}

CUresult cuCtxGetApiVersion(CUcontext c, unsigned* v) {
  WH_INIT();
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  if (c && !valid_context(c)) return CUDA_ERROR_INVALID_CONTEXT;
  *v = 3020;  // the context API version of every CUDA release since 3.2
  return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize(void) {
  WH_CTX();
  return rt(cudaDeviceSynchronize());
}
CUresult cuCtxSynchronize_v2(CUcontext c) {
  WH_INIT();
  if (c && !valid_context(c)) return CUDA_ERROR_INVALID_CONTEXT;
  return rt(cudaDeviceSynchronize());
}

CUresult cuCtxSetLimit(CUlimit l, size_t v) {
  WH_CTX();
  return rt(cudaDeviceSetLimit(cudaLimit(l), v));
}
CUresult cuCtxGetLimit(size_t* v, CUlimit l) {
  WH_CTX();
  return rt(cudaDeviceGetLimit(v, cudaLimit(l)));
}

CUresult cuCtxGetCacheConfig(CUfunc_cache* c) {
  WH_CTX();
  return rt(cudaDeviceGetCacheConfig(reinterpret_cast<cudaFuncCache*>(c)));
}
CUresult cuCtxSetCacheConfig(CUfunc_cache c) {
  WH_CTX();
  return rt(cudaDeviceSetCacheConfig(cudaFuncCache(c)));
}

CUresult cuCtxGetStreamPriorityRange(int* least, int* greatest) {
  WH_CTX();
  return rt(cudaDeviceGetStreamPriorityRange(least, greatest));
}

// Shared-memory bank configuration: fixed on current GPUs, accepted and ignored.
CUresult cuCtxGetSharedMemConfig(CUsharedconfig* c) {
  WH_CTX();
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  *c = CU_SHARED_MEM_CONFIG_FOUR_BYTE_BANK_SIZE;
  return CUDA_SUCCESS;
}
CUresult cuCtxSetSharedMemConfig(CUsharedconfig c) {
  WH_CTX();
  return unsigned(c) <= CU_SHARED_MEM_CONFIG_EIGHT_BYTE_BANK_SIZE ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuCtxResetPersistingL2Cache(void) {
  WH_CTX();
  return rt(cudaCtxResetPersistingL2Cache());
}

// ---- cuGetProcAddress: the generated table (gen_proc_table.sh) maps each
// name and ABI version to the symbol of this library that implements it.
struct wh_proc {
  const char* name;
  int version;
  int per_thread;
  void (*fn)(void);
};
extern const wh_proc wh_proc_table[];
extern const size_t wh_proc_table_size;

CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* status) {
  if (status) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
  *pfn = nullptr;
  if (foreign_runtime()) return CUDA_ERROR_NOT_INITIALIZED;
  if (flags & ~cuuint64_t(CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM))
    return CUDA_ERROR_INVALID_VALUE;
  const bool per_thread = flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  const wh_proc *best = nullptr, *best_pt = nullptr;
  bool known = false;
  for (size_t i = 0; i < wh_proc_table_size; i++) {
    const wh_proc& p = wh_proc_table[i];
    if (std::strcmp(p.name, symbol) != 0) continue;
    known = true;
    if (p.version > version) continue;
    const wh_proc*& slot = p.per_thread ? best_pt : best;
    if (!slot || p.version > slot->version) slot = &p;
  }
  if (!known) return CUDA_ERROR_NOT_FOUND;
  const wh_proc* r = per_thread && best_pt ? best_pt : best;
  if (!r) {
    if (status) *status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
    return CUDA_ERROR_NOT_FOUND;
  }
  *pfn = reinterpret_cast<void*>(r->fn);
  if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
  return CUDA_SUCCESS;
}

CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  return cuGetProcAddress_v2(symbol, pfn, version, flags, nullptr);
}

}  // extern "C"
