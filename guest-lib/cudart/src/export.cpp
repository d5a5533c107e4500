// C entry points libcudart.so.13 offers to Wormhole's other guest libraries
// (libcublas.so.13): they must share this process's single connection and
// server session, since device pointers from cudaMalloc are valid only in
// that session. Exported as wh_guest_* (libcudart.map); everything else in
// this library stays local.
#include <algorithm>
#include <cstring>

#include "connection.hpp"
#include "state.hpp"

using namespace wh::guest;
using namespace wh::proto;

extern "C" {

// The process's wh::guest::Connection*, connecting on first use; nullptr
// when no server can be reached.
__attribute__((visibility("default"))) void* wh_guest_connection(void) { return Connection::get(); }

// One request of the API table by opcode, for a library that cannot call the
// typed templates across the shared-object boundary (they need this
// library's hidden symbols). The request's fixed part must be exactly the
// opcode's struct; the response's fixed part is copied to `rs` (rs_len
// bytes at most). posted != 0 posts it (no response). Returns a cudaError_t.
__attribute__((visibility("default"))) int wh_guest_call(uint16_t op, const void* rq, size_t rq_len,
                                                         const void* tail, size_t tail_len, void* rs, size_t rs_len,
                                                         int posted) {
  Connection* c = Connection::get();
  if (!c) return cudaErrorDevicesUnavailable;
  // cuBLAS work is not recorded into graphs: on a capturing stream it is
  // refused (and the capture invalidated) rather than run at once. Every
  // cuBLAS request after BlasDestroy starts with its handle and stream.
  if (capture_any() && op > uint16_t(Op::BlasDestroy) && op < uint16_t(Op::Count) && rq_len >= 16) {
    uint64_t stream;
    std::memcpy(&stream, static_cast<const uint8_t*>(rq) + 8, sizeof stream);
    if (stream_capturing(reinterpret_cast<cudaStream_t>(stream)))
      return capture_check_unsafe(reinterpret_cast<cudaStream_t>(stream));
  }
  std::span<const uint8_t> t(static_cast<const uint8_t*>(tail), tail_len);
  switch (Op(op)) {
#define WH_X_RAW(Name, K, RQ, RS)                                                   \
  case Op::Name: {                                                                  \
    Name##Req r{};                                                                  \
    if (rq_len != wire_size<Name##Req>) return cudaErrorInvalidValue;              \
    if (rq_len) std::memcpy(&r, rq, rq_len);                                        \
    if (posted) return c->post<Op::Name>(r, t);                                     \
    Name##Resp s{};                                                                 \
    cudaError_t e = c->call<Op::Name>(r, &s, t, nullptr);                           \
    if (rs && rs_len) std::memcpy(rs, &s, std::min(rs_len, wire_size<Name##Resp>)); \
    return e;                                                                       \
  }
    WH_ALL_OPS(WH_X_RAW)
#undef WH_X_RAW
    default:
      return cudaErrorInvalidValue;
  }
}

}  // extern "C"
