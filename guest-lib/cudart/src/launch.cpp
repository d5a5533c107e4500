// The compiler-emitted ABI (fatbin, kernel and variable registration,
// <<<>>> launches) and the kernel-related runtime API.
//
// Fatbins are taken from the registration calls (nvcc 13 also embeds a
// kernel-less fatbin that is never registered) and shipped to the server
// once, on first use. Kernel parameter layouts come from the cubin's
// .nv.info (or the PTX when the fatbin has no cubin): launches carry no
// sizes, so the guest packs `void** args` into one buffer with them.
#include <cstring>
#include <functional>
#include <string_view>
#include <tuple>
#include <vector>

#include "progress.hpp"
#include "state.hpp"
#include "wormhole/proto/occupancy.hpp"
#include "wormhole/common/fatbin.hpp"

namespace wh::guest {

using namespace wh::proto;

namespace {

struct CallConfig {
  dim3 grid, block;
  size_t shared = 0;
  cudaStream_t stream = nullptr;
};
thread_local std::vector<CallConfig> t_configs;

void parse_params(Fatbin& fb) {
  if (fb.params_parsed) return;
  fb.params_parsed = true;
  std::vector<fatbin::Entry> entries;
  std::string err;
  if (!fatbin::parse(fb.wrapper, SIZE_MAX, entries, &err)) {
    log_once("cannot parse a registered fatbin: " + err);
    return;
  }
  std::map<std::string, std::vector<fatbin::ParamInfo>> found;
  for (auto& e : entries) {
    if (e.kind == fatbin::Entry::ELF && fatbin::cubin_kernel_params(e.bytes, found, &err)) break;
  }
  if (found.empty())
    for (auto& e : entries)
      if (e.kind == fatbin::Entry::PTX &&
          fatbin::ptx_kernel_params(std::string_view(reinterpret_cast<const char*>(e.bytes.data()), e.bytes.size()),
                                    found, &err))
        break;
  for (auto& [name, ps] : found) {
    auto& v = fb.params[name];
    for (auto& p : ps) v.push_back({p.offset, p.size});
  }
}

bool permanent_image_error(cudaError_t e) {
  return e == cudaErrorInvalidKernelImage || e == cudaErrorNoKernelImageForDevice || e == cudaErrorInvalidPtx ||
         e == cudaErrorUnsupportedPtxVersion;
}

// Images a device refused for what they are, by device, size and content:
// cuModuleLoadData* makes a new record each call, so the same bytes loaded
// again are answered from here rather than shipped and parsed again. Under
// g_load_mu.
using ImageKey = std::tuple<int, size_t, size_t>;
std::map<ImageKey, cudaError_t> g_refused_images;

ImageKey image_key(const Fatbin& fb) {
  return {current_device(), fb.size,
          std::hash<std::string_view>{}(std::string_view(reinterpret_cast<const char*>(fb.image), fb.size))};
}

// Ships the fatbin (once) through the data area's pinned heap. An image the
// device refused is never shipped again: every later use gets its error.
cudaError_t ensure_module(Connection* c, Fatbin& fb) {
  if (fb.module) return cudaSuccess;
  if (fb.load_error != cudaSuccess) return fb.load_error;
  const bool fresh_record = fb.driver;  // cuModuleLoadData*, cuLibraryLoadData*: a record per call
  if (fresh_record)
    if (auto it = g_refused_images.find(image_key(fb)); it != g_refused_images.end()) {
      fb.load_error = it->second;
      return it->second;
    }
  void* buf = nullptr;
  uint64_t off = 0;
  if (cudaError_t e = data_area_block(c, fb.size, &buf, &off); e != cudaSuccess) return e;
  std::memcpy(buf, fb.image, fb.size);
  ModuleLoadResp rs{};
  cudaError_t e = push_data_area(c, off, fb.size);
  if (e == cudaSuccess) e = c->call<Op::ModuleLoad>({off, fb.size}, &rs);
  heap_free_block(off);
  if (permanent_image_error(e)) {  // the image itself: the answer will not change
    fb.load_error = e;
    g_refused_images[image_key(fb)] = e;
  }
  if (e != cudaSuccess) return e;
  fb.module = rs.module;
  return bind_managed_vars(c, fb);
}

}  // namespace

// Serialises lazy module shipping (rt().mu is taken inside, so not that one).
std::mutex g_load_mu;

cudaError_t ensure_fatbin_module(Fatbin& fb) {
  std::lock_guard lk(g_load_mu);
  WH_CONN(c);
  return ensure_module(c, fb);
}

cudaError_t ensure_kernel(KernelRec* k) {
  if (k->handle.load(std::memory_order_acquire)) return cudaSuccess;
  std::lock_guard lk(g_load_mu);
  if (k->handle.load()) return cudaSuccess;
  WH_CONN(c);
  if (cudaError_t e = ensure_module(c, *k->fb); e != cudaSuccess) {
    // A library's image goes to the device when one of its kernels is first
    // used: that kernel is what the caller sees refused.
    if (k->fb->library)
      log_once("kernel " + k->name + ": refused: the library image holding it did not load on the device (" +
               cudaGetErrorName(e) + ")");
    return e;
  }
  parse_params(*k->fb);
  ModuleGetKernelResp rs{};
  std::vector<uint8_t> tail;
  cudaError_t e = c->call<Op::ModuleGetKernel>({k->fb->module}, &rs,
                                               {reinterpret_cast<const uint8_t*>(k->name.data()), k->name.size()}, &tail);
  if (e != cudaSuccess) return e;
  if (rs.max_threads) k->max_threads = rs.max_threads;
  std::vector<ParamInfo> server(rs.nparams);
  if (!tail.empty() && tail.size() == rs.nparams * sizeof(ParamInfo))
    std::memcpy(server.data(), tail.data(), tail.size());
  auto it = k->fb->params.find(k->name);
  if (it != k->fb->params.end()) {
    // Two descriptions of one layout (the cubin's .nv.info here, the PTX or
    // the driver on the server): a kernel they disagree on is never run
    // with arguments that may land in the wrong place.
    bool same = it->second.size() == server.size();
    for (size_t i = 0; same && i < server.size(); i++)
      same = it->second[i].offset == server[i].offset && it->second[i].size == server[i].size;
    if (!same) {
      log_once("kernel " + k->name + ": refused: its parameter layout in the cubin's .nv.info (" +
               std::to_string(it->second.size()) + " parameters) differs from the device's (" +
               std::to_string(server.size()) + " parameters)");
      return cudaErrorInvalidKernelImage;
    }
    k->params = it->second;
  } else {
    k->params = server;
  }
  k->param_bytes = rs.param_bytes;
  for (auto& p : k->params) k->param_bytes = std::max(k->param_bytes, p.offset + p.size);
  k->handle.store(rs.kernel, std::memory_order_release);
  return cudaSuccess;
}

cudaError_t ensure_var(VarRec* v) {
  std::lock_guard lk(g_load_mu);
  if (v->dptr) return cudaSuccess;
  WH_CONN(c);
  if (cudaError_t e = ensure_module(c, *v->fb); e != cudaSuccess) return e;
  ModuleGetGlobalResp rs{};
  cudaError_t e = c->call<Op::ModuleGetGlobal>({v->fb->module}, &rs,
                                               {reinterpret_cast<const uint8_t*>(v->name.data()), v->name.size()});
  if (e != cudaSuccess) return e;
  v->dptr = rs.dptr;
  v->size = rs.size;
  return cudaSuccess;
}

cudaError_t pack_launch(KernelRec* k, dim3 grid, dim3 block, void** args, uint8_t* buf, bool check_only) {
  if (!k) return cudaErrorInvalidDeviceFunction;
  if (cudaError_t e = ensure_kernel(k); e != cudaSuccess) return e;
  // Configuration errors are reported by the launch itself, as CUDA does.
  if (!grid.x || !grid.y || !grid.z || !block.x || !block.y || !block.z ||
      uint64_t(block.x) * block.y * block.z > std::min<uint32_t>(k->max_threads, 1024) || block.z > 64 ||
      grid.y > 65535 || grid.z > 65535)
    return cudaErrorInvalidConfiguration;
  if (k->param_bytes > kMaxParamBytes) return cudaErrorInvalidValue;
  std::memset(buf, 0, k->param_bytes);
  if (check_only) return cudaSuccess;
  if (!k->params.empty() && !args) return cudaErrorInvalidValue;
  for (size_t i = 0; i < k->params.size(); i++) std::memcpy(buf + k->params[i].offset, args[i], k->params[i].size);
  return cudaSuccess;
}

static cudaError_t send_launch(KernelRec* k, dim3 grid, dim3 block, const uint8_t* buf, size_t shared,
                               cudaStream_t s, uint32_t flags);

static cudaError_t launch(KernelRec* k, dim3 grid, dim3 block, void** args, size_t shared, cudaStream_t s,
                          uint32_t flags = 0) {
  uint8_t buf[kMaxParamBytes];
  if (cudaError_t e = pack_launch(k, grid, block, args, buf); e != cudaSuccess) return e;
  return send_launch(k, grid, block, buf, shared, s, flags);
}

cudaError_t launch_kernel(KernelRec* k, dim3 grid, dim3 block, void** args, size_t shared, cudaStream_t s,
                          uint32_t flags) {
  return launch(k, grid, block, args, shared, s, flags);
}

cudaError_t launch_kernel_packed(KernelRec* k, dim3 grid, dim3 block, const void* params, size_t bytes,
                                 size_t shared, cudaStream_t s, uint32_t flags) {
  uint8_t buf[kMaxParamBytes];
  if (cudaError_t e = pack_launch(k, grid, block, nullptr, buf, true); e != cudaSuccess) return e;
  // The caller's buffer holds the parameters at their offsets; it may be
  // longer (a struct's tail padding), never shorter.
  if (k->param_bytes && (!params || bytes < k->param_bytes)) return cudaErrorInvalidValue;
  if (k->param_bytes) std::memcpy(buf, params, k->param_bytes);
  return send_launch(k, grid, block, buf, shared, s, flags);
}

static cudaError_t send_launch(KernelRec* k, dim3 grid, dim3 block, const uint8_t* buf, size_t shared,
                               cudaStream_t s, uint32_t flags) {
  // A capturing stream records the launch into its graph instead.
  if (capture_any() && stream_capturing(s)) {
    if (flags & kLaunchCooperative) {
      log_once("stream capture: cooperative launches are not captured");
      return cudaErrorNotSupported;
    }
    // A programmatic launch becomes a node that runs after its
    // dependencies: the full serialization its attribute allows.
    return capture_kernel(s, k, grid, block, uint32_t(shared), buf);
  }
  WH_CONN(c);
  flush_device_output(c);  // a GPU flushes its printf buffer at the start of a launch
  LaunchReq rq{};
  rq.kernel = k->handle;
  rq.stream = stream_handle(s);
  rq.grid[0] = grid.x, rq.grid[1] = grid.y, rq.grid[2] = grid.z;
  rq.block[0] = block.x, rq.block[1] = block.y, rq.block[2] = block.z;
  rq.shared_bytes = uint32_t(shared);
  rq.flags = flags;
  uint64_t end;
  cudaError_t e = c->post<Op::Launch>(rq, {buf, k->param_bytes}, &end);
  if (e == cudaSuccess) note_stream_end(c, rq.stream, end);
  return e;
}

KernelRec* kernel_of(const void* host_fun) {
  std::lock_guard lk(rt().mu);
  auto it = rt().kernels.find(host_fun);
  if (it != rt().kernels.end()) return it->second;
  // A driver API function (a CUfunction in a graph's kernel node).
  return is_driver_function(host_fun) ? static_cast<KernelRec*>(const_cast<void*>(host_fun)) : nullptr;
}

}  // namespace wh::guest

