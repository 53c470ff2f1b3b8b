#include "gpuorch/k8s/deviceplugin/health.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <set>
#include <sstream>
#include <vector>

#include "gpuorch/base/read_file.hpp"
#include "gpuorch/discover/xid_watch.hpp"

namespace gpuorch::k8s {

// ---- HealthState -------------------------------------------------------------------------------

bool HealthState::set_unhealthy(const std::string& key, const std::string& reason) {
  {
    std::lock_guard lock(mu_);
    if (unhealthy_.contains(key)) return false;
    unhealthy_[key] = {reason, "live"};
    ++version_;
  }
  if (log_) log_(fmt::format("{} is Unhealthy: {}", key, reason));
  cv_.notify_all();
  return true;
}

bool HealthState::set_healthy(const std::string& key) {
  {
    std::lock_guard lock(mu_);
    if (unhealthy_.erase(key) == 0) return false;
    ++version_;
  }
  if (log_) log_(fmt::format("{} is Healthy again", key));
  cv_.notify_all();
  return true;
}

void HealthState::replace_from(const std::string& source,
                               const std::map<std::string, std::string>& keys) {
  std::vector<std::string> lines;
  {
    std::lock_guard lock(mu_);
    bool changed = false;
    for (auto it = unhealthy_.begin(); it != unhealthy_.end();) {
      if (it->second.source == source && !keys.contains(it->first)) {
        lines.push_back(fmt::format("{} is Healthy again ({})", it->first, source));
        it = unhealthy_.erase(it);
        changed = true;
      } else {
        ++it;
      }
    }
    for (const auto& [key, reason] : keys) {
      if (!unhealthy_.contains(key)) {
        unhealthy_[key] = {reason, source};
        lines.push_back(fmt::format("{} is Unhealthy: {}", key, reason));
        changed = true;
      }
    }
    if (changed) ++version_;
  }
  if (log_) {
    for (const auto& l : lines) log_(l);
  }
  if (!lines.empty()) cv_.notify_all();
}

bool HealthState::healthy(const topology::Host& host, const PhysicalDevice& d) const {
  const auto& g = host.gpus[static_cast<std::size_t>(d.gpu)];
  std::lock_guard lock(mu_);
  if (unhealthy_.empty()) return true;
  std::vector<std::string> keys = {d.id, std::to_string(g.index), g.pci.address};
  if (!g.uuid.empty()) keys.push_back(g.uuid);
  if (d.mig >= 0) keys.push_back(fmt::format("{}:{}", g.index, d.mig));
  for (const auto& k : keys) {
    if (unhealthy_.contains(k)) return false;
  }
  return true;
}

std::uint64_t HealthState::version() const {
  std::lock_guard lock(mu_);
  return version_;
}

std::uint64_t HealthState::wait_change(std::uint64_t seen,
                                       std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return stop_ || version_ != seen; });
  return version_;
}

void HealthState::stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
}

bool HealthState::stopping() const {
  std::lock_guard lock(mu_);
  return stop_;
}

// ---- HealthFileWatcher
// ---------------------------------------------------------------------------

HealthFileWatcher::HealthFileWatcher(std::string path, HealthState& state,
                                     std::chrono::milliseconds interval)
    : path_(std::move(path)), state_(state), interval_(interval) {
  poll_once();
  thread_ = std::thread([this] {
    while (!stop_) {
      std::this_thread::sleep_for(interval_);
      poll_once();
    }
  });
}

HealthFileWatcher::~HealthFileWatcher() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void HealthFileWatcher::poll_once() {
  // As an unreadable file: nothing listed. A FIFO put there must not stop the watcher for good,
  // nor /dev/zero fill its memory (base/read_file.hpp).
  std::string problem;
  const std::string text =
      base::read_bounded(path_, base::kConfigFileMaxBytes, problem).value_or(std::string());
  if (seen_ && text == last_) return;
  seen_ = true;
  last_ = text;
  std::map<std::string, std::string> keys;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (const auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    const auto b = line.find_first_not_of(" \t\r");
    if (b == std::string::npos) continue;
    const auto e = line.find_last_not_of(" \t\r");
    keys[line.substr(b, e - b + 1)] = "listed in " + path_;
  }
  state_.replace_from(path_, keys);
}

// ---- LiveHealthMonitor -------------------------------------------------------------------------

struct LiveHealthMonitor::Impl {
  Impl(const topology::Host& h, HealthState& s, Options o, HealthState::Log l)
      : host(h), state(s), options(std::move(o)), log(std::move(l)) {}
  const topology::Host& host;
  HealthState& state;
  Options options;
  HealthState::Log log;
  std::atomic<bool> stop{false};
  std::unique_ptr<discover::XidWatch> nvml;
  int xid_devices = 0;
  std::thread sysfs_thread, xid_thread;

  void check_sysfs() {
    for (const auto& g : host.gpus) {
      if (g.pci.address.empty()) continue;
      const auto dir =
          std::filesystem::path(options.sysfs_root) / "sys/bus/pci/devices" / g.pci.address;
      std::error_code ec;
      if (!std::filesystem::exists(dir, ec)) {
        state.set_unhealthy(
            g.uuid.empty() ? g.pci.address : g.uuid,
            fmt::format("{} is gone from the PCI bus ({} missing)", g.pci.address, dir.string()));
      }
    }
  }
  void watch_xids() {
    while (!stop) {
      const auto event = nvml->wait(500);
      if (!event || discover::application_xid(event->xid)) continue;
      state.set_unhealthy(event->uuid, fmt::format("XID {} reported by NVML", event->xid));
    }
  }
};

LiveHealthMonitor::LiveHealthMonitor(const topology::Host& host, HealthState& state,
                                     Options options, HealthState::Log log)
    : impl_(std::make_unique<Impl>(host, state, std::move(options), std::move(log))) {
  Impl& m = *impl_;
  int nvidia = 0;
  for (const auto& g : host.gpus) nvidia += g.vendor == topology::Vendor::kNvidia ? 1 : 0;
  std::string nvml_note;
  if (nvidia > 0 && m.options.use_nvml) {
    std::vector<std::string> uuids;
    for (const auto& g : host.gpus) {
      if (g.vendor == topology::Vendor::kNvidia) uuids.push_back(g.uuid);
    }
    std::string why;
    if (auto watch = discover::XidWatch::open(m.options.nvml_library, uuids, why)) {
      m.xid_devices = watch->devices();
      m.nvml = std::move(watch);
      nvml_note = fmt::format("; NVML XID events for {} GPU{}", m.xid_devices,
                              m.xid_devices == 1 ? "" : "s");
    } else {
      nvml_note = fmt::format("; no XID events ({})", why);
    }
  }
  description_ =
      fmt::format("sysfs presence of {} GPU{} every {} ms{}", host.gpus.size(),
                  host.gpus.size() == 1 ? "" : "s", m.options.interval.count(), nvml_note);
  m.check_sysfs();
  m.sysfs_thread = std::thread([&m] {
    while (!m.stop) {
      for (auto waited = std::chrono::milliseconds(0); waited < m.options.interval && !m.stop;
           waited += std::chrono::milliseconds(100)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      if (!m.stop) m.check_sysfs();
    }
  });
  if (m.nvml && m.xid_devices > 0) m.xid_thread = std::thread([&m] { m.watch_xids(); });
}

LiveHealthMonitor::~LiveHealthMonitor() {
  impl_->stop = true;
  if (impl_->sysfs_thread.joinable()) impl_->sysfs_thread.join();
  if (impl_->xid_thread.joinable()) impl_->xid_thread.join();
}

}  // namespace gpuorch::k8s
