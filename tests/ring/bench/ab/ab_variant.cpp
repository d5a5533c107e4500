// One build of shm-ring as seen by ab_main.cpp: compiled with -DWH_AB=va or
// vb (the function prefix) and the library's names renamed (ab.sh).
#include <unistd.h>

#include <cstring>

#include "wormhole/ring.hpp"

using namespace wh::ring;
#define WH_AB_CAT2(a, b) a##b
#define WH_AB_CAT(a, b) WH_AB_CAT2(a, b)
#define WH_AB_FN(name) WH_AB_CAT(WH_AB, name)

namespace {
// The bench_ring echo: 64-byte request, 16-byte response, default policy.
struct Ctx {
  std::unique_ptr<Region> region;
  std::unique_ptr<ClientChannel> client;
  std::unique_ptr<ServerChannel> server;
  Message reply, request;
  uint8_t req[64];
  uint8_t resp[16];
};
}  // namespace

void* WH_AB_FN(_setup)() {
  auto* x = new Ctx;
  RegionConfig cfg;
  cfg.req_size = cfg.resp_size = 1u << 20;
  cfg.data_size = 4096;
  cfg.hb_timeout_ms = 10000;
  std::string err;
  x->region = Region::create_memfd("wh-ring-ab", cfg, &err);
  if (!x->region) std::abort();
  std::memset(x->req, 0xa5, sizeof x->req);
  std::memset(x->resp, 0x5a, sizeof x->resp);
  return x;
}

void WH_AB_FN(_claim)(void* p) {
  auto* x = static_cast<Ctx*>(p);
  std::string err;
  // No wait for the server: it attaches when its first block of this build
  // starts, and a call made before that simply waits in the ring.
  x->client = ClientChannel::claim(*x->region, 0, &err);
  if (!x->client) std::abort();
}

int WH_AB_FN(_serve)(void* p, int n) {
  auto* x = static_cast<Ctx*>(p);
  std::string err;
  while (!x->server) {
    x->server = ServerChannel::attach(*x->region, 0, &err);
    if (!x->server) usleep(100);
  }
  std::span<const uint8_t> parts[] = {x->resp};
  for (int i = 0; i < n; i++) {
    if (x->server->recv(x->request, std::chrono::seconds(10)) != Status::Ok) return 1;
    if (x->server->reply(x->request.hdr.call_id, x->request.hdr.opcode, 0, 1, parts) != Status::Ok)
      return 2;
  }
  return 0;
}

bool WH_AB_FN(_call)(void* p) {
  auto* x = static_cast<Ctx*>(p);
  std::span<const uint8_t> parts[] = {x->req};
  return x->client->call(1, 0, parts, x->reply) == Status::Ok && x->reply.payload.size() == 16;
}
