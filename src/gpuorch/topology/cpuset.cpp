#include "gpuorch/topology/cpuset.hpp"

#include <algorithm>
#include <charconv>
#include <iterator>

namespace gpuorch::topology {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\n' || s.front() == '\t')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\n' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  return s;
}

std::optional<int> small_int(std::string_view s) {
  int v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size() || v < 0 || v > 1 << 20) {
    return std::nullopt;
  }
  return v;
}

}  // namespace

std::optional<IdSet> parse_id_list(std::string_view text) {
  text = trim(text);
  IdSet out;
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    const std::string_view part = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    const std::size_t dash = part.find('-');
    const auto a = small_int(part.substr(0, dash));
    const auto b = dash == std::string_view::npos ? a : small_int(part.substr(dash + 1));
    // 1 << 20 ids bounds the work a garbled file can cause.
    if (!a || !b || *b < *a || out.size() + static_cast<std::size_t>(*b - *a) > (1u << 20)) {
      return std::nullopt;
    }
    for (int i = *a; i <= *b; ++i) out.push_back(i);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::optional<IdSet> parse_id_mask(std::string_view text) {
  text = trim(text);
  if (text.empty()) return std::nullopt;
  IdSet out;
  int bit = 0;
  for (auto it = text.rbegin(); it != text.rend(); ++it) {
    const char c = *it;
    if (c == ',') continue;
    int nibble = 0;
    if (c >= '0' && c <= '9') {
      nibble = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      nibble = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      nibble = c - 'A' + 10;
    } else {
      return std::nullopt;
    }
    for (int k = 0; k < 4; ++k) {
      if ((nibble >> k) & 1) out.push_back(bit + k);
    }
    bit += 4;
    if (bit > 1 << 20) return std::nullopt;
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string format_id_list(const IdSet& ids) {
  std::string out;
  std::size_t i = 0;
  while (i < ids.size()) {
    std::size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(ids[i]);
    if (j > i) out += '-' + std::to_string(ids[j]);
    i = j + 1;
  }
  return out;
}

IdSet intersect(const IdSet& a, const IdSet& b) {
  IdSet out;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

}  // namespace gpuorch::topology
