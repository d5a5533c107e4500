// The PTX compiler's code generator (libwormhole-ptx-jit.so, see jit.hpp): the
// generator of one compile (Gen) and what its parts share. jit.cpp: the LLVM
// JIT, a function's blocks and control flow, the instruction dispatch;
// jit_mem.cpp: loads, stores and atomics; jit_ops.cpp: the other inlined
// instructions (special registers, shuffles, votes, conversions, directed
// rounding, libm's functions).
#pragma once
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/Module.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "jit.hpp"

namespace wh::ptx::detail::jitgen {

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winvalid-offsetof"
// Fields of Ctx the compiled code reads (Ctx is not standard-layout; GCC lays it out as written).
inline const uint64_t kOffRegs = offsetof(Ctx, regs), kOffShared = offsetof(Ctx, shared),
               kOffSharedSize = offsetof(Ctx, shared_size), kOffFault = offsetof(Ctx, fault),
               kOffRc = offsetof(Ctx, rc), kRegionBase = offsetof(DeviceMemory::Region, base),
               kRegionSize = offsetof(DeviceMemory::Region, size), kRegionHost = offsetof(DeviceMemory::Region, host),
               kRegionWritable = offsetof(DeviceMemory::Region, writable),
               kOffSharedOffPtr = offsetof(Ctx, shared_off), kOffGaddrPtr = offsetof(Ctx, gaddr),
               kOffTid = offsetof(Ctx, tid), kOffNtid = offsetof(Ctx, ntid), kOffNctaid = offsetof(Ctx, nctaid),
               kOffCtaid = offsetof(Ctx, ctaid), kOffWarpId = offsetof(Ctx, warp_id), kOffNwarps = offsetof(Ctx, nwarps),
               kOffDynShared = offsetof(Ctx, dyn_shared), kOffGridwsAddr = offsetof(Ctx, gridws_addr),
               kOffKparam = offsetof(Ctx, kparam), kOffKparamSize = offsetof(Ctx, kparam_size),
               kOffJrc = offsetof(Ctx, jrc);
#pragma GCC diagnostic pop

// Compiled code's calls into the server (jit_mem.cpp, jit_ops.cpp).
void jit_refresh(Ctx* c, uint64_t addr, DeviceMemory::Region* slot);
void jit_libm32(float* v, uint32_t op);

// Generates the functions of one compile (a kernel and what it may call).
struct Gen {
  llvm::LLVMContext& C;
  llvm::Module& Mod;
  const ModuleImpl& M;
  llvm::IRBuilder<> B;
  llvm::Type *i1, *i8, *i16, *i32, *i64, *f32, *f64, *ptr;
  llvm::FunctionType* handler_ty;
  // per block
  llvm::Function* fn = nullptr;
  llvm::Value *ctx = nullptr, *regs = nullptr, *count = nullptr, *active = nullptr;
  // A register's value in this block: 64-bit lanes (v), or for a 32-bit value a whole
  // warp wrote, the <32 x i32> lanes (narrow; v null) and how they widen to the
  // file's 64 bits. 32-bit arithmetic on narrow values stays in 32-bit vectors (half
  // the vector registers, no conversions) until the block writes the file back.
  struct Cached {
    llvm::Value* v;
    bool dirty;
    llvm::Value* narrow = nullptr;
    bool sext = false;
  };
  std::map<uint32_t, Cached> cache;  // slot -> value
  // Type-based alias tags: the register file, device (global, shared, parameter)
  // memory and the counters never overlap, so the optimizer may keep a register's
  // value in a vector register across a store to memory and between blocks.
  llvm::MDNode *tb_reg = nullptr, *tb_mem = nullptr, *tb_misc = nullptr;
  template <class T>
  T* tag(T* i, llvm::MDNode* t) {
    i->setMetadata(llvm::LLVMContext::MD_tbaa, t);
    return i;
  }
  template <class T>
  T* mem(T* i) { return tag(i, tb_mem); }
  uint32_t memops = 0;                // global accesses so far (their Ctx::jrc slots)

