// Device runtime builtins (dynamic parallelism). A kernel's launches are
// recorded here and run by the engine after the kernel's grid completes
// (exec.cpp, Engine::launch); streams and events are block-scoped handles;
// errors go to the calling thread's last error, as cudaGetLastError reads it.
#include "devrt.hpp"

#include <string>

namespace wh::ptx::detail {

namespace {

// cudaError_t values device code sees.
constexpr int32_t kSuccess = 0, kInvalidValue = 1, kMemoryAllocation = 2, kInvalidConfiguration = 9,
                  kLaunchMaxDepthExceeded = 65, kLaunchPendingCountExceeded = 69, kInvalidDeviceFunction = 98,
                  kInvalidDevice = 101, kInvalidResourceHandle = 400;
// What cudaRuntimeGetVersion reports in a kernel (CUDA 13.0).
constexpr uint32_t kRuntimeVersion = 13000;
// CUDA's limit on nesting (a grid launched from the host is depth 0).
constexpr uint32_t kMaxDepth = 24;
// Parameter buffers pending at once in one host launch's tree, in bytes
// (host memory the engine holds for them).
constexpr uint64_t kMaxPendingBytes = 256ull << 20;
constexpr uint32_t kMaxParamBytes = 65536;
// Streams and events a grid may hold at once.
constexpr size_t kMaxObjects = 65536;
// Stream handles cudaStreamCreateWithFlags gives, event handles; the named
// streams are 0 (NULL), 1 (legacy), 2 (per-thread), 3 (tail launch), 4
// (fire-and-forget).
constexpr uint64_t kStreamTag = 0x5354'0000'0000'0000ull, kEventTag = 0x4556'0000'0000'0000ull;
constexpr uint64_t kTailLaunch = 3, kFireAndForget = 4;

// One thread's call: its arguments in its local frame, its result.
struct Call {
  Ctx& c;
  const Inst& I;
  const CallSite& cs;
  GridRt& rt;
  int l;
  uint8_t* frame;
  template <class T>
  T arg(size_t i) const {
    T v{};
    std::memcpy(&v, frame + cs.arg_off[i], sizeof v);
    return v;
  }
  Dim3 dim(size_t i) const {
    Dim3 d;
    std::memcpy(&d.x, frame + cs.arg_off[i], 4);
    std::memcpy(&d.y, frame + cs.arg_off[i] + 4, 4);
    std::memcpy(&d.z, frame + cs.arg_off[i] + 8, 4);
    return d;
  }
  void result(uint64_t v, size_t size) const {
    if (!cs.ret_off.empty()) std::memcpy(frame + cs.ret_off[0], &v, size);
  }
  uint32_t thread() const {
    return c.tid[0][l] + c.ntid.x * (c.tid[1][l] + c.ntid.y * c.tid[2][l]);
  }
  // Where a result pointer (generic, any space a thread may write) points.
  uint8_t* out(uint64_t a, uint32_t size) const {
    if (a & (size - 1)) {
      c.set_fault(LaunchError::Misaligned, I, "misaligned " + std::to_string(size) + "-byte write of a device runtime result");
      return nullptr;
    }
    const uint64_t hi = a & 0xFFFFFFFF00000000ull;
    if (hi == kLocalWindow) {
      uint64_t off = a - kLocalWindow;
      if (off >= c.local_stride || size > c.local_stride - off) {
        c.bad_access(I, off, size, Sp::Local, true, "outside the thread's local memory");
        return nullptr;
      }
      return c.local + size_t(l) * c.local_stride + off;
    }
    if (hi == kSharedWindow) {
      uint64_t off = a - kSharedWindow;
      if (off >= c.shared_size || size > c.shared_size - off) {
        c.bad_access(I, off, size, Sp::Shared, true, "outside the block's shared memory");
        return nullptr;
      }
      return c.shared + off;
    }
    if (hi == kParamWindow && a < kLaunchBufs) {
      c.bad_access(I, a, size, Sp::KParam, true, "kernel parameters are read-only");
      return nullptr;
    }
    return c.gptr(I, a, size, true, Sp::Generic);
  }
  bool put(uint64_t a, uint64_t v, uint32_t size) const {
    uint8_t* p = out(a, size);
    if (!p) return false;
    std::memcpy(p, &v, size);
    return true;
  }
};

void set_error(Call& k, int32_t e) {
  if (e == kSuccess) return;
  std::lock_guard lk(k.rt.mu);
  k.rt.errors[k.c.block_linear][k.thread()] = e;
  k.rt.block_state = true;
}

// The kernel a function address names, or NOREG.
uint32_t kernel_at(const ModuleImpl& M, uint64_t func) {
  uint32_t f = M.func_at(func);
  return f == NOREG || f >= M.kernel_of_func.size() ? NOREG : M.kernel_of_func[f];
}

// A device-side launch is checked as a host launch is; code the engine
// cannot run fails when the child runs (with its message), not here.
int32_t check_child(const ModuleImpl& M, const uint8_t* gbound, uint32_t k, Dim3 grid, Dim3 block, uint32_t shmem) {
  LaunchConfig cc;
  cc.grid = grid;
  cc.block = block;
  cc.dynamic_shared_bytes = shmem;
  LaunchError e = check_launch(M, gbound, M.kdata[k], cc, M.funcs[M.kdata[k].func].param_bytes);
  return e.kind == LaunchError::InvalidConfig ? kInvalidConfiguration : kSuccess;
}

// Hands out a parameter buffer: it holds a pending launch until launched (or
// until the grid ends).
int32_t new_buffer(GridRt& rt, uint32_t kernel, Dim3 g, Dim3 b, uint32_t shmem, uint64_t bytes, uint64_t* addr) {
  {
    std::lock_guard lk(rt.tree.mu);
    if (rt.tree.pending >= rt.tree.limit || bytes > kMaxPendingBytes - rt.tree.pending_bytes)
      return kLaunchPendingCountExceeded;
    rt.tree.pending++;
    rt.tree.pending_bytes += bytes;
  }
  {
    std::lock_guard lk(rt.mu);
    if (rt.bufs.size() < kLaunchBufSlots) {
      auto buf = std::make_unique<GridRt::Buf>();
      buf->kernel = kernel;
      buf->grid = g;
      buf->block = b;
      buf->shmem = shmem;
      buf->bytes.assign(bytes, 0);
      *addr = kLaunchBufs + (uint64_t(rt.bufs.size()) << kLaunchBufSlotShift);
      rt.bufs.push_back(std::move(buf));
      return kSuccess;
    }
  }
  std::lock_guard lk(rt.tree.mu);
  rt.tree.pending--;
  rt.tree.pending_bytes -= bytes;
  return kLaunchPendingCountExceeded;
}

// The unlaunched buffer at addr (its base), under rt.mu; kernel: NOREG for a
// cudaGetParameterBuffer buffer.
GridRt::Buf* find_buffer(GridRt& rt, uint64_t addr) {
  if (addr < kLaunchBufs) return nullptr;
  uint64_t off = addr - kLaunchBufs;
  if (off & ((1u << kLaunchBufSlotShift) - 1)) return nullptr;
  uint64_t slot = off >> kLaunchBufSlotShift;
  if (slot >= rt.bufs.size() || rt.bufs[slot]->launched) return nullptr;
  return rt.bufs[slot].get();
}

// Where a launch into `stream` goes (children or tails), or an error: the
// named streams, or a stream this block created and has not destroyed.
int32_t launch_list(GridRt& rt, uint64_t block, uint64_t stream, std::vector<ChildLaunch>** list) {
  if (stream <= 2 || stream == kFireAndForget) {
    *list = &rt.children;
    return kSuccess;
  }
  if (stream == kTailLaunch) {
    *list = &rt.tails;
    return kSuccess;
  }
  auto it = rt.streams.find(stream);
  if (it == rt.streams.end() || it->second != block) return kInvalidResourceHandle;
  *list = &rt.children;
  return kSuccess;
}

int32_t launch(Call& k, uint32_t kernel, GridRt::Buf& buf, uint64_t stream, Dim3 g, Dim3 b, uint32_t shmem) {
  std::vector<ChildLaunch>* list = nullptr;
  if (int32_t e = launch_list(k.rt, k.c.block_linear, stream, &list)) return e;
  const uint32_t n = k.rt.mod.funcs[k.rt.mod.kdata[kernel].func].param_bytes;
  list->push_back({kernel, g, b, shmem, std::vector<uint8_t>(buf.bytes.begin(), buf.bytes.begin() + n)});
  buf.launched = true;
  return kSuccess;
}

int32_t new_object(Call& k, std::unordered_map<uint64_t, uint64_t>& objs, uint64_t tag, uint64_t* h) {
  std::lock_guard lk(k.rt.mu);
  if (k.rt.streams.size() + k.rt.events.size() >= kMaxObjects) return kMemoryAllocation;
  *h = tag | ++k.rt.next_handle;
  objs[*h] = k.c.block_linear;
  k.rt.objects_of_block[k.c.block_linear]++;
  k.rt.block_state = true;
  return kSuccess;
}

bool owned(Call& k, const std::unordered_map<uint64_t, uint64_t>& objs, uint64_t h) {
  auto it = objs.find(h);
  return it != objs.end() && it->second == k.c.block_linear;
}

bool drop_object(Call& k, std::unordered_map<uint64_t, uint64_t>& objs, uint64_t h) {
  std::lock_guard lk(k.rt.mu);
  if (!owned(k, objs, h)) return false;
  objs.erase(h);
  if (--k.rt.objects_of_block[k.c.block_linear] == 0) k.rt.objects_of_block.erase(k.c.block_linear);
  return true;
}

// A stream a block may name in a wait or an event record (not a named stream
// of dynamic parallelism: those take no events).
bool event_stream(Call& k, uint64_t s) { return s <= 2 || owned(k, k.rt.streams, s); }

// One thread's call; false when the launch faulted.
bool call_one(Call& k, DevFn fn) {
  GridRt& rt = k.rt;
  const ModuleImpl& M = rt.mod;
  int32_t err = kSuccess;
  switch (fn) {
    case DF_GetParameterBufferV2: {
      const uint64_t func = k.arg<uint64_t>(0);
      const Dim3 g = k.dim(1), b = k.dim(2);
      const uint32_t shmem = k.arg<uint32_t>(3);
      uint64_t addr = 0;
      const uint32_t kernel = kernel_at(M, func);
      if (rt.depth + 1 > kMaxDepth) err = kLaunchMaxDepthExceeded;
      else if (kernel == NOREG) err = kInvalidDeviceFunction;
      else err = check_child(M, rt.tree.gbound, kernel, g, b, shmem);
      if (!err) err = new_buffer(rt, kernel, g, b, shmem, M.funcs[M.kdata[kernel].func].param_bytes, &addr);
      set_error(k, err);
      k.result(err ? 0 : addr, 8);
      return true;
    }
    case DF_GetParameterBuffer: {
      const uint64_t align = k.arg<uint64_t>(0), size = k.arg<uint64_t>(1);
      uint64_t addr = 0;
      if (rt.depth + 1 > kMaxDepth) err = kLaunchMaxDepthExceeded;
      else if (size > kMaxParamBytes || !align || (align & (align - 1)) || align > kMaxParamBytes) err = kInvalidValue;
      else err = new_buffer(rt, NOREG, {}, {}, 0, size, &addr);
      set_error(k, err);
      k.result(err ? 0 : addr, 8);
      return true;
    }
    case DF_LaunchDeviceV2: {
      const uint64_t buf = k.arg<uint64_t>(0), stream = k.arg<uint64_t>(1);
      std::lock_guard lk(rt.mu);
      GridRt::Buf* b = find_buffer(rt, buf);
      if (!b || b->kernel == NOREG) err = kInvalidValue;
      else err = launch(k, b->kernel, *b, stream, b->grid, b->block, b->shmem);
      if (err) {
        rt.errors[k.c.block_linear][k.thread()] = err;
        rt.block_state = true;
      }
      k.result(uint32_t(err), 4);
      return true;
    }
    case DF_LaunchDevice: {
      const uint64_t func = k.arg<uint64_t>(0), buf = k.arg<uint64_t>(1), stream = k.arg<uint64_t>(5);
      const Dim3 g = k.dim(2), b = k.dim(3);
      const uint32_t shmem = k.arg<uint32_t>(4);
      const uint32_t kernel = kernel_at(M, func);
      if (rt.depth + 1 > kMaxDepth) err = kLaunchMaxDepthExceeded;
      else if (kernel == NOREG) err = kInvalidDeviceFunction;
      else err = check_child(M, rt.tree.gbound, kernel, g, b, shmem);
      if (!err) {
        std::lock_guard lk(rt.mu);
        GridRt::Buf* pb = find_buffer(rt, buf);
        if (!pb || pb->kernel != NOREG || pb->bytes.size() < M.funcs[M.kdata[kernel].func].param_bytes)
          err = kInvalidValue;
        else
          err = launch(k, kernel, *pb, stream, g, b, shmem);
      }
      set_error(k, err);
      k.result(uint32_t(err), 4);
      return true;
    }
    case DF_GetLastError:
    case DF_PeekAtLastError: {
      std::lock_guard lk(rt.mu);
      auto bl = rt.errors.find(k.c.block_linear);
      if (bl != rt.errors.end()) {
        auto th = bl->second.find(k.thread());
        if (th != bl->second.end()) {
          err = th->second;
          if (fn == DF_GetLastError) bl->second.erase(th);
        }
      }
      k.result(uint32_t(err), 4);
      return true;
    }
    case DF_GetDevice:
    case DF_GetDeviceCount:
      if (!k.put(k.arg<uint64_t>(0), fn == DF_GetDevice ? 0 : 1, 4)) return false;
      k.result(0, 4);
      return true;
    case DF_DeviceGetAttribute: {
      int v = 0;
      if (k.arg<int32_t>(2) != 0) err = kInvalidDevice;
      else if (!k.c.mem->device_attribute(k.arg<int32_t>(1), &v)) err = kInvalidValue;
      else if (!k.put(k.arg<uint64_t>(0), uint32_t(v), 4)) return false;
      break;
    }
    case DF_StreamCreateWithFlags:
    case DF_EventCreateWithFlags: {
      const uint32_t flags = k.arg<uint32_t>(1);
      // Device streams must be non-blocking, device events without timing.
      const bool ok = fn == DF_StreamCreateWithFlags ? flags == 1 : flags == 2;
      uint64_t h = 0;
      if (!ok) err = kInvalidValue;
      else err = new_object(k, fn == DF_StreamCreateWithFlags ? rt.streams : rt.events,
                            fn == DF_StreamCreateWithFlags ? kStreamTag : kEventTag, &h);
      if (!err && !k.put(k.arg<uint64_t>(0), h, 8)) return false;
      break;
    }
    case DF_StreamDestroy:
      if (!drop_object(k, rt.streams, k.arg<uint64_t>(0))) err = kInvalidResourceHandle;
      break;
    case DF_EventDestroy:
      if (!drop_object(k, rt.events, k.arg<uint64_t>(0))) err = kInvalidResourceHandle;
      break;
    case DF_StreamWaitEvent:
    case DF_EventRecord:
    case DF_EventRecordWithFlags: {
      // Children run one after another in launch order, so whatever an event
      // marks has completed before any later launch starts: the dependency
      // holds once the handles are valid.
      const bool wait = fn == DF_StreamWaitEvent;
      const uint64_t s = k.arg<uint64_t>(wait ? 0 : 1), e = k.arg<uint64_t>(wait ? 1 : 0);
      const uint32_t flags = fn == DF_EventRecord ? 0 : k.arg<uint32_t>(2);
      std::lock_guard lk(rt.mu);
      if (!owned(k, rt.events, e)) err = kInvalidResourceHandle;
      else if (s == kTailLaunch || s == kFireAndForget || flags) err = kInvalidValue;
      else if (!event_stream(k, s)) err = kInvalidResourceHandle;
      if (err) {
        rt.errors[k.c.block_linear][k.thread()] = err;
        rt.block_state = true;
      }
      k.result(uint32_t(err), 4);
      return true;
    }
    case DF_Malloc: {
      // cudaMalloc in a kernel takes from the device heap, as malloc does.
      const uint64_t n = k.arg<uint64_t>(1);
      const uint64_t p = n ? k.c.mem->device_malloc(n) : 0;
      if (!p) err = kMemoryAllocation;
      if (!k.put(k.arg<uint64_t>(0), p, 8)) return false;
      break;
    }
    case DF_Free: {
      const uint64_t p = k.arg<uint64_t>(0);
      if (p && !k.c.mem->device_free(p)) err = kInvalidValue;
      break;
    }
    case DF_RuntimeGetVersion:
      if (!k.put(k.arg<uint64_t>(0), kRuntimeVersion, 4)) return false;
      break;
    case DF_None:
      break;
  }
  set_error(k, err);
  k.result(uint32_t(err), 4);
  return true;
}

}  // namespace

void GridRt::block_done(uint64_t block) {
  if (!block_state.load(std::memory_order_relaxed)) return;
  std::lock_guard lk(mu);
  errors.erase(block);
  auto it = objects_of_block.find(block);
  if (it == objects_of_block.end()) return;
  objects_of_block.erase(it);
  std::erase_if(streams, [&](const auto& kv) { return kv.second == block; });
  std::erase_if(events, [&](const auto& kv) { return kv.second == block; });
}

void GridRt::release_unlaunched() {
  uint32_t n = 0;
  uint64_t bytes = 0;
  {
    std::lock_guard lk(mu);
    for (auto& b : bufs)
      if (!b->launched) {
        ++n;
        bytes += b->bytes.size();
      }
  }
  std::lock_guard lk(tree.mu);
  tree.pending -= n;
  tree.pending_bytes -= bytes;
}

bool devrt_call(Ctx& c, const Inst& I, const Function& callee, const CallSite& cs, uint32_t m) {
  if (!c.rt) {
    c.set_fault(LaunchError::Internal, I, "device runtime call without a grid");
    return false;
  }
  bool ok = true;
  for_lanes_until(m, [&](int l) {
    Call k{c, I, cs, *c.rt, l, c.local + size_t(l) * c.local_stride + c.frame_local};
    ok = call_one(k, DevFn(callee.devrt));
    return ok && !c.fault;
  });
  return ok && !c.fault;
}

uint8_t* devrt_buffer(Ctx& c, uint64_t addr, uint32_t size, bool) {
  if (!c.rt || addr < kLaunchBufs) return nullptr;
  const uint64_t off = addr - kLaunchBufs, slot = off >> kLaunchBufSlotShift,
                 in = off & ((1u << kLaunchBufSlotShift) - 1);
  std::lock_guard lk(c.rt->mu);
  if (slot >= c.rt->bufs.size()) return nullptr;
  GridRt::Buf& b = *c.rt->bufs[slot];
  if (b.launched || in >= b.bytes.size() || size > b.bytes.size() - in) return nullptr;
  return b.bytes.data() + in;
}

}  // namespace wh::ptx::detail
