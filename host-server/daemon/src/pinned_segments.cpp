#include "pinned_segments.hpp"

#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "warn_limiter.hpp"
#include "wormhole/fd_pass.hpp"
#include "wormhole/proto/wire.hpp"

namespace wh::server {

bool PinnedBudget::take(uint32_t uid, uint64_t n, uint64_t* held) {
  std::lock_guard lk(mu_);
  uint64_t& h = held_[uid];
  *held = h;
  if (n > limit_ || h > limit_ - n) {
    if (h == 0) held_.erase(uid);
    return false;
  }
  h += n;
  return true;
}

void PinnedBudget::give(uint32_t uid, uint64_t n) {
  std::lock_guard lk(mu_);
  auto it = held_.find(uid);
  if (it == held_.end()) return;
  it->second -= std::min(it->second, n);
  if (it->second == 0) held_.erase(it);
}

uint64_t PinnedBudget::held(uint32_t uid) {
  std::lock_guard lk(mu_);
  auto it = held_.find(uid);
  return it == held_.end() ? 0 : it->second;
}

uint64_t default_pinned_budget_mb() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return 1024;
  return (uint64_t(pages) * uint64_t(page) / 2) >> 20;
}

namespace {

// A sealed memfd (the client may be hostile: it can neither shrink the
// pages under the server's mapping nor grow the file), mapped here.
class MemfdSegment final : public PinnedSegment {
 public:
  MemfdSegment(int fd, uint8_t* p, uint64_t n, uint32_t uid, PinnedBudget& b)
      : fd_(fd), p_(p), n_(n), uid_(uid), budget_(b) {}
  ~MemfdSegment() override {
    // The pages go now, even where the client still maps the file.
    if (owned_) fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, off_t(n_));
    munmap(p_, n_);
    close(fd_);
    budget_.give(uid_, n_);
  }
  std::span<uint8_t> memory() const override { return {p_, n_}; }
  int fd() const override { return fd_; }
  void set_owned(bool o) override { owned_ = o; }

 private:
  bool owned_ = true;
  int fd_;
  uint8_t* p_;
  uint64_t n_;
  uint32_t uid_;
  PinnedBudget& budget_;
};

WarnLimiter g_refusals;

}  // namespace

std::unique_ptr<PinnedSegment> SocketPinnedSource::create(uint64_t bytes, std::string* why) {
  uint64_t held = 0;
  if (!budget_.take(uid_, bytes, &held)) {
    *why = "over budget";
    g_refusals.warn("session {}: uid {} may not pin {} MiB more: it holds {} MiB of grown pinned memory and the "
                    "per-user budget is {} MiB (--pinned-budget-mb); its cudaHostAlloc falls back to pageable "
                    "memory and mapped allocations fail",
                    session_, uid_, bytes >> 20, held >> 20, budget_.limit() >> 20);
    return nullptr;
  }
  auto fail = [&](const char* what, int fd) -> std::unique_ptr<PinnedSegment> {
    *why = std::string(what) + ": " + strerror(errno);
    g_refusals.warn("session {}: pinned segment of {} MiB: {}", session_, bytes >> 20, *why);
    if (fd >= 0) close(fd);
    budget_.give(uid_, bytes);
    return nullptr;
  };
  int fd = memfd_create("wormhole-pinned", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return fail("memfd_create", -1);
  if (ftruncate(fd, off_t(bytes)) != 0 || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
    return fail("memfd size/seals", fd);
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return fail("mmap", fd);
  return std::make_unique<MemfdSegment>(fd, static_cast<uint8_t*>(p), bytes, uid_, budget_);
}

std::unique_ptr<PinnedSegment> SocketPinnedSource::adopt(int fd, uint64_t bytes, std::string* why) {
  // What create makes: a memfd of exactly `bytes` that no one can shrink,
  // grow or unseal.
  struct stat st{};
  const int seals = fcntl(fd, F_GET_SEALS);
  const int want = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || uint64_t(st.st_size) != bytes || seals < 0 ||
      (seals & want) != want) {
    *why = "a pinned segment is not a memfd sealed at its size";
    return nullptr;
  }
  uint64_t held = 0;
  if (!budget_.take(uid_, bytes, &held)) {
    *why = "uid " + std::to_string(uid_) + " holds " + std::to_string(held >> 20) + " MiB of grown pinned memory here; " +
           std::to_string(bytes >> 20) + " more is past the per-user budget of " + std::to_string(budget_.limit() >> 20) +
           " MiB (--pinned-budget-mb)";
    return nullptr;
  }
  const int own = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  void* p = own < 0 ? MAP_FAILED : mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, own, 0);
  if (p == MAP_FAILED) {
    *why = std::string("a pinned segment cannot be mapped: ") + strerror(errno);
    if (own >= 0) close(own);
    budget_.give(uid_, bytes);
    return nullptr;
  }
  auto seg = std::make_unique<MemfdSegment>(own, static_cast<uint8_t*>(p), bytes, uid_, budget_);
  seg->set_owned(false);
  return seg;
}

bool SocketPinnedSource::hand_over(const PinnedSegment& s, uint64_t index) {
  const auto& seg = static_cast<const MemfdSegment&>(s);
  const proto::PinnedSegmentNote note{proto::kPinnedNoteMagic, 0, index, seg.memory().size()};
  // Never blocks: a client that does not read its socket gets no more.
  return ring::send_with_fd(sock_, &note, sizeof note, seg.fd(), MSG_DONTWAIT);
}

}  // namespace wh::server
