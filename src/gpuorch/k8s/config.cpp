#include "gpuorch/k8s/config.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <limits>
#include <set>
#include <sstream>

#include "gpuorch/base/error.hpp"
#include "gpuorch/base/read_file.hpp"
#include "gpuorch/base/yaml_reader.hpp"

namespace gpuorch::k8s {
namespace {

const std::set<std::string> kListStrategies = {"envvar", "volume-mounts", "cdi-annotations",
                                               "cdi-cri"};

// The device-plugin config's schema on the one strict YAML reader (base::YamlReader).
struct Parser : base::YamlReader {
  explicit Parser(const std::string& file) : base::YamlReader(file) {}

  // Hides YamlReader::integer: the config's numbers are ints.
  int integer(const YAML::Node& n, const std::string& what) const {
    return static_cast<int>(base::YamlReader::integer(n, what, std::numeric_limits<int>::min(),
                                                      std::numeric_limits<int>::max()));
  }

  // The part of an extended resource name after "nvidia.com/": a lower-case qualified name.
  static bool is_resource_name(const std::string& s) {
    const auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
    if (s.empty() || s.size() > 63 || !alnum(s.front()) || !alnum(s.back())) return false;
    return std::all_of(s.begin(), s.end(),
                       [&](char c) { return alnum(c) || c == '-' || c == '_' || c == '.'; });
  }
  // `s` for a message on one line: bytes outside printable ASCII as \xNN.
  static std::string printable(const std::string& s) {
    std::string out;
    for (const char c : s) {
      const auto u = static_cast<unsigned char>(c);
      out += u >= 0x20 && u < 0x7f ? std::string(1, c) : fmt::format("\\x{:02x}", u);
    }
    return out;
  }
  static bool is_uint(const std::string& s) {
    return !s.empty() && s.size() < 10 && std::all_of(s.begin(), s.end(), ::isdigit);
  }
  static bool is_device_ref(const std::string& s) {
    if (is_uint(s)) return true;  // GPU index
    if (const auto colon = s.find(':'); colon != std::string::npos) {
      return is_uint(s.substr(0, colon)) && is_uint(s.substr(colon + 1));  // "gpu:mig"
    }
    return s.starts_with("GPU-") || s.starts_with("MIG-");
  }

  ReplicaResource replica_resource(const YAML::Node& n, const std::string& where) const {
    only_keys(n, where, {"name", "rename", "devices", "replicas"});
    ReplicaResource r;
    r.line = static_cast<int>(line_of(n));
    if (!n["name"]) fail(n, fmt::format("{}: 'name' is missing", where));
    r.name = scalar(n["name"], "name");
    if (!r.name.starts_with("nvidia.com/gpu") && !r.name.starts_with("nvidia.com/mig-") &&
        r.name != "amd.com/gpu") {
      fail(n["name"], fmt::format("name '{}' is not a resource gpuorch shares (nvidia.com/gpu, "
                                  "nvidia.com/mig-<profile>, amd.com/gpu)",
                                  r.name));
    }
    if (r.name.starts_with("nvidia.com/gpu") && r.name != "nvidia.com/gpu") {
      fail(n["name"], fmt::format("name '{}' is not a resource gpuorch shares (nvidia.com/gpu, "
                                  "nvidia.com/mig-<profile>, amd.com/gpu)",
                                  r.name));
    }
    if (n["rename"]) {
      r.rename = scalar(n["rename"], "rename");
      if (r.rename.find('/') != std::string::npos) {
        // NVIDIA's plugin keeps the vendor domain: rename is the part after "nvidia.com/".
        fail(n["rename"],
             fmt::format("rename '{}' must not contain '/': the domain of '{}' is kept", r.rename,
                         r.name));
      }
      if (!is_resource_name(r.rename)) {
        fail(n["rename"],
             fmt::format("rename '{}' is not a Kubernetes resource name: 1 to 63 of a-z, 0-9, "
                         "'-', '_', '.', starting and ending with a letter or digit",
                         printable(r.rename)));
      }
    }
    if (!n["replicas"]) fail(n, fmt::format("{}: 'replicas' is missing", where));
    r.replicas = integer(n["replicas"], "replicas");
    if (r.replicas < 2) {
      fail(n["replicas"], fmt::format("replicas is {}: sharing needs at least 2", r.replicas));
    }
    if (const YAML::Node d = n["devices"]) {
      if (d.IsSequence()) {
        r.all_devices = false;
        for (const auto& item : d) {
          const std::string ref = scalar(item, "a devices entry");
          if (!is_device_ref(ref)) {
            fail(item, fmt::format("device '{}' is neither a GPU index, a 'gpu:mig' index nor a "
                                   "GPU-/MIG- UUID",
                                   ref));
          }
          r.device_list.push_back(ref);
        }
      } else {
        const std::string s = scalar(d, "devices");
        if (s == "all") {
          r.all_devices = true;
        } else if (is_uint(s) && std::stoi(s) > 0) {
          r.all_devices = false;
          r.device_count = std::stoi(s);
        } else {
          fail(d, fmt::format("devices is '{}': use all, a count > 0 or a list", s));
        }
      }
    }
    return r;
  }

