// Atomic access to plain words of the shared region. The region is raw
// memory shared with another address space (maybe another kernel), so we
// use the compiler's atomic builtins on naturally aligned words instead of
// std::atomic objects, whose layout the ABI header cannot promise.
#pragma once
#include <cstdint>

namespace wh::ring {
template <class T> inline T load_acq(const T* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
template <class T> inline T load_relaxed(const T* p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
template <class T> inline void store_rel(T* p, T v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
template <class T> inline void store_relaxed(T* p, T v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
template <class T> inline bool cas(T* p, T expected, T desired) {
  return __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}
template <class T> inline T fetch_add(T* p, T v) { return __atomic_fetch_add(p, v, __ATOMIC_ACQ_REL); }
// A full (StoreLoad) barrier, for the sleep/wake handshake.
inline void full_fence() {
#if defined(__SANITIZE_THREAD__)
  // GCC's TSan does not model fences; a seq_cst RMW on a shared dummy does.
  static uint32_t dummy;
  __atomic_fetch_add(&dummy, 0u, __ATOMIC_SEQ_CST);
#elif defined(__x86_64__)
  // A locked RMW is a full barrier on x86 and cheaper than mfence (the
  // Linux kernel's smp_mb()); adding 0 leaves the stack word unchanged.
  asm volatile("lock; addl $0, -4(%%rsp)" ::: "memory", "cc");
#else
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
}
}  // namespace wh::ring
