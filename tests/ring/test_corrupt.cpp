// A hostile or broken peer: garbage in the region header, the indices, the
// record headers and anywhere else. The survivor must report errors
// (Corrupt, Closed, PeerDead, Timeout...), never crash, never hang, never
// touch memory outside the region: the region lives between PROT_NONE guard
// areas, and the suite also runs under ASan.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <thread>

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

const int kIters = WH_RING_TEST_SCALE > 1 ? 300 : 2000;

RegionConfig corrupt_config() {
  RegionConfig c = small_config(1u << 12, 2);
  c.hb_period_ms = 20;
  c.hb_timeout_ms = 200;
  return c;
}

// Words a peer may scribble on, chosen with a bias towards the interesting
// ones; returns a description for failure messages.
struct Scribbler {
  std::mt19937_64& rng;
  uint8_t* base;
  size_t size;
  const wh_region_hdr& g;

  uint64_t garbage() {
    switch (rng() % 6) {
      case 0: return 0;
      case 1: return ~0ull;
      case 2: return rng() % 64;            // small
      case 3: return rng() % (1u << 16);    // around ring sizes
      case 4: return (rng() % 8192) & ~7ull;  // plausible aligned index
      default: return rng();
    }
  }
  template <class T>
  void put(T* p) {
    *p = T(garbage());
  }
  void once(uint32_t chan) {
    auto* ch = reinterpret_cast<wh_chan_hdr*>(base + g.chan_off + chan * g.chan_stride);
    uint8_t* req = reinterpret_cast<uint8_t*>(ch) + WH_CHAN_HDR_SIZE;
    uint8_t* resp = req + g.req_size;
    switch (rng() % 13) {
      case 0: put(&ch->req_tail); break;
      case 1: put(&ch->resp_head); break;
      case 2: put(&ch->req_head); break;
      case 3: put(&ch->resp_tail); break;
      case 4: ch->state = uint32_t(rng() % 7); break;
      case 5: {  // a record header field in one of the rings
        uint8_t* ring = rng() % 2 ? req : resp;
        uint32_t size = ring == req ? g.req_size : g.resp_size;
        auto* h = reinterpret_cast<wh_msg_hdr*>(ring + ((rng() % size) & ~7ull & ~31ull));
        switch (rng() % 4) {
          case 0: put(&h->len); break;
          case 1: put(&h->magic); break;
          case 2: h->opcode = uint16_t(rng() % 3); break;
          default: put(&h->call_id); break;
        }
        break;
      }
      case 6: {  // any byte of the channel
        size_t off = rng() % g.chan_stride;
        reinterpret_cast<uint8_t*>(ch)[off] = uint8_t(rng());
        break;
      }
      case 7: {  // any aligned word of the region header
        size_t off = (rng() % WH_REGION_HDR_SIZE) & ~7ull;
        put(reinterpret_cast<uint64_t*>(base + off));
        break;
      }
      case 8: put(&ch->generation); break;
      case 9: ch->client_sleeping = uint32_t(garbage()); ch->server_sleeping = uint32_t(garbage()); break;
      case 10: ch->req_bell = uint32_t(garbage()); ch->resp_bell = uint32_t(garbage()); break;
      case 11: {  // a tail block's copy: its tail, or one of its words
        bool req_side = rng() % 2;
        uint64_t* copy_tail = req_side ? &ch->req_copy_tail : &ch->resp_copy_tail;
        uint64_t* words = req_side ? ch->req_copy : ch->resp_copy;
        if (rng() % 2)  // the tail the ring will have next: the copy is read
          *copy_tail = __atomic_load_n(req_side ? &ch->req_tail : &ch->resp_tail, __ATOMIC_RELAXED) +
                       (rng() % 6 + 4) * 8;
        else
          put(&words[rng() % (WH_COPY_MAX / 8)]);
        break;
      }
      default: {  // any aligned word anywhere in the region
        size_t off = (rng() % size) & ~7ull;
        put(reinterpret_cast<uint64_t*>(base + off));
        break;
      }
    }
  }
};

bool allowed(Status s) {
  switch (s) {
    case Status::Ok: case Status::Empty: case Status::Full: case Status::Corrupt:
    case Status::PeerDead: case Status::Closed: case Status::Timeout:
      return true;
    default:
      return false;
  }
}

