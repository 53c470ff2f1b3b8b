// The Queue CRD (queues.scheduling.run.ai, v2): KAI-Scheduler's queue object with its field names,
// so a queue file written for KAI, or for `gpuorch sim timeline --queues`, applies to a cluster as
// it is (docs/jobs.md), and a cluster that runs KAI keeps its own CRD (--no-queue-crd). The fields
// gpuorch reads are typed; the rest of KAI's spec and status are kept as written, so KAI's
// controllers and users' files stay valid.
#include "gpuorch/k8s/manifests/manifest_parts.hpp"
#include "gpuorch/workload/queue_spec.hpp"

namespace gpuorch::k8s::manifest_parts {
namespace {

// quota / limit / overQuotaWeight of one resource, as KAI writes them (numbers; -1: unlimited).
Json queue_resource(const char* unit) {
  const auto number = [](const std::string& description) {
    return Json{{"type", "number"}, {"description", description}};
  };
  Json r;
  r["type"] = "object";
  r["properties"] = {
      {"quota", number(std::string("Guaranteed amount, in ") + unit + "; -1: none guaranteed.")},
      {"limit", number(std::string("Most the queue may hold, in ") + unit + "; -1: unlimited.")},
      {"overQuotaWeight",
       {{"type", "number"},
        {"minimum", 0},
        {"description", "Share of what no queue's quota claims, relative to its siblings."}}}};
  return r;
}

// gpuorch's extension: quota, limit and weight per GPU model (KAI has none yet). Typed, so the
// API server keeps it (a structural schema prunes the fields it does not declare); a list keyed
// by model, since its order is the order jobs try the models in and a JSON object has none.
Json gpu_models() {
  Json entry = queue_resource("GPUs of this model");
  entry["required"] = Json::array({"model"});
  entry["properties"]["model"] = {
      {"type", "string"},
      {"description", "A GPU model as the nvidia.com/gpu.product label names it."}};
  Json m;
  m["type"] = "array";
  m["description"] =
      "gpuorch: GPUs per GPU model, tried in this order by jobs that accept several models; "
      "`gpu` still bounds the total.";
  m["items"] = std::move(entry);
  m["x-kubernetes-list-type"] = "map";
  m["x-kubernetes-list-map-keys"] = Json::array({"model"});
  m["maxItems"] = workload::kMaxQueueGpuModels;  // as many as the queues may name in all
  return m;
}

}  // namespace

Json queue_crd(const ManifestOptions& o) {
  Json spec_props;
  spec_props["parentQueue"] = {{"type", "string"},
                               {"description",
                                "The queue above this one; only leaf queues hold "
                                "jobs."}};
  spec_props["priority"] = {
      {"type", "integer"},
      {"format", "int32"},
      {"description", "Higher queues are served, and given what is left over, first."}};
  spec_props["displayName"] = {{"type", "string"}};
  spec_props["resources"] = {{"type", "object"},
                             {"properties",
                              {{"gpu", queue_resource("GPUs (fractions allowed)")},
                               {"cpu", queue_resource("millicores")},
                               {"memory", queue_resource("MB")},
                               {"gpuModels", gpu_models()}}}};
  Json schema;
  schema["type"] = "object";
  schema["description"] =
      "A queue of jobs with a quota, a limit and a weight per resource (KAI-Scheduler's Queue).";
  schema["properties"] = {
      {"apiVersion", {{"type", "string"}}},
      {"kind", {{"type", "string"}}},
      {"metadata", {{"type", "object"}}},
      {"spec",
       {{"type", "object"},
        {"properties", spec_props},
        {"x-kubernetes-preserve-unknown-fields", true}}},
      {"status", {{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}}}};
  return custom_resource_definition(
      "scheduling.run.ai",
      {{"kind", "Queue"}, {"listKind", "QueueList"}, {"plural", "queues"}, {"singular", "queue"}},
      "Cluster", "v2", std::move(schema),
      Json::array({crd_column("Parent", "string", ".spec.parentQueue"),
                   crd_column("GPU quota", "number", ".spec.resources.gpu.quota"),
                   crd_column("GPU limit", "number", ".spec.resources.gpu.limit"),
                   crd_column("Age", "date", ".metadata.creationTimestamp")}),
      o);
}

}  // namespace gpuorch::k8s::manifest_parts
