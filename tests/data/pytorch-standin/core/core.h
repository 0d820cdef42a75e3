// Stand-in for libtorch's C++ core: a few template-heavy kernels.
#pragma once

#include <cstddef>

namespace standin {
double reduce_kernel(std::size_t which, std::size_t n);
}  // namespace standin
