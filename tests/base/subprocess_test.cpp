#include "gpuorch/base/subprocess.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "gpuorch/base/process_tree.hpp"
#include "support/paths.hpp"
#include "support/test_support.hpp"

namespace gpuorch::base {
namespace {

using std::chrono::milliseconds;

std::string read_all(int fd) {
  std::string out;
  char buf[4096];
  for (;;) {
    const auto n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

// Running, not a zombie: a container whose PID 1 never reaps leaves killed orphans as zombies,
// which kill(pid, 0) still finds.
bool alive(pid_t pid) {
  for (const auto& e : list_processes()) {
    if (e.pid == pid) return e.state != 'Z';
  }
  return false;
}

// Whether any process of the group still runs (zombies do not count, as above).
bool group_has_live_member(pid_t pgid) {
  for (const auto& e : list_processes()) {
    if (e.state != 'Z' && ::getpgid(e.pid) == pgid) return true;
  }
  return false;
}

TEST(Spawn, RunsWithTheGivenArgvEnvCwdAndStdout) {
  const test::TempDir dir;
  int out[2];
  ASSERT_EQ(::pipe2(out, O_CLOEXEC), 0);
  SpawnOptions o;
  o.path = "/bin/sh";
  o.argv = {"sh", "-c", "echo \"$0 $GREETING $(pwd)\"; echo err >&2"};
  o.env = std::vector<std::string>{"GREETING=hello", "PATH=/usr/bin:/bin"};
  o.cwd = dir.path().string();
  o.stdout_fd = out[1];
  o.stderr_fd = SpawnOptions::kDevNull;
  const auto child = spawn(o);
  ::close(out[1]);
  const std::string text = read_all(out[0]);
  ::close(out[0]);
  EXPECT_EQ(exit_code_of_status(wait(child.pid)), 0);
  EXPECT_EQ(text, "sh hello " + std::filesystem::canonical(dir.path()).string() + "\n");
}

TEST(Spawn, ExecFailureThrowsWithTheErrorAndLeavesNoChild) {
  SpawnOptions o;
  o.path = "/nonexistent/program";
  try {
    spawn(o);
    FAIL() << "no SpawnError";
  } catch (const SpawnError& e) {
    EXPECT_TRUE(e.in_child);
    EXPECT_EQ(e.error, ENOENT);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/program: cannot execute"),
              std::string::npos);
  }
  int status = 0;
  EXPECT_EQ(::waitpid(-1, &status, WNOHANG), -1);  // reaped already: no zombie left behind
  EXPECT_EQ(errno, ECHILD);
}

TEST(Spawn, NewGroupAndNewSession) {
  for (const auto group : {ProcessGroup::kNewGroup, ProcessGroup::kNewSession}) {
    int out[2];
    ASSERT_EQ(::pipe2(out, O_CLOEXEC), 0);
    SpawnOptions o;
    o.path = "/bin/sh";
    o.argv = {"sh", "-c", "ps -o pgid= -o sid= -p $$"};
    o.group = group;
    o.stdout_fd = out[1];
    const auto child = spawn(o);
    ::close(out[1]);
    std::istringstream in(read_all(out[0]));
    ::close(out[0]);
    wait(child.pid);
    pid_t pgid = 0, sid = 0;
    in >> pgid >> sid;
    EXPECT_EQ(pgid, child.pid);
    if (group == ProcessGroup::kNewSession) {
      EXPECT_EQ(sid, child.pid);
    } else {
      EXPECT_EQ(sid, ::getsid(0));
    }
  }
}

TEST(Spawn, StepsInTheChildReportFailuresAndTheProgramStillRuns) {
  SpawnOptions o;
  o.path = "/bin/true";
  o.in_child = [](const ChildSteps& steps) { steps.failed(7, EPERM); };
  const auto child = spawn(o);
  ASSERT_EQ(child.failed_steps.size(), 1u);
  EXPECT_EQ(child.failed_steps[0].step, 7);
  EXPECT_EQ(child.failed_steps[0].error, EPERM);
  EXPECT_EQ(exit_code_of_status(wait(child.pid)), 0);
}

TEST(Spawn, WaitForTimesOutThenStopGroupEndsTheWholeGroup) {
  int out[2];
  ASSERT_EQ(::pipe2(out, O_CLOEXEC), 0);
  SpawnOptions o;
  o.path = "/bin/sh";
  // The shell ignores SIGTERM; its background sleep is in the same group.
  o.argv = {"sh", "-c", "trap '' TERM; sleep 300 & echo $!; while :; do sleep 1; done"};
  o.group = ProcessGroup::kNewGroup;
  o.stdout_fd = out[1];
  const auto child = spawn(o);
  ::close(out[1]);
  char buf[32] = {};
  ASSERT_GT(::read(out[0], buf, sizeof buf - 1), 0);
  ::close(out[0]);
  const pid_t sleeper = static_cast<pid_t>(std::stol(buf));
  EXPECT_FALSE(wait_for(child.pid, milliseconds(100)).has_value());
  const int status = stop_group(child.pid, milliseconds(200));
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
  // The sleep got the group's SIGTERM (it does not ignore it), so it is gone or a zombie.
  for (int i = 0; i < 200 && alive(sleeper); ++i) std::this_thread::sleep_for(milliseconds(10));
  EXPECT_FALSE(alive(sleeper));
  // The shell's `sleep 1` got the SIGKILL too; a killed process takes a moment to exit.
  for (int i = 0; i < 50 && group_has_live_member(child.pid); ++i) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_FALSE(group_has_live_member(child.pid));
}

TEST(Spawn, DeathSignalEndsTheChildWithItsSpawningThread) {
  pid_t pid = -1;
  std::thread([&] {
    SpawnOptions o;
    o.path = "/bin/sleep";
    o.argv = {"sleep", "300"};
    o.death_signal = SIGKILL;
    pid = spawn(o).pid;
  }).join();
  const auto status = wait_for(pid, milliseconds(5000));
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFSIGNALED(*status));
  EXPECT_EQ(WTERMSIG(*status), SIGKILL);
}

TEST(FindInPath, FindsExecutablesAsExecvpWouldAndNothingElse) {
  const auto sh = find_in_path("sh");
  ASSERT_TRUE(sh.has_value());
  EXPECT_EQ(::access(sh->c_str(), X_OK), 0);
  EXPECT_FALSE(find_in_path("gpuorch-no-such-program").has_value());
}

// The launcher, `tune nccl`, `bench --np` and the reports' gnuplot start programs through
// base::spawn only: no other fork/exec of their own. One exception, by design: a worker's shim
// (launch/shim.cpp), itself started by base::spawn, is the subreaper that must be its worker's
// parent, and starts it with one raw clone (no fork handlers: the agent's other threads may hold
// their locks); that file may name no other way to start a process.
TEST(Spawn, TheOnlyForkInLaunchCommAndReportIsBase) {
  const std::filesystem::path src =
      std::filesystem::path(::gpuorch::test::source_dir()) / "src/gpuorch";
  const std::regex forks(R"((::|\b)(fork|vfork|exec[lv]p?e?|posix_spawnp?|popen|system)\s*\()");
  int files = 0;
  for (const char* layer : {"launch", "comm", "report"}) {
    for (const auto& e : std::filesystem::directory_iterator(src / layer)) {
      std::ifstream in(e.path());
      std::stringstream s;
      s << in.rdbuf();
      if (e.path().filename() == "shim.cpp") {
        const std::string text = s.str();
        std::size_t clones = 0;
        for (auto at = text.find("syscall(SYS_clone"); at != std::string::npos;
             at = text.find("syscall(SYS_clone", at + 1)) {
          ++clones;
        }
        EXPECT_EQ(clones, 1U) << e.path();
        const std::regex starts(R"((::|\b)(vfork|exec[lv]p?e?|posix_spawnp?|popen|system)\s*\()");
        EXPECT_FALSE(std::regex_search(text, starts)) << e.path();
      } else {
        EXPECT_FALSE(std::regex_search(s.str(), forks)) << e.path();
      }
      ++files;
    }
  }
  EXPECT_GT(files, 20);
}

}  // namespace
}  // namespace gpuorch::base
