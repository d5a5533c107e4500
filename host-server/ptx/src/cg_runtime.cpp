// The cooperative-groups part of the sim device's device runtime: the
// functions of NVIDIA's libcudadevrt that code compiled against its legacy
// cooperative-groups ABI calls (Numba's this_grid().sync(), for one), in
// PTX. A module that declares them .extern gets these definitions linked in
// at load. The grid barrier is the one CUDA's cooperative-groups headers
// use, on the cooperative launch's grid workspace (%envreg1:2). (The
// dynamic-parallelism part is devrt.cpp's builtins.)
#include "cg_runtime.hpp"

#include "wormhole/common/ptx_link.hpp"

namespace wh::ptx::detail {
namespace {

const char* const kDevrtPtx = R"(
.version 7.0
.target sm_80
.address_size 64

.weak .func (.param .b64 handle) cudaCGGetIntrinsicHandle(.param .b32 scope)
{
  .reg .b32 %r<3>;
  .reg .b64 %rd<2>;
  mov.u32 %r1, %envreg1;
  mov.u32 %r2, %envreg2;
  mov.b64 %rd1, {%r2, %r1};
  st.param.b64 [handle], %rd1;
  ret;
}

.weak .func (.param .b32 status) cudaCGSynchronize(.param .b64 handle, .param .b32 flags)
{
  .reg .pred %p<4>;
  .reg .b32 %r<16>;
  .reg .b64 %rd<3>;
  ld.param.u64 %rd1, [handle];
  bar.sync 0;
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %tid.y;
  mov.u32 %r3, %tid.z;
  or.b32 %r4, %r1, %r2;
  or.b32 %r4, %r4, %r3;
  setp.ne.u32 %p1, %r4, 0;
  @%p1 bra DONE;
  mov.u32 %r5, %nctaid.x;
  mov.u32 %r6, %nctaid.y;
  mov.u32 %r7, %nctaid.z;
  mul.lo.u32 %r5, %r5, %r6;
  mul.lo.u32 %r5, %r5, %r7;
  mov.u32 %r8, %ctaid.x;
  mov.u32 %r9, %ctaid.y;
  mov.u32 %r10, %ctaid.z;
  or.b32 %r8, %r8, %r9;
  or.b32 %r8, %r8, %r10;
  setp.eq.u32 %p2, %r8, 0;
  sub.u32 %r11, -2147483647, %r5;
  selp.u32 %r12, %r11, 1, %p2;
  add.u64 %rd2, %rd1, 4;
  fence.acq_rel.gpu;
  atom.add.u32 %r13, [%rd2], %r12;
WAIT:
  ld.volatile.u32 %r14, [%rd2];
  xor.b32 %r15, %r13, %r14;
  and.b32 %r15, %r15, -2147483648;
  setp.eq.u32 %p3, %r15, 0;
  @%p3 bra WAIT;
  fence.acq_rel.gpu;
DONE:
  bar.sync 0;
  mov.u32 %r1, 0;
  st.param.b32 [status], %r1;
  ret;
}
)";

bool mentions(std::string_view text, std::string_view name) { return text.find(name) != std::string_view::npos; }

}  // namespace

bool with_cg_runtime(std::string_view text, std::string* linked) {
  if (!mentions(text, "cudaCGGetIntrinsicHandle") && !mentions(text, "cudaCGSynchronize")) return false;
  std::string err;
  return link_ptx_units({text, kDevrtPtx}, linked, &err);
}

}  // namespace wh::ptx::detail
