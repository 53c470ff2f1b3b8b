#include "gpuorch/k8s/scheduler/scheduler_service.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <thread>

#include "gpuorch/base/printable.hpp"
#include "gpuorch/k8s/api/api_path.hpp"
#include "gpuorch/k8s/api/informer.hpp"
#include "gpuorch/k8s/api/patient_get.hpp"
#include "gpuorch/k8s/mirror/binding.hpp"
#include "gpuorch/k8s/mirror/gang_check.hpp"
#include "gpuorch/k8s/mirror/node_object.hpp"
#include "gpuorch/k8s/mirror/pod_group.hpp"
#include "gpuorch/k8s/mirror/unevaluated_fields.hpp"

namespace gpuorch::k8s {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string pod_path(const PodObject& p) { return k8s::pod_path(p.ns, p.name); }

// On an elastic gang's PodGroup (RFC 3339): when the scheduler last grew or shrank it (its
// resize interval runs from there), and when it last lost members while it kept running (a
// shrink, or replicas above minMember taken by a preemption: its training restarted, and a
// preemption of it loses what it did since).
constexpr const char* kResizedAtAnnotation = "gpuorch.io/resized-at";
constexpr const char* kRestartedAtAnnotation = "gpuorch.io/restarted-at";

std::int64_t unix_now_s() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A PodGroup's path: scheduler-plugins' (the group's status lives there), or the upstream gang
// API's (`upstream`).
std::string podgroup_path(const json& meta, bool upstream) {
  return namespaced_path(
      upstream ? "/apis/scheduling.k8s.io/v1beta1" : "/apis/scheduling.x-k8s.io/v1alpha1",
      meta.value("namespace", ""), "podgroups", meta.value("name", ""));
}

}  // namespace

SchedulerService::SchedulerService(ApiClient& api, SchedulerServiceOptions options)
    : api_(api),
      options_(std::move(options)),
      feed_(options_.mirror, options_.log),
      mirror_(feed_.mirror()),
      dra_(feed_.dra()),
      backoff_(options_.backoff_initial, options_.backoff_max),
      writes_([this](const std::string& key, const std::string& error, int attempt) {
        log(fmt::format("{}: status write failed (attempt {}, retried with backoff): {}", key,
                        attempt, error),
            base::Severity::kWarning);
      }) {
  beat();
}

SchedulerService::~SchedulerService() = default;

void SchedulerService::log(const std::string& line, base::Severity severity,
                           base::SourceLocation where) const {
  if (options_.log) options_.log(severity, line, where);
}

bool SchedulerService::ours(const PodObject& pod) const {
  return pod.scheduler_name == options_.scheduler_name;
}

void SchedulerService::push(Event e) {
  {
    const std::lock_guard lock(events_mutex_);
    events_.push_back(std::move(e));
  }
  events_cv_.notify_one();
}

void SchedulerService::beat() {
  heartbeat_ns_ =
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

bool SchedulerService::alive() const {
  const auto last = Clock::time_point(std::chrono::nanoseconds(heartbeat_ns_.load()));
  return heartbeat_ns_.load() != 0 && Clock::now() - last < options_.stale_after;
}

bool SchedulerService::discover_podgroups(const std::atomic<bool>& stop) {
  static constexpr const char* kPath = "/apis/scheduling.x-k8s.io/v1alpha1";
  try {
    if (!patient_get(api_, kPath, options_.startup_timeout, stop, options_.log,
                     [this] { beat(); })) {
      return false;  // stopped meanwhile
    }
    podgroups_served_ = true;
  } catch (const ApiError& e) {
    if (e.status() != 404) {
      throw std::runtime_error(fmt::format("the API server refused {}: {}", kPath, e.what()));
    }
    log("no scheduling.x-k8s.io/v1alpha1 API (PodGroup CRD not installed): gangs will wait",
        base::Severity::kWarning);
  }
  // The upstream gang API is beta in v1.37 and off unless the cluster turns GenericWorkload on:
  // its absence is normal and said once.
  // The list itself is asked, so a role without the permission (manifests older than this
  // scheduler) leaves the upstream API out instead of an informer that never syncs.
  try {
    upstream_podgroups_served_ =
        patient_get(api_, std::string(kUpstreamPodGroups) + "?limit=1", options_.startup_timeout,
                    stop, options_.log, [this] { beat(); })
            .has_value();
  } catch (const ApiError& e) {
    if (e.status() == 403) {
      log(fmt::format("not allowed to list {} ({}): gangs of the upstream API are not seen; give "
                      "the scheduler's ClusterRole get/list/watch on scheduling.k8s.io podgroups",
                      kUpstreamPodGroups, e.what()),
          base::Severity::kWarning);
    } else if (e.status() == 404) {
      log("scheduling.k8s.io/v1beta1 is not served (GenericWorkload off): pods name gangs "
          "through scheduler-plugins' PodGroups only");
    } else {
      throw std::runtime_error(
          fmt::format("the API server refused {}: {}", kUpstreamPodGroups, e.what()));
    }
  }
  return true;
}

bool SchedulerService::discover_queues(const std::atomic<bool>& stop) {
  static constexpr const char* kPath = "/apis/scheduling.run.ai/v2";
  try {
    return patient_get(api_, kPath, options_.startup_timeout, stop, options_.log,
                       [this] { beat(); })
        .has_value();
  } catch (const ApiError& e) {
    if (e.status() == 404) {
      throw std::runtime_error(
          "--queues: the API server does not serve scheduling.run.ai/v2 (the Queue CRD of "
          "`gpuorch manifests`, or KAI-Scheduler's, is not installed)");
    }
    throw std::runtime_error(fmt::format("the API server refused {}: {}", kPath, e.what()));
  }
}

void SchedulerService::run(const std::atomic<bool>& stop) {
  beat();
  // PodGroups only where their API is served (the CRD is installed); gangs wait otherwise.
  if (!discover_podgroups(stop)) return;
  if (options_.queues && !discover_queues(stop)) return;
  if (!discover_dra(stop)) return;
  auto handlers = [this](Event::Kind kind) {
    InformerHandlers h;
    h.on_add = h.on_update = [this, kind](const json& o) {
      push({kind, Event::Type::kUpsert, o, {}});
    };
    h.on_delete = [this, kind](const json& o) { push({kind, Event::Type::kDelete, o, {}}); };
    h.on_synced = [this] { push({Event::Kind::kSynced, Event::Type::kUpsert, {}, {}}); };
    h.on_error = [this](const std::string& what) {
      log(fmt::format("watch: {}", what), base::Severity::kWarning);
    };
    return h;
  };
  Informer nodes(api_, "/api/v1/nodes", handlers(Event::Kind::kNode));
  // Finished pods hold nothing; kube-scheduler watches the same set.
  Informer pods(api_, "/api/v1/pods", handlers(Event::Kind::kPod),
                "status.phase!=Succeeded,status.phase!=Failed");
  Informer groups(api_, kPluginsPodGroups, handlers(Event::Kind::kPodGroup));
  Informer upstream_groups(api_, kUpstreamPodGroups, handlers(Event::Kind::kUpstreamPodGroup));
  Informer queues(api_, "/apis/scheduling.run.ai/v2/queues", handlers(Event::Kind::kQueue));
  Informer slices(api_, "/apis/resource.k8s.io/v1/resourceslices",
                  handlers(Event::Kind::kResourceSlice));
  Informer classes(api_, "/apis/resource.k8s.io/v1/deviceclasses",
                   handlers(Event::Kind::kDeviceClass));
  Informer claims(api_, "/apis/resource.k8s.io/v1/resourceclaims",
                  handlers(Event::Kind::kResourceClaim));
  // The threads stop on `quit`: set when `stop` is, and when this loop gives up on its own.
  std::atomic<bool> quit{false};
  std::string failure;
  {
    std::vector<std::jthread> threads;
    threads.reserve(8 + static_cast<std::size_t>(std::max(1, options_.binders)));
    threads.emplace_back([&] { nodes.run(quit); });
    threads.emplace_back([&] { pods.run(quit); });
    if (podgroups_served_) threads.emplace_back([&] { groups.run(quit); });
    if (upstream_podgroups_served_) threads.emplace_back([&] { upstream_groups.run(quit); });
    if (options_.queues) threads.emplace_back([&] { queues.run(quit); });
    if (dra_served_) {
      threads.emplace_back([&] { slices.run(quit); });
      threads.emplace_back([&] { classes.run(quit); });
      threads.emplace_back([&] { claims.run(quit); });
    }
    for (int i = 0; i < std::max(1, options_.binders); ++i) {
      threads.emplace_back([&] { bind_loop(quit); });
    }
    const auto started = Clock::now();
    last_retry_ = started;
    std::deque<Event> batch;
    while (!stop.load()) {
      beat();
      {
        std::unique_lock lock(events_mutex_);
        events_cv_.wait_for(lock, std::chrono::milliseconds(200), [&] {
          const auto at = Clock::now();
          return !events_.empty() ||
                 (synced_ && !active_.empty() && at >= settle_until_ &&
                  !(preempt_awaits_bound_ && at < awaits_bound_until_)) ||
                 stop.load();
        });
        batch.swap(events_);
      }
      // An object the server sends that is not what its API says (or a bug here) costs that
      // one event or decision, never the scheduler.
      for (Event& e : batch) {
        try {
          handle(e);
        } catch (const std::exception& ex) {
          log(fmt::format("ignored an event that could not be used: {}", ex.what()),
              base::Severity::kWarning);
        }
      }
      batch.clear();
      const auto now = Clock::now();
      writes_.retry_due(now);
      if (!synced_) {
        if (now - started > options_.sync_timeout) {
          failure = fmt::format(
              "the informers did not list nodes{} and pods within {} s (see the watch errors "
              "above)",
              podgroups_served_ ? ", PodGroups" : "", options_.sync_timeout.count());
          break;
        }
        continue;
      }
      if (now - last_retry_ > options_.retry_unschedulable) shrink_checked_ = false;
      if (cluster_changed_ || now - last_retry_ > options_.retry_unschedulable) {
        retry_unschedulable();
      }
      for (const std::string& uid : backoff_.due(now)) requeue(uid);
      // A few decisions, then back to the events, so binds and deletions are seen promptly.
      // Nothing is decided while a job waits for our binds to be seen before preempting (at
      // most 2 s: a bind refused is never seen): a job after it would take what it reclaims.
      for (int i = 0;
           i < 32 && now >= settle_until_ && !(preempt_awaits_bound_ && now < awaits_bound_until_);
           ++i) {
        if (!schedule_next()) break;
      }
      counters_.queue_length = active_.size() + unschedulable_.size() + backoff_.parked_count();
      if (options_.queues && queue_status_dirty_ &&
          now - last_queue_status_ >= std::chrono::seconds(1)) {
        last_queue_status_ = now;
        queue_status_dirty_ = false;
        write_queue_statuses();
      }
    }
    quit = true;
    bind_cv_.notify_all();
  }
  if (!failure.empty()) throw std::runtime_error(failure);
}

void SchedulerService::handle(Event& e) {
  // What the Queues' statuses count changes only with pods, binds and the Queues themselves.
  if (e.kind == Event::Kind::kPod || e.kind == Event::Kind::kQueue ||
      e.kind == Event::Kind::kBindDone || e.kind == Event::Kind::kBindFailed) {
    queue_status_dirty_ = true;
  }
  switch (e.kind) {
    case Event::Kind::kNode:
      handle_node(e.object, e.type == Event::Type::kDelete);
      break;
    case Event::Kind::kPod:
      handle_pod(e.object, e.type == Event::Type::kDelete);
      break;
    case Event::Kind::kPodGroup:
    case Event::Kind::kUpstreamPodGroup:
      handle_podgroup(e.object, e.type == Event::Type::kDelete,
                      e.kind == Event::Kind::kUpstreamPodGroup);
      break;
    case Event::Kind::kQueue:
      if (const std::string refused = queues_.update(e.object, e.type == Event::Type::kDelete);
          !refused.empty()) {
        log(refused, base::Severity::kWarning);
      }
      if (e.type == Event::Type::kDelete && e.object.is_object()) {
        // Nothing is owed to a Queue that is gone; a new one of that name gets its status anew.
        const std::string name =
            e.object.value("metadata", json::object()).value("name", std::string());
        writes_.withdraw("queue/" + name);
        queue_status_written_.erase(name);
      }
      cluster_changed_ = true;  // a limit raised may let a pod go
      break;
    case Event::Kind::kSynced:
      if (++synced_informers_ >= (podgroups_served_ ? 3 : 2) +
                                     (upstream_podgroups_served_ ? 1 : 0) +
                                     (options_.queues ? 1 : 0) + (dra_served_ ? 3 : 0) &&
          !synced_) {
        synced_ = true;
        log(fmt::format("synced: {} nodes, {} pods", feed_.nodes().size(), feed_.live_pods()));
      }
      break;
    case Event::Kind::kResourceSlice:
      // Slices are the nodes' GPUs.
      if (feed_.slice(e.object, e.type == Event::Type::kDelete)) cluster_changed_ = true;
      break;
    case Event::Kind::kDeviceClass:
      feed_.device_class(e.object, e.type == Event::Type::kDelete);
      cluster_changed_ = true;
      break;
    case Event::Kind::kResourceClaim:
      handle_claim(e.object, e.type == Event::Type::kDelete);
      break;
    case Event::Kind::kBindDone:
    case Event::Kind::kClaimsWritten:
      // The API server holds the claims' allocation now: the mirror keeps counting it, bound
      // or not, until the claim says otherwise.
      assumed_claims_.erase(e.uid);
      if (e.kind == Event::Kind::kBindDone) binding_.erase(e.uid);
      break;
    case Event::Kind::kBindFailed: {
      binding_.erase(e.uid);
      mirror_.release(e.uid);
      drop_assumed_claims(e.uid);
      cluster_changed_ = true;
      const auto it = feed_.pods().find(e.uid);
      // Never back in the queue at once (a bind refused again would spin): the pod waits its
      // backoff, and its condition says why it is still pending.
      if (it != feed_.pods().end() && it->second.node_name.empty()) {
        fail_attempt(e.uid);
        backoff_.park(e.uid);
        const std::string why = e.object.is_string() ? e.object.get<std::string>() : "";
        const std::string message = fmt::format("binding rejected: {}", why);
        if (reported_[e.uid] != message) {
          reported_[e.uid] = message;
          write_condition(it->second, "SchedulerError", message, true);
        }
      }
      break;
    }
  }
}

void SchedulerService::handle_node(const json& obj, bool deleted) {
  // A kubelet's status report changes nothing the core sees: no retry of the unschedulable pods
  // for it.
  if (feed_.node(obj, deleted).changed) cluster_changed_ = true;
}

void SchedulerService::handle_podgroup(const json& obj, bool deleted, bool upstream) {
  if (!obj.is_object() || !obj.contains("metadata") || !obj["metadata"].is_object()) return;
  json object = obj;
  // A watch's objects of a built-in kind may come without apiVersion and kind; the Events about
  // the group name them.
  if (upstream) {
    object["apiVersion"] = "scheduling.k8s.io/v1beta1";
    object["kind"] = "PodGroup";
  }
  const PodGroup parsed = podgroup_from_json(object);
  const std::string& key = parsed.key;
  cluster_changed_ = true;  // a new or changed group may let its gang go
  if (deleted) {
    podgroups_.erase(key);
    marks_unseen_.erase(key);
    gang_measured_.erase(key);
    writes_.withdraw("podgroup/" + key);  // nothing is owed to a PodGroup that is gone
    writes_.withdraw("podgroup-event/" + key);
    return;
  }
  PodGroupInfo& g = podgroups_[key];
  g.object = std::move(object);
  static_cast<PodGroup&>(g) = parsed;
  // The marks as the API shows them; our own seen back stop being remembered apart. Anyone
  // else's change (a replay's clock) moves the gang's clock: decided again.
  const auto annotation = [&](const char* name) -> std::string {
    const auto a = g.object["metadata"].find("annotations");
    if (a == g.object["metadata"].end() || !a->is_object()) return "";
    const auto v = a->find(name);
    return v != a->end() && v->is_string() ? v->get<std::string>() : "";
  };
  bool moved = false;
  for (const auto& [name, at] : {std::pair{kResizedAtAnnotation, &g.resized_s},
                                 std::pair{kRestartedAtAnnotation, &g.restarted_s}}) {
    const std::string text = annotation(name);
    const std::int64_t was = *at;
    *at = rfc3339_seconds(text);
    bool own = false;
    if (const auto mine = marks_unseen_.find(key); mine != marks_unseen_.end()) {
      if (const auto u = mine->second.find(name);
          u != mine->second.end() && u->second.first == text) {
        mine->second.erase(u);
        own = true;
      }
    }
    if (!own && *at != was) moved = true;
  }
  if (moved) {
    shrink_checked_ = false;
    settle_after_change();
  }
}

void SchedulerService::forget_queued(const std::string& uid) {
  active_.erase(uid);
  unschedulable_.erase(uid);
  backoff_.unpark(uid);
}

void SchedulerService::settle_after_change() {
  cluster_changed_ = true;
  if (const auto wait = options_.settle_after_finish; wait.count() > 0) {
    const auto now = Clock::now();
    if (now >= settle_until_) settle_from_ = now;
    settle_until_ = std::min(now + wait, settle_from_ + 4 * wait);
  }
}

void SchedulerService::requeue(const std::string& uid) {
  const auto it = feed_.pods().find(uid);
  if (it == feed_.pods().end()) return;
  const PodObject& p = it->second;
  // A gang's members queue where their PodGroup does (the coscheduling plugin's order), so a
  // member created again after an eviction keeps its running gang's place, as the job layer's
  // growth does (docs/sim-timeline.md, "Same answer over time").
  if (const auto g = podgroups_.find(p.gang); !p.gang.empty() && g != podgroups_.end()) {
    const json& meta = g->second.object["metadata"];
    active_.push(uid, p.priority,
                 meta.value("creationTimestamp", "") + " " + p.gang + "/" + p.name);
    return;
  }
  active_.push(uid, p.priority, p.created + " " + p.key());
}

void SchedulerService::fail_attempt(const std::string& uid) { backoff_.fail(uid, Clock::now()); }

void SchedulerService::handle_pod(const json& obj, bool deleted) {
  PodObject p = pod_from_json(obj);
  if (p.uid.empty()) return;
  const std::string uid = p.uid;
  const bool gone = deleted || p.terminal();
  // The claim made from its template arriving in its status: what it waited for may be there.
  if (const auto old = feed_.pods().find(uid);
      !gone && p.node_name.empty() && old != feed_.pods().end() && old->second.claims != p.claims) {
    cluster_changed_ = true;
  }
  // A running member of an elastic gang whose start time moved: when its gang may resize next
  // changed. A kubelet writes it once, as it starts the pod; a time-compressed replay moves it
  // at every simulated tick (docs/sim-timeline.md, "Same answer over time").
  bool clock_moved = false;
  if (const auto old = feed_.pods().find(uid); old != feed_.pods().end() && !gone) {
    clock_moved = !p.gang.empty() && p.phase == "Running" && old->second.phase == "Running" &&
                  old->second.joined_s != p.joined_s;
  }
  const bool released = feed_.pod(p, deleted);  // kept, counted, or let go, claims and all
  // A pod gone or placed owes nothing more: no retry, no status write left to make.
  auto settle = [&] {
    forget_queued(uid);
    backoff_.forget(uid);
    writes_.withdraw("pod/" + uid);
    reported_.erase(uid);
    preferences_logged_.erase(uid);
  };
  if (gone) {
    release_claims_of(p);
    settle();
    if (released) settle_after_change();
    member_gone(uid);
    victim_gone(uid);
    return;
  }
  if (!p.node_name.empty()) {
    settle();
    // The launcher overwrites its report as the job changes size: each one is kept as it comes,
    // not only those still there when the gang is next decided.
    if (options_.queues && !p.gang.empty() && p.throughput) note_throughput(p);
    // Any gang's, not only one already valued for growth: a gang that started with exactly
    // minMember pods and got more since is first valued once its interval has passed, which is
    // what this move may say.
    if (clock_moved) {
      shrink_checked_ = false;
      settle_after_change();
    }
    // A job that waited for our binds to be seen before preempting is tried again (nothing
    // else may change the cluster meanwhile, and it would wait for --retry-unschedulable), at
    // once rather than after its backoff: nothing was decided meanwhile (the decision loop).
    if (preempt_awaits_bound_ && ours(p)) {
      preempt_awaits_bound_ = false;
      cluster_changed_ = true;
      for (const std::string& m : awaiting_bound_) backoff_.forget(m);
      awaiting_bound_.clear();
    }
    return;
  }
  const bool queued = active_.contains(uid) || backoff_.parked(uid);
  if (!ours(p) || p.deleting || binding_.contains(uid) || mirror_.accounted(uid)) return;
  if (p.gated()) {
    // Not ours to decide yet (Kueue has not admitted it): out of every queue until the last
    // gate goes, which arrives here as an update.
    forget_queued(uid);
    report_gated(p);
    return;
  }
  // An update of a pod already reported (our own status write among them) waits for a change.
  if (queued || unschedulable_.contains(uid)) return;
  requeue(uid);
}

void SchedulerService::report_gated(const PodObject& pod) {
  std::vector<std::string> gates = pod.scheduling_gates;
  std::sort(gates.begin(), gates.end());
  const std::string message =
      fmt::format("waiting for scheduling gates: [{}]", fmt::join(gates, " "));
  if (reported_[pod.uid] == message) return;
  reported_[pod.uid] = message;
  // kube-scheduler's words for it; no Event (a gated pod is not a failure).
  if (pod.unscheduled_reason == "SchedulingGated") return;
  write_condition(pod, "SchedulingGated", message, false);
}

void SchedulerService::write_condition(const PodObject& pod, const std::string& reason,
                                       const std::string& message, bool event) {
  const json status = {{"status",
                        {{"conditions", json::array({{{"type", "PodScheduled"},
                                                      {"status", "False"},
                                                      {"reason", reason},
                                                      {"message", message},
                                                      {"lastTransitionTime", now_rfc3339()}}})}}}};
  const json involved = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"namespace", pod.ns}, {"name", pod.name}, {"uid", pod.uid}}}};
  // The condition first, then the Event; a retry after the condition was taken posts only the
  // Event (the state is shared by the copies std::function makes).
  auto patched = std::make_shared<bool>(false);
  writes_.submit("pod/" + pod.uid, [this, path = pod_path(pod), ns = pod.ns, status, involved,
                                    message, event, patched] {
    if (!*patched) {
      api_.patch(path + "/status", status, "application/strategic-merge-patch+json");
      *patched = true;
    }
    if (event) post_event(ns, involved, "Warning", "FailedScheduling", message);
  });
}

