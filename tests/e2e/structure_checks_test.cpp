// scripts/check-layering and scripts/check-docs: the repository passes both, and each fails on the
// mistake it exists to catch (a back-edge between layers, a page cited that is not there).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "support/paths.hpp"
#include "support/test_support.hpp"

namespace gpuorch {
namespace {

namespace fs = std::filesystem;
// Page names the checks must find missing are split ("docs/" "x.md") so check-docs, which reads
// this file too, does not take them for citations.

const fs::path kSource = ::gpuorch::test::source_dir();

test::CommandResult run_script(const std::string& script, const fs::path& root,
                               const test::TempDir& dir) {
  const std::string out = dir.file("script.out");
  const std::string command =
      "python3 " + test::shell_quote((kSource / "scripts" / script).string()) + " --root " +
      test::shell_quote(root.string()) + " >" + test::shell_quote(out) + " 2>&1";
  const int status = std::system(command.c_str());
  test::CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = test::read_text(out);
  return r;
}

// A tree with the real layer table and one header per layer, each including only itself.
fs::path layered_tree(const test::TempDir& dir) {
  const fs::path root = dir.file("tree");
  fs::create_directories(root / "cmake");
  fs::copy_file(kSource / "cmake" / "layers.cmake", root / "cmake" / "layers.cmake");
  for (const auto& entry : fs::directory_iterator(kSource / "src" / "gpuorch")) {
    if (!entry.is_directory()) continue;
    const std::string layer = entry.path().filename().string();
    fs::create_directories(root / "src" / "gpuorch" / layer);
    test::write_text((root / "src" / "gpuorch" / layer / "a.hpp").string(),
                     "#include \"gpuorch/" + layer + "/b.hpp\"\n");
  }
  return root;
}

TEST(LayeringCheck, RepositoryKeepsItsLayering) {
  const test::TempDir dir;
  const auto r = run_script("check-layering", kSource, dir);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out, "");
}

TEST(LayeringCheck, BackEdgeFromSchedToK8sFails) {
  const test::TempDir dir;
  const fs::path root = layered_tree(dir);
  ASSERT_EQ(run_script("check-layering", root, dir).exit_code, 0);
  test::write_text(
      (root / "src/gpuorch/sched/back_edge.cpp").string(),
      "#include \"gpuorch/sched/policy.hpp\"\n#include \"gpuorch/k8s/api/api_client.hpp\"\n");
  const auto r = run_script("check-layering", root, dir);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("src/gpuorch/sched/back_edge.cpp:2: layer sched includes gpuorch/k8s/"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("back_edge.cpp:1"), std::string::npos)
      << "an include of its own layer is allowed\n"
      << r.out;
}

TEST(LayeringCheck, TransitiveUseIsAllowedButUpwardIsNot) {
  const test::TempDir dir;
  const fs::path root = layered_tree(dir);
  // sim uses sched, which uses cluster: sim may include cluster; cluster may not include sim.
  test::write_text((root / "src/gpuorch/sim/x.hpp").string(),
                   "#include \"gpuorch/cluster/cluster.hpp\"\n");
  EXPECT_EQ(run_script("check-layering", root, dir).exit_code, 0);
  test::write_text((root / "src/gpuorch/cluster/y.hpp").string(),
                   "#include <gpuorch/sim/fill.hpp>\n");
  const auto r = run_script("check-layering", root, dir);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("src/gpuorch/cluster/y.hpp:1: layer cluster includes gpuorch/sim/"),
            std::string::npos)
      << r.out;
}

TEST(LayeringCheck, UndeclaredDirectoryAndCliIncludeFail) {
  const test::TempDir dir;
  const fs::path root = layered_tree(dir);
  fs::create_directories(root / "src/gpuorch/newthing");
  test::write_text((root / "src/gpuorch/base/z.cpp").string(), "#include \"cli/verbs.hpp\"\n");
  const auto r = run_script("check-layering", root, dir);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("src/gpuorch/newthing: not a layer"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("src/gpuorch/base/z.cpp:1: layer base includes the CLI"), std::string::npos)
      << r.out;
}

TEST(DocsCheck, RepositoryCitesOnlyPagesThatExist) {
  const test::TempDir dir;
  const auto r = run_script("check-docs", kSource, dir);
  EXPECT_EQ(r.exit_code, 0) << r.out;
}

TEST(DocsCheck, MissingPageFailsWithFileAndLine) {
  const test::TempDir dir;
  const fs::path root = dir.file("tree");
  fs::create_directories(root / "docs");
  fs::create_directories(root / "src/gpuorch/io");
  test::write_text((root / "docs/inputs.md").string(),
                   "# Inputs\nSee [the scheduler](scheduler.md).\n");
  test::write_text((root / "src/gpuorch/io/inventory.hpp").string(),
                   "// Format: docs/inputs.md.\n// Limits: docs/"
                   "inventory.md.\n");
  const auto r = run_script("check-docs", root, dir);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("src/gpuorch/io/inventory.hpp:2: cites docs/"
                       "inventory.md, which does not exist"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("docs/inputs.md:2: links scheduler.md, which does not exist"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("inventory.hpp:1"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace gpuorch
