#include "gpuorch/discover/xid_watch.hpp"

#include <array>
#include <chrono>
#include <cstring>
#include <set>
#include <thread>

#include "gpuorch/discover/nvml_api.hpp"

namespace gpuorch::discover {

std::unique_ptr<XidWatch> XidWatch::open(const std::string& nvml_library,
                                         const std::vector<std::string>& uuids, std::string& why) {
  auto binding = nvml::Binding::open(nvml_library, why);
  if (!binding) return nullptr;
  const nvml::Api& a = binding->api();
  if (!a.handle_by_uuid || !a.uuid || !a.event_set_create || !a.event_set_free ||
      !a.register_events || !a.event_set_wait) {
    why = "NVML lacks the event API";
    return nullptr;
  }
  std::unique_ptr<XidWatch> w(new XidWatch());
  w->nvml_ = std::move(binding);
  if (const nvml::Return r = a.event_set_create(&w->set_); r != nvml::kSuccess) {
    why = "nvmlEventSetCreate failed: " + w->nvml_->error(r);
    w->set_ = nullptr;
    return nullptr;
  }
  for (const auto& u : uuids) {
    nvml::Device dev = nullptr;
    if (u.empty() || a.handle_by_uuid(u.c_str(), &dev) != nvml::kSuccess) continue;
    if (a.register_events(dev, nvml::kEventXidCriticalError, w->set_) == nvml::kSuccess) ++w->devices_;
  }
  return w;
}

XidWatch::~XidWatch() {
  if (set_ != nullptr) nvml_->api().event_set_free(set_);
}

std::optional<XidEvent> XidWatch::wait(unsigned timeout_ms) {
  const nvml::Api& a = nvml_->api();
  nvml::EventData data{};
  if (const nvml::Return r = a.event_set_wait(set_, &data, timeout_ms); r != nvml::kSuccess) {
    if (r != nvml::kTimeout) std::this_thread::sleep_for(std::chrono::milliseconds(timeout_ms));
    return std::nullopt;
  }
  if (data.event_type != nvml::kEventXidCriticalError) return std::nullopt;
  std::array<char, nvml::kUuidBuffer> uuid{};
  if (a.uuid(data.device, uuid.data(), nvml::kUuidBuffer) != nvml::kSuccess) return std::nullopt;
  return XidEvent{std::string(uuid.data(), strnlen(uuid.data(), uuid.size())), data.event_data};
}

bool application_xid(unsigned long long xid) {
  static const std::set<unsigned long long> kApplication = {13, 31, 43, 45, 68, 109};
  return kApplication.contains(xid);
}

}  // namespace gpuorch::discover
