// An image the device refuses (SASS only, on the sim device) is shipped to
// the server once: every later use of it, through the runtime or the driver
// API, gets the same error at once. refused_image.sh counts the server's
// ModuleLoad calls; this program checks the errors and that the session
// goes on (a PTX module runs, checked against the host).
// Usage: wh_driver_refused_image <kernels.cubin> <kernels.ptx>
// Built for sm_75 SASS only (no PTX): its own kernel is refused too.
#include <cuda.h>
#include <cuda_runtime.h>

#include <vector>

#include "check.hpp"

__global__ void add_one(int* p) { p[threadIdx.x] += 1; }

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s kernels.cubin kernels.ptx\n", argv[0]);
    return 2;
  }
  const std::string cubin = read_all(argv[1]), ptx = read_all(argv[2]);

  // 1. The runtime: this program's fatbin, each launch and query refused.
  int* d = nullptr;
  EXPECT(cudaMalloc(&d, 32 * sizeof(int)) == cudaSuccess);
  cudaError_t first = cudaSuccess;
  for (int i = 0; i < 4; i++) {
    add_one<<<1, 32>>>(d);
    cudaError_t e = cudaGetLastError();
    if (i == 0) first = e;
    EXPECT(e == first);
  }
  EXPECT(first == cudaErrorInvalidKernelImage || first == cudaErrorNoKernelImageForDevice);
  cudaFuncAttributes fa{};
  EXPECT(cudaFuncGetAttributes(&fa, add_one) == first);
  cudaGetLastError();

  // 2. cuModuleLoadData of a bare cubin, three times: the same error.
  CU_CHECK(cuInit(0));
  CUresult mod_first = CUDA_SUCCESS;
  for (int i = 0; i < 3; i++) {
    CUmodule m;
    CUresult r = cuModuleLoadData(&m, cubin.data());
    if (i == 0) mod_first = r;
    EXPECT(r == mod_first);
  }
  EXPECT(mod_first == CUDA_ERROR_INVALID_IMAGE || mod_first == CUDA_ERROR_NO_BINARY_FOR_GPU);

  // 3. The same image as two libraries (loaded on first use): launches and
  // variable lookups all get the module load's error.
  std::vector<float> hx(256), hy(256);
  for (int i = 0; i < 256; i++) hx[i] = float(i), hy[i] = 2.0f * i;
  CUdeviceptr dx, dy;
  CU_CHECK(cuMemAlloc(&dx, hx.size() * sizeof(float)));
  CU_CHECK(cuMemAlloc(&dy, hy.size() * sizeof(float)));
  CU_CHECK(cuMemcpyHtoD(dx, hx.data(), hx.size() * sizeof(float)));
  CU_CHECK(cuMemcpyHtoD(dy, hy.data(), hy.size() * sizeof(float)));
  int n = 256;
  float a = 3.0f;
  void* args[] = {&n, &a, &dx, &dy};
  for (int l = 0; l < 2; l++) {
    CUlibrary lib;
    CU_CHECK(cuLibraryLoadData(&lib, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
    CUkernel k;
    CU_CHECK(cuLibraryGetKernel(&k, lib, "saxpy"));
    for (int i = 0; i < 3; i++)
      CU_EXPECT(cuLaunchKernel(reinterpret_cast<CUfunction>(k), 2, 1, 1, 128, 1, 1, 0, nullptr, args, nullptr),
                mod_first);
    CUdeviceptr g;
    size_t bytes;
    CU_EXPECT(cuLibraryGetGlobal(&g, &bytes, lib, "g_scale"), mod_first);
    CU_CHECK(cuLibraryUnload(lib));
  }

  // 4. The session goes on: the PTX of the same kernels loads and runs.
  CUmodule pm;
  CU_CHECK(cuModuleLoadData(&pm, ptx.c_str()));
  CUfunction saxpy;
  CU_CHECK(cuModuleGetFunction(&saxpy, pm, "saxpy"));
  CU_CHECK(cuLaunchKernel(saxpy, 2, 1, 1, 128, 1, 1, 0, nullptr, args, nullptr));
  std::vector<float> out(256);
  CU_CHECK(cuMemcpyDtoH(out.data(), dy, out.size() * sizeof(float)));
  for (int i = 0; i < 256; i++) EXPECT(out[i] == 3.0f * hx[i] + hy[i]);
  CU_CHECK(cuModuleUnload(pm));
  std::printf("PASS refused images: runtime %s, driver %d, each answered at once after the first refusal\n",
              cudaGetErrorName(first), int(mod_first));
  return 0;
}