using namespace wh::guest;
using namespace wh::proto;

namespace wh::guest {

bool append_rdc_units(const void* wrapper, std::vector<uint8_t>* out) {
  struct Wrapper {
    int magic, version;
    const void* data;
    void* filename;
  };
  auto* w = static_cast<const Wrapper*>(wrapper);
  if (!w || uint32_t(w->magic) != wh::fatbin::kWrapperMagic || w->version != 2 || !w->filename || !w->data)
    return false;
  const size_t linked = wh::fatbin::fatbin_size(w->data);
  if (!linked) return false;
  // Version 2 (FATBINC_LINK_VERSION, -rdc=true): filename_or_fatbins is a
  // NULL-terminated array of the per-unit fatbins; they travel after the
  // linked one in the same image.
  const auto* image = static_cast<const uint8_t*>(w->data);
  std::vector<uint8_t> all(image, image + linked);
  const auto* units = static_cast<const void* const*>(w->filename);
  for (size_t i = 0; units[i] && i + 1 < wh::fatbin::kMaxFatbins; ++i) {
    const size_t n = wh::fatbin::fatbin_size(units[i]);
    if (!n) break;
    const auto* p = static_cast<const uint8_t*>(units[i]);
    all.insert(all.end(), p, p + n);
  }
  if (all.size() == linked) return false;
  *out = std::move(all);
  return true;
}

}  // namespace wh::guest

