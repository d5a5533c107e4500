// Test kernel: math functions as nvcc -O3 emits them, for comparison with libm.
// Output layout per input element: NF floats.
#define NF 20
extern "C" __global__ void math_f32(const float* x, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = x[i];
  float* o = out + (size_t)i * NF;
  o[0] = expf(v);
  o[1] = logf(fabsf(v) + 1e-3f);
  o[2] = sinf(v);
  o[3] = cosf(v);
  o[4] = sqrtf(fabsf(v));
  o[5] = rsqrtf(fabsf(v) + 1e-3f);
  o[6] = __expf(v);                 // ex2.approx based
  o[7] = __logf(fabsf(v) + 1e-3f);  // lg2.approx based
  o[8] = __sinf(v);                 // sin.approx
  o[9] = __cosf(v);                 // cos.approx
  o[10] = 1.0f / (v + 100.5f);      // div.rn
  o[11] = __frcp_rn(v + 100.5f);    // rcp.rn
  o[12] = tanhf(v);
  o[13] = exp2f(v);
  o[14] = log2f(fabsf(v) + 1e-3f);
  o[15] = powf(fabsf(v) + 0.5f, 1.7f);
  o[16] = __fdividef(v, 3.0f);
  o[17] = floorf(v * 3.3f) + ceilf(v * 1.7f) + truncf(v * 2.1f) + rintf(v * 1.3f);
  o[18] = (float)(int)(v * 1000.f) + (float)(unsigned)(fabsf(v) * 7.f);
  o[19] = fminf(v, 0.25f) + fmaxf(v, -0.25f) + copysignf(2.0f, v) + fmaf(v, v, 1.0f);
}
