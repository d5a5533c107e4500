// wormhole/server/fft.hpp - the FFT seam of a device backend: what the
// cuFFT service (server/fft_service.cpp) calls. cuFFT semantics: rank 1..3
// transforms, batched with cufftPlanMany's advanced layout, unnormalised,
// forward = exponent sign -1.
//
// The session has checked the plan (rank, sizes, type, batch, layout) when
// it was made and, before every execution, the device range each side of
// the transform spans (fft_span). The layout the backend receives is always
// explicit: the session resolves the basic layout (NULL embed) into
// embed/stride/dist, in-place or out-of-place, as cuFFT defines it.
//
// Implementations: sim_fft.cpp (FFTW on the sim device's host memory),
// cuda_fft.cpp (NVIDIA's libcufft.so.12, dlopen'ed).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "wormhole/server/backend.hpp"

namespace wh::server {

// One side (input or output) of a transform, in elements of that side's
// type (real or complex).
struct FftSide {
  int64_t embed[3] = {0, 0, 0};
  int64_t stride = 1, dist = 0;
};

// How a plan's elements are stored: the cufftType's own precision, or the
// 16-bit formats of cufftXtMakePlanMany (computed in single precision).
enum class FftStorage { Native, Half, Bf16 };

struct FftDesc {
  int rank = 1;
  int64_t n[3] = {0, 0, 0};  // logical sizes (the real side's for R2C/C2R)
  int type = 0;              // cufftType (single precision when storage is 16-bit)
  FftStorage storage = FftStorage::Native;
  int64_t batch = 1;
  bool advanced = false;  // the guest gave inembed/onembed (else basic layout)
  FftSide in, out;        // as given (advanced only)
};

// The layout one execution uses: in-place changes the basic layout of R2C
// and C2R (the real side is padded to 2*(n/2+1) in its last dimension).
struct FftLayout {
  FftSide in, out;
  int64_t in_dims[3], out_dims[3];  // logical extents of each side
  int in_es = 0, out_es = 0;        // bytes per element of each side
};

inline bool fft_is_double(int type) { return type == 0x6a || type == 0x6c || type == 0x69; }
inline bool fft_is_r2c(int type) { return type == 0x2a || type == 0x6a; }
inline bool fft_is_c2r(int type) { return type == 0x2c || type == 0x6c; }
inline bool fft_valid_type(int type) {
  return type == 0x2a || type == 0x2c || type == 0x29 || type == 0x6a || type == 0x6c || type == 0x69;
}

// Resolves the layout of one execution of a (validated) plan.
inline FftLayout fft_layout(const FftDesc& d, bool in_place) {
  FftLayout l;
  const int r = d.rank;
  const int real_es = d.storage != FftStorage::Native ? 2 : fft_is_double(d.type) ? 8 : 4, cplx_es = 2 * real_es;
  const int64_t half = d.n[r - 1] / 2 + 1;
  for (int k = 0; k < r; k++) l.in_dims[k] = l.out_dims[k] = d.n[k];
  l.in_es = l.out_es = cplx_es;
  if (fft_is_r2c(d.type)) {
    l.out_dims[r - 1] = half;
    l.in_es = real_es;
  } else if (fft_is_c2r(d.type)) {
    l.in_dims[r - 1] = half;
    l.out_es = real_es;
  }
  if (d.advanced) {
    l.in = d.in;
    l.out = d.out;
    return l;
  }
  // Basic layout: contiguous, one transform after another; an in-place real
  // side is padded to the complex side's size in bytes.
  auto basic = [&](FftSide& s, const int64_t* dims, bool real) {
    int64_t total = 1;
    for (int k = 0; k < r; k++) {
      s.embed[k] = dims[k];
      if (k == r - 1 && real && in_place) s.embed[k] = 2 * half;
      total *= s.embed[k];
    }
    s.stride = 1;
    s.dist = total;
  };
  basic(l.in, l.in_dims, fft_is_r2c(d.type));
  basic(l.out, l.out_dims, fft_is_c2r(d.type));
  return l;
}

// One plan's backend state.
struct FftPlan {
  virtual ~FftPlan() = default;
};

class Fft {
 public:
  virtual ~Fft() = default;
  virtual Err create(const FftDesc& d, std::unique_ptr<FftPlan>* out) = 0;
  // The work area cuFFT would ask for (cufftGetSize).
  virtual uint64_t work_size(const FftPlan& p) = 0;
  // direction: -1 forward, +1 inverse (ignored for R2C/C2R). `s` nullptr:
  // the legacy default stream.
  virtual Err exec(FftPlan& p, const FftDesc& d, const FftLayout& l, Stream* s, uint64_t in, uint64_t out,
                   int direction) = 0;
};

// The sim device's FFT: FFTW over `ctx.host_view()`.
std::unique_ptr<Fft> make_sim_fft(Context& ctx);
// The GPU's FFT: libcufft.so.12 through dlopen; `make_current` as for
// make_cuda_blas. nullptr (and *err) when libcufft.so.12 cannot be loaded.
std::unique_ptr<Fft> make_cuda_fft(std::function<void()> make_current, std::string* err);

}  // namespace wh::server
