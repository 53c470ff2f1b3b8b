// gpuorch bench <collective>: an nccl-tests-compatible collective benchmark (flags, table, footer).
#include "gpuorch/comm/bench.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <memory>
#include <string>

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
  int gpus = 1, iters = 20, warmup = 1, check = 1, root = 0, blocking = 0;
  std::string type = "float", op = "sum";
  bool json = false;
  std::string nccl_library = "libnccl.so.2";
};

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
  o.gpus = f.gpus;
  o.iters = f.iters;
  o.warmup = f.warmup;
  o.check = f.check;
  o.root = f.root;
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
  if (o.backend == "host") return run_host_bench(o, h);
  // Under a launcher only rank 0 prints (as nccl-tests under MPI); every rank reports errors.
  BenchPrinter print(o, comm::reporting_process());
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
  cmd->add_option("collective", flags->collective, "Collective to measure")->required();
  cmd->add_option("--backend", flags->backend,
                  "gpu (NCCL + CUDA driver, loaded at run time) or host (Gloo over TCP)");
  cmd->add_option("-b,--minbytes", flags->min_bytes, "Smallest size (K/M/G suffixes)");
  cmd->add_option("-e,--maxbytes", flags->max_bytes, "Largest size (K/M/G suffixes)");
  cmd->add_option("-i,--stepbytes", flags->step_bytes, "Fixed size increment");
  cmd->add_option("-f,--stepfactor", flags->step_factor, "Multiplicative size step");
  cmd->add_option("-g,--ngpus", flags->gpus, "GPUs driven by this process");
  cmd->add_option("-n,--iters", flags->iters, "Timed iterations");
  cmd->add_option("-w,--warmup_iters", flags->warmup, "Untimed warm-up iterations");
  cmd->add_option("-c,--check", flags->check, "Correctness iterations (0: off, #wrong N/A)");
  cmd->add_option("-d,--datatype", flags->type, "Element type");
  cmd->add_option("-o,--op", flags->op, "Reduction: sum, prod, max, min, avg");
  cmd->add_option("-r,--root", flags->root, "Root rank for broadcast and reduce");
  cmd->add_option("-z,--blocking", flags->blocking,
                  "0: no wait; 1, 2: wait after every op; 3: at end");
  cmd->add_option("--nccl-library", flags->nccl_library, "NCCL library to dlopen (name or path)");
  cmd->add_flag("--json", flags->json, "One JSON document instead of the table");
  auto host = std::make_shared<HostFlags>();
  add_host_flags(cmd, *host);
  cmd->callback([flags, host, &action] { action = [flags, host] { return run(*flags, *host); }; });
}

}  // namespace gpuorch::cli