  Gen(llvm::LLVMContext& c, llvm::Module& mod, const ModuleImpl& m) : C(c), Mod(mod), M(m), B(c) {
    i1 = B.getInt1Ty();
    i8 = B.getInt8Ty();
    i16 = B.getInt16Ty();
    i32 = B.getInt32Ty();
    i64 = B.getInt64Ty();
    f32 = B.getFloatTy();
    f64 = B.getDoubleTy();
    ptr = B.getPtrTy();
    handler_ty = llvm::FunctionType::get(B.getVoidTy(), {ptr, ptr, i32}, false);
    llvm::MDBuilder mb(C);
    llvm::MDNode* root = mb.createTBAARoot("wormhole ptx jit");
    auto node = [&](const char* n) {
      llvm::MDNode* t = mb.createTBAAScalarTypeNode(n, root);
      return mb.createTBAAStructTagNode(t, t, 0);
    };
    tb_reg = node("register file");
    tb_mem = node("device memory");
    tb_misc = node("counters");
  }

  llvm::VectorType* vec(llvm::Type* t) { return llvm::FixedVectorType::get(t, 32); }
  llvm::Value* field(uint64_t off, llvm::Type* t) {
    return B.CreateLoad(t, B.CreateConstGEP1_64(i8, ctx, off));
  }
  llvm::Value* splat64(uint64_t v) { return B.CreateVectorSplat(32, B.getInt64(v)); }

  // ---- the register file ----
  llvm::Value* slot_ptr(uint32_t s) { return B.CreateConstGEP1_64(i8, regs, uint64_t(s) * 256); }
  static llvm::Value* widen(llvm::IRBuilder<>& B, const Cached& c, llvm::Type* to) {
    return c.v ? c.v : c.sext ? B.CreateSExt(c.narrow, to) : B.CreateZExt(c.narrow, to);
  }
  llvm::Value* reg(uint32_t s) {
    if (s & CBIT) return splat64(M.cpool[uint64_t(s & ~CBIT) * 32]);
    auto it = cache.find(s);
    if (it != cache.end()) return widen(B, it->second, vec(i64));  // a widening is not cached: it may sit in a branch
    llvm::Value* v = tag(B.CreateAlignedLoad(vec(i64), slot_ptr(s), llvm::Align(8)), tb_reg);
    cache[s] = {v, false};
    return v;
  }
  // The low n bits of register s's lanes.
  llvm::Value* ri(uint32_t s, int n) {
    if (n == 32 && !(s & CBIT)) {
      auto it = cache.find(s);
      if (it != cache.end() && it->second.narrow) return it->second.narrow;
    }
    return as_int(reg(s), n);
  }
  llvm::Value* rf(uint32_t s) { return B.CreateBitCast(ri(s, 32), vec(f32)); }
  static bool all_lanes(llvm::Value* mask) {
    auto* k = llvm::dyn_cast<llvm::Constant>(mask);
    return k && k->isAllOnesValue();
  }
  void set(uint32_t d, llvm::Value* v, llvm::Value* mask) {
    llvm::Value* old = reg(d);
    cache[d] = {B.CreateSelect(mask, v, old), true};
  }
  // d = v (integer lanes of any width), extended to 64 bits as `sgn` says.
  void set_n(uint32_t d, llvm::Value* v, bool sgn, llvm::Value* mask) {
    if (v->getType()->getScalarSizeInBits() == 32 && all_lanes(mask)) {
      cache[d] = {nullptr, true, v, sgn};
      return;
    }
    set(d, ext64(v, sgn), mask);
  }
  void set_f32(uint32_t d, llvm::Value* f, llvm::Value* mask) { set_n(d, B.CreateBitCast(f, vec(i32)), false, mask); }
  void flush() {
    for (auto& [s, c] : cache)
      if (c.dirty) {
        tag(B.CreateAlignedStore(widen(B, c, vec(i64)), slot_ptr(s), llvm::Align(8)), tb_reg);
        c.dirty = false;
      }
  }

