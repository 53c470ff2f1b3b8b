#pragma once
// The one strict reader of YAML files (the inventory, the device-plugin config, kubeconfigs, the
// kubelet's config): every refusal is a base::InputError "file:line: what", never yaml-cpp's own
// exception text, and every kept value is checked for control characters. The readers build their
// own schema on these few checks, so each kind of mistake reads the same in every file.
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <vector>

namespace gpuorch::base {

class YamlReader {
 public:
  explicit YamlReader(std::string file) : file_(std::move(file)) {}

  [[nodiscard]] const std::string& file() const { return file_; }

  // Parses `text`; binary content (a NUL byte) and YAML syntax errors are refused with their line.
  [[nodiscard]] YAML::Node load(const std::string& text) const;
  // Every document of a stream separated by `---` (Kubernetes manifests), refused as load().
  [[nodiscard]] std::vector<YAML::Node> load_all(const std::string& text) const;

  // 1-based line of a node, 0 when yaml-cpp has none (a node made up, not read).
  static std::size_t line_of(const YAML::Node& n);
  [[noreturn]] void fail(const YAML::Node& at, const std::string& what) const;

  // `map` must be a mapping whose keys are names (scalars without control characters), each one
  // of `known`; `where` names the mapping in messages ("the config", "a node template").
  void only_keys(const YAML::Node& map, const std::string& where,
                 const std::set<std::string>& known) const;
  // A mapping whose keys and values are all names (labels, annotations).
  [[nodiscard]] std::vector<std::pair<std::string, std::string>> string_map(
      const YAML::Node& map, const std::string& what) const;

  // A single value (not a list or a mapping) without control characters.
  [[nodiscard]] std::string scalar(const YAML::Node& n, const std::string& what) const;
  // true/false as YAML 1.2 and Go's decoder spell them (true, True, TRUE, false, ...).
  [[nodiscard]] bool boolean(const YAML::Node& n, const std::string& what) const;
  // A whole number in [lo, hi] written in decimal (no 1e3, no 0x10, no 1.0).
  [[nodiscard]] std::int64_t integer(
      const YAML::Node& n, const std::string& what,
      std::int64_t lo = std::numeric_limits<std::int64_t>::min(),
      std::int64_t hi = std::numeric_limits<std::int64_t>::max()) const;
  // A single value or a list of single values.
  [[nodiscard]] std::vector<std::string> strings(const YAML::Node& n,
                                                 const std::string& what) const;

 private:
  std::string file_;
};

}  // namespace gpuorch::base
