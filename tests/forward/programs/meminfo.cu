// Prints the device's free memory as the server reports it (all sessions).
#include "check.cuh"
int main() {
  size_t fr = 0, tot = 0;
  CHECK(cudaMemGetInfo(&fr, &tot));
  std::printf("free=%zu total=%zu\n", fr, tot);
  return 0;
}
