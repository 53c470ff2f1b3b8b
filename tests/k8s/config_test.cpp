// The config file: NVIDIA's format (the seed's `replicas: 4` example among others), and one-line
// `file:line: what` errors for everything else.
#include "gpuorch/k8s/config.hpp"

#include <gtest/gtest.h>

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
  EXPECT_EQ(r.rename, "small-gpu");
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
  EXPECT_EQ(err("sharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n"
                "      replica: 4\n"),
            "c.yaml:5: unknown key 'replica' in sharing.timeSlicing.resources[0] (known: "
            "devices, name, rename, replicas)");
  EXPECT_EQ(err("sharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n"
                "      replicas: 1\n"),
            "c.yaml:5: replicas is 1: sharing needs at least 2");
  EXPECT_EQ(err("sharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n"
                "      replicas: four\n"),
            "c.yaml:5: replicas must be a whole number, not 'four'");
  EXPECT_EQ(err("sharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n"),
            "c.yaml:4: sharing.timeSlicing.resources[0]: 'replicas' is missing");
  EXPECT_EQ(err("sharing:\n  timeSlicing:\n    resources: [\n"),
            "c.yaml:4: not valid YAML: end of sequence flow not found");
  EXPECT_EQ(err("version: v2\n"), "c.yaml:1: unknown version 'v2' (v1)");
  EXPECT_EQ(err("flags:\n  migStrategy: partial\n"),
            "c.yaml:2: unknown MIG strategy 'partial' (none, single, mixed)");
  EXPECT_EQ(
      err("sharing:\n  timeSlicing:\n    resources:\n    - {name: nvidia.com/gpu, "
          "replicas: 2}\n  mps:\n    resources:\n    - {name: nvidia.com/gpu, replicas: 2}\n"),
      "c.yaml:6: sharing.timeSlicing and sharing.mps cannot both be set");
  EXPECT_EQ(err("sharing:\n  mps:\n    resources:\n    - {name: nvidia.com/mig-1g.10gb, "
                "replicas: 2}\n"),
            "c.yaml:4: MPS shares only nvidia.com/gpu (MPS is not supported on MIG devices or "
            "AMD GPUs), not 'nvidia.com/mig-1g.10gb'");
  EXPECT_EQ(err("sharing:\n  timeSlicing:\n    resources:\n    - {name: nvidia.com/gpu, "
                "replicas: 2, devices: [gpu0]}\n"),
            "c.yaml:4: device 'gpu0' is neither a GPU index, a 'gpu:mig' index nor a GPU-/MIG- "
            "UUID");
  // A key that is not a name (yaml-cpp said "bad conversion"), renames that are no resource name.
  EXPECT_EQ(err("[a]: 1\n"), "c.yaml:1: a key in the config must be a name");
  EXPECT_EQ(err("sharing:\n  timeSlicing:\n    {[x]: 1}\n"),
            "c.yaml:3: a key in sharing.timeSlicing must be a name");
  const std::string rename_must =
      " is not a Kubernetes resource name: 1 to 63 of a-z, 0-9, '-', '_', '.', starting and "
      "ending with a letter or digit";
  for (const auto& [rename, shown] : std::vector<std::pair<std::string, std::string>>{
           {"\"a b\"", "a b"},
           {"UPPER", "UPPER"},
           {"\xc3\xa9", "\\xc3\\xa9"},
           {"\"\xff\xfe\"", "\\xff\\xfe"},
           {"-lead", "-lead"},
           {std::string(64, 'a'), std::string(64, 'a')}}) {
    EXPECT_EQ(err("sharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n"
                  "      replicas: 2\n      rename: " +
                  rename + "\n"),
              "c.yaml:6: rename '" + shown + "'" + rename_must)
        << rename;
  }
  EXPECT_EQ(parse_config("sharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n"
                         "      replicas: 2\n      rename: gpu.small_1-x\n",
                         "c.yaml")
                .replicated.resources.at(0)
                .rename,
            "gpu.small_1-x");
  EXPECT_EQ(err("colour: blue\n"),
            "c.yaml:1: unknown key 'colour' in the config (known: flags, imex, resources, "
            "sharing, version)");
}

}  // namespace
}  // namespace gpuorch::k8s
