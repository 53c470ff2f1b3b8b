// gpuorch launch accepts what torchrun users type: the implicit python (`SCRIPT ARGS`), -m,
// --no-python, --virtual-local-rank, --tee/--redirects/--local-ranks-filter, the underscore
// spellings, Kubeflow's PET_* variables, the flag table of docs/launch.md, and the c10d
// rendezvous backend (two agents on loopback).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "../launch/launch_support.hpp"
#include "../support/test_support.hpp"
#include "support/paths.hpp"

namespace gpuorch {
namespace {

using launch_test::read_file;
using launch_test::topo_json;
using test::run_cli;
using test::ScopedEnv;

std::vector<std::string> with(std::vector<std::string> base, const std::vector<std::string>& more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

// The console lines of a run that start with `prefix`, the prefix cut off.
std::vector<std::string> lines_with(const std::string& text, const std::string& prefix) {
  std::vector<std::string> out;
  for (const auto& line : test::lines_of(text)) {
    if (line.rfind(prefix, 0) == 0) out.push_back(line.substr(prefix.size()));
  }
  return out;
}

// torchrun's --virtual-local-rank: every worker is LOCAL_RANK 0 and sees only its own GPU (the
// recorded two-T4 host, so each worker has one; --bind none: the CPUs are this machine's).
TEST(LaunchTorchrun, VirtualLocalRankGivesEachWorkerLocalRankZeroAndItsGpu) {
  test::TempDir dir;
  const std::vector<std::string> base{
      "launch", "--standalone", "--topology",       topo_json("t4x2"),
      "--bind", "none",         "--nproc_per_node", "2"};
  const std::vector<std::string> program{
      "--", "/bin/sh", "-c", "echo LOCAL_RANK=$LOCAL_RANK RANK=$RANK CVD=$CUDA_VISIBLE_DEVICES"};
  const auto r = run_cli(with(with(base, {"--virtual-local-rank"}), program), dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(lines_with(r.out, "[rank0]:"), std::vector<std::string>{"LOCAL_RANK=0 RANK=0 CVD=0"});
  EXPECT_EQ(lines_with(r.out, "[rank1]:"), std::vector<std::string>{"LOCAL_RANK=0 RANK=1 CVD=1"});
  // Without it: the local ranks, and both GPUs visible to both.
  const auto plain = run_cli(with(base, program), dir);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(lines_with(plain.out, "[rank1]:"),
            std::vector<std::string>{"LOCAL_RANK=1 RANK=1 CVD=0,1"});
  // The plan says so too.
  const auto plan = run_cli(with(base, {"--virtual_local_rank", "--dry-run", "--json"}), dir);
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  const auto j = nlohmann::json::parse(plan.out);
  EXPECT_EQ(j["ranks"][1]["env"]["CUDA_VISIBLE_DEVICES"], "1") << plan.out;
}

// torchrun's `SCRIPT ARGS` runs python on it (the script's own options stay its own), -m runs a
// module, --no-python and gpuorch's `-- PROGRAM` run the program as given.
TEST(LaunchTorchrun, ProgramForms) {
  test::TempDir dir;
  const std::vector<std::string> base{"launch", "--topology", topo_json("t4x2"), "--dry-run"};
  const auto command_of = [&](const std::vector<std::string>& args) {
    const auto r = run_cli(with(base, args), dir);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const auto lines = lines_with(r.out, "command: ");
    return lines.empty() ? std::string("(none)") : lines.front();
  };
  {
    const ScopedEnv unset_python("PYTHON_EXEC", "");
    EXPECT_EQ(command_of({"--nproc_per_node", "1", "train.py", "--epochs", "3", "--tee", "1"}),
              "python3 -u train.py --epochs 3 --tee 1");
    EXPECT_EQ(command_of({"-m", "--max_restarts=1", "pkg.train", "-r", "2"}),
              "python3 -u -m pkg.train -r 2");
    EXPECT_EQ(command_of({"-m", "--", "pkg.train", "--lr", "1"}), "python3 -u -m pkg.train --lr 1");
  }
  const ScopedEnv python("PYTHON_EXEC", "/usr/bin/python3");
  EXPECT_EQ(command_of({"--tee", "3", "train.py"}), "/usr/bin/python3 -u train.py");
  EXPECT_EQ(command_of({"--no-python", "/bin/echo", "--tee", "3"}), "/bin/echo --tee 3");
  EXPECT_EQ(command_of({"--", "python3", "train.py"}), "python3 train.py");

  // A real run of the implicit form: $PYTHON_EXEC is /bin/sh here (`sh -u script args`).
  test::write_text(dir.file("w.sh"), "echo args: \"$@\" rank $RANK\n");
  const ScopedEnv sh("PYTHON_EXEC", "/bin/sh");
  const auto r = run_cli({"launch", "--standalone", "--nproc-per-node", "2", "--bind", "none",
                          dir.file("w.sh"), "--epochs", "3", "-m"},
                         dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(lines_with(r.out, "[rank1]:"), std::vector<std::string>{"args: --epochs 3 -m rank 1"});
}

// --tee: torchrun's prefix and log files; --redirects: files only; --local-ranks-filter: which
// local ranks reach the console.
TEST(LaunchTorchrun, TeeRedirectsAndLocalRanksFilter) {
  test::TempDir dir;
  const std::vector<std::string> program{"--no-python", "/bin/sh", "-c",
                                         "echo out $RANK; echo err $RANK >&2"};
  const auto r =
      run_cli(with({"launch", "--standalone", "--nproc-per-node", "2", "--rdzv_id", "t1",
                    "--log_dir", dir.file("logs"), "--tee", "3", "--local_ranks_filter", "1"},
                   program),
              dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(lines_with(r.out, "[default1]:"), std::vector<std::string>{"out 1"}) << r.out;
  EXPECT_EQ(lines_with(r.err, "[default1]:"), std::vector<std::string>{"err 1"}) << r.err;
  EXPECT_EQ(r.out.find("out 0"), std::string::npos) << r.out;  // filtered from the console...
  const auto logs = dir.path() / "logs" / "t1" / "attempt_0";
  EXPECT_EQ(read_file(logs / "0" / "stdout.log"), "out 0\n");  // ...not from the files
  EXPECT_EQ(read_file(logs / "1" / "stderr.log"), "err 1\n");

  // Per-rank maps, a role and the prefix template; no --log-dir: a temporary folder, named.
  const ScopedEnv prefix("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE",
                         "<${role_name}|${rank}|$local_rank>");
  const auto m = run_cli(with({"launch", "--standalone", "--nproc-per-node", "2", "--role",
                               "trainer", "-r", "0:1", "-t", "1:3"},
                              program),
                         dir);
  ASSERT_EQ(m.exit_code, 0) << m.err;
  EXPECT_EQ(m.out, "<trainer|1|1>out 1\n");  // rank 0's stdout is redirected
  EXPECT_NE(m.err.find("[rank0]:err 0\n"), std::string::npos) << m.err;
  EXPECT_NE(m.err.find("<trainer|1|1>err 1\n"), std::string::npos) << m.err;
  const std::smatch found = [&] {
    std::smatch s;
    std::regex_search(m.err, s, std::regex("worker logs in (\\S+) "));
    return s;
  }();
  ASSERT_EQ(found.size(), 2u) << m.err;
  const std::filesystem::path tmp = found[1].str();
  std::string redirected;
  for (const auto& e : std::filesystem::recursive_directory_iterator(tmp)) {
    if (e.path().filename() == "stdout.log" && e.path().parent_path().filename() == "0") {
      redirected = read_file(e.path());
    }
  }
  EXPECT_EQ(redirected, "out 0\n");
  std::filesystem::remove_all(tmp);
}

// Kubeflow's PyTorchJob sets PET_<OPTION>; a flag wins over the variable.
TEST(LaunchTorchrun, PetVariablesFillUnsetFlags) {
  test::TempDir dir;
  const std::vector<std::string> base{"launch", "--topology", topo_json("t4x2"), "--bind",
                                      "none",   "--dry-run",  "--json"};
  const ScopedEnv nproc("PET_NPROC_PER_NODE", "2");
  const ScopedEnv virt("PET_VIRTUAL_LOCAL_RANK", "1");
  const auto r = run_cli(base, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["ranks"].size(), 2u);
  EXPECT_EQ(j["ranks"][1]["env"]["CUDA_VISIBLE_DEVICES"], "1");
  const auto flag = run_cli(with(base, {"--nproc-per-node", "1"}), dir);
  ASSERT_EQ(flag.exit_code, 0) << flag.err;
  EXPECT_EQ(nlohmann::json::parse(flag.out)["ranks"].size(), 1u);

  // In a run: PET_MASTER_PORT and PET_RDZV_ID reach the workers' contract.
  const ScopedEnv unset_virt("PET_VIRTUAL_LOCAL_RANK", "0");
  const std::string port = std::to_string(launch::pick_free_port("127.0.0.1"));
  const ScopedEnv master_port("PET_MASTER_PORT", port);
  const ScopedEnv run_id("PET_RDZV_ID", "kubeflow-job");
  const ScopedEnv no_python("PET_NO_PYTHON", "1");
  const auto run = run_cli({"launch", "--bind", "none", "/bin/sh", "-c",
                            "echo $MASTER_PORT $TORCHELASTIC_RUN_ID $LOCAL_RANK"},
                           dir);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(lines_with(run.out, "[rank1]:"), std::vector<std::string>{port + " kubeflow-job 1"});
}

TEST(LaunchTorchrun, BadInputIsOneLineExitTwo) {
  test::TempDir dir;
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
      {{"-m", "--no-python", "x"},
       "gpuorch: -m/--module and --no-python exclude each other (a module needs python)\n"},
      {{"--tee", "5", "x"},
       "gpuorch: --tee 5: expected 0 (none), 1 (stdout), 2 (stderr), 3 (both), or "
       "LOCAL_RANK:VALUE,... such as 0:1,1:2\n"},
      {{"--redirects", "0:1,1", "x"},
       "gpuorch: --redirects 0:1,1: expected 0 (none), 1 (stdout), 2 (stderr), 3 (both), or "
       "LOCAL_RANK:VALUE,... such as 0:1,1:2\n"},
      {{"--local-ranks-filter", "0,a", "x"},
       "gpuorch: --local-ranks-filter 0,a: expected local ranks separated by commas (0,1,2)\n"},
  };
  for (const auto& [args, expected] : cases) {
    const auto r = run_cli(with({"launch", "--standalone"}, args), dir);
    EXPECT_EQ(r.exit_code, 2) << args.front();
    EXPECT_EQ(r.err, expected);
    EXPECT_EQ(r.out, "");
  }
  const ScopedEnv bad("PET_TEE", "7");
  const auto r = run_cli({"launch", "--standalone", "--", "true"}, dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(test::lines_of(r.err).size(), 1u) << r.err;
}

struct FlagRow {
  std::vector<std::string> names;  // each spelling
  std::string status;              // same, differs, missing
  std::string example;             // a value; empty for a flag
};

// docs/launch.md, "torchrun flags": | `--a`, `--b` | same | `value` | notes |
std::vector<FlagRow> flag_table() {
  const auto text =
      read_file(std::filesystem::path(::gpuorch::test::source_dir()) / "docs" / "launch.md");
  const auto start = text.find("\n## torchrun flags\n");
  EXPECT_NE(start, std::string::npos);
  const auto end = text.find("\n## ", start + 1);
  std::istringstream in(text.substr(start, end - start));
  const std::regex ticked("`([^`]*)`");
  std::vector<FlagRow> rows;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("| `-", 0) != 0) continue;
    std::vector<std::string> cells;
    std::istringstream cell_in(line.substr(1));
    for (std::string cell; std::getline(cell_in, cell, '|');) cells.push_back(cell);
    EXPECT_GE(cells.size(), 4u) << line;
    if (cells.size() < 4) continue;
    FlagRow row;
    for (std::sregex_iterator it(cells[0].begin(), cells[0].end(), ticked), e; it != e; ++it) {
      row.names.push_back((*it)[1]);
    }
    std::istringstream status(cells[1]);
    status >> row.status;
    std::smatch m;
    if (std::regex_search(cells[2], m, ticked)) row.example = m[1];
    rows.push_back(row);
  }
  return rows;
}

// PET_<NAME> of a long flag: --nproc-per-node -> PET_NPROC_PER_NODE.
std::string pet_name(const std::vector<std::string>& names) {
  for (const auto& n : names) {
    if (n.rfind("--", 0) != 0) continue;
    std::string var = "PET_";
    for (const char c : n.substr(2)) {
      var += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    }
    return var;
  }
  return {};
}

TEST(LaunchTorchrun, DocsFlagTableMatchesTheCli) {
  test::TempDir dir;
  const auto rows = flag_table();
  ASSERT_GE(rows.size(), 29u);  // every torchrun option
  const std::vector<std::string> base{"launch", "--topology", topo_json("t4x2"),
                                      "--bind", "none",       "--dry-run"};
  for (const auto& row : rows) {
    ASSERT_FALSE(row.names.empty());
    ASSERT_TRUE(row.status == "same" || row.status == "differs" || row.status == "missing")
        << row.names.front() << ": " << row.status;
    for (const auto& name : row.names) {
      std::vector<std::string> args = base;
      args.push_back(name);
      if (!row.example.empty()) args.push_back(row.example);
      const auto r = run_cli(args, dir);
      if (row.status == "missing") {
        EXPECT_EQ(r.exit_code, 2) << name << " is documented missing but accepted";
      } else {
        EXPECT_EQ(r.exit_code, 0) << name << " " << row.example << ": " << r.err;
      }
    }
    if (row.status == "missing") continue;
    const ScopedEnv pet(pet_name(row.names), row.example.empty() ? "1" : row.example);
    const auto r = run_cli(base, dir);
    EXPECT_EQ(r.exit_code, 0) << pet_name(row.names) << ": " << r.err;
  }
}

// Two agents on loopback meeting through c10d: the first to bind the endpoint serves the store.
struct TwoNodes {
  std::string out[2];
  std::string err[2];
  int code[2] = {-1, -1};
};

TwoNodes run_two_nodes(const test::TempDir& dir, const std::string& options,
                       const std::string& program) {
  const int port = launch::pick_free_port("127.0.0.1");
  const std::string command =
      test::shell_quote(::gpuorch::test::binary_path()) +
      " launch --nnodes 2 --rdzv-backend c10d --rdzv-endpoint 127.0.0.1:" + std::to_string(port) +
      " --rdzv-id c10d-job --bind none " + options + " " + program;
  std::vector<std::unique_ptr<launch_test::Child>> nodes;
  for (int n = 0; n < 2; ++n) {
    nodes.push_back(std::make_unique<launch_test::Child>(
        command, dir.path() / ("node" + std::to_string(n) + ".out"),
        dir.path() / ("node" + std::to_string(n) + ".err")));
  }
  TwoNodes r;
  for (int n = 0; n < 2; ++n) {
    r.code[n] = nodes[static_cast<std::size_t>(n)]->wait(std::chrono::seconds(120)).value_or(-1);
    r.out[n] = read_file(dir.path() / ("node" + std::to_string(n) + ".out"));
    r.err[n] = read_file(dir.path() / ("node" + std::to_string(n) + ".err"));
  }
  return r;
}

TEST(LaunchTorchrun, C10dRendezvousTwoNodes) {
  test::TempDir dir;
  const auto r =
      run_two_nodes(dir, "--nproc-per-node 2",
                    "-- /bin/sh -c 'echo $RANK $WORLD_SIZE $GROUP_RANK $MASTER_ADDR:$MASTER_PORT'");
  std::map<std::string, std::string> by_rank;  // RANK -> the rest
  for (int n = 0; n < 2; ++n) {
    ASSERT_EQ(r.code[n], 0) << r.err[n];
    for (const auto& line : test::lines_of(r.out[n])) {
      const auto colon = line.find(':');
      std::istringstream in(line.substr(colon + 1));
      std::string rank, rest;
      in >> rank;
      std::getline(in, rest);
      by_rank[rank] = rest;
    }
  }
  ASSERT_EQ(by_rank.size(), 4u);
  const std::string master = by_rank["0"].substr(by_rank["0"].rfind(' ') + 1);
  for (const auto& [rank, rest] : by_rank) {
    EXPECT_EQ(rest, " 4 " + std::to_string(std::stoi(rank) / 2) + " " + master) << rank;
  }
  EXPECT_NE((r.err[0] + r.err[1]).find("(served here)"), std::string::npos);
  EXPECT_NE((r.err[0] + r.err[1]).find("(joined)"), std::string::npos);
}

// Global rank 3 fails once: its node restarts (a new round), the other follows without using
// a restart.
TEST(LaunchTorchrun, C10dFailureOpensANewRound) {
  test::TempDir dir;
  const std::string once = dir.file("failed-once");
  const auto r = run_two_nodes(
      dir, "--nproc-per-node 2 --max-restarts 1",
      "-- /bin/sh -c " + test::shell_quote("if [ $RANK = 3 ] && mkdir " + once +
                                           " 2>/dev/null; then exit 5; fi; sleep 3; echo ok"));
  ASSERT_EQ(r.code[0], 0) << r.err[0];
  ASSERT_EQ(r.code[1], 0) << r.err[1];
  const std::string both = r.err[0] + r.err[1];
  EXPECT_NE(both.find("restarts       1 of 1 (+0 for membership changes)"), std::string::npos)
      << both;
  EXPECT_NE(both.find("restarts       0 of 1 (+1 for membership changes)"), std::string::npos)
      << both;
}

// An elastic run (--nnodes 1:2): the node that does not serve the store is stopped by SIGTERM
// (as an eviction stops a pod) once both are in round 0. It leaves the round instead of closing
// the run, so the other node, whose worker then fails (as a rank does that loses its peer),
// re-forms a round alone at once and finishes; torchrun's close would refuse it ("run ... is
// closed"), and without the leave it would wait 15 s for the silent node's heartbeats to stop.
TEST(LaunchTorchrun, C10dElasticNodeStoppedBySignalLeavesTheRunOpen) {
  test::TempDir dir;
  const int port = launch::pick_free_port("127.0.0.1");
  const std::string command =
      test::shell_quote(::gpuorch::test::binary_path()) +
      " launch --nnodes 1:2 --rdzv-backend c10d --rdzv-endpoint 127.0.0.1:" + std::to_string(port) +
      " --rdzv-id c10d-leave --rdzv-conf last_call_timeout=1 --max-restarts 1 --bind none "
      "--stop-grace 2 -- /bin/sh -c " +
      test::shell_quote(
          "if [ $WORLD_SIZE = 2 ]; then sleep 4; exit 3; fi; echo alone in world $WORLD_SIZE");
  launch_test::Child first(command, dir.path() / "node0.out", dir.path() / "node0.err");
  const auto wait_text = [&](const std::string& file, const std::string& text) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (read_file(dir.path() / file).find(text) == std::string::npos &&
           std::chrono::steady_clock::now() < end) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return read_file(dir.path() / file).find(text) != std::string::npos;
  };
  // The first serves the store and trains alone (round 0 of 1 node) until the second arrives.
  ASSERT_TRUE(wait_text("node0.err", "(served here)")) << read_file(dir.path() / "node0.err");
  launch_test::Child second(command, dir.path() / "node1.out", dir.path() / "node1.err");
  ASSERT_TRUE(wait_text("node1.err", "2 workers in all")) << read_file(dir.path() / "node1.err");
  ASSERT_TRUE(wait_text("node0.err", "2 workers in all")) << read_file(dir.path() / "node0.err");
  const auto stopped = std::chrono::steady_clock::now();
  second.signal(SIGTERM);
  EXPECT_EQ(second.wait(std::chrono::seconds(30)).value_or(-1), 128 + SIGTERM)
      << read_file(dir.path() / "node1.err");
  EXPECT_EQ(first.wait(std::chrono::seconds(60)).value_or(-1), 0)
      << read_file(dir.path() / "node0.err");
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - stopped).count();
  const std::string err = read_file(dir.path() / "node0.err");
  EXPECT_NE(read_file(dir.path() / "node0.out").find("alone in world 1"), std::string::npos) << err;
  EXPECT_NE(err.find("failed: exit code 3"), std::string::npos) << err;
  EXPECT_NE(err.find("1 workers in all"), std::string::npos) << err;
  EXPECT_EQ(err.find("is closed"), std::string::npos) << err;
  // The worker's 4 s, the 1 s last call and the agent's own steps; not the 15 s of heartbeats.
  EXPECT_LT(took, 12.0) << err;
}

TEST(LaunchTorchrun, C10dBadInput) {
  test::TempDir dir;
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
      {{"--rdzv-backend", "c10d"},
       "gpuorch: --rdzv-backend c10d needs --rdzv-endpoint HOST[:PORT]\n"},
      {{"--rdzv-backend", "c10d", "--rdzv-endpoint", "127.0.0.1:0"},
       "gpuorch: --rdzv-endpoint 127.0.0.1:0: expected HOST[:PORT]\n"},
  };
  for (const auto& [args, expected] : cases) {
    const auto r = run_cli(with(with({"launch"}, args), {"--", "true"}), dir);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.err, expected);
  }
  // Another machine's endpoint where nothing listens (TEST-NET-1): bounded by timeout.
  const auto r = run_cli({"launch", "--rdzv-backend", "c10d", "--rdzv-endpoint", "192.0.2.1:29400",
                          "--rdzv-conf", "timeout=1", "--", "true"},
                         dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.rfind("gpuorch: --rdzv-endpoint 192.0.2.1:29400: no c10d store after 1 s (", 0),
            0u)
      << r.err;
}

