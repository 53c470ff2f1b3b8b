// The wire format, pinned by hand: bytes written from the published field numbers
// (../shared/reference/k8s-apis.md §1.3, the kubelet's api.proto) decode to the expected fields,
// and our encoding is exactly those bytes. A renumbered field in proto/ fails here.
#include <gtest/gtest.h>

#include <string>

#include "deviceplugin/v1beta1/api.grpc.pb.h"

namespace gpuorch::k8s {
namespace {

std::string bytes(std::initializer_list<int> b) {
  std::string s;
  for (int c : b) s.push_back(static_cast<char>(c));
  return s;
}

TEST(Wire, DeviceWithHealthAndNumaNode) {
  // Device { ID(1) = "GPU-0", health(2) = "Healthy", topology(3) = { nodes(1) = { ID(1) = 1 } } }
  const std::string hand = bytes({0x0a, 5, 'G',  'P', 'U',  '-', '0',            //
                                  0x12, 7, 'H',  'e', 'a',  'l', 't', 'h', 'y',  //
                                  0x1a, 4, 0x0a, 2,   0x08, 1});
  v1beta1::Device d;
  ASSERT_TRUE(d.ParseFromString(hand));
  EXPECT_EQ(d.id(), "GPU-0");
  EXPECT_EQ(d.health(), "Healthy");
  ASSERT_EQ(d.topology().nodes_size(), 1);
  EXPECT_EQ(d.topology().nodes(0).id(), 1);
  v1beta1::Device ours;
  ours.set_id("GPU-0");
  ours.set_health("Healthy");
  ours.mutable_topology()->add_nodes()->set_id(1);
  EXPECT_EQ(ours.SerializeAsString(), hand);
  // ListAndWatchResponse { devices(1) = that Device }
  v1beta1::ListAndWatchResponse list;
  *list.add_devices() = ours;
  EXPECT_EQ(list.SerializeAsString(), bytes({0x0a, static_cast<int>(hand.size())}) + hand);
}

TEST(Wire, RegisterRequest) {
  // version(1) "v1beta1", endpoint(2) "a.sock", resource_name(3) "x.io/g",
  // options(4) { get_preferred_allocation_available(2) = true }
  const std::string hand =
      bytes({0x0a, 7,   'v',  '1', 'b', 'e', 't', 'a', '1', 0x12, 6,    'a', '.',  's', 'o',
             'c',  'k', 0x1a, 6,   'x', '.', 'i', 'o', '/', 'g',  0x22, 2,   0x10, 1});
  v1beta1::RegisterRequest r;
  ASSERT_TRUE(r.ParseFromString(hand));
  EXPECT_EQ(r.version(), "v1beta1");
  EXPECT_EQ(r.endpoint(), "a.sock");
  EXPECT_EQ(r.resource_name(), "x.io/g");
  EXPECT_FALSE(r.options().pre_start_required());
  EXPECT_TRUE(r.options().get_preferred_allocation_available());
  EXPECT_EQ(r.SerializeAsString(), hand);
}

TEST(Wire, PreferredAllocationAndAllocate) {
  // ContainerPreferredAllocationRequest { available_deviceIDs(1) "a", "b",
  // must_include_deviceIDs(2) "b", allocation_size(3) 2 }
  const std::string pref = bytes({0x0a, 1, 'a', 0x0a, 1, 'b', 0x12, 1, 'b', 0x18, 2});
  v1beta1::ContainerPreferredAllocationRequest p;
  ASSERT_TRUE(p.ParseFromString(pref));
  EXPECT_EQ(p.available_deviceids_size(), 2);
  EXPECT_EQ(p.must_include_deviceids(0), "b");
  EXPECT_EQ(p.allocation_size(), 2);
  EXPECT_EQ(p.SerializeAsString(), pref);
  // ContainerAllocateResponse { envs(1) {"A": "B"}, mounts(2) {container_path(1) "/c",
  // host_path(2) "/h", read_only(3) true}, devices(3) {1 "/d", 2 "/d", permissions(3) "rw"},
  // cdi_devices(5) {name(1) "v/g=0"} }
  const std::string alloc =
      bytes({0x0a, 6,  0x0a, 1, 'A', 0x12, 1,    'B',                               //
             0x12, 10, 0x0a, 2, '/', 'c',  0x12, 2,   '/', 'h', 0x18, 1,            //
             0x1a, 12, 0x0a, 2, '/', 'd',  0x12, 2,   '/', 'd', 0x1a, 2, 'r', 'w',  //
             0x2a, 7,  0x0a, 5, 'v', '/',  'g',  '=', '0'});
  v1beta1::ContainerAllocateResponse a;
  ASSERT_TRUE(a.ParseFromString(alloc));
  EXPECT_EQ(a.envs().at("A"), "B");
  EXPECT_TRUE(a.mounts(0).read_only());
  EXPECT_EQ(a.devices(0).permissions(), "rw");
  EXPECT_EQ(a.cdi_devices(0).name(), "v/g=0");
  EXPECT_EQ(a.SerializeAsString(), alloc);
  // ContainerAllocateRequest { devices_ids(1) "x" } and annotations(4) on the response.
  v1beta1::ContainerAllocateRequest req;
  req.add_devices_ids("x");
  EXPECT_EQ(req.SerializeAsString(), bytes({0x0a, 1, 'x'}));
  v1beta1::ContainerAllocateResponse ann;
  (*ann.mutable_annotations())["k"] = "v";
  EXPECT_EQ(ann.SerializeAsString(), bytes({0x22, 6, 0x0a, 1, 'k', 0x12, 1, 'v'}));
}

TEST(Wire, ServiceAndMethodNames) {
  // These form the HTTP/2 paths the kubelet calls: /v1beta1.DevicePlugin/Allocate, ...
  EXPECT_STREQ(v1beta1::DevicePlugin::service_full_name(), "v1beta1.DevicePlugin");
  EXPECT_STREQ(v1beta1::Registration::service_full_name(), "v1beta1.Registration");
  const auto* file = v1beta1::Device::descriptor()->file();
  EXPECT_EQ(file->package(), "v1beta1");
  const auto* dp = file->FindServiceByName("DevicePlugin");
  ASSERT_NE(dp, nullptr);
  std::vector<std::string> methods;
  for (int i = 0; i < dp->method_count(); ++i) methods.push_back(dp->method(i)->name());
  EXPECT_EQ(methods,
            (std::vector<std::string>{"GetDevicePluginOptions", "ListAndWatch",
                                      "GetPreferredAllocation", "Allocate", "PreStartContainer"}));
  EXPECT_TRUE(dp->FindMethodByName("ListAndWatch")->server_streaming());
}

}  // namespace
}  // namespace gpuorch::k8s
