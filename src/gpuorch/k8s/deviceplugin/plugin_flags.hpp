#pragma once
// The command-line flags and environment variables of NVIDIA's nvidia-device-plugin binary
// (cmd/nvidia-device-plugin/main.go, api/config/v1/consts.go), as `gpuorch device-plugin`
// accepts them: the same names, aliases, variables and defaults. The CLI registers from this
// table and docs/device-plugin.md's comparison table is checked against it.
#include <string>
#include <vector>

namespace gpuorch::k8s {

struct NvidiaFlag {
  std::string name;               // "fail-on-init-error"
  std::string alias;              // "" or a second name NVIDIA accepts ("nvidia-driver-root")
  std::vector<std::string> envs;  // in NVIDIA's order: the first one set wins
  std::string default_value;      // as NVIDIA's --help shows it; "" for none
  bool boolean = false;           // a switch: --name, --name=true, --name=false
};

const std::vector<NvidiaFlag>& nvidia_flags();
const NvidiaFlag& nvidia_flag(const std::string& name);

}  // namespace gpuorch::k8s