extern "C" {

void** __cudaRegisterFatBinary(void* wrapper) {
  auto* fb = new Fatbin();
  fb->wrapper = wrapper;
  struct Wrapper {
    int magic, version;
    const void* data;
    void* filename;
  };
  auto* w = static_cast<const Wrapper*>(wrapper);
  if (w && uint32_t(w->magic) == wh::fatbin::kWrapperMagic) {
    fb->image = static_cast<const uint8_t*>(w->data);
    fb->size = wh::fatbin::fatbin_size(w->data);
    if (append_rdc_units(wrapper, &fb->rdc_image)) {
      fb->image = fb->rdc_image.data();
      fb->size = fb->rdc_image.size();
    }
  }
  std::lock_guard lk(rt().mu);
  rt().fatbins.push_back(fb);
  return reinterpret_cast<void**>(fb);
}

void __cudaRegisterFatBinaryEnd(void**) {}

void __cudaUnregisterFatBinary(void**) {
  // Process exit: the session's end frees everything on the server.
}

void __cudaRegisterFunction(void** handle, const char* host_fun, char*, const char* device_name, int, uint3*, uint3*,
                            dim3*, dim3*, int*) {
  auto* k = new KernelRec();
  k->fb = reinterpret_cast<Fatbin*>(handle);
  k->name = device_name ? device_name : "";
  std::lock_guard lk(rt().mu);
  rt().kernels[host_fun] = k;
}

void __cudaRegisterVar(void** handle, char* host_var, char*, const char* device_name, int, size_t size, int, int) {
  auto* v = new VarRec();
  v->fb = reinterpret_cast<Fatbin*>(handle);
  v->name = device_name ? device_name : "";
  v->size = size;
  std::lock_guard lk(rt().mu);
  rt().vars[host_var] = v;
}

unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t shared, struct CUstream_st* stream) {
  t_configs.push_back({grid, block, shared, stream});
  return 0;
}

