// Allocate follows the scheduler, against the real API server: the plugin (DGX H100 fixture)
// serves the kubelet's gRPC API, the fake kubelet calls GetPreferredAllocation and Allocate as the
// kubelet does, and pods bound to the node carry the GPUs a gpuorch scheduler recorded. A 4-GPU
// NVLink set and a share (MPS) are handed out exactly as recorded whatever devices the kubelet
// names, the pod is marked allocated, two pods racing on one node get one pod's GPUs each, and a
// pod of another scheduler keeps the kubelet's devices.
#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <future>
#include <set>
#include <thread>

#include "gpuorch/k8s/api/api_client.hpp"
#include "gpuorch/k8s/api/kubeconfig.hpp"
#include "gpuorch/k8s/deviceplugin/plugin_server.hpp"
#include "gpuorch/k8s/kubelet/fake_kubelet.hpp"
#include "k8s/k8s_support.hpp"
#include "support/control_plane.hpp"
#include "support/kube_objects.hpp"
#include "support/test_support.hpp"

namespace gpuorch::k8s {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

const std::string kNode = "node-1";
const std::string kPods = "/api/v1/namespaces/default/pods";

// A pod already bound to kNode, as a gpuorch scheduler's Binding leaves it (GPUs recorded), or
// as another scheduler leaves it (no annotations).
void bound_pod(ApiClient& api, const std::string& name, int gpus, json annotations) {
  const json req = {{"nvidia.com/gpu", std::to_string(gpus)}};
  api.create(kPods, {{"apiVersion", "v1"},
                     {"kind", "Pod"},
                     {"metadata", {{"name", name}, {"annotations", std::move(annotations)}}},
                     {"spec",
                      {{"nodeName", kNode},
                       {"containers", json::array({{{"name", "c"},
                                                    {"image", "registry.k8s.io/pause:3.10"},
                                                    {"resources", {{"requests", req},
                                                                   {"limits", req}}}}})}}}});
}

std::string allocated(ApiClient& api, const std::string& name) {
  const json p = api.get(fmt::format("{}/{}", kPods, name));
  return p["metadata"].value("annotations", json::object()).value(kGpusAllocatedAnnotation, "");
}

// The plugin on a thread, following the scheduler through `api`, registered with a fake kubelet.
class Plugin {
 public:
  Plugin(const topology::Host& host, const std::string& config_yaml, ApiClient& api)
      : scheduled_(api, kNode, [this](const std::string& l) { add(l); }),
        kubelet_(dir_.path().string()) {
    kubelet_.start();
    const PluginConfig config = parse_config(config_yaml, "config.yaml");
    PluginOptions o;
    o.directory = dir_.path().string();
    o.backoff_initial = 50ms;
    o.log = [this](const std::string& l) { add(l); };
    o.scheduled = &scheduled_;
    manager_ = std::make_unique<PluginManager>(host, config, plan_resources(host, config), o);
    thread_ = std::thread([this] { manager_->run(); });
    if (!kubelet_.wait_registrations(1, 10s)) throw std::runtime_error("no registration");
    stub_ = kubelet_.connect(kubelet_.registrations().front().endpoint());
  }
  ~Plugin() {
    manager_->stop();
    thread_.join();
  }
  Plugin(const Plugin&) = delete;
  Plugin& operator=(const Plugin&) = delete;

