// A program whose session is moved to another server while it waits
// (tests/server/migrate.sh). It builds state of every kind a checkpoint
// carries: device memory, module variables (initialised, written by a
// kernel, and __managed__), streams with flags and priorities, recorded
// events, an executable graph, a memory pool with an allocation from it, a
// CUDA array read through a texture object and written through a surface
// object, cuBLAS, cuFFT and cuRAND handles, pinned and managed memory,
// blocks a kernel took with malloc (the device-side heap) and kernel printf
// text not fetched yet; prints READY, waits until
// the file argv[1] exists, then checks that all of it is still there and
// still works, against values computed on the host.
// --pinned: also holds 300 MiB of pinned memory, past the data area (grown
// segments: a move carries them, a checkpoint file refuses them), filled
// before and checked after, through copies and through a kernel reading
// and writing it in place.
#include <cublas_v2.h>
#include <cufft.h>
#include <curand.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "check.cuh"

__device__ int d_table[4] = {7, 11, 13, 17};
__device__ float d_scale = 0.5f;
__device__ unsigned long long d_launches;
__managed__ int m_counter = 40;

__global__ void fill(float* x, int n, float base) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = base + float(i % 97) * d_scale + float(d_table[i & 3]);
  if (i == 0) {
    d_launches++;
    m_counter++;
  }
}

__global__ void say(int v) { printf("probe kernel says %d\n", v); }
// Three blocks from the device heap, each filled with a pattern; the middle one freed, so
// the heap holds a hole between two live blocks.
__global__ void grab(int** out) {
  for (int k = 0; k < 3; k++) {
    int* p = (int*)malloc(64 * (k + 1));
    if (p)
      for (int i = 0; i < 16 * (k + 1); i++) p[i] = 1000 * k + 5 * i + 3;
    out[k] = p;
  }
  free(out[1]);
  out[1] = nullptr;
}
// After the move: the live blocks' contents into vals, freed; then new blocks from the
// same heap, which must not overlap each other (the allocator's state came along).
__global__ void heap_after(int** in, int* vals, int** fresh) {
  for (int i = 0; i < 16; i++) vals[i] = in[0][i];
  for (int i = 0; i < 48; i++) vals[16 + i] = in[2][i];
  free(in[0]);
  free(in[2]);
  for (int k = 0; k < 4; k++) {
    fresh[k] = (int*)malloc(96);
    if (fresh[k])
      for (int i = 0; i < 24; i++) fresh[k][i] = k;
  }
  for (int k = 0; k < 4; k++) {
    int ok = fresh[k] != nullptr;
    for (int i = 0; ok && i < 24; i++) ok = fresh[k][i] == k;
    vals[64 + k] = ok;
    free(fresh[k]);
  }
}
// out[i] = the texture's texel (i % 16, i / 16) plus what the surface holds there, doubled back into it.
__global__ void texsurf(cudaTextureObject_t tex, cudaSurfaceObject_t surf, float* out) {
  const int x = threadIdx.x, y = threadIdx.y;
  const float t = tex2D<float>(tex, x + 0.5f, y + 0.5f);
  const float v = surf2Dread<float>(surf, x * sizeof(float), y);
  surf2Dwrite(v * 2.f, surf, x * sizeof(float), y);
  out[y * 16 + x] = t + v;
}
__global__ void double_strided(int* g, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) g[size_t(i) * 4096] *= 2;
}
__global__ void mark(float* x, int n, float v) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = v + float(i);
}

