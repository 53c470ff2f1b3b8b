#pragma once
// The Container Device Interface spec of one prepared claim: the file a CDI-aware runtime
// (containerd, CRI-O) reads to edit the container when the kubelet hands it the claim's CDI device
// IDs. One file per claim, named by its UID, so Unprepare can remove it even when the checkpoint
// is lost. Each device of the claim carries the claim's whole NVIDIA_VISIBLE_DEVICES (the same
// value on every device: the runtime applies each device's edits, and a CDI device needs at least
// one edit) and its own device node where the host has it; the control nodes (nvidiactl, UVM)
// are the spec's common edits.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gpuorch/topology/host.hpp"

namespace gpuorch::k8s::dra {

struct CdiOptions {
  std::string driver;
  std::string cdi_dir = "/var/run/cdi";
  // The host's /dev as this process sees it ("/dev"; the DaemonSet mounts it elsewhere; a test's
  // folder): a node the host lacks is left out, as a container cannot be given what is not there.
  std::string dev_root = "/dev";
};

struct CdiClaim {
  nlohmann::json spec;
  std::vector<std::string> device_ids;  // per device, in order: "gpu.gpuorch.io/claim=<uid>-gpu-3"
};

// The spec for `devices` (names of the slice's devices: "gpu-3", "gpu-3-mig-1-0") of claim `uid`.
// `claim_edits` (CDI containerEdits: env, mounts) join the spec's common edits: what the claim's
// sharing needs in each of its containers (an MPS daemon's pipe folder). Throws
// std::runtime_error naming a device the host does not have.
[[nodiscard]] CdiClaim cdi_claim(const topology::Host& host, const CdiOptions& o,
                                 const std::string& uid, const std::vector<std::string>& devices,
                                 const nlohmann::json& claim_edits = nlohmann::json::object());

// "<cdi_dir>/<driver>-claim_<uid>.json".
[[nodiscard]] std::string cdi_spec_path(const CdiOptions& o, const std::string& uid);

}  // namespace gpuorch::k8s::dra
