// The vmfunc transport inside the real drop-in libcudart (guest-lib/cudart's
// Connection): transport choice, fallback to ivshmem, answers through the
// gate and from the published state, and a server that never answers.
//
// No VM: the "ivshmem BAR" is a region file (WORMHOLE_DEVICE=<file>, as on
// a host), served by a minimal ring server thread; /dev/wormhole-gate is a
// plain file (WORMHOLE_GATE=<file>) whose ioctls this executable
// interposes (it defines ioctl(), which libcudart's calls bind to) and
// hands to the fake gate of fake_gate.hpp, served by the real
// wh::server::gate::Poller. Each scenario runs in a forked child, since
// libcudart connects once per process; a child that hangs is killed by
// alarm() and fails the test.
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <mutex>
#include <thread>

#include "fake_gate.hpp"
#include "wormhole/proto/wire.hpp"
#include "wormhole/ring.hpp"
#include "wormhole/server/gate.hpp"

using namespace std::chrono_literals;

namespace {
wh::test::FakeDevice* g_fake = nullptr;
std::string g_gate_path;

bool is_gate_fd(int fd) { return g_fake && wh::test::fd_opens(fd, g_gate_path); }
}  // namespace

// Interposes libc's ioctl for the fake gate's fd only.
extern "C" int ioctl(int fd, unsigned long req, ...) {
  va_list ap;
  va_start(ap, req);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  if (is_gate_fd(fd)) {
    int r = -ENOTTY;
    if (req == WH_GATE_IOC_INFO) r = g_fake->info(static_cast<wh_gate_info*>(arg));
    if (req == WH_GATE_IOC_CALL) r = g_fake->call(static_cast<wh_gate_call*>(arg));
    if (r == 0) return 0;
    errno = -r;
    return -1;
  }
  return int(syscall(SYS_ioctl, fd, req, arg));
}

namespace {

enum class GateMode { None, NoState, Serve, NeverAnswer };

constexpr uint64_t kRingFree = 111, kRingTotal = 222;   // answers over the ring
constexpr uint64_t kGateFree = 333, kGateTotal = 444;   // answers through the gate
constexpr uint64_t kStateFree = 555, kStateTotal = 666; // the published state

// Child side: a region file with a ring server, optionally a gate.
struct World {
  std::string dir, region_path;
  std::unique_ptr<wh::ring::Region> region;
  wh::test::FakeWindow fw;
  std::unique_ptr<wh::server::gate::Window> win;
  std::unique_ptr<wh::server::gate::Poller> poller;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> ring_calls{0}, gate_calls{0};
  std::atomic<uint64_t> generation{0};
  std::thread ring_th, gate_th;
  std::atomic<uint64_t> state_handled{0};  // set by the test, read by the ring thread
  std::mutex publish_mu;                   // the test and the ring thread both publish

  explicit World(GateMode mode) {
    char tmpl[] = "/tmp/wh-vmfunc-conn.XXXXXX";
    dir = mkdtemp(tmpl);
    region_path = dir + "/region";
    wh::ring::RegionConfig rc;
    rc.nchan = 1;
    rc.features = 0;  // as for a VM: no futex across the boundary
    rc.req_size = rc.resp_size = 1u << 16;
    rc.data_size = wh::proto::kPinnedHeapOffset + (1u << 20);
    std::string err;
    region = wh::ring::Region::create_file(region_path, rc, &err);
    if (!region) {
      std::fprintf(stderr, "region: %s\n", err.c_str());
      _exit(90);
    }
    setenv("WORMHOLE_DEVICE", region_path.c_str(), 1);
    // The ring server reads `win`: start it only once the gate side is set up.
    auto start_ring = [this] { ring_th = std::thread([this] { serve_ring(); }); };
    if (mode == GateMode::None) {
      start_ring();
      return;
    }
    g_gate_path = dir + "/wormhole-gate";
    close(open(g_gate_path.c_str(), O_CREAT | O_RDWR, 0600));
    setenv("WORMHOLE_GATE", g_gate_path.c_str(), 1);
    g_fake = new wh::test::FakeDevice(fw, 0);
    if (mode == GateMode::NoState) {  // an old server: no gate poller
      start_ring();
      return;
    }
    win = std::make_unique<wh::server::gate::Window>(fw.base(), WH_GATE_WINDOW);
    publish();
    bool answer = mode == GateMode::Serve;
    poller = std::make_unique<wh::server::gate::Poller>(
        *win, 1, [this](uint32_t c) { return c == 0 ? generation.load() : 0; },
        [this, answer](uint32_t, wh::server::gate::Window::Request&& rq) {
          if (!answer) return;
          gate_calls++;
          wh_msg_hdr h = rq.hdr;
          h.flags = WH_MSG_F_RESPONSE;
          h.status = 0;
          uint64_t r[2] = {kGateFree, kGateTotal};
          win->respond(rq.slot, rq.seq, 0, &h, {reinterpret_cast<uint8_t*>(r), sizeof r});
        });
    gate_th = std::thread([this] {
      while (!stop) {
        if (poller->poll_once() == 0) std::this_thread::sleep_for(20us);
      }
    });
    start_ring();
  }
  void publish() {
    std::lock_guard lk(publish_mu);
    wh_gate_chan_state cs{generation.load() ? generation.load() : 1, state_handled.load(), kStateFree, kStateTotal, 0, 1, 0};
    win->publish({&cs, 1});
  }
  // Minimal ring server: attaches channel 0, answers MemGetInfo.
  void serve_ring() {
    std::string err;
    std::unique_ptr<wh::ring::ServerChannel> ch;
    while (!stop && !ch) {
      wh_chan_hdr* h = region->channel(0);
      // As wormhole-server does: once the claim is complete (the claimer
      // stores its pid last), know its generation and publish the record
      // before the channel turns ACTIVE: the guest binds its gate slot and
      // trusts the record as soon as it sees ACTIVE.
      if (__atomic_load_n(&h->state, __ATOMIC_ACQUIRE) == WH_CHAN_CLAIMED &&
          __atomic_load_n(&h->client_pid, __ATOMIC_ACQUIRE) != 0) {
        generation = __atomic_load_n(&h->generation, __ATOMIC_ACQUIRE);
        if (win) publish();
        ch = wh::ring::ServerChannel::attach(*region, 0, &err);
      }
      else
        std::this_thread::sleep_for(1ms);
    }
    if (!ch) return;
    generation = ch->generation();
    if (win) publish();
    wh::ring::Message m;
    while (!stop) {
      if (ch->recv(m, 20ms) != wh::ring::Status::Ok) continue;
      ring_calls++;
      uint64_t r[2] = {kRingFree, kRingTotal};
      std::array<std::span<const uint8_t>, 1> parts{std::span<const uint8_t>(reinterpret_cast<uint8_t*>(r), sizeof r)};
      ch->reply(m.hdr.call_id, m.hdr.opcode, 0, 0, parts);
    }
  }
  ~World() {
    stop = true;
    if (ring_th.joinable()) ring_th.join();
    if (gate_th.joinable()) gate_th.join();
  }
};

// Runs `body` in a child with a 60 s alarm; returns its exit status.
int in_child(const std::function<int()>& body) {
  std::fflush(nullptr);
  pid_t p = fork();
  if (p == 0) {
    alarm(60);
    _exit(body());
  }
  int st = 0;
  waitpid(p, &st, 0);
  if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
  return WEXITSTATUS(st);
}

#define CHECK(cond)                                                    \
  do {                                                                 \
    if (!(cond)) {                                                     \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      return 1;                                                        \
    }                                                                  \
  } while (0)

}  // namespace

