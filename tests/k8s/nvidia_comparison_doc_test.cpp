// docs/device-plugin.md's comparison with NVIDIA's k8s-device-plugin is the code's: every config
// key the parser knows and every NVIDIA flag the CLI takes has one row, and no row names anything
// else; each flag row's variables and default are the flag table's; a row that is not "same"
// says why.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "gpuorch/k8s/deviceplugin/config.hpp"
#include "gpuorch/k8s/deviceplugin/plugin_flags.hpp"
#include "support/paths.hpp"
#include "support/test_support.hpp"

namespace gpuorch::k8s {
namespace {

// The rows of the table under `heading`, as cells without the outer bars.
std::vector<std::vector<std::string>> table_rows(const std::string& doc,
                                                 const std::string& heading) {
  std::vector<std::vector<std::string>> rows;
  const auto at = doc.find("\n" + heading + "\n");
  EXPECT_NE(at, std::string::npos) << heading;
  if (at == std::string::npos) return rows;
  std::istringstream in(doc.substr(at + heading.size() + 2));
  std::string line;
  bool in_table = false;
  while (std::getline(in, line)) {
    if (!line.starts_with("|")) {
      if (in_table) break;
      continue;
    }
    in_table = true;
    std::vector<std::string> cells;
    std::istringstream cs(line.substr(1));
    std::string cell;
    while (std::getline(cs, cell, '|')) {
      const auto b = cell.find_first_not_of(' ');
      const auto e = cell.find_last_not_of(' ');
      cells.push_back(b == std::string::npos ? "" : cell.substr(b, e - b + 1));
    }
    if (cells.empty() || cells[0].starts_with("---") || cells[0] == "Key" || cells[0] == "Flag") {
      continue;
    }
    rows.push_back(cells);
  }
  return rows;
}

// "`a`, `b`" -> {"a", "b"}
std::vector<std::string> code_spans(const std::string& cell) {
  std::vector<std::string> out;
  for (auto b = cell.find('`'); b != std::string::npos; b = cell.find('`', b + 1)) {
    const auto e = cell.find('`', b + 1);
    if (e == std::string::npos) break;
    out.push_back(cell.substr(b + 1, e - b - 1));
    b = e;
  }
  return out;
}

void expect_verdict(const std::string& what, const std::string& verdict, const std::string& why) {
  EXPECT_TRUE(verdict == "same" || verdict == "differs" || verdict == "missing")
      << what << ": " << verdict;
  if (verdict != "same") {
    EXPECT_GE(why.size(), 10u) << what << " needs a reason";
  }
}

const std::string& doc() {
  static const std::string text = test::read_text(
      (std::filesystem::path(test::source_dir()) / "docs/device-plugin.md").string());
  return text;
}

TEST(NvidiaComparisonDoc, ConfigKeysAreTheParsers) {
  std::set<std::string> documented;
  for (const auto& row : table_rows(doc(), "### NVIDIA's config keys")) {
    ASSERT_GE(row.size(), 3u);
    const auto names = code_spans(row[0]);
    ASSERT_EQ(names.size(), 1u) << row[0];
    EXPECT_TRUE(documented.insert(names[0]).second) << names[0] << " twice";
    expect_verdict(names[0], row[1], row[2]);
  }
  const std::set<std::string> known(config_keys().begin(), config_keys().end());
  EXPECT_EQ(documented, known);
}

TEST(NvidiaComparisonDoc, FlagsAreTheCommandLines) {
  std::set<std::string> documented;
  for (const auto& row : table_rows(doc(), "### NVIDIA's flags and variables")) {
    ASSERT_GE(row.size(), 5u);
    const auto names = code_spans(row[0]);
    ASSERT_FALSE(names.empty()) << row[0];
    const std::string name = names[0].substr(2);
    EXPECT_TRUE(documented.insert(name).second) << name << " twice";
    const auto& f = nvidia_flag(name);
    EXPECT_EQ(names.size(), f.alias.empty() ? 1u : 2u) << name;
    if (names.size() == 2) {
      EXPECT_EQ(names[1], "--" + f.alias);
    }
    EXPECT_EQ(code_spans(row[1]), f.envs) << name;
    const auto def = code_spans(row[2]);
    EXPECT_EQ(def.empty() ? "" : def[0], f.default_value) << name;
    expect_verdict(name, row[3], row[4]);
  }
  std::set<std::string> known;
  for (const auto& f : nvidia_flags()) known.insert(f.name);
  EXPECT_EQ(documented, known);
  // And the CLI takes every one of them, aliases included.
  test::TempDir dir;
  const auto help = test::run_cli({"device-plugin", "--help"}, dir);
  for (const auto& f : nvidia_flags()) {
    EXPECT_NE(help.out.find("--" + f.name), std::string::npos) << f.name;
    if (!f.alias.empty()) {
      EXPECT_NE(help.out.find("--" + f.alias), std::string::npos) << f.alias;
    }
  }
}

}  // namespace
}  // namespace gpuorch::k8s
