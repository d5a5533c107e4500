// A hostile client against wormhole-server: it speaks the protocol directly
// (the socket handshake of guest-lib/cudart/src/connection.cpp, then raw
// records on the shm ring, with nothing pre-checked by a guest library) and
// sends malformed and malicious requests: unknown opcodes, wrong versions,
// short payloads, tails where none are allowed, huge lengths, counts and
// offsets, data-area offsets out of range, overflowing 2D extents, bad
// launches, forged and stale handles of every kind, device pointers of
// another client's session (through copies, memsets, BLAS and kernels of
// its own module), garbage module images, and garbage written straight
// into the ring. Every request must get a clean error status; a client
// that corrupts its ring or exceeds the violation limit is dropped; the
// server never crashes; the other session's memory is never read or
// written; and a well-behaved forwarded program runs beside all of it
// (every test's fixture keeps one running in a loop).
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "test_process.hpp"
#include "wormhole/proto/graph_wire.hpp"
#include "wormhole/fd_pass.hpp"
#include "wormhole/proto/wire.hpp"
#include "wormhole/ring.hpp"

using namespace std::chrono_literals;
using namespace wh::proto;
using wh::test::Process;
using wh::test::Server;
namespace ring = wh::ring;

namespace {

// raw() when the request never got an answer (ring status in last_ring).
constexpr int32_t kNoReply = INT32_MIN;

std::string prog(const char* name) { return std::string(WH_PROGRAM_DIR) + "/" + name; }

std::vector<uint8_t> read_file(const char* path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

size_t request_size(uint16_t op) {
  switch (Op(op)) {
#define WH_X_SIZE(Name, K, RQ, RS) \
  case Op::Name: return wire_size<Name##Req>;
    WH_ALL_OPS(WH_X_SIZE)
#undef WH_X_SIZE
    default: return 0;
  }
}

template <class T>
std::vector<uint8_t> bytes_of(const T& v, std::span<const uint8_t> tail = {}) {
  auto f = fixed_bytes(v);
  std::vector<uint8_t> out(f.begin(), f.end());
  out.insert(out.end(), tail.begin(), tail.end());
  return out;
}

// A client that speaks the wire protocol itself.
class RawClient {
 public:
  ~RawClient() {
    ch.reset();
    region.reset();
    if (sock >= 0) close(sock);
  }

  bool connect(const std::string& path, std::string* err) {
    sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
    if (::connect(sock, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return *err = "connect", false;
    Hello h{};
    h.magic = kHelloMagic;
    h.min_version = kMinVersion;
    h.max_version = kVersion;
    h.pid = uint32_t(getpid());
    if (write(sock, &h, sizeof h) != ssize_t(sizeof h)) return *err = "hello", false;
    HelloReply rep{};
    int fd = -1;
    if (ring::recv_with_fd(sock, &rep, sizeof rep, &fd) != ssize_t(sizeof rep) || rep.magic != kHelloMagic ||
        rep.status != 0) {
      if (fd >= 0) close(fd);
      return *err = "hello reply", false;
    }
    if (fd < 0) return *err = "no region fd", false;
    region = ring::Region::attach_fd(fd, err);
    close(fd);
    if (!region) return false;
    ch = ring::ClientChannel::claim(*region, int(rep.channel), err);
    if (!ch) return false;
    uint8_t ok = 1;
    if (write(sock, &ok, 1) != 1) return *err = "claim byte", false;
    session_id = rep.session_id;
    return ch->wait_attached(5s) == ring::Status::Ok || (*err = "not attached", false);
  }

  int32_t raw(uint16_t op, std::span<const uint8_t> payload, std::vector<uint8_t>* reply = nullptr,
              uint16_t version = kVersion, std::chrono::milliseconds timeout = 10s) {
    std::array<std::span<const uint8_t>, 1> parts{payload};
    ring::Message m;
    last_ring = ch->call(op, 0, parts, m, version, timeout);
    if (last_ring != ring::Status::Ok) return kNoReply;
    if (reply) *reply = m.payload;
    return m.hdr.status;
  }
  ring::Status post_raw(uint16_t op, std::span<const uint8_t> payload, uint16_t version = kVersion) {
    std::array<std::span<const uint8_t>, 1> parts{payload};
    return ch->post(op, 0, parts, version, 5000ms);
  }
  template <Op O>
  int32_t call(const typename OpTraits<O>::Request& rq, typename OpTraits<O>::Response* rs = nullptr,
               std::span<const uint8_t> tail = {}, std::vector<uint8_t>* rtail = nullptr) {
    std::vector<uint8_t> reply;
    int32_t st = raw(uint16_t(O), bytes_of(rq, tail), &reply);
    constexpr size_t n = wire_size<typename OpTraits<O>::Response>;
    if constexpr (n > 0)
      if (rs && reply.size() >= n) std::memcpy(rs, reply.data(), n);
    if (rtail && reply.size() > n) rtail->assign(reply.begin() + n, reply.end());
    return st;
  }
  template <Op O>
  ring::Status post(const typename OpTraits<O>::Request& rq, std::span<const uint8_t> tail = {}) {
    return post_raw(uint16_t(O), bytes_of(rq, tail));
  }

  // Did the server end this session (its end of the socket closed)?
  bool dropped(std::chrono::milliseconds within) {
    auto deadline = std::chrono::steady_clock::now() + within;
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{sock, POLLIN | POLLRDHUP, 50};
      if (poll(&p, 1, 50) > 0) {
        char b;
        if (p.revents & (POLLHUP | POLLRDHUP | POLLERR)) return true;
        if (recv(sock, &b, 1, MSG_DONTWAIT) == 0) return true;
      }
    }
    return false;
  }

  std::span<uint8_t> data() const { return ch->data(); }
  uint64_t malloc(uint64_t n) {
    MallocResp r{};
    EXPECT_EQ(call<Op::Malloc>({n}, &r), 0);
    return r.dptr;
  }
  // Copies `bytes` into the data area at `off` and loads them as a module.
  int32_t load_module(std::span<const uint8_t> image, uint64_t* module, uint64_t off = kPinnedHeapOffset) {
    std::memcpy(data().data() + off, image.data(), image.size());
    ModuleLoadResp r{};
    int32_t st = call<Op::ModuleLoad>({off, image.size()}, &r);
    *module = r.module;
    return st;
  }
  uint64_t kernel(uint64_t module, const std::string& name, uint32_t* param_bytes = nullptr) {
    ModuleGetKernelResp r{};
    std::vector<uint8_t> t;
    EXPECT_EQ(call<Op::ModuleGetKernel>({module}, &r, {reinterpret_cast<const uint8_t*>(name.data()), name.size()}, &t),
              0)
        << name;
    if (param_bytes) *param_bytes = r.param_bytes;
    return r.kernel;
  }
  uint64_t mem_free() {
    MemGetInfoResp r{};
    EXPECT_EQ(call<Op::MemGetInfo>({}, &r), 0);
    return r.free;
  }
  std::string stats() {
    std::vector<uint8_t> reply;
    EXPECT_EQ(raw(uint16_t(Op::GetStats), {}, &reply), 0);
    return std::string(reply.begin(), reply.end());
  }

  int sock = -1;
  std::unique_ptr<ring::Region> region;
  std::unique_ptr<ring::ClientChannel> ch;
  uint64_t session_id = 0;
  ring::Status last_ring = ring::Status::Ok;
};

LaunchReq launch_req(uint64_t kernel, uint32_t gx, uint32_t bx) {
  LaunchReq rq{};
  rq.kernel = kernel;
  rq.grid[0] = gx, rq.grid[1] = rq.grid[2] = 1;
  rq.block[0] = bx, rq.block[1] = rq.block[2] = 1;
  return rq;
}

struct CopyParams {
  uint64_t src, dst;
  uint32_t n;
};
struct FillParams {
  uint64_t dst;
  uint32_t value, n;
};
std::span<const uint8_t> param_bytes(const CopyParams& p) { return {reinterpret_cast<const uint8_t*>(&p), 20}; }
std::span<const uint8_t> param_bytes(const FillParams& p) { return {reinterpret_cast<const uint8_t*>(&p), 16}; }

uint32_t pattern(uint32_t i) { return (i * 2654435761u) ^ 0xA5A5F00Du; }

// Every test: a private server, and a well-behaved forwarded program running
// beside the hostile clients in a loop until the test ends.
class Hostile : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server.start({})) << server.log();
    neighbour_ = std::thread([this] {
      while (!stop_) {
        auto r = Process::run({prog("vector_add")}, server.client_env(), 120s);
        runs_++;
        if (r.status != 0 || r.output.find("PASS") == std::string::npos) {
          std::lock_guard lk(mu_);
          failures_++;
          last_failure_ = r.output;
        }
      }
    });
  }
  void TearDown() override {
    // A test may end before the neighbour's thread was first scheduled (a
    // loaded machine): its first run completes against this server before it stops.
    for (int i = 0; i < 1200 && runs_.load() == 0 && !IsSkipped(); ++i) std::this_thread::sleep_for(100ms);
    stop_ = true;
    if (neighbour_.joinable()) neighbour_.join();
    EXPECT_GE(runs_.load(), IsSkipped() ? 0 : 1);  // a test left out at its start may end first
    EXPECT_EQ(failures_.load(), 0) << "the well-behaved neighbour failed:\n" << last_failure_;
    EXPECT_TRUE(server.alive()) << "server died:\n" << server.log();
  }
  std::unique_ptr<RawClient> client() {
    auto c = std::make_unique<RawClient>();
    std::string err;
    EXPECT_TRUE(c->connect(server.socket(), &err)) << err;
    return c;
  }

  Server server;

 private:
  std::thread neighbour_;
  std::atomic<bool> stop_{false};
  std::atomic<int> runs_{0}, failures_{0};
  std::mutex mu_;
  std::string last_failure_;
};

// ---------------------------------------------------------------- framing

TEST_F(Hostile, UnknownOpcodesWrongVersionsShortPayloads) {
  auto c = client();
  // Past the last block, between blocks, and far out.
  for (uint16_t op : {uint16_t(kOpLimit), uint16_t(kOpLimit + 1), uint16_t(kOpBlock - 1), uint16_t(0x7fff),
                      uint16_t(0xffff)})
    EXPECT_EQ(c->raw(op, {}), kUnknownOp) << op;
  for (uint16_t v : {uint16_t(0), uint16_t(kVersion + 1), uint16_t(0xffff)})
    EXPECT_EQ(c->raw(uint16_t(Op::MemGetInfo), {}, nullptr, v), kBadRequest) << "version " << v;
  int n = 7;
  // The fixed part one byte short, for every opcode that has one.
  for (size_t i = 1; i < kOpCount; i++) {
    const uint16_t op = kAllOps[i];
    size_t sz = request_size(op);
    if (!sz) continue;
    std::vector<uint8_t> p(sz - 1, 0xff);
    EXPECT_EQ(c->raw(op, p), kBadRequest) << op_name(op);
    EXPECT_EQ(c->raw(op, {}), kBadRequest) << op_name(op);  // and empty
    n += 2;
    if (n > 56) break;  // stay under the violation limit (64)
  }
  // The session still works, and the server counted every rejection.
  EXPECT_EQ(c->raw(uint16_t(Op::DeviceSynchronize), {}), 0);
  EXPECT_GT(c->mem_free(), 0u);
  EXPECT_FALSE(c->dropped(100ms));
  // More short payloads on a second session (the first would hit the limit).
  auto d = client();
  int m = 0;
  for (size_t i = kOpCount - 1; i > 0 && m < 40; i--)
    if (const uint16_t op = kAllOps[i]; size_t sz = request_size(op)) {
      std::vector<uint8_t> p(sz / 2, 0x5a);
      EXPECT_EQ(d->raw(op, p), kBadRequest) << op_name(op);
      m++;
    }
  std::string st = d->stats();
  EXPECT_NE(st.find("rejected"), std::string::npos) << st;
}

