// The command line as a new user meets it: a mistyped verb is named with the closest ones, every
// verb's --help shows each default and examples, --version names the build, and progress bars
// appear on a terminal only.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>

#include "cli/app.hpp"
#include "cli/help.hpp"
#include "cli/unknown_command.hpp"
#include "support/paths.hpp"
#include "support/test_support.hpp"

namespace gpuorch::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

struct Tree {
  Action action;
  std::unique_ptr<CLI::App> app = make_app(action);
};

// Every (sub)command a user can reach, with its path ("sim fill").
void visible_commands(CLI::App& app, const std::string& path,
                      std::vector<std::pair<std::string, CLI::App*>>& out) {
  for (CLI::App* sub : app.get_subcommands([](CLI::App* s) { return !s->get_group().empty(); })) {
    const std::string name = path.empty() ? sub->get_name() : path + " " + sub->get_name();
    out.emplace_back(name, sub);
    visible_commands(*sub, name, out);
  }
}

TEST(UnknownCommand, NamesTheVerbAndTheClosestOnes) {
  Tree t;
  EXPECT_EQ(unknown_command(*t.app, {"shedule"}),
            "unknown command 'shedule'; did you mean 'scheduler'? See gpuorch --help");
  EXPECT_EQ(unknown_command(*t.app, {"sim", "fil", "--seeds", "1"}),
            "unknown command 'sim fil'; did you mean 'sim fill'? See gpuorch sim --help");
  EXPECT_EQ(unknown_command(*t.app, {"dmno"}),
            "unknown command 'dmno'; did you mean 'dmon'? See gpuorch --help");
  // A prefix names every verb it starts.
  EXPECT_EQ(unknown_command(*t.app, {"ex"}),
            "unknown command 'ex'; did you mean 'exporter' or 'extender'? See gpuorch --help");
  const auto far = unknown_command(*t.app, {"frobnicate"});
  ASSERT_TRUE(far);
  EXPECT_THAT(*far, HasSubstr("unknown command 'frobnicate'; the commands are sim, topo, dmon"));
  EXPECT_EQ(unknown_command(*t.app, {}),
            "give a command: sim, topo, dmon, exporter, scheduler, extender, admission-check, "
            "bench, tune, device-plugin, manifests, node-labeller, dra-driver, launch, doctor. "
            "See gpuorch --help");
  EXPECT_EQ(unknown_command(*t.app, {"sim"}),
            "sim needs a command: fill, arrivals, scale, timeline. See gpuorch sim --help");
  // Known verbs, options and a verb's own arguments are CLI11's.
  for (const std::vector<std::string>& fine : {std::vector<std::string>{"--help"},
                                               {"sim", "fill", "--policy", "x"},
                                               {"launch", "train.py"},
                                               {"bench", "all_reduce"},
                                               {"doctor", "nccl-log", "job.log"},
                                               {"sim", "--help"}}) {
    EXPECT_FALSE(unknown_command(*t.app, fine)) << fine.front();
  }
  EXPECT_EQ(edit_distance("shcedule", "schedule"), 1U);  // a swap is one edit
}

TEST(UnknownCommand, OneLineExitTwo) {
  const test::TempDir dir;
  const auto r = test::run_cli({"shedule", "--policy", "efd"}, dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "gpuorch: unknown command 'shedule'; did you mean 'scheduler'? See gpuorch --help\n");
  EXPECT_EQ(r.out, "");
  const auto none = test::run_cli({}, dir);
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_EQ(test::lines_of(none.err).size(), 1U) << none.err;
}

