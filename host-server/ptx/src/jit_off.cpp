// The engine without its compiler (jit.hpp), for builds that leave LLVM out
// (the parser fuzzer): every kernel is interpreted.
#include "jit.hpp"

namespace wh::ptx::detail {

void jit_note(Handler, const JitDesc&) {}
JitMode jit_mode() { return JitMode::Off; }
JitStats jit_stats() { return {}; }
bool jit_busy() { return false; }
JitState::~JitState() = default;
void jit_account(const ModuleImpl&, const KernelData&, uint64_t) {}
void jit_prepare(const ModuleImpl&, const KernelData&, bool) {}

}  // namespace wh::ptx::detail
