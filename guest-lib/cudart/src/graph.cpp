// CUDA graphs: stream capture, the explicit graph API, instantiation and
// launch.
//
// A graph under construction lives in the guest (nodes, edges, parameters
// copied in). cudaGraphInstantiate flattens it (child graphs inlined, empty
// nodes dropped), orders it topologically and ships it to the server once
// (GraphInstantiate, proto/graph_wire.hpp), where it stays in the session's
// handle table; cudaGraphLaunch is then one posted GraphLaunch per segment.
// Nodes the server cannot run are run here, between segments: host
// functions, and copies whose host side is pageable memory (the server sees
// only the data area). A graph without such nodes is one segment, so its
// launch is one posted message whatever its size. Before a guest-run node
// the launching thread waits for the stream (as cudaLaunchHostFunc does).
//
// The execution order is one topological order of the graph: a valid CUDA
// schedule (independent nodes may, but need not, run concurrently).
//
// Graph memory: CUDA fixes a mem-alloc node's address when the node is
// made, so the memory is allocated then (on the server, as any allocation,
// counted against the session's quota) and stays reserved while any node
// (of a graph or an executable graph) names it. Launching the graph makes
// the allocation live; a mem-free node, cudaFree or cudaFreeAsync ends its
// life; the nodes run nothing on the server. Accessing graph memory outside
// its life is undefined in CUDA: here it reads the reserved memory.
#include <cxxabi.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <queue>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "state.hpp"
#include "wormhole/proto/graph_wire.hpp"

namespace wh::guest {

using namespace wh::proto;

std::atomic<int> g_captures{0};

namespace {

struct GraphRec;

// A captured library call (cuBLAS): CUDA shows such work as kernel nodes.
constexpr cudaGraphNodeType kNodeCall = cudaGraphNodeType(0x7f00);

struct NodeRec {
  cudaGraphNodeType type = cudaGraphNodeTypeEmpty;
  GraphRec* graph = nullptr;
  std::vector<NodeRec*> deps, users;
  // kernel
  KernelRec* k = nullptr;
  dim3 grid, block;
  uint32_t shared = 0;
  std::vector<uint8_t> params;  // packed with the kernel's layout
  std::vector<void*> argv;      // into params, for cudaGraphKernelNodeGetParams
  // memcpy (pointers, positions, extent), memset, host, event
  cudaMemcpy3DParms copy{};
  cudaMemsetParams mset{};
  cudaHostNodeParams host{};
  cudaEvent_t event = nullptr;
  std::unique_ptr<GraphRec> child;  // a child graph node's own copy
  // mem-alloc (holds a reference to the allocation) / mem-free node
  uint64_t mem = 0;
  cudaMemPoolProps pool{};
  // library call: opcode and payload (fixed part, then tail)
  uint16_t call_op = 0;
  std::vector<uint8_t> call;

