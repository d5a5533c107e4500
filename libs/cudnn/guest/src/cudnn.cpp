// libcudnn.so.9 drop-in: cuDNN's legacy descriptor API (convolutions,
// pooling, activations, softmax, tensor addition, transform, op-tensor, set
// and scale, batch normalization, LRN, dropout, reductions; float, half and
// bfloat16 data) forwarded to
// wormhole-server over the connection of the process's libcudart.so.13
// (Wormhole's drop-in), so the work runs in the same server session as
// cudaMalloc and kernel launches, in issue order.
//
// The handle and every descriptor are plain data in this library; each
// compute call checks its descriptors and the shapes they combine
// (proto/cudnn_check.hpp, as cuDNN does: BAD_PARAM, NOT_SUPPORTED at once)
// and posts one request carrying them by value, which the server checks
// again. Compute calls return at once; a device fault surfaces at the next
// synchronising CUDA call, as on a GPU. The server picks its own algorithm
// and needs no work area: algorithm queries report algorithm 0 with a work
// size of 0, and the work area a program passes is ignored. Dropout's
// states (64 bytes: the generator's seed and counter) are seeded on the
// device by cudnnSetDropoutDescriptor; its reserve space holds the mask,
// one byte per element.
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <library_types.h>

#include <cstring>
#include <mutex>
#include <string>

#include "wormhole/library_call.hpp"
#include "wormhole/proto/cudnn_check.hpp"
#include "wormhole/proto/wire.hpp"

extern "C" {
void wh_cudnn_unsupported(const char* name);
}

using namespace wh::proto;
namespace dnn = wh::proto::dnn;

// The opaque types of cudnn.h. A magic word catches a destroyed or foreign
// descriptor (best effort: freed memory may still hold it).
constexpr uint32_t kAlive = 0x444e4e21, kDead = 0xdeadd00d;
struct cudnnContext {
  uint32_t magic = kAlive;
  cudaStream_t stream = nullptr;
};
struct cudnnTensorStruct {
  uint32_t magic = kAlive;
  bool set = false;
  DnnTensor t{};
};
struct cudnnFilterStruct {
  uint32_t magic = kAlive;
  bool set = false;
  DnnFilter f{};
};
struct cudnnConvolutionStruct {
  uint32_t magic = kAlive;
  bool set = false;
  DnnConv c{};
};
struct cudnnPoolingStruct {
  uint32_t magic = kAlive;
  bool set = false;
  DnnPool p{};
};
struct cudnnOpTensorStruct {
  uint32_t magic = kAlive;
  bool set = false;
  int32_t op = 0, nan_opt = 0;
};
struct cudnnActivationStruct {
  uint32_t magic = kAlive;
  bool set = false;
  DnnAct a{};
};
struct cudnnLRNStruct {  // created with cuDNN's defaults (Krizhevsky et al.)
  uint32_t magic = kAlive;
  bool set = true;
  DnnLrn l{5, 0, 1e-4, 0.75, 2.0};
};
struct cudnnReduceTensorStruct {
  uint32_t magic = kAlive;
  bool set = false;
  DnnReduce r{};
};
struct cudnnDropoutStruct {
  uint32_t magic = kAlive;
  bool set = false;
  float p = 0;
  void* states = nullptr;
  size_t states_size = 0;
  unsigned long long seed = 0;
};

namespace {

using wh::guest::lib::call;
using wh::guest::lib::log_once;
using wh::guest::lib::post;

template <class T>
bool ok(const T* d) {
  return d && d->magic == kAlive && d->set;
}
bool ok(const cudnnContext* h) { return h && h->magic == kAlive; }

cudnnStatus_t status(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return CUDNN_STATUS_SUCCESS;
    case cudaErrorInvalidValue: return CUDNN_STATUS_BAD_PARAM;
    case cudaErrorNotSupported: return CUDNN_STATUS_NOT_SUPPORTED;
    case cudaErrorMemoryAllocation: return CUDNN_STATUS_ALLOC_FAILED;
    case cudaErrorInitializationError:
    case cudaErrorNoDevice:
    case cudaErrorDevicesUnavailable: return CUDNN_STATUS_NOT_INITIALIZED;
    default: return CUDNN_STATUS_EXECUTION_FAILED;
  }
}
cudnnStatus_t st(int32_t s) { return cudnnStatus_t(s); }

int elem_size(int32_t dtype) {
  switch (dtype) {
    case CUDNN_DATA_DOUBLE:
    case CUDNN_DATA_INT64: return 8;
    case CUDNN_DATA_HALF:
    case CUDNN_DATA_BFLOAT16: return 2;
    case CUDNN_DATA_INT8:
    case CUDNN_DATA_UINT8:
    case CUDNN_DATA_BOOLEAN: return 1;
    default: return 4;
  }
}
bool valid_dtype(int32_t d) { return d >= 0 && d <= CUDNN_DATA_FP4_E2M1; }

// The host scalars of a float operation: alpha and beta as doubles.
bool scalars(const void* alpha, const void* beta, double* a, double* b) {
  if (!alpha || !beta) return false;
  float fa, fb;
  std::memcpy(&fa, alpha, 4);
  std::memcpy(&fb, beta, 4);
  *a = fa, *b = fb;
  return true;
}
uint64_t U(const void* p) { return reinterpret_cast<uint64_t>(p); }

