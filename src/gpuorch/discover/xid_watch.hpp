#pragma once
// NVML's XID (critical error) events for a set of GPUs, as the device plugin's health check and
// NVIDIA's own plugin watch them: a GPU that reports an XID other than an application's own
// fault is no longer fit to hand out.
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace gpuorch::discover {

namespace nvml {
class Binding;
struct NvmlEventSetOpaque;
}  // namespace nvml

struct XidEvent {
  std::string uuid;  // the GPU that reported it
  unsigned long long xid = 0;
};

class XidWatch {
 public:
  // Registers XID events for each GPU of `uuids` NVML knows; nullptr and `why` when NVML does not
  // load or lacks the event API.
  static std::unique_ptr<XidWatch> open(const std::string& nvml_library,
                                        const std::vector<std::string>& uuids, std::string& why);
  ~XidWatch();
  XidWatch(const XidWatch&) = delete;
  XidWatch& operator=(const XidWatch&) = delete;

  // How many of the GPUs asked for are watched.
  [[nodiscard]] int devices() const { return devices_; }
  // Waits up to `timeout_ms` for the next XID; nothing on timeout or on an NVML error (NVML
  // reports a lost GPU here, which the sysfs check names; the wait then still lasts `timeout_ms`,
  // so a caller's loop does not spin on a GPU that keeps failing).
  std::optional<XidEvent> wait(unsigned timeout_ms);

 private:
  XidWatch() = default;
  std::unique_ptr<nvml::Binding> nvml_;
  nvml::NvmlEventSetOpaque* set_ = nullptr;
  int devices_ = 0;
};

// XIDs a user program causes (the GPU itself is fine); NVIDIA's plugin skips the same ones.
bool application_xid(unsigned long long xid);

}  // namespace gpuorch::discover
