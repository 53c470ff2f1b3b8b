// gpuorch device-plugin and gpuorch manifests as a user runs them: the dry run, one-line errors
// with exit code 2, and a real process registered with the harness, marked unhealthy through the
// health file and stopped by SIGTERM (its socket removed).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "gpuorch/k8s/kubelet/fake_kubelet.hpp"
#include "k8s/k8s_support.hpp"
#include "support/paths.hpp"
#include "support/scheduler_process.hpp"
#include "support/test_support.hpp"

namespace gpuorch {
namespace {

using namespace std::chrono_literals;
using test::run_cli;
using test::TempDir;

// The device plugin directory of one test (its kubelet.sock and the plugin's sockets).
std::filesystem::path plugin_dir(const TempDir& dir) {
  const auto sock_dir = dir.path() / "dp";
  std::filesystem::create_directories(sock_dir);
  return sock_dir;
}

TEST(DevicePluginCli, DryRunListsDevices) {
  TempDir dir;
  test::write_text(dir.file("ts.yaml"),
                   "sharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n"
                   "      replicas: 4\n");
  const auto r = run_cli({"device-plugin", "--topology", test::topo_json_path("t4x2"),
                          "--config-file", dir.file("ts.yaml"), "--dry-run"},
                         dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["resource"], "nvidia.com/gpu");
  EXPECT_EQ(j[0]["devices"].size(), 8u);
  EXPECT_EQ(j[0]["devices"][7]["id"], "GPU-40380e55-81ac-72b8-7924-42d4762c4989::3");
  EXPECT_EQ(j[0]["devices"][7]["numa_nodes"], nlohmann::json::array({1}));
  const auto mig = run_cli({"device-plugin", "--topology", test::topo_json_path("h100-mig"),
                            "--mig-strategy", "mixed", "--dry-run"},
                           dir);
  ASSERT_EQ(mig.exit_code, 0) << mig.err;
  EXPECT_EQ(nlohmann::json::parse(mig.out).size(), 4u);
}

TEST(DevicePluginCli, BadInputIsOneLineExitTwo) {
  TempDir dir;
  test::write_text(dir.file("bad.yaml"),
                   "sharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n"
                   "      replicas: 1\n");
  test::write_text(dir.file("mps-mixed.yaml"),
                   "sharing:\n  mps:\n    resources:\n    - {name: nvidia.com/gpu, replicas: 2}\n");
  test::write_text(dir.file("broken.json"), "{\n  \"schema\": \n");
  // Library text with exit 1 before (yaml-cpp "bad conversion", stoi, json out_of_range).
  test::write_text(dir.file("key.yaml"), "[a]: 1\n");
  test::write_text(dir.file("upper.yaml"),
                   "sharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n"
                   "      replicas: 2\n      rename: UPPER\n");
  std::string nv = test::read_text(test::topo_json_path("t4x2"));
  const auto sys = nv.find("\"path\": \"SYS\"");
  ASSERT_NE(sys, std::string::npos);
  nv.replace(sys, std::string("\"path\": \"SYS\"").size(), "\"path\": \"NV99999999999\"");
  test::write_text(dir.file("nv.json"), nv);
  test::write_text(dir.file("huge.json"), "{\n  \"schema\": 1e400\n}\n");
  const std::string topo = test::topo_json_path("t4x2");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"device-plugin", "--topology", topo, "--config-file", dir.file("key.yaml")},
       "gpuorch: " + dir.file("key.yaml") + ":1: a key in the config must be a name\n"},
      {{"device-plugin", "--topology", topo, "--config-file", dir.file("upper.yaml")},
       "gpuorch: " + dir.file("upper.yaml") +
           ":6: rename: incorrect format for resource name 'nvidia.com/UPPER': after nvidia.com/ "
           "a DNS subdomain (a-z, 0-9, '-', '.', starting and ending with a letter or digit)\n"},
      {{"device-plugin", "--topology", dir.file("huge.json")},
       "gpuorch: " + dir.file("huge.json") + ":2: number 1e400 is out of range\n"},
      {{"device-plugin", "--topology", topo, "--config-file", dir.file("bad.yaml")},
       "gpuorch: " + dir.file("bad.yaml") + ":5: replicas is 1: sharing needs at least 2\n"},
      {{"device-plugin", "--topology", topo, "--config-file", dir.file("mps-mixed.yaml"),
        "--mig-strategy", "mixed"},
       "gpuorch: " + dir.file("mps-mixed.yaml") +
           ": using --mig-strategy=mixed is not supported with MPS\n"},
      {{"device-plugin", "--topology", topo, "--imex-channel-ids", "1"},
       "gpuorch: invalid IMEX channel IDs [1]: only [] and [0] are supported\n"},

