#pragma once
// A GET made at start-up, when the API server may be restarting (a 503, a 429, a dropped
// connection, an answer that is not JSON): tried again with backoff (0.5 s doubling to 5 s) until
// `patience` has passed, then given up with one line. An answer that no retry changes (401, 403,
// 404) is thrown at once as the ApiError, for the caller to read.
#include <atomic>
#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "gpuorch/base/log.hpp"
#include "gpuorch/k8s/api/api_client.hpp"

namespace gpuorch::k8s {

// The answer; nullopt when `stop` was set or the client cancelled meanwhile. Throws
// std::runtime_error "GET PATH failed for N s, giving up: <last error>" after `patience`.
std::optional<nlohmann::json> patient_get(ApiClient& api, const std::string& path,
                                          std::chrono::seconds patience,
                                          const std::atomic<bool>& stop,
                                          const base::LogSink& log = {},
                                          const std::function<void()>& on_wait = {});

}  // namespace gpuorch::k8s
