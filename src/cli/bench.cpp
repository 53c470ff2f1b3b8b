// gpuorch bench <collective>: an nccl-tests-compatible collective benchmark (flags, table, footer).
#include "gpuorch/comm/bench.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cli/bench_host.hpp"
#include "cli/bench_print.hpp"
#include "cli/verbs.hpp"
#include "gpuorch/base/error.hpp"
#include "gpuorch/comm/gpu_backend.hpp"
#include "gpuorch/comm/host_elements.hpp"
#include "gpuorch/comm/launch_env.hpp"

namespace gpuorch::cli {
namespace {

struct BenchFlags {
  std::string collective;
  std::string backend = "gpu";
  std::string min_bytes = "32M", max_bytes = "32M", step_bytes = "1M";
  double step_factor = 1.0;
  int threads = 1, gpus = 1, iters = 20, agg_iters = 1, warmup = 1, check = 1, blocking = 0;
  int average = 1;
  std::string type = "float", op = "sum", root = "0";
  std::string output_file;
  bool json = false;
  std::string nccl_library = "libnccl.so.2";
  // nccl-tests flags gpuorch takes only at their defaults (NcclTestsDefaults in the table of
  // docs/nccl-tests.md): the value given, to name it in the error.
  std::vector<std::pair<std::string, int>> fixed;
};

// An nccl-tests flag whose other values gpuorch does not implement: the default is accepted, any
// other value is one clear line and exit 2.
struct FixedFlag {
  const char* names;  // CLI11 spelling
  int default_value;
  const char* why;
};
constexpr FixedFlag kFixedFlags[] = {
    {"-N,--run_cycles", 1, "repeating the sweep is not implemented (run the command again)"},
    {"-p,--parallel_init", 0, "NCCL is initialised from one thread (ncclCommInitAll / one group)"},
    {"-y,--stream_null", 0, "gpuorch always uses its own non-blocking streams"},
    {"-G,--cudagraph", 0, "CUDA graph capture is not implemented (ops are launched directly)"},
    {"-C,--report_cputime", 0,
     "only the latency (host clock around iterations + sync) is reported"},
    {"-S,--report_timestamps", 0, "per-row timestamps are not implemented"},
    {"-R,--local_register", 0, "NCCL buffer registration is not implemented"},
    {"-x,--cta_policy", -1, "NCCL's CTA policy is not set by gpuorch"},
    {"-D,--device_implementation", 0, "only NCCL's own collectives are measured"},
    {"-V,--device_cta_count", 16, "only used by -D, which is not implemented"},
    {"-M,--memory_report", 0, "the GPU memory report is not implemented"},
    {"-I,--per_iter_timing", 0, "per-iteration CUDA-event timing is not implemented"},
    {"-K", 0, "only used by -I, which is not implemented"},
    {"-u", 0, "misaligned buffers are not implemented"},
};

int parse_root(const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || v < 0 || v > 1 << 20) {
    base::fail_input(fmt::format("-r {}: not a rank", text));
  }
  return static_cast<int>(v);
}

comm::Options to_options(const BenchFlags& f, const HostFlags& h) {
  comm::Options o;
  const auto c = comm::parse_collective(f.collective);
  if (!c) {
    base::fail_input(fmt::format("unknown collective '{}' (one of {})", f.collective,
                                 fmt::join(comm::collective_names(), ", ")));
  }
  o.collective = *c;
  if (f.backend != "gpu" && f.backend != "host") {
    base::fail_input(
        fmt::format("--backend {}: one of gpu (NCCL), host (Gloo over TCP)", f.backend));
  }
  o.backend = f.backend;
  o.min_bytes = comm::parse_size(f.min_bytes, "-b");
  o.max_bytes = comm::parse_size(f.max_bytes, "-e");
  o.step_bytes = comm::parse_size(f.step_bytes, "-i");
  o.step_factor = f.step_factor;
  for (const auto& [name, value] : f.fixed) {
    for (const auto& x : kFixedFlags) {
      if (name == x.names && value != x.default_value) {
        base::fail_input(fmt::format("{} {}: only {} is supported: {}", name.substr(0, 2), value,
                                     x.default_value, x.why));
      }
    }
  }
  for (const auto& [flag, value] :
       {std::pair{"-d", f.type}, std::pair{"-o", f.op}, std::pair{"-r", f.root}}) {
    if (value == "all") {
      base::fail_input(
          fmt::format("{} all: one value per run (loop over values in the shell)", flag));
    }
  }
  if (f.threads < 1 || f.threads > 1024) base::fail_input("-t must be between 1 and 1024");
  if (f.gpus < 1 || f.gpus > 1024) base::fail_input("-g must be between 1 and 1024");
  o.threads = f.threads;
  o.gpus = f.gpus * f.threads;  // nccl-tests' -t threads x -g GPUs: all driven by this process
  o.iters = f.iters;
  o.agg_iters = f.agg_iters;
  o.average = f.average;
  o.warmup = f.warmup;
  o.check = f.check;
  o.root = parse_root(f.root);
  o.blocking = f.blocking;
  const auto t = f.backend == "host" ? comm::host::parse_type(f.type) : comm::parse_type(f.type);
  if (!t) {
    base::fail_input(fmt::format(
        "-d {}: unknown type for --backend {} (int8, uint8, int32, uint32, int64, uint64, {}float, "
        "double)",
        f.type, f.backend, f.backend == "host" ? "half, " : ""));
  }
  o.type = *t;
  const auto op = comm::parse_op(f.op);
  if (!op) base::fail_input(fmt::format("-o {}: unknown op (sum, prod, max, min, avg)", f.op));
  o.op = *op;
  o.json = f.json;
  o.nccl_library = f.nccl_library;
  if (!(h.timeout_s >= 0) || !std::isfinite(h.timeout_s) || h.timeout_s > 86400) {
    base::fail_input("-T must be between 0 and 86400 seconds");
  }
  o.timeout_s = h.timeout_s;
  (void)min_bw_from_env();  // bad input before any rank starts
  apply_host_flags(o, h);
  if (o.backend == "gpu") {
    // One process per GPU (or per -g GPUs) under a launcher: the communicator spans them all.
    if (const auto launch = comm::detect_launch(); launch && launch->world > 1) {
      o.ranks = launch->world * o.gpus;
      (void)comm::peer_timeout_s();  // a malformed GPUORCH_PEER_TIMEOUT is bad input too
    }
  }
  comm::validate(o);
  return o;
}

int run(const BenchFlags& f, const HostFlags& h) {
  const comm::Options o = to_options(f, h);
  if (o.backend == "host") return run_host_bench(o, h, f.output_file);
  // Under a launcher only rank 0 prints (as nccl-tests under MPI); every rank reports errors.
  BenchPrinter print(o, comm::reporting_process(), f.output_file);
  std::vector<comm::Row> rows;
  try {
    rows = comm::run_gpu(
        o, [&](const comm::RunInfo& i) { print.start(i); },
        [&](const comm::Row& r) { print.row(r); });
  } catch (const comm::EnvironmentError& e) {
    fmt::print(stderr, "gpuorch bench: {}\n", e.what());
    return 1;
  }
  return print.finish(rows);
}

}  // namespace

