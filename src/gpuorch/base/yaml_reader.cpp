#include "gpuorch/base/yaml_reader.hpp"

#include <fmt/format.h>

#include <charconv>

#include "gpuorch/base/error.hpp"
#include "gpuorch/base/printable.hpp"
#include "gpuorch/base/text_check.hpp"

namespace gpuorch::base {

namespace {

// yaml-cpp's parse, with binary content and syntax errors refused as "file:line: what".
template <typename Parse>
auto parse_yaml(const std::string& file, const std::string& text, Parse parse) {
  if (text.find('\0') != std::string::npos)
    fail_input(file, 0, "not a YAML text file (binary content)");
  try {
    return parse(text);
  } catch (const YAML::Exception& e) {
    fail_input(file, e.mark.line >= 0 ? static_cast<std::size_t>(e.mark.line) + 1 : 0,
               "not valid YAML: " + (e.msg.empty() ? std::string("a syntax error") : e.msg));
  }
}

}  // namespace

YAML::Node YamlReader::load(const std::string& text) const {
  return parse_yaml(file_, text, [](const std::string& t) { return YAML::Load(t); });
}

std::vector<YAML::Node> YamlReader::load_all(const std::string& text) const {
  return parse_yaml(file_, text, [](const std::string& t) { return YAML::LoadAll(t); });
}

std::size_t YamlReader::line_of(const YAML::Node& n) {
  const auto m = n.Mark();
  return m.line >= 0 ? static_cast<std::size_t>(m.line) + 1 : 0;
}

void YamlReader::fail(const YAML::Node& at, const std::string& what) const {
  fail_input(file_, line_of(at), what);
}

void YamlReader::only_keys(const YAML::Node& map, const std::string& where,
                           const std::set<std::string>& known) const {
  if (!map.IsMap()) fail(map, fmt::format("{} must be a mapping", where));
  for (const auto& kv : map) {
    if (!kv.first.IsScalar()) fail(kv.first, fmt::format("a key in {} must be a name", where));
    const std::string key = kv.first.Scalar();
    require_no_control(key, file_, line_of(kv.first), fmt::format("a key in {}", where));
    if (!known.contains(key)) {
      fail(kv.first, fmt::format("unknown key '{}' in {} (known: {})", printable(key), where,
                                 fmt::join(known, ", ")));
    }
  }
}

std::vector<std::pair<std::string, std::string>> YamlReader::string_map(
    const YAML::Node& map, const std::string& what) const {
  if (!map.IsMap()) fail(map, fmt::format("{} must be a mapping", what));
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& kv : map) {
    std::string key = scalar(kv.first, fmt::format("a key in {}", what));
    std::string value = scalar(kv.second, fmt::format("the value of '{}' in {}", key, what));
    out.emplace_back(std::move(key), std::move(value));
  }
  return out;
}

std::string YamlReader::scalar(const YAML::Node& n, const std::string& what) const {
  if (!n.IsScalar()) fail(n, fmt::format("{} must be a single value", what));
  require_no_control(n.Scalar(), file_, line_of(n), what);
  return n.Scalar();
}

bool YamlReader::boolean(const YAML::Node& n, const std::string& what) const {
  const std::string s = scalar(n, what);
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  fail(n, fmt::format("{} must be true or false, not '{}'", what, printable(s)));
}

std::int64_t YamlReader::integer(const YAML::Node& n, const std::string& what, std::int64_t lo,
                                 std::int64_t hi) const {
  const std::string s = scalar(n, what);
  std::int64_t v = 0;
  const char* end = s.data() + s.size();
  const char* start = s.data() + (s.starts_with('+') ? 1 : 0);
  const auto [ptr, ec] = std::from_chars(start, end, v);
  if (s.empty() || ptr != end || ec == std::errc::invalid_argument) {
    fail(n, fmt::format("{} must be a whole number, not '{}'", what, printable(s)));
  }
  if (ec == std::errc::result_out_of_range || v < lo || v > hi) {
    fail(n, fmt::format("{} is {}, outside {}..{}", what, printable(s), lo, hi));
  }
  return v;
}

std::vector<std::string> YamlReader::strings(const YAML::Node& n, const std::string& what) const {
  std::vector<std::string> out;
  if (n.IsSequence()) {
    for (const auto& item : n) out.push_back(scalar(item, what));
  } else {
    out.push_back(scalar(n, what));
  }
  return out;
}

}  // namespace gpuorch::base
