// C entry points libcudart.so.13 offers to Wormhole's other guest libraries
// (libcublas.so.13): they must share this process's single connection and
// server session, since device pointers from cudaMalloc are valid only in
// that session. Exported as wh_guest_* (libcudart.map); everything else in
// this library stays local.
#include <algorithm>
#include <cstring>
#include <unordered_set>

#include "connection.hpp"
#include "state.hpp"
#include "wormhole/guest_abi.h"
#include "wormhole/proto/graph_wire.hpp"
#include "wormhole/common/fatbin.hpp"

using namespace wh::guest;
using namespace wh::proto;

namespace wh::guest {
extern std::mutex g_load_mu;  // launch.cpp: serialises module shipping and lookups
}

namespace {

// The function records of loaded driver modules: what a CUfunction may be
// (checked on every launch, so a set, not a scan). Guarded by rt().mu.
std::unordered_set<const void*> g_driver_functions;

}  // namespace

bool wh::guest::is_driver_function(const void* fn) { return g_driver_functions.count(fn) != 0; }

namespace {

// The size of a module image given only its address (cuModuleLoadData takes
// no size): a fatbin (or the registration wrapper around one) from its
// header, an ELF cubin from its section and program header tables, PTX text
// up to its NUL. 0 when it is none of these.
size_t image_size(const void* image, const void** start) {
  *start = image;
  uint32_t magic;
  std::memcpy(&magic, image, sizeof magic);
  if (magic == wh::fatbin::kWrapperMagic) {
    struct Wrapper {
      int magic, version;
      const void* data;
      void* filename;
    };
    *start = static_cast<const Wrapper*>(image)->data;
    return *start ? wh::fatbin::fatbin_size(*start) : 0;
  }
  if (magic == wh::fatbin::kFatbinMagic) return wh::fatbin::fatbin_size(image);
  const auto* b = static_cast<const uint8_t*>(image);
  if (b[0] == 0x7f && b[1] == 'E' && b[2] == 'L' && b[3] == 'F') {
    if (b[4] != 2) return 0;  // ELFCLASS64 only
    uint64_t phoff, shoff;
    uint16_t phentsize, phnum, shentsize, shnum;
    std::memcpy(&phoff, b + 32, 8);
    std::memcpy(&shoff, b + 40, 8);
    std::memcpy(&phentsize, b + 54, 2);
    std::memcpy(&phnum, b + 56, 2);
    std::memcpy(&shentsize, b + 58, 2);
    std::memcpy(&shnum, b + 60, 2);
    size_t end = std::max<uint64_t>(64, std::max(phoff + uint64_t(phentsize) * phnum, shoff + uint64_t(shentsize) * shnum));
    // Sections may lie after the section header table.
    for (uint16_t i = 0; i < shnum && shentsize >= 64; i++) {
      const uint8_t* sh = b + shoff + uint64_t(i) * shentsize;
      uint32_t type;
      uint64_t off, size;
      std::memcpy(&type, sh + 4, 4);
      std::memcpy(&off, sh + 24, 8);
      std::memcpy(&size, sh + 32, 8);
      if (type != 8 /* SHT_NOBITS */) end = std::max<uint64_t>(end, off + size);
    }
    return end;
  }
  return std::strlen(static_cast<const char*>(image)) + 1;  // PTX text, with its NUL
}

}  // namespace

