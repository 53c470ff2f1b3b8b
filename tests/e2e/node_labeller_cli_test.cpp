// `gpuorch node-labeller` from the command line without an API server: --dry-run on a recorded
// host, --output-file (NFD's local feature file) with --once, and bad input as one line, exit 2.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

#include "support/test_support.hpp"

namespace gpuorch {
namespace {

using test::run_cli;
using test::TempDir;

TEST(NodeLabellerCli, DryRunAndFeatureFile) {
  TempDir dir;
  const std::string dgx = test::fixture("topo/dgx-h100");
  const auto r =
      run_cli({"node-labeller", "--dry-run", "--sysfs-root", dgx, "--mig-strategy", "mixed"}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto lines = test::lines_of(r.out);
  for (const char* want : {"nvidia.com/mig.strategy=mixed", "nvidia.com/gpu.count=7",
                           "nvidia.com/mig-3g.40gb.product=NVIDIA-H100-80GB-HBM3-MIG-3g.40gb",
                           "gpuorch.io/nvlink.largest-island=8"}) {
    EXPECT_NE(std::find(lines.begin(), lines.end(), want), lines.end()) << want << "\n" << r.out;
  }
  EXPECT_EQ(lines.back().rfind("# annotation gpuorch.io/topology={", 0), 0u) << lines.back();
  // No node: the file alone, as GFD's --output-file feeds NFD.
  const auto once = run_cli({"node-labeller", "--once", "--sysfs-root", dgx, "--mig-strategy",
                             "mixed", "--output-file", dir.file("gfd")},
                            dir);
  ASSERT_EQ(once.exit_code, 0) << once.err;
  EXPECT_EQ(test::read_text(dir.file("gfd")), r.out);
}

TEST(NodeLabellerCli, BadInputIsOneLineExitTwo) {
  TempDir dir;
  ::unsetenv("NODE_NAME");  // a CI pod may have one; the "no node" case must not find it
  const std::string h200 = test::fixture("topo/h200-vm");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"node-labeller", "--dry-run", "--sysfs-root", h200, "--mig-strategy", "bogus"},
       "gpuorch: unknown MIG strategy 'bogus' (none, single, mixed)\n"},
      {{"node-labeller", "--dry-run", "--interval", "0"},
       "gpuorch: --interval must be between 0.1 and 86400 seconds\n"},
      {{"node-labeller", "--once", "--node-name", "", "--sysfs-root", h200},
       "gpuorch: no node to label: give --node-name (or set NODE_NAME), --output-file or "
       "--dry-run\n"},
      {{"node-labeller", "--dry-run", "--sysfs-root", test::fixture("topo/dgx-h100"),
        "--mig-strategy", "single"},
       "gpuorch: MIG strategy single: GPU 0 is not in MIG mode while others are (all GPUs must "
       "agree; use mixed)\n"},
  };
  for (const auto& [args, err] : cases) {
    const auto r = run_cli(args, dir);
    EXPECT_EQ(r.exit_code, 2) << args.back();
    EXPECT_EQ(r.err, err);
  }
}

}  // namespace
}  // namespace gpuorch
