// guest-lib's vmfunc transport (wh::vmfunc) against a user-space fake of the
// gate (fake_gate.hpp) and the real server end (wh::server::gate).
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "fake_gate.hpp"
#include "wormhole/server/gate.hpp"
#include "wormhole/vmfunc.hpp"

using namespace std::chrono_literals;
using wh::ring::Status;
using wh::server::gate::Poller;
using wh::server::gate::Window;
using wh::test::FakeDevice;
using wh::test::FakeWindow;
using wh::vmfunc::Choice;
using wh::vmfunc::Link;
using wh::vmfunc::Transport;

namespace {

constexpr uint32_t kChan = 3;
constexpr uint64_t kGen = 7;

// A server for the tests: publishes state, runs the Poller, answers CALLs.
struct FakeServer {
  FakeWindow& fw;
  Window w{fw.base(), WH_GATE_WINDOW};
  std::atomic<bool> stop{false}, answer{true}, ack_late{false};
  std::atomic<int> delay_ms{0};
  std::atomic<uint64_t> calls{0}, last_barrier{0};
  std::atomic<uint64_t> heartbeat{1};
  std::thread th;
  std::unique_ptr<Poller> poller;

  explicit FakeServer(FakeWindow& f, bool publish = true) : fw(f) {
    if (publish) publish_state(0);
  }
  ~FakeServer() {
    stop = true;
    if (th.joinable()) th.join();
  }
  void publish_state(uint64_t handled, uint32_t idle = 1, int32_t pending = 0) {
    wh_gate_chan_state cs[kChan + 1]{};
    cs[kChan] = {kGen, handled, 1000, 4000, pending, idle, 0};
    w.publish(cs);
  }
  void run() {
    poller = std::make_unique<Poller>(
        w, 8, [](uint32_t c) { return c == kChan || c == kChan + 1 ? kGen : 0; },
        [this](uint32_t chan, Window::Request&& rq) {
          calls++;
          last_barrier = rq.g.ring_barrier;
          if (!answer) return;
          if (delay_ms) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms.load()));
          wh_msg_hdr h = rq.hdr;
          h.flags = WH_MSG_F_RESPONSE;
          h.status = int32_t(rq.hdr.opcode) + 100;  // recognisable
          std::vector<uint8_t> p(rq.payload.rbegin(), rq.payload.rend());  // reversed echo
          w.respond(rq.slot, rq.seq, 0, &h, p);
          publish_state(calls);
          if (ack_late) std::this_thread::sleep_for(20ms);  // the -16 window
          (void)chan;
        });
    th = std::thread([this] {
      while (!stop) {
        heartbeat++;
        if (poller->poll_once() == 0) std::this_thread::sleep_for(50us);
      }
    });
  }
};

std::unique_ptr<FakeDevice> dev(FakeWindow& w, uint32_t slot = 0) { return std::make_unique<FakeDevice>(w, slot); }

wh::vmfunc::Options opts(const std::atomic<uint64_t>* hb = nullptr, std::chrono::milliseconds timeout = 0ms) {
  wh::vmfunc::Options o;
  o.timeout = timeout;
  o.bind_timeout = 1000ms;
  o.server_heartbeat = reinterpret_cast<const uint64_t*>(hb);
  o.hb_timeout_ms = 300;
  return o;
}

Status call(Link& l, const std::vector<uint8_t>& payload, wh::ring::Message& m, uint64_t barrier = 0) {
  std::array<std::span<const uint8_t>, 1> parts{std::span<const uint8_t>(payload)};
  return l.call(42, 0, 1, parts, barrier, m);
}

}  // namespace

