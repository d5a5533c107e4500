// Session: the bodies of the API table, with every guest-supplied handle,
// length, offset and count checked before the backend sees it.
#include "wormhole/server/session.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstring>
#include <new>
#include <sstream>
#include <thread>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "wormhole/proto/dispatch.hpp"

namespace wh::server {

using namespace wh::proto;

namespace {
constexpr uint32_t kMaxBlockThreads = 1024;

// The statistics' service-time clock: the TSC where there is one. Reading it
// costs a few ns; clock_gettime costs tens of ns in a VM, and handle() reads
// the clock twice per request (it showed in the forwarded null call and in
// the posted-launch rate). Converted to ns against steady_clock in render().
inline uint64_t stat_clock() {
#if defined(__x86_64__)
  return __rdtsc();
#else
  return uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
#endif
}
struct ClockRef {
  uint64_t ticks;
  std::chrono::steady_clock::time_point t;
};
const ClockRef& clock_ref() {
  static const ClockRef r{stat_clock(), std::chrono::steady_clock::now()};
  return r;
}
double ns_per_tick() {
#if defined(__x86_64__)
  const ClockRef& r = clock_ref();
  auto age = std::chrono::steady_clock::now() - r.t;
  if (age < std::chrono::milliseconds(20)) std::this_thread::sleep_for(std::chrono::milliseconds(20) - age);
  const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - r.t).count();
  const uint64_t dt = stat_clock() - r.ticks;
  return dt ? ns / double(dt) : 1.0;
#else
  return double(std::chrono::steady_clock::period::num) * 1e9 / double(std::chrono::steady_clock::period::den);
#endif
}
bool add_overflows(uint64_t a, uint64_t b) { return a + b < a; }

// The histogram's bucket bounds in stat_clock() ticks, from a measurement
// made once (by the first session, before its first call).
const std::array<uint64_t, kLatencyBounds.size()>& latency_bounds() {
  static const std::array<uint64_t, kLatencyBounds.size()> b = [] {
    const double k = Stats::ns_per_tick();
    std::array<uint64_t, kLatencyBounds.size()> r{};
    for (size_t i = 0; i < r.size(); i++) r[i] = uint64_t(kLatencyBounds[i] * 1e9 / k);
    return r;
  }();
  return b;
}
}  // namespace

double Stats::ns_per_tick() {
  static const double k = [] {
    (void)clock_ref();
    return wh::server::ns_per_tick();
  }();
  return k;
}

bool is_sticky(Err e) {
  switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorAssert:
    case cudaErrorLaunchFailure:
    case cudaErrorMisalignedAddress:
    case cudaErrorIllegalInstruction:
    case cudaErrorHardwareStackError:
    case cudaErrorLaunchTimeout:
      return true;
    default:
      return false;
  }
}

void OpFigures::add(const OpCounters& c) {
  calls += c.calls.load(std::memory_order_relaxed);
  ticks += c.ticks.load(std::memory_order_relaxed);
  errors += c.errors.load(std::memory_order_relaxed);
  posted += c.posted.load(std::memory_order_relaxed);
  bytes_in += c.bytes_in.load(std::memory_order_relaxed);
  bytes_out += c.bytes_out.load(std::memory_order_relaxed);
  for (size_t b = 0; b < kLatencyBuckets; b++) latency[b] += c.latency[b].load(std::memory_order_relaxed);
}

OpTable::~OpTable() {
  for (auto& p : ops_) delete p.load();
}

OpCounters& OpTable::at(uint16_t op) {
  const size_t i = size_t(op_index(op));
  OpCounters* c = ops_[i].load(std::memory_order_relaxed);
  if (!c) {
    c = new OpCounters();
    ops_[i].store(c, std::memory_order_release);  // readers see it zeroed
  }
  return *c;
}

void Stats::attach(const OpTable* t) {
  std::lock_guard lk(ops_mu_);
  live_.push_back(t);
}

void Stats::detach(const OpTable* t) {
  std::lock_guard lk(ops_mu_);
  std::erase(live_, t);
  for (size_t i = 0; i < kOpCount; i++)
    if (const OpCounters* c = t->find(i)) ended_[i].add(*c);
}

std::vector<OpFigures> Stats::ops() const {
  std::lock_guard lk(ops_mu_);
  std::vector<OpFigures> r = ended_;
  for (const OpTable* t : live_)
    for (size_t i = 0; i < kOpCount; i++)
      if (const OpCounters* c = t->find(i)) r[i].add(*c);
  return r;
}

std::string Stats::render() const {
  std::ostringstream o;
  const std::vector<OpFigures> ops = this->ops();
  uint64_t total = 0, posted = 0;
  double total_ns = 0;
  const double k = ns_per_tick();
  int width = 0;  // the longest name of an op that was called
  for (size_t i = 1; i < kOpCount; i++)
    if (ops[i].calls) width = std::max(width, int(std::strlen(op_name(kAllOps[i]))));
  for (size_t i = 1; i < kOpCount; i++) {
    uint64_t c = ops[i].calls;
    if (!c) continue;
    total += c;
    posted += ops[i].posted;
    total_ns += double(ops[i].ticks) * k;
    char line[160];
    std::snprintf(line, sizeof line, "  %-*s %10llu calls  %9.2f us mean service\n", width, op_name(kAllOps[i]),
                  (unsigned long long)c, double(ops[i].ticks) * k / 1e3 / double(c));
    o << line;
  }
  char tail[256];
  std::snprintf(tail, sizeof tail,
                "  total %llu calls (%llu posted), mean service %.2f us; moved H2D %.1f MiB, D2H %.1f MiB, D2D %.1f MiB; "
                "rejected %llu; sessions %llu\n",
                (unsigned long long)total, (unsigned long long)posted, total ? total_ns / 1e3 / double(total) : 0.0,
                bytes_htod.load() / 1048576.0, bytes_dtoh.load() / 1048576.0, bytes_dtod.load() / 1048576.0,
                (unsigned long long)rejected.load(), (unsigned long long)sessions.load());
  o << tail;
  if (bytes_peer_in.load() || bytes_peer_out.load()) {
    std::snprintf(tail, sizeof tail, "  peer copies: received %.1f MiB from other servers, pushed %.1f MiB to them\n",
                  bytes_peer_in.load() / 1048576.0, bytes_peer_out.load() / 1048576.0);
    o << tail;
  }
  if (const uint64_t nk = kernels.load()) {
    const double ks = double(kernel_ns.load()) / 1e9;
    const uint64_t ti = thread_instructions.load();
    char line[256];
    if (ti)
      std::snprintf(line, sizeof line,
                    "  kernels: %llu launches, %.3f s in them; %llu thread-instructions, %.1f M/s\n",
                    (unsigned long long)nk, ks, (unsigned long long)ti, ks > 0 ? double(ti) / ks / 1e6 : 0.0);
    else
      std::snprintf(line, sizeof line, "  kernels: %llu launches, %.3f s in them\n", (unsigned long long)nk, ks);
    o << line;
  }
  if (gate_served.load()) {
    char line[384];
    std::snprintf(line, sizeof line,
                  "  gate: %llu calls served through the gate, %llu state publications (QUERYs read them "
                  "without reaching the server), %llu binds, %llu refused, %llu violations\n",
                  (unsigned long long)gate_calls.load(), (unsigned long long)gate_publishes.load(),
                  (unsigned long long)gate_binds.load(), (unsigned long long)gate_refused.load(),
                  (unsigned long long)gate_violations.load());
    o << line;
  }
  return o.str();
}

