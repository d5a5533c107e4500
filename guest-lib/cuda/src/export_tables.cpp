// cuGetExportTable: the driver's private interface tables.
//
// NVIDIA's runtime (the static libcudart inside every default-built program,
// and the copy inside each of NVIDIA's libraries) asks libcuda.so.1 for a few
// tables of function pointers identified by UUID before it makes its first
// public driver call. They are not documented; what each is used for, as far
// as we determined it by watching the CUDA 13 runtime call them, and what
// Wormhole answers, is in docs/export-tables.md. In short:
//   - the runtime checks the driver with an HMAC-MD2 over its version, the
//     process, the tables' addresses and every device's UUID and PCI place
//     (integrity table), and refuses to run on a mismatch;
//   - it keeps its per-context state in the driver's context-local storage;
//   - it gets the primary context and loads fatbins through the cudart
//     interface table, and reads two scratch buffers from the tools table.
// Everything here is implemented on this library's public functions, so
// the tables see the same session and context as the driver API.
//
// A slot we never saw called answers CUDA_ERROR_NOT_SUPPORTED and logs its
// table and index once: its signature is unknown, and an int status in eax
// is what every slot we know returns. An unknown table id is an error
// (CUDA_ERROR_INVALID_VALUE), never a crash: the runtime asks for tables it
// can do without (f8cff951-... of CUDA 13 is one).
#include <cuda.h>
#include <nettle/hmac.h>
#include <nettle/md2.h>
#include <nettle/nettle-meta.h>
#include <pthread.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "driver.hpp"

