// Memory, copies and fills, pools, streams, events and graphs: the
// runtime's implementations, whose handles are the driver API's.
#include <algorithm>
#include <cstring>
#include <vector>

#include "driver.hpp"

using namespace wh::driver;

namespace {

inline void* P(CUdeviceptr d) { return reinterpret_cast<void*>(uintptr_t(d)); }
inline cudaStream_t S(CUstream s) { return reinterpret_cast<cudaStream_t>(s); }
inline cudaEvent_t E(CUevent e) { return reinterpret_cast<cudaEvent_t>(e); }

CUresult copy(void* dst, const void* src, size_t n, cudaMemcpyKind kind, CUstream s, bool async) {
  WH_INIT();
  if (!n) return CUDA_SUCCESS;
  return rt(async ? cudaMemcpyAsync(dst, src, n, kind, S(s)) : cudaMemcpy(dst, src, n, kind));
}

// Fills `rows` rows of `n` elements of `es` bytes (pitch apart) with the
// element value `v`: one byte repeated goes to cudaMemset2D; otherwise the
// first row's first elements are written, then doubled by device copies.
CUresult fill(CUdeviceptr d, size_t pitch, uint32_t v, size_t es, size_t n, size_t rows, CUstream s, bool async) {
  WH_INIT();
  if (!n || !rows) return CUDA_SUCCESS;
  if (d % es || (rows > 1 && (pitch % es || pitch < n * es))) return CUDA_ERROR_INVALID_VALUE;
  const size_t width = n * es;
  if (rows > 1 && pitch == width) {
    n *= rows;
    rows = 1;
  }
  const uint8_t b = uint8_t(v);
  if ((es == 1) || (es == 2 && uint8_t(v >> 8) == b) || (es == 4 && v == b * 0x01010101u)) {
    if (rows == 1)
      return rt(async ? cudaMemsetAsync(P(d), b, n * es, S(s)) : cudaMemset(P(d), b, n * es));
    if (!async) return rt(cudaMemset2D(P(d), pitch, b, width, rows));
    for (size_t r = 0; r < rows; r++)
      if (cudaError_t e = cudaMemsetAsync(P(d + r * pitch), b, width, S(s)); e != cudaSuccess) return rt(e);
    return CUDA_SUCCESS;
  }
  const size_t row = n * es;
  const size_t first = std::min<size_t>(n, 16384);
  std::vector<uint8_t> pattern(first * es);
  for (size_t i = 0; i < first; i++) std::memcpy(pattern.data() + i * es, &v, es);
  auto cp = [&](void* dst, const void* src, size_t bytes, cudaMemcpyKind k) {
    return async ? cudaMemcpyAsync(dst, src, bytes, k, S(s)) : cudaMemcpy(dst, src, bytes, k);
  };
  // A pageable source is consumed before the call returns (the runtime
  // copies it into the request or its staging area), so `pattern` may go.
  if (cudaError_t e = cp(P(d), pattern.data(), pattern.size(), cudaMemcpyHostToDevice); e != cudaSuccess) return rt(e);
  for (size_t done = first * es; done < row;) {
    size_t k = std::min(done, row - done);
    if (cudaError_t e = cp(P(d + done), P(d), k, cudaMemcpyDeviceToDevice); e != cudaSuccess) return rt(e);
    done += k;
  }
  for (size_t done = 1; done < rows;) {
    size_t k = std::min(done, rows - done);
    cudaError_t e = async ? cudaMemcpy2DAsync(P(d + done * pitch), pitch, P(d), pitch, row, k,
                                              cudaMemcpyDeviceToDevice, S(s))
                          : cudaMemcpy2D(P(d + done * pitch), pitch, P(d), pitch, row, k, cudaMemcpyDeviceToDevice);
    if (e != cudaSuccess) return rt(e);
    done += k;
  }
  return CUDA_SUCCESS;
}

// One end of a 2D/3D copy: its address, or its array and position.
struct End {
  CUmemorytype type;
  void* ptr = nullptr;
  cudaArray_t array = nullptr;
};

bool end_of(CUmemorytype t, const void* host, CUdeviceptr dev, CUarray arr, size_t x, size_t y, size_t z, size_t pitch,
            size_t height, End* out) {
  out->type = t;
  const size_t off = x + y * pitch + z * pitch * height;
  switch (t) {
    case CU_MEMORYTYPE_HOST:
      if (!host) return false;
      out->ptr = const_cast<uint8_t*>(static_cast<const uint8_t*>(host)) + off;
      return true;
    case CU_MEMORYTYPE_DEVICE:
    case CU_MEMORYTYPE_UNIFIED:
      if (!dev) return false;
      out->ptr = P(dev + off);
      return true;
    case CU_MEMORYTYPE_ARRAY:
      out->array = reinterpret_cast<cudaArray_t>(arr);
      return arr != nullptr;
    default:
      return false;
  }
}

cudaMemcpyKind kind_of(CUmemorytype src, CUmemorytype dst) {
  if (src == CU_MEMORYTYPE_UNIFIED || dst == CU_MEMORYTYPE_UNIFIED) return cudaMemcpyDefault;
  const bool sd = src != CU_MEMORYTYPE_HOST, dd = dst != CU_MEMORYTYPE_HOST;
  return sd ? (dd ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost)
            : (dd ? cudaMemcpyHostToDevice : cudaMemcpyHostToHost);
}

CUresult copy2d(const CUDA_MEMCPY2D* c, CUstream s, bool async) {
  WH_INIT();
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  End src, dst;
  if (!end_of(c->srcMemoryType, c->srcHost, c->srcDevice, c->srcArray, c->srcXInBytes, c->srcY, 0, c->srcPitch, 0,
              &src) ||
      !end_of(c->dstMemoryType, c->dstHost, c->dstDevice, c->dstArray, c->dstXInBytes, c->dstY, 0, c->dstPitch, 0,
              &dst))
    return CUDA_ERROR_INVALID_VALUE;
  const cudaMemcpyKind k = kind_of(c->srcMemoryType, c->dstMemoryType);
  const size_t w = c->WidthInBytes, h = c->Height;
  cudaError_t e;
  if (src.array && dst.array)
    e = cudaMemcpy2DArrayToArray(dst.array, c->dstXInBytes, c->dstY, src.array, c->srcXInBytes, c->srcY, w, h, k);
  else if (src.array)
    e = async ? cudaMemcpy2DFromArrayAsync(dst.ptr, c->dstPitch, src.array, c->srcXInBytes, c->srcY, w, h, k, S(s))
              : cudaMemcpy2DFromArray(dst.ptr, c->dstPitch, src.array, c->srcXInBytes, c->srcY, w, h, k);
  else if (dst.array)
    e = async ? cudaMemcpy2DToArrayAsync(dst.array, c->dstXInBytes, c->dstY, src.ptr, c->srcPitch, w, h, k, S(s))
              : cudaMemcpy2DToArray(dst.array, c->dstXInBytes, c->dstY, src.ptr, c->srcPitch, w, h, k);
  else
    e = async ? cudaMemcpy2DAsync(dst.ptr, c->dstPitch, src.ptr, c->srcPitch, w, h, k, S(s))
              : cudaMemcpy2D(dst.ptr, c->dstPitch, src.ptr, c->srcPitch, w, h, k);
  return rt(e);
}

// The driver's 3D copy description in the runtime's terms (also a graph
// memcpy node's parameters).
CUresult params3d(const CUDA_MEMCPY3D* c, cudaMemcpy3DParms* out) {
  if (!c || c->reserved0 || c->reserved1 || c->srcLOD || c->dstLOD) return CUDA_ERROR_INVALID_VALUE;
  cudaMemcpy3DParms& p = *out;
  p = cudaMemcpy3DParms{};
  const size_t sh = c->srcHeight ? c->srcHeight : c->Height, dh = c->dstHeight ? c->dstHeight : c->Height;
  auto side = [&](CUmemorytype t, const void* host, CUdeviceptr dev, CUarray arr, size_t pitch, size_t height,
                  cudaArray_t* a, cudaPitchedPtr* pp) {
    switch (t) {
      case CU_MEMORYTYPE_HOST:
        if (!host) return false;
        if (!pitch && height <= 1 && c->Depth <= 1) pitch = c->WidthInBytes;  // a 1D copy (graph memcpy node)
        *pp = cudaPitchedPtr{const_cast<void*>(host), pitch, c->WidthInBytes, height};
        return true;
      case CU_MEMORYTYPE_DEVICE:
      case CU_MEMORYTYPE_UNIFIED:
        if (!dev) return false;
        if (!pitch && height <= 1 && c->Depth <= 1) pitch = c->WidthInBytes;
        *pp = cudaPitchedPtr{P(dev), pitch, c->WidthInBytes, height};
        return true;
      case CU_MEMORYTYPE_ARRAY:
        *a = reinterpret_cast<cudaArray_t>(arr);
        return arr != nullptr;
      default:
        return false;
    }
  };
  if (!side(c->srcMemoryType, c->srcHost, c->srcDevice, c->srcArray, c->srcPitch, sh, &p.srcArray, &p.srcPtr) ||
      !side(c->dstMemoryType, c->dstHost, c->dstDevice, c->dstArray, c->dstPitch, dh, &p.dstArray, &p.dstPtr))
    return CUDA_ERROR_INVALID_VALUE;
  p.srcPos = cudaPos{c->srcXInBytes, c->srcY, c->srcZ};
  p.dstPos = cudaPos{c->dstXInBytes, c->dstY, c->dstZ};
  // For arrays the runtime counts width in elements; the driver in bytes.
  size_t width = c->WidthInBytes;
  if (p.srcArray || p.dstArray) {
    cudaChannelFormatDesc d;
    cudaExtent ext;
    unsigned flags;
    if (cudaError_t e = cudaArrayGetInfo(&d, &ext, &flags, p.srcArray ? p.srcArray : p.dstArray); e != cudaSuccess)
      return rt(e);
    const size_t es = size_t(d.x + d.y + d.z + d.w) / 8;
    if (!es || width % es || c->srcXInBytes % es || c->dstXInBytes % es) return CUDA_ERROR_INVALID_VALUE;
    width /= es;
    if (p.srcArray) p.srcPos.x /= es;
    if (p.dstArray) p.dstPos.x /= es;
  }
  p.extent = cudaExtent{width, c->Height, c->Depth};
  p.kind = kind_of(c->srcMemoryType, c->dstMemoryType);
  return CUDA_SUCCESS;
}

CUresult copy3d(const CUDA_MEMCPY3D* c, CUstream s, bool async) {
  WH_INIT();
  cudaMemcpy3DParms p;
  if (CUresult r = params3d(c, &p); r != CUDA_SUCCESS) return r;
  return rt(async ? cudaMemcpy3DAsync(&p, S(s)) : cudaMemcpy3D(&p));
}

}  // namespace

