// wormhole/server/session.hpp - one client process's state on the server:
// its device context, handle tables, allocations, quota and deferred
// errors, and the bodies of the API table's operations (on_Name).
#pragma once

#include <array>
#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "wormhole/proto/dispatch.hpp"
#include "wormhole/proto/graph_wire.hpp"
#include "wormhole/server/backend.hpp"
#include "wormhole/server/handles.hpp"
#include "wormhole/server/peer.hpp"
#include "wormhole/server/pinned.hpp"
#include "wormhole/server/service.hpp"

namespace wh::server {

class CheckpointWriter;
class CheckpointReader;

// Upper bounds (seconds) of the service-time histogram's buckets; one more
// bucket counts the rest (+Inf).
inline constexpr std::array<double, 15> kLatencyBounds = {1e-6, 2.5e-6, 5e-6,   1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4,
                                                         5e-4, 1e-3,   2.5e-3, 1e-2, 1e-1,   1.0,  10.0};
constexpr size_t kLatencyBuckets = kLatencyBounds.size() + 1;

// One opcode's figures in one session. Only the session's thread writes
// them (SessionCounters::add: a plain load and store). Shared counters with
// a locked add per call cost the posted-launch rate about 15 %.
struct OpCounters {
  std::atomic<uint64_t> calls{0}, ticks{0};  // ticks: service time, stat_clock() units
  std::atomic<uint64_t> errors{0};           // answered with a status other than success
  std::atomic<uint64_t> posted{0};           // posted: no answer awaited (launches, copies in order)
  std::atomic<uint64_t> bytes_in{0}, bytes_out{0};  // request / response messages
  // Service time histogram: counts per bucket (not cumulative).
  std::array<std::atomic<uint64_t>, kLatencyBuckets> latency{};
};

// A plain copy of the same, summed over sessions, for readers.
struct OpFigures {
  uint64_t calls = 0, ticks = 0, errors = 0, posted = 0, bytes_in = 0, bytes_out = 0;
  std::array<uint64_t, kLatencyBuckets> latency{};
  void add(const OpCounters& c);
};

// A session's per-opcode counters, each allocated at the opcode's first
// call (a session calls a few dozen of the table's hundreds of operations).
class OpTable {
 public:
  OpTable() = default;
  OpTable(const OpTable&) = delete;
  OpTable& operator=(const OpTable&) = delete;
  ~OpTable();
  OpCounters& at(uint16_t op);  // the session's thread only; an operation's opcode (op_index >= 0)
  // By dense index (proto::kAllOps).
  const OpCounters* find(size_t index) const { return ops_[index].load(std::memory_order_acquire); }

 private:
  std::array<std::atomic<OpCounters*>, proto::kOpCount> ops_{};
};

// Server-wide counters, shown by `make demo` and GetStats.
struct Stats {
  // Per-operation figures of every session, ended and live, indexed as
  // proto::kAllOps (dense: opcodes have gaps between libraries).
  std::vector<OpFigures> ops() const;
  // A live session's table: ops() reads it until detach() folds it into
  // the ended sessions' figures.
  void attach(const OpTable* t);
  void detach(const OpTable* t);
  std::atomic<uint64_t> bytes_htod{0}, bytes_dtoh{0}, bytes_dtod{0};
  // Peer copies between servers (proto/peer_api.def): bytes this server
  // received from other servers for its sessions, and pushed to them.
  std::atomic<uint64_t> bytes_peer_in{0}, bytes_peer_out{0};
  std::atomic<uint64_t> rejected{0};  // malformed or invalid requests
  std::atomic<uint64_t> sessions{0};
  // Kernel launches, the time spent in them and (sim device) the
  // thread-instructions they executed, over every session that has ended
  // (a live session's are in its SessionCounters).
  std::atomic<uint64_t> kernels{0}, kernel_ns{0}, thread_instructions{0};
  // The exitless gate (VMs served with --vm-gate). QUERYs never reach the
  // server (the gate code copies the state page), so they are not counted
  // here; the state page's rewrites are.
  std::atomic<bool> gate_served{false};        // some VM has a gate: render() shows the line
  std::atomic<uint64_t> gate_calls{0};         // requests handled from the gate and answered there
  std::atomic<uint64_t> gate_binds{0};         // slots bound to a channel
  std::atomic<uint64_t> gate_refused{0};       // stale/unbound/foreign bindings, full queues, dropped at reclaim
  std::atomic<uint64_t> gate_violations{0};    // malformed slots (answered -EINVAL)
  std::atomic<uint64_t> gate_publishes{0};     // state-page rewrites
  std::string render() const;
  // stat_clock() ticks per nanosecond (measured once per process).
  static double ns_per_tick();

