// cuDNN's backend (graph) API in the libcudnn.so.9 drop-in, for graphs of
// one convolution (forward, backward data, backward filter): what
// cudnn-frontend, and so PyTorch, builds for a convolution.
//
// Every descriptor lives in the guest: attributes are stored as set,
// checked against backend_attrs.hpp (type, count, owner, read-only) as
// cuDNN checks them, and a descriptor another refers to is copied when it
// is set, so later changes or destruction of the original cannot reach
// it. Finalize checks what cuDNN checks and lowers the convolution onto
// the legacy descriptors once (shapes: BAD_PARAM; forms the legacy path
// does not forward: NOT_SUPPORTED at the operation graph); heuristics
// offer one engine with no knobs and no work area (the server picks its
// own algorithm). cudnnBackendExecute looks the data pointers up by
// tensor uid in the variant pack and makes the forwarded legacy call
// (cudnnConvolutionForward / BackwardData / BackwardFilter). Other
// descriptor types may be created and set, and their Finalize returns
// CUDNN_STATUS_NOT_SUPPORTED, logging the type once.
#include <cudnn.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend_attrs.hpp"
#include "wormhole/library_call.hpp"
#include "wormhole/proto/cudnn_check.hpp"

using namespace wh::guest::dnnbe;
using wh::proto::DnnConv;
using wh::proto::DnnFilter;
using wh::proto::DnnTensor;
namespace dnn = wh::proto::dnn;

