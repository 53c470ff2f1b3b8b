#include "gpuorch/k8s/deviceplugin/config.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <set>
#include <sstream>

#include "gpuorch/base/error.hpp"
#include "gpuorch/base/printable.hpp"
#include "gpuorch/base/read_file.hpp"
#include "gpuorch/base/yaml_reader.hpp"

namespace gpuorch::k8s {
namespace {

const std::set<std::string> kListStrategies = {"envvar", "volume-mounts", "cdi-annotations",
                                               "cdi-cri"};

// The keys of NVIDIA's api/config/v1 (config.go, flags.go, sharing.go, replicas.go,
// resources.go, imex.go), by the mapping that holds them.
const std::set<std::string> kTopKeys = {"version", "flags", "resources", "sharing", "imex"};
const std::set<std::string> kFlagKeys = {"migStrategy",
                                         "failOnInitError",
                                         "restartOnDeviceUnhealthy",
                                         "mpsRoot",
                                         "nvidiaDriverRoot",
                                         "nvidiaDevRoot",
                                         "gdrcopyEnabled",
                                         "gdsEnabled",
                                         "mofedEnabled",
                                         "useNodeFeatureAPI",
                                         "deviceDiscoveryStrategy",
                                         "plugin",
                                         "gfd"};
const std::set<std::string> kPluginKeys = {
    "passDeviceSpecs", "deviceListStrategy",  "deviceIDStrategy", "cdiAnnotationPrefix",
    "nvidiaCTKPath",   "containerDriverRoot", "kubeletSocket",    "cdiFeatureFlags"};
const std::set<std::string> kGfdKeys = {"oneshot", "noTimestamp", "sleepInterval", "outputFile",
                                        "machineTypeFile"};
const std::set<std::string> kSharingKeys = {"timeSlicing", "mps"};
const std::set<std::string> kReplicatedKeys = {"renameByDefault", "failRequestsGreaterThanOne",
                                               "resources"};
const std::set<std::string> kReplicaKeys = {"name", "rename", "devices", "replicas"};
const std::set<std::string> kResourcesKeys = {"gpus", "mig"};
const std::set<std::string> kPatternKeys = {"pattern", "name"};
const std::set<std::string> kImexKeys = {"channelIDs", "required"};

bool is_uint(const std::string& s) {
  return !s.empty() && s.size() < 10 && std::all_of(s.begin(), s.end(), ::isdigit);
}

// A Kubernetes DNS subdomain (RFC 1123): dot-separated labels of a-z, 0-9 and '-', each starting
// and ending with a letter or digit, 253 characters at most.
bool is_dns_subdomain(const std::string& s) {
  if (s.empty() || s.size() > 253) return false;
  std::stringstream in(s);
  std::string label;
  std::size_t labels = 0;
  while (std::getline(in, label, '.')) {
    ++labels;
    const auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
    if (label.empty() || !alnum(label.front()) || !alnum(label.back())) return false;
    if (!std::all_of(label.begin(), label.end(), [&](char c) { return alnum(c) || c == '-'; })) {
      return false;
    }
  }
  return labels > 0 && s.back() != '.';
}

// A UUID as Go's uuid.Parse takes the common forms: 8-4-4-4-12 hex digits, or 32 hex digits.
bool is_uuid(const std::string& s) {
  const auto hex = [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; };
  if (s.size() == 32) return std::all_of(s.begin(), s.end(), hex);
  if (s.size() != 36) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? s[i] != '-' : !hex(s[i])) return false;
  }
  return true;
}