  NodeRec() = default;
  NodeRec(const NodeRec&) = delete;
  NodeRec& operator=(const NodeRec&) = delete;
  ~NodeRec();
};

struct GraphRec {
  std::vector<std::unique_ptr<NodeRec>> nodes;
  // User objects it holds references to (cudaGraphRetainUserObject): a
  // clone and an executable graph hold them too; they go with the graph.
  std::map<cudaUserObject_t, unsigned> user_refs;
  ~GraphRec() {
    for (auto& [o, n] : user_refs) user_object_unref(o, n);
  }
  bool owned = false;  // a child graph: destroyed with its node
  int mem_execs = 0;   // executable graphs made from it while it has memory nodes (at most one)
  bool has_mem_nodes() const {
    for (auto& n : nodes)
      if (n->type == cudaGraphNodeTypeMemAlloc || n->type == cudaGraphNodeTypeMemFree) return true;
    return false;
  }
};

// A guest-run step between server segments.
struct Step {
  enum Kind { Segment, Host, Copy } kind;
  uint32_t segment = 0;
  const NodeRec* node = nullptr;
};

struct ExecRec {
  uint64_t handle = 0;
  std::unique_ptr<GraphRec> src;  // what was instantiated; guest steps point into it
  std::vector<Step> steps;
  std::vector<int64_t> server_index;  // top-level node position -> server node (-1: none)
  std::unordered_map<const NodeRec*, size_t> position;  // a user's top-level node -> its position
  unsigned long long flags = 0;
  std::vector<uint64_t> allocs, frees;  // graph memory its launch starts and ends
  GraphRec* origin = nullptr;           // the graph it was made from, when that has memory nodes
};

struct Capture {
  GraphRec* graph = nullptr;
  cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
  std::thread::id thread;
  unsigned long long id = 0;
  uint64_t origin = 0;
  bool invalid = false;
};
struct StreamCap {
  Capture* cap = nullptr;
  std::vector<NodeRec*> frontier;  // what the stream's next node depends on
  std::vector<cudaGraphEdgeData> edges;  // zeroed, as long as frontier (cudaStreamGetCaptureInfo)
};
struct EventCap {
  Capture* cap = nullptr;
  std::vector<NodeRec*> nodes;
};

std::mutex g_mu;  // guards everything below
std::unordered_set<GraphRec*> g_graphs;
std::unordered_set<NodeRec*> g_nodes;
std::unordered_set<ExecRec*> g_execs;
std::unordered_map<uint64_t, StreamCap> g_streams;
std::unordered_map<uint64_t, EventCap> g_events;
std::vector<std::unique_ptr<Capture>> g_caps;
unsigned long long g_next_capture_id = 1;
thread_local cudaStreamCaptureMode t_mode = cudaStreamCaptureModeGlobal;

// ---- graph memory. Its own lock: node destructors run with or without g_mu.
struct GraphMem {
  size_t bytes = 0;
  int refs = 0;       // mem-alloc nodes naming it
  bool live = false;  // between a launch of its alloc node and its free
};
std::mutex g_gm_mu;
std::unordered_map<uint64_t, GraphMem> g_gm;
size_t g_gm_used = 0, g_gm_reserved = 0, g_gm_used_high = 0, g_gm_reserved_high = 0;

bool graph_mem_known(uint64_t d) {
  std::lock_guard lk(g_gm_mu);
  return g_gm.count(d) != 0;
}

// A new reservation (a mem-alloc node being made).
cudaError_t graph_mem_new(size_t bytes, uint64_t* d) {
  if (!bytes) return cudaErrorInvalidValue;
  if (cudaError_t e = device_alloc(bytes, d); e != cudaSuccess) return e;
  std::lock_guard lk(g_gm_mu);
  g_gm[*d] = GraphMem{bytes, 1, false};
  g_gm_reserved += bytes;
  g_gm_reserved_high = std::max(g_gm_reserved_high, g_gm_reserved);
  return cudaSuccess;
}

void graph_mem_ref(uint64_t d) {
  std::lock_guard lk(g_gm_mu);
  if (auto it = g_gm.find(d); it != g_gm.end()) it->second.refs++;
}

// Drops a reservation when no node names it and it is not live: true if the
// caller must give the memory back (outside the lock).
bool graph_mem_release_locked(std::unordered_map<uint64_t, GraphMem>::iterator it) {
  if (it->second.refs > 0 || it->second.live) return false;
  g_gm_reserved -= it->second.bytes;
  g_gm.erase(it);
  return true;
}

void graph_mem_unref(uint64_t d) {
  bool give_back = false;
  {
    std::lock_guard lk(g_gm_mu);
    auto it = g_gm.find(d);
    if (it == g_gm.end()) return;
    it->second.refs--;
    give_back = graph_mem_release_locked(it);
  }
  if (give_back) device_free(d);
}

// Ends an allocation's life; false if `d` is not graph memory.
bool graph_mem_end(uint64_t d, cudaError_t* e) {
  bool give_back = false;
  {
    std::lock_guard lk(g_gm_mu);
    auto it = g_gm.find(d);
    if (it == g_gm.end()) return false;
    if (!it->second.live) {  // freed twice, or never launched
      *e = cudaErrorInvalidValue;
      return true;
    }
    it->second.live = false;
    g_gm_used -= it->second.bytes;
    give_back = graph_mem_release_locked(it);
  }
  *e = give_back ? device_free(d) : cudaSuccess;
  return true;
}

// A launch's graph memory: its allocations start (refused while one is still
// live from an earlier launch, unless the graph frees them on launch), then
// its frees end theirs; everything is checked before anything changes.
cudaError_t launch_graph_mem(const ExecRec* x) {
  std::vector<uint64_t> give_back;
  {
    std::lock_guard lk(g_gm_mu);
    const bool auto_free = x->flags & cudaGraphInstantiateFlagAutoFreeOnLaunch;
    for (uint64_t d : x->allocs) {
      auto it = g_gm.find(d);
      if (it == g_gm.end() || (it->second.live && !auto_free)) return cudaErrorInvalidValue;
    }
    for (uint64_t d : x->frees) {
      auto it = g_gm.find(d);
      bool own = std::find(x->allocs.begin(), x->allocs.end(), d) != x->allocs.end();
      if (it == g_gm.end() || (!own && !it->second.live)) return cudaErrorInvalidValue;
    }
    for (uint64_t d : x->allocs) {
      GraphMem& m = g_gm[d];
      if (!m.live) g_gm_used += m.bytes;
      m.live = true;
    }
    g_gm_used_high = std::max(g_gm_used_high, g_gm_used);
    for (uint64_t d : x->frees) {
      auto it = g_gm.find(d);
      it->second.live = false;
      g_gm_used -= it->second.bytes;
      if (graph_mem_release_locked(it)) give_back.push_back(d);
    }
  }
  cudaError_t e = cudaSuccess;
  for (uint64_t d : give_back)
    if (cudaError_t f = device_free(d); f != cudaSuccess) e = f;
  return e;
}

NodeRec::~NodeRec() {
  if (type == cudaGraphNodeTypeMemAlloc && mem) graph_mem_unref(mem);
}

NodeRec* node_of(cudaGraphNode_t n) { return reinterpret_cast<NodeRec*>(n); }
GraphRec* graph_of(cudaGraph_t g) { return reinterpret_cast<GraphRec*>(g); }
ExecRec* exec_of(cudaGraphExec_t x) { return reinterpret_cast<ExecRec*>(x); }
cudaGraphNode_t as_node(NodeRec* n) { return reinterpret_cast<cudaGraphNode_t>(n); }
cudaGraph_t as_graph(GraphRec* g) { return reinterpret_cast<cudaGraph_t>(g); }

bool live_graph(cudaGraph_t g) { return g && g_graphs.count(graph_of(g)); }
bool live_node(cudaGraphNode_t n) { return n && g_nodes.count(node_of(n)); }

void register_graph(GraphRec* g) {
  g_graphs.insert(g);
  for (auto& n : g->nodes) {
    g_nodes.insert(n.get());
    if (n->child) register_graph(n->child.get());
  }
}
void unregister_graph(GraphRec* g) {
  g_graphs.erase(g);
  for (auto& n : g->nodes) {
    g_nodes.erase(n.get());
    if (n->child) unregister_graph(n->child.get());
  }
}

void set_kernel_params(NodeRec* n, const uint8_t* params) {
  n->params.assign(params, params + n->k->param_bytes);
  n->argv.clear();
  for (auto& p : n->k->params) n->argv.push_back(n->params.data() + p.offset);
}

std::unique_ptr<GraphRec> clone_graph(const GraphRec* g, std::unordered_map<const NodeRec*, NodeRec*>* map = nullptr) {
  auto out = std::make_unique<GraphRec>();
  for (auto& [o, n] : g->user_refs)
    if (user_object_ref(o, n)) out->user_refs[o] = n;
  std::unordered_map<const NodeRec*, NodeRec*> local;
  auto& m = map ? *map : local;
  for (auto& n : g->nodes) {
    auto c = std::make_unique<NodeRec>();
    c->type = n->type;
    c->graph = out.get();
    c->k = n->k;
    c->grid = n->grid, c->block = n->block, c->shared = n->shared;
    if (n->k) set_kernel_params(c.get(), n->params.data());
    c->copy = n->copy, c->mset = n->mset, c->host = n->host, c->event = n->event;
    c->mem = n->mem, c->pool = n->pool;
    c->call_op = n->call_op, c->call = n->call;
    if (c->type == cudaGraphNodeTypeMemAlloc && c->mem) graph_mem_ref(c->mem);
    if (n->child) {
      c->child = clone_graph(n->child.get(), map);
      c->child->owned = true;
    }
    m[n.get()] = c.get();
    out->nodes.push_back(std::move(c));
  }
  for (auto& n : g->nodes) {
    NodeRec* c = m[n.get()];
    for (NodeRec* d : n->deps) c->deps.push_back(m[d]);
    for (NodeRec* u : n->users) c->users.push_back(m[u]);
  }
  return out;
}

void link(NodeRec* from, NodeRec* to) {
  to->deps.push_back(from);
  from->users.push_back(to);
}

// Adds a node to a graph after `deps` (all of that graph, checked, no repeats).
cudaError_t add_node(cudaGraphNode_t* out, cudaGraph_t g, const cudaGraphNode_t* deps, size_t ndeps,
                     std::unique_ptr<NodeRec> n) {
  std::lock_guard lk(g_mu);
  if (!out || !live_graph(g) || (ndeps && !deps)) return cudaErrorInvalidValue;
  GraphRec* gr = graph_of(g);
  for (size_t i = 0; i < ndeps; i++) {
    if (!live_node(deps[i]) || node_of(deps[i])->graph != gr) return cudaErrorInvalidValue;
    for (size_t j = 0; j < i; j++)
      if (deps[j] == deps[i]) return cudaErrorInvalidValue;
  }
  n->graph = gr;
  for (size_t i = 0; i < ndeps; i++) link(node_of(deps[i]), n.get());
  NodeRec* raw = n.get();
  gr->nodes.push_back(std::move(n));
  g_nodes.insert(raw);
  if (raw->child) register_graph(raw->child.get());
  *out = as_node(raw);
  return cudaSuccess;
}

cudaMemcpyKind resolve_kind(cudaMemcpyKind kind, const void* dst, const void* src) {
  if (kind != cudaMemcpyDefault) return kind;
  bool sd = is_device_ptr(src), dd = is_device_ptr(dst);
  return sd ? (dd ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost)
            : (dd ? cudaMemcpyHostToDevice : cudaMemcpyHostToHost);
}

cudaError_t check_copy_params(const cudaMemcpy3DParms& p) {
  if (p.srcArray || p.dstArray) {
    log_once("graph memcpy nodes with CUDA arrays are not forwarded");
    return cudaErrorNotSupported;
  }
  if (!p.srcPtr.ptr || !p.dstPtr.ptr) return cudaErrorInvalidValue;
  if (p.extent.width > p.srcPtr.pitch || p.extent.width > p.dstPtr.pitch) return cudaErrorInvalidPitchValue;
  if (p.kind < cudaMemcpyHostToHost || p.kind > cudaMemcpyDefault) return cudaErrorInvalidMemcpyDirection;
  return cudaSuccess;
}

cudaPitchedPtr pitched(void* p, size_t pitch, size_t xsize, size_t ysize) {
  cudaPitchedPtr r;
  r.ptr = p, r.pitch = pitch, r.xsize = xsize, r.ysize = ysize;
  return r;
}
cudaExtent extent3(size_t w, size_t h, size_t d) {
  cudaExtent e;
  e.width = w, e.height = h, e.depth = d;
  return e;
}

cudaMemcpy3DParms copy_1d(void* dst, const void* src, size_t n, cudaMemcpyKind kind) {
  cudaMemcpy3DParms p{};
  p.srcPtr = pitched(const_cast<void*>(src), n, n, 1);
  p.dstPtr = pitched(dst, n, n, 1);
  p.extent = extent3(n, 1, 1);
  p.kind = kind;
  return p;
}

// A side of a copy node: its first byte and row/slice pitches.
struct CopySide {
  uint8_t* base;
  size_t pitch, slice;
};
CopySide side(const cudaPitchedPtr& p, const cudaPos& pos) {
  size_t slice = p.pitch * p.ysize;
  return {static_cast<uint8_t*>(p.ptr) + pos.z * slice + pos.y * p.pitch + pos.x, p.pitch, slice};
}
size_t side_extent(const CopySide& s, const cudaExtent& e) {
  if (!e.width || !e.height || !e.depth) return 0;
  return (e.depth - 1) * s.slice + (e.height - 1) * s.pitch + e.width;
}

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

// ---- instantiation

struct Flat {
  const NodeRec* node;
  const NodeRec* top;  // its top-level node (itself, or the child graph node it came from)
};

// Kahn's algorithm, ready nodes in creation order; child graphs inlined.
cudaError_t flatten(const GraphRec* g, const NodeRec* top, std::vector<Flat>& out, int depth) {
  if (depth > 64) return cudaErrorInvalidValue;
  std::unordered_map<const NodeRec*, size_t> pos, indeg;
  for (size_t i = 0; i < g->nodes.size(); i++) {
    pos[g->nodes[i].get()] = i;
    indeg[g->nodes[i].get()] = g->nodes[i]->deps.size();
  }
  std::priority_queue<size_t, std::vector<size_t>, std::greater<size_t>> ready;
  for (size_t i = 0; i < g->nodes.size(); i++)
    if (g->nodes[i]->deps.empty()) ready.push(i);
  size_t done = 0;
  while (!ready.empty()) {
    const NodeRec* n = g->nodes[ready.top()].get();
    ready.pop();
    done++;
    const NodeRec* t = top ? top : n;
    if (n->type == cudaGraphNodeTypeGraph) {
      if (cudaError_t e = flatten(n->child.get(), t, out, depth + 1); e != cudaSuccess) return e;
    } else if (n->type != cudaGraphNodeTypeEmpty && n->type != cudaGraphNodeTypeMemAlloc &&
               n->type != cudaGraphNodeTypeMemFree) {  // memory nodes run in the guest, at launch
      out.push_back({n, t});
    }
    for (NodeRec* u : n->users)
      if (--indeg[u] == 0) ready.push(pos[u]);
  }
  return done == g->nodes.size() ? cudaSuccess : cudaErrorInvalidValue;  // a cycle
}

template <class T>
void put(std::vector<uint8_t>& w, const T& v) {
  auto* b = reinterpret_cast<const uint8_t*>(&v);
  w.insert(w.end(), b, b + sizeof v);
}
void put_hdr(std::vector<uint8_t>& w, GraphOp op, uint32_t body) { put(w, GraphNodeHdr{uint16_t(op), 0, body}); }

// Builds x (src, steps, positions) from `g` and the node list for the server.
cudaError_t build_exec(const GraphRec* g, ExecRec* x, std::vector<uint8_t>* wire, uint32_t* nodes,
                       uint32_t* segments) {
  std::unordered_map<const NodeRec*, NodeRec*> map;
  x->src = clone_graph(g, &map);
  x->position.clear();
  for (size_t i = 0; i < g->nodes.size(); i++) x->position[g->nodes[i].get()] = i;
  std::unordered_map<const NodeRec*, size_t> clone_pos;
  for (size_t i = 0; i < x->src->nodes.size(); i++) clone_pos[x->src->nodes[i].get()] = i;
  x->server_index.assign(g->nodes.size(), -1);
  std::vector<Flat> flat;
  if (cudaError_t e = flatten(x->src.get(), nullptr, flat, 0); e != cudaSuccess) return e;
  x->steps.clear();
  x->allocs.clear();
  x->frees.clear();
  for (auto& n : x->src->nodes) {  // memory nodes are top-level only (no child graph holds one)
    if (n->type == cudaGraphNodeTypeMemAlloc) x->allocs.push_back(n->mem);
    if (n->type == cudaGraphNodeTypeMemFree) x->frees.push_back(n->mem);
  }
  wire->clear();
  uint32_t n_server = 0, seg = 0, in_seg = 0;
  auto guest_step = [&](Step::Kind kind, const NodeRec* n) {
    if (in_seg) x->steps.push_back({Step::Segment, seg, nullptr});
    put_hdr(*wire, GraphOp::SegmentEnd, 0);
    seg++;
    in_seg = 0;
    x->steps.push_back({kind, 0, n});
  };
  for (auto& f : flat) {
    const NodeRec* n = f.node;
    switch (int(n->type)) {  // int: kNodeCall lies outside the enum
      case cudaGraphNodeTypeKernel: {
        if (cudaError_t e = ensure_kernel(n->k); e != cudaSuccess) return e;
        GraphKernelBody b{};
        b.kernel = n->k->handle;
        b.grid[0] = n->grid.x, b.grid[1] = n->grid.y, b.grid[2] = n->grid.z;
        b.block[0] = n->block.x, b.block[1] = n->block.y, b.block[2] = n->block.z;
        b.shared_bytes = n->shared;
        b.param_bytes = uint32_t(n->params.size());
        put_hdr(*wire, GraphOp::Kernel, uint32_t(sizeof b + n->params.size()));
        put(*wire, b);
        wire->insert(wire->end(), n->params.begin(), n->params.end());
        if (f.top == n) x->server_index[clone_pos[n]] = n_server;
        n_server++, in_seg++;
        break;
      }
      case cudaGraphNodeTypeMemcpy: {
        const cudaMemcpy3DParms& p = n->copy;
        CopySide s = side(p.srcPtr, p.srcPos), d = side(p.dstPtr, p.dstPos);
        cudaMemcpyKind kind = resolve_kind(p.kind, d.base, s.base);
        size_t sext = side_extent(s, p.extent), dext = side_extent(d, p.extent);
        GraphCopyBody b{};
        b.dst = reinterpret_cast<uint64_t>(d.base), b.src = reinterpret_cast<uint64_t>(s.base);
        b.dpitch = d.pitch, b.spitch = s.pitch, b.dslice = d.slice, b.sslice = s.slice;
        b.width = p.extent.width, b.height = p.extent.height, b.depth = p.extent.depth;
        b.kind = kind;
        // The server reaches host memory only in the data area (pinned memory).
        bool server = kind == cudaMemcpyDeviceToDevice ||
                      (kind == cudaMemcpyHostToDevice && server_sees(Connection::get(), s.base, sext, &b.src)) ||
                      (kind == cudaMemcpyDeviceToHost && server_sees(Connection::get(), d.base, dext, &b.dst));
        if (!server) {
          guest_step(Step::Copy, n);
          break;
        }
        put_hdr(*wire, GraphOp::Copy, sizeof b);
        put(*wire, b);
        n_server++, in_seg++;
        break;
      }
      case cudaGraphNodeTypeMemset: {
        GraphMemsetBody b{};
        b.dst = reinterpret_cast<uint64_t>(n->mset.dst);
        b.pitch = n->mset.pitch, b.width = n->mset.width, b.height = n->mset.height;
        b.value = n->mset.value, b.elem_size = n->mset.elementSize;
        put_hdr(*wire, GraphOp::Memset, sizeof b);
        put(*wire, b);
        n_server++, in_seg++;
        break;
      }
      case cudaGraphNodeTypeEventRecord:
      case cudaGraphNodeTypeWaitEvent:
        put_hdr(*wire, n->type == cudaGraphNodeTypeEventRecord ? GraphOp::EventRecord : GraphOp::EventWait,
                sizeof(GraphEventBody));
        put(*wire, GraphEventBody{reinterpret_cast<uint64_t>(n->event)});
        n_server++, in_seg++;
        break;
      case cudaGraphNodeTypeHost:
        guest_step(Step::Host, n);
        break;
      case kNodeCall:
        put_hdr(*wire, GraphOp::Call, uint32_t(sizeof(GraphCallBody) + n->call.size()));
        put(*wire, GraphCallBody{n->call_op, 0, uint32_t(n->call.size())});
        wire->insert(wire->end(), n->call.begin(), n->call.end());
        n_server++, in_seg++;
        break;
      default:
        return cudaErrorNotSupported;
    }
  }
  if (in_seg) x->steps.push_back({Step::Segment, seg, nullptr});
  if (n_server > kMaxGraphNodes) return cudaErrorNotSupported;
  *nodes = n_server;
  *segments = seg + 1;
  return cudaSuccess;
}

// Ships the node list: inside the request when it fits, else through the pinned heap.
cudaError_t send_graph(uint64_t exec, const std::vector<uint8_t>& wire, uint32_t nodes, uint32_t segments,
                       uint64_t* out) {
  WH_CONN(c);
  GraphInstantiateReq rq{exec, 0, 0, nodes, segments};
  GraphInstantiateResp rs{};
  cudaError_t e;
  if (wire.size() + sizeof rq <= c->max_msg()) {
    e = c->call<Op::GraphInstantiate>(rq, &rs, {wire.data(), wire.size()});
  } else {
    void* buf = nullptr;
    if (cudaError_t a = data_area_block(c, wire.size(), &buf, &rq.src_off); a != cudaSuccess) return a;
    std::memcpy(buf, wire.data(), wire.size());
    rq.bytes = wire.size();
    e = push_data_area(c, rq.src_off, wire.size());
    if (e == cudaSuccess) e = c->call<Op::GraphInstantiate>(rq, &rs);
    heap_free_block(rq.src_off);
  }
  if (e == cudaSuccess) *out = rs.exec;
  return e;
}

// A copy node with a pageable host side, run here (synchronously, in stream order).
cudaError_t run_guest_copy(const NodeRec* n, cudaStream_t s) {
  const cudaMemcpy3DParms& p = n->copy;
  CopySide sr = side(p.srcPtr, p.srcPos), d = side(p.dstPtr, p.dstPos);
  cudaMemcpyKind kind = resolve_kind(p.kind, d.base, sr.base);
  if (kind == cudaMemcpyHostToHost)
    if (cudaError_t e = cudaStreamSynchronize(s); e != cudaSuccess) return e;
  for (size_t z = 0; z < p.extent.depth; z++) {
    uint8_t* dz = d.base + z * d.slice;
    const uint8_t* sz = sr.base + z * sr.slice;
    if (kind == cudaMemcpyHostToHost) {
      for (size_t y = 0; y < p.extent.height; y++) std::memmove(dz + y * d.pitch, sz + y * sr.pitch, p.extent.width);
      continue;
    }
    if (cudaError_t e = do_memcpy2d(dz, d.pitch, sz, sr.pitch, p.extent.width, p.extent.height, kind, s, false);
        e != cudaSuccess)
      return e;
  }
  return cudaSuccess;
}

// Same nodes, types and edges (by position), recursively: what cudaGraphExecUpdate accepts.
bool same_topology(const GraphRec* a, const GraphRec* b, const NodeRec** bad) {
  if (a->nodes.size() != b->nodes.size()) return false;
  std::unordered_map<const NodeRec*, size_t> pa, pb;
  for (size_t i = 0; i < a->nodes.size(); i++) pa[a->nodes[i].get()] = i, pb[b->nodes[i].get()] = i;
  for (size_t i = 0; i < a->nodes.size(); i++) {
    const NodeRec *x = a->nodes[i].get(), *y = b->nodes[i].get();
    *bad = y;
    if (x->type != y->type || x->deps.size() != y->deps.size()) return false;
    std::vector<size_t> dx, dy;
    for (auto* d : x->deps) dx.push_back(pa[d]);
    for (auto* d : y->deps) dy.push_back(pb[d]);
    std::sort(dx.begin(), dx.end());
    std::sort(dy.begin(), dy.end());
    if (dx != dy) return false;
    if (x->child && !same_topology(x->child.get(), y->child.get(), bad)) return false;
  }
  return true;
}

const char* type_name(cudaGraphNodeType t) {
  switch (int(t)) {
    case cudaGraphNodeTypeKernel: return "KERNEL";
    case cudaGraphNodeTypeMemcpy: return "MEMCPY";
    case cudaGraphNodeTypeMemset: return "MEMSET";
    case cudaGraphNodeTypeHost: return "HOST";
    case cudaGraphNodeTypeGraph: return "CHILD_GRAPH";
    case cudaGraphNodeTypeEmpty: return "EMPTY";
    case cudaGraphNodeTypeWaitEvent: return "EVENT_WAIT";
    case cudaGraphNodeTypeEventRecord: return "EVENT_RECORD";
    case cudaGraphNodeTypeMemAlloc: return "MEM_ALLOC";
    case cudaGraphNodeTypeMemFree: return "MEM_FREE";
    case kNodeCall: return "KERNEL (library call)";
    default: return "OTHER";
  }
}

std::string demangle(const std::string& name) {
  int st = 0;
  char* d = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &st);
  std::string out = (st == 0 && d) ? d : name;
  std::free(d);
  return out;
}

std::string dot_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\' || c == '{' || c == '}' || c == '<' || c == '>' || c == '|') o += '\\';
    o += c;
  }
  return o;
}

