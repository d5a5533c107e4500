// CUDA arrays, copies to and from them, texture and surface objects: the
// runtime's implementations, with the driver's descriptors (formats and
// channel counts, flags) converted to the runtime's (channel descriptors).
#include <cstring>

#include "driver.hpp"

using namespace wh::driver;

namespace {

inline cudaArray_t A(CUarray a) { return reinterpret_cast<cudaArray_t>(a); }

bool desc_of(CUarray_format f, unsigned channels, cudaChannelFormatDesc* d) {
  int bits;
  cudaChannelFormatKind kind;
  switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8: bits = 8, kind = cudaChannelFormatKindUnsigned; break;
    case CU_AD_FORMAT_UNSIGNED_INT16: bits = 16, kind = cudaChannelFormatKindUnsigned; break;
    case CU_AD_FORMAT_UNSIGNED_INT32: bits = 32, kind = cudaChannelFormatKindUnsigned; break;
    case CU_AD_FORMAT_SIGNED_INT8: bits = 8, kind = cudaChannelFormatKindSigned; break;
    case CU_AD_FORMAT_SIGNED_INT16: bits = 16, kind = cudaChannelFormatKindSigned; break;
    case CU_AD_FORMAT_SIGNED_INT32: bits = 32, kind = cudaChannelFormatKindSigned; break;
    case CU_AD_FORMAT_HALF: bits = 16, kind = cudaChannelFormatKindFloat; break;
    case CU_AD_FORMAT_FLOAT: bits = 32, kind = cudaChannelFormatKindFloat; break;
    default: return false;
  }
  if (channels != 1 && channels != 2 && channels != 4) return false;
  *d = cudaChannelFormatDesc{bits, channels >= 2 ? bits : 0, channels == 4 ? bits : 0, channels == 4 ? bits : 0, kind};
  return true;
}

bool format_of(const cudaChannelFormatDesc& d, CUarray_format* f, unsigned* channels) {
  *channels = 1 + (d.y != 0) + (d.z != 0) + (d.w != 0);
  switch (d.f) {
    case cudaChannelFormatKindUnsigned:
      *f = d.x == 8 ? CU_AD_FORMAT_UNSIGNED_INT8 : d.x == 16 ? CU_AD_FORMAT_UNSIGNED_INT16 : CU_AD_FORMAT_UNSIGNED_INT32;
      return d.x == 8 || d.x == 16 || d.x == 32;
    case cudaChannelFormatKindSigned:
      *f = d.x == 8 ? CU_AD_FORMAT_SIGNED_INT8 : d.x == 16 ? CU_AD_FORMAT_SIGNED_INT16 : CU_AD_FORMAT_SIGNED_INT32;
      return d.x == 8 || d.x == 16 || d.x == 32;
    case cudaChannelFormatKindFloat:
      *f = d.x == 16 ? CU_AD_FORMAT_HALF : CU_AD_FORMAT_FLOAT;
      return d.x == 16 || d.x == 32;
    default: return false;
  }
}