void SchedulerService::retry_unschedulable() {
  const auto now = Clock::now();
  for (const auto& [uid, message] : unschedulable_) {
    if (!feed_.pods().contains(uid)) continue;
    // A pod that failed just now waits out its backoff even when the cluster changed.
    if (backoff_.ready_at(uid) <= now) {
      requeue(uid);
    } else {
      backoff_.park(uid);
    }
  }
  // Their last message stays known (kept in retried_) so an unchanged verdict is not re-written.
  for (auto& [uid, message] : unschedulable_) reported_[uid] = std::move(message);
  unschedulable_.clear();
  cluster_changed_ = false;
  last_retry_ = Clock::now();
}

bool SchedulerService::schedule_next() {
  const std::optional<std::string> next = active_.pop();
  if (!next) return false;
  const std::string uid = *next;
  const auto it = feed_.pods().find(uid);
  if (it == feed_.pods().end()) return true;
  const PodObject& pod = it->second;  // deciding never changes the feed's pods
  if (!pod.node_name.empty() || !ours(pod) || pod.deleting || pod.gated() ||
      binding_.contains(uid) || mirror_.accounted(uid)) {
    return true;
  }
  ++counters_.attempts;
  try {
    decide(pod);
  } catch (const std::exception& ex) {
    // A decision that throws is a failure like any other: the pod waits its backoff.
    log(fmt::format("{}: the scheduling decision failed: {}", pod.key(), ex.what()),
        base::Severity::kError);
    fail_attempt(uid);
    backoff_.park(uid);
  }
  return true;
}

