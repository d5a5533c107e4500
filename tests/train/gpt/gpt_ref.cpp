// wh-gpt-ref: the fp32 CPU reference of wh-gpt. Same model, same initial weights (same seed),
// same batches, same AdamW and clipping, all in plain fp32 loops (no bf16 rounding). Writes
// the same loss log as wh-gpt (--loss-log): "step <i> loss <train loss>" per step and
// "val <i> <val loss>" at each evaluation.
#include <algorithm>
#include <chrono>

#include "gpt_common.hpp"

using namespace gpt;

namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f, kGeluC = 0.044715f;
float gelu(float x) { return 0.5f * x * (1.f + std::tanh(kSqrt2OverPi * (x + kGeluC * x * x * x))); }
float dgelu(float x) {
  const float u = kSqrt2OverPi * (x + kGeluC * x * x * x), t = std::tanh(u);
  return 0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * kSqrt2OverPi * (1.f + 3.f * kGeluC * x * x);
}

// Y[N,out] = X[N,in] W[out,in]^T + b
void linear(const float* X, const float* W, const float* b, float* Y, int N, int in, int out) {
  for (int n = 0; n < N; ++n)
    for (int o = 0; o < out; ++o) {
      float s = b ? b[o] : 0.f;
      const float* x = X + size_t(n) * in;
      const float* w = W + size_t(o) * in;
      for (int i = 0; i < in; ++i) s += x[i] * w[i];
      Y[size_t(n) * out + o] = s;
    }
}
// dX = dY W (overwrite), dW = dY^T X (overwrite), db = colsum(dY)
void linear_back(const float* X, const float* W, const float* dY, float* dX, float* dW, float* db, int N, int in, int out) {
  if (dX)
    for (int n = 0; n < N; ++n)
      for (int i = 0; i < in; ++i) {
        float s = 0;
        for (int o = 0; o < out; ++o) s += dY[size_t(n) * out + o] * W[size_t(o) * in + i];
        dX[size_t(n) * in + i] = s;
      }
  for (int o = 0; o < out; ++o)
    for (int i = 0; i < in; ++i) {
      float s = 0;
      for (int n = 0; n < N; ++n) s += dY[size_t(n) * out + o] * X[size_t(n) * in + i];
      dW[size_t(o) * in + i] = s;
    }
  for (int o = 0; o < out; ++o) {
    float s = 0;
    for (int n = 0; n < N; ++n) s += dY[size_t(n) * out + o];
    db[o] = s;
  }
}
void layernorm(const float* x, const float* g, const float* b, float* y, float* mean, float* rstd, int N, int C) {
  for (int n = 0; n < N; ++n) {
    const float* r = x + size_t(n) * C;
    float m = 0;
    for (int c = 0; c < C; ++c) m += r[c];
    m /= float(C);
    float v = 0;
    for (int c = 0; c < C; ++c) v += (r[c] - m) * (r[c] - m);
    v /= float(C);
    float rs = 1.0f / std::sqrt(v + 1e-5f);
    for (int c = 0; c < C; ++c) y[size_t(n) * C + c] = (r[c] - m) * rs * g[c] + b[c];
    mean[n] = m;
    rstd[n] = rs;
  }
}
// dx += LN backward; dg, db overwritten
void layernorm_back(const float* x, const float* g, const float* mean, const float* rstd, const float* dy, float* dx, float* dg,
                    float* db, int N, int C) {
  for (int c = 0; c < C; ++c) dg[c] = db[c] = 0;
  for (int n = 0; n < N; ++n) {
    const float* r = x + size_t(n) * C;
    const float* d = dy + size_t(n) * C;
    float s1 = 0, s2 = 0;
    for (int c = 0; c < C; ++c) {
      float xh = (r[c] - mean[n]) * rstd[n], dxh = d[c] * g[c];
      s1 += dxh;
      s2 += dxh * xh;
      dg[c] += d[c] * xh;
      db[c] += d[c];
    }
    s1 /= float(C);
    s2 /= float(C);
    for (int c = 0; c < C; ++c) {
      float xh = (r[c] - mean[n]) * rstd[n], dxh = d[c] * g[c];
      dx[size_t(n) * C + c] += rstd[n] * (dxh - s1 - xh * s2);
    }
  }
}

struct Model {
  Config c;
  Layout lay;
  std::vector<float> p, g, m, v;
  // activations
  struct Act {
    std::vector<float> resA, ln1, mean1, rstd1, qkv, att, y, resB, ln2, mean2, rstd2, pre, h;
  };
  std::vector<Act> act;
  std::vector<float> res, resF, lnf, meanf, rstdf, logits, dlogits;
  std::vector<int> x, y;

