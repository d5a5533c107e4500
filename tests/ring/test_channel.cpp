// Channels in one process: client and server ends on threads. Covers the
// call-id demultiplexing with several calling threads (run it under TSan),
// timeouts, close/reclaim, wait policies and heartbeats.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "ring_test_util.hpp"

using namespace wh::ring;
using namespace wh::ring::test;
using namespace std::chrono_literals;

namespace {

struct Pair {
  std::unique_ptr<Region> region;
  std::unique_ptr<ClientChannel> client;
  std::unique_ptr<ServerChannel> server;
  explicit Pair(RegionConfig cfg = small_config(), WaitPolicy cp = test_policy(),
                WaitPolicy sp = test_policy()) {
    std::string err;
    region = Region::create_memfd("wh-chan-test", cfg, &err);
    EXPECT_TRUE(region) << err;
    client = ClientChannel::claim(*region, -1, &err, cp);
    EXPECT_TRUE(client) << err;
    server = ServerChannel::attach(*region, client->index(), &err, sp);
    EXPECT_TRUE(server) << err;
  }
};

// Echo server: answers every call with its payload reversed and status =
// opcode; counts posts; keeps every call id it saw (read it after join()).
// Runs until stop or the channel closes.
struct EchoServer {
  ServerChannel& ch;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> posts{0}, calls{0};
  std::vector<uint64_t> ids;
  Status last = Status::Ok;
  std::thread thr;
  explicit EchoServer(ServerChannel& c) : ch(c) {
    thr = std::thread([this] { run(); });
  }
  void run() {
    Message m;
    while (!stop.load()) {
      Status s = ch.recv(m, 20ms);
      if (s == Status::Timeout) continue;
      if (s != Status::Ok) {
        last = s;
        return;
      }
      ids.push_back(m.hdr.call_id);
      if (m.hdr.flags & WH_MSG_F_POSTED) {
        posts++;
        continue;
      }
      calls++;
      std::vector<uint8_t> r(m.payload.rbegin(), m.payload.rend());
      std::span<const uint8_t> parts[] = {r};
      Status rs = ch.reply(m.hdr.call_id, m.hdr.opcode, int32_t(m.hdr.opcode), m.hdr.aux, parts);
      if (rs != Status::Ok) {
        last = rs;
        return;
      }
    }
  }
  void join() {
    stop = true;
    if (thr.joinable()) thr.join();
  }
  ~EchoServer() { join(); }
  // How many ids came twice (0: all unique).
  size_t duplicate_ids() const {
    std::vector<uint64_t> v = ids;
    std::sort(v.begin(), v.end());
    return size_t(v.end() - std::unique(v.begin(), v.end()));
  }
};

Status call_bytes(ClientChannel& c, uint16_t op, const std::vector<uint8_t>& req, Message& rep,
                  std::chrono::milliseconds timeout = 5000ms) {
  std::span<const uint8_t> parts[] = {req};
  return c.call(op, 0, parts, rep, 1, timeout);
}

// The channel's own mutex (read and write roles): exclusion under
// contention, including holders that sleep long enough that waiters go to
// the futex, and try_lock's answer.
TEST(LightMutex, ExcludesAndWakesWaiters) {
  LightMutex mu;
  ASSERT_TRUE(mu.try_lock());
  EXPECT_FALSE(mu.try_lock());
  mu.unlock();
  ASSERT_TRUE(mu.try_lock());
  mu.unlock();

  uint64_t counter = 0;  // plain: only the mutex protects it (TSan checks)
  int inside = 0;
  std::atomic<bool> overlap{false};
  constexpr int kThreads = 4, kRounds = 20000;
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; t++)
    ts.emplace_back([&, t] {
      for (int i = 0; i < kRounds; i++) {
        std::lock_guard lk(mu);
        if (++inside != 1) overlap = true;
        counter++;
        // Now and then hold it long enough for the others to sleep.
        if (i % 2000 == t) std::this_thread::sleep_for(200us);
        --inside;
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_FALSE(overlap.load());
  EXPECT_EQ(counter, uint64_t(kThreads) * kRounds);
  EXPECT_TRUE(mu.try_lock());  // left free, with no waiter state behind
  mu.unlock();
}

// The lock bias (LockBias) as a channel uses it: the owner's calls enter()
// it or, unbiased, take `a` for the call and `b` for the send, and earn the
// bias back with runs of such calls; another thread takes `a` or `b` now
// and then, revoking the bias each time. Each mutex must still exclude:
// plain counters and an overlap check (TSan checks the counters too).
TEST(LockBias, ExcludesRevokersFromTheOwnersCalls) {
  LightMutex a, b;
  LockBias bias;
  a.set_bias(&bias);
  b.set_bias(&bias);
  uint64_t count_a = 0, count_b = 0;
  int in_a = 0, in_b = 0;
  std::atomic<bool> overlap{false}, done{false};
  // A critical section under one mutex: its counter, its occupancy.
  auto crit = [&](int& inside, uint64_t& count) {
    if (++inside != 1) overlap = true;
    for (int k = 0; k < 20; k++) cpu_relax();  // a window for an overlap to show
    count++;
    --inside;
  };
  auto crit_a = [&] { crit(in_a, count_a); };
  auto crit_b = [&] { crit(in_b, count_b); };
  const int kRounds = int(scaled(200000));
  std::thread owner([&] {
    LockBias::Slot* s = LockBias::my_slot();
    for (int i = 0; i < kRounds; i++) {
      if (i % 64 == 0)
        for (int k = 0; k < 500; k++) cpu_relax();  // a gap for the other thread
      if (bias.enter(s)) {
        crit_a();
        crit_b();
        bias.leave(s);
        continue;
      }
      a.lock();
      crit_a();
      b.lock();
      crit_b();
      b.unlock();
      if (!bias.note_uncontended(s, a, b)) a.unlock();
    }
    done = true;
  });
  int other = 0;
  for (; !done.load(); other++) {
    LightMutex& m = other % 2 ? b : a;
    m.lock();
    if (other % 2)
      crit_b();
    else
      crit_a();
    m.unlock();
    for (int k = 0; k < 100; k++) cpu_relax();  // let the owner's runs grow now and then
  }
  owner.join();
  // The bias may still hold both: take them as any thread would.
  a.lock();
  b.lock();
  EXPECT_FALSE(overlap.load());
  EXPECT_EQ(count_a, uint64_t(kRounds) + uint64_t((other + 1) / 2));
  EXPECT_EQ(count_b, uint64_t(kRounds) + uint64_t(other / 2));
  b.unlock();
  a.unlock();
  if (LockBias::supported()) {
    EXPECT_GE(bias.grants(), 1u);
    EXPECT_GE(bias.revocations(), 1u);
    EXPECT_LE(bias.revocations(), bias.grants());
  } else {
    EXPECT_EQ(bias.grants(), 0u);
  }
}

TEST(Channel, ClaimAttachAndStates) {
  std::string err;
  auto region = Region::create_memfd("wh", small_config(1u << 14, 3), &err);
  ASSERT_TRUE(region) << err;
  EXPECT_FALSE(ServerChannel::attach(*region, 0, &err));  // nobody claimed it
  EXPECT_FALSE(ServerChannel::attach(*region, 7, &err));
  EXPECT_FALSE(ClientChannel::claim(*region, 3, &err));
  auto c1 = ClientChannel::claim(*region, 1, &err);
  ASSERT_TRUE(c1);
  EXPECT_EQ(c1->index(), 1u);
  EXPECT_FALSE(ClientChannel::claim(*region, 1, &err));  // taken
  auto c0 = ClientChannel::claim(*region, -1, &err);
  auto c2 = ClientChannel::claim(*region, -1, &err);
  ASSERT_TRUE(c0 && c2);
  EXPECT_EQ(c0->index(), 0u);
  EXPECT_EQ(c2->index(), 2u);
  EXPECT_FALSE(ClientChannel::claim(*region, -1, &err));
  EXPECT_EQ(region->channel(1)->state, uint32_t(WH_CHAN_CLAIMED));
  EXPECT_EQ(region->channel(1)->client_pid, uint32_t(getpid()));
  EXPECT_EQ(c1->wait_attached(20ms), Status::Timeout);
  auto s1 = ServerChannel::attach(*region, 1, &err);
  ASSERT_TRUE(s1) << err;
  EXPECT_EQ(c1->wait_attached(20ms), Status::Ok);
  EXPECT_EQ(s1->generation(), c1->generation());
  EXPECT_EQ(s1->client_pid(), uint32_t(getpid()));
  EXPECT_EQ(region->channel(1)->state, uint32_t(WH_CHAN_ACTIVE));
  EXPECT_EQ(s1->data().data(), c1->data().data());
  EXPECT_EQ(c1->data().size(), region->geometry().data_size);
  EXPECT_FALSE(ServerChannel::attach(*region, 1, &err));  // already active
}

TEST(Channel, PostZeroLengthMaxAndTooBig) {
  Pair p;
  const uint32_t max = p.client->max_msg();
  std::vector<uint8_t> big(max + 1, 0xab);
  std::span<const uint8_t> too_big[] = {big};
  EXPECT_EQ(p.client->post(5, 1, too_big), Status::TooBig);
  std::span<const uint8_t> exact[] = {std::span<const uint8_t>(big).first(max)};
  EXPECT_EQ(p.client->post(5, 2, exact), Status::Ok);
  EXPECT_EQ(p.client->post(6, 3, {}), Status::Ok);
  Message m;
  ASSERT_EQ(p.server->try_recv(m), Status::Ok);
  EXPECT_EQ(m.hdr.opcode, 5);
  EXPECT_EQ(m.hdr.aux, 2u);
  EXPECT_EQ(m.hdr.flags, uint32_t(WH_MSG_F_POSTED));
  EXPECT_EQ(m.payload.size(), max);
  ASSERT_EQ(p.server->try_recv(m), Status::Ok);
  EXPECT_EQ(m.hdr.opcode, 6);
  EXPECT_TRUE(m.payload.empty());
  EXPECT_EQ(p.server->try_recv(m), Status::Empty);
  // Opcode 0 is reserved for padding records.
  EXPECT_EQ(p.client->post(WH_OP_PAD, 0, {}), Status::Invalid);
  Message rep;
  EXPECT_EQ(p.client->call(WH_OP_PAD, 0, {}, rep, 1, 100ms), Status::Invalid);
  EXPECT_EQ(p.server->reply(1, WH_OP_PAD, 0, 0, {}), Status::Invalid);
  EXPECT_EQ(p.client->status(), Status::Ok);
  // Server side limits.
  std::span<const uint8_t> rb[] = {big};
  EXPECT_EQ(p.server->reply(1, 1, 0, 0, rb), Status::TooBig);
}

TEST(Channel, CallRoundTripsAndCallIdsAreUnique) {
  Pair p;
  EchoServer srv(*p.server);
  Message rep;
  for (int i = 0; i < 1000; i++) {
    std::vector<uint8_t> req = {uint8_t(i), uint8_t(i >> 8), 3};
    ASSERT_EQ(call_bytes(*p.client, uint16_t(10 + i % 5), req, rep), Status::Ok);
    EXPECT_EQ(rep.hdr.status, 10 + i % 5);
    EXPECT_EQ(rep.hdr.flags & WH_MSG_F_RESPONSE, uint32_t(WH_MSG_F_RESPONSE));
    ASSERT_EQ(rep.payload, (std::vector<uint8_t>{3, uint8_t(i >> 8), uint8_t(i)}));
  }
  // Zero-length request and reply.
  ASSERT_EQ(call_bytes(*p.client, 1, {}, rep), Status::Ok);
  EXPECT_TRUE(rep.payload.empty());
  srv.join();
  EXPECT_EQ(srv.calls.load(), 1001u);
  EXPECT_EQ(srv.ids.size(), 1001u);
  EXPECT_EQ(srv.duplicate_ids(), 0u);
}

// Several threads call and post at once: every reply reaches its caller.
TEST(Channel, ConcurrentCallersGetTheirOwnReplies) {
  Pair p(small_config(1u << 13));  // small rings: lots of Full and wrap-around
  EchoServer srv(*p.server);
  const int kThreads = 4;
  const int kIters = int(scaled(20000));
  std::atomic<int> errors{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; t++) {
    ts.emplace_back([&, t] {
      Message rep;
      for (int i = 0; i < kIters; i++) {
        uint32_t len = uint32_t((i * 7 + t * 13) % 300);
        std::vector<uint8_t> req(len);
        for (uint32_t k = 0; k < len; k++) req[k] = uint8_t(t * 31 + i + k);
        if (i % 3 == 0) {
          std::span<const uint8_t> parts[] = {req};
          if (p.client->post(uint16_t(100 + t), uint32_t(i), parts) != Status::Ok) errors++;
          continue;
        }
        if (call_bytes(*p.client, uint16_t(100 + t), req, rep) != Status::Ok) {
          errors++;
          continue;
        }
        std::vector<uint8_t> want(req.rbegin(), req.rend());
        if (rep.payload != want || rep.hdr.status != 100 + t) errors++;
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(errors.load(), 0);
  // Posts were all delivered (wait for the server to drain them).
  uint64_t want_posts = uint64_t(kThreads) * uint64_t((kIters + 2) / 3);
  for (int i = 0; i < 500 && srv.posts.load() < want_posts; i++) std::this_thread::sleep_for(2ms);
  EXPECT_EQ(srv.posts.load(), want_posts);
  EXPECT_EQ(p.client->status(), Status::Ok);
  // Call ids are unique across the paths that give them: calls alone on
  // the channel (under the write lock), calls queued behind another
  // reader, and posts (a shared counter).
  srv.join();
  EXPECT_EQ(srv.ids.size(), srv.calls.load() + srv.posts.load());
  EXPECT_EQ(srv.duplicate_ids(), 0u);
}

// One thread making every call earns the channel's lock bias; its posts
// keep it. Another thread's call revokes it (while the owner is idle, and
// so promptly), and calls stay correct through grants and revocations,
// also when the owner has exited and when threads take turns.
TEST(Channel, LockBiasFollowsTheCallingThreads) {
  if (!LockBias::supported()) GTEST_SKIP() << "membarrier unavailable or WORMHOLE_BIAS=0";
  // This thread's slot first: a slot is recycled when its thread exits,
  // and this thread would otherwise inherit the first owner's (and its bias).
  LockBias::my_slot();
  Pair p;
  EchoServer srv(*p.server);
  auto calls = [&](int n, uint16_t op) {
    Message rep;
    for (int i = 0; i < n; i++) {
      std::vector<uint8_t> req = {uint8_t(i), uint8_t(op), 7};
      if (call_bytes(*p.client, op, req, rep) != Status::Ok) return false;
      if (rep.payload != std::vector<uint8_t>{7, uint8_t(op), uint8_t(i)}) return false;
      if (i % 10 == 0) {
        std::span<const uint8_t> parts[] = {req};
        if (p.client->post(op, 0, parts) != Status::Ok) return false;
      }
    }
    return true;
  };
  std::thread first([&] { EXPECT_TRUE(calls(500, 21)); });
  first.join();
  EXPECT_EQ(p.client->bias().grants(), 1u);  // after a run of 64, kept through its posts
  EXPECT_EQ(p.client->bias().revocations(), 0u);
  // The owner has exited holding the bias: this thread's call revokes it.
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(calls(1, 22));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
  EXPECT_EQ(p.client->bias().revocations(), 1u);
  // It earns the bias in turn (a run of 128 now), and threads taking turns
  // or calling at once revoke it; every reply still reaches its caller.
  EXPECT_TRUE(calls(300, 23));
  EXPECT_EQ(p.client->bias().grants(), 2u);
  std::vector<std::thread> ts;
  std::atomic<int> failed{0};
  for (int t = 0; t < 3; t++)
    ts.emplace_back([&, t] {
      for (int r = 0; r < 20; r++)
        if (!calls(int(scaled(200)) + t * 50, uint16_t(30 + t))) failed++;
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_LE(p.client->bias().revocations(), p.client->bias().grants());
  EXPECT_GE(p.client->bias().revocations(), 2u);
  srv.join();
  EXPECT_EQ(srv.duplicate_ids(), 0u);
  EXPECT_EQ(p.client->status(), Status::Ok);
}

TEST(Channel, CallTimesOutAndLateReplyIsDropped) {
  Pair p;
  Message m, rep;
  auto t0 = Clock::now();
  EXPECT_EQ(call_bytes(*p.client, 1, {1}, rep, 100ms), Status::Timeout);
  EXPECT_GE(Clock::now() - t0, 100ms);
  EXPECT_LT(Clock::now() - t0, 1000ms);
  // The server answers late; the client drops the stale reply and the next
  // call gets its own answer.
  ASSERT_EQ(p.server->try_recv(m), Status::Ok);
  uint64_t stale = m.hdr.call_id;
  ASSERT_EQ(p.server->reply(stale, 1, 111, 0, {}), Status::Ok);
  std::thread srv([&] {
    Message r;
    ASSERT_EQ(p.server->recv(r, 2s), Status::Ok);
    EXPECT_NE(r.hdr.call_id, stale);
    ASSERT_EQ(p.server->reply(r.hdr.call_id, 1, 222, 0, {}), Status::Ok);
  });
  ASSERT_EQ(call_bytes(*p.client, 1, {2}, rep, 2000ms), Status::Ok);
  EXPECT_EQ(rep.hdr.status, 222);
  srv.join();
}

// A caller that is not the thread draining responses must still honour its
// own timeout while another caller waits without one.
TEST(Channel, WaiterHonoursItsTimeoutWhileAnotherThreadReads) {
  Pair p;
  std::atomic<bool> a_done{false};
  std::thread a([&] {
    Message rep;
    EXPECT_EQ(call_bytes(*p.client, 1, {1}, rep, 0ms /*no timeout*/), Status::Ok);
    a_done = true;
  });
  Message m;
  ASSERT_EQ(p.server->recv(m, 2s), Status::Ok);  // A's request
  uint64_t a_id = m.hdr.call_id;
  std::this_thread::sleep_for(20ms);  // let A become the reader
  auto t0 = Clock::now();
  Message rep;
  EXPECT_EQ(call_bytes(*p.client, 2, {2}, rep, 100ms), Status::Timeout);
  auto took = Clock::now() - t0;
  EXPECT_LT(took, 800ms) << "a waiter's timeout was not honoured";
  // A is still waiting and still gets its reply.
  EXPECT_FALSE(a_done.load());
  ASSERT_EQ(p.server->recv(m, 2s), Status::Ok);  // B's request, never answered
  ASSERT_EQ(p.server->reply(a_id, 1, 0, 0, {}), Status::Ok);
  a.join();
  EXPECT_TRUE(a_done.load());
}

// The reader role passes on: A reads for B, A's reply comes first, then B's.
TEST(Channel, ReaderRoleIsHandedOver) {
  Pair p;
  const int kThreads = 3;
  std::vector<std::thread> ts;
  std::atomic<int> ok{0};
  for (int t = 0; t < kThreads; t++)
    ts.emplace_back([&, t] {
      Message rep;
      if (call_bytes(*p.client, uint16_t(t + 1), {uint8_t(t)}, rep, 5000ms) == Status::Ok &&
          rep.hdr.status == t + 1)
        ok++;
    });
  // Collect all three requests, answer them in reverse arrival order with
  // pauses so that each waiter has to take over reading in turn.
  std::vector<Message> reqs;
  while (reqs.size() < kThreads) {
    Message m;
    ASSERT_EQ(p.server->recv(m, 2s), Status::Ok) << p.server->error();
    reqs.push_back(m);
  }
  for (auto it = reqs.rbegin(); it != reqs.rend(); ++it) {
    std::this_thread::sleep_for(30ms);
    ASSERT_EQ(p.server->reply(it->hdr.call_id, 1, it->hdr.opcode, 0, {}), Status::Ok);
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(ok.load(), kThreads);
}

TEST(Channel, ClientCloseDrainsThenClosed) {
  Pair p;
  for (int i = 0; i < 10; i++) ASSERT_EQ(p.client->post(1, uint32_t(i), {}), Status::Ok);
  p.client.reset();
  Message m;
  for (int i = 0; i < 10; i++) {
    ASSERT_EQ(p.server->recv(m, 1s), Status::Ok);
    EXPECT_EQ(m.hdr.aux, uint32_t(i));
  }
  EXPECT_EQ(p.server->recv(m, 1s), Status::Closed);
  EXPECT_EQ(p.region->channel(0)->state, uint32_t(WH_CHAN_CLOSED));
}

TEST(Channel, ServerWakesPromptlyOnClose) {
  Pair p;
  std::thread closer([&] {
    std::this_thread::sleep_for(100ms);
    p.client.reset();
  });
  Message m;
  auto t0 = Clock::now();
  EXPECT_EQ(p.server->recv(m, 5s), Status::Closed);
  EXPECT_LT(Clock::now() - t0, 1s);
  closer.join();
}

TEST(Channel, ReclaimLetsANewClientIn) {
  Pair p;
  uint64_t g1 = p.client->generation();
  p.client.reset();
  Message m;
  EXPECT_EQ(p.server->recv(m, 1s), Status::Closed);
  p.server->reclaim();
  EXPECT_EQ(p.region->channel(0)->state, uint32_t(WH_CHAN_FREE));
  std::string err;
  auto c2 = ClientChannel::claim(*p.region, 0, &err, test_policy());
  ASSERT_TRUE(c2) << err;
  EXPECT_GT(c2->generation(), g1);
  auto s2 = ServerChannel::attach(*p.region, 0, &err, test_policy());
  ASSERT_TRUE(s2) << err;
  EXPECT_EQ(s2->generation(), c2->generation());
  EchoServer srv(*s2);
  Message rep;
  ASSERT_EQ(call_bytes(*c2, 4, {9, 8}, rep), Status::Ok);
  EXPECT_EQ(rep.payload, (std::vector<uint8_t>{8, 9}));
}

// A stale client object (its channel reclaimed and re-claimed by someone
// else) must not close the new owner's channel when it goes away.
TEST(Channel, StaleClientDoesNotCloseNewOwner) {
  Pair p;
  p.server->reclaim();  // e.g. the server judged the client dead
  std::string err;
  auto c2 = ClientChannel::claim(*p.region, 0, &err, test_policy());
  ASSERT_TRUE(c2) << err;
  p.client.reset();  // the stale owner says goodbye
  EXPECT_EQ(p.region->channel(0)->state, uint32_t(WH_CHAN_CLAIMED));
}

TEST(Channel, ServerReplyTimesOutWhenClientDoesNotDrain) {
  Pair p(small_config(1u << 12));
  std::vector<uint8_t> body(1000);
  std::span<const uint8_t> parts[] = {body};
  Status s = Status::Ok;
  int n = 0;
  auto t0 = Clock::now();
  while ((s = p.server->reply(uint64_t(n + 1), 1, 0, 0, parts, 50ms)) == Status::Ok) n++;
  EXPECT_EQ(s, Status::Timeout);
  EXPECT_GE(n, 2);
  EXPECT_LT(Clock::now() - t0, 1s);
}

TEST(Channel, ClientPostBlocksUntilRoomThenSucceeds) {
  Pair p(small_config(1u << 12));
  std::vector<uint8_t> body(1000);
  std::span<const uint8_t> parts[] = {body};
  std::atomic<int> posted{0};
  std::thread producer([&] {
    for (int i = 0; i < 50; i++)
      if (p.client->post(1, uint32_t(i), parts) == Status::Ok) posted++;
  });
  std::this_thread::sleep_for(50ms);
  EXPECT_LT(posted.load(), 50);  // the ring holds only a few
  Message m;
  for (int i = 0; i < 50; i++) {
    ASSERT_EQ(p.server->recv(m, 2s), Status::Ok);
    EXPECT_EQ(m.hdr.aux, uint32_t(i));
  }
  producer.join();
  EXPECT_EQ(posted.load(), 50);
}

struct PolicyCase {
  const char* name;
  WaitPolicy client, server;
};

WaitPolicy pol(WaitPolicy::Sleep s, uint32_t spin, uint32_t yield = 0, uint32_t hot = 256) {
  WaitPolicy p;
  p.sleep = s;
  p.spin_iters = spin;
  p.yield_iters = yield;
  p.hot_polls = hot;
  return p;
}

class Policies : public ::testing::TestWithParam<PolicyCase> {};

// Every wait policy (and mixing them across the two sides) delivers, and a
// sleeping side is woken promptly: 50 calls in which both sides go to sleep
// between messages take far less than 50 x the 20 ms sleep slice.
TEST_P(Policies, CallsCompleteAndSleepersAreWokenPromptly) {
  const auto& pc = GetParam();
  Pair p(small_config(), pc.client, pc.server);
  EchoServer srv(*p.server);
  Message rep;
  int slow = 0;  // calls that look like a missed wake-up (a 20 ms sleep slice)
  for (int i = 0; i < 50; i++) {
    std::this_thread::sleep_for(1ms);  // both sides fall asleep
    auto t0 = Clock::now();
    ASSERT_EQ(call_bytes(*p.client, 1, {uint8_t(i)}, rep), Status::Ok);
    if (Clock::now() - t0 > 15ms) slow++;
    EXPECT_EQ(rep.payload, (std::vector<uint8_t>{uint8_t(i)}));
  }
  EXPECT_LT(slow, 10) << pc.name;
}

INSTANTIATE_TEST_SUITE_P(
    Wait, Policies,
    ::testing::Values(
        PolicyCase{"futex", pol(WaitPolicy::Sleep::Futex, 0), pol(WaitPolicy::Sleep::Futex, 0)},
        PolicyCase{"spin_then_futex", test_policy(), test_policy()},
        PolicyCase{"pause_spin_then_futex", pol(WaitPolicy::Sleep::Futex, 200, 0, 0),
                   pol(WaitPolicy::Sleep::Futex, 200, 0, 0)},
        PolicyCase{"hot_spin_then_poll", pol(WaitPolicy::Sleep::Poll, 2000, 4, 2000),
                   pol(WaitPolicy::Sleep::Poll, 2000, 4, 2000)},
        PolicyCase{"poll", pol(WaitPolicy::Sleep::Poll, 0), pol(WaitPolicy::Sleep::Poll, 0)},
        PolicyCase{"futex_client_poll_server", pol(WaitPolicy::Sleep::Futex, 0),
                   pol(WaitPolicy::Sleep::Poll, 0)},
        PolicyCase{"poll_client_futex_server", pol(WaitPolicy::Sleep::Poll, 0),
                   pol(WaitPolicy::Sleep::Futex, 0)},
        PolicyCase{"doorbell_fallback", pol(WaitPolicy::Sleep::Doorbell, 0),
                   pol(WaitPolicy::Sleep::Doorbell, 0)}),
    [](const auto& info) { return std::string(info.param.name); });

// A user doorbell hook is used for both waiting and ringing.
struct CountingDoorbell : Doorbell {
  std::atomic<int> rings{0}, waits{0};
  void ring(uint32_t* bell) override {
    rings++;
    futex_doorbell()->ring(bell);
  }
  void wait(uint32_t* bell, uint32_t seen, std::chrono::microseconds t) override {
    waits++;
    futex_doorbell()->wait(bell, seen, t);
  }
};

TEST(Channel, DoorbellHookIsUsed) {
  CountingDoorbell db;
  WaitPolicy w = pol(WaitPolicy::Sleep::Doorbell, 0);
  w.doorbell = &db;
  Pair p(small_config(), w, w);
  EchoServer srv(*p.server);
  Message rep;
  for (int i = 0; i < 10; i++) {
    std::this_thread::sleep_for(2ms);
    ASSERT_EQ(call_bytes(*p.client, 1, {1}, rep), Status::Ok);
  }
  EXPECT_GT(db.waits.load(), 0);
  EXPECT_GT(db.rings.load(), 0);
}

TEST(Channel, WaitPolicyFromEnv) {
  setenv("WORMHOLE_WAIT", "poll", 1);
  EXPECT_EQ(WaitPolicy::from_env().sleep, WaitPolicy::Sleep::Poll);
  setenv("WORMHOLE_WAIT", "spin", 1);
  EXPECT_EQ(WaitPolicy::from_env().spin_iters, UINT32_MAX);
  setenv("WORMHOLE_WAIT", "futex", 1);
  setenv("WORMHOLE_SPIN", "17", 1);
  setenv("WORMHOLE_HOT_POLLS", "0", 1);
  auto p = WaitPolicy::from_env();
  EXPECT_EQ(p.sleep, WaitPolicy::Sleep::Futex);
  EXPECT_EQ(p.spin_iters, 17u);
  EXPECT_EQ(p.hot_polls, 0u);
  unsetenv("WORMHOLE_WAIT");
  unsetenv("WORMHOLE_SPIN");
  unsetenv("WORMHOLE_HOT_POLLS");
  EXPECT_EQ(WaitPolicy::from_env().hot_polls, WaitPolicy{}.hot_polls);
  setenv("WORMHOLE_FAR_POLLS", "9", 1);
  EXPECT_EQ(WaitPolicy::from_env().far_polls, 9u);
  unsetenv("WORMHOLE_FAR_POLLS");
}

// A wait longer than far_polls LFENCE polls (a PAUSE poll counting 5)
// makes the next one PAUSE-only; a short one brings the LFENCE polls back.
TEST(Channel, PollPaceFollowsTheLengthOfTheLastWait) {
  WaitPolicy pol;
  pol.hot_polls = 256;
  pol.far_polls = 24;
  PollPace fresh;                   // before any wait: the policy's LFENCE polls
  EXPECT_EQ(fresh.next(pol), 256u);
  PollPace pace;
  pace.hot = pol.hot_polls;
  pace.polls = 10;
  EXPECT_EQ(pace.next(pol), 256u);  // a short wait: LFENCE-spaced again
  pace.polls = 24;
  EXPECT_EQ(pace.next(pol), 256u);  // at the limit: still short
  pace.polls = 25;
  EXPECT_EQ(pace.next(pol), 0u);    // longer: PAUSE only
  pace.polls = 4;                   // 4 PAUSE polls = 20 units: short
  EXPECT_EQ(pace.next(pol), 256u);
  pace.hot = 0;
  pace.polls = 5;                   // 5 PAUSE polls = 25 units: long
  EXPECT_EQ(pace.next(pol), 0u);
  pace.hot = 3;                     // 3 LFENCE polls, then 5 PAUSE: 28 units
  pace.polls = 8;
  EXPECT_EQ(pace.next(pol), 0u);
  pol.hot_polls = 0;                // PAUSE-only policy: never LFENCE
  pace.polls = 0;
  EXPECT_EQ(pace.next(pol), 0u);
}

// With every heartbeat in this process paused, each side declares the other
// dead within the timeout (400 ms here) plus slack.
TEST(Channel, SilentPeerIsDeclaredDead) {
  Pair p;
  Heartbeat::instance().pause_for_test(true);
  struct Unpause {
    ~Unpause() { Heartbeat::instance().pause_for_test(false); }
  } unpause;
  Message m;
  auto t0 = Clock::now();
  EXPECT_EQ(p.server->recv(m, 5s), Status::PeerDead);
  EXPECT_LT(Clock::now() - t0, 1s);
  t0 = Clock::now();
  Message rep;
  EXPECT_EQ(call_bytes(*p.client, 1, {}, rep, 5000ms), Status::PeerDead);
  EXPECT_LT(Clock::now() - t0, 1s);
  EXPECT_EQ(p.client->status(), Status::PeerDead);
  EXPECT_EQ(p.client->post(1, 0, {}), Status::PeerDead);
}

}  // namespace
