// Device attributes that follow from cudaDeviceProp: the guest answers most
// cudaDeviceGetAttribute queries from its cached properties with this.
#pragma once
#include <cuda_runtime_api.h>
namespace wh::proto {
inline bool attribute_from_props(const cudaDeviceProp& p, int attr, int* v) {
  switch (cudaDeviceAttr(attr)) {
    case cudaDevAttrMaxThreadsPerBlock: *v = p.maxThreadsPerBlock; return true;
    case cudaDevAttrMaxBlockDimX: *v = p.maxThreadsDim[0]; return true;
    case cudaDevAttrMaxBlockDimY: *v = p.maxThreadsDim[1]; return true;
    case cudaDevAttrMaxBlockDimZ: *v = p.maxThreadsDim[2]; return true;
    case cudaDevAttrMaxGridDimX: *v = p.maxGridSize[0]; return true;
    case cudaDevAttrMaxGridDimY: *v = p.maxGridSize[1]; return true;
    case cudaDevAttrMaxGridDimZ: *v = p.maxGridSize[2]; return true;
    case cudaDevAttrMaxSharedMemoryPerBlock: *v = int(p.sharedMemPerBlock); return true;
    case cudaDevAttrTotalConstantMemory: *v = int(p.totalConstMem); return true;
    case cudaDevAttrWarpSize: *v = p.warpSize; return true;
    case cudaDevAttrMaxPitch: *v = int(p.memPitch); return true;
    case cudaDevAttrMaxRegistersPerBlock: *v = p.regsPerBlock; return true;
    case cudaDevAttrTextureAlignment: *v = int(p.textureAlignment); return true;
    case cudaDevAttrMultiProcessorCount: *v = p.multiProcessorCount; return true;
    case cudaDevAttrIntegrated: *v = p.integrated; return true;
    case cudaDevAttrCanMapHostMemory: *v = p.canMapHostMemory; return true;
    case cudaDevAttrConcurrentKernels: *v = p.concurrentKernels; return true;
    case cudaDevAttrEccEnabled: *v = p.ECCEnabled; return true;
    case cudaDevAttrPciBusId: *v = p.pciBusID; return true;
    case cudaDevAttrPciDeviceId: *v = p.pciDeviceID; return true;
    case cudaDevAttrPciDomainId: *v = p.pciDomainID; return true;
    case cudaDevAttrAsyncEngineCount: *v = p.asyncEngineCount; return true;
    case cudaDevAttrUnifiedAddressing: *v = p.unifiedAddressing; return true;
    case cudaDevAttrGlobalMemoryBusWidth: *v = p.memoryBusWidth; return true;
    case cudaDevAttrL2CacheSize: *v = p.l2CacheSize; return true;
    case cudaDevAttrMaxThreadsPerMultiProcessor: *v = p.maxThreadsPerMultiProcessor; return true;
    case cudaDevAttrComputeCapabilityMajor: *v = p.major; return true;
    case cudaDevAttrComputeCapabilityMinor: *v = p.minor; return true;
    case cudaDevAttrStreamPrioritiesSupported: *v = p.streamPrioritiesSupported; return true;
    case cudaDevAttrGlobalL1CacheSupported: *v = p.globalL1CacheSupported; return true;
    case cudaDevAttrLocalL1CacheSupported: *v = p.localL1CacheSupported; return true;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor: *v = int(p.sharedMemPerMultiprocessor); return true;
    case cudaDevAttrMaxRegistersPerMultiprocessor: *v = p.regsPerMultiprocessor; return true;
    case cudaDevAttrManagedMemory: *v = p.managedMemory; return true;
    case cudaDevAttrIsMultiGpuBoard: *v = p.isMultiGpuBoard; return true;
    case cudaDevAttrMultiGpuBoardGroupID: *v = p.multiGpuBoardGroupID; return true;
    case cudaDevAttrPageableMemoryAccess: *v = p.pageableMemoryAccess; return true;
    case cudaDevAttrConcurrentManagedAccess: *v = p.concurrentManagedAccess; return true;
    case cudaDevAttrComputePreemptionSupported: *v = p.computePreemptionSupported; return true;
    case cudaDevAttrCanUseHostPointerForRegisteredMem: *v = p.canUseHostPointerForRegisteredMem; return true;
    case cudaDevAttrCooperativeLaunch: *v = p.cooperativeLaunch; return true;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *v = int(p.sharedMemPerBlockOptin); return true;
    case cudaDevAttrMaxBlocksPerMultiprocessor: *v = p.maxBlocksPerMultiProcessor; return true;
    case cudaDevAttrReservedSharedMemoryPerBlock: *v = int(p.reservedSharedMemPerBlock); return true;
    default: return false;
  }
}
}  // namespace wh::proto
