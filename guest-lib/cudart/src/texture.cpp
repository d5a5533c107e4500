// CUDA arrays, texture and surface objects.
//
// An array lives on the server (a handle, which is the cudaArray_t the
// application holds). Its memory is device memory with a row-major layout
// the server reports (ArrayGetInfo: address, row pitch, slice pitch), so
// every array copy is a pitched copy between device addresses and the
// application's memory, through the ordinary copy engine (memcpy2d): pinned,
// pageable and device memory all work, synchronous or on a stream.
// Texture and surface objects are server objects too; the descriptors the
// application passed are kept here to answer cudaGetTextureObject*Desc.
#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>

#include "state.hpp"

namespace wh::guest {

using namespace wh::proto;

namespace {

std::mutex g_tex_mu;
struct TexDescs {
  cudaResourceDesc res;
  cudaTextureDesc tex;
};
std::map<uint64_t, TexDescs> g_tex;             // texture object -> its descriptors
std::map<uint64_t, cudaResourceDesc> g_surf;    // surface object -> its resource

uint64_t h_of(const void* p) { return reinterpret_cast<uint64_t>(p); }

bool mul_ok(uint64_t a, uint64_t b, uint64_t* out) {
  if (a && b > UINT64_MAX / a) return false;
  *out = a * b;
  return true;
}

struct ArrayInfo {
  ArrayGetInfoResp r{};
  uint64_t elem = 0, row = 0, rows = 1, slices = 1;  // row: bytes of data per row
};

cudaError_t array_info(Connection* c, uint64_t a, ArrayInfo* out) {
  if (!a) return cudaErrorInvalidValue;
  if (cudaError_t e = c->call<Op::ArrayGetInfo>({a}, &out->r); e != cudaSuccess) return e;
  const auto& r = out->r;
  out->elem = uint64_t(r.fx + r.fy + r.fz + r.fw) / 8;
  out->row = r.width * out->elem;
  out->rows = r.height ? r.height : 1;
  out->slices = r.depth ? r.depth : 1;
  return cudaSuccess;
}

// One side of a copy: the address of its first byte, pitches, and whether it
// is device memory.
struct Side {
  uint64_t base = 0, pitch = 0, slice = 0;
  bool device = false;
};

// A box of an array: x in bytes, y rows, z slices (or layers).
cudaError_t array_side(const ArrayInfo& a, uint64_t x, uint64_t y, uint64_t z, uint64_t wbytes, uint64_t h,
                       uint64_t d, Side* s) {
  if (x > a.row || wbytes > a.row - x || y > a.rows || h > a.rows - y || z > a.slices || d > a.slices - z)
    return cudaErrorInvalidValue;
  s->base = a.r.dptr + z * a.r.slice + y * a.r.pitch + x;
  s->pitch = a.r.pitch;
  s->slice = a.r.slice;
  s->device = true;
  return cudaSuccess;
}

// Linear memory side: the kind says where the pointer lives (cudaMemcpyDefault: ask).
Side ptr_side(const void* p, uint64_t pitch, uint64_t slice, bool is_src, cudaMemcpyKind kind) {
  Side s;
  s.base = h_of(p);
  s.pitch = pitch;
  s.slice = slice;
  if (kind == cudaMemcpyDefault) s.device = is_device_ptr(p);
  else if (is_src) s.device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  else s.device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  return s;
}

cudaError_t copy_box(const Side& dst, const Side& src, uint64_t wbytes, uint64_t h, uint64_t d, cudaStream_t s,
                     bool async) {
  if (!wbytes || !h || !d) return cudaSuccess;
  if (wbytes > dst.pitch || wbytes > src.pitch) return cudaErrorInvalidPitchValue;
  const cudaMemcpyKind kind = src.device ? (dst.device ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost)
                                         : (dst.device ? cudaMemcpyHostToDevice : cudaMemcpyHostToHost);
  for (uint64_t k = 0; k < d; ++k) {
    uint64_t doff, soff;
    if (!mul_ok(k, dst.slice, &doff) || !mul_ok(k, src.slice, &soff)) return cudaErrorInvalidValue;
    void* dp = reinterpret_cast<void*>(dst.base + doff);
    const void* sp = reinterpret_cast<const void*>(src.base + soff);
    cudaError_t e;
    if (dst.pitch == wbytes && src.pitch == wbytes && h > 1)  // both tight: one linear copy
      e = do_memcpy(dp, sp, wbytes * h, kind, s, async);
    else
      e = do_memcpy2d(dp, dst.pitch, sp, src.pitch, wbytes, h, kind, s, async);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

cudaError_t to_array_2d(cudaArray_t dst, size_t wOff, size_t hOff, const void* src, size_t spitch, size_t width,
                        size_t height, cudaMemcpyKind kind, cudaStream_t s, bool async) {
  WH_CONN(c);
  if (!width || !height) return cudaSuccess;
  if (!src) return cudaErrorInvalidValue;
  if (spitch < width) return cudaErrorInvalidPitchValue;
  ArrayInfo a;
  if (cudaError_t e = array_info(c, h_of(dst), &a); e != cudaSuccess) return e;
  Side ds;
  if (cudaError_t e = array_side(a, wOff, hOff, 0, width, height, 1, &ds); e != cudaSuccess) return e;
  return copy_box(ds, ptr_side(src, spitch, 0, true, kind), width, height, 1, s, async);
}

cudaError_t from_array_2d(void* dst, size_t dpitch, cudaArray_const_t src, size_t wOff, size_t hOff, size_t width,
                          size_t height, cudaMemcpyKind kind, cudaStream_t s, bool async) {
  WH_CONN(c);
  if (!width || !height) return cudaSuccess;
  if (!dst) return cudaErrorInvalidValue;
  if (dpitch < width) return cudaErrorInvalidPitchValue;
  ArrayInfo a;
  if (cudaError_t e = array_info(c, h_of(src), &a); e != cudaSuccess) return e;
  Side ss;
  if (cudaError_t e = array_side(a, wOff, hOff, 0, width, height, 1, &ss); e != cudaSuccess) return e;
  return copy_box(ptr_side(dst, dpitch, 0, false, kind), ss, width, height, 1, s, async);
}

// cudaMemcpyToArray/FromArray: `count` bytes from (wOff, hOff) on, continuing
// on the following rows.
cudaError_t linear_array(cudaArray_const_t arr, size_t wOff, size_t hOff, void* lin, size_t count, bool to_array,
                         cudaMemcpyKind kind, cudaStream_t s, bool async) {
  WH_CONN(c);
  if (!count) return cudaSuccess;
  if (!lin) return cudaErrorInvalidValue;
  ArrayInfo a;
  if (cudaError_t e = array_info(c, h_of(arr), &a); e != cudaSuccess) return e;
  if (wOff > a.row || hOff >= a.rows) return cudaErrorInvalidValue;
  uint64_t room = (a.rows - hOff) * a.row - wOff;  // bounded: rows <= 2^16, row <= 2^21
  if (count > room) return cudaErrorInvalidValue;
  uint64_t done = 0, x = wOff, y = hOff;
  while (done < count) {
    uint64_t n = std::min<uint64_t>(a.row - x, count - done);
    Side as;
    if (cudaError_t e = array_side(a, x, y, 0, n, 1, 1, &as); e != cudaSuccess) return e;
    uint8_t* p = static_cast<uint8_t*>(lin) + done;
    Side ls = ptr_side(p, n, 0, to_array, kind);
    if (cudaError_t e = to_array ? copy_box(as, ls, n, 1, 1, s, async) : copy_box(ls, as, n, 1, 1, s, async);
        e != cudaSuccess)
      return e;
    done += n;
    x = 0;
    ++y;
  }
  return cudaSuccess;
}

cudaError_t memcpy3d(const cudaMemcpy3DParms* p, cudaStream_t s, bool async) {
  WH_CONN(c);
  if (!p) return cudaErrorInvalidValue;
  const bool sa = p->srcArray != nullptr, da = p->dstArray != nullptr;
  if (sa == (p->srcPtr.ptr != nullptr) || da == (p->dstPtr.ptr != nullptr)) return cudaErrorInvalidValue;
  const cudaExtent ext = p->extent;
  if (!ext.width || !ext.height || !ext.depth) return cudaSuccess;
  ArrayInfo src_a, dst_a;
  if (sa)
    if (cudaError_t e = array_info(c, h_of(p->srcArray), &src_a); e != cudaSuccess) return e;
  if (da)
    if (cudaError_t e = array_info(c, h_of(p->dstArray), &dst_a); e != cudaSuccess) return e;
  // With an array taking part, widths and x positions count its elements.
  uint64_t elem = sa ? src_a.elem : da ? dst_a.elem : 1;
  if (sa && da && src_a.elem != dst_a.elem) return cudaErrorInvalidValue;
  uint64_t wbytes;
  if (!mul_ok(ext.width, elem, &wbytes)) return cudaErrorInvalidValue;
  Side ss, ds;
  auto pos = [&](const cudaPos& q, uint64_t* xb) { return mul_ok(q.x, elem, xb); };
  uint64_t sx, dx;
  if (!pos(p->srcPos, &sx) || !pos(p->dstPos, &dx)) return cudaErrorInvalidValue;
  auto lin = [&](const cudaPitchedPtr& pp, const cudaPos& q, uint64_t xb, bool is_src, Side* out) {
    uint64_t slice, off_z, off_y;
    if (pp.pitch < wbytes) return cudaErrorInvalidPitchValue;
    if (!mul_ok(pp.pitch, pp.ysize ? pp.ysize : ext.height, &slice) || !mul_ok(q.z, slice, &off_z) ||
        !mul_ok(q.y, pp.pitch, &off_y) || off_z > UINT64_MAX - off_y || off_z + off_y > UINT64_MAX - xb)
      return cudaErrorInvalidValue;
    *out = ptr_side(static_cast<uint8_t*>(pp.ptr) + off_z + off_y + xb, pp.pitch, slice, is_src, p->kind);
    return cudaSuccess;
  };
  cudaError_t e = sa ? array_side(src_a, sx, p->srcPos.y, p->srcPos.z, wbytes, ext.height, ext.depth, &ss)
                     : lin(p->srcPtr, p->srcPos, sx, true, &ss);
  if (e != cudaSuccess) return e;
  e = da ? array_side(dst_a, dx, p->dstPos.y, p->dstPos.z, wbytes, ext.height, ext.depth, &ds)
         : lin(p->dstPtr, p->dstPos, dx, false, &ds);
  if (e != cudaSuccess) return e;
  return copy_box(ds, ss, wbytes, ext.height, ext.depth, s, async);
}

cudaError_t finish_sync(cudaError_t e) {
  if (Connection* c = Connection::get()) flush_device_output(c);
  return set_error(e);
}

ArrayCreateReq create_req(const cudaChannelFormatDesc* d, uint64_t w, uint64_t h, uint64_t z, unsigned flags) {
  return {d->x, d->y, d->z, d->w, int32_t(d->f), flags, w, h, z};
}

}  // namespace

extern "C" {

cudaChannelFormatDesc cudaCreateChannelDesc(int x, int y, int z, int w, cudaChannelFormatKind f) {
  cudaChannelFormatDesc d;
  d.x = x, d.y = y, d.z = z, d.w = w, d.f = f;
  return d;
}

cudaError_t cudaMallocArray(cudaArray_t* array, const cudaChannelFormatDesc* desc, size_t width, size_t height,
                            unsigned int flags) {
  if (!array || !desc) return set_error(cudaErrorInvalidValue);
  WH_CONN(c);
  ArrayCreateResp rs{};
  cudaError_t e = c->call<Op::ArrayCreate>(create_req(desc, width, height, 0, flags), &rs);
  *array = e == cudaSuccess ? reinterpret_cast<cudaArray_t>(rs.array) : nullptr;
  return set_error(e);
}

cudaError_t cudaMalloc3DArray(cudaArray_t* array, const cudaChannelFormatDesc* desc, cudaExtent ext,
                              unsigned int flags) {
  if (!array || !desc) return set_error(cudaErrorInvalidValue);
  WH_CONN(c);
  ArrayCreateResp rs{};
  cudaError_t e = c->call<Op::ArrayCreate>(create_req(desc, ext.width, ext.height, ext.depth, flags), &rs);
  *array = e == cudaSuccess ? reinterpret_cast<cudaArray_t>(rs.array) : nullptr;
  return set_error(e);
}

cudaError_t cudaFreeArray(cudaArray_t array) {
  if (!array) return cudaSuccess;
  WH_CONN(c);
  return set_error(c->call<Op::ArrayDestroy>({h_of(array)}));
}

cudaError_t cudaArrayGetInfo(cudaChannelFormatDesc* desc, cudaExtent* ext, unsigned int* flags, cudaArray_t array) {
  WH_CONN(c);
  ArrayInfo a;
  if (cudaError_t e = array_info(c, h_of(array), &a); e != cudaSuccess) return set_error(e);
  if (desc) *desc = cudaCreateChannelDesc(a.r.fx, a.r.fy, a.r.fz, a.r.fw, cudaChannelFormatKind(a.r.fkind));
  if (ext) ext->width = a.r.width, ext->height = a.r.height, ext->depth = a.r.depth;
  if (flags) *flags = a.r.flags;
  return cudaSuccess;
}

cudaError_t cudaGetChannelDesc(cudaChannelFormatDesc* desc, cudaArray_const_t array) {
  if (!desc) return set_error(cudaErrorInvalidValue);
  return cudaArrayGetInfo(desc, nullptr, nullptr, const_cast<cudaArray_t>(array));
}

cudaError_t cudaMallocMipmappedArray(cudaMipmappedArray_t* m, const cudaChannelFormatDesc* desc, cudaExtent ext,
                                     unsigned int levels, unsigned int flags) {
  if (!m || !desc) return set_error(cudaErrorInvalidValue);
  WH_CONN(c);
  MipmappedArrayCreateResp rs{};
  cudaError_t e = c->call<Op::MipmappedArrayCreate>(
      {desc->x, desc->y, desc->z, desc->w, int32_t(desc->f), flags, ext.width, ext.height, ext.depth, levels, 0}, &rs);
  *m = e == cudaSuccess ? reinterpret_cast<cudaMipmappedArray_t>(rs.mipmap) : nullptr;
  return set_error(e);
}

cudaError_t cudaGetMipmappedArrayLevel(cudaArray_t* level, cudaMipmappedArray_const_t m, unsigned int l) {
  if (!level) return set_error(cudaErrorInvalidValue);
  WH_CONN(c);
  MipmappedArrayGetLevelResp rs{};
  cudaError_t e = c->call<Op::MipmappedArrayGetLevel>({h_of(m), l, 0}, &rs);
  *level = e == cudaSuccess ? reinterpret_cast<cudaArray_t>(rs.array) : nullptr;
  return set_error(e);
}

cudaError_t cudaFreeMipmappedArray(cudaMipmappedArray_t m) {
  if (!m) return cudaSuccess;
  WH_CONN(c);
  return set_error(c->call<Op::MipmappedArrayDestroy>({h_of(m)}));
}

cudaError_t cudaMalloc3D(cudaPitchedPtr* pp, cudaExtent ext) {
  if (!pp) return set_error(cudaErrorInvalidValue);
  uint64_t rows;
  if (!mul_ok(ext.height, ext.depth, &rows)) return set_error(cudaErrorInvalidValue);
  size_t pitch = 0;
  void* p = nullptr;
  if (cudaError_t e = cudaMallocPitch(&p, &pitch, ext.width, rows); e != cudaSuccess) return e;
  pp->ptr = p, pp->pitch = pitch, pp->xsize = ext.width, pp->ysize = ext.height;
  return cudaSuccess;
}

// ---- copies
cudaError_t cudaMemcpy2DToArray(cudaArray_t dst, size_t wOff, size_t hOff, const void* src, size_t spitch,
                                size_t width, size_t height, cudaMemcpyKind kind) {
  return finish_sync(to_array_2d(dst, wOff, hOff, src, spitch, width, height, kind, nullptr, false));
}
cudaError_t cudaMemcpy2DToArrayAsync(cudaArray_t dst, size_t wOff, size_t hOff, const void* src, size_t spitch,
                                     size_t width, size_t height, cudaMemcpyKind kind, cudaStream_t s) {
  return set_error(to_array_2d(dst, wOff, hOff, src, spitch, width, height, kind, s, true));
}
cudaError_t cudaMemcpy2DFromArray(void* dst, size_t dpitch, cudaArray_const_t src, size_t wOff, size_t hOff,
                                  size_t width, size_t height, cudaMemcpyKind kind) {
  return finish_sync(from_array_2d(dst, dpitch, src, wOff, hOff, width, height, kind, nullptr, false));
}
cudaError_t cudaMemcpy2DFromArrayAsync(void* dst, size_t dpitch, cudaArray_const_t src, size_t wOff, size_t hOff,
                                       size_t width, size_t height, cudaMemcpyKind kind, cudaStream_t s) {
  return set_error(from_array_2d(dst, dpitch, src, wOff, hOff, width, height, kind, s, true));
}
cudaError_t cudaMemcpyToArray(cudaArray_t dst, size_t wOff, size_t hOff, const void* src, size_t count,
                              cudaMemcpyKind kind) {
  return finish_sync(linear_array(dst, wOff, hOff, const_cast<void*>(src), count, true, kind, nullptr, false));
}
cudaError_t cudaMemcpyToArrayAsync(cudaArray_t dst, size_t wOff, size_t hOff, const void* src, size_t count,
                                   cudaMemcpyKind kind, cudaStream_t s) {
  return set_error(linear_array(dst, wOff, hOff, const_cast<void*>(src), count, true, kind, s, true));
}
cudaError_t cudaMemcpyFromArray(void* dst, cudaArray_const_t src, size_t wOff, size_t hOff, size_t count,
                                cudaMemcpyKind kind) {
  return finish_sync(linear_array(src, wOff, hOff, dst, count, false, kind, nullptr, false));
}
cudaError_t cudaMemcpyFromArrayAsync(void* dst, cudaArray_const_t src, size_t wOff, size_t hOff, size_t count,
                                     cudaMemcpyKind kind, cudaStream_t s) {
  return set_error(linear_array(src, wOff, hOff, dst, count, false, kind, s, true));
}
cudaError_t cudaMemcpy2DArrayToArray(cudaArray_t dst, size_t wOffDst, size_t hOffDst, cudaArray_const_t src,
                                     size_t wOffSrc, size_t hOffSrc, size_t width, size_t height, cudaMemcpyKind) {
  WH_CONN(c);
  if (!width || !height) return cudaSuccess;
  ArrayInfo da, sa;
  cudaError_t e = array_info(c, h_of(dst), &da);
  if (e == cudaSuccess) e = array_info(c, h_of(src), &sa);
  Side ds, ss;
  if (e == cudaSuccess) e = array_side(da, wOffDst, hOffDst, 0, width, height, 1, &ds);
  if (e == cudaSuccess) e = array_side(sa, wOffSrc, hOffSrc, 0, width, height, 1, &ss);
  if (e == cudaSuccess) e = copy_box(ds, ss, width, height, 1, nullptr, false);
  return finish_sync(e);
}
cudaError_t cudaMemcpy3D(const cudaMemcpy3DParms* p) { return finish_sync(memcpy3d(p, nullptr, false)); }
cudaError_t cudaMemcpy3DAsync(const cudaMemcpy3DParms* p, cudaStream_t s) { return set_error(memcpy3d(p, s, true)); }
cudaError_t cudaMemcpy3D_ptds(const cudaMemcpy3DParms* p) { return cudaMemcpy3D(p); }
cudaError_t cudaMemcpy3DAsync_ptsz(const cudaMemcpy3DParms* p, cudaStream_t s) { return cudaMemcpy3DAsync(p, s); }
cudaError_t cudaMemcpy2DToArray_ptds(cudaArray_t d, size_t x, size_t y, const void* s, size_t sp, size_t w, size_t h,
                                     cudaMemcpyKind k) {
  return cudaMemcpy2DToArray(d, x, y, s, sp, w, h, k);
}
cudaError_t cudaMemcpy2DFromArray_ptds(void* d, size_t dp, cudaArray_const_t s, size_t x, size_t y, size_t w,
                                       size_t h, cudaMemcpyKind k) {
  return cudaMemcpy2DFromArray(d, dp, s, x, y, w, h, k);
}

cudaError_t cudaMemcpyArrayToArray(cudaArray_t dst, size_t wOffDst, size_t hOffDst, cudaArray_const_t src,
                                   size_t wOffSrc, size_t hOffSrc, size_t count, cudaMemcpyKind) {
  WH_CONN(c);
  if (!count) return cudaSuccess;
  ArrayInfo da, sa;
  cudaError_t e = array_info(c, h_of(dst), &da);
  if (e == cudaSuccess) e = array_info(c, h_of(src), &sa);
  if (e != cudaSuccess) return set_error(e);
  // count bytes, continuing on the following rows of each array
  uint64_t dx = wOffDst, dy = hOffDst, sx = wOffSrc, sy = hOffSrc, left = count;
  while (left) {
    if (dx >= da.row) dx = 0, ++dy;
    if (sx >= sa.row) sx = 0, ++sy;
    uint64_t n = std::min<uint64_t>({left, da.row - dx, sa.row - sx});
    Side ds, ss;
    if ((e = array_side(da, dx, dy, 0, n, 1, 1, &ds)) != cudaSuccess ||
        (e = array_side(sa, sx, sy, 0, n, 1, 1, &ss)) != cudaSuccess ||
        (e = copy_box(ds, ss, n, 1, 1, nullptr, false)) != cudaSuccess)
      return finish_sync(e);
    dx += n, sx += n, left -= n;
  }
  return finish_sync(cudaSuccess);
}

// The per-thread-default-stream names (nvcc --default-stream per-thread): one stream here.
cudaError_t cudaMemcpy2DArrayToArray_ptds(cudaArray_t d, size_t dx, size_t dy, cudaArray_const_t s, size_t sx, size_t sy,
                                          size_t w, size_t h, cudaMemcpyKind k) {
  return cudaMemcpy2DArrayToArray(d, dx, dy, s, sx, sy, w, h, k);
}
cudaError_t cudaMemcpyArrayToArray_ptds(cudaArray_t d, size_t dx, size_t dy, cudaArray_const_t s, size_t sx, size_t sy,
                                        size_t n, cudaMemcpyKind k) {
  return cudaMemcpyArrayToArray(d, dx, dy, s, sx, sy, n, k);
}
cudaError_t cudaMemcpy2DToArrayAsync_ptsz(cudaArray_t d, size_t x, size_t y, const void* s, size_t sp, size_t w,
                                          size_t h, cudaMemcpyKind k, cudaStream_t st) {
  return cudaMemcpy2DToArrayAsync(d, x, y, s, sp, w, h, k, st);
}
cudaError_t cudaMemcpy2DFromArrayAsync_ptsz(void* d, size_t dp, cudaArray_const_t s, size_t x, size_t y, size_t w,
                                            size_t h, cudaMemcpyKind k, cudaStream_t st) {
  return cudaMemcpy2DFromArrayAsync(d, dp, s, x, y, w, h, k, st);
}
cudaError_t cudaMemcpyToArray_ptds(cudaArray_t d, size_t x, size_t y, const void* s, size_t n, cudaMemcpyKind k) {
  return cudaMemcpyToArray(d, x, y, s, n, k);
}
cudaError_t cudaMemcpyFromArray_ptds(void* d, cudaArray_const_t s, size_t x, size_t y, size_t n, cudaMemcpyKind k) {
  return cudaMemcpyFromArray(d, s, x, y, n, k);
}
cudaError_t cudaMemcpyToArrayAsync_ptsz(cudaArray_t d, size_t x, size_t y, const void* s, size_t n, cudaMemcpyKind k,
                                        cudaStream_t st) {
  return cudaMemcpyToArrayAsync(d, x, y, s, n, k, st);
}
cudaError_t cudaMemcpyFromArrayAsync_ptsz(void* d, cudaArray_const_t s, size_t x, size_t y, size_t n, cudaMemcpyKind k,
                                          cudaStream_t st) {
  return cudaMemcpyFromArrayAsync(d, s, x, y, n, k, st);
}

// The modeled device's limit, the same for every format (the server's check).
cudaError_t cudaDeviceGetTexture1DLinearMaxWidth(size_t* max_width, const cudaChannelFormatDesc* desc, int device) {
  if (!max_width || !desc) return set_error(cudaErrorInvalidValue);
  if (device != 0) return set_error(cudaErrorInvalidDevice);
  *max_width = size_t(1) << 28;
  return cudaSuccess;
}

// ---- texture and surface objects
cudaError_t cudaCreateTextureObject(cudaTextureObject_t* obj, const cudaResourceDesc* r, const cudaTextureDesc* t,
                                    const cudaResourceViewDesc* view) {
  if (!obj || !r || !t) return set_error(cudaErrorInvalidValue);
  if (view) return set_error(cudaErrorNotSupported);  // resource views: not on the sim device
  WH_CONN(c);
  TexObjectCreateReq rq{};
  rq.res_type = uint32_t(r->resType);
  const cudaChannelFormatDesc* f = nullptr;
  switch (r->resType) {
    case cudaResourceTypeArray: rq.res = h_of(r->res.array.array); break;
    case cudaResourceTypeMipmappedArray: rq.res = h_of(r->res.mipmap.mipmap); break;
    case cudaResourceTypeLinear:
      rq.res = h_of(r->res.linear.devPtr);
      f = &r->res.linear.desc;
      rq.bytes = r->res.linear.sizeInBytes;
      break;
    case cudaResourceTypePitch2D:
      rq.res = h_of(r->res.pitch2D.devPtr);
      f = &r->res.pitch2D.desc;
      rq.width = r->res.pitch2D.width;
      rq.height = r->res.pitch2D.height;
      rq.pitch = r->res.pitch2D.pitchInBytes;
      break;
    default: return set_error(cudaErrorInvalidValue);
  }
  if (f) rq.fx = f->x, rq.fy = f->y, rq.fz = f->z, rq.fw = f->w, rq.fkind = int32_t(f->f);
  for (int k = 0; k < 3; ++k) rq.addr[k] = uint32_t(t->addressMode[k]);
  rq.filter = uint32_t(t->filterMode);
  rq.read_mode = uint32_t(t->readMode);
  rq.srgb = uint32_t(t->sRGB);
  rq.norm = uint32_t(t->normalizedCoords);
  for (int k = 0; k < 4; ++k) rq.border[k] = t->borderColor[k];
  TexObjectCreateResp rs{};
  cudaError_t e = c->call<Op::TexObjectCreate>(rq, &rs);
  if (e != cudaSuccess) return set_error(e);
  std::lock_guard lk(g_tex_mu);
  g_tex[rs.obj] = {*r, *t};
  *obj = rs.obj;
  return cudaSuccess;
}

cudaError_t cudaDestroyTextureObject(cudaTextureObject_t obj) {
  if (!obj) return cudaSuccess;
  WH_CONN(c);
  cudaError_t e = c->call<Op::TexObjectDestroy>({obj});
  if (e == cudaSuccess) {
    std::lock_guard lk(g_tex_mu);
    g_tex.erase(obj);
  }
  return set_error(e);
}

cudaError_t cudaGetTextureObjectResourceDesc(cudaResourceDesc* r, cudaTextureObject_t obj) {
  if (!r) return set_error(cudaErrorInvalidValue);
  std::lock_guard lk(g_tex_mu);
  auto it = g_tex.find(obj);
  if (it == g_tex.end()) return set_error(cudaErrorInvalidValue);
  *r = it->second.res;
  return cudaSuccess;
}

cudaError_t cudaGetTextureObjectTextureDesc(cudaTextureDesc* t, cudaTextureObject_t obj) {
  if (!t) return set_error(cudaErrorInvalidValue);
  std::lock_guard lk(g_tex_mu);
  auto it = g_tex.find(obj);
  if (it == g_tex.end()) return set_error(cudaErrorInvalidValue);
  *t = it->second.tex;
  return cudaSuccess;
}

cudaError_t cudaCreateSurfaceObject(cudaSurfaceObject_t* obj, const cudaResourceDesc* r) {
  if (!obj || !r) return set_error(cudaErrorInvalidValue);
  if (r->resType != cudaResourceTypeArray) return set_error(cudaErrorInvalidValue);
  WH_CONN(c);
  SurfObjectCreateResp rs{};
  cudaError_t e = c->call<Op::SurfObjectCreate>({h_of(r->res.array.array)}, &rs);
  if (e != cudaSuccess) return set_error(e);
  std::lock_guard lk(g_tex_mu);
  g_surf[rs.obj] = *r;
  *obj = rs.obj;
  return cudaSuccess;
}

cudaError_t cudaDestroySurfaceObject(cudaSurfaceObject_t obj) {
  if (!obj) return cudaSuccess;
  WH_CONN(c);
  cudaError_t e = c->call<Op::SurfObjectDestroy>({obj});
  if (e == cudaSuccess) {
    std::lock_guard lk(g_tex_mu);
    g_surf.erase(obj);
  }
  return set_error(e);
}

cudaError_t cudaGetSurfaceObjectResourceDesc(cudaResourceDesc* r, cudaSurfaceObject_t obj) {
  if (!r) return set_error(cudaErrorInvalidValue);
  std::lock_guard lk(g_tex_mu);
  auto it = g_surf.find(obj);
  if (it == g_surf.end()) return set_error(cudaErrorInvalidValue);
  *r = it->second;
  return cudaSuccess;
}

}  // extern "C"

}  // namespace wh::guest
