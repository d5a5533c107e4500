// NVRTC for the device's own architecture, as many programs use it: the
// compute capability the device reports becomes --gpu-architecture=sm_XY,
// the program takes the cubin (nvrtcGetCUBIN) and loads it with
// cuModuleLoadData. A templated kernel is named through
// nvrtcAddNameExpression / nvrtcGetLoweredName; the second compile passes
// the architecture as two options ("-arch", "sm_XY"). Results are checked
// against the host.
#include <nvrtc.h>

#include <cmath>
#include <string>
#include <vector>

#include "check.hpp"
#include "nvrtc_check.hpp"


static const char* kSource = R"(
template <typename T>
__global__ void scale_add(T a, const T* x, T* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
)";

// Compiles kSource for `opts`, returns the cubin and the lowered kernel name.
static std::vector<char> compile(const std::vector<const char*>& opts, const char* expr, std::string* lowered) {
  nvrtcProgram prog;
  NVRTC_CHECK(nvrtcCreateProgram(&prog, kSource, "scale_add.cu", 0, nullptr, nullptr));
  NVRTC_CHECK(nvrtcAddNameExpression(prog, expr));
  nvrtc_compile(prog, int(opts.size()), opts.data());
  const char* name = nullptr;
  NVRTC_CHECK(nvrtcGetLoweredName(prog, expr, &name));
  *lowered = name;
  size_t size = 0;
  NVRTC_CHECK(nvrtcGetCUBINSize(prog, &size));
  std::vector<char> cubin(size);
  NVRTC_CHECK(nvrtcGetCUBIN(prog, cubin.data()));
  NVRTC_CHECK(nvrtcDestroyProgram(&prog));
  return cubin;
}

template <typename T>
static void run(CUmodule mod, const std::string& name, T a) {
  CUfunction k;
  CU_CHECK(cuModuleGetFunction(&k, mod, name.c_str()));
  const int n = 5000;
  std::vector<T> hx(n), hy(n), out(n);
  for (int i = 0; i < n; i++) hx[i] = T(i % 113) * T(0.25), hy[i] = T(i % 7);
  CUdeviceptr dx, dy;
  CU_CHECK(cuMemAlloc(&dx, n * sizeof(T)));
  CU_CHECK(cuMemAlloc(&dy, n * sizeof(T)));
  CU_CHECK(cuMemcpyHtoD(dx, hx.data(), n * sizeof(T)));
  CU_CHECK(cuMemcpyHtoD(dy, hy.data(), n * sizeof(T)));
  int nn = n;
  void* args[] = {&a, &dx, &dy, &nn};
  CU_CHECK(cuLaunchKernel(k, (n + 255) / 256, 1, 1, 256, 1, 1, 0, nullptr, args, nullptr));
  CU_CHECK(cuMemcpyDtoH(out.data(), dy, n * sizeof(T)));
  for (int i = 0; i < n; i++) {
    T want = a * hx[i] + hy[i];
    if (std::fabs(double(out[i] - want)) > 1e-6 * std::fabs(double(want))) {
      std::fprintf(stderr, "%s: y[%d] = %g, expected %g\n", name.c_str(), i, double(out[i]), double(want));
      std::exit(1);
    }
  }
  CU_CHECK(cuMemFree(dx));
  CU_CHECK(cuMemFree(dy));
}

int main() {
  CU_CHECK(cuInit(0));
  CUdevice dev;
  const std::string arch = "sm_" + std::to_string(first_device_arch(&dev));
  const std::string opt = "--gpu-architecture=" + arch;
  CUcontext ctx;
  CU_CHECK(cuCtxCreate(&ctx, nullptr, 0, dev));

  std::string fname, dname;
  std::vector<char> f = compile({opt.c_str(), "--std=c++17"}, "scale_add<float>", &fname);
  std::vector<char> d = compile({"-arch", arch.c_str()}, "scale_add<double>", &dname);
  CUmodule mf, md;
  CU_CHECK(cuModuleLoadData(&mf, f.data()));
  CU_CHECK(cuModuleLoadData(&md, d.data()));
  run<float>(mf, fname, 1.5f);
  run<double>(md, dname, -0.75);
  CU_CHECK(cuModuleUnload(mf));
  CU_CHECK(cuModuleUnload(md));
  CU_CHECK(cuCtxDestroy(ctx));
  std::printf("PASS nvrtc_arch (%s)\n", arch.c_str());
  return 0;
}
