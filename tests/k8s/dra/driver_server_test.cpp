// gpuorch dra-driver's kubelet side through a real gRPC client on its unix sockets: registration,
// prepare and unprepare (idempotent, and remembered across a restart through the checkpoint),
// and peers that send what they should not.
#include "gpuorch/k8s/dra/driver_server.hpp"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "gpuorch/k8s/dra/dra_api.hpp"
#include "gpuorch/k8s/dra/resource_slice.hpp"
#include "k8s/k8s_support.hpp"
#include "pluginregistration/v1/api.grpc.pb.h"
#include "support/test_support.hpp"

namespace gpuorch::k8s::dra {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr const char* kNode = "dgx-h100-01";
constexpr const char* kUid = "0f9e1b6a-1111-4c2d-9e3f-000000000001";

json allocated_claim(const std::string& uid, const std::vector<std::string>& devices) {
  json results = json::array();
  for (const auto& d : devices) {
    results.push_back(
        {{"request", "gpus"}, {"driver", kDriverName}, {"pool", kNode}, {"device", d}});
  }
  return {{"metadata", {{"name", "c1"}, {"namespace", "ns1"}, {"uid", uid}}},
          {"status", {{"allocation", {{"devices", {{"results", results}}}}}}}};
}

class DraDriver : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* d : {"registry", "plugin", "cdi", "dev"}) {
      std::filesystem::create_directories(dir.path() / d);
    }
    // Device nodes as the CDI spec looks for them: GPU 0 and the control node only.
    test::write_text(dir.file("dev/nvidia0"), "");
    test::write_text(dir.file("dev/nvidiactl"), "");
    claims["ns1/c1"] = allocated_claim(kUid, {"gpu-0", "gpu-1"});
    start();
  }

  void start() {
    PreparerOptions po;
    po.cdi = {kDriverName, dir.file("cdi"), dir.file("dev")};
    po.pool = kNode;
    po.checkpoint_path = dir.file("plugin/checkpoint.json");
    po.log = [this](const std::string& l) { log.push_back(l); };
    preparer = std::make_unique<ClaimPreparer>(
        test::fixture_host("dgx-h100"), po, [this](const std::string& ns, const std::string& n) {
          ++reads;
          const auto it = claims.find(ns + "/" + n);
          if (it == claims.end())
            throw std::runtime_error("resourceclaims \"" + n + "\" not found");
          return it->second;
        });
    server = std::make_unique<DriverServer>(
        *preparer,
        DriverServerOptions{kDriverName, dir.file("registry"), dir.file("plugin"), 128, po.log});
    stub = drapb::DRAPlugin::NewStub(
        grpc::CreateChannel("unix:" + server->dra_socket(), grpc::InsecureChannelCredentials()));
  }

  void restart() {
    stub.reset();
    server.reset();
    preparer.reset();
    start();
  }

  drapb::NodePrepareResourcesResponse prepare(const std::vector<drapb::Claim>& cs,
                                              grpc::Status* status = nullptr) {
    drapb::NodePrepareResourcesRequest req;
    for (const auto& c : cs) *req.add_claims() = c;
    drapb::NodePrepareResourcesResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    const auto s = stub->NodePrepareResources(&ctx, req, &resp);
    if (status != nullptr) {
      *status = s;
    } else {
      EXPECT_TRUE(s.ok()) << s.error_message();
    }
    return resp;
  }

  drapb::NodeUnprepareResourcesResponse unprepare(const drapb::Claim& c) {
    drapb::NodeUnprepareResourcesRequest req;
    *req.add_claims() = c;
    drapb::NodeUnprepareResourcesResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    const auto s = stub->NodeUnprepareResources(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp;
  }

  static drapb::Claim claim(const std::string& ns, const std::string& uid,
                            const std::string& name) {
    drapb::Claim c;
    c.set_namespace_(ns);
    c.set_uid(uid);
    c.set_name(name);
    return c;
  }

  std::string cdi_file() const {
    return dir.file(fmt::format("cdi/gpu.gpuorch.io-claim_{}.json", kUid));
  }

  test::TempDir dir;
  std::map<std::string, json> claims;
  int reads = 0;
  std::vector<std::string> log;
  std::unique_ptr<ClaimPreparer> preparer;
  std::unique_ptr<DriverServer> server;
  std::unique_ptr<drapb::DRAPlugin::Stub> stub;
};

