// Module construction and the SIMT executor: warps of 32 lanes execute each
// decoded instruction in one handler call; divergence is handled per call frame
// by running the group of lanes with the lowest PC first (lanes reconverge when
// their PCs meet); barriers switch warps inside a block; blocks run in parallel.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "cg_runtime.hpp"
#include "devrt.hpp"
#include "jit.hpp"
#include "wormhole/common/ptx_link.hpp"

namespace wh::ptx {

const char* to_string(LaunchError::Kind k) {
  switch (k) {
    case LaunchError::None: return "none";
    case LaunchError::Unsupported: return "unsupported";
    case LaunchError::BadAccess: return "bad access";
    case LaunchError::Misaligned: return "misaligned address";
    case LaunchError::Assert: return "device assert";
    case LaunchError::Trap: return "trap";
    case LaunchError::InvalidConfig: return "invalid configuration";
    case LaunchError::Internal: return "internal error";
    case LaunchError::Cancelled: return "cancelled";
    case LaunchError::Timeout: return "timeout";
  }
  return "?";
}

namespace detail {

namespace {
std::string hex(uint64_t v) {
  char b[32];
  snprintf(b, sizeof b, "0x%llx", (unsigned long long)v);
  return b;
}
std::mutex g_print_mu;
}  // namespace

void Ctx::set_fault(LaunchError::Kind k, const Inst& I, std::string what) {
  if (fault) return;
  fault = true;
  err.kind = k;
  std::string m = "kernel " + (kd ? mod->funcs[kd->func].name : std::string("?")) + ": " + what;
  m += " at PTX line " + std::to_string(I.line);
  std::string lt = mod->line_text(I.line);
  if (!lt.empty()) m += " `" + lt + "`";
  if (func && kd && func != &mod->funcs[kd->func]) m += " in function " + func->name;
  m += " (block " + std::to_string(ctaid[0]) + "," + std::to_string(ctaid[1]) + "," + std::to_string(ctaid[2]) +
       ", warp " + std::to_string(warp_id) + ")";
  err.message = std::move(m);
}

void Ctx::bad_access(const Inst& I, uint64_t addr, uint32_t size, Sp sp, bool write, const char* why) {
  set_fault(LaunchError::BadAccess, I,
            std::string("invalid ") + sp_name(sp) + " " + (write ? "write" : "read") + " of " + std::to_string(size) +
                " bytes at address " + hex(addr) + " (" + why + ")");
}

uint8_t* Ctx::region_ptr(uint64_t addr, uint64_t size, bool write) {
  auto in = [&](const DeviceMemory::Region& r) {
    return r.host && addr >= r.base && addr - r.base < r.size && size <= r.size - (addr - r.base) && (!write || r.writable);
  };
  if (in(rc)) return rc.host + (addr - rc.base);
  DeviceMemory::Region r;
  if (!mem->region(addr, r) || !in(r)) return nullptr;
  rc = r;
  return r.host + (addr - r.base);
}

uint8_t* Ctx::gptr_slow(const Inst& I, uint64_t addr, uint32_t size, bool write, Sp sp) {
  if (addr >= kGridWorkspace && gridws && addr - kGridWorkspace < kGridWorkspaceBytes &&
      size <= kGridWorkspaceBytes - (addr - kGridWorkspace))
    return gridws + (addr - kGridWorkspace);
  if (addr >= kLaunchBufs && addr < kGridWorkspace) {
    uint8_t* p = devrt_buffer(*this, addr, size, write);
    if (!p) bad_access(I, addr, size, sp, write, "not inside a parameter buffer of this grid that is not launched yet");
    return p;
  }
  if (uint8_t* p = region_ptr(addr, size, write)) return p;
  uint8_t* p = mem->translate(addr, size, write);
  if (!p) bad_access(I, addr, size, sp, write, "not inside an allocation this kernel may access");
  return p;
}

// ----------------------------------------------------------------------------
// Module

namespace {

void build_kernels(ModuleImpl& M, std::string* err) {
  for (uint32_t fi = 0; fi < M.funcs.size(); ++fi) {
    const Function& f = M.funcs[fi];
    if (!f.is_entry || !f.defined) continue;
    KernelData kd;
    kd.func = fi;
    // closure over calls, with recursion detection
    std::vector<int> color(M.funcs.size(), 0);
    std::vector<uint32_t> order;
    bool recursive = false;
    // Indirect calls may reach any address-taken function of their shape:
    // those count for the stacks, shared variables and heap use.
    std::function<void(uint32_t)> dfs = [&](uint32_t u) {
      color[u] = 1;
      order.push_back(u);
      for (const auto* list : {&M.funcs[u].callees, &M.funcs[u].icallees})
        for (uint32_t v : *list) {
          if (color[v] == 1) recursive = true;
          else if (color[v] == 0) dfs(v);
        }
      color[u] = 2;
    };
    dfs(fi);
    kd.recursive = recursive;
    kd.funcs = order;
    auto frame = [&](uint32_t u) { return (M.funcs[u].frame_bytes + 15u) & ~15u; };
    if (!recursive) {
      std::vector<uint64_t> lmemo(M.funcs.size(), UINT64_MAX), rmemo(M.funcs.size(), UINT64_MAX);
      std::function<void(uint32_t)> depth = [&](uint32_t u) {
        if (lmemo[u] != UINT64_MAX) return;
        uint64_t l = 0, r = 0;
        for (const auto* list : {&M.funcs[u].callees, &M.funcs[u].icallees})
          for (uint32_t v : *list) {
            depth(v);
            l = std::max(l, lmemo[v]);
            r = std::max(r, rmemo[v]);
          }
        lmemo[u] = l + frame(u);
        rmemo[u] = r + M.funcs[u].nregs;
      };
      depth(fi);
      kd.local_stack = uint32_t(std::min<uint64_t>(lmemo[fi], 1u << 30));
      kd.reg_stack = uint32_t(std::min<uint64_t>(rmemo[fi], 1u << 30));
    } else {
      uint64_t l = 0, r = 0;
      for (uint32_t u : order) { l = std::max<uint64_t>(l, frame(u)); r = std::max<uint64_t>(r, M.funcs[u].nregs); }
      kd.local_stack = uint32_t(std::min<uint64_t>(l * 24, 1u << 30));
      kd.reg_stack = uint32_t(std::min<uint64_t>(r * 24, 1u << 30));
    }
    if (kd.local_stack == 0) kd.local_stack = 16;
    if (kd.reg_stack == 0) kd.reg_stack = 1;
    // shared layout for the variables this kernel (and its callees) use
    std::vector<uint8_t> used(M.shared.size(), 0);
    for (uint32_t u : order)
      for (uint32_t s : M.funcs[u].shared_used) used[s] = 1;
    kd.shared_off.assign(M.shared.size(), 0);
    // A kernel that reads %reserved_smem_offset_* gets the reserved region at
    // offset 0, before its own variables, as sm_80 and later reserve it.
    uint64_t off = 0;
    for (uint32_t u : order)
      if (M.funcs[u].reserved_shared) off = kReservedShared;
    for (size_t s = 0; s < M.shared.size(); ++s) {
      if (!used[s] || M.shared[s].is_extern) continue;
      uint64_t a = std::max<uint32_t>(M.shared[s].align, 1);
      off = (off + a - 1) & ~(a - 1);
      kd.shared_off[s] = off;
      off += M.shared[s].size;
    }
    uint32_t dal = 16;
    for (size_t s = 0; s < M.shared.size(); ++s)
      if (used[s] && M.shared[s].is_extern) dal = std::max(dal, M.shared[s].align);
    kd.dyn_align = dal;
    kd.static_shared = uint32_t(std::min<uint64_t>(off, 1u << 30));
    uint64_t dyn_base = (off + dal - 1) & ~uint64_t(dal - 1);
    for (size_t s = 0; s < M.shared.size(); ++s)
      if (used[s] && M.shared[s].is_extern) kd.shared_off[s] = dyn_base;
    for (uint32_t u : order)
      for (uint32_t g : M.funcs[u].globals_used)
        if (std::find(kd.globals_used.begin(), kd.globals_used.end(), g) == kd.globals_used.end()) kd.globals_used.push_back(g);
    KernelInfo ki;
    ki.name = f.name;
    for (auto& p : f.params) ki.params.push_back({p.offset, p.size});
    ki.param_bytes = f.param_bytes;
    ki.static_shared_bytes = kd.static_shared;
    ki.local_bytes_per_thread = kd.local_stack;
    ki.max_threads_per_block = f.maxntid ? f.maxntid : 1024;
    // As a compiler allocates them: at most 255, and few enough that one
    // block of max_threads_per_block fits the modeled 64K registers per SM
    // (ptxas honours .maxntid so; occupancy must never come out 0 for a
    // block size the kernel accepts: CUB divides by it).
    const uint32_t block_regs = 65536u / (uint32_t((ki.max_threads_per_block + 31) / 32) * 32u);
    ki.num_regs = int(std::min<uint32_t>({f.nregs, f.maxnreg ? uint32_t(f.maxnreg) : 255u, block_regs}));
    for (uint32_t g : kd.globals_used)
      if (M.globals[g].is_const) ki.const_bytes += uint32_t(std::min<uint64_t>(M.globals[g].size, 1u << 30));
    bool launches = false;
    for (uint32_t u : order) {
      ki.uses_heap |= M.funcs[u].calls_heap;
      launches |= M.funcs[u].launches;
    }
    // A kernel that launches kernels may start any kernel whose address the
    // module takes: the heap must exist if any function uses it.
    if (launches)
      for (const Function& g : M.funcs) ki.uses_heap |= g.calls_heap;
    M.kernels.push_back(std::move(ki));
    M.kdata.push_back(std::move(kd));
  }
  M.kernel_of_func.assign(M.funcs.size(), NOREG);
  for (uint32_t k = 0; k < M.kdata.size(); ++k) M.kernel_of_func[M.kdata[k].func] = k;
  (void)err;
}

}  // namespace
}  // namespace detail

Module::Module(std::shared_ptr<const detail::ModuleImpl> impl)
    : impl_(std::move(impl)), gaddr_(impl_->globals.size(), 0), gbound_(impl_->globals.size(), 0) {}
Module::~Module() = default;

namespace {
std::atomic<uint64_t> g_shared_loads{0};

std::shared_ptr<detail::ModuleImpl> parse_ptx(std::string_view text, std::string* err) {
  auto m = std::make_shared<detail::ModuleImpl>();
  // Function addresses carry the module's tag: a pointer taken in another
  // module is refused rather than calling whatever has its index here.
  static std::atomic<uint32_t> next_tag{1};
  m->tag = next_tag.fetch_add(1, std::memory_order_relaxed);
  if (!detail::parse_module(text, *m, err)) return nullptr;
  detail::build_kernels(*m, err);
  m->jit = std::make_shared<detail::JitState>(m->funcs.size(), m->kdata.size());
  return m;
}
}  // namespace

std::unique_ptr<Module> Module::from_ptx(std::string_view text, std::string* err, std::string_view tenant) {
  std::string linked;
  if (detail::with_cg_runtime(text, &linked)) text = linked;
  bool hit = false;
  auto impl = detail::shared_module(text, tenant, parse_ptx, err, &hit);
  if (!impl) return nullptr;
  if (hit) g_shared_loads.fetch_add(1, std::memory_order_relaxed);
  return std::unique_ptr<Module>(new Module(std::move(impl)));
}

std::unique_ptr<Module> Module::from_ptx_units(const std::vector<std::string_view>& units, std::string* err,
                                               std::string_view tenant) {
  if (units.size() == 1) return from_ptx(units[0], err, tenant);
  std::string linked;
  if (!link_ptx_units(units, &linked, err)) return nullptr;
  return from_ptx(linked, err, tenant);
}

namespace {
// What a SASS-only image holds, for the error: the architectures and the
// kernels (from the cubin's .nv.info sections), so the user learns which of
// their kernels (or which library's) cannot run here.
std::string sass_only_error(const std::vector<fatbin::Entry>& entries) {
  std::string archs;
  std::map<std::string, std::vector<fatbin::ParamInfo>> kernels;
  for (const auto& e : entries) {
    if (e.kind != fatbin::Entry::ELF) continue;
    archs += (archs.empty() ? "sm_" : ", sm_") + std::to_string(e.sm_arch);
    std::string ignored;
    fatbin::cubin_kernel_params(e.bytes, kernels, &ignored);
  }
  std::string names;
  size_t shown = 0;
  for (const auto& [name, params] : kernels) {
    if (shown++ == 4) {
      names += " and " + std::to_string(kernels.size() - 4) + " more";
      break;
    }
    names += (names.empty() ? "" : ", ") + name;
  }
  return "fatbin carries no PTX (SASS only" + (archs.empty() ? std::string() : ": " + archs) +
         "): the sim device cannot run " + (names.empty() ? std::string("its kernels") : "kernel " + names) +
         "; rebuild with a compute_XX PTX target, or use the library's Wormhole drop-in";
}
}  // namespace

std::unique_ptr<Module> Module::from_fatbin(const void* data, size_t avail, std::string* err, std::string_view tenant) {
  std::vector<fatbin::Entry> entries;
  if (!fatbin::parse(data, avail, entries, err)) return nullptr;
  const fatbin::Entry* best = nullptr;
  for (auto& e : entries)
    if (e.kind == fatbin::Entry::PTX && (!best || e.sm_arch > best->sm_arch)) best = &e;
  if (!best) {
    // -rdc=true: the device-linked image (SASS only) is followed by the
    // per-unit fatbins, whose PTX is linked here.
    const auto* p = static_cast<const uint8_t*>(data);
    uint32_t magic = 0;
    if (avail >= 4) std::memcpy(&magic, p, 4);
    const size_t first = magic == fatbin::kFatbinMagic ? fatbin::fatbin_size(data) : 0;
    if (first && first < avail) {
      std::vector<std::vector<fatbin::Entry>> units;
      if (!fatbin::parse_all(data, avail, units, err)) return nullptr;
      std::vector<std::string_view> texts;
      for (size_t u = 1; u < units.size(); ++u) {
        const fatbin::Entry* b = nullptr;
        for (auto& e : units[u])
          if (e.kind == fatbin::Entry::PTX && (!b || e.sm_arch > b->sm_arch)) b = &e;
        if (!b) {
          if (err) *err = "relocatable device code: unit " + std::to_string(u) + " carries no PTX (SASS only)";
          return nullptr;
        }
        texts.emplace_back(reinterpret_cast<const char*>(b->bytes.data()), b->bytes.size());
      }
      return from_ptx_units(texts, err, tenant);
    }
    if (err) *err = sass_only_error(entries);
    return nullptr;
  }
  std::string_view text(reinterpret_cast<const char*>(best->bytes.data()), best->bytes.size());
  return from_ptx(text, err, tenant);
}

const std::vector<KernelInfo>& Module::kernels() const { return impl_->kernels; }
const KernelInfo* Module::kernel(std::string_view name) const {
  for (auto& k : impl_->kernels)
    if (k.name == name) return &k;
  return nullptr;
}
const std::vector<GlobalVar>& Module::globals() const { return impl_->globals; }
int Module::target_arch() const { return impl_->target_arch; }
bool Module::apply_relocs(const GlobalVar& g, uint8_t* bytes, int64_t only_target) const {
  for (const GlobalReloc& r : g.relocs) {
    if (only_target >= 0 && r.target != uint64_t(only_target)) continue;
    if (r.target >= impl_->globals.size() || !gbound_[r.target] || r.size > 8 || r.offset > g.size ||
        r.size > g.size - r.offset)
      return false;
    const uint64_t v = (gaddr_[r.target] + uint64_t(r.addend)) >> r.shift;
    std::memcpy(bytes + r.offset, &v, r.size);  // little-endian: the low bytes
  }
  return true;
}
bool Module::bind_global(std::string_view name, uint64_t addr) {
  for (size_t i = 0; i < impl_->globals.size(); ++i)
    if (impl_->globals[i].name == name) {
      gaddr_[i] = addr;
      gbound_[i] = 1;
      return true;
    }
  return false;
}

// ----------------------------------------------------------------------------
// Engine

namespace detail {

// Scheduling: a warp yields after kSliceBranches taken backward branches, or after
// kSpinIterations of a loop marked as a spin-wait, or at nanosleep. A block that has
// run for kQuantum without finishing lets the worker's other blocks run.
constexpr uint32_t kSliceBranches = 1024;
constexpr uint32_t kSpinIterations = 4;
constexpr auto kQuantum = std::chrono::milliseconds(5);
// Resident blocks per worker (one modeled SM), as the sim device reports them.
constexpr uint32_t kMaxBlocksPerWorker = 32, kMaxThreadsPerWorker = 2048;
constexpr uint64_t kResidentBytesPerWorker = 256ull << 20;
constexpr uint64_t kSharedUnit = 128;  // shared memory allocation unit (sm_80)
constexpr auto kWakeHelpersAfter = std::chrono::microseconds(20);

struct Frame {
  uint32_t func, pc, active, waiting, min_wait, returned, regbase, localbase, callsite;
  uint32_t lane_pc[32];
};

struct Warp {
  std::vector<Frame> frames;
  uint32_t alive = 0, exited = 0;
  enum St { Ready, AtBar, Done } st = Ready;
  bool polled = false;  // its last slice ended in a spin-wait or nanosleep
  uint32_t bar_id = 0;
  // Lanes that reached a barrier while others of the warp still ran elsewhere
  // (divergence): held there, their resume pc in frames[bar_depth - 1].lane_pc,
  // until the rest arrive too. A barrier counts threads (sm_70 and later), so
  // the warp arrives only when every lane has.
  uint32_t bar_lanes = 0, bar_depth = 0;
  uint32_t red_dst = NOREG, red_mask = 0;
  uint32_t index = 0;
  uint32_t tid[3][32];
};

struct Job {
  const ModuleImpl* mod;
  const KernelData* kd;
  LaunchConfig cfg;
  std::vector<uint8_t> params;
  DeviceMemory* mem;
  uint64_t nblocks;
  uint32_t per_worker = 1;  // blocks a worker may hold resident (one modeled SM)
  std::chrono::steady_clock::time_point deadline{};
  bool has_deadline = false;
  uint64_t timeout_ms = 0;  // of the host launch, for the message
  std::atomic<uint64_t> next{0};
  std::atomic<bool> abort{false};   // stop every worker (error, cancel or timeout recorded in err)
  uint64_t serial = 0;              // distinct per grid run (Block::fresh_for)
  // The launching thread runs the grid alone at first and wakes the other
  // workers only when it takes longer than kWakeHelpersAfter (or its blocks
  // wait on others): a wake-up costs tens of microseconds, more than a small
  // grid takes to run.
  bool helpers_pending = false, helpers_woken = false;
  std::chrono::steady_clock::time_point wake_at{};
  // `auto` compiling: the launching worker counts the time the grid runs
  // interpreted as it goes (every kJitPoll), so that one long launch gets its
  // kernel compiled and takes the code mid-launch.
  bool jit_watch = false;
  std::chrono::steady_clock::time_point jit_from{}, jit_at{};
  GridRt* rt = nullptr;             // device runtime (dynamic parallelism) of this grid
  DevTree* tree = nullptr;          // the host launch it belongs to; tree->cancel: Engine::cancel()
  alignas(16) uint8_t gridws[kGridWorkspaceBytes] = {};
  std::mutex err_mu;
  LaunchError err;
};

struct BarState {
  uint32_t waiting = 0, arrived = 0, count = 0;
  uint32_t red_popc = 0;
  bool red_and = true, red_or = false;
  uint8_t red_op = 0;
};

// A resident block: its own registers, local and shared memory, warps and barriers,
// so that a worker can hold several blocks and switch between them.
struct Block {
  std::vector<uint64_t> regs;
  std::vector<uint8_t> local, shared;
  std::vector<Warp> warps;
  BarState bars[16];
  uint32_t ctaid[3] = {0, 0, 0};
  uint32_t done = 0;
  uint64_t fresh_for = 0;  // the grid (Job::serial) whose first block found the memory zeroed
};

struct Worker {
  std::vector<std::unique_ptr<Block>> pool;  // storage reused across blocks and launches
  std::vector<Block*> resident;
  std::vector<Block*> free_blocks;
  Ctx ctx;
  uint64_t icount = 0;
};

namespace {

inline void park(Frame& f, uint32_t mask, uint32_t at) {
  for_lanes(mask, [&](int l) { f.lane_pc[l] = at; });
  f.waiting |= mask;
  if (at < f.min_wait) f.min_wait = at;
}
inline void recompute_min(Frame& f) {
  uint32_t mn = UINT32_MAX;
  for_lanes(f.waiting, [&](int l) { mn = std::min(mn, f.lane_pc[l]); });
  f.min_wait = mn;
}
inline void take_min(Frame& f, uint32_t& pc, uint32_t& active) {
  pc = f.min_wait;
  uint32_t g = 0;
  for_lanes(f.waiting, [&](int l) { if (f.lane_pc[l] == pc) g |= 1u << l; });
  active = g;
  f.waiting &= ~g;
  recompute_min(f);
}
inline void merge(Frame& f, uint32_t pc, uint32_t& active) {
  uint32_t g = 0;
  for_lanes(f.waiting, [&](int l) { if (f.lane_pc[l] == pc) g |= 1u << l; });
  active |= g;
  f.waiting &= ~g;
  recompute_min(f);
}
inline void jump(Frame& f, uint32_t tgt, uint32_t& pc, uint32_t& active) {
  pc = tgt;
  if (f.waiting && f.min_wait <= pc) {
    if (f.min_wait < pc) {
      park(f, active, pc);
      take_min(f, pc, active);
    } else {
      merge(f, pc, active);
    }
  }
}

// The warp has arrived at its barrier: lanes held there wait in their frame
// again, to resume after the barrier with the others.
inline void release_held(Warp& w) {
  if (!w.bar_lanes) return;
  Frame& f = w.frames[w.bar_depth - 1];
  f.waiting |= w.bar_lanes;
  recompute_min(f);
  w.bar_lanes = 0;
}

// Resolve a generic address for the engine's own reads (printf, assert): no fault.
const uint8_t* peek_generic(Ctx& c, int lane, uint64_t a, uint64_t n) {
  uint64_t hi = a & 0xFFFFFFFF00000000ull;
  if (hi == kSharedWindow) {
    a -= kSharedWindow;
    return a < c.shared_size && n <= c.shared_size - a ? c.shared + a : nullptr;
  }
  if (hi == kLocalWindow) {
    a -= kLocalWindow;
    return a < c.local_stride && n <= c.local_stride - a ? c.local + size_t(lane) * c.local_stride + a : nullptr;
  }
  if (hi == kParamWindow) {
    a -= kParamWindow;
    return a < c.kparam_size && n <= c.kparam_size - a ? c.kparam + a : nullptr;
  }
  return c.mem->translate(a, n, false);
}
std::string read_cstr(Ctx& c, int lane, uint64_t a, size_t maxn = 4096) {
  std::string s;
  if (!a) return "(null)";
  for (size_t i = 0; i < maxn; ++i) {
    const uint8_t* p = peek_generic(c, lane, a + i, 1);
    if (!p || !*p) break;
    s.push_back(char(*p));
  }
  return s;
}

// Device printf: format string and a packed argument buffer (each argument aligned to its size).
std::string format_printf(Ctx& c, int lane, const std::string& fmt, uint64_t args) {
  std::string out;
  uint64_t off = 0;
  auto arg = [&](size_t sz) -> uint64_t {
    off = (off + sz - 1) & ~uint64_t(sz - 1);
    const uint8_t* p = args ? peek_generic(c, lane, args + off, sz) : nullptr;
    off += sz;
    uint64_t v = 0;
    if (p) std::memcpy(&v, p, sz);
    return v;
  };
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') { out.push_back(fmt[i]); continue; }
    if (i + 1 < fmt.size() && fmt[i + 1] == '%') { out.push_back('%'); ++i; continue; }
    size_t j = i + 1;
    std::string spec = "%";
    while (j < fmt.size() && std::strchr("-+ #0123456789.", fmt[j])) spec.push_back(fmt[j++]);
    int lmod = 0;  // 0 none, 1 l, 2 ll, 3 h
    while (j < fmt.size() && std::strchr("hlLzjt", fmt[j])) {
      if (fmt[j] == 'l' || fmt[j] == 'L' || fmt[j] == 'z' || fmt[j] == 'j' || fmt[j] == 't') lmod = lmod ? 2 : 1;
      ++j;
    }
    if (j >= fmt.size()) { out += fmt.substr(i); break; }
    char conv = fmt[j];
    char buf[512];
    if (std::strchr("diouxXc", conv)) {
      bool wide = lmod >= 1;
      uint64_t v = arg(wide ? 8 : 4);
      std::string s2 = spec + "ll" + conv;
      if (conv == 'c') snprintf(buf, sizeof buf, (spec + "c").c_str(), int(v));
      else if (conv == 'd' || conv == 'i') snprintf(buf, sizeof buf, s2.c_str(), wide ? (long long)v : (long long)int32_t(v));
      else snprintf(buf, sizeof buf, s2.c_str(), wide ? (unsigned long long)v : (unsigned long long)uint32_t(v));
      out += buf;
    } else if (std::strchr("fFeEgGaA", conv)) {
      double d = std::bit_cast<double>(arg(8));
      snprintf(buf, sizeof buf, (spec + conv).c_str(), d);
      out += buf;
    } else if (conv == 'p') {
      snprintf(buf, sizeof buf, "0x%llx", (unsigned long long)arg(8));
      out += buf;
    } else if (conv == 's') {
      std::string s = read_cstr(c, lane, arg(8));
      snprintf(buf, sizeof buf, (spec + "s").c_str(), s.c_str());
      out += buf;
    } else {
      out += fmt.substr(i, j - i + 1);
    }
    i = j;
  }
  return out;
}

// An indirect call's target: a defined, non-kernel function of this module
// whose parameters and results fit the call's prototype. Otherwise the launch
// fails naming the address or the function (a GPU would fault or run garbage).
bool check_icall(Ctx& c, const Inst& I, const CallSite& cs, uint32_t callee, uint64_t target) {
  const ModuleImpl& M = *c.mod;
  if (callee == NOREG) {
    const uint32_t tag_mask = (1u << kFuncTagBits) - 1;
    const bool other = (target & ~((uint64_t(1) << (kFuncTagShift + kFuncTagBits)) - 1)) == kFuncWindow &&
                       ((target >> kFuncTagShift) & tag_mask) != (M.tag & tag_mask);
    c.set_fault(LaunchError::BadAccess, I,
                "indirect call to address " + hex(target) +
                    (other ? ", a function address that is not of this module (function pointers are valid in the "
                             "module that took them)"
                           : ", which is not a function"));
    return false;
  }
  const Function& f = M.funcs[callee];
  if (f.is_entry) {
    c.set_fault(LaunchError::BadAccess, I, "indirect call to kernel " + f.name + " (a __global__ function is launched, not called)");
    return false;
  }
  if (f.builtin) {
    c.set_fault(LaunchError::Unsupported, I, "indirect call to the built-in function '" + f.name + "'");
    return false;
  }
  if (!cs.targets.empty() && std::find(cs.targets.begin(), cs.targets.end(), callee) == cs.targets.end()) {
    c.set_fault(LaunchError::BadAccess, I, "indirect call to " + f.name + ", which is not in the call's .calltargets " + cs.proto);
    return false;
  }
  bool fits = f.params.size() == cs.arg_size.size() && f.rets.size() == cs.ret_size.size();
  for (size_t i = 0; fits && i < f.params.size(); ++i) fits = f.params[i].size <= cs.arg_size[i];
  for (size_t i = 0; fits && i < f.rets.size(); ++i) fits = f.rets[i].size <= cs.ret_size[i];
  if (!fits) {
    c.set_fault(LaunchError::Trap, I, "indirect call to " + f.name + ", whose parameters or results do not match the call's prototype " + cs.proto);
    return false;
  }
  return true;
}

}  // namespace

// Blocks one worker holds resident: the sim device's per-SM limits (it reports one SM
// per worker), and a memory budget so that many resident blocks cannot exhaust the host.
inline uint32_t blocks_per_worker(const KernelData& kd, const LaunchConfig& cfg) {
  const uint64_t nthr = uint64_t(cfg.block.x) * cfg.block.y * cfg.block.z;
  const uint64_t nwarps = (nthr + 31) / 32;
  uint64_t n = std::min<uint64_t>(kMaxBlocksPerWorker, kMaxThreadsPerWorker / std::max<uint64_t>(1, nwarps * 32));
  const uint64_t bytes = nwarps * kd.reg_stack * 32 * 8 + nwarps * 32 * kd.local_stack + kd.static_shared + cfg.dynamic_shared_bytes;
  if (bytes) n = std::min<uint64_t>(n, kResidentBytesPerWorker / bytes);
  return uint32_t(std::max<uint64_t>(n, 1));
}

struct EngineImpl {
  unsigned nthreads = 1;
  std::vector<std::thread> threads;
  std::vector<std::unique_ptr<Worker>> workers;
  std::mutex mu;
  std::condition_variable cv, done_cv;
  Job* job = nullptr;
  DevTree* tree = nullptr;  // the host launch in progress (Engine::cancel)
  uint64_t gen = 0;
  unsigned running = 0;
  bool stop = false;
  std::mutex launch_mu;
  std::atomic<uint64_t> icount{0};

