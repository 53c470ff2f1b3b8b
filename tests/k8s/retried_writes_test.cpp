// RetriedWrites: a status write the API server did not take is tried again after its backoff
// (never before), until it succeeds or is withdrawn; a new write under the same key replaces it.
#include "gpuorch/k8s/scheduler/retried_writes.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

namespace gpuorch::k8s {
namespace {

using namespace std::chrono_literals;
using Clock = RetriedWrites::Clock;

TEST(RetriedWrites, AFailedWriteIsRetriedAfterItsWaitUntilItSucceeds) {
  int attempts = 0;
  int failures_logged = 0;
  RetriedWrites writes([&](const std::string& key, const std::string& error, int) {
    EXPECT_EQ(key, "pod/a");
    EXPECT_EQ(error, "503 ServiceUnavailable");
    ++failures_logged;
  });
  const Clock::time_point t0 = Clock::now();
  auto write = [&] {
    if (++attempts < 3) throw std::runtime_error("503 ServiceUnavailable");
  };
  EXPECT_FALSE(writes.submit("pod/a", write, t0));
  EXPECT_TRUE(writes.pending("pod/a"));
  EXPECT_EQ(writes.retry_due(t0 + 500ms), 0);
  EXPECT_EQ(attempts, 1) << "not before its wait is over";
  EXPECT_EQ(writes.retry_due(t0 + 1s), 0);  // fails again: now 2 s
  EXPECT_EQ(attempts, 2);
  EXPECT_EQ(writes.retry_due(t0 + 2500ms), 0);
  EXPECT_EQ(attempts, 2);
  EXPECT_EQ(writes.retry_due(t0 + 3s), 1);
  EXPECT_EQ(attempts, 3);
  EXPECT_FALSE(writes.pending("pod/a"));
  EXPECT_EQ(writes.retry_due(t0 + 60s), 0);
  EXPECT_EQ(attempts, 3);
  EXPECT_EQ(failures_logged, 2);
}

TEST(RetriedWrites, WithdrawnOrReplacedWritesAreNotRetried) {
  RetriedWrites writes;
  const Clock::time_point t0 = Clock::now();
  int old_attempts = 0;
  int new_attempts = 0;
  writes.submit(
      "pod/a",
      [&] {
        ++old_attempts;
        throw std::runtime_error("down");
      },
      t0);
  writes.submit(
      "pod/b", [] { throw std::runtime_error("down"); }, t0);
  writes.withdraw("pod/b");  // the pod was bound meanwhile
  EXPECT_FALSE(writes.pending("pod/b"));
  writes.submit(
      "pod/a",
      [&] {
        ++new_attempts;
        throw std::runtime_error("still down");
      },
      t0);
  writes.retry_due(t0 + 1s);
  EXPECT_EQ(old_attempts, 1) << "the old verdict is never written after the new one";
  EXPECT_EQ(new_attempts, 2);
  EXPECT_EQ(writes.size(), 1U);
}

}  // namespace
}  // namespace gpuorch::k8s