void dot_graph(FILE* f, const GraphRec* g, const std::string& prefix, int depth) {
  std::unordered_map<const NodeRec*, std::string> id;
  for (size_t i = 0; i < g->nodes.size(); i++) id[g->nodes[i].get()] = prefix + "node_" + std::to_string(i);
  std::string ind(size_t(2 + 2 * depth), ' ');
  for (size_t i = 0; i < g->nodes.size(); i++) {
    const NodeRec* n = g->nodes[i].get();
    std::string label = std::string(type_name(n->type)) + "\\n" + id[n];
    char buf[256];
    switch (int(n->type)) {
      case cudaGraphNodeTypeKernel:
        std::snprintf(buf, sizeof buf, "\\ngrid (%u,%u,%u) block (%u,%u,%u) shared %u", n->grid.x, n->grid.y,
                      n->grid.z, n->block.x, n->block.y, n->block.z, n->shared);
        label += "\\n" + dot_escape(demangle(n->k->name)) + "\\n" + dot_escape(n->k->name) + buf;
        break;
      case cudaGraphNodeTypeMemcpy:
        std::snprintf(buf, sizeof buf, "\\n%zu x %zu x %zu bytes, kind %d", n->copy.extent.width,
                      n->copy.extent.height, n->copy.extent.depth, int(n->copy.kind));
        label += buf;
        break;
      case cudaGraphNodeTypeMemset:
        std::snprintf(buf, sizeof buf, "\\n%zu x %zu elements of %u bytes, value 0x%x", n->mset.width,
                      n->mset.height, n->mset.elementSize, n->mset.value);
        label += buf;
        break;
      case cudaGraphNodeTypeHost:
        std::snprintf(buf, sizeof buf, "\\nfn %p data %p", reinterpret_cast<void*>(n->host.fn), n->host.userData);
        label += buf;
        break;
      case kNodeCall:
        label += std::string("\\n") + op_name(n->call_op);
        break;
      case cudaGraphNodeTypeMemAlloc:
      case cudaGraphNodeTypeMemFree:
        std::snprintf(buf, sizeof buf, "\\n0x%llx", static_cast<unsigned long long>(n->mem));
        label += buf;
        break;
      default:
        break;
    }
    if (n->type == cudaGraphNodeTypeGraph) {
      std::fprintf(f, "%ssubgraph cluster_%s {\n%s  label=\"%s\";\n", ind.c_str(), id[n].c_str(), ind.c_str(),
                   label.c_str());
      std::fprintf(f, "%s  \"%s\" [shape=point style=invis];\n", ind.c_str(), id[n].c_str());
      dot_graph(f, n->child.get(), id[n] + "_", depth + 1);
      std::fprintf(f, "%s}\n", ind.c_str());
    } else {
      std::fprintf(f, "%s\"%s\" [shape=box label=\"%s\"];\n", ind.c_str(), id[n].c_str(), label.c_str());
    }
  }
  for (auto& n : g->nodes)
    for (NodeRec* u : n->users) std::fprintf(f, "%s\"%s\" -> \"%s\";\n", ind.c_str(), id[n.get()].c_str(), id[u].c_str());
}

}  // namespace

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

