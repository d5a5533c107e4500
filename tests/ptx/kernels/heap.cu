// Device-side heap: malloc/free and new/delete in kernels (tests/ptx/ptx_heap_test.cpp).
#include <cstdint>

// Each thread allocates n ints, fills them and leaves the pointer in ptrs[i].
extern "C" __global__ void heap_alloc(int** ptrs, int n, int nthreads) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= nthreads) return;
  int* p = static_cast<int*>(malloc(n * sizeof(int)));
  ptrs[i] = p;
  if (!p) return;
  for (int k = 0; k < n; ++k) p[k] = i * 1000 + k;
}

// A later launch reads what heap_alloc left, then frees it.
extern "C" __global__ void heap_sum_free(int** ptrs, int n, int nthreads, long long* sums) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= nthreads) return;
  int* p = ptrs[i];
  long long s = -1;
  if (p) {
    s = 0;
    for (int k = 0; k < n; ++k) s += p[k];
    free(p);
  }
  sums[i] = s;
}

struct Node {
  double value;
  int key;
  Node* next;
};

// new/delete of a struct and of an array in one kernel.
extern "C" __global__ void heap_new_delete(double* out) {
  int i = threadIdx.x;
  Node* a = new Node{1.5 * i, i, nullptr};
  Node* b = new Node{2.0, i + 1, a};
  int* arr = new int[i + 3];
  for (int k = 0; k < i + 3; ++k) arr[k] = k * i;
  int s = 0;
  for (int k = 0; k < i + 3; ++k) s += arr[k];
  double v = 0;
  for (Node* p = b; p; p = p->next) v += p->value + p->key;
  out[i] = v + s + ((reinterpret_cast<uintptr_t>(arr) & 15) ? 1e9 : 0) + ((reinterpret_cast<uintptr_t>(a) & 15) ? 1e9 : 0);
  delete[] arr;
  delete b;
  delete a;
}

// Frees a pointer malloc never returned.
extern "C" __global__ void heap_bad_free(char* p) {
  if (threadIdx.x == 0) free(p + 8);
}
