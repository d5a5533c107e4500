// Tensor-core GEMMs as programs write them, each checked against a host GEMM:
//  * nvcuda::wmma, D = alpha * A*B + beta * C with the epilogue applied element by element
//    on the accumulator fragment: half in / float out (m16n16k16, every row/col-major
//    combination of A and B, D stored row- or column-major), half in / half out
//    (m32n8k16), bf16 (m8n32k16), tf32 (m16n16k8, operands rounded with
//    __float_to_tf32), int8 (s8 m16n16k16, u8 m32n8k16), and a block that stages its
//    tiles in shared memory. Four warps per block, one output tile per warp, a K loop.
//  * inline PTX as libraries emit it: ldmatrix.x4 (A) and ldmatrix.x2.trans (B) from
//    shared memory feeding mma.sync.m16n8k16 f16 -> f32, fragments read and written
//    with the per-lane layout the PTX ISA documents.
// Needs compute capability 8.0 PTX (bf16, tf32).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <type_traits>
#include <vector>

#include "check.cuh"

using namespace nvcuda;

constexpr int kWarpsM = 2, kWarpsN = 2;  // four warps per block, 2 x 2 tiles

template <class TF> struct Mem { using type = TF; };
template <> struct Mem<wmma::precision::tf32> { using type = float; };

template <class TF, class TA, int WM, int WN, int WK, class LA, class LB, bool DCOL>
__global__ void wmma_gemm(const typename Mem<TF>::type* A, const typename Mem<TF>::type* B, const TA* C, TA* D, int M,
                          int N, int K, TA alpha, TA beta) {
  constexpr bool arow = std::is_same<LA, wmma::row_major>::value, brow = std::is_same<LB, wmma::row_major>::value;
  const int warp = threadIdx.x / 32;
  const int tm = (blockIdx.y * kWarpsM + warp / kWarpsN) * WM, tn = (blockIdx.x * kWarpsN + warp % kWarpsN) * WN;
  const int lda = arow ? K : M, ldb = brow ? N : K;
  wmma::fragment<wmma::matrix_a, WM, WN, WK, TF, LA> a;
  wmma::fragment<wmma::matrix_b, WM, WN, WK, TF, LB> b;
  wmma::fragment<wmma::accumulator, WM, WN, WK, TA> acc, c;
  wmma::fill_fragment(acc, TA(0));
  for (int k = 0; k < K; k += WK) {
    wmma::load_matrix_sync(a, arow ? A + size_t(tm) * lda + k : A + size_t(k) * lda + tm, lda);
    wmma::load_matrix_sync(b, brow ? B + size_t(k) * ldb + tn : B + size_t(tn) * ldb + k, ldb);
    if constexpr (std::is_same<TF, wmma::precision::tf32>::value) {
      for (int i = 0; i < a.num_elements; i++) a.x[i] = wmma::__float_to_tf32(a.x[i]);
      for (int i = 0; i < b.num_elements; i++) b.x[i] = wmma::__float_to_tf32(b.x[i]);
    }
    wmma::mma_sync(acc, a, b, acc);
  }
  wmma::load_matrix_sync(c, C + size_t(tm) * N + tn, N, wmma::mem_row_major);
  for (int i = 0; i < acc.num_elements; i++) acc.x[i] = alpha * acc.x[i] + beta * c.x[i];
  if (DCOL) wmma::store_matrix_sync(D + size_t(tn) * M + tm, acc, M, wmma::mem_col_major);
  else wmma::store_matrix_sync(D + size_t(tm) * N + tn, acc, N, wmma::mem_row_major);
}

// The block copies 32 x 16 of A and 16 x 32 of B into padded shared tiles per K step;
// each warp loads its fragments from there. A, B, C, D row-major.
__global__ void wmma_gemm_smem(const half* A, const half* B, const float* C, float* D, int M, int N, int K, float alpha,
                               float beta) {
  __shared__ __align__(32) half sa[32][16 + 16];
  __shared__ __align__(32) half sb[16][32 + 16];
  const int warp = threadIdx.x / 32, wm = warp / 2, wn = warp % 2;
  const int bm = blockIdx.y * 32, bn = blockIdx.x * 32;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc, c;
  wmma::fill_fragment(acc, 0.0f);
  for (int k = 0; k < K; k += 16) {
    for (int i = threadIdx.x; i < 32 * 16; i += blockDim.x) {
      sa[i / 16][i % 16] = A[size_t(bm + i / 16) * K + k + i % 16];
      sb[i / 32][i % 32] = B[size_t(k + i / 32) * N + bn + i % 32];
    }
    __syncthreads();
    wmma::load_matrix_sync(a, &sa[wm * 16][0], 32);
    wmma::load_matrix_sync(b, &sb[0][wn * 16], 48);
    wmma::mma_sync(acc, a, b, acc);
    __syncthreads();
  }
  const int tm = bm + wm * 16, tn = bn + wn * 16;
  wmma::load_matrix_sync(c, C + size_t(tm) * N + tn, N, wmma::mem_row_major);
  for (int i = 0; i < acc.num_elements; i++) acc.x[i] = alpha * acc.x[i] + beta * c.x[i];
  wmma::store_matrix_sync(D + size_t(tm) * N + tn, acc, N, wmma::mem_row_major);
}

