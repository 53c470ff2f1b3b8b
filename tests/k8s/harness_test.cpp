// The kubelet-side harness: a fake kubelet (Registration server + DevicePlugin client, built from
// the same .proto) drives the plugin through register -> ListAndWatch -> GetPreferredAllocation
// -> Allocate -> kubelet restart -> re-register -> a device turning Unhealthy -> shutdown, on
// each fixture host.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <mutex>
#include <thread>

#include "gpuorch/k8s/deviceplugin/plugin_server.hpp"
#include "gpuorch/k8s/kubelet/fake_kubelet.hpp"
#include "k8s/k8s_support.hpp"
#include "support/test_support.hpp"

namespace gpuorch::k8s {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

struct Case {
  std::string host;
  std::string config;  // YAML
  std::string resource;
  std::size_t devices;
  std::size_t resources;
};

class Log {
 public:
  void add(const std::string& l) {
    std::lock_guard lock(mu_);
    lines_.push_back(l);
  }
  bool contains(const std::string& s) const {
    std::lock_guard lock(mu_);
    for (const auto& l : lines_) {
      if (l.find(s) != std::string::npos) return true;
    }
    return false;
  }
  std::string text() const {
    std::lock_guard lock(mu_);
    std::string t;
    for (const auto& l : lines_) t += l + "\n";
    return t;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> lines_;
};

// The plugin running on a thread for the length of a test.
class RunningPlugin {
 public:
  RunningPlugin(const topology::Host& host, const PluginConfig& config, const std::string& dir,
                Log& log) {
    PluginOptions o;
    o.directory = dir;
    o.backoff_initial = 50ms;
    o.backoff_max = 200ms;
    o.log = [&log](const std::string& l) { log.add(l); };
    manager_ = std::make_unique<PluginManager>(host, config, plan_resources(host, config), o);
    thread_ = std::thread([this] { rc_ = manager_->run(); });
  }
  ~RunningPlugin() { stop(); }
  int stop() {
    if (thread_.joinable()) {
      manager_->stop();
      thread_.join();
    }
    return rc_;
  }
  PluginManager& manager() { return *manager_; }

