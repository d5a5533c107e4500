// The sim device's memory, straight through its Context (and, for the pool
// handles, through Session::handle as the ring reader calls it):
//  - allocate-and-free of far more than a session's 1 TiB address window
//    (large, untouched MAP_NORESERVE blocks, so this takes milliseconds)
//    never runs out and never lands on the mapped host window or on a live
//    allocation;
//  - a randomized allocate/free run checked against a shadow interval set:
//    no two live allocations share an address or a host byte, and the
//    quota's accounting is exact throughout;
//  - a freed address is not handed out again at once;
//  - stream-ordered pools: honest reserved/used numbers, the release
//    threshold, trimming, a pool's own size limit, forged pool handles;
//  - kernels reach the rest of an allocation's 256-byte granule (a GPU maps
//    whole pages), not beyond it; copies reach only the allocation.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "session_fixture.hpp"
#include "wormhole/server/session.hpp"

using namespace wh::server;
using namespace wh::proto;

namespace {

constexpr uint64_t GiB = uint64_t(1) << 30;

struct Ctx {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Context> ctx;
  explicit Ctx(uint64_t device_bytes, uint64_t quota = 0) : backend(make_sim_backend(1, device_bytes)) {
    std::string err;
    ctx = backend->create_context(0, {quota, nullptr, 0, {}}, &err);
    EXPECT_TRUE(ctx) << err;
  }
  uint64_t free_bytes() {
    uint64_t f = 0, t = 0;
    EXPECT_EQ(ctx->mem_info(&f, &t), cudaSuccess);
    return f;
  }
};

bool disjoint(uint64_t a, uint64_t an, uint64_t b, uint64_t bn) { return a + an <= b || b + bn <= a; }

TEST(SimMemory, AllocateAndFreeFarBeyondTheWindow) {
  Ctx c(256 * GiB);
  std::vector<uint8_t> data(4 << 20);
  uint64_t mapped = 0;
  ASSERT_EQ(c.ctx->map_host(data.data(), data.size(), 0, &mapped), cudaSuccess);
  const uint64_t window = mapped >> 40;
  const uint64_t before = c.free_bytes();
  // 48 blocks of 60 GiB: 2.8 TiB in all, two held at a time.
  const uint64_t n = 60 * GiB;
  std::vector<uint64_t> live;
  for (int i = 0; i < 48; i++) {
    uint64_t d = 0;
    ASSERT_EQ(c.ctx->mem_alloc(n, &d), cudaSuccess) << "allocation " << i;
    ASSERT_EQ(d >> 40, window) << "allocation " << i << " left the session's window";
    ASSERT_EQ((d + n - 1) >> 40, window);
    ASSERT_TRUE(disjoint(d, n, mapped, data.size())) << "allocation " << i << " overlaps mapped memory";
    for (uint64_t o : live) ASSERT_TRUE(disjoint(d, n, o, n)) << "allocation " << i << " overlaps a live one";
    // Its first and last bytes are its own (one page each is touched).
    uint8_t* first = c.ctx->host_view(d, 1);
    uint8_t* last = c.ctx->host_view(d + n - 1, 1);
    ASSERT_TRUE(first && last);
    *first = uint8_t(i);
    *last = uint8_t(i);
    live.push_back(d);
    if (live.size() == 2) {
      EXPECT_EQ(*c.ctx->host_view(live[0], 1), uint8_t(i - 1));
      ASSERT_EQ(c.ctx->mem_free(live[0]), cudaSuccess);
      live.erase(live.begin());
    }
  }
  // A copy into the mapped window reaches the mapped memory, nothing else.
  const uint8_t pattern[4] = {1, 2, 3, 4};
  ASSERT_EQ(c.ctx->copy_htod(mapped + 100, pattern, 4, nullptr), cudaSuccess);
  EXPECT_EQ(std::memcmp(data.data() + 100, pattern, 4), 0);
  for (uint64_t d : live) ASSERT_EQ(c.ctx->mem_free(d), cudaSuccess);
  EXPECT_EQ(c.free_bytes(), before);
}

TEST(SimMemory, RandomAllocFreeNeverOverlaps) {
  Ctx c(64 * GiB, 48 * GiB);
  std::vector<uint8_t> data(1 << 20);
  uint64_t mapped = 0;
  ASSERT_EQ(c.ctx->map_host(data.data(), data.size(), 0, &mapped), cudaSuccess);
  const uint64_t quota_free = c.free_bytes();
  ASSERT_EQ(quota_free, 48 * GiB);
  std::mt19937_64 rng(12345);
  struct Live {
    uint64_t n;
    uint64_t tag;
  };
  std::map<uint64_t, Live> shadow;
  uint64_t used = 0;
  auto size = [&] {
    const unsigned k = rng() % 100;
    if (k < 70) return 1 + rng() % (64 << 10);
    if (k < 95) return (64 << 10) + rng() % (4 << 20);
    return (4 << 20) + rng() % GiB;
  };
  auto tag_of = [](uint64_t d, uint64_t i) { return d ^ (i * 0x9e3779b97f4a7c15ull); };
  auto check_and_free = [&](std::map<uint64_t, Live>::iterator it) {
    const uint64_t d = it->first, n = it->second.n, tag = it->second.tag;
    uint8_t* h = c.ctx->host_view(d, n);
    ASSERT_NE(h, nullptr);
    if (n >= 16) {
      uint64_t a, b;
      std::memcpy(&a, h, 8);
      std::memcpy(&b, h + n - 8, 8);
      ASSERT_EQ(a, tag) << "head of " << std::hex << d << " overwritten";
      ASSERT_EQ(b, tag) << "tail of " << std::hex << d << " overwritten";
      if (n <= 4096) {
        for (uint64_t k = 8; k < n - 8; k++) ASSERT_EQ(h[k], uint8_t(tag)) << "byte " << k << " of " << std::hex << d;
      }
    }
    ASSERT_EQ(c.ctx->mem_free(d), cudaSuccess);
    used -= n;
    shadow.erase(it);
  };
  for (uint64_t i = 0; i < 60000; i++) {
    if (shadow.empty() || rng() % 100 < 55) {
      const uint64_t n = size();
      uint64_t d = 0;
      const Err e = c.ctx->mem_alloc(n, &d);
      if (used + n > 48 * GiB) {
        ASSERT_EQ(e, cudaErrorMemoryAllocation);
        continue;
      }
      ASSERT_EQ(e, cudaSuccess) << "op " << i << " size " << n;
      ASSERT_EQ(d % 256, 0u);
      ASSERT_EQ(d >> 40, mapped >> 40);
      ASSERT_TRUE(disjoint(d, n, mapped, data.size())) << "op " << i;
      auto next = shadow.lower_bound(d);
      if (next != shadow.end()) {
        ASSERT_TRUE(disjoint(d, n, next->first, next->second.n)) << "op " << i;
      }
      if (next != shadow.begin()) {
        auto prev = std::prev(next);
        ASSERT_TRUE(disjoint(d, n, prev->first, prev->second.n)) << "op " << i;
      }
      const uint64_t tag = tag_of(d, i);
      uint8_t* h = c.ctx->host_view(d, n);
      ASSERT_NE(h, nullptr);
      ASSERT_EQ(c.ctx->host_view(d, n + 1), nullptr) << "an allocation reaches past its end";
      if (n >= 16) {
        if (n <= 4096) std::memset(h, uint8_t(tag), n);
        std::memcpy(h, &tag, 8);
        std::memcpy(h + n - 8, &tag, 8);
      }
      shadow.emplace(d, Live{n, tag});
      used += n;
    } else {
      auto it = shadow.begin();
      std::advance(it, rng() % std::min<size_t>(shadow.size(), 64));  // mostly old ones
      if (rng() % 2) it = std::prev(shadow.end());
      check_and_free(it);
    }
    if (i % 1024 == 0) {
      ASSERT_EQ(c.free_bytes(), quota_free - used) << "op " << i;
    }
  }
  while (!shadow.empty()) check_and_free(shadow.begin());
  EXPECT_EQ(c.free_bytes(), quota_free);
}

TEST(SimMemory, FreedAddressIsNotReusedAtOnce) {
  Ctx c(8 * GiB);
  uint64_t a = 0, b = 0;
  ASSERT_EQ(c.ctx->mem_alloc(4096, &a), cudaSuccess);
  ASSERT_EQ(c.ctx->mem_free(a), cudaSuccess);
  EXPECT_EQ(c.ctx->host_view(a, 1), nullptr) << "a freed address still translates";
  ASSERT_EQ(c.ctx->mem_alloc(4096, &b), cudaSuccess);
  EXPECT_NE(a, b);
  EXPECT_EQ(c.ctx->host_view(a, 1), nullptr);
  EXPECT_EQ(c.ctx->mem_free(a), cudaErrorInvalidValue);
  EXPECT_EQ(c.ctx->mem_free(b), cudaSuccess);
}

TEST(SimMemory, DeviceAccountingIsSharedAndExact) {
  auto backend = make_sim_backend(1, 1 * GiB);
  std::string err;
  auto a = backend->create_context(0, {}, &err);
  auto b = backend->create_context(0, {}, &err);
  uint64_t d1 = 0, d2 = 0, d3 = 0, f = 0, t = 0;
  ASSERT_EQ(a->mem_alloc(600 << 20, &d1), cudaSuccess);
  EXPECT_EQ(b->mem_alloc(600 << 20, &d2), cudaErrorMemoryAllocation);
  ASSERT_EQ(b->mem_alloc(GiB - (600 << 20), &d2), cudaSuccess);  // exactly the rest
  EXPECT_EQ(b->mem_alloc(1, &d3), cudaErrorMemoryAllocation);
  ASSERT_EQ(b->mem_info(&f, &t), cudaSuccess);
  EXPECT_EQ(f, 0u);
  a.reset();  // a session's end returns its memory
  ASSERT_EQ(b->mem_info(&f, &t), cudaSuccess);
  EXPECT_EQ(f, uint64_t(600) << 20);
}

// Sessions that share a limit (one uid's): together they hold at most it,
// each sees it as its total, and a session's end gives its part back.
TEST(SimMemory, SharedQuotaAcrossSessions) {
  auto backend = make_sim_backend(1, 1 * GiB);
  auto uid = std::make_shared<SharedQuota>(100ull << 20);
  std::string err;
  auto a = backend->create_context(0, {0, uid, 0, {}}, &err);
  auto b = backend->create_context(0, {0, uid, 0, {}}, &err);
  auto other = backend->create_context(0, {}, &err);  // another uid: not limited by it
  ASSERT_TRUE(a && b && other) << err;
  uint64_t d1 = 0, d2 = 0, d3 = 0, f = 0, t = 0;
  ASSERT_EQ(a->mem_alloc(60 << 20, &d1), cudaSuccess);
  EXPECT_EQ(b->mem_alloc(60 << 20, &d2), cudaErrorMemoryAllocation);
  ASSERT_EQ(b->mem_info(&f, &t), cudaSuccess);
  EXPECT_EQ(t, 100ull << 20);
  EXPECT_EQ(f, 40ull << 20);
  ASSERT_EQ(b->mem_alloc(40 << 20, &d2), cudaSuccess);  // exactly the rest
  EXPECT_EQ(b->mem_alloc(1, &d3), cudaErrorMemoryAllocation);
  ASSERT_EQ(other->mem_alloc(200 << 20, &d3), cudaSuccess);
  EXPECT_EQ(uid->used.load(), 100ull << 20);
  ASSERT_EQ(b->mem_free(d2), cudaSuccess);
  EXPECT_EQ(uid->used.load(), 60ull << 20);
  a.reset();  // a session's end returns its part
  EXPECT_EQ(uid->used.load(), 0u);
  ASSERT_EQ(b->mem_alloc(100 << 20, &d2), cudaSuccess);
  // A session's own quota still applies inside the shared one.
  auto c = backend->create_context(0, {10 << 20, uid, 0, {}}, &err);
  ASSERT_TRUE(c) << err;
  ASSERT_EQ(c->mem_info(&f, &t), cudaSuccess);
  EXPECT_EQ(t, 10ull << 20);
  EXPECT_EQ(f, 0u);
}

uint64_t attr(Context& c, MemPool* p, int a) {
  uint64_t v = ~uint64_t(0);
  EXPECT_EQ(c.pool_get_attribute(p, a, &v), cudaSuccess);
  return v;
}

TEST(SimMemory, PoolNumbersThresholdAndTrim) {
  Ctx c(8 * GiB);
  const uint64_t free0 = c.free_bytes();
  MemPool* p = nullptr;
  ASSERT_EQ(c.ctx->pool_create({}, &p), cudaSuccess);
  uint64_t d[3];
  const uint64_t n[3] = {1000, 3 << 20, 100 << 20};
  for (int i = 0; i < 3; i++) ASSERT_EQ(c.ctx->mem_alloc_async(p, n[i], nullptr, &d[i]), cudaSuccess);
  const uint64_t used = n[0] + n[1] + n[2];
  EXPECT_EQ(attr(*c.ctx, p, cudaMemPoolAttrUsedMemCurrent), used);
  const uint64_t reserved = attr(*c.ctx, p, cudaMemPoolAttrReservedMemCurrent);
  EXPECT_GE(reserved, used);
  EXPECT_LE(reserved, used + used / 4 + 4096);
  EXPECT_EQ(c.free_bytes(), free0 - reserved) << "what a pool reserves is not free";
  ASSERT_NE(c.ctx->host_view(d[2], n[2]), nullptr);
  EXPECT_EQ(c.ctx->host_view(d[2], n[2] + 1), nullptr) << "a pool allocation reaches past its size";

  // Freed: no longer used, still reserved; reused for the same size.
  ASSERT_EQ(c.ctx->mem_free_async(d[2], nullptr), cudaSuccess);
  EXPECT_EQ(attr(*c.ctx, p, cudaMemPoolAttrUsedMemCurrent), n[0] + n[1]);
  EXPECT_EQ(attr(*c.ctx, p, cudaMemPoolAttrReservedMemCurrent), reserved);
  EXPECT_EQ(attr(*c.ctx, p, cudaMemPoolAttrUsedMemHigh), used);
  uint64_t again = 0;
  ASSERT_EQ(c.ctx->mem_alloc_async(p, n[2], nullptr, &again), cudaSuccess);
  EXPECT_EQ(again, d[2]);
  EXPECT_EQ(attr(*c.ctx, p, cudaMemPoolAttrReservedMemCurrent), reserved);
  ASSERT_EQ(c.ctx->mem_free_async(again, nullptr), cudaSuccess);

  // A high threshold keeps it over a synchronisation; trimming gives it back.
  ASSERT_EQ(c.ctx->pool_set_attribute(p, cudaMemPoolAttrReleaseThreshold, ~uint64_t(0)), cudaSuccess);
  c.ctx->pool_sync_point();
  EXPECT_EQ(attr(*c.ctx, p, cudaMemPoolAttrReservedMemCurrent), reserved);
  ASSERT_EQ(c.ctx->pool_trim(p, 0), cudaSuccess);
  const uint64_t held = attr(*c.ctx, p, cudaMemPoolAttrReservedMemCurrent);
  EXPECT_LT(held, n[0] + n[1] + n[1] / 4 + 4096);
  EXPECT_GE(held, n[0] + n[1]);
  EXPECT_EQ(c.free_bytes(), free0 - held);
  EXPECT_EQ(attr(*c.ctx, p, cudaMemPoolAttrReservedMemHigh), reserved);
  ASSERT_EQ(c.ctx->pool_set_attribute(p, cudaMemPoolAttrReservedMemHigh, 0), cudaSuccess);
  EXPECT_EQ(attr(*c.ctx, p, cudaMemPoolAttrReservedMemHigh), held);

  // Threshold 0 (the default): freed memory goes back at the next synchronisation.
  ASSERT_EQ(c.ctx->pool_set_attribute(p, cudaMemPoolAttrReleaseThreshold, 0), cudaSuccess);
  ASSERT_EQ(c.ctx->mem_free(d[0]), cudaSuccess);  // cudaFree takes pool memory too
  ASSERT_EQ(c.ctx->mem_free_async(d[1], nullptr), cudaSuccess);
  EXPECT_EQ(attr(*c.ctx, p, cudaMemPoolAttrUsedMemCurrent), 0u);
  c.ctx->pool_sync_point();
  EXPECT_EQ(attr(*c.ctx, p, cudaMemPoolAttrReservedMemCurrent), 0u);
  EXPECT_EQ(c.free_bytes(), free0);
  ASSERT_EQ(c.ctx->pool_destroy(p), cudaSuccess);
}

TEST(SimMemory, PoolLimitsAndPressure) {
  Ctx c(1 * GiB);
  MemPool* p = nullptr;
  ASSERT_EQ(c.ctx->pool_create({64 << 20}, &p), cudaSuccess);  // a 64 MiB pool
  uint64_t a = 0, b = 0;
  ASSERT_EQ(c.ctx->mem_alloc_async(p, 40 << 20, nullptr, &a), cudaSuccess);
  EXPECT_EQ(c.ctx->mem_alloc_async(p, 40 << 20, nullptr, &b), cudaErrorMemoryAllocation);
  ASSERT_EQ(c.ctx->mem_free_async(a, nullptr), cudaSuccess);
  // Cached blocks of another size are given up for a new one within the limit.
  ASSERT_EQ(c.ctx->mem_alloc_async(p, 50 << 20, nullptr, &b), cudaSuccess);
  ASSERT_EQ(c.ctx->mem_free_async(b, nullptr), cudaSuccess);
  ASSERT_EQ(c.ctx->pool_set_attribute(p, cudaMemPoolAttrReleaseThreshold, ~uint64_t(0)), cudaSuccess);
  // Memory a pool holds unused does not make cudaMalloc fail.
  uint64_t big = 0;
  ASSERT_EQ(c.ctx->mem_alloc(GiB - (4 << 20), &big), cudaSuccess);
  EXPECT_EQ(attr(*c.ctx, p, cudaMemPoolAttrReservedMemCurrent), 0u);
  ASSERT_EQ(c.ctx->mem_free(big), cudaSuccess);
  // A pool destroyed with an allocation out keeps it valid until it is freed.
  ASSERT_EQ(c.ctx->mem_alloc_async(p, 1 << 20, nullptr, &a), cudaSuccess);
  ASSERT_EQ(c.ctx->pool_destroy(p), cudaSuccess);
  EXPECT_NE(c.ctx->host_view(a, 1 << 20), nullptr);
  ASSERT_EQ(c.ctx->mem_free_async(a, nullptr), cudaSuccess);
  EXPECT_EQ(c.free_bytes(), GiB);
}

// The session's pool bodies against forged and stale handles.
struct SessionPools : wh::test::SessionFixture {};

// ld at p + off, stored back at p.
const char* kPeekPtx = R"(
.version 8.0
.target sm_80
.address_size 64
.visible .entry peek(.param .u64 p, .param .u64 off)
{
  .reg .u32 %r<2>;
  .reg .u64 %rd<4>;
  ld.param.u64 %rd0, [p];
  ld.param.u64 %rd1, [off];
  add.u64 %rd2, %rd0, %rd1;
  ld.global.u32 %r1, [%rd2];
  st.global.u32 [%rd0], %r1;
  ret;
}
)";

