// The sim device's cuDNN: cuDNN semantics computed by oneDNN (Intel's
// deep-learning primitives, libdnnl 2.x) on the CPU, directly over the sim
// device's memory (Context::host_view). Operations run on the session's
// thread in call order, like every other sim device operation, so stream
// order holds.
//
// Every operation gathers its input tensors (any strides) into dense NCHW
// buffers, runs the oneDNN primitive on those, and scatters the result back
// with cuDNN's blend: out = alpha * result + beta * out, out's previous
// contents never read when beta == 0. Gathering first makes in-place calls
// (y == x, dx == dy) and any overlap safe.
//   convolution  oneDNN convolution (direct algorithm), groups through
//                goihw weights (NHWC filters, K, R, S, C, permuted to and
//                from them); CUDNN_CONVOLUTION (the true convolution)
//                flips the filter's spatial dimensions around it;
//   fused convolution, bias and activation  the convolution as above,
//                then one loop (alpha1, alpha2 z, bias, ReLU or identity);
//   pooling      oneDNN pooling (max; average including or excluding the
//                padding); max pooling's backward pass runs the forward
//                pass again for oneDNN's workspace of argmax positions;
//   activation   oneDNN eltwise (logistic, relu, tanh, clip, elu, linear,
//                swish); the backward pass uses x (src);
//   softmax      oneDNN softmax v2 (accurate or log) over C*H*W (instance)
//                or C (channel);
//   bias gradient, AddTensor, TransformTensor, OpTensor, SetTensor,
//   ScaleTensor, batch normalization, LRN, dropout and ReduceTensor: plain
//   loops (statistics and sums accumulated in double).
// Half and bfloat16 operands are staged: widened to float copies for the
// operation, outputs rounded back (to nearest even) when it ends, so every
// operation computes in float on any CPU.
// Dense (packed NCHW) operands skip the gather, and a dense output that
// overlaps no input and is written with alpha 1, beta 0 receives the result
// directly. oneDNN's OpenMP runs one thread per session thread: sessions
// already run in parallel, and the sim device's host is often shared (a
// spinning OpenMP team on a loaded machine costs more than it gains).
#include <spdlog/spdlog.h>

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <list>
#include <type_traits>
#include <utility>
#include <oneapi/dnnl/dnnl.hpp>
#include <vector>

#include "wormhole/proto/cudnn_check.hpp"
#include "wormhole/server/blaslt.hpp"  // fp16 / bf16 conversions
#include "wormhole/server/dnn.hpp"

namespace wh::server {

namespace {

using namespace wh::proto;
using dnnl::algorithm;
using dnnl::memory;
using dnnl::prop_kind;
using Dims = memory::dims;
using Vec = std::vector<float>;

// Calls f(dense index, element offset) for every element of t, in NCHW
// (row-major) order: the innermost dimension as one strided run (a plain loop
// the compiler vectorises when it is contiguous), the others carried after it.
template <class F>
void each(const DnnTensor& t, F&& f) {
  const int64_t n = dnn::count(t);
  if (n <= 0 || t.nb <= 0) return;
  const int last = t.nb - 1;
  const int64_t inner = t.dim[last], step = t.stride[last];
  int64_t idx[kDnnMaxDims] = {};
  int64_t off = 0;
  for (int64_t i = 0; i < n; i += inner) {
    for (int64_t j = 0; j < inner; j++) f(i + j, off + j * step);
    for (int k = last - 1; k >= 0; k--) {
      if (++idx[k] < t.dim[k]) {
        off += t.stride[k];
        break;
      }
      off -= int64_t(t.dim[k] - 1) * t.stride[k];
      idx[k] = 0;
    }
  }
}

// t read as a tensor of to's dimensions: its broadcast (size 1) dimensions
// step by 0.
DnnTensor broadcast(const DnnTensor& t, const DnnTensor& to) {
  DnnTensor b = t;
  for (int k = 0; k < b.nb; k++) {
    b.dim[k] = to.dim[k];
    if (t.dim[k] == 1) b.stride[k] = 0;
  }
  return b;
}

class SimDnn final : public Dnn {
 public:
  explicit SimDnn(Context& ctx) : ctx_(ctx), eng_(dnnl::engine::kind::cpu, 0) {}

  // One OpenMP thread for oneDNN on the calling (session) thread; libgomp is
  // oneDNN's dependency, looked up rather than linked.
  static void one_thread() {
    static auto set = reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
    thread_local bool done = false;
    if (set && !done) set(1), done = true;
  }

  Err conv_fwd(Stream*, const DnnConvFwdReq& rq) override {
    Stage stage;
    return guard([&] {
      const float *x, *w;
      float* y;
      if (Err e = views(rq.x, rq.xp, &x, rq.w, rq.wp, &w, rq.y, rq.yp, &y); e) return e;
      Buf xs = in(rq.x, x);
      Vec ws = filter(rq.w, w, rq.conv.mode == 0);
      Buf ys = out(rq.y, y, rq.alpha, rq.beta, {{x, dnn::span(rq.x)}, {w, dnn::filter_count(rq.w)}});
      Conv c(*this, rq.x, rq.w, rq.conv, rq.y);
      dnnl::convolution_forward::primitive_desc pd(c.fwd(), eng_);
      run(dnnl::convolution_forward(pd),
          {{DNNL_ARG_SRC, mem(c.x, xs)}, {DNNL_ARG_WEIGHTS, mem(c.w, ws)}, {DNNL_ARG_DST, mem(c.y, ys)}});
      scatter(rq.y, y, ys, rq.alpha, rq.beta);
      return Err(cudaSuccess);
    });
  }

  // The convolution into a dense buffer, then alpha1, alpha2 z, the
  // per-channel bias and the activation per element; z is gathered before
  // y is written (it may be y itself).
  Err conv_bias_act(Stream*, const DnnConvBiasActReq& rq) override {
    Stage stage;
    return guard([&] {
      const float *x, *w, *bias, *z = nullptr;
      float* y;
      if (Err e = view(rq.x, rq.xp, &x); e) return e;
      if (Err e = view_filter(rq.w, rq.wp, &w); e) return e;
      if (Err e = view(rq.bias, rq.biasp, &bias); e) return e;
      if (rq.alpha2 != 0)
        if (Err e = view(rq.z, rq.zp, &z); e) return e;
      if (Err e = view(rq.y, rq.yp, &y); e) return e;
      Buf xs = in(rq.x, x);
      Vec ws = filter(rq.w, w, rq.conv.mode == 0);
      Vec r(size_t(dnn::count(rq.y)));
      Conv c(*this, rq.x, rq.w, rq.conv, rq.y);
      dnnl::convolution_forward::primitive_desc pd(c.fwd(), eng_);
      run(dnnl::convolution_forward(pd),
          {{DNNL_ARG_SRC, mem(c.x, xs)}, {DNNL_ARG_WEIGHTS, mem(c.w, ws)}, {DNNL_ARG_DST, mem(c.y, r)}});
      const Vec zs = z ? gather(rq.z, z) : Vec();
      const float a1 = float(rq.alpha1), a2 = float(rq.alpha2);
      const bool relu = rq.act.mode == dnn::kActRelu;
      const int64_t C = rq.y.dim[1], inner = int64_t(rq.y.dim[2]) * rq.y.dim[3];
      for (size_t i = 0; i < r.size(); i++) {
        const int64_t ch = (int64_t(i) / inner) % C;
        float v = a1 * r[i] + bias[ch * rq.bias.stride[1]];
        if (z) v += a2 * zs[i];
        r[i] = relu && v < 0 ? 0.0f : v;
      }
      scatter(rq.y, y, r, 1, 0);
      return Err(cudaSuccess);
    });
  }

