// Reading GPU processes from procfs. numa_maps lines look like
// "7f1c2a000000 bind:1 anon=512 dirty=512 active=0 N1=512 kernelpagesize_kB=4" (proc(5)); the
// second word is the mapping's memory policy, each N<node>=<pages> its resident pages per node.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <sstream>

#include "gpuorch/base/read_file.hpp"
#include "gpuorch/base/whole_number.hpp"
#include "gpuorch/doctor/numa.hpp"

namespace gpuorch::doctor {
namespace {

bool all_digits(const std::string& s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

// "/dev/nvidia3" -> 3; not /dev/nvidiactl, -uvm, -caps.
std::optional<int> nvidia_minor(const std::string& target) {
  const std::string prefix = "/dev/nvidia";
  if (target.rfind(prefix, 0) != 0) return std::nullopt;
  const std::string rest = target.substr(prefix.size());
  if (!all_digits(rest)) return std::nullopt;
  return base::whole_number<int>(rest);
}

std::string status_field(const std::string& status, const std::string& key) {
  std::istringstream in(status);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key + ":", 0) != 0) continue;
    const std::size_t b = line.find_first_not_of(" \t", key.size() + 1);
    return b == std::string::npos ? std::string() : line.substr(b);
  }
  return {};
}

void read_numa_maps(const std::string& text, GpuProcess& p) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string address, policy;
    if (!(words >> address >> policy)) continue;
    ++p.policies[policy];
    for (std::string w; words >> w;) {
      const std::size_t eq = w.find('=');
      if (w.size() < 4 || w[0] != 'N' || eq == std::string::npos) continue;
      const std::string node = w.substr(1, eq - 1), pages = w.substr(eq + 1);
      const auto n = base::whole_number<int>(node, 0);
      const auto count = base::whole_number<long long>(pages, 0);
      if (n && count) p.pages[*n] += *count;
    }
  }
}

// numa_maps has a line per mapping: a training process with thousands of mappings outgrows the
// Tree's 1 MiB bound for sysfs attributes, so it is read here with a bound of its own.
std::optional<std::string> read_numa_maps_file(const discover::Tree& tree, const std::string& rel) {
  const std::string path = tree.absolute(rel).string();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::nullopt;  // the process ended meanwhile
  std::string problem;
  auto text = base::read_bounded(path, std::size_t{64} << 20, problem);
  if (!text) tree.problem(rel, problem + "; memory placement not read");
  return text;
}

}  // namespace

bool gpu_manager(const std::string& command) {
  // /proc/PID/comm is cut at 15 characters: "nvidia-persistenced" reads "nvidia-persiste".
  // gpuorch's own agents (launch, exporter, device plugin; "gpuorch.bin" in the portable build)
  // hold the GPU files through NVML too; `gpuorch bench` is then not checked either.
  static const char* const kManagers[] = {"nvidia-persiste", "nv-hostengine",   "dcgm-exporter",
                                          "nvidia-smi",      "nvidia-device-p", "gpuorch"};
  return std::any_of(std::begin(kManagers), std::end(kManagers),
                     [&](const char* m) { return command.rfind(m, 0) == 0; });
}

std::vector<int> gpu_minors_open(const discover::Tree& tree, int pid) {
  std::vector<int> minors;
  // gpuorch itself may hold the GPUs' files through NVML (discovery, sampling): not a GPU job.
  if (tree.live() && pid == ::getpid()) return minors;
  const std::string dir = "proc/" + std::to_string(pid) + "/fd";
  std::error_code ec;
  for (const auto& fd : tree.list(dir)) {
    // fd links point outside the tree (at /dev), so they are read, not followed.
    const auto target = std::filesystem::read_symlink(tree.absolute(dir + "/" + fd), ec);
    if (ec) continue;
    if (const auto minor = nvidia_minor(target.string())) minors.push_back(*minor);
  }
  std::sort(minors.begin(), minors.end());
  minors.erase(std::unique(minors.begin(), minors.end()), minors.end());
  return minors;
}

std::vector<GpuProcess> find_gpu_processes(const discover::Tree& tree) {
  std::vector<GpuProcess> out;
  std::vector<int> pids;
  for (const auto& name : tree.list("proc")) {
    if (const auto pid = base::whole_number<int>(name, 1); pid && all_digits(name)) {
      pids.push_back(*pid);
    }
  }
  std::sort(pids.begin(), pids.end());
  for (const int pid : pids) {
    const std::string dir = "proc/" + std::to_string(pid) + "/";
    GpuProcess p;
    p.pid = pid;
    p.gpu_minors = gpu_minors_open(tree, pid);
    if (p.gpu_minors.empty()) continue;
    const auto status = tree.text(dir + "status");
    if (!status) continue;  // exited meanwhile
    p.command = tree.line(dir + "comm").value_or(status_field(*status, "Name"));
    if (gpu_manager(p.command)) continue;
    p.cpus_allowed = topology::parse_id_list(status_field(*status, "Cpus_allowed_list"))
                         .value_or(topology::IdSet{});
    p.mems_allowed = topology::parse_id_list(status_field(*status, "Mems_allowed_list"))
                         .value_or(topology::IdSet{});
    if (const auto maps = read_numa_maps_file(tree, dir + "numa_maps")) read_numa_maps(*maps, p);
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace gpuorch::doctor
