#include "cli/bench_host.hpp"

#include <fmt/format.h>
#include <net/if.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "cli/bench_print.hpp"
#include "gpuorch/base/error.hpp"
#include "gpuorch/comm/host_backend.hpp"
#include "gpuorch/comm/host_launch.hpp"

namespace gpuorch::cli {
namespace {

namespace host = comm::host;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

long env_number(const char* name, long lo, long hi) {
  const std::string s = env(name);
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || errno != 0 || v < lo || v > hi) {
    base::fail_input(fmt::format("{}={}: not a number in {}..{}", name, s, lo, hi));
  }
  return v;
}

bool launcher(const HostFlags& h) {
  return h.cmd->count("--np") > 0 && env(host::kLaunchedVar).empty();
}

// This rank's place in the run, from torchrun's variables (absent: a single rank).
host::Endpoint endpoint(const HostFlags& h) {
  host::Endpoint e;
  const double seconds = h.timeout_s > 0 ? h.timeout_s : 60;
  e.timeout = std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
  e.iface = h.iface.empty() ? env("GLOO_SOCKET_IFNAME") : h.iface;
  if (env("WORLD_SIZE").empty()) return e;
  e.world = static_cast<int>(env_number("WORLD_SIZE", 1, 1 << 20));
  if (env("RANK").empty()) base::fail_input("WORLD_SIZE is set but RANK is not");
  e.rank = static_cast<int>(env_number("RANK", 0, e.world - 1));
  if (e.world > 1) {
    if (env("MASTER_ADDR").empty() || env("MASTER_PORT").empty()) {
      base::fail_input(
          "WORLD_SIZE > 1 needs MASTER_ADDR and MASTER_PORT (as torchrun sets), or use --np");
    }
    e.master_addr = env("MASTER_ADDR");
    e.master_port = static_cast<int>(env_number("MASTER_PORT", 1, 65535));
  }
  e.agent_store = env("TORCHELASTIC_USE_AGENT_STORE") == "True";
  // Keys of their own under torchrun's long-lived agent store, per run and restart.
  const std::string run_id = env("TORCHELASTIC_RUN_ID");
  if (!run_id.empty()) {
    e.store_prefix += "/" + run_id + "/" + env("TORCHELASTIC_RESTART_COUNT");
  }
  return e;
}

}  // namespace

void add_host_flags(CLI::App* cmd, HostFlags& h) {
  h.cmd = cmd;
  cmd->add_option("--np", h.np, "Host backend: start N local processes (ranks) for this run");
  cmd->add_option("-T,--timeout", h.timeout_s,
                  "Seconds before a stuck run fails (0: host backend 60 s per wait, GPU peers "
                  "GPUORCH_PEER_TIMEOUT or 300 s, a single GPU process never)")
      ->capture_default_str();
  cmd->add_option("--iface", h.iface,
                  "Host backend: network interface for Gloo's TCP transport "
                  "(default GLOO_SOCKET_IFNAME, else loopback for local runs or the host name)");
}

void apply_host_flags(comm::Options& o, const HostFlags& h) {
  if (o.backend != "host") {
    for (const char* flag : {"--np", "--iface"}) {
      if (h.cmd->count(flag) > 0) base::fail_input(fmt::format("{} needs --backend host", flag));
    }
    return;
  }
  if (h.cmd->count("--ngpus") > 0) {
    base::fail_input("-g: the host backend runs one rank per process (use --np N)");
  }
  if (h.cmd->count("--nthreads") > 0) {
    base::fail_input("-t: the host backend runs one rank per process (use --np N)");
  }
  const host::Endpoint e = endpoint(h);
  if (!e.iface.empty() && ::if_nametoindex(e.iface.c_str()) == 0) {
    base::fail_input(fmt::format("--iface {}: no such network interface", e.iface));
  }
  (void)host::faults_from_env();
  if (launcher(h)) {
    if (h.np < 1 || h.np > 256) base::fail_input("--np must be between 1 and 256");
    o.ranks = h.np;
  } else {
    o.ranks = e.world;
  }
}

int run_host_bench(const comm::Options& o, const HostFlags& h, const std::string& json_file) {
  if (launcher(h)) {
    return host::launch_local(h.np, host::own_command_line(), std::chrono::seconds(2));
  }
  const host::Endpoint e = endpoint(h);
  BenchPrinter print(o, e.rank == 0, json_file);  // only rank 0 prints, as nccl-tests
  std::vector<comm::Row> rows;
  try {
    rows = host::run_host(
        o, e, host::faults_from_env(), [&](const comm::RunInfo& i) { print.start(i); },
        [&](const comm::Row& r) { print.row(r); });
  } catch (const host::PeerError& ex) {
    fmt::print(stderr, "gpuorch bench: rank {}: {}\n", e.rank, ex.what());
    return 1;
  }
  return print.finish(rows);
}

}  // namespace gpuorch::cli
