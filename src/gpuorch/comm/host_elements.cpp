#include "gpuorch/comm/host_elements.hpp"

#include <bit>
#include <cmath>

#include "gpuorch/comm/expected.hpp"

namespace gpuorch::comm::host {

float half_to_float(Half h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h.bits & 0x8000u) << 16;
  const std::uint32_t exponent = (h.bits >> 10) & 0x1fu;
  const std::uint32_t mantissa = h.bits & 0x3ffu;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {  // zero or subnormal: mantissa x 2^-24
    const float v = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -v : v;
  }
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

Half float_to_half(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t u = x & 0x7fffffffu;
  if (u > 0x7f800000u) return {static_cast<std::uint16_t>(sign | 0x7e00u)};   // NaN
  if (u >= 0x477ff000u) return {static_cast<std::uint16_t>(sign | 0x7c00u)};  // >= 65520: inf
  if (u <= 0x33000000u) return {sign};  // <= 2^-25: rounds to zero
  std::uint32_t exponent = u >> 23;
  std::uint32_t mantissa = u & 0x7fffffu;
  std::uint32_t shift = 13;
  if (exponent > 112) {
    exponent -= 112;
  } else {  // subnormal in half
    shift = 126 - exponent;
    exponent = 0;
    mantissa |= 0x800000u;
  }
  const std::uint32_t half_ulp = 1u << (shift - 1);
  const std::uint32_t rest = mantissa & ((1u << shift) - 1);
  std::uint32_t bits = (exponent << 10) + (mantissa >> shift);
  if (rest > half_ulp || (rest == half_ulp && (bits & 1u))) ++bits;  // may carry into exponent
  return {static_cast<std::uint16_t>(sign | bits)};
}

Reduction reduction_of(const RedOp& op) {
  if (op.name == "prod") return Reduction::prod;
  if (op.name == "max") return Reduction::max;
  if (op.name == "min") return Reduction::min;
  return Reduction::sum;
}

std::optional<DataType> parse_type(std::string_view name) {
  if (name == "half" || name == "float16") return DataType{"half", 6, 2, true};
  return comm::parse_type(name);
}

void fill_input(const Options& o, int rank, void* buf, std::size_t n) {
  visit_type(o.type, [&]<typename T>(T) {
    auto* p = static_cast<T*>(buf);
    for (std::size_t i = 0; i < n; ++i) p[i] = from_double<T>(input_value(o, rank, i));
  });
}

long long count_wrong(const Options& o, int nranks, int rank, std::size_t count, const void* buf,
                      std::size_t n) {
  long long wrong = 0;
  visit_type(o.type, [&]<typename T>(T) {
    const auto* p = static_cast<const T*>(buf);
    for (std::size_t i = 0; i < n; ++i) {
      const T want = from_double<T>(expected_value(o, nranks, rank, count, i));
      if (to_double(p[i]) != to_double(want)) ++wrong;
    }
  });
  return wrong;
}

void divide(const DataType& t, void* buf, std::size_t n, int nranks) {
  visit_type(t, [&]<typename T>(T) {
    auto* p = static_cast<T*>(buf);
    for (std::size_t i = 0; i < n; ++i) p[i] = from_double<T>(to_double(p[i]) / nranks);
  });
}

void plant_wrong(const DataType& t, void* buf, std::size_t index) {
  visit_type(t, [&]<typename T>(T) {
    auto* p = static_cast<T*>(buf) + index;
    *p = from_double<T>(to_double(*p) == 99 ? 98 : 99);  // anything but what was there
  });
}

}  // namespace gpuorch::comm::host
