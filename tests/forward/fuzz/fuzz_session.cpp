// libFuzzer target: the server's request decoder and the session bodies
// behind it. Each input is a sequence of requests run through a fresh
// Session over the sim backend, exactly as the daemon's ring loop calls
// Session::handle (no guest library pre-checks anything).
//
// Input format (little-endian), repeated until the input ends:
//   u8  cmd     < 0xF0: a request; i = cmd % (kOpCount + 2) names the
//                       operation kAllOps[i] (the table's dense order: 0 is
//                       Pad), kOpCount one past the last opcode and
//                       kOpCount + 1 one between library blocks, so every
//                       table entry and two unknown opcodes are reachable
//               0xF0:   write the payload's bytes 4.. into the data area at
//                       offset (payload u32 0) % size (lets inputs build
//                       module images, copy sources, ...)
//               0xF1:   copy a real nvcc fatbin (hostile_kernels.cu) into the
//                       data area at offset (payload u32 0) % size
//               other:  ignored
//   u8  flags   bit 0: WH_MSG_F_POSTED
//   u16 len     payload bytes that follow (clamped to what is left)
// Structure: every 8-byte-aligned word of a request payload whose top 16
// bits are 0xFEED is a reference: known[word & 0xFF] + ((word >> 8) &
// 0xFFFFFF). known[] starts as {fatbin size, data area size, pinned heap
// offset} and grows with every 8-byte word of each successful response's
// fixed part (device pointers, module/kernel/stream/event/BLAS handles),
// so inputs can name live objects and the corpus stays meaningful.
//
// Harness limits (not server checks): launches of more than 2^16 threads
// in all (graph node lists and kernel node updates included), BLAS
// batches above 256 and BLAS vectors of more than 2^20 elements (with a
// zero increment a vector of 2^31 elements fits in one element's memory)
// and cuDNN convolutions of more than 2^24 multiply-adds are skipped, so
// one input cannot spend the whole time budget
// legitimately computing.
//
// Grown pinned segments (PinnedGrow) come from a source in this process's
// memory, at most two at a time; a word whose top 16 bits are 0xFE5E is an
// offset in one: ((word >> 32) & 3) << 40 (segment 0 to 3) + its low 32 bits.
//
// Invariant checked after each input: destroying the session returns every
// byte of device memory (a fresh context sees the whole device free), and
// every grown segment.
#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <vector>

#include "wormhole/proto/dispatch.hpp"
#include "wormhole/server/backend.hpp"
#include "wormhole/server/session.hpp"

using namespace wh::proto;
using namespace wh::server;

namespace {

constexpr uint64_t kDeviceBytes = 4ull << 20;
constexpr size_t kDataBytes = 256 << 10;
constexpr uint32_t kMaxMsg = 64 << 10;

// Segments as the daemon's, but anonymous memory (untouched pages cost nothing).
int g_live_segments = 0;
class FuzzSegment final : public PinnedSegment {
 public:
  FuzzSegment(uint8_t* p, uint64_t n) : p_(p), n_(n) { g_live_segments++; }
  ~FuzzSegment() override {
    munmap(p_, n_);
    g_live_segments--;
  }
  std::span<uint8_t> memory() const override { return {p_, n_}; }

