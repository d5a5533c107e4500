// cublasStatus_t as Wormhole's cuBLAS and cuBLASLt drop-ins report it: both
// libraries share NVIDIA's status codes, names and messages, so they share
// this one mapping too.
#pragma once

#include <cublas_api.h>
#include <cuda_runtime_api.h>

namespace wh::guest::blas {

// A server status (cudaError_t) as the cublasStatus_t cuBLAS would return.
inline cublasStatus_t status(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return CUBLAS_STATUS_SUCCESS;
    case cudaErrorInvalidValue: return CUBLAS_STATUS_INVALID_VALUE;
    case cudaErrorMemoryAllocation: return CUBLAS_STATUS_ALLOC_FAILED;
    case cudaErrorNotSupported: return CUBLAS_STATUS_NOT_SUPPORTED;
    case cudaErrorInvalidResourceHandle:
    case cudaErrorInitializationError:
    case cudaErrorDevicesUnavailable: return CUBLAS_STATUS_NOT_INITIALIZED;
    case cudaErrorIllegalAddress: return CUBLAS_STATUS_MAPPING_ERROR;
    default: return CUBLAS_STATUS_EXECUTION_FAILED;
  }
}

// cublasGetStatusName / cublasLtGetStatusName.
inline const char* status_name(cublasStatus_t s) {
  switch (s) {
#define WH_S(x) \
  case x: return #x;
    WH_S(CUBLAS_STATUS_SUCCESS)
    WH_S(CUBLAS_STATUS_NOT_INITIALIZED)
    WH_S(CUBLAS_STATUS_ALLOC_FAILED)
    WH_S(CUBLAS_STATUS_INVALID_VALUE)
    WH_S(CUBLAS_STATUS_ARCH_MISMATCH)
    WH_S(CUBLAS_STATUS_MAPPING_ERROR)
    WH_S(CUBLAS_STATUS_EXECUTION_FAILED)
    WH_S(CUBLAS_STATUS_INTERNAL_ERROR)
    WH_S(CUBLAS_STATUS_NOT_SUPPORTED)
    WH_S(CUBLAS_STATUS_LICENSE_ERROR)
#undef WH_S
    default: return "CUBLAS_STATUS_UNKNOWN";
  }
}

// cublasGetStatusString / cublasLtGetStatusString.
inline const char* status_string(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "an absent device architectural feature is required";
    case CUBLAS_STATUS_MAPPING_ERROR: return "an access to GPU memory space failed";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    case CUBLAS_STATUS_LICENSE_ERROR: return "error detected trying to check the license";
    default: return "unknown error";
  }
}

}  // namespace wh::guest::blas
