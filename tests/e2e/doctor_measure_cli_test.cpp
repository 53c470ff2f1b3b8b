// gpuorch doctor utilisation and data as a user runs them: replayed recordings, a recording
// written from a recorded tree and replayed, exit codes 0/1/2, one-line errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "support/test_support.hpp"

namespace gpuorch {
namespace {

using test::run_cli;

std::string util(const std::string& name) {
  return test::fixture("doctor/utilisation/" + name + ".json");
}

TEST(DoctorMeasureCli, UtilisationReplaysARecording) {
  test::TempDir dir;
  const auto fed = run_cli({"doctor", "utilisation", "--replay", util("fed")}, dir);
  EXPECT_EQ(fed.exit_code, 0) << fed.out << fed.err;
  EXPECT_NE(fed.out.find("info    util.busy: GPU0 (NVIDIA H200): busy, SM 93% average"),
            std::string::npos)
      << fed.out;
  const auto starved =
      run_cli({"doctor", "utilization", "--json", "--replay", util("loader-bound")}, dir);
  EXPECT_EQ(starved.exit_code, 1) << starved.err;
  const auto j = nlohmann::json::parse(starved.out);
  EXPECT_EQ(j["checks"][0]["check"], "utilisation");
  bool found = false;
  for (const auto& f : j["checks"][0]["findings"]) found |= f["id"] == "util.loader-bound";
  EXPECT_TRUE(found) << starved.out;
  const auto lowered = run_cli(
      {"doctor", "utilisation", "--replay", util("launch-bound"), "--starved-below", "30"}, dir);
  EXPECT_EQ(lowered.exit_code, 0) << lowered.out;
}

// No GPU here: the live host has no NVML, said in one line.
TEST(DoctorMeasureCli, UtilisationWithoutNvmlIsOneLine) {
  test::TempDir dir;
  const auto r = run_cli(
      {"doctor", "utilisation", "--seconds", "1", "--nvml-library", "libnvidia-ml-not-here.so.1"},
      dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err.rfind("gpuorch: doctor utilisation: no NVML on this host (", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(DoctorMeasureCli, UtilisationRecordsARecordedTreeAndReplaysIt) {
  test::TempDir dir;
  namespace fs = std::filesystem;
  const fs::path p = dir.path() / "tree/proc/4242";
  fs::create_directories(p / "fd");
  fs::create_directories(p / "task/4242");
  fs::create_symlink("/dev/nvidia0", p / "fd/3");
  const std::string stat = "4242 (python3) R 1 1 1 0 -1 0 0 0 0 0 700 20 0 0 20 0 1 0 9 0 0\n";
  test::write_text((p / "stat").string(), stat);
  test::write_text((p / "task/4242/stat").string(), stat);
  test::write_text((p / "comm").string(), "python3\xff\n");  // not UTF-8: replaced in JSON
  test::write_text(dir.file("tree/proc/stat"),
                   "cpu  10 0 10 80 0 0 0 0 0 0\ncpu0 10 0 10 80 0 0 0 0 0 0\n");
  test::write_text(dir.file("tree/nvml.json"), R"({"format": "gpuorch-nvml-recording/1",
    "driver_version": "550", "cuda_driver_version": 12040, "devices": [{"index": 0,
    "name": "NVIDIA H200", "uuid": "GPU-1", "pci_bus_id": "00000000:18:00.0",
    "memory_total_bytes": 150754820096, "compute_capability": [9, 0], "minor_number": 0,
    "nvlinks": [], "mig": {"current": 0, "pending": 0, "instances": []},
    "samples": [{"gpu_util": 97, "memory_used_bytes": 1073741824}]}]})");
  const std::string rec = dir.file("rec.json");
  const auto r = run_cli({"doctor", "utilisation", "--sysfs-root", dir.file("tree"), "--seconds",
                          "0.2", "--interval", "0.1", "--record", rec},
                         dir);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("util.busy: GPU0 (NVIDIA H200): busy, SM 97% average"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("(recorded to " + rec + ")"), std::string::npos) << r.out;
  const auto again = run_cli({"doctor", "utilisation", "--replay", rec}, dir);
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find("pid 4242 (python3\xef\xbf\xbd)"), std::string::npos) << again.out;
  // A tree without nvml.json, a recording that is not one, flags out of range: exit 2.
  fs::remove(dir.file("tree/nvml.json"));
  const auto no_nvml = run_cli({"doctor", "utilisation", "--sysfs-root", dir.file("tree")}, dir);
  EXPECT_EQ(no_nvml.exit_code, 2);
  EXPECT_NE(no_nvml.err.find("nvml.json: no NVML recording"), std::string::npos) << no_nvml.err;
  test::write_text(rec, "[]");
  const auto bad = run_cli({"doctor", "utilisation", "--replay", rec}, dir);
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(bad.err, "gpuorch: " + rec + ": top level: must be an object\n");
  EXPECT_EQ(run_cli({"doctor", "utilisation", "--interval", "0"}, dir).exit_code, 2);
  EXPECT_EQ(
      run_cli({"doctor", "utilisation", "--replay", util("fed"), "--record", rec}, dir).exit_code,
      2);
}

TEST(DoctorMeasureCli, DataAgainstANeed) {
  test::TempDir dir;
  const std::string file = dir.file("data.bin");
  test::write_text(file, std::string(2 << 20, 'x'));
  const auto ok = run_cli({"doctor", "data", file, "--samples-per-second", "10", "--sample-bytes",
                           "1K", "--threads", "2", "--seconds", "0.5"},
                          dir);
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  EXPECT_NE(ok.out.find("info    data.ok: reads at "), std::string::npos) << ok.out;
  const auto slow = run_cli({"doctor", "data", file, "--samples-per-second", "1000000",
                             "--sample-bytes", "1G", "--gpus", "8", "--seconds", "0.5", "--json"},
                            dir);
  EXPECT_EQ(slow.exit_code, 1) << slow.err;
  EXPECT_NE(slow.out.find("\"data.too-slow\""), std::string::npos) << slow.out;
  const auto missing = run_cli({"doctor", "data", dir.file("nope")}, dir);
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_EQ(missing.err, "gpuorch: " + dir.file("nope") + ": no such file or directory\n");
  const auto half = run_cli({"doctor", "data", file, "--samples-per-second", "10"}, dir);
  EXPECT_EQ(half.exit_code, 2);
  EXPECT_EQ(half.err, "gpuorch: --samples-per-second and --sample-bytes go together\n");
  const auto size = run_cli(
      {"doctor", "data", file, "--samples-per-second", "10", "--sample-bytes", "lots"}, dir);
  EXPECT_EQ(size.exit_code, 2);
  EXPECT_NE(size.err.find("--sample-bytes lots: not a size"), std::string::npos) << size.err;
  EXPECT_EQ(run_cli({"doctor", "data", file, "--threads", "0"}, dir).exit_code, 2);
  EXPECT_EQ(run_cli({"doctor", "data", file, "--seconds", "-1"}, dir).exit_code, 2);
}

}  // namespace
}  // namespace gpuorch
