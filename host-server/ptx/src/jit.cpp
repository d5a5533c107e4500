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
               kOffSharedOffPtr = offsetof(Ctx, shared_off), kOffGaddrPtr = offsetof(Ctx, gaddr),
               kOffTid = offsetof(Ctx, tid), kOffNtid = offsetof(Ctx, ntid), kOffNctaid = offsetof(Ctx, nctaid),
               kOffCtaid = offsetof(Ctx, ctaid), kOffWarpId = offsetof(Ctx, warp_id), kOffNwarps = offsetof(Ctx, nwarps),
               kOffDynShared = offsetof(Ctx, dyn_shared), kOffGridwsAddr = offsetof(Ctx, gridws_addr),
               kOffKparam = offsetof(Ctx, kparam), kOffKparamSize = offsetof(Ctx, kparam_size),
               kOffJrc = offsetof(Ctx, jrc);
#pragma GCC diagnostic pop

// A global access outside the region its instruction reached last (*slot, one of
// Ctx::jrc): the region of its first lane becomes *slot, from the worker's last
// four regions (rc, rc2) or a lookup.
void jit_refresh(Ctx* c, uint64_t addr, DeviceMemory::Region* slot) {
  if (addr - c->rc.base < c->rc.size) {
    *slot = c->rc;
    return;
  }
  for (auto& r : c->rc2)
    if (addr - r.base < r.size) {
      std::swap(c->rc, r);
      *slot = c->rc;
      return;
    }
  DeviceMemory::Region r;
  if (c->mem->region(addr, r) && r.host) {
    c->rc2[2] = c->rc2[1];
    c->rc2[1] = c->rc2[0];
    c->rc2[0] = c->rc;
    c->rc = r;
    *slot = r;
  }
}

