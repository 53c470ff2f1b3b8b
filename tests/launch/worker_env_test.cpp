// The torchrun environment contract, env files, Slurm/Kubernetes node identity, error files.
#include "gpuorch/launch/worker_env.hpp"

#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/stat.h>

#include <thread>

#include "../launch/launch_support.hpp"
#include "../support/test_support.hpp"
#include "gpuorch/launch/error_file.hpp"
#include "gpuorch/launch/etcd_client.hpp"
#include "gpuorch/launch/node_env.hpp"
#include "gpuorch/launch/rendezvous.hpp"
#include "gpuorch/topology/json_read.hpp"

namespace gpuorch::launch {
namespace {

WorkerIdentity identity() {
  WorkerIdentity w;
  w.local_rank = 1;
  w.rank = 3;
  w.world_size = 4;
  w.local_world_size = 2;
  w.group_rank = 1;
  w.group_world_size = 2;
  w.role_rank = 3;
  w.role_world_size = 4;
  w.master_addr = "10.0.0.1";
  w.master_port = 29500;
  w.restart_count = 1;
  w.max_restarts = 3;
  w.run_id = "job7";
  w.error_file = "/tmp/x/error.json";
  return w;
}

Plan dgx_plan() {
  PlanRequest r;
  r.nproc = 2;
  return make_plan(topology::load_host_json(launch_test::topo_json("dgx-h100")), r);
}

TEST(WorkerEnv, TorchrunContract) {
  const auto env =
      worker_env({{"PATH", "/usr/bin"}, {"NCCL_DEBUG", "INFO"}}, {}, dgx_plan(), identity());
  const std::map<std::string, std::string> expected{
      {"RANK", "3"},
      {"LOCAL_RANK", "1"},
      {"WORLD_SIZE", "4"},
      {"LOCAL_WORLD_SIZE", "2"},
      {"GROUP_RANK", "1"},
      {"GROUP_WORLD_SIZE", "2"},
      {"ROLE_RANK", "3"},
      {"ROLE_WORLD_SIZE", "4"},
      {"ROLE_NAME", "default"},
      {"MASTER_ADDR", "10.0.0.1"},
      {"MASTER_PORT", "29500"},
      {"TORCHELASTIC_RESTART_COUNT", "1"},
      {"TORCHELASTIC_MAX_RESTARTS", "3"},
      {"TORCHELASTIC_RUN_ID", "job7"},
      {"TORCHELASTIC_USE_AGENT_STORE", "False"},
      {"TORCHELASTIC_ERROR_FILE", "/tmp/x/error.json"},
      {"OMP_NUM_THREADS", "28"},
      {"NCCL_NVLS_ENABLE", "0"},
      {"NCCL_DEBUG", "INFO"},  // passes through
      {"PATH", "/usr/bin"},
      {"CUDA_VISIBLE_DEVICES", "0,1"},
      {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"},
      {"NCCL_IB_HCA", "=mlx5_1"},
      {"GPUORCH_BACKEND", "nccl"},
  };
  for (const auto& [k, v] : expected) {
    ASSERT_TRUE(env.count(k)) << k;
    EXPECT_EQ(env.at(k), v) << k;
  }
}

TEST(WorkerEnv, UserChoicesWinOverDefaultsButNotOverTheContract) {
  const auto env = worker_env({{"OMP_NUM_THREADS", "3"}, {"NCCL_NVLS_ENABLE", "1"}},
                              {{"NCCL_IB_HCA", "mlx5_7"}, {"RANK", "99"}}, dgx_plan(), identity());
  EXPECT_EQ(env.at("OMP_NUM_THREADS"), "3");
  EXPECT_EQ(env.at("NCCL_NVLS_ENABLE"), "1");
  EXPECT_EQ(env.at("NCCL_IB_HCA"), "mlx5_7");
  EXPECT_EQ(env.at("RANK"), "3");
}

TEST(EnvFile, ReadsExportsQuotesAndComments) {
  test::TempDir dir;
  test::write_text(dir.file("nccl.env"),
                   "# from gpuorch tune nccl\n\nexport NCCL_ALGO=Ring\nNCCL_PROTO = \"Simple\"\n"
                   "NCCL_BUFFSIZE='8388608'\n");
  const auto env = read_env_file(dir.file("nccl.env"));
  EXPECT_EQ(env.at("NCCL_ALGO"), "Ring");
  EXPECT_EQ(env.at("NCCL_PROTO"), "Simple");
  EXPECT_EQ(env.at("NCCL_BUFFSIZE"), "8388608");
}

TEST(EnvFile, BadLinesSayFileAndLine) {
  test::TempDir dir;
  test::write_text(dir.file("bad.env"), "A=1\nthis is not an assignment\n");
  EXPECT_EQ(test::input_error([&] { read_env_file(dir.file("bad.env")); }),
            dir.file("bad.env") + ":2: expected KEY=VALUE");
  test::write_text(dir.file("bad2.env"), "1A=1\n");
  EXPECT_EQ(test::input_error([&] { read_env_file(dir.file("bad2.env")); }),
            dir.file("bad2.env") + ":1: not a variable name: 1A");
}

// Bounded as every loader (issue 30): /dev/zero, a folder or a FIFO is one line, never memory or
// a hang.
TEST(EnvFile, WhatIsNotARegularFileIsRefusedAtOnce) {
  test::TempDir dir;
  EXPECT_NE(test::input_error([] { read_env_file("/dev/zero"); }).find("not a regular file"),
            std::string::npos);
  EXPECT_NE(test::input_error([&] { read_env_file(dir.path().string()); }).find("directory"),
            std::string::npos);
  const std::string fifo = dir.file("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_NE(test::input_error([&] { read_env_file(fifo); }).find("FIFO"), std::string::npos);
  EXPECT_NE(test::input_error([&] { read_env_file(dir.file("absent.env")); }).find("absent.env"),
            std::string::npos);
}

TEST(NodeEnv, SlurmAndKubernetes) {
  const auto s = detect_node_env({{"SLURM_JOB_ID", "4242"},
                                  {"SLURM_NODEID", "2"},
                                  {"SLURM_NNODES", "4"},
                                  {"SLURM_PROCID", "2"},
                                  {"SLURM_JOB_NODELIST", "gpu[07-10],login1"}});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->source, "slurm");
  EXPECT_EQ(s->node_rank, 2);
  EXPECT_EQ(s->nnodes, 4);
  EXPECT_EQ(s->master_addr, "gpu07");
  EXPECT_EQ(s->run_id, "4242");
  const auto k = detect_node_env({{"JOB_COMPLETION_INDEX", "3"}});
  ASSERT_TRUE(k);
  EXPECT_EQ(k->source, "kubernetes");
  EXPECT_EQ(k->node_rank, 3);
  EXPECT_FALSE(detect_node_env({{"HOME", "/root"}}));
  EXPECT_EQ(test::input_error([] {
              detect_node_env({{"JOB_COMPLETION_INDEX", "x"}});
            }),
            "JOB_COMPLETION_INDEX=x: not a non-negative integer");
  EXPECT_EQ(first_slurm_host("node1,node2"), "node1");
  EXPECT_EQ(first_slurm_host("a[3,5-6]"), "a3");
}

TEST(ErrorFile, ReadsTorchRecordFormat) {
  test::TempDir dir;
  test::write_text(dir.file("error.json"),
                   R"({"message": {"message": "RuntimeError: injected failure at step 3",
                       "extraInfo": {"py_callstack": "Traceback ...", "timestamp": "1700000123"}}})");
  const auto e = read_error_file(dir.file("error.json"));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->message, "RuntimeError: injected failure at step 3");
  EXPECT_EQ(e->timestamp, 1700000123);
  EXPECT_EQ(e->traceback, "Traceback ...");
  EXPECT_FALSE(read_error_file(dir.file("absent.json")));
  test::write_text(dir.file("garbage.json"), "{not json");
  EXPECT_FALSE(read_error_file(dir.file("garbage.json")));
  // A worker may leave anything there: endless, a FIFO, an out-of-range timestamp.
  EXPECT_FALSE(read_error_file("/dev/zero"));
  const std::string fifo = dir.file("error.fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_FALSE(read_error_file(fifo));
  test::write_text(
      dir.file("big-ts.json"),
      R"({"message": {"message": "x", "extraInfo": {"timestamp": "99999999999999999999"}}})");
  const auto big = read_error_file(dir.file("big-ts.json"));
  ASSERT_TRUE(big);
  EXPECT_EQ(big->timestamp, 0);
}

TEST(Etcd, Base64RoundTrip) {
  for (const std::string s : {"", "f", "fo", "foo", "/gpuorch/rdzv/job/state", "\xff\x00\x01"}) {
    EXPECT_EQ(base64_decode(base64_encode(s)), s);
  }
  EXPECT_EQ(base64_encode("foo"), "Zm9v");
  EXPECT_EQ(base64_encode("fo"), "Zm8=");
}

// A gateway that answers nonsense: every error is an EtcdError naming etcd and the path, never
// library text ("stoll", json type_error).
TEST(Etcd, BadAnswersAreClearErrors) {
  std::string answer;
  httplib::Server fake;
  fake.Post(".*", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(answer, "application/json");
  });
  const int port = fake.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread serve([&] { fake.listen_after_bind(); });
  EtcdClient c("127.0.0.1:" + std::to_string(port), std::chrono::seconds(2));
  const std::string at = "etcd at 127.0.0.1:" + std::to_string(port);
  const auto error = [&](const std::string& body, const std::function<void()>& call) {
    answer = body;
    try {
      call();
    } catch (const EtcdError& e) {
      return std::string(e.what());
    } catch (const std::exception& e) {
      return "not an EtcdError: " + std::string(e.what());
    }
    return std::string("nothing thrown");
  };
  const auto get = [&] { c.get("/k"); };
  const auto prefix = [&] {
    std::int64_t rev = 0;
    c.get_prefix("/p/", &rev);
  };
  EXPECT_EQ(error("not json", get), at + "/v3/kv/range: the answer is not a JSON object: not json");
  EXPECT_EQ(error("[1, 2]", get), at + "/v3/kv/range: the answer is not a JSON object: [1, 2]");
  EXPECT_EQ(error(R"({"kvs": [{"key": "aw==", "mod_revision": "abc"}]})", get),
            at + "/v3/kv/range: unexpected answer: \"mod_revision\" is not a 64-bit integer: "
                 "\"abc\"");
  EXPECT_EQ(error(R"({"kvs": [{"key": "aw==", "version": "99999999999999999999"}]})", get),
            at + "/v3/kv/range: unexpected answer: \"version\" is not a 64-bit integer: "
                 "\"99999999999999999999\"");
  EXPECT_EQ(error(R"({"kvs": [{"key": 5}]})", get),
            at + "/v3/kv/range: unexpected answer: \"key\" is not a string");
  EXPECT_EQ(error(R"({"kvs": "x"})", get),
            at + "/v3/kv/range: unexpected answer: {\"kvs\": \"x\"}");
  EXPECT_EQ(error(R"({"header": {"revision": "1x"}})", prefix),
            at + "/v3/kv/range: unexpected answer: \"revision\" is not a 64-bit integer: \"1x\"");
  EXPECT_EQ(error(R"({"kvs": 3})", prefix),
            at + "/v3/kv/range: unexpected answer: \"kvs\" is not an array");
  EXPECT_EQ(error(R"({"succeeded": "yes"})", [&] { c.put_if("/k", "v", 0); }),
            at + "/v3/kv/txn: unexpected answer: {\"succeeded\": \"yes\"}");
  EXPECT_EQ(error(R"({"ID": {}})", [&] { c.grant_lease(5); }),
            at + "/v3/lease/grant: unexpected answer: \"ID\" is not a 64-bit integer: {}");
  EXPECT_EQ(error(R"({"ID": "0"})", [&] { c.grant_lease(5); }),
            at + "/v3/lease/grant: granted no lease");
  EXPECT_EQ(error(R"({"result": {"TTL": "ten"}})", [&] { c.keep_alive(7); }),
            at + "/v3/lease/keepalive: unexpected answer: \"TTL\" is not a 64-bit integer: "
                 "\"ten\"");
  answer = R"({"kvs": [{"key": "aw==", "value": "dg==", "mod_revision": "12"}]})";
  const auto kv = c.get("/k");
  ASSERT_TRUE(kv);
  EXPECT_EQ(kv->value, "v");
  EXPECT_EQ(kv->mod_revision, 12);
  fake.stop();
  serve.join();
}