      {{"device-plugin", "--topology", dir.file("broken.json")},
       "gpuorch: " + dir.file("broken.json") + ":3: not valid JSON\n"},
      {{"device-plugin", "--topology", topo, "--device-plugin-path", dir.file("missing")},
       "gpuorch: " + dir.file("missing") + ": the device plugin directory does not exist\n"},
      {{"device-plugin", "--topology", topo, "--mig-strategy", "some"},
       "gpuorch: unknown MIG strategy 'some' (none, single, mixed)\n"},
      {{"manifests", "--sharing", "mps", "--replicas", "1"},
       "gpuorch: --replicas 1: sharing needs at least 2\n"},
  };
  for (const auto& [args, err] : cases) {
    const auto r = run_cli(args, dir);
    EXPECT_EQ(r.exit_code, 2) << args[0] << " " << r.err;
    EXPECT_EQ(r.err, err);
    EXPECT_EQ(r.out, "");
  }
  const auto r = run_cli({"device-plugin", "--topology", dir.file("nv.json")}, dir);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(test::lines_of(r.err).size(), 1u) << r.err;
  EXPECT_EQ(r.err.rfind("gpuorch: " + dir.file("nv.json") + ": links[", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("]: path \"NV99999999999\": an NVLink count is 1 to 64"), std::string::npos)
      << r.err;
}

