// The one table of policy names.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <map>
#include <span>

#include "gpuorch/base/error.hpp"
#include "gpuorch/sched/policies/policies.hpp"

namespace gpuorch::sched {
namespace {

struct Entry {
  std::string_view name;
  std::string_view study_label;
  std::unique_ptr<Policy> (*make)(const PolicyContext&);
  bool needs_fragmentation;
  std::span<const std::string_view> options = {};  // tuning options the spec may set
};

constexpr std::array kPolicies{
    Entry{"random", "01-Random", make_random_policy, false},
    Entry{"dot-product", "02-DotProd", make_dot_product_policy, false},
    Entry{"gpu-clustering", "03-GpuClustering", make_gpu_clustering_policy, false},
    Entry{"gpu-packing", "04-GpuPacking", make_gpu_packing_policy, false},
    Entry{"best-fit", "05-BestFit", make_best_fit_policy, false},
    Entry{"fgd", "06-FGD", make_fgd_policy, true},
    Entry{"efd", "", make_efd_policy, false, kEfdOptions},
    Entry{"efd-online", "", make_efd_online_policy, false, kEfdOptions},
    // The rules of replica gangs (sched/replica_gang.hpp): spreading and packing by free GPUs.
    Entry{"most-free", "", make_most_free_policy, false},
    Entry{"tightest-fit", "", make_tightest_fit_policy, false},
};

}  // namespace

std::vector<std::string> policy_names() {
  std::vector<std::string> names;
  for (const auto& e : kPolicies) names.emplace_back(e.name);
  return names;
}

std::string_view study_label(std::string_view name) {
  for (const auto& e : kPolicies) {
    if (e.name == name) return e.study_label;
  }
  return {};
}

std::string_view canonical_policy_name(std::string_view name) {
  return name == kDefaultPolicyAlias ? kDefaultPolicy : name;
}

namespace {

struct ParsedSpec {
  const Entry* entry = nullptr;
  std::map<std::string, double> options;
};

ParsedSpec parse_spec(std::string_view spec) {
  ParsedSpec out;
  const std::size_t colon = spec.find(':');
  const std::string_view name = canonical_policy_name(spec.substr(0, colon));
  for (const auto& e : kPolicies) {
    if (e.name == name) out.entry = &e;
  }
  if (out.entry == nullptr) {
    base::fail_input(
        fmt::format("unknown policy '{}' (known: {})", name, fmt::join(policy_names(), ", ")));
  }
  std::string_view rest = colon == std::string_view::npos ? "" : spec.substr(colon + 1);
  while (!rest.empty()) {
    const std::size_t next = rest.find(':');
    const std::string_view option = rest.substr(0, next);
    rest = next == std::string_view::npos ? "" : rest.substr(next + 1);
    const std::size_t eq = option.find('=');
    const std::string key(option.substr(0, eq));
    const auto& allowed = out.entry->options;
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      base::fail_input(fmt::format("policy '{}' has no option '{}'{}", name, key,
                                   allowed.empty()
                                       ? std::string()
                                       : fmt::format(" (options: {})", fmt::join(allowed, ", "))));
    }
    double value = 0;
    const std::string_view text = eq == std::string_view::npos ? "" : option.substr(eq + 1);
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() || value < 0) {
      base::fail_input(fmt::format("policy '{}': option '{}' needs a non-negative number, got '{}'",
                                   name, key, text));
    }
    out.options[key] = value;
  }
  return out;
}

}  // namespace

void check_policy_spec(std::string_view spec) { parse_spec(spec); }

std::unique_ptr<Policy> make_policy(std::string_view spec, const PolicyContext& context) {
  const ParsedSpec parsed = parse_spec(spec);
  if (parsed.entry->needs_fragmentation && context.fragmentation == nullptr) {
    base::fail_input(fmt::format("policy '{}' needs a target workload", parsed.entry->name));
  }
  PolicyContext with_options = context;
  with_options.options = &parsed.options;
  return parsed.entry->make(with_options);
}

}  // namespace gpuorch::sched
