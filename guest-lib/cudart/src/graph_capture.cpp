// Stream capture: capture state, the hooks the issuing paths call
// (state.hpp) and the cudaStream*Capture* entry points.
#include "graph_internal.hpp"

namespace wh::guest {

using namespace wh::proto;

std::atomic<int> g_captures{0};

namespace {

// Under g_mu, as the registries of graph_internal.hpp.
std::unordered_map<uint64_t, StreamCap> g_streams;
std::unordered_map<uint64_t, EventCap> g_events;
unsigned long long g_next_capture_id = 1;
thread_local cudaStreamCaptureMode t_mode = cudaStreamCaptureModeGlobal;

// ---- capture internals (g_mu held)

StreamCap* capture_of(uint64_t sh) {
  auto it = g_streams.find(sh);
  return it == g_streams.end() ? nullptr : &it->second;
}

void set_frontier(StreamCap& sc, std::vector<NodeRec*> f) {
  sc.frontier = std::move(f);
  sc.edges.assign(sc.frontier.size(), cudaGraphEdgeData{});
}

// An event record or wait node after the capture's frontier (g_mu held).
void capture_event_node(StreamCap& sc, cudaGraphNodeType type, cudaEvent_t ev) {
  auto n = std::make_unique<NodeRec>();
  n->type = type;
  n->event = ev;
  n->graph = sc.cap->graph;
  for (NodeRec* d : sc.frontier) link(d, n.get());
  NodeRec* raw = n.get();
  sc.cap->graph->nodes.push_back(std::move(n));
  g_nodes.insert(raw);
  set_frontier(sc, {raw});
}

void end_capture_locked(Capture* cap) {
  for (auto it = g_streams.begin(); it != g_streams.end();)
    it = it->second.cap == cap ? g_streams.erase(it) : std::next(it);
  for (auto it = g_events.begin(); it != g_events.end();)
    it = it->second.cap == cap ? g_events.erase(it) : std::next(it);
  for (auto it = g_caps.begin(); it != g_caps.end(); ++it)
    if (it->get() == cap) {
      g_caps.erase(it);
      break;
    }
  g_captures.fetch_sub(1, std::memory_order_relaxed);
}

// Is every node of `f` an ancestor of (or one of) `of`?
bool joined(const std::vector<NodeRec*>& f, const std::vector<NodeRec*>& of) {
  std::unordered_set<const NodeRec*> seen;
  std::vector<const NodeRec*> todo(of.begin(), of.end());
  while (!todo.empty()) {
    const NodeRec* n = todo.back();
    todo.pop_back();
    if (!seen.insert(n).second) continue;
    for (NodeRec* d : n->deps) todo.push_back(d);
  }
  for (NodeRec* n : f)
    if (!seen.count(n)) return false;
  return true;
}

}  // namespace

namespace graph_impl {

cudaError_t capture_add(cudaStream_t s, std::unique_ptr<NodeRec> n) {
  std::lock_guard lk(g_mu);
  StreamCap* sc = capture_of(stream_handle(s));
  if (!sc) return cudaErrorStreamCaptureInvalidated;  // ended by another thread meanwhile
  if (sc->cap->invalid) return cudaErrorStreamCaptureInvalidated;
  GraphRec* g = sc->cap->graph;
  n->graph = g;
  for (NodeRec* d : sc->frontier) link(d, n.get());
  NodeRec* raw = n.get();
  g->nodes.push_back(std::move(n));
  g_nodes.insert(raw);
  if (raw->child) register_graph(raw->child.get());
  set_frontier(*sc, {raw});
  return cudaSuccess;
}

}  // namespace graph_impl

// ---- hooks for the issuing paths (state.hpp)

bool stream_capturing(cudaStream_t s) {
  std::lock_guard lk(g_mu);
  return capture_of(stream_handle(s)) != nullptr;
}

cudaError_t capture_kernel(cudaStream_t s, KernelRec* k, dim3 grid, dim3 block, uint32_t shared,
                           const uint8_t* params) {
  auto n = std::make_unique<NodeRec>();
  n->type = cudaGraphNodeTypeKernel;
  n->k = k;
  n->grid = grid, n->block = block, n->shared = shared;
  set_kernel_params(n.get(), params);
  return capture_add(s, std::move(n));
}

cudaError_t capture_copy(cudaStream_t s, void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                         size_t height, cudaMemcpyKind kind) {
  auto n = std::make_unique<NodeRec>();
  n->type = cudaGraphNodeTypeMemcpy;
  // Resolved now: the allocation map may change before the graph runs.
  kind = resolve_kind(kind, dst, src);
  cudaMemcpy3DParms& p = n->copy;
  p.srcPtr = pitched(const_cast<void*>(src), spitch, width, height);
  p.dstPtr = pitched(dst, dpitch, width, height);
  p.extent = extent3(width, height, 1);
  p.kind = kind;
  if (cudaError_t e = check_copy_params(p); e != cudaSuccess) return e;
  return capture_add(s, std::move(n));
}

cudaError_t capture_memset(cudaStream_t s, void* dst, int value, size_t bytes) {
  auto n = std::make_unique<NodeRec>();
  n->type = cudaGraphNodeTypeMemset;
  n->mset.dst = dst;
  n->mset.value = uint8_t(value);
  n->mset.elementSize = 1;
  n->mset.width = bytes;
  n->mset.height = 1;
  n->mset.pitch = bytes;
  return capture_add(s, std::move(n));
}

cudaError_t capture_host(cudaStream_t s, cudaHostFn_t fn, void* data) {
  auto n = std::make_unique<NodeRec>();
  n->type = cudaGraphNodeTypeHost;
  n->host = {fn, data};
  return capture_add(s, std::move(n));
}

cudaError_t capture_call(cudaStream_t s, uint16_t op, const void* rq, size_t rq_len, const void* tail,
                         size_t tail_len) {
  if (rq_len + tail_len > kMaxGraphCallBytes) return cudaErrorNotSupported;
  auto n = std::make_unique<NodeRec>();
  n->type = kNodeCall;
  n->call_op = op;
  const auto* r = static_cast<const uint8_t*>(rq);
  const auto* t = static_cast<const uint8_t*>(tail);
  n->call.assign(r, r + rq_len);
  if (tail_len) n->call.insert(n->call.end(), t, t + tail_len);
  return capture_add(s, std::move(n));
}

bool capture_malloc(cudaStream_t s, void** p, size_t size, cudaError_t* e) {
  if (!stream_capturing(s)) return false;
  if (!p) {
    *e = cudaErrorInvalidValue;
    return true;
  }
  uint64_t d = 0;
  if ((*e = graph_mem_new(size, &d)) != cudaSuccess) return true;
  auto n = std::make_unique<NodeRec>();
  n->type = cudaGraphNodeTypeMemAlloc;
  n->mem = d;  // the node holds the reservation (its destructor drops it)
  n->pool.allocType = cudaMemAllocationTypePinned;
  n->pool.location = {cudaMemLocationTypeDevice, 0};
  if ((*e = capture_add(s, std::move(n))) == cudaSuccess) *p = reinterpret_cast<void*>(d);
  return true;
}

bool capture_free(cudaStream_t s, void* p, cudaError_t* e) {
  if (!stream_capturing(s)) return false;
  // Only graph memory can be freed inside a graph.
  if (!p || !graph_mem_known(reinterpret_cast<uint64_t>(p))) {
    *e = cudaErrorInvalidValue;
    return true;
  }
  auto n = std::make_unique<NodeRec>();
  n->type = cudaGraphNodeTypeMemFree;
  n->mem = reinterpret_cast<uint64_t>(p);
  *e = capture_add(s, std::move(n));
  return true;
}

bool graph_mem_free(void* p, cudaError_t* e) { return graph_mem_end(reinterpret_cast<uint64_t>(p), e); }

bool capture_event_record(cudaEvent_t ev, cudaStream_t s, unsigned flags, cudaError_t* e) {
  std::lock_guard lk(g_mu);
  const uint64_t eh = reinterpret_cast<uint64_t>(ev);
  StreamCap* sc = capture_of(stream_handle(s));
  if (!sc) {
    g_events.erase(eh);  // recorded outside capture again: an ordinary event
    return false;
  }
  *e = sc->cap->invalid ? cudaErrorStreamCaptureInvalidated : cudaSuccess;
  if (*e != cudaSuccess) return true;
  if (flags & cudaEventRecordExternal) {  // a real record node
    capture_event_node(*sc, cudaGraphNodeTypeEventRecord, ev);
  }
  // Otherwise the record only marks a point of the capture that other
  // streams may wait on (fork/join).
  g_events[eh] = {sc->cap, sc->frontier};
  return true;
}

bool capture_wait_event(cudaStream_t s, cudaEvent_t ev, unsigned flags, cudaError_t* e) {
  std::lock_guard lk(g_mu);
  const uint64_t sh = stream_handle(s), eh = reinterpret_cast<uint64_t>(ev);
  StreamCap* sc = capture_of(sh);
  auto it = g_events.find(eh);
  if (it == g_events.end()) {
    if (!sc) return false;  // neither side captures
    if (sc->cap->invalid) {
      *e = cudaErrorStreamCaptureInvalidated;
      return true;
    }
    // An event recorded outside the capture: an event wait node.
    capture_event_node(*sc, cudaGraphNodeTypeWaitEvent, ev);
    *e = cudaSuccess;
    return true;
  }
  EventCap& ec = it->second;
  if (!sc) {
    // Fork: the stream joins the event's capture, after the event's nodes.
    if (sh == 0 || sh == 1) {
      *e = cudaErrorStreamCaptureImplicit;
      return true;
    }
    StreamCap& n = g_streams[sh];
    n.cap = ec.cap;
    set_frontier(n, ec.nodes);
    *e = cudaSuccess;
    return true;
  }
  if (sc->cap != ec.cap) {
    *e = cudaErrorStreamCaptureIsolation;
    sc->cap->invalid = true;
    return true;
  }
  // Join: the stream's next node also depends on the event's nodes.
  std::vector<NodeRec*> f = sc->frontier;
  for (NodeRec* n : ec.nodes)
    if (std::find(f.begin(), f.end(), n) == f.end()) f.push_back(n);
  set_frontier(*sc, std::move(f));
  *e = cudaSuccess;
  (void)flags;
  return true;
}

cudaError_t capture_check_unsafe(cudaStream_t s) {
  std::lock_guard lk(g_mu);
  bool refuse = false;
  if (StreamCap* sc = capture_of(stream_handle(s))) {  // synchronising a capturing stream
    sc->cap->invalid = true;
    refuse = true;
  }
  // Work on the legacy stream (0, 1; also what synchronous calls and
  // allocation imply) is what a capture mode may forbid.
  const uint64_t sh = stream_handle(s);
  if ((sh == 0 || sh == 1) && t_mode != cudaStreamCaptureModeRelaxed) {
    const auto me = std::this_thread::get_id();
    for (auto& c : g_caps) {
      bool mine = c->thread == me && c->mode != cudaStreamCaptureModeRelaxed;
      bool global = t_mode == cudaStreamCaptureModeGlobal && c->mode == cudaStreamCaptureModeGlobal;
      if (mine || global) {
        c->invalid = true;
        refuse = true;
      }
    }
  }
  return refuse ? cudaErrorStreamCaptureUnsupported : cudaSuccess;
}


}  // namespace wh::guest

