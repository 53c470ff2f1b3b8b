#pragma once
// `gpuorch device-plugin`: one kubelet device plugin endpoint (gRPC on a unix socket) per
// resource, registered on kubelet.sock after it serves (the API's required order). It watches the
// directory with inotify and, when a new kubelet creates kubelet.sock (and has deleted every
// socket there), serves again and re-registers. A kubelet that is not there yet is retried with
// backoff. stop() (async-signal-safe) ends the streams, stops the servers and removes the sockets.
// reload() (async-signal-safe, SIGHUP) asks PluginOptions::reload for a new config and its
// resources and, when it gives them, stops every endpoint, serves the new resources and registers
// them again, as NVIDIA's plugin restarts its plugins on SIGHUP; when it does not, the running
// endpoints stay as they are.
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpuorch/k8s/deviceplugin/config.hpp"
#include "gpuorch/k8s/deviceplugin/health.hpp"
#include "gpuorch/k8s/deviceplugin/resources.hpp"
#include "gpuorch/k8s/deviceplugin/scheduled_allocation.hpp"

namespace gpuorch::k8s {

// What the plugin serves: a config and the resources planned from it.
struct PluginPlan {
  PluginConfig config;
  std::vector<Resource> resources;
};

struct PluginOptions {
  std::string directory = "/var/lib/kubelet/device-plugins/";
  // Relative: in `directory`; absolute: that path; empty: serve without registering (NVIDIA's
  // --kubelet-socket "").
  std::string kubelet_socket = "kubelet.sock";
  std::chrono::milliseconds backoff_initial{500};
  std::chrono::milliseconds backoff_max{30000};
  std::chrono::milliseconds register_timeout{10000};
  std::function<void(const std::string&)> log;  // one line per event; stderr when empty
  // Where the GPUs a gpuorch scheduler recorded on the pods of this node come from; null: every
  // request keeps the kubelet's devices (no API server access).
  ScheduledAllocations* scheduled = nullptr;
  // Called on the run() thread after reload(): the new plan, or nothing (it has logged why).
  std::function<std::optional<PluginPlan>()> reload;
};

class PluginManager {
 public:
  // Throws base::InputError when `directory` does not exist or is not writable.
  PluginManager(topology::Host host, PluginConfig config, std::vector<Resource> resources,
                PluginOptions options);
  ~PluginManager();
  PluginManager(const PluginManager&) = delete;
  PluginManager& operator=(const PluginManager&) = delete;

  // Serves, registers and watches until stop(). Returns 0, or 1 when serving failed.
  int run();
  // Safe from a signal handler and from any thread.
  void stop();
  void reload();

  HealthState& health();
  [[nodiscard]] const std::vector<Resource>& resources() const;
  // How many successful Register calls so far (all resources), for tests and the log.
  [[nodiscard]] int registrations() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpuorch::k8s
