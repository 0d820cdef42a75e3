// Stand-in for PyTorch's c10 core library: shapes and export macros.
#pragma once

#include <cstdint>
#include <initializer_list>

#define C10_API __attribute__((visibility("default")))
#define TORCH_API __attribute__((visibility("default")))

namespace c10 {
// Number of elements of a tensor with these sizes.
C10_API int64_t numel(std::initializer_list<int64_t> sizes);
}  // namespace c10
