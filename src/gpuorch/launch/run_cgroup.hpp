#pragma once
// A cgroup v2 child per run holding the workers and everything they start: cgroup.kill ends
// all of it at once, whatever sessions or parents those processes have, and the guardian can do
// the same when the agent itself was killed. Made under the agent's own cgroup (a delegated
// subtree) or, failing that, at the root of the cgroup2 mount (root in a CI container).
// docs/launch.md, "No orphans".
#include <memory>
#include <string>

namespace gpuorch::launch {

class RunCgroup {
 public:
  // nullopt-like: nullptr and `why_not` when no cgroup2 hierarchy can be written here, or the
  // environment says GPUORCH_LAUNCH_CGROUP=off.
  static std::unique_ptr<RunCgroup> create(const std::string& name, std::string& why_not);
  ~RunCgroup();  // ends what is left, removes the folder
  RunCgroup(const RunCgroup&) = delete;
  RunCgroup& operator=(const RunCgroup&) = delete;

  [[nodiscard]] const std::string& path() const { return path_; }
  // cgroup.procs open for writing: a child writes "0" to move itself (SpawnSpec::cgroup_procs_fd).
  [[nodiscard]] int procs_fd() const { return procs_fd_; }
  // cgroup.kill open for writing; -1 before Linux 5.14 (then kill_all signals each member).
  [[nodiscard]] int kill_fd() const { return kill_fd_; }

  // SIGKILL to every process in the cgroup; waits (up to 5 s) until it is empty. False when
  // some are still there.
  bool kill_all();
  [[nodiscard]] int members() const;

 private:
  RunCgroup() = default;
  std::string path_;
  int procs_fd_ = -1;
  int kill_fd_ = -1;
};

}  // namespace gpuorch::launch
