#pragma once
// One MPS control daemon per claim that asks for MPS (docs/dra.md, "Sharing a GPU"):
// `nvidia-cuda-mps-control -f` with CUDA_VISIBLE_DEVICES naming the claim's devices and its own
// CUDA_MPS_PIPE_DIRECTORY and CUDA_MPS_LOG_DIRECTORY, then configured through its command
// interface (set_default_active_thread_percentage, set_default_device_pinned_mem_limit); stopped
// with `quit`. NVIDIA's driver runs the same commands in a Deployment it creates; gpuorch's
// driver runs them itself, so no API write and no image pull stand between Prepare and the
// daemon. In the foreground (-f, not -d) the daemon stays the driver's child, in a session of its
// own: the driver reaps it when it quits, which matters because the driver is PID 1 of its
// container, where -d's orphans would stay zombies. A driver started again finds a daemon of an
// earlier one through its pipe folder, which the checkpoint names.
//
// MPS clients and server share memory through /dev/shm, so the daemon gets the claim's own
// <root>/shm as its /dev/shm (a private mount namespace; the driver runs as root) and the claim's
// containers get the same folder there through the CDI spec, as NVIDIA's driver does with a tmpfs
// it mounts; a plain folder needs no mount propagation between the driver's container and the
// host.
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "gpuorch/k8s/dra/checkpoint.hpp"

namespace gpuorch::k8s::dra {

// Where a claim's MPS pipe folder appears in its containers (NVIDIA's driver uses the same).
inline constexpr const char* kMpsContainerPipeDir = "/tmp/nvidia-mps";

struct MpsOptions {
  std::string control = "nvidia-cuda-mps-control";  // a path; a bare name is looked up on PATH
  std::chrono::milliseconds timeout{10000};         // for one command, and for the daemon to go
  std::function<void(const std::string&)> log;
};

// Starts the daemon of `sharing` (mps_root and mps_devices set) and applies its defaults; when
// one already answers on the pipe folder, only applies them. Returns the daemon's pid (this
// process's child), or -1 for a daemon that was there. On failure nothing is left running and
// std::runtime_error says what happened.
pid_t start_mps_daemon(const MpsOptions& o, const PreparedSharing& sharing);
// Whether a daemon answers on `root`'s pipe folder.
[[nodiscard]] bool mps_daemon_answers(const MpsOptions& o, const std::string& root);
// `quit`, then waits (up to o.timeout, checking with growing pauses) until the daemon answers no
// more, reaps `child` (the pid start_mps_daemon returned; -1: not this process's), and removes
// `root`. A folder with no daemon is removed; a daemon that is still there at the deadline
// throws std::runtime_error and keeps its folder (the kubelet asks again).
void stop_mps_daemon(const MpsOptions& o, const std::string& root, pid_t child = -1);

// What a container of the claim needs to be the daemon's client: CUDA_MPS_PIPE_DIRECTORY (and
// CUDA_MPS_ACTIVE_THREAD_PERCENTAGE when the claim sets one), the pipe folder and /dev/shm
// bind-mounted. CDI containerEdits; empty when the claim has no daemon.
[[nodiscard]] nlohmann::json mps_container_edits(const PreparedSharing& sharing);

}  // namespace gpuorch::k8s::dra
