#pragma once
// Making the real API server refuse a write, for tests of what a scheduler does then: a
// ValidatingAdmissionPolicy (and its binding) that denies `operation` on `resource` of `group`
// ("" for the core group) wherever the CEL `expression` is false, with `message`.
#include <nlohmann/json.hpp>
#include <string>

#include "gpuorch/k8s/api/api_client.hpp"

namespace gpuorch::test {

inline constexpr const char* kAdmissionPolicies =
    "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies";
inline constexpr const char* kAdmissionPolicyBindings =
    "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings";

// Removes the policy `name` and its binding; absent ones are fine.
inline void drop_denial(k8s::ApiClient& api, const std::string& name) {
  for (const std::string& path : {std::string(kAdmissionPolicyBindings) + "/" + name,
                                  std::string(kAdmissionPolicies) + "/" + name}) {
    try {
      api.remove(path);
    } catch (const k8s::ApiError&) {
    }
  }
}

// A policy loads a moment after it is created: callers probe until a write is refused.
inline void deny_unless(k8s::ApiClient& api, const std::string& name, const std::string& group,
                        const std::string& resource, const std::string& operation,
                        const std::string& expression, const std::string& message) {
  using nlohmann::json;
  drop_denial(api, name);
  api.create(
      kAdmissionPolicies,
      {{"apiVersion", "admissionregistration.k8s.io/v1"},
       {"kind", "ValidatingAdmissionPolicy"},
       {"metadata", {{"name", name}}},
       {"spec",
        {{"failurePolicy", "Fail"},
         {"matchConstraints",
          {{"resourceRules", json::array({{{"apiGroups", {group}},
                                           {"apiVersions", {"v1"}},
                                           {"operations", {operation}},
                                           {"resources", {resource}}}})}}},
         {"validations", json::array({{{"expression", expression}, {"message", message}}})}}}});
  api.create(kAdmissionPolicyBindings,
             {{"apiVersion", "admissionregistration.k8s.io/v1"},
              {"kind", "ValidatingAdmissionPolicyBinding"},
              {"metadata", {{"name", name}}},
              {"spec", {{"policyName", name}, {"validationActions", {"Deny"}}}}});
}

}  // namespace gpuorch::test
