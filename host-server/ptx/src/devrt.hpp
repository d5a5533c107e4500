// The device runtime of dynamic parallelism (what libcudadevrt and the GPU
// driver provide to kernels): device-side launches, streams, events, errors
// and device queries, as engine builtins. See docs/ptx.md "Dynamic parallelism".
#pragma once
#include <chrono>
#include <memory>
#include <mutex>
#include <string_view>
#include <unordered_map>

#include "internal.hpp"
#include "wormhole/common/devrt_names.hpp"

namespace wh::ptx::detail {

// cudaLimitDevRuntimePendingLaunchCount beyond this is taken as this.
constexpr uint32_t kMaxPendingLaunches = 65536;

// One host launch and every grid it leads to: the pending-launch budget.
struct DevTree {
  explicit DevTree(uint32_t limit) : limit(limit) {}
  std::mutex mu;
  uint32_t limit;
  uint32_t pending = 0;        // buffers handed out and launches whose grids have not completed
  uint64_t pending_bytes = 0;  // their parameter bytes (bounded: host memory)
  std::atomic<bool> cancel{false};
  bool has_deadline = false;  // the host launch's watchdog covers every grid
  std::chrono::steady_clock::time_point deadline{};
  uint64_t timeout_ms = 0;
  // Compare mode (jit.hpp): this launch interprets only, or compiles before it
  // runs; both run their blocks in order on one worker (the same order twice).
  bool interpret = false, compile = false, serial = false;
  // The host launch's module load: its variables' addresses, which are bound.
  const uint64_t* gaddr = nullptr;
  const uint8_t* gbound = nullptr;
};

// A launch recorded by a kernel, run once its grid has completed.
struct ChildLaunch {
  uint32_t kernel;  // index into ModuleImpl::kdata
  Dim3 grid, block;
  uint32_t shmem;
  std::vector<uint8_t> params;
};

// The device runtime state of one running grid. Shared by its blocks
// (several workers): every member behind mu.
struct GridRt {
  GridRt(const ModuleImpl& m, DevTree& t, uint32_t depth) : mod(m), tree(t), depth(depth) {}
  const ModuleImpl& mod;
  DevTree& tree;
  const uint32_t depth;  // 0: launched from the host
  std::mutex mu;
  // Launches into the NULL stream, created streams and the fire-and-forget
  // stream, in launch order; tail launches apart (they run after those).
  std::vector<ChildLaunch> children, tails;
  struct Buf {
    uint32_t kernel;  // V2: the kernel it was asked for; NOREG: cudaGetParameterBuffer
    Dim3 grid, block;
    uint32_t shmem;
    bool launched = false;
    std::vector<uint8_t> bytes;
  };
  std::vector<std::unique_ptr<Buf>> bufs;  // slot i at kLaunchBufs + (i << kLaunchBufSlotShift)
  // Block-scoped state, dropped when the block ends: the last error of each
  // thread that has one, streams and events (handle -> owning block).
  std::unordered_map<uint64_t, std::unordered_map<uint32_t, int32_t>> errors;
  std::unordered_map<uint64_t, uint64_t> streams, events;
  std::unordered_map<uint64_t, uint32_t> objects_of_block;
  uint64_t next_handle = 0;
  std::atomic<bool> block_state{false};  // errors or objects exist

  // Releases what a finished block owned.
  void block_done(uint64_t block);
  // Buffers handed out and never launched give their pending slot back.
  void release_unlaunched();
};

// Runs device-runtime builtin `callee` for the lanes in `m` (one after
// another, as threads call it); false when the launch faulted (c.err set).
bool devrt_call(Ctx& c, const Inst& I, const Function& callee, const CallSite& cs, uint32_t m);
// The host bytes of a parameter buffer a kernel reads or fills, or nullptr.
uint8_t* devrt_buffer(Ctx& c, uint64_t addr, uint32_t size, bool write);

}  // namespace wh::ptx::detail
