// gpuorch bench read as nccl-tests output: host-backend runs on loopback (2 and 4 ranks, every
// collective, nccl-tests' binary names) through scripts/nccl-tests-log, a parser written from
// nccl-tests' print formats, with their -J documents; and docs/nccl-tests.md's comparison table
// against the CLI's own flag list and output.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "support/paths.hpp"
#include "support/test_support.hpp"

namespace gpuorch {
namespace {

namespace fs = std::filesystem;

struct Outcome {
  int code = -1;
  std::string out, err;
};

Outcome shell(const std::string& cmd, const test::TempDir& dir) {
  const std::string out = dir.file("sh.out"), err = dir.file("sh.err");
  const int status = std::system((cmd + " >" + out + " 2>" + err + " </dev/null").c_str());
  Outcome r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = test::read_text(out);
  r.err = test::read_text(err);
  return r;
}

Outcome bench(const std::string& args, const test::TempDir& dir, const std::string& env = "") {
  return shell("env " + env + " " + test::shell_quote(test::binary_path()) + " bench " + args, dir);
}

fs::path source(const std::string& rel) { return fs::path(test::source_dir()) / rel; }

// The log parser on `log` (and a -J document); its verdict.
Outcome parse(const std::string& log, const std::string& json, int ranks, const std::string& name,
              const test::TempDir& dir) {
  std::string cmd = "python3 " + test::shell_quote(source("scripts/nccl-tests-log").string()) +
                    " " + test::shell_quote(log) + " --expect-ranks " + std::to_string(ranks) +
                    " --expect-test " + name;
  if (!json.empty()) cmd += " --json " + test::shell_quote(json);
  return shell(cmd, dir);
}

TEST(BenchNcclFormat, HostRunsReadByAnNcclTestsLogParser) {
  const std::vector<std::string> collectives{
      "all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "alltoall", "sendrecv"};
  for (const int np : {2, 4}) {
    for (std::size_t i = 0; i < collectives.size(); ++i) {
      const std::string& c = collectives[i];
      // Half of the runs by nccl-tests' binary name, and nccl-tests flags on some.
      const std::string name = i % 2 == 0 ? c + "_perf" : c;
      std::string extra = " -n 2";
      if (i == 0) extra = " -n 2 -m 2 -a 3 -z 1";
      if (i == 1) extra = " -n 2 -c 0 -a 0";
      if (i == 3) extra = " -n 2 -a 2 -r 1";
      const test::TempDir dir;
      const std::string log = dir.file("log"), json = dir.file("run.json");
      const std::string what = c + " --np " + std::to_string(np) + extra;
      const Outcome r = bench(name + " --backend host --np " + std::to_string(np) +
                                  " -b 8 -e 8K -f 32 -J " + json + extra,
                              dir);
      ASSERT_EQ(r.code, 0) << what << ": " << r.err;
      test::write_text(log, r.out);
      const Outcome p = parse(log, json, np, c + "_perf", dir);
      EXPECT_EQ(p.code, 0) << what << ": " << p.err << "\n" << test::read_text(log);
      EXPECT_NE(p.out.find("\"rows\": 3"), std::string::npos) << what << ": " << p.out;  // 8 256 8K
    }
  }
}

TEST(BenchNcclFormat, JsonFileIsNeverOverwrittenAndBadValuesAreOneLine) {
  const test::TempDir dir;
  const std::string json = dir.file("r.json");
  test::write_text(json, "kept\n");
  const Outcome r = bench("sendrecv_perf --backend host --np 2 -b 64 -e 64 -n 1 -J " + json, dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(test::read_text(json), "kept\n");
  EXPECT_EQ(r.out.rfind("# Writing JSON output to " + json + ".0\n", 0), 0u) << r.out;
  EXPECT_TRUE(fs::exists(json + ".0"));
  // NCCL_TESTS_MIN_BW: an average below 0.9 x the value fails, as nccl-tests.
  const Outcome slow =
      bench("all_reduce --backend host --np 2 -b 64 -e 64 -n 1", dir, "NCCL_TESTS_MIN_BW=1e9");
  EXPECT_EQ(slow.code, 1);
  EXPECT_NE(slow.out.find(" FAILED\n#\n# Collective test concluded: all_reduce_perf"),
            std::string::npos)
      << slow.out;
  for (const std::string args :
       {"-G 1", "-d all", "-o all", "-r all", "-t 0", "-m 0", "-a 4", "-N 2", "-C 1", "-T -1"}) {
    const Outcome bad = bench("all_reduce --backend gpu " + args, dir);
    EXPECT_EQ(bad.code, 2) << args << ": " << bad.err;
    EXPECT_EQ(test::lines_of(bad.err).size(), 1u) << args << ": " << bad.err;
  }
  EXPECT_NE(bench("all_reduce -G 3", dir).err.find("-G 3: only 0 is supported: CUDA graph"),
            std::string::npos);
}

struct TableRow {
  std::vector<std::string> cells;
};

// The rows of docs/nccl-tests.md's tables whose first cell starts with `prefix`.
std::vector<TableRow> table_rows(const std::string& page, const std::string& prefix) {
  std::vector<TableRow> rows;
  for (const auto& line : test::lines_of(page)) {
    if (line.rfind("| " + prefix, 0) != 0) continue;
    TableRow row;
    std::string cell;
    for (std::size_t i = 1; i < line.size(); ++i) {
      if (line[i] == '|') {
        const auto b = cell.find_first_not_of(' ');
        const auto e = cell.find_last_not_of(' ');
        row.cells.push_back(b == std::string::npos ? "" : cell.substr(b, e - b + 1));
        cell.clear();
      } else {
        cell += line[i];
      }
    }
    rows.push_back(row);
  }
  return rows;
}

std::string unquote(const std::string& cell) {
  const auto b = cell.find('`'), e = cell.find('`', b + 1);
  return b == std::string::npos || e == std::string::npos ? "" : cell.substr(b + 1, e - b - 1);
}

TEST(BenchNcclFormat, ComparisonTableMatchesTheCli) {
  const std::string page = test::read_text(source("docs/nccl-tests.md").string());
  const test::TempDir dir;
  const std::string help = bench("--help", dir).out;
  ASSERT_NE(help.find("--nthreads"), std::string::npos) << help;

  const auto flags = table_rows(page, "`-");
  ASSERT_GE(flags.size(), 30u);
  std::set<std::string> documented;
  for (const auto& row : flags) {
    ASSERT_EQ(row.cells.size(), 4u) << row.cells[0];
    const std::string names = unquote(row.cells[0]);
    const std::string& verdict = row.cells[2];
    ASSERT_TRUE(verdict == "same" || verdict == "differs" || verdict == "missing") << names;
    std::string shortname = names.substr(0, 2);
    documented.insert(shortname);
    for (std::size_t at = 0, comma; at < names.size(); at = comma + 1) {
      comma = names.find(',', at);
      if (comma == std::string::npos) comma = names.size();
      const std::string name = names.substr(at, comma - at);
      EXPECT_TRUE(std::regex_search(
          help, std::regex("(^|[ ,])" + name + "([ ,]|$)", std::regex::multiline)))
          << name << " is in the table but not in gpuorch bench --help";
    }
    if (verdict == "missing") {
      // Any value but the default: one line naming the flag, exit 2.
      const int value = std::stoi(row.cells[1]) + 1;
      const Outcome r = bench("all_reduce " + shortname + " " + std::to_string(value), dir);
      EXPECT_EQ(r.code, 2) << names << ": " << r.err;
      EXPECT_EQ(test::lines_of(r.err).size(), 1u) << names << ": " << r.err;
      EXPECT_NE(r.err.find(shortname + " " + std::to_string(value) + ": only"), std::string::npos)
          << r.err;
      EXPECT_EQ(
          bench("all_reduce --backend host --np 1 -b 8 -e 8 -n 1 " + shortname + " " + row.cells[1],
                dir)
              .code,
          0)
          << names << " at its default must be accepted";
    }
  }
  // Every single-letter flag of the CLI has a row.
  const std::regex short_flag(R"(^\s+(-[A-Za-z])[, ])", std::regex::multiline);
  for (auto it = std::sregex_iterator(help.begin(), help.end(), short_flag);
       it != std::sregex_iterator(); ++it) {
    EXPECT_EQ(documented.count((*it)[1].str()), 1u) << (*it)[1].str() << " has no table row";
  }

  // Output rows marked same: their text appears in a real run (with -J and -z 1 for the lines
  // those flags add).
  const std::string json = dir.file("o.json");
  const Outcome r =
      bench("alltoall_perf --backend host --np 2 -b 8 -e 64 -n 1 -z 1 -J " + json, dir);
  ASSERT_EQ(r.code, 0) << r.err;
  int checked = 0;
  for (const std::string prefix : {"`#", "`out-of-place`"}) {
    for (const auto& row : table_rows(page, prefix)) {
      ASSERT_EQ(row.cells.size(), 3u) << row.cells[0];
      if (row.cells[1] != "same") continue;
      EXPECT_NE(r.out.find(unquote(row.cells[0])), std::string::npos)
          << unquote(row.cells[0]) << " is marked same but not printed:\n"
          << r.out;
      ++checked;
    }
  }
  EXPECT_GE(checked, 8);
}

}  // namespace
}  // namespace gpuorch