// Runs op and checks it returned an allowed status within `limit`.
#define BOUNDED(op, limit)                                                              \
  [&] {                                                                                 \
    auto _t0 = Clock::now();                                                            \
    Status _s = (op);                                                                   \
    auto _dt = Clock::now() - _t0;                                                      \
    EXPECT_TRUE(allowed(_s)) << #op << " -> " << to_string(_s) << " iter " << iter;     \
    EXPECT_LT(_dt, limit) << #op << " took too long, iter " << iter;                    \
    return _s;                                                                          \
  }()

enum class Survivor { Server, Client };

void fuzz_loop(Survivor who, uint64_t seed) {
  const RegionConfig cfg = corrupt_config();
  const size_t size = Region::required_size(cfg);
  GuardedMap map(size);
  std::mt19937_64 rng(seed);
  int errors = 0, reattach_ok = 0;
  for (int iter = 0; iter < kIters; iter++) {
    std::string err;
    ASSERT_TRUE(Region::format(map.base, size, cfg, &err)) << err;
    auto region = Region::attach_memory(map.base, size, false, cfg, &err);
    ASSERT_TRUE(region) << err;
    auto client = ClientChannel::claim(*region, 0, &err, test_policy());
    auto server = ServerChannel::attach(*region, 0, &err, test_policy());
    ASSERT_TRUE(client && server);
    // Some honest traffic first, so indices are not zero and records exist.
    Message m, rep;
    int honest = int(rng() % 40);
    for (int i = 0; i < honest; i++) {
      std::vector<uint8_t> body(rng() % 300, uint8_t(i));
      std::span<const uint8_t> parts[] = {body};
      ASSERT_EQ(client->post(1, 0, parts), Status::Ok);
      // The server keeps up (the last few stay queued); a few stray replies.
      if (i < honest - 3) {
        ASSERT_EQ(server->try_recv(m), Status::Ok);
      }
      if (rng() % 4 == 0) {
        ASSERT_EQ(server->reply(12345 + i, 1, 0, 0, {}), Status::Ok);
      }
    }
    Scribbler sc{rng, map.base, size, region->geometry()};
    int n = 1 + int(rng() % 4);
    for (int i = 0; i < n; i++) sc.once(uint32_t(rng() % 2));

    Status last = Status::Ok;
    if (who == Survivor::Server) {
      for (int op = 0; op < 64; op++) {
        Status s = BOUNDED(server->try_recv(m), 1000ms);
        if (s == Status::Ok && !(m.hdr.flags & WH_MSG_F_POSTED))
          s = BOUNDED(server->reply(m.hdr.call_id, 1, 0, 0, {}, 2ms), 1000ms);
        if (s != Status::Ok) {
          last = s;
          break;
        }
      }
      if (last == Status::Ok || last == Status::Empty) last = BOUNDED(server->recv(m, 1ms), 1000ms);
      std::vector<uint8_t> body(64);
      std::span<const uint8_t> parts[] = {body};
      for (int i = 0; i < 8 && last != Status::Corrupt; i++)
        BOUNDED(server->reply(777, 1, 0, 0, parts, 1ms), 1000ms);
      server->peer_dead();
    } else {
      std::vector<uint8_t> body(rng() % 1500);
      std::span<const uint8_t> parts[] = {body};
      for (int op = 0; op < 8; op++) {
        Status s = BOUNDED(client->post(2, 0, parts, 1, 2ms), 1000ms);
        if (s != Status::Ok) {
          last = s;
          break;
        }
      }
      Status s = BOUNDED(client->call(3, 0, parts, rep, 1, 1ms), 1000ms);
      if (last == Status::Ok) last = s;
    }
    if (last == Status::Corrupt || last == Status::Closed || last == Status::PeerDead) errors++;

    // A fresh attach over the scribbled memory either refuses or yields a
    // geometry inside the mapping.
    auto again = Region::attach_memory(map.base, size, false, cfg, &err);
    if (again) {
      reattach_ok++;
      const auto& g = again->geometry();
      EXPECT_LE(g.chan_off + uint64_t(g.nchan) * g.chan_stride, size);
      EXPECT_LE(g.max_msg, std::min(g.req_size, g.resp_size) / 2);
    }
    client.reset();
    server.reset();
  }
  printf("%s survivor: %d of %d iterations ended in an error status; %d re-attaches accepted\n",
         who == Survivor::Server ? "server" : "client", errors, kIters, reattach_ok);
  EXPECT_GT(errors, kIters / 20);
}