TEST(VmfuncSelect, AutoPrefersGateThenIvshmemThenShm) {
  Choice c = wh::vmfunc::choose(nullptr, true, true);
  EXPECT_EQ(c.transport, Transport::Vmfunc);
  EXPECT_TRUE(c.fallback_to_ivshmem);
  EXPECT_EQ(wh::vmfunc::choose("auto", false, true).transport, Transport::Ivshmem);
  EXPECT_EQ(wh::vmfunc::choose("", false, false).transport, Transport::Shm);
  EXPECT_EQ(wh::vmfunc::choose(nullptr, true, false).transport, Transport::Vmfunc);
}

TEST(VmfuncSelect, ForcedTransportsDoNotFallBack) {
  Choice v = wh::vmfunc::choose("vmfunc", false, true);
  EXPECT_EQ(v.transport, Transport::Vmfunc);
  EXPECT_FALSE(v.fallback_to_ivshmem);
  EXPECT_EQ(wh::vmfunc::choose("ivshmem", true, true).transport, Transport::Ivshmem);
  EXPECT_EQ(wh::vmfunc::choose("shm", true, true).transport, Transport::Shm);
  Choice bad = wh::vmfunc::choose("tcp", true, true);
  EXPECT_EQ(bad.transport, Transport::Invalid);
  EXPECT_NE(bad.error.find("vmfunc"), std::string::npos);
}

TEST(VmfuncSelect, OpenDeviceNeedsTheDeviceAndItsInfoIoctl) {
  std::string err;
  EXPECT_EQ(wh::vmfunc::open_device("/nonexistent/wormhole-gate", &err), nullptr);
  EXPECT_NE(err.find("/nonexistent/wormhole-gate"), std::string::npos);
  err.clear();
  EXPECT_EQ(wh::vmfunc::open_device("/dev/null", &err), nullptr);  // no INFO ioctl there
  EXPECT_NE(err.find("INFO"), std::string::npos) << err;
}

TEST(VmfuncBind, RefusedWhenTheServerPublishesNoGateState) {
  FakeWindow fw;  // nobody published: an old server without a gate poller
  std::string err;
  EXPECT_EQ(Link::bind(dev(fw), kChan, kGen, opts(), &err), nullptr);
  EXPECT_NE(err.find("no gate state"), std::string::npos) << err;
}

TEST(VmfuncBind, RefusedWhenInfoFails) {
  FakeWindow fw;
  FakeServer srv(fw);
  auto d = dev(fw);
  d->info_errno = ENOTTY;
  std::string err;
  EXPECT_EQ(Link::bind(std::move(d), kChan, kGen, opts(), &err), nullptr);
  EXPECT_NE(err.find("INFO"), std::string::npos) << err;
}

TEST(VmfuncBind, StaleGenerationAndUnknownChannelAreRefused) {
  FakeWindow fw;
  FakeServer srv(fw);
  srv.run();
  std::string err;
  EXPECT_EQ(Link::bind(dev(fw), kChan, kGen + 1, opts(), &err), nullptr);
  EXPECT_NE(err.find("refused BIND"), std::string::npos) << err;
  EXPECT_EQ(Link::bind(dev(fw), 99, kGen, opts(), &err), nullptr);
  EXPECT_NE(Link::bind(dev(fw), kChan, kGen, opts(), &err), nullptr) << err;
}

TEST(VmfuncBind, NoAnswerToBindTimesOut) {
  FakeWindow fw;
  FakeServer srv(fw);  // publishes state, but runs no poller
  std::string err;
  auto t0 = wh::ring::Clock::now();
  auto o = opts();
  o.bind_timeout = 200ms;
  EXPECT_EQ(Link::bind(dev(fw), kChan, kGen, o, &err), nullptr);
  EXPECT_LT(wh::ring::Clock::now() - t0, 3s);
  EXPECT_NE(err.find("no response"), std::string::npos) << err;
}