  ReplicatedResources replicated(const YAML::Node& n, const std::string& where) const {
    only_keys(n, where, {"renameByDefault", "failRequestsGreaterThanOne", "resources", "strategy"});
    ReplicatedResources rr;
    if (n["strategy"] && !scalar(n["strategy"], "strategy").empty()) {
      fail(n["strategy"], fmt::format("unknown {} strategy '{}'", where, n["strategy"].Scalar()));
    }
    if (n["renameByDefault"])
      rr.rename_by_default = boolean(n["renameByDefault"], "renameByDefault");
    if (n["failRequestsGreaterThanOne"]) {
      rr.fail_requests_greater_than_one =
          boolean(n["failRequestsGreaterThanOne"], "failRequestsGreaterThanOne");
    }
    const YAML::Node res = n["resources"];
    if (!res || !res.IsSequence() || res.size() == 0) {
      fail(res ? res : n, fmt::format("{}: 'resources' must list at least one resource", where));
    }
    std::set<std::string> seen;
    for (std::size_t i = 0; i < res.size(); ++i) {
      auto r = replica_resource(res[i], fmt::format("{}.resources[{}]", where, i));
      if (!seen.insert(r.name).second) {
        fail(res[i], fmt::format("resource '{}' is listed twice", r.name));
      }
      rr.resources.push_back(std::move(r));
    }
    return rr;
  }

  void flags(const YAML::Node& f, PluginConfig& c) const {
    only_keys(f, "flags",
              {"migStrategy", "failOnInitError", "restartOnDeviceUnhealthy", "nvidiaDriverRoot",
               "nvidiaDevRoot", "gdsEnabled", "mofedEnabled", "useNodeFeatureAPI",
               "deviceDiscoveryStrategy", "plugin", "gfd"});
    try {
      if (f["migStrategy"])
        c.mig_strategy = parse_mig_strategy(scalar(f["migStrategy"], "migStrategy"));
    } catch (const base::InputError& e) {
      fail(f["migStrategy"], e.what());
    }
    if (f["failOnInitError"])
      c.fail_on_init_error = boolean(f["failOnInitError"], "failOnInitError");
    if (f["nvidiaDriverRoot"])
      c.nvidia_driver_root = scalar(f["nvidiaDriverRoot"], "nvidiaDriverRoot");
    if (f["gdsEnabled"]) c.gds_enabled = boolean(f["gdsEnabled"], "gdsEnabled");
    if (f["mofedEnabled"]) c.mofed_enabled = boolean(f["mofedEnabled"], "mofedEnabled");
    for (const char* b : {"restartOnDeviceUnhealthy", "useNodeFeatureAPI"}) {
      if (f[b]) (void)boolean(f[b], b);  // accepted for compatibility; gpuorch has no use for them
    }
    if (const YAML::Node p = f["plugin"]) {
      only_keys(p, "flags.plugin",
                {"passDeviceSpecs", "deviceListStrategy", "deviceIDStrategy", "cdiAnnotationPrefix",
                 "nvidiaCTKPath", "containerDriverRoot", "nvidiaHookPath"});
      if (p["passDeviceSpecs"])
        c.pass_device_specs = boolean(p["passDeviceSpecs"], "passDeviceSpecs");
      if (p["deviceListStrategy"]) {
        c.device_list_strategy = strings(p["deviceListStrategy"], "deviceListStrategy");
        for (const auto& s : c.device_list_strategy) {
          if (!kListStrategies.contains(s)) {
            fail(p["deviceListStrategy"],
                 fmt::format("unknown deviceListStrategy '{}' (envvar, volume-mounts, "
                             "cdi-annotations, cdi-cri)",
                             s));
          }
        }
      }
      if (p["deviceIDStrategy"]) {
        try {
          c.device_id_strategy =
              parse_device_id_strategy(scalar(p["deviceIDStrategy"], "deviceIDStrategy"));
        } catch (const base::InputError& e) {
          fail(p["deviceIDStrategy"], e.what());
        }
      }
      if (p["cdiAnnotationPrefix"]) {
        c.cdi_annotation_prefix = scalar(p["cdiAnnotationPrefix"], "cdiAnnotationPrefix");
      }
    }
    if (const YAML::Node g = f["gfd"]) {
      only_keys(g, "flags.gfd",
                {"oneshot", "noTimestamp", "sleepInterval", "outputFile", "machineTypeFile"});
    }
  }
};

}  // namespace

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
  base::fail_input(fmt::format("unknown MIG strategy '{}' (none, single, mixed)", s));
}

