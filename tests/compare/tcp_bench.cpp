// tcp_bench: the loopback TCP floor for make bench-compare. A forked server
// on --server-cpu, the client on --client-cpu, TCP_NODELAY:
//   tcp_rtt_p50_ns tcp_rtt_p99_ns  ping-pong of --req bytes up, --resp bytes
//                                  back (the sizes of a forwarded null call)
//   tcp_bulk_up_gbs tcp_bulk_down_gbs  --bulk bytes streamed each way and
//                                  acknowledged, median of --rounds
// Usage: tcp_bench [--iters N] [--req B] [--resp B] [--bulk B] [--rounds N]
//                  [--client-cpu C] [--server-cpu S]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {
using Clock = std::chrono::steady_clock;

[[noreturn]] void die(const char* what) {
  std::perror(what);
  std::exit(1);
}

void pin(int cpu) {
  if (cpu < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  sched_setaffinity(0, sizeof set, &set);
}

void full_write(int fd, const char* p, size_t n) {
  while (n) {
    ssize_t k = write(fd, p, n);
    if (k <= 0) die("write");
    p += k; n -= k;
  }
}

bool full_read(int fd, char* p, size_t n) {
  while (n) {
    ssize_t k = read(fd, p, n);
    if (k <= 0) return false;
    p += k; n -= k;
  }
  return true;
}

void nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

double pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * (v.size() - 1) + 0.5)];
}
}  // namespace

int main(int argc, char** argv) {
  long iters = 20000, req = 64, resp = 64, rounds = 5, ccpu = -1, scpu = -1;
  size_t bulk = size_t(64) << 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    long v = std::atol(argv[i + 1]);
    if (!std::strcmp(argv[i], "--iters")) iters = v;
    else if (!std::strcmp(argv[i], "--req")) req = v;
    else if (!std::strcmp(argv[i], "--resp")) resp = v;
    else if (!std::strcmp(argv[i], "--bulk")) bulk = static_cast<size_t>(v);
    else if (!std::strcmp(argv[i], "--rounds")) rounds = v;
    else if (!std::strcmp(argv[i], "--client-cpu")) ccpu = v;
    else if (!std::strcmp(argv[i], "--server-cpu")) scpu = v;
    else { std::fprintf(stderr, "tcp_bench: unknown option %s\n", argv[i]); return 2; }
  }
  if (iters < 100 || req < 1 || resp < 1 || rounds < 1 || bulk < 4096) return 2;
  int ls = socket(AF_INET, SOCK_STREAM, 0);
  if (ls < 0) die("socket");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t alen = sizeof a;
  if (bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof a) || listen(ls, 1) ||
      getsockname(ls, reinterpret_cast<sockaddr*>(&a), &alen))
    die("bind/listen");
  std::vector<char> buf(std::max<size_t>(bulk, std::max(req, resp)));
  pid_t child = fork();
  if (child < 0) die("fork");
  if (child == 0) {  // server: echo phase, then bulk phase
    pin(static_cast<int>(scpu));
    int fd = accept(ls, nullptr, nullptr);
    if (fd < 0) _exit(1);
    nodelay(fd);
    for (long i = 0; i < iters + iters / 10; i++) {
      if (!full_read(fd, buf.data(), req)) _exit(1);
      full_write(fd, buf.data(), resp);
    }
    char ack = 1;
    for (long r = 0; r <= rounds; r++) {
      if (!full_read(fd, buf.data(), bulk)) _exit(1);  // client -> server
      full_write(fd, &ack, 1);
      full_write(fd, buf.data(), bulk);                 // server -> client
    }
    _exit(0);
  }
  pin(static_cast<int>(ccpu));
  close(ls);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a)) die("connect");
  nodelay(fd);
  std::vector<double> lat;
  lat.reserve(iters);
  for (long i = 0; i < iters + iters / 10; i++) {
    auto t0 = Clock::now();
    full_write(fd, buf.data(), req);
    if (!full_read(fd, buf.data(), resp)) die("read");
    if (i >= iters / 10) lat.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count());
  }
  std::vector<double> up, down;
  std::memset(buf.data(), 0x3c, bulk);
  for (long r = 0; r <= rounds; r++) {
    auto t0 = Clock::now();
    full_write(fd, buf.data(), bulk);
    char ack;
    if (!full_read(fd, &ack, 1)) die("read");
    double u = std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
    t0 = Clock::now();
    if (!full_read(fd, buf.data(), bulk)) die("read");
    double d = std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
    if (r > 0) { up.push_back(bulk / u); down.push_back(bulk / d); }
  }
  close(fd);
  int st = 0;
  waitpid(child, &st, 0);
  std::printf("tcp_rtt_p50_ns=%.0f\ntcp_rtt_p99_ns=%.0f\ntcp_bulk_up_gbs=%.3f\ntcp_bulk_down_gbs=%.3f\n",
              pct(lat, 0.5), pct(lat, 0.99), pct(up, 0.5), pct(down, 0.5));
  return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}
