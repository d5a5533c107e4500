// A hostile network peer of wormhole-server's ucx:// listener. Each case
// opens its own connection and must be refused or dropped, never crash or
// hang the server; the script then checks that a good client still works.
//   hostile URL KEYFILE
// And an impostor server for clients: it listens at URL and accepts every
// proof with a verdict whose MAC it cannot make (it has no key); a client
// must refuse to go on.
//   hostile --impostor URL
#include <cstdio>
#include <cstring>
#include <unistd.h>
#include <vector>

#include "wormhole/net.hpp"
#include "wormhole/region.h"

using namespace wh::net;
using namespace std::chrono_literals;

namespace {
Addr g_addr;
Key g_key;

std::unique_ptr<Link> open_link(Challenge* ch) {
  std::string err;
  auto l = Link::connect(g_addr, &err);
  if (!l) {
    std::fprintf(stderr, "connect: %s\n", err.c_str());
    std::exit(3);
  }
  if (!l->take(ch, Clock::now() + 5s)) {
    std::fprintf(stderr, "no challenge\n");
    std::exit(3);
  }
  return l;
}

// After sending, the server must close on us (or answer with a refusal) within 5 s.
bool dropped(Link& l, const char* what) {
  auto end = Clock::now() + 5s;
  while (Clock::now() < end) {
    if (!l.fill(l.buffered().size() + 1, Clock::now() + 200ms) && l.dead()) {
      std::printf("ok: %s: dropped\n", what);
      return true;
    }
    if (l.buffered().size() >= sizeof(Verdict)) {
      Verdict v;
      std::memcpy(&v, l.buffered().data(), sizeof v);
      if (v.magic == kVerdictMagic && v.status != 0) {
        std::printf("ok: %s: refused (%.*s)\n", what, int(sizeof v.message), v.message);
        return true;
      }
      l.consume(l.buffered().size());
    }
  }
  std::printf("FAIL: %s: the server kept the connection\n", what);
  return false;
}

// A client's answer to the challenge (or a move's, a resume's), its MAC made with key k.
Proof proof(const Challenge& ch, const Key& k, uint32_t magic = kProofMagic) {
  Hello h;
  h.magic = magic;
  h.min_version = ch.min_version;
  h.max_version = ch.max_version;
  h.pid = 1;
  h.timeout_ms = 5000;
  return make_proof(k, ch, h);
}

std::unique_ptr<Link> authenticated() {
  Challenge ch;
  auto l = open_link(&ch);
  Proof p = proof(ch, g_key);
  l->send(&p, sizeof p, Clock::now() + 5s);
  Verdict v;
  if (!l->take(&v, Clock::now() + 5s)) return nullptr;
  return v.status == 0 ? std::move(l) : nullptr;
}
int impostor(const char* url) {
  std::string err;
  Addr a;
  auto lis = parse_url(url, &a, &err) ? Listener::listen(a, &err) : nullptr;
  if (!lis) return std::fprintf(stderr, "impostor: %s\n", err.c_str()), 2;
  std::printf("impostor listening\n");
  std::fflush(stdout);
  std::vector<std::unique_ptr<Link>> held;
  for (;;) {  // until killed
    for (auto& l : lis->accept(500ms)) {
      Challenge ch{};
      ch.magic = kChallengeMagic;
      ch.min_version = 1;
      ch.max_version = 0xffff;
      ch.max_msg = 1u << 20;
      ch.timeout_ms = 5000;
      random_bytes(ch.nonce, kNonce);
      Proof p;
      if (!l->send(&ch, sizeof ch, Clock::now() + 5s) || !l->take(&p, Clock::now() + 5s)) continue;
      Verdict v{};
      v.magic = kVerdictMagic;
      v.version = p.max_version;
      v.session_id = 1;
      random_bytes(v.mac, kMac);
      l->send(&v, sizeof v, Clock::now() + 5s);
      held.push_back(std::move(l));
    }
  }
}
}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--impostor") return impostor(argv[2]);
  if (argc != 3) return 2;
  std::string err;
  if (!parse_url(argv[1], &g_addr, &err) || !load_key(argv[2], &g_key, &err)) {
    std::fprintf(stderr, "%s\n", err.c_str());
    return 2;
  }
  bool ok = true;
  {  // garbage instead of the proof
    Challenge ch;
    auto l = open_link(&ch);
    std::vector<uint8_t> junk(4096);
    random_bytes(junk.data(), junk.size());
    l->send(junk.data(), junk.size(), Clock::now() + 5s);
    ok &= dropped(*l, "garbage before authentication");
  }
  {  // a request record before authenticating
    Challenge ch;
    auto l = open_link(&ch);
    wh_msg_hdr h{};
    h.magic = WH_MSG_MAGIC;
    h.version = 2;
    h.opcode = 1;
    std::vector<uint8_t> rec(sizeof(Proof), 0);
    std::memcpy(rec.data(), &h, sizeof h);
    l->send(rec.data(), rec.size(), Clock::now() + 5s);
    ok &= dropped(*l, "a record before authentication");
  }
  {  // a proof with a MAC under the wrong key
    Challenge ch;
    auto l = open_link(&ch);
    Key wrong = g_key;
    wrong.secret[0] ^= 1;
    Proof p = proof(ch, wrong);
    l->send(&p, sizeof p, Clock::now() + 5s);
    ok &= dropped(*l, "wrong key");
  }
  {  // a peer server's offer with a forged ticket (peer copies): no key, no
     // valid ticket: refused before anything is received for it
    Challenge ch;
    auto l = open_link(&ch);
    PeerOffer o{};
    o.magic = kPeerMagic;
    o.min_version = ch.min_version;
    o.max_version = ch.max_version;
    random_bytes(reinterpret_cast<uint8_t*>(o.ticket), sizeof o.ticket);
    o.dst = 0x100000000000ull;
    o.bytes = 1ull << 62;  // would be a huge buffer if it were believed
    l->send(&o, sizeof o, Clock::now() + 5s);
    ok &= dropped(*l, "forged peer ticket");
  }
  {  // silence: the server gives up on the handshake
    Challenge ch;
    auto l = open_link(&ch);
    ok &= dropped(*l, "no proof at all");
  }
  {  // authenticated, then a record claiming 4 GiB
    auto l = authenticated();
    if (!l) return std::printf("FAIL: could not authenticate with the right key\n"), 1;
    wh_msg_hdr h{};
    h.magic = WH_MSG_MAGIC;
    h.version = 2;
    h.opcode = 1;
    h.len = 0xffffffffu;
    l->send(&h, sizeof h, Clock::now() + 5s);
    ok &= dropped(*l, "oversize record length");
  }
  {  // authenticated, then garbage records
    auto l = authenticated();
    if (!l) return 1;
    std::vector<uint8_t> junk(1 << 16);
    random_bytes(junk.data(), junk.size());
    l->send(junk.data(), junk.size(), Clock::now() + 5s);
    ok &= dropped(*l, "garbage after authentication");
  }
  {  // authenticated, malformed requests of every opcode: answered with errors
    auto l = authenticated();
    if (!l) return 1;
    for (uint16_t op = 1; op < 2000 && !l->dead(); op++) {
      uint8_t rec[sizeof(wh_msg_hdr) + 3]{};
      wh_msg_hdr h{};
      h.magic = WH_MSG_MAGIC;
      h.version = 2;
      h.opcode = op;
      h.flags = WH_MSG_F_POSTED;
      h.len = 3;  // shorter than any request's fixed part
      std::memcpy(rec, &h, sizeof h);
      l->send(rec, sizeof rec, Clock::now() + 5s);
    }
    ok &= dropped(*l, "malformed requests (the violation limit)");
  }
  {  // following a moved session with a token no server issued
    Challenge ch;
    auto l = open_link(&ch);
    Proof p = proof(ch, g_key, kResumeMagic);
    l->send(&p, sizeof p, Clock::now() + 5s);
    ok &= dropped(*l, "resume with a forged token");
  }
  // A server moving a session here (the key's holder): after the server's
  // verdict, a checkpoint header claiming 60 GiB of frame for 4 KiB of
  // content, then one whose frame is garbage.
  for (int forged_frame = 0; forged_frame < 2; ++forged_frame) {
    Challenge ch;
    auto l = open_link(&ch);
    Proof p = proof(ch, g_key, kMoveMagic);
    l->send(&p, sizeof p, Clock::now() + 5s);
    Verdict v{};
    if (!l->take(&v, Clock::now() + 5s)) return std::printf("FAIL: no verdict to a move\n"), 1;
    if (v.status != 0) return std::printf("FAIL: a move with the right key refused\n"), 1;
    uint8_t hdr[96] = {};  // CheckpointHeader: magic, version, sizes, backend, ...
    std::memcpy(hdr, "WHCKPT\r\n", 8);
    const uint32_t version = 4, hbytes = 96;
    const uint64_t content = 4096, frame = forged_frame ? 4096 : (60ull << 30);
    std::memcpy(hdr + 8, &version, 4);
    std::memcpy(hdr + 12, &hbytes, 4);
    std::memcpy(hdr + 16, &content, 8);
    std::memcpy(hdr + 24, &frame, 8);
    std::memcpy(hdr + 32, "sim", 3);
    l->send(hdr, sizeof hdr, Clock::now() + 5s);
    if (forged_frame) {
      if (!l->take(&v, Clock::now() + 5s)) return std::printf("FAIL: no answer to a move's header\n"), 1;
      std::vector<uint8_t> junk(frame);
      random_bytes(junk.data(), junk.size());
      l->send(junk.data(), junk.size(), Clock::now() + 5s);
    }
    ok &= dropped(*l, forged_frame ? "a moved session's checkpoint of garbage" : "a moved session's forged header");
  }
  std::printf(ok ? "PASS hostile\n" : "FAIL hostile\n");
  return ok ? 0 : 1;
}