TEST(VmfuncCall, RoundTripThroughTheGate) {
  FakeWindow fw;
  FakeServer srv(fw);
  srv.run();
  std::string err;
  auto l = Link::bind(dev(fw), kChan, kGen, opts(&srv.heartbeat), &err);
  ASSERT_NE(l, nullptr) << err;
  wh::ring::Message m;
  for (int i = 0; i < 50; i++) {
    std::vector<uint8_t> p{1, 2, uint8_t(i)};
    ASSERT_EQ(call(*l, p, m, 4096 + i), Status::Ok) << l->error();
    EXPECT_EQ(m.hdr.status, 142);
    EXPECT_EQ(m.hdr.opcode, 42);
    ASSERT_EQ(m.payload.size(), 3u);
    EXPECT_EQ(m.payload[0], uint8_t(i));
    EXPECT_EQ(srv.last_barrier, uint64_t(4096 + i));  // the ring barrier reaches the server
  }
  EXPECT_EQ(l->gate_calls(), 50u);
  EXPECT_EQ(srv.calls, 50u);
}

TEST(VmfuncCall, LargestRequestFitsAndLargerDoesNot) {
  EXPECT_TRUE(Link::fits(WH_GATE_REQ_PAYLOAD_MAX, WH_GATE_RESP_PAYLOAD_MAX));
  EXPECT_FALSE(Link::fits(WH_GATE_REQ_PAYLOAD_MAX + 1, 0));
  EXPECT_FALSE(Link::fits(0, WH_GATE_RESP_PAYLOAD_MAX + 1));
  FakeWindow fw;
  FakeServer srv(fw);
  srv.run();
  std::string err;
  auto l = Link::bind(dev(fw), kChan, kGen, opts(&srv.heartbeat), &err);
  ASSERT_NE(l, nullptr) << err;
  wh::ring::Message m;
  std::vector<uint8_t> big(WH_GATE_REQ_PAYLOAD_MAX, 0xab);
  big[0] = 1;
  ASSERT_EQ(call(*l, big, m), Status::Ok) << l->error();
  EXPECT_EQ(m.payload.size(), big.size());
  EXPECT_EQ(m.payload.back(), 1);
  big.push_back(0);
  EXPECT_EQ(call(*l, big, m), Status::TooBig);
  EXPECT_FALSE(l->dead());
}

TEST(VmfuncCall, BusyUntilTheServerTookThePreviousRequest) {
  FakeWindow fw;
  FakeServer srv(fw);
  srv.ack_late = true;  // answers first, acknowledges 20 ms later
  srv.run();
  std::string err;
  auto d = dev(fw);
  FakeDevice* fd = d.get();
  auto l = Link::bind(std::move(d), kChan, kGen, opts(&srv.heartbeat), &err);
  ASSERT_NE(l, nullptr) << err;
  wh::ring::Message m;
  for (int i = 0; i < 5; i++) ASSERT_EQ(call(*l, {uint8_t(i)}, m), Status::Ok) << l->error();
  EXPECT_GT(fd->busy.load(), 0u) << "SUBMIT never saw -16";
  EXPECT_EQ(srv.calls, 5u);
}

TEST(VmfuncCall, ServerThatNeverAnswersTimesOutCleanly) {
  FakeWindow fw;
  FakeServer srv(fw);
  srv.run();
  std::string err;
  auto l = Link::bind(dev(fw), kChan, kGen, opts(&srv.heartbeat, 300ms), &err);
  ASSERT_NE(l, nullptr) << err;
  srv.answer = false;  // takes requests, never responds; heartbeat goes on
  wh::ring::Message m;
  auto t0 = wh::ring::Clock::now();
  EXPECT_EQ(call(*l, {1}, m), Status::Timeout);
  EXPECT_LT(wh::ring::Clock::now() - t0, 3s);
  EXPECT_TRUE(l->dead());
  EXPECT_NE(l->error().find("no response"), std::string::npos) << l->error();
  EXPECT_EQ(call(*l, {1}, m), Status::Closed);  // no second wait
}

