// wh-gpt: what the CUDA program (gpt.cu) and its fp32 CPU reference (gpt_ref.cpp) share, so
// that both start from the same weights and see the same batches: the model's shape, the
// character vocabulary, corpus loading and splitting, the random number generator, the
// parameter layout and initialisation, batch sampling and the optimiser's hyperparameters.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace gpt {

// Character vocabulary: '\n' and the 95 printable ASCII characters; other bytes are dropped.
constexpr int kVocab = 96;
inline int char_to_tok(unsigned char c) { return c == '\n' ? 0 : (c >= 32 && c < 127) ? c - 31 : -1; }
inline char tok_to_char(int t) { return t == 0 ? '\n' : char(t + 31); }

struct Config {
  int V = kVocab;
  int T = 64;   // context length
  int C = 64;   // model width
  int H = 4;    // attention heads
  int L = 2;    // transformer blocks
  int B = 4;    // sequences per batch
  int FF() const { return 4 * C; }
  int HD() const { return C / H; }
};

struct Hyper {
  float lr = 3e-3f, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0.1f, clip = 1.0f;
  int warmup = 10;
  float lr_at(int step) const { return step < warmup ? lr * float(step + 1) / float(warmup) : lr; }
};

// xorshift64* with Box-Muller normals: bit-identical on every platform.
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 1) {}
  uint64_t next() {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 0x2545F4914F6CDD1Dull;
  }
  double uniform() { return double(next() >> 11) * (1.0 / 9007199254740992.0); }  // [0, 1)
  float normal() {
    double u1 = uniform(), u2 = uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    return float(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }
};

// The text, tokenised; the last 10% is the validation split.
struct Corpus {
  std::vector<uint8_t> train, val;
  std::string files;
};

// The default corpus: English prose and quotations from Debian's `fortunes` package.
inline std::vector<std::string> default_corpus_files() {
  const char* dir = "/usr/share/games/fortunes/";
  std::vector<std::string> v;
  for (const char* f : {"literature", "wisdom", "people", "science", "education", "work", "love", "politics", "men-women",
                        "miscellaneous", "platitudes", "fortunes"})
    v.push_back(std::string(dir) + f);
  return v;
}

inline bool load_corpus(const std::vector<std::string>& files, Corpus& c, std::string* err) {
  std::vector<uint8_t> all;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    if (!in) continue;
    std::stringstream ss;
    ss << in.rdbuf();
    std::string s = ss.str();
    for (unsigned char ch : s) {
      if (ch == '%') continue;  // fortune separators
      int t = char_to_tok(ch);
      if (t >= 0) all.push_back(uint8_t(t));
    }
    c.files += (c.files.empty() ? "" : " ") + f;
  }
  if (all.size() < 20000) {
    *err = "corpus too small (" + std::to_string(all.size()) + " characters); install Debian's `fortunes` package or pass --corpus FILE";
    return false;
  }
  size_t split = all.size() - all.size() / 10;
  c.train.assign(all.begin(), all.begin() + long(split));
  c.val.assign(all.begin() + long(split), all.end());
  return true;
}

// One flat fp32 parameter array; each tensor is row-major [rows, cols] (cols = 1 for vectors).
struct Tensor {
  std::string name;
  size_t off, n;
  int rows, cols;
  bool decay;   // AdamW weight decay (matrices only)
  float std_;   // init: normal(0, std_) if > 0; else constant `fill`
  float fill;
};

struct Layout {
  std::vector<Tensor> t;
  size_t total = 0;
  int wte, wpe, lnf_g, lnf_b, w_lm, b_lm;
  struct Block { int ln1_g, ln1_b, w_qkv, b_qkv, w_o, b_o, ln2_g, ln2_b, w_fc, b_fc, w_pr, b_pr; };
  std::vector<Block> blk;

  explicit Layout(const Config& c) {
    auto add = [&](const std::string& name, int rows, int cols, bool decay, float sd, float fill) {
      size_t n = size_t(rows) * size_t(cols);
      t.push_back({name, total, n, rows, cols, decay, sd, fill});
      total += (n + 63) & ~size_t(63);  // 256-byte aligned tensors (bf16 copies: 128 bytes)
      return int(t.size() - 1);
    };
    const float sd = 0.02f, sd_out = 0.02f / std::sqrt(2.0f * float(c.L));
    wte = add("wte", c.V, c.C, true, sd, 0);
    wpe = add("wpe", c.T, c.C, true, sd, 0);
    for (int l = 0; l < c.L; ++l) {
      std::string p = "h" + std::to_string(l) + ".";
      Block b;
      b.ln1_g = add(p + "ln1.g", c.C, 1, false, 0, 1);
      b.ln1_b = add(p + "ln1.b", c.C, 1, false, 0, 0);
      b.w_qkv = add(p + "attn.w_qkv", 3 * c.C, c.C, true, sd, 0);
      b.b_qkv = add(p + "attn.b_qkv", 3 * c.C, 1, false, 0, 0);
      b.w_o = add(p + "attn.w_o", c.C, c.C, true, sd_out, 0);
      b.b_o = add(p + "attn.b_o", c.C, 1, false, 0, 0);
      b.ln2_g = add(p + "ln2.g", c.C, 1, false, 0, 1);
      b.ln2_b = add(p + "ln2.b", c.C, 1, false, 0, 0);
      b.w_fc = add(p + "mlp.w_fc", c.FF(), c.C, true, sd, 0);
      b.b_fc = add(p + "mlp.b_fc", c.FF(), 1, false, 0, 0);
      b.w_pr = add(p + "mlp.w_pr", c.C, c.FF(), true, sd_out, 0);
      b.b_pr = add(p + "mlp.b_pr", c.C, 1, false, 0, 0);
      blk.push_back(b);
    }
    lnf_g = add("lnf.g", c.C, 1, false, 0, 1);
    lnf_b = add("lnf.b", c.C, 1, false, 0, 0);
    w_lm = add("lm_head.w", c.V, c.C, true, sd, 0);
    b_lm = add("lm_head.b", c.V, 1, false, 0, 0);
  }
  size_t count() const {
    size_t n = 0;
    for (auto& x : t) n += x.n;
    return n;
  }
};

