#include "gpuorch/k8s/labeller/node_labeller.hpp"

#include <fmt/format.h>
#include <sys/stat.h>

#include <set>
#include <thread>
#include <tuple>

#include "gpuorch/base/atomic_file.hpp"
#include "gpuorch/base/error.hpp"
#include "gpuorch/k8s/api/api_path.hpp"

namespace gpuorch::k8s {
namespace {

using nlohmann::json;

std::set<std::string> split_keys(const std::string& list) {
  std::set<std::string> keys;
  std::size_t start = 0;
  while (start < list.size()) {
    const auto comma = list.find(',', start);
    const auto end = comma == std::string::npos ? list.size() : comma;
    if (end > start) keys.insert(list.substr(start, end - start));
    start = end + 1;
  }
  return keys;
}

std::string string_at(const json& obj, const std::string& key) {
  const auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// What identifies one version of the config file; all zero when it is missing.
using FileStamp = std::tuple<std::int64_t, std::int64_t, std::uint64_t, std::int64_t>;

FileStamp stamp_of(const std::string& path) {
  struct stat st {};
  if (path.empty() || ::stat(path.c_str(), &st) != 0) return {};
  return {st.st_mtim.tv_sec, st.st_mtim.tv_nsec, st.st_ino, st.st_size};
}

std::string describe(const LabelChange& c) {
  std::string s;
  if (!c.set.empty()) s += fmt::format("set {}", fmt::join(c.set, ","));
  if (!c.removed.empty())
    s += fmt::format("{}removed {}", s.empty() ? "" : "; ", fmt::join(c.removed, ","));
  if (c.annotations) s += fmt::format("{}annotations", s.empty() ? "" : "; ");
  return s;
}

}  // namespace

json labels_patch(const json& node, const NodeFeatures& f, LabelChange& change) {
  change = {};
  const json meta = node.value("metadata", json::object());
  const json labels = meta.value("labels", json::object());
  const json annotations = meta.value("annotations", json::object());
  json set_labels = json::object();
  std::set<std::string> wanted;
  std::string owned;
  for (const auto& [k, v] : f.labels) {
    wanted.insert(k);
    owned += (owned.empty() ? "" : ",") + k;
    if (string_at(labels, k) != v || !labels.contains(k)) {
      set_labels[k] = v;
      change.set.push_back(k);
    }
  }
  // Only keys this labeller wrote are removed: a label someone else set stays.
  for (const auto& k : split_keys(string_at(annotations, kOwnedLabelsAnnotation))) {
    if (wanted.count(k) == 0 && labels.contains(k)) {
      set_labels[k] = nullptr;
      change.removed.push_back(k);
    }
  }
  json set_annotations = json::object();
  if (string_at(annotations, kOwnedLabelsAnnotation) != owned) {
    set_annotations[kOwnedLabelsAnnotation] = owned;
  }
  bool topology = false;
  for (const auto& [k, v] : f.annotations) {
    topology = topology || k == kTopologyAnnotation;
    if (string_at(annotations, k) != v) set_annotations[k] = v;
  }
  if (!topology && annotations.contains(kTopologyAnnotation)) {
    set_annotations[kTopologyAnnotation] = nullptr;  // no GPU left to describe
  }
  change.annotations = !set_annotations.empty();
  if (set_labels.empty() && set_annotations.empty()) return nullptr;
  json patch;
  if (!set_labels.empty()) patch["metadata"]["labels"] = std::move(set_labels);
  if (!set_annotations.empty()) patch["metadata"]["annotations"] = std::move(set_annotations);
  return patch;
}

LabelChange publish(ApiClient& api, const std::string& node_name, const NodeFeatures& f) {
  const std::string path = node_path(node_name);
  LabelChange change;
  const json patch = labels_patch(api.get(path), f, change);
  if (!patch.is_null()) api.patch(path, patch);
  return change;
}

std::string feature_file(const NodeFeatures& f) {
  std::string out;
  for (const auto& [k, v] : f.labels) out += fmt::format("{}={}\n", k, v);
  for (const auto& [k, v] : f.annotations) out += fmt::format("# annotation {}={}\n", k, v);
  return out;
}

NodeLabeller::NodeLabeller(ApiClient* api, LabellerOptions options)
    : api_(api), o_(std::move(options)) {}

void NodeLabeller::log(const std::string& line, base::Severity severity,
                       base::SourceLocation where) const {
  if (o_.log) o_.log(severity, line, where);
}

NodeFeatures NodeLabeller::compute() const {
  PluginConfig config;
  config.source = "defaults";
  if (!o_.config_file.empty()) config = load_config(o_.config_file);
  if (o_.overrides) o_.overrides(config);
  return node_features(o_.host(), config);
}

LabelChange NodeLabeller::refresh() {
  const NodeFeatures f = compute();
  if (!o_.output_file.empty()) base::write_file_atomically(o_.output_file, feature_file(f));
  LabelChange change;
  if (api_ != nullptr && !o_.node_name.empty()) change = publish(*api_, o_.node_name, f);
  if (!change.empty()) log(fmt::format("node {}: {}", o_.node_name, describe(change)));
  return change;
}

void NodeLabeller::run(const std::atomic<bool>& stop, std::atomic<bool>& wake) {
  using Clock = std::chrono::steady_clock;
  FileStamp seen = stamp_of(o_.config_file);
  auto next_refresh = Clock::now();
  auto next_poll = Clock::now() + o_.config_poll;
  while (!stop.load()) {
    const bool woken = wake.exchange(false);
    bool due = woken || Clock::now() >= next_refresh;
    if (Clock::now() >= next_poll) {
      next_poll = Clock::now() + o_.config_poll;
      const FileStamp now = stamp_of(o_.config_file);
      if (now != seen) {
        seen = now;
        log(fmt::format("{} changed", o_.config_file));
        due = true;
      }
    }
    if (due) {
      try {
        refresh();
      } catch (const std::exception& e) {
        // The labels stay as they were: better a stale truth than none.
        log(fmt::format("refresh failed, labels unchanged: {}", e.what()), base::Severity::kError);
      }
      next_refresh = Clock::now() + o_.interval;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace gpuorch::k8s
