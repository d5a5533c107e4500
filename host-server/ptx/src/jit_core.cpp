// The engine's side of the PTX compiler (jit.hpp): what the compiler knows of
// each handler, when a kernel is compiled, the compiled tables and their
// statistics. The code generator (jit.cpp, LLVM) is a plugin,
// libwormhole-ptx-jit.so, loaded at the first compile: a server without it
// (or without LLVM's library) interprets every kernel.
#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <thread>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unordered_map>

#include "jit.hpp"

namespace wh::ptx::detail {

namespace {

std::mutex g_catalog_mu;
std::unordered_map<Handler, JitDesc>& catalog() {
  static auto* m = new std::unordered_map<Handler, JitDesc>;
  return *m;
}
const JitDesc* describe(Handler h) {
  std::lock_guard lk(g_catalog_mu);
  auto it = catalog().find(h);
  return it == catalog().end() ? nullptr : &it->second;
}

std::mutex g_stats_mu;
JitStats g_stats;

// WORMHOLE_PTX_JIT_LIB, else beside the server as installed
// (bin/../<libdir>/wormhole-server/), else where the build tree made it.
const JitBackend* backend(std::string* why) {
  static const JitBackend* b = nullptr;
  static std::string failure;
  static std::once_flag once;
  std::call_once(once, [] {
    std::vector<std::string> paths;
    if (const char* e = std::getenv("WORMHOLE_PTX_JIT_LIB")) paths.push_back(e);
    char exe[PATH_MAX];
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
      std::string dir(exe, size_t(n));
      dir.resize(dir.rfind('/') + 1);
      paths.push_back(dir + WH_PTX_JIT_INSTALL_REL);
    }
    paths.push_back(WH_PTX_JIT_BUILD_PATH);
    for (const std::string& p : paths) {
      if (access(p.c_str(), R_OK) != 0) continue;
      void* h = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!h) {
        failure = dlerror();
        continue;
      }
      auto get = reinterpret_cast<const JitBackend* (*)()>(dlsym(h, "wh_ptx_jit_backend"));
      if (get && (b = get())) return;
      failure = p + ": no wh_ptx_jit_backend";
    }
    if (failure.empty()) failure = "libwormhole-ptx-jit.so not found";
  });
  if (!b && why) *why = failure;
  return b;
}

}  // namespace

void jit_note(Handler h, const JitDesc& d) {
  std::lock_guard lk(g_catalog_mu);
  catalog()[h] = d;
}

JitMode jit_mode() {
  static const JitMode mode = [] {
    const char* v = std::getenv("WORMHOLE_PTX_JIT");
    std::string s = v ? v : "";
    if (s == "0" || s == "off") return JitMode::Off;
    if (s == "1" || s == "on" || s == "always") return JitMode::Always;
    if (s == "compare") return JitMode::Compare;
    if (!s.empty() && s != "auto")
      std::fprintf(stderr, "wormhole: WORMHOLE_PTX_JIT=%s: expected off, auto, always or compare; using auto\n", v);
    return JitMode::Auto;
  }();
  return mode;
}

JitStats jit_stats() {
  std::lock_guard lk(g_stats_mu);
  return g_stats;
}

JitState::~JitState() {
  if (tracker)
    if (const JitBackend* b = backend(nullptr)) b->release(tracker);  // frees the module's code
}

void jit_account(const ModuleImpl& M, const KernelData& kd, uint64_t ns) {
  if (!M.jit || M.jit->table[kd.func].load(std::memory_order_relaxed)) return;
  M.jit->interp_ns[&kd - M.kdata.data()].fetch_add(ns, std::memory_order_relaxed);
}

namespace {
void compile_kernel(const ModuleImpl& M, const KernelData& kd);

// The background compiler: one thread for the process, fed a queue of
// (module, kernel). At exit, the compile in progress must end before any
// static object it may use is destroyed: exit handlers run newest first, so
// one is registered before each compile (after everything that compiles
// before it made); it drops what is queued and waits for the compile.
void stop_background();
struct Background {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::pair<std::shared_ptr<const ModuleImpl>, uint32_t>> queue;
  bool busy = false, stopping = false;

