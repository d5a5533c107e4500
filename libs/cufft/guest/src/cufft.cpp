// libcufft.so.12 drop-in: cuFFT plans and executions forwarded to
// wormhole-server over the connection of the process's libcudart.so.13
// (Wormhole's drop-in), so transforms run in the same server session as
// cudaMalloc and kernel launches, in issue order.
//
// A cufftHandle is an index into this library's plan table; the plan
// itself (sizes, layout, the backend's FFTW or cuFFT plan) lives in the
// server, made by cufftMakePlan* (FftPlan, synchronous: its cufftResult comes
// back). Arguments are checked here first, as cuFFT does, and again by the
// server (the guest is not trusted). Executions are posted: they return at
// once and a device fault surfaces at the next synchronising CUDA call, as
// on a GPU. The server's plan owns its work area, so cuFFT's work area
// calls are accepted and the reported work size is the server's (0 on the
// sim device).
//
// cufftXt: the single-GPU part of the Xt API (cufftXtMakePlanMany with its
// data types, half and bf16 included; cufftXtExec; sizes and work-area
// policy) maps onto the same plans. The multi-GPU part (cufftXtSetGPUs,
// descriptors, cufftXtMemcpy) and callbacks (device code cuFFT would call
// from its kernels) return CUFFT_NOT_SUPPORTED and log their names.
#include <cuda_runtime_api.h>
#include <cufft.h>
#include <cufftXt.h>
#include <library_types.h>

#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "wormhole/library_call.hpp"
#include "wormhole/proto/wire.hpp"

extern "C" {
void wh_cufft_unsupported(const char* name);
}

using namespace wh::proto;

namespace {

using wh::guest::lib::call;
using wh::guest::lib::log_once;
using wh::guest::lib::post;

cufftResult status(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return CUFFT_SUCCESS;
    case cudaErrorInvalidValue: return CUFFT_INVALID_VALUE;
    case cudaErrorMemoryAllocation: return CUFFT_ALLOC_FAILED;
    case cudaErrorNotSupported: return CUFFT_NOT_SUPPORTED;
    case cudaErrorInvalidResourceHandle: return CUFFT_INVALID_PLAN;
    case cudaErrorInitializationError:
    case cudaErrorDevicesUnavailable: return CUFFT_SETUP_FAILED;
    default: return CUFFT_EXEC_FAILED;
  }
}

struct Plan {
  uint64_t server = 0;  // FftPlan's handle; 0 until cufftMakePlan*
  int type = 0;
  uint32_t storage = 0;  // kFftHalf / kFftBf16 (cufftXtMakePlanMany), else 0
  cudaStream_t stream = nullptr;
  size_t work = 0;
};

std::mutex g_mu;
std::map<int, Plan> g_plans;
int g_next = 1;

// The plan of a handle, copied out under the lock (a plan is small).
bool get_plan(cufftHandle h, Plan* out) {
  std::lock_guard lk(g_mu);
  auto it = g_plans.find(h);
  if (it == g_plans.end()) return false;
  *out = it->second;
  return true;
}

bool valid_type(int t) {
  return t == CUFFT_R2C || t == CUFFT_C2R || t == CUFFT_C2C || t == CUFFT_D2Z || t == CUFFT_Z2D || t == CUFFT_Z2Z;
}

// cuFFT's own argument checks, before anything travels.
cufftResult check_args(int rank, const long long* n, int type, long long batch) {
  if (!valid_type(type)) return CUFFT_INVALID_TYPE;
  if (rank < 1 || rank > 3 || !n || batch < 1) return CUFFT_INVALID_SIZE;
  for (int k = 0; k < rank; k++)
    if (n[k] < 1) return CUFFT_INVALID_SIZE;
  return CUFFT_SUCCESS;
}