 private:
  mutable std::mutex ops_mu_;
  std::vector<OpFigures> ended_ = std::vector<OpFigures>(proto::kOpCount);
  std::vector<const OpTable*> live_;
};

// One session's counters: written by its thread, read by any (the admin
// socket, the metrics endpoint) while the session lives.
struct SessionCounters {
  // Only the session's thread writes: a plain load and store, no locked
  // read-modify-write on the request path.
  static void add(std::atomic<uint64_t>& c, uint64_t n) {
    c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  std::atomic<uint64_t> calls{0}, errors{0};
  std::atomic<uint64_t> bytes_in{0}, bytes_out{0};  // messages, plus data copied to / from the device
  std::atomic<uint64_t> device_bytes{0};            // device memory held
  std::atomic<uint64_t> kernels{0}, kernel_ns{0};   // launches and the time spent in them
  std::atomic<uint64_t> thread_instructions{0};     // executed by them (sim device; 0 on a GPU)
};

class Session {
 public:
  // `data` is this client's data area (shared memory the guest also writes).
  Session(uint64_t id, Backend& backend, std::unique_ptr<Context> ctx, std::span<uint8_t> data,
          Stats& stats);
  ~Session();

  // Runs one request. Returns true if a response must be sent (the request
  // was not posted); `out` holds it. Never throws on guest input.
  bool handle(uint16_t opcode, uint32_t flags, std::span<const uint8_t> payload, uint32_t max_msg,
              proto::DispatchResult& out);
  uint64_t id() const { return id_; }
  uint64_t violations() const { return violations_; }
  // The accounting of the last call that is off the round trip (counters,
  // histograms, the trace log): the server calls it once the answer left;
  // otherwise the next handle() does.
  void account();
  // A protocol violation caught before handle() (bad framing, wrong version).
  // The request stream position just past the request handled last
  // (ring transports), published in the data area's status page.
  void publish_handled(uint64_t pos) {
    if (data_.size() >= sizeof(proto::DataAreaStatus))
      __atomic_store_n(&reinterpret_cast<proto::DataAreaStatus*>(data_.data())->handled_pos, pos, __ATOMIC_RELEASE);
  }
  void note_violation() {
    violations_++;
    stats_.rejected++;
  }
  uint64_t device_bytes() const;
  const SessionCounters& counters() const { return ctr_; }
  // Peer copies between servers (proto/peer_api.def): the server's tickets
  // and how it pushes bytes to another server (network sessions only;
  // without them the peer calls answer cudaErrorNotSupported).
  using PeerPusher = std::function<int32_t(const std::string& url, const PeerTickets::Ticket& t, uint64_t dst,
                                           std::span<const uint8_t> bytes)>;
  void set_peer(PeerTickets* tickets, PeerPusher push) {
    peer_tickets_ = tickets;
    peer_push_ = std::move(push);
  }
  // Where grown pinned memory comes from (socket clients; none: PinnedGrow
  // answers cudaErrorNotSupported). Outlives the session.
  void set_pinned_source(PinnedSource* src) { pinned_source_ = src; }
  // From any thread: stops the kernel this session runs, and all later ones
  // (its client is gone or the server stops).
  void cancel() { ctx_->cancel(); }

  // What a synchronous MemGetInfo / StreamQuery(0) would see now: the
  // exitless gate publishes it so that the guest can answer those locally
  // (docs/exitless.md). pending_error: the error the next call would
  // return (a kernel fault, else a deferred error of posted work).
  struct Snapshot {
    uint64_t mem_free = 0, mem_total = 0;
    int32_t pending_error = 0;
    bool idle = true;  // the legacy default stream has nothing outstanding
  };
  Snapshot snapshot();

  // The device context (library services reach it through Service).
  Context& context() { return *ctx_; }

  // ---- checkpoint and restore (session_checkpoint.cpp, docs/migration.md),
  // between two requests: every posted call before has run, none after.
  // Waits for the device, then writes the session's state; false and *why
  // (naming what cannot be moved) when some of it cannot be saved.
  // Pinned memory grown past the data area is saved only for a move: its
  // segments' descriptors go to *segment_fds, in the order restore takes
  // them (nullptr: a file checkpoint, which refuses them).
  bool save(CheckpointWriter& w, std::string* why, std::vector<int>* segment_fds = nullptr);
  // Rebuilds a saved session in this new one (made on a context at the
  // saved device-address window, over the same data area, with the
  // segments save listed). False and *why on any inconsistency: the caller
  // then destroys this session.
  bool restore(CheckpointReader& r, std::string* why, std::span<const int> segment_fds = {});
  // Grown pinned segments: whether ending this session frees their pages
  // (not while another server may serve them: the source after a move,
  // the destination until it serves).
  void own_grown(bool owned);

  // ---- the bodies of the session's own tables (WH_SESSION_OPS); every
  // other library's are in its service (libs/<name>/server)
  WH_DECLARE_HANDLERS(WH_SESSION_OPS)