// ------------------------------------------------------------ graphs

cudaError_t cudaGraphCreate(cudaGraph_t* out, unsigned int flags) {
  if (!out || flags) return set_error(cudaErrorInvalidValue);
  auto* g = new GraphRec();
  std::lock_guard lk(g_mu);
  g_graphs.insert(g);
  *out = as_graph(g);
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  {
    std::lock_guard lk(g_mu);
    if (!live_graph(graph) || graph_of(graph)->owned) return set_error(cudaErrorInvalidValue);
    for (auto& c : g_caps)
      if (c->graph == graph_of(graph)) return set_error(cudaErrorInvalidValue);  // still capturing into it
    for (ExecRec* x : g_execs)
      if (x->origin == graph_of(graph)) x->origin = nullptr;
    unregister_graph(graph_of(graph));
    delete graph_of(graph);
  }
  run_user_object_destructors();
  return cudaSuccess;
}

cudaError_t cudaGraphRetainUserObject(cudaGraph_t graph, cudaUserObject_t o, unsigned count, unsigned flags) {
  if (count == 0 || (flags & ~unsigned(cudaGraphUserObjectMove))) return set_error(cudaErrorInvalidValue);
  std::lock_guard lk(g_mu);
  if (!live_graph(graph) || !user_object_live(o)) return set_error(cudaErrorInvalidValue);
  // Move: the caller's references become the graph's.
  if (!(flags & cudaGraphUserObjectMove) && !user_object_ref(o, count)) return set_error(cudaErrorInvalidValue);
  graph_of(graph)->user_refs[o] += count;
  return cudaSuccess;
}

cudaError_t cudaGraphReleaseUserObject(cudaGraph_t graph, cudaUserObject_t o, unsigned count) {
  {
    std::lock_guard lk(g_mu);
    if (count == 0 || !live_graph(graph)) return set_error(cudaErrorInvalidValue);
    auto& refs = graph_of(graph)->user_refs;
    auto it = refs.find(o);
    if (it == refs.end() || it->second < count) return set_error(cudaErrorInvalidValue);
    if (!(it->second -= count)) refs.erase(it);
    user_object_unref(o, count);
  }
  run_user_object_destructors();
  return cudaSuccess;
}