using namespace wh::guest;
using namespace wh::proto;

extern "C" {

// ------------------------------------------------------------ stream capture

cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode) {
  const uint64_t sh = stream_handle(s);
  if (mode != cudaStreamCaptureModeGlobal && mode != cudaStreamCaptureModeThreadLocal &&
      mode != cudaStreamCaptureModeRelaxed)
    return set_error(cudaErrorInvalidValue);
  // The legacy stream synchronises with every other: it cannot capture.
  if (sh == 0 || sh == 1) return set_error(cudaErrorStreamCaptureUnsupported);
  std::lock_guard lk(g_mu);
  if (capture_of(sh)) return set_error(cudaErrorIllegalState);
  auto cap = std::make_unique<Capture>();
  auto* g = new GraphRec();
  g_graphs.insert(g);
  cap->graph = g;
  cap->mode = mode;
  cap->thread = std::this_thread::get_id();
  cap->id = g_next_capture_id++;
  cap->origin = sh;
  g_streams[sh] = StreamCap{cap.get(), {}, {}};
  g_caps.push_back(std::move(cap));
  g_captures.fetch_add(1, std::memory_order_relaxed);
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* out) {
  if (!out) return set_error(cudaErrorInvalidValue);
  std::lock_guard lk(g_mu);
  StreamCap* sc = capture_of(stream_handle(s));
  if (!sc) return set_error(cudaErrorIllegalState);
  Capture* cap = sc->cap;
  if (cap->origin != stream_handle(s)) {
    cap->invalid = true;
    return set_error(cudaErrorStreamCaptureUnmatched);
  }
  if (cap->mode == cudaStreamCaptureModeThreadLocal || cap->mode == cudaStreamCaptureModeGlobal)
    if (cap->thread != std::this_thread::get_id()) return set_error(cudaErrorStreamCaptureWrongThread);
  bool unjoined = false;
  for (auto& [h, o] : g_streams)
    if (o.cap == cap && h != cap->origin && !joined(o.frontier, sc->frontier)) unjoined = true;
  GraphRec* g = cap->graph;
  const bool invalid = cap->invalid;
  end_capture_locked(cap);
  if (invalid || unjoined) {
    unregister_graph(g);
    delete g;
    *out = nullptr;
    return set_error(unjoined ? cudaErrorStreamCaptureUnjoined : cudaErrorStreamCaptureInvalidated);
  }
  *out = as_graph(g);
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus* st) {
  if (!st) return set_error(cudaErrorInvalidValue);
  std::lock_guard lk(g_mu);
  StreamCap* sc = capture_of(stream_handle(s));
  *st = !sc ? cudaStreamCaptureStatusNone
            : sc->cap->invalid ? cudaStreamCaptureStatusInvalidated : cudaStreamCaptureStatusActive;
  return cudaSuccess;
}