TEST(VmfuncCall, ServerThatNeverTakesTheRequestTimesOut) {
  FakeWindow fw;
  FakeServer srv(fw);
  srv.run();
  std::string err;
  // No heartbeat word here: only the timeout can end the waits (with the
  // server's heartbeat, its stop would end them as PeerDead first).
  auto l = Link::bind(dev(fw), kChan, kGen, opts(nullptr, 300ms), &err);
  ASSERT_NE(l, nullptr) << err;
  srv.stop = true;  // poller gone, the slot is never acknowledged again
  srv.th.join();
  wh::ring::Message m;
  EXPECT_EQ(call(*l, {1}, m), Status::Timeout);  // first: no response
  // A fresh link on the same slot: -16 forever -> timeout, not a hang.
  auto l2 = Link::bind(dev(fw), kChan, kGen, opts(nullptr, 300ms), &err);
  EXPECT_EQ(l2, nullptr);
  EXPECT_NE(err.find("-16"), std::string::npos) << err;
}

TEST(VmfuncCall, DeadServerHeartbeatEndsTheWaitWithoutATimeout) {
  FakeWindow fw;
  FakeServer srv(fw);
  srv.run();
  std::string err;
  std::atomic<uint64_t> frozen{5};  // a heartbeat that never moves
  auto l = Link::bind(dev(fw), kChan, kGen, opts(&srv.heartbeat), &err);
  ASSERT_NE(l, nullptr) << err;
  srv.answer = false;
  auto l2 = Link::bind(dev(fw, 1), kChan + 1, kGen, opts(&frozen), &err);  // one slot per channel
  ASSERT_NE(l2, nullptr) << err;
  wh::ring::Message m;
  auto t0 = wh::ring::Clock::now();
  EXPECT_EQ(call(*l2, {1}, m), Status::PeerDead);  // timeout 0: only the heartbeat ends it
  EXPECT_LT(wh::ring::Clock::now() - t0, 5s);
  EXPECT_TRUE(l2->dead());
}

TEST(VmfuncCall, IoctlFailureKillsTheLink) {
  FakeWindow fw;
  FakeServer srv(fw);
  srv.run();
  std::string err;
  auto d = dev(fw);
  FakeDevice* fd = d.get();
  auto l = Link::bind(std::move(d), kChan, kGen, opts(&srv.heartbeat), &err);
  ASSERT_NE(l, nullptr) << err;
  fd->call_errno = EFAULT;
  wh::ring::Message m;
  EXPECT_EQ(call(*l, {1}, m), Status::Closed);
  EXPECT_TRUE(l->dead());
}

TEST(VmfuncCall, SlotHeldByAnotherThreadSendsTheCallerToTheRing) {
  FakeWindow fw;
  FakeServer srv(fw);
  srv.delay_ms = 150;  // below the 300 ms heartbeat timeout (the delay stalls the beat)
  srv.run();
  std::string err;
  auto l = Link::bind(dev(fw), kChan, kGen, opts(&srv.heartbeat), &err);
  ASSERT_NE(l, nullptr) << err;
  std::thread a([&] {
    wh::ring::Message m;
    EXPECT_EQ(call(*l, {1}, m), Status::Ok);
  });
  while (srv.calls == 0) std::this_thread::sleep_for(1ms);  // a's request is being served
  wh::ring::Message m;
  EXPECT_EQ(call(*l, {2}, m), Status::Full);
  a.join();
}

