// The recording of `gpuorch doctor utilisation --record FILE`, read back by `--replay FILE`:
//
//   {"format": "gpuorch.doctor-utilisation/v1", "clock_ticks_per_second": 100, "cpus": 16,
//    "gpus": [{"index": 0, "minor": 0, "name": "NVIDIA H200", "memory_total_mib": 143771}],
//    "samples": [{"t": 0.0, "cpu_total": 81234, "cpu_idle": 70000,
//                 "gpus": [{"index": 0, "sm_util": 35, "memory_used_mib": 5120,
//                           "pcie_rx_mbps": 120.5, "pcie_tx_mbps": 3.1}],
//                 "processes": [{"pid": 4242, "ppid": 1, "command": "python3", "gpus": [0],
//                                "threads": [[4242, 1234], [4243, 5]]}]}]}
//
// Raw counters, not rates: the analysis computes the rates, so a hand-written fixture and a
// recorded host go through the same arithmetic. GPU fields NVML did not give are left out.
#include <fmt/format.h>

#include <cmath>

#include "gpuorch/base/error.hpp"
#include "gpuorch/base/read_file.hpp"
#include "gpuorch/doctor/utilisation.hpp"

namespace gpuorch::doctor {
namespace {

using Json = nlohmann::json;
constexpr const char* kFormat = "gpuorch.doctor-utilisation/v1";

// A bound as people write it: 100, not 100.0.
std::string bound(double v) {
  return v == std::floor(v) && std::fabs(v) < 1e15 ? fmt::format("{}", static_cast<std::int64_t>(v))
                                                   : fmt::format("{}", v);
}

// Reads one file; every complaint is "FILE: where: what".
class Reader {
 public:
  explicit Reader(std::string file) : file_(std::move(file)) {}

  [[noreturn]] void fail(const std::string& where, const std::string& what) const {
    base::fail_input(file_, 0, where.empty() ? what : where + ": " + what);
  }

  const Json& at(const Json& obj, const char* key, const std::string& where) const {
    if (!obj.is_object()) fail(where, "must be an object");
    if (!obj.contains(key)) fail(where, fmt::format("missing '{}'", key));
    return obj.at(key);
  }

  const Json& list(const Json& obj, const char* key, const std::string& where,
                   std::size_t max) const {
    const Json& v = at(obj, key, where);
    if (!v.is_array() || v.size() > max) {
      fail(where, fmt::format("'{}' must be a list of at most {}", key, max));
    }
    return v;
  }

  double number(const Json& obj, const char* key, const std::string& where, double lo,
                double hi) const {
    const Json& v = at(obj, key, where);
    if (!v.is_number() || v.get<double>() < lo || v.get<double>() > hi) {
      fail(where, fmt::format("'{}' must be a number in [{}, {}]", key, bound(lo), bound(hi)));
    }
    return v.get<double>();
  }

  std::int64_t integer_value(const Json& v, const std::string& what, const std::string& where,
                             std::int64_t lo, std::int64_t hi) const {
    if (!v.is_number_integer() || v.get<std::int64_t>() < lo || v.get<std::int64_t>() > hi) {
      fail(where, fmt::format("{} must be an integer in [{}, {}]", what, lo, hi));
    }
    return v.get<std::int64_t>();
  }

  std::int64_t integer(const Json& obj, const char* key, const std::string& where, std::int64_t lo,
                       std::int64_t hi) const {
    return integer_value(at(obj, key, where), fmt::format("'{}'", key), where, lo, hi);
  }

  std::optional<double> optional(const Json& obj, const char* key, const std::string& where,
                                 double hi) const {
    if (!obj.contains(key)) return std::nullopt;
    return number(obj, key, where, 0, hi);
  }

  std::string text(const Json& obj, const char* key, const std::string& where) const {
    const Json& v = at(obj, key, where);
    if (!v.is_string()) fail(where, fmt::format("'{}' must be a string", key));
    return v.get<std::string>();
  }

