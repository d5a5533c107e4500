// wormhole/server/blaslt.hpp - the cuBLASLt seam of a device backend: what
// the cuBLASLt service (server/blaslt_service.cpp) calls.
//
// A matmul arrives as the whole LtMatmul request (cublaslt_api.def)
// after the session has run lt_check (proto/cublaslt_check.hpp) on it and
// checked the device range of every operand, the bias and aux vectors, the
// device scalars and the workspace against the session's memory. The
// backend computes D = epilogue(alpha * op(A) op(B) + beta * C [+ bias])
// per batch, cuBLASLt semantics.
//
// Implementations: sim_blaslt.cpp (OpenBLAS sgemm on the sim device's
// memory, fp16/bf16 converted to fp32, the epilogue on the host),
// cuda_blaslt.cpp (NVIDIA's libcublasLt.so.13, dlopen'ed).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "wormhole/proto/cublaslt_check.hpp"
#include "wormhole/server/backend.hpp"

namespace wh::server {

// One guest cuBLASLt handle's backend state.
struct LtHandle {
  virtual ~LtHandle() = default;
};

class BlasLt {
 public:
  virtual ~BlasLt() = default;
  virtual Err create(std::unique_ptr<LtHandle>* out) = 0;
  virtual int version() const = 0;  // cublasLtGetVersion's answer
  // `s` nullptr: the legacy default stream.
  virtual Err matmul(LtHandle& h, Stream* s, const proto::LtMatmulReq& r, const proto::LtShape& shape) = 0;
  // cublasLtMatrixTransform, checked by lt_transform_check and the session.
  virtual Err transform(LtHandle& h, Stream* s, const proto::LtTransformReq& r,
                        const proto::LtTransformShape& shape) = 0;
};

// The sim device's cuBLASLt: OpenBLAS and host code over `ctx.host_view()`.
std::unique_ptr<BlasLt> make_sim_blaslt(Context& ctx);
// The GPU's cuBLASLt: libcublasLt.so.13 through dlopen; `make_current`
// makes the session's CUDA context current. nullptr (and *err) when the
// library cannot be loaded.
std::unique_ptr<BlasLt> make_cuda_blaslt(std::function<void()> make_current, std::string* err);

// fp16 / bf16 <-> fp32, round to nearest even (no dependency on a compiler's
// _Float16 or on CUDA's headers).
inline float lt_half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1F, man = h & 0x3FF, bits;
  if (exp == 0x1F) {
    bits = sign | 0x7F800000 | (man << 13);
  } else if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        man <<= 1;
        e++;
      } while (!(man & 0x400));
      bits = sign | uint32_t(127 - 15 - e) << 23 | (man & 0x3FF) << 13;
    }
  } else {
    bits = sign | (exp + 112) << 23 | man << 13;
  }
  float f;
  __builtin_memcpy(&f, &bits, 4);
  return f;
}
inline uint16_t lt_float_to_half(float f) {
  uint32_t x;
  __builtin_memcpy(&x, &f, 4);
  const uint16_t sign = uint16_t((x >> 16) & 0x8000);
  const uint32_t ax = x & 0x7FFFFFFF;
  if (ax >= 0x7F800000) return sign | 0x7C00 | (ax > 0x7F800000 ? 0x200 : 0);  // inf, NaN
  if (ax >= 0x477FF000) return sign | 0x7C00;                                   // rounds to inf
  if (ax < 0x38800000) {                                                        // subnormal or zero
    if (ax < 0x33000000) return sign;
    const uint32_t e = ax >> 23, man = (ax & 0x7FFFFF) | 0x800000;
    // value = man * 2^(e-150), in units of 2^-24 (the half subnormal step):
    // man >> (126 - e), rounded.
    const uint32_t shift = 126 - e;
    uint32_t v = man >> shift;
    const uint32_t rem = man & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (v & 1))) v++;
    return sign | uint16_t(v);
  }
  uint32_t v = ((ax >> 13) - (112 << 10));
  const uint32_t rem = ax & 0x1FFF;
  if (rem > 0x1000 || (rem == 0x1000 && (v & 1))) v++;
  return sign | uint16_t(v);
}
inline float lt_bf16_to_float(uint16_t b) {
  const uint32_t bits = uint32_t(b) << 16;
  float f;
  __builtin_memcpy(&f, &bits, 4);
  return f;
}
inline uint16_t lt_float_to_bf16(float f) {
  uint32_t x;
  __builtin_memcpy(&x, &f, 4);
  if ((x & 0x7FFFFFFF) > 0x7F800000) return uint16_t((x >> 16) | 0x40);  // quiet NaN
  x += 0x7FFF + ((x >> 16) & 1);
  return uint16_t(x >> 16);
}

}  // namespace wh::server
