// Unit tests of kvm-module/lib/wh_view.c: the same C that the KVM patch
// compiles into kvm-intel.ko.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

#include "wh_view.h"

namespace {

// A fake "host": tables are heap pages with invented pfns; the backing page
// of range i, page p is pfn (hva >> 12) + p, as pinning would give for a
// physically contiguous buffer.
struct FakeHost {
  std::map<wh_u64, wh_u64*> tables;
  wh_u64 next_pfn = 0x100000;
  int alloc_fail_after = -1;  // fail the Nth allocation (0-based)
  int allocs = 0;
  int host_fail_range = -1;
  const wh_range* ranges = nullptr;
  ~FakeHost() {
    for (auto& [pfn, p] : tables) std::free(p);
  }
};

wh_u64* fake_alloc(void* ctx, wh_u64* pfn) {
  auto* h = static_cast<FakeHost*>(ctx);
  if (h->alloc_fail_after >= 0 && h->allocs >= h->alloc_fail_after) return nullptr;
  h->allocs++;
  auto* p = static_cast<wh_u64*>(std::aligned_alloc(4096, 4096));
  std::memset(p, 0, 4096);
  *pfn = h->next_pfn++;
  h->tables[*pfn] = p;
  return p;
}
wh_u64* fake_va(void* ctx, wh_u64 pfn) {
  auto* h = static_cast<FakeHost*>(ctx);
  auto it = h->tables.find(pfn);
  EXPECT_NE(it, h->tables.end()) << "walk reached a pfn that is not a table";
  return it == h->tables.end() ? nullptr : it->second;
}
void fake_free(void* ctx, wh_u64 pfn) {
  auto* h = static_cast<FakeHost*>(ctx);
  auto it = h->tables.find(pfn);
  ASSERT_NE(it, h->tables.end()) << "double free";
  std::free(it->second);
  h->tables.erase(it);
}
int fake_host_pfn(void* ctx, wh_u32 ri, wh_u64 page, wh_u64* pfn) {
  auto* h = static_cast<FakeHost*>(ctx);
  if (static_cast<int>(ri) == h->host_fail_range) return -EFAULT;
  *pfn = (h->ranges[ri].hva >> 12) + page;
  return 0;
}
const wh_ept_ops kOps = {fake_alloc, fake_va, fake_free, fake_host_pfn};

wh_range R(wh_u64 gpa, wh_u64 size, wh_u64 hva, wh_u32 perms) {
  return wh_range{gpa, size, hva, perms, 0};
}

}  // namespace

TEST(EptEncoding, LeafCarriesPfnPermsWbIpatAd) {
  wh_u64 e = wh_ept_leaf(0x12345, WH_PERM_R | WH_PERM_X);
  EXPECT_EQ(e & 7, 0x5u);                    // R + X, no W
  EXPECT_EQ((e >> 3) & 7, 6u);               // WB
  EXPECT_TRUE(e & (1ull << 6));              // IPAT
  EXPECT_TRUE(e & (1ull << 8));              // A
  EXPECT_TRUE(e & (1ull << 9));              // D
  EXPECT_FALSE(e & (1ull << 7));             // not a large page
  EXPECT_EQ(wh_ept_pfn(e), 0x12345u);
  EXPECT_EQ(wh_ept_leaf(0x1, WH_PERM_R) & 7, 1u);
  EXPECT_EQ(wh_ept_leaf(0x1, WH_PERM_R | WH_PERM_W) & 7, 3u);
}

TEST(EptEncoding, PfnIsMaskedTo52BitPhysical) {
  wh_u64 e = wh_ept_leaf(~0ull, WH_PERM_R);
  EXPECT_EQ(e & ~WH_EPT_ADDR_MASK & ~0xfffull, 0u) << "no bits above 51 set";
}

TEST(EptEncoding, NonLeafIsRwxNoMemtype) {
  wh_u64 e = wh_ept_table(0xabc);
  EXPECT_EQ(e & 7, 7u);
  EXPECT_EQ((e >> 3) & 7, 0u);
  EXPECT_EQ(wh_ept_pfn(e), 0xabcu);
}

TEST(EptEncoding, IndexPerLevel) {
  wh_u64 gpa = (1ull << 39) * 3 + (1ull << 30) * 5 + (1ull << 21) * 7 + (1ull << 12) * 9 + 0x123;
  EXPECT_EQ(wh_ept_index(gpa, 4), 3u);
  EXPECT_EQ(wh_ept_index(gpa, 3), 5u);
  EXPECT_EQ(wh_ept_index(gpa, 2), 7u);
  EXPECT_EQ(wh_ept_index(gpa, 1), 9u);
}