  LaunchError run_grid(const ModuleImpl& M, const KernelData& kd, const LaunchConfig& cfg, std::vector<uint8_t> params,
                       DeviceMemory& mem, GridRt& rt, DevTree& tree);
  LaunchError run_tree(const ModuleImpl& M, const KernelData& kd, const LaunchConfig& cfg, std::vector<uint8_t> params,
                       DeviceMemory& mem, DevTree& tree, uint32_t depth);

  void worker_main(unsigned idx) {
    uint64_t seen = 0;
    for (;;) {
      Job* j;
      {
        std::unique_lock lk(mu);
        cv.wait(lk, [&] { return stop || gen != seen; });
        if (stop) return;
        seen = gen;
        j = job;
      }
      run_job(*workers[idx], *j);
      {
        std::lock_guard lk(mu);
        if (--running == 0) done_cv.notify_all();
      }
    }
  }

  // Cancel and watchdog checks, at every slice boundary. Records the reason once.
  bool should_stop(Job& J) {
    if (J.abort.load(std::memory_order_relaxed)) return true;
    LaunchError::Kind k = LaunchError::None;
    if (J.tree->cancel.load(std::memory_order_relaxed) || (J.cfg.cancel && J.cfg.cancel->load(std::memory_order_relaxed)))
      k = LaunchError::Cancelled;
    else if (J.has_deadline && std::chrono::steady_clock::now() >= J.deadline)
      k = LaunchError::Timeout;
    if (k == LaunchError::None) return false;
    std::lock_guard lk(J.err_mu);
    if (!J.err) {
      J.err.kind = k;
      J.err.message = "kernel " + J.mod->funcs[J.kd->func].name +
                      (k == LaunchError::Cancelled ? ": cancelled" : ": watchdog: still running after " + std::to_string(J.timeout_ms) + " ms");
    }
    J.abort = true;
    return true;
  }