TEST_F(DraDriver, RegistrationNamesTheDraServiceAndItsSocket) {
  auto reg = pluginregistration::Registration::NewStub(grpc::CreateChannel(
      "unix:" + server->registration_socket(), grpc::InsecureChannelCredentials()));
  EXPECT_EQ(server->registration_socket(), dir.file("registry/gpu.gpuorch.io-reg.sock"));
  grpc::ClientContext ctx;
  pluginregistration::PluginInfo info;
  ASSERT_TRUE(reg->GetInfo(&ctx, {}, &info).ok());
  EXPECT_EQ(info.type(), "DRAPlugin");
  EXPECT_EQ(info.name(), "gpu.gpuorch.io");
  EXPECT_EQ(info.endpoint(), dir.file("plugin/dra.sock"));
  ASSERT_EQ(info.supported_versions_size(), 1);
  EXPECT_EQ(info.supported_versions(0), "v1.DRAPlugin");
  // What kubelet v1.37.2 calls (its api_grpc.pb.go): the registration's "v1.DRAPlugin" is a short
  // name, the gRPC service is the proto package's; a wrong package answers Unimplemented.
  EXPECT_STREQ(drapb::DRAPlugin::service_full_name(), "k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin");
  EXPECT_STREQ(pluginregistration::Registration::service_full_name(),
               "pluginregistration.Registration");
  grpc::ClientContext ctx2;
  pluginregistration::RegistrationStatus st;
  st.set_plugin_registered(true);
  pluginregistration::RegistrationStatusResponse r;
  ASSERT_TRUE(reg->NotifyRegistrationStatus(&ctx2, st, &r).ok());
  EXPECT_TRUE(server->registered());
  // Only the owner may connect: the sockets hand out devices.
  struct stat sb {};
  ASSERT_EQ(::stat(server->dra_socket().c_str(), &sb), 0);
  EXPECT_EQ(sb.st_mode & 0777, 0600U);
}

TEST_F(DraDriver, PrepareWritesTheCdiSpecAndIsIdempotentAcrossRestarts) {
  const auto c = claim("ns1", kUid, "c1");
  const auto first = prepare({c});
  ASSERT_EQ(first.claims().count(kUid), 1U);
  const auto& answer = first.claims().at(kUid);
  ASSERT_EQ(answer.error(), "");
  ASSERT_EQ(answer.devices_size(), 2);
  EXPECT_EQ(answer.devices(0).device_name(), "gpu-0");
  EXPECT_EQ(answer.devices(0).pool_name(), kNode);
  EXPECT_EQ(answer.devices(0).request_names(0), "gpus");
  EXPECT_EQ(answer.devices(1).cdi_device_ids(0),
            fmt::format("gpu.gpuorch.io/claim={}-gpu-1", kUid));

  json spec = json::parse(test::read_text(cdi_file()));  // not const: a missing key is null
  EXPECT_EQ(spec["kind"], "gpu.gpuorch.io/claim");
  ASSERT_EQ(spec["devices"].size(), 2U);
  const json& edits0 = spec["devices"][0]["containerEdits"];
  EXPECT_NE(edits0["env"].dump().find("NVIDIA_VISIBLE_DEVICES=GPU-64bbca15-1776-feaf-35c7-"
                                      "c0761cd05691,GPU-"),
            std::string::npos)
      << edits0.dump();
  EXPECT_EQ(edits0["deviceNodes"], json::array({{{"path", "/dev/nvidia0"}}}));
  // GPU 1's node does not exist on this "host": left out, not invented.
  EXPECT_FALSE(spec["devices"][1]["containerEdits"].contains("deviceNodes"));
  EXPECT_EQ(spec["containerEdits"]["deviceNodes"], json::array({{{"path", "/dev/nvidiactl"}}}));
  EXPECT_EQ(reads, 1);

  // Again: the same answer, without reading the claim again.
  EXPECT_EQ(prepare({c}).claims().at(kUid).SerializeAsString(), answer.SerializeAsString());
  EXPECT_EQ(reads, 1);

  // A restarted driver knows from its checkpoint, even when the claim is no longer readable.
  claims.clear();
  reads = 0;
  restart();
  EXPECT_EQ(preparer->prepared().size(), 1U);
  std::filesystem::remove(cdi_file());  // and writes a lost spec again
  EXPECT_EQ(prepare({c}).claims().at(kUid).SerializeAsString(), answer.SerializeAsString());
  EXPECT_TRUE(std::filesystem::exists(cdi_file()));
  EXPECT_EQ(reads, 0);

  EXPECT_EQ(unprepare(c).claims().at(kUid).error(), "");
  EXPECT_FALSE(std::filesystem::exists(cdi_file()));
  EXPECT_TRUE(preparer->prepared().empty());
  EXPECT_EQ(unprepare(c).claims().at(kUid).error(), "");  // idempotent
  restart();
  EXPECT_TRUE(preparer->prepared().empty());
}

