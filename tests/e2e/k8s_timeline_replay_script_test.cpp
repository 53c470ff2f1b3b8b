// Same answer over time: scripts/k8s-timeline-replay replays a Pollux workload through the real
// kube-apiserver, tick by tick, with `gpuorch scheduler --queues` deciding, and every tick's
// running jobs, replica counts and preemptions must equal `gpuorch sim timeline --policy
// fifo:per-job --events` on the same two queues.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "sim/timeline_support.hpp"
#include "support/paths.hpp"
#include "support/test_support.hpp"

namespace gpuorch {
namespace {

TEST(K8sTimelineReplayScript, PolluxJobsOnTwoQueuesTickByTick) {
  GPUORCH_REQUIRE_POLLUX(dir);
  const auto script =
      std::filesystem::path(::gpuorch::test::source_dir()) / "scripts" / "k8s-timeline-replay";
  const test::TempDir tmp;
  const std::string out = tmp.file("out");
  const std::string json = tmp.file("summary.json");
  // Small: CI's sanitizer build runs it (each tick waits for the scheduler to settle). Jobs go
  // to team-a, team-b, team-b in turn; team-b reclaims what team-a borrowed (bert-0 and a job
  // that started in the same tick, at t = 1920; the ticks after it are left out: CI's time).
  // The scheduler runs throughout: it waits 0.2 s after each finish it sees before deciding
  // (--settle-after-finish), so a tick's finishes are one change, as in the simulator.
  const std::string command = fmt::format(
      "/usr/bin/python3 {} --gpuorch {} --workload {} --queues {} --assign-queues "
      "team-a,team-b,team-b --settle 0.2 "
      "--limit {} --nodes 4 --gpus-per-node 4 --until 2000 --json {} >{} 2>&1",
      test::shell_quote(script.string()), test::shell_quote(::gpuorch::test::binary_path()),
      test::shell_quote((dir / "workload-4.csv").string()),
      test::shell_quote(test::fixture("timeline/replay_queues.yaml")), 11, test::shell_quote(json),
      test::shell_quote(out));
  const int status = std::system(command.c_str());
  const std::string output = test::read_text(out);
  EXPECT_EQ(status, 0) << output;
  ASSERT_TRUE(std::filesystem::exists(json)) << output;
  const auto s = nlohmann::json::parse(test::read_text(json));
  EXPECT_EQ(s.value("jobs", 0), 11);
  EXPECT_EQ(s.value("on_finish", ""), "settle") << output;  // never stopped nor paused
  EXPECT_GE(s.value("ticks", 0), 8) << output;
  EXPECT_GE(s.value("preemptions_sim", 0), 1) << output;  // a reclaim happens
  EXPECT_EQ(s.value("ticks_that_differ", -1), 0) << output;
  EXPECT_EQ(s.value("preemptions_cluster", -1), s.value("preemptions_sim", -2)) << output;
}

}  // namespace
}  // namespace gpuorch
