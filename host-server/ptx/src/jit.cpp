// The PTX compiler's code generator, libwormhole-ptx-jit.so (see jit.hpp): each
// function becomes one LLVM function over a whole warp, entered at any block
// start. Registers stay in the warp's register file (32 lanes of 8 bytes per
// slot, as the interpreter keeps them); within a block their values live in
// SSA form and are written back before anything that may read the file (a
// handler, the block's end). Lanes are vector elements; an instruction's guard
// predicate selects which lanes it writes.
#include "jit_gen.hpp"

#include <llvm/ExecutionEngine/JITEventListener.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/RTDyldObjectLinkingLayer.h>
#include <llvm/ExecutionEngine/SectionMemoryManager.h>
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
  llvm::orc::LLJITBuilder b;
  b.setJITTargetMachineBuilder(std::move(*jtmb));
  // WORMHOLE_PTX_PERF=1: compiled kernels named for `perf` (LLVM's jitdump
  // file, for `perf inject --jit`; docs/ptx.md, "Profiling").
  if (const char* perf = std::getenv("WORMHOLE_PTX_PERF"); perf && *perf == '1')
    b.setObjectLinkingLayerCreator([](llvm::orc::ExecutionSession& es, const llvm::Triple&) {
      auto layer = std::make_unique<llvm::orc::RTDyldObjectLinkingLayer>(
          es, [] { return std::make_unique<llvm::SectionMemoryManager>(); });
      if (auto* l = llvm::JITEventListener::createPerfJITEventListener()) layer->registerJITEventListener(*l);
      return std::unique_ptr<llvm::orc::ObjectLayer>(std::move(layer));
    });
  auto j = b.create();
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

}  // namespace

namespace jitgen {

void Gen::call_handler(const Inst& I, llvm::Value* m, uint32_t pc) {
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

void Gen::handler_join(const Inst& I, llvm::Value* m, uint32_t pc, llvm::BasicBlock* join, llvm::BasicBlock* fast_end,
                       const std::vector<Dest>& dests, bool narrow, bool sext) {
  std::vector<llvm::Value*> reread;
  {
    auto saved = cache;  // the handler writes only the destinations: the rest stays valid
    call_handler(I, m, pc);
    cache = std::move(saved);
    for (const Dest& d : dests) {
      llvm::Value* v = tag(B.CreateAlignedLoad(vec(i64), slot_ptr(d.slot), llvm::Align(8)), tb_reg);
      reread.push_back(narrow ? B.CreateTrunc(v, vec(i32)) : v);
    }
  }
  llvm::BasicBlock* slow_end = B.GetInsertBlock();
  B.CreateBr(join);
  B.SetInsertPoint(join);
  // the values stay in SSA form (dirty: the fast path did not write them back)
  for (size_t k = 0; k < dests.size(); ++k) {
    llvm::PHINode* ph = B.CreatePHI(narrow ? vec(i32) : vec(i64), 2);
    ph->addIncoming(dests[k].fast, fast_end);
    ph->addIncoming(reread[k], slow_end);
    cache[dests[k].slot] = narrow ? Cached{nullptr, true, ph, sext} : Cached{ph, true};
  }
}

bool Gen::inst(const Inst& I, const JitDesc& d, llvm::Value* mvec, llvm::Value* m, uint32_t pc) {
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
    case JK::Tf32: {  // to_tf32 (mma.hpp) on the 32 lanes
      if (I.a1) return false;  // .satfinite, .relu: the handler
      auto k = [&](uint32_t v) { return B.CreateVectorSplat(32, B.getInt32(v)); };
      llvm::Value* x = ri(I.s[0], 32);
      llvm::Value* mag = B.CreateAnd(x, k(0x7fffffffu));
      llvm::Value* r = I.a0 == 2   ? B.CreateAdd(x, k(0x1000u))                                            // ties away
                       : I.a0 == 0 ? B.CreateAdd(B.CreateAdd(x, k(0xfffu)), B.CreateAnd(B.CreateLShr(x, 13), k(1)))  // even
                                   : x;                                                                    // toward zero
      r = B.CreateSelect(B.CreateICmpULT(mag, k(0x7f800000u)), B.CreateAnd(r, k(0xffffe000u)), x);
      r = B.CreateSelect(B.CreateICmpUGT(mag, k(0x7f800000u)), k(0x7fffffffu), r);  // NaN: the canonical NaN
      set_n(I.d[0], r, false, mvec);
      return true;
    }
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

void Gen::add_count(llvm::Value* m) {
  llvm::Value* c = B.CreateLoad(i64, cnt_var);
  B.CreateStore(B.CreateAdd(c, B.CreateZExt(B.CreateUnaryIntrinsic(llvm::Intrinsic::ctpop, m), i64)), cnt_var);
}

void Gen::exit_at(llvm::Value* pc) {
  tag(B.CreateStore(B.CreateAdd(tag(B.CreateLoad(i64, count), tb_misc), B.CreateLoad(i64, cnt_var)), count), tb_misc);
  B.CreateRet(pc);
}

llvm::Value* Gen::group_mask(const Inst& I, llvm::Value* active_vec) {
  if (I.guard == NOREG) return active_vec;
  llvm::Value* p = B.CreateICmpNE(reg(I.guard), splat64(0));
  if (I.gneg) p = B.CreateNot(p);
  return B.CreateAnd(active_vec, p);
}

std::vector<uint32_t> Gen::function(const Function& F, const std::string& name, std::vector<uint32_t>& ends, bool full) {
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
    llvm::Value* sl = back ? tag(B.CreateLoad(i32, slice), tb_misc) : nullptr;
    if (back) ok = B.CreateAnd(ok, B.CreateICmpUGT(sl, B.getInt32(1)));
    llvm::BasicBlock* yes = llvm::BasicBlock::Create(C, "jmp", fn);
    llvm::BasicBlock* no = llvm::BasicBlock::Create(C, "jmpno", fn);
    B.CreateCondBr(ok, yes, no);
    B.SetInsertPoint(no);
    exit_at(B.getInt32(e));
    B.SetInsertPoint(yes);
    if (back) tag(B.CreateStore(B.CreateSub(sl, B.getInt32(1)), slice), tb_misc);
    add_count(m);
    B.CreateBr(label[t]);
  }
  return starts;
}

}  // namespace jitgen

namespace {

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
  jitgen::Gen G(*ctx, *mod, M);
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
