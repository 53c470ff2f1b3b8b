#pragma once
// What discovery could not read. Each problem is kept once ("path: problem"), however many
// readers trip over the same file, so bad input is reported once and then skipped.
#include <mutex>
#include <string>
#include <vector>

namespace gpuorch::discover {

class Diagnostics {
 public:
  void problem(const std::string& path, const std::string& what);
  [[nodiscard]] std::vector<std::string> problems() const;

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> problems_;
};

}  // namespace gpuorch::discover
