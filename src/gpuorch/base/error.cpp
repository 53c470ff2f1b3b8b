#include "gpuorch/base/error.hpp"

#include <fmt/format.h>

namespace gpuorch::base {

void fail_input(const std::string& file, std::size_t line, const std::string& problem) {
  if (line == 0) throw InputError(fmt::format("{}: {}", file, problem));
  throw InputError(fmt::format("{}:{}: {}", file, line, problem));
}

void fail_input(const std::string& problem) { throw InputError(problem); }

}  // namespace gpuorch::base
