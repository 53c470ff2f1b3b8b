// The CLI on randomly corrupted input files: it exits 0 (the input still made sense) or 2 (one
// line saying what is wrong), never crashes or fails otherwise.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/mutate.hpp"
#include "support/test_support.hpp"

namespace gpuorch {
namespace {

TEST(SimFillCliMutation, CorruptedFilesExitZeroOrTwo) {
  const std::string nodes = test::fixture("openb_nodes.csv");
  const std::string pods = test::fixture("openb_pods.csv");
  const std::string inventory = test::fixture("inventory.yaml");
  const std::string sources[] = {test::read_text(nodes), test::read_text(pods),
                                 test::read_text(inventory)};
  base::Rng rng(77);
  int ok = 0;
  int rejected = 0;
  for (int i = 0; i < 21; ++i) {
    const test::TempDir dir;
    const int which = i % 3;
    const std::string corrupted = test::mutate(sources[which], rng);
    const std::string file = dir.file(which == 0   ? "nodes.csv"
                                      : which == 1 ? "pods.csv"
                                                   : "inv.yaml");
    test::write_text(file, corrupted);
    const std::string n = which == 1 ? nodes : file;
    const std::string p = which == 1 ? file : pods;
    const auto r = test::run_cli({"sim", "fill", "--nodes", n, "--pods", p, "--policy",
                                  "fgd,random", "--seeds", "1", "--json"},
                                 dir);
    SCOPED_TRACE(fmt::format("input: {}", test::escaped(corrupted)));
    ASSERT_LT(r.exit_code, 128) << "crashed: " << r.err;
    ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 2) << "exit " << r.exit_code << ": " << r.err;
    if (r.exit_code == 0) {
      ++ok;
      const auto j = nlohmann::json::parse(r.out, nullptr, false);
      ASSERT_FALSE(j.is_discarded()) << r.out;
      EXPECT_EQ(j["runs"].size(), 2U);
    } else {
      ++rejected;
      const auto lines = test::lines_of(r.err);
      ASSERT_EQ(lines.size(), 1U) << r.err;
      EXPECT_EQ(lines[0].rfind(fmt::format("gpuorch: {}", file), 0), 0U) << lines[0];
    }
  }
  EXPECT_GT(ok, 0);
  EXPECT_GT(rejected, 0);
}

}  // namespace
}  // namespace gpuorch
