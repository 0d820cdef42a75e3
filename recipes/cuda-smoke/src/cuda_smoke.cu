// cuda-smoke library: a saxpy kernel whose result is checked against the host.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "cuda_smoke.h"

#ifndef CUDA_SMOKE_ARCHS
#define CUDA_SMOKE_ARCHS "unknown"
#endif
#ifndef CUDA_SMOKE_CUDA
#define CUDA_SMOKE_CUDA "unknown"
#endif

__global__ void saxpy(int n, float a, const float *x, float *y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

static int fail(cuda_smoke_result *out, int code, const char *what, cudaError_t err) {
    std::snprintf(out->message, sizeof out->message, "%s: %s", what, cudaGetErrorString(err));
    return code;
}

extern "C" int cuda_smoke_run(int n, cuda_smoke_result *out) {
    std::memset(out, 0, sizeof *out);
    out->n = n;
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
        return fail(out, CUDA_SMOKE_NO_GPU, "cudaGetDeviceCount", err == cudaSuccess ? cudaErrorNoDevice : err);
    }
    cudaDeviceProp prop;
    if ((err = cudaGetDeviceProperties(&prop, 0)) != cudaSuccess) return fail(out, CUDA_SMOKE_CUDA_ERROR, "cudaGetDeviceProperties", err);
    std::snprintf(out->device, sizeof out->device, "%s", prop.name);
    out->sm = prop.major * 10 + prop.minor;

    std::vector<float> x(n), y(n);
    for (int i = 0; i < n; ++i) {
        x[i] = static_cast<float>(i % 100);
        y[i] = 1.0f;
    }
    float *dx = nullptr, *dy = nullptr;
    size_t bytes = sizeof(float) * static_cast<size_t>(n);
    if ((err = cudaMalloc(&dx, bytes)) != cudaSuccess) return fail(out, CUDA_SMOKE_CUDA_ERROR, "cudaMalloc", err);
    if ((err = cudaMalloc(&dy, bytes)) != cudaSuccess) return fail(out, CUDA_SMOKE_CUDA_ERROR, "cudaMalloc", err);
    cudaMemcpy(dx, x.data(), bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(dy, y.data(), bytes, cudaMemcpyHostToDevice);
    saxpy<<<(n + 255) / 256, 256>>>(n, 2.0f, dx, dy);
    err = cudaGetLastError();  // "no kernel image is available" when the arch list misses this GPU
    if (err == cudaSuccess) err = cudaDeviceSynchronize();
    if (err == cudaSuccess) err = cudaMemcpy(y.data(), dy, bytes, cudaMemcpyDeviceToHost);
    cudaFree(dx);
    cudaFree(dy);
    if (err != cudaSuccess) return fail(out, CUDA_SMOKE_CUDA_ERROR, "saxpy kernel", err);

    double sum = 0.0, expected = 0.0;
    for (int i = 0; i < n; ++i) {
        sum += y[i];
        expected += 2.0 * static_cast<double>(i % 100) + 1.0;
    }
    out->checksum = sum;
    out->expected = expected;
    if (std::fabs(sum - expected) > 1e-6 * expected) {
        std::snprintf(out->message, sizeof out->message, "checksum %.1f != expected %.1f", sum, expected);
        return CUDA_SMOKE_WRONG_RESULT;
    }
    return CUDA_SMOKE_OK;
}

extern "C" const char *cuda_smoke_archs(void) { return CUDA_SMOKE_ARCHS; }
extern "C" const char *cuda_smoke_cuda_version(void) { return CUDA_SMOKE_CUDA; }
