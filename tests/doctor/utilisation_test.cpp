// doctor utilisation on recorded windows (tests/fixtures/doctor/utilisation/*.json: 11 samples a
// second apart, GPU0 used by pid 4242), one fixture per cause of a starved GPU and a fed one;
// and the sampler on a hand-made /proc tree with a recorded NVML.
#include "gpuorch/doctor/utilisation.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <ostream>

#include "doctor/doctor_test_util.hpp"
#include "gpuorch/base/process_tree.hpp"
#include "gpuorch/discover/nvml.hpp"
#include "gpuorch/discover/tree.hpp"

namespace gpuorch {
namespace {

using test::doctor_fixture;
using test::find_id;
using test::problem_ids;
using Ids = std::vector<std::string>;

doctor::UtilRecording recording(const std::string& name) {
  return doctor::read_utilisation(doctor_fixture("utilisation/" + name + ".json"));
}

struct Case {
  const char* name;
  Ids problems;
};

// How gtest (and so ctest's test names) shows a case: its fixture's name.
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class UtilisationFixture : public ::testing::TestWithParam<Case> {};

TEST_P(UtilisationFixture, RaisesExactlyItsFindings) {
  EXPECT_EQ(problem_ids(doctor::check_utilisation(recording(GetParam().name))), GetParam().problems)
      << GetParam().name;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, UtilisationFixture,
                         ::testing::Values(Case{"fed", {}}, Case{"idle", {}},
                                           Case{"loader-bound", {"util.loader-bound"}},
                                           Case{"cpu-bound", {"util.cpu-bound"}},
                                           Case{"copy-bound", {"util.copy-bound"}},
                                           Case{"launch-bound", {"util.launch-bound"}},
                                           Case{"launch-bound-workers", {"util.launch-bound"}}),
                         [](const ::testing::TestParamInfo<Case>& param) {
                           std::string name = param.param.name;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(Utilisation, LoaderBoundNamesThePeggedThreadAndTheFix) {
  const auto findings = doctor::check_utilisation(recording("loader-bound"));
  const auto f = find_id(findings, "util.loader-bound");
  ASSERT_TRUE(f);
  EXPECT_NE(f->what.find("GPU0 (NVIDIA H200) is starved: SM 28% average (below 60%)"),
            std::string::npos)
      << f->what;
  EXPECT_NE(f->what.find("main thread of pid 4242 is pegged at 99% of a core and 0 other"),
            std::string::npos)
      << f->what;
  EXPECT_NE(f->evidence.find("memory used 20.0 GiB of 140.4 GiB"), std::string::npos)
      << f->evidence;
  EXPECT_NE(f->evidence.find("host CPU 8% busy of 16 cores"), std::string::npos) << f->evidence;
  EXPECT_NE(f->fix.find("num_workers"), std::string::npos);
  // The second GPU is held by nothing: idle is not a problem.
  const auto idle = find_id(findings, "util.idle");
  ASSERT_TRUE(idle);
  EXPECT_EQ(idle->severity, doctor::Severity::kInfo);
  EXPECT_NE(idle->what.find("GPU1"), std::string::npos);
}

// idle.json: GPU0 is held only by nvidia-persistenced, which keeps it initialised and computes
// nothing.
TEST(Utilisation, AGpuHeldOnlyByAManagerIsIdle) {
  const auto idle = find_id(doctor::check_utilisation(recording("idle")), "util.idle");
  ASSERT_TRUE(idle);
  EXPECT_NE(idle->what.find("GPU0"), std::string::npos);
}

TEST(Utilisation, WorkersCountAsTheJobsThreads) {
  const auto findings = doctor::check_utilisation(recording("fed"));
  const auto busy = find_id(findings, "util.busy");
  ASSERT_TRUE(busy);
  EXPECT_NE(busy->evidence.find("8 other busy thread(s) (>= 50% of a core) of 16 in 9 process(es)"),
            std::string::npos)
      << busy->evidence;
  EXPECT_NE(busy->evidence.find("PCIe RX median 920 MB/s"), std::string::npos) << busy->evidence;
}

TEST(Utilisation, CopyBoundShowsTheBursts) {
  const auto f = find_id(doctor::check_utilisation(recording("copy-bound")), "util.copy-bound");
  ASSERT_TRUE(f);
  EXPECT_NE(f->what.find("peak 12000 MB/s, median 150"), std::string::npos) << f->what;
  EXPECT_NE(f->fix.find("pin_memory=True"), std::string::npos);
}

TEST(Utilisation, TheThresholdIsAFlag) {
  doctor::UtilThresholds t;
  t.starved_below = 35;  // launch-bound averages 40 %
  EXPECT_EQ(problem_ids(doctor::check_utilisation(recording("launch-bound"), t)), Ids{});
}

TEST(Utilisation, RecordingRoundTrips) {
  const auto r = recording("copy-bound");
  test::TempDir dir;
  const std::string path = dir.file("again.json");
  test::write_text(path, doctor::utilisation_json(r).dump());
  EXPECT_EQ(doctor::utilisation_json(doctor::read_utilisation(path)), doctor::utilisation_json(r));
}

TEST(Utilisation, MalformedRecordingIsOneLine) {
  test::TempDir dir;
  const std::string path = dir.file("bad.json");
  auto bad = [&](const std::string& text) {
    test::write_text(path, text);
    return test::input_error([&] { doctor::read_utilisation(path); });
  };
  EXPECT_EQ(bad("{"), path + ": not JSON (byte 2)");
  EXPECT_EQ(bad(R"({"format": "x"})"), path + ": format is not 'gpuorch.doctor-utilisation/v1'");
  const std::string head =
      R"({"format": "gpuorch.doctor-utilisation/v1", "clock_ticks_per_second": 100, "cpus": 4,
          "gpus": [{"index": 0, "minor": 0, "name": "G"}], "samples": [)";
  const std::string ok = R"({"t": 0, "cpu_total": 10, "cpu_idle": 5, "gpus": [], "processes": []})";
  EXPECT_EQ(bad(head + ok + "]}"), path + ": samples: at least 2 are needed to measure CPU use");
  EXPECT_EQ(bad(head + ok + R"(, {"t": 1, "cpu_total": 20, "cpu_idle": 9,
                 "gpus": [{"index": 0, "sm_util": 130}], "processes": []}]})"),
            path + ": samples[1].gpus[0]: 'sm_util' must be a number in [0, 100]");
  EXPECT_EQ(bad(head + ok + R"(, {"t": 1, "cpu_total": 20, "cpu_idle": 9, "gpus": [],
                 "processes": [{"pid": 7, "ppid": 1, "command": "x", "gpus": [0],
                                "threads": [[7]]}]}]})"),
            path + ": samples[1].processes[0]: each thread must be [tid, ticks]");
  EXPECT_EQ(bad(head + ok + R"(, {"t": -1, "cpu_total": 20, "cpu_idle": 9, "gpus": [],
                 "processes": []}]})"),
            path + ": samples[1]: 't' must be a number in [0, 10000000]");
}

