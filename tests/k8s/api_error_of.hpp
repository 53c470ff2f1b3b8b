#pragma once
// The ApiError a call throws, for tests that check its status and words; a test failure when it
// throws something else or nothing.
#include <gtest/gtest.h>

#include <exception>

#include "gpuorch/k8s/api/api_client.hpp"

namespace gpuorch::k8s {

template <typename F>
ApiError api_error_of(F&& f) {
  try {
    f();
  } catch (const ApiError& e) {
    return e;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected ApiError, got: " << e.what();
    return {0, "", "", ""};
  }
  ADD_FAILURE() << "nothing was thrown";
  return {0, "", "", ""};
}

}  // namespace gpuorch::k8s
