// scripts/fill-ceiling's exact search over t (the last arrival that opens a free GPU) against
// brute force, and its ceiling against an exhaustive search over every placement on 200 random
// small clusters with CPU, memory and GPU-model constraints (issue 16's counterexample first).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "support/paths.hpp"
#include "support/test_support.hpp"

namespace gpuorch {
namespace {

TEST(FillCeilingScript, ExactSearchAndCeilingHoldAgainstBruteForce) {
  if (std::system("/usr/bin/python3 -c 'import numpy, scipy.optimize' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "/usr/bin/python3 has no scipy (scripts/setup installs python3-scipy)";
  }
  const auto script =
      std::filesystem::path(::gpuorch::test::fixtures_dir()).parent_path().parent_path() /
      "scripts" / "fill-ceiling";
  ASSERT_TRUE(std::filesystem::exists(script)) << script;
  const test::TempDir dir;
  const std::string out = dir.file("out");
  const std::string command = "/usr/bin/python3 " + test::shell_quote(script.string()) +
                              " --self-test >" + test::shell_quote(out) + " 2>&1";
  const int status = std::system(command.c_str());
  EXPECT_EQ(status, 0) << test::read_text(out);
  EXPECT_EQ(test::read_text(out), "self-test: ok (40 searches, 200 instances, closest 0 milli)\n");
}

}  // namespace
}  // namespace gpuorch
