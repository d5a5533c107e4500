// Peer copies between servers (proto/peer_api.def, docs/remote.md "Several
// servers"): the destination server's one-time tickets. A ticket is 128
// random bits bound to the session that asked for it, one device range and
// its length, and an expiry. The link of the pushing server presents it
// once (claim), fills the ticket's buffer, and the session that asked takes
// the bytes (take). Everything a peer sends is checked against the ticket;
// the ticket is the only credential a pushing server has.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace wh::server {

class PeerTickets {
 public:
  using Clock = std::chrono::steady_clock;
  struct Ticket {
    uint64_t v[2];
  };
  static constexpr size_t kPerSession = 4;  // tickets one session holds at once

  // For [dst, dst+bytes) of `session` (the caller checked the range), valid
  // for `life`. false when the session already holds kPerSession.
  bool issue(uint64_t session, uint64_t dst, uint64_t bytes, Clock::time_point now,
             std::chrono::milliseconds life, Ticket* out);
  // A pushing server presents `t` for exactly [dst, dst+bytes): the buffer
  // to fill (bytes long) and its session, or nullptr and why. Once only; a
  // presentation with another range or length burns the ticket.
  uint8_t* claim(const Ticket& t, uint64_t dst, uint64_t bytes, Clock::time_point now, uint64_t* session,
                 std::string* why);
  // The claimed ticket's bytes all arrived (ok), or the push failed (the
  // ticket is dropped).
  void filled(const Ticket& t, bool ok);
  // The session that asked takes the bytes of a filled ticket (the ticket
  // is gone); false and why otherwise.
  bool take(uint64_t session, const Ticket& t, Clock::time_point now, uint64_t* dst, std::vector<uint8_t>* bytes,
            std::string* why);
  // A taken buffer back, for the next claim (keeps one, the largest).
  void recycle(std::vector<uint8_t>&& buf);
  // The session ended: its tickets go.
  void drop_session(uint64_t session);
  size_t size() const;

 private:
  enum class State { Issued, Claimed, Filled };
  struct Entry {
    uint64_t session = 0, dst = 0, bytes = 0;
    Clock::time_point expiry{};
    State state = State::Issued;
    std::vector<uint8_t> buf;
  };
  void expire_locked(Clock::time_point now);
  mutable std::mutex mu_;
  std::map<std::pair<uint64_t, uint64_t>, Entry> tickets_;
  std::vector<uint8_t> spare_;  // a buffer already faulted in
};

}  // namespace wh::server
