// wormhole/net.hpp - the ucx:// transport: a byte stream between a client
// process and wormhole-server over UCX (UCP stream API), framed with the
// ring's wh_msg_hdr records, and the challenge-response handshake that
// precedes any record.
//
// UCX is loaded with dlopen("libucp.so.0") on first use: a program that
// never names a ucx:// server never loads it (nor its signal handlers and
// memory hooks).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace wh::net {

using Clock = std::chrono::steady_clock;

struct Addr {
  std::string host;
  uint16_t port = 0;
};
// "ucx://HOST:PORT" (HOST an IPv4 address or a name; [v6] in brackets).
bool parse_url(const std::string& url, Addr* a, std::string* err);
std::string to_string(const Addr& a);

class Context;  // a UCP context (one per process side)

// One endpoint on its own worker. Not thread-safe: callers serialise (the
// worker runs in UCS_THREAD_MODE_SERIALIZED).
class Link {
 public:
  ~Link();
  // Client side: connects to a listener.
  static std::unique_ptr<Link> connect(const Addr& a, std::string* err);
  // Sends the parts in order (one stream send each, or one gathered send);
  // false when the link failed or the deadline passed (the link is then
  // dead: a partial record cannot be taken back).
  bool send(std::span<const std::span<const uint8_t>> parts, Clock::time_point deadline);
  // memh: from register_memory() when p lies in a registered region (UCX
  // then sends from it without staging where the transport allows), or null.
  bool send(const void* p, size_t n, Clock::time_point deadline, void* memh = nullptr);
  // Receives exactly n bytes of the stream into dst: first what is already
  // buffered, the rest straight into dst (one UCX receive, memh as for
  // send). A deadline or failure leaves the link dead (the stream position
  // is lost).
  bool read_into(void* dst, size_t n, Clock::time_point deadline, void* memh = nullptr);
  // Host memory registered with UCX (ucp_mem_map of the caller's pages,
  // once; ucp_mem_unmap at deregister_memory): a handle for send/read_into
  // of any sub-range, or null (err says why).
  void* register_memory(void* p, size_t n, std::string* err);
  void deregister_memory(void* memh);
  // Makes at least n bytes (n <= capacity) available in the receive
  // buffer. false: deadline (timed_out() true; the link stays usable), or
  // the link failed (dead()).
  // at_most: receive no more than this many bytes ahead (n <= at_most), so
  // that a payload that follows can be read_into() its destination.
  bool fill(size_t n, Clock::time_point deadline, size_t at_most = SIZE_MAX);
  std::span<const uint8_t> buffered() const { return {rbuf_.data() + rpos_, wpos_ - rpos_}; }
  void consume(size_t n) { rpos_ += n; }
  // One fixed-size handshake message: received, copied out and consumed;
  // false as fill().
  template <class T>
  bool take(T* out, Clock::time_point deadline) {
    if (!fill(sizeof(T), deadline)) return false;
    std::memcpy(out, buffered().data(), sizeof(T));
    consume(sizeof(T));
    return true;
  }
  size_t capacity() const { return rbuf_.size(); }
  bool dead() const { return dead_; }
  bool timed_out() const { return timed_out_; }
  const std::string& error() const { return error_; }
  const std::string& peer() const { return peer_; }
  // Bytes received so far (any: keepalives count), for liveness.
  uint64_t received() const { return received_; }
  void fail(const std::string& why);

 private:
  friend class Listener;
  Link() = default;
  bool make_worker(std::string* err);
  bool wait(bool (*done)(Link*, void*), void* arg, Clock::time_point deadline);
  // wait() until UCX request `r` is no longer in progress.
  bool wait_request(void* r, Clock::time_point deadline);

  std::shared_ptr<Context> ctx_;
  void* worker_ = nullptr;
  void* ep_ = nullptr;
  int efd_ = -1;
  bool dead_ = false, timed_out_ = false;
  std::string error_, peer_;
  std::vector<uint8_t> rbuf_;
  size_t rpos_ = 0, wpos_ = 0;
  void* rreq_ = nullptr;  // a receive in flight into rbuf_ + wpos_
  uint64_t received_ = 0;
};

// The server's listening endpoint.
class Listener {
 public:
  ~Listener();
  static std::unique_ptr<Listener> listen(const Addr& a, std::string* err);
  // Waits up to `timeout` for connection requests; accepts each on a new
  // worker (a Link of its own). Handshake is the caller's.
  std::vector<std::unique_ptr<Link>> accept(std::chrono::milliseconds timeout);
  uint16_t port() const { return port_; }
  void queue(void* conn_request) { pending_.push_back(conn_request); }  // (UCX's callback)

 private:
  Listener() = default;
  std::shared_ptr<Context> ctx_;
  void* worker_ = nullptr;
  void* listener_ = nullptr;
  int efd_ = -1;
  uint16_t port_ = 0;
  std::vector<void*> pending_;
};

// ---- authentication (docs/remote.md "Security") -------------------------
// Before any record: the server sends a Challenge (its nonce), the client a
// Proof (its nonce and HMAC-SHA256(key, "wormhole-ucx-client" | server
// nonce | client nonce | its fields)), the server a Verdict carrying its own
// HMAC over the nonces the other way round, so each side knows the other
// holds the key. Everything is fixed-size: nothing is read by a length the
// peer chose.
constexpr uint32_t kChallengeMagic = 0x43524857u;  // "WHRC"
constexpr uint32_t kProofMagic = 0x50524857u;      // "WHRP"
constexpr uint32_t kVerdictMagic = 0x56524857u;    // "WHRV"
constexpr size_t kNonce = 32, kMac = 32;