cudaError_t cudaGraphClone(cudaGraph_t* out, cudaGraph_t graph) {
  std::lock_guard lk(g_mu);
  if (!out || !live_graph(graph)) return set_error(cudaErrorInvalidValue);
  if (graph_of(graph)->has_mem_nodes()) return set_error(cudaErrorNotSupported);  // as in CUDA
  GraphRec* g = clone_graph(graph_of(graph)).release();
  register_graph(g);
  *out = as_graph(g);
  return cudaSuccess;
}

cudaError_t cudaGraphNodeFindInClone(cudaGraphNode_t* out, cudaGraphNode_t orig, cudaGraph_t clone) {
  std::lock_guard lk(g_mu);
  if (!out || !live_node(orig) || !live_graph(clone)) return set_error(cudaErrorInvalidValue);
  // Clones keep node order: the same position.
  GraphRec *og = node_of(orig)->graph, *cg = graph_of(clone);
  if (og->nodes.size() != cg->nodes.size()) return set_error(cudaErrorInvalidValue);
  for (size_t i = 0; i < og->nodes.size(); i++)
    if (og->nodes[i].get() == node_of(orig)) {
      *out = as_node(cg->nodes[i].get());
      return cudaSuccess;
    }
  return set_error(cudaErrorInvalidValue);
}

cudaError_t cudaGraphAddKernelNode(cudaGraphNode_t* out, cudaGraph_t g, const cudaGraphNode_t* deps, size_t ndeps,
                                   const cudaKernelNodeParams* p) {
  if (!p) return set_error(cudaErrorInvalidValue);
  if (p->extra) {
    log_once("graph kernel nodes with `extra` parameters are not forwarded");
    return set_error(cudaErrorNotSupported);
  }
  KernelRec* k = kernel_of(p->func);
  uint8_t buf[kMaxParamBytes];
  if (cudaError_t e = pack_launch(k, p->gridDim, p->blockDim, p->kernelParams, buf); e != cudaSuccess)
    return set_error(e);
  auto n = std::make_unique<NodeRec>();
  n->type = cudaGraphNodeTypeKernel;
  n->k = k;
  n->grid = p->gridDim, n->block = p->blockDim, n->shared = p->sharedMemBytes;
  set_kernel_params(n.get(), buf);
  return set_error(add_node(out, g, deps, ndeps, std::move(n)));
}

cudaError_t cudaGraphKernelNodeGetParams(cudaGraphNode_t node, cudaKernelNodeParams* p) {
  std::lock_guard lk(g_mu);
  if (!p || !live_node(node) || node_of(node)->type != cudaGraphNodeTypeKernel) return set_error(cudaErrorInvalidValue);
  NodeRec* n = node_of(node);
  *p = cudaKernelNodeParams{};
  {
    std::lock_guard rk(rt().mu);
    for (auto& [stub, k] : rt().kernels)
      if (k == n->k) p->func = const_cast<void*>(stub);
    if (!p->func && is_driver_function(n->k)) p->func = n->k;  // a driver API function
  }
  p->gridDim = n->grid, p->blockDim = n->block, p->sharedMemBytes = n->shared;
  p->kernelParams = n->argv.data();
  return cudaSuccess;
}

cudaError_t cudaGraphKernelNodeSetParams(cudaGraphNode_t node, const cudaKernelNodeParams* p) {
  if (!p || p->extra) return set_error(p ? cudaErrorNotSupported : cudaErrorInvalidValue);
  KernelRec* k = kernel_of(p->func);
  uint8_t buf[kMaxParamBytes];
  if (cudaError_t e = pack_launch(k, p->gridDim, p->blockDim, p->kernelParams, buf); e != cudaSuccess)
    return set_error(e);
  std::lock_guard lk(g_mu);
  if (!live_node(node) || node_of(node)->type != cudaGraphNodeTypeKernel) return set_error(cudaErrorInvalidValue);
  NodeRec* n = node_of(node);
  n->k = k;
  n->grid = p->gridDim, n->block = p->blockDim, n->shared = p->sharedMemBytes;
  set_kernel_params(n, buf);
  return cudaSuccess;
}

cudaError_t cudaGraphAddMemcpyNode(cudaGraphNode_t* out, cudaGraph_t g, const cudaGraphNode_t* deps, size_t ndeps,
                                   const cudaMemcpy3DParms* p) {
  if (!p) return set_error(cudaErrorInvalidValue);
  if (cudaError_t e = check_copy_params(*p); e != cudaSuccess) return set_error(e);
  auto n = std::make_unique<NodeRec>();
  n->type = cudaGraphNodeTypeMemcpy;
  n->copy = *p;
  return set_error(add_node(out, g, deps, ndeps, std::move(n)));
}

cudaError_t cudaGraphAddMemcpyNode1D(cudaGraphNode_t* out, cudaGraph_t g, const cudaGraphNode_t* deps, size_t ndeps,
                                     void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  if (!count) return set_error(cudaErrorInvalidValue);
  cudaMemcpy3DParms p = copy_1d(dst, src, count, kind);
  return cudaGraphAddMemcpyNode(out, g, deps, ndeps, &p);
}

cudaError_t cudaGraphMemcpyNodeGetParams(cudaGraphNode_t node, cudaMemcpy3DParms* p) {
  std::lock_guard lk(g_mu);
  if (!p || !live_node(node) || node_of(node)->type != cudaGraphNodeTypeMemcpy) return set_error(cudaErrorInvalidValue);
  *p = node_of(node)->copy;
  return cudaSuccess;
}

cudaError_t cudaGraphMemcpyNodeSetParams(cudaGraphNode_t node, const cudaMemcpy3DParms* p) {
  if (!p) return set_error(cudaErrorInvalidValue);
  if (cudaError_t e = check_copy_params(*p); e != cudaSuccess) return set_error(e);
  std::lock_guard lk(g_mu);
  if (!live_node(node) || node_of(node)->type != cudaGraphNodeTypeMemcpy) return set_error(cudaErrorInvalidValue);
  node_of(node)->copy = *p;
  return cudaSuccess;
}

cudaError_t cudaGraphMemcpyNodeSetParams1D(cudaGraphNode_t node, void* dst, const void* src, size_t count,
                                           cudaMemcpyKind kind) {
  cudaMemcpy3DParms p = copy_1d(dst, src, count, kind);
  return cudaGraphMemcpyNodeSetParams(node, &p);
}

cudaError_t cudaGraphAddMemsetNode(cudaGraphNode_t* out, cudaGraph_t g, const cudaGraphNode_t* deps, size_t ndeps,
                                   const cudaMemsetParams* p) {
  if (!p || !p->dst || (p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4) || !p->width ||
      !p->height || (p->height > 1 && p->pitch < p->width * p->elementSize))
    return set_error(cudaErrorInvalidValue);
  auto n = std::make_unique<NodeRec>();
  n->type = cudaGraphNodeTypeMemset;
  n->mset = *p;
  if (p->height == 1) n->mset.pitch = p->width * p->elementSize;
  return set_error(add_node(out, g, deps, ndeps, std::move(n)));
}

cudaError_t cudaGraphMemsetNodeGetParams(cudaGraphNode_t node, cudaMemsetParams* p) {
  std::lock_guard lk(g_mu);
  if (!p || !live_node(node) || node_of(node)->type != cudaGraphNodeTypeMemset) return set_error(cudaErrorInvalidValue);
  *p = node_of(node)->mset;
  return cudaSuccess;
}

cudaError_t cudaGraphAddHostNode(cudaGraphNode_t* out, cudaGraph_t g, const cudaGraphNode_t* deps, size_t ndeps,
                                 const cudaHostNodeParams* p) {
  if (!p || !p->fn) return set_error(cudaErrorInvalidValue);
  auto n = std::make_unique<NodeRec>();
  n->type = cudaGraphNodeTypeHost;
  n->host = *p;
  return set_error(add_node(out, g, deps, ndeps, std::move(n)));
}

cudaError_t cudaGraphHostNodeGetParams(cudaGraphNode_t node, cudaHostNodeParams* p) {
  std::lock_guard lk(g_mu);
  if (!p || !live_node(node) || node_of(node)->type != cudaGraphNodeTypeHost) return set_error(cudaErrorInvalidValue);
  *p = node_of(node)->host;
  return cudaSuccess;
}

cudaError_t cudaGraphHostNodeSetParams(cudaGraphNode_t node, const cudaHostNodeParams* p) {
  std::lock_guard lk(g_mu);
  if (!p || !p->fn || !live_node(node) || node_of(node)->type != cudaGraphNodeTypeHost)
    return set_error(cudaErrorInvalidValue);
  node_of(node)->host = *p;
  return cudaSuccess;
}