  void wake_helpers(Job& J) {
    J.helpers_pending = false;
    J.helpers_woken = true;
    {
      std::lock_guard lk(mu);
      running = unsigned(threads.size());
      gen++;
    }
    cv.notify_all();
  }

  void fail_job(Worker& W, Job& J) {
    std::lock_guard lk(J.err_mu);
    if (!J.err) J.err = W.ctx.err;
    J.abort = true;
  }

  // Each worker models one SM: it runs one block at a time and keeps running it
  // while it makes progress; when all its warps are spin-waiting (or it has run for
  // a quantum without finishing), the worker takes another block, up to
  // J.per_worker resident blocks, then rotates between them. Blocks that wait on
  // each other therefore finish when the grid fits the modeled co-residency.
  void run_job(Worker& W, Job& J) {
    W.icount = 0;
    Ctx& c = W.ctx;
    c.rc = {};
    for (auto& r : c.rc2) r = {};
    for (auto& r : c.jrc) r = {};
    setup_ctx(c, J);
    W.resident.clear();
    W.free_blocks.clear();
    for (auto& b : W.pool) W.free_blocks.push_back(b.get());
    bool more = true;
    size_t cur = 0, stalled = 0;
    auto admit = [&]() -> bool {
      if (!more || J.abort.load(std::memory_order_relaxed)) return false;
      uint64_t b = J.next.fetch_add(1);
      if (b >= J.nblocks) { more = false; return false; }
      if (W.free_blocks.empty()) {
        W.pool.push_back(std::make_unique<Block>());
        W.free_blocks.push_back(W.pool.back().get());
      }
      Block* B = W.free_blocks.back();
      W.free_blocks.pop_back();
      init_block(W, J, *B, b);
      W.resident.push_back(B);
      cur = W.resident.size() - 1;
      return true;
    };
    for (;;) {
      if (J.abort.load(std::memory_order_relaxed)) break;
      if (W.resident.empty() && !admit()) break;
      Block& B = *W.resident[cur];
      Step st = step_block(W, J, B);
      if (J.helpers_pending && &W == workers[0].get() && J.next.load(std::memory_order_relaxed) < J.nblocks &&
          (st == Step::Stalled || st == Step::Quantum || std::chrono::steady_clock::now() >= J.wake_at))
        wake_helpers(J);
      if (J.jit_watch && &W == workers[0].get()) {
        const auto now = std::chrono::steady_clock::now();
        if (now >= J.jit_at) {
          jit_account(*J.mod, *J.kd, uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(now - J.jit_from).count()));
          jit_prepare(*J.mod, *J.kd);  // queues the compile once the kernel has run long enough
          J.jit_from = now;
          J.jit_at = now + kJitPoll;
        }
      }
      if (st == Step::Fault) { fail_job(W, J); break; }
      if (st == Step::Stop) break;
      if (st == Step::Done) {
        J.rt->block_done(B.ctaid[0] + uint64_t(J.cfg.grid.x) * (B.ctaid[1] + uint64_t(J.cfg.grid.y) * B.ctaid[2]));
        W.free_blocks.push_back(&B);
        W.resident.erase(W.resident.begin() + ptrdiff_t(cur));
        if (cur >= W.resident.size()) cur = 0;
        stalled = 0;
        continue;
      }
      if (W.resident.size() < J.per_worker && admit()) { stalled = 0; continue; }
      cur = (cur + 1) % W.resident.size();
      // every resident block is waiting on others: give the CPU to the workers that run them
      if (st == Step::Stalled && ++stalled >= W.resident.size()) {
        stalled = 0;
        std::this_thread::yield();
      } else if (st != Step::Stalled) {
        stalled = 0;
      }
    }
    // keep the memory of two blocks for the next launch, not the peak residency
    if (W.pool.size() > 2) W.pool.resize(2);
    W.resident.clear();
    W.free_blocks.clear();
    icount.fetch_add(W.icount, std::memory_order_relaxed);
  }