  Err conv_bwd_data(Stream*, const DnnConvBwdDataReq& rq) override {
    Stage stage;
    return guard([&] {
      const float *w, *dy;
      float* dx;
      if (Err e = views(rq.w, rq.wp, &w, rq.dy, rq.dyp, &dy, rq.dx, rq.dxp, &dx); e) return e;
      Vec ws = filter(rq.w, w, rq.conv.mode == 0);
      Buf dys = in(rq.dy, dy);
      Buf dxs = out(rq.dx, dx, rq.alpha, rq.beta, {{w, dnn::filter_count(rq.w)}, {dy, dnn::span(rq.dy)}});
      Conv c(*this, rq.dx, rq.w, rq.conv, rq.dy);
      run(dnnl::convolution_backward_data(c.bwd<dnnl::convolution_backward_data>(eng_)),
          {{DNNL_ARG_DIFF_DST, mem(c.y, dys)}, {DNNL_ARG_WEIGHTS, mem(c.w, ws)}, {DNNL_ARG_DIFF_SRC, mem(c.x, dxs)}});
      scatter(rq.dx, dx, dxs, rq.alpha, rq.beta);
      return Err(cudaSuccess);
    });
  }

  Err conv_bwd_filter(Stream*, const DnnConvBwdFilterReq& rq) override {
    Stage stage;
    return guard([&] {
      const float *x, *dy;
      float* dw;
      if (Err e = views(rq.x, rq.xp, &x, rq.dy, rq.dyp, &dy, rq.dw, rq.dwp, &dw); e) return e;
      Buf xs = in(rq.x, x), dys = in(rq.dy, dy);
      Vec dws(dnn::filter_count(rq.dw));
      Conv c(*this, rq.x, rq.dw, rq.conv, rq.dy);
      run(dnnl::convolution_backward_weights(c.bwd<dnnl::convolution_backward_weights>(eng_)),
          {{DNNL_ARG_SRC, mem(c.x, xs)}, {DNNL_ARG_DIFF_DST, mem(c.y, dys)}, {DNNL_ARG_DIFF_WEIGHTS, mem(c.w, dws)}});
      // The gradient of the flipped filter, flipped back; in dw's layout.
      DnnFilter dense = rq.dw;
      dense.format = dnn::kNCHW;
      Vec out = unfilter(rq.dw, rq.conv.mode == 0 ? filter(dense, dws.data(), true) : std::move(dws));
      blend(dw, out.data(), int64_t(out.size()), rq.alpha, rq.beta);
      return Err(cudaSuccess);
    });
  }

  Err conv_bwd_bias(Stream*, const DnnConvBwdBiasReq& rq) override {
    Stage stage;
    const float* dy;
    float* db;
    if (Err e = views(rq.dy, rq.dyp, &dy, rq.db, rq.dbp, &db); e) return e;
    const DnnTensor& t = rq.dy;
    Vec sums(t.dim[1]);
    for (int c = 0; c < t.dim[1]; c++) {
      double acc = 0;
      for (int n = 0; n < t.dim[0]; n++)
        for (int h = 0; h < t.dim[2]; h++)
          for (int w = 0; w < t.dim[3]; w++)
            acc += dy[int64_t(n) * t.stride[0] + int64_t(c) * t.stride[1] + int64_t(h) * t.stride[2] +
                      int64_t(w) * t.stride[3]];
      sums[c] = float(acc);
    }
    scatter(rq.db, db, sums, rq.alpha, rq.beta);
    return cudaSuccess;
  }

  Err add_tensor(Stream*, const DnnAddTensorReq& rq) override {
    Stage stage;
    const float* a;
    float* c;
    if (Err e = views(rq.a, rq.ap, &a, rq.c, rq.cp, &c); e) return e;
    const DnnTensor ab = broadcast(rq.a, rq.c);
    const float al = float(rq.alpha), be = float(rq.beta);
    if (packed(rq.c) && !(a < c + dnn::span(rq.c) && c < a + dnn::span(rq.a))) {  // the common bias case
      if (be == 0)
        each(ab, [&](int64_t i, int64_t off) { c[i] = al * a[off]; });
      else
        each(ab, [&](int64_t i, int64_t off) { c[i] = al * a[off] + be * c[i]; });
      return cudaSuccess;
    }
    Vec r(dnn::count(rq.c));
    each(ab, [&](int64_t i, int64_t off) { r[i] = a[off]; });
    scatter(rq.c, c, r, rq.alpha, rq.beta);
    return cudaSuccess;
  }

  Err pool_fwd(Stream*, const DnnPoolFwdReq& rq) override {
    Stage stage;
    return guard([&] {
      const float* x;
      float* y;
      if (Err e = views(rq.x, rq.xp, &x, rq.y, rq.yp, &y); e) return e;
      Buf xs = in(rq.x, x), ys = out(rq.y, y, rq.alpha, rq.beta, {{x, dnn::span(rq.x)}});
      Pool p(*this, rq.pool, rq.x, rq.y);
      dnnl::pooling_forward::primitive_desc pd(p.fwd(), eng_);
      std::unordered_map<int, memory> args{{DNNL_ARG_SRC, mem(p.x, xs)}, {DNNL_ARG_DST, mem(p.y, ys)}};
      if (pd.workspace_desc().get_size()) args.emplace(DNNL_ARG_WORKSPACE, memory(pd.workspace_desc(), eng_));
      run(dnnl::pooling_forward(pd), args);
      scatter(rq.y, y, ys, rq.alpha, rq.beta);
      return Err(cudaSuccess);
    });
  }