TEST(Corrupt, ServerSurvivesGarbage) { fuzz_loop(Survivor::Server, 0x5eed0001); }
TEST(Corrupt, ClientSurvivesGarbage) { fuzz_loop(Survivor::Client, 0x5eed0002); }

// The region header: random garbage in every field, many times: attach
// refuses or gives a geometry that stays inside the mapping; a channel of an
// accepted region can be claimed and used without faults.
TEST(Corrupt, RegionHeaderGarbage) {
  const RegionConfig cfg = corrupt_config();
  const size_t size = Region::required_size(cfg);
  GuardedMap map(size);
  std::mt19937_64 rng(0x5eed0003);
  int accepted = 0;
  for (int iter = 0; iter < kIters * 10; iter++) {
    std::string err;
    ASSERT_TRUE(Region::format(map.base, size, cfg, &err));
    auto* words = reinterpret_cast<uint32_t*>(map.base);
    int n = 1 + int(rng() % 3);
    for (int i = 0; i < n; i++) {
      uint32_t w = uint32_t(rng() % 24);  // the 88 meaningful bytes + some pad
      words[w] = rng() % 3 ? uint32_t(rng()) : words[w] ^ (1u << (rng() % 32));
    }
    auto r = Region::attach_memory(map.base, size, false, cfg, &err);
    if (!r) continue;
    accepted++;
    const auto& g = r->geometry();
    ASSERT_LE(g.chan_off + uint64_t(g.nchan) * g.chan_stride, size);
    auto c = ClientChannel::claim(*r, -1, &err, test_policy());
    if (!c) continue;
    std::vector<uint8_t> body(c->max_msg());
    std::span<const uint8_t> parts[] = {body};
    EXPECT_EQ(c->post(1, 0, parts), Status::Ok);
    // Touch the whole data area: it must be inside the mapping.
    std::memset(c->data().data(), 0x5a, c->data().size());
    auto s = ServerChannel::attach(*r, c->index(), &err, test_policy());
    ASSERT_TRUE(s);
    Message m;
    EXPECT_EQ(s->try_recv(m), Status::Ok);
  }
  printf("%d of %d corrupted headers accepted (harmless fields)\n", accepted, kIters * 10);
}

// Two processes: a hostile client child streams honest posts and calls mixed
// with scribbling; the server here keeps serving, reclaiming after each
// failure, for a fixed time.
TEST(Corrupt, HostileClientProcess) {
  const RegionConfig cfg = corrupt_config();
  const size_t size = Region::required_size(cfg);
  GuardedMap map(size);
  std::string err;
  ASSERT_TRUE(Region::format(map.base, size, cfg, &err));
  pid_t child = fork_child([&] {
    std::string e;
    auto region = Region::attach_memory(map.base, size, false, cfg, &e);
    if (!region) return 10;
    std::mt19937_64 rng(0x5eed0004);
    Scribbler sc{rng, map.base, size, region->geometry()};
    for (;;) {
      auto c = ClientChannel::claim(*region, 0, &e, test_policy());
      if (!c) {
        // Hostile: if the server does not free it, force it.
        std::this_thread::sleep_for(1ms);
        if (rng() % 50 == 0) region->channel(0)->state = WH_CHAN_FREE;
        continue;
      }
      c->wait_attached(200ms);
      Message rep;
      for (int i = 0; i < 200; i++) {
        std::vector<uint8_t> body(rng() % 200);
        std::span<const uint8_t> parts[] = {body};
        if (rng() % 4 == 0)
          c->call(1, 0, parts, rep, 1, 2ms);
        else
          c->post(1, 0, parts, 1, 2ms);
        if (rng() % 20 == 0) sc.once(0);
      }
    }
  });
  auto region = Region::attach_memory(map.base, size, false, cfg, &err);
  ASSERT_TRUE(region);
  std::map<Status, int> ends;
  auto stop = Clock::now() + std::chrono::milliseconds(WH_RING_TEST_SCALE > 1 ? 3000 : 1500);
  int iter = 0;
  uint64_t msgs = 0;
  while (Clock::now() < stop) {
    iter++;
    std::unique_ptr<ServerChannel> srv;
    auto t0 = Clock::now();
    while (!srv && Clock::now() - t0 < 200ms) {
      srv = ServerChannel::attach(*region, 0, &err, test_policy());
      if (!srv) std::this_thread::sleep_for(200us);
    }
    if (!srv) continue;
    Message m;
    Status s;
    auto serve_until = Clock::now() + 300ms;
    for (;;) {
      s = BOUNDED(srv->recv(m, 5ms), 1000ms);
      if (s == Status::Timeout) {
        if (Clock::now() > serve_until) break;
        continue;
      }
      if (s != Status::Ok) break;
      msgs++;
      if (!(m.hdr.flags & WH_MSG_F_POSTED)) {
        s = BOUNDED(srv->reply(m.hdr.call_id, 1, 0, 0, {}, 2ms), 1000ms);
        if (s != Status::Ok) break;
      }
    }
    ends[s]++;
    srv->reclaim();
  }
  kill(child, SIGKILL);
  EXPECT_EQ(wait_child(child), 128 + SIGKILL);  // the hostile peer never crashed on its own
  printf("hostile client: %d sessions, %llu messages; endings:", iter, (unsigned long long)msgs);
  for (auto& [s, n] : ends) printf(" %s=%d", to_string(s), n);
  printf("\n");
  EXPECT_GT(ends[Status::Corrupt] + ends[Status::Closed], 0);
}

