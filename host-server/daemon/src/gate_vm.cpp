#include "gate_vm.hpp"

#include <fcntl.h>
#include <sched.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "wormhole/ring.hpp"

namespace wh::server {

namespace {
uint64_t load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
uint32_t load32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
}  // namespace

std::unique_ptr<GateVm> GateVm::open(const std::string& vm, const std::string& path, uint32_t channels,
                                     Stats& stats, std::string* err) {
  struct stat st{};
  if (stat(path.c_str(), &st) != 0) {
    *err = path + ": " + strerror(errno) +
           (errno == ENOENT ? " (the VMM creates it: start the VM, or create the memory-backend-file first)" : "");
    return nullptr;
  }
  if (!S_ISREG(st.st_mode)) {
    *err = path + ": not a regular file (expected the file behind the VM's memory-backend-file)";
    return nullptr;
  }
  if (uint64_t(st.st_size) < WH_GATE_WINDOW) {
    *err = path + ": " + std::to_string(st.st_size) + " bytes, smaller than the gate window (" +
           std::to_string(WH_GATE_WINDOW) + " bytes; QEMU's example uses size=1M)";
    return nullptr;
  }
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    *err = path + ": " + strerror(errno);
    return nullptr;
  }
  void* m = mmap(nullptr, WH_GATE_WINDOW, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (m == MAP_FAILED) {
    *err = path + ": mmap: " + strerror(errno);
    return nullptr;
  }
  std::unique_ptr<GateVm> g(new GateVm(stats));
  g->map_ = static_cast<uint8_t*>(m);
  g->map_size_ = WH_GATE_WINDOW;
  // The descriptor is the VMM's (read-only to the guest): blank until QEMU
  // starts the VM under KVM, else the gate's magic and version.
  const uint64_t magic = load64(g->map_ + WH_DESC_MAGIC);
  if (magic == WH_GATE_MAGIC) {
    if (uint32_t v = load32(g->map_ + WH_DESC_VERSION); v != WH_GATE_VERSION) {
      *err = path + ": gate version " + std::to_string(v) + ", this server speaks " + std::to_string(WH_GATE_VERSION);
      return nullptr;
    }
  } else if (magic != 0) {
    char hex[32];
    std::snprintf(hex, sizeof hex, "0x%016llx", (unsigned long long)magic);
    *err = path + ": not a gate memory object (it starts with " + hex +
           (load32(g->map_) == WH_REGION_MAGIC ? ", an ivshmem region: that file belongs to --vm" : "") + ")";
    return nullptr;
  }
  g->name_ = vm;
  g->path_ = path;
  g->nchan_ = std::min<uint32_t>(channels, WH_GATE_STATE_CHANS);
  g->records_.resize(g->nchan_);
  for (uint32_t i = 0; i < g->nchan_; i++) g->queues_.push_back(std::make_unique<gate::SessionQueue>());
  g->window_ = std::make_unique<gate::Window>(g->map_, g->map_size_);
  GateVm* self = g.get();
  g->poller_ = std::make_unique<gate::Poller>(
      *g->window_, g->nchan_, [self](uint32_t c) { return c < self->nchan_ ? self->queues_[c]->generation() : 0; },
      [self](uint32_t c, gate::Window::Request&& rq) { self->deliver(c, std::move(rq)); });
  // Served from now on: the page carries the state magic (all channels free).
  g->window_->publish(g->records_);
  stats.gate_served = true;
  stats.gate_publishes++;
  if (channels > g->nchan_)
    spdlog::warn("vm {}: the gate serves channels 0..{} only (the state page has {} records); processes on "
                 "higher channels use ivshmem",
                 vm, g->nchan_ - 1, WH_GATE_STATE_CHANS);
  return g;
}

GateVm::~GateVm() {
  join();
  if (map_) munmap(map_, map_size_);
}

void GateVm::start(const std::atomic<bool>& stopping) {
  thread_ = std::thread([this, &stopping] { run(stopping); });
}

void GateVm::join() {
  if (thread_.joinable()) thread_.join();
}

int GateVm::poll() {
  std::unique_lock lk(mu_, std::try_to_lock);
  if (!lk.owns_lock()) return 0;
  int n = poller_->poll_once();
  if (n) sync_stats();
  return n;
}

void GateVm::run(const std::atomic<bool>& stopping) {
  spdlog::info("vm {}: serving the exitless gate in {} ({} channels)", name_, path_, nchan_);
  uint32_t idle = 0;
  while (!stopping.load(std::memory_order_relaxed)) {
    int n;
    {
      std::lock_guard lk(mu_);
      n = poller_->poll_once();
      if (n) sync_stats();
    }
    if (n) {
      idle = 0;
      continue;
    }
    // Nothing new. Sessions poll the window themselves while they wait, so
    // this thread only needs to be prompt for what they leave: spin a
    // little, yield, then sleep 1 us doubling to 1 ms (an idle VM costs
    // little, and shutdown stays prompt).
    idle++;
    if (idle < 64) {
      for (int i = 0; i < 32; i++) ring::cpu_relax();
    } else if (idle < 128) {
      sched_yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(1u << std::min<uint32_t>((idle - 128) / 8, 10)));
    }
  }
}

