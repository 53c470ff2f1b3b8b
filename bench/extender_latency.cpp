// Latency of `gpuorch extender`'s filter and prioritize calls on a large cluster, through the
// real HTTP server on loopback (k8s::bind_extender_http, JSON parse and dump included), one call
// at a time as kube-scheduler makes them. The cluster is openb's 1213 GPU nodes repeated up to
// --nodes (copies named <sn>-c<k>), fed to the extender's cache as Node objects; pods are drawn
// (seeded) from openb's default pod list and sent as kube-scheduler sends them with
// nodeCacheCapable: true: the Pod and every node's name (no node filtered out by kube-scheduler
// first: the largest request the extender gets). After filter and prioritize, each placed pod is
// delivered to the cache as bound, as the watch would after kube-scheduler's bind, so the
// cluster fills as in a replay; by default the draws ask for 100 % of the GPUs, so the last part
// of the run is the hardest one, pods that fit nowhere and are explained on every node.
// --node-updates K re-delivers K nodes, unchanged, before each call, as the kubelets' status
// updates reach the extender's watch (5,000 nodes reporting every 5 minutes: about 17 a second).
//   extender_latency [--nodes 5000] [--pods N] [--policy efd] [--seed 42] [--openb DIR]
//                    [--node-updates K]
#include <fmt/format.h>
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gpuorch/io/openb.hpp"
#include "gpuorch/k8s/extender/extender_http.hpp"
#include "gpuorch/k8s/extender/extender_service.hpp"

namespace {

using gpuorch::cluster::NodeSpec;
using gpuorch::workload::PodSpec;
using nlohmann::json;

json node_object(const NodeSpec& n) {
  const json res = {{"cpu", fmt::format("{}m", n.cpu_milli)},
                    {"memory", fmt::format("{}Mi", n.memory_mib)},
                    {"nvidia.com/gpu", std::to_string(n.gpu_count)},
                    {"pods", "110"}};
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata",
           {{"name", n.name},
            {"uid", "node-" + n.name},
            {"labels",
             {{"nvidia.com/gpu.product", n.gpu_model},
              {"kubernetes.io/hostname", n.name},
              {"kubernetes.io/os", "linux"}}}}},
          {"status", {{"capacity", res}, {"allocatable", res}}}};
}

std::string fraction(std::int64_t milli) {
  std::string s = fmt::format("{:.3f}", static_cast<double>(milli) / 1000.0);
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s;
}

// A pending pod as kube-scheduler sends it: the API server's defaults filled in (restart and DNS
// policy, the token volume, the not-ready/unreachable tolerations, status), a model constraint
// as required node affinity, a share as the gpu-fraction annotation.
json pod_object(const PodSpec& p, int i) {
  const std::string name = fmt::format("bench-{}", i);
  json res = {{"cpu", fmt::format("{}m", p.cpu_milli)},
              {"memory", fmt::format("{}Mi", p.memory_mib)}};
  json annotations = json::object();
  if (p.gpu_count > 0 && !p.gpu_share()) res["nvidia.com/gpu"] = std::to_string(p.gpu_count);
  if (p.gpu_share()) annotations["gpu-fraction"] = fraction(p.gpu_milli);
  json container = {
      {"name", "main"},
      {"image", "registry.k8s.io/pause:3.10"},
      {"resources", {{"requests", res}, {"limits", res}}},
      {"terminationMessagePath", "/dev/termination-log"},
      {"terminationMessagePolicy", "File"},
      {"imagePullPolicy", "IfNotPresent"},
      {"volumeMounts",
       json::array({{{"name", "kube-api-access"},
                     {"readOnly", true},
                     {"mountPath", "/var/run/secrets/kubernetes.io/serviceaccount"}}})}};
  json spec = {
      {"schedulerName", "default-scheduler"},
      {"containers", json::array({container})},
      {"restartPolicy", "Always"},
      {"terminationGracePeriodSeconds", 30},
      {"dnsPolicy", "ClusterFirst"},
      {"serviceAccountName", "default"},
      {"securityContext", json::object()},
      {"priority", 0},
      {"enableServiceLinks", true},
      {"preemptionPolicy", "PreemptLowerPriority"},
      {"tolerations", json::array({{{"key", "node.kubernetes.io/not-ready"},
                                    {"operator", "Exists"},
                                    {"effect", "NoExecute"},
                                    {"tolerationSeconds", 300}},
                                   {{"key", "node.kubernetes.io/unreachable"},
                                    {"operator", "Exists"},
                                    {"effect", "NoExecute"},
                                    {"tolerationSeconds", 300}}})},
      {"volumes",
       json::array({{{"name", "kube-api-access"},
                     {"projected",
                      {{"defaultMode", 420},
                       {"sources",
                        json::array({{{"serviceAccountToken",
                                       {{"expirationSeconds", 3607}, {"path", "token"}}}},
                                     {{"configMap",
                                       {{"name", "kube-root-ca.crt"},
                                        {"items", json::array({{{"key", "ca.crt"},
                                                                {"path", "ca.crt"}}})}}}}})}}}}})}};
  if (p.gpu_count > 0 && !p.allowed_models.empty()) {
    spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        ["nodeSelectorTerms"] =
            json::array({{{"matchExpressions", json::array({{{"key", "nvidia.com/gpu.product"},
                                                             {"operator", "In"},
                                                             {"values", p.allowed_models}}})}}});
  }
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"name", name},
            {"namespace", "bench"},
            {"uid", fmt::format("00000000-0000-4000-8000-{:012d}", i)},
            {"resourceVersion", std::to_string(1000 + i)},
            {"creationTimestamp", "2026-01-01T00:00:00Z"},
            {"annotations", annotations}}},
          {"spec", spec},
          {"status", {{"phase", "Pending"}, {"qosClass", "Guaranteed"}}}};
}

