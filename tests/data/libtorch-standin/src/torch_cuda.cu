// Stand-in for libtorch_cuda: one kernel, compiled for the archs of TORCH_CUDA_ARCH_LIST.
#include <torch/torch.h>
#ifdef STANDIN_USE_MAGMA
extern "C" int magma_init();  // magma_v2.h
#endif

namespace {
__global__ void fill(float* out, float value, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = value;
}
}  // namespace

namespace torch {
namespace cuda {
TORCH_API int device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return 0;
  return count;
}
TORCH_API void* fill_kernel() { return reinterpret_cast<void*>(&fill); }
#ifdef STANDIN_USE_MAGMA
TORCH_API bool magma_ready() { return magma_init() == 0; }  // pulls magma's object in, as linalg does
#endif
}  // namespace cuda
}  // namespace torch
