// Sharing a GPU through the DRA driver's GpuConfig (docs/dra.md, "Sharing a GPU"): the parser
// (NVIDIA's field names, one message per mistake), which configuration applies to which device
// (class, claim, requests), the plan, the CDI edits, the checkpoint, and an MPS daemon's life
// through the preparer.
#include "gpuorch/k8s/dra/gpu_sharing.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <fstream>
#include <thread>

#include "gpuorch/k8s/dra/cdi_spec.hpp"
#include "gpuorch/k8s/dra/checkpoint.hpp"
#include "gpuorch/k8s/dra/claim_preparer.hpp"
#include "gpuorch/k8s/dra/device_config.hpp"
#include "gpuorch/k8s/dra/gpu_config.hpp"
#include "gpuorch/k8s/dra/mps_daemon.hpp"
#include "gpuorch/k8s/dra/resource_slice.hpp"
#include "gpuorch/k8s/manifests/manifests.hpp"
#include "k8s/k8s_support.hpp"
#include "support/test_support.hpp"

namespace gpuorch::k8s::dra {
namespace {

using nlohmann::json;

constexpr const char* kNode = "dgx-h100-01";
constexpr const char* kUid = "5e1c0a3b-2222-4c2d-9e3f-000000000002";
constexpr const char* kGpu0 = "GPU-64bbca15-1776-feaf-35c7-c0761cd05691";
constexpr const char* kGpu1 = "GPU-637037f8-6fd4-94c6-0069-1f774d6980ed";

json mps(const json& mps_config) {
  return {{"apiVersion", kGpuConfigApiVersion},
          {"kind", "GpuConfig"},
          {"sharing", {{"strategy", "MPS"}, {"mpsConfig", mps_config}}}};
}

json time_slicing(const std::string& interval) {
  return {
      {"apiVersion", kGpuConfigApiVersion},
      {"kind", "GpuConfig"},
      {"sharing", {{"strategy", "TimeSlicing"}, {"timeSlicingConfig", {{"interval", interval}}}}}};
}

std::string config_error(const json& parameters) {
  try {
    (void)parse_gpu_config(parameters);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(DraGpuConfig, ReadsEveryFieldOfNvidiasGpuConfig) {
  const GpuConfig m = parse_gpu_config(
      mps({{"defaultActiveThreadPercentage", 50},
           {"defaultPinnedDeviceMemoryLimit", "10Gi"},
           {"defaultPerDevicePinnedMemoryLimit", {{"0", "5Gi"}, {kGpu1, "1536Mi"}}}}));
  EXPECT_EQ(m.strategy, SharingStrategy::kMps);
  EXPECT_EQ(m.mps.default_active_thread_percentage, 50);
  EXPECT_EQ(m.mps.default_pinned_device_memory_mib, 10240);
  EXPECT_EQ(m.mps.default_per_device_pinned_memory_mib.at("0"), 5120);
  EXPECT_EQ(m.mps.default_per_device_pinned_memory_mib.at(kGpu1), 1536);
  for (const auto& [name, value] : std::vector<std::pair<std::string, TimeSliceInterval>>{
           {"Default", TimeSliceInterval::kDefault},
           {"Short", TimeSliceInterval::kShort},
           {"Medium", TimeSliceInterval::kMedium},
           {"Long", TimeSliceInterval::kLong}}) {
    const GpuConfig t = parse_gpu_config(time_slicing(name));
    EXPECT_EQ(t.strategy, SharingStrategy::kTimeSlicing);
    EXPECT_EQ(t.interval, value) << name;
  }
  // NVIDIA's apiVersion is read too (a claim written for its driver carries over), and the
  // defaults are NVIDIA's: no sharing without `sharing`, the Default interval without one.
  json nvidia = time_slicing("Long");
  nvidia["apiVersion"] = kNvidiaGpuConfigApiVersion;
  EXPECT_EQ(parse_gpu_config(nvidia).interval, TimeSliceInterval::kLong);
  EXPECT_EQ(parse_gpu_config({{"apiVersion", kGpuConfigApiVersion}, {"kind", "GpuConfig"}}),
            GpuConfig());
  EXPECT_EQ(parse_gpu_config({{"apiVersion", kGpuConfigApiVersion},
                              {"kind", "GpuConfig"},
                              {"sharing", {{"strategy", "TimeSlicing"}}}})
                .interval,
            TimeSliceInterval::kDefault);
  EXPECT_EQ(parse_gpu_config(mps(json::object())).mps, MpsConfig());
}

TEST(DraGpuConfig, EachMistakeGetsItsOwnMessageNamingTheField) {
  json no_strategy = time_slicing("Short");
  no_strategy["sharing"].erase("strategy");
  json wrong_config = time_slicing("Short");
  wrong_config["sharing"]["strategy"] = "MPS";
  json mps_with_ts = mps(json::object());
  mps_with_ts["sharing"]["strategy"] = "TimeSlicing";
  const std::vector<std::pair<json, std::string>> cases{
      {json::array(), "GpuConfig parameters: must be an object, not []"},
      {{{"kind", "GpuConfig"}},
       "GpuConfig apiVersion: missing is not gpu.gpuorch.io/v1beta1 (or NVIDIA's "
       "resource.nvidia.com/v1beta1)"},
      {{{"apiVersion", "v1"}, {"kind", "GpuConfig"}},
       "GpuConfig apiVersion: 'v1' is not gpu.gpuorch.io/v1beta1 (or NVIDIA's "
       "resource.nvidia.com/v1beta1)"},
      {{{"apiVersion", kGpuConfigApiVersion}, {"kind", "MigDeviceConfig"}},
       "GpuConfig kind: 'MigDeviceConfig' is not GpuConfig, the only kind gpuorch's driver "
       "reads"},
      {{{"apiVersion", kGpuConfigApiVersion}, {"kind", "GpuConfig"}, {"shareing", 1}},
       "GpuConfig shareing: unknown field (gpuorch reads NVIDIA's GpuConfig fields; is it "
       "misspelt?)"},
      {{{"apiVersion", kGpuConfigApiVersion}, {"kind", "GpuConfig"}, {"sharing", "MPS"}},
       "GpuConfig sharing: must be an object, not 'MPS'"},
      {no_strategy, "GpuConfig sharing.strategy: missing (TimeSlicing or MPS)"},
      {{{"apiVersion", kGpuConfigApiVersion},
        {"kind", "GpuConfig"},
        {"sharing", {{"strategy", "Spatial"}}}},
       "GpuConfig sharing.strategy: 'Spatial' is not TimeSlicing or MPS"},
      {{{"apiVersion", kGpuConfigApiVersion},
        {"kind", "GpuConfig"},
        {"sharing", {{"strategy", "Fabric"}}}},
       "GpuConfig sharing.strategy: Fabric is not supported by gpuorch (nor enabled in NVIDIA's "
       "driver)"},
      {wrong_config, "GpuConfig sharing.timeSlicingConfig: is for strategy TimeSlicing, not MPS"},
      {mps_with_ts, "GpuConfig sharing.mpsConfig: is for strategy MPS, not TimeSlicing"},
      {time_slicing("short"),
       "GpuConfig sharing.timeSlicingConfig.interval: 'short' is not Default, Short, Medium or "
       "Long"},
      {mps({{"defaultActiveThreadPercentage", 101}}),
       "GpuConfig sharing.mpsConfig.defaultActiveThreadPercentage: 101 is not between 0 and 100"},
      {mps({{"defaultActiveThreadPercentage", "50"}}),
       "GpuConfig sharing.mpsConfig.defaultActiveThreadPercentage: '50' is not an "
       "integer (a JSON number)"},
      {mps({{"defaultPinnedDeviceMemoryLimit", "lots"}}),
       "GpuConfig sharing.mpsConfig.defaultPinnedDeviceMemoryLimit: 'lots' is not a "
       "memory quantity (\"10Gi\", \"512Mi\")"},
      {mps({{"defaultPinnedDeviceMemoryLimit", "512Ki"}}),
       "GpuConfig sharing.mpsConfig.defaultPinnedDeviceMemoryLimit: '512Ki' is below "
       "1Mi, the smallest limit MPS takes"},
      {mps({{"defaultPerDevicePinnedMemoryLimit", {{"0", "x"}}}}),
       "GpuConfig sharing.mpsConfig.defaultPerDevicePinnedMemoryLimit['0']: 'x' is "
       "not a memory quantity (\"10Gi\", \"512Mi\")"},
      {mps({{"multiUser", true}}),
       "GpuConfig sharing.mpsConfig.multiUser: unknown field (gpuorch reads NVIDIA's GpuConfig "
       "fields; is it misspelt?)"},
  };
  for (const auto& [parameters, message] : cases) {
    EXPECT_EQ(config_error(parameters), message) << parameters.dump();
  }
}

// A claim allocated gpu-0 for request "a" and gpu-1 for request "b/first" (a firstAvailable
// subrequest), with the given allocation configs.
json claim_with(const std::vector<json>& config_list) {
  const json configs(config_list);
  return {
      {"metadata", {{"name", "shared"}, {"namespace", "ns1"}, {"uid", kUid}}},
      {"status",
       {{"allocation",
         {{"devices",
           {{"results",
             json::array(
                 {{{"request", "a"}, {"driver", kDriverName}, {"pool", kNode}, {"device", "gpu-0"}},
                  {{"request", "b/first"},
                   {"driver", kDriverName},
                   {"pool", kNode},
                   {"device", "gpu-1"}}})},
            {"config", configs}}}}}}}};
}

json config(const std::string& source, const json& parameters, const json& requests = nullptr,
            const std::string& driver = kDriverName) {
  json c{{"source", source}, {"opaque", {{"driver", driver}, {"parameters", parameters}}}};
  if (!requests.is_null()) c["requests"] = requests;
  return c;
}

std::vector<GpuConfig> configs_of(const json& claim) {
  const ClaimRef ref{"ns1", kUid, "shared"};
  return device_configs(claim, allocated_devices(claim, ref, kDriverName, kNode), kDriverName);
}

TEST(DraDeviceConfig, ClaimOverridesClassLaterOverridesEarlierRequestsNarrow) {
  // Nothing configured: no sharing.
  EXPECT_EQ(configs_of(claim_with({})), std::vector<GpuConfig>(2));
  // The class's configuration applies to every request...
  const auto from_class = configs_of(claim_with({config("FromClass", time_slicing("Long"))}));
  EXPECT_EQ(from_class[0].interval, TimeSliceInterval::kLong);
  EXPECT_EQ(from_class[1].interval, TimeSliceInterval::kLong);
  // ...the claim's takes precedence over it, whatever the order in the list, and a later entry of
  // one source over an earlier one; `requests` narrows, a main request covering its subrequests.
  const auto mixed = configs_of(claim_with({config("FromClaim", time_slicing("Short"), {"a"}),
                                            config("FromClass", time_slicing("Long")),
                                            config("FromClaim", mps(json::object()), {"b"}),
                                            config("FromClaim", time_slicing("Medium"), {"a"})}));
  EXPECT_EQ(mixed[0].interval, TimeSliceInterval::kMedium);
  EXPECT_EQ(mixed[1].strategy, SharingStrategy::kMps);
  const auto sub = configs_of(claim_with({config("FromClaim", mps(json::object()), {"b/first"})}));
  EXPECT_EQ(sub[0].strategy, SharingStrategy::kNone);
  EXPECT_EQ(sub[1].strategy, SharingStrategy::kMps);
  EXPECT_EQ(
      configs_of(claim_with({config("FromClaim", mps(json::object()), {"b/second"})}))[1].strategy,
      SharingStrategy::kNone);
  // Another driver's configuration is not read at all, whatever its parameters.
  EXPECT_EQ(configs_of(claim_with({config("FromClaim", "junk", nullptr, "nic.example.com")})),
            std::vector<GpuConfig>(2));
}

TEST(DraDeviceConfig, AMistakeInAnyEntryOfThisDriverFailsWithItsPlace) {
  const auto error = [](const std::vector<json>& configs) {
    try {
      (void)configs_of(claim_with(configs));
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  // Even an entry for a request no device of this node has.
  EXPECT_EQ(error({config("FromClass", time_slicing("Long")),
                   config("FromClaim", time_slicing("Often"), {"elsewhere"})}),
            "config[1] (FromClaim): GpuConfig sharing.timeSlicingConfig.interval: 'Often' is not "
            "Default, Short, Medium or Long");
  EXPECT_EQ(error({config("FromPod", time_slicing("Long"))}),
            "config[0]: source 'FromPod' is not FromClass or FromClaim");
  EXPECT_EQ(error({config("FromClaim", time_slicing("Long"), "a")}),
            "config[0] (FromClaim): requests is not a list");
}

TEST(DraGpuSharing, PlansTimeSlicesAndOneMpsDaemonAndRefusesWhatTheNodeCannotDo) {
  const auto host = test::fixture_host("dgx-h100");
  GpuConfig ts;
  ts.strategy = SharingStrategy::kTimeSlicing;
  ts.interval = TimeSliceInterval::kShort;
  GpuConfig m;
  m.strategy = SharingStrategy::kMps;
  m.mps.default_active_thread_percentage = 25;
  m.mps.default_pinned_device_memory_mib = 1024;
  m.mps.default_per_device_pinned_memory_mib = {{"1", 2048}};
  const auto plan = plan_sharing(host, {"gpu-0", "gpu-1", "gpu-2", "gpu-3"}, {ts, m, m, {}});
  EXPECT_EQ(plan.time_slices, (std::vector<TimeSlice>{{kGpu0, 1}}));
  const std::string gpu2 = "GPU-ec48557d-3c6d-e79c-626c-33bb6b58ac19";
  EXPECT_EQ(plan.mps_devices, (std::vector<std::string>{kGpu1, gpu2}));
  EXPECT_EQ(plan.mps_active_thread_percentage, 25);
  // The default for every device, then the per-device limit by position ("1" is the second).
  EXPECT_EQ(plan.mps_pinned_mib,
            (std::map<std::string, std::int64_t>{{kGpu1, 1024}, {gpu2, 2048}}));

  const auto error = [&](const std::vector<std::string>& devices,
                         const std::vector<GpuConfig>& configs) {
    try {
      (void)plan_sharing(host, devices, configs);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  std::string mig;
  for (const auto& d : slice_devices(host)) {
    if (d.mig >= 0 && mig.empty()) mig = d.name;
  }
  ASSERT_FALSE(mig.empty());
  EXPECT_EQ(error({mig}, {ts}),
            "device " + mig + ": sharing.strategy TimeSlicing sets a whole GPU's time slice; " +
                mig +
                " is a MIG instance (NVIDIA's driver takes no interval for MIG devices "
                "either)");
  GpuConfig other = m;
  other.mps.default_active_thread_percentage = 50;
  EXPECT_EQ(error({"gpu-0", "gpu-1"}, {m, other}),
            "device gpu-1: a second, different sharing.mpsConfig in one claim; gpuorch runs one "
            "MPS control daemon per claim, so its devices share one configuration");
  GpuConfig unknown_key = m;
  unknown_key.mps.default_per_device_pinned_memory_mib = {{"GPU-not-here", 1}};
  EXPECT_EQ(error({"gpu-0"}, {unknown_key}),
            "GpuConfig sharing.mpsConfig.defaultPerDevicePinnedMemoryLimit['GPU-not-here']: "
            "neither the UUID of one of the claim's 1 MPS device(s) nor a position 0-0");
  EXPECT_EQ(error({"gpu-0"}, {ts}), "(accepted)");
  const auto amd = test::fixture_host("mi250");
  const auto amd_error = [&] {
    try {
      (void)plan_sharing(amd, {"gpu-0"}, {m});
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  }();
  EXPECT_EQ(amd_error, "device gpu-0: MPS sharing is for NVIDIA GPUs");
}

TEST(DraGpuSharing, TheCdiSpecCarriesTheMpsClientEdits) {
  const auto host = test::fixture_host("dgx-h100");
  PreparedSharing s;
  s.mps_root = "/var/lib/kubelet/plugins/gpu.gpuorch.io/mps/" + std::string(kUid);
  s.mps_devices = {kGpu0};
  s.mps_active_thread_percentage = 30;
  const CdiClaim cdi = cdi_claim(host, {kDriverName, "/cdi", "/nonexistent-dev"}, kUid, {"gpu-0"},
                                 mps_container_edits(s));
  const json& common = cdi.spec.at("containerEdits");
  EXPECT_EQ(common.at("env"), json::array({"CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps",
                                           "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=30"}));
  ASSERT_EQ(common.at("mounts").size(), 2U);
  EXPECT_EQ(common["mounts"][0]["hostPath"], s.mps_root + "/pipe");
  EXPECT_EQ(common["mounts"][0]["containerPath"], "/tmp/nvidia-mps");
  EXPECT_EQ(common["mounts"][1]["hostPath"], s.mps_root + "/shm");
  EXPECT_EQ(common["mounts"][1]["containerPath"], "/dev/shm");
  EXPECT_EQ(common["mounts"][1]["options"], json::array({"rw", "nosuid", "nodev", "bind"}));
  // No sharing: no common edits beyond the device nodes (none exist under this dev root).
  EXPECT_FALSE(cdi_claim(host, {kDriverName, "/cdi", "/nonexistent-dev"}, kUid, {"gpu-0"},
                         mps_container_edits({}))
                   .spec.contains("containerEdits"));
}

TEST(DraGpuSharing, TheCheckpointKeepsWhatSharingChanged) {
  test::TempDir dir;
  PreparedClaims claims;
  PreparedClaim c{"ns1", "shared", {{{"a"}, kNode, "gpu-0", {"gpu.gpuorch.io/claim=x-gpu-0"}}}, {}};
  c.sharing.time_slices = {{kGpu0, 3}};
  c.sharing.mps_root = "/p/mps/" + std::string(kUid);
  c.sharing.mps_devices = {kGpu1};
  c.sharing.mps_active_thread_percentage = 40;
  c.sharing.mps_pinned_mib = {{kGpu1, 512}};
  claims[kUid] = c;
  claims["plain"] = PreparedClaim{"ns1", "plain", {}, {}};
  save_checkpoint(dir.file("cp.json"), claims);
  const PreparedClaims back = load_checkpoint(dir.file("cp.json"));
  ASSERT_EQ(back.size(), 2U);
  EXPECT_EQ(back.at(kUid).sharing, c.sharing);
  EXPECT_TRUE(back.at("plain").sharing.empty());
  EXPECT_FALSE(
      json::parse(test::read_text(dir.file("cp.json")))["claims"]["plain"].contains("sharing"));
}

TEST(DraGpuSharing, TheDriversDaemonSetHasWhatSharingNeedsAndNoMore) {
  k8s::ManifestOptions o;
  o.dra = true;
  std::optional<json> container;
  for (const auto& m : k8s::make_manifests(o)) {
    if (m.file == "24-dra-driver.yaml") {
      container = json::parse(m.object["spec"]["template"]["spec"]["containers"][0].dump());
    }
  }
  ASSERT_TRUE(container.has_value());
  const json& sc = (*container)["securityContext"];
  // SYS_ADMIN alone: the MPS daemon's mount namespace; no privilege, everything else dropped.
  EXPECT_EQ(sc["capabilities"]["add"], json::array({"SYS_ADMIN"}));
  EXPECT_EQ(sc["capabilities"]["drop"], json::array({"ALL"}));
  EXPECT_FALSE(sc.contains("privileged"));
  EXPECT_EQ(sc["allowPrivilegeEscalation"], false);
  // The container toolkit's nvidia-smi (utility) and MPS control program (compute).
  std::string capabilities;
  for (const auto& e : (*container)["env"]) {
    if (e["name"] == "NVIDIA_DRIVER_CAPABILITIES") capabilities = e["value"];
  }
  EXPECT_EQ(capabilities, "compute,utility");
}

// The preparer with the MPS control program of tests/fixtures/dra/mps-control (see its header:
// no GPU here, so no real daemon; docs/hardware/h200-dra-mps has the real one).
class DraSharing : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* d : {"plugin", "cdi", "dev"}) std::filesystem::create_directories(dir.file(d));
    claims["ns1/shared"] =
        claim_with({config("FromClaim", mps({{"defaultActiveThreadPercentage", 50},
                                             {"defaultPinnedDeviceMemoryLimit", "1Gi"}}))});
    start();
  }
  void TearDown() override {
    // A daemon a failed assertion left behind.
    for (const auto& root : {mps_root()}) {
      const std::string pid = test::read_text(root + "/pipe/nvidia-cuda-mps-control.pid");
      if (!pid.empty()) ::kill(std::stoi(pid), SIGKILL);
    }
  }

  void start() {
    PreparerOptions po;
    po.cdi = {kDriverName, dir.file("cdi"), dir.file("dev")};
    po.pool = kNode;
    po.checkpoint_path = dir.file("plugin/checkpoint.json");
    po.log = [this](const std::string& l) { log.push_back(l); };
    po.mps.control = test::fixture("dra/mps-control");
    po.mps.timeout = std::chrono::seconds(5);
    preparer = std::make_unique<ClaimPreparer>(
        test::fixture_host("dgx-h100"), po,
        [this](const std::string& ns, const std::string& n) { return claims.at(ns + "/" + n); });
  }

  [[nodiscard]] std::string mps_root() const { return dir.file("plugin/mps/") + kUid; }
  [[nodiscard]] std::string control_log() const {
    return test::read_text(mps_root() + "/log/control.log");
  }
  [[nodiscard]] int starts() const {
    const auto lines = test::lines_of(control_log());
    return static_cast<int>(std::count_if(lines.begin(), lines.end(), [](const std::string& l) {
      return l.rfind("start ", 0) == 0;
    }));
  }
  [[nodiscard]] bool daemon_running() const {
    // Running, not a zombie its parent (this process: the preparer's child) has yet to reap.
    const std::string pid = test::read_text(mps_root() + "/pipe/nvidia-cuda-mps-control.pid");
    if (pid.empty()) return false;
    const std::string stat = test::read_text("/proc/" + std::to_string(std::stoi(pid)) + "/stat");
    const auto paren = stat.rfind(')');
    return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z';
  }

  test::TempDir dir;
  std::map<std::string, json> claims;
  std::vector<std::string> log;
  std::unique_ptr<ClaimPreparer> preparer;
  const ClaimRef ref{"ns1", kUid, "shared"};
};

TEST_F(DraSharing, AnMpsClaimGetsItsDaemonWhichARestartNeitherDuplicatesNorForgets) {
  const auto devices = preparer->prepare(ref);
  ASSERT_EQ(devices.size(), 2U);
  ASSERT_TRUE(daemon_running());
  const std::string log_text = control_log();
  EXPECT_NE(log_text.find(fmt::format("start CUDA_VISIBLE_DEVICES={},{}", kGpu0, kGpu1)),
            std::string::npos)
      << log_text;
  // Its /dev/shm is the claim's folder (a mount namespace of its own), which the CDI spec gives
  // the containers as theirs.
  struct stat shm {};
  ASSERT_EQ(::stat((mps_root() + "/shm").c_str(), &shm), 0);
  EXPECT_NE(log_text.find(fmt::format("shm={}", shm.st_ino)), std::string::npos) << log_text;
  EXPECT_NE(log_text.find("set_default_active_thread_percentage 50"), std::string::npos);
  EXPECT_NE(log_text.find(fmt::format("set_default_device_pinned_mem_limit {} 1024M", kGpu0)),
            std::string::npos);
  EXPECT_NE(log_text.find(fmt::format("set_default_device_pinned_mem_limit {} 1024M", kGpu1)),
            std::string::npos);
  const json spec =
      json::parse(test::read_text(cdi_spec_path({kDriverName, dir.file("cdi")}, kUid)));
  EXPECT_EQ(spec["containerEdits"]["env"][0], "CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps");
  EXPECT_EQ(spec["containerEdits"]["mounts"][0]["hostPath"], mps_root() + "/pipe");
  EXPECT_EQ(preparer->prepared().at(kUid).sharing.mps_root, mps_root());

  // Prepare again, and after a restart of the driver: the same answer, no second daemon.
  EXPECT_EQ(preparer->prepare(ref), devices);
  preparer.reset();
  start();
  EXPECT_EQ(preparer->prepare(ref), devices);
  EXPECT_EQ(starts(), 1);
  // A daemon that went away (a reboot, a kill) is started again with the claim's settings.
  const std::string pid = test::read_text(mps_root() + "/pipe/nvidia-cuda-mps-control.pid");
  ASSERT_EQ(::kill(std::stoi(pid), SIGKILL), 0);
  for (int i = 0; i < 100 && daemon_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(preparer->prepare(ref), devices);
  EXPECT_EQ(starts(), 2);
  EXPECT_TRUE(daemon_running());
  // The driver's container restarted (its children gone with it): the new driver starts the
  // checkpoint's daemons again at once, before any Prepare.
  const int second = std::stoi(test::read_text(mps_root() + "/pipe/nvidia-cuda-mps-control.pid"));
  preparer.reset();
  ASSERT_EQ(::kill(second, SIGKILL), 0);
  ASSERT_EQ(::waitpid(second, nullptr, 0), second);  // the old driver's child: reaped here
  start();
  preparer->restore_sharing();
  EXPECT_EQ(starts(), 3);
  EXPECT_TRUE(daemon_running());
  preparer->restore_sharing();  // a daemon that answers is left alone
  EXPECT_EQ(starts(), 3);

  // Unprepare: quit, the daemon gone, its folders removed; a second Unprepare is a no-op.
  const std::string last = test::read_text(mps_root() + "/pipe/nvidia-cuda-mps-control.pid");
  preparer->unprepare(ref);
  EXPECT_FALSE(daemon_running());
  // Reaped by the preparer (its child): no zombie left behind.
  EXPECT_FALSE(std::filesystem::exists("/proc/" + std::to_string(std::stoi(last))));
  EXPECT_FALSE(std::filesystem::exists(mps_root()));
  EXPECT_TRUE(preparer->prepared().empty());
  preparer->unprepare(ref);
}

TEST_F(DraSharing, AFailedPrepareLeavesNothingBehind) {
  // A daemon that will not start.
  {
    const test::ScopedEnv env("FAKE_MPS_FAIL_START", "no GPU");
    try {
      (void)preparer->prepare(ref);
      ADD_FAILURE() << "prepared";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find("-f exited with 1: 'fake: refusing to start (no GPU)"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_TRUE(preparer->prepared().empty());
  EXPECT_FALSE(std::filesystem::exists(mps_root()));
  EXPECT_FALSE(std::filesystem::exists(cdi_spec_path({kDriverName, dir.file("cdi")}, kUid)));
  // TimeSlicing without nvidia-smi: refused by name, nothing written; a bad GpuConfig names the
  // claim and the field (the kubelet shows the message as the pod's event).
  claims["ns1/shared"] = claim_with({config("FromClaim", time_slicing("Short"))});
  try {
    (void)preparer->prepare(ref);
    ADD_FAILURE() << "prepared";
  } catch (const std::exception& e) {
    EXPECT_EQ(std::string(e.what()),
              fmt::format("setting {}'s compute mode to DEFAULT: nvidia-smi was not found on PATH "
                          "(--nvidia-smi names it)",
                          kGpu0));
  }
  claims["ns1/shared"] = claim_with({config("FromClaim", time_slicing("Often"))});
  try {
    (void)preparer->prepare(ref);
    ADD_FAILURE() << "prepared";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "ResourceClaim ns1/shared: config[0] (FromClaim): GpuConfig "
              "sharing.timeSlicingConfig.interval: 'Often' is not Default, Short, Medium or "
              "Long");
  }
  EXPECT_TRUE(preparer->prepared().empty());
  EXPECT_FALSE(std::filesystem::exists(cdi_spec_path({kDriverName, dir.file("cdi")}, kUid)));
  EXPECT_TRUE(load_checkpoint(dir.file("plugin/checkpoint.json")).empty());
}

}  // namespace
}  // namespace gpuorch::k8s::dra
