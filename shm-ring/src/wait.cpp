// Waiting (spin, yield, sleep on a futex/doorbell or poll) and liveness.
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "atomics.hpp"
#include "wormhole/ring.hpp"

namespace wh::ring {

namespace {
// Shared (not PRIVATE) futexes: the word lives in memory another process maps.
class FutexDoorbell final : public Doorbell {
 public:
  void ring(uint32_t* bell) override {
    syscall(SYS_futex, bell, FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
  }
  void wait(uint32_t* bell, uint32_t seen, std::chrono::microseconds timeout) override {
    timespec ts{};
    ts.tv_sec = timeout.count() / 1000000;
    ts.tv_nsec = (timeout.count() % 1000000) * 1000;
    syscall(SYS_futex, bell, FUTEX_WAIT, seen, &ts, nullptr, 0);
  }
};
}  // namespace

Doorbell* futex_doorbell() {
  // Never destroyed: channels say goodbye from atexit handlers, which may
  // run after function-local statics constructed later are gone.
  static FutexDoorbell* d = new FutexDoorbell();
  return d;
}

WaitPolicy WaitPolicy::from_env() {
  WaitPolicy p;
  if (const char* e = std::getenv("WORMHOLE_WAIT")) {
    if (!std::strcmp(e, "spin")) {
      p.sleep = Sleep::Poll;
      p.spin_iters = UINT32_MAX;
    } else if (!std::strcmp(e, "poll")) {
      p.sleep = Sleep::Poll;
    }
  }
  if (const char* e = std::getenv("WORMHOLE_SPIN")) p.spin_iters = uint32_t(std::strtoul(e, nullptr, 10));
  if (const char* e = std::getenv("WORMHOLE_HOT_POLLS"))
    p.hot_polls = uint32_t(std::strtoul(e, nullptr, 10));
  if (const char* e = std::getenv("WORMHOLE_FAR_POLLS"))
    p.far_polls = uint32_t(std::strtoul(e, nullptr, 10));
  return p;
}

bool wait_until(const WaitPolicy& pol, uint32_t* sleeping, uint32_t* bell,
                const std::function<bool()>& ready, Clock::time_point deadline) {
  for (uint32_t i = 0; i < pol.spin_iters; i++) {
    if (ready()) return true;
    poll_relax(i, pol.hot_polls);
    // Check the clock rarely: it costs more than a pause.
    if ((i & 1023) == 1023 && Clock::now() >= deadline) return false;
  }
  for (uint32_t i = 0; i < pol.yield_iters; i++) {
    if (ready()) return true;
    sched_yield();
  }
  uint32_t backoff_us = 1;
  for (;;) {
    if (ready()) return true;
    auto now = Clock::now();
    if (now >= deadline) return false;
    // Never sleep long: the caller re-checks liveness between waits.
    auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - now);
    auto slice = std::min<std::chrono::microseconds>(left, std::chrono::milliseconds(20));
    if (pol.sleep == WaitPolicy::Sleep::Poll || !sleeping || !bell) {
      std::this_thread::sleep_for(std::min<std::chrono::microseconds>(
          slice, std::chrono::microseconds(backoff_us)));
      backoff_us = std::min(backoff_us * 2, pol.poll_max_us);
      continue;
    }
    Doorbell* db = pol.sleep == WaitPolicy::Sleep::Doorbell && pol.doorbell ? pol.doorbell
                                                                            : futex_doorbell();
    // Eventcount: announce, re-check, then sleep only if the bell has not
    // moved. The producer publishes, fences, and rings if it sees us.
    uint32_t seen = load_acq(bell);
    store_relaxed(sleeping, 1u);
    full_fence();
    if (ready()) {
      store_relaxed(sleeping, 0u);
      return true;
    }
    db->wait(bell, seen, slice);
    store_relaxed(sleeping, 0u);
  }
}

void LightMutex::lock_slow() {
  // Spin a little first: the holder of a channel's mutex keeps it for a
  // few hundred ns at most, less than a sleep and a wake-up cost.
  for (int i = 0; i < 64; i++) {
    cpu_relax();
    if (state_.load(std::memory_order_relaxed) != 1 && try_lock()) return;
  }
  // Mark it contended (2) whenever we take it or wait: the unlock that sees
  // 2 wakes one sleeper, which retakes it as 2 (there may be others).
  uint32_t c = state_.exchange(2, std::memory_order_acquire);
  while (c != 0) {
    if (c == kBiased) {  // taken over from a bias (granted meanwhile)
      bias_->revoke();
      return;
    }
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&state_), FUTEX_WAIT_PRIVATE, 2u, nullptr,
            nullptr, 0);
    c = state_.exchange(2, std::memory_order_acquire);
  }
}