TEST_F(Hostile, TailsWhereNoneAllowedAndOversizedTails) {
  auto c = client();
  const uint32_t max_msg = c->ch->max_msg();
  int n = 0;
  for (size_t i = 1; i < kOpCount && n < 58; i++) {
    const uint16_t op = kAllOps[i];
    if (request_tail_max(Op(op), max_msg) != 0) continue;
    std::vector<uint8_t> p(request_size(op) + 8, 0);
    EXPECT_EQ(c->raw(op, p), kBadRequest) << op_name(op);
    n++;
  }
  EXPECT_GT(c->mem_free(), 0u);
  auto d = client();
  std::vector<uint8_t> big(kMaxParamBytes + 1, 0);
  EXPECT_EQ(d->call<Op::Launch>(launch_req(0, 1, 1), nullptr, big), kBadRequest);
  std::vector<uint8_t> name(kMaxNameBytes + 1, 'a');
  EXPECT_EQ(d->call<Op::ModuleGetKernel>({0}, nullptr, name), kBadRequest);
  EXPECT_EQ(d->call<Op::ModuleGetGlobal>({0}, nullptr, name), kBadRequest);
  // A payload above the region's max_msg never leaves the client.
  std::vector<uint8_t> huge(size_t(max_msg) + 1, 0);
  EXPECT_EQ(d->raw(uint16_t(Op::MemcpyHtoDInline), huge), kNoReply);
  EXPECT_EQ(d->last_ring, ring::Status::TooBig);
  EXPECT_GT(d->mem_free(), 0u);
}

// ---------------------------------------------------------------- ranges

TEST_F(Hostile, HugeLengthsCountsAndOffsets) {
  auto c = client();
  const uint64_t area = c->data().size();
  const uint64_t P = kPinnedHeapOffset;
  const uint64_t d = c->malloc(4096);
  ASSERT_NE(d, 0u);
  const int32_t inval = cudaErrorInvalidValue;
  EXPECT_EQ(c->call<Op::Malloc>({UINT64_MAX}), cudaErrorMemoryAllocation);
  EXPECT_EQ(c->call<Op::Malloc>({1ull << 62}), cudaErrorMemoryAllocation);
  // Data-area offsets and device ranges out of bounds, and sums that overflow.
  for (auto rq : std::vector<MemcpyHtoDReq>{{d, area, 1, 0, 0},
                                            {d, area - 8, 16, 0, 0},
                                            {d, UINT64_MAX - 7, 16, 0, 0},
                                            {d, P, UINT64_MAX, 0, 0},
                                            {d, P, 4097, 0, 0},
                                            {d + 4000, P, 200, 0, 0},
                                            {d - 1, P, 16, 0, 0},
                                            {0, P, 16, 0, 0},
                                            {UINT64_MAX - 8, P, 16, 0, 0},
                                            {d, UINT64_MAX, UINT64_MAX, 0, 0},
                                            {d, area, 1, 0, 77}})
    EXPECT_EQ(c->call<Op::MemcpyHtoD>(rq), inval) << rq.dst << " " << rq.src_off << " " << rq.bytes;
  for (auto rq : std::vector<MemcpyDtoHReq>{{area, d, 1, 0, 0},
                                            {area - 4, d, 8, 0, 0},
                                            {UINT64_MAX, d, 2, 0, 0},
                                            {P, d, 8192, 0, 0},
                                            {P, d + 4095, 2, 0, 0},
                                            {P, 0x1000, 16, 0, 0}})
    EXPECT_EQ(c->call<Op::MemcpyDtoH>(rq), inval) << rq.dst_off << " " << rq.src << " " << rq.bytes;
  EXPECT_EQ(c->call<Op::MemcpyDtoD>({d, d + 2048, 4096, 0}), inval);
  EXPECT_EQ(c->call<Op::MemcpyDtoD>({d, UINT64_MAX - 4, 16, 0}), inval);
  EXPECT_EQ(c->call<Op::Memset>({d, 4097, 0, 0, 0}), inval);
  EXPECT_EQ(c->call<Op::Memset>({d, UINT64_MAX, 0, 0, 0}), inval);
  EXPECT_EQ(c->call<Op::Memset>({d + 4096, 1, 0, 0, 0}), inval);
  std::vector<uint8_t> sixteen(16, 1);
  EXPECT_EQ(c->call<Op::MemcpyHtoDInline>({d + 4090, 0}, nullptr, sixteen), inval);
  // 2D copies whose extents overflow or leave the ranges.
  auto m2d = [&](uint64_t dst, uint64_t dp, uint64_t src, uint64_t sp, uint64_t w, uint64_t h, uint32_t kind) {
    return c->call<Op::Memcpy2D>({dst, dp, src, sp, w, h, kind, 0, 0});
  };
  EXPECT_EQ(m2d(d, 8, P, 16, 16, 2, cudaMemcpyHostToDevice), cudaErrorInvalidPitchValue);
  EXPECT_EQ(m2d(d, 1ull << 40, P, 1ull << 40, 1, 1ull << 40, cudaMemcpyHostToDevice), inval);
  EXPECT_EQ(m2d(d, 2, P, 2, 1, UINT64_MAX, cudaMemcpyHostToDevice), inval);
  EXPECT_EQ(m2d(d, UINT64_MAX, P, UINT64_MAX, UINT64_MAX, 2, cudaMemcpyHostToDevice), inval);
  EXPECT_EQ(m2d(d, 64, P, 64, 64, 65, cudaMemcpyHostToDevice), inval);  // 65 rows of 64 > 4096
  EXPECT_EQ(m2d(d, 64, area - 64, 64, 64, 2, cudaMemcpyHostToDevice), inval);
  EXPECT_EQ(m2d(area - 64, 64, d, 64, 64, 2, cudaMemcpyDeviceToHost), inval);
  EXPECT_EQ(m2d(d, 64, d + 2048, 64, 64, 33, cudaMemcpyDeviceToDevice), inval);
  EXPECT_EQ(m2d(d, 64, P, 64, 64, 2, 7), cudaErrorInvalidMemcpyDirection);
  EXPECT_EQ(m2d(d, 64, P, 64, 64, 2, cudaMemcpyHostToHost), cudaErrorInvalidMemcpyDirection);
  // Module images out of the data area or too small.
  EXPECT_EQ(c->call<Op::ModuleLoad>({area - 8, 16}), inval);
  EXPECT_EQ(c->call<Op::ModuleLoad>({0, UINT64_MAX}), inval);
  EXPECT_EQ(c->call<Op::ModuleLoad>({UINT64_MAX - 15, 32}), inval);
  EXPECT_EQ(c->call<Op::ModuleLoad>({P, 8}), inval);
  // Flags, devices and attributes that do not exist.
  EXPECT_EQ(c->call<Op::StreamCreate>({0xffff, 0}), inval);
  EXPECT_EQ(c->call<Op::EventCreate>({0xff00, 0}), inval);
  EXPECT_EQ(c->call<Op::GetDeviceProps>({-1}), cudaErrorInvalidDevice);
  EXPECT_EQ(c->call<Op::GetDeviceProps>({1 << 30}), cudaErrorInvalidDevice);
  EXPECT_EQ(c->call<Op::DeviceSetLimit>({-5, 0, 1}), cudaErrorUnsupportedLimit);
  EXPECT_EQ(c->call<Op::DeviceSetLimit>({7, 0, 1}), cudaErrorUnsupportedLimit);
  EXPECT_EQ(c->call<Op::DeviceGetLimit>({INT32_MIN, 0}), cudaErrorUnsupportedLimit);
  EXPECT_EQ(c->call<Op::DeviceSetLimit>({int32_t(cudaLimitMaxL2FetchGranularity), 0, 129}), inval);
  EXPECT_EQ(c->call<Op::SetDevice>({5, 0}), cudaErrorInvalidDevice);
  EXPECT_EQ(c->call<Op::SetDevice>({-1, 0}), cudaErrorInvalidDevice);
  // Frees of what was never allocated, inside an allocation, and twice.
  EXPECT_EQ(c->call<Op::Free>({d + 8}), inval);
  EXPECT_EQ(c->call<Op::Free>({0x1234}), inval);
  EXPECT_EQ(c->call<Op::Free>({d}), 0);
  EXPECT_EQ(c->call<Op::Free>({d}), inval);
  EXPECT_EQ(c->call<Op::MemcpyHtoD>({d, P, 16, 0, 0}), inval);  // freed
  // Posted bad requests surface at the next synchronisation, once.
  ASSERT_EQ(c->post<Op::Memset>({d, 16, 0, 0, 0}), ring::Status::Ok);
  EXPECT_EQ(c->call<Op::DeviceSynchronize>({}), inval);
  EXPECT_EQ(c->call<Op::DeviceSynchronize>({}), 0);
  // None of these were protocol violations: the session is in good standing.
  EXPECT_FALSE(c->dropped(100ms));
  const uint64_t e = c->malloc(256);
  std::memset(c->data().data() + P, 0x3c, 256);
  EXPECT_EQ(c->call<Op::MemcpyHtoD>({e, P, 256, 0, 0}), 0);
  EXPECT_EQ(c->call<Op::MemcpyDtoH>({P + 4096, e, 256, 0, 0}), 0);
  EXPECT_EQ(std::memcmp(c->data().data() + P, c->data().data() + P + 4096, 256), 0);
}

// ---------------------------------------------------------------- launches

TEST_F(Hostile, KernelLaunchChecks) {
  auto image = read_file(WH_HOSTILE_FATBIN);
  ASSERT_GT(image.size(), 16u);
  auto c = client();
  uint64_t mod = 0;
  ASSERT_EQ(c->load_module(image, &mod), 0);
  uint32_t pb = 0;
  const uint64_t fill = c->kernel(mod, "fill_words", &pb);
  ASSERT_EQ(pb, 16u);
  const uint64_t d = c->malloc(4096);
  FillParams fp{d, 7, 1024};
  auto good = param_bytes(fp);
  // Names that are not kernels.
  for (std::string name : {std::string(""), std::string("no_such_kernel"), std::string("fill_words\0x", 12),
                           std::string(4096, 'k')}) {
    ModuleGetKernelResp r{};
    EXPECT_EQ(c->call<Op::ModuleGetKernel>({mod}, &r, {reinterpret_cast<const uint8_t*>(name.data()), name.size()}),
              cudaErrorInvalidDeviceFunction);
  }
  EXPECT_EQ(c->call<Op::ModuleGetGlobal>({mod}, nullptr, {reinterpret_cast<const uint8_t*>("nope"), 4}),
            cudaErrorInvalidSymbol);
  // Wrong parameter sizes.
  for (size_t n : {size_t(0), size_t(15), size_t(17), size_t(1024)}) {
    std::vector<uint8_t> p(n, 0);
    if (n) std::memcpy(p.data(), good.data(), std::min(n, good.size()));
    EXPECT_EQ(c->call<Op::Launch>(launch_req(fill, 4, 256), nullptr, p), cudaErrorInvalidValue) << n;
  }
  // Absurd configurations.
  auto cfg = [&](std::array<uint32_t, 3> g, std::array<uint32_t, 3> b, uint32_t shared = 0) {
    LaunchReq rq = launch_req(fill, 1, 1);
    std::copy(g.begin(), g.end(), rq.grid);
    std::copy(b.begin(), b.end(), rq.block);
    rq.shared_bytes = shared;
    return c->call<Op::Launch>(rq, nullptr, good);
  };
  const int32_t badcfg = cudaErrorInvalidConfiguration;
  EXPECT_EQ(cfg({0, 1, 1}, {32, 1, 1}), badcfg);
  EXPECT_EQ(cfg({1, 0, 1}, {32, 1, 1}), badcfg);
  EXPECT_EQ(cfg({1, 65536, 1}, {32, 1, 1}), badcfg);
  EXPECT_EQ(cfg({1, 1, 70000}, {32, 1, 1}), badcfg);
  EXPECT_EQ(cfg({0x80000000u, 1, 1}, {32, 1, 1}), badcfg);
  EXPECT_EQ(cfg({UINT32_MAX, UINT32_MAX, UINT32_MAX}, {32, 1, 1}), badcfg);
  EXPECT_EQ(cfg({1, 1, 1}, {0, 1, 1}), badcfg);
  EXPECT_EQ(cfg({1, 1, 1}, {1025, 1, 1}), badcfg);
  EXPECT_EQ(cfg({1, 1, 1}, {32, 32, 2}), badcfg);
  EXPECT_EQ(cfg({1, 1, 1}, {1, 1, 65}), badcfg);
  EXPECT_EQ(cfg({1, 1, 1}, {UINT32_MAX, UINT32_MAX, 1}), badcfg);  // product overflows 32 bits
  EXPECT_EQ(cfg({1, 1, 1}, {65536, 65536, 1}), badcfg);
  EXPECT_EQ(cfg({1, 1, 1}, {32, 1, 1}, 1u << 30), cudaErrorInvalidValue);
  // Posted: the error comes back at the next synchronisation, and the
  // session is still usable afterwards.
  ASSERT_EQ(c->post<Op::Launch>(launch_req(fill, 1, 2048), good), ring::Status::Ok);
  EXPECT_EQ(c->call<Op::StreamSynchronize>({0}), badcfg);
  EXPECT_EQ(c->call<Op::Launch>(launch_req(fill, 4, 256), nullptr, good), 0);
  EXPECT_EQ(c->call<Op::MemcpyDtoH>({kPinnedHeapOffset, d, 4096, 0, 0}), 0);
  auto* w = reinterpret_cast<const uint32_t*>(c->data().data() + kPinnedHeapOffset);
  for (int i = 0; i < 1024; i++) ASSERT_EQ(w[i], 7u) << i;
  // A kernel that strays out of its own allocation faults (sticky), and
  // cudaDeviceReset gives the session a clean context again.
  WH_EXCLUDE_WHEN_STACKED(wh::test::stacked_why::kOneSession);
  FillParams over{d, 1, 2048};
  ASSERT_EQ(c->post<Op::Launch>(launch_req(fill, 8, 256), param_bytes(over)), ring::Status::Ok);
  EXPECT_EQ(c->call<Op::DeviceSynchronize>({}), cudaErrorIllegalAddress);
  EXPECT_EQ(c->call<Op::MemGetInfo>({}), cudaErrorIllegalAddress);  // sticky
  // The fault's details wait for FetchOutput (answered despite the fault),
  // in pieces no larger than asked; a tail or a zero size is refused.
  auto* st = reinterpret_cast<const DataAreaStatus*>(c->data().data());
  EXPECT_GT(__atomic_load_n(&st->output_seq, __ATOMIC_ACQUIRE), 0u);
  FetchOutputResp fo{};
  std::vector<uint8_t> t;
  EXPECT_EQ(c->call<Op::FetchOutput>({0, 0}, &fo, {}, &t), cudaErrorInvalidValue);
  EXPECT_EQ(c->raw(uint16_t(Op::FetchOutput), std::vector<uint8_t>(16, 0)), kBadRequest);
  std::string text;
  for (int i = 0; i < 1000; i++) {
    t.clear();
    ASSERT_EQ(c->call<Op::FetchOutput>({7, 0}, &fo, {}, &t), 0);
    EXPECT_LE(t.size(), 7u);
    EXPECT_EQ(fo.stream, kOutputStderr);
    text.append(t.begin(), t.end());
    if (!fo.more) break;
  }
  EXPECT_NE(text.find("fill_words"), std::string::npos) << text;
  EXPECT_NE(text.find("cudaErrorIllegalAddress"), std::string::npos) << text;
  t.clear();
  EXPECT_EQ(c->call<Op::FetchOutput>({UINT32_MAX, 0}, &fo, {}, &t), 0);  // nothing left
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(fo.more, 0u);
  EXPECT_EQ(c->call<Op::DeviceReset>({}), 0);
  EXPECT_GT(c->mem_free(), 0u);
  EXPECT_EQ(c->call<Op::Launch>(launch_req(fill, 1, 1), nullptr, good), cudaErrorInvalidResourceHandle);  // reset
  EXPECT_FALSE(c->dropped(100ms));
}