// A `devices` list entry as NVIDIA's ReplicatedDeviceRef takes it: a GPU index, a "gpu:mig"
// index, GPU-<uuid>, MIG-<uuid> or MIG-GPU-<uuid>/<gi>/<ci>.
bool is_device_ref(const std::string& s) {
  if (is_uint(s)) return true;
  if (const auto colon = s.find(':'); colon != std::string::npos) {
    return is_uint(s.substr(0, colon)) && is_uint(s.substr(colon + 1));
  }
  if (s.starts_with("GPU-")) return is_uuid(s.substr(4));
  if (!s.starts_with("MIG-")) return false;
  const std::string rest = s.substr(4);
  if (is_uuid(rest)) return true;
  if (!rest.starts_with("GPU-")) return false;
  const auto a = rest.find('/');
  const auto b = a == std::string::npos ? a : rest.find('/', a + 1);
  if (b == std::string::npos) return false;
  return is_uuid(rest.substr(4, a - 4)) && is_uint(rest.substr(a + 1, b - a - 1)) &&
         is_uint(rest.substr(b + 1));
}

// `s` for a message on one line, cut short (base::printable), and bytes outside ASCII as \xNN.
std::string printable(const std::string& s) {
  std::string out;
  for (const char c : base::printable(s)) {
    const auto u = static_cast<unsigned char>(c);
    out += u >= 0x20 && u < 0x7f ? std::string(1, c) : fmt::format("\\x{:02x}", u);
  }
  return out;
}

bool is_discovery_strategy(const std::string& s) {
  return s == "auto" || s == "nvml" || s == "tegra";
}
std::string discovery_error(const std::string& s) {
  return fmt::format("invalid --device-discovery-strategy option {} (auto, nvml, tegra)",
                     printable(s));
}

// A YAML scalar written without quotes: what Go's YAML decoder reads as a number when it can.
bool plain(const YAML::Node& n) { return n.Tag() != "!"; }

// The device-plugin config's schema on the one strict YAML reader (base::YamlReader).
struct Parser : base::YamlReader {
  PluginConfig& c;
  Parser(const std::string& file, PluginConfig& config) : base::YamlReader(file), c(config) {}

  // Hides YamlReader::integer: the config's numbers are ints.
  int integer(const YAML::Node& n, const std::string& what) const {
    return static_cast<int>(base::YamlReader::integer(n, what, std::numeric_limits<int>::min(),
                                                      std::numeric_limits<int>::max()));
  }

  // The warnings kept; more are only counted, so that a file of a million unknown keys says so
  // in a few lines ("and N more"), not a million.
  static constexpr std::size_t kMaxWarnings = 20;
  mutable std::size_t unsaid = 0;

  void warn(const YAML::Node& at, const std::string& what) const {
    if (c.warnings.size() == kMaxWarnings) {
      ++unsaid;
      return;
    }
    c.warnings.push_back(fmt::format("{}:{}: {}", file(), line_of(at), what));
  }

  void finish_warnings() const {
    if (unsaid > 0) {
      c.warnings.push_back(
          fmt::format("{}: and {} more warning{}", file(), unsaid, unsaid == 1 ? "" : "s"));
    }
  }

  // NVIDIA's decoder skips keys it does not know; so does this one, saying so.
  void keys(const YAML::Node& map, const std::string& where,
            const std::set<std::string>& known) const {
    if (!map.IsMap()) fail(map, fmt::format("{} must be a mapping", where));
    for (const auto& kv : map) {
      if (!kv.first.IsScalar()) fail(kv.first, fmt::format("a key in {} must be a name", where));
      const std::string key = scalar(kv.first, fmt::format("a key in {}", where));
      if (!known.contains(key)) {
        warn(kv.first, fmt::format("unknown key '{}' in {} ignored, as NVIDIA's plugin ignores it "
                                   "(known: {})",
                                   base::printable(key), where, fmt::join(known, ", ")));
      }
    }
  }

  std::string name_of(const YAML::Node& n, const std::string& what) const {
    const std::string written = scalar(n, what);
    try {
      return resource_name(written);
    } catch (const base::InputError& e) {
      fail(n, fmt::format("{}: {}", what, e.what()));
    }
  }

