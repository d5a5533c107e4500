// nvJitLink as programs use it (Numba through cuda-python does the same):
// a kernel compiled by NVRTC to LTO-IR calls a device function compiled to
// PTX in another unit; nvJitLink (-lto) links the two for the device's
// sm_XX, the "cubin" it hands back is loaded with cuModuleLoadData and
// launched, and the results are checked. On Wormhole the image is PTX
// (docs/python.md); the program does not need to know. Then:
// -maxrregcount reaches the kernel's register count, -arch is required, and
// (Wormhole's nvJitLink) a SASS cubin input is refused with an error log
// naming it.
#include <nvJitLink.h>
#include <nvrtc.h>

#include <cstring>
#include <string>
#include <vector>

#include "check.hpp"
#include "nvrtc_check.hpp"

#define LINK_CHECK(h, x)                                                                   \
  do {                                                                                     \
    nvJitLinkResult r_ = (x);                                                              \
    if (r_ != NVJITLINK_SUCCESS) {                                                         \
      size_t n_ = 0;                                                                       \
      nvJitLinkGetErrorLogSize(h, &n_);                                                    \
      std::string log_(n_, '\0');                                                          \
      if (n_) nvJitLinkGetErrorLog(h, log_.data());                                        \
      std::fprintf(stderr, "%s:%d: %s failed (%d): %s\n", __FILE__, __LINE__, #x, int(r_), log_.c_str()); \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)

static const char* kKernel = R"(
extern "C" __device__ int twice_plus(int x, int y);
extern "C" __global__ void apply(const int* in, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = twice_plus(in[i], i);
}
)";
static const char* kHelper = R"(
extern "C" __device__ int twice_plus(int x, int y) { return 2 * x + y; }
)";

// One unit: NVRTC to LTO-IR (lto) or PTX, relocatable.
static std::vector<char> compile(const char* src, const char* name, const char* arch, bool lto) {
  nvrtcProgram p;
  NVRTC_CHECK(nvrtcCreateProgram(&p, src, name, 0, nullptr, nullptr));
  const char* opts[] = {arch, "-rdc=true", "-dlto"};
  nvrtc_compile(p, lto ? 3 : 2, opts);
  size_t n = 0;
  std::vector<char> out;
  if (lto) {
    NVRTC_CHECK(nvrtcGetLTOIRSize(p, &n));
    out.resize(n);
    NVRTC_CHECK(nvrtcGetLTOIR(p, out.data()));
  } else {
    NVRTC_CHECK(nvrtcGetPTXSize(p, &n));
    out.resize(n);
    NVRTC_CHECK(nvrtcGetPTX(p, out.data()));
  }
  NVRTC_CHECK(nvrtcDestroyProgram(&p));
  return out;
}

int main() {
  CU_CHECK(cuInit(0));
  CUdevice dev;
  const int cc = first_device_arch(&dev);
  const std::string sm = "sm_" + std::to_string(cc);
  const std::string arch_opt = "-arch=" + sm, virt = "--gpu-architecture=compute_" + std::to_string(cc);
  CUcontext ctx;
  CU_CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CU_CHECK(cuCtxSetCurrent(ctx));

  unsigned vmaj = 0, vmin = 0;
  if (nvJitLinkVersion(&vmaj, &vmin) != NVJITLINK_SUCCESS || vmaj < 12) {
    std::fprintf(stderr, "nvJitLinkVersion: %u.%u\n", vmaj, vmin);
    return 1;
  }
  std::vector<char> kernel = compile(kKernel, "apply.cu", virt.c_str(), true);
  std::vector<char> helper = compile(kHelper, "helper.cu", virt.c_str(), false);

  // -arch is required.
  nvJitLinkHandle none = nullptr;
  if (nvJitLinkCreate(&none, 0, nullptr) != NVJITLINK_ERROR_MISSING_ARCH) {
    std::fprintf(stderr, "nvJitLinkCreate without -arch was accepted\n");
    return 1;
  }

  const char* opts[] = {arch_opt.c_str(), "-lto", "-maxrregcount=32"};
  nvJitLinkHandle h;
  LINK_CHECK(nullptr, nvJitLinkCreate(&h, 3, opts));
  LINK_CHECK(h, nvJitLinkAddData(h, NVJITLINK_INPUT_LTOIR, kernel.data(), kernel.size(), "apply.ltoir"));
  LINK_CHECK(h, nvJitLinkAddData(h, NVJITLINK_INPUT_PTX, helper.data(), helper.size(), "helper.ptx"));
  LINK_CHECK(h, nvJitLinkComplete(h));
  size_t cubin_size = 0;
  LINK_CHECK(h, nvJitLinkGetLinkedCubinSize(h, &cubin_size));
  std::vector<char> cubin(cubin_size);
  LINK_CHECK(h, nvJitLinkGetLinkedCubin(h, cubin.data()));
  // The image is copied, as cuda-python does, before it is loaded.
  std::vector<char> image(cubin);
  LINK_CHECK(h, nvJitLinkDestroy(&h));
  if (h != nullptr) {
    std::fprintf(stderr, "nvJitLinkDestroy left the handle set\n");
    return 1;
  }

  CUmodule mod;
  CU_CHECK(cuModuleLoadData(&mod, image.data()));
  CUfunction fn;
  CU_CHECK(cuModuleGetFunction(&fn, mod, "apply"));
  int regs = 0;
  CU_CHECK(cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, fn));
  if (regs <= 0 || regs > 32) {
    std::fprintf(stderr, "-maxrregcount=32: the kernel uses %d registers\n", regs);
    return 1;
  }
  const int n = 5000;
  std::vector<int> hin(n), hout(n);
  for (int i = 0; i < n; i++) hin[i] = i * 7 - 1000;
  CUdeviceptr din, dout;
  CU_CHECK(cuMemAlloc(&din, n * sizeof(int)));
  CU_CHECK(cuMemAlloc(&dout, n * sizeof(int)));
  CU_CHECK(cuMemcpyHtoD(din, hin.data(), n * sizeof(int)));
  int nn = n;
  void* args[] = {&din, &dout, &nn};
  CU_CHECK(cuLaunchKernel(fn, (n + 127) / 128, 1, 1, 128, 1, 1, 0, nullptr, args, nullptr));
  CU_CHECK(cuMemcpyDtoH(hout.data(), dout, n * sizeof(int)));
  for (int i = 0; i < n; i++)
    if (hout[i] != 2 * hin[i] + i) {
      std::fprintf(stderr, "out[%d] = %d, expected %d\n", i, hout[i], 2 * hin[i] + i);
      return 1;
    }

  // A SASS cubin (an ELF for the CUDA machine) is refused, by name.
  std::vector<unsigned char> elf(64, 0);
  std::memcpy(elf.data(), "\x7f" "ELF\x02\x01\x01", 7);
  elf[18] = 190;  // EM_CUDA
  nvJitLinkHandle h2;
  LINK_CHECK(nullptr, nvJitLinkCreate(&h2, 1, opts));
  if (nvJitLinkAddData(h2, NVJITLINK_INPUT_ANY, elf.data(), elf.size(), "kernel.cubin") == NVJITLINK_SUCCESS) {
    std::fprintf(stderr, "a SASS cubin input was accepted\n");
    return 1;
  }
  size_t n_log = 0;
  LINK_CHECK(h2, nvJitLinkGetErrorLogSize(h2, &n_log));
  std::string log(n_log, '\0');
  LINK_CHECK(h2, nvJitLinkGetErrorLog(h2, log.data()));
  if (log.find("kernel.cubin") == std::string::npos) {
    std::fprintf(stderr, "the refusal does not name the input: %s\n", log.c_str());
    return 1;
  }
  LINK_CHECK(h2, nvJitLinkDestroy(&h2));

  CU_CHECK(cuMemFree(din));
  CU_CHECK(cuMemFree(dout));
  CU_CHECK(cuModuleUnload(mod));
  CU_CHECK(cuDevicePrimaryCtxRelease(dev));
  std::printf("nvJitLink LTO-IR + PTX link passed (%d elements, image %zu bytes, %d registers, nvJitLink %u.%u)\n", n,
              cubin_size, regs, vmaj, vmin);
  return 0;
}
