// The daemons' log lines are klog's (what kube-scheduler prints), so log tooling for Kubernetes
// components parses them: severity, month and day, UTC time to the microsecond, process id,
// file:line], message.
#include "gpuorch/base/log.hpp"

#include <gtest/gtest.h>

#include <regex>

namespace gpuorch::base {
namespace {

TEST(Log, KlogHeader) {
  // 2026-12-02 10:00:00.123456 UTC
  const auto when = std::chrono::system_clock::time_point(std::chrono::seconds(1796205600)) +
                    std::chrono::microseconds(123456);
  EXPECT_EQ(klog_line(Severity::kInfo, when, 12345,
                      "/src/gpuorch/k8s/scheduler/scheduler_service.cpp", 137, "synced: 3 nodes"),
            "I1202 10:00:00.123456   12345 scheduler_service.cpp:137] synced: 3 nodes\n");
  EXPECT_EQ(klog_line(Severity::kError, when, 1, "x.cpp", 2, "bind failed").substr(0, 24),
            "E1202 10:00:00.123456   ");
  EXPECT_EQ(klog_line(Severity::kWarning, when, 1, "x.cpp", 2, "m")[0], 'W');
}

TEST(Log, OneLineOnStderrWithTheCallersFileAndLine) {
  ::testing::internal::CaptureStderr();
  const unsigned line = __LINE__ + 1;
  log(Severity::kWarning, "watch: connection reset");
  const std::string err = ::testing::internal::GetCapturedStderr();
  const std::regex klog(
      R"(W\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ log_test\.cpp:(\d+)\] watch: connection reset\n)");
  std::smatch m;
  ASSERT_TRUE(std::regex_match(err, m, klog)) << err;
  EXPECT_EQ(m[1].str(), std::to_string(line));
}

}  // namespace
}  // namespace gpuorch::base
