// Instantiation (flatten, order, serialise to the server) and the
// executable-graph entry points (launch, update, destroy).
#include "graph_internal.hpp"

namespace wh::guest {

namespace {

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

}  // namespace

}  // namespace wh::guest

using namespace wh::guest;
using namespace wh::proto;

extern "C" {

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

}  // extern "C"
