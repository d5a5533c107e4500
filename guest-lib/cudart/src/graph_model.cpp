// Graph model: node and graph records, graph memory, cloning, edges and
// the copy-parameter helpers the graph API shares.
#include "graph_internal.hpp"

namespace wh::guest {

namespace {

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

}  // namespace

namespace graph_impl {

std::mutex g_mu;  // guards the registries below and graph_capture.cpp's
std::unordered_set<GraphRec*> g_graphs;
std::unordered_set<NodeRec*> g_nodes;
std::unordered_set<ExecRec*> g_execs;
std::vector<std::unique_ptr<Capture>> g_caps;
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

std::unique_ptr<GraphRec> clone_graph(const GraphRec* g, std::unordered_map<const NodeRec*, NodeRec*>* map) {
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

CopySide side(const cudaPitchedPtr& p, const cudaPos& pos) {
  size_t slice = p.pitch * p.ysize;
  return {static_cast<uint8_t*>(p.ptr) + pos.z * slice + pos.y * p.pitch + pos.x, p.pitch, slice};
}

size_t side_extent(const CopySide& s, const cudaExtent& e) {
  if (!e.width || !e.height || !e.depth) return 0;
  return (e.depth - 1) * s.slice + (e.height - 1) * s.pitch + e.width;
}

}  // namespace graph_impl

}  // namespace wh::guest