void add_bench(CLI::App& app, Action& action) {
  auto flags = std::make_shared<BenchFlags>();
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "Measure a collective like nccl-tests (all_reduce, all_gather, reduce_scatter, "
      "broadcast, reduce, alltoall, sendrecv)");
  cmd->add_option("collective", flags->collective,
                  "Collective to measure, or nccl-tests' binary name (all_reduce_perf, ...)")
      ->required();
  cmd->add_option("--backend", flags->backend,
                  "gpu (NCCL + CUDA driver, loaded at run time) or host (Gloo over TCP)");
  // nccl-tests' flags, short and long names as its README and usage text spell them.
  cmd->add_option("-t,--nthreads", flags->threads,
                  "Threads per process in nccl-tests; here -t x -g GPUs driven by this process")
      ->capture_default_str();
  cmd->add_option("-g,--ngpus", flags->gpus, "GPUs per thread")->capture_default_str();
  cmd->add_option("-b,--minbytes", flags->min_bytes, "Smallest size (K/M/G suffixes)")
      ->capture_default_str();
  cmd->add_option("-e,--maxbytes", flags->max_bytes, "Largest size (K/M/G suffixes)")
      ->capture_default_str();
  cmd->add_option("-i,--stepbytes", flags->step_bytes, "Fixed size increment")
      ->capture_default_str();
  cmd->add_option("-f,--stepfactor", flags->step_factor, "Multiplicative size step (1: off)")
      ->capture_default_str();
  cmd->add_option("-n,--iters", flags->iters, "Timed iterations")->capture_default_str();
  cmd->add_option("-m,--agg_iters", flags->agg_iters,
                  "Ops per timed iteration (one NCCL group; the host backend runs them in turn)")
      ->capture_default_str();
  cmd->add_option("-w,--warmup_iters", flags->warmup, "Untimed warm-up iterations")
      ->capture_default_str();
  cmd->add_option("-c,--check", flags->check, "Correctness iterations (0: off, #wrong N/A)")
      ->capture_default_str();
  cmd->add_option("-d,--datatype", flags->type, "Element type")->capture_default_str();
  cmd->add_option("-o,--op", flags->op, "Reduction: sum, prod, max, min, avg")
      ->capture_default_str();
  cmd->add_option("-r,--root", flags->root, "Root rank for broadcast and reduce")
      ->capture_default_str();
  cmd->add_option("-z,--blocking", flags->blocking,
                  "0: no wait; 1, 2: wait after every op; 3: at end")
      ->capture_default_str();
  cmd->add_option("-a,--average", flags->average,
                  "Time across processes: 0 rank 0, 1 mean, 2 min, 3 max")
      ->capture_default_str();
  cmd->add_option("-J,--output_file", flags->output_file,
                  "Also write nccl-tests' JSON document (version 2) to this file (rank 0)");
  for (const auto& x : kFixedFlags) {
    const std::string name = x.names;
    cmd->add_option_function<int>(
           name, [flags, name](const int& v) { flags->fixed.emplace_back(name, v); },
           fmt::format("nccl-tests flag; only {} is supported ({})", x.default_value, x.why))
        ->group("nccl-tests flags taken at their default only");
  }
  cmd->add_option("--nccl-library", flags->nccl_library, "NCCL library to dlopen (name or path)")
      ->capture_default_str();
  cmd->add_flag("--json", flags->json, "One JSON document (gpuorch's own) instead of the table");
  auto host = std::make_shared<HostFlags>();
  add_host_flags(cmd, *host);
  cmd->callback([flags, host, &action] { action = [flags, host] { return run(*flags, *host); }; });
}

}  // namespace gpuorch::cli
