#pragma once
// Shared by the doctor tests: the ids of the problem findings (warnings and errors), sorted, so a
// test states exactly which findings a fixture must raise and which it must not.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "gpuorch/doctor/finding.hpp"
#include "support/test_support.hpp"

namespace gpuorch::test {

inline std::vector<std::string> problem_ids(const std::vector<doctor::Finding>& findings) {
  std::vector<std::string> ids;
  for (const auto& f : findings) {
    if (f.severity != doctor::Severity::kInfo) ids.push_back(f.id);
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

// A copy, so it may be taken from a temporary list.
inline std::optional<doctor::Finding> find_id(const std::vector<doctor::Finding>& findings,
                                              const std::string& id) {
  for (const auto& f : findings) {
    if (f.id == id) return f;
  }
  return std::nullopt;
}

inline std::string doctor_fixture(const std::string& rel) { return fixture("doctor/" + rel); }

}  // namespace gpuorch::test