  static void setup_ctx(Ctx& c, Job& J) {
    const ModuleImpl& M = *J.mod;
    const KernelData& kd = *J.kd;
    const LaunchConfig& cfg = J.cfg;
    const uint32_t nthr = cfg.block.x * cfg.block.y * cfg.block.z;
    c.mod = &M;
    c.kd = &kd;
    c.cpool = M.cpool.data();
    c.ntid = cfg.block;
    c.nctaid = cfg.grid;
    c.nwarps = (nthr + 31) / 32;
    // A GPU allocates a block's shared memory in 128-byte units (sm_80), so
    // a read past the end of the dynamic shared memory but inside its last
    // unit does not fault there; compilers widen loads into that slack
    // (NVVM's v4 loads). Static arrays keep their exact bounds: an overflow
    // of one is a bug this device reports.
    const uint64_t dyn = (uint64_t(cfg.dynamic_shared_bytes) + kSharedUnit - 1) & ~uint64_t(kSharedUnit - 1);
    c.shared_size = uint32_t(((uint64_t(kd.static_shared) + kd.dyn_align - 1) & ~uint64_t(kd.dyn_align - 1)) + dyn);
    c.dyn_shared = cfg.dynamic_shared_bytes;
    c.local_stride = kd.local_stack;
    c.kparam = J.params.data();
    c.kparam_size = uint32_t(J.params.size());
    c.mem = J.mem;
    c.shared_off = kd.shared_off.data();
    c.gaddr = J.tree->gaddr;
    c.gridws = cfg.cooperative ? J.gridws : nullptr;
    c.gridws_addr = cfg.cooperative ? kGridWorkspace : 0;
    c.rt = J.rt;
    c.fault = false;
    c.tex_handle = 0;  // objects may change between launches
  }

