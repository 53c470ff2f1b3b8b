#include "gpuorch/launch/rendezvous_conf.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <system_error>

#include "gpuorch/base/error.hpp"

namespace gpuorch::launch {
namespace {

// The whole of `text` as a number (no sign games: from_chars takes no '+', no spaces).
bool parse_double(const std::string& text, double& v) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  return ec == std::errc{} && end == text.data() + text.size() && !text.empty();
}

}  // namespace

std::chrono::milliseconds checked_seconds(const std::string& what, double seconds, double min,
                                          double max) {
  if (!std::isfinite(seconds)) {
    base::fail_input(fmt::format("{}: not a finite number of seconds", what));
  }
  if (seconds < min || seconds > max) {
    base::fail_input(fmt::format("{}: must be between {:g} and {:g} seconds", what, min, max));
  }
  return std::chrono::milliseconds(std::llround(seconds * 1000));
}

void apply_rdzv_conf(const std::string& conf, RendezvousConfig& r) {
  std::size_t start = 0;
  while (start < conf.size()) {
    auto end = conf.find(',', start);
    if (end == std::string::npos) end = conf.size();
    const std::string item = conf.substr(start, end - start);
    start = end + 1;
    if (item.empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string::npos) {
      base::fail_input(fmt::format("--rdzv-conf {}: expected KEY=VALUE", item));
    }
    const std::string k = item.substr(0, eq);
    const std::string v = item.substr(eq + 1);
    const std::string what = fmt::format("--rdzv-conf {}", item);
    const bool lease = k == "lease_ttl" || k == "keep_alive_ttl";
    if (!lease && k != "join_timeout" && k != "last_call_timeout" && k != "timeout" &&
        k != "connect_timeout") {
      base::fail_input(fmt::format(
          "--rdzv-conf {}: unknown key (join_timeout, last_call_timeout, timeout, lease_ttl)", k));
    }
    double seconds = 0;
    if (!parse_double(v, seconds)) {
      base::fail_input(fmt::format("{}: not a number of seconds", what));
    }
    if (lease) {
      const auto ms = checked_seconds(what, seconds, 0, kMaxLeaseSeconds);
      r.lease_ttl_s = std::max(1, static_cast<int>(ms.count() / 1000));  // etcd's least TTL
    } else {
      const auto ms = checked_seconds(what, seconds, 0, kMaxRendezvousSeconds);
      if (k == "join_timeout") {
        r.join_timeout = ms;
      } else if (k == "last_call_timeout") {
        r.last_call_timeout = ms;
      } else {
        r.connect_timeout = ms;
      }
    }
  }
}

}  // namespace gpuorch::launch