  explicit Model(const Config& cfg, uint64_t seed) : c(cfg), lay(cfg) {
    p = init_params(lay, seed);
    g.assign(p.size(), 0);
    m.assign(p.size(), 0);
    v.assign(p.size(), 0);
  }
  float* P(int i) { return p.data() + lay.t[size_t(i)].off; }
  float* G(int i) { return g.data() + lay.t[size_t(i)].off; }

  // forward over the batch in x (nb sequences); returns the mean loss vs y, fills dlogits
  double forward(int nb, bool grad) {
    const int T = c.T, C = c.C, N = nb * T, H = c.H, hd = c.HD(), FF = c.FF(), V = c.V;
    res.assign(size_t(N) * C, 0);
    for (int n = 0; n < N; ++n)
      for (int k = 0; k < C; ++k) res[size_t(n) * C + k] = P(lay.wte)[size_t(x[size_t(n)]) * C + k] + P(lay.wpe)[size_t(n % T) * C + k];
    act.resize(size_t(c.L));
    const float scale = 1.0f / std::sqrt(float(hd));
    for (int l = 0; l < c.L; ++l) {
      auto& a = act[size_t(l)];
      auto& b = lay.blk[size_t(l)];
      a.resA = res;
      a.ln1.resize(size_t(N) * C), a.mean1.resize(size_t(N)), a.rstd1.resize(size_t(N));
      layernorm(res.data(), P(b.ln1_g), P(b.ln1_b), a.ln1.data(), a.mean1.data(), a.rstd1.data(), N, C);
      a.qkv.resize(size_t(N) * 3 * C);
      linear(a.ln1.data(), P(b.w_qkv), P(b.b_qkv), a.qkv.data(), N, C, 3 * C);
      a.att.assign(size_t(nb) * H * T * T, 0);
      a.y.assign(size_t(N) * C, 0);
      for (int bb = 0; bb < nb; ++bb)
        for (int h = 0; h < H; ++h)
          for (int t = 0; t < T; ++t) {
            const float* q = &a.qkv[(size_t(bb) * T + t) * 3 * C + size_t(h) * hd];
            float* pr = &a.att[((size_t(bb) * H + h) * T + t) * T];
            float mx = -1e30f;
            for (int u = 0; u <= t; ++u) {
              const float* k = &a.qkv[(size_t(bb) * T + u) * 3 * C + C + size_t(h) * hd];
              float s = 0;
              for (int d = 0; d < hd; ++d) s += q[d] * k[d];
              pr[u] = s * scale;
              mx = std::max(mx, pr[u]);
            }
            float sum = 0;
            for (int u = 0; u <= t; ++u) sum += (pr[u] = std::exp(pr[u] - mx));
            for (int u = 0; u <= t; ++u) pr[u] /= sum;
            float* yo = &a.y[(size_t(bb) * T + t) * C + size_t(h) * hd];
            for (int u = 0; u <= t; ++u) {
              const float* vv = &a.qkv[(size_t(bb) * T + u) * 3 * C + 2 * C + size_t(h) * hd];
              for (int d = 0; d < hd; ++d) yo[d] += pr[u] * vv[d];
            }
          }
      std::vector<float> tmp(size_t(N) * C);
      linear(a.y.data(), P(b.w_o), P(b.b_o), tmp.data(), N, C, C);
      for (size_t i = 0; i < tmp.size(); ++i) res[i] += tmp[i];
      a.resB = res;
      a.ln2.resize(size_t(N) * C), a.mean2.resize(size_t(N)), a.rstd2.resize(size_t(N));
      layernorm(res.data(), P(b.ln2_g), P(b.ln2_b), a.ln2.data(), a.mean2.data(), a.rstd2.data(), N, C);
      a.pre.resize(size_t(N) * FF), a.h.resize(size_t(N) * FF);
      linear(a.ln2.data(), P(b.w_fc), P(b.b_fc), a.pre.data(), N, C, FF);
      for (size_t i = 0; i < a.pre.size(); ++i) a.h[i] = gelu(a.pre[i]);
      linear(a.h.data(), P(b.w_pr), P(b.b_pr), tmp.data(), N, FF, C);
      for (size_t i = 0; i < tmp.size(); ++i) res[i] += tmp[i];
    }
    resF = res;
    lnf.resize(size_t(N) * C), meanf.resize(size_t(N)), rstdf.resize(size_t(N));
    layernorm(res.data(), P(lay.lnf_g), P(lay.lnf_b), lnf.data(), meanf.data(), rstdf.data(), N, C);
    logits.resize(size_t(N) * V);
    linear(lnf.data(), P(lay.w_lm), P(lay.b_lm), logits.data(), N, C, V);
    double loss = 0;
    dlogits.resize(logits.size());
    for (int n = 0; n < N; ++n) {
      float* r = &logits[size_t(n) * V];
      float mx = *std::max_element(r, r + V), sum = 0;
      for (int k = 0; k < V; ++k) sum += std::exp(r[k] - mx);
      int yy = y[size_t(n)];
      loss += double(std::log(sum) - (r[yy] - mx));
      if (grad)
        for (int k = 0; k < V; ++k) dlogits[size_t(n) * V + k] = (std::exp(r[k] - mx) / sum - (k == yy ? 1.f : 0.f)) / float(N);
    }
    return loss / N;
  }