// A rendezvous state with a field of the wrong type (written by a broken peer) is a clear
// EtcdError, not nlohmann's type_error.
TEST(Etcd, PeerStateOfTheWrongShapeIsAClearError) {
  httplib::Server fake;
  fake.Post(".*", [&](const httplib::Request& req, httplib::Response& res) {
    std::string body = "{}";
    if (req.path == "/v3/lease/grant") body = R"({"ID": "7", "TTL": "10"})";
    if (req.path == "/v3/lease/keepalive") body = R"({"result": {"ID": "7", "TTL": "10"}})";
    if (req.path == "/v3/kv/range") {
      body = R"({"kvs": [{"key": "cw==", "mod_revision": "3", "value": ")" +
             base64_encode(R"({"round": "one", "participants": []})") + R"("}]})";
    }
    res.set_content(body, "application/json");
  });
  const int port = fake.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread serve([&] { fake.listen_after_bind(); });
  RendezvousConfig c;
  c.backend = "etcd";
  c.endpoint = "127.0.0.1:" + std::to_string(port);
  c.run_id = "job";
  c.local_addr = "127.0.0.1";
  c.join_timeout = std::chrono::seconds(5);
  std::string what;
  try {
    auto r = make_etcd_rendezvous(c);
    r->next_round([] { return false; });
  } catch (const EtcdError& e) {
    what = e.what();
  } catch (const std::exception& e) {
    what = std::string("not an EtcdError: ") + e.what();
  }
  EXPECT_EQ(
      what,
      R"(rendezvous state has a field of the wrong type: {"round": "one", "participants": []})");
  fake.stop();
  serve.join();
}