  Err pool_bwd(Stream*, const DnnPoolBwdReq& rq) override {
    Stage stage;
    return guard([&] {
      const float *x, *dy, *yv;
      float* dx;
      // y is checked, not read: the forward pass is recomputed
      if (Err e = views(rq.y, rq.yp, &yv, rq.dy, rq.dyp, &dy, rq.x, rq.xp, &x, rq.dx, rq.dxp, &dx); e) return e;
      Buf xs = in(rq.x, x), dys = in(rq.dy, dy);
      Vec ys(dnn::count(rq.dy));
      Buf dxs = out(rq.dx, dx, rq.alpha, rq.beta, {{x, dnn::span(rq.x)}, {dy, dnn::span(rq.dy)}});
      Pool p(*this, rq.pool, rq.x, rq.dy);
      dnnl::pooling_forward::primitive_desc fpd(p.fwd(), eng_);
      memory ws;
      const bool need_ws = fpd.workspace_desc().get_size() != 0;
      if (need_ws) {
        ws = memory(fpd.workspace_desc(), eng_);
        run(dnnl::pooling_forward(fpd),
            {{DNNL_ARG_SRC, mem(p.x, xs)}, {DNNL_ARG_DST, mem(p.y, ys)}, {DNNL_ARG_WORKSPACE, ws}});
      }
      dnnl::pooling_backward::desc d(p.alg, p.x, p.y, p.strides, p.kernel, p.pl, p.pr);
      dnnl::pooling_backward::primitive_desc pd(d, eng_, fpd);
      std::unordered_map<int, memory> args{{DNNL_ARG_DIFF_DST, mem(p.y, dys)}, {DNNL_ARG_DIFF_SRC, mem(p.x, dxs)}};
      if (need_ws) args.emplace(DNNL_ARG_WORKSPACE, ws);
      run(dnnl::pooling_backward(pd), args);
      scatter(rq.dx, dx, dxs, rq.alpha, rq.beta);
      return Err(cudaSuccess);
    });
  }

  Err act_fwd(Stream*, const DnnActFwdReq& rq) override {
    Stage stage;
    return guard([&] {
      const float* x;
      float* y;
      if (Err e = views(rq.x, rq.xp, &x, rq.y, rq.yp, &y); e) return e;
      Buf xs = in(rq.x, x), ys = out(rq.y, y, rq.alpha, rq.beta, {{x, dnn::span(rq.x)}});
      Act a(rq.act, dnn::count(rq.x));
      dnnl::eltwise_forward::primitive_desc pd(a.fwd(), eng_);
      run(dnnl::eltwise_forward(pd), {{DNNL_ARG_SRC, mem(a.md, xs)}, {DNNL_ARG_DST, mem(a.md, ys)}});
      scatter(rq.y, y, ys, rq.alpha, rq.beta);
      return Err(cudaSuccess);
    });
  }

  Err act_bwd(Stream*, const DnnActBwdReq& rq) override {
    Stage stage;
    return guard([&] {
      const float *yv, *dy, *x;
      float* dx;
      // y is checked, not read: the gradient is computed from x
      if (Err e = views(rq.y, rq.yp, &yv, rq.dy, rq.dyp, &dy, rq.x, rq.xp, &x, rq.dx, rq.dxp, &dx); e) return e;
      Buf xs = in(rq.x, x), dys = in(rq.dy, dy), dxs = out(rq.dx, dx, rq.alpha, rq.beta, {{x, dnn::span(rq.x)}, {dy, dnn::span(rq.dy)}});
      Act a(rq.act, dnn::count(rq.x));
      dnnl::eltwise_forward::primitive_desc hint(a.fwd(), eng_);
      dnnl::eltwise_backward::desc d(a.alg, a.md, a.md, a.alpha, a.beta);
      dnnl::eltwise_backward::primitive_desc pd(d, eng_, hint);
      run(dnnl::eltwise_backward(pd),
          {{DNNL_ARG_SRC, mem(a.md, xs)}, {DNNL_ARG_DIFF_DST, mem(a.md, dys)}, {DNNL_ARG_DIFF_SRC, mem(a.md, dxs)}});
      scatter(rq.dx, dx, dxs, rq.alpha, rq.beta);
      return Err(cudaSuccess);
    });
  }

  Err softmax_fwd(Stream*, const DnnSoftmaxFwdReq& rq) override {
    Stage stage;
    return guard([&] {
      const float* x;
      float* y;
      if (Err e = views(rq.x, rq.xp, &x, rq.y, rq.yp, &y); e) return e;
      Buf xs = in(rq.x, x), ys = out(rq.y, y, rq.alpha, rq.beta, {{x, dnn::span(rq.x)}});
      const Softmax sm(rq.x, rq.mode, rq.algo);
      dnnl::softmax_v2_forward::primitive_desc pd(sm.fwd(), eng_);
      run(dnnl::softmax_v2_forward(pd), {{DNNL_ARG_SRC, mem(sm.md, xs)}, {DNNL_ARG_DST, mem(sm.md, ys)}});
      scatter(rq.y, y, ys, rq.alpha, rq.beta);
      return Err(cudaSuccess);
    });
  }

  Err softmax_bwd(Stream*, const DnnSoftmaxBwdReq& rq) override {
    Stage stage;
    return guard([&] {
      const float *yv, *dy;
      float* dx;
      if (Err e = views(rq.y, rq.yp, &yv, rq.dy, rq.dyp, &dy, rq.dx, rq.dxp, &dx); e) return e;
      Buf ys = in(rq.y, yv), dys = in(rq.dy, dy),
          dxs = out(rq.dx, dx, rq.alpha, rq.beta, {{yv, dnn::span(rq.y)}, {dy, dnn::span(rq.dy)}});
      const Softmax sm(rq.y, rq.mode, rq.algo);
      const dnnl::softmax_v2_forward::primitive_desc hint(sm.fwd(), eng_);
      dnnl::softmax_v2_backward::primitive_desc pd({sm.alg, sm.md, sm.md, sm.md, 1}, eng_, hint);
      run(dnnl::softmax_v2_backward(pd),
          {{DNNL_ARG_DST, mem(sm.md, ys)}, {DNNL_ARG_DIFF_DST, mem(sm.md, dys)}, {DNNL_ARG_DIFF_SRC, mem(sm.md, dxs)}});
      scatter(rq.dx, dx, dxs, rq.alpha, rq.beta);
      return Err(cudaSuccess);
    });
  }

  Err transform(Stream*, const DnnTransformReq& rq) override {
    Stage stage;
    const float* x;
    float* y;
    if (Err e = views(rq.x, rq.xp, &x, rq.y, rq.yp, &y); e) return e;
    scatter(rq.y, y, gather(rq.x, x), rq.alpha, rq.beta);
    return cudaSuccess;
  }