// ---------------------------------------------------------------- graphs

// A node list for GraphInstantiate, built node by node (graph_wire.hpp).
struct NodeList {
  std::vector<uint8_t> w;
  uint32_t nodes = 0, segments = 1;
  template <class T>
  NodeList& node(GraphOp op, const T& body, std::span<const uint8_t> extra = {}) {
    GraphNodeHdr h{uint16_t(op), 0, uint32_t(sizeof body + extra.size())};
    append(h), append(body);
    w.insert(w.end(), extra.begin(), extra.end());
    nodes++;
    return *this;
  }
  NodeList& split() {
    append(GraphNodeHdr{uint16_t(GraphOp::SegmentEnd), 0, 0});
    segments++;
    return *this;
  }
  template <class T>
  void append(const T& v) {
    auto* b = reinterpret_cast<const uint8_t*>(&v);
    w.insert(w.end(), b, b + sizeof v);
  }
};

GraphKernelBody kernel_body(uint64_t kernel, uint32_t gx, uint32_t bx, uint32_t param_bytes) {
  GraphKernelBody b{};
  b.kernel = kernel;
  b.grid[0] = gx, b.grid[1] = b.grid[2] = 1;
  b.block[0] = bx, b.block[1] = b.block[2] = 1;
  b.param_bytes = param_bytes;
  return b;
}

TEST_F(Hostile, GraphNodeListsAreValidated) {
  auto image = read_file(WH_HOSTILE_FATBIN);
  auto c = client();
  uint64_t mod = 0;
  ASSERT_EQ(c->load_module(image, &mod), 0);
  const uint64_t fill = c->kernel(mod, "fill_words");
  const uint64_t d = c->malloc(4096);
  const uint64_t P = kPinnedHeapOffset, area = c->data().size();
  const int32_t inval = cudaErrorInvalidValue, badh = cudaErrorInvalidResourceHandle;
  FillParams fp{d, 9, 1024};
  auto good = param_bytes(fp);
  auto inst = [&](const NodeList& l, uint64_t* exec = nullptr, uint32_t nodes = UINT32_MAX,
                  uint32_t segs = UINT32_MAX) {
    GraphInstantiateResp r{};
    int32_t st = c->call<Op::GraphInstantiate>(
        {0, 0, 0, nodes == UINT32_MAX ? l.nodes : nodes, segs == UINT32_MAX ? l.segments : segs}, &r, l.w);
    if (exec) *exec = r.exec;
    return st;
  };
  // A good graph: fill, then copy the words to pinned memory; it runs.
  GraphCopyBody back{P, d, 4096, 4096, 0, 0, 4096, 1, 1, cudaMemcpyDeviceToHost, 0};
  NodeList ok;
  ok.node(GraphOp::Kernel, kernel_body(fill, 4, 256, 16), good).node(GraphOp::Copy, back);
  uint64_t x = 0;
  ASSERT_EQ(inst(ok, &x), 0);
  ASSERT_EQ(c->post<Op::GraphLaunch>({x, 0, 0, 0}), ring::Status::Ok);
  ASSERT_EQ(c->call<Op::StreamSynchronize>({0}), 0);
  auto* w = reinterpret_cast<const uint32_t*>(c->data().data() + P);
  for (int i = 0; i < 1024; i++) ASSERT_EQ(w[i], 9u) << i;

  // Counts that disagree with the list, truncated and oversized records.
  EXPECT_EQ(inst(ok, nullptr, 1), inval);
  EXPECT_EQ(inst(ok, nullptr, 3), inval);
  EXPECT_EQ(inst(ok, nullptr, UINT32_MAX - 1), inval);
  EXPECT_EQ(inst(ok, nullptr, 2, 0), inval);
  EXPECT_EQ(inst(ok, nullptr, 2, 2), inval);
  for (size_t cut : {size_t(1), size_t(7), size_t(9), size_t(40)}) {
    NodeList t = ok;
    t.w.resize(t.w.size() - cut);
    EXPECT_EQ(inst(t), inval) << cut;
  }
  {
    NodeList t = ok;
    reinterpret_cast<GraphNodeHdr*>(t.w.data())->body_bytes = UINT32_MAX;
    EXPECT_EQ(inst(t), inval);
    reinterpret_cast<GraphNodeHdr*>(t.w.data())->body_bytes = 8;
    EXPECT_EQ(inst(t), inval);
    reinterpret_cast<GraphNodeHdr*>(t.w.data())->op = 99;
    EXPECT_EQ(inst(t), inval);
  }
  // Kernel nodes: parameter sizes, handles and configurations.
  EXPECT_EQ(inst(NodeList().node(GraphOp::Kernel, kernel_body(fill, 4, 256, 15), good.first(15))), inval);
  EXPECT_EQ(inst(NodeList().node(GraphOp::Kernel, kernel_body(fill, 4, 256, 16), good.first(15))), inval);
  EXPECT_EQ(inst(NodeList().node(GraphOp::Kernel, kernel_body(fill, 4, 256, UINT32_MAX), good)), inval);
  EXPECT_EQ(inst(NodeList().node(GraphOp::Kernel, kernel_body(fill ^ (1ull << 40), 4, 256, 16), good)), badh);
  EXPECT_EQ(inst(NodeList().node(GraphOp::Kernel, kernel_body(x, 4, 256, 16), good)), badh);
  EXPECT_EQ(inst(NodeList().node(GraphOp::Kernel, kernel_body(fill, 0, 256, 16), good)),
            cudaErrorInvalidConfiguration);
  EXPECT_EQ(inst(NodeList().node(GraphOp::Kernel, kernel_body(fill, 1, 2048, 16), good)),
            cudaErrorInvalidConfiguration);
  // Copies and memsets out of the session's memory, overflowing extents.
  for (GraphCopyBody b : std::vector<GraphCopyBody>{
           {P, d, 4097, 4097, 0, 0, 4097, 1, 1, cudaMemcpyDeviceToHost, 0},
           {area - 8, d, 16, 16, 0, 0, 16, 1, 1, cudaMemcpyDeviceToHost, 0},
           {d, P, 64, 64, 64 * 64, 64 * 64, 64, 64, 2, cudaMemcpyHostToDevice, 0},
           {d, P, 1, 1, UINT64_MAX, 1, 1, 1, 3, cudaMemcpyHostToDevice, 0},
           {d, P, 16, 16, 0, 0, 16, 1, 1ull << 60, cudaMemcpyHostToDevice, 0},  // overlapping slices
           {d, P, 16, 16, 16, 8, 16, 1, 2, cudaMemcpyHostToDevice, 0},
           {d, d + 8, 8, 8, 0, 0, 8, UINT64_MAX, 1, cudaMemcpyDeviceToDevice, 0},
           {d, 0x1000, 16, 16, 0, 0, 16, 1, 1, cudaMemcpyDeviceToDevice, 0}})
    EXPECT_EQ(inst(NodeList().node(GraphOp::Copy, b)), inval) << b.width << "x" << b.height << "x" << b.depth;
  EXPECT_EQ(inst(NodeList().node(GraphOp::Copy, GraphCopyBody{d, P, 16, 16, 0, 0, 16, 1, 1, 9, 0})),
            cudaErrorInvalidMemcpyDirection);
  EXPECT_EQ(inst(NodeList().node(GraphOp::Copy, GraphCopyBody{d, P, 8, 16, 0, 0, 16, 2, 1, 1, 0})),
            cudaErrorInvalidPitchValue);
  for (GraphMemsetBody m : std::vector<GraphMemsetBody>{{d, 4096, 4096, 1, 0, 3},
                                                       {d, 4096, 1025, 1, 0, 4},
                                                       {d, 64, 16, 65, 0, 4},
                                                       {d, 0, UINT64_MAX, 1, 0, 4},
                                                       {d + 4096, 1, 1, 1, 0, 1}})
    EXPECT_NE(inst(NodeList().node(GraphOp::Memset, m)), 0) << m.width << " " << m.elem_size;
  // A 4-byte pattern over 64 KiB chunks and rows of a pitched 2D memset runs right.
  {
    const uint64_t big = c->malloc(200000);
    uint64_t xm = 0;
    ASSERT_EQ(inst(NodeList()
                       .node(GraphOp::Memset, GraphMemsetBody{big, 0, 50000, 1, 0x11223344, 4})
                       .node(GraphOp::Memset, GraphMemsetBody{big, 1000, 100, 3, 0x12AB, 2})
                       .node(GraphOp::Copy, GraphCopyBody{P, big, 200000, 200000, 0, 0, 200000, 1, 1,
                                                          cudaMemcpyDeviceToHost, 0}),
                   &xm),
              0);
    ASSERT_EQ(c->post<Op::GraphLaunch>({xm, 0, 0, 0}), ring::Status::Ok);
    ASSERT_EQ(c->call<Op::StreamSynchronize>({0}), 0);
    auto* b = c->data().data() + P;
    for (uint32_t i = 0; i < 50000; i++) {
      const uint64_t o = uint64_t(i) * 4;
      const bool set2 = (o % 1000) < 200 && o < 3000;  // rows of 100 2-byte elements, pitch 1000
      uint32_t want = set2 ? 0x12AB12ABu : 0x11223344u;
      uint32_t got;
      std::memcpy(&got, b + o, 4);
      ASSERT_EQ(got, want) << o;
    }
    EXPECT_EQ(c->call<Op::GraphExecDestroy>({xm}), 0);
    EXPECT_EQ(c->call<Op::Free>({big}), 0);
  }
  // Events that do not exist; a segment marker with a body, or too many.
  EXPECT_EQ(inst(NodeList().node(GraphOp::EventRecord, GraphEventBody{0x45ull << 56 | 1})), badh);
  EXPECT_EQ(inst(NodeList().node(GraphOp::EventWait, GraphEventBody{UINT64_MAX})), badh);
  {
    NodeList t = ok;
    t.split();
    EXPECT_EQ(inst(t, nullptr, UINT32_MAX, 1), inval);
    t.w.back() = 1;  // (the marker's body size, high byte)
    EXPECT_EQ(inst(t), inval);
  }
  // Through the data area: out of bounds, too big, or both ways at once.
  EXPECT_EQ(c->call<Op::GraphInstantiate>({0, area - 8, 64, 1, 1}), inval);
  EXPECT_EQ(c->call<Op::GraphInstantiate>({0, P, kMaxGraphBytes + 1, 1, 1}), inval);
  EXPECT_EQ(c->call<Op::GraphInstantiate>({0, UINT64_MAX, UINT64_MAX, 1, 1}), inval);
  EXPECT_EQ(c->call<Op::GraphInstantiate>({0, P, 64, 2, 1}, nullptr, ok.w), inval);
  EXPECT_EQ(c->call<Op::GraphInstantiate>({x ^ 1, 0, 0, ok.nodes, 1}, nullptr, ok.w), badh);

  // Launches: a forged graph or segment fails at the next synchronisation.
  ASSERT_EQ(c->post<Op::GraphLaunch>({x ^ (1ull << 33), 0, 0, 0}), ring::Status::Ok);
  EXPECT_EQ(c->call<Op::StreamSynchronize>({0}), badh);
  ASSERT_EQ(c->post<Op::GraphLaunch>({x, 0, 1, 0}), ring::Status::Ok);
  EXPECT_EQ(c->call<Op::StreamSynchronize>({0}), inval);
  ASSERT_EQ(c->post<Op::GraphLaunch>({x, 0x53ull << 56 | 7, 0, 0}), ring::Status::Ok);
  EXPECT_EQ(c->call<Op::StreamSynchronize>({0}), badh);
  // Node updates: index, node kind, parameter size, configuration.
  GraphExecSetKernelReq sk{};
  sk.exec = x, sk.grid[0] = sk.grid[1] = sk.grid[2] = 1, sk.block[0] = 256, sk.block[1] = sk.block[2] = 1;
  sk.node = 2;
  EXPECT_EQ(c->call<Op::GraphExecSetKernel>(sk, nullptr, good), inval);
  sk.node = 1;  // the copy
  EXPECT_EQ(c->call<Op::GraphExecSetKernel>(sk, nullptr, good), inval);
  sk.node = 0;
  EXPECT_EQ(c->call<Op::GraphExecSetKernel>(sk, nullptr, good.first(12)), inval);
  sk.block[0] = 4096;
  EXPECT_EQ(c->call<Op::GraphExecSetKernel>(sk, nullptr, good), cudaErrorInvalidConfiguration);
  sk.block[0] = 256, sk.grid[0] = 4;
  FillParams fp2{d, 5, 1024};
  EXPECT_EQ(c->call<Op::GraphExecSetKernel>(sk, nullptr, param_bytes(fp2)), 0);
  ASSERT_EQ(c->post<Op::GraphLaunch>({x, 0, 0, 0}), ring::Status::Ok);
  ASSERT_EQ(c->call<Op::StreamSynchronize>({0}), 0);
  for (int i = 0; i < 1024; i++) ASSERT_EQ(w[i], 5u) << i;
  // Memory freed after instantiation: the node is checked again when it runs.
  const uint64_t d2 = c->malloc(4096);
  uint64_t x2 = 0;
  GraphCopyBody back2{P, d2, 4096, 4096, 0, 0, 4096, 1, 1, cudaMemcpyDeviceToHost, 0};
  ASSERT_EQ(inst(NodeList().node(GraphOp::Copy, back2), &x2), 0);
  EXPECT_EQ(c->call<Op::Free>({d2}), 0);
  ASSERT_EQ(c->post<Op::GraphLaunch>({x2, 0, 0, 0}), ring::Status::Ok);
  EXPECT_EQ(c->call<Op::StreamSynchronize>({0}), inval);
  EXPECT_EQ(c->call<Op::GraphExecDestroy>({x2}), 0);
  EXPECT_EQ(c->call<Op::GraphExecDestroy>({x}), 0);
  EXPECT_EQ(c->call<Op::GraphExecDestroy>({x}), badh);
  // None of these were protocol violations.
  EXPECT_FALSE(c->dropped(100ms));
  EXPECT_GT(c->mem_free(), 0u);
}

