#pragma once
// Durations from the command line (--rdzv-conf KEY=SECONDS, --stop-grace, --monitor-interval):
// a finite number of seconds within a bound, or one clear error (exit 2). inf, nan, a negative
// or a huge value would otherwise reach a cast to milliseconds, which is undefined there.
#include <chrono>
#include <string>

#include "gpuorch/launch/rendezvous.hpp"

namespace gpuorch::launch {

// The longest wait a rendezvous key takes (30 days), and the longest lease (1 hour).
inline constexpr double kMaxRendezvousSeconds = 30.0 * 24 * 3600;
inline constexpr double kMaxLeaseSeconds = 3600;

// `seconds` as milliseconds when it is finite and in [min, max]; else base::InputError
// "WHAT: why" (`what` names the flag and value as the user wrote them).
std::chrono::milliseconds checked_seconds(const std::string& what, double seconds, double min,
                                          double max);

// "KEY=SECONDS,..." (join_timeout, last_call_timeout, timeout or connect_timeout, lease_ttl or
// keep_alive_ttl) into `r`; base::InputError naming the item for anything else.
void apply_rdzv_conf(const std::string& conf, RendezvousConfig& r);

}  // namespace gpuorch::launch