 private:
  std::string file_;
};

constexpr std::int64_t kMaxPid = 1 << 22;  // PID_MAX_LIMIT
constexpr double kMaxMib = 1 << 30;
constexpr double kMaxMbps = 1e7;

UtilProcess read_process(const Reader& in, const Json& p, const std::string& where) {
  UtilProcess out;
  out.pid = static_cast<int>(in.integer(p, "pid", where, 1, kMaxPid));
  out.ppid = static_cast<int>(in.integer(p, "ppid", where, 0, kMaxPid));
  out.command = in.text(p, "command", where);
  for (const Json& m : in.list(p, "gpus", where, 64)) {
    out.gpu_minors.push_back(
        static_cast<int>(in.integer_value(m, "a GPU minor", where, 0, 1 << 20)));
  }
  for (const Json& t : in.list(p, "threads", where, 1 << 16)) {
    if (!t.is_array() || t.size() != 2) in.fail(where, "each thread must be [tid, ticks]");
    const auto tid = static_cast<int>(in.integer_value(t[0], "a thread id", where, 1, kMaxPid));
    out.thread_ticks[tid] = static_cast<std::uint64_t>(
        in.integer_value(t[1], "a thread's ticks", where, 0, std::int64_t{1} << 53));
  }
  return out;
}

UtilSnapshot read_snapshot(const Reader& in, const Json& s, const std::string& where,
                           double previous_t) {
  UtilSnapshot out;
  out.t = in.number(s, "t", where, previous_t, 1e7);
  constexpr std::int64_t kMaxTicks = std::int64_t{1} << 53;
  out.cpu_total = static_cast<std::uint64_t>(in.integer(s, "cpu_total", where, 0, kMaxTicks));
  out.cpu_idle = static_cast<std::uint64_t>(in.integer(s, "cpu_idle", where, 0, kMaxTicks));
  const Json& gpus = in.list(s, "gpus", where, 64);
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    const std::string w = fmt::format("{}.gpus[{}]", where, i);
    UtilGpuReading g;
    g.index = static_cast<int>(in.integer(gpus[i], "index", w, 0, 63));
    g.sm_util = in.optional(gpus[i], "sm_util", w, 100);
    g.memory_used_mib = in.optional(gpus[i], "memory_used_mib", w, kMaxMib);
    g.pcie_rx_mbps = in.optional(gpus[i], "pcie_rx_mbps", w, kMaxMbps);
    g.pcie_tx_mbps = in.optional(gpus[i], "pcie_tx_mbps", w, kMaxMbps);
    out.gpus.push_back(g);
  }
  const Json& procs = in.list(s, "processes", where, 4096);
  for (std::size_t i = 0; i < procs.size(); ++i) {
    out.processes.push_back(read_process(in, procs[i], fmt::format("{}.processes[{}]", where, i)));
  }
  return out;
}

}  // namespace

nlohmann::ordered_json utilisation_json(const UtilRecording& r) {
  using OJson = nlohmann::ordered_json;
  OJson root;
  root["format"] = kFormat;
  root["clock_ticks_per_second"] = r.ticks_per_second;
  root["cpus"] = r.cpus;
  root["gpus"] = OJson::array();
  for (const auto& g : r.gpus) {
    OJson j{{"index", g.index}, {"minor", g.minor}, {"name", g.name}};
    if (g.memory_total_mib) j["memory_total_mib"] = *g.memory_total_mib;
    root["gpus"].push_back(std::move(j));
  }
  root["samples"] = OJson::array();
  for (const auto& s : r.snapshots) {
    OJson sj{{"t", s.t}, {"cpu_total", s.cpu_total}, {"cpu_idle", s.cpu_idle}};
    sj["gpus"] = OJson::array();
    for (const auto& g : s.gpus) {
      OJson gj{{"index", g.index}};
      auto put = [&](const char* key, const std::optional<double>& v) {
        if (v) gj[key] = *v;
      };
      put("sm_util", g.sm_util);
      put("memory_used_mib", g.memory_used_mib);
      put("pcie_rx_mbps", g.pcie_rx_mbps);
      put("pcie_tx_mbps", g.pcie_tx_mbps);
      sj["gpus"].push_back(std::move(gj));
    }
    sj["processes"] = OJson::array();
    for (const auto& p : s.processes) {
      OJson threads = OJson::array();
      for (const auto& [tid, ticks] : p.thread_ticks) threads.push_back({tid, ticks});
      sj["processes"].push_back({{"pid", p.pid},
                                 {"ppid", p.ppid},
                                 {"command", p.command},
                                 {"gpus", p.gpu_minors},
                                 {"threads", std::move(threads)}});
    }
    root["samples"].push_back(std::move(sj));
  }
  return root;
}

UtilRecording read_utilisation(const std::string& path) {
  const std::string text =
      base::read_input_file(path, "utilisation recording", base::kTraceFileMaxBytes);
  Json root;
  try {
    root = Json::parse(text);
  } catch (const Json::parse_error& e) {
    base::fail_input(path, 0, fmt::format("not JSON (byte {})", e.byte));
  } catch (const Json::exception&) {  // a number past the double range: no byte offset
    base::fail_input(path, 0, "not JSON (a number out of range)");
  }
  const Reader in(path);
  if (in.text(root, "format", "top level") != kFormat) {
    in.fail("", fmt::format("format is not '{}'", kFormat));
  }
  UtilRecording r;
  r.ticks_per_second = in.number(root, "clock_ticks_per_second", "top level", 1, 1e6);
  r.cpus = static_cast<int>(in.integer(root, "cpus", "top level", 1, 1 << 16));
  const Json& gpus = in.list(root, "gpus", "top level", 64);
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    const std::string w = fmt::format("gpus[{}]", i);
    UtilGpu g;
    g.index = static_cast<int>(in.integer(gpus[i], "index", w, 0, 63));
    g.minor = static_cast<int>(in.integer(gpus[i], "minor", w, -1, 1 << 20));
    g.name = in.text(gpus[i], "name", w);
    g.memory_total_mib = in.optional(gpus[i], "memory_total_mib", w, kMaxMib);
    r.gpus.push_back(std::move(g));
  }
  const Json& samples = in.list(root, "samples", "top level", 100000);
  if (samples.size() < 2) in.fail("samples", "at least 2 are needed to measure CPU use");
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const double previous = r.snapshots.empty() ? 0 : r.snapshots.back().t;
    r.snapshots.push_back(read_snapshot(in, samples[i], fmt::format("samples[{}]", i), previous));
  }
  return r;
}

}  // namespace gpuorch::doctor