// Call nodes (library requests a capture recorded): only posted cuBLAS
// requests, whole; the request is checked again when the graph runs, on the
// launch stream; a forged handle or memory out of the session fails then.
TEST_F(Hostile, GraphCallNodesAreValidated) {
  auto c = client();
  const int32_t inval = cudaErrorInvalidValue;
  const uint64_t P = kPinnedHeapOffset;
  BlasCreateResp bh{};
  ASSERT_EQ(c->call<Op::BlasCreate>({}, &bh), 0);
  const uint64_t a = c->malloc(64), b = c->malloc(64), out = c->malloc(64);
  // 4x4 identity times 4x4 of 1..16: C = B.
  auto* f = reinterpret_cast<float*>(c->data().data() + P);
  for (int i = 0; i < 16; i++) f[i] = (i % 5 == 0) ? 1.f : 0.f, f[16 + i] = float(i + 1);
  ASSERT_EQ(c->call<Op::MemcpyHtoD>({a, P, 64, 0, 0}), 0);
  ASSERT_EQ(c->call<Op::MemcpyHtoD>({b, P + 64, 64, 0, 0}), 0);
  ASSERT_EQ(c->call<Op::StreamSynchronize>({0}), 0);
  BlasGemmReq g{};
  g.handle = bh.handle, g.stream = 0x53ull << 56 | 12345;  // replaced by the launch stream
  const float one = 1.f, zero = 0.f;
  std::memcpy(&g.alpha, &one, 4), std::memcpy(&g.beta, &zero, 4);
  g.A = a, g.B = b, g.C = out, g.lda = g.ldb = g.ldc = 4, g.m = g.n = g.k = 4, g.dtype = kBlasF32;
  auto call_node = [](uint16_t op, std::span<const uint8_t> payload, uint32_t claimed = UINT32_MAX) {
    NodeList l;
    std::vector<uint8_t> body(sizeof(GraphCallBody) + payload.size());
    GraphCallBody cb{op, 0, claimed == UINT32_MAX ? uint32_t(payload.size()) : claimed};
    std::memcpy(body.data(), &cb, sizeof cb);
    std::memcpy(body.data() + sizeof cb, payload.data(), payload.size());
    l.append(GraphNodeHdr{uint16_t(GraphOp::Call), 0, uint32_t(body.size())});
    l.w.insert(l.w.end(), body.begin(), body.end());
    l.nodes = 1;
    return l;
  };
  auto bytes = [](const auto& v) {
    return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(&v), sizeof v);
  };
  auto inst = [&](const NodeList& l, uint64_t* exec = nullptr) {
    GraphInstantiateResp r{};
    int32_t st = c->call<Op::GraphInstantiate>({0, 0, 0, l.nodes, l.segments}, &r, l.w);
    if (exec) *exec = r.exec;
    return st;
  };
  // Not a posted cuBLAS request, too short, a payload size that disagrees.
  EXPECT_EQ(inst(call_node(uint16_t(Op::Malloc), bytes(g))), inval);
  EXPECT_EQ(inst(call_node(uint16_t(Op::BlasCreate), bytes(g))), inval);
  EXPECT_EQ(inst(call_node(uint16_t(Op::BlasDestroy), bytes(g))), inval);
  EXPECT_EQ(inst(call_node(uint16_t(Op::FftPlan), bytes(g))), inval);
  EXPECT_EQ(inst(call_node(uint16_t(Op::Limit_) + 5, bytes(g))), inval);
  EXPECT_EQ(inst(call_node(uint16_t(Op::BlasGemm), bytes(g).first(8))), inval);
  EXPECT_EQ(inst(call_node(uint16_t(Op::BlasGemm), bytes(g), sizeof g + 8)), inval);
  EXPECT_EQ(inst(call_node(uint16_t(Op::BlasGemm), bytes(g), sizeof g - 8)), inval);
  // The good one runs, on the launch stream (the recorded stream is forged).
  uint64_t x = 0;
  ASSERT_EQ(inst(call_node(uint16_t(Op::BlasGemm), bytes(g)), &x), 0);
  ASSERT_EQ(c->post<Op::GraphLaunch>({x, 0, 0, 0}), ring::Status::Ok);
  ASSERT_EQ(c->call<Op::MemcpyDtoH>({P + 128, out, 64, 0, 0}), 0);
  ASSERT_EQ(c->call<Op::StreamSynchronize>({0}), 0);
  for (int i = 0; i < 16; i++) ASSERT_EQ(f[32 + i], float(i + 1)) << i;
  // A request that is wrong when it runs fails then, as a posted call does.
  BlasGemmReq forged = g;
  forged.handle ^= 1ull << 35;
  uint64_t xf = 0;
  ASSERT_EQ(inst(call_node(uint16_t(Op::BlasGemm), bytes(forged)), &xf), 0);
  ASSERT_EQ(c->post<Op::GraphLaunch>({xf, 0, 0, 0}), ring::Status::Ok);
  EXPECT_NE(c->call<Op::StreamSynchronize>({0}), 0);
  BlasGemmReq outside = g;
  outside.C = out + 32;  // 64 bytes from 32 bytes before the end
  uint64_t xo = 0;
  ASSERT_EQ(inst(call_node(uint16_t(Op::BlasGemm), bytes(outside)), &xo), 0);
  ASSERT_EQ(c->post<Op::GraphLaunch>({xo, 0, 0, 0}), ring::Status::Ok);
  EXPECT_NE(c->call<Op::StreamSynchronize>({0}), 0);
  // The handle destroyed before a launch: an error, not a crash.
  ASSERT_EQ(c->call<Op::BlasDestroy>({bh.handle}), 0);
  ASSERT_EQ(c->post<Op::GraphLaunch>({x, 0, 0, 0}), ring::Status::Ok);
  EXPECT_NE(c->call<Op::StreamSynchronize>({0}), 0);
  for (uint64_t e : {x, xf, xo}) EXPECT_EQ(c->call<Op::GraphExecDestroy>({e}), 0);
  EXPECT_FALSE(c->dropped(100ms));
}

// ---------------------------------------------------------------- handles