extern "C" {

// ---- allocation
CUresult cuMemAlloc_v2(CUdeviceptr* d, size_t n) {
  WH_INIT();
  if (!d || !n) return CUDA_ERROR_INVALID_VALUE;
  void* p = nullptr;
  if (cudaError_t e = cudaMalloc(&p, n); e != cudaSuccess) return rt(e);
  *d = CUdeviceptr(uintptr_t(p));
  return CUDA_SUCCESS;
}
CUresult cuMemAllocPitch_v2(CUdeviceptr* d, size_t* pitch, size_t width, size_t height, unsigned elem) {
  WH_INIT();
  if (!d || !pitch || !width || !height || (elem != 4 && elem != 8 && elem != 16)) return CUDA_ERROR_INVALID_VALUE;
  void* p = nullptr;
  if (cudaError_t e = cudaMallocPitch(&p, pitch, width, height); e != cudaSuccess) return rt(e);
  *d = CUdeviceptr(uintptr_t(p));
  return CUDA_SUCCESS;
}
CUresult cuMemFree_v2(CUdeviceptr d) {
  WH_INIT();
  return rt(cudaFree(P(d)));
}
CUresult cuMemGetInfo_v2(size_t* free, size_t* total) {
  WH_INIT();
  return rt(cudaMemGetInfo(free, total));
}
CUresult cuMemGetAddressRange_v2(CUdeviceptr* base, size_t* size, CUdeviceptr d) {
  WH_INIT();
  uint64_t b = 0, n = 0;
  if (wh_guest_allocation_of(d, &b, &n) != cudaSuccess) return CUDA_ERROR_NOT_FOUND;
  if (base) *base = b;
  if (size) *size = n;
  return CUDA_SUCCESS;
}
CUresult cuMemAllocHost_v2(void** p, size_t n) {
  WH_INIT();
  return rt(cudaMallocHost(p, n));
}
CUresult cuMemHostAlloc(void** p, size_t n, unsigned flags) {
  WH_INIT();
  return rt(cudaHostAlloc(p, n, flags));  // CU_MEMHOSTALLOC_* == cudaHostAlloc*
}
CUresult cuMemFreeHost(void* p) {
  WH_INIT();
  return rt(cudaFreeHost(p));
}
CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr* d, void* p, unsigned flags) {
  WH_INIT();
  if (!d) return CUDA_ERROR_INVALID_VALUE;
  void* dp = nullptr;
  if (cudaError_t e = cudaHostGetDevicePointer(&dp, p, flags); e != cudaSuccess) return rt(e);
  *d = CUdeviceptr(uintptr_t(dp));
  return CUDA_SUCCESS;
}
CUresult cuMemHostGetFlags(unsigned* flags, void* p) {
  WH_INIT();
  return rt(cudaHostGetFlags(flags, p));
}
CUresult cuMemHostRegister_v2(void* p, size_t n, unsigned flags) {
  WH_INIT();
  return rt(cudaHostRegister(p, n, flags));  // CU_MEMHOSTREGISTER_* == cudaHostRegister*
}
CUresult cuMemHostUnregister(void* p) {
  WH_INIT();
  return rt(cudaHostUnregister(p));
}
CUresult cuMemAllocManaged(CUdeviceptr* d, size_t n, unsigned flags) {
  WH_INIT();
  if (!d) return CUDA_ERROR_INVALID_VALUE;
  void* p = nullptr;
  if (cudaError_t e = cudaMallocManaged(&p, n, flags); e != cudaSuccess) return rt(e);
  *d = CUdeviceptr(uintptr_t(p));
  return CUDA_SUCCESS;
}