 private:
  std::unique_ptr<PluginManager> manager_;
  std::thread thread_;
  int rc_ = -1;
};

const v1beta1::RegisterRequest& registration(const FakeKubelet& k, const std::string& resource,
                                             std::size_t from = 0) {
  static v1beta1::RegisterRequest last;
  const auto regs = k.registrations();
  for (std::size_t i = from; i < regs.size(); ++i) {
    if (regs[i].resource_name() == resource) {
      last = regs[i];
      return last;
    }
  }
  throw std::runtime_error("no registration for " + resource);
}

class Harness : public ::testing::TestWithParam<Case> {};

TEST_P(Harness, RegisterWatchAllocateRestartUnhealthyShutdown) {
  const Case& c = GetParam();
  test::TempDir dir;
  const auto host = test::fixture_host(c.host);
  const auto config = parse_config(c.config, "case.yaml");
  Log log;
  FakeKubelet kubelet(dir.path().string());
  kubelet.start();
  RunningPlugin plugin(host, config, dir.path().string(), log);

  // Register: the kubelet checked the version and name and reached the endpoint.
  ASSERT_TRUE(kubelet.wait_registrations(c.resources, 10s)) << log.text();
  const auto reg = registration(kubelet, c.resource);
  EXPECT_EQ(reg.version(), "v1beta1");
  EXPECT_TRUE(reg.options().get_preferred_allocation_available());
  EXPECT_TRUE(fs::exists(dir.path() / reg.endpoint()));

  // ListAndWatch: every device, Healthy, with its NUMA node where the host knows it.
  auto stub = kubelet.connect(reg.endpoint());
  auto watch = std::make_unique<DeviceWatch>(*stub);
  ASSERT_TRUE(watch->wait_updates(1, 10s));
  const auto first = watch->updates()[0];
  ASSERT_EQ(static_cast<std::size_t>(first.devices_size()), c.devices);
  std::vector<std::string> ids;
  for (const auto& d : first.devices()) {
    EXPECT_EQ(d.health(), "Healthy");
    ids.push_back(d.id());
  }
  const auto& g0 = host.gpus[0];
  if (g0.numa_node >= 0) {
    ASSERT_EQ(first.devices(0).topology().nodes_size(), 1);
    EXPECT_EQ(first.devices(0).topology().nodes(0).id(), g0.numa_node);
  }

  // GetPreferredAllocation (2 devices, the second offered one required) then Allocate them.
  v1beta1::PreferredAllocationRequest preq;
  auto* pc = preq.add_container_requests();
  for (const auto& id : ids) pc->add_available_deviceids(id);
  pc->add_must_include_deviceids(ids[1]);
  pc->set_allocation_size(2);
  v1beta1::PreferredAllocationResponse presp;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub->GetPreferredAllocation(&ctx, preq, &presp).ok());
  }
  ASSERT_EQ(presp.container_responses_size(), 1);
  ASSERT_EQ(presp.container_responses(0).deviceids_size(), 2);
  EXPECT_EQ(presp.container_responses(0).deviceids(0), ids[1]);
  v1beta1::AllocateRequest areq;
  for (const auto& id : presp.container_responses(0).deviceids()) {
    areq.add_container_requests()->add_devices_ids(id);
  }
  v1beta1::AllocateResponse aresp;
  {
    grpc::ClientContext ctx;
    const auto s = stub->Allocate(&ctx, areq, &aresp);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  ASSERT_EQ(aresp.container_responses_size(), 2);
  if (host.gpus[0].vendor == topology::Vendor::kAmd) {
    EXPECT_EQ(aresp.container_responses(0).devices(0).host_path(), "/dev/kfd");
  } else {
    EXPECT_EQ(aresp.container_responses(0).envs().at("NVIDIA_VISIBLE_DEVICES"),
              strip_replica(ids[1]));
  }
  {
    v1beta1::AllocateRequest bad;
    bad.add_container_requests()->add_devices_ids("no-such-device");
    grpc::ClientContext ctx;
    v1beta1::AllocateResponse r;
    EXPECT_EQ(stub->Allocate(&ctx, bad, &r).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }

  // Kubelet restart: every socket deleted, kubelet.sock recreated -> the plugin serves again
  // and registers again; the old stream ends.
  kubelet.restart();
  ASSERT_TRUE(kubelet.wait_registrations(2 * c.resources, 10s)) << log.text();
  EXPECT_TRUE(watch->wait_end(5s));
  EXPECT_TRUE(log.contains("kubelet.sock created")) << log.text();
  const auto again = registration(kubelet, c.resource, c.resources);
  stub = kubelet.connect(again.endpoint());
  watch = std::make_unique<DeviceWatch>(*stub);
  ASSERT_TRUE(watch->wait_updates(1, 10s));

  // A device turns Unhealthy: the stream carries a new list with it marked.
  const std::string key = g0.uuid.empty() ? g0.pci.address : g0.uuid;
  plugin.manager().health().set_unhealthy(key, "test");
  ASSERT_TRUE(watch->wait_updates(2, 10s)) << log.text();
  const auto second = watch->updates()[1];
  int unhealthy = 0;
  for (const auto& d : second.devices()) unhealthy += d.health() == "Unhealthy" ? 1 : 0;
  EXPECT_GT(unhealthy, 0);
  EXPECT_LT(unhealthy, second.devices_size() + 1);

  // Shutdown: streams end, the sockets are gone.
  EXPECT_EQ(plugin.stop(), 0);
  EXPECT_TRUE(watch->wait_end(5s));
  for (const auto& r : kubelet.registrations()) {
    EXPECT_FALSE(fs::exists(dir.path() / r.endpoint())) << r.endpoint();
  }
}

const char* kSeed =
    "sharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n";

INSTANTIATE_TEST_SUITE_P(Fixtures, Harness,
                         ::testing::Values(Case{"dgx-h100", "", "nvidia.com/gpu", 8, 1},
                                           Case{"mi250", "", "amd.com/gpu", 4, 1},
                                           Case{"t4x2", kSeed, "nvidia.com/gpu", 8, 1},
                                           Case{"h100-mig", "flags:\n  migStrategy: mixed\n",
                                                "nvidia.com/mig-3g.40gb", 3, 4}),
                         [](const ::testing::TestParamInfo<Case>& p) {
                           std::string n = p.param.host;
                           for (char& ch : n) ch = ch == '-' ? '_' : ch;
                           return n;
                         });

TEST(HarnessStart, KubeletNotThereYetIsRetriedWithBackoff) {
  test::TempDir dir;
  const auto host = test::fixture_host("t4x2");
  Log log;
  RunningPlugin plugin(host, PluginConfig{}, dir.path().string(), log);
  std::this_thread::sleep_for(300ms);
  EXPECT_TRUE(log.contains("kubelet not reachable at")) << log.text();
  EXPECT_TRUE(log.contains("retrying nvidia.com/gpu in")) << log.text();
  FakeKubelet kubelet(dir.path().string());
  kubelet.start();
  ASSERT_TRUE(kubelet.wait_registrations(1, 10s)) << log.text();
  EXPECT_EQ(plugin.stop(), 0);
}

// The plugin's socket hands out devices: owner only (0600), not the umask's 0777 under umask 0.
TEST(HarnessStart, SocketIsOwnerOnlyWhateverTheUmask) {
  struct UmaskGuard {
    mode_t old = ::umask(0);
    ~UmaskGuard() { ::umask(old); }
  } guard;
  test::TempDir dir;
  const auto host = test::fixture_host("t4x2");
  Log log;
  FakeKubelet kubelet(dir.path().string());
  kubelet.start();
  RunningPlugin plugin(host, PluginConfig{}, dir.path().string(), log);
  ASSERT_TRUE(kubelet.wait_registrations(1, 10s)) << log.text();
  const auto socket = dir.path() / registration(kubelet, "nvidia.com/gpu").endpoint();
  struct stat st {};
  ASSERT_EQ(::stat(socket.c_str(), &st), 0) << socket;
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0600u) << std::oct << (st.st_mode & 07777);
  EXPECT_EQ(plugin.stop(), 0);
}

TEST(HarnessStart, MissingOrReadOnlyDirectoryIsBadInput) {
  const auto host = test::fixture_host("t4x2");
  PluginOptions o;
  o.directory = "/nonexistent/device-plugins/";
  EXPECT_EQ(test::input_error([&] { PluginManager m(host, PluginConfig{}, {}, o); }),
            "/nonexistent/device-plugins/: the device plugin directory does not exist");
  test::TempDir dir;
  test::write_text(dir.file("file"), "");
  o.directory = dir.file("file");
  EXPECT_EQ(test::input_error([&] { PluginManager m(host, PluginConfig{}, {}, o); }),
            o.directory + ": the device plugin directory is not a directory");
  if (::geteuid() != 0) {  // root may write anywhere
    o.directory = "/proc";
    EXPECT_EQ(test::input_error([&] { PluginManager m(host, PluginConfig{}, {}, o); }),
              "/proc: the device plugin directory is not writable");
  }
}

}  // namespace
}  // namespace gpuorch::k8s
