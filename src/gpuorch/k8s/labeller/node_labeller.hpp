#pragma once
// `gpuorch node-labeller` (docs/labeller.md): keeps a Node's GPU labels true. Each refresh
// re-reads the host (discovery is cheap) and the device-plugin config, computes node_features and
// writes only what differs through one JSON merge patch on the Node; labels it wrote before and
// that are no longer true (`-SHARED` after sharing is switched off) are removed. What it owns is
// listed on the Node itself (kOwnedLabelsAnnotation), so a restarted labeller still knows, and
// labels written by anyone else are never touched.
#include <atomic>
#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gpuorch/base/log.hpp"
#include "gpuorch/k8s/api/api_client.hpp"
#include "gpuorch/k8s/deviceplugin/config.hpp"
#include "gpuorch/k8s/labeller/node_features.hpp"

namespace gpuorch::k8s {

// Comma-separated label keys the labeller wrote on this Node.
inline constexpr const char* kOwnedLabelsAnnotation = "gpuorch.io/labeller.owned-labels";

struct LabelChange {
  std::vector<std::string> set;      // keys added or given a new value
  std::vector<std::string> removed;  // owned keys no longer true
  bool annotations = false;          // an annotation was written
  [[nodiscard]] bool empty() const { return set.empty() && removed.empty() && !annotations; }
};

// The merge patch that takes `node` (a Node object) to `features`; null when nothing differs.
nlohmann::json labels_patch(const nlohmann::json& node, const NodeFeatures& features,
                            LabelChange& change);

// GET the Node, PATCH what differs (nothing when nothing does). Throws ApiError.
LabelChange publish(ApiClient& api, const std::string& node_name, const NodeFeatures& features);

// NFD's local feature file format (`key=value` lines), which GFD's --output-file writes; the
// annotations follow as `#` comment lines, which NFD skips.
std::string feature_file(const NodeFeatures& features);

struct LabellerOptions {
  std::string node_name;    // empty: no API server (output file or dry run only)
  std::string config_file;  // empty: NVIDIA's defaults
  std::string output_file;  // empty: none
  // Called on every refresh: live discovery, a recording or a topology JSON.
  std::function<topology::Host()> host;
  // Flags that win over the file (--mig-strategy), applied after each load.
  std::function<void(PluginConfig&)> overrides;
  std::chrono::milliseconds interval{60'000};
  // How often the config file's identity (mtime, size, inode) is checked between refreshes; a
  // ConfigMap update swaps a symlink, which changes all three.
  std::chrono::milliseconds config_poll{500};
  base::LogSink log;  // may be empty
};

class NodeLabeller {
 public:
  // api may be null when options.node_name is empty.
  NodeLabeller(ApiClient* api, LabellerOptions options);

  // Throws base::InputError (bad config, config that does not fit the host), ApiError.
  [[nodiscard]] NodeFeatures compute() const;
  LabelChange refresh();
  // refresh() now, then every interval, and at once when the config file changes or `wake` is
  // set (SIGHUP); a failed refresh is logged and the labels stay as they were. Returns within
  // about 100 ms of `stop`.
  void run(const std::atomic<bool>& stop, std::atomic<bool>& wake);

 private:
  void log(const std::string& line, base::Severity severity = base::Severity::kInfo,
           base::SourceLocation where = base::SourceLocation::current()) const;

  ApiClient* api_;
  LabellerOptions o_;
};

}  // namespace gpuorch::k8s