TEST_F(Hostile, ForgedAndStaleHandlesOfEveryKind) {
  auto image = read_file(WH_HOSTILE_FATBIN);
  auto c = client();
  const int32_t bad = cudaErrorInvalidResourceHandle;
  // Forged values: zero-ish, all ones, each tag with a slot that was never
  // filled, and each tag with generation 0.
  std::vector<uint64_t> forged{3, 0x1234, UINT64_MAX, 1ull << 63};
  for (uint64_t tag : {0x4d, 0x4b, 0x53, 0x45, 0x42})
    for (uint64_t v : std::vector<uint64_t>{(tag << 56) | (1ull << 32) | 1, (tag << 56) | 1,
                                            (tag << 56) | (1ull << 32) | 0xffffffff, (tag << 56) | (0xffffffull << 32) | 2})
      forged.push_back(v);
  for (uint64_t h : forged) {
    SCOPED_TRACE(h);
    EXPECT_EQ(c->call<Op::ModuleUnload>({h}), bad);
    EXPECT_EQ(c->call<Op::ModuleGetKernel>({h}, nullptr, {reinterpret_cast<const uint8_t*>("k"), 1}), bad);
    EXPECT_EQ(c->call<Op::ModuleGetGlobal>({h}, nullptr, {reinterpret_cast<const uint8_t*>("g"), 1}), bad);
    EXPECT_EQ(c->call<Op::FuncGetAttributes>({h}), cudaErrorInvalidDeviceFunction);
    EXPECT_EQ(c->call<Op::Launch>(launch_req(h, 1, 1)), bad);
    EXPECT_EQ(c->call<Op::StreamSynchronize>({h}), bad);
    EXPECT_EQ(c->call<Op::StreamQuery>({h}), bad);
    EXPECT_EQ(c->call<Op::StreamDestroy>({h}), bad);
    EXPECT_EQ(c->call<Op::StreamWaitEvent>({h, 0, 0, 0}), bad);
    EXPECT_EQ(c->call<Op::Memset>({0, 0, h, 0, 0}), bad);
    EXPECT_EQ(c->call<Op::MemcpyHtoD>({0, 0, 0, h, 0}), bad);
    EXPECT_EQ(c->call<Op::EventRecord>({h, 0}), bad);
    EXPECT_EQ(c->call<Op::EventSynchronize>({h}), bad);
    EXPECT_EQ(c->call<Op::EventQuery>({h}), bad);
    EXPECT_EQ(c->call<Op::EventElapsedTime>({h, h}), bad);
    EXPECT_EQ(c->call<Op::EventDestroy>({h}), bad);
    EXPECT_NE(c->call<Op::BlasDestroy>({h}), 0);
    BlasAxpyReq ax{};
    ax.handle = h;
    ax.n = 1;
    ax.incx = ax.incy = 1;
    EXPECT_NE(c->call<Op::BlasAxpy>(ax), 0);
  }
  // Stale: created, destroyed, then used; and after the slot was reused.
  StreamCreateResp s1{}, s2{};
  ASSERT_EQ(c->call<Op::StreamCreate>({0, 0}, &s1), 0);
  ASSERT_EQ(c->call<Op::StreamDestroy>({s1.stream}), 0);
  EXPECT_EQ(c->call<Op::StreamSynchronize>({s1.stream}), bad);
  EXPECT_EQ(c->call<Op::StreamDestroy>({s1.stream}), bad);
  ASSERT_EQ(c->call<Op::StreamCreate>({0, 0}, &s2), 0);
  EXPECT_NE(s1.stream, s2.stream);
  EXPECT_EQ(c->call<Op::StreamSynchronize>({s1.stream}), bad);
  EXPECT_EQ(c->call<Op::StreamSynchronize>({s2.stream}), 0);
  EventCreateResp e1{}, e2{};
  ASSERT_EQ(c->call<Op::EventCreate>({0, 0}, &e1), 0);
  ASSERT_EQ(c->call<Op::EventDestroy>({e1.event}), 0);
  EXPECT_EQ(c->call<Op::EventRecord>({e1.event, 0}), bad);
  ASSERT_EQ(c->call<Op::EventCreate>({0, 0}, &e2), 0);
  EXPECT_EQ(c->call<Op::EventElapsedTime>({e1.event, e2.event}), bad);
  EXPECT_EQ(c->call<Op::EventDestroy>({e1.event}), bad);
  // Handles of one kind used as another.
  EXPECT_EQ(c->call<Op::EventRecord>({s2.stream, 0}), bad);
  EXPECT_EQ(c->call<Op::StreamSynchronize>({e2.event}), bad);
  BlasCreateResp b1{};
  ASSERT_EQ(c->call<Op::BlasCreate>({}, &b1), 0);
  ASSERT_EQ(c->call<Op::BlasDestroy>({b1.handle}), 0);
  EXPECT_NE(c->call<Op::BlasDestroy>({b1.handle}), 0);
  BlasScalReq sc{};
  sc.handle = b1.handle;
  sc.n = 1;
  sc.incx = 1;
  EXPECT_NE(c->call<Op::BlasScal>(sc), 0);
  // cuFFT plans: stale, double-destroyed, and a cuBLAS handle used as one.
  FftPlanReq fp{};
  fp.rank = 1, fp.n[0] = 8, fp.type = kFftC2C, fp.batch = 1;
  FftPlanResp f1{};
  ASSERT_EQ(c->call<Op::FftPlan>(fp, &f1), 0);
  ASSERT_EQ(c->call<Op::FftDestroy>({f1.handle}), 0);
  EXPECT_EQ(c->call<Op::FftDestroy>({f1.handle}), bad);
  EXPECT_EQ(c->call<Op::FftExec>({f1.handle, 0, 0, 0, kFftC2C, -1}), bad);
  EXPECT_EQ(c->call<Op::FftExec>({b1.handle, 0, 0, 0, kFftC2C, -1}), bad);
  fp.n[0] = -8;
  EXPECT_NE(c->call<Op::FftPlan>(fp, &f1), 0);
  // cuRAND generators: stale, double-destroyed, and a cuBLAS handle used as one.
  RandCreateResp r1{};
  ASSERT_EQ(c->call<Op::RandCreate>({kRngXorwow, 0}, &r1), 0);
  ASSERT_EQ(c->call<Op::RandDestroy>({r1.handle}), 0);
  EXPECT_EQ(c->call<Op::RandDestroy>({r1.handle}), bad);
  EXPECT_EQ(c->call<Op::RandGenerate>({r1.handle, 0, 0, 4, 0, 0, kRandBits32, 0}), bad);
  EXPECT_EQ(c->call<Op::RandGenerate>({b1.handle, 0, 0, 4, 0, 0, kRandBits32, 0}), bad);
  EXPECT_NE(c->call<Op::RandCreate>({7, 0}, &r1), 0);
  uint64_t m1 = 0;
  ASSERT_EQ(c->load_module(image, &m1), 0);
  const uint64_t k1 = c->kernel(m1, "empty_kernel");
  EXPECT_EQ(c->call<Op::Launch>(launch_req(k1, 1, 1)), 0);
  EXPECT_EQ(c->call<Op::Launch>(launch_req(m1, 1, 1)), bad);        // a module is not a kernel
  EXPECT_EQ(c->call<Op::ModuleUnload>({k1}), bad);                  // nor the reverse
  EXPECT_EQ(c->call<Op::Launch>(launch_req(k1, 1, 1)), 0);
  ASSERT_EQ(c->call<Op::ModuleUnload>({m1}), 0);
  EXPECT_EQ(c->call<Op::Launch>(launch_req(k1, 1, 1)), bad);        // the kernel died with its module
  EXPECT_EQ(c->call<Op::FuncGetAttributes>({k1}), cudaErrorInvalidDeviceFunction);
  EXPECT_EQ(c->call<Op::ModuleGetKernel>({m1}, nullptr, {reinterpret_cast<const uint8_t*>("empty_kernel"), 12}), bad);
  EXPECT_EQ(c->call<Op::ModuleUnload>({m1}), bad);
  uint64_t m2 = 0;
  ASSERT_EQ(c->load_module(image, &m2), 0);
  EXPECT_NE(m1, m2);
  EXPECT_EQ(c->call<Op::Launch>(launch_req(k1, 1, 1)), bad);
  // Another session's handles name nothing here.
  auto other = client();
  StreamCreateResp so{};
  EventCreateResp eo{};
  uint64_t mo = 0;
  ASSERT_EQ(other->call<Op::StreamCreate>({0, 0}, &so), 0);
  ASSERT_EQ(other->call<Op::StreamCreate>({0, 0}, &so), 0);  // slot 2: none such in a fresh session
  ASSERT_EQ(other->call<Op::EventCreate>({0, 0}, &eo), 0);
  ASSERT_EQ(other->load_module(image, &mo), 0);
  auto fresh = client();
  EXPECT_EQ(fresh->call<Op::StreamSynchronize>({so.stream}), bad);
  EXPECT_EQ(fresh->call<Op::EventQuery>({eo.event}), bad);
  EXPECT_EQ(fresh->call<Op::ModuleUnload>({mo}), bad);
  EXPECT_EQ(other->call<Op::StreamSynchronize>({so.stream}), 0);
  EXPECT_FALSE(c->dropped(100ms));
}

// Managed memory: where the data area may be mapped, and where a module's
// __managed__ variable may be moved.
TEST_F(Hostile, ManagedPlacementChecks) {
  WH_EXCLUDE_WHEN_STACKED(wh::test::stacked_why::kHostMemory);
  auto image = read_file(WH_HOSTILE_FATBIN);
  const uint64_t P = kPinnedHeapOffset;
  auto a = client();
  const uint64_t d = a->malloc(4096);
  uint64_t mod = 0;
  ASSERT_EQ(a->load_module(image, &mod, P + (1 << 20)), 0);
  const std::string g = "hostile_global";
  auto name = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(g.data()), g.size());
  // Before the area is mapped, no variable may move into it.
  EXPECT_EQ(a->call<Op::ModuleBindManaged>({mod, P}, nullptr, name), cudaErrorInvalidValue);
  // Addresses the server must not take: device memory of the session (and
  // its window), unaligned, kernel-only windows, overflowing, too high.
  for (uint64_t want : std::vector<uint64_t>{d, d & ~((1ull << 40) - 1), 0x7f0000000123ull, 0xFFFFFF0000000000ull,
                                            UINT64_MAX - 4095, 1ull << 47, 4096}) {
    auto k = client();
    MapDataAreaResp r{};
    ASSERT_EQ(k->call<Op::MapDataArea>({want}, &r), 0);
    EXPECT_NE(r.dptr, want) << want;
  }
  // The guest's own address is taken.
  const uint64_t va = reinterpret_cast<uint64_t>(a->data().data());
  MapDataAreaResp r{};
  ASSERT_EQ(a->call<Op::MapDataArea>({va}, &r), 0);
  EXPECT_EQ(r.dptr, va);
  const uint64_t area = a->data().size();
  // A variable may not land on the status page or staging slots, outside
  // the area, or straddle its end; unknown modules and names are refused.
  for (uint64_t at : std::vector<uint64_t>{va, va + kStagingOffset, va + area, va + area - 1, va - 4096, 0, d,
                                          UINT64_MAX - 3})
    EXPECT_EQ(a->call<Op::ModuleBindManaged>({mod, at}, nullptr, name), cudaErrorInvalidValue) << at - va;
  EXPECT_EQ(a->call<Op::ModuleBindManaged>({mod + 1, va + P}, nullptr, name), cudaErrorInvalidResourceHandle);
  std::string bogus = "no_such_variable";
  EXPECT_EQ(a->call<Op::ModuleBindManaged>({mod, va + P}, nullptr,
                                           {reinterpret_cast<const uint8_t*>(bogus.data()), bogus.size()}),
            cudaErrorInvalidSymbol);
  // A good placement keeps the variable's value and is what kernels see.
  ModuleBindManagedResp br{};
  ASSERT_EQ(a->call<Op::ModuleBindManaged>({mod, va + P + 4096}, &br, name), 0);
  EXPECT_EQ(br.size, 16u);
  const auto* placed = reinterpret_cast<const uint32_t*>(a->data().data() + P + 4096);
  EXPECT_TRUE(placed[0] == 1 && placed[1] == 2 && placed[2] == 3 && placed[3] == 4) << "initial value lost";
  ModuleGetGlobalResp gr{};
  ASSERT_EQ(a->call<Op::ModuleGetGlobal>({mod}, &gr, name), 0);
  EXPECT_EQ(gr.dptr, va + P + 4096);
}

// ---------------------------------------------------------------- grown pinned memory

// The memfd of a grown segment, as the server sends it on the socket.
int receive_segment(RawClient& c, PinnedSegmentNote* note) {
  pollfd p{c.sock, POLLIN, 0};
  if (poll(&p, 1, 5000) <= 0) return -1;
  int fd = -1;
  if (ring::recv_with_fd(c.sock, note, sizeof *note, &fd) != ssize_t(sizeof *note)) {
    if (fd >= 0) close(fd);
    return -1;
  }
  return fd;
}

