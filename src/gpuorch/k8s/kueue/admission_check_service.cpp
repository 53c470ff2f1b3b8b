#include "gpuorch/k8s/kueue/admission_check_service.hpp"

#include <fmt/format.h>

#include <list>
#include <thread>
#include <vector>

#include "gpuorch/k8s/api/api_path.hpp"
#include "gpuorch/k8s/api/informer.hpp"
#include "gpuorch/k8s/api/patient_get.hpp"
#include "gpuorch/k8s/mirror/binding.hpp"

namespace gpuorch::k8s::kueue {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr const char* kResourceApi = "/apis/resource.k8s.io/v1";
constexpr const char* kDraKinds[] = {"resourceslices", "deviceclasses", "resourceclaims",
                                     "resourceclaimtemplates"};

}  // namespace

AdmissionCheckService::AdmissionCheckService(ApiClient& api, AdmissionCheckOptions options)
    : api_(api),
      options_(std::move(options)),
      feed_(options_.mirror, options_.log),
      empty_(options_.mirror),
      checks_(options_.placeable) {}

void AdmissionCheckService::log(const std::string& line, base::Severity severity,
                                base::SourceLocation where) const {
  if (options_.log) options_.log(severity, line, where);
}

bool AdmissionCheckService::alive() const {
  const std::int64_t ns = heartbeat_ns_.load();
  return ns != 0 && Clock::now() - Clock::time_point(std::chrono::nanoseconds(ns)) <
                        std::chrono::duration_cast<Clock::duration>(options_.stale_after);
}

std::string AdmissionCheckService::metrics() const {
  return prometheus_counter("gpuorch_admission_check_verdicts_total",
                            "Verdicts written into Workloads' admission checks", written_.load()) +
         prometheus_counter("gpuorch_admission_check_write_failures_total",
                            "Verdicts or AdmissionCheck statuses the API server did not take",
                            refused_.load()) +
         prometheus_counter("gpuorch_admission_check_passes_total",
                            "Passes that decided the waiting Workloads", passes_.load());
}

void AdmissionCheckService::on_node(const json& obj, bool deleted) {
  const std::lock_guard lock(mutex_);
  feed_.node(obj, deleted);
  dirty_ = true;
}

void AdmissionCheckService::on_pod(const json& obj, bool deleted) {
  const PodObject p = pod_from_json(obj);
  const std::lock_guard lock(mutex_);
  feed_.pod(p, deleted);
  checks_.pod(obj, p, deleted);
  dirty_ = true;
}

void AdmissionCheckService::on_dra(const json& obj, bool deleted, std::string_view kind) {
  const std::lock_guard lock(mutex_);
  if (kind == "resourceslices") {
    feed_.slice(obj, deleted);
    empty_stale_ = true;  // the nodes' DRA GPUs changed
  } else if (kind == "deviceclasses") {
    feed_.device_class(obj, deleted);
  } else if (kind == "resourceclaims") {
    feed_.claim(obj, deleted);
  } else {
    checks_.claim_template(obj, deleted);
  }
  dirty_ = true;
}

bool AdmissionCheckService::pass() {
  std::vector<Verdict> verdicts;
  std::vector<json> inactive;
  {
    const std::lock_guard lock(mutex_);
    inactive = checks_.inactive_checks();
    if (dirty_ && checks_.waiting()) {
      dirty_ = false;
      const bool rebuild = feed_.mirror().needs_build();
      if (const std::string why = feed_.ensure_built(); !why.empty()) {
        log(why, base::Severity::kError);
        return false;
      }
      try {
        if (rebuild || empty_stale_ || !empty_.built()) {
          // The same nodes with their DRA GPUs, nothing allocated.
          std::map<std::string, cluster::NodeSpec> nodes = feed_.nodes();
          for (auto& [name, spec] : nodes) (void)feed_.dra().inventory().apply(spec);
          empty_.set_nodes(nodes);
          empty_stale_ = false;
          empty_.ensure_built(options_.mirror.history.empty() ? feed_.history()
                                                              : std::vector<workload::PodSpec>{});
        }
      } catch (const std::exception& e) {
        log(fmt::format("the empty cluster's mirror cannot be built: {}", e.what()),
            base::Severity::kError);
        dirty_ = true;
        return false;
      }
      // A decision that throws (a bug, an object the core cannot use) costs this pass, after
      // the backoff, never the controller.
      try {
        verdicts = checks_.evaluate(feed_.mirror(), empty_);
        ++passes_;
      } catch (const std::exception& e) {
        log(fmt::format("the verdicts could not be decided: {}", e.what()), base::Severity::kError);
        dirty_ = true;
        return false;
      }
    }
  }
  bool ok = true;
  for (const json& check : inactive) {
    const std::string name = check["metadata"].value("name", "");
    try {
      api_.patch(fmt::format("{}/admissionchecks/{}/status", kGroupVersion, percent_encode(name)),
                 active_status(check, now_rfc3339()));
      const std::lock_guard lock(mutex_);
      checks_.mark_active(name);
      log(fmt::format("AdmissionCheck {} (controllerName {}) is Active", name,
                      kPlaceableController));
    } catch (const std::exception& e) {
      log(fmt::format("AdmissionCheck {}: status not written: {}", name, e.what()),
          base::Severity::kWarning);
      ++refused_;
      ok = false;
    }
  }
  for (const Verdict& v : verdicts) {
    try {
      api_.patch(namespaced_path(kGroupVersion, v.ns, "workloads", v.name) + "/status",
                 check_patch(v, now_rfc3339()), "application/json-patch+json");
      ++written_;
      log(fmt::format("workload {}/{}: {} {}", v.ns, v.name, v.state, v.message));
    } catch (const std::exception& e) {
      // Changed meanwhile (the test failed) or not taken: decided again after the backoff.
      const std::lock_guard lock(mutex_);
      checks_.unwritten(v);
      dirty_ = true;
      log(fmt::format("workload {}/{}: verdict {} not written: {}", v.ns, v.name, v.state,
                      e.what()),
          base::Severity::kWarning);
      ++refused_;
      ok = false;
    }
  }
  return ok;
}