// /proc/PID/stat with the given utime + stime (fields 14 and 15) and parent.
std::string stat_line(int pid, int ppid, unsigned long long ticks) {
  return fmt::format("{} (python3 x) S {} 1 1 0 -1 4194304 100 0 0 0 {} 0 0 0 20 0 1 0 500 0 0\n",
                     pid, ppid, ticks);
}

TEST(Utilisation, ParsesProcStatCpuTicks) {
  base::ProcessEntry e;
  ASSERT_TRUE(base::parse_proc_stat(stat_line(12, 3, 250), e));
  EXPECT_EQ(e.ppid, 3);
  EXPECT_EQ(e.cpu_ticks, 250u);
  EXPECT_EQ(e.start, 500u);
}

// The sampler on a tree: pid 4242 holds /dev/nvidia0, its child 4300 (a spawned worker) holds
// nothing but is kept; pid 1 is left out. NVML answers from a recording.
TEST(Utilisation, SamplesAProcTree) {
  test::TempDir dir;
  namespace fs = std::filesystem;
  auto proc = [&](int pid, int ppid, bool gpu) {
    const fs::path p = dir.path() / "proc" / std::to_string(pid);
    fs::create_directories(p / "fd");
    fs::create_directories(p / "task" / std::to_string(pid));
    if (gpu) fs::create_symlink("/dev/nvidia0", p / "fd/3");
    fs::create_symlink("/dev/nvidiactl", p / "fd/4");
    test::write_text((p / "stat").string(), stat_line(pid, ppid, 100));
    test::write_text((p / "task" / std::to_string(pid) / "stat").string(),
                     stat_line(pid, ppid, 90));
    test::write_text((p / "comm").string(), "python3\n");
  };
  proc(1, 0, false);
  proc(4242, 1, true);
  proc(4300, 4242, false);
  test::write_text((dir.path() / "proc/stat").string(),
                   "cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 50 0 25 400 25 0 0 0 0 0\n"
                   "cpu1 50 0 25 400 25 0 0 0 0 0\n");
  const std::string nvml_json = dir.file("nvml.json");
  test::write_text(nvml_json, R"({"format": "gpuorch-nvml-recording/1", "driver_version": "550",
    "cuda_driver_version": 12040, "devices": [{"index": 0, "name": "NVIDIA H200", "uuid": "GPU-1",
    "pci_bus_id": "00000000:18:00.0", "memory_total_bytes": 150754820096,
    "compute_capability": [9, 0], "minor_number": 0, "nvlinks": [],
    "mig": {"current": 0, "pending": 0, "instances": []},
    "samples": [{"gpu_util": 30, "memory_used_bytes": 1073741824, "pcie_rx_kbps": 50000}]}]})");
  discover::Diagnostics diag;
  auto nvml = discover::open_recorded_nvml(nvml_json, nvml_json, diag);
  ASSERT_TRUE(nvml) << fmt::format("{}", diag.problems().empty() ? "" : diag.problems()[0]);
  const discover::Tree tree(dir.path(), nullptr);
  const auto r = doctor::sample_utilisation(tree, *nvml, 0.1, 0.05);
  EXPECT_EQ(r.cpus, 2);
  ASSERT_EQ(r.gpus.size(), 1u);
  EXPECT_EQ(r.gpus[0].minor, 0);
  ASSERT_EQ(r.snapshots.size(), 3u);
  const auto& s = r.snapshots.back();
  EXPECT_EQ(s.cpu_total, 1000u);
  EXPECT_EQ(s.cpu_idle, 850u);
  ASSERT_EQ(s.gpus.size(), 1u);
  EXPECT_EQ(s.gpus[0].sm_util, 30.0);
  EXPECT_EQ(s.gpus[0].memory_used_mib, 1024.0);
  EXPECT_EQ(s.gpus[0].pcie_rx_mbps, 50.0);
  ASSERT_EQ(s.processes.size(), 2u);
  EXPECT_EQ(s.processes[0].pid, 4242);
  EXPECT_EQ(s.processes[0].gpu_minors, std::vector<int>{0});
  EXPECT_EQ(s.processes[0].thread_ticks.at(4242), 90u);
  EXPECT_EQ(s.processes[1].pid, 4300);
  EXPECT_EQ(s.processes[1].ppid, 4242);
  EXPECT_TRUE(s.processes[1].gpu_minors.empty());
  // Nothing moves in a static tree: the GPU is in use at 30 %, and nothing on the host is busy.
  EXPECT_EQ(problem_ids(doctor::check_utilisation(r)), Ids{"util.launch-bound"});
}

}  // namespace
}  // namespace gpuorch