cudaError_t __cudaPopCallConfiguration(dim3* grid, dim3* block, size_t* shared, void* stream) {
  if (t_configs.empty()) return cudaErrorMissingConfiguration;
  CallConfig c = t_configs.back();
  t_configs.pop_back();
  *grid = c.grid;
  *block = c.block;
  *shared = c.shared;
  *static_cast<cudaStream_t*>(stream) = c.stream;
  return cudaSuccess;
}

cudaError_t __cudaGetKernel(cudaKernel_t* out, const void* host_fun) {
  KernelRec* k = kernel_of(host_fun);
  if (!out || !k) return set_error(cudaErrorInvalidDeviceFunction);
  *out = reinterpret_cast<cudaKernel_t>(k);
  return cudaSuccess;
}

cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block, void** args, size_t shared,
                               cudaStream_t s) {
  return set_error(launch(reinterpret_cast<KernelRec*>(kernel), grid, block, args, shared, s));
}

cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 grid, dim3 block, void** args, size_t shared,
                                    cudaStream_t s) {
  return __cudaLaunchKernel(kernel, grid, block, args, shared, s);
}

cudaError_t cudaLaunchKernel(const void* func, dim3 grid, dim3 block, void** args, size_t shared, cudaStream_t s) {
  return set_error(launch(kernel_of(func), grid, block, args, shared, s));
}
cudaError_t cudaLaunchKernel_ptsz(const void* func, dim3 grid, dim3 block, void** args, size_t shared,
                                  cudaStream_t s) {
  return cudaLaunchKernel(func, grid, block, args, shared, s);
}

cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t* cfg, const void* func, void** args) {
  if (!cfg || (cfg->numAttrs && !cfg->attrs)) return set_error(cudaErrorInvalidValue);
  uint32_t flags = 0;
  // Events the launch records once its blocks have all started or triggered:
  // kernels of a stream run one after another here, so after the kernel.
  std::vector<std::pair<cudaEvent_t, unsigned>> events;
  for (unsigned i = 0; i < cfg->numAttrs; i++) {
    const cudaLaunchAttribute& a = cfg->attrs[i];
    switch (a.id) {
      case cudaLaunchAttributeIgnore: break;
      case cudaLaunchAttributeCooperative:
        if (a.val.cooperative) flags |= kLaunchCooperative;
        break;
      // Programmatic dependent launch: this kernel may start before the
      // previous one of its stream ends and wait for it in
      // griddepcontrol.wait. The device decides: the sim device runs them
      // in stream order (full serialization, an order the attribute
      // allows), a GPU behind the cuda backend may overlap them.
      case cudaLaunchAttributeProgrammaticStreamSerialization:
        if (a.val.programmaticStreamSerializationAllowed) flags |= kLaunchProgrammatic;
        break;
      case cudaLaunchAttributeProgrammaticEvent:
        if (!a.val.programmaticEvent.event || (a.val.programmaticEvent.flags & cudaEventRecordExternal))
          return set_error(cudaErrorInvalidValue);
        events.emplace_back(a.val.programmaticEvent.event, unsigned(a.val.programmaticEvent.flags));
        break;
      case cudaLaunchAttributeLaunchCompletionEvent:
        if (!a.val.launchCompletionEvent.event || (a.val.launchCompletionEvent.flags & cudaEventRecordExternal))
          return set_error(cudaErrorInvalidValue);
        events.emplace_back(a.val.launchCompletionEvent.event, unsigned(a.val.launchCompletionEvent.flags));
        break;
      case cudaLaunchAttributeClusterSchedulingPolicyPreference: break;  // a hint (the device has no clusters)
      // Scheduling and cache hints: a GPU may ignore them, and the result
      // does not depend on them.
      case cudaLaunchAttributeAccessPolicyWindow:
      case cudaLaunchAttributePriority:
      case cudaLaunchAttributeMemSyncDomainMap:
      case cudaLaunchAttributeMemSyncDomain:
      case cudaLaunchAttributePreferredSharedMemoryCarveout:
      case cudaLaunchAttributeNvlinkUtilCentricScheduling: break;
      case cudaLaunchAttributeClusterDimension:
        // The modeled device has no clusters (cudaDevAttrClusterLaunch = 0): only 1x1x1.
        if (a.val.clusterDim.x <= 1 && a.val.clusterDim.y <= 1 && a.val.clusterDim.z <= 1) break;
        [[fallthrough]];
      default:
        log_once("cudaLaunchKernelExC: launch attribute " + std::to_string(int(a.id)) + " is not supported");
        return set_error(cudaErrorNotSupported);
    }
  }
  cudaError_t e = launch(kernel_of(func), cfg->gridDim, cfg->blockDim, args, cfg->dynamicSmemBytes, cfg->stream, flags);
  for (auto& [ev, f] : events)
    if (e == cudaSuccess) e = cudaEventRecordWithFlags(ev, cfg->stream, f);
  return set_error(e);
}
cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t* cfg, const void* func, void** args) {
  return cudaLaunchKernelExC(cfg, func, args);
}

