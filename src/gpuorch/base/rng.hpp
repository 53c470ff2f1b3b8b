#pragma once
// One seeded random stream per experiment. The bounded draw is written out (rejection sampling)
// rather than taken from std::uniform_int_distribution so a seed gives the same run with any
// standard library.
#include <cstdint>
#include <random>
#include <span>
#include <utility>

namespace gpuorch::base {

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : engine_(seed) {}

  // Uniform in [0, n); n > 0.
  std::uint64_t below(std::uint64_t n) {
    const std::uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    std::uint64_t x = engine_();
    while (x >= limit) x = engine_();
    return x % n;
  }

  // Fisher-Yates: a uniformly random permutation.
  template <typename T>
  void shuffle(std::span<T> items) {
    for (std::size_t i = items.size(); i > 1; --i) {
      std::swap(items[i - 1], items[below(i)]);
    }
  }

 private:
  std::mt19937_64 engine_;
};

}  // namespace gpuorch::base
