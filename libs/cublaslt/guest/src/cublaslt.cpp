// libcublasLt.so.13 drop-in: cuBLASLt forwarded to wormhole-server over the
// connection of the process's libcudart.so.13 (Wormhole's drop-in), so
// matmuls run in the same server session as cudaMalloc and kernel
// launches, in issue order.
//
// Matmul descriptors, matrix layouts, preferences and algorithms are plain
// data kept here, in the opaque structs of cublasLt.h (so the *Init
// functions on user memory work too); a handle is a server object
// (LtCreate). cublasLtMatmul resolves everything into one LtMatmul request
// (host alpha/beta by value), runs the same checks the server will
// (proto/cublaslt_check.hpp) to return the precise status at once, and posts
// it: it returns without waiting, and a device fault surfaces at the next
// synchronising CUDA call, as on a GPU.
//
// The sim device offers one algorithm (id 0: OpenBLAS sgemm plus a host
// epilogue, no workspace); heuristics, algorithm ids, init, check and
// capability queries describe it. On the cuda backend the server lets the
// real cuBLASLt choose its own algorithm.
#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <library_types.h>

#include <cstdio>
#include <cstring>
#include <mutex>
#include <new>
#include <set>
#include <string>

#include "wormhole/proto/cublaslt_check.hpp"
#include "wormhole/cublas_status.hpp"
#include "wormhole/library_call.hpp"
#include "wormhole/lt_handle.hpp"
#include "wormhole/proto/wire.hpp"

extern "C" {
void wh_cublaslt_unsupported(const char* name);
}

using namespace wh::proto;


