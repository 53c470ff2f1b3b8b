// The agent's side of the throughput contract: the newest step report of the current round is
// published at the round's size, at most once per interval; a failed publication is logged and
// tried again at the next interval, never in a loop; what an older round wrote, a line not yet
// ended and a line that is no report are never published; only the first node publishes.
#include "gpuorch/launch/throughput_reporter.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/test_support.hpp"

namespace gpuorch::launch {
namespace {

using namespace std::chrono_literals;
using Clock = ThroughputReporter::Clock;

struct Fixture {
  test::TempDir dir;
  std::string path = dir.file("throughput.jsonl");
  std::vector<workload::ThroughputReport> published;
  std::vector<std::string> logged;
  int failures_left = 0;
  ThroughputReporter reporter{path,
                              [this](const workload::ThroughputReport& r) {
                                if (failures_left > 0) {
                                  --failures_left;
                                  throw std::runtime_error("connection refused");
                                }
                                published.push_back(r);
                              },
                              [this](const std::string& s) { logged.push_back(s); }, 60s};

  void append(const std::string& text) {
    std::ofstream out(path, std::ios::app);
    out << text;
  }
};

TEST(ThroughputReporter, PublishesTheNewestReportOfTheRoundAtItsSize) {
  Fixture f;
  f.append(R"({"local_bsz": 8, "optim_step_time": 1.0})"
           "\n");  // the previous round's
  f.reporter.new_round(4, 2, true);
  const auto t0 = Clock::now();
  f.reporter.tick(t0);
  EXPECT_TRUE(f.published.empty()) << "a report of another size was published";
  f.append(R"({"local_bsz": 32, "optim_step_time": 0.5})"
           "\n"
           R"({"local_bsz": 32, "optim_)");
  f.reporter.tick(t0 + 2s);
  ASSERT_EQ(f.published.size(), 1U);
  EXPECT_EQ(f.published[0].world_size, 4);
  EXPECT_EQ(f.published[0].nodes, 2);
  EXPECT_DOUBLE_EQ(f.published[0].samples_per_second, 4 * 32 / 0.5);
  // The rest of the line arrives: a new measurement, but not before the interval.
  f.append(R"(step_time": 0.25})"
           "\n");
  f.reporter.tick(t0 + 30s);
  EXPECT_EQ(f.published.size(), 1U);
  f.reporter.tick(t0 + 63s);
  ASSERT_EQ(f.published.size(), 2U);
  EXPECT_DOUBLE_EQ(f.published[1].step_time, 0.25);
  // Nothing new: nothing published.
  f.reporter.tick(t0 + 200s);
  EXPECT_EQ(f.published.size(), 2U);
}

TEST(ThroughputReporter, AFailedPublicationIsRetriedAtTheNextIntervalOnly) {
  Fixture f;
  f.failures_left = 1;
  f.reporter.new_round(2, 2, true);
  f.append(R"({"local_bsz": 16, "optim_step_time": 0.2})"
           "\n");
  const auto t0 = Clock::now();
  for (int s = 0; s < 60; s += 5) f.reporter.tick(t0 + std::chrono::seconds(s));
  EXPECT_TRUE(f.published.empty());
  ASSERT_FALSE(f.logged.empty());
  EXPECT_NE(f.logged.back().find("connection refused"), std::string::npos) << f.logged.back();
  f.reporter.tick(t0 + 61s);
  EXPECT_EQ(f.published.size(), 1U);
}

TEST(ThroughputReporter, BadLinesAreLoggedOnceAndOnlyTheFirstNodePublishes) {
  Fixture f;
  f.reporter.new_round(2, 2, true);
  f.append("not json\n{\"local_bsz\": 0, \"optim_step_time\": 1}\n");
  const auto t0 = Clock::now();
  f.reporter.tick(t0);
  EXPECT_TRUE(f.published.empty());
  EXPECT_EQ(f.logged.size(), 1U);
  f.reporter.new_round(2, 2, false);
  f.append(R"({"local_bsz": 16, "optim_step_time": 0.2})"
           "\n");
  f.reporter.tick(t0 + 120s, true);
  EXPECT_TRUE(f.published.empty());
}

}  // namespace
}  // namespace gpuorch::launch
