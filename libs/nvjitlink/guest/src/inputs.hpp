// What the nvJitLink drop-in finds in its inputs: the PTX a Wormhole device
// runs, and the LTO-IR NVIDIA's nvJitLink turns into PTX. Containers are
// opened here (fatbins, host objects with a .nv_fatbin section, ar
// libraries of such objects); every offset and size is checked against the
// input's bounds.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace wh::nvjitlink {

enum class Kind { Unknown, Cubin, Ptx, Ltoir, Fatbin, Object, Library };

// The input's kind from its first bytes (nvJitLink's NVJITLINK_INPUT_ANY).
Kind sniff(const uint8_t* p, size_t n);

struct Found {
  std::vector<std::string> ptx;               // one per unit
  std::vector<std::vector<uint8_t>> ltoir;    // LTO-IR blobs, for NVIDIA's linker
  std::vector<std::string> sass_only;         // units that carry neither (their names)
};

// Adds what an input of `kind` holds to *out; false (and *err) on a
// malformed container or a kind that carries no device code.
bool collect(Kind kind, const uint8_t* p, size_t n, const std::string& name, Found* out, std::string* err);

}  // namespace wh::nvjitlink
