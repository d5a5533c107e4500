// The PTX compiler's code generator, libwormhole-ptx-jit.so (see jit.hpp): each
// function becomes one LLVM function over a whole warp, entered at any block
// start. Registers stay in the warp's register file (32 lanes of 8 bytes per
// slot, as the interpreter keeps them); within a block their values live in
// SSA form and are written back before anything that may read the file (a
// handler, the block's end). Lanes are vector elements; an instruction's guard
// predicate selects which lanes it writes.
#include "jit.hpp"

#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/TargetSelect.h>

#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

namespace wh::ptx::detail {

namespace {

// What the compiler knows of a handler (the catalog lives in the engine).
const JitDesc* (*describe)(Handler) = nullptr;

// One process-wide LLJIT (never destroyed: code of modules still loaded may run until exit).
llvm::orc::LLJIT* the_jit(std::string* err) {
  static std::mutex mu;
  static llvm::orc::LLJIT* jit = nullptr;
  static std::string failure;
  std::lock_guard lk(mu);
  if (jit || !failure.empty()) {
    if (!jit && err) *err = failure;
    return jit;
  }
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!jtmb) {
    failure = llvm::toString(jtmb.takeError());
    if (err) *err = failure;
    return nullptr;
  }
  // The IR is optimized at O2; the machine-code generator's "Less" level costs
  // about 40% less compile time than its default and runs as fast (the bench
  // kernels and Inductor's kernels of a CNN's training step, measured).
  jtmb->setCodeGenOptLevel(llvm::CodeGenOpt::Less);
  auto j = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(*jtmb)).create();
  if (!j) {
    failure = llvm::toString(j.takeError());
    if (err) *err = failure;
    return nullptr;
  }
  // The optimizer may turn loops into memset/memcpy/memmove calls and lower
  // some intrinsics to the math library: those names, and only those, resolve
  // to the server's own libc and libm.
  {
    auto& J = **j;
    llvm::orc::SymbolMap libc;
    auto add = [&](const char* name, const void* fn) {
      libc[J.mangleAndIntern(name)] =
          llvm::JITEvaluatedSymbol(llvm::pointerToJITTargetAddress(fn), llvm::JITSymbolFlags::Exported);
    };
    add("memset", reinterpret_cast<const void*>(&memset));
    add("memcpy", reinterpret_cast<const void*>(&memcpy));
    add("memmove", reinterpret_cast<const void*>(&memmove));
    add("fmaf", reinterpret_cast<const void*>(static_cast<float (*)(float, float, float)>(&fmaf)));
    add("fma", reinterpret_cast<const void*>(static_cast<double (*)(double, double, double)>(&fma)));
    add("sqrtf", reinterpret_cast<const void*>(static_cast<float (*)(float)>(&sqrtf)));
    add("sqrt", reinterpret_cast<const void*>(static_cast<double (*)(double)>(&sqrt)));
    if (auto e = J.getMainJITDylib().define(llvm::orc::absoluteSymbols(std::move(libc)))) {
      failure = llvm::toString(std::move(e));
      if (err) *err = failure;
      return nullptr;
    }
  }
  jit = j->release();
  return jit;
}

