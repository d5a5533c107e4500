// wormhole/proto/dispatch.hpp - the server's decoder and dispatch, generated
// from the API table. A Handler has, for every table line,
//   int32_t on_Name(const NameReq&, std::span<const uint8_t> tail,
//                   NameResp&, std::vector<uint8_t>& resp_tail);
// returning a cudaError_t value. The decoder checks the fixed part's size and
// the tail's bound before the handler sees anything.
#pragma once

#include <vector>

#include "wormhole/proto/wire.hpp"

namespace wh::proto {

struct DispatchResult {
  int32_t status = 0;
  std::vector<uint8_t> fixed;  // encoded response struct
  std::vector<uint8_t> tail;   // response tail
};

template <class Handler>
void dispatch(Handler& h, uint16_t opcode, std::span<const uint8_t> payload, uint32_t max_msg,
              DispatchResult& out) {
  out.fixed.clear();
  out.tail.clear();
  switch (Op(opcode)) {
#define WH_X_CASE(Name, K, RQ, RS)                                              \
  case Op::Name: {                                                                 \
    Name##Req rq{};                                                                \
    std::span<const uint8_t> tail;                                                 \
    if (!decode_fixed(payload, rq, tail) || tail.size() > request_tail_max(Op::Name, max_msg)) { \
      out.status = kBadRequest;                                                    \
      return;                                                                      \
    }                                                                              \
    Name##Resp rs{};                                                               \
    out.status = h.on_##Name(rq, tail, rs, out.tail);                              \
    auto b = fixed_bytes(rs);                                                      \
    out.fixed.assign(b.begin(), b.end());                                          \
    return;                                                                        \
  }
    WH_ALL_OPS(WH_X_CASE)
#undef WH_X_CASE
    default:
      out.status = kUnknownOp;
      return;
  }
}

}  // namespace wh::proto