 private:
  struct ModuleEntry {
    std::unique_ptr<Module> mod;
    std::vector<uint64_t> globals;  // its variables entered in globals_ (dropped on unload)
    // The image it was loaded from, kept for a checkpoint (shared: a restore
    // that fails half-way leaves the saved copy intact).
    std::shared_ptr<const std::vector<uint8_t>> image;
  };
  struct KernelEntry {
    std::unique_ptr<Kernel> k;
    uint64_t module;
    KernelAttrs attrs;
    std::string name;  // as the module names it (for messages)
  };
  struct StreamEntry {
    std::unique_ptr<Stream> s;
    uint32_t flags = 0;
    int32_t priority = 0;
  };
  struct EventEntry {
    std::unique_ptr<Event> e;
    bool recorded = false;
    uint32_t flags = 0;
  };

  struct PoolEntry {
    MemPool* pool;  // owned by the context
    uint64_t max_size = 0;  // as created (a checkpoint makes it again)
  };
  Err run_kernel(KernelEntry& k, Dim3 grid, Dim3 block, uint32_t shared_bytes, Stream* s,
                 std::span<const uint8_t> params, uint32_t flags = 0);  // proto::kLaunchFlags
  // Graphs (session_graph.cpp): an instantiated graph, its nodes in
  // execution order, validated when they arrive and re-checked when they
  // run (memory can be freed, kernels unloaded, events destroyed since).
  struct GraphNode {
    proto::GraphOp op{};
    uint64_t handle = 0;  // kernel or event; a call node's opcode
    Dim3 grid, block;
    uint32_t shared_bytes = 0;
    std::vector<uint8_t> bytes;  // kernel parameters; a call node's request payload
    proto::GraphCopyBody copy{};
    proto::GraphMemsetBody memset{};
  };
  struct GraphExecEntry {
    std::vector<GraphNode> nodes;
    std::vector<uint32_t> seg_start;  // segment i is nodes [seg_start[i], seg_start[i+1] or end)
    uint64_t bytes = 0;               // server memory it holds (counted against kMaxSessionGraphBytes)
  };
  Err parse_graph(std::span<const uint8_t> wire, uint32_t nodes, uint32_t segments, GraphExecEntry* out);
  Err check_kernel_node(uint64_t kernel, const uint32_t grid[3], const uint32_t block[3], uint32_t shared,
                        size_t param_bytes, KernelEntry** out);
  Err check_copy3d(const proto::GraphCopyBody& c) const;
  Err run_copy3d(const proto::GraphCopyBody& c, Stream* s);
  Err check_memset(const proto::GraphMemsetBody& m) const;
  Err run_graph_node(const GraphNode& n, Stream* s);
  uint64_t graph_stream_ = 0;  // the guest stream of the graph launch being run (call nodes)
  // CUDA arrays (session_texture.cpp): row-major in one device allocation
  // of the session (array_mem_), never in allocs_, so cudaFree cannot free it.
  struct ArrayEntry {
    int32_t fmt[5] = {};  // cudaChannelFormatDesc x, y, z, w, f
    uint32_t flags = 0;
    uint64_t width = 0, height = 0, depth = 0;  // as the guest gave them (0: dimension unused)
    TexSpec spec;         // layout and format, for texture/surface objects
    uint64_t mipmap = 0;  // a level of this mipmapped array (freed with it)
  };
  struct MipmapEntry {
    std::vector<uint64_t> levels;  // array handles
  };
  // `at`: the device address of its memory (a restore; 0: anywhere).
  Err array_make(const int32_t fmt[5], uint32_t flags, uint64_t w, uint64_t h, uint64_t d, uint64_t mipmap,
                 uint64_t* out, uint64_t at = 0);
  void array_release(ArrayEntry& a);
  void textures_reset();

  friend class Service;  // resolve_stream, device_range
  // The service of the library that owns `opcode`'s block (made at its
  // first call), or null: one of the session's own tables.
  Service* service(uint16_t opcode);
  // Runs one request: in its library's service, or here.
  void route(uint16_t opcode, std::span<const uint8_t> payload, uint32_t max_msg, proto::DispatchResult& out);

  Err resolve_stream(uint64_t h, Stream** out);
  // The session's default pool, made on first use (a pool of its own: see backend.hpp).
  Err default_pool(uint64_t* handle);
  // A pool handle of this session (cudaErrorInvalidValue otherwise, as CUDA answers).
  Err resolve_pool(uint64_t h, MemPool** out);
  bool device_range(uint64_t addr, uint64_t n) const;  // inside one of our allocations
  uint8_t* host_range(uint64_t off, uint64_t n) const;  // inside our data area or a grown segment
  void publish_copy_done(uint64_t seq, Err e);
  Err note_async(Err e);  // remembers an error of posted work
  Err take_deferred();
  Err sync_error(Err e);  // the error a synchronising call reports now
  // Queues text for the application's stdout or stderr (FetchOutput) and
  // tells the guest through the status page's output_seq.
  void add_output(uint32_t stream, std::string_view text);

