// wormhole/proto/wire.hpp - opcodes, message structs and limits generated
// from the API table (cudart_api.def). Shared by guest-lib and the server.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>

#include "cublas_api.def"
#include "cublaslt_api.def"
#include "wormhole/proto/cudart_api.def"
#include "cudnn_api.def"
#include "cufft_api.def"
#include "curand_api.def"
#include "nvml_api.def"
#include "wormhole/proto/remote_api.def"
#include "wormhole/proto/peer_api.def"
#include "wormhole/region.h"

// Every forwarded library's table. Each has a fixed block of opcodes
// (WH_OP_LIBRARIES: table, first opcode of its block), in which its
// entries are numbered in order: a function is added at the end of its own
// library's table, so no opcode of any library ever moves. The opcodes
// are pinned by proto/opcodes.lock (test proto.opcodes_stable). A new
// library takes the next free block.
#define WH_OP_LIBRARIES(L, X)      \
  L(WH_CUDART_OPS, 0x0000, X)      \
  L(WH_CUBLAS_OPS, 0x0200, X)      \
  L(WH_CUFFT_OPS, 0x0400, X)       \
  L(WH_CUBLASLT_OPS, 0x0600, X)    \
  L(WH_CURAND_OPS, 0x0800, X)      \
  L(WH_CUDNN_OPS, 0x0A00, X)       \
  L(WH_REMOTE_OPS, 0x0C00, X)      \
  L(WH_PEER_OPS, 0x0E00, X)        \
  L(WH_NVML_OPS, 0x1000, X)
// The tables the session answers itself (the runtime and driver, ucx://
// clients, peer copies); every other library's table belongs to that
// library's service (libs/<name>/server, wormhole/server/service.hpp).
#define WH_SESSION_OPS(X) WH_CUDART_OPS(X) WH_REMOTE_OPS(X) WH_PEER_OPS(X)
#define WH_X_LIB_ALL(Table, Base, X) Table(X)
#define WH_ALL_OPS(X) WH_OP_LIBRARIES(WH_X_LIB_ALL, X)

