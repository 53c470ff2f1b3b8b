#include "gpuorch/telemetry/xid_log.hpp"

#include "gpuorch/discover/xid_watch.hpp"

namespace gpuorch::telemetry {

std::shared_ptr<XidLog> XidLog::start(const std::string& nvml_library,
                                      const std::vector<std::string>& uuids, std::string& why) {
  auto w = discover::XidWatch::open(nvml_library, uuids, why);
  if (!w) return nullptr;
  std::shared_ptr<XidLog> log(new XidLog());
  log->watch_ = std::move(w);
  log->thread_ = std::thread([raw = log.get()] { raw->watch(); });
  return log;
}

XidLog::~XidLog() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
}

void XidLog::watch() {
  // Short waits, so a stop is noticed within half a second.
  while (!stopping_) {
    if (const auto e = watch_->wait(500)) {
      const std::lock_guard lock(mutex_);
      last_[e->uuid] = e->xid;
    }
  }
}

std::optional<unsigned long long> XidLog::last(const std::string& uuid) const {
  const std::lock_guard lock(mutex_);
  const auto it = last_.find(uuid);
  return it == last_.end() ? std::nullopt : std::optional(it->second);
}

}  // namespace gpuorch::telemetry
