#include "core.h"

double kernel_0(std::size_t);
double kernel_1(std::size_t);
double kernel_2(std::size_t);
double kernel_3(std::size_t);
double kernel_4(std::size_t);
double kernel_5(std::size_t);

namespace standin {
double reduce_kernel(std::size_t which, std::size_t n) {
  double (*kernels[])(std::size_t) = {kernel_0, kernel_1, kernel_2, kernel_3, kernel_4, kernel_5};
  return kernels[which % 6](n);
}
}  // namespace standin