  void devices(const YAML::Node& d, ReplicaResource& r) const {
    if (d.IsSequence()) {
      r.all_devices = false;
      for (const auto& item : d) {
        const std::string ref = scalar(item, "a devices entry");
        if (!is_device_ref(ref)) {
          fail(item, fmt::format("unsupported device '{}' in devices: a GPU index, a 'gpu:mig' "
                                 "index, GPU-<uuid>, MIG-<uuid> or MIG-GPU-<uuid>/<gi>/<ci>",
                                 printable(ref)));
        }
        r.device_list.push_back(ref);
      }
      return;
    }
    const std::string s = scalar(d, "devices");
    const bool number = plain(d) && (is_uint(s) || (s.starts_with('-') && is_uint(s.substr(1))));
    if (number) {
      if (s.starts_with('-') || std::stoi(s) == 0) {
        fail(d, fmt::format("devices set as '{}' but a count of devices must be > 0", s));
      }
      r.all_devices = false;
      r.device_count = std::stoi(s);
    } else if (s != "all") {
      fail(d, fmt::format("devices set as '{}' but the only valid string input is 'all'",
                          printable(s)));
    }
  }

  ReplicaResource replica_resource(const YAML::Node& n, const std::string& where,
                                   bool rename_by_default) const {
    keys(n, where, kReplicaKeys);
    ReplicaResource r;
    r.line = static_cast<int>(line_of(n));
    if (!n["name"]) fail(n, fmt::format("{}: no resource name specified", where));
    r.name = name_of(n["name"], "resource name");
    if (n["devices"]) devices(n["devices"], r);
    if (!n["replicas"]) fail(n, fmt::format("{}: no replicas specified", where));
    r.replicas = integer(n["replicas"], "replicas");
    if (r.replicas < 2) {
      fail(n["replicas"], fmt::format("replicas is {}: sharing needs at least 2", r.replicas));
    }
    if (r.replicas > kMaxReplicas) {
      fail(n["replicas"], fmt::format("replicas is {}: at most {} per device (each replica is a "
                                      "device the plugin lists to the kubelet)",
                                      r.replicas, kMaxReplicas));
    }
    const std::string shared = r.name + ".shared";
    if (n["rename"]) {
      r.rename = name_of(n["rename"], "rename");
      if (!rename_by_default || r.rename != shared) {
        warn(n["rename"],
             fmt::format("rename '{}' ignored, as NVIDIA's plugin ignores it: the shared resource "
                         "is {}",
                         r.rename, rename_by_default ? shared : r.name));
      }
    }
    if (!r.all_devices) {
      warn(n["devices"], fmt::format("devices of {} ignored, as NVIDIA's plugin ignores them: "
                                     "every device of the resource is shared",
                                     r.name));
    }
    return r;
  }

  ReplicatedResources replicated(const YAML::Node& n, const std::string& where) const {
    keys(n, where, kReplicatedKeys);
    ReplicatedResources rr;
    if (n["renameByDefault"])
      rr.rename_by_default = boolean(n["renameByDefault"], "renameByDefault");
    if (n["failRequestsGreaterThanOne"]) {
      rr.fail_requests_greater_than_one =
          boolean(n["failRequestsGreaterThanOne"], "failRequestsGreaterThanOne");
    }
    const YAML::Node res = n["resources"];
    if (!res || res.IsNull() || (res.IsSequence() && res.size() == 0)) {
      fail(res ? res : n, fmt::format("{}: no resources specified", where));
    }
    if (!res.IsSequence()) fail(res, fmt::format("{}.resources must be a list", where));
    std::set<std::string> seen;
    for (std::size_t i = 0; i < res.size(); ++i) {
      auto r =
          replica_resource(res[i], fmt::format("{}.resources[{}]", where, i), rr.rename_by_default);
      if (!seen.insert(r.name).second) {
        warn(res[i], fmt::format("resource '{}' is listed twice: the first entry applies", r.name));
        continue;
      }
      rr.resources.push_back(std::move(r));
    }
    return rr;
  }

  std::string text(const YAML::Node& f, const char* key) const { return scalar(f[key], key); }
  bool flag(const YAML::Node& f, const char* key) const { return boolean(f[key], key); }

