#pragma once
// NodePrepareResources and NodeUnprepareResources without the wire: a claim's allocation (read
// through a ClaimSource: the API server in the driver, a map in tests) becomes a CDI spec file
// and an entry of the checkpoint; Unprepare removes both. Both are idempotent: a claim prepared
// before (by this process or one before it, through the checkpoint) is answered from the
// checkpoint without asking the API server, and unpreparing a claim that is not prepared
// succeeds. Calls are serialised: the kubelet may call for several pods at once, and each call
// rewrites the one checkpoint.
//
// A claim's GpuConfig (gpu_config.hpp) is applied here too: the time slice of its GPUs set, its MPS
// control daemon started (under <checkpoint's folder>/mps/<claim UID>), both recorded in the
// checkpoint and undone at Unprepare. A configuration that is wrong, or that the node fails to
// apply, fails that claim with nothing left behind: what was changed before the failure is undone.
#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gpuorch/k8s/dra/cdi_spec.hpp"
#include "gpuorch/k8s/dra/checkpoint.hpp"
#include "gpuorch/k8s/dra/claim_allocation.hpp"
#include "gpuorch/k8s/dra/mps_daemon.hpp"
#include "gpuorch/k8s/dra/nvidia_smi.hpp"
#include "gpuorch/topology/host.hpp"

namespace gpuorch::k8s::dra {

// The ResourceClaim object of namespace/name; throws (ApiError, std::runtime_error) when it
// cannot be had.
using ClaimSource = std::function<nlohmann::json(const std::string& ns, const std::string& name)>;

struct PreparerOptions {
  CdiOptions cdi;
  std::string pool;             // the node's name: the pool of the driver's ResourceSlice
  std::string checkpoint_path;  // "<plugin dir>/checkpoint.json"
  std::function<void(const std::string&)> log;
  NvidiaSmi nvidia_smi;  // time slices and compute modes; no path: TimeSlicing claims fail
  MpsOptions mps;        // its log is set to `log`
};

class ClaimPreparer {
 public:
  // Reads the checkpoint; one that cannot be read is set aside as PATH.bad (logged) and the
  // driver starts with none prepared: Unprepare still removes a claim's CDI file by its UID.
  ClaimPreparer(topology::Host host, PreparerOptions options, ClaimSource source);

  // The claim's devices, or throws std::runtime_error with the reason (the answer's `error`).
  std::vector<PreparedDevice> prepare(const ClaimRef& claim);
  // Throws std::runtime_error when the CDI file or the checkpoint cannot be written.
  void unprepare(const ClaimRef& claim);

  [[nodiscard]] PreparedClaims prepared() const;

  // Starts again the MPS daemon of every prepared claim whose daemon no longer answers (the
  // driver's container restarted, taking its children with it; the node rebooted), so the
  // claim's pods can start new MPS clients before any Prepare call comes. Logs what fails.
  void restore_sharing();

 private:
  void write_cdi(const std::string& uid, const std::vector<AllocatedDevice>& devices,
                 const PreparedSharing& sharing, std::vector<PreparedDevice>* out) const;
  [[nodiscard]] std::string mps_root(const std::string& uid) const;
  // Sets what `sharing` asks; on failure undoes what it did and throws.
  void apply_sharing(const std::string& uid, const PreparedSharing& sharing);
  // Undoes `sharing` of claim `uid`: the MPS daemon stopped, a time slice back to the default
  // unless another prepared claim set one on that GPU too. Throws when something could not be.
  void undo_sharing(const std::string& uid, const PreparedSharing& sharing);
  void log(const std::string& line) const;
  // Collects the daemon this process started for claim `uid`, if any (it no longer answers).
  void reap_mps_child(const std::string& uid);

  topology::Host host_;
  PreparerOptions options_;
  ClaimSource source_;
  mutable std::mutex mutex_;
  PreparedClaims prepared_;
  std::map<std::string, pid_t> mps_children_;  // claim UID -> its daemon, when this process's
};

}  // namespace gpuorch::k8s::dra
