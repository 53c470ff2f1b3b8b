#include "gpuorch/k8s/extender/extender_service.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <list>
#include <thread>

#include "gpuorch/base/printable.hpp"
#include "gpuorch/k8s/api/api_path.hpp"
#include "gpuorch/k8s/api/informer.hpp"
#include "gpuorch/k8s/api/patient_get.hpp"
#include "gpuorch/k8s/api/server_json.hpp"
#include "gpuorch/k8s/extender/extender_answer.hpp"
#include "gpuorch/k8s/extender/extender_request.hpp"
#include "gpuorch/k8s/mirror/binding.hpp"
#include "gpuorch/k8s/mirror/node_object.hpp"

namespace gpuorch::k8s {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// kube-scheduler's extender scores run from 0 to 10 (MaxExtenderPriority).
constexpr int kMaxExtenderPriority = 10;

constexpr const char* kResourceApi = "/apis/resource.k8s.io/v1";

bool iequal(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// The v1 extender types have no json tags: kube-scheduler sends "Pod", "NodeNames", and Go's
// decoder would take "pod" too. Match as it does.
const json* find_ci(const json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  if (const auto it = obj.find(std::string(key)); it != obj.end()) return &*it;
  for (const auto& [k, v] : obj.items()) {
    if (iequal(k, key)) return &v;
  }
  return nullptr;
}

std::string string_field(const json& obj, std::string_view key, std::string_view what) {
  const json* v = find_ci(obj, key);
  if (v == nullptr || !v->is_string() || v->get_ref<const std::string&>().empty()) {
    throw BadExtenderRequest(fmt::format("{} has no {} string", what, key));
  }
  return v->get<std::string>();
}

// The candidate nodes of an ExtenderArgs: NodeNames (nodeCacheCapable) or Nodes.items (the
// whole Node objects otherwise). `items` points at the objects in the second form; the names
// point into the request, which outlives them.
struct Candidates {
  std::vector<std::string_view> names;
  const json* items = nullptr;
};

// `split`: the names split_node_names took out of the body, whose NodeNames is then `[]`.
Candidates candidates_of(const json& args, const std::vector<std::string_view>* split) {
  Candidates c;
  if (const json* names = find_ci(args, "NodeNames"); names != nullptr && !names->is_null()) {
    if (!names->is_array()) throw BadExtenderRequest("ExtenderArgs.NodeNames is not a list");
    if (split != nullptr) {
      c.names = *split;
      return c;
    }
    for (const json& n : *names) {
      if (!n.is_string()) throw BadExtenderRequest("ExtenderArgs.NodeNames holds a non-string");
      c.names.push_back(n.get_ref<const std::string&>());
    }
    return c;
  }
  const json* nodes = find_ci(args, "Nodes");
  if (nodes == nullptr || !nodes->is_object()) {
    throw BadExtenderRequest("ExtenderArgs has neither NodeNames nor Nodes");
  }
  const json* items = find_ci(*nodes, "items");
  if (items == nullptr || !items->is_array()) {
    throw BadExtenderRequest("ExtenderArgs.Nodes has no items list");
  }
  for (const json& n : *items) {
    const json* meta = find_ci(n, "metadata");
    const json* name = meta != nullptr ? find_ci(*meta, "name") : nullptr;
    if (name == nullptr || !name->is_string()) {
      throw BadExtenderRequest("ExtenderArgs.Nodes.items holds a node without metadata.name");
    }
    c.names.push_back(name->get_ref<const std::string&>());
  }
  c.items = items;
  return c;
}

const json& pod_of(const json& args) {
  if (!args.is_object()) throw BadExtenderRequest("the request is not a JSON object");
  const json* pod = find_ci(args, "Pod");
  if (pod == nullptr || !pod->is_object()) throw BadExtenderRequest("ExtenderArgs has no Pod");
  return *pod;
}

// A name of the request that goes into an API path or a log line: Kubernetes' rule for it, or 400.
std::string checked_name(const json& args, std::string_view key, bool label) {
  std::string value = string_field(args, key, "ExtenderBindingArgs");
  try {
    label ? require_dns1123_label(value, key) : require_dns1123_subdomain(value, key);
  } catch (const InvalidName& e) {
    throw BadExtenderRequest(e.what());
  }
  return value;
}

}  // namespace

ExtenderService::ExtenderService(ApiClient& api, ExtenderOptions options)
    : api_(api), options_(std::move(options)), feed_(options_.mirror, options_.log) {}

void ExtenderService::log(const std::string& line, base::Severity severity,
                          base::SourceLocation where) const {
  if (options_.log) options_.log(severity, line, where);
}

void ExtenderService::run(const std::atomic<bool>& stop) {
  auto handlers = [this](bool node, std::atomic<bool>& synced) {
    InformerHandlers h;
    h.on_add =
        h.on_update = [this, node](const json& o) { node ? on_node(o, false) : on_pod(o, false); };
    h.on_delete = [this, node](const json& o) { node ? on_node(o, true) : on_pod(o, true); };
    h.on_synced = [this, &synced] {
      if (!synced.exchange(true) && synced_nodes_ && synced_pods_) {
        const std::lock_guard lock(mutex_);
        log(fmt::format("synced: {} nodes, {} pods", feed_.nodes().size(), feed_.live_pods()));
      }
    };
    h.on_error = [this](const std::string& what) {
      log(fmt::format("watch: {}", what), base::Severity::kWarning);
    };
    return h;
  };
  Informer nodes(api_, "/api/v1/nodes", handlers(true, synced_nodes_));
  Informer pods(api_, "/api/v1/pods", handlers(false, synced_pods_),
                "status.phase!=Succeeded,status.phase!=Failed");
  // DRA where served: slices are GPUs, claims allocated by anyone hold theirs (docs/extender.md).
  try {
    if (!patient_get(api_, kResourceApi, std::chrono::seconds(30), stop, options_.log)) return;
    // Listing them may not be granted (an extender deployed before DRA): then DRA is left out
    // with a warning rather than informers that never sync and a filter that answers errors.
    for (const char* kind : {"resourceslices", "deviceclasses", "resourceclaims"}) {
      (void)api_.get(fmt::format("{}/{}?limit=1", kResourceApi, kind));
    }
    dra_informers_ = 3;
  } catch (const ApiError& e) {
    if (e.status() != 404 && e.status() != 403) throw;
    log(fmt::format("resource.k8s.io/v1 {}: pods with resourceClaims are left to kube-scheduler",
                    e.status() == 404 ? "is not served" : "may not be listed"),
        base::Severity::kWarning);
  }
  std::list<Informer> dra;  // never moved: the threads hold references
  for (const char* kind : {"resourceslices", "deviceclasses", "resourceclaims"}) {
    if (dra_informers_ == 0) break;
    InformerHandlers h;
    h.on_add = h.on_update = [this, kind](const json& o) { on_dra(o, false, kind); };
    h.on_delete = [this, kind](const json& o) { on_dra(o, true, kind); };
    h.on_synced = [this] { ++synced_dra_; };
    h.on_error = [this](const std::string& what) {
      log(fmt::format("watch: {}", what), base::Severity::kWarning);
    };
    dra.emplace_back(api_, fmt::format("{}/{}", kResourceApi, kind), std::move(h));
  }
  std::vector<std::jthread> threads;
  threads.emplace_back([&] { nodes.run(stop); });
  for (Informer& i : dra) threads.emplace_back([&i, &stop] { i.run(stop); });
  pods.run(stop);
}

void ExtenderService::on_dra(const json& obj, bool deleted, std::string_view kind) {
  const std::lock_guard lock(mutex_);
  if (kind == "resourceslices") {
    feed_.slice(obj, deleted);
  } else if (kind == "deviceclasses") {
    feed_.device_class(obj, deleted);
  } else {
    feed_.claim(obj, deleted);
  }
}

void ExtenderService::on_node(const json& obj, bool deleted) {
  const std::lock_guard lock(mutex_);
  const std::optional<std::string> usable = feed_.node(obj, deleted).usable;
  const std::unique_lock names(names_mutex_);
  if (usable) {
    node_names_.insert(*usable);
  } else {
    node_names_.erase(object_name(obj));
  }
}

void ExtenderService::on_pod(const json& obj, bool deleted) {
  const PodObject p = pod_from_json(obj);
  if (p.uid.empty()) return;
  const std::lock_guard lock(mutex_);
  if (deleted || p.terminal()) {
    pending_.erase(p.uid);
    decisions_.erase(p.uid);
  } else if (p.node_name.empty()) {
    pending_[p.uid] = p;
  } else {
    pending_.erase(p.uid);
    // Bound: by our bind (already counted where we decided) or by anyone else (counted by the
    // feed); bound elsewhere than decided, it is counted where it is, and its claims as the API
    // server has them (kube-scheduler allocated them: the claims' own updates say where).
    if (const auto d = decisions_.find(p.uid); d != decisions_.end()) {
      // kube-scheduler's bridge claim (KEP-5004) holds its GPUs now: counted anew as the pod's
      // CPU and memory.
      if (d->second.node != p.node_name || !p.extended_claim.empty()) {
        feed_.mirror().release(p.uid);
        feed_.dra().drop_assumed(d->second.claims, feed_.mirror());
      }
      decisions_.erase(d);
    }
  }
  feed_.pod(p, deleted);
}

std::string ExtenderService::ensure_built_locked(const PodObject& asking) {
  if (std::string why = feed_.ensure_built(&asking); !why.empty()) {
    return "the extender " + why;
  }
  return {};
}

std::vector<std::string_view> ExtenderService::known_nodes(
    const std::vector<std::string_view>& offered) {
  std::vector<std::string_view> known;
  {
    const std::shared_lock names(names_mutex_);
    std::unordered_set<std::string_view> seen;
    seen.reserve(std::min(offered.size(), node_names_.size()));
    for (const std::string_view n : offered) {
      if (node_names_.contains(n) && seen.insert(n).second) known.push_back(n);
    }
  }
  counters_.unknown_nodes += offered.size() - known.size();
  return known;
}

void ExtenderService::forget_locked(const std::string& uid) {
  const auto it = decisions_.find(uid);
  if (it == decisions_.end()) return;
  feed_.mirror().release(uid);
  feed_.dra().drop_assumed(it->second.claims, feed_.mirror());
  decisions_.erase(it);
}

void ExtenderService::expire_locked() {
  const auto now = Clock::now();
  for (auto it = decisions_.begin(); it != decisions_.end();) {
    if (now - it->second.when > options_.assume_ttl) {
      log(fmt::format("{}: the decision for {} was never bound; forgotten",
                      base::printable(it->second.pod.key()), it->second.node),
          base::Severity::kWarning);
      feed_.mirror().release(it->first);
      feed_.dra().drop_assumed(it->second.claims, feed_.mirror());
      it = decisions_.erase(it);
    } else {
      ++it;
    }
  }
}

std::string ExtenderService::filter(const json& args,
                                    const std::vector<std::string_view>* node_names) {
  ++counters_.filters;
  const auto started = Clock::now();
  const json& pod_json = pod_of(args);
  Candidates c = candidates_of(args, node_names);
  c.names = known_nodes(c.names);
  const PodObject pod = pod_from_json(pod_json);
  if (pod.uid.empty()) throw BadExtenderRequest("ExtenderArgs.Pod has no metadata.uid");

  FilterAnswer a;
  a.offered = c.names;
  a.items = c.items;
  if (!pod.error.empty()) {
    a.why = fmt::format("Infeasible: {}", pod.error);
    a.unresolvable = true;
  } else {
    const std::lock_guard lock(mutex_);
    if (!synced()) {
      a.error = "the extender's node and pod cache has not synced yet";
    } else {
      expire_locked();
      forget_locked(pod.uid);  // asked again: its earlier decision did not go through
      // An error decides nothing: kube-scheduler retries the pod after it.
      a.error = ensure_built_locked(pod);
      if (!a.error.empty()) {
        log(fmt::format("filter {}: {}", base::printable(pod.key()), a.error));
      } else if (feed_.mirror().accounted(pod.uid)) {
        a.error = fmt::format("pod {} is already bound", pod.key());
      } else if (!pod.claims.empty()) {
        filter_claims_locked(pod, c.names, a);
      } else {
        ClusterMirror::Result r = feed_.mirror().schedule(pod);
        const bool placed = r.decision.outcome == sched::Outcome::kPlaced;
        if (placed && std::find(c.names.begin(), c.names.end(), r.node) == c.names.end()) {
          // kube-scheduler ruled the core's node out for a reason the core does not model
          // (inter-pod affinity, volumes, ...): decide again among the nodes it offers.
          feed_.mirror().release(pod.uid);
          PodObject among = pod;
          among.spec.constraints.node_names.assign(c.names.begin(), c.names.end());
          r = feed_.mirror().schedule(among);
        }
        if (r.decision.outcome == sched::Outcome::kPlaced) {
          decisions_[pod.uid] = {pod, r.node, r.decision.placement.gpus, Clock::now(), {}};
          // The other offered nodes are left out of FailedNodes: kube-scheduler reads it only to
          // explain a pod that found no node, and at 5,000 nodes the map was 325 KB per placed
          // pod for it to decode (docs/extender.md).
          a.keep = r.node;
        } else {
          ++counters_.unschedulable;
          sched::RequestResolver resolver(feed_.mirror().cluster());
          a.why = unschedulable_message(r, resolver.resolve(pod.spec),
                                        feed_.mirror().cluster().node_count());
          a.unresolvable = r.decision.outcome == sched::Outcome::kInfeasible;
        }
      }
    }
  }
  std::string out = filter_answer_text(a);
  counters_.filter_us += static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - started).count());
  return out;
}

