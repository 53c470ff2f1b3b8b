#pragma once
// What `gpuorch scheduler` and `gpuorch extender` share on the command line: the same credentials,
// policy, seed and workload flags (one meaning for both), the policy spec check, and stopping on
// SIGINT/SIGTERM through a thread that waits for them (the servers' threads never see a signal).
#include <pthread.h>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

#include "gpuorch/sched/policy.hpp"

namespace gpuorch::cli {

inline void add_core_flags(CLI::App& cmd, std::string& kubeconfig, std::string& policy,
                           std::uint64_t& seed, std::string& workload) {
  cmd.add_option("--kubeconfig", kubeconfig,
                 "kubeconfig file (default: $KUBECONFIG, else the in-cluster service account)");
  cmd.add_option("--policy", policy,
                 "Placement policy, as sim fill --policy takes it (efd, fgd, best-fit, ...)")
      ->capture_default_str();
  cmd.add_option("--seed", seed,
                 "Seed of the tie-break ranking over node names (sim fill --tie-break names)")
      ->capture_default_str();
  cmd.add_option("--workload", workload,
                 "Workload history (openb pod CSV) that efd and fgd estimate the target workload "
                 "from (default: the pods on the cluster when the first pod is scheduled)");
}

// "EFD:popularity=0.8" -> "efd:popularity=0.8", checked (base::InputError when unknown).
inline std::string policy_spec(const std::string& policy) {
  std::string spec(sched::canonical_policy_name(policy.substr(0, policy.find(':'))));
  if (const auto colon = policy.find(':'); colon != std::string::npos) spec += policy.substr(colon);
  sched::check_policy_spec(spec);
  return spec;
}

// Blocks SIGINT and SIGTERM in this thread (and the threads it starts later); returns a thread
// that sets `stop` when one arrives (and ends once `stop` is set or the thread is destroyed).
inline std::jthread stop_on_signals(std::atomic<bool>& stop) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // The stop token too: leaving the scope early (an exception) must not wait for a signal.
  return std::jthread([&stop, signals](const std::stop_token& token) {
    while (!stop.load() && !token.stop_requested()) {
      timespec wait{0, 200'000'000};
      if (sigtimedwait(&signals, nullptr, &wait) > 0) stop = true;
    }
  });
}

}  // namespace gpuorch::cli
