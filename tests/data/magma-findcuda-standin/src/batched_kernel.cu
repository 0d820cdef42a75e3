// A templated kernel: one instantiation per type, like magma's batched routines.
template <typename T>
__global__ void scale_batched(int n, T alpha, T** x) {
    int i = threadIdx.x;
    if (i < n) x[blockIdx.x][i] *= alpha;
}

template __global__ void scale_batched<float>(int, float, float**);
template __global__ void scale_batched<double>(int, double, double**);
