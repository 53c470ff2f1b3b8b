#include "gpuorch/k8s/api/server_json.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace gpuorch::k8s {
namespace {

// The deepest nesting of arrays and objects, brackets inside strings skipped.
bool deeper_than(std::string_view text, int limit) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

}  // namespace

nlohmann::json parse_server_json(std::string_view text, const std::string& what) {
  if (deeper_than(text, kMaxJsonDepth)) {
    throw std::runtime_error(
        fmt::format("{}: the server sent JSON nested deeper than {} levels", what, kMaxJsonDepth));
  }
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    // nlohmann's message quotes the offending bytes; keep it short and on one line.
    std::string detail = e.what();
    if (detail.size() > 200) detail = detail.substr(0, 200) + "...";
    for (char& c : detail) {
      if (static_cast<unsigned char>(c) < 0x20) c = ' ';
    }
    throw std::runtime_error(fmt::format("{}: the server sent invalid JSON ({})", what, detail));
  }
}

}  // namespace gpuorch::k8s