static cudaError_t add_event_node(cudaGraphNode_t* out, cudaGraph_t g, const cudaGraphNode_t* deps, size_t ndeps,
                                  cudaEvent_t ev, cudaGraphNodeType t) {
  if (!ev) return cudaErrorInvalidValue;
  auto n = std::make_unique<NodeRec>();
  n->type = t;
  n->event = ev;
  return add_node(out, g, deps, ndeps, std::move(n));
}

cudaError_t cudaGraphAddEventRecordNode(cudaGraphNode_t* out, cudaGraph_t g, const cudaGraphNode_t* deps,
                                        size_t ndeps, cudaEvent_t ev) {
  return set_error(add_event_node(out, g, deps, ndeps, ev, cudaGraphNodeTypeEventRecord));
}

cudaError_t cudaGraphAddEventWaitNode(cudaGraphNode_t* out, cudaGraph_t g, const cudaGraphNode_t* deps, size_t ndeps,
                                      cudaEvent_t ev) {
  return set_error(add_event_node(out, g, deps, ndeps, ev, cudaGraphNodeTypeWaitEvent));
}

static cudaError_t event_of_node(cudaGraphNode_t node, cudaEvent_t* ev, cudaGraphNodeType t) {
  std::lock_guard lk(g_mu);
  if (!ev || !live_node(node) || node_of(node)->type != t) return cudaErrorInvalidValue;
  *ev = node_of(node)->event;
  return cudaSuccess;
}
cudaError_t cudaGraphEventRecordNodeGetEvent(cudaGraphNode_t node, cudaEvent_t* ev) {
  return set_error(event_of_node(node, ev, cudaGraphNodeTypeEventRecord));
}
cudaError_t cudaGraphEventWaitNodeGetEvent(cudaGraphNode_t node, cudaEvent_t* ev) {
  return set_error(event_of_node(node, ev, cudaGraphNodeTypeWaitEvent));
}

cudaError_t cudaGraphAddEmptyNode(cudaGraphNode_t* out, cudaGraph_t g, const cudaGraphNode_t* deps, size_t ndeps) {
  auto n = std::make_unique<NodeRec>();
  n->type = cudaGraphNodeTypeEmpty;
  return set_error(add_node(out, g, deps, ndeps, std::move(n)));
}

cudaError_t cudaGraphAddChildGraphNode(cudaGraphNode_t* out, cudaGraph_t g, const cudaGraphNode_t* deps,
                                       size_t ndeps, cudaGraph_t child) {
  auto n = std::make_unique<NodeRec>();
  n->type = cudaGraphNodeTypeGraph;
  {
    std::lock_guard lk(g_mu);
    if (!live_graph(child) || child == g) return set_error(cudaErrorInvalidValue);
    // A graph with memory nodes cannot be copied into a child node (CUDA moves it instead).
    if (graph_of(child)->has_mem_nodes()) return set_error(cudaErrorNotSupported);
    n->child = clone_graph(graph_of(child));  // the node owns a copy, as in CUDA
    n->child->owned = true;
  }
  return set_error(add_node(out, g, deps, ndeps, std::move(n)));
}

cudaError_t cudaGraphChildGraphNodeGetGraph(cudaGraphNode_t node, cudaGraph_t* out) {
  std::lock_guard lk(g_mu);
  if (!out || !live_node(node) || node_of(node)->type != cudaGraphNodeTypeGraph) return set_error(cudaErrorInvalidValue);
  *out = as_graph(node_of(node)->child.get());
  return cudaSuccess;
}

// ---- graph memory nodes
cudaError_t cudaGraphAddMemAllocNode(cudaGraphNode_t* out, cudaGraph_t g, const cudaGraphNode_t* deps, size_t ndeps,
                                     cudaMemAllocNodeParams* p) {
  if (!p || !out) return set_error(cudaErrorInvalidValue);
  // One device, ordinary (non-IPC) device memory: what the modeled GPU offers.
  const cudaMemPoolProps& pp = p->poolProps;
  if (pp.allocType != cudaMemAllocationTypePinned || pp.location.type != cudaMemLocationTypeDevice ||
      pp.location.id != 0 || pp.handleTypes != cudaMemHandleTypeNone || p->accessDescCount > 1 ||
      (p->accessDescCount && !p->accessDescs) || !p->bytesize)
    return set_error(cudaErrorInvalidValue);
  for (size_t i = 0; i < p->accessDescCount; i++)
    if (p->accessDescs[i].location.type != cudaMemLocationTypeDevice || p->accessDescs[i].location.id != 0)
      return set_error(cudaErrorInvalidValue);
  uint64_t d = 0;
  if (cudaError_t e = graph_mem_new(p->bytesize, &d); e != cudaSuccess) return set_error(e);
  auto n = std::make_unique<NodeRec>();
  n->type = cudaGraphNodeTypeMemAlloc;
  n->mem = d;
  n->pool = pp;
  cudaError_t e = add_node(out, g, deps, ndeps, std::move(n));  // on failure the node gives the memory back
  if (e == cudaSuccess) p->dptr = reinterpret_cast<void*>(d);
  return set_error(e);
}

cudaError_t cudaGraphMemAllocNodeGetParams(cudaGraphNode_t node, cudaMemAllocNodeParams* p) {
  std::lock_guard lk(g_mu);
  if (!p || !live_node(node) || node_of(node)->type != cudaGraphNodeTypeMemAlloc)
    return set_error(cudaErrorInvalidValue);
  const NodeRec* n = node_of(node);
  std::lock_guard gk(g_gm_mu);
  auto it = g_gm.find(n->mem);
  *p = cudaMemAllocNodeParams{};
  p->poolProps = n->pool;
  p->bytesize = it == g_gm.end() ? 0 : it->second.bytes;
  p->dptr = reinterpret_cast<void*>(n->mem);
  return cudaSuccess;
}

cudaError_t cudaGraphAddMemFreeNode(cudaGraphNode_t* out, cudaGraph_t g, const cudaGraphNode_t* deps, size_t ndeps,
                                    void* dptr) {
  const uint64_t d = reinterpret_cast<uint64_t>(dptr);
  if (!out || !graph_mem_known(d)) return set_error(cudaErrorInvalidValue);
  {
    std::lock_guard lk(g_mu);
    if (!live_graph(g)) return set_error(cudaErrorInvalidValue);
    for (auto& n : graph_of(g)->nodes)  // freed once per graph
      if (n->type == cudaGraphNodeTypeMemFree && n->mem == d) return set_error(cudaErrorInvalidValue);
  }
  auto n = std::make_unique<NodeRec>();
  n->type = cudaGraphNodeTypeMemFree;
  n->mem = d;
  return set_error(add_node(out, g, deps, ndeps, std::move(n)));
}

cudaError_t cudaGraphMemFreeNodeGetParams(cudaGraphNode_t node, void* dptr_out) {
  std::lock_guard lk(g_mu);
  if (!dptr_out || !live_node(node) || node_of(node)->type != cudaGraphNodeTypeMemFree)
    return set_error(cudaErrorInvalidValue);
  *static_cast<void**>(dptr_out) = reinterpret_cast<void*>(node_of(node)->mem);
  return cudaSuccess;
}

cudaError_t cudaDeviceGetGraphMemAttribute(int device, cudaGraphMemAttributeType attr, void* value) {
  if (device != 0) return set_error(cudaErrorInvalidDevice);
  if (!value) return set_error(cudaErrorInvalidValue);
  std::lock_guard lk(g_gm_mu);
  uint64_t v;
  switch (attr) {
    case cudaGraphMemAttrUsedMemCurrent: v = g_gm_used; break;
    case cudaGraphMemAttrUsedMemHigh: v = g_gm_used_high; break;
    case cudaGraphMemAttrReservedMemCurrent: v = g_gm_reserved; break;
    case cudaGraphMemAttrReservedMemHigh: v = g_gm_reserved_high; break;
    default: return set_error(cudaErrorInvalidValue);
  }
  *static_cast<uint64_t*>(value) = v;
  return cudaSuccess;
}

cudaError_t cudaDeviceSetGraphMemAttribute(int device, cudaGraphMemAttributeType attr, void* value) {
  if (device != 0) return set_error(cudaErrorInvalidDevice);
  // Only the high watermarks can be set, and only to 0 (a reset), as in CUDA.
  if (!value || *static_cast<uint64_t*>(value) != 0) return set_error(cudaErrorInvalidValue);
  std::lock_guard lk(g_gm_mu);
  if (attr == cudaGraphMemAttrUsedMemHigh) g_gm_used_high = g_gm_used;
  else if (attr == cudaGraphMemAttrReservedMemHigh) g_gm_reserved_high = g_gm_reserved;
  else return set_error(cudaErrorInvalidValue);
  return cudaSuccess;
}

