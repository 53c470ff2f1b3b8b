// scripts/fill-ceiling's exact search over t (the last arrival that opens a free GPU) against
// brute force, and both of its no-refusal ceilings (the opener's and the witness LP) against an
// exhaustive search over every placement on 200 random small clusters with CPU, memory and
// GPU-model constraints (issue 16's counterexample first); and --generated, which bounds made
// traces against FGD as gpuorch runs it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>

#include "support/made_openb.hpp"
#include "support/paths.hpp"
#include "support/test_support.hpp"

namespace gpuorch {
namespace {

bool have_scipy() {
  return std::system("/usr/bin/python3 -c 'import numpy, scipy.optimize' >/dev/null 2>&1") == 0;
}

std::filesystem::path script() {
  return std::filesystem::path(test::source_dir()) / "scripts" / "fill-ceiling";
}

TEST(FillCeilingScript, GeneratedTracesAreBoundedAboveFgdsOwnRuns) {
  if (!have_scipy()) GTEST_SKIP() << "/usr/bin/python3 has no scipy (scripts/setup installs it)";
  const test::TempDir dir;
  test::write_made_nodes(dir);
  test::write_made_trace(dir, "tiny");
  const auto r = test::run_command(
      {"/usr/bin/python3", script().string(), "--generated", dir.path().string(), "--gpuorch",
       test::binary_path(), "--seeds", "42-46", "--check", "fgd,efd,efd-online,best-fit"},
      dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto lines = test::lines_of(r.out);
  ASSERT_EQ(lines.size(), 3u) << r.out;
  // | tiny | FGD @100 / @130 | offline @100 / @130 | no-refusal @100 / @130 | room @100 / @130 |
  // closest run |
  std::istringstream row(lines[2]);
  std::string bar, trace, slash;
  double fgd100 = 0, fgd130 = 0, off100 = 0, off130 = 0, nr100 = 0, nr130 = 0, room100 = 0,
         room130 = 0, closest = -1;
  row >> bar >> trace >> bar >> fgd100 >> slash >> fgd130 >> bar >> off100 >> slash >> off130 >>
      bar >> nr100 >> slash >> nr130 >> bar >> room100 >> slash >> room130 >> bar >> closest;
  ASSERT_TRUE(row) << lines[2];
  EXPECT_EQ(trace, "tiny");
  // FGD does not refuse a pod that fits, so its own runs are under the no-refusal ceiling.
  EXPECT_GT(fgd100, 0.0);
  EXPECT_LE(fgd100, nr100);
  EXPECT_LE(fgd130, nr130);
  EXPECT_LE(nr130, 100.0);
  // No run of the four policies is above its seed's ceiling (--check; it would exit 1).
  EXPECT_GE(closest, 0.0);
  EXPECT_LE(off100, off130);
}

TEST(FillCeilingScript, AGeneratedFolderWithoutItsNodeListIsOneLineAndExitTwo) {
  if (!have_scipy()) GTEST_SKIP() << "/usr/bin/python3 has no scipy (scripts/setup installs it)";
  const test::TempDir dir;
  const auto r = test::run_command(
      {"/usr/bin/python3", script().string(), "--generated", dir.path().string()}, dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, dir.file("openb_node_list_gpu_node.csv") +
                       ": not found (make the traces with scripts/make-openb-family --out " +
                       dir.path().string() + ")\n");
  EXPECT_EQ(r.out, "");
}

TEST(FillCeilingScript, ExactSearchAndCeilingHoldAgainstBruteForce) {
  if (!have_scipy()) GTEST_SKIP() << "/usr/bin/python3 has no scipy (scripts/setup installs it)";
  const auto path = script();
  ASSERT_TRUE(std::filesystem::exists(path)) << path;
  const test::TempDir dir;
  const std::string out = dir.file("out");
  const std::string command = "/usr/bin/python3 " + test::shell_quote(path.string()) +
                              " --self-test >" + test::shell_quote(out) + " 2>&1";
  const int status = std::system(command.c_str());
  EXPECT_EQ(status, 0) << test::read_text(out);
  // Both ceilings reach the best placement on some instance (closest 0), and the witness LP is the
  // tighter of the two on many.
  const std::string text = test::read_text(out);
  EXPECT_EQ(
      text.rfind("self-test: ok (40 searches, 200 instances, closest 0 milli; witness: closest "
                 "0 milli, below the opener ceiling on ",
                 0),
      0u)
      << text;
  const auto on = text.rfind(' ');
  ASSERT_NE(on, std::string::npos) << text;
  EXPECT_GE(std::stoi(text.substr(on + 1)), 50) << text;
}

}  // namespace
}  // namespace gpuorch