// A host value of a tensor's data type (float, half, bfloat16) as a double.
double value_of(const void* p, int32_t dtype) {
  if (dtype == dnn::kFloat) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  uint16_t b;
  std::memcpy(&b, p, 2);
  uint32_t bits;
  if (dtype == dnn::kBf16) {
    bits = uint32_t(b) << 16;
  } else {  // half
    const uint32_t sign = uint32_t(b & 0x8000) << 16, exp = (b >> 10) & 0x1F;
    uint32_t man = b & 0x3FF;
    if (exp == 0x1F) {
      bits = sign | 0x7F800000 | man << 13;
    } else if (exp) {
      bits = sign | (exp + 112) << 23 | man << 13;
    } else if (!man) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do man <<= 1, e++;
      while (!(man & 0x400));
      bits = sign | uint32_t(127 - 15 - e) << 23 | (man & 0x3FF) << 13;
    }
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

template <class D>
void destroy(D* d) {
  if (d && d->magic == kAlive) {
    d->magic = kDead;
    delete d;
  }
}
template <class D>
cudnnStatus_t create(D** out) {
  if (!out) return CUDNN_STATUS_BAD_PARAM;
  *out = new D;
  return CUDNN_STATUS_SUCCESS;
}
template <class D>
cudnnStatus_t destroy_checked(D* d) {
  if (!d || d->magic != kAlive) return CUDNN_STATUS_BAD_PARAM;
  destroy(d);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t set_tensor(cudnnTensorDescriptor_t d, int32_t dtype, int nb, const int* dims, const int* strides) {
  if (!d || d->magic != kAlive || !dims || !strides || !valid_dtype(dtype)) return CUDNN_STATUS_BAD_PARAM;
  if (nb < 1 || nb > kDnnMaxDims) return CUDNN_STATUS_NOT_SUPPORTED;
  DnnTensor t{};
  t.dtype = dtype, t.nb = nb;
  for (int k = 0; k < nb; k++) t.dim[k] = dims[k], t.stride[k] = strides[k];
  if (dnn::span(t) == 0) return CUDNN_STATUS_BAD_PARAM;
  d->t = t;
  d->set = true;
  return CUDNN_STATUS_SUCCESS;
}
// Packed strides of a layout: NCHW (row-major) or NHWC (channels last).
void packed(int nb, const int* dims, bool nhwc, int* strides) {
  if (!nhwc || nb < 3) {
    int64_t s = 1;
    for (int k = nb - 1; k >= 0; k--) strides[k] = int(s), s *= dims[k];
    return;
  }
  int64_t s = 1;
  strides[1] = 1, s = dims[1];
  for (int k = nb - 1; k >= 2; k--) strides[k] = int(s), s *= dims[k];
  strides[0] = int(s);
}

// Algorithm queries: one result, algorithm 0, no work area, deterministic.
template <class Perf, class Algo>
cudnnStatus_t one_algo(int requested, int* returned, Perf* perf, cudnnConvolutionDescriptor_t conv, int32_t shapes) {
  if (!returned || !perf || requested < 1 || !ok(conv)) return CUDNN_STATUS_BAD_PARAM;
  if (shapes != dnn::kOk) return st(shapes);
  std::memset(perf, 0, sizeof *perf);
  perf->algo = Algo(0);
  perf->status = CUDNN_STATUS_SUCCESS;
  perf->time = 0.0f;
  perf->memory = 0;
  perf->determinism = CUDNN_DETERMINISTIC;
  perf->mathType = cudnnMathType_t(conv->c.math);
  *returned = 1;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t conv_shapes(cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t c,
                          cudnnTensorDescriptor_t y, int32_t* shapes) {
  if (!ok(x) || !ok(w) || !ok(c) || !ok(y)) return CUDNN_STATUS_BAD_PARAM;
  *shapes = dnn::check_conv_shapes(x->t, w->f, c->c, y->t);
  return CUDNN_STATUS_SUCCESS;
}

}  // namespace

extern "C" {

void wh_cudnn_unsupported(const char* name) {
  log_once(std::string(name) + " is not forwarded by Wormhole: returning CUDNN_STATUS_NOT_SUPPORTED");
}

// ------------------------------------------------------------ library

size_t cudnnGetVersion(void) { return CUDNN_VERSION; }
size_t cudnnGetMaxDeviceVersion(void) { return 1200; }
size_t cudnnGetCudartVersion(void) { return CUDART_VERSION; }
cudnnStatus_t cudnnGetProperty(libraryPropertyType type, int* value) {
  if (!value) return CUDNN_STATUS_BAD_PARAM;
  switch (type) {
    case MAJOR_VERSION: *value = CUDNN_MAJOR; return CUDNN_STATUS_SUCCESS;
    case MINOR_VERSION: *value = CUDNN_MINOR; return CUDNN_STATUS_SUCCESS;
    case PATCH_LEVEL: *value = CUDNN_PATCHLEVEL; return CUDNN_STATUS_SUCCESS;
    default: return CUDNN_STATUS_BAD_PARAM;
  }
}
const char* cudnnGetErrorString(cudnnStatus_t s) {
  switch (s) {
    case CUDNN_STATUS_SUCCESS: return "CUDNN_STATUS_SUCCESS";
    case CUDNN_STATUS_NOT_INITIALIZED: return "CUDNN_STATUS_NOT_INITIALIZED";
    case CUDNN_STATUS_BAD_PARAM: return "CUDNN_STATUS_BAD_PARAM";
    case CUDNN_STATUS_NOT_SUPPORTED: return "CUDNN_STATUS_NOT_SUPPORTED";
    case CUDNN_STATUS_ALLOC_FAILED: return "CUDNN_STATUS_ALLOC_FAILED";
    case CUDNN_STATUS_EXECUTION_FAILED: return "CUDNN_STATUS_EXECUTION_FAILED";
    case CUDNN_STATUS_INTERNAL_ERROR: return "CUDNN_STATUS_INTERNAL_ERROR";
    default: return "CUDNN_STATUS_UNKNOWN";
  }
}
void cudnnGetLastErrorString(char* message, size_t max_size) {
  if (message && max_size) message[0] = 0;
}

// ------------------------------------------------------------ handle

cudnnStatus_t cudnnCreate(cudnnHandle_t* handle) {
  if (!handle) return CUDNN_STATUS_BAD_PARAM;
  DnnCreateReq rq{};
  DnnCreateResp rs{};
  if (cudaError_t e = call<Op::DnnCreate>(rq, &rs); e != cudaSuccess)
    return e == cudaErrorNotSupported ? CUDNN_STATUS_NOT_INITIALIZED : status(e);
  *handle = new cudnnContext;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnDestroy(cudnnHandle_t h) { return destroy_checked(h); }
cudnnStatus_t cudnnSetStream(cudnnHandle_t h, cudaStream_t s) {
  if (!ok(h)) return CUDNN_STATUS_BAD_PARAM;
  h->stream = s;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnGetStream(cudnnHandle_t h, cudaStream_t* s) {
  if (!ok(h) || !s) return CUDNN_STATUS_BAD_PARAM;
  *s = h->stream;
  return CUDNN_STATUS_SUCCESS;
}

// ------------------------------------------------------------ tensors

cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t* d) { return create(d); }
cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t d) {
  if (!d) return CUDNN_STATUS_SUCCESS;
  return destroy_checked(d);
}
cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t d, cudnnTensorFormat_t format,
                                         cudnnDataType_t dtype, int n, int c, int h, int w) {
  if (format != CUDNN_TENSOR_NCHW && format != CUDNN_TENSOR_NHWC) return CUDNN_STATUS_BAD_PARAM;
  int dims[4] = {n, c, h, w}, strides[4];
  for (int v : dims)
    if (v < 1) return CUDNN_STATUS_BAD_PARAM;
  packed(4, dims, format == CUDNN_TENSOR_NHWC, strides);
  return set_tensor(d, dtype, 4, dims, strides);
}
cudnnStatus_t cudnnSetTensor4dDescriptorEx(cudnnTensorDescriptor_t d, cudnnDataType_t dtype, int n, int c, int h,
                                           int w, int ns, int cs, int hs, int ws) {
  int dims[4] = {n, c, h, w}, strides[4] = {ns, cs, hs, ws};
  return set_tensor(d, dtype, 4, dims, strides);
}
cudnnStatus_t cudnnSetTensorNdDescriptor(cudnnTensorDescriptor_t d, cudnnDataType_t dtype, int nb, const int dims[],
                                         const int strides[]) {
  return set_tensor(d, dtype, nb, dims, strides);
}
cudnnStatus_t cudnnSetTensorNdDescriptorEx(cudnnTensorDescriptor_t d, cudnnTensorFormat_t format,
                                           cudnnDataType_t dtype, int nb, const int dims[]) {
  if (!dims || nb < 1 || nb > kDnnMaxDims || (format != CUDNN_TENSOR_NCHW && format != CUDNN_TENSOR_NHWC))
    return CUDNN_STATUS_BAD_PARAM;
  int strides[kDnnMaxDims];
  for (int k = 0; k < nb; k++)
    if (dims[k] < 1) return CUDNN_STATUS_BAD_PARAM;
  packed(nb, dims, format == CUDNN_TENSOR_NHWC, strides);
  return set_tensor(d, dtype, nb, dims, strides);
}
cudnnStatus_t cudnnGetTensor4dDescriptor(const cudnnTensorDescriptor_t d, cudnnDataType_t* dtype, int* n, int* c,
                                         int* h, int* w, int* ns, int* cs, int* hs, int* ws) {
  if (!ok(d) || d->t.nb != 4 || !dtype || !n || !c || !h || !w || !ns || !cs || !hs || !ws)
    return CUDNN_STATUS_BAD_PARAM;
  const DnnTensor& t = d->t;
  *dtype = cudnnDataType_t(t.dtype);
  *n = t.dim[0], *c = t.dim[1], *h = t.dim[2], *w = t.dim[3];
  *ns = t.stride[0], *cs = t.stride[1], *hs = t.stride[2], *ws = t.stride[3];
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnGetTensorNdDescriptor(const cudnnTensorDescriptor_t d, int requested, cudnnDataType_t* dtype,
                                         int* nb, int dims[], int strides[]) {
  if (!ok(d) || !dtype || !nb || requested < 0 || (requested && (!dims || !strides))) return CUDNN_STATUS_BAD_PARAM;
  *dtype = cudnnDataType_t(d->t.dtype);
  *nb = d->t.nb;
  for (int k = 0; k < requested && k < d->t.nb; k++) dims[k] = d->t.dim[k], strides[k] = d->t.stride[k];
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnGetTensorSizeInBytes(const cudnnTensorDescriptor_t d, size_t* size) {
  if (!ok(d) || !size) return CUDNN_STATUS_BAD_PARAM;
  *size = size_t(dnn::span(d->t)) * size_t(elem_size(d->t.dtype));
  return CUDNN_STATUS_SUCCESS;
}

// ------------------------------------------------------------ filters

cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t* d) { return create(d); }
cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t d) {
  if (!d) return CUDNN_STATUS_SUCCESS;
  return destroy_checked(d);
}
cudnnStatus_t cudnnSetFilterNdDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t dtype, cudnnTensorFormat_t format,
                                         int nb, const int dims[]) {
  if (!d || d->magic != kAlive || !dims || !valid_dtype(dtype) || nb < 3 || nb > kDnnMaxDims ||
      (format != CUDNN_TENSOR_NCHW && format != CUDNN_TENSOR_NHWC))
    return CUDNN_STATUS_BAD_PARAM;
  DnnFilter f{};
  f.dtype = dtype, f.format = format, f.nb = nb;
  int64_t n = 1;
  for (int k = 0; k < nb; k++) {
    if (dims[k] < 1) return CUDNN_STATUS_BAD_PARAM;
    f.dim[k] = dims[k];
    n *= dims[k];
    if (n >= dnn::kMaxElems) return CUDNN_STATUS_BAD_PARAM;
  }
  d->f = f;
  d->set = true;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t dtype, cudnnTensorFormat_t format,
                                         int k, int c, int h, int w) {
  int dims[4] = {k, c, h, w};
  return cudnnSetFilterNdDescriptor(d, dtype, format, 4, dims);
}
cudnnStatus_t cudnnGetFilter4dDescriptor(const cudnnFilterDescriptor_t d, cudnnDataType_t* dtype,
                                         cudnnTensorFormat_t* format, int* k, int* c, int* h, int* w) {
  if (!ok(d) || d->f.nb != 4 || !dtype || !format || !k || !c || !h || !w) return CUDNN_STATUS_BAD_PARAM;
  *dtype = cudnnDataType_t(d->f.dtype);
  *format = cudnnTensorFormat_t(d->f.format);
  *k = d->f.dim[0], *c = d->f.dim[1], *h = d->f.dim[2], *w = d->f.dim[3];
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnGetFilterNdDescriptor(const cudnnFilterDescriptor_t d, int requested, cudnnDataType_t* dtype,
                                         cudnnTensorFormat_t* format, int* nb, int dims[]) {
  if (!ok(d) || !dtype || !format || !nb || requested < 0 || (requested && !dims)) return CUDNN_STATUS_BAD_PARAM;
  *dtype = cudnnDataType_t(d->f.dtype);
  *format = cudnnTensorFormat_t(d->f.format);
  *nb = d->f.nb;
  for (int k = 0; k < requested && k < d->f.nb; k++) dims[k] = d->f.dim[k];
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnGetFilterSizeInBytes(const cudnnFilterDescriptor_t d, size_t* size) {
  if (!ok(d) || !size) return CUDNN_STATUS_BAD_PARAM;
  *size = size_t(dnn::filter_count(d->f)) * size_t(elem_size(d->f.dtype));
  return CUDNN_STATUS_SUCCESS;
}

// ------------------------------------------------------------ convolution descriptors

cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t* d) {
  cudnnStatus_t s = create(d);
  if (s == CUDNN_STATUS_SUCCESS) (*d)->c.groups = 1;
  return s;
}
cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t d) {
  if (!d) return CUDNN_STATUS_SUCCESS;
  return destroy_checked(d);
}
cudnnStatus_t cudnnSetConvolutionNdDescriptor(cudnnConvolutionDescriptor_t d, int nb, const int pad[],
                                              const int stride[], const int dil[], cudnnConvolutionMode_t mode,
                                              cudnnDataType_t compute) {
  if (!d || d->magic != kAlive || !pad || !stride || !dil || nb < 1 || nb > 6 || !valid_dtype(compute))
    return CUDNN_STATUS_BAD_PARAM;
  DnnConv c = d->c;
  c.nb = nb, c.mode = mode, c.dtype = compute;
  for (int k = 0; k < nb; k++) c.pad[k] = pad[k], c.stride[k] = stride[k], c.dil[k] = dil[k];
  if (dnn::check_conv(c) == dnn::kBadParam) return CUDNN_STATUS_BAD_PARAM;
  d->c = c;
  d->set = true;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t d, int pad_h, int pad_w, int u, int v,
                                              int dil_h, int dil_w, cudnnConvolutionMode_t mode,
                                              cudnnDataType_t compute) {
  int pad[2] = {pad_h, pad_w}, stride[2] = {u, v}, dil[2] = {dil_h, dil_w};
  return cudnnSetConvolutionNdDescriptor(d, 2, pad, stride, dil, mode, compute);
}
cudnnStatus_t cudnnGetConvolution2dDescriptor(const cudnnConvolutionDescriptor_t d, int* pad_h, int* pad_w, int* u,
                                              int* v, int* dil_h, int* dil_w, cudnnConvolutionMode_t* mode,
                                              cudnnDataType_t* compute) {
  if (!ok(d) || d->c.nb != 2 || !pad_h || !pad_w || !u || !v || !dil_h || !dil_w || !mode || !compute)
    return CUDNN_STATUS_BAD_PARAM;
  *pad_h = d->c.pad[0], *pad_w = d->c.pad[1], *u = d->c.stride[0], *v = d->c.stride[1];
  *dil_h = d->c.dil[0], *dil_w = d->c.dil[1];
  *mode = cudnnConvolutionMode_t(d->c.mode);
  *compute = cudnnDataType_t(d->c.dtype);
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnGetConvolutionNdDescriptor(const cudnnConvolutionDescriptor_t d, int requested, int* nb, int pad[],
                                              int stride[], int dil[], cudnnConvolutionMode_t* mode,
                                              cudnnDataType_t* compute) {
  if (!ok(d) || !nb || !mode || !compute || requested < 0 || (requested && (!pad || !stride || !dil)))
    return CUDNN_STATUS_BAD_PARAM;
  *nb = d->c.nb, *mode = cudnnConvolutionMode_t(d->c.mode), *compute = cudnnDataType_t(d->c.dtype);
  for (int k = 0; k < requested && k < d->c.nb; k++) pad[k] = d->c.pad[k], stride[k] = d->c.stride[k], dil[k] = d->c.dil[k];
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t d, int groups) {
  if (!d || d->magic != kAlive || groups < 1) return CUDNN_STATUS_BAD_PARAM;
  d->c.groups = groups;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnGetConvolutionGroupCount(cudnnConvolutionDescriptor_t d, int* groups) {
  if (!d || d->magic != kAlive || !groups) return CUDNN_STATUS_BAD_PARAM;
  *groups = d->c.groups;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t d, cudnnMathType_t math) {
  if (!d || d->magic != kAlive || math < 0 || math > CUDNN_FMA_MATH) return CUDNN_STATUS_BAD_PARAM;
  d->c.math = math;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnGetConvolutionMathType(cudnnConvolutionDescriptor_t d, cudnnMathType_t* math) {
  if (!d || d->magic != kAlive || !math) return CUDNN_STATUS_BAD_PARAM;
  *math = cudnnMathType_t(d->c.math);
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnGetConvolutionNdForwardOutputDim(const cudnnConvolutionDescriptor_t c,
                                                    const cudnnTensorDescriptor_t x, const cudnnFilterDescriptor_t w,
                                                    int nb, int out[]) {
  if (!ok(c) || !ok(x) || !ok(w) || !out || nb != x->t.nb) return CUDNN_STATUS_BAD_PARAM;
  int32_t o[4];
  if (int32_t s = dnn::conv_output(x->t, w->f, c->c, o)) return st(s);
  for (int k = 0; k < 4; k++) out[k] = o[k];
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnGetConvolution2dForwardOutputDim(const cudnnConvolutionDescriptor_t c,
                                                    const cudnnTensorDescriptor_t x, const cudnnFilterDescriptor_t w,
                                                    int* n, int* ch, int* h, int* wd) {
  if (!n || !ch || !h || !wd) return CUDNN_STATUS_BAD_PARAM;
  int o[4];
  if (!ok(x) || x->t.nb != 4) return CUDNN_STATUS_BAD_PARAM;
  if (cudnnStatus_t s = cudnnGetConvolutionNdForwardOutputDim(c, x, w, 4, o)) return s;
  *n = o[0], *ch = o[1], *h = o[2], *wd = o[3];
  return CUDNN_STATUS_SUCCESS;
}

// ------------------------------------------------------------ algorithms

cudnnStatus_t cudnnGetConvolutionForwardAlgorithmMaxCount(cudnnHandle_t h, int* count) {
  if (!ok(h) || !count) return CUDNN_STATUS_BAD_PARAM;
  *count = 1;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithmMaxCount(cudnnHandle_t h, int* count) {
  return cudnnGetConvolutionForwardAlgorithmMaxCount(h, count);
}
cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(cudnnHandle_t h, int* count) {
  return cudnnGetConvolutionForwardAlgorithmMaxCount(h, count);
}

cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(cudnnHandle_t h, const cudnnTensorDescriptor_t x,
                                                     const cudnnFilterDescriptor_t w,
                                                     const cudnnConvolutionDescriptor_t c,
                                                     const cudnnTensorDescriptor_t y, const int requested,
                                                     int* returned, cudnnConvolutionFwdAlgoPerf_t* perf) {
  int32_t shapes;
  if (!ok(h)) return CUDNN_STATUS_BAD_PARAM;
  if (cudnnStatus_t s = conv_shapes(x, w, c, y, &shapes)) return s;
  return one_algo<cudnnConvolutionFwdAlgoPerf_t, cudnnConvolutionFwdAlgo_t>(requested, returned, perf, c, shapes);
}
cudnnStatus_t cudnnFindConvolutionForwardAlgorithm(cudnnHandle_t h, const cudnnTensorDescriptor_t x,
                                                   const cudnnFilterDescriptor_t w,
                                                   const cudnnConvolutionDescriptor_t c,
                                                   const cudnnTensorDescriptor_t y, const int requested, int* returned,
                                                   cudnnConvolutionFwdAlgoPerf_t* perf) {
  return cudnnGetConvolutionForwardAlgorithm_v7(h, x, w, c, y, requested, returned, perf);
}
cudnnStatus_t cudnnFindConvolutionForwardAlgorithmEx(cudnnHandle_t h, const cudnnTensorDescriptor_t x, const void*,
                                                     const cudnnFilterDescriptor_t w, const void*,
                                                     const cudnnConvolutionDescriptor_t c,
                                                     const cudnnTensorDescriptor_t y, void*, const int requested,
                                                     int* returned, cudnnConvolutionFwdAlgoPerf_t* perf, void*,
                                                     size_t) {
  return cudnnGetConvolutionForwardAlgorithm_v7(h, x, w, c, y, requested, returned, perf);
}
cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(cudnnHandle_t h, const cudnnFilterDescriptor_t w,
                                                          const cudnnTensorDescriptor_t dy,
                                                          const cudnnConvolutionDescriptor_t c,
                                                          const cudnnTensorDescriptor_t dx, const int requested,
                                                          int* returned, cudnnConvolutionBwdDataAlgoPerf_t* perf) {
  int32_t shapes;
  if (!ok(h)) return CUDNN_STATUS_BAD_PARAM;
  if (cudnnStatus_t s = conv_shapes(dx, w, c, dy, &shapes)) return s;
  return one_algo<cudnnConvolutionBwdDataAlgoPerf_t, cudnnConvolutionBwdDataAlgo_t>(requested, returned, perf, c,
                                                                                    shapes);
}
cudnnStatus_t cudnnFindConvolutionBackwardDataAlgorithm(cudnnHandle_t h, const cudnnFilterDescriptor_t w,
                                                        const cudnnTensorDescriptor_t dy,
                                                        const cudnnConvolutionDescriptor_t c,
                                                        const cudnnTensorDescriptor_t dx, const int requested,
                                                        int* returned, cudnnConvolutionBwdDataAlgoPerf_t* perf) {
  return cudnnGetConvolutionBackwardDataAlgorithm_v7(h, w, dy, c, dx, requested, returned, perf);
}
cudnnStatus_t cudnnFindConvolutionBackwardDataAlgorithmEx(cudnnHandle_t h, const cudnnFilterDescriptor_t w,
                                                          const void*, const cudnnTensorDescriptor_t dy, const void*,
                                                          const cudnnConvolutionDescriptor_t c,
                                                          const cudnnTensorDescriptor_t dx, void*, const int requested,
                                                          int* returned, cudnnConvolutionBwdDataAlgoPerf_t* perf,
                                                          void*, size_t) {
  return cudnnGetConvolutionBackwardDataAlgorithm_v7(h, w, dy, c, dx, requested, returned, perf);
}
cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(cudnnHandle_t h, const cudnnTensorDescriptor_t x,
                                                            const cudnnTensorDescriptor_t dy,
                                                            const cudnnConvolutionDescriptor_t c,
                                                            const cudnnFilterDescriptor_t dw, const int requested,
                                                            int* returned, cudnnConvolutionBwdFilterAlgoPerf_t* perf) {
  int32_t shapes;
  if (!ok(h)) return CUDNN_STATUS_BAD_PARAM;
  if (cudnnStatus_t s = conv_shapes(x, dw, c, dy, &shapes)) return s;
  return one_algo<cudnnConvolutionBwdFilterAlgoPerf_t, cudnnConvolutionBwdFilterAlgo_t>(requested, returned, perf, c,
                                                                                        shapes);
}
cudnnStatus_t cudnnFindConvolutionBackwardFilterAlgorithm(cudnnHandle_t h, const cudnnTensorDescriptor_t x,
                                                          const cudnnTensorDescriptor_t dy,
                                                          const cudnnConvolutionDescriptor_t c,
                                                          const cudnnFilterDescriptor_t dw, const int requested,
                                                          int* returned, cudnnConvolutionBwdFilterAlgoPerf_t* perf) {
  return cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, x, dy, c, dw, requested, returned, perf);
}
cudnnStatus_t cudnnFindConvolutionBackwardFilterAlgorithmEx(cudnnHandle_t h, const cudnnTensorDescriptor_t x,
                                                            const void*, const cudnnTensorDescriptor_t dy, const void*,
                                                            const cudnnConvolutionDescriptor_t c,
                                                            const cudnnFilterDescriptor_t dw, void*,
                                                            const int requested, int* returned,
                                                            cudnnConvolutionBwdFilterAlgoPerf_t* perf, void*, size_t) {
  return cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, x, dy, c, dw, requested, returned, perf);
}

cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(cudnnHandle_t h, const cudnnTensorDescriptor_t x,
                                                      const cudnnFilterDescriptor_t w,
                                                      const cudnnConvolutionDescriptor_t c,
                                                      const cudnnTensorDescriptor_t y, cudnnConvolutionFwdAlgo_t,
                                                      size_t* size) {
  int32_t shapes;
  if (!ok(h) || !size) return CUDNN_STATUS_BAD_PARAM;
  if (cudnnStatus_t s = conv_shapes(x, w, c, y, &shapes)) return s;
  if (shapes) return st(shapes);
  *size = 0;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(cudnnHandle_t h, const cudnnFilterDescriptor_t w,
                                                           const cudnnTensorDescriptor_t dy,
                                                           const cudnnConvolutionDescriptor_t c,
                                                           const cudnnTensorDescriptor_t dx,
                                                           cudnnConvolutionBwdDataAlgo_t, size_t* size) {
  return cudnnGetConvolutionForwardWorkspaceSize(h, dx, w, c, dy, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, size);
}
cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(cudnnHandle_t h, const cudnnTensorDescriptor_t x,
                                                             const cudnnTensorDescriptor_t dy,
                                                             const cudnnConvolutionDescriptor_t c,
                                                             const cudnnFilterDescriptor_t dw,
                                                             cudnnConvolutionBwdFilterAlgo_t, size_t* size) {
  return cudnnGetConvolutionForwardWorkspaceSize(h, x, dw, c, dy, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, size);
}

// ------------------------------------------------------------ convolutions

cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t h, const void* alpha, const cudnnTensorDescriptor_t xd,
                                      const void* x, const cudnnFilterDescriptor_t wd, const void* w,
                                      const cudnnConvolutionDescriptor_t cd, cudnnConvolutionFwdAlgo_t algo, void*,
                                      size_t, const void* beta, const cudnnTensorDescriptor_t yd, void* y) {
  DnnConvFwdReq rq{};
  int32_t shapes;
  if (!ok(h) || !x || !w || !y || !scalars(alpha, beta, &rq.alpha, &rq.beta)) return CUDNN_STATUS_BAD_PARAM;
  if (cudnnStatus_t s = conv_shapes(xd, wd, cd, yd, &shapes)) return s;
  if (shapes) return st(shapes);
  rq.stream = U(h->stream);
  rq.x = xd->t, rq.w = wd->f, rq.conv = cd->c, rq.y = yd->t;
  rq.xp = U(x), rq.wp = U(w), rq.yp = U(y), rq.algo = algo;
  return status(post<Op::DnnConvFwd>(rq));
}
// y = act(alpha1 conv(x, w) + alpha2 z + bias). The algorithm is informative
// (as for cudnnConvolutionForward): RELU and IDENTITY run with any.
cudnnStatus_t cudnnConvolutionBiasActivationForward(
    cudnnHandle_t h, const void* alpha1, const cudnnTensorDescriptor_t xd, const void* x,
    const cudnnFilterDescriptor_t wd, const void* w, const cudnnConvolutionDescriptor_t cd,
    cudnnConvolutionFwdAlgo_t algo, void*, size_t, const void* alpha2, const cudnnTensorDescriptor_t zd, const void* z,
    const cudnnTensorDescriptor_t bd, const void* bias, const cudnnActivationDescriptor_t ad,
    const cudnnTensorDescriptor_t yd, void* y) {
  DnnConvBiasActReq rq{};
  if (!ok(h) || !ok(zd) || !ok(bd) || !ok(ad) || !x || !w || !bias || !y ||
      !scalars(alpha1, alpha2, &rq.alpha1, &rq.alpha2))
    return CUDNN_STATUS_BAD_PARAM;
  if (rq.alpha2 != 0 && !z) return CUDNN_STATUS_BAD_PARAM;
  if (!ok(xd) || !ok(wd) || !ok(cd) || !ok(yd)) return CUDNN_STATUS_BAD_PARAM;
  if (int32_t s = dnn::check_conv_bias_act(xd->t, wd->f, cd->c, zd->t, bd->t, ad->a, yd->t)) return st(s);
  rq.stream = U(h->stream);
  rq.x = xd->t, rq.w = wd->f, rq.conv = cd->c, rq.z = zd->t, rq.bias = bd->t, rq.act = ad->a, rq.y = yd->t;
  rq.xp = U(x), rq.wp = U(w), rq.zp = U(z), rq.biasp = U(bias), rq.yp = U(y), rq.algo = algo;
  return status(post<Op::DnnConvBiasAct>(rq));
}
cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t h, const void* alpha, const cudnnFilterDescriptor_t wd,
                                           const void* w, const cudnnTensorDescriptor_t dyd, const void* dy,
                                           const cudnnConvolutionDescriptor_t cd, cudnnConvolutionBwdDataAlgo_t algo,
                                           void*, size_t, const void* beta, const cudnnTensorDescriptor_t dxd,
                                           void* dx) {
  DnnConvBwdDataReq rq{};
  int32_t shapes;
  if (!ok(h) || !w || !dy || !dx || !scalars(alpha, beta, &rq.alpha, &rq.beta)) return CUDNN_STATUS_BAD_PARAM;
  if (cudnnStatus_t s = conv_shapes(dxd, wd, cd, dyd, &shapes)) return s;
  if (shapes) return st(shapes);
  rq.stream = U(h->stream);
  rq.w = wd->f, rq.dy = dyd->t, rq.conv = cd->c, rq.dx = dxd->t;
  rq.wp = U(w), rq.dyp = U(dy), rq.dxp = U(dx), rq.algo = algo;
  return status(post<Op::DnnConvBwdData>(rq));
}
cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t h, const void* alpha, const cudnnTensorDescriptor_t xd,
                                             const void* x, const cudnnTensorDescriptor_t dyd, const void* dy,
                                             const cudnnConvolutionDescriptor_t cd,
                                             cudnnConvolutionBwdFilterAlgo_t algo, void*, size_t, const void* beta,
                                             const cudnnFilterDescriptor_t dwd, void* dw) {
  DnnConvBwdFilterReq rq{};
  int32_t shapes;
  if (!ok(h) || !x || !dy || !dw || !scalars(alpha, beta, &rq.alpha, &rq.beta)) return CUDNN_STATUS_BAD_PARAM;
  if (cudnnStatus_t s = conv_shapes(xd, dwd, cd, dyd, &shapes)) return s;
  if (shapes) return st(shapes);
  rq.stream = U(h->stream);
  rq.x = xd->t, rq.dy = dyd->t, rq.conv = cd->c, rq.dw = dwd->f;
  rq.xp = U(x), rq.dyp = U(dy), rq.dwp = U(dw), rq.algo = algo;
  return status(post<Op::DnnConvBwdFilter>(rq));
}
cudnnStatus_t cudnnConvolutionBackwardBias(cudnnHandle_t h, const void* alpha, const cudnnTensorDescriptor_t dyd,
                                           const void* dy, const void* beta, const cudnnTensorDescriptor_t dbd,
                                           void* db) {
  DnnConvBwdBiasReq rq{};
  if (!ok(h) || !ok(dyd) || !ok(dbd) || !dy || !db || !scalars(alpha, beta, &rq.alpha, &rq.beta))
    return CUDNN_STATUS_BAD_PARAM;
  if (int32_t s = dnn::check_bias(dyd->t, dbd->t)) return st(s);
  rq.stream = U(h->stream);
  rq.dy = dyd->t, rq.db = dbd->t, rq.dyp = U(dy), rq.dbp = U(db);
  return status(post<Op::DnnConvBwdBias>(rq));
}

// ------------------------------------------------------------ tensor ops

cudnnStatus_t cudnnAddTensor(cudnnHandle_t h, const void* alpha, const cudnnTensorDescriptor_t ad, const void* a,
                             const void* beta, const cudnnTensorDescriptor_t cd, void* c) {
  DnnAddTensorReq rq{};
  if (!ok(h) || !ok(ad) || !ok(cd) || !a || !c || !scalars(alpha, beta, &rq.alpha, &rq.beta))
    return CUDNN_STATUS_BAD_PARAM;
  if (int32_t s = dnn::check_add(ad->t, cd->t)) return st(s);
  rq.stream = U(h->stream);
  rq.a = ad->t, rq.c = cd->t, rq.ap = U(a), rq.cp = U(c);
  return status(post<Op::DnnAddTensor>(rq));
}

// ------------------------------------------------------------ pooling

cudnnStatus_t cudnnCreatePoolingDescriptor(cudnnPoolingDescriptor_t* d) { return create(d); }
cudnnStatus_t cudnnDestroyPoolingDescriptor(cudnnPoolingDescriptor_t d) {
  if (!d) return CUDNN_STATUS_SUCCESS;
  return destroy_checked(d);
}
cudnnStatus_t cudnnSetPoolingNdDescriptor(cudnnPoolingDescriptor_t d, const cudnnPoolingMode_t mode,
                                          const cudnnNanPropagation_t nan, int nb, const int window[],
                                          const int padding[], const int stride[]) {
  if (!d || d->magic != kAlive || !window || !padding || !stride || nb < 1 || nb > 6) return CUDNN_STATUS_BAD_PARAM;
  DnnPool p{};
  p.mode = mode, p.nan_opt = nan, p.nb = nb;
  for (int k = 0; k < nb; k++) p.window[k] = window[k], p.padding[k] = padding[k], p.stride[k] = stride[k];
  if (dnn::check_pool(p) == dnn::kBadParam || (nan != 0 && nan != 1)) return CUDNN_STATUS_BAD_PARAM;
  d->p = p;
  d->set = true;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetPooling2dDescriptor(cudnnPoolingDescriptor_t d, cudnnPoolingMode_t mode,
                                          cudnnNanPropagation_t nan, int wh, int ww, int ph, int pw, int sh, int sw) {
  int window[2] = {wh, ww}, padding[2] = {ph, pw}, stride[2] = {sh, sw};
  return cudnnSetPoolingNdDescriptor(d, mode, nan, 2, window, padding, stride);
}
cudnnStatus_t cudnnGetPooling2dDescriptor(const cudnnPoolingDescriptor_t d, cudnnPoolingMode_t* mode,
                                          cudnnNanPropagation_t* nan, int* wh, int* ww, int* ph, int* pw, int* sh,
                                          int* sw) {
  if (!ok(d) || d->p.nb != 2 || !mode || !nan || !wh || !ww || !ph || !pw || !sh || !sw)
    return CUDNN_STATUS_BAD_PARAM;
  *mode = cudnnPoolingMode_t(d->p.mode);
  *nan = cudnnNanPropagation_t(d->p.nan_opt);
  *wh = d->p.window[0], *ww = d->p.window[1], *ph = d->p.padding[0], *pw = d->p.padding[1];
  *sh = d->p.stride[0], *sw = d->p.stride[1];
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnGetPoolingNdDescriptor(const cudnnPoolingDescriptor_t d, int requested, cudnnPoolingMode_t* mode,
                                          cudnnNanPropagation_t* nan, int* nb, int window[], int padding[],
                                          int stride[]) {
  if (!ok(d) || !mode || !nan || !nb || requested < 0 || (requested && (!window || !padding || !stride)))
    return CUDNN_STATUS_BAD_PARAM;
  *mode = cudnnPoolingMode_t(d->p.mode), *nan = cudnnNanPropagation_t(d->p.nan_opt), *nb = d->p.nb;
  for (int k = 0; k < requested && k < d->p.nb; k++)
    window[k] = d->p.window[k], padding[k] = d->p.padding[k], stride[k] = d->p.stride[k];
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnGetPoolingNdForwardOutputDim(const cudnnPoolingDescriptor_t d, const cudnnTensorDescriptor_t x,
                                                int nb, int out[]) {
  if (!ok(d) || !ok(x) || !out || nb != x->t.nb) return CUDNN_STATUS_BAD_PARAM;
  int32_t o[4];
  if (int32_t s = dnn::pool_output(d->p, x->t, o)) return st(s);
  for (int k = 0; k < 4; k++) out[k] = o[k];
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnGetPooling2dForwardOutputDim(const cudnnPoolingDescriptor_t d, const cudnnTensorDescriptor_t x,
                                                int* n, int* c, int* h, int* w) {
  if (!n || !c || !h || !w || !ok(x) || x->t.nb != 4) return CUDNN_STATUS_BAD_PARAM;
  int o[4];
  if (cudnnStatus_t s = cudnnGetPoolingNdForwardOutputDim(d, x, 4, o)) return s;
  *n = o[0], *c = o[1], *h = o[2], *w = o[3];
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnPoolingForward(cudnnHandle_t h, const cudnnPoolingDescriptor_t pd, const void* alpha,
                                  const cudnnTensorDescriptor_t xd, const void* x, const void* beta,
                                  const cudnnTensorDescriptor_t yd, void* y) {
  DnnPoolFwdReq rq{};
  if (!ok(h) || !ok(pd) || !ok(xd) || !ok(yd) || !x || !y || !scalars(alpha, beta, &rq.alpha, &rq.beta))
    return CUDNN_STATUS_BAD_PARAM;
  if (int32_t s = dnn::check_pool_shapes(pd->p, xd->t, yd->t)) return st(s);
  rq.stream = U(h->stream);
  rq.pool = pd->p, rq.x = xd->t, rq.y = yd->t, rq.xp = U(x), rq.yp = U(y);
  return status(post<Op::DnnPoolFwd>(rq));
}
cudnnStatus_t cudnnPoolingBackward(cudnnHandle_t h, const cudnnPoolingDescriptor_t pd, const void* alpha,
                                   const cudnnTensorDescriptor_t yd, const void* y, const cudnnTensorDescriptor_t dyd,
                                   const void* dy, const cudnnTensorDescriptor_t xd, const void* x, const void* beta,
                                   const cudnnTensorDescriptor_t dxd, void* dx) {
  DnnPoolBwdReq rq{};
  if (!ok(h) || !ok(pd) || !ok(yd) || !ok(dyd) || !ok(xd) || !ok(dxd) || !y || !dy || !x || !dx ||
      !scalars(alpha, beta, &rq.alpha, &rq.beta))
    return CUDNN_STATUS_BAD_PARAM;
  int32_t s = dnn::check_pool_shapes(pd->p, xd->t, yd->t);
  if (!s) s = dnn::check_same(yd->t, dyd->t);
  if (!s) s = dnn::check_same(xd->t, dxd->t);
  if (s) return st(s);
  rq.stream = U(h->stream);
  rq.pool = pd->p, rq.y = yd->t, rq.dy = dyd->t, rq.x = xd->t, rq.dx = dxd->t;
  rq.yp = U(y), rq.dyp = U(dy), rq.xp = U(x), rq.dxp = U(dx);
  return status(post<Op::DnnPoolBwd>(rq));
}

// ------------------------------------------------------------ activations

cudnnStatus_t cudnnCreateActivationDescriptor(cudnnActivationDescriptor_t* d) { return create(d); }
cudnnStatus_t cudnnDestroyActivationDescriptor(cudnnActivationDescriptor_t d) {
  if (!d) return CUDNN_STATUS_SUCCESS;
  return destroy_checked(d);
}
cudnnStatus_t cudnnSetActivationDescriptor(cudnnActivationDescriptor_t d, cudnnActivationMode_t mode,
                                           cudnnNanPropagation_t nan, double coef) {
  if (!d || d->magic != kAlive) return CUDNN_STATUS_BAD_PARAM;
  DnnAct a{};
  a.mode = mode, a.nan_opt = nan, a.coef = coef;
  if (dnn::check_act(a)) return CUDNN_STATUS_BAD_PARAM;
  if (mode == CUDNN_ACTIVATION_SWISH) a.coef = d->set && d->a.mode == CUDNN_ACTIVATION_SWISH ? d->a.coef : 1.0;
  d->a = a;
  d->set = true;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnGetActivationDescriptor(const cudnnActivationDescriptor_t d, cudnnActivationMode_t* mode,
                                           cudnnNanPropagation_t* nan, double* coef) {
  if (!ok(d) || !mode || !nan || !coef) return CUDNN_STATUS_BAD_PARAM;
  *mode = cudnnActivationMode_t(d->a.mode);
  *nan = cudnnNanPropagation_t(d->a.nan_opt);
  *coef = d->a.coef;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetActivationDescriptorSwishBeta(cudnnActivationDescriptor_t d, double beta) {
  if (!ok(d) || !(beta == beta)) return CUDNN_STATUS_BAD_PARAM;
  if (d->a.mode == CUDNN_ACTIVATION_SWISH) d->a.coef = beta;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnGetActivationDescriptorSwishBeta(cudnnActivationDescriptor_t d, double* beta) {
  if (!ok(d) || !beta) return CUDNN_STATUS_BAD_PARAM;
  *beta = d->a.mode == CUDNN_ACTIVATION_SWISH ? d->a.coef : 1.0;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnActivationForward(cudnnHandle_t h, cudnnActivationDescriptor_t ad, const void* alpha,
                                     const cudnnTensorDescriptor_t xd, const void* x, const void* beta,
                                     const cudnnTensorDescriptor_t yd, void* y) {
  DnnActFwdReq rq{};
  if (!ok(h) || !ok(ad) || !ok(xd) || !ok(yd) || !x || !y || !scalars(alpha, beta, &rq.alpha, &rq.beta))
    return CUDNN_STATUS_BAD_PARAM;
  if (int32_t s = dnn::check_same(xd->t, yd->t)) return st(s);
  rq.stream = U(h->stream);
  rq.act = ad->a, rq.x = xd->t, rq.y = yd->t, rq.xp = U(x), rq.yp = U(y);
  return status(post<Op::DnnActFwd>(rq));
}
cudnnStatus_t cudnnActivationBackward(cudnnHandle_t h, cudnnActivationDescriptor_t ad, const void* alpha,
                                      const cudnnTensorDescriptor_t yd, const void* y,
                                      const cudnnTensorDescriptor_t dyd, const void* dy,
                                      const cudnnTensorDescriptor_t xd, const void* x, const void* beta,
                                      const cudnnTensorDescriptor_t dxd, void* dx) {
  DnnActBwdReq rq{};
  if (!ok(h) || !ok(ad) || !ok(yd) || !ok(dyd) || !ok(xd) || !ok(dxd) || !y || !dy || !x || !dx ||
      !scalars(alpha, beta, &rq.alpha, &rq.beta))
    return CUDNN_STATUS_BAD_PARAM;
  int32_t s = dnn::check_same(xd->t, yd->t);
  if (!s) s = dnn::check_same(xd->t, dyd->t);
  if (!s) s = dnn::check_same(xd->t, dxd->t);
  if (s) return st(s);
  rq.stream = U(h->stream);
  rq.act = ad->a, rq.y = yd->t, rq.dy = dyd->t, rq.x = xd->t, rq.dx = dxd->t;
  rq.yp = U(y), rq.dyp = U(dy), rq.xp = U(x), rq.dxp = U(dx);
  return status(post<Op::DnnActBwd>(rq));
}

// ------------------------------------------------------------ softmax

cudnnStatus_t cudnnSoftmaxForward(cudnnHandle_t h, cudnnSoftmaxAlgorithm_t algo, cudnnSoftmaxMode_t mode,
                                  const void* alpha, const cudnnTensorDescriptor_t xd, const void* x,
                                  const void* beta, const cudnnTensorDescriptor_t yd, void* y) {
  DnnSoftmaxFwdReq rq{};
  if (!ok(h) || !ok(xd) || !ok(yd) || !x || !y || !scalars(alpha, beta, &rq.alpha, &rq.beta))
    return CUDNN_STATUS_BAD_PARAM;
  int32_t s = dnn::check_softmax(algo, mode);
  if (!s) s = dnn::check_same(xd->t, yd->t);
  if (s) return st(s);
  rq.stream = U(h->stream);
  rq.algo = algo, rq.mode = mode, rq.x = xd->t, rq.y = yd->t, rq.xp = U(x), rq.yp = U(y);
  return status(post<Op::DnnSoftmaxFwd>(rq));
}
cudnnStatus_t cudnnSoftmaxBackward(cudnnHandle_t h, cudnnSoftmaxAlgorithm_t algo, cudnnSoftmaxMode_t mode,
                                   const void* alpha, const cudnnTensorDescriptor_t yd, const void* y,
                                   const cudnnTensorDescriptor_t dyd, const void* dy, const void* beta,
                                   const cudnnTensorDescriptor_t dxd, void* dx) {
  DnnSoftmaxBwdReq rq{};
  if (!ok(h) || !ok(yd) || !ok(dyd) || !ok(dxd) || !y || !dy || !dx || !scalars(alpha, beta, &rq.alpha, &rq.beta))
    return CUDNN_STATUS_BAD_PARAM;
  int32_t s = dnn::check_softmax(algo, mode);
  if (!s) s = dnn::check_same(yd->t, dyd->t);
  if (!s) s = dnn::check_same(yd->t, dxd->t);
  if (s) return st(s);
  rq.stream = U(h->stream);
  rq.algo = algo, rq.mode = mode, rq.y = yd->t, rq.dy = dyd->t, rq.dx = dxd->t;
  rq.yp = U(y), rq.dyp = U(dy), rq.dxp = U(dx);
  return status(post<Op::DnnSoftmaxBwd>(rq));
}

// ------------------------------------------------------------ element-wise tensor ops

cudnnStatus_t cudnnTransformTensor(cudnnHandle_t h, const void* alpha, const cudnnTensorDescriptor_t xd,
                                   const void* x, const void* beta, const cudnnTensorDescriptor_t yd, void* y) {
  DnnTransformReq rq{};
  if (!ok(h) || !ok(xd) || !ok(yd) || !x || !y || !scalars(alpha, beta, &rq.alpha, &rq.beta))
    return CUDNN_STATUS_BAD_PARAM;
  if (int32_t s = dnn::check_transform(xd->t, yd->t)) return st(s);
  rq.stream = U(h->stream);
  rq.x = xd->t, rq.y = yd->t, rq.xp = U(x), rq.yp = U(y);
  return status(post<Op::DnnTransform>(rq));
}

cudnnStatus_t cudnnCreateOpTensorDescriptor(cudnnOpTensorDescriptor_t* d) { return create(d); }
cudnnStatus_t cudnnDestroyOpTensorDescriptor(cudnnOpTensorDescriptor_t d) {
  if (!d) return CUDNN_STATUS_SUCCESS;
  return destroy_checked(d);
}
cudnnStatus_t cudnnSetOpTensorDescriptor(cudnnOpTensorDescriptor_t d, cudnnOpTensorOp_t op, cudnnDataType_t compute,
                                         cudnnNanPropagation_t nan) {
  if (!d || d->magic != kAlive || op < 0 || op > CUDNN_OP_TENSOR_NOT || !valid_dtype(compute) || (nan != 0 && nan != 1))
    return CUDNN_STATUS_BAD_PARAM;
  d->op = op, d->nan_opt = nan, d->set = true;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnGetOpTensorDescriptor(const cudnnOpTensorDescriptor_t d, cudnnOpTensorOp_t* op,
                                         cudnnDataType_t* compute, cudnnNanPropagation_t* nan) {
  if (!ok(d) || !op || !compute || !nan) return CUDNN_STATUS_BAD_PARAM;
  *op = cudnnOpTensorOp_t(d->op), *compute = CUDNN_DATA_FLOAT, *nan = cudnnNanPropagation_t(d->nan_opt);
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnOpTensor(cudnnHandle_t h, const cudnnOpTensorDescriptor_t od, const void* alpha1,
                            const cudnnTensorDescriptor_t ad, const void* a, const void* alpha2,
                            const cudnnTensorDescriptor_t bd, const void* b, const void* beta,
                            const cudnnTensorDescriptor_t cd, void* c) {
  DnnOpTensorReq rq{};
  double unused;
  if (!ok(h) || !ok(od) || !ok(ad) || !ok(cd) || !a || !c || !scalars(alpha1, beta, &rq.alpha1, &rq.beta) ||
      !scalars(alpha2, beta, &rq.alpha2, &unused))
    return CUDNN_STATUS_BAD_PARAM;
  const bool uses_b = dnn::op_uses_b(od->op);
  if (uses_b && (!ok(bd) || !b)) return CUDNN_STATUS_BAD_PARAM;
  if (int32_t s = dnn::check_op_tensor(od->op, od->nan_opt, ad->t, uses_b ? bd->t : ad->t, cd->t)) return st(s);
  rq.stream = U(h->stream);
  rq.op = od->op, rq.nan_opt = od->nan_opt, rq.a = ad->t, rq.c = cd->t, rq.ap = U(a), rq.cp = U(c);
  if (uses_b) rq.b = bd->t, rq.bp = U(b);
  return status(post<Op::DnnOpTensor>(rq));
}

cudnnStatus_t cudnnSetTensor(cudnnHandle_t h, const cudnnTensorDescriptor_t yd, void* y, const void* value) {
  DnnSetTensorReq rq{};
  if (!ok(h) || !ok(yd) || !y || !value) return CUDNN_STATUS_BAD_PARAM;
  if (int32_t s = dnn::check_tensor(yd->t)) return st(s);
  rq.value = value_of(value, yd->t.dtype);  // in the tensor's own type
  rq.stream = U(h->stream), rq.y = yd->t, rq.yp = U(y);
  return status(post<Op::DnnSetTensor>(rq));
}

cudnnStatus_t cudnnScaleTensor(cudnnHandle_t h, const cudnnTensorDescriptor_t yd, void* y, const void* alpha) {
  DnnScaleTensorReq rq{};
  double unused;
  if (!ok(h) || !ok(yd) || !y || !scalars(alpha, alpha, &rq.alpha, &unused)) return CUDNN_STATUS_BAD_PARAM;
  if (int32_t s = dnn::check_tensor(yd->t)) return st(s);
  rq.stream = U(h->stream), rq.y = yd->t, rq.yp = U(y);
  return status(post<Op::DnnScaleTensor>(rq));
}

// ------------------------------------------------------------ batch normalization

cudnnStatus_t cudnnDeriveBNTensorDescriptor(cudnnTensorDescriptor_t derived, const cudnnTensorDescriptor_t xd,
                                            cudnnBatchNormMode_t mode) {
  if (!derived || derived->magic != kAlive || !ok(xd)) return CUDNN_STATUS_BAD_PARAM;
  DnnTensor bn;
  if (int32_t s = dnn::bn_dims(xd->t, mode, &bn)) return st(s);
  derived->t = bn;
  derived->set = true;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBatchNormalizationForwardTraining(cudnnHandle_t h, cudnnBatchNormMode_t mode, const void* alpha,
                                                     const void* beta, const cudnnTensorDescriptor_t xd, const void* x,
                                                     const cudnnTensorDescriptor_t yd, void* y,
                                                     const cudnnTensorDescriptor_t bnd, const void* scale,
                                                     const void* bias, double factor, void* rmean, void* rvar,
                                                     double eps, void* smean, void* sinv) {
  DnnBnFwdTrainReq rq{};
  if (!ok(h) || !ok(xd) || !ok(yd) || !ok(bnd) || !x || !y || !scale || !bias ||
      !scalars(alpha, beta, &rq.alpha, &rq.beta) || (!rmean) != (!rvar) || (!smean) != (!sinv) ||
      !dnn::finite(factor))
    return CUDNN_STATUS_BAD_PARAM;
  if (int32_t s = dnn::check_bn(mode, xd->t, yd->t, bnd->t, eps)) return st(s);
  rq.stream = U(h->stream), rq.mode = mode;
  rq.x = xd->t, rq.y = yd->t, rq.bn = bnd->t;
  rq.xp = U(x), rq.yp = U(y), rq.scalep = U(scale), rq.biasp = U(bias);
  rq.rmeanp = U(rmean), rq.rvarp = U(rvar), rq.smeanp = U(smean), rq.sinvp = U(sinv);
  rq.factor = factor, rq.eps = eps;
  return status(post<Op::DnnBnFwdTrain>(rq));
}

cudnnStatus_t cudnnBatchNormalizationForwardInference(cudnnHandle_t h, cudnnBatchNormMode_t mode, const void* alpha,
                                                      const void* beta, const cudnnTensorDescriptor_t xd,
                                                      const void* x, const cudnnTensorDescriptor_t yd, void* y,
                                                      const cudnnTensorDescriptor_t bnd, const void* scale,
                                                      const void* bias, const void* mean, const void* var,
                                                      double eps) {
  DnnBnFwdInferReq rq{};
  if (!ok(h) || !ok(xd) || !ok(yd) || !ok(bnd) || !x || !y || !scale || !bias || !mean || !var ||
      !scalars(alpha, beta, &rq.alpha, &rq.beta))
    return CUDNN_STATUS_BAD_PARAM;
  if (int32_t s = dnn::check_bn(mode, xd->t, yd->t, bnd->t, eps)) return st(s);
  rq.stream = U(h->stream), rq.mode = mode;
  rq.x = xd->t, rq.y = yd->t, rq.bn = bnd->t;
  rq.xp = U(x), rq.yp = U(y), rq.scalep = U(scale), rq.biasp = U(bias), rq.meanp = U(mean), rq.varp = U(var);
  rq.eps = eps;
  return status(post<Op::DnnBnFwdInfer>(rq));
}

cudnnStatus_t cudnnBatchNormalizationBackward(cudnnHandle_t h, cudnnBatchNormMode_t mode, const void* alpha_d,
                                              const void* beta_d, const void* alpha_p, const void* beta_p,
                                              const cudnnTensorDescriptor_t xd, const void* x,
                                              const cudnnTensorDescriptor_t dyd, const void* dy,
                                              const cudnnTensorDescriptor_t dxd, void* dx,
                                              const cudnnTensorDescriptor_t bnd, const void* scale, void* dscale,
                                              void* dbias, double eps, const void* smean, const void* sinv) {
  DnnBnBwdReq rq{};
  if (!ok(h) || !ok(xd) || !ok(dyd) || !ok(dxd) || !ok(bnd) || !x || !dy || !dx || !scale || !dscale || !dbias ||
      !scalars(alpha_d, beta_d, &rq.alpha, &rq.beta) || !scalars(alpha_p, beta_p, &rq.alpha_p, &rq.beta_p) ||
      (!smean) != (!sinv))
    return CUDNN_STATUS_BAD_PARAM;
  int32_t s = dnn::check_bn(mode, xd->t, dyd->t, bnd->t, eps);
  if (!s) s = dnn::check_tensor45(dxd->t);
  if (!s && (!dnn::same_dims(xd->t, dxd->t) || xd->t.dtype != dxd->t.dtype)) s = dnn::kBadParam;
  if (s) return st(s);
  rq.stream = U(h->stream), rq.mode = mode;
  rq.x = xd->t, rq.dy = dyd->t, rq.dx = dxd->t, rq.bn = bnd->t;
  rq.xp = U(x), rq.dyp = U(dy), rq.dxp = U(dx), rq.scalep = U(scale), rq.dscalep = U(dscale), rq.dbiasp = U(dbias);
  rq.smeanp = U(smean), rq.sinvp = U(sinv), rq.eps = eps;
  return status(post<Op::DnnBnBwd>(rq));
}

// The *Ex forms: CUDNN_BATCHNORM_OPS_BN (no fused add or activation), which
// needs no work area and no reserve space.
cudnnStatus_t cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(
    cudnnHandle_t h, cudnnBatchNormMode_t mode, cudnnBatchNormOps_t ops, const cudnnTensorDescriptor_t xd,
    const cudnnTensorDescriptor_t, const cudnnTensorDescriptor_t, const cudnnTensorDescriptor_t,
    const cudnnActivationDescriptor_t, size_t* size) {
  if (!ok(h) || !ok(xd) || !size || mode < 0 || mode > 2) return CUDNN_STATUS_BAD_PARAM;
  if (ops != CUDNN_BATCHNORM_OPS_BN) return CUDNN_STATUS_NOT_SUPPORTED;
  *size = 0;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnGetBatchNormalizationBackwardExWorkspaceSize(
    cudnnHandle_t h, cudnnBatchNormMode_t mode, cudnnBatchNormOps_t ops, const cudnnTensorDescriptor_t xd,
    const cudnnTensorDescriptor_t, const cudnnTensorDescriptor_t, const cudnnTensorDescriptor_t,
    const cudnnTensorDescriptor_t, const cudnnTensorDescriptor_t, const cudnnActivationDescriptor_t, size_t* size) {
  if (!ok(h) || !ok(xd) || !size || mode < 0 || mode > 2) return CUDNN_STATUS_BAD_PARAM;
  if (ops != CUDNN_BATCHNORM_OPS_BN) return CUDNN_STATUS_NOT_SUPPORTED;
  *size = 0;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnGetBatchNormalizationTrainingExReserveSpaceSize(cudnnHandle_t h, cudnnBatchNormMode_t mode,
                                                                   cudnnBatchNormOps_t ops,
                                                                   const cudnnActivationDescriptor_t,
                                                                   const cudnnTensorDescriptor_t xd, size_t* size) {
  if (!ok(h) || !ok(xd) || !size || mode < 0 || mode > 2) return CUDNN_STATUS_BAD_PARAM;
  if (ops != CUDNN_BATCHNORM_OPS_BN) return CUDNN_STATUS_NOT_SUPPORTED;
  *size = 0;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnBatchNormalizationForwardTrainingEx(
    cudnnHandle_t h, cudnnBatchNormMode_t mode, cudnnBatchNormOps_t ops, const void* alpha, const void* beta,
    const cudnnTensorDescriptor_t xd, const void* x, const cudnnTensorDescriptor_t, const void*,
    const cudnnTensorDescriptor_t yd, void* y, const cudnnTensorDescriptor_t bnd, const void* scale,
    const void* bias, double factor, void* rmean, void* rvar, double eps, void* smean, void* sinv,
    cudnnActivationDescriptor_t, void*, size_t, void*, size_t) {
  if (ops != CUDNN_BATCHNORM_OPS_BN) return CUDNN_STATUS_NOT_SUPPORTED;
  return cudnnBatchNormalizationForwardTraining(h, mode, alpha, beta, xd, x, yd, y, bnd, scale, bias, factor, rmean,
                                                rvar, eps, smean, sinv);
}
cudnnStatus_t cudnnBatchNormalizationBackwardEx(
    cudnnHandle_t h, cudnnBatchNormMode_t mode, cudnnBatchNormOps_t ops, const void* alpha_d, const void* beta_d,
    const void* alpha_p, const void* beta_p, const cudnnTensorDescriptor_t xd, const void* x,
    const cudnnTensorDescriptor_t, const void*, const cudnnTensorDescriptor_t dyd, const void* dy,
    const cudnnTensorDescriptor_t, void*, const cudnnTensorDescriptor_t dxd, void* dx,
    const cudnnTensorDescriptor_t bnd, const void* scale, const void*, void* dscale, void* dbias, double eps,
    const void* smean, const void* sinv, cudnnActivationDescriptor_t, void*, size_t, void*, size_t) {
  if (ops != CUDNN_BATCHNORM_OPS_BN) return CUDNN_STATUS_NOT_SUPPORTED;
  return cudnnBatchNormalizationBackward(h, mode, alpha_d, beta_d, alpha_p, beta_p, xd, x, dyd, dy, dxd, dx, bnd,
                                         scale, dscale, dbias, eps, smean, sinv);
}

// The cudnnNormalization* API: CUDNN_NORM_OPS_NORM, one group, the mean and
// variance descriptor of the scale and bias's shape; the batch
// normalization above (CUDNN_NORM_PER_ACTIVATION / PER_CHANNEL are
// BATCHNORM_PER_ACTIVATION / SPATIAL).
namespace {
bool norm_plain(cudnnNormOps_t ops, cudnnNormAlgo_t algo, int groups) {
  return ops == CUDNN_NORM_OPS_NORM && (algo == CUDNN_NORM_ALGO_STANDARD || algo == CUDNN_NORM_ALGO_PERSIST) &&
         groups == 1;
}
// The mean/variance descriptor must describe the scale/bias tensor's shape.
bool norm_same_params(cudnnTensorDescriptor_t a, cudnnTensorDescriptor_t b) {
  return ok(a) && ok(b) && dnn::same_dims(a->t, b->t) && a->t.dtype == b->t.dtype;
}
}  // namespace
cudnnStatus_t cudnnDeriveNormTensorDescriptor(cudnnTensorDescriptor_t scale_bias, cudnnTensorDescriptor_t mean_var,
                                              const cudnnTensorDescriptor_t xd, cudnnNormMode_t mode, int groups) {
  if (!scale_bias || scale_bias->magic != kAlive || !mean_var || mean_var->magic != kAlive || !ok(xd) ||
      (mode != CUDNN_NORM_PER_ACTIVATION && mode != CUDNN_NORM_PER_CHANNEL))
    return CUDNN_STATUS_BAD_PARAM;
  if (groups != 1) return CUDNN_STATUS_NOT_SUPPORTED;
  DnnTensor bn;
  if (int32_t s = dnn::bn_dims(xd->t, mode, &bn)) return st(s);
  scale_bias->t = mean_var->t = bn;
  scale_bias->set = mean_var->set = true;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnGetNormalizationForwardTrainingWorkspaceSize(
    cudnnHandle_t h, cudnnNormMode_t, cudnnNormOps_t ops, cudnnNormAlgo_t algo, const cudnnTensorDescriptor_t xd,
    const cudnnTensorDescriptor_t, const cudnnTensorDescriptor_t, const cudnnTensorDescriptor_t,
    const cudnnActivationDescriptor_t, const cudnnTensorDescriptor_t, size_t* size, int groups) {
  if (!ok(h) || !ok(xd) || !size) return CUDNN_STATUS_BAD_PARAM;
  if (!norm_plain(ops, algo, groups)) return CUDNN_STATUS_NOT_SUPPORTED;
  *size = 0;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnGetNormalizationBackwardWorkspaceSize(
    cudnnHandle_t h, cudnnNormMode_t, cudnnNormOps_t ops, cudnnNormAlgo_t algo, const cudnnTensorDescriptor_t xd,
    const cudnnTensorDescriptor_t, const cudnnTensorDescriptor_t, const cudnnTensorDescriptor_t,
    const cudnnTensorDescriptor_t, const cudnnTensorDescriptor_t, const cudnnActivationDescriptor_t,
    const cudnnTensorDescriptor_t, size_t* size, int groups) {
  if (!ok(h) || !ok(xd) || !size) return CUDNN_STATUS_BAD_PARAM;
  if (!norm_plain(ops, algo, groups)) return CUDNN_STATUS_NOT_SUPPORTED;
  *size = 0;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnGetNormalizationTrainingReserveSpaceSize(cudnnHandle_t h, cudnnNormMode_t, cudnnNormOps_t ops,
                                                            cudnnNormAlgo_t algo, const cudnnActivationDescriptor_t,
                                                            const cudnnTensorDescriptor_t xd, size_t* size,
                                                            int groups) {
  if (!ok(h) || !ok(xd) || !size) return CUDNN_STATUS_BAD_PARAM;
  if (!norm_plain(ops, algo, groups)) return CUDNN_STATUS_NOT_SUPPORTED;
  *size = 0;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnNormalizationForwardInference(cudnnHandle_t h, cudnnNormMode_t mode, cudnnNormOps_t ops,
                                                 cudnnNormAlgo_t algo, const void* alpha, const void* beta,
                                                 const cudnnTensorDescriptor_t xd, const void* x,
                                                 const cudnnTensorDescriptor_t sbd, const void* scale,
                                                 const void* bias, const cudnnTensorDescriptor_t mvd,
                                                 const void* mean, const void* var, const cudnnTensorDescriptor_t,
                                                 const void*, cudnnActivationDescriptor_t,
                                                 const cudnnTensorDescriptor_t yd, void* y, double eps, int groups) {
  if (!norm_plain(ops, algo, groups)) return CUDNN_STATUS_NOT_SUPPORTED;
  if (!norm_same_params(sbd, mvd)) return CUDNN_STATUS_BAD_PARAM;
  return cudnnBatchNormalizationForwardInference(h, cudnnBatchNormMode_t(mode), alpha, beta, xd, x, yd, y, sbd, scale,
                                                 bias, mean, var, eps);
}
cudnnStatus_t cudnnNormalizationForwardTraining(
    cudnnHandle_t h, cudnnNormMode_t mode, cudnnNormOps_t ops, cudnnNormAlgo_t algo, const void* alpha,
    const void* beta, const cudnnTensorDescriptor_t xd, const void* x, const cudnnTensorDescriptor_t sbd,
    const void* scale, const void* bias, double factor, const cudnnTensorDescriptor_t mvd, void* rmean, void* rvar,
    double eps, void* smean, void* sinv, cudnnActivationDescriptor_t, const cudnnTensorDescriptor_t, const void*,
    const cudnnTensorDescriptor_t yd, void* y, void*, size_t, void*, size_t, int groups) {
  if (!norm_plain(ops, algo, groups)) return CUDNN_STATUS_NOT_SUPPORTED;
  if (!norm_same_params(sbd, mvd)) return CUDNN_STATUS_BAD_PARAM;
  return cudnnBatchNormalizationForwardTraining(h, cudnnBatchNormMode_t(mode), alpha, beta, xd, x, yd, y, sbd, scale,
                                                bias, factor, rmean, rvar, eps, smean, sinv);
}
cudnnStatus_t cudnnNormalizationBackward(
    cudnnHandle_t h, cudnnNormMode_t mode, cudnnNormOps_t ops, cudnnNormAlgo_t algo, const void* alpha_d,
    const void* beta_d, const void* alpha_p, const void* beta_p, const cudnnTensorDescriptor_t xd, const void* x,
    const cudnnTensorDescriptor_t, const void*, const cudnnTensorDescriptor_t dyd, const void* dy,
    const cudnnTensorDescriptor_t, void*, const cudnnTensorDescriptor_t dxd, void* dx,
    const cudnnTensorDescriptor_t sbd, const void* scale, const void*, void* dscale, void* dbias, double eps,
    const cudnnTensorDescriptor_t mvd, const void* smean, const void* sinv, cudnnActivationDescriptor_t, void*,
    size_t, void*, size_t, int groups) {
  if (!norm_plain(ops, algo, groups)) return CUDNN_STATUS_NOT_SUPPORTED;
  if (!norm_same_params(sbd, mvd)) return CUDNN_STATUS_BAD_PARAM;
  return cudnnBatchNormalizationBackward(h, cudnnBatchNormMode_t(mode), alpha_d, beta_d, alpha_p, beta_p, xd, x, dyd,
                                         dy, dxd, dx, sbd, scale, dscale, dbias, eps, smean, sinv);
}

// ------------------------------------------------------------ LRN

cudnnStatus_t cudnnCreateLRNDescriptor(cudnnLRNDescriptor_t* d) { return create(d); }
cudnnStatus_t cudnnDestroyLRNDescriptor(cudnnLRNDescriptor_t d) {
  if (!d) return CUDNN_STATUS_SUCCESS;
  return destroy_checked(d);
}
cudnnStatus_t cudnnSetLRNDescriptor(cudnnLRNDescriptor_t d, unsigned n, double alpha, double beta, double k) {
  if (!d || d->magic != kAlive) return CUDNN_STATUS_BAD_PARAM;
  DnnLrn l{n, 0, alpha, beta, k};
  if (dnn::check_lrn(l)) return CUDNN_STATUS_BAD_PARAM;
  d->l = l;
  d->set = true;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnGetLRNDescriptor(cudnnLRNDescriptor_t d, unsigned* n, double* alpha, double* beta, double* k) {
  if (!ok(d)) return CUDNN_STATUS_BAD_PARAM;
  if (n) *n = d->l.n;
  if (alpha) *alpha = d->l.alpha;
  if (beta) *beta = d->l.beta;
  if (k) *k = d->l.k;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnLRNCrossChannelForward(cudnnHandle_t h, cudnnLRNDescriptor_t ld, cudnnLRNMode_t mode,
                                          const void* alpha, const cudnnTensorDescriptor_t xd, const void* x,
                                          const void* beta, const cudnnTensorDescriptor_t yd, void* y) {
  DnnLrnFwdReq rq{};
  if (!ok(h) || !ok(ld) || !ok(xd) || !ok(yd) || !x || !y || mode != CUDNN_LRN_CROSS_CHANNEL_DIM1 ||
      !scalars(alpha, beta, &rq.alpha, &rq.beta))
    return CUDNN_STATUS_BAD_PARAM;
  if (int32_t s = dnn::check_lrn_shapes(ld->l, xd->t, yd->t)) return st(s);
  rq.stream = U(h->stream), rq.lrn = ld->l, rq.x = xd->t, rq.y = yd->t, rq.xp = U(x), rq.yp = U(y);
  return status(post<Op::DnnLrnFwd>(rq));
}
cudnnStatus_t cudnnLRNCrossChannelBackward(cudnnHandle_t h, cudnnLRNDescriptor_t ld, cudnnLRNMode_t mode,
                                           const void* alpha, const cudnnTensorDescriptor_t yd, const void* y,
                                           const cudnnTensorDescriptor_t dyd, const void* dy,
                                           const cudnnTensorDescriptor_t xd, const void* x, const void* beta,
                                           const cudnnTensorDescriptor_t dxd, void* dx) {
  DnnLrnBwdReq rq{};
  if (!ok(h) || !ok(ld) || !ok(yd) || !ok(dyd) || !ok(xd) || !ok(dxd) || !y || !dy || !x || !dx ||
      mode != CUDNN_LRN_CROSS_CHANNEL_DIM1 || !scalars(alpha, beta, &rq.alpha, &rq.beta))
    return CUDNN_STATUS_BAD_PARAM;
  int32_t s = dnn::check_lrn_shapes(ld->l, xd->t, yd->t);
  if (!s) s = dnn::check_lrn_shapes(ld->l, xd->t, dyd->t);
  if (!s) s = dnn::check_lrn_shapes(ld->l, xd->t, dxd->t);
  if (s) return st(s);
  rq.stream = U(h->stream), rq.lrn = ld->l, rq.y = yd->t, rq.dy = dyd->t, rq.x = xd->t, rq.dx = dxd->t;
  rq.yp = U(y), rq.dyp = U(dy), rq.xp = U(x), rq.dxp = U(dx);
  return status(post<Op::DnnLrnBwd>(rq));
}

// ------------------------------------------------------------ dropout

cudnnStatus_t cudnnDropoutGetStatesSize(cudnnHandle_t h, size_t* size) {
  if (!ok(h) || !size) return CUDNN_STATUS_BAD_PARAM;
  *size = dnn::kDropoutStates;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnDropoutGetReserveSpaceSize(cudnnTensorDescriptor_t xd, size_t* size) {
  if (!ok(xd) || !size) return CUDNN_STATUS_BAD_PARAM;
  *size = dnn::dropout_reserve(xd->t);
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnCreateDropoutDescriptor(cudnnDropoutDescriptor_t* d) { return create(d); }
cudnnStatus_t cudnnDestroyDropoutDescriptor(cudnnDropoutDescriptor_t d) {
  if (!d) return CUDNN_STATUS_SUCCESS;
  return destroy_checked(d);
}
namespace {
cudnnStatus_t set_dropout(cudnnDropoutDescriptor_t d, cudnnHandle_t h, float p, void* states, size_t size,
                          unsigned long long seed, bool init) {
  if (!d || d->magic != kAlive || !ok(h) || dnn::check_dropout(p)) return CUDNN_STATUS_BAD_PARAM;
  if (states && size < dnn::kDropoutStates) return CUDNN_STATUS_BAD_PARAM;
  if (init && states) {  // seeds the generator in the states buffer, in the handle's stream
    DnnDropoutInitReq rq{};
    rq.stream = U(h->stream), rq.statesp = U(states), rq.states_size = size, rq.seed = seed;
    if (cudnnStatus_t s = status(post<Op::DnnDropoutInit>(rq))) return s;
  }
  d->p = p, d->states = states, d->states_size = states ? size : 0, d->seed = seed, d->set = true;
  return CUDNN_STATUS_SUCCESS;
}
}  // namespace
cudnnStatus_t cudnnSetDropoutDescriptor(cudnnDropoutDescriptor_t d, cudnnHandle_t h, float p, void* states,
                                        size_t size, unsigned long long seed) {
  return set_dropout(d, h, p, states, size, seed, true);
}
cudnnStatus_t cudnnRestoreDropoutDescriptor(cudnnDropoutDescriptor_t d, cudnnHandle_t h, float p, void* states,
                                            size_t size, unsigned long long seed) {
  return set_dropout(d, h, p, states, size, seed, false);
}
cudnnStatus_t cudnnGetDropoutDescriptor(cudnnDropoutDescriptor_t d, cudnnHandle_t h, float* p, void** states,
                                        unsigned long long* seed) {
  if (!ok(d) || !ok(h) || !p || !states || !seed) return CUDNN_STATUS_BAD_PARAM;
  *p = d->p, *states = d->states, *seed = d->seed;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnDropoutForward(cudnnHandle_t h, const cudnnDropoutDescriptor_t dd, const cudnnTensorDescriptor_t xd,
                                  const void* x, const cudnnTensorDescriptor_t yd, void* y, void* reserve,
                                  size_t reserve_size) {
  if (!ok(h) || !ok(dd) || !ok(xd) || !ok(yd) || !x || !y || !reserve || !dd->states) return CUDNN_STATUS_BAD_PARAM;
  if (int32_t s = dnn::check_dropout_shapes(dd->p, xd->t, yd->t)) return st(s);
  if (reserve_size < dnn::dropout_reserve(xd->t)) return CUDNN_STATUS_BAD_PARAM;
  DnnDropoutFwdReq rq{};
  rq.stream = U(h->stream), rq.x = xd->t, rq.y = yd->t, rq.xp = U(x), rq.yp = U(y);
  rq.statesp = U(dd->states), rq.states_size = dd->states_size, rq.reservep = U(reserve);
  rq.reserve_size = reserve_size, rq.p = dd->p;
  return status(post<Op::DnnDropoutFwd>(rq));
}
cudnnStatus_t cudnnDropoutBackward(cudnnHandle_t h, const cudnnDropoutDescriptor_t dd,
                                   const cudnnTensorDescriptor_t dyd, const void* dy,
                                   const cudnnTensorDescriptor_t dxd, void* dx, void* reserve, size_t reserve_size) {
  if (!ok(h) || !ok(dd) || !ok(dyd) || !ok(dxd) || !dy || !dx || !reserve) return CUDNN_STATUS_BAD_PARAM;
  if (int32_t s = dnn::check_dropout_shapes(dd->p, dyd->t, dxd->t)) return st(s);
  if (reserve_size < dnn::dropout_reserve(dyd->t)) return CUDNN_STATUS_BAD_PARAM;
  DnnDropoutBwdReq rq{};
  rq.stream = U(h->stream), rq.dy = dyd->t, rq.dx = dxd->t, rq.dyp = U(dy), rq.dxp = U(dx);
  rq.reservep = U(reserve), rq.reserve_size = reserve_size, rq.p = dd->p;
  return status(post<Op::DnnDropoutBwd>(rq));
}

// ------------------------------------------------------------ reduction

cudnnStatus_t cudnnCreateReduceTensorDescriptor(cudnnReduceTensorDescriptor_t* d) { return create(d); }
cudnnStatus_t cudnnDestroyReduceTensorDescriptor(cudnnReduceTensorDescriptor_t d) {
  if (!d) return CUDNN_STATUS_SUCCESS;
  return destroy_checked(d);
}
cudnnStatus_t cudnnSetReduceTensorDescriptor(cudnnReduceTensorDescriptor_t d, cudnnReduceTensorOp_t op,
                                             cudnnDataType_t comp, cudnnNanPropagation_t nan,
                                             cudnnReduceTensorIndices_t indices, cudnnIndicesType_t idx_type) {
  if (!d || d->magic != kAlive || !valid_dtype(comp)) return CUDNN_STATUS_BAD_PARAM;
  DnnReduce r{};
  r.op = op, r.comp = comp, r.nan_opt = nan, r.indices = indices, r.idx_type = idx_type;
  if (dnn::check_reduce(r) == dnn::kBadParam) return CUDNN_STATUS_BAD_PARAM;
  d->r = r;
  d->set = true;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnGetReduceTensorDescriptor(const cudnnReduceTensorDescriptor_t d, cudnnReduceTensorOp_t* op,
                                             cudnnDataType_t* comp, cudnnNanPropagation_t* nan,
                                             cudnnReduceTensorIndices_t* indices, cudnnIndicesType_t* idx_type) {
  if (!ok(d) || !op || !comp || !nan || !indices || !idx_type) return CUDNN_STATUS_BAD_PARAM;
  *op = cudnnReduceTensorOp_t(d->r.op), *comp = cudnnDataType_t(d->r.comp);
  *nan = cudnnNanPropagation_t(d->r.nan_opt), *indices = cudnnReduceTensorIndices_t(d->r.indices);
  *idx_type = cudnnIndicesType_t(d->r.idx_type);
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnGetReductionIndicesSize(cudnnHandle_t h, const cudnnReduceTensorDescriptor_t rd,
                                           const cudnnTensorDescriptor_t ad, const cudnnTensorDescriptor_t cd,
                                           size_t* size) {
  if (!ok(h) || !ok(rd) || !ok(ad) || !ok(cd) || !size) return CUDNN_STATUS_BAD_PARAM;
  if (int32_t s = dnn::check_reduce_shapes(rd->r, ad->t, cd->t)) return st(s);
  *size = dnn::reduce_indices_size(rd->r, cd->t);
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnGetReductionWorkspaceSize(cudnnHandle_t h, const cudnnReduceTensorDescriptor_t rd,
                                             const cudnnTensorDescriptor_t ad, const cudnnTensorDescriptor_t cd,
                                             size_t* size) {
  if (!ok(h) || !ok(rd) || !ok(ad) || !ok(cd) || !size) return CUDNN_STATUS_BAD_PARAM;
  if (int32_t s = dnn::check_reduce_shapes(rd->r, ad->t, cd->t)) return st(s);
  *size = 0;  // the server needs no work area
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnReduceTensor(cudnnHandle_t h, const cudnnReduceTensorDescriptor_t rd, void* indices,
                                size_t indices_size, void*, size_t, const void* alpha,
                                const cudnnTensorDescriptor_t ad, const void* a, const void* beta,
                                const cudnnTensorDescriptor_t cd, void* c) {
  DnnReduceTensorReq rq{};
  if (!ok(h) || !ok(rd) || !ok(ad) || !ok(cd) || !a || !c || !scalars(alpha, beta, &rq.alpha, &rq.beta))
    return CUDNN_STATUS_BAD_PARAM;
  if (int32_t s = dnn::check_reduce_shapes(rd->r, ad->t, cd->t)) return st(s);
  const uint64_t need = dnn::reduce_indices_size(rd->r, cd->t);
  if (need && indices && indices_size < need) return CUDNN_STATUS_BAD_PARAM;
  rq.stream = U(h->stream), rq.red = rd->r, rq.a = ad->t, rq.c = cd->t, rq.ap = U(a), rq.cp = U(c);
  if (need && indices) rq.indicesp = U(indices), rq.indices_size = indices_size;
  return status(post<Op::DnnReduceTensor>(rq));
}

}  // extern "C"
