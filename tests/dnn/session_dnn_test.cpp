// The session's cuDNN bodies against hostile requests: descriptors the
// guest library would never send (zero, negative and huge dimensions,
// strides that overflow, unknown modes, shapes that disagree), tensors
// that reach beyond their allocation, null and unknown device addresses,
// non-finite scalars; every one is refused with an error, never a crash.
// And one valid convolution and softmax that compute.
#include <cmath>
#include <cstring>
#include <vector>

#include "session_fixture.hpp"
#include "wormhole/proto/cudnn_check.hpp"

using namespace wh::proto;

namespace {

struct Fixture : wh::test::SessionFixture {
  int32_t sync() { return run<Op::DeviceSynchronize>({}); }
  // A posted request's status, or the deferred error it left.
  template <Op O>
  int32_t post(const typename OpTraits<O>::Request& rq) {
    int32_t st = run<O>(rq);
    int32_t later = sync();
    return st ? st : later;
  }
  static DnnTensor t4(int n, int c, int h, int w) {
    DnnTensor t{};
    t.dtype = 0, t.nb = 4;
    int d[4] = {n, c, h, w};
    int64_t s = 1;
    for (int k = 3; k >= 0; k--) t.dim[k] = d[k], t.stride[k] = int32_t(s), s *= d[k];
    return t;
  }
  static DnnFilter f4(int k, int c, int h, int w) {
    DnnFilter f{};
    f.nb = 4, f.dim[0] = k, f.dim[1] = c, f.dim[2] = h, f.dim[3] = w;
    return f;
  }
  static DnnConv conv(int pad = 0, int stride = 1) {
    DnnConv c{};
    c.nb = 2, c.mode = 1, c.groups = 1;
    c.pad[0] = c.pad[1] = pad;
    c.stride[0] = c.stride[1] = stride;
    c.dil[0] = c.dil[1] = 1;
    return c;
  }
  void put(uint64_t d, const std::vector<float>& v) {
    MemcpyHtoDInlineReq rq{d, 0};
    DispatchResult out;
    std::vector<uint8_t> p(sizeof rq + v.size() * 4);
    std::memcpy(p.data(), &rq, sizeof rq);
    std::memcpy(p.data() + sizeof rq, v.data(), v.size() * 4);
    s->handle(uint16_t(Op::MemcpyHtoDInline), 0, p, 1 << 20, out);
    ASSERT_EQ(out.status, 0);
  }
  std::vector<float> get(uint64_t d, size_t n) {
    MemcpyDtoHReq rd{0, d, n * 4, 0, 0};
    EXPECT_EQ(run<Op::MemcpyDtoH>(rd), 0);
    std::vector<float> v(n);
    std::memcpy(v.data(), data.data(), n * 4);
    return v;
  }
  // A valid 1x1x4x4 (*) 1x1x3x3 -> 1x1x2x2 convolution request.
  DnnConvFwdReq fwd(uint64_t x, uint64_t w, uint64_t y) {
    DnnConvFwdReq rq{};
    rq.x = t4(1, 1, 4, 4), rq.w = f4(1, 1, 3, 3), rq.conv = conv(), rq.y = t4(1, 1, 2, 2);
    rq.xp = x, rq.wp = w, rq.yp = y, rq.alpha = 1, rq.beta = 0;
    return rq;
  }
};

TEST_F(Fixture, CreateSaysTheSimDeviceHasCudnn) { EXPECT_EQ(run<Op::DnnCreate>({}), 0); }

TEST_F(Fixture, ValidConvolutionComputes) {
  uint64_t x = alloc(64), w = alloc(36), y = alloc(16);
  std::vector<float> xv(16), wv(9, 1.0f);
  for (int i = 0; i < 16; i++) xv[i] = float(i);
  put(x, xv);
  put(w, wv);
  put(y, {NAN, NAN, NAN, NAN});
  ASSERT_EQ(post<Op::DnnConvFwd>(fwd(x, w, y)), 0);
  auto r = get(y, 4);
  // Sums of the 3x3 windows of 0..15 laid out 4x4.
  EXPECT_FLOAT_EQ(r[0], 45);
  EXPECT_FLOAT_EQ(r[1], 54);
  EXPECT_FLOAT_EQ(r[2], 81);
  EXPECT_FLOAT_EQ(r[3], 90);
}

TEST_F(Fixture, ValidSoftmaxComputes) {
  uint64_t x = alloc(16), y = alloc(16);
  put(x, {0, 0, 0, 0});
  DnnSoftmaxFwdReq rq{};
  rq.algo = 1, rq.mode = 0, rq.x = t4(1, 4, 1, 1), rq.y = t4(1, 4, 1, 1), rq.xp = x, rq.yp = y, rq.alpha = 1;
  ASSERT_EQ(post<Op::DnnSoftmaxFwd>(rq), 0);
  for (float v : get(y, 4)) EXPECT_FLOAT_EQ(v, 0.25f);
}

TEST_F(Fixture, BadDescriptorsAreRefused) {
  uint64_t b = alloc(1 << 20);
  auto base = fwd(b, b + 4096, b + 8192);
  auto expect_refused = [&](DnnConvFwdReq rq, const char* what) { EXPECT_NE(post<Op::DnnConvFwd>(rq), 0) << what; };
  auto rq = base;
  rq.x.nb = 0;
  expect_refused(rq, "nb 0");
  rq = base, rq.x.nb = 1000;
  expect_refused(rq, "nb 1000");
  rq = base, rq.x.nb = -3;
  expect_refused(rq, "negative nb");
  rq = base, rq.x.dim[2] = 0;
  expect_refused(rq, "zero dimension");
  rq = base, rq.x.dim[2] = -7;
  expect_refused(rq, "negative dimension");
  rq = base, rq.x.stride[0] = 0;
  expect_refused(rq, "zero stride");
  rq = base, rq.x.stride[1] = -1;
  expect_refused(rq, "negative stride");
  rq = base, rq.x.dim[0] = INT32_MAX, rq.x.stride[0] = INT32_MAX;
  expect_refused(rq, "span over 2^31 elements");
  rq = base;
  for (int k = 0; k < 4; k++) rq.x.dim[k] = 1 << 20, rq.x.stride[k] = 1 << 30;
  expect_refused(rq, "huge dims and strides");
  rq = base, rq.x.dtype = 1;
  expect_refused(rq, "double data");
  rq = base, rq.x.dtype = 12345;
  expect_refused(rq, "unknown data type");
  rq = base, rq.w.nb = 9;
  expect_refused(rq, "filter nb 9");
  rq = base, rq.w.format = 2;
  expect_refused(rq, "NCHW_VECT_C filter");
  rq = base, rq.w.dim[1] = 2;
  expect_refused(rq, "filter channels differ from the input's");
  rq = base, rq.conv.groups = 0;
  expect_refused(rq, "zero groups");
  rq = base, rq.conv.groups = 3;
  expect_refused(rq, "groups that do not divide");
  rq = base, rq.conv.stride[0] = 0;
  expect_refused(rq, "zero stride");
  rq = base, rq.conv.pad[0] = -1;
  expect_refused(rq, "negative padding");
  rq = base, rq.conv.dil[1] = INT32_MAX;
  expect_refused(rq, "huge dilation");
  rq = base, rq.conv.mode = 9;
  expect_refused(rq, "unknown mode");
  rq = base, rq.conv.nb = 7;
  expect_refused(rq, "7 spatial dimensions");
  rq = base, rq.y.dim[3] = 3;
  expect_refused(rq, "output shape mismatch");
  rq = base, rq.alpha = NAN;
  expect_refused(rq, "NaN alpha");
  rq = base, rq.beta = INFINITY;
  expect_refused(rq, "infinite beta");
  // And the valid one still works after all that.
  EXPECT_EQ(post<Op::DnnConvFwd>(base), 0);
}

TEST_F(Fixture, RangesBeyondAllocationsAreRefused) {
  uint64_t x = alloc(64), w = alloc(36), y = alloc(16);
  EXPECT_NE(post<Op::DnnConvFwd>(fwd(x + 4, w, y)), 0) << "x one element past its end";
  EXPECT_NE(post<Op::DnnConvFwd>(fwd(x, w + 8, y)), 0) << "w past its end";
  EXPECT_NE(post<Op::DnnConvFwd>(fwd(x, w, y + 16)), 0) << "y just after its allocation";
  EXPECT_NE(post<Op::DnnConvFwd>(fwd(0, w, y)), 0) << "null x";
  EXPECT_NE(post<Op::DnnConvFwd>(fwd(x, w, 0xdead00000000ull)), 0) << "unknown address";
  EXPECT_NE(post<Op::DnnConvFwd>(fwd(x, w, ~0ull - 8)), 0) << "address at the top of the space";
  auto rq = fwd(x, w, y);
  rq.x.stride[3] = 2;  // the same dims spread twice as far: past x's 64 bytes
  EXPECT_NE(post<Op::DnnConvFwd>(rq), 0) << "strides spreading past the allocation";
  rq = fwd(x, w, y);
  rq.stream = 0xdeadbeef;
  EXPECT_NE(post<Op::DnnConvFwd>(rq), 0) << "unknown stream";
  EXPECT_EQ(post<Op::DnnConvFwd>(fwd(x, w, y)), 0);
}

TEST_F(Fixture, ConvBiasActComputesAndChecksItsTensors) {
  // The 1x1x4x4 (*) 3x3 convolution of 0..15 (45 54 81 90), bias -60, plus
  // 2 z: ReLU clips the first two.
  uint64_t x = alloc(64), w = alloc(36), y = alloc(16), z = alloc(16), b = alloc(4);
  std::vector<float> xv(16), wv(9, 1.0f);
  for (int i = 0; i < 16; i++) xv[i] = float(i);
  put(x, xv), put(w, wv), put(b, {-60}), put(z, {1, 2, 3, 4}), put(y, {NAN, NAN, NAN, NAN});
  DnnConvBiasActReq rq{};
  const auto f = fwd(x, w, y);
  rq.x = f.x, rq.w = f.w, rq.conv = f.conv, rq.y = rq.z = f.y, rq.bias = t4(1, 1, 1, 1);
  rq.act.mode = 1, rq.xp = x, rq.wp = w, rq.yp = y, rq.zp = z, rq.biasp = b, rq.alpha1 = 1, rq.alpha2 = 2;
  ASSERT_EQ(post<Op::DnnConvBiasAct>(rq), 0);
  auto r = get(y, 4);
  EXPECT_FLOAT_EQ(r[0], 0);
  EXPECT_FLOAT_EQ(r[1], 0);
  EXPECT_FLOAT_EQ(r[2], 27);
  EXPECT_FLOAT_EQ(r[3], 38);
  auto bad = rq;
  bad.act.mode = 0;  // sigmoid: cuDNN fuses only ReLU and identity
  EXPECT_EQ(post<Op::DnnConvBiasAct>(bad), cudaErrorNotSupported);
  bad = rq, bad.act.mode = 99;
  EXPECT_EQ(post<Op::DnnConvBiasAct>(bad), cudaErrorInvalidValue);
  bad = rq, bad.bias = t4(1, 2, 1, 1);  // C + 1 channels
  EXPECT_EQ(post<Op::DnnConvBiasAct>(bad), cudaErrorInvalidValue);
  bad = rq, bad.z = t4(1, 1, 3, 2);  // not y's shape
  EXPECT_EQ(post<Op::DnnConvBiasAct>(bad), cudaErrorInvalidValue);
  bad = rq, bad.zp = z + 4;  // z runs past its allocation
  EXPECT_EQ(post<Op::DnnConvBiasAct>(bad), cudaErrorInvalidValue);
  bad.alpha2 = 0;  // ... but is not read with alpha2 0
  EXPECT_EQ(post<Op::DnnConvBiasAct>(bad), 0);
  bad = rq, bad.biasp = b + 4;
  EXPECT_EQ(post<Op::DnnConvBiasAct>(bad), cudaErrorInvalidValue);
  bad = rq, bad.alpha1 = INFINITY;
  EXPECT_EQ(post<Op::DnnConvBiasAct>(bad), cudaErrorInvalidValue);
  bad = rq, bad.yp = y + 8;
  EXPECT_EQ(post<Op::DnnConvBiasAct>(bad), cudaErrorInvalidValue);
}

TEST_F(Fixture, EveryOtherOpChecksItsTensors) {
  uint64_t a = alloc(64), big = alloc(1 << 16);
  const DnnTensor t = t4(1, 1, 4, 4), tiny = t4(1, 1, 1, 1);
  {
    DnnConvBwdBiasReq rq{};
    rq.dy = t, rq.db = tiny, rq.dyp = a, rq.dbp = big, rq.alpha = 1;
    EXPECT_EQ(post<Op::DnnConvBwdBias>(rq), 0);
    rq.db = t4(1, 2, 1, 1);
    EXPECT_NE(post<Op::DnnConvBwdBias>(rq), 0) << "bias channels differ";
    rq.db = tiny, rq.dyp = a + 8;
    EXPECT_NE(post<Op::DnnConvBwdBias>(rq), 0) << "dy past its end";
  }
  {
    DnnAddTensorReq rq{};
    rq.a = tiny, rq.c = t, rq.ap = big, rq.cp = a, rq.alpha = 1, rq.beta = 1;
    EXPECT_EQ(post<Op::DnnAddTensor>(rq), 0);
    rq.a = t4(1, 1, 2, 4);
    EXPECT_NE(post<Op::DnnAddTensor>(rq), 0) << "a dimension neither c's nor 1";
    rq.a = tiny, rq.c = t4(1, 1, 8, 8);
    EXPECT_NE(post<Op::DnnAddTensor>(rq), 0) << "c past its allocation";
  }
  {
    DnnPoolFwdReq rq{};
    rq.pool.mode = 0, rq.pool.nb = 2, rq.pool.window[0] = rq.pool.window[1] = 2;
    rq.pool.stride[0] = rq.pool.stride[1] = 2;
    rq.x = t, rq.y = t4(1, 1, 2, 2), rq.xp = a, rq.yp = big, rq.alpha = 1;
    EXPECT_EQ(post<Op::DnnPoolFwd>(rq), 0);
    auto bad = rq;
    bad.pool.window[0] = 0;
    EXPECT_NE(post<Op::DnnPoolFwd>(bad), 0) << "zero window";
    bad = rq, bad.pool.mode = 17;
    EXPECT_NE(post<Op::DnnPoolFwd>(bad), 0) << "unknown mode";
    bad = rq, bad.pool.padding[0] = 5;
    EXPECT_NE(post<Op::DnnPoolFwd>(bad), 0) << "padding as large as the window";
    bad = rq, bad.y = t4(1, 1, 3, 3);
    EXPECT_NE(post<Op::DnnPoolFwd>(bad), 0) << "output shape mismatch";
    DnnPoolBwdReq b{};
    b.pool = rq.pool, b.y = rq.y, b.dy = rq.y, b.x = t, b.dx = t;
    b.yp = big, b.dyp = big + 64, b.xp = a, b.dxp = big + 128, b.alpha = 1;
    EXPECT_EQ(post<Op::DnnPoolBwd>(b), 0);
    b.dxp = 0;
    EXPECT_NE(post<Op::DnnPoolBwd>(b), 0) << "null dx";
  }
  {
    DnnActFwdReq rq{};
    rq.act.mode = 1, rq.x = t, rq.y = t, rq.xp = a, rq.yp = a, rq.alpha = 1;
    EXPECT_EQ(post<Op::DnnActFwd>(rq), 0);
    auto bad = rq;
    bad.act.mode = 99;
    EXPECT_NE(post<Op::DnnActFwd>(bad), 0) << "unknown activation";
    bad = rq, bad.act.coef = NAN;
    EXPECT_NE(post<Op::DnnActFwd>(bad), 0) << "NaN coefficient";
    bad = rq, bad.y = t4(1, 1, 4, 5);
    EXPECT_NE(post<Op::DnnActFwd>(bad), 0) << "shapes differ";
    DnnActBwdReq b{};
    b.act = rq.act, b.y = t, b.dy = t, b.x = t, b.dx = t;
    b.yp = a, b.dyp = a, b.xp = a, b.dxp = big, b.alpha = 1;
    EXPECT_EQ(post<Op::DnnActBwd>(b), 0);
    b.dxp = big + (1 << 16) - 32;
    EXPECT_NE(post<Op::DnnActBwd>(b), 0) << "dx past its end";
  }
  {
    DnnSoftmaxBwdReq rq{};
    rq.algo = 2, rq.mode = 1, rq.y = t, rq.dy = t, rq.dx = t, rq.yp = a, rq.dyp = a, rq.dxp = big, rq.alpha = 1;
    EXPECT_EQ(post<Op::DnnSoftmaxBwd>(rq), 0);
    rq.algo = 3;
    EXPECT_NE(post<Op::DnnSoftmaxBwd>(rq), 0) << "unknown algorithm";
    rq.algo = 2, rq.mode = -1;
    EXPECT_NE(post<Op::DnnSoftmaxBwd>(rq), 0) << "unknown mode";
  }
  {
    DnnConvBwdDataReq rq{};
    rq.w = f4(1, 1, 3, 3), rq.dy = t4(1, 1, 2, 2), rq.conv = conv(), rq.dx = t;
    rq.wp = big, rq.dyp = big + 64, rq.dxp = a, rq.alpha = 1;
    EXPECT_EQ(post<Op::DnnConvBwdData>(rq), 0);
    rq.dx = t4(1, 1, 5, 5);
    EXPECT_NE(post<Op::DnnConvBwdData>(rq), 0) << "shape mismatch";
    DnnConvBwdFilterReq f{};
    f.x = t, f.dy = t4(1, 1, 2, 2), f.conv = conv(), f.dw = f4(1, 1, 3, 3);
    f.xp = a, f.dyp = big, f.dwp = big + 64, f.alpha = 1;
    EXPECT_EQ(post<Op::DnnConvBwdFilter>(f), 0);
    f.dwp = big + (1 << 16) - 8;
    EXPECT_NE(post<Op::DnnConvBwdFilter>(f), 0) << "dw past its end";
  }
}

TEST_F(Fixture, TensorOpsCheckTheirTensors) {
  uint64_t a = alloc(64), c = alloc(64);
  const DnnTensor t = t4(1, 1, 4, 4);
  DnnTransformReq tr{};
  tr.x = t, tr.y = t, tr.xp = a, tr.yp = c, tr.alpha = 1;
  EXPECT_EQ(post<Op::DnnTransform>(tr), 0);
  tr.y = t4(1, 1, 4, 5);
  EXPECT_NE(post<Op::DnnTransform>(tr), 0) << "dimensions differ";
  DnnOpTensorReq op{};
  op.op = 0, op.a = t, op.b = t4(1, 1, 1, 1), op.c = t, op.ap = a, op.bp = a, op.cp = c, op.alpha1 = op.alpha2 = 1;
  EXPECT_EQ(post<Op::DnnOpTensor>(op), 0);
  auto bad = op;
  bad.op = 5;
  EXPECT_NE(post<Op::DnnOpTensor>(bad), 0) << "NOT";
  bad = op, bad.op = -2;
  EXPECT_NE(post<Op::DnnOpTensor>(bad), 0) << "unknown op";
  bad = op, bad.bp = 0;
  EXPECT_NE(post<Op::DnnOpTensor>(bad), 0) << "null b for ADD";
  bad = op, bad.op = 4, bad.bp = 0;
  EXPECT_EQ(post<Op::DnnOpTensor>(bad), 0) << "SQRT ignores b";
  bad = op, bad.alpha2 = NAN;
  EXPECT_NE(post<Op::DnnOpTensor>(bad), 0) << "NaN alpha2";
  bad = op, bad.cp = c + 4;
  EXPECT_NE(post<Op::DnnOpTensor>(bad), 0) << "c past its end";
  DnnSetTensorReq st{};
  st.y = t, st.yp = c, st.value = 2;
  EXPECT_EQ(post<Op::DnnSetTensor>(st), 0);
  st.value = INFINITY;
  EXPECT_NE(post<Op::DnnSetTensor>(st), 0) << "infinite value";
  DnnScaleTensorReq sc{};
  sc.y = t, sc.yp = c, sc.alpha = 3;
  EXPECT_EQ(post<Op::DnnScaleTensor>(sc), 0);
  for (float v : get(c, 16)) EXPECT_FLOAT_EQ(v, 6.0f);
  sc.y.stride[0] = -1;
  EXPECT_NE(post<Op::DnnScaleTensor>(sc), 0) << "negative stride";
}

// ---- batch normalization, LRN, dropout, reduction

TEST_F(Fixture, BatchNormComputesAndChecksItsTensors) {
  uint64_t x = alloc(64), y = alloc(64), prm = alloc(12 * 4);  // 1x2x2x4; six per-channel vectors of 2
  put(x, {1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0, 4, 4, 4, 4});
  put(prm, {1, 1, 0, 0, 0, 0, 1, 1, NAN, NAN, NAN, NAN});  // scale, bias, running mean, running var, saved x2
  DnnBnFwdTrainReq rq{};
  rq.mode = 1, rq.x = t4(1, 2, 2, 4), rq.y = rq.x, rq.bn = t4(1, 2, 1, 1);
  rq.xp = x, rq.yp = y, rq.scalep = prm, rq.biasp = prm + 8, rq.rmeanp = prm + 16, rq.rvarp = prm + 24;
  rq.smeanp = prm + 32, rq.sinvp = prm + 40, rq.alpha = 1, rq.factor = 1, rq.eps = 0;
  ASSERT_EQ(post<Op::DnnBnFwdTrain>(rq), 0);
  auto p = get(prm, 12);
  EXPECT_FLOAT_EQ(p[4], 4.5f);             // running mean, channel 0 (factor 1)
  EXPECT_FLOAT_EQ(p[5], 2.0f);             // channel 1
  EXPECT_FLOAT_EQ(p[6], 5.25f * 8 / 7);    // unbiased variance of 1..8
  EXPECT_FLOAT_EQ(p[7], 4.0f * 8 / 7);     // of 0 0 0 0 4 4 4 4
  EXPECT_FLOAT_EQ(p[11], 0.5f);            // saved 1/sqrt(var) of channel 1
  auto yv = get(y, 16);
  EXPECT_FLOAT_EQ(yv[8], -1.0f);
  EXPECT_FLOAT_EQ(yv[15], 1.0f);

  auto refused = [&](DnnBnFwdTrainReq r, const char* what) { EXPECT_NE(post<Op::DnnBnFwdTrain>(r), 0) << what; };
  auto bad = rq;
  bad.mode = 3;
  refused(bad, "unknown mode");
  bad = rq, bad.bn = t4(1, 2, 2, 4);
  refused(bad, "per-activation parameters in spatial mode");
  bad = rq, bad.mode = 0;
  refused(bad, "spatial parameters in per-activation mode");
  bad = rq, bad.eps = -1;
  refused(bad, "negative epsilon");
  bad = rq, bad.eps = NAN;
  refused(bad, "NaN epsilon");
  bad = rq, bad.factor = INFINITY;
  refused(bad, "infinite factor");
  bad = rq, bad.rvarp = 0;
  refused(bad, "a running mean without a running variance");
  bad = rq, bad.sinvp = 0;
  refused(bad, "a saved mean without a saved inverse variance");
  bad = rq, bad.sinvp = prm + 44;
  refused(bad, "saved inverse variance past its allocation");
  bad = rq, bad.scalep = 0xdead00000000ull;
  refused(bad, "unknown scale address");
  bad = rq, bad.y = t4(1, 2, 2, 3);
  refused(bad, "y shape differs");
  bad = rq, bad.x.nb = 3;
  refused(bad, "3-d x");
  bad = rq, bad.x.dtype = 1, bad.y.dtype = 1;
  refused(bad, "double x (not forwarded)");
  bad = rq, bad.bn.dtype = 2;
  refused(bad, "half parameters");
  bad = rq, bad.y.dtype = 2;
  refused(bad, "float x, half y");
  bad = rq, bad.alpha = NAN;
  refused(bad, "NaN alpha");
  EXPECT_EQ(post<Op::DnnBnFwdTrain>(rq), 0);

  DnnBnFwdInferReq in{};
  in.mode = 1, in.x = rq.x, in.y = rq.x, in.bn = rq.bn, in.xp = x, in.yp = y, in.scalep = prm, in.biasp = prm + 8;
  in.meanp = prm + 16, in.varp = prm + 24, in.alpha = 1, in.eps = 1e-5;
  EXPECT_EQ(post<Op::DnnBnFwdInfer>(in), 0);
  in.varp = 0;
  EXPECT_NE(post<Op::DnnBnFwdInfer>(in), 0) << "null variance";
  in.varp = prm + 44;
  EXPECT_NE(post<Op::DnnBnFwdInfer>(in), 0) << "variance past its allocation";

  DnnBnBwdReq b{};
  b.mode = 1, b.x = rq.x, b.dy = rq.x, b.dx = rq.x, b.bn = rq.bn, b.xp = x, b.dyp = x, b.dxp = y;
  b.scalep = prm, b.dscalep = prm + 32, b.dbiasp = prm + 40, b.alpha = 1, b.alpha_p = 1, b.eps = 1e-5;
  EXPECT_EQ(post<Op::DnnBnBwd>(b), 0);
  auto bb = b;
  bb.dx = t4(2, 2, 2, 4);
  EXPECT_NE(post<Op::DnnBnBwd>(bb), 0) << "dx shape differs";
  bb = b, bb.beta_p = NAN;
  EXPECT_NE(post<Op::DnnBnBwd>(bb), 0) << "NaN beta for the parameters";
  bb = b, bb.smeanp = prm;
  EXPECT_NE(post<Op::DnnBnBwd>(bb), 0) << "a saved mean without the inverse variance";
  bb = b, bb.dbiasp = prm + 48;
  EXPECT_NE(post<Op::DnnBnBwd>(bb), 0) << "dbias just after the allocation";
}

TEST_F(Fixture, LrnChecksItsDescriptorAndTensors) {
  uint64_t a = alloc(256), b = alloc(256);
  DnnLrnFwdReq rq{};
  rq.lrn = {5, 0, 1e-4, 0.75, 2.0}, rq.x = t4(1, 4, 4, 4), rq.y = rq.x, rq.xp = a, rq.yp = b, rq.alpha = 1;
  EXPECT_EQ(post<Op::DnnLrnFwd>(rq), 0);
  auto bad = rq;
  bad.lrn.n = 0;
  EXPECT_NE(post<Op::DnnLrnFwd>(bad), 0) << "window 0";
  bad = rq, bad.lrn.n = 0xffffffffu;
  EXPECT_NE(post<Op::DnnLrnFwd>(bad), 0) << "window 2^32-1";
  bad = rq, bad.lrn.beta = NAN;
  EXPECT_NE(post<Op::DnnLrnFwd>(bad), 0) << "NaN beta";
  bad = rq, bad.lrn.k = 0;
  EXPECT_NE(post<Op::DnnLrnFwd>(bad), 0) << "k below the minimum";
  bad = rq, bad.lrn.alpha = -INFINITY;
  EXPECT_NE(post<Op::DnnLrnFwd>(bad), 0) << "infinite alpha";
  bad = rq, bad.yp = b + 4;
  EXPECT_NE(post<Op::DnnLrnFwd>(bad), 0) << "y past its end";
  DnnLrnBwdReq bw{};
  bw.lrn = rq.lrn, bw.y = bw.dy = bw.x = bw.dx = rq.x, bw.yp = b, bw.dyp = b, bw.xp = a, bw.dxp = a, bw.alpha = 1;
  EXPECT_EQ(post<Op::DnnLrnBwd>(bw), 0);
  bw.dy = t4(1, 4, 4, 3);
  EXPECT_NE(post<Op::DnnLrnBwd>(bw), 0) << "dy shape differs";
}

TEST_F(Fixture, DropoutChecksStatesAndReserve) {
  uint64_t x = alloc(64), y = alloc(64), st = alloc(dnn::kDropoutStates), rs = alloc(16);
  DnnDropoutInitReq in{};
  in.statesp = st, in.states_size = dnn::kDropoutStates, in.seed = 7;
  EXPECT_EQ(post<Op::DnnDropoutInit>(in), 0);
  auto bi = in;
  bi.states_size = 8;
  EXPECT_NE(post<Op::DnnDropoutInit>(bi), 0) << "states smaller than required";
  bi = in, bi.statesp = st + 8;
  EXPECT_NE(post<Op::DnnDropoutInit>(bi), 0) << "states past their allocation";
  bi = in, bi.statesp = 0;
  EXPECT_NE(post<Op::DnnDropoutInit>(bi), 0) << "null states";

  put(x, std::vector<float>(16, 1.0f));
  DnnDropoutFwdReq f{};
  f.x = f.y = t4(1, 1, 4, 4), f.xp = x, f.yp = y, f.statesp = st, f.states_size = dnn::kDropoutStates;
  f.reservep = rs, f.reserve_size = 16, f.p = 0.5;
  ASSERT_EQ(post<Op::DnnDropoutFwd>(f), 0);
  for (float v : get(y, 16)) EXPECT_TRUE(v == 0.0f || v == 2.0f) << v;
  auto bf = f;
  bf.reserve_size = 15;
  EXPECT_NE(post<Op::DnnDropoutFwd>(bf), 0) << "reserve smaller than the mask";
  bf = f, bf.reservep = rs + 1;
  EXPECT_NE(post<Op::DnnDropoutFwd>(bf), 0) << "reserve past its allocation";
  bf = f, bf.p = 1.5;
  EXPECT_NE(post<Op::DnnDropoutFwd>(bf), 0) << "p above 1";
  bf = f, bf.p = NAN;
  EXPECT_NE(post<Op::DnnDropoutFwd>(bf), 0) << "NaN p";
  bf = f, bf.states_size = 0;
  EXPECT_NE(post<Op::DnnDropoutFwd>(bf), 0) << "no states";
  bf = f, bf.y = t4(1, 1, 4, 5);
  EXPECT_NE(post<Op::DnnDropoutFwd>(bf), 0) << "shapes differ";
  bf = f, bf.y.dtype = dnn::kBf16;
  EXPECT_NE(post<Op::DnnDropoutFwd>(bf), 0) << "types differ";

  DnnDropoutBwdReq b{};
  b.dy = b.dx = f.x, b.dyp = x, b.dxp = y, b.reservep = rs, b.reserve_size = 16, b.p = 0.5;
  EXPECT_EQ(post<Op::DnnDropoutBwd>(b), 0);
  b.reservep = 0;
  EXPECT_NE(post<Op::DnnDropoutBwd>(b), 0) << "null reserve";
}

TEST_F(Fixture, ReduceChecksItsDescriptorAndIndices) {
  uint64_t a = alloc(64), c = alloc(16), idx = alloc(16);
  std::vector<float> av(16);
  for (int i = 0; i < 16; i++) av[i] = float(i % 5) - float(i / 4);
  put(a, av);
  DnnReduceTensorReq rq{};
  rq.red.op = 3, rq.red.indices = 1, rq.a = t4(1, 1, 4, 4), rq.c = t4(1, 1, 4, 1), rq.ap = a, rq.cp = c;
  rq.indicesp = idx, rq.indices_size = 16, rq.alpha = 1;
  ASSERT_EQ(post<Op::DnnReduceTensor>(rq), 0);
  auto r = get(c, 4);
  EXPECT_FLOAT_EQ(r[0], 3);   // row 0: 0 1 2 3
  EXPECT_FLOAT_EQ(r[3], 1);   // row 3: 2 3 4 0 minus 3
  auto bad = rq;
  bad.red.op = 9;
  EXPECT_NE(post<Op::DnnReduceTensor>(bad), 0) << "unknown op";
  bad = rq, bad.red.idx_type = 1;
  EXPECT_NE(post<Op::DnnReduceTensor>(bad), 0) << "64-bit indices";
  bad = rq, bad.red.comp = 1;
  EXPECT_NE(post<Op::DnnReduceTensor>(bad), 0) << "double compute type";
  bad = rq, bad.red.nan_opt = 2;
  EXPECT_NE(post<Op::DnnReduceTensor>(bad), 0) << "unknown NaN option";
  bad = rq, bad.c = t4(1, 1, 2, 1);
  EXPECT_NE(post<Op::DnnReduceTensor>(bad), 0) << "c neither a's nor 1";
  bad = rq, bad.c.nb = 3;
  EXPECT_NE(post<Op::DnnReduceTensor>(bad), 0) << "c of another rank";
  bad = rq, bad.indices_size = 12;
  EXPECT_NE(post<Op::DnnReduceTensor>(bad), 0) << "indices smaller than c";
  bad = rq, bad.indicesp = idx + 8;
  EXPECT_NE(post<Op::DnnReduceTensor>(bad), 0) << "indices past their allocation";
  bad = rq, bad.ap = a + 4;
  EXPECT_NE(post<Op::DnnReduceTensor>(bad), 0) << "a past its end";
  bad = rq, bad.indicesp = 0;
  EXPECT_EQ(post<Op::DnnReduceTensor>(bad), 0) << "indices not wanted";
}

TEST_F(Fixture, HalfAndBfloat16TensorsSpanTwoBytesAnElement) {
  uint64_t a = alloc(32), b = alloc(32);  // 16 two-byte elements each
  DnnActFwdReq rq{};
  rq.act.mode = 1, rq.x = t4(1, 1, 4, 4), rq.x.dtype = dnn::kHalf, rq.y = rq.x, rq.xp = a, rq.yp = b, rq.alpha = 1;
  EXPECT_EQ(post<Op::DnnActFwd>(rq), 0);
  auto bad = rq;
  bad.yp = b + 2;
  EXPECT_NE(post<Op::DnnActFwd>(bad), 0) << "one element past the end";
  bad = rq, bad.xp = a + 1;
  EXPECT_NE(post<Op::DnnActFwd>(bad), 0) << "misaligned half data";
  bad = rq, bad.y.dtype = dnn::kBf16;
  EXPECT_NE(post<Op::DnnActFwd>(bad), 0) << "half x, bfloat16 y";
  bad = rq, bad.x.dtype = bad.y.dtype = dnn::kFloat;
  EXPECT_NE(post<Op::DnnActFwd>(bad), 0) << "float data spans 64 bytes";
  rq.x.dtype = rq.y.dtype = dnn::kBf16;
  EXPECT_EQ(post<Op::DnnActFwd>(rq), 0);
}

// Strides may overlap (a small span, many elements): a descriptor whose
// element count exceeds its span is refused before anything is sized
// from the count (which may also overflow 64 bits).
TEST_F(Fixture, ElementCountsBeyondTheSpanAreRefused) {
  uint64_t a = alloc(1 << 20), c = alloc(1 << 20);
  DnnTensor t{};
  t.dtype = 0, t.nb = 8;
  for (int k = 0; k < 8; k++) t.dim[k] = 1 << 16, t.stride[k] = 1;  // span 524281, count 2^128
  DnnTransformReq tr{};
  tr.x = t, tr.y = t, tr.xp = a, tr.yp = c, tr.alpha = 1;
  EXPECT_NE(post<Op::DnnTransform>(tr), 0) << "count overflowing 64 bits";
  t.nb = 4;
  for (int k = 0; k < 4; k++) t.dim[k] = 3000, t.stride[k] = 1;  // span 11997, count 8.1e13
  tr.x = t, tr.y = t;
  EXPECT_NE(post<Op::DnnTransform>(tr), 0) << "count far beyond the span";
  DnnReduceTensorReq rd{};
  rd.a = t, rd.c = t, rd.c.dim[0] = 1, rd.ap = a, rd.cp = c, rd.alpha = 1;
  EXPECT_NE(post<Op::DnnReduceTensor>(rd), 0) << "reduction of an overlapping tensor";
  t.dim[0] = t.dim[1] = t.dim[2] = t.dim[3] = 2;  // 16 elements over a span of 5: still more than the span
  DnnScaleTensorReq sc{};
  sc.y = t, sc.yp = c, sc.alpha = 2;
  EXPECT_NE(post<Op::DnnScaleTensor>(sc), 0) << "elements aliasing each other";
}

}  // namespace
