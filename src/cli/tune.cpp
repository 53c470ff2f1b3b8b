// gpuorch tune nccl: NCCL_ALGO x NCCL_PROTO over message sizes on the local GPUs, each setting in a
// fresh `gpuorch bench --json` child (NCCL reads them when the communicator is created), repeated
// to measure the noise; the env file for `gpuorch launch --env-file` and the calibration file.
#include "gpuorch/comm/tune.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>

#include "cli/verbs.hpp"
#include "gpuorch/base/atomic_file.hpp"
#include "gpuorch/base/child_process.hpp"
#include "gpuorch/base/error.hpp"
#include "gpuorch/base/utc_time.hpp"
#include "gpuorch/comm/bench.hpp"
#include "gpuorch/comm/calibration.hpp"
#include "gpuorch/comm/gpu_backend.hpp"
#include "gpuorch/discover/discover.hpp"

namespace gpuorch::cli {
namespace {

struct TuneFlags {
  std::string min_bytes = "64K", max_bytes = "1G";
  double step_factor = 4;
  int gpus = 0;  // 0: every GPU
  int iters = 20, warmup = 5, repeats = 3;
  std::string collectives = "all_reduce";
  std::string algos = "Ring,Tree", protos = "LL,LL128,Simple";
  std::string output, calibration, nccl_library = "libnccl.so.2";
  double child_timeout_s = 120;
  bool json = false;
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string part; std::getline(in, part, ',');) {
    if (!part.empty()) out.push_back(part);
  }
  return out;
}

std::string self_path() {
  std::error_code ec;
  const auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw std::runtime_error("cannot find this program (/proc/self/exe)");
  return p.string();
}

struct Runner {
  explicit Runner(const TuneFlags& flags) : f(flags) {}
  const TuneFlags& f;
  std::string self = self_path();
  std::string library;  // from the children's JSON