extern "C" {

// The process's wh::guest::Connection*, connecting on first use; nullptr
// when no server can be reached.
__attribute__((visibility("default"))) void* wh_guest_connection(void) { return Connection::get(); }

// One request of the API table by opcode, for a library that cannot call the
// typed templates across the shared-object boundary (they need this
// library's hidden symbols). The request's fixed part must be exactly the
// opcode's struct; the response's fixed part is copied to `rs` (rs_len
// bytes at most). posted != 0 posts it (no response). Returns a cudaError_t.
__attribute__((visibility("default"))) int wh_guest_call(uint16_t op, const void* rq, size_t rq_len,
                                                         const void* tail, size_t tail_len, void* rs, size_t rs_len,
                                                         int posted) {
  Connection* c = Connection::get();
  if (!c) return cudaErrorDevicesUnavailable;
  // Library work on a capturing stream: posted requests a graph may replay
  // become call nodes of the capture's graph (the server replays them when
  // the graph runs); anything else, which would have to run now or answer
  // now, is refused and invalidates the capture.
  if (const int at = library_stream_offset(op); capture_any() && at >= 0 && rq_len >= size_t(at) + 8) {
    uint64_t stream;
    std::memcpy(&stream, static_cast<const uint8_t*>(rq) + at, sizeof stream);
    if (stream_capturing(reinterpret_cast<cudaStream_t>(stream))) {
      if (posted && graph_call_allowed(op))
        return capture_call(reinterpret_cast<cudaStream_t>(stream), op, rq, rq_len, tail, tail_len);
      return capture_check_unsafe(reinterpret_cast<cudaStream_t>(stream));
    }
  }
  std::span<const uint8_t> t(static_cast<const uint8_t*>(tail), tail_len);
  switch (Op(op)) {
#define WH_X_RAW(Name, K, RQ, RS)                                                   \
  case Op::Name: {                                                                  \
    Name##Req r{};                                                                  \
    if (rq_len != wire_size<Name##Req>) return cudaErrorInvalidValue;              \
    if (rq_len) std::memcpy(&r, rq, rq_len);                                        \
    if (posted) return c->post<Op::Name>(r, t);                                     \
    Name##Resp s{};                                                                 \
    cudaError_t e = c->call<Op::Name>(r, &s, t, nullptr);                           \
    if (rs && rs_len) std::memcpy(rs, &s, std::min(rs_len, wire_size<Name##Resp>)); \
    return e;                                                                       \
  }
    WH_ALL_OPS(WH_X_RAW)
#undef WH_X_RAW
    default:
      return cudaErrorInvalidValue;
  }
}

// ---- the driver API (Wormhole's libcuda.so.1) on this runtime's session.
// Modules are Fatbin records (as nvcc's registered fatbins), functions are
// KernelRec records: the same launch path, parameter packing, stream capture
// and graph recording serve both APIs. Each returns a cudaError_t.

// Loads a module image: a fatbin (or its registration wrapper), an ELF cubin
// or PTX text (NUL-terminated; several NUL-separated units are linked, as
// cuLinkComplete produces them). `size` 0: taken from the image itself.
static int module_load(const void* image, size_t size, void** module, bool library) {
  if (!image || !module) return cudaErrorInvalidValue;
  const void* start = image;
  if (!size) size = image_size(image, &start);
  if (size < 16) return cudaErrorInvalidKernelImage;
  auto* fb = new Fatbin();
  fb->driver = true;
  // A version-2 wrapper (-rdc=true, as a static runtime passes it to
  // cuLibraryLoadData): the linked image and the units' fatbins with their PTX.
  if (append_rdc_units(image, &fb->rdc_image)) start = fb->rdc_image.data(), size = fb->rdc_image.size();
  else fb->rdc_image.assign(static_cast<const uint8_t*>(start), static_cast<const uint8_t*>(start) + size);
  fb->image = fb->rdc_image.data();
  fb->size = size;
  uint32_t magic;
  std::memcpy(&magic, fb->image, sizeof magic);
  if (magic == wh::fatbin::kFatbinMagic)
    fb->wrapper = fb->image;  // parse_params reads the layouts from a fatbin directly
  else
    fb->params_parsed = true;  // PTX or cubin: the server's layouts are used
  fb->library = library;
  if (!library)
    if (cudaError_t e = ensure_fatbin_module(*fb); e != cudaSuccess) {
      delete fb;
      return e;
    }
  std::lock_guard lk(rt().mu);
  rt().fatbins.push_back(fb);
  *module = fb;
  return cudaSuccess;
}

__attribute__((visibility("default"))) int wh_guest_module_load(const void* image, size_t size, void** module) {
  return module_load(image, size, module, false);
}

// cuLibraryLoadData / cuLibraryLoadFromFile: the image is kept here and goes
// to the server when the library is first used (a kernel launched or
// queried, a variable looked up), as CUDA's lazy loading does. A static
// runtime loads every fatbin of its library when it starts (cuSPARSE has
// SASS-only ones): only the kernels of an image the device cannot run fail,
// when they are used, naming themselves.
__attribute__((visibility("default"))) int wh_guest_library_load(const void* image, size_t size, void** lib) {
  return module_load(image, size, lib, true);
}

// `load`: a library not loaded yet (or since a context reset) is loaded now,
// its handle unchanged; *err says why not (an image the device refused:
// the same error each time), else why the handle is not a module.
static Fatbin* driver_module(void* m, bool load = true, cudaError_t* err = nullptr) {
  Fatbin* found = nullptr;
  {
    std::lock_guard lk(rt().mu);
    for (Fatbin* fb : rt().fatbins)
      if (fb == m && fb->driver && (fb->module || fb->library)) found = fb;
  }
  cudaError_t e = found ? cudaSuccess : cudaErrorInvalidResourceHandle;
  if (load && found && !found->module) e = ensure_fatbin_module(*found);
  if (err) *err = e;
  return e == cudaSuccess ? found : nullptr;
}

// cuLibraryGetModule: a library not loaded yet is loaded now, as CUDA loads
// a lazily loaded library's module in the current context; an image the
// device cannot run is refused here rather than at its first launch.
__attribute__((visibility("default"))) int wh_guest_library_module(void* lib) {
  Fatbin* fb = driver_module(lib, false);
  if (!fb) return cudaErrorInvalidResourceHandle;
  return fb->module ? cudaSuccess : ensure_fatbin_module(*fb);
}

// The names of a driver module's kernels, from its image (a cubin's
// .nv.info, else the PTX .entry lists), found once, sorted. Under g_load_mu.
static const std::vector<std::string>& kernel_names_locked(Fatbin* fb) {
  if (fb->names_known) return fb->kernel_names;
  fb->names_known = true;
  std::map<std::string, std::vector<wh::fatbin::ParamInfo>> found;
  std::string err;
  uint32_t magic;
  std::memcpy(&magic, fb->image, sizeof magic);
  const auto* b = fb->image;
  if (magic == wh::fatbin::kFatbinMagic) {
    std::vector<wh::fatbin::Entry> entries;
    if (wh::fatbin::parse(fb->image, fb->size, entries, &err)) {
      for (auto& e : entries)
        if (e.kind == wh::fatbin::Entry::ELF && wh::fatbin::cubin_kernel_params(e.bytes, found, &err)) break;
      if (found.empty())
        for (auto& e : entries)
          if (e.kind == wh::fatbin::Entry::PTX &&
              wh::fatbin::ptx_kernel_params(
                  std::string_view(reinterpret_cast<const char*>(e.bytes.data()), e.bytes.size()), found, &err))
            break;
    }
  } else if (b[0] == 0x7f && b[1] == 'E' && b[2] == 'L' && b[3] == 'F') {
    wh::fatbin::cubin_kernel_params(fb->rdc_image, found, &err);
  } else {
    const char* p = reinterpret_cast<const char*>(fb->image);
    for (size_t i = 0; i < fb->size;) {
      size_t n = strnlen(p + i, fb->size - i);
      if (n) wh::fatbin::ptx_kernel_params(std::string_view(p + i, n), found, &err);
      i += n + 1;
    }
  }
  for (auto& [name, ps] : found) fb->kernel_names.push_back(name);  // sorted: from a std::map
  return fb->kernel_names;
}

// cuLibraryGetManaged: a __managed__ variable of a driver module, placed in
// managed memory (host and device see it at one address) and bound to the
// module's global, once per variable; a reload after a context reset binds
// it again (bind_managed_vars).
__attribute__((visibility("default"))) int wh_guest_module_managed(void* module, const char* name, void** ptr,
                                                                   size_t* bytes) {
  if (!name) return cudaErrorInvalidValue;
  cudaError_t why;
  Fatbin* fb = driver_module(module, true, &why);
  if (!fb) return why;
  {
    std::lock_guard lk(rt().mu);
    if (auto it = fb->managed_vars.find(name); it != fb->managed_vars.end()) {
      if (ptr) *ptr = it->second.first;
      if (bytes) *bytes = it->second.second;
      return cudaSuccess;
    }
  }
  uint64_t dptr = 0;
  size_t size = 0;
  if (int e = wh_guest_module_global(module, name, &dptr, &size); e != cudaSuccess) return e;
  Connection* c = Connection::get();
  if (!c) return cudaErrorDevicesUnavailable;
  void* p = nullptr;
  if (cudaError_t e = managed_alloc(size, &p); e != cudaSuccess) return e;
  ModuleBindManagedResp rs{};
  if (cudaError_t e = c->call<Op::ModuleBindManaged>({fb->module, reinterpret_cast<uint64_t>(p)}, &rs,
                                                     {reinterpret_cast<const uint8_t*>(name), std::strlen(name)});
      e != cudaSuccess)
    return e;
  std::lock_guard lk(rt().mu);
  auto& slot = fb->managed_vars[name];
  slot = {p, size};
  fb->managed.push_back({&slot.first, name, size});
  if (ptr) *ptr = p;
  if (bytes) *bytes = size;
  return cudaSuccess;
}

__attribute__((visibility("default"))) int wh_guest_module_unload(void* module) {
  Fatbin* fb = driver_module(module, false);  // a library never used was never loaded
  if (!fb) return cudaErrorInvalidResourceHandle;
  Connection* c = Connection::get();
  if (!c) return cudaErrorDevicesUnavailable;
  cudaError_t e = fb->module ? c->call<Op::ModuleUnload>({fb->module}) : cudaSuccess;
  // Its function records stay allocated but are no longer valid handles: a
  // stale CUfunction is refused, never followed.
  std::lock_guard ll(g_load_mu);
  std::lock_guard lk(rt().mu);
  std::erase(rt().fatbins, fb);
  for (auto& [n, k] : fb->functions) g_driver_functions.erase(k);
  fb->module = 0;
  return e;
}

// The module's function `name` (one record per name); *fn is the handle the
// driver API calls a CUfunction (and CUkernel).
__attribute__((visibility("default"))) int wh_guest_module_function(void* module, const char* name, void** fn) {
  if (!name || !fn) return cudaErrorInvalidValue;
  Fatbin* fb = driver_module(module, false);
  if (!fb) return cudaErrorInvalidResourceHandle;
  KernelRec* k;
  bool deferred;  // a library not loaded yet: the kernel is found by name in its image, loaded on use
  {
    std::lock_guard lk(g_load_mu);
    auto it = fb->functions.find(name);
    if (it != fb->functions.end()) {
      *fn = it->second;
      return cudaSuccess;
    }
    deferred = fb->library && !fb->module;
    if (deferred) {
      const auto& names = kernel_names_locked(fb);
      if (!std::binary_search(names.begin(), names.end(), std::string(name))) return cudaErrorSymbolNotFound;
    }
    k = new KernelRec();
    k->fb = fb;
    k->name = name;
  }
  if (!deferred) {
    if (cudaError_t e = ensure_kernel(k); e != cudaSuccess) {
      delete k;
      return e == cudaErrorInvalidDeviceFunction ? cudaErrorSymbolNotFound : e;
    }
  }
  std::lock_guard lk(g_load_mu);
  if (!fb->module && !fb->library) {  // unloaded meanwhile
    delete k;
    return cudaErrorInvalidResourceHandle;
  }
  auto [it, fresh] = fb->functions.emplace(name, k);
  if (!fresh) delete k;
  *fn = it->second;
  std::lock_guard lr(rt().mu);
  g_driver_functions.insert(it->second);
  return cudaSuccess;
}

// The names of a driver module's kernels, from its image (the cubin's
// .nv.info, else the PTX .entry lists), found once. *count gets their
// number; the first `cap` go to `names` (valid while the module is).
__attribute__((visibility("default"))) int wh_guest_module_function_names(void* module, const char** names,
                                                                          size_t cap, size_t* count) {
  if (!count || (cap && !names)) return cudaErrorInvalidValue;
  Fatbin* fb = driver_module(module, false);
  if (!fb) return cudaErrorInvalidResourceHandle;
  std::lock_guard lk(g_load_mu);
  kernel_names_locked(fb);
  *count = fb->kernel_names.size();
  for (size_t i = 0; i < cap && i < fb->kernel_names.size(); i++) names[i] = fb->kernel_names[i].c_str();
  return cudaSuccess;
}

// A module variable: its device address and size (cuModuleGetGlobal).
__attribute__((visibility("default"))) int wh_guest_module_global(void* module, const char* name, uint64_t* dptr,
                                                                  size_t* bytes) {
  if (!name) return cudaErrorInvalidValue;
  cudaError_t why;
  Fatbin* fb = driver_module(module, true, &why);
  if (!fb) return why;
  Connection* c = Connection::get();
  if (!c) return cudaErrorDevicesUnavailable;
  ModuleGetGlobalResp rs{};
  cudaError_t e = c->call<Op::ModuleGetGlobal>({fb->module}, &rs,
                                               {reinterpret_cast<const uint8_t*>(name), std::strlen(name)});
  if (e != cudaSuccess) return e;
  if (dptr) *dptr = rs.dptr;
  if (bytes) *bytes = rs.size;
  return cudaSuccess;
}

// A function handle of the driver API or a runtime kernel (cudaKernel_t),
// checked against the records this library made.
static KernelRec* kernel_record(void* fn) {
  std::lock_guard lk(rt().mu);
  if (g_driver_functions.count(fn)) {
    // Its module is gone after cudaDeviceReset / cuDevicePrimaryCtxReset.
    auto* k = static_cast<KernelRec*>(fn);
    return k->fb->module || k->fb->library ? k : nullptr;  // a library's kernel is loaded again on use
  }
  // A runtime kernel (cudaGetKernel's cudaKernel_t passed as a CUkernel).
  for (auto& [host, k] : rt().kernels)
    if (k == fn) return k;
  return nullptr;
}

__attribute__((visibility("default"))) void* wh_guest_module_of(void* fn) {
  KernelRec* k = kernel_record(fn);
  return k && k->fb && k->fb->driver ? k->fb : nullptr;
}

__attribute__((visibility("default"))) const char* wh_guest_function_name(void* fn) {
  KernelRec* k = kernel_record(fn);
  return k ? k->name.c_str() : nullptr;
}

// Launches with kernelParams (args) or with a packed buffer (cuLaunchKernel's
// `extra`: params/bytes). flags: kLaunchCooperative, kLaunchProgrammatic.
__attribute__((visibility("default"))) int wh_guest_launch(void* fn, const unsigned grid[3], const unsigned block[3],
                                                           unsigned shared, void* stream, void** args,
                                                           const void* params, size_t bytes, int packed,
                                                           unsigned flags) {
  KernelRec* k = kernel_record(fn);
  if (!k) return cudaErrorInvalidResourceHandle;
  dim3 g(grid[0], grid[1], grid[2]), b(block[0], block[1], block[2]);
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  cudaError_t e = packed ? launch_kernel_packed(k, g, b, params, bytes, shared, s, flags)
                         : launch_kernel(k, g, b, args, shared, s, flags);
  return e;
}

// Attributes of a function: cudaFuncAttributes as the server reports them.
__attribute__((visibility("default"))) int wh_guest_function_attributes(void* fn, cudaFuncAttributes* attr) {
  KernelRec* k = kernel_record(fn);
  if (!k || !attr) return cudaErrorInvalidResourceHandle;
  if (cudaError_t e = ensure_kernel(k); e != cudaSuccess) return e;
  Connection* c = Connection::get();
  if (!c) return cudaErrorDevicesUnavailable;
  FuncGetAttributesResp rs{};
  if (cudaError_t e = c->call<Op::FuncGetAttributes>({k->handle}, &rs); e != cudaSuccess) return e;
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

__attribute__((visibility("default"))) int wh_guest_function_set_max_dynamic_shared(void* fn, int bytes) {
  KernelRec* k = kernel_record(fn);
  if (!k) return cudaErrorInvalidResourceHandle;
  if (bytes < 0 || bytes > (99 << 10)) return cudaErrorInvalidValue;
  k->max_dynamic_shared = bytes;
  return cudaSuccess;
}

// Parameter `index` of a function: offset and size (cuFuncGetParamInfo).
__attribute__((visibility("default"))) int wh_guest_function_param(void* fn, size_t index, size_t* offset,
                                                                   size_t* size) {
  KernelRec* k = kernel_record(fn);
  if (!k) return cudaErrorInvalidResourceHandle;
  if (cudaError_t e = ensure_kernel(k); e != cudaSuccess) return e;
  if (index >= k->params.size()) return cudaErrorInvalidValue;
  if (offset) *offset = k->params[index].offset;
  if (size) *size = k->params[index].size;
  return cudaSuccess;
}

// Does `p` lie in a device allocation of this session? Its base and size.
__attribute__((visibility("default"))) int wh_guest_allocation_of(uint64_t p, uint64_t* base, uint64_t* bytes) {
  std::lock_guard lk(rt().mu);
  auto it = alloc_at_locked(p);
  if (it == rt().allocs.end()) {
    // Pinned memory at its device address (the mapped data area): its heap block.
    Runtime& r = rt();
    if (grown_block_locked(p, base, bytes)) return cudaSuccess;  // in a grown segment
    if (!r.mapped_dptr || p < r.mapped_dptr || p - r.mapped_dptr >= (uint64_t(1) << kPinnedSegmentShift))
      return cudaErrorInvalidValue;
    auto b = r.heap_used.upper_bound(p - r.mapped_dptr);
    if (b == r.heap_used.begin() || p - r.mapped_dptr - (--b)->first >= b->second) return cudaErrorInvalidValue;
    if (base) *base = r.mapped_dptr + b->first;
    if (bytes) *bytes = b->second;
    return cudaSuccess;
  }
  if (base) *base = it->first;
  if (bytes) *bytes = it->second.bytes;
  return cudaSuccess;
}

}  // extern "C"
