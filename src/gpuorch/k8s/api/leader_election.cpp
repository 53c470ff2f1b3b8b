#include "gpuorch/k8s/api/leader_election.hpp"

#include <fmt/format.h>

#include <ctime>
#include <thread>

#include "gpuorch/k8s/api/api_path.hpp"

namespace gpuorch::k8s {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

bool sleep_unless_stopped(std::chrono::milliseconds d, const std::atomic<bool>& stop) {
  const auto until = Clock::now() + d;
  while (Clock::now() < until) {
    if (stop.load()) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return !stop.load();
}

}  // namespace

std::string micro_time_now() {
  const auto now = std::chrono::system_clock::now();
  const auto t = std::chrono::system_clock::to_time_t(now);
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()) %
                  std::chrono::seconds(1);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return fmt::format("{}.{:06d}Z", buf, us.count());
}

LeaderElector::LeaderElector(ApiClient& api, LeaseOptions options, base::LogSink log)
    : api_(api), options_(std::move(options)), log_(std::move(log)) {}

void LeaderElector::log(const std::string& line, base::Severity severity,
                        base::SourceLocation where) const {
  if (log_) log_(severity, line, where);
}

std::string LeaderElector::path() const {
  return namespaced_path("/apis/coordination.k8s.io/v1", options_.ns, "leases", options_.name);
}

bool LeaderElector::try_acquire_or_renew() {
  const std::string now = micro_time_now();
  json lease;
  try {
    lease = api_.get(path());
  } catch (const ApiError& e) {
    if (e.status() != 404) throw;
    const json fresh = {{"apiVersion", "coordination.k8s.io/v1"},
                        {"kind", "Lease"},
                        {"metadata", {{"name", options_.name}, {"namespace", options_.ns}}},
                        {"spec",
                         {{"holderIdentity", options_.identity},
                          {"leaseDurationSeconds", options_.lease_duration.count()},
                          {"acquireTime", now},
                          {"renewTime", now},
                          {"leaseTransitions", 0}}}};
    try {
      api_.create(namespaced_path("/apis/coordination.k8s.io/v1", options_.ns, "leases"), fresh);
      return true;
    } catch (const ApiError& c) {
      if (c.status() == 409) return false;  // another replica created it first
      throw;
    }
  }
  json& spec = lease["spec"];
  if (!spec.is_object()) spec = json::object();
  const std::string holder = spec.value("holderIdentity", "");
  const std::string renewed = spec.value("renewTime", "");
  const std::string record = holder + "\n" + renewed;
  if (record != observed_) {
    observed_ = record;
    observed_at_ = Clock::now();
  }
  const bool mine = holder == options_.identity;
  std::int64_t duration = options_.lease_duration.count();
  if (const auto d = spec.find("leaseDurationSeconds"); d != spec.end() && d->is_number_integer()) {
    duration = std::max<std::int64_t>(1, d->get<std::int64_t>());
  }
  if (!mine && !holder.empty() && Clock::now() < observed_at_ + std::chrono::seconds(duration)) {
    return false;  // held by another replica that renewed within its lease
  }
  if (!mine) {
    spec["acquireTime"] = now;
    spec["leaseTransitions"] = spec.value("leaseTransitions", 0) + 1;
  }
  spec["holderIdentity"] = options_.identity;
  spec["leaseDurationSeconds"] = options_.lease_duration.count();
  spec["renewTime"] = now;
  try {
    api_.replace(path(), lease);  // keeps the resourceVersion it was read at
    return true;
  } catch (const ApiError& e) {
    if (e.status() == 409) return false;
    throw;
  }
}

bool LeaderElector::acquire(const std::atomic<bool>& stop) {
  bool waiting_logged = false;
  while (!stop.load()) {
    try {
      if (try_acquire_or_renew()) {
        log(fmt::format("leading: holding lease {}/{} as {}", options_.ns, options_.name,
                        options_.identity));
        return true;
      }
      if (!waiting_logged) {
        log(fmt::format("standing by: lease {}/{} is held by another replica", options_.ns,
                        options_.name));
        waiting_logged = true;
      }
    } catch (const std::exception& e) {
      log(fmt::format("lease {}/{}: {}", options_.ns, options_.name, e.what()),
          base::Severity::kWarning);
    }
    if (!sleep_unless_stopped(options_.retry_period, stop)) break;
  }
  return false;
}

bool LeaderElector::hold(const std::atomic<bool>& stop, const std::function<bool()>& can_lead) {
  auto last_renewed = Clock::now();
  bool refusal_logged = false;
  while (sleep_unless_stopped(options_.retry_period, stop)) {
    bool renewed = false;
    if (can_lead && !can_lead()) {
      if (!refusal_logged) {
        log(fmt::format("not renewing lease {}/{}: this replica cannot decide", options_.ns,
                        options_.name),
            base::Severity::kError);
        refusal_logged = true;
      }
    } else {
      try {
        renewed = try_acquire_or_renew();
      } catch (const std::exception& e) {
        log(fmt::format("lease renewal: {}", e.what()), base::Severity::kWarning);
      }
    }
    if (renewed) {
      last_renewed = Clock::now();
    } else if (Clock::now() - last_renewed > options_.renew_deadline) {
      log(fmt::format("lost lease {}/{}: not renewed within {} s", options_.ns, options_.name,
                      options_.renew_deadline.count()),
          base::Severity::kError);
      return false;
    }
  }
  return true;
}

void LeaderElector::release() {
  try {
    json lease = api_.get(path());
    if (lease["spec"].value("holderIdentity", "") != options_.identity) return;
    lease["spec"]["holderIdentity"] = "";
    lease["spec"]["leaseDurationSeconds"] = 1;
    lease["spec"]["renewTime"] = micro_time_now();
    api_.replace(path(), lease);
    log(fmt::format("released lease {}/{}", options_.ns, options_.name));
  } catch (const std::exception& e) {
    log(fmt::format("could not release lease {}/{}: {}", options_.ns, options_.name, e.what()),
        base::Severity::kError);
  }
}

}  // namespace gpuorch::k8s