// Bytes per row of an array (its width times its element size).
CUresult row_bytes(CUarray a, size_t* row) {
  cudaChannelFormatDesc d;
  cudaExtent e;
  unsigned flags;
  if (!a) return CUDA_ERROR_INVALID_VALUE;
  if (cudaError_t r = cudaArrayGetInfo(&d, &e, &flags, A(a)); r != cudaSuccess) return rt(r);
  *row = e.width * size_t(d.x + d.y + d.z + d.w) / 8;
  return *row ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

// A 1D range of an array: `off` bytes in, continuing over its rows.
CUresult array_copy(CUarray a, size_t off, void* lin, size_t n, bool to_array, cudaMemcpyKind k, CUstream s,
                    bool async) {
  WH_INIT();
  size_t row;
  if (CUresult r = row_bytes(a, &row); r != CUDA_SUCCESS) return r;
  const size_t x = off % row, y = off / row;
  auto st = reinterpret_cast<cudaStream_t>(s);
  cudaError_t e;
  if (to_array)
    e = async ? cudaMemcpyToArrayAsync(A(a), x, y, lin, n, k, st) : cudaMemcpyToArray(A(a), x, y, lin, n, k);
  else
    e = async ? cudaMemcpyFromArrayAsync(lin, A(a), x, y, n, k, st) : cudaMemcpyFromArray(lin, A(a), x, y, n, k);
  return rt(e);
}

CUresult res_of(const CUDA_RESOURCE_DESC* r, cudaResourceDesc* out, cudaChannelFormatDesc* fmt) {
  if (!r || r->flags) return CUDA_ERROR_INVALID_VALUE;
  std::memset(out, 0, sizeof *out);
  out->resType = cudaResourceType(r->resType);
  switch (r->resType) {
    case CU_RESOURCE_TYPE_ARRAY: {
      out->res.array.array = A(r->res.array.hArray);
      cudaExtent e;
      unsigned flags;
      if (cudaError_t x = cudaArrayGetInfo(fmt, &e, &flags, out->res.array.array); x != cudaSuccess) return rt(x);
      return CUDA_SUCCESS;
    }
    case CU_RESOURCE_TYPE_MIPMAPPED_ARRAY: {
      out->res.mipmap.mipmap = reinterpret_cast<cudaMipmappedArray_t>(r->res.mipmap.hMipmappedArray);
      cudaArray_t level0;
      if (cudaError_t x = cudaGetMipmappedArrayLevel(&level0, out->res.mipmap.mipmap, 0); x != cudaSuccess) return rt(x);
      cudaExtent e;
      unsigned flags;
      if (cudaError_t x = cudaArrayGetInfo(fmt, &e, &flags, level0); x != cudaSuccess) return rt(x);
      return CUDA_SUCCESS;
    }
    case CU_RESOURCE_TYPE_LINEAR:
      if (!desc_of(r->res.linear.format, r->res.linear.numChannels, fmt)) return CUDA_ERROR_INVALID_VALUE;
      out->res.linear.devPtr = reinterpret_cast<void*>(uintptr_t(r->res.linear.devPtr));
      out->res.linear.desc = *fmt;
      out->res.linear.sizeInBytes = r->res.linear.sizeInBytes;
      return CUDA_SUCCESS;
    case CU_RESOURCE_TYPE_PITCH2D:
      if (!desc_of(r->res.pitch2D.format, r->res.pitch2D.numChannels, fmt)) return CUDA_ERROR_INVALID_VALUE;
      out->res.pitch2D.devPtr = reinterpret_cast<void*>(uintptr_t(r->res.pitch2D.devPtr));
      out->res.pitch2D.desc = *fmt;
      out->res.pitch2D.width = r->res.pitch2D.width;
      out->res.pitch2D.height = r->res.pitch2D.height;
      out->res.pitch2D.pitchInBytes = r->res.pitch2D.pitchInBytes;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

// The runtime's resource description back in the driver's terms.
CUresult res_to_cu(const cudaResourceDesc& r, CUDA_RESOURCE_DESC* out) {
  std::memset(out, 0, sizeof *out);
  out->resType = CUresourcetype(r.resType);
  switch (r.resType) {
    case cudaResourceTypeArray:
      out->res.array.hArray = reinterpret_cast<CUarray>(r.res.array.array);
      return CUDA_SUCCESS;
    case cudaResourceTypeMipmappedArray:
      out->res.mipmap.hMipmappedArray = reinterpret_cast<CUmipmappedArray>(r.res.mipmap.mipmap);
      return CUDA_SUCCESS;
    case cudaResourceTypeLinear:
      if (!format_of(r.res.linear.desc, &out->res.linear.format, &out->res.linear.numChannels))
        return CUDA_ERROR_INVALID_VALUE;
      out->res.linear.devPtr = CUdeviceptr(uintptr_t(r.res.linear.devPtr));
      out->res.linear.sizeInBytes = r.res.linear.sizeInBytes;
      return CUDA_SUCCESS;
    case cudaResourceTypePitch2D:
      if (!format_of(r.res.pitch2D.desc, &out->res.pitch2D.format, &out->res.pitch2D.numChannels))
        return CUDA_ERROR_INVALID_VALUE;
      out->res.pitch2D.devPtr = CUdeviceptr(uintptr_t(r.res.pitch2D.devPtr));
      out->res.pitch2D.width = r.res.pitch2D.width;
      out->res.pitch2D.height = r.res.pitch2D.height;
      out->res.pitch2D.pitchInBytes = r.res.pitch2D.pitchInBytes;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

}  // namespace

extern "C" {

CUresult cuDeviceGetTexture1DLinearMaxWidth(size_t* w, CUarray_format f, unsigned channels, CUdevice d) {
  WH_INIT();
  cudaChannelFormatDesc desc;
  if (!w || !desc_of(f, channels, &desc)) return CUDA_ERROR_INVALID_VALUE;
  return rt(cudaDeviceGetTexture1DLinearMaxWidth(w, &desc, d));
}

CUresult cuArrayCreate_v2(CUarray* a, const CUDA_ARRAY_DESCRIPTOR* d) {
  WH_INIT();
  cudaChannelFormatDesc f;
  if (!a || !d || !desc_of(d->Format, d->NumChannels, &f)) return CUDA_ERROR_INVALID_VALUE;
  return rt(cudaMallocArray(reinterpret_cast<cudaArray_t*>(a), &f, d->Width, d->Height, 0));
}

// CUDA_ARRAY3D_* flags share the values of cudaArray* flags.
CUresult cuArray3DCreate_v2(CUarray* a, const CUDA_ARRAY3D_DESCRIPTOR* d) {
  WH_INIT();
  cudaChannelFormatDesc f;
  if (!a || !d || !desc_of(d->Format, d->NumChannels, &f)) return CUDA_ERROR_INVALID_VALUE;
  return rt(cudaMalloc3DArray(reinterpret_cast<cudaArray_t*>(a), &f, cudaExtent{d->Width, d->Height, d->Depth},
                              d->Flags));
}

CUresult cuArrayDestroy(CUarray a) {
  WH_INIT();
  return rt(cudaFreeArray(A(a)));
}

CUresult cuArray3DGetDescriptor_v2(CUDA_ARRAY3D_DESCRIPTOR* d, CUarray a) {
  WH_INIT();
  if (!d) return CUDA_ERROR_INVALID_VALUE;
  cudaChannelFormatDesc f;
  cudaExtent e;
  unsigned flags;
  if (cudaError_t r = cudaArrayGetInfo(&f, &e, &flags, A(a)); r != cudaSuccess) return rt(r);
  if (!format_of(f, &d->Format, &d->NumChannels)) return CUDA_ERROR_INVALID_VALUE;
  d->Width = e.width, d->Height = e.height, d->Depth = e.depth, d->Flags = flags;
  return CUDA_SUCCESS;
}

CUresult cuArrayGetDescriptor_v2(CUDA_ARRAY_DESCRIPTOR* d, CUarray a) {
  if (!d) return CUDA_ERROR_INVALID_VALUE;
  CUDA_ARRAY3D_DESCRIPTOR d3;
  if (CUresult r = cuArray3DGetDescriptor_v2(&d3, a); r != CUDA_SUCCESS) return r;
  d->Width = d3.Width, d->Height = d3.Height, d->Format = d3.Format, d->NumChannels = d3.NumChannels;
  return CUDA_SUCCESS;
}

CUresult cuMipmappedArrayCreate(CUmipmappedArray* m, const CUDA_ARRAY3D_DESCRIPTOR* d, unsigned levels) {
  WH_INIT();
  cudaChannelFormatDesc f;
  if (!m || !d || !desc_of(d->Format, d->NumChannels, &f)) return CUDA_ERROR_INVALID_VALUE;
  return rt(cudaMallocMipmappedArray(reinterpret_cast<cudaMipmappedArray_t*>(m), &f,
                                     cudaExtent{d->Width, d->Height, d->Depth}, levels, d->Flags));
}
CUresult cuMipmappedArrayGetLevel(CUarray* level, CUmipmappedArray m, unsigned l) {
  WH_INIT();
  return rt(cudaGetMipmappedArrayLevel(reinterpret_cast<cudaArray_t*>(level),
                                       reinterpret_cast<cudaMipmappedArray_const_t>(m), l));
}
CUresult cuMipmappedArrayDestroy(CUmipmappedArray m) {
  WH_INIT();
  return rt(cudaFreeMipmappedArray(reinterpret_cast<cudaMipmappedArray_t>(m)));
}

// ---- copies with arrays (offsets in bytes, continuing over rows)
CUresult cuMemcpyHtoA_v2(CUarray a, size_t off, const void* src, size_t n) {
  return array_copy(a, off, const_cast<void*>(src), n, true, cudaMemcpyHostToDevice, nullptr, false);
}
CUresult cuMemcpyHtoA_v2_ptds(CUarray a, size_t off, const void* src, size_t n) { return cuMemcpyHtoA_v2(a, off, src, n); }
CUresult cuMemcpyAtoH_v2(void* dst, CUarray a, size_t off, size_t n) {
  return array_copy(a, off, dst, n, false, cudaMemcpyDeviceToHost, nullptr, false);
}
CUresult cuMemcpyAtoH_v2_ptds(void* dst, CUarray a, size_t off, size_t n) { return cuMemcpyAtoH_v2(dst, a, off, n); }
CUresult cuMemcpyDtoA_v2(CUarray a, size_t off, CUdeviceptr src, size_t n) {
  return array_copy(a, off, reinterpret_cast<void*>(uintptr_t(src)), n, true, cudaMemcpyDeviceToDevice, nullptr, false);
}
CUresult cuMemcpyDtoA_v2_ptds(CUarray a, size_t off, CUdeviceptr src, size_t n) { return cuMemcpyDtoA_v2(a, off, src, n); }
CUresult cuMemcpyAtoD_v2(CUdeviceptr dst, CUarray a, size_t off, size_t n) {
  return array_copy(a, off, reinterpret_cast<void*>(uintptr_t(dst)), n, false, cudaMemcpyDeviceToDevice, nullptr, false);
}
CUresult cuMemcpyAtoD_v2_ptds(CUdeviceptr dst, CUarray a, size_t off, size_t n) { return cuMemcpyAtoD_v2(dst, a, off, n); }
CUresult cuMemcpyHtoAAsync_v2(CUarray a, size_t off, const void* src, size_t n, CUstream s) {
  return array_copy(a, off, const_cast<void*>(src), n, true, cudaMemcpyHostToDevice, s, true);
}
CUresult cuMemcpyHtoAAsync_v2_ptsz(CUarray a, size_t off, const void* src, size_t n, CUstream s) {
  return cuMemcpyHtoAAsync_v2(a, off, src, n, s);
}
CUresult cuMemcpyAtoHAsync_v2(void* dst, CUarray a, size_t off, size_t n, CUstream s) {
  return array_copy(a, off, dst, n, false, cudaMemcpyDeviceToHost, s, true);
}
CUresult cuMemcpyAtoHAsync_v2_ptsz(void* dst, CUarray a, size_t off, size_t n, CUstream s) {
  return cuMemcpyAtoHAsync_v2(dst, a, off, n, s);
}
CUresult cuMemcpyAtoA_v2(CUarray dst, size_t doff, CUarray src, size_t soff, size_t n) {
  WH_INIT();
  size_t drow, srow;
  if (CUresult r = row_bytes(dst, &drow); r != CUDA_SUCCESS) return r;
  if (CUresult r = row_bytes(src, &srow); r != CUDA_SUCCESS) return r;
  return rt(cudaMemcpyArrayToArray(A(dst), doff % drow, doff / drow, A(src), soff % srow, soff / srow, n,
                                   cudaMemcpyDeviceToDevice));
}
CUresult cuMemcpyAtoA_v2_ptds(CUarray dst, size_t doff, CUarray src, size_t soff, size_t n) {
  return cuMemcpyAtoA_v2(dst, doff, src, soff, n);
}

// ---- texture and surface objects
CUresult cuTexObjectCreate(CUtexObject* obj, const CUDA_RESOURCE_DESC* r, const CUDA_TEXTURE_DESC* t,
                           const CUDA_RESOURCE_VIEW_DESC* view) {
  WH_INIT();
  if (!obj || !r || !t) return CUDA_ERROR_INVALID_VALUE;
  if (view) {
    log_once("cuTexObjectCreate: resource views are not supported");
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  cudaResourceDesc rr;
  cudaChannelFormatDesc fmt{};
  if (CUresult e = res_of(r, &rr, &fmt); e != CUDA_SUCCESS) return e;
  cudaTextureDesc tt{};
  for (int k = 0; k < 3; k++) tt.addressMode[k] = cudaTextureAddressMode(t->addressMode[k]);
  tt.filterMode = cudaTextureFilterMode(t->filterMode);
  // The driver promotes integer texels to normalised floats unless told to
  // read them as integers; float texels are read as they are.
  // 32-bit integers cannot be normalised: they are read as integers whatever
  // the flag says (NVIDIA's runtime leaves the flag clear for them).
  const bool integer = (fmt.f == cudaChannelFormatKindSigned || fmt.f == cudaChannelFormatKindUnsigned) && fmt.x < 32;
  tt.readMode = integer && !(t->flags & CU_TRSF_READ_AS_INTEGER) ? cudaReadModeNormalizedFloat : cudaReadModeElementType;
  tt.sRGB = (t->flags & CU_TRSF_SRGB) != 0;
  tt.normalizedCoords = (t->flags & CU_TRSF_NORMALIZED_COORDINATES) != 0;
  tt.maxAnisotropy = t->maxAnisotropy;
  tt.mipmapFilterMode = cudaTextureFilterMode(t->mipmapFilterMode);
  tt.mipmapLevelBias = t->mipmapLevelBias;
  tt.minMipmapLevelClamp = t->minMipmapLevelClamp;
  tt.maxMipmapLevelClamp = t->maxMipmapLevelClamp;
  std::memcpy(tt.borderColor, t->borderColor, sizeof tt.borderColor);
  tt.disableTrilinearOptimization = (t->flags & CU_TRSF_DISABLE_TRILINEAR_OPTIMIZATION) != 0;
  tt.seamlessCubemap = (t->flags & CU_TRSF_SEAMLESS_CUBEMAP) != 0;
  static_assert(sizeof(CUtexObject) == sizeof(cudaTextureObject_t));
  return rt(cudaCreateTextureObject(reinterpret_cast<cudaTextureObject_t*>(obj), &rr, &tt, nullptr));
}

CUresult cuTexObjectGetResourceDesc(CUDA_RESOURCE_DESC* out, CUtexObject obj) {
  WH_INIT();
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  cudaResourceDesc r;
  if (cudaError_t e = cudaGetTextureObjectResourceDesc(&r, cudaTextureObject_t(obj)); e != cudaSuccess) return rt(e);
  return res_to_cu(r, out);
}

CUresult cuTexObjectGetTextureDesc(CUDA_TEXTURE_DESC* out, CUtexObject obj) {
  WH_INIT();
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  cudaTextureDesc t;
  if (cudaError_t e = cudaGetTextureObjectTextureDesc(&t, cudaTextureObject_t(obj)); e != cudaSuccess) return rt(e);
  std::memset(out, 0, sizeof *out);
  for (int k = 0; k < 3; k++) out->addressMode[k] = CUaddress_mode(t.addressMode[k]);
  out->filterMode = CUfilter_mode(t.filterMode);
  // The inverse of cuTexObjectCreate's mapping: element-type reads of an
  // integer format are the driver's READ_AS_INTEGER.
  cudaResourceDesc r;
  if (cudaError_t e = cudaGetTextureObjectResourceDesc(&r, cudaTextureObject_t(obj)); e != cudaSuccess) return rt(e);
  cudaChannelFormatKind kind = r.resType == cudaResourceTypeLinear    ? r.res.linear.desc.f
                               : r.resType == cudaResourceTypePitch2D ? r.res.pitch2D.desc.f
                                                                      : cudaChannelFormatKindFloat;
  if (r.resType == cudaResourceTypeArray) {
    cudaChannelFormatDesc d;
    cudaExtent ext;
    unsigned fl;
    if (cudaArrayGetInfo(&d, &ext, &fl, r.res.array.array) == cudaSuccess) kind = d.f;
  }
  const bool integer = kind == cudaChannelFormatKindSigned || kind == cudaChannelFormatKindUnsigned;
  if (integer && t.readMode == cudaReadModeElementType) out->flags |= CU_TRSF_READ_AS_INTEGER;
  if (t.sRGB) out->flags |= CU_TRSF_SRGB;
  if (t.normalizedCoords) out->flags |= CU_TRSF_NORMALIZED_COORDINATES;
  if (t.disableTrilinearOptimization) out->flags |= CU_TRSF_DISABLE_TRILINEAR_OPTIMIZATION;
  if (t.seamlessCubemap) out->flags |= CU_TRSF_SEAMLESS_CUBEMAP;
  out->maxAnisotropy = t.maxAnisotropy;
  out->mipmapFilterMode = CUfilter_mode(t.mipmapFilterMode);
  out->mipmapLevelBias = t.mipmapLevelBias;
  out->minMipmapLevelClamp = t.minMipmapLevelClamp;
  out->maxMipmapLevelClamp = t.maxMipmapLevelClamp;
  std::memcpy(out->borderColor, t.borderColor, sizeof out->borderColor);
  return CUDA_SUCCESS;
}

CUresult cuTexObjectGetResourceViewDesc(CUDA_RESOURCE_VIEW_DESC* out, CUtexObject obj) {
  WH_INIT();
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  // Objects are made without views (cuTexObjectCreate refuses one): an
  // all-zero view, as the driver reports for an object made without one.
  cudaResourceDesc r;
  if (cudaError_t e = cudaGetTextureObjectResourceDesc(&r, cudaTextureObject_t(obj)); e != cudaSuccess) return rt(e);
  std::memset(out, 0, sizeof *out);
  return CUDA_SUCCESS;
}

CUresult cuTexObjectDestroy(CUtexObject obj) {
  WH_INIT();
  return rt(cudaDestroyTextureObject(cudaTextureObject_t(obj)));
}

CUresult cuSurfObjectCreate(CUsurfObject* obj, const CUDA_RESOURCE_DESC* r) {
  WH_INIT();
  if (!obj || !r || r->resType != CU_RESOURCE_TYPE_ARRAY) return CUDA_ERROR_INVALID_VALUE;
  cudaResourceDesc rr;
  cudaChannelFormatDesc fmt;
  if (CUresult e = res_of(r, &rr, &fmt); e != CUDA_SUCCESS) return e;
  return rt(cudaCreateSurfaceObject(reinterpret_cast<cudaSurfaceObject_t*>(obj), &rr));
}

CUresult cuSurfObjectGetResourceDesc(CUDA_RESOURCE_DESC* out, CUsurfObject obj) {
  WH_INIT();
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  cudaResourceDesc r;
  if (cudaError_t e = cudaGetSurfaceObjectResourceDesc(&r, cudaSurfaceObject_t(obj)); e != cudaSuccess) return rt(e);
  return res_to_cu(r, out);
}

CUresult cuSurfObjectDestroy(CUsurfObject obj) {
  WH_INIT();
  return rt(cudaDestroySurfaceObject(cudaSurfaceObject_t(obj)));
}

}  // extern "C"