  // One `gpuorch bench --json` child; the parsed document, or the child's first error line.
  nlohmann::json bench(const std::string& collective, const std::vector<std::string>& sizes,
                       int gpus, const std::vector<std::pair<std::string, std::string>>& env,
                       std::string& failure) {
    std::vector<std::string> argv{self, "bench", collective};
    argv.insert(argv.end(), sizes.begin(), sizes.end());
    for (const std::string& a :
         {std::string("-g"), std::to_string(gpus), std::string("-n"), std::to_string(f.iters),
          std::string("-w"), std::to_string(f.warmup), std::string("-c"), std::string("0"),
          std::string("--nccl-library"), f.nccl_library, std::string("--json")}) {
      argv.push_back(a);
    }
    auto set = env;
    set.emplace_back("NCCL_NVLS_ENABLE", "0");
    // An inherited setting must not leak into NCCL's default, nor a launcher's rank variables
    // turn the child into one rank of a job.
    const std::vector<std::string> unset{"NCCL_ALGO",
                                         "NCCL_PROTO",
                                         "RANK",
                                         "WORLD_SIZE",
                                         "OMPI_COMM_WORLD_RANK",
                                         "OMPI_COMM_WORLD_SIZE",
                                         "PMI_RANK",
                                         "PMI_SIZE",
                                         "SLURM_PROCID",
                                         "SLURM_NTASKS"};
    const auto r = base::run_child(
        argv, set, unset, std::chrono::milliseconds(std::llround(f.child_timeout_s * 1000)));
    if (r.timed_out) {
      failure = fmt::format("no result within {:g} s", f.child_timeout_s);
      return nullptr;
    }
    if (r.code != 0) {
      const std::string line = r.err.substr(0, r.err.find('\n'));
      failure = line.empty() ? fmt::format("exit code {}", r.code) : line;
      return nullptr;
    }
    try {
      auto j = nlohmann::json::parse(r.out);
      if (library.empty()) library = j.value("library", "");
      return j;
    } catch (const std::exception& e) {
      failure = fmt::format("unreadable output: {}", e.what());
      return nullptr;
    }
  }
};

const std::vector<std::string> kAlgos{"Ring", "Tree", "CollnetDirect", "CollnetChain", "PAT"};
const std::vector<std::string> kProtos{"LL", "LL128", "Simple"};

void validate(const TuneFlags& f, std::vector<std::string>& colls, std::vector<std::string>& algos,
              std::vector<std::string>& protos) {
  const auto lo = comm::parse_size(f.min_bytes, "-b");
  const auto hi = comm::parse_size(f.max_bytes, "-e");
  if (lo > hi)
    base::fail_input(fmt::format("-b {} is larger than -e {}: sizes out of order", lo, hi));
  if (!(f.step_factor > 1) || !std::isfinite(f.step_factor))
    base::fail_input("-f must be more than 1");
  if (f.gpus < 0 || f.gpus > 1024) base::fail_input("-g must be between 1 and 1024 (0: every GPU)");
  if (f.iters < 1) base::fail_input("-n must be at least 1");
  if (f.warmup < 0) base::fail_input("-w must be 0 or more");
  if (f.repeats < 2 || f.repeats > 50) {
    base::fail_input("--repeats must be between 2 and 50 (the spread of repeats is the noise)");
  }
  if (!(f.child_timeout_s > 0) || f.child_timeout_s > 86400) {
    base::fail_input("--child-timeout must be between 0 and 86400 seconds");
  }
  colls = split(f.collectives);
  if (colls.empty()) base::fail_input("--collectives: none given");
  for (const auto& c : colls) {
    if (!comm::parse_collective(c) || c == "sendrecv" || c == "alltoall") {
      base::fail_input(fmt::format(
          "--collectives {}: one of all_reduce, all_gather, reduce_scatter, broadcast, reduce", c));
    }
  }
  algos = split(f.algos);
  for (const auto& a : algos) {
    if (a == "NVLS" || a == "NVLSTree") {
      base::fail_input(
          fmt::format("--algos {}: NVLink multicast stays off (NCCL_NVLS_ENABLE=0)", a));
    }
    if (std::find(kAlgos.begin(), kAlgos.end(), a) == kAlgos.end()) {
      base::fail_input(fmt::format("--algos {}: one of {}", a, fmt::join(kAlgos, ", ")));
    }
  }
  protos = split(f.protos);
  for (const auto& p : protos) {
    if (std::find(kProtos.begin(), kProtos.end(), p) == kProtos.end()) {
      base::fail_input(fmt::format("--protos {}: one of {}", p, fmt::join(kProtos, ", ")));
    }
  }
  if (algos.empty() || protos.empty()) base::fail_input("--algos and --protos need one value each");
}

std::vector<std::string> size_args(const TuneFlags& f) {
  return {"-b", f.min_bytes, "-e", f.max_bytes, "-f", fmt::format("{:g}", f.step_factor)};
}

// Bandwidth and latency per GPU-to-GPU path type (one pair of each), and NCCL's P2P-off path
// (through host memory) on the first pair.
std::vector<comm::PathFigures> measure_paths(Runner& run, const topology::Host& host, int gpus) {
  std::vector<comm::PathFigures> out;
  std::vector<std::string> seen;
  const std::vector<std::string> sizes{"-b", "8", "-e", run.f.max_bytes, "-f", "8"};
  for (int a = 0; a < gpus; ++a) {
    for (int b = a + 1; b < gpus; ++b) {
      const topology::Link* l = host.link(static_cast<std::size_t>(a), static_cast<std::size_t>(b));
      if (l == nullptr) continue;
      const std::string type = comm::path_type(l->path);
      const bool first_pair = out.empty();
      if (std::find(seen.begin(), seen.end(), type) != seen.end() && !first_pair) continue;
      seen.push_back(type);
      const auto& ga = host.gpus[static_cast<std::size_t>(a)];
      const auto& gb = host.gpus[static_cast<std::size_t>(b)];
      const std::vector<std::pair<std::string, std::string>> pin{
          {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"},
          {"CUDA_VISIBLE_DEVICES",
           ga.uuid.empty() ? fmt::format("{},{}", a, b) : fmt::format("{},{}", ga.uuid, gb.uuid)}};
      std::string failure;
      const auto j = run.bench("sendrecv", sizes, 2, pin, failure);
      if (!j.is_null()) {
        out.push_back({type, topology::to_string(l->path, l->nvlinks), a, b, "",
                       comm::figures_from_bench(j)});
      } else {
        fmt::print(stderr, "gpuorch tune: path GPU{}-GPU{} not measured: {}\n", a, b, failure);
      }
      if (first_pair) {
        auto forced = pin;
        forced.emplace_back("NCCL_P2P_DISABLE", "1");
        const auto h = run.bench("sendrecv", sizes, 2, forced, failure);
        if (!h.is_null()) {
          out.push_back({"via_host_memory", topology::to_string(l->pcie), a, b,
                         "NCCL_P2P_DISABLE=1", comm::figures_from_bench(h)});
        }
      }
    }
  }
  return out;
}

int run_tune(const TuneFlags& f, const std::string& command_line) {
  std::vector<std::string> colls, algos, protos;
  validate(f, colls, algos, protos);
  discover::Options d;
  const topology::Host host = discover::discover_host(d).host;
  const int present = static_cast<int>(host.gpus.size());
  const int gpus = f.gpus > 0 ? f.gpus : present;
  if (gpus == 0) {
    fmt::print(stderr, "gpuorch tune: no NVIDIA GPU found (NVML); pass -g N to try anyway\n");
    return 1;
  }
  Runner run(f);
  const auto settings = comm::settings_to_sweep(algos, protos, true);
  std::vector<comm::TuneResult> results;
  std::vector<comm::CollectiveFigures> coll_figures;
  for (const auto& c : colls) {
    std::vector<comm::TuneSample> samples;
    std::vector<std::string> failed(settings.size());
    // Repeats outermost: a drift over the run then spreads over every setting alike.
    for (int rep = 0; rep < f.repeats; ++rep) {
      for (std::size_t s = 0; s < settings.size(); ++s) {
        if (!failed[s].empty()) continue;
        std::vector<std::pair<std::string, std::string>> env;
        if (!settings[s].algo.empty()) env.emplace_back("NCCL_ALGO", settings[s].algo);
        if (!settings[s].proto.empty()) env.emplace_back("NCCL_PROTO", settings[s].proto);
        const auto j = run.bench(c, size_args(f), gpus, env, failed[s]);
        if (j.is_null()) {
          if (s == 0) {
            fmt::print(stderr, "gpuorch tune: {} with NCCL's default failed: {}\n", c, failed[0]);
            return 1;
          }
          continue;
        }
        if (s == 0 && rep == 0) {
          coll_figures.push_back({c, gpus, comm::figures_from_bench(j), {}});
        }
        for (const auto& r : j.at("results")) {
          const auto& o = r.at("out_of_place");
          samples.push_back({s, rep, r.at("size_bytes").get<std::size_t>(),
                             o.at("busbw_gbps").get<double>(), o.at("time_us").get<double>()});
        }
      }
    }
    results.push_back(comm::analyze_tuning(c, settings, failed, samples));
    coll_figures.back().settings = comm::setting_curves(settings, failed, samples);
  }
  const std::string header =
      fmt::format("gpuorch tune nccl on {} ({} GPUs, {}), {} UTC: {}", host.hostname, gpus,
                  run.library, base::utc_now_rfc3339(), command_line);
  const std::string env_text = comm::tune_env_file(results, header);
  if (!f.output.empty()) base::write_file_atomically(f.output, env_text);
  nlohmann::ordered_json calibration;
  if (!f.calibration.empty()) {
    const auto paths =
        gpus >= 2 ? measure_paths(run, host, gpus) : std::vector<comm::PathFigures>{};
    calibration = comm::calibration_json(
        {host.hostname, run.library, base::utc_now_rfc3339(), command_line}, paths, coll_figures);
    base::write_file_atomically(f.calibration, calibration.dump(2) + "\n");
  }
  if (f.json) {
    nlohmann::ordered_json j;
    j["host"] = host.hostname;
    j["gpus"] = gpus;
    j["library"] = run.library;
    j["repeats"] = f.repeats;
    auto& arr = j["results"] = nlohmann::ordered_json::array();
    for (const auto& r : results) arr.push_back(comm::tune_json(r));
    j["env_file"] = env_text;
    if (!calibration.is_null()) j["calibration"] = calibration;
    fmt::print("{}\n", j.dump(2));
  } else {
    fmt::print("# gpuorch tune nccl: {} GPUs, {}, {} repeats per setting, NCCL_NVLS_ENABLE=0\n",
               gpus, run.library, f.repeats);
    for (const auto& r : results) fmt::print("{}", comm::tune_table(r));
    fmt::print("# env file{}:\n{}", f.output.empty() ? "" : " (" + f.output + ")", env_text);
    if (!calibration.is_null()) {
      fmt::print("# calibration file: {}\n", f.calibration);
      for (const auto& p : calibration["paths"]) {
        fmt::print("#   path {:<16} {:<5} {:8.2f} GB/s  {:8.2f} us\n", p["type"].get<std::string>(),
                   p["link"].get<std::string>(), p["bandwidth_gbps"].get<double>(),
                   p["latency_us"].get<double>());
      }
    }
  }
  return 0;
}

}  // namespace

void add_tune(CLI::App& app, Action& action) {
  CLI::App* tune = app.add_subcommand("tune", "Tune a communication library on this host");
  tune->require_subcommand(1);
  auto f = std::make_shared<TuneFlags>();
  CLI::App* cmd = tune->add_subcommand(
      "nccl",
      "Sweep NCCL_ALGO x NCCL_PROTO over message sizes on the local GPUs against NCCL's default; "
      "write an env file and a calibration file");
  cmd->add_option("-b,--minbytes", f->min_bytes, "Smallest size (K/M/G suffixes)");
  cmd->add_option("-e,--maxbytes", f->max_bytes, "Largest size");
  cmd->add_option("-f,--stepfactor", f->step_factor, "Multiplicative size step");
  cmd->add_option("-g,--ngpus", f->gpus, "GPUs (default: every GPU of the host)");
  cmd->add_option("-n,--iters", f->iters, "Timed iterations per size");
  cmd->add_option("-w,--warmup_iters", f->warmup, "Untimed warm-up iterations per size");
  cmd->add_option("--repeats", f->repeats, "Runs per setting; their spread is the noise");
  cmd->add_option("--collectives", f->collectives, "Comma list (default all_reduce)");
  cmd->add_option("--algos", f->algos, "NCCL_ALGO values to try (default Ring,Tree)");
  cmd->add_option("--protos", f->protos, "NCCL_PROTO values to try (default LL,LL128,Simple)");
  cmd->add_option("--output", f->output, "Env file (KEY=VALUE) for gpuorch launch --env-file");
  cmd->add_option("--calibration", f->calibration,
                  "Calibration JSON: bandwidth and latency per GPU path type and collective");
  cmd->add_option("--nccl-library", f->nccl_library, "NCCL to dlopen (name or path)");
  cmd->add_option("--child-timeout", f->child_timeout_s,
                  "Seconds before one measurement is given up (default 120)");
  cmd->add_flag("--json", f->json, "One JSON document instead of the table");
  cmd->callback([f, cmd, &action] {
    // The command as given, for the files' provenance.
    std::string line = "gpuorch tune nccl";
    for (const auto* opt : cmd->get_options()) {
      if (opt->count() == 0 || opt->get_name() == "--help") continue;
      line += " " + opt->get_name();
      if (opt->get_type_size() == 0) continue;  // a flag
      for (const auto& r : opt->results()) line += " " + r;
    }
    action = [f, line] { return run_tune(*f, line); };
  });
}

}  // namespace gpuorch::cli