namespace {

constexpr uint64_t kHandleMagic = kLtHandleMagic;
constexpr uint64_t kAlgoMagic = 0x6f676c414c484d57ull;    // "WMHLAlgo"
constexpr uint32_t kDescMagic = 0x4c54444d, kLayoutMagic = 0x4c544c59, kPrefMagic = 0x4c545046;

using wh::guest::lib::call;
using wh::guest::lib::log_once;
using wh::guest::lib::post;

using wh::guest::blas::status;  // and its LtCheck twin below
cublasStatus_t status(LtCheck c) {
  return c == LtCheck::Ok ? CUBLAS_STATUS_SUCCESS
         : c == LtCheck::NotSupported ? CUBLAS_STATUS_NOT_SUPPORTED
                                      : CUBLAS_STATUS_INVALID_VALUE;
}

bool valid_handle(cublasLtHandle_t h) { return h && h->magic == kHandleMagic && h->server; }

// ---------------------------------------------------------------- attribute tables

// One attribute of a descriptor: where it lives and its exact size.
struct Attr {
  int id;
  size_t off, size;
};

template <class T, size_t N>
cublasStatus_t attr_set(T* obj, const Attr (&tab)[N], int id, const void* buf, size_t size) {
  if (!obj) return CUBLAS_STATUS_INVALID_VALUE;
  for (const Attr& a : tab)
    if (a.id == id) {
      if (!buf || size != a.size) return CUBLAS_STATUS_INVALID_VALUE;
      std::memcpy(reinterpret_cast<uint8_t*>(obj) + a.off, buf, a.size);
      return CUBLAS_STATUS_SUCCESS;
    }
  return CUBLAS_STATUS_INVALID_VALUE;
}
template <class T, size_t N>
cublasStatus_t attr_get(const T* obj, const Attr (&tab)[N], int id, void* buf, size_t size, size_t* written) {
  if (!obj) return CUBLAS_STATUS_INVALID_VALUE;
  for (const Attr& a : tab)
    if (a.id == id) {
      if (size == 0) {
        if (!written) return CUBLAS_STATUS_INVALID_VALUE;
        *written = a.size;
        return CUBLAS_STATUS_SUCCESS;
      }
      if (!buf || size != a.size) return CUBLAS_STATUS_INVALID_VALUE;
      std::memcpy(buf, reinterpret_cast<const uint8_t*>(obj) + a.off, a.size);
      if (written) *written = a.size;
      return CUBLAS_STATUS_SUCCESS;
    }
  return CUBLAS_STATUS_INVALID_VALUE;
}
#define WH_ATTR(id, T, field) {id, offsetof(T, field), sizeof(T::field)}

// ---------------------------------------------------------------- plain-data objects

// The struct behind an opaque pointer, or null when it is not one of ours
// (its magic is checked, so a destroyed or foreign object is refused).
template <class T, class P>
T* object_of(P p, decltype(T::magic) magic) {
  auto* o = reinterpret_cast<T*>(p);
  return o && o->magic == magic ? o : nullptr;
}

// *Create: the opaque struct of cublasLt.h on the heap, set up by `init`
// (the matching *Init_internal, which cannot fail on a full-size struct).
template <class Opaque, class Init>
cublasStatus_t create_opaque(Opaque** out, Init init) {
  if (!out) return CUBLAS_STATUS_INVALID_VALUE;
  auto* o = new (std::nothrow) Opaque;
  if (!o) return CUBLAS_STATUS_ALLOC_FAILED;
  init(o);
  *out = o;
  return CUBLAS_STATUS_SUCCESS;
}

// *Destroy: null is a no-op, anything else must be one of ours (`obj`).
template <class T, class Opaque>
cublasStatus_t destroy_opaque(T* obj, Opaque* o) {
  if (!obj) return o ? CUBLAS_STATUS_INVALID_VALUE : CUBLAS_STATUS_SUCCESS;
  obj->magic = 0;
  delete o;
  return CUBLAS_STATUS_SUCCESS;
}

// ---------------------------------------------------------------- matmul descriptor

struct Desc {
  uint32_t magic;
  int32_t compute, scale_type, pointer_mode, transa, transb, transc, fill_mode;
  uint32_t epilogue;
  int32_t sm_count, aux_type, bias_type;
  int32_t a_scale_mode, b_scale_mode, c_scale_mode, d_scale_mode, aux_scale_mode, d_out_scale_mode;
  int8_t fast_accum;
  const void* bias;
  int64_t bias_stride;
  void* aux;
  int64_t aux_ld, aux_stride, alpha_stride;
  const void *a_scale, *b_scale, *c_scale, *d_scale;
  void* amax_d;
  void *aux_scale, *aux_amax, *d_out_scale;
  void* emulation;
};
static_assert(sizeof(Desc) <= sizeof(cublasLtMatmulDescOpaque_t));

const Attr kDescAttrs[] = {
    WH_ATTR(CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, Desc, compute),
    WH_ATTR(CUBLASLT_MATMUL_DESC_SCALE_TYPE, Desc, scale_type),
    WH_ATTR(CUBLASLT_MATMUL_DESC_POINTER_MODE, Desc, pointer_mode),
    WH_ATTR(CUBLASLT_MATMUL_DESC_TRANSA, Desc, transa),
    WH_ATTR(CUBLASLT_MATMUL_DESC_TRANSB, Desc, transb),
    WH_ATTR(CUBLASLT_MATMUL_DESC_TRANSC, Desc, transc),
    WH_ATTR(CUBLASLT_MATMUL_DESC_FILL_MODE, Desc, fill_mode),
    WH_ATTR(CUBLASLT_MATMUL_DESC_EPILOGUE, Desc, epilogue),
    WH_ATTR(CUBLASLT_MATMUL_DESC_BIAS_POINTER, Desc, bias),
    WH_ATTR(CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, Desc, bias_stride),
    WH_ATTR(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, Desc, aux),
    WH_ATTR(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, Desc, aux_ld),
    WH_ATTR(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, Desc, aux_stride),
    WH_ATTR(CUBLASLT_MATMUL_DESC_ALPHA_VECTOR_BATCH_STRIDE, Desc, alpha_stride),
    WH_ATTR(CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, Desc, sm_count),
    WH_ATTR(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, Desc, a_scale),
    WH_ATTR(CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, Desc, b_scale),
    WH_ATTR(CUBLASLT_MATMUL_DESC_C_SCALE_POINTER, Desc, c_scale),
    WH_ATTR(CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, Desc, d_scale),
    WH_ATTR(CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, Desc, amax_d),
    WH_ATTR(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, Desc, aux_type),
    WH_ATTR(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_POINTER, Desc, aux_scale),
    WH_ATTR(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_AMAX_POINTER, Desc, aux_amax),
    WH_ATTR(CUBLASLT_MATMUL_DESC_FAST_ACCUM, Desc, fast_accum),
    WH_ATTR(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, Desc, bias_type),
    WH_ATTR(CUBLASLT_MATMUL_DESC_A_SCALE_MODE, Desc, a_scale_mode),
    WH_ATTR(CUBLASLT_MATMUL_DESC_B_SCALE_MODE, Desc, b_scale_mode),
    WH_ATTR(CUBLASLT_MATMUL_DESC_C_SCALE_MODE, Desc, c_scale_mode),
    WH_ATTR(CUBLASLT_MATMUL_DESC_D_SCALE_MODE, Desc, d_scale_mode),
    WH_ATTR(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_MODE, Desc, aux_scale_mode),
    WH_ATTR(CUBLASLT_MATMUL_DESC_D_OUT_SCALE_POINTER, Desc, d_out_scale),
    WH_ATTR(CUBLASLT_MATMUL_DESC_D_OUT_SCALE_MODE, Desc, d_out_scale_mode),
    WH_ATTR(CUBLASLT_MATMUL_DESC_EMULATION_DESCRIPTOR, Desc, emulation),
};

Desc* desc_of(cublasLtMatmulDesc_t d) { return object_of<Desc>(d, kDescMagic); }

// ---------------------------------------------------------------- matrix layout

struct Layout {
  uint32_t magic;
  uint32_t type;
  int32_t order, batch;
  uint64_t rows, cols;
  int64_t ld, stride, plane_offset;
  uint32_t batch_mode;
};
static_assert(sizeof(Layout) <= sizeof(cublasLtMatrixLayoutOpaque_t));

const Attr kLayoutAttrs[] = {
    WH_ATTR(CUBLASLT_MATRIX_LAYOUT_TYPE, Layout, type),
    WH_ATTR(CUBLASLT_MATRIX_LAYOUT_ORDER, Layout, order),
    WH_ATTR(CUBLASLT_MATRIX_LAYOUT_ROWS, Layout, rows),
    WH_ATTR(CUBLASLT_MATRIX_LAYOUT_COLS, Layout, cols),
    WH_ATTR(CUBLASLT_MATRIX_LAYOUT_LD, Layout, ld),
    WH_ATTR(CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, Layout, batch),
    WH_ATTR(CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, Layout, stride),
    WH_ATTR(CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET, Layout, plane_offset),
    WH_ATTR(CUBLASLT_MATRIX_LAYOUT_BATCH_MODE, Layout, batch_mode),
};

Layout* layout_of(cublasLtMatrixLayout_t l) { return object_of<Layout>(l, kLayoutMagic); }

// One operand of a request: its pointer and layout (a size past INT64_MAX
// becomes -1, which the checks refuse).
void put(const Layout* l, const void* p, uint64_t* ptr, int64_t* rows, int64_t* cols, int64_t* ld, int64_t* stride,
         int32_t* type, int32_t* order, int32_t* batch) {
  *ptr = reinterpret_cast<uint64_t>(p);
  *rows = l->rows > uint64_t(INT64_MAX) ? -1 : int64_t(l->rows);
  *cols = l->cols > uint64_t(INT64_MAX) ? -1 : int64_t(l->cols);
  *ld = l->ld, *stride = l->stride, *type = int32_t(l->type), *order = l->order, *batch = l->batch;
}

// ---------------------------------------------------------------- preference

struct Pref {
  uint32_t magic;
  uint32_t search_mode, reduction_mask, align_a, align_b, align_c, align_d;
  float max_waves;
  uint64_t max_workspace, impl_mask;
};
static_assert(sizeof(Pref) <= sizeof(cublasLtMatmulPreferenceOpaque_t));

const Attr kPrefAttrs[] = {
    WH_ATTR(CUBLASLT_MATMUL_PREF_SEARCH_MODE, Pref, search_mode),
    WH_ATTR(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, Pref, max_workspace),
    WH_ATTR(CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, Pref, reduction_mask),
    WH_ATTR(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, Pref, align_a),
    WH_ATTR(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, Pref, align_b),
    WH_ATTR(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, Pref, align_c),
    WH_ATTR(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, Pref, align_d),
    WH_ATTR(CUBLASLT_MATMUL_PREF_MAX_WAVES_COUNT, Pref, max_waves),
    WH_ATTR(CUBLASLT_MATMUL_PREF_IMPL_MASK, Pref, impl_mask),
};

Pref* pref_of(cublasLtMatmulPreference_t p) { return object_of<Pref>(p, kPrefMagic); }

// ---------------------------------------------------------------- transform descriptor

struct TDesc {
  uint32_t magic;
  int32_t scale_type, pointer_mode, transa, transb;
};
static_assert(sizeof(TDesc) <= sizeof(cublasLtMatrixTransformDescOpaque_t));
constexpr uint32_t kTDescMagic = 0x4c545444;

const Attr kTDescAttrs[] = {
    WH_ATTR(CUBLASLT_MATRIX_TRANSFORM_DESC_SCALE_TYPE, TDesc, scale_type),
    WH_ATTR(CUBLASLT_MATRIX_TRANSFORM_DESC_POINTER_MODE, TDesc, pointer_mode),
    WH_ATTR(CUBLASLT_MATRIX_TRANSFORM_DESC_TRANSA, TDesc, transa),
    WH_ATTR(CUBLASLT_MATRIX_TRANSFORM_DESC_TRANSB, TDesc, transb),
};

TDesc* tdesc_of(cublasLtMatrixTransformDesc_t d) { return object_of<TDesc>(d, kTDescMagic); }

// ---------------------------------------------------------------- algorithm

// The sim device's one algorithm, in cublasLtMatmulAlgo_t's 64 bytes.
struct Algo {
  uint64_t magic;
  int32_t id;
  uint32_t tile, reduction, swizzle, custom, stages;
  int32_t splitk;
  uint16_t inner_shape, cluster_shape;
  int32_t compute, scale_type, a_type, b_type, c_type, d_type;
};
static_assert(sizeof(Algo) <= sizeof(cublasLtMatmulAlgo_t));

const Attr kAlgoAttrs[] = {
    WH_ATTR(CUBLASLT_ALGO_CONFIG_ID, Algo, id),
    WH_ATTR(CUBLASLT_ALGO_CONFIG_TILE_ID, Algo, tile),
    WH_ATTR(CUBLASLT_ALGO_CONFIG_SPLITK_NUM, Algo, splitk),
    WH_ATTR(CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, Algo, reduction),
    WH_ATTR(CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, Algo, swizzle),
    WH_ATTR(CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, Algo, custom),
    WH_ATTR(CUBLASLT_ALGO_CONFIG_STAGES_ID, Algo, stages),
    WH_ATTR(CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID, Algo, inner_shape),
    WH_ATTR(CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, Algo, cluster_shape),
};

const Algo* algo_of(const cublasLtMatmulAlgo_t* a) { return object_of<const Algo>(a, kAlgoMagic); }

// A type combination the sim device's algorithm computes (lt_check's rules).
bool types_supported(int32_t compute, int32_t scale, int32_t at, int32_t bt, int32_t ct, int32_t dt) {
  LtMatmulReq r{};
  r.compute = compute, r.scale_type = scale;
  r.a_type = at, r.b_type = bt, r.c_type = ct, r.d_type = dt;
  r.epilogue = kLtEpiDefault;
  r.a_rows = r.a_cols = r.b_rows = r.b_cols = r.c_rows = r.c_cols = r.d_rows = r.d_cols = 1;
  r.a_ld = r.b_ld = r.c_ld = r.d_ld = 1;
  r.a_batch = r.b_batch = r.c_batch = r.d_batch = 1;
  r.A = r.B = r.C = r.D = 256;
  LtShape s;
  return lt_check(r, &s) == LtCheck::Ok;
}

void init_algo(Algo* a, int32_t compute, int32_t scale, int32_t at, int32_t bt, int32_t ct, int32_t dt) {
  std::memset(a, 0, sizeof(cublasLtMatmulAlgo_t));
  a->magic = kAlgoMagic;
  a->id = 0;
  a->tile = CUBLASLT_MATMUL_TILE_UNDEFINED;
  a->reduction = CUBLASLT_REDUCTION_SCHEME_NONE;
  a->stages = CUBLASLT_MATMUL_STAGES_UNDEFINED;
  a->splitk = 1;
  a->compute = compute, a->scale_type = scale;
  a->a_type = at, a->b_type = bt, a->c_type = ct, a->d_type = dt;
}

// ---------------------------------------------------------------- the request

// Builds the LtMatmul request of a call; `alpha`/`beta` host pointers are
// read only in the pointer modes that take them from the host.
cublasStatus_t build(cublasLtHandle_t h, cublasLtMatmulDesc_t dd, const void* alpha, const void* A,
                     cublasLtMatrixLayout_t Ad, const void* B, cublasLtMatrixLayout_t Bd, const void* beta,
                     const void* C, cublasLtMatrixLayout_t Cd, void* D, cublasLtMatrixLayout_t Dd, LtMatmulReq* r,
                     LtShape* s) {
  const Desc* d = desc_of(dd);
  const Layout *a = layout_of(Ad), *b = layout_of(Bd), *c = layout_of(Cd), *o = layout_of(Dd);
  if (!d || !a || !b || !c || !o) return CUBLAS_STATUS_INVALID_VALUE;
  *r = LtMatmulReq{};
  r->handle = h ? h->server : 0;
  // Planar complex, pointer-array batches, C transposed, triangular fill
  // modes, fp8 scaling and emulation: not on the sim device.
  for (const Layout* l : {a, b, c, o})
    if (l->plane_offset || l->batch_mode) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (d->transc || d->fill_mode != CUBLAS_FILL_MODE_FULL || d->emulation) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (d->a_scale || d->b_scale || d->c_scale || d->d_scale || d->amax_d || d->aux_scale || d->aux_amax ||
      d->d_out_scale)
    r->flags |= kLtScalePointers;
  put(a, A, &r->A, &r->a_rows, &r->a_cols, &r->a_ld, &r->a_stride, &r->a_type, &r->a_order, &r->a_batch);
  put(b, B, &r->B, &r->b_rows, &r->b_cols, &r->b_ld, &r->b_stride, &r->b_type, &r->b_order, &r->b_batch);
  put(c, C, &r->C, &r->c_rows, &r->c_cols, &r->c_ld, &r->c_stride, &r->c_type, &r->c_order, &r->c_batch);
  put(o, D, &r->D, &r->d_rows, &r->d_cols, &r->d_ld, &r->d_stride, &r->d_type, &r->d_order, &r->d_batch);
  r->compute = d->compute, r->scale_type = d->scale_type;
  r->transa = uint32_t(d->transa), r->transb = uint32_t(d->transb);
  r->epilogue = d->epilogue, r->pointer_mode = uint32_t(d->pointer_mode);
  r->bias = reinterpret_cast<uint64_t>(d->bias), r->bias_type = d->bias_type, r->bias_stride = d->bias_stride;
  r->aux = reinterpret_cast<uint64_t>(d->aux), r->aux_type = d->aux_type;
  r->aux_ld = d->aux_ld, r->aux_stride = d->aux_stride, r->alpha_stride = d->alpha_stride;
  // Scalars: by value from the host, else their device addresses.
  const size_t ss = lt_type_size(d->scale_type);
  auto by_value = [&](const void* p, uint64_t* out) {
    if (!p || !ss) return false;
    *out = 0;
    std::memcpy(out, p, ss);
    return true;
  };
  bool ok = true;
  switch (d->pointer_mode) {
    case CUBLASLT_POINTER_MODE_HOST: ok = by_value(alpha, &r->alpha) && by_value(beta, &r->beta); break;
    case CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_HOST:
      r->alpha = reinterpret_cast<uint64_t>(alpha);
      ok = by_value(beta, &r->beta);
      break;
    default:
      r->alpha = reinterpret_cast<uint64_t>(alpha);
      r->beta = reinterpret_cast<uint64_t>(beta);
      break;
  }
  if (!ok && ss) return CUBLAS_STATUS_INVALID_VALUE;
  return status(lt_check(*r, s));
}

}  // namespace