Session::Session(uint64_t id, Backend& backend, std::unique_ptr<Context> ctx,
                 std::span<uint8_t> data, Stats& stats)
    : id_(id), backend_(backend), ctx_(std::move(ctx)), data_(data), stats_(stats) {
  stats_.sessions++;
  stats_.attach(&ops_);
  (void)clock_ref();  // the reference point render() converts ticks against
  (void)latency_bounds();
}

Session::~Session() {
  account();
  if (peer_tickets_) peer_tickets_->drop_session(id_);
  stats_.detach(&ops_);
  // Its kernel figures join the server-wide ones (live sessions' are added
  // by whoever reads them: no shared counter on the launch path).
  stats_.kernels.fetch_add(ctr_.kernels.load(), std::memory_order_relaxed);
  stats_.kernel_ns.fetch_add(ctr_.kernel_ns.load(), std::memory_order_relaxed);
  stats_.thread_instructions.fetch_add(ctr_.thread_instructions.load(), std::memory_order_relaxed);
  // Objects before the context that owns them on the device.
  graphs_.clear();
  for (auto& sv : services_) sv.reset();
  kernels_.clear();
  modules_.for_each([&](uint64_t, ModuleEntry& m) { ctx_->module_unload(*m.mod); });
  modules_.clear();
  streams_.clear();
  events_.clear();
  textures_reset();
  for (auto& [d, n] : allocs_) ctx_->mem_free(d);
  release_grown();  // their memory and budget go back with the session
  ctx_.reset();
}

namespace {
WH_DEFINE_DISPATCH(dispatch_session, WH_SESSION_OPS)
}  // namespace

Service* Session::service(uint16_t opcode) {
  const size_t block = opcode / kOpBlock;
  if (block >= services_.size() || (own_blocks_ >> block & 1)) return nullptr;
  if (!services_[block]) {
    services_[block] = make_service(opcode, *this);
    if (!services_[block]) own_blocks_ |= uint64_t(1) << block;  // the session's own table
  }
  return services_[block].get();
}

void Session::route(uint16_t opcode, std::span<const uint8_t> payload, uint32_t max_msg, DispatchResult& out) {
  if (Service* sv = service(opcode))
    sv->dispatch(opcode, payload, max_msg, out);
  else
    dispatch_session(*this, opcode, payload, max_msg, out);
}

uint64_t Session::device_bytes() const {
  uint64_t n = 0;
  for (auto& [d, b] : allocs_) n += b;
  for (auto& [d, b] : array_mem_) n += b;
  return n;
}

Session::Snapshot Session::snapshot() {
  Snapshot s;
  if (sticky_ != cudaSuccess) {  // every call but a few answers the fault
    s.pending_error = sticky_;
    s.idle = false;
    return s;
  }
  s.pending_error = deferred_;
  if (Err e = ctx_->mem_info(&s.mem_free, &s.mem_total); e != cudaSuccess) {
    s.pending_error = e;  // the guest then asks the server
    s.mem_free = s.mem_total = 0;
  }
  s.idle = ctx_->stream_query(nullptr) == cudaSuccess;
  return s;
}

bool Session::handle(uint16_t opcode, uint32_t flags, std::span<const uint8_t> payload,
                     uint32_t max_msg, DispatchResult& out) {
  if (pending_.valid) account();
  const uint64_t t0 = stat_clock();
  const bool posted = flags & WH_MSG_F_POSTED;
  max_msg_ = max_msg;
  copy_error_published_ = false;
  if (sticky_ != cudaSuccess && Op(opcode) != Op::GetDeviceProps && Op(opcode) != Op::GetDeviceCount &&
      Op(opcode) != Op::GetStats && Op(opcode) != Op::DeviceReset && Op(opcode) != Op::FetchOutput) {
    // (cudaDeviceReset is the way out of a sticky error: on_DeviceReset clears it.)
    // After a kernel fault the context is unusable, as on a GPU.
    out.status = sticky_;
    out.fixed.clear();
    out.tail.clear();
    // A staged copy refused here must still be published as done (with the
    // fault), or the guest waiting for its staging slot would wait forever.
    if (Op(opcode) == Op::MemcpyHtoD || Op(opcode) == Op::MemcpyDtoH) {
      std::span<const uint8_t> rest;
      MemcpyHtoDReq h{};
      MemcpyDtoHReq d{};
      if (Op(opcode) == Op::MemcpyHtoD ? decode_fixed(payload, h, rest) : decode_fixed(payload, d, rest))
        publish_copy_done(Op(opcode) == Op::MemcpyHtoD ? h.done_seq : d.done_seq, sticky_);
    }
  } else {
    // A backend body that throws (an allocation the host cannot make, a
    // library's exception) fails this call, not the whole server.
    try {
      route(opcode, payload, max_msg, out);
    } catch (const std::bad_alloc&) {
      out.fixed.clear();
      out.tail.clear();
      out.status = cudaErrorMemoryAllocation;
      spdlog::warn("session {}: {} ran out of host memory", id_, op_index(opcode) >= 0 ? op_name(opcode) : "unknown-op");
    } catch (const std::exception& e) {
      out.fixed.clear();
      out.tail.clear();
      out.status = cudaErrorUnknown;
      spdlog::warn("session {}: {} failed: {}", id_, op_index(opcode) >= 0 ? op_name(opcode) : "unknown-op", e.what());
    }
  }
  if (out.status == kBadRequest || out.status == kUnknownOp) {
    violations_++;
    stats_.rejected++;
  }
  const uint64_t dt = stat_clock() - t0;
  if (op_index(opcode) >= 0) {
    OpCounters& c = ops_.at(opcode);
    SessionCounters::add(c.calls, 1);
    SessionCounters::add(c.ticks, dt);
  }
  // The rest of the accounting is done by account(), after the answer left.
  pending_ = {true, posted, opcode, int32_t(out.status), dt, payload.size(), out.fixed.size() + out.tail.size()};
  if (posted) {
    // (A staged copy's error was published to the guest waiting for it.)
    if (out.status != cudaSuccess && out.status > 0 && !copy_error_published_) note_async(out.status);
    return false;
  }
  return true;
}