int main(int argc, char** argv) {
  EXPECT(argc >= 2, "usage: migrate_probe GO_FILE [--pinned]");
  const bool grow_pinned = argc >= 3 && !std::strcmp(argv[2], "--pinned");
  const int n = 1 << 18;
  float *a = nullptr, *b = nullptr, *c = nullptr;
  CHECK(cudaMalloc(&a, n * sizeof(float)));
  CHECK(cudaMalloc(&b, n * sizeof(float)));
  const int m = 96;  // c = a' * b' over m x m blocks
  CHECK(cudaMalloc(&c, m * m * sizeof(float)));
  cudaStream_t s1, s2;
  int lo = 0, hi = 0;
  CHECK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
  CHECK(cudaStreamCreateWithPriority(&s1, cudaStreamNonBlocking, hi));
  CHECK(cudaStreamCreate(&s2));
  cudaEvent_t e1, e2, unrecorded;
  CHECK(cudaEventCreate(&e1));
  CHECK(cudaEventCreateWithFlags(&e2, cudaEventDisableTiming));
  CHECK(cudaEventCreate(&unrecorded));
  fill<<<(n + 255) / 256, 256, 0, s1>>>(a, n, 1.0f);
  CHECK(cudaEventRecord(e1, s1));
  CHECK(cudaStreamWaitEvent(s2, e1, 0));
  fill<<<(n + 255) / 256, 256, 0, s2>>>(b, n, -2.0f);
  CHECK(cudaEventRecord(e2, s2));
  float* pinned = nullptr;
  CHECK(cudaMallocHost(&pinned, n * sizeof(float)));
  int* managed = nullptr;
  CHECK(cudaMallocManaged(&managed, 64 * sizeof(int)));
  for (int i = 0; i < 64; i++) managed[i] = i * i;
  cublasHandle_t blas;
  CHECK(cublasCreate(&blas) == CUBLAS_STATUS_SUCCESS ? cudaSuccess : cudaErrorUnknown);
  // A cuFFT plan and a cuRAND generator part-way through its sequence.
  const int nfft = 256, nrand = 1000;
  cufftHandle plan = 0;
  EXPECT(cufftPlan1d(&plan, nfft, CUFFT_C2C, 1) == CUFFT_SUCCESS, "cufftPlan1d");
  curandGenerator_t gen;
  EXPECT(curandCreateGenerator(&gen, CURAND_RNG_PSEUDO_PHILOX4_32_10) == CURAND_STATUS_SUCCESS, "curandCreate");
  EXPECT(curandSetPseudoRandomGeneratorSeed(gen, 2024) == CURAND_STATUS_SUCCESS, "seed");
  EXPECT(curandGenerateUniform(gen, c, nrand) == CURAND_STATUS_SUCCESS, "generate before");
  CHECK(cudaDeviceSynchronize());
  // Output the program has not fetched yet: it comes at the next sync, here or there.
  say<<<1, 1>>>(1234);
  // State no checkpoint carries yet, on request.
  // An executable graph (a kernel, a memset, an event), launched only after the move.
  float* gbuf = nullptr;
  CHECK(cudaMalloc(&gbuf, 64 * sizeof(float)));
  cudaGraph_t graph;
  cudaGraphExec_t exec = nullptr;
  CHECK(cudaStreamBeginCapture(s2, cudaStreamCaptureModeGlobal));
  CHECK(cudaMemsetAsync(gbuf + 32, 0, 32 * sizeof(float), s2));
  mark<<<1, 32, 0, s2>>>(gbuf, 32, 100.f);
  CHECK(cudaStreamEndCapture(s2, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  // A pool of its own with a release threshold, and memory from it.
  cudaMemPool_t pool;
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 0;
  CHECK(cudaMemPoolCreate(&pool, &props));
  uint64_t threshold = 1 << 20;
  CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
  int* pooled = nullptr;
  CHECK(cudaMallocFromPoolAsync(&pooled, 1024 * sizeof(int), pool, s1));
  std::vector<int> hp(1024);
  for (int i = 0; i < 1024; i++) hp[i] = 3 * i + 1;
  CHECK(cudaMemcpyAsync(pooled, hp.data(), 1024 * sizeof(int), cudaMemcpyHostToDevice, s1));
  CHECK(cudaStreamSynchronize(s1));
  // A 16x16 float array behind a texture object (point sampling) and a surface object.
  cudaChannelFormatDesc fmt = cudaCreateChannelDesc<float>();
  cudaArray_t array = nullptr;
  CHECK(cudaMallocArray(&array, &fmt, 16, 16, cudaArraySurfaceLoadStore));
  std::vector<float> texels(256);
  for (int i = 0; i < 256; i++) texels[i] = float(i) * 0.5f;
  CHECK(cudaMemcpy2DToArray(array, 0, 0, texels.data(), 16 * sizeof(float), 16 * sizeof(float), 16,
                            cudaMemcpyHostToDevice));
  cudaResourceDesc res{};
  res.resType = cudaResourceTypeArray;
  res.res.array.array = array;
  cudaTextureDesc td{};
  td.addressMode[0] = td.addressMode[1] = cudaAddressModeClamp;
  td.filterMode = cudaFilterModePoint;
  td.readMode = cudaReadModeElementType;
  cudaTextureObject_t tex = 0;
  cudaSurfaceObject_t surf = 0;
  CHECK(cudaCreateTextureObject(&tex, &res, &td, nullptr));
  CHECK(cudaCreateSurfaceObject(&surf, &res));
  int** heap_ptr = nullptr;
  void* grown = nullptr;
  CHECK(cudaMalloc(&heap_ptr, 3 * sizeof(int*)));
  grab<<<1, 1>>>(heap_ptr);
  CHECK(cudaDeviceSynchronize());
  int* heap_blocks[3];
  CHECK(cudaMemcpy(heap_blocks, heap_ptr, sizeof heap_blocks, cudaMemcpyDeviceToHost));
  EXPECT(heap_blocks[0] && heap_blocks[2] && !heap_blocks[1], "device malloc failed");
  const size_t grown_n = (300u << 20) / sizeof(int);
  if (grow_pinned) {
    CHECK(cudaMallocHost(&grown, grown_n * sizeof(int)));  // past a 256 MiB data area
    int* g = static_cast<int*>(grown);
    for (size_t i = 0; i < grown_n; i += 4096) g[i] = int(i / 4096) * 3 + 1;
    g[grown_n - 1] = 4242;
  }
  std::printf("READY\n");
  std::fflush(stdout);
  while (access(argv[1], F_OK) != 0) usleep(20000);

  // The same device memory, variables and objects, after the move.
  CHECK(cudaEventSynchronize(e2));
  CHECK(cudaStreamSynchronize(s1));
  EXPECT(cudaEventQuery(e1) == cudaSuccess, "event e1 not complete");
  std::vector<float> ha(n), hb(n);
  CHECK(cudaMemcpy(ha.data(), a, n * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(hb.data(), b, n * sizeof(float), cudaMemcpyDeviceToHost));
  const int table[4] = {7, 11, 13, 17};
  for (int i = 0; i < n; i++) {
    const float want = float(i % 97) * 0.5f + float(table[i & 3]);
    EXPECT(ha[i] == 1.0f + want && hb[i] == -2.0f + want, "element %d: %f %f", i, ha[i], hb[i]);
  }
  unsigned long long launches = 0;
  CHECK(cudaMemcpyFromSymbol(&launches, d_launches, sizeof launches));
  EXPECT(launches == 2, "d_launches %llu, wanted 2", launches);
  EXPECT(m_counter == 42, "m_counter %d, wanted 42", m_counter);
  for (int i = 0; i < 64; i++) EXPECT(managed[i] == i * i, "managed[%d] = %d", i, managed[i]);
  // Still working: the same kernels, streams, events and handles.
  float scale = 0.25f;
  CHECK(cudaMemcpyToSymbol(d_scale, &scale, sizeof scale));
  fill<<<(n + 255) / 256, 256, 0, s1>>>(a, n, 3.0f);
  CHECK(cudaGetLastError());
  CHECK(cudaEventRecord(e1, s1));
  CHECK(cudaStreamWaitEvent(s2, e1, 0));
  CHECK(cudaMemcpyAsync(pinned, a, n * sizeof(float), cudaMemcpyDeviceToHost, s2));
  CHECK(cudaStreamSynchronize(s2));
  for (int i = 0; i < n; i++) {
    const float want = 3.0f + float(i % 97) * 0.25f + float(table[i & 3]);
    EXPECT(pinned[i] == want, "after: element %d: %f, wanted %f", i, pinned[i], want);
  }
  EXPECT(m_counter == 43, "m_counter %d, wanted 43", m_counter);
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, e1, e1));
  const float one = 1.f, zero = 0.f;
  EXPECT(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, &one, a, m, b, m, &zero, c, m) == CUBLAS_STATUS_SUCCESS,
         "cublasSgemm");
  std::vector<float> hc(m * m);
  CHECK(cudaMemcpy(hc.data(), c, hc.size() * sizeof(float), cudaMemcpyDeviceToHost));
  std::vector<float> a2(n);
  for (int i = 0; i < n; i++) a2[i] = pinned[i];
  for (int j = 0; j < m; j++)
    for (int i = 0; i < m; i++) {
      double want = 0;
      for (int k = 0; k < m; k++) want += double(a2[k * m + i]) * double(hb[j * m + k]);
      EXPECT(std::fabs(hc[j * m + i] - want) <= 1e-3 * (1 + std::fabs(want)), "sgemm (%d,%d): %f vs %f", i, j,
             hc[j * m + i], want);
    }
  // The generator goes on where it was: its next values are a fresh one's
  // at the same seed and offset.
  std::vector<float> r1(nrand), r2(nrand);
  EXPECT(curandGenerateUniform(gen, c, nrand) == CURAND_STATUS_SUCCESS, "generate after");
  CHECK(cudaMemcpy(r1.data(), c, nrand * sizeof(float), cudaMemcpyDeviceToHost));
  curandGenerator_t fresh;
  EXPECT(curandCreateGenerator(&fresh, CURAND_RNG_PSEUDO_PHILOX4_32_10) == CURAND_STATUS_SUCCESS, "curandCreate");
  EXPECT(curandSetPseudoRandomGeneratorSeed(fresh, 2024) == CURAND_STATUS_SUCCESS, "seed");
  EXPECT(curandSetGeneratorOffset(fresh, nrand) == CURAND_STATUS_SUCCESS, "offset");
  EXPECT(curandGenerateUniform(fresh, c, nrand) == CURAND_STATUS_SUCCESS, "generate fresh");
  CHECK(cudaMemcpy(r2.data(), c, nrand * sizeof(float), cudaMemcpyDeviceToHost));
  for (int i = 0; i < nrand; i++) EXPECT(r1[i] == r2[i], "random value %d: %f after the move, %f fresh", i, r1[i], r2[i]);
  curandDestroyGenerator(fresh);
  curandDestroyGenerator(gen);
  // The plan made before the move transforms as a DFT does.
  std::vector<float2> x(nfft), y(nfft);
  for (int i = 0; i < nfft; i++) x[i] = make_float2(std::sin(0.1f * i), std::cos(0.37f * i));
  CHECK(cudaMemcpy(c, x.data(), nfft * sizeof(float2), cudaMemcpyHostToDevice));
  EXPECT(cufftExecC2C(plan, (cufftComplex*)c, (cufftComplex*)c, CUFFT_FORWARD) == CUFFT_SUCCESS, "cufftExecC2C");
  CHECK(cudaMemcpy(y.data(), c, nfft * sizeof(float2), cudaMemcpyDeviceToHost));
  for (int k = 0; k < nfft; k++) {
    double re = 0, im = 0;
    for (int j = 0; j < nfft; j++) {
      const double t = -2 * M_PI * double(j) * k / nfft;
      re += x[j].x * std::cos(t) - x[j].y * std::sin(t);
      im += x[j].x * std::sin(t) + x[j].y * std::cos(t);
    }
    EXPECT(std::fabs(y[k].x - re) < 1e-3 * nfft && std::fabs(y[k].y - im) < 1e-3 * nfft, "fft bin %d: %f,%f vs %f,%f",
           k, y[k].x, y[k].y, re, im);
  }
  cufftDestroy(plan);
  // The graph made before the move runs after it.
  std::vector<float> hg(64, -1.f);
  CHECK(cudaMemcpy(gbuf, hg.data(), 64 * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaGraphLaunch(exec, s2));
  CHECK(cudaStreamSynchronize(s2));
  CHECK(cudaMemcpy(hg.data(), gbuf, 64 * sizeof(float), cudaMemcpyDeviceToHost));
  for (int i = 0; i < 64; i++)
    EXPECT(hg[i] == (i < 32 ? 100.f + float(i) : 0.f), "graph output %d: %f", i, hg[i]);
  CHECK(cudaGraphDestroy(graph));
  // The pool's memory, its attribute, and the pool still serving.
  std::vector<int> hq(1024);
  CHECK(cudaMemcpy(hq.data(), pooled, 1024 * sizeof(int), cudaMemcpyDeviceToHost));
  for (int i = 0; i < 1024; i++) EXPECT(hq[i] == 3 * i + 1, "pooled[%d] = %d", i, hq[i]);
  uint64_t got = 0;
  CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &got));
  EXPECT(got == threshold, "pool release threshold %llu", (unsigned long long)got);
  CHECK(cudaFreeAsync(pooled, s1));
  int* again = nullptr;
  CHECK(cudaMallocFromPoolAsync(&again, 4096, pool, s1));
  CHECK(cudaFreeAsync(again, s1));
  CHECK(cudaStreamSynchronize(s1));
  CHECK(cudaMemPoolDestroy(pool));
  // The device heap: the blocks taken before the move, with their contents, and room
  // for new ones.
  int* heap_vals = nullptr;
  int** fresh_blocks = nullptr;
  CHECK(cudaMalloc(&heap_vals, 68 * sizeof(int)));
  CHECK(cudaMalloc(&fresh_blocks, 4 * sizeof(int*)));
  heap_after<<<1, 1>>>(heap_ptr, heap_vals, fresh_blocks);
  CHECK(cudaGetLastError());
  int hv[68];
  CHECK(cudaMemcpy(hv, heap_vals, sizeof hv, cudaMemcpyDeviceToHost));
  for (int i = 0; i < 16; i++) EXPECT(hv[i] == 5 * i + 3, "heap block 0 [%d] = %d", i, hv[i]);
  for (int i = 0; i < 48; i++) EXPECT(hv[16 + i] == 2000 + 5 * i + 3, "heap block 2 [%d] = %d", i, hv[16 + i]);
  for (int k = 0; k < 4; k++) EXPECT(hv[64 + k] == 1, "a new heap block %d after the move failed or overlaps", k);
  CHECK(cudaFree(heap_vals));
  CHECK(cudaFree(fresh_blocks));
  CHECK(cudaFree(heap_ptr));
  // The array, its texture and its surface, by the values the program holds.
  float* tsout = nullptr;
  CHECK(cudaMalloc(&tsout, 256 * sizeof(float)));
  texsurf<<<1, dim3(16, 16)>>>(tex, surf, tsout);
  CHECK(cudaGetLastError());
  std::vector<float> ts(256), after_surf(256);
  CHECK(cudaMemcpy(ts.data(), tsout, 256 * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy2DFromArray(after_surf.data(), 16 * sizeof(float), array, 0, 0, 16 * sizeof(float), 16,
                              cudaMemcpyDeviceToHost));
  for (int i = 0; i < 256; i++) {
    EXPECT(ts[i] == 2 * texels[i], "texture + surface read %d: %f, wanted %f", i, ts[i], 2 * texels[i]);
    EXPECT(after_surf[i] == 2 * texels[i], "surface write %d: %f", i, after_surf[i]);
  }
  CHECK(cudaDestroyTextureObject(tex));
  CHECK(cudaDestroySurfaceObject(surf));
  CHECK(cudaFreeArray(array));
  CHECK(cudaFree(tsout));
  if (grown) {
    // The grown pinned memory: still the program's values, reachable by copies and by
    // kernels (mapped: a kernel doubles every 4096th element in place).
    int* g = static_cast<int*>(grown);
    for (size_t i = 0; i < grown_n; i += 4096)
      EXPECT(g[i] == int(i / 4096) * 3 + 1, "grown pinned [%zu] = %d before the kernel", i, g[i]);
    int* dg = nullptr;
    CHECK(cudaHostGetDevicePointer(&dg, grown, 0));
    double_strided<<<int((grown_n / 4096 + 255) / 256), 256>>>(dg, int(grown_n / 4096));
    CHECK(cudaDeviceSynchronize());
    for (size_t i = 0; i < grown_n; i += 4096)
      EXPECT(g[i] == 2 * (int(i / 4096) * 3 + 1), "grown pinned [%zu] = %d after the kernel", i, g[i]);
    int* d = nullptr;
    CHECK(cudaMalloc(&d, 4096));
    CHECK(cudaMemcpy(d, g + grown_n - 1024, 4096, cudaMemcpyHostToDevice));
    int last = 0;
    CHECK(cudaMemcpy(&last, d + 1023, 4, cudaMemcpyDeviceToHost));
    EXPECT(last == 4242, "grown pinned memory copied to the device: %d", last);
    CHECK(cudaFree(d));
    CHECK(cudaFreeHost(grown));
  }
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaFree(gbuf));
  cublasDestroy(blas);
  CHECK(cudaFreeHost(pinned));
  CHECK(cudaFree(managed));
  CHECK(cudaFree(a));
  CHECK(cudaFree(b));
  CHECK(cudaFree(c));
  std::printf("PASS migrate_probe\n");
  return 0;
}
