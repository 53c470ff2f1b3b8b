#include "cli/unknown_command.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace gpuorch::cli {
namespace {

// The verbs a user may type at this level: hidden ones (no group) are not offered.
std::vector<std::string> visible_verbs(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands(
           [](const CLI::App* s) { return !s->get_group().empty() && !s->get_name().empty(); })) {
    names.push_back(sub->get_name());
  }
  return names;
}

const CLI::App* find_verb(const CLI::App& app, const std::string& word) {
  const auto found = app.get_subcommands([&](const CLI::App* s) { return s->check_name(word); });
  return found.empty() ? nullptr : found.front();
}

std::string quoted_list(const std::vector<std::string>& names, const std::string& prefix) {
  std::vector<std::string> quoted;
  for (const auto& n : names) quoted.push_back(fmt::format("'{}{}'", prefix, n));
  if (quoted.size() == 1) return quoted.front();
  const std::string last = quoted.back();
  quoted.pop_back();
  return fmt::format("{} or {}", fmt::join(quoted, ", "), last);
}

}  // namespace

std::size_t edit_distance(std::string_view a, std::string_view b) {
  // Optimal string alignment: Levenshtein plus a swap of two neighbouring letters as one edit
  // (the commonest typo, "shcedule").
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t change = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + change});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

std::vector<std::string> closest_names(std::string_view word,
                                       const std::vector<std::string>& names) {
  std::vector<std::string> out;
  if (word.size() >= 2) {
    for (const auto& n : names) {
      if (n.starts_with(word) || word.starts_with(n)) out.push_back(n);
    }
    if (!out.empty()) return out;
  }
  const std::size_t limit = std::max<std::size_t>(1, word.size() / 3);
  std::size_t best = limit + 1;
  for (const auto& n : names) {
    const std::size_t d = edit_distance(word, n);
    if (d < best) {
      best = d;
      out.clear();
    }
    if (d == best) out.push_back(n);
  }
  return out;
}

std::optional<std::string> unknown_command(const CLI::App& app,
                                           const std::vector<std::string>& args) {
  const CLI::App* at = &app;
  std::string path;  // the verbs so far, "sim " for `gpuorch sim ...`
  for (const auto& word : args) {
    if (word.starts_with("-")) return std::nullopt;  // an option: CLI11 checks it
    const std::vector<std::string> verbs = visible_verbs(*at);
    if (verbs.empty()) return std::nullopt;  // a verb's own arguments
    if (const CLI::App* verb = find_verb(*at, word)) {
      at = verb;
      path += word + " ";
      continue;
    }
    if (at->get_require_subcommand_min() == 0) return std::nullopt;  // a positional argument
    const auto near = closest_names(word, verbs);
    const std::string help = fmt::format("See gpuorch {}--help", path);
    if (near.empty()) {
      return fmt::format("unknown command '{}{}'; the commands are {}. {}", path, word,
                         fmt::join(verbs, ", "), help);
    }
    return fmt::format("unknown command '{}{}'; did you mean {}? {}", path, word,
                       quoted_list(near, path), help);
  }
  if (at->get_require_subcommand_min() > 0) {
    const std::string who = path.empty() ? "give a command" : path + "needs a command";
    return fmt::format("{}: {}. See gpuorch {}--help", who, fmt::join(visible_verbs(*at), ", "),
                       path);
  }
  return std::nullopt;
}

}  // namespace gpuorch::cli
