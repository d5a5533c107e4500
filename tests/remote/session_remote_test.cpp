// The session's bodies of remote_api.def (DataAreaWrite, MemcpyDtoHInline)
// against hostile requests, straight through Session::handle as the
// server's ucx:// reader calls it: offsets into the status page, past the
// data area's end or overflowing, oversize copies, device ranges that are
// not the session's, forged streams. Also the valid uses.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "session_fixture.hpp"

using namespace wh::server;
using namespace wh::proto;

namespace {

struct Fixture : wh::test::SessionFixture {
  void SetUp() override {
    data.assign(kPinnedHeapOffset + (1 << 20), 0);  // status page, staging, a 1 MiB pinned heap
    SessionFixture::SetUp();
  }
  // A request with a tail, as the reader hands it over.
  template <Op O>
  DispatchResult send(const typename OpTraits<O>::Request& rq, std::span<const uint8_t> tail, uint32_t flags = 0,
                      uint32_t max_msg = 1 << 19) {
    auto b = fixed_bytes(rq);
    std::vector<uint8_t> p(b.begin(), b.end());
    p.insert(p.end(), tail.begin(), tail.end());
    DispatchResult out;
    s->handle(uint16_t(O), flags, p, max_msg, out);
    return out;
  }
};

std::vector<uint8_t> bytes(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; i++) v[i] = uint8_t(seed + i * 7);
  return v;
}

TEST_F(Fixture, DataAreaWriteLandsInThePinnedHeap) {
  auto b = bytes(5000, 3);
  EXPECT_EQ(send<Op::DataAreaWrite>({kPinnedHeapOffset + 256}, b).status, 0);
  EXPECT_EQ(std::memcmp(data.data() + kPinnedHeapOffset + 256, b.data(), b.size()), 0);
}

TEST_F(Fixture, DataAreaWriteRefusesTheStatusPageAndStaging) {
  auto b = bytes(64, 1);
  std::vector<uint8_t> before(data.begin(), data.begin() + kPinnedHeapOffset);
  EXPECT_EQ(send<Op::DataAreaWrite>({0}, b).status, cudaErrorInvalidValue);
  EXPECT_EQ(send<Op::DataAreaWrite>({kStagingOffset}, b).status, cudaErrorInvalidValue);
  EXPECT_EQ(send<Op::DataAreaWrite>({kPinnedHeapOffset - 8}, b).status, cudaErrorInvalidValue);
  EXPECT_TRUE(std::equal(before.begin(), before.end(), data.begin()));
}

TEST_F(Fixture, DataAreaWriteRefusesPastTheEndAndOverflow) {
  auto b = bytes(64, 1);
  EXPECT_EQ(send<Op::DataAreaWrite>({data.size() - 63}, b).status, cudaErrorInvalidValue);
  EXPECT_EQ(send<Op::DataAreaWrite>({data.size()}, b).status, cudaErrorInvalidValue);
  EXPECT_EQ(send<Op::DataAreaWrite>({~uint64_t(0) - 8}, b).status, cudaErrorInvalidValue);
  EXPECT_EQ(send<Op::DataAreaWrite>({data.size() - 64}, b).status, 0);  // the last 64 bytes are fine
}

TEST_F(Fixture, DataAreaWriteTailBoundedByTheMessageSize) {
  auto b = bytes(4096, 1);
  EXPECT_EQ(send<Op::DataAreaWrite>({kPinnedHeapOffset}, b, 0, 1024).status, kBadRequest);
}

TEST_F(Fixture, PostedDataAreaWriteErrorSurfacesLater) {
  auto b = bytes(64, 1);
  DispatchResult out = send<Op::DataAreaWrite>({0}, b, WH_MSG_F_POSTED);
  (void)out;
  EXPECT_NE(run<Op::DeviceSynchronize>({}), 0) << "the posted write's error is reported at the next sync";
}