// ---- pools and stream-ordered allocation
CUresult cuMemAllocAsync(CUdeviceptr* d, size_t n, CUstream s) {
  WH_INIT();
  if (!d) return CUDA_ERROR_INVALID_VALUE;
  void* p = nullptr;
  if (cudaError_t e = cudaMallocAsync(&p, n, S(s)); e != cudaSuccess) return rt(e);
  *d = CUdeviceptr(uintptr_t(p));
  return CUDA_SUCCESS;
}
CUresult cuMemAllocAsync_ptsz(CUdeviceptr* d, size_t n, CUstream s) { return cuMemAllocAsync(d, n, s); }
CUresult cuMemAllocFromPoolAsync(CUdeviceptr* d, size_t n, CUmemoryPool pool, CUstream s) {
  WH_INIT();
  if (!d) return CUDA_ERROR_INVALID_VALUE;
  void* p = nullptr;
  if (cudaError_t e = cudaMallocFromPoolAsync(&p, n, reinterpret_cast<cudaMemPool_t>(pool), S(s)); e != cudaSuccess)
    return rt(e);
  *d = CUdeviceptr(uintptr_t(p));
  return CUDA_SUCCESS;
}
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* d, size_t n, CUmemoryPool pool, CUstream s) {
  return cuMemAllocFromPoolAsync(d, n, pool, s);
}
CUresult cuMemFreeAsync(CUdeviceptr d, CUstream s) {
  WH_INIT();
  return rt(cudaFreeAsync(P(d), S(s)));
}
CUresult cuMemFreeAsync_ptsz(CUdeviceptr d, CUstream s) { return cuMemFreeAsync(d, s); }
CUresult cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* p) {
  WH_INIT();
  if (!pool || !p) return CUDA_ERROR_INVALID_VALUE;
  cudaMemPoolProps rp{};
  rp.allocType = cudaMemAllocationType(p->allocType);
  rp.handleTypes = cudaMemAllocationHandleType(p->handleTypes);
  rp.location.type = cudaMemLocationType(p->location.type);
  rp.location.id = p->location.id;
  rp.maxSize = p->maxSize;
  rp.usage = p->usage;
  return rt(cudaMemPoolCreate(reinterpret_cast<cudaMemPool_t*>(pool), &rp));
}
CUresult cuMemPoolDestroy(CUmemoryPool pool) {
  WH_INIT();
  return rt(cudaMemPoolDestroy(reinterpret_cast<cudaMemPool_t>(pool)));
}
CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep) {
  WH_INIT();
  return rt(cudaMemPoolTrimTo(reinterpret_cast<cudaMemPool_t>(pool), keep));
}
// CUmemPool_attribute and cudaMemPoolAttr share their numbering.
CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute a, void* v) {
  WH_INIT();
  return rt(cudaMemPoolSetAttribute(reinterpret_cast<cudaMemPool_t>(pool), cudaMemPoolAttr(a), v));
}
CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute a, void* v) {
  WH_INIT();
  return rt(cudaMemPoolGetAttribute(reinterpret_cast<cudaMemPool_t>(pool), cudaMemPoolAttr(a), v));
}

// ---- copies
CUresult cuMemcpy(CUdeviceptr d, CUdeviceptr s, size_t n) { return copy(P(d), P(s), n, cudaMemcpyDefault, nullptr, false); }
CUresult cuMemcpy_ptds(CUdeviceptr d, CUdeviceptr s, size_t n) { return cuMemcpy(d, s, n); }
CUresult cuMemcpyAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) {
  return copy(P(d), P(s), n, cudaMemcpyDefault, st, true);
}
CUresult cuMemcpyAsync_ptsz(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) { return cuMemcpyAsync(d, s, n, st); }
CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void* s, size_t n) {
  return copy(P(d), s, n, cudaMemcpyHostToDevice, nullptr, false);
}
CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr d, const void* s, size_t n) { return cuMemcpyHtoD_v2(d, s, n); }
CUresult cuMemcpyDtoH_v2(void* d, CUdeviceptr s, size_t n) {
  return copy(d, P(s), n, cudaMemcpyDeviceToHost, nullptr, false);
}
CUresult cuMemcpyDtoH_v2_ptds(void* d, CUdeviceptr s, size_t n) { return cuMemcpyDtoH_v2(d, s, n); }
CUresult cuMemcpyDtoD_v2(CUdeviceptr d, CUdeviceptr s, size_t n) {
  return copy(P(d), P(s), n, cudaMemcpyDeviceToDevice, nullptr, false);
}
CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr d, CUdeviceptr s, size_t n) { return cuMemcpyDtoD_v2(d, s, n); }
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void* s, size_t n, CUstream st) {
  return copy(P(d), s, n, cudaMemcpyHostToDevice, st, true);
}
CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr d, const void* s, size_t n, CUstream st) {
  return cuMemcpyHtoDAsync_v2(d, s, n, st);
}
CUresult cuMemcpyDtoHAsync_v2(void* d, CUdeviceptr s, size_t n, CUstream st) {
  return copy(d, P(s), n, cudaMemcpyDeviceToHost, st, true);
}
CUresult cuMemcpyDtoHAsync_v2_ptsz(void* d, CUdeviceptr s, size_t n, CUstream st) {
  return cuMemcpyDtoHAsync_v2(d, s, n, st);
}
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) {
  return copy(P(d), P(s), n, cudaMemcpyDeviceToDevice, st, true);
}
CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) {
  return cuMemcpyDtoDAsync_v2(d, s, n, st);
}
CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D* c) { return copy2d(c, nullptr, false); }
CUresult cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D* c) { return copy2d(c, nullptr, false); }
CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D* c) { return copy2d(c, nullptr, false); }
CUresult cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D* c) { return copy2d(c, nullptr, false); }
CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D* c, CUstream s) { return copy2d(c, s, true); }
CUresult cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D* c, CUstream s) { return copy2d(c, s, true); }
CUresult cuMemcpy3D_v2(const CUDA_MEMCPY3D* c) { return copy3d(c, nullptr, false); }
CUresult cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D* c) { return copy3d(c, nullptr, false); }
CUresult cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D* c, CUstream s) { return copy3d(c, s, true); }
CUresult cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D* c, CUstream s) { return copy3d(c, s, true); }

// One device, one context: a peer copy is a device-to-device copy.
CUresult cuMemcpyPeer(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n) {
  WH_INIT();
  if ((dc && !valid_context(dc)) || (sc && !valid_context(sc))) return CUDA_ERROR_INVALID_CONTEXT;
  return copy(P(d), P(s), n, cudaMemcpyDeviceToDevice, nullptr, false);
}
CUresult cuMemcpyPeer_ptds(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n) {
  return cuMemcpyPeer(d, dc, s, sc, n);
}
CUresult cuMemcpyPeerAsync(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n, CUstream st) {
  WH_INIT();
  if ((dc && !valid_context(dc)) || (sc && !valid_context(sc))) return CUDA_ERROR_INVALID_CONTEXT;
  return copy(P(d), P(s), n, cudaMemcpyDeviceToDevice, st, true);
}
CUresult cuMemcpyPeerAsync_ptsz(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n, CUstream st) {
  return cuMemcpyPeerAsync(d, dc, s, sc, n, st);
}

