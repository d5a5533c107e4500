// Internal decoded form of a PTX module and the per-warp execution context.
#pragma once
#include <atomic>
#include <bit>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "mma.hpp"
#include "wormhole/ptx/engine.hpp"

namespace wh::ptx::detail {

constexpr uint32_t NOREG = 0xffffffffu;
constexpr uint32_t CBIT = 0x80000000u;  // source index refers to the constant pool
// Register slots per function: slots are 256 bytes per warp, so this bounds a warp's
// register file at 256 MiB; the launch checks the per-block total against kMaxBlockRegBytes.
constexpr uint32_t kMaxRegs = 1u << 20;
constexpr uint64_t kMaxBlockRegBytes = 1ull << 30;
// Cooperative launches: the grid workspace (cooperative groups' grid_workspace
// {wsSize, barrier}) lives at this generic/global address inside the param window,
// above any parameter offset, so backends need not allocate it.
constexpr uint64_t kGridWorkspace = kParamWindow + 0x8000'0000ull;
constexpr uint32_t kGridWorkspaceBytes = 16;
// Dynamic parallelism: the parameter buffers cudaGetParameterBuffer(V2) hands
// out live in the param window too, one 64 KiB slot each, below the workspace.
constexpr uint64_t kLaunchBufs = kParamWindow + 0x4000'0000ull;
constexpr uint32_t kLaunchBufSlotShift = 16, kLaunchBufSlots = 0x4000;
// Function addresses (function pointers, vtable entries, kernels named by a
// device-side launch): a reserved window no allocation or memory window
// shares, so dereferencing one faults and calling a data address is caught.
// Each holds the module's tag, so a pointer taken in another module is refused.
constexpr uint64_t kFuncWindow = 0xFFFF'FD80'0000'0000ull;
constexpr uint32_t kFuncTagBits = 11, kFuncTagShift = 28, kFuncIndexShift = 4;
inline uint64_t func_addr(uint32_t tag, uint32_t index) {
  return kFuncWindow | uint64_t(tag & ((1u << kFuncTagBits) - 1)) << kFuncTagShift | uint64_t(index) << kFuncIndexShift;
}

enum Ty : uint8_t {
  T_None, T_B8, T_B16, T_B32, T_B64, T_U8, T_U16, T_U32, T_U64, T_S8, T_S16, T_S32, T_S64,
  T_F16, T_F16X2, T_BF16, T_BF16X2, T_F32, T_F64, T_Pred, T_B128
};
inline int ty_bytes(Ty t) {
  switch (t) {
    case T_B8: case T_U8: case T_S8: return 1;
    case T_B16: case T_U16: case T_S16: case T_F16: case T_BF16: return 2;
    case T_B32: case T_U32: case T_S32: case T_F32: case T_F16X2: case T_BF16X2: return 4;
    case T_B64: case T_U64: case T_S64: case T_F64: return 8;
    case T_B128: return 16;
    default: return 0;
  }
}
inline bool ty_signed(Ty t) { return t == T_S8 || t == T_S16 || t == T_S32 || t == T_S64; }
inline bool ty_float(Ty t) { return t == T_F16 || t == T_BF16 || t == T_F32 || t == T_F64; }
const char* ty_name(Ty t);

// Comparisons of setp/set (a handler template argument; the compiler reads it too).
enum Cmp : uint32_t { C_EQ, C_NE, C_LT, C_LE, C_GT, C_GE, C_EQU, C_NEU, C_LTU, C_LEU, C_GTU, C_GEU, C_NUM, C_NAN };

enum class Sp : uint8_t { Generic, Global, Const, Shared, Local, KParam };
const char* sp_name(Sp);

// Address base kinds of a memory operand [base + off]
enum AVK : uint8_t { AV_None, AV_Imm /*avar is an absolute offset (kernel param)*/, AV_Local, AV_Shared, AV_Global };

enum class Ctl : uint8_t { None, Bra, Call, Ret, Exit, Bar, Trap, Printf, Assert, BadCall, Sreg, Yield, Malloc, Free, ICall, DevRt };

// Inst::sched bits: scheduling hints computed at load time.
constexpr uint8_t kSchedPoll = 1;  // polls memory: volatile/acquire/relaxed ld, atom cas/exch, atom add/or/xor of 0
constexpr uint8_t kSchedBack = 2;  // backward branch: a loop, where a warp may be preempted
constexpr uint8_t kSchedSpin = 4;  // backward branch of a short loop that polls: likely a spin-wait

struct Ctx;
struct Inst;
using Handler = void (*)(Ctx&, const Inst&, uint32_t mask);

struct Inst {
  Handler fn = nullptr;
  Ctl ctl = Ctl::None;
  uint8_t flags = 0;
  uint8_t nd = 0, ns = 0;
  bool gneg = false;
  Sp space = Sp::Generic;
  AVK avk = AV_None;
  uint8_t sched = 0;  // kSched* bits
  uint32_t guard = NOREG;
  uint32_t d[4] = {NOREG, NOREG, NOREG, NOREG};
  uint32_t s[4] = {NOREG, NOREG, NOREG, NOREG};
  uint32_t areg = NOREG;
  uint32_t avar = 0;
  int64_t aoff = 0;
  uint32_t a0 = 0, a1 = 0;  // aux: branch target, call site, barrier id/count, modes...
  uint32_t line = 0;
};

struct Param {
  uint32_t offset, size, align;
};

struct CallSite {
  uint32_t callee;                 // function index; NOREG for an indirect call
  std::vector<uint32_t> arg_off;   // caller frame offsets of the argument param vars
  std::vector<uint32_t> ret_off;   // caller frame offsets of the return param vars
  // Indirect calls: the sizes the .callprototype declares (a callee's
  // parameters and results must match them), its label, and the functions a
  // .calltargets list allows (empty: any).
  std::vector<uint32_t> arg_size, ret_size;
  std::string proto;
  std::vector<uint32_t> targets;
};

struct Function {
  std::string name;
  bool is_entry = false, defined = false, is_extern = false;
  int builtin = 0;  // 1 vprintf, 2 __assertfail, 3 malloc, 4 free, 5 device runtime (devrt)
  uint8_t devrt = 0;  // builtin 5: which device-runtime function (devrt.hpp)
  bool calls_heap = false;  // calls malloc or free directly
  bool addr_taken = false;  // its address is a value (function pointer, vtable, device launch)
  bool calls_indirect = false, launches = false;  // has indirect calls; launches kernels (devrt)
  std::vector<uint32_t> icallees;  // what its indirect calls may reach: address-taken functions of a matching shape
  std::vector<Param> params, rets;  // formal (entry: offsets in the param buffer; func: frame offsets)
  uint32_t param_bytes = 0;
  std::vector<Inst> code;
  std::vector<CallSite> calls;
  std::vector<uint32_t> spin_regs;  // registers polled by spin-wait loops (see Inst::sched)
  std::vector<MmaOp> mma;           // tensor-core instructions' operands (Inst::a0 indexes it)
  uint32_t nregs = 0;        // register slots
  uint32_t frame_bytes = 0;  // per-lane local frame: formal params, rets, .local vars, call-site params
  int maxntid = 0;
  int maxnreg = 0;  // .maxnreg: the register count a GPU's compiler keeps to
  std::vector<uint32_t> callees, shared_used, globals_used;
  bool reserved_shared = false;  // reads a %reserved_smem_offset_* register
  uint32_t decl_line = 0;
  std::string unsupported;  // first unsupported construct (reported at launch)
  uint32_t unsupported_line = 0;
};

// Atomic operations (h_atom).
enum AOp { A_ADD, A_MIN, A_MAX, A_EXCH, A_CAS, A_INC, A_DEC, A_AND, A_OR, A_XOR };

// Special registers (mov d, %tid.x ...): Inst::a0 of h_sreg.
enum Sreg : uint32_t {
  SR_TID = 0, SR_NTID = 3, SR_CTAID = 6, SR_NCTAID = 9, SR_LANEID = 12, SR_WARPID, SR_NWARPID, SR_SMID, SR_NSMID,
  SR_GRIDID, SR_LM_EQ, SR_LM_LE, SR_LM_LT, SR_LM_GE, SR_LM_GT, SR_CLOCK, SR_CLOCK64, SR_GTIMER, SR_DYNSMEM,
  SR_TOTSMEM, SR_ZERO, SR_GTIMER_LO, SR_GTIMER_HI, SR_ENVREG1, SR_ENVREG2,
  SR_RSV_BEGIN, SR_RSV_END, SR_RSV_CAP, SR_RSV_0, SR_RSV_1
};

struct SharedVar {
  std::string name;
  uint64_t size;
  uint32_t align;
  bool is_extern;
};

// Shared memory a GPU of compute capability 8.0 and later reserves for the
// system in every block (cudaDevAttrReservedSharedMemoryPerBlock): here only
// kernels that ask for it (%reserved_smem_offset_*) get it.
constexpr uint32_t kReservedShared = 1024;

struct KernelData {
  uint32_t func;
  std::vector<uint32_t> funcs;  // the kernel and every function it may reach (calls, function pointers)
  std::vector<uint32_t> shared_off;  // per SharedVar (only referenced ones meaningful)
  uint32_t static_shared = 0;
  uint32_t dyn_align = 16;
  uint32_t local_stack = 0;  // bytes per lane
  uint32_t reg_stack = 0;    // register slots per warp stack
  bool recursive = false;
  std::vector<uint32_t> globals_used;
};

struct JitState;
// Immutable once parsed: loads of the same text by one tenant share it (the
// compile cache, module_cache.cpp); a load's variable addresses are its own
// (Module::gaddr).
struct ModuleImpl : std::enable_shared_from_this<ModuleImpl> {
  std::string text;
  std::vector<uint32_t> line_start;
  std::vector<Function> funcs;
  std::unordered_map<std::string, uint32_t> func_by_name;
  std::vector<SharedVar> shared;
  std::vector<GlobalVar> globals;
  std::vector<uint64_t> cpool;  // rows of 32 identical values
  std::vector<KernelInfo> kernels;
  std::vector<KernelData> kdata;
  std::vector<uint32_t> kernel_of_func;  // function index -> kdata index (NOREG: not a kernel)
  uint32_t tag = 0;     // in function addresses (func_addr), unique per loaded module mod 2^11
  int target_arch = 0;  // from .target sm_XX (0: none given)
  std::shared_ptr<JitState> jit;  // compiled code (jit.hpp)
  // The function a function address names, or NOREG.
  uint32_t func_at(uint64_t a) const {
    if ((a & ~((uint64_t(1) << (kFuncTagShift + kFuncTagBits)) - 1)) != kFuncWindow) return NOREG;
    if (((a >> kFuncTagShift) & ((1u << kFuncTagBits) - 1)) != (tag & ((1u << kFuncTagBits) - 1))) return NOREG;
    uint64_t off = a & ((uint64_t(1) << kFuncTagShift) - 1);
    if (off & ((1u << kFuncIndexShift) - 1)) return NOREG;
    off >>= kFuncIndexShift;
    return off < funcs.size() ? uint32_t(off) : NOREG;
  }
  std::string line_text(uint32_t line) const;
};

// Parse PTX into `m`; throws nothing, returns false with message.
bool parse_module(std::string_view text, ModuleImpl& m, std::string* err);

// The launch checks a host launch and a device-side launch share (block and
// grid shape, shared memory, parameter size, registers, unsupported code).
// `gbound`: which of the module's variables this load has bound.
LaunchError check_launch(const ModuleImpl& M, const uint8_t* gbound, const KernelData& kd, const LaunchConfig& cfg,
                         size_t params_size);

// The compile cache (module_cache.cpp): the parsed module of `text` for
// `tenant`, shared with the tenant's other loads of the same text while any
// is loaded, and kept a while after (the last kModulesKept modules that any
// tenant loaded); parsed by `parse` when not there. An empty tenant never
// shares. Null: `parse` failed (*err says why).
constexpr size_t kModulesKept = 256;  // PyTorch loads one module per Triton kernel
constexpr uint64_t kModuleBytesKept = 256ull << 20;  // of PTX text, over the kept modules
std::shared_ptr<const ModuleImpl> shared_module(std::string_view text, std::string_view tenant,
                                                std::shared_ptr<ModuleImpl> (*parse)(std::string_view, std::string*),
                                                std::string* err, bool* hit);

// ---- execution context (one per worker, describes the current warp) ----
struct Warp;
struct GridRt;
struct Ctx {
  uint64_t* regs = nullptr;
  const uint64_t* cpool = nullptr;
  const ModuleImpl* mod = nullptr;
  const KernelData* kd = nullptr;
  const Function* func = nullptr;  // current function (for messages)
  Warp* warp = nullptr;
  uint32_t warp_id = 0, nwarps = 0;
  const uint32_t* tid[3] = {nullptr, nullptr, nullptr};
  Dim3 ntid, nctaid;
  uint32_t ctaid[3] = {0, 0, 0};
  uint8_t* shared = nullptr;
  uint32_t shared_size = 0, dyn_shared = 0;
  uint8_t* local = nullptr;
  uint32_t local_stride = 0, frame_local = 0;
  const uint8_t* kparam = nullptr;
  uint32_t kparam_size = 0;
  DeviceMemory* mem = nullptr;
  DeviceMemory::Region rc{};
  DeviceMemory::Region rc2[3]{};  // compiled code: the regions before rc, newest first, taken back on a miss
  // Compiled code: the region each global access instruction reached last (by the
  // instruction's number modulo the count), so that kernels reading several arrays
  // in turn find each one without a lookup.
  static constexpr uint32_t kJitRegionSlots = 32;
  DeviceMemory::Region jrc[kJitRegionSlots]{};
  const uint32_t* shared_off = nullptr;
  const uint64_t* gaddr = nullptr;
  uint8_t* gridws = nullptr;  // cooperative launch workspace (host memory), else null
  uint64_t gridws_addr = 0;   // its device address as %envreg1:%envreg2 report it (0: none)
  GridRt* rt = nullptr;       // device runtime state of the grid (dynamic parallelism)
  uint64_t block_linear = 0;  // the block's index in the grid
  bool fault = false;
  // The last texture/surface object resolved (kernels use one or two objects).
  uint64_t tex_handle = 0;
  bool tex_is_surf = false;
  TexView tex;
  uint8_t* tex_host = nullptr;
  LaunchError err;
  uint64_t icount = 0;

