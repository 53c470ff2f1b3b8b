#pragma once
// Helpers shared by the tests: hand-made nodes and pods, temporary folders, fixture and openb
// paths, running the CLI binary, and catching the one-line input errors.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "gpuorch/base/error.hpp"
#include "gpuorch/cluster/cluster.hpp"
#include "gpuorch/cluster/node_spec.hpp"
#include "gpuorch/workload/pod_spec.hpp"
#include "support/paths.hpp"

namespace gpuorch::test {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

// A gtest parameter name from a policy name ("gpu-packing" -> "gpu_packing").
inline std::string param_name(const ::testing::TestParamInfo<std::string>& param) {
  std::string name = param.param;
  for (char& c : name) {
    if (c == '-' || c == ':' || c == '=' || c == '.') c = '_';
  }
  return name;
}

inline constexpr std::int64_t kMemory = 1 << 20;  // MiB; more than any test pod asks for

inline cluster::NodeSpec gpu_node(std::string name, std::int64_t cpu_milli, int gpus,
                                  std::string model = "G2", std::int64_t memory_mib = kMemory) {
  cluster::NodeSpec n;
  n.name = std::move(name);
  n.cpu_milli = cpu_milli;
  n.memory_mib = memory_mib;
  n.gpu_count = gpus;
  n.gpu_model = gpus > 0 ? std::move(model) : std::string();
  return n;
}

inline workload::PodSpec pod(std::string name, std::int64_t cpu_milli, int gpus,
                             std::int64_t gpu_milli, std::int64_t memory_mib = 0,
                             std::vector<std::string> models = {}) {
  workload::PodSpec p;
  p.name = std::move(name);
  p.cpu_milli = cpu_milli;
  p.memory_mib = memory_mib;
  p.gpu_count = gpus;
  p.gpu_milli = gpu_milli;
  p.allowed_models = std::move(models);
  return p;
}

inline cluster::Placement placement(cluster::NodeIndex node, std::int64_t cpu_milli,
                                    std::int64_t gpu_milli, std::vector<int> gpus,
                                    std::int64_t memory_mib = 0) {
  cluster::Placement p;
  p.node = node;
  p.cpu_milli = cpu_milli;
  p.memory_mib = memory_mib;
  p.gpu_milli = gpu_milli;
  p.gpus = std::move(gpus);
  return p;
}

inline std::vector<std::int32_t> gpu_left(const cluster::Cluster& c, cluster::NodeIndex n) {
  const auto left = c.gpu_milli_left(n);
  return {left.begin(), left.end()};
}

// A fresh folder under the system temp dir, removed with everything in it at scope exit.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "gpuorch-test-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  [[nodiscard]] const std::filesystem::path& path() const { return path_; }
  [[nodiscard]] std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

inline void write_text(const std::string& path, const std::string& text) {
  // A new file rather than a truncated one: ext4 flushes a file rewritten after truncation on
  // close, which makes thousands of rewrites (the mutation tests) crawl.
  std::error_code ec;
  std::filesystem::remove(path, ec);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path);
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

inline std::string fixture(const std::string& name) {
  return (std::filesystem::path(::gpuorch::test::fixtures_dir()) / name).string();
}

// ../shared/openb, or nothing when this checkout has no copy of the study's data.
inline std::optional<std::filesystem::path> openb_dir() {
  const std::filesystem::path dir = std::filesystem::path(::gpuorch::test::shared_dir()) / "openb";
  if (!std::filesystem::is_directory(dir)) return std::nullopt;
  return dir;
}

#define GPUORCH_REQUIRE_OPENB(dir_var)                                             \
  const auto dir_var##_opt = ::gpuorch::test::openb_dir();                         \
  if (!dir_var##_opt) {                                                            \
    GTEST_SKIP() << "../shared/openb is absent (" << ::gpuorch::test::shared_dir() \
                 << "/openb): the FGD study's data is not in this checkout";       \
  }                                                                                \
  const std::filesystem::path dir_var = *dir_var##_opt

// Runs `f`, which must throw base::InputError; returns its message ("" and a failure otherwise).
inline std::string input_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const base::InputError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected base::InputError, got another exception: " << e.what();
    return {};
  }
  ADD_FAILURE() << "expected base::InputError, nothing was thrown";
  return {};
}

// Sets (or unsets, with nullopt) an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(std::string name, const std::optional<std::string>& value) : name_(std::move(name)) {
    if (const char* old = std::getenv(name_.c_str())) old_ = old;
    if (value) {
      ::setenv(name_.c_str(), value->c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_.c_str(), old_->c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

struct CommandResult {
  int exit_code = -1;  // 128 + signal when killed by a signal
  std::string out;
  std::string err;
};

inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (const char c : s) {
    if (c == '\'') {
      q += "'\\''";
    } else {
      q.push_back(c);
    }
  }
  q += "'";
  return q;
}

// Runs `argv` (a program and its arguments, no shell); stdout and stderr are captured through
// files in `dir`.
inline CommandResult run_command(const std::vector<std::string>& argv, const TempDir& dir,
                                 const std::string& tag = "cmd") {
  std::string command;
  for (const auto& a : argv) {
    if (!command.empty()) command += ' ';
    command += shell_quote(a);
  }
  const std::string out = dir.file(tag + ".stdout");
  const std::string err = dir.file(tag + ".stderr");
  command += " >";
  command += shell_quote(out);
  command += " 2>";
  command += shell_quote(err);
  command += " </dev/null";
  const int status = std::system(command.c_str());
  CommandResult r;
  if (status != -1 && WIFEXITED(status)) {
    r.exit_code = WEXITSTATUS(status);
  } else if (status != -1 && WIFSIGNALED(status)) {
    r.exit_code = 128 + WTERMSIG(status);
  }
  r.out = read_text(out);
  r.err = read_text(err);
  std::filesystem::remove(out);
  std::filesystem::remove(err);
  return r;
}

// Runs the gpuorch binary with `args`, as run_command.
inline CommandResult run_cli(const std::vector<std::string>& args, const TempDir& dir,
                             const std::string& tag = "cli") {
  std::vector<std::string> argv{::gpuorch::test::binary_path()};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_command(argv, dir, tag);
}

inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace gpuorch::test
