// The utilisation analysis: a used GPU whose average SM utilisation is low is starved, and the
// host side says why. CPU use is measured per thread over the window (utime + stime deltas), so a
// main thread doing the data loading shows as one pegged thread among idle ones. The causes are
// tested in an order where each rules out the next: a saturated host explains everything after
// it, a pegged main thread explains the sawtooth that uncovered copies would also give.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "gpuorch/base/error.hpp"
#include "gpuorch/doctor/numa.hpp"
#include "gpuorch/doctor/utilisation.hpp"

namespace gpuorch::doctor {
namespace {

struct Stats {
  std::size_t n = 0;
  double mean = 0, stddev = 0, min = 0, max = 0, median = 0;
};

Stats stats(std::vector<double> v) {
  Stats s;
  s.n = v.size();
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.min = v.front();
  s.max = v.back();
  s.median = v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  for (const double x : v) s.mean += x;
  s.mean /= static_cast<double>(v.size());
  for (const double x : v) s.stddev += (x - s.mean) * (x - s.mean);
  s.stddev = std::sqrt(s.stddev / static_cast<double>(v.size()));
  return s;
}

// A process tree holding GPUs: its topmost recorded process and everything recorded below it
// (a launcher with NVML open, the training process, forked or spawned DataLoader workers).
struct Family {
  int root = 0;
  std::set<int> pids, minors, gpu_pids;  // gpu_pids: those with a /dev/nvidiaN open
  std::map<int, std::string> commands;
  std::map<int, int> parent;
  std::map<std::pair<int, int>, double> cores;  // (pid, tid) -> cores used over its time seen
};

struct Seen {
  double t0 = 0, t1 = 0;
  std::uint64_t ticks0 = 0, ticks1 = 0;
};

std::vector<Family> families(const UtilRecording& r) {
  std::map<int, int> parent;
  std::map<int, const UtilProcess*> last;
  std::map<int, std::set<int>> minors;
  std::map<std::pair<int, int>, Seen> seen;
  for (const auto& s : r.snapshots) {
    for (const auto& p : s.processes) {
      if (gpu_manager(p.command)) continue;
      parent[p.pid] = p.ppid;
      last[p.pid] = &p;
      minors[p.pid].insert(p.gpu_minors.begin(), p.gpu_minors.end());
      for (const auto& [tid, ticks] : p.thread_ticks) {
        auto [it, fresh] = seen.try_emplace({p.pid, tid}, Seen{s.t, s.t, ticks, ticks});
        if (!fresh) {
          it->second.t1 = s.t;
          it->second.ticks1 = ticks;
        }
      }
    }
  }
  std::map<int, Family> by_root;
  std::map<int, int> root_of;
  for (const auto& [pid, ppid] : parent) {
    int root = pid;
    std::set<int> walked{pid};  // a pid loop in a racy read ends the walk
    while (parent.count(parent[root]) && walked.insert(parent[root]).second) root = parent[root];
    root_of[pid] = root;
    Family& f = by_root[root];
    f.root = root;
    f.pids.insert(pid);
    f.minors.insert(minors[pid].begin(), minors[pid].end());
    if (!minors[pid].empty()) f.gpu_pids.insert(pid);
    f.commands[pid] = last[pid]->command;
    f.parent[pid] = ppid;
  }
  for (const auto& [key, s] : seen) {
    const double dt = s.t1 - s.t0;
    const double used = s.ticks1 >= s.ticks0 ? static_cast<double>(s.ticks1 - s.ticks0) : 0;
    by_root[root_of[key.first]].cores[key] = dt > 0 ? used / r.ticks_per_second / dt : 0;
  }
  std::vector<Family> out;
  for (auto& [root, f] : by_root) {
    if (!f.minors.empty()) out.push_back(std::move(f));
  }
  return out;
}

// What a family does with the CPU: the training process's main thread and how many other
// threads are busy. The training process is the one holding a GPU with the most threads: a CUDA
// process runs several, while forked DataLoader workers (which inherit the GPU files) and
// launchers run one or two. Ties go to the lowest pid, usually the parent.
struct FamilyUse {
  const Family* family = nullptr;
  int main_pid = 0;
  double main_cores = 0, total_cores = 0;
  int other_busy = 0, threads = 0;
  int workers = 0, busy_workers = 0;  // child processes of the training process
};

FamilyUse use_of(const Family& f, const UtilThresholds& t) {
  FamilyUse u;
  u.family = &f;
  std::map<int, int> threads;
  for (const auto& [key, cores] : f.cores) ++threads[key.first];
  int most = -1;
  for (const int pid : f.gpu_pids) {
    if (threads[pid] > most) {
      most = threads[pid];
      u.main_pid = pid;
    }
  }
  std::map<int, bool> busy;  // per child process: any thread busy
  for (const auto& [pid, ppid] : f.parent) {
    if (ppid == u.main_pid) busy[pid] = false;
  }
  for (const auto& [key, cores] : f.cores) {
    if (busy.count(key.first) && cores >= t.busy_thread) busy[key.first] = true;
  }
  u.workers = static_cast<int>(busy.size());
  for (const auto& [pid, b] : busy) u.busy_workers += b ? 1 : 0;
  for (const auto& [key, cores] : f.cores) {
    u.total_cores += cores;
    ++u.threads;
    if (key.first == u.main_pid && key.second == u.main_pid) {
      u.main_cores = cores;
    } else if (cores >= t.busy_thread) {
      ++u.other_busy;
    }
  }
  return u;
}

std::string describe(const FamilyUse& u, const UtilThresholds& t) {
  const Family& f = *u.family;
  return fmt::format(
      "pid {} ({}): main thread of pid {} at {:.0f}% of a core, {} other busy thread(s) (>= "
      "{:.0f}% of a core) of {} in {} process(es), {:.2f} cores in all; {} child process(es) of "
      "pid {}, {} busy",
      f.root, f.commands.at(f.root), u.main_pid, u.main_cores * 100, u.other_busy,
      t.busy_thread * 100, u.threads, f.pids.size(), u.total_cores, u.workers, u.main_pid,
      u.busy_workers);
}

std::string gib(double mib) { return fmt::format("{:.1f} GiB", mib / 1024); }

}  // namespace

std::vector<Finding> check_utilisation(const UtilRecording& r, const UtilThresholds& t) {
  if (r.snapshots.size() < 2) {
    base::fail_input("doctor utilisation: needs at least 2 samples to measure CPU use");
  }
  const UtilSnapshot& first = r.snapshots.front();
  const UtilSnapshot& last = r.snapshots.back();
  const double seconds = last.t - first.t;
  const double total = static_cast<double>(last.cpu_total) - static_cast<double>(first.cpu_total);
  const double idle = static_cast<double>(last.cpu_idle) - static_cast<double>(first.cpu_idle);
  const double host_busy = total > 0 ? std::clamp(1 - idle / total, 0.0, 1.0) : 0;
  const std::string host =
      fmt::format("host CPU {:.0f}% busy of {} cores", host_busy * 100, r.cpus);

  std::vector<Finding> out;
  out.push_back({Severity::kInfo, "util.host",
                 fmt::format("{} samples over {:.1f} s; {}", r.snapshots.size(), seconds, host),
                 fmt::format("/proc/stat; {} clock ticks/s", r.ticks_per_second), ""});

  const auto fams = families(r);
  for (const auto& g : r.gpus) {
    std::vector<double> sm, used, rx, tx;
    for (const auto& s : r.snapshots) {
      for (const auto& reading : s.gpus) {
        if (reading.index != g.index) continue;
        if (reading.sm_util) sm.push_back(*reading.sm_util);
        if (reading.memory_used_mib) used.push_back(*reading.memory_used_mib);
        if (reading.pcie_rx_mbps) rx.push_back(*reading.pcie_rx_mbps);
        if (reading.pcie_tx_mbps) tx.push_back(*reading.pcie_tx_mbps);
      }
    }
    const Stats s = stats(sm), mem = stats(used), in = stats(rx), out_stats = stats(tx);
    const std::string label =
        fmt::format("GPU{}{}", g.index, g.name.empty() ? "" : " (" + g.name + ")");
    std::string evidence = fmt::format(
        "SM {:.0f}% average (min {:.0f}, max {:.0f}, stddev {:.0f}) in {} samples over {:.1f} s",
        s.mean, s.min, s.max, s.stddev, s.n, seconds);
    if (mem.n) {
      evidence += fmt::format("; memory used {}{}", gib(mem.max),
                              g.memory_total_mib ? " of " + gib(*g.memory_total_mib) : "");
    }
    evidence +=
        in.n ? fmt::format("; PCIe RX median {:.0f} MB/s, peak {:.0f} MB/s", in.median, in.max)
             : std::string("; PCIe RX not read");
    if (out_stats.n) evidence += fmt::format(", TX median {:.0f} MB/s", out_stats.median);
    std::vector<FamilyUse> uses;
    for (const auto& f : fams) {
      if (f.minors.count(g.minor)) uses.push_back(use_of(f, t));
    }
    if (uses.empty()) {
      out.push_back(
          {Severity::kInfo, "util.idle", fmt::format("{}: no process has it open", label),
           evidence + fmt::format("; no /proc/PID/fd link to /dev/nvidia{} (as root, every "
                                  "container's processes are seen)",
                                  g.minor),
           ""});
      continue;
    }
    for (const auto& u : uses) evidence += "; " + describe(u, t);
    evidence += "; " + host;
    if (s.n == 0) {
      out.push_back({Severity::kInfo, "util.no-reading",
                     fmt::format("{}: in use, but NVML gave no utilisation", label), evidence, ""});
      continue;
    }
    if (s.mean >= t.starved_below) {
      out.push_back({Severity::kInfo, "util.busy",
                     fmt::format("{}: busy, SM {:.0f}% average", label, s.mean), evidence, ""});
      continue;
    }
    const std::string starved = fmt::format("{} is starved: SM {:.0f}% average (below {:.0f}%)",
                                            label, s.mean, t.starved_below);
    const auto pegged = std::find_if(uses.begin(), uses.end(), [&](const FamilyUse& u) {
      // Idle workers beside a pegged main thread: the workers keep up, so the main thread is
      // busy with something else (issuing kernels: launch-bound).
      const bool idle_workers = u.workers >= t.few_busy_threads && u.busy_workers == 0;
      return u.main_cores >= t.main_pegged && u.other_busy < t.few_busy_threads && !idle_workers;
    });
    const bool bursts =
        in.n > 0 && in.max >= t.burst_min_mbps && in.max >= t.burst_ratio * in.median;
    if (host_busy >= t.host_saturated) {
      out.push_back(
          {Severity::kWarning, "util.cpu-bound",
           fmt::format("{}, and the host's CPUs are saturated ({:.0f}% busy): input preprocessing "
                       "is CPU-bound",
                       starved, host_busy * 100),
           evidence,
           "make preprocessing cheaper (decode smaller images, cache decoded samples), move "
           "augmentation to the GPU (NVIDIA DALI, torchvision transforms on GPU tensors), or give "
           "the job more cores per GPU"});
    } else if (pegged != uses.end()) {
      out.push_back(
          {Severity::kWarning, "util.loader-bound",
           fmt::format("{}, while the main thread of pid {} is pegged at {:.0f}% of a core and {} "
                       "other thread(s) are busy: data loading runs in the main process (too few "
                       "DataLoader workers)",
                       starved, pegged->main_pid, pegged->main_cores * 100, pegged->other_busy),
           evidence,
           "load in worker processes: DataLoader(num_workers=N, persistent_workers=True) with N "
           "up to the cores per GPU, and keep decoding/augmentation in the Dataset so the workers "
           "run it"});
    } else if (s.stddev >= t.alternating_stddev && bursts) {
      out.push_back(
          {Severity::kWarning, "util.copy-bound",
           fmt::format("{}, and it alternates (stddev {:.0f} points) with host-to-device bursts on "
                       "PCIe (peak {:.0f} MB/s, median {:.0f}): input copies are not overlapped "
                       "with compute",
                       starved, s.stddev, in.max, in.median),
           evidence,
           "overlap the copies: DataLoader(pin_memory=True), tensor.to(device, non_blocking=True), "
           "and prefetch the next batch (prefetch_factor, or a copy on a side CUDA stream)"});
    } else {
      out.push_back(
          {Severity::kWarning, "util.launch-bound",
           fmt::format("{}, with neither the host CPU nor input copies busy: each step gives the "
                       "GPU too little work (small batch, launch-bound)",
                       starved),
           evidence,
           "give each step more work: a larger batch per GPU, CUDA graphs (torch.compile "
           "mode=\"reduce-overhead\"), and fewer host synchronisations per step (.item(), "
           "printing tensors)"});
    }
  }
  return out;
}

}  // namespace gpuorch::doctor
