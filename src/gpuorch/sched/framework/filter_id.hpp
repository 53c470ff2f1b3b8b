#pragma once
// Which filter rejected a node: a small id into the filter registry
// (sched/framework/filter_registry.hpp), kFits when the node passes them all. Dense and one byte,
// so per-node verdicts and per-filter counts stay plain arrays on the hot path.
#include <array>
#include <cstddef>
#include <cstdint>
#include <iosfwd>

namespace gpuorch::sched {

enum class FilterId : std::uint8_t {};
inline constexpr FilterId kFits{0};

// Room for the built-in filters and those registered beyond them: a fixed bound keeps the counts
// an array that copies without allocating (the score index keeps one per request).
inline constexpr std::size_t kMaxFilters = 32;
using FilterCounts = std::array<std::uint32_t, kMaxFilters>;

[[nodiscard]] constexpr std::size_t filter_index(FilterId id) {
  return static_cast<std::size_t>(id);
}

// The filter's name, so that a failed test says "gpu-count", not a byte.
std::ostream& operator<<(std::ostream& os, FilterId id);

}  // namespace gpuorch::sched
