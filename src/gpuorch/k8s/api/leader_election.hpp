#pragma once
// Leader election through a coordination.k8s.io/v1 Lease, as kube-scheduler and client-go's
// leaderelection do it: the holder renews the lease every retry period; another replica takes it
// only after it has seen the same record unchanged for the lease duration (measured on its own
// clock, so clock skew between hosts does not matter); a holder that cannot renew within the
// renew deadline stops acting as leader. Optimistic concurrency (resourceVersion) makes a
// take-over by two replicas at once impossible: one PUT wins, the other gets 409.
#include <atomic>
#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "gpuorch/base/log.hpp"
#include "gpuorch/k8s/api/api_client.hpp"

namespace gpuorch::k8s {

struct LeaseOptions {
  std::string ns = "default";
  std::string name = "gpuorch-scheduler";
  std::string identity;  // unique per replica: hostname_random
  std::chrono::seconds lease_duration{15};
  std::chrono::seconds renew_deadline{10};
  std::chrono::seconds retry_period{2};
};

class LeaderElector {
 public:
  LeaderElector(ApiClient& api, LeaseOptions options, base::LogSink log = {});

  // Blocks until this replica holds the lease (true) or `stop` (false).
  bool acquire(const std::atomic<bool>& stop);
  // Renews every retry period until `stop` (true) or until a renewal has not succeeded for the
  // renew deadline (false: leadership is lost and the caller must stop acting as leader). While
  // `can_lead` says no (the leader cannot decide), it does not renew: a leader that cannot do the
  // work must not keep the standby from taking it over.
  bool hold(const std::atomic<bool>& stop, const std::function<bool()>& can_lead = {});
  // Gives the lease up (a clean stop), so a standby takes over at once instead of after expiry.
  void release();

  // One round: true when this replica holds the lease afterwards.
  bool try_acquire_or_renew();

  [[nodiscard]] const LeaseOptions& options() const { return options_; }

 private:
  [[nodiscard]] std::string path() const;
  void log(const std::string& line, base::Severity severity = base::Severity::kInfo,
           base::SourceLocation where = base::SourceLocation::current()) const;

  ApiClient& api_;
  LeaseOptions options_;
  base::LogSink log_;
  std::string observed_;  // holder + renewTime last seen
  std::chrono::steady_clock::time_point observed_at_;
};

// "2026-12-01T20:30:00.123456Z": the MicroTime a Lease's times are written in.
std::string micro_time_now();

}  // namespace gpuorch::k8s
