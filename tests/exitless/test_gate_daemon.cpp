// wormhole-server serving the exitless gate (--vm-gate), end to end, with
// the real server process (sim backend) and the real drop-in libcudart.
//
// No VM and no VMFUNC: a region file stands for each VM's ivshmem BAR
// (--vm NAME=FILE, WORMHOLE_DEVICE=FILE), a 1 MiB file for the VMM's gate
// memory object (--vm-gate NAME=FILE, with the descriptor QEMU writes), and
// a plain file for /dev/wormhole-gate (WORMHOLE_GATE) whose ioctls the
// LD_PRELOAD library fake_gate_preload.cpp answers the way the guest module
// and gate.S do (mailbox, then channel slot, over the same file the server
// maps). Forwarded programs are unmodified nvcc binaries.
//
// The test process also acts as hostile processes of the VMs: through the
// gate code (GateCodeDevice) and by writing channel slots directly, as a
// guest that redirects the gate's stores can.
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "fake_gate.hpp"
#include "test_process.hpp"
#include "wormhole/proto/wire.hpp"
#include "wormhole/ring.hpp"

using namespace std::chrono_literals;
using namespace wh::proto;
using wh::test::Process;
using wh::test::Server;
namespace ring = wh::ring;

namespace {

constexpr uint64_t kSimMiB = 256;
constexpr int32_t kNoAnswer = INT32_MIN;

std::string prog(const char* name) { return std::string(WH_PROGRAM_DIR) + "/" + name; }

bool wait_until(const std::function<bool()>& f, std::chrono::milliseconds limit) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (f()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return f();
}

// A file that stands for the VMM's gate memory object, mapped here too.
struct GateMem {
  std::string path;
  uint8_t* base = nullptr;
  bool create(const std::string& p, size_t size, bool descriptor) {
    path = p;
    int fd = open(p.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || ftruncate(fd, off_t(size)) != 0) return false;
    void* m = mmap(nullptr, WH_GATE_WINDOW, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) return false;
    base = static_cast<uint8_t*>(m);
    if (descriptor) wh::test::write_gate_descriptor(base);
    return true;
  }
  bool served() const {  // the server published its state page
    return wh::test::ld32(base + WH_GATE_STATE_OFF + offsetof(wh_gate_state, magic)) == WH_GATE_STATE_MAGIC;
  }
  // The published record of `chan` (a consistent copy, else nullopt).
  std::optional<wh_gate_chan_state> record(uint32_t chan) const {
    uint8_t page[WH_SLOT_MAX];
    std::memcpy(page, base + WH_GATE_STATE_OFF, sizeof page);
    wh_gate_chan_state r;
    if (!wh::vmfunc::read_state(page, sizeof page, chan, &r)) return std::nullopt;
    return r;
  }
  ~GateMem() {
    if (base) munmap(base, WH_GATE_WINDOW);
  }
};

struct Answer {
  int32_t status = kNoAnswer;  // wh_gate_resp.status (kNoAnswer: none in time)
  wh_msg_hdr hdr{};
  std::vector<uint8_t> payload;
};

// A process of a VM that talks to the gate itself. It holds its slot's lock
// file, so forwarded programs (fake_gate_preload) never pick the same slot.
class GateActor {
 public:
  GateActor(const GateMem& mem, const std::string& dev_path, uint32_t slot)
      : base_(mem.base), slot_(slot), dev_(mem.base, slot) {
    lock_ = open((dev_path + ".slot" + std::to_string(slot)).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    EXPECT_TRUE(lock_ >= 0 && wait_until([&] { return flock(lock_, LOCK_EX | LOCK_NB) == 0; }, 20s))
        << "slot " << slot << " stays taken";
  }
  ~GateActor() {
    if (lock_ >= 0) close(lock_);
  }

  // Through the gate code: SUBMIT (retrying -16), then POLL for the answer.
  Answer exchange(const void* req, uint32_t len) {
    wh_gate_call c{};
    uint32_t seq = 0;
    bool submitted = wait_until(
        [&] {
          c = {};
          c.op = WH_GATE_OP_SUBMIT;
          c.len = len;
          c.buf = reinterpret_cast<uintptr_t>(req);
          if (dev_.call(&c) != 0 || c.result == WH_GATE_EBUSY) return false;
          seq = uint32_t(c.result);
          return true;
        },
        20s);
    if (!submitted || c.result < 0) return {};
    return await(seq);
  }
  // Straight into the channel slot: a length word, bytes, REQ_SEQ + 1.
  Answer scribble(uint32_t len_word, const void* bytes, uint32_t n) {
    uint8_t* ch = chan();
    wh::test::st32(ch + WH_SLOT_REQ, len_word);
    std::memcpy(ch + WH_SLOT_REQ + 8, bytes, std::min<uint32_t>(n, WH_SLOT_MAX));
    uint32_t seq = wh::test::ld32(ch + WH_CHAN_REQ_SEQ) + 1;
    wh::test::st32(ch + WH_CHAN_REQ_SEQ, seq);
    return await(seq);
  }

  static wh_gate_req header(uint16_t kind, uint32_t chan, uint64_t gen) {
    wh_gate_req g{};
    g.magic = WH_GATE_REQ_MAGIC;
    g.kind = kind;
    g.version = WH_GATE_PROTO_VERSION;
    g.chan = chan;
    g.generation = gen;
    return g;
  }
  int32_t bind(uint32_t chan, uint64_t gen) {
    wh_gate_req g = header(WH_GATE_KIND_BIND, chan, gen);
    return exchange(&g, sizeof g).status;
  }
  // A CALL: the ring protocol's header + payload behind the gate header.
  static std::vector<uint8_t> call_bytes(uint32_t chan, uint64_t gen, uint16_t op, std::span<const uint8_t> payload,
                                         uint64_t barrier = 0, uint16_t version = kVersion, uint32_t flags = 0) {
    wh_gate_req g = header(WH_GATE_KIND_CALL, chan, gen);
    g.ring_barrier = barrier;
    wh_msg_hdr h{};
    h.magic = WH_MSG_MAGIC;
    h.version = version;
    h.opcode = op;
    h.flags = flags;
    h.len = uint32_t(payload.size());
    h.call_id = 0x7700 + op;
    std::memcpy(g.hdr, &h, sizeof h);
    std::vector<uint8_t> out(sizeof g + payload.size());
    std::memcpy(out.data(), &g, sizeof g);
    if (!payload.empty()) std::memcpy(out.data() + sizeof g, payload.data(), payload.size());
    return out;
  }
  Answer call(uint32_t chan, uint64_t gen, uint16_t op, std::span<const uint8_t> payload = {}, uint64_t barrier = 0,
              uint16_t version = kVersion) {
    auto b = call_bytes(chan, gen, op, payload, barrier, version);
    return exchange(b.data(), uint32_t(b.size()));
  }

 private:
  uint8_t* chan() const { return base_ + WH_GATE_CHAN_OFF + slot_ * 0x1000u; }
  // Waits for the answer to `seq` in the channel slot (what POLL copies).
  Answer await(uint32_t seq) {
    uint8_t* ch = chan();
    Answer a;
    if (!wait_until([&] { return wh::test::ld32(ch + WH_CHAN_RESP_SEQ) == seq; }, 20s)) return a;
    uint32_t n = std::min<uint32_t>(wh::test::ld32(ch + WH_SLOT_RESP), WH_SLOT_MAX);
    std::vector<uint8_t> r(ch + WH_SLOT_RESP + 8, ch + WH_SLOT_RESP + 8 + n);
    wh_gate_resp g{};
    if (n < sizeof g) return a;
    std::memcpy(&g, r.data(), sizeof g);
    if (g.magic != WH_GATE_RESP_MAGIC || g.req_seq != seq) return a;
    a.status = g.status;
    std::memcpy(&a.hdr, g.hdr, sizeof a.hdr);
    if (a.hdr.len <= n - sizeof g) a.payload.assign(r.begin() + sizeof g, r.begin() + sizeof g + a.hdr.len);
    return a;
  }

  uint8_t* base_;
  uint32_t slot_;
  wh::test::GateCodeDevice dev_;
  int lock_ = -1;
};

// Figures from the server's statistics (printed at exit, or GetStats).
uint64_t op_calls(const std::string& stats, const char* op) {
  std::smatch m;
  std::regex re(std::string("\n  ") + op + " +([0-9]+) calls");
  return std::regex_search(stats, m, re) ? std::stoull(m[1]) : 0;
}
struct GateFigures {
  bool found = false;
  uint64_t calls = 0, publications = 0, binds = 0, refused = 0, violations = 0;
};
GateFigures gate_figures(const std::string& stats) {
  std::smatch m;
  std::regex re("gate: ([0-9]+) calls served through the gate, ([0-9]+) state publications [^,]*, ([0-9]+) binds, "
                "([0-9]+) refused, ([0-9]+) violations");
  GateFigures f;
  if (!std::regex_search(stats, m, re)) return f;
  f.found = true;
  f.calls = std::stoull(m[1]);
  f.publications = std::stoull(m[2]);
  f.binds = std::stoull(m[3]);
  f.refused = std::stoull(m[4]);
  f.violations = std::stoull(m[5]);
  return f;
}
// "wh-fake-gate: slot S submits N busy B polls P queries Q"
uint64_t fake_gate_count(const std::string& out, const char* what) {
  std::smatch m;
  std::regex re(std::string("wh-fake-gate: slot [0-9]+ .*") + what + " ([0-9]+)");
  return std::regex_search(out, m, re) ? std::stoull(m[1]) : 0;
}

// The client's own account at exit (WORMHOLE_VERBOSE): "wormhole: vmfunc:
// N synchronous calls, G through the gate, R on the ring (V with a
// variable-length answer; fallbacks: L larger than a slot, B while the slot
// was busy)".
struct ClientGateUse {
  bool found = false;
  uint64_t calls = 0, gate = 0, ring = 0, variable = 0, too_large = 0, busy = 0;
  uint64_t fallbacks() const { return too_large + busy; }
};
ClientGateUse client_gate_use(const std::string& out) {
  std::smatch m;
  std::regex re("wormhole: vmfunc: ([0-9]+) synchronous calls, ([0-9]+) through the gate, ([0-9]+) on the ring "
                "\\(([0-9]+) with a variable-length answer; fallbacks: ([0-9]+) larger than a slot, ([0-9]+) while "
                "the slot was busy\\)");
  ClientGateUse u;
  if (!std::regex_search(out, m, re)) return u;
  u.found = true;
  u.calls = std::stoull(m[1]);
  u.gate = std::stoull(m[2]);
  u.ring = std::stoull(m[3]);
  u.variable = std::stoull(m[4]);
  u.too_large = std::stoull(m[5]);
  u.busy = std::stoull(m[6]);
  return u;
}

struct Vm {
  std::string name, region_path;
  GateMem gate;
  std::unique_ptr<ring::Region> region;  // the test's own mapping of the "BAR"
};

// A server with two VMs: g (4 channels) and h (2 channels), each with a gate.
class GateDaemon : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/wh-gate-daemon.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    gate_dev_ = dir_ + "/wormhole-gate";
    close(open(gate_dev_.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600));
    for (Vm* v : {&g_, &h_}) {
      v->name = v == &g_ ? "g" : "h";
      v->region_path = dir_ + "/" + v->name + ".region";
      ASSERT_TRUE(v->gate.create(dir_ + "/" + v->name + ".gate", 1 << 20, true));
    }
    ASSERT_TRUE(server.start({"--vm", "g=" + g_.region_path + ":4", "--vm-gate", "g=" + g_.gate.path, "--vm",
                              "h=" + h_.region_path + ":2", "--vm-gate", "h=" + h_.gate.path, "--pinned-mb", "96",
                              "--sim-memory-mb", std::to_string(kSimMiB), "--heartbeat-timeout-ms", "400"}))
        << server.log();
    for (Vm* v : {&g_, &h_}) {
      std::string err;
      ASSERT_TRUE(wait_until([&] { return (v->region = ring::Region::attach_file(v->region_path, &err)) != nullptr; },
                             20s))
          << err << "\n" << server.log();
      ASSERT_TRUE(wait_until([&] { return v->gate.served(); }, 20s)) << server.log();
    }
  }
  void TearDown() override {
    g_.region.reset();
    h_.region.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // The environment of a forwarded program in VM g with the gate.
  std::vector<std::string> env(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> e;
    std::string preload = WH_FAKE_GATE_LIB;
    for (auto& s : server.client_env()) {
      if (s.rfind("LD_PRELOAD=", 0) == 0)
        preload = s.substr(11) + " " + preload;  // a sanitizer runtime stays first
      else
        e.push_back(s);
    }
    e.push_back("LD_PRELOAD=" + preload);
    e.push_back("WORMHOLE_DEVICE=" + g_.region_path);
    e.push_back("WORMHOLE_GATE=" + gate_dev_);
    e.push_back("WH_FAKE_GATE_MEM=" + g_.gate.path);
    e.push_back("WORMHOLE_VERBOSE=1");
    e.insert(e.end(), extra.begin(), extra.end());
    return e;
  }
  Process::Result run(const std::vector<std::string>& argv, std::chrono::seconds limit = 120s) {
    return Process::run(argv, env(), limit);
  }
  static void expect_gate_pass(const Process::Result& r, const std::string& what) {
    EXPECT_EQ(r.status, 0) << what << ":\n" << r.output;
    EXPECT_NE(r.output.find("PASS"), std::string::npos) << what << ":\n" << r.output;
    EXPECT_NE(r.output.find("connected over vmfunc"), std::string::npos) << what << ":\n" << r.output;
  }
  uint64_t chan_generation(Vm& v, uint32_t c) { return __atomic_load_n(&v.region->channel(c)->generation, __ATOMIC_ACQUIRE); }
  uint32_t chan_state(Vm& v, uint32_t c) { return __atomic_load_n(&v.region->channel(c)->state, __ATOMIC_ACQUIRE); }
  // Stops the server and returns what it printed (statistics included).
  std::string stop_server() {
    EXPECT_EQ(server.stop(), 0);
    return server.log();
  }

  std::string dir_, gate_dev_;
  Vm g_, h_;
  Server server;
};

std::span<const uint8_t> bytes(const auto& v) { return {reinterpret_cast<const uint8_t*>(&v), sizeof v}; }

}  // namespace