void Session::account() {
  if (!pending_.valid) return;
  const Pending p = pending_;
  pending_.valid = false;
  const bool failed = p.status != cudaSuccess;
  if (op_index(p.opcode) >= 0) {
    OpCounters& c = ops_.at(p.opcode);
    SessionCounters::add(c.bytes_in, p.in);
    if (!p.posted) SessionCounters::add(c.bytes_out, p.out);
    else SessionCounters::add(c.posted, 1);
    if (failed) SessionCounters::add(c.errors, 1);
    const auto& b = latency_bounds();
    size_t i = 0;
    while (i < b.size() && p.ticks > b[i]) i++;
    SessionCounters::add(c.latency[i], 1);
  }
  SessionCounters::add(ctr_.calls, 1);
  SessionCounters::add(ctr_.bytes_in, p.in);
  if (!p.posted) SessionCounters::add(ctr_.bytes_out, p.out);
  if (failed) SessionCounters::add(ctr_.errors, 1);
  if (allocs_.size() != counted_allocs_ || array_mem_.size() != counted_arrays_) {
    counted_allocs_ = allocs_.size();
    counted_arrays_ = array_mem_.size();
    ctr_.device_bytes.store(device_bytes(), std::memory_order_relaxed);
  }
  // --log-level trace: every call; debug: the failed ones.
  const auto level = failed ? spdlog::level::debug : spdlog::level::trace;
  if (spdlog::should_log(level))
    spdlog::log(level, "session {}: {} -> {} ({:.1f} us{})", id_, op_index(p.opcode) >= 0 ? op_name(p.opcode) : "unknown-op",
                p.status, double(p.ticks) * Stats::ns_per_tick() / 1e3, p.posted ? ", posted" : "");
}

namespace {
const char* sticky_name(Err e) {
  switch (e) {
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    case cudaErrorAssert: return "cudaErrorAssert";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    case cudaErrorMisalignedAddress: return "cudaErrorMisalignedAddress";
    case cudaErrorIllegalInstruction: return "cudaErrorIllegalInstruction";
    case cudaErrorHardwareStackError: return "cudaErrorHardwareStackError";
    default: return "cudaError";
  }
}
}  // namespace

Err Session::note_async(Err e) {
  if (is_sticky(e)) {
    if (sticky_ == cudaSuccess) {
      // The application learns what faulted where (a GPU would say nothing
      // but the error code): once, with the call that reports the fault.
      std::string m = std::string("wormhole: device fault, ") + sticky_name(e) + ": " +
                      (fault_detail_.empty() ? std::string("no details from the device") : fault_detail_) + "\n";
      add_output(kOutputStderr, m);
      spdlog::warn("session {}: device fault, cudaError {}: {}", id_, int(e), last_log_);
    }
    fault_detail_.clear();
    sticky_ = e;
  } else if (deferred_ == cudaSuccess) {
    deferred_ = e;
  }
  return e;
}

// A synchronising call's own error (the device's answer when it waited):
// a fault stays sticky; any other is reported now, once, standing for the
// posted work's error it may be.
Err Session::sync_error(Err e) {
  if (is_sticky(e)) return note_async(e);
  deferred_ = cudaSuccess;
  return e;
}

Err Session::take_deferred() {
  Err e = deferred_;
  deferred_ = cudaSuccess;
  return e;
}

Err Session::resolve_stream(uint64_t h, Stream** out) {
  // 0: legacy default stream; 1: cudaStreamLegacy; 2: cudaStreamPerThread.
  if (h <= 2) {
    *out = nullptr;
    return cudaSuccess;
  }
  StreamEntry* s = streams_.get(h);
  if (!s) return cudaErrorInvalidResourceHandle;
  *out = s->s.get();
  return cudaSuccess;
}

bool Session::device_range(uint64_t addr, uint64_t n) const {
  if (n == 0) return true;
  if (add_overflows(addr, n)) return false;
  if (mapped_dptr_ && addr >= mapped_dptr_ && addr - mapped_dptr_ <= data_.size() &&
      n <= data_.size() - (addr - mapped_dptr_))
    return true;
  auto inside = [&](const std::map<uint64_t, uint64_t>& m) {
    auto it = m.upper_bound(addr);
    if (it == m.begin()) return false;
    --it;
    return addr - it->first < it->second && n <= it->second - (addr - it->first);
  };
  if (inside(allocs_) || inside(globals_) || inside(array_mem_)) return true;
  for (const auto& [k, g] : grown_)  // few: each is at least 64 MiB of the owner's budget
    if (g.dptr && addr >= g.dptr && addr - g.dptr <= g.mem.size() && n <= g.mem.size() - (addr - g.dptr)) return true;
  return false;
}

uint8_t* Session::host_range(uint64_t off, uint64_t n) const {
  const uint64_t k = off >> kPinnedSegmentShift;
  if (k == 0) {
    if (off > data_.size() || n > data_.size() - off) return nullptr;
    return data_.data() + off;
  }
  // A grown segment's offsets: (k << shift) + offset inside it.
  auto it = grown_.find(k);
  if (it == grown_.end()) return nullptr;
  const uint64_t at = off & kPinnedSegmentMask;
  const std::span<uint8_t> m = it->second.mem;
  if (at > m.size() || n > m.size() - at) return nullptr;
  return m.data() + at;
}

void Session::publish_copy_done(uint64_t seq, Err e) {
  if (!seq) return;
  auto* st = reinterpret_cast<DataAreaStatus*>(data_.data());
  if (e != cudaSuccess) {
    copy_error_published_ = true;
    __atomic_store_n(&st->copy_error, e, __ATOMIC_RELAXED);
    __atomic_store_n(&st->copy_error_seq, seq, __ATOMIC_RELEASE);
  }
  __atomic_store_n(&st->copy_done_seq, seq, __ATOMIC_RELEASE);
}

void Session::add_output(uint32_t stream, std::string_view text) {
  if (text.empty()) return;
  // (A dropped-output note may take output_bytes_ past the bound.)
  if (output_bytes_ >= kPendingOutputMax || text.size() > kPendingOutputMax - output_bytes_) {
    output_dropped_ += text.size();
  } else {
    if (!output_.empty() && output_.back().stream == stream) output_.back().text.append(text);
    else output_.push_back({stream, std::string(text)});
    output_bytes_ += text.size();
  }
  auto* st = reinterpret_cast<DataAreaStatus*>(data_.data());
  __atomic_store_n(&st->output_seq, ++output_seq_, __ATOMIC_RELEASE);
}

// ------------------------------------------------------------ device

int32_t Session::on_GetDeviceCount(const GetDeviceCountReq&, std::span<const uint8_t>, GetDeviceCountResp& rs,
                                   std::vector<uint8_t>&) {
  rs.count = backend_.device_count();
  return cudaSuccess;
}

int32_t Session::on_GetDeviceProps(const GetDevicePropsReq& rq, std::span<const uint8_t>, GetDevicePropsResp& rs,
                                   std::vector<uint8_t>& rtail) {
  if (rq.device < 0 || rq.device >= backend_.device_count()) return cudaErrorInvalidDevice;
  DeviceDescription d;
  if (Err e = backend_.describe(rq.device, &d); e != cudaSuccess) return e;
  rs.driver_version = backend_.driver_version();
  rtail.resize(sizeof d);
  std::memcpy(rtail.data(), &d, sizeof d);
  return cudaSuccess;
}