// D = A*B + C, A (M x K) and B (K x N) row-major halves, C/D float; one 16 x 8 tile per
// warp through its own shared staging area.
__global__ void mma_sync_gemm(const half* A, const half* B, const float* C, float* D, int M, int N, int K) {
  __shared__ __align__(16) half sa[4][16][16 + 8];
  __shared__ __align__(16) half sb[4][16][8 + 8];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int tile = blockIdx.x * 4 + warp, tiles_n = N / 8;
  const int tm = tile / tiles_n * 16, tn = tile % tiles_n * 8;
  const int g = lane / 4, t = lane % 4;
  float c[4];
  for (int i = 0; i < 4; i++) c[i] = C[size_t(tm + g + (i >= 2 ? 8 : 0)) * N + tn + t * 2 + (i & 1)];
  for (int k = 0; k < K; k += 16) {
    for (int i = lane; i < 16 * 16; i += 32) sa[warp][i / 16][i % 16] = A[size_t(tm + i / 16) * K + k + i % 16];
    for (int i = lane; i < 16 * 8; i += 32) sb[warp][i / 8][i % 8] = B[size_t(k + i / 8) * N + tn + i % 8];
    __syncwarp();
    // A: matrices (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15)
    const int m = lane / 8, r = lane % 8;
    unsigned a_addr = unsigned(__cvta_generic_to_shared(&sa[warp][(m % 2) * 8 + r][(m / 2) * 8]));
    // B: rows k 0-15 of the 16 x 8 tile, transposed into the column-major fragment
    unsigned b_addr = unsigned(__cvta_generic_to_shared(&sb[warp][lane % 16][0]));
    unsigned a0, a1, a2, a3, b0, b1;
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3)
                 : "r"(a_addr));
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];" : "=r"(b0), "=r"(b1) : "r"(b_addr));
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    __syncwarp();
  }
  for (int i = 0; i < 4; i++) D[size_t(tm + g + (i >= 2 ? 8 : 0)) * N + tn + t * 2 + (i & 1)] = c[i];
}

// ---- host side ----
std::mt19937 rng(2024);
float uniform(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(rng); }
float tf32_rna(float x) {  // what __float_to_tf32 does to finite values
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u = (u + 0x1000u) & 0xffffe000u;
  std::memcpy(&x, &u, 4);
  return x;
}

