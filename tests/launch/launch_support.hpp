#pragma once
// Shared by the launcher tests: golden files under tests/fixtures/launch/, the recorded fixture
// hosts, child processes that run side by side (two "nodes"), and a loopback etcd.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gpuorch/launch/etcd_client.hpp"
#include "gpuorch/launch/net.hpp"
#include "support/paths.hpp"

extern char** environ;

namespace gpuorch::launch_test {

namespace fs = std::filesystem;

inline std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline fs::path launch_fixture(const std::string& name) {
  return fs::path(::gpuorch::test::fixtures_dir()) / "launch" / name;
}

inline std::string topo_json(const std::string& host) {
  return (fs::path(::gpuorch::test::fixtures_dir()) / "topo" / host / "expected" / "topo.json")
      .string();
}

// Compares with tests/fixtures/launch/<name>; GPUORCH_UPDATE_GOLDEN=1 rewrites it.
inline std::string golden(const std::string& name, const std::string& actual) {
  const auto path = launch_fixture(name);
  if (const char* u = std::getenv("GPUORCH_UPDATE_GOLDEN"); u && std::string(u) == "1") {
    std::ofstream(path, std::ios::binary) << actual;
  }
  return read_file(path);
}

// A shell command running in the background, output to files.
class Child {
 public:
  Child(const std::string& command, const fs::path& out, const fs::path& err) {
    const std::string sh = "exec " + command + " >'" + out.string() + "' 2>'" + err.string() + "'";
    const char* argv[] = {"/bin/sh", "-c", sh.c_str(), nullptr};
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    if (posix_spawn(&pid_, "/bin/sh", nullptr, &attr, const_cast<char**>(argv), environ) != 0) {
      pid_ = -1;
    }
    posix_spawnattr_destroy(&attr);
  }
  ~Child() {
    if (pid_ > 0 && !exited_) {
      ::kill(pid_, SIGKILL);
      int s = 0;
      ::waitpid(pid_, &s, 0);
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  [[nodiscard]] pid_t pid() const { return pid_; }
  void signal(int sig) const { ::kill(pid_, sig); }

  // The exit code (128 + N for signal N), or nullopt after `limit`.
  std::optional<int> wait(std::chrono::milliseconds limit) {
    if (exited_) return code_;
    const auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
      int s = 0;
      const pid_t r = ::waitpid(pid_, &s, WNOHANG);
      if (r == pid_) {
        exited_ = true;
        code_ = WIFEXITED(s) ? WEXITSTATUS(s) : 128 + WTERMSIG(s);
        return code_;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return std::nullopt;
  }

 private:
  pid_t pid_ = -1;
  bool exited_ = false;
  int code_ = -1;
};

inline bool have_etcd() { return ::access("/usr/bin/etcd", X_OK) == 0; }
// Debian's python3-torch with its distributed package (DDP and TCPStore), checked once.
inline bool have_torch() {
  static const bool yes =
      std::system("/usr/bin/python3 -c 'import torch.distributed' >/dev/null 2>&1") == 0;
  return yes;
}

// etcd on loopback with its data in `dir`, stopped (and its data removed) at scope exit.
class LoopbackEtcd {
 public:
  explicit LoopbackEtcd(const fs::path& dir) {
    client_port_ = launch::pick_free_port("127.0.0.1");
    const int peer = launch::pick_free_port("127.0.0.1");
    const std::string c = "http://127.0.0.1:" + std::to_string(client_port_);
    const std::string p = "http://127.0.0.1:" + std::to_string(peer);
    fs::create_directories(dir);
    child_.emplace("/usr/bin/etcd --name gpuorch-test --data-dir '" + (dir / "data").string() +
                       "' --listen-client-urls " + c + " --advertise-client-urls " + c +
                       " --listen-peer-urls " + p + " --initial-advertise-peer-urls " + p +
                       " --initial-cluster gpuorch-test=" + p + " --log-level error",
                   dir / "etcd.out", dir / "etcd.err");
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < end) {
      try {
        launch::EtcdClient probe(endpoint(), std::chrono::milliseconds(500));
        probe.get("/probe");
        ready_ = true;
        break;
      } catch (const std::exception&) {
      }
      if (child_->wait(std::chrono::milliseconds(100))) break;
    }
  }
  [[nodiscard]] bool ready() const { return ready_; }
  [[nodiscard]] std::string endpoint() const { return "127.0.0.1:" + std::to_string(client_port_); }

 private:
  int client_port_ = 0;
  bool ready_ = false;
  std::optional<Child> child_;
};

}  // namespace gpuorch::launch_test