TEST(VmfuncCall, ResponseToAnotherRequestIsCorrupt) {
  FakeWindow fw;
  FakeServer srv(fw);
  srv.run();
  std::string err;
  auto l = Link::bind(dev(fw), kChan, kGen, opts(&srv.heartbeat, 1000ms), &err);
  ASSERT_NE(l, nullptr) << err;
  srv.stop = true;
  srv.th.join();
  // A "server" that answers with the right RESP_SEQ but names another request.
  std::thread bad([&] {
    uint8_t* ch = fw.chan(0);
    while (wh::test::ld32(ch + WH_CHAN_REQ_SEQ) == wh::test::ld32(ch + WH_CHAN_ACK_SEQ)) std::this_thread::yield();
    uint32_t seq = wh::test::ld32(ch + WH_CHAN_REQ_SEQ);
    wh_gate_resp r{WH_GATE_RESP_MAGIC, seq + 5, 0, 0, {}};
    std::memcpy(ch + WH_SLOT_RESP + 8, &r, sizeof r);
    wh::test::st32(ch + WH_SLOT_RESP, sizeof r);
    wh::test::st32(ch + WH_CHAN_RESP_SEQ, seq);
  });
  wh::ring::Message m;
  EXPECT_EQ(call(*l, {1}, m), Status::Corrupt);
  bad.join();
}

TEST(VmfuncState, QueryReadsTheServersPublishedRecord) {
  FakeWindow fw;
  FakeServer srv(fw);
  srv.run();
  std::string err;
  auto l = Link::bind(dev(fw), kChan, kGen, opts(&srv.heartbeat), &err);
  ASSERT_NE(l, nullptr) << err;
  srv.publish_state(17, 1, 0);
  wh_gate_chan_state st;
  ASSERT_TRUE(l->query(&st));
  EXPECT_EQ(st.handled, 17u);
  EXPECT_EQ(st.mem_free, 1000u);
  EXPECT_EQ(st.mem_total, 4000u);
  EXPECT_EQ(st.idle, 1u);
}

TEST(VmfuncState, TornStaleOrForgedSnapshotsAreRejected) {
  FakeWindow fw;
  Window w(fw.base(), WH_GATE_WINDOW);
  wh_gate_chan_state cs[2]{};
  cs[1] = {kGen, 3, 10, 20, 0, 1, 0};
  w.publish(cs);
  uint8_t page[WH_SLOT_MAX];
  std::memcpy(page, fw.base() + WH_GATE_STATE_OFF, sizeof page);
  wh_gate_chan_state out;
  ASSERT_TRUE(wh::vmfunc::read_state(page, sizeof page, 1, &out));
  EXPECT_FALSE(wh::vmfunc::read_state(page, sizeof page, 0, &out));  // unused record
  EXPECT_FALSE(wh::vmfunc::read_state(page, sizeof page, 2, &out));  // beyond nchan
  EXPECT_FALSE(wh::vmfunc::read_state(page, 100, 1, &out));          // short copy
  uint8_t torn[WH_SLOT_MAX];
  std::memcpy(torn, page, sizeof torn);
  reinterpret_cast<wh_gate_state*>(torn)->begin_seq += 2;  // copy raced an update
  EXPECT_FALSE(wh::vmfunc::read_state(torn, sizeof torn, 1, &out));
  std::memcpy(torn, page, sizeof torn);
  reinterpret_cast<wh_gate_state*>(torn)->chan[1].mem_free = 999;  // check word no longer matches
  EXPECT_FALSE(wh::vmfunc::read_state(torn, sizeof torn, 1, &out));
}

// ---- server end: copy once, validate, bind ---------------------------------

namespace {
// Writes n bytes of p as slot's request, declaring `declared` bytes (a
// hostile guest may declare more than it wrote).
void put_req(FakeWindow& fw, uint32_t slot, const void* p, uint32_t n, uint32_t declared) {
  uint8_t* ch = fw.chan(slot);
  std::memcpy(ch + WH_SLOT_REQ, &declared, 4);
  std::memcpy(ch + WH_SLOT_REQ + 8, p, std::min<uint32_t>(n, WH_SLOT_MAX));
  wh::test::st32(ch + WH_CHAN_REQ_SEQ, wh::test::ld32(ch + WH_CHAN_REQ_SEQ) + 1);
}
void put_req(FakeWindow& fw, uint32_t slot, const void* p, uint32_t len) { put_req(fw, slot, p, len, len); }
int32_t resp_status(FakeWindow& fw, uint32_t slot) {
  wh_gate_resp r;
  std::memcpy(&r, fw.chan(slot) + WH_SLOT_RESP + 8, sizeof r);
  return r.status;
}
}  // namespace