  void init_block(Worker& W, Job& J, Block& B, uint64_t bid) {
    const KernelData& kd = *J.kd;
    const LaunchConfig& cfg = J.cfg;
    const uint32_t nthr = cfg.block.x * cfg.block.y * cfg.block.z;
    const uint32_t nwarps = (nthr + 31) / 32;
    Ctx& c = W.ctx;
    B.ctaid[0] = uint32_t(bid % cfg.grid.x);
    B.ctaid[1] = uint32_t((bid / cfg.grid.x) % cfg.grid.y);
    B.ctaid[2] = uint32_t(bid / (uint64_t(cfg.grid.x) * cfg.grid.y));
    B.done = 0;
    for (auto& b : B.bars) b = BarState{};
    // Memory for the block, zeroed when a grid first uses it: no data from earlier
    // launches is visible. Later blocks of the same grid find what the block before
    // them left (registers, local and shared memory are undefined at a block's start
    // on a GPU too); zeroing them for every block cost more than running small blocks.
    size_t nreg = size_t(nwarps) * kd.reg_stack * 32;
    size_t nloc = size_t(nwarps) * 32 * kd.local_stack;
    const bool fresh = B.fresh_for != J.serial;  // else its warps' thread indices are this grid's already
    if (fresh) {
      if (B.regs.size() < nreg) B.regs.resize(nreg);
      std::memset(B.regs.data(), 0, nreg * sizeof(uint64_t));
      if (B.local.size() < nloc) B.local.resize(nloc);
      std::memset(B.local.data(), 0, nloc);
      if (B.shared.size() < c.shared_size + 16) B.shared.resize(c.shared_size + 16);
      std::memset(B.shared.data(), 0, c.shared_size);
      B.fresh_for = J.serial;
    }
    if (B.warps.size() < nwarps) B.warps.resize(nwarps);
    for (uint32_t w = 0; w < nwarps; ++w) {
      Warp& wp = B.warps[w];
      wp.index = w;
      wp.exited = 0;
      wp.st = Warp::Ready;
      wp.polled = false;
      wp.red_dst = NOREG;
      // Thread indices by counting (x fastest) from the warp's first thread,
      // not three divisions per lane: those cost about 1 us per warp and
      // dominated small launches. Same values, dead lanes included. A block
      // this grid used before has them already.
      if (fresh) {
        uint32_t alive = 0;
        const uint32_t t0 = w * 32;
        uint32_t tx = t0 % cfg.block.x, ty = (t0 / cfg.block.x) % cfg.block.y, tz = t0 / (cfg.block.x * cfg.block.y);
        for (uint32_t l = 0; l < 32; ++l) {
          if (t0 + l < nthr) alive |= 1u << l;
          wp.tid[0][l] = tx;
          wp.tid[1][l] = ty;
          wp.tid[2][l] = tz;
          if (++tx == cfg.block.x) {
            tx = 0;
            if (++ty == cfg.block.y) {
              ty = 0;
              ++tz;
            }
          }
        }
        wp.alive = alive;
      }
      wp.bar_lanes = 0;
      wp.frames.clear();
      wp.frames.reserve(8);
      Frame f{};
      f.func = kd.func;
      f.pc = 0;
      f.active = wp.alive;
      f.waiting = 0;
      f.min_wait = UINT32_MAX;
      f.regbase = 0;
      f.localbase = 0;
      f.callsite = 0;
      wp.frames.push_back(f);
    }
  }

  enum class Step { Done, Fault, Stop, Stalled, Quantum };

  // Runs the block's warps round-robin (each until it exits, reaches a barrier or
  // its slice ends) until the block finishes, faults, or should let others run:
  // Stalled when a whole round made no progress but spin-waits, Quantum when it
  // has run for kQuantum without finishing.
  Step step_block(Worker& W, Job& J, Block& B) {
    const ModuleImpl& M = *J.mod;
    const KernelData& kd = *J.kd;
    Ctx& c = W.ctx;
    const uint32_t nwarps = c.nwarps;
    c.ctaid[0] = B.ctaid[0];
    c.ctaid[1] = B.ctaid[1];
    c.ctaid[2] = B.ctaid[2];
    c.block_linear = B.ctaid[0] + uint64_t(c.nctaid.x) * (B.ctaid[1] + uint64_t(c.nctaid.y) * B.ctaid[2]);
    c.shared = B.shared.data();
    uint32_t rounds = 0;
    std::chrono::steady_clock::time_point qend{};
    for (;;) {
      bool ran = false, progress = false;
      for (uint32_t w = 0; w < nwarps; ++w) {
        Warp& wp = B.warps[w];
        if (wp.st != Warp::Ready) continue;
        ran = true;
        wp.polled = false;
        run_warp(W, J, B, wp);
        if (c.fault) return Step::Fault;
        if (wp.st == Warp::Done) ++B.done;
        if (!wp.polled) progress = true;
        if (should_stop(J)) return Step::Stop;
      }
      if (B.done == nwarps) return Step::Done;
      // release barriers whose arrival condition holds
      bool released = false;
      uint32_t live = nwarps - B.done;
      for (uint32_t b = 0; b < 16; ++b) {
        BarState& S = B.bars[b];
        if (!S.waiting) continue;
        bool ok = S.count ? S.arrived >= S.count : S.waiting >= live;
        if (!ok) continue;
        uint32_t result = S.red_op == 1 ? S.red_popc : S.red_op == 2 ? uint32_t(S.red_and) : uint32_t(S.red_or);
        for (uint32_t w = 0; w < nwarps; ++w) {
          Warp& wp = B.warps[w];
          if (wp.st != Warp::AtBar || wp.bar_id != b) continue;
          wp.st = Warp::Ready;
          if (wp.red_dst != NOREG) {
            uint64_t* D = B.regs.data() + (size_t(w) * kd.reg_stack + wp.frames.back().regbase + wp.red_dst) * 32;
            for_lanes(wp.red_mask, [&](int l) { D[l] = result; });
            wp.red_dst = NOREG;
          }
        }
        S = BarState{};
        released = true;
      }
      if (!released && !ran) {
        c.fault = true;
        c.err.kind = LaunchError::Trap;
        c.err.message = "kernel " + M.funcs[kd.func].name + ": deadlock: warps of block (" + std::to_string(c.ctaid[0]) + "," +
                        std::to_string(c.ctaid[1]) + "," + std::to_string(c.ctaid[2]) +
                        ") wait at barriers that can never complete";
        return Step::Fault;
      }
      if (!progress && !released) return Step::Stalled;
      // the clock is read only by blocks that take many rounds (long loops, many barriers)
      if ((++rounds & 7) == 0) {
        auto now = std::chrono::steady_clock::now();
        if (rounds == 8) qend = now + kQuantum;
        else if (now >= qend) return Step::Quantum;
      }
    }
  }