  Err op_tensor(Stream*, const DnnOpTensorReq& rq) override {
    Stage stage;
    const float *a, *b = nullptr;
    float* c;
    const bool uses_b = dnn::op_uses_b(rq.op);
    if (Err e = view(rq.a, rq.ap, &a); e) return e;
    if (uses_b)
      if (Err e = view(rq.b, rq.bp, &b); e) return e;
    if (Err e = view(rq.c, rq.cp, &c); e) return e;
    Vec r = gather(rq.a, a), bv(r.size(), 0.0f);
    if (uses_b) {
      each(broadcast(rq.b, rq.c), [&](int64_t i, int64_t off) { bv[i] = b[off]; });
    }
    const float a1 = float(rq.alpha1), a2 = float(rq.alpha2);
    for (size_t i = 0; i < r.size(); i++) {
      const float u = a1 * r[i], v = a2 * bv[i];
      switch (rq.op) {
        case 0: r[i] = u + v; break;
        case 1: r[i] = u * v; break;
        case 2: r[i] = std::fmin(u, v); break;
        case 3: r[i] = std::fmax(u, v); break;
        default: r[i] = std::sqrt(u); break;
      }
    }
    scatter(rq.c, c, r, 1.0, rq.beta);
    return cudaSuccess;
  }

  Err set_tensor(Stream*, const DnnSetTensorReq& rq) override {
    Stage stage;
    float* y;
    if (Err e = view(rq.y, rq.yp, &y); e) return e;
    const float v = float(rq.value);
    each(rq.y, [&](int64_t, int64_t off) { y[off] = v; });
    return cudaSuccess;
  }

  Err scale_tensor(Stream*, const DnnScaleTensorReq& rq) override {
    Stage stage;
    float* y;
    if (Err e = view(rq.y, rq.yp, &y); e) return e;
    const float a = float(rq.alpha);
    each(rq.y, [&](int64_t, int64_t off) { y[off] *= a; });
    return cudaSuccess;
  }


  // ---- batch normalization (plain loops, double accumulation)

  Err bn_fwd_train(Stream*, const DnnBnFwdTrainReq& rq) override {
    Stage stage;
    const float *x, *sc, *bi;
    float *y, *rm = nullptr, *rv = nullptr, *sm = nullptr, *si = nullptr;
    if (Err e = views(rq.x, rq.xp, &x, rq.y, rq.yp, &y, rq.bn, rq.scalep, &sc, rq.bn, rq.biasp, &bi); e) return e;
    if (Err e = views_if_set(rq.bn, rq.rmeanp, &rm, rq.bn, rq.rvarp, &rv, rq.bn, rq.smeanp, &sm, rq.bn, rq.sinvp,
                             &si); e)
      return e;
    const Vec xv = gather(rq.x, x), scale = gather(rq.bn, sc), bias = gather(rq.bn, bi);
    const BnIndex ix(rq.x, rq.mode);
    std::vector<double> mean, var;
    bn_stats(xv, ix, &mean, &var);
    const int64_t m = dnn::bn_samples(rq.x, rq.mode);
    Vec inv(ix.params), out(xv.size());
    for (int64_t p = 0; p < ix.params; p++) inv[p] = float(1.0 / std::sqrt(var[p] + rq.eps));
    ix.each([&](size_t i, int64_t p) {
      out[i] = scale[p] * float((xv[i] - mean[p]) * inv[p]) + bias[p];
    });
    scatter(rq.y, y, out, rq.alpha, rq.beta);
    if (rm && rv) {  // running averages: the variance unbiased (m / (m - 1)), as cuDNN keeps it
      Vec rmv = gather(rq.bn, rm), rvv = gather(rq.bn, rv);
      const double f = rq.factor, unbias = m > 1 ? double(m) / double(m - 1) : 1.0;
      for (int64_t p = 0; p < ix.params; p++) {
        rmv[p] = float((1 - f) * rmv[p] + f * mean[p]);
        rvv[p] = float((1 - f) * rvv[p] + f * var[p] * unbias);
      }
      scatter(rq.bn, rm, rmv, 1, 0);
      scatter(rq.bn, rv, rvv, 1, 0);
    }
    if (sm && si) {
      Vec mv(mean.begin(), mean.end());
      scatter(rq.bn, sm, mv, 1, 0);
      scatter(rq.bn, si, inv, 1, 0);
    }
    return cudaSuccess;
  }

  Err bn_fwd_infer(Stream*, const DnnBnFwdInferReq& rq) override {
    Stage stage;
    const float *x, *sc, *bi, *mp, *vp;
    float* y;
    if (Err e = views(rq.x, rq.xp, &x, rq.y, rq.yp, &y, rq.bn, rq.scalep, &sc, rq.bn, rq.biasp, &bi,
                      rq.bn, rq.meanp, &mp, rq.bn, rq.varp, &vp); e)
      return e;
    const Vec xv = gather(rq.x, x), scale = gather(rq.bn, sc), bias = gather(rq.bn, bi), mean = gather(rq.bn, mp),
              var = gather(rq.bn, vp);
    const BnIndex ix(rq.x, rq.mode);
    Vec inv(ix.params), out(xv.size());
    for (int64_t p = 0; p < ix.params; p++) inv[p] = float(1.0 / std::sqrt(double(var[p]) + rq.eps));
    ix.each([&](size_t i, int64_t p) {
      out[i] = scale[p] * (xv[i] - mean[p]) * inv[p] + bias[p];
    });
    scatter(rq.y, y, out, rq.alpha, rq.beta);
    return cudaSuccess;
  }