// Calls go through the gate, a launch posted on the ring is handled before
// the synchronous copy that follows it through the gate (20 rounds, each
// checking the kernel's result), and cudaMemGetInfo / cudaStreamQuery(0)
// are answered from the published state without reaching the server.
TEST_F(GateDaemon, CallsAreServedThroughTheGateInProgramOrder) {
  auto r = run({WH_GATE_CLIENT, "run", "20"});
  expect_gate_pass(r, "gate_client");
  // The values the published record gave: the sim device's size, and the
  // 1 MiB + 16 KiB this process allocated.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex("meminfo0 free=([0-9]+) total=([0-9]+)"))) << r.output;
  const uint64_t f0 = std::stoull(m[1]), t0 = std::stoull(m[2]);
  EXPECT_EQ(t0, kSimMiB << 20);
  EXPECT_EQ(f0, kSimMiB << 20);
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex("meminfo1 free=([0-9]+) total=([0-9]+)"))) << r.output;
  EXPECT_EQ(std::stoull(m[2]), kSimMiB << 20);
  EXPECT_EQ(std::stoull(m[1]), f0 - (1u << 20) - 4096 * sizeof(int));
  EXPECT_GE(fake_gate_count(r.output, "submits"), 20u + 1u) << r.output;  // BIND + at least the 20 copies
  EXPECT_GE(fake_gate_count(r.output, "queries"), 5u) << r.output;        // 3 MemGetInfo, 2 StreamQuery
  std::string log = stop_server();
  if (getenv("WH_TEST_SHOW"))  // the program's and the server's output, statistics included
    std::fprintf(stderr, "%s\n----\n%s\n", r.output.c_str(), log.c_str());
  GateFigures f = gate_figures(log);
  ASSERT_TRUE(f.found) << log;
  EXPECT_GE(f.calls, 20u) << log;
  // The server served through the gate exactly the calls the client sent
  // there; the only synchronous call on the ring is the kernel lookup (an
  // answer of variable length): no fallback.
  ClientGateUse u = client_gate_use(r.output);
  ASSERT_TRUE(u.found) << r.output;
  EXPECT_EQ(u.fallbacks(), 0u) << r.output;
  EXPECT_EQ(u.variable, 1u) << r.output;
  EXPECT_EQ(u.gate + u.ring, u.calls) << r.output;
  EXPECT_EQ(f.calls, u.gate) << "server served " << f.calls << " calls through the gate, client sent " << u.gate
                             << "\n" << r.output << "\n" << log;
  EXPECT_EQ(op_calls(log, "ModuleGetKernel"), u.variable) << log;
  EXPECT_EQ(f.binds, 1u) << log;
  EXPECT_EQ(f.violations, 0u) << log;
  EXPECT_EQ(f.refused, 0u) << log;
  // Answered locally every time: the server never saw them.
  EXPECT_EQ(op_calls(log, "MemGetInfo"), 0u) << log;
  EXPECT_EQ(op_calls(log, "StreamQuery"), 0u) << log;
  EXPECT_EQ(op_calls(log, "Launch"), 21u) << log;
  EXPECT_GE(op_calls(log, "MemcpyDtoH"), 21u) << log;
}

