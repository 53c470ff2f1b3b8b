#include "gpuorch/comm/host_launch.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <fstream>
#include <iterator>
#include <thread>

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

// Everything the child needs is built before fork: between fork and exec only async-signal-safe
// calls are allowed (the store's thread may hold the allocator's lock).
struct Exec {
  std::vector<std::string> args, env;
  std::vector<char*> argv, envp;
  void seal() {
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
  }
};

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
  std::vector<Exec> execs(static_cast<std::size_t>(np));
  for (int r = 0; r < np; ++r) {
    Exec& x = execs[static_cast<std::size_t>(r)];
    x.args = argv;
    for (char** e = environ; *e; ++e) {
      if (!starts_with_any(*e, ours)) x.env.emplace_back(*e);
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
      x.env.push_back(std::move(entry));
    }
    x.seal();
  }
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t parent = ::getpid();
  std::vector<Child> children;
  auto kill_all = [&] {
    for (auto& c : children) {
      if (!c.done) ::kill(c.pid, SIGKILL);
    }
    for (auto& c : children) {
      if (!c.done && ::waitpid(c.pid, &c.status, 0) == c.pid) c.done = true;
    }
  };
  for (int r = 0; r < np; ++r) {
    Exec& x = execs[static_cast<std::size_t>(r)];
    const pid_t pid = ::fork();
    if (pid < 0) {
      const std::string why = std::strerror(errno);
      kill_all();
      throw std::runtime_error(fmt::format("cannot start rank {}: fork: {}", r, why));
    }
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(1);  // the launcher is already gone
      if (r != 0) {
        const int null = ::open("/dev/null", O_WRONLY);
        if (null >= 0) ::dup2(null, STDOUT_FILENO);
      }
      ::execve("/proc/self/exe", x.argv.data(), x.envp.data());
      ::_exit(127);
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
      const pid_t got = ::waitpid(c.pid, &c.status, WNOHANG);
      if (got == c.pid) {
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
