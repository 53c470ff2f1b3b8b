#include "gpuorch/k8s/dra/claim_preparer.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <stdexcept>

#include "gpuorch/base/atomic_file.hpp"

namespace gpuorch::k8s::dra {
namespace {

namespace fs = std::filesystem;

}  // namespace

ClaimPreparer::ClaimPreparer(topology::Host host, PreparerOptions options, ClaimSource source)
    : host_(std::move(host)), options_(std::move(options)), source_(std::move(source)) {
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

void ClaimPreparer::write_cdi(const std::string& uid, const std::vector<AllocatedDevice>& devices,
                              std::vector<PreparedDevice>* out) const {
  std::vector<std::string> names;
  for (const auto& d : devices) names.push_back(d.device);
  const CdiClaim cdi = cdi_claim(host_, options_.cdi, uid, names);
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
    // Prepared before: the same answer, and the spec file again should it have gone.
    std::error_code ec;
    if (!fs::exists(cdi_spec_path(options_.cdi, claim.uid), ec)) {
      std::vector<AllocatedDevice> devices;
      for (const auto& d : it->second.devices) devices.push_back({{}, d.pool, d.device});
      write_cdi(claim.uid, devices, nullptr);
    }
    return it->second.devices;
  }
  const nlohmann::json object = source_(claim.ns, claim.name);
  const auto devices = allocated_devices(object, claim, options_.cdi.driver, options_.pool);
  std::vector<PreparedDevice> out;
  write_cdi(claim.uid, devices, &out);
  // Several results of one device (two requests sharing it) are one CDI device each; the
  // kubelet dedups the IDs it hands the runtime.
  prepared_[claim.uid] = PreparedClaim{claim.ns, claim.name, out};
  save_checkpoint(options_.checkpoint_path, prepared_);
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
  if (prepared_.erase(claim.uid) > 0) {
    save_checkpoint(options_.checkpoint_path, prepared_);
    if (options_.log) {
      options_.log(fmt::format("unprepared claim {}/{} ({})", claim.ns, claim.name, claim.uid));
    }
  }
}

PreparedClaims ClaimPreparer::prepared() const {
  const std::lock_guard lock(mutex_);
  return prepared_;
}

}  // namespace gpuorch::k8s::dra
