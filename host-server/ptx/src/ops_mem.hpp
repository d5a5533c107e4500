// Memory, atomic, warp-collective and special-register handlers (internal linkage).
#pragma once
#include <chrono>

#include "ops.hpp"

namespace wh::ptx::detail {
namespace {

template <Sp S>
[[gnu::noinline]] uint8_t* lane_ptr_slow(Ctx& c, const Inst& I, int l, uint64_t a, uint32_t sz, bool w) {
  if (a & (sz - 1)) {
    c.set_fault(LaunchError::Misaligned, I,
                "misaligned " + std::to_string(sz) + "-byte " + (w ? "write" : "read") + " at " + sp_name(S) +
                    " address 0x" + [&] { char b[24]; snprintf(b, sizeof b, "%llx", (unsigned long long)a); return std::string(b); }() +
                    " (lane " + std::to_string(l) + ")");
    return nullptr;
  }
  if constexpr (S == Sp::Global || S == Sp::Const) {
    return c.gptr(I, a, sz, w, S);
  } else if constexpr (S == Sp::Shared) {
    if (a >= c.shared_size || sz > c.shared_size - a) {
      c.bad_access(I, a, sz, Sp::Shared, w, "outside the block's shared memory");
      return nullptr;
    }
    return c.shared + a;
  } else if constexpr (S == Sp::Local) {
    if (a >= c.local_stride || sz > c.local_stride - a) {
      c.bad_access(I, a, sz, Sp::Local, w, "outside the thread's local memory");
      return nullptr;
    }
    return c.local + size_t(l) * c.local_stride + a;
  } else if constexpr (S == Sp::KParam) {
    if (w) {
      c.bad_access(I, a, sz, Sp::KParam, w, "kernel parameters are read-only");
      return nullptr;
    }
    if (a >= c.kparam_size || sz > c.kparam_size - a) {
      c.bad_access(I, a, sz, Sp::KParam, w, "outside the kernel parameter buffer");
      return nullptr;
    }
    return const_cast<uint8_t*>(c.kparam + a);
  } else {
    uint64_t hi = a & 0xFFFFFFFF00000000ull;
    if (hi == kSharedWindow) return lane_ptr_slow<Sp::Shared>(c, I, l, a - kSharedWindow, sz, w);
    if (hi == kLocalWindow) return lane_ptr_slow<Sp::Local>(c, I, l, a - kLocalWindow, sz, w);
    if (hi == kParamWindow) {
      if (a >= kLaunchBufs) return c.gptr(I, a, sz, w, Sp::Generic);  // launch buffers, grid workspace: gptr_slow
      return lane_ptr_slow<Sp::KParam>(c, I, l, a - kParamWindow, sz, w);
    }
    return c.gptr(I, a, sz, w, Sp::Generic);
  }
}
// The common cases inline: an aligned global access inside the memory region of the last
// translation (Ctx::rc), an aligned shared access inside the block's shared memory.
// Everything else (other spaces, faults, region changes) out of line.
template <Sp S>
[[gnu::always_inline]] inline uint8_t* lane_ptr(Ctx& c, const Inst& I, int l, uint64_t a, uint32_t sz, bool w) {
  if constexpr (S == Sp::Global) {
    const uint64_t off = a - c.rc.base;
    if (!(a & (sz - 1)) && off < c.rc.size && sz <= c.rc.size - off && (!w || c.rc.writable)) return c.rc.host + off;
  } else if constexpr (S == Sp::Shared) {
    if (!(a & (sz - 1)) && a < c.shared_size && sz <= c.shared_size - a) return c.shared + a;
  }
  return lane_ptr_slow<S>(c, I, l, a, sz, w);
}

template <int SZ, bool SGN>
inline uint64_t load_val(const uint8_t* p) {
  if constexpr (SZ == 1) { uint8_t v = *p; return SGN ? uint64_t(int64_t(int8_t(v))) : v; }
  else if constexpr (SZ == 2) { uint16_t v; std::memcpy(&v, p, 2); return SGN ? uint64_t(int64_t(int16_t(v))) : v; }
  else if constexpr (SZ == 4) { uint32_t v; std::memcpy(&v, p, 4); return SGN ? uint64_t(int64_t(int32_t(v))) : v; }
  else { uint64_t v; std::memcpy(&v, p, 8); return v; }
}
template <int SZ>
inline void store_val(uint8_t* p, uint64_t v) {
  if constexpr (SZ == 1) *p = uint8_t(v);
  else if constexpr (SZ == 2) { uint16_t x = uint16_t(v); std::memcpy(p, &x, 2); }
  else if constexpr (SZ == 4) { uint32_t x = uint32_t(v); std::memcpy(p, &x, 4); }
  else std::memcpy(p, &v, 8);
}

template <Sp S, int SZ, bool SGN, int VEC>
void h_ld(Ctx& c, const Inst& I, uint32_t m) {
  const uint64_t vb = var_base(c, I) + uint64_t(I.aoff);
  uint64_t* D[VEC];
  for (int i = 0; i < VEC; ++i) D[i] = I.d[i] != NOREG ? c.dst(I.d[i]) : nullptr;
  bool uniform = I.areg == NOREG;
  if constexpr (S == Sp::Local) uniform = false;  // local memory differs per lane
  if constexpr (S == Sp::Generic) uniform = uniform && (vb & 0xFFFFFFFF00000000ull) != kLocalWindow;
  if (uniform) {  // uniform address (e.g. ld.param [name+off]): load once, broadcast
    uint8_t* p = lane_ptr<S>(c, I, std::countr_zero(m), vb, SZ * VEC, false);
    if (!p) return;
    for (int i = 0; i < VEC; ++i) {
      if (!D[i]) continue;
      uint64_t v = load_val<SZ, SGN>(p + i * SZ);
      uint64_t* d = D[i];
      for_lanes(m, [&](int l) { d[l] = v; });
    }
    return;
  }
  const uint64_t* AR = I.areg != NOREG ? c.src(I.areg) : nullptr;
  for_lanes_until(m, [&](int l) {
    uint64_t a = (AR ? AR[l] : 0) + vb;
    uint8_t* p = lane_ptr<S>(c, I, l, a, SZ * VEC, false);
    if (!p) return false;
    for (int i = 0; i < VEC; ++i)
      if (D[i]) D[i][l] = load_val<SZ, SGN>(p + i * SZ);
    return true;
  });
}

template <Sp S, int SZ, int VEC>
void h_st(Ctx& c, const Inst& I, uint32_t m) {
  const uint64_t vb = var_base(c, I) + uint64_t(I.aoff);
  const uint64_t* AR = I.areg != NOREG ? c.src(I.areg) : nullptr;
  const uint64_t* V[VEC];
  for (int i = 0; i < VEC; ++i) V[i] = c.src(I.s[i]);
  for_lanes_until(m, [&](int l) {
    uint64_t a = (AR ? AR[l] : 0) + vb;
    uint8_t* p = lane_ptr<S>(c, I, l, a, SZ * VEC, true);
    if (!p) return false;
    for (int i = 0; i < VEC; ++i) store_val<SZ>(p + i * SZ, V[i][l]);
    return true;
  });
}


template <class V, int OP>
inline V apply_atom(V old, V b, V cc) {
  if constexpr (OP == A_ADD) { if constexpr (std::is_integral_v<V>) return V(U<V>(old) + U<V>(b)); else return old + b; }
  else if constexpr (OP == A_MIN) { if constexpr (std::is_floating_point_v<V>) return std::fmin(old, b); else return b < old ? b : old; }
  else if constexpr (OP == A_MAX) { if constexpr (std::is_floating_point_v<V>) return std::fmax(old, b); else return b > old ? b : old; }
  else if constexpr (OP == A_EXCH) return b;
  else if constexpr (OP == A_CAS) return old == b ? cc : old;
  else if constexpr (OP == A_INC) return old >= b ? V(0) : V(old + 1);
  else if constexpr (OP == A_DEC) return (old == 0 || old > b) ? b : V(old - 1);
  else if constexpr (OP == A_AND) return V(old & b);
  else if constexpr (OP == A_OR) return V(old | b);
  else return V(old ^ b);
}

template <class V, int OP>
inline V do_atom(uint8_t* p, V b, V cc, bool atomic) {
  if (!atomic) {
    V old;
    std::memcpy(&old, p, sizeof(V));
    V nv = apply_atom<V, OP>(old, b, cc);
    std::memcpy(p, &nv, sizeof(V));
    return old;
  }
  using B = std::conditional_t<sizeof(V) == 4, uint32_t, uint64_t>;
  std::atomic_ref<B> r(*reinterpret_cast<B*>(p));
  if constexpr (std::is_integral_v<V>) {
    if constexpr (OP == A_ADD) return V(r.fetch_add(B(b)));
    if constexpr (OP == A_AND) return V(r.fetch_and(B(b)));
    if constexpr (OP == A_OR) return V(r.fetch_or(B(b)));
    if constexpr (OP == A_XOR) return V(r.fetch_xor(B(b)));
    if constexpr (OP == A_EXCH) return V(r.exchange(B(b)));
  }
  if constexpr (OP == A_CAS) {
    B exp = std::bit_cast<B>(b);
    r.compare_exchange_strong(exp, std::bit_cast<B>(cc));
    return std::bit_cast<V>(exp);
  } else {
    B cur = r.load(std::memory_order_relaxed);
    for (;;) {
      V old = std::bit_cast<V>(cur);
      V nv = apply_atom<V, OP>(old, b, cc);
      if (r.compare_exchange_weak(cur, std::bit_cast<B>(nv))) return old;
    }
  }
}

// atom / red: s[0] = b, s[1] = c (cas); d[0] = result (NOREG for red)
template <Sp S, class V, int OP>
void h_atom(Ctx& c, const Inst& I, uint32_t m) {
  const uint64_t vb = var_base(c, I) + uint64_t(I.aoff);
  const uint64_t* AR = I.areg != NOREG ? c.src(I.areg) : nullptr;
  const uint64_t* Bv = c.src(I.s[0]);
  const uint64_t* Cv = I.s[1] != NOREG ? c.src(I.s[1]) : Bv;
  uint64_t* D = I.d[0] != NOREG ? c.dst(I.d[0]) : nullptr;
  for_lanes_until(m, [&](int l) {
    uint64_t a = (AR ? AR[l] : 0) + vb;
    uint8_t* p = lane_ptr<S>(c, I, l, a, sizeof(V), true);
    if (!p) return false;
    bool atomic = true;
    if constexpr (S == Sp::Shared || S == Sp::Local) atomic = false;
    if constexpr (S == Sp::Generic) {
      uint64_t hi = a & 0xFFFFFFFF00000000ull;
      atomic = hi != kSharedWindow && hi != kLocalWindow;
    }
    V r = do_atom<V, OP>(p, get<V>(Bv, l), get<V>(Cv, l), atomic);
    if (D) D[l] = put<V>(r);
    return true;
  });
}

// ---------------- mbarrier (sm_80) ----------------
// The 64-bit object: bits 0..20 the arrivals pending in the current phase,
// 21..41 the arrivals expected per phase, 63 the phase's parity. A state
// (token) is the object as it was before an arrival. Lanes act in lane order;
// a block's warps run one at a time, so no other thread sees a half update.
// a0: 0 init, 1 inval, 2 arrive, 3 arrive_drop, 4 test_wait, 5 test_wait.parity
// (4/5 also try_wait), 6 pending_count (no memory operand), 7 the object only checked
// (cp.async.mbarrier.arrive without .noinc: a net change of zero).
constexpr uint64_t kMbarCount = (1u << 21) - 1;
template <Sp S>
void h_mbarrier(Ctx& c, const Inst& I, uint32_t m) {
  const uint64_t* B = I.s[0] != NOREG ? c.src(I.s[0]) : nullptr;
  uint64_t* D = I.d[0] != NOREG ? c.dst(I.d[0]) : nullptr;
  if (I.a0 == 6) {
    for_lanes(m, [&](int l) { D[l] = B[l] & kMbarCount; });
    return;
  }
  const uint64_t vb = var_base(c, I) + uint64_t(I.aoff);
  const uint64_t* AR = I.areg != NOREG ? c.src(I.areg) : nullptr;
  for_lanes_until(m, [&](int l) {
    uint8_t* p = lane_ptr<S>(c, I, l, (AR ? AR[l] : 0) + vb, 8, I.a0 <= 3);
    if (!p) return false;
    uint64_t w;
    std::memcpy(&w, p, 8);
    const uint64_t pending = w & kMbarCount, expected = (w >> 21) & kMbarCount, phase = w >> 63;
    if (I.a0 == 7) return true;
    switch (I.a0) {
      case 0: {
        const uint64_t n = B[l] & kMbarCount;
        w = n | n << 21;
        break;
      }
      case 1: w = 0; break;
      case 2:
      case 3: {
        if (D) D[l] = w;
        const uint64_t n = B ? B[l] & kMbarCount : 1;
        uint64_t left = pending > n ? pending - n : 0, exp = expected;
        if (I.a0 == 3 && exp) exp--;
        uint64_t ph = phase;
        if (left == 0) {  // the phase completes: the next begins
          ph ^= 1;
          left = exp;
        }
        w = left | exp << 21 | ph << 63;
        break;
      }
      default:  // test_wait / try_wait: has the phase of the state (or of that parity) completed?
        D[l] = phase != (I.a0 == 5 ? (B[l] & 1) : (B[l] >> 63));
        return true;
    }
    std::memcpy(p, &w, 8);
    return true;
  });
}

// ---------------- warp collectives ----------------
// shfl.sync.mode.b32 d[|p], a, b, c, membermask ; a0 = mode (0 up, 1 down, 2 bfly, 3 idx)
void h_shfl(Ctx& c, const Inst& I, uint32_t m) {
  const uint64_t* A = c.src(I.s[0]);
  const uint64_t* B = c.src(I.s[1]);
  const uint64_t* C = c.src(I.s[2]);
  uint64_t src[32];
  std::memcpy(src, A, sizeof src);
  uint64_t* D = c.dst(I.d[0]);
  uint64_t* P = I.d[1] != NOREG ? c.dst(I.d[1]) : nullptr;
  for_lanes(m, [&](int lane) {
    uint32_t b = uint32_t(B[lane]), cv = uint32_t(C[lane]);
    uint32_t segmask = (cv >> 8) & 0x1f, clamp = cv & 0x1f;
    int minLane = lane & int(segmask);
    int maxLane = minLane | int(clamp & ~segmask);
    int j = 0;
    bool pv = false;
    switch (I.a0) {
      case 0: j = lane - int(b & 0x1f); pv = j >= maxLane; break;
      case 1: j = lane + int(b & 0x1f); pv = j <= maxLane; break;
      case 2: j = lane ^ int(b & 0x1f); pv = j <= maxLane; break;
      default: j = minLane | int(b & 0x1f & ~segmask); pv = j <= maxLane; break;
    }
    if (!pv || j < 0 || j > 31) j = lane;
    // A source lane that does not take part (outside the branch, so outside
    // membermask) gives an undefined value by the ISA; GPUs give 0, and
    // programs count on it: the classic block reduction shuffles its last
    // warp-sums among 8 lanes with 32-lane offsets.
    D[lane] = (m >> j) & 1 ? uint32_t(src[j]) : 0u;
    if (P) P[lane] = pv;
  });
}
// cp.async.{ca,cg}.shared.global [dst], [src], cp-size{, src-size | ignore-src}: the copy
// is made when issued. a0: cp-size; s[0]: the source address register, a1 its offset
// (signed); s[1]: src-size (NOREG: cp-size); s[2]: ignore-src. The bytes from src-size
// on, or all of them with ignore-src, are zeros; only the bytes read are checked.
void h_cp_async(Ctx& c, const Inst& I, uint32_t m) {
  const uint32_t n = I.a0;
  const uint64_t vb = var_base(c, I) + uint64_t(I.aoff);
  const uint64_t* AR = I.areg != NOREG ? c.src(I.areg) : nullptr;
  const uint64_t* SR = c.src(I.s[0]);
  const uint64_t* SS = I.s[1] != NOREG ? c.src(I.s[1]) : nullptr;
  const uint64_t* IG = I.s[2] != NOREG ? c.src(I.s[2]) : nullptr;
  for_lanes_until(m, [&](int l) {
    uint8_t* d = lane_ptr<Sp::Shared>(c, I, l, (AR ? AR[l] : 0) + vb, n, true);
    if (!d) return false;
    const uint32_t k = IG && IG[l] ? 0 : SS ? uint32_t(std::min<uint64_t>(uint32_t(SS[l]), n)) : n;
    uint8_t tmp[16] = {};
    if (k) {
      const uint64_t a = SR[l] + uint64_t(int64_t(int32_t(I.a1)));
      const uint8_t* s = (a & (n - 1)) || k == n ? lane_ptr<Sp::Global>(c, I, l, a, n, false)
                                                 : c.gptr(I, a, k, false, Sp::Global);
      if (!s) return false;
      std::memcpy(tmp, s, k);
    }
    std::memcpy(d, tmp, n);
    return true;
  });
}

// The lanes a warp-collective instruction of lane l acts on: those of its
// membermask operand (s[1]; each lane names its own group, as cooperative
// groups' labeled partitions do) that execute it; all active lanes without one.
inline uint32_t member_lanes(Ctx& c, const Inst& I, uint32_t m, int l) {
  return I.s[1] == NOREG ? m : uint32_t(c.src(I.s[1])[l]) & m;
}
// vote{.sync}.mode d, {!}p{, membermask} ; a0: 0 all 1 any 2 uni 3 ballot; flags bit0 negate
void h_vote(Ctx& c, const Inst& I, uint32_t m) {
  const uint64_t* P = c.src(I.s[0]);
  bool neg = I.flags & 1;
  uint32_t ballot = 0;
  for_lanes(m, [&](int l) { if ((P[l] != 0) != neg) ballot |= 1u << l; });
  uint64_t r[32];
  for_lanes(m, [&](int l) {
    const uint32_t g = member_lanes(c, I, m, l), b = ballot & g;
    switch (I.a0) {
      case 0: r[l] = b == g; break;
      case 1: r[l] = b != 0; break;
      case 2: r[l] = b == 0 || b == g; break;
      default: r[l] = b; break;
    }
  });
  uint64_t* D = c.dst(I.d[0]);
  for_lanes(m, [&](int l) { D[l] = r[l]; });
}
// match.sync.any/all.b32/b64 d{|p}, a, membermask ; a0: 0 any 1 all ; a1: bytes
void h_match(Ctx& c, const Inst& I, uint32_t m) {
  const uint64_t* A = c.src(I.s[0]);
  uint64_t mask = I.a1 == 4 ? 0xffffffffull : ~0ull;
  uint64_t v[32];
  for_lanes(m, [&](int l) { v[l] = A[l] & mask; });
  uint32_t res[32];
  bool same[32];
  for_lanes(m, [&](int l) {
    const uint32_t g = member_lanes(c, I, m, l);
    uint32_t eq = 0;
    for_lanes(g, [&](int k) { if (v[k] == v[l]) eq |= 1u << k; });
    same[l] = eq == g;
    res[l] = I.a0 == 0 ? eq : same[l] ? g : 0;
  });
  uint64_t* D = c.dst(I.d[0]);
  uint64_t* P = I.d[1] != NOREG ? c.dst(I.d[1]) : nullptr;
  for_lanes(m, [&](int l) {
    D[l] = res[l];
    if (P && I.a0 == 1) P[l] = same[l];
  });
}
// redux.sync.op.type d, a, membermask ; a0: 0 add 1 min 2 max 3 and 4 or 5 xor ; a1: 1 signed
void h_redux(Ctx& c, const Inst& I, uint32_t m) {
  const uint64_t* A = c.src(I.s[0]);
  const bool sg = I.a1;
  auto reduce = [&](uint32_t g) {
    uint32_t acc = uint32_t(A[std::countr_zero(g)]);
    for_lanes(g & (g - 1), [&](int l) {
      uint32_t x = uint32_t(A[l]);
      switch (I.a0) {
        case 0: acc += x; break;
        case 1: acc = sg ? uint32_t(std::min(int32_t(acc), int32_t(x))) : std::min(acc, x); break;
        case 2: acc = sg ? uint32_t(std::max(int32_t(acc), int32_t(x))) : std::max(acc, x); break;
        case 3: acc &= x; break;
        case 4: acc |= x; break;
        default: acc ^= x; break;
      }
    });
    return acc;
  };
  uint32_t r[32], last_g = 0, last_r = 0;
  for_lanes(m, [&](int l) {
    const uint32_t g = member_lanes(c, I, m, l);
    if (g != last_g) last_g = g, last_r = g ? reduce(g) : 0;  // lanes of one group are usually together
    r[l] = last_r;
  });
  uint64_t* D = c.dst(I.d[0]);
  for_lanes(m, [&](int l) { D[l] = r[l]; });
}
void h_activemask(Ctx& c, const Inst& I, uint32_t m) {
  uint64_t* D = c.dst(I.d[0]);
  for_lanes(m, [&](int l) { D[l] = m; });
}

void h_sreg(Ctx& c, const Inst& I, uint32_t m) {
  uint64_t* D = c.dst(I.d[0]);
  uint32_t w = I.a0;
  auto bcast = [&](uint64_t v) { for_lanes(m, [&](int l) { D[l] = v; }); };
  auto now = [] { return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count()); };
  switch (w) {
    case SR_TID: case SR_TID + 1: case SR_TID + 2: { const uint32_t* t = c.tid[w - SR_TID]; for_lanes(m, [&](int l) { D[l] = t[l]; }); break; }
    case SR_NTID: bcast(c.ntid.x); break;
    case SR_NTID + 1: bcast(c.ntid.y); break;
    case SR_NTID + 2: bcast(c.ntid.z); break;
    case SR_CTAID: case SR_CTAID + 1: case SR_CTAID + 2: bcast(c.ctaid[w - SR_CTAID]); break;
    case SR_NCTAID: bcast(c.nctaid.x); break;
    case SR_NCTAID + 1: bcast(c.nctaid.y); break;
    case SR_NCTAID + 2: bcast(c.nctaid.z); break;
    case SR_LANEID: for_lanes(m, [&](int l) { D[l] = uint32_t(l); }); break;
    case SR_WARPID: bcast(c.warp_id); break;
    case SR_NWARPID: bcast(c.nwarps); break;
    case SR_SMID: case SR_GRIDID: case SR_ZERO: bcast(0); break;
    case SR_NSMID: bcast(1); break;
    case SR_LM_EQ: for_lanes(m, [&](int l) { D[l] = 1u << l; }); break;
    case SR_LM_LE: for_lanes(m, [&](int l) { D[l] = uint32_t((2ull << l) - 1); }); break;
    case SR_LM_LT: for_lanes(m, [&](int l) { D[l] = (1u << l) - 1; }); break;
    case SR_LM_GE: for_lanes(m, [&](int l) { D[l] = ~((1u << l) - 1); }); break;
    case SR_LM_GT: for_lanes(m, [&](int l) { D[l] = uint32_t(~((2ull << l) - 1)); }); break;
    case SR_CLOCK: bcast(uint32_t(now())); break;
    case SR_CLOCK64: case SR_GTIMER: bcast(now()); break;
    case SR_GTIMER_LO: bcast(uint32_t(now())); break;
    case SR_GTIMER_HI: bcast(now() >> 32); break;
    case SR_DYNSMEM: bcast(c.dyn_shared); break;
    case SR_TOTSMEM: bcast(c.shared_size); break;
    // The reserved region (kReservedShared bytes at shared offset 0 of a kernel
    // that names one of these), in two halves: cooperative groups keep their
    // multi-warp scratch at %reserved_smem_offset_1.
    case SR_RSV_BEGIN: case SR_RSV_0: bcast(0); break;
    case SR_RSV_END: case SR_RSV_CAP: bcast(kReservedShared); break;
    case SR_RSV_1: bcast(kReservedShared / 2); break;
    // the grid workspace address of a cooperative launch (high, low word), as the driver sets them
    case SR_ENVREG1: bcast(c.gridws_addr >> 32); break;
    case SR_ENVREG2: bcast(uint32_t(c.gridws_addr)); break;
    default: bcast(0); break;
  }
}

}  // namespace
}  // namespace wh::ptx::detail