  Err bn_bwd(Stream*, const DnnBnBwdReq& rq) override {
    Stage stage;
    const float *x, *dy, *sc, *smp = nullptr, *sip = nullptr;
    float *dx, *ds, *db;
    if (Err e = views(rq.x, rq.xp, &x, rq.dy, rq.dyp, &dy, rq.dx, rq.dxp, &dx, rq.bn, rq.scalep, &sc,
                      rq.bn, rq.dscalep, &ds, rq.bn, rq.dbiasp, &db); e)
      return e;
    if (Err e = views_if_set(rq.bn, rq.smeanp, &smp, rq.bn, rq.sinvp, &sip); e) return e;
    const Vec xv = gather(rq.x, x), dyv = gather(rq.dy, dy), scale = gather(rq.bn, sc);
    const BnIndex ix(rq.x, rq.mode);
    std::vector<double> mean, inv;
    if (smp && sip) {  // the forward pass's saved statistics
      const Vec mv = gather(rq.bn, smp), iv = gather(rq.bn, sip);
      mean.assign(mv.begin(), mv.end());
      inv.assign(iv.begin(), iv.end());
    } else {
      bn_stats(xv, ix, &mean, &inv);
      for (auto& v : inv) v = 1.0 / std::sqrt(v + rq.eps);
    }
    const double m = double(dnn::bn_samples(rq.x, rq.mode));
    std::vector<double> sdy(ix.params), sdyx(ix.params);
    ix.each([&](size_t i, int64_t p) {
      sdy[p] += dyv[i];
      sdyx[p] += dyv[i] * (xv[i] - mean[p]) * inv[p];
    });
    Vec dxv(xv.size()), dsv(ix.params), dbv(ix.params);
    ix.each([&](size_t i, int64_t p) {
      const double xh = (xv[i] - mean[p]) * inv[p];
      dxv[i] = float(scale[p] * inv[p] / m * (m * dyv[i] - sdy[p] - xh * sdyx[p]));
    });
    for (int64_t p = 0; p < ix.params; p++) dsv[p] = float(sdyx[p]), dbv[p] = float(sdy[p]);
    scatter(rq.dx, dx, dxv, rq.alpha, rq.beta);
    scatter(rq.bn, ds, dsv, rq.alpha_p, rq.beta_p);
    scatter(rq.bn, db, dbv, rq.alpha_p, rq.beta_p);
    return cudaSuccess;
  }

  // ---- LRN across channels: y = x (k + alpha/n sum x^2 over the window)^-beta

  Err lrn_fwd(Stream*, const DnnLrnFwdReq& rq) override {
    Stage stage;
    const float* x;
    float* y;
    if (Err e = views(rq.x, rq.xp, &x, rq.y, rq.yp, &y); e) return e;
    const Vec xv = gather(rq.x, x);
    const std::vector<double> sc = lrn_scale(rq.lrn, rq.x, xv);
    Vec out(xv.size());
    for (size_t i = 0; i < xv.size(); i++) out[i] = float(xv[i] * std::pow(sc[i], -rq.lrn.beta));
    scatter(rq.y, y, out, rq.alpha, rq.beta);
    return cudaSuccess;
  }

  // dx_i = dy_i s_i^-b - 2 b alpha/n x_i sum over the windows holding i of dy_j x_j s_j^(-b-1)
  // (recomputed from x; y is checked, not read).
  Err lrn_bwd(Stream*, const DnnLrnBwdReq& rq) override {
    Stage stage;
    const float *yv, *dy, *x;
    float* dx;
    if (Err e = views(rq.y, rq.yp, &yv, rq.dy, rq.dyp, &dy, rq.x, rq.xp, &x, rq.dx, rq.dxp, &dx); e) return e;
    const Vec xv = gather(rq.x, x), dyv = gather(rq.dy, dy);
    const std::vector<double> sc = lrn_scale(rq.lrn, rq.x, xv);
    const double b = rq.lrn.beta, coef = 2.0 * b * rq.lrn.alpha / rq.lrn.n;
    std::vector<double> t(xv.size()), sb(xv.size());  // sb: s^-b (one pow per element)
    for (size_t i = 0; i < xv.size(); i++) {
      sb[i] = std::pow(sc[i], -b);
      t[i] = dyv[i] * xv[i] * sb[i] / sc[i];
    }
    const int64_t C = rq.x.dim[1], inner = dnn::count(rq.x) / (int64_t(rq.x.dim[0]) * C);
    const int64_t lb = (rq.lrn.n - 1) / 2, la = rq.lrn.n - lb - 1;
    Vec out(xv.size());
    for (size_t i = 0; i < xv.size(); i++) {
      const int64_t c = (int64_t(i) / inner) % C, base = int64_t(i) - c * inner;
      double acc = 0;
      for (int64_t j = std::max<int64_t>(0, c - la); j <= std::min<int64_t>(C - 1, c + lb); j++) acc += t[base + j * inner];
      out[i] = float(dyv[i] * sb[i] - coef * xv[i] * acc);
    }
    scatter(rq.dx, dx, out, rq.alpha, rq.beta);
    return cudaSuccess;
  }

  // ---- dropout: a counter-based generator (splitmix64 of seed and counter)
  // whose state, {seed, counter}, lives in the states buffer.

  Err dropout_init(Stream*, const DnnDropoutInitReq& rq) override {
    Stage stage;
    uint8_t* st = ctx_.host_view(rq.statesp, dnn::kDropoutStates);
    if (!st) return cudaErrorIllegalAddress;
    const uint64_t w[2] = {rq.seed, 0};
    std::memset(st, 0, dnn::kDropoutStates);
    std::memcpy(st, w, sizeof w);
    return cudaSuccess;
  }

  Err dropout_fwd(Stream*, const DnnDropoutFwdReq& rq) override {
    Stage stage;
    const float* x;
    float* y;
    if (Err e = views(rq.x, rq.xp, &x, rq.y, rq.yp, &y); e) return e;
    uint8_t* st = ctx_.host_view(rq.statesp, dnn::kDropoutStates);
    uint8_t* mask = ctx_.host_view(rq.reservep, dnn::dropout_reserve(rq.x));
    if (!st || !mask) return cudaErrorIllegalAddress;
    uint64_t w[2];
    std::memcpy(w, st, sizeof w);
    Vec xv = gather(rq.x, x);
    const double scale = rq.p < 1 ? 1.0 / (1.0 - rq.p) : 0.0;
    for (size_t i = 0; i < xv.size(); i++) {
      const double u = double(mix64(w[0] ^ mix64(w[1] + i)) >> 11) * 0x1.0p-53;  // [0, 1)
      mask[i] = u >= rq.p;
      xv[i] = mask[i] ? float(xv[i] * scale) : 0.0f;
    }
    w[1] += xv.size();
    std::memcpy(st, w, sizeof w);
    scatter(rq.y, y, xv, 1, 0);
    return cudaSuccess;
  }

  Err dropout_bwd(Stream*, const DnnDropoutBwdReq& rq) override {
    Stage stage;
    const float* dy;
    float* dx;
    if (Err e = views(rq.dy, rq.dyp, &dy, rq.dx, rq.dxp, &dx); e) return e;
    const uint8_t* mask = ctx_.host_view(rq.reservep, dnn::dropout_reserve(rq.dy));
    if (!mask) return cudaErrorIllegalAddress;
    Vec v = gather(rq.dy, dy);
    const double scale = rq.p < 1 ? 1.0 / (1.0 - rq.p) : 0.0;
    for (size_t i = 0; i < v.size(); i++) v[i] = mask[i] ? float(v[i] * scale) : 0.0f;
    scatter(rq.dx, dx, v, 1, 0);
    return cudaSuccess;
  }