// ex2, lg2, sin, cos, tanh of 32 lanes in place, with the same libm calls as the
// interpreter's handlers (the results must be the same bits).
void jit_libm32(float* v, uint32_t op) {
  switch (op) {
    case JEx2: for (int l = 0; l < 32; ++l) v[l] = std::exp2(v[l]); break;
    case JLg2: for (int l = 0; l < 32; ++l) v[l] = std::log2(v[l]); break;
    case JSin: for (int l = 0; l < 32; ++l) v[l] = std::sin(v[l]); break;
    case JCos: for (int l = 0; l < 32; ++l) v[l] = std::cos(v[l]); break;
    default: for (int l = 0; l < 32; ++l) v[l] = std::tanh(v[l]); break;
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
    llvm::Value* v = B.CreateAlignedLoad(vec(i64), slot_ptr(s), llvm::Align(8));
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
        B.CreateAlignedStore(widen(B, c, vec(i64)), slot_ptr(s), llvm::Align(8));
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
      case JEx2: case JLg2: case JSin: case JCos: case JTanh: {
        if (a->getType() != vec(f32)) return nullptr;
        B.CreateAlignedStore(a, shfl_buf, llvm::Align(8));
        llvm::FunctionType* t = llvm::FunctionType::get(B.getVoidTy(), {ptr, i32}, false);
        B.CreateCall(t, B.CreateIntToPtr(B.getInt64(reinterpret_cast<uint64_t>(&jit_libm32)), ptr), {shfl_buf, B.getInt32(op)});
        return B.CreateAlignedLoad(vec(f32), shfl_buf, llvm::Align(8));
      }
    }
    return nullptr;
  }

  // add/sub/mul/fma.{rz,rm,rp}.f32 (h_f32_dir without .sat): the exact result as a
  // double-double (the product of two floats is exact in double, TwoSum gives the
  // sum's error), rounded to nearest in float and stepped one ulp toward the
  // direction asked when that went the wrong way. Lanes the shortcut does not
  // cover (NaN, infinity or denormal operands, a zero, denormal or overflowing
  // result) send the whole instruction to the handler.
  bool fdir(const Inst& I, llvm::Value* mvec, llvm::Value* m, uint32_t pc) {
    const uint32_t op = I.a0, mode = I.a1 & 3;
    if (op > 3 || mode == 0 || (I.flags & 2)) return false;
    auto v32 = [&](uint32_t x) { return B.CreateVectorSplat(32, B.getInt32(x)); };
    auto plain = [&](llvm::Value* bits) {  // zero, or finite and normal
      llvm::Value* e = B.CreateAnd(bits, v32(0x7f800000u));
      llvm::Value* zero = B.CreateICmpEQ(B.CreateAnd(bits, v32(0x7fffffffu)), v32(0));
      return B.CreateOr(zero, B.CreateAnd(B.CreateICmpNE(e, v32(0)), B.CreateICmpNE(e, v32(0x7f800000u))));
    };
    const int nsrc = op == 3 ? 3 : 2;
    llvm::Value* ok = mvec;
    llvm::Value* x[3];
    for (int i = 0; i < nsrc; ++i) {
      llvm::Value* bits = B.CreateTrunc(reg(I.s[i]), vec(i32));
      ok = B.CreateAnd(ok, plain(bits));
      x[i] = B.CreateFPExt(B.CreateBitCast(bits, vec(f32)), vec(f64));
    }
    llvm::Value* p = op >= 2 ? B.CreateFMul(x[0], x[1]) : x[0];
    llvm::Value* q = op == 0 ? x[1] : op == 1 ? B.CreateFNeg(x[1]) : op == 3 ? x[2] : llvm::ConstantFP::get(vec(f64), 0.0);
    llvm::Value* sum = B.CreateFAdd(p, q);
    llvm::Value* bb = B.CreateFSub(sum, p);
    llvm::Value* err = B.CreateFAdd(B.CreateFSub(p, B.CreateFSub(sum, bb)), B.CreateFSub(q, bb));
    llvm::Value* f = B.CreateFPTrunc(sum, vec(f32));
    llvm::Value* fd = B.CreateFPExt(f, vec(f64));
    llvm::Value* zero = llvm::ConstantFP::get(vec(f64), 0.0);
    llvm::Value* below = B.CreateOr(B.CreateFCmpOLT(fd, sum), B.CreateAnd(B.CreateFCmpOEQ(fd, sum), B.CreateFCmpOGT(err, zero)));
    llvm::Value* above = B.CreateOr(B.CreateFCmpOGT(fd, sum), B.CreateAnd(B.CreateFCmpOEQ(fd, sum), B.CreateFCmpOLT(err, zero)));
    llvm::Value* neg = B.CreateFCmpOLT(sum, zero);
    // rm: the float below when f is above the exact value; rp: the one above when below;
    // rz: toward zero, i.e. rm for positive results and rp for negative ones
    llvm::Value* down = mode == 2 ? above : mode == 3 ? B.CreateAnd(below, llvm::ConstantInt::getFalse(vec(i1))) : B.CreateAnd(above, B.CreateNot(neg));
    llvm::Value* up = mode == 3 ? below : mode == 2 ? B.CreateAnd(below, llvm::ConstantInt::getFalse(vec(i1))) : B.CreateAnd(below, neg);
    // one ulp toward -inf / +inf on the bits of a non-zero float
    llvm::Value* fb = B.CreateBitCast(f, vec(i32));
    llvm::Value* fneg = B.CreateICmpSLT(fb, v32(0));
    llvm::Value* dec = B.CreateSub(fb, v32(1)), *inc = B.CreateAdd(fb, v32(1));
    llvm::Value* r = B.CreateSelect(down, B.CreateSelect(fneg, inc, dec), B.CreateSelect(up, B.CreateSelect(fneg, dec, inc), fb));
    llvm::Value* re = B.CreateAnd(r, v32(0x7f800000u));
    ok = B.CreateAnd(ok, B.CreateFCmpONE(sum, zero));
    ok = B.CreateAnd(ok, B.CreateAnd(B.CreateICmpNE(re, v32(0)), B.CreateICmpNE(re, v32(0x7f800000u))));
    llvm::Value* all = B.CreateAndReduce(B.CreateOr(B.CreateNot(mvec), ok));
    llvm::Value* old = reg(I.d[0]);
    llvm::BasicBlock* fast = llvm::BasicBlock::Create(C, "dfast", fn);
    llvm::BasicBlock* slow = llvm::BasicBlock::Create(C, "dslow", fn);
    llvm::BasicBlock* join = llvm::BasicBlock::Create(C, "djoin", fn);
    B.CreateCondBr(all, fast, slow);
    B.SetInsertPoint(fast);
    llvm::Value* res = B.CreateSelect(mvec, B.CreateZExt(r, vec(i64)), old);
    B.CreateBr(join);
    B.SetInsertPoint(slow);
    llvm::Value* reread;
    {
      auto saved = cache;
      call_handler(I, m, pc);
      cache = std::move(saved);
      reread = B.CreateAlignedLoad(vec(i64), slot_ptr(I.d[0]), llvm::Align(8));
    }
    llvm::BasicBlock* slow_end = B.GetInsertBlock();
    B.CreateBr(join);
    B.SetInsertPoint(join);
    llvm::PHINode* ph = B.CreatePHI(vec(i64), 2);
    ph->addIncoming(res, fast);
    ph->addIncoming(reread, slow_end);
    cache[I.d[0]] = {ph, true};
    return true;
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
  // leaves the block when it faulted. The register file is written first. An
  // instruction inlined with the handler as its slow path keeps the cache it had
  // before the call (the handler writes only its destinations): the registers
  // stay dirty, so the fast path need not write them back.
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

  // The lanes' addresses of I's memory operand (shared or global/generic/const) checked
  // for an access of szv bytes each: `all` is true when every lane of the group is
  // aligned and inside the block's shared memory or the region the instruction reached
  // last (its Ctx::jrc slot; else jit_refresh puts the first lane's region there and
  // they are checked again); host + off is each lane's byte. false: not inlined.
  bool locate(const Inst& I, Sp space, uint64_t szv, bool write, llvm::Value* mvec, llvm::Value* m, llvm::Value*& all,
              llvm::Value*& host_out, llvm::Value*& off_out) {
    llvm::Value* base = addr_base(I);
    if (!base || I.avk == AV_Local) return false;
    llvm::Value* a = B.CreateVectorSplat(32, base);
    if (I.areg != NOREG) a = B.CreateAdd(a, reg(I.areg));
    llvm::Value* aligned = B.CreateICmpEQ(B.CreateAnd(a, splat64(szv - 1)), splat64(0));
    llvm::Value *ok = nullptr, *host, *all_override = nullptr;
    if (space == Sp::Shared) {
      llvm::Value* ss = B.CreateZExt(field(kOffSharedSize, i32), i64);
      llvm::Value* fits = B.CreateICmpUGE(ss, B.getInt64(szv));
      llvm::Value* lim = B.CreateVectorSplat(32, B.CreateSub(ss, B.getInt64(szv)));
      ok = B.CreateAnd(aligned, B.CreateAnd(B.CreateICmpULE(a, lim), B.CreateVectorSplat(32, fits)));
      host = field(kOffShared, ptr);
    } else {
      // the region this instruction reached last (its Ctx::jrc slot); else jit_refresh
      // puts the first lane's region there and it is checked again
      auto check = [&](uint64_t r, llvm::Value*& host_out, llvm::Value*& off_out) {
        llvm::Value* rb = field(r + kRegionBase, i64);
        llvm::Value* rs = field(r + kRegionSize, i64);
        llvm::Value* off = B.CreateSub(a, B.CreateVectorSplat(32, rb));
        llvm::Value* fits = B.CreateICmpUGE(rs, B.getInt64(szv));
        llvm::Value* lim = B.CreateVectorSplat(32, B.CreateSub(rs, B.getInt64(szv)));
        llvm::Value* k = B.CreateAnd(aligned, B.CreateAnd(B.CreateICmpULE(off, lim), B.CreateVectorSplat(32, fits)));
        if (write) k = B.CreateAnd(k, B.CreateVectorSplat(32, B.CreateICmpNE(field(r + kRegionWritable, i8), B.getInt8(0))));
        host_out = field(r + kRegionHost, ptr);
        off_out = off;
        return B.CreateAndReduce(B.CreateOr(B.CreateNot(mvec), k));
      };
      const uint64_t slot = kOffJrc + sizeof(DeviceMemory::Region) * (memops++ % Ctx::kJitRegionSlots);
      llvm::Value *h1, *o1, *h3, *o3;
      llvm::Value* all12 = check(slot, h1, o1);
      llvm::Value* host12 = h1;
      llvm::Value* off12 = o1;
      llvm::BasicBlock* cur = B.GetInsertBlock();
      llvm::BasicBlock* refresh = llvm::BasicBlock::Create(C, "refresh", fn);
      llvm::BasicBlock* pick = llvm::BasicBlock::Create(C, "pick", fn);
      B.CreateCondBr(all12, pick, refresh);
      B.SetInsertPoint(refresh);
      llvm::Value* first = B.CreateExtractElement(a, B.CreateZExt(B.CreateBinaryIntrinsic(llvm::Intrinsic::cttz, m, B.getTrue()), i64));
      llvm::FunctionType* rty = llvm::FunctionType::get(B.getVoidTy(), {ptr, i64, ptr}, false);
      B.CreateCall(rty, B.CreateIntToPtr(B.getInt64(reinterpret_cast<uint64_t>(&jit_refresh)), ptr),
                   {ctx, first, B.CreateConstGEP1_64(i8, ctx, slot)});
      llvm::Value* all3 = check(slot, h3, o3);
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
    all = all_override ? all_override : B.CreateAndReduce(B.CreateOr(B.CreateNot(mvec), ok));
    host_out = host;
    off_out = a;
    return true;
  }

  // ld/st with the fast path inline: every lane of the group aligned and inside
  // the block's shared memory (shared) or the region the instruction reached last
  // (global, generic, const); otherwise the handler does the access (and any fault).
  bool mem(const Inst& I, const JitDesc& d, llvm::Value* mvec, llvm::Value* m, uint32_t pc) {
    const bool store = d.kind == JK::St;
    if (d.space == Sp::KParam) return param_load(I, d, mvec, m, pc);
    const uint64_t szv = uint64_t(d.size) * d.vec;
    llvm::Value *all, *host, *a;
    if (!locate(I, d.space, szv, store, mvec, m, all, host, a)) return false;
    llvm::Value* sval[4] = {};
    llvm::Value* old[4] = {};
    // before the branch, so that both paths see the same cache
    for (int i = 0; i < d.vec; ++i) {
      if (store) sval[i] = reg(I.s[i]);
      else if (I.d[i] != NOREG) old[i] = reg(I.d[i]);
    }
    // The lanes' address pattern: consecutive elements over the warp, or over each
    // half-warp, or one address per half. Computed from the address register alone
    // (the operand adds the same constant to every lane) and before the branch, so
    // that the optimizer shares it among accesses through one register ([r+0],
    // [r+64], ... of an unrolled loop).
    llvm::Value *contig = nullptr, *halves_ok = nullptr, *hcontig[2] = {};
    const bool halves = !store && I.d[0] != NOREG && d.space == Sp::Shared;  // tiles live in shared memory
    if (d.vec == 1) {
      llvm::Value* pat = I.areg != NOREG ? reg(I.areg) : a;
      auto pattern = [&](int from, int n, llvm::Value** unif) {  // consecutive; *unif: one address
        std::vector<int> idx;
        std::vector<llvm::Constant*> st;
        for (int l = 0; l < n; ++l) idx.push_back(from + l), st.push_back(B.getInt64(uint64_t(l) * d.size));
        llvm::Value* part = n == 32 ? pat : B.CreateShuffleVector(pat, idx);
        llvm::Value* off = B.CreateSub(part, B.CreateVectorSplat(unsigned(n), B.CreateExtractElement(pat, uint64_t(from))));
        if (unif) *unif = B.CreateAndReduce(B.CreateICmpEQ(off, llvm::Constant::getNullValue(off->getType())));
        return B.CreateAndReduce(B.CreateICmpEQ(off, llvm::ConstantVector::get(st)));
      };
      contig = pattern(0, 32, nullptr);
      if (halves) {
        llvm::Value *u0, *u1;
        hcontig[0] = pattern(0, 16, &u0);
        hcontig[1] = pattern(16, 16, &u1);
        halves_ok = B.CreateAnd(B.CreateAnd(B.CreateOr(hcontig[0], u0), B.CreateOr(hcontig[1], u1)),
                                B.CreateICmpEQ(m, B.getInt32(0xffffffffu)));
      }
    }
    llvm::BasicBlock* fast = llvm::BasicBlock::Create(C, "fast", fn);
    llvm::BasicBlock* slow = llvm::BasicBlock::Create(C, "slow", fn);
    llvm::BasicBlock* join = llvm::BasicBlock::Create(C, "join", fn);
    B.CreateCondBr(all, fast, slow);
    B.SetInsertPoint(fast);
    llvm::Type* et = B.getIntNTy(d.size * 8);
    llvm::Value* loaded[4] = {};
    const bool narrow = !store && d.size == 4 && all_lanes(mvec);  // 32-bit loads of a whole warp stay 32-bit
    if (d.vec == 1) {
      // Consecutive lanes at consecutive elements (a[i] with i = base + lane), the
      // common case: one masked vector access instead of a gather or scatter.
      llvm::Value* first = B.CreateExtractElement(a, uint64_t(0));
      llvm::BasicBlock* dense = llvm::BasicBlock::Create(C, "dense", fn);
      llvm::BasicBlock* sparse = llvm::BasicBlock::Create(C, "sparse", fn);
      llvm::BasicBlock* done = llvm::BasicBlock::Create(C, "done", fn);
      B.CreateCondBr(contig, dense, sparse);
      B.SetInsertPoint(dense);
      llvm::Value* pv = B.CreateGEP(i8, host, first);
      llvm::Value* dv = nullptr;
      if (store) B.CreateMaskedStore(B.CreateTrunc(sval[0], vec(et)), pv, llvm::Align(d.size), mvec);
      else if (I.d[0] != NOREG) dv = B.CreateMaskedLoad(vec(et), pv, llvm::Align(d.size), mvec);
      llvm::BasicBlock* dense_end = B.GetInsertBlock();
      B.CreateBr(done);
      B.SetInsertPoint(sparse);
      llvm::Value* hv = nullptr;
      llvm::BasicBlock* halves_end = nullptr;
      if (halves) {
        // A whole warp over a 16-wide tile (x[ty][k], y[k][tx] with 16x16 threads): each
        // half-warp at consecutive elements or at one address: two 16-lane loads.
        llvm::Value* ok = halves_ok;
        llvm::BasicBlock* hblock = llvm::BasicBlock::Create(C, "halves", fn);
        llvm::BasicBlock* gather = llvm::BasicBlock::Create(C, "gather", fn);
        B.CreateCondBr(ok, hblock, gather);
        B.SetInsertPoint(hblock);
        llvm::VectorType* ht = llvm::FixedVectorType::get(et, 16);
        auto one_half = [&](llvm::Value* first_h, llvm::Value* contig_h) -> llvm::Value* {
          llvm::Value* p = B.CreateGEP(i8, host, first_h);
          llvm::BasicBlock* cb = llvm::BasicBlock::Create(C, "hcontig", fn);
          llvm::BasicBlock* ub = llvm::BasicBlock::Create(C, "hunif", fn);
          llvm::BasicBlock* jb = llvm::BasicBlock::Create(C, "hjoin", fn);
          B.CreateCondBr(contig_h, cb, ub);
          B.SetInsertPoint(cb);
          llvm::Value* v16 = B.CreateAlignedLoad(ht, p, llvm::Align(d.size));
          B.CreateBr(jb);
          B.SetInsertPoint(ub);
          llvm::Value* s = B.CreateVectorSplat(16, B.CreateAlignedLoad(et, p, llvm::Align(d.size)));
          B.CreateBr(jb);
          B.SetInsertPoint(jb);
          llvm::PHINode* ph = B.CreatePHI(ht, 2);
          ph->addIncoming(v16, cb);
          ph->addIncoming(s, ub);
          return ph;
        };
        llvm::Value* lo = one_half(B.CreateExtractElement(a, uint64_t(0)), hcontig[0]);
        llvm::Value* hi = one_half(B.CreateExtractElement(a, uint64_t(16)), hcontig[1]);
        std::vector<int> cat;
        for (int l = 0; l < 32; ++l) cat.push_back(l);
        hv = B.CreateShuffleVector(lo, hi, cat);
        halves_end = B.GetInsertBlock();
        B.CreateBr(done);
        B.SetInsertPoint(gather);
      }
      llvm::Value* sv = nullptr;
      llvm::Value* ps = B.CreateGEP(i8, host, a);
      if (store) B.CreateMaskedScatter(B.CreateTrunc(sval[0], vec(et)), ps, llvm::Align(d.size), mvec);
      else if (I.d[0] != NOREG) sv = B.CreateMaskedGather(vec(et), ps, llvm::Align(d.size), mvec);
      llvm::BasicBlock* sparse_end = B.GetInsertBlock();
      B.CreateBr(done);
      B.SetInsertPoint(done);
      if (!store && I.d[0] != NOREG) {
        llvm::PHINode* ph = B.CreatePHI(vec(et), 3);
        ph->addIncoming(dv, dense_end);
        if (halves_end) ph->addIncoming(hv, halves_end);
        ph->addIncoming(sv, sparse_end);
        loaded[0] = narrow ? ph : B.CreateSelect(mvec, ext64(ph, d.sgn), old[0]);
      }
    }
    llvm::Value* p0 = B.CreateGEP(i8, host, a);
    for (int i = 0; i < d.vec && d.vec > 1; ++i) {
      llvm::Value* p = i ? B.CreateGEP(i8, p0, B.getInt64(uint64_t(i) * d.size)) : p0;
      if (store) {
        llvm::Value* v = B.CreateTrunc(sval[i], vec(et));
        B.CreateMaskedScatter(v, p, llvm::Align(d.size), mvec);
      } else if (I.d[i] != NOREG) {
        llvm::Value* v = B.CreateMaskedGather(vec(et), p, llvm::Align(d.size), mvec);
        loaded[i] = narrow ? v : B.CreateSelect(mvec, ext64(v, d.sgn), old[i]);
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
        if (!store && I.d[i] != NOREG) {
          reread[i] = B.CreateAlignedLoad(vec(i64), slot_ptr(I.d[i]), llvm::Align(8));
          if (narrow) reread[i] = B.CreateTrunc(reread[i], vec(i32));
        }
    }
    llvm::BasicBlock* slow_end = B.GetInsertBlock();
    B.CreateBr(join);
    B.SetInsertPoint(join);
    // a loaded value stays in SSA form (dirty: the fast path did not write it back)
    for (int i = 0; i < d.vec; ++i)
      if (!store && I.d[i] != NOREG) {
        llvm::PHINode* ph = B.CreatePHI(narrow ? vec(i32) : vec(i64), 2);
        ph->addIncoming(loaded[i], fast_end);
        ph->addIncoming(reread[i], slow_end);
        cache[I.d[i]] = narrow ? Cached{nullptr, true, ph, d.sgn} : Cached{ph, true};
      }
    return true;
  }

  // ld.param [name+off] of a kernel parameter: one load, the same value in every lane.
  // Outside the parameter buffer, the handler faults as it would interpreted.
  bool param_load(const Inst& I, const JitDesc& d, llvm::Value* mvec, llvm::Value* m, uint32_t pc) {
    if (I.areg != NOREG || (I.avk != AV_Imm && I.avk != AV_None)) return false;
    const uint64_t off = (I.avk == AV_Imm ? uint64_t(I.avar) : 0) + uint64_t(I.aoff);
    const uint64_t szv = uint64_t(d.size) * d.vec;
    if (off % szv || off > UINT32_MAX) return false;  // misaligned: the handler's fault
    llvm::Value* old[4] = {};
    for (int i = 0; i < d.vec; ++i)
      if (I.d[i] != NOREG) old[i] = reg(I.d[i]);
    llvm::BasicBlock* fast = llvm::BasicBlock::Create(C, "pfast", fn);
    llvm::BasicBlock* slow = llvm::BasicBlock::Create(C, "pslow", fn);
    llvm::BasicBlock* join = llvm::BasicBlock::Create(C, "pjoin", fn);
    llvm::Value* size = B.CreateZExt(field(kOffKparamSize, i32), i64);
    B.CreateCondBr(B.CreateICmpULE(B.getInt64(off + szv), size), fast, slow);
    B.SetInsertPoint(fast);
    llvm::Value* base = B.CreateConstGEP1_64(i8, field(kOffKparam, ptr), off);
    llvm::Type* et = B.getIntNTy(d.size * 8);
    llvm::Value* loaded[4] = {};
    for (int i = 0; i < d.vec; ++i) {
      if (I.d[i] == NOREG) continue;
      llvm::Value* v = B.CreateAlignedLoad(et, B.CreateConstGEP1_64(i8, base, uint64_t(i) * d.size), llvm::Align(d.size));
      v = d.size == 8 ? v : d.sgn ? B.CreateSExt(v, i64) : B.CreateZExt(v, i64);
      loaded[i] = B.CreateSelect(mvec, B.CreateVectorSplat(32, v), old[i]);
    }
    llvm::BasicBlock* fast_end = B.GetInsertBlock();
    B.CreateBr(join);
    B.SetInsertPoint(slow);
    llvm::Value* reread[4] = {};
    {
      auto saved = cache;
      call_handler(I, m, pc);
      cache = std::move(saved);
      for (int i = 0; i < d.vec; ++i)
        if (I.d[i] != NOREG) reread[i] = B.CreateAlignedLoad(vec(i64), slot_ptr(I.d[i]), llvm::Align(8));
    }
    llvm::BasicBlock* slow_end = B.GetInsertBlock();
    B.CreateBr(join);
    B.SetInsertPoint(join);
    for (int i = 0; i < d.vec; ++i)
      if (I.d[i] != NOREG) {
        llvm::PHINode* ph = B.CreatePHI(vec(i64), 2);
        ph->addIncoming(loaded[i], fast_end);
        ph->addIncoming(reread[i], slow_end);
        cache[I.d[i]] = {ph, true};
      }
    return true;
  }

  // <0, 1, ..., 31> as i32 lanes
  llvm::Value* lane_ids() {
    std::vector<llvm::Constant*> v;
    for (uint32_t l = 0; l < 32; ++l) v.push_back(B.getInt32(l));
    return llvm::ConstantVector::get(v);
  }
  llvm::Value* lanes64(uint64_t (*f)(uint32_t)) {
    std::vector<llvm::Constant*> v;
    for (uint32_t l = 0; l < 32; ++l) v.push_back(B.getInt64(f(l)));
    return llvm::ConstantVector::get(v);
  }
  llvm::Value* bcast32(uint64_t off) { return B.CreateVectorSplat(32, B.CreateZExt(field(off, i32), i64)); }

  // mov d, %special: what h_sreg computes, without the clocks (the handler reads those)
  bool sreg(const Inst& I, llvm::Value* mvec) {
    llvm::Value* r = nullptr;
    const uint32_t w = I.a0;
    if (w <= SR_TID + 2) {
      llvm::Value* p = B.CreateLoad(ptr, B.CreateConstGEP1_64(i8, ctx, kOffTid + 8 * (w - SR_TID)));
      r = B.CreateZExt(B.CreateAlignedLoad(vec(i32), p, llvm::Align(4)), vec(i64));
    } else if (w <= SR_NTID + 2) r = bcast32(kOffNtid + 4 * (w - SR_NTID));
    else if (w <= SR_CTAID + 2) r = bcast32(kOffCtaid + 4 * (w - SR_CTAID));
    else if (w <= SR_NCTAID + 2) r = bcast32(kOffNctaid + 4 * (w - SR_NCTAID));
    else switch (w) {
      case SR_LANEID: r = lanes64([](uint32_t l) { return uint64_t(l); }); break;
      case SR_WARPID: r = bcast32(kOffWarpId); break;
      case SR_NWARPID: r = bcast32(kOffNwarps); break;
      case SR_SMID: case SR_GRIDID: case SR_ZERO: case SR_RSV_BEGIN: case SR_RSV_0: r = splat64(0); break;
      case SR_NSMID: r = splat64(1); break;
      case SR_LM_EQ: r = lanes64([](uint32_t l) { return uint64_t(1u << l); }); break;
      case SR_LM_LE: r = lanes64([](uint32_t l) { return uint64_t(uint32_t((2ull << l) - 1)); }); break;
      case SR_LM_LT: r = lanes64([](uint32_t l) { return uint64_t((1u << l) - 1); }); break;
      case SR_LM_GE: r = lanes64([](uint32_t l) { return uint64_t(~((1u << l) - 1)); }); break;
      case SR_LM_GT: r = lanes64([](uint32_t l) { return uint64_t(uint32_t(~((2ull << l) - 1))); }); break;
      case SR_DYNSMEM: r = bcast32(kOffDynShared); break;
      case SR_TOTSMEM: r = bcast32(kOffSharedSize); break;
      case SR_RSV_END: case SR_RSV_CAP: r = splat64(kReservedShared); break;
      case SR_RSV_1: r = splat64(kReservedShared / 2); break;
      case SR_ENVREG1: r = B.CreateVectorSplat(32, B.CreateLShr(field(kOffGridwsAddr, i64), 32)); break;
      case SR_ENVREG2: r = B.CreateVectorSplat(32, B.CreateAnd(field(kOffGridwsAddr, i64), B.getInt64(0xffffffffu))); break;
      default: return false;  // clocks and timers: the handler
    }
    set(I.d[0], r, mvec);
    return true;
  }

  // shfl.sync as h_shfl: each lane's source lane and validity from b and c; a source
  // lane outside the group gives 0. The value is read from a copy of the register.
  llvm::Value* shfl_buf = nullptr;  // [32 x i64] in the function's frame
  bool shfl(const Inst& I, llvm::Value* mvec, llvm::Value* m) {
    if (I.a0 > 3) return false;
    llvm::Value* lane = lane_ids();
    auto v32 = [&](uint32_t x) { return B.CreateVectorSplat(32, B.getInt32(x)); };
    llvm::Value* b = B.CreateAnd(B.CreateTrunc(reg(I.s[1]), vec(i32)), v32(31));
    llvm::Value* cv = B.CreateTrunc(reg(I.s[2]), vec(i32));
    llvm::Value* seg = B.CreateAnd(B.CreateLShr(cv, v32(8)), v32(31));
    llvm::Value* clamp = B.CreateAnd(cv, v32(31));
    llvm::Value* minl = B.CreateAnd(lane, seg);
    llvm::Value* maxl = B.CreateOr(minl, B.CreateAnd(clamp, B.CreateNot(seg)));
    llvm::Value *j, *pv;
    switch (I.a0) {
      case 0: j = B.CreateSub(lane, b); pv = B.CreateICmpSGE(j, maxl); break;
      case 1: j = B.CreateAdd(lane, b); pv = B.CreateICmpSLE(j, maxl); break;
      case 2: j = B.CreateXor(lane, b); pv = B.CreateICmpSLE(j, maxl); break;
      default: j = B.CreateOr(minl, B.CreateAnd(b, B.CreateNot(seg))); pv = B.CreateICmpSLE(j, maxl); break;
    }
    llvm::Value* in = B.CreateAnd(pv, B.CreateAnd(B.CreateICmpSGE(j, v32(0)), B.CreateICmpSLE(j, v32(31))));
    j = B.CreateSelect(in, j, lane);
    B.CreateAlignedStore(reg(I.s[0]), shfl_buf, llvm::Align(8));
    llvm::Value* src = B.CreateMaskedGather(vec(i64), B.CreateGEP(i64, shfl_buf, j), llvm::Align(8), mvec);
    llvm::Value* member = B.CreateTrunc(B.CreateLShr(B.CreateVectorSplat(32, m), j), vec(i1));
    llvm::Value* val = B.CreateSelect(member, B.CreateTrunc(src, vec(i32)), llvm::Constant::getNullValue(vec(i32)));
    set_n(I.d[0], val, false, mvec);
    if (I.d[1] != NOREG) set(I.d[1], B.CreateZExt(pv, vec(i64)), mvec);
    return true;
  }

  // vote as h_vote: the ballot of the executing lanes, each lane's group its membermask
  bool vote(const Inst& I, llvm::Value* mvec, llvm::Value* m) {
    llvm::Value* p = B.CreateICmpNE(reg(I.s[0]), splat64(0));
    if (I.flags & 1) p = B.CreateNot(p);
    llvm::Value* ballot = B.CreateAnd(B.CreateBitCast(p, i32), m);
    llvm::Value* mv = B.CreateVectorSplat(32, m);
    llvm::Value* g = I.s[1] == NOREG ? mv : B.CreateAnd(B.CreateTrunc(reg(I.s[1]), vec(i32)), mv);
    llvm::Value* bv = B.CreateAnd(B.CreateVectorSplat(32, ballot), g);
    llvm::Value* zero = llvm::Constant::getNullValue(vec(i32));
    llvm::Value* r;
    switch (I.a0) {
      case 0: r = B.CreateZExt(B.CreateICmpEQ(bv, g), vec(i64)); break;
      case 1: r = B.CreateZExt(B.CreateICmpNE(bv, zero), vec(i64)); break;
      case 2: r = B.CreateZExt(B.CreateOr(B.CreateICmpEQ(bv, zero), B.CreateICmpEQ(bv, g)), vec(i64)); break;
      default: r = B.CreateZExt(bv, vec(i64)); break;
    }
    set(I.d[0], r, mvec);
    return true;
  }

  // cvt forms the fast handlers do not take (h_cvt_lanes computes them with cvt_lane):
  // narrowing integer conversions, float -> integer (any rounding), integer -> float
  // (round to nearest), float -> float rounding to an integral value. Others: the handler.
  bool cvt_lanes(const Inst& I, llvm::Value* mvec) {
    const Ty dt = Ty(I.a0), st = Ty(I.a1 & 0xff);
    const int mode = int((I.a1 >> 8) & 0xff);
    const bool sat = (I.a1 >> 16) & 1, ftz_ = (I.a1 >> 17) & 1;
    auto intty = [](Ty t) { return !ty_float(t) && t != T_Pred && ty_bytes(t) >= 1 && ty_bytes(t) <= 8; };
    auto fty = [](Ty t) { return t == T_F32 || t == T_F64; };
    llvm::Value* a = reg(I.s[0]);
    llvm::Value* r = nullptr;
    const int db = ty_bytes(dt), sb = ty_bytes(st);
    if (intty(dt) && intty(st)) {
      if (sat) return false;
      llvm::Value* iv = ext64(as_int(a, sb * 8), ty_signed(st));
      r = ext64(as_int(iv, db * 8), ty_signed(dt));
    } else if (intty(dt) && fty(st)) {
      // saturating (NaN -> 0) after rounding; rz/rm/rp truncate, as cvt_lane does
      llvm::Value* x = st == T_F32 ? as_f32(a) : as_f64(a);
      if (st == T_F32 && ftz_) x = ftz(x);
      if (st == T_F32) x = B.CreateFPExt(x, vec(f64));
      if (mode == 0 || mode == 4) x = intrinsic(llvm::Intrinsic::roundeven, {x});
      else if (mode == 6) x = intrinsic(llvm::Intrinsic::floor, {x});
      else if (mode == 7) x = intrinsic(llvm::Intrinsic::ceil, {x});
      llvm::Type* it = vec(B.getIntNTy(db * 8));
      llvm::Value* iv = B.CreateIntrinsic(ty_signed(dt) ? llvm::Intrinsic::fptosi_sat : llvm::Intrinsic::fptoui_sat, {it, x->getType()}, {x});
      r = ext64(iv, ty_signed(dt));
    } else if (fty(dt) && intty(st)) {
      if (sat || mode != 0) return false;
      const bool ss = ty_signed(st);
      llvm::Value* iv = ext64(as_int(a, sb * 8), ss);
      llvm::Type* ft = vec(dt == T_F32 ? f32 : f64);
      llvm::Value* f = ss ? B.CreateSIToFP(iv, ft) : B.CreateUIToFP(iv, ft);
      r = dt == T_F32 ? from_f32(f) : from_f64(f);
    } else if (fty(dt) && fty(st)) {
      // NaNs come out quiet, as the interpreter's conversions through double make them
      // (LLVM may fold an extension and truncation away); .sat makes -0 and NaN +0.
      if (mode != 0 && mode < 4) return false;
      llvm::Value* x = st == T_F32 ? as_f32(a) : as_f64(a);
      if (st == T_F32 && ftz_) x = ftz(x);
      if (st == T_F32) x = B.CreateFPExt(x, vec(f64));
      if (mode == 4) x = intrinsic(llvm::Intrinsic::roundeven, {x});
      else if (mode == 5) x = intrinsic(llvm::Intrinsic::trunc, {x});
      else if (mode == 6) x = intrinsic(llvm::Intrinsic::floor, {x});
      else if (mode == 7) x = intrinsic(llvm::Intrinsic::ceil, {x});
      auto finish = [&](llvm::Value* f, uint64_t quiet_bit) {
        llvm::Value* nan = B.CreateFCmpUNO(f, f);
        if (sat) {
          llvm::Value* zero = llvm::ConstantFP::get(f->getType(), 0.0);
          llvm::Value* one = llvm::ConstantFP::get(f->getType(), 1.0);
          llvm::Value* t = B.CreateSelect(B.CreateFCmpOGT(f, zero), f, zero);
          f = B.CreateSelect(nan, zero, B.CreateSelect(B.CreateFCmpOLE(t, one), t, one));
        }
        llvm::Value* bits = dt == T_F32 ? from_f32(f) : from_f64(f);
        if (sat || (st == T_F64 && dt == T_F64 && mode == 0)) return bits;  // the latter: no conversion ran
        return B.CreateSelect(nan, B.CreateOr(bits, splat64(quiet_bit)), bits);
      };
      if (dt == T_F32) {
        llvm::Value* f = B.CreateFPTrunc(x, vec(f32));
        if (ftz_) f = ftz(f);
        r = finish(f, 0x400000u);
      } else {
        r = finish(x, uint64_t(1) << 51);
      }
    } else {
      return false;
    }
    set(I.d[0], r, mvec);
    return true;
  }

  // atom/red on shared or global memory, lane after lane in lane order as h_atom
  // does: shared memory is the block's own (its warps run one at a time on this
  // worker), so a plain read-modify-write; global memory with atomic instructions.
  llvm::Value* atom_buf = nullptr;  // [4 x <32 x i64>]: offsets, b, c, results
  bool atom(const Inst& I, const JitDesc& d, llvm::Value* mvec, llvm::Value* m, uint32_t pc) {
    const bool shared = d.space == Sp::Shared;
    const auto op = AOp(d.op);
    if (!shared && d.space != Sp::Global) return false;
    if (op == A_INC || op == A_DEC || op > A_XOR) return false;
    const int bytes = ty_bytes(d.ty);
    const bool fl = ty_float(d.ty), sgn = ty_signed(d.ty) && !fl;
    llvm::Value *all, *host, *off;
    if (!locate(I, d.space, uint64_t(bytes), true, mvec, m, all, host, off)) return false;
    llvm::Value* bv = reg(I.s[0]);
    llvm::Value* cv = I.s[1] != NOREG ? reg(I.s[1]) : bv;
    llvm::Value* old = I.d[0] != NOREG ? reg(I.d[0]) : nullptr;
    llvm::BasicBlock* fast = llvm::BasicBlock::Create(C, "afast", fn);
    llvm::BasicBlock* slow = llvm::BasicBlock::Create(C, "aslow", fn);
    llvm::BasicBlock* join = llvm::BasicBlock::Create(C, "ajoin", fn);
    B.CreateCondBr(all, fast, slow);
    B.SetInsertPoint(fast);
    auto buf = [&](int k) { return B.CreateConstGEP1_64(i8, atom_buf, uint64_t(k) * 256); };
    B.CreateAlignedStore(off, buf(0), llvm::Align(8));
    B.CreateAlignedStore(bv, buf(1), llvm::Align(8));
    B.CreateAlignedStore(cv, buf(2), llvm::Align(8));
    llvm::BasicBlock* pre = B.GetInsertBlock();
    llvm::BasicBlock* head = llvm::BasicBlock::Create(C, "alane", fn);
    llvm::BasicBlock* body = llvm::BasicBlock::Create(C, "abody", fn);
    llvm::BasicBlock* latch = llvm::BasicBlock::Create(C, "alatch", fn);
    llvm::BasicBlock* done = llvm::BasicBlock::Create(C, "adone", fn);
    B.CreateBr(head);
    B.SetInsertPoint(head);
    llvm::PHINode* l = B.CreatePHI(i32, 2);
    l->addIncoming(B.getInt32(0), pre);
    B.CreateCondBr(B.CreateTrunc(B.CreateLShr(m, l), i1), body, latch);
    B.SetInsertPoint(body);
    llvm::Value* l64 = B.CreateZExt(l, i64);
    auto lane = [&](int k) { return B.CreateAlignedLoad(i64, B.CreateGEP(i64, buf(k), l64), llvm::Align(8)); };
    llvm::Value* p = B.CreateGEP(i8, host, lane(0));
    llvm::Type* it = B.getIntNTy(bytes * 8);
    llvm::Type* ft = bytes == 4 ? f32 : f64;
    llvm::Value* b = B.CreateTrunc(lane(1), it);  // the bits of the operand
    llvm::Value* c = B.CreateTrunc(lane(2), it);
    llvm::Value* oldbits;  // the value before, as bits
    if (shared) {
      llvm::Value* o = B.CreateAlignedLoad(it, p, llvm::Align(bytes));
      llvm::Value* nv = nullptr;
      switch (op) {
        case A_ADD: nv = fl ? B.CreateBitCast(B.CreateFAdd(B.CreateBitCast(o, ft), B.CreateBitCast(b, ft)), it) : B.CreateAdd(o, b); break;
        case A_MIN: nv = B.CreateSelect(sgn ? B.CreateICmpSLT(b, o) : B.CreateICmpULT(b, o), b, o); break;
        case A_MAX: nv = B.CreateSelect(sgn ? B.CreateICmpSGT(b, o) : B.CreateICmpUGT(b, o), b, o); break;
        case A_EXCH: nv = b; break;
        case A_CAS: nv = B.CreateSelect(fl ? B.CreateFCmpOEQ(B.CreateBitCast(o, ft), B.CreateBitCast(b, ft)) : B.CreateICmpEQ(o, b), c, o); break;
        case A_AND: nv = B.CreateAnd(o, b); break;
        case A_OR: nv = B.CreateOr(o, b); break;
        default: nv = B.CreateXor(o, b); break;
      }
      B.CreateAlignedStore(nv, p, llvm::Align(bytes));
      oldbits = o;
    } else {
      using R = llvm::AtomicRMWInst;
      const auto ord = llvm::AtomicOrdering::SequentiallyConsistent;
      auto rmw = [&](R::BinOp k, llvm::Value* v) { return B.CreateAtomicRMW(k, p, v, llvm::MaybeAlign(bytes), ord); };
      switch (op) {
        case A_ADD: oldbits = fl ? B.CreateBitCast(rmw(R::FAdd, B.CreateBitCast(b, ft)), it) : rmw(R::Add, b); break;
        case A_MIN: oldbits = rmw(sgn ? R::Min : R::UMin, b); break;
        case A_MAX: oldbits = rmw(sgn ? R::Max : R::UMax, b); break;
        case A_EXCH: oldbits = rmw(R::Xchg, b); break;
        case A_CAS: oldbits = B.CreateExtractValue(B.CreateAtomicCmpXchg(p, b, c, llvm::MaybeAlign(bytes), ord, ord), 0); break;
        case A_AND: oldbits = rmw(R::And, b); break;
        case A_OR: oldbits = rmw(R::Or, b); break;
        default: oldbits = rmw(R::Xor, b); break;
      }
    }
    B.CreateAlignedStore(bytes == 8 ? oldbits : sgn ? B.CreateSExt(oldbits, i64) : B.CreateZExt(oldbits, i64),
                         B.CreateGEP(i64, buf(3), l64), llvm::Align(8));
    B.CreateBr(latch);
    B.SetInsertPoint(latch);
    llvm::Value* next = B.CreateAdd(l, B.getInt32(1));
    l->addIncoming(next, latch);
    B.CreateCondBr(B.CreateICmpULT(next, B.getInt32(32)), head, done);
    B.SetInsertPoint(done);
    llvm::Value* res = old ? B.CreateSelect(mvec, B.CreateAlignedLoad(vec(i64), buf(3), llvm::Align(8)), old) : nullptr;
    B.CreateBr(join);
    B.SetInsertPoint(slow);
    llvm::Value* reread = nullptr;
    {
      auto saved = cache;
      call_handler(I, m, pc);
      cache = std::move(saved);
      if (old) reread = B.CreateAlignedLoad(vec(i64), slot_ptr(I.d[0]), llvm::Align(8));
    }
    llvm::BasicBlock* slow_end = B.GetInsertBlock();
    B.CreateBr(join);
    B.SetInsertPoint(join);
    if (old) {
      llvm::PHINode* ph = B.CreatePHI(vec(i64), 2);
      ph->addIncoming(res, done);
      ph->addIncoming(reread, slow_end);
      cache[I.d[0]] = {ph, true};
    }
    return true;
  }

  // One instruction inline; false: not inlined (the caller calls its handler).
  bool inst(const Inst& I, const JitDesc& d, llvm::Value* mvec, llvm::Value* m, uint32_t pc) {
    switch (d.kind) {
      case JK::Mov: {
        auto it = (I.s[0] & CBIT) ? cache.end() : cache.find(I.s[0]);
        if (it != cache.end() && it->second.narrow && all_lanes(mvec)) {
          cache[I.d[0]] = {nullptr, true, it->second.narrow, it->second.sext};
          return true;
        }
        set(I.d[0], reg(I.s[0]), mvec);
        return true;
      }
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
        llvm::Value* a = ri(I.s[0], n);
        llvm::Value* b = ri(I.s[1], n);
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
        set_n(I.d[0], r, sgn, mvec);
        return true;
      }
      case JK::IUn: {
        const int n = bits(d.ty);
        const bool sgn = ty_signed(d.ty);
        llvm::Value* a = ri(I.s[0], n);
        llvm::Value* zero = llvm::Constant::getNullValue(a->getType());
        llvm::Value* r = d.op == JNeg ? B.CreateSub(zero, a)
                       : d.op == JNot ? B.CreateNot(a)
                       : sgn          ? B.CreateSelect(B.CreateICmpSLT(a, zero), B.CreateSub(zero, a), a)
                                      : a;
        set_n(I.d[0], r, sgn, mvec);
        return true;
      }
      case JK::MadLo: {
        const int n = bits(d.ty);
        llvm::Value* r = B.CreateAdd(B.CreateMul(ri(I.s[0], n), ri(I.s[1], n)), ri(I.s[2], n));
        set_n(I.d[0], r, false, mvec);
        return true;
      }
      case JK::MulWide:
      case JK::MadWide: {
        const int n = bits(d.ty);
        const bool sgn = ty_signed(d.ty);
        llvm::Type* w = vec(B.getIntNTy(2 * n));
        auto wide = [&](llvm::Value* v) { return sgn ? B.CreateSExt(as_int(v, n), w) : B.CreateZExt(as_int(v, n), w); };
        llvm::Value* r = B.CreateMul(wide(reg(I.s[0])), wide(reg(I.s[1])));
        if (d.kind == JK::MadWide) r = B.CreateAdd(r, ri(I.s[2], 2 * n));
        set_n(I.d[0], r, sgn, mvec);
        return true;
      }
      case JK::Shift: {
        const int n = bits(d.ty);
        const bool sgn = ty_signed(d.ty);
        llvm::Value* a = ri(I.s[0], n);
        llvm::Value* s = B.CreateTrunc(reg(I.s[1]), vec(i32));
        llvm::Value* big = B.CreateICmpUGE(s, B.CreateVectorSplat(32, B.getInt32(uint32_t(n))));
        llvm::Value* sa = B.CreateSelect(big, llvm::Constant::getNullValue(vec(i32)), s);
        sa = n == 32 ? sa : n > 32 ? B.CreateZExt(sa, a->getType()) : B.CreateTrunc(sa, a->getType());
        llvm::Value* r;
        if (d.flag) r = B.CreateSelect(big, llvm::Constant::getNullValue(a->getType()), B.CreateShl(a, sa));
        else if (sgn) r = B.CreateSelect(big, B.CreateAShr(a, uint64_t(n - 1)), B.CreateAShr(a, sa));
        else r = B.CreateSelect(big, llvm::Constant::getNullValue(a->getType()), B.CreateLShr(a, sa));
        set_n(I.d[0], r, sgn, mvec);
        return true;
      }
      case JK::Setp: {
        // the plain form only: no combining predicate, no second result, no .ftz
        if (I.a1 != 0 || I.d[1] != NOREG || (d.ty == T_F32 && (I.flags & 4))) return false;
        llvm::Value* r;
        if (d.ty == T_F32) r = B.CreateFCmp(fpred(d.op), rf(I.s[0]), rf(I.s[1]));
        else if (d.ty == T_F64) r = B.CreateFCmp(fpred(d.op), as_f64(reg(I.s[0])), as_f64(reg(I.s[1])));
        else {
          auto p = ipred(d.op, ty_signed(d.ty));
          if (p == llvm::CmpInst::BAD_ICMP_PREDICATE) return false;
          const int n = bits(d.ty);
          r = B.CreateICmp(p, ri(I.s[0], n), ri(I.s[1], n));
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
        llvm::Value* a = rf(I.s[0]);
        llvm::Value* b = rf(I.s[1]);
        if (d.flag) a = ftz(a), b = ftz(b);
        llvm::Value* r = fop(d.op, a, b);
        if (!r) return false;
        if (d.flag) r = ftz(r);
        set_f32(I.d[0], r, mvec);
        return true;
      }
      case JK::FUn: {
        llvm::Value* a = rf(I.s[0]);
        if (d.flag) a = ftz(a);
        llvm::Value* r = fun(d.op, a);
        if (!r) return false;
        if (d.flag) r = ftz(r);
        set_f32(I.d[0], r, mvec);
        return true;
      }
      case JK::FFma: {
        llvm::Value* a = rf(I.s[0]);
        llvm::Value* b = rf(I.s[1]);
        llvm::Value* c = rf(I.s[2]);
        if (d.flag) a = ftz(a), b = ftz(b), c = ftz(c);
        llvm::Value* r = intrinsic(llvm::Intrinsic::fma, {a, b, c});
        if (d.flag) r = ftz(r);
        set_f32(I.d[0], r, mvec);
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
        if (d.space == Sp::Local) return false;
        return mem(I, d, mvec, m, pc);
      case JK::Sreg: return sreg(I, mvec);
      case JK::Shfl: return shfl(I, mvec, m);
      case JK::Vote: return vote(I, mvec, m);
      case JK::CvtLanes: return cvt_lanes(I, mvec);
      case JK::FDir: return fdir(I, mvec, m, pc);
      case JK::Atom: return atom(I, d, mvec, m, pc);
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
    shfl_buf = B.CreateAlloca(vec(i64));
    atom_buf = B.CreateAlloca(vec(i64), B.getInt32(4));
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
