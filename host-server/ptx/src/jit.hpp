// The PTX compiler of the sim device: each function becomes native code over
// the warp's 32 lanes, built with LLVM. Straight-line code and branches the
// whole group takes alike (loops) run natively; the interpreter keeps
// divergence, barriers, calls and every instruction the compiler does not
// know: compiled code calls the instruction's handler for those, and for any
// memory access its fast path does not cover, so the semantics (faults, their
// messages, rounding) are the interpreter's own.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "internal.hpp"

namespace wh::ptx::detail {

// What the compiler knows about a handler (registered by the decode units
// that instantiate it, see jit_catalog.hpp).
enum class JK : uint8_t {
  Mov, IBin, IUn, MadLo, MulWide, MadWide, Shift, Setp, Selp, Cvt, Cvta, PBin, PNot,
  FBin, FUn, FFma, DBin, DUn, DFma, Ld, St,
  Sreg,      // mov d, %special (Inst::a0: the Sreg)
  Shfl,      // shfl.sync (Inst::a0: the mode)
  Vote,      // vote{.sync} (Inst::a0: the mode)
  CvtLanes,  // cvt of any other form (Inst::a0/a1: types, rounding, .sat, .ftz)
  FDir,      // f32 arithmetic with directed rounding (h_f32_dir: Inst::a0 op, a1 mode, flags)
  Atom,      // atom/red on shared or global memory (op: the AOp, ty: the value type)
  Tf32       // cvt.{rn,rz,rna}.tf32.f32 (h_cvt_tf32: Inst::a0 the mode; .satfinite/.relu: the handler)
};
enum JOp : uint8_t {
  JAdd, JSub, JMul, JMulHi, JAnd, JOr, JXor, JMin, JMax, JDiv, JNeg, JNot, JAbs, JSqrt, JRcp, JRsqrt,
  JEx2, JLg2, JSin, JCos, JTanh,  // FUn: libm's functions, as the interpreter calls them
  JMinNaN, JMaxNaN                 // FBin: min/max.NaN (a NaN operand gives the canonical NaN)
};
struct JitDesc {
  JK kind;
  uint8_t op = 0;       // JOp; Setp: the Cmp
  Ty ty = T_None;       // operand type (Cvt: destination)
  Ty ty2 = T_None;      // Cvt: source type
  bool flag = false;    // FBin/FUn/FFma: .ftz; Shift: left; Cvta: to
  Sp space = Sp::Generic;
  uint8_t size = 0, vec = 0;  // Ld/St: bytes per element, elements
  bool sgn = false;           // Ld: sign-extending
};
void jit_note(Handler h, const JitDesc& d);

// A compiled function, entered at the block starting at `pc` for a whole warp
// (`active` has all 32 lanes: a partial group, after divergence or at the
// end of a block of threads, is interpreted; this keeps compiles half as
// long); `min_wait` is the frame's lowest parked pc, `slice` the warp's
// backward branches left before it yields. Returns the
// pc where the interpreter goes on: after a fault (Ctx::fault set) the faulting
// instruction; `pc` itself when it ran nothing. Adds the thread-instructions it
// ran to *count.
using JitFn = uint32_t (*)(Ctx* c, uint32_t active, uint64_t* count, uint32_t pc, uint32_t min_wait, uint32_t* slice);
struct JitEntry {
  JitFn fn = nullptr;  // set at block starts
  uint32_t end = 0;    // the block's end (its first control instruction or the next start)
};

// Per module: the compiled blocks of each function (null: none yet), published
// once complete so that workers of other engines read them without a lock.
struct JitState {
  JitState(size_t nfuncs, size_t nkernels)
      : table(new std::atomic<const JitEntry*>[nfuncs]),
        interp_ns(new std::atomic<uint64_t>[nkernels]),
        failed(new std::atomic<bool>[nkernels]) {
    for (size_t i = 0; i < nfuncs; ++i) table[i].store(nullptr, std::memory_order_relaxed);
    for (size_t i = 0; i < nkernels; ++i) interp_ns[i].store(0, std::memory_order_relaxed);
    for (size_t i = 0; i < nkernels; ++i) failed[i].store(false, std::memory_order_relaxed);
  }
  ~JitState();
  std::unique_ptr<std::atomic<const JitEntry*>[]> table;
  std::mutex mu;
  std::vector<std::unique_ptr<JitEntry[]>> owned;
  std::unique_ptr<std::atomic<uint64_t>[]> interp_ns;  // per kernel (kdata index): time interpreted so far
  std::unique_ptr<std::atomic<bool>[]> failed;         // per kernel: its compile failed, it stays interpreted
  void* tracker = nullptr;  // the code generator's handle of the module's code
  // auto mode: a compile of the module is queued or running in the background
  // (one per module at a time; the queue holds the module until it is done)
  std::atomic<bool> compiling{false};
};

enum class JitMode { Off, Auto, Always, Compare };
// WORMHOLE_PTX_JIT: off, auto (default), always, or compare: every launch runs
// interpreted, then compiled from the same memory, and the two results must agree.
JitMode jit_mode();
// auto: a kernel is compiled once it has run in the interpreter for twice what
// its compile is estimated to take (about 1 ms per PTX instruction of it and
// what it calls), and at least 100 ms: one-shot and short launches never pay for it.
// The compile runs in the background, on one thread for the process (compiles
// are one at a time): launches go on interpreted meanwhile and use the compiled
// code from the moment it is published (even a running one). Unloading a
// module never waits for it; at exit only the compile in progress is waited for.
constexpr uint64_t kJitAutoNs = 100'000'000, kJitNsPerInst = 1'000'000;
// How often a running grid's interpreted time is counted (`auto`).
constexpr std::chrono::milliseconds kJitPoll{100};
// Compiles the kernel and every function it may reach, when the mode calls for
// it. Called before a grid starts and, in `auto`, every kJitPoll while it runs
// (a compile is queued; the running grid takes the code when it is published).
void jit_prepare(const ModuleImpl& M, const KernelData& kd, bool force = false);
// While and after a grid runs: the time it ran (counts toward kJitAutoNs while interpreted).
void jit_account(const ModuleImpl& M, const KernelData& kd, uint64_t ns);
// Process-wide compile statistics (server statistics): seconds, kernels, functions, instructions.
struct JitStats {
  double seconds = 0;
  uint64_t kernels = 0, functions = 0, insts = 0;
};
JitStats jit_stats();
bool jit_busy();  // a background compile is running or queued

// The code generator: libwormhole-ptx-jit.so (jit.cpp, LLVM) exports
// `extern "C" const JitBackend* wh_ptx_jit_backend()`; the engine loads it at
// its first compile (jit_core.cpp).
struct JitBackend {
  // Compiles the functions `funcs` of M: tables[i] gets function funcs[i]'s
  // entries (code.size() + 1 of them). *tracker holds the module's code
  // (made at its first compile). False: nothing compiled, *err says why.
  bool (*compile)(const ModuleImpl& M, const std::vector<uint32_t>& funcs, const JitDesc* (*describe)(Handler),
                  std::vector<std::unique_ptr<JitEntry[]>>& tables, void** tracker, std::string* err);
  void (*release)(void* tracker);  // frees a module's code
};

}  // namespace wh::ptx::detail
