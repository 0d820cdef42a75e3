// A kernel compiled by FindCUDA's nvcc custom command.
#include "magma_v2.h"

__global__ void dgemm_kernel(int n, const float* a, const float* b, float* c) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] * b[i] + c[i];
}

void dgemm_launch(int n, const float* a, const float* b, float* c) {
    dgemm_kernel<<<(n + 255) / 256, 256>>>(n, a, b, c);
}
