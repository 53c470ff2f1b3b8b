#include "gpuorch/base/child_process.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "gpuorch/base/subprocess.hpp"

namespace gpuorch::base {

ChildResult run_child(const std::vector<std::string>& argv,
                      const std::vector<std::pair<std::string, std::string>>& set,
                      const std::vector<std::string>& unset, std::chrono::milliseconds timeout,
                      std::string_view input) {
  if (input.size() > 65536) throw std::runtime_error("run_child: more than 64 KiB of input");
  int in[2] = {-1, -1};
  if (!input.empty() && ::pipe2(in, O_CLOEXEC) != 0) throw std::runtime_error(std::strerror(errno));
  const auto close_in = [&in] {
    for (int& fd : in) {
      if (fd >= 0) ::close(fd);
      fd = -1;
    }
  };
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    close_in();
    throw std::runtime_error(std::strerror(errno));
  }
  if (::pipe2(err, O_CLOEXEC) != 0) {
    close_in();
    ::close(out[0]);
    ::close(out[1]);
    throw std::runtime_error(std::strerror(errno));
  }
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    const std::string name = entry.substr(0, entry.find('='));
    const bool dropped =
        std::find(unset.begin(), unset.end(), name) != unset.end() ||
        std::any_of(set.begin(), set.end(), [&](const auto& kv) { return kv.first == name; });
    if (!dropped) env.push_back(entry);
  }
  for (const auto& [k, v] : set) env.push_back(k + "=" + v);
  base::SpawnOptions o;
  o.path = argv.empty() ? std::string() : argv.front();
  o.argv = argv;
  o.env = std::move(env);
  if (!input.empty()) o.stdin_fd = in[0];
  o.stdout_fd = out[1];
  o.stderr_fd = err[1];
  // Its own group: a timeout stops what the child started too.
  o.group = base::ProcessGroup::kNewGroup;
  pid_t pid = -1;
  try {
    pid = base::spawn(o).pid;
  } catch (const base::SpawnError& e) {
    for (const int fd : {out[0], out[1], err[0], err[1]}) ::close(fd);
    close_in();
    if (!e.in_child) throw;
    ChildResult r;  // as a shell reports it: the program is there to blame, not the caller
    r.code = 127;
    r.err = std::string(e.what()) + "\n";
    return r;
  }
  ::close(out[1]);
  ::close(err[1]);
  if (!input.empty()) {
    ::close(in[0]);
    in[0] = -1;
    // The whole input fits in the pipe: this never waits for the child. A child that exits
    // without reading it must not kill this process with SIGPIPE (MSG_NOSIGNAL is for sockets).
    sigset_t pipe_only, old;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    ::pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
    for (std::size_t done = 0; done < input.size();) {
      const ssize_t k = ::write(in[1], input.data() + done, input.size() - done);
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) break;
      done += static_cast<std::size_t>(k);
    }
    timespec zero{};
    while (::sigtimedwait(&pipe_only, nullptr, &zero) > 0) {
    }
    ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
    close_in();
  }
  ChildResult r;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  std::string* sinks[2] = {&r.out, &r.err};
  int open = 2;
  char buf[65536];
  while (open > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      r.timed_out = true;
      base::signal_group(pid, SIGKILL);
      break;
    }
    const int n = ::poll(fds, 2, static_cast<int>(std::min<long long>(left.count(), 1000)));
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t k = ::read(fds[i].fd, buf, sizeof buf);
      if (k > 0) {
        sinks[i]->append(buf, static_cast<std::size_t>(k));
      } else if (k == 0 || errno != EINTR) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open;
      }
    }
  }
  for (auto& f : fds) {
    if (f.fd >= 0) ::close(f.fd);
  }
  r.code = base::exit_code_of_status(base::wait(pid));
  if (r.timed_out) base::signal_group(pid, SIGKILL);  // stragglers of the group
  return r;
}

}  // namespace gpuorch::base
