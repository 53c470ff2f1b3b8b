// Taking the utilisation window: NVML per GPU, and per snapshot every process with a
// /dev/nvidiaN open plus everything below it in the process tree (DataLoader workers started
// with `spawn` hold no GPU file, and their CPU time is the data loading the check looks for).
// Counters are stored raw (ticks per thread, /proc/stat ticks); check_utilisation makes rates.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <sstream>
#include <thread>

#include "gpuorch/base/process_tree.hpp"
#include "gpuorch/base/whole_number.hpp"
#include "gpuorch/doctor/numa.hpp"
#include "gpuorch/doctor/utilisation.hpp"

namespace gpuorch::doctor {
namespace {

bool is_pid(const std::string& name) {
  return !name.empty() &&
         std::all_of(name.begin(), name.end(), [](unsigned char c) { return std::isdigit(c); });
}

// The "cpu" line of /proc/stat: user nice system idle iowait irq softirq steal (guest time is
// already inside user). Idle counts iowait too: a core waiting for a disk runs nothing.
void read_cpu_line(const discover::Tree& tree, UtilSnapshot& s) {
  const auto text = tree.text("proc/stat");
  if (!text) return;
  std::istringstream in(*text);
  std::string name;
  in >> name;
  if (name != "cpu") return;
  std::uint64_t v[8] = {};
  for (auto& x : v) in >> x;
  s.cpu_total = 0;
  for (const auto x : v) s.cpu_total += x;
  s.cpu_idle = v[3] + v[4];
}

int count_cpus(const discover::Tree& tree) {
  int n = 0;
  if (const auto text = tree.text("proc/stat")) {
    std::istringstream in(*text);
    for (std::string line; std::getline(in, line);) {
      if (line.size() > 3 && line.rfind("cpu", 0) == 0 &&
          std::isdigit(static_cast<unsigned char>(line[3])))
        ++n;
    }
  }
  return n > 0 ? n : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

std::vector<UtilProcess> read_processes(const discover::Tree& tree) {
  std::vector<base::ProcessEntry> all;
  std::map<int, std::vector<int>> minors;
  for (const auto& name : tree.list("proc")) {
    const auto pid = base::whole_number<int>(name, 1);
    if (!is_pid(name) || !pid) continue;
    base::ProcessEntry e;
    e.pid = *pid;
    const auto stat = tree.text("proc/" + name + "/stat");
    if (!stat || !base::parse_proc_stat(*stat, e)) continue;  // ended meanwhile
    all.push_back(e);
    if (auto m = gpu_minors_open(tree, e.pid); !m.empty()) minors[e.pid] = std::move(m);
  }
  std::map<int, int> keep;  // pid -> ppid
  for (const auto& e : all) {
    if (!minors.count(e.pid)) continue;
    keep[e.pid] = e.ppid;
    for (const auto& d : base::descendants_of(e.pid, all)) keep[d.pid] = d.ppid;
  }
  std::vector<UtilProcess> out;
  for (const auto& [pid, ppid] : keep) {
    const std::string dir = "proc/" + std::to_string(pid) + "/";
    UtilProcess p;
    p.pid = pid;
    p.ppid = ppid;
    p.command = tree.line(dir + "comm").value_or("?");
    if (const auto m = minors.find(pid); m != minors.end()) p.gpu_minors = m->second;
    for (const auto& tid : tree.list(dir + "task")) {
      base::ProcessEntry t;
      const auto stat = tree.text(dir + "task/" + tid + "/stat");
      const auto id = base::whole_number<int>(tid, 1);
      if (is_pid(tid) && id && stat && base::parse_proc_stat(*stat, t)) {
        p.thread_ticks[*id] = t.cpu_ticks;
      }
    }
    out.push_back(std::move(p));
  }
  return out;
}

UtilGpuReading read_gpu(discover::Nvml& nvml, int index) {
  const auto s = nvml.sample(static_cast<unsigned>(index));
  UtilGpuReading g;
  g.index = index;
  if (s.gpu_util) g.sm_util = *s.gpu_util;
  if (s.memory_used_bytes)
    g.memory_used_mib = static_cast<double>(*s.memory_used_bytes) / (1 << 20);
  // NVML's PCIe counters are KB/s over its last 20 ms.
  if (s.pcie_rx_kbps) g.pcie_rx_mbps = *s.pcie_rx_kbps / 1000.0;
  if (s.pcie_tx_kbps) g.pcie_tx_mbps = *s.pcie_tx_kbps / 1000.0;
  return g;
}

}  // namespace

UtilRecording sample_utilisation(const discover::Tree& tree, discover::Nvml& nvml, double seconds,
                                 double interval) {
  UtilRecording r;
  r.ticks_per_second = tree.live() ? static_cast<double>(::sysconf(_SC_CLK_TCK)) : 100;
  r.cpus = count_cpus(tree);
  for (const auto& d : nvml.devices()) {
    UtilGpu g;
    g.index = static_cast<int>(d.index);
    g.minor = d.minor_number;
    g.name = d.name;
    if (d.memory_total_bytes)
      g.memory_total_mib = static_cast<double>(d.memory_total_bytes) / (1 << 20);
    r.gpus.push_back(std::move(g));
  }
  const auto rounds = std::max<long>(1, std::lround(seconds / interval));
  const auto start = std::chrono::steady_clock::now();
  for (long k = 0; k <= rounds; ++k) {
    std::this_thread::sleep_until(start +
                                  std::chrono::duration<double>(interval * static_cast<double>(k)));
    UtilSnapshot s;
    s.t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    read_cpu_line(tree, s);
    for (const auto& g : r.gpus) s.gpus.push_back(read_gpu(nvml, g.index));
    s.processes = read_processes(tree);
    r.snapshots.push_back(std::move(s));
  }
  return r;
}

}  // namespace gpuorch::doctor