  void backward(int nb) {
    const int T = c.T, C = c.C, N = nb * T, H = c.H, hd = c.HD(), FF = c.FF(), V = c.V;
    std::vector<float> dres(size_t(N) * C, 0), dln(size_t(N) * C);
    linear_back(lnf.data(), P(lay.w_lm), dlogits.data(), dln.data(), G(lay.w_lm), G(lay.b_lm), N, C, V);
    layernorm_back(resF.data(), P(lay.lnf_g), meanf.data(), rstdf.data(), dln.data(), dres.data(), G(lay.lnf_g), G(lay.lnf_b), N, C);
    const float scale = 1.0f / std::sqrt(float(hd));
    for (int l = c.L - 1; l >= 0; --l) {
      auto& a = act[size_t(l)];
      auto& b = lay.blk[size_t(l)];
      std::vector<float> dh(size_t(N) * FF);
      linear_back(a.h.data(), P(b.w_pr), dres.data(), dh.data(), G(b.w_pr), G(b.b_pr), N, FF, C);
      for (size_t i = 0; i < dh.size(); ++i) dh[i] *= dgelu(a.pre[i]);
      linear_back(a.ln2.data(), P(b.w_fc), dh.data(), dln.data(), G(b.w_fc), G(b.b_fc), N, C, FF);
      layernorm_back(a.resB.data(), P(b.ln2_g), a.mean2.data(), a.rstd2.data(), dln.data(), dres.data(), G(b.ln2_g), G(b.ln2_b), N, C);
      std::vector<float> dy(size_t(N) * C), dqkv(size_t(N) * 3 * C, 0);
      linear_back(a.y.data(), P(b.w_o), dres.data(), dy.data(), G(b.w_o), G(b.b_o), N, C, C);
      for (int bb = 0; bb < nb; ++bb)
        for (int h = 0; h < H; ++h)
          for (int t = 0; t < T; ++t) {
            const float* pr = &a.att[((size_t(bb) * H + h) * T + t) * T];
            const float* dyo = &dy[(size_t(bb) * T + t) * C + size_t(h) * hd];
            std::vector<float> dp(size_t(t) + 1);
            float dot = 0;
            for (int u = 0; u <= t; ++u) {
              const float* vv = &a.qkv[(size_t(bb) * T + u) * 3 * C + 2 * C + size_t(h) * hd];
              float s = 0;
              for (int d = 0; d < hd; ++d) s += dyo[d] * vv[d];
              dp[size_t(u)] = s;
              dot += pr[u] * s;
            }
            const float* q = &a.qkv[(size_t(bb) * T + t) * 3 * C + size_t(h) * hd];
            float* dq = &dqkv[(size_t(bb) * T + t) * 3 * C + size_t(h) * hd];
            for (int u = 0; u <= t; ++u) {
              float ds = pr[u] * (dp[size_t(u)] - dot) * scale;
              const float* k = &a.qkv[(size_t(bb) * T + u) * 3 * C + C + size_t(h) * hd];
              float* dk = &dqkv[(size_t(bb) * T + u) * 3 * C + C + size_t(h) * hd];
              float* dv = &dqkv[(size_t(bb) * T + u) * 3 * C + 2 * C + size_t(h) * hd];
              for (int d = 0; d < hd; ++d) {
                dq[d] += ds * k[d];
                dk[d] += ds * q[d];
                dv[d] += pr[u] * dyo[d];
              }
            }
          }
      linear_back(a.ln1.data(), P(b.w_qkv), dqkv.data(), dln.data(), G(b.w_qkv), G(b.b_qkv), N, C, 3 * C);
      layernorm_back(a.resA.data(), P(b.ln1_g), a.mean1.data(), a.rstd1.data(), dln.data(), dres.data(), G(b.ln1_g), G(b.ln1_b), N, C);
    }
    std::fill(G(lay.wte), G(lay.wte) + lay.t[size_t(lay.wte)].n, 0.f);
    std::fill(G(lay.wpe), G(lay.wpe) + lay.t[size_t(lay.wpe)].n, 0.f);
    for (int n = 0; n < N; ++n)
      for (int k = 0; k < C; ++k) {
        G(lay.wte)[size_t(x[size_t(n)]) * C + k] += dres[size_t(n) * C + k];
        G(lay.wpe)[size_t(n % T) * C + k] += dres[size_t(n) * C + k];
      }
  }

