/* cuda-smoke: one CUDA kernel behind a plain C API, to prove a CUDA toolchain end to end. */
#ifndef CUDA_SMOKE_H
#define CUDA_SMOKE_H

#ifdef __cplusplus
extern "C" {
#endif

/* Result codes of cuda_smoke_run. */
enum { CUDA_SMOKE_OK = 0, CUDA_SMOKE_NO_GPU = 1, CUDA_SMOKE_CUDA_ERROR = 2, CUDA_SMOKE_WRONG_RESULT = 3 };

typedef struct {
    int n;                 /* elements processed */
    double checksum;       /* sum of y after y = a*x + y, computed on the GPU */
    double expected;       /* the same sum computed on the host */
    char device[256];      /* GPU name, or "" */
    int sm;                /* compute capability of the GPU, e.g. 90 */
    char message[512];     /* error text when the result is not CUDA_SMOKE_OK */
} cuda_smoke_result;

/* Runs saxpy on n elements on GPU 0 and checks the result against the host. */
int cuda_smoke_run(int n, cuda_smoke_result *out);

/* The arch list and CUDA version this library was compiled for (e.g. "8.0;9.0+PTX", "13.0"). */
const char *cuda_smoke_archs(void);
const char *cuda_smoke_cuda_version(void);

#ifdef __cplusplus
}
#endif
#endif
