// NVRTC as programs use it: NVIDIA's compiler runs in the process as it is;
// the PTX it makes is loaded with cuModuleLoadDataEx and launched with
// cuLaunchKernel through Wormhole's driver API, then checked.
#include <nvrtc.h>

#include <cmath>
#include <vector>

#include "check.hpp"
#include "nvrtc_check.hpp"


static const char* kSource = R"(
extern "C" __global__ void saxpy(float a, const float* x, const float* y, float* out, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i] + y[i];
}
)";

int main() {
  nvrtcProgram prog;
  NVRTC_CHECK(nvrtcCreateProgram(&prog, kSource, "saxpy.cu", 0, nullptr, nullptr));
  const char* opts[] = {"--gpu-architecture=compute_75"};
  nvrtcResult cr = nvrtcCompileProgram(prog, 1, opts);
  size_t log_size = 0;
  NVRTC_CHECK(nvrtcGetProgramLogSize(prog, &log_size));
  if (log_size > 1) {
    std::vector<char> log(log_size);
    NVRTC_CHECK(nvrtcGetProgramLog(prog, log.data()));
    std::fprintf(stderr, "nvrtc log: %s\n", log.data());
  }
  NVRTC_CHECK(cr);
  size_t ptx_size = 0;
  NVRTC_CHECK(nvrtcGetPTXSize(prog, &ptx_size));
  std::vector<char> ptx(ptx_size);
  NVRTC_CHECK(nvrtcGetPTX(prog, ptx.data()));
  NVRTC_CHECK(nvrtcDestroyProgram(&prog));

  CU_CHECK(cuInit(0));
  CUdevice dev;
  CU_CHECK(cuDeviceGet(&dev, 0));
  CUcontext ctx;
  CU_CHECK(cuCtxCreate(&ctx, nullptr, 0, dev));
  CUmodule mod;
  CU_CHECK(cuModuleLoadDataEx(&mod, ptx.data(), 0, nullptr, nullptr));
  CUfunction k;
  CU_CHECK(cuModuleGetFunction(&k, mod, "saxpy"));

  const size_t n = 128 * 300;
  std::vector<float> hx(n), hy(n), hout(n);
  for (size_t i = 0; i < n; i++) hx[i] = float(i) * 0.5f, hy[i] = float(i % 97);
  CUdeviceptr dx, dy, dout;
  CU_CHECK(cuMemAlloc(&dx, n * sizeof(float)));
  CU_CHECK(cuMemAlloc(&dy, n * sizeof(float)));
  CU_CHECK(cuMemAlloc(&dout, n * sizeof(float)));
  CU_CHECK(cuMemcpyHtoD(dx, hx.data(), n * sizeof(float)));
  CU_CHECK(cuMemcpyHtoD(dy, hy.data(), n * sizeof(float)));
  float a = 2.5f;
  size_t nn = n;
  void* args[] = {&a, &dx, &dy, &dout, &nn};
  CU_CHECK(cuLaunchKernel(k, unsigned(n / 128), 1, 1, 128, 1, 1, 0, nullptr, args, nullptr));
  CU_CHECK(cuCtxSynchronize());
  CU_CHECK(cuMemcpyDtoH(hout.data(), dout, n * sizeof(float)));
  for (size_t i = 0; i < n; i++) {
    float want = a * hx[i] + hy[i];
    if (std::fabs(hout[i] - want) > 1e-5f * std::fabs(want)) {
      std::fprintf(stderr, "out[%zu] = %g, expected %g\n", i, hout[i], want);
      return 1;
    }
  }
  CU_CHECK(cuMemFree(dx));
  CU_CHECK(cuMemFree(dy));
  CU_CHECK(cuMemFree(dout));
  CU_CHECK(cuModuleUnload(mod));
  CU_CHECK(cuCtxDestroy(ctx));
  std::printf("NVRTC SAXPY passed (%zu elements, %zu bytes of PTX)\n", n, ptx_size);
  return 0;
}