int32_t Session::on_DeviceSetLimit(const DeviceSetLimitReq& rq, std::span<const uint8_t>, DeviceSetLimitResp&,
                                   std::vector<uint8_t>&) {
  if (rq.limit < 0 || rq.limit >= kLimitCount) return cudaErrorUnsupportedLimit;
  if (Err e = ctx_->set_limit(rq.limit, rq.value); e != cudaSuccess) return e;
  // The printf FIFO bounds the text one launch may leave (device output),
  // never beyond what a session may hold unfetched.
  if (rq.limit == cudaLimitPrintfFifoSize) printf_fifo_ = std::min<uint64_t>(rq.value, kPendingOutputMax);
  return cudaSuccess;
}

int32_t Session::on_DeviceGetLimit(const DeviceGetLimitReq& rq, std::span<const uint8_t>, DeviceGetLimitResp& rs,
                                   std::vector<uint8_t>&) {
  if (rq.limit < 0 || rq.limit >= kLimitCount) return cudaErrorUnsupportedLimit;
  return ctx_->get_limit(rq.limit, &rs.value);
}

int32_t Session::on_SetDevice(const SetDeviceReq& rq, std::span<const uint8_t>, SetDeviceResp&,
                              std::vector<uint8_t>&) {
  // One context per session, on the device chosen at connect (device 0);
  // other devices are refused rather than silently aliased.
  if (rq.device < 0 || rq.device >= backend_.device_count()) return cudaErrorInvalidDevice;
  if (rq.device != device_) return cudaErrorNotSupported;
  return cudaSuccess;
}

int32_t Session::on_DeviceSynchronize(const DeviceSynchronizeReq&, std::span<const uint8_t>, DeviceSynchronizeResp&,
                                      std::vector<uint8_t>&) {
  if (Err e = ctx_->synchronize(); e != cudaSuccess) return sync_error(e);
  ctx_->pool_sync_point();
  return take_deferred();
}

int32_t Session::on_DeviceReset(const DeviceResetReq&, std::span<const uint8_t>, DeviceResetResp&,
                                std::vector<uint8_t>&) {
  ctx_->synchronize();
  graphs_.clear();
  graph_bytes_ = 0;
  kernels_.clear();
  modules_.for_each([&](uint64_t, ModuleEntry& m) { ctx_->module_unload(*m.mod); });
  modules_.clear();
  streams_.clear();
  events_.clear();
  textures_reset();
  for (auto& [d, n] : allocs_) ctx_->mem_free(d);
  allocs_.clear();
  // Pools outlive a reset, as CUDA's do (they are destroyed explicitly),
  // but hold nothing afterwards.
  pools_.for_each([&](uint64_t, PoolEntry& p) { ctx_->pool_trim(p.pool, 0); });
  ctx_->reset_device_heap();
  globals_.clear();  // the modules' variables died with them
  deferred_ = sticky_ = cudaSuccess;
  fault_detail_.clear();
  return cudaSuccess;
}

// ------------------------------------------------------------ memory

int32_t Session::on_MemGetInfo(const MemGetInfoReq&, std::span<const uint8_t>, MemGetInfoResp& rs,
                               std::vector<uint8_t>&) {
  return ctx_->mem_info(&rs.free, &rs.total);
}

int32_t Session::on_Malloc(const MallocReq& rq, std::span<const uint8_t>, MallocResp& rs, std::vector<uint8_t>&) {
  if (allocs_.size() >= (1u << 20)) return cudaErrorMemoryAllocation;
  uint64_t d = 0;
  if (Err e = ctx_->mem_alloc(rq.size, &d); e != cudaSuccess) return e;
  if (d) allocs_[d] = rq.size;
  rs.dptr = d;
  return cudaSuccess;
}

int32_t Session::on_Free(const FreeReq& rq, std::span<const uint8_t>, FreeResp&, std::vector<uint8_t>&) {
  if (rq.dptr == 0) return cudaSuccess;
  auto it = allocs_.find(rq.dptr);
  if (it == allocs_.end()) return cudaErrorInvalidValue;
  ctx_->synchronize();  // cudaFree waits for work that may use the memory
  Err e = ctx_->mem_free(rq.dptr);
  allocs_.erase(it);
  return e;
}

// ------------------------------------------------------------ stream-ordered allocation

Err Session::default_pool(uint64_t* handle) {
  if (!default_pool_) {
    MemPool* mp = nullptr;
    if (Err e = ctx_->pool_create({}, &mp); e != cudaSuccess) return e;
    default_pool_ = pools_.add(std::make_unique<PoolEntry>(PoolEntry{mp}));
    if (!default_pool_) {
      ctx_->pool_destroy(mp);
      return cudaErrorMemoryAllocation;
    }
  }
  *handle = default_pool_;
  return cudaSuccess;
}

Err Session::resolve_pool(uint64_t h, MemPool** out) {
  PoolEntry* p = pools_.get(h);
  if (!p) return cudaErrorInvalidValue;
  *out = p->pool;
  return cudaSuccess;
}

namespace {
// A device number from the guest: ours, another one (not served), or none.
Err check_device(int32_t device, int count, int ours) {
  if (device < 0 || device >= count) return cudaErrorInvalidDevice;
  return device == ours ? cudaSuccess : cudaErrorNotSupported;
}
}  // namespace

int32_t Session::on_MallocAsync(const MallocAsyncReq& rq, std::span<const uint8_t>, MallocAsyncResp& rs,
                                std::vector<uint8_t>&) {
  Stream* s;
  if (Err e = resolve_stream(rq.stream, &s); e != cudaSuccess) return e;
  uint64_t h = rq.pool;
  if (!h) h = current_pool_;
  if (!h)
    if (Err e = default_pool(&h); e != cudaSuccess) return e;
  MemPool* mp;
  if (Err e = resolve_pool(h, &mp); e != cudaSuccess) return e;
  if (allocs_.size() >= (1u << 20)) return cudaErrorMemoryAllocation;
  uint64_t d = 0;
  if (Err e = ctx_->mem_alloc_async(mp, rq.size, s, &d); e != cudaSuccess) return e;
  if (d) allocs_[d] = rq.size;
  rs.dptr = d;
  return cudaSuccess;
}

int32_t Session::on_FreeAsync(const FreeAsyncReq& rq, std::span<const uint8_t>, FreeAsyncResp&,
                              std::vector<uint8_t>&) {
  Stream* s;
  if (Err e = resolve_stream(rq.stream, &s); e != cudaSuccess) return e;
  if (rq.dptr == 0) return cudaSuccess;
  auto it = allocs_.find(rq.dptr);
  if (it == allocs_.end()) return cudaErrorInvalidValue;
  Err e = ctx_->mem_free_async(rq.dptr, s);
  allocs_.erase(it);
  return e;
}