// ---- managed memory hints (CUmemLocation and cudaMemLocation, CUmem_advise
// and cudaMemoryAdvise share their layouts and numbering)
CUresult cuMemPrefetchAsync_v2(CUdeviceptr d, size_t n, CUmemLocation loc, unsigned flags, CUstream s) {
  WH_INIT();
  cudaMemLocation l{cudaMemLocationType(loc.type), loc.id};
  return rt(cudaMemPrefetchAsync(P(d), n, l, flags, S(s)));
}
CUresult cuMemPrefetchAsync_v2_ptsz(CUdeviceptr d, size_t n, CUmemLocation loc, unsigned flags, CUstream s) {
  return cuMemPrefetchAsync_v2(d, n, loc, flags, s);
}
CUresult cuStreamAttachMemAsync(CUstream s, CUdeviceptr d, size_t length, unsigned flags) {
  WH_INIT();
  return rt(cudaStreamAttachMemAsync(S(s), P(d), length, flags));
}
CUresult cuStreamAttachMemAsync_ptsz(CUstream s, CUdeviceptr d, size_t length, unsigned flags) {
  return cuStreamAttachMemAsync(s, d, length, flags);
}
CUresult cuMemAdvise_v2(CUdeviceptr d, size_t n, CUmem_advise advice, CUmemLocation loc) {
  WH_INIT();
  cudaMemLocation l{cudaMemLocationType(loc.type), loc.id};
  return rt(cudaMemAdvise(P(d), n, cudaMemoryAdvise(advice), l));
}

// ---- fills
CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n) { return fill(d, 0, v, 1, n, 1, nullptr, false); }
CUresult cuMemsetD16_v2(CUdeviceptr d, unsigned short v, size_t n) { return fill(d, 0, v, 2, n, 1, nullptr, false); }
CUresult cuMemsetD32_v2(CUdeviceptr d, unsigned int v, size_t n) { return fill(d, 0, v, 4, n, 1, nullptr, false); }
CUresult cuMemsetD8_v2_ptds(CUdeviceptr d, unsigned char v, size_t n) { return cuMemsetD8_v2(d, v, n); }
CUresult cuMemsetD16_v2_ptds(CUdeviceptr d, unsigned short v, size_t n) { return cuMemsetD16_v2(d, v, n); }
CUresult cuMemsetD32_v2_ptds(CUdeviceptr d, unsigned int v, size_t n) { return cuMemsetD32_v2(d, v, n); }
CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream s) { return fill(d, 0, v, 1, n, 1, s, true); }
CUresult cuMemsetD16Async(CUdeviceptr d, unsigned short v, size_t n, CUstream s) { return fill(d, 0, v, 2, n, 1, s, true); }
CUresult cuMemsetD32Async(CUdeviceptr d, unsigned int v, size_t n, CUstream s) { return fill(d, 0, v, 4, n, 1, s, true); }
CUresult cuMemsetD8Async_ptsz(CUdeviceptr d, unsigned char v, size_t n, CUstream s) { return cuMemsetD8Async(d, v, n, s); }
CUresult cuMemsetD16Async_ptsz(CUdeviceptr d, unsigned short v, size_t n, CUstream s) { return cuMemsetD16Async(d, v, n, s); }
CUresult cuMemsetD32Async_ptsz(CUdeviceptr d, unsigned int v, size_t n, CUstream s) { return cuMemsetD32Async(d, v, n, s); }
CUresult cuMemsetD2D8_v2(CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t h) {
  return fill(d, pitch, v, 1, w, h, nullptr, false);
}
CUresult cuMemsetD2D16_v2(CUdeviceptr d, size_t pitch, unsigned short v, size_t w, size_t h) {
  return fill(d, pitch, v, 2, w, h, nullptr, false);
}
CUresult cuMemsetD2D32_v2(CUdeviceptr d, size_t pitch, unsigned int v, size_t w, size_t h) {
  return fill(d, pitch, v, 4, w, h, nullptr, false);
}
CUresult cuMemsetD2D8_v2_ptds(CUdeviceptr d, size_t p, unsigned char v, size_t w, size_t h) { return cuMemsetD2D8_v2(d, p, v, w, h); }
CUresult cuMemsetD2D16_v2_ptds(CUdeviceptr d, size_t p, unsigned short v, size_t w, size_t h) { return cuMemsetD2D16_v2(d, p, v, w, h); }
CUresult cuMemsetD2D32_v2_ptds(CUdeviceptr d, size_t p, unsigned int v, size_t w, size_t h) { return cuMemsetD2D32_v2(d, p, v, w, h); }
CUresult cuMemsetD2D8Async(CUdeviceptr d, size_t p, unsigned char v, size_t w, size_t h, CUstream s) {
  return fill(d, p, v, 1, w, h, s, true);
}
CUresult cuMemsetD2D16Async(CUdeviceptr d, size_t p, unsigned short v, size_t w, size_t h, CUstream s) {
  return fill(d, p, v, 2, w, h, s, true);
}
CUresult cuMemsetD2D32Async(CUdeviceptr d, size_t p, unsigned int v, size_t w, size_t h, CUstream s) {
  return fill(d, p, v, 4, w, h, s, true);
}
CUresult cuMemsetD2D8Async_ptsz(CUdeviceptr d, size_t p, unsigned char v, size_t w, size_t h, CUstream s) { return cuMemsetD2D8Async(d, p, v, w, h, s); }
CUresult cuMemsetD2D16Async_ptsz(CUdeviceptr d, size_t p, unsigned short v, size_t w, size_t h, CUstream s) { return cuMemsetD2D16Async(d, p, v, w, h, s); }
CUresult cuMemsetD2D32Async_ptsz(CUdeviceptr d, size_t p, unsigned int v, size_t w, size_t h, CUstream s) { return cuMemsetD2D32Async(d, p, v, w, h, s); }

// ---- pointer attributes
CUresult cuPointerGetAttribute(void* data, CUpointer_attribute a, CUdeviceptr ptr) {
  WH_INIT();
  if (!data) return CUDA_ERROR_INVALID_VALUE;
  cudaPointerAttributes pa{};
  if (cudaError_t e = cudaPointerGetAttributes(&pa, P(ptr)); e != cudaSuccess) return rt(e);
  const bool device = pa.type == cudaMemoryTypeDevice || pa.type == cudaMemoryTypeManaged;
  const bool host = pa.type == cudaMemoryTypeHost;
  uint64_t base = 0, size = 0;
  switch (a) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
      if (!device && !host) return CUDA_ERROR_INVALID_VALUE;
      *static_cast<CUcontext*>(data) = primary();
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      if (!device && !host) return CUDA_ERROR_INVALID_VALUE;
      *static_cast<CUmemorytype*>(data) = host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
      if (!pa.devicePointer) return CUDA_ERROR_INVALID_VALUE;
      *static_cast<CUdeviceptr*>(data) = CUdeviceptr(uintptr_t(pa.devicePointer));
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
      if (!pa.hostPointer) return CUDA_ERROR_INVALID_VALUE;
      *static_cast<void**>(data) = pa.hostPointer;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
      *static_cast<int*>(data) = pa.type == cudaMemoryTypeManaged;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      if (!device && !host) return CUDA_ERROR_INVALID_VALUE;
      *static_cast<int*>(data) = pa.device;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
      *static_cast<int*>(data) = 1;  // copies on this device are always synchronous with respect to memory
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
      if (wh_guest_allocation_of(ptr, &base, &size) != cudaSuccess) return CUDA_ERROR_INVALID_VALUE;
      *static_cast<unsigned long long*>(data) = base;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
      if (wh_guest_allocation_of(ptr, &base, &size) != cudaSuccess) return CUDA_ERROR_INVALID_VALUE;
      if (a == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR) *static_cast<CUdeviceptr*>(data) = base;
      else *static_cast<size_t*>(data) = size;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED:
      *static_cast<int*>(data) = device || host;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}
