// Names put into API paths: Kubernetes' DNS-1123 rules, and one RFC 3986 segment per name, so a
// name from a request (`gpuorch extender`'s bind) can never address another resource (issue 30).
#include "gpuorch/k8s/api/api_path.hpp"

#include <gtest/gtest.h>

#include <string>

#include "gpuorch/base/printable.hpp"

namespace gpuorch::k8s {
namespace {

TEST(ApiPath, Dns1123Rules) {
  for (const char* good : {"a", "pod-1", "0", "a0-b1", "default", "kube-system"}) {
    EXPECT_TRUE(is_dns1123_label(good)) << good;
    EXPECT_TRUE(is_dns1123_subdomain(good)) << good;
  }
  for (const char* good : {"pod.v1", "a.b.c", "node-0.example.com"}) {
    EXPECT_FALSE(is_dns1123_label(good)) << good;
    EXPECT_TRUE(is_dns1123_subdomain(good)) << good;
  }
  for (const char* bad : {"", "-a", "a-", "A", "a_b", "a/b", "a?b", "..", ".", "a..b", ".a", "a.",
                          "pod\r\n1", "pod 1", "a%2Fb", "\xc3\xa9", "pod#x"}) {
    EXPECT_FALSE(is_dns1123_label(bad)) << bad;
    EXPECT_FALSE(is_dns1123_subdomain(bad)) << bad;
  }
  EXPECT_TRUE(is_dns1123_label(std::string(63, 'a')));
  EXPECT_FALSE(is_dns1123_label(std::string(64, 'a')));
  std::string long_name(253, 'a');
  for (std::size_t i = 60; i < 253; i += 61) long_name[i] = '.';
  EXPECT_TRUE(is_dns1123_subdomain(long_name));
  EXPECT_FALSE(is_dns1123_subdomain(long_name + "a"));
  // apimachinery's IsDNS1123Subdomain bounds only the whole (pod names of 64+ characters exist).
  EXPECT_TRUE(is_dns1123_subdomain(std::string(200, 'a')));
}

TEST(ApiPath, PercentEncodesEverySegmentByte) {
  EXPECT_EQ(percent_encode("pod-1.a_b~"), "pod-1.a_b~");
  EXPECT_EQ(percent_encode("a/b?dryRun=All#x"), "a%2Fb%3FdryRun%3DAll%23x");
  EXPECT_EQ(percent_encode(".."), "%2E%2E");
  EXPECT_EQ(percent_encode("."), "%2E");
  EXPECT_EQ(percent_encode("a b%\r\n\xff"), "a%20b%25%0D%0A%FF");
}

TEST(ApiPath, PathsOfCheckedNames) {
  EXPECT_EQ(pod_path("default", "pod-1"), "/api/v1/namespaces/default/pods/pod-1");
  EXPECT_EQ(pod_path("default", "pod.v1", "binding"),
            "/api/v1/namespaces/default/pods/pod.v1/binding");
  EXPECT_EQ(namespaced_path("/apis/coordination.k8s.io/v1", "kube-system", "leases", "gpuorch"),
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/gpuorch");
  EXPECT_EQ(namespaced_path("/apis/coordination.k8s.io/v1", "kube-system", "leases"),
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases");
  EXPECT_EQ(node_path("node-0"), "/api/v1/nodes/node-0");
}

// What issue 30 sent through the extender's bind: each made gpuorch address another path.
TEST(ApiPath, RefusesNamesThatWouldAddressAnotherResource) {
  const struct {
    const char* ns;
    const char* name;
  } cases[] = {{"default", "../../nodes/node-0"},
               {"default", "pod-1?dryRun=All"},
               {"default", "pod-1/binding"},
               {"..", "pod-1"},
               {"default/pods/x", "pod-1"},
               {"default", "pod\r\nforged line"},
               {"default", ""},
               {"", "pod-1"},
               {"a.b", "pod-1"}};  // a namespace is a label: no dots
  for (const auto& c : cases) {
    EXPECT_THROW((void)pod_path(c.ns, c.name, "binding"), InvalidName) << c.ns << " " << c.name;
  }
  try {
    (void)pod_path("default", "pod\r\nforged line");
    FAIL();
  } catch (const InvalidName& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    EXPECT_EQ(what.find('\r'), std::string::npos) << what;
    EXPECT_NE(what.find("pod name 'pod\\r\\nforged line' is not a valid DNS-1123 subdomain"),
              std::string::npos)
        << what;
  }
  EXPECT_THROW((void)node_path("node/0"), InvalidName);
}

TEST(Printable, EscapesControlCharactersAndCuts) {
  EXPECT_EQ(base::printable("pod-1"), "pod-1");
  EXPECT_EQ(base::printable("a\r\nb\tc\\d\x1b[2J\x7f"), "a\\r\\nb\\tc\\\\d\\x1b[2J\\x7f");
  EXPECT_EQ(base::printable("x\xc2\x9by"), "x\\xc2\\x9by");  // C1 CSI as UTF-8
  EXPECT_EQ(base::printable("h\xc3\xa9"), "h\xc3\xa9");      // other UTF-8 kept
  EXPECT_EQ(base::printable(std::string(1000, 'a'), 10), "aaaaaaaaaa... (990 more bytes)");
  EXPECT_EQ(base::quoted_printable("a\nb"), "'a\\nb'");
}

}  // namespace
}  // namespace gpuorch::k8s