int32_t Session::on_MemPoolCreate(const MemPoolCreateReq& rq, std::span<const uint8_t>, MemPoolCreateResp& rs,
                                  std::vector<uint8_t>&) {
  if (rq.alloc_type != cudaMemAllocationTypePinned || rq.loc_type != cudaMemLocationTypeDevice)
    return cudaErrorInvalidValue;
  if (Err e = check_device(rq.loc_id, backend_.device_count(), device_); e != cudaSuccess)
    return e == cudaErrorInvalidDevice ? cudaErrorInvalidValue : e;
  // No shareable handles (IPC export) and no special usage.
  if (rq.handle_types != cudaMemHandleTypeNone || rq.usage != 0) return cudaErrorNotSupported;
  MemPool* mp = nullptr;
  if (Err e = ctx_->pool_create({rq.max_size}, &mp); e != cudaSuccess) return e;
  rs.pool = pools_.add(std::make_unique<PoolEntry>(PoolEntry{mp, rq.max_size}));
  if (!rs.pool) {
    ctx_->pool_destroy(mp);
    return cudaErrorMemoryAllocation;
  }
  return cudaSuccess;
}

int32_t Session::on_MemPoolDestroy(const MemPoolDestroyReq& rq, std::span<const uint8_t>, MemPoolDestroyResp&,
                                   std::vector<uint8_t>&) {
  MemPool* mp;
  if (Err e = resolve_pool(rq.pool, &mp); e != cudaSuccess) return e;
  if (rq.pool == default_pool_) return cudaErrorInvalidValue;  // the device's default pool stays
  ctx_->pool_destroy(mp);  // its allocations still out stay valid until freed
  pools_.take(rq.pool);
  if (current_pool_ == rq.pool) current_pool_ = default_pool_;
  return cudaSuccess;
}

int32_t Session::on_DeviceGetMemPool(const DeviceGetMemPoolReq& rq, std::span<const uint8_t>,
                                     DeviceGetMemPoolResp& rs, std::vector<uint8_t>&) {
  if (Err e = check_device(rq.device, backend_.device_count(), device_); e != cudaSuccess) return e;
  if (rq.which > 1) return cudaErrorInvalidValue;
  if (rq.which == 0 && current_pool_) {
    rs.pool = current_pool_;
    return cudaSuccess;
  }
  return default_pool(&rs.pool);
}

int32_t Session::on_DeviceSetMemPool(const DeviceSetMemPoolReq& rq, std::span<const uint8_t>,
                                     DeviceSetMemPoolResp&, std::vector<uint8_t>&) {
  if (Err e = check_device(rq.device, backend_.device_count(), device_); e != cudaSuccess) return e;
  MemPool* mp;
  if (Err e = resolve_pool(rq.pool, &mp); e != cudaSuccess) return e;
  current_pool_ = rq.pool;
  return cudaSuccess;
}

int32_t Session::on_MemPoolTrimTo(const MemPoolTrimToReq& rq, std::span<const uint8_t>, MemPoolTrimToResp&,
                                  std::vector<uint8_t>&) {
  MemPool* mp;
  if (Err e = resolve_pool(rq.pool, &mp); e != cudaSuccess) return e;
  return ctx_->pool_trim(mp, rq.keep);
}

int32_t Session::on_MemPoolSetAttr(const MemPoolSetAttrReq& rq, std::span<const uint8_t>, MemPoolSetAttrResp&,
                                   std::vector<uint8_t>&) {
  MemPool* mp;
  if (Err e = resolve_pool(rq.pool, &mp); e != cudaSuccess) return e;
  switch (rq.attr) {
    case cudaMemPoolReuseFollowEventDependencies:
    case cudaMemPoolReuseAllowOpportunistic:
    case cudaMemPoolReuseAllowInternalDependencies:
      return ctx_->pool_set_attribute(mp, rq.attr, rq.value != 0);
    case cudaMemPoolAttrReleaseThreshold:
      return ctx_->pool_set_attribute(mp, rq.attr, rq.value);
    case cudaMemPoolAttrReservedMemHigh:
    case cudaMemPoolAttrUsedMemHigh:  // a high watermark can only be reset, to the current value
      if (rq.value != 0) return cudaErrorInvalidValue;
      return ctx_->pool_set_attribute(mp, rq.attr, 0);
    default:  // the current amounts are read-only; anything else is unknown
      return cudaErrorInvalidValue;
  }
}

int32_t Session::on_MemPoolGetAttr(const MemPoolGetAttrReq& rq, std::span<const uint8_t>, MemPoolGetAttrResp& rs,
                                   std::vector<uint8_t>&) {
  MemPool* mp;
  if (Err e = resolve_pool(rq.pool, &mp); e != cudaSuccess) return e;
  if (rq.attr < cudaMemPoolReuseFollowEventDependencies || rq.attr > cudaMemPoolAttrUsedMemHigh)
    return cudaErrorInvalidValue;
  return ctx_->pool_get_attribute(mp, rq.attr, &rs.value);
}

int32_t Session::on_MapDataArea(const MapDataAreaReq& rq, std::span<const uint8_t>, MapDataAreaResp& rs,
                                std::vector<uint8_t>&) {
  if (!mapped_dptr_) {
    if (Err e = ctx_->map_host(data_.data(), data_.size(), rq.want_dptr, &mapped_dptr_); e != cudaSuccess) return e;
  }
  rs.dptr = mapped_dptr_;
  rs.size = data_.size();
  return cudaSuccess;
}

int32_t Session::on_MemcpyHtoD(const MemcpyHtoDReq& rq, std::span<const uint8_t>, MemcpyHtoDResp&,
                               std::vector<uint8_t>&) {
  Stream* s;
  Err e = resolve_stream(rq.stream, &s);
  const uint8_t* src = host_range(rq.src_off, rq.bytes);
  if (e == cudaSuccess && (!src || !device_range(rq.dst, rq.bytes))) e = cudaErrorInvalidValue;
  if (e == cudaSuccess) e = ctx_->copy_htod(rq.dst, src, rq.bytes, s);
  if (e == cudaSuccess && rq.done_seq) e = ctx_->stream_synchronize(s);  // staging slot reusable
  if (e == cudaSuccess) count_bytes(&Stats::bytes_htod, rq.bytes);
  publish_copy_done(rq.done_seq, e);
  return e;
}

int32_t Session::on_MemcpyHtoDInline(const MemcpyHtoDInlineReq& rq, std::span<const uint8_t> tail,
                                     MemcpyHtoDInlineResp&, std::vector<uint8_t>&) {
  Stream* s;
  if (Err e = resolve_stream(rq.stream, &s); e != cudaSuccess) return e;
  if (!device_range(rq.dst, tail.size())) return cudaErrorInvalidValue;
  // The tail is a private copy (the ring reader copied it out), but the GPU
  // copies asynchronously: make it synchronous for this small case.
  Err e = ctx_->copy_htod(rq.dst, tail.data(), tail.size(), s);
  if (e == cudaSuccess) e = ctx_->stream_synchronize(s);
  if (e == cudaSuccess) stats_.bytes_htod += tail.size();  // the message itself is counted as bytes in
  return e;
}