TEST(SimMemory, KernelsReachTheAllocationsGranuleCopiesDoNot) {
  Ctx c(GiB);
  uint64_t a = 0;
  ASSERT_EQ(c.ctx->mem_alloc(40, &a), cudaSuccess);  // alone: nothing else past its granule
  std::string log;
  std::unique_ptr<Module> m;
  std::span<const uint8_t> img(reinterpret_cast<const uint8_t*>(kPeekPtx), std::strlen(kPeekPtx) + 1);
  ASSERT_EQ(c.ctx->module_load(img, &m, &log), cudaSuccess) << log;
  std::unique_ptr<Kernel> k;
  KernelAttrs attrs;
  ASSERT_EQ(c.ctx->module_kernel(*m, "peek", &k, &attrs), cudaSuccess);
  auto peek = [&](uint64_t off) {
    uint64_t params[2] = {a, off};
    std::span<const uint8_t> p(reinterpret_cast<const uint8_t*>(params), sizeof params);
    Err e = c.ctx->launch(*k, {1, 1, 1}, {1, 1, 1}, 0, 0, nullptr, p, &log, nullptr);
    return e == cudaSuccess ? c.ctx->synchronize() : e;
  };
  EXPECT_EQ(peek(36), cudaSuccess);
  EXPECT_EQ(peek(252), cudaSuccess) << "the granule's last word";
  EXPECT_EQ(peek(256), cudaErrorIllegalAddress) << "past the granule";
  // Copies stay within the 40 bytes.
  std::vector<uint8_t> host(64);
  Ctx d(GiB);
  uint64_t b = 0;
  ASSERT_EQ(d.ctx->mem_alloc(40, &b), cudaSuccess);
  EXPECT_EQ(d.ctx->copy_dtoh(host.data(), b, 40, nullptr), cudaSuccess);
  EXPECT_NE(d.ctx->copy_dtoh(host.data(), b, 44, nullptr), cudaSuccess);
}

