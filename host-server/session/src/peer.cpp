#include "wormhole/server/peer.hpp"

#include <sys/random.h>

#include <cstring>

namespace wh::server {

namespace {
void random_words(uint64_t* w, size_t n) {
  uint8_t* p = reinterpret_cast<uint8_t*>(w);
  size_t got = 0;
  while (got < n * 8) {
    ssize_t r = getrandom(p + got, n * 8 - got, 0);
    if (r > 0) got += size_t(r);
  }
}
}  // namespace

void PeerTickets::expire_locked(Clock::time_point now) {
  // A claimed ticket is being filled by a link: that link ends it.
  for (auto it = tickets_.begin(); it != tickets_.end();)
    it = it->second.state != State::Claimed && it->second.expiry <= now ? tickets_.erase(it) : std::next(it);
}

bool PeerTickets::issue(uint64_t session, uint64_t dst, uint64_t bytes, Clock::time_point now,
                        std::chrono::milliseconds life, Ticket* out) {
  std::lock_guard lk(mu_);
  expire_locked(now);
  size_t held = 0;
  for (auto& [k, e] : tickets_) held += e.session == session;
  if (held >= kPerSession) return false;
  Ticket t;
  do random_words(t.v, 2);
  while (tickets_.count({t.v[0], t.v[1]}));
  Entry& e = tickets_[{t.v[0], t.v[1]}];
  e.session = session;
  e.dst = dst;
  e.bytes = bytes;
  e.expiry = now + life;
  *out = t;
  return true;
}

uint8_t* PeerTickets::claim(const Ticket& t, uint64_t dst, uint64_t bytes, Clock::time_point now, uint64_t* session,
                            std::string* why) {
  std::lock_guard lk(mu_);
  expire_locked(now);
  auto it = tickets_.find({t.v[0], t.v[1]});
  if (it == tickets_.end()) {
    *why = "unknown or expired ticket";
    return nullptr;
  }
  Entry& e = it->second;
  if (e.state != State::Issued) {
    *why = "ticket already used";
    return nullptr;
  }
  if (e.dst != dst || e.bytes != bytes) {
    // Whoever presents a ticket with another range is not the server it
    // was meant for: the ticket is burnt.
    tickets_.erase(it);
    *why = "range or length differs from the ticket's";
    return nullptr;
  }
  if (spare_.capacity() >= bytes) e.buf = std::move(spare_);
  e.buf.resize(bytes);
  e.state = State::Claimed;
  *session = e.session;
  return e.buf.data();
}

void PeerTickets::filled(const Ticket& t, bool ok) {
  std::lock_guard lk(mu_);
  auto it = tickets_.find({t.v[0], t.v[1]});
  if (it == tickets_.end() || it->second.state != State::Claimed) return;
  if (ok) it->second.state = State::Filled;
  else tickets_.erase(it);
}

bool PeerTickets::take(uint64_t session, const Ticket& t, Clock::time_point now, uint64_t* dst,
                       std::vector<uint8_t>* bytes, std::string* why) {
  std::lock_guard lk(mu_);
  auto it = tickets_.find({t.v[0], t.v[1]});
  if (it == tickets_.end() || it->second.session != session) {
    *why = "no such ticket in this session";
    return false;
  }
  Entry& e = it->second;
  if (e.state != State::Filled) {
    // Never pushed (or still arriving): an issued ticket past its life goes.
    *why = e.state == State::Issued ? "nothing was pushed for the ticket" : "the push is still arriving";
    if (e.state == State::Issued && e.expiry <= now) tickets_.erase(it);
    return false;
  }
  *dst = e.dst;
  *bytes = std::move(e.buf);
  tickets_.erase(it);
  return true;
}

void PeerTickets::recycle(std::vector<uint8_t>&& buf) {
  std::lock_guard lk(mu_);
  if (buf.capacity() > spare_.capacity()) spare_ = std::move(buf);
}

void PeerTickets::drop_session(uint64_t session) {
  std::lock_guard lk(mu_);
  for (auto it = tickets_.begin(); it != tickets_.end();)
    it = it->second.session == session && it->second.state != State::Claimed ? tickets_.erase(it) : std::next(it);
}

size_t PeerTickets::size() const {
  std::lock_guard lk(mu_);
  return tickets_.size();
}

}  // namespace wh::server
