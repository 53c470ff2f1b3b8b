// Kubeconfig files as kubectl writes them (inline data and file paths, token and tokenFile,
// contexts and namespaces), the service account of a pod, the order load_cluster_config tries
// them in, and one `FILE:LINE: what` error for each kind of broken file.
#include "gpuorch/k8s/api/kubeconfig.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

#include "support/test_support.hpp"

namespace gpuorch::k8s {
namespace {

using test::input_error;
using test::read_text;
using test::ScopedEnv;

std::string fixture_dir() { return test::fixture("k8s/kubeconfig"); }
std::string fixture_file(const std::string& name) { return fixture_dir() + "/" + name; }

TEST(Kubeconfig, EmbeddedDataAndCurrentContext) {
  const auto file = fixture_file("embedded.yaml");
  const auto c = load_kubeconfig(file);
  EXPECT_EQ(c.server, "https://127.0.0.1:6443");  // trailing slash dropped
  EXPECT_EQ(c.ca_pem, read_text(fixture_file("certs/ca.crt")));
  EXPECT_EQ(c.client_cert_pem, read_text(fixture_file("certs/client.crt")));
  EXPECT_EQ(c.client_key_pem, read_text(fixture_file("certs/client.key")));
  EXPECT_TRUE(c.bearer_token.empty());
  EXPECT_TRUE(c.token_file.empty());
  EXPECT_EQ(c.default_namespace, "default");
  EXPECT_EQ(c.source, "kubeconfig " + file + " (context admin@test)");
}

TEST(Kubeconfig, ExplicitContextWithTokenAndNamespace) {
  const auto c = load_kubeconfig(fixture_file("embedded.yaml"), "robot@other");
  EXPECT_EQ(c.server, "https://[::1]:8443");
  EXPECT_TRUE(c.ca_pem.empty());  // system CAs
  EXPECT_EQ(c.bearer_token, "robot-token");
  EXPECT_TRUE(c.client_cert_pem.empty());
  EXPECT_EQ(c.default_namespace, "gpu-jobs");
  EXPECT_NE(c.source.find("(context robot@other)"), std::string::npos);
}

TEST(Kubeconfig, FilePathsResolveAgainstTheKubeconfigsFolder) {
  // From another working directory, so a path relative to the cwd would not be found.
  const test::TempDir elsewhere;
  const auto cwd = std::filesystem::current_path();
  std::filesystem::current_path(elsewhere.path());
  const auto c = load_kubeconfig(fixture_file("files.yaml"));
  std::filesystem::current_path(cwd);
  EXPECT_EQ(c.ca_pem, read_text(fixture_file("certs/ca.crt")));
  EXPECT_EQ(c.client_cert_pem, read_text(fixture_file("certs/client.crt")));
  EXPECT_EQ(c.client_key_pem, read_text(fixture_file("certs/client.key")));
  EXPECT_EQ(c.default_namespace, "team-a");
}

TEST(Kubeconfig, TokenFileIsReadAndRemembered) {
  const auto c = load_kubeconfig(fixture_file("files.yaml"), "token-file");
  EXPECT_EQ(c.bearer_token, "token-from-file");  // the newline is not part of the token
  EXPECT_EQ(c.token_file, fixture_file("certs/token"));
  EXPECT_TRUE(c.client_cert_pem.empty());

  // An inline token wins, as in kubectl; the file is still there for a re-read after a 401.
  const auto both = load_kubeconfig(fixture_file("files.yaml"), "both");
  EXPECT_EQ(both.bearer_token, "inline-token");
  EXPECT_EQ(both.token_file, fixture_file("certs/token"));
}

TEST(Kubeconfig, InClusterFromTheServiceAccountFolder) {
  const ScopedEnv host("KUBERNETES_SERVICE_HOST", "10.96.0.1");
  const ScopedEnv port("KUBERNETES_SERVICE_PORT", "443");
  const auto sa = fixture_file("sa");
  const auto c = in_cluster_config(sa);
  EXPECT_EQ(c.server, "https://10.96.0.1:443");
  EXPECT_EQ(c.bearer_token, "sa-token-1");
  EXPECT_EQ(c.token_file, sa + "/token");
  EXPECT_EQ(c.ca_pem, read_text(sa + "/ca.crt"));
  EXPECT_EQ(c.default_namespace, "gpu-jobs");
  EXPECT_EQ(c.source, "in-cluster");

  const ScopedEnv v6("KUBERNETES_SERVICE_HOST", "fd00::1");
  EXPECT_EQ(in_cluster_config(sa).server, "https://[fd00::1]:443");

  // No namespace file: "default". No token: an error that names the file.
  const test::TempDir dir;
  test::write_text(dir.file("token"), "t\n");
  test::write_text(dir.file("ca.crt"), read_text(sa + "/ca.crt"));
  EXPECT_EQ(in_cluster_config(dir.path().string()).default_namespace, "default");
  std::filesystem::remove(dir.file("token"));
  EXPECT_NE(input_error([&] { in_cluster_config(dir.path().string()); }).find(dir.file("token")),
            std::string::npos);
}

TEST(Kubeconfig, InClusterNeedsTheServiceEnvironment) {
  const ScopedEnv host("KUBERNETES_SERVICE_HOST", std::nullopt);
  const auto e = input_error([] { in_cluster_config(fixture_file("sa")); });
  EXPECT_NE(e.find("KUBERNETES_SERVICE_HOST"), std::string::npos) << e;
}

TEST(Kubeconfig, LoadClusterConfigOrder) {
  const test::TempDir home;
  const ScopedEnv home_env("HOME", home.path().string());
  const ScopedEnv host("KUBERNETES_SERVICE_HOST", std::nullopt);
  const ScopedEnv kubeconfig_env("KUBECONFIG",
                                 fixture_file("files.yaml") + ":" + fixture_file("embedded.yaml"));
  // The flag wins over $KUBECONFIG; $KUBECONFIG's first file is used.
  EXPECT_EQ(load_cluster_config(fixture_file("embedded.yaml")).default_namespace, "default");
  EXPECT_EQ(load_cluster_config(std::nullopt).default_namespace, "team-a");
  {
    const ScopedEnv none("KUBECONFIG", std::nullopt);
    const auto e = input_error([] { load_cluster_config(std::nullopt); });
    EXPECT_NE(e.find("--kubeconfig"), std::string::npos) << e;
    // ~/.kube/config when nothing else is there.
    std::filesystem::create_directories(home.path() / ".kube");
    test::write_text((home.path() / ".kube/config").string(),
                     read_text(fixture_file("embedded.yaml")));
    EXPECT_EQ(load_cluster_config(std::nullopt).server, "https://127.0.0.1:6443");
  }
}

// A broken kubeconfig written to a temporary file; the error must point at `line`.
struct BadFile {
  test::TempDir dir;
  std::string path;
  explicit BadFile(const std::string& text) : path(dir.file("config")) {
    test::write_text(path, text);
  }
  void expect_error_at(int line, const std::string& words, const std::string& context = "") {
    const auto e = input_error([&] { load_kubeconfig(path, context); });
    const auto prefix = path + ":" + std::to_string(line) + ":";
    EXPECT_EQ(e.rfind(prefix, 0), 0u) << e;
    EXPECT_NE(e.find(words), std::string::npos) << e;
  }
};

const char* const kGoodTail = R"(clusters:
- name: c
  cluster:
    server: https://127.0.0.1:6443
users:
- name: u
  user:
    token: t
)";

TEST(Kubeconfig, MissingCurrentContext) {
  BadFile f(std::string("apiVersion: v1\n") + kGoodTail +
            "contexts:\n- name: x\n  context: {cluster: c, user: u}\n");
  f.expect_error_at(1, "no current-context");
}

TEST(Kubeconfig, UnknownContextAndUser) {
  BadFile f(std::string("current-context: x\n") + kGoodTail +  // lines 2-9
            "contexts:\n"                                      // 10
            "- name: x\n"                                      // 11
            "  context:\n"                                     // 12
            "    cluster: c\n"                                 // 13
            "    user: nobody\n");                             // 14
  f.expect_error_at(14, "user 'nobody', which is not in the file (users: u)");
  f.expect_error_at(10, "context 'y' is not in the file (contexts: x)", "y");
}

TEST(Kubeconfig, BadBase64) {
  BadFile f(
      "current-context: x\n"
      "clusters:\n"
      "- name: c\n"
      "  cluster:\n"
      "    server: https://127.0.0.1:6443\n"
      "    certificate-authority-data: bm90IGJhc2U2NA=!\n"  // 6
      "contexts:\n"
      "- name: x\n"
      "  context: {cluster: c}\n");
  f.expect_error_at(6, "certificate-authority-data is not valid base64");
}

TEST(Kubeconfig, Base64ThatIsNotPem) {
  BadFile f(
      "current-context: x\n"
      "clusters:\n"
      "- name: c\n"
      "  cluster:\n"
      "    server: https://127.0.0.1:6443\n"
      "    certificate-authority-data: aGVsbG8=\n"  // "hello"
      "contexts:\n"
      "- name: x\n"
      "  context: {cluster: c}\n");
  f.expect_error_at(6, "holds no PEM certificate");
}

TEST(Kubeconfig, YamlSyntaxError) {
  BadFile f(
      "current-context: x\n"
      "clusters:\n"
      "- name: c\n"
      "  cluster: {server: https://127.0.0.1:6443\n"
      "contexts: []\n");
  const auto e = input_error([&] { load_kubeconfig(f.path); });
  EXPECT_EQ(e.rfind(f.path + ":", 0), 0u) << e;
  const auto rest = e.substr(f.path.size() + 1);
  EXPECT_TRUE(!rest.empty() && std::isdigit(static_cast<unsigned char>(rest[0])) &&
              rest.find(':') != std::string::npos)
      << e;
}

TEST(Kubeconfig, NonScalarWhereAScalarIsExpected) {
  BadFile f(
      "current-context: x\n"
      "clusters:\n"
      "- name: c\n"
      "  cluster:\n"
      "    server: [https://a, https://b]\n"  // 5
      "contexts:\n"
      "- name: x\n"
      "  context: {cluster: c}\n");
  f.expect_error_at(5, "server must be a single value");
}

TEST(Kubeconfig, RefusesPlainHttpAndSkippedVerification) {
  BadFile http(
      "current-context: x\n"
      "clusters:\n"
      "- name: c\n"
      "  cluster:\n"
      "    server: http://127.0.0.1:8080\n"  // 5
      "contexts:\n"
      "- name: x\n"
      "  context: {cluster: c}\n");
  http.expect_error_at(5, "not an https:// address");
  BadFile insecure(
      "current-context: x\n"
      "clusters:\n"
      "- name: c\n"
      "  cluster:\n"
      "    server: https://127.0.0.1:6443\n"
      "    insecure-skip-tls-verify: true\n"  // 6
      "contexts:\n"
      "- name: x\n"
      "  context: {cluster: c}\n");
  insecure.expect_error_at(6, "insecure-skip-tls-verify is not supported");
}

// A kubeconfig up to its cluster's server (5 lines), then its context and user up to the user's
// keys (6 lines): a test adds a cluster key between them, or user keys after.
const char* const kCluster =
    "current-context: x\n"
    "clusters:\n"
    "- name: c\n"
    "  cluster:\n"
    "    server: https://127.0.0.1:6443\n";
const char* const kUser =
    "contexts:\n"
    "- name: x\n"
    "  context: {cluster: c, user: u}\n"
    "users:\n"
    "- name: u\n"
    "  user:\n";

TEST(Kubeconfig, CredentialsThatCannotWork) {
  const std::string head = std::string(kCluster) + kUser;
  BadFile no_key(head + "    client-certificate: " + fixture_file("certs/client.crt") + "\n");
  no_key.expect_error_at(12, "has a client certificate but no client key");
  BadFile missing(head + "    tokenFile: no-such-token\n");  // 12
  missing.expect_error_at(12, "no-such-token' cannot be opened: No such file or directory");
  BadFile exec(head +
               "    exec:\n"  // 12
               "      command: aws\n");
  exec.expect_error_at(12, "gets its credentials from exec");
}

// /dev/zero as a certificate or token file ran the loader to bad_alloc (issue 30); a FIFO
// without a writer blocked it; each is refused at once, at the key that names it.
TEST(Kubeconfig, FilesItNamesAreRegularFilesOfBoundedSize) {
  const std::string head = kCluster;
  const std::string tail = kUser;
  BadFile ca(head + "    certificate-authority: /dev/zero\n" + tail + "    token: t\n");
  ca.expect_error_at(6,
                     "certificate-authority '/dev/zero' is a character device, not a regular "
                     "file");
  BadFile token(head + tail + "    tokenFile: /dev/zero\n");
  token.expect_error_at(12, "tokenFile '/dev/zero' is a character device, not a regular file");
  const test::TempDir dir;
  const std::string fifo = dir.file("token");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  BadFile blocked(head + tail + "    tokenFile: " + fifo + "\n");
  blocked.expect_error_at(12, "is a FIFO, not a regular file");
  const std::string big = dir.file("big.crt");
  test::write_text(big, std::string((16 << 20) + 1, 'x'));
  BadFile large(head + "    certificate-authority: " + big + "\n" + tail + "    token: t\n");
  large.expect_error_at(6, "big.crt' is larger than 16 MiB (the limit)");
}

}  // namespace
}  // namespace gpuorch::k8s
