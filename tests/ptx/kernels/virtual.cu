// Virtual functions and function pointers (ptx_indirect_test.cpp): objects of
// three classes made with `new`, called through the base class with the
// classes mixed inside warps, deleted through the base; a table of function
// pointers; pointers in variable initializers.
struct Shape {
  __device__ virtual ~Shape() {}
  __device__ virtual int area() const = 0;
  __device__ virtual void grow(int by) = 0;
};
struct Rect : Shape {
  int w, h;
  __device__ Rect(int w, int h) : w(w), h(h) {}
  __device__ int area() const override { return w * h; }
  __device__ void grow(int by) override { w += by; h += by; }
};
struct Tri : Shape {
  int b, h;
  __device__ Tri(int b, int h) : b(b), h(h) {}
  __device__ int area() const override { return b * h / 2; }
  __device__ void grow(int by) override { b += 2 * by; }
};
// A class that uses its base class's function and recursion through the vtable.
struct Nested : Rect {
  Shape* inner;
  __device__ Nested(int w, Shape* inner) : Rect(w, w), inner(inner) {}
  __device__ ~Nested() override { delete inner; }
  __device__ int area() const override { return Rect::area() + (inner ? inner->area() : 0); }
};

extern "C" __global__ void vf_make(Shape** out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  switch (i % 3) {
    case 0: out[i] = new Rect(i % 7 + 1, 3); break;
    case 1: out[i] = new Tri(i % 5 + 2, 4); break;
    default: out[i] = new Nested(2, i % 2 ? static_cast<Shape*>(new Tri(2, 6)) : new Nested(1, nullptr)); break;
  }
}
extern "C" __global__ void vf_use(Shape* const* s, int* area, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  s[i]->grow(i % 4);
  area[i] = s[i]->area();
}
extern "C" __global__ void vf_kill(Shape** s, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) delete s[i];
}

typedef int (*iop)(int, int);
__device__ int iadd(int a, int b) { return a + b; }
__device__ int isub(int a, int b) { return a - b; }
__device__ int imul(int a, int b) { return a * b; }
__device__ iop iops[3] = {iadd, isub, imul};
__device__ iop ichosen = isub;
__device__ int data[4] = {10, 20, 30, 40};
__device__ int* data_ptr = data + 2;
struct Pair {
  int k;
  int* p;
  iop f;
};
__device__ Pair pair = {7, data + 1, imul};

extern "C" __global__ void fp_table(const int* which, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = iops[which[i]](i, 3);
}
extern "C" __global__ void fp_arg(iop f, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = f(i, 5);
}
extern "C" __global__ void fp_init(int* out) {
  out[0] = *data_ptr;
  out[1] = pair.f(pair.k, *pair.p);
  out[2] = ichosen(9, 4);
}
