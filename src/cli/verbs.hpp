#pragma once
// Each verb registers its flags on the CLI11 app and returns the action to run after parsing.
#include <CLI/CLI.hpp>
#include <functional>

namespace gpuorch::cli {

using Action = std::function<int()>;

// `gpuorch sim fill`
void add_sim_fill(CLI::App& sim, Action& action);
// `gpuorch sim arrivals`: the fill experiment's arrival sequence per seed
void add_sim_arrivals(CLI::App& sim, Action& action);
// `gpuorch sim scale`
void add_sim_scale(CLI::App& sim, Action& action);
// `gpuorch sim timeline`: time-based simulation of training jobs (docs/sim-timeline.md)
void add_sim_timeline(CLI::App& sim, Action& action);

// `gpuorch topo`, `gpuorch dmon`, `gpuorch exporter`
void add_topo(CLI::App& app, Action& action);
void add_dmon(CLI::App& app, Action& action);
void add_exporter(CLI::App& app, Action& action);

// `gpuorch bench <collective>`
void add_bench(CLI::App& app, Action& action);
// `gpuorch tune nccl`
void add_tune(CLI::App& app, Action& action);

// `gpuorch device-plugin` (and the hidden `kubelet-harness`), `gpuorch manifests`
void add_device_plugin(CLI::App& app, Action& action);
void add_manifests(CLI::App& app, Action& action);
// `gpuorch node-labeller`: GFD-compatible labels kept true on the Node (docs/labeller.md)
void add_node_labeller(CLI::App& app, Action& action);
// `gpuorch dra-driver`: the node's GPUs as DRA devices, claims prepared through CDI (docs/dra.md)
void add_dra_driver(CLI::App& app, Action& action);

// `gpuorch scheduler`: the scheduler core on a Kubernetes cluster
void add_scheduler(CLI::App& app, Action& action);
// `gpuorch extender`: the scheduler core as kube-scheduler's HTTP extender
void add_extender(CLI::App& app, Action& action);
// `gpuorch admission-check`: Kueue's AdmissionCheck controller gpuorch.io/placeable
void add_admission_check(CLI::App& app, Action& action);

// `gpuorch launch [options] -- PROGRAM ARGS` or torchrun's `... SCRIPT ARGS`
void add_launch(CLI::App& app, Action& action);
// Before parsing: a `gpuorch launch` command line whose program comes without `--` (torchrun's
// `SCRIPT ARGS`, options of the script included) gets `--` (and a hidden marker) in front of it.
void mark_launch_program(const CLI::App& app, std::vector<std::string>& args);

// `gpuorch doctor <check>`: findings with evidence and a fix
void add_doctor(CLI::App& app, Action& action);

}  // namespace gpuorch::cli
