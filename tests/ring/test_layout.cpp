// Layout and framing: region header validation, RingWriter/RingReader over a
// plain buffer (wrap-around, padding, implicit skip, full/empty, sizes), and
// the reader's/writer's rejection of peer-written garbage.
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <functional>
#include <random>
#include <vector>

#include "ring_test_util.hpp"

using namespace wh::ring;
using namespace wh::ring::test;

namespace {

// ------------------------------------------------------------ region header

struct Formatted {
  RegionConfig cfg = small_config(1u << 14, 2);
  size_t size = Region::required_size(cfg);
  GuardedMap map{size};
  Formatted() {
    std::string err;
    EXPECT_TRUE(Region::format(map.base, size, cfg, &err)) << err;
  }
  wh_region_hdr* hdr() { return reinterpret_cast<wh_region_hdr*>(map.base); }
  std::unique_ptr<Region> attach(std::string* err) {
    return Region::attach_memory(map.base, size, false, cfg, err);
  }
};

TEST(RegionHeader, FormatThenAttachRoundTrip) {
  Formatted f;
  std::string err;
  auto r = f.attach(&err);
  ASSERT_TRUE(r) << err;
  const auto& g = r->geometry();
  EXPECT_EQ(g.magic, WH_REGION_MAGIC);
  EXPECT_EQ(g.version, WH_REGION_VERSION);
  EXPECT_EQ(g.nchan, 2u);
  EXPECT_EQ(g.req_size, 1u << 14);
  EXPECT_EQ(g.max_msg, (1u << 14) / 2 - sizeof(wh_msg_hdr));
  EXPECT_EQ(g.chan_off % 4096, 0u);
  EXPECT_EQ(g.chan_stride % 4096, 0u);
  EXPECT_LE(g.chan_off + g.nchan * g.chan_stride, f.size);
  // Channels are laid out back to back and start FREE with generation 1.
  for (uint32_t i = 0; i < 2; i++) {
    EXPECT_EQ(r->channel(i)->state, uint32_t(WH_CHAN_FREE));
    EXPECT_EQ(r->channel(i)->generation, 1u);
    EXPECT_EQ(r->channel_base(i), f.map.base + g.chan_off + i * g.chan_stride);
  }
  EXPECT_EQ(r->channel(2), nullptr);
  // Control words of the two sides live on distinct cache lines.
  EXPECT_EQ(offsetof(wh_chan_hdr, req_tail) % WH_CACHELINE, 0u);
  EXPECT_NE(offsetof(wh_chan_hdr, req_tail) / 64, offsetof(wh_chan_hdr, req_head) / 64);
  EXPECT_NE(offsetof(wh_chan_hdr, resp_tail) / 64, offsetof(wh_chan_hdr, resp_head) / 64);
  EXPECT_NE(offsetof(wh_chan_hdr, client_heartbeat) / 64, offsetof(wh_chan_hdr, server_heartbeat) / 64);
  // Each tail's copy fills the rest of the tail's block, right after it,
  // and the consumer's head starts the next line.
  EXPECT_EQ(offsetof(wh_chan_hdr, req_copy_tail), offsetof(wh_chan_hdr, req_tail) + 8);
  EXPECT_EQ(offsetof(wh_chan_hdr, req_copy) + WH_COPY_MAX, offsetof(wh_chan_hdr, req_tail) + WH_TAIL_BLOCK);
  EXPECT_EQ(offsetof(wh_chan_hdr, req_head), offsetof(wh_chan_hdr, req_tail) + WH_TAIL_BLOCK);
  EXPECT_EQ(offsetof(wh_chan_hdr, resp_copy_tail), offsetof(wh_chan_hdr, resp_tail) + 8);
  EXPECT_EQ(offsetof(wh_chan_hdr, resp_copy) + WH_COPY_MAX, offsetof(wh_chan_hdr, resp_tail) + WH_TAIL_BLOCK);
  EXPECT_EQ(offsetof(wh_chan_hdr, resp_head), offsetof(wh_chan_hdr, resp_tail) + WH_TAIL_BLOCK);
  EXPECT_EQ(offsetof(wh_chan_hdr, resp_tail) % WH_CACHELINE, 0u);
}

TEST(RegionHeader, MemfdCreateAndAttachFd) {
  std::string err;
  auto cfg = small_config();
  auto a = Region::create_memfd("wh-test", cfg, &err);
  ASSERT_TRUE(a) << err;
  auto b = Region::attach_fd(a->fd(), &err);
  ASSERT_TRUE(b) << err;
  EXPECT_NE(a->base(), b->base());
  EXPECT_EQ(b->geometry().server_epoch, a->geometry().server_epoch);
  a->channel(0)->client_pid = 1234;
  EXPECT_EQ(b->channel(0)->client_pid, 1234u);
}

TEST(RegionHeader, FileCreateAndAttach) {
  std::string err;
  std::string path = "/dev/shm/wh-ring-test-" + std::to_string(getpid());
  auto cfg = small_config();
  auto a = Region::create_file(path, cfg, &err);
  ASSERT_TRUE(a) << err;
  auto b = Region::attach_file(path, &err);
  ASSERT_TRUE(b) << err;
  EXPECT_EQ(b->geometry().nchan, 1u);
  unlink(path.c_str());
  EXPECT_FALSE(Region::attach_file(path, &err));
}

struct BadField {
  const char* name;
  std::function<void(wh_region_hdr*)> mutate;
};

class RegionHeaderBad : public ::testing::TestWithParam<BadField> {};

TEST_P(RegionHeaderBad, AttachRejects) {
  Formatted f;
  GetParam().mutate(f.hdr());
  std::string err;
  EXPECT_FALSE(f.attach(&err)) << GetParam().name;
  EXPECT_NE(err.find("bad region header"), std::string::npos) << err;
}

const BadField kBadFields[] = {
    {"magic", [](wh_region_hdr* h) { h->magic ^= 1; }},
    {"version", [](wh_region_hdr* h) { h->version = WH_REGION_VERSION + 1; }},
    {"hdr_size", [](wh_region_hdr* h) { h->hdr_size = 8192; }},
    {"chan_hdr_size", [](wh_region_hdr* h) { h->chan_hdr_size = 64; }},
    {"region_size_gt_mapping", [](wh_region_hdr* h) { h->region_size += 4096; }},
    {"region_size_small", [](wh_region_hdr* h) { h->region_size = 8192; }},
    {"nchan_zero", [](wh_region_hdr* h) { h->nchan = 0; }},
    {"nchan_huge", [](wh_region_hdr* h) { h->nchan = WH_MAX_CHANNELS + 1; }},
    {"nchan_exceeds_region", [](wh_region_hdr* h) { h->nchan = 3; }},
    {"req_size_not_pow2", [](wh_region_hdr* h) { h->req_size = 12288; }},
    {"req_size_small", [](wh_region_hdr* h) { h->req_size = 2048; }},
    {"req_size_zero", [](wh_region_hdr* h) { h->req_size = 0; }},
    {"req_size_huge", [](wh_region_hdr* h) { h->req_size = 1u << 31; }},
    {"resp_size_not_pow2", [](wh_region_hdr* h) { h->resp_size = 12288; }},
    {"resp_size_huge", [](wh_region_hdr* h) { h->resp_size = 1u << 31; }},
    {"resp_size_exceeds_stride", [](wh_region_hdr* h) { h->resp_size = 1u << 20; }},
    {"chan_off_small", [](wh_region_hdr* h) { h->chan_off = 0; }},
    {"chan_off_unaligned", [](wh_region_hdr* h) { h->chan_off += 8; }},
    {"chan_off_past_end", [](wh_region_hdr* h) { h->chan_off += 4096; }},
    {"chan_off_wraps", [](wh_region_hdr* h) { h->chan_off = 0ull - 4096 * 16; }},
    {"chan_stride_small", [](wh_region_hdr* h) { h->chan_stride = 4096; }},
    {"chan_stride_unaligned", [](wh_region_hdr* h) { h->chan_stride += 64; }},
    {"chan_stride_huge", [](wh_region_hdr* h) { h->chan_stride = 1ull << 62; }},
    {"chan_stride_wraps", [](wh_region_hdr* h) { h->nchan = 256; h->chan_stride = 1ull << 56; }},
    {"data_size_unaligned", [](wh_region_hdr* h) { h->data_size += 1; }},
    {"data_size_exceeds_stride", [](wh_region_hdr* h) { h->data_size += 4096; }},
    {"data_size_huge", [](wh_region_hdr* h) { h->data_size = 1ull << 50; }},
    {"max_msg_zero", [](wh_region_hdr* h) { h->max_msg = 0; }},
    {"max_msg_too_big", [](wh_region_hdr* h) { h->max_msg = h->req_size / 2 - 31; }},
    {"max_msg_huge", [](wh_region_hdr* h) { h->max_msg = 0xffffffffu; }},
    {"hb_period_zero", [](wh_region_hdr* h) { h->hb_period_ms = 0; }},
    {"hb_timeout_le_period", [](wh_region_hdr* h) { h->hb_timeout_ms = h->hb_period_ms; }},
    {"hb_timeout_huge", [](wh_region_hdr* h) { h->hb_timeout_ms = 0xffffffffu; }},
};

INSTANTIATE_TEST_SUITE_P(Fields, RegionHeaderBad, ::testing::ValuesIn(kBadFields),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(RegionHeader, SmallOrUnalignedMemoryRejected) {
  Formatted f;
  std::string err;
  EXPECT_FALSE(Region::attach_memory(f.map.base, 100, false, f.cfg, &err));
  EXPECT_FALSE(Region::attach_memory(f.map.base + 8, f.size - 8, false, f.cfg, &err));
  EXPECT_FALSE(Region::attach_memory(nullptr, f.size, false, f.cfg, &err));
  // A mapping one page short of the header's region_size.
  EXPECT_FALSE(Region::attach_memory(f.map.base, f.size - 4096, false, f.cfg, &err));
}

TEST(RegionHeader, FormatRejectsBadConfig) {
  GuardedMap m(1 << 20);
  std::string err;
  auto bad = [&](auto mutate) {
    RegionConfig c = small_config(1u << 14);
    mutate(c);
    return !Region::format(m.base, m.size, c, &err);
  };
  EXPECT_TRUE(bad([](RegionConfig& c) { c.nchan = 0; }));
  EXPECT_TRUE(bad([](RegionConfig& c) { c.nchan = WH_MAX_CHANNELS + 1; }));
  EXPECT_TRUE(bad([](RegionConfig& c) { c.req_size = 5000; }));
  EXPECT_TRUE(bad([](RegionConfig& c) { c.resp_size = 1024; }));
  EXPECT_TRUE(bad([](RegionConfig& c) { c.hb_period_ms = 0; }));
  EXPECT_TRUE(bad([](RegionConfig& c) { c.hb_timeout_ms = c.hb_period_ms; }));
  EXPECT_TRUE(bad([](RegionConfig& c) { c.nchan = 100; }));  // does not fit 1 MiB
  EXPECT_FALSE(bad([](RegionConfig&) {}));
  // A requested max_msg above what always fits is clamped; a smaller one kept.
  RegionConfig c = small_config(1u << 14);
  c.max_msg = 1000;
  ASSERT_TRUE(Region::format(m.base, m.size, c, &err));
  EXPECT_EQ(reinterpret_cast<wh_region_hdr*>(m.base)->max_msg, 1000u);
  c.max_msg = 1u << 20;
  ASSERT_TRUE(Region::format(m.base, m.size, c, &err));
  EXPECT_EQ(reinterpret_cast<wh_region_hdr*>(m.base)->max_msg, (1u << 14) / 2 - 32);
}

// ------------------------------------------------------- raw ring framing

constexpr uint32_t kHdr = sizeof(wh_msg_hdr);

// One ring over a guarded buffer, a writer and a reader on it; with `copy`,
// a tail block as in wh_chan_hdr (the tail, copy_tail, copy[]).
struct RawRing {
  uint32_t size;
  uint32_t max_msg;
  GuardedMap map;
  alignas(64) uint64_t line[WH_TAIL_BLOCK / 8] = {};
  uint64_t& tail = line[0];
  uint64_t& copy_tail = line[1];
  uint64_t* copy = line + 2;
  uint64_t head = 0;
  RingWriter w;
  RingReader r;
  explicit RawRing(uint32_t sz = 4096, uint32_t maxm = 0, bool with_copy = false)
      : size(sz), max_msg(maxm ? maxm : sz / 2 - kHdr), map(sz),
        w(map.base, size, &tail, &head, max_msg, with_copy ? &copy_tail : nullptr),
        r(map.base, size, &tail, &head, max_msg, with_copy ? &copy_tail : nullptr) {}

  Status put(uint32_t len, uint64_t id, uint8_t fill = 0) {
    std::vector<uint8_t> p(len, fill ? fill : uint8_t(id));
    wh_msg_hdr h{};
    h.opcode = 7;
    h.call_id = id;
    std::span<const uint8_t> parts[] = {p};
    return w.write(h, parts);
  }
  // Reads one message and checks it is (len, id).
  void expect(uint32_t len, uint64_t id) {
    Message m;
    ASSERT_EQ(r.read(m), Status::Ok) << r.error();
    EXPECT_EQ(m.hdr.magic, WH_MSG_MAGIC);
    EXPECT_EQ(m.hdr.opcode, 7);
    EXPECT_EQ(m.hdr.call_id, id);
    ASSERT_EQ(m.payload.size(), len);
    for (auto b : m.payload) ASSERT_EQ(b, uint8_t(id));
  }
  wh_msg_hdr* at(uint64_t idx) { return reinterpret_cast<wh_msg_hdr*>(map.base + (idx & (size - 1))); }
};

uint32_t rec(uint32_t len) { return kHdr + ((len + 7) & ~7u); }

TEST(RawRing, EmptyReadsEmpty) {
  RawRing rr;
  Message m;
  EXPECT_FALSE(rr.r.readable());
  EXPECT_EQ(rr.r.read(m), Status::Empty);
  EXPECT_EQ(rr.r.read(m), Status::Empty);
}

TEST(RawRing, ZeroLengthMessage) {
  RawRing rr;
  ASSERT_EQ(rr.put(0, 1), Status::Ok);
  EXPECT_EQ(rr.tail, kHdr);
  EXPECT_TRUE(rr.r.readable());
  rr.expect(0, 1);
  EXPECT_EQ(rr.head, kHdr);
  Message m;
  EXPECT_EQ(rr.r.read(m), Status::Empty);
}

TEST(RawRing, PayloadPartsAreConcatenatedAndPadded) {
  RawRing rr;
  uint8_t a[3] = {1, 2, 3}, b[2] = {4, 5};
  std::span<const uint8_t> parts[] = {a, {}, b};
  wh_msg_hdr h{};
  h.opcode = 9;
  h.status = -5;
  h.aux = 77;
  h.flags = WH_MSG_F_RESPONSE;
  h.len = 12345;     // ignored: the writer sets len
  h.magic = 0xdead;  // ignored: the writer sets magic
  ASSERT_EQ(rr.w.write(h, parts), Status::Ok);
  EXPECT_EQ(rr.tail, kHdr + 8u);
  Message m;
  ASSERT_EQ(rr.r.read(m), Status::Ok);
  EXPECT_EQ(m.hdr.len, 5u);
  EXPECT_EQ(m.hdr.status, -5);
  EXPECT_EQ(m.hdr.aux, 77u);
  EXPECT_EQ(m.hdr.flags, uint32_t(WH_MSG_F_RESPONSE));
  EXPECT_EQ(m.payload, (std::vector<uint8_t>{1, 2, 3, 4, 5}));
}

TEST(RawRing, MaxMessageSize) {
  RawRing rr;
  EXPECT_EQ(rr.max_msg, 4096u / 2 - kHdr);
  EXPECT_EQ(rr.put(rr.max_msg + 1, 1), Status::TooBig);
  EXPECT_EQ(rr.tail, 0u);
  ASSERT_EQ(rr.put(rr.max_msg, 2), Status::Ok);
  rr.expect(rr.max_msg, 2);
  // A max-size record always fits into an empty ring, wherever the index is:
  // walk the start position through every offset an honest writer can reach
  // (multiples of 8 from 32: positions 8..24 are only ever skipped).
  for (uint32_t off = 32; off < rr.size; off += 8) {
    RawRing q;
    uint32_t remaining = off;
    uint64_t id = 1;
    while (remaining) {
      uint32_t chunk = std::min(remaining, 2048u);
      if (remaining - chunk != 0 && remaining - chunk < kHdr) chunk = remaining - kHdr;
      ASSERT_EQ(q.put(chunk - kHdr, id), Status::Ok);
      q.expect(chunk - kHdr, id++);
      remaining -= chunk;
    }
    ASSERT_EQ(q.tail, off);
    ASSERT_EQ(q.put(q.max_msg, 100), Status::Ok) << "off " << off;
    q.expect(q.max_msg, 100);
    ASSERT_EQ(q.head, q.tail);
  }
}

TEST(RawRing, PaddingOpcodeIsRefused) {
  RawRing rr;
  wh_msg_hdr h{};
  h.opcode = WH_OP_PAD;
  EXPECT_EQ(rr.w.write(h, {}), Status::Invalid);
  EXPECT_EQ(rr.tail, 0u);
  EXPECT_FALSE(rr.w.poisoned());
  EXPECT_EQ(rr.put(0, 1), Status::Ok);
}

TEST(RawRing, MaxMsgNotMultipleOf8) {
  RawRing rr(4096, 1001);
  EXPECT_EQ(rr.put(1002, 1), Status::TooBig);
  ASSERT_EQ(rr.put(1001, 1), Status::Ok);
  EXPECT_EQ(rr.tail, kHdr + 1008u);
  rr.expect(1001, 1);
}

TEST(RawRing, FullThenDrainThenFullAgain) {
  RawRing rr;
  // 64 records of 32+32 bytes fill 4096 exactly.
  int n = 0;
  while (rr.put(32, uint64_t(n + 1)) == Status::Ok) n++;
  EXPECT_EQ(n, 64);
  EXPECT_EQ(rr.tail, 4096u);
  EXPECT_EQ(rr.put(0, 99), Status::Full);  // even an empty record needs 32 bytes
  rr.expect(32, 1);
  EXPECT_EQ(rr.put(32, 100), Status::Ok);  // exactly the freed record's room
  EXPECT_EQ(rr.put(0, 101), Status::Full);
  for (int i = 2; i <= 64; i++) rr.expect(32, uint64_t(i));
  rr.expect(32, 100);
  Message m;
  EXPECT_EQ(rr.r.read(m), Status::Empty);
  EXPECT_EQ(rr.head, rr.tail);
}

TEST(RawRing, RecordEndingExactlyAtRingEnd) {
  RawRing rr;
  // 4096 = 2 * (32 + 2016): the second record ends exactly at the end.
  ASSERT_EQ(rr.put(2016, 1), Status::Ok);
  ASSERT_EQ(rr.put(2016, 2), Status::Ok);
  EXPECT_EQ(rr.tail, 4096u);
  rr.expect(2016, 1);
  rr.expect(2016, 2);
  // The next one starts at position 0 with no padding.
  ASSERT_EQ(rr.put(8, 3), Status::Ok);
  EXPECT_EQ(rr.tail, 4096u + rec(8));
  EXPECT_EQ(rr.at(4096)->call_id, 3u);
  rr.expect(8, 3);
}

TEST(RawRing, PaddingRecordWhenRecordDoesNotFit) {
  RawRing rr;
  // Leave 100 -> 104 bytes before the end: 4096 - 104 = 3992 = rec(1960) + rec(1968).
  ASSERT_EQ(rr.put(1960, 1), Status::Ok);
  ASSERT_EQ(rr.put(1968, 2), Status::Ok);
  EXPECT_EQ(rr.tail, 3992u);
  rr.expect(1960, 1);
  rr.expect(1968, 2);
  // A 100-byte record (rec 136) does not fit in 104: padding, then position 0.
  ASSERT_EQ(rr.put(100, 3), Status::Ok);
  EXPECT_EQ(rr.tail, 4096u + rec(100));
  wh_msg_hdr* pad = rr.at(3992);
  EXPECT_EQ(pad->magic, WH_MSG_MAGIC);
  EXPECT_EQ(pad->opcode, WH_OP_PAD);
  EXPECT_EQ(pad->len, 104u - kHdr);
  EXPECT_EQ(rr.at(0)->call_id, 3u);
  rr.expect(100, 3);
  EXPECT_EQ(rr.head, 4096u + rec(100));
}

TEST(RawRing, PaddingRecordWithEmptyBody) {
  RawRing rr;
  // Exactly 32 bytes left: a padding record with len 0.
  ASSERT_EQ(rr.put(2016, 1), Status::Ok);
  ASSERT_EQ(rr.put(2016 - 32, 2), Status::Ok);
  EXPECT_EQ(rr.tail, 4096u - 32);
  rr.expect(2016, 1);
  rr.expect(2016 - 32, 2);
  ASSERT_EQ(rr.put(1, 3), Status::Ok);  // rec 40 > 32
  EXPECT_EQ(rr.at(4096 - 32)->opcode, WH_OP_PAD);
  EXPECT_EQ(rr.at(4096 - 32)->len, 0u);
  rr.expect(1, 3);
}

class ImplicitSkip : public ::testing::TestWithParam<uint32_t> {};

TEST_P(ImplicitSkip, FewerThanHeaderBytesAreSkippedSilently) {
  const uint32_t left = GetParam();  // 8, 16 or 24 bytes before the end
  RawRing rr;
  uint32_t fill = 4096 - left;  // two records covering `fill` bytes
  uint32_t a = 2016, b = fill - rec(a) - kHdr;
  ASSERT_EQ(rr.put(a, 1), Status::Ok);
  ASSERT_EQ(rr.put(b, 2), Status::Ok);
  ASSERT_EQ(rr.tail, fill);
  rr.expect(a, 1);
  rr.expect(b, 2);
  // The reader at fill with head == tail: Empty (nothing to skip yet).
  Message m;
  EXPECT_EQ(rr.r.read(m), Status::Empty);
  uint8_t before[24];
  std::memcpy(before, rr.map.base + fill, left);
  ASSERT_EQ(rr.put(0, 3), Status::Ok);
  // No padding header was written into the tail bytes.
  EXPECT_EQ(std::memcmp(before, rr.map.base + fill, left), 0);
  EXPECT_EQ(rr.tail, 4096u + kHdr);
  rr.expect(0, 3);
  EXPECT_EQ(rr.head, rr.tail);
  // Keep going around a few more times.
  for (uint64_t i = 4; i < 200; i++) {
    ASSERT_EQ(rr.put(uint32_t(i * 13 % 700), i), Status::Ok);
    rr.expect(uint32_t(i * 13 % 700), i);
  }
}

INSTANTIATE_TEST_SUITE_P(Left, ImplicitSkip, ::testing::Values(8u, 16u, 24u));

TEST(RawRing, ImplicitSkipWhenReaderIsBehind) {
  // The reader reaches the < 32 byte remainder with more records committed
  // after it (head != tail): it must skip and continue.
  RawRing rr;
  ASSERT_EQ(rr.put(2016, 1), Status::Ok);
  ASSERT_EQ(rr.put(2016 - 24 - 32, 2), Status::Ok);  // ends 24 bytes before the end
  rr.expect(2016, 1);
  ASSERT_EQ(rr.put(40, 3), Status::Ok);  // wraps: implicit skip of 24
  EXPECT_EQ(rr.tail, 4096u + rec(40));
  rr.expect(2016 - 24 - 32, 2);
  rr.expect(40, 3);
}

TEST(RawRing, FullAcrossWrapAccountsForSkippedBytes) {
  RawRing rr;
  ASSERT_EQ(rr.put(2016, 1), Status::Ok);
  ASSERT_EQ(rr.put(1960, 2), Status::Ok);  // tail 4040: 56 bytes left
  rr.expect(2016, 1);                      // head 2048
  // rec(64)=96 does not fit in 56: skip 56 + 96 = 152 needed; 2048+56 free.
  ASSERT_EQ(rr.put(64, 3), Status::Ok);
  EXPECT_EQ(rr.tail, 4096u + 96);
  // Now free = 4096 - (4192 - 2048) = 1952. rec(1920)=1952 fits exactly.
  EXPECT_EQ(rr.put(1921, 4), Status::Full);
  ASSERT_EQ(rr.put(1920, 4), Status::Ok);
  EXPECT_EQ(rr.put(0, 5), Status::Full);
  rr.expect(1960, 2);
  rr.expect(64, 3);
  rr.expect(1920, 4);
}

// Random sizes, random interleaving: a model queue must agree with the ring
// over many wrap-arounds (covers every padding/skip position), with and
// without the tail block's copy.
TEST(RawRing, RandomisedAgainstModel) {
  // 64 KiB is large enough for the early wrap (RingWriter::kHotWindow).
  for (bool with_copy : {false, true})
  for (uint32_t size : {4096u, 8192u, 65536u}) {
    SCOPED_TRACE(with_copy ? "with copy" : "without copy");
    RawRing rr(size, 0, with_copy);
    std::mt19937_64 rng(42 + size);
    std::deque<std::pair<uint32_t, uint64_t>> model;
    uint64_t next = 1, written = 0, read = 0, fulls = 0;
    for (int step = 0; step < int(scaled(200000)); step++) {
      if (rng() % 2) {
        uint32_t len;
        switch (rng() % 4) {
          case 0: len = uint32_t(rng() % 8); break;
          case 1: len = uint32_t(rng() % 64); break;
          case 2: len = uint32_t(rng() % 512); break;
          default: len = uint32_t(rng() % (rr.max_msg + 1)); break;
        }
        Status s = rr.put(len, next);
        if (s == Status::Ok) {
          model.emplace_back(len, next++);
          written++;
        } else {
          ASSERT_EQ(s, Status::Full);
          fulls++;
          // Full only when the record (plus any skip) really does not fit.
          uint32_t pos = uint32_t(rr.tail & (size - 1));
          uint32_t to_end = size - pos;
          uint32_t need = rec(len) + (to_end < rec(len) ? to_end : 0);
          ASSERT_LT(size - (rr.tail - rr.head), need);
        }
      } else {
        Message m;
        Status s = rr.r.read(m);
        if (model.empty()) {
          ASSERT_EQ(s, Status::Empty);
          ASSERT_EQ(rr.head, rr.tail);  // head catches up over padding/skip? see below
        } else {
          ASSERT_EQ(s, Status::Ok) << rr.r.error();
          auto [len, id] = model.front();
          model.pop_front();
          ASSERT_EQ(m.hdr.call_id, id);
          ASSERT_EQ(m.payload.size(), len);
          if (len) {
            ASSERT_EQ(m.payload[len - 1], uint8_t(id));
          }
          read++;
        }
      }
      ASSERT_LE(rr.tail - rr.head, size);
      ASSERT_EQ(rr.tail % 8, 0u);
    }
    EXPECT_GT(rr.tail, 20ull * size);
    EXPECT_GT(fulls, 0u);
    EXPECT_GT(read, 1000u / WH_RING_TEST_SCALE);
    if (with_copy)
      EXPECT_GT(rr.r.copy_reads(), 0u);
    else
      EXPECT_EQ(rr.r.copy_reads(), 0u);
  }
}

// ------------------------------------------------ the tail block's copy

// Every record of up to WH_COPY_MAX bytes arrives whole through the copy:
// with the ring's bytes wiped after each write (the producer writes them
// only after the tail, region.h), the reader still gets every header field
// and payload byte, for each payload length 0..WH_COPY_MAX - header and
// with the payload split over several parts.
TEST(TailBlockCopy, CarriesEachSmallRecord) {
  uint8_t p[WH_COPY_MAX - kHdr];
  for (uint32_t i = 0; i < sizeof p; i++) p[i] = uint8_t(0xa0 + 7 * i);
  for (uint32_t n = 0; n <= sizeof p; n++) {
    RawRing rr(4096, 0, true);
    ASSERT_EQ(rr.put(n % 24, 1), Status::Ok);  // the record under test is not the first
    rr.expect(n % 24, 1);
    const uint32_t cut = n / 3;
    std::span<const uint8_t> parts[] = {{p, cut}, {}, {p + cut, n - cut}};
    wh_msg_hdr h{};
    h.version = 3;
    h.opcode = 0x1234;
    h.flags = WH_MSG_F_RESPONSE;
    h.call_id = 0x1122334455667788ull + n;
    h.status = -7;
    h.aux = 0xdeadbeef;
    const uint64_t at = rr.tail;
    ASSERT_EQ(rr.w.write(h, parts), Status::Ok);
    EXPECT_EQ(rr.copy_tail, rr.tail) << n;
    std::memset(rr.map.base + (at & (rr.size - 1)), 0xee, rec(n));  // only the copy is left
    Message m;
    ASSERT_EQ(rr.r.read(m), Status::Ok) << n << " " << rr.r.error();
    EXPECT_EQ(m.hdr.magic, WH_MSG_MAGIC);
    EXPECT_EQ(m.hdr.version, 3);
    EXPECT_EQ(m.hdr.opcode, 0x1234);
    EXPECT_EQ(m.hdr.flags, WH_MSG_F_RESPONSE);
    EXPECT_EQ(m.hdr.len, n);
    EXPECT_EQ(m.hdr.call_id, h.call_id);
    EXPECT_EQ(m.hdr.status, -7);
    EXPECT_EQ(m.hdr.aux, 0xdeadbeefu);
    ASSERT_EQ(m.payload.size(), n);
    if (n) {  // (data() of an empty vector may be null)
      EXPECT_EQ(std::memcmp(m.payload.data(), p, n), 0) << n;
    }
    EXPECT_EQ(rr.head, rr.tail);
    EXPECT_EQ(rr.r.copy_reads(), 2u);
  }
}

// The copy holds only the newest record. With several waiting, the older
// ones come from the ring and the newest from the copy, even when the
// reader already knows the tail from an earlier look (its ring bytes may
// not be written yet, so here they are wiped). A record too big for the
// block leaves the copy alone and is read from the ring.
TEST(TailBlockCopy, NewestRecordFromTheCopyOlderFromTheRing) {
  RawRing rr(4096, 0, true);
  ASSERT_EQ(rr.put(8, 1), Status::Ok);
  ASSERT_EQ(rr.put(100, 2), Status::Ok);
  ASSERT_EQ(rr.put(8, 3), Status::Ok);
  std::memset(rr.map.base + rec(8) + rec(100), 0xee, rec(8));
  rr.expect(8, 1);
  EXPECT_EQ(rr.r.copy_reads(), 0u);
  rr.expect(100, 2);  // within WH_COPY_MAX of the tail, but not the copy's record
  EXPECT_EQ(rr.r.copy_reads(), 0u);
  rr.expect(8, 3);
  EXPECT_EQ(rr.r.copy_reads(), 1u);
  const uint64_t before = rr.copy_tail;
  ASSERT_EQ(rr.put(WH_COPY_MAX - kHdr + 1, 4), Status::Ok);  // one byte too many
  EXPECT_EQ(rr.copy_tail, before);
  rr.expect(WH_COPY_MAX - kHdr + 1, 4);
  ASSERT_EQ(rr.put(WH_COPY_MAX - kHdr, 5), Status::Ok);  // the largest that fits
  EXPECT_EQ(rr.copy_tail, rr.tail);
  rr.expect(WH_COPY_MAX - kHdr, 5);
  EXPECT_EQ(rr.r.copy_reads(), 2u);
}

// The ring bytes of a copied record are written after its tail, but always
// before the copy changes again: a reader that missed the copy (the
// producer moved on) finds every record in the ring.
TEST(TailBlockCopy, RingHoldsARecordOnceTheCopyMovesOn) {
  RawRing rr(4096, 0, true);
  auto len = [](uint64_t id) { return uint32_t(id * 37 % 150); };
  for (uint64_t id = 1; id <= 20; id++) ASSERT_EQ(rr.put(len(id), id), Status::Ok) << id;
  for (uint64_t id = 1; id < 20; id++) rr.expect(len(id), id);
  EXPECT_EQ(rr.r.copy_reads(), 0u);
  rr.copy_tail = 0;  // as the producer's next write does first
  rr.expect(len(20), 20);
  EXPECT_EQ(rr.r.copy_reads(), 0u);
}

// A copy that does not belong to the tail (stale, cleared, or torn: the
// producer moved copy_tail) is never used: the ring is read.
TEST(TailBlockCopy, CopyOfAnotherTailIsIgnored) {
  for (uint64_t other : {uint64_t(0), uint64_t(8), ~uint64_t(0)}) {
    RawRing rr(4096, 0, true);
    ASSERT_EQ(rr.put(16, 5), Status::Ok);
    rr.copy_tail = other;
    std::memset(rr.copy, 0x77, WH_COPY_MAX);
    rr.expect(16, 5);
    EXPECT_EQ(rr.r.copy_reads(), 0u);
  }
}

// A copy that claims the tail but is not a well-formed record spanning
// exactly [head, tail) is a hint the reader declines: the ring decides,
// with its full validation (a good ring record is read; a bad one poisons).
TEST(TailBlockCopy, MalformedCopyFallsBackToTheValidatedRing) {
  struct Case {
    const char* name;
    std::function<void(wh_msg_hdr&)> spoil;
  } cases[] = {
      {"bad magic", [](wh_msg_hdr& h) { h.magic ^= 1; }},
      {"padding opcode", [](wh_msg_hdr& h) { h.opcode = WH_OP_PAD; }},
      {"longer than the record", [](wh_msg_hdr& h) { h.len = 16; }},
      {"shorter than the record", [](wh_msg_hdr& h) { h.len = 0; }},
      {"above max_msg", [](wh_msg_hdr& h) { h.len = ~0u; }},
  };
  for (auto& c : cases) {
    for (bool ring_good : {true, false}) {
      SCOPED_TRACE(std::string(c.name) + (ring_good ? ", ring good" : ", ring bad"));
      RawRing rr(4096, 0, true);
      ASSERT_EQ(rr.put(8, 9), Status::Ok);
      wh_msg_hdr h;
      std::memcpy(&h, rr.copy, sizeof h);
      c.spoil(h);
      std::memcpy(rr.copy, &h, sizeof h);
      if (ring_good) {
        rr.expect(8, 9);
      } else {
        rr.at(0)->magic = 0;
        Message m;
        EXPECT_EQ(rr.r.read(m), Status::Corrupt);
      }
      EXPECT_EQ(rr.r.copy_reads(), 0u);
    }
  }
}


// Past the hot window a drained ring starts again at position 0 (padding
// covers the rest); one the consumer has not caught up with goes on.
TEST(RawRing, EarlyWrapOnlyWhenDrained) {
  constexpr uint32_t kSize = 65536, kHot = RingWriter::kHotWindow;
  RawRing rr(kSize);
  uint64_t id = 1;
  // Ping-pong until the write position passes the hot window.
  while ((rr.tail & (kSize - 1)) < kHot) {
    ASSERT_EQ(rr.put(64, id), Status::Ok);
    rr.expect(64, id++);
  }
  const uint64_t wrap_at = rr.tail;
  ASSERT_EQ(rr.put(64, id), Status::Ok);
  EXPECT_EQ(rr.tail, wrap_at + (kSize - (wrap_at & (kSize - 1))) + rec(64));
  EXPECT_EQ(rr.at(wrap_at)->opcode, WH_OP_PAD);
  EXPECT_EQ(rr.at(0)->call_id, id);
  rr.expect(64, id++);
  EXPECT_EQ(rr.head, rr.tail);
  // Not drained: records keep streaming past the window, no padding.
  const uint64_t first_unread = id;
  while ((rr.tail & (kSize - 1)) < kHot) ASSERT_EQ(rr.put(64, id++), Status::Ok);
  for (int i = 0; i < 8; i++) {
    uint64_t before = rr.tail;
    ASSERT_EQ(rr.put(64, id++), Status::Ok);
    EXPECT_EQ(rr.tail, before + rec(64)) << "record " << i;
  }
  // Drained now, but the writer looked at the head a moment ago: it looks
  // again only a hot window further on, and wraps then.
  for (uint64_t k = first_unread; k < id; k++) rr.expect(64, k);
  uint64_t streamed = 0;
  for (;;) {
    uint64_t before = rr.tail;
    ASSERT_EQ(rr.put(64, id), Status::Ok);
    rr.expect(64, id++);
    if (rr.tail != before + rec(64)) break;
    streamed += rec(64);
    ASSERT_LE(streamed, uint64_t(kHot)) << "never wrapped early";
  }
  EXPECT_GT(streamed, 0u);
  EXPECT_EQ(rr.at(0)->call_id, id - 1);
  EXPECT_EQ(rr.tail & (kSize - 1), rec(64));
}

// ------------------------------------------------ peer-written garbage

TEST(RawRingCorrupt, BadMagic) {
  RawRing rr;
  ASSERT_EQ(rr.put(8, 1), Status::Ok);
  rr.at(0)->magic = 0x12345678;
  Message m;
  EXPECT_EQ(rr.r.read(m), Status::Corrupt);
  EXPECT_NE(rr.r.error().find("magic"), std::string::npos);
  // Poisoned for good, even once the record looks fine again.
  rr.at(0)->magic = WH_MSG_MAGIC;
  EXPECT_EQ(rr.r.read(m), Status::Corrupt);
  EXPECT_TRUE(rr.r.readable());
}

TEST(RawRingCorrupt, LengthAboveMaxMsg) {
  RawRing rr;
  ASSERT_EQ(rr.put(8, 1), Status::Ok);
  rr.at(0)->len = rr.max_msg + 1;
  Message m;
  EXPECT_EQ(rr.r.read(m), Status::Corrupt);
}

TEST(RawRingCorrupt, LengthPastCommittedTail) {
  RawRing rr;
  ASSERT_EQ(rr.put(8, 1), Status::Ok);
  rr.at(0)->len = 16;
  Message m;
  EXPECT_EQ(rr.r.read(m), Status::Corrupt);
}

TEST(RawRingCorrupt, RecordWrapsTheEnd) {
  RawRing rr;
  ASSERT_EQ(rr.put(2016, 1), Status::Ok);
  ASSERT_EQ(rr.put(1960, 2), Status::Ok);
  rr.expect(2016, 1);
  rr.at(2048)->len = 2000;  // 2048 + 32 + 2000 > 4096
  Message m;
  EXPECT_EQ(rr.r.read(m), Status::Corrupt);
}

TEST(RawRingCorrupt, PaddingNotReachingTheEnd) {
  RawRing rr;
  ASSERT_EQ(rr.put(8, 1), Status::Ok);
  rr.at(0)->opcode = WH_OP_PAD;  // a padding record in the middle of the ring
  Message m;
  EXPECT_EQ(rr.r.read(m), Status::Corrupt);
}

TEST(RawRingCorrupt, TailIndexGarbage) {
  struct Case {
    const char* name;
    uint64_t tail;
  } cases[] = {{"unaligned", 12}, {"more than a ring ahead", 4096 + 8}, {"huge", ~0ull << 3}};
  for (auto& c : cases) {
    RawRing rr;
    rr.tail = c.tail;
    Message m;
    EXPECT_EQ(rr.r.read(m), Status::Corrupt) << c.name;
  }
  // Backwards: after consuming, the tail goes back.
  RawRing rr;
  ASSERT_EQ(rr.put(8, 1), Status::Ok);
  ASSERT_EQ(rr.put(8, 2), Status::Ok);
  rr.expect(8, 1);
  rr.expect(8, 2);
  rr.tail = rec(8);
  Message m;
  EXPECT_EQ(rr.r.read(m), Status::Corrupt);
}

TEST(RawRingCorrupt, TailEndingInsideImplicitSkip) {
  RawRing rr;
  ASSERT_EQ(rr.put(2016, 1), Status::Ok);
  ASSERT_EQ(rr.put(2016 - 24 - 32, 2), Status::Ok);  // tail = 4072
  rr.expect(2016, 1);
  rr.expect(2016 - 24 - 32, 2);
  rr.tail += 8;  // commits 8 of the 24 skip bytes only
  Message m;
  EXPECT_EQ(rr.r.read(m), Status::Corrupt);
}

TEST(RawRingCorrupt, TailShorterThanHeader) {
  RawRing rr;
  rr.tail = 16;
  Message m;
  EXPECT_EQ(rr.r.read(m), Status::Corrupt);
}

TEST(RawRingCorrupt, WriterRejectsHeadGarbage) {
  for (uint64_t bad : {uint64_t(1) << 40, uint64_t(5000), ~uint64_t(0)}) {
    RawRing rr;
    while (rr.put(100, 1) == Status::Ok) {
    }
    rr.head = bad;  // past the tail
    EXPECT_EQ(rr.put(100, 2), Status::Corrupt);
    EXPECT_TRUE(rr.w.poisoned());
    EXPECT_EQ(rr.put(0, 3), Status::Corrupt);
  }
  // Backwards head.
  RawRing rr;
  while (rr.put(100, 1) == Status::Ok) {
  }
  Message m;
  ASSERT_EQ(rr.r.read(m), Status::Ok);
  ASSERT_EQ(rr.r.read(m), Status::Ok);
  while (rr.put(100, 1) == Status::Ok) {
  }
  rr.head = 0;
  EXPECT_EQ(rr.put(100, 2), Status::Corrupt);
}

}  // namespace