TEST_F(DraDriver, EachClaimGetsItsOwnErrorAndTheOthersStillPrepare) {
  claims["ns1/stale"] = allocated_claim("another-uid", {"gpu-2"});
  claims["ns1/pending"] = {{"metadata", {{"uid", "uid-pending"}}}};
  claims["ns1/elsewhere"] = allocated_claim("uid-elsewhere", {});
  claims["ns1/elsewhere"]["status"]["allocation"]["devices"]["results"] = json::array(
      {{{"request", "r"}, {"driver", kDriverName}, {"pool", "other-node"}, {"device", "gpu-0"}}});
  claims["ns1/unknown"] = allocated_claim("uid-unknown", {"gpu-99"});
  const auto resp =
      prepare({claim("ns1", kUid, "c1"), claim("ns1", "uid-stale", "stale"),
               claim("ns1", "uid-pending", "pending"), claim("ns1", "uid-elsewhere", "elsewhere"),
               claim("ns1", "uid-unknown", "unknown"), claim("ns1", "uid-gone", "gone")});
  EXPECT_EQ(resp.claims().at(kUid).error(), "");
  EXPECT_NE(resp.claims().at("uid-stale").error().find("has UID another-uid"), std::string::npos);
  EXPECT_NE(resp.claims().at("uid-pending").error().find("is not allocated"), std::string::npos);
  EXPECT_NE(resp.claims()
                .at("uid-elsewhere")
                .error()
                .find("no device of driver gpu.gpuorch.io in pool dgx-h100-01"),
            std::string::npos);
  EXPECT_NE(resp.claims().at("uid-unknown").error().find("gpu-99 is not one of this node's"),
            std::string::npos);
  EXPECT_NE(resp.claims().at("uid-gone").error().find("not found"), std::string::npos);
  EXPECT_EQ(preparer->prepared().size(), 1U);
}

TEST_F(DraDriver, ReferencesThatCannotNameAClaimAreRefusedBeforeUse) {
  const std::string outside = dir.file("escaped.json");
  const auto resp = prepare({claim("../..", "u1", "c1"), claim("ns1", "../../escaped", "c1"),
                             claim("ns1", "u3", std::string("c\0x", 3)), claim("", "", "")});
  ASSERT_EQ(resp.claims_size(), 4);
  for (const auto& [uid, answer] : resp.claims()) {
    EXPECT_NE(answer.error(), "") << uid;
    EXPECT_EQ(answer.devices_size(), 0) << uid;
  }
  EXPECT_EQ(reads, 0);
  EXPECT_TRUE(std::filesystem::is_empty(dir.file("cdi")));
  EXPECT_FALSE(std::filesystem::exists(outside));
}

// Connects to a unix socket and writes `bytes` (maybe none); returns the open descriptor.
int raw_connect(const std::string& path, const std::string& bytes) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  EXPECT_EQ(::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
  if (!bytes.empty()) (void)::write(fd, bytes.data(), bytes.size());
  return fd;
}

TEST_F(DraDriver, MalformedPeersNeitherCrashNorHoldTheDriver) {
  // A peer that connects and says nothing, one that speaks HTTP/1, one that sends noise.
  std::string noise(4096, '\0');
  for (std::size_t i = 0; i < noise.size(); ++i) noise[i] = static_cast<char>(i * 131 + 7);
  std::vector<int> fds{raw_connect(server->dra_socket(), ""),
                       raw_connect(server->dra_socket(), "GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
                       raw_connect(server->dra_socket(), noise),
                       raw_connect(server->registration_socket(), noise)};
  // A well-framed gRPC call whose body is not a NodePrepareResourcesRequest.
  auto channel =
      grpc::CreateChannel("unix:" + server->dra_socket(), grpc::InsecureChannelCredentials());
  for (const std::string& body : {noise, std::string("\x0a\xff\xff\xff\xff\x0f", 6)}) {
    grpc::GenericStub generic(channel);
    grpc::CompletionQueue cq;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    grpc::Slice slice(body);
    const grpc::ByteBuffer request(&slice, 1);
    auto call = generic.PrepareUnaryCall(
        &ctx, "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources", request, &cq);
    call->StartCall();
    grpc::ByteBuffer response;
    grpc::Status status;
    call->Finish(&response, &status, reinterpret_cast<void*>(1));
    void* tag = nullptr;
    bool ok = false;
    ASSERT_TRUE(cq.Next(&tag, &ok));
    EXPECT_FALSE(status.ok());
    EXPECT_NE(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << status.error_message();
    cq.Shutdown();
    while (cq.Next(&tag, &ok)) {
    }
  }
  // More claims than one call may carry.
  std::vector<drapb::Claim> many(129, claim("ns1", kUid, "c1"));
  grpc::Status too_many;
  (void)prepare(many, &too_many);
  EXPECT_EQ(too_many.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(too_many.error_message().find("at most 128"), std::string::npos);
  // And the driver still answers, while the silent peers hold their connections.
  EXPECT_EQ(prepare({claim("ns1", kUid, "c1")}).claims().at(kUid).devices_size(), 2);
  for (const int fd : fds) ::close(fd);
}

TEST_F(DraDriver, AnUnreadableCheckpointIsSetAsideNotFatal) {
  server.reset();
  stub.reset();
  preparer.reset();
  test::write_text(dir.file("plugin/checkpoint.json"), "{\"version\": 7, \"claims\": {}}");
  log.clear();
  start();
  EXPECT_TRUE(preparer->prepared().empty());
  EXPECT_TRUE(std::filesystem::exists(dir.file("plugin/checkpoint.json.bad")));
  ASSERT_FALSE(log.empty());
  EXPECT_NE(log.front().find("version 7 is not 1"), std::string::npos) << log.front();
}

}  // namespace
}  // namespace gpuorch::k8s::dra
