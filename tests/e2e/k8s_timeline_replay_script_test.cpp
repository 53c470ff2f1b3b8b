// Same answer over time: scripts/k8s-timeline-replay replays a Pollux workload through the real
// kube-apiserver, tick by tick, with `gpuorch scheduler --queues` deciding, and every tick's
// running jobs, replica counts, preemptions and (elastic) resizes must equal `gpuorch sim timeline
// --policy fifo:per-job[:elastic] --events` on the same two queues.
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

// scripts/k8s-timeline-replay on workload-4's first 11 jobs (4 x 4 GPUs, team-a, team-b, team-b
// in turn) up to `until`, with `flags`: its summary, and what it printed.
struct Replay {
  int status = -1;
  std::string output;
  nlohmann::json summary;
};
Replay replay(const std::filesystem::path& dir, const std::string& flags, int until) {
  const auto script =
      std::filesystem::path(::gpuorch::test::source_dir()) / "scripts" / "k8s-timeline-replay";
  const test::TempDir tmp;
  const std::string out = tmp.file("out");
  const std::string json = tmp.file("summary.json");
  const std::string command = fmt::format(
      "/usr/bin/python3 {} --gpuorch {} --workload {} --queues {} --assign-queues "
      "team-a,team-b,team-b {} --limit 11 --nodes 4 --gpus-per-node 4 --until {} --json {} >{} "
      "2>&1",
      test::shell_quote(script.string()), test::shell_quote(::gpuorch::test::binary_path()),
      test::shell_quote((dir / "workload-4.csv").string()),
      test::shell_quote(test::fixture("timeline/replay_queues.yaml")), flags, until,
      test::shell_quote(json), test::shell_quote(out));
  Replay r;
  r.status = std::system(command.c_str());
  r.output = test::read_text(out);
  if (std::filesystem::exists(json)) r.summary = nlohmann::json::parse(test::read_text(json));
  return r;
}

TEST(K8sTimelineReplayScript, PolluxJobsOnTwoQueuesTickByTick) {
  GPUORCH_REQUIRE_POLLUX(dir);
  // Small: CI's sanitizer build runs it (each tick waits for the scheduler to settle). Jobs go
  // to team-a, team-b, team-b in turn; team-b reclaims what team-a borrowed (bert-0 and a job
  // that started in the same tick, at t = 1920; the ticks after it are left out: CI's time).
  // The scheduler runs throughout: it waits 0.2 s after each finish it sees before deciding
  // (--settle-after-finish), so a tick's finishes are one change, as in the simulator.
  const Replay r = replay(dir, "--settle 0.2", 2000);
  EXPECT_EQ(r.status, 0) << r.output;
  ASSERT_TRUE(r.summary.is_object()) << r.output;
  const auto& s = r.summary;
  EXPECT_EQ(s.value("jobs", 0), 11);
  EXPECT_EQ(s.value("on_finish", ""), "settle") << r.output;  // never stopped nor paused
  EXPECT_GE(s.value("ticks", 0), 8) << r.output;
  EXPECT_GE(s.value("preemptions_sim", 0), 1) << r.output;  // a reclaim happens
  EXPECT_EQ(s.value("ticks_that_differ", -1), 0) << r.output;
  EXPECT_EQ(s.value("preemptions_cluster", -1), s.value("preemptions_sim", -2)) << r.output;
}

// The elastic half: every job of R replicas an elastic gang (PodGroup minMember ceil(R/2)), the
// simulator's throughput reports written on the pods, the harness playing the job's controller
// (an evicted member created again, pending). Up to t = 1300: the gangs start above minMember,
// bert-0 gives a pod to team-b's reclaim at t = 1140 and another at t = 1260, where cifar10-2
// starts with 8; every tick's sizes, preemptions and resizes must be the simulator's.
TEST(K8sTimelineReplayScript, ElasticGangsResizeTickByTickAsInTheSimulator) {
  GPUORCH_REQUIRE_POLLUX(dir);
  const Replay r = replay(dir, "--policy fifo:per-job:elastic --settle 0.2", 1300);
  EXPECT_EQ(r.status, 0) << r.output;
  ASSERT_TRUE(r.summary.is_object()) << r.output;
  const auto& s = r.summary;
  EXPECT_EQ(s.value("sim_policy", ""), "fifo:per-job:elastic") << r.output;
  EXPECT_GE(s.value("resizes_sim", 0), 2) << r.output;
  EXPECT_EQ(s.value("resizes_cluster", -1), s.value("resizes_sim", -2)) << r.output;
  EXPECT_EQ(s.value("preemptions_cluster", -1), s.value("preemptions_sim", -2)) << r.output;
  EXPECT_EQ(s.value("ticks_that_differ", -1), 0) << r.output;
}

}  // namespace
}  // namespace gpuorch