// The torchrun-style job: Debian's python3-torch (1.13, Gloo on CPU), `-m MODULE` with
// --virtual-local-rank, 2 nodes x 2 workers through c10d on loopback; each worker all-gathers
// (RANK, LOCAL_RANK) and prints what torch saw.
TEST(LaunchTorchrun, TorchModuleWithVirtualLocalRankOverC10d) {
  if (!launch_test::have_torch()) {
    GTEST_SKIP() << "/usr/bin/python3 cannot import torch.distributed (apt install python3-torch)";
  }
  test::TempDir dir;
  test::write_text(dir.file("vlr_probe.py"),
                   "import os\n"
                   "import torch\n"
                   "import torch.distributed as dist\n"
                   "dist.init_process_group('gloo')\n"
                   "me = torch.tensor([dist.get_rank(), int(os.environ['LOCAL_RANK'])])\n"
                   "everyone = [torch.zeros(2, dtype=me.dtype) for _ in "
                   "range(dist.get_world_size())]\n"
                   "dist.all_gather(everyone, me)\n"
                   "print('RANK', os.environ['RANK'], 'LOCAL_RANK', os.environ['LOCAL_RANK'],\n"
                   "      'WORLD_SIZE', dist.get_world_size(),\n"
                   "      'SEEN', ' '.join(f'{int(t[0])}:{int(t[1])}' for t in everyone))\n"
                   "dist.destroy_process_group()\n");
  const ScopedEnv python("PYTHON_EXEC", "/usr/bin/python3");
  const ScopedEnv path("PYTHONPATH", dir.path().string());
  const auto r =
      run_two_nodes(dir, "--nproc_per_node 2 --backend gloo --virtual-local-rank --max-restarts 0",
                    "-m vlr_probe");
  std::vector<std::string> lines;
  for (int n = 0; n < 2; ++n) {
    ASSERT_EQ(r.code[n], 0) << r.out[n] << r.err[n];
    for (const auto& line : test::lines_of(r.out[n])) lines.push_back(line);
  }
  std::sort(lines.begin(), lines.end());
  std::vector<std::string> expected;
  for (int rank = 0; rank < 4; ++rank) {
    expected.push_back("[rank" + std::to_string(rank) + "]:RANK " + std::to_string(rank) +
                       " LOCAL_RANK 0 WORLD_SIZE 4 SEEN 0:0 1:0 2:0 3:0");
  }
  EXPECT_EQ(lines, expected) << r.err[0] << r.err[1];
}

}  // namespace
}  // namespace gpuorch
