// The sim device's FFT: cuFFT semantics computed by FFTW (fftw3 for double,
// fftw3f for single precision) directly on the sim device's memory
// (Context::host_view). Executions run on the session's thread in call
// order, like every other sim device operation, so stream order holds.
//
// FFTW plans are made lazily, at the first execution with a given shape of
// arguments (direction, in-place or not, alignment of each pointer), with
// FFTW_ESTIMATE, which never touches the arrays it is given; later
// executions reuse them through FFTW's new-array execute functions, which
// require exactly those properties to match. FFTW's planner is not
// thread-safe (sessions run on their own threads): one mutex guards every
// planner call, plan destruction included.
//
// 16-bit plans (cufftXtMakePlanMany with half or bf16 data) compute in
// single precision, as cuFFT does: each side's span is widened into a float
// copy with the same layout, transformed there, and the output span rounded
// back (to nearest even). Elements of the output span that the transform
// does not write go through the copy unchanged (16 -> 32 -> 16 bits is exact).
#include <fftw3.h>

#include <map>
#include <mutex>
#include <tuple>
#include <vector>
#include <cstring>

#include "wormhole/server/blaslt.hpp"
#include "wormhole/server/fft.hpp"

namespace wh::server {

namespace {

std::mutex& planner_mutex() {
  static std::mutex mu;
  return mu;
}

// What a new-array execute must share with the plan it reuses.
using PlanKey = std::tuple<int, bool, int, int>;  // direction, in-place, alignment of in, of out

struct SimPlan : FftPlan {
  std::map<PlanKey, void*> plans;  // fftw_plan or fftwf_plan
  bool dbl = false;
  std::vector<float> in32, out32;  // 16-bit plans: the widened spans
  ~SimPlan() override {
    std::lock_guard lk(planner_mutex());
    for (auto& [k, p] : plans) {
      if (dbl)
        fftw_destroy_plan(static_cast<fftw_plan>(p));
      else
        fftwf_destroy_plan(static_cast<fftwf_plan>(p));
    }
  }
};

// Highest index one side reaches, plus one (elements); the session has
// checked that it neither overflows nor leaves the session's memory.
uint64_t side_elems(int rank, const int64_t* dims, const FftSide& s, int64_t batch) {
  uint64_t inner = 0, scale = 1;
  for (int k = rank - 1; k >= 0; k--) {
    inner += uint64_t(dims[k] - 1) * scale;
    scale *= uint64_t(s.embed[k]);
  }
  return uint64_t(batch - 1) * uint64_t(s.dist) + inner * uint64_t(s.stride) + 1;
}

class SimFft final : public Fft {
 public:
  explicit SimFft(Context& ctx) : ctx_(ctx) {}

  Err create(const FftDesc& d, std::unique_ptr<FftPlan>* out) override {
    auto p = std::make_unique<SimPlan>();
    p->dbl = fft_is_double(d.type);
    *out = std::move(p);
    return cudaSuccess;
  }
  // FFTW keeps its scratch memory to itself: no work area on the device.
  uint64_t work_size(const FftPlan&) override { return 0; }

  Err exec(FftPlan& fp, const FftDesc& d, const FftLayout& l, Stream*, uint64_t in, uint64_t out,
           int direction) override {
    auto& p = static_cast<SimPlan&>(fp);
    const uint64_t in_bytes = side_elems(d.rank, l.in_dims, l.in, d.batch) * uint64_t(l.in_es);
    const uint64_t out_bytes = side_elems(d.rank, l.out_dims, l.out, d.batch) * uint64_t(l.out_es);
    // A GPU faults on a misaligned operand; the server must not form a
    // misaligned pointer either (device and host addresses share alignment).
    const bool narrow = d.storage != FftStorage::Native;
    const uint64_t align = p.dbl ? 8 : narrow ? 2 : 4;
    if (in % align || out % align) return cudaErrorMisalignedAddress;
    uint8_t* hi = ctx_.host_view(in, in_bytes);
    uint8_t* ho = ctx_.host_view(out, out_bytes);
    if (!hi || !ho) return cudaErrorIllegalAddress;
    if (fft_is_r2c(d.type) || fft_is_c2r(d.type)) direction = 0;
    const bool in_place = in == out;
    uint8_t *wide_in = hi, *wide_out = ho;
    const bool bf16 = d.storage == FftStorage::Bf16;
    if (narrow) {
      widen(hi, in_bytes / 2, bf16, p.in32);
      wide_in = reinterpret_cast<uint8_t*>(p.in32.data());
      if (in_place) {
        wide_out = wide_in;
      } else {
        widen(ho, out_bytes / 2, bf16, p.out32);
        wide_out = reinterpret_cast<uint8_t*>(p.out32.data());
      }
    }
    if (Err e = run(p, d, l, wide_in, wide_out, in_place, direction); e != cudaSuccess) return e;
    if (narrow) {
      const float* w = in_place ? p.in32.data() : p.out32.data();
      for (uint64_t i = 0; i < out_bytes / 2; i++) {
        const uint16_t v = bf16 ? lt_float_to_bf16(w[i]) : lt_float_to_half(w[i]);
        std::memcpy(ho + 2 * i, &v, 2);
      }
    }
    return cudaSuccess;
  }