extern "C" {

void wh_cublaslt_unsupported(const char* name) {
  log_once(std::string(name) + " is not forwarded by Wormhole: returning CUBLAS_STATUS_NOT_SUPPORTED");
}

// ---------------------------------------------------------------- library

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  if (!handle) return CUBLAS_STATUS_INVALID_VALUE;
  LtCreateReq rq{};
  LtCreateResp rs{};
  if (cudaError_t e = call<Op::LtCreate>(rq, &rs); e != cudaSuccess) return status(e);
  auto* h = new (std::nothrow) cublasLtContext;
  if (!h) {
    LtDestroyResp dr{};
    call<Op::LtDestroy>({rs.handle}, &dr);
    return CUBLAS_STATUS_ALLOC_FAILED;
  }
  h->server = rs.handle;
  h->magic = kHandleMagic;
  *handle = h;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  if (!valid_handle(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  LtDestroyResp rs{};
  cudaError_t e = call<Op::LtDestroy>({handle->server}, &rs);
  handle->magic = 0;
  delete handle;
  return status(e);
}

size_t cublasLtGetVersion(void) { return CUBLAS_VERSION; }
size_t cublasLtGetCudartVersion(void) { return CUDART_VERSION; }

cublasStatus_t cublasLtGetProperty(libraryPropertyType type, int* value) {
  if (!value) return CUBLAS_STATUS_INVALID_VALUE;
  switch (type) {
    case MAJOR_VERSION: *value = CUBLAS_VER_MAJOR; return CUBLAS_STATUS_SUCCESS;
    case MINOR_VERSION: *value = CUBLAS_VER_MINOR; return CUBLAS_STATUS_SUCCESS;
    case PATCH_LEVEL: *value = CUBLAS_VER_PATCH; return CUBLAS_STATUS_SUCCESS;
    default: return CUBLAS_STATUS_INVALID_VALUE;
  }
}

const char* cublasLtGetStatusName(cublasStatus_t s) { return wh::guest::blas::status_name(s); }

const char* cublasLtGetStatusString(cublasStatus_t s) { return wh::guest::blas::status_string(s); }

// The logger: accepted, nothing is logged (the server logs its own side).
cublasStatus_t cublasLtLoggerSetCallback(cublasLtLoggerCallback_t) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasLtLoggerSetFile(FILE*) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasLtLoggerOpenFile(const char* path) {
  return path ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}
cublasStatus_t cublasLtLoggerSetLevel(int level) {
  return level >= 0 && level <= 5 ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}
cublasStatus_t cublasLtLoggerSetMask(int) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasLtLoggerForceDisable(void) { return CUBLAS_STATUS_SUCCESS; }

// ---------------------------------------------------------------- matmul descriptors

cublasStatus_t cublasLtMatmulDescInit_internal(cublasLtMatmulDesc_t matmulDesc, size_t size,
                                               cublasComputeType_t computeType, cudaDataType_t scaleType) {
  if (!matmulDesc || size < sizeof(cublasLtMatmulDescOpaque_t)) return CUBLAS_STATUS_INVALID_VALUE;
  Desc* d = reinterpret_cast<Desc*>(matmulDesc);
  std::memset(matmulDesc, 0, sizeof(cublasLtMatmulDescOpaque_t));
  d->magic = kDescMagic;
  d->compute = computeType;
  d->scale_type = scaleType;
  d->pointer_mode = CUBLASLT_POINTER_MODE_HOST;
  d->fill_mode = CUBLAS_FILL_MODE_FULL;
  d->epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  d->aux_type = -1;
  d->bias_type = -1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* matmulDesc, cublasComputeType_t computeType,
                                        cudaDataType_t scaleType) {
  return create_opaque(matmulDesc, [&](cublasLtMatmulDesc_t d) {
    cublasLtMatmulDescInit_internal(d, sizeof(*d), computeType, scaleType);
  });
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc) {
  return destroy_opaque(desc_of(matmulDesc), matmulDesc);
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t sizeInBytes) {
  return attr_set(desc_of(matmulDesc), kDescAttrs, attr, buf, sizeInBytes);
}

cublasStatus_t cublasLtMatmulDescGetAttribute(cublasLtMatmulDesc_t matmulDesc, cublasLtMatmulDescAttributes_t attr,
                                              void* buf, size_t sizeInBytes, size_t* sizeWritten) {
  return attr_get(desc_of(matmulDesc), kDescAttrs, attr, buf, sizeInBytes, sizeWritten);
}

// ---------------------------------------------------------------- matrix layouts

cublasStatus_t cublasLtMatrixLayoutInit_internal(cublasLtMatrixLayout_t matLayout, size_t size, cudaDataType type,
                                                 uint64_t rows, uint64_t cols, int64_t ld) {
  if (!matLayout || size < sizeof(cublasLtMatrixLayoutOpaque_t)) return CUBLAS_STATUS_INVALID_VALUE;
  std::memset(matLayout, 0, sizeof(cublasLtMatrixLayoutOpaque_t));
  Layout* l = reinterpret_cast<Layout*>(matLayout);
  l->magic = kLayoutMagic;
  l->type = uint32_t(type);
  l->order = CUBLASLT_ORDER_COL;
  l->batch = 1;
  l->rows = rows, l->cols = cols, l->ld = ld;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* matLayout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  return create_opaque(matLayout, [&](cublasLtMatrixLayout_t l) {
    cublasLtMatrixLayoutInit_internal(l, sizeof(*l), type, rows, cols, ld);
  });
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout) {
  return destroy_opaque(layout_of(matLayout), matLayout);
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t matLayout, cublasLtMatrixLayoutAttribute_t attr,
                                                const void* buf, size_t sizeInBytes) {
  return attr_set(layout_of(matLayout), kLayoutAttrs, attr, buf, sizeInBytes);
}

cublasStatus_t cublasLtMatrixLayoutGetAttribute(cublasLtMatrixLayout_t matLayout, cublasLtMatrixLayoutAttribute_t attr,
                                                void* buf, size_t sizeInBytes, size_t* sizeWritten) {
  return attr_get(layout_of(matLayout), kLayoutAttrs, attr, buf, sizeInBytes, sizeWritten);
}

// ---------------------------------------------------------------- preferences

cublasStatus_t cublasLtMatmulPreferenceInit_internal(cublasLtMatmulPreference_t pref, size_t size) {
  if (!pref || size < sizeof(cublasLtMatmulPreferenceOpaque_t)) return CUBLAS_STATUS_INVALID_VALUE;
  std::memset(pref, 0, sizeof(cublasLtMatmulPreferenceOpaque_t));
  Pref* p = reinterpret_cast<Pref*>(pref);
  p->magic = kPrefMagic;
  p->search_mode = CUBLASLT_SEARCH_BEST_FIT;
  p->reduction_mask = CUBLASLT_REDUCTION_SCHEME_MASK;
  p->align_a = p->align_b = p->align_c = p->align_d = 256;
  p->impl_mask = ~uint64_t(0);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  return create_opaque(pref, [](cublasLtMatmulPreference_t p) { cublasLtMatmulPreferenceInit_internal(p, sizeof(*p)); });
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  return destroy_opaque(pref_of(pref), pref);
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                                    size_t sizeInBytes) {
  return attr_set(pref_of(pref), kPrefAttrs, attr, buf, sizeInBytes);
}

cublasStatus_t cublasLtMatmulPreferenceGetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, void* buf,
                                                    size_t sizeInBytes, size_t* sizeWritten) {
  return attr_get(pref_of(pref), kPrefAttrs, attr, buf, sizeInBytes, sizeWritten);
}

// ---------------------------------------------------------------- algorithms

cublasStatus_t cublasLtMatmulAlgoGetIds(cublasLtHandle_t handle, cublasComputeType_t computeType,
                                        cudaDataType_t scaleType, cudaDataType_t Atype, cudaDataType_t Btype,
                                        cudaDataType_t Ctype, cudaDataType_t Dtype, int requestedAlgoCount,
                                        int algoIdsArray[], int* returnAlgoCount) {
  if (!valid_handle(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (requestedAlgoCount < 1 || !algoIdsArray || !returnAlgoCount) return CUBLAS_STATUS_INVALID_VALUE;
  *returnAlgoCount = 0;
  if (types_supported(computeType, scaleType, Atype, Btype, Ctype, Dtype)) {
    algoIdsArray[0] = 0;
    *returnAlgoCount = 1;
  }
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulAlgoInit(cublasLtHandle_t handle, cublasComputeType_t computeType,
                                      cudaDataType_t scaleType, cudaDataType_t Atype, cudaDataType_t Btype,
                                      cudaDataType_t Ctype, cudaDataType_t Dtype, int algoId,
                                      cublasLtMatmulAlgo_t* algo) {
  if (!valid_handle(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!algo || algoId != 0) return CUBLAS_STATUS_INVALID_VALUE;
  if (!types_supported(computeType, scaleType, Atype, Btype, Ctype, Dtype)) return CUBLAS_STATUS_NOT_SUPPORTED;
  init_algo(reinterpret_cast<Algo*>(algo), computeType, scaleType, Atype, Btype, Ctype, Dtype);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulAlgoConfigSetAttribute(cublasLtMatmulAlgo_t* algo, cublasLtMatmulAlgoConfigAttributes_t attr,
                                                    const void* buf, size_t sizeInBytes) {
  Algo* a = const_cast<Algo*>(algo_of(algo));
  if (!a) return CUBLAS_STATUS_INVALID_VALUE;
  // The id is fixed at init; the sim device's kernel has no tunables other
  // than those cuBLASLt documents as defaults.
  if (attr == CUBLASLT_ALGO_CONFIG_ID) return CUBLAS_STATUS_INVALID_VALUE;
  return attr_set(a, kAlgoAttrs, attr, buf, sizeInBytes);
}

cublasStatus_t cublasLtMatmulAlgoConfigGetAttribute(const cublasLtMatmulAlgo_t* algo,
                                                    cublasLtMatmulAlgoConfigAttributes_t attr, void* buf,
                                                    size_t sizeInBytes, size_t* sizeWritten) {
  return attr_get(algo_of(algo), kAlgoAttrs, attr, buf, sizeInBytes, sizeWritten);
}

cublasStatus_t cublasLtMatmulAlgoCapGetAttribute(const cublasLtMatmulAlgo_t* algo, cublasLtMatmulAlgoCapAttributes_t attr,
                                                 void* buf, size_t sizeInBytes, size_t* sizeWritten) {
  if (!algo_of(algo)) return CUBLAS_STATUS_INVALID_VALUE;
  // Capabilities of the one algorithm, by attribute type (cublasLt.h).
  int32_t i32 = 0;
  uint32_t u32 = 0;
  uint64_t u64 = 0;
  const void* src = &i32;
  size_t size = sizeof(i32);
  switch (attr) {
    case CUBLASLT_ALGO_CAP_SPLITK_SUPPORT:
    case CUBLASLT_ALGO_CAP_CTA_SWIZZLING_SUPPORT:
    case CUBLASLT_ALGO_CAP_UPLO_SUPPORT:
    case CUBLASLT_ALGO_CAP_CUSTOM_OPTION_MAX:
    case CUBLASLT_ALGO_CAP_CUSTOM_MEMORY_ORDER:
    case CUBLASLT_ALGO_CAP_LD_NEGATIVE:
    case CUBLASLT_ALGO_CAP_POINTER_ARRAY_BATCH_SUPPORT:
    case CUBLASLT_ALGO_CAP_FLOATING_POINT_EMULATION_SUPPORT: i32 = 0; break;
    case CUBLASLT_ALGO_CAP_STRIDED_BATCH_SUPPORT:
    case CUBLASLT_ALGO_CAP_OUT_OF_PLACE_RESULT_SUPPORT: i32 = 1; break;
    case CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK:
      u32 = CUBLASLT_REDUCTION_SCHEME_NONE, src = &u32, size = sizeof(u32);
      break;
    case CUBLASLT_ALGO_CAP_POINTER_MODE_MASK:
      u32 = CUBLASLT_POINTER_MODE_MASK_HOST | CUBLASLT_POINTER_MODE_MASK_DEVICE |
            CUBLASLT_POINTER_MODE_MASK_DEVICE_VECTOR | CUBLASLT_POINTER_MODE_MASK_ALPHA_DEVICE_VECTOR_BETA_ZERO |
            CUBLASLT_POINTER_MODE_MASK_ALPHA_DEVICE_VECTOR_BETA_HOST;
      src = &u32, size = sizeof(u32);
      break;
    case CUBLASLT_ALGO_CAP_EPILOGUE_MASK:
      u32 = CUBLASLT_EPILOGUE_DEFAULT | CUBLASLT_EPILOGUE_RELU_AUX_BIAS | CUBLASLT_EPILOGUE_DRELU_BGRAD |
            CUBLASLT_EPILOGUE_GELU_AUX_BIAS | CUBLASLT_EPILOGUE_DGELU_BGRAD | CUBLASLT_EPILOGUE_BGRADA |
            CUBLASLT_EPILOGUE_BGRADB;
      src = &u32, size = sizeof(u32);
      break;
    case CUBLASLT_ALGO_CAP_TILE_IDS:
    case CUBLASLT_ALGO_CAP_STAGES_IDS:
      // Arrays of uint32_t: one entry, UNDEFINED (the kernel has no tiles or stages).
      u32 = 0, src = &u32, size = sizeof(u32);
      break;
    case CUBLASLT_ALGO_CAP_NUMERICAL_IMPL_FLAGS:
      u64 = CUBLASLT_NUMERICAL_IMPL_FLAGS_FMA, src = &u64, size = sizeof(u64);
      break;
    case CUBLASLT_ALGO_CAP_MIN_ALIGNMENT_A_BYTES:
    case CUBLASLT_ALGO_CAP_MIN_ALIGNMENT_B_BYTES:
    case CUBLASLT_ALGO_CAP_MIN_ALIGNMENT_C_BYTES:
    case CUBLASLT_ALGO_CAP_MIN_ALIGNMENT_D_BYTES:
      u32 = 4, src = &u32, size = sizeof(u32);
      break;
    default: return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (sizeInBytes == 0) {
    if (!sizeWritten) return CUBLAS_STATUS_INVALID_VALUE;
    *sizeWritten = size;
    return CUBLAS_STATUS_SUCCESS;
  }
  // Array attributes accept a larger buffer; scalars need the exact size.
  const bool array = attr == CUBLASLT_ALGO_CAP_TILE_IDS || attr == CUBLASLT_ALGO_CAP_STAGES_IDS;
  if (!buf || (array ? sizeInBytes < size : sizeInBytes != size)) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(buf, src, size);
  if (sizeWritten) *sizeWritten = size;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulAlgoCheck(cublasLtHandle_t handle, cublasLtMatmulDesc_t operationDesc,
                                       cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                                       cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                                       const cublasLtMatmulAlgo_t* algo, cublasLtMatmulHeuristicResult_t* result) {
  if (!valid_handle(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!result || !algo_of(algo)) return CUBLAS_STATUS_INVALID_VALUE;
  // Placeholder operands: only the descriptors are checked here.
  LtMatmulReq r;
  LtShape s;
  const float one = 1.f;
  const uint64_t p = 256;
  const void* fake = reinterpret_cast<const void*>(p);
  cublasStatus_t st = build(handle, operationDesc, &one, fake, Adesc, fake, Bdesc, &one, fake, Cdesc,
                            const_cast<void*>(fake), Ddesc, &r, &s);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  const Algo* a = algo_of(algo);
  if (a->compute != r.compute || a->scale_type != r.scale_type || a->a_type != r.a_type || a->b_type != r.b_type ||
      a->c_type != r.c_type || a->d_type != r.d_type || a->splitk > 1 || a->reduction != CUBLASLT_REDUCTION_SCHEME_NONE)
    return CUBLAS_STATUS_INVALID_VALUE;
  cublasLtMatmulAlgo_t copy = *algo;  // `algo` may point into `result`
  std::memset(result, 0, sizeof(*result));
  result->algo = copy;
  result->workspaceSize = 0;
  result->state = CUBLAS_STATUS_SUCCESS;
  result->wavesCount = 1.f;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t operationDesc,
                                              cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                                              cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                                              cublasLtMatmulPreference_t preference, int requestedAlgoCount,
                                              cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
                                              int* returnAlgoCount) {
  if (!valid_handle(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (requestedAlgoCount < 1 || !heuristicResultsArray || !returnAlgoCount || !pref_of(preference))
    return CUBLAS_STATUS_INVALID_VALUE;
  *returnAlgoCount = 0;
  LtMatmulReq r;
  LtShape s;
  const float one = 1.f;
  const uint64_t p = 256;
  const void* fake = reinterpret_cast<const void*>(p);
  // The bias and aux pointers come from the descriptor; their absence, for
  // an epilogue that needs them, is caught at cublasLtMatmul as cuBLASLt does.
  cublasStatus_t st = build(handle, operationDesc, &one, fake, Adesc, fake, Bdesc, &one, fake, Cdesc,
                            const_cast<void*>(fake), Ddesc, &r, &s);
  if (st == CUBLAS_STATUS_INVALID_VALUE && desc_of(operationDesc) && (r.bias == 0 || r.aux == 0)) {
    // Retry with placeholder epilogue vectors, so that a heuristic query
    // made before the pointers are set still answers.
    r.bias = r.bias ? r.bias : p;
    r.aux = r.aux ? r.aux : p;
    if (lt_check(r, &s) == LtCheck::Ok) st = CUBLAS_STATUS_SUCCESS;
  }
  if (st != CUBLAS_STATUS_SUCCESS) return st == CUBLAS_STATUS_INVALID_VALUE ? st : CUBLAS_STATUS_NOT_SUPPORTED;
  std::memset(&heuristicResultsArray[0], 0, sizeof(heuristicResultsArray[0]));
  init_algo(reinterpret_cast<Algo*>(&heuristicResultsArray[0].algo), r.compute, r.scale_type, r.a_type, r.b_type,
            r.c_type, r.d_type);
  heuristicResultsArray[0].workspaceSize = 0;  // fits any MAX_WORKSPACE_BYTES
  heuristicResultsArray[0].state = CUBLAS_STATUS_SUCCESS;
  heuristicResultsArray[0].wavesCount = 1.f;
  *returnAlgoCount = 1;
  return CUBLAS_STATUS_SUCCESS;
}

// ---------------------------------------------------------------- matmul

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t computeDesc, const void* alpha,
                              const void* A, cublasLtMatrixLayout_t Adesc, const void* B, cublasLtMatrixLayout_t Bdesc,
                              const void* beta, const void* C, cublasLtMatrixLayout_t Cdesc, void* D,
                              cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t* algo, void* workspace,
                              size_t workspaceSizeInBytes, cudaStream_t stream) {
  if (!valid_handle(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (algo && !algo_of(algo)) return CUBLAS_STATUS_INVALID_VALUE;  // not one of ours
  LtMatmulReq r;
  LtShape s;
  if (cublasStatus_t st = build(handle, computeDesc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, &r, &s);
      st != CUBLAS_STATUS_SUCCESS)
    return st;
  if (const Algo* a = algo_of(algo); a && (a->compute != r.compute || a->a_type != r.a_type || a->d_type != r.d_type))
    return CUBLAS_STATUS_INVALID_VALUE;
  r.workspace = reinterpret_cast<uint64_t>(workspace);
  r.workspace_size = workspace ? workspaceSizeInBytes : 0;
  r.stream = reinterpret_cast<uint64_t>(stream);
  r.algo = 0;
  return status(post<Op::LtMatmul>(r));
}

// ---------------------------------------------------------------- matrix transform

cublasStatus_t cublasLtMatrixTransformDescInit_internal(cublasLtMatrixTransformDesc_t transformDesc, size_t size,
                                                        cudaDataType scaleType) {
  if (!transformDesc || size < sizeof(cublasLtMatrixTransformDescOpaque_t)) return CUBLAS_STATUS_INVALID_VALUE;
  std::memset(transformDesc, 0, sizeof(cublasLtMatrixTransformDescOpaque_t));
  TDesc* d = reinterpret_cast<TDesc*>(transformDesc);
  d->magic = kTDescMagic;
  d->scale_type = scaleType;
  d->pointer_mode = CUBLASLT_POINTER_MODE_HOST;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixTransformDescCreate(cublasLtMatrixTransformDesc_t* transformDesc,
                                                 cudaDataType scaleType) {
  return create_opaque(transformDesc, [&](cublasLtMatrixTransformDesc_t d) {
    cublasLtMatrixTransformDescInit_internal(d, sizeof(*d), scaleType);
  });
}

cublasStatus_t cublasLtMatrixTransformDescDestroy(cublasLtMatrixTransformDesc_t transformDesc) {
  return destroy_opaque(tdesc_of(transformDesc), transformDesc);
}

cublasStatus_t cublasLtMatrixTransformDescSetAttribute(cublasLtMatrixTransformDesc_t transformDesc,
                                                       cublasLtMatrixTransformDescAttributes_t attr, const void* buf,
                                                       size_t sizeInBytes) {
  return attr_set(tdesc_of(transformDesc), kTDescAttrs, attr, buf, sizeInBytes);
}

cublasStatus_t cublasLtMatrixTransformDescGetAttribute(cublasLtMatrixTransformDesc_t transformDesc,
                                                       cublasLtMatrixTransformDescAttributes_t attr, void* buf,
                                                       size_t sizeInBytes, size_t* sizeWritten) {
  return attr_get(tdesc_of(transformDesc), kTDescAttrs, attr, buf, sizeInBytes, sizeWritten);
}

cublasStatus_t cublasLtMatrixTransform(cublasLtHandle_t handle, cublasLtMatrixTransformDesc_t transformDesc,
                                       const void* alpha, const void* A, cublasLtMatrixLayout_t Adesc,
                                       const void* beta, const void* B, cublasLtMatrixLayout_t Bdesc, void* C,
                                       cublasLtMatrixLayout_t Cdesc, cudaStream_t stream) {
  if (!valid_handle(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  const TDesc* d = tdesc_of(transformDesc);
  const Layout *a = layout_of(Adesc), *b = layout_of(Bdesc), *c = layout_of(Cdesc);
  if (!d || !a || !c || (B && !b)) return CUBLAS_STATUS_INVALID_VALUE;
  for (const Layout* l : {a, b, c})
    if (l && (l->plane_offset || l->batch_mode)) return CUBLAS_STATUS_NOT_SUPPORTED;
  LtTransformReq r{};
  r.handle = handle->server;
  r.stream = reinterpret_cast<uint64_t>(stream);
  r.scale_type = d->scale_type;
  r.pointer_mode = uint32_t(d->pointer_mode);
  r.transa = uint32_t(d->transa), r.transb = uint32_t(d->transb);
  if (d->pointer_mode == CUBLASLT_POINTER_MODE_HOST) {
    if (!alpha || !beta || d->scale_type != CUDA_R_32F) return d->scale_type != CUDA_R_32F
                                                                  ? CUBLAS_STATUS_NOT_SUPPORTED
                                                                  : CUBLAS_STATUS_INVALID_VALUE;
    uint32_t ab, bb;
    std::memcpy(&ab, alpha, 4);
    std::memcpy(&bb, beta, 4);
    float bf;
    std::memcpy(&bf, &bb, 4);
    r.alpha = ab;
    r.beta = bf == 0.f ? 0 : bb;  // -0.0 is a zero too
  } else {
    r.alpha = reinterpret_cast<uint64_t>(alpha);
    r.beta = reinterpret_cast<uint64_t>(beta);
  }
  put(a, A, &r.A, &r.a_rows, &r.a_cols, &r.a_ld, &r.a_stride, &r.a_type, &r.a_order, &r.a_batch);
  if (b) put(b, B, &r.B, &r.b_rows, &r.b_cols, &r.b_ld, &r.b_stride, &r.b_type, &r.b_order, &r.b_batch);
  put(c, C, &r.C, &r.c_rows, &r.c_cols, &r.c_ld, &r.c_stride, &r.c_type, &r.c_order, &r.c_batch);
  // B absent, or its layout given without a pointer: only alpha op(A),
  // which needs a zero beta.
  if (!B) {
    r.B = 0;
    if (d->pointer_mode != CUBLASLT_POINTER_MODE_HOST || r.beta != 0) return CUBLAS_STATUS_INVALID_VALUE;
  }
  LtTransformShape s;
  if (cublasStatus_t st = status(lt_transform_check(r, &s)); st != CUBLAS_STATUS_SUCCESS) return st;
  return status(post<Op::LtTransform>(r));
}

}  // extern "C"
