#include "gpuorch/launch/run_cgroup.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

namespace gpuorch::launch {
namespace {

// Where cgroup2 is mounted: /sys/fs/cgroup on a unified host, /sys/fs/cgroup/unified on a
// hybrid one. Empty when it is not mounted.
std::string cgroup2_mount() {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    // "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [TAGS] - FSTYPE SOURCE SUPEROPTS"
    const auto dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream rest(line.substr(dash + 3));
    std::string fstype;
    rest >> fstype;
    if (fstype != "cgroup2") continue;
    std::istringstream head(line.substr(0, dash));
    std::string id, parent, dev, root, mount;
    head >> id >> parent >> dev >> root >> mount;
    if (root == "/") return mount;
  }
  return {};
}

// This process's cgroup2 path ("0::/PATH" in /proc/self/cgroup).
std::string own_cgroup() {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("0::", 0) == 0) return line.substr(3);
  }
  return {};
}

std::vector<int> read_members(const std::string& path) {
  std::ifstream in(path + "/cgroup.procs");
  std::vector<int> pids;
  int pid = 0;
  while (in >> pid) pids.push_back(pid);
  return pids;
}

}  // namespace

std::unique_ptr<RunCgroup> RunCgroup::create(const std::string& name, std::string& why_not) {
  if (const char* v = std::getenv("GPUORCH_LAUNCH_CGROUP"); v && std::string(v) == "off") {
    why_not = "GPUORCH_LAUNCH_CGROUP=off";
    return nullptr;
  }
  const std::string mount = cgroup2_mount();
  if (mount.empty()) {
    why_not = "no cgroup2 hierarchy mounted";
    return nullptr;
  }
  std::string own = own_cgroup();
  if (own == "/") own.clear();
  std::vector<std::string> parents{mount + own};
  if (!own.empty()) parents.push_back(mount);
  why_not.clear();
  for (const auto& parent : parents) {
    const std::string path = fmt::format("{}/{}", parent, name);
    if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
      why_not += fmt::format("{}{}: {}", why_not.empty() ? "" : "; ", path, std::strerror(errno));
      continue;
    }
    std::unique_ptr<RunCgroup> cg(new RunCgroup);
    cg->path_ = path;
    cg->procs_fd_ = ::open((path + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
    cg->kill_fd_ = ::open((path + "/cgroup.kill").c_str(), O_WRONLY | O_CLOEXEC);
    if (cg->procs_fd_ < 0) {
      why_not += fmt::format("{}{}/cgroup.procs: {}", why_not.empty() ? "" : "; ", path,
                             std::strerror(errno));
      continue;  // the destructor removes the folder
    }
    return cg;
  }
  return nullptr;
}

int RunCgroup::members() const { return static_cast<int>(read_members(path_).size()); }

bool RunCgroup::kill_all() {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (;;) {
    const auto pids = read_members(path_);
    if (pids.empty()) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    if (kill_fd_ >= 0) {
      [[maybe_unused]] const auto n = ::write(kill_fd_, "1", 1);
    } else {
      for (const int pid : pids) ::kill(pid, SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

RunCgroup::~RunCgroup() {
  kill_all();
  if (procs_fd_ >= 0) ::close(procs_fd_);
  if (kill_fd_ >= 0) ::close(kill_fd_);
  // Empty once its members are reaped (their zombies still count): the agent reaped them.
  for (int i = 0; i < 200 && ::rmdir(path_.c_str()) != 0 && errno == EBUSY; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace gpuorch::launch