void AdmissionCheckService::run(const std::atomic<bool>& stop) {
  const std::string version = kGroupVersion;
  try {
    if (!patient_get(api_, version, std::chrono::seconds(20), stop, options_.log, {})) return;
  } catch (const ApiError& e) {
    if (e.status() == 404) {
      throw std::runtime_error(fmt::format(
          "the API server does not serve {} (Kueue v0.15 or later is not installed)", version));
    }
    throw std::runtime_error(fmt::format("the API server refused {}: {}", version, e.what()));
  }
  auto handlers = [this](std::function<void(const json&, bool)> on) {
    InformerHandlers h;
    h.on_add = h.on_update = [on](const json& o) { on(o, false); };
    h.on_delete = [on](const json& o) { on(o, true); };
    h.on_synced = [this] { ++synced_; };
    h.on_error = [this](const std::string& what) {
      log(fmt::format("watch: {}", what), base::Severity::kWarning);
    };
    return h;
  };
  auto guarded = [this](auto member) {
    return [this, member](const json& o, bool deleted) {
      const std::lock_guard lock(mutex_);
      if ((checks_.*member)(o, deleted)) dirty_ = true;
    };
  };
  Informer nodes(api_, "/api/v1/nodes", handlers([this](const json& o, bool d) { on_node(o, d); }));
  Informer pods(api_, "/api/v1/pods", handlers([this](const json& o, bool d) { on_pod(o, d); }),
                "status.phase!=Succeeded,status.phase!=Failed");
  Informer workloads(api_, version + "/workloads", handlers(guarded(&PlaceableChecks::workload)));
  Informer admission_checks(api_, version + "/admissionchecks",
                            handlers(guarded(&PlaceableChecks::admission_check)));
  Informer flavors(api_, version + "/resourceflavors", handlers(guarded(&PlaceableChecks::flavor)));
  // DRA where served (docs/kueue.md, "Pods with ResourceClaims"): slices are GPUs, claims
  // allocated by anyone hold theirs, templates stand for the claims of pods not made yet.
  std::list<Informer> dra;  // never moved: the threads hold references
  try {
    if (!patient_get(api_, kResourceApi, std::chrono::seconds(20), stop, options_.log, {})) return;
    for (const char* kind : kDraKinds) {
      (void)api_.get(fmt::format("{}/{}?limit=1", kResourceApi, kind));
    }
    const std::lock_guard lock(mutex_);
    checks_.use_dra(&feed_.dra());
    for (const char* kind : kDraKinds) {
      dra.emplace_back(api_, fmt::format("{}/{}", kResourceApi, kind),
                       handlers([this, kind](const json& o, bool d) { on_dra(o, d, kind); }));
    }
    informers_ += static_cast<int>(std::size(kDraKinds));
  } catch (const ApiError& e) {
    if (e.status() != 404 && e.status() != 403) throw;
    log(fmt::format("resource.k8s.io/v1 {}: workloads whose pods have resourceClaims are retried",
                    e.status() == 404 ? "is not served" : "may not be listed"),
        base::Severity::kWarning);
  }

  std::atomic<bool> quit{false};
  std::string failure;
  {
    std::vector<std::jthread> threads;
    for (Informer* i : {&nodes, &pods, &workloads, &admission_checks, &flavors}) {
      threads.emplace_back([i, &quit] { i->run(quit); });
    }
    for (Informer& i : dra) threads.emplace_back([&i, &quit] { i.run(quit); });
    const auto started = Clock::now();
    bool synced = false;
    auto backoff = std::chrono::milliseconds(1000);
    auto next = Clock::now();
    while (!stop.load()) {
      heartbeat_ns_ =
          std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
              .count();
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      if (!synced) {
        if (synced_.load() < informers_.load()) {
          if (Clock::now() - started > options_.sync_timeout) {
            failure = fmt::format(
                "the informers did not list nodes, pods and Kueue's objects within {} s (see the "
                "watch errors above)",
                options_.sync_timeout.count());
            break;
          }
          continue;
        }
        synced = true;
        log("synced");
      }
      if (Clock::now() < next) continue;
      if (pass()) {
        backoff = std::chrono::milliseconds(1000);
      } else {
        next = Clock::now() + backoff;
        backoff = std::min(backoff * 2, std::chrono::milliseconds(30000));
      }
    }
    quit = true;
  }
  if (!failure.empty()) throw std::runtime_error(failure);
}

}  // namespace gpuorch::k8s::kueue