// Reserved graph memory stays at its fixed address while a node names it,
// and the sim device cannot unback an address range: nothing to give back.
cudaError_t cudaDeviceGraphMemTrim(int device) {
  return device == 0 ? cudaSuccess : set_error(cudaErrorInvalidDevice);
}

cudaError_t cudaGraphNodeGetType(cudaGraphNode_t node, cudaGraphNodeType* t) {
  std::lock_guard lk(g_mu);
  if (!t || !live_node(node)) return set_error(cudaErrorInvalidValue);
  *t = node_of(node)->type == kNodeCall ? cudaGraphNodeTypeKernel : node_of(node)->type;
  return cudaSuccess;
}

// The CUDA convention for node lists: with a null array, the count; else up
// to *count entries, and *count set to the number written.
static cudaError_t node_list(const std::vector<NodeRec*>& v, cudaGraphNode_t* out, cudaGraphEdgeData* edges,
                             size_t* count) {
  if (!count) return cudaErrorInvalidValue;
  if (!out) {
    *count = v.size();
    return cudaSuccess;
  }
  size_t n = std::min(*count, v.size());
  for (size_t i = 0; i < n; i++) {
    out[i] = as_node(v[i]);
    if (edges) edges[i] = cudaGraphEdgeData{};
  }
  for (size_t i = n; i < *count; i++) {
    out[i] = nullptr;
    if (edges) edges[i] = cudaGraphEdgeData{};
  }
  *count = n;
  return cudaSuccess;
}

cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t* nodes, size_t* count) {
  std::lock_guard lk(g_mu);
  if (!live_graph(graph)) return set_error(cudaErrorInvalidValue);
  std::vector<NodeRec*> v;
  for (auto& n : graph_of(graph)->nodes) v.push_back(n.get());
  return set_error(node_list(v, nodes, nullptr, count));
}

cudaError_t cudaGraphGetRootNodes(cudaGraph_t graph, cudaGraphNode_t* nodes, size_t* count) {
  std::lock_guard lk(g_mu);
  if (!live_graph(graph)) return set_error(cudaErrorInvalidValue);
  std::vector<NodeRec*> v;
  for (auto& n : graph_of(graph)->nodes)
    if (n->deps.empty()) v.push_back(n.get());
  return set_error(node_list(v, nodes, nullptr, count));
}

cudaError_t cudaGraphNodeGetDependencies(cudaGraphNode_t node, cudaGraphNode_t* deps, cudaGraphEdgeData* edges,
                                         size_t* count) {
  std::lock_guard lk(g_mu);
  if (!live_node(node)) return set_error(cudaErrorInvalidValue);
  return set_error(node_list(node_of(node)->deps, deps, edges, count));
}

cudaError_t cudaGraphNodeGetDependentNodes(cudaGraphNode_t node, cudaGraphNode_t* users, cudaGraphEdgeData* edges,
                                           size_t* count) {
  std::lock_guard lk(g_mu);
  if (!live_node(node)) return set_error(cudaErrorInvalidValue);
  return set_error(node_list(node_of(node)->users, users, edges, count));
}

cudaError_t cudaGraphGetEdges(cudaGraph_t graph, cudaGraphNode_t* from, cudaGraphNode_t* to,
                              cudaGraphEdgeData* edges, size_t* count) {
  std::lock_guard lk(g_mu);
  if (!live_graph(graph) || !count || (!from != !to)) return set_error(cudaErrorInvalidValue);
  std::vector<std::pair<NodeRec*, NodeRec*>> v;
  for (auto& n : graph_of(graph)->nodes)
    for (NodeRec* u : n->users) v.push_back({n.get(), u});
  if (!from) {
    *count = v.size();
    return cudaSuccess;
  }
  size_t n = std::min(*count, v.size());
  for (size_t i = 0; i < n; i++) {
    from[i] = as_node(v[i].first), to[i] = as_node(v[i].second);
    if (edges) edges[i] = cudaGraphEdgeData{};
  }
  *count = n;
  return cudaSuccess;
}

cudaError_t cudaGraphAddDependencies(cudaGraph_t graph, const cudaGraphNode_t* from, const cudaGraphNode_t* to,
                                     const cudaGraphEdgeData*, size_t n) {
  std::lock_guard lk(g_mu);
  if (!live_graph(graph) || (n && (!from || !to))) return set_error(cudaErrorInvalidValue);
  GraphRec* g = graph_of(graph);
  for (size_t i = 0; i < n; i++) {
    if (!live_node(from[i]) || !live_node(to[i]) || node_of(from[i])->graph != g || node_of(to[i])->graph != g ||
        from[i] == to[i])
      return set_error(cudaErrorInvalidValue);
    auto& d = node_of(to[i])->deps;
    if (std::find(d.begin(), d.end(), node_of(from[i])) != d.end()) return set_error(cudaErrorInvalidValue);
  }
  for (size_t i = 0; i < n; i++) link(node_of(from[i]), node_of(to[i]));
  return cudaSuccess;
}

cudaError_t cudaGraphRemoveDependencies(cudaGraph_t graph, const cudaGraphNode_t* from, const cudaGraphNode_t* to,
                                        const cudaGraphEdgeData*, size_t n) {
  std::lock_guard lk(g_mu);
  if (!live_graph(graph) || (n && (!from || !to))) return set_error(cudaErrorInvalidValue);
  if (graph_of(graph)->has_mem_nodes()) return set_error(cudaErrorNotSupported);  // as in CUDA
  for (size_t i = 0; i < n; i++) {
    if (!live_node(from[i]) || !live_node(to[i])) return set_error(cudaErrorInvalidValue);
    NodeRec *f = node_of(from[i]), *t = node_of(to[i]);
    auto it = std::find(t->deps.begin(), t->deps.end(), f);
    if (it == t->deps.end()) return set_error(cudaErrorInvalidValue);
    t->deps.erase(it);
    f->users.erase(std::find(f->users.begin(), f->users.end(), t));
  }
  return cudaSuccess;
}

cudaError_t cudaGraphDestroyNode(cudaGraphNode_t node) {
  std::lock_guard lk(g_mu);
  if (!live_node(node)) return set_error(cudaErrorInvalidValue);
  NodeRec* n = node_of(node);
  if (n->graph->has_mem_nodes()) return set_error(cudaErrorNotSupported);  // as in CUDA
  for (NodeRec* d : n->deps) d->users.erase(std::find(d->users.begin(), d->users.end(), n));
  for (NodeRec* u : n->users) u->deps.erase(std::find(u->deps.begin(), u->deps.end(), n));
  g_nodes.erase(n);
  if (n->child) unregister_graph(n->child.get());
  auto& v = n->graph->nodes;
  v.erase(std::find_if(v.begin(), v.end(), [&](auto& p) { return p.get() == n; }));
  return cudaSuccess;
}

// ------------------------------------------------------------ executable graphs

static cudaError_t instantiate(cudaGraphExec_t* out, cudaGraph_t graph, unsigned long long flags,
                               cudaGraphNode_t* err_node) {
  if (!out) return cudaErrorInvalidValue;
  auto x = std::make_unique<ExecRec>();
  x->flags = flags;
  std::vector<uint8_t> wire;
  uint32_t nodes = 0, segs = 0;
  {
    std::lock_guard lk(g_mu);
    if (!live_graph(graph)) return cudaErrorInvalidValue;
    GraphRec* g = graph_of(graph);
    // A graph with memory nodes has one executable graph at a time (as in CUDA).
    if (g->has_mem_nodes() && g->mem_execs > 0) return cudaErrorNotSupported;
    if (cudaError_t e = build_exec(g, x.get(), &wire, &nodes, &segs); e != cudaSuccess) return e;
  }
  if (err_node) *err_node = nullptr;
  if (cudaError_t e = send_graph(0, wire, nodes, segs, &x->handle); e != cudaSuccess) return e;
  std::lock_guard lk(g_mu);
  register_graph(x->src.get());  // so that guest steps' nodes stay recognisable
  if (live_graph(graph) && graph_of(graph)->has_mem_nodes()) {
    x->origin = graph_of(graph);
    x->origin->mem_execs++;
  }
  g_execs.insert(x.get());
  *out = reinterpret_cast<cudaGraphExec_t>(x.release());
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* out, cudaGraph_t graph, unsigned long long flags) {
  return set_error(instantiate(out, graph, flags, nullptr));
}

cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t* out, cudaGraph_t graph, unsigned long long flags) {
  return set_error(instantiate(out, graph, flags, nullptr));
}

