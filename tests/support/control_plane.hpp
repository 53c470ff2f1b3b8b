#pragma once
// The upstream Kubernetes control plane for tests: etcd + kube-apiserver (and kube-scheduler on
// demand) of scripts/k8s-testenv (docs/k8s-testenv.md), one per test process. ctest runs every
// test in its own process (gtest_discover_tests), so each process starts its own control plane in
// its own temp folder on its own free loopback ports; a start takes about 3 s, so tests that need
// one are grouped into few TEST()s. Nothing skips: the binaries are built on first use (a no-op
// once cached; scripts/test builds them before ctest).
//
// The servers stop when the process exits (static destructor), and, should it die without running
// destructors (SIGKILL, a ctest timeout), by the script's watchdog, which watches this process.
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "support/paths.hpp"

namespace gpuorch::test {

class ControlPlane {
 public:
  // Starts etcd + kube-apiserver once per test process (scripts/k8s-testenv build, then start
  // into a fresh temp dir); stopped at process exit. Throws std::runtime_error with the script's
  // output on failure (and tries again on the next call).
  static ControlPlane& shared() {
    static ControlPlane plane;
    return plane;
  }

  ControlPlane(const ControlPlane&) = delete;
  ControlPlane& operator=(const ControlPlane&) = delete;

  ~ControlPlane() {
    // A forked child that exits through exit() runs this too: only the starting process stops.
    if (::getpid() != owner_) return;
    run_script("stop");
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  const std::string& dir() const { return dir_; }
  const std::string& kubeconfig() const { return kubeconfig_; }              // admin, client cert
  const std::string& token_kubeconfig() const { return token_kubeconfig_; }  // admin, bearer token
  const std::string& nobody_kubeconfig() const { return nobody_kubeconfig_; }  // no RBAC rights
  const std::string& server() const { return server_; }    // https://127.0.0.1:PORT
  const std::string& ca_file() const { return ca_file_; }  // PEM of the cluster CA
  const std::string& admin_token() const { return admin_token_; }

  // Stops kube-apiserver and starts it again on the same port with the same certificates and
  // the same etcd data; returns once /readyz answers.
  void restart_apiserver() {
    const std::lock_guard<std::mutex> lock(mutex_);
    check("restart-apiserver", run_script("restart-apiserver"));
  }

  // The upstream kube-scheduler, default profile, leader election off; once per process.
  void start_kube_scheduler() {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (scheduler_started_) return;
    check("scheduler", run_script("scheduler"));
    scheduler_started_ = true;
  }

  // kube-controller-manager (scripts/k8s-testenv controller-manager: the workload controllers,
  // ServiceAccounts and their CA, garbage collection; never the node lifecycle controller), with
  // the API server restarted once with ServiceAccount admission on (pods get tokens). Once per
  // process; stopped with the control plane.
  void start_controller_manager() {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (controller_manager_started_) return;
    check("controller-manager", run_script("controller-manager"));
    controller_manager_started_ = true;
  }

  // An OCI image layout (scripts/build-image's build/image/oci) imported into every real node,
  // and every node added later, as REPOSITORY:TAG for each tag of the layout.
  void import_image(const std::string& layout, const std::string& repository) {
    const std::lock_guard<std::mutex> lock(mutex_);
    check("import-image",
          run_args("import-image " + quote(dir_) + ' ' + quote(layout) + ' ' + quote(repository),
                   "import-image"));
  }

  // Why this machine cannot run real nodes (`scripts/k8s-testenv node check`: not root, a
  // package missing, no cgroup v1, no kubelet and no Go); empty when it can. Tests skip on it.
  static std::string real_nodes_unavailable() {
    std::string command = quote(script());
    command += " node check 2>&1";
    std::string out;
    FILE* pipe = ::popen(command.c_str(), "r");
    if (pipe == nullptr) return "popen failed";
    char buf[512];
    while (std::fgets(buf, sizeof buf, pipe) != nullptr) out += buf;
    const int status = ::pclose(pipe);
    if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0) return {};
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out.empty() ? "scripts/k8s-testenv node check failed" : out;
  }

  // A real node (`scripts/k8s-testenv node add DIR NAME FLAGS...`: kubelet + containerd, Ready,
  // InternalIP 127.0.0.1; with --gpus-from, the device plugin's GPUs in allocatable); removed
  // with the control plane, or by the script's reaper should this process die. Returns the
  // script's output; throws std::runtime_error with it on failure.
  std::string add_node(const std::string& name, const std::vector<std::string>& flags = {}) {
    return node_command("add", name, flags);
  }

  // Stops node NAME and checks that nothing of it is left (processes, mounts, cgroups, bridge).
  std::string remove_node(const std::string& name) { return node_command("remove", name); }

  // Restarts node NAME's kubelet (its containers keep running); returns once it answers /healthz
  // and, on a node with GPUs, the device plugin has registered with it again.
  std::string restart_kubelet(const std::string& name) {
    return node_command("restart-kubelet", name);
  }