 private:
  static void widen(const uint8_t* src, uint64_t n, bool bf16, std::vector<float>& out) {
    out.resize(n);
    for (uint64_t i = 0; i < n; i++) {
      uint16_t v;
      std::memcpy(&v, src + 2 * i, 2);
      out[i] = bf16 ? lt_bf16_to_float(v) : lt_half_to_float(v);
    }
  }

  // The FFTW execution on memory in the plan's computing precision.
  Err run(SimPlan& p, const FftDesc& d, const FftLayout& l, uint8_t* hi, uint8_t* ho, bool in_place,
          int direction) {
    PlanKey key{direction, in_place, fftw_alignment_of(reinterpret_cast<double*>(hi)),
                fftw_alignment_of(reinterpret_cast<double*>(ho))};
    void* plan;
    {
      std::lock_guard lk(planner_mutex());
      auto it = p.plans.find(key);
      if (it == p.plans.end()) {
        plan = make_plan(d, l, hi, ho, direction);
        if (!plan) return cudaErrorNotSupported;
        p.plans.emplace(key, plan);
      } else {
        plan = it->second;
      }
    }
    if (p.dbl) {
      auto pl = static_cast<fftw_plan>(plan);
      if (d.type == 0x69)
        fftw_execute_dft(pl, reinterpret_cast<fftw_complex*>(hi), reinterpret_cast<fftw_complex*>(ho));
      else if (d.type == 0x6a)
        fftw_execute_dft_r2c(pl, reinterpret_cast<double*>(hi), reinterpret_cast<fftw_complex*>(ho));
      else
        fftw_execute_dft_c2r(pl, reinterpret_cast<fftw_complex*>(hi), reinterpret_cast<double*>(ho));
    } else {
      auto pl = static_cast<fftwf_plan>(plan);
      if (d.type == 0x29)
        fftwf_execute_dft(pl, reinterpret_cast<fftwf_complex*>(hi), reinterpret_cast<fftwf_complex*>(ho));
      else if (d.type == 0x2a)
        fftwf_execute_dft_r2c(pl, reinterpret_cast<float*>(hi), reinterpret_cast<fftwf_complex*>(ho));
      else
        fftwf_execute_dft_c2r(pl, reinterpret_cast<fftwf_complex*>(hi), reinterpret_cast<float*>(ho));
    }
    return cudaSuccess;
  }

  // Called with the planner mutex held. The session bounded every size,
  // stride and distance to int (FFTW's argument type).
  static void* make_plan(const FftDesc& d, const FftLayout& l, uint8_t* hi, uint8_t* ho, int direction) {
    int n[3], ie[3], oe[3];
    for (int k = 0; k < d.rank; k++) {
      n[k] = int(d.n[k]);
      ie[k] = int(l.in.embed[k]);
      oe[k] = int(l.out.embed[k]);
    }
    const int b = int(d.batch), is = int(l.in.stride), id = int(l.in.dist), os = int(l.out.stride),
              od = int(l.out.dist);
    const unsigned f = FFTW_ESTIMATE;
    const int sign = direction < 0 ? FFTW_FORWARD : FFTW_BACKWARD;
    switch (d.type) {
      case 0x29:
        return fftwf_plan_many_dft(d.rank, n, b, reinterpret_cast<fftwf_complex*>(hi), ie, is, id,
                                   reinterpret_cast<fftwf_complex*>(ho), oe, os, od, sign, f);
      case 0x2a:
        return fftwf_plan_many_dft_r2c(d.rank, n, b, reinterpret_cast<float*>(hi), ie, is, id,
                                       reinterpret_cast<fftwf_complex*>(ho), oe, os, od, f);
      case 0x2c:
        return fftwf_plan_many_dft_c2r(d.rank, n, b, reinterpret_cast<fftwf_complex*>(hi), ie, is, id,
                                       reinterpret_cast<float*>(ho), oe, os, od, f);
      case 0x69:
        return fftw_plan_many_dft(d.rank, n, b, reinterpret_cast<fftw_complex*>(hi), ie, is, id,
                                  reinterpret_cast<fftw_complex*>(ho), oe, os, od, sign, f);
      case 0x6a:
        return fftw_plan_many_dft_r2c(d.rank, n, b, reinterpret_cast<double*>(hi), ie, is, id,
                                      reinterpret_cast<fftw_complex*>(ho), oe, os, od, f);
      case 0x6c:
        return fftw_plan_many_dft_c2r(d.rank, n, b, reinterpret_cast<fftw_complex*>(hi), ie, is, id,
                                      reinterpret_cast<double*>(ho), oe, os, od, f);
    }
    return nullptr;
  }

  Context& ctx_;
};

}  // namespace

std::unique_ptr<Fft> make_sim_fft(Context& ctx) { return std::make_unique<SimFft>(ctx); }

}  // namespace wh::server