void GateVm::withdraw() {
  std::lock_guard lk(mu_);
  window_->withdraw();
}

void GateVm::sync_stats() {
  stats_.gate_binds += poller_->binds() - seen_binds_;
  stats_.gate_refused += poller_->refusals() - seen_refusals_;
  stats_.gate_violations += poller_->violations() - seen_violations_;
  if (poller_->violations() != seen_violations_)
    spdlog::debug("vm {}: gate: {}", name_, poller_->last_error());
  seen_binds_ = poller_->binds();
  seen_refusals_ = poller_->refusals();
  seen_violations_ = poller_->violations();
}

void GateVm::deliver(uint32_t chan, gate::Window::Request&& rq) {
  const uint32_t slot = rq.slot, seq = rq.seq;
  gate::SessionQueue::Push r = queues_[chan]->push(std::move(rq));
  if (r == gate::SessionQueue::Push::Ok) return;
  // The session left after the poller looked (Stale), or the process has
  // more requests outstanding than it has slots (Full).
  stats_.gate_refused++;
  window_->respond(slot, seq, r == gate::SessionQueue::Push::Stale ? -ESTALE : -EBUSY, nullptr, {});
}

void GateVm::begin(uint32_t chan, uint64_t generation, const wh_gate_chan_state& first) {
  if (chan >= nchan_) return;
  publish(chan, first);
  queues_[chan]->open(generation);
}

void GateVm::end(uint32_t chan) {
  if (chan >= nchan_) return;
  std::vector<gate::Window::Request> left = queues_[chan]->close();
  std::lock_guard lk(mu_);
  for (auto& rq : left) {
    if (poller_->bound_to(rq.slot, rq.g.chan, rq.g.generation)) window_->respond(rq.slot, rq.seq, -ESTALE, nullptr, {});
    stats_.gate_refused++;
  }
  records_[chan] = {};
  window_->publish(records_);
  stats_.gate_publishes++;
}

void GateVm::publish(uint32_t chan, const wh_gate_chan_state& rec) {
  if (chan >= nchan_) return;
  std::lock_guard lk(mu_);
  records_[chan] = rec;
  window_->publish(records_);
  stats_.gate_publishes++;
}

void GateVm::respond(const gate::Window::Request& rq, int32_t status, const wh_msg_hdr* hdr,
                     std::span<const uint8_t> payload) {
  std::lock_guard lk(mu_);
  if (poller_->bound_to(rq.slot, rq.g.chan, rq.g.generation)) window_->respond(rq.slot, rq.seq, status, hdr, payload);
}

}  // namespace wh::server
