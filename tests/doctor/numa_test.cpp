// doctor numa on recorded /proc trees against a recorded 8-GPU host (dgx-h100: GPU0-3 on NUMA
// node 0, cores 0-55,112-167; GPU4-7 on node 1), and the kubelet's policies.
#include "gpuorch/doctor/numa.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "doctor/doctor_test_util.hpp"
#include "gpuorch/discover/tree.hpp"
#include "gpuorch/topology/json_read.hpp"

namespace gpuorch {
namespace {

using test::doctor_fixture;
using test::find_id;
using test::problem_ids;
using Ids = std::vector<std::string>;

const topology::Host& dgx() {
  static const topology::Host host =
      topology::load_host_json(test::fixture("topo/dgx-h100/expected/topo.json"));
  return host;
}

std::vector<doctor::GpuProcess> procs(const std::string& name) {
  discover::Diagnostics diag;
  const discover::Tree t(doctor_fixture("numa/" + name), &diag);
  auto out = doctor::find_gpu_processes(t);
  EXPECT_EQ(diag.problems(), std::vector<std::string>{});
  return out;
}

struct Case {
  const char* tree;
  Ids problems;
};

class NumaFixture : public ::testing::TestWithParam<Case> {};

TEST_P(NumaFixture, RaisesExactlyItsFindings) {
  EXPECT_EQ(problem_ids(doctor::check_numa(dgx(), procs(GetParam().tree))), GetParam().problems)
      << GetParam().tree;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, NumaFixture,
                         ::testing::Values(Case{"bound", {}},
                                           Case{"unbound", {"numa.cpu-affinity", "numa.memory"}},
                                           Case{"cpus-far", {"numa.cpu-affinity"}},
                                           Case{"memory-far", {"numa.memory"}},
                                           Case{"no-gpu-process", {}}));

TEST(Numa, ReadsProcessesFromProc) {
  const auto p = procs("unbound");
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].pid, 4242);
  EXPECT_EQ(p[0].command, "python3");
  EXPECT_EQ(p[0].gpu_minors, std::vector<int>{0});  // not nvidiactl or nvidia-uvm
  EXPECT_EQ(p[0].cpus_allowed.size(), 224u);
  EXPECT_EQ(p[0].pages.at(1), 210100);
  EXPECT_TRUE(procs("no-gpu-process").empty());
}

// A training process has thousands of mappings: numa_maps beyond the 1 MiB of a sysfs attribute
// is still read.
TEST(Numa, ReadsALargeNumaMaps) {
  test::TempDir dir;
  const auto proc = dir.path() / "proc/77";
  std::filesystem::create_directories(proc / "fd");
  std::filesystem::create_symlink("/dev/nvidia4", proc / "fd/3");
  test::write_text((proc / "status").string(),
                   "Name:\tpython3\nCpus_allowed_list:\t56-69\nMems_allowed_list:\t0-1\n");
  std::string maps;
  for (int i = 0; i < 30000; ++i) {
    maps += fmt::format("7f{:010x} default anon=8 dirty=8 N0=8 kernelpagesize_kB=4\n", i);
  }
  ASSERT_GT(maps.size(), std::size_t{1} << 20);
  test::write_text((proc / "numa_maps").string(), maps);
  discover::Diagnostics diag;
  const discover::Tree t(dir.path(), &diag);
  const auto procs = doctor::find_gpu_processes(t);
  ASSERT_EQ(procs.size(), 1u);
  EXPECT_EQ(procs[0].pages.at(0), 240000);
  EXPECT_EQ(diag.problems(), std::vector<std::string>{});
  // GPU4 is on node 1: all of it remote.
  EXPECT_EQ(problem_ids(doctor::check_numa(dgx(), procs)), Ids{"numa.memory"});
}

// nvidia-persistenced and DCGM hold every GPU's file to manage it: not a job to bind.
TEST(Numa, GpuManagersAreNotJobs) {
  test::TempDir dir;
  for (const auto& [pid, comm] :
       {std::pair{"10", "nvidia-persiste"}, std::pair{"11", "python3"},
        std::pair{"12", "nv-hostengine"}, std::pair{"13", "gpuorch.bin"}}) {
    const auto proc = dir.path() / "proc" / pid;
    std::filesystem::create_directories(proc / "fd");
    std::filesystem::create_symlink("/dev/nvidia0", proc / "fd/3");
    test::write_text((proc / "status").string(), "Name:\tx\nCpus_allowed_list:\t0-3\n");
    test::write_text((proc / "comm").string(), std::string(comm) + "\n");
  }
  const discover::Tree t(dir.path(), nullptr);
  const auto found = doctor::find_gpu_processes(t);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].pid, 11);
}

// A VM whose firmware reports no NUMA node for its GPUs (the recorded h200-vm; the H200 machine of
// docs/hardware/h200-doctor): no node is "other", so memory on node 0 is no finding.
TEST(Numa, AGpuWithoutANumaNodeHasNoRemoteMemory) {
  const topology::Host vm =
      topology::load_host_json(test::fixture("topo/h200-vm/expected/topo.json"));
  doctor::GpuProcess p;
  p.pid = 973;
  p.command = "python3";
  p.gpu_minors = {0};
  p.cpus_allowed = {0, 1, 2, 3};
  p.mems_allowed = {0};
  p.pages = {{0, 601885}};
  p.policies = {{"bind:0", 10}};
  EXPECT_EQ(problem_ids(doctor::check_numa(vm, {p})), Ids{});
}

TEST(Numa, FindingsNameTheCoresToBindTo) {
  const auto findings = doctor::check_numa(dgx(), procs("unbound"));
  const auto cpu = find_id(findings, "numa.cpu-affinity");
  ASSERT_TRUE(cpu);
  EXPECT_NE(cpu->evidence.find("112 of 224 allowed cores are not near its GPU"), std::string::npos)
      << cpu->evidence;
  EXPECT_NE(cpu->fix.find("bind it to cores 0-55,112-167"), std::string::npos) << cpu->fix;
  const auto mem = find_id(findings, "numa.memory");
  ASSERT_TRUE(mem);
  EXPECT_NE(mem->what.find("keeps 84% of its memory"), std::string::npos) << mem->what;
}

TEST(KubeletConfig, PoliciesAgainstWhatGpuPodsNeed) {
  EXPECT_EQ(problem_ids(doctor::check_kubelet_config(doctor_fixture("numa/kubelet/aligned.yaml"))),
            Ids{});
  EXPECT_EQ(problem_ids(doctor::check_kubelet_config(doctor_fixture("numa/kubelet/defaults.yaml"))),
            (Ids{"kubelet.cpu-manager", "kubelet.topology-manager"}));
  EXPECT_EQ(
      problem_ids(doctor::check_kubelet_config(doctor_fixture("numa/kubelet/best-effort.yaml"))),
      Ids{"kubelet.topology-manager"});
  const std::string bad = doctor_fixture("numa/kubelet/not-kubelet.yaml");
  EXPECT_EQ(test::input_error([&] { doctor::check_kubelet_config(bad); }),
            bad + ":1: not a KubeletConfiguration (kind: KubeletConfiguration)");
}

}  // namespace
}  // namespace gpuorch