// The reverse: a hostile server child answers some calls and scribbles; the
// client here keeps calling with timeouts, claiming anew after failures.
TEST(Corrupt, HostileServerProcess) {
  const RegionConfig cfg = corrupt_config();
  const size_t size = Region::required_size(cfg);
  GuardedMap map(size);
  std::string err;
  ASSERT_TRUE(Region::format(map.base, size, cfg, &err));
  pid_t child = fork_child([&] {
    std::string e;
    auto region = Region::attach_memory(map.base, size, false, cfg, &e);
    if (!region) return 10;
    std::mt19937_64 rng(0x5eed0005);
    Scribbler sc{rng, map.base, size, region->geometry()};
    for (;;) {
      auto s = ServerChannel::attach(*region, 0, &e, test_policy());
      if (!s) {
        std::this_thread::sleep_for(200us);
        uint32_t st = region->channel(0)->state;
        if (st != WH_CHAN_FREE && st != WH_CHAN_CLAIMED && rng() % 20 == 0)
          region->channel(0)->state = WH_CHAN_FREE;
        continue;
      }
      Message m;
      for (int i = 0; i < 300; i++) {
        Status st = s->recv(m, 2ms);
        if (st == Status::Ok && !(m.hdr.flags & WH_MSG_F_POSTED))
          s->reply(m.hdr.call_id, 1, 0, 0, {}, 2ms);
        else if (st != Status::Ok && st != Status::Timeout)
          break;
        if (rng() % 25 == 0) sc.once(0);
      }
      s->reclaim();
    }
  });
  auto region = Region::attach_memory(map.base, size, false, cfg, &err);
  ASSERT_TRUE(region);
  std::map<Status, int> ends;
  auto stop = Clock::now() + std::chrono::milliseconds(WH_RING_TEST_SCALE > 1 ? 3000 : 1500);
  int iter = 0;
  uint64_t ok = 0;
  while (Clock::now() < stop) {
    iter++;
    auto c = ClientChannel::claim(*region, 0, &err, test_policy());
    if (!c) {
      std::this_thread::sleep_for(200us);
      continue;
    }
    if (c->wait_attached(100ms) != Status::Ok) continue;
    Message rep;
    Status s = Status::Ok;
    for (int i = 0; i < 500 && s == Status::Ok; i++) {
      std::vector<uint8_t> body(i % 100);
      std::span<const uint8_t> parts[] = {body};
      s = BOUNDED(i % 3 ? c->post(1, 0, parts, 1, 5ms) : c->call(1, 0, parts, rep, 1, 5ms), 2000ms);
      if (s == Status::Ok) ok++;
      if (s == Status::Timeout) s = Status::Ok;  // a silent server is allowed
    }
    ends[s]++;
  }
  kill(child, SIGKILL);
  EXPECT_EQ(wait_child(child), 128 + SIGKILL);
  printf("hostile server: %d sessions, %llu ok ops; endings:", iter, (unsigned long long)ok);
  for (auto& [s, n] : ends) printf(" %s=%d", to_string(s), n);
  printf("\n");
  EXPECT_GT(ends[Status::Corrupt] + ends[Status::Closed] + ends[Status::PeerDead], 0);
}

}  // namespace