void ExtenderService::filter_claims_locked(const PodObject& pod,
                                           const std::vector<std::string_view>& offered,
                                           FilterAnswer& a) {
  using Outcome = DraState::Placement::Outcome;
  if (dra_informers_ == 0) {
    a.keep_all = true;  // no DRA API here: kube-scheduler's own DRA plugin decides, if any
    return;
  }
  const std::vector<std::string> among(offered.begin(), offered.end());
  const DraState::Placement p = feed_.dra().place(pod, feed_.mirror(), among);
  switch (p.outcome) {
    case Outcome::kPlaced:
      // kube-scheduler's allocator picks the devices on this node; ours are held until its
      // allocation is seen, so another pod is not offered them meanwhile.
      decisions_[pod.uid] = {
          pod, p.result.node, {}, Clock::now(), feed_.dra().hold(pod, p, feed_.mirror())};
      a.keep = p.result.node;
      return;
    case Outcome::kUnevaluated:
      // kube-scheduler's DynamicResources plugin has filtered the offered nodes already
      // (extenders run after the framework's filters): what gpuorch cannot evaluate (a selector
      // outside its CEL subset, another driver's devices) is left to it, never answered "fits" by
      // a guess of ours.
      a.keep_all = true;
      log(fmt::format("filter {}: no say, every offered node passes: {}",
                      base::printable(pod.key()), p.message));
      return;
    case Outcome::kInfeasible:
      a.unresolvable = true;
      [[fallthrough]];
    case Outcome::kWaiting:
    case Outcome::kNoRoom:
      ++counters_.unschedulable;
      a.why = p.message;
      return;
  }
}