void SchedulerService::decide(const PodObject& pod) {
  if (!pod.error.empty()) {
    report_unschedulable(pod, fmt::format("Infeasible: {}", pod.error));
    return;
  }
  if (!pod.unevaluated.empty()) {
    report_unschedulable(pod, unevaluated_message(pod.unevaluated));
    return;
  }
  if (!pod.ignored_preferences.empty() && preferences_logged_.insert(pod.uid).second) {
    log(fmt::format("{}: soft constraints not evaluated (the pod is placed without them): {}",
                    pod.key(), fmt::join(pod.ignored_preferences, "; ")),
        base::Severity::kWarning);
  }
  // An upstream `basic` group is no gang: its pods are placed one by one.
  if (const auto g = podgroups_.find(pod.gang);
      !pod.gang.empty() && (g == podgroups_.end() || g->second.gang)) {
    schedule_gang(pod.gang);
    return;
  }
  if (!pod.claims.empty()) {
    decide_with_claims(pod);
    return;
  }
  if (!ensure_built(pod)) return;
  std::string bridge;  // why KEP-5004's bridge did not place it, when it applies
  if (decide_extended(pod, bridge)) return;
  // Else GPUs asked as a resource come from device plugins, never from DRA devices (docs/dra.md).
  const PodObject asked = dra_.device_plugin_gpus_only(pod);
  if (options_.queues) {
    const JobDecision d = place_job({asked});
    if (!d.placement.placed) {
      if (shrink_for({asked}).placement.placed) return;  // bound once the shrunk pods are gone
      report_unschedulable(
          pod,
          d.placement.message + (bridge.empty() ? dra_.device_plugin_note(pod)
                                                : " Through DRA devices (KEP-5004): " + bridge));
      return;
    }
    if (!d.nominated) queue_bind(pod, d.placement.nodes.front(), d.placement.gpus.front());
    return;
  }
  const ClusterMirror::Result r = mirror_.schedule(asked);
  if (r.decision.outcome != sched::Outcome::kPlaced) {
    sched::RequestResolver resolver(mirror_.cluster());
    const std::string msg =
        unschedulable_message(r, resolver.resolve(asked.spec), mirror_.cluster().node_count()) +
        (bridge.empty() ? dra_.device_plugin_note(pod)
                        : fmt::format(" Through DRA devices (KEP-5004): {}", bridge));
    report_unschedulable(pod, msg);
    return;
  }
  queue_bind(pod, r.node, r.decision.placement.gpus);
}

bool SchedulerService::ensure_built(const PodObject& pod) {
  if (const std::string why = feed_.ensure_built(); !why.empty()) {
    report_unschedulable(pod, "the scheduler " + why);
    return false;
  }
  return true;
}

