#pragma once
// Calendar times in UTC as Unix seconds, for the traces' timestamps and the Kubernetes API's.
#include <cstdint>
#include <string>

namespace gpuorch::base {

// Seconds since 1970-01-01T00:00:00Z of the given UTC date and time; -1 when a field is out of
// range (month 1..12, day 1..31, hour 0..23, minute 0..59, second 0..60).
std::int64_t utc_seconds(int year, int month, int day, int hour, int minute, int second);

// Now, as the Kubernetes API writes times: "2026-12-04T07:28:05Z".
std::string utc_now_rfc3339();

}  // namespace gpuorch::base
