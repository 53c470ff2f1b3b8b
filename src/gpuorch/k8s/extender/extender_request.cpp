#include "gpuorch/k8s/extender/extender_request.hpp"

#include <algorithm>
#include <cctype>

namespace gpuorch::k8s {
namespace {

constexpr std::size_t kBad = std::string_view::npos;

std::size_t skip_ws(std::string_view s, std::size_t i) {
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) ++i;
  return i;
}

// s[i] is '"': the index after the closing quote, kBad when there is none.
std::size_t end_of_string(std::string_view s, std::size_t i) {
  for (++i; i < s.size(); ++i) {
    if (s[i] == '\\') {
      ++i;
    } else if (s[i] == '"') {
      return i + 1;
    }
  }
  return kBad;
}

// The index after the value that starts at s[i]; only its extent is found (the full parse
// checks the rest of the body).
std::size_t end_of_value(std::string_view s, std::size_t i) {
  if (i >= s.size()) return kBad;
  if (s[i] == '"') return end_of_string(s, i);
  if (s[i] == '[' || s[i] == '{') {
    int depth = 0;
    while (i < s.size()) {
      const char c = s[i];
      if (c == '"') {
        i = end_of_string(s, i);
        if (i == kBad) return kBad;
        continue;
      }
      if (c == '[' || c == '{') ++depth;
      if ((c == ']' || c == '}') && --depth == 0) return i + 1;
      ++i;
    }
    return kBad;
  }
  while (i < s.size() && s[i] != ',' && s[i] != '}' && s[i] != ']' && s[i] != ' ' && s[i] != '\t' &&
         s[i] != '\n' && s[i] != '\r') {
    ++i;
  }
  return i;
}

bool is_node_names(std::string_view key) {
  constexpr std::string_view kKey = "nodenames";
  return key.size() == kKey.size() &&
         std::equal(key.begin(), key.end(), kKey.begin(), [](char a, char b) {
           return std::tolower(static_cast<unsigned char>(a)) == b;
         });
}

// `[ "a", "b" ]` with plain strings only, into views; false for anything else.
bool plain_names(std::string_view array, std::vector<std::string_view>& out) {
  std::size_t i = skip_ws(array, 1);
  if (i < array.size() && array[i] == ']') return true;
  while (i < array.size()) {
    if (array[i] != '"') return false;
    const std::size_t start = ++i;
    while (i < array.size() && array[i] != '"') {
      const auto c = static_cast<unsigned char>(array[i]);
      if (c < 0x20 || c > 0x7e || c == '\\') return false;
      ++i;
    }
    if (i >= array.size()) return false;
    out.push_back(array.substr(start, i - start));
    i = skip_ws(array, i + 1);
    if (i < array.size() && array[i] == ']') return skip_ws(array, i + 1) == array.size();
    if (i >= array.size() || array[i] != ',') return false;
    i = skip_ws(array, i + 1);
  }
  return false;
}

}  // namespace

std::optional<SplitArgs> split_node_names(std::string_view body) {
  std::size_t i = skip_ws(body, 0);
  if (i >= body.size() || body[i] != '{') return std::nullopt;
  i = skip_ws(body, i + 1);
  std::size_t value_start = kBad, value_end = kBad;
  while (i < body.size() && body[i] != '}') {
    if (body[i] != '"') return std::nullopt;
    const std::size_t key_end = end_of_string(body, i);
    if (key_end == kBad) return std::nullopt;
    const std::string_view key = body.substr(i + 1, key_end - i - 2);
    i = skip_ws(body, key_end);
    if (i >= body.size() || body[i] != ':') return std::nullopt;
    i = skip_ws(body, i + 1);
    const std::size_t end = end_of_value(body, i);
    if (end == kBad) return std::nullopt;
    if (is_node_names(key)) {
      if (value_start != kBad) return std::nullopt;  // twice: the full parse decides
      value_start = i;
      value_end = end;
    }
    i = skip_ws(body, end);
    if (i < body.size() && body[i] == ',') i = skip_ws(body, i + 1);
  }
  if (value_start == kBad || body[value_start] != '[') return std::nullopt;
  SplitArgs out;
  if (!plain_names(body.substr(value_start, value_end - value_start), out.names)) {
    return std::nullopt;
  }
  out.rest.reserve(body.size() - (value_end - value_start) + 2);
  out.rest.append(body.substr(0, value_start)).append("[]").append(body.substr(value_end));
  return out;
}

}  // namespace gpuorch::k8s