std::string ExtenderService::prioritize(const json& args,
                                        const std::vector<std::string_view>* node_names) {
  ++counters_.prioritizes;
  const PodObject pod = pod_from_json(pod_of(args));
  Candidates c = candidates_of(args, node_names);
  c.names = known_nodes(c.names);
  std::string chosen;
  {
    const std::lock_guard lock(mutex_);
    if (const auto it = decisions_.find(pod.uid); it != decisions_.end()) chosen = it->second.node;
  }
  return priority_list_text(c.names, chosen, kMaxExtenderPriority);
}

json ExtenderService::bind(const json& args) {
  ++counters_.binds;
  if (!args.is_object()) throw BadExtenderRequest("the request is not a JSON object");
  // The names go into the Binding's path and into log lines: each must be what Kubernetes allows
  // (issue 30: '/', '?', ".." addressed other resources, a CR/LF forged a log line).
  const std::string name = checked_name(args, "PodName", false);
  const std::string ns = checked_name(args, "PodNamespace", true);
  const std::string node = checked_name(args, "Node", false);
  const std::string uid = string_field(args, "PodUID", "ExtenderBindingArgs");
  auto refuse = [&](const std::string& why) {
    ++counters_.bind_errors;
    log(fmt::format("bind {}/{} to {} failed: {}", ns, name, node, why), base::Severity::kError);
    return json{{"Error", why}};
  };
  std::vector<std::int64_t> milli;
  std::vector<int> gpus;
  {
    const std::lock_guard lock(mutex_);
    auto it = decisions_.find(uid);
    if (it == decisions_.end() || it->second.node != node) {
      // Not what filter chose (a restarted extender, or another extender narrowed the choice):
      // the core picks the GPUs on the node kube-scheduler bound to.
      forget_locked(uid);
      const auto p = pending_.find(uid);
      if (p == pending_.end()) {
        return refuse(fmt::format("pod {}/{} (uid {}) is not a pending pod in the extender's cache",
                                  ns, name, base::printable(uid)));
      }
      if (const std::string why = ensure_built_locked(p->second); !why.empty()) return refuse(why);
      PodObject there = p->second;
      there.spec.constraints.node_names = {node};
      const ClusterMirror::Result r = feed_.mirror().schedule(there);
      if (r.decision.outcome != sched::Outcome::kPlaced) {
        return refuse(fmt::format("the pod does not fit on {}", node));
      }
      it = decisions_
               .insert_or_assign(
                   uid, Decision{p->second, node, r.decision.placement.gpus, Clock::now(), {}})
               .first;
    }
    gpus = it->second.gpus;
    if (it->second.pod.spec.gpu_share()) milli.push_back(it->second.pod.spec.gpu_milli);
    it->second.when = Clock::now();
  }
  const json binding = gpu_binding(ns, name, uid, node, gpus, milli.empty() ? 0 : milli.front());
  try {
    api_.create(pod_path(ns, name, "binding"), binding);
  } catch (const std::exception& e) {
    // Once: the answer's Error tells kube-scheduler, which retries the pod with its own backoff
    // (issue 29 item 8: never a loop of binds in here).
    const std::lock_guard lock(mutex_);
    forget_locked(uid);
    return refuse(base::printable(e.what(), 1000));
  }
  log(fmt::format("bound {}/{} to {}{}", ns, name, node,
                  gpus.empty() ? "" : fmt::format(" gpus {}", fmt::join(gpus, ","))));
  return json{{"Error", ""}};
}

