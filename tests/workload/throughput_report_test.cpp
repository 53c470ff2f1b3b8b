// The throughput contract's two texts: the training script's step report and the pod annotation
// the launcher writes and the scheduler reads. Whatever arrives, parsing never throws or crashes:
// anything not a well-formed report is refused with a reason.
#include "gpuorch/workload/throughput_report.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace gpuorch::workload {
namespace {

TEST(ThroughputReport, AStepReportAtTheRoundsSizeRoundTripsThroughTheAnnotation) {
  const auto step = parse_step_report(R"({"local_bsz": 32, "optim_step_time": 0.25})");
  ASSERT_TRUE(step);
  EXPECT_EQ(step->local_bsz, 32);
  EXPECT_DOUBLE_EQ(step->optim_sync_time, 0);
  const ThroughputReport r = throughput_at(*step, 8, 2, "2026-12-04T16:00:00Z");
  EXPECT_DOUBLE_EQ(r.samples_per_second, 8 * 32 / 0.25);
  std::string why;
  const auto back = parse_throughput_annotation(to_annotation(r), &why);
  ASSERT_TRUE(back) << why;
  EXPECT_EQ(back->world_size, 8);
  EXPECT_EQ(back->nodes, 2);
  EXPECT_EQ(back->local_batch, 32);
  EXPECT_DOUBLE_EQ(back->samples_per_second, 1024);
  EXPECT_DOUBLE_EQ(back->step_time, 0.25);
  EXPECT_EQ(back->time, "2026-12-04T16:00:00Z");
}

TEST(ThroughputReport, SyncTimeIsOptionalButNeverLongerThanTheStep) {
  const auto s = parse_step_report(
      R"({"local_bsz": 4, "optim_step_time": 0.5, "optim_sync_time": 0.1, "extra": [1]})");
  ASSERT_TRUE(s);
  EXPECT_DOUBLE_EQ(s->optim_sync_time, 0.1);
  std::string why;
  EXPECT_FALSE(
      parse_step_report(R"({"local_bsz":4,"optim_step_time":0.5,"optim_sync_time":0.6})", &why));
  EXPECT_NE(why.find("optim_sync_time"), std::string::npos) << why;
}

TEST(ThroughputReport, BadInputIsRefusedWithAReasonAndNeverThrows) {
  const std::string good =
      R"({"worldSize":4,"nodes":2,"localBatch":32,"samplesPerSecond":512,"stepTime":0.25})";
  ASSERT_TRUE(parse_throughput_annotation(good));
  const std::vector<std::string> bad = {
      "",
      "{",
      "[]",
      "null",
      "\"text\"",
      "{}",
      R"({"worldSize":"4","nodes":2,"localBatch":32,"samplesPerSecond":512,"stepTime":0.25})",
      R"({"worldSize":4.5,"nodes":2,"localBatch":32,"samplesPerSecond":512,"stepTime":0.25})",
      R"({"worldSize":0,"nodes":1,"localBatch":32,"samplesPerSecond":512,"stepTime":0.25})",
      R"({"worldSize":-4,"nodes":2,"localBatch":32,"samplesPerSecond":512,"stepTime":0.25})",
      R"({"worldSize":4,"nodes":8,"localBatch":32,"samplesPerSecond":512,"stepTime":0.25})",
      R"({"worldSize":18446744073709551615,"nodes":2,"localBatch":32,"samplesPerSecond":1,)"
      R"("stepTime":1})",
      R"({"worldSize":4,"nodes":2,"localBatch":32,"samplesPerSecond":512,"stepTime":0})",
      R"({"worldSize":4,"nodes":2,"localBatch":32,"samplesPerSecond":512,"stepTime":-1})",
      R"({"worldSize":4,"nodes":2,"localBatch":32,"samplesPerSecond":512,"stepTime":1e308})",
      R"({"worldSize":4,"nodes":2,"localBatch":32,"samplesPerSecond":1e400,"stepTime":0.25})",
      R"({"worldSize":4,"nodes":2,"localBatch":32,"samplesPerSecond":NaN,"stepTime":0.25})",
      R"({"worldSize":4,"nodes":2,"localBatch":32,"stepTime":0.25})",
      "{\"worldSize\":4,\"nodes\":2,\"localBatch\":32,\"samplesPerSecond\":512,\"stepTime\":0.25,"
      "\"pad\":\"" +
          std::string(5000, 'x') + "\"}",
      std::string("{\"worldSize\":4\0,", 16),
      "\xff\xfe{\"worldSize\":4}",
  };
  for (const auto& text : bad) {
    std::string why;
    EXPECT_FALSE(parse_throughput_annotation(text, &why)) << text;
    EXPECT_FALSE(why.empty()) << text;
    EXPECT_FALSE(parse_step_report(text, &why)) << text;
  }
  // Every prefix of a good text, and every one-byte corruption of it.
  for (std::size_t n = 0; n < good.size(); ++n) {
    EXPECT_FALSE(parse_throughput_annotation(good.substr(0, n))) << n;
    for (const char c : {'\0', '"', '}', '-', '9', 'e'}) {
      std::string t = good;
      t[n] = c;
      (void)parse_throughput_annotation(t);  // may or may not parse; must not crash
      (void)parse_step_report(t);
    }
  }
}

}  // namespace
}  // namespace gpuorch::workload
