#include "cli/nvidia_plugin_flags.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <sstream>

#include "gpuorch/base/error.hpp"
#include "gpuorch/k8s/deviceplugin/plugin_flags.hpp"

namespace gpuorch::cli {
namespace {

// Go's strconv.ParseBool, which NVIDIA's flags and variables go through.
bool go_bool(const std::string& name, const std::string& v) {
  if (v == "1" || v == "t" || v == "T" || v == "true" || v == "TRUE" || v == "True") return true;
  if (v == "0" || v == "f" || v == "F" || v == "false" || v == "FALSE" || v == "False") {
    return false;
  }
  base::fail_input(fmt::format("{}: '{}' is not a boolean (true, false, 1, 0)", name, v));
}

std::vector<int> int_list(const std::string& name, const std::string& v) {
  std::vector<int> out;
  std::stringstream in(v);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty() || item.size() > 9 || item.find_first_not_of("0123456789") != item.npos) {
      base::fail_input(fmt::format("{}: '{}' is not a list of whole numbers", name, v));
    }
    out.push_back(std::stoi(item));
  }
  return out;
}

std::string usage(const k8s::NvidiaFlag& f) {
  std::string envs;
  for (const auto& e : f.envs) envs += (envs.empty() ? "$" : ", $") + e;
  return fmt::format("As NVIDIA's plugin ({}{}; see docs/device-plugin.md)", envs,
                     f.default_value.empty() ? "" : "; default " + f.default_value);
}

}  // namespace

void NvidiaPluginFlags::add_to(CLI::App& cmd) {
  for (const auto& f : k8s::nvidia_flags()) {
    std::string names = "--" + f.name;
    if (!f.alias.empty()) names += ",--" + f.alias;
    if (f.boolean) {
      switch_[f.name] = false;
      options_[f.name] = cmd.add_flag(names, switch_[f.name], usage(f));
    } else {
      text_[f.name];
      options_[f.name] = cmd.add_option(names, text_[f.name], usage(f));
    }
  }
}

std::optional<std::string> NvidiaPluginFlags::value(const std::string& name) const {
  const auto& f = k8s::nvidia_flag(name);
  if (options_.at(name)->count() > 0) {
    return f.boolean ? std::string(switch_.at(name) ? "true" : "false") : text_.at(name);
  }
  for (const auto& e : f.envs) {
    if (const char* v = std::getenv(e.c_str())) return std::string(v);
  }
  return std::nullopt;
}

k8s::PluginConfig NvidiaPluginFlags::effective_config() const {
  k8s::PluginConfig c;
  c.source = "defaults";
  if (const auto file = config_file(); !file.empty()) c = k8s::load_config(file);
  const auto set = [&](const char* name, auto apply) {
    if (const auto v = value(name)) apply(*v);
  };
  const auto flag = [&](const char* name, bool& out) {
    set(name, [&](const std::string& v) { out = go_bool(name, v); });
  };
  set("mig-strategy", [&](const std::string& v) { c.mig_strategy = k8s::parse_mig_strategy(v); });
  flag("fail-on-init-error", c.fail_on_init_error);
  set("driver-root", [&](const std::string& v) { c.nvidia_driver_root = v; });
  set("dev-root", [&](const std::string& v) { c.nvidia_dev_root = v; });
  flag("pass-device-specs", c.pass_device_specs);
  set("device-list-strategy",
      [&](const std::string& v) { c.device_list_strategy = k8s::parse_device_list_strategy(v); });
  set("device-id-strategy",
      [&](const std::string& v) { c.device_id_strategy = k8s::parse_device_id_strategy(v); });
  flag("gdrcopy-enabled", c.gdrcopy_enabled);
  flag("gds-enabled", c.gds_enabled);
  flag("mofed-enabled", c.mofed_enabled);
  set("kubelet-socket", [&](const std::string& v) { c.kubelet_socket = v; });
  set("cdi-annotation-prefix", [&](const std::string& v) { c.cdi_annotation_prefix = v; });
  set("mps-root", [&](const std::string& v) { c.mps_root = v; });
  set("device-discovery-strategy", [&](const std::string& v) { c.device_discovery_strategy = v; });
  set("imex-channel-ids", [&](const std::string& v) {
    c.imex_channel_ids = int_list("imex-channel-ids", v);
    k8s::check_imex_channel_ids(c.imex_channel_ids);
  });
  flag("imex-required", c.imex_required);
  // nvidia-cdi-hook-path, driver-root-ctr-path and cdi-feature-flags shape the CDI specs NVIDIA's
  // plugin writes; gpuorch writes none (docs/device-plugin.md), so they are read and kept out.
  k8s::validate_effective(c);
  return c;
}

}  // namespace gpuorch::cli
