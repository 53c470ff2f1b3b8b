#include "gpuorch/k8s/api/patient_get.hpp"

#include <fmt/format.h>

#include <thread>

namespace gpuorch::k8s {

std::optional<nlohmann::json> patient_get(ApiClient& api, const std::string& path,
                                          std::chrono::seconds patience,
                                          const std::atomic<bool>& stop, const base::LogSink& log,
                                          const std::function<void()>& on_wait) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + patience;
  auto wait = std::chrono::milliseconds(500);
  while (true) {
    if (on_wait) on_wait();
    std::string error;
    try {
      return api.get(path);
    } catch (const ApiCancelled&) {
      return std::nullopt;
    } catch (const ApiError& e) {
      if (e.status() == 401 || e.status() == 403 || e.status() == 404) throw;
      error = e.what();
    } catch (const std::exception& e) {
      error = e.what();  // no connection, a dropped one, an answer that is not JSON
    }
    if (Clock::now() + wait > deadline) {
      throw std::runtime_error(
          fmt::format("GET {} failed for {} s, giving up: {}", path, patience.count(), error));
    }
    if (log) {
      log(base::Severity::kWarning,
          fmt::format("GET {}: {}; trying again in {} ms", path, error, wait.count()),
          base::SourceLocation::current());
    }
    for (const auto until = Clock::now() + wait; Clock::now() < until;) {
      if (stop.load()) return std::nullopt;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    wait = std::min(wait * 2, std::chrono::milliseconds(5000));
  }
}

}  // namespace gpuorch::k8s