  void count_bytes(std::atomic<uint64_t> Stats::*dir, uint64_t n) {
    stats_.*dir += n;
    if (dir == &Stats::bytes_htod) SessionCounters::add(ctr_.bytes_in, n);
    if (dir == &Stats::bytes_dtoh) SessionCounters::add(ctr_.bytes_out, n);
  }

  uint64_t id_;
  Backend& backend_;
  SessionCounters ctr_;
  OpTable ops_;  // per-opcode figures, attached to stats_ while the session lives
  struct Pending {
    bool valid = false, posted = false;
    uint16_t opcode = 0;
    int32_t status = 0;
    uint64_t ticks = 0, in = 0, out = 0;
  };
  Pending pending_;
  size_t counted_allocs_ = 0, counted_arrays_ = 0;  // when device_bytes was last summed
  std::unique_ptr<Context> ctx_;
  std::span<uint8_t> data_;
  Stats& stats_;
  PeerTickets* peer_tickets_ = nullptr;
  PeerPusher peer_push_;
  std::vector<uint8_t> peer_out_;  // PeerPush's staging, kept
  uint64_t mapped_dptr_ = 0;
  // Grown pinned memory (session_pinned.cpp): segment index -> the segment
  // and its device address.
  struct GrownSegment {
    std::unique_ptr<PinnedSegment> seg;
    std::span<uint8_t> mem;
    uint64_t dptr = 0;
  };
  PinnedSource* pinned_source_ = nullptr;
  std::map<uint64_t, GrownSegment> grown_;
  void release_grown();  // every segment (the session's end)
  int device_ = 0;
  std::map<uint64_t, uint64_t> allocs_;   // cudaMalloc'd: dptr -> bytes
  std::map<uint64_t, uint64_t> globals_;  // module variables looked up by the guest
  HandleTable<ModuleEntry> modules_{0x4d, 4096};
  HandleTable<KernelEntry> kernels_{0x4b, 1 << 16};
  HandleTable<StreamEntry> streams_{0x53, 4096};
  HandleTable<EventEntry> events_{0x45, 1 << 16};
  HandleTable<PoolEntry> pools_{0x50, 256};
  // The library services by opcode block (null until the library's first
  // call); destroyed before the context.
  std::array<std::unique_ptr<Service>, proto::kOpLimit / proto::kOpBlock + 1> services_;
  uint64_t own_blocks_ = 0;  // blocks known to be the session's own tables
  static_assert(proto::kOpLimit / proto::kOpBlock + 1 <= 64);
  uint64_t default_pool_ = 0, current_pool_ = 0;  // pool handles (0: not made yet)
  HandleTable<GraphExecEntry> graphs_{0x47, proto::kMaxGraphExecs};
  uint64_t graph_bytes_ = 0;          // held by graphs_, bounded
  std::vector<uint8_t> fill_chunk_;  // a memset's wide-element pattern, repeated (graphs)
  HandleTable<ArrayEntry> arrays_{0x41, 1 << 16};
  HandleTable<MipmapEntry> mipmaps_{0x6d, 4096};
  std::map<uint64_t, uint64_t> array_mem_;  // arrays' device memory: dptr -> bytes
  struct TexObj {
    bool surface = false;
    TexSpec spec;  // what it reads (a checkpoint makes it again)
  };
  std::map<uint64_t, TexObj> texobjs_;  // live texture and surface objects, by the value kernels receive
  Err deferred_ = cudaSuccess;  // first error of posted work, not yet reported
  bool copy_error_published_ = false;  // this call's error went to a waiting guest
  Err sticky_ = cudaSuccess;    // a kernel fault: the context is unusable
  uint64_t violations_ = 0;
  std::string last_log_;
  std::string fault_detail_;  // the engine's account of a launch fault, until reported
  std::set<std::string> refused_kernels_;  // kernels whose refusal (unsupported instruction) was told
  uint32_t max_msg_ = 0;      // of the request being handled: bounds FetchOutput's reply
  // Device output not yet fetched, in order; consecutive text of one
  // stream shares a chunk. Bounded by kPendingOutputMax (the rest is counted).
  struct OutputChunk {
    uint32_t stream;
    std::string text;
  };
  std::deque<OutputChunk> output_;
  size_t output_front_off_ = 0;  // bytes of output_.front() already fetched
  uint64_t output_bytes_ = 0, output_dropped_ = 0, output_seq_ = 0;
  uint64_t printf_fifo_ = proto::kPrintfFifoBytes;
};

bool is_sticky(Err e);

}  // namespace wh::server
