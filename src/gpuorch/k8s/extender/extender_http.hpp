#pragma once
// `gpuorch extender`'s HTTP side on a cpp-httplib server: POST /filter, /prioritize, /bind
// (ExtenderService::call), GET /healthz, /readyz (200 once the cache has synced) and /metrics,
// with the limits an ExtenderArgs needs (docs/extender.md, "Hardening"). Shared by the command
// and by bench/extender_latency, so the benchmark measures the server users run.
#include <httplib.h>

#include <string>

#include "gpuorch/k8s/extender/extender_auth.hpp"
#include "gpuorch/k8s/extender/extender_service.hpp"

namespace gpuorch::k8s {

// Adds the routes, applies the limits and binds address:port (port 0: any free port); returns
// the bound port, or -1 when it cannot be bound. The caller runs `listen_after_bind`. `auth`,
// when given (and configured), must outlive the server: the verbs then need its credentials.
int bind_extender_http(httplib::Server& http, ExtenderService& service, const std::string& address,
                       int port, ExtenderAuth* auth = nullptr);

}  // namespace gpuorch::k8s
