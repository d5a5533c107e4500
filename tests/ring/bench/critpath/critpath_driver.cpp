// ring-critpath driver: one client and one server end of a channel driven
// from a single thread, so that a debugger can step through a whole round
// trip (critpath.py). Each iteration: the server answers call id k (the
// reply waits in the response ring), the client's call(k) writes its request
// and finds that reply at once, the server receives the request. Same sizes
// as bench_ring's round trip: 64-byte request, 16-byte response.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "wormhole/ring.hpp"

using namespace wh::ring;

// Read by critpath.py: a publish is the moment one of these words changes.
volatile const uint64_t* g_req_tail = nullptr;
volatile const uint64_t* g_resp_tail = nullptr;

// Kept out of line: each is one segment's entry point for the script.
[[gnu::noinline]] Status do_reply(ServerChannel& s, uint64_t id,
                                  std::span<const std::span<const uint8_t>> parts) {
  return s.reply(id, 1, 0, 7, parts);
}
[[gnu::noinline]] Status do_call(ClientChannel& c, std::span<const std::span<const uint8_t>> parts,
                                 Message& rep) {
  return c.call(1, 0, parts, rep);
}
[[gnu::noinline]] Status do_recv(ServerChannel& s, Message& m) {
  return s.recv(m, std::chrono::seconds(1));
}

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 1000;
  RegionConfig cfg;
  cfg.data_size = 4096;
  cfg.hb_timeout_ms = 600000;  // a debugger may hold us for a while
  std::string err;
  auto region = Region::create_memfd("wh-critpath", cfg, &err);
  WaitPolicy pol;
  pol.spin_iters = 1;
  auto client = region ? ClientChannel::claim(*region, 0, &err, pol) : nullptr;
  auto server = client ? ServerChannel::attach(*region, 0, &err, pol) : nullptr;
  if (!server) {
    std::fprintf(stderr, "critpath: %s\n", err.c_str());
    return 1;
  }
  g_req_tail = &region->channel(0)->req_tail;
  g_resp_tail = &region->channel(0)->resp_tail;
  uint8_t req[64], resp[16];
  std::memset(req, 0xa5, sizeof req);
  std::memset(resp, 0x5a, sizeof resp);
  std::span<const uint8_t> req_parts[] = {req};
  std::span<const uint8_t> resp_parts[] = {resp};
  Message reply, request;
  // The replies go in first, so the driver must know each call's id: from
  // 1 up, or (a ring.hpp whose fast path takes even ids under its write
  // lock; critpath.sh sets this) from 2 up by 2.
#ifndef WH_CRITPATH_ID_STEP
#define WH_CRITPATH_ID_STEP 1
#endif
  for (uint64_t id = WH_CRITPATH_ID_STEP; id <= uint64_t(n) * WH_CRITPATH_ID_STEP;
       id += WH_CRITPATH_ID_STEP) {
    if (do_reply(*server, id, resp_parts) != Status::Ok ||
        do_call(*client, req_parts, reply) != Status::Ok || reply.hdr.call_id != id ||
        do_recv(*server, request) != Status::Ok || request.hdr.call_id != id ||
        request.payload.size() != sizeof req || reply.payload.size() != sizeof resp) {
      std::fprintf(stderr, "critpath: round trip %lu failed\n", (unsigned long)id);
      return 1;
    }
  }
  std::printf("critpath: %d round trips, %lu requests and %lu replies from the tail block\n", n,
              (unsigned long)server->copy_reads(), (unsigned long)client->copy_reads());
  return 0;
}