namespace wh::proto {

// Wire protocol version, negotiated in the socket handshake (min..max).
// 3: opcodes in per-library blocks.
constexpr uint16_t kVersion = 3;
constexpr uint16_t kMinVersion = 3;

enum class Kind : uint8_t { Sync, Posted, Either };

constexpr uint16_t kOpBlock = 0x0200;  // opcodes per library block

// Opcode 0 is the ring's padding record (WH_OP_PAD); the runtime's table
// starts at 1, every other library's at its block's first opcode. The
// *Block_ enumerators only place the next table (they are no opcodes).
#define WH_X_ENUM(Name, K, RQ, RS) Name,
#define WH_X_LIB_ENUM(Table, Base, X) Table##Block_ = (Base) ? (Base) - 1 : WH_OP_PAD, Table(X)
enum class Op : uint16_t {
  Pad = WH_OP_PAD,
  WH_OP_LIBRARIES(WH_X_LIB_ENUM, WH_X_ENUM)
  Limit_
};
#undef WH_X_LIB_ENUM
#undef WH_X_ENUM
// Each table fits its block.
#define WH_X_ONE(Name, K, RQ, RS) +1
#define WH_X_LIB_FITS(Table, Base, X) static_assert(1 + 0 Table(X) <= kOpBlock, #Table " outgrew its opcode block");
WH_OP_LIBRARIES(WH_X_LIB_FITS, WH_X_ONE)
#undef WH_X_LIB_FITS

// One past the highest opcode.
constexpr size_t kOpLimit = size_t(Op::Limit_);
// The table in dense order (index 0: Pad), for per-operation arrays and
// for iterating over every operation: opcodes have gaps between blocks.
constexpr uint16_t kAllOps[] = {WH_OP_PAD
#define WH_X_OPCODE(Name, K, RQ, RS) , uint16_t(Op::Name)
                                WH_ALL_OPS(WH_X_OPCODE)
#undef WH_X_OPCODE
};
#undef WH_X_ONE
constexpr size_t kOpCount = sizeof kAllOps / sizeof kAllOps[0];
// Dense index of an opcode (-1: not an operation).
inline constexpr auto kOpIndexTable = [] {
  struct T {
    int16_t v[kOpLimit];
  } t{};
  for (auto& x : t.v) x = -1;
  for (size_t i = 0; i < kOpCount; i++) t.v[kAllOps[i]] = int16_t(i);
  return t;
}();
inline int op_index(uint16_t op) { return op < kOpLimit ? kOpIndexTable.v[op] : -1; }

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
// A network client's session moved to another server (wormholectl migrate
// --to ucx://) before this request ran: the answer's payload is a
// MovedNotice; the client connects there with the token and sends the
// request (and any sent after it) again. Never reaches applications.
constexpr int32_t kMoved = -3;
struct MovedNotice {
  uint64_t session_id;  // the session's id there
  uint64_t token[2];    // net::kResumeMagic's token
  char url[232];        // ucx://HOST:PORT, NUL-terminated
};
static_assert(sizeof(MovedNotice) == 256);

// Socket handshake (unix socket, before the ring is used).
constexpr uint32_t kHelloMagic = 0x4f4c4857;  // "WHLO"
struct Hello {
  uint32_t magic;
  uint16_t min_version, max_version;
  uint32_t pid;
  uint32_t reserved;
  uint64_t data_bytes;  // data area the client would like (0: default)
};
// Hello::reserved bits. kHelloResume: a client whose server went away
// holding its session for a restore; a ResumeHello follows the Hello in
// the same message, which carries the client's region (SCM_RIGHTS).
constexpr uint32_t kHelloResume = 1;
struct ResumeHello {
  uint64_t token[2];  // DataAreaStatus::resume_token
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
  // The request ring's stream position just past the last request the
  // server has handled (ring transports). A request posted before that
  // position has been handled; one after it has not, so an event recorded
  // after it cannot have completed: the guest answers cudaEventQuery /
  // cudaStreamQuery "not ready" without a round trip that would wait
  // behind the kernel the server is running.
  uint64_t handled_pos;
  // A server that checkpointed this session (wormholectl checkpoint) holds
  // it: held is 1 and resume_token names the checkpoint. When that server
  // goes away, the guest reconnects with the token (kHelloResume) to a
  // server that restored it (wormholectl restore) instead of failing.
  uint32_t held;
  uint32_t reserved2;
  uint64_t resume_token[2];
  uint8_t pad[4096 - 64];
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

// Pinned memory past the first data area (socket clients: PinnedGrow).
// Segment k (1 <= k < kMaxPinnedSegments) is a shared memfd of its own;
// data-area offsets name it as (k << kPinnedSegmentShift) + offset, so
// every operation that takes a data-area offset reaches it unchanged.
constexpr unsigned kPinnedSegmentShift = 40;
constexpr uint64_t kPinnedSegmentMask = (uint64_t(1) << kPinnedSegmentShift) - 1;
constexpr uint64_t kMaxPinnedSegments = 4096;
constexpr uint64_t kPinnedSegmentMin = 64ull << 20;  // a segment holds at least this
constexpr uint64_t kPinnedSegmentMax = 1ull << 39;   // and at most this (an offset never reaches the next one)
// The size of the segment PinnedGrow makes for a request of `bytes` (both
// sides compute it: the guest reserves its address range first), or 0 for
// a size no segment takes.
constexpr uint64_t pinned_segment_bytes(uint64_t bytes) {
  if (bytes == 0 || bytes > kPinnedSegmentMax) return 0;
  const uint64_t round = uint64_t(2) << 20;
  const uint64_t n = (bytes + round - 1) & ~(round - 1);
  return n < kPinnedSegmentMin ? kPinnedSegmentMin : n;
}
// Sent with a segment's memfd on the client's socket (SCM_RIGHTS), before
// PinnedGrow's answer.
constexpr uint32_t kPinnedNoteMagic = 0x50474D57;  // "WMGP"
struct PinnedSegmentNote {
  uint32_t magic;
  uint32_t reserved;
  uint64_t segment;
  uint64_t size;
};
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