int32_t Session::on_MemcpyDtoH(const MemcpyDtoHReq& rq, std::span<const uint8_t>, MemcpyDtoHResp&,
                               std::vector<uint8_t>&) {
  Stream* s;
  Err e = resolve_stream(rq.stream, &s);
  uint8_t* dst = host_range(rq.dst_off, rq.bytes);
  if (e == cudaSuccess && (!dst || !device_range(rq.src, rq.bytes))) e = cudaErrorInvalidValue;
  if (e == cudaSuccess) e = ctx_->copy_dtoh(dst, rq.src, rq.bytes, s);
  if (e == cudaSuccess && rq.done_seq) e = ctx_->stream_synchronize(s);
  if (e == cudaSuccess) count_bytes(&Stats::bytes_dtoh, rq.bytes);
  // A copy to the host is where a program looks at results: the error of
  // posted work before it (a launch the device refused) is reported with
  // it, as CUDA's copies report errors of earlier launches, never a
  // success over stale data. Once: a staged copy publishes it to the
  // waiting guest, an answered copy returns it, a posted one defers it again.
  if (e == cudaSuccess) {
    Err earlier = take_deferred();
    if (rq.done_seq) {
      publish_copy_done(rq.done_seq, earlier);
      return cudaSuccess;
    }
    return earlier;
  }
  publish_copy_done(rq.done_seq, e);
  return e;
}

int32_t Session::on_MemcpyDtoD(const MemcpyDtoDReq& rq, std::span<const uint8_t>, MemcpyDtoDResp&,
                               std::vector<uint8_t>&) {
  Stream* s;
  if (Err e = resolve_stream(rq.stream, &s); e != cudaSuccess) return e;
  if (!device_range(rq.dst, rq.bytes) || !device_range(rq.src, rq.bytes)) return cudaErrorInvalidValue;
  Err e = ctx_->copy_dtod(rq.dst, rq.src, rq.bytes, s);
  if (e == cudaSuccess) count_bytes(&Stats::bytes_dtod, rq.bytes);
  return e;
}

int32_t Session::on_Memcpy2D(const Memcpy2DReq& rq, std::span<const uint8_t>, Memcpy2DResp&,
                             std::vector<uint8_t>&) {
  Stream* s;
  if (Err e = resolve_stream(rq.stream, &s); e != cudaSuccess) return e;
  GraphCopyBody c{};
  c.dst = rq.dst, c.dpitch = rq.dpitch, c.src = rq.src, c.spitch = rq.spitch;
  c.width = rq.width, c.height = rq.height, c.depth = 1, c.kind = rq.kind;
  return run_copy3d(c, s);
}

int32_t Session::on_Memset(const MemsetReq& rq, std::span<const uint8_t>, MemsetResp&, std::vector<uint8_t>&) {
  Stream* s;
  if (Err e = resolve_stream(rq.stream, &s); e != cudaSuccess) return e;
  if (!device_range(rq.dst, rq.bytes)) return cudaErrorInvalidValue;
  return ctx_->memset8(rq.dst, uint8_t(rq.value), rq.bytes, s);
}

// ------------------------------------------------------------ modules

int32_t Session::on_ModuleLoad(const ModuleLoadReq& rq, std::span<const uint8_t>, ModuleLoadResp& rs,
                               std::vector<uint8_t>&) {
  const uint8_t* img = host_range(rq.src_off, rq.bytes);
  if (!img || rq.bytes < 16) return cudaErrorInvalidValue;
  // Private copy: the guest can rewrite its data area while we parse.
  std::vector<uint8_t> copy(img, img + rq.bytes);
  // Only the fatbin itself travels. A __fatBinC_Wrapper_t (magic 0x466243b1)
  // holds a pointer, which fatbin parsers (ours, the driver's) follow: from a
  // guest it would aim the server at an address of the guest's choosing.
  uint32_t magic;
  std::memcpy(&magic, copy.data(), sizeof magic);
  if (magic == 0x466243b1u) return cudaErrorInvalidKernelImage;
  std::unique_ptr<Module> m;
  if (Err e = ctx_->module_load(copy, &m, &last_log_); e != cudaSuccess) {
    spdlog::warn("session {}: module load failed: {}", id_, last_log_);
    // The application hears why too (a SASS-only module names its kernels),
    // on its stderr at its next synchronising call.
    add_output(kOutputStderr, "wormhole: module load failed: " + last_log_ + "\n");
    return e;
  }
  auto image = std::make_shared<const std::vector<uint8_t>>(std::move(copy));
  uint64_t h = modules_.add(std::make_unique<ModuleEntry>(ModuleEntry{std::move(m), {}, std::move(image)}));
  if (!h) return cudaErrorMemoryAllocation;
  rs.module = h;
  return cudaSuccess;
}

int32_t Session::on_ModuleUnload(const ModuleUnloadReq& rq, std::span<const uint8_t>, ModuleUnloadResp&,
                                 std::vector<uint8_t>&) {
  auto m = modules_.take(rq.module);
  if (!m) return cudaErrorInvalidResourceHandle;
  std::vector<uint64_t> dead;
  kernels_.for_each([&](uint64_t h, KernelEntry& k) {
    if (k.module == rq.module) dead.push_back(h);
  });
  for (uint64_t h : dead) kernels_.take(h);
  // Its variables stop being valid copy targets (their memory is freed below).
  for (uint64_t g : m->globals) globals_.erase(g);
  ctx_->synchronize();
  ctx_->module_unload(*m->mod);
  return cudaSuccess;
}

int32_t Session::on_ModuleGetKernel(const ModuleGetKernelReq& rq, std::span<const uint8_t> tail,
                                    ModuleGetKernelResp& rs, std::vector<uint8_t>& rtail) {
  ModuleEntry* m = modules_.get(rq.module);
  if (!m) return cudaErrorInvalidResourceHandle;
  std::string name(reinterpret_cast<const char*>(tail.data()), tail.size());
  KernelEntry k;
  k.module = rq.module;
  if (Err e = ctx_->module_kernel(*m->mod, name, &k.k, &k.attrs); e != cudaSuccess) return e;
  k.name = name;
  rs.param_bytes = k.attrs.param_bytes;
  rs.nparams = uint32_t(k.attrs.params.size());
  rs.max_threads = uint32_t(std::max<int32_t>(k.attrs.max_threads, 0));
  for (auto [off, size] : k.attrs.params) {
    ParamInfo pi{off, size};
    auto* b = reinterpret_cast<const uint8_t*>(&pi);
    rtail.insert(rtail.end(), b, b + sizeof pi);
  }
  rs.kernel = kernels_.add(std::make_unique<KernelEntry>(std::move(k)));
  return rs.kernel ? cudaSuccess : cudaErrorMemoryAllocation;
}

