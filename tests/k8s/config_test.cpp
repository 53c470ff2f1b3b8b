// The config file: NVIDIA's format (the seed's `replicas: 4` example among others), and one-line
// `file:line: what` errors for everything else.
#include "gpuorch/k8s/deviceplugin/config.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "gpuorch/base/error.hpp"
#include "support/test_support.hpp"

namespace gpuorch::k8s {
namespace {

using test::input_error;

TEST(PluginConfig, SeedTimeSlicingExampleLoads) {
  // ../shared/seed/seed.zh.txt, as printed there (no version, a comment after the value).
  const auto c = parse_config(
      "# Time-Slicing配置\n"
      "sharing:\n"
      "  timeSlicing:\n"
      "    resources:\n"
      "    - name: nvidia.com/gpu\n"
      "      replicas: 4  # 每个物理GPU虚拟为4个\n",
      "seed.yaml");
  EXPECT_EQ(c.sharing, SharingKind::kTimeSlicing);
  ASSERT_EQ(c.replicated.resources.size(), 1u);
  EXPECT_EQ(c.replicated.resources[0].name, "nvidia.com/gpu");
  EXPECT_EQ(c.replicated.resources[0].replicas, 4);
  EXPECT_TRUE(c.replicated.resources[0].all_devices);
  EXPECT_FALSE(c.replicated.rename_by_default);
  EXPECT_EQ(c.mig_strategy, MigStrategy::kNone);
}

TEST(PluginConfig, NvidiasFullShapeLoads) {
  const auto c = parse_config(R"(version: v1
flags:
  migStrategy: mixed
  failOnInitError: true
  nvidiaDriverRoot: /run/nvidia/driver
  gdsEnabled: false
  mofedEnabled: false
  plugin:
    passDeviceSpecs: true
    deviceListStrategy: [envvar, volume-mounts]
    deviceIDStrategy: index
  gfd:
    oneshot: false
sharing:
  timeSlicing:
    renameByDefault: true
    failRequestsGreaterThanOne: true
    resources:
    - name: nvidia.com/mig-1g.10gb
      rename: small-gpu
      devices: ["0:1", 1, GPU-64bbca15-1776-feaf-35c7-c0761cd05691]
      replicas: 10
)",
                              "full.yaml");
  EXPECT_EQ(c.mig_strategy, MigStrategy::kMixed);
  EXPECT_EQ(c.nvidia_driver_root, "/run/nvidia/driver");
  EXPECT_TRUE(c.pass_device_specs);
  EXPECT_EQ(c.device_list_strategy, (std::vector<std::string>{"envvar", "volume-mounts"}));
  EXPECT_EQ(c.device_id_strategy, DeviceIdStrategy::kIndex);
  EXPECT_TRUE(c.replicated.rename_by_default);
  EXPECT_TRUE(c.replicated.fail_requests_greater_than_one);
  const auto& r = c.replicated.resources.at(0);
  EXPECT_EQ(r.rename, "nvidia.com/small-gpu");  // read, then ignored as NVIDIA ignores it
  EXPECT_EQ(c.warnings.size(), 2u);
  EXPECT_EQ(r.device_list,
            (std::vector<std::string>{"0:1", "1", "GPU-64bbca15-1776-feaf-35c7-c0761cd05691"}));
}

TEST(PluginConfig, MpsDefaultsToOnePerRequest) {
  const auto c = parse_config(
      "version: v1\nsharing:\n  mps:\n    resources:\n    - name: nvidia.com/gpu\n"
      "      replicas: 10\n",
      "mps.yaml");
  EXPECT_EQ(c.sharing, SharingKind::kMps);
  EXPECT_TRUE(c.replicated.fail_requests_greater_than_one);
  const auto relaxed = parse_config(
      "sharing:\n  mps:\n    failRequestsGreaterThanOne: false\n    resources:\n"
      "    - {name: nvidia.com/gpu, replicas: 2}\n",
      "mps.yaml");
  EXPECT_FALSE(relaxed.replicated.fail_requests_greater_than_one);
}

TEST(PluginConfig, EmptyFileIsTheDefaults) {
  const auto c = parse_config("", "empty.yaml");
  EXPECT_EQ(c.sharing, SharingKind::kNone);
  EXPECT_EQ(c.device_list_strategy, (std::vector<std::string>{"envvar"}));
}

TEST(PluginConfig, ErrorsNameFileAndLine) {
  const auto err = [](const std::string& text) {
    return input_error([&] { parse_config(text, "c.yaml"); });
  };
  const std::string ts = "sharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n";
  EXPECT_EQ(err(ts + "      replica: 4\n"),
            "c.yaml:4: sharing.timeSlicing.resources[0]: no replicas specified");
  EXPECT_EQ(err(ts + "      replicas: 1\n"), "c.yaml:5: replicas is 1: sharing needs at least 2");
  EXPECT_EQ(err(ts + "      replicas: four\n"),
            "c.yaml:5: replicas must be a whole number, not 'four'");
  // Past kMaxReplicas (issue 30: a million replicas took 2.5 GB in the plugin).
  EXPECT_NO_THROW(parse_config(ts + "      replicas: 64\n", "c.yaml"));
  EXPECT_EQ(err(ts + "      replicas: 65\n"),
            "c.yaml:5: replicas is 65: at most 64 per device (each replica is a device the plugin "
            "lists to the kubelet)");
  EXPECT_EQ(err("sharing:\n  timeSlicing:\n    resources: []\n"),
            "c.yaml:3: sharing.timeSlicing: no resources specified");
  EXPECT_EQ(err("sharing:\n  timeSlicing:\n    resources: [\n"),
            "c.yaml:4: not valid YAML: end of sequence flow not found");
  EXPECT_EQ(err("version: v2\n"), "c.yaml:1: unknown version: v2");
  EXPECT_EQ(err("flags:\n  migStrategy: partial\n"),
            "c.yaml:2: unknown MIG strategy 'partial' (none, single, mixed)");
  EXPECT_EQ(err(ts + "      replicas: 2\n      devices: [gpu0]\n"),
            "c.yaml:6: unsupported device 'gpu0' in devices: a GPU index, a 'gpu:mig' index, "
            "GPU-<uuid>, MIG-<uuid> or MIG-GPU-<uuid>/<gi>/<ci>");
  EXPECT_EQ(err(ts + "      replicas: 2\n      devices: [GPU-UUID]\n"),
            "c.yaml:6: unsupported device 'GPU-UUID' in devices: a GPU index, a 'gpu:mig' index, "
            "GPU-<uuid>, MIG-<uuid> or MIG-GPU-<uuid>/<gi>/<ci>");
  EXPECT_EQ(err(ts + "      replicas: 2\n      devices: not-all\n"),
            "c.yaml:6: devices set as 'not-all' but the only valid string input is 'all'");
  EXPECT_EQ(err(ts + "      replicas: 2\n      devices: -2\n"),
            "c.yaml:6: devices set as '-2' but a count of devices must be > 0");
  EXPECT_EQ(err("imex:\n  channelIDs: [0, 1]\n"),
            "c.yaml:2: invalid IMEX channel IDs [0, 1]: only [] and [0] are supported");
  EXPECT_EQ(err("resources:\n  gpus:\n  - {name: gpu}\n"),
            "c.yaml:3: resources must have a 'pattern' field set");
  // A key that is not a name (yaml-cpp said "bad conversion"), names that are no resource name.
  EXPECT_EQ(err("[a]: 1\n"), "c.yaml:1: a key in the config must be a name");
  EXPECT_EQ(err("sharing:\n  timeSlicing:\n    {[x]: 1}\n"),
            "c.yaml:3: a key in sharing.timeSlicing must be a name");
  const std::string dns =
      "': after nvidia.com/ a DNS subdomain (a-z, 0-9, '-', '.', starting and ending with a "
      "letter or digit)";
  for (const auto& [rename, shown] :
       std::vector<std::pair<std::string, std::string>>{{"\"a b\"", "a b"},
                                                        {"UPPER", "UPPER"},
                                                        {"\xc3\xa9", "\\xc3\\xa9"},
                                                        {"\"\xff\xfe\"", "\\xff\\xfe"},
                                                        {"-lead", "-lead"},
                                                        {"gpu_small", "gpu_small"}}) {
    EXPECT_EQ(err(ts + "      replicas: 2\n      rename: " + rename + "\n"),
              "c.yaml:6: rename: incorrect format for resource name 'nvidia.com/" + shown + dns)
        << rename;
  }
  EXPECT_EQ(err(ts + "      replicas: 2\n      rename: " + std::string(64, 'a') + "\n"),
            "c.yaml:6: rename: fully-qualified resource name must be 63 characters or less: "
            "nvidia.com/" +
                std::string(64, 'a'));
  EXPECT_EQ(
      err("sharing:\n  timeSlicing:\n    resources:\n    - {name: $invalid$, replicas: 2}\n"),
      "c.yaml:4: resource name: incorrect format for resource name 'nvidia.com/$invalid$" + dns);
}

// What NVIDIA's plugin reads and ignores loads with a warning line each, never an error.
TEST(PluginConfig, WhatNvidiaIgnoresIsAWarning) {
  const auto c = parse_config(R"(colour: blue
flags:
  migStrategi: mixed
sharing:
  timeSlicing:
    resources:
    - {name: nvidia.com/gpu, replicas: 2, replica: 4}
  mps:
    resources:
    - {name: nvidia.com/mig-1g.10gb, replicas: 2}
    - {name: gpu, replicas: 3, rename: gpu-slice}
    - {name: gpu, replicas: 5}
resources:
  gpus:
  - {pattern: "*H100*", name: h100}
)",
                              "w.yaml");
  EXPECT_EQ(c.sharing, SharingKind::kMps);  // both set: NVIDIA's plugin shares with MPS
  ASSERT_EQ(c.replicated.resources.size(), 2u);
  EXPECT_EQ(c.replicated.resources[1].name, "nvidia.com/gpu");  // NVIDIA's default prefix
  EXPECT_EQ(c.replicated.resources[1].replicas, 3);             // the first entry applies
  ASSERT_EQ(c.warnings.size(), 7u) << ::testing::PrintToString(c.warnings);
  const auto has = [&](const std::string& line) {
    return std::find(c.warnings.begin(), c.warnings.end(), line) != c.warnings.end();
  };
  const std::string ignored = " ignored, as NVIDIA's plugin ignores it";
  EXPECT_TRUE(has("w.yaml:1: unknown key 'colour' in the config" + ignored +
                  " (known: flags, imex, resources, sharing, version)"));
  EXPECT_EQ(c.warnings[1].rfind("w.yaml:3: unknown key 'migStrategi' in flags" + ignored, 0), 0u);
  EXPECT_EQ(c.warnings[2], "w.yaml:15: resources.gpus" + ignored +
                               " (customizing the 'resources' field is not "
                               "supported)");
  EXPECT_EQ(c.warnings[3].rfind("w.yaml:7: unknown key 'replica' in "
                                "sharing.timeSlicing.resources[0]" +
                                    ignored,
                                0),
            0u);
  EXPECT_TRUE(has("w.yaml:11: rename 'nvidia.com/gpu-slice'" + ignored +
                  ": the shared resource is nvidia.com/gpu"));
  EXPECT_TRUE(has("w.yaml:12: resource 'nvidia.com/gpu' is listed twice: the first entry applies"));
  EXPECT_TRUE(
      has("w.yaml:6: sharing.timeSlicing ignored: sharing.mps is set, and NVIDIA's "
          "plugin then shares with MPS"));
}