  void adamw(const Hyper& hp, int step) {
    double ss = 0;
    for (auto& t : lay.t)
      for (size_t i = 0; i < t.n; ++i) ss += double(g[t.off + i]) * g[t.off + i];
    float norm = float(std::sqrt(ss)), sc = norm > hp.clip ? hp.clip / norm : 1.0f;
    float lr = hp.lr_at(step);
    float bc1 = 1.0f - std::pow(hp.beta1, float(step + 1)), bc2 = 1.0f - std::pow(hp.beta2, float(step + 1));
    for (auto& t : lay.t)
      for (size_t i = t.off; i < t.off + t.n; ++i) {
        float gg = g[i] * sc;
        m[i] = hp.beta1 * m[i] + (1 - hp.beta1) * gg;
        v[i] = hp.beta2 * v[i] + (1 - hp.beta2) * gg * gg;
        float upd = (m[i] / bc1) / (std::sqrt(v[i] / bc2) + hp.eps);
        if (t.decay) p[i] -= lr * hp.weight_decay * p[i];
        p[i] -= lr * upd;
      }
  }
};

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (!parse_args(argc, argv, a)) return 2;
  Corpus d;
  std::string err;
  if (!load_corpus(a.corpus, d, &err)) {
    std::fprintf(stderr, "%s\n", err.c_str());
    return a.gradcheck ? 77 : 1;  // gradcheck's ctest: skip without the corpus
  }
  Model mdl(a.cfg, a.seed);
  if (a.gradcheck) {
    // Central differences on sampled parameters of every tensor vs the analytic gradient.
    train_batch(a.cfg, d, a.seed, 0, mdl.x, mdl.y);
    mdl.forward(a.cfg.B, true);
    mdl.backward(a.cfg.B);
    Rng r(a.seed + 99);
    double worst = 0;
    int bad = 0;
    for (const Tensor& t : mdl.lay.t) {
      for (int k = 0; k < 3; ++k) {
        size_t i = t.off + size_t(r.next() % t.n);
        float keep = mdl.p[i], h = 1e-2f * std::max(1.0f, std::fabs(keep));
        mdl.p[i] = keep + h;
        double lp = mdl.forward(a.cfg.B, false);
        mdl.p[i] = keep - h;
        double lm = mdl.forward(a.cfg.B, false);
        mdl.p[i] = keep;
        double num = (lp - lm) / (2.0 * h), ana = mdl.g[i], err = std::fabs(num - ana) / std::max(1e-3, std::fabs(num) + std::fabs(ana));
        worst = std::max(worst, err);
        if (err > 5e-2) {
          ++bad;
          std::printf("gradcheck %s[%zu]: numeric %.6g analytic %.6g\n", t.name.c_str(), i - t.off, num, ana);
        }
      }
    }
    std::printf("gradcheck: worst relative difference %.3g, %d bad\n", worst, bad);
    return bad ? 1 : 0;
  }
  FILE* log = a.loss_log.empty() ? nullptr : std::fopen(a.loss_log.c_str(), "w");
  auto eval = [&]() {
    double s = 0;
    for (int k = 0; k < a.val_batches; ++k) {
      val_batch(a.cfg, d, k, a.val_batches, mdl.x, mdl.y);
      s += mdl.forward(a.cfg.B, false);
    }
    return s / a.val_batches;
  };
  auto t0 = std::chrono::steady_clock::now();
  double v0 = eval(), vl = v0;
  if (log) std::fprintf(log, "val 0 %.6f\n", v0);
  for (int s = 0; s < a.steps; ++s) {
    train_batch(a.cfg, d, a.seed, s, mdl.x, mdl.y);
    double loss = mdl.forward(a.cfg.B, true);
    mdl.backward(a.cfg.B);
    mdl.adamw(a.hp, s);
    if (log) std::fprintf(log, "step %d loss %.6f\n", s, loss);
    if (!a.quiet) std::printf("step %d loss %.4f\n", s, loss);
    if ((s + 1) % a.eval_every == 0 || s + 1 == a.steps) {
      vl = eval();
      if (log) std::fprintf(log, "val %d %.6f\n", s + 1, vl);
    }
  }
  double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (log) std::fclose(log);
  std::printf("wh-gpt-ref: %d steps, val loss %.4f -> %.4f, %.0f tokens/s (fp32 CPU reference)\n", a.steps, v0, vl,
              double(a.steps) * a.cfg.B * a.cfg.T / el);
  return 0;
}