CUresult cuPointerGetAttributes(unsigned n, CUpointer_attribute* attrs, void** data, CUdeviceptr ptr) {
  WH_INIT();
  if (!n || !attrs || !data) return CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; i < n; i++) {
    if (!data[i]) return CUDA_ERROR_INVALID_VALUE;
    // Unknown or inapplicable attributes leave their slot as the driver
    // does for an unregistered pointer: zeroed (memory type 0, context NULL).
    if (cuPointerGetAttribute(data[i], attrs[i], ptr) != CUDA_SUCCESS) {
      switch (attrs[i]) {
        case CU_POINTER_ATTRIBUTE_CONTEXT: *static_cast<CUcontext*>(data[i]) = nullptr; break;
        case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: *static_cast<unsigned*>(data[i]) = 0; break;
        case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: *static_cast<CUdeviceptr*>(data[i]) = 0; break;
        case CU_POINTER_ATTRIBUTE_HOST_POINTER: *static_cast<void**>(data[i]) = nullptr; break;
        case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *static_cast<int*>(data[i]) = -2; break;
        case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *static_cast<size_t*>(data[i]) = 0; break;
        case CU_POINTER_ATTRIBUTE_BUFFER_ID: *static_cast<unsigned long long*>(data[i]) = 0; break;
        default: *static_cast<int*>(data[i]) = 0; break;
      }
    }
  }
  return CUDA_SUCCESS;
}

// ---- streams
CUresult cuStreamCreate(CUstream* s, unsigned flags) {
  WH_INIT();
  return rt(cudaStreamCreateWithFlags(reinterpret_cast<cudaStream_t*>(s), flags));
}
CUresult cuStreamCreateWithPriority(CUstream* s, unsigned flags, int priority) {
  WH_INIT();
  return rt(cudaStreamCreateWithPriority(reinterpret_cast<cudaStream_t*>(s), flags, priority));
}
CUresult cuStreamDestroy_v2(CUstream s) {
  WH_INIT();
  return rt(cudaStreamDestroy(S(s)));
}
CUresult cuStreamDestroy(CUstream s) { return cuStreamDestroy_v2(s); }
CUresult cuStreamSynchronize(CUstream s) {
  WH_INIT();
  return rt(cudaStreamSynchronize(S(s)));
}
CUresult cuStreamSynchronize_ptsz(CUstream s) { return cuStreamSynchronize(s); }
CUresult cuStreamQuery(CUstream s) {
  WH_INIT();
  return rt(cudaStreamQuery(S(s)));
}
CUresult cuStreamQuery_ptsz(CUstream s) { return cuStreamQuery(s); }
CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned flags) {
  WH_INIT();
  return rt(cudaStreamWaitEvent(S(s), E(e), flags));
}
CUresult cuStreamWaitEvent_ptsz(CUstream s, CUevent e, unsigned flags) { return cuStreamWaitEvent(s, e, flags); }
CUresult cuStreamGetPriority(CUstream s, int* p) {
  WH_INIT();
  return rt(cudaStreamGetPriority(S(s), p));
}
CUresult cuStreamGetPriority_ptsz(CUstream s, int* p) { return cuStreamGetPriority(s, p); }
CUresult cuStreamGetCtx(CUstream, CUcontext* c) {
  WH_INIT();
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  *c = primary();
  return CUDA_SUCCESS;
}
CUresult cuStreamGetCtx_ptsz(CUstream s, CUcontext* c) { return cuStreamGetCtx(s, c); }
CUresult cuStreamGetCtx_v2(CUstream, CUcontext* c, CUgreenCtx* g) {
  WH_INIT();
  if (!c || !g) return CUDA_ERROR_INVALID_VALUE;
  *c = primary();
  *g = nullptr;  // no green contexts
  return CUDA_SUCCESS;
}
CUresult cuStreamGetCtx_v2_ptsz(CUstream s, CUcontext* c, CUgreenCtx* g) { return cuStreamGetCtx_v2(s, c, g); }
CUresult cuStreamGetDevice(CUstream, CUdevice* d) {
  WH_INIT();
  if (!d) return CUDA_ERROR_INVALID_VALUE;
  *d = 0;
  return CUDA_SUCCESS;
}
CUresult cuStreamGetDevice_ptsz(CUstream s, CUdevice* d) { return cuStreamGetDevice(s, d); }
// CUstreamCallback and cudaStreamCallback_t differ only in their status type (same values for success).
CUresult cuStreamAddCallback(CUstream s, CUstreamCallback fn, void* data, unsigned flags) {
  WH_INIT();
  return rt(cudaStreamAddCallback(S(s), reinterpret_cast<cudaStreamCallback_t>(fn), data, flags));
}
CUresult cuStreamAddCallback_ptsz(CUstream s, CUstreamCallback fn, void* data, unsigned flags) {
  return cuStreamAddCallback(s, fn, data, flags);
}
CUresult cuLaunchHostFunc(CUstream s, CUhostFn fn, void* data) {
  WH_INIT();
  return rt(cudaLaunchHostFunc(S(s), fn, data));
}
CUresult cuLaunchHostFunc_ptsz(CUstream s, CUhostFn fn, void* data) { return cuLaunchHostFunc(s, fn, data); }

// ---- events
CUresult cuEventCreate(CUevent* e, unsigned flags) {
  WH_INIT();
  return rt(cudaEventCreateWithFlags(reinterpret_cast<cudaEvent_t*>(e), flags));  // CU_EVENT_* == cudaEvent*
}
CUresult cuEventRecord(CUevent e, CUstream s) {
  WH_INIT();
  return rt(cudaEventRecord(E(e), S(s)));
}
CUresult cuEventRecord_ptsz(CUevent e, CUstream s) { return cuEventRecord(e, s); }
CUresult cuEventRecordWithFlags(CUevent e, CUstream s, unsigned flags) {
  WH_INIT();
  return rt(cudaEventRecordWithFlags(E(e), S(s), flags));
}
CUresult cuEventRecordWithFlags_ptsz(CUevent e, CUstream s, unsigned flags) { return cuEventRecordWithFlags(e, s, flags); }
CUresult cuEventQuery(CUevent e) {
  WH_INIT();
  return rt(cudaEventQuery(E(e)));
}
CUresult cuEventSynchronize(CUevent e) {
  WH_INIT();
  return rt(cudaEventSynchronize(E(e)));
}
CUresult cuEventDestroy_v2(CUevent e) {
  WH_INIT();
  return rt(cudaEventDestroy(E(e)));
}
CUresult cuEventDestroy(CUevent e) { return cuEventDestroy_v2(e); }
CUresult cuEventElapsedTime_v2(float* ms, CUevent a, CUevent b) {
  WH_INIT();
  return rt(cudaEventElapsedTime(ms, E(a), E(b)));
}
CUresult cuEventElapsedTime(float* ms, CUevent a, CUevent b) { return cuEventElapsedTime_v2(ms, a, b); }

