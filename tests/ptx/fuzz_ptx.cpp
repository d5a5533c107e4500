// libFuzzer target: the PTX parser/decoder and the fatbin/cubin container parsers.
// Inputs starting with the fatbin magic go through the fatbin path, others are PTX text.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "wormhole/ptx/engine.hpp"
#include "wormhole/common/fatbin.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string err;
  if (size >= 4 && data[0] == 0x50 && data[1] == 0xed && data[2] == 0x55 && data[3] == 0xba) {
    std::vector<wh::fatbin::Entry> ents;
    if (wh::fatbin::parse(data, size, ents, &err)) {
      for (auto& e : ents) {
        std::map<std::string, std::vector<wh::fatbin::ParamInfo>> p;
        if (e.kind == wh::fatbin::Entry::ELF) wh::fatbin::cubin_kernel_params(e.bytes, p, &err);
        else wh::fatbin::ptx_kernel_params(std::string_view(reinterpret_cast<const char*>(e.bytes.data()), e.bytes.size()), p, &err);
      }
    }
    (void)wh::ptx::Module::from_fatbin(data, size, &err);
    return 0;
  }
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto m = wh::ptx::Module::from_ptx(text, &err);
  if (m) {
    for (auto& k : m->kernels()) (void)m->kernel(k.name);
    for (auto& g : m->globals()) m->bind_global(g.name, 0x1000);
    for (auto& g : m->globals()) {  // address initializers land inside their variable
      std::vector<uint8_t> bytes(g.init);
      if (bytes.size() == g.size) (void)m->apply_relocs(g, bytes.data());
    }
  }
  std::map<std::string, std::vector<wh::fatbin::ParamInfo>> p;
  wh::fatbin::ptx_kernel_params(text, p, &err);
  // Text with several .version directives: one unit from each, through the
  // linker for separate compilation.
  std::vector<std::string_view> units;
  for (size_t at = text.find(".version"); at != std::string_view::npos && units.size() < 16;) {
    const size_t next = text.find(".version", at + 1);
    units.push_back(text.substr(at, next == std::string_view::npos ? text.size() - at : next - at));
    at = next;
  }
  if (units.size() >= 2) (void)wh::ptx::Module::from_ptx_units(units, &err);
  return 0;
}
