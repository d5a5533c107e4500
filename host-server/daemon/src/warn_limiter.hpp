// A warning that a client can cause over and over (a bad hello, a refused
// session, a refused pinned segment) is logged at most kBurst times per
// window; the ones left out are counted and told with the next one logged.
#pragma once

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>

namespace wh::server {

class WarnLimiter {
 public:
  static constexpr int kBurst = 5;
  static constexpr auto kWindow = std::chrono::seconds(10);
  template <class... A>
  void warn(fmt::format_string<A...> f, A&&... a) {
    uint64_t dropped = 0;
    {
      std::lock_guard lk(mu_);
      auto now = std::chrono::steady_clock::now();
      if (now - window_ >= kWindow) window_ = now, n_ = 0;
      if (++n_ > kBurst) {
        suppressed_++;
        return;
      }
      dropped = std::exchange(suppressed_, 0);
    }
    std::string msg = fmt::format(f, std::forward<A>(a)...);
    if (dropped) spdlog::warn("{} ({} similar warnings suppressed)", msg, dropped);
    else spdlog::warn("{}", msg);
  }

 private:
  std::mutex mu_;
  std::chrono::steady_clock::time_point window_{};
  int n_ = 0;
  uint64_t suppressed_ = 0;
};

}  // namespace wh::server
