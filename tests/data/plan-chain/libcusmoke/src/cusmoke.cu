#include "cusmoke.h"
#include <cuda_runtime.h>

__global__ void saxpy_kernel(int n, float a, const float *x, float *y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

extern "C" const char *cusmoke_version(void) { return "cusmoke 0.1.0"; }

extern "C" int cusmoke_saxpy(int n, float a, const float *x, float *y) {
  saxpy_kernel<<<(n + 255) / 256, 256>>>(n, a, x, y);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
