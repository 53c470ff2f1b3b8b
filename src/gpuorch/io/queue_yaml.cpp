#include "gpuorch/io/queue_yaml.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <map>
#include <set>

#include "gpuorch/base/error.hpp"
#include "gpuorch/base/printable.hpp"
#include "gpuorch/base/read_file.hpp"
#include "gpuorch/base/yaml_reader.hpp"

namespace gpuorch::io {
namespace {

using base::YamlReader;

// A queue holds at most this many units of a resource (a million GPUs, CPUs or TB of memory in
// their milli/MiB units): beyond it the file is a mistake, and sums stay far from overflow.
constexpr double kMaxAmount = 1e6;

constexpr std::size_t kMaxGpuModels = workload::kMaxQueueGpuModels;

// KAI writes amounts as decimals ("0.5" GPUs) or -1 (none / unlimited).
double amount(const YamlReader& yaml, const YAML::Node& n, const std::string& what) {
  const std::string s = yaml.scalar(n, what);
  double v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size() || !std::isfinite(v)) {
    yaml.fail(n, fmt::format("{} must be a number, not '{}'", what, base::printable(s)));
  }
  if (v != -1 && (v < 0 || v > kMaxAmount)) {
    yaml.fail(n, fmt::format("{} is {}: it must be -1 (none) or 0..{}", what, s, kMaxAmount));
  }
  return v;
}

// `also`: a key the entry may have besides the three (a GPU model's `model`).
workload::QueueResource resource(const YamlReader& yaml, const YAML::Node& r,
                                 const std::string& what, double unit, const char* also = nullptr) {
  if (also != nullptr) {
    yaml.only_keys(r, what, {"quota", "limit", "overQuotaWeight", also});
  } else {
    yaml.only_keys(r, what, {"quota", "limit", "overQuotaWeight"});
  }
  workload::QueueResource out;
  auto scaled = [&](const char* key, std::int64_t unset) {
    if (!r[key]) return unset;
    const double v = amount(yaml, r[key], fmt::format("{}.{}", what, key));
    return v < 0 ? workload::kUnlimited : static_cast<std::int64_t>(std::llround(v * unit));
  };
  out.quota = scaled("quota", 0);
  out.limit = scaled("limit", workload::kUnlimited);
  if (r["overQuotaWeight"]) {
    out.over_quota_weight =
        amount(yaml, r["overQuotaWeight"], fmt::format("{}.overQuotaWeight", what));
    if (out.over_quota_weight < 0) {
      yaml.fail(r["overQuotaWeight"], fmt::format("{}.overQuotaWeight must be 0 or more", what));
    }
  }
  if (out.limit != workload::kUnlimited && out.quota > out.limit) {
    yaml.fail(r, fmt::format("{}: quota is above limit", what));
  }
  return out;
}

// spec.resources.gpuModels: a list of {model, quota, limit, overQuotaWeight} in GPUs. A list,
// not a map keyed by model, because its order is the order jobs try the models in, and a map's
// order does not survive the API server (JSON objects are unordered; Go writes their keys sorted).
std::vector<workload::QueueModelResource> gpu_models(const YamlReader& yaml,
                                                     const YAML::Node& models) {
  if (!models.IsSequence()) {
    yaml.fail(models,
              "spec.resources.gpuModels must be a list of {model, quota, limit, "
              "overQuotaWeight}");
  }
  std::vector<workload::QueueModelResource> out;
  for (const auto& item : models) {
    if (!item.IsMap() || !item["model"]) {
      yaml.fail(item, "an entry of spec.resources.gpuModels needs a model");
    }
    const std::string model = yaml.scalar(item["model"], "model");
    if (model.empty()) yaml.fail(item["model"], "a GPU model name is empty");
    for (const auto& m : out) {
      if (m.model == model) {
        yaml.fail(item, fmt::format("GPU model '{}' is named twice", base::printable(model)));
      }
    }
    out.push_back(
        {model,
         resource(yaml, item, fmt::format("spec.resources.gpuModels[{}]", base::printable(model)),
                  1000.0, "model")});
  }
  return out;
}

workload::QueueSpec queue(const YamlReader& yaml, const YAML::Node& doc) {
  // `status` is what a cluster reports (`kubectl get queues -o yaml`); it is not read.
  yaml.only_keys(doc, "a Queue", {"apiVersion", "kind", "metadata", "spec", "status"});
  const std::string api = doc["apiVersion"] ? yaml.scalar(doc["apiVersion"], "apiVersion") : "";
  if (api != "scheduling.run.ai/v2") {
    yaml.fail(doc, fmt::format("apiVersion '{}' is not scheduling.run.ai/v2 (KAI's Queue)",
                               base::printable(api)));
  }
  const YAML::Node meta = doc["metadata"];
  if (!meta || !meta.IsMap() || !meta["name"]) yaml.fail(doc, "a Queue needs metadata.name");
  workload::QueueSpec q;
  q.file = yaml.file();
  q.line = YamlReader::line_of(doc);
  q.name = yaml.scalar(meta["name"], "metadata.name");
  if (q.name.empty()) yaml.fail(meta, "metadata.name is empty");
  const YAML::Node spec = doc["spec"];
  if (!spec) return q;
  yaml.only_keys(spec, fmt::format("queue {}'s spec", q.name),
                 {"parentQueue", "priority", "resources", "displayName"});
  if (spec["parentQueue"]) q.parent = yaml.scalar(spec["parentQueue"], "spec.parentQueue");
  if (spec["priority"]) {
    q.priority = static_cast<int>(
        yaml.integer(spec["priority"], "spec.priority", -1'000'000'000, 1'000'000'000));
  }
  if (const YAML::Node res = spec["resources"]) {
    yaml.only_keys(res, "spec.resources", {"gpu", "cpu", "memory", "gpuModels"});
    if (res["gpu"]) q.gpu = resource(yaml, res["gpu"], "spec.resources.gpu", 1000.0);
    if (const YAML::Node models = res["gpuModels"]) q.gpu_models = gpu_models(yaml, models);
    if (res["cpu"]) q.cpu = resource(yaml, res["cpu"], "spec.resources.cpu", 1.0);
    // MB as KAI writes memory, to MiB as the core counts it.
    if (res["memory"]) {
      q.memory = resource(yaml, res["memory"], "spec.resources.memory", 1e6 / 1048576.0);
    }
  }
  return q;
}

}  // namespace