// A config of many unknown keys says so in a few lines, and a huge value is cut in its message
// (issue 30: 1.5 million warning lines; a 52 MB line).
TEST(PluginConfig, WarningsAreCappedAndLongValuesCut) {
  std::string text;
  for (int i = 0; i < 1000; ++i) text += "k" + std::to_string(i) + ": 1\n";
  const auto c = parse_config(text, "w.yaml");
  ASSERT_EQ(c.warnings.size(), 21u);
  EXPECT_EQ(c.warnings[19].rfind("w.yaml:20: unknown key 'k19' in the config", 0), 0u);
  EXPECT_EQ(c.warnings[20], "w.yaml: and 980 more warnings");
  const std::string e =
      input_error([] { parse_config("version: " + std::string(1 << 20, 'v') + "\n", "v.yaml"); });
  EXPECT_EQ(e, "v.yaml:1: unknown version: " + std::string(200, 'v') + "... (1048376 more bytes)");
}

TEST(PluginConfig, NewerNvidiaFlagsLoad) {
  const auto c = parse_config(R"(version: v1
flags:
  mpsRoot: /run/nvidia/mps
  gdrcopyEnabled: true
  nvidiaDevRoot: /dev-root
  deviceDiscoveryStrategy: nvml
  plugin:
    kubeletSocket: /var/lib/kubelet/device-plugins/kubelet.sock
    cdiFeatureFlags: disable-nvsandboxutils
    nvidiaCTKPath: /usr/bin/nvidia-ctk
imex:
  channelIDs: [0]
  required: true
)",
                              "new.yaml");
  EXPECT_TRUE(c.warnings.empty()) << ::testing::PrintToString(c.warnings);
  EXPECT_EQ(c.mps_root, "/run/nvidia/mps");
  EXPECT_TRUE(c.gdrcopy_enabled);
  EXPECT_EQ(c.dev_root(), "/dev-root");
  EXPECT_EQ(c.kubelet_socket, "/var/lib/kubelet/device-plugins/kubelet.sock");
  EXPECT_EQ(c.imex_channel_ids, std::vector<int>{0});
  EXPECT_TRUE(c.imex_required);
}

