// How Wormhole's library drop-ins (libcublas, libcublasLt, libcufft,
// libcurand) reach wormhole-server: through the connection of the process's
// libcudart.so.13 (Wormhole's), so their work runs in the same server
// session as cudaMalloc and kernel launches, in issue order. libcudart
// exports wh_guest_call(); the typed wrappers keep the API table's structs
// on both sides. Header-only: each library gets its own copy.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <mutex>
#include <set>
#include <string>

#include "wormhole/guest_abi.h"
#include "wormhole/proto/wire.hpp"


namespace wh::guest::lib {

// A synchronous request: waits for the response's fixed part in *rs.
template <proto::Op O>
cudaError_t call(const typename proto::OpTraits<O>::Request& rq, typename proto::OpTraits<O>::Response* rs) {
  return cudaError_t(wh_guest_call(uint16_t(O), &rq, proto::wire_size<typename proto::OpTraits<O>::Request>, nullptr, 0,
                                   rs, proto::wire_size<typename proto::OpTraits<O>::Response>, 0));
}
// A posted request: in stream order, errors at the next synchronising call.
template <proto::Op O>
cudaError_t post(const typename proto::OpTraits<O>::Request& rq) {
  return cudaError_t(wh_guest_call(uint16_t(O), &rq, proto::wire_size<typename proto::OpTraits<O>::Request>, nullptr, 0,
                                   nullptr, 0, 1));
}

// "wormhole: WHAT" on stderr, once per message.
inline void log_once(const std::string& what) {
  static std::mutex mu;
  static std::set<std::string> seen;
  std::lock_guard lk(mu);
  if (seen.insert(what).second) std::fprintf(stderr, "wormhole: %s\n", what.c_str());
}

}  // namespace wh::guest::lib