TEST(GateServer, MalformedSlotsAreRefusedAndAcknowledged) {
  FakeWindow fw;
  Window w(fw.base(), WH_GATE_WINDOW);
  int delivered = 0;
  Poller p(w, 8, [](uint32_t) { return kGen; }, [&](uint32_t, Window::Request&&) { delivered++; });
  EXPECT_EQ(p.poll_once(), 0);
  uint32_t huge = 0xffffffff;
  put_req(fw, 0, &huge, sizeof huge, 0xffffffffu);  // length far beyond the slot
  wh_gate_req g{WH_GATE_REQ_MAGIC, 9 /*kind*/, WH_GATE_PROTO_VERSION, 0, 0, kGen, 0, {}};
  put_req(fw, 1, &g, sizeof g);        // unknown kind
  g.kind = WH_GATE_KIND_CALL;
  put_req(fw, 2, &g, sizeof g);        // CALL whose header is not a request
  EXPECT_EQ(p.poll_once(), 3);
  EXPECT_EQ(p.violations(), 3u);
  EXPECT_EQ(delivered, 0);
  for (uint32_t s = 0; s < 3; s++) {
    EXPECT_EQ(resp_status(fw, s), -EINVAL);
    EXPECT_EQ(wh::test::ld32(fw.chan(s) + WH_CHAN_ACK_SEQ), wh::test::ld32(fw.chan(s) + WH_CHAN_REQ_SEQ));
  }
  EXPECT_EQ(p.poll_once(), 0);  // each request is taken once
}

TEST(GateServer, CallsNeedABindingToTheCurrentOwner) {
  FakeWindow fw;
  Window w(fw.base(), WH_GATE_WINDOW);
  uint64_t gen = kGen;
  std::vector<uint32_t> delivered;
  Poller p(w, 8, [&](uint32_t c) { return c == kChan ? gen : 0; },
           [&](uint32_t c, Window::Request&&) { delivered.push_back(c); });
  struct {
    wh_gate_req g;
    uint8_t body[4];
  } rq{};
  rq.g = {WH_GATE_REQ_MAGIC, WH_GATE_KIND_CALL, WH_GATE_PROTO_VERSION, kChan, 0, kGen, 0, {}};
  wh_msg_hdr h{WH_MSG_MAGIC, 1, 42, 0, 4, 1, 0, 0};
  std::memcpy(rq.g.hdr, &h, sizeof h);
  put_req(fw, 0, &rq, sizeof(wh_gate_req) + 4);  // CALL without BIND
  p.poll_once();
  EXPECT_EQ(resp_status(fw, 0), -ESTALE);
  wh_gate_req b{WH_GATE_REQ_MAGIC, WH_GATE_KIND_BIND, WH_GATE_PROTO_VERSION, kChan, 0, kGen, 0, {}};
  put_req(fw, 0, &b, sizeof b);
  p.poll_once();
  EXPECT_EQ(resp_status(fw, 0), 0);
  put_req(fw, 0, &rq, sizeof(wh_gate_req) + 4);
  p.poll_once();
  ASSERT_EQ(delivered.size(), 1u);
  EXPECT_EQ(delivered[0], kChan);
  rq.g.chan = kChan + 1;  // another channel of the VM through our binding
  put_req(fw, 0, &rq, sizeof(wh_gate_req) + 4);
  p.poll_once();
  EXPECT_EQ(resp_status(fw, 0), -ESTALE);
  rq.g.chan = kChan;
  gen++;  // the channel was reclaimed by another process
  put_req(fw, 0, &rq, sizeof(wh_gate_req) + 4);
  p.poll_once();
  EXPECT_EQ(resp_status(fw, 0), -ESTALE);
  EXPECT_EQ(delivered.size(), 1u);
}