TEST(Eptp, EncodingAndValidity) {
  wh_u64 p = wh_eptp(0x777);
  EXPECT_EQ(p, (0x777ull << 12) | 6 | (3 << 3));
  EXPECT_TRUE(wh_eptp_valid(p, false));
  EXPECT_FALSE(wh_eptp_valid(p | (1ull << 6), false)) << "A/D without support";
  EXPECT_TRUE(wh_eptp_valid(p | (1ull << 6), true));
  EXPECT_FALSE(wh_eptp_valid((p & ~7ull) | 1, false)) << "WC memtype";
  EXPECT_FALSE(wh_eptp_valid((p & ~0x38ull) | (4 << 3), false)) << "5-level walk";
  EXPECT_FALSE(wh_eptp_valid(p | (1ull << 8), false)) << "reserved bit";
  EXPECT_FALSE(wh_eptp_valid(p | (1ull << 60), false)) << "beyond 52 bits";
  EXPECT_FALSE(wh_eptp_valid(6 | (3 << 3), false)) << "null root";
  EXPECT_FALSE(wh_eptp_valid(0, false));
}

TEST(Validate, AcceptsGateLikeRequest) {
  wh_range r[] = {
      R(0x10'0000'0000, 0x1000, 0x7f00'0000'0000, WH_PERM_R),               // descriptor
      R(0x10'0000'1000, 0x1000, 0x7f00'0000'1000, WH_PERM_R | WH_PERM_X),   // gate code
      R(0x10'0000'2000, 0x6000, 0x7f00'0000'2000, WH_PERM_R | WH_PERM_W),   // tables, mailboxes
      R(0x10'0100'0000, 0x100000, 0x7f10'0000'0000, WH_PERM_R | WH_PERM_W), // server ring
  };
  int bad = 99;
  EXPECT_EQ(wh_validate_ranges(r, 4, &bad), 0);
  EXPECT_EQ(bad, -1);
  EXPECT_EQ(wh_ranges_pages(r, 4), 1u + 1 + 6 + 256);
}

