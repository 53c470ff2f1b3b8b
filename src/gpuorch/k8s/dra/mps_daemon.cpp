#include "gpuorch/k8s/dra/mps_daemon.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <thread>
#include <vector>

#include "gpuorch/base/child_process.hpp"
#include "gpuorch/base/printable.hpp"
#include "gpuorch/base/read_file.hpp"
#include "gpuorch/base/subprocess.hpp"

namespace gpuorch::k8s::dra {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;

std::string pipe_dir(const std::string& root) { return (fs::path(root) / "pipe").string(); }
std::string log_dir(const std::string& root) { return (fs::path(root) / "log").string(); }
std::string shm_dir(const std::string& root) { return (fs::path(root) / "shm").string(); }

std::string control_path(const MpsOptions& o) {
  if (o.control.find('/') != std::string::npos) return o.control;
  if (auto found = base::find_in_path(o.control)) return *found;
  throw std::runtime_error(
      fmt::format("MPS: {} was not found on PATH (--mps-control names it)", o.control));
}

std::vector<std::pair<std::string, std::string>> daemon_env(const std::string& root) {
  return {{"CUDA_MPS_PIPE_DIRECTORY", pipe_dir(root)}, {"CUDA_MPS_LOG_DIRECTORY", log_dir(root)}};
}

// One command through the control interface; its answer, or throws.
std::string command(const MpsOptions& o, const std::string& root, const std::string& line) {
  const auto r = base::run_child({control_path(o)}, daemon_env(root), {}, o.timeout, line + "\n");
  if (r.timed_out) {
    throw std::runtime_error(
        fmt::format("MPS control `{}` gave no answer within {} ms", line, o.timeout.count()));
  }
  if (r.code != 0) {
    throw std::runtime_error(fmt::format("MPS control `{}` exited with {}: {}", line, r.code,
                                         base::quoted_printable(r.out + r.err, 300)));
  }
  return r.out;
}

// Runs `-f` in a mount namespace of its own whose /dev/shm is the claim's folder, and waits until
// it answers; its pid.
pid_t spawn_daemon(const MpsOptions& o, const PreparedSharing& s);

// Until `answers` is `wanted` or o.timeout has passed, pausing 50 ms doubling to 1 s.
bool wait_until(const MpsOptions& o, const std::string& root, bool wanted) {
  const auto deadline = std::chrono::steady_clock::now() + o.timeout;
  auto pause = 50ms;
  for (;;) {
    if (mps_daemon_answers(o, root) == wanted) return true;
    if (std::chrono::steady_clock::now() + pause > deadline) return false;
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::milliseconds>(pause * 2, 1s);
  }
}

void configure(const MpsOptions& o, const PreparedSharing& s) {
  if (s.mps_active_thread_percentage) {
    command(
        o, s.mps_root,
        fmt::format("set_default_active_thread_percentage {}", *s.mps_active_thread_percentage));
  }
  for (const auto& [uuid, mib] : s.mps_pinned_mib) {
    command(o, s.mps_root, fmt::format("set_default_device_pinned_mem_limit {} {}M", uuid, mib));
  }
}

pid_t spawn_daemon(const MpsOptions& o, const PreparedSharing& s) {
  std::string devices;
  for (const auto& d : s.mps_devices) devices += (devices.empty() ? "" : ",") + d;
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    const std::string name = entry.substr(0, entry.find('='));
    if (name != "CUDA_VISIBLE_DEVICES" && name != "CUDA_MPS_PIPE_DIRECTORY" &&
        name != "CUDA_MPS_LOG_DIRECTORY") {
      env.push_back(entry);
    }
  }
  env.push_back("CUDA_VISIBLE_DEVICES=" + devices);
  for (const auto& [k, v] : daemon_env(s.mps_root)) env.push_back(k + "=" + v);
  const std::string out_path = (fs::path(log_dir(s.mps_root)) / "start.out").string();
  const int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0) throw std::runtime_error(fmt::format("MPS: cannot write {}", out_path));
  const std::string shm = shm_dir(s.mps_root);
  base::SpawnOptions so;
  so.path = control_path(o);
  so.argv = {so.path, "-f"};
  so.env = std::move(env);
  so.stdin_fd = base::SpawnOptions::kDevNull;
  so.stdout_fd = out;
  so.stderr_fd = out;
  so.group = base::ProcessGroup::kNewSession;  // the driver's signals are not the daemon's
  so.in_child = [shm_path = shm.c_str()](const base::ChildSteps& steps) {
    if (::unshare(CLONE_NEWNS) != 0) return steps.failed(1, errno);
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
      return steps.failed(2, errno);
    }
    if (::mount(shm_path, "/dev/shm", nullptr, MS_BIND, nullptr) != 0) steps.failed(3, errno);
  };
  base::Spawned child;
  try {
    child = base::spawn(so);
  } catch (...) {
    ::close(out);
    throw;
  }
  ::close(out);
  const auto said = [&out_path] {
    std::string problem;
    return base::quoted_printable(base::read_bounded(out_path, 4096, problem).value_or(""), 300);
  };
  const auto end_child = [&] {
    base::signal_group(child.pid, SIGKILL);
    base::wait(child.pid);
  };
  if (!child.failed_steps.empty()) {
    // It runs, in the wrong /dev/shm: stopped before saying so.
    end_child();
    static constexpr const char* kSteps[] = {"", "unshare(CLONE_NEWNS)", "making / private",
                                             "bind-mounting the claim's shm folder on /dev/shm"};
    const auto& f = child.failed_steps.front();
    throw std::runtime_error(fmt::format("MPS: {} failed: {} (the driver must run as root)",
                                         kSteps[f.step], std::strerror(f.error)));
  }
  const auto deadline = std::chrono::steady_clock::now() + o.timeout;
  auto pause = 20ms;
  for (;;) {
    if (const auto status = base::try_wait(child.pid)) {
      throw std::runtime_error(fmt::format("MPS: {} -f exited with {}: {}", so.path,
                                           base::exit_code_of_status(*status), said()));
    }
    if (mps_daemon_answers(o, s.mps_root)) return child.pid;
    if (std::chrono::steady_clock::now() + pause > deadline) {
      end_child();
      throw std::runtime_error(fmt::format("MPS: the daemon in {} did not answer within {} ms: {}",
                                           pipe_dir(s.mps_root), o.timeout.count(), said()));
    }
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::milliseconds>(pause * 2, 500ms);
  }
}

}  // namespace