// Makes the server's plan for guest plan `h`. inembed/onembed both given:
// the advanced layout; otherwise the basic one (strides and dists ignored).
cufftResult make_plan(cufftHandle h, int rank, const long long* n, const long long* inembed, long long istride,
                      long long idist, const long long* onembed, long long ostride, long long odist, int type,
                      long long batch, size_t* work, uint32_t storage = 0) {
  if (cufftResult r = check_args(rank, n, type, batch); r != CUFFT_SUCCESS) return r;
  Plan p;
  if (!get_plan(h, &p)) return CUFFT_INVALID_PLAN;
  if (p.server) return CUFFT_INVALID_PLAN;  // cuFFT plans a handle once
  FftPlanReq rq{};
  rq.rank = rank;
  rq.type = type;
  rq.batch = batch;
  rq.flags = storage;
  for (int k = 0; k < rank; k++) rq.n[k] = n[k];
  if (inembed && onembed) {
    if (istride < 1 || ostride < 1 || idist < 1 || odist < 1) return CUFFT_INVALID_VALUE;
    rq.flags |= kFftAdvanced;
    for (int k = 0; k < rank; k++) rq.inembed[k] = inembed[k], rq.onembed[k] = onembed[k];
    rq.istride = istride, rq.idist = idist, rq.ostride = ostride, rq.odist = odist;
  }
  FftPlanResp rs{};
  cudaError_t e = call<Op::FftPlan>(rq, &rs);
  if (e != cudaSuccess) return rs.result ? cufftResult(rs.result) : status(e);
  std::lock_guard lk(g_mu);
  auto it = g_plans.find(h);
  if (it == g_plans.end()) {  // destroyed meanwhile by another thread
    FftDestroyReq d{rs.handle};
    FftDestroyResp dr{};
    call<Op::FftDestroy>(d, &dr);
    return CUFFT_INVALID_PLAN;
  }
  it->second.server = rs.handle;
  it->second.type = type;
  it->second.storage = storage;
  it->second.work = rs.work_size;
  if (work) *work = rs.work_size;
  return CUFFT_SUCCESS;
}

// int arrays of the 32-bit API as the 64-bit ones.
struct Dims {
  long long v[3] = {0, 0, 0};
  const long long* p = nullptr;
  Dims(int rank, const int* a) {
    if (!a || rank < 1 || rank > 3) return;
    for (int k = 0; k < rank; k++) v[k] = a[k];
    p = v;
  }
};

cufftResult create_and_make(cufftHandle* plan, int rank, const long long* n, const long long* inembed,
                            long long istride, long long idist, const long long* onembed, long long ostride,
                            long long odist, int type, long long batch) {
  if (!plan) return CUFFT_INVALID_VALUE;
  if (cufftResult r = cufftCreate(plan); r != CUFFT_SUCCESS) return r;
  cufftResult r = make_plan(*plan, rank, n, inembed, istride, idist, onembed, ostride, odist, type, batch, nullptr);
  if (r != CUFFT_SUCCESS) cufftDestroy(*plan);
  return r;
}

cufftResult estimate(int rank, const long long* n, int type, long long batch, size_t* work) {
  if (!work) return CUFFT_INVALID_VALUE;
  if (cufftResult r = check_args(rank, n, type, batch); r != CUFFT_SUCCESS) return r;
  *work = 0;
  return CUFFT_SUCCESS;
}

// The cufftType and 16-bit storage flag of cufftXtMakePlanMany's data
// types (cuFFT's table: the execution type is the complex type of the
// precision; input and output make the kind).
bool xt_kind(cudaDataType in, cudaDataType out, cudaDataType ex, int* type, uint32_t* storage) {
  struct Row {
    cudaDataType real, cplx;
    int r2c, c2r, c2c;
    uint32_t storage;
  };
  static const Row rows[] = {{CUDA_R_32F, CUDA_C_32F, CUFFT_R2C, CUFFT_C2R, CUFFT_C2C, 0},
                             {CUDA_R_64F, CUDA_C_64F, CUFFT_D2Z, CUFFT_Z2D, CUFFT_Z2Z, 0},
                             {CUDA_R_16F, CUDA_C_16F, CUFFT_R2C, CUFFT_C2R, CUFFT_C2C, kFftHalf},
                             {CUDA_R_16BF, CUDA_C_16BF, CUFFT_R2C, CUFFT_C2R, CUFFT_C2C, kFftBf16}};
  for (const Row& r : rows) {
    if (ex != r.cplx) continue;
    *storage = r.storage;
    if (in == r.cplx && out == r.cplx) return *type = r.c2c, true;
    if (in == r.real && out == r.cplx) return *type = r.r2c, true;
    if (in == r.cplx && out == r.real) return *type = r.c2r, true;
    return false;
  }
  return false;
}