// PinnedGrow and PinnedRelease from a client that lies: sizes no segment
// takes, offsets past a segment's end, of segments that never were or were
// released, overflowing segment arithmetic, double releases, device
// addresses it should not get; a segment it keeps using after releasing it
// (its pages are gone, the server's are not touched).
TEST_F(Hostile, PinnedSegmentsAreValidated) {
  WH_EXCLUDE_WHEN_STACKED(wh::test::stacked_why::kHostMemory);
  const uint64_t P = kPinnedHeapOffset, S1 = uint64_t(1) << kPinnedSegmentShift;
  const int32_t inval = cudaErrorInvalidValue;
  auto a = client();
  for (uint64_t bytes : {uint64_t(0), kPinnedSegmentMax + 1, uint64_t(1) << 40, UINT64_MAX})
    EXPECT_EQ(a->call<Op::PinnedGrow>({bytes, 0}), inval) << bytes;
  // A request the budget (half this machine's memory) can never take.
  EXPECT_EQ(a->call<Op::PinnedGrow>({kPinnedSegmentMax, 0}), cudaErrorMemoryAllocation);
  // A good one: the smallest segment, its memfd on the socket, sealed.
  PinnedGrowResp g{};
  ASSERT_EQ(a->call<Op::PinnedGrow>({1, 0}, &g), 0);
  EXPECT_EQ(g.segment, 1u);
  EXPECT_EQ(g.size, kPinnedSegmentMin);
  PinnedSegmentNote note{};
  const int fd = receive_segment(*a, &note);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(note.magic, kPinnedNoteMagic);
  EXPECT_EQ(note.segment, g.segment);
  EXPECT_EQ(note.size, g.size);
  EXPECT_NE(ftruncate(fd, 0), 0) << "a client shrank its segment";
  auto* seg = static_cast<uint8_t*>(mmap(nullptr, g.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  close(fd);
  ASSERT_NE(seg, MAP_FAILED);
  // Copies name it by offset (1 << 40) + x, both ways, and land in it.
  const uint64_t d = a->malloc(1 << 20);
  for (uint32_t i = 0; i < (1 << 18); i++) reinterpret_cast<uint32_t*>(seg + 4096)[i] = pattern(i);
  ASSERT_EQ(a->call<Op::MemcpyHtoD>({d, S1 + 4096, 1 << 20, 0, 0}), 0);
  ASSERT_EQ(a->call<Op::MemcpyDtoH>({S1 + g.size - (1 << 20), d, 1 << 20, 0, 0}), 0);
  EXPECT_EQ(std::memcmp(seg + 4096, seg + g.size - (1 << 20), 1 << 20), 0);
  // Its device mapping takes memsets like any mapped memory, to its end.
  EXPECT_EQ(a->call<Op::Memset>({g.dptr + g.size - 4096, 4096, 0, 0x5c, 0}), 0);
  EXPECT_EQ(seg[g.size - 1], 0x5c);
  EXPECT_EQ(a->call<Op::Memset>({g.dptr + g.size - 4096, 4097, 0, 0x5c, 0}), inval);
  EXPECT_EQ(a->call<Op::Memset>({g.dptr + g.size, 1, 0, 0x5c, 0}), inval);
  // Offsets the server must refuse: past the end, straddling it, in
  // segments that do not exist, at the top of the offset space.
  for (uint64_t off : std::vector<uint64_t>{S1 + g.size, S1 + g.size - 4095, S1 + kPinnedSegmentMask, 2 * S1,
                                            kMaxPinnedSegments * S1, (kMaxPinnedSegments - 1) * S1, UINT64_MAX - 4095,
                                            (UINT64_MAX & ~kPinnedSegmentMask) + P}) {
    SCOPED_TRACE(off);
    EXPECT_EQ(a->call<Op::MemcpyHtoD>({d, off, 4096, 0, 0}), inval);
    EXPECT_EQ(a->call<Op::MemcpyDtoH>({off, d, 4096, 0, 0}), inval);
    EXPECT_EQ(a->call<Op::ModuleLoad>({off, 4096}), inval);
  }
  EXPECT_EQ(a->call<Op::MemcpyHtoD>({d, S1, UINT64_MAX, 0, 0}), inval);
  // A device address it asks for that it may not have: the session's own
  // device memory, or its data area's mapping; the server places it elsewhere.
  MapDataAreaResp ma{};
  const uint64_t va = reinterpret_cast<uint64_t>(a->data().data());
  ASSERT_EQ(a->call<Op::MapDataArea>({va}, &ma), 0);
  for (uint64_t want : {d, va, va + (1 << 20), g.dptr, UINT64_MAX - 4095}) {
    PinnedGrowResp h{};
    ASSERT_EQ(a->call<Op::PinnedGrow>({1, want}, &h), 0) << want;
    EXPECT_NE(h.dptr, want);
    PinnedSegmentNote n{};
    int f = receive_segment(*a, &n);
    EXPECT_GE(f, 0);
    if (f >= 0) close(f);
    EXPECT_EQ(a->call<Op::PinnedRelease>({h.segment}), 0);
  }
  // Releases: never the first area, never one that is not there, never twice.
  for (uint64_t k : {uint64_t(0), uint64_t(2), kMaxPinnedSegments, UINT64_MAX})
    EXPECT_EQ(a->call<Op::PinnedRelease>({k}), inval) << k;
  ASSERT_EQ(a->call<Op::PinnedRelease>({1}), 0);
  EXPECT_EQ(a->call<Op::PinnedRelease>({1}), inval) << "released twice";
  // Gone for copies and for the device; the client's own mapping reads
  // zeros (its pages were given back), the server is unharmed.
  EXPECT_EQ(a->call<Op::MemcpyHtoD>({d, S1 + 4096, 4096, 0, 0}), inval);
  EXPECT_EQ(a->call<Op::MemcpyDtoH>({S1 + 4096, d, 4096, 0, 0}), inval);
  EXPECT_EQ(a->call<Op::Memset>({g.dptr, 4096, 0, 0, 0}), inval);
  EXPECT_EQ(seg[4096], 0);
  munmap(seg, g.size);
  // Segments it never reads from its socket: served until the socket is
  // full or the budget used up, never blocking the server; all freed with
  // the session.
  for (int i = 0; i < 8; i++) EXPECT_EQ(a->call<Op::PinnedGrow>({64ull << 20, 0}), 0);
  EXPECT_GT(a->mem_free(), 0u) << "the session still answers";
  // A kernel reaching a released segment faults in its own session only.
  auto k = client();
  auto image = read_file(WH_HOSTILE_FATBIN);
  uint64_t mod = 0;
  ASSERT_EQ(k->load_module(image, &mod, P + (1 << 20)), 0);
  PinnedGrowResp kg{};
  ASSERT_EQ(k->call<Op::PinnedGrow>({1, 0}, &kg), 0);
  const uint64_t kf = k->kernel(mod, "fill_words");
  FillParams fp{kg.dptr, 0xDEADBEEF, 4096};
  EXPECT_EQ(k->post<Op::Launch>(launch_req(kf, 16, 256), param_bytes(fp)), ring::Status::Ok);
  EXPECT_EQ(k->call<Op::DeviceSynchronize>({}), 0) << "a kernel writing a live segment";
  ASSERT_EQ(k->call<Op::PinnedRelease>({kg.segment}), 0);
  EXPECT_EQ(k->post<Op::Launch>(launch_req(kf, 16, 256), param_bytes(fp)), ring::Status::Ok);
  EXPECT_EQ(k->call<Op::DeviceSynchronize>({}), cudaErrorIllegalAddress) << "a kernel writing a released segment";
}

// The per-user budget through raw clients: segments taken up to it and
// refused past it; a release, and a session's end, give them back.
TEST(HostilePinned, TheBudgetIsGivenBackByReleasesAndSessionEnds) {
  WH_EXCLUDE_WHEN_STACKED(wh::test::stacked_why::kHostMemory);
  Server server;
  ASSERT_TRUE(server.start({"--pinned-budget-mb", "192"})) << server.log();
  auto connect = [&] {
    auto c = std::make_unique<RawClient>();
    std::string err;
    EXPECT_TRUE(c->connect(server.socket(), &err)) << err;
    return c;
  };
  const uint64_t mb64 = 64ull << 20;
  auto a = connect();
  PinnedGrowResp g{};
  ASSERT_EQ(a->call<Op::PinnedGrow>({mb64, 0}, &g), 0);
  ASSERT_EQ(a->call<Op::PinnedGrow>({mb64, 0}), 0);
  auto b = connect();  // the same uid: the same budget
  ASSERT_EQ(b->call<Op::PinnedGrow>({mb64, 0}), 0);
  EXPECT_EQ(b->call<Op::PinnedGrow>({mb64, 0}), cudaErrorMemoryAllocation) << "past the budget";
  EXPECT_EQ(a->call<Op::PinnedGrow>({1, 0}), cudaErrorMemoryAllocation) << "past the budget";
  EXPECT_EQ(a->call<Op::PinnedRelease>({g.segment}), 0);
  EXPECT_EQ(b->call<Op::PinnedGrow>({mb64, 0}), 0) << "a release gives its share back";
  EXPECT_EQ(b->call<Op::PinnedGrow>({1, 0}), cudaErrorMemoryAllocation);
  a.reset();  // the session ends: its segment goes back
  bool granted = false;
  for (int i = 0; i < 50 && !granted; i++) {
    granted = b->call<Op::PinnedGrow>({mb64, 0}) == 0;
    if (!granted) std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(granted) << "the ended session's segment was not given back\n" << server.log();
  EXPECT_NE(server.log().find("per-user budget is 192 MiB"), std::string::npos) << server.log();
  EXPECT_TRUE(server.alive()) << server.log();
}

TEST_F(Hostile, ArrayAndTextureChecks) {
  auto a = client();
  auto b = client();
  // formats: gaps, mixed sizes, 3 channels, bad kinds and bit counts
  for (auto f : std::vector<std::array<int32_t, 5>>{{0, 0, 0, 0, 2}, {8, 16, 0, 0, 1}, {8, 0, 8, 0, 1}, {32, 32, 32, 0, 2},
                                                     {8, 0, 0, 0, 2}, {-8, 0, 0, 0, 0}, {12, 0, 0, 0, 1}, {32, 0, 0, 0, 7}})
    EXPECT_EQ(a->call<Op::ArrayCreate>({f[0], f[1], f[2], f[3], f[4], 0, 16, 16, 0}), cudaErrorInvalidChannelDescriptor);
  // extents: zero, huge, overflowing, depth without height, unknown flags
  for (auto e : std::vector<std::array<uint64_t, 3>>{{0, 4, 0}, {UINT64_MAX, 1, 0}, {1 << 17, 1 << 16, 1 << 14},
                                                      {1 << 20, 0, 0}, {4, 0, 4}, {4, 4, UINT64_MAX}})
    EXPECT_EQ(a->call<Op::ArrayCreate>({32, 0, 0, 0, 2, 0, e[0], e[1], e[2]}), cudaErrorInvalidValue) << e[0];
  EXPECT_EQ(a->call<Op::ArrayCreate>({32, 0, 0, 0, 2, 0x1000, 4, 4, 0}), cudaErrorInvalidValue);
  EXPECT_EQ(a->call<Op::ArrayCreate>({32, 0, 0, 0, 2, cudaArrayCubemap, 4, 4, 6}), cudaErrorNotSupported);
  EXPECT_EQ(a->call<Op::ArrayCreate>({32, 0, 0, 0, 2, cudaArrayLayered, 4, 4, 0}), cudaErrorInvalidValue);
  ArrayCreateResp ar{};
  ASSERT_EQ(a->call<Op::ArrayCreate>({32, 0, 0, 0, 2, cudaArraySurfaceLoadStore, 10, 3, 0}, &ar), 0);
  ArrayGetInfoResp ai{};
  ASSERT_EQ(a->call<Op::ArrayGetInfo>({ar.array}, &ai), 0);
  EXPECT_GE(ai.pitch, 40u);
  // the array's memory: copies stay inside it, and cudaFree cannot free it
  const uint64_t P = kPinnedHeapOffset;
  EXPECT_EQ(a->call<Op::Memcpy2D>({ai.dptr, ai.pitch, P, 40, 40, 4, cudaMemcpyHostToDevice, 0, 0}), cudaErrorInvalidValue);
  EXPECT_EQ(a->call<Op::Memcpy2D>({ai.dptr, ai.pitch, P, 40, 40, 3, cudaMemcpyHostToDevice, 0, 0}), 0);
  EXPECT_EQ(a->call<Op::Free>({ai.dptr}), cudaErrorInvalidValue);
  EXPECT_EQ(b->call<Op::Memcpy2D>({ai.dptr, ai.pitch, P, 40, 40, 1, cudaMemcpyHostToDevice, 0, 0}), cudaErrorInvalidValue);
  // forged, foreign and stale array handles
  for (uint64_t h : std::vector<uint64_t>{0, ar.array + 1, ar.array ^ (uint64_t(1) << 40), UINT64_MAX}) {
    EXPECT_EQ(a->call<Op::ArrayGetInfo>({h}), cudaErrorInvalidValue) << h;
    EXPECT_EQ(a->call<Op::ArrayDestroy>({h}), cudaErrorInvalidValue) << h;
    EXPECT_EQ(a->call<Op::SurfObjectCreate>({h}), cudaErrorInvalidResourceHandle) << h;
  }
  EXPECT_EQ(b->call<Op::ArrayGetInfo>({ar.array}), cudaErrorInvalidValue);
  // mipmapped arrays: level counts and level indices
  EXPECT_EQ(a->call<Op::MipmappedArrayCreate>({32, 0, 0, 0, 2, 0, 8, 8, 0, 0, 0}), cudaErrorInvalidValue);
  EXPECT_EQ(a->call<Op::MipmappedArrayCreate>({32, 0, 0, 0, 2, 0, 8, 8, 0, 5, 0}), cudaErrorInvalidValue);
  EXPECT_EQ(a->call<Op::MipmappedArrayCreate>({32, 0, 0, 0, 2, 0, 8, 8, 0, UINT32_MAX, 0}), cudaErrorInvalidValue);
  MipmappedArrayCreateResp mr{};
  ASSERT_EQ(a->call<Op::MipmappedArrayCreate>({32, 0, 0, 0, 2, 0, 8, 8, 0, 4, 0}, &mr), 0);
  EXPECT_EQ(a->call<Op::MipmappedArrayGetLevel>({mr.mipmap, 4, 0}), cudaErrorInvalidValue);
  MipmappedArrayGetLevelResp lr{};
  ASSERT_EQ(a->call<Op::MipmappedArrayGetLevel>({mr.mipmap, 3, 0}, &lr), 0);
  EXPECT_EQ(a->call<Op::ArrayDestroy>({lr.array}), cudaErrorInvalidValue);  // owned by the mipmapped array
  // texture objects: resource kinds, handles, ranges, pitches, modes
  auto tex = [&](uint32_t type, uint64_t res, uint64_t bytes, uint64_t w, uint64_t h, uint64_t pitch, uint32_t mode = 1,
                 uint32_t read = 0) {
    TexObjectCreateReq rq{};
    rq.res_type = type;
    rq.res = res;
    rq.fx = 32, rq.fkind = 2;
    rq.bytes = bytes, rq.width = w, rq.height = h, rq.pitch = pitch;
    rq.addr[0] = rq.addr[1] = rq.addr[2] = mode;
    rq.read_mode = read;
    TexObjectCreateResp rs{};
    int32_t e = a->call<Op::TexObjectCreate>(rq, &rs);
    return std::pair<int32_t, uint64_t>(e, rs.obj);
  };
  const uint64_t d = a->malloc(4096);
  EXPECT_EQ(tex(9, ar.array, 0, 0, 0, 0).first, cudaErrorInvalidValue);
  EXPECT_EQ(tex(cudaResourceTypeArray, ar.array ^ (uint64_t(1) << 33), 0, 0, 0, 0).first, cudaErrorInvalidResourceHandle);
  EXPECT_EQ(tex(cudaResourceTypeMipmappedArray, ar.array, 0, 0, 0, 0).first, cudaErrorInvalidResourceHandle);
  EXPECT_EQ(tex(cudaResourceTypeArray, ar.array, 0, 0, 0, 0, 4).first, cudaErrorInvalidValue);
  EXPECT_EQ(tex(cudaResourceTypeArray, ar.array, 0, 0, 0, 0, 1, 1).first, cudaErrorInvalidValue);  // float as normalized
  EXPECT_EQ(tex(cudaResourceTypeLinear, d, 4100, 0, 0, 0).first, cudaErrorInvalidValue);
  EXPECT_EQ(tex(cudaResourceTypeLinear, d, UINT64_MAX - 3, 0, 0, 0).first, cudaErrorInvalidValue);
  EXPECT_EQ(tex(cudaResourceTypeLinear, d + 8, 4096, 0, 0, 0).first, cudaErrorInvalidValue);
  EXPECT_EQ(tex(cudaResourceTypeLinear, 0, 16, 0, 0, 0).first, cudaErrorInvalidValue);
  EXPECT_EQ(tex(cudaResourceTypePitch2D, d, 0, 16, 100, 64).first, cudaErrorInvalidValue);  // 100 rows of 64 > 4096
  EXPECT_EQ(tex(cudaResourceTypePitch2D, d, 0, 16, 16, 48).first, cudaErrorInvalidPitchValue);
  EXPECT_EQ(tex(cudaResourceTypePitch2D, d, 0, 16, 1ull << 40, 64).first, cudaErrorInvalidValue);
  EXPECT_EQ(tex(cudaResourceTypePitch2D, d, 0, 16, 8, UINT64_MAX & ~31ull).first, cudaErrorInvalidValue);
  auto good = tex(cudaResourceTypePitch2D, d, 0, 16, 16, 256 / 4 * 4);
  EXPECT_EQ(good.first, 0);
  auto on_array = tex(cudaResourceTypeArray, ar.array, 0, 0, 0, 0);
  ASSERT_EQ(on_array.first, 0);
  SurfObjectCreateResp sr{};
  ASSERT_EQ(a->call<Op::SurfObjectCreate>({ar.array}, &sr), 0);
  // objects are per session and per kind
  EXPECT_EQ(b->call<Op::TexObjectDestroy>({on_array.second}), cudaErrorInvalidValue);
  EXPECT_EQ(a->call<Op::SurfObjectDestroy>({on_array.second}), cudaErrorInvalidValue);
  EXPECT_EQ(a->call<Op::TexObjectDestroy>({sr.obj}), cudaErrorInvalidValue);
  EXPECT_EQ(a->call<Op::TexObjectDestroy>({UINT64_MAX}), cudaErrorInvalidValue);
  // freeing the array under its objects is allowed; the objects die on use
  EXPECT_EQ(a->call<Op::ArrayDestroy>({ar.array}), 0);
  EXPECT_EQ(a->call<Op::ArrayDestroy>({ar.array}), cudaErrorInvalidValue);
  EXPECT_EQ(a->call<Op::TexObjectDestroy>({on_array.second}), 0);
  EXPECT_EQ(a->call<Op::SurfObjectDestroy>({sr.obj}), 0);
  EXPECT_EQ(a->call<Op::MipmappedArrayDestroy>({mr.mipmap}), 0);
  EXPECT_EQ(a->call<Op::MipmappedArrayDestroy>({mr.mipmap}), cudaErrorInvalidValue);
}

// ---------------------------------------------------------------- isolation

TEST_F(Hostile, AnotherSessionsMemoryIsNeverReadOrWritten) {
  WH_EXCLUDE_WHEN_STACKED(wh::test::stacked_why::kOneSession);
  auto image = read_file(WH_HOSTILE_FATBIN);
  constexpr uint32_t kWords = 16384;  // 64 KiB
  const uint64_t P = kPinnedHeapOffset;
  auto a = client();
  const uint64_t dA = a->malloc(kWords * 4);
  auto* wa = reinterpret_cast<uint32_t*>(a->data().data() + P);
  for (uint32_t i = 0; i < kWords; i++) wa[i] = pattern(i);
  ASSERT_EQ(a->call<Op::MemcpyHtoD>({dA, P, kWords * 4, 0, 0}), 0);
  MapDataAreaResp ma{};
  ASSERT_EQ(a->call<Op::MapDataArea>({}, &ma), 0);  // A's pinned memory, kernel-addressable
  const uint64_t mA = ma.dptr + P;
  uint64_t modA = 0;
  ASSERT_EQ(a->load_module(image, &modA, P + (1 << 20)), 0);

  // B tries every path to A's device memory and A's mapped pinned memory.
  auto b = client();
  const uint64_t dB = b->malloc(kWords * 4);
  std::memset(b->data().data() + P, 0x11, kWords * 4);
  const int32_t inval = cudaErrorInvalidValue;
  for (uint64_t target : {dA, dA + 4096, mA, ma.dptr}) {
    SCOPED_TRACE(target);
    EXPECT_EQ(b->call<Op::MemcpyDtoH>({P, target, 4096, 0, 0}), inval);
    EXPECT_EQ(b->call<Op::MemcpyDtoH>({P, target, 4096, 0, 1}), inval);
    EXPECT_EQ(b->call<Op::MemcpyHtoD>({target, P, 4096, 0, 0}), inval);
    std::vector<uint8_t> junk(256, 0xee);
    EXPECT_EQ(b->call<Op::MemcpyHtoDInline>({target, 0}, nullptr, junk), inval);
    EXPECT_EQ(b->call<Op::Memset>({target, 4096, 0, 0, 0}), inval);
    EXPECT_EQ(b->call<Op::MemcpyDtoD>({dB, target, 4096, 0}), inval);
    EXPECT_EQ(b->call<Op::MemcpyDtoD>({target, dB, 4096, 0}), inval);
    EXPECT_EQ(b->call<Op::Memcpy2D>({P, 64, target, 64, 64, 4, cudaMemcpyDeviceToHost, 0, 0}), inval);
    EXPECT_EQ(b->call<Op::Memcpy2D>({target, 64, P, 64, 64, 4, cudaMemcpyHostToDevice, 0, 0}), inval);
    EXPECT_EQ(b->call<Op::Memcpy2D>({dB, 64, target, 64, 64, 4, cudaMemcpyDeviceToDevice, 0, 0}), inval);
    EXPECT_EQ(b->call<Op::Free>({target}), inval);
  }
  // BLAS on A's memory.
  BlasCreateResp bh{};
  ASSERT_EQ(b->call<Op::BlasCreate>({}, &bh), 0);
  BlasCopyReq cp{};
  cp.handle = bh.handle;
  cp.x = dA;
  cp.y = dB;
  cp.n = 1024;
  cp.incx = cp.incy = 1;
  EXPECT_NE(b->call<Op::BlasCopy>(cp), 0);
  cp.x = dB;
  cp.y = dA;
  EXPECT_NE(b->call<Op::BlasCopy>(cp), 0);
  for (uint32_t i = 0; i < kWords * 4; i++)
    ASSERT_EQ(b->data()[P + i], 0x11) << "B's data area received A's bytes at " << i;

  // Kernels of B's own module with A's pointers: reads into B's mapped
  // pinned memory (visible to B without another call), writes of a marker.
  auto kernel_attempt = [&](bool write, uint64_t target) {
    auto k = client();
    uint64_t mod = 0;
    EXPECT_EQ(k->load_module(image, &mod, P + (1 << 20)), 0);
    MapDataAreaResp mk{};
    EXPECT_EQ(k->call<Op::MapDataArea>({}, &mk), 0);
    std::memset(k->data().data() + P, 0x22, kWords * 4);
    if (write) {
      const uint64_t kf = k->kernel(mod, "fill_words");
      FillParams fp{target, 0xDEADBEEF, kWords};
      EXPECT_EQ(k->post<Op::Launch>(launch_req(kf, kWords / 256, 256), param_bytes(fp)), ring::Status::Ok);
    } else {
      const uint64_t kc = k->kernel(mod, "copy_words");
      CopyParams cp{target, mk.dptr + P, kWords};
      EXPECT_EQ(k->post<Op::Launch>(launch_req(kc, kWords / 256, 256), param_bytes(cp)), ring::Status::Ok);
    }
    EXPECT_EQ(k->call<Op::DeviceSynchronize>({}), cudaErrorIllegalAddress) << (write ? "write " : "read ") << target;
    for (uint32_t i = 0; i < kWords * 4; i++)
      if (k->data()[P + i] != 0x22) {
        ADD_FAILURE() << "a kernel of another session read A's memory into its pinned area at byte " << i;
        break;
      }
  };
  for (uint64_t t : {dA, dA + 1024, mA, ma.dptr + 8}) {
    kernel_attempt(false, t);
    kernel_attempt(true, t);
  }
  // Addresses around A's allocation and window (sessions' windows are
  // 1 TiB apart on the sim device; guessing nearby must not help either).
  for (uint64_t t : std::vector<uint64_t>{dA - 256, dA + kWords * 4, dA & ~((1ull << 40) - 1), dB - (1ull << 40),
                                          dB + (1ull << 40)}) {
    EXPECT_EQ(b->call<Op::MemcpyDtoH>({P, t, 256, 0, 0}), inval) << t;
    EXPECT_EQ(b->call<Op::Memset>({t, 256, 0, 0, 0}), inval) << t;
  }

  // A's memory is exactly as A left it: device and mapped pinned memory.
  std::memset(a->data().data() + P + (4 << 20), 0, kWords * 4);
  ASSERT_EQ(a->call<Op::MemcpyDtoH>({P + (4 << 20), dA, kWords * 4, 0, 0}), 0);
  auto* back = reinterpret_cast<const uint32_t*>(a->data().data() + P + (4 << 20));
  for (uint32_t i = 0; i < kWords; i++) ASSERT_EQ(back[i], pattern(i)) << "A's device memory changed at word " << i;
  for (uint32_t i = 0; i < kWords; i++) ASSERT_EQ(wa[i], pattern(i)) << "A's pinned memory changed at word " << i;
  // And A's own kernels still work on it.
  const uint64_t kc = a->kernel(modA, "copy_words");
  CopyParams cpa{dA, mA + (8 << 20), kWords};
  ASSERT_EQ(a->call<Op::Launch>(launch_req(kc, kWords / 256, 256), nullptr, param_bytes(cpa)), 0);
  auto* viak = reinterpret_cast<const uint32_t*>(a->data().data() + P + (8 << 20));
  for (uint32_t i = 0; i < kWords; i++) ASSERT_EQ(viak[i], pattern(i)) << i;
}

// ---------------------------------------------------------------- modules

TEST_F(Hostile, GarbageModuleImages) {
  auto image = read_file(WH_HOSTILE_FATBIN);
  auto c = client();
  std::mt19937_64 rng(4);
  std::vector<uint8_t> junk(8192);
  for (auto& x : junk) x = uint8_t(rng());
  uint64_t m = 0;
  EXPECT_NE(c->load_module(junk, &m), 0);
  // The fatbin magic in front of garbage.
  const uint8_t magic[] = {0x50, 0xed, 0x55, 0xba};
  std::memcpy(junk.data(), magic, 4);
  EXPECT_NE(c->load_module(junk, &m), 0);
  // The wrapper magic, pointing nowhere.
  uint32_t wrapper[] = {0x466243b1, 1, 0xdeadbeef, 0xdeadbeef, 0, 0};
  EXPECT_NE(c->load_module({reinterpret_cast<const uint8_t*>(wrapper), sizeof wrapper}, &m), 0);
  // Truncations of a real image.
  for (size_t n : {size_t(16), size_t(24), size_t(64), size_t(100), image.size() / 2, image.size() - 1})
    EXPECT_NE(c->load_module({image.data(), n}, &m), 0) << n;
  // Mutations: whatever they do, a clean status, and the session lives on.
  int loaded = 0;
  for (int i = 0; i < 120; i++) {
    auto mut = image;
    int flips = 1 + int(rng() % 4);
    for (int f = 0; f < flips; f++) {
      size_t at = rng() % (i < 60 ? std::min<size_t>(mut.size(), 256) : mut.size());  // headers first
      mut[at] = (rng() & 1) ? uint8_t(rng()) : uint8_t(mut[at] ^ (1u << (rng() % 8)));
    }
    int32_t st = c->load_module(mut, &m);
    ASSERT_NE(st, kNoReply) << "no reply to mutation " << i << ": " << ring::to_string(c->last_ring);
    EXPECT_GE(st, 0);
    if (st == 0) {
      loaded++;
      EXPECT_EQ(c->call<Op::ModuleUnload>({m}), 0);
    }
  }
  ASSERT_EQ(c->load_module(image, &m), 0);
  EXPECT_NE(c->kernel(m, "empty_kernel"), 0u);
  EXPECT_FALSE(c->dropped(100ms));
  std::printf("garbage modules: %d of 120 mutations still loaded\n", loaded);
}

// ---------------------------------------------------------------- the ring itself

// Writes raw bytes as committed records into a client's request ring.
void inject(RawClient& c, const std::vector<uint8_t>& bytes, uint64_t advance) {
  wh_chan_hdr* h = c.region->channel(0);
  uint8_t* ring = c.region->channel_base(0) + h->req_off;
  const uint32_t size = c.region->geometry().req_size;
  uint64_t tail = __atomic_load_n(&h->req_tail, __ATOMIC_ACQUIRE);
  uint32_t pos = uint32_t(tail & (size - 1));
  if (!bytes.empty()) std::memcpy(ring + pos, bytes.data(), std::min<size_t>(bytes.size(), size - pos));
  __atomic_store_n(&h->req_tail, tail + advance, __ATOMIC_RELEASE);
  __atomic_fetch_add(&h->req_bell, 1, __ATOMIC_RELEASE);
  ring::futex_doorbell()->ring(&h->req_bell);
}

std::vector<uint8_t> record(uint32_t magic, uint16_t op, uint32_t len, size_t payload) {
  wh_msg_hdr h{};
  h.magic = magic;
  h.version = kVersion;
  h.opcode = op;
  h.len = len;
  h.call_id = 99;
  std::vector<uint8_t> out(sizeof h + payload, 0);
  std::memcpy(out.data(), &h, sizeof h);
  return out;
}

TEST_F(Hostile, RingGarbageDropsOnlyThatClient) {
  // A well-behaved raw client with data, alive through all of it.
  auto good = client();
  const uint64_t d = good->malloc(4096);
  std::memset(good->data().data() + kPinnedHeapOffset, 0x5e, 4096);
  ASSERT_EQ(good->call<Op::MemcpyHtoD>({d, kPinnedHeapOffset, 4096, 0, 0}), 0);

  struct Case {
    const char* what;
    std::function<void(RawClient&)> act;
  };
  std::mt19937_64 rng(7);
  std::vector<Case> cases{
      {"bad record magic", [](RawClient& c) { inject(c, record(0x12345678, 8, 8, 8), 40); }},
      {"length above max_msg",
       [](RawClient& c) { inject(c, record(WH_MSG_MAGIC, 8, c.ch->max_msg() + 1, 8), 40); }},
      {"length past the committed tail", [](RawClient& c) { inject(c, record(WH_MSG_MAGIC, 8, 4096, 0), 32); }},
      {"tail beyond a ring ahead",
       [](RawClient& c) { inject(c, record(WH_MSG_MAGIC, 8, 8, 8), uint64_t(c.region->geometry().req_size) + 64); }},
      {"tail not 8-aligned", [](RawClient& c) { inject(c, record(WH_MSG_MAGIC, 8, 8, 8), 41); }},
      {"tail far behind", [](RawClient& c) { inject(c, {}, uint64_t(0) - 4096); }},
      {"padding record not at the end", [](RawClient& c) { inject(c, record(WH_MSG_MAGIC, WH_OP_PAD, 64, 64), 96); }},
      {"random bytes",
       [&rng](RawClient& c) {
         std::vector<uint8_t> b(4096);
         for (auto& x : b) x = uint8_t(rng());
         inject(c, b, 4096);
       }},
      {"response ring head forged", [](RawClient& c) {
         // The server reads the head when its cached view of the ring runs
         // out of room: keep it answering until then.
         // (Our own reader republishes its head after each reply: forge it
         // again every time.)
         wh_chan_hdr* h = c.region->channel(0);
         for (int i = 0; i < 4000; i++) {
           __atomic_store_n(&h->resp_head, uint64_t(1) << 40, __ATOMIC_RELEASE);
           if (c.raw(uint16_t(Op::GetDeviceProps), bytes_of(GetDevicePropsReq{0}), nullptr, kVersion, 2s) == kNoReply)
             break;
         }
       }},
      {"channel state forged to FREE", [](RawClient& c) {
         wh_chan_hdr* h = c.region->channel(0);
         __atomic_store_n(&h->state, uint32_t(WH_CHAN_FREE), __ATOMIC_RELEASE);
       }},
  };
  for (auto& cs : cases) {
    SCOPED_TRACE(cs.what);
    auto c = client();
    EXPECT_GT(c->mem_free(), 0u);
    (void)c->malloc(1 << 20);  // something to free when the session ends
    cs.act(*c);
    EXPECT_TRUE(c->dropped(5s)) << "the server kept a client that corrupted its ring";
    EXPECT_TRUE(server.alive()) << server.log();
    EXPECT_GT(good->mem_free(), 0u);
  }
  // Scribbling over the region and channel headers (the server keeps its
  // own validated copy of the geometry): the server must neither crash nor
  // follow the new offsets; a later call works or the client is dropped.
  {
    auto c = client();
    auto* rh = c->region->live_header();
    std::vector<uint8_t> junk(sizeof(wh_region_hdr));
    for (auto& x : junk) x = uint8_t(rng());
    std::memcpy(rh, junk.data(), 64);  // the geometry words, not the heartbeat
    wh_chan_hdr* h = c->region->channel(0);
    h->req_off = 1ull << 50;
    h->resp_off = 12345;
    h->data_off = UINT64_MAX;
    int32_t st = c->raw(uint16_t(Op::MemGetInfo), {}, nullptr, kVersion, 3s);
    EXPECT_TRUE(st == 0 || c->dropped(5s)) << st;
  }
  // The well-behaved client's memory and session are untouched.
  std::memset(good->data().data() + kPinnedHeapOffset, 0, 4096);
  ASSERT_EQ(good->call<Op::MemcpyDtoH>({kPinnedHeapOffset, d, 4096, 0, 0}), 0);
  for (int i = 0; i < 4096; i++) ASSERT_EQ(good->data()[kPinnedHeapOffset + i], 0x5e) << i;
  EXPECT_FALSE(good->dropped(100ms));
}

// A client that truncates (or grows) the shared memory the server mapped:
// the server would fault (SIGBUS) on the next touch of the lost pages and
// every client would lose its session. The region is sealed against both.
TEST_F(Hostile, SharedMemoryCannotBeResized) {
  auto good = client();
  uint64_t d = good->malloc(4096);
  ASSERT_EQ(good->call<Op::Memset>({d, 4096, 0, 0x21, 0}), 0);
  auto c = client();
  const int fd = c->region->fd();
  ASSERT_GE(fd, 0);
  EXPECT_NE(ftruncate(fd, 0), 0) << "a client shrank its region";
  EXPECT_NE(ftruncate(fd, off_t(c->region->size()) * 2), 0) << "a client grew its region";
  // The session still works: the server's pages are all there.
  uint64_t e = c->malloc(4096);
  ASSERT_EQ(c->call<Op::Memset>({e, 4096, 0, 0x7a, 0}), 0);
  ASSERT_EQ(c->call<Op::MemcpyDtoH>({kPinnedHeapOffset, e, 4096, 0, 0}), 0);
  EXPECT_EQ(c->data()[kPinnedHeapOffset + 4095], 0x7a);
  EXPECT_TRUE(server.alive()) << server.log();
  ASSERT_EQ(good->call<Op::MemcpyDtoH>({kPinnedHeapOffset, d, 4096, 0, 0}), 0);
  EXPECT_EQ(good->data()[kPinnedHeapOffset], 0x21);
}

// ---------------------------------------------------------------- the violation limit

TEST_F(Hostile, ClientOverTheViolationLimitIsDropped) {
  // Under the limit (64): still served.
  auto ok = client();
  for (int i = 0; i < 60; i++) ASSERT_EQ(ok->post_raw(0x7000, {}), ring::Status::Ok);
  EXPECT_GT(ok->mem_free(), 0u);
  EXPECT_FALSE(ok->dropped(200ms));
  // Over it with posted unknown opcodes (no reply to wait for).
  auto c = client();
  for (int i = 0; i < 70; i++)
    if (c->post_raw(0x7000 + i, {}) != ring::Status::Ok) break;
  EXPECT_TRUE(c->dropped(5s)) << "a client past the violation limit was kept";
  // Over it with malformed payloads, as calls.
  auto s = client();
  for (int i = 0; i < 70; i++)
    if (s->raw(uint16_t(Op::Malloc), {}, nullptr, kVersion, 2s) == kNoReply) break;
  EXPECT_TRUE(s->dropped(5s));
  // Over it with messages of a protocol version nobody negotiated.
  auto v = client();
  for (int i = 0; i < 70; i++)
    if (v->post_raw(uint16_t(Op::MemGetInfo), {}, 9) != ring::Status::Ok) break;
  EXPECT_TRUE(v->dropped(5s)) << "wrong-version messages never count as violations";
  EXPECT_GT(ok->mem_free(), 0u);
  std::string st = ok->stats();
  auto p = st.find("rejected ");
  ASSERT_NE(p, std::string::npos) << st;
  EXPECT_GE(std::stoull(st.substr(p + 9)), 60u + 65u + 65u + 65u) << st;
}

}  // namespace
