// Finding a line's entry fast: a log has up to millions of lines and the catalogue over a thousand
// formats, so each line is tried only against the formats whose fixed start equals its first bytes
// (most NCCL formats start with fixed text: "NET/IB : ...") and the few that start with a
// conversion; each of those is rejected by a substring search before its regex runs.
#include <fmt/format.h>

#include <algorithm>

#include "gpuorch/doctor/nccl_catalogue.hpp"

namespace gpuorch::doctor {
namespace {

constexpr std::size_t kHeadBytes = 4;

bool requirements_hold(const CatalogueEntry& e, const CatalogueFormat& f,
                       const std::vector<std::string>& values) {
  return std::all_of(e.require.begin(), e.require.end(), [&](const auto& r) {
    const auto at = static_cast<std::size_t>(std::find(f.fields.begin(), f.fields.end(), r.first) -
                                             f.fields.begin());
    return at < values.size() && std::regex_match(values[at], r.second);
  });
}

}  // namespace

void Catalogue::index() {
  by_head_.clear();
  unanchored_.clear();
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    const auto& e = entries_[i];
    for (std::size_t f = 0; f < e.formats.size(); ++f) {
      const MessageFormat& m = e.formats[f].format;
      if (e.level != LineLevel::kAny && m.head.size() >= kHeadBytes) {
        by_head_[{e.level, m.head.substr(0, kHeadBytes)}].push_back({i, f});
      } else {
        unanchored_[e.level].push_back({i, f});
      }
    }
  }
}

std::optional<CatalogueMatch> Catalogue::match(LineLevel level, std::string_view text) const {
  static const std::vector<Slot> none;
  const auto head = by_head_.find({level, std::string(text.substr(0, kHeadBytes))});
  const auto any = unanchored_.find(level);
  const std::vector<Slot>& a = head == by_head_.end() ? none : head->second;
  const std::vector<Slot>& b = any == unanchored_.end() ? none : any->second;
  // Both lists are in entry order; walk them as one so the first entry in the catalogue wins.
  std::size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    const bool take_a = j >= b.size() || (i < a.size() && a[i].entry < b[j].entry);
    const Slot s = take_a ? a[i++] : b[j++];
    const CatalogueEntry& e = entries_[s.entry];
    auto values = match_format(e.formats[s.format].format, text);
    if (values && requirements_hold(e, e.formats[s.format], *values)) {
      return CatalogueMatch{&e, s.format, std::move(*values)};
    }
  }
  return std::nullopt;
}

std::string fill_fields(const std::string& text, const std::vector<std::string>& fields,
                        const std::vector<std::string>& values,
                        const std::map<std::string, std::string>& extra) {
  std::string out;
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t close = text[i] == '{' ? text.find('}', i) : std::string::npos;
    if (close == std::string::npos) {
      out += text[i++];
      continue;
    }
    const std::string name = text.substr(i + 1, close - i - 1);
    std::optional<std::string> value;
    const auto field = std::find(fields.begin(), fields.end(), name);
    if (field != fields.end()) {
      const auto at = static_cast<std::size_t>(field - fields.begin());
      if (at < values.size()) value = values[at];
    } else if (const auto it = extra.find(name); it != extra.end()) {
      value = it->second;
    } else if (!name.empty() && name.size() <= 3 &&
               std::all_of(name.begin(), name.end(), ::isdigit)) {
      const std::size_t at = std::stoul(name);
      if (at >= 1 && at <= values.size()) value = values[at - 1];
    }
    if (!value) {  // not a placeholder: braces in the advice itself
      out += text[i++];
      continue;
    }
    out += *value;
    i = close + 1;
  }
  return out;
}

}  // namespace gpuorch::doctor
