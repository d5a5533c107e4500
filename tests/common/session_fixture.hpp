// A Session over a fresh sim backend, driven the way the daemon drives it
// (Session::handle with encoded requests): the fixture of the session-level
// tests of each library (cuBLAS, cuFFT, memory pools).
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "wormhole/proto/dispatch.hpp"
#include "wormhole/server/backend.hpp"
#include "wormhole/server/session.hpp"

namespace wh::test {

struct SessionFixture : ::testing::Test {
  std::unique_ptr<server::Backend> backend = server::make_sim_backend(1, 256ull << 20);
  std::vector<uint8_t> data = std::vector<uint8_t>(1 << 20);
  server::Stats stats;
  std::unique_ptr<server::Session> s;

  void SetUp() override {
    std::string err;
    auto ctx = backend->create_context(0, {}, &err);
    ASSERT_TRUE(ctx) << err;
    s = std::make_unique<server::Session>(1, *backend, std::move(ctx), std::span<uint8_t>(data), stats);
  }
  // The request's status; its response struct in *rs when one came back.
  template <proto::Op O>
  int32_t run(const typename proto::OpTraits<O>::Request& rq, typename proto::OpTraits<O>::Response* rs = nullptr,
              uint32_t flags = 0) {
    proto::DispatchResult out;
    auto b = proto::fixed_bytes(rq);
    s->handle(uint16_t(O), flags, b, 1 << 16, out);
    if (rs && out.fixed.size() == proto::wire_size<typename proto::OpTraits<O>::Response>)
      std::memcpy(rs, out.fixed.data(), out.fixed.size());
    return out.status;
  }
  uint64_t alloc(uint64_t n) {
    proto::MallocResp r{};
    EXPECT_EQ(run<proto::Op::Malloc>({n}, &r), 0);
    return r.dptr;
  }
};

}  // namespace wh::test
