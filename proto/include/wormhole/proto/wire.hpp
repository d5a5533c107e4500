// wormhole/proto/wire.hpp - opcodes, message structs and limits generated
// from the API table (cudart_api.def). Shared by guest-lib and the server.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>

#include "wormhole/proto/cublas_api.def"
#include "wormhole/proto/cublaslt_api.def"
#include "wormhole/proto/cudart_api.def"
#include "wormhole/proto/cudnn_api.def"
#include "wormhole/proto/cufft_api.def"
#include "wormhole/proto/curand_api.def"
#include "wormhole/proto/remote_api.def"
#include "wormhole/proto/peer_api.def"
#include "wormhole/region.h"

// Every forwarded library's table, in one opcode numbering.
#define WH_ALL_OPS(X) WH_CUDART_OPS(X) WH_CUBLAS_OPS(X) WH_CUFFT_OPS(X) WH_CUBLASLT_OPS(X) WH_CURAND_OPS(X) WH_CUDNN_OPS(X) WH_REMOTE_OPS(X) WH_PEER_OPS(X)

namespace wh::proto {

// Wire protocol version, negotiated in the socket handshake (min..max).
constexpr uint16_t kVersion = 2;
constexpr uint16_t kMinVersion = 2;

enum class Kind : uint8_t { Sync, Posted, Either };

// Opcode 0 is the ring's padding record (WH_OP_PAD); the table starts at 1.
enum class Op : uint16_t {
  Pad = WH_OP_PAD,
#define WH_X_ENUM(Name, K, RQ, RS) Name,
  WH_ALL_OPS(WH_X_ENUM)
#undef WH_X_ENUM
  Count
};
constexpr size_t kOpCount = size_t(Op::Count);

#define WH_X_STRUCTS(Name, K, RQ, RS) \
  struct Name##Req RQ;                  \
  struct Name##Resp RS;
WH_ALL_OPS(WH_X_STRUCTS)
#undef WH_X_STRUCTS

// Empty structs travel as zero bytes.
template <class T>
constexpr size_t wire_size = std::is_empty_v<T> ? 0 : sizeof(T);

template <Op O> struct OpTraits;
#define WH_X_TRAITS(Name, K, RQ, RS)                      \
  template <> struct OpTraits<Op::Name> {                    \
    using Request = Name##Req;                               \
    using Response = Name##Resp;                             \
    static constexpr Kind kind = Kind::K;                    \
    static constexpr const char* name = #Name;               \
    static_assert(std::is_trivially_copyable_v<Request>);    \
    static_assert(std::is_trivially_copyable_v<Response>);   \
  };
WH_ALL_OPS(WH_X_TRAITS)
#undef WH_X_TRAITS

inline const char* op_name(uint16_t op) {
  switch (Op(op)) {
#define WH_X_NAME(Name, K, RQ, RS) \
  case Op::Name: return #Name;
    WH_ALL_OPS(WH_X_NAME)
#undef WH_X_NAME
    default: return "?";
  }
}

inline Kind op_kind(uint16_t op) {
  switch (Op(op)) {
#define WH_X_KIND(Name, K, RQ, RS) \
  case Op::Name: return Kind::K;
    WH_ALL_OPS(WH_X_KIND)
#undef WH_X_KIND
    default: return Kind::Sync;
  }
}

// Largest variable tail a request of this opcode may carry (0: none).
constexpr uint32_t kMaxNameBytes = 4096;
constexpr uint32_t kMaxParamBytes = 32764;  // CUDA's kernel parameter limit
inline uint32_t request_tail_max(Op op, uint32_t max_msg) {
  switch (op) {
    case Op::MemcpyHtoDInline: return max_msg;
    case Op::ModuleGetKernel:
    case Op::ModuleGetGlobal:
    case Op::ModuleBindManaged: return kMaxNameBytes;
    case Op::Launch:
    case Op::GraphExecSetKernel: return kMaxParamBytes;
    case Op::GraphInstantiate: return max_msg;
    case Op::DataAreaWrite: return max_msg;  // ucx:// (remote_api.def)
    case Op::PeerPush: return uint32_t(kPeerUrlMax);  // the destination server (peer_api.def)
    default: return 0;
  }
}

// Launch flags (LaunchReq::flags).
constexpr uint32_t kLaunchCooperative = 1;  // cudaLaunchCooperativeKernel: grid.sync() allowed
// Programmatic dependent launch (launch attribute ProgrammaticStreamSerialization):
// the kernel may start before the previous one in its stream ends, and waits for
// it in griddepcontrol.wait. Running it after the previous kernel is also correct.
constexpr uint32_t kLaunchProgrammatic = 2;
constexpr uint32_t kLaunchFlags = kLaunchCooperative | kLaunchProgrammatic;

// Per-kernel parameter layout, as ModuleGetKernel returns it in its tail.
struct ParamInfo {
  uint32_t offset;
  uint32_t size;
};

// Status codes outside cudaError_t for protocol violations (never returned
// to applications: the guest maps them to cudaErrorUnknown).
constexpr int32_t kBadRequest = -1;  // malformed message
constexpr int32_t kUnknownOp = -2;

// Socket handshake (unix socket, before the ring is used).
constexpr uint32_t kHelloMagic = 0x4f4c4857;  // "WHLO"
struct Hello {
  uint32_t magic;
  uint16_t min_version, max_version;
  uint32_t pid;
  uint32_t reserved;
  uint64_t data_bytes;  // data area the client would like (0: default)
};
struct HelloReply {
  uint32_t magic;
  int32_t status;  // 0 ok, else a cudaError_t explaining the refusal
  uint16_t version;
  uint16_t reserved;
  uint32_t channel;  // the channel index to claim in the passed region
  uint64_t session_id;
  char message[96];  // a human-readable refusal reason
};

// The data area of a channel: a status page written by the server, copy
// staging slots, and the pinned-memory heap the guest manages.
struct DataAreaStatus {
  uint64_t copy_done_seq;   // highest done_seq of a finished staged copy
  uint64_t copy_error_seq;  // last done_seq whose copy failed
  uint64_t output_seq;      // bumped whenever device output waits for FetchOutput
  int32_t copy_error;       // the cudaError_t of the copy at copy_error_seq
  uint32_t reserved;
  uint8_t pad[4096 - 32];
};
static_assert(sizeof(DataAreaStatus) == 4096);

// Device output (kernel printf, device-assert messages, fault details): the
// server queues it per session and the guest fetches it (FetchOutput) at
// synchronising calls, tagged with the stream it belongs on.
constexpr uint32_t kOutputStdout = 1;
constexpr uint32_t kOutputStderr = 2;
constexpr uint64_t kPrintfFifoBytes = 1ull << 20;   // per launch: a GPU's default printf FIFO
constexpr uint64_t kPendingOutputMax = 4ull << 20;  // per session, not yet fetched
constexpr uint64_t kStagingOffset = 4096;
constexpr uint64_t kStagingSlots = 4;
constexpr uint64_t kStagingSlotBytes = 4ull << 20;
constexpr uint64_t kPinnedHeapOffset = kStagingOffset + kStagingSlots * kStagingSlotBytes;
// ucx:// transport: the largest MemcpyDtoHInline (and the chunk of large
// copies in either direction); well below any channel's max_msg.
constexpr uint64_t kRemoteChunkMax = 256ull << 10;

// Decodes the fixed part of a request; the rest of the payload is its tail.
template <class T>
bool decode_fixed(std::span<const uint8_t> payload, T& out, std::span<const uint8_t>& tail) {
  constexpr size_t n = wire_size<T>;
  if (payload.size() < n) return false;
  if constexpr (n > 0) std::memcpy(&out, payload.data(), n);
  tail = payload.subspan(n);
  return true;
}

template <class T>
std::span<const uint8_t> fixed_bytes(const T& v) {
  return {reinterpret_cast<const uint8_t*>(&v), wire_size<T>};
}

}  // namespace wh::proto
