// Two processes: the server (consumer) here, the client in a fork()ed child
// (or the reverse). Millions of messages with checksums and per-thread
// sequence numbers; kill -9 of either side mid-stream; reclaim.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include "ring_test_util.hpp"

using namespace wh::ring;
using namespace wh::ring::test;
using namespace std::chrono_literals;

#if defined(__SANITIZE_THREAD__)
// These tests fork children that start threads (heartbeats) after the
// parent has threads: fine here (the child only uses its own objects).
extern "C" const char* __tsan_default_options() { return "die_after_fork=0"; }
#endif

namespace {

constexpr uint16_t kOpData = 1, kOpCall = 2, kOpEnd = 3;

// Message body: thread id, sequence number, then filler bytes derived from
// both, then an FNV-1a checksum of everything before it.
struct Body {
  uint32_t thread;
  uint32_t len;
  uint64_t seq;
};

// A body with up to max_fill filler bytes.
std::vector<uint8_t> make_msg(uint32_t thread, uint64_t seq, uint32_t max_fill = 240) {
  uint32_t len = uint32_t((seq * 2654435761u + thread * 40503u) % max_fill);
  std::vector<uint8_t> v(sizeof(Body) + len + 8);
  Body b{thread, len, seq};
  std::memcpy(v.data(), &b, sizeof b);
  for (uint32_t i = 0; i < len; i++) v[sizeof b + i] = uint8_t(seq * 31 + thread + i);
  uint64_t sum = fnv1a(v.data(), sizeof b + len);
  std::memcpy(v.data() + sizeof b + len, &sum, 8);
  return v;
}

// Checks a message body; returns false if it is malformed.
bool check_msg(const std::vector<uint8_t>& v, Body& b) {
  if (v.size() < sizeof(Body) + 8) return false;
  std::memcpy(&b, v.data(), sizeof b);
  if (v.size() != sizeof(Body) + b.len + 8) return false;
  uint64_t sum;
  std::memcpy(&sum, v.data() + sizeof b + b.len, 8);
  if (sum != fnv1a(v.data(), sizeof b + b.len)) return false;
  for (uint32_t i = 0; i < b.len; i++)
    if (v[sizeof b + i] != uint8_t(b.seq * 31 + b.thread + i)) return false;
  return true;
}

std::unique_ptr<Region> make_region(RegionConfig cfg) {
  std::string err;
  auto r = Region::create_memfd("wh-mp", cfg, &err);
  EXPECT_TRUE(r) << err;
  return r;
}

// Waits until a client claimed channel `i`, then attaches.
std::unique_ptr<ServerChannel> attach_when_claimed(Region& r, uint32_t i, WaitPolicy pol,
                                                   std::chrono::milliseconds t = 5000ms) {
  auto deadline = Clock::now() + t;
  std::string err;
  while (Clock::now() < deadline) {
    if (__atomic_load_n(&r.channel(i)->state, __ATOMIC_ACQUIRE) == WH_CHAN_CLAIMED)
      return ServerChannel::attach(r, i, &err, pol);
    std::this_thread::sleep_for(200us);
  }
  return nullptr;
}

// ------------------------------------------------------------------ stress

// The client side of the stress tests, for a forked child: `threads`
// threads each send per_thread messages built by make(thread, seq), every
// call_every-th a call whose reply reply_ok(thread, seq, reply) must accept,
// the others posts; each thread ends with a kOpEnd post (aux = thread), and
// a last call (kOpEnd + 1) waits for the server to drain (close is not a
// flush). Then at_end, if given, judges the channel. Returns the child's
// exit code: 0, 10 (no channel), 20 (a failed send or reply), 30 (at_end).
// One channel with rings of `ring` bytes each, a small data area.
RegionConfig stress_config(uint32_t ring) {
  RegionConfig cfg;
  cfg.req_size = cfg.resp_size = ring;
  cfg.data_size = 4096;
  return cfg;
}

struct ClientLoad {
  uint32_t threads;
  uint64_t per_thread, call_every;
};
int run_client_load(Region& region, ClientLoad load,
                    const std::function<std::vector<uint8_t>(uint32_t, uint64_t)>& make,
                    const std::function<bool(uint32_t, uint64_t, const Message&)>& reply_ok,
                    const std::function<bool(ClientChannel&)>& at_end = nullptr) {
  std::string err;
  auto c = ClientChannel::claim(region, 0, &err, test_policy());
  if (!c || c->wait_attached(5000ms) != Status::Ok) return 10;
  std::atomic<int> bad{0};
  std::vector<std::thread> ts;
  for (uint32_t t = 0; t < load.threads; t++)
    ts.emplace_back([&, t] {
      Message rep;
      for (uint64_t seq = 0; seq < load.per_thread; seq++) {
        auto v = make(t, seq);
        std::span<const uint8_t> parts[] = {v};
        if (seq % load.call_every == load.call_every - 1) {
          if (c->call(kOpCall, t, parts, rep, 1, 10000ms) != Status::Ok) {
            bad++;
            return;
          }
          if (!reply_ok(t, seq, rep)) bad++;
        } else if (c->post(kOpData, t, parts) != Status::Ok) {
          bad++;
          return;
        }
      }
      if (c->post(kOpEnd, t, {}) != Status::Ok) bad++;
    });
  for (auto& th : ts) th.join();
  Message rep;
  if (c->call(kOpEnd + 1, 0, {}, rep, 1, 10000ms) != Status::Ok) bad++;
  if (bad.load()) return 20;
  return at_end && !at_end(*c) ? 30 : 0;
}

// The server side of the stress tests: receives until the client closes.
// decode(payload, thread, seq) says whether a message is intact and whose
// it is; each thread's messages must arrive in order, none lost or
// duplicated; calls are answered with their own payload (aux = thread).
struct ServerTally {
  uint64_t total = 0, calls = 0, broken = 0, ends = 0;
};
void serve_load(ServerChannel& srv, ClientLoad load,
                const std::function<bool(const std::vector<uint8_t>&, uint32_t&, uint64_t&)>& decode,
                ServerTally& n) {
  std::vector<uint64_t> next(load.threads, 0);
  Message m;
  for (;;) {
    Status s = srv.recv(m, 5s);
    if (s == Status::Closed) return;
    ASSERT_EQ(s, Status::Ok) << to_string(s) << " " << srv.error();
    if (m.hdr.opcode == kOpEnd) {
      ASSERT_LT(m.hdr.aux, load.threads);
      EXPECT_EQ(next[m.hdr.aux], load.per_thread);
      n.ends++;
      continue;
    }
    if (m.hdr.opcode == kOpEnd + 1) {
      ASSERT_EQ(srv.reply(m.hdr.call_id, 1, 0, 0, {}), Status::Ok);
      continue;
    }
    uint32_t thread = 0;
    uint64_t seq = 0;
    if (!decode(m.payload, thread, seq) || thread >= load.threads || m.hdr.aux != thread) {
      n.broken++;
      continue;
    }
    // Nothing lost, duplicated or reordered within a thread.
    ASSERT_EQ(seq, next[thread]) << "thread " << thread;
    next[thread]++;
    n.total++;
    bool is_call = !(m.hdr.flags & WH_MSG_F_POSTED);
    ASSERT_EQ(is_call, m.hdr.opcode == kOpCall);
    if (is_call) {
      n.calls++;
      std::span<const uint8_t> parts[] = {m.payload};
      ASSERT_EQ(srv.reply(m.hdr.call_id, kOpCall, 0, thread, parts), Status::Ok);
    }
  }
}

TEST(MultiProcess, StressManyThreadsMillionsOfMessages) {
  const uint32_t kThreads = 4;
  const uint64_t kPerThread = scaled(500000);
  const uint64_t kCallEvery = 64;  // every 64th message is a call
  auto region = make_region(stress_config(1u << 18));
  ASSERT_TRUE(region);

  pid_t child = fork_child([&] {
    // The reply carries our (thread, seq) back: demux by call id.
    return run_client_load(*region, {kThreads, kPerThread, kCallEvery},
                           [](uint32_t t, uint64_t seq) { return make_msg(t, seq); },
                           [](uint32_t t, uint64_t seq, const Message& rep) {
                             Body b{};
                             return check_msg(rep.payload, b) && b.thread == t && b.seq == seq &&
                                    rep.hdr.aux == t;
                           });
  });

  auto srv = attach_when_claimed(*region, 0, test_policy());
  ASSERT_TRUE(srv);
  ServerTally n;
  auto t0 = Clock::now();
  serve_load(*srv, {kThreads, kPerThread, kCallEvery},
             [](const std::vector<uint8_t>& p, uint32_t& thread, uint64_t& seq) {
               Body b{};
               if (!check_msg(p, b)) return false;
               thread = b.thread;
               seq = b.seq;
               return true;
             },
             n);
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_EQ(n.broken, 0u);
  EXPECT_EQ(n.total, kThreads * kPerThread);
  EXPECT_EQ(n.calls, kThreads * (kPerThread / kCallEvery));
  EXPECT_EQ(n.ends, kThreads);
  EXPECT_EQ(wait_child(child), 0);
  RecordProperty("messages", std::to_string(n.total));
  printf("stress: %llu messages (%llu calls) in %.2f s = %.2f M msg/s\n", (unsigned long long)n.total,
         (unsigned long long)n.calls, secs, n.total / secs / 1e6);
}

// Messages of up to WH_COPY_MAX bytes ride in the tail block's copy
// (region.h), a seqlock that the producer rewrites while the consumer may
// be reading it, and whose record reaches the ring only after its tail.
// Several threads post such messages (thread, length, seq, filler,
// checksum) as fast as they can, every 16th a call answered with the same
// bytes: nothing torn, lost, duplicated or reordered, and the copy really
// was used in both directions.
TEST(MultiProcess, SmallMessagesThroughTheTailBlockCopy) {
  const uint32_t kThreads = 3;
  const uint64_t kPerThread = scaled(300000);
  const uint64_t kCallEvery = 16;
  // Body (16) + filler + checksum (8) within the copy's payload room.
  constexpr uint32_t kMaxFill = WH_COPY_MAX - sizeof(wh_msg_hdr) - sizeof(Body) - 8 + 1;
  auto region = make_region(stress_config(1u << 16));
  ASSERT_TRUE(region);

  pid_t child = fork_child([&] {
    return run_client_load(
        *region, {kThreads, kPerThread, kCallEvery},
        [&](uint32_t t, uint64_t seq) { return make_msg(t, seq, kMaxFill); },
        [&](uint32_t t, uint64_t seq, const Message& rep) {
          Body b{};
          return check_msg(rep.payload, b) && b.thread == t && b.seq == seq;
        },
        [](ClientChannel& c) { return c.copy_reads() > 0; });  // replies came in the copy
  });

  auto srv = attach_when_claimed(*region, 0, test_policy());
  ASSERT_TRUE(srv);
  ServerTally n;
  serve_load(*srv, {kThreads, kPerThread, kCallEvery},
             [&](const std::vector<uint8_t>& p, uint32_t& thread, uint64_t& seq) {
               Body b{};
               if (p.size() > WH_COPY_MAX - sizeof(wh_msg_hdr) || !check_msg(p, b)) return false;
               thread = b.thread;
               seq = b.seq;
               return true;
             },
             n);
  EXPECT_EQ(n.broken, 0u);  // a torn copy would break the checksum
  EXPECT_EQ(n.total, kThreads * kPerThread);
  EXPECT_EQ(n.ends, kThreads);
  EXPECT_EQ(wait_child(child), 0);
  EXPECT_GT(srv->copy_reads(), 0u);
  printf("small messages: %llu, %llu of them read from the tail block's copy\n",
         (unsigned long long)n.total, (unsigned long long)srv->copy_reads());
}

// The child's heartbeat must beat even when this process already ran the
// heartbeat thread before fork() (threads do not survive fork).
TEST(MultiProcess, HeartbeatWorksInAChildForkedAfterItStarted) {
  auto region = make_region(small_config(1u << 14, 2));
  ASSERT_TRUE(region);
  std::string err;
  auto mine = ClientChannel::claim(*region, 1, &err, test_policy());  // starts the thread
  ASSERT_TRUE(mine);
  pid_t child = fork_child([&] {
    auto c = ClientChannel::claim(*region, 0, &err, test_policy());
    if (!c || c->wait_attached(5000ms) != Status::Ok) return 10;
    Message rep;
    if (c->call(1, 0, {}, rep, 1, 5000ms) != Status::Ok) return 11;
    return 0;
  });
  auto srv = attach_when_claimed(*region, 0, test_policy());
  ASSERT_TRUE(srv);
  // Stay silent for three heartbeat timeouts: the client must not look dead.
  std::this_thread::sleep_for(3 * 400ms);
  Message m;
  ASSERT_EQ(srv->recv(m, 2s), Status::Ok) << srv->error();
  EXPECT_FALSE(srv->peer_dead());
  ASSERT_EQ(srv->reply(m.hdr.call_id, 1, 0, 0, {}), Status::Ok);
  EXPECT_EQ(wait_child(child), 0);
}

// ------------------------------------------------------------- peer death

// A child client that streams posts and calls until killed.
int streaming_client(Region& region, int64_t limit = -1) {
  std::string err;
  auto c = ClientChannel::claim(region, 0, &err, test_policy());
  if (!c || c->wait_attached(5000ms) != Status::Ok) return 10;
  Message rep;
  for (uint64_t seq = 0; limit < 0 || int64_t(seq) < limit; seq++) {
    auto v = make_msg(0, seq);
    std::span<const uint8_t> parts[] = {v};
    Status s = seq % 16 == 15 ? c->call(kOpCall, 0, parts, rep, 1, 5000ms) : c->post(kOpData, 0, parts);
    if (s != Status::Ok) return 12;
  }
  return 0;
}

TEST(MultiProcess, ClientKilledServerSeesPeerDeadWithin1sAndReclaims) {
  RegionConfig cfg;  // default heartbeat: 100 ms period, 600 ms timeout
  cfg.req_size = cfg.resp_size = 1u << 16;
  cfg.data_size = 4096;
  auto region = make_region(cfg);
  ASSERT_TRUE(region);
  pid_t child = fork_child([&] { return streaming_client(*region); });
  auto srv = attach_when_claimed(*region, 0, test_policy());
  ASSERT_TRUE(srv);
  Message m;
  uint64_t got = 0, next = 0;
  Clock::time_point killed_at{};
  Status s;
  for (;;) {
    s = srv->recv(m, 3s);
    if (s != Status::Ok) break;
    Body b{};
    ASSERT_TRUE(check_msg(m.payload, b));
    ASSERT_EQ(b.seq, next++);
    if (!(m.hdr.flags & WH_MSG_F_POSTED)) {
      std::span<const uint8_t> parts[] = {m.payload};
      Status r = srv->reply(m.hdr.call_id, kOpCall, 0, 0, parts, 100ms);
      if (r != Status::Ok) {
        s = r;
        break;
      }
    }
    if (++got == scaled(20000)) {
      kill(child, SIGKILL);  // mid-stream
      killed_at = Clock::now();
    }
  }
  auto noticed = Clock::now() - killed_at;
  EXPECT_EQ(s, Status::PeerDead) << to_string(s) << " " << srv->error();
  EXPECT_LT(noticed, 1000ms) << std::chrono::duration_cast<std::chrono::milliseconds>(noticed).count();
  EXPECT_EQ(wait_child(child), 128 + SIGKILL);
  printf("client killed: server noticed after %lld ms\n",
         (long long)std::chrono::duration_cast<std::chrono::milliseconds>(noticed).count());

  // Reclaim; a new client process gets the channel and talks to a new server end.
  srv->reclaim();
  EXPECT_EQ(region->channel(0)->state, uint32_t(WH_CHAN_FREE));
  pid_t child2 = fork_child([&] { return streaming_client(*region, 1000); });
  auto srv2 = attach_when_claimed(*region, 0, test_policy());
  ASSERT_TRUE(srv2);
  EXPECT_GT(srv2->generation(), srv->generation());
  next = 0;
  for (;;) {
    s = srv2->recv(m, 3s);
    if (s != Status::Ok) break;
    Body b{};
    ASSERT_TRUE(check_msg(m.payload, b));
    ASSERT_EQ(b.seq, next++);
    if (!(m.hdr.flags & WH_MSG_F_POSTED)) {
      std::span<const uint8_t> parts[] = {m.payload};
      ASSERT_EQ(srv2->reply(m.hdr.call_id, kOpCall, 0, 0, parts), Status::Ok);
    }
  }
  EXPECT_EQ(s, Status::Closed);
  EXPECT_EQ(next, 1000u);
  EXPECT_EQ(wait_child(child2), 0);
}

TEST(MultiProcess, ServerKilledClientCallReturnsPeerDeadWithin1s) {
  auto region = make_region(stress_config(1u << 16));
  ASSERT_TRUE(region);
  // The server lives in the child, forked before this process has threads.
  pid_t child = fork_child([&] {
    auto srv = attach_when_claimed(*region, 0, test_policy());
    if (!srv) return 10;
    Message m;
    for (;;) {
      Status s = srv->recv(m, 10s);
      if (s != Status::Ok) return 11;
      if (!(m.hdr.flags & WH_MSG_F_POSTED)) {
        std::span<const uint8_t> parts[] = {m.payload};
        if (srv->reply(m.hdr.call_id, m.hdr.opcode, 0, 0, parts) != Status::Ok) return 12;
      }
    }
  });
  std::string err;
  auto c = ClientChannel::claim(*region, 0, &err, test_policy());
  ASSERT_TRUE(c) << err;
  ASSERT_EQ(c->wait_attached(5000ms), Status::Ok);
  // Several threads call (no timeout); one kill mid-stream.
  std::atomic<uint64_t> ok_calls{0};
  std::atomic<int64_t> killed_ns{0};
  std::vector<std::thread> ts;
  std::vector<Status> last(3, Status::Ok);
  std::vector<int64_t> ended_ns(3, 0);
  for (int t = 0; t < 3; t++)
    ts.emplace_back([&, t] {
      Message rep;
      for (uint64_t seq = 0;; seq++) {
        auto v = make_msg(uint32_t(t), seq);
        std::span<const uint8_t> parts[] = {v};
        Status s = c->call(kOpCall, 0, parts, rep);
        if (s != Status::Ok) {
          last[t] = s;
          ended_ns[t] = Clock::now().time_since_epoch().count();
          return;
        }
        Body b{};
        if (!check_msg(rep.payload, b) || b.seq != seq || b.thread != uint32_t(t)) {
          last[t] = Status::Corrupt;
          return;
        }
        ok_calls++;
      }
    });
  while (ok_calls.load() < scaled(20000)) std::this_thread::sleep_for(1ms);
  kill(child, SIGKILL);
  killed_ns = Clock::now().time_since_epoch().count();
  for (auto& t : ts) t.join();
  for (int t = 0; t < 3; t++) {
    EXPECT_EQ(last[t], Status::PeerDead) << to_string(last[t]);
    auto after = std::chrono::nanoseconds(ended_ns[t] - killed_ns.load());
    EXPECT_LT(after, 1000ms) << "thread " << t;
    printf("server killed: client thread %d noticed after %lld ms\n", t,
           (long long)std::chrono::duration_cast<std::chrono::milliseconds>(after).count());
  }
  EXPECT_EQ(c->status(), Status::PeerDead);
  EXPECT_EQ(wait_child(child), 128 + SIGKILL);
}

}  // namespace