int32_t Session::on_ModuleGetGlobal(const ModuleGetGlobalReq& rq, std::span<const uint8_t> tail,
                                    ModuleGetGlobalResp& rs, std::vector<uint8_t>&) {
  ModuleEntry* m = modules_.get(rq.module);
  if (!m) return cudaErrorInvalidResourceHandle;
  std::string name(reinterpret_cast<const char*>(tail.data()), tail.size());
  if (Err e = ctx_->module_global(*m->mod, name, &rs.dptr, &rs.size); e != cudaSuccess) return e;
  // Module globals become valid targets of copies (cudaMemcpyToSymbol).
  if (rs.dptr && !device_range(rs.dptr, rs.size)) {
    globals_[rs.dptr] = rs.size;
    m->globals.push_back(rs.dptr);
  }
  return cudaSuccess;
}

int32_t Session::on_ModuleBindManaged(const ModuleBindManagedReq& rq, std::span<const uint8_t> tail,
                                      ModuleBindManagedResp& rs, std::vector<uint8_t>&) {
  ModuleEntry* m = modules_.get(rq.module);
  if (!m) return cudaErrorInvalidResourceHandle;
  std::string name(reinterpret_cast<const char*>(tail.data()), tail.size());
  uint64_t old = 0, size = 0;
  if (Err e = ctx_->module_global(*m->mod, name, &old, &size); e != cudaSuccess) return e;
  // The variable must land wholly in the mapped data area's heap (never on
  // the staging slots or the status page, which the server writes).
  if (!mapped_dptr_ || rq.dptr < mapped_dptr_ + kPinnedHeapOffset || size > data_.size() ||
      rq.dptr - mapped_dptr_ > data_.size() - size)
    return cudaErrorInvalidValue;
  if (Err e = ctx_->module_rebind_global(*m->mod, name, rq.dptr); e != cudaSuccess) return e;
  globals_.erase(old);
  std::erase(m->globals, old);
  rs.size = size;
  return cudaSuccess;
}

int32_t Session::on_FuncGetAttributes(const FuncGetAttributesReq& rq, std::span<const uint8_t>,
                                      FuncGetAttributesResp& rs, std::vector<uint8_t>&) {
  KernelEntry* k = kernels_.get(rq.kernel);
  if (!k) return cudaErrorInvalidDeviceFunction;
  rs.max_threads = k->attrs.max_threads;
  rs.num_regs = k->attrs.num_regs;
  rs.shared_bytes = k->attrs.shared_bytes;
  rs.local_bytes = k->attrs.local_bytes;
  rs.const_bytes = k->attrs.const_bytes;
  rs.param_bytes = k->attrs.param_bytes;
  rs.ptx_version = k->attrs.ptx_version;
  rs.binary_version = k->attrs.binary_version;
  return cudaSuccess;
}

Err Session::check_kernel_node(uint64_t kernel, const uint32_t grid[3], const uint32_t block[3], uint32_t shared,
                                size_t param_bytes, KernelEntry** out) {
  KernelEntry* k = kernels_.get(kernel);
  if (!k || !modules_.get(k->module)) return cudaErrorInvalidResourceHandle;
  const uint64_t threads = uint64_t(block[0]) * block[1] * block[2];
  if (!grid[0] || !grid[1] || !grid[2] || !threads || threads > kMaxBlockThreads || block[0] > 1024 ||
      block[1] > 1024 || block[2] > 64 || grid[1] > 65535 || grid[2] > 65535 || grid[0] > uint32_t(INT32_MAX))
    return cudaErrorInvalidConfiguration;
  // More threads than the kernel was built for (.maxntid, launch bounds).
  if (k->attrs.max_threads > 0 && threads > uint64_t(k->attrs.max_threads)) return cudaErrorInvalidConfiguration;
  if (shared > (99u << 10)) return cudaErrorInvalidValue;
  if (param_bytes != k->attrs.param_bytes) return cudaErrorInvalidValue;
  *out = k;
  return cudaSuccess;
}

static_assert(kLaunchCooperative == kCooperativeLaunch && kLaunchProgrammatic == kProgrammaticLaunch);

int32_t Session::on_Launch(const LaunchReq& rq, std::span<const uint8_t> tail, LaunchResp&, std::vector<uint8_t>&) {
  KernelEntry* k = kernels_.get(rq.kernel);
  if (!k || !modules_.get(k->module)) return cudaErrorInvalidResourceHandle;
  Stream* s;
  if (Err e = resolve_stream(rq.stream, &s); e != cudaSuccess) return e;
  if (Err e = check_kernel_node(rq.kernel, rq.grid, rq.block, rq.shared_bytes, tail.size(), &k); e != cudaSuccess)
    return e;
  if (rq.flags & ~kLaunchFlags) return cudaErrorInvalidValue;
  return run_kernel(*k, {rq.grid[0], rq.grid[1], rq.grid[2]}, {rq.block[0], rq.block[1], rq.block[2]},
                    rq.shared_bytes, s, tail, rq.flags);
}

// A checked launch, from a Launch request or a graph's kernel node: the
// kernel's output joins what the guest fetches, a fault is remembered.
Err Session::run_kernel(KernelEntry& k, Dim3 grid, Dim3 block, uint32_t shared_bytes, Stream* s,
                        std::span<const uint8_t> params, uint32_t flags) {
  KernelOutput kout;
  kout.limit = printf_fifo_;
  const uint64_t i0 = ctx_->thread_instructions();
  const auto t0 = std::chrono::steady_clock::now();
  Err e = ctx_->launch(*k.k, grid, block, shared_bytes, flags, s, params, &last_log_, &kout);
  const uint64_t ns =
      uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
  const uint64_t ti = ctx_->thread_instructions() - i0;
  SessionCounters::add(ctr_.kernels, 1);
  SessionCounters::add(ctr_.kernel_ns, ns);
  SessionCounters::add(ctr_.thread_instructions, ti);
  add_output(kOutputStdout, kout.out);
  if (kout.dropped)
    add_output(kOutputStderr, "wormhole: device printf output exceeded the " + std::to_string(kout.limit) +
                                  "-byte printf FIFO; " + std::to_string(kout.dropped) + " bytes dropped\n");
  add_output(kOutputStderr, kout.err);
  if (e != cudaSuccess) spdlog::info("session {}: launch failed: {}", id_, last_log_);
  if (is_sticky(e)) fault_detail_ = last_log_;  // told to the application by note_async
  // A kernel the sim device refuses (an instruction it does not implement):
  // the application hears which and why, once per kernel, on its stderr.
  if (e == cudaErrorNotSupported && refused_kernels_.size() < 4096 && refused_kernels_.insert(k.name).second)
    add_output(kOutputStderr, "wormhole: launch refused: " +
                                  (last_log_.find(k.name) == std::string::npos ? "kernel " + k.name + ": " : "") +
                                  last_log_ + "\n");
  return e;
}

// ------------------------------------------------------------ streams, events