TEST(Help, EveryVerbHasExamplesAndShowsEveryDefault) {
  Tree t;
  EXPECT_EQ(add_examples(*t.app), std::vector<std::string>{}) << "examples for no verb";
  std::vector<std::pair<std::string, CLI::App*>> commands;
  visible_commands(*t.app, "", commands);
  ASSERT_GT(commands.size(), 20U);
  std::size_t defaults = 0;
  for (const auto& [path, cmd] : commands) {
    const std::string help = cmd->help();
    EXPECT_THAT(help, HasSubstr("\nExamples:\n  ")) << path;
    // Examples live in one place (cli/help.cpp), not also in a verb's description.
    EXPECT_THAT(help, Not(HasSubstr("Example: "))) << path;
    for (const CLI::Option* opt : cmd->get_options()) {
      const std::string d = shown_default(*opt);
      if (d.empty()) continue;
      ++defaults;
      EXPECT_THAT(help, HasSubstr(fmt::format("(default: {})", d)))
          << path << " " << opt->get_name();
    }
  }
  EXPECT_GT(defaults, 50U);
  // A default is said once, after the description, not glued to the type.
  const std::string dmon = t.app->get_subcommand("dmon")->help();
  EXPECT_THAT(dmon, HasSubstr("Seconds between samples (default: 1)"));
  EXPECT_THAT(dmon, Not(HasSubstr("=1")));
}

TEST(Help, TheBinarysHelpIsTheTreesHelp) {
  const test::TempDir dir;
  const auto r = test::run_cli({"sim", "scale", "--help"}, dir);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("(default: fgd)"));
  EXPECT_THAT(r.out, HasSubstr("Examples:\n  gpuorch sim scale --nodes"));
}

TEST(Version, NamesVersionCommitBuildTypeAndCompiler) {
  const test::TempDir dir;
  const auto r = test::run_cli({"--version"}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto lines = test::lines_of(r.out);
  ASSERT_EQ(lines.size(), 4U) << r.out;
  EXPECT_EQ(lines[0], "gpuorch " GPUORCH_VERSION);
  EXPECT_TRUE(std::regex_match(
      lines[1],
      // "unknown" where the build could not ask git (no .git, or git refusing the checkout).
      std::regex(R"(commit:     ([0-9a-f]{12}(-dirty)? \(\d{4}-\d\d-\d\d\)|unknown \(unknown\)))")))
      << lines[1];
  EXPECT_TRUE(std::regex_match(lines[2], std::regex("build type: [A-Za-z]+"))) << lines[2];
  EXPECT_TRUE(std::regex_match(lines[3], std::regex(R"(compiler:   (GCC|Clang) \d+\.\d+\.\d+)")))
      << lines[3];
  // The commit is this checkout's (read at build time, so never a stale configure's).
  const std::string head = dir.file("head.txt");
  if (lines[1] != "commit:     unknown (unknown)" &&
      std::system(("git -C " + test::shell_quote(test::source_dir()) +
                   " rev-parse --short=12 HEAD >" + head + " 2>/dev/null")
                      .c_str()) == 0) {
    EXPECT_EQ(lines[1].substr(12, 12), test::read_text(head).substr(0, 12));
  }

  const auto j = test::run_cli({"--version", "--json"}, dir);
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const auto json = nlohmann::json::parse(j.out);
  EXPECT_EQ(json["version"], GPUORCH_VERSION);
  EXPECT_EQ(lines[1].substr(12, 12), json["commit"].get<std::string>());
  for (const char* key : {"dirty", "commit_date", "build_type", "compiler"}) {
    EXPECT_TRUE(json.contains(key)) << key;
  }
}

// On a terminal (util-linux's `script` gives the run one) sim scale draws its progress bar; into
// a file it writes none.
TEST(Progress, OnATerminalOnly) {
  const test::TempDir dir;
  const auto piped = test::run_cli({"sim", "scale", "--nodes", "200", "--pods", "3000"}, dir);
  ASSERT_EQ(piped.exit_code, 0) << piped.err;
  EXPECT_EQ(piped.err, "");
  if (std::system("command -v script >/dev/null 2>&1") != 0) GTEST_SKIP() << "no `script`";
  const std::string out = dir.file("tty.txt");
  const std::string cmd =
      "script -qec " +
      test::shell_quote(std::string(test::binary_path()) + " sim scale --nodes 200 --pods 3000") +
      " /dev/null >" + out + " 2>&1 </dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  const std::string tty = test::read_text(out);
  EXPECT_THAT(tty, HasSubstr("sim scale [")) << tty;
  EXPECT_THAT(tty, HasSubstr("3000/3000"));
}

}  // namespace
}  // namespace gpuorch::cli