cudaError_t cudaStreamGetCaptureInfo(cudaStream_t s, cudaStreamCaptureStatus* st, unsigned long long* id,
                                     cudaGraph_t* graph, const cudaGraphNode_t** deps,
                                     const cudaGraphEdgeData** edges, size_t* ndeps) {
  if (!st) return set_error(cudaErrorInvalidValue);
  std::lock_guard lk(g_mu);
  StreamCap* sc = capture_of(stream_handle(s));
  if (!sc) {
    *st = cudaStreamCaptureStatusNone;
    return cudaSuccess;
  }
  *st = sc->cap->invalid ? cudaStreamCaptureStatusInvalidated : cudaStreamCaptureStatusActive;
  if (id) *id = sc->cap->id;
  if (graph) *graph = as_graph(sc->cap->graph);
  // Valid until the stream's next capture call, as in CUDA.
  if (deps) *deps = reinterpret_cast<const cudaGraphNode_t*>(sc->frontier.data());
  if (edges) *edges = sc->edges.data();
  if (ndeps) *ndeps = sc->frontier.size();
  return cudaSuccess;
}

cudaError_t cudaStreamUpdateCaptureDependencies(cudaStream_t s, cudaGraphNode_t* deps, const cudaGraphEdgeData*,
                                                size_t n, unsigned int flags) {
  if (n && !deps) return set_error(cudaErrorInvalidValue);
  if (flags != cudaStreamAddCaptureDependencies && flags != cudaStreamSetCaptureDependencies)
    return set_error(cudaErrorInvalidValue);
  std::lock_guard lk(g_mu);
  StreamCap* sc = capture_of(stream_handle(s));
  if (!sc) return set_error(cudaErrorIllegalState);
  std::vector<NodeRec*> f = flags == cudaStreamSetCaptureDependencies ? std::vector<NodeRec*>{} : sc->frontier;
  for (size_t i = 0; i < n; i++) {
    if (!live_node(deps[i]) || node_of(deps[i])->graph != sc->cap->graph) return set_error(cudaErrorInvalidValue);
    if (std::find(f.begin(), f.end(), node_of(deps[i])) == f.end()) f.push_back(node_of(deps[i]));
  }
  set_frontier(*sc, std::move(f));
  return cudaSuccess;
}

