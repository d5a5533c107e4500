// wormhole/proto/graph_wire.hpp - the node list GraphInstantiate carries.
//
// An instantiated graph lives in the server: the guest flattens it (child
// graphs inlined, empty nodes dropped), orders it topologically and sends
// it once. Each node is a GraphNodeHdr followed by body_bytes of body. Nodes
// the guest must run itself (host functions, copies to or from pageable
// memory) split the list into segments, marked by a SegmentEnd node;
// GraphLaunch runs one segment. Host-side copy endpoints are data-area
// offsets, as everywhere on the wire.
#pragma once

#include <cstdint>

#include "wormhole/proto/wire.hpp"

namespace wh::proto {

enum class GraphOp : uint16_t { Kernel = 1, Copy = 2, Memset = 3, EventRecord = 4, EventWait = 5, SegmentEnd = 6, Call = 7 };

struct GraphNodeHdr {
  uint16_t op;  // GraphOp
  uint16_t pad;
  uint32_t body_bytes;
};

struct GraphKernelBody {  // followed by param_bytes of packed parameters
  uint64_t kernel;
  uint32_t grid[3];
  uint32_t block[3];
  uint32_t shared_bytes;
  uint32_t param_bytes;
};

// A 3D copy: depth slices of height rows of width bytes. kind is a
// cudaMemcpyKind (HostToDevice, DeviceToHost or DeviceToDevice).
struct GraphCopyBody {
  uint64_t dst, src;
  uint64_t dpitch, spitch;  // row pitches
  uint64_t dslice, sslice;  // slice pitches
  uint64_t width, height, depth;
  uint32_t kind;
  uint32_t pad;
};

struct GraphMemsetBody {
  uint64_t dst;
  uint64_t pitch;
  uint64_t width;  // in elements
  uint64_t height;
  uint32_t value;
  uint32_t elem_size;  // 1, 2 or 4
};

struct GraphEventBody {
  uint64_t event;
};

// A library call captured from a stream (library work on a capturing
// stream): followed by the request's payload as it would travel alone (fixed
// part, then its tail). The stream it names (library_stream_offset) is
// replaced by the launch's when the node runs, and the server checks it as
// any request then.
struct GraphCallBody {
  uint16_t op;
  uint16_t pad;
  uint32_t payload_bytes;
};
constexpr uint32_t kMaxGraphCallBytes = 1u << 20;

// Where a library request names its stream, so that its work on a capturing
// stream is recorded instead of run: after the handle (byte 8) in the
// stream-ordered requests of cuBLAS, cuFFT, cuBLASLt and cuRAND; first
// (byte 0) in cuDNN's, whose handles live in the guest. -1: the request
// names no stream (handles, plans, seeds, the other tables).
inline int library_stream_offset(uint16_t op) {
  switch (Op(op)) {
    case Op::BlasCreate: case Op::BlasDestroy: case Op::FftPlan: case Op::FftDestroy: case Op::LtCreate:
    case Op::LtDestroy: case Op::RandCreate: case Op::RandDestroy: case Op::RandSet: case Op::DnnCreate:
      return -1;
    default:
      break;
  }
  const auto block = [](Op first) { return uint16_t(first) & ~(kOpBlock - 1); };
  const int b = op & ~(kOpBlock - 1);
  if (op >= kOpLimit || op_index(op) < 0) return -1;
  if (b == block(Op::BlasCreate) || b == block(Op::FftPlan) || b == block(Op::LtCreate) || b == block(Op::RandCreate))
    return 8;
  return b == block(Op::DnnCreate) ? 0 : -1;
}

// The requests a call node may carry: posted requests whose replay does the
// same work again on the same memory, as a captured library kernel would.
// cuRAND's generation and cuDNN's dropout are left out: replayed, they would
// have to draw new numbers. The guest records exactly these during capture
// (anything else on a capturing stream is refused and invalidates it); the
// server refuses the rest.
inline bool graph_call_allowed(uint16_t op) {
  if (library_stream_offset(op) < 0 || op_kind(op) == Kind::Sync) return false;
  switch (Op(op)) {
    case Op::RandGenerate: case Op::DnnDropoutInit: case Op::DnnDropoutFwd: case Op::DnnDropoutBwd:
      return false;
    default:
      return true;
  }
}

constexpr uint32_t kMaxGraphNodes = 1u << 16;
constexpr uint32_t kMaxGraphSegments = kMaxGraphNodes + 1;
constexpr uint64_t kMaxGraphBytes = 64ull << 20;  // a node list shipped through the data area
constexpr uint32_t kMaxGraphExecs = 4096;         // per session
constexpr uint64_t kMaxSessionGraphBytes = 256ull << 20;  // server memory all of a session's graphs may hold

}  // namespace wh::proto
