// Virtual functions and function pointers in device code, written the way
// programs use them: a Shape hierarchy made with device-side `new` in one
// kernel, used through base pointers in a second (warps mix the classes, so
// one virtual call reaches several functions), deleted through the base in a
// third; a table of __device__ function pointers chosen per element; a
// pointer read from a symbol on the host and passed as a kernel argument;
// variables initialized with other variables' and functions' addresses.
// `virtual_functions badcall` calls through a pointer that is not a function:
// the launch fails (the test checks the message on stderr).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>
#include "check.cuh"

// ---- a class hierarchy
__device__ int destroyed[4];  // per class, and [3]: base destructors run

struct Shape {
  __device__ virtual ~Shape() { atomicAdd(&destroyed[3], 1); }
  __device__ virtual float area() const = 0;
  __device__ virtual void scale(float s) = 0;
  __device__ virtual int kind() const = 0;
};
struct Circle : Shape {
  float r;
  __device__ explicit Circle(float r) : r(r) {}
  __device__ ~Circle() override { atomicAdd(&destroyed[0], 1); }
  __device__ float area() const override { return 3.14159265f * r * r; }
  __device__ void scale(float s) override { r *= s; }
  __device__ int kind() const override { return 0; }
};
struct Square : Shape {
  float a;
  __device__ explicit Square(float a) : a(a) {}
  __device__ ~Square() override { atomicAdd(&destroyed[1], 1); }
  __device__ float area() const override { return a * a; }
  __device__ void scale(float s) override { a *= s; }
  __device__ int kind() const override { return 1; }
};
struct Triangle : Shape {
  float b, h;
  __device__ Triangle(float b, float h) : b(b), h(h) {}
  __device__ ~Triangle() override { atomicAdd(&destroyed[2], 1); }
  __device__ float area() const override { return 0.5f * b * h; }
  __device__ void scale(float s) override {
    b *= s;
    h *= s;
  }
  __device__ int kind() const override { return 2; }
};

constexpr int kShapes = 1000;  // not a multiple of the block: a partial warp

__global__ void create(Shape** shapes, const float* size, int n, int* failed) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  Shape* s = nullptr;
  switch (i % 3) {  // neighbouring threads make different classes
    case 0: s = new Circle(size[i]); break;
    case 1: s = new Square(size[i]); break;
    default: s = new Triangle(size[i], size[i] + 1.0f); break;
  }
  if (!s) atomicAdd(failed, 1);
  shapes[i] = s;
}

__global__ void use(Shape* const* shapes, const float* factor, float* area, int* kind, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  Shape* s = shapes[i];
  s->scale(factor[i]);
  area[i] = s->area();
  kind[i] = s->kind();
}

__global__ void destroy(Shape** shapes, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  delete shapes[i];  // the deleting destructor, through the vtable
  shapes[i] = nullptr;
}

// ---- function pointers
typedef float (*binop)(float, float);
__device__ float op_add(float a, float b) { return a + b; }
__device__ float op_sub(float a, float b) { return a - b; }
__device__ float op_mul(float a, float b) { return a * b; }
__device__ float op_max(float a, float b) { return fmaxf(a, b); }
__device__ float op_hyp(float a, float b) { return sqrtf(a * a + b * b); }
float h_add(float a, float b) { return a + b; }
float h_sub(float a, float b) { return a - b; }
float h_mul(float a, float b) { return a * b; }
float h_max(float a, float b) { return std::fmax(a, b); }
float h_hyp(float a, float b) { return std::sqrt(a * a + b * b); }
constexpr int kOps = 5;
__device__ binop ops[kOps] = {op_add, op_sub, op_mul, op_max, op_hyp};
__device__ binop chosen = op_hyp;

__global__ void apply_table(const float* x, const float* y, const int* which, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = ops[which[i]](x[i], y[i]);
}
__global__ void apply_ptr(binop f, const float* x, const float* y, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = f(x[i], y[i]);
}
__global__ void apply_chosen(const float* x, const float* y, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = chosen(x[i], y[i]);
}

// ---- addresses in initializers
__device__ float table[8] = {1.5f, 2.5f, 4.0f, 8.0f, 16.0f, 32.0f, 64.0f, 128.0f};
__device__ float* mid = table + 4;
struct Config {
  int n;
  const float* coeffs;
  binop combine;
};
__device__ Config config = {3, table + 1, op_mul};
__constant__ const float* const_ptr = table + 7;
__global__ void read_config(float* out) {
  out[0] = *mid;
  out[1] = config.combine(config.coeffs[0], config.coeffs[config.n - 1]);
  out[2] = *const_ptr;
  mid[1] = -1.0f;  // a store through the initialized pointer lands in table[5]
}

