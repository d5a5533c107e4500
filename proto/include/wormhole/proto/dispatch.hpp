// wormhole/proto/dispatch.hpp - the server's decoder and dispatch, generated
// from the API tables. A Handler has, for every line of the tables it runs,
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

// The case of one operation: decode, check, call the handler, encode.
#define WH_DISPATCH_CASE(Name, K, RQ, RS)                                                         \
  case Op::Name: {                                                                                 \
    Name##Req rq{};                                                                                \
    std::span<const uint8_t> tail;                                                                 \
    if (!decode_fixed(payload, rq, tail) || tail.size() > request_tail_max(Op::Name, max_msg)) { \
      out.status = kBadRequest;                                                                    \
      return;                                                                                      \
    }                                                                                              \
    Name##Resp rs{};                                                                               \
    out.status = h.on_##Name(rq, tail, rs, out.tail);                                              \
    auto b = fixed_bytes(rs);                                                                      \
    out.fixed.assign(b.begin(), b.end());                                                          \
    return;                                                                                        \
  }

// WH_DISPATCH_BODY(Table): the statements that run one request of Table
// (an X-macro table such as WH_CUBLAS_OPS, or several) on handler `h`, given
// opcode, payload, max_msg and out; kUnknownOp for any other opcode.
#define WH_DISPATCH_BODY(Table)                                                                    \
  {                                                                                                \
    using namespace ::wh::proto;                                                                   \
    out.fixed.clear();                                                                             \
    out.tail.clear();                                                                              \
    switch (Op(opcode)) {                                                                          \
      Table(WH_DISPATCH_CASE) default : out.status = kUnknownOp;                                   \
      return;                                                                                      \
    }                                                                                              \
  }

// WH_DEFINE_DISPATCH(fn, Table): a function template
//   void fn(Handler& h, uint16_t opcode, payload, max_msg, DispatchResult&)
// running the operations of Table.
#define WH_DEFINE_DISPATCH(Fn, Table)                                                              \
  template <class Handler>                                                                         \
  void Fn(Handler& h, uint16_t opcode, std::span<const uint8_t> payload, uint32_t max_msg,        \
          ::wh::proto::DispatchResult& out) WH_DISPATCH_BODY(Table)

// WH_DECLARE_HANDLERS(Table): the handler of every operation of Table, as a
// member function declaration.
#define WH_HANDLER_DECL(Name, K, RQ, RS)                                                          \
  int32_t on_##Name(const ::wh::proto::Name##Req& rq, std::span<const uint8_t> tail,              \
                    ::wh::proto::Name##Resp& rs, std::vector<uint8_t>& rtail);
#define WH_DECLARE_HANDLERS(Table) Table(WH_HANDLER_DECL)

}  // namespace wh::proto