struct Challenge {
  uint32_t magic;
  uint16_t min_version, max_version;
  uint32_t max_msg;     // largest record payload the server accepts
  uint32_t timeout_ms;  // the server drops a client silent this long
  uint8_t nonce[kNonce];
};
struct Proof {
  uint32_t magic;
  uint16_t min_version, max_version;
  uint32_t pid;
  uint32_t timeout_ms;  // the client's: the server's keepalives come at least 4x as often
  uint8_t nonce[kNonce];
  uint8_t mac[kMac];
};
struct Verdict {
  uint32_t magic;
  int32_t status;  // 0: accepted; else a cudaError_t and `message`
  uint16_t version;
  uint16_t pad;
  uint32_t pad2;
  uint64_t session_id;
  uint8_t mac[kMac];  // accepted: proves the server holds the key
  char message[96];
};
static_assert(sizeof(Challenge) == 48 && sizeof(Proof) == 80 && sizeof(Verdict) == 152, "fixed handshake");

// A server pushing a peer copy (proto/peer_api.def) to another server
// answers the Challenge with this instead of a Proof (same size): it holds
// no key, only the one-time ticket the destination issued, and names the
// exact range and length the ticket is for. The destination's Verdict
// carries no MAC; after it come exactly `bytes` raw bytes, then the
// destination's PeerAck.
constexpr uint32_t kPeerMagic = 0x54524857u;  // "WHRT"
struct PeerOffer {
  uint32_t magic;
  uint16_t min_version, max_version;
  uint64_t pad;
  uint64_t ticket[2];
  uint64_t dst;
  uint64_t bytes;
  uint8_t pad2[32];
};
struct PeerAck {
  uint32_t magic;  // kPeerMagic
  int32_t status;  // 0: every byte arrived and is kept for the ticket's session
};
static_assert(sizeof(PeerOffer) == sizeof(Proof) && sizeof(PeerAck) == 8, "fixed handshake");

// A server moving a network client's session to another server (wormholectl
// migrate --to ucx://) answers the Challenge with a Proof of this magic,
// MACed with the key that session's client proved: the destination serves
// the session to that credential only. After the destination's Verdict
// (with its MAC) come the checkpoint's CheckpointHeader, a Verdict without
// MAC (go on, or why not), the rest of the checkpoint file, and a MoveDone.
constexpr uint32_t kMoveMagic = 0x4d524857u;  // "WHRM"
// A client following its session to the server it moved to answers the
// Challenge with a Proof of this magic whose nonce ends with the move's
// 16-byte token (proto::MovedNotice); the rest as for a new session.
constexpr uint32_t kResumeMagic = 0x55524857u;  // "WHRU"
constexpr size_t kTokenAt = kNonce - 16;       // the token's place in Proof::nonce
struct MoveDone {
  uint32_t magic;  // kMoveMagic
  int32_t status;  // 0: restored and waiting for its client; else a cudaError_t and `message`
  uint64_t session_id;
  uint64_t token[2];  // what the client presents (kResumeMagic)
  char message[96];
};
static_assert(sizeof(MoveDone) == 128, "fixed handshake");

struct Key {
  std::string name;  // the file's name: the credential in logs
  uint32_t owner = 0;  // the file's owner uid: the credential's quota (--uid-quota-mb)
  std::vector<uint8_t> secret;
};
// Reads a key file: at least 16 bytes of secret (surrounding whitespace
// dropped); refused when group- or world-accessible (like ssh keys).
bool load_key(const std::string& path, Key* k, std::string* err);
void random_bytes(uint8_t* p, size_t n);
void client_mac(const Key& k, const Challenge& c, const Proof& p, uint8_t out[kMac]);
void server_mac(const Key& k, const Challenge& c, const Proof& p, const Verdict& v, uint8_t out[kMac]);
bool mac_equal(const uint8_t* a, const uint8_t* b);  // constant time

// The client half of the handshake: what the client library sends to open a
// session (kProofMagic) or follow a moved one (kResumeMagic, with its token),
// and what a server moving a session sends to the destination (kMoveMagic).
struct Hello {
  uint32_t magic = kProofMagic;
  uint16_t min_version = 0, max_version = 0;
  uint32_t pid = 0;
  uint32_t timeout_ms = 0;
  const uint64_t* token = nullptr;  // kResumeMagic: the move's 16-byte token
};
// A Proof of `h` answering challenge `c`: a fresh nonce (ending with the token
// if any), MACed with k.
Proof make_proof(const Key& k, const Challenge& c, const Hello& h);
// Reads the Challenge, sends the Proof, reads the Verdict and checks it: the
// server's MAC on an accepted one. *ch and *v hold what came (v->message
// terminated); the result says where it stopped.
enum class Shake { Ok, NoChallenge, NotServer, NoVerdict, Refused, Forged };
Shake client_handshake(Link& link, const Key& k, const Hello& h, Clock::time_point deadline, Challenge* ch,
                       Verdict* v);

}  // namespace wh::net