std::vector<workload::QueueSpec> parse_queues(const std::string& text, const std::string& path) {
  const YamlReader yaml(path);
  std::vector<workload::QueueSpec> out;
  auto add = [&](const YAML::Node& doc) {
    if (!doc || doc.IsNull()) return;
    if (!doc.IsMap()) yaml.fail(doc, "a document must be a Queue or a List of Queues");
    const std::string kind = doc["kind"] ? yaml.scalar(doc["kind"], "kind") : "";
    if (kind == "List" || kind == "QueueList") {
      yaml.only_keys(doc, "a List", {"apiVersion", "kind", "metadata", "items"});
      if (!doc["items"] || !doc["items"].IsSequence()) yaml.fail(doc, "'items' must be a list");
      for (const auto& item : doc["items"]) {
        if (!item.IsMap() || !item["kind"] || yaml.scalar(item["kind"], "kind") != "Queue") {
          yaml.fail(item, "an item of the List is not a Queue");
        }
        out.push_back(queue(yaml, item));
      }
      return;
    }
    if (kind != "Queue") {
      yaml.fail(doc, fmt::format("kind '{}' is not Queue", base::printable(kind)));
    }
    out.push_back(queue(yaml, doc));
  };
  for (const auto& doc : yaml.load_all(text)) add(doc);
  if (out.empty()) base::fail_input(path, 0, "no Queue in the file");
  std::map<std::string, const workload::QueueSpec*> by_name;
  for (const auto& q : out) {
    if (!by_name.emplace(q.name, &q).second) {
      base::fail_input(path, q.line, fmt::format("queue '{}' is defined twice", q.name));
    }
  }
  // Each model any queue names gets one of the job layer's fixed slots (resources.hpp).
  std::set<std::string> models;
  for (const auto& q : out) {
    for (const auto& m : q.gpu_models) {
      models.insert(m.model);
      if (models.size() > kMaxGpuModels) {
        base::fail_input(path, q.line,
                         fmt::format("queue '{}': GPU model '{}' is one more than the {} models "
                                     "the queues may name in all",
                                     q.name, base::printable(m.model), kMaxGpuModels));
      }
    }
  }
  for (const auto& q : out) {
    if (q.parent.empty()) continue;
    if (!by_name.contains(q.parent)) {
      base::fail_input(path, q.line,
                       fmt::format("queue '{}': parentQueue '{}' is not defined", q.name,
                                   base::printable(q.parent)));
    }
    // Walking up from each queue must end at a top-level queue within as many steps as there
    // are queues, or the parents form a cycle.
    const workload::QueueSpec* at = &q;
    for (std::size_t steps = 0; !at->parent.empty(); ++steps) {
      if (steps > out.size()) {
        base::fail_input(path, q.line,
                         fmt::format("queue '{}': parentQueue links form a cycle", q.name));
      }
      at = by_name.at(at->parent);
    }
  }
  return out;
}

std::vector<workload::QueueSpec> load_queues(const std::string& path) {
  return parse_queues(base::read_input_file(path, "queue file", base::kConfigFileMaxBytes), path);
}

}  // namespace gpuorch::io