  const uint64_t* src(uint32_t s) const { return (s & CBIT) ? cpool + uint64_t(s & ~CBIT) * 32 : regs + uint64_t(s) * 32; }
  uint64_t* dst(uint32_t d) const { return regs + uint64_t(d) * 32; }

  void set_fault(LaunchError::Kind k, const Inst& I, std::string what);
  void bad_access(const Inst& I, uint64_t addr, uint32_t size, Sp sp, bool write, const char* why);
  uint8_t* gptr_slow(const Inst& I, uint64_t addr, uint32_t size, bool write, Sp sp);
  // The host bytes of [addr, addr+size) when one device-memory region holds them all
  // (the region last reached, else looked up and remembered in rc); nullptr, without
  // a fault, otherwise.
  uint8_t* region_ptr(uint64_t addr, uint64_t size, bool write);
  uint8_t* gptr(const Inst& I, uint64_t addr, uint32_t size, bool write, Sp sp) {
    if (addr - rc.base < rc.size && size <= rc.size - (addr - rc.base) && (!write || rc.writable))
      return rc.host + (addr - rc.base);
    return gptr_slow(I, addr, size, write, sp);
  }
};

template <class F>
inline void for_lanes(uint32_t m, F&& f) {
  if (m == 0xffffffffu) {
    for (int l = 0; l < 32; ++l) f(l);
  } else {
    while (m) {
      int l = std::countr_zero(m);
      m &= m - 1;
      f(l);
    }
  }
}
// Stops at the first lane for which f returns false.
template <class F>
inline void for_lanes_until(uint32_t m, F&& f) {
  while (m) {
    int l = std::countr_zero(m);
    m &= m - 1;
    if (!f(l)) return;
  }
}

// half / bfloat16 helpers
uint16_t to_narrow(double v, int ebits, int mbits, int mode /*0 rn,1 rz,2 rm,3 rp*/);
inline uint16_t to_half(double v, int mode = 0) { return to_narrow(v, 5, 10, mode); }
inline uint16_t to_bf16(double v, int mode = 0) { return to_narrow(v, 8, 7, mode); }
float half_to_float(uint16_t h);
inline float bf16_to_float(uint16_t h) { return std::bit_cast<float>(uint32_t(h) << 16); }

// Handlers implemented in rounding.cpp (compiled with -frounding-math)
// a1 low bits: rounding mode 0 rn 1 rz 2 rm 3 rp
void h_f32_dir(Ctx&, const Inst&, uint32_t);   // add/sub/mul/fma/div/sqrt/rcp f32 with directed rounding; a0 = op
void h_f64_dir(Ctx&, const Inst&, uint32_t);
void h_cvt_generic(Ctx&, const Inst&, uint32_t);  // any cvt; a0 = dst type, a1 = src type | mode<<8 | flags<<16

}  // namespace wh::ptx::detail
