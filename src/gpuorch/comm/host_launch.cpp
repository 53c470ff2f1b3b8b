#include "gpuorch/comm/host_launch.hpp"

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <fstream>
#include <iterator>
#include <thread>

#include "gpuorch/base/subprocess.hpp"
#include "gpuorch/comm/tcp_store.hpp"

namespace gpuorch::comm::host {
namespace {

struct Child {
  int rank = 0;
  pid_t pid = -1;
  bool done = false;
  int status = 0;
};

bool starts_with_any(const std::string& s, const std::vector<std::string>& names) {
  for (const auto& n : names) {
    if (s.rfind(n + "=", 0) == 0) return true;
  }
  return false;
}

std::string describe(const Child& c) {
  if (WIFSIGNALED(c.status)) {
    const int sig = WTERMSIG(c.status);
    return fmt::format("rank {} (pid {}) was killed by signal {} ({})", c.rank, c.pid, sig,
                       ::strsignal(sig));
  }
  return fmt::format("rank {} (pid {}) exited with code {}", c.rank, c.pid, WEXITSTATUS(c.status));
}

}  // namespace

std::vector<std::string> own_command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> out;
  std::string cur;
  for (char ch : all) {
    if (ch == '\0') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += ch;
    }
  }
  return out;
}

int launch_local(int np, const std::vector<std::string>& argv, std::chrono::milliseconds grace) {
  TcpStoreServer store("127.0.0.1", 0);
  const std::vector<std::string> ours{"RANK",
                                      "WORLD_SIZE",
                                      "LOCAL_RANK",
                                      "LOCAL_WORLD_SIZE",
                                      "MASTER_ADDR",
                                      "MASTER_PORT",
                                      "TORCHELASTIC_USE_AGENT_STORE",
                                      kLaunchedVar};
  std::vector<base::SpawnOptions> ranks(static_cast<std::size_t>(np));
  for (int r = 0; r < np; ++r) {
    base::SpawnOptions& x = ranks[static_cast<std::size_t>(r)];
    x.path = "/proc/self/exe";
    x.argv = argv;
    x.death_signal = SIGKILL;
    if (r != 0) x.stdout_fd = base::SpawnOptions::kDevNull;
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) {
      if (!starts_with_any(*e, ours)) env.emplace_back(*e);
    }
    for (const auto& [k, v] : std::vector<std::pair<std::string, std::string>>{
             {"RANK", std::to_string(r)},
             {"WORLD_SIZE", std::to_string(np)},
             {"LOCAL_RANK", std::to_string(r)},
             {"LOCAL_WORLD_SIZE", std::to_string(np)},
             {"MASTER_ADDR", "127.0.0.1"},
             {"MASTER_PORT", std::to_string(store.port())},
             {"TORCHELASTIC_USE_AGENT_STORE", "True"},
             {kLaunchedVar, "1"}}) {
      std::string entry = k;
      entry.append("=").append(v);
      env.push_back(std::move(entry));
    }
    x.env = std::move(env);
  }
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<Child> children;
  auto kill_all = [&] {
    for (auto& c : children) {
      if (!c.done) ::kill(c.pid, SIGKILL);
    }
    for (auto& c : children) {
      if (!c.done) {
        c.status = base::wait(c.pid);
        c.done = true;
      }
    }
  };
  for (int r = 0; r < np; ++r) {
    pid_t pid = -1;
    try {
      pid = base::spawn(ranks[static_cast<std::size_t>(r)]).pid;
    } catch (const base::SpawnError& e) {
      kill_all();
      throw std::runtime_error(fmt::format("cannot start rank {}: {}", r, e.what()));
    }
    children.push_back({r, pid, false, 0});
  }

  // Wait for all; after the first failure, give the rest `grace` before stopping them.
  const Child* first_failure = nullptr;
  std::chrono::steady_clock::time_point stop_at{};
  for (;;) {
    bool running = false;
    for (auto& c : children) {
      if (c.done) continue;
      if (const auto status = base::try_wait(c.pid)) {
        c.status = *status;
        c.done = true;
        const bool failed = !WIFEXITED(c.status) || WEXITSTATUS(c.status) != 0;
        if (failed && !first_failure) {
          first_failure = &c;
          stop_at = std::chrono::steady_clock::now() + grace;
        }
      } else {
        running = true;
      }
    }
    if (!running) break;
    if (first_failure && std::chrono::steady_clock::now() >= stop_at) {
      int stopped = 0;
      for (const auto& c : children) stopped += c.done ? 0 : 1;
      // The root cause: a rank killed by a signal made its peers fail, not the other way round;
      // which of them this loop reaped first is an accident of the 10 ms poll on a loaded host.
      const Child* cause = first_failure;
      for (const auto& c : children) {
        if (c.done && WIFSIGNALED(c.status)) {
          cause = &c;
          break;
        }
      }
      kill_all();
      fmt::print(stderr, "gpuorch bench: {}; stopped the {} rank{} still running after {} s\n",
                 describe(*cause), stopped, stopped == 1 ? "" : "s",
                 static_cast<double>(grace.count()) / 1000.0);
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  int code = 0;
  for (const auto& c : children) {
    if (WIFSIGNALED(c.status)) {
      fmt::print(stderr, "gpuorch bench: {}\n", describe(c));
      return 1;
    }
    code = std::max(code, WEXITSTATUS(c.status));
  }
  return code;
}

}  // namespace gpuorch::comm::host
