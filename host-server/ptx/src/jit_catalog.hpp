// The handlers the PTX compiler inlines, with what each computes. Handlers
// have internal linkage (one copy per decode unit), so each unit that picks
// them registers its own copies: WH_JIT_CATALOG() at the end of the unit.
#pragma once
#include "jit.hpp"
#include "ops_mem.hpp"
#include "ops_mma.hpp"

namespace wh::ptx::detail {
namespace {

template <class V>
constexpr Ty ty_of() {
  if constexpr (std::is_same_v<V, int8_t>) return T_S8;
  else if constexpr (std::is_same_v<V, int16_t>) return T_S16;
  else if constexpr (std::is_same_v<V, int32_t>) return T_S32;
  else if constexpr (std::is_same_v<V, int64_t>) return T_S64;
  else if constexpr (std::is_same_v<V, uint8_t>) return T_U8;
  else if constexpr (std::is_same_v<V, uint16_t>) return T_U16;
  else if constexpr (std::is_same_v<V, uint32_t>) return T_U32;
  else if constexpr (std::is_same_v<V, uint64_t>) return T_U64;
  else if constexpr (std::is_same_v<V, float>) return T_F32;
  else return T_F64;
}

template <class V>
void jit_catalog_int() {
  constexpr Ty t = ty_of<V>();
  jit_note(h_bin<V, OAdd>, {JK::IBin, JAdd, t});
  jit_note(h_bin<V, OSub>, {JK::IBin, JSub, t});
  jit_note(h_bin<V, OMul>, {JK::IBin, JMul, t});
  if constexpr (sizeof(V) <= 4) jit_note(h_bin<V, OMulHi>, {JK::IBin, JMulHi, t});
  jit_note(h_bin<V, OAnd>, {JK::IBin, JAnd, t});
  jit_note(h_bin<V, OOr>, {JK::IBin, JOr, t});
  jit_note(h_bin<V, OXor>, {JK::IBin, JXor, t});
  jit_note(h_bin<V, OMin>, {JK::IBin, JMin, t});
  jit_note(h_bin<V, OMax>, {JK::IBin, JMax, t});
  if constexpr (sizeof(V) >= 2) {
    jit_note(h_un<V, UNeg>, {JK::IUn, JNeg, t});
    jit_note(h_un<V, UNot>, {JK::IUn, JNot, t});
    jit_note(h_un<V, UAbs>, {JK::IUn, JAbs, t});
    jit_note(h_shift<V, true>, {JK::Shift, 0, t, T_None, true});
    jit_note(h_shift<V, false>, {JK::Shift, 0, t, T_None, false});
  }
  if constexpr (std::is_unsigned_v<V> && sizeof(V) >= 2) jit_note(h_madlo<V>, {JK::MadLo, 0, t});
  if constexpr (sizeof(V) == 2 || sizeof(V) == 4) {
    jit_note(h_mulwide<V>, {JK::MulWide, 0, t});
    jit_note(h_madwide<V>, {JK::MadWide, 0, t});
  }
}

template <class V>
void jit_catalog_setp() {
  constexpr Ty t = ty_of<V>();
  jit_note(h_setp<V, C_EQ>, {JK::Setp, C_EQ, t});
  jit_note(h_setp<V, C_NE>, {JK::Setp, C_NE, t});
  jit_note(h_setp<V, C_LT>, {JK::Setp, C_LT, t});
  jit_note(h_setp<V, C_LE>, {JK::Setp, C_LE, t});
  jit_note(h_setp<V, C_GT>, {JK::Setp, C_GT, t});
  jit_note(h_setp<V, C_GE>, {JK::Setp, C_GE, t});
}

template <class V>
void jit_catalog_float_setp() {
  constexpr Ty t = ty_of<V>();
#define WH_J(C) jit_note(h_setp<V, C>, {JK::Setp, C, t});
  WH_J(C_EQ) WH_J(C_NE) WH_J(C_LT) WH_J(C_LE) WH_J(C_GT) WH_J(C_GE) WH_J(C_EQU) WH_J(C_NEU) WH_J(C_LTU)
  WH_J(C_LEU) WH_J(C_GTU) WH_J(C_GEU) WH_J(C_NUM) WH_J(C_NAN)
#undef WH_J
}

template <bool FTZ>
void jit_catalog_f32() {
  jit_note(h_fbin<OAdd, FTZ, false>, {JK::FBin, JAdd, T_F32, T_None, FTZ});
  jit_note(h_fbin<OSub, FTZ, false>, {JK::FBin, JSub, T_F32, T_None, FTZ});
  jit_note(h_fbin<OMul, FTZ, false>, {JK::FBin, JMul, T_F32, T_None, FTZ});
  jit_note(h_fbin<ODiv, FTZ, false>, {JK::FBin, JDiv, T_F32, T_None, FTZ});
  jit_note(h_fbin<OMin, FTZ, false>, {JK::FBin, JMin, T_F32, T_None, FTZ});
  jit_note(h_fbin<OMax, FTZ, false>, {JK::FBin, JMax, T_F32, T_None, FTZ});
  jit_note(h_fbin<OMinNaN, FTZ, false>, {JK::FBin, JMinNaN, T_F32, T_None, FTZ});
  jit_note(h_fbin<OMaxNaN, FTZ, false>, {JK::FBin, JMaxNaN, T_F32, T_None, FTZ});
  jit_note(h_fun<UNeg, FTZ, false>, {JK::FUn, JNeg, T_F32, T_None, FTZ});
  jit_note(h_fun<UAbs, FTZ, false>, {JK::FUn, JAbs, T_F32, T_None, FTZ});
  jit_note(h_fun<USqrt, FTZ, false>, {JK::FUn, JSqrt, T_F32, T_None, FTZ});
  jit_note(h_fun<URcp, FTZ, false>, {JK::FUn, JRcp, T_F32, T_None, FTZ});
  jit_note(h_fun<URsqrt, FTZ, false>, {JK::FUn, JRsqrt, T_F32, T_None, FTZ});
  jit_note(h_ffma<FTZ, false>, {JK::FFma, 0, T_F32, T_None, FTZ});
  jit_note(h_fun<UEx2, FTZ, false>, {JK::FUn, JEx2, T_F32, T_None, FTZ});
  jit_note(h_fun<ULg2, FTZ, false>, {JK::FUn, JLg2, T_F32, T_None, FTZ});
  jit_note(h_fun<USin, FTZ, false>, {JK::FUn, JSin, T_F32, T_None, FTZ});
  jit_note(h_fun<UCos, FTZ, false>, {JK::FUn, JCos, T_F32, T_None, FTZ});
  jit_note(h_fun<UTanh, FTZ, false>, {JK::FUn, JTanh, T_F32, T_None, FTZ});
}

template <Sp S, int SZ>
void jit_catalog_mem() {
  jit_note(h_ld<S, SZ, false, 1>, {JK::Ld, 0, T_None, T_None, false, S, SZ, 1, false});
  jit_note(h_ld<S, SZ, false, 2>, {JK::Ld, 0, T_None, T_None, false, S, SZ, 2, false});
  jit_note(h_ld<S, SZ, false, 4>, {JK::Ld, 0, T_None, T_None, false, S, SZ, 4, false});
  if constexpr (SZ < 8) {
    jit_note(h_ld<S, SZ, true, 1>, {JK::Ld, 0, T_None, T_None, false, S, SZ, 1, true});
    jit_note(h_ld<S, SZ, true, 2>, {JK::Ld, 0, T_None, T_None, false, S, SZ, 2, true});
    jit_note(h_ld<S, SZ, true, 4>, {JK::Ld, 0, T_None, T_None, false, S, SZ, 4, true});
  }
  if constexpr (S != Sp::Const) {
    jit_note(h_st<S, SZ, 1>, {JK::St, 0, T_None, T_None, false, S, SZ, 1});
    jit_note(h_st<S, SZ, 2>, {JK::St, 0, T_None, T_None, false, S, SZ, 2});
    jit_note(h_st<S, SZ, 4>, {JK::St, 0, T_None, T_None, false, S, SZ, 4});
  }
}
template <Sp S>
void jit_catalog_space() {
  jit_catalog_mem<S, 1>();
  jit_catalog_mem<S, 2>();
  jit_catalog_mem<S, 4>();
  jit_catalog_mem<S, 8>();
}

template <class D, class S>
void jit_cvt() {
  jit_note(h_cvt_fast<D, S>, {JK::Cvt, 0, ty_of<D>(), ty_of<S>()});
}

// Templates, so that a unit instantiates only the handlers of the part it registers.
template <class = void>
void jit_catalog_sreg() {  // parser.cpp: special registers as operands
  jit_note(h_sreg, {JK::Sreg});
}
template <class = void>
void jit_catalog_core() {  // decode.cpp: mov, setp, selp, cvta, special registers, shfl, vote
  jit_note(h_sreg, {JK::Sreg});
  jit_note(h_shfl, {JK::Shfl});
  jit_note(h_vote, {JK::Vote});
  jit_note(h_mov, {JK::Mov});
  jit_note(h_selp, {JK::Selp});
  jit_note(h_cvta<true>, {JK::Cvta, 0, T_None, T_None, true});
  jit_note(h_cvta<false>, {JK::Cvta, 0, T_None, T_None, false});
  jit_catalog_setp<int16_t>();
  jit_catalog_setp<int32_t>();
  jit_catalog_setp<int64_t>();
  jit_catalog_setp<uint16_t>();
  jit_catalog_setp<uint32_t>();
  jit_catalog_setp<uint64_t>();
  jit_catalog_float_setp<float>();
  jit_catalog_float_setp<double>();
}
template <class = void>
void jit_catalog_arith() {  // decode_arith.cpp
  jit_note(h_pbin<OAnd>, {JK::PBin, JAnd});
  jit_note(h_pbin<OOr>, {JK::PBin, JOr});
  jit_note(h_pbin<OXor>, {JK::PBin, JXor});
  jit_note(h_pnot, {JK::PNot});
  jit_catalog_int<int8_t>();
  jit_catalog_int<int16_t>();
  jit_catalog_int<int32_t>();
  jit_catalog_int<int64_t>();
  jit_catalog_int<uint8_t>();
  jit_catalog_int<uint16_t>();
  jit_catalog_int<uint32_t>();
  jit_catalog_int<uint64_t>();
  jit_catalog_f32<false>();
  jit_catalog_f32<true>();
  jit_note(h_f32_dir, {JK::FDir});
#if defined(__x86_64__)
  jit_note(h_ffma_hw, {JK::FFma, 0, T_F32, T_None, false});
  jit_note(h_ffma_ftz_hw, {JK::FFma, 0, T_F32, T_None, true});
  jit_note(h_dfma_hw, {JK::DFma, 0, T_F64});
#endif
  jit_note(h_dfma<false>, {JK::DFma, 0, T_F64});
  jit_note(h_bin<double, OAdd>, {JK::DBin, JAdd, T_F64});
  jit_note(h_bin<double, OSub>, {JK::DBin, JSub, T_F64});
  jit_note(h_bin<double, OMul>, {JK::DBin, JMul, T_F64});
  jit_note(h_bin<double, ODiv>, {JK::DBin, JDiv, T_F64});
  jit_note(h_bin<double, OMin>, {JK::DBin, JMin, T_F64});
  jit_note(h_bin<double, OMax>, {JK::DBin, JMax, T_F64});
  jit_note(h_un<double, UNeg>, {JK::DUn, JNeg, T_F64});
  jit_note(h_un<double, UAbs>, {JK::DUn, JAbs, T_F64});
  jit_note(h_un<double, USqrt>, {JK::DUn, JSqrt, T_F64});
  jit_note(h_un<double, URcp>, {JK::DUn, JRcp, T_F64});
  jit_note(h_un<double, URsqrt>, {JK::DUn, JRsqrt, T_F64});
}
template <class = void>
void jit_catalog_cvt() {  // decode_cvt.cpp
  jit_cvt<int64_t, int8_t>();
  jit_cvt<int64_t, int16_t>();
  jit_cvt<int64_t, int32_t>();
  jit_cvt<uint64_t, uint8_t>();
  jit_cvt<uint64_t, uint16_t>();
  jit_cvt<uint64_t, uint32_t>();
  jit_cvt<uint64_t, uint64_t>();
  jit_cvt<float, int32_t>();
  jit_cvt<float, uint32_t>();
  jit_cvt<double, float>();
  jit_cvt<double, int32_t>();
  jit_cvt<double, uint32_t>();
  jit_cvt<float, double>();
  jit_note(h_cvt_lanes, {JK::CvtLanes});
  jit_note(h_cvt_tf32, {JK::Tf32});
}
template <Sp S, class V>
void jit_catalog_atom() {
  constexpr Ty t = ty_of<V>();
  jit_note(h_atom<S, V, A_ADD>, {JK::Atom, A_ADD, t, T_None, false, S});
  jit_note(h_atom<S, V, A_EXCH>, {JK::Atom, A_EXCH, t, T_None, false, S});
  jit_note(h_atom<S, V, A_CAS>, {JK::Atom, A_CAS, t, T_None, false, S});
  if constexpr (std::is_integral_v<V>) {
    jit_note(h_atom<S, V, A_MIN>, {JK::Atom, A_MIN, t, T_None, false, S});
    jit_note(h_atom<S, V, A_MAX>, {JK::Atom, A_MAX, t, T_None, false, S});
    jit_note(h_atom<S, V, A_AND>, {JK::Atom, A_AND, t, T_None, false, S});
    jit_note(h_atom<S, V, A_OR>, {JK::Atom, A_OR, t, T_None, false, S});
    jit_note(h_atom<S, V, A_XOR>, {JK::Atom, A_XOR, t, T_None, false, S});
  }
}
template <Sp S>
void jit_catalog_atoms() {
  jit_catalog_atom<S, uint32_t>();
  jit_catalog_atom<S, int32_t>();
  jit_catalog_atom<S, uint64_t>();
  jit_catalog_atom<S, int64_t>();
  jit_catalog_atom<S, float>();
  jit_catalog_atom<S, double>();
}
template <class = void>
void jit_catalog_memory() {  // decode_mem.cpp
  jit_catalog_atoms<Sp::Shared>();
  jit_catalog_atoms<Sp::Global>();
  // ld.param of a kernel's parameters (no stores: they are read-only)
  jit_note(h_ld<Sp::KParam, 1, false, 1>, {JK::Ld, 0, T_None, T_None, false, Sp::KParam, 1, 1, false});
  jit_note(h_ld<Sp::KParam, 2, false, 1>, {JK::Ld, 0, T_None, T_None, false, Sp::KParam, 2, 1, false});
  jit_note(h_ld<Sp::KParam, 4, false, 1>, {JK::Ld, 0, T_None, T_None, false, Sp::KParam, 4, 1, false});
  jit_note(h_ld<Sp::KParam, 8, false, 1>, {JK::Ld, 0, T_None, T_None, false, Sp::KParam, 8, 1, false});
  jit_note(h_ld<Sp::KParam, 4, false, 2>, {JK::Ld, 0, T_None, T_None, false, Sp::KParam, 4, 2, false});
  jit_note(h_ld<Sp::KParam, 8, false, 2>, {JK::Ld, 0, T_None, T_None, false, Sp::KParam, 8, 2, false});
  jit_note(h_ld<Sp::KParam, 4, false, 4>, {JK::Ld, 0, T_None, T_None, false, Sp::KParam, 4, 4, false});
  jit_note(h_ld<Sp::KParam, 1, true, 1>, {JK::Ld, 0, T_None, T_None, false, Sp::KParam, 1, 1, true});
  jit_note(h_ld<Sp::KParam, 2, true, 1>, {JK::Ld, 0, T_None, T_None, false, Sp::KParam, 2, 1, true});
  jit_note(h_ld<Sp::KParam, 4, true, 1>, {JK::Ld, 0, T_None, T_None, false, Sp::KParam, 4, 1, true});
  jit_catalog_space<Sp::Global>();
  jit_catalog_space<Sp::Generic>();
  jit_catalog_space<Sp::Shared>();
  jit_catalog_space<Sp::Const>();
}

}  // namespace
}  // namespace wh::ptx::detail

#define WH_JIT_CATALOG(PART) \
  [[maybe_unused]] static const bool wh_jit_catalog_registered = (::wh::ptx::detail::jit_catalog_##PART(), true)
