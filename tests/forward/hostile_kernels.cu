// Kernels a hostile client loads into its own session (tests/forward/hostile_test.cpp)
// to aim device pointers it does not own: plain C names, so the client can ask
// for them without knowing nvcc's mangling.
extern "C" __global__ void copy_words(const unsigned* src, unsigned* dst, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = src[i];
}

extern "C" __global__ void fill_words(unsigned* dst, unsigned value, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = value;
}

extern "C" __global__ void empty_kernel() {}

// A module variable with an initial value (managed placement checks).
__device__ unsigned hostile_global[4] = {1, 2, 3, 4};
