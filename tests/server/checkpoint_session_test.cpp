// A session saved (Session::save) and rebuilt in a new one (Session::restore)
// straight through Session::handle, as the server drives both: handles,
// device addresses, memory contents, module variables and library objects
// survive; then the checkpoint's format is attacked (a file or a migrating
// server may be forged): truncated and corrupt files are refused by
// checkpoint_unpack, and content with bytes changed or cut short (packed
// again with a valid checksum) never crashes a restore and never leaves a
// half-restored session serving.
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "session_fixture.hpp"
#include "wormhole/server/checkpoint.hpp"
#include "wormhole/server/session.hpp"

using namespace wh::server;
using namespace wh::proto;

namespace {

// A kernel that bumps a module variable and stores the new value.
constexpr char kPtx[] = R"(.version 8.0
.target sm_80
.address_size 64
.global .align 4 .u32 counter = 5;
.visible .entry bump(.param .u64 out) {
  .reg .u64 %rd<3>;
  .reg .u32 %r<3>;
  ld.param.u64 %rd1, [out];
  ld.global.u32 %r1, [counter];
  add.u32 %r1, %r1, 1;
  st.global.u32 [counter], %r1;
  st.global.u32 [%rd1], %r1;
  ret;
}
)";

struct Fixture : wh::test::SessionFixture {
  uint64_t module = 0, kernel = 0, counter = 0, buf = 0, stream = 0, event = 0, blas = 0, plan = 0, gen = 0, pooled = 0;
  uint64_t array = 0, array_mem = 0, tex = 0;

  int32_t call(Op op, std::vector<uint8_t> payload, std::vector<uint8_t>* fixed = nullptr) {
    DispatchResult out;
    s->handle(uint16_t(op), 0, payload, 1 << 16, out);
    if (fixed) *fixed = out.fixed;
    return out.status;
  }
  template <class T>
  static std::vector<uint8_t> bytes(const T& rq, std::string_view tail = {}) {
    std::vector<uint8_t> p(sizeof rq);
    std::memcpy(p.data(), &rq, sizeof rq);
    p.insert(p.end(), tail.begin(), tail.end());
    return p;
  }
  uint32_t read_u32(uint64_t dptr) {
    MemcpyDtoHReq rq{8192, dptr, 4, 0, 0};
    EXPECT_EQ(run<Op::MemcpyDtoH>(rq), 0);
    uint32_t v;
    std::memcpy(&v, data.data() + 8192, 4);
    return v;
  }
  int32_t launch_bump(uint64_t k, uint64_t st) {
    LaunchReq rq{};
    rq.kernel = k;
    rq.stream = st;
    for (int i = 0; i < 3; i++) rq.grid[i] = rq.block[i] = 1;
    std::string params(reinterpret_cast<const char*>(&buf), 8);
    return call(Op::Launch, bytes(rq, params));
  }
  // Memory, a module with a variable, a kernel, a stream, an event and
  // cuBLAS, cuFFT and cuRAND objects.
  void build() {
    buf = alloc(4096);
    std::memcpy(data.data() + 16384, kPtx, sizeof kPtx);
    ModuleLoadResp ml{};
    ASSERT_EQ(run<Op::ModuleLoad>({16384, sizeof kPtx}, &ml), 0);
    module = ml.module;
    std::vector<uint8_t> f;
    ASSERT_EQ(call(Op::ModuleGetKernel, bytes(ModuleGetKernelReq{module}, "bump"), &f), 0);
    std::memcpy(&kernel, f.data(), 8);
    ASSERT_EQ(call(Op::ModuleGetGlobal, bytes(ModuleGetGlobalReq{module}, "counter"), &f), 0);
    std::memcpy(&counter, f.data(), 8);
    StreamCreateResp sc{};
    ASSERT_EQ(run<Op::StreamCreate>({1, -1}, &sc), 0);
    stream = sc.stream;
    EventCreateResp ec{};
    ASSERT_EQ(run<Op::EventCreate>({0, 0}, &ec), 0);
    event = ec.event;
    ASSERT_EQ(launch_bump(kernel, stream), 0);
    ASSERT_EQ(run<Op::EventRecord>({event, stream}), 0);
    BlasCreateResp bc{};
    ASSERT_EQ(run<Op::BlasCreate>({}, &bc), 0);
    blas = bc.handle;
    FftPlanReq fp{};
    fp.n[0] = 64;
    fp.rank = 1;
    fp.type = 0x29;  // C2C
    fp.batch = 1;
    FftPlanResp fr{};
    ASSERT_EQ(run<Op::FftPlan>(fp, &fr), 0);
    plan = fr.handle;
    RandCreateResp rc{};
    ASSERT_EQ(run<Op::RandCreate>({kRngXorwow, 0}, &rc), 0);
    gen = rc.handle;
    ASSERT_EQ(read_u32(buf), 6u);
    MallocAsyncResp ma{};
    ASSERT_EQ(run<Op::MallocAsync>({4096, stream, 0}, &ma), 0);  // from the session's default pool
    pooled = ma.dptr;
    ASSERT_NE(pooled, 0u);
    ArrayCreateReq ac{};
    ac.fx = 32;  // one float channel
    ac.fkind = 2;
    ac.width = 16;
    ac.height = 16;
    ArrayCreateResp ar{};
    ASSERT_EQ(run<Op::ArrayCreate>(ac, &ar), 0);
    array = ar.array;
    ArrayGetInfoResp ai{};
    ASSERT_EQ(run<Op::ArrayGetInfo>({array}, &ai), 0);
    array_mem = ai.dptr;
    TexObjectCreateReq tc{};
    tc.res_type = 0;  // cudaResourceTypeArray
    tc.res = array;
    TexObjectCreateResp tr{};
    ASSERT_EQ(run<Op::TexObjectCreate>(tc, &tr), 0);
    tex = tr.obj;
  }
  Bytes save() {
    CheckpointWriter w;
    std::string why;
    EXPECT_TRUE(s->save(w, &why)) << why;
    return std::move(w.content());
  }
  // A new session over the same data area at the saved window (the old one
  // is gone, as on another server).
  bool restore(std::span<const uint8_t> content, uint64_t va, std::string* why) {
    s.reset();
    ContextLimits lim;
    lim.va_base = va;
    std::string err;
    auto ctx = backend->create_context(0, lim, &err);
    EXPECT_TRUE(ctx) << err;
    if (!ctx) return false;
    s = std::make_unique<Session>(2, *backend, std::move(ctx), std::span<uint8_t>(data), stats);
    CheckpointReader r(content);
    return s->restore(r, why);
  }
};

