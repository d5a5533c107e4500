// Challenge-response authentication of the ucx:// transport.
#include <fcntl.h>
#include <nettle/hmac.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "wormhole/net.hpp"

namespace wh::net {

bool load_key(const std::string& path, Key* k, std::string* err) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *err = "cannot read key file " + path + ": " + strerror(errno);
    return false;
  }
  struct stat st{};
  fstat(fd, &st);
  if (st.st_mode & 077) {
    close(fd);
    *err = "key file " + path + " is accessible by group or others (chmod 600 it)";
    return false;
  }
  if (!S_ISREG(st.st_mode) || st.st_size > 4096) {
    close(fd);
    *err = "key file " + path + " is not a regular file of at most 4096 bytes";
    return false;
  }
  std::vector<uint8_t> b(size_t(st.st_size));
  ssize_t n = b.empty() ? 0 : read(fd, b.data(), b.size());
  close(fd);
  if (n != ssize_t(b.size())) {
    *err = "short read of key file " + path;
    return false;
  }
  auto space = [](uint8_t c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; };
  while (!b.empty() && space(b.back())) b.pop_back();
  size_t lead = 0;
  while (lead < b.size() && space(b[lead])) lead++;
  b.erase(b.begin(), b.begin() + long(lead));
  if (b.size() < 16) {
    *err = "key file " + path + " holds fewer than 16 bytes of secret";
    return false;
  }
  k->secret = std::move(b);
  k->owner = uint32_t(st.st_uid);
  size_t slash = path.rfind('/');
  k->name = slash == std::string::npos ? path : path.substr(slash + 1);
  return true;
}

void random_bytes(uint8_t* p, size_t n) {
  while (n) {
    ssize_t r = getrandom(p, n, 0);
    if (r <= 0) continue;
    p += r;
    n -= size_t(r);
  }
}

namespace {
void mac(const Key& k, std::initializer_list<std::pair<const void*, size_t>> parts, uint8_t out[kMac]) {
  hmac_sha256_ctx c;
  hmac_sha256_set_key(&c, k.secret.size(), k.secret.data());
  for (auto [p, n] : parts) hmac_sha256_update(&c, n, static_cast<const uint8_t*>(p));
  hmac_sha256_digest(&c, kMac, out);
}
constexpr char kClientLabel[] = "wormhole-ucx-client";
constexpr char kServerLabel[] = "wormhole-ucx-server";
}  // namespace

void client_mac(const Key& k, const Challenge& c, const Proof& p, uint8_t out[kMac]) {
  // A move's or a resume's proof covers its magic too (a new session's
  // never did: older clients compute it without).
  const uint32_t magic = p.magic == kProofMagic ? 0 : p.magic;
  mac(k,
      {{kClientLabel, sizeof kClientLabel},
       {&magic, magic ? 4u : 0u},
       {c.nonce, kNonce},
       {p.nonce, kNonce},
       {&p.min_version, 2},
       {&p.max_version, 2},
       {&p.pid, 4},
       {&p.timeout_ms, 4}},
      out);
}

void server_mac(const Key& k, const Challenge& c, const Proof& p, const Verdict& v, uint8_t out[kMac]) {
  mac(k,
      {{kServerLabel, sizeof kServerLabel},
       {p.nonce, kNonce},
       {c.nonce, kNonce},
       {&v.status, 4},
       {&v.version, 2},
       {&v.session_id, 8}},
      out);
}

bool mac_equal(const uint8_t* a, const uint8_t* b) {
  uint8_t d = 0;
  for (size_t i = 0; i < kMac; i++) d |= uint8_t(a[i] ^ b[i]);
  return d == 0;
}

Proof make_proof(const Key& k, const Challenge& c, const Hello& h) {
  Proof p{};
  p.magic = h.magic;
  p.min_version = h.min_version;
  p.max_version = h.max_version;
  p.pid = h.pid;
  p.timeout_ms = h.timeout_ms;
  random_bytes(p.nonce, sizeof p.nonce);
  if (h.token) std::memcpy(p.nonce + kTokenAt, h.token, 16);
  client_mac(k, c, p, p.mac);
  return p;
}

Shake client_handshake(Link& link, const Key& k, const Hello& h, Clock::time_point deadline, Challenge* ch,
                       Verdict* v) {
  if (!link.take(ch, deadline)) return Shake::NoChallenge;
  if (ch->magic != kChallengeMagic) return Shake::NotServer;
  const Proof p = make_proof(k, *ch, h);
  if (!link.send(&p, sizeof p, deadline) || !link.take(v, deadline)) return Shake::NoVerdict;
  v->message[sizeof v->message - 1] = 0;
  if (v->magic != kVerdictMagic) return Shake::NotServer;
  if (v->status != 0) return Shake::Refused;
  uint8_t want[kMac];
  server_mac(k, *ch, p, *v, want);
  return mac_equal(want, v->mac) ? Shake::Ok : Shake::Forged;
}

}  // namespace wh::net
