// cuDNN's backend (graph) API as cudnn-frontend drives it, forwarded
// through Wormhole's drop-ins (libcudart.so.13 + libcudnn.so.9): for each
// case, tensor and convolution descriptors, one convolution operation,
// an operation graph, INSTANT heuristics, the engine configuration they
// return, an execution plan and a variant pack, then cudnnBackendExecute;
// checked on the host against reference loops:
//   forward, backward data and backward filter with padding, stride and
//   dilation, NCHW and NHWC data strides, K,C,R,S and K,R,S,C (channels-
//   last) filters, groups, true convolution, alpha/beta blending, half
//   data, and descriptors destroyed once set;
//   the refusals cuDNN makes (wrong attribute type, count, owner or
//   read-only attribute, an unfinalized or wrong descriptor set, incomplete
//   or inconsistent descriptors at Finalize, set after Finalize, get before
//   it, execute of an unfinalized plan or with a uid missing, an engine
//   index beyond the graph's count), a plan built from engine 0 directly,
//   and the forms Wormhole does not forward (CUDNN_STATUS_NOT_SUPPORTED:
//   knob choices, a pointwise operation, two operations in a graph, double
//   data, a filter with padded rows).
// Tolerance: 1e-4 relative to the largest magnitude of the reference
// (2e-3 for half); the measured errors are printed.
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "wh_check.cuh"
#define CD(x) WH_REQUIRE(x, CUDNN_STATUS_SUCCESS, cudnnGetErrorString(r_))

using Desc = cudnnBackendDescriptor_t;
using Vec = std::vector<float>;
static int failures = 0;

static void expect(cudnnStatus_t got, cudnnStatus_t want, const char* what) {
  const bool ok = got == want;
  std::printf("%s %s: %s (want %s)\n", ok ? "ok  " : "FAIL", what, cudnnGetErrorString(got), cudnnGetErrorString(want));
  if (!ok) failures++;
}
static void compare(const char* what, const Vec& got, const Vec& want, double tol) {
  if (!wh_close(what, got, want, tol)) failures++;
}
static unsigned rng = 4242;
static Vec rand_vec(size_t n) {
  Vec v(n);
  for (auto& x : v) {
    rng = rng * 1664525u + 1013904223u;
    x = float((rng >> 8) & 0xffff) / 32768.0f - 1.0f;
  }
  return v;
}

// ------------------------------------------------------------ descriptors