 private:
  uint8_t* p_;
  uint64_t n_;
};
class FuzzPinned final : public PinnedSource {
 public:
  std::unique_ptr<PinnedSegment> create(uint64_t bytes, std::string* why) override {
    if (g_live_segments >= 2 || bytes > (256ull << 20)) return *why = "budget", nullptr;
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return *why = "mmap", nullptr;
    return std::make_unique<FuzzSegment>(static_cast<uint8_t*>(p), bytes);
  }
  bool hand_over(const PinnedSegment&, uint64_t) override { return true; }
};

Backend& backend() {
  static std::unique_ptr<Backend> b = make_sim_backend(1, kDeviceBytes);
  return *b;
}

const std::vector<uint8_t>& fatbin() {
  static std::vector<uint8_t> img = [] {
    const char* p = std::getenv("WH_FUZZ_FATBIN");
#ifdef WH_FUZZ_FATBIN_DEFAULT
    if (!p) p = WH_FUZZ_FATBIN_DEFAULT;
#endif
    std::vector<uint8_t> v;
    if (p) {
      std::ifstream f(p, std::ios::binary);
      v.assign(std::istreambuf_iterator<char>(f), {});
    }
    return v;
  }();
  return img;
}

bool skip_expensive(uint16_t op, const std::vector<uint8_t>& p) {
  if (Op(op) == Op::Launch && p.size() >= sizeof(LaunchReq)) {
    LaunchReq rq;
    std::memcpy(&rq, p.data(), sizeof rq);
    unsigned __int128 n = (unsigned __int128)rq.grid[0] * rq.grid[1] * rq.grid[2] * rq.block[0] * rq.block[1] * rq.block[2];
    return n > (1u << 16);
  }
  if (Op(op) == Op::GraphExecSetKernel && p.size() >= sizeof(GraphExecSetKernelReq)) {
    GraphExecSetKernelReq rq;
    std::memcpy(&rq, p.data(), sizeof rq);
    unsigned __int128 n = (unsigned __int128)rq.grid[0] * rq.grid[1] * rq.grid[2] * rq.block[0] * rq.block[1] * rq.block[2];
    return n > (1u << 16);
  }
  if (Op(op) == Op::GraphInstantiate && p.size() >= sizeof(GraphInstantiateReq)) {
    // The threads of all kernel nodes together (a tail-borne list only:
    // one through the data area is skipped when it holds any kernel).
    GraphInstantiateReq rq;
    std::memcpy(&rq, p.data(), sizeof rq);
    if (rq.bytes) return rq.nodes > 0;
    unsigned __int128 total = 0;
    for (size_t pos = sizeof rq; pos + sizeof(GraphNodeHdr) <= p.size();) {
      GraphNodeHdr h;
      std::memcpy(&h, p.data() + pos, sizeof h);
      pos += sizeof h;
      if (GraphOp(h.op) == GraphOp::Kernel && pos + sizeof(GraphKernelBody) <= p.size()) {
        GraphKernelBody b;
        std::memcpy(&b, p.data() + pos, sizeof b);
        total += (unsigned __int128)b.grid[0] * b.grid[1] * b.grid[2] * b.block[0] * b.block[1] * b.block[2];
      }
      // A replayed library call has the limits of the request it carries.
      if (GraphOp(h.op) == GraphOp::Call && h.body_bytes >= sizeof(GraphCallBody) &&
          h.body_bytes <= p.size() - pos) {
        GraphCallBody b;
        std::memcpy(&b, p.data() + pos, sizeof b);
        std::vector<uint8_t> inner(p.begin() + long(pos + sizeof b), p.begin() + long(pos + h.body_bytes));
        if (skip_expensive(b.op, inner)) return true;
      }
      if (h.body_bytes > p.size() - pos) break;
      pos += h.body_bytes;
    }
    return total > (1u << 16);
  }
  if (Op(op) == Op::BlasL1 && p.size() >= sizeof(BlasL1Req)) {
    BlasL1Req rq;
    std::memcpy(&rq, p.data(), sizeof rq);
    return rq.n > (1 << 20);
  }
  if (Op(op) == Op::BlasL2 && p.size() >= sizeof(BlasL2Req)) {
    BlasL2Req rq;
    std::memcpy(&rq, p.data(), sizeof rq);
    return rq.m > (1 << 20) || rq.n > (1 << 20);
  }
  if (Op(op) == Op::BlasGemmStridedBatched && p.size() >= sizeof(BlasGemmStridedBatchedReq)) {
    BlasGemmStridedBatchedReq rq;
    std::memcpy(&rq, p.data(), sizeof rq);
    return rq.batch > 256;
  }
  // A convolution's multiply-adds: the output's elements times one filter's.
  auto conv_cost = [](const DnnTensor& y, const DnnFilter& w) {
    unsigned __int128 c = 1;
    for (int k = 0; k < 4; k++) c *= uint32_t(std::max(y.dim[k], 1));
    for (int k = 1; k < 4; k++) c *= uint32_t(std::max(w.dim[k], 1));
    return c > (1u << 24);
  };
  if (Op(op) == Op::DnnConvFwd && p.size() >= sizeof(DnnConvFwdReq)) {
    DnnConvFwdReq rq;
    std::memcpy(&rq, p.data(), sizeof rq);
    return conv_cost(rq.y, rq.w);
  }
  if (Op(op) == Op::DnnConvBwdData && p.size() >= sizeof(DnnConvBwdDataReq)) {
    DnnConvBwdDataReq rq;
    std::memcpy(&rq, p.data(), sizeof rq);
    return conv_cost(rq.dy, rq.w);
  }
  if (Op(op) == Op::DnnConvBwdFilter && p.size() >= sizeof(DnnConvBwdFilterReq)) {
    DnnConvBwdFilterReq rq;
    std::memcpy(&rq, p.data(), sizeof rq);
    return conv_cost(rq.dy, rq.dw);
  }
  if (Op(op) == Op::BlasGemmBatched && p.size() >= sizeof(BlasGemmBatchedReq)) {
    BlasGemmBatchedReq rq;
    std::memcpy(&rq, p.data(), sizeof rq);
    return rq.batch > 256;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static std::vector<uint8_t> area(kDataBytes);
  std::memset(area.data(), 0, 4096);  // the status page
  Stats stats;
  std::vector<uint64_t> known{fatbin().size(), kDataBytes, kPinnedHeapOffset};
  static FuzzPinned pinned;
  {
    std::string err;
    auto ctx = backend().create_context(0, {}, &err);
    if (!ctx) std::abort();
    Session s(1, backend(), std::move(ctx), std::span<uint8_t>(area), stats);
    s.set_pinned_source(&pinned);
    DispatchResult out;
    std::vector<uint8_t> payload;
    size_t i = 0;
    while (i + 4 <= size) {
      const uint8_t cmd = data[i], flags = data[i + 1];
      size_t len = size_t(data[i + 2]) | size_t(data[i + 3]) << 8;
      i += 4;
      len = std::min(len, size - i);
      payload.assign(data + i, data + i + len);
      i += len;
      if (cmd >= 0xF0) {
        uint32_t off = 0;
        if (payload.size() >= 4) std::memcpy(&off, payload.data(), 4);
        off %= kDataBytes;
        if (cmd == 0xF0 && payload.size() > 4) {
          size_t n = std::min(payload.size() - 4, kDataBytes - off);
          std::memcpy(area.data() + off, payload.data() + 4, n);
        } else if (cmd == 0xF1 && !fatbin().empty()) {
          size_t n = std::min(fatbin().size(), kDataBytes - off);
          std::memcpy(area.data() + off, fatbin().data(), n);
        }
        continue;
      }
      const size_t idx = cmd % (kOpCount + 2);
      const uint16_t op = idx < kOpCount ? kAllOps[idx] : idx == kOpCount ? uint16_t(kOpLimit) : uint16_t(kOpBlock - 1);
      for (size_t w = 0; w + 8 <= payload.size(); w += 8) {
        uint64_t v;
        std::memcpy(&v, payload.data() + w, 8);
        if ((v >> 48) == 0xFE5E) {
          v = (((v >> 32) & 3) << kPinnedSegmentShift) + (v & 0xFFFFFFFF);
          std::memcpy(payload.data() + w, &v, 8);
          continue;
        }
        if ((v >> 48) != 0xFEED) continue;
        v = known[(v & 0xFF) % known.size()] + ((v >> 8) & 0xFFFFFF);
        std::memcpy(payload.data() + w, &v, 8);
      }
      if (skip_expensive(op, payload)) continue;
      const uint32_t f = (flags & 1) ? WH_MSG_F_POSTED : 0;
      bool respond = s.handle(op, f, payload, kMaxMsg, out);
      if (respond && out.status == 0 && known.size() < 256)
        for (size_t w = 0; w + 8 <= out.fixed.size(); w += 8) {
          uint64_t v;
          std::memcpy(&v, out.fixed.data() + w, 8);
          known.push_back(v);
        }
      // A response must fit the smallest ring the daemon makes (1 MiB rings:
      // max_msg is half a ring less a header); otherwise the reply fails.
      if (respond && out.fixed.size() + out.tail.size() > (512u << 10) - 32) std::abort();
    }
  }
  // Every byte the session held is back.
  std::string err;
  auto probe = backend().create_context(0, {}, &err);
  uint64_t fr = 0, total = 0;
  probe->mem_info(&fr, &total);
  if (fr != total) {
    std::fprintf(stderr, "device memory leaked across a session: free %llu of %llu\n", (unsigned long long)fr,
                 (unsigned long long)total);
    std::abort();
  }
  if (g_live_segments != 0) {
    std::fprintf(stderr, "%d grown pinned segments outlived their session\n", g_live_segments);
    std::abort();
  }
  return 0;
}
