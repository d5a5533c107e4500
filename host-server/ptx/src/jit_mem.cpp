// The PTX compiler: loads, stores and atomics (jit_gen.hpp).
#include "jit_gen.hpp"

namespace wh::ptx::detail::jitgen {

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

llvm::Value* Gen::addr_base(const Inst& I) {
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

bool Gen::locate(const Inst& I, Sp space, uint64_t szv, bool write, llvm::Value* mvec, llvm::Value* m, llvm::Value*& all,
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

bool Gen::mem(const Inst& I, const JitDesc& d, llvm::Value* mvec, llvm::Value* m, uint32_t pc) {
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
    if (store) mem(B.CreateMaskedStore(B.CreateTrunc(sval[0], vec(et)), pv, llvm::Align(d.size), mvec));
    else if (I.d[0] != NOREG) dv = mem(B.CreateMaskedLoad(vec(et), pv, llvm::Align(d.size), mvec));
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
        llvm::Value* v16 = mem(B.CreateAlignedLoad(ht, p, llvm::Align(d.size)));
        B.CreateBr(jb);
        B.SetInsertPoint(ub);
        llvm::Value* s = B.CreateVectorSplat(16, mem(B.CreateAlignedLoad(et, p, llvm::Align(d.size))));
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
    if (store) mem(B.CreateMaskedScatter(B.CreateTrunc(sval[0], vec(et)), ps, llvm::Align(d.size), mvec));
    else if (I.d[0] != NOREG) sv = mem(B.CreateMaskedGather(vec(et), ps, llvm::Align(d.size), mvec));
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
      mem(B.CreateMaskedScatter(v, p, llvm::Align(d.size), mvec));
    } else if (I.d[i] != NOREG) {
      llvm::Value* v = mem(B.CreateMaskedGather(vec(et), p, llvm::Align(d.size), mvec));
      loaded[i] = narrow ? v : B.CreateSelect(mvec, ext64(v, d.sgn), old[i]);
    }
  }
  llvm::BasicBlock* fast_end = B.GetInsertBlock();
  B.CreateBr(join);
  B.SetInsertPoint(slow);
  std::vector<Dest> dests;
  for (int i = 0; i < d.vec; ++i)
    if (!store && I.d[i] != NOREG) dests.push_back({I.d[i], loaded[i]});
  handler_join(I, m, pc, join, fast_end, dests, narrow, d.sgn);
  return true;
}

bool Gen::param_load(const Inst& I, const JitDesc& d, llvm::Value* mvec, llvm::Value* m, uint32_t pc) {
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
    llvm::Value* v = mem(B.CreateAlignedLoad(et, B.CreateConstGEP1_64(i8, base, uint64_t(i) * d.size), llvm::Align(d.size)));
    v = d.size == 8 ? v : d.sgn ? B.CreateSExt(v, i64) : B.CreateZExt(v, i64);
    loaded[i] = B.CreateSelect(mvec, B.CreateVectorSplat(32, v), old[i]);
  }
  llvm::BasicBlock* fast_end = B.GetInsertBlock();
  B.CreateBr(join);
  B.SetInsertPoint(slow);
  std::vector<Dest> dests;
  for (int i = 0; i < d.vec; ++i)
    if (I.d[i] != NOREG) dests.push_back({I.d[i], loaded[i]});
  handler_join(I, m, pc, join, fast_end, dests);
  return true;
}

bool Gen::atom(const Inst& I, const JitDesc& d, llvm::Value* mvec, llvm::Value* m, uint32_t pc) {
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
    llvm::Value* o = mem(B.CreateAlignedLoad(it, p, llvm::Align(bytes)));
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
    mem(B.CreateAlignedStore(nv, p, llvm::Align(bytes)));
    oldbits = o;
  } else {
    using R = llvm::AtomicRMWInst;
    const auto ord = llvm::AtomicOrdering::SequentiallyConsistent;
    auto rmw = [&](R::BinOp k, llvm::Value* v) { return mem(B.CreateAtomicRMW(k, p, v, llvm::MaybeAlign(bytes), ord)); };
    switch (op) {
      case A_ADD: oldbits = fl ? B.CreateBitCast(rmw(R::FAdd, B.CreateBitCast(b, ft)), it) : rmw(R::Add, b); break;
      case A_MIN: oldbits = rmw(sgn ? R::Min : R::UMin, b); break;
      case A_MAX: oldbits = rmw(sgn ? R::Max : R::UMax, b); break;
      case A_EXCH: oldbits = rmw(R::Xchg, b); break;
      case A_CAS: oldbits = B.CreateExtractValue(mem(B.CreateAtomicCmpXchg(p, b, c, llvm::MaybeAlign(bytes), ord, ord)), 0); break;
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
  std::vector<Dest> dests;
  if (old) dests.push_back({I.d[0], res});
  handler_join(I, m, pc, join, done, dests);
  return true;
}

}  // namespace wh::ptx::detail::jitgen