SchedulerService::JobDecision SchedulerService::place_job(const std::vector<PodObject>& members,
                                                          int min_members) {
  JobDecision out;
  const std::string& name = members.front().queue;
  const auto leaf = queues_.leaf(name);
  if (!leaf) {
    out.placement.message = fmt::format(
        "queue '{}' (label {}) is not a leaf Queue of the cluster (scheduling.run.ai/v2); "
        "waiting for it",
        base::printable(name), kQueueLabel);
    return out;
  }
  const auto now = Clock::now();
  ClusterMirror::AdmitOptions admit;
  // What the queues hold is what the bound pods hold, each in its queue (one that names no leaf
  // queue counts in none).
  admit.queue_of = [this](const PodObject& p) { return queues_.leaf(p.queue); };
  admit.queues_generation = queues_.generation();
  admit.preempt = options_.preemption;
  admit.now_s = unix_now_s();
  admit.preemptible = [this, now](const PodObject& p) { return preemptible(p, now); };
  admit.gang_min = [this](const std::string& gang) {
    const auto it = podgroups_.find(gang);
    return it == podgroups_.end() || !it->second.error.empty() ? 0 : it->second.min_member;
  };
  admit.min_members = min_members;
  admit.gang_restarted = [this](const std::string& gang) {
    return gang_mark_s(gang, kRestartedAtAnnotation);
  };
  // A claim reserved for one bound pod of ours is that pod's: a victim frees its devices (once
  // the claim is deallocated, as kube-scheduler counts them).
  admit.held_for = [this](const PodObject& holder) -> std::string {
    if (!is_claim_holder(holder.uid)) return "";
    const auto c = dra_.claims().find(holder.ns + "/" + holder.name);
    if (c == dra_.claims().end() || claim_holder(c->second.uid) != holder.uid ||
        c->second.reserved_uids.size() != 1) {
      return "";
    }
    const auto p = feed_.pods().find(c->second.reserved_uids.front());
    return p == feed_.pods().end() || !ours(p->second) || p->second.node_name.empty() ? ""
                                                                                      : p->first;
  };
  // GPUs of our pods that are terminating come back soon: preempting more now could take more
  // victims than needed (a restarted scheduler, whose earlier victims are still going, would).
  // Other pods' churn (a rollout elsewhere) does not hold preemption back. Counted over every
  // pod, so only when the layer names victims, once per job: counted for every decision it made
  // 20,000 decisions at 20,000 pods quadratic (scripts/k8s-throughput --queues).
  std::optional<std::ptrdiff_t> terminating_count;
  const auto terminating = [&] {
    if (!terminating_count) {
      terminating_count =
          std::count_if(feed_.pods().begin(), feed_.pods().end(), [this](const auto& e) {
            const PodObject& p = e.second;
            return p.deleting && !p.node_name.empty() && ours(p) &&
                   (p.spec.gpu_count > 0 || !p.claims.empty() || !p.extended_claim.empty());
          });
    }
    return *terminating_count;
  };
  // Our pods bound a moment ago and not yet seen bound (the bind in flight, or its update still
  // on its way through the informer) hold their GPUs but cannot be victims yet: victims chosen
  // now, or none found, would depend on how fast the API server answered. Chosen again once
  // seen (preempt_awaits_bound_). A nominated job's members are not counted: its victims may
  // take long to go, and once it is bound (victim_gone) every pending pod is decided again.
  const auto unseen = [&] {
    return std::count_if(feed_.pods().begin(), feed_.pods().end(), [&](const auto& e) {
      const PodObject& p = e.second;
      return p.node_name.empty() && !p.deleting && ours(p) && mirror_.accounted(p.uid) &&
             !nominated_.contains(p.uid) &&
             std::none_of(members.begin(), members.end(),
                          [&](const PodObject& m) { return m.uid == p.uid; });
    });
  };
  const auto await_bound = [&](std::ptrdiff_t n) {
    preempt_awaits_bound_ = true;
    awaits_bound_until_ = Clock::now() + std::chrono::seconds(2);
    awaiting_bound_.clear();
    for (const PodObject& m : members) awaiting_bound_.push_back(m.uid);
    out.placement.placed = false;
    out.placement.message =
        fmt::format("queue {}: waiting for {} pod(s) just bound to be seen bound before preempting",
                    queues_.tree().spec(*leaf).name, n);
  };
  std::string refusal;  // the last eviction refused, for the wait's message
  // A refused eviction makes the layer choose again without that victim; a few times, then the
  // job waits its backoff like any other.
  for (int attempt = 0; attempt < 3; ++attempt) {
    ClusterMirror::Admission a = mirror_.admit(queues_.tree(), *leaf, members, admit);
    // No victims found where preemption could make room (reclaim, priority): the pods not yet
    // seen bound may be the ones it needs.
    if (!a.placement.placed && admit.preempt &&
        (a.waiting == sched::jobs::WaitReason::kShareHeld ||
         a.waiting == sched::jobs::WaitReason::kLowerPriority)) {
      if (const auto n = unseen(); n > 0) {
        await_bound(n);
        return out;
      }
    }
    if (!a.placement.placed) {
      out.placement = std::move(a.placement);
      if (out.placement.message.empty()) {
        // The layer's line names the queue (or its parent) that holds the job back.
        out.placement.message =
            fmt::format("queue admission: {} ({})", a.why, sched::jobs::wait_key(a.waiting));
      } else {
        out.placement.message = fmt::format("queue {}: {}", queues_.tree().spec(*leaf).name, a.why);
      }
      if (!refusal.empty()) out.placement.message += " Preemption refused: " + refusal;
      return out;
    }
    if (a.victims.empty()) {
      out.placement = std::move(a.placement);
      return out;
    }
    const auto undo = [&](std::size_t from) {
      for (const PodObject& m : members) mirror_.release(m.uid);
      for (std::size_t i = from; i < a.victims.size(); ++i) mirror_.restore(a.victims[i].uid);
    };
    if (terminating() > 0) {
      undo(0);
      out.placement.message = fmt::format(
          "queue {}: waiting for {} terminating pod(s) to free their resources before "
          "preempting more",
          queues_.tree().spec(*leaf).name, terminating());
      return out;
    }
    if (const auto n = unseen(); n > 0) {
      undo(0);
      await_bound(n);
      return out;
    }
    // Every eviction is tried as a dry run first, so a PodDisruptionBudget that forbids one
    // evicts none of the others.
    std::vector<std::string> refused;
    for (const auto& v : a.victims) {
      std::string why;
      if (!v.claim && !evict(feed_.pods().at(v.uid), true, why)) {
        refused.push_back(v.uid);
        refusal = why;
      }
    }
    std::size_t evicted = 0;
    if (refused.empty()) {
      for (; evicted < a.victims.size(); ++evicted) {
        std::string why;
        if (!a.victims[evicted].claim &&
            !evict(feed_.pods().at(a.victims[evicted].uid), false, why)) {
          refused.push_back(a.victims[evicted].uid);
          refusal = why;
          break;
        }
      }
      if (evicted == a.victims.size()) {
        mark_restarted(a.victims);
        nominate(members, a, *leaf);
        out.placement = std::move(a.placement);
        out.nominated = true;
        return out;
      }
      // A budget changed between the dry run and the eviction: those evicted stay so (they
      // terminate, and their resources come back); the rest count again.
      for (std::size_t i = 0; i < evicted; ++i) evicted_.emplace(a.victims[i].uid, "");
    }
    undo(evicted);
    for (const std::string& uid : refused) {
      eviction_refused_[uid] = now + options_.backoff_max;
      log(fmt::format("eviction of {} refused, choosing again: {}", feed_.pods().at(uid).key(),
                      refusal),
          base::Severity::kWarning);
    }
  }
  out.placement.message =
      fmt::format("queue {}: preemption refused: {}", queues_.tree().spec(*leaf).name, refusal);
  return out;
}

bool SchedulerService::preemptible(const PodObject& pod, Clock::time_point now) const {
  const auto it = feed_.pods().find(pod.uid);
  if (it == feed_.pods().end() || !ours(it->second) || it->second.deleting ||
      it->second.priority > kSystemPriority || it->second.node_name.empty() ||
      nominated_.contains(pod.uid) || binding_.contains(pod.uid)) {
    return false;
  }
  const auto refused = eviction_refused_.find(pod.uid);
  return refused == eviction_refused_.end() || refused->second <= now;
}

bool SchedulerService::evict(const PodObject& pod, bool dry_run, std::string& why) {
  json body = {{"apiVersion", "policy/v1"},
               {"kind", "Eviction"},
               {"metadata", {{"name", pod.name}, {"namespace", pod.ns}}},
               // Only this pod, not a new one that took its name meanwhile.
               {"deleteOptions", {{"preconditions", {{"uid", pod.uid}}}}}};
  if (dry_run) body["deleteOptions"]["dryRun"] = json::array({"All"});
  try {
    api_.create(pod_path(pod) + "/eviction", body);
    return true;
  } catch (const ApiError& e) {
    if (e.status() == 404) return true;  // gone already
    why = fmt::format("{}: {}", pod.key(), e.what());
  } catch (const std::exception& e) {
    why = fmt::format("{}: {}", pod.key(), e.what());
  }
  return false;
}

