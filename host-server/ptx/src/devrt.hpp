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

namespace wh::ptx::detail {

enum DevFn : uint8_t {
  DF_None,
  DF_GetParameterBuffer,    // (size_t alignment, size_t size) -> void*
  DF_GetParameterBufferV2,  // (void* func, dim3 grid, dim3 block, unsigned shmem) -> void*
  DF_LaunchDevice,          // (func, buffer, dim3 grid, dim3 block, unsigned shmem, stream) -> cudaError_t
  DF_LaunchDeviceV2,        // (buffer, stream) -> cudaError_t
  DF_GetLastError,
  DF_PeekAtLastError,
  DF_GetDevice,             // (int*)
  DF_GetDeviceCount,        // (int*)
  DF_DeviceGetAttribute,    // (int*, cudaDeviceAttr, int device)
  DF_StreamCreateWithFlags, // (cudaStream_t*, unsigned)
  DF_StreamDestroy,
  DF_StreamWaitEvent,       // (stream, event, unsigned)
  DF_EventCreateWithFlags,  // (cudaEvent_t*, unsigned)
  DF_EventRecord,           // (event, stream)
  DF_EventRecordWithFlags,  // (event, stream, unsigned)
  DF_EventDestroy,
  DF_Malloc,                // (void**, size_t): the device heap
  DF_Free,                  // (void*)
  DF_RuntimeGetVersion,     // (int*)
};

// The builtin a device-runtime function name stands for (the __cudaCDP2*
// names nvcc 12+ emits, the plain names of older PTX, the _ptsz variants),
// with its parameter and result sizes; DF_None if the name is not one.
struct DevFnInfo {
  DevFn fn = DF_None;
  uint8_t nargs = 0;
  uint8_t arg[6] = {};
  uint8_t ret = 0;  // result bytes (all return one value)
};
DevFnInfo devrt_function(std::string_view name);
// A name of the device runtime that libcudadevrt defines (so a link leaves
// it to the engine): a builtin, or one of __cudaCDP2* the engine does not
// provide (a call to it fails when it runs).
bool devrt_name(std::string_view name);

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