// All blocks co-resident, so grid-wide synchronisation (cooperative groups'
// grid.sync()) works; a grid larger than the device holds at once fails
// with cudaErrorCooperativeLaunchTooLarge.
cudaError_t cudaLaunchCooperativeKernel(const void* func, dim3 grid, dim3 block, void** args, size_t shared,
                                        cudaStream_t s) {
  return set_error(launch(kernel_of(func), grid, block, args, shared, s, kLaunchCooperative));
}
cudaError_t cudaLaunchCooperativeKernel_ptsz(const void* func, dim3 grid, dim3 block, void** args, size_t shared,
                                             cudaStream_t s) {
  return cudaLaunchCooperativeKernel(func, grid, block, args, shared, s);
}

cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attr, const void* func) {
  KernelRec* k = kernel_of(func);
  if (!attr || !k) return set_error(cudaErrorInvalidDeviceFunction);
  if (cudaError_t e = ensure_kernel(k); e != cudaSuccess) return set_error(e);
  WH_CONN(c);
  FuncGetAttributesResp rs{};
  if (cudaError_t e = c->call<Op::FuncGetAttributes>({k->handle}, &rs); e != cudaSuccess) return set_error(e);
  std::memset(attr, 0, sizeof *attr);
  attr->maxThreadsPerBlock = rs.max_threads;
  attr->numRegs = rs.num_regs;
  attr->sharedSizeBytes = rs.shared_bytes;
  attr->localSizeBytes = rs.local_bytes;
  attr->constSizeBytes = rs.const_bytes;
  attr->ptxVersion = rs.ptx_version;
  attr->binaryVersion = rs.binary_version;
  attr->maxDynamicSharedSizeBytes = k->max_dynamic_shared ? k->max_dynamic_shared : 48 << 10;
  return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value) {
  KernelRec* k = kernel_of(func);
  if (!k) return set_error(cudaErrorInvalidDeviceFunction);
  if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
    if (value < 0 || value > (99 << 10)) return set_error(cudaErrorInvalidValue);
    k->max_dynamic_shared = value;
  }
  return cudaSuccess;
}

cudaError_t cudaFuncSetCacheConfig(const void*, cudaFuncCache) { return cudaSuccess; }

cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int* blocks, const void* func, int block_size,
                                                                   size_t dyn_shared, unsigned int) {
  if (!blocks || block_size <= 0) return set_error(cudaErrorInvalidValue);
  cudaFuncAttributes fa;
  if (cudaError_t e = cudaFuncGetAttributes(&fa, func); e != cudaSuccess) return e;
  cudaDeviceProp p;
  if (cudaError_t e = cudaGetDeviceProperties(&p, 0); e != cudaSuccess) return e;
  *blocks = blocks_per_multiprocessor(p, fa.numRegs, fa.sharedSizeBytes + dyn_shared, block_size, fa.maxThreadsPerBlock);
  return cudaSuccess;
}

cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, const void* func, int block_size,
                                                          size_t dyn_shared) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(blocks, func, block_size, dyn_shared, 0);
}

