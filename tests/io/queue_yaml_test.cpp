// KAI-Scheduler Queue manifests: what is read, and every mistake refused with its line.
#include "gpuorch/io/queue_yaml.hpp"

#include <gtest/gtest.h>

#include "gpuorch/base/error.hpp"

namespace gpuorch::io {
namespace {

constexpr const char* kTwoLevels = R"(apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: research}
spec:
  resources:
    gpu: {quota: 12, limit: -1, overQuotaWeight: 1}
---
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata:
  name: team-a
spec:
  parentQueue: research
  priority: 100
  resources:
    gpu: {quota: 2.5, limit: 8, overQuotaWeight: 3}
    cpu: {quota: 16000, limit: -1, overQuotaWeight: 1}
    memory: {quota: 1000, limit: -1, overQuotaWeight: 1}
)";

TEST(QueueYaml, ReadsKaiQueuesWithTheirUnits) {
  const auto qs = parse_queues(kTwoLevels, "q.yaml");
  ASSERT_EQ(qs.size(), 2U);
  EXPECT_EQ(qs[0].name, "research");
  EXPECT_TRUE(qs[0].parent.empty());
  EXPECT_EQ(qs[0].gpu.quota, 12000);
  EXPECT_EQ(qs[0].gpu.limit, workload::kUnlimited);
  EXPECT_EQ(qs[1].parent, "research");
  EXPECT_EQ(qs[1].priority, 100);
  EXPECT_EQ(qs[1].gpu.quota, 2500);  // milli-GPUs
  EXPECT_EQ(qs[1].gpu.limit, 8000);
  EXPECT_DOUBLE_EQ(qs[1].gpu.over_quota_weight, 3);
  EXPECT_EQ(qs[1].cpu.quota, 16000);   // millicores
  EXPECT_EQ(qs[1].memory.quota, 954);  // 1000 MB in MiB
  EXPECT_EQ(qs[1].line, 8U);
}

TEST(QueueYaml, ReadsAList) {
  const auto qs = parse_queues(R"(apiVersion: v1
kind: List
items:
- {apiVersion: scheduling.run.ai/v2, kind: Queue, metadata: {name: x}}
- {apiVersion: scheduling.run.ai/v2, kind: Queue, metadata: {name: y}, spec: {parentQueue: x}}
)",
                               "l.yaml");
  ASSERT_EQ(qs.size(), 2U);
  EXPECT_EQ(qs[1].parent, "x");
}

std::string refusal(const std::string& text) {
  try {
    parse_queues(text, "q.yaml");
  } catch (const base::InputError& e) {
    return e.what();
  }
  return "accepted";
}

TEST(QueueYaml, RefusesEachMistakeWithItsLine) {
  const std::string head = "apiVersion: scheduling.run.ai/v2\nkind: Queue\nmetadata: {name: q}\n";
  EXPECT_EQ(refusal(head + "spec:\n  resources:\n    gpu: {quota: -2}\n"),
            "q.yaml:6: spec.resources.gpu.quota is -2: it must be -1 (none) or 0..1000000");
  EXPECT_EQ(refusal(head + "spec:\n  resources:\n    gpu: {quota: 4, limit: 2}\n"),
            "q.yaml:6: spec.resources.gpu: quota is above limit");
  EXPECT_EQ(refusal(head + "spec:\n  resources:\n    gpu: {quota: lots}\n"),
            "q.yaml:6: spec.resources.gpu.quota must be a number, not 'lots'");
  EXPECT_NE(refusal(head + "spec:\n  quota: 3\n").find("q.yaml:5: unknown key 'quota'"),
            std::string::npos);
  EXPECT_EQ(refusal(head + "spec: {parentQueue: nowhere}\n"),
            "q.yaml:1: queue 'q': parentQueue 'nowhere' is not defined");
  EXPECT_EQ(refusal(head + "---\n" + head), "q.yaml:5: queue 'q' is defined twice");
  EXPECT_EQ(refusal("apiVersion: scheduling.run.ai/v2\nkind: Queue\nmetadata: {name: x}\n"
                    "spec: {parentQueue: y}\n---\napiVersion: scheduling.run.ai/v2\nkind: Queue\n"
                    "metadata: {name: y}\nspec: {parentQueue: x}\n"),
            "q.yaml:1: queue 'x': parentQueue links form a cycle");
  EXPECT_EQ(refusal("apiVersion: v1\nkind: Pod\n"), "q.yaml:1: kind 'Pod' is not Queue");
  EXPECT_EQ(refusal(""), "q.yaml: no Queue in the file");
  EXPECT_NE(refusal("a: [").find("q.yaml:"), std::string::npos);
}