  void run_warp(Worker& W, Job& J, Block& B, Warp& w) {
    const ModuleImpl& M = *J.mod;
    const KernelData& kd = *J.kd;
    Ctx& c = W.ctx;
    c.warp = nullptr;
    c.warp_id = w.index;
    c.tid[0] = w.tid[0];
    c.tid[1] = w.tid[1];
    c.tid[2] = w.tid[2];
    c.local = B.local.data() + size_t(w.index) * 32 * kd.local_stack;
    uint64_t* const wregs = B.regs.data() + size_t(w.index) * kd.reg_stack * 32;
    BarState* const bars = B.bars;
    uint64_t cnt = 0;
    // the slice: taken backward branches before the warp yields to the others
    uint32_t slice = kSliceBranches, spin = kSpinIterations;
    uint64_t spin_sig = 0;
    Frame* fr;
    const Function* fn;
    const Inst* code;
    const JitEntry* jit = nullptr;  // the function's compiled blocks, by start pc
    uint32_t pc, active;
    auto load = [&] {
      fr = &w.frames.back();
      fn = &M.funcs[fr->func];
      jit = M.jit && !J.tree->interpret ? M.jit->table[fr->func].load(std::memory_order_acquire) : nullptr;
      c.func = fn;
      c.regs = wregs + size_t(fr->regbase) * 32;
      c.frame_local = fr->localbase;
      code = fn->code.data();
      pc = fr->pc;
      active = fr->active;
    };
    auto save = [&] {
      fr->pc = pc;
      fr->active = active;
      W.icount += cnt;
    };
    load();
    for (;;) {
      // Compiled code runs a whole warp from a block start when no parked lanes wait inside the block
      // (they merge only at its end); it returns where the interpreter must go on.
      if (jit && active == 0xffffffffu && jit[pc].fn && (fr->min_wait <= pc || fr->min_wait >= jit[pc].end)) {
        const uint32_t np = jit[pc].fn(&c, active, &cnt, pc, fr->min_wait, &slice);
        if (c.fault) { pc = np; save(); return; }
        if (np != pc) {
          pc = np;
          if (pc == fr->min_wait) merge(*fr, pc, active);
          continue;
        }
      }
      const Inst& I = code[pc];
      uint32_t m = active;
      if (I.guard != NOREG) {
        const uint64_t* P = c.regs + size_t(I.guard) * 32;
        uint32_t pm = 0;
        if (active == 0xffffffffu) {
          for (int l = 0; l < 32; ++l) pm |= uint32_t(P[l] != 0) << l;
        } else {
          for_lanes(active, [&](int l) { pm |= uint32_t(P[l] != 0) << l; });
        }
        m = I.gneg ? active & ~pm : active & pm;
      }
      if (I.ctl == Ctl::None) {
        if (m) {
          I.fn(c, I, m);
          cnt += m == 0xffffffffu ? 32u : uint32_t(std::popcount(m));  // full warps: no libgcc popcount call
          if (c.fault) { save(); return; }
        }
        ++pc;
        if (pc == fr->min_wait) merge(*fr, pc, active);
        continue;
      }
      cnt += m == 0xffffffffu ? 32u : uint32_t(std::popcount(m));  // full warps: no libgcc popcount call
      bool group_empty = false;
      switch (I.ctl) {
        case Ctl::Bra: {
          uint32_t nt = active & ~m;
          if (!m) {
            ++pc;
            if (pc == fr->min_wait) merge(*fr, pc, active);
          } else {
            if (!nt) {
              jump(*fr, I.a0, pc, active);
            } else {
              park(*fr, nt, pc + 1);
              active = m;
              jump(*fr, I.a0, pc, active);
            }
            // Preemption point: loops end the slice so that warps waiting on each
            // other progress; spin-wait loops end it after a few iterations.
            if (I.sched & kSchedBack) {
              bool spun = false;
              if (I.sched & kSchedSpin) {
                // an iteration whose polled values did not change counts as spinning
                uint64_t sig = I.a0;
                const uint32_t* sr = fn->spin_regs.data() + (I.a1 >> 4);
                for (uint32_t k = 0, n = I.a1 & 15; k < n; ++k) {
                  const uint64_t* R = c.regs + size_t(sr[k]) * 32;
                  for_lanes(m, [&](int l) { sig = (sig ^ R[l]) * 0x100000001b3ull; });
                }
                if (sig != spin_sig) {
                  spin_sig = sig;
                  spin = kSpinIterations;
                } else {
                  spun = --spin == 0;
                }
              }
              if (spun || --slice == 0) {
                w.polled = spun;
                save();
                return;
              }
            }
          }
          break;
        }
        case Ctl::Yield: {  // nanosleep
          ++pc;
          if (pc == fr->min_wait) merge(*fr, pc, active);
          if (m) {
            w.polled = true;
            save();
            return;
          }
          break;
        }
        case Ctl::Exit:
        case Ctl::Ret: {
          // A return from the kernel's own frame is an exit.
          if (I.ctl == Ctl::Exit || w.frames.size() == 1)
            w.exited |= m;
          else
            fr->returned |= m;
          active &= ~m;
          if (active) {
            ++pc;
            if (pc == fr->min_wait) merge(*fr, pc, active);
          } else {
            group_empty = true;
          }
          break;
        }
        case Ctl::Call:
        case Ctl::ICall: {
          if (!m) { ++pc; if (pc == fr->min_wait) merge(*fr, pc, active); break; }
          const CallSite& cs = fn->calls[I.a0];
          uint32_t callee = cs.callee, others = active & ~m;
          if (I.ctl == Ctl::ICall) {
            // Lanes may hold different targets (virtual calls on objects of
            // several classes): the first lane's group calls now, the others
            // stay at the call and take it when this group returns.
            const uint64_t* P = c.src(I.s[0]);
            const uint64_t target = P[std::countr_zero(m)];
            uint32_t same = 0;
            for_lanes(m, [&](int l) { same |= uint32_t(P[l] == target) << l; });
            callee = M.func_at(target);
            if (!check_icall(c, I, cs, callee, target)) {
              save();
              return;
            }
            if (uint32_t rest = m & ~same) park(*fr, rest, pc);
            m = same;
          }
          const Function& cf = M.funcs[callee];
          if (!cf.defined) {
            c.set_fault(LaunchError::Unsupported, I, "call to function '" + cf.name + "' which has no body in this module");
            save();
            return;
          }
          uint32_t nregbase = fr->regbase + fn->nregs;
          uint32_t nlocal = fr->localbase + ((fn->frame_bytes + 15u) & ~15u);
          if (uint64_t(nregbase) + cf.nregs > kd.reg_stack || uint64_t(nlocal) + cf.frame_bytes > kd.local_stack) {
            c.set_fault(LaunchError::Trap, I, "call stack overflow (recursion too deep) calling " + cf.name);
            save();
            return;
          }
          if (others) park(*fr, others, pc + 1);
          fr->pc = pc + 1;
          fr->active = 0;
          for (size_t i = 0; i < cs.arg_off.size(); ++i) {
            uint32_t so = fr->localbase + cs.arg_off[i], dof = nlocal + cf.params[i].offset, sz = cf.params[i].size;
            for_lanes(m, [&](int l) {
              uint8_t* base = c.local + size_t(l) * kd.local_stack;
              std::memmove(base + dof, base + so, sz);
            });
          }
          Frame nf;
          nf.func = callee;
          nf.pc = 0;
          nf.active = m;
          nf.waiting = 0;
          nf.min_wait = UINT32_MAX;
          nf.returned = 0;
          nf.regbase = nregbase;
          nf.localbase = nlocal;
          nf.callsite = I.a0;
          W.icount += cnt;
          cnt = 0;
          w.frames.push_back(nf);
          load();
          continue;
        }
        case Ctl::Printf: {
          const CallSite& cs = fn->calls[I.a0];
          std::string all;
          for_lanes(m, [&](int l) {
            uint8_t* base = c.local + size_t(l) * kd.local_stack + fr->localbase;
            uint64_t fmt = 0, args = 0;
            if (cs.arg_off.size() >= 1) std::memcpy(&fmt, base + cs.arg_off[0], 8);
            if (cs.arg_off.size() >= 2) std::memcpy(&args, base + cs.arg_off[1], 8);
            std::string s = format_printf(c, l, read_cstr(c, l, fmt), args);
            all += s;
            int32_t r = int32_t(s.size());
            if (!cs.ret_off.empty()) std::memcpy(base + cs.ret_off[0], &r, 4);
          });
          if (!all.empty()) {
            std::lock_guard lk(g_print_mu);
            if (DeviceOutput* o = J.cfg.output) {
              if (all.size() <= o->limit - std::min<uint64_t>(o->limit, o->printf_text.size())) o->printf_text += all;
              else o->dropped += all.size();
            } else {
              std::fwrite(all.data(), 1, all.size(), stdout);
              std::fflush(stdout);
            }
          }
          ++pc;
          if (pc == fr->min_wait) merge(*fr, pc, active);
          break;
        }
        case Ctl::Malloc:
        case Ctl::Free: {
          const CallSite& cs = fn->calls[I.a0];
          bool bad = false;
          uint64_t bad_addr = 0;
          for_lanes_until(m, [&](int l) {
            uint8_t* base = c.local + size_t(l) * kd.local_stack + fr->localbase;
            uint64_t a = 0;
            std::memcpy(&a, base + cs.arg_off[0], 8);
            if (I.ctl == Ctl::Malloc) {
              // malloc(0) gives NULL, which free accepts.
              uint64_t p = a ? c.mem->device_malloc(a) : 0;
              std::memcpy(base + cs.ret_off[0], &p, 8);
            } else if (a && !c.mem->device_free(a)) {
              bad = true;
              bad_addr = a;
              return false;
            }
            return true;
          });
          if (bad) {
            // Undefined on a GPU (heap corruption); here a clear fault instead.
            c.set_fault(LaunchError::Trap, I,
                        "free() of address " + hex(bad_addr) + ", which is not a live device-heap (malloc) block");
            save();
            return;
          }
          ++pc;
          if (pc == fr->min_wait) merge(*fr, pc, active);
          break;
        }
        case Ctl::DevRt: {
          if (m) {
            const CallSite& cs = fn->calls[I.a0];
            if (!devrt_call(c, I, M.funcs[cs.callee], cs, m)) {
              save();
              return;
            }
          }
          ++pc;
          if (pc == fr->min_wait) merge(*fr, pc, active);
          break;
        }
        case Ctl::Assert: {
          if (!m) { ++pc; if (pc == fr->min_wait) merge(*fr, pc, active); break; }
          const CallSite& cs = fn->calls[I.a0];
          int l = std::countr_zero(m);
          uint8_t* base = c.local + size_t(l) * kd.local_stack + fr->localbase;
          uint64_t msg = 0, file = 0, func = 0;
          uint32_t line = 0;
          if (cs.arg_off.size() >= 4) {
            std::memcpy(&msg, base + cs.arg_off[0], 8);
            std::memcpy(&file, base + cs.arg_off[1], 8);
            std::memcpy(&line, base + cs.arg_off[2], 4);
            std::memcpy(&func, base + cs.arg_off[3], 8);
          }
          c.set_fault(LaunchError::Assert, I,
                      "device-side assertion `" + read_cstr(c, l, msg) + "` failed in " + read_cstr(c, l, func) + " at " +
                          read_cstr(c, l, file) + ":" + std::to_string(line) + " (thread " + std::to_string(w.tid[0][l]) +
                          "," + std::to_string(w.tid[1][l]) + "," + std::to_string(w.tid[2][l]) + ")");
          if (DeviceOutput* o = J.cfg.output) {
            // A GPU's wording, one line per failing thread of the warp.
            std::string head = read_cstr(c, l, file) + ":" + std::to_string(line) + ": " + read_cstr(c, l, func) +
                               ": block: [" + std::to_string(c.ctaid[0]) + "," + std::to_string(c.ctaid[1]) + "," +
                               std::to_string(c.ctaid[2]) + "], thread: [";
            std::string cond = "] Assertion `" + read_cstr(c, l, msg) + "` failed.\n", lines;
            for_lanes(m, [&](int q) {
              lines += head + std::to_string(w.tid[0][q]) + "," + std::to_string(w.tid[1][q]) + "," +
                       std::to_string(w.tid[2][q]) + cond;
            });
            std::lock_guard lk(g_print_mu);
            if (lines.size() <= o->limit - std::min<uint64_t>(o->limit, o->assert_text.size())) o->assert_text += lines;
          }
          save();
          return;
        }
        case Ctl::Trap: {
          if (!m) { ++pc; if (pc == fr->min_wait) merge(*fr, pc, active); break; }
          if (I.a1 == 1) c.set_fault(LaunchError::Unsupported, I, "unsupported instruction");
          else c.set_fault(LaunchError::Trap, I, "trap instruction executed");
          save();
          return;
        }
        case Ctl::Bar: {
          if (!m) { ++pc; if (pc == fr->min_wait) merge(*fr, pc, active); break; }
          int l0 = std::countr_zero(m);
          uint32_t id = uint32_t(c.src(I.s[0])[l0]);
          uint32_t count = I.s[1] != NOREG ? uint32_t(c.src(I.s[1])[l0]) : 0;
          if (id >= 16) {
            c.set_fault(LaunchError::Trap, I, "barrier id " + std::to_string(id) + " out of range (0..15)");
            save();
            return;
          }
          BarState& B = bars[id];
          if (count) B.count = count;
          ++pc;
          const bool plain_wait = I.flags == 0;  // bar.sync / barrier.sync (not arrive, not red)
          if (plain_wait && fr->waiting && m == active &&
              (!w.bar_lanes || (w.bar_id == id && w.bar_depth == w.frames.size()))) {
            // Other lanes of the warp have yet to arrive: hold these, run those.
            for_lanes(m, [&](int l) { fr->lane_pc[l] = pc; });
            w.bar_lanes |= m;
            w.bar_id = id;
            w.bar_depth = uint32_t(w.frames.size());
            take_min(*fr, pc, active);
            break;
          }
          B.arrived += 32;
          if (I.flags & 2) {  // bar.arrive: no wait
            if (pc == fr->min_wait) merge(*fr, pc, active);
            break;
          }
          if (I.flags >> 2) {  // bar.red
            const uint64_t* P = c.src(I.s[2]);
            bool neg = I.flags & 1;
            B.red_op = uint8_t(I.flags >> 2);
            for_lanes(m, [&](int l) {
              bool v = (P[l] != 0) != neg;
              B.red_popc += v;
              B.red_and = B.red_and && v;
              B.red_or = B.red_or || v;
            });
            w.red_dst = I.d[0];
            w.red_mask = m;
          }
          B.waiting++;
          w.st = Warp::AtBar;
          w.bar_id = id;
          release_held(w);
          if (pc == fr->min_wait) merge(*fr, pc, active);
          save();
          return;
        }
        default:
          c.set_fault(LaunchError::Internal, I, "bad control instruction");
          save();
          return;
      }
      while (group_empty) {
        group_empty = false;
        if (fr->waiting) {
          take_min(*fr, pc, active);
          break;
        }
        if (w.bar_lanes && w.bar_depth == w.frames.size()) {
          // Only lanes held at a barrier remain: the warp arrives there.
          BarState& B = bars[w.bar_id];
          B.arrived += 32;
          B.waiting++;
          w.st = Warp::AtBar;
          release_held(w);
          take_min(*fr, pc, active);
          save();
          return;
        }
        if (w.frames.size() == 1) {
          w.st = Warp::Done;
          save();
          return;
        }
        // all lanes of the callee are done: copy results and return to the caller
        uint32_t ret = fr->returned & ~w.exited;
        const Function& cf = *fn;
        uint32_t cs_ix = fr->callsite, clocal = fr->localbase;
        W.icount += cnt;
        cnt = 0;
        w.frames.pop_back();
        load();
        const CallSite& cs = fn->calls[cs_ix];
        for (size_t i = 0; i < cs.ret_off.size() && i < cf.rets.size(); ++i) {
          uint32_t so = clocal + cf.rets[i].offset, dof = fr->localbase + cs.ret_off[i], sz = cf.rets[i].size;
          for_lanes(ret, [&](int l) {
            uint8_t* base = c.local + size_t(l) * kd.local_stack;
            std::memmove(base + dof, base + so, sz);
          });
        }
        // remove exited lanes from the caller's parked lanes as well
        fr->waiting &= ~w.exited;
        recompute_min(*fr);
        active = ret;
        if (!active) group_empty = true;
        else if (pc == fr->min_wait) merge(*fr, pc, active);
        else if (fr->waiting && fr->min_wait < pc) jump(*fr, pc, pc, active);
      }
    }
  }
};