TEST(GateServer, SlotIsCopiedOnceBeforeValidation) {
  // The guest rewrites the slot after publishing: the request delivered is
  // the bytes copied at take time, whatever the slot holds afterwards.
  FakeWindow fw;
  Window w(fw.base(), WH_GATE_WINDOW);
  struct {
    wh_gate_req g;
    uint8_t body[4];
  } rq{};
  rq.g = {WH_GATE_REQ_MAGIC, WH_GATE_KIND_CALL, WH_GATE_PROTO_VERSION, kChan, 0, kGen, 0, {}};
  wh_msg_hdr h{WH_MSG_MAGIC, 1, 42, 0, 4, 1, 0, 0};
  std::memcpy(rq.g.hdr, &h, sizeof h);
  std::memcpy(rq.body, "abcd", 4);
  put_req(fw, 5, &rq, sizeof(wh_gate_req) + 4);
  Window::Request out;
  std::string why;
  ASSERT_EQ(w.take(5, &out, &why), Window::Take::Ok) << why;
  std::memset(fw.chan(5), 0xff, WH_SLOT_MAX);  // scribble after the copy
  EXPECT_EQ(out.hdr.len, 4u);
  EXPECT_EQ(std::memcmp(out.payload.data(), "abcd", 4), 0);
  EXPECT_EQ(w.take(5, &out, &why), Window::Take::Bad);  // REQ_SEQ moved (scribbled): new, malformed
}

TEST(GateServer, BindsRefusalsAndBoundToAreCounted) {
  FakeWindow fw;
  Window w(fw.base(), WH_GATE_WINDOW);
  uint64_t gen = kGen;
  Poller p(w, 8, [&](uint32_t c) { return c == kChan ? gen : 0; }, [](uint32_t, Window::Request&&) {});
  wh_gate_req b{WH_GATE_REQ_MAGIC, WH_GATE_KIND_BIND, WH_GATE_PROTO_VERSION, kChan, 0, kGen, 0, {}};
  put_req(fw, 2, &b, sizeof b);
  p.poll_once();
  EXPECT_EQ(p.binds(), 1u);
  EXPECT_TRUE(p.bound_to(2, kChan, kGen));
  EXPECT_FALSE(p.bound_to(2, kChan, kGen + 1));
  EXPECT_FALSE(p.bound_to(3, kChan, kGen));
  EXPECT_FALSE(p.bound_to(99, kChan, kGen));
  b.generation = kGen + 1;  // forged
  put_req(fw, 2, &b, sizeof b);
  p.poll_once();
  EXPECT_EQ(resp_status(fw, 2), -ESTALE);
  EXPECT_EQ(p.refusals(), 1u);
  EXPECT_FALSE(p.bound_to(2, kChan, kGen));  // a refused BIND unbinds the slot
  EXPECT_EQ(p.violations(), 0u);
  // First BIND wins: another slot naming the same owner (a process that
  // read the generation from the state page) is refused, the owner's slot
  // may bind again.
  b.generation = kGen;
  put_req(fw, 2, &b, sizeof b);
  p.poll_once();
  EXPECT_EQ(resp_status(fw, 2), 0);
  put_req(fw, 5, &b, sizeof b);
  p.poll_once();
  EXPECT_EQ(resp_status(fw, 5), -EBUSY);
  EXPECT_EQ(p.refusals(), 2u);
  EXPECT_FALSE(p.bound_to(5, kChan, kGen));
  put_req(fw, 2, &b, sizeof b);
  p.poll_once();
  EXPECT_EQ(resp_status(fw, 2), 0);
  EXPECT_TRUE(p.bound_to(2, kChan, kGen));
  EXPECT_EQ(p.binds(), 3u);
  gen = kGen + 7;  // the channel was reclaimed: its new owner binds from any slot
  b.generation = gen;
  put_req(fw, 5, &b, sizeof b);
  p.poll_once();
  EXPECT_EQ(resp_status(fw, 5), 0);
}

