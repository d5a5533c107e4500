// Grown pinned memory for socket clients: shared memfd segments handed to
// the client over its socket, within a budget per user that all sessions
// of the same uid draw on (--pinned-budget-mb).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "wormhole/server/pinned.hpp"

namespace wh::server {

// Bytes of grown pinned memory per uid, against one limit for every uid.
class PinnedBudget {
 public:
  explicit PinnedBudget(uint64_t limit) : limit_(limit) {}
  uint64_t limit() const { return limit_; }
  // Takes `n` bytes for `uid`; false (and what it holds now) past the limit.
  bool take(uint32_t uid, uint64_t n, uint64_t* held);
  void give(uint32_t uid, uint64_t n);
  uint64_t held(uint32_t uid);

 private:
  const uint64_t limit_;
  std::mutex mu_;
  std::map<uint32_t, uint64_t> held_;
};

// The segments of one socket session: made in this process, their memfd
// sent on the client's socket.
class SocketPinnedSource final : public PinnedSource {
 public:
  SocketPinnedSource(int sock, uint32_t uid, uint64_t session, PinnedBudget& budget)
      : sock_(sock), uid_(uid), session_(session), budget_(budget) {}
  std::unique_ptr<PinnedSegment> create(uint64_t bytes, std::string* why) override;
  bool hand_over(const PinnedSegment& s, uint64_t index) override;
  std::unique_ptr<PinnedSegment> adopt(int fd, uint64_t bytes, std::string* why) override;

 private:
  int sock_;
  uint32_t uid_;
  uint64_t session_;
  PinnedBudget& budget_;
};

// The default budget: half of the machine's memory, in MiB.
uint64_t default_pinned_budget_mb();

}  // namespace wh::server