  std::vector<std::string> preferred(const std::vector<std::string>& available, int size) {
    v1beta1::PreferredAllocationRequest req;
    auto* c = req.add_container_requests();
    for (const auto& id : available) c->add_available_deviceids(id);
    c->set_allocation_size(size);
    v1beta1::PreferredAllocationResponse resp;
    grpc::ClientContext ctx;
    EXPECT_TRUE(stub_->GetPreferredAllocation(&ctx, req, &resp).ok());
    const auto& ids = resp.container_responses(0).deviceids();
    return {ids.begin(), ids.end()};
  }
  // One container's Allocate, as the kubelet sends it; its environment.
  std::map<std::string, std::string> allocate(const std::vector<std::string>& ids) {
    v1beta1::AllocateRequest req;
    auto* c = req.add_container_requests();
    for (const auto& id : ids) c->add_devices_ids(id);
    v1beta1::AllocateResponse resp;
    grpc::ClientContext ctx;
    const auto s = stub_->Allocate(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    if (!s.ok()) return {};
    const auto& envs = resp.container_responses(0).envs();
    return {envs.begin(), envs.end()};
  }
  std::string log() const {
    const std::lock_guard lock(mu_);
    return log_;
  }

 private:
  void add(const std::string& l) {
    const std::lock_guard lock(mu_);
    log_ += l + "\n";
  }
  mutable std::mutex mu_;
  std::string log_;
  test::TempDir dir_;
  ScheduledAllocations scheduled_;
  FakeKubelet kubelet_;
  std::unique_ptr<PluginManager> manager_;
  std::thread thread_;
  std::unique_ptr<v1beta1::DevicePlugin::Stub> stub_;
};

std::string uuids(const topology::Host& h, std::initializer_list<int> gpus) {
  std::vector<std::string> out;
  for (const int g : gpus) out.push_back(h.gpus[static_cast<std::size_t>(g)].uuid);
  return fmt::format("{}", fmt::join(out, ","));
}

TEST(ScheduledAllocation, AllocateHandsOutTheRecordedGpus) {
  auto& cp = test::ControlPlane::shared();
  ApiClient api(load_kubeconfig(cp.kubeconfig()));
  test::clear_cluster(api);
  const topology::Host host = test::fixture_host("dgx-h100");
  std::vector<std::string> ids;
  for (const auto& g : host.gpus) ids.push_back(g.uuid);
  Plugin plugin(host, "", api);

  // A 4-GPU NVLink set recorded as 4-7: preferred, then handed out even when the kubelet names
  // 0-3 (a kubelet that did not follow the preference).
  bound_pod(api, "four", 4, {{"gpuorch.io/gpus", "4,5,6,7"}});
  EXPECT_EQ(plugin.preferred(ids, 4),
            (std::vector<std::string>{ids[4], ids[5], ids[6], ids[7]}));
  auto env = plugin.allocate({ids[0], ids[1], ids[2], ids[3]});
  EXPECT_EQ(env["NVIDIA_VISIBLE_DEVICES"], uuids(host, {4, 5, 6, 7})) << plugin.log();
  EXPECT_EQ(env["GPUORCH_POD"], "default/four");
  EXPECT_EQ(allocated(api, "four"), uuids(host, {4, 5, 6, 7}));
  // Done once: the same request again finds no waiting pod and keeps the kubelet's devices.
  env = plugin.allocate({ids[0], ids[1], ids[2], ids[3]});
  EXPECT_EQ(env["NVIDIA_VISIBLE_DEVICES"], uuids(host, {0, 1, 2, 3}));

  // A pod another scheduler placed: the kubelet's choice (the plugin's own preference) stands.
  bound_pod(api, "theirs", 1, json::object());
  const auto own = plugin.preferred({ids[0], ids[1], ids[2], ids[3]}, 1);
  ASSERT_EQ(own.size(), 1U);
  env = plugin.allocate(own);
  EXPECT_EQ(env["NVIDIA_VISIBLE_DEVICES"], own[0]);
  EXPECT_EQ(env.count("GPUORCH_POD"), 0U);

  // Two pods race on one node, each recorded with one GPU; the kubelet names the same device
  // for both (it cannot tell them apart): each Allocate gets one pod's GPU, none twice.
  bound_pod(api, "race-a", 1, {{"gpuorch.io/gpus", "1"}});
  bound_pod(api, "race-b", 1, {{"gpuorch.io/gpus", "2"}});
  auto a = std::async(std::launch::async, [&] { return plugin.allocate({ids[3]}); });
  auto b = std::async(std::launch::async, [&] { return plugin.allocate({ids[3]}); });
  const std::set<std::string> got{a.get()["NVIDIA_VISIBLE_DEVICES"],
                                  b.get()["NVIDIA_VISIBLE_DEVICES"]};
  EXPECT_EQ(got, (std::set<std::string>{ids[1], ids[2]})) << plugin.log();
  EXPECT_EQ(allocated(api, "race-a"), ids[1]);
  EXPECT_EQ(allocated(api, "race-b"), ids[2]);
}

TEST(ScheduledAllocation, ShareGetsItsGpuAndMpsLimits) {
  auto& cp = test::ControlPlane::shared();
  ApiClient api(load_kubeconfig(cp.kubeconfig()));
  test::clear_cluster(api);
  const topology::Host host = test::fixture_host("dgx-h100");
  Plugin plugin(host,
                "sharing:\n  mps:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n",
                api);
  // A share recorded on GPU 3 with 500 milli; the kubelet offers replicas of every GPU.
  bound_pod(api, "half", 1, {{"gpuorch.io/gpus", "3"}, {"gpuorch.io/gpu-milli", "500"}});
  std::vector<std::string> replicas;
  for (const auto& g : host.gpus) replicas.push_back(g.uuid + "::0");
  const auto pref = plugin.preferred(replicas, 1);
  ASSERT_EQ(pref.size(), 1U);
  EXPECT_EQ(strip_replica(pref[0]), host.gpus[3].uuid);
  auto env = plugin.allocate({replicas[0]});
  EXPECT_EQ(env["NVIDIA_VISIBLE_DEVICES"], host.gpus[3].uuid) << plugin.log();
  EXPECT_EQ(env["GPUORCH_GPU_MILLI"], "500");
  EXPECT_EQ(env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"], "50");
  EXPECT_EQ(env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"],
            fmt::format("0={}M", host.gpus[3].memory_mib / 2));
  EXPECT_FALSE(allocated(api, "half").empty());
}

}  // namespace
}  // namespace gpuorch::k8s
