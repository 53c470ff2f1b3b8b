#include "gpuorch/k8s/dra/claim_preparer.hpp"

#include <fmt/format.h>

#include <csignal>
#include <filesystem>
#include <stdexcept>

#include "gpuorch/base/atomic_file.hpp"
#include "gpuorch/base/subprocess.hpp"
#include "gpuorch/k8s/dra/device_config.hpp"
#include "gpuorch/k8s/dra/gpu_sharing.hpp"

namespace gpuorch::k8s::dra {
namespace {

namespace fs = std::filesystem;

// Compute modes belong to whole GPUs; a MIG instance's MPS clients follow its parent's.
bool whole_gpu(const std::string& uuid) { return uuid.rfind("GPU-", 0) == 0; }

}  // namespace

ClaimPreparer::ClaimPreparer(topology::Host host, PreparerOptions options, ClaimSource source)
    : host_(std::move(host)), options_(std::move(options)), source_(std::move(source)) {
  if (!options_.mps.log) options_.mps.log = options_.log;
  try {
    prepared_ = load_checkpoint(options_.checkpoint_path);
  } catch (const std::exception& e) {
    std::error_code ec;
    fs::rename(options_.checkpoint_path, options_.checkpoint_path + ".bad", ec);
    if (options_.log) {
      options_.log(fmt::format("{}; set aside as {}.bad, starting with no claim prepared", e.what(),
                               options_.checkpoint_path));
    }
  }
}

void ClaimPreparer::log(const std::string& line) const {
  if (options_.log) options_.log(line);
}

std::string ClaimPreparer::mps_root(const std::string& uid) const {
  return (fs::path(options_.checkpoint_path).parent_path() / "mps" / uid).string();
}

void ClaimPreparer::apply_sharing(const std::string& uid, const PreparedSharing& sharing) {
  PreparedSharing done;
  try {
    for (const auto& t : sharing.time_slices) {
      // As NVIDIA's driver: the time slice applies to processes sharing a GPU in DEFAULT mode.
      set_compute_mode(options_.nvidia_smi, t.uuid, "DEFAULT");
      set_time_slice(options_.nvidia_smi, t.uuid, t.interval);
      done.time_slices.push_back(t);
      log(fmt::format("claim {}: time slice of {} set to {}", uid, t.uuid, t.interval));
    }
    if (!sharing.mps_devices.empty()) {
      done.mps_root = sharing.mps_root;
      done.mps_devices = sharing.mps_devices;
      // EXCLUSIVE_PROCESS leaves the GPU to the MPS server alone, as NVIDIA's driver sets it.
      // Without nvidia-smi MPS still works, the GPU open to other processes too: said, not fatal.
      for (const auto& u : sharing.mps_devices) {
        if (!whole_gpu(u)) continue;
        if (options_.nvidia_smi.path.empty()) {
          log(fmt::format("claim {}: no nvidia-smi, {} keeps its compute mode", uid, u));
          continue;
        }
        set_compute_mode(options_.nvidia_smi, u, "EXCLUSIVE_PROCESS");
      }
      if (const pid_t pid = start_mps_daemon(options_.mps, sharing); pid > 0) {
        mps_children_[uid] = pid;
      }
    }
  } catch (...) {
    try {
      undo_sharing(uid, done);
    } catch (const std::exception& e) {
      log(fmt::format("claim {}: undoing a failed Prepare: {}", uid, e.what()));
    }
    throw;
  }
}

void ClaimPreparer::undo_sharing(const std::string& uid, const PreparedSharing& sharing) {
  if (!sharing.mps_root.empty()) {
    const auto child = mps_children_.find(uid);
    stop_mps_daemon(options_.mps, sharing.mps_root,
                    child == mps_children_.end() ? -1 : child->second);
    if (child != mps_children_.end()) mps_children_.erase(child);
    for (const auto& u : sharing.mps_devices) {
      if (whole_gpu(u) && !options_.nvidia_smi.path.empty()) {
        set_compute_mode(options_.nvidia_smi, u, "DEFAULT");
      }
    }
  }
  for (const auto& t : sharing.time_slices) {
    bool wanted_elsewhere = false;
    for (const auto& [other, c] : prepared_) {
      if (other == uid) continue;
      for (const auto& o : c.sharing.time_slices) wanted_elsewhere |= o.uuid == t.uuid;
    }
    if (wanted_elsewhere) continue;
    set_time_slice(options_.nvidia_smi, t.uuid, static_cast<int>(TimeSliceInterval::kDefault));
    log(fmt::format("claim {}: time slice of {} back to the default", uid, t.uuid));
  }
}

void ClaimPreparer::write_cdi(const std::string& uid, const std::vector<AllocatedDevice>& devices,
                              const PreparedSharing& sharing,
                              std::vector<PreparedDevice>* out) const {
  std::vector<std::string> names;
  for (const auto& d : devices) names.push_back(d.device);
  const CdiClaim cdi = cdi_claim(host_, options_.cdi, uid, names, mps_container_edits(sharing));
  std::error_code ec;
  fs::create_directories(options_.cdi.cdi_dir, ec);
  base::write_file_atomically(cdi_spec_path(options_.cdi, uid), cdi.spec.dump(2) + "\n");
  if (out == nullptr) return;
  for (std::size_t i = 0; i < devices.size(); ++i) {
    out->push_back({{devices[i].request}, devices[i].pool, devices[i].device, {cdi.device_ids[i]}});
  }
}

std::vector<PreparedDevice> ClaimPreparer::prepare(const ClaimRef& claim) {
  if (const auto why = check_claim_ref(claim); !why.empty()) throw std::runtime_error(why);
  const std::lock_guard lock(mutex_);
  if (const auto it = prepared_.find(claim.uid); it != prepared_.end()) {
    // Prepared before: the same answer, the spec file again should it have gone, and the MPS
    // daemon again should it have gone (a reboot): never a second one, since it is asked first.
    const PreparedSharing& sharing = it->second.sharing;
    if (!sharing.mps_devices.empty() && !mps_daemon_answers(options_.mps, sharing.mps_root)) {
      log(fmt::format("claim {}: its MPS control daemon is gone; starting it again", claim.uid));
      reap_mps_child(claim.uid);
      if (const pid_t pid = start_mps_daemon(options_.mps, sharing); pid > 0) {
        mps_children_[claim.uid] = pid;
      }
    }
    std::error_code ec;
    if (!fs::exists(cdi_spec_path(options_.cdi, claim.uid), ec)) {
      std::vector<AllocatedDevice> devices;
      for (const auto& d : it->second.devices) devices.push_back({{}, d.pool, d.device});
      write_cdi(claim.uid, devices, sharing, nullptr);
    }
    return it->second.devices;
  }
  const nlohmann::json object = source_(claim.ns, claim.name);
  const auto devices = allocated_devices(object, claim, options_.cdi.driver, options_.pool);
  PreparedSharing sharing;
  try {
    std::vector<std::string> names;
    for (const auto& d : devices) names.push_back(d.device);
    sharing = plan_sharing(host_, names, device_configs(object, devices, options_.cdi.driver));
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("ResourceClaim {}/{}: {}", claim.ns, claim.name, e.what()));
  }
  if (!sharing.mps_devices.empty()) sharing.mps_root = mps_root(claim.uid);
  apply_sharing(claim.uid, sharing);
  std::vector<PreparedDevice> out;
  try {
    write_cdi(claim.uid, devices, sharing, &out);
    // Several results of one device (two requests sharing it) are one CDI device each; the
    // kubelet dedups the IDs it hands the runtime.
    prepared_[claim.uid] = PreparedClaim{claim.ns, claim.name, out, sharing};
    save_checkpoint(options_.checkpoint_path, prepared_);
  } catch (...) {
    prepared_.erase(claim.uid);
    std::error_code ec;
    fs::remove(cdi_spec_path(options_.cdi, claim.uid), ec);
    try {
      undo_sharing(claim.uid, sharing);
    } catch (const std::exception& e) {
      log(fmt::format("claim {}: undoing a failed Prepare: {}", claim.uid, e.what()));
    }
    throw;
  }
  if (options_.log) {
    std::string names;
    for (const auto& d : out) names += (names.empty() ? "" : ", ") + d.device;
    options_.log(
        fmt::format("prepared claim {}/{} ({}): {}", claim.ns, claim.name, claim.uid, names));
  }
  return out;
}

