#include "gpuorch/discover/diagnostics.hpp"

#include <algorithm>

namespace gpuorch::discover {

void Diagnostics::problem(const std::string& path, const std::string& what) {
  const std::lock_guard lock(mutex_);
  // One line per file: a second complaint about the same path adds nothing for the reader.
  const std::string prefix = path + ": ";
  for (const auto& p : problems_) {
    if (p.rfind(prefix, 0) == 0) return;
  }
  problems_.push_back(prefix + what);
}

std::vector<std::string> Diagnostics::problems() const {
  const std::lock_guard lock(mutex_);
  return problems_;
}

}  // namespace gpuorch::discover
