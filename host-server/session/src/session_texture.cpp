// CUDA arrays, mipmapped arrays, texture and surface objects: the bodies of
// their table lines. Every extent, format, handle and range from the guest
// is checked here; the backend sees only layouts that fit their memory.
#include <cmath>

#include "wormhole/server/session.hpp"

namespace wh::server {

using namespace wh::proto;

namespace {

// Limits of the modeled device (cudaDevAttrMaxTexture*): larger extents are
// refused before any arithmetic on them.
constexpr uint64_t kMaxW = 131072, kMaxH = 65536, kMax3D = 16384, kMaxLayers = 2048;
constexpr uint64_t kMaxLinearElems = uint64_t(1) << 28;
constexpr uint64_t kPitchAlign = 32;  // cudaDevAttrTexturePitchAlignment
constexpr uint32_t kMaxObjects = 1 << 16;

bool mul_ok(uint64_t a, uint64_t b, uint64_t* out) {
  if (a && b > UINT64_MAX / a) return false;
  *out = a * b;
  return true;
}

// cudaChannelFormatDesc -> channels, bytes per channel, kind. Channels must
// be x, x+y or x+y+z+w of one size (8, 16 or 32 bits; floats 16 or 32).
bool channel_format(const int32_t f[5], uint8_t* nch, uint8_t* cbytes, uint8_t* ckind) {
  if (f[4] < cudaChannelFormatKindSigned || f[4] > cudaChannelFormatKindFloat) return false;
  const int32_t b = f[0];
  if (b != 8 && b != 16 && b != 32) return false;
  int n = 1;
  while (n < 4 && f[n] != 0) {
    if (f[n] != b) return false;
    ++n;
  }
  for (int k = n; k < 4; ++k)
    if (f[k] != 0) return false;
  if (n == 3) return false;
  if (f[4] == cudaChannelFormatKindFloat && b == 8) return false;
  *nch = uint8_t(n);
  *cbytes = uint8_t(b / 8);
  *ckind = uint8_t(f[4]);
  return true;
}

}  // namespace

Err Session::array_make(const int32_t fmt[5], uint32_t flags, uint64_t w, uint64_t h, uint64_t d, uint64_t mipmap,
                        uint64_t* out, uint64_t at) {
  TexSpec t;
  if (!channel_format(fmt, &t.nch, &t.cbytes, &t.ckind)) return cudaErrorInvalidChannelDescriptor;
  if (flags & (cudaArrayCubemap | cudaArraySparse | cudaArrayDeferredMapping | cudaArrayColorAttachment))
    return cudaErrorNotSupported;
  if (flags & ~uint32_t(cudaArrayLayered | cudaArraySurfaceLoadStore | cudaArrayTextureGather)) return cudaErrorInvalidValue;
  const bool layered = flags & cudaArrayLayered;
  if (w == 0 || w > kMaxW || h > kMaxH || d > (layered ? kMaxLayers : kMax3D)) return cudaErrorInvalidValue;
  if (layered) {
    if (d == 0) return cudaErrorInvalidValue;
    t.dims = h == 0 ? 1 : 2;
  } else {
    t.dims = d ? 3 : h ? 2 : 1;
    if (d && !h) return cudaErrorInvalidValue;
    if (d && (w > kMax3D || h > kMax3D)) return cudaErrorInvalidValue;
  }
  t.layered = layered;
  t.w = uint32_t(w);
  t.h = uint32_t(h ? h : 1);
  t.d = uint32_t(d ? d : 1);
  const uint64_t row = w * t.nch * t.cbytes;  // bounded: w <= 2^17, elem <= 16
  t.pitch = (row + kPitchAlign - 1) / kPitchAlign * kPitchAlign;
  if (!mul_ok(t.pitch, t.h, &t.slice) || !mul_ok(t.slice, t.d, &t.bytes)) return cudaErrorInvalidValue;
  if (array_mem_.size() >= (1u << 20)) return cudaErrorMemoryAllocation;
  if (Err e = at ? ctx_->mem_alloc_at(at, t.bytes) : ctx_->mem_alloc(t.bytes, &t.dptr); e != cudaSuccess) return e;
  if (at) t.dptr = at;
  if (Err e = ctx_->memset8(t.dptr, 0, t.bytes, nullptr); e != cudaSuccess) {
    ctx_->mem_free(t.dptr);
    return e;
  }
  auto a = std::make_unique<ArrayEntry>();
  std::memcpy(a->fmt, fmt, sizeof a->fmt);
  a->flags = flags;
  a->width = w, a->height = h, a->depth = d;
  a->spec = t;
  a->mipmap = mipmap;
  uint64_t hnd = arrays_.add(std::move(a));
  if (!hnd) {
    ctx_->mem_free(t.dptr);
    return cudaErrorMemoryAllocation;
  }
  array_mem_[t.dptr] = t.bytes;
  *out = hnd;
  return cudaSuccess;
}

void Session::array_release(ArrayEntry& a) {
  array_mem_.erase(a.spec.dptr);
  ctx_->mem_free(a.spec.dptr);
}

void Session::textures_reset() {
  ctx_->synchronize();
  for (auto& [h, o] : texobjs_) ctx_->texture_destroy(h, o.surface);
  texobjs_.clear();
  arrays_.for_each([&](uint64_t, ArrayEntry& a) { array_release(a); });
  arrays_.clear();
  mipmaps_.clear();
}

int32_t Session::on_ArrayCreate(const ArrayCreateReq& rq, std::span<const uint8_t>, ArrayCreateResp& rs,
                                std::vector<uint8_t>&) {
  const int32_t f[5] = {rq.fx, rq.fy, rq.fz, rq.fw, rq.fkind};
  return array_make(f, rq.flags, rq.width, rq.height, rq.depth, 0, &rs.array);
}

int32_t Session::on_ArrayDestroy(const ArrayDestroyReq& rq, std::span<const uint8_t>, ArrayDestroyResp&,
                                 std::vector<uint8_t>&) {
  ArrayEntry* a = arrays_.get(rq.array);
  if (!a || a->mipmap) return cudaErrorInvalidValue;  // a level dies with its mipmapped array
  ctx_->synchronize();  // as cudaFreeArray: work that may use it finishes first
  array_release(*a);
  arrays_.take(rq.array);
  return cudaSuccess;
}

int32_t Session::on_ArrayGetInfo(const ArrayGetInfoReq& rq, std::span<const uint8_t>, ArrayGetInfoResp& rs,
                                 std::vector<uint8_t>&) {
  const ArrayEntry* a = arrays_.get(rq.array);
  if (!a) return cudaErrorInvalidValue;
  rs.fx = a->fmt[0], rs.fy = a->fmt[1], rs.fz = a->fmt[2], rs.fw = a->fmt[3], rs.fkind = a->fmt[4];
  rs.flags = a->flags;
  rs.width = a->width, rs.height = a->height, rs.depth = a->depth;
  rs.dptr = a->spec.dptr, rs.pitch = a->spec.pitch, rs.slice = a->spec.slice;
  return cudaSuccess;
}

int32_t Session::on_MipmappedArrayCreate(const MipmappedArrayCreateReq& rq, std::span<const uint8_t>,
                                         MipmappedArrayCreateResp& rs, std::vector<uint8_t>&) {
  if (rq.levels == 0 || rq.levels > 18) return cudaErrorInvalidValue;  // 2^17: kMaxW
  if (rq.width == 0 || (rq.width >> (rq.levels - 1)) == 0) return cudaErrorInvalidValue;
  const int32_t f[5] = {rq.fx, rq.fy, rq.fz, rq.fw, rq.fkind};
  uint64_t mh = mipmaps_.add(std::make_unique<MipmapEntry>());
  if (!mh) return cudaErrorMemoryAllocation;
  MipmapEntry* m = mipmaps_.get(mh);
  const bool layered = rq.flags & cudaArrayLayered;
  for (uint32_t l = 0; l < rq.levels; ++l) {
    auto shrink = [&](uint64_t v) { return v == 0 ? 0 : std::max<uint64_t>(1, v >> l); };
    uint64_t a = 0;
    Err e = array_make(f, rq.flags, shrink(rq.width), shrink(rq.height), layered ? rq.depth : shrink(rq.depth), mh, &a);
    if (e != cudaSuccess) {
      for (uint64_t x : m->levels)
        if (ArrayEntry* ae = arrays_.get(x)) {
          array_release(*ae);
          arrays_.take(x);
        }
      mipmaps_.take(mh);
      return e;
    }
    m->levels.push_back(a);
  }
  rs.mipmap = mh;
  return cudaSuccess;
}

int32_t Session::on_MipmappedArrayGetLevel(const MipmappedArrayGetLevelReq& rq, std::span<const uint8_t>,
                                           MipmappedArrayGetLevelResp& rs, std::vector<uint8_t>&) {
  const MipmapEntry* m = mipmaps_.get(rq.mipmap);
  if (!m || rq.level >= m->levels.size()) return cudaErrorInvalidValue;
  rs.array = m->levels[rq.level];
  return cudaSuccess;
}

int32_t Session::on_MipmappedArrayDestroy(const MipmappedArrayDestroyReq& rq, std::span<const uint8_t>,
                                          MipmappedArrayDestroyResp&, std::vector<uint8_t>&) {
  MipmapEntry* m = mipmaps_.get(rq.mipmap);
  if (!m) return cudaErrorInvalidValue;
  ctx_->synchronize();
  for (uint64_t x : m->levels)
    if (ArrayEntry* a = arrays_.get(x)) {
      array_release(*a);
      arrays_.take(x);
    }
  mipmaps_.take(rq.mipmap);
  return cudaSuccess;
}

int32_t Session::on_TexObjectCreate(const TexObjectCreateReq& rq, std::span<const uint8_t>, TexObjectCreateResp& rs,
                                    std::vector<uint8_t>&) {
  if (texobjs_.size() >= kMaxObjects) return cudaErrorMemoryAllocation;
  TexSpec t;
  switch (rq.res_type) {
    case cudaResourceTypeArray:
    case cudaResourceTypeMipmappedArray: {
      uint64_t ah = rq.res;
      uint32_t levels = 1;
      if (rq.res_type == cudaResourceTypeMipmappedArray) {
        const MipmapEntry* m = mipmaps_.get(rq.res);
        if (!m || m->levels.empty()) return cudaErrorInvalidResourceHandle;
        ah = m->levels[0];  // the sim device samples level 0
        levels = uint32_t(m->levels.size());
      }
      const ArrayEntry* a = arrays_.get(ah);
      if (!a) return cudaErrorInvalidResourceHandle;
      t = a->spec;
      t.levels = levels;
      break;
    }
    case cudaResourceTypeLinear:
    case cudaResourceTypePitch2D: {
      const int32_t f[5] = {rq.fx, rq.fy, rq.fz, rq.fw, rq.fkind};
      if (!channel_format(f, &t.nch, &t.cbytes, &t.ckind)) return cudaErrorInvalidChannelDescriptor;
      const uint64_t elem = uint64_t(t.nch) * t.cbytes;
      if (rq.res == 0) return cudaErrorInvalidValue;
      t.dptr = rq.res;
      if (rq.res_type == cudaResourceTypeLinear) {
        if (rq.bytes == 0 || rq.bytes % elem || rq.bytes / elem > kMaxLinearElems) return cudaErrorInvalidValue;
        t.dims = 1;
        t.linear_mem = true;
        t.w = uint32_t(rq.bytes / elem);
        t.pitch = t.slice = t.bytes = rq.bytes;
      } else {
        if (rq.width == 0 || rq.height == 0 || rq.width > kMaxW || rq.height > kMaxH) return cudaErrorInvalidValue;
        const uint64_t row = rq.width * elem;
        if (rq.pitch < row || rq.pitch % kPitchAlign) return cudaErrorInvalidPitchValue;
        uint64_t span;
        if (!mul_ok(rq.pitch, rq.height - 1, &span) || span > UINT64_MAX - row) return cudaErrorInvalidValue;
        t.dims = 2;
        t.w = uint32_t(rq.width), t.h = uint32_t(rq.height);
        t.pitch = rq.pitch;
        t.bytes = t.slice = span + row;
      }
      if (!device_range(t.dptr, t.bytes)) return cudaErrorInvalidValue;
      break;
    }
    default: return cudaErrorInvalidValue;
  }
  for (int k = 0; k < 3; ++k) {
    if (rq.addr[k] > cudaAddressModeBorder) return cudaErrorInvalidValue;
    t.addr[k] = uint8_t(rq.addr[k]);
  }
  if (rq.filter > cudaFilterModeLinear || rq.read_mode > cudaReadModeNormalizedFloat) return cudaErrorInvalidValue;
  // Normalized-float reads exist only for 8- and 16-bit integer formats.
  if (rq.read_mode == cudaReadModeNormalizedFloat && (t.ckind == cudaChannelFormatKindFloat || t.cbytes == 4))
    return cudaErrorInvalidValue;
  t.filter_linear = rq.filter == cudaFilterModeLinear;
  t.read_normalized = rq.read_mode == cudaReadModeNormalizedFloat;
  t.norm_coords = rq.norm != 0;
  t.srgb = rq.srgb != 0;
  for (int k = 0; k < 4; ++k) t.border[k] = std::isfinite(rq.border[k]) ? rq.border[k] : 0.0f;
  uint64_t obj = 0;
  if (Err e = ctx_->texture_create(t, false, &obj); e != cudaSuccess) return e;
  texobjs_[obj] = {false, t};
  rs.obj = obj;
  return cudaSuccess;
}

int32_t Session::on_TexObjectDestroy(const TexObjectDestroyReq& rq, std::span<const uint8_t>, TexObjectDestroyResp&,
                                     std::vector<uint8_t>&) {
  if (rq.obj == 0) return cudaSuccess;
  auto it = texobjs_.find(rq.obj);
  if (it == texobjs_.end() || it->second.surface) return cudaErrorInvalidValue;
  ctx_->synchronize();
  texobjs_.erase(it);
  return ctx_->texture_destroy(rq.obj, false);
}

int32_t Session::on_SurfObjectCreate(const SurfObjectCreateReq& rq, std::span<const uint8_t>, SurfObjectCreateResp& rs,
                                     std::vector<uint8_t>&) {
  if (texobjs_.size() >= kMaxObjects) return cudaErrorMemoryAllocation;
  const ArrayEntry* a = arrays_.get(rq.array);
  if (!a) return cudaErrorInvalidResourceHandle;
  if (!(a->flags & cudaArraySurfaceLoadStore)) return cudaErrorInvalidValue;
  uint64_t obj = 0;
  if (Err e = ctx_->texture_create(a->spec, true, &obj); e != cudaSuccess) return e;
  texobjs_[obj] = {true, a->spec};
  rs.obj = obj;
  return cudaSuccess;
}

int32_t Session::on_SurfObjectDestroy(const SurfObjectDestroyReq& rq, std::span<const uint8_t>, SurfObjectDestroyResp&,
                                      std::vector<uint8_t>&) {
  if (rq.obj == 0) return cudaSuccess;
  auto it = texobjs_.find(rq.obj);
  if (it == texobjs_.end() || !it->second.surface) return cudaErrorInvalidValue;
  ctx_->synchronize();
  texobjs_.erase(it);
  return ctx_->texture_destroy(rq.obj, true);
}

}  // namespace wh::server
