// What the Fashion-MNIST training programs (train.cu: the MLP, cnn.cu: the
// CNN) share: the dataset from Debian's dataset-fashion-mnist (gzipped idx
// files) and the SGD-with-momentum update.
#pragma once

#include <cuda_runtime.h>
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

// SGD with momentum over every parameter at once: v = mu*v + g; w -= lr*v.
__global__ void sgd_momentum(float* __restrict__ w, float* __restrict__ v, const float* __restrict__ g, int n, float lr,
                             float mu) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  for (int i = t; i < n; i += gridDim.x * blockDim.x) {
    float vi = mu * v[i] + g[i];
    v[i] = vi;
    w[i] -= lr * vi;
  }
}

struct Dataset {
  std::vector<unsigned char> images, labels;  // 28x28 bytes per image, one label byte each
  int n = 0;
};

inline uint32_t be32(const unsigned char* p) { return uint32_t(p[0]) << 24 | p[1] << 16 | p[2] << 8 | p[3]; }

// `prog` names the program in its messages; a missing or malformed file exits 2.
inline std::vector<unsigned char> gz_read(const std::string& path, const char* prog) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) {
    std::fprintf(stderr, "%s: cannot open %s (install dataset-fashion-mnist)\n", prog, path.c_str());
    std::exit(2);
  }
  std::vector<unsigned char> out;
  unsigned char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) out.insert(out.end(), buf, buf + n);
  gzclose(f);
  return out;
}

// DIR/PREFIX-images-idx3-ubyte.gz and its labels; at most `limit` (> 0) images.
inline Dataset load_fashion_mnist(const std::string& dir, const char* prefix, int limit, const char* prog) {
  Dataset d;
  auto img = gz_read(dir + "/" + prefix + "-images-idx3-ubyte.gz", prog);
  auto lab = gz_read(dir + "/" + prefix + "-labels-idx1-ubyte.gz", prog);
  if (img.size() < 16 || be32(&img[0]) != 0x803 || lab.size() < 8 || be32(&lab[0]) != 0x801 ||
      be32(&img[8]) != 28 || be32(&img[12]) != 28 || be32(&img[4]) != be32(&lab[4]) ||
      img.size() < 16 + size_t(be32(&img[4])) * 784 || lab.size() < 8 + size_t(be32(&lab[4]))) {
    std::fprintf(stderr, "%s: %s/%s-*: not Fashion-MNIST idx files\n", prog, dir.c_str(), prefix);
    std::exit(2);
  }
  d.n = int(be32(&img[4]));
  if (limit > 0 && limit < d.n) d.n = limit;
  d.images.assign(img.begin() + 16, img.begin() + 16 + size_t(d.n) * 784);
  d.labels.assign(lab.begin() + 8, lab.begin() + 8 + d.n);
  return d;
}

// A dataset on the device, as bytes (batches are gathered there), and an
// index buffer of its size holding 0..n-1 (a shuffled order is copied over
// it where the program wants one).
inline cudaError_t to_device(const Dataset& d, unsigned char** img, unsigned char** lab, int** idx) {
  std::vector<int> order(size_t(d.n));
  for (int i = 0; i < d.n; i++) order[size_t(i)] = i;
  cudaError_t e;
  if ((e = cudaMalloc(img, d.images.size())) != cudaSuccess || (e = cudaMalloc(lab, d.labels.size())) != cudaSuccess ||
      (e = cudaMalloc(idx, order.size() * sizeof(int))) != cudaSuccess)
    return e;
  if ((e = cudaMemcpy(*img, d.images.data(), d.images.size(), cudaMemcpyHostToDevice)) != cudaSuccess ||
      (e = cudaMemcpy(*lab, d.labels.data(), d.labels.size(), cudaMemcpyHostToDevice)) != cudaSuccess)
    return e;
  return cudaMemcpy(*idx, order.data(), order.size() * sizeof(int), cudaMemcpyHostToDevice);
}