bool mps_daemon_answers(const MpsOptions& o, const std::string& root) {
  std::error_code ec;
  if (!fs::exists(pipe_dir(root), ec)) return false;
  try {
    command(o, root, "get_server_list");
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

pid_t start_mps_daemon(const MpsOptions& o, const PreparedSharing& s) {
  pid_t pid = -1;
  if (!mps_daemon_answers(o, s.mps_root)) {
    for (const auto& d : {pipe_dir(s.mps_root), log_dir(s.mps_root), shm_dir(s.mps_root)}) {
      std::error_code ec;
      fs::create_directories(d, ec);
      if (ec) throw std::runtime_error(fmt::format("MPS: cannot create {}: {}", d, ec.message()));
    }
    pid = spawn_daemon(o, s);
    if (o.log) {
      o.log(fmt::format("MPS control daemon {} started in {} for {}", pid, s.mps_root,
                        fmt::join(s.mps_devices, ",")));
    }
  }
  try {
    configure(o, s);
  } catch (...) {
    try {
      stop_mps_daemon(o, s.mps_root, pid);
    } catch (const std::exception&) {
    }
    throw;
  }
  return pid;
}

void stop_mps_daemon(const MpsOptions& o, const std::string& root, pid_t child) {
  std::error_code ec;
  if (mps_daemon_answers(o, root)) {
    try {
      command(o, root, "quit");
    } catch (const std::exception&) {
      // It may have gone between the two commands; the wait below says.
    }
    if (!wait_until(o, root, false)) {
      throw std::runtime_error(fmt::format("MPS: the daemon in {} still answers {} ms after quit",
                                           pipe_dir(root), o.timeout.count()));
    }
    if (o.log) o.log(fmt::format("MPS control daemon in {} stopped", root));
  }
  // Our child: reaped, so no zombie stays behind (it answers no more; one that does not end
  // within a second is stuck, and killed).
  if (child > 0 && !base::wait_for(child, 1s)) {
    base::signal_group(child, SIGKILL);
    base::wait(child);
  }
  fs::remove_all(root, ec);
  if (ec) throw std::runtime_error(fmt::format("MPS: cannot remove {}: {}", root, ec.message()));
}

json mps_container_edits(const PreparedSharing& s) {
  if (s.mps_devices.empty()) return json::object();
  json env = json::array({fmt::format("CUDA_MPS_PIPE_DIRECTORY={}", kMpsContainerPipeDir)});
  if (s.mps_active_thread_percentage) {
    env.push_back(
        fmt::format("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE={}", *s.mps_active_thread_percentage));
  }
  const json options = json::array({"rw", "nosuid", "nodev", "bind"});
  return {{"env", env},
          {"mounts", json::array({{{"hostPath", pipe_dir(s.mps_root)},
                                   {"containerPath", kMpsContainerPipeDir},
                                   {"options", options}},
                                  {{"hostPath", shm_dir(s.mps_root)},
                                   {"containerPath", "/dev/shm"},
                                   {"options", options}}})}};
}

}  // namespace gpuorch::k8s::dra
