#include "gpuorch/comm/nccl_tests_json.hpp"

#include <fmt/format.h>

#include <cstdio>

namespace gpuorch::comm {
namespace {

using Json = nlohmann::ordered_json;

// nccl-tests writes booleans as strings.
Json flag(bool v) { return v ? "true" : "false"; }

Json timing(const Timing& t) {
  Json j;
  j["time"] = t.time_us;
  j["alg_bw"] = t.algbw;
  j["bus_bw"] = t.busbw;
  j["nwrong"] = t.wrong < 0 ? Json(nullptr) : Json(static_cast<double>(t.wrong));
  return j;
}

}  // namespace

Json device_json(int rank, const std::string& line) {
  int pid = 0, device = 0, used = 0;
  char host[256] = {}, hex[128] = {};
  Json j;
  j["rank"] = rank;
  j["group"] = 0;
  if (std::sscanf(line.c_str(), "Pid %d on %255s device %d [%127[^]]] %n", &pid, host, &device, hex,
                  &used) < 4) {
    j["device_info"] = line;  // not a device line gpuorch wrote: kept whole
    return j;
  }
  j["pid"] = pid;
  j["hostname"] = host;
  j["device"] = device;
  j["device_hex"] = hex;
  j["device_info"] = line.substr(static_cast<std::size_t>(used));
  return j;
}

Json nccl_tests_json(const Options& o, const RunInfo& info, const std::vector<Row>& rows,
                     const JsonRun& run) {
  Json j;
  j["version"] = 2;
  j["start_time"] = run.start_time;
  j["args"] = run.args;
  j["env"] = run.env;
  j["nccl_version"] = info.nccl_version;
  Json& c = j["config"];
  c["nthreads"] = o.threads;
  c["ngpus"] = o.gpus / o.threads;
  c["minimum_bytes"] = o.min_bytes;
  c["maximum_bytes"] = o.max_bytes;
  if (o.step_factor > 1.0) {
    // nccl-tests' factor is a whole number; a fractional one (gpuorch only) stays a fraction.
    const auto whole = static_cast<long long>(o.step_factor);
    c["step_factor"] =
        static_cast<double>(whole) == o.step_factor ? Json(whole) : Json(o.step_factor);
  } else {
    c["step_bytes"] = o.step_bytes;
  }
  c["warmup_iters"] = o.warmup;
  c["iterations"] = o.iters;
  c["aggregated_iterations"] = o.agg_iters;
  c["validation"] = o.check;
  c["graph"] = 0;
  c["blocking_collectives"] = flag(o.blocking != 0);
  c["per_iter_timing"] = flag(false);
  c["parallel_init"] = flag(false);
  Json& devices = c["devices"] = Json::array();
  for (std::size_t r = 0; r < info.devices.size(); ++r) {
    devices.push_back(device_json(static_cast<int>(r), info.devices[r]));
  }
  Json& results = j["results"] = Json::array();
  for (const auto& r : rows) {
    Json e;
    e["size"] = r.size.bytes;
    e["count"] = r.size.count;
    e["type"] = o.type.name;
    e["redop"] = redop_column(o.collective, o.op);
    e["root"] = fmt::format("{:6}", has_root(o.collective) ? o.root : -1);
    e["out_of_place"] = timing(r.out_of_place);
    if (r.in_place) e["in_place"] = timing(*r.in_place);
    e["actual_iterations"] = o.iters;
    e["experiment_name"] = "";
    results.push_back(std::move(e));
  }
  const long long failed = failed_sizes(rows);
  j["out_of_bounds"] = Json{{"count", failed}, {"okay", flag(failed == 0)}};
  j["average_bus_bandwidth"] =
      Json{{"bandwidth", average_busbw(rows)},
           {"okay", run.min_bw > 0 ? flag(bandwidth_ok(rows, run.min_bw)) : Json("unchecked")}};
  j["errors"] = Json::array();
  j["end_time"] = run.end_time;
  return j;
}

}  // namespace gpuorch::comm
