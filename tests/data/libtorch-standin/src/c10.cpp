#include <c10/c10.h>

namespace c10 {
int64_t numel(std::initializer_list<int64_t> sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}
}  // namespace c10