  // Kueue's controller (scripts/k8s-testenv kueue-build, then kueue): its CRDs, its webhooks
  // (called by URL on a loopback port) and its manager with the pod integration; returns once
  // its pod webhook gates a pod. Once per process; stopped with the control plane.
  void start_kueue() {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (kueue_started_) return;
    check("kueue-build", run_script("kueue-build"));
    check("kueue", run_script("kueue"));
    kueue_started_ = true;
  }

 private:
  struct Result {
    int exit_code = -1;
    std::string output;
  };

  ControlPlane() : owner_(::getpid()) {
    std::string pattern = (std::filesystem::temp_directory_path() / "gpuorch-k8s-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw std::runtime_error("ControlPlane: mkdtemp failed: " + std::to_string(errno));
    }
    dir_ = pattern;
    try {
      check("build", run_script("build"));
      check("start", run_script("start"));
      kubeconfig_ = dir_ + "/kubeconfig";
      token_kubeconfig_ = dir_ + "/kubeconfig-token";
      nobody_kubeconfig_ = dir_ + "/kubeconfig-nobody";
      ca_file_ = dir_ + "/pki/ca.crt";
      admin_token_ = first_line(dir_ + "/admin-token");
      server_ = env_value("APISERVER_URL");
      if (server_.empty() || admin_token_.empty()) {
        throw std::runtime_error("ControlPlane: " + dir_ + "/env lacks APISERVER_URL or a token");
      }
    } catch (...) {
      run_script("stop");
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
      throw;
    }
  }

  static std::string quote(const std::string& s) {
    std::string q = "'";
    for (const char c : s) {
      if (c == '\'') {
        q += "'\\''";
      } else {
        q.push_back(c);
      }
    }
    return q + "'";
  }

  static std::string script() {
    return (std::filesystem::path(::gpuorch::test::source_dir()) / "scripts" / "k8s-testenv")
        .string();
  }

  // scripts/k8s-testenv VERB [DIR], its stdout and stderr together; the servers it starts watch
  // this process (GPUORCH_K8S_WATCH_PID), not the short-lived shell in between.
  Result run_script(const std::string& verb) const {
    std::string args = verb;
    if (verb != "build" && verb != "kueue-build") {
      args += ' ';
      args += quote(dir_);
    }
    return run_args(args, verb);
  }

  // scripts/k8s-testenv node SUB DIR NAME FLAGS...; its output, or std::runtime_error with it.
  std::string node_command(const std::string& sub, const std::string& name,
                           const std::vector<std::string>& flags = {}) {
    const std::lock_guard<std::mutex> lock(mutex_);
    std::string args = "node ";
    args += sub;
    args += ' ';
    args += quote(dir_);
    args += ' ';
    args += quote(name);
    for (const auto& f : flags) {
      args += ' ';
      args += quote(f);
    }
    std::string log_name = "node-";
    log_name += sub;
    Result r = run_args(args, log_name);
    log_name[4] = ' ';  // "node SUB" in the message
    check(log_name, r);
    return r.output;
  }

  // scripts/k8s-testenv ARGS (already quoted), watched by this process.
  Result run_args(const std::string& args, const std::string& name) const {
    std::string log = dir_;
    log += "/.fixture-";
    log += name;
    log += ".out";
    std::string command = "GPUORCH_K8S_WATCH_PID=";
    command += std::to_string(owner_);
    command += ' ';
    command += quote(script());
    command += ' ';
    command += args;
    return run_shell(command, log);
  }

  static Result run_shell(std::string command, const std::string& log) {
    command += " >";
    command += quote(log);
    command += " 2>&1 </dev/null";
    const int status = std::system(command.c_str());
    Result r;
    if (status != -1 && WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
    std::ifstream in(log, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    r.output = text.str();
    std::error_code ec;
    std::filesystem::remove(log, ec);
    return r;
  }

  static void check(const std::string& verb, const Result& r) {
    if (r.exit_code == 0) return;
    throw std::runtime_error("scripts/k8s-testenv " + verb + " failed (exit " +
                             std::to_string(r.exit_code) + "):\n" + r.output);
  }

  static std::string first_line(const std::string& path) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    return line;
  }

  // KEY's value in DIR/env (written unquoted for URLs, ports and pids).
  std::string env_value(const std::string& key) const {
    std::ifstream in(dir_ + "/env");
    for (std::string line; std::getline(in, line);) {
      if (line.rfind(key + "=", 0) == 0) return line.substr(key.size() + 1);
    }
    return {};
  }

  pid_t owner_;
  std::string dir_;
  std::string kubeconfig_;
  std::string token_kubeconfig_;
  std::string nobody_kubeconfig_;
  std::string server_;
  std::string ca_file_;
  std::string admin_token_;
  bool scheduler_started_ = false;
  bool kueue_started_ = false;
  bool controller_manager_started_ = false;
  std::mutex mutex_;
};

}  // namespace gpuorch::test