DeviceIdStrategy parse_device_id_strategy(const std::string& s) {
  if (s == "uuid") return DeviceIdStrategy::kUuid;
  if (s == "index") return DeviceIdStrategy::kIndex;
  base::fail_input(fmt::format("unknown device ID strategy '{}' (uuid, index)", s));
}

std::vector<std::string> parse_device_list_strategy(const std::string& comma_list) {
  std::vector<std::string> out;
  std::stringstream in(comma_list);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!kListStrategies.contains(item)) {
      base::fail_input(fmt::format(
          "unknown device list strategy '{}' (envvar, volume-mounts, cdi-annotations, cdi-cri)",
          item));
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
  const Parser p{file};
  const YAML::Node root = p.load(text);
  PluginConfig c;
  c.source = file;
  if (!root || root.IsNull()) return c;  // an empty file is the defaults
  p.only_keys(root, "the config", {"version", "flags", "resources", "sharing", "imex"});
  if (root["version"]) {
    const std::string v = p.scalar(root["version"], "version");
    if (!v.empty() && v != "v1")
      p.fail(root["version"], fmt::format("unknown version '{}' (v1)", v));
  }
  if (root["flags"]) p.flags(root["flags"], c);
  if (const YAML::Node r = root["resources"]) {
    p.only_keys(r, "resources", {"gpus", "mig"});
  }
  if (const YAML::Node i = root["imex"]) p.only_keys(i, "imex", {"channelIDs", "required"});
  if (const YAML::Node s = root["sharing"]) {
    p.only_keys(s, "sharing", {"timeSlicing", "mps"});
    const bool ts = s["timeSlicing"] && !s["timeSlicing"].IsNull();
    const bool mps = s["mps"] && !s["mps"].IsNull();
    if (ts && mps) {
      p.fail(s["mps"], "sharing.timeSlicing and sharing.mps cannot both be set");
    }
    if (ts) {
      c.sharing = SharingKind::kTimeSlicing;
      c.replicated = p.replicated(s["timeSlicing"], "sharing.timeSlicing");
    } else if (mps) {
      c.sharing = SharingKind::kMps;
      // NVIDIA's plugin refuses requests for more than one MPS replica unless told otherwise.
      c.replicated.fail_requests_greater_than_one = true;
      auto rr = p.replicated(s["mps"], "sharing.mps");
      if (!s["mps"]["failRequestsGreaterThanOne"]) rr.fail_requests_greater_than_one = true;
      c.replicated = std::move(rr);
      for (const auto& r : c.replicated.resources) {
        if (r.name != "nvidia.com/gpu") {
          base::fail_input(file, static_cast<std::size_t>(r.line),
                           fmt::format("MPS shares only nvidia.com/gpu (MPS is not supported on "
                                       "MIG devices or AMD GPUs), not '{}'",
                                       r.name));
        }
      }
    }
  }
  return c;
}

}  // namespace

PluginConfig load_config(const std::string& path) {
  return parse_config(base::read_input_file(path, "config file"), path);
}

}  // namespace gpuorch::k8s
