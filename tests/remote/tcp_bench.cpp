// tcp_bench: the raw TCP baselines of `make bench-remote`, measured between
// the same two namespaces as the ucx:// numbers: a ping-pong of messages the
// size of a null call's request and answer (32 and 48 bytes), and a 64 MiB
// bulk transfer in each direction.
//   tcp_bench server PORT         serves one client, then exits
//   tcp_bench client HOST PORT    prints rtt_p50_us= rtt_p99_us= bulk_up_gb_s= bulk_down_gb_s=
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

using Clock = std::chrono::steady_clock;
constexpr size_t kReq = 32, kResp = 48, kBulk = 64 << 20;
constexpr int kWarm = 500, kCalls = 20000, kRounds = 5;

static bool io(int fd, void* p, size_t n, bool wr) {
  auto* b = static_cast<uint8_t*>(p);
  while (n) {
    ssize_t r = wr ? write(fd, b, n) : read(fd, b, n);
    if (r <= 0) return false;
    b += r;
    n -= size_t(r);
  }
  return true;
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  int one = 1;
  std::vector<uint8_t> bulk(kBulk, 7);
  uint8_t msg[64] = {};
  if (!std::strcmp(argv[1], "server")) {
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(uint16_t(atoi(argv[2])));
    if (bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof a) || listen(ls, 1)) return perror("bind"), 1;
    std::printf("listening\n");
    std::fflush(stdout);
    int fd = accept(ls, nullptr, nullptr);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    for (int i = 0; i < kWarm + kCalls; i++)
      if (!io(fd, msg, kReq, false) || !io(fd, msg, kResp, true)) return 1;
    for (int r = 0; r < kRounds; r++) {
      if (!io(fd, bulk.data(), kBulk, false) || !io(fd, msg, 1, true)) return 1;  // up, then ack
      if (!io(fd, msg, 1, false) || !io(fd, bulk.data(), kBulk, true)) return 1;  // asked, down
    }
    close(fd);
    return 0;
  }
  if (argc < 4) return 2;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(atoi(argv[3])));
  inet_pton(AF_INET, argv[2], &a.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a)) return perror("connect"), 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  std::vector<double> ns;
  for (int i = 0; i < kWarm + kCalls; i++) {
    auto t0 = Clock::now();
    if (!io(fd, msg, kReq, true) || !io(fd, msg, kResp, false)) return 1;
    if (i >= kWarm) ns.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count());
  }
  std::sort(ns.begin(), ns.end());
  std::vector<double> up, down;
  for (int r = 0; r < kRounds; r++) {
    auto t0 = Clock::now();
    if (!io(fd, bulk.data(), kBulk, true) || !io(fd, msg, 1, false)) return 1;
    auto t1 = Clock::now();
    if (!io(fd, msg, 1, true) || !io(fd, bulk.data(), kBulk, false)) return 1;
    auto t2 = Clock::now();
    up.push_back(kBulk / std::chrono::duration<double>(t1 - t0).count() / 1e9);
    down.push_back(kBulk / std::chrono::duration<double>(t2 - t1).count() / 1e9);
  }
  std::sort(up.begin(), up.end());
  std::sort(down.begin(), down.end());
  std::printf("rtt_p50_us=%.1f rtt_p99_us=%.1f bulk_up_gb_s=%.3f bulk_down_gb_s=%.3f\n", ns[ns.size() / 2] / 1e3,
              ns[ns.size() * 99 / 100] / 1e3, up[kRounds / 2], down[kRounds / 2]);
  return 0;
}