TEST(VmfuncConnection, NoGateDeviceMeansIvshmem) {
  EXPECT_EQ(in_child([] {
              World w(GateMode::None);
              size_t f = 0, t = 0;
              CHECK(cudaMemGetInfo(&f, &t) == cudaSuccess);
              CHECK(f == kRingFree && t == kRingTotal);
              return 0;
            }),
            0);
}

TEST(VmfuncConnection, GateWithoutServerSupportFallsBackToIvshmem) {
  EXPECT_EQ(in_child([] {
              World w(GateMode::NoState);
              size_t f = 0, t = 0;
              CHECK(cudaMemGetInfo(&f, &t) == cudaSuccess);
              CHECK(f == kRingFree && t == kRingTotal);  // over the ring
              CHECK(g_fake->submits == 0);                // never bound
              return 0;
            }),
            0);
}

TEST(VmfuncConnection, ForcedVmfuncWithoutAGateFails) {
  EXPECT_EQ(in_child([] {
              World w(GateMode::None);
              setenv("WORMHOLE_TRANSPORT", "vmfunc", 1);
              setenv("WORMHOLE_GATE", "/nonexistent/wormhole-gate", 1);
              size_t f = 0, t = 0;
              CHECK(cudaMemGetInfo(&f, &t) != cudaSuccess);
              return 0;
            }),
            0);
}

TEST(VmfuncConnection, ForcedIvshmemIgnoresTheGate) {
  EXPECT_EQ(in_child([] {
              World w(GateMode::Serve);
              setenv("WORMHOLE_TRANSPORT", "ivshmem", 1);
              size_t f = 0, t = 0;
              CHECK(cudaMemGetInfo(&f, &t) == cudaSuccess);
              CHECK(f == kRingFree && t == kRingTotal);
              CHECK(g_fake->submits == 0);
              return 0;
            }),
            0);
}

TEST(VmfuncConnection, CallsGoThroughTheGateAndQueriesToTheState) {
  EXPECT_EQ(in_child([] {
              World w(GateMode::Serve);
              size_t f = 0, t = 0;
              // Nothing sent yet and the server published handled=0: the
              // published record answers, no round trip.
              CHECK(cudaMemGetInfo(&f, &t) == cudaSuccess);
              CHECK(f == kStateFree && t == kStateTotal);
              CHECK(w.gate_calls == 0 && w.ring_calls == 0);
              // A stale record (handled != requests sent): round trip
              // through the gate, not the ring.
              w.state_handled = 99;
              w.publish();
              CHECK(cudaMemGetInfo(&f, &t) == cudaSuccess);
              CHECK(f == kGateFree && t == kGateTotal);
              CHECK(w.gate_calls == 1 && w.ring_calls == 0);
              CHECK(g_fake->submits == 2);  // BIND + the call
              return 0;
            }),
            0);
}

TEST(VmfuncConnection, ServerThatNeverAnswersGivesDevicesUnavailableNotAHang) {
  EXPECT_EQ(in_child([] {
              setenv("WORMHOLE_GATE_TIMEOUT_MS", "500", 1);
              World w(GateMode::NeverAnswer);
              w.state_handled = 99;  // no local answer: a real call
              w.publish();
              size_t f = 0, t = 0;
              auto t0 = std::chrono::steady_clock::now();
              CHECK(cudaMemGetInfo(&f, &t) == cudaErrorDevicesUnavailable);
              CHECK(std::chrono::steady_clock::now() - t0 < 10s);
              t0 = std::chrono::steady_clock::now();
              CHECK(cudaMemGetInfo(&f, &t) == cudaErrorDevicesUnavailable);  // no second wait:
              // well under the 500 ms gate timeout (sanitizer builds on a loaded host are slow)
              CHECK(std::chrono::steady_clock::now() - t0 < 400ms);
              return 0;
            }),
            0);
}
