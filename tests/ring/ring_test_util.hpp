// Helpers shared by the shm-ring tests: guarded mappings, fork helpers,
// message-count scaling under sanitizers.
#pragma once
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <span>
#include <string>

#include "wormhole/ring.hpp"

#ifndef WH_RING_TEST_SCALE
#define WH_RING_TEST_SCALE 1  // divide message counts by this (sanitizer builds)
#endif

namespace wh::ring::test {

inline constexpr uint64_t scaled(uint64_t n) {
  return n / WH_RING_TEST_SCALE ? n / WH_RING_TEST_SCALE : 1;
}

using ms = std::chrono::milliseconds;
using us = std::chrono::microseconds;

inline std::span<const uint8_t> bytes(const void* p, size_t n) {
  return {static_cast<const uint8_t*>(p), n};
}

// A shared memfd mapped between two PROT_NONE guard areas: any access
// outside [base, base+size) faults, in this process and in forked children.
struct GuardedMap {
  uint8_t* base = nullptr;
  size_t size = 0;
  int fd = -1;
  uint8_t* resv = nullptr;
  size_t resv_size = 0;
  static constexpr size_t kGuard = 64 * 1024;

  explicit GuardedMap(size_t sz) : size(sz) {
    fd = memfd_create("wh-guarded", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, off_t(sz)) != 0) std::abort();
    resv_size = sz + 2 * kGuard;
    void* r = mmap(nullptr, resv_size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (r == MAP_FAILED) std::abort();
    resv = static_cast<uint8_t*>(r);
    void* m = mmap(resv + kGuard, sz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
    if (m == MAP_FAILED) std::abort();
    base = static_cast<uint8_t*>(m);
  }
  ~GuardedMap() {
    if (resv) munmap(resv, resv_size);
    if (fd >= 0) close(fd);
  }
  GuardedMap(const GuardedMap&) = delete;
  GuardedMap& operator=(const GuardedMap&) = delete;
};

// fork() a child running fn; the child's exit code is fn's result. The child
// dies with the parent (PR_SET_PDEATHSIG) so a failed test leaves no orphan.
inline pid_t fork_child(const std::function<int()>& fn) {
  pid_t parent = getpid();
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(99);
    int rc = 98;
    try {
      rc = fn();
    } catch (...) {
      rc = 97;
    }
    fflush(stdout);
    fflush(stderr);
    _exit(rc);
  }
  return pid;
}

// Waits for a child up to timeout; kills it on timeout. Returns its exit
// code, 128+signal if signalled, -1 on timeout.
inline int wait_child(pid_t pid, std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int st = 0;
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid) {
      if (WIFEXITED(st)) return WEXITSTATUS(st);
      if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
      return -2;
    }
    if (r < 0) return -3;
    if (std::chrono::steady_clock::now() >= deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      return -1;
    }
    usleep(1000);
  }
}

// FNV-1a, the checksum carried by stress messages.
inline uint64_t fnv1a(const uint8_t* p, size_t n, uint64_t h = 1469598103934665603ull) {
  for (size_t i = 0; i < n; i++) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

inline RegionConfig small_config(uint32_t ring = 1u << 16, uint32_t nchan = 1) {
  RegionConfig c;
  c.nchan = nchan;
  c.req_size = ring;
  c.resp_size = ring;
  c.data_size = 4096;
  c.hb_period_ms = 50;
  c.hb_timeout_ms = 400;
  return c;
}

// A wait policy that sleeps on the futex quickly: tests oversubscribe two
// cores and must not burn them spinning.
inline WaitPolicy test_policy() {
  WaitPolicy p;
  p.spin_iters = 200;
  p.yield_iters = 4;
  p.sleep = WaitPolicy::Sleep::Futex;
  return p;
}

}  // namespace wh::ring::test
