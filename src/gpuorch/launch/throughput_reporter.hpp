#pragma once
// The agent's side of the throughput contract (docs/launch.md, "Environment contract"): the
// training script appends step reports, one JSON line each, to the file GPUORCH_THROUGHPUT_FILE
// names; the agent of the job's first node reads the latest written in the current round and
// hands it, at the round's world size and node count, to a publisher (on Kubernetes: the pod's
// gpuorch.io/throughput annotation) at most once per interval. A failed publication is logged
// and tried again at the next interval; nothing here ever stops the workers.
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "gpuorch/workload/throughput_report.hpp"

namespace gpuorch::launch {

class ThroughputReporter {
 public:
  using Clock = std::chrono::steady_clock;
  // Throws on failure (the message is logged).
  using Publish = std::function<void(const workload::ThroughputReport&)>;
  using Log = std::function<void(const std::string&)>;

  ThroughputReporter(std::string path, Publish publish, Log log,
                     std::chrono::seconds interval = std::chrono::seconds(60));
  [[nodiscard]] const std::string& path() const { return path_; }

  // A new round: what was written before it measured the old size. Only the agent of the first
  // node (`first`) reads and publishes.
  void new_round(int world_size, int nodes, bool first);
  // Every monitor tick: reads what was appended (at most once a second unless `now_or_never`,
  // the round's last chance) and publishes when there is something new and the interval allows.
  void tick(Clock::time_point now, bool now_or_never = false);

  [[nodiscard]] const std::optional<workload::StepReport>& latest() const { return latest_; }

 private:
  void read_new();

  std::string path_;
  Publish publish_;
  Log log_;
  std::chrono::seconds interval_;
  int world_size_ = 1;
  int nodes_ = 1;
  bool first_ = false;
  std::uintmax_t offset_ = 0;  // bytes of the file already read
  std::string partial_;        // a line not yet ended
  std::optional<workload::StepReport> latest_;
  bool latest_published_ = false;
  bool warned_ = false;  // a bad line was logged this round
  std::optional<Clock::time_point> next_read_, next_publish_;
};

}  // namespace gpuorch::launch