// ---- stream capture and graphs (the runtime's graphs)
CUresult cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode mode) {
  WH_INIT();
  return rt(cudaStreamBeginCapture(S(s), cudaStreamCaptureMode(mode)));
}
CUresult cuStreamBeginCapture_v2_ptsz(CUstream s, CUstreamCaptureMode mode) { return cuStreamBeginCapture_v2(s, mode); }
CUresult cuStreamBeginCapture(CUstream s) { return cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL); }
CUresult cuStreamBeginCapture_ptsz(CUstream s) { return cuStreamBeginCapture(s); }
CUresult cuStreamEndCapture(CUstream s, CUgraph* g) {
  WH_INIT();
  return rt(cudaStreamEndCapture(S(s), reinterpret_cast<cudaGraph_t*>(g)));
}
CUresult cuStreamEndCapture_ptsz(CUstream s, CUgraph* g) { return cuStreamEndCapture(s, g); }
CUresult cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus* st) {
  WH_INIT();
  return rt(cudaStreamIsCapturing(S(s), reinterpret_cast<cudaStreamCaptureStatus*>(st)));
}
CUresult cuStreamIsCapturing_ptsz(CUstream s, CUstreamCaptureStatus* st) { return cuStreamIsCapturing(s, st); }
CUresult cuGraphCreate(CUgraph* g, unsigned flags) {
  WH_INIT();
  return rt(cudaGraphCreate(reinterpret_cast<cudaGraph_t*>(g), flags));
}
CUresult cuGraphDestroy(CUgraph g) {
  WH_INIT();
  return rt(cudaGraphDestroy(reinterpret_cast<cudaGraph_t>(g)));
}
// User objects: the runtime's (guest only), one kind of handle for both APIs.
CUresult cuUserObjectCreate(CUuserObject* o, void* ptr, CUhostFn destroy, unsigned initial, unsigned flags) {
  WH_INIT();
  return rt(cudaUserObjectCreate(reinterpret_cast<cudaUserObject_t*>(o), ptr, destroy, initial, flags));
}
CUresult cuUserObjectRetain(CUuserObject o, unsigned count) {
  WH_INIT();
  return rt(cudaUserObjectRetain(reinterpret_cast<cudaUserObject_t>(o), count));
}
CUresult cuUserObjectRelease(CUuserObject o, unsigned count) {
  WH_INIT();
  return rt(cudaUserObjectRelease(reinterpret_cast<cudaUserObject_t>(o), count));
}
CUresult cuGraphRetainUserObject(CUgraph g, CUuserObject o, unsigned count, unsigned flags) {
  WH_INIT();
  return rt(cudaGraphRetainUserObject(reinterpret_cast<cudaGraph_t>(g), reinterpret_cast<cudaUserObject_t>(o), count,
                                      flags));
}
CUresult cuGraphReleaseUserObject(CUgraph g, CUuserObject o, unsigned count) {
  WH_INIT();
  return rt(cudaGraphReleaseUserObject(reinterpret_cast<cudaGraph_t>(g), reinterpret_cast<cudaUserObject_t>(o),
                                       count));
}
CUresult cuGraphInstantiateWithFlags(CUgraphExec* x, CUgraph g, unsigned long long flags) {
  WH_INIT();
  return rt(cudaGraphInstantiateWithFlags(reinterpret_cast<cudaGraphExec_t*>(x), reinterpret_cast<cudaGraph_t>(g),
                                          flags));
}
CUresult cuGraphLaunch(CUgraphExec x, CUstream s) {
  WH_INIT();
  return rt(cudaGraphLaunch(reinterpret_cast<cudaGraphExec_t>(x), S(s)));
}
CUresult cuGraphLaunch_ptsz(CUgraphExec x, CUstream s) { return cuGraphLaunch(x, s); }
CUresult cuGraphUpload(CUgraphExec x, CUstream s) {
  WH_INIT();
  return rt(cudaGraphUpload(reinterpret_cast<cudaGraphExec_t>(x), S(s)));
}
CUresult cuGraphUpload_ptsz(CUgraphExec x, CUstream s) { return cuGraphUpload(x, s); }
CUresult cuGraphExecDestroy(CUgraphExec x) {
  WH_INIT();
  return rt(cudaGraphExecDestroy(reinterpret_cast<cudaGraphExec_t>(x)));
}

}  // extern "C"

// ---- explicit graphs: nodes of the runtime's graphs (CUgraphNode is
// cudaGraphNode_t); a kernel node takes a CUfunction or CUkernel.
namespace {
CUresult kernel_node_params(const CUDA_KERNEL_NODE_PARAMS* p, cudaKernelNodeParams* r) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  *r = cudaKernelNodeParams{};
  r->func = p->func ? static_cast<void*>(p->func) : static_cast<void*>(p->kern);
  if (!r->func) return CUDA_ERROR_INVALID_HANDLE;
  r->gridDim = dim3(p->gridDimX, p->gridDimY, p->gridDimZ);
  r->blockDim = dim3(p->blockDimX, p->blockDimY, p->blockDimZ);
  r->sharedMemBytes = p->sharedMemBytes;
  r->kernelParams = p->kernelParams;
  r->extra = p->extra;
  return CUDA_SUCCESS;
}
inline cudaGraph_t G(CUgraph g) { return reinterpret_cast<cudaGraph_t>(g); }
inline cudaGraphNode_t* N(CUgraphNode* n) { return reinterpret_cast<cudaGraphNode_t*>(n); }
inline const cudaGraphNode_t* N(const CUgraphNode* n) { return reinterpret_cast<const cudaGraphNode_t*>(n); }
}  // namespace

