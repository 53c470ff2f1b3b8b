#pragma once
// The host backend's element-wise work on typed buffers: the reductions Gloo calls back, filling
// inputs with input_value and counting outputs that differ from expected_value. Signed integers
// wrap around: timed in-place iterations keep reducing their own output, which overflows, and that
// must not be undefined behaviour.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <type_traits>

#include "gpuorch/comm/bench.hpp"

namespace gpuorch::comm::host {

enum class Reduction { sum, prod, max, min };
// avg is a sum followed by a division on every rank (Gloo has no average).
Reduction reduction_of(const RedOp& op);

// IEEE binary16, converted here: Gloo's own float16 helpers read a float through an unsigned
// pointer (a strict-aliasing violation that GCC -O3 miscompiles: seen as wrong #wrong counts).
struct Half {
  std::uint16_t bits = 0;
};
float half_to_float(Half h);
Half float_to_half(float f);  // round to nearest even

template <typename T>
double to_double(T v) {
  if constexpr (std::is_same_v<T, Half>) {
    return static_cast<double>(half_to_float(v));
  } else {
    return static_cast<double>(v);
  }
}
template <typename T>
T from_double(double v) {
  if constexpr (std::is_same_v<T, Half>) {
    return float_to_half(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

template <typename T, Reduction K>
T combine(T a, T b) {
  if constexpr (std::is_same_v<T, Half>) {
    return float_to_half(combine<float, K>(half_to_float(a), half_to_float(b)));
  } else if constexpr (K == Reduction::max) {
    return std::max(a, b);
  } else if constexpr (K == Reduction::min) {
    return std::min(a, b);
  } else if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    const U x = static_cast<U>(a), y = static_cast<U>(b);
    return static_cast<T>(K == Reduction::sum ? static_cast<U>(x + y) : static_cast<U>(x * y));
  } else {
    return K == Reduction::sum ? a + b : a * b;
  }
}

// Gloo's collectives: c[i] = a[i] op b[i] (c may be a).
template <typename T, Reduction K>
void reduce3(void* c, const void* a, const void* b, std::size_t n) {
  auto* out = static_cast<T*>(c);
  const auto* x = static_cast<const T*>(a);
  const auto* y = static_cast<const T*>(b);
  for (std::size_t i = 0; i < n; ++i) out[i] = combine<T, K>(x[i], y[i]);
}
// Gloo's older algorithm classes (reduce-scatter): a[i] = a[i] op b[i].
template <typename T, Reduction K>
void reduce2(T* a, const T* b, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) a[i] = combine<T, K>(a[i], b[i]);
}

// Calls f(T{}) with the C++ type of `type` (Half for half).
template <typename F>
void visit_type(const DataType& type, F&& f) {
  switch (type.nccl) {
    case 0:
      return f(std::int8_t{});
    case 1:
      return f(std::uint8_t{});
    case 2:
      return f(std::int32_t{});
    case 3:
      return f(std::uint32_t{});
    case 4:
      return f(std::int64_t{});
    case 5:
      return f(std::uint64_t{});
    case 6:
      return f(Half{});
    case 7:
      return f(float{});
    default:
      return f(double{});
  }
}

// bench.hpp's types plus half (float16), reduced through float.
std::optional<DataType> parse_type(std::string_view name);

void fill_input(const Options& o, int rank, void* buf, std::size_t n);
long long count_wrong(const Options& o, int nranks, int rank, std::size_t count, const void* buf,
                      std::size_t n);
// avg: out[i] /= nranks.
void divide(const DataType& t, void* buf, std::size_t n, int nranks);
// Overwrites element `index` with a value no check accepts (the planted error of the tests).
void plant_wrong(const DataType& t, void* buf, std::size_t index);

}  // namespace gpuorch::comm::host