  void flags(const YAML::Node& f) const {
    keys(f, "flags", kFlagKeys);
    try {
      if (f["migStrategy"]) c.mig_strategy = parse_mig_strategy(text(f, "migStrategy"));
    } catch (const base::InputError& e) {
      fail(f["migStrategy"], e.what());
    }
    if (f["failOnInitError"]) c.fail_on_init_error = flag(f, "failOnInitError");
    if (f["mpsRoot"]) c.mps_root = text(f, "mpsRoot");
    if (f["nvidiaDriverRoot"]) c.nvidia_driver_root = text(f, "nvidiaDriverRoot");
    if (f["nvidiaDevRoot"]) c.nvidia_dev_root = text(f, "nvidiaDevRoot");
    if (f["gdrcopyEnabled"]) c.gdrcopy_enabled = flag(f, "gdrcopyEnabled");
    if (f["gdsEnabled"]) c.gds_enabled = flag(f, "gdsEnabled");
    if (f["mofedEnabled"]) c.mofed_enabled = flag(f, "mofedEnabled");
    if (f["deviceDiscoveryStrategy"]) {
      c.device_discovery_strategy = text(f, "deviceDiscoveryStrategy");
      if (!is_discovery_strategy(c.device_discovery_strategy)) {
        fail(f["deviceDiscoveryStrategy"], discovery_error(c.device_discovery_strategy));
      }
    }
    for (const char* b : {"restartOnDeviceUnhealthy", "useNodeFeatureAPI"}) {
      if (f[b]) (void)flag(f, b);  // GFD's and an older release's: read, no meaning here
    }
    if (const YAML::Node p = f["plugin"]; p && !p.IsNull()) plugin(p);
    if (const YAML::Node g = f["gfd"]; g && !g.IsNull()) {
      keys(g, "flags.gfd",
           kGfdKeys);  // gpu-feature-discovery's; `gpuorch node-labeller` has its own
    }
  }

  void plugin(const YAML::Node& p) const {
    keys(p, "flags.plugin", kPluginKeys);
    if (p["passDeviceSpecs"]) c.pass_device_specs = flag(p, "passDeviceSpecs");
    if (p["deviceListStrategy"]) {
      c.device_list_strategy = strings(p["deviceListStrategy"], "deviceListStrategy");
      for (const auto& s : c.device_list_strategy) {
        if (!kListStrategies.contains(s)) {
          fail(p["deviceListStrategy"],
               fmt::format("invalid strategy: {} (envvar, volume-mounts, cdi-annotations, "
                           "cdi-cri)",
                           printable(s)));
        }
      }
    }
    if (p["deviceIDStrategy"]) {
      try {
        c.device_id_strategy = parse_device_id_strategy(text(p, "deviceIDStrategy"));
      } catch (const base::InputError& e) {
        fail(p["deviceIDStrategy"], e.what());
      }
    }
    if (p["cdiAnnotationPrefix"]) c.cdi_annotation_prefix = text(p, "cdiAnnotationPrefix");
    if (p["kubeletSocket"]) c.kubelet_socket = text(p, "kubeletSocket");
    for (const char* s : {"nvidiaCTKPath", "containerDriverRoot", "cdiFeatureFlags"}) {
      if (p[s]) (void)text(p, s);  // for generating CDI specs, which gpuorch does not do
    }
  }

  // resources.gpus / resources.mig: checked as NVIDIA checks them, then ignored as it does.
  void resources(const YAML::Node& r) const {
    keys(r, "resources", kResourcesKeys);
    for (const char* list : {"gpus", "mig"}) {
      const YAML::Node l = r[list];
      if (!l || l.IsNull()) continue;
      if (!l.IsSequence()) fail(l, fmt::format("resources.{} must be a list", list));
      for (const auto& e : l) {
        keys(e, fmt::format("resources.{}[]", list), kPatternKeys);
        if (!e["pattern"]) fail(e, "resources must have a 'pattern' field set");
        if (!e["name"]) fail(e, "resources must have a 'name' field set");
        (void)text(e, "pattern");
        (void)name_of(e["name"], "resource name");
      }
      if (l.size() > 0) {
        warn(l, fmt::format("resources.{} ignored, as NVIDIA's plugin ignores it (customizing "
                            "the 'resources' field is not supported)",
                            list));
      }
    }
  }