cudaError_t cudaGraphInstantiateWithParams(cudaGraphExec_t* out, cudaGraph_t graph, cudaGraphInstantiateParams* p) {
  if (!p) return set_error(cudaErrorInvalidValue);
  cudaError_t e = instantiate(out, graph, p->flags, &p->errNode_out);
  p->result_out = e == cudaSuccess ? cudaGraphInstantiateSuccess : cudaGraphInstantiateError;
  return set_error(e);
}
cudaError_t cudaGraphInstantiateWithParams_ptsz(cudaGraphExec_t* out, cudaGraph_t graph,
                                                cudaGraphInstantiateParams* p) {
  return cudaGraphInstantiateWithParams(out, graph, p);
}

cudaError_t cudaGraphExecGetFlags(cudaGraphExec_t exec, unsigned long long* flags) {
  std::lock_guard lk(g_mu);
  if (!flags || !g_execs.count(exec_of(exec))) return set_error(cudaErrorInvalidValue);
  *flags = exec_of(exec)->flags;
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  ExecRec* x;
  {
    std::lock_guard lk(g_mu);
    if (!g_execs.erase(exec_of(exec))) return set_error(cudaErrorInvalidValue);
    x = exec_of(exec);
    unregister_graph(x->src.get());
    if (x->origin) x->origin->mem_execs--;
  }
  cudaError_t e;
  {
    std::unique_ptr<ExecRec> own(x);  // its graph's user object references go with it
    WH_CONN(c);
    e = c->call<Op::GraphExecDestroy>({x->handle});
  }
  run_user_object_destructors();
  return set_error(e);
}

cudaError_t cudaGraphUpload(cudaGraphExec_t exec, cudaStream_t) {
  std::lock_guard lk(g_mu);
  return g_execs.count(exec_of(exec)) ? cudaSuccess : set_error(cudaErrorInvalidValue);  // it lives in the server already
}
cudaError_t cudaGraphUpload_ptsz(cudaGraphExec_t exec, cudaStream_t s) { return cudaGraphUpload(exec, s); }

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s) {
  ExecRec* x = exec_of(exec);
  {
    std::lock_guard lk(g_mu);
    if (!g_execs.count(x)) return set_error(cudaErrorInvalidValue);
  }
  if (capture_any() && stream_capturing(s)) {
    // Launched into a capture: the graph becomes a child graph node.
    auto n = std::make_unique<NodeRec>();
    n->type = cudaGraphNodeTypeGraph;
    {
      std::lock_guard lk(g_mu);
      if (!x->allocs.empty() || !x->frees.empty()) return set_error(cudaErrorNotSupported);
      n->child = clone_graph(x->src.get());
    }
    n->child->owned = true;
    return set_error(capture_add(s, std::move(n)));
  }
  WH_CONN(c);
  if (!x->allocs.empty() || !x->frees.empty())
    if (cudaError_t e = launch_graph_mem(x); e != cudaSuccess) return set_error(e);
  const uint64_t sh = stream_handle(s);
  for (const Step& st : x->steps) {
    cudaError_t e = cudaSuccess;
    switch (st.kind) {
      case Step::Segment:
        e = c->post<Op::GraphLaunch>({x->handle, sh, st.segment, 0});
        break;
      case Step::Host:
        // In stream order: what came before has finished, nothing after starts before it returns.
        e = cudaStreamSynchronize(s);
        st.node->host.fn(st.node->host.userData);
        break;
      case Step::Copy:
        e = run_guest_copy(st.node, s);
        break;
    }
    if (e != cudaSuccess) return set_error(e);
  }
  return cudaSuccess;
}
cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t exec, cudaStream_t s) { return cudaGraphLaunch(exec, s); }

cudaError_t cudaGraphExecKernelNodeSetParams(cudaGraphExec_t exec, cudaGraphNode_t node, const cudaKernelNodeParams* p) {
  if (!p) return set_error(cudaErrorInvalidValue);
  if (p->extra) return set_error(cudaErrorNotSupported);
  uint64_t handle;
  uint32_t index;
  KernelRec* k;
  {
    std::lock_guard lk(g_mu);
    ExecRec* x = exec_of(exec);
    if (!g_execs.count(x) || !live_node(node)) return set_error(cudaErrorInvalidValue);
    auto it = x->position.find(node_of(node));
    if (it == x->position.end() || x->server_index[it->second] < 0) return set_error(cudaErrorInvalidValue);
    index = uint32_t(x->server_index[it->second]);
    handle = x->handle;
    k = x->src->nodes[it->second]->k;
  }
  // The node's function cannot change in an executable graph (as in CUDA).
  if (kernel_of(p->func) != k) return set_error(cudaErrorInvalidValue);
  uint8_t buf[kMaxParamBytes];
  if (cudaError_t e = pack_launch(k, p->gridDim, p->blockDim, p->kernelParams, buf); e != cudaSuccess)
    return set_error(e);
  WH_CONN(c);
  GraphExecSetKernelReq rq{};
  rq.exec = handle;
  rq.node = index;
  rq.grid[0] = p->gridDim.x, rq.grid[1] = p->gridDim.y, rq.grid[2] = p->gridDim.z;
  rq.block[0] = p->blockDim.x, rq.block[1] = p->blockDim.y, rq.block[2] = p->blockDim.z;
  rq.shared_bytes = p->sharedMemBytes;
  return set_error(c->call<Op::GraphExecSetKernel>(rq, nullptr, {buf, k->param_bytes}));
}

cudaError_t cudaGraphExecHostNodeSetParams(cudaGraphExec_t exec, cudaGraphNode_t node, const cudaHostNodeParams* p) {
  std::lock_guard lk(g_mu);
  ExecRec* x = exec_of(exec);
  if (!p || !p->fn || !g_execs.count(x) || !live_node(node)) return set_error(cudaErrorInvalidValue);
  auto it = x->position.find(node_of(node));
  if (it == x->position.end() || x->src->nodes[it->second]->type != cudaGraphNodeTypeHost)
    return set_error(cudaErrorInvalidValue);
  x->src->nodes[it->second]->host = *p;  // guest steps point at this node
  return cudaSuccess;
}

cudaError_t cudaGraphExecUpdate(cudaGraphExec_t exec, cudaGraph_t graph, cudaGraphExecUpdateResultInfo* info) {
  if (info) *info = cudaGraphExecUpdateResultInfo{cudaGraphExecUpdateSuccess, nullptr, nullptr};
  auto fresh = std::make_unique<ExecRec>();
  std::vector<uint8_t> wire;
  uint32_t nodes = 0, segs = 0;
  ExecRec* x = exec_of(exec);
  {
    std::lock_guard lk(g_mu);
    if (!g_execs.count(x) || !live_graph(graph)) return set_error(cudaErrorInvalidValue);
    const NodeRec* bad = nullptr;
    if (!same_topology(x->src.get(), graph_of(graph), &bad)) {
      if (info) {
        info->result = cudaGraphExecUpdateErrorTopologyChanged;
        info->errorNode = as_node(const_cast<NodeRec*>(bad));
      }
      return set_error(cudaErrorGraphExecUpdateFailure);
    }
    if (cudaError_t e = build_exec(graph_of(graph), fresh.get(), &wire, &nodes, &segs); e != cudaSuccess) {
      if (info) info->result = cudaGraphExecUpdateError;
      return set_error(cudaErrorGraphExecUpdateFailure);
    }
  }
  // The whole node list again, into the same server graph.
  uint64_t h = 0;
  if (cudaError_t e = send_graph(x->handle, wire, nodes, segs, &h); e != cudaSuccess) {
    if (info) info->result = cudaGraphExecUpdateError;
    return set_error(e == cudaErrorDevicesUnavailable ? e : cudaErrorGraphExecUpdateFailure);
  }
  std::lock_guard lk(g_mu);
  unregister_graph(x->src.get());
  // Nodes of the graph first instantiated keep naming the same positions.
  for (auto& [n, pos] : fresh->position) x->position[n] = pos;
  x->src = std::move(fresh->src);
  x->steps = std::move(fresh->steps);
  x->server_index = std::move(fresh->server_index);
  register_graph(x->src.get());
  return cudaSuccess;
}

cudaError_t cudaGraphDebugDotPrint(cudaGraph_t graph, const char* path, unsigned int) {
  if (!path) return set_error(cudaErrorInvalidValue);
  std::lock_guard lk(g_mu);
  if (!live_graph(graph)) return set_error(cudaErrorInvalidValue);
  FILE* f = std::fopen(path, "w");
  if (!f) return set_error(cudaErrorOperatingSystem);
  std::fprintf(f, "digraph wormhole_graph {\n  compound=true;\n");
  dot_graph(f, graph_of(graph), "", 0);
  std::fprintf(f, "}\n");
  return set_error(std::fclose(f) == 0 ? cudaSuccess : cudaErrorOperatingSystem);
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