// ---- symbols
static VarRec* var_of(const void* symbol) {
  std::lock_guard lk(rt().mu);
  auto it = rt().vars.find(symbol);
  return it == rt().vars.end() ? nullptr : it->second;
}

static cudaError_t symbol_range(const void* symbol, size_t count, size_t offset, uint8_t** dptr) {
  VarRec* v = var_of(symbol);
  if (!v) return cudaErrorInvalidSymbol;
  if (cudaError_t e = ensure_var(v); e != cudaSuccess) return e;
  if (offset > v->size || count > v->size - offset) return cudaErrorInvalidValue;
  *dptr = reinterpret_cast<uint8_t*>(uint64_t(v->dptr)) + offset;
  return cudaSuccess;
}

cudaError_t cudaMemcpyToSymbol(const void* symbol, const void* src, size_t count, size_t offset, cudaMemcpyKind kind) {
  uint8_t* d;
  if (cudaError_t e = symbol_range(symbol, count, offset, &d); e != cudaSuccess) return set_error(e);
  if (kind == cudaMemcpyDefault) kind = is_device_ptr(src) ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice;
  return set_error(do_memcpy(d, src, count, kind, nullptr, false));
}

cudaError_t cudaMemcpyFromSymbol(void* dst, const void* symbol, size_t count, size_t offset, cudaMemcpyKind kind) {
  uint8_t* s;
  if (cudaError_t e = symbol_range(symbol, count, offset, &s); e != cudaSuccess) return set_error(e);
  if (kind == cudaMemcpyDefault) kind = is_device_ptr(dst) ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost;
  return set_error(do_memcpy(dst, s, count, kind, nullptr, false));
}

cudaError_t cudaMemcpyToSymbolAsync(const void* symbol, const void* src, size_t count, size_t offset,
                                    cudaMemcpyKind kind, cudaStream_t st) {
  uint8_t* d;
  if (cudaError_t e = symbol_range(symbol, count, offset, &d); e != cudaSuccess) return set_error(e);
  if (kind == cudaMemcpyDefault) kind = is_device_ptr(src) ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice;
  return set_error(do_memcpy(d, src, count, kind, st, true));
}

cudaError_t cudaMemcpyFromSymbolAsync(void* dst, const void* symbol, size_t count, size_t offset,
                                      cudaMemcpyKind kind, cudaStream_t st) {
  uint8_t* s;
  if (cudaError_t e = symbol_range(symbol, count, offset, &s); e != cudaSuccess) return set_error(e);
  if (kind == cudaMemcpyDefault) kind = is_device_ptr(dst) ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost;
  return set_error(do_memcpy(dst, s, count, kind, st, true));
}

cudaError_t cudaGetSymbolAddress(void** dptr, const void* symbol) {
  if (!dptr) return set_error(cudaErrorInvalidValue);
  uint8_t* d;
  if (cudaError_t e = symbol_range(symbol, 0, 0, &d); e != cudaSuccess) return set_error(e);
  *dptr = d;
  return cudaSuccess;
}

cudaError_t cudaGetSymbolSize(size_t* size, const void* symbol) {
  VarRec* v = var_of(symbol);
  if (!size || !v) return set_error(cudaErrorInvalidSymbol);
  if (cudaError_t e = ensure_var(v); e != cudaSuccess) return set_error(e);
  *size = v->size;
  return cudaSuccess;
}

cudaError_t cudaMemcpyToSymbol_ptds(const void* sym, const void* src, size_t n, size_t off, cudaMemcpyKind k) {
  return cudaMemcpyToSymbol(sym, src, n, off, k);
}
cudaError_t cudaMemcpyFromSymbol_ptds(void* dst, const void* sym, size_t n, size_t off, cudaMemcpyKind k) {
  return cudaMemcpyFromSymbol(dst, sym, n, off, k);
}

}  // extern "C"