// Existing forwarded programs (async errors, streams and events, several
// threads sharing one slot, mapped memory) pass with the gate in use.
TEST_F(GateDaemon, ForwardedProgramsPassOverTheGate) {
  const std::vector<std::vector<std::string>> progs = {
      {prog("vector_add")},           {prog("matmul")},           {prog("streams_events")},
      {prog("async_errors"), "config"}, {prog("async_errors"), "oob"}, {prog("async_errors"), "assert"},
      {prog("multithread")},          {prog("memset_2d")},        {prog("mapped_pinned")},
      {prog("symbols")}};
  uint64_t through_gate = 0;
  for (auto& p : progs) {
    std::string what = p[0] + (p.size() > 1 ? " " + p[1] : "");
    auto r = run(p);
    expect_gate_pass(r, what);
    ClientGateUse u = client_gate_use(r.output);
    EXPECT_TRUE(u.found) << what << ":\n" << r.output;
    EXPECT_EQ(u.gate + u.ring, u.calls) << what << ":\n" << r.output;
    through_gate += u.gate;
  }
  std::string log = stop_server();
  GateFigures f = gate_figures(log);
  ASSERT_TRUE(f.found) << log;
  EXPECT_GE(f.calls, progs.size()) << log;
  // What the clients sent through the gate is what the server served there.
  EXPECT_EQ(f.calls, through_gate) << log;
  EXPECT_EQ(f.binds, progs.size()) << log;
  EXPECT_EQ(f.violations, 0u) << log;
}

