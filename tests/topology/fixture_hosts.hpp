#pragma once
// Shared by the topology/discover/telemetry tests: the recorded fixture hosts and golden files.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gpuorch/discover/discover.hpp"
#include "support/paths.hpp"

namespace gpuorch::testing {

inline std::filesystem::path topo_fixture(const std::string& host) {
  return std::filesystem::path(::gpuorch::test::fixtures_dir()) / "topo" / host;
}

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Compares with tests/fixtures/topo/<host>/expected/<name>; GPUORCH_UPDATE_GOLDEN=1 rewrites it.
inline std::string golden(const std::string& host, const std::string& name,
                          const std::string& actual) {
  const auto path = topo_fixture(host) / "expected" / name;
  if (const char* u = std::getenv("GPUORCH_UPDATE_GOLDEN"); u && std::string(u) == "1") {
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << actual;
  }
  return read_text(path);
}

// A private copy of a fixture (symlinks kept) that a test may damage.
class TreeCopy {
 public:
  explicit TreeCopy(const std::string& host, const std::string& tag = "copy") {
    namespace fs = std::filesystem;
    dir_ = fs::temp_directory_path() /
           ("gpuorch-" + host + "-" + tag + "-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::copy(topo_fixture(host), dir_,
             fs::copy_options::recursive | fs::copy_options::copy_symlinks);
    fs::remove_all(dir_ / "expected");
  }
  ~TreeCopy() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  TreeCopy(const TreeCopy&) = delete;
  TreeCopy& operator=(const TreeCopy&) = delete;
  [[nodiscard]] const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
};

inline discover::Discovery discover_fixture(const std::filesystem::path& root, bool nvml = true) {
  discover::Options o;
  o.root = root.string();
  o.use_nvml = nvml;
  return discover::discover_host(o);
}

}  // namespace gpuorch::testing
