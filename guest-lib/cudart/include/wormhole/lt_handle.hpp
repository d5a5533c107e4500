// The guest side of a cuBLASLt handle, shared with Wormhole's cuBLAS: NVIDIA
// documents that a cublasHandle_t may be used where a cublasLtHandle_t is
// expected (PyTorch passes its cuBLAS handle to cublasLtMatmul), so a cuBLAS
// handle begins with one of these, holding a cuBLASLt handle of its own.
#pragma once

#include <cstdint>

struct cublasLtContext {
  uint64_t server = 0;  // the session's handle (LtCreate)
  uint64_t magic = 0;   // kLtHandleMagic while the handle lives
};

constexpr uint64_t kLtHandleMagic = 0x746c4c4254484d57ull;  // "WMHTBLlt"
