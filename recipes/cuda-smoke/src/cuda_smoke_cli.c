/* cuda-smoke CLI: launches the library's kernel and prints the checked result.
 *
 * Exit codes: 0 kernel ran and its result is right (or no GPU with --allow-no-gpu),
 * 1 wrong result or CUDA error, 2 no GPU (without --allow-no-gpu), 64 bad usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_smoke.h"

int main(int argc, char **argv) {
    int allow_no_gpu = 0, n = 1 << 20;
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--allow-no-gpu") == 0) {
            allow_no_gpu = 1;
        } else if (strcmp(argv[i], "--build-info") == 0) {
            printf("cuda-smoke built with CUDA %s for archs %s\n", cuda_smoke_cuda_version(), cuda_smoke_archs());
            return 0;
        } else if (argv[i][0] != '-' && atoi(argv[i]) > 0) {
            n = atoi(argv[i]);
        } else {
            fprintf(stderr, "usage: cuda-smoke [--allow-no-gpu] [--build-info] [N]\n");
            return 64;
        }
    }
    cuda_smoke_result r;
    int code = cuda_smoke_run(n, &r);
    switch (code) {
    case CUDA_SMOKE_OK:
        printf("cuda-smoke: OK saxpy on %d elements on %s (sm_%d): checksum %.1f (expected %.1f)\n", r.n, r.device,
               r.sm, r.checksum, r.expected);
        return 0;
    case CUDA_SMOKE_NO_GPU:
        printf("cuda-smoke: no GPU available (%s); built for archs %s with CUDA %s\n", r.message, cuda_smoke_archs(),
               cuda_smoke_cuda_version());
        return allow_no_gpu ? 0 : 2;
    default:
        fprintf(stderr, "cuda-smoke: FAILED on %s (sm_%d): %s\n", r.device, r.sm, r.message);
        return 1;
    }
}