// A process killed while bound: once the server reclaimed its channel, the
// old (channel, generation) is refused on the slot it used, whether
// replayed without a BIND, with one, or after a new process claimed the
// channel; the new owner binds with its own generation and is served.
TEST_F(GateDaemon, DeadClientsBindingIsStale) {
  Process p = Process::spawn({WH_GATE_CLIENT, "hold", "3"}, env({"WH_FAKE_GATE_VERBOSE=1"}));
  ASSERT_TRUE(p.wait_for_output("HOLDING", 120s)) << p.output();
  std::smatch m;
  std::string out = p.output();
  ASSERT_TRUE(std::regex_search(out, m, std::regex("wh-fake-gate: pid [0-9]+ slot ([0-9]+)"))) << out;
  const uint32_t slot = uint32_t(std::stoul(m[1]));
  ASSERT_TRUE(std::regex_search(out, m, std::regex("BIND chan ([0-9]+) generation ([0-9]+)"))) << out;
  const uint32_t chan = uint32_t(std::stoul(m[1]));
  const uint64_t gen = std::stoull(m[2]);
  ASSERT_EQ(chan_generation(g_, chan), gen);
  ASSERT_TRUE(g_.gate.record(chan).has_value());
  EXPECT_EQ(g_.gate.record(chan)->generation, gen);

  p.kill(SIGKILL);
  p.wait(10s);
  // The server notices the silent heartbeat (400 ms) and reclaims.
  ASSERT_TRUE(wait_until([&] { return chan_generation(g_, chan) != gen && chan_state(g_, chan) == WH_CHAN_FREE; }, 30s))
      << server.log();
  auto rec = g_.gate.record(chan);
  ASSERT_TRUE(!rec || rec->generation == 0) << "record of a reclaimed channel still published";

  GateActor next(g_.gate, gate_dev_, slot);  // the next process that opens the gate gets the slot
  MemGetInfoReq q{};
  Answer a = next.call(chan, gen, uint16_t(Op::MemGetInfo), fixed_bytes(q));
  EXPECT_EQ(a.status, -ESTALE) << "the dead process's binding served a call";
  EXPECT_EQ(next.bind(chan, gen), -ESTALE);

  // A new process claims the channel: the old generation stays refused.
  std::string err;
  auto claim = ring::ClientChannel::claim(*g_.region, int(chan), &err);
  ASSERT_TRUE(claim) << err;
  ASSERT_EQ(claim->wait_attached(20s), ring::Status::Ok);
  const uint64_t gen2 = claim->generation();
  ASSERT_NE(gen2, gen);
  EXPECT_EQ(next.bind(chan, gen), -ESTALE);
  a = next.call(chan, gen, uint16_t(Op::MemGetInfo), fixed_bytes(q));
  EXPECT_EQ(a.status, -ESTALE);
  ASSERT_EQ(next.bind(chan, gen2), 0);
  a = next.call(chan, gen2, uint16_t(Op::MemGetInfo), fixed_bytes(q));
  ASSERT_EQ(a.status, 0);
  EXPECT_EQ(a.hdr.status, 0);
  EXPECT_TRUE(a.hdr.flags & WH_MSG_F_RESPONSE);
  ASSERT_EQ(a.payload.size(), sizeof(MemGetInfoResp));
  MemGetInfoResp rs;
  std::memcpy(&rs, a.payload.data(), sizeof rs);
  EXPECT_EQ(rs.total, kSimMiB << 20);
  a = next.call(chan, gen, uint16_t(Op::MemGetInfo), fixed_bytes(q));  // replay once more, bound anew
  EXPECT_EQ(a.status, -ESTALE);
  auto now = g_.gate.record(chan);
  ASSERT_TRUE(now.has_value());
  EXPECT_EQ(now->generation, gen2);
  EXPECT_EQ(now->handled, 1u);
}