namespace {

using Slot = const void*;

void log_once(const char* table, int slot) {
  static std::mutex mu;
  static std::set<std::pair<const char*, int>> seen;
  std::lock_guard lk(mu);
  if (seen.insert({table, slot}).second)
    std::fprintf(stderr, "wormhole: driver export table %s slot %d is not supported\n", table, slot);
}

// One "not supported" function per (table, slot), generated: the slot's
// index must be known without arguments we cannot read.
template <const char* const* Table, int N>
CUresult unsupported() {
  log_once(*Table, N);
  return CUDA_ERROR_NOT_SUPPORTED;
}

template <const char* const* Table, size_t... I>
std::array<Slot, sizeof...(I)> unsupported_slots(std::index_sequence<I...>) {
  return {reinterpret_cast<Slot>(&unsupported<Table, int(I)>)...};
}

// A table of `Len` slots: slot 0 holds the table's size in bytes (as the
// driver's do, except context-local storage), the rest start unsupported.
template <const char* const* Name, size_t Len>
struct Table {
  std::array<Slot, Len> slots = unsupported_slots<Name>(std::make_index_sequence<Len>());
  explicit Table(bool sized = true) {
    if (sized) slots[0] = reinterpret_cast<Slot>(uintptr_t(Len * sizeof(Slot)));
  }
  template <class F>
  Table& set(size_t i, F* f) {
    slots[i] = reinterpret_cast<Slot>(f);
    return *this;
  }
};

// ------------------------------------------------ cudart interface
// {6bd5fb6c-5bf4-e74a-8987-d93912fd9df9}
//   [1] module from a __fatBinC_Wrapper_t     [2] primary context of a device
//   [6] module from a wrapper (with options)   [8] module from a bare fatbin
//   [7] takes one word, returns success        [12] "load compilers": success

// __fatBinC_Wrapper_t: what nvcc emits around each translation unit's fatbin.
struct FatbinWrapper {
  int32_t magic;  // 0x466243b1
  int32_t version;
  const void* data;  // the fatbin (magic 0xba55ed50)
  const void* filename_or_fatbins;
};
constexpr int32_t kWrapperMagic = 0x466243b1;

CUresult module_from_image(CUmodule* mod, const void* image) {
  if (!mod || !image) return CUDA_ERROR_INVALID_VALUE;
  auto* w = static_cast<const FatbinWrapper*>(image);
  if (w->magic == kWrapperMagic) image = w->data;
  return cuModuleLoadFatBinary(mod, image);
}
CUresult rt_module(CUmodule* mod, const void* wrapper) { return module_from_image(mod, wrapper); }
CUresult rt_module_ex(CUmodule* mod, const void* wrapper, void*, void*, unsigned) {
  return module_from_image(mod, wrapper);
}
CUresult rt_module_ex2(const void* fatbin, CUmodule* mod, void*, void*, unsigned) {
  return module_from_image(mod, fatbin);
}
CUresult rt_primary_context(CUcontext* ctx, CUdevice dev) { return cuDevicePrimaryCtxRetain(ctx, dev); }
CUresult rt_success_word(uintptr_t) { return CUDA_SUCCESS; }
CUresult rt_success() { return CUDA_SUCCESS; }

constexpr const char* kCudartName = "cudart-interface";
Table<&kCudartName, 13>& cudart_table() {
  static Table<&kCudartName, 13> t = std::move(Table<&kCudartName, 13>()
                                                   .set(1, &rt_module)
                                                   .set(2, &rt_primary_context)
                                                   .set(6, &rt_module_ex)
                                                   .set(7, &rt_success_word)
                                                   .set(8, &rt_module_ex2)
                                                   .set(12, &rt_success));
  return t;
}

// ------------------------------------------------ tools runtime hooks
// {a094798c-2e74-2e74-93f2-0800200c0a66}
//   [2], [6] hand the runtime a scratch buffer and its length: where a
//   profiler's callbacks would be published. No tools run here, so they stay
//   zero; the buffers are larger than the lengths we report (whether a
//   length counts bytes or words is not known).
uint64_t g_hook_buffer1[1024];
uint64_t g_hook_buffer2[14];
void hooks_buffer1(void** p, size_t* n) {
  if (p) *p = g_hook_buffer1;
  if (n) *n = 1024;
}
void hooks_buffer2(void** p, size_t* n) {
  if (p) *p = g_hook_buffer2;
  if (n) *n = 14;
}
constexpr const char* kHooksName = "tools-runtime-hooks";
Table<&kHooksName, 7>& hooks_table() {
  static Table<&kHooksName, 7> t = std::move(Table<&kHooksName, 7>().set(2, &hooks_buffer1).set(6, &hooks_buffer2));
  return t;
}

// ------------------------------------------------ tools TLS
// {42d85a81-23f6-cb47-8298-f6e78a3aecdc}: asked for, never called.
constexpr const char* kToolsTlsName = "tools-tls";
Table<&kToolsTlsName, 4>& tools_tls_table() {
  static Table<&kToolsTlsName, 4> t;
  return t;
}

// ------------------------------------------------ context-local storage
// {c693336e-1121-df11-a8c3-68f355d89593}, no size slot:
//   [0] put(ctx, key, value, destructor)  [1] delete(ctx, key)
//   [2] get(&value, ctx, key)
// A null context means the calling thread's current one. The runtime keeps
// its whole per-context state here (one key per runtime instance).
struct ClsEntry {
  CUcontext ctx;
  void* key;
  void* value;
  void (*dtor)(CUcontext, void*, void*);
};
std::mutex g_cls_mu;
std::vector<ClsEntry> g_cls;

CUcontext ctx_or_current(CUcontext ctx) {
  if (!ctx && cuCtxGetCurrent(&ctx) != CUDA_SUCCESS) ctx = nullptr;
  return ctx;
}
CUresult cls_put(CUcontext ctx, void* key, void* value, void (*dtor)(CUcontext, void*, void*)) {
  ctx = ctx_or_current(ctx);
  std::lock_guard lk(g_cls_mu);
  for (ClsEntry& e : g_cls)
    if (e.ctx == ctx && e.key == key) {
      e.value = value;
      e.dtor = dtor;
      return CUDA_SUCCESS;
    }
  g_cls.push_back({ctx, key, value, dtor});
  return CUDA_SUCCESS;
}
CUresult cls_delete(CUcontext ctx, void* key) {
  ctx = ctx_or_current(ctx);
  std::lock_guard lk(g_cls_mu);
  for (size_t i = 0; i < g_cls.size(); ++i)
    if (g_cls[i].ctx == ctx && g_cls[i].key == key) {
      g_cls.erase(g_cls.begin() + long(i));
      return CUDA_SUCCESS;
    }
  return CUDA_ERROR_INVALID_HANDLE;
}
CUresult cls_get(void** value, CUcontext ctx, void* key) {
  if (!value) return CUDA_ERROR_INVALID_VALUE;
  ctx = ctx_or_current(ctx);
  std::lock_guard lk(g_cls_mu);
  for (const ClsEntry& e : g_cls)
    if (e.ctx == ctx && e.key == key) {
      *value = e.value;
      return CUDA_SUCCESS;
    }
  return CUDA_ERROR_INVALID_HANDLE;  // the runtime's "not yet": it then puts
}
}  // namespace

// On cuDevicePrimaryCtxReset: each entry's destructor, then the entries go.
void wh::driver::context_storage_destroyed(CUcontext ctx) {
  std::vector<ClsEntry> gone;
  {
    std::lock_guard lk(g_cls_mu);
    for (size_t i = 0; i < g_cls.size();)
      if (g_cls[i].ctx == ctx) {
        gone.push_back(g_cls[i]);
        g_cls.erase(g_cls.begin() + long(i));
      } else {
        ++i;
      }
  }
  for (const ClsEntry& e : gone)  // outside the lock: a destructor may call back in
    if (e.dtor) e.dtor(e.ctx, e.key, e.value);
}

