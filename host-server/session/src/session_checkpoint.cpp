// A session's state written to a checkpoint and rebuilt from one
// (docs/migration.md). The order of the fields here is the format:
// kCheckpointVersion changes with it.
//
// What a restored session keeps: every handle value, every device address
// (allocations, module variables, the mapped data area), the contents of
// device memory, kernels' output not yet fetched and errors not yet
// reported. What refuses a checkpoint, by name: anything of the session
// whose saving is not written yet (save() says which).
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <iterator>
#include <map>

#include "wormhole/server/checkpoint.hpp"
#include "wormhole/server/session.hpp"

namespace wh::server {

using namespace wh::proto;

namespace {
constexpr uint32_t kSessionTag = 0x53534553;  // "SESS"
constexpr uint32_t kEndTag = 0x444e4553;      // "SEND"
constexpr int kLimits = 7;                    // cudaLimit values 0..6
constexpr uint64_t kMaxName = 4096;           // kernel and variable names
constexpr uint64_t kMaxModuleVars = 1 << 20;
constexpr uint64_t kMaxAllocs = uint64_t(1) << 24;
constexpr uint64_t kMaxOutputChunks = 1 << 20;
// A pool's settable attributes (cudaMemPoolAttr): the reuse policies and
// the release threshold. The high-water marks start again.
constexpr int kPoolAttrs[] = {cudaMemPoolReuseFollowEventDependencies, cudaMemPoolReuseAllowOpportunistic,
                              cudaMemPoolReuseAllowInternalDependencies, cudaMemPoolAttrReleaseThreshold};
}  // namespace

namespace {

// An executable graph in the wire form it was instantiated from
// (graph_wire.hpp): a restore makes it again through parse_graph, with all
// of its checks.
template <class Node>
std::vector<uint8_t> graph_to_wire(const std::vector<Node>& nodes, const std::vector<uint32_t>& seg_start) {
  std::vector<uint8_t> out;
  auto put = [&](const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out.insert(out.end(), b, b + n);
  };
  auto hdr = [&](GraphOp op, size_t body) {
    GraphNodeHdr h{uint16_t(op), 0, uint32_t(body)};
    put(&h, sizeof h);
  };
  size_t seg = 1;
  for (size_t i = 0; i < nodes.size(); i++) {
    for (; seg < seg_start.size() && seg_start[seg] == i; seg++) hdr(GraphOp::SegmentEnd, 0);
    const Node& n = nodes[i];
    switch (n.op) {
      case GraphOp::Kernel: {
        GraphKernelBody b{n.handle, {n.grid.x, n.grid.y, n.grid.z}, {n.block.x, n.block.y, n.block.z},
                          n.shared_bytes, uint32_t(n.bytes.size())};
        hdr(n.op, sizeof b + n.bytes.size());
        put(&b, sizeof b);
        put(n.bytes.data(), n.bytes.size());
        break;
      }
      case GraphOp::Copy:
        hdr(n.op, sizeof n.copy);
        put(&n.copy, sizeof n.copy);
        break;
      case GraphOp::Memset:
        hdr(n.op, sizeof n.memset);
        put(&n.memset, sizeof n.memset);
        break;
      case GraphOp::EventRecord:
      case GraphOp::EventWait: {
        GraphEventBody b{n.handle};
        hdr(n.op, sizeof b);
        put(&b, sizeof b);
        break;
      }
      case GraphOp::Call: {
        GraphCallBody b{uint16_t(n.handle), 0, uint32_t(n.bytes.size())};
        hdr(n.op, sizeof b + n.bytes.size());
        put(&b, sizeof b);
        put(n.bytes.data(), n.bytes.size());
        break;
      }
      default:
        break;
    }
  }
  for (; seg < seg_start.size(); seg++) hdr(GraphOp::SegmentEnd, 0);
  return out;
}

}  // namespace

bool Session::save(CheckpointWriter& w, std::string* why, std::vector<int>* segment_fds) {
  // Things a checkpoint does not carry yet: refused by name, before anything is written.
  auto refuse = [&](const std::string& what) {
    *why = "the session holds " + what + ", which cannot be checkpointed yet";
    return false;
  };
  if (grown_.size() > kMaxMovedSegments)
    return refuse(std::to_string(grown_.size()) + " grown pinned segments (a move or a restore takes up to " +
                  std::to_string(kMaxMovedSegments) + ")");
  for (const auto& [k, g] : grown_)
    if (g.seg->fd() < 0) return refuse("pinned memory grown past its data area without a descriptor to hand on");
  if (std::string u = ctx_->unmovable(); !u.empty()) return refuse(u);
  for (size_t b = 0; b < services_.size(); b++)
    if (services_[b]) {
      CheckpointWriter probe;
      if (!services_[b]->save(probe)) return refuse(std::string(service_name(uint16_t(b * proto::kOpBlock))) + " state");
    }
  // Posted work has run once the device is idle; an error it raised is
  // kept for the next synchronising call, here or at the destination.
  if (Err e = ctx_->synchronize(); e != cudaSuccess) note_async(e);

  // Room for it all at once: growing a vector of gigabytes copies it again
  // at each doubling.
  uint64_t estimate = 1 << 16;
  for (const auto& [d, n] : allocs_) estimate += n + 16;
  modules_.for_each([&](uint64_t, ModuleEntry& m) { estimate += (m.image ? m.image->size() : 0) + 4096; });
  w.expect(estimate);

  w.u32(kSessionTag);
  w.i32(device_);
  w.u64(printf_fifo_);
  for (int l = 0; l < kLimits; l++) {
    uint64_t v = 0;
    const bool have = ctx_->get_limit(l, &v) == cudaSuccess;
    w.u8(have);
    w.u64(v);
  }
  w.u64(mapped_dptr_);
  w.u64(data_.size());
  // Grown pinned segments: index, size, device address and the memfd's
  // identity (device and inode); their memory is the client's and never
  // moves: a move hands the memfds on, a resuming client hands back its own
  // (the same files), and each is recognised by its identity.
  w.u64(grown_.size());
  for (const auto& [k, g] : grown_) {
    struct stat st{};
    if (fstat(g.seg->fd(), &st) != 0) return refuse("a grown pinned segment whose descriptor cannot be read");
    w.u64(k);
    w.u64(g.mem.size());
    w.u64(g.dptr);
    w.u64(uint64_t(st.st_dev));
    w.u64(uint64_t(st.st_ino));
    if (segment_fds) segment_fds->push_back(g.seg->fd());
  }

  // Memory pools, then allocations (each with its pool's handle, 0 for
  // cudaMalloc) before modules: a restore places them first, so a module
  // variable moved into mapped memory (its first address freed, perhaps
  // reused) finds room anywhere else. A pool comes back empty: the blocks
  // it kept for reuse are not memory the program holds.
  std::map<const MemPool*, uint64_t> pool_handle;
  w.u64(pools_.size());
  pools_.for_each([&](uint64_t h, PoolEntry& p) {
    pool_handle[p.pool] = h;
    w.u64(h);
    w.u64(p.max_size);
    for (int a : kPoolAttrs) {
      uint64_t v = 0;
      ctx_->pool_get_attribute(p.pool, a, &v);
      w.u64(v);
    }
  });
  w.u64(default_pool_);
  w.u64(current_pool_);
  w.u64(allocs_.size());
  for (const auto& [d, n] : allocs_) {
    w.u64(d);
    const MemPool* mp = ctx_->pool_of(d);
    auto ph = pool_handle.find(mp);
    if (mp && ph == pool_handle.end()) return refuse("allocations of a destroyed memory pool");
    w.u64(mp ? ph->second : 0);
    if (Err e = ctx_->copy_dtoh(w.reserve(n), d, n, nullptr); e != cudaSuccess) {
      *why = "reading device memory failed (" + std::to_string(e) + ")";
      return false;
    }
  }
  // The device-side malloc heap: where it is, the blocks kernels hold, its bytes.
  Context::HeapState heap;
  if (ctx_->heap_state(&heap) != cudaSuccess) return refuse("the device-side malloc heap");
  w.u64(heap.dptr);
  if (heap.dptr) {
    w.u64(heap.live.size());
    for (const auto& [a, n] : heap.live) {
      w.u64(a);
      w.u64(n);
    }
    if (ctx_->copy_dtoh(w.reserve(heap.bytes), heap.dptr, heap.bytes, nullptr) != cudaSuccess)
      return *why = "reading the device-side malloc heap failed", false;
  }

  // CUDA arrays (their memory at its address, with contents), the
  // mipmapped arrays their levels belong to, and texture and surface
  // objects with the values kernels hold.
  w.u64(mipmaps_.size());
  mipmaps_.for_each([&](uint64_t h, MipmapEntry& m) {
    w.u64(h);
    w.u64(m.levels.size());
    for (uint64_t l : m.levels) w.u64(l);
  });
  w.u64(arrays_.size());
  bool ok = true;
  arrays_.for_each([&](uint64_t h, ArrayEntry& a) {
    w.u64(h);
    for (int32_t f : a.fmt) w.i32(f);
    w.u32(a.flags);
    w.u64(a.width);
    w.u64(a.height);
    w.u64(a.depth);
    w.u64(a.mipmap);
    w.u64(a.spec.dptr);
    if (ok && ctx_->copy_dtoh(w.reserve(a.spec.bytes), a.spec.dptr, a.spec.bytes, nullptr) != cudaSuccess) ok = false;
  });
  if (!ok) return *why = "reading an array failed", false;
  w.u64(texobjs_.size());
  for (const auto& [v, o] : texobjs_) {
    w.u64(v);
    w.u8(o.surface);
    w.bytes({reinterpret_cast<const uint8_t*>(&o.spec), sizeof o.spec});
  }

  w.u64(modules_.size());
  modules_.for_each([&](uint64_t h, ModuleEntry& m) {
    if (!ok) return;
    std::vector<ModuleVar> vars;
    if (ctx_->module_vars(*m.mod, &vars) != cudaSuccess || !m.image) {
      ok = false;
      *why = "a module's variables cannot be listed on this backend";
      return;
    }
    w.u64(h);
    w.bytes(*m.image);
    w.u64(vars.size());
    for (const ModuleVar& v : vars) {
      w.str(v.name);
      w.u64(v.dptr);
      w.u64(v.bytes);
      w.u8(v.own);
      if (v.own && ctx_->copy_dtoh(w.reserve(v.bytes), v.dptr, v.bytes, nullptr) != cudaSuccess) {
        ok = false;
        *why = "reading a module variable failed";
        return;
      }
    }
    w.u64(m.globals.size());
    for (uint64_t g : m.globals) {
      auto it = globals_.find(g);
      w.u64(g);
      w.u64(it == globals_.end() ? 0 : it->second);
    }
  });
  if (!ok) return false;

  w.u64(kernels_.size());
  kernels_.for_each([&](uint64_t h, KernelEntry& k) {
    w.u64(h);
    w.u64(k.module);
    w.str(k.name);
  });
  w.u64(streams_.size());
  streams_.for_each([&](uint64_t h, StreamEntry& s) {
    w.u64(h);
    w.u32(s.flags);
    w.i32(s.priority);
  });
  w.u64(events_.size());
  events_.for_each([&](uint64_t h, EventEntry& e) {
    w.u64(h);
    w.u32(e.flags);
    w.u8(e.recorded);
  });

  w.u64(graphs_.size());
  graphs_.for_each([&](uint64_t h, GraphExecEntry& g) {
    w.u64(h);
    w.u32(uint32_t(g.nodes.size()));
    w.u32(uint32_t(g.seg_start.size()));
    w.bytes(graph_to_wire(g.nodes, g.seg_start));
  });

  w.u64(output_.size());
  for (const OutputChunk& c : output_) {
    w.u32(c.stream);
    w.str(c.text);
  }
  w.u64(output_front_off_);
  w.u64(output_bytes_);
  w.u64(output_dropped_);
  w.u64(output_seq_);

  uint64_t nserv = 0;
  for (auto& sv : services_) nserv += sv != nullptr;
  w.u64(nserv);
  for (size_t b = 0; b < services_.size(); b++)
    if (services_[b]) {
      w.u32(uint32_t(b));
      services_[b]->save(w);
    }

  w.i32(deferred_);
  w.i32(sticky_);
  w.str(fault_detail_);
  w.u32(kEndTag);
  return true;
}

bool Session::restore(CheckpointReader& r, std::string* why, std::span<const int> segment_fds) {
  auto bad = [&](const std::string& what) {
    *why = what;
    return false;
  };
  if (r.u32() != kSessionTag) return bad("not a session checkpoint");
  device_ = r.i32();
  printf_fifo_ = r.u64();
  for (int l = 0; l < kLimits; l++) {
    const bool have = r.u8();
    const uint64_t v = r.u64();
    if (r.ok() && have && ctx_->set_limit(l, v) != cudaSuccess)
      return bad("device limit " + std::to_string(l) + " = " + std::to_string(v) + " refused");
  }
  const uint64_t mapped = r.u64(), data_bytes = r.u64();
  if (!r.ok() || device_ != 0) return bad("truncated or foreign session header");
  if (data_bytes != data_.size())
    return bad("the data area is " + std::to_string(data_.size()) + " bytes, the checkpoint's " +
               std::to_string(data_bytes));
  if (mapped) {
    uint64_t got = 0;
    if (ctx_->map_host(data_.data(), data_.size(), mapped, &got) != cudaSuccess || got != mapped)
      return bad("the data area cannot be mapped at its device address");
    mapped_dptr_ = got;
  }
  const uint64_t nseg = r.count(kMaxMovedSegments, 40);
  if (r.ok() && nseg && !pinned_source_) return bad("grown pinned memory cannot be served here (--pinned-budget-mb 0)");
  // The descriptors that came (a move's, or a resuming client's), by identity.
  std::map<std::pair<uint64_t, uint64_t>, int> came;
  for (int fd : segment_fds) {
    struct stat st{};
    if (fstat(fd, &st) == 0) came.emplace(std::make_pair(uint64_t(st.st_dev), uint64_t(st.st_ino)), fd);
  }
  for (uint64_t i = 0; i < nseg && r.ok(); i++) {
    const uint64_t k = r.u64(), size = r.u64(), dptr = r.u64(), dev = r.u64(), ino = r.u64();
    if (!r.ok()) break;
    if (k == 0 || k >= kMaxPinnedSegments || grown_.count(k) || size != pinned_segment_bytes(size))
      return bad("a grown pinned segment of the checkpoint is invalid");
    auto fd = came.find({dev, ino});
    if (fd == came.end())
      return bad("grown pinned segment " + std::to_string(k) + " (" + std::to_string(size >> 20) +
                 " MiB at 0x" + fmt::format("{:x}", dptr) + ") did not come with the session");
    std::string err;
    std::unique_ptr<PinnedSegment> seg = pinned_source_->adopt(fd->second, size, &err);
    if (!seg) return bad(err);
    const std::span<uint8_t> mem = seg->memory();
    uint64_t got = 0;
    if (ctx_->map_host(mem.data(), mem.size(), dptr, &got) != cudaSuccess || got != dptr)
      return bad("a grown pinned segment cannot be mapped at its device address");
    grown_[k] = {std::move(seg), mem, dptr};
  }

  const uint64_t npools = r.count(256, 48);
  for (uint64_t i = 0; i < npools && r.ok(); i++) {
    const uint64_t h = r.u64();
    auto pe = std::make_unique<PoolEntry>();
    pe->max_size = r.u64();
    uint64_t attrs[std::size(kPoolAttrs)];
    for (uint64_t& v : attrs) v = r.u64();
    if (!r.ok()) break;
    if (ctx_->pool_create({pe->max_size}, &pe->pool) != cudaSuccess) return bad("a memory pool cannot be made again");
    MemPool* mp = pe->pool;
    if (!pools_.add_at(h, std::move(pe))) {
      ctx_->pool_destroy(mp);
      return bad("a memory pool handle of the checkpoint is invalid or repeated");
    }
    for (size_t a = 0; a < std::size(kPoolAttrs); a++)
      if (ctx_->pool_set_attribute(mp, kPoolAttrs[a], attrs[a]) != cudaSuccess)
        return bad("a memory pool attribute of the checkpoint is refused");
  }
  default_pool_ = r.u64();
  current_pool_ = r.u64();
  if (r.ok() && ((default_pool_ && !pools_.get(default_pool_)) || (current_pool_ && !pools_.get(current_pool_))))
    return bad("the checkpoint's default or current pool is not one of its pools");
  const uint64_t nallocs = r.count(kMaxAllocs, 24);
  for (uint64_t i = 0; i < nallocs && r.ok(); i++) {
    const uint64_t d = r.u64(), pool = r.u64();
    auto content = r.bytes(kCheckpointMaxBytes);
    if (!r.ok() || content.empty()) break;
    PoolEntry* pe = pool ? pools_.get(pool) : nullptr;
    if (pool && !pe) return bad("an allocation of the checkpoint names no pool of it");
    if (Err e = pe ? ctx_->pool_alloc_at(pe->pool, d, content.size()) : ctx_->mem_alloc_at(d, content.size());
        e != cudaSuccess)
      return bad("device memory at 0x" + fmt::format("{:x}", d) + " (" + std::to_string(content.size()) +
                 " bytes) cannot be placed (" + std::to_string(e) + ": taken, or past the quota)");
    allocs_[d] = content.size();
    if (ctx_->copy_htod(d, content.data(), content.size(), nullptr) != cudaSuccess)
      return bad("writing device memory failed");
  }
  Context::HeapState heap;
  heap.dptr = r.u64();
  if (r.ok() && heap.dptr) {
    const uint64_t nlive = r.count(kMaxAllocs, 16);
    for (uint64_t i = 0; i < nlive && r.ok(); i++) {
      const uint64_t a = r.u64(), n = r.u64();
      heap.live.emplace_back(a, n);
    }
    auto content = r.bytes(kCheckpointMaxBytes);
    heap.bytes = content.size();
    if (!r.ok()) return bad("truncated device-side malloc heap");
    if (ctx_->heap_restore(heap) != cudaSuccess)
      return bad("the device-side malloc heap at 0x" + fmt::format("{:x}", heap.dptr) + " (" + std::to_string(heap.bytes) +
                 " bytes, " + std::to_string(heap.live.size()) + " blocks held) cannot be made again there");
    if (ctx_->copy_htod(heap.dptr, content.data(), content.size(), nullptr) != cudaSuccess)
      return bad("writing the device-side malloc heap failed");
  }

  const uint64_t nmips = r.count(4096, 16);
  for (uint64_t i = 0; i < nmips && r.ok(); i++) {
    const uint64_t h = r.u64();
    auto m = std::make_unique<MipmapEntry>();
    const uint64_t nl = r.count(18, 8);
    for (uint64_t l = 0; l < nl && r.ok(); l++) m->levels.push_back(r.u64());
    if (!r.ok() || !mipmaps_.add_at(h, std::move(m))) return bad("a mipmapped array of the checkpoint is invalid");
  }
  const uint64_t narrays = r.count(1 << 16, 80);
  for (uint64_t i = 0; i < narrays && r.ok(); i++) {
    const uint64_t h = r.u64();
    int32_t fmt[5];
    for (int32_t& f : fmt) f = r.i32();
    const uint32_t flags = r.u32();
    const uint64_t aw = r.u64(), ah = r.u64(), ad = r.u64(), mip = r.u64(), at = r.u64();
    auto content = r.bytes(kCheckpointMaxBytes);
    if (!r.ok()) break;
    // Its level list must name it (a level is made with its mipmapped array).
    const MipmapEntry* me = mip ? mipmaps_.get(mip) : nullptr;
    if (mip && (!me || std::find(me->levels.begin(), me->levels.end(), h) == me->levels.end()))
      return bad("an array of the checkpoint names a mipmapped array that does not list it");
    uint64_t made = 0;
    if (!at || array_make(fmt, flags, aw, ah, ad, mip, &made, at) != cudaSuccess)
      return bad("a CUDA array of the checkpoint cannot be made again at its address");
    ArrayEntry* a = arrays_.get(made);
    if (!arrays_.rename(made, h) || content.size() != a->spec.bytes ||
        ctx_->copy_htod(at, content.data(), content.size(), nullptr) != cudaSuccess)
      return bad("a CUDA array of the checkpoint is invalid");
  }
  if (r.ok())
    mipmaps_.for_each([&](uint64_t, MipmapEntry& m) {
      for (uint64_t l : m.levels)
        if (!arrays_.get(l)) r.fail();  // a level the checkpoint did not hold
    });
  const uint64_t ntex = r.count(1 << 20, 17);
  for (uint64_t i = 0; i < ntex && r.ok(); i++) {
    const uint64_t v = r.u64();
    const bool surface = r.u8();
    auto b = r.bytes(sizeof(TexSpec));
    if (!r.ok() || b.size() != sizeof(TexSpec)) break;
    TexObj o{surface, {}};
    std::memcpy(&o.spec, b.data(), sizeof o.spec);
    // It reads the session's own memory: an allocation or an array's.
    auto am = array_mem_.find(o.spec.dptr);
    const bool mem_ok = device_range(o.spec.dptr, o.spec.bytes) ||
                        (am != array_mem_.end() && o.spec.bytes <= am->second);
    if (!mem_ok || o.spec.dims < 1 || o.spec.dims > 3 || texobjs_.count(v) ||
        ctx_->texture_create_at(o.spec, surface, v) != cudaSuccess)
      return bad("a texture or surface object of the checkpoint is invalid");
    texobjs_[v] = o;
  }

  const uint64_t nmods = r.count(4096, 24);
  for (uint64_t i = 0; i < nmods && r.ok(); i++) {
    const uint64_t h = r.u64();
    auto image = r.bytes(kCheckpointMaxBytes);
    const uint64_t nvars = r.count(kMaxModuleVars, 26);
    struct Var {
      ModuleVar v;
      std::span<const uint8_t> content;
    };
    std::vector<Var> vars;
    std::vector<uint64_t> place;
    for (uint64_t k = 0; k < nvars && r.ok(); k++) {
      Var v;
      v.v.name = r.str(kMaxName);
      v.v.dptr = r.u64();
      v.v.bytes = r.u64();
      v.v.own = r.u8();
      if (v.v.own) v.content = r.bytes(kCheckpointMaxBytes);
      place.push_back(v.v.own ? v.v.dptr : 0);
      vars.push_back(std::move(v));
    }
    if (!r.ok()) break;
    ModuleEntry m;
    m.image = std::make_shared<const std::vector<uint8_t>>(image.begin(), image.end());
    if (Err e = ctx_->module_load_at(*m.image, place, &m.mod, &last_log_); e != cudaSuccess)
      return bad("a module cannot be loaded again at its addresses: " + last_log_);
    std::vector<ModuleVar> now;
    ctx_->module_vars(*m.mod, &now);
    if (now.size() != vars.size()) return bad("a module's variables differ from the checkpoint's");
    for (size_t k = 0; k < vars.size(); k++) {
      const ModuleVar& v = vars[k].v;
      if (now[k].name != v.name || now[k].bytes != v.bytes)
        return bad("module variable " + v.name.substr(0, 128) + " differs from the checkpoint's");
      if (v.own) {
        if (vars[k].content.size() != v.bytes ||
            ctx_->copy_htod(v.dptr, vars[k].content.data(), v.bytes, nullptr) != cudaSuccess)
          return bad("module variable " + v.name.substr(0, 128) + ": bad contents");
        continue;
      }
      // A __managed__ variable lives in the data area: its bytes there are
      // the program's (rebinding copies the image's over them, so they are
      // put back).
      if (!mapped_dptr_ || v.dptr < mapped_dptr_ || v.dptr - mapped_dptr_ > data_.size() ||
          v.bytes > data_.size() - (v.dptr - mapped_dptr_))
        return bad("module variable " + v.name.substr(0, 128) + " is outside the data area");
      uint8_t* live = data_.data() + (v.dptr - mapped_dptr_);
      std::vector<uint8_t> keep(live, live + v.bytes);
      if (ctx_->module_rebind_global(*m.mod, v.name, v.dptr) != cudaSuccess)
        return bad("module variable " + v.name.substr(0, 128) + " cannot be rebound");
      std::memcpy(live, keep.data(), keep.size());
    }
    const uint64_t nglob = r.count(kMaxModuleVars, 16);
    for (uint64_t k = 0; k < nglob && r.ok(); k++) {
      const uint64_t g = r.u64(), n = r.u64();
      m.globals.push_back(g);
      globals_[g] = n;
    }
    if (!r.ok() || !modules_.add_at(h, std::make_unique<ModuleEntry>(std::move(m))))
      return bad("a module handle of the checkpoint is invalid or repeated");
  }

  const uint64_t nkern = r.count(1 << 16, 24);
  for (uint64_t i = 0; i < nkern && r.ok(); i++) {
    const uint64_t h = r.u64(), mod = r.u64();
    std::string name = r.str(kMaxName);
    ModuleEntry* m = r.ok() ? modules_.get(mod) : nullptr;
    if (!m) return bad("a kernel of the checkpoint names no module of it");
    auto k = std::make_unique<KernelEntry>();
    k->module = mod;
    k->name = name;
    if (ctx_->module_kernel(*m->mod, name, &k->k, &k->attrs) != cudaSuccess)
      return bad("kernel " + name.substr(0, 128) + " is not in its module");
    if (!kernels_.add_at(h, std::move(k))) return bad("a kernel handle of the checkpoint is invalid or repeated");
  }
  const uint64_t nstreams = r.count(4096, 16);
  for (uint64_t i = 0; i < nstreams && r.ok(); i++) {
    const uint64_t h = r.u64();
    auto se = std::make_unique<StreamEntry>();
    se->flags = r.u32();
    se->priority = r.i32();
    if (!r.ok() || (se->flags & ~uint32_t(cudaStreamNonBlocking)) ||
        ctx_->stream_create(se->flags, se->priority, &se->s) != cudaSuccess || !streams_.add_at(h, std::move(se)))
      return bad("a stream of the checkpoint cannot be made again");
  }
  const uint64_t nevents = r.count(1 << 16, 13);
  for (uint64_t i = 0; i < nevents && r.ok(); i++) {
    const uint64_t h = r.u64();
    auto ee = std::make_unique<EventEntry>();
    ee->flags = r.u32();
    ee->recorded = r.u8();
    constexpr uint32_t kKnown = cudaEventBlockingSync | cudaEventDisableTiming;
    if (!r.ok() || (ee->flags & ~kKnown) || ctx_->event_create(ee->flags, &ee->e) != cudaSuccess)
      return bad("an event of the checkpoint cannot be made again");
    // Recorded before: complete (its work ran before the checkpoint).
    if (ee->recorded) ctx_->event_record(*ee->e, nullptr);
    if (!events_.add_at(h, std::move(ee))) return bad("an event handle of the checkpoint is invalid or repeated");
  }

  const uint64_t ngraphs = r.count(kMaxGraphExecs, 24);
  for (uint64_t i = 0; i < ngraphs && r.ok(); i++) {
    const uint64_t h = r.u64();
    const uint32_t nodes = r.u32(), segments = r.u32();
    auto wire = r.bytes(kMaxGraphBytes);
    if (!r.ok()) break;
    auto g = std::make_unique<GraphExecEntry>();
    if (parse_graph(wire, nodes, segments, g.get()) != cudaSuccess)
      return bad("a graph of the checkpoint is refused by the graph checks");
    if (g->bytes > kMaxSessionGraphBytes - graph_bytes_) return bad("the checkpoint's graphs exceed the session's bound");
    const uint64_t bytes = g->bytes;
    if (!graphs_.add_at(h, std::move(g))) return bad("a graph handle of the checkpoint is invalid or repeated");
    graph_bytes_ += bytes;
  }

  const uint64_t nout = r.count(kMaxOutputChunks, 12);
  for (uint64_t i = 0; i < nout && r.ok(); i++) {
    OutputChunk c;
    c.stream = r.u32();
    c.text = r.str(proto::kPendingOutputMax);
    output_.push_back(std::move(c));
  }
  output_front_off_ = r.u64();
  output_bytes_ = r.u64();
  output_dropped_ = r.u64();
  output_seq_ = r.u64();
  if (!r.ok() || (output_.empty() ? output_front_off_ != 0 : output_front_off_ > output_.front().text.size()))
    return bad("truncated or inconsistent kernel output");

  const uint64_t nserv = r.count(services_.size(), 4);
  for (uint64_t i = 0; i < nserv && r.ok(); i++) {
    const uint32_t b = r.u32();
    if (!r.ok() || b >= services_.size() || services_[b]) return bad("a library block of the checkpoint is invalid");
    services_[b] = make_service(uint16_t(b * proto::kOpBlock), *this);
    if (!services_[b]) return bad("a library block of the checkpoint has no service here");
    if (!services_[b]->restore(r, why)) return false;
  }

  deferred_ = r.i32();
  sticky_ = r.i32();
  fault_detail_ = r.str(1 << 16);
  if (r.u32() != kEndTag || !r.at_end()) return bad("truncated checkpoint, or bytes after its end");
  return true;
}

}  // namespace wh::server
