#pragma once
// A whole number read from text, checked: in range or nothing, never an exception. std::stoi
// throws on "99999999999999999999" (one such number in an NCCL log ended `doctor` with "error:
// stoi"); a reader that can say where the number was uses this and reports or skips the line.
#include <charconv>
#include <limits>
#include <optional>
#include <string_view>

namespace gpuorch::base {

// `text` as a decimal number in [lo, hi] (a leading '-' only for signed T; no '+', no spaces,
// nothing after the digits), or nullopt.
template <typename T>
std::optional<T> whole_number(std::string_view text, T lo = std::numeric_limits<T>::min(),
                              T hi = std::numeric_limits<T>::max()) {
  T value{};
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || value < lo || value > hi) {
    return std::nullopt;
  }
  return value;
}

}  // namespace gpuorch::base