void ClaimPreparer::unprepare(const ClaimRef& claim) {
  if (const auto why = check_claim_ref(claim); !why.empty()) throw std::runtime_error(why);
  const std::lock_guard lock(mutex_);
  std::error_code ec;
  fs::remove(cdi_spec_path(options_.cdi, claim.uid), ec);
  if (ec) {
    throw std::runtime_error(
        fmt::format("cannot remove {}: {}", cdi_spec_path(options_.cdi, claim.uid), ec.message()));
  }
  if (const auto it = prepared_.find(claim.uid); it != prepared_.end()) {
    // The entry goes only once its sharing is undone: a daemon that would not quit keeps it, and
    // the kubelet's next Unprepare tries again.
    undo_sharing(claim.uid, it->second.sharing);
    prepared_.erase(it);
    save_checkpoint(options_.checkpoint_path, prepared_);
    log(fmt::format("unprepared claim {}/{} ({})", claim.ns, claim.name, claim.uid));
  } else if (fs::exists(mps_root(claim.uid), ec)) {
    // A daemon of a claim the checkpoint lost (set aside as unreadable): stopped all the same.
    stop_mps_daemon(options_.mps, mps_root(claim.uid));
  }
}

void ClaimPreparer::reap_mps_child(const std::string& uid) {
  const auto it = mps_children_.find(uid);
  if (it == mps_children_.end()) return;
  // It answers no more: ended (reaped here), or stuck (ended here).
  if (!base::try_wait(it->second)) {
    base::signal_group(it->second, SIGKILL);
    base::wait(it->second);
  }
  mps_children_.erase(it);
}

void ClaimPreparer::restore_sharing() {
  const std::lock_guard lock(mutex_);
  for (const auto& [uid, c] : prepared_) {
    if (c.sharing.mps_devices.empty() || mps_daemon_answers(options_.mps, c.sharing.mps_root)) {
      continue;
    }
    try {
      reap_mps_child(uid);
      if (const pid_t pid = start_mps_daemon(options_.mps, c.sharing); pid > 0) {
        mps_children_[uid] = pid;
      }
      log(fmt::format("claim {}: its MPS control daemon started again", uid));
    } catch (const std::exception& e) {
      log(fmt::format("claim {}: starting its MPS control daemon again: {}", uid, e.what()));
    }
  }
}

PreparedClaims ClaimPreparer::prepared() const {
  const std::lock_guard lock(mutex_);
  return prepared_;
}

}  // namespace gpuorch::k8s::dra
