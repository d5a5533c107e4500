// The PTX compiler: special registers, shuffles, votes, conversions, directed
// rounding and libm's functions (jit_gen.hpp).
#include <cmath>

#include "jit_gen.hpp"

namespace wh::ptx::detail::jitgen {

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

llvm::Value* Gen::fminmax(llvm::Value* a, llvm::Value* b, bool is_max) {
  llvm::Value* first = is_max ? B.CreateFCmpOGE(a, b) : B.CreateFCmpOLE(a, b);
  llvm::Value* second = is_max ? B.CreateFCmpOLT(a, b) : B.CreateFCmpOGT(a, b);
  llvm::Value* bnan = B.CreateFCmpUNO(b, b);
  return B.CreateSelect(first, a, B.CreateSelect(second, b, B.CreateSelect(bnan, a, b)));
}

llvm::Value* Gen::fop(uint8_t op, llvm::Value* a, llvm::Value* b) {
  switch (op) {
    case JAdd: return B.CreateFAdd(a, b);
    case JSub: return B.CreateFSub(a, b);
    case JMul: return B.CreateFMul(a, b);
    case JDiv: return B.CreateFDiv(a, b);
    case JMin: return fminmax(a, b, false);
    case JMax: return fminmax(a, b, true);
    case JMinNaN:
    case JMaxNaN: {
      if (a->getType() != vec(f32)) return nullptr;
      llvm::Value* nan = B.CreateBitCast(B.CreateVectorSplat(32, B.getInt32(0x7fffffffu)), vec(f32));  // canonical_nan
      llvm::Value* any = B.CreateOr(B.CreateFCmpUNO(a, a), B.CreateFCmpUNO(b, b));
      return B.CreateSelect(any, nan, fminmax(a, b, op == JMaxNaN));
    }
  }
  return nullptr;
}

llvm::Value* Gen::fun(uint8_t op, llvm::Value* a) {
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

bool Gen::fdir(const Inst& I, llvm::Value* mvec, llvm::Value* m, uint32_t pc) {
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
  llvm::Value* never = llvm::ConstantInt::getFalse(vec(i1));
  llvm::Value* down = mode == 2 ? above : mode == 3 ? never : B.CreateAnd(above, B.CreateNot(neg));
  llvm::Value* up = mode == 3 ? below : mode == 2 ? never : B.CreateAnd(below, neg);
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
  handler_join(I, m, pc, join, fast, {{I.d[0], res}});
  return true;
}

llvm::Value* Gen::lane_ids() {
  std::vector<llvm::Constant*> v;
  for (uint32_t l = 0; l < 32; ++l) v.push_back(B.getInt32(l));
  return llvm::ConstantVector::get(v);
}

llvm::Value* Gen::lanes64(uint64_t (*f)(uint32_t)) {
  std::vector<llvm::Constant*> v;
  for (uint32_t l = 0; l < 32; ++l) v.push_back(B.getInt64(f(l)));
  return llvm::ConstantVector::get(v);
}

bool Gen::sreg(const Inst& I, llvm::Value* mvec) {
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

bool Gen::shfl(const Inst& I, llvm::Value* mvec, llvm::Value* m) {
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

bool Gen::vote(const Inst& I, llvm::Value* mvec, llvm::Value* m) {
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

bool Gen::cvt_lanes(const Inst& I, llvm::Value* mvec) {
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

}  // namespace wh::ptx::detail::jitgen