TEST_F(Fixture, EveryObjectSurvivesAtItsHandleAndAddress) {
  build();
  const uint64_t va = s->context().va_base();
  ASSERT_NE(va, 0u);
  Bytes content = save();
  // Packed and unpacked as a file is.
  CheckpointHeader h{};
  std::snprintf(h.backend, sizeof h.backend, "sim");
  h.va_base = va;
  Bytes copy = content;
  Bytes file = checkpoint_pack(copy, h);
  CheckpointHeader got{};
  Bytes back;
  std::string why;
  ASSERT_TRUE(checkpoint_unpack(file, &got, &back, &why)) << why;
  ASSERT_EQ(back, content);
  ASSERT_TRUE(restore(back, va, &why)) << why;

  EXPECT_EQ(read_u32(buf), 6u);      // device memory, at its address
  EXPECT_EQ(read_u32(counter), 6u);  // the module variable, bumped once
  EXPECT_EQ(run<Op::EventQuery>({event}), 0);
  ASSERT_EQ(launch_bump(kernel, stream), 0);  // the same kernel and stream handles
  ASSERT_EQ(run<Op::StreamSynchronize>({stream}), 0);
  EXPECT_EQ(read_u32(buf), 7u);
  BlasDotReq d{blas, 0, buf, buf, 0, 1, 1, 1, 0};
  BlasDotResp dr{};
  EXPECT_EQ(run<Op::BlasDot>(d, &dr), 0);  // the cuBLAS handle
  FftExecReq fe{};
  fe.handle = plan;
  fe.type = 0x29;
  fe.idata = fe.odata = buf;
  fe.direction = -1;
  EXPECT_EQ(run<Op::FftExec>(fe), 0);  // the cuFFT plan
  RandGenerateReq rg{};
  rg.handle = gen;
  rg.kind = kRandBits32;
  rg.out = buf;
  rg.n = 16;
  EXPECT_EQ(run<Op::RandGenerate>(rg), 0);  // the cuRAND generator
  // The pool's allocation is one again (a second free would be refused).
  EXPECT_EQ(run<Op::FreeAsync>({pooled, stream}), 0);
  EXPECT_EQ(run<Op::FreeAsync>({pooled, stream}), cudaErrorInvalidValue);
  // The array at its address; the texture object under the value kernels hold.
  ArrayGetInfoResp ai{};
  EXPECT_EQ(run<Op::ArrayGetInfo>({array}, &ai), 0);
  EXPECT_EQ(ai.dptr, array_mem);
  EXPECT_EQ(run<Op::TexObjectDestroy>({tex}), 0);
  EXPECT_EQ(run<Op::TexObjectDestroy>({tex}), cudaErrorInvalidValue);
  // A handle that was never made stays invalid.
  EXPECT_EQ(run<Op::StreamSynchronize>({stream + 1}), cudaErrorInvalidResourceHandle);
}