// The client against a real etcd: compare-and-swap, leases, prefix reads, watches.
TEST(Etcd, ClientAgainstLoopbackEtcd) {
  if (!launch_test::have_etcd()) GTEST_SKIP() << "etcd is not installed (Debian: etcd-server)";
  test::TempDir dir;
  launch_test::LoopbackEtcd etcd(dir.path() / "etcd");
  ASSERT_TRUE(etcd.ready());
  EtcdClient c(etcd.endpoint());
  EXPECT_FALSE(c.get("/k"));
  EXPECT_TRUE(c.put_if("/k", "v1", 0));
  EXPECT_FALSE(c.put_if("/k", "v2", 0));  // exists now
  const auto kv = c.get("/k");
  ASSERT_TRUE(kv);
  EXPECT_EQ(kv->value, "v1");
  EXPECT_TRUE(c.put_if("/k", "v2", kv->mod_revision));
  EXPECT_FALSE(c.put_if("/k", "v3", kv->mod_revision));  // stale revision
  const auto lease = c.grant_lease(5);
  c.put("/p/a", "1", lease);
  c.put("/p/b", "2");
  EXPECT_EQ(c.get_prefix("/p/").size(), 2u);
  EXPECT_TRUE(c.keep_alive(lease));
  c.revoke_lease(lease);
  EXPECT_EQ(c.get_prefix("/p/").size(), 1u);  // the leased key went with its lease
  const auto before = c.get("/k")->mod_revision;
  EXPECT_FALSE(c.wait_for_change("/k", before, std::chrono::milliseconds(200)));
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EtcdClient(etcd.endpoint()).put("/k", "v4");
  });
  EXPECT_TRUE(c.wait_for_change("/k", before, std::chrono::seconds(5)));
  writer.join();
}

}  // namespace
}  // namespace gpuorch::launch
