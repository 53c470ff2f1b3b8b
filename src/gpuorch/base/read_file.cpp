#include "gpuorch/base/read_file.hpp"

#include <fstream>
#include <sstream>

#include "gpuorch/base/error.hpp"

namespace gpuorch::base {

std::string read_input_file(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_input(path + ": cannot read the " + what);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace gpuorch::base
