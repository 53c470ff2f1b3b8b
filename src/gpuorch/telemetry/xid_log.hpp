#pragma once
// The last XID of each GPU, from NVML's XID events (discover::XidWatch) on a thread of its own:
// events arrive between readings, and DCGM_FI_DEV_XID_ERRORS reports the latest one.
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gpuorch/telemetry/sampler.hpp"

namespace gpuorch::discover {
class XidWatch;
}

namespace gpuorch::telemetry {

class XidLog final : public XidSource {
 public:
  // nullptr and `why` when NVML or its event API is not there.
  static std::shared_ptr<XidLog> start(const std::string& nvml_library,
                                       const std::vector<std::string>& uuids, std::string& why);
  ~XidLog() override;
  XidLog(const XidLog&) = delete;
  XidLog& operator=(const XidLog&) = delete;

  [[nodiscard]] std::optional<unsigned long long> last(const std::string& uuid) const override;

 private:
  XidLog() = default;
  void watch();

  std::unique_ptr<discover::XidWatch> watch_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  mutable std::mutex mutex_;
  std::map<std::string, unsigned long long> last_;
};

}  // namespace gpuorch::telemetry