static void set(Desc d, cudnnBackendAttributeName_t n, cudnnBackendAttributeType_t t, int64_t c, const void* v) {
  cudnnStatus_t s = cudnnBackendSetAttribute(d, n, t, c, v);
  if (s != CUDNN_STATUS_SUCCESS) {
    std::printf("FAIL cudnnBackendSetAttribute(%d): %s\n", int(n), cudnnGetErrorString(s));
    std::exit(1);
  }
}
static Desc create(cudnnBackendDescriptorType_t t) {
  Desc d;
  CD(cudnnBackendCreateDescriptor(t, &d));
  return d;
}
// dims N, C, H, W; nhwc: channels-last strides.
static void strides_of(const int64_t* dims, bool nhwc, int64_t* str) {
  if (nhwc) {
    str[1] = 1, str[3] = dims[1], str[2] = dims[1] * dims[3], str[0] = str[2] * dims[2];
  } else {
    str[3] = 1, str[2] = dims[3], str[1] = dims[2] * dims[3], str[0] = str[1] * dims[1];
  }
}
static Desc tensor_unfinalized(int64_t uid, const int64_t* dims, const int64_t* str, cudnnDataType_t dt) {
  Desc d = create(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  const int64_t align = 16;
  set(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt);
  set(d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims);
  set(d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, str);
  set(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
  set(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
  return d;
}
static Desc tensor(int64_t uid, const int64_t* dims, bool nhwc, cudnnDataType_t dt) {
  int64_t str[4];
  strides_of(dims, nhwc, str);
  Desc d = tensor_unfinalized(uid, dims, str, dt);
  CD(cudnnBackendFinalize(d));
  return d;
}

struct Shape {
  int n, c, h, w, k, r, s;
  int pad[2], str[2], dil[2];
  bool conv;  // true convolution (flipped filter), else cross-correlation
  int groups;
  int p() const { return (h + 2 * pad[0] - ((r - 1) * dil[0] + 1)) / str[0] + 1; }
  int q() const { return (w + 2 * pad[1] - ((s - 1) * dil[1] + 1)) / str[1] + 1; }
};

static Desc conv_desc(const Shape& sh, cudnnDataType_t comp) {
  Desc d = create(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  const int64_t sp = 2, pad[2] = {sh.pad[0], sh.pad[1]}, str[2] = {sh.str[0], sh.str[1]},
                dil[2] = {sh.dil[0], sh.dil[1]};
  const cudnnConvolutionMode_t mode = sh.conv ? CUDNN_CONVOLUTION : CUDNN_CROSS_CORRELATION;
  set(d, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &sp);
  set(d, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp);
  set(d, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
  set(d, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pad);
  set(d, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pad);
  set(d, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, str);
  set(d, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dil);
  CD(cudnnBackendFinalize(d));
  return d;
}

enum Dir { kFwd, kBwdData, kBwdFilter };
const char* const kDirName[] = {"forward", "backward data", "backward filter"};

// The operation of a direction over x, w, y (dx / dw / dy as it reads).
static Desc conv_op(Dir dir, Desc x, Desc w, Desc y, Desc conv, float alpha, float beta) {
  static const cudnnBackendDescriptorType_t type[] = {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
                                                      CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
                                                      CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR};
  static const cudnnBackendAttributeName_t names[3][6] = {
      {CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA},
      {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA},
      {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA}};
  Desc op = create(type[dir]);
  const auto* n = names[dir];
  set(op, n[0], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
  set(op, n[1], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &w);
  set(op, n[2], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
  set(op, n[3], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv);
  // Frontends pass double scalars for double compute, float otherwise: both are accepted.
  const double a = alpha;
  set(op, n[4], CUDNN_TYPE_DOUBLE, 1, &a);
  set(op, n[5], CUDNN_TYPE_FLOAT, 1, &beta);
  return op;
}

static Desc graph_of(cudnnHandle_t h, Desc* ops, int n) {
  Desc g = create(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  set(g, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
  set(g, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, n, ops);
  return g;
}

// Heuristics (INSTANT), the first configuration, the plan: the calls
// cudnn-frontend makes, with the queries it makes on the way.
static Desc plan_of(cudnnHandle_t h, Desc graph, int64_t* workspace) {
  int64_t count = -1;
  CD(cudnnBackendGetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT, CUDNN_TYPE_INT64, 1, &count,
                              &count));
  if (count < 1) std::printf("FAIL engine global count %lld\n", (long long)count), failures++;
  Desc heur = create(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_INSTANT;
  set(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph);
  set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
  CD(cudnnBackendFinalize(heur));
  int64_t n = 0;
  CD(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &n, nullptr));
  if (n < 1) {
    std::printf("FAIL heuristics returned %lld configurations\n", (long long)n);
    std::exit(1);
  }
  std::vector<Desc> cfgs(n);
  for (auto& c : cfgs) c = create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
  int64_t got = 0;
  CD(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, n, &got,
                              cfgs.data()));
  // The engine behind the configuration: its index, knobs and notes.
  Desc engine = create(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  CD(cudnnBackendGetAttribute(cfgs[0], CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &got, &engine));
  int64_t index = -1, notes = -1;
  CD(cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &got, &index));
  // A count query names the array's size with no array (as cudnn-frontend asks for notes).
  CD(cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE, 8, &notes, nullptr));
  if (notes != 0) std::printf("FAIL %lld numerical notes counted\n", (long long)notes), failures++;
  cudnnBackendNumericalNote_t note[8];
  CD(cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE, 8, &notes, note));
  if (index < 0 || index >= count || notes != 0)
    std::printf("FAIL engine index %lld, %lld notes\n", (long long)index, (long long)notes), failures++;
  Desc plan = create(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
  set(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
  set(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfgs[0]);
  CD(cudnnBackendFinalize(plan));
  CD(cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &got, workspace));
  for (auto c : cfgs) CD(cudnnBackendDestroyDescriptor(c));
  CD(cudnnBackendDestroyDescriptor(engine));
  CD(cudnnBackendDestroyDescriptor(heur));
  return plan;
}

static Desc pack_of(int n, const int64_t* uids, void* const* ptrs, void* workspace) {
  Desc vp = create(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  set(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids);
  set(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs);
  set(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
  CD(cudnnBackendFinalize(vp));
  return vp;
}

// ------------------------------------------------------------ reference

struct Layout {  // element offsets of N, C, H, W
  int64_t s[4];
  int64_t at(int n, int c, int h, int w) const { return n * s[0] + c * s[1] + h * s[2] + w * s[3]; }
};
static Layout layout(const int64_t* dims, bool nhwc) {
  Layout l;
  strides_of(dims, nhwc, l.s);
  return l;
}

// Every tap of the convolution: y[n,k,p,q] += x[n,c,ih,iw] * w[k,c',r,s]
// read forward, or scattered into dx, or into dw; then alpha/beta.
static void reference(Dir dir, const Shape& sh, const Layout& lx, const Layout& lw, const Layout& ly, const Vec& x,
                      const Vec& w, const Vec& y, Vec& out, float alpha, float beta) {
  Vec acc(out.size(), 0.0f);
  std::vector<double> a(out.size(), 0.0);
  const int cg = sh.c / sh.groups, kg = sh.k / sh.groups;
  for (int n = 0; n < sh.n; n++)
    for (int k = 0; k < sh.k; k++)
      for (int p = 0; p < sh.p(); p++)
        for (int q = 0; q < sh.q(); q++)
          for (int c = 0; c < cg; c++)
            for (int r = 0; r < sh.r; r++)
              for (int s = 0; s < sh.s; s++) {
                const int ih = p * sh.str[0] - sh.pad[0] + r * sh.dil[0], iw = q * sh.str[1] - sh.pad[1] + s * sh.dil[1];
                if (ih < 0 || ih >= sh.h || iw < 0 || iw >= sh.w) continue;
                const int fr = sh.conv ? sh.r - 1 - r : r, fs = sh.conv ? sh.s - 1 - s : s;
                const int64_t xi = lx.at(n, (k / kg) * cg + c, ih, iw), wi = lw.at(k, c, fr, fs), yi = ly.at(n, k, p, q);
                if (dir == kFwd) a[yi] += double(x[xi]) * w[wi];
                if (dir == kBwdData) a[xi] += double(y[yi]) * w[wi];
                if (dir == kBwdFilter) a[wi] += double(x[xi]) * y[yi];
              }
  for (size_t i = 0; i < out.size(); i++) out[i] = float(alpha * a[i] + beta * out[i]);
}

static std::vector<__half> to_half(const Vec& v) {
  std::vector<__half> h(v.size());
  for (size_t i = 0; i < v.size(); i++) h[i] = __float2half(v[i]);
  return h;
}
static Vec from_half(const std::vector<__half>& h) {
  Vec v(h.size());
  for (size_t i = 0; i < h.size(); i++) v[i] = __half2float(h[i]);
  return v;
}

// One case: the graph of one operation, run once; the written tensor
// compared with the reference. Tensor descriptors are destroyed as soon as
// the operation holds them, the operation as soon as the graph does.
static void run_case(cudnnHandle_t h, const char* what, Dir dir, const Shape& sh, bool nhwc, bool wnhwc, float alpha,
                     float beta, cudnnDataType_t dt = CUDNN_DATA_FLOAT) {
  const int64_t xd[4] = {sh.n, sh.c, sh.h, sh.w}, wd[4] = {sh.k, sh.c / sh.groups, sh.r, sh.s},
                yd[4] = {sh.n, sh.k, sh.p(), sh.q()};
  const Layout lx = layout(xd, nhwc), lw = layout(wd, wnhwc), ly = layout(yd, nhwc);
  const size_t nx = size_t(xd[0] * xd[1] * xd[2] * xd[3]), nw = size_t(wd[0] * wd[1] * wd[2] * wd[3]),
               ny = size_t(yd[0] * yd[1] * yd[2] * yd[3]);
  Vec x = rand_vec(nx), w = rand_vec(nw), y = rand_vec(ny);
  const bool half = dt == CUDNN_DATA_HALF;
  if (half) x = from_half(to_half(x)), w = from_half(to_half(w)), y = from_half(to_half(y));
  Vec& out = dir == kFwd ? y : dir == kBwdData ? x : w;
  const Vec before = out;

  Desc tx = tensor('x', xd, nhwc, dt), tw = tensor('w', wd, wnhwc, dt), ty = tensor('y', yd, nhwc, dt);
  Desc conv = conv_desc(sh, CUDNN_DATA_FLOAT);
  Desc op = conv_op(dir, tx, tw, ty, conv, alpha, beta);
  for (Desc d : {tx, tw, ty, conv}) CD(cudnnBackendDestroyDescriptor(d));
  CD(cudnnBackendFinalize(op));
  Desc graph = graph_of(h, &op, 1);
  CD(cudnnBackendDestroyDescriptor(op));
  CD(cudnnBackendFinalize(graph));
  int64_t wsize = -1;
  Desc plan = plan_of(h, graph, &wsize);
  if (wsize < 0) std::printf("FAIL workspace size %lld\n", (long long)wsize), failures++;

  const size_t es = half ? 2 : 4;
  void *dx, *dw, *dy, *ws = nullptr;
  CK(cudaMalloc(&dx, nx * es));
  CK(cudaMalloc(&dw, nw * es));
  CK(cudaMalloc(&dy, ny * es));
  if (wsize > 0) CK(cudaMalloc(&ws, size_t(wsize)));
  auto up = [&](void* d, const Vec& v) {
    if (half) {
      std::vector<__half> hv = to_half(v);
      CK(cudaMemcpy(d, hv.data(), v.size() * 2, cudaMemcpyHostToDevice));
    } else {
      CK(cudaMemcpy(d, v.data(), v.size() * 4, cudaMemcpyHostToDevice));
    }
  };
  up(dx, x), up(dw, w), up(dy, y);
  const int64_t uids[3] = {'y', 'x', 'w'};  // any order: looked up by uid
  void* ptrs[3] = {dy, dx, dw};
  Desc vp = pack_of(3, uids, ptrs, ws);
  CD(cudnnBackendExecute(h, plan, vp));

  void* dout = dir == kFwd ? dy : dir == kBwdData ? dx : dw;
  Vec got(out.size());
  if (half) {
    std::vector<__half> hv(out.size());
    CK(cudaMemcpy(hv.data(), dout, hv.size() * 2, cudaMemcpyDeviceToHost));
    got = from_half(hv);
  } else {
    CK(cudaMemcpy(got.data(), dout, got.size() * 4, cudaMemcpyDeviceToHost));
  }
  reference(dir, sh, lx, lw, ly, x, w, y, out, alpha, beta);
  char name[200];
  std::snprintf(name, sizeof name, "%s %s (%s data, %s filter)", kDirName[dir], what, nhwc ? "NHWC" : "NCHW",
                wnhwc ? "KRSC" : "KCRS");
  compare(name, got, out, half ? 2e-3 : 1e-4);
  // The output really was written: it differs from what it held.
  double moved = 0;
  for (size_t i = 0; i < got.size(); i++) moved = std::fmax(moved, std::fabs(got[i] - before[i]));
  if (moved == 0) std::printf("FAIL %s: output unchanged\n", name), failures++;

  for (Desc d : {vp, plan, graph}) CD(cudnnBackendDestroyDescriptor(d));
  CK(cudaFree(dx));
  CK(cudaFree(dw));
  CK(cudaFree(dy));
  if (ws) CK(cudaFree(ws));
}

// ------------------------------------------------------------ refusals

static void refusals(cudnnHandle_t h) {
  const Shape sh{1, 2, 5, 5, 3, 3, 3, {1, 1}, {1, 1}, {1, 1}, false, 1};
  const int64_t xd[4] = {1, 2, 5, 5}, wd[4] = {3, 2, 3, 3}, yd[4] = {1, 3, 5, 5}, bad_yd[4] = {1, 3, 4, 5};
  int64_t str[4];
  strides_of(xd, false, str);
  const int64_t uid = 1, two[2] = {1, 2};
  const int32_t i32[4] = {1, 2, 5, 5};
  const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;

  Desc t = create(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  expect(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT32, 4, i32), CUDNN_STATUS_BAD_PARAM,
         "tensor dimensions as INT32");
  expect(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 2, two), CUDNN_STATUS_BAD_PARAM,
         "two unique ids");
  expect(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, nullptr),
         CUDNN_STATUS_BAD_PARAM, "null array");
  expect(cudnnBackendSetAttribute(t, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32),
         CUDNN_STATUS_BAD_PARAM, "a convolution attribute on a tensor");
  set(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32);
  set(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, xd);
  set(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 3, str);
  const int64_t align = 16;
  set(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
  int64_t got = 0;
  expect(cudnnBackendGetAttribute(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, &got, str),
         CUDNN_STATUS_NOT_INITIALIZED, "get before finalize");
  expect(cudnnBackendFinalize(t), CUDNN_STATUS_BAD_PARAM, "finalize a tensor without a unique id");
  set(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
  expect(cudnnBackendFinalize(t), CUDNN_STATUS_BAD_PARAM, "finalize a tensor of 4 dimensions and 3 strides");
  set(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, str);
  CD(cudnnBackendFinalize(t));
  expect(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid),
         CUDNN_STATUS_NOT_INITIALIZED, "set after finalize");
  int64_t dims[8] = {};
  CD(cudnnBackendGetAttribute(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 8, &got, dims));
  if (got != 4 || dims[0] != 1 || dims[1] != 2 || dims[2] != 5 || dims[3] != 5)
    std::printf("FAIL tensor dimensions read back\n"), failures++;
  expect(cudnnBackendGetAttribute(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT32, 4, &got, dims),
         CUDNN_STATUS_BAD_PARAM, "get dimensions as INT32");
  CD(cudnnBackendDestroyDescriptor(t));

  Desc tx = tensor('x', xd, false, f32), tw = tensor('w', wd, false, f32), ty = tensor('y', yd, false, f32),
       tbad = tensor('y', bad_yd, false, f32);
  Desc conv = conv_desc(sh, CUDNN_DATA_FLOAT);
  Desc incomplete = create(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  Desc op = create(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
  expect(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                  &incomplete),
         CUDNN_STATUS_BAD_PARAM, "an unfinalized tensor as X");
  expect(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                  &conv),
         CUDNN_STATUS_BAD_PARAM, "a convolution descriptor as X");
  set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &tx);
  set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &tw);
  set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &tbad);
  expect(cudnnBackendFinalize(op), CUDNN_STATUS_BAD_PARAM, "finalize an operation without a convolution");
  set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv);
  expect(cudnnBackendFinalize(op), CUDNN_STATUS_BAD_PARAM, "finalize an operation with a wrong output size");
  set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &ty);
  CD(cudnnBackendFinalize(op));

  // A pointwise operation: created and set, refused at Finalize.
  Desc pw = create(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  const cudnnPointwiseMode_t relu = CUDNN_POINTWISE_RELU_FWD;
  CD(cudnnBackendSetAttribute(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &relu));
  expect(cudnnBackendFinalize(pw), CUDNN_STATUS_NOT_SUPPORTED, "finalize a pointwise descriptor");
  Desc pwop = create(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  expect(cudnnBackendFinalize(pwop), CUDNN_STATUS_NOT_SUPPORTED, "finalize a pointwise operation");
  Desc g0 = create(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  expect(cudnnBackendSetAttribute(g0, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pwop),
         CUDNN_STATUS_BAD_PARAM, "an unfinalized operation in a graph");
  expect(cudnnBackendFinalize(g0), CUDNN_STATUS_BAD_PARAM, "finalize a graph without operations");
  // Two operations in one graph.
  Desc two_ops[2] = {op, op};
  Desc g2 = graph_of(h, two_ops, 2);
  expect(cudnnBackendFinalize(g2), CUDNN_STATUS_NOT_SUPPORTED, "finalize a graph of two convolutions");

  // A plan that is not finalized, a pack missing a uid, read-only and wrong-type attributes.
  Desc graph = graph_of(h, &op, 1);
  CD(cudnnBackendFinalize(graph));
  int64_t wsize;
  Desc plan = plan_of(h, graph, &wsize);
  expect(cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &wsize),
         CUDNN_STATUS_NOT_INITIALIZED, "set on a finalized plan");
  // The engine by index, as a frontend's fallback list builds it: index 0
  // runs, index 1 does not exist; a knob choice the engine lacks is refused.
  Desc eng = create(CUDNN_BACKEND_ENGINE_DESCRIPTOR), eng1 = create(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  const int64_t idx0 = 0, idx1 = 1;
  set(eng, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph);
  set(eng, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &idx0);
  CD(cudnnBackendFinalize(eng));
  set(eng1, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph);
  set(eng1, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &idx1);
  expect(cudnnBackendFinalize(eng1), CUDNN_STATUS_BAD_PARAM, "finalize engine 1 of a graph of 1 engine");
  Desc knob = create(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR);
  const cudnnBackendKnobType_t tile = CUDNN_KNOB_TYPE_TILE_SIZE;
  set(knob, CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &tile);
  set(knob, CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1, &idx1);
  CD(cudnnBackendFinalize(knob));
  Desc kcfg = create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR), cfg = create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
  set(kcfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &eng);
  set(kcfg, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &knob);
  expect(cudnnBackendFinalize(kcfg), CUDNN_STATUS_NOT_SUPPORTED, "finalize a configuration with a knob choice");
  set(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &eng);
  CD(cudnnBackendFinalize(cfg));
  Desc plan_idx = create(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
  set(plan_idx, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg);
  CD(cudnnBackendFinalize(plan_idx));

  Desc plan2 = create(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
  expect(cudnnBackendSetAttribute(plan2, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &wsize),
         CUDNN_STATUS_BAD_PARAM, "set the read-only workspace size");
  expect(cudnnBackendFinalize(plan2), CUDNN_STATUS_BAD_PARAM, "finalize a plan without an engine configuration");
  expect(cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT32, 1, &got, &wsize),
         CUDNN_STATUS_BAD_PARAM, "get the workspace size as INT32");
  float *dx, *dw, *dy;
  CK(cudaMalloc(&dx, 50 * 4));
  CK(cudaMalloc(&dw, 54 * 4));
  CK(cudaMalloc(&dy, 75 * 4));
  const int64_t uids[3] = {'x', 'w', 'y'};
  void* ptrs[3] = {dx, dw, dy};
  Desc vp = pack_of(3, uids, ptrs, nullptr), vp2 = pack_of(2, uids, ptrs, nullptr);
  expect(cudnnBackendExecute(h, plan2, vp), CUDNN_STATUS_BAD_PARAM, "execute an unfinalized plan");
  expect(cudnnBackendExecute(h, plan, vp2), CUDNN_STATUS_BAD_PARAM, "execute without y's pointer");
  expect(cudnnBackendExecute(h, vp, plan), CUDNN_STATUS_BAD_PARAM, "execute a variant pack as the plan");
  Desc vp3 = create(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  set(vp3, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids);
  set(vp3, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 2, ptrs);
  expect(cudnnBackendFinalize(vp3), CUDNN_STATUS_BAD_PARAM, "finalize 3 uids with 2 pointers");
  // The complete pack runs, on both plans: y from x = 1, w = 1 is the
  // count of the window's taps inside the image (9 inside, 4 at a corner).
  std::vector<float> ones(54, 1.0f), yv(75, 0.0f);
  CK(cudaMemcpy(dx, ones.data(), 50 * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dw, ones.data(), 54 * 4, cudaMemcpyHostToDevice));
  for (Desc p : {plan, plan_idx}) {
    CK(cudaMemset(dy, 0, 75 * 4));
    CD(cudnnBackendExecute(h, p, vp));
    CK(cudaMemcpy(yv.data(), dy, 75 * 4, cudaMemcpyDeviceToHost));
    const bool ok = yv[0] == 8.0f && yv[12] == 18.0f && yv[25 + 24] == 8.0f;  // 2 channels: 4, 9, 4 taps
    std::printf("%s plan %s on all-ones data: corner %g, centre %g\n", ok ? "ok  " : "FAIL",
                p == plan ? "from heuristics" : "from engine 0", yv[0], yv[12]);
    if (!ok) failures++;
  }

  // Forms the legacy path does not take: double data, a channels-last filter.
  const cudnnDataType_t f64 = CUDNN_DATA_DOUBLE;
  Desc dxt = tensor('x', xd, false, f64), dwt = tensor('w', wd, false, f64), dyt = tensor('y', yd, false, f64);
  Desc dop = conv_op(kFwd, dxt, dwt, dyt, conv_desc(sh, f64), 1, 0);
  CD(cudnnBackendFinalize(dop));
  Desc dg = graph_of(h, &dop, 1);
  expect(cudnnBackendFinalize(dg), CUDNN_STATUS_NOT_SUPPORTED, "finalize a graph of double data");
  const int64_t padded[4] = {36, 18, 6, 1};  // K, C, R, S with rows padded to 6 columns
  Desc wpad = tensor_unfinalized('w', wd, padded, f32);
  CD(cudnnBackendFinalize(wpad));
  Desc cop = conv_op(kFwd, tx, wpad, ty, conv, 1, 0);
  CD(cudnnBackendFinalize(cop));
  Desc cg = graph_of(h, &cop, 1);
  expect(cudnnBackendFinalize(cg), CUDNN_STATUS_NOT_SUPPORTED, "finalize a graph with a filter of padded rows");

  for (Desc d : {eng, eng1, knob, kcfg, cfg, plan_idx})
    CD(cudnnBackendDestroyDescriptor(d));
  for (Desc d : {tx, tw, ty, tbad, conv, incomplete, op, pw, pwop, g0, g2, graph, plan, plan2, vp, vp2, vp3, dxt, dwt,
                 dyt, dop, dg, wpad, cop, cg})
    CD(cudnnBackendDestroyDescriptor(d));
  CK(cudaFree(dx));
  CK(cudaFree(dw));
  CK(cudaFree(dy));
}

int main() {
  cudnnHandle_t h;
  CD(cudnnCreate(&h));
  cudaStream_t stream;
  CK(cudaStreamCreate(&stream));
  CD(cudnnSetStream(h, stream));

  const Shape a{2, 3, 7, 6, 4, 3, 3, {1, 1}, {2, 2}, {1, 1}, false, 1};         // pad 1, stride 2
  const Shape b{2, 4, 9, 8, 6, 3, 2, {2, 1}, {1, 2}, {2, 1}, false, 2};         // dilation, groups 2
  const Shape c{1, 2, 8, 7, 3, 2, 3, {0, 2}, {3, 1}, {1, 2}, true, 1};          // true convolution
  for (bool nhwc : {false, true}) {
    for (Dir d : {kFwd, kBwdData, kBwdFilter}) {
      run_case(h, "pad 1 stride 2", d, a, nhwc, false, 1, 0);
      run_case(h, "pad 2x1 stride 1x2 dilation 2x1 groups 2, alpha 0.5 beta 1", d, b, nhwc, nhwc, 0.5f, 1.0f);
      run_case(h, "true convolution pad 0x2 stride 3x1 dilation 1x2", d, c, nhwc, nhwc, 1, 0);
    }
  }
  for (Dir d : {kFwd, kBwdData, kBwdFilter}) {
    run_case(h, "half, pad 1 stride 2", d, a, false, false, 1, 0, CUDNN_DATA_HALF);
    run_case(h, "half, channels-last, groups 2", d, b, true, true, 1, 0, CUDNN_DATA_HALF);
  }
  refusals(h);
  CD(cudnnDestroy(h));
  CK(cudaStreamDestroy(stream));
  std::printf("%s: %d failure(s)\n", failures ? "FAILED" : "PASSED", failures);
  return failures ? 1 : 0;
}