// Malformed and hostile slots get -EINVAL / -ESTALE / a bad-request status,
// count as violations, and neither crash the server nor disturb a
// well-behaved program that uses the gate of the same VM all along.
TEST_F(GateDaemon, HostileSlotsAreRefusedWhileOthersAreServed) {
  std::atomic<bool> stop{false};
  std::atomic<int> runs{0}, failures{0};
  std::mutex mu;
  std::string last_failure;
  std::thread neighbour([&] {
    while (!stop) {
      auto r = run({WH_GATE_CLIENT, "run", "5"});
      runs++;
      if (r.status != 0 || r.output.find("PASS gate_client") == std::string::npos ||
          r.output.find("connected over vmfunc") == std::string::npos) {
        failures++;
        std::lock_guard lk(mu);
        last_failure = r.output;
      }
    }
  });

  // Our own channel of VM g, claimed as a process does, and slot 7.
  std::string err;
  auto own = ring::ClientChannel::claim(*g_.region, -1, &err);
  ASSERT_TRUE(own) << err;
  ASSERT_EQ(own->wait_attached(20s), ring::Status::Ok);
  const uint32_t chan = own->index();
  const uint64_t gen = own->generation();
  GateActor bad(g_.gate, gate_dev_, 7);
  ASSERT_EQ(bad.bind(chan, gen), 0);
  MemGetInfoReq q{};
  ASSERT_EQ(bad.call(chan, gen, uint16_t(Op::MemGetInfo), fixed_bytes(q)).status, 0);

  // Malformed slots, written straight into the channel slot.
  int malformed = 0;
  auto expect_einval = [&](uint32_t len_word, const std::vector<uint8_t>& b, const char* what) {
    Answer a = bad.scribble(len_word, b.data(), uint32_t(b.size()));
    EXPECT_EQ(a.status, -EINVAL) << what;
    malformed++;
  };
  std::vector<uint8_t> good = GateActor::call_bytes(chan, gen, uint16_t(Op::MemGetInfo), fixed_bytes(q));
  expect_einval(0xffffffffu, good, "length far beyond the slot");
  expect_einval(WH_SLOT_MAX + 1, good, "length one beyond the slot");
  expect_einval(12, good, "shorter than the gate header");
  auto mutate = [&](auto f) {
    std::vector<uint8_t> b = good;
    wh_gate_req g;
    wh_msg_hdr h;
    std::memcpy(&g, b.data(), sizeof g);
    std::memcpy(&h, g.hdr, sizeof h);
    f(g, h);
    std::memcpy(g.hdr, &h, sizeof h);
    std::memcpy(b.data(), &g, sizeof g);
    return b;
  };
  auto b = mutate([](wh_gate_req& g, wh_msg_hdr&) { g.magic ^= 1; });
  expect_einval(uint32_t(b.size()), b, "bad magic");
  b = mutate([](wh_gate_req& g, wh_msg_hdr&) { g.version = 9; });
  expect_einval(uint32_t(b.size()), b, "bad gate protocol version");
  b = mutate([](wh_gate_req& g, wh_msg_hdr&) { g.kind = 77; });
  expect_einval(uint32_t(b.size()), b, "unknown kind");
  b = mutate([](wh_gate_req&, wh_msg_hdr& h) { h.len += 100; });
  expect_einval(uint32_t(b.size()), b, "payload length disagrees with the slot length");
  b = mutate([](wh_gate_req&, wh_msg_hdr& h) { h.flags = WH_MSG_F_POSTED; });
  expect_einval(uint32_t(b.size()), b, "posted request through the gate");
  b = mutate([](wh_gate_req&, wh_msg_hdr& h) { h.flags = WH_MSG_F_RESPONSE; });
  expect_einval(uint32_t(b.size()), b, "a response as a request");
  b = mutate([](wh_gate_req&, wh_msg_hdr& h) { h.magic = 0; });
  expect_einval(uint32_t(b.size()), b, "bad message magic");
  {
    wh_gate_req bind = GateActor::header(WH_GATE_KIND_BIND, chan, gen);
    std::vector<uint8_t> bb(sizeof bind + 8);
    std::memcpy(bb.data(), &bind, sizeof bind);
    expect_einval(uint32_t(bb.size()), bb, "BIND with trailing bytes");
  }

  // Bindings: forged generation, a channel we are not bound to, a channel
  // the VM does not have.
  EXPECT_EQ(bad.bind(chan, gen), 0);
  EXPECT_EQ(bad.call(chan, gen + 1, uint16_t(Op::MemGetInfo), fixed_bytes(q)).status, -ESTALE) << "forged generation";
  const uint32_t other = (chan + 1) % 4;
  EXPECT_EQ(bad.call(other, chan_generation(g_, other), uint16_t(Op::MemGetInfo), fixed_bytes(q)).status, -ESTALE)
      << "another channel through our binding";
  EXPECT_EQ(bad.bind(other, chan_generation(g_, other) + 12345), -ESTALE) << "forged generation on BIND";
  EXPECT_EQ(bad.bind(99, gen), -EINVAL) << "channel the VM does not have";
  EXPECT_EQ(bad.call(chan, gen, uint16_t(Op::MemGetInfo), fixed_bytes(q)).status, -ESTALE)
      << "a refused BIND leaves the slot unbound";
  ASSERT_EQ(bad.bind(chan, gen), 0);

  // Requests that reach the session: answered with an error status.
  Answer a = bad.call(chan, gen, uint16_t(Op::MemGetInfo), fixed_bytes(q), 0, 7);
  EXPECT_EQ(a.status, 0);
  EXPECT_EQ(a.hdr.status, kBadRequest) << "wrong protocol version";
  MemcpyDtoHReq cp{own->data().size() - 8, 0x1000, 4096, 0, 0};  // past the end of our data area
  a = bad.call(chan, gen, uint16_t(Op::MemcpyDtoH), fixed_bytes(cp));
  EXPECT_EQ(a.status, 0);
  EXPECT_EQ(a.hdr.status, int32_t(cudaErrorInvalidValue)) << "data-area offset out of range";
  a = bad.call(chan, gen, 9999, {});
  EXPECT_EQ(a.status, 0);
  EXPECT_NE(a.hdr.status, 0) << "unknown opcode";
  // A barrier beyond anything the ring ever held is served once the ring
  // is found drained: no stall, no spinning.
  a = bad.call(chan, gen, uint16_t(Op::MemGetInfo), fixed_bytes(q), uint64_t(1) << 62);
  EXPECT_EQ(a.status, 0) << "barrier past the ring";
  EXPECT_EQ(a.hdr.status, 0);

  // VM h's gate does not reach VM g's channels.
  GateActor foreign(h_.gate, gate_dev_ + ".h", 0);
  EXPECT_EQ(foreign.bind(chan, gen), -ESTALE) << "VM g's channel through VM h's gate";
  EXPECT_EQ(foreign.call(chan, gen, uint16_t(Op::MemGetInfo), fixed_bytes(q)).status, -ESTALE);
  EXPECT_EQ(foreign.bind(4, 1), -EINVAL) << "VM h has 2 channels";

  // Still served, and the figures say what happened.
  a = bad.call(chan, gen, uint16_t(Op::MemGetInfo), fixed_bytes(q));
  EXPECT_EQ(a.status, 0);
  EXPECT_EQ(a.hdr.status, 0);
  ring::Message reply;
  ASSERT_EQ(own->call(uint16_t(Op::GetStats), 0, {}, reply, kVersion, 20s), ring::Status::Ok);
  std::string stats(reply.payload.begin(), reply.payload.end());
  GateFigures f = gate_figures(stats);
  ASSERT_TRUE(f.found) << stats;
  EXPECT_GE(f.violations, uint64_t(malformed)) << stats;
  EXPECT_GE(f.refused, 6u) << stats;

  // Let the neighbour finish at least one full run beside all of this.
  ASSERT_TRUE(wait_until([&] { return runs.load() >= 1; }, 120s));
  stop = true;
  neighbour.join();
  EXPECT_EQ(failures.load(), 0) << "the well-behaved program failed:\n" << last_failure << "\nserver:\n" << server.log();
  EXPECT_TRUE(server.alive()) << server.log();
}