TEST(GateServer, SessionQueueHandsOutRequestsBehindTheirRingBarrier) {
  using wh::server::gate::SessionQueue;
  SessionQueue q;
  auto rq = [](uint32_t seq, uint64_t barrier, uint64_t gen = kGen) {
    Window::Request r;
    r.seq = seq;
    r.g.generation = gen;
    r.g.ring_barrier = barrier;
    return r;
  };
  Window::Request out;
  EXPECT_EQ(q.push(rq(1, 0)), SessionQueue::Push::Stale);  // no owner yet
  q.open(kGen);
  EXPECT_EQ(q.generation(), kGen);
  EXPECT_EQ(q.push(rq(1, 100)), SessionQueue::Push::Ok);
  EXPECT_EQ(q.push(rq(2, 50)), SessionQueue::Push::Ok);
  EXPECT_EQ(q.push(rq(3, 0, kGen + 1)), SessionQueue::Push::Stale);  // another owner's
  EXPECT_FALSE(q.empty());
  EXPECT_FALSE(q.pop_ready(99, 0, &out));  // the ring has not reached the oldest's barrier
  ASSERT_TRUE(q.pop_ready(100, 0, &out));
  EXPECT_EQ(out.seq, 1u);
  ASSERT_TRUE(q.pop_ready(100, 0, &out));
  EXPECT_EQ(out.seq, 2u);
  EXPECT_FALSE(q.pop_ready(~0ull, 0, &out));
  EXPECT_TRUE(q.empty());
  // A barrier past everything the ring will hold: due once the ring was
  // found drained after it was queued, not before.
  EXPECT_EQ(q.push(rq(4, 1ull << 60)), SessionQueue::Push::Ok);
  const uint64_t looked = q.pushed();
  EXPECT_EQ(q.push(rq(5, 1ull << 60)), SessionQueue::Push::Ok);
  ASSERT_TRUE(q.pop_ready(0, looked, &out));
  EXPECT_EQ(out.seq, 4u);
  EXPECT_FALSE(q.pop_ready(0, looked, &out));  // queued after the look: its records may be on the way
  ASSERT_TRUE(q.pop_ready(0, q.pushed(), &out));
  EXPECT_EQ(out.seq, 5u);
  // Bounded, and closing hands back what is left and refuses from then on.
  for (size_t i = 0; i < SessionQueue::kMax; i++) EXPECT_EQ(q.push(rq(10 + uint32_t(i), 1ull << 60)), SessionQueue::Push::Ok);
  EXPECT_EQ(q.push(rq(99, 0)), SessionQueue::Push::Full);
  auto left = q.close();
  EXPECT_EQ(left.size(), SessionQueue::kMax);
  EXPECT_EQ(left.front().seq, 10u);
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.generation(), 0u);
  EXPECT_EQ(q.push(rq(100, 0)), SessionQueue::Push::Stale);
  EXPECT_FALSE(q.pop_ready(~0ull, ~0ull, &out));
}

TEST(VmfuncBind, WithdrawnStatePageIsNotServed) {
  FakeWindow fw;
  Window w(fw.base(), WH_GATE_WINDOW);
  wh_gate_chan_state cs[kChan + 1]{};
  cs[kChan] = {kGen, 0, 1000, 4000, 0, 1, 0};
  w.publish(cs);
  w.withdraw();  // the server stopped
  std::string err;
  EXPECT_EQ(Link::bind(dev(fw), kChan, kGen, opts(), &err), nullptr);
  EXPECT_NE(err.find("no gate state"), std::string::npos) << err;
  wh_gate_chan_state st;
  EXPECT_FALSE(wh::vmfunc::read_state(fw.base() + WH_GATE_STATE_OFF, WH_SLOT_MAX, kChan, &st));
}