  void run() {
    std::unique_lock lk(mu);
    for (;;) {
      cv.wait(lk, [&] { return stopping || !queue.empty(); });
      if (stopping) break;
      auto [m, k] = std::move(queue.front());
      queue.pop_front();
      busy = true;
      lk.unlock();
      std::atexit(stop_background);
      compile_kernel(*m, m->kdata[k]);
      m->jit->compiling.store(false, std::memory_order_release);
      m.reset();  // a module unloaded meanwhile is freed here
      lk.lock();
      busy = false;
      cv.notify_all();
    }
  }
  void stop() {
    decltype(queue) dropped;
    std::unique_lock lk(mu);
    stopping = true;
    dropped.swap(queue);
    cv.notify_all();
    cv.wait(lk, [&] { return !busy; });
    lk.unlock();
  }
};

std::atomic<Background*> g_background{nullptr};  // set once made (jit_busy)
Background* background() {
  static Background* bg = [] () -> Background* {
    if (!backend(nullptr)) return nullptr;
    auto* b = new Background;  // never destroyed: the thread may outlive every static
    std::thread([b] { b->run(); }).detach();
    g_background.store(b, std::memory_order_release);
    return b;
  }();
  return bg;
}
void stop_background() { background()->stop(); }
}  // namespace

bool jit_busy() {
  Background* b = g_background.load(std::memory_order_acquire);
  if (!b) return false;
  std::lock_guard lk(b->mu);
  return b->busy || !b->queue.empty();
}

void jit_prepare(const ModuleImpl& M, const KernelData& kd, bool force) {
  const JitMode mode = jit_mode();
  if ((mode == JitMode::Off && !force) || !M.jit) return;
  JitState& S = *M.jit;
  const size_t k = &kd - M.kdata.data();
  if (S.table[kd.func].load(std::memory_order_acquire) || S.failed[k].load(std::memory_order_relaxed)) return;
  const uint64_t interp = S.interp_ns[k].load(std::memory_order_relaxed);
  if (mode != JitMode::Auto || force) {
    compile_kernel(M, kd);  // now (after a background compile of the module, which holds S.mu)
    return;
  }
  if (interp < kJitAutoNs) return;
  uint64_t ninst = 0;
  for (uint32_t u : kd.funcs)
    if (!S.table[u].load(std::memory_order_relaxed)) ninst += M.funcs[u].code.size();
  if (interp < 2 * ninst * kJitNsPerInst) return;
  Background* bg = background();
  if (!bg) {
    compile_kernel(M, kd);  // says once why nothing compiles
    return;
  }
  if (S.compiling.exchange(true, std::memory_order_acq_rel)) return;  // another kernel of the module is compiling
  std::lock_guard lk(bg->mu);
  if (bg->stopping) return;
  bg->queue.emplace_back(M.shared_from_this(), uint32_t(k));
  bg->cv.notify_all();
}

namespace {

// Compiles the kernel and what it may call, not compiled yet, and publishes the code.
void compile_kernel(const ModuleImpl& M, const KernelData& kd) {
  JitState& S = *M.jit;
  const size_t k = &kd - M.kdata.data();
  std::lock_guard lk(S.mu);
  if (S.table[kd.func].load(std::memory_order_acquire)) return;
  // the kernel and everything it may call (directly or through a pointer), not compiled yet
  std::vector<uint32_t> funcs;
  for (uint32_t u : kd.funcs)
    if (!S.table[u].load(std::memory_order_relaxed)) funcs.push_back(u);
  uint64_t ninst = 0;
  for (uint32_t f : funcs) ninst += M.funcs[f].code.size();
  std::string why;
  const JitBackend* b = backend(&why);
  if (!b) {
    static std::once_flag once;
    std::call_once(once, [&] { std::fprintf(stderr, "wormhole: PTX compiler unavailable (%s); interpreting\n", why.c_str()); });
    return;
  }
  // One compile at a time in the process: LLJIT's compiler and the optimizer's
  // target machine are shared and not safe to use from two threads (sessions).
  static std::mutex compile_mu;
  std::lock_guard clk(compile_mu);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::unique_ptr<JitEntry[]>> tables;
  if (!b->compile(M, funcs, describe, tables, &S.tracker, &why)) {
    // Once per kernel: a compile that failed would fail again.
    S.failed[k].store(true, std::memory_order_relaxed);
    std::fprintf(stderr, "wormhole: PTX compiler: kernel %s: %s; it is interpreted\n", M.funcs[kd.func].name.c_str(),
                 why.c_str());
    return;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (size_t i = 0; i < funcs.size(); ++i) {
    S.table[funcs[i]].store(tables[i].get(), std::memory_order_release);
    S.owned.push_back(std::move(tables[i]));
  }
  std::lock_guard sl(g_stats_mu);
  g_stats.seconds += secs;
  g_stats.kernels += 1;
  g_stats.functions += funcs.size();
  g_stats.insts += ninst;
}

}  // namespace

}  // namespace wh::ptx::detail