  // ---- reduction: c = alpha reduce(a) + beta c; indices (first extreme,
  // flattened over the reduced dimensions) for MIN, MAX, AMAX.

  Err reduce(Stream*, const DnnReduceTensorReq& rq) override {
    Stage stage;
    const float* a;
    float* c;
    uint32_t* idx = nullptr;
    if (Err e = views(rq.a, rq.ap, &a, rq.c, rq.cp, &c); e) return e;
    const bool want_idx = rq.indicesp && dnn::reduce_has_indices(rq.red);
    if (want_idx)
      if (Err e = view_bytes(rq.indicesp, dnn::count(rq.c), &idx); e) return e;
    const Vec av = gather(rq.a, a);
    const int nb = rq.a.nb, op = rq.red.op;
    const bool prop = rq.red.nan_opt == 1;
    int64_t cs[kDnnMaxDims], rs[kDnnMaxDims];  // dense strides in c and in the reduced slice
    int64_t s1 = 1, s2 = 1;
    for (int k = nb - 1; k >= 0; k--) {
      const bool red = rq.c.dim[k] == 1 && rq.a.dim[k] > 1;
      cs[k] = red ? 0 : s1, rs[k] = red ? s2 : 0;
      s1 *= rq.c.dim[k];
      if (red) s2 *= rq.a.dim[k];
    }
    const int64_t nc = dnn::count(rq.c), slice = s2;
    const double init = op == 1 || op == 8 ? 1 : op == 2 ? INFINITY : op == 3 ? -INFINITY : 0;
    std::vector<double> acc(nc, init);
    std::vector<uint32_t> at(nc, 0);
    std::vector<uint8_t> seen(nc, 0);
    int64_t ix[kDnnMaxDims] = {};
    for (size_t i = 0; i < av.size(); i++) {
      int64_t ci = 0, ri = 0;
      for (int k = 0; k < nb; k++) ci += ix[k] * cs[k], ri += ix[k] * rs[k];
      const double v = av[i];
      double& r = acc[ci];
      switch (op) {
        case 0: case 5: r += v; break;
        case 1: r *= v; break;
        case 6: r += std::fabs(v); break;
        case 7: r += v * v; break;
        case 8: if (v != 0) r *= v; break;
        default: {  // MIN MAX AMAX: NaNs skipped, or (propagated) the first one wins
          const double u = op == 4 ? std::fabs(v) : v;
          if (r != r) break;
          if (u != u) {
            if (prop) r = u, at[ci] = uint32_t(ri), seen[ci] = 1;
            break;
          }
          if (!seen[ci] || (op == 2 ? u < r : u > r)) r = u, at[ci] = uint32_t(ri), seen[ci] = 1;
        }
      }
      for (int k = nb - 1; k >= 0; k--) {
        if (++ix[k] < rq.a.dim[k]) break;
        ix[k] = 0;
      }
    }
    Vec out(nc);
    for (int64_t i = 0; i < nc; i++) {
      double r = acc[i];
      if (op == 5) r /= double(slice);
      if (op == 7) r = std::sqrt(r);
      out[i] = float(r);
    }
    scatter(rq.c, c, out, rq.alpha, rq.beta);
    if (want_idx) std::memcpy(idx, at.data(), size_t(nc) * 4);
    return cudaSuccess;
  }

 private:
  // The oneDNN descriptors of one convolution (x, w, y dense NCHW / (g)oihw).
  struct Conv {
    memory::desc x, w, y;
    Dims strides, dil, pl, pr;
    Conv(SimDnn&, const DnnTensor& xt, const DnnFilter& wt, const DnnConv& c, const DnnTensor& yt) {
      x = memory::desc(dims(xt), memory::data_type::f32, memory::format_tag::nchw);
      y = memory::desc(dims(yt), memory::data_type::f32, memory::format_tag::nchw);
      const int64_t g = c.groups;
      if (g > 1)
        w = memory::desc({g, wt.dim[0] / g, wt.dim[1], wt.dim[2], wt.dim[3]}, memory::data_type::f32,
                         memory::format_tag::goihw);
      else
        w = memory::desc({wt.dim[0], wt.dim[1], wt.dim[2], wt.dim[3]}, memory::data_type::f32,
                         memory::format_tag::oihw);
      for (int k = 0; k < 2; k++) {
        const int64_t ext = int64_t(wt.dim[2 + k] - 1) * c.dil[k] + 1;
        strides.push_back(c.stride[k]);
        dil.push_back(c.dil[k] - 1);  // oneDNN counts the gaps
        pl.push_back(c.pad[k]);
        pr.push_back((int64_t(yt.dim[2 + k]) - 1) * c.stride[k] + ext - xt.dim[2 + k] - c.pad[k]);
      }
    }
    dnnl::convolution_forward::desc fwd() const {
      return {prop_kind::forward_training, algorithm::convolution_direct, x, w, y, strides, dil, pl, pr};
    }
    // A backward pass (Op: convolution_backward_data or _weights), which
    // oneDNN builds from the forward pass's primitive descriptor.
    template <class Op>
    typename Op::primitive_desc bwd(const dnnl::engine& eng) const {
      const dnnl::convolution_forward::primitive_desc hint(fwd(), eng);
      return {typename Op::desc(algorithm::convolution_direct, x, w, y, strides, dil, pl, pr), eng, hint};
    }
  };
  struct Pool {
    memory::desc x, y;
    Dims strides, kernel, pl, pr;
    algorithm alg;
    Pool(SimDnn&, const DnnPool& p, const DnnTensor& xt, const DnnTensor& yt) {
      x = memory::desc(dims(xt), memory::data_type::f32, memory::format_tag::nchw);
      y = memory::desc(dims(yt), memory::data_type::f32, memory::format_tag::nchw);
      alg = p.mode == 1   ? algorithm::pooling_avg_include_padding
            : p.mode == 2 ? algorithm::pooling_avg_exclude_padding
                          : algorithm::pooling_max;
      for (int k = 0; k < 2; k++) {
        strides.push_back(p.stride[k]);
        kernel.push_back(p.window[k]);
        pl.push_back(p.padding[k]);
        pr.push_back((int64_t(yt.dim[2 + k]) - 1) * p.stride[k] + p.window[k] - xt.dim[2 + k] - p.padding[k]);
      }
    }
    dnnl::pooling_forward::desc fwd() const {
      return {prop_kind::forward_training, alg, x, y, strides, kernel, pl, pr};
    }
  };
  struct Act {
    memory::desc md;
    algorithm alg;
    float alpha = 0, beta = 0;
    Act(const DnnAct& a, int64_t n) {
      md = memory::desc({n}, memory::data_type::f32, memory::format_tag::a);
      switch (a.mode) {
        case 0: alg = algorithm::eltwise_logistic; break;
        case 1: alg = algorithm::eltwise_relu; break;
        case 2: alg = algorithm::eltwise_tanh; break;
        case 3: alg = algorithm::eltwise_clip_v2, beta = float(a.coef); break;
        case 4: alg = algorithm::eltwise_elu, alpha = float(a.coef); break;
        case 5: alg = algorithm::eltwise_linear, alpha = 1; break;
        default: alg = algorithm::eltwise_swish, alpha = float(a.coef); break;
      }
    }
    dnnl::eltwise_forward::desc fwd() const { return {prop_kind::forward_training, alg, md, alpha, beta}; }
  };
  // A cuDNN softmax in oneDNN: over C*H*W (mode 0, instance) or C, log
  // (algo 2) or accurate.
  struct Softmax {
    memory::desc md;
    algorithm alg;
    Softmax(const DnnTensor& t, int32_t mode, int32_t algo)
        : md(softmax_md(t, mode)), alg(algo == 2 ? algorithm::softmax_log : algorithm::softmax_accurate) {}
    dnnl::softmax_v2_forward::desc fwd() const { return {prop_kind::forward_training, alg, md, md, 1}; }
  };


