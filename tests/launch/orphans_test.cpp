// No process of a run outlives `gpuorch launch`: SIGTERM to the agent ends the workers and a
// double-forked `setsid` grandchild (reparented to the worker's shim, their subreaper); SIGKILL to
// the agent leaves the cleanup to the shims, the run's cgroup and the guardian. Counted through
// /proc.
#include <dirent.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>

#include "../launch/launch_support.hpp"
#include "support/paths.hpp"
#include "support/test_support.hpp"

namespace gpuorch::launch {
namespace {

using launch_test::Child;
using launch_test::read_file;
using std::chrono::milliseconds;
using std::chrono::seconds;
namespace fs = std::filesystem;

struct Tagged {
  int all = 0;
  int sleeps = 0;
  std::string who;  // "pid comm state ppid" of each, for a failure's message
};

// Live processes whose environment carries GPUORCH_ORPHAN_TAG=tag (zombies have none).
Tagged count_tagged(const std::string& tag) {
  const std::string needle = "GPUORCH_ORPHAN_TAG=" + tag;
  Tagged t;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string env = read_file(e.path() / "environ");
    bool found = false;
    for (std::size_t at = 0; at < env.size();) {
      const auto end = env.find('\0', at);
      if (env.compare(at, (end == std::string::npos ? env.size() : end) - at, needle) == 0) {
        found = true;
        break;
      }
      if (end == std::string::npos) break;
      at = end + 1;
    }
    if (!found) continue;
    ++t.all;
    std::string comm = read_file(e.path() / "comm");
    if (comm.rfind("sleep", 0) == 0) ++t.sleeps;
    const std::string stat = read_file(e.path() / "stat");
    const auto close = stat.rfind(')');
    t.who += name + " " + comm.substr(0, comm.find('\n')) + " " +
             (close == std::string::npos ? std::string("?") : stat.substr(close + 2, 8)) + "\n";
  }
  return t;
}

bool wait_until(const std::function<bool()>& ok, milliseconds limit,
                milliseconds step = milliseconds(50)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (ok()) return true;
    std::this_thread::sleep_for(step);
  }
  return ok();
}

// SIGKILL to every live process carrying the tag: a failed test leaves nothing behind.
void kill_tagged(const std::string& tag) {
  const std::string needle = std::string("GPUORCH_ORPHAN_TAG=") + tag + '\0';
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    if (read_file(e.path() / "environ").find(needle) != std::string::npos) {
      ::kill(std::stoi(name), SIGKILL);
    }
  }
}

class Orphans : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists("/proc/self/stat")) GTEST_SKIP() << "no /proc here: nothing to count with";
    std::random_device rd;
    tag_ = std::to_string(rd()) + std::to_string(rd());
    script_ = dir_.path() / "worker.sh";
    // A daemon the usual way: the subshell starts it in a new session and exits at once.
    std::ofstream(script_) << "( setsid sleep 300 & )\nexec sleep 300\n";
  }

  // Starts the agent with two workers; returns once each has its grandchild. `wrapper` runs
  // before env (it must exec, so that the child's pid is the agent's).
  std::unique_ptr<Child> start(const std::string& extra_env = "", const std::string& wrapper = "") {
    const std::string cmd =
        wrapper + " env GPUORCH_ORPHAN_TAG=" + tag_ + " " + extra_env + " '" +
        ::gpuorch::test::binary_path() + "' launch --standalone --nproc-per-node 2 " +
        "--bind none --topology '" + launch_test::topo_json("t4x2") +
        "' --stop-grace 2 --monitor-interval 0.05 -- /bin/sh '" + script_.string() + "'";
    auto child = std::make_unique<Child>(cmd, dir_.path() / "out", dir_.path() / "err");
    const bool ready = wait_until([&] { return count_tagged(tag_).sleeps >= 4; }, seconds(30));
    EXPECT_TRUE(ready) << read_file(dir_.path() / "err");
    return child;
  }

  [[nodiscard]] std::string err() const { return read_file(dir_.path() / "err"); }

  test::TempDir dir_;
  std::string tag_;
  fs::path script_;
};

TEST_F(Orphans, SigtermToTheAgentLeavesNoProcessOfTheRun) {
  auto agent = start();
  agent->signal(SIGTERM);
  const auto code = agent->wait(seconds(30));
  ASSERT_TRUE(code.has_value()) << err();
  EXPECT_EQ(*code, 128 + SIGTERM) << err();
  // Everything was reaped before the agent exited: nothing to wait for.
  const auto left = count_tagged(tag_);
  EXPECT_EQ(left.all, 0) << left.who << err();
  EXPECT_NE(err().find("ended 2 processes the workers left behind"), std::string::npos) << err();
}

TEST_F(Orphans, SigintLikewise) {
  auto agent = start();
  agent->signal(SIGINT);
  const auto code = agent->wait(seconds(30));
  ASSERT_TRUE(code.has_value()) << err();
  EXPECT_EQ(*code, 128 + SIGINT) << err();
  EXPECT_EQ(count_tagged(tag_).all, 0) << err();
}

void expect_clean_after_sigkill(Child& agent, const std::string& tag, const std::string& err_path) {
  agent.signal(SIGKILL);
  const auto code = agent.wait(seconds(10));
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 128 + SIGKILL);
  // The guardian (and cgroup.kill) act once the agent is gone.
  EXPECT_TRUE(wait_until([&] { return count_tagged(tag).all == 0; }, seconds(10)))
      << count_tagged(tag).all << " left\n"
      << read_file(err_path);
}

