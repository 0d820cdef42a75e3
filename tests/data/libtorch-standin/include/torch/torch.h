// Stand-in for <torch/torch.h>: the few calls the libtorch package test makes.
#pragma once

#include <c10/c10.h>

#include <initializer_list>
#include <vector>

namespace torch {

class TORCH_API Tensor {
 public:
  explicit Tensor(std::vector<float> values);
  Tensor sum() const;
  template <typename T>
  T item() const {
    return static_cast<T>(first());
  }

 private:
  float first() const;
  std::vector<float> values_;
};

TORCH_API Tensor ones(std::initializer_list<int64_t> sizes);
TORCH_API const char* version();

}  // namespace torch
