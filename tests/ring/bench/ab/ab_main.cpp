// ring-ab: the round trip of two builds of shm-ring (A and B) against the
// bare cache-line floor, in one process pair, in alternating blocks.
//
// This VM's two vCPUs move between placements (floor 50-480 ns) and a
// binary's own code layout shifts its figures; two benchmark binaries run
// one after the other cannot tell a 10 ns change. Here both builds live in
// one binary (ab.sh compiles each with its namespace renamed) and see the
// same placement block by block; running it twice with A and B swapped
// cancels the layout effect.
//
// A round trip that follows the previous one at once phase-locks with the
// peer's pause loop (a PAUSE takes ~25 ns here): its p50 sits on a step of
// a staircase, and a change of a few ns in software moves it by a whole
// step or not at all (a build with a 16-byte request measured 20 ns slower
// than one with a 64-byte request). With dithering on, a random untimed
// delay of 0-255 loop turns (up to ~70 ns, more than a PAUSE) before each
// sample draws the phase at random; the means (p10-p90) then compare the
// builds' real costs.
//
//   ring-ab [blocks] [dither 0|1]   prints: bare=p50/mean A=p50/mean(ratio) B=...
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <x86intrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

// Provided by ab_variant.cpp, once per build (prefix va_ / vb_).
#define WH_AB_DECL(X)                   \
  void* X##_setup();                   \
  void X##_claim(void*);               \
  int X##_serve(void*, int n);         \
  bool X##_call(void*);
WH_AB_DECL(va)
WH_AB_DECL(vb)

namespace {
void pin(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  sched_setaffinity(0, sizeof s, &s);
}
uint64_t ld(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
void st(uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
}  // namespace

int main(int argc, char** argv) {
  const int blocks = argc > 1 ? std::atoi(argv[1]) : 30;
  const bool dither = argc > 2 && std::atoi(argv[2]) != 0;
  uint64_t rng = 88172645463325252ull;  // xorshift64
  constexpr int kBlock = 10000;
  struct Ctl {  // each word in its own pair of lines
    alignas(128) uint64_t ping;
    alignas(128) uint64_t pong;
    alignas(128) uint64_t mode;
  };
  auto* c = static_cast<Ctl*>(
      mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  void* a = va_setup();
  void* b = vb_setup();
  auto t0 = std::chrono::steady_clock::now();
  uint64_t c0 = __rdtsc();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const double ns_per_tick =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() /
      double(__rdtsc() - c0);
  pid_t child = fork();
  if (child == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    pin(1);
    for (int blk = 0; blk < blocks; blk++)
      for (int v = 0; v < 3; v++) {
        while (ld(&c->mode) != uint64_t(blk * 3 + v + 1)) _mm_pause();
        if (v == 0) {
          for (int k = 0; k <= kBlock; k++) {
            uint64_t want = uint64_t(blk) * 1000000 + k + 1;
            while (ld(&c->ping) != want) _mm_pause();
            st(&c->pong, want);
          }
        } else if ((v == 1 ? va_serve(a, kBlock + 1) : vb_serve(b, kBlock + 1)) != 0) {
          _exit(1);
        }
      }
    _exit(0);
  }
  pin(0);
  va_claim(a);
  vb_claim(b);
  std::vector<uint64_t> s[3];
  for (int blk = 0; blk < blocks; blk++)
    for (int v = 0; v < 3; v++) {
      st(&c->mode, uint64_t(blk * 3 + v + 1));
      for (int k = 0; k <= kBlock; k++) {  // the first of each block is untimed
        if (dither) {
          rng ^= rng << 13;
          rng ^= rng >> 7;
          rng ^= rng << 17;
          for (uint32_t d = 0; d < uint32_t(rng & 255); d++) asm volatile("" ::: "memory");
        }
        uint64_t t = __rdtsc();
        if (v == 0) {
          uint64_t want = uint64_t(blk) * 1000000 + k + 1;
          st(&c->ping, want);
          while (ld(&c->pong) != want) _mm_pause();
        } else if (!(v == 1 ? va_call(a) : vb_call(b))) {
          std::fprintf(stderr, "call failed\n");
          return 1;
        }
        if (k) s[v].push_back(__rdtsc() - t);
      }
    }
  int st_child = 0;
  waitpid(child, &st_child, 0);
  const char* names[] = {"bare", "A", "B"};
  double bare = 0;
  for (int v = 0; v < 3; v++) {
    auto& x = s[v];
    std::sort(x.begin(), x.end());
    double p50 = double(x[x.size() / 2]) * ns_per_tick, mean = 0;
    size_t lo = x.size() / 10, hi = x.size() * 9 / 10;  // mean of p10..p90
    for (size_t i = lo; i < hi; i++) mean += double(x[i]);
    mean = mean / double(hi - lo) * ns_per_tick;
    if (v == 0) bare = p50;
    std::printf("%s=%.0f/%.0f(%.2f) ", names[v], p50, mean, p50 / bare);
  }
  std::printf("\n");
  return WIFEXITED(st_child) && WEXITSTATUS(st_child) == 0 ? 0 : 1;
}