// type < 0: cufftXtExec, which runs whatever the plan is.
cufftResult exec(cufftHandle h, int type, const void* in, void* out, int direction) {
  Plan p;
  if (!get_plan(h, &p) || !p.server) return CUFFT_INVALID_PLAN;
  if (type < 0)
    type = p.type;
  else if (p.type != type || p.storage)
    return CUFFT_INVALID_PLAN;  // a typed cufftExec* runs only plans of its own type
  if (!in || !out) return CUFFT_INVALID_VALUE;
  const bool complex = type == CUFFT_C2C || type == CUFFT_Z2Z;
  if (complex && direction != CUFFT_FORWARD && direction != CUFFT_INVERSE) return CUFFT_INVALID_VALUE;
  FftExecReq rq{};
  rq.handle = p.server;
  rq.stream = reinterpret_cast<uint64_t>(p.stream);
  rq.idata = reinterpret_cast<uint64_t>(in);
  rq.odata = reinterpret_cast<uint64_t>(out);
  rq.type = type;
  rq.direction = complex ? direction : 0;
  return status(post<Op::FftExec>(rq));
}

}  // namespace

extern "C" {

void wh_cufft_unsupported(const char* name) {
  log_once(std::string(name) + " is not forwarded by Wormhole: returning CUFFT_NOT_SUPPORTED");
}

// ------------------------------------------------------------ plans

cufftResult cufftCreate(cufftHandle* handle) {
  if (!handle) return CUFFT_INVALID_VALUE;
  std::lock_guard lk(g_mu);
  if (g_next == INT32_MAX) return CUFFT_ALLOC_FAILED;
  *handle = g_next++;
  g_plans[*handle] = Plan{};
  return CUFFT_SUCCESS;
}

cufftResult cufftDestroy(cufftHandle plan) {
  Plan p;
  {
    std::lock_guard lk(g_mu);
    auto it = g_plans.find(plan);
    if (it == g_plans.end()) return CUFFT_INVALID_PLAN;
    p = it->second;
    g_plans.erase(it);
  }
  if (!p.server) return CUFFT_SUCCESS;
  FftDestroyReq rq{p.server};
  FftDestroyResp rs{};
  return status(call<Op::FftDestroy>(rq, &rs));
}

cufftResult cufftMakePlanMany64(cufftHandle plan, int rank, long long* n, long long* inembed, long long istride,
                                long long idist, long long* onembed, long long ostride, long long odist,
                                cufftType type, long long batch, size_t* workSize) {
  return make_plan(plan, rank, n, inembed, istride, idist, onembed, ostride, odist, type, batch, workSize);
}

cufftResult cufftMakePlanMany(cufftHandle plan, int rank, int* n, int* inembed, int istride, int idist, int* onembed,
                              int ostride, int odist, cufftType type, int batch, size_t* workSize) {
  Dims N(rank, n), I(rank, inembed), O(rank, onembed);
  if (!n) return CUFFT_INVALID_VALUE;
  return make_plan(plan, rank, N.p, I.p, istride, idist, O.p, ostride, odist, type, batch, workSize);
}

cufftResult cufftMakePlan1d(cufftHandle plan, int nx, cufftType type, int batch, size_t* workSize) {
  long long n[1] = {nx};
  return make_plan(plan, 1, n, nullptr, 1, 0, nullptr, 1, 0, type, batch, workSize);
}
cufftResult cufftMakePlan2d(cufftHandle plan, int nx, int ny, cufftType type, size_t* workSize) {
  long long n[2] = {nx, ny};
  return make_plan(plan, 2, n, nullptr, 1, 0, nullptr, 1, 0, type, 1, workSize);
}
cufftResult cufftMakePlan3d(cufftHandle plan, int nx, int ny, int nz, cufftType type, size_t* workSize) {
  long long n[3] = {nx, ny, nz};
  return make_plan(plan, 3, n, nullptr, 1, 0, nullptr, 1, 0, type, 1, workSize);
}

cufftResult cufftPlan1d(cufftHandle* plan, int nx, cufftType type, int batch) {
  long long n[1] = {nx};
  return create_and_make(plan, 1, n, nullptr, 1, 0, nullptr, 1, 0, type, batch);
}
cufftResult cufftPlan2d(cufftHandle* plan, int nx, int ny, cufftType type) {
  long long n[2] = {nx, ny};
  return create_and_make(plan, 2, n, nullptr, 1, 0, nullptr, 1, 0, type, 1);
}
cufftResult cufftPlan3d(cufftHandle* plan, int nx, int ny, int nz, cufftType type) {
  long long n[3] = {nx, ny, nz};
  return create_and_make(plan, 3, n, nullptr, 1, 0, nullptr, 1, 0, type, 1);
}
cufftResult cufftPlanMany(cufftHandle* plan, int rank, int* n, int* inembed, int istride, int idist, int* onembed,
                          int ostride, int odist, cufftType type, int batch) {
  Dims N(rank, n), I(rank, inembed), O(rank, onembed);
  if (!n) return CUFFT_INVALID_VALUE;
  return create_and_make(plan, rank, N.p, I.p, istride, idist, O.p, ostride, odist, type, batch);
}

// ------------------------------------------------------------ work sizes

cufftResult cufftEstimate1d(int nx, cufftType type, int batch, size_t* workSize) {
  long long n[1] = {nx};
  return estimate(1, n, type, batch, workSize);
}
cufftResult cufftEstimate2d(int nx, int ny, cufftType type, size_t* workSize) {
  long long n[2] = {nx, ny};
  return estimate(2, n, type, 1, workSize);
}
cufftResult cufftEstimate3d(int nx, int ny, int nz, cufftType type, size_t* workSize) {
  long long n[3] = {nx, ny, nz};
  return estimate(3, n, type, 1, workSize);
}
cufftResult cufftEstimateMany(int rank, int* n, int*, int, int, int*, int, int, cufftType type, int batch,
                              size_t* workSize) {
  Dims N(rank, n);
  return estimate(rank, N.p, type, batch, workSize);
}
cufftResult cufftGetSize1d(cufftHandle h, int nx, cufftType type, int batch, size_t* workSize) {
  Plan p;
  if (!get_plan(h, &p)) return CUFFT_INVALID_PLAN;
  return cufftEstimate1d(nx, type, batch, workSize);
}
cufftResult cufftGetSize2d(cufftHandle h, int nx, int ny, cufftType type, size_t* workSize) {
  Plan p;
  if (!get_plan(h, &p)) return CUFFT_INVALID_PLAN;
  return cufftEstimate2d(nx, ny, type, workSize);
}
cufftResult cufftGetSize3d(cufftHandle h, int nx, int ny, int nz, cufftType type, size_t* workSize) {
  Plan p;
  if (!get_plan(h, &p)) return CUFFT_INVALID_PLAN;
  return cufftEstimate3d(nx, ny, nz, type, workSize);
}
cufftResult cufftGetSizeMany(cufftHandle h, int rank, int* n, int* inembed, int istride, int idist, int* onembed,
                             int ostride, int odist, cufftType type, int batch, size_t* workSize) {
  Plan p;
  if (!get_plan(h, &p)) return CUFFT_INVALID_PLAN;
  return cufftEstimateMany(rank, n, inembed, istride, idist, onembed, ostride, odist, type, batch, workSize);
}
cufftResult cufftGetSizeMany64(cufftHandle h, int rank, long long* n, long long*, long long, long long, long long*,
                               long long, long long, cufftType type, long long batch, size_t* workSize) {
  Plan p;
  if (!get_plan(h, &p)) return CUFFT_INVALID_PLAN;
  return estimate(rank, n, type, batch, workSize);
}
cufftResult cufftGetSize(cufftHandle h, size_t* workSize) {
  Plan p;
  if (!get_plan(h, &p)) return CUFFT_INVALID_PLAN;
  if (!workSize) return CUFFT_INVALID_VALUE;
  *workSize = p.work;
  return CUFFT_SUCCESS;
}

// The server's plan owns its work area; a user's area (or none) is accepted.
cufftResult cufftSetAutoAllocation(cufftHandle h, int) {
  Plan p;
  return get_plan(h, &p) ? CUFFT_SUCCESS : CUFFT_INVALID_PLAN;
}
cufftResult cufftSetWorkArea(cufftHandle h, void*) {
  Plan p;
  return get_plan(h, &p) ? CUFFT_SUCCESS : CUFFT_INVALID_PLAN;
}

cufftResult cufftSetStream(cufftHandle h, cudaStream_t stream) {
  std::lock_guard lk(g_mu);
  auto it = g_plans.find(h);
  if (it == g_plans.end()) return CUFFT_INVALID_PLAN;
  it->second.stream = stream;
  return CUFFT_SUCCESS;
}

cufftResult cufftGetVersion(int* version) {
  if (!version) return CUFFT_INVALID_VALUE;
  *version = CUFFT_VERSION;
  return CUFFT_SUCCESS;
}

cufftResult cufftGetProperty(libraryPropertyType type, int* value) {
  if (!value) return CUFFT_INVALID_VALUE;
  switch (type) {
    case MAJOR_VERSION: *value = CUFFT_VER_MAJOR; return CUFFT_SUCCESS;
    case MINOR_VERSION: *value = CUFFT_VER_MINOR; return CUFFT_SUCCESS;
    case PATCH_LEVEL: *value = CUFFT_VER_PATCH; return CUFFT_SUCCESS;
    default: return CUFFT_INVALID_TYPE;
  }
}

// ------------------------------------------------------------ executions

cufftResult cufftExecC2C(cufftHandle plan, cufftComplex* idata, cufftComplex* odata, int direction) {
  return exec(plan, CUFFT_C2C, idata, odata, direction);
}
cufftResult cufftExecR2C(cufftHandle plan, cufftReal* idata, cufftComplex* odata) {
  return exec(plan, CUFFT_R2C, idata, odata, 0);
}
cufftResult cufftExecC2R(cufftHandle plan, cufftComplex* idata, cufftReal* odata) {
  return exec(plan, CUFFT_C2R, idata, odata, 0);
}
cufftResult cufftExecZ2Z(cufftHandle plan, cufftDoubleComplex* idata, cufftDoubleComplex* odata, int direction) {
  return exec(plan, CUFFT_Z2Z, idata, odata, direction);
}
cufftResult cufftExecD2Z(cufftHandle plan, cufftDoubleReal* idata, cufftDoubleComplex* odata) {
  return exec(plan, CUFFT_D2Z, idata, odata, 0);
}
cufftResult cufftExecZ2D(cufftHandle plan, cufftDoubleComplex* idata, cufftDoubleReal* odata) {
  return exec(plan, CUFFT_Z2D, idata, odata, 0);
}

// ------------------------------------------------------------ cufftXt (one GPU)

cufftResult cufftXtMakePlanMany(cufftHandle plan, int rank, long long* n, long long* inembed, long long istride,
                                long long idist, cudaDataType inputtype, long long* onembed, long long ostride,
                                long long odist, cudaDataType outputtype, long long batch, size_t* workSize,
                                cudaDataType executiontype) {
  int type;
  uint32_t storage;
  if (!xt_kind(inputtype, outputtype, executiontype, &type, &storage)) return CUFFT_INVALID_TYPE;
  return make_plan(plan, rank, n, inembed, istride, idist, onembed, ostride, odist, type, batch, workSize, storage);
}

cufftResult cufftXtGetSizeMany(cufftHandle h, int rank, long long* n, long long*, long long, long long,
                               cudaDataType inputtype, long long*, long long, long long, cudaDataType outputtype,
                               long long batch, size_t* workSize, cudaDataType executiontype) {
  Plan p;
  if (!get_plan(h, &p)) return CUFFT_INVALID_PLAN;
  int type;
  uint32_t storage;
  if (!xt_kind(inputtype, outputtype, executiontype, &type, &storage)) return CUFFT_INVALID_TYPE;
  return estimate(rank, n, type, batch, workSize);
}

cufftResult cufftXtExec(cufftHandle plan, void* input, void* output, int direction) {
  return exec(plan, -1, input, output, direction);
}

// The server's plan owns its work area whatever the policy (as
// cufftSetWorkArea); workSize is reserved by cuFFT and not touched.
cufftResult cufftXtSetWorkAreaPolicy(cufftHandle h, cufftXtWorkAreaPolicy policy, size_t*) {
  Plan p;
  if (!get_plan(h, &p)) return CUFFT_INVALID_PLAN;
  if (policy != CUFFT_WORKAREA_MINIMAL && policy != CUFFT_WORKAREA_USER && policy != CUFFT_WORKAREA_PERFORMANCE)
    return CUFFT_INVALID_VALUE;
  return CUFFT_SUCCESS;
}

}  // extern "C"
