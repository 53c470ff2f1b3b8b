// What the plugin advertises and hands out, on the fixture hosts: time-slicing replicas, MIG
// strategies, Allocate per vendor and strategy, MPS limits, and the preferred-allocation rule.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "gpuorch/k8s/deviceplugin/allocate.hpp"
#include "gpuorch/k8s/deviceplugin/preferred.hpp"
#include "gpuorch/mig/layout.hpp"
#include "k8s/k8s_support.hpp"
#include "support/test_support.hpp"

namespace gpuorch::k8s {
namespace {

PluginConfig config(const std::string& yaml) { return parse_config(yaml, "test.yaml"); }

std::map<std::string, std::size_t> counts(const std::vector<Resource>& rs) {
  std::map<std::string, std::size_t> m;
  for (const auto& r : rs) m[r.name] = r.devices.size();
  return m;
}

const Resource& named(const std::vector<Resource>& rs, const std::string& name) {
  for (const auto& r : rs) {
    if (r.name == name) return r;
  }
  throw std::runtime_error("no resource " + name);
}

const char* kSeed =
    "sharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n";

TEST(Resources, UnsharedGpusPerVendor) {
  EXPECT_EQ(counts(plan_resources(test::fixture_host("dgx-h100"), PluginConfig{})),
            (std::map<std::string, std::size_t>{{"nvidia.com/gpu", 8}}));
  const auto amd = plan_resources(test::fixture_host("mi250"), PluginConfig{});
  ASSERT_EQ(amd.size(), 1u);
  EXPECT_EQ(amd[0].name, "amd.com/gpu");
  EXPECT_EQ(amd[0].devices[0].id, "0000:23:00.0");  // AMD's plugin names devices by PCI address
  EXPECT_EQ(amd[0].physical[2].numa_nodes, (std::vector<std::int64_t>{1}));
  EXPECT_EQ(amd[0].socket_name(), "gpuorch-amd.com-gpu.sock");
  // A VM's GPUs (numa_node -1) carry no NUMA preference rather than node -1.
  const auto vm = plan_resources(test::fixture_host("h200-vm"), PluginConfig{});
  EXPECT_TRUE(vm.at(0).physical.at(0).numa_nodes.empty());
  EXPECT_TRUE(
      plan_resources(test::fixture_host("mi250"), PluginConfig{}, VendorFilter::kNvidia).empty());
}

TEST(Resources, TimeSlicingReplicasFourOnTwoGpusAdvertisesEight) {
  const auto host = test::fixture_host("t4x2");
  const auto rs = plan_resources(host, config(kSeed));
  ASSERT_EQ(rs.size(), 1u);
  const Resource& r = rs[0];
  EXPECT_EQ(r.name, "nvidia.com/gpu");
  ASSERT_EQ(r.devices.size(), 8u);
  EXPECT_EQ(r.devices[0].id, "GPU-7216ad8e-95b6-8ef5-ccd6-39be851b1e98::0");
  EXPECT_EQ(r.devices[3].id, "GPU-7216ad8e-95b6-8ef5-ccd6-39be851b1e98::3");
  EXPECT_EQ(r.devices[4].id, "GPU-40380e55-81ac-72b8-7924-42d4762c4989::0");
  // Two replicas of one GPU are that one GPU.
  AllocateOptions o;
  const auto a = allocate(host, r, {r.devices[1].id, r.devices[2].id}, o);
  EXPECT_EQ(a.envs.at("NVIDIA_VISIBLE_DEVICES"), "GPU-7216ad8e-95b6-8ef5-ccd6-39be851b1e98");
  const auto both = allocate(host, r, {r.devices[0].id, r.devices[5].id}, o);
  EXPECT_EQ(both.envs.at("NVIDIA_VISIBLE_DEVICES"),
            "GPU-7216ad8e-95b6-8ef5-ccd6-39be851b1e98,GPU-40380e55-81ac-72b8-7924-42d4762c4989");
}

// NVIDIA's plugin reads `rename` and `devices` and ignores both (a warning each): every device is
// shared, under its own name or <name>.shared with renameByDefault.
TEST(Resources, RenameAndDevicesAreIgnoredAsNvidiasPluginDoes) {
  const auto host = test::fixture_host("t4x2");
  const auto renamed = plan_resources(
      host, config("sharing:\n  timeSlicing:\n    renameByDefault: true\n    resources:\n"
                   "    - {name: nvidia.com/gpu, replicas: 3, devices: [1]}\n"));
  EXPECT_EQ(counts(renamed), (std::map<std::string, std::size_t>{{"nvidia.com/gpu.shared", 6}}));
  const auto explicit_name =
      plan_resources(host, config("sharing:\n  timeSlicing:\n    resources:\n"
                                  "    - {name: nvidia.com/gpu, rename: t4-slice, replicas: 2}\n"));
  EXPECT_EQ(counts(explicit_name), (std::map<std::string, std::size_t>{{"nvidia.com/gpu", 4}}));
  const auto absent =
      plan_resources(host, config("sharing:\n  timeSlicing:\n    resources:\n"
                                  "    - {name: nvidia.com/gpu, replicas: 2, devices: [5]}\n"));
  EXPECT_EQ(counts(absent), (std::map<std::string, std::size_t>{{"nvidia.com/gpu", 4}}));
}

TEST(Resources, MpsOverMigDevicesIsRefused) {
  // The MIG H100s with one profile left, the GPUs without MIG gone: what `single` takes.
  auto host = test::fixture_host("h100-mig");
  std::erase_if(host.gpus, [](const topology::Gpu& g) { return !g.mig.enabled; });
  for (auto& g : host.gpus) {
    std::erase_if(g.mig.instances, [](const auto& mi) { return mi.profile != "3g.40gb"; });
  }
  std::erase_if(host.gpus, [](const topology::Gpu& g) { return g.mig.instances.empty(); });
  ASSERT_FALSE(host.gpus.empty());
  const auto err = test::input_error([&] {
    plan_resources(host, config("flags:\n  migStrategy: single\nsharing:\n  mps:\n"
                                "    resources:\n    - {name: nvidia.com/gpu, replicas: 2}\n"));
  });
  EXPECT_NE(err.find("sharing using MPS is not supported for MIG devices"), std::string::npos)
      << err;
}

TEST(Resources, FailRequestsGreaterThanOne) {
  const auto host = test::fixture_host("t4x2");
  const auto rs =
      plan_resources(host, config("sharing:\n  timeSlicing:\n    failRequestsGreaterThanOne: true\n"
                                  "    resources:\n    - {name: nvidia.com/gpu, replicas: 4}\n"));
  try {
    allocate(host, rs[0], {rs[0].devices[0].id, rs[0].devices[1].id}, {});
    FAIL() << "a request of 2 shared devices must fail";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "request for 'nvidia.com/gpu: 2' too large: maximum request size for shared "
                 "resources is 1");
  }
  EXPECT_THROW(allocate(host, rs[0], {"GPU-nope::0"}, {}), std::invalid_argument);
}

TEST(Resources, MigMixedOnTheMigFixture) {
  const auto host = test::fixture_host("h100-mig");
  PluginConfig c;
  c.mig_strategy = MigStrategy::kMixed;
  // The 1c.3g.40gb compute instance does not span its GPU instance: not advertised.
  EXPECT_EQ(counts(plan_resources(host, c)),
            (std::map<std::string, std::size_t>{{"nvidia.com/gpu", 1},
                                                {"nvidia.com/mig-1g.10gb", 2},
                                                {"nvidia.com/mig-2g.20gb", 1},
                                                {"nvidia.com/mig-3g.40gb", 3}}));
  const auto rs = plan_resources(host, c);
  const Resource& g3 = named(rs, "nvidia.com/mig-3g.40gb");
  EXPECT_EQ(g3.devices[0].id, "MIG-0a6f2c1e-3b51-5d8e-9c0f-1e2d3c4b5a01");
  EXPECT_EQ(g3.physical[0].numa_nodes, (std::vector<std::int64_t>{0}));
  AllocateOptions o;
  EXPECT_EQ(allocate(host, g3, {g3.devices[1].id}, o).envs.at("NVIDIA_VISIBLE_DEVICES"),
            "MIG-0a6f2c1e-3b51-5d8e-9c0f-1e2d3c4b5a11");
  PluginConfig idx = c;
  idx.device_id_strategy = DeviceIdStrategy::kIndex;
  o.config = &idx;
  EXPECT_EQ(allocate(host, g3, {g3.devices[1].id}, o).envs.at("NVIDIA_VISIBLE_DEVICES"), "1:0");
  // `none` ignores MIG: three whole GPUs.
  EXPECT_EQ(counts(plan_resources(host, PluginConfig{})),
            (std::map<std::string, std::size_t>{{"nvidia.com/gpu", 3}}));
  // `single` needs one profile on every GPU.
  PluginConfig single;
  single.mig_strategy = MigStrategy::kSingle;
  EXPECT_EQ(test::input_error([&] { plan_resources(host, single); }),
            "MIG strategy single: GPU 2 is not in MIG mode while others are (all GPUs must "
            "agree; use mixed)");
  // The fixture's instances are a layout the geometry accepts on an H100-80GB.
  const auto* model = mig::model_for_gpu(host.gpus[0].model, host.gpus[0].memory_mib);
  ASSERT_NE(model, nullptr);
  EXPECT_TRUE(mig::fits({"3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"}, *model));
  EXPECT_TRUE(mig::fits({"3g.40gb", "3g.40gb"}, *model));
}

TEST(Resources, MigSingleOnTheDgxFixtureNeedsEveryGpuInMig) {
  // dgx-h100 has MIG on GPU 7 only, with three profiles: both rules of `single` are broken.
  PluginConfig single;
  single.mig_strategy = MigStrategy::kSingle;
  EXPECT_NE(test::input_error([&] { plan_resources(test::fixture_host("dgx-h100"), single); }), "");
  PluginConfig mixed;
  mixed.mig_strategy = MigStrategy::kMixed;
  EXPECT_EQ(counts(plan_resources(test::fixture_host("dgx-h100"), mixed)),
            (std::map<std::string, std::size_t>{{"nvidia.com/gpu", 7},
                                                {"nvidia.com/mig-1g.10gb", 1},
                                                {"nvidia.com/mig-2g.20gb", 1},
                                                {"nvidia.com/mig-3g.40gb", 1}}));
}

TEST(Allocate, ListStrategiesAndDeviceSpecs) {
  const auto host = test::fixture_host("dgx-h100");
  const auto rs = plan_resources(host, PluginConfig{});
  PluginConfig c;
  c.device_list_strategy = {"volume-mounts", "cdi-annotations", "cdi-cri"};
  c.pass_device_specs = true;
  AllocateOptions o;
  o.config = &c;
  o.response_id = "r1";
  const auto a = allocate(host, rs[0], {rs[0].devices[2].id}, o);
  const std::string id = "GPU-ec48557d-3c6d-e79c-626c-33bb6b58ac19";
  EXPECT_EQ(a.envs.at("NVIDIA_VISIBLE_DEVICES"), "/var/run/nvidia-container-devices");
  ASSERT_EQ(a.mounts.size(), 1u);
  EXPECT_EQ(a.mounts[0].container_path, "/var/run/nvidia-container-devices/" + id);
  EXPECT_EQ(a.mounts[0].host_path, "/dev/null");
  EXPECT_EQ(a.annotations.at("cdi.k8s.io/nvidia-device-plugin_r1"), "nvidia.com/gpu=" + id);
  EXPECT_EQ(a.cdi_devices, (std::vector<std::string>{"nvidia.com/gpu=" + id}));
  ASSERT_GE(a.devices.size(), 2u);
  EXPECT_EQ(a.devices.front().container_path, "/dev/nvidiactl");
  EXPECT_EQ(a.devices.back().container_path, "/dev/nvidia2");
  EXPECT_EQ(a.devices.back().permissions, "rw");
}

TEST(Allocate, AmdGetsKfdAndDriNodes) {
  const auto host = test::fixture_host("mi250");
  const auto rs = plan_resources(host, PluginConfig{});
  const auto a = allocate(host, rs[0], {"0000:24:00.0", "0000:c3:00.0"}, {});
  EXPECT_TRUE(a.envs.empty());
  std::vector<std::string> paths;
  for (const auto& d : a.devices) paths.push_back(d.host_path + ":" + d.permissions);
  EXPECT_EQ(paths,
            (std::vector<std::string>{"/dev/kfd:rw", "/dev/dri/card1:rw", "/dev/dri/renderD129:rw",
                                      "/dev/dri/card2:rw", "/dev/dri/renderD130:rw"}));
}

TEST(Allocate, MpsLimitsFromReplicas) {
  const auto host = test::fixture_host("t4x2");
  const auto rs = plan_resources(
      host,
      config("sharing:\n  mps:\n    resources:\n    - {name: nvidia.com/gpu, replicas: 4}\n"));
  AllocateOptions o;
  o.device_plugin_dir = "/var/lib/kubelet/device-plugins/";
  const auto a = allocate(host, rs[0], {rs[0].devices[5].id}, o);
  EXPECT_EQ(a.envs.at("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "25");
  EXPECT_EQ(a.envs.at("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"),
            "0=" + std::to_string(host.gpus[1].memory_mib / 4) + "M");
  EXPECT_EQ(a.envs.at("CUDA_MPS_PIPE_DIRECTORY"), "/mps/nvidia.com/gpu/pipe");
  EXPECT_EQ(a.envs.at("CUDA_MPS_LOG_DIRECTORY"), "/mps/nvidia.com/gpu/log");
  ASSERT_EQ(a.mounts.size(), 3u);
  EXPECT_EQ(a.mounts[0].host_path, "/var/lib/kubelet/device-plugins/mps/nvidia.com/gpu/pipe");
  EXPECT_EQ(a.mounts[2].container_path, "/dev/shm");
}

std::vector<std::string> ids(const Resource& r) {
  std::vector<std::string> v;
  for (const auto& d : r.devices) v.push_back(d.id);
  return v;
}

TEST(Preferred, XgmiPairsInOnePackage) {
  const auto host = test::fixture_host("mi250");
  const auto r = plan_resources(host, PluginConfig{})[0];
  // Weight 15 inside a package beats 30 across: 0+1 or 2+3, never 1+2.
  const auto two = preferred_allocation(host, r, ids(r), {}, 2);
  EXPECT_EQ(two, (std::vector<std::string>{"0000:23:00.0", "0000:24:00.0"}));
  const auto with = preferred_allocation(host, r, ids(r), {"0000:c4:00.0"}, 2);
  EXPECT_EQ(with, (std::vector<std::string>{"0000:c4:00.0", "0000:c3:00.0"}));
}

TEST(Preferred, NvSwitchTiesGoToOneNumaNodeAndKeepTheRestWhole) {
  const auto host = test::fixture_host("dgx-h100");
  const auto r = plan_resources(host, PluginConfig{})[0];
  const auto four = preferred_allocation(host, r, ids(r), {}, 4);
  ASSERT_EQ(four.size(), 4u);
  std::set<std::int64_t> numa;
  for (const auto& id : four) numa.insert(find_physical(r, id)->numa_nodes.at(0));
  EXPECT_EQ(numa.size(), 1u) << "4 of 8 NV18 GPUs: all on one NUMA node";
  // must_include on NUMA 1 pulls the rest of the set there.
  const auto with = preferred_allocation(host, r, ids(r), {r.devices[6].id}, 2);
  EXPECT_EQ(find_physical(r, with[1])->numa_nodes.at(0), 1);
  EXPECT_THROW(preferred_allocation(host, r, ids(r), {"GPU-unknown"}, 2), std::invalid_argument);
  EXPECT_THROW(preferred_allocation(host, r, ids(r), {r.devices[0].id, r.devices[1].id}, 1),
               std::invalid_argument);
}

TEST(Preferred, ReplicasSpreadOverTheLeastUsedGpus) {
  const auto host = test::fixture_host("t4x2");
  const auto r = plan_resources(host, config(kSeed))[0];
  // GPU 0 has one replica left, GPU 1 all four: a single replica comes from GPU 1.
  const std::vector<std::string> avail = {r.devices[3].id, r.devices[4].id, r.devices[5].id,
                                          r.devices[6].id, r.devices[7].id};
  const auto one = preferred_allocation(host, r, avail, {}, 1);
  EXPECT_EQ(strip_replica(one.at(0)), "GPU-40380e55-81ac-72b8-7924-42d4762c4989");
  // Two replicas for one container: on two different GPUs.
  const auto two = preferred_allocation(host, r, ids(r), {}, 2);
  EXPECT_NE(strip_replica(two.at(0)), strip_replica(two.at(1)));
}

}  // namespace
}  // namespace gpuorch::k8s
