// The explicit graph API: graphs, nodes, edges, node parameters, graph
// memory attributes, and the DOT dump.
#include "graph_internal.hpp"

namespace wh::guest {

namespace {

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

}  // namespace wh::guest

using namespace wh::guest;
using namespace wh::proto;

extern "C" {

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

}  // extern "C"