  void imex(const YAML::Node& i) const {
    keys(i, "imex", kImexKeys);
    if (const YAML::Node ids = i["channelIDs"]; ids && !ids.IsNull()) {
      if (!ids.IsSequence()) fail(ids, "imex.channelIDs must be a list");
      for (const auto& id : ids) c.imex_channel_ids.push_back(integer(id, "an IMEX channel ID"));
      try {
        check_imex_channel_ids(c.imex_channel_ids);
      } catch (const base::InputError& e) {
        fail(ids, e.what());
      }
    }
    if (i["required"]) c.imex_required = flag(i, "required");
  }

  void sharing(const YAML::Node& s) const {
    keys(s, "sharing", kSharingKeys);
    const bool ts = s["timeSlicing"] && !s["timeSlicing"].IsNull();
    const bool mps = s["mps"] && !s["mps"].IsNull();
    std::optional<ReplicatedResources> time_slicing;
    if (ts) time_slicing = replicated(s["timeSlicing"], "sharing.timeSlicing");
    if (mps) {
      c.sharing = SharingKind::kMps;
      c.replicated = replicated(s["mps"], "sharing.mps");
      // One replica per request unless the file says otherwise (NVIDIA's NewConfig).
      if (!s["mps"]["failRequestsGreaterThanOne"])
        c.replicated.fail_requests_greater_than_one = true;
      if (ts) {
        warn(s["timeSlicing"],
             "sharing.timeSlicing ignored: sharing.mps is set, and NVIDIA's "
             "plugin then shares with MPS");
      }
    } else if (ts) {
      c.sharing = SharingKind::kTimeSlicing;
      c.replicated = std::move(*time_slicing);
    }
  }
};

}  // namespace

const std::vector<std::string>& config_keys() {
  // Each mapping's keys under the dotted path that leads to it.
  static const std::vector<std::pair<std::string, const std::set<std::string>*>> kMaps = {
      {"", &kTopKeys},
      {"flags.", &kFlagKeys},
      {"flags.plugin.", &kPluginKeys},
      {"flags.gfd.", &kGfdKeys},
      {"resources.", &kResourcesKeys},
      {"resources.gpus.", &kPatternKeys},
      {"resources.mig.", &kPatternKeys},
      {"imex.", &kImexKeys},
      {"sharing.", &kSharingKeys},
      {"sharing.timeSlicing.", &kReplicatedKeys},
      {"sharing.timeSlicing.resources.", &kReplicaKeys},
      {"sharing.mps.", &kReplicatedKeys},
      {"sharing.mps.resources.", &kReplicaKeys}};
  static const std::vector<std::string> all = [] {
    std::vector<std::string> out;
    for (const auto& [prefix, keys] : kMaps) {
      for (const auto& k : *keys) out.push_back(prefix + k);
    }
    return out;
  }();
  return all;
}

std::string resource_name(const std::string& written) {
  if (written == "amd.com/gpu") return written;  // gpuorch also serves ROCm's resource
  const std::string full = written.starts_with("nvidia.com/") ? written : "nvidia.com/" + written;
  if (full.size() > 63) {
    base::fail_input(fmt::format("fully-qualified resource name must be 63 characters or less: {}",
                                 printable(full)));
  }
  if (!is_dns_subdomain(full.substr(full.find('/') + 1))) {
    base::fail_input(
        fmt::format("incorrect format for resource name '{}': after nvidia.com/ "
                    "a DNS subdomain (a-z, 0-9, '-', '.', starting and ending with "
                    "a letter or digit)",
                    printable(full)));
  }
  return full;
}

void check_imex_channel_ids(const std::vector<int>& ids) {
  if (ids.empty() || (ids.size() == 1 && ids[0] == 0)) return;
  base::fail_input(fmt::format("invalid IMEX channel IDs [{}]: only [] and [0] are supported",
                               fmt::join(ids, ", ")));
}

