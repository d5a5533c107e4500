// The GPU backend: the CUDA Driver API from libcuda.so.1, loaded with dlopen
// so the server builds and runs (with the sim backend) where no driver
// exists. One CUDA context per session: separate GPU address spaces.
//
// NOTE: no GPU was available where this was written; see docs/hardware.md
// for what has and has not run on real hardware.
#include <cuda.h>
#include <dlfcn.h>
#include <elf.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "wormhole/server/backend.hpp"
#include "wormhole/server/blas.hpp"
#include "wormhole/server/blaslt.hpp"
#include "wormhole/server/fft.hpp"
#include "wormhole/server/dnn.hpp"
#include "wormhole/server/vendor_lib.hpp"
#include "wormhole/common/fatbin.hpp"  // magic numbers
#include "wormhole/server/rand.hpp"

namespace wh::server {

namespace {

// Driver entry points, resolved by their versioned symbol names.
#define WH_CU_FUNCS(X)                                   \
  X(cuInit, "cuInit")                                    \
  X(cuDriverGetVersion, "cuDriverGetVersion")            \
  X(cuDeviceGetCount, "cuDeviceGetCount")                \
  X(cuDeviceGet, "cuDeviceGet")                          \
  X(cuDeviceGetName, "cuDeviceGetName")                  \
  X(cuDeviceGetAttribute, "cuDeviceGetAttribute")        \
  X(cuDeviceTotalMem, "cuDeviceTotalMem_v2")             \
  X(cuDeviceGetUuid, "cuDeviceGetUuid_v2")               \
  X(cuCtxSetLimit, "cuCtxSetLimit")                      \
  X(cuCtxGetLimit, "cuCtxGetLimit")                      \
  X(cuCtxCreate, "cuCtxCreate_v4")                       \
  X(cuCtxDestroy, "cuCtxDestroy_v2")                     \
  X(cuCtxSetCurrent, "cuCtxSetCurrent")                  \
  X(cuCtxSynchronize, "cuCtxSynchronize")                \
  X(cuMemAlloc, "cuMemAlloc_v2")                         \
  X(cuMemFree, "cuMemFree_v2")                           \
  X(cuMemGetInfo, "cuMemGetInfo_v2")                     \
  X(cuMemHostRegister, "cuMemHostRegister_v2")           \
  X(cuMemHostUnregister, "cuMemHostUnregister")          \
  X(cuMemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2") \
  X(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2")           \
  X(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2")           \
  X(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2")           \
  X(cuMemsetD8Async, "cuMemsetD8Async")                  \
  X(cuLibraryLoadData, "cuLibraryLoadData")              \
  X(cuLibraryUnload, "cuLibraryUnload")                  \
  X(cuLibraryGetModule, "cuLibraryGetModule")            \
  X(cuLibraryGetKernel, "cuLibraryGetKernel")            \
  X(cuLibraryGetGlobal, "cuLibraryGetGlobal")            \
  X(cuKernelGetFunction, "cuKernelGetFunction")          \
  X(cuFuncGetAttribute, "cuFuncGetAttribute")            \
  X(cuFuncGetParamInfo, "cuFuncGetParamInfo")            \
  X(cuLaunchKernel, "cuLaunchKernel")                    \
  X(cuLaunchKernelEx, "cuLaunchKernelEx")                \
  X(cuStreamCreateWithPriority, "cuStreamCreateWithPriority") \
  X(cuStreamDestroy, "cuStreamDestroy_v2")               \
  X(cuStreamSynchronize, "cuStreamSynchronize")          \
  X(cuStreamQuery, "cuStreamQuery")                      \
  X(cuStreamWaitEvent, "cuStreamWaitEvent")              \
  X(cuEventCreate, "cuEventCreate")                      \
  X(cuEventDestroy, "cuEventDestroy_v2")                 \
  X(cuEventRecord, "cuEventRecord")                      \
  X(cuEventSynchronize, "cuEventSynchronize")            \
  X(cuEventQuery, "cuEventQuery")                        \
  X(cuEventElapsedTime, "cuEventElapsedTime_v2")          \
  X(cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync")  \
  X(cuMemFreeAsync, "cuMemFreeAsync")                    \
  X(cuMemPoolCreate, "cuMemPoolCreate")                  \
  X(cuMemPoolDestroy, "cuMemPoolDestroy")                \
  X(cuMemPoolTrimTo, "cuMemPoolTrimTo")                  \
  X(cuMemPoolSetAttribute, "cuMemPoolSetAttribute")      \
  X(cuMemPoolGetAttribute, "cuMemPoolGetAttribute") \
  X(cuTexObjectCreate, "cuTexObjectCreate")              \
  X(cuTexObjectDestroy, "cuTexObjectDestroy")          \
  X(cuSurfObjectCreate, "cuSurfObjectCreate")            \
  X(cuSurfObjectDestroy, "cuSurfObjectDestroy")          \
  X(cuArray3DCreate, "cuArray3DCreate_v2")               \
  X(cuArrayDestroy, "cuArrayDestroy")                    \
  X(cuMemcpy3DAsync, "cuMemcpy3DAsync_v2")               \
  X(cuLinkCreate, "cuLinkCreate_v2")                     \
  X(cuLinkAddData, "cuLinkAddData_v2")                   \
  X(cuLinkComplete, "cuLinkComplete")                    \
  X(cuLinkDestroy, "cuLinkDestroy")

struct Driver {
#define WH_CU_PTR(fn, sym) decltype(&::fn) fn = nullptr;
  WH_CU_FUNCS(WH_CU_PTR)
#undef WH_CU_PTR
  void* lib = nullptr;
  std::string path;     // the file the driver came from
  bool dropin = false;  // Wormhole's own libcuda.so.1 (--allow-dropin-driver)
  bool load(std::string* err) {
    // Never Wormhole's own guest libcuda.so.1 (on the server's library
    // path it would forward the server's calls back to a server).
    std::string why;
    lib = open_vendor_library("libcuda.so.1", &why);
    if (!lib) {
      if (err) *err = "no CUDA driver: " + why;
      return false;
    }
#define WH_CU_LOAD(fn, sym)                                            \
  fn = reinterpret_cast<decltype(fn)>(dlsym(lib, sym));                \
  if (!fn) {                                                           \
    if (err) *err = std::string("libcuda.so.1 lacks ") + sym;          \
    return false;                                                      \
  }
    WH_CU_FUNCS(WH_CU_LOAD)
#undef WH_CU_LOAD
    path = library_path_of(reinterpret_cast<void*>(cuInit));
    dropin = dlsym(lib, "wh_guest_connection") != nullptr;
    return true;
  }
};

// Driver and runtime error codes share values for everything we return.
Err map(CUresult r) { return Err(r); }

// The driver takes an image by pointer alone and trusts the sizes its
// headers declare: a guest's image must hold all it declares before the
// driver reads it. Fatbins (several in a row: -rdc=true's) are parsed
// whole; a cubin's headers, sections and segments must lie inside it.
bool image_in_bounds(std::span<const uint8_t> img, std::string* why) {
  uint32_t magic = 0;
  if (img.size() >= 4) std::memcpy(&magic, img.data(), 4);
  auto rd = [&](size_t off, auto v) {
    std::memcpy(&v, img.data() + off, sizeof v);
    return v;
  };
  if (magic == fatbin::kFatbinMagic) {  // headers only: the payloads are the driver's (any compression)
    for (size_t off = 0; off < img.size();) {
      const size_t left = img.size() - off;
      if (left < 16 || rd(off, uint32_t()) != fatbin::kFatbinMagic) {
        *why = "bytes after a fatbin that are not a fatbin";
        return false;
      }
      const uint64_t hsize = rd(off + 6, uint16_t()), psize = rd(off + 8, uint64_t());
      if (hsize < 16 || psize > left || hsize > left - psize) {
        *why = "a fatbin larger than the image";
        return false;
      }
      for (uint64_t e = off + hsize, end = off + hsize + psize; e < end;) {
        const uint64_t ehs = end - e >= 16 ? rd(e + 4, uint32_t()) : 0, esize = end - e >= 16 ? rd(e + 8, uint64_t()) : 0;
        if (end - e < 64 || ehs < 64 || ehs > end - e || esize > end - e - ehs) {
          *why = "a fatbin entry outside its fatbin";
          return false;
        }
        e += ehs + esize;
      }
      off += hsize + psize;
    }
    return true;
  }
  if (img.size() < 4 || std::memcmp(img.data(), ELFMAG, SELFMAG) != 0) return true;  // PTX text: checked as text
  auto within = [&](uint64_t off, uint64_t n) { return off <= img.size() && n <= img.size() - off; };
  Elf64_Ehdr eh;
  if (img.size() < sizeof eh || img[EI_CLASS] != ELFCLASS64) {
    *why = "a truncated or 32-bit ELF image";
    return false;
  }
  std::memcpy(&eh, img.data(), sizeof eh);
  if ((eh.e_shnum && (eh.e_shentsize != sizeof(Elf64_Shdr) ||
                      !within(eh.e_shoff, uint64_t(eh.e_shnum) * sizeof(Elf64_Shdr)))) ||
      (eh.e_phnum && (eh.e_phentsize != sizeof(Elf64_Phdr) ||
                      !within(eh.e_phoff, uint64_t(eh.e_phnum) * sizeof(Elf64_Phdr))))) {
    *why = "ELF header tables outside the image";
    return false;
  }
  for (unsigned i = 0; i < eh.e_shnum; i++) {
    Elf64_Shdr sh;
    std::memcpy(&sh, img.data() + eh.e_shoff + i * sizeof sh, sizeof sh);
    if (sh.sh_type != SHT_NOBITS && !within(sh.sh_offset, sh.sh_size)) {
      *why = "an ELF section outside the image";
      return false;
    }
  }
  for (unsigned i = 0; i < eh.e_phnum; i++) {
    Elf64_Phdr ph;
    std::memcpy(&ph, img.data() + eh.e_phoff + i * sizeof ph, sizeof ph);
    if (!within(ph.p_offset, ph.p_filesz)) {
      *why = "an ELF segment outside the image";
      return false;
    }
  }
  return true;
}

struct CuStream : Stream {
  CUstream s = nullptr;
  void* native() override { return s; }
};
struct CuEvent : Event {
  CUevent e = nullptr;
};
struct CuModule : Module {
  CUlibrary lib = nullptr;
};
struct CuKernel : Kernel {
  CUfunction fn = nullptr;
};
struct CuPool : MemPool {
  CUmemoryPool p = nullptr;
};

class CudaContext final : public Context {
 public:
  CudaContext(Driver& d, CUcontext ctx, CUdevice dev, uint64_t quota, std::shared_ptr<SharedQuota> shared)
      : d_(d), ctx_(ctx), dev_(dev), quota_(quota), shared_(std::move(shared)) {}
  ~CudaContext() override {
    if (shared_) shared_->give(used_);  // the context's memory goes with it
    blas_.reset();  // cuBLAS(Lt) handles and cuFFT plans before the context they live in
    fft_.reset();
    dnn_.reset();
    blaslt_.reset();
    rand_.reset();
    d_.cuCtxSetCurrent(ctx_);
    for (auto& [dptr, host] : mapped_) d_.cuMemHostUnregister(host);
    // Pools belong to the device, not to the context: give back what ours
    // hold before the context goes.
    for (uint64_t p : pooled_) d_.cuMemFreeAsync(p, nullptr);
    d_.cuCtxSynchronize();
    for (auto& p : pools_) d_.cuMemPoolDestroy(p->p);
    // The context's end frees the rest on a GPU; freed here by name too, so
    // that a driver whose contexts share one address space (Wormhole's own,
    // in the stacked tests) gets every byte back as well.
    for (auto& [obj, dptr] : mirror_obj_)
      obj.second ? d_.cuSurfObjectDestroy(obj.first) : d_.cuTexObjectDestroy(obj.first);
    for (auto& [p, m] : mirrors_) d_.cuArrayDestroy(m.arr);
    for (auto& [p, n] : sizes_)
      if (!pooled_.count(p)) d_.cuMemFree(p);
    d_.cuCtxDestroy(ctx_);  // frees every allocation, module, stream, event
  }
  void cur() { d_.cuCtxSetCurrent(ctx_); }
  static CUstream st(Stream* s) { return s ? static_cast<CuStream*>(s)->s : nullptr; }

  Err mem_alloc(uint64_t bytes, uint64_t* dptr) override {
    cur();
    if (quota_ && (bytes > quota_ || used_ > quota_ - bytes)) return cudaErrorMemoryAllocation;
    if (shared_ && !shared_->take(bytes)) return cudaErrorMemoryAllocation;
    CUdeviceptr p = 0;
    if (CUresult r = d_.cuMemAlloc(&p, bytes); r != CUDA_SUCCESS) {
      if (shared_) shared_->give(bytes);
      return map(r);
    }
    *dptr = p;
    sizes_[p] = bytes;
    used_ += bytes;
    return cudaSuccess;
  }
  Err mem_free(uint64_t dptr) override {
    cur();
    auto it = sizes_.find(dptr);
    if (it == sizes_.end()) return cudaErrorInvalidValue;
    if (auto m = mirrors_.find(dptr); m != mirrors_.end()) m->second.live = false;
    used_ -= it->second;
    if (shared_) shared_->give(it->second);
    sizes_.erase(it);
    if (pooled_.erase(dptr)) {  // the session synchronised first, as cudaFree does
      if (CUresult r = d_.cuMemFreeAsync(dptr, nullptr); r != CUDA_SUCCESS) return map(r);
      return map(d_.cuStreamSynchronize(nullptr));
    }
    return map(d_.cuMemFree(dptr));
  }
  // Textures over the session's linear memory (CUDA arrays are row-major
  // device memory on every backend, see session_texture.cpp): 1D as linear,
  // 2D as pitch2D resources. Surfaces and layered or 3D textures need a
  // CUarray: the array's linear memory gets one as its mirror, filled from
  // it before each launch and, for surfaces, copied back after it, in the
  // launch's stream (device-to-device copies: the simple mechanism that
  // keeps one copy of the truth, the linear memory, for every other call).
  // A mipmapped array's texture samples level 0, as on the sim device.
  static bool array_format(const TexSpec& t, CUarray_format* f) {
    switch (t.ckind * 8 + t.cbytes) {
      case 0 * 8 + 1: *f = CU_AD_FORMAT_SIGNED_INT8; return true;
      case 0 * 8 + 2: *f = CU_AD_FORMAT_SIGNED_INT16; return true;
      case 0 * 8 + 4: *f = CU_AD_FORMAT_SIGNED_INT32; return true;
      case 1 * 8 + 1: *f = CU_AD_FORMAT_UNSIGNED_INT8; return true;
      case 1 * 8 + 2: *f = CU_AD_FORMAT_UNSIGNED_INT16; return true;
      case 1 * 8 + 4: *f = CU_AD_FORMAT_UNSIGNED_INT32; return true;
      case 2 * 8 + 2: *f = CU_AD_FORMAT_HALF; return true;
      case 2 * 8 + 4: *f = CU_AD_FORMAT_FLOAT; return true;
      default: return false;
    }
  }
  struct Mirror {
    CUarray arr = nullptr;
    TexSpec spec;
    int objects = 0;   // texture and surface objects over it
    int surfaces = 0;  // of which surfaces: copied back after launches
    bool live = true;  // false once its linear memory was freed
  };
  Err mirror_of(const TexSpec& t, CUarray* out) {
    auto it = mirrors_.find(t.dptr);
    if (it == mirrors_.end()) {
      CUarray_format f;
      if (!array_format(t, &f)) return cudaErrorInvalidChannelDescriptor;
      CUDA_ARRAY3D_DESCRIPTOR ad{};
      ad.Width = t.w;
      ad.Height = t.dims >= 2 ? t.h : 0;
      ad.Depth = t.dims == 3 || t.layered ? t.d : 0;
      ad.Format = f;
      ad.NumChannels = t.nch;
      ad.Flags = CUDA_ARRAY3D_SURFACE_LDST | (t.layered ? CUDA_ARRAY3D_LAYERED : 0);
      Mirror m;
      m.spec = t;
      if (CUresult r = d_.cuArray3DCreate(&m.arr, &ad); r != CUDA_SUCCESS) return map(r);
      it = mirrors_.emplace(t.dptr, m).first;
    }
    *out = it->second.arr;
    return cudaSuccess;
  }
  // Linear memory <-> its mirror, in stream s.
  CUresult mirror_copy(const Mirror& m, bool to_array, CUstream s) {
    CUDA_MEMCPY3D c{};
    const TexSpec& t = m.spec;
    c.WidthInBytes = size_t(t.w) * t.nch * t.cbytes;
    c.Height = t.h;
    c.Depth = t.d;
    if (to_array) {
      c.srcMemoryType = CU_MEMORYTYPE_DEVICE, c.srcDevice = t.dptr, c.srcPitch = t.pitch, c.srcHeight = t.h;
      c.dstMemoryType = CU_MEMORYTYPE_ARRAY, c.dstArray = m.arr;
    } else {
      c.srcMemoryType = CU_MEMORYTYPE_ARRAY, c.srcArray = m.arr;
      c.dstMemoryType = CU_MEMORYTYPE_DEVICE, c.dstDevice = t.dptr, c.dstPitch = t.pitch, c.dstHeight = t.h;
    }
    return d_.cuMemcpy3DAsync(&c, s);
  }
  Err texture_create(const TexSpec& t, bool surface, uint64_t* obj) override {
    cur();
    CUarray_format f;
    if (!array_format(t, &f)) return cudaErrorInvalidChannelDescriptor;
    CUDA_RESOURCE_DESC rd{};
    const bool mirrored = surface || t.layered || t.dims == 3;
    if (mirrored) {
      if (t.linear_mem) return cudaErrorInvalidValue;  // the session gives arrays only
      CUarray arr = nullptr;
      if (Err e = mirror_of(t, &arr); e != cudaSuccess) return e;
      rd.resType = CU_RESOURCE_TYPE_ARRAY;
      rd.res.array.hArray = arr;
    } else if (t.dims == 1 && t.h == 1) {
      rd.resType = CU_RESOURCE_TYPE_LINEAR;
      rd.res.linear.devPtr = t.dptr;
      rd.res.linear.format = f;
      rd.res.linear.numChannels = t.nch;
      rd.res.linear.sizeInBytes = uint64_t(t.w) * t.nch * t.cbytes;
    } else {
      rd.resType = CU_RESOURCE_TYPE_PITCH2D;
      rd.res.pitch2D.devPtr = t.dptr;
      rd.res.pitch2D.format = f;
      rd.res.pitch2D.numChannels = t.nch;
      rd.res.pitch2D.width = t.w;
      rd.res.pitch2D.height = t.h;
      rd.res.pitch2D.pitchInBytes = t.pitch;
    }
    CUresult r;
    uint64_t o = 0;
    if (surface) {
      CUsurfObject so = 0;
      r = d_.cuSurfObjectCreate(&so, &rd);
      o = so;
    } else {
      CUDA_TEXTURE_DESC td{};
      for (int k = 0; k < 3; ++k) td.addressMode[k] = CUaddress_mode(t.addr[k]);
      td.filterMode = t.filter_linear ? CU_TR_FILTER_MODE_LINEAR : CU_TR_FILTER_MODE_POINT;
      if (!t.read_normalized && t.ckind != cudaChannelFormatKindFloat) td.flags |= CU_TRSF_READ_AS_INTEGER;
      if (t.norm_coords) td.flags |= CU_TRSF_NORMALIZED_COORDINATES;
      if (t.srgb) td.flags |= CU_TRSF_SRGB;
      for (int k = 0; k < 4; ++k) td.borderColor[k] = t.border[k];
      CUtexObject to = 0;
      r = d_.cuTexObjectCreate(&to, &rd, &td, nullptr);
      o = to;
    }
    if (r != CUDA_SUCCESS) {
      if (mirrored) drop_mirror_if_unused(t.dptr);
      return map(r);
    }
    if (mirrored) {
      Mirror& m = mirrors_.at(t.dptr);
      m.objects++;
      m.surfaces += surface;
      mirror_obj_[{o, surface}] = t.dptr;
    }
    *obj = o;
    return cudaSuccess;
  }
  Err texture_destroy(uint64_t obj, bool surface) override {
    cur();
    CUresult r = surface ? d_.cuSurfObjectDestroy(CUsurfObject(obj)) : d_.cuTexObjectDestroy(CUtexObject(obj));
    if (auto it = mirror_obj_.find({obj, surface}); it != mirror_obj_.end()) {
      Mirror& m = mirrors_.at(it->second);
      m.objects--;
      m.surfaces -= surface;
      uint64_t dptr = it->second;
      mirror_obj_.erase(it);
      drop_mirror_if_unused(dptr);
    }
    return map(r);
  }
  void drop_mirror_if_unused(uint64_t dptr) {
    auto it = mirrors_.find(dptr);
    if (it == mirrors_.end() || it->second.objects > 0) return;
    d_.cuCtxSynchronize();  // a launch may still read it
    d_.cuArrayDestroy(it->second.arr);
    mirrors_.erase(it);
  }
  // Before (to_array) and after a launch in stream s.
  Err sync_mirrors(bool to_array, CUstream s) {
    for (auto& [dptr, m] : mirrors_) {
      if (!m.live || (!to_array && m.surfaces == 0)) continue;
      if (CUresult r = mirror_copy(m, to_array, s); r != CUDA_SUCCESS) return map(r);
    }
    return cudaSuccess;
  }
  // __managed__ variables of a GPU module live in the driver's managed
  // memory, which the guest cannot reach: not supported on this backend.
  Err module_rebind_global(Module&, const std::string&, uint64_t) override { return cudaErrorNotSupported; }
  Err set_limit(int limit, uint64_t value) override {
    cur();  // cudaLimit and CUlimit share their numbering
    return map(d_.cuCtxSetLimit(CUlimit(limit), size_t(value)));
  }
  Err get_limit(int limit, uint64_t* value) override {
    cur();
    size_t v = 0;
    CUresult r = d_.cuCtxGetLimit(&v, CUlimit(limit));
    *value = v;
    return map(r);
  }

  // ---- stream-ordered allocation: the driver's pools (the quota counts
  // what the application asked for, not what a pool reserves).
  Err pool_create(const MemPoolProps& props, MemPool** out) override {
    cur();
    CUmemPoolProps pp{};
    pp.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    pp.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
    pp.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    pp.location.id = dev_;
    pp.maxSize = props.max_size;
    auto p = std::make_unique<CuPool>();
    if (CUresult r = d_.cuMemPoolCreate(&p->p, &pp); r != CUDA_SUCCESS) return map(r);
    *out = p.get();
    pools_.push_back(std::move(p));
    return cudaSuccess;
  }
  Err pool_destroy(MemPool* mp) override {
    cur();
    // The driver keeps the pool until its allocations still out are freed.
    CUresult r = d_.cuMemPoolDestroy(static_cast<CuPool*>(mp)->p);
    std::erase_if(pools_, [&](const std::unique_ptr<CuPool>& q) { return q.get() == mp; });
    return map(r);
  }
  Err mem_alloc_async(MemPool* mp, uint64_t bytes, Stream* s, uint64_t* dptr) override {
    cur();
    if (bytes == 0) {
      *dptr = 0;
      return cudaSuccess;
    }
    if (quota_ && (bytes > quota_ || used_ > quota_ - bytes)) return cudaErrorMemoryAllocation;
    if (shared_ && !shared_->take(bytes)) return cudaErrorMemoryAllocation;
    CUdeviceptr p = 0;
    if (CUresult r = d_.cuMemAllocFromPoolAsync(&p, bytes, static_cast<CuPool*>(mp)->p, st(s)); r != CUDA_SUCCESS) {
      if (shared_) shared_->give(bytes);
      return map(r);
    }
    *dptr = p;
    sizes_[p] = bytes;
    pooled_.insert(p);
    used_ += bytes;
    return cudaSuccess;
  }
  Err mem_free_async(uint64_t dptr, Stream* s) override {
    cur();
    auto it = sizes_.find(dptr);
    if (it == sizes_.end()) return cudaErrorInvalidValue;
    if (!pooled_.count(dptr)) {  // cudaMalloc'd: free once the stream's work is done
      if (CUresult r = d_.cuStreamSynchronize(st(s)); r != CUDA_SUCCESS) return map(r);
      return mem_free(dptr);
    }
    used_ -= it->second;
    if (shared_) shared_->give(it->second);
    sizes_.erase(it);
    pooled_.erase(dptr);
    return map(d_.cuMemFreeAsync(dptr, st(s)));
  }
  Err pool_trim(MemPool* mp, uint64_t keep) override {
    cur();
    return map(d_.cuMemPoolTrimTo(static_cast<CuPool*>(mp)->p, keep));
  }
  // cudaMemPoolAttr and CUmemPool_attribute share their numbering; the
  // reuse switches are ints, the amounts 64-bit.
  static bool int_attr(int attr) { return attr <= int(CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES); }
  Err pool_set_attribute(MemPool* mp, int attr, uint64_t value) override {
    cur();
    auto* p = static_cast<CuPool*>(mp);
    int iv = int(value != 0);
    cuuint64_t v = value;
    return map(d_.cuMemPoolSetAttribute(p->p, CUmemPool_attribute(attr), int_attr(attr) ? static_cast<void*>(&iv)
                                                                                         : static_cast<void*>(&v)));
  }
  Err pool_get_attribute(MemPool* mp, int attr, uint64_t* value) override {
    cur();
    auto* p = static_cast<CuPool*>(mp);
    int iv = 0;
    cuuint64_t v = 0;
    CUresult r = d_.cuMemPoolGetAttribute(p->p, CUmemPool_attribute(attr),
                                          int_attr(attr) ? static_cast<void*>(&iv) : static_cast<void*>(&v));
    *value = int_attr(attr) ? uint64_t(iv) : uint64_t(v);
    return map(r);
  }
  Err mem_info(uint64_t* free_bytes, uint64_t* total_bytes) override {
    cur();
    size_t f = 0, t = 0;
    if (CUresult r = d_.cuMemGetInfo(&f, &t); r != CUDA_SUCCESS) return map(r);
    if (quota_) {
      t = std::min<uint64_t>(t, quota_);
      f = std::min<uint64_t>(f, quota_ - used_);
    }
    if (shared_) {
      t = std::min<uint64_t>(t, shared_->limit);
      f = std::min<uint64_t>(f, shared_->left());
    }
    *free_bytes = f;
    *total_bytes = t;
    return cudaSuccess;
  }
  // `want` is honoured only where the driver's unified address of the
  // server's mapping happens to be it; otherwise managed memory is refused
  // to the guest (it then sees a different device address).
  Err map_host(void* host, uint64_t bytes, uint64_t, uint64_t* dptr) override {
    cur();
    if (CUresult r = d_.cuMemHostRegister(host, bytes, CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_PORTABLE);
        r != CUDA_SUCCESS)
      return map(r);
    CUdeviceptr p = 0;
    if (CUresult r = d_.cuMemHostGetDevicePointer(&p, host, 0); r != CUDA_SUCCESS) {
      d_.cuMemHostUnregister(host);
      return map(r);
    }
    mapped_[p] = host;
    *dptr = p;
    return cudaSuccess;
  }
  Err unmap_host(uint64_t dptr) override {
    auto it = mapped_.find(dptr);
    if (it == mapped_.end()) return cudaErrorInvalidValue;
    cur();
    d_.cuCtxSynchronize();  // no copy or kernel may still use it
    d_.cuMemHostUnregister(it->second);
    mapped_.erase(it);
    return cudaSuccess;
  }
  Err copy_htod(uint64_t dst, const void* src, uint64_t n, Stream* s) override {
    cur();
    return map(d_.cuMemcpyHtoDAsync(dst, src, n, st(s)));
  }
  Err copy_dtoh(void* dst, uint64_t src, uint64_t n, Stream* s) override {
    cur();
    return map(d_.cuMemcpyDtoHAsync(dst, src, n, st(s)));
  }
  Err copy_dtod(uint64_t dst, uint64_t src, uint64_t n, Stream* s) override {
    cur();
    return map(d_.cuMemcpyDtoDAsync(dst, src, n, st(s)));
  }
  Err memset8(uint64_t dst, uint8_t value, uint64_t n, Stream* s) override {
    cur();
    return map(d_.cuMemsetD8Async(dst, value, n, st(s)));
  }
  Err module_load(std::span<const uint8_t> fatbin, std::unique_ptr<Module>* out,
                  std::string* log) override {
    cur();
    auto m = std::make_unique<CuModule>();
    // A fatbin or cubin goes to the driver as it is. PTX text (the driver
    // API's bare PTX image; NUL-separated units from the guest's linker)
    // must end with its NUL; several units are linked by the driver first.
    std::vector<std::string_view> units;
    uint32_t magic = 0;
    if (fatbin.size() >= 4) std::memcpy(&magic, fatbin.data(), 4);
    const bool elf = fatbin.size() >= 4 && std::memcmp(fatbin.data(), "\x7f" "ELF", 4) == 0;
    if (std::string why; !image_in_bounds(fatbin, &why)) {
      if (log) *log = "malformed image: " + why;
      return cudaErrorInvalidKernelImage;
    }
    if (magic != 0xba55ed50u && !elf) {
      if (fatbin.empty() || fatbin.back() != 0) {
        if (log) *log = "PTX image without its terminating NUL";
        return cudaErrorInvalidKernelImage;
      }
      const char* p = reinterpret_cast<const char*>(fatbin.data());
      for (size_t i = 0; i < fatbin.size();) {
        size_t n = std::strlen(p + i);
        if (n) units.emplace_back(p + i, n);
        i += n + 1;
      }
    }
    CUresult r;
    if (units.size() > 1) {
      CUlinkState ls = nullptr;
      r = d_.cuLinkCreate(0, nullptr, nullptr, &ls);
      std::vector<std::string> texts;
      for (size_t i = 0; r == CUDA_SUCCESS && i < units.size(); i++) {
        texts.emplace_back(units[i]);
        r = d_.cuLinkAddData(ls, CU_JIT_INPUT_PTX, texts.back().data(), texts.back().size() + 1, "unit.ptx", 0,
                             nullptr, nullptr);
      }
      void* cubin = nullptr;
      size_t cubin_size = 0;
      if (r == CUDA_SUCCESS) r = d_.cuLinkComplete(ls, &cubin, &cubin_size);
      if (r == CUDA_SUCCESS) r = d_.cuLibraryLoadData(&m->lib, cubin, nullptr, nullptr, 0, nullptr, nullptr, 0);
      if (ls) d_.cuLinkDestroy(ls);
    } else {
      r = d_.cuLibraryLoadData(&m->lib, fatbin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0);
    }
    if (r != CUDA_SUCCESS) {
      if (log) *log = "cuLibraryLoadData failed: " + std::to_string(int(r));
      return map(r);
    }
    // Loaded in this context now (a lazily loading driver would defer it to
    // the first launch): an image the device cannot run fails this load,
    // as it does on the sim device, instead of a launch posted later.
    if (CUmodule mod = nullptr; (r = d_.cuLibraryGetModule(&mod, m->lib)) != CUDA_SUCCESS) {
      if (log) *log = "the driver could not load the image: " + std::to_string(int(r));
      d_.cuLibraryUnload(m->lib);
      m->lib = nullptr;
      return map(r);
    }
    *out = std::move(m);
    return cudaSuccess;
  }
  void module_unload(Module& mb) override {
    cur();
    auto& m = static_cast<CuModule&>(mb);
    if (m.lib) d_.cuLibraryUnload(m.lib);
    m.lib = nullptr;
  }
  Err module_kernel(Module& mb, const std::string& name, std::unique_ptr<Kernel>* out,
                    KernelAttrs* a) override {
    cur();
    auto& m = static_cast<CuModule&>(mb);
    CUkernel k = nullptr;
    // A name the driver would cut at a NUL, or does not know, is no kernel.
    if (name.empty() || name.find('\0') != std::string::npos) return cudaErrorInvalidDeviceFunction;
    if (CUresult r = d_.cuLibraryGetKernel(&k, m.lib, name.c_str()); r != CUDA_SUCCESS)
      return r == CUDA_ERROR_NOT_FOUND ? cudaErrorInvalidDeviceFunction : map(r);
    auto kk = std::make_unique<CuKernel>();
    if (CUresult r = d_.cuKernelGetFunction(&kk->fn, k); r != CUDA_SUCCESS) return map(r);
    auto attr = [&](CUfunction_attribute at) {
      int v = 0;
      d_.cuFuncGetAttribute(&v, at, kk->fn);
      return v;
    };
    a->max_threads = attr(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
    a->num_regs = attr(CU_FUNC_ATTRIBUTE_NUM_REGS);
    a->shared_bytes = uint32_t(attr(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES));
    a->local_bytes = uint32_t(attr(CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES));
    a->const_bytes = uint32_t(attr(CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES));
    a->ptx_version = attr(CU_FUNC_ATTRIBUTE_PTX_VERSION);
    a->binary_version = attr(CU_FUNC_ATTRIBUTE_BINARY_VERSION);
    a->params.clear();
    a->param_bytes = 0;
    for (size_t i = 0;; i++) {
      size_t off = 0, sz = 0;
      if (d_.cuFuncGetParamInfo(kk->fn, i, &off, &sz) != CUDA_SUCCESS) break;
      a->params.emplace_back(uint32_t(off), uint32_t(sz));
      a->param_bytes = std::max<uint32_t>(a->param_bytes, uint32_t(off + sz));
    }
    *out = std::move(kk);
    return cudaSuccess;
  }
  Err module_global(Module& mb, const std::string& name, uint64_t* dptr, uint64_t* bytes) override {
    cur();
    auto& m = static_cast<CuModule&>(mb);
    CUdeviceptr p = 0;
    size_t n = 0;
    if (name.empty() || name.find('\0') != std::string::npos) return cudaErrorInvalidSymbol;
    if (CUresult r = d_.cuLibraryGetGlobal(&p, &n, m.lib, name.c_str()); r != CUDA_SUCCESS)
      return r == CUDA_ERROR_NOT_FOUND ? cudaErrorInvalidSymbol : map(r);
    *dptr = p;
    *bytes = n;
    return cudaSuccess;
  }
  // Device printf and assert messages go to the server's stdout/stderr
  // (the driver writes them there); `output` stays empty (docs/hardware.md).
  // With mirrors, the copies around the kernel come between it and the
  // previous kernel of its stream; a programmatic dependent launch then
  // waits for them, as for any stream work that is not a kernel.
  Err launch(Kernel& kb, Dim3 g, Dim3 b, uint32_t shared, uint32_t flags, Stream* s,
             std::span<const uint8_t> params, std::string* log, KernelOutput* out) override {
    cur();
    if (mirrors_.empty()) return launch_kernel(kb, g, b, shared, flags, s, params, log, out);
    if (Err e = sync_mirrors(true, st(s)); e != cudaSuccess) return e;
    if (Err e = launch_kernel(kb, g, b, shared, flags, s, params, log, out); e != cudaSuccess) return e;
    return sync_mirrors(false, st(s));
  }
  Err launch_kernel(Kernel& kb, Dim3 g, Dim3 b, uint32_t shared, uint32_t flags, Stream* s,
                    std::span<const uint8_t> params, std::string*, KernelOutput*) {
    auto& k = static_cast<CuKernel&>(kb);
    size_t size = params.size();
    void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, const_cast<uint8_t*>(params.data()),
                     CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
    // Cooperative and programmatic launches go through cuLaunchKernelEx
    // (cuLaunchCooperativeKernel takes no packed buffer; the Ex form does).
    if (flags & (kCooperativeLaunch | kProgrammaticLaunch)) {
      CUlaunchAttribute at[2]{};
      unsigned n = 0;
      if (flags & kCooperativeLaunch) {
        at[n].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
        at[n++].value.cooperative = 1;
      }
      if (flags & kProgrammaticLaunch) {
        at[n].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        at[n++].value.programmaticStreamSerializationAllowed = 1;
      }
      CUlaunchConfig lc{};
      lc.gridDimX = g.x, lc.gridDimY = g.y, lc.gridDimZ = g.z;
      lc.blockDimX = b.x, lc.blockDimY = b.y, lc.blockDimZ = b.z;
      lc.sharedMemBytes = shared;
      lc.hStream = st(s);
      lc.attrs = at;
      lc.numAttrs = n;
      return map(d_.cuLaunchKernelEx(&lc, k.fn, nullptr, size ? extra : nullptr));
    }
    return map(d_.cuLaunchKernel(k.fn, g.x, g.y, g.z, b.x, b.y, b.z, shared, st(s), nullptr,
                                 size ? extra : nullptr));
  }
  Err stream_create(uint32_t flags, int prio, std::unique_ptr<Stream>* out) override {
    cur();
    auto s = std::make_unique<CuStream>();
    if (CUresult r = d_.cuStreamCreateWithPriority(&s->s, flags, prio); r != CUDA_SUCCESS) return map(r);
    *out = std::move(s);
    return cudaSuccess;
  }
  Err stream_synchronize(Stream* s) override {
    cur();
    return map(d_.cuStreamSynchronize(st(s)));
  }
  Err stream_query(Stream* s) override {
    cur();
    return map(d_.cuStreamQuery(st(s)));
  }
  Err stream_wait_event(Stream* s, Event& e) override {
    cur();
    return map(d_.cuStreamWaitEvent(st(s), static_cast<CuEvent&>(e).e, 0));
  }
  Err event_create(uint32_t flags, std::unique_ptr<Event>* out) override {
    cur();
    auto e = std::make_unique<CuEvent>();
    if (CUresult r = d_.cuEventCreate(&e->e, flags); r != CUDA_SUCCESS) return map(r);
    *out = std::move(e);
    return cudaSuccess;
  }
  Err event_record(Event& e, Stream* s) override {
    cur();
    return map(d_.cuEventRecord(static_cast<CuEvent&>(e).e, st(s)));
  }
  Err event_synchronize(Event& e) override {
    cur();
    return map(d_.cuEventSynchronize(static_cast<CuEvent&>(e).e));
  }
  Err event_query(Event& e) override {
    cur();
    return map(d_.cuEventQuery(static_cast<CuEvent&>(e).e));
  }
  Err event_elapsed(Event& a, Event& b, float* ms) override {
    cur();
    return map(d_.cuEventElapsedTime(ms, static_cast<CuEvent&>(a).e, static_cast<CuEvent&>(b).e));
  }
  Err synchronize() override {
    cur();
    return map(d_.cuCtxSynchronize());
  }
  Blas* blas(std::string* err) override {
    if (!blas_) blas_ = make_cuda_blas([this] { cur(); }, err);
    return blas_.get();
  }
  Fft* fft(std::string* err) override {
    if (!fft_) fft_ = make_cuda_fft([this] { cur(); }, err);
    return fft_.get();
  }
  Dnn* dnn(std::string* err) override {
    if (!dnn_) dnn_ = make_cuda_dnn([this] { cur(); }, err);
    return dnn_.get();
  }
  BlasLt* blaslt(std::string* err) override {
    if (!blaslt_) blaslt_ = make_cuda_blaslt([this] { cur(); }, err);
    return blaslt_.get();
  }
  Rand* rand(std::string* err) override {
    if (!rand_) rand_ = make_cuda_rand([this] { cur(); }, err);
    return rand_.get();
  }

 private:
  Driver& d_;
  CUcontext ctx_;
  CUdevice dev_;
  uint64_t quota_;
  std::shared_ptr<SharedQuota> shared_;  // the uid's limit, if any
  uint64_t used_ = 0;
  std::unordered_map<uint64_t, uint64_t> sizes_;
  std::unordered_set<uint64_t> pooled_;  // allocations from pools (cuMemFreeAsync frees them)
  std::vector<std::unique_ptr<CuPool>> pools_;
  std::map<uint64_t, void*> mapped_;  // map_host: device address -> registered host memory
  std::map<uint64_t, Mirror> mirrors_;                          // by the array's linear memory
  std::map<std::pair<uint64_t, bool>, uint64_t> mirror_obj_;  // (object, surface) -> its mirror
  std::unique_ptr<Blas> blas_;  // libcublas.so.13 (cuda_blas.cpp), on first use
  std::unique_ptr<Fft> fft_;    // libcufft.so.12 (cuda_fft.cpp), on first use
  std::unique_ptr<Dnn> dnn_;    // libcudnn.so.9 (cuda_dnn.cpp), on first use
  std::unique_ptr<BlasLt> blaslt_;  // libcublasLt.so.13 (cuda_blaslt.cpp), on first use
  std::unique_ptr<Rand> rand_;  // libcurand.so.10 (cuda_rand.cpp), on first use
};

class CudaBackend final : public Backend {
 public:
  bool init(std::string* err) {
    if (!d_.load(err)) return false;
    if (CUresult r = d_.cuInit(0); r != CUDA_SUCCESS) {
      if (err) *err = "cuInit failed: " + std::to_string(int(r));
      return false;
    }
    d_.cuDeviceGetCount(&count_);
    d_.cuDriverGetVersion(&version_);
    if (count_ <= 0) {
      if (err) *err = "no CUDA device";
      return false;
    }
    spdlog::info("cuda backend: driver {} ({}), version {}, {} device(s)", d_.path,
                 d_.dropin ? "Wormhole's drop-in, forwarding to another server: testing only" : "NVIDIA's",
                 version_, count_);
    return true;
  }
  const char* name() const override { return "cuda"; }
  int device_count() const override { return count_; }
  int driver_version() const override { return version_; }
  Err describe(int device, proto::DeviceDescription* d) override {
    CUdevice dev;
    if (d_.cuDeviceGet(&dev, device) != CUDA_SUCCESS) return cudaErrorInvalidDevice;
    std::memset(d, 0, sizeof(*d));
    // cudaDeviceAttr and CUdevice_attribute share their numbering; an
    // attribute this driver does not know stays absent.
    for (int at = 1; at < proto::kAttrSlots; at++) {
      int v = 0;
      if (d_.cuDeviceGetAttribute(&v, CUdevice_attribute(at), dev) == CUDA_SUCCESS) {
        d->attr[at] = v;
        d->has[at] = 1;
      }
    }
    cudaDeviceProp& p = d->props;
    proto::props_from_attributes(*d, p);
    d_.cuDeviceGetName(p.name, sizeof(p.name), dev);
    size_t total = 0;
    d_.cuDeviceTotalMem(&total, dev);
    p.totalGlobalMem = total;
    CUuuid u{};
    if (d_.cuDeviceGetUuid(&u, dev) == CUDA_SUCCESS) std::memcpy(&p.uuid, &u, sizeof u);
    return cudaSuccess;
  }
  std::unique_ptr<Context> create_context(int device, const ContextLimits& limits,
                                          std::string* err) override {
    if (limits.va_base) {
      // A restore: the driver chooses device addresses, so a saved session's
      // pointers could not stay valid (docs/migration.md).
      if (err) *err = "the cuda backend cannot place a restored session's memory at its addresses";
      return nullptr;
    }
    std::lock_guard lk(mu_);
    CUdevice dev;
    if (d_.cuDeviceGet(&dev, device) != CUDA_SUCCESS) {
      if (err) *err = "no such device";
      return nullptr;
    }
    CUcontext ctx = nullptr;
    if (CUresult r = d_.cuCtxCreate(&ctx, nullptr, CU_CTX_SCHED_SPIN, dev); r != CUDA_SUCCESS) {
      if (err) *err = "cuCtxCreate failed: " + std::to_string(int(r));
      return nullptr;
    }
    return std::make_unique<CudaContext>(d_, ctx, dev, limits.memory_quota, limits.shared);
  }

 private:
  Driver d_;
  int count_ = 0;
  int version_ = 0;
  std::mutex mu_;
};

}  // namespace

void allow_dropin_driver() { dropin_driver_allowed() = true; }

std::unique_ptr<Backend> make_cuda_backend(std::string* err) {
  auto b = std::make_unique<CudaBackend>();
  if (!b->init(err)) return nullptr;
  return b;
}

}  // namespace wh::server