extern "C" {

CUresult cuGraphAddKernelNode_v2(CUgraphNode* out, CUgraph g, const CUgraphNode* deps, size_t n,
                                 const CUDA_KERNEL_NODE_PARAMS* p) {
  WH_INIT();
  cudaKernelNodeParams r;
  if (CUresult e = kernel_node_params(p, &r); e != CUDA_SUCCESS) return e;
  return rt(cudaGraphAddKernelNode(N(out), G(g), N(deps), n, &r));
}
CUresult cuGraphKernelNodeSetParams_v2(CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS* p) {
  WH_INIT();
  cudaKernelNodeParams r;
  if (CUresult e = kernel_node_params(p, &r); e != CUDA_SUCCESS) return e;
  return rt(cudaGraphKernelNodeSetParams(reinterpret_cast<cudaGraphNode_t>(node), &r));
}
CUresult cuGraphKernelNodeGetParams_v2(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS* p) {
  WH_INIT();
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  cudaKernelNodeParams r{};
  if (cudaError_t e = cudaGraphKernelNodeGetParams(reinterpret_cast<cudaGraphNode_t>(node), &r); e != cudaSuccess)
    return rt(e);
  *p = CUDA_KERNEL_NODE_PARAMS{};
  // A CUkernel and its CUfunction are one handle here: both fields carry it,
  // so a caller that added the node with either finds its own back.
  p->func = static_cast<CUfunction>(r.func);
  p->kern = static_cast<CUkernel>(r.func);
  p->ctx = primary();
  p->gridDimX = r.gridDim.x, p->gridDimY = r.gridDim.y, p->gridDimZ = r.gridDim.z;
  p->blockDimX = r.blockDim.x, p->blockDimY = r.blockDim.y, p->blockDimZ = r.blockDim.z;
  p->sharedMemBytes = r.sharedMemBytes;
  p->kernelParams = r.kernelParams;
  return CUDA_SUCCESS;
}
CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec x, CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS* p) {
  WH_INIT();
  cudaKernelNodeParams r;
  if (CUresult e = kernel_node_params(p, &r); e != CUDA_SUCCESS) return e;
  return rt(cudaGraphExecKernelNodeSetParams(reinterpret_cast<cudaGraphExec_t>(x),
                                             reinterpret_cast<cudaGraphNode_t>(node), &r));
}
CUresult cuGraphAddMemsetNode(CUgraphNode* out, CUgraph g, const CUgraphNode* deps, size_t n,
                              const CUDA_MEMSET_NODE_PARAMS* p, CUcontext ctx) {
  WH_INIT();
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  if (ctx && !valid_context(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  cudaMemsetParams r{};
  r.dst = P(p->dst), r.pitch = p->pitch, r.value = p->value, r.elementSize = p->elementSize;
  r.width = p->width, r.height = p->height;
  return rt(cudaGraphAddMemsetNode(N(out), G(g), N(deps), n, &r));
}
CUresult cuGraphAddHostNode(CUgraphNode* out, CUgraph g, const CUgraphNode* deps, size_t n,
                            const CUDA_HOST_NODE_PARAMS* p) {
  WH_INIT();
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  cudaHostNodeParams r{p->fn, p->userData};
  return rt(cudaGraphAddHostNode(N(out), G(g), N(deps), n, &r));
}
// Graph memory nodes: the runtime keeps graph memory (graph_model.cpp); the driver
// structures are field-for-field the runtime's.
static_assert(sizeof(CUmemAccessDesc) == sizeof(cudaMemAccessDesc));
CUresult cuGraphAddMemAllocNode(CUgraphNode* out, CUgraph g, const CUgraphNode* deps, size_t n,
                                CUDA_MEM_ALLOC_NODE_PARAMS* p) {
  WH_INIT();
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  cudaMemAllocNodeParams r{};
  r.poolProps.allocType = cudaMemAllocationType(p->poolProps.allocType);
  r.poolProps.handleTypes = cudaMemAllocationHandleType(p->poolProps.handleTypes);
  r.poolProps.location.type = cudaMemLocationType(p->poolProps.location.type);
  r.poolProps.location.id = p->poolProps.location.id;
  r.accessDescs = reinterpret_cast<const cudaMemAccessDesc*>(p->accessDescs);
  r.accessDescCount = p->accessDescCount;
  r.bytesize = p->bytesize;
  CUresult e = rt(cudaGraphAddMemAllocNode(N(out), G(g), N(deps), n, &r));
  if (e == CUDA_SUCCESS) p->dptr = CUdeviceptr(uintptr_t(r.dptr));
  return e;
}
CUresult cuGraphMemAllocNodeGetParams(CUgraphNode node, CUDA_MEM_ALLOC_NODE_PARAMS* p) {
  WH_INIT();
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  cudaMemAllocNodeParams r{};
  if (CUresult e = rt(cudaGraphMemAllocNodeGetParams(reinterpret_cast<cudaGraphNode_t>(node), &r)); e != CUDA_SUCCESS)
    return e;
  *p = CUDA_MEM_ALLOC_NODE_PARAMS{};
  p->poolProps.allocType = CUmemAllocationType(r.poolProps.allocType);
  p->poolProps.handleTypes = CUmemAllocationHandleType(r.poolProps.handleTypes);
  p->poolProps.location.type = CUmemLocationType(r.poolProps.location.type);
  p->poolProps.location.id = r.poolProps.location.id;
  p->bytesize = r.bytesize;
  p->dptr = CUdeviceptr(uintptr_t(r.dptr));
  return CUDA_SUCCESS;
}
CUresult cuGraphAddMemFreeNode(CUgraphNode* out, CUgraph g, const CUgraphNode* deps, size_t n, CUdeviceptr d) {
  WH_INIT();
  return rt(cudaGraphAddMemFreeNode(N(out), G(g), N(deps), n, P(d)));
}
CUresult cuGraphMemFreeNodeGetParams(CUgraphNode node, CUdeviceptr* d) {
  WH_INIT();
  if (!d) return CUDA_ERROR_INVALID_VALUE;
  void* p = nullptr;
  if (CUresult e = rt(cudaGraphMemFreeNodeGetParams(reinterpret_cast<cudaGraphNode_t>(node), &p)); e != CUDA_SUCCESS)
    return e;
  *d = CUdeviceptr(uintptr_t(p));
  return CUDA_SUCCESS;
}
// CUgraphMem_attribute and cudaGraphMemAttributeType share their numbering.
CUresult cuDeviceGetGraphMemAttribute(CUdevice dev, CUgraphMem_attribute a, void* v) {
  WH_INIT();
  return rt(cudaDeviceGetGraphMemAttribute(int(dev), cudaGraphMemAttributeType(a), v));
}
CUresult cuDeviceSetGraphMemAttribute(CUdevice dev, CUgraphMem_attribute a, void* v) {
  WH_INIT();
  return rt(cudaDeviceSetGraphMemAttribute(int(dev), cudaGraphMemAttributeType(a), v));
}
CUresult cuDeviceGraphMemTrim(CUdevice dev) {
  WH_INIT();
  return rt(cudaDeviceGraphMemTrim(int(dev)));
}
CUresult cuStreamSetAttribute(CUstream s, CUstreamAttrID id, const CUstreamAttrValue* v) {
  WH_INIT();
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  return rt(cudaStreamSetAttribute(S(s), cudaStreamAttrID(id), reinterpret_cast<const cudaStreamAttrValue*>(v)));
}
CUresult cuStreamSetAttribute_ptsz(CUstream s, CUstreamAttrID id, const CUstreamAttrValue* v) {
  return cuStreamSetAttribute(s, id, v);
}
CUresult cuStreamGetAttribute(CUstream s, CUstreamAttrID id, CUstreamAttrValue* v) {
  WH_INIT();
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  return rt(cudaStreamGetAttribute(S(s), cudaStreamAttrID(id), reinterpret_cast<cudaStreamAttrValue*>(v)));
}
CUresult cuStreamGetAttribute_ptsz(CUstream s, CUstreamAttrID id, CUstreamAttrValue* v) {
  return cuStreamGetAttribute(s, id, v);
}
CUresult cuMemRangeGetAttribute(void* data, size_t bytes, CUmem_range_attribute a, CUdeviceptr p, size_t n) {
  WH_INIT();
  return rt(cudaMemRangeGetAttribute(data, bytes, cudaMemRangeAttribute(a), P(p), n));
}
CUresult cuMemRangeGetAttributes(void** data, size_t* bytes, CUmem_range_attribute* a, size_t na, CUdeviceptr p,
                                 size_t n) {
  WH_INIT();
  return rt(cudaMemRangeGetAttributes(data, bytes, reinterpret_cast<cudaMemRangeAttribute*>(a), na, P(p), n));
}
CUresult cuGraphAddMemcpyNode(CUgraphNode* out, CUgraph g, const CUgraphNode* deps, size_t n, const CUDA_MEMCPY3D* c,
                              CUcontext ctx) {
  WH_INIT();
  if (ctx && !valid_context(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  cudaMemcpy3DParms p;
  if (CUresult r = params3d(c, &p); r != CUDA_SUCCESS) return r;
  return rt(cudaGraphAddMemcpyNode(N(out), G(g), N(deps), n, &p));
}
CUresult cuGraphAddChildGraphNode(CUgraphNode* out, CUgraph g, const CUgraphNode* deps, size_t n, CUgraph child) {
  WH_INIT();
  return rt(cudaGraphAddChildGraphNode(N(out), G(g), N(deps), n, G(child)));
}
CUresult cuGraphAddEventRecordNode(CUgraphNode* out, CUgraph g, const CUgraphNode* deps, size_t n, CUevent e) {
  WH_INIT();
  return rt(cudaGraphAddEventRecordNode(N(out), G(g), N(deps), n, E(e)));
}
CUresult cuGraphAddEventWaitNode(CUgraphNode* out, CUgraph g, const CUgraphNode* deps, size_t n, CUevent e) {
  WH_INIT();
  return rt(cudaGraphAddEventWaitNode(N(out), G(g), N(deps), n, E(e)));
}
CUresult cuGraphGetEdges_v2(CUgraph g, CUgraphNode* from, CUgraphNode* to, CUgraphEdgeData* edges, size_t* n) {
  WH_INIT();
  return rt(cudaGraphGetEdges(G(g), N(from), N(to), reinterpret_cast<cudaGraphEdgeData*>(edges), n));
}
CUresult cuGraphGetEdges(CUgraph g, CUgraphNode* from, CUgraphNode* to, size_t* n) {
  return cuGraphGetEdges_v2(g, from, to, nullptr, n);
}
CUresult cuGraphNodeGetDependentNodes_v2(CUgraphNode node, CUgraphNode* out, CUgraphEdgeData* edges, size_t* n) {
  WH_INIT();
  return rt(cudaGraphNodeGetDependentNodes(reinterpret_cast<cudaGraphNode_t>(node), N(out),
                                           reinterpret_cast<cudaGraphEdgeData*>(edges), n));
}
CUresult cuGraphNodeGetDependentNodes(CUgraphNode node, CUgraphNode* out, size_t* n) {
  return cuGraphNodeGetDependentNodes_v2(node, out, nullptr, n);
}
CUresult cuGraphNodeFindInClone(CUgraphNode* out, CUgraphNode original, CUgraph clone) {
  WH_INIT();
  return rt(cudaGraphNodeFindInClone(N(out), reinterpret_cast<cudaGraphNode_t>(original), G(clone)));
}
CUresult cuGraphAddEmptyNode(CUgraphNode* out, CUgraph g, const CUgraphNode* deps, size_t n) {
  WH_INIT();
  return rt(cudaGraphAddEmptyNode(N(out), G(g), N(deps), n));
}
CUresult cuGraphAddDependencies_v2(CUgraph g, const CUgraphNode* from, const CUgraphNode* to,
                                   const CUgraphEdgeData* edges, size_t n) {
  WH_INIT();
  return rt(cudaGraphAddDependencies(G(g), N(from), N(to), reinterpret_cast<const cudaGraphEdgeData*>(edges), n));
}
CUresult cuGraphGetNodes(CUgraph g, CUgraphNode* nodes, size_t* n) {
  WH_INIT();
  return rt(cudaGraphGetNodes(G(g), N(nodes), n));
}
// CUgraphNodeType and cudaGraphNodeType share their numbering.
CUresult cuGraphNodeGetType(CUgraphNode node, CUgraphNodeType* t) {
  WH_INIT();
  return rt(cudaGraphNodeGetType(reinterpret_cast<cudaGraphNode_t>(node), reinterpret_cast<cudaGraphNodeType*>(t)));
}

}  // extern "C"

// ---- capture queries and graph utilities: the runtime's (the driver's
// structs share the runtime's layouts here).
extern "C" {

CUresult cuStreamGetCaptureInfo_v3(CUstream s, CUstreamCaptureStatus* st, cuuint64_t* id, CUgraph* g,
                                   const CUgraphNode** deps, const CUgraphEdgeData** edges, size_t* n) {
  WH_INIT();
  static_assert(sizeof(cuuint64_t) == sizeof(unsigned long long));
  return rt(cudaStreamGetCaptureInfo(S(s), reinterpret_cast<cudaStreamCaptureStatus*>(st),
                                     reinterpret_cast<unsigned long long*>(id), reinterpret_cast<cudaGraph_t*>(g),
                                     reinterpret_cast<const cudaGraphNode_t**>(deps),
                                     reinterpret_cast<const cudaGraphEdgeData**>(edges), n));
}
CUresult cuStreamGetCaptureInfo_v3_ptsz(CUstream s, CUstreamCaptureStatus* st, cuuint64_t* id, CUgraph* g,
                                        const CUgraphNode** deps, const CUgraphEdgeData** edges, size_t* n) {
  return cuStreamGetCaptureInfo_v3(s, st, id, g, deps, edges, n);
}
CUresult cuStreamUpdateCaptureDependencies_v2(CUstream s, CUgraphNode* deps, const CUgraphEdgeData* edges, size_t n,
                                              unsigned flags) {
  WH_INIT();
  return rt(cudaStreamUpdateCaptureDependencies(S(s), reinterpret_cast<cudaGraphNode_t*>(deps),
                                                reinterpret_cast<const cudaGraphEdgeData*>(edges), n, flags));
}
CUresult cuStreamUpdateCaptureDependencies_v2_ptsz(CUstream s, CUgraphNode* deps, const CUgraphEdgeData* edges,
                                                   size_t n, unsigned flags) {
  return cuStreamUpdateCaptureDependencies_v2(s, deps, edges, n, flags);
}
CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode* mode) {
  WH_INIT();
  return rt(cudaThreadExchangeStreamCaptureMode(reinterpret_cast<cudaStreamCaptureMode*>(mode)));
}
CUresult cuGraphInstantiateWithParams(CUgraphExec* x, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS* p) {
  WH_INIT();
  static_assert(sizeof(CUDA_GRAPH_INSTANTIATE_PARAMS) == sizeof(cudaGraphInstantiateParams));
  return rt(cudaGraphInstantiateWithParams(reinterpret_cast<cudaGraphExec_t*>(x), reinterpret_cast<cudaGraph_t>(g),
                                           reinterpret_cast<cudaGraphInstantiateParams*>(p)));
}
CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec* x, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS* p) {
  return cuGraphInstantiateWithParams(x, g, p);
}
CUresult cuGraphExecUpdate_v2(CUgraphExec x, CUgraph g, CUgraphExecUpdateResultInfo* info) {
  WH_INIT();
  static_assert(sizeof(CUgraphExecUpdateResultInfo) == sizeof(cudaGraphExecUpdateResultInfo));
  return rt(cudaGraphExecUpdate(reinterpret_cast<cudaGraphExec_t>(x), reinterpret_cast<cudaGraph_t>(g),
                                reinterpret_cast<cudaGraphExecUpdateResultInfo*>(info)));
}
CUresult cuGraphClone(CUgraph* out, CUgraph g) {
  WH_INIT();
  return rt(cudaGraphClone(reinterpret_cast<cudaGraph_t*>(out), reinterpret_cast<cudaGraph_t>(g)));
}
CUresult cuGraphGetRootNodes(CUgraph g, CUgraphNode* nodes, size_t* n) {
  WH_INIT();
  return rt(cudaGraphGetRootNodes(reinterpret_cast<cudaGraph_t>(g), reinterpret_cast<cudaGraphNode_t*>(nodes), n));
}
CUresult cuGraphNodeGetDependencies_v2(CUgraphNode node, CUgraphNode* deps, CUgraphEdgeData* edges, size_t* n) {
  WH_INIT();
  return rt(cudaGraphNodeGetDependencies(reinterpret_cast<cudaGraphNode_t>(node), reinterpret_cast<cudaGraphNode_t*>(deps),
                                         reinterpret_cast<cudaGraphEdgeData*>(edges), n));
}
CUresult cuGraphDestroyNode(CUgraphNode node) {
  WH_INIT();
  return rt(cudaGraphDestroyNode(reinterpret_cast<cudaGraphNode_t>(node)));
}
CUresult cuGraphDebugDotPrint(CUgraph g, const char* path, unsigned flags) {
  WH_INIT();
  return rt(cudaGraphDebugDotPrint(reinterpret_cast<cudaGraph_t>(g), path, flags));
}

}  // extern "C"
