// The driver API as a program uses it: modules from a fatbin FILE and a PTX
// file, launches with kernelParams and with `extra`, 2D/3D copies, fills,
// streams, events, occupancy, function attributes, libraries, globals, the
// PTX linker. Every result is checked against the host.
// Usage: wh_driver_test <kernels.fatbin> <kernels.ptx> [kernels.cubin]
#include <cmath>
#include <cstring>
#include <vector>

#include <cudaProfiler.h>

#include "check.hpp"

static int g_host_fn_ran = 0;
static void host_fn(void* p) { *static_cast<int*>(p) = 42; }

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s kernels.fatbin kernels.ptx\n", argv[0]);
    return 2;
  }
  const char* fatbin_path = argv[1];
  const char* ptx_path = argv[2];

  CUdevice dev;
  CU_EXPECT(cuDeviceGetCount(nullptr), CUDA_ERROR_NOT_INITIALIZED);
  CU_CHECK(cuInit(0));
  int count = 0;
  CU_CHECK(cuDeviceGetCount(&count));
  EXPECT(count >= 1);
  CU_CHECK(cuDeviceGet(&dev, 0));
  CU_EXPECT(cuDeviceGet(&dev, count), CUDA_ERROR_INVALID_DEVICE);
  char name[256];
  CU_CHECK(cuDeviceGetName(name, sizeof name, dev));
  EXPECT(std::strlen(name) > 0);
  int major = 0, minor = 0, sms = 0;
  CU_CHECK(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
  CU_CHECK(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
  CU_CHECK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
  EXPECT(major >= 7 && sms > 0);
  CUuuid uuid;
  CU_CHECK(cuDeviceGetUuid(&uuid, dev));
  size_t total = 0;
  CU_CHECK(cuDeviceTotalMem(&total, dev));
  EXPECT(total > 0);
  CUdevprop dprop;
  CU_CHECK(cuDeviceGetProperties(&dprop, dev));
  EXPECT(dprop.SIMDWidth == 32 && dprop.maxThreadsPerBlock >= 1024 && dprop.clockRate > 0);
  size_t lin_max = 0;
  CU_CHECK(cuDeviceGetTexture1DLinearMaxWidth(&lin_max, CU_AD_FORMAT_FLOAT, 1, dev));
  EXPECT(lin_max > 0);
  CU_CHECK(cuProfilerStart());
  CU_CHECK(cuProfilerStop());
  int version = 0;
  CU_CHECK(cuDriverGetVersion(&version));
  EXPECT(version >= 13000);
  std::printf("device: %s, sm_%d%d, %d SMs, %zu MiB, driver %d\n", name, major, minor, sms, total >> 20, version);

  // Contexts: the primary one, then a created one pushed over it.
  CUcontext primary, cur, created, popped;
  CU_CHECK(cuDevicePrimaryCtxRetain(&primary, dev));
  unsigned pflags = 0;
  int active = 0;
  CU_CHECK(cuDevicePrimaryCtxGetState(dev, &pflags, &active));
  EXPECT(active == 1);
  CU_CHECK(cuCtxSetCurrent(primary));
  CU_CHECK(cuCtxGetCurrent(&cur));
  EXPECT(cur == primary);
  CU_CHECK(cuCtxCreate(&created, nullptr, 0, dev));
  CU_CHECK(cuCtxGetCurrent(&cur));
  EXPECT(cur == created && created != primary);
  CU_CHECK(cuCtxPopCurrent(&popped));
  EXPECT(popped == created);
  CU_CHECK(cuCtxGetCurrent(&cur));
  EXPECT(cur == primary);
  CU_CHECK(cuCtxPushCurrent(created));
  CUdevice cdev = -1;
  CU_CHECK(cuCtxGetDevice(&cdev));
  EXPECT(cdev == dev);
  CU_CHECK(cuCtxPopCurrent(nullptr));
  CU_CHECK(cuCtxDestroy(created));
  CU_EXPECT(cuCtxPushCurrent(created), CUDA_ERROR_INVALID_CONTEXT);
  size_t stack = 0;
  CU_CHECK(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 4096));
  CU_CHECK(cuCtxGetLimit(&stack, CU_LIMIT_STACK_SIZE));
  EXPECT(stack >= 4096);
  CU_CHECK(cuCtxSynchronize());

  // ---- a fatbin from a file; kernelParams launch
  CUmodule fmod;
  CU_CHECK(cuModuleLoad(&fmod, fatbin_path));
  CUfunction saxpy;
  CU_CHECK(cuModuleGetFunction(&saxpy, fmod, "saxpy"));
  CUfunction nope;
  CU_EXPECT(cuModuleGetFunction(&nope, fmod, "no_such_kernel"), CUDA_ERROR_NOT_FOUND);
  unsigned nfuncs = 0;
  CU_CHECK(cuModuleGetFunctionCount(&nfuncs, fmod));
  EXPECT(nfuncs == 5);  // saxpy, scale2d, mixed, tex_fetch, surf_fill
  CUfunction all[5];
  CU_CHECK(cuModuleEnumerateFunctions(all, 5, fmod));
  bool found_saxpy = false;
  for (CUfunction f : all) found_saxpy |= f == saxpy;
  EXPECT(found_saxpy);
  const int n = 1000;
  std::vector<float> hx(n), hy(n), out(n);
  for (int i = 0; i < n; i++) hx[i] = float(i), hy[i] = float(2 * i);
  CUdeviceptr dx, dy;
  CU_CHECK(cuMemAlloc(&dx, n * sizeof(float)));
  CU_CHECK(cuMemAlloc(&dy, n * sizeof(float)));
  CU_CHECK(cuMemcpyHtoD(dx, hx.data(), n * sizeof(float)));
  CU_CHECK(cuMemcpyHtoD(dy, hy.data(), n * sizeof(float)));
  float a = 3.0f;
  int nn = n;
  void* args[] = {&nn, &a, &dx, &dy};
  CU_CHECK(cuLaunchKernel(saxpy, (n + 127) / 128, 1, 1, 128, 1, 1, 0, nullptr, args, nullptr));
  CU_CHECK(cuCtxSynchronize());
  CU_CHECK(cuMemcpyDtoH(out.data(), dy, n * sizeof(float)));
  for (int i = 0; i < n; i++) EXPECT(out[i] == 3.0f * i + 2 * i);

  // ---- the `extra` form: the parameters packed at their offsets
  size_t offs[4], sizes[4];
  for (int i = 0; i < 4; i++) CU_CHECK(cuFuncGetParamInfo(saxpy, i, &offs[i], &sizes[i]));
  CU_EXPECT(cuFuncGetParamInfo(saxpy, 4, &offs[0], &sizes[0]), CUDA_ERROR_INVALID_VALUE);
  EXPECT(offs[0] == 0 && sizes[0] == 4 && offs[1] == 4 && offs[2] == 8 && sizes[2] == 8 && offs[3] == 16);
  unsigned char buf[32] = {};
  float a2 = -1.0f;
  std::memcpy(buf + offs[0], &nn, 4);
  std::memcpy(buf + offs[1], &a2, 4);
  std::memcpy(buf + offs[2], &dx, 8);
  std::memcpy(buf + offs[3], &dy, 8);
  size_t buf_size = 24;
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &buf_size, CU_LAUNCH_PARAM_END};
  CU_CHECK(cuLaunchKernel(saxpy, (n + 127) / 128, 1, 1, 128, 1, 1, 0, nullptr, nullptr, extra));
  CU_CHECK(cuMemcpyDtoH(out.data(), dy, n * sizeof(float)));
  for (int i = 0; i < n; i++) EXPECT(out[i] == 2.0f * i + 2 * i);
  size_t short_size = 16;
  void* bad_extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &short_size,
                       CU_LAUNCH_PARAM_END};
  CU_EXPECT(cuLaunchKernel(saxpy, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, bad_extra), CUDA_ERROR_INVALID_VALUE);
  // Too many threads: the code NVIDIA's runtime reports as cudaErrorInvalidConfiguration (9), which a static
  // runtime passes through by number (docs/export-tables.md).
  CU_EXPECT(cuLaunchKernel(saxpy, 1, 1, 1, 2048, 1, 1, 0, nullptr, args, nullptr), CUresult(9));

  // A parameter list with alignment gaps, through both forms.
  CUfunction mixed;
  CU_CHECK(cuModuleGetFunction(&mixed, fmod, "mixed"));
  CUdeviceptr dout;
  CU_CHECK(cuMemAlloc(&dout, sizeof(double)));
  char c = 5;
  double d = 0.25;
  short s = -3;
  void* margs[] = {&c, &d, &s, &dout};
  CU_CHECK(cuLaunchKernel(mixed, 1, 1, 1, 1, 1, 1, 0, nullptr, margs, nullptr));
  double dres = 0;
  CU_CHECK(cuMemcpyDtoH(&dres, dout, sizeof dres));
  EXPECT(dres == 2.25);

  // ---- function attributes and occupancy
  int maxt = 0, regs = -1, ptxv = 0;
  CU_CHECK(cuFuncGetAttribute(&maxt, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, saxpy));
  CU_CHECK(cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, saxpy));
  CU_CHECK(cuFuncGetAttribute(&ptxv, CU_FUNC_ATTRIBUTE_PTX_VERSION, saxpy));
  EXPECT(maxt >= 128 && regs >= 0 && ptxv > 0);
  CU_CHECK(cuFuncSetAttribute(saxpy, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 8192));
  int dyn = 0;
  CU_CHECK(cuFuncGetAttribute(&dyn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, saxpy));
  EXPECT(dyn == 8192);
  const char* fname = nullptr;
  CU_CHECK(cuFuncGetName(&fname, saxpy));
  EXPECT(std::strcmp(fname, "saxpy") == 0);
  int blocks = 0, min_grid = 0, best = 0;
  CU_CHECK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, saxpy, 128, 0));
  EXPECT(blocks > 0);
  CU_CHECK(cuOccupancyMaxPotentialBlockSize(&min_grid, &best, saxpy, nullptr, 0, 0));
  EXPECT(best > 0 && best <= maxt && best % 32 == 0 && min_grid > 0);
  std::printf("saxpy: %d threads max, %d regs, %d blocks/SM at 128, best block %d\n", maxt, regs, blocks, best);

  // ---- PTX from a file, loaded as data; a module global; 2D copies
  std::string ptx = read_all(ptx_path);
  CUmodule pmod;
  char log[256] = "unchanged";
  CUjit_option opts[] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES};
  void* vals[] = {log, reinterpret_cast<void*>(uintptr_t(sizeof log))};
  CU_CHECK(cuModuleLoadDataEx(&pmod, ptx.c_str(), 2, opts, vals));
  CUfunction scale2d;
  CU_CHECK(cuModuleGetFunction(&scale2d, pmod, "scale2d"));
  unsigned nptx = 0;
  CU_CHECK(cuModuleGetFunctionCount(&nptx, pmod));
  EXPECT(nptx == 5);
  CUdeviceptr gscale;
  size_t gsize = 0;
  CU_CHECK(cuModuleGetGlobal(&gscale, &gsize, pmod, "g_scale"));
  EXPECT(gsize == sizeof(float));
  float scale = 0.5f;
  CU_CHECK(cuMemcpyHtoD(gscale, &scale, sizeof scale));
  CUdeviceptr gmissing;
  CU_EXPECT(cuModuleGetGlobal(&gmissing, &gsize, pmod, "no_such_var"), CUDA_ERROR_NOT_FOUND);

  const int rows = 7, cols = 33;
  std::vector<float> hm(rows * cols), back(rows * cols, -1.0f);
  for (int i = 0; i < rows * cols; i++) hm[i] = float(i);
  CUdeviceptr dm;
  size_t pitch = 0;
  CU_CHECK(cuMemAllocPitch(&dm, &pitch, cols * sizeof(float), rows, 4));
  EXPECT(pitch >= cols * sizeof(float));
  CUDA_MEMCPY2D up = {};
  up.srcMemoryType = CU_MEMORYTYPE_HOST;
  up.srcHost = hm.data();
  up.srcPitch = cols * sizeof(float);
  up.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  up.dstDevice = dm;
  up.dstPitch = pitch;
  up.WidthInBytes = cols * sizeof(float);
  up.Height = rows;
  CU_CHECK(cuMemcpy2D(&up));
  int ir = rows, ic = cols;
  void* sargs[] = {&dm, &pitch, &ir, &ic};
  CU_CHECK(cuLaunchKernel(scale2d, (cols + 31) / 32, rows, 1, 32, 1, 1, 0, nullptr, sargs, nullptr));
  CUDA_MEMCPY2D down = {};
  down.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  down.srcDevice = dm;
  down.srcPitch = pitch;
  down.dstMemoryType = CU_MEMORYTYPE_HOST;
  down.dstHost = back.data();
  down.dstPitch = cols * sizeof(float);
  down.WidthInBytes = cols * sizeof(float);
  down.Height = rows;
  CU_CHECK(cuMemcpy2D(&down));
  for (int i = 0; i < rows * cols; i++) EXPECT(back[i] == 0.5f * i);
  // A sub-rectangle (offsets on both sides), asynchronously.
  std::vector<float> sub(3 * 4, -1.0f);
  CUDA_MEMCPY2D part = down;
  part.srcXInBytes = 2 * sizeof(float);
  part.srcY = 3;
  part.dstHost = sub.data();
  part.dstPitch = 4 * sizeof(float);
  part.WidthInBytes = 4 * sizeof(float);
  part.Height = 3;
  CU_CHECK(cuMemcpy2DAsync(&part, nullptr));
  CU_CHECK(cuStreamSynchronize(nullptr));
  for (int r = 0; r < 3; r++)
    for (int k = 0; k < 4; k++) EXPECT(sub[r * 4 + k] == 0.5f * ((r + 3) * cols + k + 2));

  // ---- 3D copies: host box -> device (pitched, with an offset) -> host
  const size_t W = 5, H = 4, D = 3;
  std::vector<int> box(W * H * D), box_back(W * H * D, -1);
  for (size_t i = 0; i < box.size(); i++) box[i] = int(i * 7 + 1);
  CUdeviceptr d3;
  size_t p3 = 0;
  CU_CHECK(cuMemAllocPitch(&d3, &p3, (W + 2) * sizeof(int), (H + 1) * (D + 1), 4));
  CUDA_MEMCPY3D c3 = {};
  c3.srcMemoryType = CU_MEMORYTYPE_HOST;
  c3.srcHost = box.data();
  c3.srcPitch = W * sizeof(int);
  c3.srcHeight = H;
  c3.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  c3.dstDevice = d3;
  c3.dstPitch = p3;
  c3.dstHeight = H + 1;
  c3.dstXInBytes = 2 * sizeof(int);
  c3.dstY = 1;
  c3.dstZ = 1;
  c3.WidthInBytes = W * sizeof(int);
  c3.Height = H;
  c3.Depth = D;
  CU_CHECK(cuMemcpy3D(&c3));
  CUDA_MEMCPY3D r3 = {};
  r3.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  r3.srcDevice = d3;
  r3.srcPitch = p3;
  r3.srcHeight = H + 1;
  r3.srcXInBytes = 2 * sizeof(int);
  r3.srcY = 1;
  r3.srcZ = 1;
  r3.dstMemoryType = CU_MEMORYTYPE_HOST;
  r3.dstHost = box_back.data();
  r3.dstPitch = W * sizeof(int);
  r3.dstHeight = H;
  r3.WidthInBytes = W * sizeof(int);
  r3.Height = H;
  r3.Depth = D;
  CU_CHECK(cuMemcpy3DAsync(&r3, nullptr));
  CU_CHECK(cuCtxSynchronize());
  EXPECT(box == box_back);
  // The element just before the box's first row stayed untouched by it.
  int one = 0;
  CU_CHECK(cuMemcpyDtoH(&one, d3 + (H + 1) * p3 + p3 + 2 * sizeof(int), sizeof one));
  EXPECT(one == box[0]);

  // ---- fills: 8, 16, 32 bits, 1D and 2D, sync and async
  CUstream st;
  CU_CHECK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
  const size_t fn = 70000;  // more than one pattern chunk
  CUdeviceptr df;
  CU_CHECK(cuMemAlloc(&df, fn * 4));
  std::vector<uint32_t> f32(fn);
  CU_CHECK(cuMemsetD32(df, 0x12345678u, fn));
  CU_CHECK(cuMemcpyDtoH(f32.data(), df, fn * 4));
  for (size_t i = 0; i < fn; i++) EXPECT(f32[i] == 0x12345678u);
  CU_CHECK(cuMemsetD16(df, 0xbeef, 2 * fn - 1));
  std::vector<uint16_t> f16(2 * fn);
  CU_CHECK(cuMemcpyDtoH(f16.data(), df, fn * 4));
  for (size_t i = 0; i + 1 < 2 * fn; i++) EXPECT(f16[i] == 0xbeef);
  EXPECT(f16[2 * fn - 1] == 0x1234);  // the last half of the last word: unchanged
  CU_CHECK(cuMemsetD8(df, 0xab, 5));
  std::vector<uint8_t> f8(8);
  CU_CHECK(cuMemcpyDtoH(f8.data(), df, 8));
  EXPECT(f8[0] == 0xab && f8[4] == 0xab && f8[5] == 0xbe && f8[6] == 0xef);
  CU_CHECK(cuMemsetD32Async(df, 7u, fn, st));
  CU_CHECK(cuMemsetD8Async(df, 0, 4, st));
  CU_CHECK(cuStreamSynchronize(st));
  CU_CHECK(cuMemcpyDtoH(f32.data(), df, fn * 4));
  EXPECT(f32[0] == 0);
  for (size_t i = 1; i < fn; i++) EXPECT(f32[i] == 7u);
  CU_EXPECT(cuMemsetD32(df + 1, 1u, 4), CUDA_ERROR_INVALID_VALUE);  // misaligned
  // 2D: 32-bit pattern in a pitched matrix; the padding keeps its old bytes.
  CU_CHECK(cuMemsetD8(dm, 0, pitch * rows));
  CU_CHECK(cuMemsetD2D32(dm, pitch, 0xdeadbeefu, cols - 1, rows));
  std::vector<uint32_t> m32(pitch / 4 * rows);
  CU_CHECK(cuMemcpyDtoH(m32.data(), dm, pitch * rows));
  for (int r = 0; r < rows; r++)
    for (size_t k = 0; k < pitch / 4; k++) EXPECT(m32[r * pitch / 4 + k] == (k < size_t(cols - 1) ? 0xdeadbeefu : 0u));
  CU_CHECK(cuMemsetD2D16Async(dm, pitch, 0x0101, 4, rows, st));
  CU_CHECK(cuMemsetD2D8(dm, pitch, 0x22, 1, rows));
  CU_CHECK(cuStreamSynchronize(st));
  CU_CHECK(cuMemcpyDtoH(m32.data(), dm, pitch * rows));
  for (int r = 0; r < rows; r++) {
    EXPECT(m32[r * pitch / 4] == 0x01010122u);
    EXPECT(m32[r * pitch / 4 + 2] == 0xdeadbeefu);
  }

  // ---- streams, events, host functions, stream-ordered allocation
  CUevent e0, e1;
  CU_CHECK(cuEventCreate(&e0, CU_EVENT_DEFAULT));
  CU_CHECK(cuEventCreate(&e1, CU_EVENT_DEFAULT));
  CU_CHECK(cuEventRecord(e0, st));
  CUdeviceptr da;
  CU_CHECK(cuMemAllocAsync(&da, n * sizeof(float), st));
  CU_CHECK(cuMemcpyHtoDAsync(da, hy.data(), n * sizeof(float), st));
  void* aargs[] = {&nn, &a, &dx, &da};
  CU_CHECK(cuLaunchKernel(saxpy, (n + 255) / 256, 1, 1, 256, 1, 1, 0, st, aargs, nullptr));
  CU_CHECK(cuMemcpyDtoHAsync(out.data(), da, n * sizeof(float), st));
  CU_CHECK(cuMemFreeAsync(da, st));
  CU_CHECK(cuLaunchHostFunc(st, host_fn, &g_host_fn_ran));
  CU_CHECK(cuEventRecord(e1, st));
  CU_CHECK(cuEventSynchronize(e1));
  CU_CHECK(cuStreamSynchronize(st));
  EXPECT(g_host_fn_ran == 42);
  CU_CHECK(cuStreamQuery(st));
  CU_CHECK(cuEventQuery(e1));
  float ms = -1;
  CU_CHECK(cuEventElapsedTime(&ms, e0, e1));
  EXPECT(ms >= 0);
  for (int i = 0; i < n; i++) EXPECT(out[i] == 3.0f * i + 2 * i);
  CUstream st2;
  CU_CHECK(cuStreamCreateWithPriority(&st2, 0, 0));
  CU_CHECK(cuStreamWaitEvent(st2, e1, 0));
  CU_CHECK(cuStreamSynchronize(st2));

  // cuLaunchKernelEx with a (hint) attribute, and a cooperative launch.
  CUlaunchAttribute attr = {};
  attr.id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
  attr.value.priority = 0;
  CUlaunchConfig cfg = {};
  cfg.gridDimX = (n + 127) / 128, cfg.gridDimY = 1, cfg.gridDimZ = 1;
  cfg.blockDimX = 128, cfg.blockDimY = 1, cfg.blockDimZ = 1;
  cfg.hStream = st;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  CU_CHECK(cuMemcpyHtoD(dy, hy.data(), n * sizeof(float)));
  CU_CHECK(cuLaunchKernelEx(&cfg, saxpy, args, nullptr));
  CU_CHECK(cuLaunchCooperativeKernel(saxpy, (n + 127) / 128, 1, 1, 128, 1, 1, 0, st, args));
  CU_CHECK(cuStreamSynchronize(st));
  CU_CHECK(cuMemcpyDtoH(out.data(), dy, n * sizeof(float)));
  for (int i = 0; i < n; i++) EXPECT(out[i] == 6.0f * i + 2 * i);

  // ---- a library from memory (the fatbin file's bytes), its kernel and globals
  std::string fat = read_all(fatbin_path);
  CUlibrary lib;
  CU_CHECK(cuLibraryLoadData(&lib, fat.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  CUkernel kern;
  CU_CHECK(cuLibraryGetKernel(&kern, lib, "scale2d"));
  CUfunction kfn;
  CU_CHECK(cuKernelGetFunction(&kfn, kern));
  unsigned nkernels = 0;
  CU_CHECK(cuLibraryGetKernelCount(&nkernels, lib));
  EXPECT(nkernels == 5);
  CUdeviceptr counter;
  size_t csize = 0;
  CU_CHECK(cuLibraryGetGlobal(&counter, &csize, lib, "g_counter"));
  EXPECT(csize == 4 * sizeof(int));
  int zeros[4] = {};
  CU_CHECK(cuMemcpyHtoD(counter, zeros, sizeof zeros));
  CU_CHECK(cuMemcpyHtoD(dm, hm.data(), sizeof(float)));  // (0,0) = 0; only the counter matters here
  CU_CHECK(cuLaunchKernel(kfn, 2, rows, 1, 32, 1, 1, 0, nullptr, sargs, nullptr));
  CU_CHECK(cuLaunchKernel(kfn, 2, rows, 1, 32, 1, 1, 0, nullptr, sargs, nullptr));
  int cnt[4];
  CU_CHECK(cuMemcpyDtoH(cnt, counter, sizeof cnt));
  EXPECT(cnt[0] == 2 && cnt[1] == 0);
  CUmodule lmod;
  CU_CHECK(cuLibraryGetModule(&lmod, lib));
  CUfunction same;
  CU_CHECK(cuModuleGetFunction(&same, lmod, "scale2d"));
  EXPECT(same == kfn);
  // The fatbin module's g_counter is another variable than the library's.
  CUdeviceptr fcounter;
  CU_CHECK(cuModuleGetGlobal(&fcounter, &csize, fmod, "g_counter"));
  EXPECT(fcounter != counter);

  // ---- the linker: PTX file in, image out, loaded as a module
  CUlinkState link;
  CU_CHECK(cuLinkCreate(0, nullptr, nullptr, &link));
  CU_CHECK(cuLinkAddFile(link, CU_JIT_INPUT_PTX, ptx_path, 0, nullptr, nullptr));
  void* image = nullptr;
  size_t image_size = 0;
  CU_CHECK(cuLinkComplete(link, &image, &image_size));
  EXPECT(image && image_size > 0);
  CUmodule linked;
  CU_CHECK(cuModuleLoadData(&linked, image));
  CU_CHECK(cuLinkDestroy(link));
  CUfunction lsaxpy;
  CU_CHECK(cuModuleGetFunction(&lsaxpy, linked, "saxpy"));
  CU_CHECK(cuMemcpyHtoD(dy, hy.data(), n * sizeof(float)));
  CU_CHECK(cuLaunchKernel(lsaxpy, (n + 127) / 128, 1, 1, 128, 1, 1, 0, nullptr, args, nullptr));
  CU_CHECK(cuMemcpyDtoH(out.data(), dy, n * sizeof(float)));
  for (int i = 0; i < n; i++) EXPECT(out[i] == 3.0f * i + 2 * i);

  // ---- pointers and address ranges
  CUdeviceptr base;
  size_t range = 0;
  CU_CHECK(cuMemGetAddressRange(&base, &range, dx + 40));
  EXPECT(base == dx && range == n * sizeof(float));
  unsigned mtype = 0;
  CU_CHECK(cuPointerGetAttribute(&mtype, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, dx));
  EXPECT(mtype == CU_MEMORYTYPE_DEVICE);
  CUcontext pctx = nullptr;
  CU_CHECK(cuPointerGetAttribute(&pctx, CU_POINTER_ATTRIBUTE_CONTEXT, dx));
  EXPECT(pctx == primary);
  void* hp = nullptr;
  CU_CHECK(cuMemAllocHost(&hp, 4096));
  CU_CHECK(cuPointerGetAttribute(&mtype, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CUdeviceptr(uintptr_t(hp))));
  EXPECT(mtype == CU_MEMORYTYPE_HOST);
  CU_CHECK(cuMemFreeHost(hp));
  size_t freeb = 0, totalb = 0;
  CU_CHECK(cuMemGetInfo(&freeb, &totalb));
  EXPECT(freeb > 0 && freeb <= totalb);

  // ---- managed memory with hints; a peer copy (one device: device to device)
  if (!stacked_excludes("managed memory (host memory of the server process is not device memory of the server it forwards to)")) {
    CUdeviceptr managed;
    CU_CHECK(cuMemAllocManaged(&managed, n * sizeof(float), CU_MEM_ATTACH_GLOBAL));
    float* mp = reinterpret_cast<float*>(uintptr_t(managed));
    for (int i = 0; i < n; i++) mp[i] = 1.0f;
    CUmemLocation loc = {};
    loc.type = CU_MEM_LOCATION_TYPE_DEVICE;
    loc.id = 0;
    CU_CHECK(cuMemAdvise(managed, n * sizeof(float), CU_MEM_ADVISE_SET_PREFERRED_LOCATION, loc));
    CU_CHECK(cuMemPrefetchAsync(managed, n * sizeof(float), loc, 0, nullptr));
    void* margs2[] = {&nn, &a, &dx, &managed};
    CU_CHECK(cuLaunchKernel(saxpy, (n + 127) / 128, 1, 1, 128, 1, 1, 0, nullptr, margs2, nullptr));
    CU_CHECK(cuCtxSynchronize());
    for (int i = 0; i < n; i++) EXPECT(mp[i] == 3.0f * i + 1.0f);
    int is_managed = 0;
    CU_CHECK(cuPointerGetAttribute(&is_managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, managed));
    EXPECT(is_managed == 1);
    CU_CHECK(cuMemFree(managed));
  }
  CUdeviceptr peer;
  CU_CHECK(cuMemAlloc(&peer, n * sizeof(float)));
  CU_CHECK(cuMemcpyPeer(peer, primary, dx, primary, n * sizeof(float)));
  CU_CHECK(cuMemcpyDtoH(out.data(), peer, n * sizeof(float)));
  EXPECT(out == hx);
  CU_CHECK(cuMemFree(peer));

  // ---- stream capture of driver calls, replayed as a graph
  std::vector<float> hcap(n, 1.0f);
  CUdeviceptr dcap;
  CU_CHECK(cuMemAlloc(&dcap, n * sizeof(float)));
  CU_CHECK(cuMemcpyHtoD(dcap, hcap.data(), n * sizeof(float)));
  CUstream cs;
  CU_CHECK(cuStreamCreate(&cs, CU_STREAM_NON_BLOCKING));
  CU_CHECK(cuStreamBeginCapture(cs, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUstreamCaptureStatus cst;
  CU_CHECK(cuStreamIsCapturing(cs, &cst));
  EXPECT(cst == CU_STREAM_CAPTURE_STATUS_ACTIVE);
  cuuint64_t cap_id = 0;
  CUgraph cap_graph = nullptr;
  const CUgraphNode* cap_deps = nullptr;
  size_t ncap_deps = 99;
  CU_CHECK(cuStreamGetCaptureInfo(cs, &cst, &cap_id, &cap_graph, &cap_deps, nullptr, &ncap_deps));
  EXPECT(cst == CU_STREAM_CAPTURE_STATUS_ACTIVE && cap_graph != nullptr && ncap_deps == 0);
  void* cargs[] = {&nn, &a, &dx, &dcap};  // dcap += 3 * x
  CU_CHECK(cuLaunchKernel(saxpy, (n + 127) / 128, 1, 1, 128, 1, 1, 0, cs, cargs, nullptr));
  CUgraph graph;
  CU_CHECK(cuStreamEndCapture(cs, &graph));
  CUgraphExec gexec;
  CU_CHECK(cuGraphInstantiate(&gexec, graph, 0));
  std::vector<float> cap_out(n);
  CU_CHECK(cuMemcpyDtoH(cap_out.data(), dcap, n * sizeof(float)));
  for (int i = 0; i < n; i++) EXPECT(cap_out[i] == 1.0f);  // captured, not run
  CU_CHECK(cuGraphLaunch(gexec, cs));
  CU_CHECK(cuGraphLaunch(gexec, cs));
  CU_CHECK(cuStreamSynchronize(cs));
  CU_CHECK(cuMemcpyDtoH(cap_out.data(), dcap, n * sizeof(float)));
  for (int i = 0; i < n; i++) EXPECT(cap_out[i] == 1.0f + 6.0f * i);
  CU_CHECK(cuGraphExecDestroy(gexec));
  CU_CHECK(cuGraphDestroy(graph));

  // An explicit graph: empty -> memset (2.0f) -> kernel (+= 3 x) -> host function.
  CUgraph eg;
  CU_CHECK(cuGraphCreate(&eg, 0));
  CUgraphNode nroot, nset, nkern, nhost;
  CU_CHECK(cuGraphAddEmptyNode(&nroot, eg, nullptr, 0));
  CUDA_MEMSET_NODE_PARAMS msp = {};
  msp.dst = dcap;
  msp.value = 0x40000000u;  // 2.0f
  msp.elementSize = 4;
  msp.width = n;
  msp.height = 1;
  CU_CHECK(cuGraphAddMemsetNode(&nset, eg, &nroot, 1, &msp, primary));
  CUDA_KERNEL_NODE_PARAMS kp = {};
  kp.func = saxpy;
  kp.gridDimX = (n + 127) / 128, kp.gridDimY = 1, kp.gridDimZ = 1;
  kp.blockDimX = 128, kp.blockDimY = 1, kp.blockDimZ = 1;
  kp.kernelParams = cargs;
  CU_CHECK(cuGraphAddKernelNode(&nkern, eg, &nset, 1, &kp));
  CUDA_HOST_NODE_PARAMS hnp = {host_fn, &g_host_fn_ran};
  g_host_fn_ran = 0;
  CU_CHECK(cuGraphAddHostNode(&nhost, eg, nullptr, 0, &hnp));
  CU_CHECK(cuGraphAddDependencies(eg, &nkern, &nhost, nullptr, 1));
  size_t nnodes = 0;
  CU_CHECK(cuGraphGetNodes(eg, nullptr, &nnodes));
  EXPECT(nnodes == 4);
  CUgraphNodeType ntype;
  CU_CHECK(cuGraphNodeGetType(nkern, &ntype));
  EXPECT(ntype == CU_GRAPH_NODE_TYPE_KERNEL);
  size_t nroots = 0;
  CU_CHECK(cuGraphGetRootNodes(eg, nullptr, &nroots));
  EXPECT(nroots == 1);
  CUgraph eg_clone;
  CU_CHECK(cuGraphClone(&eg_clone, eg));
  CU_CHECK(cuGraphGetNodes(eg_clone, nullptr, &nnodes));
  EXPECT(nnodes == 4);
  CU_CHECK(cuGraphDestroy(eg_clone));
  CUDA_KERNEL_NODE_PARAMS kback = {};
  CU_CHECK(cuGraphKernelNodeGetParams(nkern, &kback));
  EXPECT(kback.func == saxpy && kback.blockDimX == 128);
  CUgraphExec eexec;
  CU_CHECK(cuGraphInstantiate(&eexec, eg, 0));
  CU_CHECK(cuGraphLaunch(eexec, cs));
  CU_CHECK(cuStreamSynchronize(cs));
  EXPECT(g_host_fn_ran == 42);
  CU_CHECK(cuMemcpyDtoH(cap_out.data(), dcap, n * sizeof(float)));
  for (int i = 0; i < n; i++) EXPECT(cap_out[i] == 2.0f + 3.0f * i);
  float minus = -1.0f;
  void* cargs2[] = {&nn, &minus, &dx, &dcap};
  kp.kernelParams = cargs2;
  CU_CHECK(cuGraphExecKernelNodeSetParams(eexec, nkern, &kp));
  CU_CHECK(cuGraphLaunch(eexec, cs));
  CU_CHECK(cuStreamSynchronize(cs));
  CU_CHECK(cuMemcpyDtoH(cap_out.data(), dcap, n * sizeof(float)));
  for (int i = 0; i < n; i++) EXPECT(cap_out[i] == 2.0f - i);
  CU_CHECK(cuGraphExecDestroy(eexec));
  CU_CHECK(cuGraphDestroy(eg));
  CU_CHECK(cuStreamDestroy(cs));
  CU_CHECK(cuMemFree(dcap));

  // ---- arrays, texture and surface objects
  const int tw = 8, th = 4;
  CUDA_ARRAY3D_DESCRIPTOR ad = {};
  ad.Width = tw, ad.Height = th, ad.Depth = 0;
  ad.Format = CU_AD_FORMAT_FLOAT, ad.NumChannels = 1;
  ad.Flags = CUDA_ARRAY3D_SURFACE_LDST;
  CUarray arr;
  CU_CHECK(cuArray3DCreate(&arr, &ad));
  CUDA_ARRAY_DESCRIPTOR got;
  CU_CHECK(cuArrayGetDescriptor(&got, arr));
  EXPECT(got.Width == size_t(tw) && got.Height == size_t(th) && got.Format == CU_AD_FORMAT_FLOAT && got.NumChannels == 1);
  std::vector<float> texels(tw * th), fetched(tw * th, -1.0f);
  for (int i = 0; i < tw * th; i++) texels[i] = float(i) * 1.5f;
  CU_CHECK(cuMemcpyHtoA(arr, 0, texels.data(), texels.size() * sizeof(float)));
  CUDA_RESOURCE_DESC rd = {};
  rd.resType = CU_RESOURCE_TYPE_ARRAY;
  rd.res.array.hArray = arr;
  CUDA_TEXTURE_DESC td = {};
  td.addressMode[0] = td.addressMode[1] = CU_TR_ADDRESS_MODE_CLAMP;
  td.filterMode = CU_TR_FILTER_MODE_POINT;
  CUtexObject tex;
  CU_CHECK(cuTexObjectCreate(&tex, &rd, &td, nullptr));
  CUfunction tex_fetch, surf_fill;
  CU_CHECK(cuModuleGetFunction(&tex_fetch, fmod, "tex_fetch"));
  CU_CHECK(cuModuleGetFunction(&surf_fill, fmod, "surf_fill"));
  CUdeviceptr dtex;
  CU_CHECK(cuMemAlloc(&dtex, tw * th * sizeof(float)));
  int itw = tw, ith = th;
  void* targs[] = {&tex, &dtex, &itw, &ith};
  CU_CHECK(cuLaunchKernel(tex_fetch, th, 1, 1, tw, 1, 1, 0, nullptr, targs, nullptr));
  CU_CHECK(cuMemcpyDtoH(fetched.data(), dtex, tw * th * sizeof(float)));
  EXPECT(fetched == texels);
  // Part of a row, from an offset, through 1D copies that continue over rows.
  float mid[5];
  CU_CHECK(cuMemcpyAtoH(mid, arr, 6 * sizeof(float), sizeof mid));
  for (int i = 0; i < 5; i++) EXPECT(mid[i] == texels[6 + i]);
  CUsurfObject surf;
  CU_CHECK(cuSurfObjectCreate(&surf, &rd));
  void* sfargs[] = {&surf, &itw, &ith};
  CU_CHECK(cuLaunchKernel(surf_fill, th, 1, 1, tw, 1, 1, 0, nullptr, sfargs, nullptr));
  CU_CHECK(cuMemcpyAtoH(fetched.data(), arr, 0, tw * th * sizeof(float)));
  for (int y = 0; y < th; y++)
    for (int x = 0; x < tw; x++) EXPECT(fetched[y * tw + x] == float(x * 10 + y));
  // A 2D copy from device memory into the array's lower-right corner.
  CU_CHECK(cuMemcpyHtoD(dtex, texels.data(), tw * th * sizeof(float)));
  CUDA_MEMCPY2D toarr = {};
  toarr.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  toarr.srcDevice = dtex;
  toarr.srcPitch = tw * sizeof(float);
  toarr.dstMemoryType = CU_MEMORYTYPE_ARRAY;
  toarr.dstArray = arr;
  toarr.dstXInBytes = 4 * sizeof(float);
  toarr.dstY = 2;
  toarr.WidthInBytes = 4 * sizeof(float);
  toarr.Height = 2;
  CU_CHECK(cuMemcpy2D(&toarr));
  CU_CHECK(cuMemcpyAtoH(fetched.data(), arr, 0, tw * th * sizeof(float)));
  for (int y = 0; y < th; y++)
    for (int x = 0; x < tw; x++)
      EXPECT(fetched[y * tw + x] == (y >= 2 && x >= 4 ? texels[(y - 2) * tw + (x - 4)] : float(x * 10 + y)));
  CU_CHECK(cuSurfObjectDestroy(surf));
  CU_CHECK(cuTexObjectDestroy(tex));
  CU_CHECK(cuArrayDestroy(arr));
  CU_CHECK(cuMemFree(dtex));

  // ---- a bare cubin (SASS only): a GPU runs it; the sim device, which
  // interprets PTX, refuses it as an invalid image (never a silent load).
  if (argc > 3) {
    std::string cubin = read_all(argv[3]);
    CUmodule cmod;
    CUresult cr = cuModuleLoadData(&cmod, cubin.data());
    if (cr == CUDA_SUCCESS) {
      CUfunction csaxpy;
      CU_CHECK(cuModuleGetFunction(&csaxpy, cmod, "saxpy"));
      CU_CHECK(cuMemcpyHtoD(dy, hy.data(), n * sizeof(float)));
      CU_CHECK(cuLaunchKernel(csaxpy, (n + 127) / 128, 1, 1, 128, 1, 1, 0, nullptr, args, nullptr));
      CU_CHECK(cuMemcpyDtoH(out.data(), dy, n * sizeof(float)));
      for (int i = 0; i < n; i++) EXPECT(out[i] == 3.0f * i + 2 * i);
      CU_CHECK(cuModuleUnload(cmod));
      std::printf("cubin: loaded and ran\n");
    } else {
      EXPECT(cr == CUDA_ERROR_INVALID_IMAGE);
      CU_EXPECT(cuModuleLoad(&cmod, argv[3]), CUDA_ERROR_INVALID_IMAGE);
      std::printf("cubin: refused as an invalid image (a SASS-only image on the sim device)\n");
    }
  }

  // ---- errors
  const char* ename = nullptr;
  const char* etext = nullptr;
  CU_CHECK(cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &ename));
  CU_CHECK(cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &etext));
  EXPECT(std::strcmp(ename, "CUDA_ERROR_OUT_OF_MEMORY") == 0 && std::strlen(etext) > 0);
  CU_EXPECT(cuGetErrorName(CUresult(12345), &ename), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT(cuModuleLoadData(&lmod, "not a module image"), CUDA_ERROR_INVALID_IMAGE);

  // ---- teardown
  CU_CHECK(cuEventDestroy(e0));
  CU_CHECK(cuEventDestroy(e1));
  CU_CHECK(cuStreamDestroy(st));
  CU_CHECK(cuStreamDestroy(st2));
  CU_CHECK(cuMemFree(dx));
  CU_CHECK(cuMemFree(dy));
  CU_CHECK(cuMemFree(dm));
  CU_CHECK(cuMemFree(d3));
  CU_CHECK(cuMemFree(df));
  CU_CHECK(cuMemFree(dout));
  CU_CHECK(cuLibraryUnload(lib));
  CU_CHECK(cuModuleUnload(fmod));
  CU_CHECK(cuModuleUnload(pmod));
  CU_CHECK(cuModuleUnload(linked));
  CU_EXPECT(cuModuleGetFunction(&nope, fmod, "saxpy"), CUDA_ERROR_INVALID_HANDLE);
  // A function of an unloaded module is refused, not launched.
  CU_EXPECT(cuLaunchKernel(saxpy, 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr), CUDA_ERROR_INVALID_HANDLE);
  CU_EXPECT(cuFuncGetAttribute(&maxt, CU_FUNC_ATTRIBUTE_NUM_REGS, saxpy), CUDA_ERROR_INVALID_HANDLE);
  CU_CHECK(cuCtxSynchronize());  // and nothing was left behind for the next synchronising call
  // A reset of the primary context ends its modules and allocations.
  CUmodule rmod;
  CU_CHECK(cuModuleLoadData(&rmod, ptx.c_str()));
  CUfunction rfn;
  CU_CHECK(cuModuleGetFunction(&rfn, rmod, "saxpy"));
  CUdeviceptr rbuf;
  CU_CHECK(cuMemAlloc(&rbuf, 64));
  CU_CHECK(cuDevicePrimaryCtxReset(dev));
  CU_EXPECT(cuLaunchKernel(rfn, 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr), CUDA_ERROR_INVALID_HANDLE);
  CU_EXPECT(cuModuleGetFunction(&rfn, rmod, "saxpy"), CUDA_ERROR_INVALID_HANDLE);
  CU_EXPECT(cuMemGetAddressRange(&base, &range, rbuf), CUDA_ERROR_NOT_FOUND);
  CU_CHECK(cuDevicePrimaryCtxRetain(&primary, dev));
  CU_CHECK(cuDevicePrimaryCtxRelease(dev));
  std::printf("driver API test passed\n");
  return 0;
}