TEST_F(Fixture, DtoHInlineReturnsTheBytes) {
  uint64_t d = alloc(1 << 18);
  auto b = bytes(1 << 18, 9);
  for (size_t off = 0; off < b.size(); off += 1 << 16)
    ASSERT_EQ(send<Op::MemcpyHtoDInline>({d + off, 0}, {b.data() + off, 1 << 16}).status, 0);
  DispatchResult out = send<Op::MemcpyDtoHInline>({d, b.size(), 0}, {});
  ASSERT_EQ(out.status, 0);
  ASSERT_EQ(out.tail.size(), b.size());
  EXPECT_EQ(std::memcmp(out.tail.data(), b.data(), b.size()), 0);
  out = send<Op::MemcpyDtoHInline>({d + 100, 10, 0}, {});
  ASSERT_EQ(out.tail.size(), 10u);
  EXPECT_EQ(std::memcmp(out.tail.data(), b.data() + 100, 10), 0);
}

TEST_F(Fixture, DtoHInlineRefusesHostileRanges) {
  uint64_t d = alloc(4096);
  auto st = [&](uint64_t src, uint64_t n, uint64_t stream = 0) {
    DispatchResult out = send<Op::MemcpyDtoHInline>({src, n, stream}, {});
    EXPECT_TRUE(out.status == 0 || out.tail.empty()) << "no bytes with an error";
    return out.status;
  };
  EXPECT_EQ(st(d, 4097), cudaErrorInvalidValue);                  // past the allocation
  EXPECT_EQ(st(d + 4096, 1), cudaErrorInvalidValue);
  EXPECT_EQ(st(0x1000, 16), cudaErrorInvalidValue);               // not the session's memory
  EXPECT_EQ(st(~uint64_t(0) - 4, 16), cudaErrorInvalidValue);     // overflowing
  EXPECT_EQ(st(d, kRemoteChunkMax + 1), cudaErrorInvalidValue);   // larger than a chunk
  EXPECT_EQ(st(d, ~uint64_t(0)), cudaErrorInvalidValue);          // would allocate 16 EiB
  EXPECT_NE(st(d, 16, 0xdeadbeef), 0);                            // a forged stream
  EXPECT_EQ(st(d, 4096), 0);
}

TEST_F(Fixture, DtoHInlineMalformedIsAViolation) {
  uint8_t shortreq[5] = {};
  DispatchResult out;
  uint64_t v0 = s->violations();
  s->handle(uint16_t(Op::MemcpyDtoHInline), 0, shortreq, 1 << 19, out);
  EXPECT_EQ(out.status, kBadRequest);
  EXPECT_GT(s->violations(), v0);
}

}  // namespace