inline std::vector<float> init_params(const Layout& lay, uint64_t seed) {
  std::vector<float> p(lay.total, 0.0f);
  Rng r(seed);
  for (const auto& x : lay.t)
    for (size_t i = 0; i < x.n; ++i) p[x.off + i] = x.std_ > 0 ? x.std_ * r.normal() : x.fill;
  return p;
}

// Training batch of step `step`: B random windows of T+1 characters of the training split.
inline void train_batch(const Config& c, const Corpus& d, uint64_t seed, int step, std::vector<int>& x, std::vector<int>& y) {
  Rng r(seed ^ (0xB5AD4ECEDA1CE2A9ull + uint64_t(step) * 0x9E3779B97F4A7C15ull));
  x.resize(size_t(c.B) * c.T);
  y.resize(x.size());
  for (int b = 0; b < c.B; ++b) {
    size_t s = size_t(r.next() % uint64_t(d.train.size() - size_t(c.T) - 1));
    for (int t = 0; t < c.T; ++t) {
      x[size_t(b) * c.T + t] = d.train[s + size_t(t)];
      y[size_t(b) * c.T + t] = d.train[s + size_t(t) + 1];
    }
  }
}
// Validation batch k of a fixed evaluation set: evenly spaced windows of the validation split.
inline void val_batch(const Config& c, const Corpus& d, int k, int nbatches, std::vector<int>& x, std::vector<int>& y) {
  x.resize(size_t(c.B) * c.T);
  y.resize(x.size());
  size_t span = d.val.size() - size_t(c.T) - 1, nwin = size_t(nbatches) * size_t(c.B);
  for (int b = 0; b < c.B; ++b) {
    size_t s = span * (size_t(k) * size_t(c.B) + size_t(b)) / nwin;
    for (int t = 0; t < c.T; ++t) {
      x[size_t(b) * c.T + t] = d.val[s + size_t(t)];
      y[size_t(b) * c.T + t] = d.val[s + size_t(t) + 1];
    }
  }
}

// Command line shared by both programs.
struct Args {
  Config cfg;
  Hyper hp;
  int steps = 300, eval_every = 50, val_batches = 4, sample_chars = 200;
  uint64_t seed = 1337;
  std::vector<std::string> corpus;
  std::string loss_log, plot;
  bool quiet = false;
  bool gradcheck = false;  // wh-gpt-ref only
  int bench = 0, bench_warmup = 3;  // wh-gpt only: timed steps instead of training
};
inline bool parse_args(int argc, char** argv, Args& a) {
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    auto val = [&]() -> const char* {
      if (i + 1 >= argc) { std::fprintf(stderr, "%s needs a value\n", s.c_str()); std::exit(2); }
      return argv[++i];
    };
    if (s == "--steps") a.steps = std::atoi(val());
    else if (s == "--eval-every") a.eval_every = std::atoi(val());
    else if (s == "--val-batches") a.val_batches = std::atoi(val());
    else if (s == "--sample") a.sample_chars = std::atoi(val());
    else if (s == "--seed") a.seed = std::strtoull(val(), nullptr, 10);
    else if (s == "--lr") a.hp.lr = float(std::atof(val()));
    else if (s == "--batch") a.cfg.B = std::atoi(val());
    else if (s == "--ctx") a.cfg.T = std::atoi(val());
    else if (s == "--width") a.cfg.C = std::atoi(val());
    else if (s == "--layers") a.cfg.L = std::atoi(val());
    else if (s == "--heads") a.cfg.H = std::atoi(val());
    else if (s == "--corpus") a.corpus.push_back(val());
    else if (s == "--loss-log") a.loss_log = val();
    else if (s == "--plot") a.plot = val();
    else if (s == "--quiet") a.quiet = true;
    else if (s == "--gradcheck") a.gradcheck = true;
    else if (s == "--bench") a.bench = std::atoi(val());
    else if (s == "--bench-warmup") a.bench_warmup = std::atoi(val());
    else {
      std::fprintf(stderr,
                   "usage: %s [--steps N] [--eval-every N] [--val-batches N] [--sample CHARS] [--seed S] [--lr LR]\n"
                   "          [--batch B] [--ctx T] [--width C] [--layers L] [--heads H] [--corpus FILE]...\n"
                   "          [--loss-log FILE] [--plot FILE.png] [--quiet] [--bench N [--bench-warmup N]]\n",
                   argv[0]);
      return false;
    }
  }
  const Config& c = a.cfg;
  if (c.T < 2 || c.T > 256 || c.C < 8 || c.C > 512 || c.H < 1 || c.C % c.H || c.L < 1 || c.L > 12 || c.B < 1 || c.B > 64 ||
      a.steps < 0 || a.val_batches < 1 || a.eval_every < 1 || a.bench < 0 || a.bench_warmup < 0) {
    std::fprintf(stderr, "bad model/training arguments\n");
    return false;
  }
  if (a.corpus.empty()) a.corpus = default_corpus_files();
  return true;
}

}  // namespace gpt