void SchedulerService::nominate(const std::vector<PodObject>& members,
                                const ClusterMirror::Admission& admission, std::size_t queue) {
  const PodObject& first = members.front();
  const std::string job = first.gang.empty() ? first.key() : first.gang;
  const std::string preemptor = first.gang.empty() ? first.key() : "gang " + first.gang;
  const std::string& queue_name = queues_.tree().spec(queue).name;
  Nomination& n = nominations_[job];
  std::vector<std::string> victims;
  for (const auto& v : admission.victims) {
    if (v.claim) {
      // Freed when its claim is deallocated (its pod's eviction releases it): handle_claim.
      n.victims.insert(v.uid);
      evicted_[v.uid] = job;
      continue;
    }
    const PodObject& pod = feed_.pods().at(v.uid);
    victims.push_back(pod.key());
    n.victims.insert(v.uid);
    evicted_[v.uid] = job;
    if (v.reason == sched::jobs::PreemptReason::kResized) continue;  // shrink_for's Events
    std::string message;
    switch (v.reason) {
      case sched::jobs::PreemptReason::kReclaim:
        message = fmt::format(
            "Preempted by {} to reclaim queue {}'s quota (queue {} is over its fair share)",
            preemptor, queue_name, queues_.tree().spec(v.queue).name);
        break;
      case sched::jobs::PreemptReason::kPriority:
        message = fmt::format("Preempted by {} (priority {}) of queue {}: a higher priority",
                              preemptor, first.priority, queue_name);
        break;
      default:
        message = fmt::format("Preempted by {} of queue {} ({})", preemptor, queue_name,
                              sched::jobs::preempt_key(v.reason));
    }
    log(fmt::format("{}: {}", pod.key(), message));
    const json involved = {
        {"apiVersion", "v1"},
        {"kind", "Pod"},
        {"metadata", {{"namespace", pod.ns}, {"name", pod.name}, {"uid", pod.uid}}}};
    writes_.submit("preempted/" + pod.uid, [this, ns = pod.ns, involved, message] {
      post_event(ns, involved, "Normal", "Preempted", message);
    });
  }
  const std::string message = fmt::format(
      "Preempting {} pod(s) ({}) for queue {}; bound on the resources they free once "
      "they are gone",
      victims.size(), fmt::join(victims, ", "), queue_name);
  log(fmt::format("{}: {}", preemptor, message));
  for (const PodObject& m : members) {
    const auto& placed = admission.placement.uids;
    if (std::find(placed.begin(), placed.end(), m.uid) == placed.end()) continue;
    n.members.push_back(m.uid);
    nominated_[m.uid] = job;
    const auto where = mirror_.assumed(m.uid);
    const json involved = {{"apiVersion", "v1"},
                           {"kind", "Pod"},
                           {"metadata", {{"namespace", m.ns}, {"name", m.name}, {"uid", m.uid}}}};
    const json status = {{"status", {{"nominatedNodeName", where ? where->first : ""}}}};
    writes_.submit("nominated/" + m.uid, [this, path = pod_path(m), ns = m.ns, status, involved,
                                          message, patched = std::make_shared<bool>(false)] {
      if (!*patched) {
        api_.patch(path + "/status", status, "application/strategic-merge-patch+json");
        *patched = true;
      }
      post_event(ns, involved, "Normal", "Preempting", message);
    });
  }
}

void SchedulerService::victim_gone(const std::string& uid) {
  const auto it = evicted_.find(uid);
  if (it == evicted_.end()) return;
  const std::string job = it->second;
  evicted_.erase(it);
  eviction_refused_.erase(uid);
  const auto n = nominations_.find(job);
  if (n == nominations_.end()) return;
  n->second.victims.erase(uid);
  if (!n->second.victims.empty()) return;
  int bound = 0;
  std::vector<BindJob> binds;
  for (const std::string& member : n->second.members) {
    nominated_.erase(member);
    const auto claims = nominated_claims_.find(member);
    std::optional<std::pair<MemberAsk, std::size_t>> asked;
    if (claims != nominated_claims_.end()) {
      asked = std::move(claims->second);
      nominated_claims_.erase(claims);
    }
    const auto pod = feed_.pods().find(member);
    const auto where = mirror_.assumed(member);
    if (pod == feed_.pods().end() || !where || !pod->second.node_name.empty()) continue;
    if (!asked) {
      binds.push_back(bind_job(pod->second, where->first, where->second, {}));
      ++bound;
      continue;
    }
    // Its claims are written from their state now, on the GPUs it holds for them.
    try {
      std::vector<ClaimWrite> writes =
          keep_claims(pod->second, asked->first, asked->second, where->first, where->second);
      binds.push_back(bind_job(pod->second, where->first, {}, std::move(writes)));
      ++bound;
    } catch (const std::exception& e) {
      mirror_.release(member);
      report_unschedulable(
          pod->second, fmt::format("the claims' allocation could not be written: {}", e.what()));
    }
  }
  queue_gang_bind(std::move(binds));
  log(fmt::format("{}: its victims are gone; binding {} pod(s)", job, bound));
  nominations_.erase(n);
}

void SchedulerService::member_gone(const std::string& uid) {
  const auto it = nominated_.find(uid);
  if (it == nominated_.end()) return;
  const auto n = nominations_.find(it->second);
  nominated_.erase(it);
  nominated_claims_.erase(uid);
  if (n == nominations_.end()) return;
  std::erase(n->second.members, uid);
  // Its victims still go (their evictions are made); what they free is anyone's again.
  if (n->second.members.empty()) nominations_.erase(n);
}

SchedulerService::BindJob SchedulerService::bind_job(const PodObject& pod, const std::string& node,
                                                     const std::vector<int>& gpus,
                                                     std::vector<ClaimWrite> claims) {
  reported_.erase(pod.uid);
  binding_.insert(pod.uid);
  queue_status_dirty_ = true;
  BindJob job{pod, node, gpus, 0, Clock::now(), std::move(claims), {}};
  // The pod's own gpuorch.io/gpu-milli is never rewritten (what it asked stays as it asked it).
  if (pod.spec.gpu_share() && !pod.gpu_milli_annotated) job.gpu_milli = pod.spec.gpu_milli;
  return job;
}

void SchedulerService::queue_bind(const PodObject& pod, const std::string& node,
                                  const std::vector<int>& gpus, std::vector<ClaimWrite> claims) {
  push_bind(bind_job(pod, node, gpus, std::move(claims)));
}

void SchedulerService::queue_gang_bind(std::vector<BindJob> members) {
  const bool claims = std::any_of(members.begin(), members.end(),
                                  [](const BindJob& m) { return !m.claims.empty(); });
  if (!claims || members.size() == 1) {
    for (BindJob& m : members) push_bind(std::move(m));
    return;
  }
  BindJob gang;
  gang.pod = members.front().pod;
  gang.gang = std::move(members);
  push_bind(std::move(gang));
}

void SchedulerService::push_bind(BindJob job) {
  {
    const std::lock_guard lock(bind_mutex_);
    bind_queue_.push_back(std::move(job));
  }
  bind_cv_.notify_one();
}

