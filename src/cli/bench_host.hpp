#pragma once
// The host backend's part of `gpuorch bench` (--backend host): its flags, its environment
// (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, GLOO_SOCKET_IFNAME) and its run.
#include <CLI/CLI.hpp>
#include <string>

#include "gpuorch/comm/bench.hpp"

namespace gpuorch::cli {

struct HostFlags {
  int np = 0;
  double timeout_s = 0;  // -T: nccl-tests' timeout; 0: the host backend's 60 s per wait
  std::string iface;
  CLI::App* cmd = nullptr;
};

void add_host_flags(CLI::App* cmd, HostFlags& h);
// For every backend, before comm::validate: rejects host flags without --backend host and -g
// with it, checks --np / the environment and sets o.ranks. Throws base::InputError.
void apply_host_flags(comm::Options& o, const HostFlags& h);
// Launches --np ranks, or runs this process as one rank; only rank 0 prints.
int run_host_bench(const comm::Options& o, const HostFlags& h, const std::string& json_file);

}  // namespace gpuorch::cli
