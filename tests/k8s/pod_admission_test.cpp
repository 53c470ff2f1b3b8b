// What `gpuorch scheduler` must not decide on, read from the pod: scheduling gates (Kueue's
// admission gate), a GPU share asked in two ways, and each required placement constraint the
// core does not evaluate (refused with the field's name), while soft ones are only listed.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "gpuorch/k8s/mirror/pod_object.hpp"
#include "gpuorch/k8s/mirror/unevaluated_fields.hpp"

namespace gpuorch::k8s {
namespace {

using nlohmann::json;

json pod(json spec, json annotations = json::object()) {
  if (!spec.contains("containers")) {
    spec["containers"] =
        json::array({{{"name", "c"}, {"resources", {{"requests", {{"cpu", "1"}}}}}}});
  }
  return {{"metadata",
           {{"name", "p"}, {"namespace", "ns"}, {"uid", "u1"}, {"annotations", annotations}}},
          {"spec", std::move(spec)},
          {"status", {{"phase", "Pending"}}}};
}

TEST(PodAdmission, SchedulingGatesAreRead) {
  PodObject p = pod_from_json(
      pod({{"schedulingGates",
            json::array({{{"name", "kueue.x-k8s.io/admission"}}, {{"name", "example.com/b"}}})}}));
  EXPECT_TRUE(p.gated());
  EXPECT_EQ(p.scheduling_gates,
            (std::vector<std::string>{"kueue.x-k8s.io/admission", "example.com/b"}));
  EXPECT_FALSE(pod_from_json(pod({{"schedulingGates", json::array()}})).gated());
  EXPECT_FALSE(pod_from_json(pod(json::object())).gated());
  // Not a list: no gate can be read, and nothing throws.
  EXPECT_FALSE(pod_from_json(pod({{"schedulingGates", "x"}})).gated());
}

TEST(PodAdmission, TheConditionAlreadyShownIsRead) {
  json p = pod(json::object());
  p["status"]["conditions"] =
      json::array({{{"type", "PodScheduled"}, {"status", "False"}, {"reason", "SchedulingGated"}}});
  EXPECT_EQ(pod_from_json(p).unscheduled_reason, "SchedulingGated");
}

TEST(PodAdmission, AShareAskedInTwoWaysIsRefusedBeforeBinding) {
  const json spec = json::object();
  PodObject p =
      pod_from_json(pod(spec, {{"gpu-fraction", "0.5"}, {"gpuorch.io/gpu-milli", "300"}}));
  EXPECT_NE(p.error.find("asks for a GPU share in 2 ways"), std::string::npos) << p.error;
  EXPECT_NE(p.error.find("gpu-fraction '0.5'"), std::string::npos) << p.error;
  EXPECT_NE(p.error.find("gpuorch.io/gpu-milli '300'"), std::string::npos) << p.error;
  json resource = {
      {"containers", json::array({{{"name", "c"},
                                   {"resources",
                                    {{"requests", {{"gpuorch.io/gpu-milli", "200"}}},
                                     {"limits", {{"gpuorch.io/gpu-milli", "200"}}}}}}})}};
  p = pod_from_json(pod(resource, {{"gpu-fraction", "0.5"}}));
  EXPECT_NE(p.error.find("2 ways"), std::string::npos) << p.error;
  // Asked one way only: the milli of that way.
  p = pod_from_json(pod(resource));
  EXPECT_TRUE(p.error.empty()) << p.error;
  EXPECT_EQ(p.spec.gpu_milli, 200);
  EXPECT_FALSE(p.gpu_milli_annotated);
  p = pod_from_json(pod(spec, {{"gpuorch.io/gpu-milli", "300"}}));
  EXPECT_EQ(p.spec.gpu_milli, 300);
  EXPECT_TRUE(p.gpu_milli_annotated);
  // Once bound, gpuorch.io/gpu-milli is the scheduler's record beside the fraction.
  json bound = pod(spec, {{"gpu-fraction", "0.5"}, {"gpuorch.io/gpu-milli", "500"}});
  bound["spec"]["nodeName"] = "n1";
  p = pod_from_json(bound);
  EXPECT_TRUE(p.error.empty()) << p.error;
  EXPECT_EQ(p.spec.gpu_milli, 500);
}

struct Unevaluated {
  std::string name;
  json spec;
  std::string field;  // what the message must name
};

class PodUnevaluated : public ::testing::TestWithParam<Unevaluated> {};

TEST_P(PodUnevaluated, RequiredFieldIsNamedAndRefused) {
  const Unevaluated& u = GetParam();
  const PodObject p = pod_from_json(pod(u.spec));
  ASSERT_FALSE(p.unevaluated.empty()) << u.name;
  EXPECT_NE(p.unevaluated.find(u.field), std::string::npos) << p.unevaluated;
  EXPECT_TRUE(p.error.empty()) << "the request itself is fine: " << p.error;
  const std::string message = unevaluated_message(p.unevaluated);
  EXPECT_NE(message.find(u.field), std::string::npos) << message;
  EXPECT_NE(message.find("gpuorch extender"), std::string::npos) << message;
}

json term() {
  return {{"labelSelector", {{"matchLabels", {{"app", "x"}}}}},
          {"topologyKey", "kubernetes.io/hostname"}};
}

json with_resource(const std::string& name) {
  return {
      {"containers",
       json::array({{{"name", "c"},
                     {"resources",
                      {{"requests", {{"cpu", "1"}, {name, "1"}}}, {"limits", {{name, "1"}}}}}}})}};
}

INSTANTIATE_TEST_SUITE_P(
    Fields, PodUnevaluated,
    ::testing::Values(
        Unevaluated{
            "PodAntiAffinity",
            {{"affinity",
              {{"podAntiAffinity",
                {{"requiredDuringSchedulingIgnoredDuringExecution", json::array({term()})}}}}}},
            "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution"},
        Unevaluated{
            "PodAffinity",
            {{"affinity",
              {{"podAffinity",
                {{"requiredDuringSchedulingIgnoredDuringExecution", json::array({term()})}}}}}},
            "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution"},
        Unevaluated{"TopologySpreadDoNotSchedule",
                    {{"topologySpreadConstraints",
                      json::array({{{"maxSkew", 1},
                                    {"topologyKey", "topology.kubernetes.io/zone"},
                                    {"whenUnsatisfiable", "DoNotSchedule"}}})}},
                    "spec.topologySpreadConstraints[0]"},
        Unevaluated{
            "HostPort",
            {{"containers", json::array({{{"name", "c"},
                                          {"ports", json::array({{{"containerPort", 80},
                                                                  {"hostPort", 8080}}})}}})}},
            "spec.containers[0].ports[0].hostPort 8080"},
        Unevaluated{"InitContainerHostPort",
                    {{"initContainers",
                      json::array({{{"name", "i"},
                                    {"ports",
                                     json::array({{{"containerPort", 80}, {"hostPort", 81}}})}}})}},
                    "spec.initContainers[0].ports[0].hostPort 81"},
        Unevaluated{"PersistentVolumeClaim",
                    {{"volumes", json::array({{{"name", "data"},
                                               {"persistentVolumeClaim", {{"claimName", "d"}}}}})}},
                    "spec.volumes[0].persistentVolumeClaim"},
        Unevaluated{
            "EphemeralVolume",
            {{"volumes", json::array({{{"name", "scratch"}, {"ephemeral", json::object()}}})}},
            "spec.volumes[0].ephemeral"},
        Unevaluated{"CsiInlineVolume",
                    {{"volumes", json::array({{{"name", "v"}, {"csi", {{"driver", "d"}}}}})}},
                    "spec.volumes[0].csi"},
        Unevaluated{"EphemeralStorage", with_resource("ephemeral-storage"),
                    "resources.requests[ephemeral-storage]"},
        Unevaluated{"Hugepages", with_resource("hugepages-2Mi"),
                    "resources.requests[hugepages-2Mi]"},
        Unevaluated{"OtherExtendedResource", with_resource("rdma/hca"),
                    "resources.requests[rdma/hca]"},
        Unevaluated{"MigResource", with_resource("nvidia.com/mig-1g.10gb"),
                    "resources.requests[nvidia.com/mig-1g.10gb]"}),
    [](const ::testing::TestParamInfo<Unevaluated>& param) { return param.param.name; });

TEST(PodAdmission, SoftConstraintsAreListedNotRefused) {
  const json spec = {
      {"affinity",
       {{"podAntiAffinity",
         {{"preferredDuringSchedulingIgnoredDuringExecution",
           json::array({{{"weight", 1}, {"podAffinityTerm", term()}}})}}},
        {"nodeAffinity",
         {{"preferredDuringSchedulingIgnoredDuringExecution",
           json::array({{{"weight", 1}, {"preference", json::object()}}})}}}}},
      {"topologySpreadConstraints", json::array({{{"maxSkew", 1},
                                                  {"topologyKey", "kubernetes.io/hostname"},
                                                  {"whenUnsatisfiable", "ScheduleAnyway"}}})},
      {"volumes", json::array({{{"name", "cfg"}, {"configMap", {{"name", "c"}}}},
                               {{"name", "tmp"}, {"emptyDir", json::object()}},
                               {{"name", "host"}, {"hostPath", {{"path", "/data"}}}}})}};
  const PodObject p = pod_from_json(pod(spec));
  EXPECT_TRUE(p.unevaluated.empty()) << p.unevaluated;
  ASSERT_EQ(p.ignored_preferences.size(), 3U);
  EXPECT_NE(p.ignored_preferences[0].find("podAntiAffinity.preferred"), std::string::npos);
  EXPECT_NE(p.ignored_preferences[1].find("nodeAffinity.preferred"), std::string::npos);
  EXPECT_NE(p.ignored_preferences[2].find("ScheduleAnyway"), std::string::npos);
  // The requests gpuorch accounts: no refusal.
  json gpu = {
      {"containers",
       json::array(
           {{{"name", "c"},
             {"ports", json::array({{{"containerPort", 80}}})},
             {"resources",
              {{"requests", {{"cpu", "1"}, {"memory", "1Gi"}, {"nvidia.com/gpu", "1"}}}}}}})}};
  EXPECT_TRUE(pod_from_json(pod(gpu)).unevaluated.empty());
}

}  // namespace
}  // namespace gpuorch::k8s