void SchedulerService::schedule_gang(const std::string& gang) {
  std::vector<PodObject> pending;
  int bound = 0;
  for (const auto& [uid, p] : feed_.pods()) {
    if (p.gang != gang || !ours(p)) continue;
    if (!p.node_name.empty() || binding_.contains(uid) || mirror_.accounted(uid)) {
      ++bound;
    } else if (!p.deleting && !p.gated()) {
      pending.push_back(p);  // a gated member is not there yet: it neither counts nor waits
    }
  }
  // Members in a fixed order (name), so a gang is placed the same way every time.
  std::sort(pending.begin(), pending.end(),
            [](const PodObject& a, const PodObject& b) { return a.key() < b.key(); });
  for (const auto& p : pending) {
    active_.erase(p.uid);
    backoff_.unpark(p.uid);  // decided now, with the member that came up
  }
  if (pending.empty()) return;
  auto report_all = [&](const std::string& message) {
    for (const auto& p : pending) report_unschedulable(p, message);
  };
  const auto group = podgroups_.find(gang);
  const GangCheck check =
      check_gang(gang, group == podgroups_.end() ? nullptr : &group->second, bound, pending);
  if (check.hold != GangHold::kNone && check.hold != GangHold::kIncomplete) {
    report_all(check.message);
    return;
  }
  // A gang waits (scheduleTimeoutSeconds counts) from when its group and members are sound,
  // complete or not.
  const auto since = gang_waiting_since_.try_emplace(gang, Clock::now()).first->second;
  if (check.hold == GangHold::kIncomplete) {
    report_all(check.message);
    write_podgroup_status(gang, "Pending", bound);
    return;
  }
  PodGroupInfo& g = group->second;
  const int present = bound + static_cast<int>(pending.size());
  if (!ensure_built(pending.front())) return;
  // Each member as the core is asked for it: with its claims' GPUs or KEP-5004's bridge claim;
  // else GPUs asked as a resource come from device plugins, never from DRA devices (docs/dra.md).
  std::vector<MemberAsk> asks;
  if (const std::string refused = member_asks(pending, true, asks); !refused.empty()) {
    report_all(fmt::format("gang {}: {}", gang, refused));
    write_podgroup_status(gang, "Pending", bound);
    return;
  }
  std::size_t ways = 1;
  bool bridge = false;  // some member is asked through the bridge: device plugins' GPUs last
  for (const MemberAsk& a : asks) {
    ways = std::max(ways, a.ways());
    bridge = bridge || !a.extended.is_null();
  }
  const std::vector<PodObject> first_ask = asked(pending, asks, 0, true);
  // --queues: the pods beyond minMember are elastic replicas (KAI's and Volcano's convention):
  // the gang starts with at least minMember and the rest as they fit; once it runs, the pods
  // left grow it when room frees, at most once per resize interval, and only as far as its
  // measured speed (or the prior, before any) says pays for the resize (growth_advice).
  const bool growing = options_.queues && bound >= g.min_member;
  const bool elastic = options_.queues && present > g.min_member;
  if (growing) {
    const std::int64_t now_s = unix_now_s();
    const std::int64_t last = gang_resized_s(gang, now_s);
    // The API's times are whole seconds: a full interval has passed only once more than its
    // seconds lie between the two.
    if (const std::int64_t interval = options_.resize_interval.count();
        last >= 0 && now_s - last <= interval) {
      report_all(fmt::format(
          "gang {}: elastic, runs {} of up to {} pods; grows at most once per resize interval "
          "({} s), next in {} s",
          gang, bound, present, interval, interval + 1 - (now_s - last)));
      return;
    }
  }
  // The members the advice holds back (by name, so the same ones each time) wait with its line.
  std::vector<PodObject> trying = pending;
  std::optional<sched::jobs::GrowthAdvice> advice;
  if (elastic) {
    advice = growth_advice(gang, bound, present, g.min_member,
                           std::max(first_ask.front().spec.gpu_count, 1));
    const int room = advice->target - bound;
    if (growing && room <= 0) {
      report_all(advice->why);
      if (reported_[gang] != advice->why) {
        reported_[gang] = advice->why;
        post_podgroup_event(gang, "Normal", "NotResized", advice->why);
      }
      return;
    }
    if (std::cmp_less(room, trying.size())) trying.resize(std::size_t(std::max(room, 0)));
  }
  bool nominated = false;
  ClusterMirror::GangResult r;
  // The members' ways of meeting their claims in turn (firstAvailable), all in their first way
  // first; then bridge members on device plugins' GPUs. The first failure explains.
  std::size_t way = 0;
  bool bridged = true;
  for (std::size_t attempt = 0; attempt < ways + (bridge ? 1 : 0); ++attempt) {
    way = attempt < ways ? attempt : 0;
    bridged = attempt < ways;
    std::vector<PodObject> asking = asked(pending, asks, way, bridged);
    ClusterMirror::GangResult got;
    if (options_.queues) {
      asking.resize(trying.size());
      JobDecision d = place_job(asking, growing ? 1 : elastic ? g.min_member - bound : 0);
      got = std::move(d.placement);
      nominated = d.nominated;
    } else {
      got = mirror_.schedule_gang(asking);
    }
    if (got.placed || attempt == 0) r = std::move(got);
    if (r.placed) break;
  }
  // A gang that cannot start may make another give back pods and be nominated on them.
  if (!r.placed && !growing && options_.queues) {
    std::vector<PodObject> asking = first_ask;
    asking.resize(trying.size());
    if (JobDecision d = shrink_for(asking, elastic ? g.min_member - bound : 0);
        d.placement.placed) {
      r = std::move(d.placement);
      nominated = true;
      way = 0;
      bridged = true;
    }
  }
  std::unordered_map<std::string, std::vector<ClaimWrite>> writes_of;  // by member uid
  if (r.placed && !nominated && !keep_gang_claims(pending, asks, way, bridged, r, writes_of)) {
    return;
  }
  if (r.placed && nominated) {
    for (std::size_t i = 0; i < pending.size(); ++i) {
      if (std::find(r.uids.begin(), r.uids.end(), pending[i].uid) == r.uids.end()) continue;
      if (asks[i].claims && (bridged || asks[i].extended.is_null())) {
        nominated_claims_[pending[i].uid] = {asks[i], way};
      }
    }
  }
  if (!r.placed) {
    std::string message =
        growing
            ? fmt::format("gang {}: elastic, runs {} of up to {} pods; no room to grow: {}", gang,
                          bound, present, r.message)
            : fmt::format(
                  "gang {} ({} pending, minMember {}) cannot be placed whole, so none of it is: "
                  "{}{}",
                  gang, pending.size(), g.min_member,
                  r.failed_pod.empty() ? "" : "member " + r.failed_pod + ": ", r.message);
    const auto waited = std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - since);
    if (!growing && g.timeout_seconds > 0 && waited.count() > g.timeout_seconds) {
      message += fmt::format(
          " Waited longer than scheduleTimeoutSeconds ({} s); nothing is "
          "reserved meanwhile.",
          g.timeout_seconds);
    }
    report_all(message);
    if (!growing) {
      write_podgroup_status(gang, "Pending", bound);
      if (reported_[gang] != message) {
        reported_[gang] = message;
        post_podgroup_event(gang, "Warning", "FailedScheduling", message);
      }
    }
    return;
  }
  gang_waiting_since_.erase(gang);
  reported_.erase(gang);
  // A growth's time stays on the PodGroup: the pods it started may be taken back by a
  // preemption, and the interval still runs from it.
  if (growing) mark_gang(gang, true, false);
  std::map<std::string, std::size_t> placed;  // uid -> index in r
  for (std::size_t i = 0; i < r.uids.size(); ++i) placed[r.uids[i]] = i;
  const int running = bound + static_cast<int>(placed.size());
  std::vector<BindJob> binds;
  for (const auto& p : pending) {
    const auto at = placed.find(p.uid);
    if (at == placed.end()) {
      const bool held = std::none_of(trying.begin(), trying.end(),
                                     [&p](const PodObject& t) { return t.uid == p.uid; });
      const std::string wait = fmt::format(
          "gang {}: elastic replica: the gang starts with {} of up to {} pods; this one waits "
          "for room (at most one resize per {} s)",
          gang, running, present, options_.resize_interval.count());
      report_unschedulable(p, held && advice ? advice->why : wait);
      continue;
    }
    unschedulable_.erase(p.uid);
    if (nominated) continue;
    // A member with claims is bound without gpuorch.io/gpus: its GPUs are its claims'.
    const auto claims = writes_of.find(p.uid);
    if (claims == writes_of.end()) {
      binds.push_back(bind_job(p, r.nodes[at->second], r.gpus[at->second], {}));
    } else {
      binds.push_back(bind_job(p, r.nodes[at->second], {}, std::move(claims->second)));
    }
  }
  if (nominated) return;  // bound once its victims are gone (victim_gone)
  queue_gang_bind(std::move(binds));
  write_podgroup_status(gang, "Scheduled", running);
  const std::string what =
      placed.size() == pending.size()
          ? fmt::format("all {} pending members placed", pending.size())
          : fmt::format("{} of {} pending members placed ({} of up to {} pods run)", placed.size(),
                        pending.size(), running, present);
  log(fmt::format(
      "gang {}: {}{}", gang,
      placed.size() == pending.size() ? fmt::format("{} members placed", placed.size()) : what,
      r.domain.empty() ? "" : " under " + r.domain));
  post_podgroup_event(
      gang, "Normal", growing ? "Resized" : "Scheduled",
      what + (r.domain.empty() ? "" : " under " + r.domain) + (advice ? "; " + advice->why : ""));
}

void SchedulerService::note_throughput(const PodObject& p) {
  if (!p.throughput) return;
  const auto& t = *p.throughput;
  auto& at = gang_measured_[p.gang][{t.nodes, t.world_size, t.local_batch}];
  if (at.time.empty() || t.time > at.time) at = t;
}

sched::jobs::GangGrowth SchedulerService::gang_growth(
    const std::string& gang, int bound, int present, int min_member, double gpus_per_pod,
    std::vector<workload::ThroughputReport>& measured) {
  auto& seen = gang_measured_[gang];  // its reports folded in by the caller (note_throughput)
  measured.clear();
  for (const auto& [key, t] : seen) measured.push_back(t);
  sched::jobs::GangGrowth in;
  in.gang = gang;
  in.running = bound;
  in.min = min_member;
  in.most = present;
  in.gpus_per_pod = gpus_per_pod;
  in.measured = measured;
  in.resize_interval_s = double(options_.resize_interval.count());
  in.restart_s = options_.resize_cost ? std::chrono::duration<double>(*options_.resize_cost).count()
                                      : in.resize_interval_s / 10;
  return in;
}

sched::jobs::GrowthAdvice SchedulerService::growth_advice(const std::string& gang, int bound,
                                                          int present, int min_member,
                                                          double gpus_per_pod) {
  gang_measured_[gang];  // an entry, reports or not: the gang is elastic (shrink_for)
  for (const auto& [uid, p] : feed_.pods()) {
    if (p.gang == gang) note_throughput(p);
  }
  std::vector<workload::ThroughputReport> measured;
  return sched::jobs::advise_growth(
      gang_growth(gang, bound, present, min_member, gpus_per_pod, measured));
}

std::int64_t SchedulerService::gang_resized_s(const std::string& gang, std::int64_t now_s) const {
  std::int64_t last = -1;
  for (const auto& [uid, p] : feed_.pods()) {
    if (p.gang != gang || p.deleting || p.terminal()) continue;
    if (p.node_name.empty() && !binding_.contains(uid) && !mirror_.accounted(uid)) continue;
    last = std::max(last, p.joined_s >= 0 ? p.joined_s : now_s);  // else being bound now
  }
  return std::max(last, gang_mark_s(gang, kResizedAtAnnotation));
}