ExtenderService::Reply ExtenderService::call(std::string_view verb, std::string_view body) {
  auto one_line = [this](int status, const std::string& what) {
    ++counters_.bad_requests;
    return Reply{status, what + "\n", "text/plain"};
  };
  json args;
  // filter and prioritize: the node names read apart from the parse (extender_request.hpp).
  std::optional<SplitArgs> split;
  if (verb == "filter" || verb == "prioritize") split = split_node_names(body);
  const std::vector<std::string_view>* names = split ? &split->names : nullptr;
  try {
    args = parse_server_json(split ? std::string_view(split->rest) : body,
                             fmt::format("{} request", verb));
  } catch (const std::exception& e) {
    return one_line(400, base::printable(e.what(), 1000));
  }
  try {
    std::string out;
    if (verb == "filter") {
      out = filter(args, names);
    } else if (verb == "prioritize") {
      out = prioritize(args, names);
    } else if (verb == "bind") {
      out = bind(args).dump(-1, ' ', false, json::error_handler_t::replace);
    } else {
      return one_line(404, fmt::format("unknown verb '{}' (filter, prioritize, bind)", verb));
    }
    return Reply{200, std::move(out), "application/json"};
  } catch (const BadExtenderRequest& e) {
    return one_line(400, fmt::format("{} request: {}", verb, base::printable(e.what(), 1000)));
  } catch (const std::exception& e) {
    // A bug or an object the core cannot use costs this one answer, never the extender.
    const std::string what = base::printable(e.what(), 1000);
    log(fmt::format("{} failed: {}", verb, what), base::Severity::kError);
    return one_line(500, fmt::format("{} failed: {}", verb, what));
  }
}

std::string ExtenderService::metrics() const {
  std::string out;
  auto counter = [&out](const char* name, const char* help, std::uint64_t v) {
    out += prometheus_counter(name, help, v);
  };
  counter("gpuorch_extender_filter_total", "Filter calls.", counters_.filters);
  counter("gpuorch_extender_prioritize_total", "Prioritize calls.", counters_.prioritizes);
  counter("gpuorch_extender_bind_total", "Bind calls.", counters_.binds);
  counter("gpuorch_extender_bind_errors_total", "Bind calls that failed.", counters_.bind_errors);
  counter("gpuorch_extender_bad_requests_total", "Requests answered 4xx/5xx.",
          counters_.bad_requests);
  counter("gpuorch_extender_unschedulable_total", "Filter calls that found no node.",
          counters_.unschedulable);
  counter("gpuorch_extender_filter_microseconds_total", "Time spent deciding in filter.",
          counters_.filter_us);
  counter("gpuorch_extender_unknown_nodes_total",
          "Offered node names not in the extender's cache (or offered twice), dropped.",
          counters_.unknown_nodes);
  return out;
}

}  // namespace gpuorch::k8s
