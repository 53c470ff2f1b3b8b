#include "gpuorch/comm/child_process.hpp"

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

namespace gpuorch::comm {

ChildResult run_child(const std::vector<std::string>& argv,
                      const std::vector<std::pair<std::string, std::string>>& set,
                      const std::vector<std::string>& unset, std::chrono::milliseconds timeout) {
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error(std::strerror(errno));
  if (::pipe2(err, O_CLOEXEC) != 0) {
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
  o.stdout_fd = out[1];
  o.stderr_fd = err[1];
  // Its own group: a timeout stops what the child started too.
  o.group = base::ProcessGroup::kNewGroup;
  pid_t pid = -1;
  try {
    pid = base::spawn(o).pid;
  } catch (const base::SpawnError& e) {
    for (const int fd : {out[0], out[1], err[0], err[1]}) ::close(fd);
    if (!e.in_child) throw;
    ChildResult r;  // as a shell reports it: the program is there to blame, not the caller
    r.code = 127;
    r.err = std::string(e.what()) + "\n";
    return r;
  }
  ::close(out[1]);
  ::close(err[1]);
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

}  // namespace gpuorch::comm