// Compare mode: kernels whose two runs can be compared (no device heap, whose
// state a second run would see changed, no launches from the device, no
// spin-waits on other blocks or the host).
bool comparable(const ModuleImpl& M, const KernelData& kd) {
  for (uint32_t u : kd.funcs) {
    const Function& f = M.funcs[u];
    if (f.calls_heap || f.launches || f.builtin == 3 || f.builtin == 4 || f.builtin == 5) return false;
    if (!f.spin_regs.empty()) return false;  // spin-waits: progress depends on other blocks or the host
  }
  return true;
}

// Runs the launch interpreted, keeps what it wrote, restores the memory, runs it
// compiled, and reports the first byte where the two differ (an engine bug:
// the compiler must compute what the interpreter computes). Both runs take
// the blocks in order on one worker, so racing blocks race alike. The first
// run's printf output is dropped.
LaunchError run_compared(const ModuleImpl& M, const KernelData& kd, const LaunchConfig& cfg,
                         const std::vector<DeviceMemory::Region>& regions,
                         const std::function<LaunchError(const LaunchConfig&, bool, bool, bool)>& run) {
  std::vector<std::vector<uint8_t>> before(regions.size()), interpreted(regions.size());
  for (size_t i = 0; i < regions.size(); ++i) before[i].assign(regions[i].host, regions[i].host + regions[i].size);
  DeviceOutput scratch;
  LaunchConfig first = cfg;
  first.output = &scratch;
  const LaunchError e1 = run(first, true, false, true);
  // cancelled or stopped by the watchdog: nothing to compare, the launch ends here
  if (e1.kind == LaunchError::Cancelled || e1.kind == LaunchError::Timeout) return e1;
  for (size_t i = 0; i < regions.size(); ++i) {
    interpreted[i].assign(regions[i].host, regions[i].host + regions[i].size);
    std::memcpy(regions[i].host, before[i].data(), regions[i].size);
  }
  LaunchError e2 = run(cfg, false, true, true);
  const std::string kname = M.funcs[kd.func].name;
  if (e1.kind != e2.kind)
    return {LaunchError::Internal, "kernel " + kname + ": compiled and interpreted runs differ: interpreted " +
                                       to_string(e1.kind) + " (" + e1.message + "), compiled " + to_string(e2.kind) + " (" +
                                       e2.message + ")"};
  if (e1) return e2;  // both failed alike: memory after a fault is not compared
  for (size_t i = 0; i < regions.size(); ++i) {
    const uint8_t* now = regions[i].host;
    for (uint64_t k = 0; k < regions[i].size; ++k)
      if (now[k] != interpreted[i][k]) {
        char what[160];
        std::snprintf(what, sizeof what, "at address 0x%llx: interpreted 0x%02x, compiled 0x%02x",
                      (unsigned long long)(regions[i].base + k), interpreted[i][k], now[k]);
        return {LaunchError::Internal, "kernel " + kname + ": compiled and interpreted runs differ " + what};
      }
  }
  return e2;
}

}  // namespace detail

Engine::Engine(unsigned threads) : impl_(std::make_unique<detail::EngineImpl>()) {
  unsigned n = threads ? threads : std::max(1u, std::thread::hardware_concurrency());
  impl_->nthreads = n;
  for (unsigned i = 0; i < n; ++i) impl_->workers.push_back(std::make_unique<detail::Worker>());
  for (unsigned i = 1; i < n; ++i) impl_->threads.emplace_back([this, i] { impl_->worker_main(i); });
}

Engine::~Engine() {
  {
    std::lock_guard lk(impl_->mu);
    impl_->stop = true;
  }
  impl_->cv.notify_all();
  for (auto& t : impl_->threads) t.join();
}

unsigned Engine::threads() const { return impl_->nthreads; }

void Engine::cancel() {
  std::lock_guard lk(impl_->mu);
  if (impl_->tree) impl_->tree->cancel = true;
}

uint64_t Engine::max_coresident_blocks(const Module& mod, std::string_view kernel, const LaunchConfig& cfg) const {
  const detail::ModuleImpl& M = mod.impl();
  for (size_t i = 0; i < M.kernels.size(); ++i)
    if (M.kernels[i].name == kernel) {
      uint64_t nthr = uint64_t(cfg.block.x) * cfg.block.y * cfg.block.z;
      if (!nthr || nthr > 1024) return 0;
      return uint64_t(detail::blocks_per_worker(M.kdata[i], cfg)) * impl_->nthreads;
    }
  return 0;
}
CompileStats compile_stats() {
  const detail::JitStats s = detail::jit_stats();
  return {s.seconds, s.kernels, s.functions, s.insts, g_shared_loads.load(std::memory_order_relaxed)};
}

bool compile_in_progress() { return detail::jit_busy(); }

uint64_t Engine::instructions_executed() const { return impl_->icount.load(); }