bool LightMutex::claim_biased() {
  uint32_t s = kBiased;
  while (!state_.compare_exchange_weak(s, 1, std::memory_order_acquire,
                                       std::memory_order_relaxed)) {
    if (s != kBiased && s != 0) return false;  // someone else holds it now
  }
  if (s == kBiased) bias_->revoke();
  return true;
}

// ------------------------------------------------------------- LockBias

namespace {
// The heavy side of the owner/revoker Dekker pair (LockBias::enter):
// every running thread of the process executes a full barrier.
// (Under TSan the pair's accesses are seq_cst instead: LockBias::kDekkerOrder.)
void heavy_fence() {
#if !defined(__SANITIZE_THREAD__)
  syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
#endif
}
// Slots are never freed: a revoker may still read the one it waits on.
// A thread's slot goes back to the pool when the thread exits.
struct SlotPool {
  std::mutex mu;
  std::vector<LockBias::Slot*> free;
};
SlotPool& slot_pool() {
  static SlotPool* p = new SlotPool();
  return *p;
}
// Handed to threads that ask after their thread-locals were destroyed:
// never granted a bias (note_uncontended refuses it).
LockBias::Slot g_exiting_slot;
}  // namespace

LockBias::Slot* LockBias::new_slot() {
  struct Holder {
    Slot* slot = nullptr;
    bool gone = false;
    ~Holder() {
      gone = true;
      tl_slot_ = &g_exiting_slot;
      if (!slot) return;
      std::lock_guard lk(slot_pool().mu);
      slot_pool().free.push_back(slot);
    }
  };
  static thread_local Holder holder;
  if (holder.gone) return &g_exiting_slot;
  Slot* s;
  {
    std::lock_guard lk(slot_pool().mu);
    auto& f = slot_pool().free;
    if (f.empty()) {
      s = new Slot();
    } else {
      s = f.back();
      f.pop_back();
    }
  }
  holder.slot = s;
  tl_slot_ = s;
  return s;
}

bool LockBias::supported() {
  static const bool ok = [] {
    if (const char* e = std::getenv("WORMHOLE_BIAS"); e && !std::strcmp(e, "0")) return false;
#if defined(__SANITIZE_THREAD__)
    return true;
#else
    long q = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    if (q < 0 || !(q & MEMBARRIER_CMD_PRIVATE_EXPEDITED)) return false;
    return syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
#endif
  }();
  return ok;
}

bool LockBias::note_uncontended(Slot* s, LightMutex& a, LightMutex& b) {
  if (run_slot_ != s) {
    run_slot_ = s;
    run_ = 0;
  }
  const uint32_t shift = run_shift_.load(std::memory_order_relaxed);
  if (++run_ < (uint64_t(64) << shift) || s == &g_exiting_slot) return false;
  run_ = 0;
  if (!supported() || !b.try_lock()) return false;
  // Owner first, then the mutexes to state 3: a thread that finds one in
  // state 3 (acquire) sees granted_ and revokes this owner.
  granted_ = s;
  owner_.store(s, std::memory_order_relaxed);
  uint32_t one = 1;
  if (!b.state_.compare_exchange_strong(one, LightMutex::kBiased, std::memory_order_release,
                                        std::memory_order_relaxed)) {
    owner_.store(nullptr, std::memory_order_relaxed);
    b.unlock();  // someone waits for it
    return false;
  }
  one = 1;
  if (!a.state_.compare_exchange_strong(one, LightMutex::kBiased, std::memory_order_release,
                                        std::memory_order_relaxed)) {
    // Someone waits for `a`: no bias. Take `b` back unless a waiter
    // already took it over (it revokes; we are in no call, so at once).
    owner_.store(nullptr, std::memory_order_relaxed);
    uint32_t biased = LightMutex::kBiased;
    if (b.state_.compare_exchange_strong(biased, 1, std::memory_order_acquire,
                                         std::memory_order_relaxed))
      b.unlock();
    return false;
  }
  grants_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void LockBias::revoke() {
  Slot* was = owner_.exchange(nullptr, std::memory_order_seq_cst);
  heavy_fence();  // now the owner either saw owner_ null or its busy is visible
  const Slot* s = granted_;
  for (uint32_t i = 0; s && s->busy.load(std::memory_order_seq_cst) == this; i++) {
    // The owner is in a call: it may wait for its reply a while.
    if (i < 1000)
      cpu_relax();
    else if (i < 1100)
      sched_yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  if (was) {
    revocations_.fetch_add(1, std::memory_order_relaxed);
    const uint32_t shift = run_shift_.load(std::memory_order_relaxed);
    if (shift < 14) run_shift_.store(shift + 1, std::memory_order_relaxed);
  }
}

void LightMutex::wake_one() {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&state_), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr,
          0);
}