int32_t Session::on_StreamCreate(const StreamCreateReq& rq, std::span<const uint8_t>, StreamCreateResp& rs,
                                 std::vector<uint8_t>&) {
  if (rq.flags & ~uint32_t(cudaStreamNonBlocking)) return cudaErrorInvalidValue;
  StreamEntry se;
  if (Err e = ctx_->stream_create(rq.flags, rq.priority, &se.s); e != cudaSuccess) return e;
  se.flags = rq.flags;
  se.priority = rq.priority;
  rs.stream = streams_.add(std::make_unique<StreamEntry>(std::move(se)));
  return rs.stream ? cudaSuccess : cudaErrorMemoryAllocation;
}

int32_t Session::on_StreamDestroy(const StreamDestroyReq& rq, std::span<const uint8_t>, StreamDestroyResp&,
                                  std::vector<uint8_t>&) {
  StreamEntry* se = streams_.get(rq.stream);
  if (!se) return cudaErrorInvalidResourceHandle;
  ctx_->stream_synchronize(se->s.get());
  streams_.take(rq.stream);
  return cudaSuccess;
}

int32_t Session::on_StreamSynchronize(const StreamSynchronizeReq& rq, std::span<const uint8_t>,
                                      StreamSynchronizeResp&, std::vector<uint8_t>&) {
  Stream* s;
  if (Err e = resolve_stream(rq.stream, &s); e != cudaSuccess) return e;
  if (Err e = ctx_->stream_synchronize(s); e != cudaSuccess) return sync_error(e);
  ctx_->pool_sync_point();
  return take_deferred();
}

int32_t Session::on_StreamQuery(const StreamQueryReq& rq, std::span<const uint8_t>, StreamQueryResp&,
                                std::vector<uint8_t>&) {
  Stream* s;
  if (Err e = resolve_stream(rq.stream, &s); e != cudaSuccess) return e;
  return ctx_->stream_query(s);
}

int32_t Session::on_StreamWaitEvent(const StreamWaitEventReq& rq, std::span<const uint8_t>, StreamWaitEventResp&,
                                    std::vector<uint8_t>&) {
  Stream* s;
  if (Err e = resolve_stream(rq.stream, &s); e != cudaSuccess) return e;
  EventEntry* ev = events_.get(rq.event);
  if (!ev) return cudaErrorInvalidResourceHandle;
  if (!ev->recorded) return cudaSuccess;  // waiting on a never-recorded event is a no-op
  return ctx_->stream_wait_event(s, *ev->e);
}

int32_t Session::on_EventCreate(const EventCreateReq& rq, std::span<const uint8_t>, EventCreateResp& rs,
                                std::vector<uint8_t>&) {
  constexpr uint32_t kKnown = cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess;
  if (rq.flags & ~kKnown) return cudaErrorInvalidValue;
  EventEntry ee;
  if (Err e = ctx_->event_create(rq.flags & ~uint32_t(cudaEventInterprocess), &ee.e); e != cudaSuccess) return e;
  ee.flags = rq.flags & ~uint32_t(cudaEventInterprocess);
  rs.event = events_.add(std::make_unique<EventEntry>(std::move(ee)));
  return rs.event ? cudaSuccess : cudaErrorMemoryAllocation;
}

int32_t Session::on_EventRecord(const EventRecordReq& rq, std::span<const uint8_t>, EventRecordResp&,
                                std::vector<uint8_t>&) {
  EventEntry* ev = events_.get(rq.event);
  if (!ev) return cudaErrorInvalidResourceHandle;
  Stream* s;
  if (Err e = resolve_stream(rq.stream, &s); e != cudaSuccess) return e;
  ev->recorded = true;
  return ctx_->event_record(*ev->e, s);
}

int32_t Session::on_EventSynchronize(const EventSynchronizeReq& rq, std::span<const uint8_t>,
                                     EventSynchronizeResp&, std::vector<uint8_t>&) {
  EventEntry* ev = events_.get(rq.event);
  if (!ev) return cudaErrorInvalidResourceHandle;
  if (!ev->recorded) return cudaSuccess;
  if (Err e = ctx_->event_synchronize(*ev->e); e != cudaSuccess) return sync_error(e);
  ctx_->pool_sync_point();
  return take_deferred();
}

int32_t Session::on_EventQuery(const EventQueryReq& rq, std::span<const uint8_t>, EventQueryResp&,
                               std::vector<uint8_t>&) {
  EventEntry* ev = events_.get(rq.event);
  if (!ev) return cudaErrorInvalidResourceHandle;
  return ev->recorded ? ctx_->event_query(*ev->e) : cudaSuccess;
}

int32_t Session::on_EventElapsedTime(const EventElapsedTimeReq& rq, std::span<const uint8_t>,
                                     EventElapsedTimeResp& rs, std::vector<uint8_t>&) {
  EventEntry* a = events_.get(rq.start);
  EventEntry* b = events_.get(rq.end);
  if (!a || !b) return cudaErrorInvalidResourceHandle;
  if (!a->recorded || !b->recorded) return cudaErrorInvalidResourceHandle;
  return ctx_->event_elapsed(*a->e, *b->e, &rs.ms);
}

int32_t Session::on_EventDestroy(const EventDestroyReq& rq, std::span<const uint8_t>, EventDestroyResp&,
                                 std::vector<uint8_t>&) {
  return events_.take(rq.event) ? cudaSuccess : cudaErrorInvalidResourceHandle;
}

// The oldest queued device output, at most one reply's worth, of one stream.
int32_t Session::on_FetchOutput(const FetchOutputReq& rq, std::span<const uint8_t>, FetchOutputResp& rs,
                                std::vector<uint8_t>& rtail) {
  if (output_dropped_) {
    std::string note = "wormhole: " + std::to_string(output_dropped_) +
                       " bytes of device output dropped (more than " + std::to_string(kPendingOutputMax) +
                       " bytes waited for a synchronising call)\n";
    output_dropped_ = 0;
    output_.push_back({kOutputStderr, std::move(note)});
    output_bytes_ += output_.back().text.size();
  }
  rs.seq = output_seq_;
  if (output_.empty()) return cudaSuccess;
  const uint64_t room = max_msg_ > sizeof(FetchOutputResp) ? max_msg_ - sizeof(FetchOutputResp) : 0;
  OutputChunk& c = output_.front();
  const uint64_t n = std::min<uint64_t>({rq.max_bytes, room, c.text.size() - output_front_off_});
  if (n == 0) return cudaErrorInvalidValue;
  rtail.assign(c.text.begin() + ptrdiff_t(output_front_off_), c.text.begin() + ptrdiff_t(output_front_off_ + n));
  rs.stream = c.stream;
  output_front_off_ += n;
  output_bytes_ -= n;
  if (output_front_off_ == c.text.size()) {
    output_.pop_front();
    output_front_off_ = 0;
  }
  rs.more = !output_.empty();
  return cudaSuccess;
}

int32_t Session::on_GetStats(const GetStatsReq&, std::span<const uint8_t>, GetStatsResp&,
                             std::vector<uint8_t>& rtail) {
  std::string s = stats_.render();
  rtail.assign(s.begin(), s.end());
  return cudaSuccess;
}

}  // namespace wh::server
