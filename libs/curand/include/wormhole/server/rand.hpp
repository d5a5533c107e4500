// wormhole/server/rand.hpp - the random-number seam of a device backend: what
// the cuRAND service (server/rand_service.cpp) calls. cuRAND host-API
// semantics: a generator of one curandRngType_t with a seed, an offset, an
// ordering and (quasirandom) a number of dimensions; each generation writes
// n values of one distribution into device memory and advances the offset.
//
// The session has checked the generator type, the settings, n against the
// type (multiple of the dimensions, even for pseudorandom normals), the
// distribution's parameters and the device range the output spans.
//
// Implementations: sim_rand.cpp (cuRAND's algorithms computed on the sim
// device's host memory), cuda_rand.cpp (NVIDIA's libcurand.so.10, dlopen'ed).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "wormhole/server/backend.hpp"

namespace wh::server {

struct RandSettings {
  int type = 0;  // curandRngType_t (never a DEFAULT alias)
  uint64_t seed = 0;
  uint64_t offset = 0;
  int ordering = 0;
  uint32_t dims = 1;
};

// One generator's backend state.
struct RandGen {
  virtual ~RandGen() = default;
};

class Rand {
 public:
  virtual ~Rand() = default;
  virtual Err create(const RandSettings& s, std::unique_ptr<RandGen>* out) = 0;
  // New settings (the fields `what` names, proto::kRandSet* bits, changed).
  virtual Err set(RandGen& g, const RandSettings& s, uint32_t what) = 0;
  // n values of `kind` (proto::RandKind) at device address `out`, in
  // stream order; `s` nullptr: the legacy default stream. `st` holds the
  // settings the values start from (the session advances its offset).
  virtual Err generate(RandGen& g, const RandSettings& st, Stream* s, int kind, uint64_t out, uint64_t n, double p0,
                       double p1) = 0;
};

// Bytes of one value of a kind (4 or 8).
inline uint64_t rand_value_bytes(int kind) {
  return (kind == 2 || kind == 4 || kind == 6 || kind == 8) ? 8 : 4;
}

// The sim device's generators over `ctx.host_view()`.
std::unique_ptr<Rand> make_sim_rand(Context& ctx);
// The GPU's: libcurand.so.10 through dlopen; `make_current` as for
// make_cuda_blas. nullptr (and *err) when libcurand.so.10 cannot be loaded.
std::unique_ptr<Rand> make_cuda_rand(std::function<void()> make_current, std::string* err);

}  // namespace wh::server