namespace {
constexpr const char* kClsName = "context-local-storage";
Table<&kClsName, 4>& cls_table() {
  static Table<&kClsName, 4> t =
      std::move(Table<&kClsName, 4>(false).set(0, &cls_put).set(1, &cls_delete).set(2, &cls_get));
  return t;
}

// ------------------------------------------------ context checks
// {263e8860-7cd2-6143-92f6-bbd5006dfa7e}
//   [2] check(ctx, &flags, &ptr): before each context use; answers "nothing
//       special" (0, null)   [3] called once at start: 0
CUresult check_context(CUcontext, uint32_t* flags, const void** ptr) {
  if (flags) *flags = 0;
  if (ptr) *ptr = nullptr;
  return CUDA_SUCCESS;
}
uint32_t check_zero() { return 0; }
constexpr const char* kChecksName = "context-checks";
Table<&kChecksName, 4>& checks_table() {
  static Table<&kChecksName, 4> t = std::move(Table<&kChecksName, 4>().set(2, &check_context).set(3, &check_zero));
  return t;
}

// ------------------------------------------------ integrity check
// {d4082055-bde6-704b-8d34-ba123c66e1f2}
//   [1] check(version, unix_seconds, out[2]): the runtime calls it for
//       version = V*10, V*10+1 and V*10+2 (V its runtime version) and
//       compares with what it computes itself. For the last digit 0 and 1
//       the answer is a constant; otherwise it is HMAC-MD2 (key below) over
//       { driver version, version, pid, (uint32) pthread_self, address of
//       the cudart interface table, of this table, of this function,
//       unix_seconds } followed by { uuid[16], pci domain, bus, device } of
//       every device, as the driver reports them.
CUresult integrity_check(uint32_t version, uint64_t unix_seconds, uint64_t out[2]);
constexpr const char* kIntegrityName = "integrity-check";
Table<&kIntegrityName, 3>& integrity_table() {
  static Table<&kIntegrityName, 3> t = std::move(Table<&kIntegrityName, 3>().set(1, &integrity_check));
  return t;
}

CUresult integrity_check(uint32_t version, uint64_t unix_seconds, uint64_t out[2]) {
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  switch (version % 10) {
    case 0: out[0] = 0x3341181C03CB675CULL, out[1] = 0x8ED383AA1F4CD1E8ULL; return CUDA_SUCCESS;
    case 1: out[0] = 0x1841181C03CB675CULL, out[1] = 0x8ED383AA1F4CD1E8ULL; return CUDA_SUCCESS;
    default: break;
  }
  static constexpr uint8_t kKey[16] = {0x14, 0x6A, 0xDD, 0xAE, 0x53, 0xA9, 0xA7, 0x52,
                                       0xAA, 0x08, 0x41, 0x36, 0x0B, 0xF5, 0x5A, 0x9F};
  struct {
    uint32_t driver_version, version, pid, tid;
    const void *cudart, *integrity, *fn;
    uint64_t unix_seconds;
  } head{};
  int driver = 0;
  if (CUresult e = cuDriverGetVersion(&driver); e != CUDA_SUCCESS) return e;
  head.driver_version = uint32_t(driver);
  head.version = version;
  head.pid = uint32_t(getpid());
  head.tid = uint32_t(uintptr_t(pthread_self()));
  head.cudart = cudart_table().slots.data();
  head.integrity = integrity_table().slots.data();
  head.fn = integrity_table().slots[1];
  head.unix_seconds = unix_seconds;

  struct md2_ctx outer, inner, state;
  hmac_set_key(&outer, &inner, &state, &nettle_md2, sizeof kKey, kKey);
  hmac_update(&state, &nettle_md2, sizeof head, reinterpret_cast<const uint8_t*>(&head));
  int count = 0;
  if (CUresult e = cuDeviceGetCount(&count); e != CUDA_SUCCESS) return e;
  for (int d = 0; d < count; ++d) {
    struct {
      CUuuid uuid;
      int32_t domain, bus, device;
    } dev{};
    if (cuDeviceGetUuid_v2(&dev.uuid, d) != CUDA_SUCCESS ||
        cuDeviceGetAttribute(&dev.domain, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, d) != CUDA_SUCCESS ||
        cuDeviceGetAttribute(&dev.bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, d) != CUDA_SUCCESS ||
        cuDeviceGetAttribute(&dev.device, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, d) != CUDA_SUCCESS)
      return CUDA_ERROR_UNKNOWN;
    hmac_update(&state, &nettle_md2, sizeof dev, reinterpret_cast<const uint8_t*>(&dev));
  }
  hmac_digest(&outer, &inner, &state, &nettle_md2, 16, reinterpret_cast<uint8_t*>(out));
  return CUDA_SUCCESS;
}

// ------------------------------------------------ context creation bypass
// {0ca50b8c-1004-929a-89a7-d0df10e77286}
//   [1] create(&ctx, flags, device): cuCtxCreate by another door.
CUresult bypass_ctx_create(CUcontext* ctx, unsigned flags, CUdevice dev) { return cuCtxCreate_v4(ctx, nullptr, flags, dev); }
constexpr const char* kBypassName = "context-create-bypass";
Table<&kBypassName, 2>& bypass_table() {
  static Table<&kBypassName, 2> t = std::move(Table<&kBypassName, 2>().set(1, &bypass_ctx_create));
  return t;
}

// ------------------------------------------------ device extensions
// {b10541e1-f7c7-c74a-9f64-f223be99f1e2}
//   [13] one byte per device that reads 0 on GPUs: answered 0.
CUresult device_flag(unsigned char* out, CUdevice) {
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  *out = 0;
  return CUDA_SUCCESS;
}
constexpr const char* kDeviceExtName = "device-extended";
Table<&kDeviceExtName, 26>& device_ext_table() {
  static Table<&kDeviceExtName, 26> t = std::move(Table<&kDeviceExtName, 26>().set(13, &device_flag));
  return t;
}

// ------------------------------------------------ heap access
// {195bcbf4-d67d-024a-acc5-1d29cea631ae}: semantics unknown, all slots
// unsupported (the runtime of CUDA 13 does not ask for it).
constexpr const char* kHeapName = "heap-access";
Table<&kHeapName, 3>& heap_table() {
  static Table<&kHeapName, 3> t;
  return t;
}

struct Known {
  uint8_t id[16];
  Slot* (*table)();
};
const Known kKnown[] = {
    {{0x6b, 0xd5, 0xfb, 0x6c, 0x5b, 0xf4, 0xe7, 0x4a, 0x89, 0x87, 0xd9, 0x39, 0x12, 0xfd, 0x9d, 0xf9},
     [] { return cudart_table().slots.data(); }},
    {{0xa0, 0x94, 0x79, 0x8c, 0x2e, 0x74, 0x2e, 0x74, 0x93, 0xf2, 0x08, 0x00, 0x20, 0x0c, 0x0a, 0x66},
     [] { return hooks_table().slots.data(); }},
    {{0x42, 0xd8, 0x5a, 0x81, 0x23, 0xf6, 0xcb, 0x47, 0x82, 0x98, 0xf6, 0xe7, 0x8a, 0x3a, 0xec, 0xdc},
     [] { return tools_tls_table().slots.data(); }},
    {{0xc6, 0x93, 0x33, 0x6e, 0x11, 0x21, 0xdf, 0x11, 0xa8, 0xc3, 0x68, 0xf3, 0x55, 0xd8, 0x95, 0x93},
     [] { return cls_table().slots.data(); }},
    {{0x26, 0x3e, 0x88, 0x60, 0x7c, 0xd2, 0x61, 0x43, 0x92, 0xf6, 0xbb, 0xd5, 0x00, 0x6d, 0xfa, 0x7e},
     [] { return checks_table().slots.data(); }},
    {{0xd4, 0x08, 0x20, 0x55, 0xbd, 0xe6, 0x70, 0x4b, 0x8d, 0x34, 0xba, 0x12, 0x3c, 0x66, 0xe1, 0xf2},
     [] { return integrity_table().slots.data(); }},
    {{0x0c, 0xa5, 0x0b, 0x8c, 0x10, 0x04, 0x92, 0x9a, 0x89, 0xa7, 0xd0, 0xdf, 0x10, 0xe7, 0x72, 0x86},
     [] { return bypass_table().slots.data(); }},
    {{0xb1, 0x05, 0x41, 0xe1, 0xf7, 0xc7, 0xc7, 0x4a, 0x9f, 0x64, 0xf2, 0x23, 0xbe, 0x99, 0xf1, 0xe2},
     [] { return device_ext_table().slots.data(); }},
    {{0x19, 0x5b, 0xcb, 0xf4, 0xd6, 0x7d, 0x02, 0x4a, 0xac, 0xc5, 0x1d, 0x29, 0xce, 0xa6, 0x31, 0xae},
     [] { return heap_table().slots.data(); }},
};

}  // namespace

extern "C" __attribute__((visibility("default"))) CUresult cuGetExportTable(const void** table,
                                                                            const CUuuid* id) {
  if (!table || !id) return CUDA_ERROR_INVALID_VALUE;
  if (wh::driver::foreign_runtime()) {
    *table = nullptr;
    return CUDA_ERROR_NOT_INITIALIZED;
  }
  for (const Known& k : kKnown)
    if (std::memcmp(k.id, id->bytes, 16) == 0) {
      *table = k.table();
      return CUDA_SUCCESS;
    }
  *table = nullptr;
  return CUDA_ERROR_INVALID_VALUE;
}