TEST(Validate, BadRanges) {
  int bad;
  wh_range ok = R(0x1000, 0x1000, 0x100000, WH_PERM_R);
  EXPECT_EQ(wh_validate_ranges(nullptr, 0, &bad), -EINVAL);
  EXPECT_EQ(wh_validate_ranges(&ok, 0, &bad), -EINVAL);
  struct Case { wh_range r; int err; const char* why; } cases[] = {
      {R(0x1000, 0, 0x100000, WH_PERM_R), -EINVAL, "zero size"},
      {R(0x1001, 0x1000, 0x100000, WH_PERM_R), -EINVAL, "gpa misaligned"},
      {R(0x1000, 0x1800, 0x100000, WH_PERM_R), -EINVAL, "size misaligned"},
      {R(0x1000, 0x1000, 0x100010, WH_PERM_R), -EINVAL, "hva misaligned"},
      {R(0x1000, 0x1000, 0, WH_PERM_R), -EINVAL, "null hva"},
      {R(~0xfffull, 0x2000, 0x100000, WH_PERM_R), -EINVAL, "gpa wraps"},
      {R(1ull << 48, 0x1000, 0x100000, WH_PERM_R), -EINVAL, "gpa beyond 4-level EPT"},
      {R((1ull << 48) - 0x1000, 0x2000, 0x100000, WH_PERM_R), -EINVAL, "gpa end beyond"},
      {R(0x1000, 0x1000, (1ull << 47) - 0x1000, WH_PERM_R), 0, "hva at top of user half"},
      {R(0x1000, 0x2000, (1ull << 47) - 0x1000, WH_PERM_R), -EINVAL, "hva into kernel half"},
      {R(0x1000, 0x1000, 0xffff'8000'0000'0000ull, WH_PERM_R), -EINVAL, "kernel hva"},
      {R(0x1000, 0x1000, 0x100000, 0), -EPERM, "no permissions"},
      {R(0x1000, 0x1000, 0x100000, WH_PERM_W), -EPERM, "write-only"},
      {R(0x1000, 0x1000, 0x100000, WH_PERM_X), -EPERM, "execute-only"},
      {R(0x1000, 0x1000, 0x100000, WH_PERM_R | WH_PERM_W | WH_PERM_X), -EPERM, "W+X"},
      {R(0x1000, 0x1000, 0x100000, 0x8 | WH_PERM_R), -EINVAL, "reserved perm bit"},
      {wh_range{0x1000, 0x1000, 0x100000, WH_PERM_R, 1}, -EINVAL, "reserved flag"},
  };
  for (auto& c : cases) {
    bad = 42;
    EXPECT_EQ(wh_validate_ranges(&c.r, 1, &bad), c.err) << c.why;
    EXPECT_EQ(bad, c.err ? 0 : -1) << c.why;
  }
}

TEST(Validate, OverlapsAreRejectedWithIndex) {
  int bad;
  wh_range a[] = {R(0x10000, 0x4000, 0x100000, WH_PERM_R), R(0x20000, 0x1000, 0x200000, WH_PERM_R),
                  R(0x13000, 0x2000, 0x300000, WH_PERM_R)};
  EXPECT_EQ(wh_validate_ranges(a, 3, &bad), -EEXIST);
  EXPECT_EQ(bad, 2);
  wh_range touching[] = {R(0x10000, 0x4000, 0x100000, WH_PERM_R), R(0x14000, 0x1000, 0x200000, WH_PERM_R)};
  EXPECT_EQ(wh_validate_ranges(touching, 2, &bad), 0) << "adjacent is not overlap";
  wh_range inside[] = {R(0x10000, 0x10000, 0x100000, WH_PERM_R), R(0x12000, 0x1000, 0x200000, WH_PERM_R)};
  EXPECT_EQ(wh_validate_ranges(inside, 2, &bad), -EEXIST);
  wh_range same_hva[] = {R(0x10000, 0x1000, 0x100000, WH_PERM_R), R(0x20000, 0x1000, 0x100000, WH_PERM_R)};
  EXPECT_EQ(wh_validate_ranges(same_hva, 2, &bad), 0) << "aliasing one host page twice is allowed";
}

TEST(Validate, TooManyRangesOrPages) {
  std::vector<wh_range> v;
  for (int i = 0; i < WH_MAX_RANGES + 1; i++) v.push_back(R(0x1000ull * (2 * i + 1), 0x1000, 0x100000, WH_PERM_R));
  int bad;
  EXPECT_EQ(wh_validate_ranges(v.data(), WH_MAX_RANGES, &bad), 0);
  EXPECT_EQ(wh_validate_ranges(v.data(), WH_MAX_RANGES + 1, &bad), -E2BIG);
  wh_range big[] = {R(0, (wh_u64)WH_MAX_VIEW_PAGES << 12, 0x100000, WH_PERM_R),
                    R((wh_u64)WH_MAX_VIEW_PAGES << 12, 0x1000, 0x100000, WH_PERM_R)};
  EXPECT_EQ(wh_validate_ranges(big, 1, &bad), 0);
  EXPECT_EQ(wh_validate_ranges(big, 2, &bad), -E2BIG);
  EXPECT_EQ(bad, 1);
}

TEST(ViewBuild, MapsExactlyTheRangesWithTheirPerms) {
  FakeHost h;
  wh_range r[] = {
      R(0x10'0000'1000, 0x1000, 0x7000'0000'1000, WH_PERM_R | WH_PERM_X),
      R(0x10'0000'2000, 0x3000, 0x7000'0010'0000, WH_PERM_R | WH_PERM_W),
      R(0x3fe000, 0x4000, 0x7000'0020'0000, WH_PERM_R),  // crosses a 2 MiB boundary
  };
  h.ranges = r;
  wh_u64 root = 0;
  wh_u32 tables = 0;
  ASSERT_EQ(wh_view_build(&kOps, &h, r, 3, &root, &tables), 0);
  // PML4 + one PDPT (both below 512 GiB) + (PD, PT) at 64 GiB + (PD, 2 PT) low.
  EXPECT_EQ(tables, 1u + 1 + 2 + 3);
  EXPECT_EQ(h.tables.size(), tables);
  for (wh_u32 i = 0; i < 3; i++)
    for (wh_u64 off = 0; off < r[i].size; off += 4096) {
      wh_u64 e = wh_view_lookup(&kOps, &h, root, r[i].gpa + off);
      EXPECT_EQ(e & 7, r[i].perms) << i;
      EXPECT_EQ(wh_ept_pfn(e), (r[i].hva + off) >> 12) << i;
    }
  EXPECT_EQ(wh_view_lookup(&kOps, &h, root, 0x10'0000'0000), 0u) << "page before the gate";
  EXPECT_EQ(wh_view_lookup(&kOps, &h, root, 0x10'0000'5000), 0u) << "page after";
  EXPECT_EQ(wh_view_lookup(&kOps, &h, root, 0x0), 0u) << "guest RAM is not in the view";
  EXPECT_EQ(wh_view_lookup(&kOps, &h, root, 0x402000), 0u);
  EXPECT_TRUE(wh_eptp_valid(wh_eptp(root), false));
  wh_view_free(&kOps, &h, root);
  EXPECT_TRUE(h.tables.empty()) << "every table freed";
}

TEST(ViewBuild, FailuresFreeEverything) {
  wh_range r[] = {R(0x0, 0x400000, 0x7000'0000'0000, WH_PERM_R | WH_PERM_W),
                  R(0x8000'0000, 0x1000, 0x7000'1000'0000, WH_PERM_R)};
  for (int n = 0; n < 6; n++) {
    FakeHost h;
    h.ranges = r;
    h.alloc_fail_after = n;
    wh_u64 root = 0;
    EXPECT_EQ(wh_view_build(&kOps, &h, r, 2, &root, nullptr), -ENOMEM) << n;
    EXPECT_TRUE(h.tables.empty()) << n;
  }
  FakeHost h;
  h.ranges = r;
  h.host_fail_range = 1;
  wh_u64 root = 0;
  EXPECT_EQ(wh_view_build(&kOps, &h, r, 2, &root, nullptr), -EFAULT);
  EXPECT_TRUE(h.tables.empty());
  wh_range bad[] = {R(0x0, 0x1000, 0x7000'0000'0000, WH_PERM_W)};
  EXPECT_EQ(wh_view_build(&kOps, &h, bad, 1, &root, nullptr), -EPERM);
  EXPECT_TRUE(h.tables.empty()) << "validation happens before any allocation";
}

TEST(EptpList, AttachDetachAndRoot) {
  alignas(4096) static wh_u64 page[512];
  wh_eptp_list l;
  page[5] = 0xdead;
  wh_list_init(&l, page);
  EXPECT_EQ(page[5], 0u) << "list page starts empty";
  wh_u64 root = wh_eptp(0x1000), v1 = wh_eptp(0x2000), v2 = wh_eptp(0x3000);
  wh_list_set_root(&l, root);
  EXPECT_EQ(page[0], root);
  EXPECT_EQ(wh_list_attach(&l, 0, 1, v1), -EINVAL) << "entry 0 belongs to KVM";
  EXPECT_EQ(wh_list_attach(&l, 512, 1, v1), -EINVAL);
  EXPECT_EQ(wh_list_attach(&l, 1, 0, v1), -EINVAL) << "view id 0 is 'none'";
  EXPECT_EQ(wh_list_attach(&l, 1, 1, v1 | (1ull << 8)), -EINVAL) << "invalid eptp";
  EXPECT_EQ(wh_list_attach(&l, 1, 1, v1), 0);
  EXPECT_EQ(wh_list_attach(&l, 1, 2, v2), -EBUSY);
  EXPECT_EQ(wh_list_attach(&l, 511, 2, v2), 0);
  EXPECT_EQ(page[1], v1);
  EXPECT_EQ(page[511], v2);
  EXPECT_EQ(l.nr_attached, 2u);
  EXPECT_EQ(wh_list_index_of(&l, root), 0);
  EXPECT_EQ(wh_list_index_of(&l, v1), 1);
  EXPECT_EQ(wh_list_index_of(&l, v2), 511);
  EXPECT_EQ(wh_list_index_of(&l, wh_eptp(0x4000)), -1);
  // MMU root reload while a view is attached: entry 0 follows, views stay.
  wh_u64 root2 = wh_eptp(0x5000);
  wh_list_set_root(&l, root2);
  EXPECT_EQ(page[0], root2);
  EXPECT_EQ(page[1], v1);
  EXPECT_EQ(wh_list_index_of(&l, root), -1);
  EXPECT_EQ(wh_list_index_of(&l, root2), 0);
  EXPECT_EQ(wh_list_refs(&l, 1), 1u);
  EXPECT_EQ(wh_list_detach(&l, 1), 0);
  EXPECT_EQ(wh_list_detach(&l, 1), -ENOENT);
  EXPECT_EQ(wh_list_detach(&l, 0), -EINVAL);
  EXPECT_EQ(page[1], 0u) << "an empty slot is 0: VMFUNC to it exits";
  EXPECT_EQ(wh_list_index_of(&l, v1), -1);
  EXPECT_EQ(l.nr_attached, 1u);
}

TEST(EptpList, TooManyViews) {
  alignas(4096) static wh_u64 page[512];
  wh_eptp_list l;
  wh_list_init(&l, page);
  for (wh_u32 i = 1; i <= WH_MAX_VIEWS; i++) EXPECT_EQ(wh_list_attach(&l, i, 1, wh_eptp(0x100 + i)), 0);
  EXPECT_EQ(wh_list_attach(&l, WH_MAX_VIEWS + 1, 1, wh_eptp(0x999)), -E2BIG);
  EXPECT_EQ(wh_list_refs(&l, 1), (wh_u32)WH_MAX_VIEWS);
}
