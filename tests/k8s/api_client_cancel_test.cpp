// ApiClientOptions::cancel: a stopping process (SIGTERM) ends a call the server never answers
// at once instead of after the request timeout (issue 30: SIGTERM during a slow list waited
// the client's 30 s), and refuses new calls.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "gpuorch/k8s/api/api_client.hpp"
#include "k8s/fake_api_server.hpp"

namespace gpuorch::k8s {
namespace {

using namespace std::chrono_literals;

TEST(ApiClientCancel, ACallInFlightEndsWhenCancelledAndNewOnesFailAtOnce) {
  test::FakeApiServer server;
  server.http().Get("/api/v1/pods", [&](const httplib::Request&, httplib::Response& res) {
    // A list that never answers (until teardown).
    for (int i = 0; i < 12000 && !server.stopping(); ++i) std::this_thread::sleep_for(5ms);
    res.status = 504;
  });
  server.start();
  std::atomic<bool> cancel{false};
  ApiClientOptions options;
  options.cancel = &cancel;
  options.request_timeout = std::chrono::seconds(60);  // far beyond the test's patience
  ApiClient api(server.config(), options);
  std::jthread canceller([&] {
    std::this_thread::sleep_for(300ms);
    cancel = true;
  });
  bool cancelled = false;
  try {
    api.get("/api/v1/pods");
  } catch (const ApiCancelled& e) {
    cancelled = std::string(e.what()).find("cancelled") != std::string::npos;
  }
  EXPECT_TRUE(cancelled);
  EXPECT_THROW(api.get("/api/v1/nodes"), ApiCancelled);
}

}  // namespace
}  // namespace gpuorch::k8s