TEST_F(SessionPools, HandlesAreChecked) {
  DeviceGetMemPoolResp def{}, cur{};
  ASSERT_EQ(run<Op::DeviceGetMemPool>({0, 1}, &def), cudaSuccess);
  ASSERT_EQ(run<Op::DeviceGetMemPool>({0, 0}, &cur), cudaSuccess);
  EXPECT_EQ(def.pool, cur.pool);
  EXPECT_EQ(run<Op::DeviceGetMemPool>({1, 0}), cudaErrorInvalidDevice);
  EXPECT_EQ(run<Op::DeviceGetMemPool>({-1, 0}), cudaErrorInvalidDevice);
  EXPECT_EQ(run<Op::DeviceGetMemPool>({0, 2}), cudaErrorInvalidValue);
  EXPECT_EQ(run<Op::MemPoolDestroy>({def.pool}), cudaErrorInvalidValue) << "the default pool stays";

  MemPoolCreateResp mine{};
  const MemPoolCreateReq ok{0, cudaMemAllocationTypePinned, cudaMemHandleTypeNone, cudaMemLocationTypeDevice, 0, 0, 0};
  ASSERT_EQ(run<Op::MemPoolCreate>(ok, &mine), cudaSuccess);
  auto bad = ok;
  bad.loc_id = 7;
  EXPECT_EQ(run<Op::MemPoolCreate>(bad), cudaErrorInvalidValue);
  bad = ok;
  bad.alloc_type = 0;
  EXPECT_EQ(run<Op::MemPoolCreate>(bad), cudaErrorInvalidValue);
  bad = ok;
  bad.handle_types = cudaMemHandleTypePosixFileDescriptor;
  EXPECT_EQ(run<Op::MemPoolCreate>(bad), cudaErrorNotSupported);

  // Forged: another tag, a wrong generation, an index past the table.
  const uint64_t forged[] = {mine.pool ^ (uint64_t(1) << 56), mine.pool ^ (uint64_t(1) << 32), mine.pool + 100,
                             0x4b00000100000001ull, 0, ~uint64_t(0)};
  for (uint64_t h : forged) {
    EXPECT_EQ(run<Op::MallocAsync>({256, 0, h}), h ? cudaErrorInvalidValue : cudaSuccess) << std::hex << h;
    EXPECT_EQ(run<Op::MemPoolTrimTo>({h, 0}), cudaErrorInvalidValue);
    EXPECT_EQ(run<Op::MemPoolGetAttr>({h, cudaMemPoolAttrUsedMemCurrent, 0}), cudaErrorInvalidValue);
    EXPECT_EQ(run<Op::MemPoolSetAttr>({h, 0, cudaMemPoolAttrReleaseThreshold, 0}), cudaErrorInvalidValue);
    EXPECT_EQ(run<Op::DeviceSetMemPool>({0, 0, h}), cudaErrorInvalidValue);
    EXPECT_EQ(run<Op::MemPoolDestroy>({h}), cudaErrorInvalidValue);
  }
  // Attributes: unknown numbers, read-only amounts, high marks reset only to 0.
  for (int32_t a : {0, 9, -1, 0x7fffffff}) {
    EXPECT_EQ(run<Op::MemPoolGetAttr>({mine.pool, a, 0}), cudaErrorInvalidValue);
    EXPECT_EQ(run<Op::MemPoolSetAttr>({mine.pool, 0, a, 0}), cudaErrorInvalidValue);
  }
  EXPECT_EQ(run<Op::MemPoolSetAttr>({mine.pool, 0, cudaMemPoolAttrUsedMemCurrent, 0}), cudaErrorInvalidValue);
  EXPECT_EQ(run<Op::MemPoolSetAttr>({mine.pool, 5, cudaMemPoolAttrUsedMemHigh, 0}), cudaErrorInvalidValue);
  EXPECT_EQ(run<Op::MemPoolSetAttr>({mine.pool, 0, cudaMemPoolAttrUsedMemHigh, 0}), cudaSuccess);
  // A bad stream, and a free of what is not an allocation (posted: deferred).
  EXPECT_EQ(run<Op::MallocAsync>({256, 0x5300000100000099ull, mine.pool}), cudaErrorInvalidResourceHandle);
  MallocAsyncResp m{};
  ASSERT_EQ(run<Op::MallocAsync>({256, 0, mine.pool}, &m), cudaSuccess);
  EXPECT_EQ(run<Op::FreeAsync>({m.dptr + 8, 0}, nullptr, WH_MSG_F_POSTED), cudaErrorInvalidValue);
  EXPECT_EQ(run<Op::DeviceSynchronize>({}), cudaErrorInvalidValue) << "the posted free's error surfaces";
  EXPECT_EQ(run<Op::FreeAsync>({m.dptr, 0}, nullptr, WH_MSG_F_POSTED), cudaSuccess);
  EXPECT_EQ(run<Op::FreeAsync>({m.dptr, 0}, nullptr, WH_MSG_F_POSTED), cudaErrorInvalidValue) << "double free";
  EXPECT_EQ(run<Op::DeviceSynchronize>({}), cudaErrorInvalidValue);
  // Destroyed: the handle is dead, the device falls back to its default pool.
  ASSERT_EQ(run<Op::DeviceSetMemPool>({0, 0, mine.pool}), cudaSuccess);
  ASSERT_EQ(run<Op::MemPoolDestroy>({mine.pool}), cudaSuccess);
  EXPECT_EQ(run<Op::MemPoolDestroy>({mine.pool}), cudaErrorInvalidValue);
  ASSERT_EQ(run<Op::DeviceGetMemPool>({0, 0}, &cur), cudaSuccess);
  EXPECT_EQ(cur.pool, def.pool);
  EXPECT_EQ(run<Op::MallocAsync>({256, 0, mine.pool}), cudaErrorInvalidValue);
}

}  // namespace