// A move's checkpoint: the content stored as it is in a memfd, read in place
// by the destination (no copy, no unpacking) and restored the same.
TEST_F(Fixture, AStoredCheckpointIsReadInPlaceAndRestores) {
  build();
  const uint64_t va = s->context().va_base();
  const Bytes expect = save();
  CheckpointHeader h{};
  std::snprintf(h.backend, sizeof h.backend, "sim");
  h.va_base = va;
  int fd = memfd_create("ckpt-test", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  {
    CheckpointWriter w(fd, sizeof h);  // as a move writes it: straight into the memfd
    std::string why;
    ASSERT_TRUE(s->save(w, &why)) << why;
    EXPECT_EQ(w.size(), expect.size());
    ASSERT_TRUE(w.finish());
  }
  const CheckpointHeader sh = checkpoint_stored_header(h, expect.size());
  ASSERT_EQ(pwrite(fd, &sh, sizeof sh, 0), ssize_t(sizeof sh));
  struct stat st{};
  ASSERT_EQ(fstat(fd, &st), 0);
  ASSERT_EQ(uint64_t(st.st_size), sizeof sh + expect.size());  // exactly the header and the content
  Bytes file(st.st_size);
  ASSERT_EQ(pread(fd, file.data(), file.size(), 0), ssize_t(file.size()));
  close(fd);
  CheckpointHeader got{};
  Bytes storage;
  std::span<const uint8_t> view;
  std::string why;
  ASSERT_TRUE(checkpoint_open(file, &got, &storage, &view, &why)) << why;
  EXPECT_TRUE(got.flags & kCheckpointStored);
  EXPECT_EQ(view.data(), file.data() + sizeof(CheckpointHeader));  // in place
  EXPECT_TRUE(storage.empty());
  ASSERT_TRUE(std::equal(view.begin(), view.end(), expect.begin(), expect.end()));
  ASSERT_TRUE(restore(view, va, &why)) << why;
  EXPECT_EQ(read_u32(buf), 6u);
  EXPECT_EQ(read_u32(counter), 6u);
  // Its header is checked as a compressed one's.
  auto refused = [&](Bytes f, const char* says) {
    why.clear();
    EXPECT_FALSE(checkpoint_open(f, &got, &storage, &view, &why));
    EXPECT_NE(why.find(says), std::string::npos) << why;
  };
  refused({file.begin(), file.end() - 1}, "truncated");
  auto sizes = file;
  uint64_t more = expect.size() + 1;
  std::memcpy(sizes.data() + 16, &more, 8);  // content_bytes
  refused(sizes, "sizes disagree");
  auto flags = file;
  flags[offsetof(CheckpointHeader, flags)] |= 2;
  refused(flags, "flags");
}

TEST_F(Fixture, TheWindowOfALiveSessionIsNotGivenTwice) {
  build();
  ContextLimits lim;
  lim.va_base = s->context().va_base();
  std::string err;
  EXPECT_FALSE(backend->create_context(0, lim, &err));
  EXPECT_NE(err.find("another session"), std::string::npos) << err;
}

TEST_F(Fixture, ForgedFilesAreRefused) {
  build();
  Bytes content = save();
  CheckpointHeader h{};
  std::snprintf(h.backend, sizeof h.backend, "sim");
  Bytes file = checkpoint_pack(content, h);
  CheckpointHeader got{};
  Bytes back;
  std::string why;
  auto refused = [&](Bytes f, const char* says) {
    why.clear();
    EXPECT_FALSE(checkpoint_unpack(f, &got, &back, &why));
    EXPECT_NE(why.find(says), std::string::npos) << why;
  };
  refused({file.begin(), file.begin() + 20}, "too short");
  refused({file.begin(), file.end() - 1}, "truncated");
  auto bad_magic = file;
  bad_magic[0] ^= 1;
  refused(bad_magic, "not a Wormhole checkpoint");
  auto bad_version = file;
  bad_version[8] = 99;
  refused(bad_version, "format 99");
  auto huge = file;
  uint64_t big = uint64_t(1) << 40;
  std::memcpy(huge.data() + 16, &big, 8);
  refused(huge, "64 GiB");
  for (size_t at = sizeof(CheckpointHeader) + 8; at < file.size(); at += file.size() / 7) {
    auto flipped = file;
    flipped[at] ^= 0x40;
    why.clear();
    EXPECT_FALSE(checkpoint_unpack(flipped, &got, &back, &why)) << "byte " << at;
  }
}

TEST_F(Fixture, CorruptContentNeverCrashesARestore) {
  build();
  const uint64_t va = s->context().va_base();
  const Bytes content = save();
  std::mt19937_64 rng(42);
  int refused = 0;
  for (int i = 0; i < 400; i++) {
    Bytes c = content;
    if (i % 4 == 0) {
      c.resize(rng() % c.size());  // cut short
    } else {
      for (int k = 0, n = 1 + int(rng() % 8); k < n; k++) c[rng() % c.size()] = uint8_t(rng());
    }
    std::string why;
    if (!restore(c, va, &why)) {
      refused++;
      EXPECT_FALSE(why.empty());
    }
  }
  // Most corruptions are caught (a changed byte of memory contents is not).
  EXPECT_GT(refused, 100);
  // And the intact content still restores after all that.
  std::string why;
  ASSERT_TRUE(restore(content, va, &why)) << why;
  EXPECT_EQ(read_u32(counter), 6u);
}

// Kernels that take a block from the device-side heap (its address to out[0],
// 77 + k into it) and that read a block's first word.
constexpr char kHeapPtx[] = R"(.version 8.0
.target sm_80
.address_size 64
.extern .func (.param .b64 func_retval0) malloc (.param .b64 p0);
.visible .entry take(.param .u64 out, .param .u64 k) {
  .reg .u64 %rd<4>;
  .reg .u32 %r<3>;
  ld.param.u64 %rd1, [out];
  ld.param.u64 %rd3, [k];
  cvt.u32.u64 %r1, %rd3;
  {
  .param .b64 param0;
  st.param.b64 [param0+0], 48;
  .param .b64 retval0;
  call.uni (retval0), malloc, (param0);
  ld.param.b64 %rd2, [retval0+0];
  }
  add.u32 %r2, %r1, 77;
  st.global.u32 [%rd2], %r2;
  st.global.u64 [%rd1], %rd2;
  ret;
}
.visible .entry peek(.param .u64 p, .param .u64 out) {
  .reg .u64 %rd<3>;
  .reg .u32 %r<2>;
  ld.param.u64 %rd1, [p];
  ld.param.u64 %rd2, [out];
  ld.global.u32 %r1, [%rd1];
  st.global.u32 [%rd2], %r1;
  ret;
}
)";

