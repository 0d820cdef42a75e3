#include <torch/torch.h>

#include <numeric>
#include <stdexcept>
#include <utility>

namespace torch {
Tensor::Tensor(std::vector<float> values) : values_(std::move(values)) {}

Tensor Tensor::sum() const {
  return Tensor({std::accumulate(values_.begin(), values_.end(), 0.0f)});
}

float Tensor::first() const {
  if (values_.size() != 1) throw std::runtime_error("item() needs a one-element tensor");
  return values_.front();
}

Tensor ones(std::initializer_list<int64_t> sizes) {
  return Tensor(std::vector<float>(static_cast<size_t>(c10::numel(sizes)), 1.0f));
}

const char* version() { return TORCH_VERSION_STRING; }
}  // namespace torch