// ---- peer copies between servers (peer_api.def): the destination's
// tickets against forged, replayed, expired and mismatched presentations,
// and the session bodies against hostile requests.
namespace {

using Tickets = wh::server::PeerTickets;
using namespace std::chrono_literals;

TEST(PeerTickets, IssueClaimFillTake) {
  Tickets pt;
  auto now = Tickets::Clock::now();
  Tickets::Ticket t;
  ASSERT_TRUE(pt.issue(7, 0x1000, 64, now, 1000ms, &t));
  uint64_t sid = 0;
  std::string why;
  uint8_t* buf = pt.claim(t, 0x1000, 64, now, &sid, &why);
  ASSERT_NE(buf, nullptr) << why;
  EXPECT_EQ(sid, 7u);
  std::memset(buf, 0xab, 64);
  pt.filled(t, true);
  uint64_t dst = 0;
  std::vector<uint8_t> got;
  ASSERT_TRUE(pt.take(7, t, now, &dst, &got, &why)) << why;
  EXPECT_EQ(dst, 0x1000u);
  EXPECT_EQ(got, std::vector<uint8_t>(64, 0xab));
  EXPECT_EQ(pt.size(), 0u);
}

TEST(PeerTickets, ForgedReplayedAndExpiredAreRefused) {
  Tickets pt;
  auto now = Tickets::Clock::now();
  Tickets::Ticket t;
  ASSERT_TRUE(pt.issue(1, 0x1000, 64, now, 1000ms, &t));
  uint64_t sid = 0;
  std::string why;
  Tickets::Ticket forged{{t.v[0], t.v[1] ^ 1}};
  EXPECT_EQ(pt.claim(forged, 0x1000, 64, now, &sid, &why), nullptr);
  EXPECT_EQ(why, "unknown or expired ticket");
  ASSERT_NE(pt.claim(t, 0x1000, 64, now, &sid, &why), nullptr);
  EXPECT_EQ(pt.claim(t, 0x1000, 64, now, &sid, &why), nullptr) << "a ticket is used once";
  EXPECT_EQ(why, "ticket already used");
  pt.filled(t, true);
  EXPECT_EQ(pt.claim(t, 0x1000, 64, now, &sid, &why), nullptr) << "nor again once filled";
  uint64_t dst;
  std::vector<uint8_t> got;
  ASSERT_TRUE(pt.take(1, t, now, &dst, &got, &why));
  EXPECT_FALSE(pt.take(1, t, now, &dst, &got, &why)) << "a commit is not replayed";
  EXPECT_EQ(pt.claim(t, 0x1000, 64, now, &sid, &why), nullptr) << "nor the ticket after it";
  // Expired: a ticket of 1 ms presented 5 ms later.
  Tickets::Ticket old;
  ASSERT_TRUE(pt.issue(1, 0x1000, 64, now, 1ms, &old));
  EXPECT_EQ(pt.claim(old, 0x1000, 64, now + 5ms, &sid, &why), nullptr);
  EXPECT_EQ(pt.size(), 0u) << "expired tickets are dropped";
}

TEST(PeerTickets, RangeAndLengthMustMatchAndBurnTheTicket) {
  Tickets pt;
  auto now = Tickets::Clock::now();
  uint64_t sid = 0;
  std::string why;
  struct Try {
    uint64_t dst, bytes;
  };
  for (Try x : {Try{0x1001, 64}, Try{0x0fff, 64}, Try{0x1000, 65}, Try{0x1000, 63}, Try{0x1000, 1ull << 40}}) {
    Tickets::Ticket t;
    ASSERT_TRUE(pt.issue(1, 0x1000, 64, now, 1000ms, &t));
    EXPECT_EQ(pt.claim(t, x.dst, x.bytes, now, &sid, &why), nullptr) << x.dst << " " << x.bytes;
    EXPECT_EQ(pt.claim(t, 0x1000, 64, now, &sid, &why), nullptr) << "burnt after a mismatch";
  }
  EXPECT_EQ(pt.size(), 0u);
}

TEST(PeerTickets, OnlyTheIssuingSessionTakesAndOnlyWhenFilled) {
  Tickets pt;
  auto now = Tickets::Clock::now();
  Tickets::Ticket t;
  ASSERT_TRUE(pt.issue(1, 0x1000, 64, now, 1000ms, &t));
  uint64_t dst, sid;
  std::vector<uint8_t> got;
  std::string why;
  EXPECT_FALSE(pt.take(1, t, now, &dst, &got, &why)) << "nothing pushed yet";
  ASSERT_NE(pt.claim(t, 0x1000, 64, now, &sid, &why), nullptr);
  EXPECT_FALSE(pt.take(1, t, now, &dst, &got, &why)) << "still arriving";
  pt.filled(t, true);
  EXPECT_FALSE(pt.take(2, t, now, &dst, &got, &why)) << "another session's ticket";
  EXPECT_TRUE(pt.take(1, t, now, &dst, &got, &why));
  // A push that broke off drops the ticket.
  ASSERT_TRUE(pt.issue(1, 0x1000, 64, now, 1000ms, &t));
  ASSERT_NE(pt.claim(t, 0x1000, 64, now, &sid, &why), nullptr);
  pt.filled(t, false);
  EXPECT_FALSE(pt.take(1, t, now, &dst, &got, &why));
  EXPECT_EQ(pt.size(), 0u);
}

TEST(PeerTickets, BoundedPerSessionAndDroppedWithIt) {
  Tickets pt;
  auto now = Tickets::Clock::now();
  Tickets::Ticket t;
  for (size_t i = 0; i < Tickets::kPerSession; i++) ASSERT_TRUE(pt.issue(1, 0x1000, 64, now, 1000ms, &t));
  EXPECT_FALSE(pt.issue(1, 0x1000, 64, now, 1000ms, &t));
  EXPECT_TRUE(pt.issue(2, 0x1000, 64, now, 1000ms, &t));
  pt.drop_session(1);
  EXPECT_EQ(pt.size(), 1u);
}

struct PeerFixture : Fixture {
  Tickets tickets;
  int pushes = 0;
  void SetUp() override {
    Fixture::SetUp();
    // The "destination server" is this process: the pusher presents the
    // ticket to the same registry, as the daemon's peer link does.
    s->set_peer(&tickets, [this](const std::string& url, const Tickets::Ticket& t, uint64_t dst,
                                 std::span<const uint8_t> b) -> int32_t {
      pushes++;
      EXPECT_EQ(url, "ucx://10.0.0.2:7712");
      uint64_t sid;
      std::string why;
      uint8_t* buf = tickets.claim(t, dst, b.size(), Tickets::Clock::now(), &sid, &why);
      if (!buf) return cudaErrorInvalidValue;
      std::memcpy(buf, b.data(), b.size());
      tickets.filled(t, true);
      return 0;
    });
  }
  std::span<const uint8_t> url() {
    static const char u[] = "ucx://10.0.0.2:7712";
    return {reinterpret_cast<const uint8_t*>(u), sizeof u - 1};
  }
};

TEST_F(Fixture, PeerCallsWithoutPeersAreNotSupported) {
  uint64_t d = alloc(4096);
  EXPECT_EQ(send<Op::PeerTicket>({d, 64}, {}).status, cudaErrorNotSupported);
  EXPECT_EQ(send<Op::PeerCommit>({{1, 2}}, {}).status, cudaErrorNotSupported);
  static const char u[] = "ucx://10.0.0.2:7712";
  EXPECT_EQ(send<Op::PeerPush>({d, 64, {1, 2}, d}, {reinterpret_cast<const uint8_t*>(u), sizeof u - 1}).status,
            cudaErrorNotSupported);
}

TEST_F(PeerFixture, PushAndCommitMoveTheBytes) {
  uint64_t a = alloc(1 << 16), b = alloc(1 << 16);
  auto src = bytes(1 << 16, 5);
  ASSERT_EQ(send<Op::MemcpyHtoDInline>({a, 0}, src).status, 0);
  DispatchResult t = send<Op::PeerTicket>({b + 256, 4096}, {});
  ASSERT_EQ(t.status, 0);
  PeerTicketResp tr;
  std::memcpy(&tr, t.fixed.data(), sizeof tr);
  EXPECT_EQ(tr.expires_ms, kPeerTicketMs);
  ASSERT_EQ(send<Op::PeerPush>({a + 100, 4096, {tr.ticket[0], tr.ticket[1]}, b + 256}, url()).status, 0);
  ASSERT_EQ(send<Op::PeerCommit>({{tr.ticket[0], tr.ticket[1]}}, {}).status, 0);
  DispatchResult out = send<Op::MemcpyDtoHInline>({b + 256, 4096, 0}, {});
  ASSERT_EQ(out.status, 0);
  EXPECT_EQ(std::memcmp(out.tail.data(), src.data() + 100, 4096), 0);
  EXPECT_EQ(stats.bytes_peer_in.load(), 4096u);
  EXPECT_EQ(stats.bytes_peer_out.load(), 4096u);
  // Replayed: the commit and the push of a used ticket.
  EXPECT_EQ(send<Op::PeerCommit>({{tr.ticket[0], tr.ticket[1]}}, {}).status, cudaErrorInvalidValue);
  EXPECT_NE(send<Op::PeerPush>({a, 4096, {tr.ticket[0], tr.ticket[1]}, b + 256}, url()).status, 0);
}

TEST_F(PeerFixture, HostileTicketsAndRangesAreRefused) {
  uint64_t a = alloc(8192), b = alloc(8192);
  auto st = [&](uint64_t dst, uint64_t n) { return send<Op::PeerTicket>({dst, n}, {}).status; };
  EXPECT_EQ(st(b, 0), cudaErrorInvalidValue);
  EXPECT_EQ(st(b, 8193), cudaErrorInvalidValue);         // past the allocation
  EXPECT_EQ(st(b + 8192, 1), cudaErrorInvalidValue);
  EXPECT_EQ(st(0x1000, 16), cudaErrorInvalidValue);      // not the session's memory
  EXPECT_EQ(st(~uint64_t(0) - 4, 16), cudaErrorInvalidValue);
  EXPECT_EQ(st(b, kPeerChunkMax + 1), cudaErrorInvalidValue);
  EXPECT_EQ(tickets.size(), 0u);
  // Forged ticket: the destination refuses the push; a forged commit too.
  EXPECT_EQ(send<Op::PeerPush>({a, 64, {0x1234, 0x5678}, b}, url()).status, cudaErrorInvalidValue);
  EXPECT_EQ(send<Op::PeerCommit>({{0x1234, 0x5678}}, {}).status, cudaErrorInvalidValue);
  // A push for another range or length than the ticket's burns it.
  DispatchResult t = send<Op::PeerTicket>({b, 64}, {});
  PeerTicketResp tr;
  std::memcpy(&tr, t.fixed.data(), sizeof tr);
  EXPECT_EQ(send<Op::PeerPush>({a, 128, {tr.ticket[0], tr.ticket[1]}, b}, url()).status, cudaErrorInvalidValue);
  EXPECT_EQ(send<Op::PeerCommit>({{tr.ticket[0], tr.ticket[1]}}, {}).status, cudaErrorInvalidValue);
  // The source range is checked before anything is sent; so is the URL.
  int before = pushes;
  EXPECT_EQ(send<Op::PeerPush>({a + 8000, 4096, {1, 2}, b}, url()).status, cudaErrorInvalidValue);
  EXPECT_EQ(send<Op::PeerPush>({0x1000, 64, {1, 2}, b}, url()).status, cudaErrorInvalidValue);
  EXPECT_EQ(send<Op::PeerPush>({a, 64, {1, 2}, b}, {}).status, cudaErrorInvalidValue);
  static const char bad[] = "tcp://1.2.3.4:5";
  EXPECT_EQ(send<Op::PeerPush>({a, 64, {1, 2}, b}, {reinterpret_cast<const uint8_t*>(bad), sizeof bad - 1}).status,
            cudaErrorInvalidValue);
  std::vector<uint8_t> huge(kPeerUrlMax + 1, 'x');
  EXPECT_EQ(send<Op::PeerPush>({a, 64, {1, 2}, b}, huge).status, kBadRequest);
  EXPECT_EQ(pushes, before);
  // Memory freed between the ticket and the commit: the commit is refused.
  t = send<Op::PeerTicket>({b, 64}, {});
  std::memcpy(&tr, t.fixed.data(), sizeof tr);
  ASSERT_EQ(send<Op::PeerPush>({a, 64, {tr.ticket[0], tr.ticket[1]}, b}, url()).status, 0);
  ASSERT_EQ(run<Op::Free>({b}), 0);
  EXPECT_EQ(send<Op::PeerCommit>({{tr.ticket[0], tr.ticket[1]}}, {}).status, cudaErrorInvalidValue);
}

}  // namespace