cudaError_t cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode* mode) {
  if (!mode || (*mode != cudaStreamCaptureModeGlobal && *mode != cudaStreamCaptureModeThreadLocal &&
                *mode != cudaStreamCaptureModeRelaxed))
    return set_error(cudaErrorInvalidValue);
  std::swap(*mode, t_mode);
  return cudaSuccess;
}

// Per-thread-default-stream entry points.
cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t s, cudaStreamCaptureMode m) { return cudaStreamBeginCapture(s, m); }
cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t s, cudaGraph_t* g) { return cudaStreamEndCapture(s, g); }
cudaError_t cudaStreamIsCapturing_ptsz(cudaStream_t s, cudaStreamCaptureStatus* st) {
  return cudaStreamIsCapturing(s, st);
}
cudaError_t cudaStreamGetCaptureInfo_ptsz(cudaStream_t s, cudaStreamCaptureStatus* st, unsigned long long* id,
                                          cudaGraph_t* g, const cudaGraphNode_t** d, const cudaGraphEdgeData** ed,
                                          size_t* n) {
  return cudaStreamGetCaptureInfo(s, st, id, g, d, ed, n);
}
cudaError_t cudaStreamUpdateCaptureDependencies_ptsz(cudaStream_t s, cudaGraphNode_t* d, const cudaGraphEdgeData* ed,
                                                     size_t n, unsigned int f) {
  return cudaStreamUpdateCaptureDependencies(s, d, ed, n, f);
}


}  // extern "C"
