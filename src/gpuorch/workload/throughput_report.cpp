#include "gpuorch/workload/throughput_report.hpp"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

namespace gpuorch::workload {
namespace {

using nlohmann::json;

// Bounds that no real job reaches and that keep every derived number finite.
constexpr std::size_t kMaxText = 4096;
constexpr int kMaxRanks = 1'000'000;
constexpr int kMaxBatch = 1'000'000'000;
constexpr double kMaxSeconds = 1e6;

// The parsed object, or nullopt with `why`.
std::optional<json> object_of(std::string_view text, std::string* why) {
  if (text.size() > kMaxText) {
    if (why) *why = fmt::format("{} bytes, more than {}", text.size(), kMaxText);
    return std::nullopt;
  }
  json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    if (why) *why = "not a JSON object";
    return std::nullopt;
  }
  return doc;
}

bool whole(const json& doc, const char* key, int lo, int hi, int& out, std::string* why) {
  const auto it = doc.find(key);
  if (it == doc.end() || !it->is_number_integer()) {
    if (why) *why = fmt::format("{}: missing or not a whole number", key);
    return false;
  }
  const auto v = it->get<std::int64_t>();
  if (v < lo || v > hi) {
    if (why) *why = fmt::format("{}: {} is outside {}..{}", key, v, lo, hi);
    return false;
  }
  out = static_cast<int>(v);
  return true;
}

// `positive`: above 0; otherwise 0 is allowed. Absent and `optional`: 0.
bool seconds(const json& doc, const char* key, bool positive, bool optional, double hi, double& out,
             std::string* why) {
  const auto it = doc.find(key);
  if (it == doc.end() && optional) {
    out = 0;
    return true;
  }
  if (it == doc.end() || !it->is_number()) {
    if (why) *why = fmt::format("{}: missing or not a number", key);
    return false;
  }
  const double v = it->get<double>();
  if (!std::isfinite(v) || v < 0 || (positive && v <= 0) || v > hi) {
    if (why) *why = fmt::format("{}: {} is not in {}0..{}", key, v, positive ? "(" : "[", hi);
    return false;
  }
  out = v;
  return true;
}

}  // namespace

ThroughputReport throughput_at(const StepReport& step, int world_size, int nodes,
                               std::string time) {
  ThroughputReport r;
  r.world_size = world_size;
  r.nodes = nodes;
  r.local_batch = step.local_bsz;
  r.step_time = step.optim_step_time;
  r.sync_time = step.optim_sync_time;
  r.samples_per_second = double(world_size) * step.local_bsz / step.optim_step_time;
  r.time = std::move(time);
  return r;
}

std::string to_annotation(const ThroughputReport& r) {
  const json doc = {{"worldSize", r.world_size},
                    {"nodes", r.nodes},
                    {"localBatch", r.local_batch},
                    {"samplesPerSecond", r.samples_per_second},
                    {"stepTime", r.step_time},
                    {"syncTime", r.sync_time},
                    {"time", r.time}};
  return doc.dump();
}

std::optional<StepReport> parse_step_report(std::string_view line, std::string* why) {
  const auto doc = object_of(line, why);
  if (!doc) return std::nullopt;
  StepReport s;
  if (!whole(*doc, "local_bsz", 1, kMaxBatch, s.local_bsz, why) ||
      !seconds(*doc, "optim_step_time", true, false, kMaxSeconds, s.optim_step_time, why) ||
      !seconds(*doc, "optim_sync_time", false, true, s.optim_step_time, s.optim_sync_time, why)) {
    return std::nullopt;
  }
  return s;
}

std::optional<ThroughputReport> parse_throughput_annotation(std::string_view text,
                                                            std::string* why) {
  const auto doc = object_of(text, why);
  if (!doc) return std::nullopt;
  ThroughputReport r;
  if (!whole(*doc, "worldSize", 1, kMaxRanks, r.world_size, why) ||
      !whole(*doc, "nodes", 1, r.world_size, r.nodes, why) ||
      !whole(*doc, "localBatch", 1, kMaxBatch, r.local_batch, why) ||
      !seconds(*doc, "stepTime", true, false, kMaxSeconds, r.step_time, why) ||
      !seconds(*doc, "syncTime", false, true, r.step_time, r.sync_time, why) ||
      !seconds(*doc, "samplesPerSecond", true, false, 1e15, r.samples_per_second, why)) {
    return std::nullopt;
  }
  if (const auto t = doc->find("time"); t != doc->end() && t->is_string()) {
    r.time = t->get<std::string>().substr(0, 64);
  }
  return r;
}

}  // namespace gpuorch::workload