TEST(PluginConfig, EffectiveChecksAsNvidiasValidateFlags) {
  auto c = parse_config(
      "flags:\n  migStrategy: mixed\nsharing:\n  mps:\n    resources:\n"
      "    - {name: nvidia.com/gpu, replicas: 2}\n",
      "m.yaml");
  EXPECT_EQ(input_error([&] { validate_effective(c); }),
            "m.yaml: using --mig-strategy=mixed is not supported with MPS");
  c.mig_strategy = MigStrategy::kSingle;
  EXPECT_NO_THROW(validate_effective(c));
  c.device_discovery_strategy = "magic";
  EXPECT_EQ(input_error([&] { validate_effective(c); }),
            "invalid --device-discovery-strategy option magic (auto, nvml, tegra)");
}

TEST(PluginConfig, ResourceNamesTakeNvidiasDefaultPrefix) {
  EXPECT_EQ(resource_name("gpu"), "nvidia.com/gpu");
  EXPECT_EQ(resource_name("mig-1g.10gb"), "nvidia.com/mig-1g.10gb");
  EXPECT_EQ(resource_name("nvidia.com/gpu.shared"), "nvidia.com/gpu.shared");
  EXPECT_EQ(resource_name("amd.com/gpu"), "amd.com/gpu");
  EXPECT_THROW(resource_name("example.com/gpu"), base::InputError);
}

}  // namespace
}  // namespace gpuorch::k8s
