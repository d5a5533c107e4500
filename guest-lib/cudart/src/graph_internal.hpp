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
//
// This header is shared by the graph files (graph_model, graph_capture, graph_instantiate,
// graph_api): the guest's graph, node, executable-graph and capture records
// and the registries g_mu guards.
#pragma once

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

namespace graph_impl {

using namespace wh::proto;

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

// ---- graph memory. Its own lock: node destructors run with or without g_mu.
struct GraphMem {
  size_t bytes = 0;
  int refs = 0;       // mem-alloc nodes naming it
  bool live = false;  // between a launch of its alloc node and its free
};

// A side of a copy node: its first byte and row/slice pitches.
struct CopySide {
  uint8_t* base;
  size_t pitch, slice;
};

extern std::mutex g_mu;  // guards the registries below and graph_capture.cpp's
extern std::unordered_set<GraphRec*> g_graphs;
extern std::unordered_set<NodeRec*> g_nodes;
extern std::unordered_set<ExecRec*> g_execs;
extern std::vector<std::unique_ptr<Capture>> g_caps;
extern std::mutex g_gm_mu;
extern std::unordered_map<uint64_t, GraphMem> g_gm;
extern size_t g_gm_used, g_gm_reserved, g_gm_used_high, g_gm_reserved_high;

inline NodeRec* node_of(cudaGraphNode_t n) { return reinterpret_cast<NodeRec*>(n); }
inline GraphRec* graph_of(cudaGraph_t g) { return reinterpret_cast<GraphRec*>(g); }
inline ExecRec* exec_of(cudaGraphExec_t x) { return reinterpret_cast<ExecRec*>(x); }
inline cudaGraphNode_t as_node(NodeRec* n) { return reinterpret_cast<cudaGraphNode_t>(n); }
inline cudaGraph_t as_graph(GraphRec* g) { return reinterpret_cast<cudaGraph_t>(g); }
inline bool live_graph(cudaGraph_t g) { return g && g_graphs.count(graph_of(g)); }
inline bool live_node(cudaGraphNode_t n) { return n && g_nodes.count(node_of(n)); }

bool graph_mem_known(uint64_t d);
// A new reservation (a mem-alloc node being made).
cudaError_t graph_mem_new(size_t bytes, uint64_t* d);
// Ends an allocation's life; false if `d` is not graph memory.
bool graph_mem_end(uint64_t d, cudaError_t* e);
// A launch's graph memory: its allocations start (refused while one is still
// live from an earlier launch, unless the graph frees them on launch), then
// its frees end theirs; everything is checked before anything changes.
cudaError_t launch_graph_mem(const ExecRec* x);
void register_graph(GraphRec* g);
void unregister_graph(GraphRec* g);
void set_kernel_params(NodeRec* n, const uint8_t* params);
std::unique_ptr<GraphRec> clone_graph(const GraphRec* g, std::unordered_map<const NodeRec*, NodeRec*>* map = nullptr);
void link(NodeRec* from, NodeRec* to);
// Adds a node to a graph after `deps` (all of that graph, checked, no repeats).
cudaError_t add_node(cudaGraphNode_t* out, cudaGraph_t g, const cudaGraphNode_t* deps, size_t ndeps,
                     std::unique_ptr<NodeRec> n);
cudaMemcpyKind resolve_kind(cudaMemcpyKind kind, const void* dst, const void* src);
cudaError_t check_copy_params(const cudaMemcpy3DParms& p);
cudaPitchedPtr pitched(void* p, size_t pitch, size_t xsize, size_t ysize);
cudaExtent extent3(size_t w, size_t h, size_t d);
cudaMemcpy3DParms copy_1d(void* dst, const void* src, size_t n, cudaMemcpyKind kind);
CopySide side(const cudaPitchedPtr& p, const cudaPos& pos);
size_t side_extent(const CopySide& s, const cudaExtent& e);
cudaError_t capture_add(cudaStream_t s, std::unique_ptr<NodeRec> n);

}  // namespace graph_impl

using namespace graph_impl;

}  // namespace wh::guest