  // ---- lane values ----
  static int bits(Ty t) { return ty_bytes(t) * 8; }
  llvm::Value* as_int(llvm::Value* v64, int nbits) {
    return nbits == 64 ? v64 : B.CreateTrunc(v64, vec(B.getIntNTy(nbits)));
  }
  llvm::Value* ext64(llvm::Value* v, bool sgn) {
    if (v->getType()->getScalarSizeInBits() == 64) return v;
    return sgn ? B.CreateSExt(v, vec(i64)) : B.CreateZExt(v, vec(i64));
  }
  llvm::Value* as_f32(llvm::Value* v64) { return B.CreateBitCast(B.CreateTrunc(v64, vec(i32)), vec(f32)); }
  llvm::Value* from_f32(llvm::Value* f) { return B.CreateZExt(B.CreateBitCast(f, vec(i32)), vec(i64)); }
  llvm::Value* as_f64(llvm::Value* v64) { return B.CreateBitCast(v64, vec(f64)); }
  llvm::Value* from_f64(llvm::Value* f) { return B.CreateBitCast(f, vec(i64)); }
  // .ftz: a denormal becomes a zero of its sign (ftz32)
  llvm::Value* ftz(llvm::Value* f) {
    llvm::Value* b = B.CreateBitCast(f, vec(i32));
    llvm::Value* expo = B.CreateAnd(b, B.CreateVectorSplat(32, B.getInt32(0x7f800000u)));
    llvm::Value* zero = B.CreateICmpEQ(expo, llvm::Constant::getNullValue(vec(i32)));
    llvm::Value* sign = B.CreateAnd(b, B.CreateVectorSplat(32, B.getInt32(0x80000000u)));
    return B.CreateBitCast(B.CreateSelect(zero, sign, b), vec(f32));
  }
  llvm::Value* intrinsic(llvm::Intrinsic::ID id, llvm::ArrayRef<llvm::Value*> args) {
    return B.CreateIntrinsic(id, {args[0]->getType()}, args);
  }
  // OMin/OMax of the interpreter: a <= b ? a : a > b ? b : (b is NaN ? a : b)
  llvm::Value* fminmax(llvm::Value* a, llvm::Value* b, bool is_max);
  llvm::Value* fop(uint8_t op, llvm::Value* a, llvm::Value* b);
  llvm::Value* fun(uint8_t op, llvm::Value* a);

  // add/sub/mul/fma.{rz,rm,rp}.f32 (h_f32_dir without .sat): the exact result as a
  // double-double (the product of two floats is exact in double, TwoSum gives the
  // sum's error), rounded to nearest in float and stepped one ulp toward the
  // direction asked when that went the wrong way. Lanes the shortcut does not
  // cover (NaN, infinity or denormal operands, a zero, denormal or overflowing
  // result) send the whole instruction to the handler.
  bool fdir(const Inst& I, llvm::Value* mvec, llvm::Value* m, uint32_t pc);
  static llvm::CmpInst::Predicate fpred(uint32_t c) {
    using P = llvm::CmpInst::Predicate;
    switch (Cmp(c)) {
      case C_EQ: return P::FCMP_OEQ;
      case C_NE: return P::FCMP_ONE;
      case C_LT: return P::FCMP_OLT;
      case C_LE: return P::FCMP_OLE;
      case C_GT: return P::FCMP_OGT;
      case C_GE: return P::FCMP_OGE;
      case C_EQU: return P::FCMP_UEQ;
      case C_NEU: return P::FCMP_UNE;
      case C_LTU: return P::FCMP_ULT;
      case C_LEU: return P::FCMP_ULE;
      case C_GTU: return P::FCMP_UGT;
      case C_GEU: return P::FCMP_UGE;
      case C_NUM: return P::FCMP_ORD;
      case C_NAN: return P::FCMP_UNO;
    }
    return P::BAD_FCMP_PREDICATE;
  }
  static llvm::CmpInst::Predicate ipred(uint32_t c, bool sgn) {
    using P = llvm::CmpInst::Predicate;
    switch (Cmp(c)) {
      case C_EQ: return P::ICMP_EQ;
      case C_NE: return P::ICMP_NE;
      case C_LT: return sgn ? P::ICMP_SLT : P::ICMP_ULT;
      case C_LE: return sgn ? P::ICMP_SLE : P::ICMP_ULE;
      case C_GT: return sgn ? P::ICMP_SGT : P::ICMP_UGT;
      case C_GE: return sgn ? P::ICMP_SGE : P::ICMP_UGE;
      default: return P::BAD_ICMP_PREDICATE;
    }
  }

  // Calls the interpreter's handler for I (the lanes of `m`, none: no call) and
  // leaves the block when it faulted. The register file is written first. An
  // instruction inlined with the handler as its slow path keeps the cache it had
  // before the call (the handler writes only its destinations): the registers
  // stay dirty, so the fast path need not write them back.
  void call_handler(const Inst& I, llvm::Value* m, uint32_t pc);
  // The slow path of an instruction inlined with its handler as fallback, emitted at
  // the insert point: the handler (the cache kept, as above), then each destination
  // re-read from the register file; both paths meet at `join`, where each destination
  // becomes the phi of its fast-path value (from `fast_end`) and the re-read one.
  // narrow: the fast values are 32-bit lanes widening as `sext` says.
  struct Dest {
    uint32_t slot;
    llvm::Value* fast;
  };
  void handler_join(const Inst& I, llvm::Value* m, uint32_t pc, llvm::BasicBlock* join, llvm::BasicBlock* fast_end,
                    const std::vector<Dest>& dests, bool narrow = false, bool sext = false);

