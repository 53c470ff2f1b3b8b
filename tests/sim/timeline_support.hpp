#pragma once
// The Pollux artifact's data for the timeline tests; the tests skip when it is absent.
#include <filesystem>
#include <optional>

#include "support/paths.hpp"

namespace gpuorch::test {

inline std::optional<std::filesystem::path> pollux_dir() {
  const auto dir =
      std::filesystem::path(::gpuorch::test::shared_dir()) / "traces" / "pollux_philly";
  if (!std::filesystem::is_directory(dir / "apps")) return std::nullopt;
  return dir;
}

}  // namespace gpuorch::test

#define GPUORCH_REQUIRE_POLLUX(dir_var)                                                \
  const auto dir_var##_opt = ::gpuorch::test::pollux_dir();                            \
  if (!dir_var##_opt) {                                                                \
    GTEST_SKIP() << "../shared/traces/pollux_philly is absent: the Pollux artifact's " \
                    "profiles are not in this checkout";                               \
  }                                                                                    \
  const std::filesystem::path dir_var = *dir_var##_opt