TEST_F(Orphans, SigkillToTheAgentLeavesNoProcessOfTheRun) {
  auto agent = start();
  const std::string log = err();
  std::smatch m;
  const bool in_cgroup = std::regex_search(log, m, std::regex("workers in cgroup (\\S+)"));
  if (!in_cgroup) {
    std::cout << "no writable cgroup v2 here: the guardian's /proc tracking alone is tested\n";
  }
  expect_clean_after_sigkill(*agent, tag_, (dir_.path() / "err").string());
  if (in_cgroup) {
    const std::string path = m[1];
    EXPECT_TRUE(wait_until([&] { return !fs::exists(path); }, seconds(5))) << path;
  }
}

TEST_F(Orphans, SigkillWithoutACgroupTheShimsCleanUp) {
  auto agent = start("GPUORCH_LAUNCH_CGROUP=off");
  EXPECT_NE(err().find("no cgroup for the workers (GPUORCH_LAUNCH_CGROUP=off)"), std::string::npos)
      << err();
  // The daemons' subshells have exited: each daemon's parent is now its worker's shim.
  expect_clean_after_sigkill(*agent, tag_, (dir_.path() / "err").string());
}

// SIGKILL to every process of one session (what `pkill -KILL -s SID` does).
void kill_session(pid_t sid) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = read_file(e.path() / "stat");
    const auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream fields(stat.substr(close + 2));
    std::string state;
    long ppid = 0, pgrp = 0, session = 0;
    fields >> state >> ppid >> pgrp >> session;
    if (session == sid) ::kill(std::stoi(name), SIGKILL);
  }
}

// What the user may kill instead of the agent alone: its process group, or its whole session
// (a terminal's, a container's entry point's). The shims and the guardian have sessions of their
// own, so neither reaches them.
TEST_F(Orphans, SigkillToTheAgentsGroupOrSessionLeavesNothingWithoutACgroup) {
  for (const bool whole_session : {false, true}) {
    auto agent = start("GPUORCH_LAUNCH_CGROUP=off", "setsid");  // the agent leads both
    std::this_thread::sleep_for(milliseconds(300));
    if (whole_session) {
      kill_session(agent->pid());
    } else {
      ::kill(-agent->pid(), SIGKILL);
    }
    ASSERT_TRUE(agent->wait(seconds(10)).has_value());
    EXPECT_TRUE(wait_until([&] { return count_tagged(tag_).all == 0; }, seconds(10)))
        << (whole_session ? "session: " : "group: ") << count_tagged(tag_).all << " left\n"
        << err();
    kill_tagged(tag_);
  }
}

// Issue 30 item 10: without a cgroup, SIGKILL to the agent while a worker starts 8 `setsid`
// daemons (each its own session, so no group signal reaches it) left all of them running in 3 of
// 22 runs. Here 50 agents in a row are killed, each at another moment (0 to 147 ms after the
// worker began starting its daemons: while it starts them, and after); none may leave a process.
TEST_F(Orphans, SigkillFiftyTimesAtDifferentMomentsLeavesNothingWithoutACgroup) {
  const fs::path worker = dir_.path() / "daemons.sh";
  std::ofstream(worker) << ": > \"$READY\"\n"
                        << "for i in 1 2 3 4 5 6 7 8; do setsid sleep 1000 & done\n"
                        << "exec sleep 1000\n";
  std::vector<std::string> failures;
  for (int run = 0; run < 50; ++run) {
    const std::string tag = tag_ + "-" + std::to_string(run);
    const fs::path ready = dir_.path() / ("ready." + std::to_string(run));
    const std::string cmd = "env GPUORCH_ORPHAN_TAG=" + tag + " GPUORCH_LAUNCH_CGROUP=off READY='" +
                            ready.string() + "' '" + ::gpuorch::test::binary_path() +
                            "' launch --standalone --nproc-per-node 1 --bind none --topology '" +
                            launch_test::topo_json("t4x2") + "' -- /bin/sh '" + worker.string() +
                            "'";
    Child agent(cmd, dir_.path() / "out", dir_.path() / "err");
    const bool started =
        wait_until([&] { return fs::exists(ready); }, seconds(30), milliseconds(1));
    if (!started) {
      failures.push_back(fmt::format("run {}: the worker never started\n{}", run, err()));
      kill_tagged(tag);
      continue;
    }
    std::this_thread::sleep_for(milliseconds(3 * run));
    const int before = count_tagged(tag).sleeps;
    agent.signal(SIGKILL);
    agent.wait(seconds(10));
    if (!wait_until([&] { return count_tagged(tag).all == 0; }, seconds(5), milliseconds(10))) {
      const auto left = count_tagged(tag);
      failures.push_back(
          fmt::format("run {} (SIGKILL {} ms after the start, {} sleeps then): "
                      "{} processes left, {} of them sleeps",
                      run, 3 * run, before, left.all, left.sleeps));
      kill_tagged(tag);
    }
  }
  std::string all;
  for (const auto& f : failures) all += f + "\n";
  EXPECT_TRUE(failures.empty()) << failures.size() << " of 50 runs left processes\n" << all;
}

}  // namespace
}  // namespace gpuorch::launch
