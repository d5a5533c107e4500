// Session: CUDA graphs. An instantiated graph lives here, in the session's
// handle table: GraphInstantiate brings its nodes once (in execution order,
// proto/graph_wire.hpp), GraphLaunch runs one segment of them as a single
// posted request. Nodes run one by one through the Context, so both
// backends execute graphs with the calls they already have.
//
// Every node is validated when it arrives (handles, launch configuration,
// parameter size, copy and memset ranges) with the same checks as the
// corresponding single request, and again when it runs: between two
// launches the guest may free memory, unload a module or destroy an event.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>

#include "wormhole/server/session.hpp"

namespace wh::server {

using namespace wh::proto;

namespace {
bool add_overflows(uint64_t a, uint64_t b) { return a + b < a; }

// (count-1)*pitch + last, overflow-checked; count >= 1.
bool span_of(uint64_t count, uint64_t pitch, uint64_t last, uint64_t* out) {
  if (count - 1 > UINT64_MAX / std::max<uint64_t>(pitch, 1)) return false;
  uint64_t v = (count - 1) * pitch;
  if (add_overflows(v, last)) return false;
  *out = v + last;
  return true;
}

// Bytes a 3D copy side spans from its base. Slices may not overlap (a
// slice pitch is a row pitch times at least the height, as in CUDA): that
// also bounds the rows a copy loops over by the bytes it spans.
bool copy_extent(const GraphCopyBody& c, uint64_t pitch, uint64_t slice, uint64_t* out) {
  uint64_t plane;
  if (!span_of(c.height, pitch, c.width, &plane)) return false;
  if (c.depth > 1 && slice < plane) return false;
  return span_of(c.depth, slice, plane, out);
}
}  // namespace

Err Session::check_copy3d(const GraphCopyBody& c) const {
  if (c.height == 0 || c.width == 0 || c.depth == 0) return cudaSuccess;
  if (c.width > c.dpitch || c.width > c.spitch) return cudaErrorInvalidPitchValue;
  uint64_t dext, sext;
  if (!copy_extent(c, c.dpitch, c.dslice, &dext) || !copy_extent(c, c.spitch, c.sslice, &sext))
    return cudaErrorInvalidValue;
  if (c.kind != cudaMemcpyHostToDevice && c.kind != cudaMemcpyDeviceToHost && c.kind != cudaMemcpyDeviceToDevice)
    return cudaErrorInvalidMemcpyDirection;
  const bool src_dev = c.kind == cudaMemcpyDeviceToHost || c.kind == cudaMemcpyDeviceToDevice;
  const bool dst_dev = c.kind == cudaMemcpyHostToDevice || c.kind == cudaMemcpyDeviceToDevice;
  if (src_dev ? !device_range(c.src, sext) : !host_range(c.src, sext)) return cudaErrorInvalidValue;
  if (dst_dev ? !device_range(c.dst, dext) : !host_range(c.dst, dext)) return cudaErrorInvalidValue;
  return cudaSuccess;
}

Err Session::run_copy3d(const GraphCopyBody& c, Stream* s) {
  if (Err e = check_copy3d(c); e != cudaSuccess) return e;
  if (c.height == 0 || c.width == 0 || c.depth == 0) return cudaSuccess;
  // Whole rows as one copy when the rows are contiguous on both sides.
  const bool rows_packed = c.dpitch == c.width && c.spitch == c.width;
  const uint64_t rows = rows_packed ? 1 : c.height, row_bytes = rows_packed ? c.width * c.height : c.width;
  for (uint64_t z = 0; z < c.depth; z++)
    for (uint64_t r = 0; r < rows; r++) {
      const uint64_t so = c.src + z * c.sslice + r * c.spitch, dO = c.dst + z * c.dslice + r * c.dpitch;
      Err e;
      if (c.kind == cudaMemcpyDeviceToDevice) {
        e = ctx_->copy_dtod(dO, so, row_bytes, s);
        if (e == cudaSuccess) count_bytes(&Stats::bytes_dtod, row_bytes);
      } else if (c.kind == cudaMemcpyHostToDevice) {
        e = ctx_->copy_htod(dO, host_range(so, row_bytes), row_bytes, s);
        if (e == cudaSuccess) count_bytes(&Stats::bytes_htod, row_bytes);
      } else {
        e = ctx_->copy_dtoh(host_range(dO, row_bytes), so, row_bytes, s);
        if (e == cudaSuccess) count_bytes(&Stats::bytes_dtoh, row_bytes);
      }
      if (e != cudaSuccess) return e;
    }
  return cudaSuccess;
}

Err Session::check_memset(const GraphMemsetBody& m) const {
  if (m.elem_size != 1 && m.elem_size != 2 && m.elem_size != 4) return cudaErrorInvalidValue;
  if (m.width == 0 || m.height == 0) return cudaSuccess;
  if (m.width > UINT64_MAX / m.elem_size) return cudaErrorInvalidValue;
  const uint64_t row = m.width * m.elem_size;
  if (m.height > 1 && m.pitch < row) return cudaErrorInvalidPitchValue;
  uint64_t ext;
  if (!span_of(m.height, m.pitch, row, &ext) || !device_range(m.dst, ext)) return cudaErrorInvalidValue;
  return cudaSuccess;
}

Err Session::parse_graph(std::span<const uint8_t> wire, uint32_t nodes, uint32_t segments, GraphExecEntry* out) {
  if (nodes > kMaxGraphNodes || segments == 0 || segments > kMaxGraphSegments) return cudaErrorInvalidValue;
  out->nodes.reserve(nodes);
  out->seg_start.assign(1, 0);
  size_t pos = 0;
  auto take = [&](void* dst, size_t n) {
    if (wire.size() - pos < n) return false;
    std::memcpy(dst, wire.data() + pos, n);
    pos += n;
    return true;
  };
  while (pos < wire.size()) {
    GraphNodeHdr h;
    if (!take(&h, sizeof h) || h.body_bytes > wire.size() - pos) return cudaErrorInvalidValue;
    const size_t body_end = pos + h.body_bytes;
    GraphNode n;
    n.op = GraphOp(h.op);
    switch (n.op) {
      case GraphOp::Kernel: {
        GraphKernelBody b;
        if (h.body_bytes < sizeof b || !take(&b, sizeof b)) return cudaErrorInvalidValue;
        if (b.param_bytes > kMaxParamBytes || b.param_bytes != body_end - pos) return cudaErrorInvalidValue;
        KernelEntry* k;
        if (Err e = check_kernel_node(b.kernel, b.grid, b.block, b.shared_bytes, b.param_bytes, &k); e != cudaSuccess)
          return e;
        n.handle = b.kernel;
        n.grid = {b.grid[0], b.grid[1], b.grid[2]};
        n.block = {b.block[0], b.block[1], b.block[2]};
        n.shared_bytes = b.shared_bytes;
        n.bytes.assign(wire.data() + pos, wire.data() + body_end);
        pos = body_end;
        break;
      }
      case GraphOp::Copy:
        if (h.body_bytes != sizeof n.copy || !take(&n.copy, sizeof n.copy)) return cudaErrorInvalidValue;
        if (Err e = check_copy3d(n.copy); e != cudaSuccess) return e;
        break;
      case GraphOp::Memset: {
        GraphMemsetBody& m = n.memset;
        if (h.body_bytes != sizeof m || !take(&m, sizeof m)) return cudaErrorInvalidValue;
        if (Err e = check_memset(m); e != cudaSuccess) return e;
        break;
      }
      case GraphOp::EventRecord:
      case GraphOp::EventWait: {
        GraphEventBody b;
        if (h.body_bytes != sizeof b || !take(&b, sizeof b)) return cudaErrorInvalidValue;
        if (!events_.get(b.event)) return cudaErrorInvalidResourceHandle;
        n.handle = b.event;
        break;
      }
      case GraphOp::Call: {
        GraphCallBody b;
        if (h.body_bytes < sizeof b || !take(&b, sizeof b)) return cudaErrorInvalidValue;
        if (b.payload_bytes != body_end - pos || b.payload_bytes > kMaxGraphCallBytes) return cudaErrorInvalidValue;
        if (!graph_call_allowed(b.op) || b.payload_bytes < size_t(library_stream_offset(b.op)) + 8)
          return cudaErrorInvalidValue;
        n.handle = b.op;
        n.bytes.assign(wire.data() + pos, wire.data() + body_end);
        pos = body_end;
        break;
      }
      case GraphOp::SegmentEnd:
        if (h.body_bytes != 0 || out->seg_start.size() >= segments) return cudaErrorInvalidValue;
        out->seg_start.push_back(uint32_t(out->nodes.size()));
        continue;
      default:
        return cudaErrorInvalidValue;
    }
    if (out->nodes.size() >= nodes) return cudaErrorInvalidValue;
    out->bytes += sizeof n + n.bytes.size();
    out->nodes.push_back(std::move(n));
  }
  if (out->nodes.size() != nodes || out->seg_start.size() != segments) return cudaErrorInvalidValue;
  return cudaSuccess;
}

int32_t Session::on_GraphInstantiate(const GraphInstantiateReq& rq, std::span<const uint8_t> tail,
                                     GraphInstantiateResp& rs, std::vector<uint8_t>&) {
  GraphExecEntry* old = nullptr;
  if (rq.exec && !(old = graphs_.get(rq.exec))) return cudaErrorInvalidResourceHandle;
  std::vector<uint8_t> copy;
  if (rq.bytes) {
    // A large node list comes through the data area: take a private copy
    // first (the guest can rewrite its data area while we parse).
    if (!tail.empty() || rq.bytes > kMaxGraphBytes) return cudaErrorInvalidValue;
    const uint8_t* src = host_range(rq.src_off, rq.bytes);
    if (!src) return cudaErrorInvalidValue;
    copy.assign(src, src + rq.bytes);
    tail = copy;
  }
  auto g = std::make_unique<GraphExecEntry>();
  if (Err e = parse_graph(tail, rq.nodes, rq.segments, g.get()); e != cudaSuccess) return e;
  // A bound on what a session's graphs hold in the server.
  const uint64_t held = graph_bytes_ - (old ? old->bytes : 0);
  if (g->bytes > kMaxSessionGraphBytes - held) return cudaErrorMemoryAllocation;
  if (old) {  // cudaGraphExecUpdate: same handle, new nodes
    graph_bytes_ = held + g->bytes;
    *old = std::move(*g);
    rs.exec = rq.exec;
    return cudaSuccess;
  }
  const uint64_t bytes = g->bytes;
  rs.exec = graphs_.add(std::move(g));
  if (!rs.exec) return cudaErrorMemoryAllocation;
  graph_bytes_ += bytes;
  return cudaSuccess;
}

Err Session::run_graph_node(const GraphNode& n, Stream* s) {
  switch (n.op) {
    case GraphOp::Kernel: {
      KernelEntry* k = kernels_.get(n.handle);
      if (!k || !modules_.get(k->module)) return cudaErrorInvalidResourceHandle;
      if (n.bytes.size() != k->attrs.param_bytes) return cudaErrorInvalidValue;
      return run_kernel(*k, n.grid, n.block, n.shared_bytes, s, n.bytes);
    }
    case GraphOp::Copy:
      return run_copy3d(n.copy, s);
    case GraphOp::Memset: {
      const GraphMemsetBody& m = n.memset;
      if (Err e = check_memset(m); e != cudaSuccess) return e;
      // Nothing to set: return before the row loop (a zero width with a
      // height of 2^64 would otherwise spin the session thread forever).
      if (m.width == 0 || m.height == 0) return cudaSuccess;
      // Rows that touch each other are one fill: as many backend calls as
      // rows would let a 1-byte-wide, 4G-high memset cost 4G calls.
      const bool packed = m.height == 1 || m.pitch == m.width * m.elem_size;
      const uint64_t row = m.width * m.elem_size * (packed ? m.height : 1);
      const uint64_t rows = packed ? 1 : m.height;
      const uint32_t v = m.value;
      const bool uniform = m.elem_size == 1 || (m.elem_size == 2 && uint8_t(v) == uint8_t(v >> 8)) ||
                           (m.elem_size == 4 && v == uint32_t(uint8_t(v)) * 0x01010101u);
      if (!uniform) {
        // The backend sets bytes: a wider element is copied from a chunk of
        // the pattern (a multiple of 4 bytes, so every piece starts on an
        // element; pageable server memory, so each copy has taken its bytes
        // when it returns and the chunk can be reused).
        fill_chunk_.resize(64 << 10);
        for (size_t i = 0; i < fill_chunk_.size(); i += m.elem_size) std::memcpy(&fill_chunk_[i], &v, m.elem_size);
      }
      for (uint64_t r = 0; r < rows; r++) {
        const uint64_t d = m.dst + r * m.pitch;
        if (uniform) {
          if (Err e = ctx_->memset8(d, uint8_t(v), row, s); e != cudaSuccess) return e;
          continue;
        }
        for (uint64_t o = 0; o < row; o += fill_chunk_.size()) {
          const uint64_t k = std::min<uint64_t>(fill_chunk_.size(), row - o);
          if (Err e = ctx_->copy_htod(d + o, fill_chunk_.data(), k, s); e != cudaSuccess) return e;
        }
      }
      return cudaSuccess;
    }
    case GraphOp::EventRecord: {
      EventEntry* ev = events_.get(n.handle);
      if (!ev) return cudaErrorInvalidResourceHandle;
      ev->recorded = true;
      return ctx_->event_record(*ev->e, s);
    }
    case GraphOp::EventWait: {
      EventEntry* ev = events_.get(n.handle);
      if (!ev) return cudaErrorInvalidResourceHandle;
      return ev->recorded ? ctx_->stream_wait_event(s, *ev->e) : cudaSuccess;
    }
    case GraphOp::Call: {
      // As if the guest had posted it now on the launch stream: the request
      // is decoded and checked like any other.
      std::vector<uint8_t> payload = n.bytes;
      std::memcpy(payload.data() + library_stream_offset(uint16_t(n.handle)), &graph_stream_, sizeof graph_stream_);
      DispatchResult r;
      route(uint16_t(n.handle), std::span<const uint8_t>(payload), max_msg_, r);
      if (op_index(uint16_t(n.handle)) >= 0) SessionCounters::add(ops_.at(uint16_t(n.handle)).calls, 1);
      if (r.status == kBadRequest || r.status == kUnknownOp) return cudaErrorInvalidValue;
      return Err(r.status);
    }
    default:
      return cudaErrorInvalidValue;
  }
}

int32_t Session::on_GraphLaunch(const GraphLaunchReq& rq, std::span<const uint8_t>, GraphLaunchResp&,
                                std::vector<uint8_t>&) {
  GraphExecEntry* g = graphs_.get(rq.exec);
  if (!g) return cudaErrorInvalidResourceHandle;
  Stream* s;
  if (Err e = resolve_stream(rq.stream, &s); e != cudaSuccess) return e;
  if (rq.segment >= g->seg_start.size()) return cudaErrorInvalidValue;
  const size_t begin = g->seg_start[rq.segment];
  const size_t end = rq.segment + 1 < g->seg_start.size() ? g->seg_start[rq.segment + 1] : g->nodes.size();
  graph_stream_ = rq.stream;
  for (size_t i = begin; i < end; i++)
    if (Err e = run_graph_node(g->nodes[i], s); e != cudaSuccess) return e;
  return cudaSuccess;
}

int32_t Session::on_GraphExecSetKernel(const GraphExecSetKernelReq& rq, std::span<const uint8_t> tail,
                                       GraphExecSetKernelResp&, std::vector<uint8_t>&) {
  GraphExecEntry* g = graphs_.get(rq.exec);
  if (!g) return cudaErrorInvalidResourceHandle;
  if (rq.node >= g->nodes.size() || g->nodes[rq.node].op != GraphOp::Kernel) return cudaErrorInvalidValue;
  GraphNode& n = g->nodes[rq.node];
  KernelEntry* k;
  // The kernel stays the node's own: only its configuration and arguments change.
  if (Err e = check_kernel_node(n.handle, rq.grid, rq.block, rq.shared_bytes, tail.size(), &k); e != cudaSuccess)
    return e;
  n.grid = {rq.grid[0], rq.grid[1], rq.grid[2]};
  n.block = {rq.block[0], rq.block[1], rq.block[2]};
  n.shared_bytes = rq.shared_bytes;
  n.bytes.assign(tail.begin(), tail.end());  // the same size as before (the kernel's parameter size)
  return cudaSuccess;
}

int32_t Session::on_GraphExecDestroy(const GraphExecDestroyReq& rq, std::span<const uint8_t>, GraphExecDestroyResp&,
                                     std::vector<uint8_t>&) {
  auto g = graphs_.take(rq.exec);
  if (!g) return cudaErrorInvalidResourceHandle;
  graph_bytes_ -= g->bytes;
  return cudaSuccess;
}

}  // namespace wh::server