std::int64_t SchedulerService::gang_mark_s(const std::string& gang, const char* annotation) const {
  std::int64_t at = -1;
  if (const auto g = podgroups_.find(gang); g != podgroups_.end()) {
    at = std::string_view(annotation) == kResizedAtAnnotation ? g->second.resized_s
                                                              : g->second.restarted_s;
  }
  if (const auto u = marks_unseen_.find(gang); u != marks_unseen_.end()) {
    if (const auto m = u->second.find(annotation); m != u->second.end()) {
      at = std::max(at, m->second.second);
    }
  }
  return at;
}

void SchedulerService::mark_restarted(const std::vector<ClusterMirror::Victim>& victims) {
  std::map<std::string, int> taken;  // gang -> members evicted
  for (const auto& v : victims) {
    const auto p = feed_.pods().find(v.uid);
    if (!v.claim && p != feed_.pods().end() && !p->second.gang.empty()) ++taken[p->second.gang];
  }
  for (const auto& [gang, n] : taken) {
    int bound = 0;
    for (const auto& [uid, p] : feed_.pods()) {
      bound += int(p.gang == gang && !p.node_name.empty() && !p.deleting && !p.terminal());
    }
    if (bound > n) mark_gang(gang, false, true);  // it keeps running with fewer
  }
}

void SchedulerService::mark_gang(const std::string& gang, bool resized, bool restarted) {
  const auto g = podgroups_.find(gang);
  if (g == podgroups_.end()) return;
  const json& meta = g->second.object["metadata"];
  const std::string at = now_rfc3339();
  const std::int64_t at_s = rfc3339_seconds(at);
  json annotations = json::object();
  for (const auto& [name, mark] :
       {std::pair{kResizedAtAnnotation, resized}, std::pair{kRestartedAtAnnotation, restarted}}) {
    if (!mark) continue;
    annotations[name] = at;
    marks_unseen_[gang][name] = {at, at_s};
  }
  const std::string path = podgroup_path(meta, g->second.upstream);
  writes_.submit("podgroup-marks/" + gang, [this, path, annotations] {
    api_.patch(path, json{{"metadata", {{"annotations", annotations}}}});
  });
}