// --vm-gate errors are reported at start with the reason, and the TOML
// config accepts vm_gate like vm. A blank descriptor (VMM not started, or
// QEMU without KVM) is served; at exit the state page is withdrawn.
TEST(GateDaemonOptions, ErrorsAreClearAndTomlWorks) {
  char tmpl[] = "/tmp/wh-gate-opts.XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string dir = tmpl;
  std::string sock = dir + "/s.sock", region = dir + "/g.region";
  auto server = [&](std::vector<std::string> extra) {
    std::vector<std::string> argv{WH_SERVER_BIN, "--backend", "sim", "--socket", sock, "--pinned-mb", "8"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return Process::run(argv, {}, 60s);
  };
  auto expect_refused = [&](const std::vector<std::string>& extra, const std::string& needle) {
    auto r = server(extra);
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_NE(r.output.find(needle), std::string::npos) << "wanted '" << needle << "' in:\n" << r.output;
  };
  GateMem good, blank, small, junk;
  ASSERT_TRUE(good.create(dir + "/good.gate", 1 << 20, true));
  ASSERT_TRUE(blank.create(dir + "/blank.gate", 1 << 20, false));
  ASSERT_TRUE(junk.create(dir + "/junk.gate", 1 << 20, false));
  std::memset(junk.base, 0x5a, 64);
  {
    int fd = open((dir + "/small.gate").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    ASSERT_EQ(ftruncate(fd, 4096), 0);
    close(fd);
  }
  expect_refused({"--vm", "g=" + region, "--vm-gate", "x=" + good.path}, "no VM named 'x'");
  expect_refused({"--vm", "g=" + region, "--vm-gate", "g"}, "--vm-gate wants NAME=PATH");
  expect_refused({"--vm", "g=" + region, "--vm-gate", "g=" + good.path, "--vm-gate", "g=" + blank.path},
                 "has two gates");
  expect_refused({"--vm", "g=" + region, "--vm-gate", "g=" + dir + "/missing.gate"}, "No such file");
  expect_refused({"--vm", "g=" + region, "--vm-gate", "g=" + dir + "/small.gate"}, "smaller than the gate window");
  expect_refused({"--vm", "g=" + region, "--vm-gate", "g=" + junk.path}, "not a gate memory object");
  expect_refused({"--vm", "g=" + region, "--vm-gate", "g=" + dir}, "not a regular file");
  expect_refused({"--vm", "g=" + region, "--vm", "h=" + dir + "/h.region", "--vm-gate", "g=" + good.path,
                  "--vm-gate", "h=" + good.path},
                 "is also the gate of VM");
  {
    int fd = open(region.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);  // as left by an earlier run
    ASSERT_EQ(ftruncate(fd, 1 << 20), 0);
    close(fd);
    expect_refused({"--vm", "g=" + region, "--vm-gate", "g=" + region}, "is the ivshmem region of VM 'g'");
  }

  // The TOML file, blank descriptor: served, then withdrawn at exit.
  std::string conf = dir + "/server.toml";
  {
    FILE* f = std::fopen(conf.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fprintf(f, "vm = [\"t=%s/t.region:2\"]\nvm_gate = [\"t=%s\"]\n", dir.c_str(), blank.path.c_str());
    std::fclose(f);
  }
  std::vector<std::string> argv{WH_SERVER_BIN, "--backend", "sim", "--socket", sock, "--pinned-mb", "8", "--config",
                                conf};
  Process p = Process::spawn(argv, {});
  EXPECT_TRUE(wait_until([&] { return blank.served(); }, 30s)) << p.output();
  EXPECT_TRUE(wait_until([&] { return p.output().find("serving the exitless gate") != std::string::npos; }, 30s))
      << p.output();
  p.kill(SIGTERM);
  EXPECT_EQ(p.wait(30s), 0) << p.output();
  EXPECT_FALSE(blank.served()) << "state page still claims a server after exit";
  EXPECT_NE(p.output().find("gate: 0 calls served through the gate"), std::string::npos) << p.output();
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}
