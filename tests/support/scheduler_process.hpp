#pragma once
// `gpuorch scheduler` as a child process of a test: output to a log file, SIGTERM and reaped when
// the test ends (however it ends), and killed by the kernel should the test process die first
// (PR_SET_PDEATHSIG), so a failed test never leaves a scheduler running.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "support/paths.hpp"
#include "support/test_support.hpp"

namespace gpuorch::test {

class SchedulerProcess {
 public:
  // args: everything after `gpuorch VERB` (`gpuorch scheduler`, `gpuorch extender`).
  SchedulerProcess(const std::vector<std::string>& args, std::string log,
                   const std::string& verb = "scheduler")
      : log_(std::move(log)) {
    // Built before fork: the child only calls async-signal-safe functions.
    std::vector<std::string> argv_storage{::gpuorch::test::binary_path(), verb};
    argv_storage.insert(argv_storage.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_storage) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);
      const int fd = ::open(log_.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
      if (fd >= 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
      }
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
  }
  ~SchedulerProcess() { stop(); }
  SchedulerProcess(const SchedulerProcess&) = delete;
  SchedulerProcess& operator=(const SchedulerProcess&) = delete;

  // SIGTERM, then the exit code (128 + signal when killed).
  int stop() {
    if (pid_ <= 0) return status_;
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return status_;
  }
  [[nodiscard]] std::string log() const { return read_text(log_); }
  [[nodiscard]] pid_t pid() const { return pid_; }
  // Still running (not exited, not reaped).
  [[nodiscard]] bool running() const {
    int status = 0;
    return pid_ > 0 && ::waitpid(pid_, &status, WNOHANG) == 0;
  }

 private:
  std::string log_;
  pid_t pid_ = -1;
  int status_ = -1;
};

}  // namespace gpuorch::test