struct Series {
  std::vector<double> ms;
  void add(std::chrono::steady_clock::duration d) {
    ms.push_back(std::chrono::duration<double, std::milli>(d).count());
  }
  [[nodiscard]] std::string summary() {
    if (ms.empty()) return "none";
    std::sort(ms.begin(), ms.end());
    auto q = [&](double p) {
      return ms[std::min(ms.size() - 1,
                         static_cast<std::size_t>(p * static_cast<double>(ms.size())))];
    };
    return fmt::format("{:>6} calls  p50 {:6.2f} ms  p99 {:6.2f} ms  max {:6.2f} ms", ms.size(),
                       q(0.5), q(0.99), ms.back());
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::size_t nodes = 5000, pods = 0, node_updates = 0;
  std::string policy = "efd", openb = std::string(GPUORCH_SHARED_DIR) + "/openb";
  std::uint64_t seed = 42;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--nodes") {
      nodes = std::strtoul(argv[i + 1], nullptr, 10);
    } else if (flag == "--pods") {
      pods = std::strtoul(argv[i + 1], nullptr, 10);
    } else if (flag == "--policy") {
      policy = argv[i + 1];
    } else if (flag == "--seed") {
      seed = std::strtoull(argv[i + 1], nullptr, 10);
    } else if (flag == "--node-updates") {
      node_updates = std::strtoul(argv[i + 1], nullptr, 10);
    } else if (flag == "--openb") {
      openb = argv[i + 1];
    } else {
      fmt::print(stderr, "unknown flag {}\n", flag);
      return 2;
    }
  }
  const auto base_nodes = gpuorch::io::load_openb_nodes(openb + "/openb_node_list_gpu_node.csv");
  const auto trace = gpuorch::io::load_openb_pods(openb + "/openb_pod_list_default.csv");
  std::vector<NodeSpec> cluster;
  std::int64_t gpus = 0;
  for (std::size_t i = 0; i < nodes; ++i) {
    NodeSpec n = base_nodes[i % base_nodes.size()];
    if (i >= base_nodes.size()) n.name += fmt::format("-c{}", i / base_nodes.size());
    gpus += n.gpu_count;
    cluster.push_back(std::move(n));
  }
  // Draw pods (with replacement, seeded) until they ask for every GPU, as `sim fill` tunes.
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::size_t> pick(0, trace.pods.size() - 1);
  std::vector<PodSpec> draws;
  std::int64_t asked = 0;
  while (pods > 0 ? draws.size() < pods : asked < gpus * 1000) {
    draws.push_back(trace.pods[pick(rng)]);
    asked += draws.back().total_gpu_milli();
  }

  gpuorch::k8s::ApiClient api(gpuorch::k8s::ClusterConfig{.server = "https://127.0.0.1:1"});
  gpuorch::k8s::ExtenderOptions options;
  options.mirror.policy = policy;
  options.mirror.seed = seed;
  options.mirror.history = trace.pods;  // `--workload`, as in the openb replay
  gpuorch::k8s::ExtenderService service(api, options);
  json names = json::array();
  std::vector<json> node_objects;
  for (const auto& n : cluster) {
    node_objects.push_back(node_object(n));
    service.on_node(node_objects.back(), false);
    names.push_back(n.name);
  }
  service.mark_synced();
  const std::string names_text = names.dump();

  httplib::Server http;
  const int port = gpuorch::k8s::bind_extender_http(http, service, "127.0.0.1", 0);
  if (port < 0) {
    fmt::print(stderr, "cannot bind a loopback port\n");
    return 1;
  }
  std::thread server([&] { http.listen_after_bind(); });
  httplib::Client client("127.0.0.1", port);
  client.set_keep_alive(true);  // kube-scheduler's HTTP client keeps its connection
  client.set_tcp_nodelay(true);
  client.set_read_timeout(30, 0);

  fmt::print(
      "{} nodes ({} GPUs), {} pods drawn from openb_pod_list_default.csv asking {:.1f} % of "
      "the GPUs, policy {}, seed {}\n",
      cluster.size(), gpus, draws.size(), 100.0 * static_cast<double>(asked) / (gpus * 1000.0),
      policy, seed);
  Series filter_placed, filter_unschedulable, prioritize, first;
  std::size_t placed = 0, bytes_in = 0, bytes_out = 0;
  const auto run_started = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < draws.size(); ++i) {
    for (std::size_t u = 0; u < node_updates; ++u) {
      service.on_node(node_objects[(i * node_updates + u) % node_objects.size()], false);
    }
    json pod = pod_object(draws[i], static_cast<int>(i));
    const std::string body =
        "{\"Pod\":" + pod.dump() + ",\"Nodes\":null,\"NodeNames\":" + names_text + "}";
    auto t0 = std::chrono::steady_clock::now();
    auto res = client.Post("/filter", body, "application/json");
    const auto filter_time = std::chrono::steady_clock::now() - t0;
    if (!res || res->status != 200) {
      fmt::print(stderr, "filter {}: {}\n", i, res ? res->body : httplib::to_string(res.error()));
      return 1;
    }
    bytes_in += body.size();
    bytes_out += res->body.size();
    // Only NodeNames is read (the answer names every other node in FailedNodes).
    const std::size_t at = res->body.find("\"NodeNames\":");
    const json kept =
        at == std::string::npos
            ? json()
            : json::parse(res->body.substr(at + 12, res->body.find(']', at) - at - 11));
    const bool ok = kept.is_array() && kept.size() == 1;
    (ok ? filter_placed : filter_unschedulable).add(filter_time);
    if (i < 100) first.add(filter_time);
    if (!ok) continue;
    // Prioritize among the nodes filter kept (kube-scheduler skips it for one node; measured).
    const std::string pbody = json{{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", kept}}.dump();
    t0 = std::chrono::steady_clock::now();
    res = client.Post("/prioritize", pbody, "application/json");
    prioritize.add(std::chrono::steady_clock::now() - t0);
    if (!res || res->status != 200) return 1;
    // The watch then delivers the pod bound where filter chose (what the Binding does).
    ++placed;
    pod["spec"]["nodeName"] = kept[0];
    service.on_pod(pod, false);
  }
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - run_started).count();
  fmt::print("filter, pod placed:        {}\n", filter_placed.summary());
  fmt::print("filter, pod unschedulable: {}\n", filter_unschedulable.summary());
  std::vector<double> all = filter_placed.ms;
  all.insert(all.end(), filter_unschedulable.ms.begin(), filter_unschedulable.ms.end());
  Series every{all};
  fmt::print("filter, every call:        {}\n", every.summary());
  fmt::print("filter, first 100 calls:   {}\n", first.summary());
  fmt::print("prioritize:                {}\n", prioritize.summary());
  const auto& c = service.counters();
  fmt::print(
      "inside ExtenderService::filter (no parse, no dump): {:.2f} ms a call on average\n",
      static_cast<double>(c.filter_us.load()) / 1000.0 / static_cast<double>(c.filters.load()));
  fmt::print(
      "{} of {} pods placed; {:.0f} KB per filter request, {:.0f} KB per answer on "
      "average; {:.1f} s\n",
      placed, draws.size(), static_cast<double>(bytes_in) / 1024.0 / draws.size(),
      static_cast<double>(bytes_out) / 1024.0 / draws.size(), wall);
  http.stop();
  server.join();
  return 0;
}
