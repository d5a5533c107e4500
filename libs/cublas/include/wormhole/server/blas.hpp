// wormhole/server/blas.hpp - the BLAS seam of a device backend: what the
// cuBLAS service (server/blas_service.cpp) calls. cuBLAS semantics
// throughout: column-major matrices, cublasOperation_t transposes, leading
// dimensions in elements, alpha/beta either host values or device addresses
// (pointer mode), results written to host or device memory likewise.
//
// The session has already checked every handle, dimension, leading
// dimension, increment, stride, batch count and the device range of every
// operand. What only the device can police is the content of device memory:
// the pointer arrays of gemm_batched (the sim device bounds-checks each
// pointer it reads through host_view; on a GPU a stray pointer faults in the
// session's own context, as a stray kernel pointer does). The generic ops'
// pointer arrays (pa/pb/pc of BlasL3Args, BlasGemmExArgs, BlasLuArgs) are
// read and checked by the session itself; the sim device uses those checked
// copies, a GPU reads the device arrays again (a guest rewriting them from
// another stream meanwhile can only fault its own context). The pivots of
// getrs/getri are device data too: the sim device checks each is in 1..n.
//
// Implementations: sim_blas.cpp (OpenBLAS on the sim device's host memory),
// cuda_blas.cpp (NVIDIA's libcublas.so.13, dlopen'ed, one cuBLAS handle per
// guest handle, bound to the session's CUDA context and the call's stream).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "wormhole/server/backend.hpp"

namespace wh::server {

enum class BlasOp : uint32_t { N = 0, T = 1, C = 2 };  // cublasOperation_t values

// A scalar argument (alpha, beta) or a reduction's destination.
struct BlasScalar {
  bool device = false;  // device pointer mode: `dptr` is a device address
  uint64_t dptr = 0;
  double value = 0;  // host pointer mode: the value (float inputs widen exactly)
  double imag = 0;   // host pointer mode, complex types: the imaginary part
};

// Per-call settings taken from the guest handle.
struct BlasCall {
  Stream* stream = nullptr;  // nullptr: the legacy default stream
  bool device_scalars = false;
  uint32_t math_mode = 0;  // cublasMath_t
};

// cudaDataType_t values GemmEx accepts (same numbering as library_types.h).
constexpr int kDtR32F = 0;   // CUDA_R_32F
constexpr int kDtR64F = 1;   // CUDA_R_64F
constexpr int kDtR16F = 2;   // CUDA_R_16F
constexpr int kDtR16BF = 14; // CUDA_R_16BF
// cublasComputeType_t values.
constexpr int kCompute32F = 68, kCompute32FPedantic = 69, kCompute32FFast16F = 74, kCompute32FFast16BF = 75,
              kCompute32FFastTF32 = 77, kCompute16F = 64, kCompute16FPedantic = 65, kCompute64F = 70,
              kCompute64FPedantic = 71;

// One guest cuBLAS handle's backend state.
struct BlasHandle {
  virtual ~BlasHandle() = default;
};

struct GemmArgs {
  BlasOp ta = BlasOp::N, tb = BlasOp::N;
  int m = 0, n = 0, k = 0;
  BlasScalar alpha, beta;
  uint64_t A = 0, B = 0, C = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
};

// The generic ops (cublas_api.def's BlasL1/L2/L3, GemmExBatched,
// LuBatched): `type` is kBlasS/D/C/Z (0..3), `routine` the table's enum.
// Scalars whose type is T (or its real type where the routine says so);
// device scalars are read as that type.
struct BlasL1Args {
  uint32_t routine = 0, type = 0;
  int n = 0, incx = 1, incy = 1;
  BlasScalar alpha, beta;
  double param[5] = {};  // rotm, host pointer mode (device mode: alpha.dptr)
  uint64_t x = 0, y = 0;
  BlasScalar result;     // reductions: device pointer mode destination
};
struct BlasL1Result {    // reductions in host pointer mode
  double re = 0, im = 0;
  int index = 0;
};
struct BlasL2Args {
  uint32_t routine = 0, type = 0;
  uint32_t uplo = 0, diag = 0;
  BlasOp trans = BlasOp::N;
  int m = 0, n = 0, kl = 0, ku = 0, incx = 1, incy = 1;
  BlasScalar alpha, beta;
  uint64_t A = 0, x = 0, y = 0;
  int64_t lda = 0;
};
struct BlasL3Args {
  uint32_t routine = 0, type = 0, mode = 0;  // mode: kBlasOne / kBlasStrided / kBlasArrays
  uint32_t side = 0, uplo = 0, diag = 0;
  BlasOp ta = BlasOp::N, tb = BlasOp::N;
  int m = 0, n = 0, k = 0, batch = 1;
  BlasScalar alpha, beta;
  uint64_t A = 0, B = 0, C = 0;  // kBlasArrays: device arrays of device pointers
  int64_t lda = 0, ldb = 0, ldc = 0, sa = 0, sb = 0, sc = 0;
  // kBlasArrays: the pointers the session read from A/B/C and checked
  // (entries of an operand the routine does not read are 0).
  std::vector<uint64_t> pa, pb, pc;
};
struct BlasGemmExArgs {
  GemmArgs g;
  int atype = 0, btype = 0, ctype = 0, compute = 0, algo = 0;
  uint32_t mode = 0;
  int batch = 1;
  int64_t sa = 0, sb = 0, sc = 0;
  std::vector<uint64_t> pa, pb, pc;  // kBlasArrays, as for BlasL3Args
};
struct BlasLuArgs {
  uint32_t routine = 0, type = 0;
  BlasOp trans = BlasOp::N;
  int n = 0, nrhs = 0, batch = 0;
  int64_t lda = 0, ldc = 0;
  uint64_t A = 0, C = 0, pivots = 0, info = 0;  // A, C: device arrays of pointers
  std::vector<uint64_t> pa, pc;                 // their checked contents
};
// geqrfBatched: the QR factorization of each m x n matrix in place (R on
// and above the diagonal, the Householder vectors below it, LAPACK's
// layout) and its min(m, n) scalars tau.
struct BlasGeqrfArgs {
  uint32_t type = 0;
  int m = 0, n = 0, batch = 0;  // batch 0: nothing to do (m or n 0 too)
  int64_t lda = 0;
  uint64_t A = 0, tau = 0;        // device arrays of device pointers
  std::vector<uint64_t> pa, ptau;  // their checked contents
};

class Blas {
 public:
  virtual ~Blas() = default;
  virtual Err create(std::unique_ptr<BlasHandle>* out) = 0;
  virtual int version() const = 0;  // cublasGetVersion's answer