// The host's target machine, for the optimizer's cost model (vector widths, FMA).
llvm::TargetMachine* host_machine() {
  static llvm::TargetMachine* tm = [] {
    auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
    if (!jtmb) { llvm::consumeError(jtmb.takeError()); return (llvm::TargetMachine*)nullptr; }
    auto t = jtmb->createTargetMachine();
    if (!t) { llvm::consumeError(t.takeError()); return (llvm::TargetMachine*)nullptr; }
    return t->release();
  }();
  return tm;
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winvalid-offsetof"
// Fields of Ctx the compiled code reads (Ctx is not standard-layout; GCC lays it out as written).
const uint64_t kOffRegs = offsetof(Ctx, regs), kOffShared = offsetof(Ctx, shared),
               kOffSharedSize = offsetof(Ctx, shared_size), kOffFault = offsetof(Ctx, fault),
               kOffRc = offsetof(Ctx, rc), kRegionBase = offsetof(DeviceMemory::Region, base),
               kRegionSize = offsetof(DeviceMemory::Region, size), kRegionHost = offsetof(DeviceMemory::Region, host),
               kRegionWritable = offsetof(DeviceMemory::Region, writable),
               kOffSharedOffPtr = offsetof(Ctx, shared_off), kOffGaddrPtr = offsetof(Ctx, gaddr);
#pragma GCC diagnostic pop

// A global access outside Ctx::rc: the region of its first lane becomes rc
// (kernels read two or three arrays in turn: the previous rc is kept as rc2,
// and taken back without a lookup).
void jit_refresh(Ctx* c, uint64_t addr) {
  if (addr - c->rc2.base < c->rc2.size) {
    std::swap(c->rc, c->rc2);
    return;
  }
  DeviceMemory::Region r;
  if (c->mem->region(addr, r) && r.host) {
    c->rc2 = c->rc;
    c->rc = r;
  }
}

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
  struct Cached {
    llvm::Value* v;
    bool dirty;
  };
  std::map<uint32_t, Cached> cache;  // slot -> <32 x i64> value

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
  }

  llvm::VectorType* vec(llvm::Type* t) { return llvm::FixedVectorType::get(t, 32); }
  llvm::Value* field(uint64_t off, llvm::Type* t) {
    return B.CreateLoad(t, B.CreateConstGEP1_64(i8, ctx, off));
  }
  llvm::Value* splat64(uint64_t v) { return B.CreateVectorSplat(32, B.getInt64(v)); }

  // ---- the register file ----
  llvm::Value* slot_ptr(uint32_t s) { return B.CreateConstGEP1_64(i8, regs, uint64_t(s) * 256); }
  llvm::Value* reg(uint32_t s) {
    if (s & CBIT) return splat64(M.cpool[uint64_t(s & ~CBIT) * 32]);
    auto it = cache.find(s);
    if (it != cache.end()) return it->second.v;
    llvm::Value* v = B.CreateAlignedLoad(vec(i64), slot_ptr(s), llvm::Align(8));
    cache[s] = {v, false};
    return v;
  }
  void set(uint32_t d, llvm::Value* v, llvm::Value* mask) {
    llvm::Value* old = reg(d);
    cache[d] = {B.CreateSelect(mask, v, old), true};
  }
  void flush() {
    for (auto& [s, c] : cache)
      if (c.dirty) {
        B.CreateAlignedStore(c.v, slot_ptr(s), llvm::Align(8));
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
  llvm::Value* fminmax(llvm::Value* a, llvm::Value* b, bool is_max) {
    llvm::Value* first = is_max ? B.CreateFCmpOGE(a, b) : B.CreateFCmpOLE(a, b);
    llvm::Value* second = is_max ? B.CreateFCmpOLT(a, b) : B.CreateFCmpOGT(a, b);
    llvm::Value* bnan = B.CreateFCmpUNO(b, b);
    return B.CreateSelect(first, a, B.CreateSelect(second, b, B.CreateSelect(bnan, a, b)));
  }
  llvm::Value* fop(uint8_t op, llvm::Value* a, llvm::Value* b) {
    switch (op) {
      case JAdd: return B.CreateFAdd(a, b);
      case JSub: return B.CreateFSub(a, b);
      case JMul: return B.CreateFMul(a, b);
      case JDiv: return B.CreateFDiv(a, b);
      case JMin: return fminmax(a, b, false);
      case JMax: return fminmax(a, b, true);
    }
    return nullptr;
  }
  llvm::Value* fun(uint8_t op, llvm::Value* a) {
    llvm::Value* one = llvm::ConstantFP::get(a->getType(), 1.0);
    switch (op) {
      case JNeg: return B.CreateFNeg(a);
      case JAbs: return intrinsic(llvm::Intrinsic::fabs, {a});
      case JSqrt: return intrinsic(llvm::Intrinsic::sqrt, {a});
      case JRcp: return B.CreateFDiv(one, a);
      case JRsqrt: return B.CreateFDiv(one, intrinsic(llvm::Intrinsic::sqrt, {a}));
    }
    return nullptr;
  }
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
  // leaves the block when it faulted.
  void call_handler(const Inst& I, llvm::Value* m, uint32_t pc) {
    flush();
    llvm::BasicBlock* do_call = llvm::BasicBlock::Create(C, "call", fn);
    llvm::BasicBlock* faulted = llvm::BasicBlock::Create(C, "faulted", fn);
    llvm::BasicBlock* after = llvm::BasicBlock::Create(C, "after", fn);
    B.CreateCondBr(B.CreateICmpNE(m, B.getInt32(0)), do_call, after);
    B.SetInsertPoint(do_call);
    llvm::Value* callee = B.CreateIntToPtr(B.getInt64(reinterpret_cast<uint64_t>(I.fn)), ptr);
    llvm::Value* inst = B.CreateIntToPtr(B.getInt64(reinterpret_cast<uint64_t>(&I)), ptr);
    B.CreateCall(handler_ty, callee, {ctx, inst, m});
    B.CreateCondBr(B.CreateICmpNE(field(kOffFault, i8), B.getInt8(0)), faulted, after);
    B.SetInsertPoint(faulted);
    exit_at(B.getInt32(pc));  // the interpreter stops at the faulting instruction
    B.SetInsertPoint(after);
    cache.clear();  // the handler may have written any register
  }

  // The base of a memory operand's address ([var+off] or [reg+off]); null: not inlined.
  llvm::Value* addr_base(const Inst& I) {
    uint64_t off = uint64_t(I.aoff);
    switch (I.avk) {
      case AV_None: return B.getInt64(off);
      case AV_Imm: return B.getInt64(uint64_t(I.avar) + off);
      case AV_Shared: {
        llvm::Value* tab = field(kOffSharedOffPtr, ptr);
        llvm::Value* v = B.CreateLoad(i32, B.CreateConstGEP1_64(i32, tab, I.avar));
        return B.CreateAdd(B.CreateZExt(v, i64), B.getInt64(off));
      }
      case AV_Global: {
        llvm::Value* tab = field(kOffGaddrPtr, ptr);
        llvm::Value* v = B.CreateLoad(i64, B.CreateConstGEP1_64(i64, tab, I.avar));
        return B.CreateAdd(v, B.getInt64(off));
      }
      default: return nullptr;
    }
  }

  // ld/st with the fast path inline: every lane of the group aligned and inside
  // the block's shared memory (shared) or the last translated region (global,
  // generic, const); otherwise the handler does the access (and any fault).
  bool mem(const Inst& I, const JitDesc& d, llvm::Value* mvec, llvm::Value* m, uint32_t pc) {
    const bool store = d.kind == JK::St;
    if (I.avk == AV_Local) return false;
    llvm::Value* base = addr_base(I);
    if (!base) return false;
    llvm::Value* a = B.CreateVectorSplat(32, base);
    if (I.areg != NOREG) a = B.CreateAdd(a, reg(I.areg));
    const uint64_t szv = uint64_t(d.size) * d.vec;
    llvm::Value* aligned = B.CreateICmpEQ(B.CreateAnd(a, splat64(szv - 1)), splat64(0));
    llvm::Value *ok = nullptr, *host, *all_override = nullptr;
    if (d.space == Sp::Shared) {
      llvm::Value* ss = B.CreateZExt(field(kOffSharedSize, i32), i64);
      llvm::Value* fits = B.CreateICmpUGE(ss, B.getInt64(szv));
      llvm::Value* lim = B.CreateVectorSplat(32, B.CreateSub(ss, B.getInt64(szv)));
      ok = B.CreateAnd(aligned, B.CreateAnd(B.CreateICmpULE(a, lim), B.CreateVectorSplat(32, fits)));
      host = field(kOffShared, ptr);
    } else {
      // the last region translated (Ctx::rc); else jit_refresh makes the first
      // lane's region rc (the one before, rc2, or a lookup) and it is checked again
      auto check = [&](uint64_t r, llvm::Value*& host_out, llvm::Value*& off_out) {
        llvm::Value* rb = field(r + kRegionBase, i64);
        llvm::Value* rs = field(r + kRegionSize, i64);
        llvm::Value* off = B.CreateSub(a, B.CreateVectorSplat(32, rb));
        llvm::Value* fits = B.CreateICmpUGE(rs, B.getInt64(szv));
        llvm::Value* lim = B.CreateVectorSplat(32, B.CreateSub(rs, B.getInt64(szv)));
        llvm::Value* k = B.CreateAnd(aligned, B.CreateAnd(B.CreateICmpULE(off, lim), B.CreateVectorSplat(32, fits)));
        if (store) k = B.CreateAnd(k, B.CreateVectorSplat(32, B.CreateICmpNE(field(r + kRegionWritable, i8), B.getInt8(0))));
        host_out = field(r + kRegionHost, ptr);
        off_out = off;
        return B.CreateAndReduce(B.CreateOr(B.CreateNot(mvec), k));
      };
      llvm::Value *h1, *o1, *h3, *o3;
      llvm::Value* all12 = check(kOffRc, h1, o1);
      llvm::Value* host12 = h1;
      llvm::Value* off12 = o1;
      llvm::BasicBlock* cur = B.GetInsertBlock();
      llvm::BasicBlock* refresh = llvm::BasicBlock::Create(C, "refresh", fn);
      llvm::BasicBlock* pick = llvm::BasicBlock::Create(C, "pick", fn);
      B.CreateCondBr(all12, pick, refresh);
      B.SetInsertPoint(refresh);
      llvm::Value* first = B.CreateExtractElement(a, B.CreateZExt(B.CreateBinaryIntrinsic(llvm::Intrinsic::cttz, m, B.getTrue()), i64));
      llvm::FunctionType* rty = llvm::FunctionType::get(B.getVoidTy(), {ptr, i64}, false);
      B.CreateCall(rty, B.CreateIntToPtr(B.getInt64(reinterpret_cast<uint64_t>(&jit_refresh)), ptr), {ctx, first});
      llvm::Value* all3 = check(kOffRc, h3, o3);
      llvm::BasicBlock* ref_end = B.GetInsertBlock();
      B.CreateBr(pick);
      B.SetInsertPoint(pick);
      llvm::PHINode* ph = B.CreatePHI(ptr, 2);
      ph->addIncoming(host12, cur);
      ph->addIncoming(h3, ref_end);
      llvm::PHINode* po = B.CreatePHI(vec(i64), 2);
      po->addIncoming(off12, cur);
      po->addIncoming(o3, ref_end);
      llvm::PHINode* pa = B.CreatePHI(i1, 2);
      pa->addIncoming(B.getTrue(), cur);
      pa->addIncoming(all3, ref_end);
      host = ph;
      a = po;
      ok = nullptr;
      all_override = pa;
    }
    // every lane of the group passes (no lanes: nothing to do, also "passes")
    llvm::Value* all = all_override ? all_override : B.CreateAndReduce(B.CreateOr(B.CreateNot(mvec), ok));
    llvm::Value* sval[4] = {};
    llvm::Value* old[4] = {};
    // before the branch, so that both paths see the same cache
    for (int i = 0; i < d.vec; ++i) {
      if (store) sval[i] = reg(I.s[i]);
      else if (I.d[i] != NOREG) old[i] = reg(I.d[i]);
    }
    flush();
    llvm::BasicBlock* fast = llvm::BasicBlock::Create(C, "fast", fn);
    llvm::BasicBlock* slow = llvm::BasicBlock::Create(C, "slow", fn);
    llvm::BasicBlock* join = llvm::BasicBlock::Create(C, "join", fn);
    B.CreateCondBr(all, fast, slow);
    B.SetInsertPoint(fast);
    llvm::Type* et = B.getIntNTy(d.size * 8);
    llvm::Value* p0 = B.CreateGEP(i8, host, a);
    llvm::Value* loaded[4] = {};
    for (int i = 0; i < d.vec; ++i) {
      llvm::Value* p = i ? B.CreateGEP(i8, p0, B.getInt64(uint64_t(i) * d.size)) : p0;
      if (store) {
        llvm::Value* v = B.CreateTrunc(sval[i], vec(et));
        B.CreateMaskedScatter(v, p, llvm::Align(d.size), mvec);
      } else if (I.d[i] != NOREG) {
        llvm::Value* v = B.CreateMaskedGather(vec(et), p, llvm::Align(d.size), mvec);
        loaded[i] = B.CreateSelect(mvec, ext64(v, d.sgn), old[i]);
      }
    }
    llvm::BasicBlock* fast_end = B.GetInsertBlock();
    B.CreateBr(join);
    B.SetInsertPoint(slow);
    llvm::Value* reread[4] = {};
    {
      auto saved = cache;  // the handler writes only the destinations: the rest stays valid
      call_handler(I, m, pc);
      cache = std::move(saved);
      for (int i = 0; i < d.vec; ++i)
        if (!store && I.d[i] != NOREG) reread[i] = B.CreateAlignedLoad(vec(i64), slot_ptr(I.d[i]), llvm::Align(8));
    }
    llvm::BasicBlock* slow_end = B.GetInsertBlock();
    B.CreateBr(join);
    B.SetInsertPoint(join);
    // a loaded value stays in SSA form (dirty: the fast path did not write it back)
    for (int i = 0; i < d.vec; ++i)
      if (!store && I.d[i] != NOREG) {
        llvm::PHINode* ph = B.CreatePHI(vec(i64), 2);
        ph->addIncoming(loaded[i], fast_end);
        ph->addIncoming(reread[i], slow_end);
        cache[I.d[i]] = {ph, true};
      }
    return true;
  }

  // One instruction inline; false: not inlined (the caller calls its handler).
  bool inst(const Inst& I, const JitDesc& d, llvm::Value* mvec, llvm::Value* m, uint32_t pc) {
    switch (d.kind) {
      case JK::Mov: set(I.d[0], reg(I.s[0]), mvec); return true;
      case JK::Selp: {
        llvm::Value* p = B.CreateICmpNE(reg(I.s[2]), splat64(0));
        set(I.d[0], B.CreateSelect(p, reg(I.s[0]), reg(I.s[1])), mvec);
        return true;
      }
      case JK::PBin: {
        llvm::Value* a = B.CreateICmpNE(reg(I.s[0]), splat64(0));
        llvm::Value* b = B.CreateICmpNE(reg(I.s[1]), splat64(0));
        llvm::Value* r = d.op == JAnd ? B.CreateAnd(a, b) : d.op == JOr ? B.CreateOr(a, b) : B.CreateXor(a, b);
        set(I.d[0], B.CreateZExt(r, vec(i64)), mvec);
        return true;
      }
      case JK::PNot:
        set(I.d[0], B.CreateZExt(B.CreateICmpEQ(reg(I.s[0]), splat64(0)), vec(i64)), mvec);
        return true;
      case JK::Cvta: {
        const uint64_t base = (uint64_t(I.a0) << 32) | I.a1;
        set(I.d[0], d.flag ? B.CreateSub(reg(I.s[0]), splat64(base)) : B.CreateAdd(reg(I.s[0]), splat64(base)), mvec);
        return true;
      }
      case JK::IBin: {
        const int n = bits(d.ty);
        const bool sgn = ty_signed(d.ty);
        llvm::Value* a = as_int(reg(I.s[0]), n);
        llvm::Value* b = as_int(reg(I.s[1]), n);
        llvm::Value* r = nullptr;
        switch (d.op) {
          case JAdd: r = B.CreateAdd(a, b); break;
          case JSub: r = B.CreateSub(a, b); break;
          case JMul: r = B.CreateMul(a, b); break;
          case JAnd: r = B.CreateAnd(a, b); break;
          case JOr: r = B.CreateOr(a, b); break;
          case JXor: r = B.CreateXor(a, b); break;
          case JMin: r = B.CreateSelect(sgn ? B.CreateICmpSLT(a, b) : B.CreateICmpULT(a, b), a, b); break;
          case JMax: r = B.CreateSelect(sgn ? B.CreateICmpSGT(a, b) : B.CreateICmpUGT(a, b), a, b); break;
          case JMulHi: {
            llvm::Type* w = vec(B.getIntNTy(2 * n));
            llvm::Value* p = sgn ? B.CreateMul(B.CreateSExt(a, w), B.CreateSExt(b, w)) : B.CreateMul(B.CreateZExt(a, w), B.CreateZExt(b, w));
            r = B.CreateTrunc(sgn ? B.CreateAShr(p, uint64_t(n)) : B.CreateLShr(p, uint64_t(n)), a->getType());
            break;
          }
          default: return false;
        }
        set(I.d[0], ext64(r, sgn), mvec);
        return true;
      }
      case JK::IUn: {
        const int n = bits(d.ty);
        const bool sgn = ty_signed(d.ty);
        llvm::Value* a = as_int(reg(I.s[0]), n);
        llvm::Value* zero = llvm::Constant::getNullValue(a->getType());
        llvm::Value* r = d.op == JNeg ? B.CreateSub(zero, a)
                       : d.op == JNot ? B.CreateNot(a)
                       : sgn          ? B.CreateSelect(B.CreateICmpSLT(a, zero), B.CreateSub(zero, a), a)
                                      : a;
        set(I.d[0], ext64(r, sgn), mvec);
        return true;
      }
      case JK::MadLo: {
        const int n = bits(d.ty);
        llvm::Value* r = B.CreateAdd(B.CreateMul(as_int(reg(I.s[0]), n), as_int(reg(I.s[1]), n)), as_int(reg(I.s[2]), n));
        set(I.d[0], ext64(r, false), mvec);
        return true;
      }
      case JK::MulWide:
      case JK::MadWide: {
        const int n = bits(d.ty);
        const bool sgn = ty_signed(d.ty);
        llvm::Type* w = vec(B.getIntNTy(2 * n));
        auto wide = [&](llvm::Value* v) { return sgn ? B.CreateSExt(as_int(v, n), w) : B.CreateZExt(as_int(v, n), w); };
        llvm::Value* r = B.CreateMul(wide(reg(I.s[0])), wide(reg(I.s[1])));
        if (d.kind == JK::MadWide) r = B.CreateAdd(r, as_int(reg(I.s[2]), 2 * n));
        set(I.d[0], ext64(r, sgn), mvec);
        return true;
      }
      case JK::Shift: {
        const int n = bits(d.ty);
        const bool sgn = ty_signed(d.ty);
        llvm::Value* a = as_int(reg(I.s[0]), n);
        llvm::Value* s = B.CreateTrunc(reg(I.s[1]), vec(i32));
        llvm::Value* big = B.CreateICmpUGE(s, B.CreateVectorSplat(32, B.getInt32(uint32_t(n))));
        llvm::Value* sa = B.CreateSelect(big, llvm::Constant::getNullValue(vec(i32)), s);
        sa = n == 32 ? sa : n > 32 ? B.CreateZExt(sa, a->getType()) : B.CreateTrunc(sa, a->getType());
        llvm::Value* r;
        if (d.flag) r = B.CreateSelect(big, llvm::Constant::getNullValue(a->getType()), B.CreateShl(a, sa));
        else if (sgn) r = B.CreateSelect(big, B.CreateAShr(a, uint64_t(n - 1)), B.CreateAShr(a, sa));
        else r = B.CreateSelect(big, llvm::Constant::getNullValue(a->getType()), B.CreateLShr(a, sa));
        set(I.d[0], ext64(r, sgn), mvec);
        return true;
      }
      case JK::Setp: {
        // the plain form only: no combining predicate, no second result, no .ftz
        if (I.a1 != 0 || I.d[1] != NOREG || (d.ty == T_F32 && (I.flags & 4))) return false;
        llvm::Value* r;
        if (d.ty == T_F32) r = B.CreateFCmp(fpred(d.op), as_f32(reg(I.s[0])), as_f32(reg(I.s[1])));
        else if (d.ty == T_F64) r = B.CreateFCmp(fpred(d.op), as_f64(reg(I.s[0])), as_f64(reg(I.s[1])));
        else {
          auto p = ipred(d.op, ty_signed(d.ty));
          if (p == llvm::CmpInst::BAD_ICMP_PREDICATE) return false;
          const int n = bits(d.ty);
          r = B.CreateICmp(p, as_int(reg(I.s[0]), n), as_int(reg(I.s[1]), n));
        }
        set(I.d[0], B.CreateZExt(r, vec(i64)), mvec);
        return true;
      }
      case JK::Cvt: {
        llvm::Value* a = reg(I.s[0]);
        llvm::Value* r;
        if (d.ty == T_F32 && d.ty2 == T_S32) r = from_f32(B.CreateSIToFP(as_int(a, 32), vec(f32)));
        else if (d.ty == T_F32 && d.ty2 == T_U32) r = from_f32(B.CreateUIToFP(as_int(a, 32), vec(f32)));
        else if (d.ty == T_F64 && d.ty2 == T_F32) r = from_f64(B.CreateFPExt(as_f32(a), vec(f64)));
        else if (d.ty == T_F64 && d.ty2 == T_S32) r = from_f64(B.CreateSIToFP(as_int(a, 32), vec(f64)));
        else if (d.ty == T_F64 && d.ty2 == T_U32) r = from_f64(B.CreateUIToFP(as_int(a, 32), vec(f64)));
        else if (d.ty == T_F32 && d.ty2 == T_F64) r = from_f32(B.CreateFPTrunc(as_f64(a), vec(f32)));
        else if (!ty_float(d.ty) && !ty_float(d.ty2)) r = ext64(as_int(a, bits(d.ty2)), ty_signed(d.ty2));
        else return false;
        set(I.d[0], r, mvec);
        return true;
      }
      case JK::FBin: {
        llvm::Value* a = as_f32(reg(I.s[0]));
        llvm::Value* b = as_f32(reg(I.s[1]));
        if (d.flag) a = ftz(a), b = ftz(b);
        llvm::Value* r = fop(d.op, a, b);
        if (!r) return false;
        if (d.flag) r = ftz(r);
        set(I.d[0], from_f32(r), mvec);
        return true;
      }
      case JK::FUn: {
        llvm::Value* a = as_f32(reg(I.s[0]));
        if (d.flag) a = ftz(a);
        llvm::Value* r = fun(d.op, a);
        if (!r) return false;
        if (d.flag) r = ftz(r);
        set(I.d[0], from_f32(r), mvec);
        return true;
      }
      case JK::FFma: {
        llvm::Value* a = as_f32(reg(I.s[0]));
        llvm::Value* b = as_f32(reg(I.s[1]));
        llvm::Value* c = as_f32(reg(I.s[2]));
        if (d.flag) a = ftz(a), b = ftz(b), c = ftz(c);
        llvm::Value* r = intrinsic(llvm::Intrinsic::fma, {a, b, c});
        if (d.flag) r = ftz(r);
        set(I.d[0], from_f32(r), mvec);
        return true;
      }
      case JK::DBin: {
        llvm::Value* r = fop(d.op, as_f64(reg(I.s[0])), as_f64(reg(I.s[1])));
        if (!r) return false;
        set(I.d[0], from_f64(r), mvec);
        return true;
      }
      case JK::DUn: {
        llvm::Value* r = fun(d.op, as_f64(reg(I.s[0])));
        if (!r) return false;
        set(I.d[0], from_f64(r), mvec);
        return true;
      }
      case JK::DFma:
        set(I.d[0], from_f64(intrinsic(llvm::Intrinsic::fma, {as_f64(reg(I.s[0])), as_f64(reg(I.s[1])), as_f64(reg(I.s[2]))})), mvec);
        return true;
      case JK::Ld:
      case JK::St:
        if (d.space == Sp::Local || d.space == Sp::KParam) return false;
        return mem(I, d, mvec, m, pc);
    }
    return false;
  }

  // The count of thread-instructions so far and the exits: each stores it and returns a pc.
  llvm::Value* cnt_var = nullptr;
  void add_count(llvm::Value* m) {
    llvm::Value* c = B.CreateLoad(i64, cnt_var);
    B.CreateStore(B.CreateAdd(c, B.CreateZExt(B.CreateUnaryIntrinsic(llvm::Intrinsic::ctpop, m), i64)), cnt_var);
  }
  void exit_at(llvm::Value* pc) {
    B.CreateStore(B.CreateAdd(B.CreateLoad(i64, count), B.CreateLoad(i64, cnt_var)), count);
    B.CreateRet(pc);
  }
  llvm::Value* group_mask(const Inst& I, llvm::Value* active_vec) {
    if (I.guard == NOREG) return active_vec;
    llvm::Value* p = B.CreateICmpNE(reg(I.guard), splat64(0));
    if (I.gneg) p = B.CreateNot(p);
    return B.CreateAnd(active_vec, p);
  }

  // Emits function F as one native function entered at any block start
  // (JitFn). Blocks end at control instructions and branch targets. A branch
  // that the whole group takes, or none of it, continues natively (loops run
  // without the interpreter) when the interpreter would not have to park or
  // merge lanes there; anything else returns to the interpreter at that pc.
  // `full`: the variant for a whole warp (active == all 32 lanes), where the
  // lane masks of unguarded instructions fold away.
  std::vector<uint32_t> function(const Function& F, const std::string& name, std::vector<uint32_t>& ends, bool full) {
    const uint32_t n = uint32_t(F.code.size());
    std::vector<char> is_start(n + 1, 0);
    is_start[0] = 1;
    for (uint32_t pc = 0; pc < n; ++pc) {
      const Inst& I = F.code[pc];
      if (I.ctl != Ctl::None) {
        is_start[pc + 1] = 1;
        if (I.ctl == Ctl::Bra && I.a0 < n) is_start[I.a0] = 1;
      }
    }
    std::vector<uint32_t> starts;
    ends.assign(n + 1, 0);
    for (uint32_t pc = 0; pc < n; ++pc)
      if (is_start[pc]) {
        uint32_t e = pc;
        while (e < n && F.code[e].ctl == Ctl::None && (e == pc || !is_start[e])) ++e;
        ends[pc] = e;
        starts.push_back(pc);
      }
    fn = llvm::Function::Create(llvm::FunctionType::get(i32, {ptr, i32, ptr, i32, i32, ptr}, false), llvm::Function::ExternalLinkage,
                                name, Mod);
    fn->addParamAttr(0, llvm::Attribute::NoAlias);
    ctx = fn->getArg(0);
    active = full ? static_cast<llvm::Value*>(B.getInt32(0xffffffffu)) : fn->getArg(1);
    count = fn->getArg(2);
    llvm::Value* entry_pc = fn->getArg(3);
    llvm::Value* min_wait = fn->getArg(4);
    llvm::Value* slice = fn->getArg(5);
    cache.clear();
    llvm::BasicBlock* entry = llvm::BasicBlock::Create(C, "entry", fn);
    B.SetInsertPoint(entry);
    cnt_var = B.CreateAlloca(i64);
    B.CreateStore(B.getInt64(0), cnt_var);
    regs = field(kOffRegs, ptr);
    llvm::Value* active_vec = B.CreateBitCast(active, vec(i1));
    std::map<uint32_t, llvm::BasicBlock*> label;
    for (uint32_t s : starts) label[s] = llvm::BasicBlock::Create(C, "b" + std::to_string(s), fn);
    llvm::BasicBlock* bad = llvm::BasicBlock::Create(C, "bad", fn);
    llvm::SwitchInst* sw = B.CreateSwitch(entry_pc, bad, unsigned(starts.size()));
    for (uint32_t s : starts) sw->addCase(B.getInt32(s), label[s]);
    B.SetInsertPoint(bad);
    exit_at(entry_pc);
    // may the warp go on natively at pc t after a jump (jump) or by falling through?
    auto enter_ok = [&](uint32_t t, bool jump) -> llvm::Value* {
      llvm::Value* past = B.CreateICmpUGE(min_wait, B.getInt32(ends[t]));
      if (jump) return B.CreateAnd(B.CreateICmpUGT(min_wait, B.getInt32(t)), past);
      return B.CreateAnd(B.CreateICmpNE(min_wait, B.getInt32(t)), B.CreateOr(B.CreateICmpULE(min_wait, B.getInt32(t)), past));
    };
    auto go = [&](llvm::Value* ok, uint32_t t, uint32_t fallback_pc) {
      llvm::BasicBlock* out = llvm::BasicBlock::Create(C, "out", fn);
      B.CreateCondBr(ok, label[t], out);
      B.SetInsertPoint(out);
      exit_at(B.getInt32(fallback_pc));
    };
    for (uint32_t s : starts) {
      B.SetInsertPoint(label[s]);
      cache.clear();
      const uint32_t e = ends[s];
      for (uint32_t pc = s; pc < e; ++pc) {
        const Inst& I = F.code[pc];
        llvm::Value* mvec = group_mask(I, active_vec);
        llvm::Value* m = B.CreateBitCast(mvec, i32);
        add_count(m);
        const JitDesc* d = describe(I.fn);
        if (!d || !inst(I, *d, mvec, m, pc)) call_handler(I, m, pc);
      }
      flush();
      cache.clear();
      if (e >= n) { exit_at(B.getInt32(e)); continue; }
      const Inst& X = F.code[e];
      if (X.ctl == Ctl::None) {  // the next block starts here
        go(enter_ok(e, false), e, e);
        continue;
      }
      if (X.ctl != Ctl::Bra || (X.sched & kSchedSpin) || X.a0 >= n) { exit_at(B.getInt32(e)); continue; }
      // a branch: uniform over the group, it goes on natively
      llvm::Value* mvec = group_mask(X, active_vec);
      llvm::Value* m = B.CreateBitCast(mvec, i32);
      cache.clear();
      llvm::BasicBlock* taken = llvm::BasicBlock::Create(C, "taken", fn);
      llvm::BasicBlock* not_taken = llvm::BasicBlock::Create(C, "not_taken", fn);
      llvm::BasicBlock* diverge = llvm::BasicBlock::Create(C, "diverge", fn);
      llvm::SwitchInst* bs = B.CreateSwitch(m, diverge, 2);
      bs->addCase(B.getInt32(0), not_taken);
      // m == active: all taken (when active is 0 this case never arises: a group is never empty)
      B.SetInsertPoint(diverge);
      llvm::BasicBlock* really = llvm::BasicBlock::Create(C, "really", fn);
      B.CreateCondBr(B.CreateICmpEQ(m, active), taken, really);
      B.SetInsertPoint(really);
      exit_at(B.getInt32(e));
      B.SetInsertPoint(not_taken);
      if (e + 1 < n && label.count(e + 1)) {
        llvm::BasicBlock* ok = llvm::BasicBlock::Create(C, "ft", fn);
        llvm::BasicBlock* no = llvm::BasicBlock::Create(C, "ftno", fn);
        B.CreateCondBr(enter_ok(e + 1, false), ok, no);
        B.SetInsertPoint(ok);
        add_count(m);
        B.CreateBr(label[e + 1]);
        B.SetInsertPoint(no);
      }
      exit_at(B.getInt32(e));
      B.SetInsertPoint(taken);
      const uint32_t t = X.a0;
      llvm::Value* ok = enter_ok(t, true);
      // a loop: the warp's slice of backward branches, then it yields (in the interpreter)
      const bool back = X.sched & kSchedBack;
      llvm::Value* sl = back ? B.CreateLoad(i32, slice) : nullptr;
      if (back) ok = B.CreateAnd(ok, B.CreateICmpUGT(sl, B.getInt32(1)));
      llvm::BasicBlock* yes = llvm::BasicBlock::Create(C, "jmp", fn);
      llvm::BasicBlock* no = llvm::BasicBlock::Create(C, "jmpno", fn);
      B.CreateCondBr(ok, yes, no);
      B.SetInsertPoint(no);
      exit_at(B.getInt32(e));
      B.SetInsertPoint(yes);
      if (back) B.CreateStore(B.CreateSub(sl, B.getInt32(1)), slice);
      add_count(m);
      B.CreateBr(label[t]);
    }
    return starts;
  }
};

struct Tracker {
  llvm::orc::ResourceTrackerSP rt;
};

// See JitBackend::compile.
bool compile(const ModuleImpl& M, const std::vector<uint32_t>& funcs, const JitDesc* (*describe_fn)(Handler),
             std::vector<std::unique_ptr<JitEntry[]>>& tables, void** tracker, std::string* err) {
  describe = describe_fn;
  llvm::orc::LLJIT* J = the_jit(err);
  if (!J) return false;
  auto fail = [&](std::string what) {
    if (err) *err = std::move(what);
    return false;
  };
  static std::atomic<uint64_t> serial{0};
  const uint64_t id = serial++;
  auto ctx = std::make_unique<llvm::LLVMContext>();
  auto mod = std::make_unique<llvm::Module>("wh_ptx_" + std::to_string(id), *ctx);
  mod->setDataLayout(J->getDataLayout());
  mod->setTargetTriple(J->getTargetTriple().str());
  Gen G(*ctx, *mod, M);
  struct Pending {
    uint32_t func;
    std::vector<uint32_t> starts, ends;
    std::string name;
  };
  std::vector<Pending> pending;
  for (uint32_t fi : funcs) {
    const Function& F = M.funcs[fi];
    if (!F.defined || F.builtin || !F.unsupported.empty() || F.code.empty()) continue;
    Pending p{fi, {}, {}, "wh" + std::to_string(id) + "_f" + std::to_string(fi)};
    p.starts = G.function(F, p.name, p.ends, true);
    pending.push_back(std::move(p));
  }
  // Tables for every function (empty ones too: compiled, nothing to run natively).
  std::map<uint32_t, size_t> index;
  tables.clear();
  for (uint32_t fi : funcs) {
    index[fi] = tables.size();
    tables.push_back(std::make_unique<JitEntry[]>(M.funcs[fi].code.size() + 1));
  }
  if (!pending.empty()) {
    if (llvm::verifyModule(*mod, &llvm::errs())) return fail("the compiler produced invalid code");
    {
      llvm::PassBuilder PB(host_machine());
      llvm::LoopAnalysisManager LAM;
      llvm::FunctionAnalysisManager FAM;
      llvm::CGSCCAnalysisManager CGAM;
      llvm::ModuleAnalysisManager MAM;
      PB.registerModuleAnalyses(MAM);
      PB.registerCGSCCAnalyses(CGAM);
      PB.registerFunctionAnalyses(FAM);
      PB.registerLoopAnalyses(LAM);
      PB.crossRegisterProxies(LAM, FAM, CGAM, MAM);
      PB.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O2).run(*mod, MAM);
    }
    if (!*tracker) *tracker = new Tracker{J->getMainJITDylib().createResourceTracker()};
    if (auto e = J->addIRModule(static_cast<Tracker*>(*tracker)->rt, llvm::orc::ThreadSafeModule(std::move(mod), std::move(ctx))))
      return fail(llvm::toString(std::move(e)));
    for (const Pending& p : pending) {
      auto sym = J->lookup(p.name);
      if (!sym) return fail(llvm::toString(sym.takeError()));
      for (uint32_t st : p.starts) tables[index[p.func]][st] = {sym->toPtr<JitFn>(), p.ends[st]};
    }
  }
  return true;
}

void release(void* tracker) {
  if (auto* t = static_cast<Tracker*>(tracker)) {
    llvm::consumeError(t->rt->remove());  // frees the module's code
    delete t;
  }
}

}  // namespace

}  // namespace wh::ptx::detail

extern "C" const wh::ptx::detail::JitBackend* wh_ptx_jit_backend() {
  static const wh::ptx::detail::JitBackend b{wh::ptx::detail::compile, wh::ptx::detail::release};
  return &b;
}
