// One kernel of the stand-in core (each file instantiates its own templates).
#include "core.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <string>
#include <vector>

namespace {
template <typename T, int K>
T kernel(std::size_t n) {
  std::vector<T> v(n);
  std::iota(v.begin(), v.end(), T(K));
  std::map<std::string, T> m;
  for (std::size_t i = 0; i < n; ++i) m[std::to_string(i % 17)] += v[i];
  return std::accumulate(m.begin(), m.end(), T(0), [](T a, const auto& kv) { return a + kv.second; });
}
}  // namespace

double kernel_2(std::size_t n) {
  return kernel<double, 2>(n) + kernel<float, 2 + 1>(n) + kernel<long, 2 + 2>(n);
}
