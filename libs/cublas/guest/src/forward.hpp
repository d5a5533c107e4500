// How libcublas.so.13 reaches wormhole-server: through the connection of the
// process's libcudart.so.13 (Wormhole's drop-in), so cuBLAS calls run in the
// same server session as cudaMalloc and kernel launches, in issue order.
// libcudart exports wh_guest_connection() and wh_guest_call(); the typed
// wrappers below keep the API table's structs on both sides.
#pragma once

#include <cublas_v2.h>

#include "wormhole/cublas_status.hpp"
#include "wormhole/library_call.hpp"
#include "wormhole/lt_handle.hpp"
#include "wormhole/guest_abi.h"
#include "wormhole/proto/wire.hpp"

// The guest side of a cuBLAS handle.
struct cublasContext {
  cublasLtContext lt;  // first: the handle cast to a cublasLtHandle_t is this one
  uint64_t server = 0;  // the session's handle (BlasCreate)
  cudaStream_t stream = nullptr;
  cublasPointerMode_t pmode = CUBLAS_POINTER_MODE_HOST;
  cublasMath_t math = CUBLAS_DEFAULT_MATH;
  cublasAtomicsMode_t atomics = CUBLAS_ATOMICS_NOT_ALLOWED;
  int environment_mode = 0;  // cublasSetEnvironmentMode (undocumented; cuSOLVER sets it on its handle)
  int version = CUBLAS_VERSION;
};

namespace wh::guest::blas {

inline bool connected() { return wh_guest_connection() != nullptr; }

using wh::guest::lib::call;
using wh::guest::lib::post;

void log_once(const char* what);

}  // namespace wh::guest::blas
