#pragma once
// Device health for ListAndWatch. One HealthState per plugin process: sources mark devices
// Unhealthy (by GPU UUID, MIG UUID, GPU index or PCI address), every ListAndWatch stream waits on
// it and sends the new device list when it changes. As in NVIDIA's plugin, live sources only
// ever take a device out of service; the health file can also return it (an operator's word).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gpuorch/k8s/deviceplugin/resources.hpp"

namespace gpuorch::k8s {

class HealthState {
 public:
  using Log = std::function<void(const std::string&)>;
  explicit HealthState(Log log = {}) : log_(std::move(log)) {}

  // `key`: GPU UUID, MIG UUID, GPU index ("3") or PCI address. Returns whether anything changed.
  bool set_unhealthy(const std::string& key, const std::string& reason);
  bool set_healthy(const std::string& key);
  // Replaces the keys that came from `source` (the health file) with `keys`.
  void replace_from(const std::string& source, const std::map<std::string, std::string>& keys);

  [[nodiscard]] bool healthy(const topology::Host& host, const PhysicalDevice& d) const;
  [[nodiscard]] std::uint64_t version() const;
  // Waits until the version differs from `seen`, stop() is called, or `timeout` passes.
  std::uint64_t wait_change(std::uint64_t seen, std::chrono::milliseconds timeout) const;
  void stop();
  [[nodiscard]] bool stopping() const;

 private:
  struct Mark {
    std::string reason, source;
  };
  Log log_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::map<std::string, Mark> unhealthy_;
  std::uint64_t version_ = 1;
  bool stop_ = false;
};

// Watches a file of unhealthy devices (one key per line, `#` comments), re-read when it changes:
// the static inventory mode's health source, and an operator's override on live hosts.
class HealthFileWatcher {
 public:
  HealthFileWatcher(std::string path, HealthState& state,
                    std::chrono::milliseconds interval = std::chrono::milliseconds(200));
  ~HealthFileWatcher();
  HealthFileWatcher(const HealthFileWatcher&) = delete;
  HealthFileWatcher& operator=(const HealthFileWatcher&) = delete;
  void poll_once();

 private:
  std::string path_;
  HealthState& state_;
  std::string last_;
  bool seen_ = false;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::chrono::milliseconds interval_;
};

// Live health: a GPU whose PCI device disappears from sysfs, that NVML can no longer read, or
// that reports a critical XID (NVML events; application XIDs 13, 31, 43, 45, 68, 109 ignored,
// as NVIDIA's plugin does) turns Unhealthy.
class LiveHealthMonitor {
 public:
  struct Options {
    std::string sysfs_root = "/";
    std::string nvml_library = "libnvidia-ml.so.1";
    bool use_nvml = true;
    std::chrono::milliseconds interval{5000};
  };
  LiveHealthMonitor(const topology::Host& host, HealthState& state, Options options,
                    HealthState::Log log);
  ~LiveHealthMonitor();
  LiveHealthMonitor(const LiveHealthMonitor&) = delete;
  LiveHealthMonitor& operator=(const LiveHealthMonitor&) = delete;
  // What it watches, one line ("sysfs for 2 GPUs; NVML XID events for 2 GPUs").
  [[nodiscard]] std::string description() const { return description_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string description_;
};

}  // namespace gpuorch::k8s
