// scripts/fill-leftovers (docs/efd-robustness.md): each GPU's pods at the end of a fill run, from
// the run's --placements, and one line with exit 2 on a placement the trace does not explain.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "support/test_support.hpp"

namespace gpuorch {
namespace {

test::CommandResult run_script(const test::TempDir& dir, const std::string& placements) {
  const auto script = std::filesystem::path(test::source_dir()) / "scripts" / "fill-leftovers";
  test::write_text(dir.file("nodes.csv"),
                   "sn,cpu_milli,memory_mib,gpu,model\nn0,8000,1024,1,T4\nn1,8000,1024,2,T4\n");
  test::write_text(dir.file("pods.csv"),
                   "name,cpu_milli,memory_mib,num_gpu,gpu_milli\nbig,1000,1,1,810\n"
                   "small,1000,1,1,160\nhalf,1000,1,1,470\nwhole,1000,1,1,1000\n");
  test::write_text(dir.file("pl.csv"), placements);
  return test::run_command({"/usr/bin/python3", script.string(), "--nodes", dir.file("nodes.csv"),
                            "--pods", dir.file("pods.csv"), "--placements", dir.file("pl.csv")},
                           dir);
}

TEST(FillLeftoversScript, RanksWhatEachGpuHoldsByIdleMilli) {
  const test::TempDir dir;
  const test::CommandResult r =
      run_script(dir,
                 "seed,policy,pod,node,gpus\n42,efd,big,n0,0\n42,efd,small,n0,0\n"
                 "42,efd,half,n1,1\n42,efd,whole,,\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "efd seed 42: 1.6 GPUs idle (52.00 % of capacity), 1 whole GPUs free\n"
            "  470                   1 GPUs      0.5 GPUs idle (34 %)\n"
            "  810+160               1 GPUs      0.0 GPUs idle (2 %)\n"
            "  failed pods by shape (GPUs x milli: pods): 1x1000: 1\n");
}

TEST(FillLeftoversScript, APlacementOfAPodNotInTheTraceIsOneLine) {
  const test::TempDir dir;
  const test::CommandResult r =
      run_script(dir, "seed,policy,pod,node,gpus\n42,efd,big,n0,0\n42,efd,ghost,n0,0\n");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "fill-leftovers: " + dir.file("pl.csv") + ":3: pod 'ghost' is not in " +
                       dir.file("pods.csv") + "\n");
}

}  // namespace
}  // namespace gpuorch
