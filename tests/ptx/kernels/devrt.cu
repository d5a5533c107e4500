// Dynamic parallelism at the engine level (ptx_devrt_test.cpp), built with
// -rdc=true: device-side launches through <<<>>> and through the device
// runtime's own calls, and the misuses the engine must refuse cleanly.
__device__ unsigned seq;

// Records v in launch order (the first thread of the grid).
extern "C" __global__ void child(int* out, int v) {
  if (blockIdx.x == 0 && threadIdx.x == 0) out[atomicAdd(&seq, 1u)] = v;
}
extern "C" __global__ void child_oob(int* out) { out[1 << 28] = 1; }
extern "C" __global__ void child_spin(volatile int* flag) {
  while (*flag == 0) {
  }
}
extern "C" __global__ void child_heap(int* out) {
  int* p = static_cast<int*>(malloc(16));
  out[0] = p != nullptr;
  free(p);
}
__device__ int not_a_kernel(int x) { return x + 1; }
__device__ void* not_a_kernel_ptr = (void*)not_a_kernel;  // out of the compiler's sight

// Every thread launches a child in the block's NULL stream: they run in
// launch order (lane order within a warp, warp after warp).
extern "C" __global__ void fanout(int* out, int* err) {
  child<<<1, 32>>>(out, int(threadIdx.x));
  err[threadIdx.x] = cudaGetLastError();
}

// The device runtime's calls written out: a V2 buffer and the older pair.
extern "C" __global__ void explicit_calls(int* out, int* res) {
  void* b = cudaGetParameterBufferV2((void*)child, dim3(1), dim3(32), 0);
  res[0] = b != nullptr;
  if (b) {
    *static_cast<int**>(b) = out;
    static_cast<int*>(b)[2] = 7;
    res[1] = cudaLaunchDeviceV2(b, nullptr);
  }
  void* c = cudaGetParameterBuffer(8, 16);
  res[2] = c != nullptr;
  if (c) {
    *static_cast<int**>(c) = out;
    static_cast<int*>(c)[2] = 8;
    res[3] = cudaLaunchDevice((void*)child, c, dim3(2), dim3(64), 0, nullptr);
  }
}

// Misuses, by mode; results in res[], the thread's last errors after.
extern "C" __global__ void hostile(int* res, int mode, int* out) {
  switch (mode) {
    case 0: {  // not kernels: a data address, a device function, null
      res[0] = cudaGetParameterBufferV2(out, dim3(1), dim3(1), 0) == nullptr;
      res[1] = cudaGetLastError();
      res[2] = cudaGetParameterBufferV2(not_a_kernel_ptr, dim3(1), dim3(1), 0) == nullptr;
      res[3] = cudaGetLastError();
      res[4] = cudaGetParameterBufferV2(nullptr, dim3(1), dim3(1), 0) == nullptr;
      res[5] = cudaGetLastError();
      break;
    }
    case 1: {  // shapes a host launch refuses
      res[0] = cudaGetParameterBufferV2((void*)child, dim3(0, 1, 1), dim3(1), 0) == nullptr;
      res[1] = cudaGetLastError();
      res[2] = cudaGetParameterBufferV2((void*)child, dim3(1), dim3(1025), 0) == nullptr;
      res[3] = cudaGetLastError();
      res[4] = cudaGetParameterBufferV2((void*)child, dim3(1), dim3(32), 4u << 20) == nullptr;
      res[5] = cudaGetLastError();
      res[6] = cudaGetParameterBufferV2((void*)child, dim3(1, 1, 70000), dim3(1), 0) == nullptr;
      res[7] = cudaGetLastError();
      break;
    }
    case 2: {  // a write past the end of a parameter buffer (child's is 12 bytes)
      int* b = static_cast<int*>(cudaGetParameterBufferV2((void*)child, dim3(1), dim3(1), 0));
      b[3] = 1;
      break;
    }
    case 3: {  // buffers that are not launchable ones
      char* b = static_cast<char*>(cudaGetParameterBufferV2((void*)child, dim3(1), dim3(1), 0));
      *reinterpret_cast<int**>(b) = out;
      res[0] = cudaLaunchDeviceV2(b + 8, nullptr);
      res[1] = cudaLaunchDeviceV2(out, nullptr);
      res[2] = cudaLaunchDeviceV2(b, nullptr);
      res[3] = cudaLaunchDeviceV2(b, nullptr);  // twice
      res[4] = cudaGetLastError();
      break;
    }
    case 4: {  // a buffer read after its launch
      int* b = static_cast<int*>(cudaGetParameterBufferV2((void*)child, dim3(1), dim3(1), 0));
      *reinterpret_cast<int**>(b) = out;
      cudaLaunchDeviceV2(b, nullptr);
      res[0] = b[2];
      break;
    }
    case 5: {  // cudaGetParameterBuffer's alignment and size
      res[0] = cudaGetParameterBuffer(3, 16) == nullptr;
      res[1] = cudaGetLastError();
      res[2] = cudaGetParameterBuffer(8, 1 << 20) == nullptr;
      res[3] = cudaGetLastError();
      void* small = cudaGetParameterBuffer(8, 4);  // smaller than child's parameters
      res[4] = cudaLaunchDevice((void*)child, small, dim3(1), dim3(1), 0, nullptr);
      break;
    }
    case 6: {  // a stream of another block (blocks run in order on one worker)
      if (blockIdx.x == 0) {
        cudaStream_t s;
        res[0] = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
        *reinterpret_cast<cudaStream_t*>(res + 8) = s;
        child<<<1, 1, 0, s>>>(out, 1);
        res[1] = cudaGetLastError();
      } else {
        child<<<1, 1, 0, *reinterpret_cast<cudaStream_t*>(res + 8)>>>(out, 2);
        res[2] = cudaGetLastError();
        cudaEvent_t e;
        res[3] = cudaEventCreateWithFlags(&e, 0);  // device events take cudaEventDisableTiming
        res[4] = cudaStreamDestroy(*reinterpret_cast<cudaStream_t*>(res + 8));
      }
      break;
    }
    case 7:  // a child that faults
      child_oob<<<1, 1>>>(out);
      break;
    case 8:  // a child that never ends
      child_spin<<<1, 1>>>(out);
      break;
    case 9:  // more tail launches than the pending limit
      for (int k = 0; k < 6; k++) {
        child<<<1, 1, 0, cudaStreamTailLaunch>>>(out, k);
        res[k] = cudaGetLastError();
      }
      break;
  }
}

// Its child uses the heap: the heap must exist when it is launched.
extern "C" __global__ void launches_heap_user(int* out) { child_heap<<<1, 1>>>(out); }