  // The parameter (scale/bias/statistics) index of x's dense element i.
  struct BnIndex {
    int64_t total, inner, spatial, params;
    bool spatial_mode;
    BnIndex(const DnnTensor& x, int32_t mode) {
      total = dnn::count(x);
      inner = total / x.dim[0];
      spatial = inner / x.dim[1];
      spatial_mode = dnn::bn_spatial(mode);
      params = spatial_mode ? x.dim[1] : inner;
    }
    int64_t operator()(int64_t i) const {
      const int64_t r = i % inner;
      return spatial_mode ? r / spatial : r;
    }
    // f(dense index, parameter index) for every element, in order, without
    // a division per element.
    template <class F>
    void each(F&& f) const {
      const int64_t n = inner ? total / inner : 0;
      size_t i = 0;
      for (int64_t b = 0; b < n; b++)
        if (spatial_mode) {
          for (int64_t c = 0; c < params; c++)
            for (int64_t k = 0; k < spatial; k++) f(i++, c);
        } else {
          for (int64_t r = 0; r < inner; r++) f(i++, r);
        }
    }
  };
  // Per-parameter mean and biased variance of dense x.
  static void bn_stats(const Vec& xv, const BnIndex& ix, std::vector<double>* mean, std::vector<double>* var) {
    mean->assign(ix.params, 0.0);
    var->assign(ix.params, 0.0);
    std::vector<int64_t> n(ix.params, 0);
    ix.each([&](size_t i, int64_t p) {
      (*mean)[p] += xv[i], n[p]++;
    });
    for (int64_t p = 0; p < ix.params; p++) (*mean)[p] /= double(n[p]);
    ix.each([&](size_t i, int64_t p) {
      const double d = xv[i] - (*mean)[p];
      (*var)[p] += d * d;
    });
    for (int64_t p = 0; p < ix.params; p++) (*var)[p] /= double(n[p]);
  }
  // LRN's k + alpha/n sum of squares over each element's channel window.
  static std::vector<double> lrn_scale(const DnnLrn& l, const DnnTensor& x, const Vec& xv) {
    const int64_t C = x.dim[1], inner = dnn::count(x) / (int64_t(x.dim[0]) * C);
    const int64_t lb = (l.n - 1) / 2, la = l.n - lb - 1;
    std::vector<double> s(xv.size());
    for (size_t i = 0; i < xv.size(); i++) {
      const int64_t c = (int64_t(i) / inner) % C, base = int64_t(i) - c * inner;
      double acc = 0;
      for (int64_t j = std::max<int64_t>(0, c - lb); j <= std::min<int64_t>(C - 1, c + la); j++) {
        const double v = xv[base + j * inner];
        acc += v * v;
      }
      s[i] = l.k + l.alpha / l.n * acc;
    }
    return s;
  }
  static uint64_t mix64(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  static Dims dims(const DnnTensor& t) { return Dims(t.dim, t.dim + t.nb); }
  static memory::desc softmax_md(const DnnTensor& t, int mode) {
    const int64_t n = t.dim[0], c = t.dim[1], hw = int64_t(t.dim[2]) * t.dim[3];
    if (mode == 0) return memory::desc({n, c * hw}, memory::data_type::f32, memory::format_tag::ab);
    return memory::desc({n, c, hw}, memory::data_type::f32, memory::format_tag::abc);
  }

  memory mem(const memory::desc& md, Vec& v) { return memory(md, eng_, v.data()); }

  // An operand in dense NCHW order: the device memory itself when the tensor
  // is packed, else a gathered copy (tmp). An output is direct (written in
  // place of the device memory) when packed, alpha 1, beta 0 and overlapping
  // none of the inputs; otherwise computed in tmp and blended by scatter.
  struct Buf {
    Vec tmp;
    float* p = nullptr;
    bool direct = false;
  };
  memory mem(const memory::desc& md, Buf& b) { return memory(md, eng_, b.p); }
  static bool packed(const DnnTensor& t) {
    int64_t s = 1;
    for (int k = t.nb - 1; k >= 0; k--) {
      if (t.dim[k] != 1 && t.stride[k] != s) return false;
      s *= t.dim[k];
    }
    return true;
  }
  static Buf in(const DnnTensor& t, const float* p) {
    Buf b;
    if (packed(t)) {
      b.p = const_cast<float*>(p);  // read only
    } else {
      b.tmp = gather(t, p);
      b.p = b.tmp.data();
    }
    return b;
  }
  static Buf out(const DnnTensor& t, float* p, double alpha, double beta,
                 std::initializer_list<std::pair<const float*, int64_t>> inputs) {
    Buf b;
    b.direct = packed(t) && alpha == 1 && beta == 0;
    const int64_t n = dnn::span(t);
    for (const auto& [q, m] : inputs)
      if (q < p + n && p < q + m) b.direct = false;
    if (b.direct) {
      b.p = p;
    } else {
      b.tmp.resize(dnn::count(t));
      b.p = b.tmp.data();
    }
    return b;
  }
  static void scatter(const DnnTensor& t, float* p, const Buf& r, double alpha, double beta) {
    if (!r.direct) scatter(t, p, r.tmp, alpha, beta);
  }
  void run(const dnnl::primitive& p, const std::unordered_map<int, memory>& args) {
    dnnl::stream st(eng_);
    p.execute(st, args);
    st.wait();
  }
  // oneDNN refuses what it cannot run with an exception.
  template <class F>
  Err guard(F&& f) {
    one_thread();
    try {
      return f();
    } catch (const dnnl::error& e) {
      spdlog::warn("sim cuDNN: oneDNN refused an operation: {}", e.what());
      return cudaErrorNotSupported;
    }
  }

  template <class T>
  Err view_bytes(uint64_t p, int64_t elems, T** out) {
    if (p % 4) return cudaErrorMisalignedAddress;
    uint8_t* h = ctx_.host_view(p, uint64_t(elems) * 4);
    if (!h) return cudaErrorIllegalAddress;
    *out = reinterpret_cast<T*>(h);
    return cudaSuccess;
  }
  // A tensor's memory as floats: the device memory itself for float data;
  // for half and bfloat16 a float copy of its span (staged for the current
  // operation), converted back when the operation ends when it is an
  // output (T not const).
  template <class T>
  Err view(const DnnTensor& t, uint64_t p, T** out) {
    return view_typed(p, dnn::span(t), t.dtype, out);
  }
  template <class T>
  Err view_filter(const DnnFilter& f, uint64_t p, T** out) {
    return view_typed(p, dnn::filter_count(f), f.dtype, out);
  }
  template <class T>
  Err view(const DnnFilter& f, uint64_t p, T** out) {
    return view_filter(f, p, out);
  }
  // view() of each (descriptor, address, out) triple in turn; the first
  // refusal is the call's.
  Err views() { return cudaSuccess; }
  template <class D, class T, class... Rest>
  Err views(const D& d, uint64_t p, T** out, Rest&&... rest) {
    if (Err e = view(d, p, out); e) return e;
    return views(std::forward<Rest>(rest)...);
  }
  // views() of the operands a call may leave out: a zero address is skipped
  // (its out stays null).
  Err views_if_set() { return cudaSuccess; }
  template <class D, class T, class... Rest>
  Err views_if_set(const D& d, uint64_t p, T** out, Rest&&... rest) {
    if (p)
      if (Err e = view(d, p, out); e) return e;
    return views_if_set(std::forward<Rest>(rest)...);
  }
  template <class T>
  Err view_typed(uint64_t p, int64_t elems, int32_t dtype, T** out) {
    if (dtype == dnn::kFloat) return view_bytes(p, elems, out);
    if (p % 2) return cudaErrorMisalignedAddress;
    uint8_t* h = ctx_.host_view(p, uint64_t(elems) * 2);
    if (!h || !Stage::current) return cudaErrorIllegalAddress;
    Staged& st = Stage::current->list.emplace_back();
    st.dev = h, st.bf16 = dtype == dnn::kBf16, st.out = !std::is_const_v<T>;
    st.buf.resize(size_t(elems));
    for (int64_t i = 0; i < elems; i++) {
      uint16_t v;
      std::memcpy(&v, h + 2 * i, 2);
      st.buf[size_t(i)] = st.bf16 ? lt_bf16_to_float(v) : lt_half_to_float(v);
    }
    *out = st.buf.data();
    return cudaSuccess;
  }
  struct Staged {
    uint8_t* dev;
    bool bf16, out;
    Vec buf;
  };
  // The staged half / bfloat16 operands of the operation running on this
  // thread; outputs are rounded back (to nearest even) when it ends.
  struct Stage {
    static inline thread_local Stage* current = nullptr;
    std::list<Staged> list;
    Stage* prev;
    Stage() : prev(current) { current = this; }
    ~Stage() {
      for (Staged& st : list)
        if (st.out)
          for (size_t i = 0; i < st.buf.size(); i++) {
            const uint16_t v = st.bf16 ? lt_float_to_bf16(st.buf[i]) : lt_float_to_half(st.buf[i]);
            std::memcpy(st.dev + 2 * i, &v, 2);
          }
      current = prev;
    }
    Stage(const Stage&) = delete;
    Stage& operator=(const Stage&) = delete;
  };

  static Vec gather(const DnnTensor& t, const float* p) {
    Vec v(dnn::count(t));
    each(t, [&](int64_t i, int64_t off) { v[i] = p[off]; });
    return v;
  }
  // A dense K, C, R, S filter (oneDNN's oihw) from one in the filter's
  // layout (NHWC: K, R, S, C), its spatial dimensions reversed when `flip`.
  static Vec filter(const DnnFilter& f, const float* p, bool flip) {
    const int64_t k = f.dim[0], c = f.dim[1], r = f.dim[2], s = f.dim[3];
    Vec v(p, p + dnn::filter_count(f));
    if (f.format == dnn::kNHWC)
      for (int64_t o = 0; o < k; o++)
        for (int64_t i = 0; i < c; i++)
          for (int64_t a = 0; a < r; a++)
            for (int64_t b = 0; b < s; b++) v[((o * c + i) * r + a) * s + b] = p[((o * r + a) * s + b) * c + i];
    if (!flip) return v;
    Vec u(v.size());
    for (int64_t i = 0; i < k * c; i++)
      for (int64_t a = 0; a < r; a++)
        for (int64_t b = 0; b < s; b++) u[(i * r + a) * s + b] = v[(i * r + (r - 1 - a)) * s + (s - 1 - b)];
    return u;
  }
  // A dense K, C, R, S filter back in the filter's layout.
  static Vec unfilter(const DnnFilter& f, Vec v) {
    if (f.format != dnn::kNHWC) return v;
    const int64_t k = f.dim[0], c = f.dim[1], r = f.dim[2], s = f.dim[3];
    Vec u(v.size());
    for (int64_t o = 0; o < k; o++)
      for (int64_t i = 0; i < c; i++)
        for (int64_t a = 0; a < r; a++)
          for (int64_t b = 0; b < s; b++) u[((o * r + a) * s + b) * c + i] = v[((o * c + i) * r + a) * s + b];
    return u;
  }
  static void scatter(const DnnTensor& t, float* p, const Vec& r, double alpha, double beta) {
    const float a = float(alpha), b = float(beta);
    if (b == 0)
      each(t, [&](int64_t i, int64_t off) { p[off] = a * r[i]; });
    else
      each(t, [&](int64_t i, int64_t off) { p[off] = a * r[i] + b * p[off]; });
  }
  static void blend(float* p, const float* r, int64_t n, double alpha, double beta) {
    const float a = float(alpha), b = float(beta);
    for (int64_t i = 0; i < n; i++) p[i] = b == 0 ? a * r[i] : a * r[i] + b * p[i];
  }

  Context& ctx_;
  dnnl::engine eng_;
};

}  // namespace

std::unique_ptr<Dnn> make_sim_dnn(Context& ctx) { return std::make_unique<SimDnn>(ctx); }

}  // namespace wh::server
