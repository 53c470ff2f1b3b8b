// gpuorch launch as a user runs it, with shell workers (no PyTorch needed): the plan, the
// environment contract, restarts, error files, signals, log files and bad input.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <nlohmann/json.hpp>

#include "../launch/launch_support.hpp"
#include "../support/test_support.hpp"
#include "support/paths.hpp"

namespace gpuorch {
namespace {

using launch_test::golden;
using launch_test::topo_json;
using test::run_cli;

TEST(LaunchCli, DryRunTablesForFixtureHosts) {
  test::TempDir dir;
  const std::vector<std::pair<std::string, std::string>> cases{
      {"dgx-h100", "dgx-h100.cores.txt"}, {"mi250", "mi250.cores.txt"}, {"t4x2", "t4x2.cores.txt"}};
  for (const auto& [host, file] : cases) {
    const auto r = run_cli(
        {"launch", "--topology", topo_json(host), "--nproc-per-node", "gpu", "--dry-run"}, dir);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, launch_test::read_file(launch_test::launch_fixture(file))) << host;
  }
  const auto j = run_cli({"launch", "--topology", topo_json("dgx-h100"), "--nproc-per-node", "8",
                          "--dry-run", "--json"},
                         dir);
  EXPECT_EQ(j.out, launch_test::read_file(launch_test::launch_fixture("dgx-h100.cores.json")));
}

struct BadCase {
  std::vector<std::string> args;
  std::string expected_err;  // a part of the one line
};

TEST(LaunchCli, BadInputIsOneLineExitTwo) {
  test::TempDir dir;
  test::write_text(dir.file("bad.env"), "NCCL_ALGO=Ring\noops\n");
  const std::vector<BadCase> cases{
      {{"launch", "--standalone", "--", "/nonexistent/train"},
       "gpuorch: /nonexistent/train: program not found\n"},
      {{"launch", "--standalone", "--", "no-such-program-gpuorch"},
       "gpuorch: no-such-program-gpuorch: program not found in PATH\n"},
      {{"launch", "--topology", topo_json("t4x2"), "--nproc-per-node", "3", "--dry-run"},
       "gpuorch: --nproc-per-node 3: more ranks than GPUs (2) with --bind cores; use --bind none "
       "to share GPUs\n"},
      {{"launch", "--bind", "sockets", "--", "true"},
       "gpuorch: --bind sockets: not none, numa or cores\n"},
      {{"launch", "--nnodes", "3:2", "--", "true"},
       "gpuorch: --nnodes 3:2: MIN is larger than MAX\n"},
      {{"launch", "--nnodes", "1:2", "--", "true"},
       "gpuorch: --nnodes 1:2: an elastic range needs --rdzv-backend etcd or c10d (static "
       "ranks are fixed)\n"},
      {{"launch", "--nproc-per-node", "lots", "--", "true"},
       "gpuorch: --nproc-per-node lots: expected a positive number, gpu, cpu or auto\n"},
      {{"launch", "--standalone", "--env-file", dir.file("bad.env"), "--", "true"},
       "gpuorch: " + dir.file("bad.env") + ":2: expected KEY=VALUE\n"},
      {{"launch", "--rdzv-backend", "etcd", "--", "true"},
       "gpuorch: --rdzv-backend etcd needs --rdzv-endpoint HOST:PORT\n"},
      {{"launch", "--standalone"},
       "gpuorch: no program given (gpuorch launch [options] -- PROGRAM ARGS)\n"},
  };
  for (const auto& c : cases) {
    const auto r = run_cli(c.args, dir);
    EXPECT_EQ(r.exit_code, 2) << c.args.back();
    EXPECT_EQ(r.err, c.expected_err);
    EXPECT_EQ(r.out, "");
  }
  const auto unknown = run_cli({"launch", "--bogus", "--", "true"}, dir);
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("--bogus"), std::string::npos) << unknown.err;
}