  // dtype: 0 fp32 (Sgemm), 1 fp64 (Dgemm).
  virtual Err gemm(BlasHandle& h, const BlasCall& c, int dtype, const GemmArgs& g) = 0;
  virtual Err gemm_strided_batched(BlasHandle& h, const BlasCall& c, int dtype, const GemmArgs& g, int64_t sa,
                                   int64_t sb, int64_t sc, int batch) = 0;
  // Aarray/Barray/Carray (in g.A/B/C) are device arrays of `batch` device pointers.
  virtual Err gemm_batched(BlasHandle& h, const BlasCall& c, int dtype, const GemmArgs& g, int batch) = 0;
  // Types are cudaDataType_t, compute a cublasComputeType_t (checked by the session).
  virtual Err gemm_ex(BlasHandle& h, const BlasCall& c, const GemmArgs& g, int atype, int btype, int ctype,
                      int compute, int algo) = 0;
  virtual Err geam(BlasHandle& h, const BlasCall& c, const GemmArgs& g) = 0;  // k unused; B/ldb/tb second operand
  virtual Err gemv(BlasHandle& h, const BlasCall& c, BlasOp t, int m, int n, const BlasScalar& alpha, uint64_t A,
                   int64_t lda, uint64_t x, int incx, const BlasScalar& beta, uint64_t y, int incy) = 0;
  virtual Err axpy(BlasHandle& h, const BlasCall& c, int n, const BlasScalar& alpha, uint64_t x, int incx, uint64_t y,
                   int incy) = 0;
  virtual Err scal(BlasHandle& h, const BlasCall& c, int n, const BlasScalar& alpha, uint64_t x, int incx) = 0;
  virtual Err copy(BlasHandle& h, const BlasCall& c, int n, uint64_t x, int incx, uint64_t y, int incy) = 0;
  // Reductions: in host pointer mode the result goes to *host_result (and
  // the call completes before returning); in device mode to result.dptr.
  virtual Err dot(BlasHandle& h, const BlasCall& c, int n, uint64_t x, int incx, uint64_t y, int incy,
                  const BlasScalar& result, float* host_result) = 0;
  virtual Err nrm2(BlasHandle& h, const BlasCall& c, int n, uint64_t x, int incx, const BlasScalar& result,
                   float* host_result) = 0;
  virtual Err asum(BlasHandle& h, const BlasCall& c, int n, uint64_t x, int incx, const BlasScalar& result,
                   float* host_result) = 0;
  virtual Err iamax(BlasHandle& h, const BlasCall& c, int n, uint64_t x, int incx, const BlasScalar& result,
                    int* host_result) = 0;

  // The generic ops. Defaults: not supported by this device.
  virtual Err l1(BlasHandle&, const BlasCall&, const BlasL1Args&, BlasL1Result*) { return cudaErrorNotSupported; }
  virtual Err l2(BlasHandle&, const BlasCall&, const BlasL2Args&) { return cudaErrorNotSupported; }
  virtual Err l3(BlasHandle&, const BlasCall&, const BlasL3Args&) { return cudaErrorNotSupported; }
  virtual Err gemm_ex_batched(BlasHandle&, const BlasCall&, const BlasGemmExArgs&) { return cudaErrorNotSupported; }
  virtual Err lu_batched(BlasHandle&, const BlasCall&, const BlasLuArgs&) { return cudaErrorNotSupported; }
  virtual Err geqrf_batched(BlasHandle&, const BlasCall&, const BlasGeqrfArgs&) { return cudaErrorNotSupported; }
};

// The sim device's BLAS: OpenBLAS over `ctx.host_view()`.
std::unique_ptr<Blas> make_sim_blas(Context& ctx);

// The GPU's BLAS: libcublas.so.13 through dlopen. `make_current` makes the
// session's CUDA context current on the calling thread (cuBLAS handles are
// created in, and calls run on, that context). Streams come from
// Stream::native() (a CUstream, which is a cudaStream_t). nullptr (and *err)
// when libcublas.so.13 cannot be loaded.
std::unique_ptr<Blas> make_cuda_blas(std::function<void()> make_current, std::string* err);

}  // namespace wh::server
