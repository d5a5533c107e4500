// wormhole/proto/device_attrs.hpp - what a device looks like to the guest.
//
// A device is described once, by its backend, as the full vector of
// cudaDeviceAttr values plus the few properties that are not attributes
// (name, UUID, memory size). cudaDeviceProp is derived from that vector by
// one function, so cudaGetDeviceProperties and cudaDeviceGetAttribute can
// never disagree. The guest fetches the description at its first device
// query (GetDeviceProps) and answers every later query itself.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>

namespace wh::proto {

// cudaDeviceAttr values of CUDA 13 are below 148; room for growth.
constexpr int kAttrSlots = 192;

// cudaLimit values are 0 .. kLimitCount-1.
constexpr int kLimitCount = 7;

// The GetDeviceProps response tail, byte for byte.
struct DeviceDescription {
  cudaDeviceProp props;
  int32_t attr[kAttrSlots];
  uint8_t has[kAttrSlots];  // 1: the device answers this attribute
};

// The attribute's value; false for an attribute the device does not have
// (cudaDeviceGetAttribute then returns cudaErrorInvalidValue, as CUDA does).
inline bool attribute(const DeviceDescription& d, int attr, int* v) {
  if (attr < 0 || attr >= kAttrSlots || !d.has[attr]) return false;
  *v = d.attr[attr];
  return true;
}

// Fills every cudaDeviceProp field that mirrors an attribute. The caller
// sets name, uuid, luid and totalGlobalMem.
inline void props_from_attributes(const DeviceDescription& d, cudaDeviceProp& p) {
  auto a = [&](cudaDeviceAttr at) { return d.has[at] ? d.attr[at] : 0; };
  p.sharedMemPerBlock = size_t(a(cudaDevAttrMaxSharedMemoryPerBlock));
  p.regsPerBlock = a(cudaDevAttrMaxRegistersPerBlock);
  p.warpSize = a(cudaDevAttrWarpSize);
  p.memPitch = size_t(a(cudaDevAttrMaxPitch));
  p.maxThreadsPerBlock = a(cudaDevAttrMaxThreadsPerBlock);
  p.maxThreadsDim[0] = a(cudaDevAttrMaxBlockDimX);
  p.maxThreadsDim[1] = a(cudaDevAttrMaxBlockDimY);
  p.maxThreadsDim[2] = a(cudaDevAttrMaxBlockDimZ);
  p.maxGridSize[0] = a(cudaDevAttrMaxGridDimX);
  p.maxGridSize[1] = a(cudaDevAttrMaxGridDimY);
  p.maxGridSize[2] = a(cudaDevAttrMaxGridDimZ);
  p.totalConstMem = size_t(a(cudaDevAttrTotalConstantMemory));
  p.major = a(cudaDevAttrComputeCapabilityMajor);
  p.minor = a(cudaDevAttrComputeCapabilityMinor);
  p.textureAlignment = size_t(a(cudaDevAttrTextureAlignment));
  p.texturePitchAlignment = size_t(a(cudaDevAttrTexturePitchAlignment));
  p.multiProcessorCount = a(cudaDevAttrMultiProcessorCount);
  p.integrated = a(cudaDevAttrIntegrated);
  p.canMapHostMemory = a(cudaDevAttrCanMapHostMemory);
  p.maxTexture1D = a(cudaDevAttrMaxTexture1DWidth);
  p.maxTexture1DMipmap = a(cudaDevAttrMaxTexture1DMipmappedWidth);
  p.maxTexture2D[0] = a(cudaDevAttrMaxTexture2DWidth);
  p.maxTexture2D[1] = a(cudaDevAttrMaxTexture2DHeight);
  p.maxTexture2DMipmap[0] = a(cudaDevAttrMaxTexture2DMipmappedWidth);
  p.maxTexture2DMipmap[1] = a(cudaDevAttrMaxTexture2DMipmappedHeight);
  p.maxTexture2DLinear[0] = a(cudaDevAttrMaxTexture2DLinearWidth);
  p.maxTexture2DLinear[1] = a(cudaDevAttrMaxTexture2DLinearHeight);
  p.maxTexture2DLinear[2] = a(cudaDevAttrMaxTexture2DLinearPitch);
  p.maxTexture2DGather[0] = a(cudaDevAttrMaxTexture2DGatherWidth);
  p.maxTexture2DGather[1] = a(cudaDevAttrMaxTexture2DGatherHeight);
  p.maxTexture3D[0] = a(cudaDevAttrMaxTexture3DWidth);
  p.maxTexture3D[1] = a(cudaDevAttrMaxTexture3DHeight);
  p.maxTexture3D[2] = a(cudaDevAttrMaxTexture3DDepth);
  p.maxTexture3DAlt[0] = a(cudaDevAttrMaxTexture3DWidthAlt);
  p.maxTexture3DAlt[1] = a(cudaDevAttrMaxTexture3DHeightAlt);
  p.maxTexture3DAlt[2] = a(cudaDevAttrMaxTexture3DDepthAlt);
  p.maxTextureCubemap = a(cudaDevAttrMaxTextureCubemapWidth);
  p.maxTexture1DLayered[0] = a(cudaDevAttrMaxTexture1DLayeredWidth);
  p.maxTexture1DLayered[1] = a(cudaDevAttrMaxTexture1DLayeredLayers);
  p.maxTexture2DLayered[0] = a(cudaDevAttrMaxTexture2DLayeredWidth);
  p.maxTexture2DLayered[1] = a(cudaDevAttrMaxTexture2DLayeredHeight);
  p.maxTexture2DLayered[2] = a(cudaDevAttrMaxTexture2DLayeredLayers);
  p.maxTextureCubemapLayered[0] = a(cudaDevAttrMaxTextureCubemapLayeredWidth);
  p.maxTextureCubemapLayered[1] = a(cudaDevAttrMaxTextureCubemapLayeredLayers);
  p.maxSurface1D = a(cudaDevAttrMaxSurface1DWidth);
  p.maxSurface2D[0] = a(cudaDevAttrMaxSurface2DWidth);
  p.maxSurface2D[1] = a(cudaDevAttrMaxSurface2DHeight);
  p.maxSurface3D[0] = a(cudaDevAttrMaxSurface3DWidth);
  p.maxSurface3D[1] = a(cudaDevAttrMaxSurface3DHeight);
  p.maxSurface3D[2] = a(cudaDevAttrMaxSurface3DDepth);
  p.maxSurface1DLayered[0] = a(cudaDevAttrMaxSurface1DLayeredWidth);
  p.maxSurface1DLayered[1] = a(cudaDevAttrMaxSurface1DLayeredLayers);
  p.maxSurface2DLayered[0] = a(cudaDevAttrMaxSurface2DLayeredWidth);
  p.maxSurface2DLayered[1] = a(cudaDevAttrMaxSurface2DLayeredHeight);
  p.maxSurface2DLayered[2] = a(cudaDevAttrMaxSurface2DLayeredLayers);
  p.maxSurfaceCubemap = a(cudaDevAttrMaxSurfaceCubemapWidth);
  p.maxSurfaceCubemapLayered[0] = a(cudaDevAttrMaxSurfaceCubemapLayeredWidth);
  p.maxSurfaceCubemapLayered[1] = a(cudaDevAttrMaxSurfaceCubemapLayeredLayers);
  p.surfaceAlignment = size_t(a(cudaDevAttrSurfaceAlignment));
  p.concurrentKernels = a(cudaDevAttrConcurrentKernels);
  p.ECCEnabled = a(cudaDevAttrEccEnabled);
  p.pciBusID = a(cudaDevAttrPciBusId);
  p.pciDeviceID = a(cudaDevAttrPciDeviceId);
  p.pciDomainID = a(cudaDevAttrPciDomainId);
  p.tccDriver = a(cudaDevAttrTccDriver);
  p.asyncEngineCount = a(cudaDevAttrAsyncEngineCount);
  p.unifiedAddressing = a(cudaDevAttrUnifiedAddressing);
  p.memoryBusWidth = a(cudaDevAttrGlobalMemoryBusWidth);
  p.l2CacheSize = a(cudaDevAttrL2CacheSize);
  p.persistingL2CacheMaxSize = a(cudaDevAttrMaxPersistingL2CacheSize);
  p.maxThreadsPerMultiProcessor = a(cudaDevAttrMaxThreadsPerMultiProcessor);
  p.streamPrioritiesSupported = a(cudaDevAttrStreamPrioritiesSupported);
  p.globalL1CacheSupported = a(cudaDevAttrGlobalL1CacheSupported);
  p.localL1CacheSupported = a(cudaDevAttrLocalL1CacheSupported);
  p.sharedMemPerMultiprocessor = size_t(a(cudaDevAttrMaxSharedMemoryPerMultiprocessor));
  p.regsPerMultiprocessor = a(cudaDevAttrMaxRegistersPerMultiprocessor);
  p.managedMemory = a(cudaDevAttrManagedMemory);
  p.isMultiGpuBoard = a(cudaDevAttrIsMultiGpuBoard);
  p.multiGpuBoardGroupID = a(cudaDevAttrMultiGpuBoardGroupID);
  p.hostNativeAtomicSupported = a(cudaDevAttrHostNativeAtomicSupported);
  p.pageableMemoryAccess = a(cudaDevAttrPageableMemoryAccess);
  p.concurrentManagedAccess = a(cudaDevAttrConcurrentManagedAccess);
  p.computePreemptionSupported = a(cudaDevAttrComputePreemptionSupported);
  p.canUseHostPointerForRegisteredMem = a(cudaDevAttrCanUseHostPointerForRegisteredMem);
  p.cooperativeLaunch = a(cudaDevAttrCooperativeLaunch);
  p.sharedMemPerBlockOptin = size_t(a(cudaDevAttrMaxSharedMemoryPerBlockOptin));
  p.pageableMemoryAccessUsesHostPageTables = a(cudaDevAttrPageableMemoryAccessUsesHostPageTables);
  p.directManagedMemAccessFromHost = a(cudaDevAttrDirectManagedMemAccessFromHost);
  p.maxBlocksPerMultiProcessor = a(cudaDevAttrMaxBlocksPerMultiprocessor);
  p.accessPolicyMaxWindowSize = a(cudaDevAttrMaxAccessPolicyWindowSize);
  p.reservedSharedMemPerBlock = size_t(a(cudaDevAttrReservedSharedMemoryPerBlock));
  p.hostRegisterSupported = a(cudaDevAttrHostRegisterSupported);
  p.sparseCudaArraySupported = a(cudaDevAttrSparseCudaArraySupported);
  p.hostRegisterReadOnlySupported = a(cudaDevAttrHostRegisterReadOnlySupported);
  p.timelineSemaphoreInteropSupported = a(cudaDevAttrTimelineSemaphoreInteropSupported);
  p.memoryPoolsSupported = a(cudaDevAttrMemoryPoolsSupported);
  p.gpuDirectRDMASupported = a(cudaDevAttrGPUDirectRDMASupported);
  p.gpuDirectRDMAFlushWritesOptions = unsigned(a(cudaDevAttrGPUDirectRDMAFlushWritesOptions));
  p.gpuDirectRDMAWritesOrdering = a(cudaDevAttrGPUDirectRDMAWritesOrdering);
  p.memoryPoolSupportedHandleTypes = unsigned(a(cudaDevAttrMemoryPoolSupportedHandleTypes));
  p.deferredMappingCudaArraySupported = a(cudaDevAttrDeferredMappingCudaArraySupported);
  p.ipcEventSupported = a(cudaDevAttrIpcEventSupport);
  p.clusterLaunch = a(cudaDevAttrClusterLaunch);
  p.deviceNumaConfig = a(cudaDevAttrNumaConfig);
  p.deviceNumaId = a(cudaDevAttrNumaId);
  p.mpsEnabled = a(cudaDevAttrMpsEnabled);
  p.hostNumaId = a(cudaDevAttrHostNumaId);
  p.gpuPciDeviceID = unsigned(a(cudaDevAttrGpuPciDeviceId));
  p.gpuPciSubsystemID = unsigned(a(cudaDevAttrGpuPciSubsystemId));
  p.hostNumaMultinodeIpcSupported = a(cudaDevAttrHostNumaMultinodeIpcSupported);
}

}  // namespace wh::proto