TEST(DevicePluginCli, ProcessRegistersTurnsUnhealthyAndStopsOnSigterm) {
  TempDir dir;
  const auto sock_dir = plugin_dir(dir);
  k8s::FakeKubelet kubelet(sock_dir.string());
  kubelet.start();
  const std::string health = dir.file("unhealthy.txt");
  test::write_text(health, "# nothing yet\n");
  // Everything the child needs is made before fork: other threads (gRPC's) may hold the
  // allocator's lock at that moment, so the child only calls async-signal-safe functions.
  const std::string topo = test::topo_json_path("dgx-h100");
  const std::string dp = sock_dir.string() + "/";
  const std::string log_path = dir.file("plugin.log");
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const std::string& log = log_path;
    const int fd = ::open(log.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (fd >= 0) ::dup2(fd, 2);
    ::execl(::gpuorch::test::binary_path(), ::gpuorch::test::binary_path(), "device-plugin",
            "--topology", topo.c_str(), "--device-plugin-path", dp.c_str(), "--health-file",
            health.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ASSERT_TRUE(kubelet.wait_registrations(1, 20s)) << test::read_text(dir.file("plugin.log"));
  const auto reg = kubelet.registrations()[0];
  EXPECT_EQ(reg.resource_name(), "nvidia.com/gpu");
  auto stub = kubelet.connect(reg.endpoint());
  k8s::DeviceWatch watch(*stub);
  ASSERT_TRUE(watch.wait_updates(1, 10s));
  test::write_text(health, "GPU-2fbe396f-df9c-d5a1-4b31-c1658bb71f80  # XID 79 on the node\n");
  ASSERT_TRUE(watch.wait_updates(2, 10s)) << test::read_text(dir.file("plugin.log"));
  const auto list = watch.updates()[1];
  EXPECT_EQ(list.devices(3).id(), "GPU-2fbe396f-df9c-d5a1-4b31-c1658bb71f80");
  EXPECT_EQ(list.devices(3).health(), "Unhealthy");
  EXPECT_EQ(list.devices(2).health(), "Healthy");
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_TRUE(watch.wait_end(5s));
  EXPECT_FALSE(std::filesystem::exists(sock_dir / reg.endpoint()));
  const auto log = test::read_text(dir.file("plugin.log"));
  EXPECT_NE(log.find("registered nvidia.com/gpu"), std::string::npos) << log;
  EXPECT_NE(log.find("stopping: ending streams, removing sockets"), std::string::npos) << log;
}

// NVIDIA's reload: SIGHUP reads the config again and the kubelet gets the new devices by a new
// registration; a config that does not load is one line and the running one stays.
TEST(DevicePluginCli, SighupReloadsTheConfig) {
  TempDir dir;
  const auto sock_dir = plugin_dir(dir);
  k8s::FakeKubelet kubelet(sock_dir.string());
  kubelet.start();
  const std::string config = dir.file("config.yaml");
  const auto replicas = [&](const std::string& n) {
    test::write_text(config,
                     "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                     "    - name: nvidia.com/gpu\n      replicas: " +
                         n + "\n");
  };
  replicas("2");
  test::SchedulerProcess plugin({"--topology", test::topo_json_path("t4x2"), "--device-plugin-path",
                                 sock_dir.string() + "/", "--config-file", config},
                                dir.file("plugin.log"), "device-plugin");
  ASSERT_TRUE(kubelet.wait_registrations(1, 20s)) << plugin.log();
  auto first = kubelet.connect(kubelet.registrations()[0].endpoint());
  k8s::DeviceWatch before(*first);
  ASSERT_TRUE(before.wait_updates(1, 10s));
  EXPECT_EQ(before.updates()[0].devices_size(), 4);  // 2 T4s x 2 replicas

  replicas("4");
  ::kill(plugin.pid(), SIGHUP);
  ASSERT_TRUE(kubelet.wait_registrations(2, 20s)) << plugin.log();
  const auto reg = kubelet.registrations()[1];
  EXPECT_EQ(reg.resource_name(), "nvidia.com/gpu");
  auto second = kubelet.connect(reg.endpoint());
  k8s::DeviceWatch after(*second);
  ASSERT_TRUE(after.wait_updates(1, 10s)) << plugin.log();
  EXPECT_EQ(after.updates()[0].devices_size(), 8);  // 2 T4s x 4 replicas
  EXPECT_EQ(after.updates()[0].devices(7).id(), "GPU-40380e55-81ac-72b8-7924-42d4762c4989::3");
  EXPECT_TRUE(before.wait_end(5s));  // the old endpoint's stream ended

  replicas("1");  // NVIDIA refuses it too
  ::kill(plugin.pid(), SIGHUP);
  const std::string refused = "SIGHUP: " + config + ":6: replicas is 1: sharing needs at least 2";
  for (int i = 0; i < 100 && plugin.log().find(refused) == std::string::npos; ++i) {
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_NE(plugin.log().find(refused), std::string::npos) << plugin.log();
  EXPECT_NE(plugin.log().find("SIGHUP: keeping the running config"), std::string::npos);
  EXPECT_TRUE(plugin.running());
  EXPECT_FALSE(after.wait_end(500ms));  // still served, with 4 replicas per GPU
  EXPECT_EQ(kubelet.registrations().size(), 2u);
  EXPECT_EQ(plugin.stop(), 0) << plugin.log();
}

// NVIDIA's --fail-on-init-error=false: nothing to serve keeps the plugin up, idle.
TEST(DevicePluginCli, FailOnInitErrorFalseWaits) {
  TempDir dir;
  const auto sock_dir = plugin_dir(dir);
  const std::vector<std::string> args = {
      "device-plugin", "--topology",           test::topo_json_path("t4x2"), "--vendor",
      "amd",           "--device-plugin-path", sock_dir.string() + "/"};
  EXPECT_EQ(run_cli(args, dir).exit_code, 1);  // the default, true: no GPU is an error
  std::vector<std::string> lenient(args.begin() + 1, args.end());
  lenient.push_back("--fail-on-init-error=false");
  test::SchedulerProcess idle(lenient, dir.file("idle.log"), "device-plugin");
  for (int i = 0; i < 50 && idle.log().find("waiting indefinitely") == std::string::npos; ++i) {
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_NE(idle.log().find("no devices found: waiting indefinitely (fail-on-init-error is "
                            "false)"),
            std::string::npos)
      << idle.log();
  EXPECT_TRUE(idle.running());
  EXPECT_EQ(idle.stop(), 0) << idle.log();
}

// Every NVIDIA flag is taken (with its alias), and the variables stand in for absent flags.
TEST(DevicePluginCli, NvidiasFlagsAndVariables) {
  TempDir dir;
  const std::string topo = test::topo_json_path("t4x2");
  const auto ok = run_cli({"device-plugin",
                           "--topology",
                           topo,
                           "--dry-run",
                           "--fail-on-init-error=false",
                           "--pass-device-specs",
                           "--gdrcopy-enabled",
                           "--gds-enabled=true",
                           "--mofed-enabled=false",
                           "--mps-root",
                           "/run/nvidia/mps",
                           "--nvidia-ctk-path",
                           "/usr/bin/nvidia-ctk",
                           "--container-driver-root",
                           "/driver-root",
                           "--cdi-feature-flags",
                           "x",
                           "--imex-channel-ids",
                           "0",
                           "--imex-required",
                           "--device-discovery-strategy",
                           "nvml",
                           "--kubelet-socket",
                           "",
                           "--nvidia-driver-root",
                           "/",
                           "--nvidia-dev-root",
                           "/",
                           "--cdi-annotation-prefix",
                           "cdi.k8s.io/",
                           "--device-list-strategy",
                           "envvar,volume-mounts",
                           "--device-id-strategy",
                           "index",
                           "--mig-strategy",
                           "none"},
                          dir);
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  const std::string out = dir.file("env.json");
  const std::string cmd = "MIG_STRATEGY=mixed NVIDIA_CTK_PATH=/x " +
                          test::shell_quote(test::binary_path()) + " device-plugin --topology " +
                          test::shell_quote(test::topo_json_path("h100-mig")) + " --dry-run >" +
                          test::shell_quote(out) + " 2>/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  EXPECT_EQ(nlohmann::json::parse(test::read_text(out)).size(), 4u);  // mixed: 4 resources
}

}  // namespace
}  // namespace gpuorch