// Blocks kernels took with malloc stay at their addresses with their contents,
// and the heap's allocator knows them: a block taken after the restore is
// another; a heap whose blocks were forged is refused.
TEST_F(Fixture, TheDeviceHeapComesBackWithItsBlocks) {
  build();
  std::memcpy(data.data() + 32768, kHeapPtx, sizeof kHeapPtx);
  ModuleLoadResp ml{};
  ASSERT_EQ(run<Op::ModuleLoad>({32768, sizeof kHeapPtx}, &ml), 0);
  uint64_t take = 0, peek = 0;
  std::vector<uint8_t> f;
  ASSERT_EQ(call(Op::ModuleGetKernel, bytes(ModuleGetKernelReq{ml.module}, "take"), &f), 0);
  std::memcpy(&take, f.data(), 8);
  ASSERT_EQ(call(Op::ModuleGetKernel, bytes(ModuleGetKernelReq{ml.module}, "peek"), &f), 0);
  std::memcpy(&peek, f.data(), 8);
  auto launch = [&](uint64_t k, uint64_t a, uint64_t b) {
    LaunchReq rq{};
    rq.kernel = k;
    for (int i = 0; i < 3; i++) rq.grid[i] = rq.block[i] = 1;
    std::string params(reinterpret_cast<const char*>(&a), 8);
    params.append(reinterpret_cast<const char*>(&b), 8);
    return call(Op::Launch, bytes(rq, params));
  };
  auto read_u64 = [&](uint64_t dptr) { return uint64_t(read_u32(dptr)) | uint64_t(read_u32(dptr + 4)) << 32; };
  ASSERT_EQ(launch(take, buf + 64, 0), 0);
  const uint64_t first = read_u64(buf + 64);
  ASSERT_NE(first, 0u);
  const uint64_t va = s->context().va_base();
  const Bytes content = save();
  std::string why;
  ASSERT_TRUE(restore(content, va, &why)) << why;
  ASSERT_EQ(launch(peek, first, buf + 128), 0);
  EXPECT_EQ(read_u32(buf + 128), 77u) << "the block's contents";
  ASSERT_EQ(launch(take, buf + 72, 1), 0);
  const uint64_t second = read_u64(buf + 72);
  EXPECT_NE(second, 0u);
  EXPECT_TRUE(second >= first + 48 || second + 48 <= first) << "a new block overlaps one taken before the restore";
  ASSERT_EQ(launch(peek, first, buf + 128), 0);
  EXPECT_EQ(read_u32(buf + 128), 77u) << "the old block was handed out again";
  // The same content with the held block moved off its alignment: refused, by name.
  Bytes forged = content;
  int patched = 0;
  for (size_t i = 0; i + 16 <= forged.size(); i++) {
    uint64_t a, n;
    std::memcpy(&a, forged.data() + i, 8);
    std::memcpy(&n, forged.data() + i + 8, 8);
    if (a == first && n == 48) {
      a += 4;
      std::memcpy(forged.data() + i, &a, 8);
      patched++;
    }
  }
  ASSERT_EQ(patched, 1);
  EXPECT_FALSE(restore(forged, va, &why));
  EXPECT_NE(why.find("malloc heap"), std::string::npos) << why;
}

TEST_F(Fixture, StateNotCarriedIsNamed) {
  build();
  // A pool destroyed while memory from it is still out: that memory has
  // no pool handle to come back under.
  MemPoolCreateReq pc{};
  pc.alloc_type = cudaMemAllocationTypePinned;
  pc.loc_type = cudaMemLocationTypeDevice;
  MemPoolCreateResp pr{};
  ASSERT_EQ(run<Op::MemPoolCreate>(pc, &pr), 0);
  MallocAsyncResp ma{};
  ASSERT_EQ(run<Op::MallocAsync>({256, 0, pr.pool}, &ma), 0);
  ASSERT_EQ(run<Op::MemPoolDestroy>({pr.pool}), 0);
  CheckpointWriter w;
  std::string why;
  EXPECT_FALSE(s->save(w, &why));
  EXPECT_NE(why.find("destroyed memory pool"), std::string::npos) << why;
  EXPECT_TRUE(w.content().empty());  // refused before anything was written
}

}  // namespace