TEST(QueueYaml, ReadsQuotasPerGpuModelInTheirOrder) {
  const auto qs = parse_queues(R"(apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: team-a}
spec:
  resources:
    gpu: {quota: 8, limit: -1, overQuotaWeight: 1}
    gpuModels:
    - {model: NVIDIA-H100-80GB-HBM3, quota: 2, limit: 4, overQuotaWeight: 0}
    - {model: NVIDIA-A100-SXM4-80GB, quota: 6.5}
)",
                               "q.yaml");
  ASSERT_EQ(qs.size(), 1U);
  ASSERT_EQ(qs[0].gpu_models.size(), 2U);
  EXPECT_EQ(qs[0].gpu_models[0].model, "NVIDIA-H100-80GB-HBM3");  // the file's order
  EXPECT_EQ(qs[0].gpu_models[0].gpu.quota, 2000);
  EXPECT_EQ(qs[0].gpu_models[0].gpu.limit, 4000);
  EXPECT_DOUBLE_EQ(qs[0].gpu_models[0].gpu.over_quota_weight, 0);
  EXPECT_EQ(qs[0].gpu_models[1].model, "NVIDIA-A100-SXM4-80GB");
  EXPECT_EQ(qs[0].gpu_models[1].gpu.quota, 6500);
  EXPECT_EQ(qs[0].gpu_models[1].gpu.limit, workload::kUnlimited);
  EXPECT_DOUBLE_EQ(qs[0].gpu_models[1].gpu.over_quota_weight, 1);
}

TEST(QueueYaml, RefusesEachGpuModelMistakeWithItsLine) {
  const std::string head =
      "apiVersion: scheduling.run.ai/v2\nkind: Queue\nmetadata: {name: q}\nspec:\n  resources:\n";
  EXPECT_EQ(refusal(head + "    gpuModels:\n    - {model: A100, quota: -3}\n"),
            "q.yaml:7: spec.resources.gpuModels[A100].quota is -3: it must be -1 (none) or "
            "0..1000000");
  EXPECT_EQ(refusal(head + "    gpuModels:\n    - {model: A100, quota: 4, limit: 2}\n"),
            "q.yaml:7: spec.resources.gpuModels[A100]: quota is above limit");
  EXPECT_NE(refusal(head + "    gpuModels:\n    - {model: A100, quota: 1, share: 2}\n")
                .find("q.yaml:7: unknown key 'share'"),
            std::string::npos);
  EXPECT_EQ(refusal(head + "    gpuModels: {A100: {quota: 1}}\n"),
            "q.yaml:6: spec.resources.gpuModels must be a list of {model, quota, limit, "
            "overQuotaWeight}");
  EXPECT_EQ(refusal(head + "    gpuModels:\n    - {quota: 4}\n"),
            "q.yaml:7: an entry of spec.resources.gpuModels needs a model");
  EXPECT_EQ(refusal(head + "    gpuModels:\n    - {model: A100}\n    - {model: A100}\n"),
            "q.yaml:8: GPU model 'A100' is named twice");
  // Five models in all, over two queues: one more than the job layer has slots for.
  std::string five = head + "    gpuModels: [{model: m1}, {model: m2}, {model: m3}]\n";
  five +=
      "---\napiVersion: scheduling.run.ai/v2\nkind: Queue\nmetadata: {name: r}\nspec:\n"
      "  resources:\n    gpuModels: [{model: m3}, {model: m4}, {model: m5}]\n";
  EXPECT_EQ(refusal(five),
            "q.yaml:8: queue 'r': GPU model 'm5' is one more than the 4 models the queues may "
            "name in all");
}

}  // namespace
}  // namespace gpuorch::io