namespace {

constexpr uint32_t kAlive = 0x42454e44, kDead = 0xdeadbe9d;

// One convolution lowered onto the legacy descriptors' terms. x is x or dx,
// y is y or dy, w is w or dw, after the operation.
struct Lowered {
  cudnnBackendDescriptorType_t op;
  DnnTensor x{}, y{};
  DnnFilter w{};
  DnnConv c{};
  int64_t uid_x = 0, uid_w = 0, uid_y = 0;
  float alpha = 1, beta = 0;
};

struct Desc;
struct Attr {
  cudnnBackendAttributeType_t type{};
  int64_t n = 0;
  std::vector<uint8_t> bytes;                  // n elements of type (descriptors: unused)
  std::vector<std::shared_ptr<const Desc>> descs;  // descriptor attributes: copies
};
struct Desc {
  uint32_t magic = kAlive;
  cudnnBackendDescriptorType_t type{};
  bool final = false;
  std::map<int, Attr> attrs;
  std::shared_ptr<const Lowered> conv;  // an operation and everything built on it
  std::string unsupported;              // why an operation cannot be lowered
};

const char* const kTypeNames[] = {
    "POINTWISE", "CONVOLUTION", "ENGINE", "ENGINECFG", "ENGINEHEUR", "EXECUTION_PLAN", "INTERMEDIATE_INFO",
    "KNOB_CHOICE", "KNOB_INFO", "LAYOUT_INFO", "OPERATION_CONVOLUTION_FORWARD",
    "OPERATION_CONVOLUTION_BACKWARD_FILTER", "OPERATION_CONVOLUTION_BACKWARD_DATA", "OPERATION_POINTWISE",
    "OPERATION_GEN_STATS", "OPERATIONGRAPH", "VARIANT_PACK", "TENSOR", "MATMUL", "OPERATION_MATMUL",
    "OPERATION_BN_FINALIZE_STATISTICS", "REDUCTION", "OPERATION_REDUCTION", "OPERATION_BN_BWD_WEIGHTS", "RESAMPLE",
    "OPERATION_RESAMPLE_FWD", "OPERATION_RESAMPLE_BWD", "OPERATION_CONCAT", "OPERATION_SIGNAL",
    "OPERATION_NORM_FORWARD", "OPERATION_NORM_BACKWARD", "OPERATION_RESHAPE", "RNG", "OPERATION_RNG",
    "KERNEL_CACHE", "OPERATION_PAGED_CACHE_LOAD", "OPERATION_BLOCK_SCALE_QUANTIZE",
    "OPERATION_BLOCK_SCALE_DEQUANTIZE", "DEVICEPROP", "OPERATION_EXPAND_BAND_MATRIX",
    "OPERATION_CONTRACT_BAND_MATRIX", "OPERATION_SDPA_FWD", "OPERATION_MOE_GROUPED_MATMUL", "OPERATION_SDPA_BWD"};
constexpr int kTypes = sizeof kTypeNames / sizeof *kTypeNames;

std::string type_name(int t) { return std::string("CUDNN_BACKEND_") + kTypeNames[t] + "_DESCRIPTOR"; }

cudnnStatus_t not_supported(const std::string& what) {
  wh::guest::lib::log_once(what + " is not supported by Wormhole: returning CUDNN_STATUS_NOT_SUPPORTED");
  return CUDNN_STATUS_NOT_SUPPORTED;
}

bool is_conv_op(int t) {
  return t == CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR ||
         t == CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR ||
         t == CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR;
}
// The descriptor types whose attributes backend_attrs.hpp lists.
bool implemented(int t) {
  switch (t) {
    case CUDNN_BACKEND_TENSOR_DESCRIPTOR:
    case CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR:
    case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR:
    case CUDNN_BACKEND_ENGINE_DESCRIPTOR:
    case CUDNN_BACKEND_ENGINECFG_DESCRIPTOR:
    case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR:
    case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR:
    case CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR: return true;
    default: return is_conv_op(t);
  }
}

Desc* live(void* p) {
  Desc* d = static_cast<Desc*>(p);
  return d && d->magic == kAlive ? d : nullptr;
}

// Stores n elements; descriptor elements are copied (already checked).
void store(Desc& d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t n, const void* data) {
  Attr a;
  a.type = type, a.n = n;
  if (type == CUDNN_TYPE_BACKEND_DESCRIPTOR) {
    for (int64_t k = 0; k < n; k++)
      a.descs.push_back(std::make_shared<const Desc>(*static_cast<const Desc*>(static_cast<void* const*>(data)[k])));
  } else if (n) {
    const auto* b = static_cast<const uint8_t*>(data);
    a.bytes.assign(b, b + n * elem_bytes(type));
  }
  d.attrs[name] = std::move(a);
}
void store_desc(Desc& d, cudnnBackendAttributeName_t name, const Desc& v) {
  const void* p = &v;
  store(d, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &p);
}
void store_i64(Desc& d, cudnnBackendAttributeName_t name, int64_t v) { store(d, name, CUDNN_TYPE_INT64, 1, &v); }
void store_empty(Desc& d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type) {
  store(d, name, type, 0, nullptr);
}

const Attr* attr(const Desc& d, cudnnBackendAttributeName_t name) {
  auto it = d.attrs.find(name);
  return it == d.attrs.end() ? nullptr : &it->second;
}
std::vector<int64_t> i64s(const Desc& d, cudnnBackendAttributeName_t name) {
  const Attr* a = attr(d, name);
  std::vector<int64_t> v(a ? a->n : 0);
  if (a && a->n) std::memcpy(v.data(), a->bytes.data(), a->bytes.size());
  return v;
}
int64_t i64(const Desc& d, cudnnBackendAttributeName_t name, int64_t dflt) {
  std::vector<int64_t> v = i64s(d, name);
  return v.empty() ? dflt : v[0];
}
int32_t enum32(const Desc& d, cudnnBackendAttributeName_t name, int32_t dflt) {
  const Attr* a = attr(d, name);
  if (!a || a->n < 1) return dflt;
  int32_t v;
  std::memcpy(&v, a->bytes.data(), 4);
  return v;
}
bool boolean(const Desc& d, cudnnBackendAttributeName_t name) {
  const Attr* a = attr(d, name);
  return a && a->n && a->bytes[0];
}
const Desc* sub(const Desc& d, cudnnBackendAttributeName_t name) {
  const Attr* a = attr(d, name);
  return a && !a->descs.empty() ? a->descs[0].get() : nullptr;
}
float scalar(const Desc& d, cudnnBackendAttributeName_t name, float dflt) {
  const Attr* a = attr(d, name);
  if (!a || a->n < 1) return dflt;
  if (a->type == CUDNN_TYPE_DOUBLE) {
    double v;
    std::memcpy(&v, a->bytes.data(), 8);
    return float(v);
  }
  float v;
  std::memcpy(&v, a->bytes.data(), 4);
  return v;
}

// ------------------------------------------------------------ finalize

cudnnStatus_t finalize_tensor(Desc& d) {
  std::vector<int64_t> dims = i64s(d, CUDNN_ATTR_TENSOR_DIMENSIONS), strides = i64s(d, CUDNN_ATTR_TENSOR_STRIDES);
  if (dims.size() != strides.size() || i64(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, 0) < 1 ||
      i64(d, CUDNN_ATTR_TENSOR_VECTOR_COUNT, 1) < 1)
    return CUDNN_STATUS_BAD_PARAM;
  for (size_t k = 0; k < dims.size(); k++)
    if (dims[k] < 1 || strides[k] < 1) return CUDNN_STATUS_BAD_PARAM;
  const int32_t dtype = enum32(d, CUDNN_ATTR_TENSOR_DATA_TYPE, -1);
  return dtype < 0 || dtype > CUDNN_DATA_FP4_E2M1 ? CUDNN_STATUS_BAD_PARAM : CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t finalize_conv(Desc& d) {
  const int64_t n = i64(d, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, 0);
  const std::vector<int64_t> pre = i64s(d, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS),
                             post = i64s(d, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS),
                             str = i64s(d, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES),
                             dil = i64s(d, CUDNN_ATTR_CONVOLUTION_DILATIONS);
  if (n < 1 || int64_t(pre.size()) != n || int64_t(post.size()) != n || int64_t(str.size()) != n ||
      int64_t(dil.size()) != n)
    return CUDNN_STATUS_BAD_PARAM;
  for (int64_t k = 0; k < n; k++)
    if (pre[k] < 0 || post[k] < 0 || str[k] < 1 || dil[k] < 1) return CUDNN_STATUS_BAD_PARAM;
  const int32_t mode = enum32(d, CUDNN_ATTR_CONVOLUTION_CONV_MODE, -1);
  return mode == CUDNN_CONVOLUTION || mode == CUDNN_CROSS_CORRELATION ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_BAD_PARAM;
}

// A backend tensor as a legacy 4-d tensor; "" or why it cannot be one.
std::string legacy_tensor(const Desc& t, DnnTensor* out) {
  const std::vector<int64_t> dims = i64s(t, CUDNN_ATTR_TENSOR_DIMENSIONS), str = i64s(t, CUDNN_ATTR_TENSOR_STRIDES);
  if (boolean(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL)) return "a virtual tensor in a one-operation graph";
  if (boolean(t, CUDNN_ATTR_TENSOR_IS_BY_VALUE)) return "a by-value tensor";
  if (i64(t, CUDNN_ATTR_TENSOR_VECTOR_COUNT, 1) != 1) return "a vectorized tensor";
  if (dims.size() != 4) return "a convolution over other than 2 spatial dimensions";
  *out = DnnTensor{};
  out->dtype = enum32(t, CUDNN_ATTR_TENSOR_DATA_TYPE, 0);
  out->nb = 4;
  for (int k = 0; k < 4; k++) {
    if (dims[k] >= dnn::kMaxElems || str[k] >= dnn::kMaxElems) return "a tensor dimension or stride of 2^31 or more";
    out->dim[k] = int32_t(dims[k]), out->stride[k] = int32_t(str[k]);
  }
  if (!dnn::dtype_ok(out->dtype)) return "a data type other than float, half and bfloat16";
  return "";
}

// Lowers a convolution operation; BAD_PARAM for an invalid one, else
// SUCCESS with d.conv set, or d.unsupported saying why it cannot be.
cudnnStatus_t finalize_conv_op(Desc& d) {
  cudnnBackendAttributeName_t cn, xn, wn, yn, an, bn;
  if (d.type == CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR) {
    cn = CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, xn = CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X;
    wn = CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, yn = CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y;
    an = CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, bn = CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA;
  } else if (d.type == CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR) {
    cn = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC, xn = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX;
    wn = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W, yn = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY;
    an = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, bn = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA;
  } else {
    cn = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC, xn = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X;
    wn = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW, yn = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY;
    an = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, bn = CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA;
  }
  const Desc *c = sub(d, cn), *x = sub(d, xn), *w = sub(d, wn), *y = sub(d, yn);
  const std::vector<int64_t> xd = i64s(*x, CUDNN_ATTR_TENSOR_DIMENSIONS), wd = i64s(*w, CUDNN_ATTR_TENSOR_DIMENSIONS),
                             yd = i64s(*y, CUDNN_ATTR_TENSOR_DIMENSIONS);
  const int64_t sp = i64(*c, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, 0);
  // cuDNN's own consistency rules: one rank, spatial dimensions + 2,
  // channels a multiple of the filter's, the output size of the formula.
  if (xd.size() != wd.size() || xd.size() != yd.size() || int64_t(xd.size()) != sp + 2 || xd[0] != yd[0] ||
      wd[0] != yd[1] || xd[1] % wd[1] || wd[0] % (xd[1] / wd[1]))
    return CUDNN_STATUS_BAD_PARAM;
  const std::vector<int64_t> pre = i64s(*c, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS),
                             post = i64s(*c, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS),
                             str = i64s(*c, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES),
                             dil = i64s(*c, CUDNN_ATTR_CONVOLUTION_DILATIONS);
  for (int64_t k = 0; k < sp; k++) {
    const int64_t ext = (wd[2 + k] - 1) * dil[k] + 1, in = xd[2 + k] + pre[k] + post[k];
    if (in < ext || yd[2 + k] != (in - ext) / str[k] + 1) return CUDNN_STATUS_BAD_PARAM;
  }
  if (i64(*x, CUDNN_ATTR_TENSOR_UNIQUE_ID, 0) == i64(*w, CUDNN_ATTR_TENSOR_UNIQUE_ID, 0) ||
      i64(*x, CUDNN_ATTR_TENSOR_UNIQUE_ID, 0) == i64(*y, CUDNN_ATTR_TENSOR_UNIQUE_ID, 0) ||
      i64(*w, CUDNN_ATTR_TENSOR_UNIQUE_ID, 0) == i64(*y, CUDNN_ATTR_TENSOR_UNIQUE_ID, 0))
    return CUDNN_STATUS_BAD_PARAM;

  auto l = std::make_shared<Lowered>();
  l->op = d.type;
  l->uid_x = i64(*x, CUDNN_ATTR_TENSOR_UNIQUE_ID, 0);
  l->uid_w = i64(*w, CUDNN_ATTR_TENSOR_UNIQUE_ID, 0);
  l->uid_y = i64(*y, CUDNN_ATTR_TENSOR_UNIQUE_ID, 0);
  l->alpha = scalar(d, an, 1), l->beta = scalar(d, bn, 0);
  DnnTensor wt;
  std::string why = legacy_tensor(*x, &l->x);
  if (why.empty()) why = legacy_tensor(*y, &l->y);
  if (why.empty()) why = legacy_tensor(*w, &wt);
  // A legacy filter is packed: K, C, R, S (NCHW) or channels-last K, R, S, C (NHWC).
  const int64_t kc = wt.dim[1], kr = wt.dim[2], ks = wt.dim[3];
  int32_t format = -1;
  if (wt.stride[3] == 1 && wt.stride[2] == ks && wt.stride[1] == kr * ks && wt.stride[0] == kc * kr * ks)
    format = dnn::kNCHW;
  else if (wt.stride[1] == 1 && wt.stride[3] == kc && wt.stride[2] == ks * kc && wt.stride[0] == kr * ks * kc)
    format = dnn::kNHWC;
  if (why.empty() && format < 0) why = "a filter packed neither K, C, R, S nor K, R, S, C";
  if (why.empty() && (l->x.dtype != wt.dtype || l->x.dtype != l->y.dtype))
    why = "a convolution mixing data types";
  for (int64_t k = 0; why.empty() && k < sp; k++)
    if (pre[k] != post[k]) why = "asymmetric padding";
  if (!why.empty()) {
    d.unsupported = "a convolution graph with " + why;
    return CUDNN_STATUS_SUCCESS;
  }
  l->w.dtype = wt.dtype, l->w.format = format, l->w.nb = 4;
  for (int k = 0; k < 4; k++) l->w.dim[k] = wt.dim[k];
  l->c.nb = 2, l->c.mode = enum32(*c, CUDNN_ATTR_CONVOLUTION_CONV_MODE, 0);
  l->c.dtype = enum32(*c, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, 0);
  l->c.groups = int32_t(xd[1] / wd[1]);
  for (int k = 0; k < 2; k++) {
    if (pre[k] >= (1 << 24) || str[k] >= (1 << 24) || dil[k] >= (1 << 24)) return CUDNN_STATUS_BAD_PARAM;
    l->c.pad[k] = int32_t(pre[k]), l->c.stride[k] = int32_t(str[k]), l->c.dil[k] = int32_t(dil[k]);
  }
  const int32_t r = dnn::check_conv_shapes(l->x, l->w, l->c, l->y);
  if (r == dnn::kBadParam) return CUDNN_STATUS_BAD_PARAM;
  if (r != dnn::kOk) {
    d.unsupported = "this convolution graph";
    return CUDNN_STATUS_SUCCESS;
  }
  d.conv = std::move(l);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t finalize_graph(Desc& d) {
  const Attr* ops = attr(d, CUDNN_ATTR_OPERATIONGRAPH_OPS);
  if (boolean(d, CUDNN_ATTR_OPERATIONGRAPH_IS_DYNAMIC_SHAPE_ENABLED))
    return not_supported("cudnnBackendFinalize: a dynamic-shape operation graph");
  if (ops->n != 1) return not_supported("cudnnBackendFinalize: an operation graph of more than one operation");
  const Desc& op = *ops->descs[0];
  if (!is_conv_op(op.type)) return not_supported("cudnnBackendFinalize: an operation graph of " + type_name(op.type));
  if (!op.conv) return not_supported("cudnnBackendFinalize: " + op.unsupported);
  d.conv = op.conv;
  store_i64(d, CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT, 1);
  return CUDNN_STATUS_SUCCESS;
}

// The one engine: index 0, no knobs, no notes, no work area.
cudnnStatus_t finalize_engine(Desc& d) {
  const Desc& g = *sub(d, CUDNN_ATTR_ENGINE_OPERATION_GRAPH);
  const int64_t idx = i64(d, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, -1);
  if (idx < 0 || idx >= i64(g, CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT, 0)) return CUDNN_STATUS_BAD_PARAM;
  d.conv = g.conv;
  store_empty(d, CUDNN_ATTR_ENGINE_KNOB_INFO, CUDNN_TYPE_BACKEND_DESCRIPTOR);
  store_empty(d, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE);
  store_empty(d, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE);
  store_empty(d, CUDNN_ATTR_ENGINE_LAYOUT_INFO, CUDNN_TYPE_BACKEND_DESCRIPTOR);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t finalize_cfg(Desc& d) {
  const Attr* knobs = attr(d, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES);
  if (knobs && knobs->n) return not_supported("cudnnBackendFinalize: an engine configuration with knob choices");
  d.conv = sub(d, CUDNN_ATTR_ENGINECFG_ENGINE)->conv;
  store_i64(d, CUDNN_ATTR_ENGINECFG_WORKSPACE_SIZE, 0);
  store_i64(d, CUDNN_ATTR_ENGINECFG_SHARED_MEMORY_USED, 0);
  store_empty(d, CUDNN_ATTR_ENGINECFG_INTERMEDIATE_INFO, CUDNN_TYPE_BACKEND_DESCRIPTOR);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t finalize(Desc& d);

cudnnStatus_t finalize_heur(Desc& d) {
  const int32_t mode = enum32(d, CUDNN_ATTR_ENGINEHEUR_MODE, -1);
  if (mode < CUDNN_HEUR_MODE_INSTANT || mode >= CUDNN_HEUR_MODES_COUNT) return CUDNN_STATUS_BAD_PARAM;
  Desc engine, cfg;
  engine.type = CUDNN_BACKEND_ENGINE_DESCRIPTOR, cfg.type = CUDNN_BACKEND_ENGINECFG_DESCRIPTOR;
  store_desc(engine, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, *sub(d, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH));
  store_i64(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, 0);
  if (cudnnStatus_t s = finalize(engine)) return s;
  store_desc(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, engine);
  if (cudnnStatus_t s = finalize(cfg)) return s;
  store_desc(d, CUDNN_ATTR_ENGINEHEUR_RESULTS, cfg);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t finalize_plan(Desc& d) {
  const Attr* json = attr(d, CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION);
  if (json && json->n) return not_supported("cudnnBackendFinalize: an execution plan loaded from JSON");
  d.conv = sub(d, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG)->conv;
  store_i64(d, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, 0);
  store_empty(d, CUDNN_ATTR_EXECUTION_PLAN_COMPUTED_INTERMEDIATE_UIDS, CUDNN_TYPE_INT64);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t finalize_pack(Desc& d) {
  const Attr *u = attr(d, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS), *p = attr(d, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS);
  if (u->n != p->n) return CUDNN_STATUS_BAD_PARAM;
  for (auto name : {CUDNN_ATTR_VARIANT_PACK_OVERRIDE_UNIQUE_IDS, CUDNN_ATTR_VARIANT_PACK_OVERRIDE_SHAPES,
                    CUDNN_ATTR_VARIANT_PACK_OVERRIDE_STRIDES})
    if (const Attr* a = attr(d, name); a && a->n)
      return not_supported("cudnnBackendFinalize: a variant pack with shape overrides");
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t finalize(Desc& d) {
  if (d.final) return CUDNN_STATUS_BAD_PARAM;
  if (!implemented(d.type)) return not_supported("cudnnBackendFinalize(" + type_name(d.type) + ")");
  for (const AttrSpec& a : kAttrs)
    if (a.owner == d.type && a.required && !attr(d, a.name)) return CUDNN_STATUS_BAD_PARAM;
  cudnnStatus_t s = CUDNN_STATUS_SUCCESS;
  switch (d.type) {
    case CUDNN_BACKEND_TENSOR_DESCRIPTOR: s = finalize_tensor(d); break;
    case CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR: s = finalize_conv(d); break;
    case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR: s = finalize_graph(d); break;
    case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR: s = finalize_heur(d); break;
    case CUDNN_BACKEND_ENGINE_DESCRIPTOR: s = finalize_engine(d); break;
    case CUDNN_BACKEND_ENGINECFG_DESCRIPTOR: s = finalize_cfg(d); break;
    case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR: s = finalize_plan(d); break;
    case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR: s = finalize_pack(d); break;
    case CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR: break;
    default: s = finalize_conv_op(d); break;
  }
  if (s == CUDNN_STATUS_SUCCESS) d.final = true;
  return s;
}

// ------------------------------------------------------------ execute

cudnnStatus_t run(cudnnHandle_t h, const Lowered& l, void* x, void* w, void* y, void* ws) {
  cudnnTensorDescriptor_t xd = nullptr, yd = nullptr;
  cudnnFilterDescriptor_t wd = nullptr;
  cudnnConvolutionDescriptor_t cd = nullptr;
  cudnnStatus_t s = cudnnCreateTensorDescriptor(&xd);
  if (!s) s = cudnnCreateTensorDescriptor(&yd);
  if (!s) s = cudnnCreateFilterDescriptor(&wd);
  if (!s) s = cudnnCreateConvolutionDescriptor(&cd);
  if (!s) s = cudnnSetTensorNdDescriptor(xd, cudnnDataType_t(l.x.dtype), 4, l.x.dim, l.x.stride);
  if (!s) s = cudnnSetTensorNdDescriptor(yd, cudnnDataType_t(l.y.dtype), 4, l.y.dim, l.y.stride);
  if (!s) s = cudnnSetFilterNdDescriptor(wd, cudnnDataType_t(l.w.dtype), cudnnTensorFormat_t(l.w.format), 4, l.w.dim);
  if (!s)
    s = cudnnSetConvolutionNdDescriptor(cd, 2, l.c.pad, l.c.stride, l.c.dil, cudnnConvolutionMode_t(l.c.mode),
                                        cudnnDataType_t(l.c.dtype));
  if (!s) s = cudnnSetConvolutionGroupCount(cd, l.c.groups);
  if (!s) {
    const float* a = &l.alpha;
    const float* b = &l.beta;
    if (l.op == CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR)
      s = cudnnConvolutionForward(h, a, xd, x, wd, w, cd, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, ws, 0, b, yd, y);
    else if (l.op == CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR)
      s = cudnnConvolutionBackwardData(h, a, wd, w, yd, y, cd, CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, ws, 0, b, xd, x);
    else
      s = cudnnConvolutionBackwardFilter(h, a, xd, x, yd, y, cd, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, ws, 0, b, wd,
                                         w);
  }
  cudnnDestroyTensorDescriptor(xd);
  cudnnDestroyTensorDescriptor(yd);
  cudnnDestroyFilterDescriptor(wd);
  cudnnDestroyConvolutionDescriptor(cd);
  return s;
}

}  // namespace

extern "C" {

cudnnStatus_t cudnnBackendCreateDescriptor(cudnnBackendDescriptorType_t type, cudnnBackendDescriptor_t* out) {
  if (!out || type < 0 || type >= kTypes) return CUDNN_STATUS_BAD_PARAM;
  Desc* d = new Desc;
  d->type = type;
  *out = d;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendDestroyDescriptor(cudnnBackendDescriptor_t p) {
  Desc* d = live(p);
  if (!d) return CUDNN_STATUS_BAD_PARAM;
  d->magic = kDead;
  delete d;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendSetAttribute(cudnnBackendDescriptor_t p, cudnnBackendAttributeName_t name,
                                       cudnnBackendAttributeType_t type, int64_t n, const void* data) {
  Desc* d = live(p);
  const int64_t size = elem_bytes(type);
  if (!d || size == 0 || n < 0 || (n && !data)) return CUDNN_STATUS_BAD_PARAM;
  if (d->final) return CUDNN_STATUS_NOT_INITIALIZED;
  if (!implemented(d->type)) {  // kept as set (bounded); Finalize refuses the type
    if (n > kMany) return CUDNN_STATUS_BAD_PARAM;
    if (type == CUDNN_TYPE_BACKEND_DESCRIPTOR) {
      for (int64_t k = 0; k < n; k++)
        if (!live(static_cast<void* const*>(data)[k])) return CUDNN_STATUS_BAD_PARAM;
    }
    store(*d, name, type, n, data);
    return CUDNN_STATUS_SUCCESS;
  }
  const AttrSpec* a = find_attr(name);
  if (!a || a->owner != d->type || a->readonly || n < a->min || n > a->max) return CUDNN_STATUS_BAD_PARAM;
  // Scalars of an operation (alpha, beta) come as float or double.
  if (type != a->type && !(a->type == CUDNN_TYPE_FLOAT && type == CUDNN_TYPE_DOUBLE)) return CUDNN_STATUS_BAD_PARAM;
  if (type == CUDNN_TYPE_BACKEND_DESCRIPTOR) {
    for (int64_t k = 0; k < n; k++) {
      const Desc* e = live(static_cast<void* const*>(data)[k]);
      if (!e || !e->final || (a->elem == kAnyOp ? !is_conv_op(e->type) : e->type != a->elem))
        return CUDNN_STATUS_BAD_PARAM;
    }
  }
  store(*d, name, type, n, data);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendGetAttribute(cudnnBackendDescriptor_t const p, cudnnBackendAttributeName_t name,
                                       cudnnBackendAttributeType_t type, int64_t requested, int64_t* count,
                                       void* data) {
  const Desc* d = live(p);
  // No array: a query of the count alone (frontends pass their array's size with it).
  if (!d || requested < 0 || (!count && !data) || elem_bytes(type) == 0) return CUDNN_STATUS_BAD_PARAM;
  if (!data) requested = 0;
  if (!d->final) return CUDNN_STATUS_NOT_INITIALIZED;
  const AttrSpec* a = find_attr(name);
  if (!a || a->owner != d->type) return CUDNN_STATUS_BAD_PARAM;
  if (name == CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION)
    return not_supported("cudnnBackendGetAttribute(CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION)");
  const Attr* v = attr(*d, name);
  const cudnnBackendAttributeType_t have = v ? v->type : a->type;
  if (type != have) return CUDNN_STATUS_BAD_PARAM;
  const int64_t n = v ? v->n : 0, k = std::min(n, requested);
  if (type == CUDNN_TYPE_BACKEND_DESCRIPTOR) {
    for (int64_t i = 0; i < k; i++) {
      const Desc* out = live(static_cast<void**>(data)[i]);
      if (!out || out->type != v->descs[i]->type) return CUDNN_STATUS_BAD_PARAM;
    }
    for (int64_t i = 0; i < k; i++) *static_cast<Desc*>(static_cast<void**>(data)[i]) = *v->descs[i];
  } else if (k) {
    std::memcpy(data, v->bytes.data(), size_t(k * elem_bytes(type)));
  }
  if (count) *count = n;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendFinalize(cudnnBackendDescriptor_t p) {
  Desc* d = live(p);
  return d ? finalize(*d) : CUDNN_STATUS_BAD_PARAM;
}

cudnnStatus_t cudnnBackendExecute(cudnnHandle_t h, cudnnBackendDescriptor_t plan, cudnnBackendDescriptor_t pack) {
  const Desc *pl = live(plan), *vp = live(pack);
  if (!h || !pl || !vp || pl->type != CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR ||
      vp->type != CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR || !pl->final || !vp->final || !pl->conv)
    return CUDNN_STATUS_BAD_PARAM;
  const Lowered& l = *pl->conv;
  const std::vector<int64_t> uids = i64s(*vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS);
  const Attr* ptrs = attr(*vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS);
  auto find = [&](int64_t uid) -> void* {
    for (size_t k = 0; k < uids.size(); k++)
      if (uids[k] == uid) {
        void* v;
        std::memcpy(&v, ptrs->bytes.data() + 8 * k, 8);
        return v;
      }
    return nullptr;
  };
  void *x = find(l.uid_x), *w = find(l.uid_w), *y = find(l.uid_y), *ws = nullptr;
  if (!x || !w || !y) return CUDNN_STATUS_BAD_PARAM;
  if (const Attr* a = attr(*vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE); a && a->n) std::memcpy(&ws, a->bytes.data(), 8);
  return run(h, l, x, w, y, ws);
}

}  // extern "C"