TEST(LaunchCli, UnreachableEtcdFailsAfterBoundedWait) {
  test::TempDir dir;
  const int port = launch::pick_free_port("127.0.0.1");  // nobody listens there
  const auto start = std::chrono::steady_clock::now();
  const auto r =
      run_cli({"launch", "--rdzv-backend", "etcd", "--rdzv-endpoint",
               "127.0.0.1:" + std::to_string(port), "--rdzv-conf", "timeout=1", "--", "true"},
              dir);
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.rfind("gpuorch: --rdzv-endpoint 127.0.0.1:" + std::to_string(port) +
                            ": etcd unreachable after 1 s (",
                        0),
            0u)
      << r.err;
  EXPECT_EQ(test::lines_of(r.err).size(), 1u);
  EXPECT_LT(took, 8.0);
}

TEST(LaunchCli, MasterPortInUse) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof sa;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  const std::string port = std::to_string(ntohs(sa.sin_port));
  test::TempDir dir;
  const auto r = run_cli({"launch", "--master-port", port, "--", "true"}, dir);
  ::close(fd);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "gpuorch: --master-port " + port + ": port in use on 127.0.0.1\n");
}

std::map<std::string, std::string> fields_of(const std::string& line) {
  std::map<std::string, std::string> m;
  std::istringstream in(line);
  for (std::string kv; in >> kv;) {
    const auto eq = kv.find('=');
    if (eq != std::string::npos) m[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return m;
}

TEST(LaunchCli, WorkersGetTheTorchrunContract) {
  test::TempDir dir;
  test::write_text(dir.file("tuned.env"), "NCCL_ALGO=Ring\n");
  const std::string script =
      "echo RANK=$RANK LOCAL_RANK=$LOCAL_RANK WORLD_SIZE=$WORLD_SIZE "
      "LOCAL_WORLD_SIZE=$LOCAL_WORLD_SIZE GROUP_RANK=$GROUP_RANK ROLE_RANK=$ROLE_RANK "
      "ROLE_WORLD_SIZE=$ROLE_WORLD_SIZE ROLE_NAME=$ROLE_NAME MASTER_ADDR=$MASTER_ADDR "
      "MASTER_PORT=$MASTER_PORT TORCHELASTIC_RESTART_COUNT=$TORCHELASTIC_RESTART_COUNT "
      "TORCHELASTIC_MAX_RESTARTS=$TORCHELASTIC_MAX_RESTARTS "
      "TORCHELASTIC_RUN_ID=$TORCHELASTIC_RUN_ID "
      "TORCHELASTIC_USE_AGENT_STORE=$TORCHELASTIC_USE_AGENT_STORE "
      "OMP_NUM_THREADS=$OMP_NUM_THREADS NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE NCCL_ALGO=$NCCL_ALGO "
      "GPUORCH_BACKEND=$GPUORCH_BACKEND ERR=${TORCHELASTIC_ERROR_FILE:+set}";
  const auto r = run_cli(
      {"launch", "--nproc-per-node", "2", "--bind", "none", "--master-port",
       std::to_string(launch::pick_free_port("127.0.0.1")), "--rdzv-id", "job42", "--max-restarts",
       "3", "--env-file", dir.file("tuned.env"), "--", "/bin/sh", "-c", script},
      dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::map<int, std::map<std::string, std::string>> by_rank;
  for (const auto& line : test::lines_of(r.out)) {
    for (int rank : {0, 1}) {
      const std::string prefix = "[rank" + std::to_string(rank) + "]:";
      if (line.rfind(prefix, 0) == 0) by_rank[rank] = fields_of(line.substr(prefix.size()));
    }
  }
  ASSERT_EQ(by_rank.size(), 2u) << r.out;
  for (int rank : {0, 1}) {
    auto& f = by_rank[rank];
    EXPECT_EQ(f["RANK"], std::to_string(rank));
    EXPECT_EQ(f["LOCAL_RANK"], std::to_string(rank));
    EXPECT_EQ(f["WORLD_SIZE"], "2");
    EXPECT_EQ(f["LOCAL_WORLD_SIZE"], "2");
    EXPECT_EQ(f["GROUP_RANK"], "0");
    EXPECT_EQ(f["ROLE_RANK"], std::to_string(rank));
    EXPECT_EQ(f["ROLE_WORLD_SIZE"], "2");
    EXPECT_EQ(f["ROLE_NAME"], "default");
    EXPECT_EQ(f["MASTER_ADDR"], "127.0.0.1");
    EXPECT_EQ(f["TORCHELASTIC_RESTART_COUNT"], "0");
    EXPECT_EQ(f["TORCHELASTIC_MAX_RESTARTS"], "3");
    EXPECT_EQ(f["TORCHELASTIC_RUN_ID"], "job42");
    EXPECT_EQ(f["TORCHELASTIC_USE_AGENT_STORE"], "False");
    EXPECT_EQ(f["OMP_NUM_THREADS"], "1");
    EXPECT_EQ(f["NCCL_NVLS_ENABLE"], "0");
    EXPECT_EQ(f["NCCL_ALGO"], "Ring");
    EXPECT_EQ(f["ERR"], "set");
  }
  EXPECT_NE(r.err.find("gpuorch launch summary"), std::string::npos);
  EXPECT_NE(r.err.find("exit codes     rank 0: 0, rank 1: 0"), std::string::npos) << r.err;
}

// --bind cores: each worker runs on exactly the CPUs of its share (sched_setaffinity before exec).
TEST(LaunchCli, WorkersRunOnTheirShare) {
  test::TempDir dir;
  const auto plan_run = run_cli({"launch", "--nproc-per-node", "2", "--dry-run", "--json"}, dir);
  ASSERT_EQ(plan_run.exit_code, 0) << plan_run.err;
  const auto plan = nlohmann::json::parse(plan_run.out);
  const auto r = run_cli({"launch", "--standalone", "--nproc-per-node", "2", "--", "/bin/sh", "-c",
                          "grep Cpus_allowed_list /proc/self/status"},
                         dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (int rank : {0, 1}) {
    const std::string cpus = plan["ranks"][rank]["cpus"];
    EXPECT_NE(r.out.find("[rank" + std::to_string(rank) + "]:Cpus_allowed_list:\t" + cpus + "\n"),
              std::string::npos)
        << r.out << " expected " << cpus;
  }
}

TEST(LaunchCli, FailedWorkerRestartsTheGroup) {
  test::TempDir dir;
  const std::string fail_once =
      "if [ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ] && [ \"$LOCAL_RANK\" = 1 ]; then exit 3; fi; "
      "echo attempt $TORCHELASTIC_RESTART_COUNT ok";
  const auto ok = run_cli({"launch", "--standalone", "--nproc-per-node", "2", "--max-restarts", "2",
                           "--summary-json", dir.file("s.json"), "--", "/bin/sh", "-c", fail_once},
                          dir);
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.out.find("[rank0]:attempt 1 ok"), std::string::npos) << ok.out;
  EXPECT_NE(ok.err.find("rank 1 (local rank 1) failed: exit code 3"), std::string::npos);
  EXPECT_NE(ok.err.find("restarts       1 of 2"), std::string::npos) << ok.err;
  const auto s = nlohmann::json::parse(launch_test::read_file(dir.file("s.json")));
  EXPECT_EQ(s["restarts"], 1);
  EXPECT_EQ(s["first_failure"]["rank"], 1);
  EXPECT_EQ(s["first_failure"]["exit_code"], 3);
  // No restarts left: the agent fails with the worker's code in the summary.
  const auto fail = run_cli({"launch", "--standalone", "--nproc-per-node", "2", "--", "/bin/sh",
                             "-c", "[ $LOCAL_RANK = 0 ] && sleep 30; exit 7"},
                            dir);
  EXPECT_EQ(fail.exit_code, 1);
  EXPECT_NE(fail.err.find("first failure  rank 1 (local rank 1), exit code 7, attempt 0"),
            std::string::npos)
      << fail.err;
  EXPECT_NE(fail.err.find("rank 0: -15"), std::string::npos) << fail.err;  // stopped by SIGTERM
}

TEST(LaunchCli, ReportsTheEarliestErrorFile) {
  test::TempDir dir;
  // Both fail on their own before the agent looks (1 s monitor interval); rank 1 exits first,
  // but rank 0's error file carries the older timestamp: torch's rule names rank 0.
  const std::string script =
      "if [ $LOCAL_RANK = 0 ]; then sleep 0.2; ts=1700000001; msg='ValueError: root cause'; "
      "else ts=1700000009; msg='RuntimeError: follow-on'; fi; "
      "printf '{\"message\": {\"message\": \"%s\", \"extraInfo\": {\"py_callstack\": \"tb\", "
      "\"timestamp\": \"%s\"}}}' \"$msg\" $ts > $TORCHELASTIC_ERROR_FILE; exit 1";
  const auto r = run_cli({"launch", "--standalone", "--nproc-per-node", "2", "--monitor-interval",
                          "1", "--", "/bin/sh", "-c", script},
                         dir);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("first failure  rank 0 (local rank 0), exit code 1"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("error          ValueError: root cause"), std::string::npos) << r.err;
}

bool process_gone(pid_t pid) {
  const auto stat = launch_test::read_file("/proc/" + std::to_string(pid) + "/stat");
  if (stat.empty()) return true;
  const auto close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z';
}

pid_t read_pid(const std::string& path) {
  for (int i = 0; i < 200; ++i) {
    const auto text = launch_test::read_file(path);
    if (!text.empty() && text.back() == '\n') return std::stoi(text);
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  return -1;
}

// SIGTERM to the agent: forwarded to every worker group; workers that ignore it (and their
// children) are SIGKILLed after the grace period; the agent exits 128+15.
TEST(LaunchCli, SignalsAreForwardedThenEscalated) {
  test::TempDir dir;
  const std::string script = "trap '' TERM; sleep 60 & echo $! > " + dir.file("child") +
                             ".$LOCAL_RANK; echo $$ > " + dir.file("worker") + ".$LOCAL_RANK; wait";
  launch_test::Child agent(test::shell_quote(::gpuorch::test::binary_path()) +
                               " launch --standalone --nproc-per-node 2 --stop-grace 0.5 -- "
                               "/bin/sh -c " +
                               test::shell_quote(script),
                           dir.path() / "out", dir.path() / "err");
  std::vector<pid_t> pids;
  for (const std::string name : {"worker.0", "worker.1", "child.0", "child.1"}) {
    pids.push_back(read_pid(dir.file(name)));
    ASSERT_GT(pids.back(), 0) << name;
  }
  agent.signal(SIGTERM);
  const auto code = agent.wait(std::chrono::seconds(10));
  ASSERT_TRUE(code);
  EXPECT_EQ(*code, 128 + SIGTERM);
  for (const pid_t p : pids) EXPECT_TRUE(process_gone(p)) << p;
  EXPECT_NE(launch_test::read_file(dir.path() / "err").find("stopped by signal 15"),
            std::string::npos);
}

// The agent killed outright: its workers die with it (their shims end them).
TEST(LaunchCli, WorkersDieWithTheAgent) {
  test::TempDir dir;
  const std::string script = "echo $$ > " + dir.file("worker") + ".$LOCAL_RANK; exec sleep 60";
  launch_test::Child agent(test::shell_quote(::gpuorch::test::binary_path()) +
                               " launch --standalone --nproc-per-node 2 -- /bin/sh -c " +
                               test::shell_quote(script),
                           dir.path() / "out", dir.path() / "err");
  const pid_t w0 = read_pid(dir.file("worker.0"));
  const pid_t w1 = read_pid(dir.file("worker.1"));
  ASSERT_GT(w0, 0);
  ASSERT_GT(w1, 0);
  agent.signal(SIGKILL);
  agent.wait(std::chrono::seconds(5));
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {
    gone = process_gone(w0) && process_gone(w1);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(gone);
}

TEST(LaunchCli, LogDirHoldsPerRankFiles) {
  test::TempDir dir;
  const auto r =
      run_cli({"launch", "--standalone", "--nproc-per-node", "2", "--rdzv-id", "logs1", "--log-dir",
               dir.file("logs"), "--", "/bin/sh", "-c", "echo out $RANK; echo err $RANK >&2"},
              dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (int rank : {0, 1}) {
    const auto base = dir.path() / "logs" / "logs1" / "attempt_0" / std::to_string(rank);
    EXPECT_EQ(launch_test::read_file(base / "stdout.log"), "out " + std::to_string(rank) + "\n");
    EXPECT_EQ(launch_test::read_file(base / "stderr.log"), "err " + std::to_string(rank) + "\n");
  }
  EXPECT_NE(r.err.find("[rank1]:err 1\n"), std::string::npos);
}

}  // namespace
}  // namespace gpuorch