namespace detail {

LaunchError check_launch(const ModuleImpl& M, const uint8_t* gbound, const KernelData& kd, const LaunchConfig& cfg,
                         size_t params_size) {
  const Function& f = M.funcs[kd.func];
  LaunchError e;
  auto bad = [&](LaunchError::Kind k, std::string msg) {
    e.kind = k;
    e.message = "kernel " + f.name + ": " + msg;
    return e;
  };
  // unsupported constructs anywhere in the kernel's call closure fail the launch up front
  {
    std::vector<uint32_t> stack{kd.func}, seen;
    while (!stack.empty()) {
      uint32_t u = stack.back();
      stack.pop_back();
      if (std::find(seen.begin(), seen.end(), u) != seen.end()) continue;
      seen.push_back(u);
      const Function& g = M.funcs[u];
      if (!g.unsupported.empty())
        return bad(LaunchError::Unsupported, "unsupported " + g.unsupported + " at PTX line " + std::to_string(g.unsupported_line) +
                                                 " `" + M.line_text(g.unsupported_line) + "`" + (u != kd.func ? " in function " + g.name : ""));
      for (uint32_t v : g.callees) stack.push_back(v);
    }
  }
  const Dim3& gd = cfg.grid;
  const Dim3& bd = cfg.block;
  if (!gd.x || !gd.y || !gd.z || !bd.x || !bd.y || !bd.z) return bad(LaunchError::InvalidConfig, "zero grid or block dimension");
  uint64_t nthr = uint64_t(bd.x) * bd.y * bd.z;
  int maxt = f.maxntid ? f.maxntid : 1024;
  if (nthr > uint64_t(maxt) || bd.z > 64)
    return bad(LaunchError::InvalidConfig, "block of " + std::to_string(nthr) + " threads exceeds the limit of " + std::to_string(maxt));
  if (gd.y > 65535 || gd.z > 65535 || gd.x > 0x7fffffffu) return bad(LaunchError::InvalidConfig, "grid dimension too large");
  if (params_size < f.param_bytes)
    return bad(LaunchError::InvalidConfig, "parameter buffer of " + std::to_string(params_size) + " bytes, kernel needs " + std::to_string(f.param_bytes));
  if (uint64_t(kd.static_shared) + cfg.dynamic_shared_bytes > (1u << 20))
    return bad(LaunchError::InvalidConfig, "shared memory " + std::to_string(uint64_t(kd.static_shared) + cfg.dynamic_shared_bytes) + " bytes exceeds 1 MiB");
  uint64_t regs_bytes = uint64_t((nthr + 31) / 32) * kd.reg_stack * 32 * 8, local_bytes = uint64_t((nthr + 31) / 32) * 32 * kd.local_stack;
  if (regs_bytes > kMaxBlockRegBytes)
    return bad(LaunchError::InvalidConfig, "a block of " + std::to_string(nthr) + " threads needs " + std::to_string(regs_bytes >> 20) +
                                               " MiB of registers (" + std::to_string(kd.reg_stack) + " register slots of 8 bytes per thread" +
                                               (kd.recursive ? ", recursion budget included" : "") + "), over the sim device's limit of " +
                                               std::to_string(kMaxBlockRegBytes >> 20) + " MiB per block");
  if (local_bytes > (1ull << 30))
    return bad(LaunchError::InvalidConfig, "per-block local memory too large");
  for (uint32_t g : kd.globals_used)
    if (!gbound[g]) return bad(LaunchError::InvalidConfig, "global variable '" + M.globals[g].name + "' is not bound to device memory");
  return e;
}

// Runs one grid on the worker pool (the launching thread works too).
LaunchError EngineImpl::run_grid(const ModuleImpl& M, const KernelData& kd, const LaunchConfig& cfg,
                                 std::vector<uint8_t> params, DeviceMemory& mem, GridRt& rt, DevTree& tree) {
  static std::atomic<uint64_t> serials{0};
  Job job;
  job.serial = ++serials;
  job.mod = &M;
  job.kd = &kd;
  job.cfg = cfg;
  job.params = std::move(params);
  job.mem = &mem;
  job.nblocks = uint64_t(cfg.grid.x) * cfg.grid.y * cfg.grid.z;
  job.per_worker = blocks_per_worker(kd, cfg);
  job.rt = &rt;
  job.tree = &tree;
  job.has_deadline = tree.has_deadline;
  job.deadline = tree.deadline;
  job.timeout_ms = tree.timeout_ms;
  // grid_workspace {wsSize, barrier} as the driver lays it out
  const uint32_t ws_size = kGridWorkspaceBytes;
  std::memcpy(job.gridws, &ws_size, 4);
  if (!tree.interpret) jit_prepare(M, kd, tree.compile);
  const auto t0 = std::chrono::steady_clock::now();
  job.jit_watch = !tree.interpret && !tree.compile && jit_mode() == JitMode::Auto;
  job.jit_from = t0;
  job.jit_at = t0 + kJitPoll;
  {
    std::lock_guard lk(mu);
    this->job = &job;
  }
  if (!tree.serial && !threads.empty() && job.nblocks > 1) {
    // a cooperative grid's blocks all wait on each other at once
    if (cfg.cooperative) wake_helpers(job);
    else job.helpers_pending = true, job.wake_at = t0 + kWakeHelpersAfter;
  }
  run_job(*workers[0], job);
  {
    std::unique_lock lk(mu);
    if (job.helpers_woken) done_cv.wait(lk, [&] { return running == 0; });
    this->job = nullptr;
  }
  jit_account(M, kd, uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - job.jit_from).count()));
  return job.err;
}

// A grid, then what it launched: its children (NULL stream, its streams,
// fire-and-forget) in launch order, each with everything it launches in
// turn, then its tail launches in order. Every child starts after its
// parent grid completed, which the programming model allows (a parent may not
// count on running alongside a child), and each launch after the ones before
// it, which keeps every stream's order and every event dependency.
LaunchError EngineImpl::run_tree(const ModuleImpl& M, const KernelData& kd, const LaunchConfig& cfg,
                                 std::vector<uint8_t> params, DeviceMemory& mem, DevTree& tree, uint32_t depth) {
  GridRt rt(M, tree, depth);
  LaunchError e = run_grid(M, kd, cfg, std::move(params), mem, rt, tree);
  rt.release_unlaunched();
  rt.bufs.clear();  // out of reach once the grid ended; the launches hold copies
  if (e) return e;
  for (auto* list : {&rt.children, &rt.tails})
    for (ChildLaunch& ch : *list) {
      LaunchConfig cc;
      cc.grid = ch.grid;
      cc.block = ch.block;
      cc.dynamic_shared_bytes = ch.shmem;
      cc.output = cfg.output;
      cc.cancel = cfg.cancel;
      cc.pending_launch_limit = cfg.pending_launch_limit;
      const KernelData& ckd = M.kdata[ch.kernel];
      const uint64_t bytes = ch.params.size();
      LaunchError ce = check_launch(M, tree.gbound, ckd, cc, bytes);
      if (!ce) ce = run_tree(M, ckd, cc, std::move(ch.params), mem, tree, depth + 1);
      {
        // a launch is pending until its grid completes
        std::lock_guard lk(tree.mu);
        tree.pending--;
        tree.pending_bytes -= bytes;
      }
      if (ce) {
        // name where the failing grid came from, once (the innermost parent)
        static const std::string kFrom = " (a grid launched from the device by kernel ";
        if (ce.message.find(kFrom) == std::string::npos)
          ce.message += kFrom + M.funcs[kd.func].name + ", nesting depth " + std::to_string(depth + 1) + ")";
        return ce;
      }
    }
  return e;
}

}  // namespace detail

LaunchError Engine::launch(const Module& mod, std::string_view kernel, const LaunchConfig& cfg, const void* params,
                           size_t params_size, DeviceMemory& mem) {
  using detail::KernelData;
  const detail::ModuleImpl& M = mod.impl();
  const KernelData* kd = nullptr;
  for (size_t i = 0; i < M.kernels.size(); ++i)
    if (M.kernels[i].name == kernel) kd = &M.kdata[i];
  if (!kd) return {LaunchError::InvalidConfig, "kernel " + std::string(kernel) + ": no such kernel in the module"};
  if (params_size && !params) params_size = 0;
  if (LaunchError e = detail::check_launch(M, mod.gbound(), *kd, cfg, params_size)) return e;
  const uint64_t nblocks = uint64_t(cfg.grid.x) * cfg.grid.y * cfg.grid.z;
  const uint32_t per_worker = detail::blocks_per_worker(*kd, cfg);
  if (cfg.cooperative && nblocks > uint64_t(per_worker) * impl_->nthreads)
    return {LaunchError::InvalidConfig, "kernel " + std::string(kernel) + ": cooperative launch of " + std::to_string(nblocks) +
                                            " blocks exceeds the " + std::to_string(uint64_t(per_worker) * impl_->nthreads) +
                                            " blocks of this shape the sim device runs concurrently"};

  std::lock_guard launch_lock(impl_->launch_mu);
  std::vector<uint8_t> p(static_cast<const uint8_t*>(params), static_cast<const uint8_t*>(params) + params_size);
  // One tree per host launch: the grids it leads to share its pending-launch
  // budget, cancel flag and watchdog.
  auto run = [&](const LaunchConfig& c, bool interpret, bool compile, bool serial) {
    detail::DevTree tree(std::min(c.pending_launch_limit, detail::kMaxPendingLaunches));
    tree.gaddr = mod.gaddr();
    tree.gbound = mod.gbound();
    tree.interpret = interpret;
    tree.compile = compile;
    tree.serial = serial;
    if (c.timeout_ms) {
      tree.has_deadline = true;
      tree.timeout_ms = c.timeout_ms;
      tree.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(c.timeout_ms);
    }
    {
      std::lock_guard lk(impl_->mu);
      impl_->tree = &tree;
    }
    LaunchError e = impl_->run_tree(M, *kd, c, p, mem, tree, 0);
    {
      std::lock_guard lk(impl_->mu);
      impl_->tree = nullptr;
    }
    return e;
  };
  std::vector<DeviceMemory::Region> regions;
  if (detail::jit_mode() != detail::JitMode::Compare || cfg.cooperative || !detail::comparable(M, *kd) ||
      !mem.writable_regions(regions))
    return run(cfg, false, detail::jit_mode() == detail::JitMode::Compare, false);  // compare: at least compiled
  return detail::run_compared(M, *kd, cfg, regions, run);
}

}  // namespace wh::ptx