  // The base of a memory operand's address ([var+off] or [reg+off]); null: not inlined.
  llvm::Value* addr_base(const Inst& I);

  // The lanes' addresses of I's memory operand (shared or global/generic/const) checked
  // for an access of szv bytes each: `all` is true when every lane of the group is
  // aligned and inside the block's shared memory or the region the instruction reached
  // last (its Ctx::jrc slot; else jit_refresh puts the first lane's region there and
  // they are checked again); host + off is each lane's byte. false: not inlined.
  bool locate(const Inst& I, Sp space, uint64_t szv, bool write, llvm::Value* mvec, llvm::Value* m, llvm::Value*& all,
              llvm::Value*& host_out, llvm::Value*& off_out);

  // ld/st with the fast path inline: every lane of the group aligned and inside
  // the block's shared memory (shared) or the region the instruction reached last
  // (global, generic, const); otherwise the handler does the access (and any fault).
  bool mem(const Inst& I, const JitDesc& d, llvm::Value* mvec, llvm::Value* m, uint32_t pc);

  // ld.param [name+off] of a kernel parameter: one load, the same value in every lane.
  // Outside the parameter buffer, the handler faults as it would interpreted.
  bool param_load(const Inst& I, const JitDesc& d, llvm::Value* mvec, llvm::Value* m, uint32_t pc);

  // <0, 1, ..., 31> as i32 lanes
  llvm::Value* lane_ids();
  llvm::Value* lanes64(uint64_t (*f)(uint32_t));
  llvm::Value* bcast32(uint64_t off) { return B.CreateVectorSplat(32, B.CreateZExt(field(off, i32), i64)); }

  // mov d, %special: what h_sreg computes, without the clocks (the handler reads those)
  bool sreg(const Inst& I, llvm::Value* mvec);

  // shfl.sync as h_shfl: each lane's source lane and validity from b and c; a source
  // lane outside the group gives 0. The value is read from a copy of the register.
  llvm::Value* shfl_buf = nullptr;  // [32 x i64] in the function's frame
  bool shfl(const Inst& I, llvm::Value* mvec, llvm::Value* m);

  // vote as h_vote: the ballot of the executing lanes, each lane's group its membermask
  bool vote(const Inst& I, llvm::Value* mvec, llvm::Value* m);

  // cvt forms the fast handlers do not take (h_cvt_lanes computes them with cvt_lane):
  // narrowing integer conversions, float -> integer (any rounding), integer -> float
  // (round to nearest), float -> float rounding to an integral value. Others: the handler.
  bool cvt_lanes(const Inst& I, llvm::Value* mvec);

  // atom/red on shared or global memory, lane after lane in lane order as h_atom
  // does: shared memory is the block's own (its warps run one at a time on this
  // worker), so a plain read-modify-write; global memory with atomic instructions.
  llvm::Value* atom_buf = nullptr;  // [4 x <32 x i64>]: offsets, b, c, results
  bool atom(const Inst& I, const JitDesc& d, llvm::Value* mvec, llvm::Value* m, uint32_t pc);

  // One instruction inline; false: not inlined (the caller calls its handler).
  bool inst(const Inst& I, const JitDesc& d, llvm::Value* mvec, llvm::Value* m, uint32_t pc);

  // The count of thread-instructions so far and the exits: each stores it and returns a pc.
  llvm::Value* cnt_var = nullptr;
  void add_count(llvm::Value* m);
  void exit_at(llvm::Value* pc);
  llvm::Value* group_mask(const Inst& I, llvm::Value* active_vec);

  // Emits function F as one native function entered at any block start
  // (JitFn). Blocks end at control instructions and branch targets. A branch
  // that the whole group takes, or none of it, continues natively (loops run
  // without the interpreter) when the interpreter would not have to park or
  // merge lanes there; anything else returns to the interpreter at that pc.
  // `full`: the variant for a whole warp (active == all 32 lanes), where the
  // lane masks of unguarded instructions fold away.
  std::vector<uint32_t> function(const Function& F, const std::string& name, std::vector<uint32_t>& ends, bool full);
};

}  // namespace wh::ptx::detail::jitgen
