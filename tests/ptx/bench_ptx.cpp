// make bench-ptx: a fixed kernel mix on one core and on all cores.
// Last line: ptx_thread_instr_per_s_1core=<n> ptx_thread_instr_per_s_all=<m>
#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "wormhole/ptx/engine.hpp"

using namespace wh::ptx;

namespace {
struct Mem : DeviceMemory {
  std::map<uint64_t, std::vector<uint8_t>> a;
  uint64_t next = 0x7000'0000'0000ull;
  uint64_t alloc(size_t n) {
    uint64_t b = next;
    next += ((n + 255) & ~size_t(255)) + 4096;
    a[b].assign(n, 0);
    return b;
  }
  template <class T>
  uint64_t upload(const std::vector<T>& v) {
    uint64_t b = alloc(v.size() * sizeof(T));
    std::memcpy(a[b].data(), v.data(), v.size() * sizeof(T));
    return b;
  }
  uint8_t* translate(uint64_t addr, uint64_t len, bool) override {
    auto it = a.upper_bound(addr);
    if (it == a.begin()) return nullptr;
    --it;
    uint64_t off = addr - it->first;
    if (off > it->second.size() || len > it->second.size() - off) return nullptr;
    return it->second.data() + off;
  }
  bool region(uint64_t addr, Region& r) override {
    auto it = a.upper_bound(addr);
    if (it == a.begin()) return false;
    --it;
    r = {it->first, it->second.size(), it->second.data(), true};
    return true;
  }
};

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

struct Launch {
  const Module* m;
  std::string kernel;
  LaunchConfig cfg;
  std::vector<uint8_t> params;
};

template <class... A>
Launch mk(const Module& m, const char* k, Dim3 g, Dim3 b, uint32_t dyn, A... args) {
  const KernelInfo* ki = m.kernel(k);
  if (!ki) { fprintf(stderr, "no kernel %s\n", k); exit(1); }
  Launch l{&m, k, {g, b, dyn}, std::vector<uint8_t>(ki->param_bytes)};
  size_t i = 0;
  auto put = [&](auto v) {
    std::memcpy(l.params.data() + ki->params[i].offset, &v, sizeof v);
    ++i;
  };
  (put(args), ...);
  return l;
}

// The shortest of three runs of f, in seconds.
template <class F>
double best_of_3(F&& f) {
  double t = 1e30;
  for (int r = 0; r < 3; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    t = std::min(t, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return t;
}
}  // namespace

int main(int argc, char** argv) {
  std::string dir = argc > 1 ? argv[1] : WH_PTX_KERNEL_DIR;
  double min_s = argc > 2 ? atof(argv[2]) : 0.5;
  std::string err;
  auto ml = Module::from_ptx(slurp(dir + "/ml.ptx"), &err);
  auto la = Module::from_ptx(slurp(dir + "/linalg.ptx"), &err);
  if (!ml || !la) { fprintf(stderr, "load: %s\n", err.c_str()); return 1; }
  Mem mem;
  const int n = 1 << 20;
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; ++i) { x[i] = float(i % 1000) * 0.001f - 0.5f; y[i] = float(i % 777) * 0.002f; }
  uint64_t dx = mem.upload(x), dy = mem.upload(y), dz = mem.alloc(n * 4), dv = mem.alloc(n * 4), dacc = mem.alloc(64);
  std::vector<uint8_t> bytes(n);
  for (int i = 0; i < n; ++i) bytes[i] = uint8_t((i * 2654435761u) >> 24);
  uint64_t db = mem.upload(bytes), dbins = mem.alloc(256 * 4);
  const int M = 128;
  uint64_t dA = mem.upload(std::vector<float>(x.begin(), x.begin() + M * M)), dB = mem.upload(std::vector<float>(y.begin(), y.begin() + M * M)),
           dC = mem.alloc(M * M * 4);
  std::vector<Launch> mix = {
      mk(*ml, "vector_add", {n / 256}, {256}, 0, dx, dy, dz, n),
      mk(*ml, "sgd_momentum", {n / 256}, {256}, 0, dx, dv, dy, 0.01f, 0.9f, 1e-4f, n),
      mk(*ml, "softmax_rows", {256}, {128}, 0, dx, dz, 1024),
      mk(*la, "matmul_tiled", {M / 16, M / 16}, {16, 16}, 0, dA, dB, dC, M, M, M),
      mk(*la, "warp_reduce", {n / 256}, {256}, 0, dx, dacc, n),
      mk(*la, "block_reduce", {n / 512}, {256}, 256 * 4, dx, dz, n),
      mk(*la, "histogram", {64}, {256}, 0, db, dbins, n),
  };
  double rate[2] = {0, 0};
  unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  for (int pass = 0; pass < 2; ++pass) {
    unsigned th = pass == 0 ? 1 : hw;
    Engine eng(th);
    uint64_t tot_instr = 0;
    double tot_time = 0;
    for (auto& l : mix) {
      // warm up once, then repeat for at least min_s seconds
      LaunchError e = eng.launch(*l.m, l.kernel, l.cfg, l.params.data(), l.params.size(), mem);
      if (e) { fprintf(stderr, "%s: %s\n", l.kernel.c_str(), e.message.c_str()); return 1; }
      uint64_t i0 = eng.instructions_executed();
      auto t0 = std::chrono::steady_clock::now();
      int reps = 0;
      double el = 0;
      do {
        eng.launch(*l.m, l.kernel, l.cfg, l.params.data(), l.params.size(), mem);
        ++reps;
        el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      } while (el < min_s);
      uint64_t di = eng.instructions_executed() - i0;
      tot_instr += di;
      tot_time += el;
      printf("%-14s threads=%-2u launches=%-4d thread_instr=%-12llu %.3g thread-instr/s\n", l.kernel.c_str(), th, reps,
             (unsigned long long)di, double(di) / el);
    }
    rate[pass] = double(tot_instr) / tot_time;
  }
  // The tiled SGEMM kernel at n=256 on one worker against the same arithmetic
  // as a plain loop nest compiled for the host (-O2), one thread each.
  {
    const int S = 256;
    std::vector<float> a(x.begin(), x.begin() + S * S), b(y.begin(), y.begin() + S * S), c(S * S);
    uint64_t sA = mem.upload(a), sB = mem.upload(b), sC = mem.alloc(S * S * 4);
    Launch l = mk(*la, "matmul_tiled", {S / 16, S / 16}, {16, 16}, 0, sA, sB, sC, S, S, S);
    Engine eng(1);
    double dev = best_of_3([&] { eng.launch(*l.m, l.kernel, l.cfg, l.params.data(), l.params.size(), mem); });
    double host = best_of_3([&] {
      for (int i = 0; i < S; ++i)
        for (int j = 0; j < S; ++j) {
          float acc = 0.f;
          for (int k = 0; k < S; ++k) acc += a[size_t(i) * S + k] * b[size_t(k) * S + j];
          c[size_t(i) * S + j] = acc;
        }
      asm volatile("" : : "r"(c.data()) : "memory");
    });
    std::vector<float> got(S * S);
    std::memcpy(got.data(), mem.a[sC].data(), got.size() * 4);
    double maxerr = 0;
    for (int i = 0; i < S * S; ++i) maxerr = std::max(maxerr, double(std::fabs(got[i] - c[i])));
    printf("sgemm_256_device_ms=%.2f sgemm_256_host_loop_ms=%.2f ratio=%.2f max_abs_diff=%.2g\n", dev * 1e3, host * 1e3, dev / host,
           maxerr);
  }
  // The same product with tensor cores (wmma, bf16 in, f32 accumulation) against the host
  // loop nest over the same bf16 values; exact products added in k order, so equal bits.
  {
    const int S = 256;
    auto bf16 = [](float f) { return uint16_t(std::bit_cast<uint32_t>(f) >> 16); };
    auto fl = [](uint16_t h) { return std::bit_cast<float>(uint32_t(h) << 16); };
    std::vector<uint16_t> a(S * S), b(S * S);
    for (int i = 0; i < S * S; ++i) a[i] = bf16(x[i]), b[i] = bf16(y[i]);
    std::vector<float> c(S * S);
    uint64_t sA = mem.upload(a), sB = mem.upload(b), sC = mem.alloc(S * S * 4);
    Launch l = mk(*la, "matmul_wmma_bf16", {S * S / 256 / 4}, {128}, 0, sA, sB, sC, S, S, S);
    Engine eng(1);
    LaunchError e;
    double dev = best_of_3([&] { e = eng.launch(*l.m, l.kernel, l.cfg, l.params.data(), l.params.size(), mem); });
    if (e) { fprintf(stderr, "matmul_wmma_bf16: %s\n", e.message.c_str()); return 1; }
    double host = best_of_3([&] {
      for (int i = 0; i < S; ++i)
        for (int j = 0; j < S; ++j) {
          float acc = 0.f;
          for (int k = 0; k < S; ++k) acc += fl(a[size_t(i) * S + k]) * fl(b[size_t(k) * S + j]);
          c[size_t(i) * S + j] = acc;
        }
      asm volatile("" : : "r"(c.data()) : "memory");
    });
    int differ = std::memcmp(mem.a[sC].data(), c.data(), c.size() * 4) != 0;
    printf("wmma_bf16_256_device_ms=%.2f wmma_bf16_256_host_loop_ms=%.2f ratio=%.2f device_gflops=%.2f bits_differ=%d\n", dev * 1e3,
           host * 1e3, dev / host, 2.0 * S * S * S / dev * 1e-9, differ);
    if (differ) return 1;
  }
  printf("ptx_thread_instr_per_s_1core=%.3g ptx_thread_instr_per_s_all=%.3g\n", rate[0], rate[1]);
  return 0;
}