void validate_effective(const PluginConfig& c) {
  if (c.sharing == SharingKind::kMps && c.mig_strategy == MigStrategy::kMixed) {
    base::fail_input(
        fmt::format("{}: using --mig-strategy=mixed is not supported with MPS", c.source));
  }
  if (!is_discovery_strategy(c.device_discovery_strategy)) {
    base::fail_input(discovery_error(c.device_discovery_strategy));
  }
}

const char* to_string(MigStrategy s) {
  switch (s) {
    case MigStrategy::kNone:
      return "none";
    case MigStrategy::kSingle:
      return "single";
    case MigStrategy::kMixed:
      return "mixed";
  }
  return "none";
}

const char* to_string(SharingKind s) {
  switch (s) {
    case SharingKind::kNone:
      return "none";
    case SharingKind::kTimeSlicing:
      return "time-slicing";
    case SharingKind::kMps:
      return "mps";
  }
  return "none";
}

bool PluginConfig::has_list_strategy(const std::string& s) const {
  return std::find(device_list_strategy.begin(), device_list_strategy.end(), s) !=
         device_list_strategy.end();
}

MigStrategy parse_mig_strategy(const std::string& s) {
  if (s == "none") return MigStrategy::kNone;
  if (s == "single") return MigStrategy::kSingle;
  if (s == "mixed") return MigStrategy::kMixed;
  base::fail_input(fmt::format("unknown MIG strategy '{}' (none, single, mixed)", printable(s)));
}

DeviceIdStrategy parse_device_id_strategy(const std::string& s) {
  if (s == "uuid") return DeviceIdStrategy::kUuid;
  if (s == "index") return DeviceIdStrategy::kIndex;
  base::fail_input(fmt::format("unknown device ID strategy '{}' (uuid, index)", printable(s)));
}

std::vector<std::string> parse_device_list_strategy(const std::string& comma_list) {
  std::vector<std::string> out;
  std::stringstream in(comma_list);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!kListStrategies.contains(item)) {
      base::fail_input(fmt::format(
          "unknown device list strategy '{}' (envvar, volume-mounts, cdi-annotations, cdi-cri)",
          printable(item)));
    }
    out.push_back(item);
  }
  if (out.empty()) base::fail_input("empty device list strategy");
  return out;
}

namespace {
PluginConfig parse_config_tree(const std::string& text, const std::string& file);
}  // namespace

PluginConfig parse_config(const std::string& text, const std::string& file) {
  try {
    return parse_config_tree(text, file);
  } catch (const YAML::Exception& e) {  // any yaml-cpp error the checks above did not foresee
    base::fail_input(file, e.mark.line >= 0 ? static_cast<std::size_t>(e.mark.line) + 1 : 0,
                     e.msg.empty() ? std::string("not a valid config") : e.msg);
  }
}

namespace {

PluginConfig parse_config_tree(const std::string& text, const std::string& file) {
  PluginConfig c;
  c.source = file;
  const Parser p{file, c};
  const YAML::Node root = p.load(text);
  if (!root || root.IsNull()) return c;  // an empty file is the defaults
  p.keys(root, "the config", kTopKeys);
  if (root["version"]) {
    const std::string v = p.scalar(root["version"], "version");
    if (!v.empty() && v != "v1") {
      p.fail(root["version"], fmt::format("unknown version: {}", printable(v)));
    }
  }
  if (root["flags"] && !root["flags"].IsNull()) p.flags(root["flags"]);
  if (root["resources"] && !root["resources"].IsNull()) p.resources(root["resources"]);
  if (root["imex"] && !root["imex"].IsNull()) p.imex(root["imex"]);
  if (root["sharing"] && !root["sharing"].IsNull()) p.sharing(root["sharing"]);
  p.finish_warnings();
  return c;
}

}  // namespace

PluginConfig load_config(const std::string& path) {
  return parse_config(base::read_input_file(path, "config file", base::kConfigFileMaxBytes), path);
}

}  // namespace gpuorch::k8s