void PeerMonitor::reset() {
  seen_ = false;
}

bool PeerMonitor::dead() {
  if (!word_) return false;
  auto now = Clock::now();
  uint64_t v = load_acq(word_);
  if (!seen_ || v != last_) {
    seen_ = true;
    last_ = v;
    last_change_ = now;
    return false;
  }
  return now - last_change_ > std::chrono::milliseconds(timeout_ms_);
}

struct Heartbeat::Impl {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::pair<uint64_t*, uint32_t>> words;
  bool stop = false;
  bool paused = false;
  std::thread thr;
  void run() {
    // A starved beater looks like a dead peer. The thread does a few atomic
    // increments every period, so real-time priority costs nothing; where
    // it is not permitted (no CAP_SYS_NICE) it stays an ordinary thread.
    sched_param sp{};
    sp.sched_priority = 1;
    pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
    std::unique_lock lk(mu);
    while (!stop) {
      uint32_t period = 100;
      if (!paused)
        for (auto& [w, p] : words) {
          fetch_add(w, uint64_t(1));
          period = std::min(period, p);
        }
      cv.wait_for(lk, std::chrono::milliseconds(std::max<uint32_t>(period / 2, 5)));
    }
  }
};

namespace {
// Atomic: a thread may fork (and run the handlers below) while another
// thread constructs the heartbeat; glibc orders the two with a lock that
// TSan cannot see, so say it in the language.
std::atomic<Heartbeat*> g_heartbeat{nullptr};
}  // namespace

// fork() copies only the calling thread: in the child the beating thread is
// gone, its std::thread handle still looks joinable (so add() would never
// start a new one) and its mutex may be held. The parent's words are the
// parent's to beat, not the child's. So: hold the mutex across fork, and in
// the child start over with a fresh Impl (the old one is leaked on purpose:
// destroying a joinable std::thread terminates).
Heartbeat::Heartbeat() : impl_(std::make_unique<Impl>()) {
  g_heartbeat.store(this, std::memory_order_release);
  pthread_atfork(
      [] {
        if (Heartbeat* hb = g_heartbeat.load(std::memory_order_acquire)) hb->impl_->mu.lock();
      },
      [] {
        if (Heartbeat* hb = g_heartbeat.load(std::memory_order_acquire)) hb->impl_->mu.unlock();
      },
      [] {
        Heartbeat* hb = g_heartbeat.load(std::memory_order_acquire);
        if (!hb) return;
        (void)hb->impl_.release();
        hb->impl_ = std::make_unique<Impl>();
      });
}
Heartbeat::~Heartbeat() {
  g_heartbeat.store(nullptr, std::memory_order_release);
  {
    std::lock_guard lk(impl_->mu);
    impl_->stop = true;
  }
  impl_->cv.notify_all();
  if (impl_->thr.joinable()) impl_->thr.join();
}

Heartbeat& Heartbeat::instance() {
  static Heartbeat hb;
  return hb;
}

void Heartbeat::add(uint64_t* word, uint32_t period_ms) {
  std::lock_guard lk(impl_->mu);
  fetch_add(word, uint64_t(1));
  impl_->words.emplace_back(word, period_ms);
  if (!impl_->thr.joinable()) impl_->thr = std::thread([this] { impl_->run(); });
}

void Heartbeat::remove(uint64_t* word) {
  std::lock_guard lk(impl_->mu);
  std::erase_if(impl_->words, [&](auto& e) { return e.first == word; });
}

void Heartbeat::pause_for_test(bool paused) {
  std::lock_guard lk(impl_->mu);
  impl_->paused = paused;
}

}  // namespace wh::ring