bool close(float a, float b) { return std::fabs(a - b) <= 1e-5f * std::fmax(1.0f, std::fabs(b)); }

int main(int argc, char** argv) {
  const int block = 128, grid = (kShapes + block - 1) / block;
  if (argc > 1 && std::strcmp(argv[1], "badcall") == 0) {
    // A data address used as a function: the launch fails, naming the kernel.
    float* d;
    CHECK(cudaMalloc(&d, 3 * 32 * sizeof(float)));
    CHECK(cudaMemset(d, 0, 3 * 32 * sizeof(float)));
    apply_ptr<<<1, 32>>>(reinterpret_cast<binop>(d), d, d + 32, d + 64, 32);
    cudaError_t e = cudaDeviceSynchronize();
    EXPECT(e == cudaErrorIllegalAddress, "call through a data pointer gave %s", cudaGetErrorName(e));
    std::printf("PASS\n");
    return 0;
  }

  // Shapes: created, scaled and measured through the base class, deleted.
  std::vector<float> size(kShapes), factor(kShapes);
  for (int i = 0; i < kShapes; i++) {
    size[i] = 0.5f + float(i % 17) * 0.25f;
    factor[i] = 1.0f + float(i % 5) * 0.5f;
  }
  Shape** shapes;
  float *d_size, *d_factor, *d_area;
  int *d_kind, *d_failed;
  CHECK(cudaMalloc(&shapes, kShapes * sizeof(Shape*)));
  CHECK(cudaMalloc(&d_size, kShapes * sizeof(float)));
  CHECK(cudaMalloc(&d_factor, kShapes * sizeof(float)));
  CHECK(cudaMalloc(&d_area, kShapes * sizeof(float)));
  CHECK(cudaMalloc(&d_kind, kShapes * sizeof(int)));
  CHECK(cudaMalloc(&d_failed, sizeof(int)));
  CHECK(cudaMemset(d_failed, 0, sizeof(int)));
  CHECK(cudaMemcpy(d_size, size.data(), kShapes * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_factor, factor.data(), kShapes * sizeof(float), cudaMemcpyHostToDevice));
  create<<<grid, block>>>(shapes, d_size, kShapes, d_failed);
  CHECK(cudaGetLastError());
  use<<<grid, block>>>(shapes, d_factor, d_area, d_kind, kShapes);
  CHECK(cudaGetLastError());
  std::vector<float> area(kShapes);
  std::vector<int> kind(kShapes);
  int failed = -1;
  CHECK(cudaMemcpy(area.data(), d_area, kShapes * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(kind.data(), d_kind, kShapes * sizeof(int), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(&failed, d_failed, sizeof(int), cudaMemcpyDeviceToHost));
  EXPECT(failed == 0, "%d allocations failed", failed);
  for (int i = 0; i < kShapes; i++) {
    const float s = size[i] * factor[i];
    float want = 0;
    switch (i % 3) {
      case 0: want = 3.14159265f * s * s; break;
      case 1: want = s * s; break;
      default: want = 0.5f * s * (size[i] + 1.0f) * factor[i]; break;
    }
    EXPECT(kind[i] == i % 3, "shape %d: kind %d", i, kind[i]);
    EXPECT(close(area[i], want), "shape %d: area %g, want %g", i, area[i], want);
  }
  // Pointers from the heap reach the host and come back unchanged.
  std::vector<Shape*> ptrs(kShapes);
  CHECK(cudaMemcpy(ptrs.data(), shapes, kShapes * sizeof(Shape*), cudaMemcpyDeviceToHost));
  for (int i = 0; i < kShapes; i++) EXPECT(ptrs[i] != nullptr, "shape %d is null", i);
  destroy<<<grid, block>>>(shapes, kShapes);
  CHECK(cudaGetLastError());
  int gone[4];
  CHECK(cudaMemcpyFromSymbol(gone, destroyed, sizeof gone));
  const int per[3] = {(kShapes + 2) / 3, (kShapes + 1) / 3, kShapes / 3};
  for (int k = 0; k < 3; k++) EXPECT(gone[k] == per[k], "class %d: %d destructors, want %d", k, gone[k], per[k]);
  EXPECT(gone[3] == kShapes, "%d base destructors, want %d", gone[3], kShapes);

  // A table of function pointers, chosen per element (warps mix them).
  const int n = 777;
  std::vector<float> x(n), y(n), out(n);
  std::vector<int> which(n);
  for (int i = 0; i < n; i++) {
    x[i] = float(i % 23) - 7.5f;
    y[i] = float(i % 11) * 0.75f + 0.25f;
    which[i] = (i * 7 + i / 5) % kOps;
  }
  float *dx, *dy, *dout;
  int* dwhich;
  CHECK(cudaMalloc(&dx, n * sizeof(float)));
  CHECK(cudaMalloc(&dy, n * sizeof(float)));
  CHECK(cudaMalloc(&dout, n * sizeof(float)));
  CHECK(cudaMalloc(&dwhich, n * sizeof(int)));
  CHECK(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dy, y.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dwhich, which.data(), n * sizeof(int), cudaMemcpyHostToDevice));
  float (*const host_ops[kOps])(float, float) = {h_add, h_sub, h_mul, h_max, h_hyp};
  apply_table<<<(n + 127) / 128, 128>>>(dx, dy, dwhich, dout, n);
  CHECK(cudaMemcpy(out.data(), dout, n * sizeof(float), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; i++) {
    const float want = host_ops[which[i]](x[i], y[i]);
    EXPECT(close(out[i], want), "table[%d] at %d: %g, want %g", which[i], i, out[i], want);
  }

  // Pointers read from symbols on the host, passed as kernel arguments.
  binop from_symbol = nullptr, third = nullptr;
  CHECK(cudaMemcpyFromSymbol(&from_symbol, chosen, sizeof from_symbol));
  CHECK(cudaMemcpyFromSymbol(&third, ops, sizeof third, 2 * sizeof(binop)));
  EXPECT(from_symbol != nullptr && third != nullptr && from_symbol != third, "pointers %p %p", (void*)from_symbol,
         (void*)third);
  for (auto [f, h] : {std::pair{from_symbol, h_hyp}, std::pair{third, h_mul}}) {
    CHECK(cudaMemset(dout, 0, n * sizeof(float)));
    apply_ptr<<<(n + 127) / 128, 128>>>(f, dx, dy, dout, n);
    CHECK(cudaMemcpy(out.data(), dout, n * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) EXPECT(close(out[i], h(x[i], y[i])), "pointer arg at %d: %g", i, out[i]);
  }
  // A pointer stored into a __device__ variable from the host.
  CHECK(cudaMemcpyToSymbol(chosen, &third, sizeof third));
  apply_chosen<<<(n + 127) / 128, 128>>>(dx, dy, dout, n);
  CHECK(cudaMemcpy(out.data(), dout, n * sizeof(float), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; i++) EXPECT(close(out[i], x[i] * y[i]), "chosen at %d: %g", i, out[i]);

  // Variables initialized with addresses: real device addresses.
  float* table_addr = nullptr;
  float* mid_value = nullptr;
  CHECK(cudaGetSymbolAddress(reinterpret_cast<void**>(&table_addr), table));
  CHECK(cudaMemcpyFromSymbol(&mid_value, mid, sizeof mid_value));
  EXPECT(mid_value == table_addr + 4, "mid = %p, table at %p", (void*)mid_value, (void*)table_addr);
  float cfg_out[3] = {0, 0, 0};
  CHECK(cudaMemset(dout, 0, 3 * sizeof(float)));
  read_config<<<1, 1>>>(dout);
  CHECK(cudaMemcpy(cfg_out, dout, sizeof cfg_out, cudaMemcpyDeviceToHost));
  EXPECT(cfg_out[0] == 16.0f, "*mid = %g", cfg_out[0]);
  EXPECT(cfg_out[1] == 2.5f * 8.0f, "config.combine = %g", cfg_out[1]);
  EXPECT(cfg_out[2] == 128.0f, "*const_ptr = %g", cfg_out[2]);
  float t5 = 0;
  CHECK(cudaMemcpyFromSymbol(&t5, table, sizeof t5, 5 * sizeof(float)));
  EXPECT(t5 == -1.0f, "table[5] = %g after a store through mid", t5);

  CHECK(cudaFree(shapes));
  CHECK(cudaFree(d_size));
  CHECK(cudaFree(d_factor));
  CHECK(cudaFree(d_area));
  CHECK(cudaFree(d_kind));
  CHECK(cudaFree(d_failed));
  CHECK(cudaFree(dx));
  CHECK(cudaFree(dy));
  CHECK(cudaFree(dout));
  CHECK(cudaFree(dwhich));
  std::printf("PASS\n");
  return 0;
}