// Each session counts its calls by opcode in its own table; the server's
// figures (metrics, wormholectl stats, the statistics at exit) are the
// ended sessions' plus the live ones'.
struct SessionFigures : wh::test::SessionFixture {};

TEST_F(SessionFigures, LiveAndEndedSessionsAddUp) {
  const size_t malloc_op = size_t(Op::Malloc);
  alloc(4096);
  EXPECT_EQ(stats.ops()[malloc_op].calls, 1u);
  {
    std::string err;
    auto ctx = backend->create_context(0, {}, &err);
    ASSERT_TRUE(ctx) << err;
    Session other(2, *backend, std::move(ctx), std::span<uint8_t>(data), stats);
    DispatchResult out;
    for (uint64_t n : {uint64_t(4096), uint64_t(8192), uint64_t(1) << 50}) {  // the last one fails
      MallocReq rq{n};
      other.handle(uint16_t(Op::Malloc), 0, fixed_bytes(rq), 1 << 16, out);
    }
    EXPECT_EQ(out.status, cudaErrorMemoryAllocation);
    EXPECT_EQ(stats.ops()[malloc_op].calls, 4u);  // both live
  }
  // The other one ended: its figures were folded in, all of them accounted.
  const OpFigures f = stats.ops()[malloc_op];
  EXPECT_EQ(f.calls, 4u);
  EXPECT_EQ(f.errors, 1u);
  uint64_t in_histogram = 0;
  for (uint64_t b : f.latency) in_histogram += b;
  EXPECT_EQ(in_histogram, 3u);  // this session's call: accounted (bytes, histogram) with its next
  EXPECT_EQ(f.bytes_in, 3 * wire_size<MallocReq>);
  EXPECT_NE(stats.render().find("4 calls"), std::string::npos) << stats.render();
}
