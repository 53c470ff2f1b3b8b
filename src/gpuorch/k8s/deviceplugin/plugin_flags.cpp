#include "gpuorch/k8s/deviceplugin/plugin_flags.hpp"

#include <algorithm>
#include <stdexcept>

namespace gpuorch::k8s {

const std::vector<NvidiaFlag>& nvidia_flags() {
  static const std::vector<NvidiaFlag> flags = {
      {"mig-strategy", "", {"MIG_STRATEGY"}, "none", false},
      {"fail-on-init-error", "", {"FAIL_ON_INIT_ERROR"}, "true", true},
      {"driver-root", "nvidia-driver-root", {"NVIDIA_DRIVER_ROOT"}, "/", false},
      {"dev-root", "nvidia-dev-root", {"NVIDIA_DEV_ROOT"}, "", false},
      {"pass-device-specs", "", {"PASS_DEVICE_SPECS"}, "false", true},
      {"device-list-strategy", "", {"DEVICE_LIST_STRATEGY"}, "envvar", false},
      {"device-id-strategy", "", {"DEVICE_ID_STRATEGY"}, "uuid", false},
      {"gdrcopy-enabled", "", {"GDRCOPY_ENABLED"}, "false", true},
      {"gds-enabled", "", {"GDS_ENABLED"}, "false", true},
      {"mofed-enabled", "", {"MOFED_ENABLED"}, "false", true},
      {"kubelet-socket",
       "",
       {"KUBELET_SOCKET"},
       "/var/lib/kubelet/device-plugins/kubelet.sock",
       false},
      {"config-file", "", {"CONFIG_FILE"}, "", false},
      {"cdi-annotation-prefix", "", {"CDI_ANNOTATION_PREFIX"}, "cdi.k8s.io/", false},
      {"nvidia-cdi-hook-path",
       "nvidia-ctk-path",
       {"NVIDIA_CDI_HOOK_PATH", "NVIDIA_CTK_PATH"},
       "/usr/bin/nvidia-ctk",
       false},
      {"driver-root-ctr-path",
       "container-driver-root",
       {"DRIVER_ROOT_CTR_PATH", "CONTAINER_DRIVER_ROOT"},
       "/driver-root",
       false},
      {"mps-root", "", {"MPS_ROOT"}, "", false},
      {"device-discovery-strategy", "", {"DEVICE_DISCOVERY_STRATEGY"}, "auto", false},
      {"imex-channel-ids", "", {"IMEX_CHANNEL_IDS"}, "", false},
      {"imex-required", "", {"IMEX_REQUIRED"}, "false", true},
      {"cdi-feature-flags", "", {"CDI_FEATURE_FLAGS"}, "", false},
  };
  return flags;
}

const NvidiaFlag& nvidia_flag(const std::string& name) {
  const auto& all = nvidia_flags();
  const auto it =
      std::find_if(all.begin(), all.end(), [&](const NvidiaFlag& f) { return f.name == name; });
  if (it == all.end()) throw std::logic_error("no NVIDIA flag " + name);
  return *it;
}

}  // namespace gpuorch::k8s
