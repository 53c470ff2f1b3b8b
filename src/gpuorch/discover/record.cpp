// `gpuorch topo --record DIR`: a support-case snapshot of what discovery reads, replayable with
// `--sysfs-root DIR` on any machine.
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <set>

#include "gpuorch/base/atomic_file.hpp"
#include "gpuorch/base/error.hpp"
#include "gpuorch/discover/discover.hpp"
#include "gpuorch/discover/pci.hpp"
#include "gpuorch/discover/tree.hpp"

namespace gpuorch::discover {
namespace fs = std::filesystem;
namespace {

class Recorder {
 public:
  Recorder(const Tree& live, fs::path out) : live_(live), out_(std::move(out)) {}

  // Copies a file's content (following symlinks) to the same relative path.
  void file(const std::string& rel) {
    const auto text = live_.text(rel);
    if (!text) return;
    write(rel, *text);
  }

  void write(const std::string& rel, const std::string& content) {
    const fs::path p = out_ / rel;
    fs::create_directories(p.parent_path());
    // Checked (a full disk must not leave a truncated recording behind) and atomic.
    base::write_file_atomically(p.string(), content);
  }

  // Recreates a symlink with its original (relative) target, at `at` (default: the same path).
  bool link(const std::string& rel, const std::string& at = {}) {
    std::error_code ec;
    const fs::path target = fs::read_symlink(live_.absolute(rel), ec);
    if (ec || target.is_absolute()) return false;
    const fs::path p = out_ / (at.empty() ? rel : at);
    fs::create_directories(p.parent_path());
    fs::remove(p, ec);
    fs::create_symlink(target, p, ec);
    return !ec;
  }

  // Copies every regular file below a directory, as files.
  void tree(const std::string& rel, int depth = 0) {
    if (depth > 8) return;
    for (const auto& name : live_.list(rel)) {
      const std::string child = rel + "/" + name;
      std::error_code ec;
      const auto st = fs::symlink_status(live_.absolute(child), ec);
      if (fs::is_directory(st)) {
        tree(child, depth + 1);
      } else if (fs::is_regular_file(st)) {
        file(child);
      }
    }
  }

  // Files of a device directory, copied to its resolved location.
  void attributes(const std::string& dir, std::initializer_list<const char*> names) {
    const auto real = live_.resolve(dir);
    if (!real) return;
    for (const char* n : names) {
      const auto text = live_.text(dir + "/" + n);
      if (text) write(*real + "/" + n, *text);
    }
  }

  [[nodiscard]] std::optional<std::string> resolve(const std::string& rel) const {
    return live_.resolve(rel);
  }

 private:
  const Tree& live_;
  fs::path out_;
};

// Fills `tmp` with the recording (defined below record_host, which owns the folder's lifecycle).
void record_into(const fs::path& tmp, const Options& options, int samples);

}  // namespace

void record_host(const Options& options, const std::string& dir, int samples) {
  if (options.root != "/") base::fail_input("--record reads the live host; drop --sysfs-root");
  std::error_code ec;
  if (fs::exists(dir, ec)) base::fail_input(dir, 0, "already exists; --record writes a new folder");
  const fs::path final_dir = fs::absolute(dir);
  const fs::path tmp = final_dir.parent_path() /
                       fmt::format(".{}.tmp-{}", final_dir.filename().string(), ::getpid());
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp);

  try {
    record_into(tmp, options, samples);
  } catch (const fs::filesystem_error& e) {
    fs::remove_all(tmp, ec);
    base::fail_input(dir, 0, fmt::format("cannot be written: {}", e.code().message()));
  } catch (const base::InputError&) {
    fs::remove_all(tmp, ec);
    throw;
  } catch (const std::runtime_error& e) {  // a write that failed (write_file_atomically)
    fs::remove_all(tmp, ec);
    base::fail_input(dir, 0, fmt::format("cannot be written: {}", e.what()));
  }
  fs::rename(tmp, final_dir, ec);
  if (ec) {
    fs::remove_all(tmp, ec);
    base::fail_input(dir, 0, "cannot be created");
  }
}

namespace {

void record_into(const fs::path& tmp, const Options& options, int samples) {
  Diagnostics quiet;
  const Tree live("/", &quiet);
  Recorder r(live, tmp);
  for (const char* f :
       {"proc/sys/kernel/hostname", "sys/class/dmi/id/product_name",
        "sys/devices/system/cpu/online", "sys/devices/system/cpu/possible",
        "sys/devices/system/cpu/present", "sys/devices/system/node/online",
        "sys/devices/system/node/possible", "proc/meminfo", "proc/driver/nvidia/version"}) {
    r.file(f);
  }
  for (const auto& n : live.list("sys/devices/system/node")) {
    if (n.rfind("node", 0) != 0) continue;
    for (const char* f : {"cpulist", "cpumap", "meminfo", "distance"}) {
      r.file("sys/devices/system/node/" + n + "/" + f);
    }
  }
  r.tree("proc/driver/nvidia/gpus");
  r.tree("proc/driver/nvidia/capabilities");
  r.tree("sys/class/kfd/kfd/topology");
  for (const auto& name : live.list("sys/bus/pci/devices")) {
    const std::string dev = "sys/bus/pci/devices/" + name;
    if (!r.link(dev)) continue;
    r.attributes(dev, {"vendor",
                       "device",
                       "class",
                       "subsystem_vendor",
                       "subsystem_device",
                       "revision",
                       "numa_node",
                       "local_cpulist",
                       "local_cpus",
                       "current_link_speed",
                       "current_link_width",
                       "max_link_speed",
                       "max_link_width",
                       "mem_info_vram_total",
                       "mem_info_vram_used",
                       "gpu_busy_percent",
                       "mem_busy_percent",
                       "product_name",
                       "unique_id",
                       "current_compute_partition",
                       "current_memory_partition",
                       "pp_dpm_sclk",
                       "pp_dpm_mclk",
                       "driver/module/version"});
    const auto real = r.resolve(dev);
    if (!real) continue;
    for (const auto& hw : live.list(dev + "/hwmon")) {
      r.attributes(dev + "/hwmon/" + hw, {"temp1_input", "power1_average", "power1_input"});
    }
  }
  for (const auto& name : live.list("sys/class/drm")) {
    const std::string d = "sys/class/drm/" + name;
    const auto real = r.resolve(d);
    if (real && r.link(d)) r.link(d + "/device", *real + "/device");
  }
  for (const auto& name : live.list("sys/class/infiniband")) {
    const std::string d = "sys/class/infiniband/" + name;
    const auto real = r.resolve(d);
    if (!real || !r.link(d)) continue;
    r.link(d + "/device", *real + "/device");
    r.attributes(d, {"node_guid", "fw_ver", "hca_type"});
    for (const auto& p : live.list(d + "/ports")) {
      r.attributes(d + "/ports/" + p, {"state", "phys_state", "rate", "link_layer"});
    }
  }
  std::string why;
  if (auto hw = HwlocTopology::live(why)) {
    if (auto xml = hw->export_xml()) r.write("hwloc.xml", *xml);
  }
  if (options.use_nvml) {
    if (auto nvml = open_live_nvml(options.nvml_library, why)) {
      r.write("nvml.json",
              record_nvml(*nvml, samples)
                      .dump(1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) +
                  "\n");
    }
  }
}

}  // namespace

}  // namespace gpuorch::discover