SchedulerService::JobDecision SchedulerService::shrink_for(const std::vector<PodObject>& waiting,
                                                           int min_members, bool nominate) {
  // Only elastic gangs started under --queues are candidates (gang_measured_ holds one entry
  // each), and the pods are walked once per move of the clock a shrink goes by (a gang
  // member's start or shrink mark, as the API shows them) or periodic retry, not by every
  // waiting pod: the resize intervals, what decides which gang may give back, moved only then.
  // Not once a wall second: a time-compressed replay's ticks come faster than that, and the
  // simulator checks once a tick.
  const auto now = Clock::now();
  JobDecision out;
  if (!options_.queues || !options_.preemption || waiting.empty() || gang_measured_.empty() ||
      shrink_checked_) {
    return out;
  }
  int need = 0;
  for (const auto& p : waiting) need += std::max(p.spec.gpu_count, 0);
  if (need == 0) return out;
  shrink_checked_ = true;
  const std::int64_t now_s = unix_now_s();
  // One pass over the pods: each candidate's bound members, and every report of its pods.
  std::map<std::string, std::vector<const PodObject*>> running;  // gang -> its bound members
  for (const auto& [uid, p] : feed_.pods()) {
    if (p.gang.empty() || p.gang == waiting.front().gang || !gang_measured_.contains(p.gang)) {
      continue;
    }
    note_throughput(p);
    if (ours(p) && !p.node_name.empty() && !p.deleting && !p.terminal()) {
      running[p.gang].push_back(&p);
    }
  }
  for (auto& [gang, members] : running) {
    const auto group = podgroups_.find(gang);
    if (group == podgroups_.end() || !group->second.error.empty() || !group->second.gang) continue;
    const int min_member = group->second.min_member;
    const int bound = static_cast<int>(members.size());
    if (bound <= min_member) continue;
    if (const std::int64_t last = gang_resized_s(gang, now_s);
        last >= 0 && now_s - last <= options_.resize_interval.count()) {
      continue;  // as in schedule_gang: more than the interval's seconds
    }
    if (std::any_of(members.begin(), members.end(),
                    [&](const PodObject* p) { return !preemptible(*p, now); })) {
      continue;
    }
    const int per_pod = std::max(members.front()->spec.gpu_count, 1);
    std::vector<workload::ThroughputReport> measured;
    const auto advice =
        sched::jobs::advise_shrink(gang_growth(gang, bound, bound, min_member, per_pod, measured));
    const int give = bound - advice.target;
    if (give <= 0 || mirror_.cluster().fully_free_gpus_total() + give * per_pod < need) continue;
    // The members last in name order go (the gang starts and grows in name order).
    std::sort(members.begin(), members.end(),
              [](const PodObject* a, const PodObject* b) { return a->key() > b->key(); });
    members.resize(static_cast<std::size_t>(give));
    std::string why;
    if (!std::all_of(members.begin(), members.end(),
                     [&](const PodObject* p) { return evict(*p, true, why); })) {
      log(fmt::format("gang {}: not shrunk, eviction refused: {}", gang, why),
          base::Severity::kWarning);
      continue;
    }
    // Evicted, they count nowhere until gone, so the job is placed on what they free.
    std::vector<ClusterMirror::Victim> given;
    for (const PodObject* p : members) {
      if (!evict(*p, false, why)) break;
      const json involved = {
          {"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"namespace", p->ns}, {"name", p->name}, {"uid", p->uid}}}};
      writes_.submit("preempted/" + p->uid, [this, ns = p->ns, involved, m = advice.why] {
        post_event(ns, involved, "Normal", "Preempted", m);
      });
      mirror_.mark_evicting(p->uid);
      given.push_back({p->uid, sched::jobs::PreemptReason::kResized, 0, false});
    }
    mark_gang(gang, true, true);
    log(advice.why);
    post_podgroup_event(gang, "Normal", "Resized", advice.why);
    if (nominate && !given.empty()) out = nominate_on(waiting, min_members, given);
    for (const auto& v : given) mirror_.hold_evicted(v.uid);
    return out;
  }
  return out;
}

SchedulerService::JobDecision SchedulerService::nominate_on(
    const std::vector<PodObject>& waiting, int min_members,
    const std::vector<ClusterMirror::Victim>& freeing) {
  JobDecision d = place_job(waiting, min_members);
  if (!d.placement.placed) return d;
  const PodObject& first = waiting.front();
  if (d.nominated) {
    // It preempts as well: bound once its victims and these are all gone.
    const std::string job = first.gang.empty() ? first.key() : first.gang;
    for (const auto& v : freeing) {
      nominations_[job].victims.insert(v.uid);
      evicted_[v.uid] = job;
    }
    return d;
  }
  ClusterMirror::Admission a;
  a.placement = d.placement;
  a.victims = freeing;
  nominate(waiting, a, queues_.leaf(first.queue).value_or(0));
  d.nominated = true;
  return d;
}

void SchedulerService::post_podgroup_event(const std::string& gang, const std::string& type,
                                           const std::string& reason, const std::string& message) {
  const json& obj = podgroups_.at(gang).object;
  writes_.submit("podgroup-event/" + gang,
                 [this, ns = obj["metadata"].value("namespace", ""), obj, type, reason, message] {
                   post_event(ns, obj, type, reason, message);
                 });
}

void SchedulerService::write_podgroup_status(const std::string& gang, const std::string& phase,
                                             int scheduled) {
  const auto it = podgroups_.find(gang);
  // scheduling.k8s.io's PodGroup has conditions only (no phase): its Events say it.
  if (it == podgroups_.end() || it->second.upstream) return;
  const std::string written = fmt::format("{}/{}", phase, scheduled);
  if (it->second.written == written) return;
  it->second.written = written;
  const json& meta = it->second.object["metadata"];
  const std::string path = podgroup_path(meta, false);
  json status = {{"status", {{"phase", phase}, {"scheduled", scheduled}}}};
  if (phase != "Scheduled") status["status"]["scheduleStartTime"] = now_rfc3339();
  writes_.submit("podgroup/" + gang, [this, path, status] {
    try {
      api_.patch(path + "/status", status);
    } catch (const ApiError& e) {
      // A CRD without the status subresource keeps status in the object itself.
      if (e.status() != 404) throw;
      api_.patch(path, status);
    }
  });
}

void SchedulerService::write_queue_statuses() {
  std::vector<const PodObject*> bound, pending;
  for (const auto& [uid, p] : feed_.pods()) {
    if (p.terminal() || p.deleting) continue;
    if (!p.node_name.empty() || binding_.contains(uid)) {
      bound.push_back(&p);
    } else if (ours(p) && !p.gated()) {
      pending.push_back(&p);
    }
  }
  // Quotas per GPU model: a bound pod's GPUs are of its node's model.
  const auto model_of = [this](const std::string& node) {
    const auto it = feed_.nodes().find(node);
    return it == feed_.nodes().end() ? std::string() : it->second.gpu_model;
  };
  for (auto& [name, status] : queues_.statuses(bound, pending, &dra_, model_of)) {
    std::string text = status.dump();
    auto& written = queue_status_written_[name];
    if (written == text) continue;
    written = std::move(text);
    const std::string path = "/apis/scheduling.run.ai/v2/queues/" + percent_encode(name);
    writes_.submit("queue/" + name, [this, path, body = json{{"status", status}}] {
      api_.patch(path + "/status", body);
    });
  }
}

void SchedulerService::report_unschedulable(const PodObject& pod, const std::string& message) {
  ++counters_.unschedulable;
  unschedulable_[pod.uid] = message;
  fail_attempt(pod.uid);
  if (const auto it = reported_.find(pod.uid); it != reported_.end() && it->second == message) {
    return;  // the pod already says so (or its write is being retried)
  }
  reported_[pod.uid] = message;
  log(fmt::format("{}: {}", pod.key(), message));
  write_condition(pod, "Unschedulable", message, true);
}

void SchedulerService::post_event(const std::string& ns, const json& involved,
                                  const std::string& type, const std::string& reason,
                                  const std::string& message) {
  const json& meta = involved.value("metadata", json::object());
  const std::string now = now_rfc3339();
  const json event = {
      {"apiVersion", "v1"},
      {"kind", "Event"},
      {"metadata", {{"generateName", meta.value("name", "x") + "."}, {"namespace", ns}}},
      {"involvedObject",
       {{"apiVersion", involved.value("apiVersion", "v1")},
        {"kind", involved.value("kind", "")},
        {"namespace", ns},
        {"name", meta.value("name", "")},
        {"uid", meta.value("uid", "")}}},
      {"reason", reason},
      {"message", message},
      {"type", type},
      {"source", {{"component", options_.scheduler_name}}},
      {"reportingComponent", options_.scheduler_name},
      {"reportingInstance", options_.scheduler_name},
      {"firstTimestamp", now},
      {"lastTimestamp", now},
      {"count", 1}};
  api_.create(namespaced_path("/api/v1", ns, "events"), event);
}

void SchedulerService::bind_loop(const std::atomic<bool>& stop) {
  while (true) {
    BindJob job;
    {
      std::unique_lock lock(bind_mutex_);
      bind_cv_.wait_for(lock, std::chrono::milliseconds(200),
                        [&] { return !bind_queue_.empty() || stop.load(); });
      if (stop.load()) return;
      if (bind_queue_.empty()) continue;
      job = std::move(bind_queue_.front());
      bind_queue_.pop_front();
    }
    bind(job);
  }
}

void SchedulerService::bind(const BindJob& job) {
  if (!job.gang.empty()) {
    bind_gang(job.gang);
    return;
  }
  bind_pod(job);
}

void SchedulerService::bind_pod(const BindJob& job) {
  // Claims written for this pod; taken back when it is not bound after all.
  std::vector<std::pair<const ClaimWrite*, json>> written;
  try {
    // The claims first, as kube-scheduler's PreBind: a pod is never bound without its devices.
    // A claim the API server does not take (409: someone changed it) fails the bind, which
    // releases what was assumed and retries the pod after its backoff.
    // With several claims, those written before a refused one are taken back: none stays
    // allocated and reserved for a pod that is not bound.
    for (const ClaimWrite& w : job.claims) {
      try {
        written.emplace_back(&w, write_claim(job.pod, w));
      } catch (const ApiError& e) {
        for (auto it = written.rbegin(); it != written.rend(); ++it) {
          take_back(job.pod, *it->first, it->second);
        }
        throw std::runtime_error(fmt::format("ResourceClaim {}/{}: status write refused: {}",
                                             job.pod.ns, object_name(w.claim), e.what()));
      }
    }
    if (!job.claims.empty()) {
      push({Event::Kind::kClaimsWritten, Event::Type::kUpsert, {}, job.pod.uid});
    }
    const json binding =
        gpu_binding(job.pod.ns, job.pod.name, job.pod.uid, job.node, job.gpus, job.gpu_milli);
    try {
      api_.create(pod_path(job.pod) + "/binding", binding);
    } catch (const ApiCancelled&) {
      throw;
    } catch (const std::exception&) {
      // The binding refused (or its answer lost): unless the pod is bound to that node after
      // all, its claims are taken back, as kube-scheduler's Unreserve does, so they are neither
      // allocated nor reserved for a pod that may go elsewhere on its retry.
      if (!written.empty() && !bound_to(job.pod, job.node)) {
        for (auto it = written.rbegin(); it != written.rend(); ++it) {
          take_back(job.pod, *it->first, it->second);
        }
      }
      throw;
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - job.decided).count();
    std::size_t b = 0;
    while (b < std::size(SchedulerCounters::kBuckets) && seconds > SchedulerCounters::kBuckets[b]) {
      ++b;
    }
    ++counters_.latency[b];
    counters_.latency_sum_us += static_cast<std::uint64_t>(seconds * 1e6);
    ++counters_.binds;
    log(fmt::format("bound {} to {}{}", job.pod.key(), job.node,
                    job.gpus.empty() ? "" : fmt::format(" gpus {}", fmt::join(job.gpus, ","))));
    push({Event::Kind::kBindDone, Event::Type::kUpsert, {}, job.pod.uid});
  } catch (const ApiCancelled&) {
    // Stopping: nothing to retry, nothing to report.
  } catch (const std::exception& e) {
    ++counters_.bind_errors;
    log(fmt::format("bind {} to {} failed: {}", job.pod.key(), job.node, e.what()),
        base::Severity::kError);
    push(
        {Event::Kind::kBindFailed, Event::Type::kUpsert, json(std::string(e.what())), job.pod.uid});
    // 409: the pod is not what was decided on (bound by another, gated, changed); 404: gone.
    // Read it again so the retry, if any, starts from what it is now.
    const auto* api_error = dynamic_cast<const ApiError*>(&e);
    if (api_error != nullptr && (api_error->status() == 409 || api_error->status() == 404)) {
      reread(job.pod);
    }
  }
}

bool SchedulerService::bound_to(const PodObject& pod, const std::string& node) {
  try {
    const json p = api_.get(pod_path(pod));
    const json* meta = p.contains("metadata") ? &p["metadata"] : nullptr;
    if (meta == nullptr || !meta->contains("uid") || (*meta)["uid"] != pod.uid) return false;
    return p.contains("spec") && p["spec"].is_object() && p["spec"].contains("nodeName") &&
           p["spec"]["nodeName"] == node;
  } catch (const std::exception&) {
    // Unknown: the claims stay, as before; the pod's deletion or next decision settles them.
    return true;
  }
}

void SchedulerService::reread(const PodObject& pod) {
  try {
    push({Event::Kind::kPod, Event::Type::kUpsert, api_.get(pod_path(pod)), {}});
  } catch (const ApiError& e) {
    if (e.status() != 404) return;  // the informer will tell
    push({Event::Kind::kPod,
          Event::Type::kDelete,
          {{"metadata", {{"namespace", pod.ns}, {"name", pod.name}, {"uid", pod.uid}}}},
          {}});
  } catch (const std::exception&) {
    // Unreachable for now: the informer brings the pod's state when it can.
  }
}

std::string SchedulerService::metrics() const {
  std::string out;
  auto counter = [&out](const char* name, const char* help, std::uint64_t v) {
    out += prometheus_counter(name, help, v);
  };
  counter("gpuorch_scheduler_attempts_total", "Scheduling decisions made.", counters_.attempts);
  counter("gpuorch_scheduler_binds_total", "Pods bound.", counters_.binds);
  counter("gpuorch_scheduler_bind_errors_total", "Binds the API server refused.",
          counters_.bind_errors);
  counter("gpuorch_scheduler_unschedulable_total", "Decisions that found no node.",
          counters_.unschedulable);
  out += fmt::format(
      "# HELP gpuorch_scheduler_pending_pods Pods waiting (active and unschedulable).\n"
      "# TYPE gpuorch_scheduler_pending_pods gauge\ngpuorch_scheduler_pending_pods {}\n",
      counters_.queue_length.load());
  out +=
      "# HELP gpuorch_scheduler_bind_duration_seconds From decision to bound.\n"
      "# TYPE gpuorch_scheduler_bind_duration_seconds histogram\n";
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < std::size(SchedulerCounters::kBuckets); ++i) {
    cumulative += counters_.latency[i];
    out += fmt::format("gpuorch_scheduler_bind_duration_seconds_bucket{{le=\"{}\"}} {}\n",
                       SchedulerCounters::kBuckets[i], cumulative);
  }
  cumulative += counters_.latency.back();
  out +=
      fmt::format("gpuorch_scheduler_bind_duration_seconds_bucket{{le=\"+Inf\"}} {}\n", cumulative);
  out += fmt::format("gpuorch_scheduler_bind_duration_seconds_sum {}\n",
                     static_cast<double>(counters_.latency_sum_us.load()) / 1e6);
  out += fmt::format("gpuorch_scheduler_bind_duration_seconds_count {}\n", cumulative);
  return out;
}

}  // namespace gpuorch::k8s