template <class T>
T* to_device(const std::vector<T>& h) {
  T* d;
  CHECK(cudaMalloc(&d, h.size() * sizeof(T)));
  CHECK(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

// Operands as the host sees them (double) and in memory (T), A/B in the given layouts.
struct Problem {
  int M, N, K;
  bool acol, bcol;
  std::vector<double> A, B, C;  // row-major values
  double at(const std::vector<double>& X, int cols, int r, int c) const { return X[size_t(r) * cols + c]; }
};

// Checks D (row- or column-major) against alpha * A*B + beta * C within
// rel * (|alpha| sum |a b| + |beta c|) + abs.
template <class TA>
bool check(const char* what, const Problem& p, const std::vector<TA>& Dh, bool dcol, double alpha, double beta, double rel,
           double abs_tol, double (*out)(TA)) {
  int bad = 0;
  for (int i = 0; i < p.M; i++)
    for (int j = 0; j < p.N; j++) {
      double ref = 0, mag = 0;
      for (int k = 0; k < p.K; k++) {
        double ab = p.at(p.A, p.K, i, k) * p.at(p.B, p.N, k, j);
        ref += ab;
        mag += std::fabs(ab);
      }
      const double c = p.at(p.C, p.N, i, j);
      ref = alpha * ref + beta * c;
      mag = std::fabs(alpha) * mag + std::fabs(beta * c);
      const double got = out(Dh[dcol ? size_t(j) * p.M + i : size_t(i) * p.N + j]);
      if (!(std::fabs(got - ref) <= rel * mag + abs_tol) && ++bad <= 5)
        std::fprintf(stderr, "%s: D[%d][%d] = %.9g, want %.9g\n", what, i, j, got, ref);
    }
  EXPECT(bad == 0, "%s: %d of %d elements wrong", what, bad, p.M * p.N);
  return true;
}

// Fills a problem with values exactly representable in TM and uploads A/B in layout.
template <class TM>
Problem make(int M, int N, int K, bool acol, bool bcol, TM (*enc)(float), double (*dec)(TM), float lo, float hi,
             std::vector<TM>& Am, std::vector<TM>& Bm) {
  Problem p{M, N, K, acol, bcol, {}, {}, {}};
  p.A.resize(size_t(M) * K);
  p.B.resize(size_t(K) * N);
  p.C.resize(size_t(M) * N);
  Am.resize(p.A.size());
  Bm.resize(p.B.size());
  for (int r = 0; r < M; r++)
    for (int c = 0; c < K; c++) {
      TM v = enc(uniform(lo, hi));
      p.A[size_t(r) * K + c] = dec(v);
      Am[acol ? size_t(c) * M + r : size_t(r) * K + c] = v;
    }
  for (int r = 0; r < K; r++)
    for (int c = 0; c < N; c++) {
      TM v = enc(uniform(lo, hi));
      p.B[size_t(r) * N + c] = dec(v);
      Bm[bcol ? size_t(c) * K + r : size_t(r) * N + c] = v;
    }
  return p;
}

half enc_h(float f) { return __float2half_rn(f); }
double dec_h(half h) { return __half2float(h); }
__nv_bfloat16 enc_bf(float f) { return __float2bfloat16_rn(f); }
double dec_bf(__nv_bfloat16 h) { return __bfloat162float(h); }
float enc_f(float f) { return f; }
double dec_tf(float f) { return tf32_rna(f); }  // the kernel rounds its operands
signed char enc_s8(float f) { return (signed char)std::lround(f); }
double dec_s8(signed char v) { return v; }
unsigned char enc_u8(float f) { return (unsigned char)std::lround(f); }
double dec_u8(unsigned char v) { return v; }
double out_f(float v) { return v; }
double out_h(half v) { return __half2float(v); }
double out_i(int v) { return v; }

template <class TF, class TA, int WM, int WN, int WK, class LA, class LB, bool DCOL, class TM>
void run_wmma(const char* what, int M, int N, int K, TM (*enc)(float), double (*dec)(TM), float lo, float hi, TA alpha,
              TA beta, double rel, double abs_tol, double (*out)(TA), TA (*enc_acc)(float)) {
  constexpr bool acol = std::is_same<LA, wmma::col_major>::value, bcol = std::is_same<LB, wmma::col_major>::value;
  std::vector<TM> Am, Bm;
  Problem p = make<TM>(M, N, K, acol, bcol, enc, dec, lo, hi, Am, Bm);
  std::vector<TA> Ch(p.C.size());
  for (size_t i = 0; i < Ch.size(); i++) {
    Ch[i] = enc_acc(uniform(lo * 4, hi * 4));
    p.C[i] = out(Ch[i]);
  }
  TM *dA = to_device(Am), *dB = to_device(Bm);
  TA *dC = to_device(Ch), *dD;
  CHECK(cudaMalloc(&dD, Ch.size() * sizeof(TA)));
  dim3 grid(N / (WN * kWarpsN), M / (WM * kWarpsM));
  wmma_gemm<TF, TA, WM, WN, WK, LA, LB, DCOL><<<grid, 32 * kWarpsM * kWarpsN>>>(dA, dB, dC, dD, M, N, K, alpha, beta);
  CHECK(cudaGetLastError());
  std::vector<TA> Dh(Ch.size());
  CHECK(cudaMemcpy(Dh.data(), dD, Dh.size() * sizeof(TA), cudaMemcpyDeviceToHost));
  check(what, p, Dh, DCOL, out(alpha), out(beta), rel, abs_tol, out);
  CHECK(cudaFree(dA));
  CHECK(cudaFree(dB));
  CHECK(cudaFree(dC));
  CHECK(cudaFree(dD));
  std::printf("ok %s\n", what);
}

float acc_f(float f) { return f; }
half acc_h(float f) { return __float2half_rn(f); }
int acc_i(float f) { return int(std::lround(f)); }

int main() {
  using R = wmma::row_major;
  using Cm = wmma::col_major;
  // f32 accumulation: within K * 2^-24 of the magnitude; f16 results: half an f16 ulp more.
  const double f32_rel = 1e-5, f16_rel = 1.5e-3;
  run_wmma<half, float, 16, 16, 16, R, R, false>("f16 m16n16k16 A row B row", 128, 96, 128, enc_h, dec_h, -1, 1, 1.5f,
                                                  -0.5f, f32_rel, 1e-6, out_f, acc_f);
  run_wmma<half, float, 16, 16, 16, R, Cm, false>("f16 m16n16k16 A row B col", 128, 96, 128, enc_h, dec_h, -1, 1, 1.0f,
                                                   1.0f, f32_rel, 1e-6, out_f, acc_f);
  run_wmma<half, float, 16, 16, 16, Cm, R, true>("f16 m16n16k16 A col B row, D col", 64, 64, 96, enc_h, dec_h, -1, 1,
                                                  0.75f, 0.25f, f32_rel, 1e-6, out_f, acc_f);
  run_wmma<half, float, 16, 16, 16, Cm, Cm, true>("f16 m16n16k16 A col B col, D col", 64, 128, 64, enc_h, dec_h, -1, 1,
                                                   -2.0f, 0.0f, f32_rel, 1e-6, out_f, acc_f);
  run_wmma<half, half, 32, 8, 16, R, Cm, false>("f16 -> f16 m32n8k16", 128, 64, 64, enc_h, dec_h, -0.5f, 0.5f,
                                                 __float2half(1.0f), __float2half(0.5f), f16_rel, 1e-3, out_h, acc_h);
  run_wmma<__nv_bfloat16, float, 8, 32, 16, R, R, false>("bf16 m8n32k16", 64, 128, 64, enc_bf, dec_bf, -1, 1, 1.25f,
                                                          0.5f, f32_rel, 1e-6, out_f, acc_f);
  run_wmma<__nv_bfloat16, float, 16, 16, 16, Cm, R, true>("bf16 m16n16k16", 64, 64, 64, enc_bf, dec_bf, -1, 1, 1.0f,
                                                            -1.0f, f32_rel, 1e-6, out_f, acc_f);
  run_wmma<wmma::precision::tf32, float, 16, 16, 8, R, Cm, false>("tf32 m16n16k8", 64, 96, 72, enc_f, dec_tf, -2, 2,
                                                                   1.0f, 0.5f, f32_rel, 1e-6, out_f, acc_f);
  run_wmma<wmma::precision::tf32, float, 16, 16, 8, Cm, R, true>("tf32 m16n16k8 A col B row, D col", 64, 64, 64, enc_f,
                                                                  dec_tf, -2, 2, 0.5f, 2.0f, f32_rel, 1e-6, out_f, acc_f);
  run_wmma<signed char, int, 16, 16, 16, R, Cm, false>("s8 m16n16k16", 64, 96, 128, enc_s8, dec_s8, -128, 127, 3, -2, 0,
                                                        0, out_i, acc_i);
  run_wmma<unsigned char, int, 32, 8, 16, Cm, R, true>("u8 m32n8k16", 128, 32, 64, enc_u8, dec_u8, 0, 255, 1, 1, 0, 0,
                                                        out_i, acc_i);

  // An f16 problem (row-major A and B, random f32 C) run by `launch(dA, dB, dC, dD, M, N, K)`
  // and checked as D = alpha A B + beta C.
  auto run_f16 = [&](const char* what, int M, int N, int K, double alpha, double beta, auto launch) {
    std::vector<half> Am, Bm;
    Problem p = make<half>(M, N, K, false, false, enc_h, dec_h, -1, 1, Am, Bm);
    std::vector<float> Ch(p.C.size());
    for (size_t i = 0; i < Ch.size(); i++) p.C[i] = Ch[i] = uniform(-4, 4);
    half *dA = to_device(Am), *dB = to_device(Bm);
    float *dC = to_device(Ch), *dD;
    CHECK(cudaMalloc(&dD, Ch.size() * 4));
    launch(dA, dB, dC, dD, M, N, K);
    CHECK(cudaGetLastError());
    std::vector<float> Dh(Ch.size());
    CHECK(cudaMemcpy(Dh.data(), dD, Dh.size() * 4, cudaMemcpyDeviceToHost));
    check(what, p, Dh, false, alpha, beta, f32_rel, 1e-6, out_f);
    CHECK(cudaFree(dA));
    CHECK(cudaFree(dB));
    CHECK(cudaFree(dC));
    CHECK(cudaFree(dD));
    std::printf("ok %s\n", what);
  };
  // wmma through shared memory
  run_f16("f16 m16n16k16 from shared memory", 96, 64, 80, 2.0, -1.0,
          [](half* dA, half* dB, float* dC, float* dD, int M, int N, int K) {
            wmma_gemm_smem<<<dim3(N / 32, M / 32), 128>>>(dA, dB, dC, dD, M, N, K, 2.0f, -1.0f);
          });
  // inline PTX: ldmatrix + mma.sync.m16n8k16
  run_f16("ldmatrix + mma.sync m16n8k16", 64, 48, 96, 1.0, 1.0,
          [](half* dA, half* dB, float* dC, float* dD, int M, int N, int K) {
            const int tiles = (M / 16) * (N / 8);
            mma_sync_gemm<<<tiles / 4, 128>>>(dA, dB, dC, dD, M, N, K);
          });
  std::printf("PASS wmma_gemm\n");
  return 0;
}
